//! Files the tool writes: complete under their name, or not there at all.
//!
//! Every command that writes a file (`pack -o`, `recover -o`, `dict train -o`) writes it
//! through an [`Output`]: the file is refused when it is one of the command's inputs (the
//! same file, through any name or link) or already exists without `--force`, is written
//! without a name or under a temporary one beside the final name, synced, and only then put
//! in the final name's place. A failed or killed command leaves what was there before.

use std::fs::{self, File, Metadata};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use cobsfile::fs::NewFile;

use super::{is_stdio, Failure};

/// A file being written, put in its place by [`persist`](Output::persist): a
/// [`NewFile`], which has no name until then on Linux (`O_TMPFILE`), so nothing is left behind
/// however the process ends, killed included, and elsewhere a temporary name next to the
/// output, removed when it is dropped unplaced.
pub struct Output {
    file: Target,
    /// The final name, as given.
    path: PathBuf,
}

enum Target {
    New(NewFile),
    /// Written in place: the output is not a regular file (`/dev/null`, a FIFO), which a
    /// rename would replace rather than write to.
    Direct(File),
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
                    file: Target::Direct(file),
                    path: path.to_owned(),
                });
            }
            Ok(_) if !force => return Err(exists(&name)),
            _ => {}
        }
        // The error names the output, never a temporary file the user did not ask for.
        let file = NewFile::create(path, force).map_err(|e| Failure::at(&name, e))?;
        Ok(Output {
            file: Target::New(file),
            path: path.to_owned(),
        })
    }

    /// A writer of the file, which may go to another thread.
    pub fn writer(&self) -> Result<Box<dyn Write + Send>, Failure> {
        Ok(match &self.file {
            Target::New(file) => Box::new(file.writer()),
            Target::Direct(file) => {
                Box::new(file.try_clone().map_err(|e| Failure::at(&self.name(), e))?)
            }
        })
    }

    /// The final name, for messages.
    pub fn name(&self) -> String {
        self.path.display().to_string()
    }

    /// Syncs the file and puts it in the output's place (replacing what was there only with
    /// `--force`), then syncs the directory so that the new name survives a crash too.
    pub fn persist(self) -> Result<(), Failure> {
        let name = self.name();
        match self.file {
            Target::Direct(_) => Ok(()),
            Target::New(file) => file.persist().map_err(|e| match e.kind() {
                // Created meanwhile by someone else: still not overwritten without --force.
                io::ErrorKind::AlreadyExists => exists(&name),
                _ => Failure::at(&name, e),
            }),
        }
    }
}

fn exists(name: &str) -> Failure {
    Failure::usage(format!(
        "{name}: already exists; not overwritten (use -f/--force to replace it)"
    ))
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
