//! What verifying an hour of a sealed archive costs (spec 9.10.1), against verifying all of
//! it: a month of timed events (about 1 GB of records by default), sealed every MiB, zstd 3 and
//! uncompressed; the time of each verification of the file in memory, on 1 and 2 threads, and
//! the bytes a reader by byte ranges (a `Remote`, as of an object in a store) fetches for each.
//!
//! ```text
//! cargo run --release --example seal_window
//! COBSFILE_BENCH_MB=200 cargo run --release --example seal_window
//! ```
//!
//! Each time is the best of 5 runs.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

use cobsfile::key::SealingKey;
use cobsfile::{Compression, Fetch, ReaderBuilder, Remote, Window, WriterBuilder};

mod timing;

use timing::best;

const DAY: i64 = 86_400 * 1_000_000_000;
const HOUR: i64 = 3_600 * 1_000_000_000;
const T0: i64 = 1_767_225_600 * 1_000_000_000;

/// A file in memory that counts the bytes it serves.
struct Counted(Vec<u8>, AtomicU64);

impl Fetch for Counted {
    fn size(&self) -> u64 {
        self.0.len() as u64
    }
    fn fetch(&self, ranges: &[Range<u64>]) -> std::io::Result<Vec<Vec<u8>>> {
        let served: u64 = ranges.iter().map(|r| r.end - r.start).sum();
        self.1.fetch_add(served, Ordering::Relaxed);
        Ok(ranges
            .iter()
            .map(|r| self.0[r.start as usize..r.end as usize].to_vec())
            .collect())
    }
}

fn main() {
    let mb: u64 = std::env::var("COBSFILE_BENCH_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let key = SealingKey::from_seed([7; 32]);
    let keys = [key.verifying_key()];
    // Events of about 100 bytes, spread evenly over 30 days.
    let events = mb * 1_000_000 / 100;
    let step = 30 * DAY / events as i64;
    println!(
        "cores: {}; {events} events over 30 days",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    for (name, compression) in [
        ("zstd 3", Compression::zstd(3).expect("level")),
        ("none", Compression::None),
    ] {
        let mut writer = WriterBuilder::new()
            .compression(compression)
            .seal(key.clone())
            .build(Vec::new())
            .expect("build");
        for i in 0..events {
            let record = format!(
                "{{\"n\":{i},\"host\":\"web-{:02}\",\"status\":{},\"path\":\"/api/v1/items/{}\",\"ms\":{}}}",
                i % 17,
                [200, 200, 200, 404, 500][(i % 5) as usize],
                i * 7919 % 100_000,
                i % 997
            );
            writer
                .write_record_at(record.as_bytes(), T0 + i as i64 * step)
                .expect("write");
        }
        let file = writer.finish().expect("finish");
        let hour = Window::new(Some(T0 + 15 * DAY), Some(T0 + 15 * DAY + HOUR - 1));
        println!("\n{name}: file {:.1} MB", file.len() as f64 / 1e6);
        for threads in [1, 2] {
            let whole = ReaderBuilder::new().threads(threads);
            let window = whole.clone().window(hour);
            let mut results = Vec::new();
            for (what, options) in [("whole file", &whole), ("one hour", &window)] {
                let mut sealed = None;
                let took = best(|| {
                    let (_, s) = options.verify_seals(&file, &keys).expect("verify");
                    sealed = Some(s);
                });
                let sealed = sealed.expect("ran");
                assert!(sealed.is_authentic(), "{:?}", sealed.tampered);
                let remote = Remote::open(Counted(file.clone(), AtomicU64::new(0))).expect("open");
                let opened = remote.fetcher().1.load(Ordering::Relaxed);
                let (_, by_ranges) = remote.verify_seals(options, &keys).expect("verify");
                assert_eq!(by_ranges, sealed);
                let fetched = remote.fetcher().1.load(Ordering::Relaxed);
                let (_, records) = sealed.count(cobsfile::seal::Status::Authentic);
                println!(
                    "  {threads} thread(s), {what}: {:.2} ms, {records} authentic records; fetched by ranges {fetched} bytes ({:.3}% of the file; {opened} to open it)",
                    took.as_secs_f64() * 1e3,
                    100.0 * fetched as f64 / file.len() as f64,
                );
                results.push(took);
            }
            println!(
                "  {threads} thread(s): one hour in {:.4}x the time of the whole file",
                results[1].as_secs_f64() / results[0].as_secs_f64()
            );
        }
    }
}
