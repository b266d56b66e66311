//! Datums to `apache_avro::types::Value`s, built in the walk that checks them: the value
//! `apache-avro`'s decoder would give, without a second walk of the datum.

use std::collections::HashMap;

use apache_avro::schema::{Namespace, RecordSchema, Schema};
use apache_avro::types::Value;
use apache_avro::{Decimal, Duration};

use super::check::Visit;

/// Builds the value of a datum as the check walks it (a [`Visit`]): records, arrays, maps and
/// unions are opened as the walk enters them and closed as it leaves, so what a datum builds
/// is bounded by the values the check lets it have.
#[derive(Debug, Default)]
pub(crate) struct ValueBuilder {
    /// The records, arrays, maps and unions open, innermost last.
    open: Vec<Open>,
    /// The value of the last datum walked (whole only if the walk succeeded).
    done: Option<Value>,
}

#[derive(Debug)]
enum Open {
    /// A record's fields so far, and the name of the field whose value comes next.
    Record(Vec<(String, Value)>, String),
    Array(Vec<Value>),
    /// A map's entries so far, and the key whose value comes next.
    Map(HashMap<String, Value>, String),
    /// A union's branch, its value to come.
    Union(u32, Option<Value>),
}

impl ValueBuilder {
    /// The value built by the last walk, if it finished one.
    pub(crate) fn take(&mut self) -> Option<Value> {
        self.done.take()
    }

    /// Hands `value` to the innermost open value, or makes it the datum's.
    fn place(&mut self, value: Value) {
        match self.open.last_mut() {
            None => self.done = Some(value),
            Some(Open::Record(fields, name)) => fields.push((std::mem::take(name), value)),
            Some(Open::Array(items)) => items.push(value),
            Some(Open::Map(entries, key)) => {
                entries.insert(std::mem::take(key), value);
            }
            Some(Open::Union(_, slot)) => *slot = Some(value),
        }
    }

    /// Closes the innermost open value and places it.
    fn close(&mut self) {
        let value = match self.open.pop() {
            Some(Open::Record(fields, _)) => Value::Record(fields),
            Some(Open::Array(items)) => Value::Array(items),
            Some(Open::Map(entries, _)) => Value::Map(entries),
            Some(Open::Union(index, value)) => {
                Value::Union(index, Box::new(value.unwrap_or(Value::Null)))
            }
            None => return,
        };
        self.place(value);
    }
}

impl Visit for ValueBuilder {
    fn begin(&mut self) {
        self.open.clear();
        self.done = None;
    }

    fn null(&mut self) {
        self.place(Value::Null);
    }

    fn boolean(&mut self, value: bool) {
        self.place(Value::Boolean(value));
    }

    fn int(&mut self, schema: &Schema, value: i32) {
        self.place(match schema {
            Schema::Date => Value::Date(value),
            Schema::TimeMillis => Value::TimeMillis(value),
            _ => Value::Int(value),
        });
    }

    fn long(&mut self, schema: &Schema, value: i64) {
        self.place(match schema {
            Schema::TimeMicros => Value::TimeMicros(value),
            Schema::TimestampMillis => Value::TimestampMillis(value),
            Schema::TimestampMicros => Value::TimestampMicros(value),
            Schema::TimestampNanos => Value::TimestampNanos(value),
            Schema::LocalTimestampMillis => Value::LocalTimestampMillis(value),
            Schema::LocalTimestampMicros => Value::LocalTimestampMicros(value),
            Schema::LocalTimestampNanos => Value::LocalTimestampNanos(value),
            _ => Value::Long(value),
        });
    }

    fn float(&mut self, value: f32) {
        self.place(Value::Float(value));
    }

    fn double(&mut self, value: f64) {
        self.place(Value::Double(value));
    }

    fn bytes(&mut self, schema: &Schema, value: &[u8]) {
        let value = match schema {
            Schema::Fixed(fixed) => Value::Fixed(fixed.size, value.to_vec()),
            Schema::Decimal(_) => Value::Decimal(Decimal::from(value)),
            Schema::Duration => {
                let mut bytes = [0u8; 12];
                bytes.copy_from_slice(value);
                Value::Duration(Duration::from(bytes))
            }
            // Rare enough to be decoded by `apache-avro` (the check found it well formed).
            Schema::BigDecimal => {
                let mut datum = Vec::with_capacity(value.len() + 10);
                let mut len = (value.len() as u64) << 1;
                while len >= 0x80 {
                    datum.push(len as u8 | 0x80);
                    len >>= 7;
                }
                datum.push(len as u8);
                datum.extend_from_slice(value);
                apache_avro::from_avro_datum(&Schema::BigDecimal, &mut &datum[..], None)
                    .unwrap_or(Value::Null)
            }
            _ => Value::Bytes(value.to_vec()),
        };
        self.place(value);
    }

    fn string(&mut self, value: &str) {
        self.place(Value::String(value.to_owned()));
    }

    fn uuid(&mut self, value: uuid::Uuid, _text: Option<&str>) {
        self.place(Value::Uuid(value));
    }

    fn symbol(&mut self, index: u32, symbol: &str) {
        self.place(Value::Enum(index, symbol.to_owned()));
    }

    fn record(&mut self, schema: &RecordSchema) {
        self.open.push(Open::Record(
            Vec::with_capacity(schema.fields.len()),
            String::new(),
        ));
    }

    fn field(&mut self, name: &str) {
        if let Some(Open::Record(_, next)) = self.open.last_mut() {
            name.clone_into(next);
        }
    }

    fn record_end(&mut self) {
        self.close();
    }

    fn array(&mut self) {
        self.open.push(Open::Array(Vec::new()));
    }

    fn array_end(&mut self) {
        self.close();
    }

    fn map(&mut self) {
        self.open.push(Open::Map(HashMap::new(), String::new()));
    }

    fn key(&mut self, key: &str) {
        if let Some(Open::Map(_, next)) = self.open.last_mut() {
            key.clone_into(next);
        }
    }

    fn map_end(&mut self) {
        self.close();
    }

    fn branch(&mut self, index: u32, _: &Schema, _: &Namespace) {
        self.open.push(Open::Union(index, None));
    }

    fn branch_end(&mut self, _: u32, _: &Schema) {
        self.close();
    }
}
