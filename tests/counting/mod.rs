//! A counting global allocator for the allocation tests: each test binary that includes this
//! module counts every allocation of every thread. Such a binary holds one test function, so
//! that no other test allocates meanwhile. Each binary uses some of what is here.

#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
/// Bytes allocated and not yet freed, and the most there were since the last `reset_peak`.
static LIVE: AtomicU64 = AtomicU64::new(0);
static PEAK: AtomicU64 = AtomicU64::new(0);

fn grew(bytes: usize) {
    let live = LIVE.fetch_add(bytes as u64, Ordering::Relaxed) + bytes as u64;
    PEAK.fetch_max(live, Ordering::Relaxed);
}

fn shrank(bytes: usize) {
    LIVE.fetch_sub(bytes as u64, Ordering::Relaxed);
}

// SAFETY: delegates every call to the system allocator unchanged; only counts calls and bytes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        grew(layout.size());
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        shrank(layout.size());
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        grew(new_size);
        shrank(layout.size());
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Bytes allocated and not freed now.
pub fn live_bytes() -> u64 {
    LIVE.load(Ordering::Relaxed)
}

/// Starts measuring the peak from the bytes live now.
pub fn reset_peak() {
    PEAK.store(LIVE.load(Ordering::Relaxed), Ordering::Relaxed);
}

/// The most bytes live at once since the last `reset_peak`.
pub fn peak_bytes() -> u64 {
    PEAK.load(Ordering::Relaxed)
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations (and reallocations) so far.
pub fn allocations() -> u64 {
    ALLOCATIONS.load(Ordering::Relaxed)
}

/// A sink that keeps nothing, so only the writer's own allocations count.
pub struct Discard;

impl std::io::Write for Discard {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Records written (or read) to warm buffers up before allocations are counted.
pub const WARM_UP: usize = 5_000;

/// Writes the first [`WARM_UP`] records with `writer`, then the rest, and returns the
/// allocations the rest made.
pub fn allocations_writing<W: std::io::Write>(
    writer: &mut cobsfile::Writer<W>,
    records: &[Vec<u8>],
) -> u64 {
    for r in &records[..WARM_UP] {
        writer.write_record(r).unwrap();
    }
    let before = allocations();
    for r in &records[WARM_UP..] {
        writer.write_record(r).unwrap();
    }
    allocations() - before
}

/// Reads the first [`WARM_UP`] records with `reader`, then the rest, and returns the records
/// read in all and the allocations reading the rest made.
pub fn allocations_reading<S: cobsfile::Source>(reader: &mut cobsfile::Reader<S>) -> (usize, u64) {
    for _ in 0..WARM_UP {
        reader.next_record().unwrap().unwrap();
    }
    let before = allocations();
    let mut count = WARM_UP;
    while let Some(r) = reader.next_record() {
        r.unwrap();
        count += 1;
    }
    (count, allocations() - before)
}
