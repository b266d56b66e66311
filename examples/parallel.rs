//! Throughput of the writer and of the slice reader on 1 and more threads, on the benchmarks'
//! `large-json` corpus (JSON log events of 187..=10000 bytes, 100 MB by default).
//!
//! ```text
//! cargo run --release --example parallel                  # zstd 3 and none, 1 and 2 threads
//! COBSFILE_BENCH_MB=20 cargo run --release --example parallel -- 1 2 4   # thread counts
//! ```
//!
//! Each figure is the best of 5 runs, in MB/s (10^6 bytes of records per second). Writing goes
//! into a reused in-memory buffer; reading visits every record of an in-memory file.

use cobsfile::{Compression, ReaderBuilder, WriterBuilder};

#[path = "../benches/corpus.rs"]
mod corpus;

use corpus::{Corpus, Kind};

mod timing;

use timing::best;

fn write(corpus: &Corpus, compression: Compression, threads: usize, out: &mut Vec<u8>) {
    out.clear();
    let mut writer = WriterBuilder::new()
        .compression(compression)
        .threads(threads)
        .build(out)
        .expect("build");
    for record in corpus.records() {
        writer.write_record(record).expect("write");
    }
    writer.finish().expect("finish");
}

fn read(file: &[u8], threads: usize) -> (usize, usize) {
    let mut reader = ReaderBuilder::new().threads(threads).from_slice(file);
    let (mut records, mut bytes) = (0, 0);
    while let Some(record) = reader.next_record() {
        records += 1;
        bytes += record.expect("intact").len();
    }
    (records, bytes)
}

fn main() {
    let threads: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("thread counts"))
        .collect();
    let threads = if threads.is_empty() {
        vec![1, 2]
    } else {
        threads
    };
    let corpus = Corpus::generate(Kind::LargeJson, corpus::corpus_bytes());
    let mb = corpus.bytes() as f64 / 1e6;
    println!("{}", corpus.describe());
    println!(
        "cores: {}",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );

    let mut out = Vec::with_capacity(corpus.data.len() + corpus.data.len() / 8);
    for (name, compression) in [
        ("zstd 3", Compression::zstd(3).expect("level")),
        ("none", Compression::None),
    ] {
        write(&corpus, compression, 1, &mut out);
        let file = out.clone();
        println!("\n{name}: file {:.1} MB", file.len() as f64 / 1e6);
        let mut base = (0.0, 0.0);
        for &n in &threads {
            write(&corpus, compression, n, &mut out);
            assert!(out == file, "{n} threads write a different file");
            let w = best(|| write(&corpus, compression, n, &mut out));
            let expected = (corpus.len(), corpus.data.len());
            assert_eq!(read(&file, n), expected);
            let r = best(|| assert_eq!(read(&file, n), expected));
            let (w, r) = (mb / w.as_secs_f64(), mb / r.as_secs_f64());
            if n == threads[0] {
                base = (w, r);
            }
            println!(
                "  threads {n}: write {w:7.1} MB/s ({:.2}x)   read {r:7.1} MB/s ({:.2}x)",
                w / base.0,
                r / base.1
            );
        }
    }
}
