//! Pipes: the size up to which a write is atomic, and the kernel's pipe buffer.
//!
//! POSIX makes a write of at most [`PIPE_BUF`] bytes to a pipe atomic: its bytes are never
//! interleaved with other writers' bytes. A [`Writer`](crate::Writer) built with
//! [`WriterBuilder::atomic_writes`](crate::WriterBuilder::atomic_writes)`(PIPE_BUF)` writes every
//! block in one such write, so several writers (threads or processes) can share one pipe and
//! the reader at the other end sees whole blocks only.
//!
//! The pipe buffer, the bytes a pipe holds before a writer blocks (64 KiB by default on Linux),
//! is a different thing: [`set_buffer_size`] changes it on Linux (`F_SETPIPE_SZ`). It does not
//! change [`PIPE_BUF`]. BENCHMARKS.md measures what it does to throughput.

#[cfg(unix)]
use std::fs::File;
#[cfg(unix)]
use std::io;
#[cfg(target_os = "linux")]
use std::os::fd::AsRawFd;
#[cfg(unix)]
use std::os::fd::{AsFd, BorrowedFd};
#[cfg(unix)]
use std::os::unix::fs::FileTypeExt;

use crate::{cobs, varint};

/// The largest write to a pipe that POSIX guarantees to be atomic on this system
/// (4096 bytes on Linux).
#[cfg(unix)]
pub const PIPE_BUF: usize = libc::PIPE_BUF;

/// The largest write to a pipe that POSIX guarantees to be atomic: here, the least POSIX
/// allows (`_POSIX_PIPE_BUF`).
#[cfg(not(unix))]
pub const PIPE_BUF: usize = 512;

/// The size of the buffer of the pipe `pipe` (either end), in bytes (Linux).
///
/// Elsewhere, and when `pipe` is not a pipe, this is an error.
#[cfg(unix)]
pub fn buffer_size(pipe: impl AsFd) -> io::Result<usize> {
    let fd = pipe.as_fd();
    ensure_pipe(fd)?;
    get_size(fd)
}

/// Asks the kernel for a buffer of at least `bytes` for the pipe `pipe` (either end;
/// `F_SETPIPE_SZ`, Linux only) and returns the size it set: `bytes` rounded up to a power of two
/// pages.
///
/// Unprivileged processes may not go beyond `/proc/sys/fs/pipe-max-size` (1 MiB by default);
/// shrinking a buffer below the bytes it holds fails too. Elsewhere, and when `pipe` is not a
/// pipe, this is an error. The pipe is unchanged after an error.
#[cfg(unix)]
pub fn set_buffer_size(pipe: impl AsFd, bytes: usize) -> io::Result<usize> {
    let fd = pipe.as_fd();
    ensure_pipe(fd)?;
    set_size(fd, bytes)
}

/// An error unless `fd` is a pipe (or FIFO).
#[cfg(unix)]
fn ensure_pipe(fd: BorrowedFd) -> io::Result<()> {
    let file = File::from(fd.try_clone_to_owned()?);
    if file.metadata()?.file_type().is_fifo() {
        Ok(())
    } else {
        Err(io::Error::new(io::ErrorKind::InvalidInput, "not a pipe"))
    }
}

#[cfg(target_os = "linux")]
fn get_size(fd: BorrowedFd) -> io::Result<usize> {
    // SAFETY: F_GETPIPE_SZ takes no argument and reads or writes no memory of ours; `fd` is
    // borrowed, so it stays open for the duration of the call.
    let size = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETPIPE_SZ) };
    if size < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(size as usize)
}

#[cfg(target_os = "linux")]
fn set_size(fd: BorrowedFd, bytes: usize) -> io::Result<usize> {
    let arg = libc::c_int::try_from(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{bytes} bytes is more than a pipe buffer can hold"),
        )
    })?;
    // SAFETY: F_SETPIPE_SZ takes an int by value and reads or writes no memory of ours; `fd`
    // is borrowed, so it stays open for the duration of the call.
    let size = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETPIPE_SZ, arg) };
    if size >= 0 {
        return Ok(size as usize);
    }
    let error = io::Error::last_os_error();
    if error.raw_os_error() != Some(libc::EPERM) {
        return Err(error);
    }
    let max = std::fs::read_to_string("/proc/sys/fs/pipe-max-size").unwrap_or_default();
    Err(io::Error::new(
        error.kind(),
        format!(
            "{error}: beyond /proc/sys/fs/pipe-max-size ({})",
            max.trim()
        ),
    ))
}

#[cfg(all(unix, not(target_os = "linux")))]
fn get_size(_: BorrowedFd) -> io::Result<usize> {
    Err(unsupported())
}

#[cfg(all(unix, not(target_os = "linux")))]
fn set_size(_: BorrowedFd, _: usize) -> io::Result<usize> {
    Err(unsupported())
}

#[cfg(all(unix, not(target_os = "linux")))]
fn unsupported() -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        "pipe buffer sizes can be read and set on Linux only",
    )
}

/// The largest block body such that the whole block, from its type field to its closing sync
/// byte, takes at most `limit` bytes, whatever its type and content: the COBS bound, a type
/// field of the longest varint, and the length field.
pub(crate) fn max_body_len(limit: usize) -> usize {
    // The largest `body` with `max_block_len(body) <= limit`, which grows with `body`.
    let (mut low, mut high) = (0, limit);
    if max_block_len(low) > limit {
        return 0;
    }
    while low < high {
        let middle = low + (high - low).div_ceil(2);
        if max_block_len(middle) <= limit {
            low = middle;
        } else {
            high = middle - 1;
        }
    }
    low
}

/// The most bytes a block with a body of `body` bytes takes, from its type field to its
/// closing sync byte.
fn max_block_len(body: usize) -> usize {
    let length = cobs::max_encoded_len(body) + 1;
    varint::MAX_LEN + varint::encoded_len(length as i64) + length
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_body_len_is_the_largest_that_fits() {
        for limit in [0, 13, 14, 15, 100, 512, 4096, 4097, 65536, 1 << 26] {
            let body = max_body_len(limit);
            if body > 0 {
                assert!(max_block_len(body) <= limit, "{limit}");
            }
            assert!(max_block_len(body + 1) > limit, "{limit}");
        }
        // 10 (type) + 2 (length) + 4066 + 16 (COBS) + 1 + 1 (closing sync) = 4096.
        assert_eq!(max_body_len(4096), 4066);
    }
}
