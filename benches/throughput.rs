//! Throughput of cobsfile against its peers (Avro object container files, MCAP), in memory,
//! single-threaded, on the corpora of `corpus.rs`.
//!
//! ```text
//! cargo bench --bench throughput                      # everything, ~6 minutes on 2 cores
//! cargo bench --bench throughput -- '^cobs/'          # one group (a regex on the ids)
//! COBSFILE_BENCH_MB=10 cargo bench --bench throughput # 10 MB corpora for a quick look
//! COBSFILE_BENCH_DUMP=/tmp cargo bench --bench throughput -- --list  # write the corpora out
//! python3 benches/report.py                           # tables of the last run
//! ```
//!
//! Groups, each reporting `Throughput::Bytes` of the records' total size:
//! - `cobs`: `cobsfile::cobs::encode`/`decode` over the corpus in 256 KiB chunks, with the
//!   `cobs` crate as a reference;
//! - `write`: cobsfile `Writer` vs apache-avro (schema `"bytes"`, `Codec::Null`; through serde
//!   and through `Value`) vs mcap (uncompressed chunks, one channel), all into a reused `Vec`;
//! - `read`: every record of an in-memory file, its length summed: cobsfile (slice and
//!   streaming readers), avro `Reader`, mcap `MessageStream` and `RawMessageStream`;
//! - `block_target`: cobsfile write and read at block targets from 64 KiB to 1 MiB.

use std::hint::black_box;
use std::sync::OnceLock;
use std::time::Duration;

use apache_avro::types::Value;
use apache_avro::{Codec, Schema};
use cobsfile::{cobs, WriterBuilder};
use criterion::{
    criterion_group, criterion_main, BenchmarkGroup, BenchmarkId, Criterion, SamplingMode,
    Throughput,
};

#[path = "corpus.rs"]
mod corpus;
#[path = "peers.rs"]
mod peers;

use corpus::{Corpus, Kind};

/// What one block's COBS body covers by default.
const COBS_CHUNK: usize = 256 * 1024;

/// Block targets compared in the `block_target` group.
const BLOCK_SIZES: [usize; 5] = [64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20];

/// The corpus `kind`, generated on first use and checked once.
fn corpus(kind: Kind) -> &'static Corpus {
    static CORPORA: [OnceLock<Corpus>; 3] = [const { OnceLock::new() }; 3];
    let slot = match kind {
        Kind::SmallJson => 0,
        Kind::LargeJson => 1,
        Kind::ZeroRich => 2,
    };
    CORPORA[slot].get_or_init(|| {
        let c = Corpus::generate(kind, corpus::corpus_bytes());
        if matches!(kind, Kind::SmallJson | Kind::LargeJson) {
            // Every 97th event must be valid JSON (all of them are; this keeps the check cheap).
            for i in (0..c.len()).step_by(97) {
                if let Err(e) = serde_json::from_slice::<serde_json::Value>(c.record(i)) {
                    panic!(
                        "{} record {i} is not JSON ({e}): {}",
                        kind.name(),
                        String::from_utf8_lossy(c.record(i))
                    );
                }
            }
        }
        eprintln!("corpus {}", c.describe());
        if let Some(dir) = std::env::var_os("COBSFILE_BENCH_DUMP") {
            // The records, concatenated, for inspection (e.g. `zstd -b3 large-json.bin`).
            let path = std::path::Path::new(&dir).join(format!("{}.bin", kind.name()));
            std::fs::write(&path, &c.data).expect("dump corpus");
        }
        c
    })
}

fn configure(group: &mut BenchmarkGroup<'_, criterion::measurement::WallTime>, c: &Corpus) {
    group.throughput(Throughput::Bytes(c.bytes()));
}

// ---------------------------------------------------------------------------------------------
// Writers and readers under test

fn write_cobsfile(c: &Corpus, block_target: usize, buf: &mut Vec<u8>) {
    buf.clear();
    let mut w = WriterBuilder::new()
        .block_target(block_target)
        .build(&mut *buf)
        .expect("header");
    for r in c.records() {
        w.write_record(r).expect("write");
    }
    w.finish().expect("finish");
}

/// Avro through `append_value_ref`, the `Value` API (one allocation per record).
fn write_avro_value(c: &Corpus, schema: &Schema, buf: &mut Vec<u8>) {
    buf.clear();
    let mut w = apache_avro::Writer::with_codec(schema, &mut *buf, Codec::Null);
    for r in c.records() {
        w.append_value_ref(&Value::Bytes(r.to_vec()))
            .expect("append");
    }
    w.into_inner().expect("flush");
}

fn write_mcap(c: &Corpus, buf: Vec<u8>) -> Vec<u8> {
    peers::write_mcap(c, mcap::WriteOptions::new().compression(None), buf)
}

fn read_mcap_raw(file: &[u8]) -> usize {
    let mut n = 0;
    for m in mcap::read::RawMessageStream::new(file).expect("mcap") {
        n += black_box(m.expect("message").data).len();
    }
    n
}

// ---------------------------------------------------------------------------------------------
// Groups

fn bench_cobs(cr: &mut Criterion) {
    let mut group = cr.benchmark_group("cobs");
    group.sampling_mode(SamplingMode::Flat);
    for kind in Kind::ALL {
        let c = corpus(kind);
        configure(&mut group, c);
        let chunks = c.chunks(COBS_CHUNK);

        // Encoded chunks, back to back, for the decoders; checked against the cobs crate.
        let mut encoded = Vec::with_capacity(cobs::max_encoded_len(c.data.len()) + chunks.len());
        let mut ranges = Vec::with_capacity(chunks.len());
        for r in &chunks {
            let start = encoded.len();
            cobs::encode(&c.data[r.clone()], &mut encoded);
            ranges.push(start..encoded.len());
        }
        for (r, e) in chunks.iter().zip(&ranges).step_by(16) {
            assert_eq!(::cobs::encode_vec(&c.data[r.clone()]), encoded[e.clone()]);
        }

        let mut out = Vec::with_capacity(cobs::max_encoded_len(COBS_CHUNK));
        group.bench_function(BenchmarkId::new("encode", kind.name()), |b| {
            b.iter(|| {
                let mut total = 0;
                for r in &chunks {
                    out.clear();
                    total += cobs::encode(&c.data[r.clone()], &mut out);
                }
                black_box(total)
            })
        });
        // The same number of chunks, all the first one: the block a writer encodes is in
        // cache (it was just assembled), which the pass over 100 MB above is not.
        let first = chunks[0].clone();
        group.bench_function(BenchmarkId::new("encode-cached", kind.name()), |b| {
            b.iter(|| {
                let mut total = 0;
                for _ in &chunks {
                    out.clear();
                    total += cobs::encode(&c.data[first.clone()], &mut out);
                }
                black_box(total)
            })
        });
        group.bench_function(BenchmarkId::new("decode", kind.name()), |b| {
            b.iter(|| {
                let mut total = 0;
                for r in &ranges {
                    cobs::decode(&encoded[r.clone()], &mut out).expect("valid");
                    total += out.len();
                }
                black_box(total)
            })
        });

        // Reference: the `cobs` crate, into a preallocated slice.
        let mut dest = vec![0; cobs::max_encoded_len(COBS_CHUNK)];
        group.bench_function(BenchmarkId::new("encode-cobs-crate", kind.name()), |b| {
            b.iter(|| {
                let mut total = 0;
                for r in &chunks {
                    total += ::cobs::encode(&c.data[r.clone()], &mut dest);
                }
                black_box(total)
            })
        });
        group.bench_function(BenchmarkId::new("decode-cobs-crate", kind.name()), |b| {
            b.iter(|| {
                let mut total = 0;
                for r in &ranges {
                    let report = ::cobs::decode(&encoded[r.clone()], &mut dest).expect("valid");
                    total += report.frame_size();
                }
                black_box(total)
            })
        });
    }
    group.finish();
}

fn bench_write(cr: &mut Criterion) {
    let mut group = cr.benchmark_group("write");
    group.sampling_mode(SamplingMode::Flat);
    let schema = peers::avro_schema();
    for kind in Kind::ALL {
        let c = corpus(kind);
        configure(&mut group, c);
        let mut buf = Vec::new();
        group.bench_function(BenchmarkId::new("cobsfile", kind.name()), |b| {
            b.iter(|| {
                peers::write_cobsfile_default(c, &mut buf);
                black_box(buf.len())
            })
        });
        group.bench_function(BenchmarkId::new("avro", kind.name()), |b| {
            b.iter(|| {
                peers::write_avro_serde(c, &schema, &mut buf);
                black_box(buf.len())
            })
        });
        group.bench_function(BenchmarkId::new("avro-value", kind.name()), |b| {
            b.iter(|| {
                write_avro_value(c, &schema, &mut buf);
                black_box(buf.len())
            })
        });
        let mut mcap_buf = Some(Vec::new());
        group.bench_function(BenchmarkId::new("mcap", kind.name()), |b| {
            b.iter(|| {
                let out = write_mcap(c, mcap_buf.take().unwrap_or_default());
                black_box(out.len());
                mcap_buf = Some(out);
            })
        });
    }
    group.finish();
}

fn bench_read(cr: &mut Criterion) {
    let mut group = cr.benchmark_group("read");
    group.sampling_mode(SamplingMode::Flat);
    let schema = peers::avro_schema();
    for kind in Kind::ALL {
        let c = corpus(kind);
        configure(&mut group, c);
        let total = c.data.len();

        let mut cobsfile = Vec::new();
        peers::write_cobsfile_default(c, &mut cobsfile);
        assert_eq!(peers::read_cobsfile_slice(&cobsfile), total);
        assert_eq!(peers::read_cobsfile_stream(&cobsfile), total);
        group.bench_function(BenchmarkId::new("cobsfile", kind.name()), |b| {
            b.iter(|| peers::read_cobsfile_slice(&cobsfile))
        });
        group.bench_function(BenchmarkId::new("cobsfile-stream", kind.name()), |b| {
            b.iter(|| peers::read_cobsfile_stream(&cobsfile))
        });
        drop(cobsfile);

        let mut avro = Vec::new();
        peers::write_avro_serde(c, &schema, &mut avro);
        assert_eq!(peers::read_avro(&avro), total);
        group.bench_function(BenchmarkId::new("avro", kind.name()), |b| {
            b.iter(|| peers::read_avro(&avro))
        });
        drop(avro);

        let mcap = write_mcap(c, Vec::new());
        assert_eq!(peers::read_mcap(&mcap), total);
        assert_eq!(read_mcap_raw(&mcap), total);
        group.bench_function(BenchmarkId::new("mcap", kind.name()), |b| {
            b.iter(|| peers::read_mcap(&mcap))
        });
        group.bench_function(BenchmarkId::new("mcap-raw", kind.name()), |b| {
            b.iter(|| read_mcap_raw(&mcap))
        });
    }
    group.finish();
}

fn bench_block_size(cr: &mut Criterion) {
    let mut group = cr.benchmark_group("block_target");
    group.sampling_mode(SamplingMode::Flat);
    for kind in [Kind::SmallJson, Kind::LargeJson] {
        let c = corpus(kind);
        configure(&mut group, c);
        let mut buf = Vec::new();
        for size in BLOCK_SIZES {
            let label = format!("{}KiB", size >> 10);
            group.bench_function(
                BenchmarkId::new(format!("write/{}", kind.name()), &label),
                |b| {
                    b.iter(|| {
                        write_cobsfile(c, size, &mut buf);
                        black_box(buf.len())
                    })
                },
            );
            write_cobsfile(c, size, &mut buf);
            let file = std::mem::take(&mut buf);
            assert_eq!(peers::read_cobsfile_slice(&file), c.data.len());
            group.bench_function(
                BenchmarkId::new(format!("read/{}", kind.name()), &label),
                |b| b.iter(|| peers::read_cobsfile_slice(&file)),
            );
            buf = file;
        }
    }
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(1500))
        .measurement_time(Duration::from_secs(3))
        .noise_threshold(0.03)
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_cobs, bench_write, bench_read, bench_block_size
}
criterion_main!(benches);
