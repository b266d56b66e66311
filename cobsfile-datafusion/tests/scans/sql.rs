//! SQL over cobsfiles, checked against DataFusion's own NDJSON reader on the same events.

use std::sync::{Arc, Mutex};

use cobsfile::avro::{json::from_json_str, AvroWriter, WriterSchema};
use cobsfile::{Compression, WriterBuilder};
use cobsfile_datafusion::{
    CobsfileContext, CobsfileFormat, CobsfileOptions, Damage, OnDamage, RecordFormat,
};
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::prelude::{JsonReadOptions, SessionConfig, SessionContext};

use crate::{context, write};

const EVENTS: &str = include_str!("../../../samples/events.jsonl");
const SCHEMA: &str = include_str!("../../../samples/events.avsc");

fn events() -> Vec<&'static str> {
    EVENTS.lines().collect()
}

/// The sample events as JSON records, zstd, small blocks (many per file).
fn json_file(lines: &[&str]) -> Vec<u8> {
    let mut writer = WriterBuilder::new()
        .block_target(4096)
        .compression(Compression::Zstd { level: 3 })
        .build(Vec::new())
        .unwrap();
    for line in lines {
        writer.write_record(line.as_bytes()).unwrap();
    }
    writer.finish().unwrap()
}

/// The sample events as typed (Avro) records.
fn avro_file(lines: &[&str]) -> Vec<u8> {
    let schema = WriterSchema::parse(SCHEMA).unwrap();
    let writer = WriterBuilder::new()
        .block_target(4096)
        .build(Vec::new())
        .unwrap();
    let mut writer = AvroWriter::new(writer, schema.clone()).unwrap();
    for line in lines {
        writer
            .write_value(&from_json_str(line, &schema).unwrap())
            .unwrap();
    }
    writer.finish().unwrap()
}

async fn query(ctx: &SessionContext, sql: &str) -> datafusion::common::Result<Vec<RecordBatch>> {
    ctx.sql(sql).await?.collect().await
}

async fn table(ctx: &SessionContext, sql: &str) -> String {
    pretty_format_batches(&query(ctx, sql).await.unwrap())
        .unwrap()
        .to_string()
}

const GROUP_BY: &str = "SELECT service, CAST(level AS VARCHAR) AS level, count(*) AS n, \
    round(avg(latency_ms), 6) AS latency, max(ts) AS last FROM {t} \
    GROUP BY service, CAST(level AS VARCHAR) ORDER BY service, level";
const FILTER: &str = "SELECT ts, host, request_id, msg FROM {t} \
    WHERE CAST(level AS VARCHAR) = 'error' AND latency_ms > 50 ORDER BY request_id";
const JOIN: &str = "SELECT a.service, count(*) AS n FROM {t} a JOIN {t} b \
    ON a.request_id = b.request_id AND a.host = b.host GROUP BY a.service ORDER BY a.service";

async fn same_answers(ctx: &SessionContext, table_name: &str) {
    let dir = tempfile::tempdir().unwrap();
    let lines = write(dir.path(), "events.json", EVENTS.as_bytes());
    ctx.register_json("lines", &lines, JsonReadOptions::default())
        .await
        .unwrap();
    for sql in [GROUP_BY, FILTER, JOIN] {
        let ours = table(ctx, &sql.replace("{t}", table_name)).await;
        let theirs = table(ctx, &sql.replace("{t}", "lines")).await;
        assert_eq!(ours, theirs, "{sql}");
        assert!(ours.lines().count() > 4, "{ours}");
    }
}

#[tokio::test]
async fn json_records_answer_as_the_ndjson_reader_does() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "events.cobs", &json_file(&events()));
    for partitions in [1, 3] {
        let ctx = context(partitions);
        ctx.register_cobsfile("events", &path, CobsfileOptions::new())
            .await
            .unwrap();
        same_answers(&ctx, "events").await;
    }
}

/// JSON records the scan's one-pass columns do not take (a key given twice, a trailing
/// comma, a number as a string, a raw tab in a string: records the Arrow project's decoder
/// reads its own way) go to that decoder, among records that are taken: the answers and the
/// order of the rows are the NDJSON reader's over the same lines.
#[tokio::test]
async fn json_records_taken_either_way_answer_as_the_ndjson_reader_does() {
    let dir = tempfile::tempdir().unwrap();
    // Past the records sampled for the schema (1,000), which are strict JSON.
    let lines: Vec<String> = events()
        .iter()
        .enumerate()
        .map(|(i, line)| match i {
            0..1000 => line.to_string(),
            _ if i % 3 == 0 => line.replacen('{', "{\"service\":\"shadowed\",", 1),
            _ if i % 5 == 1 => line.replacen('}', ",}", 1),
            _ if i % 7 == 2 => line
                .replacen("\"latency_ms\":", "\"latency_ms\":\"", 1)
                .replacen(",\"msg\"", "\",\"msg\"", 1),
            _ if i % 11 == 3 => line.replacen("\"msg\":\"", "\"msg\":\"\t", 1),
            _ => line.to_string(),
        })
        .collect();
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let path = write(dir.path(), "mixed.cobs", &json_file(&refs));
    let ndjson = write(dir.path(), "mixed.json", text.as_bytes());
    for partitions in [1, 3] {
        let ctx = context(partitions);
        ctx.register_cobsfile("mixed", &path, CobsfileOptions::new())
            .await
            .unwrap();
        ctx.register_json("lines", &ndjson, JsonReadOptions::default())
            .await
            .unwrap();
        for sql in [GROUP_BY, FILTER, JOIN] {
            let ours = table(&ctx, &sql.replace("{t}", "mixed")).await;
            let theirs = table(&ctx, &sql.replace("{t}", "lines")).await;
            assert_eq!(ours, theirs, "{sql}");
        }
    }
    // Rows in file order, batch by batch (one partition, no ORDER BY).
    let ctx = SessionContext::new_with_config(
        SessionConfig::new()
            .with_target_partitions(1)
            .with_batch_size(7),
    );
    ctx.register_cobsfile("mixed", &path, CobsfileOptions::new())
        .await
        .unwrap();
    ctx.register_json("lines", &ndjson, JsonReadOptions::default())
        .await
        .unwrap();
    let sql = "SELECT service, latency_ms, msg FROM {t}";
    let ours = table(&ctx, &sql.replace("{t}", "mixed")).await;
    let theirs = table(&ctx, &sql.replace("{t}", "lines")).await;
    assert_eq!(ours, theirs);
    assert!(!ours.contains("shadowed") && ours.lines().count() > 2000);
}

#[tokio::test]
async fn avro_records_answer_as_the_ndjson_reader_does() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "events.cobs", &avro_file(&events()));
    for partitions in [1, 4] {
        let ctx = context(partitions);
        ctx.register_cobsfile("events", &path, CobsfileOptions::new())
            .await
            .unwrap();
        same_answers(&ctx, "events").await;
        // The Avro enum is a dictionary of its symbols.
        let schema = ctx.table("events").await.unwrap().schema().clone();
        assert!(
            schema
                .field_with_name(None, "level")
                .unwrap()
                .data_type()
                .is_null()
                || matches!(
                    schema.field_with_name(None, "level").unwrap().data_type(),
                    datafusion::arrow::datatypes::DataType::Dictionary(..)
                )
        );
    }
}

#[tokio::test]
async fn a_directory_of_files_is_one_table_in_sql() {
    let dir = tempfile::tempdir().unwrap();
    let all = events();
    for (i, part) in all.chunks(700).enumerate() {
        write(dir.path(), &format!("part-{i}.cobs"), &json_file(part));
    }
    write(dir.path(), "notes.txt", b"not a cobsfile, not listed");
    let ctx = context(2);
    ctx.register_cobsfile_format().unwrap();
    let location = format!("{}/", dir.path().display());
    ctx.sql(&format!(
        "CREATE EXTERNAL TABLE events STORED AS COBSFILE LOCATION '{location}' \
         OPTIONS ('records' 'json', 'on_damage' 'error')"
    ))
    .await
    .unwrap();
    same_answers(&ctx, "events").await;
    let count = table(&ctx, "SELECT count(*) AS n FROM events").await;
    assert!(count.contains("| 2000 |"), "{count}");
}

#[tokio::test]
async fn raw_records_name_their_file_block_and_place() {
    let dir = tempfile::tempdir().unwrap();
    let lines = events();
    let path = write(dir.path(), "raw.cobs", &json_file(&lines));
    let ctx = context(3);
    ctx.register_cobsfile(
        "raw",
        &path,
        CobsfileOptions::new().records(RecordFormat::Raw),
    )
    .await
    .unwrap();
    let batches = query(
        &ctx,
        "SELECT record, file, block_offset, ordinal FROM raw ORDER BY block_offset, ordinal",
    )
    .await
    .unwrap();
    let mut got = Vec::new();
    for batch in &batches {
        let records = batch
            .column(0)
            .as_any()
            .downcast_ref::<datafusion::arrow::array::BinaryArray>()
            .unwrap();
        let files = batch
            .column(1)
            .as_any()
            .downcast_ref::<datafusion::arrow::array::StringArray>()
            .unwrap();
        for i in 0..batch.num_rows() {
            got.push(String::from_utf8(records.value(i).to_vec()).unwrap());
            assert!(
                path.ends_with(files.value(i)),
                "{} vs {path}",
                files.value(i)
            );
        }
    }
    assert_eq!(got, lines);
    let first = table(
        &ctx,
        "SELECT min(block_offset) AS b, min(ordinal) AS o FROM raw",
    )
    .await;
    // The first data block opens on the header's closing sync byte (offset 18).
    assert!(first.contains("| 18 | 0 |"), "{first}");
}

/// `count(*)` reads the records unless asked to trust the index, and always with `on_damage`
/// `error`: an answer from the index is unchecked.
#[tokio::test]
async fn count_star_reads_only_the_index_when_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "events.cobs", &json_file(&events()));
    let strict = |index| {
        CobsfileOptions::new()
            .index_statistics(index)
            .on_damage(OnDamage::Fail)
    };
    for (options, reads) in [
        (CobsfileOptions::new(), true),
        (CobsfileOptions::new().index_statistics(true), false),
        (CobsfileOptions::new().index_statistics(false), true),
        (strict(true), true),
    ] {
        let ctx = context(2);
        ctx.register_cobsfile("events", &path, options)
            .await
            .unwrap();
        let plan = table(&ctx, "EXPLAIN SELECT count(*) FROM events").await;
        assert_eq!(plan.contains("DataSourceExec"), reads, "{plan}");
        let count = table(&ctx, "SELECT count(*) AS n FROM events").await;
        assert!(count.contains("| 2000 |"), "{count}");
    }
}

#[tokio::test]
async fn limit_and_projection() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "events.cobs", &avro_file(&events()));
    let ctx = context(2);
    let frame = ctx
        .read_cobsfile(&path, CobsfileOptions::new())
        .await
        .unwrap();
    let rows = frame
        .limit(0, Some(10))
        .unwrap()
        .select_columns(&["host"])
        .unwrap();
    let batches = rows.collect().await.unwrap();
    assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 10);
    assert!(batches.iter().all(|b| b.num_columns() == 1));
}

/// Collects what scans skip.
fn hooked(options: CobsfileOptions) -> (CobsfileFormat, Arc<Mutex<Vec<Damage>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let format = CobsfileFormat::new(options).with_damage_hook(Arc::new(move |d: &Damage| {
        log.lock().unwrap().push(d.clone())
    }));
    (format, seen)
}

#[tokio::test]
async fn damage_is_skipped_counted_and_never_a_wrong_row() {
    let dir = tempfile::tempdir().unwrap();
    let lines = events();
    let mut bytes = json_file(&lines);
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x41;
    let path = write(dir.path(), "damaged.cobs", &bytes);
    let ctx = context(3);
    let (format, seen) = hooked(CobsfileOptions::new().records(RecordFormat::Raw));
    let table_ = cobsfile_datafusion::listing_table(&ctx.state(), &[&path], format)
        .await
        .unwrap();
    ctx.register_table("raw", table_).unwrap();
    let batches = query(&ctx, "SELECT record FROM raw").await.unwrap();
    let mut rows = 0;
    for batch in &batches {
        let records = batch
            .column(0)
            .as_any()
            .downcast_ref::<datafusion::arrow::array::BinaryArray>()
            .unwrap();
        for i in 0..batch.num_rows() {
            let record = std::str::from_utf8(records.value(i)).unwrap();
            assert!(lines.contains(&record), "a wrong row: {record}");
            rows += 1;
        }
    }
    assert!(rows < lines.len() && rows > lines.len() / 2, "{rows}");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(seen[0].range.contains(&(middle as u64)), "{seen:?}");
    assert!(
        seen[0].to_string().contains("damaged.cobs: bytes "),
        "{}",
        seen[0]
    );

    // The scan's metrics count it.
    let plan = ctx
        .sql("EXPLAIN ANALYZE SELECT count(record) FROM raw")
        .await
        .unwrap();
    let shown = pretty_format_batches(&plan.collect().await.unwrap())
        .unwrap()
        .to_string();
    assert!(shown.contains("damaged_ranges=1"), "{shown}");

    // Or it is an error.
    let ctx = context(1);
    ctx.register_cobsfile(
        "strict",
        &path,
        CobsfileOptions::new().on_damage(OnDamage::Fail),
    )
    .await
    .unwrap();
    let e = query(&ctx, "SELECT * FROM strict")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("damaged.cobs: bytes ") && e.contains("skipped"),
        "{e}"
    );
}

#[tokio::test]
async fn bad_input_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(2);

    let text = write(dir.path(), "text.cobs", b"this is not a cobsfile\nat all\n");
    let e = ctx
        .register_cobsfile("t", &text, CobsfileOptions::new())
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("text.cobs: not a cobsfile"), "{e}");

    let mut lines = events();
    lines[1500] = "{\"ts\": oops";
    let bad = write(dir.path(), "bad.cobs", &json_file(&lines));
    ctx.register_cobsfile(
        "bad",
        &bad,
        CobsfileOptions::new().records(RecordFormat::Json),
    )
    .await
    .unwrap();
    let e = query(&ctx, "SELECT * FROM bad")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("bad.cobs: record ") && e.contains("of the block at offset"),
        "{e}"
    );

    let e = ctx
        .register_cobsfile(
            "x",
            &bad,
            CobsfileOptions::new().records(RecordFormat::Avro),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("no Avro schema"), "{e}");
}

/// A JSON record is one JSON object: a record that is not one JSON value (a number, which
/// only a following byte would end, two values, a value cut short, nothing) ends the scan
/// with an error naming it, never rows made of it or of its neighbours, and one value of
/// another kind with an error naming its blocks; white space around the object is allowed,
/// as the NDJSON reader allows it.
#[tokio::test]
async fn a_json_record_is_one_object() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(1);
    let not_one_value = [
        "12",
        "-7",
        "{\"service\": \"a\"}{\"service\": \"b\"}",
        "{\"service\": \"a\"} 3",
        "{\"service\":",
        "",
        "   ",
    ];
    let not_an_object = ["\"text\"", "[1, 2]", "true"];
    for (n, bad) in not_one_value.iter().chain(&not_an_object).enumerate() {
        for at in [0, 1500, 1999] {
            let mut lines = events();
            lines[at] = bad;
            let name = format!("bad{n}_{at}.cobs");
            let path = write(dir.path(), &name, &json_file(&lines));
            // Where the bad record is: its block and its place in it.
            let raw = format!("raw{n}_{at}");
            ctx.register_cobsfile(
                &raw,
                &path,
                CobsfileOptions::new().records(RecordFormat::Raw),
            )
            .await
            .unwrap();
            let place = table(
                &ctx,
                &format!(
                    "SELECT block_offset, ordinal FROM {raw} \
                     ORDER BY block_offset, ordinal LIMIT 1 OFFSET {at}"
                ),
            )
            .await;
            let place: Vec<&str> = place
                .lines()
                .nth(3)
                .unwrap()
                .split('|')
                .map(str::trim)
                .collect();
            let (block, ordinal) = (place[1], place[2]);
            let table = format!("bad{n}_{at}");
            // A record among those sampled for the schema is refused at registration.
            let registered = ctx
                .register_cobsfile(
                    &table,
                    &path,
                    CobsfileOptions::new().records(RecordFormat::Json),
                )
                .await;
            let e = match registered {
                Err(e) => e.to_string(),
                Ok(()) => query(&ctx, &format!("SELECT service FROM {table}"))
                    .await
                    .expect_err(bad)
                    .to_string(),
            };
            let named = e.contains(&format!(
                "{name}: record {ordinal} of the block at offset {block} "
            )) || e
                .contains(&format!("{name}: a record of the block at offset {block} "));
            let blocks = e.contains(&format!("{name}: records of the blocks at offsets "));
            assert!(
                named || (not_an_object.contains(bad) && blocks),
                "{bad:?} at {at}, record {ordinal} of the block at {block}: {e}"
            );
        }
    }
    let mut lines = events();
    let spaced = format!(" {} \t", lines[7]);
    lines[7] = &spaced;
    let path = write(dir.path(), "spaced.cobs", &json_file(&lines));
    ctx.register_cobsfile(
        "spaced",
        &path,
        CobsfileOptions::new().records(RecordFormat::Json),
    )
    .await
    .unwrap();
    let rows: usize = query(&ctx, "SELECT service FROM spaced")
        .await
        .unwrap()
        .iter()
        .map(RecordBatch::num_rows)
        .sum();
    assert_eq!(rows, lines.len());
}

/// Nested Avro (records, arrays, maps, unions, enums, bytes, fixed, logical types) reads as
/// DataFusion's own Avro reader reads the same datums from an Avro object container file.
#[tokio::test]
async fn nested_avro_reads_as_datafusions_avro_reader_reads_it() {
    use cobsfile::avro::container::{Codec, ContainerWriter};
    let schema = WriterSchema::parse(
        r#"{"type": "record", "name": "Order", "namespace": "shop", "fields": [
            {"name": "id", "type": "long"},
            {"name": "customer", "type": {"type": "record", "name": "Customer", "fields": [
                {"name": "name", "type": "string"},
                {"name": "tier", "type": {"type": "enum", "name": "Tier", "symbols": ["free", "gold"]}},
                {"name": "email", "type": ["null", "string"], "default": null}]}},
            {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line",
                "fields": [{"name": "sku", "type": "string"}, {"name": "qty", "type": "int"},
                           {"name": "price", "type": "double"}]}}},
            {"name": "tags", "type": {"type": "map", "values": "string"}},
            {"name": "note", "type": ["null", "string"], "default": null},
            {"name": "digest", "type": {"type": "fixed", "name": "Digest", "size": 4}},
            {"name": "blob", "type": "bytes"},
            {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}}
        ]}"#,
    )
    .unwrap();
    let mut rows = Vec::new();
    for i in 0..300u64 {
        let email = if i % 3 == 0 {
            "null".to_string()
        } else {
            format!("{{\"string\": \"c{i}@example.com\"}}")
        };
        let lines: Vec<String> = (0..i % 4)
            .map(|j| {
                format!(
                    "{{\"sku\": \"s{j}\", \"qty\": {j}, \"price\": {}.5}}",
                    i + j
                )
            })
            .collect();
        let note = if i % 5 == 0 {
            format!("{{\"string\": \"n{i}\"}}")
        } else {
            "null".into()
        };
        rows.push(format!(
            r#"{{"id": {i}, "customer": {{"name": "c{i}", "tier": "{}", "email": {email}}},
               "lines": [{}], "tags": {{"k{}": "v"}}, "note": {note},
               "digest": "\u0001\u0002\u0003{}", "blob": "\u0000\u00ff", "at": {}}}"#,
            if i % 2 == 0 { "free" } else { "gold" },
            lines.join(", "),
            i % 3,
            if i % 2 == 0 { "\\u0004" } else { "\\u0005" },
            1_700_000_000_000u64 + i * 1000,
        ));
    }
    let writer = WriterBuilder::new()
        .block_target(2048)
        .build(Vec::new())
        .unwrap();
    let mut typed = AvroWriter::new(writer, schema.clone()).unwrap();
    let mut container = ContainerWriter::new(Vec::new(), &schema, Codec::Null, &[]).unwrap();
    for row in &rows {
        let value = from_json_str(row, &schema).unwrap();
        let record = typed.encode_value(&value).unwrap().to_vec();
        typed.write_datum(&record[10..]).unwrap();
        container.write_datum(&record[10..]).unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let ours = write(dir.path(), "orders.cobs", &typed.finish().unwrap());
    let theirs = write(dir.path(), "orders.avro", &container.finish().unwrap());
    for partitions in [1, 3] {
        let ctx = context(partitions);
        ctx.register_cobsfile("ours", &ours, CobsfileOptions::new())
            .await
            .unwrap();
        ctx.register_avro(
            "theirs",
            &theirs,
            datafusion::prelude::AvroReadOptions::default(),
        )
        .await
        .unwrap();
        for sql in [
            "SELECT * FROM {t} ORDER BY id",
            "SELECT id, customer.name AS name, CAST(customer.tier AS VARCHAR) AS tier, \
             customer.email AS email, array_length(lines) AS n, tags, note FROM {t} WHERE id % 7 = 1 ORDER BY id",
            "SELECT CAST(customer.tier AS VARCHAR) AS tier, sum(get_field(lines[1], 'price')) AS q, count(note) AS notes \
             FROM {t} GROUP BY 1 ORDER BY 1",
        ] {
            let a = table(&ctx, &sql.replace("{t}", "ours")).await;
            let b = table(&ctx, &sql.replace("{t}", "theirs")).await;
            assert_eq!(a, b, "{sql}");
            assert!(a.lines().count() > 4, "{a}");
        }
    }
}

/// Two writer schemas in one file (a field added with a default) read through one reader
/// schema: the newer.
#[tokio::test]
async fn records_of_two_schema_versions_resolve_to_one() {
    let v1 = WriterSchema::parse(
        r#"{"type":"record","name":"E","fields":[{"name":"a","type":"long"}]}"#,
    )
    .unwrap();
    let v2 = WriterSchema::parse(
        r#"{"type":"record","name":"E","fields":[{"name":"a","type":"long"},
            {"name":"b","type":"string","default":"none"}]}"#,
    )
    .unwrap();
    let writer = WriterBuilder::new()
        .block_target(64)
        .build(Vec::new())
        .unwrap();
    let mut typed = AvroWriter::new(writer, v1.clone()).unwrap();
    for i in 0..50 {
        typed
            .write_value(&from_json_str(&format!("{{\"a\": {i}}}"), &v1).unwrap())
            .unwrap();
    }
    typed.change_schema(v2.clone()).unwrap();
    for i in 50..100 {
        let json = format!("{{\"a\": {i}, \"b\": \"x{i}\"}}");
        typed
            .write_value(&from_json_str(&json, &v2).unwrap())
            .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "versions.cobs", &typed.finish().unwrap());
    let ctx = context(2);
    ctx.register_cobsfile("t", &path, CobsfileOptions::new())
        .await
        .unwrap();
    let got = table(
        &ctx,
        "SELECT b, count(*) AS n, sum(a) AS s FROM t GROUP BY b HAVING b = 'none' OR b = 'x99'",
    )
    .await;
    assert!(got.contains("| none | 50 | 1225 |"), "{got}");
    assert!(got.contains("| x99  | 1  | 99   |"), "{got}");
}

/// Records of the table's schema are made into rows by the check's walk, the others by
/// arrow-avro: rows of the two kinds interleaved record by record, and blocks of both, come
/// out in file order, whatever the batch size.
#[tokio::test]
async fn rows_of_interleaved_schema_versions_keep_their_order() {
    let v1 = WriterSchema::parse(
        r#"{"type":"record","name":"E","fields":[{"name":"a","type":"long"}]}"#,
    )
    .unwrap();
    let v2 = WriterSchema::parse(
        r#"{"type":"record","name":"E","fields":[{"name":"a","type":"long"},
            {"name":"b","type":["null","string"],"default":null}]}"#,
    )
    .unwrap();
    let writer = WriterBuilder::new()
        .block_target(256)
        .build(Vec::new())
        .unwrap();
    let mut typed = AvroWriter::new(writer, v1.clone()).unwrap();
    let mut expected = Vec::new();
    for i in 0..300u64 {
        // Runs of one, two and three records of each version.
        let newer = (i / (1 + i % 3)) % 2 == 1;
        let (schema, json, b) = match newer {
            true => (
                &v2,
                format!(r#"{{"a": {i}, "b": {{"string": "x{i}"}}}}"#),
                format!("x{i}"),
            ),
            false => (&v1, format!(r#"{{"a": {i}}}"#), String::new()),
        };
        typed.change_schema(schema.clone()).unwrap();
        typed
            .write_value(&from_json_str(&json, schema).unwrap())
            .unwrap();
        expected.push(format!("{i}:{b}"));
    }
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "interleaved.cobs", &typed.finish().unwrap());
    for batch_size in [1, 7, 8192] {
        let config = SessionConfig::new()
            .with_target_partitions(1)
            .with_batch_size(batch_size);
        let ctx = SessionContext::new_with_config(config);
        ctx.register_cobsfile("t", &path, CobsfileOptions::new())
            .await
            .unwrap();
        let batches = ctx
            .sql("SELECT concat(CAST(a AS VARCHAR), ':', coalesce(b, '')) AS r FROM t")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let got: Vec<String> = batches
            .iter()
            .flat_map(|b| {
                let column = datafusion::arrow::compute::cast(
                    b.column(0),
                    &datafusion::arrow::datatypes::DataType::Utf8,
                )
                .unwrap();
                let strings = datafusion::arrow::array::as_string_array(&column);
                strings
                    .iter()
                    .map(|s| s.unwrap().to_string())
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(got, expected, "batch size {batch_size}");
    }
}

/// A typed record that fails the check (spec 15.3) ends a scan with the check's error, and
/// no row of it is returned, whether the bad value is in a column the query reads or not, and
/// whether it comes first in its batch or after rows of sound records.
#[tokio::test]
async fn a_record_that_fails_the_check_ends_the_scan_with_its_error() {
    let schema = WriterSchema::parse(
        r#"{"type":"record","name":"E","fields":[{"name":"a","type":"long"},
            {"name":"s","type":"string"},
            {"name":"e","type":{"type":"enum","name":"L","symbols":["x","y"]}}]}"#,
    )
    .unwrap();
    // Datums of a = 1, s = "ok", e = y; then the bad ones.
    let good: &[u8] = &[0x02, 0x04, b'o', b'k', 0x02];
    let bad: [(&str, &[u8]); 3] = [
        ("not UTF-8", &[0x02, 0x04, 0xff, b'k', 0x02]),
        ("enum index", &[0x02, 0x04, b'o', b'k', 0x08]),
        ("past the end", &[0x02, 0x10, b'o', b'k', 0x02]),
    ];
    for (what, datum) in bad {
        for before in [0usize, 3] {
            let mut writer = WriterBuilder::new().build(Vec::new()).unwrap();
            writer.write_metadata(schema.metadata()).unwrap();
            let record = |datum: &[u8]| [&schema.prefix()[..], datum].concat();
            for _ in 0..before {
                writer.write_record(&record(good)).unwrap();
            }
            writer.write_record(&record(datum)).unwrap();
            writer.write_record(&record(good)).unwrap();
            let dir = tempfile::tempdir().unwrap();
            let path = write(dir.path(), "bad.cobs", &writer.finish().unwrap());
            for sql in [
                "SELECT a, s, e FROM t",
                "SELECT a FROM t",
                "SELECT e FROM t",
            ] {
                let ctx = context(1);
                ctx.register_cobsfile("t", &path, CobsfileOptions::new())
                    .await
                    .unwrap();
                let result = ctx.sql(sql).await.unwrap().collect().await;
                let e = result.expect_err(&format!("{what}, {before} before: {sql}"));
                let e = e.to_string();
                assert!(
                    e.contains(&format!("record {before} of the block"))
                        && e.contains("does not decode"),
                    "{what}, {before} before, {sql}: {e}"
                );
            }
        }
    }
}

/// Batches are cut by bytes as well as rows: records of 1 MiB each (a 55 KB file with zstd)
/// made batches of the session's 8,192 rows, gigabytes for `SELECT length(s)`. Each batch the
/// scan emits now holds at most 8 MiB of records (plus the one that passed it).
#[tokio::test]
async fn batches_are_cut_by_bytes_as_well_as_rows() {
    let dir = tempfile::tempdir().unwrap();
    let s = "x".repeat(1 << 20);
    let line = format!(r#"{{"s":"{s}"}}"#);
    let lines: Vec<&str> = std::iter::repeat_n(line.as_str(), 40).collect();
    let path = write(dir.path(), "big.cobs", &json_file(&lines));
    assert!(std::fs::metadata(&path).unwrap().len() < 100 << 10);
    let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(1));
    ctx.register_cobsfile("big", &path, CobsfileOptions::new())
        .await
        .unwrap();
    let frame = ctx.sql("SELECT s FROM big").await.unwrap();
    let plan = frame.create_physical_plan().await.unwrap();
    // The scan's own batches, before any operator above it joins them.
    let scan = datafusion::physical_plan::collect_partitioned(plan, ctx.task_ctx())
        .await
        .unwrap();
    let batches: Vec<&RecordBatch> = scan.iter().flatten().collect();
    assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 40);
    for batch in &batches {
        assert!(batch.num_rows() <= 9, "{} rows of 1 MiB", batch.num_rows());
    }
}
