//! The `cobsfile` command-line tool: argument parsing and output formatting around the
//! library. Each command parses nothing itself and calls the library; this module maps
//! outcomes to one line on stderr and an exit status.
//!
//! Exit status: see [`EXIT_STATUS`], which `--help` prints, and [`Outcome`], which maps how a
//! command ended to it.

mod args;
mod avro_file;
mod cat;
mod dict;
mod finish;
mod framing;
mod generate;
mod input;
mod key;
mod ls;
mod meta;
mod output;
mod pack;
mod progress;
mod recover;
#[cfg(feature = "sql")]
mod sql;
mod text;
mod typed;
mod verify;
mod when;

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
  2  usage error, or a command refused as given (an output that is one of the inputs,
     an existing file without --force)
  3  damage found and skipped (the output holds every intact record)
  4  unreadable blocks (a zstd dictionary not given with --dict, a codec this tool does not
     support, a dictionary over the reader's limits), nothing damaged
  5  the file is unfinished (cut, or its writer stopped before the end block a finished
     file has) or empty, nothing damaged
  6  tampering found by verify --key: sealed blocks altered, removed, reordered, duplicated
     or added, seals forged, replayed or of another file or key, or --extends not held
  7  verify --key found blocks that no seal covers (written after the last seal, or by a
     writer that did not seal), nothing tampered with
When several apply, the first of 1, 6, 3, 7, 5, 4 wins: tampering, then damage, then unsealed
blocks, then an unfinished file, then unreadable blocks.";

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
    #[command(long_about = VERIFY_ABOUT)]
    Verify(verify::Args),
    /// Write a new, finished file holding every intact block; report what was lost (exit 3 if
    /// anything).
    Recover(recover::Args),
    /// Finish open logs in place (an index, a time index, an end block) once no one has them
    /// open: a log rotated away, or a log directory's older segments.
    Finish(finish::Args),
    /// Import an Avro object container file as typed records, datums copied byte for byte:
    /// every codec (null, deflate, snappy, zstandard, bzip2, xz), the schema and the user's
    /// metadata kept. A damaged Avro file: every block that passes its checks is imported,
    /// reading on past damage at the next sync marker, and the bytes lost are reported (exit 3).
    Import(avro_file::ImportArgs),
    /// Export typed records to an Avro object container file that Avro's tools read, datums
    /// copied byte for byte (`import` then `export` gives the same records); records that
    /// cannot be read are reported and left out (exit 3 or 4).
    Export(avro_file::ExportArgs),
    /// Run SQL over cobsfiles with Apache DataFusion: each FILE (a cobsfile, a directory of
    /// them, a glob) is a table named by its file stem; rows come from the records (Avro
    /// schema, JSON objects, or raw bytes). Damage is skipped and reported (exit 3).
    #[cfg(feature = "sql")]
    Sql(sql::Args),
    /// Work with zstd dictionaries.
    #[command(subcommand)]
    Dict(dict::Command),
    /// Work with the Ed25519 key pairs that sign seals.
    #[command(subcommand)]
    Key(key::Command),
    /// Print the completion script for a shell (bash, zsh, fish, elvish, powershell).
    Completions(generate::CompletionsArgs),
    /// Print the man page (roff), or write every command's page into a directory.
    Man(generate::ManArgs),
}

/// What `verify --help` says it prints.
const VERIFY_ABOUT: &str = "\
Read and check every block of each FILE, and report what was found.

Text: one line per damaged range (byte offsets, cause, and what it held when the file's
index says), one line for the blocks that could not be read (a dictionary not given, a
codec or limit), then a summary line per file: clean, or how much is damaged; the
intact blocks by type, the records, intact bytes of all; and how the file ends:
finished (its writer finished it), an open log (appended to, which is normal),
unfinished (cut at a block boundary, or its writer stopped) or empty.

--json: one object per file, with \"file\", \"clean\", \"ending\", \"blocks\" (by type),
\"records\", \"intact\" (ranges), \"damaged\" and \"unreadable\" (ranges, each with a
\"status\" word, \"cause\" as spec 9.8 names it and a \"message\"), and their byte counts.

--key PUB: also verify the file's seals (spec 9.10) with the public key PUB (`cobsfile key
generate` writes it; give --key again for more keys). One line per tampering (its kind:
altered, removed, reordered, duplicated, inserted, other-file, other-key, forged, replayed,
malformed-seal, conflicting or seal-removed, and its bytes), a line for blocks no seal covers
(unsealed: written after the last seal, or by a writer that did not seal), and a line for
what is authentic, with the last seal's hash: keep it, and `--extends HASH` later proves the
file still holds what it held then and was only appended to (a file cut back to an earlier
seal cannot be told from the file alone). Exit 6 for tampering, 7 for unsealed blocks. An
object in a store is fetched whole first (verification hashes every byte).
With --json, a \"seals\" object: \"authentic\" and \"unsealed\" (blocks, records, ranges),
\"tampered\" (ranges with \"kind\" and \"message\") and \"chains\".

Exit 0 only for a clean file (finished or an open log); see cobsfile --help for the
others.";

/// How a command ended, short of an error (a [`Failure`], exit 1, which outranks them all).
///
/// Ordered from the least severe to the most, so that a command over several inputs ends with
/// the [`worst`](Self::worst) of theirs: a failure, then tampering, damage, unsealed blocks,
/// an unfinished input, unreadable blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    /// The input was clean: nothing damaged or unreadable, finished or an open log (exit 0).
    Clean,
    /// Blocks this tool could not read (a dictionary not given, a codec it does not support,
    /// a dictionary over its limits), but nothing damaged (exit 4).
    Unreadable,
    /// Nothing damaged, but the input is unfinished or empty (exit 5).
    Unfinished,
    /// Blocks no seal covers, found by `verify --key` (exit 7).
    Unsealed,
    /// Damage was skipped and reported (exit 3).
    Damaged,
    /// Tampering, found by `verify --key` (exit 6).
    Tampered,
}

impl Outcome {
    /// The exit status (see [`EXIT_STATUS`]).
    pub fn code(self) -> u8 {
        match self {
            Outcome::Clean => 0,
            Outcome::Damaged => 3,
            Outcome::Unreadable => 4,
            Outcome::Unfinished => 5,
            Outcome::Tampered => 6,
            Outcome::Unsealed => 7,
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
        Err(Failure { message, status }) => {
            if !message.is_empty() {
                eprintln!("cobsfile: {message}");
            }
            ExitCode::from(status)
        }
    }
}

/// An error that stops a command: one line naming what failed, and the exit status.
#[derive(Debug)]
pub struct Failure {
    pub message: String,
    /// 1, or 2 for a command line refused as given (as clap's usage errors).
    pub status: u8,
}

impl Failure {
    /// An error that stopped the command (exit 1).
    pub fn new(message: impl Into<String>) -> Self {
        Failure {
            message: message.into(),
            status: 1,
        }
    }

    /// Names `path` in front of an error; I/O errors are worded as [`io_message`] words them.
    pub fn at(path: &str, err: impl std::fmt::Display + 'static) -> Self {
        let any: &dyn std::any::Any = &err;
        let message = match (
            any.downcast_ref::<io::Error>(),
            any.downcast_ref::<cobsfile::Error>(),
        ) {
            (Some(e), _) | (_, Some(cobsfile::Error::Io(e))) => io_message(e),
            _ => err.to_string(),
        };
        Failure::new(format!("{path}: {message}"))
    }

    /// Failures already reported on stderr (of some of several files): exit `status`, print
    /// nothing more.
    pub fn reported(status: u8) -> Self {
        Failure {
            message: String::new(),
            status,
        }
    }

    /// A command line refused as given, before anything was read or written (exit 2).
    pub fn usage(message: impl Into<String>) -> Self {
        Failure {
            message: message.into(),
            status: 2,
        }
    }
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Self {
        Failure::new(io_message(&e))
    }
}

/// An I/O error in the tool's words, the same in every command: the system's message without
/// its "(os error N)", starting lowercase like the tool's own messages ("is a directory",
/// "no such file or directory", "permission denied").
pub fn io_message(e: &io::Error) -> String {
    let text = e.to_string();
    let text = match text.rfind(" (os error ") {
        Some(at) if text.ends_with(')') => &text[..at],
        _ => &text[..],
    };
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => text.to_owned(),
    }
}

/// Options shared by the commands that read a cobsfile.
#[derive(Debug, clap::Args)]
pub struct ReadOptions {
    /// Largest block body to accept, in bytes (K, M, G suffixes); larger blocks are reported
    /// as damage. [default: 64M]
    #[arg(long, value_name = "BYTES", default_value = "64M", hide_default_value = true,
          value_parser = args::bytes_in(1..=isize::MAX as u64), visible_alias = "max-block-size")]
    pub max_body_size: usize,
    /// Most bytes to decompress for blocks that then fail their checks (plus 64 per byte of
    /// block body read), so that hostile frames cost time in proportion to the file; past
    /// it a compressed block is reported unreadable without being decompressed. [default:
    /// 1G]
    #[arg(long, value_name = "BYTES", default_value = "1G", hide_default_value = true,
          value_parser = args::bytes_in(0..=u64::MAX))]
    pub max_damaged_decoding: usize,
    /// A zstd dictionary for blocks compressed with it (repeatable); dictionaries the file
    /// embeds are found on their own.
    #[arg(long = "dict", value_name = "FILE")]
    pub dictionaries: Vec<PathBuf>,
    /// Decode blocks on N threads (0: one per core; files only, stdin is read on one).
    #[arg(long, value_name = "N", default_value = "1", value_parser = args::parse_threads)]
    pub threads: usize,
    /// The times whose records are read (`cat --since/--until`); all records when absent.
    #[arg(skip)]
    pub window: Option<cobsfile::Window>,
}

impl ReadOptions {
    fn builder(&self) -> Result<cobsfile::ReaderBuilder, Failure> {
        let limits = cobsfile::Limits::default()
            .max_body_size(self.max_body_size)
            .max_damaged_decoding(self.max_damaged_decoding as u64);
        let mut builder = cobsfile::ReaderBuilder::new()
            .limits(limits)
            .threads(self.threads);
        if let Some(window) = self.window {
            builder = builder.window(window);
        }
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
    /// The cobsfiles (`-` for stdin), each read in turn.
    #[arg(value_name = "FILE", required = true)]
    files: Vec<PathBuf>,
}

impl ListArgs {
    /// Runs the job that `make` builds from each input's name and the `--json` flag; text
    /// output is headed by each file's name when there are several.
    fn run<J: input::ReadJob<Output = Outcome>>(
        self,
        make: impl Fn(String, bool) -> J,
    ) -> Result<Outcome, Failure> {
        let headings = (!self.json).then_some("");
        each_file(&self.files, headings, |path| {
            input::read(path, &self.read, make(input::name(path), self.json))
        })
    }
}

/// Runs `one` for each of `files` in turn, as `gzip -t a b` does: a file that fails is
/// reported on its own line and the next is still read, and the command ends with the worst
/// outcome of all (an error, exit 1, the worst). With `headings`, and several files, each
/// file's output is headed by `==> NAME <==`, a blank line between, as `head` and `tail` do.
/// A log directory (spec 11.4) among `files` is its segments, in log order, each a file of its
/// own (held mapped meanwhile, so that retention removes none).
fn each_file(
    files: &[PathBuf],
    headings: Option<&str>,
    one: impl FnMut(&Path) -> Result<Outcome, Failure>,
) -> Result<Outcome, Failure> {
    let mut held = Vec::new();
    let mut expanded = Vec::with_capacity(files.len());
    for file in files {
        match log_dir(file) {
            Some(dir) => {
                let log = cobsfile::segments::LogDir::open(dir)
                    .map_err(|e| Failure::at(&input::name(dir), e))?;
                expanded.extend(log.segments().iter().map(|s| s.path.clone()));
                held.push(log);
            }
            None => expanded.push(file.clone()),
        }
    }
    each_arg(&expanded, headings, one)
}

/// [`each_file`] of the arguments as they are.
fn each_arg(
    files: &[PathBuf],
    headings: Option<&str>,
    mut one: impl FnMut(&Path) -> Result<Outcome, Failure>,
) -> Result<Outcome, Failure> {
    if let [file] = files {
        return one(file);
    }
    let mut worst = Outcome::Clean;
    let mut failed: Option<u8> = None;
    for (i, file) in files.iter().enumerate() {
        if headings.is_some() {
            let gap = if i > 0 { "\n" } else { "" };
            let heading = format!("{gap}==> {} <==\n", input::name(file));
            if !quiet_broken_pipe(io::Write::write_all(&mut io::stdout(), heading.as_bytes()))? {
                break;
            }
        }
        match one(file) {
            Ok(outcome) => worst = worst.worst(outcome),
            Err(failure) => {
                if !failure.message.is_empty() {
                    eprintln!("cobsfile: {}", failure.message);
                }
                // A refused command line (2) stops at once; other errors go on to the next.
                if failure.status == 2 {
                    return Err(Failure::reported(2));
                }
                failed = Some(failed.map_or(failure.status, |s| s.max(failure.status)));
            }
        }
    }
    match failed {
        Some(status) => Err(Failure::reported(status)),
        None => Ok(worst),
    }
}

/// `path` if it is a log directory (spec 11.4) to read as one log: a local directory that
/// holds segments. Any other directory is, as before, a directory where a file was wanted.
pub fn log_dir(path: &Path) -> Option<&Path> {
    let local = !is_stdio(path) && input::object_url(path).is_none() && path.is_dir();
    (local && cobsfile::segments::list_segments(path).is_ok_and(|s| !s.is_empty())).then_some(path)
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
        Command::Ls(args) => args.run(|name, json| ls::Ls {
            name,
            json,
            index: None,
        }),
        Command::Meta(args) => meta::run(args),
        Command::Verify(args) => verify::run(args),
        Command::Recover(args) => recover::run(args),
        Command::Finish(args) => finish::run(args),
        Command::Import(args) => avro_file::import(args),
        Command::Export(args) => avro_file::export(args),
        #[cfg(feature = "sql")]
        Command::Sql(args) => sql::run(args),
        Command::Dict(command) => dict::run(command),
        Command::Key(command) => key::run(command),
        Command::Completions(args) => generate::completions(args),
        Command::Man(args) => generate::man(args),
    };
    exit_status(result)
}

/// Writes to stdout, treating a closed pipe (`cobsfile cat | head`) as a normal end.
pub fn quiet_broken_pipe(result: io::Result<()>) -> Result<bool, Failure> {
    match result {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(Failure::new(format!("writing output: {e}"))),
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
        let order = [Clean, Unreadable, Unfinished, Unsealed, Damaged, Tampered];
        assert_eq!(order.map(Outcome::code), [0, 4, 5, 7, 3, 6]);
        for (i, a) in order.iter().enumerate() {
            for (j, b) in order.iter().enumerate() {
                assert_eq!(a.worst(*b), order[i.max(j)]);
            }
        }
        assert!(super::EXIT_STATUS.contains("the first of 1, 6, 3, 7, 5, 4 wins"));
    }
}
