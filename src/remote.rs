//! A file read in place by byte ranges (an object in a store, say): the driver of the decoder
//! that asks its source only for the bytes a read needs.
//!
//! [`Remote::open`] fetches the file's last bytes, for its index (spec 8.5). From there:
//! - a range read ([`Remote::read_ranges_within`], what one partition of a query reads) fetches
//!   the bytes of its range as its decoder asks for them, in requests that grow from 512 KiB
//!   to 8 MiB, and the frames that straddle its end: with an index, exactly to the end of the
//!   last block opening in the range; the dictionary blocks before the range come from the
//!   index (without one, the bytes before the range are fetched);
//! - the metadata blocks ([`Remote::metadata`]: schemas) are fetched from the index's list,
//!   all in one call (the [`Fetch`] may coalesce them); without an index, a read from the
//!   start fetches the file;
//! - [`Remote::reader`] reads from the start, fetching as it goes: a read that stops early
//!   (a sample of records, "is this a cobsfile") fetches little.
//!
//! The blocks, records and damage are those of the same reads over the whole file in memory:
//! only where bytes come from differs. An index is trusted to list the file's dictionary and
//! metadata blocks, as a writer lists them; one that does not (a crafted file) can make
//! blocks unreadable for want of their dictionary, never make a record wrong.

use std::io::{self, Read};
use std::ops::Range;

use crate::block::BlockType;
use crate::decoder::Block;
use crate::error::{Error, Result};
use crate::index::Index;
use crate::range::{self, RangeSink, RangeWork};
use crate::reader::{Metadata, ReaderBuilder, StreamReader};
use crate::report::{NotACobsfile, Report};

/// A file that can be read by byte ranges: what a [`Remote`] reads.
pub trait Fetch: Sync {
    /// The file's size in bytes.
    fn size(&self) -> u64;

    /// The bytes of each of `ranges` (within the file), in order: one request, or as few as
    /// the source can make of them.
    fn fetch(&self, ranges: &[Range<u64>]) -> io::Result<Vec<Vec<u8>>>;
}

/// The last bytes of a file [`Remote::open`] fetches first to find its index: enough for the
/// index of a file of about 10,000 blocks (2.5 GiB of default blocks); a larger one is
/// fetched on.
pub const TAIL_FETCH: u64 = 64 << 10;
const TAIL: u64 = TAIL_FETCH;

/// The most of a file's end [`Remote::open`] fetches looking for its index: the longest
/// index block a reader accepts (spec 10) and an end block after it. Bytes without a sync
/// byte for longer than that hold no index.
const MOST_TAIL: u64 =
    crate::cobs::max_encoded_len(crate::limits::DEFAULT_MAX_BODY_SIZE) as u64 + 2 * TAIL;

/// The most bytes [`Remote::metadata`] fetches at once: the blocks an index lists are
/// fetched in batches of about this much.
const METADATA_BATCH: u64 = 16 << 20;

/// A file read by byte ranges through a [`Fetch`]; see the module documentation.
///
/// ```
/// use std::ops::Range;
///
/// // A "store" that counts the bytes it serves.
/// struct Counted(Vec<u8>, std::sync::atomic::AtomicU64);
/// impl cobsfile::Fetch for Counted {
///     fn size(&self) -> u64 {
///         self.0.len() as u64
///     }
///     fn fetch(&self, ranges: &[Range<u64>]) -> std::io::Result<Vec<Vec<u8>>> {
///         let served = ranges.iter().map(|r| r.end - r.start).sum();
///         self.1.fetch_add(served, std::sync::atomic::Ordering::Relaxed);
///         Ok(ranges.iter().map(|r| self.0[r.start as usize..r.end as usize].to_vec()).collect())
///     }
/// }
///
/// let mut writer = cobsfile::WriterBuilder::new().block_target(4096).build(Vec::new())?;
/// for i in 0..100_000 {
///     writer.write_record(format!("event {i}").as_bytes())?;
/// }
/// let file = writer.finish()?;
/// let len = file.len() as u64;
///
/// let remote = cobsfile::Remote::open(Counted(file, Default::default()))?;
/// assert_eq!(remote.index().unwrap().records(), 100_000);
/// // The first records, from a reader that fetches as it reads.
/// let mut reader = remote.reader(&cobsfile::ReaderBuilder::new());
/// let first: Vec<Vec<u8>> = reader.records().take(3).collect::<Result<_, _>>()?;
/// assert_eq!(first[2], b"event 2");
/// drop(reader);
/// let served = remote.fetcher().1.load(std::sync::atomic::Ordering::Relaxed);
/// assert!(served < len / 2, "{served} of {len}");
/// # Ok::<(), cobsfile::Error>(())
/// ```
#[derive(Debug)]
pub struct Remote<F> {
    fetch: F,
    size: u64,
    index: Option<Index>,
    /// The first and the largest fetch of a read.
    sizes: (u64, u64),
}

/// The first fetch of a read, and the largest: each fetch asks for twice as much as the one before,
/// so that a read that stops early (a `LIMIT`) fetches little and a long one fetches in
/// requests large enough for an object store to serve at speed. The first holds a block of
/// the default size ([`DEFAULT_BLOCK_TARGET`](crate::DEFAULT_BLOCK_TARGET)) whole.
pub const FIRST_FETCH: u64 = 512 << 10;
/// See [`FIRST_FETCH`].
pub const MAX_FETCH: u64 = 8 << 20;

impl<F: Fetch> Remote<F> {
    /// Opens the file `fetch` serves: fetches its last bytes, for its index.
    pub fn open(fetch: F) -> io::Result<Self> {
        let size = fetch.size();
        let mut tail = TAIL;
        let index = loop {
            if size == 0 {
                break None;
            }
            let start = size.saturating_sub(tail);
            let bytes = fetch_one(&fetch, start..size)?;
            match Index::find_in_tail(&bytes, start) {
                Ok(index) => break index,
                // No index and end block a reader accepts are that long: no index.
                Err(()) if tail >= MOST_TAIL => break None,
                Err(()) => tail = tail.saturating_mul(16).min(MOST_TAIL),
            }
        };
        Ok(Remote {
            fetch,
            size,
            index,
            sizes: (FIRST_FETCH, MAX_FETCH),
        })
    }

    /// Reads with fetches of `first` bytes first, doubling each fetch up to `largest` (by
    /// default [`FIRST_FETCH`] and [`MAX_FETCH`]): larger for a store far away, smaller to
    /// read little of a file at a time.
    pub fn fetch_sizes(mut self, first: u64, largest: u64) -> Self {
        self.sizes = (first.max(1), largest.max(first).max(1));
        self
    }

    /// The file's size.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The file's index, if it ends with a usable one ([`Index::find`]).
    pub fn index(&self) -> Option<&Index> {
        self.index.as_ref()
    }

    /// What fetches the bytes.
    pub fn fetcher(&self) -> &F {
        &self.fetch
    }

    /// A reader of the file from its start, that fetches as it reads (in requests growing
    /// from 64 KiB to 8 MiB). A failed fetch ends the reader with an [`Error::Io`].
    pub fn reader(&self, options: &ReaderBuilder) -> StreamReader<Chunks<'_, F>> {
        options.from_read(Chunks {
            fetch: &self.fetch,
            size: self.size,
            at: 0,
            // A read from the start often stops at its first blocks (is this a cobsfile,
            // a sample of records): it starts smaller.
            chunk: TAIL.min(self.sizes.0),
            largest: self.sizes.1,
            held: Vec::new(),
            taken: 0,
        })
    }

    /// The file's metadata blocks, in file order: fetched from the index's list when the
    /// file has a usable index, else found by a read from the start. Damaged ones are
    /// left out, as [`Reader::metadata`](crate::Reader::metadata) reports and skips them.
    pub fn metadata(&self, options: &ReaderBuilder) -> Result<Vec<Metadata>> {
        if let Some(index) = self.index.as_ref().filter(|index| index.start() == 0) {
            if let Some(found) = self.listed_metadata(index, options)? {
                return Ok(found);
            }
        }
        let mut reader = self.reader(options);
        let mut found = Vec::new();
        for metadata in reader.metadata() {
            match metadata {
                Ok(metadata) => found.push(metadata),
                Err(Error::Io(e)) => return Err(Error::Io(e)),
                Err(_) => {}
            }
        }
        Ok(found)
    }

    /// The metadata blocks `index` lists, fetched in batches; `None` if one is not an
    /// intact metadata block where the index says (it no longer matches the file), or is
    /// larger than a reader reads.
    fn listed_metadata(
        &self,
        index: &Index,
        options: &ReaderBuilder,
    ) -> Result<Option<Vec<Metadata>>> {
        let frame = options.decoder().max_window() as u64;
        let listed: Vec<_> = index
            .entries()
            .iter()
            .filter(|e| e.block_type == BlockType::Metadata)
            .collect();
        if listed.iter().any(|e| e.size >= frame) {
            return Ok(None);
        }
        let mut found = Vec::new();
        let mut batch = Vec::new();
        let mut batched = 0;
        for (i, e) in listed.iter().enumerate() {
            batch.push(e.offset..(e.offset + e.size + 1).min(self.size));
            batched += e.size + 1;
            if batched < METADATA_BATCH && i + 1 < listed.len() {
                continue;
            }
            let pieces = range::Fetched::fetch(self, &batch)?;
            for (range, piece) in batch.iter().zip(pieces) {
                let mut reader = options.stream_reader_at(io::Cursor::new(piece), range.start);
                match reader.metadata().next() {
                    Some(Ok(metadata)) if metadata.offset == range.start => found.push(metadata),
                    _ => return Ok(None),
                }
            }
            batch.clear();
            batched = 0;
        }
        Ok(Some(found))
    }

    /// Whether the file is not a cobsfile at all
    /// ([`ReaderBuilder::not_a_cobsfile`]), read from its start up to its first intact block.
    pub fn not_a_cobsfile(&self, options: &ReaderBuilder) -> Result<Option<NotACobsfile>> {
        NotACobsfile::of(self.size, &mut self.reader(options))
    }

    /// [`ReaderBuilder::read_ranges_within`] of this file: the blocks that open in `range`,
    /// read on the options' threads, each thread fetching the bytes of its own ranges.
    /// A failed fetch ends the read with an [`Error::Io`].
    pub fn read_ranges_within<T, W, K>(
        &self,
        options: &ReaderBuilder,
        range: Range<u64>,
        work: &W,
        sink: &mut K,
    ) -> Result<Report>
    where
        T: Default + Send,
        W: RangeWork<T> + ?Sized,
        K: RangeSink<T> + ?Sized,
    {
        options.read_within(range::Bytes::Fetched(self), range, work, sink)
    }

    /// [`ReaderBuilder::read_ranges`] of this file: every block, as one reader reads them.
    pub fn read_ranges<T, B, K>(
        &self,
        options: &ReaderBuilder,
        on_block: B,
        sink: &mut K,
    ) -> Result<Report>
    where
        T: Default + Send,
        B: Fn(&mut T, &Block<'_>) + Sync,
        K: RangeSink<T> + ?Sized,
    {
        self.read_ranges_within(options, 0..u64::MAX, &on_block, sink)
    }

    /// [`ReaderBuilder::verify_seals`] of this file, by byte ranges on the options'
    /// threads, each block's leaf hashed from the bytes fetched: with a
    /// [`window`](ReaderBuilder::window) and an index that lists a time index, only the
    /// blocks around the window's and the seal blocks are fetched (spec 9.10.1);
    /// otherwise every byte. A failed fetch is an [`Error::Io`].
    pub fn verify_seals(
        &self,
        options: &ReaderBuilder,
        keys: &[crate::key::VerifyingKey],
    ) -> Result<(Report, crate::seal::Sealed)> {
        options.verify_seals_of(range::Bytes::Fetched(self), keys)
    }

    /// [`ReaderBuilder::read_authentic`] of this file: the blocks `sealed` (what
    /// [`verify_seals`](Self::verify_seals) found, with the same options) calls authentic,
    /// read by byte ranges on the options' threads. A failed fetch is an [`Error::Io`].
    pub fn read_authentic<T, B, K>(
        &self,
        options: &ReaderBuilder,
        sealed: &crate::seal::Sealed,
        on_block: B,
        sink: &mut K,
    ) -> Result<Report>
    where
        T: Default + Send,
        B: Fn(&mut T, &Block<'_>) + Sync,
        K: RangeSink<T> + ?Sized,
    {
        let work = crate::reader::Authentic {
            sealed,
            work: &on_block,
        };
        options.read_within(range::Bytes::Fetched(self), 0..u64::MAX, &work, sink)
    }

    /// [`ReaderBuilder::verify`] of this file: every block read and checked on the options'
    /// threads, each fetching its own ranges; the same report as the file in memory gives.
    /// A failed fetch is an [`Error::Io`].
    pub fn verify(&self, options: &ReaderBuilder) -> Result<Report> {
        let mut report = self.read_ranges(options, |_: &mut (), _| {}, &mut range::Discard)?;
        if let Some(index) = self.index.as_ref().filter(|i| i.start() == 0) {
            report.attribute(index);
        }
        Ok(report)
    }
}

impl<F: Fetch> range::Fetched for Remote<F> {
    fn len(&self) -> u64 {
        self.size
    }

    fn fetch(&self, ranges: &[Range<u64>]) -> io::Result<Vec<Vec<u8>>> {
        let pieces = self.fetch.fetch(ranges)?;
        for (range, piece) in ranges.iter().zip(&pieces) {
            if piece.len() as u64 != range.end - range.start {
                return Err(short(range, piece.len()));
            }
        }
        if pieces.len() != ranges.len() {
            return Err(io::Error::other(format!(
                "{} byte ranges asked for, {} received",
                ranges.len(),
                pieces.len()
            )));
        }
        Ok(pieces)
    }

    fn index(&self) -> Option<&Index> {
        self.index.as_ref()
    }

    fn fetch_sizes(&self) -> (u64, u64) {
        self.sizes
    }
}

/// The bytes of `range`, checked to be all of them.
fn fetch_one<F: Fetch>(fetch: &F, range: Range<u64>) -> io::Result<Vec<u8>> {
    let piece = fetch.fetch(std::slice::from_ref(&range))?.pop();
    match piece {
        Some(piece) if piece.len() as u64 == range.end - range.start => Ok(piece),
        other => Err(short(&range, other.map_or(0, |p| p.len()))),
    }
}

/// The error of a fetch that returned other than the bytes asked for: the file changed (cut
/// short, replaced) under the reader.
fn short(range: &Range<u64>, got: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!(
            "bytes {}..{} asked for, {got} received: the file changed while it was read",
            range.start, range.end
        ),
    )
}

/// The file from its start, fetched as it is read: what [`Remote::reader`] reads.
#[derive(Debug)]
pub struct Chunks<'a, F> {
    fetch: &'a F,
    size: u64,
    /// Where the next fetch starts.
    at: u64,
    /// How many bytes it asks for, and the most it will.
    chunk: u64,
    largest: u64,
    /// What the last fetch returned, and how much of it was read.
    held: Vec<u8>,
    taken: usize,
}

impl<F: Fetch> Read for Chunks<'_, F> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.held.is_empty() {
            if self.at >= self.size {
                return Ok(0);
            }
            let end = self.size.min(self.at + self.chunk);
            self.held = fetch_one(self.fetch, self.at..end)?;
            self.at = end;
            self.chunk = (self.chunk * 2).min(self.largest);
            self.taken = 0;
        }
        let n = buf.len().min(self.held.len() - self.taken);
        buf[..n].copy_from_slice(&self.held[self.taken..self.taken + n]);
        self.taken += n;
        if self.taken == self.held.len() {
            self.held.clear();
        }
        Ok(n)
    }
}
