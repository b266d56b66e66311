//! Scans of objects in an S3-compatible server on loopback (`tests/s3/server`): an object
//! replaced or deleted between the query's planning and its scan is an error naming it, never
//! rows read with the ranges cut for the other object.

use std::sync::Arc;

use cobsfile_datafusion::{CobsfileContext, CobsfileOptions};
use datafusion::physical_plan::collect;
use datafusion::prelude::SessionContext;
use object_store::ObjectStoreExt;

#[path = "../../tests/s3/server.rs"]
mod s3;

/// A cobsfile of `n` JSON records.
fn file(n: usize) -> Vec<u8> {
    let mut writer = cobsfile::WriterBuilder::new()
        .block_target(1000)
        .build(Vec::new())
        .unwrap();
    for i in 0..n {
        writer
            .write_record(format!("{{\"n\":{i}}}").as_bytes())
            .unwrap();
    }
    writer.finish().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_changed_or_gone_after_planning_is_an_error_never_rows() {
    let dir = tempfile::tempdir().unwrap();
    let server = s3::Server::start(dir.path());
    server.bucket("tables");
    let store = Arc::new(server.store("tables"));
    let key: object_store::path::Path = "t.cobs".into();
    store.put(&key, file(1000).into()).await.unwrap();
    let ctx = SessionContext::new();
    ctx.register_object_store(&url::Url::parse("s3://tables").unwrap(), store.clone());
    ctx.register_cobsfile("t", "s3://tables/t.cobs", CobsfileOptions::new())
        .await
        .unwrap();
    let plan = || async {
        ctx.sql("SELECT count(*) AS n, sum(n) AS s FROM t")
            .await
            .unwrap()
            .create_physical_plan()
            .await
            .unwrap()
    };
    let run = |plan| collect(plan, ctx.task_ctx());
    let rows = run(plan().await).await.unwrap();
    assert_eq!(rows[0].num_rows(), 1);

    // Replaced between planning and the scan.
    let planned = plan().await;
    store.put(&key, file(3000).into()).await.unwrap();
    let e = run(planned).await.unwrap_err().to_string();
    assert!(
        e.contains("t.cobs: the object changed since the query listed it"),
        "{e}"
    );
    // Planned again, the query reads the new object.
    let rows = run(plan().await).await.unwrap();
    let n = rows[0]
        .column(0)
        .as_any()
        .downcast_ref::<datafusion::arrow::array::Int64Array>()
        .unwrap()
        .value(0);
    assert_eq!(n, 3000);

    // Deleted between planning and the scan.
    let planned = plan().await;
    store.delete(&key).await.unwrap();
    let e = run(planned).await.unwrap_err().to_string();
    assert!(e.contains("t.cobs: the object is gone"), "{e}");
}

/// A cobsfile of `n` JSON records of about 100 bytes, in default blocks, with its index.
fn large(n: usize) -> Vec<u8> {
    let mut writer = cobsfile::WriterBuilder::new().build(Vec::new()).unwrap();
    let mut x = 1u64;
    for i in 0..n {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let record = format!(
            "{{\"n\":{i},\"pad\":\"{:032x}{:032x}\"}}",
            x,
            x.rotate_left(17)
        );
        writer.write_record(record.as_bytes()).unwrap();
    }
    writer.finish().unwrap()
}

/// Counted by a proxy in front of the server, a query fetches only what it reads: the first
/// blocks for `LIMIT 10`, the index for `count(*)` from statistics, and each byte about once
/// for a full scan however many partitions cut the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_fetches_only_what_it_reads() {
    use datafusion::arrow::array::{Array, Int64Array};
    use datafusion::prelude::SessionConfig;

    let dir = tempfile::tempdir().unwrap();
    let server = s3::Server::start(dir.path());
    server.bucket("logs");
    let bytes = large(400_000);
    let len = bytes.len() as u64;
    server
        .store("logs")
        .put(&"t.cobs".into(), bytes.into())
        .await
        .unwrap();
    let proxy = server.counted();
    let count = |batches: &[datafusion::arrow::array::RecordBatch]| {
        batches[0]
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap()
            .value(0)
    };
    for partitions in [1usize, 3] {
        let config = SessionConfig::new().with_target_partitions(partitions);
        let ctx = SessionContext::new_with_config(config);
        ctx.register_object_store(
            &url::Url::parse("s3://logs").unwrap(),
            Arc::new(proxy.store("logs")),
        );
        let options = CobsfileOptions::new()
            .records(cobsfile_datafusion::RecordFormat::Raw)
            .index_statistics(true);
        ctx.register_cobsfile("t", "s3://logs/t.cobs", options)
            .await
            .unwrap();
        let planned = proxy.take();
        let run = |sql: &'static str| {
            let ctx = ctx.clone();
            async move {
                let rows = ctx.sql(sql).await.unwrap().collect().await.unwrap();
                // Partitions a LIMIT made unneeded end at their next batch: what they fetch
                // until then counts for this query.
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                rows
            }
        };

        let rows = run("SELECT record FROM t LIMIT 10").await;
        assert_eq!(rows.iter().map(|b| b.num_rows()).sum::<usize>(), 10);
        let limit = proxy.take();

        let rows = run("SELECT count(*) FROM t").await;
        assert_eq!(count(&rows), 400_000);
        let counted = proxy.take();

        let rows = run("SELECT count(record) FROM t").await;
        assert_eq!(count(&rows), 400_000);
        let scanned = proxy.take();

        eprintln!(
            "{partitions} partition(s), {len} bytes: planning {planned}, LIMIT 10 {limit}, \
             count(*) {counted}, full scan {scanned}"
        );
        assert!(planned < len / 50, "planning fetched {planned} of {len}");
        assert!(counted < len / 100, "count(*) fetched {counted} of {len}");
        // The first fetch of each partition's ranges and the tail, whatever the file's size
        // (a LIMIT on a 1 GiB file: BENCHMARKS.md).
        assert!(
            limit < (4 << 20) * partitions as u64,
            "LIMIT 10 fetched {limit} of {len}"
        );
        assert!(
            scanned as f64 <= 1.05 * len as f64,
            "a full scan fetched {scanned} of {len}"
        );
        let _ = Array::len(rows[0].column(0).as_ref());
    }
}
