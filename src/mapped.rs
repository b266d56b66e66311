//! Whole files mapped into memory with memmap2, read through a [`SliceReader`].

use std::fs::File;
use std::ops::Range;
use std::path::Path;

use memmap2::Mmap;

use crate::error::Result;
use crate::reader::{ReaderBuilder, SliceReader};

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
}

impl MappedFile {
    /// Maps the file at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_file(&File::open(path)?)
    }

    /// Maps an open file.
    pub fn open_file(file: &File) -> Result<Self> {
        if file.metadata()?.len() == 0 {
            return Ok(MappedFile { map: None });
        }
        // SAFETY: the mapping is read-only and only ever viewed as `&[u8]`. The file may still
        // change underneath (see the type's documentation); the readers treat every byte as
        // untrusted input and never rely on a value staying the same between two reads, so a
        // concurrent append or overwrite can only yield damage errors, never unsoundness in
        // this crate's code. Truncation is the documented SIGBUS hazard of file mappings.
        let map = unsafe { Mmap::map(file)? };
        Ok(MappedFile { map: Some(map) })
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

    /// A reader over the blocks whose opening sync byte lies in `range`; see
    /// [`ReaderBuilder::from_slice_range`].
    pub fn range_with(&self, options: &ReaderBuilder, range: Range<u64>) -> SliceReader<'_> {
        options.from_slice_range(self.bytes(), range)
    }
}

/// Maps the file at `path`; shorthand for [`MappedFile::open`].
pub fn open(path: impl AsRef<Path>) -> Result<MappedFile> {
    MappedFile::open(path)
}
