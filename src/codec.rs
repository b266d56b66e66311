//! Compression of block payloads: codec ids, zstd contexts created once and reused for every
//! block, and dictionaries that carry an id computed from their bytes.
//!
//! A raw zstd dictionary carries no id, so a peer holding a different dictionary would decode
//! garbage. Here every block compressed with a dictionary names it by the XXH64 of its bytes,
//! and a reader without that exact dictionary refuses the block (and the CRC, which covers the
//! uncompressed payload, would catch what slipped through).

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::limits::Limits;

use zstd::zstd_safe::{self, CCtx, CDict, CParameter, DCtx, DDict};

/// Codec id: the payload is stored as is.
pub const NONE: i64 = 0;
/// Codec id: the payload is one zstd frame.
pub const ZSTD: i64 = 1;
/// Codec id: the payload is one zstd frame compressed with a dictionary named by its id.
pub const ZSTD_DICTIONARY: i64 = 2;
/// Codec id: a data block's records as lines (each followed by 0x0A, none holding one) in one
/// zstd frame (spec 7.1, 8.3): varint lengths between short records cost zstd 5-30 %.
pub const ZSTD_LINES: i64 = 3;
/// Codec id: [`ZSTD_LINES`] compressed with a dictionary named by its id.
pub const ZSTD_DICTIONARY_LINES: i64 = 4;

/// Whether `codec` stores a data block's records as lines.
pub(crate) fn is_lines(codec: i64) -> bool {
    matches!(codec, ZSTD_LINES | ZSTD_DICTIONARY_LINES)
}

/// How a writer stores block payloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// Stored as is.
    None,
    /// One zstd frame per block at `level`: the fast negative levels (-7..=-1 and beyond)
    /// through 1..=22. Level 0 means zstd's default, 3.
    Zstd {
        /// The zstd compression level.
        level: i32,
    },
}

impl Compression {
    /// The zstd level `cobsfile pack --zstd` suggests when unsure: level 3 (see BENCHMARKS.md).
    pub const DEFAULT_ZSTD_LEVEL: i32 = 3;

    /// Zstd at `level`, checked against [`zstd_levels`](Self::zstd_levels).
    pub fn zstd(level: i32) -> Result<Self> {
        let levels = Self::zstd_levels();
        if !levels.contains(&level) {
            let (min, max) = levels.into_inner();
            return Err(Error::InvalidLevel { level, min, max });
        }
        Ok(Compression::Zstd { level })
    }

    /// The zstd levels the linked zstd supports: negative ones fastest, 1 to 22 smaller and
    /// slower.
    pub fn zstd_levels() -> std::ops::RangeInclusive<i32> {
        zstd_safe::min_c_level()..=zstd_safe::max_c_level()
    }
}

/// A zstd dictionary and its id, the XXH64 (seed 0) of its bytes.
#[derive(Clone)]
pub struct Dictionary {
    id: u64,
    bytes: Arc<[u8]>,
}

impl fmt::Debug for Dictionary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Dictionary({}, {} bytes)",
            DictionaryId(self.id),
            self.bytes.len()
        )
    }
}

/// Formats a dictionary id as 16 hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DictionaryId(pub u64);

impl fmt::Display for DictionaryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

impl Dictionary {
    /// A dictionary made of `bytes`: raw content, or a dictionary trained by zstd.
    pub fn new(bytes: impl Into<Arc<[u8]>>) -> Self {
        let bytes = bytes.into();
        Dictionary {
            id: dictionary_id(&bytes),
            bytes,
        }
    }

    /// Trains a dictionary of at most `max_size` bytes on `samples` with zstd's trainer.
    pub fn train<S: AsRef<[u8]>>(samples: &[S], max_size: usize) -> Result<Self> {
        // zstd's trainer reports its failures (too few samples, say) as I/O errors; they are
        // not, so they become the crate's zstd error.
        let trained = zstd::dict::from_samples(samples, max_size)
            .map_err(|e| Error::Zstd(format!("training a dictionary failed: {e}")))?;
        Ok(Dictionary::new(trained))
    }

    /// The id blocks compressed with this dictionary carry.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The dictionary's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

/// The id of the dictionary made of `bytes`.
pub fn dictionary_id(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh64::xxh64(bytes, 0)
}

fn zstd_error(code: usize) -> Error {
    Error::Zstd(zstd_safe::get_error_name(code).to_owned())
}

/// Compresses payloads with one zstd context, created once and reset between blocks.
pub(crate) struct Compressor {
    cctx: CCtx<'static>,
    dictionary: Option<(u64, CDict<'static>)>,
    /// The last compressed frame.
    frame: Vec<u8>,
    /// Whether data blocks whose records hold no newline are compressed as lines.
    lines: bool,
    /// A data block's records as lines, while it is compressed.
    pub(crate) line_buffer: Vec<u8>,
}

impl Compressor {
    /// A compressor at `level`, with a prepared dictionary if given.
    pub fn new(level: i32, dictionary: Option<&Dictionary>) -> Result<Self> {
        let mut cctx = CCtx::try_create().ok_or_else(|| Error::Zstd("no context".into()))?;
        cctx.set_parameter(CParameter::CompressionLevel(level))
            .map_err(zstd_error)?;
        let dictionary = match dictionary {
            Some(d) => {
                let cdict = CDict::try_create(d.bytes(), level)
                    .ok_or_else(|| Error::Zstd("cannot load the dictionary".into()))?;
                Some((d.id(), cdict))
            }
            None => None,
        };
        Ok(Compressor {
            cctx,
            dictionary,
            frame: Vec::new(),
            lines: true,
            line_buffer: Vec::new(),
        })
    }

    /// A writer's compressor for `compression` (none for [`Compression::None`]), with
    /// `dictionary` if given, storing data blocks as lines where it can if `lines`.
    pub(crate) fn for_writer(
        compression: Compression,
        dictionary: Option<&Dictionary>,
        lines: bool,
    ) -> Result<Option<Self>> {
        match compression {
            Compression::None => Ok(None),
            Compression::Zstd { level } => {
                Ok(Some(Compressor::new(level, dictionary)?.line_layout(lines)))
            }
        }
    }

    /// Whether data blocks whose records hold no newline are stored as lines (codecs 3 and
    /// 4, spec 7.1; the default), or as spec 8.3's length-prefixed records (codecs 1 and 2,
    /// for readers that predate lines).
    pub fn line_layout(mut self, lines: bool) -> Self {
        self.lines = lines;
        self
    }

    /// Whether this compressor stores data blocks as lines where it can.
    pub(crate) fn lines(&self) -> bool {
        self.lines
    }

    /// The id of the dictionary blocks are compressed with.
    pub fn dictionary_id(&self) -> Option<u64> {
        self.dictionary.as_ref().map(|(id, _)| *id)
    }

    /// Compresses `payload` into one zstd frame and returns it.
    pub fn compress(&mut self, payload: &[u8]) -> Result<&[u8]> {
        self.frame.clear();
        self.frame.reserve(zstd_safe::compress_bound(payload.len()));
        let written = match &self.dictionary {
            Some((_, cdict)) => self
                .cctx
                .compress_using_cdict(&mut self.frame, payload, cdict),
            None => self.cctx.compress2(&mut self.frame, payload),
        }
        .map_err(zstd_error)?;
        debug_assert_eq!(written, self.frame.len());
        Ok(&self.frame)
    }
}

impl fmt::Debug for Compressor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dictionary = self.dictionary_id().map(DictionaryId);
        f.debug_struct("Compressor")
            .field("dictionary", &dictionary)
            .finish_non_exhaustive()
    }
}

/// Why a payload could not be decompressed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DecompressError {
    /// The block needs a dictionary the reader does not have.
    Dictionary { needed: u64, given: Option<u64> },
    /// The frame's header declares more than the size the block declares.
    Inflates,
    /// zstd rejected the frame, or the stored payload is not exactly one zstd frame.
    Zstd(&'static str),
    /// The frame holds less than the size the block declares (or its header says so).
    Short { got: usize },
    /// No memory could be had for the size the block declares.
    OutOfMemory,
}

/// The first 4 bytes of every zstd frame (RFC 8878, section 3.1.1), little-endian 0xFD2FB528.
const FRAME_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// The first 4 bytes of a dictionary in zstd's format (RFC 8878, section 5), little-endian
/// 0xEC30A437. A dictionary that does not start with them is raw content.
pub(crate) const DICTIONARY_MAGIC: [u8; 4] = [0x37, 0xa4, 0x30, 0xec];

/// Why a dictionary was not made available.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refused {
    /// It starts with zstd's dictionary magic but zstd cannot load it.
    Invalid,
    /// Keeping it would exceed the reader's limit on dictionaries (count or bytes).
    Limit {
        /// Which limit: `"dictionaries"` or `"dictionary bytes"`.
        what: &'static str,
        /// The limit.
        limit: u64,
    },
}

/// A dictionary a decompressor knows, prepared for zstd on first use.
struct Known {
    dictionary: Dictionary,
    /// Made when a block first needs it (or at once for a dictionary in zstd's format, to
    /// check that it loads).
    ddict: Option<Arc<DDict<'static>>>,
    /// Embedded in the input, and counted against the limits (not given by the caller).
    counted: bool,
}

/// Dictionaries loaded into zstd (digested: its tables built), shared by the decompressors of
/// one read, so that each range's decoder does not load again what another loaded (a
/// dictionary of 110 KB costs its copy and its tables). A dictionary is found by its bytes,
/// not only its id: two dictionaries whose ids collide stay two.
#[derive(Default)]
pub(crate) struct Loaded(std::sync::Mutex<Vec<(Dictionary, Arc<DDict<'static>>)>>);

impl Loaded {
    /// The most dictionaries kept loaded; others are loaded by each decompressor that needs
    /// them, as without sharing.
    const MOST: usize = 64;

    /// `dictionary` loaded, by another decompressor of the read or now; `None` if zstd
    /// cannot load it.
    fn load(&self, dictionary: &Dictionary) -> Option<Arc<DDict<'static>>> {
        let same = |d: &Dictionary| {
            d.id == dictionary.id
                && (Arc::ptr_eq(&d.bytes, &dictionary.bytes) || d.bytes == dictionary.bytes)
        };
        let found = {
            let kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
            kept.iter()
                .find(|(d, _)| same(d))
                .map(|(_, l)| Arc::clone(l))
        };
        if found.is_some() {
            return found;
        }
        // Loaded without the lock held: another thread may load the same meanwhile, and
        // the first kept wins; both are the same tables.
        let ddict = Arc::new(DDict::try_create(dictionary.bytes())?);
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if kept.len() < Self::MOST && !kept.iter().any(|(d, _)| same(d)) {
            kept.push((dictionary.clone(), Arc::clone(&ddict)));
        }
        Some(ddict)
    }
}

impl fmt::Debug for Loaded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Loaded")
    }
}

/// Decompresses payloads with one zstd context (created on the first compressed block) and
/// the dictionaries known so far: those given to the reader and those the file embeds.
///
/// Cost follows the bytes a frame produces, never the size a block claims: the output buffer
/// is reserved, not filled, before decompressing, and a dictionary is prepared for zstd only
/// when a block needs it. The dictionaries a file embeds are bounded in count and bytes
/// ([`Limits`](crate::Limits)); those given to the reader are not counted.
pub(crate) struct Decompressor {
    dctx: Option<DCtx<'static>>,
    known: Vec<Known>,
    /// Dictionaries loaded by the other decompressors of a read, if it shares them.
    loaded: Option<Arc<Loaded>>,
    /// Positions in `known` by id.
    by_id: HashMap<u64, usize>,
    /// The id of the dictionary the reader was given, for messages.
    given: Option<u64>,
    /// Embedded dictionaries held, and their bytes.
    embedded: usize,
    embedded_bytes: u64,
    max_dictionaries: usize,
    max_dictionary_bytes: u64,
    /// Bytes decompressed for blocks that then failed their checks, and how many may be:
    /// the limit plus [`DAMAGED_DECODING_PER_BYTE`] for each byte of body decoded.
    damaged: u64,
    damaged_allowance: u64,
}

/// What each byte of block body a decompressor meets adds to what it may decompress for
/// damaged blocks (spec 10).
pub(crate) const DAMAGED_DECODING_PER_BYTE: u64 = 64;

impl Default for Decompressor {
    fn default() -> Self {
        Decompressor::new(&Limits::default())
    }
}

impl fmt::Debug for Decompressor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ids: Vec<_> = self
            .known
            .iter()
            .map(|k| DictionaryId(k.dictionary.id()))
            .collect();
        f.debug_struct("Decompressor")
            .field("dictionaries", &ids)
            .finish_non_exhaustive()
    }
}

impl Decompressor {
    /// A decompressor that keeps embedded dictionaries within `limits`.
    pub fn new(limits: &Limits) -> Self {
        Decompressor {
            dctx: None,
            known: Vec::new(),
            loaded: None,
            by_id: HashMap::new(),
            given: None,
            embedded: 0,
            embedded_bytes: 0,
            max_dictionaries: limits.max_dictionaries,
            max_dictionary_bytes: limits.max_dictionary_bytes,
            damaged: 0,
            damaged_allowance: limits.max_damaged_decoding,
        }
    }

    /// Counts `body` bytes of a block met, which add to what may be decompressed for
    /// damaged blocks.
    pub(crate) fn credit(&mut self, body: usize) {
        self.damaged_allowance = self
            .damaged_allowance
            .saturating_add((body as u64).saturating_mul(DAMAGED_DECODING_PER_BYTE));
    }

    /// Whether a frame of `size` bytes may be decompressed: `Err` with the limit when what
    /// damaged blocks cost already leaves no room for it, since it may be damaged too.
    pub(crate) fn afford(&self, size: usize) -> Result<(), u64> {
        match self.damaged.saturating_add(size as u64) > self.damaged_allowance {
            true => Err(self.damaged_allowance),
            false => Ok(()),
        }
    }

    /// Counts `size` bytes decompressed for a block that then failed its checks.
    pub(crate) fn wasted(&mut self, size: usize) {
        self.damaged = self.damaged.saturating_add(size as u64);
    }

    /// Makes this decompressor what a new one with the same given dictionaries would be (for
    /// a decoder of another range): it forgets the dictionaries the input embeds, which count
    /// against the limits as a new decompressor meets them, and starts the allowance for
    /// damaged blocks afresh. It keeps its zstd context.
    pub(crate) fn restart(&mut self, limits: &Limits) {
        self.damaged = 0;
        self.damaged_allowance = limits.max_damaged_decoding;
        if self.embedded > 0 {
            self.known.retain(|k| !k.counted);
            self.by_id.clear();
            for (i, known) in self.known.iter().enumerate() {
                self.by_id.insert(known.dictionary.id(), i);
            }
            self.embedded = 0;
            self.embedded_bytes = 0;
        }
    }

    /// Shares the dictionaries loaded into zstd with the other decompressors of `loaded`.
    pub(crate) fn share_loaded(&mut self, loaded: &Arc<Loaded>) {
        self.loaded = Some(Arc::clone(loaded));
    }

    /// `dictionary` loaded into zstd: shared, or loaded now.
    fn load(&self, dictionary: &Dictionary) -> Option<Arc<DDict<'static>>> {
        match &self.loaded {
            Some(loaded) => loaded.load(dictionary),
            None => DDict::try_create(dictionary.bytes()).map(Arc::new),
        }
    }

    /// Carries what `other` counted of damaged decoding over to this decompressor (one made
    /// again for the same input), and the dictionaries it shares loaded.
    pub(crate) fn carry_from(&mut self, other: &Decompressor) {
        self.damaged = other.damaged;
        self.damaged_allowance = other.damaged_allowance;
        self.loaded.clone_from(&other.loaded);
    }

    /// Makes a dictionary the caller supplied available (not counted against the limits).
    /// One in zstd's format that zstd cannot load is refused.
    pub fn give(&mut self, dictionary: &Dictionary) -> Result<(), Refused> {
        self.given = Some(dictionary.id());
        self.insert(dictionary, false)
    }

    /// Makes a dictionary the file embeds available, within the limits. One already known is
    /// accepted again at no cost.
    pub fn add(&mut self, dictionary: &Dictionary) -> Result<(), Refused> {
        self.insert(dictionary, true)
    }

    fn insert(&mut self, dictionary: &Dictionary, counted: bool) -> Result<(), Refused> {
        if self.has(dictionary.id()) {
            return Ok(());
        }
        let len = dictionary.bytes().len() as u64;
        if counted {
            if self.embedded >= self.max_dictionaries {
                return Err(Refused::Limit {
                    what: "dictionaries",
                    limit: self.max_dictionaries as u64,
                });
            }
            if self.embedded_bytes + len > self.max_dictionary_bytes {
                return Err(Refused::Limit {
                    what: "dictionary bytes",
                    limit: self.max_dictionary_bytes,
                });
            }
        }
        // Raw content always loads; zstd's format is checked now, so that a broken one is
        // reported where it is, not at each block that names it.
        let ddict = if dictionary.bytes().starts_with(&DICTIONARY_MAGIC) {
            Some(self.load(dictionary).ok_or(Refused::Invalid)?)
        } else {
            None
        };
        if counted {
            self.embedded += 1;
            self.embedded_bytes += len;
        }
        self.by_id.insert(dictionary.id(), self.known.len());
        self.known.push(Known {
            dictionary: dictionary.clone(),
            ddict,
            counted,
        });
        Ok(())
    }

    /// Whether the dictionary with `id` is available.
    pub fn has(&self, id: u64) -> bool {
        self.by_id.contains_key(&id)
    }

    /// Decompresses `frame`, which must be exactly one zstd frame holding exactly `size`
    /// bytes, into `out`.
    pub fn decompress(
        &mut self,
        frame: &[u8],
        dictionary: Option<u64>,
        size: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), DecompressError> {
        check_one_frame(frame, size)?;
        let ddict = match dictionary {
            None => None,
            Some(needed) => {
                let Some(&i) = self.by_id.get(&needed) else {
                    return Err(DecompressError::Dictionary {
                        needed,
                        given: self.given,
                    });
                };
                if self.known[i].ddict.is_none() {
                    // Raw content: zstd takes any bytes as such.
                    let ddict = (self.load(&self.known[i].dictionary))
                        .ok_or(DecompressError::Zstd("cannot load the dictionary"))?;
                    self.known[i].ddict = Some(ddict);
                }
                self.known[i].ddict.as_deref()
            }
        };
        let dctx = match &mut self.dctx {
            Some(dctx) => dctx,
            slot => slot.insert(DCtx::try_create().ok_or(DecompressError::Zstd("no context"))?),
        };
        // Reserved, not filled: pages the frame does not write are never touched. zstd sees
        // exactly `size` bytes of room, whatever the buffer kept from larger blocks, so that a
        // damaged frame fails the same way in every reader (the cause must not depend on the
        // buffer's history).
        out.clear();
        out.try_reserve(size)
            .map_err(|_| DecompressError::OutOfMemory)?;
        let mut room = Room { out, size };
        let result = match ddict {
            Some(ddict) => dctx.decompress_using_ddict(&mut room, frame, ddict),
            None => dctx.decompress(&mut room, frame),
        };
        // A frame that would write more than `size` bytes fails like a corrupted one: zstd
        // reports either as "destination buffer too small" or "data corruption", and which one
        // depends on what the context decoded before (measured: 4 of 7,000 corruptions of a
        // frame with a dictionary), so both are one cause, the same on every thread.
        // The two are one problem in the error's text as well: which of zstd's names a
        // reader printed depended on which of its threads decoded the block.
        match result {
            Ok(got) if got == size => Ok(()),
            Ok(got) => Err(DecompressError::Short { got }),
            Err(code) => Err(DecompressError::Zstd(
                match zstd_safe::get_error_name(code) {
                    DESTINATION_TOO_SMALL | CORRUPTION => CORRUPT_OR_TOO_LONG,
                    other => other,
                },
            )),
        }
    }
}

/// zstd's name for a frame that would write past its room.
const DESTINATION_TOO_SMALL: &str = "Destination buffer is too small";

/// zstd's name for a frame it finds corrupted.
const CORRUPTION: &str = "Data corruption detected";

/// What a reader reports for either of those (see [`Decompressor::decompress`]).
const CORRUPT_OR_TOO_LONG: &str = "corrupted, or longer than the declared size";

/// The first `size` bytes of a vector's capacity (reserved), as the room zstd decompresses
/// into: a `Vec`'s own `WriteBuf` would offer all of its capacity.
struct Room<'a> {
    out: &'a mut Vec<u8>,
    /// At most `out.capacity()`.
    size: usize,
}

// SAFETY: `as_slice` covers `out`'s initialized bytes only (its length, which starts at 0 and
// only `filled_until` sets); `capacity` is `size`, which the caller reserved, so `as_mut_ptr`
// points at `size` bytes that may be written; `filled_until(n)` is called by zstd-safe with
// `n <= capacity()` (it asserts so) after zstd wrote those `n` bytes, so `set_len(n)` covers
// initialized bytes within the capacity. `tests/hostile.rs` (size claims) and the codec tests
// exercise it, and the fuzz targets run it under AddressSanitizer.
unsafe impl zstd_safe::WriteBuf for Room<'_> {
    fn as_slice(&self) -> &[u8] {
        self.out
    }

    fn capacity(&self) -> usize {
        debug_assert!(self.size <= self.out.capacity());
        self.size
    }

    fn as_mut_ptr(&mut self) -> *mut u8 {
        self.out.as_mut_ptr()
    }

    unsafe fn filled_until(&mut self, n: usize) {
        // SAFETY: the caller vouches that the first `n <= size <= capacity` bytes are
        // initialized (see the impl's comment).
        unsafe { self.out.set_len(n) }
    }
}

/// Checks, reading only frame and block headers, that `frame` is exactly one zstd frame (no
/// skippable frame, nothing after it) and that the content size its header may declare is
/// `size`.
fn check_one_frame(frame: &[u8], size: usize) -> Result<(), DecompressError> {
    if !frame.starts_with(&FRAME_MAGIC) {
        return Err(DecompressError::Zstd("stored payload is not a zstd frame"));
    }
    match zstd_safe::find_frame_compressed_size(frame) {
        Ok(len) if len == frame.len() => {}
        Ok(_) => return Err(DecompressError::Zstd("bytes after the zstd frame")),
        Err(code) => return Err(DecompressError::Zstd(zstd_safe::get_error_name(code))),
    }
    match zstd_safe::get_frame_content_size(frame) {
        Ok(Some(declared)) if declared > size as u64 => Err(DecompressError::Inflates),
        Ok(Some(declared)) if declared < size as u64 => Err(DecompressError::Short {
            got: declared as usize,
        }),
        Ok(_) => Ok(()),
        Err(_) => Err(DecompressError::Zstd("invalid frame header")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_with_and_without_a_dictionary() {
        let payload = b"{\"level\":\"info\",\"msg\":\"hello hello hello hello\"}".repeat(50);
        let dict = Dictionary::new(b"{\"level\":\"info\",\"msg\":\"hello".to_vec());
        for d in [None, Some(&dict)] {
            let mut c = Compressor::new(3, d).unwrap();
            let frame = c.compress(&payload).unwrap().to_vec();
            assert!(frame.len() < payload.len() / 5);
            let mut dec = Decompressor::default();
            if let Some(d) = d {
                dec.give(d).unwrap();
            }
            let mut out = Vec::new();
            dec.decompress(&frame, d.map(|d| d.id()), payload.len(), &mut out)
                .unwrap();
            assert_eq!(out, payload);
            let err = dec.decompress(&frame, d.map(|d| d.id()), payload.len() - 1, &mut out);
            assert_eq!(err, Err(DecompressError::Inflates));
            let err = dec.decompress(&frame, d.map(|d| d.id()), payload.len() + 1, &mut out);
            assert_eq!(err, Err(DecompressError::Short { got: payload.len() }));
        }
    }

    /// Decompressors of one read share what they load; a restarted one is a new one with
    /// the same given dictionaries: those the input embedded are forgotten, and count against
    /// the limits again when met again.
    #[test]
    fn loaded_dictionaries_are_shared_and_restarts_forget_embedded_ones() {
        let samples: Vec<Vec<u8>> = (0..400)
            .map(|i| format!("{{\"event\":{i},\"kind\":\"sample {}\"}}", i % 7).into_bytes())
            .collect();
        let trained = Dictionary::train(&samples, 2048).unwrap();
        assert!(trained.bytes().starts_with(&DICTIONARY_MAGIC));
        let given = Dictionary::new(b"given raw content".to_vec());
        let limits = Limits::default().max_dictionaries(1);
        let loaded = Arc::new(Loaded::default());
        let (mut a, mut b) = (Decompressor::new(&limits), Decompressor::new(&limits));
        for d in [&mut a, &mut b] {
            d.share_loaded(&loaded);
            d.give(&given).unwrap();
            d.add(&trained).unwrap();
        }
        let ddict = |d: &Decompressor| d.known[d.by_id[&trained.id()]].ddict.clone().unwrap();
        assert!(Arc::ptr_eq(&ddict(&a), &ddict(&b)), "loaded once");

        // Two dictionaries whose ids collide stay two.
        let mut forged_bytes = trained.bytes().to_vec();
        let last = forged_bytes.len() - 1;
        forged_bytes[last] ^= 1;
        let forged = Dictionary {
            id: trained.id(),
            bytes: forged_bytes.into(),
        };
        let mut c = Decompressor::new(&limits);
        c.share_loaded(&loaded);
        c.add(&forged).unwrap();
        assert!(!Arc::ptr_eq(&ddict(&c), &ddict(&a)));

        let other = Dictionary::new(b"another raw dictionary".to_vec());
        assert!(a.add(&other).is_err(), "one embedded dictionary at most");
        a.restart(&limits);
        assert!(a.has(given.id()), "given dictionaries stay");
        assert!(!a.has(trained.id()), "embedded ones are forgotten");
        a.add(&other).unwrap();
        assert!(a.add(&trained).is_err(), "and counted again");
        let mut compressor = Compressor::new(1, Some(&given)).unwrap();
        let frame = compressor.compress(b"given given given").unwrap().to_vec();
        let mut out = Vec::new();
        a.decompress(&frame, Some(given.id()), 17, &mut out)
            .unwrap();
        assert_eq!(out, b"given given given");
    }

    #[test]
    fn a_missing_dictionary_is_named() {
        let mut dec = Decompressor::default();
        let other = Dictionary::new(vec![1, 2, 3]);
        dec.give(&other).unwrap();
        let frame = zstd::bulk::compress(&[7; 10], 1).unwrap();
        let err = dec.decompress(&frame, Some(7), 10, &mut Vec::new());
        assert_eq!(
            err,
            Err(DecompressError::Dictionary {
                needed: 7,
                given: Some(other.id())
            })
        );
    }

    #[test]
    fn a_frame_is_checked_before_the_dictionary_is_looked_for() {
        let mut dec = Decompressor::default();
        let frame = zstd::bulk::compress(&[7; 10], 1).unwrap();
        let mut two = frame.clone();
        two.extend(&frame);
        for (stored, size) in [(&two, 20), (&frame[1..].to_vec(), 10)] {
            let err = dec.decompress(stored, Some(7), size, &mut Vec::new());
            assert!(matches!(err, Err(DecompressError::Zstd(_))), "{err:?}");
        }
        // A content size in the frame's header that is not the block's is refused unread.
        let err = dec.decompress(&frame, None, 1 << 30, &mut Vec::new());
        assert_eq!(err, Err(DecompressError::Short { got: 10 }));
    }

    #[test]
    fn a_damaged_frame_fails_the_same_way_whatever_the_context_decoded_before() {
        // zstd tells an over-long frame from a corrupted one by an error that depends on the
        // context's history; the outcome here must not.
        let payload: Vec<u8> = (0..3000u32)
            .map(|i| (i * 7 % 251) as u8 ^ (i / 100) as u8)
            .collect();
        let dict = Dictionary::new(b"some dictionary content with words".repeat(20));
        let frame = Compressor::new(3, Some(&dict))
            .unwrap()
            .compress(&payload)
            .unwrap()
            .to_vec();
        let mut used = Decompressor::default();
        used.give(&dict).unwrap();
        for i in 4..frame.len() {
            for mask in [1u8, 0x10, 0x80] {
                let mut damaged = frame.clone();
                damaged[i] ^= mask;
                let mut fresh = Decompressor::default();
                fresh.give(&dict).unwrap();
                let mut out = Vec::new();
                let first = fresh.decompress(&damaged, Some(dict.id()), payload.len(), &mut out);
                // `used` decoded every earlier damaged frame, and a sound one.
                used.decompress(&frame, Some(dict.id()), payload.len(), &mut out)
                    .unwrap();
                let again = used.decompress(&damaged, Some(dict.id()), payload.len(), &mut out);
                assert_eq!(first.is_ok(), again.is_ok(), "byte {i} ^ {mask:#x}");
                // The same error, its text included: readers print it.
                assert_eq!(first, again, "byte {i} ^ {mask:#x}");
            }
        }
    }

    #[test]
    fn levels_are_checked() {
        assert!(Compression::zstd(-7).is_ok());
        assert!(Compression::zstd(22).is_ok());
        assert!(Compression::zstd(23).is_err());
    }
}
