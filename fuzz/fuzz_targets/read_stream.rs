//! The streaming reader agrees with the slice reader on arbitrary bytes, and its window stays
//! within its limit.
#![no_main]

use cobsfile::ReaderBuilder;
use libfuzzer_sys::fuzz_target;

const MAX_BLOCK: usize = 1 << 12;

fuzz_target!(|data: &[u8]| {
    let builder = ReaderBuilder::new().max_block_size(MAX_BLOCK);
    let (slice_records, slice_errors) = builder.from_slice(data).read_all();
    let mut stream = builder.from_read(data);
    let (records, errors) = stream.read_all();
    assert_eq!(records, slice_records);
    assert_eq!(errors.len(), slice_errors.len());
    assert!(stream.source().capacity() <= 2 * MAX_BLOCK + (1 << 18) + 64);
});
