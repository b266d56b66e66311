//! COBS decoding alone, on the benchmarks' corpora in 256 KiB chunks (a block body), in GB/s:
//! the library's decoder and the plain reference decoder it is tested against.
//!
//! ```text
//! cargo run --release --example cobs_decode                 # all corpora, 100 MB each
//! COBSFILE_BENCH_MB=20 cargo run --release --example cobs_decode -- zero-rich
//! cargo run --profile profiling --example cobs_decode -- --no-reference zero-rich  # for perf
//! ```
//!
//! Each figure is the best of 20 passes over the corpus (5 for the reference).

use cobsfile::cobs;

#[path = "../benches/corpus.rs"]
mod corpus;

use corpus::{Corpus, Kind};

mod timing;

use timing::best;

const CHUNK: usize = 256 * 1024;

fn main() {
    let mut wanted: Vec<String> = std::env::args().skip(1).collect();
    let reference = !wanted.iter().any(|w| w == "--no-reference");
    wanted.retain(|w| w != "--no-reference");
    for kind in [Kind::SmallJson, Kind::LargeJson, Kind::ZeroRich] {
        if !wanted.is_empty() && !wanted.iter().any(|w| w == kind.name()) {
            continue;
        }
        let corpus = Corpus::generate(kind, corpus::corpus_bytes());
        let mut encoded = Vec::new();
        let chunks: Vec<_> = corpus
            .chunks(CHUNK)
            .into_iter()
            .map(|r| {
                let start = encoded.len();
                cobs::encode(&corpus.data[r], &mut encoded);
                start..encoded.len()
            })
            .collect();
        let mut out = Vec::with_capacity(CHUNK + 1);
        // The machine's speed wanders: the best of four times as many passes.
        let fast = (0..4)
            .map(|_| {
                best(|| {
                    for r in &chunks {
                        cobs::decode(&encoded[r.clone()], &mut out).expect("valid");
                    }
                })
            })
            .min()
            .expect("passes");
        let plain = best(|| {
            for r in chunks.iter().filter(|_| reference) {
                std::hint::black_box(cobs::reference_decode(&encoded[r.clone()]).expect("valid"));
            }
        });
        let gb = |t: std::time::Duration| corpus.bytes() as f64 / t.as_secs_f64() / 1e9;
        print!("{:<10} decode {:6.2} GB/s", kind.name(), gb(fast));
        if reference {
            print!("   reference {:6.2} GB/s", gb(plain));
        }
        println!();
    }
}
