//! With worker threads, steady-state writing and reading allocate nothing per record and
//! nothing per block: buffers, job boxes and channel slots are all recycled. Checked with a
//! counting global allocator, which counts every thread's allocations (this test binary only,
//! one test function, so no other test runs meanwhile).
//!
//! A few allocations remain after the warm-up, whatever the number of blocks: a recycled
//! buffer growing for the largest block it has held yet, a worker's first wait on a channel.
//!
//! Readers take their buffers from their options' spares (those earlier readers of the same
//! options left): the reader measured is the second of its options, as a program reading file
//! after file with one set of options makes them. (When the spares were the process's, every
//! reader after the first of this test started warm from the readers before it.)

mod counting;

use cobsfile::{Compression, Dictionary, ReaderBuilder, WriterBuilder};
use counting::{allocations_reading, allocations_writing, Discard};

fn record(i: usize) -> Vec<u8> {
    format!(
        "{{\"event\":{i},\"level\":\"info\",\"pad\":\"{}\"}}",
        "x".repeat(i % 300)
    )
    .into_bytes()
}

fn builder(compression: Compression, dictionary: Option<&Dictionary>) -> WriterBuilder {
    // Without the index, whose growing buffer `tests/alloc.rs` bounds on its own.
    let builder = WriterBuilder::new()
        .block_target(16 * 1024)
        .index(false)
        .compression(compression);
    match dictionary {
        Some(d) => builder.dictionary(d.clone(), true),
        None => builder,
    }
}

/// Allocations allowed over the ~175 blocks after the warm-up (see the module documentation).
const MOST: u64 = 12;

#[test]
fn steady_state_allocates_nothing_per_block_with_threads() {
    let records: Vec<Vec<u8>> = (0..20_000).map(record).collect();
    let dictionary = Dictionary::new(records[..50].concat());
    for (compression, dictionary) in [
        (Compression::None, None),
        (Compression::zstd(3).unwrap(), None),
        (Compression::zstd(3).unwrap(), Some(&dictionary)),
    ] {
        for threads in [2, 3] {
            // Writing: ~200 blocks after the warm-up.
            let mut writer = builder(compression, dictionary)
                .threads(threads)
                .build(Discard)
                .unwrap();
            let during = allocations_writing(&mut writer, &records);
            assert!(
                during <= MOST,
                "{compression:?}, {threads} threads: {during} allocations writing 15000 records"
            );
            writer.finish().unwrap();

            // Reading.
            let mut writer = builder(compression, dictionary).build(Vec::new()).unwrap();
            for r in &records {
                writer.write_record(r).unwrap();
            }
            let file = writer.finish().unwrap();
            let options = ReaderBuilder::new().threads(threads);
            let (earlier, _) = options.from_slice(&file).read_all();
            assert_eq!(earlier.len(), 20_000);
            let mut reader = options.from_slice(&file);
            let (count, during) = allocations_reading(&mut reader);
            assert_eq!(count, 20_000);
            assert!(
                during <= MOST,
                "{compression:?}, {threads} threads: {during} allocations reading 15000 records"
            );
        }
    }
}
