//! Scans of objects in an S3-compatible server on loopback (`tests/s3/server`): an object
//! replaced or deleted between the query's planning and its scan is an error naming it, never
//! rows read with the ranges cut for the other object.

use std::sync::Arc;

use cobsfile_datafusion::{CobsfileContext, CobsfileOptions};
use datafusion::physical_plan::collect;
use datafusion::prelude::SessionContext;
use object_store::ObjectStoreExt;

#[path = "../../../tests/s3/server.rs"]
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

/// Bytes the server sent, through a counting proxy, for a table of `records` records of
/// about 90 bytes in one object: registering it (planning), `SELECT record ... LIMIT 10`,
/// `count(*)` (from the index) and `count(record)` (a full scan), on each of `partitions`.
async fn fetched(records: usize, partitions: &[usize]) -> (u64, Vec<[u64; 4]>) {
    use datafusion::arrow::array::Int64Array;
    use datafusion::prelude::SessionConfig;

    let dir = tempfile::tempdir().unwrap();
    let server = s3::Server::start(dir.path());
    server.bucket("logs");
    let bytes = large(records);
    let len = bytes.len() as u64;
    let mut upload = server
        .store("logs")
        .put_multipart(&"t.cobs".into())
        .await
        .unwrap();
    for part in bytes.chunks(64 << 20) {
        upload.put_part(part.to_vec().into()).await.unwrap();
    }
    upload.complete().await.unwrap();
    drop(bytes);
    let proxy = server.counted();
    let count = |batches: &[datafusion::arrow::array::RecordBatch]| {
        batches[0]
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap()
            .value(0) as usize
    };
    let mut out = Vec::new();
    for &partitions in partitions {
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
        assert_eq!(count(&rows), records);
        let counted = proxy.take();

        let rows = run("SELECT count(record) FROM t").await;
        assert_eq!(count(&rows), records);
        let scanned = proxy.take();
        eprintln!(
            "{partitions} partition(s), {len} bytes: planning {planned}, LIMIT 10 {limit}, \
             count(*) {counted}, full scan {scanned}"
        );
        out.push([planned, limit, counted, scanned]);
    }
    (len, out)
}

/// Counted by a proxy in front of the server, a query fetches only what it reads: the first
/// blocks for `LIMIT 10`, the index for `count(*)` from statistics, and each byte about once
/// for a full scan however many partitions cut the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_fetches_only_what_it_reads() {
    let (len, counts) = fetched(400_000, &[1, 3]).await;
    for (&[planned, limit, counted, scanned], partitions) in counts.iter().zip([1u64, 3]) {
        assert!(planned < len / 50, "planning fetched {planned} of {len}");
        // Raw records need no sample: the tail, and the start that shows a cobsfile.
        assert!(
            planned < 4 * cobsfile::TAIL_FETCH,
            "planning fetched {planned} of {len}"
        );
        assert!(counted < len / 100, "count(*) fetched {counted} of {len}");
        // The first fetches of each partition's ranges and the tail, whatever the file's
        // size (a LIMIT on 1 GiB: BENCHMARKS.md).
        assert!(
            limit < (4 << 20) * partitions,
            "LIMIT 10 fetched {limit} of {len}"
        );
        assert!(
            scanned as f64 <= 1.05 * len as f64,
            "a full scan fetched {scanned} of {len}"
        );
    }
}

/// The same on a large object (`COBSFILE_S3_RECORDS` records, 11 million by default: about
/// 1 GiB), for BENCHMARKS.md: `cargo test --release -p cobsfile-datafusion --test
/// object_store -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn bytes_fetched_from_a_large_object() {
    let records = std::env::var("COBSFILE_S3_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(11_000_000);
    let (len, counts) = fetched(records, &[1, 2, 4, 8]).await;
    println!("| partitions | planning | LIMIT 10 | count(*) | full scan |");
    println!("|---|---|---|---|---|");
    for (&[planned, limit, counted, scanned], partitions) in counts.iter().zip([1, 2, 4, 8]) {
        let pct = |n: u64| format!("{} ({:.3}%)", n, 100.0 * n as f64 / len as f64);
        println!(
            "| {partitions} | {} | {} | {} | {} ({:.4}x) |",
            pct(planned),
            pct(limit),
            pct(counted),
            scanned,
            scanned as f64 / len as f64
        );
    }
    println!("object: {len} bytes");
}

/// The first batch of `SELECT record FROM t` over `s3://logs/t.cobs`, and the stream of the
/// rest: a scan under way.
async fn scan_under_way(
    ctx: &SessionContext,
) -> datafusion::physical_plan::SendableRecordBatchStream {
    use futures::StreamExt;
    let options = CobsfileOptions::new().records(cobsfile_datafusion::RecordFormat::Raw);
    ctx.register_cobsfile("t", "s3://logs/t.cobs", options)
        .await
        .unwrap();
    let mut stream = ctx
        .sql("SELECT record FROM t")
        .await
        .unwrap()
        .execute_stream()
        .await
        .unwrap();
    let first = stream.next().await.unwrap().unwrap();
    assert!(first.num_rows() > 0);
    stream
}

/// The rest of `stream`: the rows it gave, or its error.
async fn rest(
    mut stream: datafusion::physical_plan::SendableRecordBatchStream,
) -> Result<usize, String> {
    use futures::StreamExt;
    let mut rows = 0;
    while let Some(batch) = stream.next().await {
        rows += batch.map_err(|e| e.to_string())?.num_rows();
    }
    Ok(rows)
}

/// An object replaced while a scan is reading it (between two of its range requests): the
/// scan fails naming it, and never returns rows of the other object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_replaced_during_a_scan_fails_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = s3::Server::start(dir.path());
    server.bucket("logs");
    let store = Arc::new(server.store("logs"));
    let key: object_store::path::Path = "t.cobs".into();
    store.put(&key, large(200_000).into()).await.unwrap();
    let ctx = SessionContext::new();
    ctx.register_object_store(&url::Url::parse("s3://logs").unwrap(), store.clone());
    let stream = scan_under_way(&ctx).await;
    // The same size, other bytes: only the ETag tells.
    let mut other = large(200_000);
    let at = other.len() / 2;
    other[at] ^= 1;
    store.put(&key, other.into()).await.unwrap();
    let e = rest(stream).await.unwrap_err();
    assert!(
        e.contains("t.cobs: the object changed since the query listed it"),
        "{e}"
    );
}

/// A server that goes away while a scan reads from it: the scan fails with one message
/// naming the object, after the client's retries, and does not hang.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_gone_during_a_scan_fails_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = s3::Server::start(dir.path());
    server.bucket("logs");
    let store = Arc::new(server.store("logs"));
    store
        .put(&"t.cobs".into(), large(200_000).into())
        .await
        .unwrap();
    let ctx = SessionContext::new();
    ctx.register_object_store(&url::Url::parse("s3://logs").unwrap(), store.clone());
    let stream = scan_under_way(&ctx).await;
    drop(server);
    let started = std::time::Instant::now();
    let e = rest(stream).await.unwrap_err();
    assert!(e.contains("t.cobs"), "{e}");
    assert!(!e.contains('\n'), "{e}");
    assert!(started.elapsed() < std::time::Duration::from_secs(120));
}
