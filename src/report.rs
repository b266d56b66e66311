//! What a full read found: intact blocks and records by type, damaged and unreadable ranges,
//! and how the file ends (spec 9.5).

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;

use crate::block::BlockType;
use crate::decoder::BlockInfo;
use crate::ending::Ending;
use crate::error::{Cause, Error, Result};
use crate::index::Index;

/// What a read does with each damaged or unreadable range it meets (spec 9.8), decided in
/// one place for every reader: the command line, SQL tables and the Python package take it
/// from their own settings (`sql --strict`, the table option `on_damage`, the keyword
/// `on_damage=`) and the library applies it ([`ReaderBuilder::on_damage`](crate::ReaderBuilder::on_damage)).
///
/// ```
/// let mut writer = cobsfile::WriterBuilder::new().block_target(100).build(Vec::new())?;
/// for i in 0..1000 {
///     writer.write_record(format!("event {i}").as_bytes())?;
/// }
/// let mut file = writer.finish()?;
/// let middle = file.len() / 2;
/// file[middle] ^= 1;
///
/// let count = |options: &cobsfile::ReaderBuilder| {
///     let mut n = 0u64;
///     struct Sum<'a>(&'a mut u64);
///     impl cobsfile::RangeSink<u64> for Sum<'_> {
///         fn part(&mut self, n: u64) -> std::ops::ControlFlow<()> {
///             *self.0 += n;
///             std::ops::ControlFlow::Continue(())
///         }
///     }
///     options
///         .read_ranges(&file, |n: &mut u64, block| *n += block.records().count() as u64, &mut Sum(&mut n))
///         .map(|_| n)
/// };
/// let skipped = count(&cobsfile::ReaderBuilder::new())?;
/// assert!(skipped < 1000);
/// let failed = count(&cobsfile::ReaderBuilder::new().on_damage(cobsfile::OnDamage::Fail));
/// assert!(matches!(failed, Err(cobsfile::Error::Damaged { .. })));
/// # Ok::<(), cobsfile::Error>(())
/// ```
#[derive(Clone, Default)]
pub enum OnDamage {
    /// Go on after it; it is in the read's report. The default.
    #[default]
    Skip,
    /// End the read with it ([`Error::Damaged`]).
    Fail,
    /// Give it to the function, which says whether the read goes on.
    Call(DamageFn),
}

/// The function of [`OnDamage::Call`]: `Break` stops the read where it is.
pub type DamageFn = std::sync::Arc<dyn Fn(&Damage) -> std::ops::ControlFlow<()> + Send + Sync>;

impl OnDamage {
    /// What the read does next after `damage`: goes on, stops where it is (the function
    /// said so), or fails with the damage.
    pub fn meet(&self, damage: &Damage) -> Result<std::ops::ControlFlow<()>> {
        match self {
            OnDamage::Skip => Ok(std::ops::ControlFlow::Continue(())),
            OnDamage::Fail => Err(Error::Damaged {
                start: damage.range.start,
                end: damage.range.end,
                cause: damage.cause.clone(),
            }),
            OnDamage::Call(f) => Ok(f(damage)),
        }
    }

    /// Whether damage ends the read.
    pub fn fails(&self) -> bool {
        matches!(self, OnDamage::Fail)
    }
}

impl fmt::Debug for OnDamage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OnDamage::Skip => "Skip",
            OnDamage::Fail => "Fail",
            OnDamage::Call(_) => "Call(..)",
        })
    }
}

impl fmt::Display for OnDamage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OnDamage::Skip => "skip",
            OnDamage::Fail => "error",
            OnDamage::Call(_) => "call",
        })
    }
}

impl PartialEq for OnDamage {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (OnDamage::Skip, OnDamage::Skip) | (OnDamage::Fail, OnDamage::Fail) => true,
            (OnDamage::Call(a), OnDamage::Call(b)) => std::sync::Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for OnDamage {}

impl std::str::FromStr for OnDamage {
    type Err = String;

    /// `skip`, or `error` (also `fail`, `raise`), in any case.
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "skip" => Ok(OnDamage::Skip),
            "error" | "fail" | "raise" => Ok(OnDamage::Fail),
            _ => Err(format!("'{s}': expected skip or error")),
        }
    }
}

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
    /// The damaged range an error names ([`Error::Damaged`]), `None` for any other error:
    /// what a reader reports as it goes is the range a full read's [`Report`] lists.
    pub fn of_error(error: &Error) -> Option<Damage> {
        match error {
            Error::Damaged { start, end, cause } => Some(Damage {
                range: *start..*end,
                cause: cause.clone(),
                held: None,
            }),
            _ => None,
        }
    }

    /// Says what the range held as written, from the file's `index` (see
    /// [`Report::attribute`]); a range after the index block is left as it is.
    pub fn attribute(&mut self, index: &Index) {
        if self.range.start > index.offset() {
            return;
        }
        let entries = index.entries();
        let first = entries.partition_point(|e| e.offset + 1 < self.range.start);
        let mut held = Held::default();
        for e in entries[first..]
            .iter()
            .take_while(|e| e.offset < self.range.end)
        {
            if e.block_type == BlockType::Gap {
                continue;
            }
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
        self.held = Some(held);
    }

    /// Whether the range is damaged, rather than unreadable by this reader (a block that
    /// needs a dictionary the reader was not given); see [`Cause::is_damage`].
    pub fn is_damage(&self) -> bool {
        self.cause.is_damage()
    }

    /// `"damaged"`, or `"unreadable"` (see [`is_damage`](Self::is_damage)): the word every
    /// report of the range uses.
    ///
    /// A damaged range has one shape wherever it is shown (the command-line tool's `ls --json`
    /// and `verify --json`, the Python package's `Damage`): `start` and `end` (its
    /// [`range`](Self::range)), `status` (this), `cause` ([`Cause::name`], spec 9.8),
    /// `message` (the cause as text) and `held` (see [`Held`], or nothing when unknown).
    pub fn status(&self) -> &'static str {
        if self.is_damage() {
            "damaged"
        } else {
            "unreadable"
        }
    }
}

impl fmt::Display for Damage {
    /// As [`Error::Damaged`] says it: `bytes START..END damaged: CAUSE`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (start, end) = (self.range.start, self.range.end);
        write!(f, "bytes {start}..{end} {}: {}", self.status(), self.cause)
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
    /// Time blocks.
    pub time: u64,
    /// Time index blocks.
    pub time_index: u64,
    /// Seal blocks.
    pub seal: u64,
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
            + self.time
            + self.time_index
            + self.seal
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
        self.time += other.time;
        self.time_index += other.time_index;
        self.seal += other.seal;
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
            BlockType::Time => self.time += 1,
            BlockType::TimeIndex => self.time_index += 1,
            BlockType::Seal => self.seal += 1,
            // A block of type 10 is of a type this version does not define (8).
            BlockType::Gap | BlockType::Unknown(_) => {
                *self.unknown.entry(block_type.type_id()).or_default() += 1
            }
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
    /// In a read of a time window ([`ReaderBuilder::window`](crate::ReaderBuilder::window)):
    /// the data blocks passed over because no time block describes them, whose records are
    /// in no window (spec 9.9).
    pub untimed_blocks_passed: u64,
    /// How the input ends: finished, an open log, unfinished or empty (spec 9.5.1). A report
    /// of part of an input (a range reader's, a read a sink stopped) says how that part ends.
    pub ending: Ending,
}

/// What spec 9.5 calls an input that is not a cobsfile: one in which nothing is intact and
/// something is damaged or unreadable (an input of nothing but sync bytes, or of nothing, is
/// a cobsfile with no blocks). Every reader, command and integration decides it here
/// ([`Report::not_a_cobsfile`], [`ReaderBuilder::not_a_cobsfile`](crate::ReaderBuilder::not_a_cobsfile))
/// and only says it in its own way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotACobsfile {
    /// The input's length in bytes.
    pub len: u64,
    /// When some block was refused for its size, not for damage: the first such cause. The
    /// input may well be a cobsfile of blocks larger than the reader's limits allow.
    pub over_limit: Option<Cause>,
}

impl NotACobsfile {
    /// The verdict on an input of `len` bytes in which intact blocks were found (`intact`)
    /// or not, and ranges were skipped for the causes `damaged` gives (at least the first,
    /// and the first over a limit if any): for a reader that keeps its own account of what it
    /// skipped.
    pub fn decide<'c>(
        len: u64,
        intact: bool,
        mut damaged: impl Iterator<Item = &'c Cause>,
    ) -> Option<NotACobsfile> {
        if intact {
            return None;
        }
        let first = damaged.next()?;
        let over_limit = std::iter::once(first)
            .chain(damaged)
            .find(|cause| cause.is_over_limit())
            .cloned();
        Some(NotACobsfile { len, over_limit })
    }

    /// The verdict on `bytes`, read with `reader` up to its first intact block.
    /// Fails only when `reader`'s source does (a fetch), with that error: no verdict then.
    pub(crate) fn of<S: crate::Source>(
        len: u64,
        reader: &mut crate::Reader<S>,
    ) -> Result<Option<NotACobsfile>, Error> {
        // The first cause, and the first over a limit: all the verdict names.
        let (mut first, mut over_limit) = (None, None);
        while let Some(block) = reader.next_block() {
            match block {
                Ok(_) => return Ok(None),
                Err(Error::Damaged { cause, .. }) => {
                    if over_limit.is_none() && cause.is_over_limit() {
                        over_limit = Some(cause.clone());
                    }
                    first.get_or_insert(cause);
                }
                Err(Error::Io(e)) => return Err(Error::Io(e)),
                Err(_) => {}
            }
        }
        Ok(Self::decide(
            len,
            false,
            over_limit.iter().chain(first.iter()),
        ))
    }
}

impl fmt::Display for NotACobsfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.over_limit {
            Some(cause) => write!(
                f,
                "no block fits within the reader's body-size limit ({cause}); raise it to read \
                 this file"
            ),
            None => write!(
                f,
                "not a cobsfile: none of its {} bytes is an intact block",
                self.len
            ),
        }
    }
}

impl std::error::Error for NotACobsfile {}

impl Report {
    /// Whether the input is not a cobsfile at all (spec 9.5): see [`NotACobsfile`].
    pub fn not_a_cobsfile(&self) -> Option<NotACobsfile> {
        NotACobsfile::decide(
            self.len,
            self.blocks.total() > 0,
            self.damaged.iter().map(|d| &d.cause),
        )
    }

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
        for d in &mut self.damaged {
            d.attribute(index);
        }
    }

    /// [`attribute`](Self::attribute) from the index of the file `bytes`, if it has one
    /// covering it from its first byte, looked for only when a range is damaged: a clean
    /// file's index is not read (a file of tiny blocks lists one entry for each, some tens of
    /// bytes of memory apiece).
    pub(crate) fn attribute_from(&mut self, bytes: &[u8]) {
        if self.damaged.is_empty() {
            return;
        }
        if let Some(index) = Index::find(bytes).filter(|i| i.start() == 0) {
            self.attribute(&index);
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
        match Damage::of_error(&error) {
            Some(damage) => {
                self.damaged.push(damage);
                Ok(())
            }
            None => Err(error),
        }
    }
}
