//! Typed records: Avro schemas in the file, records in Avro's single-object encoding (feature
//! `avro`; spec/FORMAT.md, section 15).
//!
//! A file announces a schema in a metadata block (keys `avro.schema`, the schema's JSON, and
//! `avro.fingerprint`, its 64-bit CRC-64-AVRO fingerprint) before the first record written
//! with it. Each record is one Avro datum in Avro's single-object encoding: the marker `c3 01`,
//! the 8-byte fingerprint of its writer schema, then the Avro binary datum. So every record
//! names its schema: a reader never decodes a record with a schema it was not written with,
//! whatever damage took (a lost schema block, logs appended by writers whose schemas evolved,
//! files concatenated), and a schema may change in the middle of a file.
//!
//! - [`AvroWriter`] writes values (`apache_avro::types::Value`s or `serde::Serialize` ones)
//!   over a [`Writer`](crate::Writer) or an [`Appender`](crate::Appender).
//! - [`AvroReader`] reads them back as `Value`s or into `T: DeserializeOwned`, optionally
//!   resolved to a reader schema, reporting what it cannot decode with the offset of the
//!   record's block and going on.
//! - [`WriterSchema`] is a schema with its JSON text and fingerprint; [`Schemas`] holds them by
//!   fingerprint (the file's, and any a caller supplies).
//!
//! ```
//! use cobsfile::avro::{AvroReaderBuilder, AvroWriter, WriterSchema};
//!
//! #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
//! struct V1 { id: i64 }
//! #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
//! struct V2 { id: i64, tag: String }
//!
//! let v1 = WriterSchema::parse(r#"{"type":"record","name":"E","fields":[
//!     {"name":"id","type":"long"}]}"#)?;
//! let v2 = WriterSchema::parse(r#"{"type":"record","name":"E","fields":[
//!     {"name":"id","type":"long"},{"name":"tag","type":"string","default":"none"}]}"#)?;
//!
//! // A file whose schema changes half way.
//! let mut writer = AvroWriter::new(cobsfile::Writer::new(Vec::new())?, v1)?;
//! writer.write(&V1 { id: 1 })?;
//! writer.change_schema(v2.clone())?;
//! writer.write(&V2 { id: 2, tag: "new".into() })?;
//! let file = writer.finish()?;
//!
//! // Read every record as the newer type: the older ones get the default.
//! let mut reader = AvroReaderBuilder::new()
//!     .reader_schema(v2.schema().clone())
//!     .build(cobsfile::ReaderBuilder::new().from_slice(&file));
//! let mut events = Vec::new();
//! while let Some(event) = reader.next_as::<V2>() {
//!     events.push(event?);
//! }
//! assert_eq!(events, [V2 { id: 1, tag: "none".into() }, V2 { id: 2, tag: "new".into() }]);
//! # Ok::<(), cobsfile::avro::Error>(())
//! ```

mod canonical;
mod check;
pub mod container;
mod error;
pub mod json;
mod path;
mod reader;
mod resolve;
mod schema;
mod value;
mod writer;

pub use apache_avro;
pub use check::{DatumLimits, Names as NamedTypes, Visit, MAX_DEPTH_CEILING};
pub use error::{Error, RecordProblem, Result, SchemaProblem};
pub use reader::{AvroReader, AvroReaderBuilder, Datum, RecordCheck};
pub use schema::{
    SchemaLimits, Schemas, WriterSchema, DEFAULT_MAX_SCHEMAS, DEFAULT_MAX_SCHEMA_BYTES,
};
pub use writer::{timestamp_field, AvroWriter, RecordSink};

/// The metadata key of a schema's JSON text.
pub const SCHEMA_KEY: &str = "avro.schema";

/// The metadata key of a schema's fingerprint: 8 bytes, little-endian.
pub const FINGERPRINT_KEY: &str = "avro.fingerprint";

/// The first two bytes of every record: Avro's single-object encoding marker.
pub const MARKER: [u8; 2] = [0xc3, 0x01];

/// The bytes before each datum: the marker and the 8-byte fingerprint.
pub const PREFIX_LEN: usize = 10;
