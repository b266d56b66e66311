//! `cobsfile pack`: records from a file or stdin into a cobsfile.

use std::fs::File;
use std::io::{self, BufReader, IsTerminal, Read, Write};
use std::os::fd::AsFd;
use std::path::PathBuf;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cobsfile::{AppenderBuilder, Compression, Dictionary, Durability, WriterBuilder};

use super::args;
use super::framing::{FramingError, FINAL_NEWLINE_KEY};
use super::output::Output;
use super::progress::Progress;
use super::typed::JsonLines;
use super::when::{self, TimeField, TimeUnit};
use super::{input, is_stdio, Failure, Framing, Outcome};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Output file (stdout when absent), put in place only once complete.
    #[arg(short, long, value_name = "OUT", conflicts_with = "append")]
    output: Option<PathBuf>,
    /// Replace OUT if it exists.
    #[arg(short, long, requires = "output")]
    force: bool,
    /// Seal what is written with the private key NAME (`cobsfile key generate -o NAME`): seal
    /// blocks that anyone with NAME.pub checks with `cobsfile verify --key NAME.pub`, proving
    /// that no sealed block was altered, removed, reordered or added (spec 8.10). A seal
    /// every --seal-every bytes, and one at the end.
    #[arg(long, value_name = "NAME")]
    seal: Option<PathBuf>,
    /// With --seal: seal once the blocks written since the last seal hold BYTES (K, M, G
    /// suffixes). [default: 1M]
    #[arg(long, value_name = "BYTES", requires = "seal", value_parser = args::bytes_in(1..=u64::MAX))]
    seal_every: Option<usize>,
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
          conflicts_with = "output")]
    durability: Option<Durability>,
    /// With --append: LOG is a log directory (made if missing) of segment files named
    /// 00000000000000000001.cobs and on, in log order; a new segment is started once the one
    /// appended to is BYTES long (K, M, G, T suffixes; Kafka's segment.bytes). A segment left
    /// behind gets an index and an end block once no one appends to it (spec 11.4). LOG is a
    /// log directory too when it is one already, or with any --segment-* or --retain-*
    /// option.
    #[arg(long, value_name = "BYTES", requires = "append", conflicts_with = "output",
          value_parser = args::bytes_in(1..=u64::MAX))]
    segment_size: Option<usize>,
    /// With --append to a log directory: start a new segment once the one appended to is this
    /// old (500ms, 90s, 30min, 12h, 7d, 2w; Kafka's segment.ms).
    #[arg(long, value_name = "DURATION", requires = "append", conflicts_with = "output",
          value_parser = when::parse_duration)]
    segment_age: Option<Duration>,
    /// With --append to a log directory: remove the oldest segments while all take more than
    /// BYTES (journald's --vacuum-size; the segment appended to is never removed).
    #[arg(long, value_name = "BYTES", requires = "append", conflicts_with = "output",
          value_parser = args::bytes_in(1..=u64::MAX))]
    retain_size: Option<usize>,
    /// With --append to a log directory: remove segments whose records are older than this:
    /// those whose next segment was started that long ago (Kafka's retention.ms, journald's
    /// --vacuum-time).
    #[arg(long, value_name = "DURATION", requires = "append", conflicts_with = "output",
          value_parser = when::parse_duration)]
    retain_age: Option<Duration>,
    /// With --append to a log directory: keep at most N segments, removing the oldest.
    #[arg(long, value_name = "N", requires = "append", conflicts_with = "output",
          value_parser = clap::value_parser!(u64).range(1..))]
    retain_count: Option<u64>,
    /// Target bytes of records per data block (the block target; K, M, G suffixes): larger
    /// blocks compress better (zstd finds repeats only within a block), and damage costs the
    /// whole block it hits; a reader holds one decoded block. 1 puts each record in a block
    /// of its own; at most the largest block body, 64 MiB. [default: 256K, or 2M with --zstd:
    /// on real JSON 256K blocks were 1.13-1.25x the size of `zstd -3`, 2M blocks 1.01-1.08x,
    /// a damaged byte costing 93-268 KB stored]
    #[arg(long, value_name = "BYTES", value_parser = args::bytes_in(1..=BLOCK_TARGET_MAX),
          visible_alias = "block-size", conflicts_with = "atomic_pipe")]
    block_target: Option<usize>,
    /// A metadata entry, written in one metadata block after the header; repeatable.
    #[arg(long = "meta", value_name = "KEY=VALUE", value_parser = parse_meta)]
    meta: Vec<(String, String)>,
    /// How records are delimited in the input.
    #[arg(long, value_enum, default_value = "lines")]
    framing: Framing,
    /// Compress data blocks with zstd at LEVEL: 1..=22 smaller and slower, 3 balances the two
    /// (see BENCHMARKS.md), negative levels down to -131072 faster (zstd's --fast=N).
    #[arg(long, value_name = "LEVEL", allow_hyphen_values = true, value_parser = args::parse_zstd)]
    zstd: Option<Compression>,
    /// Compress with this zstd dictionary (made by `cobsfile dict train`); it is embedded in
    /// the file unless --external-dict is given.
    #[arg(long, value_name = "FILE", requires = "zstd")]
    dict: Option<PathBuf>,
    /// Do not embed the dictionary: readers need the same file (`cat --dict FILE`).
    #[arg(long, requires = "dict")]
    external_dict: bool,
    /// Store compressed records each after its length (codecs 1 and 2), as files were
    /// before records as lines, for readers that predate them. By default a compressed
    /// block whose records hold no newline stores them as lines (codecs 3 and 4, spec 8.3),
    /// 5-30 % smaller on short-line logs.
    #[arg(long, requires = "zstd")]
    no_lines: bool,
    /// Compress blocks on N threads (0: one per core); the output is the same as with one.
    #[arg(long, value_name = "N", default_value = "1", value_parser = args::parse_threads)]
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
    #[arg(long, value_name = "BYTES", conflicts_with = "append",
          value_parser = args::bytes_in(1..=u64::MAX))]
    pipe_buffer: Option<usize>,
    /// Typed records: each input record (a line) is a JSON value of the Avro schema in
    /// FILE.avsc, written as an Avro datum in single-object encoding, with the schema stored
    /// in the file (spec 15). A line that is not such a value stops the command (naming its
    /// number and where in the value), leaving no output, unless --invalid skip.
    #[arg(long, value_name = "FILE.avsc")]
    schema: Option<PathBuf>,
    /// With --schema: what a line that is not a value of the schema does. stop: the command
    /// fails and writes nothing; skip: it is reported and left out, the command goes on and
    /// exits with 3.
    #[arg(long, value_enum, default_value = "stop", requires = "schema")]
    invalid: Invalid,
    /// Give each record the event time its JSON field NAME holds (a top-level field of each
    /// record, a JSON object): an RFC 3339 string (2025-12-01T10:00:00Z), or a number of
    /// --time-unit since the epoch. With --schema, a field of a timestamp logical type
    /// (timestamp-millis, -micros, -nanos; null: no time). Readers then read time windows
    /// (`cat --since/--until`) without decoding blocks outside them. A record without such a
    /// time stops the command, naming it.
    #[arg(long, value_name = "NAME")]
    time_field: Option<String>,
    /// With --time-field: the unit of numeric times (seconds may have a fraction).
    #[arg(
        long,
        value_enum,
        default_value = "s",
        requires = "time_field",
        conflicts_with = "schema"
    )]
    time_unit: TimeUnit,
    /// Input file, or `-` for stdin.
    #[arg(value_name = "INPUT", default_value = "-")]
    input: PathBuf,
}

/// `--invalid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Invalid {
    Stop,
    Skip,
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
            Ok(Durability::group(Duration::from_millis(ms)))
        }
    }
}

fn parse_meta(arg: &str) -> Result<(String, String), String> {
    let (key, value) = arg
        .split_once('=')
        .ok_or_else(|| format!("expected KEY=VALUE, got {arg:?}"))?;
    if key.is_empty() {
        return Err(format!("the key is empty in {arg:?}; expected KEY=VALUE"));
    }
    Ok((key.to_owned(), value.to_owned()))
}

/// The largest block target: a block body is at most this large (the readers' default limit),
/// so a larger target could never be reached.
const BLOCK_TARGET_MAX: u64 = cobsfile::DEFAULT_MAX_BODY_SIZE as u64;

/// Failures while packing, with the input's offsets.
enum PackError {
    Framing(FramingError),
    Library(cobsfile::Error),
    /// An input record that is not a value of the schema (`--schema`).
    Invalid(String),
}

impl From<cobsfile::Error> for PackError {
    fn from(e: cobsfile::Error) -> Self {
        PackError::Library(e)
    }
}

impl From<cobsfile::avro::Error> for PackError {
    fn from(e: cobsfile::avro::Error) -> Self {
        match e {
            cobsfile::avro::Error::File(e) => PackError::Library(e),
            e => PackError::Invalid(e.to_string()),
        }
    }
}

/// Writes each input record to `sink`: as it is, or, with a schema, as the typed record of
/// the JSON value it holds (after the metadata block announcing the schema).
fn typed_or_raw<'a, S: cobsfile::avro::RecordSink + 'a>(
    lines: &'a mut Option<JsonLines>,
    time_field: Option<TimeField>,
    sink: S,
) -> Result<impl FnMut(&[u8]) -> Result<(), PackError> + 'a, Failure> {
    enum Out<'a, S> {
        Raw(S),
        Typed(Box<cobsfile::avro::AvroWriter<S>>, &'a mut JsonLines),
    }
    let mut out = match lines.as_mut() {
        Some(lines) => Out::Typed(
            Box::new(
                cobsfile::avro::AvroWriter::new(sink, lines.schema().clone())
                    .map_err(|e| Failure::new(e.to_string()))?,
            ),
            lines,
        ),
        None => Out::Raw(sink),
    };
    let mut number = 0u64;
    Ok(move |record: &[u8]| {
        number += 1;
        let untimed = |e: String| PackError::Invalid(format!("record {number}: {e}"));
        match &mut out {
            Out::Raw(sink) => {
                let time = (time_field.as_ref())
                    .map(|field| field.time_of(record))
                    .transpose()
                    .map_err(untimed)?;
                sink.write_record_at(record, time)
                    .map(drop)
                    .map_err(PackError::from)
            }
            Out::Typed(writer, lines) => match lines.value(record) {
                Ok(Some(value)) => {
                    let time = match &time_field {
                        Some(field) => {
                            cobsfile::avro::timestamp_field(&value, &field.name).map_err(untimed)?
                        }
                        None => None,
                    };
                    writer
                        .write_value_at(&value, time)
                        .map(drop)
                        .map_err(PackError::from)
                }
                Ok(None) => Ok(()),
                Err(message) => Err(PackError::Invalid(message)),
            },
        }
    })
}

impl From<FramingError> for PackError {
    fn from(e: FramingError) -> Self {
        PackError::Framing(e)
    }
}

pub fn run(args: Args) -> Result<Outcome, Failure> {
    // Everything the command line says is checked before any file is opened for writing.
    let compression = args.zstd;
    let dictionary = args
        .dict
        .as_deref()
        .map(super::load_dictionary)
        .transpose()?;
    let mut lines = match &args.schema {
        Some(path) => Some(JsonLines::new(
            super::typed::load_schema(path)?,
            args.invalid == Invalid::Skip,
            input::name(&args.input),
        )),
        None => None,
    };
    let sealing_key = (args.seal.as_deref())
        .map(cobsfile::key::SealingKey::read)
        .transpose()
        .map_err(|e| Failure::new(e.to_string()))?;
    let seal_every = args
        .seal_every
        .map_or(cobsfile::seal::DEFAULT_SEAL_BYTES, |b| b as u64);
    let (source, size) = input::open_records(&args.input)?;
    if let Some(log) = &args.append {
        let sealing = sealing_key.map(|key| (key, seal_every));
        append(
            &args,
            log,
            source,
            size,
            (compression, dictionary, sealing),
            &mut lines,
        )?;
        return Ok(skipped(&lines));
    }
    let output = match &args.output {
        Some(path) if !is_stdio(path) => Some(Output::create(path, args.force, &[&args.input])?),
        _ => None,
    };
    let closed = Arc::new(AtomicBool::new(false));
    let (sink, out_name) = open_output(output.as_ref(), &args.input, &closed)?;
    if let Some(bytes) = args.pipe_buffer {
        resize_pipe(bytes, args.output.as_ref());
    }
    let mut builder = WriterBuilder::new()
        .threads(args.threads)
        .index(!args.no_index)
        .line_layout(!args.no_lines);
    if let Some(target) = args.block_target {
        builder = builder.block_target(target);
    }
    if args.atomic_pipe {
        builder = builder.atomic_writes(cobsfile::pipe::PIPE_BUF);
    }
    if let Some(compression) = compression {
        builder = builder.compression(compression);
    }
    if let Some(dictionary) = dictionary {
        builder = builder.dictionary(dictionary, !args.external_dict);
    }
    if let Some(key) = sealing_key {
        builder = builder.seal(key).seal_every(seal_every, None);
    }
    let packed = (|| {
        let mut writer = builder.build(sink).map_err(|e| Failure::at(&out_name, e))?;
        let meta = metadata(&args);
        if !meta.is_empty() {
            writer
                .write_metadata(meta)
                .map_err(|e| Failure::at(&out_name, e))?;
        }
        let max_len = writer.max_record_len();
        let records = Records {
            args: &args,
            source,
            size,
            out_name: &out_name,
        };
        let write = typed_or_raw(&mut lines, time_field(&args), &mut writer)?;
        let unterminated = records.feed("packing", max_len, write)?;
        // Typed records are values, not lines: nothing to say of a final newline.
        if unterminated && lines.is_none() {
            // So that `cat` gives the input back byte for byte (spec 8.2).
            writer
                .write_metadata([(FINAL_NEWLINE_KEY, "no")])
                .map_err(|e| Failure::at(&out_name, e))?;
        }
        writer.finish().map_err(|e| Failure::at(&out_name, e))
    })();
    match packed {
        // The reader of stdout went away (`pack big | head -c 10`): a normal end.
        Err(_) if closed.load(Ordering::Relaxed) => return Ok(Outcome::Clean),
        Err(failure) => return Err(failure),
        Ok(_) => {}
    }
    if let Some(output) = output {
        output.persist()?;
    }
    Ok(skipped(&lines))
}

/// The metadata entries a file gets before its records: `--meta`'s, and with `--time-field`
/// the field its times come from, by which `sql` names the time column.
fn metadata(args: &Args) -> Vec<(&str, &str)> {
    let mut entries: Vec<(&str, &str)> = (args.meta.iter())
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    if let Some(name) = &args.time_field {
        entries.push((cobsfile::TIME_FIELD_KEY, name));
    }
    entries
}

/// `--time-field` and `--time-unit`.
fn time_field(args: &Args) -> Option<TimeField> {
    (args.time_field.clone()).map(|name| TimeField {
        name,
        unit: args.time_unit,
    })
}

/// Clean, or with lines skipped by `--invalid skip` (said on stderr), damaged: records of the
/// input are not in the output.
fn skipped(lines: &Option<JsonLines>) -> Outcome {
    match lines {
        Some(lines) if lines.skipped > 0 => {
            eprintln!(
                "cobsfile: {} line(s) skipped: not values of the schema",
                lines.skipped
            );
            Outcome::Damaged
        }
        _ => Outcome::Clean,
    }
}

/// Standard output, noting when its reader has gone away.
struct Stdout {
    file: File,
    closed: Arc<AtomicBool>,
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let written = self.file.write(buf);
        if matches!(&written, Err(e) if e.kind() == io::ErrorKind::BrokenPipe) {
            self.closed.store(true, Ordering::Relaxed);
        }
        written
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// Where the file goes: the output file being written, or a handle on stdout that writes
/// each block straight through (stdout's own line buffering would split blocks).
fn open_output(
    output: Option<&Output>,
    input: &std::path::Path,
    closed: &Arc<AtomicBool>,
) -> Result<(Box<dyn Write + Send>, String), Failure> {
    if let Some(output) = output {
        return Ok((output.writer()?, output.name()));
    }
    if io::stdout().is_terminal() {
        return Err(Failure::usage(
            "refusing to write a binary file to a terminal; use -o FILE or redirect stdout",
        ));
    }
    super::output::refuse_stdout_input(&[input])?;
    let fd = io::stdout().as_fd().try_clone_to_owned()?;
    let stdout = Stdout {
        file: File::from(fd),
        closed: Arc::clone(closed),
    };
    Ok((Box::new(stdout), "<stdout>".into()))
}

/// `pack --append LOG`: the records go to the log through an appender.
fn append(
    args: &Args,
    log: &std::path::Path,
    source: Box<dyn Read>,
    size: Option<u64>,
    (compression, dictionary, sealing): (
        Option<Compression>,
        Option<Dictionary>,
        Option<(cobsfile::key::SealingKey, u64)>,
    ),
    lines: &mut Option<JsonLines>,
) -> Result<Outcome, Failure> {
    let name = log.display().to_string();
    let fail = |e| Failure::at(&name, e);
    // Appending a log to itself would read what it appends, without end.
    super::output::refuse_inputs(log, &[&args.input])?;
    let mut builder = AppenderBuilder::new()
        .threads(args.threads)
        .durability(args.durability.unwrap_or(Durability::None))
        .line_layout(!args.no_lines);
    if let Some(target) = args.block_target {
        builder = builder.block_target(target);
    }
    if let Some(compression) = compression {
        builder = builder.compression(compression);
    }
    if let Some(dictionary) = dictionary {
        builder = builder.dictionary(dictionary, !args.external_dict);
    }
    if let Some((key, every)) = sealing {
        builder = builder.seal(key).seal_every(every, None);
    }
    let segmented = [args.segment_size, args.retain_size]
        .iter()
        .any(Option::is_some)
        || args.segment_age.is_some()
        || args.retain_age.is_some()
        || args.retain_count.is_some();
    if segmented && log.is_file() {
        return Err(fail(cobsfile::Error::Io(io::Error::other(
            "a file, not a log directory: --segment-* and --retain-* options keep a log as a \
             directory of segments",
        ))));
    }
    // A directory without segments becomes a log directory only when asked: `--append` of
    // some other directory is more likely a slip than a wish.
    let mut log = if segmented || super::log_dir(log).is_some() {
        if let Some(bytes) = args.segment_size {
            builder = builder.segment_size(bytes as u64);
        }
        if let Some(age) = args.segment_age {
            builder = builder.segment_age(age);
        }
        if let Some(bytes) = args.retain_size {
            builder = builder.retain_size(bytes as u64);
        }
        if let Some(age) = args.retain_age {
            builder = builder.retain_age(age);
        }
        if let Some(count) = args.retain_count {
            builder = builder.retain_count(count);
        }
        builder.open_dir(log).map_err(fail)?
    } else {
        builder.open(log).map_err(fail)?
    };
    let name = match log.segment() {
        Some(segment) => segment.display().to_string(),
        None => name.clone(),
    };
    let fail = |e| Failure::at(&name, e);
    // Only an appender alone on the log knows a tail is torn: with others on it, the bytes
    // may be a block another writer is writing right now, and are not called torn.
    let opened = log.opened();
    if opened.header_lost {
        eprintln!(
            "cobsfile: {name}: the log's header is lost (zeros where it should be, as a power \
             cut before the log's first sync leaves them); appending after its intact blocks \
             (`cobsfile recover` writes a clean copy)"
        );
    }
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
    // Announced: written now, and again at the start of each new segment of a log directory
    // (and of a log truncated under the appender), so that each reads alone: `sql` finds its
    // time column by `cobsfile.time_field` in every segment.
    let meta = metadata(args);
    if !meta.is_empty() {
        log.announce(meta).map_err(fail)?;
    }
    let max_len = log.max_record_len();
    let records = Records {
        args,
        source,
        size,
        out_name: &name,
    };
    // A log's last line stays open to the lines appended after it: `cat` ends it with a
    // newline whether the input had one or not.
    // A typed writer announces its schema each time it opens the log (spec 15.1).
    let write = typed_or_raw(lines, time_field(args), &mut log)?;
    records.feed("appending", max_len, write)?;
    log.flush().map_err(fail)?;
    if let Some(error) = log.wait_segments() {
        // The records are in; what a pass left undone waits for the next one.
        eprintln!("cobsfile: warning: {error}");
    }
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
    /// `verb`. Returns whether the input's last line had no newline.
    fn feed(
        self,
        verb: &str,
        max_len: usize,
        mut write: impl FnMut(&[u8]) -> Result<(), PackError>,
    ) -> Result<bool, Failure> {
        let progress = Progress::start(self.size, verb);
        let mut input = BufReader::with_capacity(1 << 20, self.source);
        let mut consumed = 0u64;
        let fed = self
            .args
            .framing
            .read_records(&mut input, max_len, |record| {
                write(record)?;
                consumed += record.len() as u64;
                if consumed & 0xfffff < record.len() as u64 {
                    progress.set(consumed);
                }
                Ok(())
            });
        match fed {
            Ok(unterminated) => Ok(unterminated),
            Err(PackError::Framing(e)) => Err(Failure::at(&input::name(&self.args.input), e)),
            Err(PackError::Library(e)) => Err(Failure::at(self.out_name, e)),
            Err(PackError::Invalid(e)) => Err(Failure::at(&input::name(&self.args.input), e)),
        }
    }
}
