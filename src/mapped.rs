//! Whole files mapped into memory with memmap2, read through a [`SliceReader`].

use std::fs::File;
use std::ops::Range;
use std::path::Path;
use std::sync::Mutex;

use memmap2::Mmap;

use crate::error::Result;
use crate::index::Index;
use crate::reader::{Metadata, ReaderBuilder, SliceReader};

/// A file mapped read-only into memory. Readers borrow from it, so decoding never copies the
/// file into the heap and skipping a block never touches its pages.
///
/// A mapping reflects later changes to the file. Truncating the file while it is mapped makes
/// the process receive SIGBUS when it touches the lost pages: map files that are only appended
/// to, or copy them first.
#[derive(Debug)]
pub struct MappedFile {
    /// `None` for an empty file, which cannot be mapped on every platform.
    map: Option<Mmap>,
    /// Metadata scans alive, which keep the mapping advised for random access. The lock is
    /// held while the advice changes, so the last scan to end never undoes the first one of
    /// the next round.
    scans: Mutex<usize>,
}

impl MappedFile {
    /// Maps the file at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_file(&File::open(path)?)
    }

    /// Maps an open file.
    ///
    /// Fails for anything but a regular file: a pipe, a FIFO or a device reports no length,
    /// and mapping it would give an empty file. Read those with
    /// [`ReaderBuilder::from_read`].
    pub fn open_file(file: &File) -> Result<Self> {
        let metadata = file.metadata()?;
        if !metadata.is_file() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "not a regular file, so it cannot be mapped: read it as a stream",
            )
            .into());
        }
        if metadata.len() == 0 {
            return Ok(MappedFile {
                map: None,
                scans: Mutex::new(0),
            });
        }
        // SAFETY: the mapping is read-only and only ever viewed as `&[u8]`. The file may still
        // change underneath (see the type's documentation); the readers treat every byte as
        // untrusted input and never rely on a value staying the same between two reads, so a
        // concurrent append or overwrite can only yield damage errors, never unsoundness in
        // this crate's code. Truncation is the documented SIGBUS hazard of file mappings.
        let map = unsafe { Mmap::map(file)? };
        Ok(MappedFile {
            map: Some(map),
            scans: Mutex::new(0),
        })
    }

    /// The file's bytes.
    pub fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }

    /// A reader over the file with default limits.
    pub fn reader(&self) -> SliceReader<'_> {
        ReaderBuilder::new().from_slice(self.bytes())
    }

    /// A reader over the file with the given options.
    pub fn reader_with(&self, options: &ReaderBuilder) -> SliceReader<'_> {
        options.from_slice(self.bytes())
    }

    /// A reader with default options over the blocks whose opening sync byte lies in
    /// `range`; see [`ReaderBuilder::from_slice_range`].
    pub fn range(&self, range: Range<u64>) -> SliceReader<'_> {
        self.range_with(&ReaderBuilder::new(), range)
    }

    /// A reader over the blocks whose opening sync byte lies in `range`; see
    /// [`ReaderBuilder::from_slice_range`].
    pub fn range_with(&self, options: &ReaderBuilder, range: Range<u64>) -> SliceReader<'_> {
        options.from_slice_range(self.bytes(), range)
    }

    /// The file's index, if it ends with a usable one; see [`Index::find`]. Reads only the
    /// pages of the last block.
    pub fn index(&self) -> Option<Index> {
        Index::find(self.bytes())
    }

    /// A reader over the file that starts at record `record`, with the index when the file
    /// has a usable one; see [`ReaderBuilder::from_slice_at_record`].
    pub fn reader_at_record(&self, options: &ReaderBuilder, record: u64) -> SliceReader<'_> {
        options.from_slice_at_record(self.bytes(), record)
    }

    /// The file's metadata blocks, found by a skipping scan with default options; see
    /// [`metadata_with`](Self::metadata_with).
    pub fn metadata(&self) -> MetadataScan<'_> {
        self.metadata_with(&ReaderBuilder::new())
    }

    /// The file's metadata blocks, found by a skipping scan (spec 9.3) that reads only the
    /// pages holding block headers.
    ///
    /// This is [`Reader::metadata`](crate::Reader::metadata) over the mapping, plus one
    /// thing a reader cannot do for itself: while the scan is alive, the mapping is advised
    /// for random access (`madvise(MADV_RANDOM)` on Unix, nothing elsewhere). Without that
    /// advice, each page fault on a file not in the page cache makes the kernel read ahead
    /// around it (128 KiB to several MiB, `read_ahead_kb`), so jumping from header to header
    /// of megabyte blocks reads most of the file anyway. With it, each header costs one page.
    /// When the last scan of this file is dropped, the advice goes back to normal, so full
    /// reads read ahead as usual. A full read of the same `MappedFile` on another thread
    /// while a scan is alive reads ahead less, which costs it speed, never correctness.
    ///
    /// Errors are those of the skipping scan: damaged ranges as [`Error::Damaged`](crate::Error::Damaged), after
    /// which the scan goes on at the next sync byte; [`reader`](MetadataScan::reader) gives
    /// its [`stats`](crate::Reader::stats).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let mut writer = cobsfile::WriterBuilder::new().block_size(1000).build(Vec::new())?;
    /// writer.write_metadata([("schema", "event-v1")])?;
    /// for i in 0..1000 {
    ///     writer.write_record(format!("event {i}").as_bytes())?;
    /// }
    /// writer.write_metadata([("events", "1000")])?;
    /// let path = std::env::temp_dir().join(format!("cobsfile-doc-{}", std::process::id()));
    /// std::fs::write(&path, writer.finish()?)?;
    ///
    /// let file = cobsfile::open(&path)?;
    /// let found: Vec<_> = file
    ///     .metadata_with(&cobsfile::ReaderBuilder::new().max_block_size(1 << 20))
    ///     .collect::<Result<_, _>>()?;
    /// assert_eq!(found.len(), 2);
    /// assert_eq!(found[0].get("schema"), Some(&b"event-v1"[..]));
    /// assert_eq!(found[1].get("events"), Some(&b"1000"[..]));
    /// # drop(file);
    /// # std::fs::remove_file(&path)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn metadata_with(&self, options: &ReaderBuilder) -> MetadataScan<'_> {
        self.begin_scan();
        MetadataScan {
            reader: self.reader_with(options),
            file: self,
        }
    }

    /// Counts a metadata scan in; the first advises the mapping for random access.
    fn begin_scan(&self) {
        let mut scans = self.scans.lock().unwrap_or_else(|e| e.into_inner());
        if *scans == 0 {
            self.advise(Access::Random);
        }
        *scans += 1;
    }

    /// Counts a metadata scan out; the last puts the advice back to normal.
    fn end_scan(&self) {
        let mut scans = self.scans.lock().unwrap_or_else(|e| e.into_inner());
        *scans -= 1;
        if *scans == 0 {
            self.advise(Access::Normal);
        }
    }

    /// Tells the kernel how the mapping will be read. Advice only: a kernel that refuses it
    /// changes the speed of reading, not what is read, so its error is ignored.
    fn advise(&self, access: Access) {
        #[cfg(unix)]
        if let Some(map) = &self.map {
            let advice = match access {
                Access::Normal => memmap2::Advice::Normal,
                Access::Random => memmap2::Advice::Random,
            };
            let _ = map.advise(advice);
        }
        #[cfg(not(unix))]
        let _ = access;
    }
}

/// How a mapping will be read.
#[derive(Debug, Clone, Copy)]
enum Access {
    /// In no particular pattern: the kernel reads ahead around page faults.
    Normal,
    /// Here and there: the kernel reads only the pages touched.
    Random,
}

/// A skipping scan for the metadata blocks of a [`MappedFile`]; see
/// [`MappedFile::metadata_with`]. Yields each intact metadata block in file order, and an
/// error for each damaged range met on the way.
#[derive(Debug)]
pub struct MetadataScan<'a> {
    reader: SliceReader<'a>,
    file: &'a MappedFile,
}

impl<'a> MetadataScan<'a> {
    /// The reader doing the scan, e.g. for its [`stats`](crate::Reader::stats).
    pub fn reader(&self) -> &SliceReader<'a> {
        &self.reader
    }
}

impl Iterator for MetadataScan<'_> {
    type Item = Result<Metadata>;

    fn next(&mut self) -> Option<Self::Item> {
        self.reader.metadata().next()
    }
}

impl Drop for MetadataScan<'_> {
    fn drop(&mut self) {
        self.file.end_scan();
    }
}

/// Maps the file at `path`; shorthand for [`MappedFile::open`].
pub fn open(path: impl AsRef<Path>) -> Result<MappedFile> {
    MappedFile::open(path)
}
