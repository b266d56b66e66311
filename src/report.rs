//! What a full read found: intact blocks and records by type, damaged and unreadable ranges,
//! and how the file ends (spec 9.5).

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;

use crate::block::BlockType;
use crate::decoder::BlockInfo;
use crate::error::{Cause, Error, Result};
use crate::index::Index;

/// A damaged (or unreadable) byte range, as a full read reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// The bytes skipped: from the first damaged byte to the next sync byte that opens an
    /// intact block, or the end of the input.
    pub range: Range<u64>,
    /// What gave the damage away.
    pub cause: Cause,
    /// What the range held as written, when the file's index says (see
    /// [`Report::attribute`]).
    pub held: Option<Held>,
}

/// The blocks and records a damaged range held when it was written, as the file's index lists
/// them: the blocks that open in the range (or at the sync byte just before it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Held {
    /// Blocks of every type.
    pub blocks: u64,
    /// Data blocks among them.
    pub data_blocks: u64,
    /// Metadata blocks among them.
    pub metadata_blocks: u64,
    /// The records of the data blocks.
    pub records: u64,
}

impl Damage {
    /// Whether the range is damaged, rather than unreadable by this reader (a block that
    /// needs a dictionary the reader was not given); see [`Cause::is_damage`].
    pub fn is_damage(&self) -> bool {
        self.cause.is_damage()
    }
}

impl fmt::Display for Damage {
    /// As [`Error::Damaged`] says it: `bytes START..END damaged: CAUSE`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = if self.is_damage() {
            "damaged"
        } else {
            "unreadable"
        };
        let (start, end) = (self.range.start, self.range.end);
        write!(f, "bytes {start}..{end} {state}: {}", self.cause)
    }
}

/// Intact blocks counted by type.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlockCounts {
    /// Header blocks (one per file; more after files were concatenated).
    pub header: u64,
    /// Metadata blocks.
    pub metadata: u64,
    /// Data blocks.
    pub data: u64,
    /// Dictionary blocks.
    pub dictionary: u64,
    /// Index blocks.
    pub index: u64,
    /// End blocks (one, last, in a finished file).
    pub end: u64,
    /// Log blocks.
    pub log: u64,
    /// Blocks of types this version does not define, by type id.
    pub unknown: BTreeMap<i64, u64>,
}

impl BlockCounts {
    /// All intact blocks.
    pub fn total(&self) -> u64 {
        self.header
            + self.metadata
            + self.data
            + self.dictionary
            + self.index
            + self.end
            + self.log
            + self.unknown.values().sum::<u64>()
    }

    /// Adds the counts of `other`.
    pub(crate) fn add_counts(&mut self, other: &BlockCounts) {
        self.header += other.header;
        self.metadata += other.metadata;
        self.data += other.data;
        self.dictionary += other.dictionary;
        self.index += other.index;
        self.end += other.end;
        self.log += other.log;
        for (&id, &n) in &other.unknown {
            *self.unknown.entry(id).or_default() += n;
        }
    }

    /// Counts one intact block.
    fn add(&mut self, block_type: BlockType) {
        match block_type {
            BlockType::Header => self.header += 1,
            BlockType::Metadata => self.metadata += 1,
            BlockType::Data => self.data += 1,
            BlockType::Dictionary => self.dictionary += 1,
            BlockType::Index => self.index += 1,
            BlockType::End => self.end += 1,
            BlockType::Log => self.log += 1,
            BlockType::Unknown(id) => *self.unknown.entry(id).or_default() += 1,
        }
    }
}

/// How a file ends (spec 9.5.1): finished by its writer, a log still open for appending, or
/// neither.
///
/// ```
/// use cobsfile::{Ending, ReaderBuilder, WriterBuilder};
///
/// let mut writer = WriterBuilder::new().index(false).build(Vec::new())?;
/// writer.write_record(b"one")?;
/// let file = writer.finish()?;
/// assert_eq!(ReaderBuilder::new().verify(&file)?.ending, Ending::Finished);
///
/// // The same file without its end block (9 bytes), as a killed writer or a short copy
/// // leaves it: every block there is intact, and yet it is not clean.
/// let cut = &file[..file.len() - 9];
/// let report = ReaderBuilder::new().verify(cut)?;
/// assert!(report.damaged.is_empty());
/// assert_eq!(report.ending, Ending::Unfinished);
/// assert!(!report.is_clean());
///
/// assert_eq!(ReaderBuilder::new().verify(&[])?.ending, Ending::Empty);
/// # Ok::<(), cobsfile::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Ending {
    /// The last intact block is an end block and nothing damaged or unreadable follows it: a
    /// writer finished the file ([`Writer::finish`](crate::Writer::finish)), which holds every
    /// block the writer wrote. A file written before end blocks existed counts as finished when
    /// its last intact block is an index block (such writers wrote one only when finishing).
    Finished,
    /// Not finished, and the last end or log block since the file's last header block is a
    /// log block: an append-only log, open for appending, as an
    /// [`Appender`](crate::Appender) leaves it. That a log ends without an end block is
    /// normal.
    Open,
    /// Neither: the file stops (at a block boundary, or in damage) without the end block a
    /// finished file has. It was cut, its writer stopped without finishing (killed, failed,
    /// or still writing), or blocks were appended after its end block without a log block.
    Unfinished,
    /// The file has no bytes at all.
    #[default]
    Empty,
}

impl Ending {
    /// The spec's name for it: `finished`, `open`, `unfinished` or `empty`.
    pub fn name(self) -> &'static str {
        match self {
            Ending::Finished => "finished",
            Ending::Open => "open",
            Ending::Unfinished => "unfinished",
            Ending::Empty => "empty",
        }
    }
}

impl fmt::Display for Ending {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What decides how a file ends, gathered from its intact blocks and its damage in file order.
/// The tails of consecutive parts of an input, put together in order ([`then`](Self::then)),
/// are the tail of the whole, so range reads judge an input as one reader does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Tail {
    /// The type of the last intact block.
    last: Option<BlockType>,
    /// Damaged or unreadable bytes come after the last intact block (or, without one, at all).
    damage_after: bool,
    /// The last end or log block since the last header block.
    mark: Option<BlockType>,
    /// A header block was met: end and log blocks before it do not count.
    header: bool,
}

impl Tail {
    /// Notes an intact block.
    pub fn block(&mut self, block_type: BlockType) {
        self.last = Some(block_type);
        self.damage_after = false;
        match block_type {
            BlockType::Header => {
                self.header = true;
                self.mark = None;
            }
            BlockType::End | BlockType::Log => self.mark = Some(block_type),
            _ => {}
        }
    }

    /// Notes a damaged or unreadable range.
    pub fn damage(&mut self) {
        self.damage_after = true;
    }

    /// Puts the tail of the part of the input right after this one behind this one.
    pub fn then(&mut self, later: &Tail) {
        if later.last.is_some() {
            self.last = later.last;
            self.damage_after = later.damage_after;
        } else {
            self.damage_after |= later.damage_after;
        }
        if later.header {
            self.header = true;
            self.mark = later.mark;
        } else if later.mark.is_some() {
            self.mark = later.mark;
        }
    }

    /// How an input of `len` bytes with this tail ends (spec 9.5.1).
    pub fn ending(&self, len: u64) -> Ending {
        if len == 0 {
            return Ending::Empty;
        }
        match self.last {
            Some(BlockType::End | BlockType::Index) if !self.damage_after => Ending::Finished,
            _ if self.mark == Some(BlockType::Log) => Ending::Open,
            _ => Ending::Unfinished,
        }
    }
}

/// What a full read of a file found: its intact blocks and records, its damaged and unreadable
/// ranges, and how it ends.
///
/// ```
/// let mut writer = cobsfile::WriterBuilder::new().block_target(100).build(Vec::new())?;
/// for i in 0..100 {
///     writer.write_record(format!("event {i}").as_bytes())?;
/// }
/// let mut file = writer.finish()?;
/// assert!(cobsfile::verify(&mut cobsfile::ReaderBuilder::new().from_slice(&file))?.is_clean());
///
/// file[300] ^= 1;
/// let report = cobsfile::verify(&mut cobsfile::ReaderBuilder::new().from_slice(&file))?;
/// assert!(!report.is_clean());
/// assert_eq!(report.damaged.len(), 1);
/// assert!(report.damaged[0].range.contains(&300));
/// assert!(report.records < 100);
/// # Ok::<(), cobsfile::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// The input's length in bytes.
    pub len: u64,
    /// Intact blocks by type.
    pub blocks: BlockCounts,
    /// Records in intact data blocks.
    pub records: u64,
    /// Bytes in intact blocks, each counted from the byte after its opening sync byte up to
    /// and including its closing one (neighbours share a sync byte), so the leading sync
    /// byte and padding are not counted; see also [`intact_bytes`](Self::intact_bytes).
    pub block_bytes: u64,
    /// Damaged and unreadable ranges, in order ([`Damage::is_damage`] tells them apart).
    pub damaged: Vec<Damage>,
    /// How the input ends: finished, an open log, unfinished or empty (spec 9.5.1). A report
    /// of part of an input (a range reader's, a read a sink stopped) says how that part ends.
    pub ending: Ending,
}

impl Report {
    /// Whether the file is clean (spec 9.5): nothing is damaged or unreadable, and it is
    /// finished or an open log. A file cut at a block boundary, or an empty one, is not.
    pub fn is_clean(&self) -> bool {
        self.damaged.is_empty() && matches!(self.ending, Ending::Finished | Ending::Open)
    }

    /// Whether some range is damaged ([`Damage::is_damage`]).
    pub fn has_damage(&self) -> bool {
        self.damaged.iter().any(Damage::is_damage)
    }

    /// Whether some range is unreadable by this reader, though maybe intact (a dictionary it
    /// was not given, a codec it does not support, a limit it keeps; [`Cause::is_damage`]).
    pub fn has_unreadable(&self) -> bool {
        self.damaged.iter().any(|d| !d.is_damage())
    }

    /// Bytes outside the damaged and unreadable ranges: `len - damaged_bytes()`.
    pub fn intact_bytes(&self) -> u64 {
        self.len - self.damaged_bytes()
    }

    /// Bytes in damaged and unreadable ranges.
    pub fn damaged_bytes(&self) -> u64 {
        self.damaged
            .iter()
            .map(|d| d.range.end - d.range.start)
            .sum()
    }

    /// The byte ranges between the damaged ones: intact blocks and the padding between them.
    pub fn intact_ranges(&self) -> Vec<Range<u64>> {
        let mut ranges = Vec::with_capacity(self.damaged.len() + 1);
        let mut at = 0;
        for d in &self.damaged {
            if d.range.start > at {
                ranges.push(at..d.range.start);
            }
            at = d.range.end;
        }
        if self.len > at {
            ranges.push(at..self.len);
        }
        ranges
    }

    /// Says for each damaged range what it held as written, from the file's `index`: the
    /// blocks the index lists that open in the range or at the sync byte just before it
    /// (where a damaged range's first block opens). Pass an index that covers the file from
    /// its first byte ([`Index::start`] 0), as [`Index::find`] gives for a file the writer
    /// finished; ranges after the index block are left as they are.
    pub fn attribute(&mut self, index: &Index) {
        let entries = index.entries();
        for d in &mut self.damaged {
            if d.range.start > index.offset() {
                continue;
            }
            let first = entries.partition_point(|e| e.offset + 1 < d.range.start);
            let mut held = Held::default();
            for e in entries[first..]
                .iter()
                .take_while(|e| e.offset < d.range.end)
            {
                held.blocks += 1;
                match e.block_type {
                    BlockType::Data => {
                        held.data_blocks += 1;
                        held.records += e.records;
                    }
                    BlockType::Metadata => held.metadata_blocks += 1,
                    _ => {}
                }
            }
            d.held = Some(held);
        }
    }

    /// Counts an intact block.
    pub(crate) fn add_block(&mut self, info: &BlockInfo) {
        self.blocks.add(info.block_type);
        if info.block_type == BlockType::Data {
            self.records += info.items.unwrap_or(0);
        }
        self.block_bytes += info.size;
    }

    /// Notes an error a full read yielded: damage goes into the report; any other error (the
    /// input failed, or names a newer format version) ends verification.
    pub(crate) fn add_error(&mut self, error: Error) -> Result<()> {
        match error {
            Error::Damaged { start, end, cause } => {
                self.damaged.push(Damage {
                    range: start..end,
                    cause,
                    held: None,
                });
                Ok(())
            }
            other => Err(other),
        }
    }
}
