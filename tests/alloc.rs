//! Steady-state writing and reading allocate nothing per record: checked with a counting
//! global allocator (this test binary only).

mod counting;

use cobsfile::{Compression, Dictionary, ReaderBuilder, WriterBuilder};
use counting::{allocations, allocations_reading, allocations_writing, Discard};

fn record(i: usize) -> Vec<u8> {
    format!("{{\"event\":{i},\"pad\":\"{}\"}}", "x".repeat(i % 300)).into_bytes()
}

/// One test function: the counter is global, and tests in one binary run on several threads.
#[test]
fn steady_state_allocates_nothing_per_record() {
    writing_allocates_nothing_per_record_once_warm();
    reading_allocates_nothing_per_record_once_warm();
    zstd_contexts_are_reused_not_made_per_block();
}

/// Without an index, nothing at all; with one, the index's buffer (a few bytes per block)
/// grows by doubling: a handful of allocations for hundreds of blocks, none per record.
fn writing_allocates_nothing_per_record_once_warm() {
    let records: Vec<Vec<u8>> = (0..20_000).map(record).collect();
    for (index, most) in [(false, 0), (true, 3)] {
        let mut writer = WriterBuilder::new()
            .block_target(16 * 1024)
            .index(index)
            .build(Discard)
            .unwrap();
        // Warm up: the buffers grow to their largest size.
        let during = allocations_writing(&mut writer, &records);
        assert!(
            during <= most,
            "index {index}: {during} allocations for 15000 records (hundreds of blocks)"
        );
        writer.finish().unwrap();
    }
}

fn reading_allocates_nothing_per_record_once_warm() {
    let mut writer = WriterBuilder::new()
        .block_target(16 * 1024)
        .build(Vec::new())
        .unwrap();
    for i in 0..20_000 {
        writer.write_record(&record(i)).unwrap();
    }
    let file = writer.finish().unwrap();
    let mut reader = ReaderBuilder::new().from_slice(&file);
    let (count, during) = allocations_reading(&mut reader);
    assert_eq!(count, 20_000);
    assert_eq!(
        during, 0,
        "{during} allocations while reading 15000 records"
    );
}

/// With zstd, one compression context per writer and one decompression context per reader are
/// made once and reset between blocks: allocations while writing or reading hundreds of
/// compressed blocks stay a small constant, independent of the number of blocks. (Making a
/// context per block would cost several allocations per block.)
fn zstd_contexts_are_reused_not_made_per_block() {
    let records: Vec<Vec<u8>> = (0..40_000).map(record).collect();
    let dictionary = Dictionary::train(&records[..2000], 8192).unwrap();
    for dict in [None, Some(dictionary)] {
        let mut builder = WriterBuilder::new()
            .block_target(16 * 1024)
            .compression(Compression::zstd(3).unwrap());
        if let Some(d) = &dict {
            builder = builder.dictionary(d.clone(), true);
        }
        let mut writer = builder.build(Vec::with_capacity(64 << 20)).unwrap();
        let mut write_allocations = Vec::new();
        for chunk in records.chunks(10_000) {
            let before = allocations();
            for r in chunk {
                writer.write_record(r).unwrap();
            }
            write_allocations.push(allocations() - before);
        }
        let file = writer.finish().unwrap();
        let blocks = ReaderBuilder::new().from_slice(&file).blocks().count();
        assert!(blocks > 150, "{blocks} blocks");
        // The first chunk warms the buffers and the context up; the others must not allocate.
        assert!(
            write_allocations[1..].iter().all(|&n| n <= 2),
            "writing, allocations per 10000 records: {write_allocations:?}"
        );

        let mut reader = ReaderBuilder::new().from_slice(&file);
        let mut read_allocations = Vec::new();
        for _ in 0..4 {
            let before = allocations();
            for _ in 0..10_000 {
                reader.next_record().unwrap().unwrap();
            }
            read_allocations.push(allocations() - before);
        }
        assert!(reader.next_record().is_none());
        assert!(
            read_allocations[1..].iter().all(|&n| n <= 2),
            "reading, allocations per 10000 records: {read_allocations:?}"
        );
    }
}
