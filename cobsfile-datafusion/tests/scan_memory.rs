//! What a SQL scan of typed records holds at once is bounded by the file and the limits, never
//! by what a record's bytes claim: crafted records (a string of 400 MiB, an array of 2^22
//! longs, a map of 2^22 entries, each in a few bytes) and typed files
//! altered anywhere cost a scan about what an intact file of the same size costs.
//!
//! One test function: the allocator counts every thread of the process.

#[path = "../../tests/counting/mod.rs"]
mod counting;

use cobsfile::avro::WriterSchema;
use cobsfile::{Writer, WriterBuilder};
use cobsfile_datafusion::{CobsfileContext, CobsfileOptions, RecordFormat};
use counting::{peak_bytes, reset_peak};
use datafusion::prelude::{SessionConfig, SessionContext};
use proptest::test_runner::{Config, TestRunner};

const SCHEMA: &str = r#"{"type":"record","name":"R","fields":[
    {"name":"a","type":"long"},
    {"name":"s","type":"string"},
    {"name":"l","type":{"type":"array","items":"long"}},
    {"name":"m","type":{"type":"map","values":"long"}}]}"#;

/// A zig-zag varint of `n`.
fn long(n: i64) -> Vec<u8> {
    let mut out = Vec::new();
    cobsfile::varint::write(n, &mut out);
    out
}

/// A typed file of `datums` (each the bytes of one record after its prefix), unchecked.
fn typed(datums: &[Vec<u8>], block_target: usize) -> Vec<u8> {
    let schema = WriterSchema::parse(SCHEMA).unwrap();
    let mut writer: Writer<Vec<u8>> = WriterBuilder::new()
        .block_target(block_target)
        .build(Vec::new())
        .unwrap();
    let [(k1, v1), (k2, v2)] = schema.metadata();
    writer.write_metadata([(k1, v1), (k2, v2)]).unwrap();
    for datum in datums {
        let mut record = schema.prefix().to_vec();
        record.extend_from_slice(datum);
        writer.write_record(&record).unwrap();
    }
    writer.finish().unwrap()
}

/// A valid datum: `a` = i, `s` = "xyzw", `l` = [i, i], `m` = {"k": i}.
fn datum(i: i64) -> Vec<u8> {
    let mut d = long(i);
    d.extend([8, b'x', b'y', b'z', b'w']);
    d.extend(long(2));
    d.extend(long(i));
    d.extend(long(i));
    d.push(0);
    d.extend([2, 2, b'k']);
    d.extend(long(i));
    d.push(0);
    d
}

/// Runs `SELECT *` over `bytes` as typed records on `partitions` partitions, and returns the
/// rows (or the error) and the most bytes held at once while it ran.
fn scan(bytes: &[u8], partitions: usize) -> (Result<usize, String>, u64) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("x.cobs"), bytes).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    reset_peak();
    let before = peak_bytes();
    let rows = runtime.block_on(async {
        let config = SessionConfig::new()
            .with_target_partitions(partitions)
            .with_repartition_file_min_size(1);
        let ctx = SessionContext::new_with_config(config);
        let path = format!("{}/x.cobs", dir.path().display());
        let options = CobsfileOptions::new().records(RecordFormat::Avro);
        ctx.register_cobsfile("t", &path, options)
            .await
            .map_err(|e| e.to_string())?;
        let batches = ctx
            .sql("SELECT a, s, l, m FROM t")
            .await
            .map_err(|e| e.to_string())?
            .collect()
            .await
            .map_err(|e| e.to_string())?;
        Ok(batches.iter().map(|b| b.num_rows()).sum())
    });
    (rows, peak_bytes() - before)
}

#[test]
fn a_typed_scan_holds_what_the_file_allows() {
    let intact: Vec<Vec<u8>> = (0..200).map(datum).collect();
    let intact_file = typed(&intact, 400);
    let (rows, baseline) = scan(&intact_file, 2);
    assert_eq!(rows, Ok(200));
    // What any scan of a small file may hold beyond an intact one's: the limits' worth of
    // values of one datum, and room for the plan's own variation.
    let bound = |file: &[u8]| 2 * baseline + 32 * file.len() as u64 + (32 << 20);

    let mut crafted = Vec::new();
    // `s`: a string of 400 MiB, in 5 bytes.
    let mut d = long(1);
    d.extend(long(400 << 20));
    d.extend(b"abc");
    crafted.push(("a string of 400 MiB", d));
    // `l`: 2^22 longs of one byte each, but only 3 of them.
    let mut d = long(1);
    d.extend([0]);
    d.extend(long(4 << 20));
    d.extend([2, 4, 6]);
    crafted.push(("an array of 2^22 longs", d));
    // `m`: 2^22 entries, one present.
    let mut d = long(1);
    d.extend([0, 0]);
    d.extend(long(4 << 20));
    d.extend([2, b'k', 2]);
    crafted.push(("a map of 2^22 entries", d));
    for (what, bad) in crafted {
        let mut datums = intact[..100].to_vec();
        datums.push(bad);
        datums.extend_from_slice(&intact[100..]);
        let file = typed(&datums, 400);
        for partitions in [1, 2] {
            let (rows, peak) = scan(&file, partitions);
            assert!(
                peak <= bound(&file),
                "{what}: a scan held {peak} bytes at once (an intact file: {baseline})"
            );
            // The crafted record is refused, naming it (a record a writer wrote wrong fails
            // the query, as the scan's policy is), or left out alone.
            match rows {
                Ok(rows) => assert_eq!(rows, 200, "{what}"),
                Err(e) => assert!(e.contains("record 1 of the block"), "{what}: {e}"),
            }
        }
    }

    // Typed files changed anywhere, the CRCs left to catch it or not.
    let mut runner = TestRunner::new(Config {
        cases: 48,
        ..Config::default()
    });
    let edits = proptest::collection::vec((0.0f64..1.0, proptest::num::u8::ANY), 1..8);
    runner
        .run(&(edits, 1usize..3), |(edits, partitions)| {
            let mut file = intact_file.clone();
            for (at, byte) in edits {
                let at = ((at * file.len() as f64) as usize).min(file.len() - 1);
                file[at] = byte;
            }
            let (_, peak) = scan(&file, partitions);
            proptest::prop_assert!(
                peak <= bound(&file),
                "an altered file: a scan held {} bytes at once (an intact file: {})",
                peak,
                baseline
            );
            Ok(())
        })
        .unwrap();
}
