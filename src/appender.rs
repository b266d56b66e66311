//! Appending to a log file: reopening after a crash, several writers at once, and the
//! durability each caller chooses.
//!
//! An [`Appender`] opens a file for appending (`O_APPEND`), checks its header, and looks at
//! its end: the bytes after the last intact block, if any, are a **torn tail** (a block a
//! crashed writer did not finish). Holding the file alone, the appender cuts the tail off
//! (or, if the tail is a whole block but for its closing sync byte, writes that byte and
//! keeps it); with other appenders on the file it leaves it, since it may be a block another
//! process is writing right now, and with a [`MappedFile`] on it too, since a cut would take
//! mapped bytes from under a reader. Either way nothing written later depends on it: every
//! block an appender writes starts with its own sync byte and reaches the file in one
//! `write(2)` (spec 11.1), so
//! a torn block before it is damage that ends where the new block starts, and blocks of
//! several appenders never interleave. One extra sync byte between two blocks is padding, so
//! on a clean end the fence costs a byte per block and no damage.
//!
//! A log is an open log (spec 9.5.1): an appender starts a file with the header and a log block
//! in one write, and before it appends to a file that is not an open log (a finished file, an
//! unfinished one, a log written before log blocks existed) it writes a log block at opening.
//! It never writes an end block.
//!
//! Records wait in an open data block until it is full, until [`Durability`] says to write,
//! or until a time bound passes, which a background thread enforces so that a quiet log
//! still reaches the file.

use std::io::{self, IoSlice, Write};
use std::ops::Range;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::block::{self, types, BlockType};
use crate::codec::Compression;
use crate::error::{Error, Result};
use crate::frame::{self, Check, Found};
use crate::fs::{FileSystem, Handle, StdFs};
use crate::reader::ReaderBuilder;
use crate::writer::{Writer, WriterBuilder};

/// When appended records reach the file, and when they are durable.
///
/// What survives, for records [`Appender::append`] returned for:
///
/// | durability | process killed | power cut (or kernel crash) |
/// |---|---|---|
/// | `None` | records in written blocks; the open block (at most `block_target` bytes, at most `max_delay` old) is lost | what the kernel had written back (Linux: dirty pages older than about 30 s) |
/// | `Flush` | all: each `append` writes its block before returning | as `None` |
/// | `Fsync` | all | all: each `append` writes its block and `fdatasync`s before returning |
/// | `Group` | records in written blocks, as `None` with `max_delay` = `interval` | the records below [`Appender::durable`]: each commit writes the open block and `fdatasync`s, at most every `interval` or once `bytes` wait |
///
/// "Power cut" assumes storage that honours cache flushes. [`Appender::sync`] makes
/// everything appended so far durable in any mode. An appender's first sync syncs the file's
/// directory too: a file just created may otherwise vanish in a power cut, synced data and all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Blocks are written when full or `max_delay` old; nothing is synced.
    None,
    /// Every `append` (or `append_batch`) writes its records as a block before returning.
    Flush,
    /// Every `append` writes its records as a block and syncs the file before returning.
    Fsync,
    /// Group commit: a background thread writes the open block and syncs the file at most
    /// every `interval`, sooner once `bytes` of records wait. [`Durability::group`] takes the
    /// interval alone.
    Group {
        /// The longest a record waits for its commit.
        interval: Duration,
        /// Record bytes that start a commit without waiting for the interval.
        bytes: u64,
    },
}

/// The record bytes that start a group commit before its interval is up, in
/// [`Durability::group`]: 4 MiB.
pub const DEFAULT_GROUP_BYTES: u64 = 4 << 20;

impl Durability {
    /// Group commit at most every `interval`, or sooner once [`DEFAULT_GROUP_BYTES`] (4 MiB)
    /// of records wait: [`Durability::Group`] with that many `bytes` (set both fields to
    /// choose another). `cobsfile pack --append --durability group:MS` uses it.
    ///
    /// ```
    /// use std::time::Duration;
    /// use cobsfile::{AppenderBuilder, Durability};
    ///
    /// let every_10ms = Durability::group(Duration::from_millis(10));
    /// assert_eq!(
    ///     every_10ms,
    ///     Durability::Group { interval: Duration::from_millis(10), bytes: cobsfile::DEFAULT_GROUP_BYTES },
    /// );
    ///
    /// let path = std::env::temp_dir().join(format!("cobsfile-group-doc-{}", std::process::id()));
    /// # let _ = std::fs::remove_file(&path);
    /// let mut log = AppenderBuilder::new().durability(every_10ms).open(&path)?;
    /// let seq = log.append(b"event")?;
    /// log.wait_durable(seq)?; // returns after the next commit, within about 10 ms
    /// assert_eq!(log.durable(), 1);
    /// log.close()?;
    /// # std::fs::remove_file(&path)?;
    /// # Ok::<(), cobsfile::Error>(())
    /// ```
    pub const fn group(interval: Duration) -> Self {
        Durability::Group {
            interval,
            bytes: DEFAULT_GROUP_BYTES,
        }
    }
}

/// Options for appenders.
#[derive(Debug, Clone)]
#[must_use = "options do nothing until used: each method returns the changed options"]
pub struct AppenderBuilder {
    writer: WriterBuilder,
    durability: Durability,
    max_delay: Duration,
}

impl Default for AppenderBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl AppenderBuilder {
    /// Default options: [`Durability::None`], records written within 1 s, the writer's
    /// default block size, no compression.
    pub fn new() -> Self {
        AppenderBuilder {
            writer: WriterBuilder::new().index(false),
            durability: Durability::None,
            max_delay: Duration::from_secs(1),
        }
    }

    /// When records reach the file and are durable (default [`Durability::None`]).
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// The longest a record waits in the open block before it is written (default 1 s), so
    /// a quiet log still reaches the file. With [`Durability::Group`] its interval applies.
    pub fn max_delay(mut self, delay: Duration) -> Self {
        self.max_delay = delay;
        self
    }

    /// The target size of a data block; see [`WriterBuilder::block_target`].
    pub fn block_target(mut self, bytes: usize) -> Self {
        self.writer = self.writer.block_target(bytes);
        self
    }

    /// The largest block body; see [`WriterBuilder::max_body_size`].
    pub fn max_body_size(mut self, bytes: usize) -> Self {
        self.writer = self.writer.max_body_size(bytes);
        self
    }

    /// How data blocks are compressed; see [`WriterBuilder::compression`].
    pub fn compression(mut self, compression: Compression) -> Self {
        self.writer = self.writer.compression(compression);
        self
    }

    /// Compresses with `dictionary`, embedded (once per opening) unless `embed` is false;
    /// see [`WriterBuilder::dictionary`].
    pub fn dictionary(mut self, dictionary: crate::Dictionary, embed: bool) -> Self {
        self.writer = self.writer.dictionary(dictionary, embed);
        self
    }

    /// Compresses blocks on `threads` threads; see [`WriterBuilder::threads`].
    pub fn threads(mut self, threads: usize) -> Self {
        self.writer = self.writer.threads(threads);
        self
    }

    /// Opens the log at `path` for appending, creating it if missing; see [`Appender`].
    pub fn open(&self, path: impl AsRef<Path>) -> Result<Appender> {
        Appender::open_with(self, &StdFs, path.as_ref())
    }

    /// Opens the log at `path` on `fs`, a simulated file system in tests (see
    /// [`crate::fs`]); [`open`](Self::open) is this on the real one.
    pub fn open_in(&self, fs: &dyn FileSystem, path: impl AsRef<Path>) -> Result<Appender> {
        Appender::open_with(self, fs, path.as_ref())
    }
}

/// What [`Appender::open`] found at the end of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opened {
    /// The file was missing or empty, and the appender started it with a header.
    pub created: bool,
    /// No other appender and no [`MappedFile`](crate::MappedFile) had the file open (each holds a shared lock
    /// while it does): this one may cut a torn tail off.
    pub exclusive: bool,
    /// Bytes after the last intact block: a block a crashed writer did not finish (or
    /// damage). `None` when the file ends with an intact block.
    pub torn: Option<Range<u64>>,
    /// The torn tail was cut off (the file was held alone); otherwise it stays, fenced off by
    /// the sync byte that opens every appended block.
    pub truncated: bool,
    /// The torn tail was one whole block but for its closing sync byte, which was written
    /// (the file was held alone): the block and its records are kept.
    pub completed: bool,
    /// The appender wrote a log block (spec 8.7), so that the file is an open log from here
    /// on: it started the file, or the file was not an open log (a finished file, say, whose
    /// end block is then no longer its last block).
    pub log_block: bool,
    /// The file's header is lost: zeros stand where it should be (a power cut before the
    /// file's first sync leaves them), though intact blocks follow. The appender appends after
    /// them; readers report the lost start as damage, and recovery writes a clean copy.
    pub header_lost: bool,
}

/// Appends records to a log file (spec 11.1); options in [`AppenderBuilder`].
///
/// Opening checks the file's header, and that no header of a newer version lies further on
/// (readers stop there, so records appended after it could not be read). That check reads the
/// whole file once at memchr speed: about 0.1 s per GB from the page cache, disk speed
/// otherwise. Then it looks at the end: bytes after the last intact block
/// are a torn tail, a block a crashed writer did not finish. An appender alone on the file (an
/// exclusive advisory lock) cuts it off, or completes a block that lacks only its closing sync
/// byte; with other appenders or a [`MappedFile`](crate::MappedFile) on the file it leaves it, and it never cuts
/// anything after opening. A file that is not an open log yet (a finished file, say) gets a log
/// block, written at opening (spec 11.1, rule 6). [`opened`](Self::opened) says what
/// was found and done. Every block then written starts with its own sync byte and reaches the
/// file in one `write(2)` to an `O_APPEND` file, so a torn tail costs only itself and blocks of
/// several processes never interleave; after an intact block the extra sync byte is padding.
/// Records wait in an open block until it is full, until the [`Durability`] says to write,
/// or at most [`max_delay`](AppenderBuilder::max_delay), which a background thread enforces.
///
/// **Call [`close`](Self::close)** when done: it writes what waits, syncs as the durability
/// says, and returns any error, including one the background thread met. An appender
/// dropped instead writes what waits but **ignores errors** and does not sync, even with
/// [`Durability::Fsync`] or [`Durability::Group`]: records it took in may then be lost
/// without a word.
///
/// ```
/// use cobsfile::{Appender, AppenderBuilder, Durability};
///
/// let path = std::env::temp_dir().join(format!("cobsfile-appender-doc-{}", std::process::id()));
/// # let _ = std::fs::remove_file(&path);
/// let mut log = AppenderBuilder::new().durability(Durability::Fsync).open(&path)?;
/// assert!(log.opened().created);
/// log.append(b"first event")?;
/// log.close()?;
///
/// // Reopened later (after a crash, say), the log goes on where it ended.
/// let mut log = Appender::open(&path)?;
/// assert!(!log.opened().created && log.opened().torn.is_none());
/// log.append(b"second event")?;
/// log.close()?;
///
/// let file = cobsfile::open(&path)?;
/// let (records, errors) = file.reader().read_all();
/// assert!(errors.is_empty());
/// assert_eq!(records, [b"first event".to_vec(), b"second event".to_vec()]);
/// # drop(file);
/// # std::fs::remove_file(&path)?;
/// # Ok::<(), cobsfile::Error>(())
/// ```
#[derive(Debug)]
pub struct Appender {
    shared: Arc<Shared>,
    timer: Option<JoinHandle<()>>,
    opened: Opened,
    durability: Durability,
    /// The metadata blocks announced, shared with the file's writer.
    announced: Arc<Mutex<Vec<u8>>>,
}

/// The state the appending thread and the timer thread share.
#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    /// Signals the timer (records waiting, closing) and waiters (durable moved on).
    changed: Condvar,
}

#[derive(Debug)]
struct State {
    writer: Writer<LogFile>,
    /// The same file, to sync it without holding the writer.
    sync: Arc<dyn Handle>,
    /// The file's directory entry is not known to be durable: whoever created the file may
    /// not have synced its directory, so the first sync syncs it too.
    entry_unsynced: bool,
    /// The timer thread is syncing the file without holding the state's lock.
    syncing: bool,
    /// Records appended.
    appended: u64,
    /// Records known to have reached the file.
    written: u64,
    /// Records known to be durable.
    durable: u64,
    /// When the oldest record not yet written was appended.
    waiting_since: Option<Instant>,
    /// When the oldest record written but not yet synced was appended: a group commit is
    /// due for it too, though nothing waits to be written (`flush` wrote it).
    unsynced_since: Option<Instant>,
    /// Record bytes appended since the last commit.
    waiting_bytes: u64,
    /// Enough bytes wait for a group commit not to wait for its interval.
    commit_now: bool,
    /// Set by the first failed write or sync, for good: the file may then miss records that
    /// were appended (a block the writer had taken in is lost), so nothing more is written and
    /// nothing more is counted written or durable.
    broken: Option<String>,
    closing: bool,
}

/// The file, writing each block with a sync byte in front in one system call.
#[derive(Debug)]
struct LogFile {
    file: Arc<dyn Handle>,
    /// How a log starts: the 19 bytes every file starts with (the leading sync byte and the
    /// header block), then a log block.
    start: Vec<u8>,
    /// The metadata blocks announced ([`Appender::announce`]), each `type length body 00`: a
    /// log truncated to nothing starts again with them too.
    announced: Arc<Mutex<Vec<u8>>>,
}

impl Write for LogFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // The writer hands over one block per call: fence it.
        // A log truncated to nothing under the appender (logrotate's `copytruncate`) starts
        // again with a header and a log block, in the same write as the block (spec 11.1,
        // rule 5).
        // The blocks it announced come with them: what a reader needs to read the records
        // after (the schema of typed records, spec 15.1).
        let restart;
        let fence: &[u8] = if self.file.is_empty()? {
            let announced = self.announced.lock().unwrap_or_else(|e| e.into_inner());
            restart = [&self.start[..], &announced].concat();
            &restart
        } else {
            &[0]
        };
        append_block(&*self.file, fence, buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Writes of one block an appender makes before it gives up on writes the system keeps cutting
/// short.
const MAX_WRITES: usize = 8;

/// Writes `block` (`type length body 00`, or nothing) at the end of `file` behind `fence` (its
/// opening sync byte, or the start of a file), in one write (spec 11.1, rule 3).
fn append_block(file: &dyn Handle, mut fence: &[u8], block: &[u8]) -> io::Result<()> {
    for _ in 0..MAX_WRITES {
        let fenced = [IoSlice::new(fence), IoSlice::new(block)];
        match file.append(&fenced) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) if n == fence.len() + block.len() => return Ok(()),
            // Cut short (a full disk, a signal) just before the closing sync byte: the block
            // is whole but for it, and it may go after another writer's block, whose opening
            // sync byte closes this one just as well.
            Ok(n) if n + 1 == fence.len() + block.len() && block.ends_with(&[0]) => {
                return append_all(file, &[0]);
            }
            // Cut short earlier: the part written is a torn block, which another writer's
            // block may already follow, so the rest never goes after it. The block is written
            // again whole behind a sync byte of its own, which ends the torn part; a torn
            // header is written again too.
            Ok(n) => {
                if n >= fence.len() {
                    fence = &[0];
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::WriteZero,
        format!("{MAX_WRITES} writes of one block in a row were cut short"),
    ))
}

/// Writes `fence` and `block` at the end of `file` at opening: alone on the file (the exclusive
/// lock: no other appender has it open), the rest of a write cut short simply follows it;
/// otherwise as [`append_block`] writes every block.
fn write_alone_or_fenced(
    file: &dyn Handle,
    exclusive: bool,
    fence: &[u8],
    block: &[u8],
) -> io::Result<()> {
    if exclusive {
        append_all(file, &[fence, block].concat())
    } else {
        append_block(file, fence, block)
    }
}

/// Writes all of `buf` at the end of `file`, in as many writes as it takes.
fn append_all(file: &dyn Handle, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        match file.append(&[IoSlice::new(buf)]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn lock(shared: &Shared) -> MutexGuard<'_, State> {
    shared.state.lock().unwrap_or_else(|e| e.into_inner())
}

impl Appender {
    /// Opens the log at `path` with default options; see [`AppenderBuilder::open`].
    pub fn open(path: impl AsRef<Path>) -> Result<Appender> {
        AppenderBuilder::new().open(path)
    }

    fn open_with(options: &AppenderBuilder, fs: &dyn FileSystem, path: &Path) -> Result<Appender> {
        let file = fs.open_append(path)?;
        // Alone on the file, an appender may cut a torn tail and write the header; with
        // others (each holding a shared lock while open), neither.
        let exclusive = file.try_lock()?;
        if !exclusive {
            file.lock_shared()?;
        }
        let mut opened = Opened {
            created: false,
            exclusive,
            torn: None,
            truncated: false,
            completed: false,
            log_block: false,
            header_lost: false,
        };
        let len = file.len()?;
        // The 19 bytes every file starts with and a log block (spec 8.7): how this appender
        // starts a file, in one write, so that a log is open from its first block on.
        let mut start = block::file_start();
        start.extend_from_slice(&block::empty_block(types::LOG)[1..]);
        if len == 0 {
            opened.created = true;
            opened.log_block = true;
            write_alone_or_fenced(&*file, exclusive, &start[..1], &start[1..])?;
        } else {
            // Read under this appender's own lock.
            let contents = file.contents()?;
            let bytes = contents.bytes();
            let (end, mut last) = intact_end(bytes)?;
            opened.header_lost = !bytes.starts_with(&start[..block::file_start().len()]);
            let mark = scan_headers_and_marks(bytes, last)?;
            if end < len {
                opened.torn = Some(end..len);
                let complete = exclusive && lacks_closing_sync(bytes, end);
                // A program that ignores locks may have changed the file's length since it
                // was mapped; then the tail is not what was read, and is left alone.
                let cut = exclusive && file.len()? == len;
                if complete && cut {
                    last = memchr::memrchr(0, bytes).unwrap_or(last);
                    opened.completed = true;
                } else if cut {
                    opened.truncated = true;
                }
            }
            opened.log_block = !is_open_log(bytes, last, mark);
            drop(contents);
            if opened.completed {
                append_all(&*file, &[0])?;
            } else if opened.truncated {
                file.set_len(end)?;
            }
            if opened.log_block {
                // Before anything is appended, fenced and in one write like every block an
                // appender writes (spec 11.1, rule 3).
                let log = block::empty_block(types::LOG);
                write_alone_or_fenced(&*file, exclusive, &log[..1], &log[1..])?;
            }
        }
        let sync = Arc::clone(&file);
        let announced = Arc::new(Mutex::new(Vec::new()));
        let writer = options.writer.clone().without_header().build(LogFile {
            file,
            start,
            announced: Arc::clone(&announced),
        })?;
        if exclusive {
            // The file's start is written: let other appenders in.
            sync.lock_shared()?;
        }
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                writer,
                sync,
                // Whoever created the file may not have synced its directory.
                entry_unsynced: true,
                syncing: false,
                appended: 0,
                written: 0,
                durable: 0,
                waiting_since: None,
                unsynced_since: None,
                waiting_bytes: 0,
                commit_now: false,
                broken: None,
                closing: false,
            }),
            changed: Condvar::new(),
        });
        let delay = match options.durability {
            Durability::Group { interval, .. } => Some(interval),
            Durability::None => Some(options.max_delay),
            Durability::Flush | Durability::Fsync => None,
        };
        let timer = match delay {
            Some(delay) => {
                let shared = Arc::clone(&shared);
                let sync = matches!(options.durability, Durability::Group { .. });
                Some(
                    std::thread::Builder::new()
                        .name("cobsfile-appender".into())
                        .spawn(move || commit_loop(&shared, delay, sync))?,
                )
            }
            None => None,
        };
        Ok(Appender {
            shared,
            timer,
            opened,
            durability: options.durability,
            announced,
        })
    }

    /// The largest record [`append`](Self::append) accepts; see [`Writer::max_record_len`].
    pub fn max_record_len(&self) -> usize {
        lock(&self.shared).writer.max_record_len()
    }

    /// What opening found: whether the file was created, held alone, and had a torn tail.
    pub fn opened(&self) -> &Opened {
        &self.opened
    }

    /// Appends one record; returns its sequence number (0 for the first record this
    /// appender appends). When it has reached the file, and when it is durable, depends on
    /// the [`Durability`].
    pub fn append(&mut self, record: &[u8]) -> Result<u64> {
        self.append_batch(std::iter::once(record))
            .map(|seqs| seqs.start)
    }

    /// Appends records as one unit: with [`Durability::Flush`] and [`Durability::Fsync`], in
    /// one block (or more if they exceed the block size) written (and synced) before
    /// returning. Returns their sequence numbers.
    pub fn append_batch<'r>(
        &mut self,
        records: impl IntoIterator<Item = &'r [u8]>,
    ) -> Result<Range<u64>> {
        self.append_records(records.into_iter().map(|record| (record, None)))
    }

    /// Appends one record with an event time (nanoseconds since the Unix epoch, UTC), as
    /// [`append`](Self::append) appends one without; see
    /// [`Writer::write_record_at`](crate::Writer::write_record_at). A record and its time
    /// reach the file together: the time block and its data block in one write.
    pub fn append_at(&mut self, record: &[u8], time: i64) -> Result<u64> {
        self.append_batch_at(std::iter::once((record, time)))
            .map(|seqs| seqs.start)
    }

    /// [`append_batch`](Self::append_batch) for records with event times.
    pub fn append_batch_at<'r>(
        &mut self,
        records: impl IntoIterator<Item = (&'r [u8], i64)>,
    ) -> Result<Range<u64>> {
        self.append_records(
            records
                .into_iter()
                .map(|(record, time)| (record, Some(time))),
        )
    }

    /// Appends records, each with its time if it has one, as one unit.
    fn append_records<'r>(
        &mut self,
        records: impl Iterator<Item = (&'r [u8], Option<i64>)>,
    ) -> Result<Range<u64>> {
        let shared = &*self.shared;
        let mut state = lock(shared);
        state.check()?;
        let first = state.appended;
        for (record, time) in records {
            // A record too large is refused before anything is taken in; any other error is
            // a failed write of a full block.
            let max = state.writer.max_record_len();
            if record.len() > max {
                return Err(Error::RecordTooLarge {
                    len: record.len(),
                    max,
                });
            }
            let taken = match time {
                Some(time) => state.writer.write_record_at(record, time),
                None => state.writer.write_record(record),
            };
            state.note(taken)?;
            state.appended += 1;
            state.waiting_bytes += record.len() as u64;
        }
        let seqs = first..state.appended;
        match self.durability {
            Durability::Flush => write_waiting(&mut state)?,
            Durability::Fsync => {
                write_waiting(&mut state)?;
                state.sync()?;
            }
            Durability::None | Durability::Group { .. } => {
                // Wake the timer when records start waiting, or when enough wait to commit.
                let idle = state.waiting_since.is_none();
                state.waiting_since.get_or_insert_with(Instant::now);
                if let Durability::Group { bytes, .. } = self.durability {
                    state.commit_now |= state.waiting_bytes >= bytes;
                }
                let wake = idle || state.commit_now;
                drop(state);
                if wake {
                    shared.changed.notify_all();
                }
            }
        }
        Ok(seqs)
    }

    /// Writes a metadata block now (closing the open data block first).
    pub fn write_metadata<K, V>(&mut self, entries: impl IntoIterator<Item = (K, V)>) -> Result<()>
    where
        K: AsRef<str>,
        V: AsRef<[u8]>,
    {
        let mut state = lock(&self.shared);
        state.check()?;
        let written = state.writer.write_metadata(entries);
        state.note(written)?;
        write_waiting(&mut state)?;
        drop(state);
        // With group commit, the timer syncs what was written.
        self.shared.changed.notify_all();
        Ok(())
    }

    /// Writes a metadata block now, as [`write_metadata`](Self::write_metadata) does, and
    /// again whenever this appender finds the log truncated to nothing (logrotate's
    /// `copytruncate`) and starts it anew (spec 11.1, rule 5): for what a reader needs before
    /// the records that follow, such as the schema of typed records (spec 15.1).
    pub fn announce<K, V>(&mut self, entries: impl IntoIterator<Item = (K, V)>) -> Result<()>
    where
        K: AsRef<str>,
        V: AsRef<[u8]>,
    {
        let entries: Vec<(K, V)> = entries.into_iter().collect();
        let pairs = || entries.iter().map(|(k, v)| (k.as_ref(), v.as_ref()));
        let mut payload = Vec::new();
        block::metadata_payload(pairs(), &mut payload)?;
        let mut encoded = Vec::new();
        let start = block::encode(types::METADATA, &payload, None, &mut encoded)?;
        self.write_metadata(pairs())?;
        self.announced
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(&encoded[start..]);
        Ok(())
    }

    /// Writes the open block now, without syncing.
    pub fn flush(&mut self) -> Result<()> {
        write_waiting(&mut lock(&self.shared))?;
        // With group commit, the timer syncs what was written.
        self.shared.changed.notify_all();
        Ok(())
    }

    /// Writes the open block and syncs the file: every record appended so far is durable.
    pub fn sync(&mut self) -> Result<()> {
        let mut state = lock(&self.shared);
        // A sync of the timer thread may be under way: its outcome comes first. A failed sync
        // reports its error once (Linux marks the pages it could not write clean), so a
        // sync that started after it may succeed without those pages ever reaching the disk.
        while state.syncing {
            state = self
                .shared
                .changed
                .wait(state)
                .unwrap_or_else(|e| e.into_inner());
        }
        write_waiting(&mut state)?;
        state.sync()?;
        drop(state);
        self.shared.changed.notify_all();
        Ok(())
    }

    /// The number of records known to be durable: those with smaller sequence numbers
    /// survive a power cut.
    pub fn durable(&self) -> u64 {
        lock(&self.shared).durable
    }

    /// Waits until the record with sequence number `seq` is durable (with
    /// [`Durability::Group`], until the commit that includes it; otherwise it syncs). Fails
    /// for a record not appended yet, and once a write or sync of the log has failed.
    pub fn wait_durable(&mut self, seq: u64) -> Result<()> {
        let appended = lock(&self.shared).appended;
        if seq >= appended {
            return Err(Error::NotAppended { seq, appended });
        }
        if !matches!(self.durability, Durability::Group { .. }) {
            if self.durable() <= seq {
                self.sync()?;
            }
            return Ok(());
        }
        let mut state = lock(&self.shared);
        while state.durable <= seq {
            state.check()?;
            state = self
                .shared
                .changed
                .wait(state)
                .unwrap_or_else(|e| e.into_inner());
        }
        Ok(())
    }

    /// Writes what waits, syncs unless the durability is [`Durability::None`] or
    /// [`Durability::Flush`], and closes the log.
    ///
    /// Its error (or one the background thread met) is the last report of records that did
    /// not reach the log; dropping the appender instead ignores it (see [`Appender`]).
    pub fn close(mut self) -> Result<()> {
        self.stop_timer();
        let mut state = lock(&self.shared);
        write_waiting(&mut state)?;
        if matches!(
            self.durability,
            Durability::Fsync | Durability::Group { .. }
        ) {
            state.sync()?;
        }
        Ok(())
    }

    fn stop_timer(&mut self) {
        lock(&self.shared).closing = true;
        self.shared.changed.notify_all();
        if let Some(timer) = self.timer.take() {
            let _ = timer.join();
        }
    }
}

impl Drop for Appender {
    /// Writes what waits (errors are lost: call [`close`](Appender::close) to see them).
    fn drop(&mut self) {
        self.stop_timer();
        let _ = write_waiting(&mut lock(&self.shared));
    }
}

impl State {
    /// Fails if an earlier write or sync failed.
    fn check(&self) -> Result<()> {
        match &self.broken {
            None => Ok(()),
            Some(cause) => Err(Error::AppenderBroken {
                cause: cause.clone(),
            }),
        }
    }

    /// Notes `result`; an error breaks the appender for good.
    fn note<T>(&mut self, result: Result<T>) -> Result<T> {
        if let Err(e) = &result {
            if self.broken.is_none() {
                self.broken = Some(e.to_string());
            }
        }
        result
    }

    /// Syncs the file: everything written is durable.
    fn sync(&mut self) -> Result<()> {
        self.check()?;
        let synced = sync_file(&*self.sync, self.entry_unsynced).map_err(Error::from);
        self.note(synced)?;
        self.entry_unsynced = false;
        self.durable = self.written;
        self.unsynced_since = None;
        Ok(())
    }
}

/// Syncs `file`'s data, and its directory entry too if `entry` (an appender's first sync).
fn sync_file(file: &dyn Handle, entry: bool) -> io::Result<()> {
    file.sync_data()?;
    if entry {
        file.sync_entry()?;
    }
    Ok(())
}

/// Writes the open block, if any.
fn write_waiting(state: &mut State) -> Result<()> {
    state.check()?;
    let flushed = state.writer.flush();
    state.note(flushed)?;
    if state.written < state.appended {
        let since = state.waiting_since.unwrap_or_else(Instant::now);
        state.unsynced_since.get_or_insert(since);
    }
    state.written = state.appended;
    state.waiting_since = None;
    state.waiting_bytes = 0;
    state.commit_now = false;
    Ok(())
}

/// The timer thread: writes records that waited `delay` (and syncs, for group commit),
/// sooner when the appender signals that enough bytes wait, until the appender closes.
fn commit_loop(shared: &Shared, delay: Duration, sync: bool) {
    let mut state = lock(shared);
    loop {
        if state.closing {
            return;
        }
        // Group commit syncs records written but not synced too (`flush` wrote them).
        let since = match sync {
            true => state.waiting_since.or(state.unsynced_since),
            false => state.waiting_since,
        };
        let wait = match since {
            None => None,
            Some(_) if state.commit_now => Some(Duration::ZERO),
            Some(since) => Some(delay.saturating_sub(since.elapsed())),
        };
        match wait {
            Some(wait) if !wait.is_zero() => {
                state = shared
                    .changed
                    .wait_timeout(state, wait)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
                continue;
            }
            Some(_) => {}
            None => {
                state = shared
                    .changed
                    .wait(state)
                    .unwrap_or_else(|e| e.into_inner());
                continue;
            }
        }
        if write_waiting(&mut state).is_err() {
            // Broken for good: stop waiting for these records, wake whoever waits on them.
            state.waiting_since = None;
            state.unsynced_since = None;
            shared.changed.notify_all();
            continue;
        }
        if sync {
            let written = state.written;
            let entry = state.entry_unsynced;
            let file = Arc::clone(&state.sync);
            // Appending goes on while the file syncs; a sync asked for meanwhile waits for
            // this one (`Appender::sync`).
            state.syncing = true;
            drop(state);
            let synced = sync_file(&*file, entry).map_err(Error::from);
            state = lock(shared);
            state.syncing = false;
            if state.note(synced).is_ok() {
                state.entry_unsynced &= !entry;
                state.durable = state.durable.max(written);
                if state.durable == state.written {
                    state.unsynced_since = None;
                }
            }
            shared.changed.notify_all();
        }
    }
}

/// Whether the bytes from `end` (one past the last intact block) are one block but
/// for its closing sync byte, opened by the last intact block's closing sync byte or by a
/// sync byte of its own right after it: a write cut just short of its end.
pub(crate) fn lacks_closing_sync(bytes: &[u8], end: u64) -> bool {
    let Some(open) = memchr::memrchr(0, bytes) else {
        return false;
    };
    if (open as u64) + 1 < end || open as u64 > end || bytes.len() - open > MAX_COMPLETED {
        return false;
    }
    let mut block = bytes[open..].to_vec();
    block.push(0);
    match ReaderBuilder::new().from_slice(&block).next_block() {
        Some(Ok(b)) => b.info().offset == 0 && b.info().size as usize == block.len() - 1,
        _ => false,
    }
}

/// Fails if a header block of a newer version lies further on in `bytes` (files
/// concatenated): a full read stops there, so what is appended after it could not be read.
/// Otherwise returns the type of the last header, end or log block after offset 0 that a full
/// read finds intact and that opens at or before `last` (the last intact block): with the
/// type of that block, what tells an open log (spec 9.5.1, 11.1 rule 6).
///
/// A full read tries every 0x00 as a block's opening sync byte (blocks hold no other), so
/// every header, end and log block it would meet starts `00 02`, `00 0c` or `00 0e` (types 1,
/// 6 and 7), and each such place is checked as a range reader starting there, which decodes
/// what a full read would. This reads the whole file once, at memchr speed, where a skipping
/// scan (spec 9.3) reads only block headers; but a damaged length that lands on a sync byte
/// makes a skipping scan jump over whatever lies between, and it once hid such a header from
/// the appender (`fuzz/regressions/append_after_garbage/newer-header-hidden-from-skipping-scan`).
pub(crate) fn scan_headers_and_marks(bytes: &[u8], last: usize) -> Result<Option<BlockType>> {
    let options = ReaderBuilder::new();
    let mut mark = None;
    for open in memchr::memchr_iter(0, bytes) {
        let wanted = match bytes.get(open + 1) {
            Some(0x02) => true,
            Some(0x0c | 0x0e) => open <= last,
            _ => false,
        };
        if open == 0 || !wanted {
            continue;
        }
        let at = open as u64;
        match options.from_slice_range(bytes, at..at + 1).next_block() {
            Some(Err(e @ Error::UnsupportedVersion { .. })) => return Err(e),
            Some(Ok(block)) if block.info().offset == at && open <= last => {
                mark = Some(block.info().block_type);
            }
            _ => {}
        }
    }
    Ok(mark)
}

/// Whether the frame that opens at `open` is sound (spec 6) and closes at `close`, whatever
/// its length: no reader limit applies.
fn sound_frame(bytes: &[u8], open: usize, close: usize) -> bool {
    let frame = frame::read_at(&bytes[..=close], open, 0, true, u64::MAX, Check::Full, 0);
    matches!(frame, Found::Frame(f) if f.end == close)
}

/// The largest torn block an appender completes (copying it to check it): larger ones are
/// cut off.
const MAX_COMPLETED: usize = 64 << 20;

/// Whether the file of `bytes`, whose last intact block (or, with a torn tail, last complete
/// block) opens at `last`, is an open log (spec 9.5.1): that block is not an end or index
/// block, and of the header, end and log blocks, the last intact one is a log block (`mark`,
/// found before it by [`scan_headers_and_marks`]).
fn is_open_log(bytes: &[u8], last: usize, mark: Option<BlockType>) -> bool {
    match bytes.get(last + 1..).map(crate::varint::read) {
        Some(Ok((types::LOG, _))) => true,
        Some(Ok((types::END | types::INDEX | types::HEADER, _))) => false,
        _ => mark == Some(BlockType::Log),
    }
}

/// The end of the last intact block of the file's `bytes` (one past its closing sync byte),
/// found by scanning back from the end, and the offset of that block's opening sync byte:
/// each 0x00 there may close a block, and the block it closes is intact if its frame is
/// sound and its body checks (a block that needs a dictionary or a codec this reader lacks
/// counts, since its frame is complete). Fails if the file does not start with a header block
/// this version reads.
pub(crate) fn intact_end(bytes: &[u8]) -> Result<(u64, usize)> {
    let mut header = ReaderBuilder::new().from_slice_range(bytes, 0..1);
    let header_end = match header.next_block() {
        Some(Ok(block))
            if block.info().block_type == BlockType::Header && block.info().offset == 0 =>
        {
            Some(block.info().size + 1)
        }
        Some(Err(e @ Error::UnsupportedVersion { .. })) => return Err(e),
        _ if header_lost(bytes) => None,
        _ => return Err(Error::NotACobsfile { offset: 0 }),
    };
    let mut end = bytes.len();
    while let Some(close) = memchr::memrchr(0, &bytes[..end]) {
        let Some(open) = memchr::memrchr(0, &bytes[..close]) else {
            break;
        };
        if close == open + 1 {
            // Padding (or zeros): the block before it decides.
            end = close;
            continue;
        }
        let mut reader = ReaderBuilder::new().from_slice_range(bytes, open as u64..open as u64 + 1);
        let complete = match reader.next_block() {
            Some(Ok(block)) => block.info().offset == open as u64,
            // A block over the reader's limits, or that needs a dictionary or codec it lacks,
            // cannot be checked; its frame is complete if it is sound, whatever the limits
            // (spec 11.1, rule 2): a log written with larger blocks is never cut.
            Some(Err(Error::Damaged { cause, start, .. })) if start == open as u64 + 1 => {
                !cause.is_damage() || (cause.is_over_limit() && sound_frame(bytes, open, close))
            }
            _ => false,
        };
        if complete {
            return Ok((close as u64 + 1, open));
        }
        end = close;
    }
    // No intact block: a lost header is then all the evidence, which is too little.
    header_end
        .map(|end| (end, 0))
        .ok_or(Error::NotACobsfile { offset: 0 })
}

/// Whether the file of `bytes` starts as one whose header a power cut took: where its 19
/// first bytes should be, each is that byte or zero (a write lost in a power cut leaves
/// zeros where the file's length survived without its data, sector by sector). Only with an
/// intact block further on does the file count as a log (spec 11.1, rule 1).
fn header_lost(bytes: &[u8]) -> bool {
    let start = block::file_start();
    bytes.len() >= start.len() && bytes.iter().zip(&start).all(|(&b, &s)| b == s || b == 0)
}
