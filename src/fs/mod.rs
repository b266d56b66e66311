//! The file operations an [`Appender`](crate::Appender) performs, as a seam for testing what
//! survives a power cut.
//!
//! An appender needs few operations of its file: open (creating it), the length, the whole
//! content once at opening, an append in one `write(2)`, a cut (`set_len`), `fdatasync`,
//! `fsync` of the directory that holds a file it created, and `flock` (try exclusive, shared).
//! [`FileSystem`] and [`Handle`] are those operations; [`StdFs`] is the real file system (what
//! [`AppenderBuilder::open`](crate::AppenderBuilder::open) uses) and [`SimFs`] a simulated one
//! for tests, which can cut the power: it keeps what a real disk may lose (writes since the last
//! sync) apart from what it may not, and can fail writes and syncs.
//!
//! This module is for testing: an application has no reason to use it.

use std::fmt::Debug;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, IoSlice, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::Result;
use crate::mapped::{Lock, MappedFile};

mod sim;

pub use sim::{Faults, SimFs};

/// Opens files for appending.
pub trait FileSystem: Debug {
    /// Opens the file at `path` for reading and appending (`O_APPEND`), creating it if missing.
    fn open_append(&self, path: &Path) -> io::Result<Arc<dyn Handle>>;
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
        let dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
            _ => PathBuf::from("."),
        };
        Ok(Arc::new(StdHandle { file, dir }))
    }
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
        // Only Unix syncs a directory through an open handle on it.
        #[cfg(unix)]
        File::open(&self.dir)?.sync_all()?;
        Ok(())
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
