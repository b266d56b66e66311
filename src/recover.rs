//! Recovery: a new, valid file holding every intact block of a damaged one.
//!
//! Intact blocks are copied byte for byte, in file order, behind a fresh header and ahead of a
//! fresh time index, index and end block; damaged bytes, padding, extra header blocks (from
//! concatenated files), old index, time index and end blocks (they describe the old file), and
//! time blocks that describe no block (spec 8.8: next to another block in the output they
//! could describe the wrong records) are left out, so the output is a finished file (spec
//! 9.5.1) whatever the input was. A block is intact when a full read returns it, so its CRC
//! checked; nothing else is ever copied. Because blocks are copied as they are and what is
//! added depends only on them, recovering a recovered file gives the same bytes again.

use std::io::{self, Write};
use std::ops::{ControlFlow, Range};

use crate::block::{self, types, BlockType};
use crate::decoder::Block;
use crate::error::{Error, Result};
use crate::index::IndexBuilder;
use crate::limits::DEFAULT_MAX_BODY_SIZE;
use crate::range::RangeSink;
use crate::reader::ReaderBuilder;
use crate::report::Report;
use crate::time::TimeSpan;

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
        time: None,
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
    // A time index of the time blocks copied, right before the index, which lists it (8.9).
    if let Some(payload) = copier.index.time_payload(DEFAULT_MAX_BODY_SIZE) {
        let start = block::encode(types::TIME_INDEX, &payload, None, &mut block)?;
        copier.out.write_all(&block[start..])?;
        copier.index.push(&block[start..], 0);
        copier.blocks += 1;
        copier.written += (block.len() - start) as u64;
    }
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
    report.attribute_from(bytes);
    Ok(Recovery {
        report,
        blocks: copier.blocks,
        written: copier.written,
        newer_version,
    })
}

/// An intact block to copy: the bytes after its opening sync byte, which the output already
/// ends with, up to and including its closing one, and what the output's index needs of it.
struct Copy {
    range: Range<usize>,
    kind: Kind,
}

/// What a copied block is to the output's index and to pairing (spec 8.8).
enum Kind {
    /// A time block, with the span of its times: copied only with the data block it describes.
    Time(TimeSpan),
    /// A data block with its record count, and whether a time block describes it.
    Data {
        records: u64,
        timed: bool,
    },
    Other,
}

/// Notes where an intact block to copy lies. Header, index, time index and end blocks are not
/// copied: the output has its own.
fn copy_range(copies: &mut Vec<Copy>, block: &Block<'_>) {
    let info = block.info();
    let kind = match info.block_type {
        BlockType::Header | BlockType::Index | BlockType::TimeIndex | BlockType::End => return,
        BlockType::Data => Kind::Data {
            records: info.items.unwrap_or(0),
            timed: block.times().is_some(),
        },
        BlockType::Time => match block.times().and_then(TimeSpan::of) {
            Some(span) => Kind::Time(span),
            None => return,
        },
        _ => Kind::Other,
    };
    let start = info.offset as usize + 1;
    copies.push(Copy {
        range: start..start + info.size as usize,
        kind,
    });
}

struct Copier<'a, W> {
    bytes: &'a [u8],
    out: W,
    blocks: u64,
    written: u64,
    /// The index of the output, built as blocks are copied.
    index: IndexBuilder,
    failed: Option<io::Error>,
    /// A time block copied only if the block after it is the data block it describes: one
    /// whose data block was lost would describe whatever the output put next to it.
    time: Option<(Range<usize>, TimeSpan)>,
}

impl<W: Write> Copier<'_, W> {
    fn write(&mut self, range: Range<usize>, records: u64) -> io::Result<()> {
        let block = &self.bytes[range];
        self.out.write_all(block)?;
        self.index.push(block, records);
        self.blocks += 1;
        self.written += block.len() as u64;
        Ok(())
    }

    fn copy(&mut self, copy: Copy) -> io::Result<()> {
        let time = self.time.take();
        match copy.kind {
            Kind::Time(span) => self.time = Some((copy.range, span)),
            Kind::Data { records, timed } => {
                if let (Some((range, span)), true) = (time, timed) {
                    self.index.push_time(span);
                    self.write(range, 0)?;
                }
                self.write(copy.range, records)?;
            }
            Kind::Other => self.write(copy.range, 0)?,
        }
        Ok(())
    }
}

impl<W: Write> RangeSink<Vec<Copy>> for Copier<'_, W> {
    fn part(&mut self, copies: Vec<Copy>) -> ControlFlow<()> {
        for copy in copies {
            if let Err(e) = self.copy(copy) {
                self.failed = Some(e);
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    }
}
