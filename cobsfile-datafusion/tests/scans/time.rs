//! Event times in SQL: a timestamp column, and filters on it that read only the blocks that
//! may hold their rows; answers checked against DataFusion's own NDJSON reader.

use cobsfile::WriterBuilder;
use cobsfile_datafusion::{CobsfileContext, CobsfileOptions};
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::datasource::source::DataSourceExec;
use datafusion::physical_plan::{collect, displayable};
use datafusion::prelude::{JsonReadOptions, SessionContext};

use crate::{context, write};

const EVENTS: &str = include_str!("../../../samples/events.jsonl");

/// Nanoseconds since the Unix epoch of an RFC 3339 time `YYYY-MM-DDTHH:MM:SSZ`.
fn nanos(ts: &str) -> i64 {
    let n = |r: std::ops::Range<usize>| ts[r].parse::<i64>().unwrap();
    let (y, m, d) = (n(0..4), n(5..7), n(8..10));
    // Days from civil (H. Hinnant).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146097 + doe - 719468;
    (days * 86400 + n(11..13) * 3600 + n(14..16) * 60 + n(17..19)) * 1_000_000_000
}

/// The sample events with their `ts` as event times, the field named in the file's metadata
/// as `pack --time-field ts` names it; `every` records in `untimed` have no time.
fn timed_file(index: bool, declare: bool, untimed: usize) -> Vec<u8> {
    let mut writer = WriterBuilder::new()
        .block_target(2048)
        .index(index)
        .build(Vec::new())
        .unwrap();
    if declare {
        writer
            .write_metadata([(cobsfile::TIME_FIELD_KEY, "ts")])
            .unwrap();
    }
    for (i, line) in EVENTS.lines().enumerate() {
        let value: serde_json::Value = serde_json::from_str(line).unwrap();
        let time = nanos(value["ts"].as_str().unwrap());
        if untimed > 0 && i % untimed == 0 {
            writer.write_record(line.as_bytes()).unwrap();
        } else {
            writer.write_record_at(line.as_bytes(), time).unwrap();
        }
    }
    writer.finish().unwrap()
}

/// The rows of `sql`, and the rows the cobsfile scans in its plan gave.
async fn run(ctx: &SessionContext, sql: &str) -> (String, usize, String) {
    let plan = ctx
        .sql(sql)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    let batches: Vec<RecordBatch> = collect(plan.clone(), ctx.task_ctx()).await.unwrap();
    let mut scanned = 0;
    plan.apply(|node| {
        if node.downcast_ref::<DataSourceExec>().is_some() && node.name() == "DataSourceExec" {
            if let Some(metrics) = node.metrics() {
                scanned += metrics.output_rows().unwrap_or(0);
            }
        }
        Ok(TreeNodeRecursion::Continue)
    })
    .unwrap();
    let shown = displayable(plan.as_ref()).indent(true).to_string();
    (
        pretty_format_batches(&batches).unwrap().to_string(),
        scanned,
        shown,
    )
}

/// Each query on `events` (the cobsfile table) and on `lines` (the NDJSON oracle, whose `ts`
/// is text): the same answer.
const QUERIES: [(&str, &str); 6] = [
    (
        "ts BETWEEN '2025-11-30T01:00:00Z' AND '2025-11-30T02:00:00Z'",
        "to_timestamp(ts) BETWEEN '2025-11-30T01:00:00Z' AND '2025-11-30T02:00:00Z'",
    ),
    (
        "ts > '2025-11-30T01:00:00Z' AND ts < '2025-11-30T01:30:00Z'",
        "to_timestamp(ts) > '2025-11-30T01:00:00Z' AND to_timestamp(ts) < '2025-11-30T01:30:00Z'",
    ),
    (
        "'2025-11-30T03:00:00Z' <= ts AND host = 'web-07'",
        "'2025-11-30T03:00:00Z' <= to_timestamp(ts) AND host = 'web-07'",
    ),
    (
        "ts = '2025-11-30T00:00:02Z'",
        "to_timestamp(ts) = '2025-11-30T00:00:02Z'",
    ),
    (
        "ts < '2025-11-29T00:00:00Z'",
        "to_timestamp(ts) < '2025-11-29T00:00:00Z'",
    ),
    (
        "ts >= '2025-11-30T01:00:00Z' OR host = 'web-07'",
        "to_timestamp(ts) >= '2025-11-30T01:00:00Z' OR host = 'web-07'",
    ),
];

/// The first cell of the first row of a table printed by `run`.
fn n(table: &str) -> usize {
    let row = table.lines().nth(3).unwrap();
    row.split('|').nth(1).unwrap().trim().parse().unwrap()
}

fn select(table: &str, filter: &str, ts: &str) -> String {
    format!(
        "SELECT count(*) AS n, min(CAST({ts} AS BIGINT)) AS first, \
         max(CAST({ts} AS BIGINT)) AS last, round(sum(latency_ms), 4) AS latency \
         FROM {table} WHERE {filter}"
    )
}

#[tokio::test]
async fn a_time_filter_answers_as_the_ndjson_reader_and_scans_only_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    let lines = write(dir.path(), "events.json", EVENTS.as_bytes());
    for index in [true, false] {
        let path = write(dir.path(), "events.cobs", &timed_file(index, true, 0));
        for partitions in [1, 3] {
            let ctx = context(partitions);
            ctx.register_json("lines", &lines, JsonReadOptions::default())
                .await
                .unwrap();
            ctx.register_cobsfile("events", &path, CobsfileOptions::new())
                .await
                .unwrap();
            // `ts`, the field the times came from, is the time column, typed.
            let schema = ctx.table("events").await.unwrap().schema().clone();
            let field = schema.field_with_name(None, "ts").unwrap();
            assert_eq!(*field.data_type(), cobsfile_datafusion::time_type());
            assert_eq!(schema.fields().len(), 7, "{schema:?}");
            for (ours, theirs) in QUERIES {
                let (got, scanned, plan) = run(&ctx, &select("events", ours, "ts")).await;
                let (want, _, _) = run(&ctx, &select("lines", theirs, "to_timestamp(ts)")).await;
                assert_eq!(got, want, "{ours}");
                let windowed = !ours.contains(" OR ");
                assert_eq!(plan.contains(", time="), windowed, "{ours}: {plan}");
                // A window's scan returns the window's rows only (the filter above it does
                // the rest); without one, every row.
                let in_window = match ours.split_once(" AND host") {
                    Some((window, _)) => n(&run(&ctx, &select("events", window, "ts")).await.0),
                    None => n(&got),
                };
                match windowed {
                    true => assert_eq!(scanned, in_window, "{ours}"),
                    false => assert_eq!(scanned, 2000, "{ours}"),
                }
            }
        }
    }
}

#[tokio::test]
async fn records_without_times_have_a_null_time_and_no_window_holds_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "events.cobs", &timed_file(true, false, 10));
    let ctx = context(2);
    // Nothing names the field: the times are a column of their own, `time`.
    ctx.register_cobsfile("events", &path, CobsfileOptions::new())
        .await
        .unwrap();
    let schema = ctx.table("events").await.unwrap().schema().clone();
    assert_eq!(schema.fields().len(), 8);
    assert_eq!(
        *schema.field_with_name(None, "time").unwrap().data_type(),
        cobsfile_datafusion::time_type()
    );
    let (nulls, _, _) = run(&ctx, "SELECT count(*) FROM events WHERE time IS NULL").await;
    assert!(nulls.contains("| 200 "), "{nulls}");
    let (all, _, _) = run(
        &ctx,
        "SELECT count(*) FROM events WHERE time >= '2000-01-01T00:00:00Z'",
    )
    .await;
    assert!(all.contains("| 1800 "), "{all}");
    let (same, _, _) = run(
        &ctx,
        "SELECT count(*) FROM events WHERE CAST(time AS BIGINT) = \
         CAST(to_timestamp(ts) AS BIGINT)",
    )
    .await;
    assert!(same.contains("| 1800 "), "{same}");

    // The option names the column, or takes it away.
    let ctx = context(1);
    ctx.register_cobsfile("events", &path, CobsfileOptions::new().time_column("at"))
        .await
        .unwrap();
    let (n, _, plan) = run(
        &ctx,
        "SELECT count(*) FROM events WHERE at < '2025-11-30T00:10:00Z'",
    )
    .await;
    assert!(plan.contains(", time="), "{plan}");
    assert!(!n.contains("| 0 "), "{n}");
    let ctx = context(1);
    ctx.register_cobsfile("events", &path, CobsfileOptions::new().time_column(""))
        .await
        .unwrap();
    let schema = ctx.table("events").await.unwrap().schema().clone();
    assert_eq!(schema.fields().len(), 7);
}
