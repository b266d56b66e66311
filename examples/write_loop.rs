//! Writes a corpus into memory, pass after pass for a while, alternating the writer with
//! Apache Avro's `append_ser` (`Codec::Null`), and prints each one's median pass and the median
//! ratio of adjacent passes: a steady load to look at with `perf record`, and a ratio that the
//! machine's slow phases (they last seconds) move far less than best-of figures.
//!
//! ```text
//! cargo build --release --example write_loop
//! K=large target/release/examples/write_loop
//! K=small W=cobsfile perf record -g target/release/examples/write_loop
//! ```
//!
//! `K` is `small`, `large` or `zero` (the default: zero-rich); `W` is `cobsfile` or `avro` to
//! run one writer alone (default: both, alternating). Each writer writes into its own buffer,
//! kept from pass to pass.

use std::time::{Duration, Instant};

#[path = "../benches/corpus.rs"]
mod corpus;
#[path = "../benches/peers.rs"]
mod peers;

use corpus::{Corpus, Kind};
use peers::{avro_schema, write_avro_serde, write_cobsfile_default};

/// How long the passes run, per writer.
const SECONDS: f64 = 5.0;

fn main() {
    let kind = match std::env::var("K").as_deref() {
        Ok("large") => Kind::LargeJson,
        Ok("small") => Kind::SmallJson,
        _ => Kind::ZeroRich,
    };
    let only = std::env::var("W").ok();
    let run = |name: &str| only.as_deref().is_none_or(|w| w == name);
    let c = Corpus::generate(kind, corpus::corpus_bytes());
    let schema = avro_schema();
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let t0 = Instant::now();
    let writers = usize::from(run("cobsfile")) + usize::from(run("avro"));
    while t0.elapsed().as_secs_f64() < SECONDS * writers as f64 {
        if run("cobsfile") {
            let start = Instant::now();
            write_cobsfile_default(&c, &mut ours);
            a.push(start.elapsed());
        }
        if run("avro") {
            let start = Instant::now();
            write_avro_serde(&c, &schema, &mut theirs);
            b.push(start.elapsed());
        }
    }
    let gbps = |d: Duration| c.bytes() as f64 / d.as_secs_f64() / 1e9;
    for (name, t) in [("cobsfile", &a), ("avro append_ser", &b)] {
        if !t.is_empty() {
            println!(
                "{} {name}: {:.2} GB/s (median pass), {} passes",
                kind.name(),
                gbps(median(t.clone())),
                t.len()
            );
        }
    }
    if !a.is_empty() && !b.is_empty() {
        let mut ratios: Vec<f64> = a
            .iter()
            .zip(&b)
            .map(|(a, b)| b.as_secs_f64() / a.as_secs_f64())
            .collect();
        ratios.sort_by(f64::total_cmp);
        let q = |p: f64| ratios[((ratios.len() - 1) as f64 * p) as usize];
        println!(
            "cobsfile over Avro: median {:.2}x (quartiles {:.2}-{:.2}) of adjacent passes",
            q(0.5),
            q(0.25),
            q(0.75)
        );
    }
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}
