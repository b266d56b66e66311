//! Throughput of the writer and of the readers on 1 and more threads, on the benchmarks'
//! corpora (100 MB each by default).
//!
//! ```text
//! cargo run --release --example parallel                  # every corpus; zstd 3 without and with
//!                                                         # an embedded dictionary, and none; 1 and 2 threads
//! COBSFILE_BENCH_MB=20 cargo run --release --example parallel -- large-json 1 2 4
//! ```
//!
//! Each figure is the best of 10 passes, in MB/s (10^6 bytes of records per second). The
//! passes of every thread count alternate, round after round, so that a slow phase of the
//! machine does not fall on one of them alone. Writing goes into a reused in-memory buffer.
//! Reading visits every record: of the file in memory through a reader over a borrowed slice
//! (read on one thread whatever the threads asked: the workers need bytes that outlive the
//! reader), of the same file on disk (in the page cache) through a mapping, and of the file in
//! memory held in an `Arc` (`from_shared`), whose ranges the threads read in place.

use cobsfile::{Compression, Dictionary, MappedFile, ReaderBuilder, SliceReader, WriterBuilder};

#[path = "../benches/corpus.rs"]
mod corpus;

use corpus::{Corpus, Kind};

use std::sync::Arc;
use std::time::Duration;

mod timing;

use timing::time;

/// Rounds of passes; see `run`.
const ROUNDS: usize = 10;

fn write(
    corpus: &Corpus,
    (compression, dictionary): (Compression, Option<&Dictionary>),
    threads: usize,
    out: &mut Vec<u8>,
) {
    out.clear();
    let mut writer = WriterBuilder::new()
        .compression(compression)
        .threads(threads);
    if let Some(dictionary) = dictionary {
        writer = writer.dictionary(dictionary.clone(), true);
    }
    let mut writer = writer.build(out).expect("build");
    for record in corpus.records() {
        writer.write_record(record).expect("write");
    }
    writer.finish().expect("finish");
}

fn read(file: &[u8], threads: usize) -> (usize, usize) {
    count(ReaderBuilder::new().threads(threads).from_slice(file))
}

fn read_shared(file: &Arc<[u8]>, threads: usize) -> (usize, usize) {
    count(ReaderBuilder::new().threads(threads).from_shared(file))
}

fn read_mapped(file: &MappedFile, threads: usize) -> (usize, usize) {
    count(file.reader_with(&ReaderBuilder::new().threads(threads)))
}

fn count(mut reader: SliceReader<'_>) -> (usize, usize) {
    let (mut records, mut bytes) = (0, 0);
    while let Some(record) = reader.next_record() {
        records += 1;
        bytes += record.expect("intact").len();
    }
    (records, bytes)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut threads: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    if threads.is_empty() {
        threads = vec![1, 2];
    }
    println!(
        "cores: {}",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    for kind in [Kind::SmallJson, Kind::LargeJson, Kind::ZeroRich] {
        if args.iter().any(|a| a.contains('-')) && !args.iter().any(|a| a == kind.name()) {
            continue;
        }
        run(kind, &threads);
    }
}

fn run(kind: Kind, threads: &[usize]) {
    let corpus = Corpus::generate(kind, corpus::corpus_bytes());
    let mb = corpus.bytes() as f64 / 1e6;
    println!("\n{}", corpus.describe());
    let path = std::env::temp_dir().join(format!("cobsfile-parallel-{}", std::process::id()));

    let mut out = Vec::with_capacity(corpus.data.len() + corpus.data.len() / 8);
    // A dictionary trained on the first records, embedded in the file: each range read
    // finds it before its range.
    let samples: Vec<&[u8]> = corpus.records().take(5_000).collect();
    let dictionary = Dictionary::train(&samples, 110 * 1024).expect("train");
    let zstd = Compression::zstd(3).expect("level");
    for (name, compression) in [
        ("zstd 3", (zstd, None)),
        ("zstd 3, embedded dictionary", (zstd, Some(&dictionary))),
        ("none", (Compression::None, None)),
    ] {
        write(&corpus, compression, 1, &mut out);
        let file = out.clone();
        std::fs::write(&path, &file).expect("temporary file");
        let mapped = cobsfile::open(&path).expect("map");
        let shared: Arc<[u8]> = file.as_slice().into();
        println!("{name}: file {:.1} MB", file.len() as f64 / 1e6);
        let expected = (corpus.len(), corpus.data.len());
        for &n in threads {
            write(&corpus, compression, n, &mut out);
            assert!(out == file, "{n} threads write a different file");
            assert_eq!(read(&file, n), expected);
            assert_eq!(read_mapped(&mapped, n), expected);
            assert_eq!(read_shared(&shared, n), expected);
        }
        // Rounds of one pass per thread count and task, so that the machine's slow phases
        // fall on all of them alike; the best pass of each counts.
        let mut times = vec![[Duration::MAX; 4]; threads.len()];
        for _ in 0..ROUNDS {
            for (t, &n) in times.iter_mut().zip(threads) {
                t[0] = t[0].min(time(|| write(&corpus, compression, n, &mut out)));
                t[1] = t[1].min(time(|| assert_eq!(read(&file, n), expected)));
                t[2] = t[2].min(time(|| assert_eq!(read_mapped(&mapped, n), expected)));
                t[3] = t[3].min(time(|| assert_eq!(read_shared(&shared, n), expected)));
            }
        }
        let speed = |t: Duration| mb / t.as_secs_f64();
        let base = times[0].map(speed);
        for (t, &n) in times.iter().zip(threads) {
            let [w, r, m, s] = t.map(speed);
            println!(
                "  threads {n}: write {w:7.1} MB/s ({:.2}x)   read {r:7.1} MB/s ({:.2}x)   mapped {m:7.1} MB/s ({:.2}x)   shared {s:7.1} MB/s ({:.2}x)",
                w / base[0],
                r / base[1],
                m / base[2],
                s / base[3],
            );
        }
    }
    let _ = std::fs::remove_file(&path);
}
