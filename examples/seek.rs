//! Seeking to the middle record of a large mapped file: with the index the writer puts at the
//! end, and by reading and discarding every record before it.
//!
//! ```text
//! cargo run --release --example seek                         # 1000 MB of records
//! COBSFILE_BENCH_MB=100 cargo run --release --example seek   # smaller
//! ```
//!
//! The file (the benchmarks' `large-json` corpus, 256 KiB blocks, uncompressed and zstd 3) is
//! written to the system temporary directory and mapped, as `cobsfile cat --skip` does. Each
//! figure is the best of 5 runs with the file in the page cache: the time from having the
//! mapping to holding record N/2.

use std::time::{Duration, Instant};

use cobsfile::{Compression, Index, ReaderBuilder, WriterBuilder};

#[path = "../benches/corpus.rs"]
mod corpus;

use corpus::{Corpus, Kind};

const RUNS: usize = 5;

/// The best time of `RUNS` runs of `f`.
fn best<T>(mut f: impl FnMut() -> T) -> Duration {
    (0..RUNS)
        .map(|_| {
            let start = Instant::now();
            std::hint::black_box(f());
            start.elapsed()
        })
        .min()
        .expect("runs")
}

fn main() {
    let mb = std::env::var("COBSFILE_BENCH_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000usize);
    let corpus = Corpus::generate(Kind::LargeJson, mb * 1_000_000);
    println!("{}", corpus.describe());
    let k = corpus.len() / 2;
    let path = std::env::temp_dir().join(format!("cobsfile-seek-{}.cobs", std::process::id()));
    for (name, compression) in [
        ("none", Compression::None),
        ("zstd 3", Compression::zstd(3).expect("level")),
    ] {
        let file = std::fs::File::create(&path).expect("create");
        let mut writer = WriterBuilder::new()
            .compression(compression)
            .build(std::io::BufWriter::new(file))
            .expect("build");
        for record in corpus.records() {
            writer.write_record(record).expect("write");
        }
        writer.finish().expect("finish");
        let mapped = cobsfile::open(&path).expect("map");
        let index = mapped.index().expect("an index");
        println!(
            "\n{name}: file {:.1} MB, {} blocks, index {} bytes; record {k} of {}",
            mapped.bytes().len() as f64 / 1e6,
            index.len(),
            mapped.bytes().len() as u64 - index.offset(),
            corpus.len()
        );
        let options = ReaderBuilder::new();
        let want = corpus.record(k);

        let found = best(|| Index::find(mapped.bytes()).expect("an index"));
        let indexed = best(|| {
            let mut reader = mapped.reader_at_record(&options, k as u64);
            assert_eq!(
                reader.next_record().expect("a record").expect("intact"),
                want
            );
        });
        let sequential = best(|| {
            let mut reader = mapped.reader_with(&options);
            reader.skip_records(k as u64);
            assert_eq!(
                reader.next_record().expect("a record").expect("intact"),
                want
            );
        });
        println!(
            "  Index::find {:>10.3} ms\n  with index  {:>10.3} ms\n  sequential  {:>10.3} ms   ({:.0}x)",
            found.as_secs_f64() * 1e3,
            indexed.as_secs_f64() * 1e3,
            sequential.as_secs_f64() * 1e3,
            sequential.as_secs_f64() / indexed.as_secs_f64()
        );
    }
    let _ = std::fs::remove_file(&path);
}
