//! Finishing a log in place (spec 11.3): an index of its blocks, a time index, and an end
//! block appended to a log no one appends to any more, so that readers seek in it, read time
//! windows by its time index, and know it whole.
//!
//! A log's blocks do not lie end to end as a writer's do: every block an appender writes has a
//! sync byte of its own in front (spec 11.1, rule 3), one byte of padding after an intact block,
//! and a crashed appender may have left a torn block that the next fence ends. The index lists
//! those bytes as **gap** entries (type 10, spec 8.5), so that its entries still add up to the
//! bytes before it and every block opens where the sums say.
//!
//! Finishing needs the log to itself: it takes the file's exclusive lock, which no appender
//! and no reader that maps the file holds then (they hold shared locks), and leaves the file
//! as it is when it cannot. Alone, it cuts a torn tail (or completes a block that lacks only
//! its closing sync byte) as an appender alone does, cuts an index and time index a finish cut
//! short left at the end, lists what is left, and appends the three blocks in one write, then
//! syncs the file. A crash at any point leaves a log that finishing again finishes.

use std::ops::ControlFlow;
use std::path::Path;

use crate::block::{self, types, BlockType};
use crate::decoder::Block;
use crate::error::Result;
use crate::fs::{FileSystem, Handle, StdFs};
use crate::index::IndexBuilder;
use crate::limits::DEFAULT_MAX_BODY_SIZE;
use crate::range::RangeSink;
use crate::reader::ReaderBuilder;
use crate::tail::{intact_end, lacks_closing_sync, scan_headers_and_marks, sync_bytes_alone};
use crate::time::TimeSpan;

/// What [`finish_log`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finish {
    /// Others have the file open (appenders, or readers that map it): it was left as it is.
    Busy,
    /// The file was finished already (its last intact block is an end block).
    Already,
    /// The file holds no blocks (no bytes, or one or two sync bytes alone): nothing to
    /// finish; it is left as it is.
    Empty,
    /// The file was finished.
    Finished(Finished),
}

/// What finishing a log wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Finished {
    /// Bytes cut from the end first: a torn tail, or an index a finish cut short left.
    pub cut: u64,
    /// Intact blocks the index lists.
    pub blocks: u64,
    /// Records of the data blocks it lists.
    pub records: u64,
    /// Bytes between blocks that the index lists as gaps: padding, and damage.
    pub gap_bytes: u64,
    /// An index was written. It is not when a block could not be checked (it needs a
    /// dictionary this reader was not given, or is over its limits) or the index would be
    /// larger than a block may be: an index must count every record, so the log is then
    /// finished with an end block alone.
    pub indexed: bool,
    /// A time index was written, for the time blocks followed by the data blocks they describe.
    pub timed: bool,
    /// The file's length now.
    pub len: u64,
}

/// Finishes the log at `path` in place (spec 11.3), if no one else has it open (it takes the
/// file's exclusive lock, which no appender and no reader that maps the file holds then):
/// cuts a torn tail, or completes a block that lacks only its closing sync byte, then appends a
/// time index, an index whose gap entries (type 10) list the padding between appended blocks
/// and any damage, and an end block, in one write, and syncs the file. A crash at any point
/// leaves a log that finishing again finishes. `options` gives the dictionaries and limits to
/// check its blocks with.
///
/// ```
/// use cobsfile::{AppenderBuilder, Durability, Finish};
///
/// let path = std::env::temp_dir().join(format!("cobsfile-finish-doc-{}", std::process::id()));
/// # let _ = std::fs::remove_file(&path);
/// let mut log = AppenderBuilder::new().durability(Durability::Flush).open(&path)?;
/// log.append(b"one")?;
/// log.append(b"two")?;
/// log.close()?;
///
/// let Finish::Finished(finished) = cobsfile::finish_log(&path, &cobsfile::ReaderBuilder::new())? else {
///     panic!("no one else had it open");
/// };
/// assert!(finished.indexed && finished.records == 2);
/// let bytes = std::fs::read(&path)?;
/// let index = cobsfile::Index::find(&bytes).expect("an index");
/// assert_eq!(index.records(), 2);
/// assert_eq!(cobsfile::ReaderBuilder::new().from_slice_at_record(&bytes, 1).next_record().unwrap()?, b"two");
/// # std::fs::remove_file(&path)?;
/// # Ok::<(), cobsfile::Error>(())
/// ```
pub fn finish_log(path: impl AsRef<Path>, options: &ReaderBuilder) -> Result<Finish> {
    finish_log_in(&StdFs, path, options)
}

/// [`finish_log`] on `fs`, a simulated file system in tests.
pub fn finish_log_in(
    fs: &dyn FileSystem,
    path: impl AsRef<Path>,
    options: &ReaderBuilder,
) -> Result<Finish> {
    let file = fs.open_existing(path.as_ref())?;
    finish_open(&*file, options)
}

/// Finishes the log open as `file`; see [`finish_log`].
pub(crate) fn finish_open(file: &dyn Handle, options: &ReaderBuilder) -> Result<Finish> {
    if !file.try_lock()? {
        return Ok(Finish::Busy);
    }
    let len = file.len()?;
    if len == 0 {
        return Ok(Finish::Empty);
    }
    let mut contents = file.contents()?;
    if sync_bytes_alone(contents.bytes()) {
        return Ok(Finish::Empty);
    }
    let (mut end, mut last) = intact_end(contents.bytes())?;
    let mut len = contents.bytes().len() as u64;
    if end < len && lacks_closing_sync(contents.bytes(), end) {
        // The block is whole but for its closing sync byte: written, and the block kept.
        drop(contents);
        file.append_all(&[0])?;
        contents = file.contents()?;
        (end, last) = intact_end(contents.bytes())?;
        len = contents.bytes().len() as u64;
    }
    let bytes = contents.bytes();
    let last_type = bytes.get(last + 1..).map(crate::varint::read);
    if matches!(last_type, Some(Ok((types::END, _)))) {
        drop(contents);
        if end < len {
            file.set_len(end)?;
            file.sync_data()?;
        }
        return Ok(Finish::Already);
    }
    scan_headers_and_marks(bytes, last)?;
    // Read where it is mapped (no copy: a log may be larger than memory), up to the end of
    // its last intact block; the mapping goes before the file is cut or appended to.
    let mut listing = Listing::default();
    let (report, stopped) =
        options.read_ranges_until_stopped(&bytes[..end as usize], list, &mut listing)?;
    drop(contents);
    if let Some(e) = stopped {
        return Err(e);
    }
    // An index or time index at the end (a finish cut short before its end block): cut, and
    // listed again below with the rest.
    let mut keep = listing.blocks.len();
    while keep > 0
        && matches!(
            listing.blocks[keep - 1].block_type,
            BlockType::Index | BlockType::TimeIndex
        )
    {
        keep -= 1;
    }
    let mut listed_end = end;
    if keep < listing.blocks.len() {
        let first_cut = &listing.blocks[keep];
        listed_end = first_cut.offset + 1;
        listing.blocks.truncate(keep);
    }
    let unreadable = report.damaged.iter().any(|d| !d.is_damage());
    let mut out = Vec::new();
    if listed_end < len {
        file.set_len(listed_end)?;
    }
    let mut finished = Finished {
        cut: len - listed_end,
        ..Finished::default()
    };
    let mut index = IndexBuilder::new(!unreadable);
    let mut at = 0;
    let blocks = &listing.blocks;
    for (i, b) in blocks.iter().enumerate() {
        if b.offset > at {
            index.push_gap(b.offset - at);
            finished.gap_bytes += b.offset - at;
        }
        if let (Some(span), Some(next)) = (b.span, blocks.get(i + 1)) {
            // Only with the data block it describes right after it (spec 8.9).
            if next.block_type == BlockType::Data && next.offset == b.offset + b.size {
                index.push_time(span);
            }
        }
        index.push_entry(b.block_type.type_id(), b.size, b.items);
        finished.blocks += 1;
        finished.records += b.items;
        at = b.offset + b.size;
    }
    let mut block = Vec::new();
    if let Some(payload) = index.time_payload(DEFAULT_MAX_BODY_SIZE) {
        let start = block::encode(types::TIME_INDEX, &payload, None, &mut block)?;
        index.push(&block[start..], 0);
        if let Some(index_payload) = index.payload(DEFAULT_MAX_BODY_SIZE) {
            out.extend_from_slice(&block[start..]);
            finished.timed = true;
            let start = block::encode(types::INDEX, &index_payload, None, &mut block)?;
            out.extend_from_slice(&block[start..]);
            finished.indexed = true;
        }
    } else if let Some(payload) = index.payload(DEFAULT_MAX_BODY_SIZE) {
        let start = block::encode(types::INDEX, &payload, None, &mut block)?;
        out.extend_from_slice(&block[start..]);
        finished.indexed = true;
    }
    out.extend_from_slice(&block::empty_block(types::END)[1..]);
    file.append_all(&out)?;
    file.sync_data()?;
    finished.len = file.len()?;
    Ok(Finish::Finished(finished))
}

/// An intact block as the index lists it.
struct Listed {
    offset: u64,
    block_type: BlockType,
    size: u64,
    items: u64,
    /// A time block's span.
    span: Option<TimeSpan>,
}

/// The intact blocks of the log, in file order.
#[derive(Default)]
struct Listing {
    blocks: Vec<Listed>,
}

fn list(blocks: &mut Vec<Listed>, block: &Block<'_>) {
    let info = block.info();
    let span = match info.block_type {
        BlockType::Time => block.times().and_then(TimeSpan::of),
        _ => None,
    };
    blocks.push(Listed {
        offset: info.offset,
        block_type: info.block_type,
        size: info.size,
        items: match info.block_type {
            BlockType::Data => info.items.unwrap_or(0),
            _ => 0,
        },
        span,
    });
}

impl RangeSink<Vec<Listed>> for Listing {
    fn part(&mut self, mut part: Vec<Listed>) -> ControlFlow<()> {
        self.blocks.append(&mut part);
        ControlFlow::Continue(())
    }
}
