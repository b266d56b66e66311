//! Block bodies: the envelope every block shares (codec, checksum) and the payloads of the
//! block types this version defines. Pure functions over byte slices, no I/O.
//!
//! A block on disk is `type length COBS(body) 0x00`; see `frame` for the part outside the body.
//! The decoded body is
//!
//! ```text
//! codec    varint    0 = none, 1 = zstd, 2 = zstd with a dictionary
//! dict id  8 bytes   codec 2 only: the dictionary's XXH64, little-endian
//! size     varint    codecs 1 and 2: the payload's uncompressed size
//! payload  bytes     depends on the block type; one zstd frame for codecs 1 and 2
//! crc32    4 bytes   little-endian CRC-32 (IEEE) of the type varint, the fields before the
//!                    payload and the payload uncompressed
//! ```

use std::collections::HashSet;
use std::ops::Range;
use std::sync::Mutex;

use crate::cobs;
use crate::codec::{self, Compressor, DecompressError, Decompressor};
use crate::error::{Cause, Error, Result};
use crate::time::{self, Window};
use crate::varint;

/// The format version this library writes and the newest it reads.
pub const FORMAT_VERSION: i64 = 1;

/// The magic at the start of every header block's payload.
pub const MAGIC: &[u8; 8] = b"COBSFILE";

/// Bytes of the body that are not payload when the codec is `none`: codec id and CRC.
pub const ENVELOPE_LEN: usize = 1 + 4;

/// Block type ids as they appear (zig-zag encoded) in the type field.
pub mod types {
    /// The file header: magic and format version.
    pub const HEADER: i64 = 1;
    /// A map of UTF-8 keys to byte values.
    pub const METADATA: i64 = 2;
    /// A batch of records.
    pub const DATA: i64 = 3;
    /// A zstd dictionary that later blocks are compressed with.
    pub const DICTIONARY: i64 = 4;
    /// The offsets, sizes and record counts of the blocks before it.
    pub const INDEX: i64 = 5;
    /// The last block of a finished file; empty.
    pub const END: i64 = 6;
    /// What follows is an append-only log, open for appending; empty.
    pub const LOG: i64 = 7;
    /// The times of the records of the data block after it.
    pub const TIME: i64 = 8;
    /// The spans of the time blocks the index after it lists.
    pub const TIME_INDEX: i64 = 9;
    /// Never a block's type: in an index, bytes between two blocks (padding, damage).
    pub const GAP: i64 = 10;
    /// A signed statement of the blocks a writer wrote (spec 8.10).
    pub const SEAL: i64 = 11;
}

/// What a block holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BlockType {
    /// The file header (magic and format version).
    Header,
    /// Metadata: UTF-8 keys with byte values.
    Metadata,
    /// Records.
    Data,
    /// A zstd dictionary, named by the XXH64 of its bytes.
    Dictionary,
    /// The index of the blocks before it (see [`Index`](crate::Index)).
    Index,
    /// The last block of a file its writer finished ([`Writer::finish`](crate::Writer::finish));
    /// its payload is empty. See [`Ending`](crate::Ending).
    End,
    /// Declares that what follows is an append-only log, open for appending (spec 8.7): an
    /// [`Appender`](crate::Appender) writes it when it starts a file, and before it appends to
    /// one that is not an open log. Its payload is empty. See [`Ending`](crate::Ending).
    Log,
    /// The event times of the records of the data block right after it (spec 8.8); see
    /// [`Block::times`](crate::Block::times).
    Time,
    /// The spans of the time blocks that the index block after it lists (spec 8.9), by which
    /// a window read of a finished file reads only the blocks it needs.
    TimeIndex,
    /// A writer's signed statement of the blocks it wrote since its previous seal (spec 8.10;
    /// [`seal`](crate::seal)).
    Seal,
    /// Never the type of a block (a block of type 10 is one of a type this version does not
    /// define): in an [`Index`](crate::Index), an entry for bytes between two blocks that are
    /// no block, the padding an appender's fences leave or damage (spec 8.5).
    Gap,
    /// A type this version does not define; readers skip it.
    Unknown(i64),
}

impl BlockType {
    /// The block type of a block whose type id is `id`: [`BlockType::Gap`] never (type 10 is
    /// one this version does not define); [`BlockType::of_entry`] gives an index entry's.
    pub fn from_type(id: i64) -> Self {
        match id {
            types::HEADER => BlockType::Header,
            types::METADATA => BlockType::Metadata,
            types::DATA => BlockType::Data,
            types::DICTIONARY => BlockType::Dictionary,
            types::INDEX => BlockType::Index,
            types::END => BlockType::End,
            types::LOG => BlockType::Log,
            types::TIME => BlockType::Time,
            types::TIME_INDEX => BlockType::TimeIndex,
            types::SEAL => BlockType::Seal,
            other => BlockType::Unknown(other),
        }
    }

    /// The type of an index entry whose type id is `id`: as [`from_type`](Self::from_type),
    /// but 10 is [`BlockType::Gap`] (spec 8.5).
    pub fn of_entry(id: i64) -> Self {
        match id {
            types::GAP => BlockType::Gap,
            other => BlockType::from_type(other),
        }
    }

    /// The type id of this block type.
    pub fn type_id(self) -> i64 {
        match self {
            BlockType::Header => types::HEADER,
            BlockType::Metadata => types::METADATA,
            BlockType::Data => types::DATA,
            BlockType::Dictionary => types::DICTIONARY,
            BlockType::Index => types::INDEX,
            BlockType::End => types::END,
            BlockType::Log => types::LOG,
            BlockType::Time => types::TIME,
            BlockType::TimeIndex => types::TIME_INDEX,
            BlockType::Seal => types::SEAL,
            BlockType::Gap => types::GAP,
            BlockType::Unknown(id) => id,
        }
    }

    /// A short lowercase name: `header`, `metadata`, `data`, `dictionary`, `index`, `end`,
    /// `log`, `time`, `time-index`, `seal`, `gap` or `unknown(N)`.
    pub fn name(self) -> String {
        match self {
            BlockType::Header => "header".into(),
            BlockType::Metadata => "metadata".into(),
            BlockType::Data => "data".into(),
            BlockType::Dictionary => "dictionary".into(),
            BlockType::Index => "index".into(),
            BlockType::End => "end".into(),
            BlockType::Log => "log".into(),
            BlockType::Time => "time".into(),
            BlockType::TimeIndex => "time-index".into(),
            BlockType::Seal => "seal".into(),
            BlockType::Gap => "gap".into(),
            BlockType::Unknown(id) => format!("unknown({id})"),
        }
    }
}

/// Room left in front of an encoded body for the type and length varints and one sync byte.
pub(crate) const HEADER_ROOM: usize = 1 + 2 * varint::MAX_LEN;

/// Encodes one block of type `block_type` holding `payload` into `out` (cleared first), compressed
/// with `compressor` when given and when that makes it smaller, and returns the offset in `out`
/// where the block starts. The block is `out[start..]`: type, length, COBS body and closing
/// sync byte; `out[start - 1]` is free for a leading sync byte.
pub(crate) fn encode(
    block_type: i64,
    payload: &[u8],
    compressor: Option<&mut Compressor>,
    out: &mut Vec<u8>,
) -> Result<usize> {
    let mut compressor = compressor;
    // Codec, dictionary id and size: the fields before the stored payload.
    let mut fields = Fields::default();
    let mut stored = payload;
    // What the CRC covers after the fields: the payload, as lines for codecs 3 and 4.
    let mut plain = payload;
    // A data block's records as lines, when they are compressed so (spec 8.3), in the
    // compressor's buffer (given back below).
    let mut lines = (compressor.as_deref_mut())
        .map(|c| std::mem::take(&mut c.line_buffer))
        .unwrap_or_default();
    if let Some(compressor) = compressor.as_deref_mut() {
        let as_lines = block_type == types::DATA
            && compressor.lines()
            && records_as_lines(payload, &mut lines);
        let dictionary = compressor.dictionary_id();
        let to_compress = if as_lines { &lines[..] } else { payload };
        let frame = compressor.compress(to_compress)?;
        let codec = match (dictionary, as_lines) {
            (Some(_), false) => codec::ZSTD_DICTIONARY,
            (None, false) => codec::ZSTD,
            (Some(_), true) => codec::ZSTD_DICTIONARY_LINES,
            (None, true) => codec::ZSTD_LINES,
        };
        fields.varint(codec);
        if let Some(id) = dictionary {
            fields.bytes(&id.to_le_bytes());
        }
        fields.varint(to_compress.len() as i64);
        if fields.len + frame.len() < 1 + payload.len() {
            stored = frame;
            plain = to_compress;
        } else {
            fields = Fields::default();
        }
    }
    if fields.len == 0 {
        fields.varint(codec::NONE);
    }
    let fields = fields.as_slice();

    out.clear();
    out.reserve(HEADER_ROOM + cobs::max_encoded_len(fields.len() + stored.len() + 4) + 1);
    out.resize(HEADER_ROOM, 0);
    let mut type_field = [0; varint::MAX_LEN];
    let type_len = varint::encode(block_type, &mut type_field);
    let mut crc = crc32fast::Hasher::new();
    crc.update(&type_field[..type_len]);
    crc.update(fields);
    crc.update(plain);

    let mut body = cobs::Encoder::new(out);
    body.push(fields);
    body.push(stored);
    let start = close_body(body, crc.finalize(), &type_field[..type_len]);
    if let Some(compressor) = compressor {
        lines.clear();
        compressor.line_buffer = lines;
    }
    Ok(start)
}

/// Writes the records of the data payload `payload` (spec 8.3) as lines into `lines`
/// (cleared first): each followed by 0x0A. False, leaving `lines` in any state, if a record
/// holds 0x0A, or the payload is not one this crate's writer made.
fn records_as_lines(payload: &[u8], lines: &mut Vec<u8>) -> bool {
    lines.clear();
    let Ok((_, mut at)) = varint::read(payload) else {
        return false;
    };
    lines.reserve(payload.len());
    while at < payload.len() {
        let Some(item) = next_string(&payload[at..]) else {
            return false;
        };
        let record = &payload[at + item.start..at + item.end];
        if memchr::memchr(b'\n', record).is_some() {
            return false;
        }
        lines.extend_from_slice(record);
        lines.push(b'\n');
        at += item.end;
    }
    true
}

/// Turns the records as lines `lines` (spec 8.3) into the data payload of the same records
/// in `out` (cleared first), from the offset it returns on; refuses a payload that would be
/// over `max_body` bytes before making room for it.
fn lines_as_records(
    lines: &[u8],
    out: &mut Vec<u8>,
    max_body: usize,
    records: &mut Vec<(u32, u32)>,
) -> Result<Lines, LinesError> {
    if lines.last().is_some_and(|&last| last != b'\n') {
        return Err(LinesError::Unterminated);
    }
    // A record's length takes one byte more than its newline did for each 64 bytes of it at
    // most, and the count at most 10: within this bound the exact size needs no pass of its
    // own.
    let bound = lines.len() as u64 + lines.len() as u64 / 64 + varint::MAX_LEN as u64;
    let mut count = 0u64;
    if bound > max_body as u64 {
        let mut size = 0u64;
        let mut start = 0;
        for end in memchr::memchr_iter(b'\n', lines) {
            let len = (end - start) as i64;
            size += (varint::encoded_len(len) + (end - start)) as u64;
            count += 1;
            start = end + 1;
        }
        size += varint::encoded_len(count as i64) as u64;
        if size > max_body as u64 {
            return Err(LinesError::TooLarge(size));
        }
    }
    out.clear();
    make_room(out, bound.min(max_body as u64) as usize);
    // Room for the count, written when it is known: its bytes are moved only if it takes
    // other than the room left.
    out.resize(varint::MAX_LEN, 0);
    // Each record's range, noted as the conversion goes (what `check_records` would note
    // of the payload it makes, which is well formed by construction): kept as it keeps them.
    // Past `bound / KEEP_BYTES_PER_RECORD` records they cannot be kept (the payload is at most
    // `bound` bytes): no more are noted, nor room made for them, so a flood of empty lines
    // costs no more room for ranges than the payload's size, as `check_records` allows.
    records.clear();
    let keep = bound <= u32::MAX as u64;
    let most = (bound / KEEP_BYTES_PER_RECORD) as usize;
    if keep && records.capacity() < lines.len() / 32 {
        records.reserve_exact(lines.len() / 32);
    }
    let mut start = 0;
    let mut counted = 0u64;
    for end in memchr::memchr_iter(b'\n', lines) {
        varint::write((end - start) as i64, out);
        if keep && records.len() < most {
            if records.len() == records.capacity() {
                // Doubling, but never past `most`.
                let room = records.capacity().max(64).min(most - records.len());
                records.reserve_exact(room);
            }
            records.push((out.len() as u32, (out.len() + end - start) as u32));
        }
        out.extend_from_slice(&lines[start..end]);
        start = end + 1;
        counted += 1;
    }
    debug_assert!(count == 0 || count == counted);
    let mut field = [0; varint::MAX_LEN];
    let len = varint::encode(counted as i64, &mut field);
    let at = varint::MAX_LEN - len;
    out[at..varint::MAX_LEN].copy_from_slice(&field[..len]);
    let kept = keep && counted.saturating_mul(KEEP_BYTES_PER_RECORD) <= (out.len() - at) as u64;
    if !kept {
        records.clear();
    }
    Ok(Lines {
        at,
        count: counted,
        kept,
    })
}

/// A data payload made of records as lines: where it starts in its buffer, its record count,
/// and whether the ranges of its records were kept (as [`check_records`] keeps them).
struct Lines {
    at: usize,
    count: u64,
    kept: bool,
}

/// Why records as lines are not a data payload.
enum LinesError {
    /// The last line has no newline.
    Unterminated,
    /// The records' payload would take this many bytes, more than a reader holds.
    TooLarge(u64),
}

/// Ends a body encoded from `HEADER_ROOM` on: pushes its CRC, closes the encoding with the
/// sync byte, and writes the type and length fields in front of it. Returns where the block
/// starts, as [`encode`] does.
fn close_body(mut body: cobs::Encoder<'_>, crc: u32, type_field: &[u8]) -> usize {
    body.push(&crc.to_le_bytes());
    let out = body.finish_output();
    out.push(0);

    let length = (out.len() - HEADER_ROOM) as i64;
    let mut length_field = [0; varint::MAX_LEN];
    let length_len = varint::encode(length, &mut length_field);
    let start = HEADER_ROOM - type_field.len() - length_len;
    out[start..start + type_field.len()].copy_from_slice(type_field);
    out[start + type_field.len()..HEADER_ROOM].copy_from_slice(&length_field[..length_len]);
    start
}

/// An uncompressed data block encoded as its records arrive. A record of at least
/// [`DIRECT_RECORD`] bytes is checksummed and COBS-encoded from where the caller holds it,
/// instead of first being copied into a payload that [`encode`] then checksums and encodes:
/// the copy was a third of the writer's time on large records (BENCHMARKS.md, "Long
/// records encoded from where they are"). Shorter records are gathered into a payload as
/// before, where that copy costs less than the calls into the checksum and the encoder per
/// record. The blocks are byte for byte the ones `encode` makes of the same records (a test
/// checks).
///
/// The payload starts with the record count, known only when the block closes. Its bytes
/// hold no zero (a varint's last byte is zero only for the value 0, its others have the high
/// bit set, and a block holds at least one record), so their values leave the COBS encoding
/// alone: only their number shapes it. A block so opens with room for a guessed number of
/// count bytes, filled in when it closes. The guess is the size of the last block's count
/// (of the first block's, from its first record and the block target). A block that closes
/// with a count of another size starts again with the right room when all its records were
/// gathered (nothing was encoded yet); otherwise it is decoded and encoded again, once.
#[derive(Debug)]
pub(crate) struct DataEncoder {
    /// The block being encoded, from `HEADER_ROOM` on (see [`encode`]).
    out: Vec<u8>,
    /// The encoding, while a block is open.
    body: Option<cobs::Paused>,
    /// Where the room for the count lies in `out`, and how many bytes it has.
    count_at: usize,
    count_room: usize,
    /// The CRC of the payload encoded so far, after the count.
    crc: crc32fast::Hasher,
    /// Whether any payload after the count has been encoded into `out`.
    encoded: bool,
    /// Payload bytes not yet encoded: records shorter than [`DIRECT_RECORD`] and every
    /// length prefix, checksummed and encoded when a longer record comes or the block
    /// closes. On slices of a few hundred bytes CRC-32 runs at a third of its speed or
    /// less, and a call into the encoder costs as much as copying a short record.
    stage: Vec<u8>,
    /// The size of the last closed block's count, once a block has closed.
    last_count_len: Option<usize>,
    /// Records the block target makes room for, to guess the first block's count.
    block_target: usize,
}

/// Records this long or longer are encoded from where they are; shorter ones are gathered
/// first (see [`DataEncoder::stage`]).
const DIRECT_RECORD: usize = 1024;

impl DataEncoder {
    /// An encoder of data blocks of about `block_target` record bytes each.
    pub(crate) fn new(block_target: usize) -> Self {
        DataEncoder {
            out: Vec::new(),
            body: None,
            count_at: 0,
            count_room: 0,
            crc: crc32fast::Hasher::new(),
            encoded: false,
            stage: Vec::new(),
            last_count_len: None,
            block_target,
        }
    }

    /// Adds a record to the open block, opening one if none is.
    #[inline]
    pub(crate) fn push(&mut self, record: &[u8]) {
        if self.body.is_none() {
            let guess = self.last_count_len.unwrap_or_else(|| {
                let framed = varint::encoded_len(record.len() as i64) + record.len();
                varint::encoded_len((self.block_target / framed).max(1) as i64)
            });
            self.open(guess);
        }
        varint::write(record.len() as i64, &mut self.stage);
        if record.len() < DIRECT_RECORD {
            self.stage.extend_from_slice(record);
        } else {
            self.encode_stage();
            self.encode_bytes(record);
        }
    }

    /// Checksums and encodes `bytes` as the next bytes of the open block's payload.
    fn encode_bytes(&mut self, bytes: &[u8]) {
        self.encoded |= !bytes.is_empty();
        self.crc.update(bytes);
        let paused = self.body.take().expect("a block is open");
        let mut body = paused.resume(&mut self.out);
        body.push(bytes);
        self.body = Some(body.pause());
    }

    /// Encodes what `stage` holds (see [`encode_bytes`](Self::encode_bytes)).
    fn encode_stage(&mut self) {
        let stage = std::mem::take(&mut self.stage);
        self.encode_bytes(&stage);
        self.stage = stage;
        self.stage.clear();
    }

    /// Starts a block with room for `count_room` count bytes (the records gathered in
    /// `stage` stay there).
    fn open(&mut self, count_room: usize) {
        self.out.clear();
        self.out.resize(HEADER_ROOM, 0);
        self.crc = crc32fast::Hasher::new();
        self.encoded = false;
        let mut body = cobs::Encoder::new(&mut self.out);
        body.push(&[codec::NONE as u8]);
        // The codec's zero has just opened a code block, so the room lies in one run.
        self.count_at = body.output_len();
        self.count_room = count_room;
        body.push(&[1; varint::MAX_LEN][..count_room]);
        self.body = Some(body.pause());
    }

    /// Closes the open block, which holds `count` records (at least one), and returns the
    /// offset where it starts in [`output`](Self::output), as [`encode`] does.
    pub(crate) fn finish(&mut self, count: u64) -> Result<usize> {
        let mut count_field = Fields::default();
        count_field.varint(count as i64);
        let count_field = count_field.as_slice();
        self.last_count_len = Some(count_field.len());
        if count_field.len() != self.count_room && !self.encoded {
            self.open(count_field.len());
        }
        self.encode_stage();
        let paused = self.body.take().expect("a block is open");
        if count_field.len() != self.count_room {
            return self.encode_again(paused, count_field);
        }
        self.out[self.count_at..self.count_at + count_field.len()].copy_from_slice(count_field);
        let mut type_field = Fields::default();
        type_field.varint(types::DATA);
        let type_field = type_field.as_slice();
        let mut crc = crc32fast::Hasher::new();
        crc.update(type_field);
        crc.update(&[codec::NONE as u8]);
        crc.update(count_field);
        crc.combine(&self.crc);
        let body = paused.resume(&mut self.out);
        Ok(close_body(body, crc.finalize(), type_field))
    }

    /// Closes the open block, whose count did not fit the room made for it, by decoding the
    /// records back and encoding them again behind `count_field`.
    #[cold]
    fn encode_again(&mut self, paused: cobs::Paused, count_field: &[u8]) -> Result<usize> {
        paused.resume(&mut self.out).finish(HEADER_ROOM);
        let mut payload = Vec::new();
        cobs::decode(&self.out[HEADER_ROOM..], &mut payload)
            .expect("the encoder's own output decodes");
        // The codec, then the room for the count, then the records.
        let records = 1 + self.count_room;
        payload.splice(..records, count_field.iter().copied());
        encode(types::DATA, &payload, None, &mut self.out)
    }

    /// The bytes of the block [`finish`](Self::finish) closed.
    pub(crate) fn output(&self) -> &[u8] {
        &self.out
    }
}

/// The fields before a stored payload, assembled without allocating.
#[derive(Default)]
struct Fields {
    buf: [u8; 2 * varint::MAX_LEN + 8],
    len: usize,
}

impl Fields {
    fn varint(&mut self, n: i64) {
        let mut field = [0; varint::MAX_LEN];
        let len = varint::encode(n, &mut field);
        self.bytes(&field[..len]);
    }

    fn bytes(&mut self, bytes: &[u8]) {
        self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }

    fn as_slice(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// The 19 bytes every file written by this version starts with (spec 5): the leading sync
/// byte and the header block.
pub(crate) fn file_start() -> Vec<u8> {
    let mut out = Vec::new();
    let start = encode(types::HEADER, &header_payload(), None, &mut out)
        .expect("the header block is small");
    out[start - 1] = 0;
    out.drain(..start - 1);
    out
}

/// A block of `block_type` with an empty payload (an end or log block), with its leading
/// sync byte: `00 type length body 00`.
pub(crate) fn empty_block(block_type: i64) -> Vec<u8> {
    let mut out = Vec::new();
    let start = encode(block_type, &[], None, &mut out).expect("an empty block is small");
    out[start - 1] = 0;
    out.drain(..start - 1);
    out
}

/// The payload of a header block.
pub(crate) fn header_payload() -> Vec<u8> {
    let mut payload = MAGIC.to_vec();
    varint::write(FORMAT_VERSION, &mut payload);
    payload
}

/// Appends the payload of a metadata block holding `entries` to `payload` (cleared first).
pub(crate) fn metadata_payload<K, V>(
    entries: impl IntoIterator<Item = (K, V)>,
    payload: &mut Vec<u8>,
) -> Result<()>
where
    K: AsRef<str>,
    V: AsRef<[u8]>,
{
    let mut body = Vec::new();
    let mut keys = HashSet::new();
    for (key, value) in entries {
        let key = key.as_ref();
        if !keys.insert(key.to_owned()) {
            return Err(Error::InvalidMetadata(format!("duplicate key {key:?}")));
        }
        put_bytes(key.as_bytes(), &mut body);
        put_bytes(value.as_ref(), &mut body);
    }
    payload.clear();
    varint::write(keys.len() as i64, payload);
    payload.extend_from_slice(&body);
    Ok(())
}

/// A metadata block holding `entries`, from its type field to its closing sync byte: what a
/// writer appends after a sync byte (a new file's or segment's first blocks, an announcement).
pub(crate) fn metadata_block<K, V>(entries: impl IntoIterator<Item = (K, V)>) -> Result<Vec<u8>>
where
    K: AsRef<str>,
    V: AsRef<[u8]>,
{
    let mut payload = Vec::new();
    metadata_payload(entries, &mut payload)?;
    let mut encoded = Vec::new();
    let at = encode(types::METADATA, &payload, None, &mut encoded)?;
    encoded.drain(..at);
    Ok(encoded)
}

/// Appends a length-prefixed byte string.
#[inline]
pub(crate) fn put_bytes(bytes: &[u8], out: &mut Vec<u8>) {
    varint::write(bytes.len() as i64, out);
    out.extend_from_slice(bytes);
}

/// The buffers a reader decodes blocks into, kept from block to block.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    /// The COBS-decoded body.
    body: Vec<u8>,
    /// The decompressed payload of a compressed block.
    plain: Vec<u8>,
    /// Whether the last payload is in `plain`.
    in_plain: bool,
    /// Where each record of the last decoded data block lies in [`buffer`](Self::buffer),
    /// found by the decoding's check of the payload, when kept (see [`Scratch::records`]).
    records: Vec<(u32, u32)>,
    /// Whether `records` holds the ranges of the last decoded block.
    kept: bool,
    /// The times a time block gives, when the last decoded block is one.
    times: Vec<i64>,
}

/// The most bytes the buffers kept from decodings that ended may hold allocated together
/// (see [`Spares`]): eight of the largest kept, or the hundreds of small blocks' buffers a
/// read with threads has in flight (parts of its ranges of 1 MiB of payload each, every
/// block with its own buffers), so that the next reader of the same options starts with all
/// it needs.
const SPARE_TOTAL: usize = 8 * SPARE_BYTES;

/// The most bytes a kept [`Scratch`] may hold allocated: enough for blocks
/// of the default sizes, uncompressed or compressed.
const SPARE_BYTES: usize = 4 << 20;

/// Buffers kept from decodings that ended, for later decodings of the readers that share
/// them (those of one [`ReaderBuilder`](crate::ReaderBuilder) and its clones): new buffers
/// cost a page fault for every 4 KiB first written, hundreds per reader, which on a reader of
/// a few milliseconds weigh (a quarter of a 2-thread read of 100 MB of large JSON:
/// BENCHMARKS.md, "Buffers kept from reader to reader, and reading shared bytes"). Owned by
/// the readers' options, not the process: readers of unrelated options share nothing.
#[derive(Debug, Default)]
pub(crate) struct Spares {
    /// Decodings' buffers.
    scratches: Mutex<SpareScratches>,
}

/// Buffers kept, each with the bytes it holds allocated, and their sum.
#[derive(Debug, Default)]
struct SpareScratches {
    buffers: Vec<(Scratch, usize)>,
    held: usize,
}

impl SpareScratches {
    /// Keeps `scratch` if it and the kept ones are within [`SPARE_BYTES`] and
    /// [`SPARE_TOTAL`]; frees it otherwise.
    fn keep(&mut self, scratch: Scratch) {
        let held = scratch.held();
        if held > 0 && held <= SPARE_BYTES && self.held + held <= SPARE_TOTAL {
            self.held += held;
            self.buffers.push((scratch, held));
        }
    }

    fn take(&mut self) -> Option<Scratch> {
        let (scratch, held) = self.buffers.pop()?;
        self.held -= held;
        Some(scratch)
    }
}

impl Spares {
    /// Buffers a decoding that ended left, or new ones.
    pub fn scratch(&self) -> Scratch {
        let kept = self
            .scratches
            .lock()
            .map_or_else(|_| None, |mut spare| spare.take());
        let Some(mut scratch) = kept else {
            return Scratch::default();
        };
        // Only the allocations are kept: nothing of what another decoding held shows.
        scratch.body.clear();
        scratch.plain.clear();
        scratch.records.clear();
        scratch.times.clear();
        scratch.in_plain = false;
        scratch.kept = false;
        scratch
    }

    /// Leaves `scratch` to a later decoding (within [`SPARE_BYTES`] and [`SPARE_TOTAL`];
    /// others are freed).
    pub fn keep_scratch(&self, scratch: Scratch) {
        if let Ok(mut spare) = self.scratches.lock() {
            spare.keep(scratch);
        }
    }

    /// How many decodings' buffers are kept now.
    #[cfg(test)]
    pub fn kept(&self) -> usize {
        self.scratches.lock().map_or(0, |spare| spare.buffers.len())
    }
}

/// Record ranges are kept for a data block whose payload has at least this many bytes per
/// record, so that they take at most as much memory as the payload (8 bytes a record): a
/// flood of tiny records is walked instead.
const KEEP_BYTES_PER_RECORD: u64 = 8;

impl Scratch {
    /// The bytes these buffers hold allocated.
    fn held(&self) -> usize {
        self.body.capacity()
            + self.plain.capacity()
            + self.records.capacity() * std::mem::size_of::<(u32, u32)>()
            + self.times.capacity() * std::mem::size_of::<i64>()
    }

    /// The times of the records of the data block after the last decoded block, if that is
    /// a time block.
    pub(crate) fn times(&self) -> &[i64] {
        &self.times
    }

    /// The range in [`buffer`](Self::buffer) of each record of the last decoded block, if it
    /// is a data block whose ranges were kept: the ranges the records' length prefixes give,
    /// which [`Records`] walks to otherwise. Reading them does not touch the payload, so a
    /// reader's thread hands out the records of a block a worker decoded without pulling
    /// the block into its core's cache.
    pub fn records(&self) -> Option<&[(u32, u32)]> {
        self.kept.then_some(&self.records[..])
    }

    /// The buffer that holds the last decoded payload.
    pub fn buffer(&self) -> &[u8] {
        if self.in_plain {
            &self.plain
        } else {
            &self.body
        }
    }
}

/// Makes room in `buf` for `n` bytes, whatever it holds, growing it if it must to `n` bytes and
/// an eighth more, where `Vec` would double its capacity. A [`Scratch`] lives from block to
/// block and is kept from reader to reader only within [`SPARE_BYTES`]: doubling took the
/// buffers of 2 MiB blocks of large JSON, compressed, to 5 MB, which were then freed by every
/// reader and faulted in afresh by the next, 5,000 pages a 2-thread read of 100 MB
/// (BENCHMARKS.md, "Buffers that grow by an eighth").
fn make_room(buf: &mut Vec<u8>, n: usize) {
    if buf.capacity() < n {
        // Without memory, the decoding's own reservation fails (reported) or aborts, as before.
        let _ = buf.try_reserve_exact(n.saturating_add(n / 8) - buf.len());
    }
}

/// A block body decoded into a [`Scratch`].
#[derive(Debug, Clone)]
pub(crate) struct Body {
    /// Where the payload lies in the scratch buffer that holds it.
    pub payload: Range<usize>,
    /// Records in a data block, entries in a metadata or index block.
    pub items: Option<u64>,
    /// The format version a header block declares.
    pub version: Option<i64>,
    /// The codec id the payload was stored with.
    pub codec: i64,
}

/// Where a block lies in the input, for error offsets.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Place {
    /// Absolute offset of the block's opening sync byte.
    pub offset: u64,
    /// Absolute offset of the first byte of the COBS body.
    pub body_offset: u64,
}

/// Decodes and checks the COBS body `encoded` (known to hold no 0x00) of a block whose type
/// field is `type_field`, into `scratch`, refusing bodies and payloads over `max_body` bytes
/// before allocating for them.
pub(crate) fn decode(
    type_field: &[u8],
    block_type: BlockType,
    encoded: &[u8],
    place: Place,
    max_body: usize,
    scratch: &mut Scratch,
    decompressor: &mut Decompressor,
) -> Result<Body, Cause> {
    let offset = place.offset;
    let malformed = |what| Cause::Malformed { offset, what };
    let too_large = |size: u64| Cause::BodyTooLarge {
        offset,
        size,
        limit: max_body as u64,
    };
    scratch.kept = false;
    decompressor.credit(encoded.len());
    make_room(&mut scratch.body, encoded.len());
    cobs::decode_zero_free(encoded, &mut scratch.body).map_err(|e| Cause::Cobs {
        offset: place.body_offset + e.offset as u64,
    })?;
    let body = &scratch.body[..];
    if body.len() > max_body {
        return Err(too_large(body.len() as u64));
    }
    if body.len() < ENVELOPE_LEN {
        return Err(malformed("body too short for codec and CRC"));
    }
    let crc_at = body.len() - 4;
    let stored = u32::from_le_bytes(body[crc_at..].try_into().expect("4 bytes"));
    let fields = &body[..crc_at];
    let (codec, mut at) = varint::read(fields).map_err(|_| malformed("invalid codec varint"))?;
    // Rules of the block types on codecs (spec 9.8, check 11), checked by readers as writers
    // keep them, before the codec's support (check 12): a codec a type does not allow, known
    // or not, makes the block malformed.
    let refused = match block_type {
        BlockType::Header | BlockType::End | BlockType::Log | BlockType::Seal => (codec
            != codec::NONE)
            .then_some("header, end, log or seal block not stored with codec 0"),
        BlockType::Dictionary | BlockType::Time | BlockType::TimeIndex => {
            (codec != codec::NONE && codec != codec::ZSTD).then_some(
                "dictionary, time or time index block stored with a codec other than 0 or 1",
            )
        }
        BlockType::Metadata | BlockType::Index => codec::is_lines(codec)
            .then_some("records as lines (codec 3 or 4) in a block that is not a data block"),
        _ => None,
    };
    if let Some(what) = refused {
        return Err(malformed(what));
    }
    let mut crc = crc32fast::Hasher::new();
    crc.update(type_field);
    scratch.in_plain = codec != codec::NONE;
    // Bytes decompressed, counted against the limit if the block then fails.
    let mut decompressed = 0;
    let payload = match codec {
        codec::NONE => {
            crc.update(fields);
            at..crc_at
        }
        codec::ZSTD | codec::ZSTD_DICTIONARY | codec::ZSTD_LINES | codec::ZSTD_DICTIONARY_LINES => {
            let dictionary =
                if matches!(codec, codec::ZSTD_DICTIONARY | codec::ZSTD_DICTIONARY_LINES) {
                    let id = fields
                        .get(at..at + 8)
                        .ok_or(malformed("dictionary id cut short"))?;
                    at += 8;
                    Some(u64::from_le_bytes(id.try_into().expect("8 bytes")))
                } else {
                    None
                };
            let (size, used) =
                varint::read(&fields[at..]).map_err(|_| malformed("invalid size varint"))?;
            at += used;
            let size = u64::try_from(size).map_err(|_| malformed("negative size"))?;
            if size > max_body as u64 {
                return Err(too_large(size));
            }
            let size = size as usize;
            decompressor.afford(size).map_err(|limit| Cause::Limit {
                offset,
                what: "bytes decompressed for damaged blocks",
                limit,
            })?;
            decompressed = size;
            make_room(&mut scratch.plain, size);
            decompressor
                .decompress(&fields[at..], dictionary, size, &mut scratch.plain)
                .map_err(|e| match e {
                    DecompressError::Dictionary { needed, given } => Cause::Dictionary {
                        offset,
                        needed,
                        given,
                    },
                    DecompressError::Inflates | DecompressError::Short { .. } => {
                        Cause::SizeMismatch {
                            offset,
                            declared: size as u64,
                        }
                    }
                    DecompressError::Zstd(problem) => Cause::Decompress { offset, problem },
                    DecompressError::OutOfMemory => Cause::Decompress {
                        offset,
                        problem: "no memory for the declared size",
                    },
                })
                .inspect_err(|_| decompressor.wasted(size))?;
            crc.update(&fields[..at]);
            crc.update(&scratch.plain);
            0..size
        }
        other => {
            return Err(Cause::UnsupportedCodec {
                offset,
                codec: other,
            })
        }
    };
    let computed = crc.finalize();
    if stored != computed {
        decompressor.wasted(decompressed);
        return Err(Cause::Crc {
            offset,
            stored,
            computed,
        });
    }
    let mut payload = payload;
    let mut lines = None;
    if block_type == BlockType::Data && codec::is_lines(codec) {
        // The records as lines, turned into the payload of spec 8.3 in the body's buffer
        // (the frame in it is spent), each record's range noted on the way.
        let made = lines_as_records(
            &scratch.plain[payload],
            &mut scratch.body,
            max_body,
            &mut scratch.records,
        )
        .map_err(|e| match e {
            LinesError::Unterminated => malformed("records as lines without a last newline"),
            LinesError::TooLarge(size) => too_large(size),
        })?;
        scratch.in_plain = false;
        payload = made.at..scratch.body.len();
        lines = Some(made);
    }
    let mut records = std::mem::take(&mut scratch.records);
    let mut times = std::mem::take(&mut scratch.times);
    let bytes = &scratch.buffer()[payload.clone()];
    let mut kept = false;
    let (items, version) = match block_type {
        BlockType::Data => {
            let (count, keep) = match lines {
                // What the conversion noted is what the check would find (a test checks).
                Some(lines) => (lines.count, lines.kept),
                None => check_records(bytes, payload.start, &mut records).map_err(malformed)?,
            };
            kept = keep;
            (Some(count), None)
        }
        BlockType::Metadata => (Some(check_metadata(bytes).map_err(malformed)?), None),
        BlockType::Header => (None, Some(header_version(bytes).map_err(malformed)?)),
        BlockType::Index => (Some(check_index_payload(bytes).map_err(malformed)?), None),
        // Compressed only when that makes it smaller, so that the time block before a data
        // block is found within a bound of it (spec 8.8, `time::frame_bound`).
        BlockType::Time
            if codec != codec::NONE && scratch.body.len() > ENVELOPE_LEN + bytes.len() =>
        {
            scratch.times = times;
            return Err(malformed("time block compressed to more than its payload"));
        }
        BlockType::Time => {
            match time::parse_payload(bytes, time::max_records(max_body), &mut times) {
                Ok(_) => (Some(times.len() as u64), None),
                Err(bad) => {
                    scratch.times = times;
                    return Err(match bad {
                        time::Bad::Malformed(what) => malformed(what),
                        time::Bad::TooManyRecords => Cause::Limit {
                            offset,
                            what: "records of one time block",
                            limit: time::max_records(max_body),
                        },
                    });
                }
            }
        }
        BlockType::TimeIndex => {
            let entries = time::parse_index_payload(bytes, |_, _| Some(())).map_err(malformed)?;
            (Some(entries), None)
        }
        BlockType::End | BlockType::Log if !bytes.is_empty() => {
            return Err(malformed("end or log block with a payload"))
        }
        // A seal's payload is read by verification alone (spec 8.10).
        BlockType::Dictionary
        | BlockType::End
        | BlockType::Log
        | BlockType::Seal
        | BlockType::Gap
        | BlockType::Unknown(_) => (None, None),
    };
    scratch.records = records;
    scratch.times = times;
    scratch.kept = kept;
    Ok(Body {
        payload,
        items,
        version,
        codec,
    })
}

/// Walks an index payload, calling `each` with every entry's type, size and items, and checks
/// it: counts and sizes in range, the payload used up exactly, the sizes adding up to the span.
/// Returns the span. `each` may stop the walk by returning `None` (reported as malformed).
pub(crate) fn parse_index_payload(
    payload: &[u8],
    mut each: impl FnMut(BlockType, u64, u64) -> Option<()>,
) -> Result<u64, &'static str> {
    let mut fields = varint::Fields::new(payload);
    let count =
        u64::try_from(fields.next("invalid count varint")?).map_err(|_| "negative count")?;
    // Each entry takes at least 3 bytes: this bounds the loop by the payload size.
    if count > payload.len() as u64 / 3 {
        return Err("count larger than the block");
    }
    let span = u64::try_from(fields.next("invalid span varint")?).map_err(|_| "negative span")?;
    let mut sum = 0u64;
    for _ in 0..count {
        let block_type = fields.next("invalid type varint")?;
        let size = fields.next("invalid size varint")?;
        let items = fields.next("invalid items varint")?;
        if block_type == 0 || size <= 0 || items < 0 {
            return Err("index entry out of range");
        }
        sum = sum.checked_add(size as u64).ok_or("index sizes overflow")?;
        each(BlockType::of_entry(block_type), size as u64, items as u64)
            .ok_or("index record counts overflow")?;
    }
    if !fields.is_done() {
        return Err("trailing bytes after the last index entry");
    }
    if sum != span {
        return Err("index sizes do not add up to its span");
    }
    Ok(span)
}

/// Checks the payload of an index block (spec 8.5); returns its entry count.
pub(crate) fn check_index_payload(payload: &[u8]) -> Result<u64, &'static str> {
    let mut count = 0;
    parse_index_payload(payload, |_, _, _| {
        count += 1;
        Some(())
    })?;
    Ok(count)
}

/// Reads the version from a header payload.
fn header_version(payload: &[u8]) -> Result<i64, &'static str> {
    let rest = payload
        .strip_prefix(MAGIC)
        .ok_or("header block without the COBSFILE magic")?;
    let (version, used) = varint::read(rest).map_err(|_| "invalid version varint")?;
    if version < 1 {
        return Err("format version below 1");
    }
    // A newer version may lay out its header differently; only check our own.
    if version <= FORMAT_VERSION && used != rest.len() {
        return Err("trailing bytes after the format version");
    }
    Ok(version)
}

/// Checks a data block's payload (at `base` in its buffer) as [`check_strings`] does, and
/// returns the record count and whether `records` (cleared first) now holds each record's
/// range in the buffer: it does unless the records average under [`KEEP_BYTES_PER_RECORD`]
/// bytes, or the buffer is too large for 32-bit offsets.
fn check_records(
    payload: &[u8],
    base: usize,
    records: &mut Vec<(u32, u32)>,
) -> Result<(u64, bool), &'static str> {
    records.clear();
    let claimed = varint::read(payload).map_or(0, |(count, _)| count.max(0) as u64);
    let keep = base + payload.len() <= u32::MAX as usize
        && claimed.saturating_mul(KEEP_BYTES_PER_RECORD) <= payload.len() as u64;
    if keep && records.capacity() < claimed as usize {
        // Within the payload's size by the test above; a lying count fails the check below.
        // Grown once for blocks of records of at least 32 bytes (a quarter of the payload's
        // size at most), not at every block of more records than any before: a read with
        // threads has hundreds of these buffers in flight.
        let room = (claimed as usize).max(payload.len() / 32);
        records.reserve_exact(room);
    }
    let count = check_strings(payload, 1, |item| {
        if keep {
            records.push(((base + item.start) as u32, (base + item.end) as u32));
        }
    })?;
    Ok((count, keep))
}

/// Checks a payload made of a count and then `count * per_item` length-prefixed byte strings,
/// calling `each` with the range of every string; returns the count.
fn check_strings(
    payload: &[u8],
    per_item: u64,
    mut each: impl FnMut(Range<usize>),
) -> Result<u64, &'static str> {
    let (count, mut at) = varint::read(payload).map_err(|_| "invalid count varint")?;
    let count = u64::try_from(count).map_err(|_| "negative count")?;
    // Each string needs at least its one-byte length: this bounds the loop by the payload size.
    let strings = count
        .checked_mul(per_item)
        .filter(|&n| n <= payload.len() as u64)
        .ok_or("count larger than the block")?;
    for _ in 0..strings {
        let (len, used) = varint::read(&payload[at..]).map_err(|_| "invalid length varint")?;
        at += used;
        let len = usize::try_from(len).map_err(|_| "negative length")?;
        if len > payload.len() - at {
            return Err("item runs past the end of the block");
        }
        each(at..at + len);
        at += len;
    }
    if at != payload.len() {
        return Err("trailing bytes after the last item");
    }
    Ok(count)
}

/// Checks a metadata payload: strings in pairs, keys UTF-8 and unique; returns the entry count.
fn check_metadata(payload: &[u8]) -> Result<u64, &'static str> {
    let count = check_strings(payload, 2, |_| {})?;
    let mut keys = HashSet::new();
    for (key, _) in Entries::new(payload) {
        let key = std::str::from_utf8(key).map_err(|_| "metadata key is not UTF-8")?;
        if !keys.insert(key) {
            return Err("duplicate metadata key");
        }
    }
    Ok(count)
}

/// The records of a data block, borrowed from the decoded block. (Inside the crate it also
/// walks the byte strings of a metadata block, keys and values alternating.)
#[derive(Debug, Clone)]
pub struct Records<'a> {
    rest: &'a [u8],
    /// The records' event times, when a time block describes their block (spec 8.8).
    times: Option<&'a [i64]>,
    /// In a window read (spec 9.9): only the records whose time is in it are returned.
    window: Option<Window>,
    /// Records walked so far.
    walked: usize,
}

impl<'a> Records<'a> {
    /// Iterates over a payload that `decode` has checked.
    pub(crate) fn new(payload: &'a [u8]) -> Self {
        let rest = match varint::read(payload) {
            Ok((_, used)) => &payload[used..],
            Err(_) => &[],
        };
        Records {
            rest,
            times: None,
            window: None,
            walked: 0,
        }
    }

    /// Iterates over the records of a checked data payload whose times are `times`, if they
    /// have times, that lie in `window`, if one is given.
    pub(crate) fn timed(
        payload: &'a [u8],
        times: Option<&'a [i64]>,
        window: Option<Window>,
    ) -> Self {
        Records {
            times,
            window,
            ..Records::new(payload)
        }
    }

    /// The event time of the record returned last, if it has one (spec 8.8).
    pub fn time(&self) -> Option<i64> {
        self.times?.get(self.walked.checked_sub(1)?).copied()
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = &'a [u8];

    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        loop {
            let item = next_string(self.rest)?;
            let bytes = &self.rest[item.clone()];
            self.rest = &self.rest[item.end..];
            self.walked += 1;
            let Some(window) = self.window else {
                return Some(bytes);
            };
            if self.time().is_some_and(|t| window.contains(t)) {
                return Some(bytes);
            }
        }
    }
}

/// The range, within `rest`, of the length-prefixed byte string at its start.
#[inline]
pub(crate) fn next_string(rest: &[u8]) -> Option<Range<usize>> {
    let (len, used) = varint::read(rest).ok()?;
    let len = usize::try_from(len).ok()?;
    let end = used.checked_add(len).filter(|&end| end <= rest.len())?;
    Some(used..end)
}

/// The entries of a checked metadata payload.
#[derive(Debug, Clone)]
pub struct Entries<'a>(Records<'a>);

impl<'a> Entries<'a> {
    pub(crate) fn new(payload: &'a [u8]) -> Self {
        Entries(Records::new(payload))
    }
}

impl<'a> Iterator for Entries<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        Some((self.0.next()?, self.0.next()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::writer::DEFAULT_COMPRESSED_BLOCK_TARGET;
    use proptest::prelude::*;

    #[test]
    fn kept_buffers_are_bounded() {
        let with = |body: usize| Scratch {
            body: Vec::with_capacity(body),
            ..Scratch::default()
        };
        let mut spare = SpareScratches::default();
        spare.keep(with(SPARE_BYTES + 1));
        assert!(spare.buffers.is_empty(), "a buffer over the bound is freed");
        spare.keep(with(0));
        assert!(
            spare.buffers.is_empty(),
            "buffers that hold nothing take no place"
        );
        for _ in 0..SPARE_TOTAL / SPARE_BYTES + 3 {
            spare.keep(with(SPARE_BYTES));
        }
        assert_eq!(spare.buffers.len(), SPARE_TOTAL / SPARE_BYTES);
        assert_eq!(spare.held, SPARE_TOTAL);
        // Small buffers fit where a large one was taken, as many as the bytes allow.
        spare.take().unwrap();
        for _ in 0..SPARE_BYTES / 1000 + 3 {
            spare.keep(with(1000));
        }
        assert!(spare.held <= SPARE_TOTAL && spare.held > SPARE_TOTAL - 1000);
        let count = spare.buffers.len();
        assert_eq!(count, SPARE_TOTAL / SPARE_BYTES - 1 + SPARE_BYTES / 1000);
        while spare.take().is_some() {}
        assert_eq!(spare.held, 0);
    }

    #[test]
    fn a_flood_of_empty_lines_notes_no_more_ranges_than_its_size_allows() {
        // A million empty records: 1 MB of lines, 1 MB of payload and more; their ranges
        // would take 8 MB, and are not kept (under 8 bytes a record).
        let lines = vec![b'\n'; 1 << 20];
        let (mut out, mut noted) = (Vec::new(), Vec::new());
        let made = lines_as_records(&lines, &mut out, 4 << 20, &mut noted)
            .ok()
            .unwrap();
        assert_eq!(made.count, 1 << 20);
        assert!(!made.kept && noted.is_empty());
        let bound = lines.len() + lines.len() / 64 + varint::MAX_LEN;
        assert!(
            noted.capacity() * std::mem::size_of::<(u32, u32)>() <= bound,
            "{} ranges of room",
            noted.capacity()
        );
    }

    #[test]
    fn buffers_grow_by_an_eighth_and_stay_kept() {
        // Compressed blocks of the default 2 MiB target, each a little larger than the last,
        // as a record past the target makes them: payloads and stored bodies (a third).
        let mut scratch = Scratch::default();
        for i in 0..40 {
            let n = DEFAULT_COMPRESSED_BLOCK_TARGET + i * 5_000;
            for (buf, n) in [(&mut scratch.plain, n), (&mut scratch.body, n / 3)] {
                make_room(buf, n);
                assert!(buf.capacity() >= n);
                assert!(buf.capacity() <= n + n / 8, "{} for {n}", buf.capacity());
                // As the decodings fill them, within the room made.
                buf.resize(n, 1);
            }
        }
        let mut spare = SpareScratches::default();
        spare.keep(scratch);
        assert_eq!(
            spare.buffers.len(),
            1,
            "the buffers of default blocks are kept"
        );
    }

    #[test]
    fn reused_buffers_hold_nothing_of_before() {
        let mut scratch = Scratch::default();
        scratch.body.extend_from_slice(b"someone else's records");
        scratch.records.push((0, 4));
        scratch.kept = true;
        let spares = Spares::default();
        spares.keep_scratch(scratch);
        for _ in 0..2 {
            let reused = spares.scratch();
            assert!(reused.buffer().is_empty());
            assert!(reused.records().is_none());
        }
    }

    fn payload(records: &[Vec<u8>]) -> Vec<u8> {
        let mut out = Vec::new();
        varint::write(records.len() as i64, &mut out);
        for r in records {
            put_bytes(r, &mut out);
        }
        out
    }

    type Kept = (Result<(u64, bool), &'static str>, Vec<Vec<u8>>);

    /// What `check_records` keeps, as the records' bytes, placed at `base` in a buffer.
    fn kept(bytes: &[u8], base: usize) -> Kept {
        let mut buffer = vec![0xAA; base];
        buffer.extend_from_slice(bytes);
        let mut records = vec![(7, 9)];
        let checked = check_records(&buffer[base..], base, &mut records);
        let found = records
            .iter()
            .map(|&(s, e)| buffer[s as usize..e as usize].to_vec())
            .collect();
        (checked, found)
    }

    #[test]
    fn a_flood_of_tiny_records_is_walked_not_kept() {
        let tiny = vec![Vec::new(); 1000];
        let (checked, found) = kept(&payload(&tiny), 3);
        assert_eq!(checked, Ok((1000, false)));
        assert!(found.is_empty());
        let wide = vec![vec![1u8; 7]; 1000];
        let (checked, found) = kept(&payload(&wide), 3);
        assert_eq!(checked, Ok((1000, true)));
        assert_eq!(found, wide);
    }

    /// What [`encode`] makes of a data block of `records`.
    fn data_block(records: &[Vec<u8>]) -> Vec<u8> {
        let mut out = Vec::new();
        let start = encode(types::DATA, &payload(records), None, &mut out).unwrap();
        out.split_off(start)
    }

    /// Each block `DataEncoder` closes, with the records of `blocks` pushed one by one.
    fn encoded_blocks(blocks: &[Vec<Vec<u8>>], block_target: usize) -> Vec<Vec<u8>> {
        let mut encoder = DataEncoder::new(block_target);
        blocks
            .iter()
            .map(|records| {
                for record in records {
                    encoder.push(record);
                }
                let start = encoder.finish(records.len() as u64).unwrap();
                encoder.output()[start..].to_vec()
            })
            .collect()
    }

    /// Records of text (no zeros), of binary data (many), or empty, of any length up to past
    /// a code block and past the records checksummed apart.
    fn record_strategy() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            3 => prop::collection::vec(1u8..=255, 0..1400),
            3 => prop::collection::vec(prop_oneof![Just(0u8), any::<u8>()], 0..600),
            1 => Just(Vec::new()),
        ]
    }

    #[test]
    fn counts_that_outgrow_the_room_made_for_them_are_encoded_again() {
        // The first guess from the first record and the target, then the last block's count
        // size: 1 byte, then 2 (64 records and up), then 3 (8192 and up), then 1 again.
        // Records short enough to be gathered start again with the right room; a block that
        // encoded a long record from where it was is decoded and encoded again.
        for long_every in [usize::MAX, 50, 1] {
            let blocks: Vec<Vec<Vec<u8>>> = [1, 64, 63, 8192, 8192, 5, 1]
                .iter()
                .map(|&n| {
                    (0..n)
                        .map(|i| match (i + 1) % long_every {
                            0 => vec![b'y'; DIRECT_RECORD + i % 300],
                            _ => vec![b'x'; i % 300],
                        })
                        .collect()
                })
                .collect();
            for target in [1, 100, 1 << 20] {
                let expected: Vec<Vec<u8>> = blocks.iter().map(|b| data_block(b)).collect();
                assert_eq!(
                    encoded_blocks(&blocks, target),
                    expected,
                    "target {target}, long records every {long_every}"
                );
            }
        }
    }

    proptest! {
        /// A data block encoded record by record is byte for byte what `encode` makes of its
        /// payload, whatever room for the count each block opened with.
        #[test]
        fn data_blocks_encoded_as_records_arrive_are_encode_s(
            blocks in prop::collection::vec(
                prop::collection::vec(record_strategy(), 1..90), 1..5),
            block_target in 1usize..100_000,
        ) {
            let expected: Vec<Vec<u8>> = blocks.iter().map(|b| data_block(b)).collect();
            prop_assert_eq!(encoded_blocks(&blocks, block_target), expected);
        }

        /// Kept ranges are the records a walk of the payload finds.
        #[test]
        fn kept_ranges_are_the_records(
            records in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 0..64),
            base in 0usize..300,
        ) {
            let bytes = payload(&records);
            let (checked, found) = kept(&bytes, base);
            let keep = records.len() * 8 <= bytes.len();
            prop_assert_eq!(checked, Ok((records.len() as u64, keep)));
            if keep {
                prop_assert_eq!(found, records);
            } else {
                prop_assert!(found.is_empty());
            }
        }

        /// Records as lines make a payload the check accepts, with the count and the record
        /// ranges it finds, and the records the lines hold.
        #[test]
        fn lines_as_records_notes_what_the_check_finds(
            records in prop::collection::vec(
                prop::collection::vec(any::<u8>().prop_filter("no newline", |b| *b != b'\n'), 0..80),
                0..60,
            ),
        ) {
            let lines: Vec<u8> = records.iter().flat_map(|r| r.iter().chain(b"\n")).copied().collect();
            let (mut out, mut noted) = (vec![7; 3], Vec::new());
            let made = lines_as_records(&lines, &mut out, 1 << 20, &mut noted).ok().unwrap();
            let payload = &out[made.at..];
            let mut checked = Vec::new();
            prop_assert_eq!(
                check_records(payload, made.at, &mut checked),
                Ok((made.count, made.kept))
            );
            if made.kept {
                prop_assert_eq!(&noted, &checked);
            }
            let walked: Vec<Vec<u8>> = Records::new(payload).map(<[u8]>::to_vec).collect();
            prop_assert_eq!(walked, records);
        }

        /// On any bytes the check is `check_strings`' (count or error), and what it keeps is
        /// what `Records` walks to.
        #[test]
        fn check_records_agrees_with_the_walk(
            bytes in prop::collection::vec(any::<u8>(), 0..200),
            base in 0usize..300,
        ) {
            let (checked, found) = kept(&bytes, base);
            prop_assert_eq!(checked.map(|(count, _)| count), check_strings(&bytes, 1, |_| {}));
            if let Ok((_, true)) = checked {
                let walked: Vec<Vec<u8>> = Records::new(&bytes).map(<[u8]>::to_vec).collect();
                prop_assert_eq!(found, walked);
            }
        }
    }
}
