//! Blocks handed to a writer's output: each in one `write_all` (a time block together with
//! its data block, spec 8.8 and 11), and recorded in the index the writer builds.

use std::io::Write;

use crate::error::{Error, Result};
use crate::index::IndexBuilder;
use crate::time::TimeSpan;

/// Writes the data block `block`, holding `items` records, after its time block `time_block`
/// if it has one, to `inner` in one `write_all` (the two copied together into `pair`), and
/// records them in `index`; without a time block, as [`emit`] does.
pub(crate) fn emit_with_times(
    inner: &mut impl Write,
    atomic_limit: Option<usize>,
    index: &mut IndexBuilder,
    time_block: Option<(&[u8], TimeSpan)>,
    block: &[u8],
    items: u64,
    pair: &mut Vec<u8>,
) -> Result<()> {
    let Some((time_block, span)) = time_block else {
        return emit(inner, atomic_limit, index, block, items);
    };
    pair.clear();
    pair.extend_from_slice(time_block);
    pair.extend_from_slice(block);
    write_one(inner, atomic_limit, index, pair)?;
    index.push_time(span);
    index.push(time_block, 0);
    index.push(block, items);
    Ok(())
}

/// Writes `block`, holding `items` records, to `inner` in one `write_all` (refused if longer
/// than an atomic write's `limit`), and records it in `index`.
pub(crate) fn emit(
    inner: &mut impl Write,
    atomic_limit: Option<usize>,
    index: &mut IndexBuilder,
    block: &[u8],
    items: u64,
) -> Result<()> {
    write_one(inner, atomic_limit, index, block)?;
    // The file's leading sync byte, written with the header, is no part of a block.
    index.push(block.strip_prefix(&[0]).unwrap_or(block), items);
    Ok(())
}

/// Writes `bytes` to `inner` in one `write_all`, refused if longer than an atomic write's
/// `limit`; a failed write gives up `index` (the file no longer holds what it would list).
fn write_one(
    inner: &mut impl Write,
    atomic_limit: Option<usize>,
    index: &mut IndexBuilder,
    bytes: &[u8],
) -> Result<()> {
    if let Some(limit) = atomic_limit.filter(|&limit| bytes.len() > limit) {
        return Err(Error::TooLargeForOneWrite {
            len: bytes.len(),
            limit,
        });
    }
    if let Err(e) = inner.write_all(bytes) {
        index.disable();
        return Err(e.into());
    }
    Ok(())
}
