//! What a reader may spend on one input, whatever the input says (spec section 10).
//!
//! Every reader path (slice, mapped file, stream, threads, range reads, the follower, the
//! appender's look at a log's end) takes its limits from one [`Limits`], and checks each one
//! before paying the cost it guards: a length field before reading or allocating for the block,
//! a declared size before decompressing, a dictionary's count and bytes before keeping it.

use crate::cobs;

/// The default maximum decoded size of a block body: 64 MiB.
pub const DEFAULT_MAX_BODY_SIZE: usize = 64 << 20;

/// The default number of distinct dictionaries a reader keeps from one input: 1024.
pub const DEFAULT_MAX_DICTIONARIES: usize = 1024;

/// The default total bytes of the dictionaries a reader keeps from one input: 128 MiB.
pub const DEFAULT_MAX_DICTIONARY_BYTES: u64 = 128 << 20;

/// The default bytes a reader decompresses for blocks that then fail their checks, before
/// what each byte of input adds: 1 GiB.
pub const DEFAULT_MAX_DAMAGED_DECODING: u64 = 1 << 30;

/// The default number of blocks a verification of seals notes: 2^22 (a TiB of blocks of the
/// default 256 KiB; at most about 2 GiB of what it holds of them, 500 bytes each).
pub const DEFAULT_MAX_VERIFIED_BLOCKS: u64 = 1 << 22;

/// The bounds a reader enforces; set them with [`ReaderBuilder::limits`] (or
/// [`ReaderBuilder::max_body_size`] for the first).
///
/// What each bounds, and what a reader reports when an input exceeds it:
///
/// | limit | bounds | over it |
/// |---|---|---|
/// | [`max_body_size`](Self::max_body_size) | the decoded body (and so the framed length, spec 10, and a stream reader's window) | the block is unreadable: [`Cause::TooLarge`] or [`Cause::BodyTooLarge`] |
/// | | the decoded times of one time block, 8 bytes a record | the time block is unreadable: [`Cause::Limit`]; its data block's records have no times |
/// | [`max_dictionaries`](Self::max_dictionaries) | distinct dictionaries kept from the input | the dictionary block is unreadable: [`Cause::Limit`] |
/// | [`max_dictionary_bytes`](Self::max_dictionary_bytes) | their bytes, together | the same |
/// | [`max_damaged_decoding`](Self::max_damaged_decoding) | bytes decompressed for blocks that then fail their checks (a CRC that does not match, say), plus 64 for each byte of block body met | a compressed block that would pass it is unreadable: [`Cause::Limit`] |
/// | [`max_verified_blocks`](Self::max_verified_blocks) | the blocks a verification of seals notes (up to 500 bytes each, with what it keeps of the seals' leaves for them) until it matches them to the seals | the verification fails: [`Error::TooManyBlocks`](crate::Error::TooManyBlocks) |
///
/// Dictionaries given to the reader ([`ReaderBuilder::dictionary`]) are not counted.
///
/// ```
/// let limits = cobsfile::Limits::default().max_body_size(1 << 20).max_dictionaries(4);
/// let reader = cobsfile::ReaderBuilder::new().limits(limits).from_slice(&[]);
/// # drop(reader);
/// ```
///
/// [`ReaderBuilder::limits`]: crate::ReaderBuilder::limits
/// [`ReaderBuilder::max_body_size`]: crate::ReaderBuilder::max_body_size
/// [`ReaderBuilder::dictionary`]: crate::ReaderBuilder::dictionary
/// [`Cause::TooLarge`]: crate::Cause::TooLarge
/// [`Cause::BodyTooLarge`]: crate::Cause::BodyTooLarge
/// [`Cause::Limit`]: crate::Cause::Limit
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "options do nothing until used: each method returns the changed options"]
pub struct Limits {
    pub(crate) max_body_size: usize,
    pub(crate) max_dictionaries: usize,
    pub(crate) max_dictionary_bytes: u64,
    pub(crate) max_damaged_decoding: u64,
    pub(crate) max_verified_blocks: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_size: DEFAULT_MAX_BODY_SIZE,
            max_dictionaries: DEFAULT_MAX_DICTIONARIES,
            max_dictionary_bytes: DEFAULT_MAX_DICTIONARY_BYTES,
            max_damaged_decoding: DEFAULT_MAX_DAMAGED_DECODING,
            max_verified_blocks: DEFAULT_MAX_VERIFIED_BLOCKS,
        }
    }
}

impl Limits {
    /// The largest decoded block body accepted (default 64 MiB), capped at `isize::MAX`.
    pub fn max_body_size(mut self, bytes: usize) -> Self {
        // No body can be larger than `isize::MAX` bytes; a larger limit (`usize::MAX` for "no
        // limit") would overflow the encoded length computed from it.
        self.max_body_size = bytes.min(isize::MAX as usize);
        self
    }

    /// The most distinct dictionaries kept from the input (default 1024).
    pub fn max_dictionaries(mut self, count: usize) -> Self {
        self.max_dictionaries = count;
        self
    }

    /// The most bytes of dictionaries kept from the input, together (default 128 MiB).
    pub fn max_dictionary_bytes(mut self, bytes: u64) -> Self {
        self.max_dictionary_bytes = bytes;
        self
    }

    /// The most bytes decompressed for blocks that then fail their checks (default 1 GiB),
    /// plus 64 for each byte of block body the reader meets: genuine zstd frames of 64 MiB
    /// each with a wrong CRC (a few KiB each) would otherwise cost time out of all
    /// proportion to the input, for nothing. Intact blocks cost nothing against it; once it
    /// is spent, a compressed block that would pass it is unreadable ([`Cause::Limit`](crate::Cause::Limit)), as
    /// it may be damaged too. Each thread of a reader counts its own.
    pub fn max_damaged_decoding(mut self, bytes: u64) -> Self {
        self.max_damaged_decoding = bytes;
        self
    }

    /// The most blocks a verification of seals
    /// ([`ReaderBuilder::verify_seals`](crate::ReaderBuilder::verify_seals)) notes (default
    /// 2^22): each costs up to about 500 bytes (with what is kept of the seals' leaves for it)
    /// until the seals are matched, so that a file of the smallest sealed blocks (about 77
    /// bytes each, their leaves in the seals included) costs about 6 times its size. Past it
    /// the verification fails with [`Error::TooManyBlocks`](crate::Error::TooManyBlocks), after
    /// noting at most one part of a range read (about a MiB of payload) more; a verification
    /// of a time window (spec 9.10.1) notes only the blocks about the window.
    pub fn max_verified_blocks(mut self, count: u64) -> Self {
        self.max_verified_blocks = count;
        self
    }

    /// The largest decoded block body accepted.
    pub fn body_limit(&self) -> usize {
        self.max_body_size
    }

    /// The largest acceptable length field (spec 10): the COBS bound of the largest body, plus
    /// the closing sync byte.
    pub fn max_length(&self) -> u64 {
        cobs::max_encoded_len(self.max_body_size) as u64 + 1
    }
}
