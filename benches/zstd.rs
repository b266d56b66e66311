//! zstd-compressed cobsfile against raw zstd on the same chunks and against its peers with
//! zstd (Avro object container files, MCAP), in memory, single-threaded; and a level sweep.
//!
//! ```text
//! cargo bench --bench zstd                         # everything, about 6 minutes on 2 cores
//! cargo bench --bench zstd -- '^zstd-read/'        # one group (a regex on the ids)
//! COBSFILE_BENCH_MB=10 cargo bench --bench zstd    # 10 MB corpora for a quick look
//! python3 benches/zstd_report.py                   # tables of the last run
//! COBSFILE_BENCH_LEN32=/tmp/large-json.len32 cargo bench --bench zstd
//!     # writes the large-JSON corpus as a len32 stream (4-byte little-endian length, then
//!     # the record) and exits without benchmarking; benches/pipe_table.py uses it
//!     # (COBSFILE_BENCH_LEN32_CORPUS=small-json or zero-rich for another corpus)
//! ```
//!
//! Groups, each reporting `Throughput::Bytes` of the records' total size:
//! - `zstd-write` (level 3): cobsfile `WriterBuilder::compression(Compression::zstd(3))` with
//!   default 256 KiB blocks, into a reused `Vec`; `raw-zstd`, the baseline: the same records,
//!   already concatenated, cut into the same chunks as cobsfile's blocks, each compressed by
//!   `CCtx::compress2` of one reused context into one reused buffer; Avro `Codec::Zstandard`
//!   (level 3, default 16,000-byte blocks, `append_ser`); MCAP zstd chunks (level 3, default
//!   1 MiB chunks, `compression_threads(0)`, one channel).
//! - `zstd-read`: every record of the in-memory file, its length summed: cobsfile slice and
//!   streaming readers; `raw-zstd`: `DCtx::decompress` of each chunk of the baseline with one
//!   reused context into one reused buffer; Avro `Reader`; MCAP `MessageStream`.
//! - `zstd-level`: cobsfile write and slice read of the first 20 MB of large JSON
//!   (`COBSFILE_BENCH_SWEEP_MB`) at levels -7 to 19.
//!
//! Compressed sizes are printed and saved to `zstd-sizes.json` next to criterion's results
//! (`$CRITERION_HOME`, else `$CARGO_TARGET_DIR/criterion`, else `target/criterion`), with the
//! load average at the start and end of the run. Sizes of a few configurations that are not
//! timed are recorded as well: Avro and MCAP with 256 KiB blocks/chunks, the same as
//! cobsfile's, to separate block size from format overhead.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::io::Write as _;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use apache_avro::ZstandardSettings;
use apache_avro::{Codec, Schema};
use cobsfile::{
    varint, BlockType, Compression, ReaderBuilder, WriterBuilder, DEFAULT_BLOCK_TARGET,
};
use criterion::{BenchmarkGroup, BenchmarkId, Criterion, SamplingMode, Throughput};
use zstd::zstd_safe::{self, CCtx, CParameter, DCtx};

#[path = "corpus.rs"]
mod corpus;
#[path = "peers.rs"]
mod peers;

use corpus::{Corpus, Kind};

/// The level compared with the peers and the raw baseline.
const LEVEL: i32 = 3;

/// Levels of the sweep.
const SWEEP: [i32; 9] = [-7, -3, -1, 1, 2, 3, 5, 9, 19];

/// Megabytes of large JSON in the sweep unless `COBSFILE_BENCH_SWEEP_MB` says otherwise
/// (level 19 compresses a few MB/s: 10 passes over 100 MB would take minutes).
const SWEEP_MB: f64 = 20.0;

/// The corpus `kind`, generated on first use.
fn corpus(kind: Kind) -> &'static Corpus {
    static CORPORA: [OnceLock<Corpus>; 3] = [const { OnceLock::new() }; 3];
    let slot = match kind {
        Kind::SmallJson => 0,
        Kind::LargeJson => 1,
        Kind::ZeroRich => 2,
    };
    CORPORA[slot].get_or_init(|| {
        let c = Corpus::generate(kind, corpus::corpus_bytes());
        eprintln!("corpus {}", c.describe());
        c
    })
}

/// The first `COBSFILE_BENCH_SWEEP_MB` megabytes (default 20) of the large-JSON corpus.
fn sweep_corpus() -> &'static Corpus {
    static CORPUS: OnceLock<Corpus> = OnceLock::new();
    CORPUS.get_or_init(|| {
        let mb = std::env::var("COBSFILE_BENCH_SWEEP_MB")
            .ok()
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|&mb| mb > 0.0)
            .unwrap_or(SWEEP_MB);
        let bytes = ((mb * 1e6) as usize).min(corpus::corpus_bytes());
        let c = Corpus::generate(Kind::LargeJson, bytes);
        eprintln!("sweep corpus {}", c.describe());
        c
    })
}

// ---------------------------------------------------------------------------------------------
// Compressed sizes

/// Record bytes and compressed bytes of each configuration, by benchmark id.
static SIZES: Mutex<BTreeMap<String, (u64, u64)>> = Mutex::new(BTreeMap::new());

/// Records the size of one configuration's output (once per id) and prints its ratio.
fn record_size(id: &str, raw: u64, compressed: usize) {
    let mut sizes = SIZES.lock().expect("sizes");
    if sizes
        .insert(id.to_owned(), (raw, compressed as u64))
        .is_none()
    {
        eprintln!(
            "size {id}: {raw} -> {compressed} bytes, ratio {:.4}",
            raw as f64 / compressed as f64
        );
    }
}

fn criterion_dir() -> PathBuf {
    if let Some(home) = std::env::var_os("CRITERION_HOME") {
        return home.into();
    }
    let target = std::env::var_os("CARGO_TARGET_DIR").unwrap_or_else(|| "target".into());
    PathBuf::from(target).join("criterion")
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Merges this run's sizes into `zstd-sizes.json` (a filtered run keeps the others' entries).
fn save_sizes(load_start: &str) {
    let sizes = SIZES.lock().expect("sizes");
    if sizes.is_empty() {
        return;
    }
    let path = criterion_dir().join("zstd-sizes.json");
    let mut all: serde_json::Map<String, serde_json::Value> = std::fs::read(&path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let entries = all
        .entry("sizes")
        .or_insert_with(|| serde_json::json!({}))
        .as_object_mut()
        .expect("sizes object");
    for (id, (raw, compressed)) in sizes.iter() {
        entries.insert(id.clone(), serde_json::json!([raw, compressed]));
    }
    all.insert(
        "load".into(),
        serde_json::json!({ "start": load_start, "end": loadavg() }),
    );
    let _ = std::fs::create_dir_all(criterion_dir());
    let text = serde_json::to_string_pretty(&all).expect("json");
    if let Err(e) = std::fs::write(&path, text) {
        eprintln!("could not write {}: {e}", path.display());
    } else {
        eprintln!("sizes saved to {}", path.display());
    }
}

// ---------------------------------------------------------------------------------------------
// Writers and readers under test

fn write_cobsfile(c: &Corpus, level: Option<i32>, buf: &mut Vec<u8>) {
    let mut builder = WriterBuilder::new();
    if let Some(level) = level {
        builder = builder.compression(Compression::zstd(level).expect("level"));
    }
    write_cobsfile_with(c, builder, buf);
}

fn write_cobsfile_with(c: &Corpus, builder: WriterBuilder, buf: &mut Vec<u8>) {
    buf.clear();
    let mut w = builder.build(&mut *buf).expect("header");
    for r in c.records() {
        w.write_record(r).expect("write");
    }
    w.finish().expect("finish");
}

/// The records cobsfile's default writer puts in each data block, as index ranges.
fn block_records(c: &Corpus) -> Vec<Range<usize>> {
    let mut file = Vec::new();
    write_cobsfile(c, None, &mut file);
    let mut reader = ReaderBuilder::new().from_slice(&file);
    let mut blocks = Vec::new();
    let mut start = 0;
    while let Some(block) = reader.next_block() {
        let block = block.expect("intact");
        if block.info().block_type == BlockType::Data {
            let end = start + block.info().items.expect("count") as usize;
            blocks.push(start..end);
            start = end;
        }
    }
    assert_eq!(start, c.len());
    blocks
}

/// The bytes of `c.data` holding the records `records`.
fn byte_range(c: &Corpus, records: &Range<usize>) -> Range<usize> {
    let start = match records.start {
        0 => 0,
        i => c.ends[i - 1],
    };
    start..c.ends[records.end - 1]
}

/// The ranges of `c.data` that cobsfile's default writer puts in each data block: the
/// records of each block, concatenated (without their length prefixes).
fn block_chunks(c: &Corpus) -> Vec<Range<usize>> {
    block_records(c).iter().map(|r| byte_range(c, r)).collect()
}

/// The payloads cobsfile compresses, block by block: the record count, then each record's
/// length and bytes (varints). With `columnar`, the count, then every length, then every
/// record (a layout cobsfile does not have, for comparison).
fn block_payloads(c: &Corpus, columnar: bool) -> Vec<Vec<u8>> {
    block_records(c)
        .iter()
        .map(|records| {
            let mut payload = Vec::new();
            varint::write(records.len() as i64, &mut payload);
            for i in records.clone() {
                varint::write(c.record(i).len() as i64, &mut payload);
                if !columnar {
                    payload.extend_from_slice(c.record(i));
                }
            }
            if columnar {
                payload.extend_from_slice(&c.data[byte_range(c, records)]);
            }
            payload
        })
        .collect()
}

/// The raw baseline's compressor: one context at `level`, reused for every chunk.
fn raw_cctx(level: i32) -> CCtx<'static> {
    let mut cctx = CCtx::create();
    cctx.set_parameter(CParameter::CompressionLevel(level))
        .expect("level");
    cctx
}

/// A level-3 compressor with the parameters zstd picks for inputs over 256 KiB or of unknown
/// size (`zstd/lib/compress/clevels.h`, default table, level 3), set explicitly. Given a
/// 256 KiB input, `compress2` would use its table for inputs up to 256 KiB instead (window
/// 2^18, chain 2^16, hash 2^16, search 1, min match 4, dfast): the tables differ in the window,
/// which cannot matter within one 256 KiB frame, the hash size and the minimum match length.
fn large_table_cctx() -> CCtx<'static> {
    let mut cctx = raw_cctx(3);
    for p in [
        CParameter::WindowLog(21),
        CParameter::ChainLog(16),
        CParameter::HashLog(17),
        CParameter::SearchLog(1),
        CParameter::MinMatch(5),
        CParameter::TargetLength(0),
        CParameter::Strategy(zstd_safe::Strategy::ZSTD_dfast),
    ] {
        cctx.set_parameter(p).expect("parameter");
    }
    cctx
}

/// Compresses every chunk into `frame` (reused); returns the total compressed size.
fn write_raw<'a>(
    chunks: impl IntoIterator<Item = &'a [u8]>,
    cctx: &mut CCtx,
    frame: &mut Vec<u8>,
) -> usize {
    let mut total = 0;
    for chunk in chunks {
        frame.clear();
        total += cctx.compress2(frame, chunk).expect("compress");
        black_box(&frame[..]);
    }
    total
}

/// The chunks compressed with `cctx`, back to back, and where each lies.
fn raw_frames<'a>(
    chunks: impl IntoIterator<Item = &'a [u8]>,
    mut cctx: CCtx<'static>,
) -> (Vec<u8>, Vec<Range<usize>>) {
    let mut frames = Vec::new();
    let mut ranges = Vec::new();
    let mut frame = Vec::with_capacity(zstd_safe::compress_bound(2 * DEFAULT_BLOCK_TARGET));
    for chunk in chunks {
        frame.clear();
        cctx.compress2(&mut frame, chunk).expect("compress");
        let start = frames.len();
        frames.extend_from_slice(&frame);
        ranges.push(start..frames.len());
    }
    (frames, ranges)
}

/// Decompresses every frame into `out` (reused, with room for a chunk); returns the bytes.
fn read_raw(frames: &[u8], ranges: &[Range<usize>], dctx: &mut DCtx, out: &mut Vec<u8>) -> usize {
    let mut n = 0;
    for r in ranges {
        out.clear();
        n += dctx
            .decompress(out, &frames[r.clone()])
            .expect("decompress");
        black_box(&out[..]);
    }
    n
}

fn avro_codec() -> Codec {
    Codec::Zstandard(ZstandardSettings::new(LEVEL as u8))
}

/// Avro with its Zstandard codec at `LEVEL`, in blocks of `block_target` bytes (`None`: its
/// default, 16,000), through `append_ser` (no copy before the encoder).
fn write_avro(c: &Corpus, schema: &Schema, block_target: Option<usize>, buf: &mut Vec<u8>) {
    buf.clear();
    let mut w = match block_target {
        None => apache_avro::Writer::with_codec(schema, &mut *buf, avro_codec()),
        Some(size) => apache_avro::Writer::builder()
            .schema(schema)
            .writer(&mut *buf)
            .codec(avro_codec())
            .block_size(size)
            .build(),
    };
    for r in c.records() {
        w.append_ser(serde_bytes::Bytes::new(r)).expect("append");
    }
    w.into_inner().expect("flush");
}

/// MCAP with zstd chunks at `LEVEL` on the calling thread, of `chunk_size` bytes (`None`: its
/// default, 1 MiB).
fn write_mcap(c: &Corpus, chunk_size: Option<u64>, buf: Vec<u8>) -> Vec<u8> {
    let mut options = mcap::WriteOptions::new()
        .compression(Some(mcap::Compression::Zstd))
        .compression_level(LEVEL as u32)
        .compression_threads(0);
    if let Some(size) = chunk_size {
        options = options.chunk_size(Some(size));
    }
    peers::write_mcap(c, options, buf)
}

// ---------------------------------------------------------------------------------------------
// Groups

type Group<'a> = BenchmarkGroup<'a, criterion::measurement::WallTime>;

fn new_group<'a>(cr: &'a mut Criterion, name: &str) -> Group<'a> {
    let mut group = cr.benchmark_group(name);
    group.sampling_mode(SamplingMode::Flat);
    group
}

/// Times `write`, which returns its output's size, and records that size once as
/// `name/function/parameter`.
fn timed_write(
    group: &mut Group<'_>,
    name: &str,
    (function, parameter): (&str, &str),
    raw: u64,
    mut write: impl FnMut() -> usize,
) {
    let full = format!("{name}/{function}/{parameter}");
    let mut recorded = false;
    group.bench_function(BenchmarkId::new(function, parameter), |b| {
        b.iter(|| {
            let size = write();
            if !recorded {
                record_size(&full, raw, size);
                recorded = true;
            }
            black_box(size)
        })
    });
}

/// Times `read` over the input `setup` makes, once, when the benchmark is selected (the
/// routine criterion calls only runs for ids that pass the filter).
fn timed_read<T>(
    group: &mut Group<'_>,
    (function, parameter): (&str, &str),
    total: usize,
    setup: impl FnOnce() -> T,
    mut read: impl FnMut(&mut T) -> usize,
) {
    let mut setup = Some(setup);
    let mut input: Option<T> = None;
    group.bench_function(BenchmarkId::new(function, parameter), |b| {
        let input = input.get_or_insert_with(|| {
            let mut input = (setup.take().expect("setup runs once"))();
            assert_eq!(
                read(&mut input),
                total,
                "{function}/{parameter} reads everything"
            );
            input
        });
        b.iter(|| read(input))
    });
}

/// Sizes only: cobsfile at level 3 with larger blocks, and with a dictionary trained on the
/// first megabyte of records (about 1 % of the corpus) and embedded in the file.
fn cobsfile_variant_sizes(c: &Corpus, group: &str) {
    let name = c.kind.name();
    let zstd = Compression::zstd(LEVEL).expect("level");
    let mut buf = Vec::new();
    for (label, size) in [("512KiB", 512 << 10), ("1MiB", 1 << 20)] {
        let builder = WriterBuilder::new().compression(zstd).block_target(size);
        write_cobsfile_with(c, builder, &mut buf);
        record_size(
            &format!("{group}/cobsfile-{label}/{name}"),
            c.bytes(),
            buf.len(),
        );
    }
    let first_mb = c.ends.iter().take_while(|&&end| end < 1_000_000).count() + 1;
    let samples: Vec<&[u8]> = c.records().take(first_mb).collect();
    let dictionary = cobsfile::Dictionary::train(&samples, 112_640).expect("train");
    let builder = WriterBuilder::new()
        .compression(zstd)
        .dictionary(dictionary, true);
    write_cobsfile_with(c, builder, &mut buf);
    record_size(
        &format!("{group}/cobsfile-dict/{name}"),
        c.bytes(),
        buf.len(),
    );
}

fn bench_write(cr: &mut Criterion) {
    const NAME: &str = "zstd-write";
    let mut group = new_group(cr, NAME);
    let schema = peers::avro_schema();
    for kind in Kind::ALL {
        let c = corpus(kind);
        group.throughput(Throughput::Bytes(c.bytes()));
        let name = kind.name();

        let mut buf = Vec::new();
        let mut once = true;
        timed_write(&mut group, NAME, ("cobsfile", name), c.bytes(), || {
            if std::mem::take(&mut once) {
                cobsfile_variant_sizes(c, NAME);
            }
            write_cobsfile(c, Some(LEVEL), &mut buf);
            buf.len()
        });

        let mut cctx = raw_cctx(LEVEL);
        let mut frame = Vec::with_capacity(zstd_safe::compress_bound(2 * DEFAULT_BLOCK_TARGET));
        let mut chunks = None;
        timed_write(&mut group, NAME, ("raw-zstd", name), c.bytes(), || {
            let chunks = chunks.get_or_insert_with(|| block_chunks(c));
            write_raw(
                chunks.iter().map(|r| &c.data[r.clone()]),
                &mut cctx,
                &mut frame,
            )
        });

        // The exact payloads cobsfile compresses (lengths interleaved with the records).
        let mut payloads = None;
        timed_write(
            &mut group,
            NAME,
            ("raw-zstd-payload", name),
            c.bytes(),
            || {
                let payloads = payloads.get_or_insert_with(|| {
                    // Size only: the lengths stored apart from the records.
                    let columnar = block_payloads(c, true);
                    let (frames, _) = raw_frames(columnar.iter().map(|p| &p[..]), raw_cctx(LEVEL));
                    let id = format!("{NAME}/raw-zstd-columnar/{name}");
                    record_size(&id, c.bytes(), frames.len());
                    block_payloads(c, false)
                });
                write_raw(payloads.iter().map(|p| &p[..]), &mut cctx, &mut frame)
            },
        );

        // The same payloads with zstd's parameters for large inputs (level 3 only).
        let mut large = large_table_cctx();
        let mut payloads = None;
        let id = ("raw-zstd-payload-large-table", name);
        timed_write(&mut group, NAME, id, c.bytes(), || {
            let payloads = payloads.get_or_insert_with(|| {
                // Size only: the raw chunks with those parameters.
                let chunks = block_chunks(c);
                let chunks = chunks.iter().map(|r| &c.data[r.clone()]);
                let (frames, _) = raw_frames(chunks, large_table_cctx());
                let id = format!("{NAME}/raw-zstd-large-table/{name}");
                record_size(&id, c.bytes(), frames.len());
                block_payloads(c, false)
            });
            write_raw(payloads.iter().map(|p| &p[..]), &mut large, &mut frame)
        });

        let mut once = true;
        timed_write(&mut group, NAME, ("avro", name), c.bytes(), || {
            if std::mem::take(&mut once) {
                // Size only: Avro with cobsfile's block size.
                write_avro(c, &schema, Some(DEFAULT_BLOCK_TARGET), &mut buf);
                record_size(&format!("{NAME}/avro-256KiB/{name}"), c.bytes(), buf.len());
            }
            write_avro(c, &schema, None, &mut buf);
            buf.len()
        });

        let mut mcap_buf = Some(Vec::new());
        let mut once = true;
        timed_write(&mut group, NAME, ("mcap", name), c.bytes(), || {
            if std::mem::take(&mut once) {
                // Size only: MCAP with cobsfile's block size.
                let out = write_mcap(c, Some(DEFAULT_BLOCK_TARGET as u64), Vec::new());
                record_size(&format!("{NAME}/mcap-256KiB/{name}"), c.bytes(), out.len());
            }
            let out = write_mcap(c, None, mcap_buf.take().unwrap_or_default());
            let len = out.len();
            mcap_buf = Some(out);
            len
        });
    }
    group.finish();
}

fn bench_read(cr: &mut Criterion) {
    let mut group = new_group(cr, "zstd-read");
    let schema = peers::avro_schema();
    for kind in Kind::ALL {
        let c = corpus(kind);
        group.throughput(Throughput::Bytes(c.bytes()));
        let name = kind.name();
        let total = c.data.len();
        let cobsfile = || {
            let mut file = Vec::new();
            write_cobsfile(c, Some(LEVEL), &mut file);
            file
        };
        timed_read(&mut group, ("cobsfile", name), total, cobsfile, |f| {
            peers::read_cobsfile_slice(f)
        });
        timed_read(
            &mut group,
            ("cobsfile-stream", name),
            total,
            cobsfile,
            |f| peers::read_cobsfile_stream(f),
        );
        let raw = || {
            let chunks = block_chunks(c);
            let (frames, ranges) =
                raw_frames(chunks.iter().map(|r| &c.data[r.clone()]), raw_cctx(LEVEL));
            let out = Vec::with_capacity(2 * DEFAULT_BLOCK_TARGET);
            (frames, ranges, DCtx::create(), out)
        };
        timed_read(&mut group, ("raw-zstd", name), total, raw, |input| {
            let (frames, ranges, dctx, out) = input;
            read_raw(frames, ranges, dctx, out)
        });
        let payloads = || {
            let payloads = block_payloads(c, false);
            let (frames, ranges) = raw_frames(payloads.iter().map(|p| &p[..]), raw_cctx(LEVEL));
            // What the readers count: record bytes, not the lengths in the payloads.
            let framing = payloads.iter().map(Vec::len).sum::<usize>() - total;
            let out = Vec::with_capacity(2 * DEFAULT_BLOCK_TARGET);
            (frames, ranges, DCtx::create(), out, framing)
        };
        timed_read(
            &mut group,
            ("raw-zstd-payload", name),
            total,
            payloads,
            |input| {
                let (frames, ranges, dctx, out, framing) = input;
                read_raw(frames, ranges, dctx, out) - *framing
            },
        );
        let large = || {
            let payloads = block_payloads(c, false);
            let (frames, ranges) = raw_frames(payloads.iter().map(|p| &p[..]), large_table_cctx());
            let framing = payloads.iter().map(Vec::len).sum::<usize>() - total;
            let out = Vec::with_capacity(2 * DEFAULT_BLOCK_TARGET);
            (frames, ranges, DCtx::create(), out, framing)
        };
        let id = ("raw-zstd-payload-large-table", name);
        timed_read(&mut group, id, total, large, |input| {
            let (frames, ranges, dctx, out, framing) = input;
            read_raw(frames, ranges, dctx, out) - *framing
        });
        let avro = || {
            let mut file = Vec::new();
            write_avro(c, &schema, None, &mut file);
            file
        };
        timed_read(&mut group, ("avro", name), total, avro, |f| {
            peers::read_avro(f)
        });
        let mcap = || write_mcap(c, None, Vec::new());
        timed_read(&mut group, ("mcap", name), total, mcap, |f| {
            peers::read_mcap(f)
        });
    }
    group.finish();
}

fn bench_levels(cr: &mut Criterion) {
    const NAME: &str = "zstd-level";
    let mut group = new_group(cr, NAME);
    let c = sweep_corpus();
    group.throughput(Throughput::Bytes(c.bytes()));
    let total = c.data.len();
    let write = format!("write/{}", c.kind.name());
    let read = format!("read/{}", c.kind.name());
    let mut buf = Vec::new();
    for level in SWEEP {
        let label = format!("L{level}");
        timed_write(&mut group, NAME, (&write, &label), c.bytes(), || {
            write_cobsfile(c, Some(level), &mut buf);
            buf.len()
        });
        let file = || {
            let mut file = Vec::new();
            write_cobsfile(c, Some(level), &mut file);
            file
        };
        timed_read(&mut group, (&read, &label), total, file, |f| {
            peers::read_cobsfile_slice(f)
        });
    }
    group.finish();
}

/// Writes a corpus (large JSON unless `COBSFILE_BENCH_LEN32_CORPUS` names another) to `path`
/// as a len32 stream: each record as a 4-byte little-endian length and the record, as
/// `cobsfile pack --framing len32` reads it.
fn dump_len32(path: &std::ffi::OsStr) {
    let name = std::env::var("COBSFILE_BENCH_LEN32_CORPUS");
    let name = name.as_deref().unwrap_or("large-json");
    let kind = Kind::ALL
        .into_iter()
        .find(|k| k.name() == name)
        .unwrap_or_else(|| panic!("no corpus named {name:?}"));
    let c = corpus(kind);
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).expect("create"));
    for r in c.records() {
        out.write_all(&(r.len() as u32).to_le_bytes())
            .expect("write");
        out.write_all(r).expect("write");
    }
    out.flush().expect("flush");
    eprintln!(
        "wrote {} records, {} record bytes, to {}",
        c.len(),
        c.bytes(),
        std::path::Path::new(path).display()
    );
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .noise_threshold(0.03)
}

fn main() {
    if let Some(path) = std::env::var_os("COBSFILE_BENCH_LEN32") {
        dump_len32(&path);
        return;
    }
    let load_start = loadavg();
    eprintln!("load average at start: {load_start}");
    let mut cr = config().configure_from_args();
    bench_write(&mut cr);
    bench_read(&mut cr);
    bench_levels(&mut cr);
    cr.final_summary();
    eprintln!("load average at end: {}", loadavg());
    save_sizes(&load_start);
}
