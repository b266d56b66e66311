//! How a file ends (spec 9.5.1), decided from its intact blocks and damage in file order: a
//! decoder notes them as it reads, and reports and range reads put the parts together.

use std::fmt;

use crate::block::BlockType;

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
