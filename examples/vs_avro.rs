//! The writer and the slice reader against Apache Avro's fastest paths, on the benchmarks'
//! corpora, in one process: writing with `append_ser` of `serde_bytes` (`Codec::Null`),
//! reading with `Reader` (a `Value::Bytes` per record); and the streaming reader over the same
//! bytes beside the slice reader. Passes of the two alternate, each into
//! its own reused buffer, and each figure is the best of all passes, so that a slow phase of
//! the machine, or one writer's heap left behind for the other, does not decide the ratio.
//!
//! ```text
//! cargo run --release --example vs_avro                    # all corpora, 100 MB each
//! COBSFILE_BENCH_MB=20 cargo run --release --example vs_avro -- small-json
//! ```

use std::hint::black_box;
use std::time::Duration;

#[path = "../benches/corpus.rs"]
mod corpus;
#[path = "../benches/peers.rs"]
mod peers;

mod timing;

use corpus::{Corpus, Kind};
use peers::{
    avro_schema, read_avro, read_cobsfile_slice, read_cobsfile_stream, write_avro_serde,
    write_cobsfile_default,
};
use timing::time;

/// Alternating passes of each writer and reader.
const PASSES: usize = 15;

fn main() {
    let wanted: Vec<String> = std::env::args().skip(1).collect();
    let schema = avro_schema();
    println!(
        "| corpus | write: cobsfile | Avro | ratio | read: cobsfile | Avro | ratio | stream reader |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for kind in [Kind::SmallJson, Kind::LargeJson, Kind::ZeroRich] {
        if !wanted.is_empty() && !wanted.iter().any(|w| w == kind.name()) {
            continue;
        }
        let c = Corpus::generate(kind, corpus::corpus_bytes());
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        // Best times: cobsfile and Avro writing, then reading, then the stream reader.
        let mut best = [Duration::MAX; 5];
        for _ in 0..PASSES {
            best[0] = best[0].min(time(|| write_cobsfile_default(&c, &mut ours)));
            best[1] = best[1].min(time(|| write_avro_serde(&c, &schema, &mut theirs)));
            best[2] = best[2].min(time(|| {
                assert_eq!(black_box(read_cobsfile_slice(&ours)), c.data.len());
            }));
            best[3] = best[3].min(time(|| {
                assert_eq!(black_box(read_avro(&theirs)), c.data.len());
            }));
            best[4] = best[4].min(time(|| {
                assert_eq!(black_box(read_cobsfile_stream(&ours)), c.data.len());
            }));
        }
        let gbps = |t: Duration| format!("{:.2} GB/s", c.bytes() as f64 / t.as_secs_f64() / 1e9);
        let ratio = |ours: Duration, theirs: Duration| theirs.as_secs_f64() / ours.as_secs_f64();
        println!(
            "| {} | {} | {} | {:.2}x | {} | {} | {:.2}x | {} |",
            kind.name(),
            gbps(best[0]),
            gbps(best[1]),
            ratio(best[0], best[1]),
            gbps(best[2]),
            gbps(best[3]),
            ratio(best[2], best[3]),
            gbps(best[4]),
        );
    }
}
