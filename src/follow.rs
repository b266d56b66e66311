//! Following a growing file: records as their blocks land, like `tail -f` (spec 9.7).
//!
//! A [`Follower`] is a streaming [`Reader`](crate::Reader) over a file whose reads, at the end
//! of the file, say "nothing yet" (`WouldBlock`) instead of "the end": the reader then returns
//! with what it has, and a block cut off at the end of the file is waited for rather than
//! reported as damage. Between reads the follower polls the file, sleeping 10 ms at first and
//! up to 250 ms while nothing happens, and looks for three changes:
//!
//! - the file grew: read on;
//! - the file shrank, or the last bytes read up to the resume point (the closing sync byte
//!   of the last block read) changed: it was cut, and may have grown again since. If it
//!   still holds every block read (a writer cut off a torn block), read again from that
//!   byte, dropping what was read past it; otherwise the file was truncated, and reading
//!   starts again at its beginning ([`FollowEvent::Truncated`]). If a copy of the file made
//!   before it was truncated lies beside it (logrotate's `copytruncate`), what the copy holds
//!   past the last block read is read first;
//! - the path names another file (log rotation): the old file is read to its end, its own
//!   end now final, and reading goes on at the start of the new one
//!   ([`FollowEvent::Replaced`]).
//!
//! A log directory (spec 11.4) is followed across its segments: from the oldest (or, from
//! its end, from the newest), each segment read in turn. Once a newer segment exists, the one
//! followed is still read while it grows (an appender that had not looked yet may add to it)
//! but without its shared lock, so that it can be finished; it is let go once it is finished
//! and read to its end, or removed. Each time it reads, the follower reads what older
//! segments it still holds have first, so nothing written to one is lost or read twice.
//!
//! Ending the input for a moment is also how [`FollowerBuilder::torn_after`] reports a block
//! left incomplete for too long: the reader sees the end, reports the bytes as damage, and
//! then reads on from there.

use std::fs::{self, File, Metadata};
use std::io::{self, Read, Seek, SeekFrom};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use crate::error::{Error, Result};
use crate::mapped;
use crate::reader::{ReaderBuilder, StreamReader};

/// The first wait after the file stopped growing; each further wait doubles it.
const MIN_POLL: Duration = Duration::from_millis(10);
/// The longest wait between two looks at the file.
const MAX_POLL: Duration = Duration::from_millis(250);

/// Options for followers.
///
/// ```no_run
/// use std::time::Duration;
///
/// let mut follower = cobsfile::FollowerBuilder::new()
///     .from_end(true)
///     .torn_after(Duration::from_secs(60))
///     .open("events.cobs")?;
/// loop {
///     match follower.next_event()? {
///         cobsfile::FollowEvent::Record(record) => println!("{}", String::from_utf8_lossy(record)),
///         other => eprintln!("{other}"),
///     }
/// }
/// # Ok::<(), cobsfile::Error>(())
/// ```
#[derive(Debug, Clone, Default)]
#[must_use = "options do nothing until used: each method returns the changed options"]
pub struct FollowerBuilder {
    reader: ReaderBuilder,
    from_end: bool,
    torn_after: Option<Duration>,
}

impl FollowerBuilder {
    /// Default options: read from the start of the file, wait for a block cut off at its end
    /// as long as it takes, read with default [`ReaderBuilder`] options.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads with these options (maximum block size, dictionaries; the follower reads on one
    /// thread).
    pub fn reader(mut self, options: ReaderBuilder) -> Self {
        self.reader = options;
        self
    }

    /// Starts at the end of the file (default false: at its start), like `tail -f -n 0`: only
    /// blocks that open at the file's last sync byte or later are read, so a block being
    /// written when the follower opens is read, and what came before is not. A block
    /// compressed with a dictionary the file embeds before that point is reported as
    /// unreadable unless the dictionary is given with [`ReaderBuilder::dictionary`]. Files
    /// that replace this one are read from their start.
    pub fn from_end(mut self, yes: bool) -> Self {
        self.from_end = yes;
        self
    }

    /// Reports a block left incomplete at the end of the file as damage once the file has
    /// not grown for `idle` (default: never; the block is waited for until bytes after it show
    /// it broken). Bytes written after that, up to the next sync byte, are damage too: a
    /// writer that was only slow loses the block. Without this, a block torn by a writer that
    /// crashed is reported when the next writer fences it with a sync byte (spec 11.1).
    pub fn torn_after(mut self, idle: Duration) -> Self {
        self.torn_after = Some(idle);
        self
    }

    /// A follower of the regular file at `path`, which must exist, or of the log directory
    /// `path` (one that holds segments, spec 11.4) across its segments.
    pub fn open<P: AsRef<Path>>(self, path: P) -> Result<Follower> {
        let path = path.as_ref();
        if path.is_dir() {
            return Follower::open_dir(self, path);
        }
        Follower::open_with(self, path)
    }
}

/// What a follower found next, besides damage (which comes as an error).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FollowEvent<'a> {
    /// A record of an intact data block, borrowed from the follower until its next call.
    Record(&'a [u8]),
    /// The file no longer holds the bytes passed over in it (a block returned, or its closing
    /// sync byte, was cut; it may have grown again since, told by the last bytes read):
    /// reading starts again at its beginning. A cut of only what came after the last block
    /// returned (a torn tail) is read past without an event.
    Truncated {
        /// Bytes that had been read from the file.
        read: u64,
        /// The file's length when the follower noticed.
        len: u64,
        /// The copy of the file (logrotate's `copytruncate`) whose blocks past the last one
        /// read were read before this event, if one was found beside the file.
        copy: Option<PathBuf>,
    },
    /// The path now names another file (log rotation): the old one was read to its end, and
    /// reading goes on at the start of the new one. Offsets in later errors are offsets in
    /// the new file.
    Replaced,
    /// Following a log directory: a newer segment is followed from now on (its path is
    /// [`Follower::path`]); the one before is still read while it grows, until it is finished.
    NextSegment,
}

impl std::fmt::Display for FollowEvent<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FollowEvent::Record(record) => write!(f, "record of {} bytes", record.len()),
            FollowEvent::Truncated { read, len, copy } => {
                write!(
                    f,
                    "truncated after {read} bytes were read (now {len} bytes long)"
                )?;
                if let Some(copy) = copy {
                    write!(f, " (the rest read from its copy {})", copy.display())?;
                }
                write!(f, "; reading again from the start")
            }
            FollowEvent::Replaced => write!(f, "replaced by a new file; reading it from the start"),
            FollowEvent::NextSegment => write!(f, "following the next segment"),
        }
    }
}

/// Reads a growing file: records as complete blocks land, through truncation and rotation.
///
/// Memory is bounded as for any streaming reader: about one block (at most the maximum block
/// size) plus one read. Waiting is polling with sleeps (10 ms, doubling up to 250 ms while
/// the file does not change): an idle follower costs a few system calls a second.
///
/// ```
/// use std::time::Duration;
/// use cobsfile::{FollowEvent, Follower, WriterBuilder};
///
/// # let path = std::env::temp_dir().join(format!("follow-doc-{}.cobs", std::process::id()));
/// let mut writer = WriterBuilder::new().build(std::fs::File::create(&path)?)?;
/// let mut follower = Follower::open(&path)?;
///
/// writer.write_record(b"first event")?;
/// writer.flush()?;
/// match follower.next_event_timeout(Duration::from_secs(5)) {
///     Some(Ok(FollowEvent::Record(record))) => assert_eq!(record, b"first event"),
///     other => panic!("{other:?}"),
/// }
/// // Nothing more: the follower waits, then says so.
/// assert!(follower.next_event_timeout(Duration::from_millis(50)).is_none());
/// # std::fs::remove_file(&path)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Follower {
    path: PathBuf,
    options: FollowerBuilder,
    reader: StreamReader<Tail>,
    /// Which file the reader reads, to tell when the path names another.
    id: FileId,
    /// The file read before the path named this one (rotation): never taken for a copy.
    before: FileId,
    /// The reader reads no more (after an error such as an unsupported version): only a
    /// truncation or a replacement gives it new input.
    stopped: bool,
    /// What to do when the reader, its file's end made final, has read it to that end.
    finishing: Option<Finish>,
    /// The file's length when last looked at, and since when it has been that.
    last_len: u64,
    idle_since: Instant,
    /// A torn block was looked for (see `torn_after`) since the file last changed.
    torn_checked: bool,
    /// The next wait.
    delay: Duration,
    /// The last bytes up to the resume point, to know a copy of the file by.
    witness: Witness,
    /// Following a log directory: where, and the older segments still held.
    dir: Option<Box<DirState>>,
}

/// What a follower of a log directory keeps besides the segment it follows.
#[derive(Debug)]
struct DirState {
    dir: PathBuf,
    /// The sequence number of the segment followed.
    seq: u64,
    /// Older segments still read while they grow, oldest first.
    behind: Vec<Follower>,
    /// When the directory was last looked at for newer segments.
    looked: Instant,
    /// When the older segments were last read.
    polled: Instant,
    /// The older segments are to be read to their ends before the newest: just opened, or
    /// just moved on.
    drain: bool,
}

/// How often, at most, a follower of a log directory busy with its newest segment reads the
/// older ones it holds (at once when the newest has nothing).
const POLL_BEHIND: Duration = Duration::from_millis(10);

/// How often a follower of a log directory looks for a newer segment.
const LOOK_DIR: Duration = Duration::from_millis(100);

/// Why the follower made its file's end final for a moment.
#[derive(Debug)]
enum Finish {
    /// To report a block left incomplete (`torn_after`); then to read on.
    Torn,
    /// To read the old file to its end before this one, which replaced it at the path.
    Replaced(File, FileId),
    /// To read a copy of the file, made before it was truncated, to its end: then the file
    /// (kept here) from its start.
    Copied {
        file: File,
        read: u64,
        len: u64,
        copy: PathBuf,
    },
}

/// The bytes of a followed file that end at its resume point (the closing sync byte of the
/// last block read, spec 9.7): a copy of the file made after they were read holds them too.
#[derive(Debug)]
struct Witness {
    /// The offset of `bytes[0]`.
    at: u64,
    bytes: Vec<u8>,
    /// When the file last held them: a copy made long before holds nothing newer.
    seen: SystemTime,
}

impl Default for Witness {
    fn default() -> Self {
        Witness {
            at: 0,
            bytes: Vec::new(),
            seen: SystemTime::UNIX_EPOCH,
        }
    }
}

impl Witness {
    /// How many bytes a witness holds at most: with the last block's CRC among them, a file
    /// that is not a copy differs.
    const LEN: u64 = 64;

    /// Takes the bytes ending at `resume` (inclusive) from `file`, unless they are taken.
    fn take(&mut self, file: &File, resume: u64) {
        self.seen = SystemTime::now();
        let end = resume + 1;
        if self.at + self.bytes.len() as u64 == end && !self.bytes.is_empty() {
            return;
        }
        let at = end.saturating_sub(Self::LEN);
        self.bytes.resize((end - at) as usize, 0);
        if read_exact_at(file, &mut self.bytes, at).is_ok() {
            self.at = at;
        } else {
            // Cut meanwhile: no witness until the next look.
            self.bytes.clear();
        }
    }

    fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// This witness less its bytes at `end` and after.
    fn clipped(&self, end: u64) -> Witness {
        let keep = end.saturating_sub(self.at).min(self.bytes.len() as u64) as usize;
        Witness {
            at: self.at,
            bytes: self.bytes[..keep].to_vec(),
            seen: self.seen,
        }
    }

    /// Keeps the last of the bytes read from `at` on, after those kept if they end there.
    fn record(&mut self, read: &[u8], at: u64) {
        if read.is_empty() {
            return;
        }
        if self.at + self.bytes.len() as u64 != at {
            self.bytes.clear();
        }
        let len = Self::LEN as usize;
        self.bytes
            .extend_from_slice(&read[read.len().saturating_sub(len)..]);
        let excess = self.bytes.len().saturating_sub(len);
        self.bytes.drain(..excess);
        self.at = at + read.len() as u64 - self.bytes.len() as u64;
        self.seen = SystemTime::now();
    }

    /// Whether `file` holds these bytes where the followed file held them.
    fn in_file(&self, file: &File) -> bool {
        let mut bytes = [0; Self::LEN as usize];
        let bytes = &mut bytes[..self.bytes.len()];
        !self.bytes.is_empty()
            && read_exact_at(file, bytes, self.at).is_ok()
            && *bytes == *self.bytes
    }
}

/// What the follower has for its caller: a record in the reader's block (or in that of an
/// older segment still held), or something owned.
enum Step {
    Record(Range<usize>),
    Behind(usize, Range<usize>),
    Other(Result<FollowEvent<'static>>),
}

impl Follower {
    /// A follower of the regular file at `path` with default options, reading from its start.
    pub fn open<P: AsRef<Path>>(path: P) -> Result<Follower> {
        FollowerBuilder::new().open(path)
    }

    fn open_with(options: FollowerBuilder, path: &Path) -> Result<Follower> {
        let mut file = File::open(path)?;
        let meta = file.metadata()?;
        if !meta.is_file() {
            return Err(Error::NotARegularFile);
        }
        // While the follower reads a file, this crate's appenders fence a torn tail rather
        // than cut it (spec 9.7, 11.1 rule 4): a cut tail grown back between two looks would
        // cost the blocks appended over the bytes already read.
        mapped::share(&file);
        let start = if options.from_end {
            // A block's frame is at most its encoded length plus two varints (as a reader's).
            let limit = options.reader.get_limits().max_length() + 31;
            last_sync(&mut file, meta.len(), limit)?
        } else {
            0
        };
        file.seek(SeekFrom::Start(start))?;
        let reader = options
            .reader
            .stream_reader_at(Tail::new(file, start), start);
        Ok(Follower {
            path: path.to_path_buf(),
            reader,
            id: FileId::of(&meta),
            before: FileId(None),
            options,
            stopped: false,
            finishing: None,
            last_len: meta.len(),
            idle_since: Instant::now(),
            torn_checked: false,
            delay: MIN_POLL,
            witness: Witness::default(),
            dir: None,
        })
    }

    /// A follower of the log directory `dir`: its segments from the oldest (from the newest's
    /// end with [`FollowerBuilder::from_end`]).
    fn open_dir(options: FollowerBuilder, dir: &Path) -> Result<Follower> {
        let segments = crate::segments::list_segments(dir)?;
        let Some(((seq, newest), older)) = segments.split_last() else {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "no segments in it (files named {} and on): not a log directory",
                    crate::segments::segment_name(1)
                ),
            )
            .into());
        };
        let mut behind = Vec::new();
        if !options.from_end {
            for (_, path) in older {
                match Follower::open_with(options.clone(), path) {
                    Ok(follower) => behind.push(follower.let_go()),
                    // Removed by retention since the listing.
                    Err(Error::Io(e)) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
        }
        let mut follower = Follower::open_with(options, newest)?;
        follower.dir = Some(Box::new(DirState {
            dir: dir.to_path_buf(),
            seq: *seq,
            behind,
            looked: Instant::now(),
            polled: Instant::now(),
            drain: true,
        }));
        Ok(follower)
    }

    /// This follower of a segment a newer one follows, without its shared lock, so that the
    /// segment can be finished (spec 11.4); a segment is read on from where it was.
    fn let_go(mut self) -> Follower {
        let _ = self.reader.get_mut().file.unlock();
        self
    }

    /// Whether this follower of an older segment is done with it: the segment is finished and
    /// read to its end, or it was removed and read to its end (it grows no more).
    fn segment_done(&mut self) -> bool {
        let tail = self.reader.get_mut();
        let Ok(len) = tail.file.metadata().map(|m| m.len()) else {
            return true;
        };
        // Asked after the follower had nothing more: its cursor is empty.
        if tail.pos < len {
            return false;
        }
        if !self.path.exists() {
            return true;
        }
        let mut end = [0u8; 10];
        len >= 10
            && read_exact_at(&tail.file, &mut end, len - 10).is_ok()
            && end == crate::segments::END_BLOCK
    }

    /// For a follower of a log directory: something an older segment still held has for the
    /// caller, or a newer segment to follow (the one followed then joins the older ones).
    fn look_dir(&mut self, idle: bool) -> Result<Option<Step>> {
        let Some(state) = self.dir.as_mut() else {
            return Ok(None);
        };
        if !idle && !state.drain && state.polled.elapsed() < POLL_BEHIND {
            return Ok(None);
        }
        state.polled = Instant::now();
        let now = Some(Instant::now());
        for (i, older) in state.behind.iter_mut().enumerate() {
            match older.advance(now) {
                Some(Step::Record(range)) => return Ok(Some(Step::Behind(i, range))),
                Some(Step::Other(other)) => return Ok(Some(Step::Other(other))),
                Some(Step::Behind(..)) | None => {}
            }
        }
        // Everything the older segments hold now is read: on to the newest.
        state.drain = false;
        state.behind.retain_mut(|older| !older.segment_done());
        if !idle || state.looked.elapsed() < LOOK_DIR {
            return Ok(None);
        }
        state.looked = Instant::now();
        let newer = crate::segments::list_segments(&state.dir)?
            .into_iter()
            .find(|(seq, _)| *seq > state.seq);
        let Some((seq, path)) = newer else {
            return Ok(None);
        };
        // The next segment from its start: it was made after this follower looked.
        let mut options = self.options.clone();
        options.from_end = false;
        let next = match Follower::open_with(options, &path) {
            Ok(next) => next,
            Err(Error::Io(e)) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut state = self.dir.take().expect("a directory follower");
        state.seq = seq;
        // What the segment left holds now comes before the next one's first record.
        state.drain = true;
        // More segments may have come meanwhile: the next look lists them at once.
        state.looked = Instant::now()
            .checked_sub(LOOK_DIR)
            .unwrap_or_else(Instant::now);
        let left = std::mem::replace(self, next);
        state.behind.push(left.let_go());
        self.dir = Some(state);
        Ok(Some(Step::Other(Ok(FollowEvent::NextSegment))))
    }

    /// The path followed.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The next record or event, or the error that stands for a damaged region (reading goes
    /// on after it), waiting as long as it takes. Other errors (an unsupported version, an
    /// I/O error) stop reading the current file until it is truncated or replaced.
    pub fn next_event(&mut self) -> Result<FollowEvent<'_>> {
        let step = loop {
            if let Some(step) = self.advance(None) {
                break step;
            }
        };
        self.lend(step)
    }

    /// [`next_event`](Self::next_event), waiting at most about `timeout`: `None` if nothing
    /// came. A zero timeout returns what is ready without waiting.
    pub fn next_event_timeout(&mut self, timeout: Duration) -> Option<Result<FollowEvent<'_>>> {
        let step = self.advance(Instant::now().checked_add(timeout))?;
        Some(self.lend(step))
    }

    /// The event a step stands for, borrowing a record from the reader.
    fn lend(&self, step: Step) -> Result<FollowEvent<'_>> {
        match step {
            Step::Record(range) => Ok(FollowEvent::Record(self.reader.record(range))),
            Step::Behind(i, range) => {
                let older = &self.dir.as_ref().expect("a directory follower").behind[i];
                Ok(FollowEvent::Record(older.reader.record(range)))
            }
            Step::Other(other) => other,
        }
    }

    /// Reads, and waits while there is nothing to read, until there is something for the
    /// caller or `deadline` passes (`None`).
    fn advance(&mut self, deadline: Option<Instant>) -> Option<Step> {
        loop {
            // Older segments now and then while this one is busy, and before it waits.
            match self.look_dir(false) {
                Ok(Some(step)) => return Some(step),
                Ok(None) => {}
                Err(e) => return Some(Step::Other(Err(e))),
            }
            if let Some(range) = self.reader.next_in_cursor() {
                return Some(Step::Record(range));
            }
            match self.reader.open_block() {
                Some(Ok(_)) => continue,
                Some(Err(e)) => {
                    self.stopped |= !matches!(e, Error::Damaged { .. });
                    return Some(Step::Other(Err(e)));
                }
                None => {}
            }
            // Nothing here for now: what older segments have, or a newer one to follow.
            match self.look_dir(true) {
                Ok(Some(step)) => return Some(step),
                Ok(None) => {}
                Err(e) => return Some(Step::Other(Err(e))),
            }
            // The reader has read everything the file held: after a final end, do what was
            // to follow it; else look at the file, and wait if nothing changed.
            let looked = match self.finishing.take() {
                Some(finish) => self.finish(finish),
                None => self.look(),
            };
            let failed = match looked {
                Ok(Look::Read) => continue,
                Ok(Look::Event(event)) => return Some(Step::Other(Ok(event))),
                Ok(Look::Idle) => None,
                Err(e) => Some(e),
            };
            // A failure to look at the file is reported after a full wait, whatever the
            // deadline, so that a caller that goes on after errors does not spin.
            let mut wait = self.delay;
            if let Some(deadline) = deadline.filter(|_| failed.is_none()) {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return None;
                }
                wait = wait.min(left);
            }
            std::thread::sleep(wait);
            self.delay = (self.delay * 2).min(MAX_POLL);
            if let Some(e) = failed {
                return Some(Step::Other(Err(e)));
            }
        }
    }

    /// Looks at the file after the reader read all it held: whether it changed, and whether a
    /// block left incomplete is to be reported.
    fn look(&mut self) -> Result<Look> {
        let tail = self.reader.get_mut();
        let len = tail.file.metadata()?.len();
        let read = tail.pos;
        if len != self.last_len {
            self.last_len = len;
            self.idle_since = Instant::now();
            self.torn_checked = false;
            self.delay = MIN_POLL;
        }
        let resume = self.reader.resume_offset();
        // Cut and grown again since the last look (past the bytes read, or not): the bytes
        // before the resume point are others than the follower saw there at its last look,
        // or read there since. Of the bytes read, only those up to the resume point are
        // final: a torn block after it may have been cut and written over since.
        let tail = self.reader.get_mut();
        let read_last = tail.last.clipped(resume + 1);
        let rewritten = resume > 0
            && [&self.witness, &read_last]
                .into_iter()
                .any(|w| !w.is_empty() && !w.in_file(&tail.file));
        if len < read || rewritten {
            // A cut tail (spec 9.7, rule 3): the file still holds the resume point, the
            // closing sync byte of the last block read. Read again from there, not from the
            // new end: a writer alone on the file cuts a torn block and appends at once (spec
            // 11.1), so bytes read past it, up to the new end, may already be others. Else a
            // block read is gone: start again, after what a copy of the file holds past the
            // resume point (rule 4).
            if !self.stopped && len > resume && !rewritten {
                let at = self.reader.rewind();
                self.reader.get_mut().seek_to(at)?;
                return Ok(Look::Read);
            }
            if !self.stopped {
                if let Some((copied, copy)) = self.find_copy(resume, &read_last) {
                    let at = self.reader.rewind();
                    let tail = self.reader.get_mut();
                    let file = std::mem::replace(&mut tail.file, copied);
                    tail.seek_to(at)?;
                    self.end_input(Finish::Copied {
                        file,
                        read,
                        len,
                        copy,
                    });
                    return Ok(Look::Read);
                }
            }
            self.restart(None)?;
            let copy = None;
            return Ok(Look::Event(FollowEvent::Truncated { read, len, copy }));
        }
        if resume > 0 {
            self.witness.take(&self.reader.get_mut().file, resume);
        }
        if len > read && !self.stopped {
            // The bytes read from here on are the file's as of this look (the witness keeps
            // those before): bytes read before, past the resume point, may since have been
            // written over (spec 9.7, what a follower cannot see).
            let tail = self.reader.get_mut();
            tail.open = true;
            tail.last = Witness::default();
            return Ok(Look::Read);
        }
        if let Some((file, id)) = self.replacement() {
            self.end_input(Finish::Replaced(file, id));
            return Ok(Look::Read);
        }
        let torn_due = self
            .options
            .torn_after
            .is_some_and(|idle| self.idle_since.elapsed() >= idle);
        if torn_due && !self.torn_checked && !self.stopped {
            self.torn_checked = true;
            self.end_input(Finish::Torn);
            return Ok(Look::Read);
        }
        Ok(Look::Idle)
    }

    /// Makes the file's end final until the reader has read to it, then does `then`.
    fn end_input(&mut self, then: Finish) {
        self.reader.get_mut().finishing = true;
        self.finishing = Some(then);
    }

    /// Once the reader has read to a final end: reads on, or switches to the new file.
    fn finish(&mut self, finish: Finish) -> Result<Look> {
        match finish {
            Finish::Torn => {
                // The block left incomplete is reported: what follows it is read as new.
                self.reader.get_mut().finishing = false;
                self.reader.settle_read();
                let at = self.reader.rewind();
                self.reader.get_mut().seek_to(at)?;
                Ok(Look::Read)
            }
            Finish::Replaced(file, id) => {
                self.restart(Some((file, id)))?;
                Ok(Look::Event(FollowEvent::Replaced))
            }
            Finish::Copied {
                file,
                read,
                len,
                copy,
            } => {
                let id = self.id;
                self.restart(Some((file, id)))?;
                let copy = Some(copy);
                Ok(Look::Event(FollowEvent::Truncated { read, len, copy }))
            }
        }
    }

    /// A copy of the followed file made after the follower last looked at it, before it was
    /// truncated (logrotate's `copytruncate`): a regular file beside it whose name is the
    /// file's name and a suffix (`.1`, `-20261205`), that holds the resume point, and the
    /// witness bytes before it and the last bytes read up to it (`read_last`) where the file
    /// held them; the most recently modified first.
    fn find_copy(&self, resume: u64, read_last: &Witness) -> Option<(File, PathBuf)> {
        /// How many files named like copies are compared at most.
        const MOST: usize = 16;
        /// How much older than the last look a copy may be (file times are coarse): one made
        /// long before holds nothing the follower lacks, and may be a copy of an earlier file
        /// that began with the same bytes.
        const SLACK: Duration = Duration::from_secs(1);
        if resume == 0 {
            return None;
        }
        let witnesses: Vec<&Witness> = [&self.witness, read_last]
            .into_iter()
            .filter(|w| !w.is_empty())
            .collect();
        let seen = witnesses.iter().map(|w| w.seen).max()?;
        let since = seen.checked_sub(SLACK)?;
        let name = self.path.file_name()?.to_str()?;
        let dir = match self.path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        let mut candidates: Vec<(std::time::SystemTime, PathBuf)> = fs::read_dir(dir)
            .ok()?
            .filter_map(|entry| {
                let entry = entry.ok()?;
                let file_name = entry.file_name();
                let suffix = file_name.to_str()?.strip_prefix(name)?;
                if !suffix.starts_with(['.', '-', '_']) {
                    return None;
                }
                let meta = fs::metadata(entry.path()).ok()?;
                let id = FileId::of(&meta);
                let modified = meta.modified().ok()?;
                let copy = meta.is_file()
                    && meta.len() > resume
                    && modified >= since
                    && id != self.id
                    && (id.is_none() || id != self.before);
                copy.then_some((modified, entry.path()))
            })
            .collect();
        candidates.sort_by_key(|(modified, _)| std::cmp::Reverse(*modified));
        candidates.into_iter().take(MOST).find_map(|(_, path)| {
            let file = File::open(&path).ok()?;
            let meta = file.metadata().ok()?;
            let copy = meta.is_file()
                && FileId::of(&meta) != self.id
                && witnesses.iter().all(|w| w.in_file(&file));
            copy.then_some((file, path))
        })
    }

    /// Starts reading afresh at the start of the current file, or of `new`.
    fn restart(&mut self, new: Option<(File, FileId)>) -> Result<()> {
        let mut file = match new {
            Some((file, id)) => {
                if id != self.id {
                    self.before = self.id;
                }
                self.id = id;
                file
            }
            None => self.reader.get_mut().file.try_clone()?,
        };
        file.seek(SeekFrom::Start(0))?;
        self.last_len = file.metadata()?.len();
        self.reader = self.options.reader.stream_reader_at(Tail::new(file, 0), 0);
        self.stopped = false;
        self.finishing = None;
        self.idle_since = Instant::now();
        self.torn_checked = false;
        self.delay = MIN_POLL;
        self.witness = Witness::default();
        Ok(())
    }

    /// The file the path names now, opened, if it is another regular file than the one read.
    fn replacement(&self) -> Option<(File, FileId)> {
        let id = FileId::of(&fs::metadata(&self.path).ok()?);
        if id.is_none() || id == self.id {
            return None;
        }
        let file = File::open(&self.path).ok()?;
        let meta = file.metadata().ok()?;
        let id = FileId::of(&meta);
        let replaced = meta.is_file() && id != self.id;
        if replaced {
            mapped::share(&file);
        }
        replaced.then_some((file, id))
    }
}

/// What looking at the file found.
enum Look {
    /// There is more to read.
    Read,
    /// Something to tell the caller.
    Event(FollowEvent<'static>),
    /// Nothing changed: wait.
    Idle,
}

/// The reading end of a followed file: at the file's end it says "nothing yet"
/// (`WouldBlock`), so that the reader waits, unless the end is final.
#[derive(Debug)]
struct Tail {
    file: File,
    /// The offset of the next byte to read.
    pos: u64,
    /// The file's end is final: reading it returns 0 bytes.
    finishing: bool,
    /// Bytes may be read: closed at the file's end, until the follower has looked at the file
    /// (whether it was cut or rewritten since) and opens it again.
    open: bool,
    /// The last bytes read, to know a copy of the file by when the follower had no look at it
    /// since it read them.
    last: Witness,
}

impl Tail {
    fn new(file: File, pos: u64) -> Self {
        Tail {
            file,
            pos,
            finishing: false,
            open: true,
            last: Witness::default(),
        }
    }

    fn seek_to(&mut self, pos: u64) -> io::Result<()> {
        self.file.seek(SeekFrom::Start(pos))?;
        self.pos = pos;
        self.open = true;
        self.last = Witness::default();
        Ok(())
    }
}

impl Read for Tail {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if !self.open && !self.finishing {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = self.file.read(buf)?;
        self.last.record(&buf[..n], self.pos);
        self.pos += n as u64;
        if n == 0 && !buf.is_empty() && !self.finishing {
            self.open = false;
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(n)
    }
}

/// The offset of the last 0x00 in the `len` bytes of `file`, looking back at most `limit`
/// bytes (a block is never longer), or `len` if there is none.
fn last_sync(file: &mut File, len: u64, limit: u64) -> io::Result<u64> {
    let floor = len.saturating_sub(limit);
    let mut buf = vec![0; 64 << 10];
    let mut end = len;
    while end > floor {
        let start = end.saturating_sub(buf.len() as u64).max(floor);
        let chunk = &mut buf[..(end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(chunk)?;
        if let Some(i) = memchr::memrchr(0, chunk) {
            return Ok(start + i as u64);
        }
        end = start;
    }
    Ok(len)
}

/// Reads `buf.len()` bytes of `file` at `at`, without moving its offset.
#[cfg(unix)]
fn read_exact_at(file: &File, buf: &mut [u8], at: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, at)
}

/// Reads `buf.len()` bytes of `file` at `at`, its offset restored afterwards.
#[cfg(not(unix))]
fn read_exact_at(file: &File, buf: &mut [u8], at: u64) -> io::Result<()> {
    let mut file = file;
    let pos = file.stream_position()?;
    file.seek(SeekFrom::Start(at))?;
    let read = file.read_exact(buf);
    file.seek(SeekFrom::Start(pos))?;
    read
}

/// Which file a handle or path refers to: device and inode on Unix. Elsewhere files cannot
/// be told apart, and only truncation is noticed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileId(Option<(u64, u64)>);

impl FileId {
    #[cfg(unix)]
    fn of(meta: &Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        FileId(Some((meta.dev(), meta.ino())))
    }

    #[cfg(not(unix))]
    fn of(_: &Metadata) -> Self {
        FileId(None)
    }

    fn is_none(&self) -> bool {
        self.0.is_none()
    }
}
