//! Recovery: a new, valid file holding every intact block of a damaged one.
//!
//! Intact blocks are copied byte for byte, in file order, behind a fresh header; damaged
//! bytes, padding and extra header blocks (from concatenated files) are left out. A block is
//! intact when a full read returns it, so its CRC checked; nothing else is ever copied.
//! Because blocks are copied as they are and nothing else is added, recovering a recovered
//! file gives the same bytes again.

use std::io::Write;

use crate::block::{self, types, BlockKind};
use crate::error::Result;
use crate::reader::ReaderBuilder;
use crate::verify::Report;

/// What [`recover`] wrote, and what the input held.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovery {
    /// The full read of the input: its intact blocks and records, and the damaged ranges,
    /// which are what was lost.
    pub report: Report,
    /// Blocks written, the header included.
    pub blocks: u64,
    /// Bytes written.
    pub written: u64,
}

impl Recovery {
    /// Whether nothing was lost: the input had no damaged or unreadable range.
    pub fn is_lossless(&self) -> bool {
        self.report.is_clean()
    }
}

/// The bytes every file written by this version starts with: the leading sync byte and the
/// header block.
pub(crate) fn file_header() -> Vec<u8> {
    let mut out = Vec::new();
    let start = block::encode(types::HEADER, &block::header_payload(), None, &mut out)
        .expect("the header block is small");
    out[start - 1] = 0;
    out.drain(..start - 1);
    out
}

/// Writes to `out` a file holding every intact block of `bytes`, in order, and reports what
/// was lost.
///
/// The output starts with a header block; then come the intact blocks of the input, copied
/// byte for byte (metadata and dictionary blocks stay where they were among the data blocks,
/// blocks of unknown types are kept). Header blocks of the input are not copied: the output
/// has exactly one. A block that fails any check, its CRC among them, is never copied; nor
/// is a block compressed with a dictionary `options` does not provide and the file does not
/// embed before it, since its CRC cannot be checked (it is reported as unreadable).
///
/// Fails when `out` fails or the input declares a format version this library does not
/// read (what follows such a header cannot be checked); `out` then holds a partial file.
///
/// ```
/// let mut writer = cobsfile::WriterBuilder::new().block_size(100).build(Vec::new())?;
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
pub fn recover<W: Write>(bytes: &[u8], options: &ReaderBuilder, mut out: W) -> Result<Recovery> {
    let mut recovery = Recovery::default();
    let header = file_header();
    out.write_all(&header)?;
    recovery.blocks = 1;
    recovery.written = header.len() as u64;
    let mut reader = options.from_slice(bytes);
    while let Some(item) = reader.next_block() {
        let info = match item {
            Ok(block) => block.info().clone(),
            Err(e) => {
                recovery.report.add_error(e)?;
                continue;
            }
        };
        recovery.report.add_block(&info);
        if info.kind == BlockKind::Header {
            continue;
        }
        // The block after its opening sync byte, which the output already ends with.
        let start = info.offset as usize + 1;
        let copy = &bytes[start..start + info.size as usize];
        out.write_all(copy)?;
        recovery.blocks += 1;
        recovery.written += copy.len() as u64;
    }
    recovery.report.len = bytes.len() as u64;
    out.flush()?;
    Ok(recovery)
}
