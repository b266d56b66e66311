//! Throughput of whole-file scans on 1 and more threads: `verify`, `recover`, and a scan that
//! visits every record (what `cat --threads` does), on the benchmarks' corpora (100 MB each by
//! default), next to a plain sequential read.
//!
//! ```text
//! cargo run --release --example ranges                          # all corpora, 1 and 2 threads
//! COBSFILE_BENCH_MB=20 cargo run --release --example ranges -- large-json 1 2 4
//! ```
//!
//! Each figure is the best of 5 runs, in MB/s of records (10^6 bytes of records per second,
//! as in the other benchmarks, so compressed files read faster than their size suggests) over
//! an in-memory file. `recover` writes into a reused in-memory buffer.

use std::ops::ControlFlow;
use std::time::Duration;

use cobsfile::{Compression, RangeSink, ReaderBuilder, WriterBuilder};

#[path = "../benches/corpus.rs"]
mod corpus;

use corpus::{Corpus, Kind};

mod timing;

use timing::best;

fn write(corpus: &Corpus, compression: Compression) -> Vec<u8> {
    let mut writer = WriterBuilder::new()
        .compression(compression)
        .build(Vec::new())
        .expect("build");
    for record in corpus.records() {
        writer.write_record(record).expect("write");
    }
    writer.finish().expect("finish")
}

/// Records and record bytes of a sequential read.
fn read(file: &[u8]) -> (u64, u64) {
    let mut reader = ReaderBuilder::new().from_slice(file);
    let (mut records, mut bytes) = (0, 0);
    while let Some(record) = reader.next_record() {
        records += 1;
        bytes += record.expect("intact").len() as u64;
    }
    (records, bytes)
}

/// Sums what the ranges counted.
struct Sum(u64, u64);

impl RangeSink<(u64, u64)> for Sum {
    fn part(&mut self, (records, bytes): (u64, u64)) -> ControlFlow<()> {
        self.0 += records;
        self.1 += bytes;
        ControlFlow::Continue(())
    }
}

/// Records and record bytes of a scan on `threads` threads.
fn scan(file: &[u8], threads: usize) -> (u64, u64) {
    let mut sum = Sum(0, 0);
    ReaderBuilder::new()
        .threads(threads)
        .read_ranges(
            file,
            |(records, bytes): &mut (u64, u64), block| {
                for record in block.records() {
                    *records += 1;
                    *bytes += record.len() as u64;
                }
            },
            &mut sum,
        )
        .expect("scan");
    (sum.0, sum.1)
}

fn main() {
    let mut kinds = Vec::new();
    let mut threads = Vec::new();
    for arg in std::env::args().skip(1) {
        match Kind::ALL.iter().find(|k| k.name() == arg) {
            Some(&block_type) => kinds.push(block_type),
            None => threads.push(arg.parse::<usize>().expect("a corpus name or thread count")),
        }
    }
    if kinds.is_empty() {
        kinds = Kind::ALL.to_vec();
    }
    if threads.is_empty() {
        threads = vec![1, 2];
    }
    println!(
        "cores: {}",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    for block_type in kinds {
        let corpus = Corpus::generate(block_type, corpus::corpus_bytes());
        println!("\n{}", corpus.describe());
        let expected = (corpus.len() as u64, corpus.data.len() as u64);
        for (name, compression) in [
            ("none", Compression::None),
            ("zstd 3", Compression::zstd(3).expect("level")),
        ] {
            let file = write(&corpus, compression);
            let mb = corpus.data.len() as f64 / 1e6;
            let rate = |d: Duration| mb / d.as_secs_f64();
            println!("{name}: file {:.1} MB", file.len() as f64 / 1e6);
            assert_eq!(read(&file), expected);
            let sequential = rate(best(|| assert_eq!(read(&file), expected)));
            println!("  sequential read (next_record):  {sequential:8.1} MB/s");
            let mut out = Vec::with_capacity(file.len() + 64);
            let mut base = [0.0; 3];
            for &n in &threads {
                let options = ReaderBuilder::new().threads(n);
                let verify = rate(best(|| {
                    let report = options.verify(&file).expect("verify");
                    assert!(report.is_clean() && report.records == expected.0);
                }));
                let recover = rate(best(|| {
                    out.clear();
                    let recovery = cobsfile::recover(&file, &options, &mut out).expect("recover");
                    assert!(recovery.is_lossless());
                }));
                assert!(out == file, "recover changed a clean file");
                let scanned = rate(best(|| assert_eq!(scan(&file, n), expected)));
                let now = [verify, recover, scanned];
                if n == threads[0] {
                    base = now;
                }
                println!(
                    "  threads {n}: verify {verify:8.1} MB/s ({:.2}x)  recover {recover:8.1} MB/s \
                     ({:.2}x)  scan {scanned:8.1} MB/s ({:.2}x)",
                    verify / base[0],
                    recover / base[1],
                    scanned / base[2],
                );
            }
        }
    }
}
