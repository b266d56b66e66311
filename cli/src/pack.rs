//! `cobsfile pack`: records from a file or stdin into a cobsfile.

use std::fs::File;
use std::io::{self, BufReader, IsTerminal, Read, Write};
use std::os::fd::AsFd;
use std::path::PathBuf;

use std::time::Duration;

use cobsfile::{AppenderBuilder, Compression, Durability, WriterBuilder, DEFAULT_BLOCK_TARGET};

use super::framing::FramingError;
use super::progress::Progress;
use super::{input, is_stdio, Failure, Framing, Outcome};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Output file (stdout when absent).
    #[arg(short, long, value_name = "OUT", conflicts_with = "append")]
    output: Option<PathBuf>,
    /// Append to the log LOG instead, creating it if missing: a torn last block left by a
    /// crash is cut off (or, with other writers on the log, fenced off), the header is never
    /// written twice, and several processes may append to one log at once. The log is an open
    /// log: a log block starts it, and one is written into a file that is not one yet (a
    /// finished file, say); no end block is written.
    #[arg(long, value_name = "LOG")]
    append: Option<PathBuf>,
    /// With --append: when records reach the log. none: blocks are written when full or a
    /// second old; flush: each record is written before the next is read; fsync: each is
    /// written and synced; group:MS: written and synced together at most every MS
    /// milliseconds.
    #[arg(long, value_name = "MODE", value_parser = parse_durability, requires = "append",
          default_value = "none")]
    durability: Durability,
    /// Target bytes of records per data block (the block target): larger blocks compress
    /// better, and damage costs the whole block it hits.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_BLOCK_TARGET,
          visible_alias = "block-size")]
    block_target: usize,
    /// A metadata entry, written in one metadata block after the header; repeatable.
    #[arg(long = "meta", value_name = "KEY=VALUE", value_parser = parse_meta)]
    meta: Vec<(String, String)>,
    /// How records are delimited in the input.
    #[arg(long, value_enum, default_value = "lines")]
    framing: Framing,
    /// Compress data blocks with zstd at LEVEL: -7..-1 fastest, 1..22 smallest; 3 balances
    /// the two (see BENCHMARKS.md).
    #[arg(long, value_name = "LEVEL", allow_hyphen_values = true)]
    zstd: Option<i32>,
    /// Compress with this zstd dictionary (made by `cobsfile dict train`); it is embedded in
    /// the file unless --external-dict is given.
    #[arg(long, value_name = "FILE", requires = "zstd")]
    dict: Option<PathBuf>,
    /// Do not embed the dictionary: readers need the same file (`cat --dict FILE`).
    #[arg(long, requires = "dict")]
    external_dict: bool,
    /// Compress blocks on N threads; the output is the same as with one.
    #[arg(long, value_name = "N", default_value_t = 1)]
    threads: usize,
    /// Do not write an index block (which lets `cat --skip` go straight to a record) before
    /// the end block that finishes the file.
    #[arg(long)]
    no_index: bool,
    /// Write every block in one write of at most PIPE_BUF (4096) bytes, which POSIX makes
    /// atomic on a pipe, so that several `pack --atomic-pipe` can share one pipe to one reader.
    /// Blocks hold about 4 KiB of records, a longer record is an error, and no index is written.
    #[arg(long, conflicts_with = "append")]
    atomic_pipe: bool,
    /// Ask for a pipe buffer of BYTES when stdout is a pipe (Linux, F_SETPIPE_SZ; rounded up to
    /// a power of two pages). If that fails, say so and go on.
    #[arg(long, value_name = "BYTES", conflicts_with = "append")]
    pipe_buffer: Option<usize>,
    /// Input file, or `-` for stdin.
    #[arg(value_name = "INPUT", default_value = "-")]
    input: PathBuf,
}

fn parse_durability(arg: &str) -> Result<Durability, String> {
    match arg {
        "none" => Ok(Durability::None),
        "flush" => Ok(Durability::Flush),
        "fsync" => Ok(Durability::Fsync),
        _ => {
            let ms = arg
                .strip_prefix("group:")
                .and_then(|ms| ms.parse::<u64>().ok())
                .ok_or_else(|| format!("expected none, flush, fsync or group:MS, got {arg:?}"))?;
            Ok(Durability::Group {
                interval: Duration::from_millis(ms),
                bytes: GROUP_BYTES,
            })
        }
    }
}

/// Record bytes that start a group commit before its interval is up.
const GROUP_BYTES: u64 = 4 << 20;

fn parse_meta(arg: &str) -> Result<(String, String), String> {
    let (key, value) = arg
        .split_once('=')
        .ok_or_else(|| format!("expected KEY=VALUE, got {arg:?}"))?;
    Ok((key.to_owned(), value.to_owned()))
}

/// Failures while packing, with the input's offsets.
enum PackError {
    Framing(FramingError),
    Library(cobsfile::Error),
}

impl From<FramingError> for PackError {
    fn from(e: FramingError) -> Self {
        PackError::Framing(e)
    }
}

pub fn run(args: Args) -> Result<Outcome, Failure> {
    let in_name = input::name(&args.input);
    let (source, size): (Box<dyn Read>, Option<u64>) = if is_stdio(&args.input) {
        (Box::new(io::stdin().lock()), None)
    } else {
        let file = File::open(&args.input).map_err(|e| Failure::at(&in_name, e))?;
        let size = file.metadata().ok().map(|m| m.len());
        (Box::new(file), size)
    };
    if let Some(log) = &args.append {
        return append(&args, log, source, size);
    }
    let (sink, out_name) = open_output(args.output.as_ref())?;
    if let Some(bytes) = args.pipe_buffer {
        resize_pipe(bytes, args.output.as_ref());
    }
    let mut builder = WriterBuilder::new()
        .block_target(args.block_target)
        .threads(args.threads)
        .index(!args.no_index);
    if args.atomic_pipe {
        builder = builder.atomic_writes(cobsfile::pipe::PIPE_BUF);
    }
    if let Some(level) = args.zstd {
        let compression = Compression::zstd(level).map_err(|e| Failure(e.to_string()))?;
        builder = builder.compression(compression);
    }
    if let Some(path) = &args.dict {
        builder = builder.dictionary(super::load_dictionary(path)?, !args.external_dict);
    }
    let mut writer = builder.build(sink).map_err(|e| Failure::at(&out_name, e))?;
    if !args.meta.is_empty() {
        writer
            .write_metadata(args.meta.iter().map(|(k, v)| (k, v)))
            .map_err(|e| Failure::at(&out_name, e))?;
    }

    let max_len = writer.max_record_len();
    let records = Records {
        args: &args,
        source,
        size,
        out_name: &out_name,
    };
    records.feed("packing", max_len, |record| writer.write_record(record))?;
    writer.finish().map_err(|e| Failure::at(&out_name, e))?;
    Ok(Outcome::Clean)
}

/// The output file, or a handle on stdout that writes each block straight through (stdout's
/// own line buffering would split blocks).
fn open_output(path: Option<&PathBuf>) -> Result<(Box<dyn Write>, String), Failure> {
    match path {
        Some(path) if !is_stdio(path) => {
            let name = path.display().to_string();
            let file = File::create(path).map_err(|e| Failure::at(&name, e))?;
            Ok((Box::new(file), name))
        }
        _ => {
            if io::stdout().is_terminal() {
                return Err(Failure(
                    "refusing to write a binary file to a terminal; use -o FILE or redirect stdout"
                        .into(),
                ));
            }
            let fd = io::stdout().as_fd().try_clone_to_owned()?;
            Ok((Box::new(File::from(fd)), "<stdout>".into()))
        }
    }
}

/// `pack --append LOG`: the records go to the log through an appender.
fn append(
    args: &Args,
    log: &std::path::Path,
    source: Box<dyn Read>,
    size: Option<u64>,
) -> Result<Outcome, Failure> {
    let name = log.display().to_string();
    let fail = |e| Failure::at(&name, e);
    let mut builder = AppenderBuilder::new()
        .block_target(args.block_target)
        .threads(args.threads)
        .durability(args.durability);
    if let Some(level) = args.zstd {
        let compression = Compression::zstd(level).map_err(|e| Failure(e.to_string()))?;
        builder = builder.compression(compression);
    }
    if let Some(path) = &args.dict {
        builder = builder.dictionary(super::load_dictionary(path)?, !args.external_dict);
    }
    let mut log = builder.open(log).map_err(fail)?;
    // Only an appender alone on the log knows a tail is torn: with others on it, the bytes
    // may be a block another writer is writing right now, and are not called torn.
    let opened = log.opened();
    if let Some(torn) = &opened.torn {
        let done = if !opened.exclusive {
            "left in place and fenced off (other writers or readers have the log open; it may \
             be a block another writer is writing)"
        } else if opened.completed {
            "a block short only of its closing sync byte, completed and kept"
        } else if opened.truncated {
            "a torn block, cut off"
        } else {
            "a torn block, left in place (the file changed while it was looked at) and fenced off"
        };
        eprintln!(
            "cobsfile: {name}: bytes {}..{} after the last intact block: {done}",
            torn.start, torn.end
        );
    }
    if !args.meta.is_empty() {
        log.write_metadata(args.meta.iter().map(|(k, v)| (k, v)))
            .map_err(fail)?;
    }
    let max_len = log.max_record_len();
    let records = Records {
        args,
        source,
        size,
        out_name: &name,
    };
    records.feed("appending", max_len, |record| log.append(record).map(drop))?;
    log.close().map_err(fail)?;
    Ok(Outcome::Clean)
}

/// `--pipe-buffer`: sets the buffer of the pipe on stdout, or says on stderr why not (the
/// output is the same either way).
fn resize_pipe(bytes: usize, output: Option<&PathBuf>) {
    if output.is_some_and(|path| !is_stdio(path)) {
        eprintln!(
            "cobsfile: --pipe-buffer ignored: it applies to stdout, and the output is a file"
        );
        return;
    }
    let stdout = io::stdout();
    if let Err(e) = cobsfile::pipe::set_buffer_size(stdout.as_fd(), bytes) {
        let kept = cobsfile::pipe::buffer_size(stdout.as_fd()).map_or_else(
            |_| String::new(),
            |size| format!("; it stays at {size} bytes"),
        );
        eprintln!("cobsfile: <stdout>: could not set the pipe buffer to {bytes} bytes: {e}{kept}");
    }
}

/// The input's records, on their way out.
struct Records<'a> {
    args: &'a Args,
    source: Box<dyn Read>,
    size: Option<u64>,
    /// The output's name, for errors of `write`.
    out_name: &'a str,
}

impl Records<'_> {
    /// Hands every record of at most `max_len` bytes to `write`, with a progress bar saying
    /// `verb`.
    fn feed(
        self,
        verb: &str,
        max_len: usize,
        mut write: impl FnMut(&[u8]) -> cobsfile::Result<()>,
    ) -> Result<(), Failure> {
        let progress = Progress::start(self.size, verb);
        let mut input = BufReader::with_capacity(1 << 20, self.source);
        let mut consumed = 0u64;
        let fed = self
            .args
            .framing
            .read_records(&mut input, max_len, |record| {
                write(record).map_err(PackError::Library)?;
                consumed += record.len() as u64;
                if consumed & 0xfffff < record.len() as u64 {
                    progress.set(consumed);
                }
                Ok(())
            });
        match fed {
            Ok(()) => Ok(()),
            Err(PackError::Framing(e)) => Err(Failure::at(&input::name(&self.args.input), e)),
            Err(PackError::Library(e)) => Err(Failure::at(self.out_name, e)),
        }
    }
}
