//! Reading blocks, records and metadata, resynchronizing after damage.
//!
//! One [`Reader`] serves every input: a driver of the sans-I/O [`Decoder`] over a [`Source`]
//! window (a slice, a mapped file, a stream), which hands it bytes as it asks for them. The
//! decoder merges consecutive damage into one [`Error::Damaged`] naming the skipped byte
//! range; after that error reading goes on at the next sync byte, so a caller that wants to
//! stop at the first damage just stops iterating. With [`ReaderBuilder::threads`], blocks are
//! decoded on worker threads and settled in order by the same decoder.

use std::io::{self, Read};
use std::ops::Range;
use std::sync::Arc;

use crate::block::{self, BlockType, Entries, Spares};
use crate::codec::Dictionary;
use crate::decoder::{Block, BlockInfo, Decoder, Input, Stats, Step, Want};
use crate::ending::Ending;
use crate::error::{Error, Result};
use crate::frame;
use crate::index::{Index, IndexEntry};
use crate::limits::Limits;
use crate::parallel::Kept;
use crate::range::Pull;
use crate::range::{self, RangeSink, RangeWork};
use crate::report::{OnDamage, Report};
use crate::source::{Shared, SharedSlice, SliceSource, Source, StreamSource};
use crate::time::Window;
use crate::varint;

/// A reader over a byte slice or a mapped file.
pub type SliceReader<'a> = Reader<SliceSource<'a>>;

/// A reader over any `io::Read` (stdin, pipes, sockets), holding at most one block in memory.
pub type StreamReader<R> = Reader<StreamSource<R>>;

/// Options for readers.
///
/// ```
/// let reader = cobsfile::ReaderBuilder::new()
///     .max_body_size(1 << 20)
///     .from_slice(&[]);
/// # drop(reader);
/// ```
#[derive(Debug, Clone)]
#[must_use = "options do nothing until used: each method returns the changed options"]
pub struct ReaderBuilder {
    pub(crate) limits: Limits,
    pub(crate) dictionaries: Vec<Dictionary>,
    pub(crate) threads: usize,
    pub(crate) min_split: u64,
    /// Decoding buffers its readers leave to one another (shared by clones).
    pub(crate) spares: Arc<Spares>,
    /// Worker threads its readers leave to one another (shared by clones).
    pub(crate) kept: Kept,
    /// What range reads do with damage.
    pub(crate) on_damage: OnDamage,
    /// The times whose records are read, if not all records.
    pub(crate) window: Option<Window>,
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
            spares: Arc::default(),
            kept: Kept::default(),
            on_damage: OnDamage::Skip,
            window: None,
        }
    }

    /// The largest decoded block body the reader accepts (default 64 MiB). Larger blocks are
    /// reported as damage without being read into memory, so a hostile length field cannot
    /// make the reader allocate more than about this much.
    pub fn max_body_size(mut self, bytes: usize) -> Self {
        self.limits = self.limits.max_body_size(bytes);
        self
    }

    /// Every bound the reader enforces (see [`Limits`]); replaces an earlier
    /// [`max_body_size`](Self::max_body_size).
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

    /// Reads on `threads` threads (default 0; 0 and 1 read on the calling thread): range reads
    /// of the input, cut and scheduled as [`read_ranges`](Self::read_ranges) cuts them, on
    /// `threads - 1` worker threads and the calling thread, which reads ranges too while the
    /// part it needs next is not ready. So `threads` is the number of cores the reader keeps
    /// busy. Each range's blocks are decoded where the range is read; the reader then settles
    /// them in file order, so that records, blocks, errors (merged the same way) and
    /// [`stats`](Reader::stats) are exactly those of a reader on one thread, in the same
    /// order. [`Reader::metadata`] skips data blocks on the calling thread as always.
    ///
    /// Threads read the input in place: they take part in readers over a
    /// [`MappedFile`](crate::MappedFile) and over [`from_shared`](Self::from_shared) bytes.
    /// A reader over a borrowed slice ([`from_slice`](Self::from_slice)), which threads cannot
    /// share, or over a stream ([`from_read`](Self::from_read)) reads on the calling thread,
    /// as does a reader of less than two ranges of [`min_split`](Self::min_split) bytes.
    ///
    /// The threads read ahead of what the reader returns: at most about `3 * threads + 2`
    /// parts of 1 MiB of payload. A mapped file cut under the reader gives the blocks they
    /// read before the cut (intact when read), then damage from where they first found the
    /// bytes gone to the end of the mapping; a reader on one thread reads nothing ahead.
    ///
    /// ```
    /// let mut writer = cobsfile::WriterBuilder::new().block_target(1000).build(Vec::new())?;
    /// for i in 0..1000 {
    ///     writer.write_record(format!("event {i}").as_bytes())?;
    /// }
    /// let file = writer.finish()?;
    ///
    /// let file: std::sync::Arc<[u8]> = file.into();
    /// let mut reader = cobsfile::ReaderBuilder::new().threads(2).min_split(1000).from_shared(&file);
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

    /// The smallest range a [`read_ranges`](Self::read_ranges), or a reader, on several
    /// [`threads`](Self::threads) gives one thread (default 1 MiB; at least 1). Ranges are about an eighth of a thread's share of the
    /// input when that is larger, up to 16 MiB, and up to what holds about 2 MiB of payload at
    /// the compression ratio of the ranges read so far. Smaller ranges balance the threads
    /// better and cost a reader's setup each.
    pub fn min_split(mut self, bytes: u64) -> Self {
        self.min_split = bytes.max(1);
        self
    }

    /// What [`read_ranges`](Self::read_ranges) and its kin (and
    /// [`Remote`](crate::Remote)'s reads) do with each damaged or unreadable range, once it
    /// is known whole and has gone to the sink: skip it (the default), end the read with it,
    /// or ask a function ([`OnDamage`]). Readers that yield damage as items
    /// ([`Reader::next_block`](crate::Reader::next_block)) leave it to their caller.
    pub fn on_damage(mut self, on_damage: OnDamage) -> Self {
        self.on_damage = on_damage;
        self
    }

    /// The damage policy set.
    pub fn get_on_damage(&self) -> &OnDamage {
        &self.on_damage
    }

    /// Reads only the records whose event time lies in `window` (spec 9.9), on every path:
    /// [`Reader::next_record`], the iterators, [`Block::records`] and range reads. Data blocks
    /// whose time block says none of their records is in the window are passed over without
    /// decoding (their frames checked in full, so that no block a full read finds is missed),
    /// and so are
    /// data blocks whose records have no times, which are in no window: counted in
    /// [`Stats::untimed_blocks_passed`](crate::Stats::untimed_blocks_passed), so that a caller
    /// can say that records were left out. Records are returned in file order, however
    /// unsorted their times.
    ///
    /// ```
    /// let mut writer = cobsfile::WriterBuilder::new().block_target(64).build(Vec::new())?;
    /// for second in 0..100i64 {
    ///     writer.write_record_at(format!("event {second}").as_bytes(), second * 1_000_000_000)?;
    /// }
    /// let file = writer.finish()?;
    ///
    /// let window = cobsfile::Window::new(Some(42_000_000_000), Some(44_000_000_000));
    /// let mut reader = cobsfile::ReaderBuilder::new().window(window).from_slice(&file);
    /// let (records, errors) = reader.read_all();
    /// assert!(errors.is_empty());
    /// assert_eq!(records, [&b"event 42"[..], b"event 43", b"event 44"]);
    /// // By the file's time index, only the blocks that may hold them were read.
    /// assert!(reader.stats().blocks <= 8);
    /// # Ok::<(), cobsfile::Error>(())
    /// ```
    pub fn window(mut self, window: Window) -> Self {
        self.window = Some(window);
        self
    }

    /// The window this reads (see [`window`](Self::window)); `None`: every record.
    pub fn get_window(&self) -> Option<Window> {
        self.window
    }

    /// A [`Decoder`] with these limits and dictionaries, to drive by hand (sans-I/O).
    pub fn decoder(&self) -> Decoder {
        self.equip(Decoder::new(self.limits), false)
    }

    /// `decoder` given the dictionaries, and recording what it knows if `collect` (for worker
    /// threads to start from).
    fn equip(&self, decoder: Decoder, collect: bool) -> Decoder {
        let mut decoder = decoder.share_spares(&self.spares);
        decoder.set_window(self.window);
        let mut decoder = match collect {
            true => decoder.collecting(),
            false => decoder,
        };
        for dictionary in &self.dictionaries {
            decoder.give_dictionary(dictionary);
        }
        decoder
    }

    /// The worker threads its readers decode on.
    fn workers(&self) -> Workers {
        Workers {
            threads: self.threads,
            kept: (self.threads > 1).then(|| self.kept.clone()),
            min_split: self.min_split,
        }
    }

    /// A decoder of the blocks that open in a range whose first sync byte is `first_sync`.
    pub(crate) fn decoder_for_range(&self, first_sync: u64, stop: u64) -> Decoder {
        self.equip(Decoder::range(self.limits, first_sync, stop), false)
    }

    /// A reader over `bytes`.
    pub fn from_slice<'a>(&self, bytes: &'a [u8]) -> SliceReader<'a> {
        let mut decoder = self.equip(Decoder::new(self.limits), self.threads > 1);
        plan_window(&mut decoder, self, bytes);
        Reader::with_decoder(SliceSource(bytes), decoder, self.workers())
    }

    /// A reader over bytes held in an `Arc`, as [`from_slice`](Self::from_slice) reads them.
    /// With [`threads`](Self::threads), its threads read the bytes in place through their own
    /// handle on them, as they do in a [`MappedFile`](crate::MappedFile); a reader over a
    /// borrowed slice reads on one thread, since threads cannot borrow from the caller.
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// let mut writer = cobsfile::Writer::new(Vec::new())?;
    /// writer.write_record(b"shared")?;
    /// let file: Arc<[u8]> = writer.finish()?.into();
    /// let (records, errors) = cobsfile::ReaderBuilder::new().threads(2).from_shared(&file).read_all();
    /// assert_eq!((records, errors.len()), (vec![b"shared".to_vec()], 0));
    /// # Ok::<(), cobsfile::Error>(())
    /// ```
    pub fn from_shared<'a>(&self, bytes: &'a Arc<[u8]>) -> SliceReader<'a> {
        self.from_slice(bytes)
            .sharing(Arc::new(SharedSlice(Arc::clone(bytes))))
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
    /// compressed with a dictionary the file embeds before the range, or a dictionary block in
    /// the range, first has the bytes before the range searched for dictionaries (once, every
    /// frame checked as a full read checks it), so that the range keeps the dictionaries a
    /// full read keeps, in the same order and within the same limits.
    ///
    /// ```
    /// let mut writer = cobsfile::WriterBuilder::new().block_target(100).build(Vec::new())?;
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
        let first_sync = frame::range_start(bytes, range.start);
        let decoder = Decoder::range(self.limits, first_sync, range.end);
        let decoder = self.equip(decoder, self.threads > 1);
        Reader::with_decoder(SliceSource(bytes), decoder, self.workers())
    }

    /// A reader over `bytes` that starts at record `record` (0-based): its first
    /// [`next_record`](crate::Reader::next_record) returns that record.
    ///
    /// When the file ends with a usable index (see [`Index::find`]) that covers it from its
    /// first byte, the reader goes straight to the data block holding the record, found by a
    /// binary search, and reads nothing before it. It first checks that an intact data block
    /// with the listed number of records opens where the index says; if the first intact data
    /// block from there on is not one the index lists, the index is not used. Without a usable
    /// index the reader starts at the beginning and passes over `record` records
    /// ([`Reader::skip_records`](crate::Reader::skip_records)), reporting any damage it meets.
    ///
    /// **Record ordinals on a damaged file.** With an index, `record` counts records as they
    /// were written: the reader starts at the first intact record written at or after
    /// `record`, and the records of lost blocks are simply missing (damage from the block
    /// holding `record` on is reported). Without one, `record` counts records as a full read
    /// returns them, lost ones not counted. On an undamaged file the two agree.
    ///
    /// ```
    /// let mut writer = cobsfile::WriterBuilder::new().block_target(64).build(Vec::new())?;
    /// for i in 0..100 {
    ///     writer.write_record(format!("record {i}").as_bytes())?;
    /// }
    /// let file = writer.finish()?;
    ///
    /// let (records, errors) = cobsfile::ReaderBuilder::new()
    ///     .from_slice_at_record(&file, 42)
    ///     .read_all();
    /// assert!(errors.is_empty());
    /// assert_eq!(records.len(), 58);
    /// assert_eq!(records[0], b"record 42");
    /// # Ok::<(), cobsfile::Error>(())
    /// ```
    pub fn from_slice_at_record<'a>(&self, bytes: &'a [u8], record: u64) -> SliceReader<'a> {
        if record > 0 {
            if let Some(reader) = Index::find(bytes).and_then(|i| seek(&i, self, bytes, record)) {
                return reader;
            }
        }
        let mut reader = self.from_slice(bytes);
        reader.skip_records(record);
        reader
    }

    /// Reads every block of `bytes` on [`threads`](Self::threads) threads and returns the
    /// report [`verify`](crate::verify) would give, calling `on_block` for each intact block
    /// and `sink` with the results in file order.
    ///
    /// The slice is cut into ranges of at least [`min_split`](Self::min_split) bytes, about 8
    /// per thread, each read by a
    /// [range reader](Self::from_slice_range) on a worker thread, which calls `on_block` for
    /// its blocks in order on a value of its own (`T::default()` to start, or one the sink
    /// [recycles](RangeSink::recycle)). The calling thread
    /// hands the values to [`RangeSink::part`] in range order and each damaged range, whole,
    /// to [`RangeSink::damage`]; at most 2 ranges per thread wait for it. So the blocks,
    /// their order, the damage and the report are those of one reader over the whole slice,
    /// while the work scales with threads. With 0 or 1 threads it all runs on the calling
    /// thread, in one range. A sink that breaks stops the read; the report then covers what
    /// was read. Fails when the input declares a newer format version, after the blocks
    /// before that header went to the sink, as with one reader.
    ///
    /// ```
    /// use std::ops::ControlFlow;
    ///
    /// let mut writer = cobsfile::WriterBuilder::new().block_target(1000).build(Vec::new())?;
    /// for i in 0..10_000 {
    ///     writer.write_record(format!("event {i}").as_bytes())?;
    /// }
    /// let file = writer.finish()?;
    ///
    /// // Count the bytes of the records on 2 threads, range by range.
    /// struct Total(u64);
    /// impl cobsfile::RangeSink<u64> for Total {
    ///     fn part(&mut self, bytes: u64) -> ControlFlow<()> {
    ///         self.0 += bytes;
    ///         ControlFlow::Continue(())
    ///     }
    /// }
    /// let mut total = Total(0);
    /// let report = cobsfile::ReaderBuilder::new().threads(2).read_ranges(
    ///     &file,
    ///     |bytes: &mut u64, block| *bytes += block.records().map(|r| r.len() as u64).sum::<u64>(),
    ///     &mut total,
    /// )?;
    /// assert_eq!(report.records, 10_000);
    /// assert!(report.is_clean());
    /// assert_eq!(total.0, (0..10_000).map(|i| format!("event {i}").len() as u64).sum::<u64>());
    /// # Ok::<(), cobsfile::Error>(())
    /// ```
    pub fn read_ranges<T, F, K>(&self, bytes: &[u8], on_block: F, sink: &mut K) -> Result<Report>
    where
        T: Default + Send,
        F: Fn(&mut T, &Block<'_>) + Sync,
        K: RangeSink<T> + ?Sized,
    {
        self.read_ranges_within(bytes, 0..u64::MAX, &on_block, sink)
    }

    /// [`read_ranges`](Self::read_ranges) of the blocks that open in `range` of `bytes` (spec
    /// 9.4, as [`from_slice_range`](Self::from_slice_range) reads them), cut among the
    /// [`threads`](Self::threads) the same way, with `work` done on each block: what one
    /// partition of a query reads. The ranges `0..a`, `a..b`, ... `z..u64::MAX` of one input
    /// together read each intact block once. The report covers the blocks of `range` and the
    /// damage they meet.
    pub fn read_ranges_within<T, W, K>(
        &self,
        bytes: &[u8],
        range: Range<u64>,
        work: &W,
        sink: &mut K,
    ) -> Result<Report>
    where
        T: Default + Send,
        W: RangeWork<T> + ?Sized,
        K: RangeSink<T> + ?Sized,
    {
        self.read_within(range::Bytes::Slice(bytes), range, work, sink)
    }

    /// [`read_ranges_within`](Self::read_ranges_within) of a slice or a fetched file: its
    /// report, or the error that stopped it.
    pub(crate) fn read_within<T, W, K>(
        &self,
        bytes: range::Bytes<'_>,
        range: Range<u64>,
        work: &W,
        sink: &mut K,
    ) -> Result<Report>
    where
        T: Default + Send,
        W: RangeWork<T> + ?Sized,
        K: RangeSink<T> + ?Sized,
    {
        self.read_within_planned(bytes, range, self.time_plan(bytes).as_ref(), work, sink)
    }

    /// [`read_within`](Self::read_within) by `plan`, this read's [`time_plan`](Self::time_plan).
    pub(crate) fn read_within_planned<T, W, K>(
        &self,
        bytes: range::Bytes<'_>,
        range: Range<u64>,
        plan: Option<&TimePlan>,
        work: &W,
        sink: &mut K,
    ) -> Result<Report>
    where
        T: Default + Send,
        W: RangeWork<T> + ?Sized,
        K: RangeSink<T> + ?Sized,
    {
        match self.read_span(bytes, range, plan, work, sink)? {
            (report, None) => Ok(report),
            (_, Some(stopped)) => Err(stopped),
        }
    }

    /// How a read of this window reads `bytes` by their time index (spec 9.9), if the read has
    /// a window and the bytes a usable time index: for a file fetched by ranges, its time
    /// index fetched from where its index lists it.
    pub(crate) fn time_plan(&self, bytes: range::Bytes<'_>) -> Option<TimePlan> {
        let window = self.window?;
        let (index, spans) = match bytes {
            range::Bytes::Slice(slice) => {
                let index = Index::find(slice).filter(|index| index.start() == 0)?;
                let spans = index.time_spans(slice)?;
                (index, spans)
            }
            range::Bytes::Fetched(file) => {
                let index = file.index().filter(|index| index.start() == 0)?;
                // The size is the index's word: no more is fetched than a block may take.
                let range = index.time_index_range()?;
                if range.end - range.start > self.limits.max_length() + 1 {
                    return None;
                }
                let block = range::fetch_one(file, range).ok()?;
                (index.clone(), index.time_spans_in(&block)?)
            }
        };
        Some(TimePlan {
            index,
            spans,
            window,
        })
    }

    /// [`read_ranges`](Self::read_ranges), which also gives the report of what was read before a header of
    /// a newer version stopped it, with the error that says so.
    pub(crate) fn read_ranges_until_stopped<T, F, K>(
        &self,
        bytes: &[u8],
        on_block: F,
        sink: &mut K,
    ) -> Result<(Report, Option<Error>)>
    where
        T: Default + Send,
        F: Fn(&mut T, &Block<'_>) + Sync,
        K: RangeSink<T> + ?Sized,
    {
        let bytes = range::Bytes::Slice(bytes);
        let plan = self.time_plan(bytes);
        self.read_span(bytes, 0..u64::MAX, plan.as_ref(), &on_block, sink)
    }

    /// The range read of the blocks opening in `span` of `bytes` (a slice, or a file fetched
    /// by byte ranges).
    fn read_span<T, W, K>(
        &self,
        bytes: range::Bytes<'_>,
        span: Range<u64>,
        plan: Option<&TimePlan>,
        work: &W,
        sink: &mut K,
    ) -> Result<(Report, Option<Error>)>
    where
        T: Default + Send,
        W: RangeWork<T> + ?Sized,
        K: RangeSink<T> + ?Sized,
    {
        // A window read of bytes with a time index reads, in each range, only the runs of
        // blocks the index says may hold its records (spec 9.9), as one reader does.
        let decoder = |first_sync, stop| {
            let mut decoder = self.decoder_for_range(first_sync, stop);
            if let Some(plan) = plan {
                plan.apply(&mut decoder, first_sync..stop);
            }
            decoder
        };
        let read = range::Plan {
            span,
            threads: self.threads,
            min_split: self.min_split,
            decoder: &decoder,
            on_damage: &self.on_damage,
            planned: plan.is_some(),
        };
        range::read(&read, bytes, work, sink)
    }

    /// [`verify`](crate::verify) of all of `bytes`, on [`threads`](Self::threads) threads (see
    /// [`read_ranges`](Self::read_ranges)): the same report as one reader gives, and when the file ends
    /// with a usable index, what each damaged range held ([`Report::attribute`]).
    ///
    /// ```
    /// let mut writer = cobsfile::WriterBuilder::new().block_target(100).build(Vec::new())?;
    /// for i in 0..1000 {
    ///     writer.write_record(format!("event {i}").as_bytes())?;
    /// }
    /// let file = writer.finish()?;
    /// let report = cobsfile::ReaderBuilder::new().threads(2).min_split(500).verify(&file)?;
    /// assert!(report.is_clean());
    /// assert_eq!(report.records, 1000);
    /// # Ok::<(), cobsfile::Error>(())
    /// ```
    pub fn verify(&self, bytes: &[u8]) -> Result<Report> {
        let mut report = self.read_ranges(bytes, |_: &mut (), _| {}, &mut range::Discard)?;
        report.attribute_from(bytes);
        Ok(report)
    }

    /// [`verify`](Self::verify) of `bytes`, and the verification of its blocks against its
    /// seals (spec 9.10) signed by one of `keys`: which blocks are authentic, unsealed or
    /// tampered with. Each block's leaf is hashed on the thread that reads its range, as
    /// [`read_ranges`](Self::read_ranges) reads them; the matching of blocks to seals then
    /// holds up to about 500 bytes per block, for at most
    /// [`Limits::max_verified_blocks`](crate::Limits::max_verified_blocks) blocks
    /// ([`Error::TooManyBlocks`] past it). With a [`window`](Self::window), and a file whose
    /// index lists a time index, only the blocks from the last seal before the window's
    /// blocks to the first seal after them are read and verified, against every seal the
    /// index lists (spec 9.10.1; [`Sealed::span`](crate::seal::Sealed::span) says which
    /// bytes); otherwise every block.
    ///
    /// ```
    /// use cobsfile::key::SealingKey;
    /// use cobsfile::seal::Tampering;
    ///
    /// let key = SealingKey::from_seed([7; 32]);
    /// let mut writer = cobsfile::WriterBuilder::new().seal(key.clone()).block_target(100).build(Vec::new())?;
    /// for i in 0..100 {
    ///     writer.write_record(format!("event {i}").as_bytes())?;
    /// }
    /// let file = writer.finish()?;
    /// let reader = cobsfile::ReaderBuilder::new();
    /// let (report, sealed) = reader.verify_seals(&file, &[key.verifying_key()])?;
    /// assert!(report.is_clean() && sealed.is_authentic());
    ///
    /// // Cut a block out, framing and all: the file reads clean, and the seals tell.
    /// let index = cobsfile::Index::find(&file).unwrap();
    /// let block = &index.entries()[5];
    /// let (start, end) = (block.offset as usize, (block.offset + block.size) as usize);
    /// let cut = [&file[..start], &file[end..]].concat();
    /// let (report, sealed) = reader.verify_seals(&cut, &[key.verifying_key()])?;
    /// assert!(report.damaged.is_empty());
    /// assert_eq!(sealed.tampered[0].kind, Tampering::Removed);
    /// # Ok::<(), cobsfile::Error>(())
    /// ```
    pub fn verify_seals(
        &self,
        bytes: &[u8],
        keys: &[crate::key::VerifyingKey],
    ) -> Result<(Report, crate::seal::Sealed)> {
        self.verify_seals_of(range::Bytes::Slice(bytes), keys)
    }

    /// [`verify_seals`](Self::verify_seals) of `bytes` (a slice, or a file fetched by byte
    /// ranges). With a [`window`](Self::window), and a file whose index lists its time index
    /// and its seals, only the blocks around the window's are read and verified (spec
    /// 9.10.1): from the last seal before the window's first block to the first seal after
    /// its last, against every seal the index lists.
    pub(crate) fn verify_seals_of(
        &self,
        bytes: range::Bytes<'_>,
        keys: &[crate::key::VerifyingKey],
    ) -> Result<(Report, crate::seal::Sealed)> {
        use crate::seal::Seen;
        /// The blocks noted, up to the limit: past it, where the block past it opens.
        struct Collect(Vec<Seen>, u64, Option<u64>);
        impl RangeSink<Vec<Seen>> for Collect {
            fn part(&mut self, mut part: Vec<Seen>) -> std::ops::ControlFlow<()> {
                let room = self.1.saturating_sub(self.0.len() as u64);
                if let Some(past) = part.get(usize::try_from(room).unwrap_or(usize::MAX)) {
                    self.2 = Some(past.offset);
                    return std::ops::ControlFlow::Break(());
                }
                self.0.append(&mut part);
                std::ops::ControlFlow::Continue(())
            }
        }
        let too_many = |seen: &Collect| match seen.2 {
            Some(offset) => Err(Error::TooManyBlocks {
                offset,
                limit: seen.1,
            }),
            None => Ok(()),
        };
        let see = See;
        // Every block is read and hashed: the window says which bytes, never which blocks.
        let all = ReaderBuilder {
            window: None,
            ..self.clone()
        };
        let mut seen = Collect(Vec::new(), self.limits.max_verified_blocks, None);
        let index = || match bytes {
            range::Bytes::Slice(slice) => Index::find(slice).filter(|i| i.start() == 0),
            range::Bytes::Fetched(file) => file.index().filter(|i| i.start() == 0).cloned(),
        };
        if let Some(SealedSpan {
            span,
            seals,
            unread,
            tail,
        }) = self.sealed_span(bytes)?
        {
            let (mut report, stopped) =
                all.read_span(bytes, span.clone(), None, &see, &mut seen)?;
            if let Some(stopped) = stopped {
                return Err(stopped);
            }
            too_many(&seen)?;
            // How the file ends, from its last blocks: the index and what follows it.
            if span.end != u64::MAX {
                let nothing = |_: &mut (), _: &Block<'_>| {};
                let (tail, _) =
                    all.read_span(bytes, tail..u64::MAX, None, &nothing, &mut range::Discard)?;
                report.ending = tail.ending;
            }
            // The seals outside the span, in file order with its blocks.
            seen.0
                .extend(seals.into_iter().filter(|b| !span.contains(&b.offset)));
            seen.0.sort_by_key(|b| b.offset);
            let mut lost: Vec<Range<u64>> =
                report.damaged.iter().map(|d| d.range.clone()).collect();
            lost.extend(unread.iter().cloned());
            lost.sort_by_key(|r| r.start);
            let sealed = crate::seal::verify_span(&seen.0, &lost, keys, span);
            return Ok((report, sealed));
        }
        // As many blocks as the index lists (and the few after it), noted without the
        // doubling of a growing list: a hint, never more than the limit.
        if let Some(listed) = index().map(|index| index.len() as u64 + 4) {
            let hint = listed.min(self.limits.max_verified_blocks);
            seen.0.reserve_exact(usize::try_from(hint).unwrap_or(0));
        }
        let mut report = match all.read_span(bytes, 0..u64::MAX, None, &see, &mut seen)? {
            (report, None) => report,
            (_, Some(stopped)) => return Err(stopped),
        };
        too_many(&seen)?;
        if let Some(index) = index() {
            report.attribute(&index);
        }
        let lost: Vec<Range<u64>> = report.damaged.iter().map(|d| d.range.clone()).collect();
        let sealed = crate::seal::verify(&seen.0, &lost, keys);
        Ok((report, sealed))
    }

    /// [`read_ranges`](Self::read_ranges) of the blocks that `sealed` (what
    /// [`verify_seals`](Self::verify_seals) of the same bytes, with these options, found)
    /// calls authentic: the others are passed over on the range reads' threads, as a window
    /// passes over blocks, so that `on_block` sees only blocks a valid seal covers in their
    /// place. The report is the read's, of every block.
    ///
    /// ```
    /// use cobsfile::key::SealingKey;
    /// use std::ops::ControlFlow;
    ///
    /// let key = SealingKey::from_seed([7; 32]);
    /// let mut writer = cobsfile::WriterBuilder::new().seal(key.clone()).block_target(100).build(Vec::new())?;
    /// for i in 0..100 {
    ///     writer.write_record(format!("event {i}").as_bytes())?;
    /// }
    /// writer.seal()?;
    /// writer.write_record(b"written after the last seal")?;
    /// writer.flush()?;
    /// let file = writer.get_ref().clone();
    ///
    /// let reader = cobsfile::ReaderBuilder::new().threads(2);
    /// let (_, sealed) = reader.verify_seals(&file, &[key.verifying_key()])?;
    /// struct Count(usize);
    /// impl cobsfile::RangeSink<usize> for Count {
    ///     fn part(&mut self, records: usize) -> ControlFlow<()> {
    ///         self.0 += records;
    ///         ControlFlow::Continue(())
    ///     }
    /// }
    /// let mut count = Count(0);
    /// reader.read_authentic(&file, &sealed, |n: &mut usize, b| *n += b.records().count(), &mut count)?;
    /// assert_eq!(count.0, 100);
    /// # Ok::<(), cobsfile::Error>(())
    /// ```
    pub fn read_authentic<T, F, K>(
        &self,
        bytes: &[u8],
        sealed: &crate::seal::Sealed,
        on_block: F,
        sink: &mut K,
    ) -> Result<Report>
    where
        T: Default + Send,
        F: Fn(&mut T, &Block<'_>) + Sync,
        K: RangeSink<T> + ?Sized,
    {
        let work = Authentic {
            sealed,
            work: &on_block,
        };
        self.read_within(range::Bytes::Slice(bytes), 0..u64::MAX, &work, sink)
    }

    /// For a verification of this read's window: the bytes to verify (from the last seal
    /// before the window's first block to the first seal after its last, as the index lists
    /// them), the seal blocks the index lists, read where it says, and the byte ranges of
    /// those that could not be read. `None` without a window, or without an index from the
    /// file's start that lists a time index. A failed fetch is an [`Error::Io`].
    fn sealed_span(&self, bytes: range::Bytes<'_>) -> Result<Option<SealedSpan>> {
        let Some(plan) = self.time_plan(bytes) else {
            return Ok(None);
        };
        let index = &plan.index;
        let Some(window) = index.window_span(&plan.spans, plan.window) else {
            return Ok(None);
        };
        let entries = index.entries();
        let listed: Vec<&IndexEntry> = (entries.iter())
            .filter(|e| e.block_type == BlockType::Seal)
            .chain(index.seal_after())
            .collect();
        let frame = self
            .limits
            .max_length()
            .saturating_add(2 * varint::MAX_LEN as u64);
        // A seal block the index lists: its bytes with its closing sync byte.
        let range_of = |e: &IndexEntry| e.offset..e.offset.saturating_add(e.size).saturating_add(1);
        let (fit, too_large): (Vec<&IndexEntry>, Vec<&IndexEntry>) =
            listed.iter().partition(|e| e.size < frame);
        let mut seals = Vec::new();
        let mut unread: Vec<Range<u64>> = (too_large.iter())
            .map(|e| e.offset + 1..e.offset + e.size)
            .collect();
        // Fetched (or, in memory, borrowed) a batch at a time: an index may list anything
        // as a seal, and a crafted one every block of the file.
        let mut rest = &fit[..];
        while !rest.is_empty() {
            let mut batched = 0;
            let take = (rest.iter())
                .take_while(|e| {
                    let first = batched == 0;
                    batched += e.size + 1;
                    first || batched <= SEAL_BATCH
                })
                .count();
            let (batch, after) = rest.split_at(take);
            rest = after;
            let ranges: Vec<Range<u64>> = batch.iter().map(|e| range_of(e)).collect();
            let fetched;
            let pieces: Vec<Option<&[u8]>> = match bytes {
                range::Bytes::Slice(slice) => (ranges.iter())
                    .map(|r| {
                        slice.get(usize::try_from(r.start).ok()?..usize::try_from(r.end).ok()?)
                    })
                    .collect(),
                range::Bytes::Fetched(file) => {
                    fetched = file.fetch(&ranges)?;
                    fetched.iter().map(|piece| Some(&piece[..])).collect()
                }
            };
            for (e, piece) in batch.iter().zip(pieces) {
                let read = piece.and_then(|piece| {
                    let mut reader = self.stream_reader_at(io::Cursor::new(piece), e.offset);
                    let block = reader.next_block()?.ok()?;
                    let info = block.info();
                    (info.offset == e.offset
                        && info.size == e.size
                        && info.block_type == BlockType::Seal)
                        .then(|| {
                            crate::seal::Seen::new(
                                e.offset,
                                e.size,
                                BlockType::Seal,
                                0,
                                &[],
                                block.payload(),
                            )
                        })
                });
                match read {
                    Some(seen) => seals.push(seen),
                    None => unread.push(e.offset + 1..e.offset + e.size),
                }
            }
        }
        unread.sort_by_key(|r| r.start);
        let start = (listed.iter().rev())
            .find(|e| e.offset < window.start)
            .map_or(0, |e| e.offset);
        let end = (listed.iter())
            .find(|e| e.offset >= window.end)
            .map_or(u64::MAX, |e| e.offset + 1);
        Ok(Some(SealedSpan {
            span: start..end,
            seals,
            unread,
            tail: index.offset(),
        }))
    }
    /// The metadata blocks of `bytes`, in file order: when it ends with a usable index (from
    /// offset 0), the ones the index lists, each read where the index says it is (a few pages
    /// of a mapped file, whatever its size); otherwise, or if one of them is not there, those
    /// a skipping scan finds (spec 9.3), damaged ones left out.
    pub fn metadata_of(&self, bytes: &[u8]) -> Vec<Metadata> {
        let listed = Index::find(bytes)
            .filter(|index| index.start() == 0)
            .and_then(|index| {
                let metadata = index.entries().iter();
                metadata
                    .filter(|e| e.block_type == BlockType::Metadata)
                    .map(|e| {
                        // The block, and its closing sync byte.
                        let end = e.offset.checked_add(e.size)?.checked_add(1)?;
                        let piece = bytes
                            .get(usize::try_from(e.offset).ok()?..usize::try_from(end).ok()?)?;
                        let mut reader = self.stream_reader_at(io::Cursor::new(piece), e.offset);
                        match reader.metadata().next() {
                            Some(Ok(found)) if found.offset == e.offset => Some(found),
                            _ => None,
                        }
                    })
                    .collect::<Option<Vec<_>>>()
            });
        match listed {
            Some(found) => found,
            None => self.from_slice(bytes).metadata().flatten().collect(),
        }
    }

    /// Whether `bytes` are not a cobsfile at all (spec 9.5; see
    /// [`NotACobsfile`](crate::NotACobsfile)), read with these options up to the first intact
    /// block: what a reader that returns nothing from an input should ask before it calls the
    /// input empty.
    ///
    /// ```
    /// let file = cobsfile::Writer::new(Vec::new())?.finish()?;
    /// let options = cobsfile::ReaderBuilder::new();
    /// assert_eq!(options.not_a_cobsfile(&file), None);
    /// assert_eq!(options.not_a_cobsfile(b""), None);
    /// let text = options.not_a_cobsfile(b"just some text\n").unwrap();
    /// assert_eq!(text.to_string(), "not a cobsfile: none of its 15 bytes is an intact block");
    /// # Ok::<(), cobsfile::Error>(())
    /// ```
    pub fn not_a_cobsfile(&self, bytes: &[u8]) -> Option<crate::NotACobsfile> {
        crate::NotACobsfile::of(bytes.len() as u64, &mut self.from_slice(bytes))
            .ok()
            .flatten()
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
        let decoder = self.equip(Decoder::starting_at(self.limits, offset), false);
        Reader::with_decoder(
            StreamSource::new(inner, offset),
            decoder,
            Workers::default(),
        )
    }
}

/// What [`Reader::next_item`] yields: a record, or a metadata block met among them.
#[derive(Debug)]
pub enum Item<'a> {
    /// A record of an intact data block.
    Record(&'a [u8]),
    /// An intact metadata block; its entries are [`Block::entries`].
    Metadata(Block<'a>),
}

/// What [`Reader::next_item_at`] yields.
#[cfg(feature = "avro")]
#[derive(Debug)]
pub(crate) enum ItemAt {
    /// A record: its range in the reader's buffer, and its block's offset.
    Record { range: Range<usize>, block: u64 },
    /// A metadata block.
    Metadata,
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

/// What is left of the current data block's records: the rest of its kept record ranges
/// ([`Decoder::records`]), or else of its payload, walked record by record. Emptied whenever
/// the block stops being current, so that it never reads a stale block.
#[derive(Debug, Clone, Default)]
struct Cursor {
    /// Indexes into the kept ranges.
    kept: Range<usize>,
    /// Bytes in the decoder's buffer.
    walk: Range<usize>,
    /// Records taken from the block so far, returned or skipped.
    taken: usize,
}

/// A reader of blocks, records and metadata over any [`Source`]: a driver of the [`Decoder`].
///
/// [`next_record`](Self::next_record) lends each record from the decoded block, copying
/// nothing; it cannot be an [`Iterator`], whose items may not borrow from it.
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
///
/// A reader is also an iterator of owned records (a `Vec<u8>` each), by value, by `&mut` or
/// through [`records`](Self::records), with the same items as `next_record`, damage included:
///
/// ```
/// # let mut writer = cobsfile::Writer::new(Vec::new())?;
/// # writer.write_record(b"hello")?;
/// # let file = writer.finish()?;
/// for record in cobsfile::ReaderBuilder::new().from_slice(&file) {
///     assert_eq!(record?, b"hello");
/// }
/// # Ok::<(), cobsfile::Error>(())
/// ```
#[derive(Debug)]
pub struct Reader<S> {
    src: S,
    decoder: Decoder,
    /// What is left of the current data block's records.
    cursor: Cursor,
    /// Records `next_record` is still to pass over (see `skip_records`).
    skip: u64,
    /// Set after the source failed: nothing more is read.
    failed: bool,
    /// The range reads of a full read with `threads > 1` (started on first use).
    pull: Option<Box<Pull>>,
    /// The worker threads asked for.
    workers: Workers,
    /// The input's bytes, which worker threads read in place (a mapped file, an `Arc`):
    /// readers without it read on one thread.
    shared: Option<Shared>,
    /// What the reader keeps alive for its driver (a mapping's advice for random access).
    alive: Option<Alive>,
}

/// Something a driver keeps alive as long as its reader.
struct Alive(#[allow(dead_code)] Box<dyn std::any::Any + Send + Sync>);

impl std::fmt::Debug for Alive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Alive")
    }
}

/// The threads a reader reads on: how many were asked for (0 or 1: one), the options'
/// threads to run them on, and the least bytes a range holds.
#[derive(Debug, Default)]
struct Workers {
    threads: usize,
    kept: Option<Kept>,
    min_split: u64,
}

impl<S: Source> Reader<S> {
    fn with_decoder(src: S, decoder: Decoder, workers: Workers) -> Self {
        Reader {
            src,
            decoder,
            cursor: Cursor::default(),
            skip: 0,
            failed: false,
            pull: None,
            workers,
            shared: None,
            alive: None,
        }
    }

    /// Counts of blocks and damage seen so far.
    pub fn stats(&self) -> &Stats {
        self.decoder.stats()
    }

    /// How the input ends (spec 9.5.1: finished, an open log, unfinished, empty), once a full
    /// read ([`next_record`](Self::next_record), [`next_block`](Self::next_block)) has
    /// returned its last item: judged from the blocks and damage this reader met. `None`
    /// before that, for a reader of a range that ends before the input does, after
    /// [`metadata`](Self::metadata) skipped blocks, and after a header of a newer version
    /// stopped the read. [`verify`](crate::verify) reports it as [`Report::ending`].
    ///
    /// ```
    /// let mut writer = cobsfile::Writer::new(Vec::new())?;
    /// writer.write_record(b"hello")?;
    /// let file = writer.finish()?;
    ///
    /// let mut reader = cobsfile::ReaderBuilder::new().from_slice(&file);
    /// assert_eq!(reader.ending(), None);
    /// while reader.next_record().is_some() {}
    /// assert_eq!(reader.ending(), Some(cobsfile::Ending::Finished));
    /// # Ok::<(), cobsfile::Error>(())
    /// ```
    pub fn ending(&self) -> Option<Ending> {
        self.decoder.ending()
    }

    /// The source this reader scans.
    pub fn source(&self) -> &S {
        &self.src
    }

    /// The decoder's next step that is not a request for input, which this driver serves:
    /// `None` at the end, or when a non-blocking source has nothing more for now (a block cut
    /// off there is waited for, not reported).
    fn next_step(&mut self, want: Want) -> Option<Step> {
        if self.failed {
            return None;
        }
        if self.workers.threads > 1 && !self.decoder.is_stopped() {
            match want {
                Want::Blocks => return self.next_parallel(),
                _ => self.catch_up(),
            }
        }
        loop {
            match self.decoder.step(input(&self.src), want) {
                Step::NeedInput { from } => {
                    let keep = (from - self.src.base()) as usize;
                    match self.src.refill(keep, self.decoder.max_window()) {
                        Ok(()) => {}
                        Err(Error::Io(e)) if e.kind() == io::ErrorKind::WouldBlock => return None,
                        Err(e) => {
                            self.failed = true;
                            return Some(Step::Stopped(e));
                        }
                    }
                }
                Step::NeedDictionaries { .. } => self.add_dictionaries_before(),
                Step::End => return None,
                // A window read's data block that holds no record of the window.
                Step::Passed { .. } => {}
                step => return Some(step),
            }
        }
    }

    /// Hands the decoder the input from its start to search for dictionaries before its
    /// range (only slices, which hold the input from its first byte, start ranges past it).
    fn add_dictionaries_before(&mut self) {
        debug_assert_eq!(self.src.base(), 0, "a range read over a slice");
        self.decoder.add_dictionaries_before(self.src.window());
    }

    /// The next step of a full read on several threads: range reads of what is left
    /// ([`Pull`]), whose blocks and damage the decoder settles in order exactly as on one
    /// thread. Reads on one thread when the input cannot be shared with threads (a borrowed
    /// slice), is too small to cut into ranges, or the threads cannot be started.
    fn next_parallel(&mut self) -> Option<Step> {
        if let Some(step) = self.decoder.take_ready() {
            return Some(step);
        }
        if self.pull.is_none() {
            let Workers {
                threads,
                kept,
                min_split,
            } = &self.workers;
            let started = match (kept, &self.shared) {
                (Some(kept), Some(shared)) => {
                    let shared = Arc::clone(shared);
                    Pull::start(kept, *threads, *min_split, shared, &self.decoder)
                }
                _ => None,
            };
            match started {
                Some(pull) => self.pull = Some(Box::new(pull)),
                None => {
                    self.workers = Workers::default();
                    return self.next_step(Want::Blocks);
                }
            }
        }
        let mut pull = self.pull.take().expect("started");
        let step = pull.next(&mut self.decoder);
        // After a newer version's header nothing more is read: let the threads go.
        if !self.decoder.is_stopped() {
            self.pull = Some(pull);
        }
        step
    }

    /// Before reading on this thread: drops what the threads read ahead of the caller and
    /// goes back to where the caller is (started afresh on the next full read).
    fn catch_up(&mut self) {
        if let Some(pull) = self.pull.take() {
            // A block the decoder holds behind the damage it just reported has not been
            // returned yet: reading on this thread starts with it.
            let at = self.decoder.ready_offset().unwrap_or(pull.consumed());
            self.decoder.rewind(at);
        }
    }

    /// The next intact block, or the error that stands for a damaged region before it.
    /// Records of the current block that [`next_record`](Self::next_record) has not yet
    /// returned are passed over.
    pub fn next_block(&mut self) -> Option<Result<Block<'_>>> {
        self.cursor = Cursor::default();
        match self.next_step(Want::Blocks)? {
            Step::Block(_) => Some(Ok(self.decoder.block().expect("a block was announced"))),
            Step::Damaged(e) | Step::Stopped(e) => Some(Err(e)),
            other => unreachable!("served by next_step: {other:?}"),
        }
    }

    /// The next record of an intact data block, borrowed from the decoded block; or the error
    /// that stands for a damaged region. Blocks of unknown type are skipped and counted in
    /// [`stats`](Self::stats).
    pub fn next_record(&mut self) -> Option<Result<&[u8]>> {
        loop {
            if let Some(record) = self.next_in_cursor() {
                return Some(Ok(self.record(record)));
            }
            if let Err(e) = self.open_block()? {
                return Some(Err(e));
            }
        }
    }

    /// Takes the next record's range from the cursor.
    #[inline]
    pub(crate) fn next_in_cursor(&mut self) -> Option<Range<usize>> {
        match self.decoder.window() {
            None => self.next_in_block(),
            Some(window) => self.next_in_window(window),
        }
    }

    /// The next record's range in the current block whose time is in `window`: a window read
    /// returns those only (spec 9.9). Apart from [`next_in_block`](Self::next_in_block), which
    /// every record of a read without a window goes through alone.
    #[inline(never)]
    fn next_in_window(&mut self, window: crate::Window) -> Option<Range<usize>> {
        loop {
            let range = self.next_in_block()?;
            let time = self
                .decoder
                .times()
                .and_then(|t| t.get(self.cursor.taken - 1));
            if time.is_some_and(|&t| window.contains(t)) {
                return Some(range);
            }
        }
    }

    /// The next record's range in the current block, whatever its time.
    #[inline]
    fn next_in_block(&mut self) -> Option<Range<usize>> {
        if let Some(i) = self.cursor.kept.next() {
            let &(start, end) = self.decoder.records()?.get(i)?;
            self.cursor.taken += 1;
            return Some(start as usize..end as usize);
        }
        let walk = &mut self.cursor.walk;
        let item = block::next_string(self.decoder.buffer().get(walk.clone())?)?;
        let range = walk.start + item.start..walk.start + item.end;
        walk.start = range.end;
        self.cursor.taken += 1;
        Some(range)
    }

    /// The earliest and latest event time of the block returned last (by
    /// [`next_block`](Self::next_block), [`blocks`](Self::blocks) or with the record returned
    /// last): a time block's, or a data block's that a time block describes (spec 8.8).
    pub fn block_times(&self) -> Option<crate::TimeSpan> {
        crate::TimeSpan::of(self.decoder.times()?)
    }

    /// The event time of the record [`next_record`](Self::next_record) (or
    /// [`next_item`](Self::next_item), or the iterators) returned last, in nanoseconds since the
    /// Unix epoch, if its data block has a time block (spec 8.8); `None` for a record without a
    /// time, and once the reader moved on from its block.
    pub fn record_time(&self) -> Option<i64> {
        let taken = self.cursor.taken.checked_sub(1)?;
        self.decoder.times()?.get(taken).copied()
    }

    /// The bytes of a record whose range [`next_in_cursor`](Self::next_in_cursor) gave.
    #[inline]
    pub(crate) fn record(&self, range: Range<usize>) -> &[u8] {
        &self.decoder.buffer()[range]
    }

    /// The next record, as [`next_record`](Self::next_record) returns it, or the next metadata
    /// block met on the way there: for readers whose records depend on metadata that may
    /// change in the middle of a file (a schema, a framing note), which must see each
    /// metadata block where it lies among the records.
    ///
    /// ```
    /// let mut writer = cobsfile::Writer::new(Vec::new())?;
    /// writer.write_record(b"before")?;
    /// writer.write_metadata([("schema", "v2")])?;
    /// writer.write_record(b"after")?;
    /// let file = writer.finish()?;
    ///
    /// let mut reader = cobsfile::ReaderBuilder::new().from_slice(&file);
    /// let mut seen = Vec::new();
    /// while let Some(item) = reader.next_item() {
    ///     seen.push(match item? {
    ///         cobsfile::Item::Record(record) => String::from_utf8_lossy(record).into_owned(),
    ///         cobsfile::Item::Metadata(block) => {
    ///             let (key, value) = block.entries().next().unwrap();
    ///             format!("{key}={}", String::from_utf8_lossy(value))
    ///         }
    ///     });
    /// }
    /// assert_eq!(seen, ["before", "schema=v2", "after"]);
    /// # Ok::<(), cobsfile::Error>(())
    /// ```
    pub fn next_item(&mut self) -> Option<Result<Item<'_>>> {
        loop {
            if let Some(record) = self.next_in_cursor() {
                return Some(Ok(Item::Record(self.record(record))));
            }
            match self.open_block()? {
                Err(e) => return Some(Err(e)),
                Ok(info) if info.block_type == BlockType::Metadata => {
                    let block = self.decoder.block().expect("the block just read");
                    return Some(Ok(Item::Metadata(block)));
                }
                Ok(_) => {}
            }
        }
    }

    /// [`next_item`](Self::next_item) for drivers in this crate that loop over items: a
    /// record as its range in [`record`](Self::record)'s buffer and the offset of its block,
    /// or a metadata block, which [`current_block`](Self::current_block) holds.
    #[cfg(feature = "avro")]
    pub(crate) fn next_item_at(&mut self) -> Option<Result<ItemAt>> {
        loop {
            if let Some(range) = self.next_in_cursor() {
                let block = self.decoder.current_offset().unwrap_or(0);
                return Some(Ok(ItemAt::Record { range, block }));
            }
            match self.open_block()? {
                Err(e) => return Some(Err(e)),
                Ok(info) if info.block_type == BlockType::Metadata => {
                    return Some(Ok(ItemAt::Metadata))
                }
                Ok(_) => {}
            }
        }
    }

    /// The block the last item came from, until the next call.
    #[cfg(feature = "avro")]
    pub(crate) fn current_block(&self) -> Option<Block<'_>> {
        self.decoder.block()
    }

    /// Iterates over the records left, each copied into a `Vec<u8>`: the items of
    /// [`next_record`](Self::next_record), owned. Errors are items too, each standing for a
    /// damaged region, and iteration goes on after them as `next_record` does; stop at the
    /// first one to treat damage as fatal. `&mut reader` in a `for` loop iterates the same way
    /// (and `reader` by value, see [`IntoRecords`]); the reader is still there afterwards,
    /// e.g. for its [`stats`](Self::stats).
    ///
    /// Each record costs an allocation; `next_record` lends records without copying, for
    /// loops where that matters. Over a non-blocking stream the iterator ends when the input
    /// has nothing more for now, and a later call goes on where it stopped (it is not fused).
    ///
    /// ```
    /// let mut writer = cobsfile::WriterBuilder::new().block_target(100).build(Vec::new())?;
    /// for i in 0..100 {
    ///     writer.write_record(format!("event {i:02}").as_bytes())?;
    /// }
    /// let mut file = writer.finish()?;
    /// file[200] ^= 0x40; // damage one block
    ///
    /// let mut reader = cobsfile::ReaderBuilder::new().from_slice(&file);
    /// let (mut records, mut damaged) = (Vec::new(), 0);
    /// for item in reader.records() {
    ///     match item {
    ///         Ok(record) => records.push(record),
    ///         Err(_) => damaged += 1, // names the byte range; reading goes on
    ///     }
    /// }
    /// assert_eq!((damaged, reader.stats().damaged_regions), (1, 1));
    /// assert!(records.len() < 100);
    /// assert_eq!(records.last().unwrap(), b"event 99");
    /// # Ok::<(), cobsfile::Error>(())
    /// ```
    pub fn records(&mut self) -> OwnedRecords<'_, S> {
        OwnedRecords(self)
    }

    /// Iterates over blocks (intact ones as [`BlockInfo`], damaged regions as errors).
    pub fn blocks(&mut self) -> Blocks<'_, S> {
        Blocks(self)
    }

    /// Iterates over metadata blocks, skipping data blocks by their length fields without
    /// reading them. Like [`next_block`](Self::next_block), it passes over the records of the
    /// current block that [`next_record`](Self::next_record) has not yet returned.
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
        self.cursor = Cursor::default();
        let info = match self.next_step(Want::Blocks)? {
            Step::Block(info) => info,
            Step::Damaged(e) | Step::Stopped(e) => return Some(Err(e)),
            other => unreachable!("served by next_step: {other:?}"),
        };
        match info.block_type {
            BlockType::Data => {
                let items = info.items.unwrap_or(0);
                // In a window read, a block's records in the window are counted by walking.
                if self.skip >= items && self.decoder.window().is_none() {
                    self.skip -= items;
                } else {
                    self.cursor = match self.decoder.records() {
                        Some(records) => Cursor {
                            kept: 0..records.len(),
                            walk: 0..0,
                            taken: 0,
                        },
                        None => {
                            let (buffer, payload) =
                                self.decoder.current().expect("the block just read");
                            Cursor {
                                kept: 0..0,
                                walk: strings_start(buffer, payload),
                                taken: 0,
                            }
                        }
                    };
                    self.skip_in_cursor();
                }
            }
            BlockType::Gap | BlockType::Unknown(_) => self.decoder.count_unknown(),
            BlockType::Header
            | BlockType::Metadata
            | BlockType::Dictionary
            | BlockType::Index
            | BlockType::End
            | BlockType::Log
            | BlockType::Time
            | BlockType::TimeIndex
            | BlockType::Seal => {}
        }
        Some(Ok(info))
    }
}

impl SliceReader<'_> {
    /// Hands the worker threads `shared`, which holds the same bytes as this reader's slice,
    /// to read frames from in place.
    /// Keeps `kept` alive as long as the reader.
    pub(crate) fn keeping(mut self, kept: Box<dyn std::any::Any + Send + Sync>) -> Self {
        self.alive = Some(Alive(kept));
        self
    }

    /// Whether this reader reads its time window by the file's time index (spec 9.9): only
    /// the blocks that may hold records of the window, trusting the index about the others
    /// (their damage goes unreported), as a seek trusts the index (spec 9.6).
    pub fn reads_by_time_index(&self) -> bool {
        self.decoder.has_plan()
    }

    pub(crate) fn sharing(mut self, shared: Shared) -> Self {
        let (ours, theirs) = (self.src.0, shared.bytes());
        assert!(
            std::ptr::eq(ours, theirs),
            "shared bytes are the reader's own"
        );
        self.shared = Some(shared);
        self
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
        self.decoder.resume_offset()
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
        let resume = self.decoder.restart_at_resume();
        self.src.restart_at(resume);
        self.cursor = Cursor::default();
        resume
    }

    /// Makes everything the reader passed over final, after it has read to the input's end
    /// and reported what was there: [`rewind`](Self::rewind) then reads on from where it
    /// stopped, and a block left incomplete there stays damage.
    pub(crate) fn settle_read(&mut self) {
        self.decoder.settle_read();
    }
}

/// A reader over `bytes` (the file `index` was found in) starting at record `record` as
/// written, if the index can be trusted for it; see [`ReaderBuilder::from_slice_at_record`].
fn seek<'a>(
    index: &Index,
    options: &ReaderBuilder,
    bytes: &'a [u8],
    record: u64,
) -> Option<SliceReader<'a>> {
    if index.start() != 0 {
        return None;
    }
    // The block holding the record, or past the last record the last data block, all of
    // whose records are passed over: the check still tells whether the index is right.
    let (target, skip) = match index.block_for_record(record) {
        Some(entry) => (entry, record - entry.first_record),
        None => {
            let last = index.block_for_record(index.records().checked_sub(1)?)?;
            (last, last.records)
        }
    };
    let from_target = || options.from_slice_range(bytes, target.offset..u64::MAX);
    let mut reader = from_target();
    loop {
        let info = match reader.open_block()? {
            Ok(info) => info,
            Err(Error::Damaged { .. }) => continue,
            Err(_) => return None,
        };
        match info.block_type {
            BlockType::Data => {
                let listed = index.block_at(info.offset)?;
                if listed.block_type != BlockType::Data || info.items != Some(listed.records) {
                    return None;
                }
                if info.offset == target.offset {
                    reader.skip_records(skip);
                    return Some(reader);
                }
                // The target block is lost; the first intact one after it is listed
                // where it is. A fresh reader reports the loss and reads on from there.
                return Some(from_target());
            }
            // Every data block from the target on is lost.
            BlockType::Index if info.offset == index.offset() => return Some(from_target()),
            _ => {}
        }
    }
}

/// What `src` holds, for the decoder: its window, where the window starts, and whether the
/// input ends with it.
fn input<S: Source>(src: &S) -> Input<'_> {
    Input {
        bytes: src.window(),
        offset: src.base(),
        end: src.at_eof(),
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
        Some(self.0.next_block()?.map(|block| block.info().clone()))
    }
}

/// Iterator over owned records, borrowing the reader; see [`Reader::records`].
#[derive(Debug)]
pub struct OwnedRecords<'r, S>(&'r mut Reader<S>);

impl<S> OwnedRecords<'_, S> {
    /// The reader being iterated, e.g. for its [`stats`](Reader::stats).
    pub fn reader(&self) -> &Reader<S> {
        self.0
    }
}

impl<S: Source> Iterator for OwnedRecords<'_, S> {
    type Item = Result<Vec<u8>>;

    fn next(&mut self) -> Option<Self::Item> {
        Some(self.0.next_record()?.map(<[u8]>::to_vec))
    }
}

/// Iterator over owned records that owns its reader: `for record in reader`. Its items are
/// those of [`Reader::records`].
///
/// ```
/// let mut writer = cobsfile::Writer::new(Vec::new())?;
/// for word in ["one", "two", "three"] {
///     writer.write_record(word.as_bytes())?;
/// }
/// let file = writer.finish()?;
///
/// let mut words = Vec::new();
/// for record in cobsfile::ReaderBuilder::new().from_slice(&file) {
///     let record = record?; // stop at the first damage
///     words.push(String::from_utf8(record).unwrap());
/// }
/// assert_eq!(words, ["one", "two", "three"]);
/// # Ok::<(), cobsfile::Error>(())
/// ```
#[derive(Debug)]
pub struct IntoRecords<S>(Reader<S>);

impl<S> IntoRecords<S> {
    /// The reader being iterated, e.g. for its [`stats`](Reader::stats).
    pub fn reader(&self) -> &Reader<S> {
        &self.0
    }

    /// The reader back, to go on reading where iteration stopped.
    pub fn into_reader(self) -> Reader<S> {
        self.0
    }
}

impl<S: Source> Iterator for IntoRecords<S> {
    type Item = Result<Vec<u8>>;

    fn next(&mut self) -> Option<Self::Item> {
        Some(self.0.next_record()?.map(<[u8]>::to_vec))
    }
}

/// `for record in reader`: the records left, owned; see [`Reader::records`].
impl<S: Source> IntoIterator for Reader<S> {
    type Item = Result<Vec<u8>>;
    type IntoIter = IntoRecords<S>;

    fn into_iter(self) -> IntoRecords<S> {
        IntoRecords(self)
    }
}

/// `for record in &mut reader`: the records left, owned, with the reader kept for later;
/// the same as [`Reader::records`].
impl<'r, S: Source> IntoIterator for &'r mut Reader<S> {
    type Item = Result<Vec<u8>>;
    type IntoIter = OwnedRecords<'r, S>;

    fn into_iter(self) -> OwnedRecords<'r, S> {
        OwnedRecords(self)
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
        reader.cursor = Cursor::default();
        loop {
            let info = match reader.next_step(Want::Metadata)? {
                Step::Block(info) => info,
                Step::Damaged(e) | Step::Stopped(e) => return Some(Err(e)),
                other => unreachable!("served by next_step: {other:?}"),
            };
            if info.block_type == BlockType::Metadata {
                let (buffer, payload) = reader.decoder.current().expect("the block just read");
                let entries = Entries::new(&buffer[payload])
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

/// Makes `decoder`, a decoder of all of `bytes`, read `window` by the file's time index if it
/// has a usable one (spec 9.9): only the runs of blocks that may hold records of the window,
/// and the others a window read needs (metadata, dictionaries). Without one it reads every
/// frame, passing over the data blocks outside the window.
fn plan_window(decoder: &mut Decoder, options: &ReaderBuilder, bytes: &[u8]) {
    if let Some(plan) = options.time_plan(range::Bytes::Slice(bytes)) {
        plan.apply(decoder, 0..u64::MAX);
    }
}

/// A verification's work on each block of a range read: its leaf hashed, what it is noted.
struct See;

impl RangeWork<Vec<crate::seal::Seen>> for See {
    fn block(&self, part: &mut Vec<crate::seal::Seen>, block: &Block<'_>) {
        let info = block.info();
        let records = match info.block_type {
            BlockType::Data => info.items.unwrap_or(0),
            _ => 0,
        };
        part.push(crate::seal::Seen::new(
            info.offset,
            info.size,
            info.block_type,
            records,
            block.frame().unwrap_or_default(),
            block.payload(),
        ));
    }

    /// Parts of at most 4096 blocks, so that the blocks noted past the verification's limit
    /// are few, however small (a MiB of payload is hundreds of thousands of the smallest).
    fn part_full(&self, part: &Vec<crate::seal::Seen>) -> bool {
        part.len() >= 4096
    }
}

/// The most bytes of listed seal blocks a window's verification asks for (or holds) at once.
const SEAL_BATCH: u64 = 16 << 20;

/// What a verification of part of a file reads besides the blocks of its span.
struct SealedSpan {
    /// The bytes whose blocks are verified.
    span: Range<u64>,
    /// The seal blocks the index lists, as read where it says.
    seals: Vec<crate::seal::Seen>,
    /// The blocks of those that could not be read there.
    unread: Vec<Range<u64>>,
    /// Where the index block opens: the blocks from there on say how the file ends.
    tail: u64,
}

/// The work of a read that passes over the blocks a verification did not find authentic.
pub(crate) struct Authentic<'a, W: ?Sized> {
    pub sealed: &'a crate::seal::Sealed,
    pub work: &'a W,
}

impl<T, W: RangeWork<T> + ?Sized> RangeWork<T> for Authentic<'_, W> {
    fn block(&self, part: &mut T, block: &Block<'_>) {
        if self.sealed.authentic_at(block.info().offset) {
            self.work.block(part, block);
        }
    }

    fn part_full(&self, part: &T) -> bool {
        self.work.part_full(part)
    }

    fn end_part(&self, part: &mut T) {
        self.work.end_part(part);
    }
}

/// A window read by a file's time index (spec 9.9): the file's index, the spans its time index
/// gives the time blocks, and the window.
pub(crate) struct TimePlan {
    index: Index,
    spans: Vec<Option<crate::TimeSpan>>,
    window: Window,
}

impl TimePlan {
    /// Makes `decoder` read, of the blocks opening in `within`, the runs that may hold records
    /// of the window.
    fn apply(&self, decoder: &mut Decoder, within: Range<u64>) {
        let (ranges, untimed) = self.index.window_ranges(&self.spans, self.window, within);
        decoder.set_plan(ranges, untimed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Readers leave their decoding buffers to later readers of the same options (and their
    /// clones), never to readers of other options: the crate keeps no process-wide state.
    #[test]
    fn buffers_are_kept_by_the_options_not_the_process() {
        let mut writer = crate::Writer::new(Vec::new()).unwrap();
        for i in 0..100 {
            writer
                .write_record(format!("record {i}").as_bytes())
                .unwrap();
        }
        let file: Arc<[u8]> = writer.finish().unwrap().into();
        for threads in [1, 2] {
            // Shared bytes, which threads read, in many ranges.
            let options = ReaderBuilder::new().threads(threads).min_split(64);
            let clone = options.clone();
            let other = ReaderBuilder::new().threads(threads);
            assert_eq!(options.spares.kept(), 0);
            let (records, errors) = clone.from_shared(&file).read_all();
            assert_eq!((records.len(), errors.len()), (100, 0));
            assert!(options.spares.kept() > 0, "{threads} threads: nothing kept");
            assert_eq!(
                other.spares.kept(),
                0,
                "{threads} threads: shared with others"
            );
            // A later reader takes them back.
            let kept = options.spares.kept();
            let reader = options.from_shared(&file);
            assert!(options.spares.kept() < kept);
            drop(reader);
            assert_eq!(options.spares.kept(), kept);
        }
    }
}
