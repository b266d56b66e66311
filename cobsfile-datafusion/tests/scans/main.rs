//! The DataFusion format's integration tests, one binary: each binary links DataFusion whole
//! (about 160 MB in a debug build), so four of them cost a test build 0.5 GB of disk and three
//! links more than one. `scan_memory` stays apart: it counts the process's allocations.

mod splits;
mod sql;
mod store;
mod time;
