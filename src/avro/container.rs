//! Avro object container files (Apache Avro specification, "Object Container Files"), read
//! through damage and written: what `cobsfile import` and `cobsfile export` convert.
//!
//! A container file is the magic `Obj\x01`, a metadata map (the schema under `avro.schema`,
//! the codec under `avro.codec`, and the user's entries), a 16-byte sync marker, then blocks:
//! a count of datums, the size of the block's bytes, those bytes (the datums, compressed by
//! the codec), and the sync marker again. Avro's own readers stop at the first block that
//! does not parse. [`Container`] instead checks every block whole (its sizes, the sync marker
//! after it, its decompression, and that exactly its count of datums walk its bytes to their
//! end under the schema and decode, as the typed writer and readers decode them) and, past a block that fails, finds the next sync marker and reads on,
//! reporting the bytes it skipped: a damaged block costs itself.
//!
//! Avro blocks carry no checksum of their own. Of the codecs, `snappy` adds a CRC-32, and
//! `bzip2` and `xz` check their data; `null`, `deflate` and `zstandard` (whose Avro writers
//! leave out zstd's optional checksum) do not: damage to such a block that keeps its structure
//! whole (a changed digit in a number, a changed letter in a string, a changed compressed byte
//! that still decompresses) cannot be found, by this reader or any other. Once imported into a
//! cobsfile, every block has its CRC.
//!
//! Decompression is bounded: a block whose bytes would decompress to more than the reader's
//! limit is reported, not decompressed.

use std::io::{self, Read, Write};
use std::ops::Range;

use super::check::{self, DatumLimits};
use super::error::{Error, Result};
use super::schema::WriterSchema;

/// The four bytes every container file starts with.
pub const MAGIC: [u8; 4] = *b"Obj\x01";

/// The metadata key of a container file's codec.
pub const CODEC_KEY: &str = "avro.codec";

/// How a container file's blocks are compressed (`avro.codec`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    /// `null`: stored as they are.
    Null,
    /// `deflate`: raw DEFLATE (RFC 1951, no zlib header).
    Deflate,
    /// `snappy`: Snappy, then the CRC-32 of the uncompressed bytes, 4 bytes big-endian.
    Snappy,
    /// `zstandard`: a Zstandard frame.
    Zstandard,
    /// `bzip2`.
    Bzip2,
    /// `xz`.
    Xz,
}

impl Codec {
    /// The codec of the name `avro.codec` holds.
    pub fn from_name(name: &str) -> Option<Codec> {
        Some(match name {
            "null" => Codec::Null,
            "deflate" => Codec::Deflate,
            "snappy" => Codec::Snappy,
            "zstandard" => Codec::Zstandard,
            "bzip2" => Codec::Bzip2,
            "xz" => Codec::Xz,
            _ => return None,
        })
    }

    /// The name `avro.codec` holds.
    pub fn name(self) -> &'static str {
        match self {
            Codec::Null => "null",
            Codec::Deflate => "deflate",
            Codec::Snappy => "snappy",
            Codec::Zstandard => "zstandard",
            Codec::Bzip2 => "bzip2",
            Codec::Xz => "xz",
        }
    }

    /// Decompresses `data` into `out` (cleared first), failing rather than growing `out` past
    /// `max` bytes.
    fn decompress(
        self,
        data: &[u8],
        max: usize,
        out: &mut Vec<u8>,
    ) -> std::result::Result<(), Decompress> {
        out.clear();
        let over = || Decompress::Over(max);
        match self {
            Codec::Null => {
                if data.len() > max {
                    return Err(over());
                }
                out.extend_from_slice(data);
            }
            Codec::Deflate => {
                *out =
                    miniz_oxide::inflate::decompress_to_vec_with_limit(data, max).map_err(|e| {
                        match e.status {
                            miniz_oxide::inflate::TINFLStatus::HasMoreOutput => over(),
                            status => Decompress::Failed(format!("deflate: {status:?}")),
                        }
                    })?;
            }
            Codec::Snappy => {
                let Some(split) = data.len().checked_sub(4) else {
                    return Err("snappy: shorter than its checksum".into());
                };
                let (compressed, crc) = data.split_at(split);
                let len =
                    snap::raw::decompress_len(compressed).map_err(|e| format!("snappy: {e}"))?;
                if len > max {
                    return Err(over());
                }
                out.resize(len, 0);
                let n = snap::raw::Decoder::new()
                    .decompress(compressed, out)
                    .map_err(|e| format!("snappy: {e}"))?;
                out.truncate(n);
                let expected = u32::from_be_bytes(crc.try_into().expect("4 bytes"));
                if crc32fast::hash(out) != expected {
                    return Err("snappy: checksum mismatch".into());
                }
            }
            Codec::Zstandard => {
                let mut decoder = zstd::stream::read::Decoder::with_buffer(data)
                    .map_err(|e| format!("zstandard: {e}"))?;
                read_bounded(&mut decoder, max, out)
                    .map_err(|e| bounded_error(e, "zstandard", &over))?;
            }
            Codec::Bzip2 => {
                let mut decoder = bzip2::read::BzDecoder::new(data);
                read_bounded(&mut decoder, max, out)
                    .map_err(|e| bounded_error(e, "bzip2", &over))?;
            }
            Codec::Xz => {
                let mut decoder = liblzma::read::XzDecoder::new(data);
                read_bounded(&mut decoder, max, out).map_err(|e| bounded_error(e, "xz", &over))?;
            }
        }
        Ok(())
    }

    /// Compresses `data` as this codec writes a block.
    fn compress(self, data: &[u8]) -> io::Result<Vec<u8>> {
        Ok(match self {
            Codec::Null => data.to_vec(),
            Codec::Deflate => miniz_oxide::deflate::compress_to_vec(data, 6),
            Codec::Snappy => {
                let mut out = snap::raw::Encoder::new()
                    .compress_vec(data)
                    .map_err(io::Error::other)?;
                out.extend_from_slice(&crc32fast::hash(data).to_be_bytes());
                out
            }
            Codec::Zstandard => zstd::bulk::compress(data, 3)?,
            Codec::Bzip2 => {
                let mut encoder =
                    bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::default());
                encoder.write_all(data)?;
                encoder.finish()?
            }
            Codec::Xz => {
                let mut encoder = liblzma::write::XzEncoder::new(Vec::new(), 6);
                encoder.write_all(data)?;
                encoder.finish()?
            }
        })
    }
}

/// Why a block did not decompress.
#[derive(Debug)]
enum Decompress {
    /// It decompresses past the limit given (the bytes).
    Over(usize),
    /// Its codec failed on it.
    Failed(String),
}

impl std::fmt::Display for Decompress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Decompress::Over(max) => {
                write!(f, "decompresses to more than the limit of {max} bytes")
            }
            Decompress::Failed(what) => f.write_str(what),
        }
    }
}

impl From<String> for Decompress {
    fn from(what: String) -> Self {
        Decompress::Failed(what)
    }
}

impl From<&str> for Decompress {
    fn from(what: &str) -> Self {
        Decompress::Failed(what.to_owned())
    }
}

/// Reads all of `reader` into `out`, failing with `InvalidData` "over" past `max` bytes.
fn read_bounded(reader: &mut impl Read, max: usize, out: &mut Vec<u8>) -> io::Result<()> {
    let n = reader.take(max as u64 + 1).read_to_end(out)?;
    if n > max {
        return Err(io::Error::new(io::ErrorKind::FileTooLarge, "over"));
    }
    Ok(())
}

fn bounded_error(e: io::Error, codec: &str, over: &dyn Fn() -> Decompress) -> Decompress {
    match e.kind() {
        io::ErrorKind::FileTooLarge => over(),
        _ => Decompress::Failed(format!("{codec}: {e}")),
    }
}

/// What limits a [`Container`] reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "limits do nothing until used: each method returns the changed limits"]
pub struct ContainerLimits {
    max_block: usize,
    max_datums: u64,
    datums: DatumLimits,
    max_total: Option<u64>,
}

impl Default for ContainerLimits {
    fn default() -> Self {
        ContainerLimits {
            max_block: 64 << 20,
            max_datums: 1 << 24,
            datums: DatumLimits::default(),
            max_total: None,
        }
    }
}

/// Bytes of decompressed blocks the whole file may cost per byte of it, by default, besides
/// [`TOTAL_BASE`]: Avro's codecs compress real records 3 to 20 times.
pub const TOTAL_PER_BYTE: u64 = 256;

/// Bytes of decompressed blocks any file may cost, however short, by default: one block of
/// the default largest.
pub const TOTAL_BASE: u64 = 64 << 20;

/// The bytes a datum costs at least, whatever its length: the prefix of the cobsfile record
/// it becomes (datums of a `null` schema take no bytes, and a block of 21 bytes may declare
/// 2^24 of them).
const DATUM_COST: u64 = super::PREFIX_LEN as u64;

impl ContainerLimits {
    /// The most bytes a block may decompress to (default 64 MiB; Avro's writers make blocks
    /// of about 64 KiB).
    pub fn max_block(mut self, bytes: usize) -> Self {
        self.max_block = bytes;
        self
    }

    /// The most datums a block may hold (default 2^24: datums of a `null` schema take no
    /// bytes, so a block's size does not bound its count).
    pub fn max_datums(mut self, datums: u64) -> Self {
        self.max_datums = datums;
        self
    }

    /// What a datum may decode to.
    pub fn datums(mut self, limits: DatumLimits) -> Self {
        self.datums = limits;
        self
    }

    /// The most bytes the whole file's blocks may cost, damaged ones included: what each
    /// decompresses to, and at least 10 bytes per datum (the record it becomes). Default:
    /// [`TOTAL_BASE`] plus [`TOTAL_PER_BYTE`] per byte of the file. Past it, the reader stops
    /// and says so ([`ContainerDamage::over_budget`]): a file of tiny blocks that each
    /// decompress to 64 MiB, or declare millions of empty datums, costs no more.
    pub fn max_total(mut self, bytes: u64) -> Self {
        self.max_total = Some(bytes);
        self
    }
}

/// A container file's header.
#[derive(Debug, Clone)]
pub struct Header {
    /// The writer schema (`avro.schema`).
    pub schema: WriterSchema,
    /// The codec (`avro.codec`; `null` when absent).
    pub codec: Codec,
    /// The user's metadata entries (keys not under `avro.`), in the file's order.
    pub metadata: Vec<(String, Vec<u8>)>,
    /// Avro's other entries (keys under `avro.` but the schema and codec, such as
    /// `avro.codec.compression_level`), which describe the container file only.
    pub avro_metadata: Vec<(String, Vec<u8>)>,
    /// The sync marker.
    pub sync: [u8; 16],
    /// The header's length in bytes: where the first block starts.
    pub len: usize,
}

/// Why a file is not a container file this reader reads; each names the byte offset.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// It does not start with `Obj\x01`.
    #[error("not an Avro object container file (no magic `Obj\\x01` at offset 0)")]
    NoMagic,
    /// The header ends before it is complete.
    #[error("the Avro header is cut short at offset {offset}")]
    Truncated {
        /// Where the file ended.
        offset: u64,
    },
    /// The metadata map does not parse.
    #[error("the Avro header's metadata is malformed at offset {offset}: {what}")]
    Malformed {
        /// Where.
        offset: u64,
        /// What is wrong.
        what: String,
    },
    /// The header has no `avro.schema`, or it does not parse.
    #[error("the Avro header's schema: {0}")]
    Schema(String),
    /// `avro.codec` names a codec this reader does not know.
    #[error("unknown Avro codec {0:?}")]
    UnknownCodec(String),
}

/// A cursor over the bytes of a container file.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    /// An Avro `long`: a zigzag varint of at most 10 bytes.
    fn long(&mut self) -> std::result::Result<i64, HeaderError> {
        let mut value: u64 = 0;
        for i in 0..10 {
            let Some(&byte) = self.bytes.get(self.at) else {
                return Err(HeaderError::Truncated {
                    offset: self.bytes.len() as u64,
                });
            };
            self.at += 1;
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok((value >> 1) as i64 ^ -((value & 1) as i64));
            }
        }
        Err(self.malformed("a long longer than 10 bytes"))
    }

    fn take(&mut self, n: usize) -> std::result::Result<&'a [u8], HeaderError> {
        match self.bytes.get(self.at..).and_then(|rest| rest.get(..n)) {
            Some(taken) => {
                self.at += n;
                Ok(taken)
            }
            None => Err(HeaderError::Truncated {
                offset: self.bytes.len() as u64,
            }),
        }
    }

    /// Avro `bytes` (or `string`): a long length, then that many bytes.
    fn bytes(&mut self) -> std::result::Result<&'a [u8], HeaderError> {
        let len = self.long()?;
        let len = usize::try_from(len).map_err(|_| self.malformed("a negative length"))?;
        self.take(len)
    }

    fn malformed(&self, what: &str) -> HeaderError {
        HeaderError::Malformed {
            offset: self.at as u64,
            what: what.into(),
        }
    }
}

/// Reads a container file's header.
pub fn read_header(bytes: &[u8]) -> std::result::Result<Header, HeaderError> {
    if bytes.len() < MAGIC.len() {
        return Err(if MAGIC.starts_with(bytes) {
            HeaderError::Truncated {
                offset: bytes.len() as u64,
            }
        } else {
            HeaderError::NoMagic
        });
    }
    if bytes[..4] != MAGIC {
        return Err(HeaderError::NoMagic);
    }
    let mut cursor = Cursor { bytes, at: 4 };
    let mut schema = None;
    let mut codec = Codec::Null;
    let mut metadata: Vec<(String, Vec<u8>)> = Vec::new();
    let mut avro_metadata: Vec<(String, Vec<u8>)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    loop {
        let count = cursor.long()?;
        if count == 0 {
            break;
        }
        if count < 0 {
            // A negative count is followed by the block's size in bytes, which is not needed.
            cursor.long()?;
        }
        for _ in 0..count.unsigned_abs() {
            let key = cursor.bytes()?;
            let key = std::str::from_utf8(key)
                .map_err(|_| cursor.malformed("a key that is not UTF-8"))?
                .to_owned();
            let value = cursor.bytes()?.to_vec();
            match key.as_str() {
                super::SCHEMA_KEY => {
                    let json = std::str::from_utf8(&value)
                        .map_err(|_| HeaderError::Schema("not UTF-8".into()))?;
                    schema = Some(
                        WriterSchema::parse(json)
                            .map_err(|e| HeaderError::Schema(e.to_string()))?,
                    );
                }
                CODEC_KEY => {
                    let name = String::from_utf8_lossy(&value);
                    codec = Codec::from_name(&name)
                        .ok_or_else(|| HeaderError::UnknownCodec(name.into_owned()))?;
                }
                _ => {
                    // A set, not a search of the keys so far: a header may hold many.
                    if !seen.insert(key.clone()) {
                        return Err(cursor.malformed(&format!("the key {key:?} twice")));
                    }
                    match key.starts_with("avro.") {
                        true => avro_metadata.push((key, value)),
                        false => metadata.push((key, value)),
                    }
                }
            }
        }
    }
    let schema = schema.ok_or_else(|| HeaderError::Schema("missing (no avro.schema)".into()))?;
    let sync = cursor.take(16)?.try_into().expect("16 bytes");
    Ok(Header {
        schema,
        codec,
        metadata,
        avro_metadata,
        sync,
        len: cursor.at,
    })
}

/// A block of a container file that passed every check.
#[derive(Debug)]
pub struct ContainerBlock {
    /// Where the block starts (its count) and ends (after its sync marker).
    pub range: Range<u64>,
    /// Its datums, decompressed, one after another.
    pub data: Vec<u8>,
    /// How many datums `data` holds.
    pub count: u64,
    /// Where each datum within the limits lies in `data`.
    within: Vec<Range<usize>>,
    /// The datums over a limit (spec 15.4: not damage; they cost themselves only).
    pub over_limit: Vec<OverLimit>,
}

/// A datum of an intact block that decodes past a [`DatumLimits`] limit: left out, the
/// block's other datums kept. A reader with larger limits takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverLimit {
    /// Its place in the block, from 0.
    pub index: u64,
    /// What is limited: `"values"` or `"levels of nesting"`.
    pub what: &'static str,
    /// The limit.
    pub limit: u64,
}

impl ContainerBlock {
    /// The datums of the block within the limits, each its Avro binary encoding as the file
    /// holds it.
    pub fn datums(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.within.iter().map(|range| &self.data[range.clone()])
    }
}

/// Bytes of a container file skipped as damaged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bytes {start}..{end} of the Avro file damaged: {cause}")]
pub struct ContainerDamage {
    /// The first byte skipped.
    pub start: u64,
    /// One past the last (where the next block starts, after a sync marker).
    pub end: u64,
    /// What the first check that failed found.
    pub cause: String,
    /// Whether the reader stopped here because the file's blocks would cost more than
    /// [`ContainerLimits::max_total`]: not damage, and the rest of the file is not read.
    pub over_budget: bool,
}

/// Reads the blocks of a container file through damage (see the [module](self)).
#[derive(Debug)]
pub struct Container<'a> {
    bytes: &'a [u8],
    header: Header,
    at: usize,
    limits: ContainerLimits,
    /// What the blocks may still cost (see [`ContainerLimits::max_total`]).
    left: u64,
}

impl<'a> Container<'a> {
    /// Reads the header of the container file `bytes`.
    pub fn new(bytes: &'a [u8], limits: ContainerLimits) -> std::result::Result<Self, HeaderError> {
        let header = read_header(bytes)?;
        let mut container = Container {
            at: header.len,
            bytes,
            header,
            limits,
            left: 0,
        };
        container.left = container.total();
        Ok(container)
    }

    /// The file's header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The whole budget of this file's blocks.
    fn total(&self) -> u64 {
        self.limits.max_total.unwrap_or_else(|| {
            TOTAL_PER_BYTE
                .saturating_mul(self.bytes.len() as u64)
                .saturating_add(TOTAL_BASE)
        })
    }

    /// The next block, or the damage skipped to reach it; `None` at the end of the file.
    pub fn next_block(&mut self) -> Option<std::result::Result<ContainerBlock, ContainerDamage>> {
        if self.at >= self.bytes.len() {
            return None;
        }
        let start = self.at;
        Some(match self.block(start) {
            Ok(block) => {
                self.at = block.range.end as usize;
                Ok(block)
            }
            Err(cause) if self.left == 0 => {
                // The budget is spent: nothing more is read.
                self.at = self.bytes.len();
                Err(ContainerDamage {
                    start: start as u64,
                    end: self.bytes.len() as u64,
                    cause,
                    over_budget: true,
                })
            }
            Err(cause) => {
                // On to the block after the next sync marker.
                let from = start + 1;
                let end = memchr::memmem::find(&self.bytes[from..], &self.header.sync)
                    .map_or(self.bytes.len(), |i| from + i + 16);
                self.at = end;
                Err(ContainerDamage {
                    start: start as u64,
                    end: end as u64,
                    cause,
                    over_budget: false,
                })
            }
        })
    }

    /// Reads and checks the block at `start`, paying what it costs from the budget (all of
    /// what is left, when it costs more: the budget is then spent).
    fn block(&mut self, start: usize) -> std::result::Result<ContainerBlock, String> {
        let mut cursor = Cursor {
            bytes: self.bytes,
            at: start,
        };
        let count = cursor
            .long()
            .map_err(|e| format!("the block's count: {e}"))?;
        let size = cursor
            .long()
            .map_err(|e| format!("the block's size: {e}"))?;
        let count = u64::try_from(count).map_err(|_| format!("a negative count ({count})"))?;
        let size = usize::try_from(size).map_err(|_| format!("a negative size ({size})"))?;
        if count > self.limits.max_datums {
            return Err(format!(
                "a count of {count} datums, over the limit of {}",
                self.limits.max_datums
            ));
        }
        let data = cursor
            .take(size)
            .map_err(|_| format!("a size of {size} bytes past the end of the file"))?;
        let sync = cursor
            .take(16)
            .map_err(|_| "cut short before its sync marker".to_string())?;
        if sync != self.header.sync {
            return Err(format!(
                "no sync marker after its {size} bytes (at offset {})",
                cursor.at - 16
            ));
        }
        let spent = |what: String, total: u64| {
            format!(
                "{what}: the file's blocks would cost more than {total} bytes in all (the \
                 budget for a file of this size; a larger one reads on)"
            )
        };
        let total = self.total();
        let cost = count.saturating_mul(DATUM_COST);
        if cost > self.left {
            self.left = 0;
            return Err(spent(format!("a count of {count} datums"), total));
        }
        let max = (self.limits.max_block as u64).min(self.left) as usize;
        let mut decompressed = Vec::new();
        let done = self.header.codec.decompress(data, max, &mut decompressed);
        // Damaged blocks cost what they decompressed to as well.
        let cost = cost.max(decompressed.len() as u64);
        self.left -= cost.min(self.left);
        match done {
            // Over what the budget left, not over the block limit: the budget is spent.
            Err(Decompress::Over(_)) if max < self.limits.max_block => {
                self.left = 0;
                return Err(spent("a block".into(), total));
            }
            Err(e) => return Err(e.to_string()),
            Ok(()) => {}
        }
        // Exactly `count` datums, ending where the bytes end.
        let schema = &self.header.schema;
        let mut at = 0;
        let (mut within, mut over_limit) = (Vec::new(), Vec::new());
        let fail = |i: u64, at: usize, e: String| {
            format!("datum {i} of {count} (at byte {at} of the block): {e}")
        };
        for i in 0..count {
            // Its layout, then its values (a string that is not UTF-8, an enum index past the
            // symbols): as the typed writer and readers check it.
            let rest = &decompressed[at..];
            let walk = |limits: &DatumLimits| schema.walk(rest, limits, &mut ());
            let len = match walk(&self.limits.datums) {
                Ok(check::Walked {
                    invalid: Some(check::Failure::Invalid { at: byte, what }),
                    ..
                }) => return Err(fail(i, at, format!("at byte {byte}: {what}"))),
                Ok(walked) => {
                    within.push(at..at + walked.end);
                    walked.end
                }
                Err(check::Failure::Invalid { at: byte, what }) => {
                    return Err(fail(i, at, format!("at byte {byte}: {what}")))
                }
                // Over a limit: that datum is left out, the others kept, if its end can be
                // found within limits wide enough to pass it (and still bounded).
                Err(check::Failure::Limit { what, limit }) => {
                    match walk(&self.limits.datums.widened()) {
                        Ok(check::Walked { end: len, .. }) => {
                            over_limit.push(OverLimit {
                                index: i,
                                what,
                                limit,
                            });
                            len
                        }
                        Err(_) => {
                            return Err(fail(
                                i,
                                at,
                                format!(
                                    "it would decode to more than {limit} {what}, and its end \
                                     cannot be found to read the datums after it"
                                ),
                            ))
                        }
                    }
                }
            };
            at += len;
        }
        if at != decompressed.len() {
            return Err(format!(
                "{} bytes left after its {count} datums",
                decompressed.len() - at
            ));
        }
        Ok(ContainerBlock {
            range: start as u64..cursor.at as u64,
            data: decompressed,
            count,
            within,
            over_limit,
        })
    }
}

/// Writes a container file: a header, then datums in blocks of about `block_target` bytes
/// (before compression), each block followed by the sync marker.
#[derive(Debug)]
pub struct ContainerWriter<W: Write> {
    out: W,
    codec: Codec,
    sync: [u8; 16],
    block: Vec<u8>,
    count: u64,
    block_target: usize,
}

/// Avro's encoding of a `long`.
fn write_long(value: i64, out: &mut Vec<u8>) {
    let mut v = ((value << 1) ^ (value >> 63)) as u64;
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn write_bytes(bytes: &[u8], out: &mut Vec<u8>) {
    write_long(bytes.len() as i64, out);
    out.extend_from_slice(bytes);
}

impl<W: Write> ContainerWriter<W> {
    /// Writes the header: `schema`'s JSON text, `codec`, and `metadata` (keys under `avro.`
    /// other than the two it writes are refused).
    pub fn new(
        mut out: W,
        schema: &WriterSchema,
        codec: Codec,
        metadata: &[(String, Vec<u8>)],
    ) -> Result<Self> {
        if let Some((key, _)) = metadata
            .iter()
            .find(|(k, _)| k.starts_with("avro.") || k.is_empty())
        {
            return Err(Error::InvalidValue {
                path: String::new(),
                reason: format!("the metadata key {key:?} is reserved for Avro"),
            });
        }
        let mut header = MAGIC.to_vec();
        write_long(metadata.len() as i64 + 2, &mut header);
        write_bytes(super::SCHEMA_KEY.as_bytes(), &mut header);
        write_bytes(schema.json().as_bytes(), &mut header);
        write_bytes(CODEC_KEY.as_bytes(), &mut header);
        write_bytes(codec.name().as_bytes(), &mut header);
        for (key, value) in metadata {
            write_bytes(key.as_bytes(), &mut header);
            write_bytes(value, &mut header);
        }
        write_long(0, &mut header);
        let sync = sync_marker();
        header.extend_from_slice(&sync);
        out.write_all(&header).map_err(crate::Error::from)?;
        Ok(ContainerWriter {
            out,
            codec,
            sync,
            block: Vec::new(),
            count: 0,
            block_target: 64 << 10,
        })
    }

    /// Closes a block once its datums take `bytes` (before compression; default 64 KiB, as
    /// Avro's own writers do).
    pub fn block_target(mut self, bytes: usize) -> Self {
        self.block_target = bytes.max(1);
        self
    }

    /// Appends one datum, its Avro binary encoding as it is (the caller's to check).
    pub fn write_datum(&mut self, datum: &[u8]) -> Result<()> {
        self.block.extend_from_slice(datum);
        self.count += 1;
        if self.block.len() >= self.block_target {
            self.flush_block()?;
        }
        Ok(())
    }

    fn flush_block(&mut self) -> Result<()> {
        if self.count == 0 {
            return Ok(());
        }
        let data = self
            .codec
            .compress(&self.block)
            .map_err(crate::Error::from)?;
        let mut head = Vec::with_capacity(20);
        write_long(self.count as i64, &mut head);
        write_long(data.len() as i64, &mut head);
        let written = (|| {
            self.out.write_all(&head)?;
            self.out.write_all(&data)?;
            self.out.write_all(&self.sync)
        })();
        written.map_err(crate::Error::from)?;
        self.block.clear();
        self.count = 0;
        Ok(())
    }

    /// Writes the last block and returns the output.
    pub fn finish(mut self) -> Result<W> {
        self.flush_block()?;
        self.out.flush().map_err(crate::Error::from)?;
        Ok(self.out)
    }
}

/// 16 bytes no other file is likely to hold: hashes of the time, the process and a counter.
fn sync_marker() -> [u8; 16] {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let seed = [
        nanos,
        u64::from(std::process::id()),
        COUNTER.fetch_add(1, Ordering::Relaxed),
    ];
    let bytes: Vec<u8> = seed.iter().flat_map(|v| v.to_le_bytes()).collect();
    let a = xxhash_rust::xxh64::xxh64(&bytes, 1);
    let b = xxhash_rust::xxh64::xxh64(&bytes, 2);
    let mut sync = [0; 16];
    sync[..8].copy_from_slice(&a.to_le_bytes());
    sync[8..].copy_from_slice(&b.to_le_bytes());
    sync
}
