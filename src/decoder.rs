//! The sans-I/O core of every reader: bytes in, blocks and damage out.
//!
//! A [`Decoder`] reads a file as spec section 9.1 says, from whatever window of the input its
//! driver holds. It does no I/O and keeps no input: each call to [`Decoder::step`] is given the
//! bytes the driver has (an [`Input`]: the bytes, the absolute offset of the first, and whether
//! the input ends with them) and answers with one [`Step`]:
//!
//! - [`Step::Block`]: an intact block, decoded into the decoder's buffer; [`Decoder::block`]
//!   borrows it until the next call.
//! - [`Step::Damaged`]: a damaged (or unreadable) range, merged: consecutive damage with no
//!   intact block between is one range, reported once its end is known (the sync byte that
//!   opens the next intact block, or the end of the input).
//! - [`Step::NeedInput`]: the window ends inside what may be a sound block. The driver keeps
//!   the bytes from the offset it names (dropping those before), reads more, and calls again;
//!   or, at the end of the input, calls again with [`Input::end`] set. The window never has to
//!   hold more than [`Decoder::max_window`] bytes.
//! - [`Step::NeedDictionaries`]: a range read (9.4) met a block that needs a dictionary it does
//!   not know, or a dictionary of its own: the dictionaries embedded before the range come
//!   first, so the driver hands over the input from its start
//!   ([`Decoder::add_dictionaries_before`]) and calls again.
//! - [`Step::Stopped`]: a header of a newer format version (8.1); nothing more is read.
//! - [`Step::End`]: the input (or the range) ends here.
//!
//! The slice reader, the mapped reader, the stream reader, the follower, range reads and the
//! worker threads are drivers of this one decoder. Limits ([`Limits`]) are checked before the
//! cost they guard: a length field before the block is read or buffered, a declared size before
//! decompressing, a dictionary's count and bytes before it is kept.
//!
//! ADVICE FOR HACKERS: the position is an absolute offset (`at`), always a sync byte (or the
//! input's start) where the next frame is looked for. Damage is *noted* (its start and cause)
//! and *taken* (reported, with its end) only when the next intact block or the end is found;
//! a block found while damage is pending is held (`ready`) and returned on the next call, so
//! that nothing is decoded twice. A dictionary block is kept when it is decoded, before
//! anything is reported for it: the blocks after it need it, and one the decoder cannot keep is
//! reported in its place.
//!
//! ```
//! use cobsfile::{Decoder, Input, ReaderBuilder, Step, Want};
//!
//! let mut writer = cobsfile::Writer::new(Vec::new())?;
//! writer.write_record(b"hello")?;
//! let file = writer.finish()?;
//!
//! // Feed the file a byte at a time, as a driver reading a slow stream would.
//! let mut decoder = ReaderBuilder::new().decoder();
//! let (mut start, mut end) = (0, 0);
//! let mut records = Vec::new();
//! loop {
//!     let input = Input { bytes: &file[start..end], offset: start as u64, end: end == file.len() };
//!     match decoder.step(input, Want::Blocks) {
//!         Step::Block(_) => {
//!             records.extend(decoder.block().unwrap().records().map(<[u8]>::to_vec))
//!         }
//!         Step::NeedInput { from } => {
//!             start = from as usize;
//!             end = (end + 1).min(file.len());
//!         }
//!         Step::End => break,
//!         other => panic!("{other:?}"),
//!     }
//! }
//! assert_eq!(records, [b"hello".to_vec()]);
//! # Ok::<(), cobsfile::Error>(())
//! ```

use std::ops::Range;
use std::sync::Arc;

use crate::block::{
    self, BlockType, Body, Entries, Place, Records, Scratch, Spares, FORMAT_VERSION,
};
use crate::codec::{self, Decompressor, Dictionary, Loaded, Refused};
use crate::ending::{Ending, Tail};
use crate::error::{Cause, Error};
use crate::frame::{self, Check, Found, Frame};
use crate::limits::Limits;
use crate::time::{self, Pairing, Window};
use crate::varint;

/// Where a block is and what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockInfo {
    /// Absolute offset of the block's opening sync byte.
    pub offset: u64,
    /// What the block holds.
    pub block_type: BlockType,
    /// Bytes after the opening sync byte up to and including the closing one.
    pub size: u64,
    /// Records in a data block, entries in a metadata or index block.
    pub items: Option<u64>,
    /// How the payload is stored: `"none"`, `"zstd"`, `"zstd+dict"`, `"zstd-lines"` or
    /// `"zstd+dict-lines"` (see [`codec_name`]).
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
    times: Option<&'a [i64]>,
    window: Option<Window>,
    frame: Option<&'a [u8]>,
}

impl<'a> Block<'a> {
    /// A block of `info` whose payload is `payload`.
    pub(crate) fn new(
        info: BlockInfo,
        version: Option<i64>,
        payload: &'a [u8],
        times: Option<&'a [i64]>,
        window: Option<Window>,
    ) -> Self {
        Block {
            info,
            version,
            payload,
            times,
            window,
            frame: None,
        }
    }

    /// The block with its bytes as the input holds them, `input` (the bytes its driver
    /// holds), when they lie in it.
    pub(crate) fn in_input(mut self, input: &Input<'a>) -> Self {
        let from = (self.info.offset + 1).checked_sub(input.offset);
        let to = (self.info.offset + self.info.size).checked_sub(input.offset);
        if let (Some(from), Some(to)) = (from, to) {
            if let (Ok(from), Ok(to)) = (usize::try_from(from), usize::try_from(to)) {
                self.frame = input.bytes.get(from..to);
            }
        }
        self
    }

    /// The block's bytes between its sync bytes, as the file holds them (what a seal's leaf
    /// hashes, spec 8.10), when the reader holds them: blocks of range reads
    /// ([`ReaderBuilder::read_ranges`](crate::ReaderBuilder::read_ranges), and a
    /// [`Remote`](crate::Remote)'s).
    pub fn frame(&self) -> Option<&'a [u8]> {
        self.frame
    }

    /// Where the block is and what it holds.
    pub fn info(&self) -> &BlockInfo {
        &self.info
    }

    /// The block's payload as stored (after the codec, before the CRC).
    pub fn payload(&self) -> &'a [u8] {
        self.payload
    }

    /// The records of a data block (none for other types): in a read of a time window
    /// ([`ReaderBuilder::window`](crate::ReaderBuilder::window)), those whose time lies in
    /// it, so that [`info`](Self::info)'s `items` may count more. [`Records::time`] gives
    /// the time of each.
    pub fn records(&self) -> Records<'a> {
        match self.info.block_type {
            BlockType::Data => Records::timed(self.payload, self.times, self.window),
            _ => Records::new(&[]),
        }
    }

    /// The entries of a metadata block (none for other types). Keys are checked UTF-8.
    pub fn entries(&self) -> impl Iterator<Item = (&'a str, &'a [u8])> {
        let payload = match self.info.block_type {
            BlockType::Metadata => self.payload,
            _ => &[],
        };
        Entries::new(payload).map(|(k, v)| (std::str::from_utf8(k).unwrap_or_default(), v))
    }

    /// The format version a header block declares.
    pub fn version(&self) -> Option<i64> {
        self.version
    }

    /// The event times of a data block's records, one per record in order, if a time block
    /// describes the block (spec 8.8); for a time block, the times it gives. In nanoseconds
    /// since the Unix epoch.
    pub fn times(&self) -> Option<&'a [i64]> {
        self.times
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
    /// Time blocks that describe no data block (spec 8.8): followed by a block of another
    /// type or another number of records, or by damage.
    pub unpaired_time_blocks: u64,
    /// Data blocks a window read passed over because their times miss the window.
    pub outside_window_blocks: u64,
    /// Data blocks a window read passed over because no time block describes them: their
    /// records have no times, so none is in any window (spec 9.9).
    pub untimed_blocks_passed: u64,
}

/// The bytes a driver holds: `bytes` is the input from the absolute offset `offset` on.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    /// The bytes held.
    pub bytes: &'a [u8],
    /// The absolute offset of `bytes[0]`.
    pub offset: u64,
    /// No bytes follow `bytes`: the input ends with them.
    pub end: bool,
}

/// Which blocks a [`Decoder`] decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Want {
    /// Every block, each checked in full (a full read, spec 9.1).
    Blocks,
    /// Header, metadata and dictionary blocks; the others are skipped by their length, their
    /// frames checked as a skipping scan does (spec 9.3).
    Metadata,
    /// Dictionary blocks only, every frame checked in full (a range read's search of the
    /// bytes before its range).
    #[doc(hidden)]
    Dictionaries,
}

impl Want {
    fn check(self) -> Check {
        match self {
            Want::Blocks | Want::Dictionaries => Check::Full,
            Want::Metadata => Check::Landing,
        }
    }

    fn decodes(self, block_type: BlockType) -> bool {
        match self {
            Want::Blocks => true,
            Want::Metadata => decoded_by_scans(block_type),
            Want::Dictionaries => block_type == BlockType::Dictionary,
        }
    }
}

/// What a [`Decoder`] found; see the module documentation.
#[derive(Debug)]
#[non_exhaustive]
pub enum Step {
    /// An intact block; [`Decoder::block`] borrows it until the next call.
    Block(BlockInfo),
    /// A damaged or unreadable range ([`Error::Damaged`]); reading goes on after it.
    Damaged(Error),
    /// A header of a newer format version ([`Error::UnsupportedVersion`]): nothing more is
    /// read.
    Stopped(Error),
    /// Keep the input from the absolute offset `from` on, add the bytes that follow, and call
    /// again (with [`Input::end`] set if none follow).
    NeedInput {
        /// The first byte the decoder still needs.
        from: u64,
    },
    /// Call [`Decoder::add_dictionaries_before`] with the input from its start, at least up
    /// to `before`, then call again.
    NeedDictionaries {
        /// The offset the bytes to search end at (exclusive).
        before: u64,
    },
    /// The input, or the range being read, ends here.
    End,
    /// A data block passed over without decoding it, only in a read of a time window
    /// ([`Decoder::set_window`], spec 9.9): its time block says none of its records is in the
    /// window, or it has none (`timed` false). Its frame was checked in full, as in a full
    /// read (spec 6), so that a window read meets every block a full read meets.
    Passed {
        /// The absolute offset of the block's opening sync byte.
        offset: u64,
        /// The block's size (spec 6).
        size: u64,
        /// Whether a time block described it.
        timed: bool,
    },
}

/// A frame found, or the end of the input or range.
pub(crate) enum Event {
    /// Damage from the absolute offset `start`.
    Damage { start: u64, cause: Cause },
    /// A frame; positions in the input's bytes.
    Frame(Frame),
    /// The input or range ends at the absolute offset `end`.
    End { end: u64 },
    /// More input is needed.
    NeedInput,
    /// The range ends here, and the read goes on at the next range of its plan
    /// ([`Decoder::set_plan`]).
    Jump,
}

/// What becomes of a frame once it is decoded (or known to need no decoding).
pub(crate) enum Settled {
    /// It failed to decode: damage, merged with the damage around it.
    Merged,
    /// Damage before it is to be reported first; the frame comes next.
    Damage(Error),
    /// An intact block, decoded (or `None`: not decoded, as the caller wanted).
    Done(Option<(BlockInfo, Body)>),
}

/// The sans-I/O reader; see the module documentation.
#[derive(Debug)]
pub struct Decoder {
    limits: Limits,
    max_length: u64,
    /// Where the next frame is looked for: a sync byte, or the input's start.
    at: u64,
    /// Start and cause of damage noted but not yet reported.
    damage: Option<(u64, Cause)>,
    /// Where the first damaged piece of `damage` ends: where a reader of one thread is when
    /// it notes it (see [`first_piece_end`](Self::first_piece_end)).
    damage_first_end: u64,
    /// `damage_first_end` of the range reported last.
    reported_first_end: u64,
    /// Absolute offsets `(sync, end)`: the bytes after the sync byte up to `end` hold no 0x00,
    /// as a full check of the frame at `sync` found before it needed more input.
    zero_free: Option<(u64, u64)>,
    /// Set once a newer version's header was met: nothing more is read.
    stopped: bool,
    /// The header of a newer version that stopped the read, decoded, for a driver that
    /// settles it elsewhere ([`take_stopping`](Self::take_stopping)).
    stopping: Option<(BlockInfo, Body)>,
    /// The absolute offset at or after which no block opens for this decoder (a range read).
    stop: u64,
    /// A range read's first sync byte while the bytes before it are not yet searched for
    /// dictionaries.
    prefix: Option<u64>,
    /// The last decoded block body.
    scratch: Scratch,
    /// Where its buffers come from and go back to.
    spares: Arc<Spares>,
    /// The zstd context and the dictionaries known so far.
    decompressor: Decompressor,
    /// The dictionaries known, in the order they were added, each with the offset of the
    /// block that embeds it (`None`: given to the reader), when `collect` is set: to start
    /// worker threads that know the same, to hand a range the dictionaries before it, and to
    /// forget those of blocks a rewind goes back before.
    pub(crate) dictionaries: Vec<(Dictionary, Option<u64>)>,
    collect: bool,
    /// A block decoded while damage was pending: returned on the next call, after the damage.
    ready: Option<(BlockInfo, Body)>,
    /// The block the last [`Step::Block`] announced.
    current: Option<(BlockInfo, Body)>,
    /// The absolute offset of the closing sync byte of the last block returned, or where
    /// reading started: everything before it is final (a follower's resume point, spec 9.7).
    resume: u64,
    stats: Stats,
    /// What decides how the input ends: the blocks returned and the damage reported so far.
    tail: Tail,
    /// Where the input ended, once the decoder got there (and returned nothing since).
    ended: Option<u64>,
    /// Some blocks were skipped by their length (a skipping scan): the tail is not the file's.
    skipped: bool,
    /// Time blocks and the data blocks they describe.
    pairing: Pairing,
    /// Where reading began without the block before it (a range, a seek), while nothing was
    /// settled since: a data block that opens there may be described by a time block before.
    look_from: Option<u64>,
    /// A data block just settled that opens at `look_from`, undescribed: the bytes before it
    /// may hold its time block ([`times_before`](Self::times_before)).
    look_back: Option<u64>,
    /// The times whose records a read returns (spec 9.9): data blocks none of whose records
    /// can be in it are passed over undecoded.
    window: Option<Window>,
    /// A block passed over while damage was pending: announced on the next call, after the
    /// damage.
    passed: Option<Step>,
    /// The byte ranges still to read after the current one, in order, when the read follows
    /// a plan ([`set_plan`](Self::set_plan)).
    plan: std::collections::VecDeque<Range<u64>>,
    planned: bool,
    /// Data blocks the plan left out for want of times, until a range read takes them.
    untimed_planned: u64,
}

impl Drop for Decoder {
    /// Leaves its buffers to a later decoder of the same options (`Spares`).
    fn drop(&mut self) {
        self.spares.keep_scratch(std::mem::take(&mut self.scratch));
    }
}

impl Decoder {
    /// A decoder of a whole input within `limits`, which knows no dictionary but those the
    /// input embeds (give it others with [`give_dictionary`](Self::give_dictionary)).
    /// [`ReaderBuilder::decoder`](crate::ReaderBuilder::decoder) makes one with a builder's
    /// limits and dictionaries.
    pub fn new(limits: Limits) -> Self {
        Decoder {
            limits,
            max_length: limits.max_length(),
            at: 0,
            damage: None,
            damage_first_end: 0,
            reported_first_end: 0,
            zero_free: None,
            stopped: false,
            stopping: None,
            stop: u64::MAX,
            prefix: None,
            // Its own: a decoder made by hand shares nothing with others (a reader's options
            // give theirs, `share_spares`).
            scratch: Scratch::default(),
            spares: Arc::default(),
            decompressor: Decompressor::new(&limits),
            dictionaries: Vec::new(),
            collect: false,
            ready: None,
            current: None,
            resume: 0,
            stats: Stats::default(),
            tail: Tail::default(),
            ended: None,
            skipped: false,
            pairing: Pairing::default(),
            look_from: None,
            look_back: None,
            window: None,
            passed: None,
            plan: std::collections::VecDeque::new(),
            planned: false,
            untimed_planned: 0,
        }
    }

    /// Makes the read follow `ranges` (in order, each starting at a block's opening sync
    /// byte): the blocks that open in each are read as a range read reads them (spec 9.4),
    /// and nothing between them. A window read of a file with a time index reads so (spec
    /// 9.9); `untimed` is the number of data blocks it leaves out for want of times, counted
    /// in the stats as if passed over.
    pub(crate) fn set_plan(&mut self, ranges: Vec<Range<u64>>, untimed: u64) {
        self.planned = true;
        self.stats.untimed_blocks_passed += untimed;
        self.untimed_planned += untimed;
        let mut ranges = std::collections::VecDeque::from(ranges);
        let Some(first) = ranges.pop_front() else {
            // Nothing to read: a read that ends at once.
            self.stop = self.at;
            return;
        };
        self.at = first.start;
        self.resume = first.start;
        self.stop = first.end;
        self.plan = ranges;
        self.skipped = true;
    }

    /// Whether the read follows a plan of ranges ([`set_plan`](Self::set_plan)).
    pub(crate) fn has_plan(&self) -> bool {
        self.planned
    }

    /// With a plan, where the range being read ends (its last block's closing sync byte):
    /// what a driver that fetches its input need not fetch past, but for a byte or two.
    pub(crate) fn planned_stop(&self) -> Option<u64> {
        self.planned.then_some(self.stop)
    }

    /// The data blocks the plan leaves out for want of times, not taken before: what a range
    /// read's report counts as passed over.
    pub(crate) fn take_untimed_planned(&mut self) -> u64 {
        std::mem::take(&mut self.untimed_planned)
    }

    /// Makes this a decoder of the records whose times lie in `window` (spec 9.9), or of all
    /// records (`None`): data blocks that no time block describes, or whose time block's span
    /// misses the window, are passed over undecoded ([`Step::Passed`]), their frames checked
    /// in full. Blocks of other types are read as before, and the records of the blocks it
    /// decodes are all there: a driver returns those in the window.
    pub fn set_window(&mut self, window: Option<Window>) {
        self.window = window;
    }

    /// The window this decoder reads (see [`set_window`](Self::set_window)).
    pub fn window(&self) -> Option<Window> {
        self.window
    }

    /// Whether a block of `block_type` at `offset` is passed over in a read of `want`:
    /// a data block of a window read that its time block (if any) keeps out of the window.
    fn passes(&self, want: Want, block_type: BlockType, offset: u64) -> bool {
        let Some(window) = self.window.filter(|_| want == Want::Blocks) else {
            return false;
        };
        block_type == BlockType::Data
            && !(self.pairing.describes(offset)).is_some_and(|span| window.meets(span))
    }

    /// A decoder of the blocks that open in `start..stop` (spec 9.4), where `first_sync` is
    /// the first sync byte at or after `start` (0 when `start` is 0): it reads from there,
    /// and asks for the bytes before it when a block needs the dictionaries they embed
    /// ([`Step::NeedDictionaries`]).
    pub fn range(limits: Limits, first_sync: u64, stop: u64) -> Self {
        let mut decoder = Self::new(limits);
        decoder.at = first_sync;
        decoder.resume = first_sync;
        decoder.stop = stop;
        decoder.prefix = (first_sync > 0).then_some(first_sync);
        decoder.look_from = (first_sync > 0).then_some(first_sync);
        decoder
    }

    /// A decoder of an input whose bytes before `offset` it is never given (a stream read
    /// from there on: a follower starting at the end); no range, no search before it.
    pub(crate) fn starting_at(limits: Limits, offset: u64) -> Self {
        let mut decoder = Self::new(limits);
        decoder.at = offset;
        decoder.resume = offset;
        decoder.look_from = (offset > 0).then_some(offset);
        decoder
    }

    /// Makes the decoder take its buffers from `spares` and leave them there when it drops,
    /// as every reader of the same options does.
    pub(crate) fn share_spares(mut self, spares: &Arc<Spares>) -> Self {
        self.spares = Arc::clone(spares);
        self.scratch = spares.scratch();
        self
    }

    /// The buffers this decoder shares with the other readers of its options.
    pub(crate) fn spares(&self) -> &Arc<Spares> {
        &self.spares
    }

    /// Records the dictionaries the decoder knows, in order (see `dictionaries`).
    pub(crate) fn collecting(mut self) -> Self {
        self.collect = true;
        self
    }

    /// Makes `dictionary`, held outside the input, available for the blocks compressed with
    /// it. One in zstd's format that zstd cannot load stays unavailable: its blocks are
    /// reported as needing it.
    pub fn give_dictionary(&mut self, dictionary: &Dictionary) {
        if self.decompressor.give(dictionary).is_ok() && self.collect {
            self.dictionaries.push((dictionary.clone(), None));
        }
    }

    /// Where the bytes before a range read's range end (exclusive), while they are still to be
    /// searched for dictionaries.
    pub(crate) fn prefix_end(&self) -> Option<u64> {
        self.prefix.map(|sync| sync + 1)
    }

    /// The bounds this decoder enforces.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The most bytes a driver's window has to hold: the longest acceptable block with its
    /// fields, plus the byte after it.
    pub fn max_window(&self) -> usize {
        usize::try_from(self.max_length)
            .unwrap_or(usize::MAX)
            .saturating_add(2 * varint::MAX_LEN + 1)
    }

    /// The absolute offset the decoder reads on from (a sync byte, or the input's start).
    pub fn position(&self) -> u64 {
        self.at
    }

    /// Counts of what the decoder has seen so far.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// How the input ends (spec 9.5.1), once a full read ([`Want::Blocks`]) has returned
    /// [`Step::End`]: whether the last intact block is an end block, and so on. `None` before
    /// then, for the decoder of a range that ends before the input does ([`Decoder::range`]),
    /// once a step wanted less than every block ([`Want::Metadata`]: a skipping scan), and
    /// after a header of a newer version stopped the read.
    pub fn ending(&self) -> Option<Ending> {
        if self.stopped || self.skipped || self.stop != u64::MAX {
            return None;
        }
        self.ended.map(|end| self.tail.ending(end))
    }

    /// Counts a block of unknown type that a record reader passed over.
    pub(crate) fn count_unknown(&mut self) {
        self.stats.unknown_blocks += 1;
    }

    /// The block the last [`Step::Block`] announced, until the next call.
    pub fn block(&self) -> Option<Block<'_>> {
        let (info, body) = self.current.as_ref()?;
        Some(Block::new(
            info.clone(),
            body.version,
            &self.scratch.buffer()[body.payload.clone()],
            self.times(),
            self.window,
        ))
    }

    /// The offset of the block the last [`Step::Block`] announced.
    #[cfg(feature = "avro")]
    #[inline]
    pub(crate) fn current_offset(&self) -> Option<u64> {
        self.current.as_ref().map(|(info, _)| info.offset)
    }

    /// The buffer the last decoded block lies in, whether or not it is still current: what a
    /// driver's cursor into that block reads from (the cursor is emptied whenever the block
    /// stops being current, so it never reads a stale block). Cheaper than
    /// [`current`](Self::current) in the per-record loop.
    #[inline]
    pub(crate) fn buffer(&self) -> &[u8] {
        self.scratch.buffer()
    }

    /// The range in [`buffer`](Self::buffer) of each record of the last decoded block, when
    /// it is a data block whose ranges were kept ([`Scratch::records`]).
    #[inline]
    pub(crate) fn records(&self) -> Option<&[(u32, u32)]> {
        self.scratch.records()
    }

    /// The decoded buffer and where the last announced block's payload lies in it.
    pub(crate) fn current(&self) -> Option<(&[u8], Range<usize>)> {
        let (_, body) = self.current.as_ref()?;
        Some((self.scratch.buffer(), body.payload.clone()))
    }

    /// Reads on; see the module documentation.
    pub fn step(&mut self, input: Input<'_>, want: Want) -> Step {
        self.look_back = None;
        let step = self.step_on(input, want);
        if let Some(at) = self.look_back {
            if input.offset < at {
                self.look_back = None;
                self.times_before(at, input);
            }
        }
        step
    }

    /// [`step`](Self::step), but for the look back at the bytes before a range's first data
    /// block.
    fn step_on(&mut self, input: Input<'_>, want: Want) -> Step {
        self.current = None;
        self.skipped |= want != Want::Blocks || self.window.is_some();
        if let Some(passed) = self.passed.take() {
            return passed;
        }
        if let Some((info, body)) = self.ready.take() {
            if want.decodes(info.block_type) {
                return self.finish(info, body);
            }
        }
        loop {
            let f = match self.next_frame(input, want.check()) {
                Event::Damage { start, cause } => match self.note_damage(start, cause) {
                    Some(err) => return Step::Damaged(err),
                    None => continue,
                },
                Event::Frame(f) => f,
                Event::End { end } => {
                    let damage = self.take_damage(end);
                    self.ended = Some(end);
                    return match damage {
                        Some(err) => Step::Damaged(err),
                        None => Step::End,
                    };
                }
                Event::NeedInput => return Step::NeedInput { from: self.at },
                Event::Jump => {
                    let damage = self.take_damage(self.at);
                    let next = self.plan.pop_front().expect("a range to jump to");
                    self.pairing.rewind(next.start);
                    (self.at, self.stop) = (next.start, next.end);
                    self.zero_free = None;
                    match damage {
                        Some(err) => return Step::Damaged(err),
                        None => continue,
                    }
                }
            };
            let block_type = BlockType::from_type(f.block_type);
            let offset = input.offset + f.start as u64;
            let undecided = self.window.is_some()
                && want == Want::Blocks
                && block_type == BlockType::Data
                && self.look_from == Some(offset)
                && self.pairing.describes(offset).is_none()
                && !self.look_back_before_passing(offset, input);
            if !undecided && self.passes(want, block_type, offset) {
                let size = (f.end - f.start) as u64;
                return self.pass(offset, size);
            }
            if !want.decodes(block_type) {
                match self.settle(offset, Ok(None)) {
                    Settled::Damage(err) => return Step::Damaged(err),
                    _ => continue,
                }
            }
            if block_type == BlockType::Dictionary && self.prefix.is_some() {
                // The dictionaries before the range are kept first, as a full read keeps
                // them, so that this one counts against the limits as it does there.
                return self.need_dictionaries(offset);
            }
            let decoded = match self.decode_frame(input, &f, None) {
                Err(Cause::Dictionary { .. }) if self.prefix.is_some() => {
                    return self.need_dictionaries(offset)
                }
                decoded => decoded,
            };
            match self.settle(offset, decoded.map(Some)) {
                Settled::Merged => continue,
                Settled::Damage(err) => return Step::Damaged(err),
                Settled::Done(Some((info, body))) => return self.finish(info, body),
                Settled::Done(None) => continue,
            }
        }
    }

    /// Goes back to the frame at `offset` and asks for the dictionaries before the range.
    fn need_dictionaries(&mut self, offset: u64) -> Step {
        self.at = offset;
        self.zero_free = None;
        Step::NeedDictionaries {
            before: self.prefix_end().expect("a prefix to search"),
        }
    }

    /// Makes `block` the current one, or stops at a newer version's header.
    fn finish(&mut self, info: BlockInfo, body: Body) -> Step {
        if let Some(version) = body.version.filter(|&v| v > FORMAT_VERSION) {
            self.stopped = true;
            let offset = info.offset;
            self.stopping = Some((info, body));
            return Step::Stopped(Error::UnsupportedVersion {
                offset,
                version,
                supported: FORMAT_VERSION,
            });
        }
        self.stats.blocks += 1;
        self.tail.block(info.block_type);
        self.ended = None;
        self.resume = info.offset + info.size;
        match info.block_type {
            BlockType::Time => {
                self.settled_other();
                (self.pairing).time_block(info.offset + info.size, self.scratch.times());
            }
            BlockType::Data => {
                let items = body.items.unwrap_or(0);
                let paired = self.pairing.data_block(info.offset, items);
                self.stats.unpaired_time_blocks = self.pairing.unpaired;
                if !paired && self.look_from == Some(info.offset) {
                    self.look_back = Some(info.offset);
                }
            }
            _ => self.settled_other(),
        }
        self.look_from = None;
        self.current = Some((info.clone(), body));
        Step::Block(info)
    }

    /// Passes over the data block at `offset`, `size` bytes long, undecoded (a window read):
    /// announced after the damage pending before it, if any.
    fn pass(&mut self, offset: u64, size: u64) -> Step {
        let timed = self.pairing.passed(offset);
        self.stats.unpaired_time_blocks = self.pairing.unpaired;
        match timed {
            true => self.stats.outside_window_blocks += 1,
            false => self.stats.untimed_blocks_passed += 1,
        }
        self.look_from = None;
        self.look_back = None;
        self.resume = offset + size;
        let passed = Step::Passed {
            offset,
            size,
            timed,
        };
        match self.settle(offset, Ok(None)) {
            Settled::Damage(err) => {
                self.passed = Some(passed);
                Step::Damaged(err)
            }
            _ => passed,
        }
    }

    /// Settles a data block at `offset`, `size` bytes long, that a range's decoder passed
    /// over ([`Step::Passed`]), as passing it here would have: for a driver that settles in
    /// one decoder what the decoders of ranges read.
    pub(crate) fn settle_passed(&mut self, offset: u64, size: u64) -> Option<Step> {
        self.current = None;
        let step = self.pass(offset, size);
        self.passed = None;
        matches!(step, Step::Damaged(_)).then_some(step)
    }

    /// A block that is not a data block, or damage, was settled.
    fn settled_other(&mut self) {
        self.pairing.other();
        self.stats.unpaired_time_blocks = self.pairing.unpaired;
        self.look_from = None;
        self.look_back = None;
    }

    /// The event times of the records of the data block the last [`Step::Block`] announced,
    /// if a time block describes it (spec 8.8); for a time block, the times it gives.
    pub fn times(&self) -> Option<&[i64]> {
        match self.current.as_ref()?.0.block_type {
            BlockType::Data => self.pairing.times(),
            BlockType::Time => Some(self.scratch.times()),
            _ => None,
        }
    }

    /// Where a data block just settled opens, if it opens where reading began (a range, a
    /// seek) with no time block read before it: the bytes before it may hold one
    /// ([`times_before`](Self::times_before)). Taken once.
    pub(crate) fn take_look_back(&mut self) -> Option<u64> {
        self.look_back.take()
    }

    /// Gives the data block just settled, which opens at `at` (see
    /// [`take_look_back`](Self::take_look_back)), the times of the time block that closes at
    /// its opening sync byte, if there is one: found in `input`, which holds the bytes before
    /// `at` (as many as a time block for its records may take, [`time::frame_bound`]) and the
    /// sync byte at `at`. The frame before a sync
    /// byte opens at the last 0x00 before it (no frame holds one, spec 6), and a full read
    /// meets every 0x00 as a position (9.1), so this finds exactly the block a full read
    /// settles right before this one.
    pub(crate) fn times_before(&mut self, at: u64, input: Input<'_>) {
        let Some(items) = (self.current.as_ref())
            .filter(|(info, _)| info.offset == at && info.block_type == BlockType::Data)
            .and_then(|(_, body)| body.items)
        else {
            return;
        };
        let reach = usize::try_from(time::frame_bound(items)).unwrap_or(usize::MAX);
        if let Some(before) = self.time_block_before(at, input, reach) {
            self.pairing.found_before(before.scratch.times(), items);
        }
    }

    /// The time block that closes at the sync byte at `at`, if one opens within `reach`
    /// bytes before it in `input` (which holds the sync byte at `at`): decoded in a decoder
    /// of its own, whose buffers hold its times.
    fn time_block_before(&self, at: u64, input: Input<'_>, reach: usize) -> Option<Decoder> {
        let end = usize::try_from(at.checked_sub(input.offset)?).ok()?;
        if end >= input.bytes.len() || end == 0 {
            return None;
        }
        let from = end.saturating_sub(reach);
        let z = from + memchr::memrchr(0, &input.bytes[from..end])?;
        // Only a time block is worth decoding.
        if input.bytes.get(z + 1) != Some(&time::TYPE_FIELD) {
            return None;
        }
        let offset = input.offset + z as u64;
        let mut before = Decoder::starting_at(self.limits, offset).share_spares(&self.spares);
        let frame = Input {
            bytes: &input.bytes[z..=end],
            offset,
            end: true,
        };
        match before.step(frame, Want::Blocks) {
            Step::Block(info)
                if info.block_type == BlockType::Time && info.offset + info.size == at =>
            {
                Some(before)
            }
            _ => None,
        }
    }

    /// Before a window read decides whether to pass over the data block at `offset`, where
    /// reading began (a range, a seek) with nothing settled before it: the time block that
    /// may describe it, found in `input` if that holds the bytes before it. Returns false if
    /// it does not: the block is then decoded, and its driver finds its time block after
    /// ([`times_before`](Self::times_before)), so that no record of the window is passed.
    fn look_back_before_passing(&mut self, offset: u64, input: Input<'_>) -> bool {
        if input.offset >= offset {
            return false;
        }
        self.look_from = None;
        if let Some(before) = self.time_block_before(offset, input, self.max_window()) {
            self.pairing.time_block(offset, before.scratch.times());
        }
        true
    }

    /// Adds the dictionaries that the blocks before a range read's first sync byte (and ending
    /// at it) embed, found as a full read finds them, to those this decoder knows, ahead of any
    /// of its own (once; later calls do nothing). `bytes` is the input from its first byte, at
    /// least up to the offset [`Step::NeedDictionaries`] named; only that much of it is read.
    ///
    /// The search checks every frame in full: a skipping scan (spec 9.3) could jump over a
    /// dictionary block along a damaged length that lands on a later sync byte, and the range
    /// would then lose blocks a full read returns. It decodes dictionary blocks only.
    pub fn add_dictionaries_before(&mut self, bytes: &[u8]) {
        let mut search = Decoder::new(self.limits).collecting();
        self.add_dictionaries_searched(&mut search, bytes);
    }

    /// [`add_dictionaries_before`](Self::add_dictionaries_before) with the search of the bytes
    /// before the range taken on by `search`: a collecting decoder of the same input from its
    /// first byte, at or before the range's first sync byte (where a search for an earlier
    /// range stopped), which reads on to it and is left there for later ranges.
    pub(crate) fn add_dictionaries_searched(&mut self, search: &mut Decoder, bytes: &[u8]) {
        let Some(end) = self.prefix_end() else {
            return;
        };
        let end = usize::try_from(end).map_or(bytes.len(), |end| end.min(bytes.len()));
        search.search_on(Input {
            bytes: &bytes[..end],
            offset: 0,
            // Not the input's end: a later range's search goes on from where this one stops.
            end: false,
        });
        self.keep_dictionaries_of(search);
    }

    /// Drives a collecting search over `input` for its dictionary blocks, until it needs
    /// bytes past it (or the input ends).
    pub(crate) fn search_on(&mut self, input: Input<'_>) {
        while let Step::Block(_) | Step::Damaged(_) = self.step(input, Want::Dictionaries) {}
    }

    /// A collecting decoder driven over `bytes`, the whole input from the absolute offset
    /// `offset`, for its dictionary blocks.
    fn search_dictionaries(&self, offset: u64, bytes: &[u8]) -> Decoder {
        let mut search = Decoder::starting_at(self.limits, offset).collecting();
        search.search_on(Input {
            bytes,
            offset,
            end: true,
        });
        search
    }

    /// [`add_dictionaries_before`](Self::add_dictionaries_before) from pieces of the input
    /// (absolute offset, bytes) rather than all of it: the frames of the dictionary blocks
    /// before the range, each whole, as a remote read fetches them from an index (once;
    /// later calls do nothing). Each piece is searched as the input from its offset to its
    /// end; pieces are in file order.
    ///
    /// Returns false, and adds nothing, if a piece is not an intact dictionary block the
    /// decoder can keep (an index that no longer matches its file): the caller then searches
    /// the input before the range instead.
    pub(crate) fn add_dictionaries_in(&mut self, pieces: &[(u64, &[u8])]) -> bool {
        if self.prefix.is_none() {
            return true;
        }
        let mut found = Vec::new();
        for &(offset, bytes) in pieces {
            let mut search = self.search_dictionaries(offset, bytes);
            if search.dictionaries.len() != 1 {
                return false;
            }
            found.append(&mut search.dictionaries);
        }
        self.prefix = None;
        self.keep_dictionaries(&found);
        true
    }

    /// Adds the dictionaries that `search` (a collecting decoder of the input before the
    /// range, driven by the caller as [`add_dictionaries_before`](Self::add_dictionaries_before)
    /// drives one over a slice) found so far, as a full read keeps them (once).
    pub(crate) fn keep_dictionaries_of(&mut self, search: &Decoder) {
        if self.prefix.take().is_some() {
            self.keep_dictionaries(&search.dictionaries);
        }
    }

    /// Adds the dictionaries found before a range, in file order, as a full read keeps them.
    fn keep_dictionaries(&mut self, found: &[(Dictionary, Option<u64>)]) {
        for (dictionary, offset) in found {
            if self.decompressor.add(dictionary).is_ok() && self.collect {
                self.dictionaries.push((dictionary.clone(), *offset));
            }
        }
    }

    /// Where the first damaged piece (a frame or the bytes up to a sync byte) of the range
    /// reported last ended: where a reader on one thread was when it noted that range. A
    /// driver that settles in another decoder what this one read reads on from there after
    /// that range ended one of the other kind (spec 9.1).
    pub(crate) fn first_piece_end(&self) -> u64 {
        self.reported_first_end
    }

    /// Reports pending damage ending at `end`.
    fn take_damage(&mut self, end: u64) -> Option<Error> {
        let (start, cause) = self.damage.take()?;
        self.reported_first_end = self.damage_first_end;
        if end < start {
            // Only where the bytes changed under a read: the ranges of a pull read with
            // threads (`range::pull`), read at different times, can show one range's damage
            // starting past where the next range's first intact block opens. Nothing was
            // lost between them.
            return None;
        }
        self.tail.damage();
        self.ended = None;
        self.settled_other();
        self.stats.damaged_regions += 1;
        self.stats.damaged_bytes += end - start;
        Some(Error::Damaged { start, end, cause })
    }

    /// Notes damage from the absolute offset `start`, merging it with damage not yet
    /// reported, if both are damage or both unreadable (spec 9.1). Otherwise the range held
    /// ends at the sync byte before `start` and is returned, to be reported now: merged, an
    /// unreadable cause would hide damage, or damage an intact block another reader reads.
    #[must_use]
    pub(crate) fn note_damage(&mut self, start: u64, cause: Cause) -> Option<Error> {
        match &self.damage {
            None => {
                self.damage = Some((start, cause));
                self.damage_first_end = self.at;
                None
            }
            Some((held, held_cause))
                if held_cause.is_damage() != cause.is_damage() && start > *held =>
            {
                let split = self.take_damage(start - 1);
                self.damage = Some((start, cause));
                self.damage_first_end = self.at;
                // What was reported is final: a follower that reads again after its file was
                // cut reads on from the sync byte it ends at, not before it.
                self.resume = self.resume.max(start - 1);
                split
            }
            Some(_) => None,
        }
    }

    /// Looks for the next frame from the position on, and moves the position past what it
    /// found. A frame is checked as `check` says; in a landing check, frames of the types a
    /// skipping scan decodes are checked in full.
    pub(crate) fn next_frame(&mut self, input: Input<'_>, check: Check) -> Event {
        if self.stopped {
            return Event::End { end: self.at };
        }
        let window = input.bytes;
        let base = input.offset;
        loop {
            debug_assert!(self.at >= base, "the driver keeps the bytes from `at` on");
            let pos = (self.at - base) as usize;
            // A range read stops at the first sync byte at or after its end that can open a
            // block: not one followed by another 0x00 (padding or zero-filled bytes) or by
            // the end of the input. Damage running into such bytes then ends where it does
            // in a read of the whole input.
            // (After damage that ran to the end of a window, the position may be a byte that
            // is not a sync byte: the stop waits for the next one.)
            let opens = window.get(pos) == Some(&0) && window.get(pos + 1).is_some_and(|&b| b != 0);
            if self.at >= self.stop && opens {
                if !self.plan.is_empty() {
                    return Event::Jump;
                }
                return Event::End { end: self.at };
            }
            let searched = match self.zero_free {
                Some((sync, end)) if sync == self.at => (end - base) as usize,
                _ => 0,
            };
            let scan = frame::read_at(
                window,
                pos,
                base,
                input.end,
                self.max_length,
                check,
                searched,
            );
            match scan {
                Found::NeedMore => {
                    // (Bytes searched: none when the read jumped past the window, by a
                    // plan, and the bytes it jumped to are still to come.)
                    let end = base + window.len() as u64;
                    if check == Check::Full && end >= self.at {
                        self.zero_free = Some((self.at, end));
                    }
                    return Event::NeedInput;
                }
                Found::Damage {
                    from,
                    resume,
                    cause,
                } => {
                    self.at = base + resume as u64;
                    return Event::Damage {
                        start: base + from as u64,
                        cause,
                    };
                }
                Found::Padding { resume } => self.at = base + resume as u64,
                Found::End => {
                    return Event::End {
                        end: base + window.len() as u64,
                    }
                }
                Found::Frame(f) => {
                    let block_type = BlockType::from_type(f.block_type);
                    // What a skipping scan decodes itself it checks in full first.
                    if check == Check::Landing && decoded_by_scans(block_type) {
                        if let Err(zero) = frame::verify(window, &f) {
                            self.at = base + zero as u64;
                            let (start, cause) = frame::stray_zero_damage(
                                base + f.start as u64,
                                base + f.end as u64,
                                self.at,
                            );
                            return Event::Damage { start, cause };
                        }
                    }
                    self.at = base + f.end as u64;
                    return Event::Frame(f);
                }
            }
        }
    }

    /// Decodes the frame `f` of `input` into `scratch` (the decoder's own buffer if `None`),
    /// and keeps the dictionary a dictionary block embeds, within the limits: one the decoder
    /// cannot keep makes the block unreadable (or malformed) in its place.
    pub(crate) fn decode_frame(
        &mut self,
        input: Input<'_>,
        f: &Frame,
        scratch: Option<&mut Scratch>,
    ) -> Result<(BlockInfo, Body), Cause> {
        let scratch = match scratch {
            Some(scratch) => scratch,
            None => &mut self.scratch,
        };
        let window = input.bytes;
        let place = Place {
            offset: input.offset + f.start as u64,
            body_offset: input.offset + f.body.start as u64,
        };
        let (info, body) = decode_block(
            &window[f.type_field.clone()],
            BlockType::from_type(f.block_type),
            &window[f.body.clone()],
            place,
            (f.end - f.start) as u64,
            self.limits.body_limit(),
            scratch,
            &mut self.decompressor,
        )?;
        if info.block_type == BlockType::Dictionary {
            let bytes = &scratch.buffer()[body.payload.clone()];
            keep_dictionary(
                &mut self.decompressor,
                self.collect.then_some(&mut self.dictionaries),
                info.offset,
                bytes,
            )?;
        }
        Ok((info, body))
    }

    /// What becomes of the frame at the absolute offset `offset`, decoded into the buffer (or
    /// not, `None`), given the damage noted before it.
    pub(crate) fn settle(
        &mut self,
        offset: u64,
        decoded: Result<Option<(BlockInfo, Body)>, Cause>,
    ) -> Settled {
        let decoded = match decoded {
            Ok(decoded) => decoded,
            Err(cause) => {
                return match self.note_damage(offset + 1, cause) {
                    Some(err) => Settled::Damage(err),
                    None => Settled::Merged,
                };
            }
        };
        if let Some(err) = self.take_damage(offset) {
            self.ready = decoded;
            return Settled::Damage(err);
        }
        Settled::Done(decoded)
    }

    /// Swaps the decoder's buffer with `other` (a worker's, holding a block it decoded).
    pub(crate) fn swap_scratch(&mut self, other: &mut Scratch) {
        std::mem::swap(&mut self.scratch, other);
    }

    /// Makes a block decoded elsewhere (its body in the decoder's buffer, swapped in) the one
    /// to return, after the damage before it: the worker threads' way into [`settle`].
    pub(crate) fn settle_decoded(
        &mut self,
        offset: u64,
        decoded: Result<(BlockInfo, Body), Cause>,
    ) -> Option<Step> {
        self.current = None;
        match self.settle(offset, decoded.map(Some)) {
            Settled::Merged => None,
            Settled::Damage(err) => Some(Step::Damaged(err)),
            Settled::Done(Some((info, body))) => Some(self.finish(info, body)),
            Settled::Done(None) => None,
        }
    }

    /// The end of the input at the absolute offset `end`, reached by a scan ahead of the
    /// caller: the damage pending before it, if any.
    pub(crate) fn end_at(&mut self, end: u64) -> Option<Step> {
        self.current = None;
        let damage = self.take_damage(end);
        self.ended = Some(end);
        damage.map(Step::Damaged)
    }

    /// Takes the block held back behind damage, if any, to be returned now.
    pub(crate) fn take_ready(&mut self) -> Option<Step> {
        self.current = None;
        let (info, body) = self.ready.take()?;
        Some(self.finish(info, body))
    }

    /// The resume point: the closing sync byte of the last block returned, or where reading
    /// started (or stopped, after `settle_read`).
    pub(crate) fn resume_offset(&self) -> u64 {
        self.resume
    }

    /// Forgets everything read past the resume point, pending damage included, and goes back
    /// there; returns it (a follower's file cut back, spec 9.7).
    pub(crate) fn restart_at_resume(&mut self) -> u64 {
        self.damage = None;
        self.rewind(self.resume);
        self.resume
    }

    /// Makes everything read so far final: the resume point moves to the position (after the
    /// input's end was read and what was there reported).
    pub(crate) fn settle_read(&mut self) {
        debug_assert!(self.damage.is_none(), "damage is reported at the end");
        self.resume = self.at;
    }

    /// The offset of the block held back behind damage just reported, if any.
    pub(crate) fn ready_offset(&self) -> Option<u64> {
        self.ready.as_ref().map(|(info, _)| info.offset)
    }

    /// Whether a newer version's header stopped the read.
    pub(crate) fn is_stopped(&self) -> bool {
        self.stopped
    }

    /// Where no block opens for this decoder: the end of its range, or `u64::MAX`.
    pub(crate) fn stop(&self) -> u64 {
        self.stop
    }

    /// Where the input ended, once a full read got there (and returned nothing since).
    pub(crate) fn ended_at(&self) -> Option<u64> {
        self.ended
    }

    /// The block the last [`Step::Block`] announced, taken out with the buffers it lies in:
    /// `fresh` takes their place. For a driver that settles the block in another decoder
    /// ([`settle_decoded`](Self::settle_decoded) after [`swap_scratch`](Self::swap_scratch)).
    pub(crate) fn take_current(&mut self, fresh: Scratch) -> Option<(BlockInfo, Body, Scratch)> {
        let current = self.current.take();
        self.take_out(current, fresh)
    }

    /// The header of a newer version that the last [`Step::Stopped`] stopped at, taken out
    /// as [`take_current`](Self::take_current) takes a block: settled in another decoder, it
    /// stops that one in the same place.
    pub(crate) fn take_stopping(&mut self, fresh: Scratch) -> Option<(BlockInfo, Body, Scratch)> {
        let stopping = self.stopping.take();
        self.take_out(stopping, fresh)
    }

    /// `block` with the buffers it lies in, `fresh` taking their place.
    fn take_out(
        &mut self,
        block: Option<(BlockInfo, Body)>,
        fresh: Scratch,
    ) -> Option<(BlockInfo, Body, Scratch)> {
        let (info, body) = block?;
        let scratch = std::mem::replace(&mut self.scratch, fresh);
        Some((info, body, scratch))
    }

    /// Keeps the dictionary of the dictionary block just settled, decoded elsewhere, as
    /// decoding it here would have (the decoder that decoded it already judged it within the
    /// limits): so that reading on here knows the dictionaries a read from the start knows.
    pub(crate) fn keep_settled_dictionary(&mut self, offset: u64, body: &Body) {
        let bytes = &self.scratch.buffer()[body.payload.clone()];
        let _ = keep_dictionary(
            &mut self.decompressor,
            self.collect.then_some(&mut self.dictionaries),
            offset,
            bytes,
        );
    }

    /// Makes this decoder the decoder of another range, as [`range`](Self::range) would make
    /// one with the same options and given dictionaries, keeping its buffers and zstd
    /// context. The dictionaries the input embeds are forgotten: the decoder of another range
    /// finds them itself, so that they count against the limits as they would for a new one
    /// (loading them again costs nothing with [`share_loaded`](Self::share_loaded)).
    pub(crate) fn restart_range(&mut self, first_sync: u64, stop: u64) {
        self.dictionaries.retain(|(_, offset)| offset.is_none());
        self.at = first_sync;
        self.resume = first_sync;
        self.stop = stop;
        self.prefix = (first_sync > 0).then_some(first_sync);
        self.pairing.reset();
        self.passed = None;
        self.look_from = (first_sync > 0).then_some(first_sync);
        self.look_back = None;
        self.damage = None;
        self.zero_free = None;
        self.stopped = false;
        self.stopping = None;
        self.ready = None;
        self.current = None;
        self.stats = Stats::default();
        self.tail = Tail::default();
        self.ended = None;
        self.skipped = false;
        self.decompressor.restart(&self.limits);
    }

    /// Shares the dictionaries loaded into zstd with the other decoders of `loaded` (those of
    /// one read's ranges).
    pub(crate) fn share_loaded(&mut self, loaded: &Arc<Loaded>) {
        self.decompressor.share_loaded(loaded);
    }

    /// Moves the position to `at` (a driver that dropped what was scanned ahead of it), and
    /// forgets what it knew of the bytes there.
    pub(crate) fn rewind(&mut self, at: u64) {
        self.pairing.rewind(at);
        self.passed = None;
        self.look_from = (at > 0).then_some(at);
        self.look_back = None;
        self.at = at;
        self.ended = None;
        self.zero_free = None;
        self.ready = None;
        self.current = None;
        // Dictionaries kept from blocks at or past `at` were kept by a scan ahead (worker
        // threads): a reader that reads on from `at` has not met them yet.
        let kept = |d: &(Dictionary, Option<u64>)| d.1.is_none_or(|offset| offset < at);
        if self.collect && !self.dictionaries.iter().all(kept) {
            self.dictionaries.retain(kept);
            let mut decompressor = Decompressor::new(&self.limits);
            decompressor.carry_from(&self.decompressor);
            self.decompressor = decompressor;
            for (dictionary, offset) in &self.dictionaries {
                let _ = match offset {
                    None => self.decompressor.give(dictionary),
                    Some(_) => self.decompressor.add(dictionary),
                };
            }
        }
    }
}

/// Decodes a block of type `block_type` whose type field and COBS body are given, found at `place`
/// and `size` bytes long after its opening sync byte, into `scratch`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn decode_block(
    type_field: &[u8],
    block_type: BlockType,
    encoded: &[u8],
    place: Place,
    size: u64,
    max_body_size: usize,
    scratch: &mut Scratch,
    decompressor: &mut Decompressor,
) -> Result<(BlockInfo, Body), Cause> {
    let body = block::decode(
        type_field,
        block_type,
        encoded,
        place,
        max_body_size,
        scratch,
        decompressor,
    )?;
    let info = BlockInfo {
        offset: place.offset,
        block_type,
        size,
        items: body.items,
        codec: codec_name(body.codec),
        payload_size: body.payload.len() as u64,
    };
    Ok((info, body))
}

/// Whether a skipping scan decodes blocks of this type: the header, metadata and the
/// dictionaries that later metadata (and, in a range read, data) may need.
fn decoded_by_scans(block_type: BlockType) -> bool {
    matches!(
        block_type,
        BlockType::Header | BlockType::Metadata | BlockType::Dictionary
    )
}

/// Makes the dictionary a block at `offset` embeds (`bytes`) available for the blocks after
/// it, within the decompressor's limits, and notes it in `kept` if given (once: a dictionary
/// already known costs nothing).
fn keep_dictionary(
    decompressor: &mut Decompressor,
    kept: Option<&mut Vec<(Dictionary, Option<u64>)>>,
    offset: u64,
    bytes: &[u8],
) -> Result<(), Cause> {
    if decompressor.has(codec::dictionary_id(bytes)) {
        return Ok(());
    }
    let dictionary = Dictionary::new(bytes.to_vec());
    decompressor
        .add(&dictionary)
        .map_err(|refused| refused_cause(offset, refused))?;
    if let Some(kept) = kept {
        kept.push((dictionary, Some(offset)));
    }
    Ok(())
}

/// The cause a dictionary block at `offset` is reported with when the reader cannot keep its
/// dictionary.
fn refused_cause(offset: u64, refused: Refused) -> Cause {
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

/// The name of a codec id: `"none"`, `"zstd"`, `"zstd+dict"`, `"zstd-lines"`,
/// `"zstd+dict-lines"` or `"unknown"`.
pub fn codec_name(codec: i64) -> &'static str {
    match codec {
        codec::NONE => "none",
        codec::ZSTD => "zstd",
        codec::ZSTD_DICTIONARY => "zstd+dict",
        codec::ZSTD_LINES => "zstd-lines",
        codec::ZSTD_DICTIONARY_LINES => "zstd+dict-lines",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data_block(offset: u64, size: u64) -> (BlockInfo, Body) {
        let info = BlockInfo {
            offset,
            block_type: BlockType::Data,
            size,
            items: Some(1),
            codec: "none",
            payload_size: 0,
        };
        let body = Body {
            payload: 0..0,
            items: Some(1),
            version: None,
            codec: codec::NONE,
        };
        (info, body)
    }

    /// Damage met by a later range that starts past where the next settled block opens
    /// (bytes that changed under a threaded pull read) is dropped, not reported as a range
    /// that ends before it starts; damage in order is reported as usual.
    #[test]
    fn damage_settled_out_of_order_is_dropped() {
        let mut decoder = Decoder::new(Limits::default());
        let cause = Cause::NoSync { offset: 150 };
        assert!(decoder.note_damage(150, cause.clone()).is_none());
        let step = decoder.settle_decoded(120, Ok(data_block(120, 10)));
        assert!(matches!(step, Some(Step::Block(ref info)) if info.offset == 120));
        assert_eq!(decoder.stats().damaged_regions, 0);
        assert_eq!(decoder.stats().damaged_bytes, 0);

        assert!(decoder.note_damage(131, cause).is_none());
        let step = decoder.settle_decoded(140, Ok(data_block(140, 10)));
        match step {
            Some(Step::Damaged(Error::Damaged { start, end, .. })) => {
                assert_eq!((start, end), (131, 140))
            }
            other => panic!("expected damage, got {other:?}"),
        }
        assert!(matches!(decoder.take_ready(), Some(Step::Block(ref info)) if info.offset == 140));
        assert_eq!(decoder.stats().damaged_regions, 1);
        assert_eq!(decoder.stats().damaged_bytes, 9);
    }
}
