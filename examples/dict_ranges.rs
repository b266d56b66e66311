//! Range reads against a pull reader, on 1 and 2 threads, over a zstd file of large JSON
//! events with and without an embedded dictionary (which every range after it must find
//! before decoding its blocks).
//!
//! ```text
//! MB=1500 cargo run --release --example dict_ranges
//! ```

use cobsfile::{Compression, Dictionary, RangeSink, ReaderBuilder, WriterBuilder};
use std::ops::ControlFlow;
use std::time::Instant;
#[path = "../benches/corpus.rs"]
mod corpus;
use corpus::{Corpus, Kind};
struct Sum(u64);
impl RangeSink<u64> for Sum {
    fn part(&mut self, n: u64) -> ControlFlow<()> {
        self.0 += n;
        ControlFlow::Continue(())
    }
}
fn main() {
    let corpus = Corpus::generate(
        Kind::LargeJson,
        std::env::var("MB").map_or(300, |v| v.parse().unwrap()) << 20,
    );
    let samples: Vec<&[u8]> = corpus.records().take(20000).collect();
    let dict = Dictionary::train(&samples, 100_000).unwrap();
    for embed in [false, true] {
        let mut w = WriterBuilder::new().compression(Compression::Zstd { level: 3 });
        if embed {
            w = w.dictionary(dict.clone(), true);
        }
        let mut w = w.build(Vec::new()).unwrap();
        for r in corpus.records() {
            w.write_record(r).unwrap();
        }
        let file = w.finish().unwrap();
        for threads in [1, 2] {
            let t = Instant::now();
            let mut sum = Sum(0);
            ReaderBuilder::new()
                .threads(threads)
                .read_ranges(
                    &file,
                    |n: &mut u64, b: &cobsfile::Block| *n += b.records().count() as u64,
                    &mut sum,
                )
                .unwrap();
            println!(
                "embed {embed} read_ranges threads {threads}: {:?} {}",
                t.elapsed(),
                sum.0
            );
            let t = Instant::now();
            let n = ReaderBuilder::new()
                .threads(threads)
                .from_slice(&file)
                .into_iter()
                .count();
            println!(
                "embed {embed} pull threads {threads}: {:?} {n}",
                t.elapsed()
            );
        }
    }
}
