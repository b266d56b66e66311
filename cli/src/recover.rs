//! `cobsfile recover`: a new, valid file holding every intact block of a damaged one.

use std::io::{self, BufWriter, Read, Write};
use std::path::PathBuf;

use super::output::Output;
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
    /// Where to write the recovered file (put in place only once it is complete).
    #[arg(short, long, value_name = "OUT")]
    output: PathBuf,
    /// Replace OUT if it exists.
    #[arg(short, long)]
    force: bool,
}

pub fn run(args: Args) -> Result<Outcome, Failure> {
    let name = input::name(&args.input);
    let out_name = args.output.display().to_string();
    if is_stdio(&args.output) {
        return Err(Failure::usage("recover writes to a file: give -o a path"));
    }
    // Put in the output's place only when complete, so a failed recovery never leaves a
    // partial file under the output's name (nor, dropped on any error, anywhere else).
    let pending = Output::create(&args.output, args.force, &[&args.input])?;
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

    let file = pending.writer()?;
    let recovered = cobsfile::recover(bytes, &options, BufWriter::with_capacity(1 << 20, file));
    let recovery = match recovered {
        Ok(recovery) => recovery,
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
    pending.persist()?;

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
