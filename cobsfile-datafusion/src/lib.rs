//! cobsfiles in [Apache DataFusion](https://datafusion.apache.org): SQL and data frames over a
//! cobsfile, a directory of them or a glob, on one machine or, through Ballista's codecs
//! ([`codec`]), on many.
//!
//! ```no_run
//! use cobsfile_datafusion::{CobsfileContext, CobsfileOptions};
//! use datafusion::prelude::SessionContext;
//!
//! # async fn run() -> datafusion::common::Result<()> {
//! let ctx = SessionContext::new();
//! ctx.register_cobsfile("events", "logs/", CobsfileOptions::new()).await?;
//! ctx.sql("SELECT service, count(*) FROM events GROUP BY service").await?.show().await?;
//!
//! // Or in SQL:
//! ctx.register_cobsfile_format()?;
//! ctx.sql("CREATE EXTERNAL TABLE logs STORED AS COBSFILE LOCATION 'logs/'").await?;
//! # Ok(()) }
//! ```
//!
//! **Rows.** A file with an Avro schema (typed records) gives the Arrow schema the Avro schema
//! maps to; records that are JSON objects give a schema inferred from a sample; any other
//! records are read raw: the record as `Binary`, its file, its block's offset and its place in
//! the block (option `records` chooses). The schema's metadata says which, so a plan read on
//! another machine decodes the same way.
//!
//! **Splits.** DataFusion cuts large files into byte ranges; each range reads the blocks whose
//! opening sync byte lies in it (the library's range reads), so every intact record is read
//! once whatever the cut.
//!
//! **Object storage.** Tables may be at `s3://bucket/key` or `s3://bucket/prefix/` in any
//! S3-compatible store, configured by the standard `AWS_*` environment variables
//! ([`register_store`]).
//!
//! **Damage.** Damaged bytes never become rows. They are skipped, counted in the scan's
//! metrics (`damaged_ranges`, `damaged_bytes`, `skipped_records`) and logged as warnings
//! naming the file and byte range; with option `on_damage` `error` they fail the query.
#![deny(missing_docs)]

pub mod codec;
mod columns;
mod context;
mod format;
mod options;
mod read;
mod scan;
mod schema;
mod source;
mod store;

pub use context::{listing_table, register_format, CobsfileContext};
pub use format::{CobsfileFormat, CobsfileFormatFactory, FORMAT_NAME};
pub use options::{
    CobsfileOptions, OnDamage, RecordFormat, DEFAULT_FILE_EXTENSION,
    DEFAULT_SCHEMA_INFER_MAX_RECORDS,
};
pub use read::{read_file, read_object, FileBatches};
pub use scan::Damage;
pub use schema::{
    avro_schema, raw_schema, time_type, with_time_column, AVRO_SCHEMA_KEY, DEFAULT_TIME_COLUMN,
    RAW_COLUMNS, RECORDS_KEY, TIME_COLUMN_KEY,
};
pub use source::{CobsfileSource, DamageHook};
pub use store::{
    fetch, fetch_into, fetch_mapped, register_store, store_error_line, ObjectStores, RemoteObject,
    StoreFetch, Wait,
};
