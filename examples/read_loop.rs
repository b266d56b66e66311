//! Reads a corpus file through a mapping, on `T` threads, pass after pass for five seconds,
//! and prints the mean time of a pass: a steady load to look at with `perf stat` or `perf
//! record`, where the passes of `examples/parallel` are too few.
//!
//! ```text
//! cargo build --release --example read_loop
//! K=large T=2 perf stat -e page-faults,context-switches target/release/examples/read_loop
//! ```
//!
//! `K` is `small`, `large` or `zero` (the default: zero-rich), `T` the threads (default 2),
//! `Z` a zstd level (default: uncompressed). The file, written with default options otherwise,
//! is written once to the temporary directory and kept there for the next run.

use cobsfile::{Compression, MappedFile, ReaderBuilder, WriterBuilder};

#[path = "../benches/corpus.rs"]
mod corpus;

use corpus::{Corpus, Kind};

/// How long the passes run.
const SECONDS: f64 = 5.0;

fn main() {
    let kind = match std::env::var("K").as_deref() {
        Ok("large") => Kind::LargeJson,
        Ok("small") => Kind::SmallJson,
        _ => Kind::ZeroRich,
    };
    let threads: usize = std::env::var("T")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);
    let level: Option<i32> = std::env::var("Z").ok().and_then(|v| v.parse().ok());
    let compression = level.map_or(Compression::None, |l| Compression::zstd(l).expect("level"));
    let bytes = corpus::corpus_bytes();
    let path = std::env::temp_dir().join(format!(
        "cobsfile-read-loop-{}-{bytes}-z{}",
        kind.name(),
        level.unwrap_or(0)
    ));
    if !path.exists() {
        let c = Corpus::generate(kind, bytes);
        let mut out = Vec::new();
        let mut w = WriterBuilder::new()
            .compression(compression)
            .build(&mut out)
            .unwrap();
        for r in c.records() {
            w.write_record(r).unwrap();
        }
        w.finish().unwrap();
        std::fs::write(&path, &out).unwrap();
    }
    let file = MappedFile::open(&path).unwrap();
    let t0 = std::time::Instant::now();
    let mut passes = 0;
    while t0.elapsed().as_secs_f64() < SECONDS {
        let mut r = file.reader_with(&ReaderBuilder::new().threads(threads));
        let mut n = 0;
        while let Some(rec) = r.next_record() {
            n += rec.unwrap().len();
        }
        std::hint::black_box(n);
        passes += 1;
    }
    println!(
        "{} T={threads}: {:.2} ms/pass",
        kind.name(),
        SECONDS * 1e3 / passes as f64
    );
}
