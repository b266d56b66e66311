//! Reads a corpus file, pass after pass for a while, and prints the mean time of a pass: a
//! steady load to look at with `perf stat` or `perf record`, where the passes of
//! `examples/parallel` are too few. Given two thread counts, it alternates them pass by pass
//! and prints each one's median pass and the median ratio of adjacent passes, which the
//! machine's slow phases (they last seconds) move far less than best-of figures.
//!
//! ```text
//! cargo build --release --example read_loop
//! K=large T=2 perf stat -e page-faults,context-switches target/release/examples/read_loop
//! K=large T=1,2 S=slice target/release/examples/read_loop
//! ```
//!
//! `K` is `small`, `large` or `zero` (the default: zero-rich); `T` the threads, or two counts
//! to alternate (default 2); `Z` a zstd level (default: uncompressed); `S` how the file is
//! read: `mapped` (the default), `shared` (`from_shared`, bytes in memory) or `slice` (a
//! borrowed slice); `N` a number of rounds to run instead of a while (a fixed amount of work,
//! to time whole processes with `farm-bench`); `L=0` writes compressed blocks with the records'
//! lengths rather than as lines (what builds from before the line layout read). The file,
//! written with default options otherwise, is written once to the temporary directory and kept
//! there for the next run.

use cobsfile::{Compression, MappedFile, ReaderBuilder, SliceReader, WriterBuilder};

#[path = "../benches/corpus.rs"]
mod corpus;

use corpus::{Corpus, Kind};

use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the passes run.
const SECONDS: f64 = 5.0;

fn main() {
    let kind = match std::env::var("K").as_deref() {
        Ok("large") => Kind::LargeJson,
        Ok("small") => Kind::SmallJson,
        _ => Kind::ZeroRich,
    };
    let threads: Vec<usize> = std::env::var("T")
        .unwrap_or_else(|_| "2".into())
        .split(',')
        .map(|t| t.parse().expect("T: thread counts"))
        .collect();
    let level: Option<i32> = std::env::var("Z").ok().and_then(|v| v.parse().ok());
    let compression = level.map_or(Compression::None, |l| Compression::zstd(l).expect("level"));
    // Compressed blocks as lines (spec 8.3), unless `L=0`.
    let lines = std::env::var("L").as_deref() != Ok("0");
    let bytes = corpus::corpus_bytes();
    let path = std::env::temp_dir().join(format!(
        "cobsfile-read-loop-{}-{bytes}-z{}{}",
        kind.name(),
        level.unwrap_or(0),
        if lines { "" } else { "-records" }
    ));
    if !path.exists() {
        let c = Corpus::generate(kind, bytes);
        let mut out = Vec::new();
        let mut w = WriterBuilder::new()
            .compression(compression)
            .line_layout(lines)
            .build(&mut out)
            .unwrap();
        for r in c.records() {
            w.write_record(r).unwrap();
        }
        w.finish().unwrap();
        std::fs::write(&path, &out).unwrap();
    }
    let file = MappedFile::open(&path).unwrap();
    let shared: Arc<[u8]> = file.bytes().into();
    let source = std::env::var("S").unwrap_or_else(|_| "mapped".into());
    // One set of options per thread count, as a program reading file after file keeps them:
    // its readers leave their buffers to one another.
    let options: Vec<ReaderBuilder> = threads
        .iter()
        .map(|&n| ReaderBuilder::new().threads(n))
        .collect();
    let read = |options: &ReaderBuilder| {
        let start = Instant::now();
        let reader = match source.as_str() {
            "slice" => options.from_slice(&shared),
            "shared" => options.from_shared(&shared),
            _ => file.reader_with(options),
        };
        std::hint::black_box(count(reader));
        start.elapsed()
    };
    let t0 = Instant::now();
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); threads.len()];
    let rounds: Option<usize> = std::env::var("N")
        .ok()
        .map(|n| n.parse().expect("N: rounds"));
    while match rounds {
        Some(n) => times[0].len() < n,
        None => t0.elapsed().as_secs_f64() < SECONDS * threads.len() as f64,
    } {
        for (t, options) in times.iter_mut().zip(&options) {
            t.push(read(options));
        }
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    for (t, &n) in times.iter().zip(&threads) {
        println!(
            "{} {source} T={n}: {:.2} ms/pass (mean), {:.2} (median), {} passes",
            kind.name(),
            ms(t.iter().sum::<Duration>()) / t.len() as f64,
            ms(median(t.clone())),
            t.len()
        );
    }
    if let [a, b] = &times[..] {
        let ratios: Vec<f64> = a
            .iter()
            .zip(b)
            .map(|(a, b)| a.as_secs_f64() / b.as_secs_f64())
            .collect();
        let mut sorted = ratios.clone();
        sorted.sort_by(f64::total_cmp);
        let q = |p: f64| sorted[((sorted.len() - 1) as f64 * p) as usize];
        println!(
            "T={} over T={}: median {:.2}x (quartiles {:.2}-{:.2}) of adjacent passes",
            threads[1],
            threads[0],
            q(0.5),
            q(0.25),
            q(0.75)
        );
    }
}

fn count(mut reader: SliceReader<'_>) -> usize {
    let mut n = 0;
    while let Some(record) = reader.next_record() {
        n += record.unwrap().len();
    }
    n
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}
