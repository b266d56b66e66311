//! The file operations this crate performs to write files, as a seam for testing what
//! survives a power cut; and [`NewFile`], a file that takes its name only once it is whole.
//!
//! An [`Appender`](crate::Appender) needs few operations of its file: open (creating it), the
//! length, the whole content once at opening, an append in one `write(2)`, a cut (`set_len`),
//! `fdatasync`, `fsync` of the directory that holds a file it created, and `flock` (try
//! exclusive, shared). A [`NewFile`] (a recovered file, a packed one, one replacing another)
//! needs a file without a name, appends, `fsync`, a name given at the end (`linkat`, and
//! `rename` over the old file when it replaces one) and `fsync` of the directory.
//! [`FileSystem`], [`Handle`] and [`NewHandle`] are those operations; [`StdFs`] is the real
//! file system (what [`AppenderBuilder::open`](crate::AppenderBuilder::open) and
//! [`NewFile::create`] use) and [`SimFs`] a simulated one for tests, which can cut the power: it
//! keeps what a real disk may lose (writes and names since the last sync) apart from what it may
//! not, and can fail writes and syncs.

use std::fmt::Debug;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, IoSlice, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::error::Result;
use crate::mapped::{Lock, MappedFile};

mod sim;

pub use sim::{Faults, SimFs};

/// Opens files for appending, and creates new ones.
pub trait FileSystem: Debug {
    /// Opens the file at `path` for reading and appending (`O_APPEND`), creating it if missing.
    fn open_append(&self, path: &Path) -> io::Result<Arc<dyn Handle>>;
    /// Creates a file to be given the name `path` once complete ([`NewHandle::place`]): until
    /// then it has no name, or a temporary one next to `path` that it loses when dropped.
    fn create_new(&self, path: &Path) -> io::Result<Arc<dyn NewHandle>>;
    /// Opens the file at `path` for reading and appending, failing with
    /// [`io::ErrorKind::NotFound`] if it is missing: a segment that retention removed is not
    /// made again.
    fn open_existing(&self, path: &Path) -> io::Result<Arc<dyn Handle>>;
    /// The names of the files in the directory `dir` (`readdir`), in no particular order.
    fn list(&self, dir: &Path) -> io::Result<Vec<PathBuf>>;
    /// Removes the name `path` (`unlink`); durable once its directory is synced.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// `fsync` of the directory `dir`: the names in it are durable once it returns Ok.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
}

/// A file [`FileSystem::create_new`] made, written before it takes its name.
pub trait NewHandle: Debug + Send + Sync {
    /// Writes `buf` at the end of the file; returns how many bytes were written, which may be
    /// fewer.
    fn append(&self, buf: &[u8]) -> io::Result<usize>;
    /// Writes all of `buf` at the end of the file, in as many writes as it takes.
    fn append_all(&self, mut buf: &[u8]) -> io::Result<()> {
        while !buf.is_empty() {
            match self.append(buf) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => buf = &buf[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
    /// `fsync`: the file's data and length are durable once it returns Ok.
    fn sync(&self) -> io::Result<()>;
    /// Gives the file its name, in one step that a crash either made or did not: replacing
    /// the file of that name (`rename`) if `replace`, else failing with
    /// [`io::ErrorKind::AlreadyExists`] if the name is taken (`linkat`).
    fn place(&self, replace: bool) -> io::Result<()>;
    /// `fsync` of the directory the file is placed in: its name is durable once it returns Ok.
    fn sync_entry(&self) -> io::Result<()>;
}

/// An open file, shared by the appending thread and the one that syncs. Every method takes
/// `&self`, as `&File` does.
pub trait Handle: Debug + Send + Sync {
    /// The file's length now.
    fn len(&self) -> io::Result<u64>;
    /// Whether the file is empty now.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
    /// The file's bytes, read once at opening (under the caller's lock).
    fn contents(&self) -> Result<Contents>;
    /// Writes `bufs` at the end of the file in one `write(2)` (`O_APPEND`); returns how many
    /// bytes were written, which may be fewer.
    fn append(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize>;
    /// Writes all of `buf` at the end of the file, in as many writes as it takes (each a
    /// `write(2)` of what is left; another writer's bytes may come between them).
    fn append_all(&self, mut buf: &[u8]) -> io::Result<()> {
        while !buf.is_empty() {
            match self.append(&[IoSlice::new(buf)]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => buf = &buf[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
    /// Cuts (or extends) the file to `len` bytes.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// `fdatasync`: the file's data and length are durable once it returns Ok.
    fn sync_data(&self) -> io::Result<()>;
    /// `fsync` of the directory holding the file: its name is durable once it returns Ok (a
    /// file just created may otherwise vanish in a power cut, synced data and all).
    fn sync_entry(&self) -> io::Result<()>;
    /// Takes the exclusive advisory lock if no one holds a lock; false if someone does.
    fn try_lock(&self) -> io::Result<bool>;
    /// Takes (or turns the exclusive lock into) the shared advisory lock, waiting if need be.
    fn lock_shared(&self) -> io::Result<()>;
}

/// A file's bytes, mapped or read.
#[derive(Debug)]
pub enum Contents {
    /// Mapped (the real file system).
    Mapped(MappedFile),
    /// Read into memory.
    Read(Vec<u8>),
}

impl Contents {
    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        match self {
            Contents::Mapped(map) => map.bytes(),
            Contents::Read(bytes) => bytes,
        }
    }
}

/// The real file system: `std::fs`, `flock`, `fdatasync`.
#[derive(Debug, Clone, Copy, Default)]
pub struct StdFs;

impl FileSystem for StdFs {
    fn open_append(&self, path: &Path) -> io::Result<Arc<dyn Handle>> {
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(path)?;
        let dir = entry_directory(path);
        Ok(Arc::new(StdHandle { file, dir }))
    }

    fn create_new(&self, path: &Path) -> io::Result<Arc<dyn NewHandle>> {
        let temp = temp_path(path);
        #[cfg(target_os = "linux")]
        if let Some(file) = unnamed::create(directory(path)) {
            return Ok(Arc::new(StdNew {
                file,
                path: path.to_path_buf(),
                temp,
                named: Mutex::new(false),
            }));
        }
        let file = File::create(&temp)?;
        Ok(Arc::new(StdNew {
            file,
            path: path.to_path_buf(),
            temp,
            named: Mutex::new(true),
        }))
    }

    fn open_existing(&self, path: &Path) -> io::Result<Arc<dyn Handle>> {
        let file = OpenOptions::new().read(true).append(true).open(path)?;
        let dir = entry_directory(path);
        Ok(Arc::new(StdHandle { file, dir }))
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        std::fs::read_dir(dir)?
            .map(|entry| entry.map(|e| e.path()))
            .collect()
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        sync_dir(dir)
    }
}

/// The directory `path` is in.
fn directory(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// The directory whose entry names the file at `path`, which exists: the parent of the path
/// with symbolic links resolved. A log created through a link into another directory has its
/// name there, and syncing the link's directory would not keep it through a power cut.
fn entry_directory(path: &Path) -> PathBuf {
    match std::fs::canonicalize(path) {
        Ok(real) => directory(&real).to_path_buf(),
        Err(_) => directory(path).to_path_buf(),
    }
}

/// A temporary name next to `path` for a file that will take its place.
fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.cobsfile-{}", std::process::id()))
}

/// `fsync` of the directory `dir`, where the system can sync one.
fn sync_dir(dir: &Path) -> io::Result<()> {
    // Only Unix syncs a directory through an open handle on it.
    #[cfg(unix)]
    match File::open(dir)?.sync_all() {
        // A file system that cannot sync a directory (EINVAL) keeps its names some other way.
        Err(e) if e.kind() == io::ErrorKind::InvalidInput => {}
        other => other?,
    }
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// A file opened by [`StdFs`].
#[derive(Debug)]
struct StdHandle {
    file: File,
    dir: PathBuf,
}

impl Handle for StdHandle {
    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn contents(&self) -> Result<Contents> {
        // Mapped under the caller's own lock: a shared lock taken through the same open file
        // would replace an exclusive one.
        Ok(Contents::Mapped(MappedFile::map(
            self.file.try_clone()?,
            Lock::Held,
        )?))
    }

    fn append(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        (&self.file).write_vectored(bufs)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn sync_entry(&self) -> io::Result<()> {
        sync_dir(&self.dir)
    }

    fn try_lock(&self) -> io::Result<bool> {
        match self.file.try_lock() {
            Ok(()) => Ok(true),
            Err(TryLockError::WouldBlock) => Ok(false),
            Err(TryLockError::Error(e)) => Err(e),
        }
    }

    fn lock_shared(&self) -> io::Result<()> {
        self.file.lock_shared()
    }
}

/// A file made by [`StdFs::create_new`].
#[derive(Debug)]
struct StdNew {
    file: File,
    /// The name it takes once complete.
    path: PathBuf,
    /// Its temporary name.
    temp: PathBuf,
    /// Whether it is at `temp` now, to be removed unless it is placed.
    named: Mutex<bool>,
}

impl StdNew {
    fn named(&self) -> std::sync::MutexGuard<'_, bool> {
        self.named.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl NewHandle for StdNew {
    fn append(&self, buf: &[u8]) -> io::Result<usize> {
        (&self.file).write(buf)
    }

    fn sync(&self) -> io::Result<()> {
        self.file.sync_all()
    }

    fn place(&self, replace: bool) -> io::Result<()> {
        let mut named = self.named();
        if !*named {
            #[cfg(target_os = "linux")]
            {
                if !replace {
                    // Linked straight to its name, which must be free: one step.
                    return unnamed::link(&self.file, &self.path);
                }
                // A file left at this name by an earlier process of the same id.
                let _ = std::fs::remove_file(&self.temp);
                unnamed::link(&self.file, &self.temp)?;
                *named = true;
            }
        }
        if replace {
            std::fs::rename(&self.temp, &self.path)?;
        } else {
            // A second name, which must be free, then the temporary one removed.
            std::fs::hard_link(&self.temp, &self.path)?;
            let _ = std::fs::remove_file(&self.temp);
        }
        *named = false;
        Ok(())
    }

    fn sync_entry(&self) -> io::Result<()> {
        sync_dir(directory(&self.path))
    }
}

impl Drop for StdNew {
    fn drop(&mut self) {
        if *self.named() {
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}

/// Files without a name (Linux `O_TMPFILE`), named once complete.
#[cfg(target_os = "linux")]
mod unnamed {
    use std::ffi::CString;
    use std::fs::{File, OpenOptions};
    use std::io;
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::OpenOptionsExt;
    use std::path::Path;

    /// A file without a name in the directory `dir`, if the file system makes one and `/proc`
    /// is there to name it by later (else the caller names it from the start).
    pub fn create(dir: &Path) -> Option<File> {
        if !Path::new("/proc/self/fd").is_dir() {
            return None;
        }
        OpenOptions::new()
            .write(true)
            .mode(0o666)
            .custom_flags(libc::O_TMPFILE)
            .open(dir)
            .ok()
    }

    /// Gives `file`, made by [`create`], the name `path`, which must be free.
    pub fn link(file: &File, path: &Path) -> io::Result<()> {
        let from = CString::new(format!("/proc/self/fd/{}", file.as_raw_fd()))?;
        let to = CString::new(path.as_os_str().as_bytes())?;
        // SAFETY: both paths are valid C strings that outlive the call; linkat reads them
        // and touches no other memory of this process.
        let linked = unsafe {
            libc::linkat(
                libc::AT_FDCWD,
                from.as_ptr(),
                libc::AT_FDCWD,
                to.as_ptr(),
                libc::AT_SYMLINK_FOLLOW,
            )
        };
        if linked != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// A new file that takes its name only once it is whole: whatever stops the process (an
/// error, a kill, a power cut), the name holds either what it held before or the whole new
/// file, never a part of it.
///
/// Written without a name (Linux `O_TMPFILE`) or under a temporary one next to its name (left
/// behind only by a kill or a power cut), it is synced, given its name in one step (`linkat`,
/// or `rename` over the file it replaces), and its directory synced, by
/// [`persist`](Self::persist). Dropped before that, it leaves nothing.
///
/// ```
/// use std::io::Write;
/// # let dir = std::env::temp_dir().join(format!("cobsfile-newfile-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// let path = dir.join("recovered.cobs");
/// let mut file = cobsfile::fs::NewFile::create(&path, false)?;
/// file.write_all(b"every intact block")?;
/// file.persist()?;
/// assert_eq!(std::fs::read(&path)?, b"every intact block");
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct NewFile {
    handle: Arc<dyn NewHandle>,
    replace: bool,
}

impl NewFile {
    /// Creates the file that will take the name `path`: replacing the file there if
    /// `replace`, else [`persist`](Self::persist) fails if the name is taken by then.
    pub fn create(path: impl AsRef<Path>, replace: bool) -> io::Result<NewFile> {
        NewFile::create_in(&StdFs, path, replace)
    }

    /// As [`create`](Self::create), on `fs` (a simulated file system in tests).
    pub fn create_in(
        fs: &dyn FileSystem,
        path: impl AsRef<Path>,
        replace: bool,
    ) -> io::Result<NewFile> {
        Ok(NewFile {
            handle: fs.create_new(path.as_ref())?,
            replace,
        })
    }

    /// Another writer of the same file, which may outlive this borrow (for a writer thread);
    /// everything written through it must be written before [`persist`](Self::persist).
    pub fn writer(&self) -> NewFileWriter {
        NewFileWriter(Arc::clone(&self.handle))
    }

    /// Syncs the file, gives it its name, and syncs the directory: once it returns Ok, the
    /// whole file is durable under its name.
    pub fn persist(self) -> io::Result<()> {
        self.handle.sync()?;
        self.handle.place(self.replace)?;
        self.handle.sync_entry()
    }
}

impl Write for NewFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.handle.append(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A writer of a [`NewFile`] (see [`NewFile::writer`]).
#[derive(Debug, Clone)]
pub struct NewFileWriter(Arc<dyn NewHandle>);

impl Write for NewFileWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.append(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// A log created through a symbolic link into another directory is synced in the
    /// directory that holds its name, not the link's (where a power cut could take the name
    /// of records reported durable).
    #[test]
    fn the_directory_synced_is_the_one_that_holds_the_file() {
        let base = std::env::temp_dir().join(format!("cobsfile-entry-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let (links, real) = (base.join("links"), base.join("real"));
        std::fs::create_dir_all(&links).unwrap();
        std::fs::create_dir_all(&real).unwrap();
        let link = links.join("app.log");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(real.join("app.log"), &link).unwrap();
        let handle = StdFs.open_append(&link).unwrap();
        handle.sync_entry().unwrap();
        assert!(real.join("app.log").exists());
        assert_eq!(
            entry_directory(&link),
            std::fs::canonicalize(&real).unwrap()
        );
        // A plain path keeps its own directory.
        assert_eq!(
            entry_directory(&real.join("app.log")),
            std::fs::canonicalize(&real).unwrap()
        );
        std::fs::remove_dir_all(&base).unwrap();
    }
}
