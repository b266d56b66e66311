//! Block size against compression ratio, speed, damage and memory, on real JSON lines.
//!
//! For each file (one record per line) and each block target, writes a zstd-compressed
//! cobsfile in memory and reports: its size against the input and against whole-stream
//! `zstd -3` and `gzip -6` of the same bytes (run as commands, if present); the mean stored size
//! of a data block, which is what one damaged block costs (a flipped byte loses the block it
//! lands in); the largest decoded block, which is what a reader holds; and write and read
//! speed (best of `COBSFILE_RUNS`, default 3).
//!
//! ```sh
//! python3 benches/realworld.py /tmp/realworld    # real JSON lines: AWS API models, crates.io index
//! cargo run --release --example block_size -- /tmp/realworld/*.jsonl
//! COBSFILE_TARGETS=256K,1M,4M COBSFILE_LEVEL=3 cargo run --release --example block_size -- FILE.jsonl
//! ```

use std::process::Command;
use std::time::Instant;

use cobsfile::{BlockType, Compression, ReaderBuilder, WriterBuilder};

fn parse_size(text: &str) -> usize {
    let (number, unit) = text.split_at(
        text.find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len()),
    );
    let n: usize = number.parse().expect("a size such as 256K or 4M");
    n * match unit {
        "" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        other => panic!("unknown unit {other}"),
    }
}

/// Bytes `command` writes for `input` on its stdin, if it runs.
fn peer_size(command: &str, args: &[&str], input: &std::path::Path) -> Option<usize> {
    let out = Command::new(command)
        .args(args)
        .stdin(std::fs::File::open(input).ok()?)
        .output()
        .ok()?;
    out.status.success().then_some(out.stdout.len())
}

fn main() {
    let files: Vec<String> = std::env::args().skip(1).collect();
    assert!(!files.is_empty(), "usage: block_size FILE.jsonl...");
    // "default": what `pack --zstd` writes without --block-target.
    let targets: Vec<Option<usize>> = std::env::var("COBSFILE_TARGETS")
        .unwrap_or_else(|_| "64K,256K,512K,1M,2M,4M,8M,default".into())
        .split(',')
        .map(|t| (t != "default").then(|| parse_size(t)))
        .collect();
    let level: i32 = std::env::var("COBSFILE_LEVEL").map_or(3, |l| l.parse().expect("a level"));
    let runs: usize = std::env::var("COBSFILE_RUNS").map_or(3, |r| r.parse().expect("a count"));

    for file in &files {
        let path = std::path::Path::new(file);
        let data = std::fs::read(path).expect("readable input");
        let records: Vec<&[u8]> = data
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        let record_bytes: usize = records.iter().map(|r| r.len()).sum();
        let zstd = peer_size("zstd", &[&format!("-{level}"), "-c", "-q"], path);
        let gzip = peer_size("gzip", &["-6", "-c"], path);
        println!(
            "\n{}: {} records, {} bytes; zstd -{level}: {}; gzip -6: {}\n",
            path.file_name().unwrap().to_string_lossy(),
            records.len(),
            data.len(),
            zstd.map_or("-".into(), |n| n.to_string()),
            gzip.map_or("-".into(), |n| n.to_string()),
        );
        println!("| block target | bytes | input / file | vs zstd -{level} | vs gzip -6 | data blocks | mean stored block (lost per damage) | largest decoded block | write MB/s | read MB/s |");
        println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for &target in &targets {
            let mut file = Vec::new();
            let mut write_best = f64::MAX;
            for _ in 0..runs {
                let start = Instant::now();
                let mut builder = WriterBuilder::new().compression(Compression::Zstd { level });
                if let Some(target) = target {
                    builder = builder.block_target(target);
                }
                let mut writer = builder.build(Vec::with_capacity(data.len())).unwrap();
                for r in &records {
                    writer.write_record(r).unwrap();
                }
                file = writer.finish().unwrap();
                write_best = write_best.min(start.elapsed().as_secs_f64());
            }
            let mut read_best = f64::MAX;
            let (mut blocks, mut stored, mut largest) = (0u64, 0u64, 0u64);
            for _ in 0..runs {
                let start = Instant::now();
                let mut reader = ReaderBuilder::new().from_slice(&file);
                let (mut n, mut s, mut l) = (0u64, 0u64, 0u64);
                while let Some(block) = reader.next_block() {
                    let block = block.unwrap();
                    let info = block.info();
                    if info.block_type == BlockType::Data {
                        n += 1;
                        s += info.size;
                        l = l.max(info.payload_size);
                        for record in block.records() {
                            std::hint::black_box(record);
                        }
                    }
                }
                read_best = read_best.min(start.elapsed().as_secs_f64());
                (blocks, stored, largest) = (n, s, l);
            }
            let mb = record_bytes as f64 / 1e6;
            let ratio = |peer: Option<usize>| {
                peer.map_or("-".into(), |p| {
                    format!("{:.3}", file.len() as f64 / p as f64)
                })
            };
            let name = match target {
                Some(t) => format!("{} KiB", t >> 10),
                None => format!(
                    "default ({} KiB)",
                    WriterBuilder::new()
                        .compression(Compression::Zstd { level })
                        .get_block_target()
                        >> 10
                ),
            };
            println!(
                "| {name} | {} | {:.2} | {} | {} | {} | {} | {} | {:.0} | {:.0} |",
                file.len(),
                data.len() as f64 / file.len() as f64,
                ratio(zstd),
                ratio(gzip),
                blocks,
                stored / blocks.max(1),
                largest,
                mb / write_best,
                mb / read_best,
            );
        }
    }
}
