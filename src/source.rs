//! Where readers get their bytes: a slice held whole (a mapped file, a buffer), or a window
//! that slides over an `io::Read` with bounded memory.

use std::fmt;
use std::io::{self, Read};
use std::sync::Arc;

use crate::error::{Error, Result};

/// A window onto the input that a [`Reader`](crate::Reader) scans. Sealed: the crate provides
/// [`SliceSource`] and [`StreamSource`].
pub trait Source: sealed::Sealed {
    /// The bytes currently held.
    fn window(&self) -> &[u8];
    /// The absolute offset of the window's first byte.
    fn base(&self) -> u64;
    /// Whether the input ends where the window ends.
    fn at_eof(&self) -> bool;
    /// Drops the first `keep_from` bytes of the window and reads more. `max_window` bounds
    /// the window's size: reaching it without a block is the scanner's job to prevent.
    fn refill(&mut self, keep_from: usize, max_window: usize) -> Result<()>;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::SliceSource<'_> {}
    impl<R: std::io::Read> Sealed for super::StreamSource<R> {}
}

/// A whole input in memory: a byte slice or a mapped file.
#[derive(Debug, Clone, Copy)]
pub struct SliceSource<'a>(pub(crate) &'a [u8]);

impl Source for SliceSource<'_> {
    fn window(&self) -> &[u8] {
        self.0
    }
    fn base(&self) -> u64 {
        0
    }
    fn at_eof(&self) -> bool {
        true
    }
    fn refill(&mut self, _: usize, _: usize) -> Result<()> {
        Ok(())
    }
}

/// Bytes that worker threads may read without borrowing them: a mapped file, kept mapped by
/// each handle. A reader that has one hands its workers a handle and a range instead of a
/// copy of each frame.
pub(crate) trait SharedBytes: Send + Sync + fmt::Debug {
    /// The bytes: the same slice the reader's [`SliceSource`] holds.
    fn bytes(&self) -> &[u8];
}

/// A handle on [`SharedBytes`].
pub(crate) type Shared = Arc<dyn SharedBytes>;

/// Bytes in memory that the caller holds in an `Arc` (see
/// [`ReaderBuilder::from_shared`](crate::ReaderBuilder::from_shared)).
#[derive(Debug)]
pub(crate) struct SharedSlice(pub Arc<[u8]>);

impl SharedBytes for SharedSlice {
    fn bytes(&self) -> &[u8] {
        &self.0
    }
}

/// How much a stream source asks of its reader at a time.
const READ_CHUNK: usize = 256 * 1024;

/// A sliding window over an `io::Read`: holds at most one block plus one read's worth of bytes.
#[derive(Debug)]
pub struct StreamSource<R> {
    inner: R,
    /// Allocated storage; `buf[start..end]` is the window.
    buf: Vec<u8>,
    start: usize,
    end: usize,
    base: u64,
    eof: bool,
}

impl<R: Read> StreamSource<R> {
    /// A window over `inner`, whose first byte is at absolute offset `base` of the input.
    pub(crate) fn new(inner: R, base: u64) -> Self {
        StreamSource {
            inner,
            buf: Vec::new(),
            start: 0,
            end: 0,
            base,
            eof: false,
        }
    }

    /// The wrapped reader.
    pub fn get_ref(&self) -> &R {
        &self.inner
    }

    /// The wrapped reader, to change what it reads next (a follower's file).
    pub(crate) fn get_mut(&mut self) -> &mut R {
        &mut self.inner
    }

    /// Empties the window and makes it start at the absolute offset `offset`, the input no
    /// longer ended: the next refill reads on from `inner`, which the caller has set to read
    /// the bytes at `offset` (a followed file read again after it was cut back, or after a
    /// follower ended it for a while).
    pub(crate) fn restart_at(&mut self, offset: u64) {
        self.start = 0;
        self.end = 0;
        self.base = offset;
        self.eof = false;
    }

    /// Bytes allocated for the window, to check that memory stays bounded.
    pub fn capacity(&self) -> usize {
        self.buf.capacity()
    }
}

impl<R: Read> Source for StreamSource<R> {
    fn window(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    fn base(&self) -> u64 {
        self.base
    }

    fn at_eof(&self) -> bool {
        self.eof
    }

    fn refill(&mut self, keep_from: usize, max_window: usize) -> Result<()> {
        self.start += keep_from;
        self.base += keep_from as u64;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        if self.buf.len() - self.end < READ_CHUNK {
            // Slide the window to the front, and grow only if it still lacks room.
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            if self.end > max_window {
                return Err(Error::WindowLimit {
                    window: self.end,
                    limit: max_window,
                });
            }
            if self.buf.len() - self.end < READ_CHUNK {
                // Exactly: growing by `resize` alone would let `Vec` double its allocation.
                let len = self.end + READ_CHUNK;
                self.buf.reserve_exact(len - self.buf.len());
                self.buf.resize(len, 0);
            }
        }
        loop {
            match self.inner.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(());
                }
                Ok(n) => {
                    self.end += n;
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }
}
