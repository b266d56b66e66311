//! `cobsfile cat`: every intact record to stdout.

use std::io::{self, BufWriter, IsTerminal, Write};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cobsfile::{
    Block, BlockType, Damage, Error, FollowEvent, FollowerBuilder, Item, RangeSink, Reader, Source,
};

use super::framing::notes_no_final_newline;
use super::input::{self, ReadJob};
use super::progress::Progress;
use super::{is_stdio, quiet_broken_pipe, Failure, Framing, Outcome, ReadOptions};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// How to delimit records on output.
    #[arg(long, value_enum, default_value = "lines")]
    framing: Framing,
    #[command(flatten)]
    read: ReadOptions,
    /// Start at record K (0-based). With a usable index, K counts the records as written and
    /// the read goes straight to record K, even past damage. Without one (or on stdin) the
    /// records before are read and discarded, and K counts the records read: records lost to
    /// damage before K are not counted, so the output starts that many records later.
    #[arg(long, value_name = "K", default_value_t = 0)]
    skip: u64,
    /// Stop after N records.
    #[arg(long, value_name = "N")]
    limit: Option<u64>,
    /// Only records whose event time (written by `pack --time-field`) is at or after T: an
    /// RFC 3339 time (2025-12-01T10:00:00Z), a local date and time (2025-12-01 10:00:00,
    /// 2025-12-01), epoch seconds (1764583200, @1764583200.5), now, today, yesterday,
    /// tomorrow, or relative to now (-1h, -30min, "2 days ago"). Blocks whose times all lie
    /// outside are passed over undecoded; records without a time are left out, and said so
    /// on stderr. With --follow, records as they land whose times are in the window.
    #[arg(long, value_name = "T", value_parser = super::when::parse_when, allow_hyphen_values = true)]
    since: Option<i64>,
    /// Only records whose event time is at or before T (the forms of --since).
    #[arg(long, value_name = "T", value_parser = super::when::parse_when, allow_hyphen_values = true)]
    until: Option<i64>,
    /// Keep reading as the file grows and write records as their blocks land, until
    /// interrupted. A block still being written is waited for; the file being truncated or
    /// replaced (log rotation) is reported on stderr and followed. After `copytruncate`, what
    /// the copy beside it (FILE.1, FILE-DATE) holds past the last block read comes first.
    #[arg(long, short = 'f')]
    follow: bool,
    /// Typed records (written by `pack --schema`): each as one line of JSON in Avro's JSON
    /// encoding, decoded with the schema it names (bytes and fixed as strings of characters
    /// U+0000..U+00FF, a union as {"branch": value} or null, logical types as their
    /// underlying type). A record that cannot be decoded is reported, never guessed at.
    #[arg(long, conflicts_with_all = ["follow", "framing"])]
    json: bool,
    /// With --json: resolve every record to this schema (Avro's schema resolution: fields
    /// added with defaults, fields removed, promotions, aliases).
    #[arg(long, value_name = "FILE.avsc", requires = "json")]
    reader_schema: Option<PathBuf>,
    #[command(flatten)]
    datums: super::typed::DatumArgs,
    /// With --authentic: the public key the seals are verified with (`cobsfile key generate`'s
    /// NAME.pub; again for more keys).
    #[arg(long, value_name = "PUB", requires = "authentic")]
    key: Vec<PathBuf>,
    /// Only records that a valid seal by --key covers (spec 9.10): the file is verified first,
    /// each tampering and the records no seal covers are reported on stderr and left out
    /// (exit 6 for tampering, 7 for unsealed records).
    #[arg(long, requires = "key", conflicts_with_all = ["follow", "json"])]
    authentic: bool,
    /// The cobsfiles, read one after the other (`-` for stdin). A log directory (spec 11.4) is
    /// one log: its segments in order. --skip and --limit apply to each FILE (to a log
    /// directory's records together); --follow takes one, and follows a log directory across
    /// its segments.
    #[arg(value_name = "FILE", required = true)]
    files: Vec<PathBuf>,
}

pub fn run(mut args: Args) -> Result<Outcome, Failure> {
    args.read.window = super::when::window(args.since, args.until)?;
    if args.json {
        let reader_schema = args
            .reader_schema
            .as_deref()
            .map(super::typed::load_schema)
            .transpose()?;
        // Each FILE from its start, so that every schema block before the records is read:
        // --skip counts records read. A log directory's segments go on where the one before
        // left off, from the one that holds the first record.
        return super::each_arg(&args.files, None, |file| {
            let left = std::rc::Rc::new(std::cell::Cell::new((
                args.skip,
                args.limit.unwrap_or(u64::MAX),
            )));
            let one = |path: &Path| {
                let (skip, limit) = left.get();
                let job = super::typed::JsonCat {
                    name: input::name(path),
                    reader_schema: reader_schema.clone(),
                    skip,
                    limit: Some(limit),
                    typed: args.datums.reader(),
                    left: Some(std::rc::Rc::clone(&left)),
                };
                input::read(path, &args.read, job)
            };
            let Some(dir) = super::log_dir(file) else {
                return one(file);
            };
            let log = cobsfile::segments::LogDir::open(dir)
                .map_err(|e| Failure::at(&input::name(dir), e))?;
            let (first, skip) = log.find_record(&args.read.builder()?, args.skip);
            left.set((skip, left.get().1));
            let mut worst = Outcome::Clean;
            for segment in &log.segments()[first..] {
                if left.get().1 == 0 {
                    break;
                }
                worst = worst.worst(one(&segment.path)?);
            }
            Ok(worst)
        });
    }
    if args.authentic {
        let keys = super::verify::read_keys(&args.key)?;
        return super::each_file(&args.files, None, |file| run_authentic(&args, file, &keys));
    }
    if args.follow {
        let [file] = &args.files[..] else {
            return Err(Failure::usage("--follow follows one file"));
        };
        return run_follow(&args, file);
    }
    if args.skip > 0 || args.limit.is_some() {
        return super::each_arg(&args.files, None, |file| match super::log_dir(file) {
            Some(dir) => run_log(&args, dir),
            None => run_one(&args, file),
        });
    }
    super::each_file(&args.files, None, |file| run_one(&args, file))
}

/// `cat --skip/--limit` of a log directory: the records of its segments in order, skipped and
/// limited together, from the segment the library finds the first in
/// ([`cobsfile::segments::LogDir::find_record`]).
fn run_log(args: &Args, dir: &Path) -> Result<Outcome, Failure> {
    let log =
        cobsfile::segments::LogDir::open(dir).map_err(|e| Failure::at(&input::name(dir), e))?;
    let builder = args.read.builder()?;
    let (first, mut skip) = log.find_record(&builder, args.skip);
    let mut left = args.limit;
    let mut worst = Outcome::Clean;
    for segment in &log.segments()[first..] {
        if left == Some(0) {
            break;
        }
        let written = std::rc::Rc::new(std::cell::Cell::new(0));
        let job = Cat {
            name: input::name(&segment.path),
            framing: args.framing,
            limit: left,
            written: Some(std::rc::Rc::clone(&written)),
        };
        worst = worst.worst(input::read_from(&segment.path, &args.read, skip, job)?);
        skip = 0;
        left = left.map(|n| n.saturating_sub(written.get()));
    }
    Ok(worst)
}

/// `cat --authentic`: the file verified against its seals first (with a window, only the
/// blocks about the window's, spec 9.10.1), then the records of the blocks found authentic,
/// in order, read in ranges on the options' threads (an object's by byte ranges when a window
/// says which); tampering, damage and unsealed records reported on stderr, as `verify --key`
/// reports them.
fn run_authentic(
    args: &Args,
    path: &Path,
    keys: &[cobsfile::key::VerifyingKey],
) -> Result<Outcome, Failure> {
    let name = input::name(path);
    let builder = args.read.builder()?;
    let held = super::verify::Held::open(path, &name, args.read.window.is_some())?;
    let (report, sealed) = held.verify_seals(&builder, keys, &name)?;
    super::verify::not_a_cobsfile(&name, &report)?;
    for d in &report.damaged {
        eprintln!("cobsfile: {name}: {d}");
    }
    for t in &sealed.tampered {
        eprintln!("cobsfile: {name}: {t}; left out");
    }
    let (unsealed_blocks, unsealed_records) = sealed.count(cobsfile::seal::Status::Unsealed);
    if sealed.has_unsealed_content() {
        eprintln!(
            "cobsfile: {name}: {unsealed_records} record(s) in {unsealed_blocks} block(s) no seal covers: left out"
        );
    }
    if sealed.chains.is_empty() {
        eprintln!("cobsfile: {name}: no valid seal by the key(s) given: nothing is authentic");
    }
    let framing = args.framing;
    let format = |part: &mut Records, block: &Block<'_>| {
        for record in block.records() {
            if part.failed.is_none() {
                part.failed = framing.write_record(&mut part.out, record).err();
                part.ends.push(part.out.len());
            }
        }
    };
    let mut sink = Authentic {
        out: BufWriter::with_capacity(1 << 18, io::stdout().lock()),
        skip: args.skip,
        left: args.limit.unwrap_or(u64::MAX),
        closed: false,
        failed: None,
    };
    let read = held.read_authentic(&builder, &sealed, format, &mut sink, &name)?;
    if let Some(failure) = sink.failed {
        return Err(failure);
    }
    if sink.closed || !quiet_broken_pipe(sink.out.flush())? {
        return Ok(Outcome::Clean);
    }
    untimed_note(&name, read.untimed_blocks_passed);
    Ok(super::verify::sealed_outcome(&report, &sealed, None))
}

/// Authentic records of a range, formatted, and where each ends.
#[derive(Default)]
struct Records {
    out: Vec<u8>,
    ends: Vec<usize>,
    failed: Option<io::Error>,
}

/// Writes authentic records in order, past the first `skip` and at most `left`.
struct Authentic<W: Write> {
    out: W,
    skip: u64,
    left: u64,
    /// The reader of the output went away.
    closed: bool,
    failed: Option<Failure>,
}

impl<W: Write> RangeSink<Records> for Authentic<W> {
    fn part(&mut self, part: Records) -> ControlFlow<()> {
        let skipped = usize::try_from(self.skip)
            .unwrap_or(usize::MAX)
            .min(part.ends.len());
        self.skip -= skipped as u64;
        let kept = usize::try_from(self.left)
            .unwrap_or(usize::MAX)
            .min(part.ends.len() - skipped);
        self.left -= kept as u64;
        let from = skipped.checked_sub(1).map_or(0, |i| part.ends[i]);
        let to = (skipped + kept)
            .checked_sub(1)
            .map_or(0, |i| part.ends[i])
            .max(from);
        let written =
            (self.out.write_all(&part.out[from..to])).and(part.failed.map_or(Ok(()), Err));
        match quiet_broken_pipe(written) {
            Ok(true) if self.left > 0 => ControlFlow::Continue(()),
            Ok(true) => ControlFlow::Break(()),
            Ok(false) => {
                self.closed = true;
                ControlFlow::Break(())
            }
            Err(failure) => {
                self.failed = Some(failure);
                ControlFlow::Break(())
            }
        }
    }
}

/// `cat` of one file.
fn run_one(args: &Args, path: &Path) -> Result<Outcome, Failure> {
    // Range reads go through the whole file: with --skip or --limit, the reader (decoding on
    // the same threads) goes straight to the record and stops after the last. With a time
    // window, a mapped file's reader goes by the file's time index to the blocks of the
    // window, while an object's (which streams it) would fetch all of it: an object's range
    // reads, on any number of threads, fetch only the window's blocks.
    let plain = args.skip == 0 && args.limit.is_none();
    let windowed = args.read.window.is_some();
    if plain && (args.read.threads > 1 || windowed) {
        if let Some(url) = input::object_url(path) {
            let object =
                cobsfile_store::RemoteObject::open(url).map_err(|e| Failure::new(e.to_string()))?;
            return run_split(args, path, Whole::Remote(object.remote()));
        }
    }
    if plain && args.read.threads > 1 && !windowed {
        if let input::Input::Mapped(file) = input::open(path)? {
            return run_split(args, path, Whole::Slice(file.bytes()));
        }
    }
    let job = Cat {
        name: input::name(path),
        framing: args.framing,
        limit: args.limit,
        written: None,
    };
    input::read_from(path, &args.read, args.skip, job)
}

struct Cat {
    name: String,
    framing: Framing,
    /// The most records to write.
    limit: Option<u64>,
    /// Where to say how many records were written, for a log directory's next segment.
    written: Option<std::rc::Rc<std::cell::Cell<u64>>>,
}

impl ReadJob for Cat {
    type Output = Outcome;

    fn run<S: Source>(self, mut reader: Reader<S>, size: Option<u64>) -> Result<Outcome, Failure> {
        let reader = &mut reader;
        let progress = Progress::start(size, "reading");
        let to_terminal = io::stdout().is_terminal();
        let stdout = io::stdout().lock();
        let mut out = BufWriter::with_capacity(1 << 18, stdout);
        let mut diagnostics = input::Diagnostics::new(self.name.clone());
        let mut written = 0u64;
        let mut left = self.limit.unwrap_or(u64::MAX);
        let lines = self.framing == Framing::Lines;
        // With lines, each record's newline is written when the next record comes, or at the
        // end unless the file notes that its input's last line had none (spec 8.2).
        let (mut newline_owed, mut final_newline) = (false, true);
        while left > 0 {
            let record = match reader.next_item() {
                None => break,
                Some(Ok(Item::Record(record))) => record,
                Some(Ok(Item::Metadata(block))) => {
                    final_newline &= !notes_no_final_newline(&block);
                    // Typed records are binary Avro: not for a terminal, as pack refuses to
                    // write a cobsfile to one.
                    if to_terminal
                        && block
                            .entries()
                            .any(|(k, _)| k == cobsfile::avro::SCHEMA_KEY)
                    {
                        return Err(Failure::at(
                            &self.name,
                            "holds typed records (binary Avro), which are not written to a \
                             terminal: `cobsfile cat --json` shows them as JSON; redirect the \
                             output to have the bytes",
                        ));
                    }
                    continue;
                }
                Some(Err(e)) => {
                    diagnostics.error(reader, e)?;
                    continue;
                }
            };
            left -= 1;
            written += record.len() as u64;
            let wrote = if lines {
                let owed: &[u8] = if newline_owed { b"\n" } else { b"" };
                newline_owed = true;
                final_newline = true;
                out.write_all(owed).and_then(|()| out.write_all(record))
            } else {
                self.framing.write_record(&mut out, record)
            };
            if !quiet_broken_pipe(wrote)? {
                return diagnostics.finish(reader);
            }
            if written & 0xfffff < record.len() as u64 {
                progress.set(written);
            }
        }
        if let Some(count) = &self.written {
            count.set(self.limit.unwrap_or(u64::MAX) - left);
        }
        if newline_owed && (final_newline || left == 0) {
            quiet_broken_pipe(out.write_all(b"\n"))?;
        }
        quiet_broken_pipe(out.flush())?;
        let unknown = reader.stats().unknown_blocks;
        if unknown > 0 {
            eprintln!(
                "cobsfile: {}: skipped {unknown} block(s) of unknown type",
                self.name
            );
        }
        untimed_note(&self.name, reader.stats().untimed_blocks_passed);
        diagnostics.finish(reader)
    }
}

/// How long `cat --follow` waits for records before it looks whether its output was closed.
const IDLE_LOOK: Duration = Duration::from_millis(250);

/// Whether standard output is a pipe whose reader has gone away (poll reports an error on
/// it; a terminal or a file never does).
fn output_closed() -> bool {
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        let mut fd = libc::pollfd {
            fd: io::stdout().as_raw_fd(),
            events: 0,
            revents: 0,
        };
        // SAFETY: `fd` is one valid pollfd that outlives the call, and the count says one.
        let ready = unsafe { libc::poll(&mut fd, 1, 0) };
        ready > 0 && fd.revents & (libc::POLLERR | libc::POLLHUP) != 0
    }
    #[cfg(not(unix))]
    false
}

/// `cat --follow`: records as their blocks land, each batch of those ready written out before
/// waiting for more, so that a pipeline sees them at once. Runs until interrupted, the reader
/// of the output goes away, or `--limit` records were written.
fn run_follow(args: &Args, path: &Path) -> Result<Outcome, Failure> {
    let name = input::name(path);
    if is_stdio(path) {
        return Err(Failure::at(&name, "--follow needs a file"));
    }
    let mut follower = FollowerBuilder::new()
        .reader(args.read.builder()?)
        .open(path)
        .map_err(|e| Failure::at(&name, e))?;
    let mut out = BufWriter::with_capacity(1 << 16, io::stdout().lock());
    let mut outcome = Outcome::Clean;
    let mut skip = args.skip;
    let mut left = args.limit.unwrap_or(u64::MAX);
    // Zero while events are ready; once none is, the output is flushed and the wait is long.
    let mut wait = Duration::ZERO;
    while left > 0 {
        let Some(event) = follower.next_event_timeout(wait) else {
            // Nothing new: flush, and end if the reader of the output went away (`cat -f log
            // | head -1`), which a wait for the next record would only notice when it lands.
            if !quiet_broken_pipe(out.flush())? || output_closed() {
                return Ok(outcome);
            }
            wait = IDLE_LOOK;
            continue;
        };
        wait = Duration::ZERO;
        match event {
            Ok(FollowEvent::Record(_)) if skip > 0 => skip -= 1,
            Ok(FollowEvent::Record(record)) => {
                left -= 1;
                if !quiet_broken_pipe(args.framing.write_record(&mut out, record))? {
                    return Ok(outcome);
                }
            }
            // A log directory's next segment: nothing to say, the records go on.
            Ok(FollowEvent::NextSegment) => {}
            Ok(event) => eprintln!("cobsfile: {name}: {event}"),
            Err(e) => {
                if let Error::Damaged { cause, .. } = &e {
                    outcome = outcome.worst(Outcome::of_damage(cause));
                }
                eprintln!("cobsfile: {name}: {e}");
            }
        }
    }
    quiet_broken_pipe(out.flush())?;
    Ok(outcome)
}

/// A whole file read in ranges: in memory (mapped), or an object fetched by byte ranges.
enum Whole<'a> {
    Slice(&'a [u8]),
    Remote(&'a cobsfile::Remote<cobsfile_store::StoreFetch>),
}

/// `cat --threads N` of a file: the file is read in ranges on N threads (see
/// `ReaderBuilder::read_ranges`; an object's ranges each fetched by the thread that reads
/// it), each formatting its records into a buffer that this thread writes out in order.
fn run_split(args: &Args, path: &Path, whole: Whole<'_>) -> Result<Outcome, Failure> {
    let name = input::name(path);
    let framing = args.framing;
    let format = |part: &mut Part, block: &Block<'_>| {
        part.blocks += 1;
        if block.info().block_type == BlockType::Metadata {
            part.no_final_newline |= notes_no_final_newline(block);
        }
        if part.failed.is_none() {
            for record in block.records() {
                part.no_final_newline = false;
                if let Err(e) = framing.write_record(&mut part.out, record) {
                    part.failed = Some(e);
                    break;
                }
            }
        }
    };
    let mut sink = Sink {
        name: name.clone(),
        out: io::stdout().lock(),
        lines: framing == Framing::Lines,
        newline_owed: false,
        no_final_newline: false,
        blocks: 0,
        held: Vec::new(),
        failed: None,
        closed: false,
        spare: None,
    };
    let builder = args.read.builder()?;
    let report = match whole {
        Whole::Slice(bytes) => builder.read_ranges(bytes, format, &mut sink),
        Whole::Remote(remote) => remote.read_ranges(&builder, format, &mut sink),
    }
    .map_err(|e| Failure::at(&name, e))?;
    if let Some(failure) = sink.failed {
        return Err(failure);
    }
    // What was read, damaged or unreadable; how the file ends only if it was read to the end.
    let damage = report
        .damaged
        .iter()
        .fold(Outcome::Clean, |o, d| o.worst(Outcome::of_damage(&d.cause)));
    if sink.closed {
        return Ok(damage);
    }
    if sink.newline_owed && !sink.no_final_newline {
        quiet_broken_pipe(sink.out.write_all(b"\n"))?;
    }
    quiet_broken_pipe(sink.out.flush())?;
    super::verify::not_a_cobsfile(&name, &report)?;
    for line in sink.held {
        eprintln!("{line}");
    }
    let unknown: u64 = report.blocks.unknown.values().sum();
    if unknown > 0 {
        eprintln!("cobsfile: {name}: skipped {unknown} block(s) of unknown type");
    }
    untimed_note(&name, report.untimed_blocks_passed);
    let ending = Outcome::of_ending(report.ending);
    if ending != Outcome::Clean {
        let text = super::input::ending_text(report.ending, None);
        eprintln!("cobsfile: {name}: {text}");
    }
    Ok(damage.worst(ending))
}

/// One range's records, formatted.
#[derive(Default)]
struct Part {
    out: Vec<u8>,
    blocks: u64,
    failed: Option<io::Error>,
    /// A metadata block after the part's last record notes that the input's last line had no
    /// newline.
    no_final_newline: bool,
}

/// Writes the ranges' output in order and reports damage on stderr, holding it back until an
/// intact block shows the input is a cobsfile.
struct Sink<W> {
    name: String,
    out: W,
    /// With lines, the newline of the last record written is held back until the next record
    /// or the end, where it is left off when the file notes so, as one reader does.
    lines: bool,
    newline_owed: bool,
    no_final_newline: bool,
    blocks: u64,
    held: Vec<String>,
    failed: Option<Failure>,
    /// The reader of the output went away.
    closed: bool,
    /// A written part, emptied, to format another range into.
    spare: Option<Part>,
}

impl<W: Write> RangeSink<Part> for Sink<W> {
    fn recycle(&mut self) -> Option<Part> {
        self.spare.take()
    }

    fn part(&mut self, mut part: Part) -> ControlFlow<()> {
        let mut bytes = &part.out[..];
        let mut owed: &[u8] = b"";
        if self.lines && !bytes.is_empty() {
            if self.newline_owed {
                owed = b"\n";
            }
            bytes = &bytes[..bytes.len() - 1];
            self.newline_owed = true;
            self.no_final_newline = false;
        }
        self.no_final_newline |= part.no_final_newline;
        let written = self
            .out
            .write_all(owed)
            .and_then(|()| self.out.write_all(bytes))
            .and(part.failed.take().map_or(Ok(()), Err));
        part.no_final_newline = false;
        match quiet_broken_pipe(written) {
            Ok(true) => {}
            Ok(false) => {
                self.closed = true;
                return ControlFlow::Break(());
            }
            Err(failure) => {
                self.failed = Some(failure);
                return ControlFlow::Break(());
            }
        }
        self.blocks += part.blocks;
        part.blocks = 0;
        part.out.clear();
        self.spare = Some(part);
        if self.blocks > 0 {
            for line in self.held.drain(..) {
                eprintln!("{line}");
            }
        }
        ControlFlow::Continue(())
    }

    fn damage(&mut self, damage: &Damage) -> ControlFlow<()> {
        let line = format!("cobsfile: {}: {damage}", self.name);
        if self.blocks == 0 && self.held.len() < 64 {
            self.held.push(line);
        } else {
            eprintln!("{line}");
        }
        ControlFlow::Continue(())
    }
}

/// Says that a read of a time window left out data blocks whose records have no time (spec
/// 9.9), so that a window never hides records silently.
fn untimed_note(name: &str, blocks: u64) {
    if blocks > 0 {
        eprintln!(
            "cobsfile: {name}: left out {blocks} data block(s) whose records have no event time \
             (written without --time-field)"
        );
    }
}
