//! The DataFusion format's integration tests, one binary: each binary links DataFusion whole
//! (about 160 MB in a debug build), so four of them cost a test build 0.5 GB of disk and three
//! links more than one. `scan_memory` stays apart: it counts the process's allocations.

mod splits;
mod sql;
mod store;
mod time;

use std::path::Path;

use datafusion::prelude::{SessionConfig, SessionContext};

/// Writes `bytes` to `name` in `dir`, and gives the path.
fn write(dir: &Path, name: &str, bytes: &[u8]) -> String {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path.to_str().unwrap().to_string()
}

/// A session whose scans cut files into `partitions` byte ranges, however small.
fn context(partitions: usize) -> SessionContext {
    let config = SessionConfig::new()
        .with_target_partitions(partitions)
        .with_repartition_file_min_size(1)
        .with_batch_size(100);
    SessionContext::new_with_config(config)
}
