//! A table's Arrow schema: from the Avro schema a file announces, inferred from a sample of
//! JSON records, or the fixed schema of raw records.
//!
//! The schema carries how its rows are made, in its metadata (`cobsfile.records`, and for
//! Avro the reader schema under `avro.schema`), so a scan planned on one machine reads the
//! same way on another: the plan's schema is all an executor needs.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use arrow_avro::reader::ReaderBuilder as AvroArrowBuilder;
use arrow_avro::schema::{AvroSchema, Fingerprint, SchemaStore};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::common::{exec_datafusion_err, plan_datafusion_err, Result};

use cobsfile::avro::Schemas;
use cobsfile::{BlockType, Error as FileError};

use crate::options::{CobsfileOptions, RecordFormat};

/// The schema metadata key naming how rows are made: `avro`, `json` or `raw`.
pub const RECORDS_KEY: &str = "cobsfile.records";
/// The schema metadata key holding the Avro schema (JSON) records are resolved to.
pub const AVRO_SCHEMA_KEY: &str = "avro.schema";

/// The schema metadata key naming the column of records' event times, if the table has one.
pub const TIME_COLUMN_KEY: &str = "cobsfile.time_column";

/// The schema metadata key naming the column of each row's file (option `file_column`).
pub const FILE_COLUMN_KEY: &str = "cobsfile.file_column";

/// The name the event time column has when nothing names it.
pub const DEFAULT_TIME_COLUMN: &str = "time";

/// The type of the event time column: nanoseconds since the Unix epoch, UTC, as the file
/// holds them (spec 8.8).
pub fn time_type() -> DataType {
    DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()))
}

/// The columns of raw mode, in order.
pub const RAW_COLUMNS: [&str; 4] = ["record", "file", "block_offset", "ordinal"];

/// How rows are made, resolved for a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Avro records resolved to this reader schema (JSON).
    Avro(String),
    Json,
    Raw,
}

/// Raw mode's schema: each record as `Binary`, the file it is in, the offset of its block's
/// opening sync byte, and its place in that block (from 0). The last two name a record
/// however the file is split.
pub fn raw_schema() -> Schema {
    Schema::new(vec![
        Field::new(RAW_COLUMNS[0], DataType::Binary, false),
        Field::new(RAW_COLUMNS[1], DataType::Utf8, false),
        Field::new(RAW_COLUMNS[2], DataType::UInt64, false),
        Field::new(RAW_COLUMNS[3], DataType::UInt64, false),
    ])
    .with_metadata(HashMap::from([(
        RECORDS_KEY.to_string(),
        "raw".to_string(),
    )]))
}

/// The Arrow schema of records of the Avro schema `json`, as the Arrow project's Avro reader
/// maps it (records to structs, arrays to lists, maps, unions, logical types).
pub fn avro_schema(json: &str) -> Result<Schema> {
    let store = store_of(std::iter::once((0, json)))?;
    let decoder = guard(|| {
        AvroArrowBuilder::new()
            .with_writer_schema_store(store)
            .with_reader_schema(AvroSchema::new(json.to_string()))
            .build_decoder()
    })
    .and_then(|r| r.map_err(|e| e.to_string()))
    .map_err(|e| plan_datafusion_err!("Avro schema cannot be read as Arrow: {e}"))?;
    let schema = decoder.schema();
    let mut metadata = schema.metadata().clone();
    metadata.insert(RECORDS_KEY.to_string(), "avro".to_string());
    metadata.insert(AVRO_SCHEMA_KEY.to_string(), json.to_string());
    Ok(Schema::new(schema.fields().clone()).with_metadata(metadata))
}

/// A writer-schema store of Avro schemas under the fingerprints the file names them by.
pub(crate) fn store_of<'a>(schemas: impl Iterator<Item = (u64, &'a str)>) -> Result<SchemaStore> {
    let mut store = SchemaStore::new();
    for (fingerprint, json) in schemas {
        store
            .set(
                Fingerprint::Rabin(fingerprint),
                AvroSchema::new(json.to_string()),
            )
            .map_err(|e| exec_datafusion_err!("Avro schema {fingerprint:016x}: {e}"))?;
    }
    Ok(store)
}

/// Runs `f`, turning a panic of a dependency into an error message.
pub(crate) fn guard<T>(f: impl FnOnce() -> T) -> std::result::Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|panic| panic_message(&*panic))
}

/// What a panic's payload says.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic".to_string())
}

/// How a table's schema says its rows are made (`auto` when it does not say).
pub(crate) fn mode_of(schema: &Schema, options: &CobsfileOptions) -> Result<Option<Mode>> {
    let declared = schema.metadata().get(RECORDS_KEY).map(String::as_str);
    let records = match declared {
        Some(name) => name.parse()?,
        None => options.records,
    };
    Ok(match records {
        RecordFormat::Avro => {
            let json = schema
                .metadata()
                .get(AVRO_SCHEMA_KEY)
                .or(options.reader_schema.as_ref())
                .ok_or_else(|| {
                    plan_datafusion_err!("an Avro cobsfile table needs its Avro schema")
                })?;
            Some(Mode::Avro(json.clone()))
        }
        RecordFormat::Json => Some(Mode::Json),
        RecordFormat::Raw => Some(Mode::Raw),
        RecordFormat::Auto => None,
    })
}

/// What one file tells inference.
pub(crate) struct Sample {
    /// The Avro schemas the file announces, in file order (fingerprint, JSON).
    pub avro: Vec<(u64, String)>,
    /// Records sampled, each parsed as JSON if it parses: (block offset, value).
    pub records: Vec<(u64, Option<serde_json::Value>)>,
    /// The top-level keys of the sampled JSON objects, in the order they first appear: the
    /// order of the table's columns (a parsed `Value` may sort its keys).
    pub keys: Vec<String>,
    /// Whether the file has event times: records sampled with times, time blocks in its
    /// index, or a field named as their source.
    pub timed: bool,
    /// The field the file's times were taken from, as its metadata names it
    /// ([`cobsfile::TIME_FIELD_KEY`]).
    pub time_field: Option<String>,
}

/// The keys of a JSON object, in order, its values skipped.
struct Keys(Vec<String>);

impl<'de> serde::Deserialize<'de> for Keys {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Keys;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<Keys, A::Error> {
                let mut keys = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    map.next_value::<serde::de::IgnoredAny>()?;
                    keys.push(key);
                }
                Ok(Keys(keys))
            }
        }
        d.deserialize_map(Visit)
    }
}

/// A file's Avro schemas (`schemas`) and, if it has none, up to `max_records` of its records,
/// read by `reader` from its start.
pub(crate) fn sample<S: cobsfile::Source>(
    schemas: &Schemas,
    mut reader: cobsfile::Reader<S>,
    options: &CobsfileOptions,
    max_records: usize,
) -> Sample {
    // The schemas in file order: the last announced is the newest.
    let avro: Vec<(u64, String)> = schemas
        .iter()
        .map(|schema| (schema.fingerprint(), schema.json().to_string()))
        .collect();
    let mut records = Vec::new();
    let mut timed = false;
    let (mut keys, mut seen) = (Vec::new(), std::collections::HashSet::new());
    let typed = match options.records {
        RecordFormat::Auto => !avro.is_empty() || options.reader_schema.is_some(),
        RecordFormat::Avro => true,
        RecordFormat::Json | RecordFormat::Raw => false,
    };
    // Raw records take no schema from their contents: nothing to sample (a table in a store
    // would fetch its first data blocks for nothing).
    let json = !typed && options.records != RecordFormat::Raw;
    if json && max_records > 0 {
        while records.len() < max_records {
            match reader.next_block() {
                None => break,
                Some(Err(FileError::Damaged { .. })) => continue,
                Some(Err(_)) => break,
                Some(Ok(block)) if block.info().block_type == BlockType::Data => {
                    let offset = block.info().offset;
                    timed |= block.times().is_some();
                    for record in block.records().take(max_records - records.len()) {
                        let value = serde_json::from_slice::<serde_json::Value>(record).ok();
                        if let Ok(Keys(found)) = serde_json::from_slice::<Keys>(record) {
                            for key in found {
                                if seen.insert(key.clone()) {
                                    keys.push(key);
                                }
                            }
                        }
                        records.push((offset, value));
                    }
                }
                Some(Ok(_)) => {}
            }
        }
    }
    Sample {
        avro,
        records,
        keys,
        timed,
        time_field: None,
    }
}

/// The table schema of files sampled in order (`name` names each sample's file).
pub(crate) fn infer(samples: &[(String, Sample)], options: &CobsfileOptions) -> Result<SchemaRef> {
    let avro_file = samples.iter().find(|(_, s)| !s.avro.is_empty());
    let records = match options.records {
        RecordFormat::Auto if options.reader_schema.is_some() || avro_file.is_some() => {
            RecordFormat::Avro
        }
        RecordFormat::Auto => {
            let sampled = samples.iter().flat_map(|(_, s)| &s.records);
            let mut any = false;
            let mut all_objects = true;
            for (_, value) in sampled {
                any = true;
                all_objects &= matches!(value, Some(serde_json::Value::Object(_)));
            }
            if any && all_objects {
                RecordFormat::Json
            } else {
                RecordFormat::Raw
            }
        }
        other => other,
    };
    let schema = match records {
        RecordFormat::Avro => {
            let json = match (&options.reader_schema, avro_file) {
                (Some(json), _) => json.clone(),
                (None, Some((_, sample))) => sample.avro.last().expect("non-empty").1.clone(),
                (None, None) => {
                    let name = samples
                        .first()
                        .map(|(n, _)| n.as_str())
                        .unwrap_or("no file");
                    return Err(plan_datafusion_err!(
                        "{name}: no Avro schema in the file (records 'avro' needs one, or \
                         the option reader_schema)"
                    ));
                }
            };
            avro_schema(&json)?
        }
        RecordFormat::Json => {
            let mut values = Vec::new();
            for (name, sample) in samples {
                for (offset, value) in &sample.records {
                    match value {
                        Some(v @ serde_json::Value::Object(_)) => values.push(v),
                        _ => {
                            return Err(plan_datafusion_err!(
                                "{name}: a record of the block at offset {offset} is not a JSON \
                                 object (records 'json' needs one object per record)"
                            ))
                        }
                    }
                }
            }
            let schema = datafusion::arrow::json::reader::infer_json_schema_from_iterator(
                values.into_iter().map(Ok),
            )?;
            // Columns in the order their keys first appear in the files.
            let mut order: HashMap<&str, usize> = HashMap::new();
            for key in samples.iter().flat_map(|(_, s)| &s.keys) {
                let next = order.len();
                order.entry(key.as_str()).or_insert(next);
            }
            let mut fields: Vec<_> = schema.fields().iter().cloned().collect();
            fields.sort_by_key(|f| order.get(f.name().as_str()).copied().unwrap_or(usize::MAX));
            let schema = Schema::new_with_metadata(fields, schema.metadata().clone());
            let mut metadata = schema.metadata().clone();
            metadata.insert(RECORDS_KEY.to_string(), "json".to_string());
            schema.with_metadata(metadata)
        }
        RecordFormat::Raw | RecordFormat::Auto => raw_schema(),
    };
    let declared = samples.iter().find_map(|(_, s)| s.time_field.clone());
    let name = match &options.time_column {
        Some(name) => Some(name.clone()).filter(|name| !name.is_empty()),
        None => declared.or_else(|| {
            let timed = samples.iter().any(|(_, s)| s.timed);
            timed.then(|| DEFAULT_TIME_COLUMN.to_string())
        }),
    };
    let schema = match name {
        Some(name) => with_time_column(schema, &name),
        None => schema,
    };
    Ok(Arc::new(with_file_column(schema, options)?))
}

/// `schema` with the column of each row's file that the option `file_column` names, last
/// (a raw table has its own, `file`, and no other).
pub(crate) fn with_file_column(schema: Schema, options: &CobsfileOptions) -> Result<Schema> {
    let Some(name) = options.file_column.as_deref().filter(|n| !n.is_empty()) else {
        return Ok(schema);
    };
    if schema.metadata().get(RECORDS_KEY).map(String::as_str) == Some("raw") {
        return Ok(schema);
    }
    if schema.column_with_name(name).is_some() {
        return Err(plan_datafusion_err!(
            "the records have a column {name:?}: name the column of files otherwise (option \
             file_column)"
        ));
    }
    let mut fields: Vec<_> = schema.fields().iter().cloned().collect();
    fields.push(Arc::new(Field::new(name, DataType::Utf8, false)));
    let mut metadata = schema.metadata().clone();
    metadata.insert(FILE_COLUMN_KEY.to_string(), name.to_string());
    Ok(Schema::new_with_metadata(fields, metadata))
}

/// The index of the column of each row's file in a table's schema, if it has one (a raw
/// table's `file` is made with the records').
pub(crate) fn file_column_of(schema: &Schema) -> Option<usize> {
    let name = schema.metadata().get(FILE_COLUMN_KEY)?;
    let (at, field) = schema.column_with_name(name)?;
    (*field.data_type() == DataType::Utf8).then_some(at)
}

/// `schema` with a column of records' event times named `name` ([`time_type`], nullable: a
/// record without a time has none): in place of the column of that name if there is one (the
/// field `pack --time-field` took the times from, now typed), else after the others.
pub fn with_time_column(schema: Schema, name: &str) -> Schema {
    let column = Arc::new(Field::new(name, time_type(), true));
    let mut fields: Vec<_> = schema.fields().iter().cloned().collect();
    match fields.iter().position(|f| f.name() == name) {
        Some(at) => fields[at] = column,
        None => fields.push(column),
    }
    let mut metadata = schema.metadata().clone();
    metadata.insert(TIME_COLUMN_KEY.to_string(), name.to_string());
    Schema::new_with_metadata(fields, metadata)
}

/// The index of the event time column of a table's schema: the one its metadata names, or
/// for a schema written by hand, the column the option `time_column` names (if of
/// [`time_type`]).
pub(crate) fn time_column_of(schema: &Schema, options: &CobsfileOptions) -> Option<usize> {
    let name = match schema.metadata().get(TIME_COLUMN_KEY) {
        Some(name) => name.as_str(),
        None => options.time_column.as_deref().filter(|n| !n.is_empty())?,
    };
    let (at, field) = schema.column_with_name(name)?;
    (*field.data_type() == time_type()).then_some(at)
}
