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
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::block::{self, types};
use crate::codec::Compression;
use crate::error::{Error, Result};
use crate::fs::{FileSystem, Handle, StdFs};
use crate::reader::ReaderBuilder;
use crate::segments::{Maintainer, Retention, Rolling, Segments};
use crate::tail::{
    intact_end, is_open_log, lacks_closing_sync, scan_headers_and_marks, sync_bytes_alone,
};
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
    rolling: Rolling,
    retention: Retention,
    background: bool,
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
            rolling: Rolling::default(),
            retention: Retention::default(),
            background: true,
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

    /// Whether compressed data blocks hold their records as lines where they can; see
    /// [`WriterBuilder::line_layout`].
    pub fn line_layout(mut self, lines: bool) -> Self {
        self.writer = self.writer.line_layout(lines);
        self
    }

    /// Compresses with `dictionary`, embedded (once per opening) unless `embed` is false;
    /// see [`WriterBuilder::dictionary`].
    pub fn dictionary(mut self, dictionary: crate::Dictionary, embed: bool) -> Self {
        self.writer = self.writer.dictionary(dictionary, embed);
        self
    }

    /// A log directory ([`open_dir`](Self::open_dir)) rolls to a new segment once the one
    /// appended to is `bytes` long (Kafka's `segment.bytes`); default: never by size. The roll
    /// comes before a block, so a segment ends up to a block over `bytes`: data blocks are
    /// kept to at most a quarter of `bytes` of records (the block target, if larger, is
    /// lowered to it).
    pub fn segment_size(mut self, bytes: u64) -> Self {
        self.rolling.size = Some(bytes);
        self
    }

    /// A log directory rolls to a new segment once the one appended to is `age` old (Kafka's
    /// `segment.ms`); default: never by age. Checked before each block is written.
    pub fn segment_age(mut self, age: Duration) -> Self {
        self.rolling.age = Some(age);
        self
    }

    /// Old segments of a log directory are removed, oldest first, while the segments take more
    /// than `bytes` together (journald's `--vacuum-size`); see [`Retention`].
    pub fn retain_size(mut self, bytes: u64) -> Self {
        self.retention.size = Some(bytes);
        self
    }

    /// Old segments are removed once their records are older than `age`: once the segment
    /// after them was made that long ago (Kafka's `retention.ms`); see [`Retention`].
    pub fn retain_age(mut self, age: Duration) -> Self {
        self.retention.age = Some(age);
        self
    }

    /// Old segments are removed while the log has more than `count` segments; see
    /// [`Retention`].
    pub fn retain_count(mut self, count: u64) -> Self {
        self.retention.count = Some(count);
        self
    }

    /// Whether segments rolled away from are finished, and retention applied, on a thread of
    /// the appender's own (default) or on the thread that appends, during the write that
    /// rolls: a test that must run the same steps each time (a power-loss simulation) wants
    /// the latter.
    pub fn maintain_in_background(mut self, background: bool) -> Self {
        self.background = background;
        self
    }

    /// Opens the log directory `dir` (creating it if missing) for appending to its newest
    /// segment, or to a first one; see [`Appender`] and, for segments, [`crate::segments`].
    /// At opening, segments before the newest that no one has open and that are not finished
    /// (an appender crashed) are finished, and retention applied.
    pub fn open_dir(&self, dir: impl AsRef<Path>) -> Result<Appender> {
        std::fs::create_dir_all(dir.as_ref())?;
        Appender::open_dir_with(self, Arc::new(StdFs), dir.as_ref())
    }

    /// [`open_dir`](Self::open_dir) on `fs`, a simulated file system in tests (whose
    /// directories need no making).
    pub fn open_dir_in(
        &self,
        fs: Arc<dyn FileSystem + Send + Sync>,
        dir: impl AsRef<Path>,
    ) -> Result<Appender> {
        Appender::open_dir_with(self, fs, dir.as_ref())
    }

    /// What finishing a segment checks its blocks with: the dictionary, if any.
    fn reader_options(&self) -> ReaderBuilder {
        match self.writer.get_dictionary() {
            Some(dictionary) => ReaderBuilder::new().dictionary(dictionary.clone()),
            None => ReaderBuilder::new(),
        }
    }

    /// Seals what the appender appends with `key` (spec 8.10; see [`WriterBuilder::seal`]):
    /// each appender opened is a chain of its own, sealing once the blocks since its last
    /// seal hold [`DEFAULT_SEAL_BYTES`](crate::seal::DEFAULT_SEAL_BYTES) (or as
    /// [`seal_every`](Self::seal_every) says), at [`sync`](Appender::sync) and at
    /// [`close`](Appender::close). The log's id is the one its metadata holds; a log without
    /// one gets one in the first block appended (which needs the log to this appender alone,
    /// so that two appenders never give it two ids). In a log directory, each segment is a
    /// file of its own: the appender seals what it wrote to a segment when it leaves it, and
    /// starts a chain for the next, of the id the segment's metadata names (appenders of one
    /// directory should all seal, or none: a segment that one that does not seal made gets
    /// its id from the first that seals it).
    pub fn seal(mut self, key: crate::key::SealingKey) -> Self {
        self.writer = self.writer.seal(key);
        self
    }

    /// When an appender that seals seals on its own; see [`WriterBuilder::seal_every`].
    pub fn seal_every(mut self, bytes: u64, interval: Option<std::time::Duration>) -> Self {
        self.writer = self.writer.seal_every(bytes, interval);
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
    /// Finishes the segments of a log directory and applies retention.
    maintainer: Option<Arc<Maintainer>>,
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
    /// The file appended to (a log directory's segment changes), to sync it without holding
    /// the writer.
    current: Arc<Mutex<Arc<dyn Handle>>>,
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
    /// The same, for the appender's syncs.
    current: Arc<Mutex<Arc<dyn Handle>>>,
    /// The log directory whose segment `file` is, if it is one.
    segments: Option<Segments>,
    /// How a log starts: the 19 bytes every file starts with (the leading sync byte and the
    /// header block), then a log block.
    start: Vec<u8>,
    /// The metadata blocks announced ([`Appender::announce`]), each `type length body 00`: a
    /// log truncated to nothing starts again with them too.
    announced: Arc<Mutex<Vec<u8>>>,
    /// The dictionary block the writer embeds, if any (`type length body 00`): a log
    /// truncated to nothing starts again with it too, or its blocks could not be read.
    dictionary: Vec<u8>,
    /// A sealing appender's chain, in a log directory: sealed when a segment is left, and
    /// started anew for the next (spec 8.10).
    sealer: Option<crate::seal::SharedSealer>,
}

impl Write for LogFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // The writer hands over one block per call: fence it.
        // A log truncated to nothing under the appender (logrotate's `copytruncate`) starts
        // again with a header and a log block, in the same write as the block (spec 11.1,
        // rule 5).
        // The blocks it announced come with them: what a reader needs to read the records
        // after (the schema of typed records, spec 15.1).
        let mut len = self.file.len()?;
        // A seal goes where the blocks it seals are: never the first block of a segment.
        let seal = matches!(crate::varint::read(buf), Ok((types::SEAL, _)));
        if !seal && self.segments.as_mut().is_some_and(|s| s.due(len)) {
            self.roll()?;
            len = self.file.len()?;
        }
        let restart;
        let fence: &[u8] = if len == 0 {
            let announced = self.announced.lock().unwrap_or_else(|e| e.into_inner());
            match &self.sealer {
                // The seal of blocks the file no longer holds seals nothing here.
                Some(_) if seal => return Ok(buf.len()),
                // A file of its own: a new id, in its first metadata, and a new chain of it,
                // whose first blocks are what it starts with (spec 8.10, 11.1 rule 5). What
                // the chain before left unsealed stays so, in the copy.
                Some(sealer) => {
                    let id = crate::seal::Sealer::random_id()?;
                    let text = crate::seal::file_id_text(&id);
                    let meta = block::metadata_block([(crate::seal::FILE_ID_KEY, text)])
                        .map_err(io::Error::other)?;
                    restart = [&self.start[..], &meta, &self.dictionary, &announced].concat();
                    let mut sealer = crate::seal::lock(sealer);
                    sealer.restart(id, crate::seal::Sealer::random_id()?);
                    sealer.blocks_written(&restart);
                }
                None => restart = [&self.start[..], &self.dictionary, &announced].concat(),
            }
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

impl LogFile {
    /// Moves on to a new segment of the log directory (or a newer one another appender made),
    /// and hands the one left to be finished. A roll that fails leaves the appender where it
    /// was, to try again later.
    fn roll(&mut self) -> io::Result<()> {
        // A sealing appender seals what it wrote to the segment it leaves, there.
        if let Some(sealer) = &self.sealer {
            let mut sealer = crate::seal::lock(sealer);
            if sealer.pending() > 0 {
                let payload = sealer.seal_now().to_bytes();
                append_new_block(&*self.file, types::SEAL, &payload)?;
            }
        }
        // What was written to the segment left is durable before a sync of the next one
        // counts records durable.
        self.file.sync_data()?;
        // A new segment carries what a log started again does: the dictionary, the metadata
        // announced.
        let extra = {
            let announced = self.announced.lock().unwrap_or_else(|e| e.into_inner());
            [&self.dictionary[..], &announced].concat()
        };
        let Some(segments) = self.segments.as_mut() else {
            return Ok(());
        };
        let new_id = match self.sealer {
            Some(_) => Some(crate::seal::Sealer::random_id()?),
            None => None,
        };
        let Some(rolled) = segments.roll(&extra, new_id) else {
            return Ok(());
        };
        if let (Some(sealer), Some(new_id)) = (&self.sealer, new_id) {
            // A new chain for the new segment: of the id it made it with (its first blocks
            // are this chain's), or of the one a segment another appender made names (one
            // written first if it names none).
            let mut sealer = crate::seal::lock(sealer);
            match &rolled.made {
                Some(start) => {
                    sealer.restart(new_id, crate::seal::Sealer::random_id()?);
                    sealer.blocks_written(start);
                }
                None => match file_id_of(&*rolled.file).map_err(io::Error::other)? {
                    Some(id) => sealer.restart(id, crate::seal::Sealer::random_id()?),
                    None => {
                        sealer.restart(new_id, crate::seal::Sealer::random_id()?);
                        let mut payload = Vec::new();
                        let text = crate::seal::file_id_text(&new_id);
                        block::metadata_payload([(crate::seal::FILE_ID_KEY, text)], &mut payload)
                            .map_err(io::Error::other)?;
                        let written = append_new_block(&*rolled.file, types::METADATA, &payload)?;
                        sealer.block(&written);
                    }
                },
            }
        }
        let left = std::mem::replace(&mut self.file, Arc::clone(&rolled.file));
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = rolled.file;
        segments.maintainer.pass(Some(left));
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
                return file.append_all(&[0]);
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
        file.append_all(&[fence, block].concat())
    } else {
        append_block(file, fence, block)
    }
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
        let dictionary = options.writer.embedded_dictionary_block()?;
        Self::start(
            options,
            file,
            exclusive,
            None,
            dictionary.unwrap_or_default(),
        )
    }

    fn open_dir_with(
        options: &AppenderBuilder,
        fs: Arc<dyn FileSystem + Send + Sync>,
        dir: &Path,
    ) -> Result<Appender> {
        let maintainer = Arc::new(Maintainer::new(
            Arc::clone(&fs),
            dir.to_path_buf(),
            options.retention,
            options.reader_options(),
            options.background,
        )?);
        let mut options = options.clone();
        if let Some(size) = options.rolling.size {
            let quarter = usize::try_from(size / 4).unwrap_or(usize::MAX).max(1);
            if options.writer.get_block_target() > quarter {
                options.writer = options.writer.block_target(quarter);
            }
        }
        let options = &options;
        // What every new segment carries after its start, as a log started again does.
        let dictionary = options
            .writer
            .embedded_dictionary_block()?
            .unwrap_or_default();
        let mut segments = Segments {
            fs: Arc::clone(&fs),
            dir: dir.to_path_buf(),
            seq: 0,
            created: 0,
            rolling: options.rolling,
            looked: Instant::now(),
            failed: None,
            maintainer: Arc::clone(&maintainer),
            made: None,
        };
        // A sealing appender names a new file id in each segment it makes (spec 8.10).
        let seals = options.writer.seals();
        let new_id = || -> Result<Option<[u8; 16]>> {
            Ok(match seals {
                true => Some(crate::seal::Sealer::random_id()?),
                false => None,
            })
        };
        // Each round opens the newest segment, or finds it gone, finished, or missing.
        for _ in 0..64 {
            let Some((seq, path)) = crate::segments::list_in(&*fs, dir)?.pop() else {
                let rolled = segments.roll(&dictionary, new_id()?).ok_or_else(|| {
                    io::Error::other(format!("cannot make a first segment in {}", dir.display()))
                });
                let _ = rolled?;
                continue;
            };
            let file = match fs.open_existing(&path) {
                Ok(file) => file,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e.into()),
            };
            let exclusive = file.try_lock()?;
            let named = match exclusive {
                true => crate::segments::still_named(&*fs, &path)?,
                false => crate::segments::lock_named(&*fs, &*file, &path)?,
            };
            if !named {
                continue;
            }
            segments.seq = seq;
            if crate::segments::ends_finished(&*file)? {
                // Finished (by hand): never appended to again; the next segment is.
                drop(file);
                if segments.roll(&dictionary, new_id()?).is_none() {
                    return Err(io::Error::other(format!(
                        "cannot make a segment after {} in {}",
                        crate::segments::segment_name(seq),
                        dir.display()
                    ))
                    .into());
                }
                continue;
            }
            segments.created = {
                let contents = file.contents()?;
                crate::segments::created(contents.bytes()).unwrap_or_else(crate::segments::now_ns)
            };
            let appender = Self::start(options, file, exclusive, Some(segments), dictionary)?;
            maintainer.pass(None);
            return Ok(appender);
        }
        Err(io::Error::other(format!(
            "the segments of {} keep changing: no segment to append to",
            dir.display()
        ))
        .into())
    }

    /// Starts appending to `file`, locked (exclusively if `exclusive`): deals with its torn
    /// tail and writes a log block if need be. `dictionary` is the dictionary block the writer
    /// embeds, if any.
    fn start(
        options: &AppenderBuilder,
        file: Arc<dyn Handle>,
        exclusive: bool,
        segments: Option<Segments>,
        dictionary: Vec<u8>,
    ) -> Result<Appender> {
        let maintainer = segments.as_ref().map(|s| Arc::clone(&s.maintainer));
        let mut opened = Opened {
            created: false,
            exclusive,
            torn: None,
            truncated: false,
            completed: false,
            log_block: false,
            header_lost: false,
        };
        let mut len = file.len()?;
        // A file of nothing but one or two sync bytes is a cobsfile with no blocks, cut before
        // its header (spec 9.5): alone on it, an appender starts it again, as an empty file.
        if exclusive && len <= 2 && sync_bytes_alone(file.contents()?.bytes()) {
            file.set_len(0)?;
            len = 0;
        }
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
                file.append_all(&[0])?;
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
        let mut writer_options = options.writer.clone().without_header();
        let mut log_sealer = None;
        if writer_options.seals() {
            let file_id = match opened.created {
                true => None,
                false => file_id_of(&*file)?,
            };
            if file_id.is_none() && !exclusive {
                return Err(Error::Io(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    "the log has no file id yet, and others append to it: the first appender \
                     that seals it must have it alone, so that it gets one id",
                )));
            }
            writer_options = writer_options.seal_file_id(file_id);
            // A chain the log starts anew when it starts another file: a log directory at
            // each segment (of this segment's id, its first blocks this appender's if it made
            // them), a log truncated to nothing under it (`copytruncate`) when it starts again.
            let key = writer_options.sealing_key().expect("a writer that seals");
            let id = match file_id {
                Some(id) => id,
                None => crate::seal::Sealer::random_id()?,
            };
            let mut sealer = crate::seal::Sealer::new(key, id, crate::seal::Sealer::random_id()?);
            if let Some(segments) = &segments {
                if let Some((seq, start)) = &segments.made {
                    if *seq == segments.seq {
                        sealer.blocks_written(start);
                    }
                }
            }
            let shared = Arc::new(Mutex::new(sealer));
            writer_options = writer_options.seal_shared(Arc::clone(&shared));
            log_sealer = Some(shared);
        }
        let sync = Arc::clone(&file);
        let current = Arc::new(Mutex::new(Arc::clone(&file)));
        let announced = Arc::new(Mutex::new(Vec::new()));
        let writer = writer_options.build(LogFile {
            file,
            current: Arc::clone(&current),
            segments,
            start,
            announced: Arc::clone(&announced),
            dictionary,
            sealer: log_sealer,
        })?;
        if exclusive {
            // The file's start is written: let other appenders in.
            sync.lock_shared()?;
        }
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                writer,
                current,
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
            maintainer,
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
        let encoded = block::metadata_block(pairs())?;
        self.write_metadata(pairs())?;
        self.announced
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(&encoded);
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
        seal_waiting(&mut state)?;
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
        seal_waiting(&mut state)?;
        if matches!(
            self.durability,
            Durability::Fsync | Durability::Group { .. }
        ) {
            state.sync()?;
        }
        drop(state);
        if let Some(maintainer) = &self.maintainer {
            maintainer.close();
        }
        Ok(())
    }

    /// The first error that finishing segments of a log directory, or removing them by
    /// retention, met (the records are safe: a segment is left as it was). `None` for a
    /// single file.
    pub fn segments_error(&self) -> Option<String> {
        self.maintainer.as_ref().and_then(|m| m.error())
    }

    /// Waits for the passes over a log directory asked for so far (finishing the segments
    /// left, retention) and returns the first error any pass met; later passes run on the
    /// appending thread. `None` for a single file, or when every pass succeeded.
    pub fn wait_segments(&mut self) -> Option<String> {
        let maintainer = self.maintainer.as_ref()?;
        maintainer.close();
        maintainer.error()
    }

    /// The segment appended to now, for a log directory.
    pub fn segment(&self) -> Option<PathBuf> {
        let state = lock(&self.shared);
        let segments = state.writer.get_ref().segments.as_ref()?;
        Some(
            segments
                .dir
                .join(crate::segments::segment_name(segments.seq)),
        )
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
        let file = Arc::clone(&self.current.lock().unwrap_or_else(|e| e.into_inner()));
        let synced = sync_file(&*file, self.entry_unsynced).map_err(Error::from);
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

/// Appends a block of `block_type` holding `payload` (codec 0), fenced as every block an
/// appender writes; returns its bytes, from its type field to its closing sync byte.
fn append_new_block(file: &dyn Handle, block_type: i64, payload: &[u8]) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let at = block::encode(block_type, payload, None, &mut out).map_err(io::Error::other)?;
    let block = out.split_off(at);
    append_block(file, &[0], &block)?;
    Ok(block)
}

/// Seals the blocks written since the last seal, if the appender seals and there are any.
fn seal_waiting(state: &mut State) -> Result<()> {
    state.check()?;
    let sealed = state.writer.seal();
    state.note(sealed)
}

/// The file id the metadata of the log `file` holds (spec 8.10), if any.
fn file_id_of(file: &dyn Handle) -> Result<Option<[u8; 16]>> {
    let contents = file.contents()?;
    // A skipping scan that stops at the first id: the first appender that sealed the log
    // wrote it first, so that opening a long log reads its first blocks, not all of it.
    let mut reader = ReaderBuilder::new().from_slice(contents.bytes());
    let found = (reader.metadata().flatten())
        .find_map(|m| m.get(crate::seal::FILE_ID_KEY).map(<[u8]>::to_vec));
    Ok(found.and_then(|value| crate::seal::parse_file_id(&value)))
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
            let file = Arc::clone(&state.current.lock().unwrap_or_else(|e| e.into_inner()));
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
