//! Writes the records of a file again and again into a reused buffer: a fixed amount of
//! writing to time two builds with in whole processes (`farm-bench --vs`), as
//! `examples/read_loop` does for reading (`examples/write_loop` runs for a while instead, beside
//! Apache Avro's writer).
//!
//! ```text
//! cargo build --release --example write_rounds
//! F=/tmp/cobsfile-read-loop-small-json-400000000-z0 T=2 Z=3 N=4 target/release/examples/write_rounds
//! ```
//!
//! `F` is a cobsfile whose records are written (read once, on one thread, into memory: the
//! uncompressed file `examples/read_loop` leaves in the temporary directory will do); `T` the
//! writer's threads (default 1); `Z` a zstd level (default: uncompressed); `N` the passes
//! (default 5); `L=0` writes compressed blocks with the records' lengths rather than as lines.

use cobsfile::{Compression, ReaderBuilder, WriterBuilder};

fn main() {
    let var = |name: &str| std::env::var(name).ok();
    let path = var("F").expect("F: a cobsfile to take the records of");
    let threads: usize = var("T").map_or(1, |t| t.parse().expect("T: threads"));
    let level: Option<i32> = var("Z").map(|z| z.parse().expect("Z: a zstd level"));
    let compression = level.map_or(Compression::None, |l| Compression::zstd(l).expect("level"));
    let passes: usize = var("N").map_or(5, |n| n.parse().expect("N: passes"));
    let lines = var("L").as_deref() != Some("0");

    let bytes = std::fs::read(&path).expect("F: readable");
    let mut reader = ReaderBuilder::new().from_slice(&bytes);
    let mut records = Vec::new();
    while let Some(record) = reader.next_record() {
        records.push(record.expect("an intact file").to_vec());
    }
    drop(bytes);

    let mut out = Vec::new();
    let start = std::time::Instant::now();
    for _ in 0..passes {
        out.clear();
        let mut writer = WriterBuilder::new()
            .compression(compression)
            .line_layout(lines)
            .threads(threads)
            .build(&mut out)
            .expect("build");
        for record in &records {
            writer.write_record(record).expect("write");
        }
        writer.finish().expect("finish");
    }
    let seconds = start.elapsed().as_secs_f64() / passes.max(1) as f64;
    let mb: usize = records.iter().map(Vec::len).sum();
    println!(
        "{} records, {:.1} MB, T={threads}: {:.1} ms a pass, {:.0} MB/s, file {} bytes",
        records.len(),
        mb as f64 / 1e6,
        seconds * 1e3,
        mb as f64 / 1e6 / seconds,
        out.len()
    );
}
