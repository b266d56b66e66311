//! `cobsfile cat`: every intact record to stdout.

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

use cobsfile::{Reader, Source};

use super::input::{self, ReadJob};
use super::progress::Progress;
use super::{quiet_broken_pipe, Failure, Framing, Outcome, ReadOptions};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// How to delimit records on output.
    #[arg(long, value_enum, default_value = "lines")]
    framing: Framing,
    #[command(flatten)]
    read: ReadOptions,
    /// The cobsfile, or `-` for stdin.
    #[arg(value_name = "FILE")]
    file: PathBuf,
}

pub fn run(args: Args) -> Result<Outcome, Failure> {
    let job = Cat {
        name: input::name(&args.file),
        framing: args.framing,
    };
    input::read(&args.file, &args.read, job)
}

struct Cat {
    name: String,
    framing: Framing,
}

impl ReadJob for Cat {
    type Output = Outcome;

    fn run<S: Source>(self, reader: &mut Reader<S>, size: Option<u64>) -> Result<Outcome, Failure> {
        let progress = Progress::start(size, "reading");
        let stdout = io::stdout().lock();
        let mut out = BufWriter::with_capacity(1 << 18, stdout);
        let mut diagnostics = input::Diagnostics::new(self.name.clone());
        let mut written = 0u64;
        loop {
            let record = match reader.next_record() {
                None => break,
                Some(Ok(record)) => record,
                Some(Err(e)) => {
                    diagnostics.error(reader, e)?;
                    continue;
                }
            };
            written += record.len() as u64;
            if !quiet_broken_pipe(self.framing.write_record(&mut out, record))? {
                return diagnostics.finish(reader);
            }
            if written & 0xfffff < record.len() as u64 {
                progress.set(written);
            }
        }
        quiet_broken_pipe(out.flush())?;
        let unknown = reader.stats().unknown_blocks;
        if unknown > 0 {
            eprintln!(
                "cobsfile: {}: skipped {unknown} block(s) of unknown type",
                self.name
            );
        }
        diagnostics.finish(reader)
    }
}
