//! The `cobsfile` command-line tool: argument parsing and output formatting around the
//! library. Each command parses nothing itself and calls the library; this module maps
//! outcomes to one line on stderr and an exit status.
//!
//! Exit status: see [`EXIT_STATUS`], which `--help` prints, and [`Outcome`], which maps how a
//! command ended to it.

mod cat;
mod dict;
mod framing;
mod input;
mod ls;
mod meta;
mod pack;
mod progress;
mod recover;
mod verify;

use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use framing::Framing;

/// The exit statuses, as `--help` lists them (and the README).
const EXIT_STATUS: &str = "\
Exit status:
  0  clean: nothing damaged or unreadable, and the file is finished (or an open log)
  1  an error stopped the command (one line on stderr)
  2  usage error
  3  damage found and skipped (the output holds every intact record)
  4  unreadable blocks (a zstd dictionary not given with --dict, a codec this tool does not
     support, a dictionary over the reader's limits), nothing damaged
  5  the file is unfinished (cut, or its writer stopped before the end block a finished
     file has) or empty, nothing damaged
When several apply, the first of 1, 3, 5, 4 wins: damage, then an unfinished file, then
unreadable blocks.";

/// A container format in which a zero byte only ever means "a block starts here".
#[derive(Debug, Parser)]
#[command(name = "cobsfile", version, about, max_term_width = 100, after_help = EXIT_STATUS)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Pack records from a file or stdin into a cobsfile.
    Pack(pack::Args),
    /// Write every intact record to stdout; damage is skipped and reported on stderr, and so
    /// is a file that is unfinished (exit 5).
    Cat(cat::Args),
    /// List blocks: offset, type, size, records, status.
    Ls(ListArgs),
    /// Show the metadata blocks, skipping data blocks by their length fields.
    Meta(ListArgs),
    /// Read and check every block; report intact, damaged and unreadable ranges and whether
    /// the file is finished, an open log, unfinished or empty (exit 0 only if clean).
    Verify(ListArgs),
    /// Write a new, finished file holding every intact block; report what was lost (exit 3 if
    /// anything).
    Recover(recover::Args),
    /// Work with zstd dictionaries.
    #[command(subcommand)]
    Dict(dict::Command),
}

/// How a command ended, short of an error (a [`Failure`], exit 1, which outranks them all).
///
/// Ordered from the least severe to the most, so that a command over several inputs ends with
/// the [`worst`](Self::worst) of theirs: a failure, then damage, then an unfinished input,
/// then unreadable blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    /// The input was clean: nothing damaged or unreadable, finished or an open log (exit 0).
    Clean,
    /// Blocks this tool could not read (a dictionary not given, a codec it does not support,
    /// a dictionary over its limits), but nothing damaged (exit 4).
    Unreadable,
    /// Nothing damaged, but the input is unfinished or empty (exit 5).
    Unfinished,
    /// Damage was skipped and reported (exit 3).
    Damaged,
}

impl Outcome {
    /// The exit status (see [`EXIT_STATUS`]).
    pub fn code(self) -> u8 {
        match self {
            Outcome::Clean => 0,
            Outcome::Damaged => 3,
            Outcome::Unreadable => 4,
            Outcome::Unfinished => 5,
        }
    }

    /// The more severe of two outcomes.
    pub fn worst(self, other: Outcome) -> Outcome {
        self.max(other)
    }

    /// What a full read's report says: damage, then an unfinished or empty input, then
    /// unreadable blocks.
    pub fn of(report: &cobsfile::Report) -> Outcome {
        let mut outcome = Outcome::Clean;
        if report.has_unreadable() {
            outcome = outcome.worst(Outcome::Unreadable);
        }
        outcome = outcome.worst(Outcome::of_ending(report.ending));
        if report.has_damage() {
            outcome = outcome.worst(Outcome::Damaged);
        }
        outcome
    }

    /// What a damaged or unreadable range makes of a command.
    pub fn of_damage(damage: &cobsfile::Cause) -> Outcome {
        if damage.is_damage() {
            Outcome::Damaged
        } else {
            Outcome::Unreadable
        }
    }

    /// What how an input ends makes of a command: clean if finished or an open log.
    pub fn of_ending(ending: cobsfile::Ending) -> Outcome {
        match ending {
            cobsfile::Ending::Finished | cobsfile::Ending::Open => Outcome::Clean,
            _ => Outcome::Unfinished,
        }
    }
}

/// The exit status of a command that ended so (see [`EXIT_STATUS`]); a failure is reported on
/// stderr first.
pub fn exit_status(result: Result<Outcome, Failure>) -> ExitCode {
    match result {
        Ok(outcome) => ExitCode::from(outcome.code()),
        Err(Failure(message)) => {
            eprintln!("cobsfile: {message}");
            ExitCode::from(1)
        }
    }
}

/// An error that stops a command: one line naming what failed.
#[derive(Debug)]
pub struct Failure(pub String);

impl Failure {
    /// Names `path` in front of an error.
    pub fn at(path: &str, err: impl std::fmt::Display) -> Self {
        Failure(format!("{path}: {err}"))
    }
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Self {
        Failure(e.to_string())
    }
}

/// Options shared by the commands that read a cobsfile.
#[derive(Debug, clap::Args)]
pub struct ReadOptions {
    /// Largest block body to accept, in bytes; larger blocks are reported as damage.
    #[arg(long, value_name = "BYTES", default_value_t = cobsfile::DEFAULT_MAX_BODY_SIZE,
          visible_alias = "max-block-size")]
    pub max_body_size: usize,
    /// A zstd dictionary for blocks compressed with it (repeatable); dictionaries the file
    /// embeds are found on their own.
    #[arg(long = "dict", value_name = "FILE")]
    pub dictionaries: Vec<PathBuf>,
    /// Decode blocks on N threads (files only; stdin is read on one).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub threads: usize,
}

impl ReadOptions {
    fn builder(&self) -> Result<cobsfile::ReaderBuilder, Failure> {
        let mut builder = cobsfile::ReaderBuilder::new()
            .max_body_size(self.max_body_size)
            .threads(self.threads);
        for path in &self.dictionaries {
            builder = builder.dictionary(load_dictionary(path)?);
        }
        Ok(builder)
    }
}

/// Reads a dictionary file.
pub fn load_dictionary(path: &Path) -> Result<cobsfile::Dictionary, Failure> {
    let bytes = std::fs::read(path).map_err(|e| Failure::at(&path.display().to_string(), e))?;
    Ok(cobsfile::Dictionary::new(bytes))
}

/// Arguments of the commands that list what a file holds (`ls`, `meta`).
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// Print JSON (one object per line).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    read: ReadOptions,
    /// The cobsfile, or `-` for stdin.
    #[arg(value_name = "FILE")]
    file: PathBuf,
}

impl ListArgs {
    /// Runs the job that `make` builds from the input's name and the `--json` flag.
    fn run<J: input::ReadJob>(
        self,
        make: impl FnOnce(String, bool) -> J,
    ) -> Result<J::Output, Failure> {
        let job = make(input::name(&self.file), self.json);
        input::read(&self.file, &self.read, job)
    }
}

/// A path argument where `-` means standard input or output.
pub fn is_stdio(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Runs the tool and returns its exit status.
pub fn run() -> ExitCode {
    std::panic::set_hook(Box::new(|info| {
        eprintln!("cobsfile: internal error: {info}");
    }));
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Pack(args) => pack::run(args),
        Command::Cat(args) => cat::run(args),
        Command::Ls(args) => args.run(|name, json| ls::Ls { name, json }),
        Command::Meta(args) => meta::run(args),
        Command::Verify(args) => verify::Verify {
            name: input::name(&args.file),
            json: args.json,
        }
        .run(&args.file, &args.read),
        Command::Recover(args) => recover::run(args),
        Command::Dict(command) => dict::run(command),
    };
    exit_status(result)
}

/// Writes to stdout, treating a closed pipe (`cobsfile cat | head`) as a normal end.
pub fn quiet_broken_pipe(result: io::Result<()>) -> Result<bool, Failure> {
    match result {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(Failure(format!("writing output: {e}"))),
    }
}

fn main() -> ExitCode {
    run()
}

#[cfg(test)]
mod tests {
    use super::Outcome;

    #[test]
    fn the_worst_outcome_wins_in_the_order_of_the_help() {
        use Outcome::*;
        let order = [Clean, Unreadable, Unfinished, Damaged];
        assert_eq!(order.map(Outcome::code), [0, 4, 5, 3]);
        for (i, a) in order.iter().enumerate() {
            for (j, b) in order.iter().enumerate() {
                assert_eq!(a.worst(*b), order[i.max(j)]);
            }
        }
        assert!(super::EXIT_STATUS.contains("the first of 1, 3, 5, 4 wins"));
    }
}
