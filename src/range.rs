//! Range reads (spec 9.4): a whole slice, or a file fetched by byte ranges, split into byte
//! ranges read on several threads.
//!
//! The input is cut into adjacent ranges, one at a time as threads ask for the next
//! ([`Cuts`]), and each range is read by its own decoder ([`RangeRead`], as
//! [`ReaderBuilder::from_slice_range`](crate::ReaderBuilder::from_slice_range) reads one):
//! every intact block is seen by exactly one range, in any order across threads. The calling
//! thread takes the ranges' results in order (reading ranges itself while the next is not
//! ready, [`Schedule`]) and puts their reports together, joining a damaged range that one
//! range's reader ended with to the one the next range's reader started with, so the report
//! is the one a single reader gives.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::sync::{Arc, Condvar, Mutex};

use crate::codec::Loaded;
use crate::decoder::Block;
use crate::decoder::{Decoder, Input, Step, Want};
use crate::ending::Tail;
use crate::error::{Error, Result};
use crate::frame;
use crate::index::Index;
use crate::report::{Damage, OnDamage, Report};

mod pull;

pub(crate) use pull::Pull;

/// A sink that keeps nothing (a range read for its report alone).
pub(crate) struct Discard;

impl RangeSink<()> for Discard {
    fn part(&mut self, (): ()) -> ControlFlow<()> {
        ControlFlow::Continue(())
    }
}

/// Payload bytes a part of a range holds before it goes to the calling thread (plus at most
/// one block): what the ranges' results keep in memory is about this times the parts in
/// flight, whatever the blocks' sizes or compression ratio.
const PART_BUDGET: u64 = 1 << 20;

/// Ranges per thread in a range read: enough that threads finishing early find more work.
const SPLITS_PER_THREAD: u64 = 8;

/// The largest range a range read gives a thread (unless `min_split` is larger): what a range
/// yields waits in memory for the calling thread, and smaller ranges keep it in the caches
/// and the allocator's reach (measured: `cat --threads 2` of 1 GiB ran 2.5x slower with
/// ranges of 67 MiB).
const MAX_SPLIT: u64 = 16 << 20;

/// What a [`ReaderBuilder::read_ranges`](crate::ReaderBuilder::read_ranges) does with each
/// intact block, on the thread that reads the block's range: a closure
/// `Fn(&mut T, &Block)` is one, which puts what it makes of each block in `T`, the part of the
/// range that goes to the calling thread next.
pub trait RangeWork<T>: Sync {
    /// Takes the next intact block of a range, into the range's current part.
    fn block(&self, part: &mut T, block: &Block<'_>);

    /// Whether `part` is to go to the calling thread now, after the block it just took (rows
    /// enough for a batch, say), rather than when its blocks hold about a MiB of payload.
    /// False by default.
    fn part_full(&self, part: &T) -> bool {
        let _ = part;
        false
    }

    /// Finishes `part` on the range's thread before it goes to the calling thread (what it
    /// holds made into its final form, say). Does nothing by default.
    fn end_part(&self, part: &mut T) {
        let _ = part;
    }
}

impl<T, F: Fn(&mut T, &Block<'_>) + Sync> RangeWork<T> for F {
    fn block(&self, part: &mut T, block: &Block<'_>) {
        self(part, block);
    }
}

/// Where the results of a [`ReaderBuilder::read_ranges`](crate::ReaderBuilder::read_ranges) go, on the calling thread and in order.
pub trait RangeSink<T> {
    /// Takes the result of the next range (its blocks in file order).
    fn part(&mut self, part: T) -> ControlFlow<()>;

    /// A value to start a later range with instead of `T::default()`: one the sink was given
    /// and has emptied, so that its allocations are reused (a range's output buffer, say).
    /// Asked for after each [`part`](Self::part); `None` by default.
    fn recycle(&mut self) -> Option<T> {
        None
    }

    /// Takes the next damaged or unreadable range, once it is known whole (damage at the
    /// end of a range may go on into the next). Does nothing by default.
    fn damage(&mut self, damage: &Damage) -> ControlFlow<()> {
        let _ = damage;
        ControlFlow::Continue(())
    }
}

/// What a range's reader found since the previous part of the same range.
struct Part<T> {
    value: T,
    report: Report,
    /// What decides how the input ends, for this part.
    tail: Tail,
    /// The part starts its range, and the range's reader reported damage before any intact
    /// block.
    first_damaged: bool,
    /// The range's reader reported damage after the part's last intact block.
    last_damaged: bool,
    /// The range's reader is done: this is its last part.
    last: bool,
    /// An error that ends the range read (a newer format version).
    error: Option<Error>,
    /// What its blocks weigh: their payload bytes, and in a pull reader's parts 1 KiB more
    /// for each thing met (`pull::MET_WEIGHT`), which its buffers hold besides. The schedule
    /// bounds and cuts by it.
    payload: u64,
    /// Data blocks a window read passed over in it (not in `report`).
    passed: u64,
}

impl<T> Part<T> {
    /// A part that holds `value` and nothing found yet, the last of its range until more is.
    fn new(value: T) -> Self {
        Part {
            value,
            report: Report::default(),
            tail: Tail::default(),
            first_damaged: false,
            last_damaged: false,
            last: true,
            error: None,
            payload: 0,
            passed: 0,
        }
    }
}

/// The bytes a range read reads: a slice of the whole file, or a file it fetches by byte
/// ranges ([`Remote`](crate::Remote)).
#[derive(Clone, Copy)]
pub(crate) enum Bytes<'a> {
    Slice(&'a [u8]),
    Fetched(&'a dyn Fetched),
}

impl Bytes<'_> {
    fn len(&self) -> u64 {
        match self {
            Bytes::Slice(bytes) => bytes.len() as u64,
            Bytes::Fetched(file) => file.len(),
        }
    }
}

/// A file a range read fetches by byte ranges: what a [`Remote`](crate::Remote) offers it.
pub(crate) trait Fetched: Sync {
    /// The file's size.
    fn len(&self) -> u64;
    /// The bytes of each of `ranges`, in order, each checked to be all of them.
    fn fetch(&self, ranges: &[std::ops::Range<u64>]) -> std::io::Result<Vec<Vec<u8>>>;
    /// The file's index, if it ends with a usable one.
    fn index(&self) -> Option<&Index>;
    /// The first fetch of a range's bytes, and the largest (each asks for twice the one
    /// before). The first is also what a range without an index fetches past its end, for
    /// the block that straddles it; more is fetched if that block is larger.
    fn fetch_sizes(&self) -> (u64, u64);
}

/// The bytes of `range` of `file` (which checks that they are all of them).
pub(crate) fn fetch_one(
    file: &dyn Fetched,
    range: std::ops::Range<u64>,
) -> std::io::Result<Vec<u8>> {
    Ok(file
        .fetch(std::slice::from_ref(&range))?
        .pop()
        .unwrap_or_default())
}

/// The searches of the bytes before a read's ranges for their dictionary blocks (spec 9.4),
/// each left where it stopped: a range takes the one that stopped furthest before its own
/// first sync byte and reads on from there, so the bytes before all of a read's ranges are
/// searched about once, not once for each range (which made a read with many ranges of a
/// file with an embedded dictionary quadratic in its size). A search is one collecting
/// decoder of the input from its first byte, so going on with it finds exactly what a search
/// from the start finds.
#[derive(Default)]
pub(crate) struct Searches(Mutex<Vec<Decoder>>);

impl Searches {
    /// The searches kept at most: one per thread is enough to go on from.
    const KEPT: usize = 8;

    /// The search that stopped furthest at or before `before`, or a new one.
    fn take(&self, before: u64, limits: &crate::Limits) -> Decoder {
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let best = (kept.iter().enumerate())
            .filter(|(_, d)| d.position() <= before)
            .max_by_key(|(_, d)| d.position())
            .map(|(i, _)| i);
        match best {
            Some(i) => kept.swap_remove(i),
            None => Decoder::new(*limits).collecting(),
        }
    }

    /// Keeps `search` for later ranges (the furthest ones, if there are many).
    fn give_back(&self, search: Decoder) {
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        kept.push(search);
        if kept.len() > Self::KEPT {
            kept.sort_by_key(|d| std::cmp::Reverse(d.position()));
            kept.truncate(Self::KEPT);
        }
    }
}

/// A range read (spec 9.4): the decoder of the blocks that open in a range, driven over the
/// whole slice, which it may search before the range for dictionaries; or over a window of a
/// remote file it fetches as the decoder asks, and the dictionary blocks before the range.
pub(crate) struct RangeRead {
    decoder: Decoder,
    /// What has been fetched of a remote file.
    window: Window,
}

/// What the ranges of one read share: the bytes they read, and the searches before them to
/// go on from.
#[derive(Clone, Copy)]
pub(crate) struct Ctx<'a> {
    pub bytes: Bytes<'a>,
    pub searches: &'a Searches,
    /// Whether the ranges' decoders follow plans ([`Plan::planned`]).
    pub planned: bool,
}

/// A remote file's bytes a range read has fetched and still needs.
struct Window {
    /// The bytes from `base` on.
    bytes: Vec<u8>,
    base: u64,
    /// How many bytes the next fetch asks for.
    chunk: u64,
    /// Where fetching stops growing the window by whole chunks: the end of the last block
    /// opening in the range (from the index), or a first fetch's size past the range.
    cap: u64,
    /// A failed fetch, reported before anything else.
    failed: Option<std::io::Error>,
    /// Where the input the window reads ends: the file's end, or the end of the bytes a
    /// search before a range reads.
    end: u64,
}

impl RangeRead {
    /// The read of the blocks of `ctx`'s bytes that open in `range`, by a decoder `decoder`
    /// makes for the range's first sync byte and end.
    pub(crate) fn new(
        decoder: impl FnOnce(u64, u64) -> Decoder,
        ctx: Ctx<'_>,
        range: std::ops::Range<u64>,
    ) -> Self {
        let bytes = ctx.bytes;
        let mut window = Window {
            bytes: Vec::new(),
            base: range.start.min(bytes.len()),
            chunk: 1,
            cap: u64::MAX,
            failed: None,
            end: bytes.len(),
        };
        let first_sync = match bytes {
            Bytes::Slice(bytes) => frame::range_start(bytes, range.start),
            Bytes::Fetched(file) => {
                let (first, _) = file.fetch_sizes();
                window.chunk = first.max(1);
                window.cap = match file.index() {
                    Some(index) if range.end <= index.offset() => {
                        let last = index.entries().partition_point(|e| e.offset < range.end);
                        match last.checked_sub(1).map(|i| &index.entries()[i]) {
                            // The block's closing sync byte, and the byte after it that says
                            // whether that can open a block.
                            Some(e) => e.offset + e.size + 2,
                            None => range.end.saturating_add(2),
                        }
                    }
                    Some(_) => u64::MAX,
                    None => range.end.saturating_add(first),
                };
                window.first_sync(file, range.start, ctx.planned)
            }
        };
        RangeRead {
            decoder: decoder(first_sync, range.end),
            window,
        }
    }
}

impl Window {
    /// The window as the decoder's input.
    fn input(&self) -> Input<'_> {
        Input {
            bytes: &self.bytes,
            offset: self.base,
            end: self.base + self.bytes.len() as u64 >= self.end,
        }
    }

    /// Fetches from the range's start until a 0x00 (where the range read begins, spec 9.4)
    /// or the file's end.
    fn first_sync(&mut self, file: &dyn Fetched, start: u64, planned: bool) -> u64 {
        if start == 0 {
            return 0;
        }
        // A read by a plan may never read where its range starts: where the index says a
        // block opens (ranges of a file with an index are cut there), the byte there is
        // fetched alone to see that it is the sync byte it should be, rather than a first
        // fetch's worth.
        let listed = planned
            && file.index().is_some_and(|index| {
                let entries = index.entries();
                let at = entries.partition_point(|e| e.offset < start);
                index.start() == 0 && entries.get(at).is_some_and(|e| e.offset == start)
            });
        if listed && start < file.len() {
            match fetch_one(file, start..start + 1) {
                Ok(byte) if byte == [0] => {
                    self.bytes.clear();
                    self.base = start;
                    return start;
                }
                Ok(_) => {}
                Err(e) => {
                    self.failed = Some(e);
                    return start;
                }
            }
        }
        loop {
            if let Some(i) = memchr::memchr(0, &self.bytes) {
                return self.base + i as u64;
            }
            let have = self.base + self.bytes.len() as u64;
            if have >= self.end {
                return have;
            }
            // The bytes searched hold no 0x00: dropped, so that a long run without one is
            // never held whole.
            if let Err(e) = self.more(file, have) {
                self.failed = Some(e);
                return have;
            }
        }
    }

    /// Keeps the window from `from` on and fetches the next bytes after it: from `from` itself
    /// when it lies past the bytes fetched (a read by a plan of ranges jumped there), the
    /// bytes between never fetched.
    fn more(&mut self, file: &dyn Fetched, from: u64) -> std::io::Result<()> {
        self.more_until(file, from, None)
    }

    /// [`more`](Self::more), fetching nothing at or past `until` if given (and it lies past
    /// what is fetched).
    fn more_until(
        &mut self,
        file: &dyn Fetched,
        from: u64,
        until: Option<u64>,
    ) -> std::io::Result<()> {
        if from > self.base + self.bytes.len() as u64 {
            self.bytes.clear();
            self.base = from.min(self.end);
        }
        let have = self.base + self.bytes.len() as u64;
        let keep = from.clamp(self.base, have);
        self.bytes.drain(..(keep - self.base) as usize);
        self.base = keep;
        let mut end = have.saturating_add(self.chunk);
        if have < self.cap {
            end = end.min(self.cap);
        }
        if let Some(until) = until.filter(|&until| until > have) {
            end = end.min(until);
        }
        let end = end.max(have + 1).min(self.end);
        if end > have {
            self.bytes.extend_from_slice(&fetch_one(file, have..end)?);
            self.chunk = (self.chunk * 2).min(file.fetch_sizes().1.max(1));
        }
        Ok(())
    }
}

impl RangeRead {
    /// The decoder, to take what it read out of it.
    pub(crate) fn decoder(&mut self) -> &mut Decoder {
        &mut self.decoder
    }

    /// The decoder, to keep for another range.
    pub(crate) fn into_decoder(self) -> Decoder {
        self.decoder
    }

    /// Hands the decoder the dictionaries embedded before the range of a remote file: the
    /// dictionary blocks its index lists, or without one, all the bytes before the range.
    fn dictionaries(
        &mut self,
        searches: &Searches,
        file: &dyn Fetched,
        before: u64,
    ) -> std::io::Result<()> {
        if let Some(index) = file.index().filter(|index| index.start() == 0) {
            let limits = *self.decoder.limits();
            let listed: Vec<_> = index
                .entries()
                .iter()
                .take_while(|e| e.offset < before)
                .filter(|e| e.block_type == crate::BlockType::Dictionary)
                .collect();
            // Only as many as a reader keeps, each no larger than a frame it reads: an index
            // that lists more, or larger, is no reason to fetch them (the read of the bytes
            // before the range then decides).
            let frame = self.decoder.max_window() as u64;
            if listed.len() <= limits.max_dictionaries && listed.iter().all(|e| e.size < frame) {
                let ranges: Vec<_> = listed
                    .iter()
                    .map(|e| e.offset..(e.offset + e.size + 1).min(file.len()))
                    .collect();
                let pieces = match ranges.is_empty() {
                    true => Vec::new(),
                    false => file.fetch(&ranges)?,
                };
                let pieces: Vec<_> = ranges
                    .iter()
                    .zip(&pieces)
                    .map(|(r, bytes)| (r.start, bytes.as_slice()))
                    .collect();
                if self.decoder.add_dictionaries_in(&pieces) {
                    return Ok(());
                }
            }
        }
        // The bytes before the range, read as a stream reads them (a window of about a frame
        // at a time), for their dictionary blocks: on from where a search for an earlier range
        // stopped, if one did before this range.
        let end = before.min(file.len());
        let mut search = searches.take(before, self.decoder.limits());
        let mut window = Window {
            bytes: Vec::new(),
            base: search.position().min(end),
            chunk: file.fetch_sizes().0.max(1),
            cap: end,
            failed: None,
            // Not the end of the search's input: a later range's search goes on from here.
            end: file.len(),
        };
        let searched = loop {
            match search.step(window.input(), Want::Dictionaries) {
                Step::NeedInput { from } => {
                    if window.base + window.bytes.len() as u64 >= end {
                        break Ok(());
                    }
                    if let Err(e) = window.more(file, from) {
                        break Err(e);
                    }
                }
                Step::Block(_) | Step::Damaged(_) => {}
                _ => break Ok(()),
            }
        };
        // A search that failed to fetch is dropped.
        if searched.is_ok() {
            self.decoder.keep_dictionaries_of(&search);
            searches.give_back(search);
        }
        searched
    }

    /// Fetches the bytes before the data block just read, which opens at `at` where the
    /// range's reading began, that the time block describing it would lie in
    /// ([`Decoder::times_before`]): one request, of at most a time block's bound for its
    /// records (spec 8.8).
    fn times_before(&mut self, file: &dyn Fetched, at: u64) -> std::io::Result<()> {
        let items = self
            .decoder
            .block()
            .and_then(|b| b.info().items)
            .unwrap_or(0);
        let mut start = at.saturating_sub(crate::time::frame_bound(items));
        // An index that lists the block says what is before it, to fetch nothing else.
        if let Some(index) = file.index().filter(|index| at < index.offset()) {
            let entries = index.entries();
            let i = entries.partition_point(|e| e.offset < at);
            if entries.get(i).is_some_and(|e| e.offset == at) {
                match i.checked_sub(1).map(|i| &entries[i]) {
                    Some(e)
                        if e.block_type == crate::BlockType::Time && e.offset + e.size == at =>
                    {
                        start = start.max(e.offset)
                    }
                    _ => return Ok(()),
                }
            }
        }
        let end = (at + 1).min(file.len());
        let bytes = fetch_one(file, start..end)?;
        let input = Input {
            bytes: &bytes,
            offset: start,
            end: end == file.len(),
        };
        self.decoder.times_before(at, input);
        Ok(())
    }

    /// The next intact block, or the damage before it.
    /// Data blocks a window read passes over go into `passed` (offset, size, whether a time
    /// block described it), in order: they
    /// come before the block or damage returned.
    pub(crate) fn next_block<'s>(
        &'s mut self,
        ctx: Ctx<'s>,
        passed: &mut Vec<(u64, u64, bool)>,
    ) -> Option<Result<Block<'s>>> {
        if let Some(e) = self.window.failed.take() {
            return Some(Err(e.into()));
        }
        loop {
            let input = match ctx.bytes {
                Bytes::Slice(bytes) => Input {
                    bytes,
                    offset: 0,
                    end: true,
                },
                Bytes::Fetched(_) => self.window.input(),
            };
            let step = self.decoder.step(input, Want::Blocks);
            let fetched = match (step, ctx.bytes) {
                (Step::Block(_), Bytes::Slice(bytes)) => {
                    let block = self.decoder.block().expect("announced");
                    let input = Input {
                        bytes,
                        offset: 0,
                        end: true,
                    };
                    return Some(Ok(block.in_input(&input)));
                }
                (Step::Block(_), Bytes::Fetched(file)) => {
                    if let Some(at) = self.decoder.take_look_back() {
                        if let Err(e) = self.times_before(file, at) {
                            return Some(Err(e.into()));
                        }
                    }
                    let block = self.decoder.block().expect("announced");
                    return Some(Ok(block.in_input(&self.window.input())));
                }
                (Step::Damaged(e) | Step::Stopped(e), _) => return Some(Err(e)),
                (Step::NeedDictionaries { before }, Bytes::Slice(bytes)) => {
                    let mut search = ctx.searches.take(before, self.decoder.limits());
                    self.decoder.add_dictionaries_searched(&mut search, bytes);
                    ctx.searches.give_back(search);
                    Ok(())
                }
                (Step::NeedDictionaries { before }, Bytes::Fetched(file)) => {
                    self.dictionaries(ctx.searches, file, before)
                }
                (Step::NeedInput { from }, Bytes::Fetched(file)) => {
                    // A read by a plan needs its range's blocks, the closing sync byte of the
                    // last, and the byte after it (which says whether it can open a block).
                    let until = self
                        .decoder
                        .planned_stop()
                        .map(|stop| stop.saturating_add(2));
                    self.window.more_until(file, from, until)
                }
                (
                    Step::Passed {
                        offset,
                        size,
                        timed,
                    },
                    _,
                ) => {
                    passed.push((offset, size, timed));
                    Ok(())
                }
                // A slice is the whole input.
                (Step::NeedInput { .. } | Step::End, _) => return None,
            };
            if let Err(e) = fetched {
                return Some(Err(e.into()));
            }
        }
    }
}

/// Reads on in a range's `reader` until the blocks visited hold [`PART_BUDGET`] bytes of
/// payload (or the range ends), so that what a part holds (and waits in memory for the
/// calling thread) stays bounded by the budget plus one block, whatever the range's size
/// or the blocks' compression ratio. A part is cut only right after an intact block, never
/// inside damage, so the damage of one range stays in one part.
fn read_part<T>(
    value: T,
    reader: &mut RangeRead,
    ctx: Ctx<'_>,
    first: bool,
    work: &(impl RangeWork<T> + ?Sized),
) -> Part<T> {
    let mut part = Part::new(value);
    let mut seen_block = false;
    let passed = &mut Vec::new();
    part.report.untimed_blocks_passed += reader.decoder().take_untimed_planned();
    loop {
        let item = reader.next_block(ctx, passed);
        // Data blocks a window read passed over came before it.
        if !passed.is_empty() {
            part.passed += passed.len() as u64;
            part.report.untimed_blocks_passed += passed.iter().filter(|p| !p.2).count() as u64;
            passed.clear();
            part.tail.block(crate::BlockType::Data);
            seen_block = true;
            part.last_damaged = false;
        }
        let Some(item) = item else {
            break;
        };
        match item {
            Ok(block) => {
                part.report.add_block(block.info());
                part.tail.block(block.info().block_type);
                work.block(&mut part.value, &block);
                seen_block = true;
                part.last_damaged = false;
                part.payload += block.info().payload_size;
                if part.payload >= PART_BUDGET || work.part_full(&part.value) {
                    part.last = false;
                    break;
                }
            }
            Err(e) => match part.report.add_error(e) {
                Ok(()) => {
                    part.tail.damage();
                    part.first_damaged |= first && !seen_block;
                    part.last_damaged = true;
                }
                Err(e) => {
                    part.error = Some(e);
                    break;
                }
            },
        }
    }
    work.end_part(&mut part.value);
    part
}

/// Where a range read on several threads cuts its ranges, one at a time as its threads ask
/// for the next: about an eighth of a thread's share of the span, at least `min_split` bytes
/// (the caller's), and at most [`MAX_SPLIT`] or what holds about [`RANGE_PAYLOAD`] bytes of
/// payload at the compression ratio of the ranges read so far. A fetched file's ranges end
/// where a block in its index opens, so that no two ranges fetch the same block.
///
/// What a range yields ahead of the range the calling thread takes waits in memory, within a
/// bound of a few parts; a thread whose range holds more than that waits until its range is
/// the one taken. Ranges cut by bytes alone held 16 MiB of a zstd file, five times that of
/// payload, and a second thread then waited most of the time: 1.15x one thread's speed, where
/// ranges of about two parts' payload read at 1.6-1.85x (BENCHMARKS.md, "Ranges cut by
/// payload, the calling thread reads too").
struct Cuts<'a> {
    /// Where the next range starts.
    next: u64,
    /// Where the last range ends (past the input: every block after).
    end: u64,
    /// Where the input the span covers ends.
    stop: u64,
    /// A range's size from the span's size alone.
    size: u64,
    min_split: u64,
    index: Option<&'a Index>,
    /// Input bytes and payload bytes of the ranges read whole so far.
    bytes_read: u64,
    payload_read: u64,
    /// The last range was cut.
    done: bool,
}

/// The payload a range is cut to hold (see [`Cuts`]): two parts' worth.
const RANGE_PAYLOAD: u64 = 2 * PART_BUDGET;

impl<'a> Cuts<'a> {
    /// The cuts of `span` of an input of `len` bytes for `threads` threads, or `None` if the
    /// span is read whole, on one thread.
    fn new(
        span: &std::ops::Range<u64>,
        threads: usize,
        min_split: u64,
        len: u64,
        index: Option<&'a Index>,
    ) -> Option<Self> {
        let span = span.clone();
        let stop = span.end.min(len);
        if threads <= 1 || stop <= span.start {
            return None;
        }
        let size = ((stop - span.start) / (threads as u64 * SPLITS_PER_THREAD))
            .clamp(min_split, min_split.max(MAX_SPLIT));
        if stop - span.start <= size {
            return None;
        }
        Some(Cuts {
            next: span.start,
            end: span.end,
            stop,
            size,
            min_split,
            index,
            bytes_read: 0,
            payload_read: 0,
            done: false,
        })
    }

    /// The next range, or `None` after the last.
    fn next_range(&mut self) -> Option<std::ops::Range<u64>> {
        if self.done {
            return None;
        }
        let start = self.next;
        let mut size = self.size;
        if self.payload_read > 0 {
            let fits = (RANGE_PAYLOAD as u128 * self.bytes_read as u128 / self.payload_read as u128)
                .min(u64::MAX as u128) as u64;
            size = size.min(fits);
        }
        let mut end = start.saturating_add(size.max(self.min_split).max(1));
        if let Some(index) = self.index {
            end = index
                .block_at_or_after(end)
                .map_or(self.stop, |e| e.offset.max(end));
        }
        if end >= self.stop {
            self.done = true;
            end = self.end;
        }
        self.next = end;
        Some(start..end)
    }

    /// Counts a range read whole, and the payload of its blocks.
    fn read(&mut self, range: &std::ops::Range<u64>, payload: u64) {
        self.bytes_read += range.end.min(self.stop).saturating_sub(range.start);
        self.payload_read += payload;
    }
}

/// The ranges' results, handed from the workers to the calling thread.
struct Shared<'a, T> {
    /// Where the ranges are cut.
    cuts: Cuts<'a>,
    /// The next range to read: how many were cut.
    next: usize,
    /// The range the calling thread takes parts of (ranges before it are taken whole).
    taken: usize,
    /// Parts waiting to be taken, by range and then in order.
    done: BTreeMap<(usize, usize), Part<T>>,
    /// What the parts waiting weigh ([`Part::payload`]).
    waiting: u64,
    /// Values the sink gave back, to start parts with.
    spare: Vec<T>,
    /// Set when the calling thread stops early or a worker failed.
    stop: bool,
}

impl<T> Shared<'_, T> {
    /// How many parts may wait now: `bound`, and the schedule's slack beyond it while the
    /// parts waiting hold less payload than `bound` parts of [`PART_BUDGET`] and the slack's
    /// budget (see [`Slack`]).
    fn bound(&self, bound: usize, slack: Slack) -> usize {
        if self.waiting < (bound as u64 * PART_BUDGET).saturating_add(slack.payload) {
            bound + slack.parts
        } else {
            bound
        }
    }

    /// Whether a worker with a part of `range` ready must wait before handing it over: the
    /// parts waiting are at the bound, or, for the range the calling thread takes now (whose
    /// worker must never wait on the others, or all could wait), two of its own are.
    fn must_wait(&self, range: usize, bound: usize) -> bool {
        if self.stop {
            return false;
        }
        if range == self.taken {
            self.done.range((range, 0)..(range + 1, 0)).count() >= 2
        } else {
            self.done.len() >= bound
        }
    }
}

/// The scheduler of a range read on several threads: ranges cut as threads ask for them
/// ([`Cuts`]), read by worker threads and by the calling thread, and their parts taken by the
/// calling thread in order. Parts ahead of the range being taken wait within `bound` (and the
/// slack, while it lasts).
struct Schedule<'a, T> {
    shared: Mutex<Shared<'a, T>>,
    changed: Condvar,
    /// Parts waiting for the calling thread, at most (and two more of the range it takes):
    /// two a thread.
    bound: usize,
    slack: Slack,
}

/// Parts that may wait beyond a schedule's bound while those waiting weigh less than `payload`
/// bytes beyond the bound's parts of [`PART_BUDGET`]. Counted in what parts weigh, the slack
/// cannot multiply what a file can make a reader hold: parts of a few large blocks (a crafted
/// file's 64 MiB payloads, which zstd packs into a few KiB each) fill the budget at once and
/// leave the bound as it was, while parts of the usual [`PART_BUDGET`] use all of it.
#[derive(Clone, Copy, Default)]
pub(crate) struct Slack {
    pub(crate) parts: usize,
    pub(crate) payload: u64,
}

/// A range a thread reads: its number, bytes and reader, the payload of its parts so far,
/// and the number of its next part.
struct Reading<R> {
    index: usize,
    range: std::ops::Range<u64>,
    reader: R,
    payload: u64,
    seq: usize,
}

impl<'a, T> Schedule<'a, T> {
    fn new(cuts: Cuts<'a>, threads: usize, slack: Slack) -> Self {
        Schedule {
            shared: Mutex::new(Shared {
                cuts,
                next: 0,
                taken: 0,
                done: BTreeMap::new(),
                waiting: 0,
                spare: Vec::new(),
                stop: false,
            }),
            changed: Condvar::new(),
            bound: 2 * threads,
            slack,
        }
    }

    /// How many parts may wait now (see [`Shared::bound`]).
    fn bound(&self, s: &Shared<'a, T>) -> usize {
        s.bound(self.bound, self.slack)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared<'a, T>> {
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wait<'g>(
        &self,
        guard: std::sync::MutexGuard<'g, Shared<'a, T>>,
    ) -> std::sync::MutexGuard<'g, Shared<'a, T>> {
        self.changed.wait(guard).unwrap_or_else(|e| e.into_inner())
    }

    /// Ends the read: every thread stops at its next step.
    fn stop(&self) {
        self.lock().stop = true;
        self.changed.notify_all();
    }

    /// A value to start a part with: one the sink gave back, or a new one.
    fn spare(&self) -> T
    where
        T: Default,
    {
        self.lock().spare.pop().unwrap_or_default()
    }

    /// Keeps a value the sink gave back, to start a later part with.
    fn recycle(&self, value: T) {
        self.lock().spare.push(value);
    }

    /// A worker thread's loop: claims the next range once the bound lets it, reads it part by
    /// part with `read` (a reader made by `start`), and hands each part over, until no range is
    /// left or the read stops.
    fn work<R>(
        &self,
        start: impl Fn(std::ops::Range<u64>) -> R,
        mut read: impl FnMut(T, &mut R, bool) -> Part<T>,
        end: impl Fn(R),
    ) where
        T: Default,
    {
        let _guard = StopOnUnwind(self);
        loop {
            let claimed = {
                let mut s = self.lock();
                while !s.stop && s.next >= s.taken + self.bound(&s) {
                    s = self.wait(s);
                }
                if s.stop {
                    return;
                }
                s.cuts.next_range().map(|range| {
                    s.next += 1;
                    (s.next - 1, range)
                })
            };
            let Some((index, range)) = claimed else {
                // No range is left to cut: the calling thread may be waiting to learn that the
                // one it asks for will never come.
                self.changed.notify_all();
                return;
            };
            let mut reading = Reading {
                index,
                reader: start(range.clone()),
                range,
                payload: 0,
                seq: 0,
            };
            loop {
                let part = read(self.spare(), &mut reading.reader, reading.seq == 0);
                let last = part.last;
                let mut s = self.lock();
                while s.must_wait(index, self.bound(&s)) {
                    s = self.wait(s);
                }
                if s.stop {
                    return;
                }
                Self::hand_over(&mut s, &mut reading, part);
                drop(s);
                self.changed.notify_all();
                if last {
                    end(reading.reader);
                    break;
                }
            }
        }
    }

    /// Puts the next part of `reading` among those waiting.
    fn hand_over<R>(s: &mut Shared<'a, T>, reading: &mut Reading<R>, part: Part<T>) {
        reading.payload += part.payload;
        if part.last {
            s.cuts.read(&reading.range, reading.payload);
        }
        s.waiting += part.payload;
        s.done.insert((reading.index, reading.seq), part);
        reading.seq += 1;
    }

    /// The calling thread's next part, of range `index`: the part numbered `seq`, once it is
    /// ready; meanwhile the calling thread reads parts of a range of its own (`own`), claimed
    /// as workers claim theirs, rather than wait. `None` once the read stopped, or every
    /// range cut was taken.
    fn take<R>(
        &self,
        index: usize,
        seq: usize,
        own: &mut Option<Reading<R>>,
        start: impl Fn(std::ops::Range<u64>) -> R,
        mut read: impl FnMut(T, &mut R, bool) -> Part<T>,
        end: impl Fn(R),
    ) -> Option<Part<T>>
    where
        T: Default,
    {
        let mut s = self.lock();
        if s.taken != index {
            // The worker of this range may be waiting on the bound that holds for the others:
            // it may go on now (see `must_wait`).
            s.taken = index;
            self.changed.notify_all();
        }
        let part = loop {
            if let Some(part) = s.done.remove(&(index, seq)) {
                s.waiting -= part.payload;
                break Some(part);
            }
            // Stopped, or read to the end: every range cut is taken.
            if s.stop || (s.cuts.done && index >= s.next) {
                break None;
            }
            // A part of its own range, if that is the one taken or the parts waiting are
            // within the bound; or a range of its own to read.
            let mut claimed = None;
            let bound = self.bound(&s);
            if own.is_none() && s.next < s.taken + bound {
                claimed = s.cuts.next_range().map(|range| (s.next, range));
                s.next += usize::from(claimed.is_some());
            }
            let go_on = claimed.is_some()
                || own
                    .as_ref()
                    .is_some_and(|o| o.index == index || s.done.len() < bound);
            if !go_on {
                s = self.wait(s);
                continue;
            }
            drop(s);
            if let Some((index, range)) = claimed {
                *own = Some(Reading {
                    index,
                    reader: start(range.clone()),
                    range,
                    payload: 0,
                    seq: 0,
                });
            }
            let reading = own.as_mut().expect("a range of its own");
            let part = read(self.spare(), &mut reading.reader, reading.seq == 0);
            let last = part.last;
            s = self.lock();
            Self::hand_over(&mut s, reading, part);
            if last {
                if let Some(done) = own.take() {
                    end(done.reader);
                }
            }
            self.changed.notify_all();
        };
        drop(s);
        self.changed.notify_all();
        part
    }
}

/// Marks the range read stopped if a thread unwinds, so no other waits for a result that will
/// never come.
struct StopOnUnwind<'s, 'a, T>(&'s Schedule<'a, T>);

impl<T> Drop for StopOnUnwind<'_, '_, T> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.stop();
        }
    }
}

/// How a range read reads: the blocks opening in which bytes, on how many threads, in ranges of
/// at least how many bytes, and with decoders made how (for a range's first sync byte and end),
/// with the reader's limits and dictionaries.
pub(crate) struct Plan<'a> {
    /// The bytes whose blocks are read (`0..u64::MAX`: all).
    pub span: std::ops::Range<u64>,
    pub threads: usize,
    pub min_split: u64,
    pub decoder: &'a (dyn Fn(u64, u64) -> Decoder + Sync),
    /// What is done with each damaged range once it went to the sink.
    pub on_damage: &'a OnDamage,
    /// Whether the decoders made follow plans of ranges (a window read by a time index), and
    /// so may never read where their range starts.
    pub planned: bool,
}

/// Reads every block of `bytes` as `plan` says; see
/// [`ReaderBuilder::read_ranges`](crate::ReaderBuilder::read_ranges). Returns the report of what was read,
/// and the error that stopped the read if one did (a header of a newer version): the blocks
/// before it went to the sink, as with one reader.
pub(crate) fn read<T, W, K>(
    plan: &Plan<'_>,
    bytes: Bytes<'_>,
    work: &W,
    sink: &mut K,
) -> Result<(Report, Option<Error>)>
where
    T: Default + Send,
    W: RangeWork<T> + ?Sized,
    K: RangeSink<T> + ?Sized,
{
    let index = match bytes {
        // Fetched ranges are cut where blocks open, so that no two fetch the same block.
        Bytes::Fetched(file) => file.index(),
        Bytes::Slice(_) => None,
    };
    let searches = Searches::default();
    let ctx = Ctx {
        bytes,
        searches: &searches,
        planned: plan.planned,
    };
    // The ranges' decoders load each dictionary into zstd once between them.
    let loaded = Arc::<Loaded>::default();
    let decoder = |first_sync, stop| {
        let mut decoder = (plan.decoder)(first_sync, stop);
        decoder.share_loaded(&loaded);
        decoder
    };
    let range_read = |range: std::ops::Range<u64>| RangeRead::new(decoder, ctx, range);
    let mut merged = Merged::new(plan.on_damage);
    let cuts = Cuts::new(&plan.span, plan.threads, plan.min_split, bytes.len(), index);
    let Some(cuts) = cuts else {
        let mut spare = None;
        let mut reader = range_read(plan.span.clone());
        let mut first = true;
        loop {
            let value = spare.take().unwrap_or_default();
            let part = read_part(value, &mut reader, ctx, first, work);
            first = false;
            let last = part.last;
            match merged.take(part, sink) {
                Ok(ControlFlow::Continue(())) => {}
                Ok(ControlFlow::Break(())) => return Ok((merged.finish(bytes.len(), sink)?, None)),
                Err(e) => return Ok((merged.finish(bytes.len(), sink)?, Some(e))),
            }
            spare = sink.recycle();
            if last {
                return Ok((merged.finish(bytes.len(), sink)?, None));
            }
        }
    };
    let threads = plan.threads;
    // A range read's sink works on the threads that read: nothing runs behind them.
    let schedule = Schedule::new(cuts, threads, Slack::default());
    let read = |value, reader: &mut RangeRead, first| read_part(value, reader, ctx, first, work);
    let stopped = std::thread::scope(|scope| {
        // The calling thread is the last of `threads`: it reads ranges too while the part it
        // needs next is not ready, rather than wait (as a pull reader's thread does; with all
        // `threads` workers besides it, a sink that does much with each part had to share the
        // cores with them).
        let workers: Vec<_> = (1..threads)
            .map(|_| scope.spawn(|| schedule.work(range_read, read, drop)))
            .collect();
        let _guard = StopOnUnwind(&schedule);
        let mut stopped = None;
        let mut own = None;
        'ranges: for index in 0.. {
            for seq in 0.. {
                let Some(part) = schedule.take(index, seq, &mut own, range_read, read, drop) else {
                    break 'ranges;
                };
                let last = part.last;
                let taken = merged.take(part, sink);
                if let Some(value) = sink.recycle() {
                    schedule.recycle(value);
                }
                match taken {
                    Ok(ControlFlow::Continue(())) => {}
                    Ok(ControlFlow::Break(())) => break 'ranges,
                    Err(e) => {
                        stopped = Some(e);
                        break 'ranges;
                    }
                }
                if last {
                    break;
                }
            }
        }
        schedule.stop();
        // Join each worker by hand: `scope` returns once the workers' closures are done,
        // but before their threads have run their thread-local destructors and exited,
        // so memory those free would still be live after `read` returned (LeakSanitizer
        // saw it: fuzz/regressions/scan/worker-exit-after-return). A join waits for the
        // thread's exit; a worker's panic goes on to the caller, as `scope` would send it.
        for worker in workers {
            if let Err(panic) = worker.join() {
                std::panic::resume_unwind(panic);
            }
        }
        stopped
    });
    Ok((merged.finish(bytes.len(), sink)?, stopped))
}

/// The report of the ranges taken so far.
struct Merged<'a> {
    on_damage: &'a OnDamage,
    report: Report,
    /// What decides how the input ends, for the ranges taken so far.
    tail: Tail,
    /// The last range taken ended with damage that the next may continue.
    open: bool,
    /// Damaged ranges already given to the sink.
    sunk: usize,
    /// The damage policy ended the read.
    ended: bool,
}

impl<'a> Merged<'a> {
    fn new(on_damage: &'a OnDamage) -> Self {
        Merged {
            on_damage,
            report: Report::default(),
            tail: Tail::default(),
            open: false,
            sunk: 0,
            ended: false,
        }
    }

    /// Adds the next range's result; stops at an error that ends the range read.
    fn take<T, K: RangeSink<T> + ?Sized>(
        &mut self,
        part: Part<T>,
        sink: &mut K,
    ) -> Result<ControlFlow<()>> {
        let Part {
            value,
            report,
            tail,
            first_damaged,
            last_damaged,
            last: _,
            payload: _,
            passed,
            error,
        } = part;
        let had_damage = !report.damaged.is_empty();
        let had_blocks = report.blocks.total() > 0;
        let mut damaged = report.damaged.into_iter().peekable();
        let last = self.report.damaged.last_mut();
        if let (true, true, Some(last)) = (self.open, first_damaged, last) {
            // One damaged range seen from both sides of the cut (their ends may overlap in a
            // run of zeros); but unreadable bytes and damage are never one range (spec 9.1).
            if let Some(first) = damaged.next_if(|first| first.is_damage() == last.is_damage()) {
                last.range.end = last.range.end.max(first.range.end);
            }
        }
        self.report.damaged.extend(damaged);
        self.tail.then(&tail);
        let r = &mut self.report;
        r.blocks.add_counts(&report.blocks);
        r.records += report.records;
        r.untimed_blocks_passed += report.untimed_blocks_passed;
        r.block_bytes += report.block_bytes;
        // A range with neither blocks nor damage (no sync byte opens in it) changes nothing.
        if had_blocks || had_damage || passed > 0 {
            self.open = last_damaged;
        }
        let flow = sink.part(value);
        let settled = self.report.damaged.len() - usize::from(self.open);
        if self.sink_damage(settled, sink)?.is_break() || flow.is_break() {
            return Ok(ControlFlow::Break(()));
        }
        match error {
            Some(e) => Err(e),
            None => Ok(ControlFlow::Continue(())),
        }
    }

    /// Gives the sink the damaged ranges up to `settled` it has not had, each then met as
    /// the damage policy says.
    fn sink_damage<T, K: RangeSink<T> + ?Sized>(
        &mut self,
        settled: usize,
        sink: &mut K,
    ) -> Result<ControlFlow<()>> {
        while self.sunk < settled && !self.ended {
            self.sunk += 1;
            let damage = &self.report.damaged[self.sunk - 1];
            if sink.damage(damage).is_break() {
                return Ok(ControlFlow::Break(()));
            }
            match self.on_damage.meet(damage) {
                Ok(ControlFlow::Continue(())) => {}
                Ok(ControlFlow::Break(())) => {
                    // The read ends here: no later range goes to the sink or the policy.
                    self.ended = true;
                    return Ok(ControlFlow::Break(()));
                }
                Err(e) => {
                    self.ended = true;
                    return Err(e);
                }
            }
        }
        Ok(ControlFlow::Continue(()))
    }

    /// The report, once every damaged range went to the sink.
    fn finish<T, K: RangeSink<T> + ?Sized>(mut self, len: u64, sink: &mut K) -> Result<Report> {
        let _ = self.sink_damage(self.report.damaged.len(), sink)?;
        self.report.len = len;
        self.report.ending = self.tail.ending(self.report.len);
        Ok(self.report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parts that wait for a calling thread that takes none, with one worker whose every
    /// range yields one part of `payload` bytes: the most the schedule lets wait. Waits until
    /// `expected` parts wait (or ten seconds), then a while longer for any beyond them.
    fn parts_waiting(payload: u64, slack: Slack, expected: usize) -> (usize, u64) {
        let len = 1 << 30;
        let cuts = Cuts::new(&(0..len), 2, 1, len, None).expect("cut");
        let schedule = Schedule::new(cuts, 2, slack);
        let part = |(): (), _: &mut (), _: bool| Part {
            payload,
            ..Part::new(())
        };
        std::thread::scope(|scope| {
            scope.spawn(|| schedule.work(|_| (), part, drop));
            let waiting = || {
                let s = schedule.lock();
                (s.done.len(), s.waiting)
            };
            let start = std::time::Instant::now();
            while waiting().0 < expected && start.elapsed().as_secs() < 10 {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
            let seen = waiting();
            schedule.stop();
            seen
        })
    }

    #[test]
    fn a_slack_counted_in_payload_lets_usual_parts_wait_and_large_ones_not() {
        // A pull reader's: twelve parts, while those waiting hold under 12 MiB beyond the bound's.
        let slack = pull::READER_SLACK;
        assert_eq!((slack.parts, slack.payload), (12, 12 * PART_BUDGET));
        // Two threads: four parts (two a thread), the one of the range being taken among them.
        let part = PART_BUDGET;
        assert_eq!(parts_waiting(part, Slack::default(), 4), (4, 4 * part));
        // Parts of the usual payload use the slack whole.
        assert_eq!(parts_waiting(part, slack, 16), (16, 16 * part));
        let small = PART_BUDGET / 4;
        assert_eq!(parts_waiting(small, slack, 16), (16, 16 * small));
        // Parts of a crafted file's largest blocks (64 MiB of payload each) fill the slack's
        // budget with the first: as many wait as without a slack.
        let large = 64 << 20;
        assert_eq!(parts_waiting(large, slack, 4), (4, 4 * large));
        // Parts between the two: as many as stay under the budget (the bound's four parts of
        // 1 MiB and the slack's 12 MiB), and one more.
        let middle = 3 * PART_BUDGET;
        assert_eq!(parts_waiting(middle, slack, 6), (6, 6 * middle));
        let middle = 2 * PART_BUDGET;
        assert_eq!(parts_waiting(middle, slack, 8), (8, 8 * middle));
    }
}
