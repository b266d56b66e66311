//! Reading blocks, records and metadata, resynchronizing after damage.
//!
//! One [`Reader`] serves every input: it scans a [`Source`] window with the sans-I/O `frame`
//! scanner, decodes bodies with `block`, and merges consecutive damage into one
//! [`Error::Damaged`] naming the skipped byte range. After that error it goes on at the next
//! sync byte, so a caller that wants to stop at the first damage just stops iterating.

use std::io::{self, Read};
use std::ops::Range;

use crate::block::{self, BlockKind, Body, Entries, Place, Records, Scratch, FORMAT_VERSION};
use crate::codec::Refused;
use crate::codec::{Decompressor, Dictionary};
use crate::error::{Cause, Error, Result};
use crate::frame::{self, Check, Frame, Scan};
use crate::limits::Limits;
use crate::parallel::{Decoders, Popped};
use crate::source::{SliceSource, Source, StreamSource};
use crate::varint;

/// A reader over a byte slice or a mapped file.
pub type SliceReader<'a> = Reader<SliceSource<'a>>;

/// A reader over any `io::Read` (stdin, pipes, sockets), holding at most one block in memory.
pub type StreamReader<R> = Reader<StreamSource<R>>;

/// Options for readers.
///
/// ```
/// let reader = cobsfile::ReaderBuilder::new()
///     .max_block_size(1 << 20)
///     .from_slice(&[]);
/// # drop(reader);
/// ```
#[derive(Debug, Clone)]
pub struct ReaderBuilder {
    pub(crate) limits: Limits,
    dictionaries: Vec<Dictionary>,
    pub(crate) threads: usize,
    pub(crate) min_split: u64,
}

impl Default for ReaderBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl ReaderBuilder {
    /// Default options: the default [`Limits`], no dictionaries, one thread.
    pub fn new() -> Self {
        ReaderBuilder {
            limits: Limits::default(),
            dictionaries: Vec::new(),
            threads: 0,
            min_split: 1 << 20,
        }
    }

    /// The largest decoded block body the reader accepts (default 64 MiB). Larger blocks are
    /// reported as damage without being read into memory, so a hostile length field cannot
    /// make the reader allocate more than about this much.
    pub fn max_block_size(mut self, bytes: usize) -> Self {
        self.limits = self.limits.max_block_size(bytes);
        self
    }

    /// Every bound the reader enforces (see [`Limits`]); replaces an earlier
    /// [`max_block_size`](Self::max_block_size).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The bounds the reader enforces.
    pub fn get_limits(&self) -> &Limits {
        &self.limits
    }

    /// Makes `dictionary` available for blocks compressed with it (repeatable). Dictionaries
    /// a file embeds are picked up as the reader meets them; a block that needs a dictionary
    /// the reader does not have is reported, never decoded with another one.
    pub fn dictionary(mut self, dictionary: Dictionary) -> Self {
        self.dictionaries.push(dictionary);
        self
    }

    /// Decodes blocks on `threads` worker threads in readers over slices and mapped files
    /// (default 0; 0 and 1 decode on the calling thread; `from_read` always does).
    ///
    /// The reader scans the input on the calling thread and hands up to 2 blocks per thread
    /// to the workers, each with its own zstd context, while the caller goes through the
    /// blocks before them. Records, blocks, errors (merged the same way) and
    /// [`stats`](Reader::stats) are exactly those of a reader on one thread, in the same
    /// order; [`Reader::metadata`] skips data blocks on the calling thread as always.
    ///
    /// ```
    /// let mut writer = cobsfile::WriterBuilder::new().block_size(1000).build(Vec::new())?;
    /// for i in 0..1000 {
    ///     writer.write_record(format!("event {i}").as_bytes())?;
    /// }
    /// let file = writer.finish()?;
    ///
    /// let mut reader = cobsfile::ReaderBuilder::new().threads(2).from_slice(&file);
    /// let mut count = 0;
    /// while let Some(record) = reader.next_record() {
    ///     assert_eq!(record?, format!("event {count}").as_bytes());
    ///     count += 1;
    /// }
    /// assert_eq!(count, 1000);
    /// # Ok::<(), cobsfile::Error>(())
    /// ```
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = threads;
        self
    }

    /// The smallest range a [`scan`](Self::scan) on several threads gives one thread
    /// (default 1 MiB; at least 1). Ranges are about an eighth of a thread's share of the
    /// input when that is larger, up to 16 MiB. Smaller ranges balance the threads better and
    /// cost a reader's setup each.
    pub fn min_split(mut self, bytes: u64) -> Self {
        self.min_split = bytes.max(1);
        self
    }

    /// A reader over `bytes`.
    pub fn from_slice<'a>(&self, bytes: &'a [u8]) -> SliceReader<'a> {
        Reader::new(SliceSource(bytes), self, self.threads)
    }

    /// A reader over the blocks of `bytes` whose opening sync byte lies in `range` (byte
    /// offsets into `bytes`; the range may extend past the end).
    ///
    /// Readers over adjacent ranges that cover the input, whatever their sizes, together
    /// return every intact block exactly once and in order: the same blocks, records and
    /// dictionaries as one reader over the whole input (the input-split contract that lets N
    /// readers share a file; spec 9.4). A reader starts at the first sync byte at or after
    /// `range.start` (bytes before it belong to the block or damage before the range) and
    /// stops at the first sync byte at or after `range.end` that can open a block, one
    /// followed by a byte other than 0x00 (the last block may end past `range.end`). Damage is reported as usual, clipped to the range's part of it. A block
    /// compressed with a dictionary the file embeds before the range is found by skipping
    /// through the blocks before the range, once, when the first such block is met.
    ///
    /// ```
    /// let mut writer = cobsfile::WriterBuilder::new().block_size(100).build(Vec::new())?;
    /// for i in 0..1000 {
    ///     writer.write_record(format!("event {i}").as_bytes())?;
    /// }
    /// let file = writer.finish()?;
    ///
    /// let options = cobsfile::ReaderBuilder::new();
    /// let split = file.len() as u64 / 3;
    /// let mut count = 0;
    /// for range in [0..split, split..2 * split, 2 * split..u64::MAX] {
    ///     let mut reader = options.from_slice_range(&file, range);
    ///     while let Some(record) = reader.next_record() {
    ///         assert_eq!(record?, format!("event {count}").as_bytes());
    ///         count += 1;
    ///     }
    /// }
    /// assert_eq!(count, 1000);
    /// # Ok::<(), cobsfile::Error>(())
    /// ```
    pub fn from_slice_range<'a>(&self, bytes: &'a [u8], range: Range<u64>) -> SliceReader<'a> {
        let mut reader = Reader::new(SliceSource(bytes), self, self.threads);
        let start = usize::try_from(range.start).map_or(bytes.len(), |s| s.min(bytes.len()));
        if start > 0 {
            reader.pos = frame::next_sync(bytes, start);
            reader.prefix = reader.pos;
        }
        reader.stop = range.end;
        reader
    }

    /// A reader over `inner`, which it reads in chunks of 256 KiB.
    ///
    /// When a read of `inner` fails with [`io::ErrorKind::WouldBlock`] (a non-blocking input
    /// with nothing more for now), the reader returns `None` without ending: a block cut off
    /// where the input stops is waited for, not reported as damage, and calling again later
    /// goes on where it stopped. Only a read that returns 0 bytes ends the input.
    pub fn from_read<R: Read>(&self, inner: R) -> StreamReader<R> {
        self.stream_reader_at(inner, 0)
    }

    /// A reader over `inner`, whose first byte is at absolute offset `offset` of the input.
    pub(crate) fn stream_reader_at<R: Read>(&self, inner: R, offset: u64) -> StreamReader<R> {
        Reader::new(StreamSource::new(inner, offset), self, 0)
    }
}

/// Where a block is and what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockInfo {
    /// Absolute offset of the block's opening sync byte.
    pub offset: u64,
    /// What the block holds.
    pub kind: BlockKind,
    /// Bytes after the opening sync byte up to and including the closing one.
    pub size: u64,
    /// Records in a data block, entries in a metadata or index block.
    pub items: Option<u64>,
    /// How the payload is stored: `"none"`, `"zstd"` or `"zstd+dict"` (see [`codec_name`]).
    pub codec: &'static str,
    /// The payload's size uncompressed.
    pub payload_size: u64,
}

/// A decoded block, borrowed from the reader until its next call.
#[derive(Debug, Clone)]
pub struct Block<'a> {
    info: BlockInfo,
    version: Option<i64>,
    payload: &'a [u8],
}

impl<'a> Block<'a> {
    /// Where the block is and what it holds.
    pub fn info(&self) -> &BlockInfo {
        &self.info
    }

    /// The block's payload as stored (after the codec, before the CRC).
    pub fn payload(&self) -> &'a [u8] {
        self.payload
    }

    /// The records of a data block (none for other kinds).
    pub fn records(&self) -> Records<'a> {
        match self.info.kind {
            BlockKind::Data => Records::new(self.payload),
            _ => Records::new(&[]),
        }
    }

    /// The entries of a metadata block (none for other kinds). Keys are checked UTF-8.
    pub fn entries(&self) -> impl Iterator<Item = (&'a str, &'a [u8])> {
        let payload = match self.info.kind {
            BlockKind::Metadata => self.payload,
            _ => &[],
        };
        Entries::new(payload).map(|(k, v)| (std::str::from_utf8(k).unwrap_or_default(), v))
    }

    /// The format version a header block declares.
    pub fn version(&self) -> Option<i64> {
        self.version
    }
}

/// The entries of one metadata block, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    /// Absolute offset of the block's opening sync byte.
    pub offset: u64,
    /// Keys and values in the order they were written.
    pub entries: Vec<(String, Vec<u8>)>,
}

impl Metadata {
    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&[u8]> {
        self.entries
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_slice())
    }
}

/// Counts of what a reader has seen so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Intact blocks decoded.
    pub blocks: u64,
    /// Blocks of unknown type skipped by `next_record`.
    pub unknown_blocks: u64,
    /// Damaged regions reported.
    pub damaged_regions: u64,
    /// Bytes in damaged regions.
    pub damaged_bytes: u64,
}

/// Which frames a scan decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Check and decode every block.
    All,
    /// Skip data and unknown blocks by their length, decode header and metadata blocks.
    Metadata,
    /// Check every frame in full, decode dictionary blocks only (a range reader's search of
    /// the bytes before its range).
    Dictionaries,
}

/// A reader of blocks, records and metadata over any [`Source`].
///
/// ```
/// let mut file = Vec::new();
/// let mut writer = cobsfile::Writer::new(&mut file)?;
/// writer.write_record(b"hello")?;
/// writer.finish()?;
///
/// let mut reader = cobsfile::ReaderBuilder::new().from_slice(&file);
/// while let Some(record) = reader.next_record() {
///     assert_eq!(record?, b"hello");
/// }
/// # Ok::<(), cobsfile::Error>(())
/// ```
#[derive(Debug)]
pub struct Reader<S> {
    src: S,
    /// Where the next scan starts, as an index into the source's window.
    pos: usize,
    limits: Limits,
    /// Largest acceptable length field.
    max_length: u64,
    /// The last decoded block body.
    scratch: Scratch,
    /// The zstd context and the dictionaries known so far.
    decompressor: Decompressor,
    /// What is left of the current data block's records, in `scratch`.
    cursor: Range<usize>,
    /// Records `next_record` is still to pass over (see `skip_records`).
    skip: u64,
    /// Start and cause of damage seen but not yet reported.
    damage: Option<(u64, Cause)>,
    /// Absolute offsets `(sync, end)`: the bytes after the sync byte up to `end` hold no 0x00,
    /// as a full check of the frame at `sync` found before it needed more input.
    zero_free: Option<(u64, u64)>,
    /// Set after an error that makes the rest of the input unreadable.
    stopped: bool,
    /// The absolute offset of the closing sync byte of the last block returned, or where
    /// reading started: everything before it is final, and reading again from there goes on
    /// as the reader does now (see `StreamReader::rewind`).
    resume: u64,
    /// The absolute offset at or after which no block opens for this reader (a range read).
    stop: u64,
    /// A range reader's start: the bytes before it may embed dictionaries its blocks need,
    /// not yet searched (0: nothing to search).
    prefix: usize,
    stats: Stats,
    /// Worker threads for full reads, with `threads > 1` (started on first use).
    decoders: Option<Box<Decoders>>,
    /// The number of worker threads asked for (0 or 1: none).
    threads: usize,
    /// Keep the dictionaries met in `dictionaries` even on one thread (a prefix search).
    collect_dictionaries: bool,
    /// With `threads > 1`: the dictionaries the decompressor holds, marked given or not, in
    /// the order they were added, to start workers that know the same.
    dictionaries: Vec<(Dictionary, bool)>,
}

/// What the scanner found next.
enum Event {
    /// Damage from the absolute offset `start`.
    Damage { start: u64, cause: Cause },
    /// A frame, positions in the current window.
    Frame(Frame),
    /// The input ends at the absolute offset `end`.
    End { end: u64 },
    /// The source failed.
    Failed(Error),
}

/// What becomes of a frame once it is decoded (or known to need no decoding).
enum Settled {
    /// It failed to decode: damage, merged with the damage around it.
    Merged,
    /// Damage before it is to be reported first; the frame (given back) comes next.
    Damage(Error, Option<(BlockInfo, Body)>),
    /// What to yield for it.
    Done(Result<Option<(BlockInfo, Body)>>),
}

impl<S: Source> Reader<S> {
    fn new(src: S, options: &ReaderBuilder, threads: usize) -> Self {
        let limits = options.limits;
        let mut decompressor = Decompressor::new(&limits);
        let mut dictionaries = Vec::new();
        for dictionary in &options.dictionaries {
            // A dictionary zstd cannot load stays unavailable: its blocks are reported.
            let _ = decompressor.give(dictionary);
            if threads > 1 {
                dictionaries.push((dictionary.clone(), true));
            }
        }
        let resume = src.base();
        Reader {
            src,
            pos: 0,
            limits,
            max_length: limits.max_length(),
            scratch: Scratch::default(),
            decompressor,
            cursor: 0..0,
            skip: 0,
            damage: None,
            zero_free: None,
            stopped: false,
            resume,
            stop: u64::MAX,
            prefix: 0,
            stats: Stats::default(),
            decoders: None,
            threads,
            collect_dictionaries: false,
            dictionaries,
        }
    }

    /// Counts of blocks and damage seen so far.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The source this reader scans.
    pub fn source(&self) -> &S {
        &self.src
    }

    /// The absolute offset of a window index.
    fn offset(&self, index: usize) -> u64 {
        self.src.base() + index as u64
    }

    /// Reports pending damage ending at `end`.
    fn take_damage(&mut self, end: u64) -> Option<Error> {
        let (start, cause) = self.damage.take()?;
        self.stats.damaged_regions += 1;
        self.stats.damaged_bytes += end - start;
        Some(Error::Damaged { start, end, cause })
    }

    /// Notes damage from the absolute offset `start`, merging it with damage not yet
    /// reported.
    fn note_damage(&mut self, start: u64, cause: Cause) {
        if self.damage.is_none() {
            self.damage = Some((start, cause));
        }
    }

    /// The next frame: checked in full, or (in metadata mode) skipped by its length unless it
    /// is to be decoded. Damage before it stays pending: the caller reports it.
    fn next_frame(&mut self, mode: Mode) -> Option<Result<Frame>> {
        if self.stopped {
            return None;
        }
        let check = match mode {
            Mode::All | Mode::Dictionaries => Check::Full,
            Mode::Metadata => Check::Landing,
        };
        loop {
            match self.scan(check) {
                Event::Damage { start, cause } => self.note_damage(start, cause),
                Event::Frame(f) => return Some(Ok(f)),
                Event::End { end } => return self.take_damage(end).map(Err),
                // Nothing more for now: damage running up to here stays pending, since the
                // next bytes may continue it.
                Event::Failed(Error::Io(e)) if e.kind() == io::ErrorKind::WouldBlock => {
                    return None
                }
                Event::Failed(e) => {
                    self.stopped = true;
                    return Some(Err(e));
                }
            }
        }
    }

    /// Scans on from `pos` to the next frame, damage or the end of the input, reading more
    /// input as needed, and moves `pos` past what it found. A frame is checked as `check`
    /// says; in a landing check, header and metadata frames (which are decoded) in full.
    fn scan(&mut self, check: Check) -> Event {
        loop {
            // A range read stops at the first sync byte at or after its end that can open a
            // block: not one followed by another 0x00 (padding or zero-filled bytes) or by
            // the end of the input. Damage running into such bytes then ends where it does
            // in a read of the whole input.
            let opens = self.src.window().get(self.pos + 1).is_some_and(|&b| b != 0);
            if self.offset(self.pos) >= self.stop && opens {
                return Event::End {
                    end: self.offset(self.pos),
                };
            }
            let window = self.src.window();
            let searched = match self.zero_free {
                Some((sync, end)) if sync == self.offset(self.pos) => {
                    (end - self.src.base()) as usize
                }
                _ => 0,
            };
            let scan = frame::scan(
                window,
                self.pos,
                self.src.base(),
                self.src.at_eof(),
                self.max_length,
                check,
                searched,
            );
            match scan {
                Scan::NeedMore => {
                    if check == Check::Full {
                        let end = self.offset(window.len());
                        self.zero_free = Some((self.offset(self.pos), end));
                    }
                    let max_window = self.max_length as usize + 2 * varint::MAX_LEN + 1;
                    let refilled = self.src.refill(self.pos, max_window);
                    // The window now starts at `pos`, whether or not the read succeeded.
                    self.pos = 0;
                    if let Err(e) = refilled {
                        return Event::Failed(e.into());
                    }
                }
                Scan::Damage {
                    from,
                    resume,
                    cause,
                } => {
                    let start = self.offset(from);
                    self.pos = resume;
                    return Event::Damage { start, cause };
                }
                Scan::Padding { resume } => self.pos = resume,
                Scan::End => {
                    return Event::End {
                        end: self.offset(window.len()),
                    }
                }
                Scan::Frame(f) => {
                    if check == Check::Landing && decoded_by_scans(BlockKind::from_type(f.kind)) {
                        if let Err(zero) = frame::verify(window, &f) {
                            let cause = Cause::SyncMismatch {
                                expected: self.offset(f.end),
                                found: self.offset(zero),
                            };
                            let start = self.offset(f.start + 1);
                            self.pos = zero;
                            return Event::Damage { start, cause };
                        }
                    }
                    self.pos = f.end;
                    return Event::Frame(f);
                }
            }
        }
    }

    /// The next block: decoded, or only framed if `mode` skips its type (`None`). A block that
    /// fails to decode is damage like a frame that fails its checks and merges with the damage
    /// around it. Damage is reported once the next intact block is found (which is then found
    /// and decoded again on the next call) or the input ends.
    fn next_decoded(&mut self, mode: Mode) -> Option<Result<Option<(BlockInfo, Body)>>> {
        if self.threads > 1 && !self.stopped {
            match mode {
                Mode::All => return self.next_decoded_parallel(),
                Mode::Metadata | Mode::Dictionaries => self.catch_up(),
            }
        }
        loop {
            let f = match self.next_frame(mode)? {
                Ok(f) => f,
                Err(e) => return Some(Err(e)),
            };
            let kind = BlockKind::from_type(f.kind);
            let wanted = match mode {
                Mode::All => true,
                Mode::Metadata => decoded_by_scans(kind),
                Mode::Dictionaries => kind == BlockKind::Dictionary,
            };
            let decoded = if wanted {
                self.decode(&f).map(Some)
            } else {
                Ok(None)
            };
            match self.settle(self.offset(f.start), decoded) {
                Settled::Merged => continue,
                Settled::Damage(err, _) => {
                    self.pos = f.start;
                    return Some(Err(err));
                }
                Settled::Done(done) => return Some(done),
            }
        }
    }

    /// The part of [`next_decoded`](Self::next_decoded) shared by both ways of reading: what
    /// to do with the frame at the absolute offset `offset`, decoded into `scratch` (or not,
    /// `None`), given the damage noted before it.
    fn settle(
        &mut self,
        offset: u64,
        decoded: Result<Option<(BlockInfo, Body)>, Cause>,
    ) -> Settled {
        let decoded = match decoded {
            Ok(decoded) => decoded,
            Err(cause) => {
                self.note_damage(offset + 1, cause);
                return Settled::Merged;
            }
        };
        // A dictionary block is kept before anything is reported for it: one the reader
        // cannot keep is reported in its place, merged with the damage around it.
        if let Some((info, body)) = &decoded {
            if info.kind == BlockKind::Dictionary {
                let bytes = &self.scratch.buffer()[body.payload.clone()];
                if let Err(cause) = self.keep_dictionary(offset, bytes.to_vec()) {
                    self.note_damage(offset + 1, cause);
                    return Settled::Merged;
                }
            }
        }
        if let Some(err) = self.take_damage(offset) {
            return Settled::Damage(err, decoded);
        }
        if let Some((info, body)) = &decoded {
            if let Some(version) = body.version.filter(|&v| v > FORMAT_VERSION) {
                self.stopped = true;
                return Settled::Done(Err(Error::UnsupportedVersion {
                    offset: info.offset,
                    version,
                    supported: FORMAT_VERSION,
                }));
            }
            self.stats.blocks += 1;
            self.resume = info.offset + info.size;
        }
        Settled::Done(Ok(decoded))
    }

    /// Makes the dictionary a block at `offset` embeds available for the blocks after it,
    /// within the reader's limits (once: a dictionary already known costs nothing).
    fn keep_dictionary(&mut self, offset: u64, bytes: Vec<u8>) -> Result<(), Cause> {
        let id = crate::codec::dictionary_id(&bytes);
        if self.decompressor.has(id) {
            return Ok(());
        }
        let dictionary = Dictionary::new(bytes);
        self.decompressor
            .add(&dictionary)
            .map_err(|refused| refused_cause(offset, refused))?;
        if self.threads > 1 || self.collect_dictionaries {
            self.dictionaries.push((dictionary, false));
        }
        Ok(())
    }

    /// [`next_decoded`](Self::next_decoded) of a full read, with blocks decoded by worker
    /// threads: the scan runs ahead of the caller by a bounded number of frames, and what it
    /// found is settled in order exactly as on one thread. Falls back to one thread if the
    /// workers cannot be started.
    fn next_decoded_parallel(&mut self) -> Option<Result<Option<(BlockInfo, Body)>>> {
        if self.prefix > 0 && self.decoders.is_none() {
            self.search_prefix();
        }
        let mut decoders = match self.decoders.take() {
            Some(decoders) => decoders,
            None => match Decoders::new(self.threads, &self.limits, &self.dictionaries, self.pos) {
                Ok(decoders) => Box::new(decoders),
                Err(_) => {
                    self.threads = 0;
                    self.dictionaries = Vec::new();
                    return self.next_decoded(Mode::All);
                }
            },
        };
        let next = self.next_from(&mut decoders);
        // After an unsupported version nothing more is read: let the threads go.
        if !self.stopped {
            self.decoders = Some(decoders);
        }
        next
    }

    /// [`next_decoded_parallel`](Self::next_decoded_parallel) with the workers at hand: scans
    /// ahead until enough frames are in flight, then settles what comes back in order.
    fn next_from(&mut self, decoders: &mut Decoders) -> Option<Result<Option<(BlockInfo, Body)>>> {
        decoders.resume_at(self.pos);
        loop {
            while !decoders.full() {
                match self.scan(Check::Full) {
                    Event::Damage { start, cause } => decoders.push_damage(start, cause, self.pos),
                    Event::Frame(f) => decoders.push_frame(self.src.window(), self.src.base(), &f),
                    Event::End { end } => decoders.push_end(end, self.pos),
                    Event::Failed(e) => decoders.push_failed(e),
                }
            }
            match decoders.pop()? {
                Popped::Damage { start, cause } => self.note_damage(start, cause),
                Popped::End { end } => return self.take_damage(end).map(Err),
                Popped::Failed(e) => {
                    self.stopped = true;
                    return Some(Err(e));
                }
                Popped::Block(mut job) => {
                    let decoded = job.result.take().expect("a popped block is decoded");
                    std::mem::swap(&mut self.scratch, &mut job.scratch);
                    match self.settle(job.offset(), decoded.map(Some)) {
                        Settled::Merged => decoders.recycle(job),
                        Settled::Damage(err, decoded) => {
                            std::mem::swap(&mut self.scratch, &mut job.scratch);
                            job.result = decoded.map(Ok);
                            decoders.unpop(job);
                            return Some(Err(err));
                        }
                        Settled::Done(done) => {
                            decoders.recycle(job);
                            return Some(done);
                        }
                    }
                }
            }
        }
    }

    /// Before scanning on this thread: drops what the workers scanned ahead of the caller and
    /// goes back to where the caller is. The workers, which may know dictionaries from blocks
    /// the caller has not reached, are stopped too (and started afresh on the next full read).
    fn catch_up(&mut self) {
        if let Some(decoders) = self.decoders.take() {
            if decoders.is_idle() {
                self.decoders = Some(decoders);
            } else {
                self.pos = decoders.consumed();
                self.zero_free = None;
            }
        }
    }

    /// Frames scanned ahead of the caller (tests of the bound).
    #[cfg(test)]
    pub(crate) fn frames_in_flight(&self) -> usize {
        self.decoders.as_ref().map_or(0, |d| d.frames_in_flight())
    }

    /// Decodes a frame into `scratch`. In a range read, a block that needs a dictionary the
    /// reader lacks first has the bytes before the range searched for it.
    fn decode(&mut self, f: &Frame) -> Result<(BlockInfo, Body), Cause> {
        match self.decode_once(f) {
            Err(Cause::Dictionary { .. }) if self.prefix > 0 => {
                self.search_prefix();
                self.decode_once(f)
            }
            decoded => decoded,
        }
    }

    /// Adds the dictionaries embedded in the bytes before a range read's range to those the
    /// reader knows (once). The search checks every frame in full, as a full read does: a
    /// skipping scan (spec 9.3) could jump over a dictionary block along a damaged length
    /// that lands on a later sync byte, and the range would then lose blocks a full read
    /// returns. It decodes dictionary blocks only, and reads the prefix at memchr speed.
    fn search_prefix(&mut self) {
        let prefix = std::mem::take(&mut self.prefix);
        let mut scan = Reader::new(
            // Up to and including the range's first sync byte, which closes the block
            // before it (a dictionary block, maybe).
            SliceSource(&self.src.window()[..(prefix + 1).min(self.src.window().len())]),
            &ReaderBuilder::new().limits(self.limits),
            0,
        );
        scan.collect_dictionaries = true;
        while scan.next_decoded(Mode::Dictionaries).is_some() {}
        for (dictionary, _) in scan.dictionaries {
            if !self.decompressor.has(dictionary.id())
                && self.decompressor.add(&dictionary).is_ok()
                && self.threads > 1
            {
                self.dictionaries.push((dictionary, false));
            }
        }
    }

    /// [`decode`](Self::decode) without the search.
    fn decode_once(&mut self, f: &Frame) -> Result<(BlockInfo, Body), Cause> {
        let window = self.src.window();
        let base = self.src.base();
        let place = Place {
            offset: base + f.start as u64,
            body_offset: base + f.body.start as u64,
        };
        decode_block(
            &window[f.type_field.clone()],
            BlockKind::from_type(f.kind),
            &window[f.body.clone()],
            place,
            (f.end - f.start) as u64,
            self.limits.block_size(),
            &mut self.scratch,
            &mut self.decompressor,
        )
    }

    /// The next intact block, or the error that stands for a damaged region before it.
    /// Records of the current block that [`next_record`](Self::next_record) has not yet
    /// returned are passed over.
    pub fn next_block(&mut self) -> Option<Result<Block<'_>>> {
        self.cursor = 0..0;
        let (info, body) = match self.next_decoded(Mode::All)? {
            Ok(decoded) => decoded.expect("a full read decodes every block"),
            Err(e) => return Some(Err(e)),
        };
        Some(Ok(Block {
            info,
            version: body.version,
            payload: &self.scratch.buffer()[body.payload],
        }))
    }

    /// The next record of an intact data block, borrowed from the decoded block; or the error
    /// that stands for a damaged region. Blocks of unknown type are skipped and counted in
    /// [`stats`](Self::stats).
    pub fn next_record(&mut self) -> Option<Result<&[u8]>> {
        loop {
            if let Some(record) = self.next_in_cursor() {
                return Some(Ok(&self.scratch.buffer()[record]));
            }
            if let Err(e) = self.open_block()? {
                return Some(Err(e));
            }
        }
    }

    /// Takes the next record's range from the cursor.
    pub(crate) fn next_in_cursor(&mut self) -> Option<Range<usize>> {
        let item = block::next_string(self.scratch.buffer().get(self.cursor.clone())?)?;
        let range = self.cursor.start + item.start..self.cursor.start + item.end;
        self.cursor.start = range.end;
        Some(range)
    }

    /// The bytes of a record whose range [`next_in_cursor`](Self::next_in_cursor) gave.
    pub(crate) fn record(&self, range: Range<usize>) -> &[u8] {
        &self.scratch.buffer()[range]
    }

    /// Iterates over blocks (intact ones as [`BlockInfo`], damaged regions as errors).
    pub fn blocks(&mut self) -> Blocks<'_, S> {
        Blocks(self)
    }

    /// Iterates over metadata blocks, skipping data blocks by their length fields without
    /// reading them.
    pub fn metadata(&mut self) -> MetadataBlocks<'_, S> {
        MetadataBlocks(self)
    }

    /// Reads everything left, returning the records of intact blocks and the errors met,
    /// each in order. Convenient for small inputs and tests.
    pub fn read_all(&mut self) -> (Vec<Vec<u8>>, Vec<Error>) {
        let mut records = Vec::new();
        let mut errors = Vec::new();
        while let Some(item) = self.next_record() {
            match item {
                Ok(record) => records.push(record.to_vec()),
                Err(e) => errors.push(e),
            }
        }
        (records, errors)
    }
}

// Seeking: passing over records, and opening one block at a time (for `crate::index`).
impl<S: Source> Reader<S> {
    /// Passes over the next `n` records: [`next_record`](Self::next_record) returns the one
    /// after them. Records are counted as returned: errors for damaged regions are still
    /// returned, and lost records are not counted. Data blocks passed over whole are checked
    /// but their records are not walked. Blocks that [`next_block`](Self::next_block) returns
    /// do not count.
    ///
    /// ```
    /// let mut writer = cobsfile::Writer::new(Vec::new())?;
    /// for i in 0..10 {
    ///     writer.write_record(format!("record {i}").as_bytes())?;
    /// }
    /// let file = writer.finish()?;
    ///
    /// let mut reader = cobsfile::ReaderBuilder::new().from_slice(&file);
    /// reader.skip_records(7);
    /// assert_eq!(reader.next_record().unwrap()?, b"record 7");
    /// # Ok::<(), cobsfile::Error>(())
    /// ```
    pub fn skip_records(&mut self, n: u64) {
        self.skip = self.skip.saturating_add(n);
        self.skip_in_cursor();
    }

    /// Passes over records of the current block while some are to be skipped.
    fn skip_in_cursor(&mut self) {
        while self.skip > 0 && self.next_in_cursor().is_some() {
            self.skip -= 1;
        }
    }

    /// Decodes the next block and makes it the current one: a data block's records (less
    /// those to be skipped) are what [`next_record`](Self::next_record) returns next. Returns
    /// the block's info, or the error that stands for a damaged region before it.
    pub(crate) fn open_block(&mut self) -> Option<Result<BlockInfo>> {
        self.cursor = 0..0;
        let (info, body) = match self.next_decoded(Mode::All)? {
            Ok(decoded) => decoded.expect("a full read decodes every block"),
            Err(e) => return Some(Err(e)),
        };
        match info.kind {
            BlockKind::Data => {
                let items = info.items.unwrap_or(0);
                if self.skip >= items {
                    self.skip -= items;
                } else {
                    self.cursor = strings_start(self.scratch.buffer(), body.payload);
                    self.skip_in_cursor();
                }
            }
            BlockKind::Unknown(_) => self.stats.unknown_blocks += 1,
            BlockKind::Header | BlockKind::Metadata | BlockKind::Dictionary | BlockKind::Index => {}
        }
        Some(Ok(info))
    }
}

// Following a growing file (for `crate::follow`).
impl<R: Read> StreamReader<R> {
    /// The reader of the input, to change what it reads next.
    pub(crate) fn get_mut(&mut self) -> &mut R {
        self.src.get_mut()
    }

    /// The resume point (spec 9.7), which [`rewind`](Self::rewind) reads again from: the
    /// absolute offset of the closing sync byte of the last block returned, or where reading
    /// started (or, after [`settle_read`](Self::settle_read), where it stopped). Every byte
    /// before it is final: the blocks and damage in them are returned and reported.
    pub(crate) fn resume_offset(&self) -> u64 {
        self.resume
    }

    /// Drops every byte read past [`resume_offset`](Self::resume_offset) and what the reader
    /// made of them, and returns that offset: the next bytes read must be the input's bytes
    /// from there (a followed file that was cut back).
    ///
    /// What is dropped is what the reader could not settle yet: the part of a block it waits
    /// for, padding, and damage it has not reported because the next bytes might continue
    /// it. Those bytes are not to be trusted once the input was cut: a writer alone on a
    /// followed file cuts a torn tail and appends in one go (spec 11.1), so the bytes past the
    /// cut may already be other bytes. Kept (with the 0x00-free stretch noted over them),
    /// they would stand in for the blocks appended over them, and the reader would wait for
    /// the rest of a block that is gone. Reading again from the last closing sync byte costs
    /// the bytes read since, and reads what a reader of the whole new input reads there.
    pub(crate) fn rewind(&mut self) -> u64 {
        self.src.restart_at(self.resume);
        self.pos = 0;
        self.cursor = 0..0;
        self.damage = None;
        self.zero_free = None;
        self.resume
    }

    /// Makes everything the reader passed over final, after it has read to the input's end
    /// and reported what was there: [`rewind`](Self::rewind) then reads on from where it
    /// stopped, and a block left incomplete there stays damage.
    pub(crate) fn settle_read(&mut self) {
        debug_assert!(self.damage.is_none(), "damage is reported at the end");
        self.resume = self.offset(self.pos);
    }
}

/// Decodes a block of type `kind` whose type field and COBS body are given, found at `place`
/// and `size` bytes long after its opening sync byte, into `scratch`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn decode_block(
    type_field: &[u8],
    kind: BlockKind,
    encoded: &[u8],
    place: Place,
    size: u64,
    max_block_size: usize,
    scratch: &mut Scratch,
    decompressor: &mut Decompressor,
) -> Result<(BlockInfo, Body), Cause> {
    let body = block::decode(
        type_field,
        kind,
        encoded,
        place,
        max_block_size,
        scratch,
        decompressor,
    )?;
    let info = BlockInfo {
        offset: place.offset,
        kind,
        size,
        items: body.items,
        codec: codec_name(body.codec),
        payload_size: body.payload.len() as u64,
    };
    Ok((info, body))
}

/// Whether a skipping scan decodes blocks of this kind: the header, metadata and the
/// dictionaries that later metadata (and, in a range read, data) may need.
fn decoded_by_scans(kind: BlockKind) -> bool {
    matches!(
        kind,
        BlockKind::Header | BlockKind::Metadata | BlockKind::Dictionary
    )
}

/// The cause a dictionary block at `offset` is reported with when the reader cannot keep its
/// dictionary.
pub(crate) fn refused_cause(offset: u64, refused: Refused) -> Cause {
    match refused {
        Refused::Invalid => Cause::Malformed {
            offset,
            what: "a dictionary in zstd's format that zstd cannot load",
        },
        Refused::Limit { what, limit } => Cause::Limit {
            offset,
            what,
            limit,
        },
    }
}

/// The name of a codec id: `"none"`, `"zstd"`, `"zstd+dict"` or `"unknown"`.
pub fn codec_name(codec: i64) -> &'static str {
    match codec {
        crate::codec::NONE => "none",
        crate::codec::ZSTD => "zstd",
        crate::codec::ZSTD_DICTIONARY => "zstd+dict",
        _ => "unknown",
    }
}

/// The range of a data payload's records, after its count.
fn strings_start(scratch: &[u8], payload: Range<usize>) -> Range<usize> {
    let skip = varint::read(&scratch[payload.clone()]).map_or(0, |(_, used)| used);
    payload.start + skip..payload.end
}

/// Iterator over blocks; see [`Reader::blocks`].
#[derive(Debug)]
pub struct Blocks<'r, S>(&'r mut Reader<S>);

impl<S> Blocks<'_, S> {
    /// The reader being iterated, e.g. for its [`stats`](Reader::stats).
    pub fn reader(&self) -> &Reader<S> {
        self.0
    }
}

impl<S: Source> Iterator for Blocks<'_, S> {
    type Item = Result<BlockInfo>;

    fn next(&mut self) -> Option<Self::Item> {
        Some(self.0.next_block()?.map(|block| block.info))
    }
}

/// Iterator over metadata blocks; see [`Reader::metadata`].
#[derive(Debug)]
pub struct MetadataBlocks<'r, S>(&'r mut Reader<S>);

impl<S> MetadataBlocks<'_, S> {
    /// The reader being iterated, e.g. for its [`stats`](Reader::stats).
    pub fn reader(&self) -> &Reader<S> {
        self.0
    }
}

impl<S: Source> Iterator for MetadataBlocks<'_, S> {
    type Item = Result<Metadata>;

    fn next(&mut self) -> Option<Self::Item> {
        let reader = &mut *self.0;
        loop {
            let (info, body) = match reader.next_decoded(Mode::Metadata)? {
                Ok(Some(decoded)) => decoded,
                Ok(None) => continue,
                Err(e) => return Some(Err(e)),
            };
            if info.kind == BlockKind::Metadata {
                let entries = Entries::new(&reader.scratch.buffer()[body.payload])
                    .map(|(k, v)| (String::from_utf8_lossy(k).into_owned(), v.to_vec()))
                    .collect();
                return Some(Ok(Metadata {
                    offset: info.offset,
                    entries,
                }));
            }
        }
    }
}
