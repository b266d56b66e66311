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
//! of the file, intact and consistent, and checks the block it points at before trusting it;
//! anything else makes it read from the start and count, as without an index.

use std::ops::Range;

use crate::block::{self, types, BlockKind, Place, Scratch};
use crate::codec::Decompressor;
use crate::decoder::Block;
use crate::error::{Error, Result};
use crate::frame::{self, Check, Scan};
use crate::limits::DEFAULT_MAX_BLOCK_SIZE;
use crate::reader::{ReaderBuilder, SliceReader};
use crate::varint;

/// One block as an [`Index`] lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexEntry {
    /// Absolute offset of the block's opening sync byte.
    pub offset: u64,
    /// What the block holds.
    pub kind: BlockKind,
    /// Bytes after the opening sync byte up to and including the closing one, as in
    /// [`BlockInfo::size`](crate::BlockInfo::size): the next block opens at `offset + size`.
    pub size: u64,
    /// Records in a data block; 0 for other kinds.
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

/// The index of a file: its blocks' offsets, kinds, sizes and record counts, read from the
/// index block a writer puts at the end of the file.
///
/// Lookups are binary searches. The entries cover the blocks from [`start`](Self::start) up to
/// the index block at [`offset`](Self::offset); record ordinals count the records of those
/// blocks, 0 being the first record written after `start`.
///
/// ```
/// let mut writer = cobsfile::WriterBuilder::new().block_size(100).build(Vec::new())?;
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
}

impl Index {
    /// The index at the end of `bytes`, if the file ends with an intact, consistent index
    /// block; `None` otherwise (no index, a damaged one, one that is not the last block).
    /// Only the last block is read: on a mapped file this touches the index's pages only.
    /// Never panics, whatever the bytes.
    pub fn find(bytes: &[u8]) -> Option<Index> {
        let (&last, rest) = bytes.split_last()?;
        if last != 0 {
            return None;
        }
        let start = memchr::memrchr(0, rest)?;
        let max_block_size = DEFAULT_MAX_BLOCK_SIZE;
        let limit = crate::cobs::max_encoded_len(max_block_size) as u64 + 1;
        let f = match frame::scan(bytes, start, 0, true, limit, Check::Full, 0) {
            Scan::Frame(f) if f.kind == types::INDEX && f.end == rest.len() => f,
            _ => return None,
        };
        let mut scratch = Scratch::default();
        let place = Place {
            offset: start as u64,
            body_offset: f.body.start as u64,
        };
        let body = block::decode(
            &bytes[f.type_field.clone()],
            BlockKind::Index,
            &bytes[f.body.clone()],
            place,
            max_block_size,
            &mut scratch,
            &mut Decompressor::default(),
        )
        .ok()?;
        Index::parse(&scratch.buffer()[body.payload], start as u64)
    }

    /// The index an index block holds, as a full read returns it; `None` for other blocks and
    /// for an index whose span reaches back before the start of the input.
    pub fn from_block(block: &Block<'_>) -> Option<Index> {
        (block.info().kind == BlockKind::Index)
            .then(|| Index::parse(block.payload(), block.info().offset))
            .flatten()
    }

    /// Builds the index from a payload found at `offset`.
    fn parse(payload: &[u8], offset: u64) -> Option<Index> {
        let mut entries = Vec::new();
        let (mut at, mut records) = (0u64, 0u64);
        let span = parse_payload(payload, |kind, size, items| {
            let records_here = if kind == BlockKind::Data { items } else { 0 };
            entries.push(IndexEntry {
                offset: at,
                kind,
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
        })
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
    pub fn block_at_or_after(&self, offset: u64) -> Option<&IndexEntry> {
        let at = self.entries.partition_point(|e| e.offset < offset);
        self.entries.get(at)
    }

    /// The entry of the block opening at `offset` exactly.
    fn block_at(&self, offset: u64) -> Option<&IndexEntry> {
        self.block_at_or_after(offset)
            .filter(|e| e.offset == offset)
    }

    /// A reader over `bytes` (the file this index was found in) starting at record `record`
    /// as written, if the index can be trusted for it; see
    /// [`ReaderBuilder::from_slice_at_record`].
    fn seek<'a>(
        &self,
        options: &ReaderBuilder,
        bytes: &'a [u8],
        record: u64,
    ) -> Option<SliceReader<'a>> {
        if self.start() != 0 {
            return None;
        }
        // The block holding the record, or past the last record the last data block, all of
        // whose records are passed over: the check still tells whether the index is right.
        let (target, skip) = match self.block_for_record(record) {
            Some(entry) => (entry, record - entry.first_record),
            None => {
                let last = self.block_for_record(self.records.checked_sub(1)?)?;
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
            match info.kind {
                BlockKind::Data => {
                    let listed = self.block_at(info.offset)?;
                    if listed.kind != BlockKind::Data || info.items != Some(listed.records) {
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
                BlockKind::Index if info.offset == self.offset => return Some(from_target()),
                _ => {}
            }
        }
    }
}

/// Walks an index payload, calling `each` with every entry's kind, size and items, and checks
/// it: counts and sizes in range, the payload used up exactly, the sizes adding up to the span.
/// Returns the span. `each` may stop the walk by returning `None` (reported as malformed).
fn parse_payload(
    payload: &[u8],
    mut each: impl FnMut(BlockKind, u64, u64) -> Option<()>,
) -> Result<u64, &'static str> {
    let mut at = 0;
    let mut next = |what| -> Result<i64, &'static str> {
        let (value, used) = varint::read(&payload[at..]).map_err(|_| what)?;
        at += used;
        Ok(value)
    };
    let count = u64::try_from(next("invalid count varint")?).map_err(|_| "negative count")?;
    // Each entry takes at least 3 bytes: this bounds the loop by the payload size.
    if count > payload.len() as u64 / 3 {
        return Err("count larger than the block");
    }
    let span = u64::try_from(next("invalid span varint")?).map_err(|_| "negative span")?;
    let mut sum = 0u64;
    for _ in 0..count {
        let kind = next("invalid type varint")?;
        let size = next("invalid size varint")?;
        let items = next("invalid items varint")?;
        if kind == 0 || size <= 0 || items < 0 {
            return Err("index entry out of range");
        }
        sum = sum.checked_add(size as u64).ok_or("index sizes overflow")?;
        each(BlockKind::from_type(kind), size as u64, items as u64)
            .ok_or("index record counts overflow")?;
    }
    if at != payload.len() {
        return Err("trailing bytes after the last index entry");
    }
    if sum != span {
        return Err("index sizes do not add up to its span");
    }
    Ok(span)
}

/// Checks the payload of an index block; returns its entry count.
pub(crate) fn check_payload(payload: &[u8]) -> Result<u64, &'static str> {
    let mut count = 0;
    parse_payload(payload, |_, _, _| {
        count += 1;
        Some(())
    })?;
    Ok(count)
}

/// The index a writer builds as it writes blocks, encoded as it goes.
#[derive(Debug, Clone, Default)]
pub(crate) struct IndexBuilder {
    enabled: bool,
    count: u64,
    span: u64,
    entries: Vec<u8>,
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
        if !self.enabled {
            return;
        }
        let Ok((kind, _)) = varint::read(block) else {
            // Not a block this writer encoded: an index would be wrong.
            return self.disable();
        };
        varint::write(kind, &mut self.entries);
        varint::write(block.len() as i64, &mut self.entries);
        varint::write(items as i64, &mut self.entries);
        self.count += 1;
        self.span += block.len() as u64;
    }

    /// Stops recording: after a failed write the file no longer matches what was recorded.
    pub fn disable(&mut self) {
        self.enabled = false;
        self.entries = Vec::new();
    }

    /// The index block's payload, if the writer is to write one and it fits in a block body
    /// of `max_block_size` bytes.
    pub fn payload(&self, max_block_size: usize) -> Option<Vec<u8>> {
        if !self.enabled {
            return None;
        }
        let mut payload = Vec::with_capacity(2 * varint::MAX_LEN + self.entries.len());
        varint::write(self.count as i64, &mut payload);
        varint::write(self.span as i64, &mut payload);
        payload.extend_from_slice(&self.entries);
        (payload.len() + block::ENVELOPE_LEN <= max_block_size).then_some(payload)
    }
}

impl ReaderBuilder {
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
    /// let mut writer = cobsfile::WriterBuilder::new().block_size(64).build(Vec::new())?;
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
            if let Some(reader) = Index::find(bytes).and_then(|i| i.seek(self, bytes, record)) {
                return reader;
            }
        }
        let mut reader = self.from_slice(bytes);
        reader.skip_records(record);
        reader
    }
}
