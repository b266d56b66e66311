//! The optional index block (spec section 8.5): where each block of a file is and which
//! records it holds, written last by [`Writer::finish`](crate::Writer::finish), for seeking to
//! the k-th record or to a byte offset without reading what comes before.
//!
//! ```text
//! count    varint   number of entries n
//! span     varint   bytes from the first entry's opening sync byte to the index's
//! entries  n x (type varint, size varint, items varint)
//! ```
//!
//! An index is never needed for correctness. A reader uses it only when it is the last block
//! of the file (or the last but the file's end block), intact and consistent, and checks the
//! block it points at before trusting it; anything else makes it read from the start and
//! count, as without an index.

use std::ops::Range;

use crate::block::{self, types, BlockType, Body, Place, Scratch};
use crate::codec::Decompressor;
use crate::decoder::Block;
use crate::frame::{self, Check, Found};
use crate::limits::DEFAULT_MAX_BODY_SIZE;
use crate::time::{TimeSpan, Window};
use crate::varint;

/// One block as an [`Index`] lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexEntry {
    /// Absolute offset of the block's opening sync byte.
    pub offset: u64,
    /// What the block holds.
    pub block_type: BlockType,
    /// Bytes after the opening sync byte up to and including the closing one, as in
    /// [`BlockInfo::size`](crate::BlockInfo::size): the next block opens at `offset + size`.
    pub size: u64,
    /// Records in a data block; 0 for other types.
    pub records: u64,
    /// The ordinal of the block's first record among the records the index counts (the sum of
    /// `records` of the entries before it).
    pub first_record: u64,
}

impl IndexEntry {
    /// The ordinals of the records the block holds.
    pub fn record_range(&self) -> Range<u64> {
        self.first_record..self.first_record + self.records
    }
}

/// The index of a file: its blocks' offsets, types, sizes and record counts, read from the
/// index block a writer puts at the end of the file.
///
/// Lookups are binary searches. The entries cover the blocks from [`start`](Self::start) up to
/// the index block at [`offset`](Self::offset); record ordinals count the records of those
/// blocks, 0 being the first record written after `start`.
///
/// ```
/// let mut writer = cobsfile::WriterBuilder::new().block_target(100).build(Vec::new())?;
/// for i in 0..1000 {
///     writer.write_record(format!("event {i}").as_bytes())?;
/// }
/// let file = writer.finish()?;
///
/// let index = cobsfile::Index::find(&file).expect("the writer wrote an index");
/// assert_eq!(index.records(), 1000);
/// let entry = index.block_for_record(500).unwrap();
/// assert!(entry.record_range().contains(&500));
///
/// // A reader that starts at record 500, having read only the blocks from there on.
/// let mut reader = cobsfile::ReaderBuilder::new().from_slice_at_record(&file, 500);
/// assert_eq!(reader.next_record().unwrap()?, b"event 500");
/// # Ok::<(), cobsfile::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Index {
    /// Offset of the index block's opening sync byte.
    offset: u64,
    /// Offset of the first entry's opening sync byte.
    start: u64,
    entries: Vec<IndexEntry>,
    records: u64,
    /// The seal block between the index block and the end block, as a writer that seals
    /// leaves it (spec 8.10), where the index was found at the end of a file.
    seal_after: Option<IndexEntry>,
}

impl Index {
    /// The index at the end of `bytes`, if the file ends with an intact, consistent index
    /// block, or with one and then an intact end block (as [`Writer::finish`] writes them),
    /// with a seal block between them or not (as a writer that seals writes them);
    /// `None` otherwise (no index, a damaged one, one with other blocks after it). Only those
    /// last blocks are read: on a mapped file this touches their pages only. Never panics,
    /// whatever the bytes.
    ///
    /// [`Writer::finish`]: crate::Writer::finish
    pub fn find(bytes: &[u8]) -> Option<Index> {
        Index::find_in_tail(bytes, 0).ok().flatten()
    }

    /// [`find`](Self::find) in the last bytes of a file, `tail`, whose first byte is at
    /// offset `offset`: what a reader that fetches byte ranges reads first. `Err(())` when
    /// `tail` is too short to tell (its last blocks open before it: fetch more of the
    /// file); offsets in the index found are the file's.
    pub(crate) fn find_in_tail(tail: &[u8], offset: u64) -> Result<Option<Index>, ()> {
        // A block opens at the 0x00 before its closing one (a body holds none): with none
        // in `tail`, the block opens before it.
        let opens_in = |bytes: &[u8]| {
            bytes.len() >= 2 && memchr::memrchr(0, &bytes[..bytes.len() - 1]).is_some()
        };
        let cut = offset > 0;
        if cut && !opens_in(tail) {
            return Err(());
        }
        let mut scratch = Scratch::default();
        // Back from the end: the end block, a writer's last seal (spec 8.10), the index.
        let mut bytes = tail;
        let mut wanted: &[i64] = &[types::INDEX, types::SEAL, types::END];
        let mut seal_after = None;
        let (start, body) = loop {
            match last_block_of(bytes, wanted, &mut scratch) {
                Some((start, BlockType::Index, body)) => break (start, body),
                Some((start, block_type, _)) => {
                    if block_type == BlockType::Seal {
                        // The block runs to the last byte held, its closing sync byte.
                        seal_after = Some(IndexEntry {
                            offset: offset + start as u64,
                            block_type,
                            size: (bytes.len() - 1 - start) as u64,
                            records: 0,
                            first_record: 0,
                        });
                    }
                    if cut && !opens_in(&bytes[..=start]) {
                        return Err(());
                    }
                    bytes = &bytes[..=start];
                    wanted = match block_type {
                        BlockType::End => &[types::INDEX, types::SEAL],
                        _ => &[types::INDEX],
                    };
                }
                None => return Ok(None),
            }
        };
        let index = Index::parse(&scratch.buffer()[body.payload], offset + start as u64);
        Ok(index.map(|index| Index {
            seal_after,
            ..index
        }))
    }

    /// The seal block a writer that seals puts between the index block and the end block
    /// (spec 8.10), where this index was found at the end of a file and one is there.
    pub(crate) fn seal_after(&self) -> Option<&IndexEntry> {
        self.seal_after.as_ref()
    }

    /// The index an index block holds, as a full read returns it; `None` for other blocks and
    /// for an index whose span reaches back before the start of the input.
    pub fn from_block(block: &Block<'_>) -> Option<Index> {
        (block.info().block_type == BlockType::Index)
            .then(|| Index::parse(block.payload(), block.info().offset))
            .flatten()
    }

    /// Builds the index from a payload found at `offset`.
    fn parse(payload: &[u8], offset: u64) -> Option<Index> {
        let mut entries = Vec::new();
        let (mut at, mut records) = (0u64, 0u64);
        let span = block::parse_index_payload(payload, |block_type, size, items| {
            let records_here = if block_type == BlockType::Data {
                items
            } else {
                0
            };
            entries.push(IndexEntry {
                offset: at,
                block_type,
                size,
                records: records_here,
                first_record: records,
            });
            at += size;
            records = records.checked_add(records_here)?;
            Some(())
        })
        .ok()?;
        let start = offset.checked_sub(span)?;
        for entry in &mut entries {
            entry.offset += start;
        }
        Some(Index {
            offset,
            start,
            entries,
            records,
            seal_after: None,
        })
    }

    /// The spans of the time blocks that the time index right before this index lists (spec
    /// 8.9), by entry position, if the index's last entry is a usable time index in `bytes`
    /// (the file the index was found in): intact, and naming only time blocks followed by data
    /// blocks.
    pub(crate) fn time_spans(&self, bytes: &[u8]) -> Option<Vec<Option<TimeSpan>>> {
        let range = self.time_index_range()?;
        let block =
            bytes.get(usize::try_from(range.start).ok()?..usize::try_from(range.end).ok()?)?;
        self.time_spans_in(block)
    }

    /// Where the time index that this index lists last is, if it lists one: from its opening
    /// sync byte to its closing one, included.
    pub(crate) fn time_index_range(&self) -> Option<Range<u64>> {
        let last = self.entries.last()?;
        if last.block_type != BlockType::TimeIndex {
            return None;
        }
        Some(last.offset..last.offset.checked_add(last.size)?.checked_add(1)?)
    }

    /// [`time_spans`](Self::time_spans), given the bytes of [`time_index_range`](Self::time_index_range).
    pub(crate) fn time_spans_in(&self, block: &[u8]) -> Option<Vec<Option<TimeSpan>>> {
        let mut scratch = Scratch::default();
        let (at, _, body) = last_block_of(block, &[types::TIME_INDEX], &mut scratch)?;
        if at != 0 {
            return None;
        }
        let mut spans = vec![None; self.entries.len()];
        crate::time::parse_index_payload(&scratch.buffer()[body.payload], |position, span| {
            let p = usize::try_from(position).ok()?;
            let describes = self.entries.get(p)?.block_type == BlockType::Time
                && self.entries.get(p + 1)?.block_type == BlockType::Data;
            describes.then(|| spans[p] = Some(span))
        })
        .ok()?;
        Some(spans)
    }

    /// What a read of `window` reads of the blocks opening in `within`, by the time index's
    /// `spans` (spec 9.9): the byte ranges of the runs of blocks it keeps (every block but the
    /// time blocks that miss the window with their data blocks, and the data blocks no time
    /// block describes), in order, and the number of data blocks it leaves out for want of
    /// times.
    pub(crate) fn window_ranges(
        &self,
        spans: &[Option<TimeSpan>],
        window: Window,
        within: Range<u64>,
    ) -> (Vec<Range<u64>>, u64) {
        // Runs of blocks kept: (first offset, where the next block opens, last offset).
        let mut runs: Vec<(u64, u64, u64)> = Vec::new();
        let mut untimed = 0;
        let first = self.entries.partition_point(|e| e.offset < within.start);
        let last = self.entries.partition_point(|e| e.offset < within.end);
        // A time block just before `within` decides whether its data block, in it, is kept.
        let mut kept_time = first.checked_sub(1).is_some_and(|i| {
            self.entries[i].block_type == BlockType::Time
                && spans[i].is_none_or(|span| window.meets(span))
        });
        for (i, entry) in self.entries.iter().enumerate().take(last).skip(first) {
            let keep = match entry.block_type {
                BlockType::Time => {
                    // A time block the time index does not list is read, with its data block.
                    kept_time = spans[i].is_none_or(|span| window.meets(span));
                    kept_time
                }
                BlockType::Data => {
                    let timed = i > 0 && self.entries[i - 1].block_type == BlockType::Time;
                    untimed += u64::from(!timed);
                    timed && kept_time
                }
                _ => true,
            };
            if entry.block_type != BlockType::Time {
                kept_time = false;
            }
            if !keep {
                continue;
            }
            let next = entry.offset + entry.size;
            match runs.last_mut() {
                Some(run) if run.1 == entry.offset => (run.1, run.2) = (next, entry.offset),
                _ => runs.push((entry.offset, next, entry.offset)),
            }
        }
        // The index itself and what follows it (the end block), which it does not list.
        if within.end > self.offset {
            let from = self.offset.max(within.start);
            match runs.last_mut() {
                Some(run) if run.1 == from => run.1 = within.end,
                _ => runs.push((from, within.end, from)),
            }
        }
        // A range read reads the blocks that open in its range (spec 9.4): those of the run,
        // up to where the block after it opens.
        let ranges = runs.iter().map(|&(first, next, _)| first..next).collect();
        (ranges, untimed)
    }

    /// The bytes of the blocks that may hold records of `window`, by the time index's
    /// `spans`: from the first time block that meets it to the end of the last data block such
    /// a time block describes (empty, where the first would be, if none does). `None` if the
    /// spans are not the entries'.
    pub(crate) fn window_span(
        &self,
        spans: &[Option<TimeSpan>],
        window: Window,
    ) -> Option<Range<u64>> {
        if spans.len() != self.entries.len() {
            return None;
        }
        let mut found: Option<Range<u64>> = None;
        for (i, pair) in self.entries.windows(2).enumerate() {
            let (time, data) = (&pair[0], &pair[1]);
            let meets = spans[i].is_none_or(|span| window.meets(span));
            if time.block_type == BlockType::Time && data.block_type == BlockType::Data && meets {
                let end = data.offset + data.size;
                found.get_or_insert(time.offset..end).end = end;
            }
        }
        Some(found.unwrap_or(self.offset..self.offset))
    }

    /// Offset of the index block's opening sync byte.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Offset of the first entry's opening sync byte. When it is not 0, the file holds bytes
    /// before the blocks this index covers (another file before it, or garbage): the index
    /// then serves byte-offset lookups, and readers do not use its record ordinals.
    pub fn start(&self) -> u64 {
        self.start
    }

    /// The number of entries (blocks before the index).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the index lists no block.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The number of records in the blocks listed.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// The entries in file order.
    pub fn entries(&self) -> &[IndexEntry] {
        &self.entries
    }

    /// The data block holding record `record` (an ordinal counted from [`start`](Self::start)),
    /// or `None` past the last record.
    pub fn block_for_record(&self, record: u64) -> Option<&IndexEntry> {
        let at = self
            .entries
            .partition_point(|e| e.first_record + e.records <= record);
        self.entries.get(at)
    }

    /// The first block opening at or after `offset`, or `None` if none does before the index.
    /// Gap entries ([`BlockType::Gap`]) are no blocks: passed over.
    pub fn block_at_or_after(&self, offset: u64) -> Option<&IndexEntry> {
        let at = self.entries.partition_point(|e| e.offset < offset);
        self.entries[at..]
            .iter()
            .find(|e| e.block_type != BlockType::Gap)
    }

    /// The entry of the block opening at `offset` exactly.
    pub(crate) fn block_at(&self, offset: u64) -> Option<&IndexEntry> {
        self.block_at_or_after(offset)
            .filter(|e| e.offset == offset)
    }
}

/// The intact block of one of `wanted` types that closes at the last byte of `bytes`, with
/// its offset in `bytes`.
fn last_block_of(
    bytes: &[u8],
    wanted: &[i64],
    scratch: &mut Scratch,
) -> Option<(usize, BlockType, Body)> {
    let (&last, rest) = bytes.split_last()?;
    if last != 0 {
        return None;
    }
    let start = memchr::memrchr(0, rest)?;
    let max_body_size = DEFAULT_MAX_BODY_SIZE;
    let limit = crate::cobs::max_encoded_len(max_body_size) as u64 + 1;
    let f = match frame::read_at(bytes, start, 0, true, limit, Check::Full, 0) {
        Found::Frame(f) if wanted.contains(&f.block_type) && f.end == rest.len() => f,
        _ => return None,
    };
    let block_type = BlockType::from_type(f.block_type);
    let place = Place {
        offset: start as u64,
        body_offset: f.body.start as u64,
    };
    let body = block::decode(
        &bytes[f.type_field.clone()],
        block_type,
        &bytes[f.body.clone()],
        place,
        max_body_size,
        scratch,
        &mut Decompressor::default(),
    )
    .ok()?;
    Some((start, block_type, body))
}

/// The index a writer builds as it writes blocks, encoded as it goes; and, when the writer
/// seals, its chain's [`Sealer`](crate::seal::Sealer), fed the same blocks (but those outside
/// chains, spec 8.10).
#[derive(Debug, Clone, Default)]
pub(crate) struct IndexBuilder {
    pub sealer: Option<crate::seal::SharedSealer>,
    enabled: bool,
    count: u64,
    span: u64,
    entries: Vec<u8>,
    /// The time blocks recorded: their positions among the entries, and their spans.
    times: Vec<(u64, TimeSpan)>,
}

impl IndexBuilder {
    /// A builder that records blocks when `enabled`.
    pub fn new(enabled: bool) -> Self {
        IndexBuilder {
            enabled,
            ..IndexBuilder::default()
        }
    }

    /// Records a block written whole: `block` runs from its type field to its closing sync
    /// byte; `items` is its record count (0 for blocks other than data).
    pub fn push(&mut self, block: &[u8], items: u64) {
        if let Some(sealer) = &self.sealer {
            if !crate::seal::outside_chains(varint::read(block).map_or(0, |(t, _)| t)) {
                crate::seal::lock(sealer).block(block);
            }
        }
        if !self.enabled {
            return;
        }
        let Ok((block_type, _)) = varint::read(block) else {
            // Not a block this writer encoded: an index would be wrong.
            return self.disable();
        };
        self.push_entry(block_type, block.len() as u64, items);
    }

    /// Records a block by its type id, size and record count (0 for blocks other than data).
    pub fn push_entry(&mut self, block_type: i64, size: u64, items: u64) {
        if !self.enabled {
            return;
        }
        varint::write(block_type, &mut self.entries);
        varint::write(size as i64, &mut self.entries);
        varint::write(items as i64, &mut self.entries);
        self.count += 1;
        self.span += size;
    }

    /// Records `size` bytes between two blocks that are no block (spec 8.5): a gap entry.
    pub fn push_gap(&mut self, size: u64) {
        self.push_entry(types::GAP, size, 0);
    }

    /// Records that the next block pushed is a time block of times in `span`.
    pub fn push_time(&mut self, span: TimeSpan) {
        if self.enabled {
            self.times.push((self.count, span));
        }
    }

    /// Stops recording: after a failed write the file no longer matches what was recorded.
    pub fn disable(&mut self) {
        self.enabled = false;
        self.entries = Vec::new();
        self.times = Vec::new();
    }

    /// The time index's payload (spec 8.9), if the writer is to write an index, wrote time
    /// blocks, and it fits in a block body of `max_body_size` bytes.
    pub fn time_payload(&self, max_body_size: usize) -> Option<Vec<u8>> {
        if !self.enabled || self.times.is_empty() {
            return None;
        }
        let mut payload = Vec::new();
        crate::time::encode_index_payload(&self.times, &mut payload);
        (payload.len() + block::ENVELOPE_LEN <= max_body_size).then_some(payload)
    }

    /// The index block's payload, if the writer is to write one and it fits in a block body
    /// of `max_body_size` bytes.
    pub fn payload(&self, max_body_size: usize) -> Option<Vec<u8>> {
        if !self.enabled {
            return None;
        }
        let mut payload = Vec::with_capacity(2 * varint::MAX_LEN + self.entries.len());
        varint::write(self.count as i64, &mut payload);
        varint::write(self.span as i64, &mut payload);
        payload.extend_from_slice(&self.entries);
        (payload.len() + block::ENVELOPE_LEN <= max_body_size).then_some(payload)
    }
}
