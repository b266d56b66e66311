//! How a table of cobsfiles is read: the record encoding, what damage does, schema inference.
//!
//! The options travel as a map of strings: the `OPTIONS (...)` of `CREATE EXTERNAL TABLE`, and
//! what the Ballista codecs carry to executors.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use cobsfile::avro::SchemaLimits;
use datafusion::common::{plan_datafusion_err, DataFusionError, Result};

/// How each record becomes a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecordFormat {
    /// Avro when the file announces an Avro schema, JSON when sampled records are JSON
    /// objects, raw otherwise.
    #[default]
    Auto,
    /// Avro single-object records (spec 15); the Arrow schema comes from the Avro schema.
    Avro,
    /// One JSON object per record; the schema is inferred from a sample or declared.
    Json,
    /// Each record as `Binary`, with the file, its block's offset and its place in the block.
    Raw,
}

impl RecordFormat {
    /// The option's value for this format.
    pub fn name(self) -> &'static str {
        match self {
            RecordFormat::Auto => "auto",
            RecordFormat::Avro => "avro",
            RecordFormat::Json => "json",
            RecordFormat::Raw => "raw",
        }
    }
}

impl FromStr for RecordFormat {
    type Err = DataFusionError;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(RecordFormat::Auto),
            "avro" => Ok(RecordFormat::Avro),
            "json" => Ok(RecordFormat::Json),
            "raw" => Ok(RecordFormat::Raw),
            _ => Err(plan_datafusion_err!(
                "cobsfile option 'records' is '{s}': expected auto, avro, json or raw"
            )),
        }
    }
}

impl fmt::Display for RecordFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a scan does with damaged bytes and with records it cannot place in a row because
/// damage took what they need (their schema's metadata block): the library's policy
/// (`skip`, or `error`: fail the query naming the file and byte range). A table's option
/// `on_damage` sets it; the library applies it.
pub use cobsfile::OnDamage;

/// The default number of JSON records sampled to infer a table's schema.
pub const DEFAULT_SCHEMA_INFER_MAX_RECORDS: usize = 1000;

/// The extension of cobsfiles in a directory or glob: `.cobs`.
pub const DEFAULT_FILE_EXTENSION: &str = ".cobs";

/// Options of a cobsfile table.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CobsfileOptions {
    /// How records become rows (option `records`).
    pub records: RecordFormat,
    /// What damage does (option `on_damage`).
    pub on_damage: OnDamage,
    /// JSON records sampled, over all files, to infer a schema (option `schema_infer_max_records`).
    pub schema_infer_max_records: usize,
    /// Whether row counts come from each file's index block (option `index_statistics`, off
    /// by default), so that `SELECT count(*)` reads only indexes. The index counts records as
    /// written, unchecked: on a damaged file, or one whose records a scan cannot all return
    /// (a lost schema, records that are not JSON), a scan returns fewer, and the answer from
    /// the index would hide it. Never used with `on_damage` `error`, whose answers are all
    /// checked.
    pub index_statistics: bool,
    /// An Avro schema (JSON) every Avro record is resolved to (option `reader_schema`); by
    /// default the schema the first file announces last.
    pub reader_schema: Option<String>,
    /// The extension files in a directory or glob must have (option `file_extension`).
    pub file_extension: String,
    /// The largest block body a reader accepts (option `max_body_size`); the library's
    /// default when unset.
    pub max_body_size: Option<usize>,
    /// The most Avro schemas held from one file (option `max_schemas`); the library's
    /// default (4,096) when unset.
    pub max_schemas: Option<usize>,
    /// The most bytes of Avro schema text held from one file (option `max_schema_bytes`);
    /// the library's default (16 MiB) when unset.
    pub max_schema_bytes: Option<usize>,
    /// The name of the column of records' event times (option `time_column`; `""` for none).
    /// Unset, a table whose files have times gets one: named as the field `pack
    /// --time-field` took the times from, which it replaces, or else `time`.
    pub time_column: Option<String>,
    /// The name of a column holding each row's file, as the table lists it (option
    /// `file_column`; unset or `""`: none). Raw tables have one, `file`, always.
    pub file_column: Option<String>,
}

impl Default for CobsfileOptions {
    fn default() -> Self {
        CobsfileOptions {
            records: RecordFormat::Auto,
            on_damage: OnDamage::Skip,
            schema_infer_max_records: DEFAULT_SCHEMA_INFER_MAX_RECORDS,
            index_statistics: false,
            reader_schema: None,
            file_extension: DEFAULT_FILE_EXTENSION.to_string(),
            max_body_size: None,
            max_schemas: None,
            max_schema_bytes: None,
            time_column: None,
            file_column: None,
        }
    }
}

impl CobsfileOptions {
    /// The default options.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets how records become rows.
    pub fn records(mut self, records: RecordFormat) -> Self {
        self.records = records;
        self
    }

    /// Sets what damage does.
    pub fn on_damage(mut self, on_damage: OnDamage) -> Self {
        self.on_damage = on_damage;
        self
    }

    /// Sets whether row counts come from index blocks.
    pub fn index_statistics(mut self, enabled: bool) -> Self {
        self.index_statistics = enabled;
        self
    }

    /// Sets the Avro schema records are resolved to.
    pub fn reader_schema(mut self, schema: impl Into<String>) -> Self {
        self.reader_schema = Some(schema.into());
        self
    }

    /// Sets the extension files in a directory must have (`""` for every file).
    pub fn file_extension(mut self, extension: impl Into<String>) -> Self {
        self.file_extension = extension.into();
        self
    }

    /// Sets the name of the event time column (`""`: none).
    pub fn time_column(mut self, name: impl Into<String>) -> Self {
        self.time_column = Some(name.into());
        self
    }

    /// Sets the name of the column of each row's file (`""`: none).
    pub fn file_column(mut self, name: impl Into<String>) -> Self {
        self.file_column = Some(name.into());
        self
    }

    /// Sets the number of JSON records sampled to infer a schema.
    pub fn schema_infer_max_records(mut self, records: usize) -> Self {
        self.schema_infer_max_records = records;
        self
    }

    /// Sets one option by name, as `CREATE EXTERNAL TABLE ... OPTIONS ('name' 'value')` does
    /// (a `format.` prefix is accepted).
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let key = key.strip_prefix("format.").unwrap_or(key);
        let number = |value: &str| {
            value.parse::<usize>().map_err(|_| {
                plan_datafusion_err!("cobsfile option '{key}' is '{value}': expected a number")
            })
        };
        match key {
            "records" => self.records = value.parse()?,
            "on_damage" => {
                self.on_damage = value
                    .parse()
                    .map_err(|e| plan_datafusion_err!("cobsfile option 'on_damage' is {e}"))?
            }
            "schema_infer_max_records" => self.schema_infer_max_records = number(value)?,
            "index_statistics" => {
                self.index_statistics = match value.to_ascii_lowercase().as_str() {
                    "true" => true,
                    "false" => false,
                    _ => {
                        return Err(plan_datafusion_err!(
                        "cobsfile option 'index_statistics' is '{value}': expected true or false"
                    ))
                    }
                }
            }
            "reader_schema" => self.reader_schema = Some(value.to_string()),
            "file_extension" => self.file_extension = value.to_string(),
            "max_body_size" => self.max_body_size = Some(number(value)?),
            "max_schemas" => self.max_schemas = Some(number(value)?),
            "max_schema_bytes" => self.max_schema_bytes = Some(number(value)?),
            "time_column" => self.time_column = Some(value.to_string()),
            "file_column" => self.file_column = Some(value.to_string()),
            _ => {
                return Err(plan_datafusion_err!(
                    "unknown cobsfile option '{key}': expected records, on_damage, \
                     schema_infer_max_records, index_statistics, reader_schema, \
                     file_extension, max_body_size, max_schemas, max_schema_bytes, \
                     time_column or file_column"
                ))
            }
        }
        Ok(())
    }

    /// These options changed by each entry of `map` (see [`set`](Self::set)).
    pub fn with_map(mut self, map: &HashMap<String, String>) -> Result<Self> {
        let mut entries: Vec<_> = map.iter().collect();
        entries.sort();
        for (key, value) in entries {
            self.set(key, value)?;
        }
        Ok(self)
    }

    /// Every option as a name and a value: what [`with_map`](Self::with_map) reads back.
    pub fn to_map(&self) -> HashMap<String, String> {
        let mut map = HashMap::from([
            ("records".to_string(), self.records.to_string()),
            ("on_damage".to_string(), self.on_damage.to_string()),
            (
                "schema_infer_max_records".to_string(),
                self.schema_infer_max_records.to_string(),
            ),
            (
                "index_statistics".to_string(),
                self.index_statistics.to_string(),
            ),
            ("file_extension".to_string(), self.file_extension.clone()),
        ]);
        if let Some(schema) = &self.reader_schema {
            map.insert("reader_schema".to_string(), schema.clone());
        }
        if let Some(name) = &self.time_column {
            map.insert("time_column".to_string(), name.clone());
        }
        if let Some(name) = &self.file_column {
            map.insert("file_column".to_string(), name.clone());
        }
        for (key, value) in [
            ("max_body_size", self.max_body_size),
            ("max_schemas", self.max_schemas),
            ("max_schema_bytes", self.max_schema_bytes),
        ] {
            if let Some(value) = value {
                map.insert(key.to_string(), value.to_string());
            }
        }
        map
    }

    /// The limits on the Avro schemas held from one file.
    pub(crate) fn schema_limits(&self) -> SchemaLimits {
        let mut limits = SchemaLimits::default();
        if let Some(max) = self.max_schemas {
            limits = limits.max_schemas(max);
        }
        if let Some(max) = self.max_schema_bytes {
            limits = limits.max_bytes(max as u64);
        }
        limits
    }

    /// The library's reader options these select.
    pub(crate) fn reader(&self) -> cobsfile::ReaderBuilder {
        let builder = cobsfile::ReaderBuilder::new().on_damage(self.on_damage.clone());
        match self.max_body_size {
            Some(size) => builder.max_body_size(size),
            None => builder,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_survive_their_map() {
        let options = CobsfileOptions::new()
            .records(RecordFormat::Json)
            .on_damage(OnDamage::Fail)
            .index_statistics(false)
            .reader_schema("\"long\"")
            .file_extension(".log")
            .time_column("ts")
            .schema_infer_max_records(7);
        let back = CobsfileOptions::new().with_map(&options.to_map()).unwrap();
        assert_eq!(back, options);
    }

    #[test]
    fn a_wrong_option_is_named() {
        let mut options = CobsfileOptions::new();
        let e = options.set("format.records", "xml").unwrap_err();
        assert!(e.to_string().contains("'records' is 'xml'"), "{e}");
        let e = options.set("colour", "red").unwrap_err();
        assert!(
            e.to_string().contains("unknown cobsfile option 'colour'"),
            "{e}"
        );
        options.set("format.on_damage", "ERROR").unwrap();
        assert_eq!(options.on_damage, OnDamage::Fail);
    }
}
