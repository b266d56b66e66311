//! The writer against Apache Avro's fastest writing path (`append_ser` of `serde_bytes`,
//! `Codec::Null`), on the benchmarks' corpora, in one process: passes of the two alternate,
//! each into its own reused buffer, and each figure is the best of all passes, so that a
//! slow phase of the machine or one writer's heap left behind for the other does not decide
//! the ratio.
//!
//! ```text
//! cargo run --release --example write_peers                    # all corpora, 100 MB each
//! COBSFILE_BENCH_MB=20 cargo run --release --example write_peers -- small-json
//! ```

use std::hint::black_box;
use std::time::{Duration, Instant};

#[path = "../benches/corpus.rs"]
mod corpus;
#[path = "../benches/peers.rs"]
mod peers;

use corpus::{Corpus, Kind};
use peers::{avro_schema, write_avro_serde, write_cobsfile_default};

/// Alternating passes of each writer.
const PASSES: usize = 15;

fn time(f: impl FnOnce()) -> Duration {
    let start = Instant::now();
    f();
    start.elapsed()
}

fn gbps(c: &Corpus, t: Duration) -> f64 {
    c.bytes() as f64 / t.as_secs_f64() / 1e9
}

fn main() {
    let wanted: Vec<String> = std::env::args().skip(1).collect();
    let schema = avro_schema();
    println!("| corpus | cobsfile | avro (serde) | cobsfile / avro |");
    println!("|---|---:|---:|---:|");
    for kind in [Kind::SmallJson, Kind::LargeJson, Kind::ZeroRich] {
        if !wanted.is_empty() && !wanted.iter().any(|w| w == kind.name()) {
            continue;
        }
        let c = Corpus::generate(kind, corpus::corpus_bytes());
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        let (mut best_ours, mut best_theirs) = (Duration::MAX, Duration::MAX);
        for _ in 0..PASSES {
            best_ours = best_ours.min(time(|| write_cobsfile_default(&c, &mut ours)));
            black_box(ours.len());
            best_theirs = best_theirs.min(time(|| write_avro_serde(&c, &schema, &mut theirs)));
            black_box(theirs.len());
        }
        println!(
            "| {} | {:.2} GB/s | {:.2} GB/s | {:.2}x |",
            kind.name(),
            gbps(&c, best_ours),
            gbps(&c, best_theirs),
            best_theirs.as_secs_f64() / best_ours.as_secs_f64()
        );
    }
}
