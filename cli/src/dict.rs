//! `cobsfile dict`: zstd dictionaries.

use std::io::{BufReader, Write};
use std::path::PathBuf;

use cobsfile::{Dictionary, DictionaryId};

use super::output::Output;
use super::{input, Failure, Framing, Outcome};

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Train a dictionary on records with zstd's trainer.
    Train(TrainArgs),
}

#[derive(Debug, clap::Args)]
pub struct TrainArgs {
    /// Largest dictionary size in bytes (K, M suffixes).
    #[arg(long, value_name = "BYTES", default_value = "110K",
          value_parser = super::args::bytes_in(256..=1 << 30))]
    size: usize,
    /// How records are delimited in the inputs.
    #[arg(long, value_enum, default_value = "lines")]
    framing: Framing,
    /// Where to write the dictionary (put in place only once complete).
    #[arg(short, long, value_name = "DICT")]
    output: PathBuf,
    /// Replace DICT if it exists.
    #[arg(short, long)]
    force: bool,
    /// Files of sample records (`-` for stdin).
    #[arg(value_name = "INPUT", required = true)]
    inputs: Vec<PathBuf>,
}

/// The most sample bytes read for training; zstd needs far fewer.
const MAX_SAMPLE_BYTES: usize = 256 << 20;

pub fn run(command: Command) -> Result<Outcome, Failure> {
    let Command::Train(args) = command;
    let inputs: Vec<&std::path::Path> = args.inputs.iter().map(PathBuf::as_path).collect();
    let output = Output::create(&args.output, args.force, &inputs)?;
    let mut samples: Vec<Vec<u8>> = Vec::new();
    let mut total = 0;
    for path in &args.inputs {
        let name = input::name(path);
        let (source, _) = input::open_records(path)?;
        let mut reader = BufReader::with_capacity(1 << 20, source);
        args.framing
            .read_records(&mut reader, MAX_SAMPLE_BYTES, |record| {
                if total < MAX_SAMPLE_BYTES {
                    total += record.len();
                    samples.push(record.to_vec());
                }
                Ok::<(), super::framing::FramingError>(())
            })
            .map_err(|e| Failure::at(&name, e))?;
    }
    let dictionary = Dictionary::train(&samples, args.size)
        .map_err(|e| Failure::new(format!("training on {} records failed: {e}", samples.len())))?;
    let out = output.name();
    output
        .writer()?
        .write_all(dictionary.bytes())
        .map_err(|e| Failure::at(&out, e))?;
    output.persist()?;
    eprintln!(
        "cobsfile: {out}: dictionary {} of {} bytes from {} records",
        DictionaryId(dictionary.id()),
        dictionary.bytes().len(),
        samples.len()
    );
    Ok(Outcome::Clean)
}
