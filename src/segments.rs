//! Segmented logs (spec 11.4): a log kept as a directory of segment files that an
//! [`Appender`](crate::Appender) rolls over by size or age, finishes once no one appends to
//! them ([`finish_log`](crate::finish_log)), and removes when a retention limit says, as Kafka
//! keeps a partition's segments and journald its journal files.
//!
//! Segments are named by a sequence number, 20 decimal digits and `.cobs`
//! (`00000000000000000001.cobs`), so that names sort in log order; other files in the directory
//! are not segments. A segment starts as every log an appender starts (a header and a log
//! block) and then a metadata block with [`SEGMENT_CREATED_KEY`], the time it was made, by which
//! segments roll by age and expire.
//!
//! A segment appears under its name whole: made without a name, written and synced, then named
//! with `linkat`, which fails if another appender made that segment first; the appender then
//! appends to that one. Finishing and removing each take a segment's exclusive lock, which no
//! one gets while an appender or a reader that maps the file has it open.

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::block::{self, types, BlockType};
use crate::error::Result;
use crate::finish::{finish_open, Finish};
use crate::fs::{FileSystem, Handle};
use crate::reader::ReaderBuilder;

/// The metadata key whose value is when a segment was made: nanoseconds since the Unix epoch,
/// in decimal ASCII.
pub const SEGMENT_CREATED_KEY: &str = "cobsfile.segment.created";

/// The end of every finished file: an end block and its sync bytes (spec 8.6).
pub(crate) const END_BLOCK: [u8; 10] = [0x00, 0x0c, 0x0e, 0x01, 0x05, 0xf3, 0x5d, 0x6c, 0xed, 0x00];

/// The file name of segment `seq`.
pub fn segment_name(seq: u64) -> String {
    format!("{seq:020}.cobs")
}

/// The sequence number of the segment named `name`, if it is a segment's name.
pub fn segment_seq(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".cobs")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The segments of the log in `dir`, in log order: sequence numbers and paths.
pub fn list_segments(dir: impl AsRef<Path>) -> io::Result<Vec<(u64, PathBuf)>> {
    list_in(&crate::fs::StdFs, dir.as_ref())
}

/// [`list_segments`] on `fs`.
pub(crate) fn list_in(fs: &dyn FileSystem, dir: &Path) -> io::Result<Vec<(u64, PathBuf)>> {
    let mut segments: Vec<(u64, PathBuf)> = fs
        .list(dir)?
        .into_iter()
        .filter_map(|path| {
            let seq = segment_seq(path.file_name()?.to_str()?)?;
            Some((seq, path))
        })
        .collect();
    segments.sort();
    Ok(segments)
}

/// When an appender rolls to a new segment: once the segment is `size` bytes or more, or was
/// made `age` ago or longer (Kafka's `segment.bytes` and `segment.ms`). Neither: never.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rolling {
    /// Bytes of a segment from which the next block goes to a new one.
    pub size: Option<u64>,
    /// Age of a segment from which the next block goes to a new one.
    pub age: Option<Duration>,
}

/// Which old segments are removed: oldest first, while the log holds more than `size` bytes or
/// more than `count` segments, or while the oldest segment's successor was made more than
/// `age` ago (its records are older than that: Kafka's `retention.bytes` and `retention.ms`,
/// journald's `--vacuum-size` and `--vacuum-time`). The segment appended to is never removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Retention {
    /// The most bytes the segments may take together.
    pub size: Option<u64>,
    /// How long records are kept: a segment goes once its successor is older than this.
    pub age: Option<Duration>,
    /// The most segments the log may have.
    pub count: Option<u64>,
}

impl Retention {
    /// Whether any limit is set.
    pub fn is_set(&self) -> bool {
        self.size.is_some() || self.age.is_some() || self.count.is_some()
    }
}

/// What one pass over a log's directory did ([`maintain`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Maintained {
    /// Segments finished in place.
    pub finished: u64,
    /// Segments left unfinished because someone has them open.
    pub busy: u64,
    /// Segments removed by retention, oldest first.
    pub removed: Vec<PathBuf>,
    /// Retention stopped at a segment it would have removed because someone has it open.
    pub held: bool,
}

impl Maintained {
    /// Whether a later pass may do more: a segment was left unfinished or kept because
    /// someone had it open.
    pub fn left_undone(&self) -> bool {
        self.busy > 0 || self.held
    }
}

/// Now, in nanoseconds since the Unix epoch.
pub(crate) fn now_ns() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since.as_nanos()).unwrap_or(i64::MAX)
}

/// The bytes a new segment starts with: the 19 bytes every file starts with, a log block,
/// and a metadata block saying when it was made (`created`, ns since the epoch).
pub(crate) fn segment_start(created: i64, file_id: Option<[u8; 16]>) -> Result<Vec<u8>> {
    let mut start = block::file_start();
    start.extend_from_slice(&block::empty_block(types::LOG)[1..]);
    let value = created.to_string();
    let mut entries = vec![(SEGMENT_CREATED_KEY, value.into_bytes())];
    if let Some(id) = file_id {
        entries.push((
            crate::seal::FILE_ID_KEY,
            crate::seal::file_id_text(&id).into_bytes(),
        ));
    }
    start.extend_from_slice(&block::metadata_block(entries)?);
    Ok(start)
}

/// When the segment of `bytes` was made, from its metadata: the first metadata block with
/// [`SEGMENT_CREATED_KEY`] among its first blocks.
pub(crate) fn created(bytes: &[u8]) -> Option<i64> {
    let mut reader = ReaderBuilder::new().from_slice(bytes);
    for _ in 0..8 {
        let block = reader.next_block()?.ok()?;
        match block.info().block_type {
            BlockType::Metadata => {
                let value = block
                    .entries()
                    .find(|(key, _)| *key == SEGMENT_CREATED_KEY)
                    .map(|(_, value)| value);
                if let Some(value) = value {
                    return std::str::from_utf8(value).ok()?.parse().ok();
                }
            }
            BlockType::Data => return None,
            _ => {}
        }
    }
    None
}

/// Whether the file ends with an end block: finished, as far as its last bytes tell.
pub(crate) fn ends_finished(file: &dyn Handle) -> Result<bool> {
    let contents = file.contents()?;
    Ok(contents.bytes().ends_with(&END_BLOCK))
}

/// One pass over the segments of the log in `dir`: finishes each segment before the newest
/// that is not finished and that no one has open, then removes old segments as `retention`
/// says (oldest first; a segment someone has open stops the pass, so what is kept is always
/// the newest part of the log). `options` gives what finishing checks blocks with.
pub fn maintain(
    dir: impl AsRef<Path>,
    retention: &Retention,
    options: &ReaderBuilder,
) -> Result<Maintained> {
    maintain_in(&crate::fs::StdFs, dir.as_ref(), retention, options)
}

/// [`maintain`] on `fs`.
pub fn maintain_in(
    fs: &dyn FileSystem,
    dir: &Path,
    retention: &Retention,
    options: &ReaderBuilder,
) -> Result<Maintained> {
    let mut done = Maintained::default();
    let segments = list_in(fs, dir)?;
    let Some((_, older)) = segments.split_last() else {
        return Ok(done);
    };
    for (_, path) in older {
        let file = match fs.open_existing(path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e.into()),
        };
        if ends_finished(&*file)? {
            continue;
        }
        match finish_open(&*file, options)? {
            Finish::Finished(_) => done.finished += 1,
            Finish::Busy => done.busy += 1,
            Finish::Already | Finish::Empty => {}
        }
    }
    if retention.is_set() {
        remove_expired(fs, dir, &segments, retention, &mut done)?;
    }
    Ok(done)
}

/// Removes segments as `retention` says; see [`maintain`].
fn remove_expired(
    fs: &dyn FileSystem,
    dir: &Path,
    segments: &[(u64, PathBuf)],
    retention: &Retention,
    done: &mut Maintained,
) -> Result<()> {
    let mut sizes = Vec::with_capacity(segments.len());
    for (_, path) in segments {
        let len = match fs.open_existing(path) {
            Ok(file) => file.len()?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => 0,
            Err(e) => return Err(e.into()),
        };
        sizes.push(len);
    }
    let mut total: u64 = sizes.iter().sum();
    let mut count = segments.len() as u64;
    let now = now_ns();
    for (i, (_, path)) in segments.iter().enumerate().take(segments.len() - 1) {
        let over_size = retention.size.is_some_and(|max| total > max);
        let over_count = retention.count.is_some_and(|max| count > max);
        let expired = match retention.age {
            Some(age) => {
                let successor = fs.open_existing(&segments[i + 1].1)?;
                let contents = successor.contents()?;
                let age = i64::try_from(age.as_nanos()).unwrap_or(i64::MAX);
                created(contents.bytes()).is_some_and(|made| made.saturating_add(age) <= now)
            }
            None => false,
        };
        if !(over_size || over_count || expired) {
            break;
        }
        let file = match fs.open_existing(path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                total -= sizes[i];
                count -= 1;
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        if !file.try_lock()? {
            done.held = true;
            break;
        }
        fs.remove(path)?;
        drop(file);
        total -= sizes[i];
        count -= 1;
        done.removed.push(path.clone());
    }
    if !done.removed.is_empty() {
        fs.sync_dir(dir)?;
    }
    Ok(())
}

/// Looks for a segment made by another appender at most this often.
const LOOK_EVERY: Duration = Duration::from_millis(100);

/// A roll that failed (the disk full, say) is tried again after this long; blocks go to the
/// segment appended to until then.
const RETRY_ROLL: Duration = Duration::from_secs(1);

/// A pass that found a segment someone had open (a follower that had not yet seen the next
/// segment, a reader) is run again after this long on the background thread, twice as long
/// each time it finds one again, up to [`RETRY_PASS_MOST`]: the segment is finished soon
/// after it is let go, not at the next roll.
const RETRY_PASS: Duration = Duration::from_secs(1);
const RETRY_PASS_MOST: Duration = Duration::from_secs(64);

/// The segment directory an appender appends to: where it is, which segment it appends to,
/// and when it rolls.
#[derive(Debug)]
pub(crate) struct Segments {
    pub fs: std::sync::Arc<dyn FileSystem + Send + Sync>,
    pub dir: PathBuf,
    /// The segment appended to.
    pub seq: u64,
    /// When it was made (ns since the epoch).
    pub created: i64,
    pub rolling: Rolling,
    /// When the directory was last looked at for newer segments.
    pub looked: std::time::Instant,
    /// When a roll last failed.
    pub failed: Option<std::time::Instant>,
    /// Finishes segments rolled away from and applies retention.
    pub maintainer: std::sync::Arc<Maintainer>,
    /// The segment this appender made last, and the bytes it started it with.
    pub made: Option<(u64, Vec<u8>)>,
}

/// What a roll found: the segment to append to from now on, and, if the roll made it, the
/// bytes it started it with.
pub(crate) struct Rolled {
    pub file: std::sync::Arc<dyn Handle>,
    pub made: Option<Vec<u8>>,
}

impl Segments {
    /// Whether the next block goes to a new segment: the one appended to is `len` bytes.
    pub fn due(&mut self, len: u64) -> bool {
        if self.failed.is_some_and(|at| at.elapsed() < RETRY_ROLL) {
            return false;
        }
        if self.rolling.size.is_some_and(|size| len >= size) {
            return true;
        }
        if let Some(age) = self.rolling.age {
            let age = i64::try_from(age.as_nanos()).unwrap_or(i64::MAX);
            if now_ns() >= self.created.saturating_add(age) {
                return true;
            }
        }
        if self.looked.elapsed() >= LOOK_EVERY {
            self.looked = std::time::Instant::now();
            if let Ok(segments) = list_in(&*self.fs, &self.dir) {
                return segments.last().is_some_and(|(seq, _)| *seq > self.seq);
            }
        }
        false
    }

    /// Moves on to the newest segment, making a new one unless another appender made one
    /// after the one appended to; a segment it makes carries `extra` after its start (the
    /// blocks every segment needs: an embedded dictionary, announced metadata), and its
    /// metadata names `file_id` if given (a sealing appender's, spec 8.10). `None` if that
    /// failed: the caller appends where it did and tries again later.
    pub fn roll(&mut self, extra: &[u8], file_id: Option<[u8; 16]>) -> Option<Rolled> {
        match self.next_segment(extra, file_id) {
            Ok(rolled) => {
                self.failed = None;
                Some(rolled)
            }
            Err(_) => {
                self.failed = Some(std::time::Instant::now());
                None
            }
        }
    }

    fn next_segment(&mut self, extra: &[u8], file_id: Option<[u8; 16]>) -> Result<Rolled> {
        // Each round either opens a segment or finds a newer one made meanwhile.
        for _ in 0..64 {
            let newest = list_in(&*self.fs, &self.dir)?
                .last()
                .map_or(0, |(seq, _)| *seq);
            let mut made = None;
            let seq = if newest > self.seq {
                newest
            } else {
                let seq = self.seq + 1;
                let created = now_ns();
                let Some(start) = self.make(seq, created, extra, file_id)? else {
                    // Another appender made it first.
                    continue;
                };
                made = Some(start);
                seq
            };
            let path = self.dir.join(segment_name(seq));
            let file = match self.fs.open_existing(&path) {
                Ok(file) => file,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e.into()),
            };
            if !lock_named(&*self.fs, &*file, &path)? {
                continue;
            }
            let contents = file.contents()?;
            let bytes = contents.bytes();
            // A segment finished already (by hand) is rolled past, never appended to.
            if bytes.ends_with(&END_BLOCK) {
                self.seq = seq;
                continue;
            }
            self.created = created(bytes).unwrap_or_else(now_ns);
            drop(contents);
            self.seq = seq;
            // Its name may have been made by an appender that crashed before syncing the
            // directory: records appended to it are durable only with it.
            file.sync_entry()?;
            self.made = made.as_ref().map(|start| (seq, start.clone()));
            return Ok(Rolled { file, made });
        }
        Err(
            io::Error::other("segments keep appearing faster than this appender can open them")
                .into(),
        )
    }

    /// Makes segment `seq` (its start, then `extra`), whole and synced before it takes its
    /// name: the bytes it starts with, or `None` if the name was taken.
    fn make(
        &self,
        seq: u64,
        created: i64,
        extra: &[u8],
        file_id: Option<[u8; 16]>,
    ) -> Result<Option<Vec<u8>>> {
        let path = self.dir.join(segment_name(seq));
        let new = self.fs.create_new(&path)?;
        let mut start = segment_start(created, file_id)?;
        start.extend_from_slice(extra);
        new.append_all(&start)?;
        new.sync()?;
        match new.place(false) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(None),
            Err(e) => return Err(e.into()),
        }
        new.sync_entry()?;
        Ok(Some(start))
    }
}

/// Takes the shared lock on `file`, opened as `path`, and checks that `path` still names a
/// file: retention removes a segment holding its exclusive lock, so a segment named once the
/// lock is held stays until it is let go. False if it was removed (or is being removed).
pub(crate) fn lock_named(fs: &dyn FileSystem, file: &dyn Handle, path: &Path) -> Result<bool> {
    match file.lock_shared() {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
        Err(e) => return Err(e.into()),
    }
    still_named(fs, path)
}

/// Whether `path` still names a file, checked holding a lock on the file opened by it.
pub(crate) fn still_named(fs: &dyn FileSystem, path: &Path) -> Result<bool> {
    match fs.open_existing(path) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Finishes the segments an appender rolled away from and removes expired ones: on a thread
/// of its own, so that appending never waits for it, or on the appending thread (for tests
/// that must run the same steps each time).
#[derive(Debug)]
pub(crate) struct Maintainer {
    job: Job,
    background: std::sync::Mutex<Option<Background>>,
    /// The first error a pass met: the records are safe, the directory keeps what a pass
    /// would have removed.
    error: std::sync::Arc<std::sync::Mutex<Option<String>>>,
}

#[derive(Debug, Clone)]
struct Job {
    fs: std::sync::Arc<dyn FileSystem + Send + Sync>,
    dir: PathBuf,
    retention: Retention,
    options: ReaderBuilder,
}

#[derive(Debug)]
struct Background {
    wake: std::sync::mpsc::Sender<Option<std::sync::Arc<dyn Handle>>>,
    thread: std::thread::JoinHandle<()>,
}

impl Maintainer {
    pub fn new(
        fs: std::sync::Arc<dyn FileSystem + Send + Sync>,
        dir: PathBuf,
        retention: Retention,
        options: ReaderBuilder,
        background: bool,
    ) -> io::Result<Self> {
        let job = Job {
            fs,
            dir,
            retention,
            options,
        };
        let error = std::sync::Arc::new(std::sync::Mutex::new(None));
        let background = match background {
            false => None,
            true => {
                let (wake, woken) =
                    std::sync::mpsc::channel::<Option<std::sync::Arc<dyn Handle>>>();
                let (job, error) = (job.clone(), std::sync::Arc::clone(&error));
                let thread = std::thread::Builder::new()
                    .name("cobsfile-segments".into())
                    .spawn(move || {
                        use std::sync::mpsc::RecvTimeoutError;
                        let mut retry: Option<Duration> = None;
                        loop {
                            let left = match retry {
                                None => match woken.recv() {
                                    Ok(left) => left,
                                    Err(_) => break,
                                },
                                Some(wait) => match woken.recv_timeout(wait) {
                                    Ok(left) => left,
                                    Err(RecvTimeoutError::Timeout) => None,
                                    Err(RecvTimeoutError::Disconnected) => break,
                                },
                            };
                            retry = job.run(left, &error).then(|| {
                                retry.map_or(RETRY_PASS, |wait| (wait * 2).min(RETRY_PASS_MOST))
                            });
                        }
                    })?;
                Some(Background { wake, thread })
            }
        };
        Ok(Maintainer {
            job,
            background: std::sync::Mutex::new(background),
            error,
        })
    }

    /// A pass over the directory, after the appender left the segment `left` (whose handle
    /// it hands over, to finish it through).
    pub fn pass(&self, left: Option<std::sync::Arc<dyn Handle>>) {
        let background = self.background.lock().unwrap_or_else(|p| p.into_inner());
        match &*background {
            Some(background) => {
                let _ = background.wake.send(left);
            }
            None => {
                drop(background);
                self.job.run(left, &self.error);
            }
        }
    }

    /// Waits for the passes asked for to end; later passes run on the caller's thread.
    pub fn close(&self) {
        let background = self
            .background
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(background) = background {
            drop(background.wake);
            let _ = background.thread.join();
        }
    }

    /// The first error a pass met, if any.
    pub fn error(&self) -> Option<String> {
        self.error.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Job {
    /// A pass; true if it left something undone because someone had a segment open.
    fn run(
        &self,
        left: Option<std::sync::Arc<dyn Handle>>,
        error: &std::sync::Mutex<Option<String>>,
    ) -> bool {
        let mut outcome = Ok(false);
        if let Some(file) = left {
            // Through the appender's own handle: its shared lock turns exclusive if no one
            // else has the segment open. If someone has, the pass below finds it again.
            outcome = finish_open(&*file, &self.options).map(|_| false);
        }
        if outcome.is_ok() {
            outcome = maintain_in(&*self.fs, &self.dir, &self.retention, &self.options)
                .map(|done| done.left_undone());
        }
        outcome.unwrap_or_else(|e| {
            error
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_or_insert_with(|| format!("segments in {}: {e}", self.dir.display()));
            false
        })
    }
}

/// A log directory opened for reading: its segments, in log order, each mapped (and so held
/// with a shared lock: retention removes none of them while this lives; spec 11.4).
///
/// A segment that retention removed between the listing and its mapping is left out: its
/// records had gone from the log.
#[derive(Debug)]
pub struct LogDir {
    dir: PathBuf,
    segments: Vec<Segment>,
}

/// One segment of a [`LogDir`].
#[derive(Debug)]
pub struct Segment {
    /// Its sequence number.
    pub seq: u64,
    /// Its path.
    pub path: PathBuf,
    /// The file, mapped.
    pub file: crate::MappedFile,
}

impl LogDir {
    /// Opens the log directory `dir`: lists its segments and maps each. Fails if `dir` cannot
    /// be listed or holds no segment (it is then no log directory).
    pub fn open(dir: impl AsRef<Path>) -> Result<LogDir> {
        let dir = dir.as_ref();
        let mut segments = Vec::new();
        let listed = list_segments(dir)?;
        if listed.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "no segments in it (files named {} and on): not a log directory",
                    segment_name(1)
                ),
            )
            .into());
        }
        for (seq, path) in listed {
            match crate::mapped::open(&path) {
                Ok(file) => segments.push(Segment { seq, path, file }),
                Err(crate::Error::Io(e)) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(LogDir {
            dir: dir.to_path_buf(),
            segments,
        })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The segments, in log order.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// Where record `record` of the log lies (counted from 0, as readers with `options`
    /// return the records of the segments in turn): the segment's place in
    /// [`segments`](Self::segments) and the record's number in it, or
    /// `(segments().len(), 0)` past the last record. A segment wholly before it is counted by
    /// its index when that lists the whole segment and `options` set no time window (which
    /// leaves records out), and otherwise by reading it: as a seek within a file counts
    /// (spec 9.6, 11.4), a damaged segment's records count as written where its index counts
    /// them, and as a read returns them where it is read.
    pub fn find_record(&self, options: &ReaderBuilder, mut record: u64) -> (usize, u64) {
        for (at, segment) in self.segments.iter().enumerate() {
            let indexed = match options.get_window() {
                None => (segment.file.index())
                    .filter(|i| i.start() == 0)
                    .map(|i| i.records()),
                Some(_) => None,
            };
            let count = indexed.unwrap_or_else(|| {
                let mut reader = segment.file.reader_at_record(options, 0);
                let mut count = 0;
                while count <= record {
                    match reader.next_record() {
                        Some(Ok(_)) => count += 1,
                        Some(Err(_)) => {}
                        None => break,
                    }
                }
                count
            });
            if count > record {
                return (at, record);
            }
            record -= count;
        }
        (self.segments.len(), 0)
    }

    /// The records of every segment in log order, as a reader with `options` returns them
    /// segment by segment (time windows, threads and limits apply to each; a finished
    /// segment's index and time index plan its read), each with the segment it comes from;
    /// damage is an error as a reader gives it, its offsets the segment's.
    pub fn records<'a>(
        &'a self,
        options: &'a ReaderBuilder,
    ) -> impl Iterator<Item = (&'a Path, Result<Vec<u8>>)> + 'a {
        self.segments.iter().flat_map(move |segment| {
            let mut reader = segment.file.reader_at_record(options, 0);
            let path = segment.path.as_path();
            std::iter::from_fn(move || {
                let item = reader.next_record()?;
                Some((path, item.map(<[u8]>::to_vec)))
            })
        })
    }
}
