//! Checks every typed record of a file (spec 15.3) pass after pass: the walk alone (`D=0`,
//! the default: records decoded once, then walked `N` times) or decoding and walk together
//! (`D=1`: the file read again each pass), for `perf`, `callgrind` or `farm-bench`.
//!
//! ```text
//! cargo build --release --features avro --example typed_walk
//! F=events.cobs N=20 target/release/examples/typed_walk
//! ```

use std::time::Instant;

use cobsfile::avro::{DatumLimits, RecordCheck, Schemas};
use cobsfile::{BlockType, MappedFile, ReaderBuilder};

fn main() {
    let path = std::env::var("F").expect("F: a file of typed records");
    let rounds: usize = std::env::var("N").map_or(10, |n| n.parse().expect("N: rounds"));
    let decode = std::env::var("D").as_deref() == Ok("1");
    let file = MappedFile::open(&path).expect("the file");
    let bytes = file.bytes();
    let schemas = Schemas::scan(bytes);
    let mut check = RecordCheck::new(schemas, DatumLimits::default());
    // Each data block's records, laid end to end, and where each ends.
    let mut blocks: Vec<(u64, Vec<u8>, Vec<usize>)> = Vec::new();
    if !decode {
        let mut reader = ReaderBuilder::new().from_slice(bytes);
        while let Some(block) = reader.next_block() {
            let block = block.expect("an intact file");
            if block.info().block_type != BlockType::Data {
                continue;
            }
            let (mut data, mut ends) = (Vec::new(), Vec::new());
            for record in block.records() {
                data.extend_from_slice(record);
                ends.push(data.len());
            }
            blocks.push((block.info().offset, data, ends));
        }
    }
    let start = Instant::now();
    let mut records = 0u64;
    for _ in 0..rounds {
        if decode {
            let mut reader = ReaderBuilder::new().from_slice(bytes);
            while let Some(block) = reader.next_block() {
                let block = block.expect("an intact file");
                if block.info().block_type != BlockType::Data {
                    continue;
                }
                let offset = block.info().offset;
                for record in block.records() {
                    check
                        .check_ref(record, offset, &mut ())
                        .expect("a sound record");
                    records += 1;
                }
            }
        } else {
            for (offset, data, ends) in &blocks {
                let mut from = 0;
                for &end in ends {
                    check
                        .check_ref(&data[from..end], *offset, &mut ())
                        .expect("a sound record");
                    from = end;
                    records += 1;
                }
            }
        }
    }
    let took = start.elapsed();
    println!(
        "{records} records in {:.0} ms, {:.1} ms a pass",
        took.as_secs_f64() * 1e3,
        took.as_secs_f64() * 1e3 / rounds as f64
    );
}
