//! Files the tool writes: complete under their name, or not there at all.
//!
//! Every command that writes a file (`pack -o`, `recover -o`, `dict train -o`) writes it
//! through an [`Output`]: the file is refused when it is one of the command's inputs (the
//! same file, through any name or link) or already exists without `--force`, is written
//! without a name or under a temporary one beside the final name, synced, and only then put
//! in the final name's place. A failed or killed command leaves what was there before.

use std::fs::{self, File, Metadata};
use std::io;
use std::path::{Path, PathBuf};

use super::{is_stdio, Failure};

/// A file being written, put in its place by [`persist`](Output::persist).
///
/// On Linux it has no name until then (`O_TMPFILE`), so nothing is left behind however the
/// process ends, killed included. Elsewhere, or where the file system has no unnamed files,
/// it is written under a temporary name next to the output, removed when it is dropped
/// unplaced (an error, a panic); only a kill then leaves it.
pub struct Output {
    file: File,
    /// The final name, as given.
    path: PathBuf,
    /// The temporary name, next to the output.
    temp: PathBuf,
    /// Whether the file is at `temp` now, to be removed unless it is put in place.
    named: bool,
    /// Written in place: the output is not a regular file (`/dev/null`, a FIFO), which a
    /// rename would replace rather than write to.
    direct: bool,
}

impl Output {
    /// Checks that `path` may be written (not one of `inputs`, the paths the command reads, `-`
    /// for standard input; not an existing file unless `force`) and creates the file that
    /// will take its place.
    pub fn create(path: &Path, force: bool, inputs: &[&Path]) -> Result<Output, Failure> {
        let name = path.display().to_string();
        refuse_inputs(path, inputs)?;
        match fs::metadata(path) {
            Ok(meta) if meta.is_dir() => return Err(Failure::at(&name, "is a directory")),
            Ok(meta) if !meta.is_file() => {
                let file = fs::OpenOptions::new()
                    .write(true)
                    .open(path)
                    .map_err(|e| Failure::at(&name, e))?;
                return Ok(Output {
                    file,
                    path: path.to_owned(),
                    temp: PathBuf::new(),
                    named: false,
                    direct: true,
                });
            }
            Ok(_) if !force => {
                return Err(Failure::usage(format!(
                    "{name}: already exists; not overwritten (use -f/--force to replace it)"
                )))
            }
            _ => {}
        }
        let temp = temp_path(path);
        #[cfg(target_os = "linux")]
        if let Some(file) = unnamed::create(&temp) {
            return Ok(Output {
                file,
                path: path.to_owned(),
                temp,
                named: false,
                direct: false,
            });
        }
        // The error names the output, never the temporary file the user did not ask for.
        let file = File::create(&temp).map_err(|e| Failure::at(&name, e))?;
        Ok(Output {
            file,
            path: path.to_owned(),
            temp,
            named: true,
            direct: false,
        })
    }

    /// The file to write to.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// The final name, for messages.
    pub fn name(&self) -> String {
        self.path.display().to_string()
    }

    /// Syncs the file and puts it in the output's place, replacing what was there, then syncs
    /// the directory so that the new name survives a crash too.
    pub fn persist(mut self) -> Result<(), Failure> {
        let name = self.name();
        let fail = |e: io::Error| Failure::at(&name, e);
        if self.direct {
            return Ok(());
        }
        self.file.sync_all().map_err(fail)?;
        if !self.named {
            // A file left at this name by an earlier process of the same id, as `File::create`
            // would replace it.
            let _ = fs::remove_file(&self.temp);
            #[cfg(target_os = "linux")]
            unnamed::name(&self.file, &self.temp).map_err(fail)?;
            self.named = true;
        }
        fs::rename(&self.temp, &self.path).map_err(fail)?;
        self.named = false;
        if let Ok(dir) = File::open(directory(&self.path)) {
            // Not every file system can sync a directory; the file itself is synced already.
            let _ = dir.sync_all();
        }
        Ok(())
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        if self.named {
            let _ = fs::remove_file(&self.temp);
        }
    }
}

/// Refuses an output `path` that is one of `inputs`: the same file by device and inode (so
/// through hard and symbolic links too), or standard input redirected from it.
pub fn refuse_inputs(path: &Path, inputs: &[&Path]) -> Result<(), Failure> {
    let Ok(out) = fs::metadata(path) else {
        return Ok(());
    };
    match inputs.iter().find(|input| is_file(input, &out)) {
        Some(input) => {
            let what = if is_stdio(input) {
                "standard input"
            } else {
                "an input"
            };
            Err(Failure::usage(format!(
                "{}: is {what} of this command; write the output to another file",
                path.display()
            )))
        }
        None => Ok(()),
    }
}

/// Refuses to write to standard output when it is one of `inputs` (`cobsfile pack f > f`,
/// where the shell has already emptied `f`).
pub fn refuse_stdout_input(inputs: &[&Path]) -> Result<(), Failure> {
    let Some(out) = stdout_metadata().filter(Metadata::is_file) else {
        return Ok(());
    };
    match inputs.iter().find(|input| is_file(input, &out)) {
        Some(input) => Err(Failure::usage(format!(
            "{}: is also standard output, which the shell emptied before this command ran; \
             write the output to another file",
            super::input::name(input)
        ))),
        None => Ok(()),
    }
}

/// Whether the input `input` (`-`: standard input) is the file `out` describes.
fn is_file(input: &Path, out: &Metadata) -> bool {
    let meta = if is_stdio(input) {
        stdin_metadata()
    } else {
        fs::metadata(input).ok()
    };
    meta.is_some_and(|m| same_file(&m, out))
}

#[cfg(unix)]
fn same_file(a: &Metadata, b: &Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    a.dev() == b.dev() && a.ino() == b.ino()
}

#[cfg(not(unix))]
fn same_file(_: &Metadata, _: &Metadata) -> bool {
    false
}

/// What standard input (`fd` 0) or output (1) is, when it is open.
#[cfg(unix)]
fn stdio_metadata(fd: impl std::os::fd::AsFd) -> Option<Metadata> {
    let owned = fd.as_fd().try_clone_to_owned().ok()?;
    File::from(owned).metadata().ok()
}

fn stdin_metadata() -> Option<Metadata> {
    #[cfg(unix)]
    return stdio_metadata(io::stdin());
    #[cfg(not(unix))]
    return None;
}

fn stdout_metadata() -> Option<Metadata> {
    #[cfg(unix)]
    return stdio_metadata(io::stdout());
    #[cfg(not(unix))]
    return None;
}

/// The directory `path` is in.
fn directory(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// A temporary name in the output's directory.
fn temp_path(output: &Path) -> PathBuf {
    let file_name = output
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    output.with_file_name(format!(".{file_name}.cobsfile-{}", std::process::id()))
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

    /// A file without a name in the directory `temp` would be in, if the file system makes
    /// one and `/proc` is there to name it by later (else the caller names it from the start).
    pub fn create(temp: &Path) -> Option<File> {
        if !Path::new("/proc/self/fd").is_dir() {
            return None;
        }
        OpenOptions::new()
            .write(true)
            .mode(0o666)
            .custom_flags(libc::O_TMPFILE)
            .open(super::directory(temp))
            .ok()
    }

    /// Gives `file`, made by [`create`], the name `temp`.
    pub fn name(file: &File, temp: &Path) -> io::Result<()> {
        let from = CString::new(format!("/proc/self/fd/{}", file.as_raw_fd()))?;
        let to = CString::new(temp.as_os_str().as_bytes())?;
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
