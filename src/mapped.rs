//! Whole files mapped into memory with memmap2, read through a [`SliceReader`].

use std::fs::File;
use std::ops::Range;
use std::path::Path;
use std::sync::{Arc, Mutex};

use memmap2::Mmap;

use crate::error::Result;
use crate::index::Index;
use crate::reader::{Metadata, ReaderBuilder, SliceReader};
use crate::source::{Shared, SharedBytes};

/// A file mapped read-only into memory. Readers borrow from it, so decoding never copies the
/// file into the heap and skipping a block never touches its pages.
///
/// # Files that change while mapped
///
/// A mapping shows the file as it is, not as it was when mapped. What that means for each
/// kind of change:
///
/// - **Appending** (an [`Appender`](crate::Appender), `cobsfile pack --append`, any writer
///   with `O_APPEND`) is always fine: the mapping's length is fixed when it is made, so
///   bytes appended later are simply not part of it. Map the file again to read them, or
///   follow it with a [`Follower`](crate::Follower).
/// - **cobsfile's appenders never shrink a mapped file.** A `MappedFile` holds a shared
///   advisory lock on the file (`flock(LOCK_SH)`, spec 11.1 rule 4) for as long as it
///   lives, and an appender cuts a torn tail only when, at opening, it gets the exclusive
///   lock: with a `MappedFile` open on the log it fences the tail off instead, and it never
///   cuts after opening. Opening a `MappedFile` waits while an appender holds the exclusive
///   lock, which it does only while it opens (reading the file once, about 0.1 s per GB).
///   Where the file system refuses locks, the file is mapped without one.
/// - **Another program shrinking the file** (`truncate`, a rewrite through `O_TRUNC`) takes
///   the pages past the new end away. On Linux this crate then reads them as zeros, which
///   the readers report as damage (a run of zeros where blocks should be) reaching to the
///   end of the mapping; a page the kernel cannot read (an I/O error) reads as zeros too. A
///   process-wide SIGBUS handler, installed when the first file is mapped, does this for
///   the crate's mappings and hands every other SIGBUS to the handler or default that was
///   there before. Elsewhere the process receives SIGBUS and ends: read files that others
///   may shrink with [`ReaderBuilder::from_read`] instead.
/// - **Another program overwriting bytes in place** breaks the promise a `&[u8]` makes, that
///   its bytes do not change. The readers never index memory with a byte without a bounds
///   check (the one unchecked walk, in the COBS decoder, is bounded by its loop whatever
///   the bytes it meets), so in practice such a change costs damage
///   reports (or, rarely, a block read partly before and partly after the change that still
///   passes its checks), but by the letter of the language it is undefined behaviour. Do not
///   map files that other programs rewrite; read them with [`ReaderBuilder::from_read`].
#[derive(Debug)]
pub struct MappedFile {
    /// `None` for an empty file, which cannot be mapped on every platform. Shared with the
    /// worker threads of its readers, which read frames from it in place: a mapping lives
    /// until the last of them is done with it.
    map: Option<Arc<Mapping>>,
}

impl SharedBytes for Mapping {
    fn bytes(&self) -> &[u8] {
        &self.map[..]
    }
}

/// A live mapping and what it needs: fields drop in order, so the mapping leaves the SIGBUS
/// handler's registry before it is unmapped, and the file (whose descriptor the handler
/// uses, and which holds the shared lock) closes last.
#[derive(Debug)]
struct Mapping {
    #[cfg(target_os = "linux")]
    _registration: crate::sigbus::Registration,
    map: Mmap,
    _file: File,
    /// Reads alive that jump here and there (metadata scans, window reads by a time index),
    /// which keep the mapping advised for random access. The lock is held while the advice
    /// changes, so the last read to end never undoes the first one of the next round.
    jumping: Mutex<usize>,
}

impl Mapping {
    /// Counts a read that jumps in; the first advises the mapping for random access.
    fn begin_jumping(&self) {
        let mut jumping = self.jumping.lock().unwrap_or_else(|e| e.into_inner());
        if *jumping == 0 {
            self.advise(Access::Random);
        }
        *jumping += 1;
    }

    /// Counts a read that jumps out; the last puts the advice back to normal.
    fn end_jumping(&self) {
        let mut jumping = self.jumping.lock().unwrap_or_else(|e| e.into_inner());
        *jumping -= 1;
        if *jumping == 0 {
            self.advise(Access::Normal);
        }
    }

    /// Tells the kernel how the mapping will be read. Advice only: a kernel that refuses it
    /// changes the speed of reading, not what is read, so its error is ignored.
    fn advise(&self, access: Access) {
        #[cfg(unix)]
        {
            let advice = match access {
                Access::Normal => memmap2::Advice::Normal,
                Access::Random => memmap2::Advice::Random,
            };
            let _ = self.map.advise(advice);
        }
        #[cfg(not(unix))]
        let _ = access;
    }
}

/// Keeps a [`MappedFile`]'s mapping advised for random access while it lives; see
/// [`MappedFile::random_access`].
#[derive(Debug)]
pub struct RandomAccess(#[allow(dead_code)] Option<Jumping>);

/// Keeps a mapping advised for random access while it lives (see
/// [`MappedFile::metadata_with`]): a read that jumps from block to block.
#[derive(Debug)]
struct Jumping(Arc<Mapping>);

impl Jumping {
    fn new(map: &Arc<Mapping>) -> Self {
        map.begin_jumping();
        Jumping(Arc::clone(map))
    }
}

impl Drop for Jumping {
    fn drop(&mut self) {
        self.0.end_jumping();
    }
}

/// Whether opening takes the shared lock, or its caller holds a lock on the file already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lock {
    /// Take a shared lock, held while the mapping lives.
    Shared,
    /// The caller holds a lock through this same open file (an appender while it opens).
    Held,
}

impl MappedFile {
    /// Maps the file at `path`, holding a shared lock on it while mapped (see the type's
    /// documentation).
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::map(File::open(path)?, Lock::Shared)
    }

    /// Maps an open file, holding a shared lock on it while mapped (see the type's
    /// documentation). The lock, as any `flock`, belongs to the open file that `file` and its
    /// clones share: it replaces a lock held through `file`, and stays until that open file is
    /// closed by every handle.
    ///
    /// Fails for anything but a regular file: a pipe, a FIFO or a device reports no length,
    /// and mapping it would give an empty file. Read those with
    /// [`ReaderBuilder::from_read`].
    pub fn open_file(file: &File) -> Result<Self> {
        Self::map(file.try_clone()?, Lock::Shared)
    }

    /// Maps `file`, which the mapping keeps open.
    pub(crate) fn map(file: File, lock: Lock) -> Result<Self> {
        if !file.metadata()?.is_file() {
            // A pipe, a FIFO or a device reports no length: read it as a stream.
            return Err(crate::error::Error::NotARegularFile);
        }
        // Locked before its length is read: an appender that holds the exclusive lock may be
        // cutting the file right now.
        if lock == Lock::Shared {
            share(&file);
        }
        if file.metadata()?.len() == 0 {
            return Ok(MappedFile { map: None });
        }
        // SAFETY: the `&[u8]` this mapping gives is sound only while the mapped bytes do not
        // change, and nothing in the language keeps another process (or another handle in this
        // one) from changing a file. So the precondition is: while this mapping lives, no one
        // overwrites or removes the bytes it maps. The crate meets it for its own writers:
        // appenders only write past the end (O_APPEND; the mapping's length is fixed here),
        // and cut a torn tail only holding the exclusive lock, which the shared lock taken
        // above (or the caller's, with `Lock::Held`) keeps them from getting while this
        // mapping lives (its readers' worker threads read it through an `Arc` that keeps it
        // mapped). Other programs it cannot bind: the type's documentation tells users
        // not to map files that others rewrite, and says what happens if they do. The SIGBUS
        // handler (`sigbus.rs`) breaches the precondition itself when a file shrinks, putting
        // zeros where the lost pages were, because the alternative is the process's end; the
        // readers bound every index they derive from a byte (by a check, or in the COBS
        // decoder's one unchecked walk by its loop, whatever the bytes), so changed bytes cost
        // damage reports, not accesses out of bounds, though by the letter of the language a
        // change under a `&[u8]` is undefined behaviour all the same.
        let map = unsafe { Mmap::map(&file)? };
        Ok(MappedFile {
            map: Some(Arc::new(Mapping {
                #[cfg(target_os = "linux")]
                _registration: crate::sigbus::register(&map, &file)?,
                map,
                _file: file,
                jumping: Mutex::new(0),
            })),
        })
    }

    /// The file's bytes.
    pub fn bytes(&self) -> &[u8] {
        self.map.as_ref().map_or(&[], |m| &m.map[..])
    }

    /// A reader over the file with default limits.
    pub fn reader(&self) -> SliceReader<'_> {
        self.reader_with(&ReaderBuilder::new())
    }

    /// A reader over the file with the given options. With
    /// [`threads`](ReaderBuilder::threads), its workers read the frames from the mapping
    /// itself; readers over a borrowed slice copy each frame for them.
    ///
    /// A reader of a time window ([`ReaderBuilder::window`]) that reads by the file's time
    /// index jumps from the blocks it needs to the next: while it lives, the mapping is
    /// advised for random access, as for a metadata scan ([`metadata_with`](Self::metadata_with)),
    /// so that the kernel reads the pages it touches and not megabytes around each.
    pub fn reader_with(&self, options: &ReaderBuilder) -> SliceReader<'_> {
        self.jumping_if_planned(options, || options.from_slice(self.bytes()))
    }

    /// Advises the mapping for random access while the guard lives: reads of a few blocks
    /// here and there (the index at the tail, metadata, a sample of records) then bring in the
    /// pages they touch, not the megabytes the kernel would read around each first touch.
    pub fn random_access(&self) -> RandomAccess {
        RandomAccess(self.map.as_ref().map(Jumping::new))
    }

    /// A reader over the file for reading a few records from its start and stopping (a
    /// sample, to infer a schema from): while it lives, the mapping is advised for random
    /// access, so that the kernel reads the pages the sample touches and not the megabytes of
    /// read-ahead after them, which a query that then reads an hour by the time index would
    /// never use.
    pub fn reader_for_sample(&self, options: &ReaderBuilder) -> SliceReader<'_> {
        let random = self.random_access();
        self.share(options.from_slice(self.bytes()))
            .keeping(Box::new(random))
    }

    /// [`ReaderBuilder::read_ranges_within`] of the file's bytes. A read of a time window by
    /// the file's time index (spec 9.9) jumps from run to run of the blocks it needs: while
    /// it runs, the mapping is advised for random access, as for
    /// [`reader_with`](Self::reader_with).
    pub fn read_ranges_within<T, W, K>(
        &self,
        options: &ReaderBuilder,
        range: Range<u64>,
        work: &W,
        sink: &mut K,
    ) -> Result<crate::Report>
    where
        T: Default + Send,
        W: crate::RangeWork<T> + ?Sized,
        K: crate::RangeSink<T> + ?Sized,
    {
        let bytes = crate::range::Bytes::Slice(self.bytes());
        // Advised before the look at the tail that plans a window's read, as for a reader.
        let jumping = (self.map.as_ref())
            .filter(|_| options.get_window().is_some())
            .map(Jumping::new);
        let plan = options.time_plan(bytes);
        let _jumping = jumping.filter(|_| plan.is_some());
        options.read_within_planned(bytes, range, plan.as_ref(), work, sink)
    }

    /// The reader `make` makes, with the mapping shared with its workers, and advised for
    /// random access while it lives if it reads a window by a plan of ranges (and during the
    /// look at the file's tail that plans it).
    fn jumping_if_planned<'a>(
        &'a self,
        options: &ReaderBuilder,
        make: impl FnOnce() -> SliceReader<'a>,
    ) -> SliceReader<'a> {
        let jumping = (self.map.as_ref()).filter(|_| options.get_window().is_some());
        let jumping = jumping.map(Jumping::new);
        let reader = self.share(make());
        match jumping {
            Some(jumping) if reader.reads_by_time_index() => reader.keeping(Box::new(jumping)),
            _ => reader,
        }
    }

    /// `reader` with the mapping handed to its workers.
    fn share<'a>(&'a self, reader: SliceReader<'a>) -> SliceReader<'a> {
        match &self.map {
            Some(map) => reader.sharing(Arc::clone(map) as Shared),
            None => reader,
        }
    }

    /// A reader with default options over the blocks whose opening sync byte lies in
    /// `range`; see [`ReaderBuilder::from_slice_range`].
    pub fn range(&self, range: Range<u64>) -> SliceReader<'_> {
        self.range_with(&ReaderBuilder::new(), range)
    }

    /// A reader over the blocks whose opening sync byte lies in `range`; see
    /// [`ReaderBuilder::from_slice_range`].
    pub fn range_with(&self, options: &ReaderBuilder, range: Range<u64>) -> SliceReader<'_> {
        self.share(options.from_slice_range(self.bytes(), range))
    }

    /// The file's index, if it ends with a usable one; see [`Index::find`]. Reads only the
    /// pages of the last block.
    pub fn index(&self) -> Option<Index> {
        Index::find(self.bytes())
    }

    /// A reader over the file that starts at record `record`, with the index when the file
    /// has a usable one; see [`ReaderBuilder::from_slice_at_record`].
    pub fn reader_at_record(&self, options: &ReaderBuilder, record: u64) -> SliceReader<'_> {
        self.jumping_if_planned(options, || {
            options.from_slice_at_record(self.bytes(), record)
        })
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
    /// let mut writer = cobsfile::WriterBuilder::new().block_target(1000).build(Vec::new())?;
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
    ///     .metadata_with(&cobsfile::ReaderBuilder::new().max_body_size(1 << 20))
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
        let jumping = self.map.as_ref().map(Jumping::new);
        MetadataScan {
            reader: self.reader_with(options),
            _jumping: jumping,
        }
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
    /// Keeps the mapping advised for random access while the scan lives.
    _jumping: Option<Jumping>,
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

/// Takes a shared lock on `file` (see [`MappedFile`]; the follower takes one too), waiting
/// while an appender holds the exclusive one. Where the file system has no locks, goes on
/// without: reading matters more, and an appender there cannot lock the file either, so it
/// cannot open it to cut it.
pub(crate) fn share(file: &File) {
    // Windows refuses to shrink a mapped file by itself, and its locks are mandatory: a
    // shared lock there would keep appenders from writing.
    if cfg!(unix) {
        while let Err(e) = file.lock_shared() {
            if e.kind() != std::io::ErrorKind::Interrupted {
                break;
            }
        }
    }
}

/// Maps the file at `path`; shorthand for [`MappedFile::open`].
pub fn open(path: impl AsRef<Path>) -> Result<MappedFile> {
    MappedFile::open(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Window, WriterBuilder};

    fn jumping(file: &MappedFile) -> usize {
        *file.map.as_ref().unwrap().jumping.lock().unwrap()
    }

    /// A window read by a time index, and a metadata scan, keep the mapping advised for
    /// random access while they live; other reads leave it as it was.
    #[test]
    fn reads_that_jump_advise_random_access_while_they_live() {
        let mut writer = WriterBuilder::new()
            .block_target(100)
            .build(Vec::new())
            .unwrap();
        for i in 0..1000i64 {
            writer
                .write_record_at(format!("event {i}").as_bytes(), i)
                .unwrap();
        }
        let path = std::env::temp_dir().join(format!("cobsfile-jumping-{}", std::process::id()));
        std::fs::write(&path, writer.finish().unwrap()).unwrap();
        let file = MappedFile::open(&path).unwrap();
        let window = ReaderBuilder::new().window(Window::new(Some(500), Some(510)));

        let mut reader = file.reader_with(&window);
        assert!(reader.reads_by_time_index());
        assert_eq!(jumping(&file), 1);
        let scan = file.metadata();
        assert_eq!(jumping(&file), 2);
        assert_eq!(reader.read_all().0.len(), 11);
        drop(reader);
        assert_eq!(jumping(&file), 1);
        drop(scan);
        assert_eq!(jumping(&file), 0);

        let mut whole = file.reader();
        assert!(!whole.reads_by_time_index());
        assert_eq!(jumping(&file), 0);
        assert_eq!(whole.read_all().0.len(), 1000);
        let at = file.reader_at_record(&window, 0);
        assert_eq!(jumping(&file), 1);
        drop(at);
        assert_eq!(jumping(&file), 0);
        drop(file);
        std::fs::remove_file(&path).unwrap();
    }
}
