//! # cobsfile
//!
//! A container file format in which a zero byte means one thing only: "a block starts here".
//!
//! A file is a sequence of blocks. Each block starts and ends with a sync byte 0x00; inside, a
//! varint type, a varint length that lets a reader skip the block, and the block body
//! COBS-encoded (Consistent Overhead Byte Stuffing) so that no other zero byte appears. Bodies
//! carry a CRC32. After any damage a reader resynchronizes at the next zero byte: every block
//! the damage did not touch comes back, and no block that fails its checksum is ever returned.
//! `spec/FORMAT.md` is the normative description.
//!
//! ```
//! use cobsfile::{Error, ReaderBuilder, Writer, WriterBuilder};
//!
//! // Write 3 blocks of 100 records each.
//! let mut writer = WriterBuilder::new().block_target(1000).build(Vec::new())?;
//! writer.write_metadata([("source", "example")])?;
//! for i in 0..300 {
//!     writer.write_record(format!("event {i:03}").as_bytes())?;
//! }
//! let mut file = writer.finish()?;
//!
//! // Flip a byte in the middle of the file.
//! let middle = file.len() / 2;
//! file[middle] ^= 0x40;
//!
//! // The reader reports the damaged range once, then goes on with the next intact block.
//! let (records, errors) = ReaderBuilder::new().from_slice(&file).read_all();
//! assert_eq!(errors.len(), 1);
//! assert!(matches!(errors[0], Error::Damaged { .. }));
//! assert_eq!(records.len(), 200);
//! assert_eq!(records[0], b"event 000");
//! assert_eq!(records[199], b"event 299");
//!
//! // Recovery writes a new file of every intact block: clean, and it recovers to itself.
//! let mut recovered = Vec::new();
//! let recovery = cobsfile::recover(&file, &ReaderBuilder::new(), &mut recovered)?;
//! assert_eq!(recovery.report.damaged.len(), 1);
//! assert_eq!(recovery.report.records, 200);
//! assert!(ReaderBuilder::new().verify(&recovered)?.is_clean());
//! # Ok::<(), Error>(())
//! ```
//!
//! ## Layers
//! Each module depends only on those above it (no cycles):
//! - [`varint`], [`cobs`], the frame scanner, the codecs, the block bodies (`block`) and the
//!   time blocks' payloads (`time`: [`TimeSpan`], [`Window`]) are pure functions over byte
//!   slices; [`Limits`] bounds what a reader may spend; [`key`] holds the Ed25519 keys that
//!   sign seals, and [`seal`] what a seal says and its bytes, the [`seal::Sealer`] a writer
//!   feeds its blocks, and [`seal::verify`], which matches a file's blocks to its seals;
//! - [`Decoder`] is the sans-I/O reader: bytes in, blocks and damage out, one home for the
//!   frame scan, decoding, dictionaries, damage merging, range bounds, pairing time blocks
//!   with their data blocks and passing over those outside a time window (or, by a time
//!   index, jumping over them);
//! - [`Reader`] drives a decoder over a slice, a [`MappedFile`] or any `io::Read`;
//!   [`ReaderBuilder::read_ranges`] reads a slice in ranges ([`ReaderBuilder::from_slice_range`]),
//!   each a decoder, on several threads with the result of one reader, applying the damage
//!   policy ([`OnDamage`]); a reader with [`ReaderBuilder::threads`] (over a [`MappedFile`]
//!   or shared bytes) reads what it has left through the same range reads, settled in order
//!   by its own decoder; [`Remote`] reads a file by byte ranges ([`Fetch`]: an object in a
//!   store), fetching only what each read needs, through the same range reads;
//! - [`verify`] reports a file's intact, damaged and unreadable ranges and how it ends
//!   ([`Report`], [`Ending`]: finished, an open log, unfinished or empty);
//!   [`ReaderBuilder::verify_seals`] also what its seals prove, each block's leaf hashed on
//!   the range reads' threads; [`recover`] writes
//!   every intact block into a new, finished file; [`Index`] finds the index block a writer ends a file
//!   with, to seek to a record;
//! - [`fs`] is the file operations an appender performs (the real file system, and a
//!   simulated one that can lose power, for tests);
//! - [`Writer`] writes blocks to any `io::Write`, each in one write (`emit`; a time block with
//!   its data block) ([`WriterBuilder::threads`] compresses on
//!   worker threads); [`Appender`] reopens a log after a crash (cutting or fencing a torn last
//!   block) and appends with the [`Durability`] the caller chooses, several processes at once
//!   if need be (`tail` says how a log's bytes end, for both); [`finish_log`] finishes a log
//!   no one appends to any more in place (an index that lists its padding and damage as gaps,
//!   a time index, an end block); [`segments`] keeps a log as a directory of segments that an
//!   appender ([`AppenderBuilder::open_dir`]) rolls by size or age, finishes when it leaves
//!   them, and removes by retention;
//! - `avro` (feature `avro`) writes typed records through a [`Writer`] or an [`Appender`] and
//!   reads them through a [`Reader`]: schemas in metadata blocks, each record in Avro's
//!   single-object encoding;
//! - [`Follower`] reads a growing file (an append-only log) as blocks land, like `tail -f`,
//!   through truncation and log rotation;
//! - the `cobsfile` command-line tool parses arguments and formats output around the library.

#![deny(missing_docs)]

mod appender;
#[cfg(feature = "avro")]
pub mod avro;
mod block;
pub mod cobs;
mod codec;
mod decoder;
mod emit;
mod ending;
mod error;
mod finish;
mod follow;
mod frame;
pub mod fs;
mod index;
pub mod key;
mod limits;
mod mapped;
mod parallel;
pub mod pipe;
mod range;
mod reader;
mod recover;
mod remote;
mod report;
#[cfg(target_os = "linux")]
pub mod seal;
pub mod segments;
mod sigbus;
mod source;
mod tail;
mod time;
pub mod varint;
mod verify;
mod writer;

pub use appender::{Appender, AppenderBuilder, Durability, Opened, DEFAULT_GROUP_BYTES};
pub use block::{BlockType, Entries, Records, FORMAT_VERSION, MAGIC};
pub use codec::{dictionary_id, Compression, Dictionary, DictionaryId};
pub use decoder::{codec_name, Block, BlockInfo, Decoder, Input, Stats, Step, Want};
pub use ending::Ending;
pub use error::{Cause, Error, Result};
pub use finish::{finish_log, finish_log_in, Finish, Finished};
pub use follow::{FollowEvent, Follower, FollowerBuilder};
pub use index::{Index, IndexEntry};
pub use limits::{
    Limits, DEFAULT_MAX_BODY_SIZE, DEFAULT_MAX_DAMAGED_DECODING, DEFAULT_MAX_DICTIONARIES,
    DEFAULT_MAX_DICTIONARY_BYTES,
};
pub use mapped::{open, MappedFile, MetadataScan, RandomAccess};
pub use range::{RangeSink, RangeWork};
pub use reader::{
    Blocks, IntoRecords, Item, Metadata, MetadataBlocks, OwnedRecords, Reader, ReaderBuilder,
    SliceReader, StreamReader,
};
pub use recover::{recover, NewerVersion, Recovery};
pub use remote::{Chunks, Fetch, Remote, FIRST_FETCH, MAX_FETCH, TAIL_FETCH};
pub use report::{BlockCounts, Damage, DamageFn, Held, NotACobsfile, OnDamage, Report};
pub use source::{SliceSource, Source, StreamSource};
pub use time::{TimeSpan, Window, TIME_FIELD_KEY};
pub use verify::verify;
pub use writer::{Writer, WriterBuilder, DEFAULT_BLOCK_TARGET, DEFAULT_COMPRESSED_BLOCK_TARGET};

/// The README's Rust example, compiled and run as a doctest.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// Options whose result is dropped warn (`unused_must_use`): `builder.threads(2);` alone
/// changes nothing. Each of these fails under `deny`, and the same calls used compile.
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// cobsfile::WriterBuilder::new().threads(2);
/// ```
/// ```compile_fail
/// #![deny(unused_must_use)]
/// cobsfile::ReaderBuilder::new().threads(2);
/// ```
/// ```compile_fail
/// #![deny(unused_must_use)]
/// cobsfile::AppenderBuilder::new().threads(2);
/// ```
/// ```compile_fail
/// #![deny(unused_must_use)]
/// cobsfile::FollowerBuilder::new().from_end(true);
/// ```
/// ```compile_fail
/// #![deny(unused_must_use)]
/// cobsfile::Limits::default().max_dictionaries(1);
/// ```
/// ```
/// #![deny(unused_must_use)]
/// let _ = cobsfile::WriterBuilder::new().threads(2);
/// let _ = cobsfile::ReaderBuilder::new().threads(2);
/// let _ = cobsfile::AppenderBuilder::new().threads(2);
/// let _ = cobsfile::FollowerBuilder::new().from_end(true);
/// let _ = cobsfile::Limits::default().max_dictionaries(1);
/// ```
#[cfg(doctest)]
pub struct MustUseDoctests;
