//! Helpers shared by the round-trip and damage tests: record generation, writing, the three
//! readers (slice, mapped, chunked stream), hand-built blocks, and checks that hold for every
//! input, damaged or not.

#![allow(dead_code)]

use std::io::{self, Read, Write};

use cobsfile::{
    varint, BlockType, Cause, Ending, Error, Metadata, Reader, ReaderBuilder, Source, WriterBuilder,
};
use proptest::prelude::*;

mod temp_file;
pub use temp_file::TempFile;

// ---------------------------------------------------------------------------------------------
// Deterministic pseudo-random bytes: large records are generated from a seed rather than element
// by element by proptest, which would be slow in debug builds and shrink badly.

/// SplitMix64.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    pub fn fill(&mut self, out: &mut [u8]) {
        for chunk in out.chunks_mut(8) {
            let word = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }
}

/// What a generated record's bytes look like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Content {
    /// Uniformly random bytes.
    Random,
    /// No 0x00 at all (COBS emits full 0xFF runs).
    ZeroFree,
    /// About half the bytes are 0x00.
    ZeroRich,
    /// Only 0x00.
    AllZero,
    /// Non-zero runs of 253..=255 bytes separated by single zeros: the COBS run-length edges.
    Runs254,
}

pub fn content_strategy() -> impl Strategy<Value = Content> {
    prop_oneof![
        Just(Content::Random),
        Just(Content::ZeroFree),
        Just(Content::ZeroRich),
        Just(Content::AllZero),
        Just(Content::Runs254),
    ]
}

/// Bytes of a record of `len` bytes of the given content, derived from `seed`.
pub fn record_bytes(len: usize, content: Content, seed: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    let mut out = vec![0; len];
    match content {
        Content::AllZero => {}
        Content::Random => rng.fill(&mut out),
        Content::ZeroFree => {
            rng.fill(&mut out);
            for b in &mut out {
                if *b == 0 {
                    *b = 1 + (rng.below(255) as u8);
                }
            }
        }
        Content::ZeroRich => {
            rng.fill(&mut out);
            for b in &mut out {
                if rng.below(2) == 0 {
                    *b = 0;
                }
            }
        }
        Content::Runs254 => {
            let mut at = 0;
            while at < len {
                let run = 253 + rng.below(3) as usize;
                let end = (at + run).min(len);
                for b in &mut out[at..end] {
                    *b = 1 + (rng.below(255) as u8);
                }
                at = end + 1; // out[end] stays 0
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Writing.

/// One call on a writer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Record(Vec<u8>),
    Metadata(Vec<(String, Vec<u8>)>),
}

impl Op {
    pub fn record(&self) -> Option<&[u8]> {
        match self {
            Op::Record(r) => Some(r),
            Op::Metadata(_) => None,
        }
    }
}

/// Metadata entries with unique keys (arbitrary UTF-8, values with zeros).
pub fn metadata_strategy() -> impl Strategy<Value = Vec<(String, Vec<u8>)>> {
    prop::collection::btree_map(
        prop_oneof![".{0,12}", "[a-z]{1,6}"],
        prop::collection::vec(prop_oneof![Just(0u8), any::<u8>()], 0..40),
        0..5,
    )
    .prop_map(|map| map.into_iter().collect())
}

/// The writer options of a test file.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub block_target: usize,
    pub max_body_size: usize,
}

impl Options {
    pub fn block_target(block_target: usize) -> Self {
        Options {
            block_target,
            max_body_size: cobsfile::DEFAULT_MAX_BODY_SIZE,
        }
    }

    pub fn builder(&self) -> WriterBuilder {
        WriterBuilder::new()
            .block_target(self.block_target)
            .max_body_size(self.max_body_size)
    }
}

/// Files of records and metadata, some compressed with a dictionary embedded in the file; a
/// file of one written file, or of two or three written one after the other, so that
/// dictionary blocks come in the middle of files too, and blocks may need a dictionary that
/// is embedded only after them (which no reader may use for them).
pub fn file_strategy() -> impl Strategy<Value = Vec<u8>> {
    let part = (
        prop::collection::vec(
            prop_oneof![
                8 => (0usize..60, content_strategy(), any::<u64>())
                    .prop_map(|(len, c, seed)| Op::Record(record_bytes(len, c, seed))),
                1 => metadata_strategy().prop_map(Op::Metadata),
            ],
            0..60,
        ),
        prop_oneof![1usize..8, 8usize..64, 64usize..300],
        // No dictionary; the first or the second, embedded; the second, not embedded.
        prop_oneof![3 => Just(None), 1 => Just(Some((0, true))), 1 => Just(Some((1, true))), 1 => Just(Some((1, false)))],
    )
        .prop_map(|(ops, block_target, dictionary)| {
            let Some((which, embed)) = dictionary else {
                return write_file(&ops, Options::block_target(block_target));
            };
            let bytes = format!("record metadata event {which}").repeat(8);
            let mut writer = WriterBuilder::new()
                .block_target(block_target)
                .compression(cobsfile::Compression::Zstd { level: 1 })
                .dictionary(cobsfile::Dictionary::new(bytes.into_bytes()), embed)
                .build(Vec::new())
                .unwrap();
            for op in &ops {
                match op {
                    Op::Record(r) => writer.write_record(r).unwrap(),
                    Op::Metadata(m) => writer
                        .write_metadata(m.iter().map(|(k, v)| (k.as_str(), v.as_slice())))
                        .unwrap(),
                }
            }
            writer.finish().unwrap()
        });
    prop_oneof![
        3 => part.clone(),
        1 => prop::collection::vec(part, 2..4).prop_map(|parts| parts.concat()),
    ]
}

/// Writes `ops` into an in-memory file.
pub fn write_file(ops: &[Op], options: Options) -> Vec<u8> {
    let mut writer = options.builder().build(Vec::new()).expect("build");
    for op in ops {
        match op {
            Op::Record(r) => writer.write_record(r).expect("write_record"),
            Op::Metadata(m) => writer
                .write_metadata(m.iter().map(|(k, v)| (k.as_str(), v.as_slice())))
                .expect("write_metadata"),
        }
    }
    writer.finish().expect("finish")
}

/// A `Write` that remembers every `write` call separately.
#[derive(Debug, Default)]
pub struct RecordingWriter {
    pub writes: Vec<Vec<u8>>,
    pub flushes: usize,
}

impl Write for RecordingWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.writes.push(buf.to_vec());
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        self.flushes += 1;
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Hand-built blocks.

/// The bytes of a block of type `type_id` holding `payload`, from the type field up to and
/// including the closing sync byte (the opening sync byte is the previous block's closing one).
/// Built from the format description, independently of the writer: body = codec 0, payload,
/// CRC-32 (little-endian) of type field, codec and payload; on disk: type, length, COBS(body),
/// 0x00, where length counts the COBS body and the closing sync byte.
pub fn raw_block(type_id: i64, payload: &[u8]) -> Vec<u8> {
    raw_block_with(type_id, &[0], payload, payload) // codec: none (zig-zag 0)
}

/// A block built by hand: `fields` (codec, dictionary id, size), then `stored`, then the CRC
/// of the type field, `fields` and `crc_payload` (the payload uncompressed).
pub fn raw_block_with(type_id: i64, fields: &[u8], stored: &[u8], crc_payload: &[u8]) -> Vec<u8> {
    let mut type_field = Vec::new();
    varint::write(type_id, &mut type_field);
    let mut body = fields.to_vec();
    body.extend_from_slice(stored);
    let mut crc = crc32fast::Hasher::new();
    crc.update(&type_field);
    crc.update(fields);
    crc.update(crc_payload);
    body.extend_from_slice(&crc.finalize().to_le_bytes());
    let mut encoded = Vec::new();
    cobsfile::cobs::encode(&body, &mut encoded);
    let mut out = type_field;
    varint::write(encoded.len() as i64 + 1, &mut out);
    out.extend_from_slice(&encoded);
    out.push(0);
    out
}

/// The payload of a header block declaring `version`.
pub fn header_payload(version: i64) -> Vec<u8> {
    let mut payload = cobsfile::MAGIC.to_vec();
    varint::write(version, &mut payload);
    payload
}

/// The payload of a data block.
pub fn data_payload(records: &[&[u8]]) -> Vec<u8> {
    let mut payload = Vec::new();
    varint::write(records.len() as i64, &mut payload);
    for r in records {
        varint::write(r.len() as i64, &mut payload);
        payload.extend_from_slice(r);
    }
    payload
}

// ---------------------------------------------------------------------------------------------
// Readers.

/// An `io::Read` that hands out its bytes in chunks of random size (1 byte and up).
#[derive(Debug)]
pub struct ChunkedReader<'a> {
    data: &'a [u8],
    pos: usize,
    rng: Rng,
    max_chunk: usize,
}

impl<'a> ChunkedReader<'a> {
    pub fn new(data: &'a [u8], seed: u64, max_chunk: usize) -> Self {
        ChunkedReader {
            data,
            pos: 0,
            rng: Rng::new(seed),
            max_chunk: max_chunk.max(1),
        }
    }
}

impl Read for ChunkedReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // Mostly tiny chunks, sometimes up to `max_chunk`.
        let want = if self.rng.below(4) == 0 {
            1 + self.rng.below(self.max_chunk as u64) as usize
        } else {
            1 + self.rng.below(16.min(self.max_chunk) as u64) as usize
        };
        let n = want.min(buf.len()).min(self.data.len() - self.pos);
        buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// An error, reduced to what can be compared across readers. `SyncMismatch::found` is dropped:
/// a streaming reader names the end of its window when the next sync byte lies beyond it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    Damaged { start: u64, end: u64, cause: Cause },
    Version { offset: u64, version: i64 },
    Other(String),
}

impl From<Error> for Fault {
    fn from(e: Error) -> Self {
        match e {
            Error::Damaged { start, end, cause } => {
                let cause = match cause {
                    Cause::SyncMismatch { expected, .. } => {
                        Cause::SyncMismatch { expected, found: 0 }
                    }
                    other => other,
                };
                Fault::Damaged { start, end, cause }
            }
            Error::UnsupportedVersion {
                offset,
                version,
                supported,
            } => {
                assert_eq!(supported, cobsfile::FORMAT_VERSION);
                Fault::Version { offset, version }
            }
            other => Fault::Other(other.to_string()),
        }
    }
}

impl Fault {
    pub fn range(&self) -> Option<(u64, u64)> {
        match self {
            Fault::Damaged { start, end, .. } => Some((*start, *end)),
            _ => None,
        }
    }
}

/// Whether a cause is one of those the crate documents.
pub fn known_cause(cause: &Cause) -> bool {
    matches!(
        cause,
        Cause::NoSync { .. }
            | Cause::ZeroRun { .. }
            | Cause::Varint { .. }
            | Cause::InvalidField { .. }
            | Cause::TooLarge { .. }
            | Cause::Truncated { .. }
            | Cause::SyncMismatch { .. }
            | Cause::Cobs { .. }
            | Cause::BodyTooLarge { .. }
            | Cause::Crc { .. }
            | Cause::UnsupportedCodec { .. }
            | Cause::Dictionary { .. }
            | Cause::SizeMismatch { .. }
            | Cause::Decompress { .. }
            | Cause::Malformed { .. }
    )
}

/// An intact block as `next_block` returned it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blk {
    pub offset: u64,
    pub size: u64,
    pub block_type: BlockType,
    pub items: Option<u64>,
    pub codec: &'static str,
    pub payload_size: u64,
    pub version: Option<i64>,
    pub records: Vec<Vec<u8>>,
    pub entries: Vec<(String, Vec<u8>)>,
    pub payload: Vec<u8>,
}

impl Blk {
    /// Everything a decoded block holds, owned.
    pub fn of(block: &cobsfile::Block<'_>) -> Self {
        let info = block.info();
        Blk {
            offset: info.offset,
            size: info.size,
            block_type: info.block_type,
            items: info.items,
            codec: info.codec,
            payload_size: info.payload_size,
            version: block.version(),
            records: block.records().map(<[u8]>::to_vec).collect(),
            entries: block
                .entries()
                .map(|(k, v)| (k.to_owned(), v.to_vec()))
                .collect(),
            payload: block.payload().to_vec(),
        }
    }
}

/// Everything one kind of reader yields for an input, each API used on a fresh reader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    /// `next_block` until `None`.
    pub blocks: Vec<Result<Blk, Fault>>,
    /// `blocks()`, which must agree with `next_block`.
    pub infos: Vec<Result<cobsfile::BlockInfo, Fault>>,
    /// `read_all`.
    pub records: Vec<Vec<u8>>,
    pub record_errors: Vec<Fault>,
    /// `metadata()`.
    pub metadata: Vec<Result<Metadata, Fault>>,
    pub block_stats: cobsfile::Stats,
    pub record_stats: cobsfile::Stats,
    /// `ending()` after `next_block`, and after `read_all`, returned `None`.
    pub ending: Option<cobsfile::Ending>,
    pub record_ending: Option<cobsfile::Ending>,
}

impl Observed {
    pub fn ok_blocks(&self) -> impl Iterator<Item = &Blk> {
        self.blocks.iter().filter_map(|b| b.as_ref().ok())
    }

    pub fn errors(&self) -> impl Iterator<Item = &Fault> {
        self.blocks.iter().filter_map(|b| b.as_ref().err())
    }
}

/// Everything the readers `make` returns yield, each API used on a fresh reader.
pub fn observe<S: Source>(make: &mut dyn FnMut() -> Reader<S>) -> Observed {
    let mut blocks = Vec::new();
    let mut reader = make();
    while let Some(item) = reader.next_block() {
        blocks.push(match item {
            Ok(block) => Ok(Blk::of(&block)),
            Err(e) => Err(Fault::from(e)),
        });
        assert!(blocks.len() < 1 << 24, "next_block does not end");
    }
    assert!(
        reader.next_block().is_none(),
        "next_block resumed after None"
    );
    let block_stats = reader.stats().clone();
    let ending = reader.ending();

    let mut reader = make();
    let infos = reader
        .blocks()
        .map(|r| r.map_err(Fault::from))
        .collect::<Vec<_>>();

    let mut reader = make();
    let (records, errors) = reader.read_all();
    let record_errors = errors.into_iter().map(Fault::from).collect();
    assert!(
        reader.next_record().is_none(),
        "next_record resumed after None"
    );
    let record_stats = reader.stats().clone();
    let record_ending = reader.ending();

    // `next_item`: the records and errors of `read_all`, with every intact metadata block
    // that `next_block` returns, each where it lies among the records.
    let mut reader = make();
    let (mut item_records, mut item_errors, mut item_metadata) =
        (Vec::new(), Vec::new(), Vec::new());
    while let Some(item) = reader.next_item() {
        match item {
            Ok(cobsfile::Item::Record(record)) => item_records.push(record.to_vec()),
            Ok(cobsfile::Item::Metadata(block)) => item_metadata.push(Blk::of(&block)),
            Err(e) => item_errors.push(Fault::from(e)),
        }
    }
    assert_eq!(item_records, records, "next_item returned other records");
    assert_eq!(
        item_errors, record_errors,
        "next_item returned other errors"
    );
    let metadata_blocks: Vec<Blk> = blocks
        .iter()
        .filter_map(|b| b.as_ref().ok())
        .filter(|b| b.block_type == BlockType::Metadata)
        .cloned()
        .collect();
    assert_eq!(
        item_metadata, metadata_blocks,
        "next_item returned other metadata blocks"
    );

    let mut reader = make();
    let metadata = reader
        .metadata()
        .map(|r| r.map_err(Fault::from))
        .collect::<Vec<_>>();
    assert_eq!(
        reader.ending(),
        None,
        "a skipping scan cannot tell how a file ends"
    );

    Observed {
        blocks,
        infos,
        records,
        record_errors,
        metadata,
        block_stats,
        record_stats,
        ending,
        record_ending,
    }
}

/// Which reader to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    Slice,
    Mapped,
    /// A stream fed in random chunks of 1..=max bytes drawn from the seed.
    Stream {
        seed: u64,
        max_chunk: usize,
    },
}

/// What the reader `via` yields for `bytes`; checks the invariants every input must satisfy.
pub fn read_via(bytes: &[u8], options: &ReaderBuilder, via: Via) -> Observed {
    let observed = match via {
        Via::Slice => observe(&mut || options.from_slice(bytes)),
        Via::Mapped => {
            let file = TempFile::with_contents(bytes);
            let mapped = cobsfile::open(&file.0).expect("map temp file");
            assert_eq!(mapped.bytes(), bytes);
            observe(&mut || mapped.reader_with(options))
        }
        Via::Stream { seed, max_chunk } => {
            observe(&mut || options.from_read(ChunkedReader::new(bytes, seed, max_chunk)))
        }
    };
    check_invariants(bytes, &observed);
    observed
}

/// Reads `bytes` with the slice reader, the stream reader (and the mapped reader if asked),
/// checks that they all agree, and returns what the slice reader saw.
pub fn read_all_ways(bytes: &[u8], options: &ReaderBuilder, seed: u64, mapped: bool) -> Observed {
    let slice = read_via(bytes, options, Via::Slice);
    let stream = read_via(
        bytes,
        options,
        Via::Stream {
            seed,
            max_chunk: 1 + (seed >> 48) as usize % 5000,
        },
    );
    assert_eq!(
        slice, stream,
        "the stream reader disagrees with the slice reader"
    );
    if mapped {
        let mapped = read_via(bytes, options, Via::Mapped);
        assert_eq!(
            slice, mapped,
            "the mapped reader disagrees with the slice reader"
        );
    }
    slice
}

/// What holds for any input:
/// - the items of `next_block` tile the input: after skipping padding (extra sync bytes), each
///   intact block starts at the sync byte where the previous item ended; each error starts one
///   byte after that sync byte and ends at the next sync byte or at the end of the input; the
///   last item ends at the last byte (or only padding follows), or at the end of the input
///   after an error;
/// - every error is `Damaged` with `start < end <= len`, except an `UnsupportedVersion`, which
///   ends iteration;
/// - damage is merged: between two `Damaged` errors lies an intact block (damage found by the
///   frame scanner and blocks that fail to decode alike; the spec's "consecutive damaged
///   ranges with no intact block between them are reported as one range");
/// - `blocks()` agrees with `next_block`, `read_all` yields the records of the data blocks and
///   the same errors, `metadata()` yields the metadata blocks (a subset of them after damage);
/// - the stats count what was yielded.
pub fn check_invariants(bytes: &[u8], o: &Observed) {
    let len = bytes.len() as i64;
    // Index of the sync byte the previous item ended on: at first the opening sync byte, or
    // -1 when the input does not start with one.
    let mut at: i64 = if bytes.first() == Some(&0) { 0 } else { -1 };
    // Skips padding: one extra sync byte after `at` (a longer run of zeros is damage).
    let skip = |at: i64| {
        let zero = |i: i64| i < len && bytes[i as usize] == 0;
        if zero(at + 1) && !zero(at + 2) {
            at + 1
        } else {
            at
        }
    };
    // Whether the item before was a damaged range, and if so whether damage or unreadable.
    let mut previous_damaged: Option<bool> = None;
    let mut damaged_bytes = 0;
    for (i, item) in o.blocks.iter().enumerate() {
        match item {
            Ok(b) => {
                at = skip(at);
                assert_eq!(
                    b.offset as i64, at,
                    "block {i} does not start where the last item ended"
                );
                assert_eq!(bytes[b.offset as usize], 0);
                assert!(b.size > 0);
                at = (b.offset + b.size) as i64;
                assert!(at < len, "block {i} runs past the input");
                assert_eq!(
                    bytes[at as usize], 0,
                    "block {i} does not end on a sync byte"
                );
                assert!(!bytes[b.offset as usize + 1..at as usize].contains(&0));
                previous_damaged = None;
            }
            Err(Fault::Damaged { start, end, cause }) => {
                at = skip(at);
                let (start, end) = (*start as i64, *end as i64);
                assert_eq!(
                    start,
                    at + 1,
                    "error {i} does not start after the last sync byte"
                );
                assert!(
                    start < end && end <= len,
                    "error {i}: bad range {start}..{end} of {len}"
                );
                assert!(
                    end == len || bytes[end as usize] == 0,
                    "error {i} ends off a sync byte"
                );
                // Ranges with no intact block between them are of two kinds, damage and
                // unreadable, in turn (spec 9.1).
                assert!(
                    previous_damaged != Some(cause.is_damage()),
                    "two damaged regions of one kind without an intact block between them: {:?}",
                    &o.blocks[i - 1..=i]
                );
                assert!(known_cause(cause));
                previous_damaged = Some(cause.is_damage());
                damaged_bytes += (end - start) as u64;
                at = end;
            }
            Err(Fault::Version { offset, .. }) => {
                assert_eq!(
                    i,
                    o.blocks.len() - 1,
                    "iteration goes on after UnsupportedVersion"
                );
                assert_eq!(*offset as i64, skip(at));
            }
            Err(Fault::Other(e)) => panic!("unexpected error {e}"),
        }
    }
    let stopped = matches!(o.blocks.last(), Some(Err(Fault::Version { .. })));
    if !stopped {
        let after_error = matches!(o.blocks.last(), Some(Err(_)));
        assert!(
            skip(at) == len - 1 || (after_error && at == len),
            "items end at {at}, input at {len}"
        );
    }

    // blocks() is next_block() without the contents.
    let infos: Vec<_> = o
        .blocks
        .iter()
        .map(|b| {
            b.as_ref()
                .map(|b| cobsfile::BlockInfo {
                    offset: b.offset,
                    block_type: b.block_type,
                    size: b.size,
                    items: b.items,
                    codec: b.codec,
                    payload_size: b.payload_size,
                })
                .map_err(Clone::clone)
        })
        .collect();
    assert_eq!(infos, o.infos, "blocks() disagrees with next_block()");

    // Block contents are consistent with their info.
    for b in o.ok_blocks() {
        match b.block_type {
            BlockType::Data => {
                assert_eq!(b.items, Some(b.records.len() as u64));
                assert!(b.entries.is_empty());
            }
            BlockType::Metadata => {
                assert_eq!(b.items, Some(b.entries.len() as u64));
                assert!(b.records.is_empty());
            }
            BlockType::Header => {
                assert_eq!(b.version, Some(cobsfile::FORMAT_VERSION));
                assert_eq!(b.items, None);
            }
            BlockType::Index => assert!(b.items.is_some(), "an index block counts its entries"),
            BlockType::End | BlockType::Log => {
                assert_eq!(
                    (b.items, b.payload_size),
                    (None, 0),
                    "end and log blocks are empty"
                );
            }
            BlockType::Dictionary | BlockType::Unknown(_) => assert_eq!(b.items, None),
            _ => unreachable!("a block_type this test does not know"),
        }
    }

    // How the input ends (spec 9.5.1), from the items alone: the last intact block, whether
    // damage follows it, and the last end or log block since the last header block.
    let stopped = matches!(o.blocks.last(), Some(Err(Fault::Version { .. })));
    let expected = (!stopped).then(|| {
        let last = o.blocks.iter().rposition(|b| b.is_ok());
        let damage_after = o.blocks.len() > last.map_or(0, |i| i + 1);
        let mark = o
            .ok_blocks()
            .map(|b| b.block_type)
            .filter(|t| matches!(t, BlockType::Header | BlockType::End | BlockType::Log))
            .last();
        let last_type = last.map(|i| o.blocks[i].as_ref().unwrap().block_type);
        if bytes.is_empty() {
            Ending::Empty
        } else if matches!(last_type, Some(BlockType::End | BlockType::Index)) && !damage_after {
            Ending::Finished
        } else if mark == Some(BlockType::Log) {
            Ending::Open
        } else {
            Ending::Unfinished
        }
    });
    assert_eq!(o.ending, expected, "the ending after next_block");
    assert_eq!(o.record_ending, expected, "the ending after read_all");

    // read_all() = the records of the data blocks, and the same errors.
    let records: Vec<Vec<u8>> = o.ok_blocks().flat_map(|b| b.records.clone()).collect();
    assert_eq!(o.records, records, "read_all disagrees with next_block");
    let errors: Vec<Fault> = o.errors().cloned().collect();
    assert_eq!(
        o.record_errors, errors,
        "read_all errors disagree with next_block"
    );

    // metadata(): on an intact input exactly the metadata blocks; always only metadata blocks
    // that next_block also found, in order (a damaged data block is skipped by its length and
    // not reported, so errors differ).
    let metadata_blocks: Vec<Metadata> = o
        .ok_blocks()
        .filter(|b| b.block_type == BlockType::Metadata)
        .map(|b| Metadata {
            offset: b.offset,
            entries: b.entries.clone(),
        })
        .collect();
    let found: Vec<Metadata> = o
        .metadata
        .iter()
        .filter_map(|m| m.as_ref().ok().cloned())
        .collect();
    assert!(
        is_subsequence(&found, &metadata_blocks),
        "metadata() found blocks next_block did not: {found:?} vs {metadata_blocks:?}"
    );
    for m in &o.metadata {
        match m {
            Ok(_) => {}
            Err(Fault::Damaged { start, end, .. }) => assert!(start <= end && *end as i64 <= len),
            Err(Fault::Version { .. }) => {}
            Err(Fault::Other(e)) => panic!("unexpected error {e}"),
        }
    }
    if o.errors().next().is_none() {
        assert_eq!(found, metadata_blocks);
        assert!(o.metadata.iter().all(Result::is_ok));
    }

    // Stats.
    let damaged_regions = o.errors().filter(|e| e.range().is_some()).count() as u64;
    let intact = o.ok_blocks().count() as u64;
    assert_eq!(o.block_stats.blocks, intact);
    assert_eq!(o.block_stats.damaged_regions, damaged_regions);
    assert_eq!(o.block_stats.damaged_bytes, damaged_bytes);
    assert_eq!(o.block_stats.unknown_blocks, 0);
    assert_eq!(o.record_stats.blocks, intact);
    assert_eq!(o.record_stats.damaged_regions, damaged_regions);
    assert_eq!(o.record_stats.damaged_bytes, damaged_bytes);
    let unknown = o
        .ok_blocks()
        .filter(|b| matches!(b.block_type, BlockType::Unknown(_)))
        .count();
    assert_eq!(o.record_stats.unknown_blocks, unknown as u64);
}

/// Whether `needle` is a subsequence of `haystack`.
pub fn is_subsequence<T: PartialEq>(needle: &[T], haystack: &[T]) -> bool {
    let mut rest = haystack.iter();
    needle.iter().all(|n| rest.any(|h| h == n))
}

/// The default proptest configuration with `cases` cases, overridable by PROPTEST_CASES.
pub fn config(cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    ProptestConfig {
        cases,
        // Failure persistence files would land next to the tests; the seed is printed anyway.
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Cut points from 0 to past the end: `n` random points in `0..=len + 2`, sorted.
pub fn cuts(len: usize, points: &[u64]) -> Vec<u64> {
    let mut cuts: Vec<u64> = points.iter().map(|p| p % (len as u64 + 3)).collect();
    cuts.push(0);
    cuts.push(u64::MAX);
    cuts.sort_unstable();
    cuts
}

/// Damage applied to a file: flips, zeroed bytes, inserted and deleted bytes.
pub fn damage(file: &mut Vec<u8>, edits: &[(u64, u8, u8)]) {
    for &(at, block_type, value) in edits {
        if file.is_empty() {
            return;
        }
        let at = (at % file.len() as u64) as usize;
        match block_type % 5 {
            0 | 1 => file[at] ^= value.max(1),
            2 => file[at] = 0,
            3 => file.insert(at, value),
            _ => {
                file.remove(at);
            }
        }
    }
}
