//! `cobsfile recover`: a new, valid file holding every intact block of a damaged one.

use std::fs::{self, File};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use super::verify::{not_a_cobsfile, report_json, write_text};
use super::{input, is_stdio, Failure, Outcome, ReadOptions};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    read: ReadOptions,
    /// The damaged cobsfile, or `-` for stdin (stdin and other inputs that cannot be mapped,
    /// such as pipes, are read into memory).
    #[arg(value_name = "IN")]
    input: PathBuf,
    /// Where to write the recovered file (replaced only once it is complete).
    #[arg(short, long, value_name = "OUT")]
    output: PathBuf,
}

pub fn run(args: Args) -> Result<Outcome, Failure> {
    let name = input::name(&args.input);
    let out_name = args.output.display().to_string();
    if is_stdio(&args.output) {
        return Err(Failure("recover writes to a file: give -o a path".into()));
    }
    if same_file(&args.input, &args.output) {
        return Err(Failure::at(
            &out_name,
            "is the input; recover into another file",
        ));
    }
    let options = args.read.builder()?;
    let read;
    let mapped;
    let bytes = match input::open(&args.input)? {
        input::Input::Stream(mut stream) => {
            let mut buffer = Vec::new();
            stream
                .read_to_end(&mut buffer)
                .map_err(|e| Failure::at(&name, e))?;
            read = buffer;
            &read[..]
        }
        input::Input::Mapped(file) => {
            mapped = file;
            mapped.bytes()
        }
    };

    // Put in the output's place only when complete, so a failed recovery never leaves a
    // partial file under the output's name (nor, dropped on any error, anywhere else).
    let pending = Pending::create(&args.output)
        .map_err(|(temp, e)| Failure::at(&temp.display().to_string(), e))?;
    let file = &pending.file;
    let recovered = cobsfile::recover(bytes, &options, BufWriter::with_capacity(1 << 20, file))
        .and_then(|recovery| Ok((recovery, file.sync_all()?)));
    let recovery = match recovered {
        Ok((recovery, ())) => recovery,
        Err(cobsfile::Error::Io(e)) => return Err(Failure::at(&out_name, e)),
        Err(other) => return Err(Failure::at(&name, other)),
    };
    not_a_cobsfile(&name, &recovery.report)?;
    if let Some(newer) = recovery.newer_version {
        // Nothing before the newer header: there is nothing to recover with this version.
        if recovery.report.blocks.total() == 0 && recovery.report.damaged.is_empty() {
            return Err(Failure::at(
                &name,
                cobsfile::Error::UnsupportedVersion {
                    offset: newer.offset,
                    version: newer.version,
                    supported: cobsfile::FORMAT_VERSION,
                },
            ));
        }
    }
    pending
        .persist(&args.output)
        .map_err(|e| Failure::at(&out_name, e))?;

    let report = &recovery.report;
    let mut out = io::stdout().lock();
    let written = if args.json {
        let mut value = report_json(&name, report);
        value["output"] = out_name.clone().into();
        value["blocks_written"] = recovery.blocks.into();
        value["bytes_written"] = recovery.written.into();
        writeln!(out, "{value}")
    } else {
        write_text(&mut out, &name, report, "lost").and_then(|()| {
            writeln!(
                out,
                "{out_name}: wrote {} blocks, {} records, {} bytes; finished",
                recovery.blocks, report.records, recovery.written
            )
        })
    };
    super::quiet_broken_pipe(written)?;
    let unreadable = report.damaged.iter().filter(|d| !d.is_damage()).count();
    if unreadable > 0 {
        eprintln!(
            "cobsfile: {name}: {unreadable} range(s) could not be checked (a dictionary this \
             reader was not given, or a codec it does not know) and are not in {out_name}; \
             recover again with --dict to keep them"
        );
    }
    if let Some(newer) = recovery.newer_version {
        eprintln!(
            "cobsfile: {name}: stopped at offset {}: a header of format version {} (this reader \
             reads up to {}); what follows it is not in {out_name}",
            newer.offset,
            newer.version,
            cobsfile::FORMAT_VERSION
        );
        return Ok(Outcome::Damaged);
    }
    Ok(Outcome::of(report))
}

/// Whether `a` and `b` name the same existing file.
fn same_file(a: &Path, b: &Path) -> bool {
    match (fs::canonicalize(a), fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// The recovered file while it is written, put in the output's place once complete.
///
/// On Linux it has no name until then (`O_TMPFILE`), so nothing is left behind however the
/// process ends, killed included. Elsewhere, or where the file system has no unnamed files,
/// it is written under a temporary name next to the output, removed when it is dropped
/// unplaced (an error, a panic); only a kill then leaves it.
struct Pending {
    file: File,
    /// The temporary name, next to the output.
    temp: PathBuf,
    /// Whether the file is at `temp` now, to be removed unless it is put in place.
    named: bool,
}

impl Pending {
    /// Creates the file for `output`; on failure, the path to name in the message.
    fn create(output: &Path) -> Result<Pending, (PathBuf, io::Error)> {
        let temp = temp_path(output);
        #[cfg(target_os = "linux")]
        if let Some(file) = unnamed::create(&temp) {
            return Ok(Pending {
                file,
                temp,
                named: false,
            });
        }
        match File::create(&temp) {
            Ok(file) => Ok(Pending {
                file,
                temp,
                named: true,
            }),
            Err(e) => Err((temp, e)),
        }
    }

    /// Puts the file in `output`'s place, replacing what was there.
    fn persist(mut self, output: &Path) -> io::Result<()> {
        if !self.named {
            // A file left at this name by an earlier process of the same id, as `File::create`
            // would replace it.
            let _ = fs::remove_file(&self.temp);
            #[cfg(target_os = "linux")]
            unnamed::name(&self.file, &self.temp)?;
            self.named = true;
        }
        fs::rename(&self.temp, output)?;
        self.named = false;
        Ok(())
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if self.named {
            let _ = fs::remove_file(&self.temp);
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

    /// A file without a name in the directory `temp` would be in, if the file system makes
    /// one and `/proc` is there to name it by later (else the caller names it from the start).
    pub fn create(temp: &Path) -> Option<File> {
        if !Path::new("/proc/self/fd").is_dir() {
            return None;
        }
        let dir = match temp.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        OpenOptions::new()
            .write(true)
            .mode(0o666)
            .custom_flags(libc::O_TMPFILE)
            .open(dir)
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

/// A temporary name in the output's directory.
fn temp_path(output: &Path) -> PathBuf {
    let file_name = output
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    output.with_file_name(format!(".{file_name}.recover-{}", std::process::id()))
}
