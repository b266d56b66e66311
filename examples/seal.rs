//! What sealing costs: writing sealed (a seal every MiB, and at the end) against unsealed, and
//! verifying the seals against a plain `verify`, on the benchmarks' corpora (100 MB each by
//! default), uncompressed and zstd 3; the bytes seals add.
//!
//! ```text
//! cargo run --release --example seal                      # small and large JSON
//! COBSFILE_BENCH_MB=200 cargo run --release --example seal -- small-json
//! ```
//!
//! Each figure is the best of 10 passes, the sealed and unsealed passes alternating round after
//! round, in MB/s (10^6 bytes of records per second). Writing goes into a reused in-memory
//! buffer; verifying reads the file in memory, on 1 and 2 threads.

use cobsfile::key::SealingKey;
use cobsfile::{Compression, ReaderBuilder, WriterBuilder};

#[path = "../benches/corpus.rs"]
mod corpus;

use corpus::{Corpus, Kind};

mod timing;

use timing::time;

use std::time::Duration;

const ROUNDS: usize = 10;

fn write(corpus: &Corpus, compression: Compression, seal: bool, out: &mut Vec<u8>) {
    write_on(corpus, compression, seal, 1, out)
}

fn write_on(
    corpus: &Corpus,
    compression: Compression,
    seal: bool,
    threads: usize,
    out: &mut Vec<u8>,
) {
    out.clear();
    let mut builder = WriterBuilder::new()
        .compression(compression)
        .threads(threads);
    if seal {
        builder = builder.seal(SealingKey::from_seed([7; 32]));
    }
    let mut writer = builder.build(out).expect("build");
    for record in corpus.records() {
        writer.write_record(record).expect("write");
    }
    writer.finish().expect("finish");
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    println!(
        "cores: {}",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    for kind in [Kind::SmallJson, Kind::LargeJson] {
        if !args.is_empty() && !args.iter().any(|a| a == kind.name()) {
            continue;
        }
        run(kind);
    }
}

fn run(kind: Kind) {
    let corpus = Corpus::generate(kind, corpus::corpus_bytes());
    let mb = corpus.bytes() as f64 / 1e6;
    println!("\n{}", corpus.describe());
    let key = SealingKey::from_seed([7; 32]).verifying_key();
    for (name, compression) in [
        ("none", Compression::None),
        ("zstd 3", Compression::zstd(3).expect("level")),
    ] {
        let mut plain = Vec::new();
        let mut sealed = Vec::new();
        write(&corpus, compression, false, &mut plain);
        write(&corpus, compression, true, &mut sealed);
        let seals = ReaderBuilder::new()
            .verify(&sealed)
            .expect("verify")
            .blocks
            .seal;
        let (_, check) = ReaderBuilder::new()
            .verify_seals(&sealed, &[key])
            .expect("verify seals");
        assert!(check.is_authentic());
        let mut scratch = Vec::with_capacity(sealed.len());
        // [write plain, write sealed, verify plain 1, verify seals 1, verify plain 2, seals 2,
        //  write plain 2 threads, write sealed 2 threads]
        let mut best = [Duration::MAX; 8];
        for _ in 0..ROUNDS {
            best[0] = best[0].min(time(|| write(&corpus, compression, false, &mut scratch)));
            best[1] = best[1].min(time(|| write(&corpus, compression, true, &mut scratch)));
            best[6] = best[6].min(time(|| {
                write_on(&corpus, compression, false, 2, &mut scratch)
            }));
            best[7] = best[7].min(time(|| {
                write_on(&corpus, compression, true, 2, &mut scratch)
            }));
            for (i, threads) in [(2, 1), (4, 2)] {
                let options = ReaderBuilder::new().threads(threads);
                best[i] = best[i].min(time(|| {
                    options.verify(&plain).expect("verify");
                }));
                best[i + 1] = best[i + 1].min(time(|| {
                    let (_, s) = options.verify_seals(&sealed, &[key]).expect("verify");
                    assert!(s.is_authentic());
                }));
            }
        }
        let speed = |d: Duration| mb / d.as_secs_f64();
        let [w0, w1, v0, s0, v2, s2, t0, t1] = best.map(speed);
        let added = sealed.len() - plain.len();
        println!(
            "{name}: file {:.1} MB, {seals} seals, {added} bytes added ({:.3}%, {} bytes per seal)",
            plain.len() as f64 / 1e6,
            100.0 * added as f64 / plain.len() as f64,
            added as u64 / seals.max(1),
        );
        println!(
            "  write: unsealed {w0:.0} MB/s, sealed {w1:.0} MB/s ({:.3}x)",
            w1 / w0
        );
        println!(
            "  write, 2 threads: unsealed {t0:.0} MB/s, sealed {t1:.0} MB/s ({:.3}x)",
            t1 / t0
        );
        println!(
            "  verify, 1 thread: plain {v0:.0} MB/s, with seals {s0:.0} MB/s ({:.3}x)",
            s0 / v0
        );
        println!(
            "  verify, 2 threads: plain {v2:.0} MB/s, with seals {s2:.0} MB/s ({:.3}x)",
            s2 / v2
        );
    }
}
