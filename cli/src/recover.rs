//! `cobsfile recover`: a new, valid file holding every intact block of a damaged one.

use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

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
    /// such as pipes, are read into memory), or a log directory (spec 11.4), each of whose
    /// segments is recovered.
    #[arg(value_name = "IN")]
    input: PathBuf,
    /// Where to write the recovered file (put in place only once it is complete); for a log
    /// directory, the directory (made if missing) to write each segment into, by its name.
    #[arg(short, long, value_name = "OUT")]
    output: PathBuf,
    /// Replace OUT if it exists.
    #[arg(short, long)]
    force: bool,
}

pub fn run(args: Args) -> Result<Outcome, Failure> {
    if is_stdio(&args.output) {
        return Err(Failure::usage("recover writes to a file: give -o a path"));
    }
    match super::log_dir(&args.input) {
        Some(dir) => run_dir(&args, dir),
        None => run_file(&args, &args.input, &args.output),
    }
}

/// `recover DIR -o OUT`: each segment of the log directory DIR recovered into OUT, under its
/// own name: a log directory of finished segments. The segments are held mapped meanwhile,
/// so that retention removes none of them.
fn run_dir(args: &Args, dir: &Path) -> Result<Outcome, Failure> {
    let out_name = args.output.display().to_string();
    if args.output.is_file() {
        return Err(Failure::at(
            &out_name,
            "a file: recovering a log directory writes a directory of segments",
        ));
    }
    let same = match (dir.canonicalize(), args.output.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if same {
        return Err(Failure::at(
            &out_name,
            "is the log directory recovered: recover into another directory",
        ));
    }
    let log =
        cobsfile::segments::LogDir::open(dir).map_err(|e| Failure::at(&input::name(dir), e))?;
    std::fs::create_dir_all(&args.output).map_err(|e| Failure::at(&out_name, e))?;
    let mut worst = Outcome::Clean;
    for segment in log.segments() {
        let name = segment.path.file_name().expect("a segment's name");
        let outcome = run_file(args, &segment.path, &args.output.join(name))?;
        worst = worst.worst(outcome);
    }
    Ok(worst)
}

/// `recover IN -o OUT` of one file.
fn run_file(args: &Args, input_path: &Path, output: &Path) -> Result<Outcome, Failure> {
    let name = input::name(input_path);
    let out_name = output.display().to_string();
    // Put in the output's place only when complete, so a failed recovery never leaves a
    // partial file under the output's name (nor, dropped on any error, anywhere else).
    let pending = Output::create(output, args.force, &[input_path])?;
    let options = args.read.builder()?;
    let read;
    let mapped;
    let bytes = match input::open(input_path)? {
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
        // Each names what would read it: a dictionary to give, a codec, a limit.
        let reasons = super::verify::unreadable_reasons(report).join("; ");
        eprintln!(
            "cobsfile: {name}: {unreadable} unreadable range(s) are not in {out_name} ({reasons})"
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
