//! Appending small JSON events (the benchmarks' `small-json` corpus, 80..=400 bytes) to a
//! log file on disk with each [`Durability`]: records per second, and the latency from
//! `append` to durable.
//!
//! ```text
//! cargo run --release --example append_bench            # a temporary directory under /tmp
//! cargo run --release --example append_bench -- DIR     # the log files go to DIR
//! COBSFILE_BENCH_MB=20 cargo run --release --example append_bench   # a smaller corpus
//! ```
//!
//! - **Throughput runs** append the whole corpus (100 MB, 416,572 events by default) as fast
//!   as one thread can (four threads through four appenders on one file in the last run);
//!   `Fsync` appends for 3 s at most. Records/s counts until `close` returned (for group
//!   commit, until the last record was durable).
//! - **Paced runs** offer 10,000 events per second for 2 s, the load of a busy service,
//!   where group commit is not bound by the disk.
//! - **Latency** is from just before `append` to the moment the record is known durable:
//!   with `Fsync` the `append` call itself; with group commit, the first time
//!   `Appender::durable` covered it, polled by the appending thread every 32 records (every
//!   record in paced runs, and every 20 µs between them), so a record's latency is
//!   overstated by at most the time of 32 appends; the last records become durable at
//!   `close`. `None` and `Flush` never make records durable: their latency column is the
//!   `append` call.
//! - **fdatasync alone**: `write(2)` of 240 bytes then `fdatasync` on a plain `O_APPEND` file,
//!   what any synced append costs on this disk.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cobsfile::{Appender, AppenderBuilder, Durability};

#[path = "../benches/corpus.rs"]
mod corpus;

use corpus::{Corpus, Kind};

/// Each row is the run with the median records/s of this many (`COBSFILE_APPEND_RUNS`).
const RUNS: usize = 5;
/// Poll `durable()` every this many appends in throughput runs.
const POLL_EVERY: usize = 32;
/// The longest an `Fsync` throughput run lasts.
const FSYNC_LIMIT: Duration = Duration::from_secs(3);
/// Offered load and length of the paced runs.
const PACED_RATE: f64 = 10_000.0;
const PACED_FOR: Duration = Duration::from_secs(2);

/// One row of the table.
struct Row {
    name: String,
    records: usize,
    bytes: u64,
    elapsed: Duration,
    /// Latencies in nanoseconds, one per record.
    latencies: Vec<u64>,
    /// Whether `latencies` reach durability (rather than the `append` call's return).
    durable: bool,
    file_len: u64,
}

/// What one appender did: records, bytes, and for each record when `append` was called
/// and, once known, its latency.
struct Run {
    bytes: u64,
    started: Vec<Instant>,
    latencies: Vec<u64>,
}

impl Run {
    /// Latencies of the records still waiting when the appender closed: until `closed`.
    fn finish(mut self, closed: Instant) -> Run {
        let known = self.latencies.len();
        for t in &self.started[known..] {
            self.latencies.push((closed - *t).as_nanos() as u64);
        }
        self
    }
}

/// How fast records are offered.
#[derive(Clone, Copy)]
enum Load {
    /// As fast as `append` returns, up to `limit` wall time.
    Full { limit: Option<Duration> },
    /// `rate` records per second for `period`.
    Paced { rate: f64, period: Duration },
}

fn group(ms: u64) -> Durability {
    Durability::Group {
        interval: Duration::from_millis(ms),
        bytes: u64::MAX,
    }
}

/// Appends every `step`-th record of `corpus` from `first` to `log` under `load`; with
/// `group`, polls `durable()` for the records' latencies.
fn append(
    log: &mut Appender,
    group: bool,
    corpus: &Corpus,
    (first, step): (usize, usize),
    load: Load,
) -> Run {
    let n = corpus.len().div_ceil(step);
    let mut run = Run {
        bytes: 0,
        started: Vec::with_capacity(n),
        latencies: Vec::with_capacity(n),
    };
    // Gives the records `durable()` newly covers their latency.
    let settle = |log: &Appender, run: &mut Run| {
        let durable = log.durable() as usize;
        if durable > run.latencies.len() {
            let now = Instant::now();
            for i in run.latencies.len()..durable {
                run.latencies.push((now - run.started[i]).as_nanos() as u64);
            }
        }
    };
    let start = Instant::now();
    for (i, index) in (first..corpus.len()).step_by(step).enumerate() {
        match load {
            Load::Full { limit } => {
                if limit.is_some_and(|l| i % 64 == 0 && start.elapsed() > l) {
                    break;
                }
            }
            Load::Paced { rate, period } => {
                let due = start + Duration::from_secs_f64(i as f64 / rate);
                if due - start > period {
                    break;
                }
                while Instant::now() < due {
                    if group {
                        settle(log, &mut run);
                    }
                    std::thread::sleep(Duration::from_micros(20));
                }
            }
        }
        let record = corpus.record(index);
        let t = Instant::now();
        log.append(record).expect("append");
        run.bytes += record.len() as u64;
        run.started.push(t);
        if !group {
            run.latencies.push(t.elapsed().as_nanos() as u64);
        } else if i % POLL_EVERY == 0 || matches!(load, Load::Paced { .. }) {
            settle(log, &mut run);
        }
    }
    run
}

/// A fresh log file in `dir`.
fn fresh(dir: &Path, name: &str) -> PathBuf {
    let stem: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let path = dir.join(format!("{stem}.cobs"));
    let _ = std::fs::remove_file(&path);
    path
}

fn is_group(durability: Durability) -> bool {
    matches!(durability, Durability::Group { .. })
}

/// One appender on a fresh file.
fn single(dir: &Path, corpus: &Corpus, name: &str, durability: Durability, load: Load) -> Row {
    let path = fresh(dir, name);
    let mut log = AppenderBuilder::new()
        .durability(durability)
        .open(&path)
        .expect("open");
    let start = Instant::now();
    let run = append(&mut log, is_group(durability), corpus, (0, 1), load);
    log.close().expect("close");
    let run = run.finish(Instant::now());
    let elapsed = start.elapsed();
    row(name, &path, vec![run], elapsed, durability)
}

/// `threads` appenders on one fresh file, each on its own thread, each appending every
/// `threads`-th record.
fn shared(dir: &Path, corpus: &Corpus, name: &str, threads: usize, durability: Durability) -> Row {
    let path = fresh(dir, name);
    // Created first, so that every appender finds the header.
    Appender::open(&path)
        .expect("create")
        .close()
        .expect("close");
    let start = Instant::now();
    let runs: Vec<Run> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let path = &path;
                s.spawn(move || {
                    let mut log = AppenderBuilder::new()
                        .durability(durability)
                        .open(path)
                        .expect("open");
                    let full = Load::Full { limit: None };
                    let run = append(&mut log, is_group(durability), corpus, (t, threads), full);
                    log.close().expect("close");
                    run.finish(Instant::now())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let elapsed = start.elapsed();
    row(name, &path, runs, elapsed, durability)
}

fn row(name: &str, path: &Path, runs: Vec<Run>, elapsed: Duration, d: Durability) -> Row {
    let file_len = std::fs::metadata(path).map_or(0, |m| m.len());
    // Every record is in the file, readable.
    let file = cobsfile::open(path).expect("map");
    let report = cobsfile::ReaderBuilder::new()
        .verify(file.bytes())
        .expect("verify");
    let records: usize = runs.iter().map(|r| r.started.len()).sum();
    assert!(report.is_clean(), "{name}: {:?}", report.damaged);
    assert_eq!(report.records, records as u64, "{name}");
    drop(file);
    let _ = std::fs::remove_file(path);
    Row {
        name: name.to_owned(),
        records,
        bytes: runs.iter().map(|r| r.bytes).sum(),
        elapsed,
        latencies: runs.into_iter().flat_map(|r| r.latencies).collect(),
        durable: matches!(d, Durability::Fsync | Durability::Group { .. }),
        file_len,
    }
}

/// `write(2)` of one 240-byte line then `fdatasync`, for `FSYNC_LIMIT` at most.
fn fdatasync_alone(dir: &Path) -> Row {
    let path = fresh(dir, "fdatasync");
    let mut file: File = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .expect("open");
    let line = [b'x'; 240];
    let mut latencies = Vec::new();
    let start = Instant::now();
    while start.elapsed() < FSYNC_LIMIT && latencies.len() < 100_000 {
        let t = Instant::now();
        file.write_all(&line).expect("write");
        file.sync_data().expect("fdatasync");
        latencies.push(t.elapsed().as_nanos() as u64);
    }
    let elapsed = start.elapsed();
    let file_len = file.metadata().map_or(0, |m| m.len());
    drop(file);
    let _ = std::fs::remove_file(&path);
    Row {
        name: "write + fdatasync alone (no cobsfile)".to_owned(),
        records: latencies.len(),
        bytes: file_len,
        elapsed,
        latencies,
        durable: true,
        file_len,
    }
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

fn micros(ns: u64) -> String {
    let us = ns as f64 / 1e3;
    if us >= 100.0 {
        format!("{:.0}", us)
    } else if us >= 10.0 {
        format!("{:.1}", us)
    } else {
        format!("{:.2}", us)
    }
}

impl Row {
    fn rate(&self) -> f64 {
        self.records as f64 / self.elapsed.as_secs_f64()
    }
}

fn print_row(r: &mut Row, baseline: Option<f64>) -> f64 {
    r.latencies.sort_unstable();
    let rate = r.rate();
    let vs = baseline.map_or(String::new(), |b| format!("{:.2}x", rate / b));
    println!(
        "| {} | {} | {:.2} s | {:.0} | {:.1} | {} | {} | {} | {} | {} | {:.1} |",
        r.name,
        r.records,
        r.elapsed.as_secs_f64(),
        rate,
        r.bytes as f64 / r.elapsed.as_secs_f64() / 1e6,
        vs,
        if r.durable { "durable" } else { "append" },
        micros(percentile(&r.latencies, 0.50)),
        micros(percentile(&r.latencies, 0.99)),
        micros(percentile(&r.latencies, 0.999)),
        r.file_len as f64 / 1e6,
    );
    rate
}

fn main() {
    let dir = match std::env::args().nth(1) {
        Some(dir) => PathBuf::from(dir),
        None => {
            let dir = std::env::temp_dir().join(format!("cobsfile-append-{}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("temp dir");
            dir
        }
    };
    let corpus = Corpus::generate(Kind::SmallJson, corpus::corpus_bytes());
    println!("{}", corpus.describe());
    println!("log files in {}", dir.display());
    println!();
    println!(
        "| run | records | time | records/s | MB/s | vs no sync | latency to | p50 µs | p99 µs | p99.9 µs | file MB |"
    );
    println!("|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|");
    let full = Load::Full { limit: None };
    let paced = Load::Paced {
        rate: PACED_RATE,
        period: PACED_FOR,
    };
    let runs = std::env::var("COBSFILE_APPEND_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(RUNS);
    let median = |f: &dyn Fn() -> Row| {
        let mut rows: Vec<Row> = (0..runs).map(|_| f()).collect();
        rows.sort_by(|a, b| a.rate().total_cmp(&b.rate()));
        rows.swap_remove(rows.len() / 2)
    };
    let mut none = median(&|| single(&dir, &corpus, "None", Durability::None, full));
    let base = print_row(&mut none, None);
    let rows: Vec<Box<dyn Fn() -> Row>> = vec![
        Box::new(|| single(&dir, &corpus, "Flush", Durability::Flush, full)),
        Box::new(|| {
            let limit = Load::Full {
                limit: Some(FSYNC_LIMIT),
            };
            single(&dir, &corpus, "Fsync", Durability::Fsync, limit)
        }),
        Box::new(|| single(&dir, &corpus, "Group 10 ms", group(10), full)),
        Box::new(|| single(&dir, &corpus, "Group 1 ms", group(1), full)),
        Box::new(|| shared(&dir, &corpus, "Group 10 ms, 4 threads", 4, group(10))),
        Box::new(|| shared(&dir, &corpus, "None, 4 threads", 4, Durability::None)),
        Box::new(|| single(&dir, &corpus, "Group 10 ms, paced 10k/s", group(10), paced)),
        Box::new(|| single(&dir, &corpus, "Group 1 ms, paced 10k/s", group(1), paced)),
        Box::new(|| fdatasync_alone(&dir)),
    ];
    for row in rows {
        print_row(&mut median(&*row), Some(base));
    }
    if std::env::args().nth(1).is_none() {
        let _ = std::fs::remove_dir(&dir);
    }
}
