//! The typed lines of the Avro vectors (spec section 14): what a typed reader yields, one line
//! per value or error. A module of `tests/vectors.rs`, whose quoting of bytes it shares.

use apache_avro::types::Value;
use cobsfile::avro::{AvroReader, Error};
use cobsfile::Source;

/// A value in the vectors' notation: JSON-like, records as `{name: value, ...}` in field
/// order, maps as `{"key": value, ...}` by key, bytes, fixed and strings quoted as the
/// vectors quote bytes, unions as their branch's value, enums as their symbol, logical types
/// as `type(number)`.
pub fn show(value: &Value) -> String {
    // Quoted as the vectors quote bytes everywhere.
    let quote = super::esc;
    let list = |items: Vec<String>| items.join(", ");
    match value {
        Value::Null => "null".into(),
        Value::Boolean(b) => b.to_string(),
        Value::Int(n) => n.to_string(),
        Value::Long(n) => n.to_string(),
        Value::Float(f) => format!("{f:?}"),
        Value::Double(f) => format!("{f:?}"),
        Value::Bytes(b) | Value::Fixed(_, b) => quote(b),
        Value::String(s) | Value::Enum(_, s) => quote(s.as_bytes()),
        Value::Union(_, inner) => show(inner),
        Value::Array(items) => format!("[{}]", list(items.iter().map(show).collect())),
        Value::Map(entries) => {
            let mut keys: Vec<&String> = entries.keys().collect();
            keys.sort();
            let items = keys
                .into_iter()
                .map(|k| format!("{}: {}", quote(k.as_bytes()), show(&entries[k])));
            format!("{{{}}}", list(items.collect()))
        }
        Value::Record(fields) => {
            let items = fields.iter().map(|(k, v)| format!("{k}: {}", show(v)));
            format!("{{{}}}", list(items.collect()))
        }
        Value::Date(n) => format!("date({n})"),
        Value::TimeMillis(n) => format!("time-millis({n})"),
        Value::TimeMicros(n) => format!("time-micros({n})"),
        Value::TimestampMillis(n) => format!("timestamp-millis({n})"),
        Value::TimestampMicros(n) => format!("timestamp-micros({n})"),
        Value::Uuid(u) => format!("uuid({})", quote(u.to_string().as_bytes())),
        other => format!("{other:?}"),
    }
}

/// Every item a typed reader yields, as `avro ...` lines.
pub fn typed_lines<S: Source>(reader: &mut AvroReader<S>) -> Vec<String> {
    let mut lines = Vec::new();
    while let Some(item) = reader.next_value() {
        lines.push(match item {
            Ok(value) => format!("avro value {}", show(&value)),
            Err(e) => error_line(&e),
        });
    }
    lines
}

/// An error as an `avro ...` line.
pub fn error_line(e: &Error) -> String {
    match e {
        Error::File(cobsfile::Error::Damaged { start, end, cause }) => {
            format!("avro damaged {start} {end} {}", cause.name())
        }
        Error::Record { offset, index, .. } => {
            format!("avro error {} {offset} {index}", e.name())
        }
        Error::Schema { offset, .. } => format!("avro schema-error {} {offset}", e.name()),
        other => panic!("an error no vector lists: {other}"),
    }
}
