//! Recovery: a new, valid file holding every intact block of a damaged one.
//!
//! Intact blocks are copied byte for byte, in file order, behind a fresh header and ahead of a
//! fresh index and end block; damaged bytes, padding, extra header blocks (from concatenated
//! files), old index blocks and old end blocks (they describe the old file) are left out, so
//! the output is a finished file (spec 9.5.1) whatever the input was. A block is intact when a full read returns it, so its CRC
//! checked; nothing else is ever copied. Because blocks are copied as they are and what is
//! added depends only on them, recovering a recovered file gives the same bytes again.

use std::io::{self, Write};
use std::ops::{ControlFlow, Range};

use crate::block::{self, types, BlockType};
use crate::decoder::Block;
use crate::error::{Error, Result};
use crate::index::{Index, IndexBuilder};
use crate::limits::DEFAULT_MAX_BODY_SIZE;
use crate::range::RangeSink;
use crate::reader::ReaderBuilder;
use crate::report::Report;

/// What [`recover`] wrote, and what the input held.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovery {
    /// The full read of the input: its intact blocks and records, and the damaged ranges,
    /// which are what was lost.
    pub report: Report,
    /// Blocks written, the header, index and end blocks included.
    pub blocks: u64,
    /// Bytes written.
    pub written: u64,
    /// Where a header of a newer format version stopped the read: the blocks before it were
    /// recovered, nothing after it was read.
    pub newer_version: Option<NewerVersion>,
}

/// A header of a format version newer than this library reads, found where a recovery stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewerVersion {
    /// Offset of the header block's opening sync byte.
    pub offset: u64,
    /// The version it declares.
    pub version: i64,
}

impl Recovery {
    /// Whether nothing was lost: the input had no damaged or unreadable range, and no header
    /// of a newer version stopped the read. An unfinished input recovers losslessly (the
    /// output holds all it holds, and is finished), though blocks its writer wrote after the
    /// cut, if any, were never in it: its [`Report::ending`] says so.
    pub fn is_lossless(&self) -> bool {
        self.report.damaged.is_empty() && self.newer_version.is_none()
    }
}

/// Writes to `out` a file holding every intact block of `bytes`, in order, and reports what
/// was lost.
///
/// The output starts with a header block; then come the intact blocks of the input, copied
/// byte for byte (metadata and dictionary blocks stay where they were among the data blocks,
/// log blocks and blocks of unknown types are kept); it ends with an index of those blocks
/// (spec 8.5) and an end block (8.6), so it is finished. Header, index and end blocks of the
/// input are not copied: the output has one of each. When the
/// input ends with a usable index, each damaged range of the report says what it held
/// ([`Damage::held`](crate::Damage::held)). A block that fails any check, its CRC among them, is never copied; nor
/// is a block compressed with a dictionary `options` does not provide and the file does not
/// embed before it, since its CRC cannot be checked (it is reported as unreadable).
///
/// Fails when `out` fails (`out` then holds a partial file). A header of a format version this
/// library does not read stops the read there, as it stops any reader (spec 8.1): the blocks
/// before it are recovered and the file is finished, and [`Recovery::newer_version`] says where
/// the read stopped.
/// With [`ReaderBuilder::threads`], blocks are checked on that many threads (see
/// [`ReaderBuilder::read_ranges`]); the output is the same.
///
/// ```
/// let mut writer = cobsfile::WriterBuilder::new().block_target(100).build(Vec::new())?;
/// for i in 0..100 {
///     writer.write_record(format!("event {i}").as_bytes())?;
/// }
/// let mut file = writer.finish()?;
/// file[300] ^= 1;
///
/// let mut recovered = Vec::new();
/// let recovery = cobsfile::recover(&file, &cobsfile::ReaderBuilder::new(), &mut recovered)?;
/// assert!(!recovery.is_lossless());
///
/// // The recovered file is clean, holds what the damaged one did, and recovers to itself.
/// let mut again = Vec::new();
/// let second = cobsfile::recover(&recovered, &cobsfile::ReaderBuilder::new(), &mut again)?;
/// assert!(second.is_lossless());
/// assert_eq!(second.report.records, recovery.report.records);
/// assert_eq!(again, recovered);
/// # Ok::<(), cobsfile::Error>(())
/// ```
pub fn recover<W: Write>(bytes: &[u8], options: &ReaderBuilder, out: W) -> Result<Recovery> {
    let header = block::file_start();
    let mut copier = Copier {
        bytes,
        out,
        blocks: 1,
        written: header.len() as u64,
        index: IndexBuilder::new(true),
        failed: None,
    };
    copier.out.write_all(&header)?;
    copier.index.push(&header[1..], 0);
    // A header of a newer version stops the read there (spec 8.1): the blocks before it are
    // recovered and the file finished; what follows it is not read (spec 9.5).
    let (mut report, stopped) =
        options.read_ranges_until_stopped(bytes, copy_range, &mut copier)?;
    let newer_version = match stopped {
        None => None,
        Some(Error::UnsupportedVersion {
            offset, version, ..
        }) => Some(NewerVersion { offset, version }),
        Some(other) => return Err(other),
    };
    if let Some(e) = copier.failed {
        return Err(e.into());
    }
    let mut block = Vec::new();
    if let Some(payload) = copier.index.payload(DEFAULT_MAX_BODY_SIZE) {
        let start = block::encode(types::INDEX, &payload, None, &mut block)?;
        copier.out.write_all(&block[start..])?;
        copier.blocks += 1;
        copier.written += (block.len() - start) as u64;
    }
    let start = block::encode(types::END, &[], None, &mut block)?;
    copier.out.write_all(&block[start..])?;
    copier.blocks += 1;
    copier.written += (block.len() - start) as u64;
    copier.out.flush()?;
    if let Some(index) = Index::find(bytes).filter(|i| i.start() == 0) {
        report.attribute(&index);
    }
    Ok(Recovery {
        report,
        blocks: copier.blocks,
        written: copier.written,
        newer_version,
    })
}

/// Notes where an intact block to copy lies, with its record count for the index: the bytes
/// after its opening sync byte, which the output already ends with, up to and including its
/// closing one. Header, index and end blocks are not copied: the output has its own.
fn copy_range(ranges: &mut Vec<(Range<usize>, u64)>, block: &Block<'_>) {
    let info = block.info();
    let records = match info.block_type {
        BlockType::Header | BlockType::Index | BlockType::End => return,
        BlockType::Data => info.items.unwrap_or(0),
        _ => 0,
    };
    let start = info.offset as usize + 1;
    ranges.push((start..start + info.size as usize, records));
}

/// Writes the blocks a read found, in order.
struct Copier<'a, W> {
    bytes: &'a [u8],
    out: W,
    blocks: u64,
    written: u64,
    /// The index of the output, built as blocks are copied.
    index: IndexBuilder,
    failed: Option<io::Error>,
}

impl<W: Write> RangeSink<Vec<(Range<usize>, u64)>> for Copier<'_, W> {
    fn part(&mut self, ranges: Vec<(Range<usize>, u64)>) -> ControlFlow<()> {
        for (range, records) in ranges {
            let len = range.len() as u64;
            let block = &self.bytes[range];
            if let Err(e) = self.out.write_all(block) {
                self.failed = Some(e);
                return ControlFlow::Break(());
            }
            self.index.push(block, records);
            self.blocks += 1;
            self.written += len;
        }
        ControlFlow::Continue(())
    }
}
