//! However DataFusion cuts files into byte ranges, a scan returns exactly the records a full
//! read of each file by the library returns: every intact record once, nothing from damage.

use std::collections::BTreeMap;

use cobsfile::{BlockType, Compression, ReaderBuilder, WriterBuilder};
use cobsfile_datafusion::{CobsfileContext, CobsfileOptions, RecordFormat};
use datafusion::arrow::array::{Array, BinaryArray, StringArray, UInt64Array};
use datafusion::prelude::{SessionConfig, SessionContext};
use proptest::prelude::*;

/// (file, block offset, place in block) -> record, as the library reads each file whole.
type Rows = BTreeMap<(String, u64, u64), Vec<u8>>;

fn library_rows(name: &str, bytes: &[u8]) -> Rows {
    let mut rows = Rows::new();
    let mut reader = ReaderBuilder::new().from_slice(bytes);
    while let Some(block) = reader.next_block() {
        let Ok(block) = block else { continue };
        if block.info().block_type != BlockType::Data {
            continue;
        }
        for (i, record) in block.records().enumerate() {
            rows.insert(
                (name.to_string(), block.info().offset, i as u64),
                record.to_vec(),
            );
        }
    }
    rows
}

fn sql_rows(dir: &std::path::Path, partitions: usize) -> Rows {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let config = SessionConfig::new()
            .with_target_partitions(partitions)
            .with_repartition_file_min_size(1)
            .with_batch_size(7);
        let ctx = SessionContext::new_with_config(config);
        let options = CobsfileOptions::new()
            .records(RecordFormat::Raw)
            .index_statistics(false);
        ctx.register_cobsfile("t", &format!("{}/", dir.display()), options)
            .await
            .unwrap();
        let batches = ctx
            .sql("SELECT file, block_offset, ordinal, record FROM t")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let mut rows = Rows::new();
        for batch in batches {
            let files = batch
                .column(0)
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap();
            let offsets = batch
                .column(1)
                .as_any()
                .downcast_ref::<UInt64Array>()
                .unwrap();
            let places = batch
                .column(2)
                .as_any()
                .downcast_ref::<UInt64Array>()
                .unwrap();
            let records = batch
                .column(3)
                .as_any()
                .downcast_ref::<BinaryArray>()
                .unwrap();
            for i in 0..batch.num_rows() {
                let name = files.value(i).rsplit('/').next().unwrap().to_string();
                let key = (name, offsets.value(i), places.value(i));
                let old = rows.insert(key.clone(), records.value(i).to_vec());
                assert!(old.is_none(), "{key:?} read twice");
            }
            assert_eq!(files.null_count(), 0);
        }
        rows
    })
}

fn file(records: &[Vec<u8>], block_target: usize, zstd: bool) -> Vec<u8> {
    let compression = if zstd {
        Compression::Zstd { level: 1 }
    } else {
        Compression::None
    };
    let mut writer = WriterBuilder::new()
        .block_target(block_target)
        .compression(compression)
        .build(Vec::new())
        .unwrap();
    for record in records {
        writer.write_record(record).unwrap();
    }
    writer.finish().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn every_split_reads_what_a_full_read_reads(
        files in prop::collection::vec(
            (
                prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 0..120),
                16usize..400,
                any::<bool>(),
                // Damage: (position as a fraction, byte xor), and an optional cut.
                prop::collection::vec((0.0f64..1.0, 1u8..=255), 0..4),
                prop::option::of(0.0f64..1.0),
            ),
            1..4,
        ),
        partitions in 1usize..9,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut expected = Rows::new();
        let mut refused = false;
        for (i, (records, target, zstd, flips, cut)) in files.iter().enumerate() {
            let mut bytes = file(records, *target, *zstd);
            for (at, xor) in flips {
                let last = bytes.len() - 1;
                let at = ((*at * bytes.len() as f64) as usize).min(last);
                bytes[at] ^= xor;
            }
            if let Some(cut) = cut {
                bytes.truncate(((*cut * bytes.len() as f64) as usize).max(1));
            }
            let name = format!("f{i}.cobs");
            expected.extend(library_rows(&name, &bytes));
            // Spec 9.5: no intact block, and something damaged (sync bytes alone are an empty
            // cobsfile).
            let mut reader = ReaderBuilder::new().from_slice(&bytes);
            let (mut intact, mut damaged) = (false, false);
            while let Some(block) = reader.next_block() {
                match block {
                    Ok(_) => intact = true,
                    Err(_) => damaged = true,
                }
            }
            refused |= !intact && damaged;
            std::fs::write(dir.path().join(&name), &bytes).unwrap();
        }
        // A file damaged past recognition (no intact block at all, and damage: not a cobsfile,
        // as far as anyone can tell) is refused, not read as empty.
        let got = std::panic::catch_unwind(|| sql_rows(dir.path(), partitions));
        match got {
            Ok(got) => {
                prop_assert!(!refused, "a file with no intact block was read");
                prop_assert_eq!(got, expected);
            }
            Err(_) => prop_assert!(refused, "the scan failed, though every file has an intact block"),
        }
    }
}

/// Rows of any bytes, read in any mode and cut any number of ways: a result or an error,
/// never a panic or a hang.
fn any_rows(bytes: &[u8], records: RecordFormat, partitions: usize) -> Result<usize, String> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("x.cobs"), bytes).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let config = SessionConfig::new()
            .with_target_partitions(partitions)
            .with_repartition_file_min_size(1);
        let ctx = SessionContext::new_with_config(config);
        let path = format!("{}/x.cobs", dir.path().display());
        let options = CobsfileOptions::new().records(records);
        ctx.register_cobsfile("t", &path, options)
            .await
            .map_err(|e| e.to_string())?;
        let batches = ctx
            .sql("SELECT * FROM t")
            .await
            .map_err(|e| e.to_string())?
            .collect()
            .await
            .map_err(|e| e.to_string())?;
        Ok(batches.iter().map(|b| b.num_rows()).sum())
    })
}

/// A typed file, then bytes of it changed: damage, or crafted records whose CRC holds.
fn typed_file(records: usize) -> Vec<u8> {
    use cobsfile::avro::{json::from_json_str, AvroWriter, WriterSchema};
    let schema = WriterSchema::parse(
        r#"{"type":"record","name":"R","fields":[{"name":"a","type":"long"},
           {"name":"s","type":{"type":"array","items":"string"}},
           {"name":"u","type":["null","double"]}]}"#,
    )
    .unwrap();
    let writer = WriterBuilder::new()
        .block_target(100)
        .build(Vec::new())
        .unwrap();
    let mut typed = AvroWriter::new(writer, schema.clone()).unwrap();
    for i in 0..records {
        let json = format!(r#"{{"a": {i}, "s": ["x", "yz"], "u": {{"double": 1.5}}}}"#);
        typed
            .write_value(&from_json_str(&json, &schema).unwrap())
            .unwrap();
    }
    typed.finish().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn any_bytes_give_rows_or_an_error(
        base in prop::sample::select(vec![0usize, 1, 2]),
        noise in prop::collection::vec(any::<u8>(), 0..600),
        edits in prop::collection::vec((0.0f64..1.0, any::<u8>()), 0..6),
        records in prop::sample::select(vec![RecordFormat::Auto, RecordFormat::Json, RecordFormat::Avro, RecordFormat::Raw]),
        partitions in 1usize..5,
    ) {
        let mut bytes = match base {
            0 => noise,
            1 => typed_file(40),
            _ => file(&[b"{\"a\": 1}".to_vec(), b"{\"a\": \"x\"}".to_vec(), b"[1]".to_vec()], 20, false),
        };
        for (at, byte) in edits {
            if !bytes.is_empty() {
                let last = bytes.len() - 1;
                let at = ((at * bytes.len() as f64) as usize).min(last);
                bytes[at] = byte;
            }
        }
        let got = std::panic::catch_unwind(|| any_rows(&bytes, records, partitions));
        prop_assert!(got.is_ok(), "a panic");
    }
}

/// Spec 9.5, as the library decides it: sync bytes alone are an empty cobsfile (no rows),
/// text is not a cobsfile (refused, naming the file).
#[test]
fn sync_bytes_alone_are_an_empty_table_and_text_is_refused() {
    assert_eq!(any_rows(&[0], RecordFormat::Raw, 1), Ok(0));
    assert_eq!(any_rows(&[0, 0], RecordFormat::Raw, 2), Ok(0));
    let e = any_rows(b"plain text\n", RecordFormat::Raw, 1).unwrap_err();
    assert!(e.contains("x.cobs: not a cobsfile"), "{e}");
}
