//! How a log's bytes end (spec 11.1, rule 2): its last intact block, a torn tail after it, a
//! block whole but for its closing sync byte, and whether it is an open log: what an
//! [`Appender`](crate::Appender) looks at when it opens a log, and what finishing one
//! ([`finish_log`](crate::finish_log)) looks at first.

use crate::block::{self, types, BlockType};
use crate::error::{Error, Result};
use crate::frame::{self, Check, Found};
use crate::reader::ReaderBuilder;

/// Whether the bytes from `end` (one past the last intact block) are one block but
/// for its closing sync byte, opened by the last intact block's closing sync byte or by a
/// sync byte of its own right after it: a write cut just short of its end.
pub(crate) fn lacks_closing_sync(bytes: &[u8], end: u64) -> bool {
    let Some(open) = memchr::memrchr(0, bytes) else {
        return false;
    };
    if (open as u64) + 1 < end || open as u64 > end || bytes.len() - open > MAX_COMPLETED {
        return false;
    }
    let mut block = bytes[open..].to_vec();
    block.push(0);
    match ReaderBuilder::new().from_slice(&block).next_block() {
        Some(Ok(b)) => b.info().offset == 0 && b.info().size as usize == block.len() - 1,
        _ => false,
    }
}

/// Fails if a header block of a newer version lies further on in `bytes` (files
/// concatenated): a full read stops there, so what is appended after it could not be read.
/// Otherwise returns the type of the last header, end or log block after offset 0 that a full
/// read finds intact and that opens at or before `last` (the last intact block): with the
/// type of that block, what tells an open log (spec 9.5.1, 11.1 rule 6).
///
/// A full read tries every 0x00 as a block's opening sync byte (blocks hold no other), so
/// every header, end and log block it would meet starts `00 02`, `00 0c` or `00 0e` (types 1,
/// 6 and 7), and each such place is checked as a range reader starting there, which decodes
/// what a full read would. This reads the whole file once, at memchr speed, where a skipping
/// scan (spec 9.3) reads only block headers; but a damaged length that lands on a sync byte
/// makes a skipping scan jump over whatever lies between, and it once hid such a header from
/// the appender (`fuzz/regressions/append_after_garbage/newer-header-hidden-from-skipping-scan`).
pub(crate) fn scan_headers_and_marks(bytes: &[u8], last: usize) -> Result<Option<BlockType>> {
    let options = ReaderBuilder::new();
    let mut mark = None;
    for open in memchr::memchr_iter(0, bytes) {
        let wanted = match bytes.get(open + 1) {
            Some(0x02) => true,
            Some(0x0c | 0x0e) => open <= last,
            _ => false,
        };
        if open == 0 || !wanted {
            continue;
        }
        let at = open as u64;
        match options.from_slice_range(bytes, at..at + 1).next_block() {
            Some(Err(e @ Error::UnsupportedVersion { .. })) => return Err(e),
            Some(Ok(block)) if block.info().offset == at && open <= last => {
                mark = Some(block.info().block_type);
            }
            _ => {}
        }
    }
    Ok(mark)
}

/// Whether the frame that opens at `open` is sound (spec 6) and closes at `close`, whatever
/// its length: no reader limit applies.
pub(crate) fn sound_frame(bytes: &[u8], open: usize, close: usize) -> bool {
    let frame = frame::read_at(&bytes[..=close], open, 0, true, u64::MAX, Check::Full, 0);
    matches!(frame, Found::Frame(f) if f.end == close)
}

/// The largest torn block an appender completes (copying it to check it): larger ones are
/// cut off.
pub(crate) const MAX_COMPLETED: usize = 64 << 20;

/// Whether the file of `bytes`, whose last intact block (or, with a torn tail, last complete
/// block) opens at `last`, is an open log (spec 9.5.1): that block is not an end or index
/// block, and of the header, end and log blocks, the last intact one is a log block (`mark`,
/// found before it by [`scan_headers_and_marks`]).
pub(crate) fn is_open_log(bytes: &[u8], last: usize, mark: Option<BlockType>) -> bool {
    match bytes.get(last + 1..).map(crate::varint::read) {
        Some(Ok((types::LOG, _))) => true,
        Some(Ok((types::END | types::INDEX | types::HEADER, _))) => false,
        _ => mark == Some(BlockType::Log),
    }
}

/// The end of the last intact block of the file's `bytes` (one past its closing sync byte),
/// found by scanning back from the end, and the offset of that block's opening sync byte:
/// each 0x00 there may close a block, and the block it closes is intact if its frame is
/// sound and its body checks (a block that needs a dictionary or a codec this reader lacks
/// counts, since its frame is complete). Fails if the file does not start with a header block
/// this version reads.
pub(crate) fn intact_end(bytes: &[u8]) -> Result<(u64, usize)> {
    let mut header = ReaderBuilder::new().from_slice_range(bytes, 0..1);
    let header_end = match header.next_block() {
        Some(Ok(block))
            if block.info().block_type == BlockType::Header && block.info().offset == 0 =>
        {
            Some(block.info().size + 1)
        }
        Some(Err(e @ Error::UnsupportedVersion { .. })) => return Err(e),
        _ if header_lost(bytes) => None,
        _ => return Err(Error::NotACobsfile { offset: 0 }),
    };
    let mut end = bytes.len();
    while let Some(close) = memchr::memrchr(0, &bytes[..end]) {
        let Some(open) = memchr::memrchr(0, &bytes[..close]) else {
            break;
        };
        if close == open + 1 {
            // Padding (or zeros): the block before it decides.
            end = close;
            continue;
        }
        let mut reader = ReaderBuilder::new().from_slice_range(bytes, open as u64..open as u64 + 1);
        let complete = match reader.next_block() {
            Some(Ok(block)) => block.info().offset == open as u64,
            // A block over the reader's limits, or that needs a dictionary or codec it lacks,
            // cannot be checked; its frame is complete if it is sound, whatever the limits
            // (spec 11.1, rule 2): a log written with larger blocks is never cut.
            Some(Err(Error::Damaged { cause, start, .. })) if start == open as u64 + 1 => {
                !cause.is_damage() || (cause.is_over_limit() && sound_frame(bytes, open, close))
            }
            _ => false,
        };
        if complete {
            return Ok((close as u64 + 1, open));
        }
        end = close;
    }
    // No intact block: a lost header is then all the evidence, which is too little.
    header_end
        .map(|end| (end, 0))
        .ok_or(Error::NotACobsfile { offset: 0 })
}

/// Whether `bytes` are one or two sync bytes alone: a file with no blocks, cut before its
/// header (spec 5), which appenders start again and `finish_log` leaves as it is.
pub(crate) fn sync_bytes_alone(bytes: &[u8]) -> bool {
    (1..=2).contains(&bytes.len()) && bytes.iter().all(|&b| b == 0)
}

/// Whether the file of `bytes` starts as one whose header a power cut took: where its 19
/// first bytes should be, each is that byte or zero (a write lost in a power cut leaves
/// zeros where the file's length survived without its data, sector by sector). Only with an
/// intact block further on does the file count as a log (spec 11.1, rule 1).
pub(crate) fn header_lost(bytes: &[u8]) -> bool {
    let start = block::file_start();
    bytes.len() >= start.len() && bytes.iter().zip(&start).all(|(&b, &s)| b == s || b == 0)
}
