//! Compression of block payloads: codec ids, zstd contexts created once and reused for every
//! block, and dictionaries that carry an id computed from their bytes.
//!
//! A raw zstd dictionary carries no id, so a peer holding a different dictionary would decode
//! garbage. Here every block compressed with a dictionary names it by the XXH64 of its bytes,
//! and a reader without that exact dictionary refuses the block (and the CRC, which covers the
//! uncompressed payload, would catch what slipped through).

use std::fmt;
use std::io;
use std::sync::Arc;

use zstd::zstd_safe::{self, CCtx, CDict, CParameter, DCtx, DDict};

/// Codec id: the payload is stored as is.
pub const NONE: i64 = 0;
/// Codec id: the payload is one zstd frame.
pub const ZSTD: i64 = 1;
/// Codec id: the payload is one zstd frame compressed with a dictionary named by its id.
pub const ZSTD_DICTIONARY: i64 = 2;

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

    /// Zstd at `level`, checked against the range the linked zstd supports.
    pub fn zstd(level: i32) -> io::Result<Self> {
        let (min, max) = (zstd_safe::min_c_level(), zstd_safe::max_c_level());
        if !(min..=max).contains(&level) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("zstd level {level} is outside {min}..={max}"),
            ));
        }
        Ok(Compression::Zstd { level })
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
    pub fn train<S: AsRef<[u8]>>(samples: &[S], max_size: usize) -> io::Result<Self> {
        Ok(Dictionary::new(zstd::dict::from_samples(
            samples, max_size,
        )?))
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

fn zstd_error(code: usize) -> io::Error {
    io::Error::other(format!("zstd: {}", zstd_safe::get_error_name(code)))
}

/// Compresses payloads with one zstd context, created once and reset between blocks.
pub(crate) struct Compressor {
    cctx: CCtx<'static>,
    dictionary: Option<(u64, CDict<'static>)>,
    /// The last compressed frame.
    frame: Vec<u8>,
}

impl Compressor {
    /// A compressor at `level`, with a prepared dictionary if given.
    pub fn new(level: i32, dictionary: Option<&Dictionary>) -> io::Result<Self> {
        let mut cctx = CCtx::try_create().ok_or_else(|| io::Error::other("zstd: no context"))?;
        cctx.set_parameter(CParameter::CompressionLevel(level))
            .map_err(zstd_error)?;
        let dictionary = match dictionary {
            Some(d) => {
                let cdict = CDict::try_create(d.bytes(), level)
                    .ok_or_else(|| io::Error::other("zstd could not load the dictionary"))?;
                Some((d.id(), cdict))
            }
            None => None,
        };
        Ok(Compressor {
            cctx,
            dictionary,
            frame: Vec::new(),
        })
    }

    /// The id of the dictionary blocks are compressed with.
    pub fn dictionary_id(&self) -> Option<u64> {
        self.dictionary.as_ref().map(|(id, _)| *id)
    }

    /// Compresses `payload` into one zstd frame and returns it.
    pub fn compress(&mut self, payload: &[u8]) -> io::Result<&[u8]> {
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
    /// The frame holds more than the size the block declares.
    Inflates,
    /// zstd rejected the frame.
    Zstd(&'static str),
    /// The frame holds less than the size the block declares.
    Short { got: usize },
}

/// Decompresses payloads with one zstd context (created on the first compressed block) and
/// the dictionaries known so far: those given to the reader and those the file embeds.
#[derive(Default)]
pub(crate) struct Decompressor {
    dctx: Option<DCtx<'static>>,
    dictionaries: Vec<(u64, DDict<'static>)>,
    /// The id of the dictionary the reader was given, for messages.
    given: Option<u64>,
}

impl fmt::Debug for Decompressor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ids: Vec<_> = self
            .dictionaries
            .iter()
            .map(|(id, _)| DictionaryId(*id))
            .collect();
        f.debug_struct("Decompressor")
            .field("dictionaries", &ids)
            .finish_non_exhaustive()
    }
}

impl Decompressor {
    /// Makes `dictionary` available; `given` marks the one the caller supplied.
    pub fn add(&mut self, dictionary: &Dictionary, given: bool) -> io::Result<()> {
        if given {
            self.given = Some(dictionary.id());
        }
        if self.has(dictionary.id()) {
            return Ok(());
        }
        let ddict = DDict::try_create(dictionary.bytes())
            .ok_or_else(|| io::Error::other("zstd could not load the dictionary"))?;
        self.dictionaries.push((dictionary.id(), ddict));
        Ok(())
    }

    /// Whether the dictionary with `id` is available.
    pub fn has(&self, id: u64) -> bool {
        self.dictionaries.iter().any(|(known, _)| *known == id)
    }

    /// Decompresses `frame`, which must hold exactly `size` bytes, into `out`.
    pub fn decompress(
        &mut self,
        frame: &[u8],
        dictionary: Option<u64>,
        size: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), DecompressError> {
        let ddict = match dictionary {
            None => None,
            Some(needed) => match self.dictionaries.iter().find(|(id, _)| *id == needed) {
                Some((_, ddict)) => Some(ddict),
                None => {
                    return Err(DecompressError::Dictionary {
                        needed,
                        given: self.given,
                    })
                }
            },
        };
        let dctx = match &mut self.dctx {
            Some(dctx) => dctx,
            slot => slot.insert(DCtx::try_create().ok_or(DecompressError::Zstd("no context"))?),
        };
        out.clear();
        out.resize(size, 0);
        let result = match ddict {
            Some(ddict) => dctx.decompress_using_ddict(&mut out[..], frame, ddict),
            None => dctx.decompress(&mut out[..], frame),
        };
        match result {
            Ok(got) if got == size => Ok(()),
            Ok(got) => Err(DecompressError::Short { got }),
            Err(code) => {
                let name = zstd_safe::get_error_name(code);
                if name.contains("Destination buffer is too small") {
                    Err(DecompressError::Inflates)
                } else {
                    Err(DecompressError::Zstd(name))
                }
            }
        }
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
                dec.add(d, true).unwrap();
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

    #[test]
    fn a_missing_dictionary_is_named() {
        let mut dec = Decompressor::default();
        let other = Dictionary::new(vec![1, 2, 3]);
        dec.add(&other, true).unwrap();
        let err = dec.decompress(&[], Some(7), 10, &mut Vec::new());
        assert_eq!(
            err,
            Err(DecompressError::Dictionary {
                needed: 7,
                given: Some(other.id())
            })
        );
    }

    #[test]
    fn levels_are_checked() {
        assert!(Compression::zstd(-7).is_ok());
        assert!(Compression::zstd(22).is_ok());
        assert!(Compression::zstd(23).is_err());
    }
}
