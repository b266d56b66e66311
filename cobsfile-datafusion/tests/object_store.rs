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
