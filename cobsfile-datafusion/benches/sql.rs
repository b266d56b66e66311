//! SQL over the same events stored five ways, in one run: cobsfile (JSON records, Avro
//! records), NDJSON and Avro object container files read by DataFusion's own readers, and
//! Parquet. Prints markdown tables for BENCHMARKS.md.
//!
//! ```sh
//! cargo bench -p cobsfile-datafusion --bench sql                 # 1 GB of events
//! COBSFILE_SQL_MB=100 cargo bench -p cobsfile-datafusion --bench sql
//! COBSFILE_SQL_LIMIT_GB=10 cargo bench -p cobsfile-datafusion --bench sql   # + LIMIT 10 over 10 GB of files
//! ```
//!
//! Files go to `COBSFILE_SQL_DIR` (default `target/sql-bench`) and are kept for the next run.

use std::fmt::Write as _;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cobsfile::avro::container::{Codec, ContainerWriter};
use cobsfile::avro::{json::from_json_str, AvroWriter, WriterSchema};
use cobsfile::{Compression, WriterBuilder};
use cobsfile_datafusion::{CobsfileContext, CobsfileOptions};
use datafusion::dataframe::DataFrameWriteOptions;
use datafusion::prelude::{
    AvroReadOptions, JsonReadOptions, ParquetReadOptions, SessionConfig, SessionContext,
};
use futures::StreamExt;

const SCHEMA: &str = include_str!("../../samples/events.avsc");

/// splitmix64: the same events every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const SERVICES: [&str; 8] = [
    "billing", "search", "checkout", "auth", "catalog", "payments", "shipping", "gateway",
];
const WORDS: [&str; 16] = [
    "served",
    "miss",
    "user",
    "order",
    "timeout",
    "cache",
    "queue",
    "upstream",
    "created",
    "rebalanced",
    "depth",
    "retry",
    "token",
    "refresh",
    "shard",
    "lag",
];

/// One event as a JSON line (the fields of samples/events.avsc).
fn event(rng: &mut Rng, i: u64) -> String {
    let level = match rng.below(100) {
        0..=4 => "error",
        5..=14 => "warn",
        15..=29 => "debug",
        _ => "info",
    };
    let mut msg = String::new();
    for w in 0..(3 + rng.below(9)) {
        if w > 0 {
            msg.push(' ');
        }
        msg.push_str(WORDS[rng.below(16) as usize]);
    }
    let seconds = i / 50;
    format!(
        "{{\"ts\":\"2025-11-{:02}T{:02}:{:02}:{:02}Z\",\"level\":\"{level}\",\"service\":\"{}\",\
         \"host\":\"web-{:02}\",\"request_id\":\"{:016x}\",\"latency_ms\":{}.{:02},\"msg\":\"{msg}\"}}",
        1 + (seconds / 86400) % 28,
        (seconds / 3600) % 24,
        (seconds / 60) % 60,
        seconds % 60,
        SERVICES[rng.below(8) as usize],
        rng.below(40),
        rng.next(),
        rng.below(1000),
        rng.below(100),
    )
}

/// Writes `bytes` of events as NDJSON, cobsfile (JSON and Avro records) and Avro OCF.
fn generate(dir: &Path, bytes: u64) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let done = dir.join("done");
    let stamp = format!("{bytes} v2");
    if std::fs::read_to_string(&done).ok().as_deref() == Some(stamp.as_str()) {
        return Ok(());
    }
    let schema = WriterSchema::parse(SCHEMA).unwrap();
    let mut ndjson = BufWriter::new(std::fs::File::create(dir.join("events.json"))?);
    let cobs = |name: &str, compression| -> std::io::Result<_> {
        std::fs::create_dir_all(dir.join(name))?;
        let file = std::fs::File::create(dir.join(name).join("events.cobs"))?;
        Ok(WriterBuilder::new()
            .compression(compression)
            .build(BufWriter::new(file))
            .unwrap())
    };
    let zstd = Compression::Zstd { level: 3 };
    let mut json_writer = cobs("json", zstd)?;
    let mut json_plain = cobs("json-none", Compression::None)?;
    let mut avro_writer = AvroWriter::new(cobs("avro", zstd)?, schema.clone()).unwrap();
    let mut avro_plain =
        AvroWriter::new(cobs("avro-none", Compression::None)?, schema.clone()).unwrap();
    let ocf = std::fs::File::create(dir.join("events.avro"))?;
    let mut container =
        ContainerWriter::new(BufWriter::new(ocf), &schema, Codec::Null, &[]).unwrap();
    let mut rng = Rng(7);
    let mut written = 0;
    let mut i = 0;
    while written < bytes {
        let line = event(&mut rng, i);
        i += 1;
        written += line.len() as u64 + 1;
        ndjson.write_all(line.as_bytes())?;
        ndjson.write_all(b"\n")?;
        json_writer.write_record(line.as_bytes()).unwrap();
        json_plain.write_record(line.as_bytes()).unwrap();
        let value = from_json_str(&line, &schema).unwrap();
        let datum = avro_writer.encode_value(&value).unwrap().to_vec();
        avro_writer.write_datum(&datum[10..]).unwrap();
        avro_plain.write_datum(&datum[10..]).unwrap();
        container.write_datum(&datum[10..]).unwrap();
    }
    ndjson.flush()?;
    json_writer.finish().unwrap().flush()?;
    json_plain.finish().unwrap().flush()?;
    avro_writer.finish().unwrap().flush()?;
    avro_plain.finish().unwrap().flush()?;
    container.finish().unwrap().flush()?;
    // Parquet, by DataFusion from the NDJSON.
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let ctx = SessionContext::new();
        let frame = ctx
            .read_json(
                dir.join("events.json").to_str().unwrap(),
                JsonReadOptions::default(),
            )
            .await
            .unwrap();
        frame
            .write_parquet(
                dir.join("events.parquet").to_str().unwrap(),
                DataFrameWriteOptions::new().with_single_file_output(true),
                None,
            )
            .await
            .unwrap();
    });
    std::fs::write(done, stamp)
}

/// A session over the five stores, reading with `partitions` threads.
async fn session(dir: &Path, partitions: usize, index: bool) -> SessionContext {
    let config = SessionConfig::new().with_target_partitions(partitions);
    let ctx = SessionContext::new_with_config(config);
    let path = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let options = CobsfileOptions::new().index_statistics(index);
    ctx.register_cobsfile("cobs_json", &path("json/events.cobs"), options.clone())
        .await
        .unwrap();
    ctx.register_cobsfile("cobs_avro", &path("avro/events.cobs"), options.clone())
        .await
        .unwrap();
    ctx.register_cobsfile(
        "cobs_json_none",
        &path("json-none/events.cobs"),
        options.clone(),
    )
    .await
    .unwrap();
    ctx.register_cobsfile("cobs_avro_none", &path("avro-none/events.cobs"), options)
        .await
        .unwrap();
    ctx.register_json("ndjson", &path("events.json"), JsonReadOptions::default())
        .await
        .unwrap();
    ctx.register_avro("avro_ocf", &path("events.avro"), AvroReadOptions::default())
        .await
        .unwrap();
    ctx.register_parquet(
        "parquet",
        &path("events.parquet"),
        ParquetReadOptions::default(),
    )
    .await
    .unwrap();
    ctx
}

const QUERIES: [(&str, &str); 3] = [
    (
        "group by",
        "SELECT service, CAST(level AS VARCHAR) AS level, count(*), avg(latency_ms) FROM {t} \
         GROUP BY service, CAST(level AS VARCHAR)",
    ),
    (
        "filter",
        "SELECT ts, host, msg FROM {t} WHERE request_id = '00000000deadbeef' OR \
         (CAST(level AS VARCHAR) = 'error' AND latency_ms > 999.98)",
    ),
    ("count(*)", "SELECT count(*) FROM {t}"),
];

const TABLES: [&str; 7] = [
    "cobs_json_none",
    "cobs_json",
    "cobs_avro_none",
    "cobs_avro",
    "ndjson",
    "avro_ocf",
    "parquet",
];

async fn time(ctx: &SessionContext, sql: &str, runs: usize) -> (Duration, usize) {
    let mut best = Duration::MAX;
    let mut rows = 0;
    for _ in 0..runs {
        let start = Instant::now();
        let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
        best = best.min(start.elapsed());
        rows = batches.iter().map(|b| b.num_rows()).sum();
    }
    (best, rows)
}

/// The LIMIT 10 probe, run in a child process so its peak memory is its own.
fn limit_probe(dir: &str) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let start = Instant::now();
        let ctx = SessionContext::new();
        ctx.register_cobsfile("t", dir, CobsfileOptions::new())
            .await
            .unwrap();
        let registered = start.elapsed();
        let mut stream = ctx
            .sql("SELECT * FROM t LIMIT 10")
            .await
            .unwrap()
            .execute_stream()
            .await
            .unwrap();
        let mut first = None;
        let mut rows = 0;
        while let Some(batch) = stream.next().await {
            let batch = batch.unwrap();
            if first.is_none() && batch.num_rows() > 0 {
                first = Some(start.elapsed());
            }
            rows += batch.num_rows();
        }
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let peak = status
            .lines()
            .find(|l| l.starts_with("VmHWM:"))
            .unwrap_or("VmHWM: ?")
            .trim_start_matches("VmHWM:")
            .trim()
            .to_string();
        println!(
            "{rows} {} {} {peak}",
            registered.as_secs_f64() * 1e3,
            first.unwrap_or_default().as_secs_f64() * 1e3
        );
    });
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "limit-probe") {
        return limit_probe(&args[i + 1]);
    }
    // One query, for a profiler: `sql once DIR PARTITIONS SQL`.
    if let Some(i) = args.iter().position(|a| a == "once") {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let (took, rows) = runtime.block_on(async {
            let ctx = session(Path::new(&args[i + 1]), args[i + 2].parse().unwrap(), true).await;
            time(&ctx, &args[i + 3], 1).await
        });
        println!("{rows} rows in {:.0} ms", took.as_secs_f64() * 1e3);
        return;
    }
    let mb: u64 = std::env::var("COBSFILE_SQL_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let dir = PathBuf::from(
        std::env::var("COBSFILE_SQL_DIR").unwrap_or_else(|_| "target/sql-bench".into()),
    );
    let data = dir.join(format!("{mb}mb"));
    let start = Instant::now();
    generate(&data, mb * 1_000_000).unwrap();
    eprintln!("data ready in {:.1} s", start.elapsed().as_secs_f64());
    let size = |name: &str| {
        std::fs::metadata(data.join(name))
            .map(|m| m.len())
            .unwrap_or(0)
    };
    let mut report = String::new();
    writeln!(report, "Sizes (bytes): NDJSON {}, cobs_json_none {}, cobs_json (zstd 3) {}, cobs_avro_none {}, cobs_avro (zstd 3) {}, Avro OCF (null) {}, Parquet {}\n",
        size("events.json"), size("json-none/events.cobs"), size("json/events.cobs"), size("avro-none/events.cobs"), size("avro/events.cobs"), size("events.avro"), size("events.parquet")).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    for (label, sql) in QUERIES {
        writeln!(report, "### {label}\n").unwrap();
        writeln!(
            report,
            "| table | rows | 1 partition (ms) | 2 partitions (ms) | vs cobs_json_none, 2 partitions |"
        )
        .unwrap();
        writeln!(report, "|---|---:|---:|---:|---:|").unwrap();
        let mut base = None;
        let mut rows_of = Vec::new();
        for index in [true, false] {
            if label != "count(*)" && !index {
                continue;
            }
            for table in TABLES {
                if !index && !table.starts_with("cobs") {
                    continue;
                }
                let sql = sql.replace("{t}", table);
                let mut ms = Vec::new();
                let mut rows = 0;
                for partitions in [1, 2] {
                    let (took, n) = runtime.block_on(async {
                        let ctx = session(&data, partitions, index).await;
                        time(&ctx, &sql, 3).await
                    });
                    ms.push(took.as_secs_f64() * 1e3);
                    rows = n;
                }
                let base = *base.get_or_insert(ms[1]);
                let name = if index {
                    table.to_string()
                } else {
                    format!("{table} (no index)")
                };
                rows_of.push(rows);
                writeln!(
                    report,
                    "| {name} | {rows} | {:.0} | {:.0} | {:.2} |",
                    ms[0],
                    ms[1],
                    ms[1] / base
                )
                .unwrap();
                eprint!(".");
            }
        }
        writeln!(report).unwrap();
    }
    if let Some(gb) = std::env::var("COBSFILE_SQL_LIMIT_GB")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        let big = dir.join(format!("limit-{gb}gb"));
        let json = data.join("json/events.cobs");
        let copies = (gb * 1_000_000_000).div_ceil(size("json/events.cobs").max(1));
        std::fs::create_dir_all(&big).unwrap();
        for i in 0..copies {
            let target = big.join(format!("part-{i:04}.cobs"));
            if !target.exists() {
                std::fs::copy(&json, &target).unwrap();
            }
        }
        let stored: u64 = std::fs::read_dir(&big)
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .sum();
        let me = std::env::current_exe().unwrap();
        let out = std::process::Command::new(me)
            .args(["limit-probe", &format!("{}/", big.display())])
            .output()
            .unwrap();
        let line = String::from_utf8_lossy(&out.stdout);
        writeln!(
            report,
            "LIMIT 10 over a directory of {copies} files, {stored} B stored (JSON records, zstd 3): \
             rows, registration ms, first row ms, peak RSS = {line}"
        )
        .unwrap();
    }
    println!("\n{report}");
}
