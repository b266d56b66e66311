//! `cobsfile recover`: a new, valid file holding every intact block of a damaged one.

use std::fs::{self, File};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use super::verify::{not_a_cobsfile, outcome, report_json, write_text};
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

    // Written next to the output and renamed over it when complete, so a failed recovery
    // never leaves a partial file under the output's name.
    let temp = temp_path(&args.output);
    let file = File::create(&temp).map_err(|e| Failure::at(&temp.display().to_string(), e))?;
    let recovered = cobsfile::recover(bytes, &options, BufWriter::with_capacity(1 << 20, &file))
        .and_then(|recovery| Ok((recovery, file.sync_all()?)));
    let recovery = match recovered {
        Ok((recovery, ())) => recovery,
        Err(e) => {
            let _ = fs::remove_file(&temp);
            return Err(match e {
                cobsfile::Error::Io(e) => Failure::at(&out_name, e),
                other => Failure::at(&name, other),
            });
        }
    };
    if let Err(failure) = not_a_cobsfile(&name, &recovery.report) {
        let _ = fs::remove_file(&temp);
        return Err(failure);
    }
    fs::rename(&temp, &args.output).map_err(|e| {
        let _ = fs::remove_file(&temp);
        Failure::at(&out_name, e)
    })?;

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
                "{out_name}: wrote {} blocks, {} records, {} bytes",
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
    Ok(outcome(report))
}

/// Whether `a` and `b` name the same existing file.
fn same_file(a: &Path, b: &Path) -> bool {
    match (fs::canonicalize(a), fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
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
