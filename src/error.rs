//! The one error type of the crate, and the causes of damage.
//!
//! Every error that concerns file content carries byte offsets: [`Error::Damaged`] names the
//! skipped byte range and its [`Cause`] names the exact byte that gave the damage away.

use std::io;

/// The result type used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong reading or writing a cobsfile.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The underlying reader or writer failed.
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),

    /// Bytes `start..end` could not be read as intact blocks and were skipped.
    ///
    /// Readers yield this error once per damaged region and then resynchronize at the next
    /// sync byte (offset `end`), so iteration may simply go on.
    #[error("bytes {start}..{end} {}: {cause}", if cause.is_damage() { "damaged" } else { "unreadable" })]
    Damaged {
        /// Absolute offset of the first skipped byte.
        start: u64,
        /// Absolute offset one past the last skipped byte (the next sync byte, or end of input).
        end: u64,
        /// What gave the damage away.
        cause: Cause,
    },

    /// A header block names a format version this library cannot read.
    ///
    /// Readers stop after this error: what follows cannot be interpreted safely.
    #[error("format version {version} at offset {offset} is newer than this reader (which reads up to version {supported})")]
    UnsupportedVersion {
        /// Offset of the header block's opening sync byte.
        offset: u64,
        /// The version the file declares.
        version: i64,
        /// The newest version this library reads.
        supported: i64,
    },

    /// A record handed to a writer is larger than the maximum block size allows.
    #[error("record of {len} bytes exceeds the maximum of {max} bytes per record")]
    RecordTooLarge {
        /// The record's length.
        len: usize,
        /// The largest record the writer's maximum block size allows.
        max: usize,
    },

    /// A raw block was given a type id that this format defines (or zero).
    #[error("block type {0} cannot be written as a raw block")]
    InvalidBlockType(i64),

    /// Metadata handed to a writer is invalid (duplicate key, or larger than a block).
    #[error("invalid metadata: {0}")]
    InvalidMetadata(String),

    /// A file to append to does not start with a cobsfile header block.
    #[error("no cobsfile header block at offset {offset}: not a cobsfile (recover it first)")]
    NotACobsfile {
        /// Where the header block was looked for.
        offset: u64,
    },

    /// An appender refuses to go on after a write or sync of its log failed: the log may miss
    /// records it had taken in. Reopen the log.
    #[error("an earlier write to the log failed ({cause}); reopen it")]
    AppenderBroken {
        /// What failed.
        cause: String,
    },

    /// [`Appender::wait_durable`](crate::Appender::wait_durable) was asked about a record the
    /// appender has not appended.
    #[error("record {seq} was not appended ({appended} were, by this appender)")]
    NotAppended {
        /// The sequence number asked about.
        seq: u64,
        /// How many records the appender has appended.
        appended: u64,
    },

    /// A block is larger than a writer's limit on bytes per write
    /// ([`WriterBuilder::atomic_writes`](crate::WriterBuilder::atomic_writes)).
    #[error("a block of {len} bytes exceeds the limit of {limit} bytes per write")]
    TooLargeForOneWrite {
        /// The block's bytes, from its type field to its closing sync byte.
        len: usize,
        /// The limit.
        limit: usize,
    },

    /// A stream reader's window would have to grow past its limit to hold a block (a block
    /// larger than the reader's maximum block size allows would be needed).
    #[error("stream window of {window} bytes exceeds its limit of {limit}")]
    WindowLimit {
        /// The bytes the window holds.
        window: usize,
        /// The most it may hold.
        limit: usize,
    },

    /// A verification of seals met more blocks than
    /// [`Limits::max_verified_blocks`](crate::Limits::max_verified_blocks) lets it note.
    #[error("verifying seals: more than {limit} blocks by byte {offset} (the limit of blocks a verification notes); verify a time window, or raise the limit")]
    TooManyBlocks {
        /// Where the block past the limit opens.
        offset: u64,
        /// The limit.
        limit: u64,
    },

    /// A key file (to sign or verify seals) that cannot be used: missing, unreadable, malformed,
    /// of the wrong kind, or a private key others can read. Never holds key bytes.
    #[error("key {}: {problem}", path.display())]
    Key {
        /// The key file.
        path: std::path::PathBuf,
        /// What is wrong with it.
        problem: String,
    },

    /// A path names something other than a regular file (a directory, a pipe, a device) where
    /// a regular file is needed (to map it, or to follow it).
    #[error("not a regular file")]
    NotARegularFile,

    /// A zstd compression level outside what the linked zstd supports.
    #[error("zstd level {level} is outside {min}..={max}")]
    InvalidLevel {
        /// The level asked for.
        level: i32,
        /// The fastest level.
        min: i32,
        /// The smallest output's level.
        max: i32,
    },

    /// zstd failed at something that is not reading a block (making a context, loading or
    /// training a dictionary): the message is zstd's.
    #[error("zstd: {0}")]
    Zstd(String),
}

/// Why a range of bytes was judged damaged (or, for a block this reader cannot decode though
/// it may be intact, unreadable). Each cause names the absolute offset at which the problem
/// was detected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Cause {
    /// Bytes at the start of the input that are not preceded by a sync byte.
    #[error("no sync byte before offset {offset}")]
    NoSync {
        /// Offset of the first such byte.
        offset: u64,
    },
    /// More zero bytes in a row than padding allows: zero-filled data.
    #[error("zero-filled bytes from offset {offset}")]
    ZeroRun {
        /// Offset of the first zero after the sync byte.
        offset: u64,
    },
    /// A varint is truncated, not in shortest form, longer than 10 bytes or out of range.
    #[error("invalid {field} varint at offset {offset}: {problem}")]
    Varint {
        /// Offset of the varint's first byte.
        offset: u64,
        /// Which field it encodes.
        field: &'static str,
        /// What is wrong with it.
        problem: crate::varint::VarintError,
    },
    /// A header field holds a value the format forbids (a zero type, a zero or negative length).
    #[error("invalid {field} {value} at offset {offset}")]
    InvalidField {
        /// Offset of the field.
        offset: u64,
        /// Which field.
        field: &'static str,
        /// The value found.
        value: i64,
    },
    /// A block length exceeds the reader's maximum.
    #[error("block length {length} at offset {offset} exceeds the limit of {limit} bytes")]
    TooLarge {
        /// Offset of the length field.
        offset: u64,
        /// The declared length.
        length: u64,
        /// The reader's limit on encoded block length.
        limit: u64,
    },
    /// The input ends before the block does.
    #[error("block at offset {offset} runs past the end of the input (needs {needed} more bytes)")]
    Truncated {
        /// Offset of the block's opening sync byte.
        offset: u64,
        /// How many bytes are missing.
        needed: u64,
    },
    /// The length field does not point at the block's closing sync byte.
    #[error("block length says the block ends at offset {expected}, but the next sync byte is at {found}")]
    SyncMismatch {
        /// Where the length field says the closing sync byte is.
        expected: u64,
        /// Where the next sync byte actually is (or the end of input).
        found: u64,
    },
    /// The COBS encoding is invalid (a code byte runs past the end of the block).
    #[error("invalid COBS code byte at offset {offset}")]
    Cobs {
        /// Offset of the code byte.
        offset: u64,
    },
    /// The decoded body is larger than the reader's maximum block size.
    #[error("block at offset {offset} decodes to {size} bytes, over the limit of {limit}")]
    BodyTooLarge {
        /// Offset of the block's opening sync byte.
        offset: u64,
        /// The decoded (or declared) size.
        size: u64,
        /// The reader's limit.
        limit: u64,
    },
    /// The CRC stored in the block does not match its contents.
    #[error("CRC mismatch in block at offset {offset}: stored {stored:#010x}, computed {computed:#010x}")]
    Crc {
        /// Offset of the block's opening sync byte.
        offset: u64,
        /// The CRC stored in the block.
        stored: u32,
        /// The CRC of the block's contents.
        computed: u32,
    },
    /// The block uses a codec this reader does not support.
    #[error("unsupported codec {codec} in block at offset {offset}")]
    UnsupportedCodec {
        /// Offset of the block's opening sync byte.
        offset: u64,
        /// The codec id.
        codec: i64,
    },
    /// The block is compressed with a dictionary the reader does not have.
    #[error("block at offset {offset} needs zstd dictionary {}, {}", format!("{needed:016x}"), match given { Some(id) => format!("but the reader was given dictionary {id:016x}"), None => "and the reader has none with that id".to_owned() })]
    Dictionary {
        /// Offset of the block's opening sync byte.
        offset: u64,
        /// The id of the dictionary the block was compressed with.
        needed: u64,
        /// The id of the dictionary the reader was given, if any.
        given: Option<u64>,
    },
    /// The compressed payload does not decompress to the size the block declares.
    #[error("block at offset {offset} does not decompress to its declared {declared} bytes")]
    SizeMismatch {
        /// Offset of the block's opening sync byte.
        offset: u64,
        /// The size the block declares.
        declared: u64,
    },
    /// zstd rejected the compressed payload.
    #[error("block at offset {offset} cannot be decompressed: {problem}")]
    Decompress {
        /// Offset of the block's opening sync byte.
        offset: u64,
        /// zstd's description of the problem.
        problem: &'static str,
    },
    /// Keeping what the block holds would exceed one of the reader's [`Limits`](crate::Limits)
    /// (a dictionary past the most dictionaries or dictionary bytes it keeps).
    #[error("block at offset {offset} exceeds the reader's limit of {limit} {what}; raise the limit to read it")]
    Limit {
        /// Offset of the block's opening sync byte.
        offset: u64,
        /// What is limited: `"dictionaries"`, `"dictionary bytes"`, `"bytes decompressed for
        /// damaged blocks"` or `"records of one time block"`.
        what: &'static str,
        /// The limit.
        limit: u64,
    },
    /// The block's CRC matched but its contents do not follow the format.
    #[error("malformed block at offset {offset}: {what}")]
    Malformed {
        /// Offset of the block's opening sync byte.
        offset: u64,
        /// What is wrong.
        what: &'static str,
    },
}

impl Cause {
    /// Whether the block is over one of the reader's limits on block size ([`Cause::TooLarge`],
    /// [`Cause::BodyTooLarge`]): damage to a length or size field, or a block written with a
    /// larger limit, which a reader with a larger limit reads.
    pub fn is_over_limit(&self) -> bool {
        matches!(self, Cause::TooLarge { .. } | Cause::BodyTooLarge { .. })
    }

    /// The cause's name in the spec's table (section 9.8): `no-sync`, `zero-run`, `varint`,
    /// `invalid-field`, `too-large`, `truncated`, `sync-mismatch`, `cobs`, `body-too-large`,
    /// `crc`, `unsupported-codec`, `dictionary`, `size-mismatch`, `decompress`, `malformed` or
    /// `limit`: a fixed word for scripts (`ls --json`, `verify --json`), beside the message
    /// that `Display` gives.
    pub fn name(&self) -> &'static str {
        match self {
            Cause::NoSync { .. } => "no-sync",
            Cause::ZeroRun { .. } => "zero-run",
            Cause::Varint { .. } => "varint",
            Cause::InvalidField { .. } => "invalid-field",
            Cause::TooLarge { .. } => "too-large",
            Cause::Truncated { .. } => "truncated",
            Cause::SyncMismatch { .. } => "sync-mismatch",
            Cause::Cobs { .. } => "cobs",
            Cause::BodyTooLarge { .. } => "body-too-large",
            Cause::Crc { .. } => "crc",
            Cause::UnsupportedCodec { .. } => "unsupported-codec",
            Cause::Dictionary { .. } => "dictionary",
            Cause::SizeMismatch { .. } => "size-mismatch",
            Cause::Decompress { .. } => "decompress",
            Cause::Malformed { .. } => "malformed",
            Cause::Limit { .. } => "limit",
        }
    }

    /// Whether the cause is damage to the bytes, rather than a block this reader cannot
    /// decode (a codec it does not support, a dictionary it was not given, a limit it keeps).
    pub fn is_damage(&self) -> bool {
        !matches!(
            self,
            Cause::UnsupportedCodec { .. } | Cause::Dictionary { .. } | Cause::Limit { .. }
        )
    }
}
