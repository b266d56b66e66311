//! Avro's JSON encoding of values (Avro specification, "JSON Encoding"), for tools that read
//! and write typed records as JSON: a value to JSON by its schema, and JSON to a value that
//! conforms to the schema, naming where it does not.
//!
//! The encoding, as the specification gives it: `null`, booleans, numbers and strings as
//! themselves; `bytes` and `fixed` as strings whose characters U+0000 to U+00FF are the bytes;
//! records and maps as objects; arrays as arrays; enums as their symbol; a union as `null` for
//! its null branch, otherwise an object with one key, the branch's type name (`"string"`,
//! `"long"`, `"array"`, `"map"`, or a named type's full name), whose value is the value. Logical
//! types are encoded as their underlying type (a `date` as its `int`, a `decimal` as its
//! bytes, a `uuid` as its string). A `float` or `double` that is not finite is the string
//! `"NaN"`, `"Infinity"` or `"-Infinity"`, since JSON has no such numbers.
//!
//! Reading JSON, [`from_json`] also takes a union's value bare, without the object naming its
//! branch: the first branch (in the schema's order) the value fits is taken. A field missing
//! from an object takes the field's default, if the schema gives one.

use apache_avro::schema::{Name, Namespace, RecordSchema, Schema};
use apache_avro::types::Value;
use apache_avro::{Decimal, Duration};
use serde_json::{Map, Number, Value as Json};

use super::check::{self, Names, Visit};
use super::error::{Error, Result};
use super::schema::{self, WriterSchema};

/// Nesting deeper than this is refused: a value read from a record nests at most as deep as
/// the datum limits allow, plus its leaves (a JSON value parsed by `serde_json` nests at most
/// 128 deep; a value built in code may be deeper).
const MAX_DEPTH: usize = check::MAX_DEPTH_CEILING + 1;

/// `value`, a value of `schema`, in Avro's JSON encoding. Fails, naming where, on a part of
/// `value` that does not fit `schema`.
///
/// ```
/// use cobsfile::avro::{json, WriterSchema};
/// use apache_avro::types::Value;
///
/// let schema = WriterSchema::parse(r#"{"type":"record","name":"E","fields":[
///     {"name":"id","type":"long"},{"name":"tag","type":["null","string"]}]}"#)?;
/// let value = Value::Record(vec![
///     ("id".into(), Value::Long(7)),
///     ("tag".into(), Value::Union(1, Box::new(Value::String("x".into())))),
/// ]);
/// let json = json::to_json(&value, &schema)?;
/// assert_eq!(json.to_string(), r#"{"id":7,"tag":{"string":"x"}}"#);
/// assert_eq!(json::from_json(&json, &schema)?, value);
/// # Ok::<(), cobsfile::avro::Error>(())
/// ```
pub fn to_json(value: &Value, schema: &WriterSchema) -> Result<Json> {
    let mut path = String::new();
    encode(value, schema.schema(), schema.names(), &None, &mut path, 0)
        .map_err(|reason| Error::InvalidValue { path, reason })
}

/// The value of `schema` that `json` holds in Avro's JSON encoding (or with unions bare).
/// Fails, naming the path to the first part that does not fit (`.field`, `[index]`,
/// `{"key"}`), without reading further.
pub fn from_json(json: &Json, schema: &WriterSchema) -> Result<Value> {
    let mut path = String::new();
    decode(json, schema.schema(), schema.names(), &None, &mut path, 0)
        .map_err(|reason| Error::InvalidValue { path, reason })
}

/// [`from_json`] of JSON text (one line of JSON Lines, say).
pub fn from_json_str(text: &str, schema: &WriterSchema) -> Result<Value> {
    let json: Json = serde_json::from_str(text).map_err(|e| Error::InvalidValue {
        path: String::new(),
        reason: format!("not JSON: {e}"),
    })?;
    from_json(&json, schema)
}

/// Writes records as Avro's JSON encoding (as [`to_json`] encodes their values) straight from
/// their bytes, one line each: the [`Visit`] that
/// [`AvroReader::next_datum_with`](super::AvroReader::next_datum_with) hands each value to as
/// its one walk of the datum checks it. No `Value` is built: what a record costs is its JSON
/// text (and, for a map, its entries' keys, which are sorted as [`to_json`] sorts them).
///
/// ```
/// use cobsfile::avro::{json::JsonWriter, AvroReader, AvroWriter, WriterSchema};
/// use apache_avro::types::Value;
///
/// let schema = WriterSchema::parse(r#"{"type":"record","name":"E","fields":[
///     {"name":"id","type":"long"},{"name":"tag","type":["null","string"]}]}"#)?;
/// let mut writer = AvroWriter::new(cobsfile::Writer::new(Vec::new())?, schema)?;
/// writer.write_value(&Value::Record(vec![
///     ("id".into(), Value::Long(7)),
///     ("tag".into(), Value::Union(1, Box::new(Value::String("x".into())))),
/// ]))?;
/// let file = writer.finish()?;
///
/// let mut reader = AvroReader::new(cobsfile::ReaderBuilder::new().from_slice(&file));
/// let mut json = JsonWriter::new();
/// reader.next_datum_with(&mut json).unwrap()?;
/// assert_eq!(json.text(), br#"{"id":7,"tag":{"string":"x"}}"#);
/// # Ok::<(), cobsfile::avro::Error>(())
/// ```
#[derive(Debug, Default)]
pub struct JsonWriter {
    out: Vec<u8>,
    /// The maps open, innermost last.
    maps: Vec<OpenMap>,
    /// Scratch space for a map's entries, reordered.
    sorted: Vec<u8>,
}

/// A map being written: where its entries begin, and each entry's key and start (each entry
/// is written as `"key":value`, without commas, until the map ends and they are sorted).
#[derive(Debug)]
struct OpenMap {
    start: usize,
    entries: Vec<(String, usize)>,
}

impl JsonWriter {
    /// A writer with nothing written.
    pub fn new() -> Self {
        Self::default()
    }

    /// The JSON text of the last record walked (whole only if the walk succeeded).
    pub fn text(&self) -> &[u8] {
        &self.out
    }

    /// A comma unless the value about to be written is the first in its array or record.
    #[inline]
    fn separate(&mut self) {
        if !matches!(self.out.last(), Some(b'{' | b'[')) {
            self.out.push(b',');
        }
    }

    #[inline]
    fn str(&mut self, s: &str) {
        // Writing into a `Vec` cannot fail.
        let _ = serde_json::to_writer(&mut self.out, s);
    }

    fn float(&mut self, f: f64) {
        match f {
            f if f.is_finite() => {
                let _ = serde_json::to_writer(&mut self.out, &f);
            }
            f if f.is_nan() => self.out.extend_from_slice(b"\"NaN\""),
            f if f > 0.0 => self.out.extend_from_slice(b"\"Infinity\""),
            _ => self.out.extend_from_slice(b"\"-Infinity\""),
        }
    }
}

impl Visit for JsonWriter {
    fn begin(&mut self) {
        self.out.clear();
        self.maps.clear();
    }

    fn null(&mut self) {
        self.out.extend_from_slice(b"null");
    }

    fn boolean(&mut self, value: bool) {
        self.out
            .extend_from_slice(if value { b"true" } else { b"false" });
    }

    fn int(&mut self, _: &Schema, value: i32) {
        let _ = serde_json::to_writer(&mut self.out, &value);
    }

    fn long(&mut self, _: &Schema, value: i64) {
        let _ = serde_json::to_writer(&mut self.out, &value);
    }

    fn float(&mut self, value: f32) {
        JsonWriter::float(self, f64::from(value));
    }

    fn double(&mut self, value: f64) {
        JsonWriter::float(self, value);
    }

    fn bytes(&mut self, _: &Schema, value: &[u8]) {
        if value.is_ascii() {
            // The characters are the bytes.
            self.str(std::str::from_utf8(value).unwrap_or_default());
        } else {
            let text: String = value.iter().map(|&b| char::from(b)).collect();
            self.str(&text);
        }
    }

    fn string(&mut self, value: &str) {
        self.str(value);
    }

    /// As its underlying string, exactly; 16 bytes, which are no text, as the UUID's text in
    /// lower case.
    fn uuid(&mut self, value: uuid::Uuid, text: Option<&str>) {
        let mut lower = [0u8; uuid::fmt::Hyphenated::LENGTH];
        let text = text.unwrap_or_else(|| value.hyphenated().encode_lower(&mut lower));
        self.str(text);
    }

    fn symbol(&mut self, _: u32, symbol: &str) {
        self.str(symbol);
    }

    fn record(&mut self, _: &RecordSchema) {
        self.out.push(b'{');
    }

    fn field(&mut self, name: &str) {
        self.separate();
        self.str(name);
        self.out.push(b':');
    }

    fn record_end(&mut self) {
        self.out.push(b'}');
    }

    fn array(&mut self) {
        self.out.push(b'[');
    }

    fn item(&mut self) {
        self.separate();
    }

    fn array_end(&mut self) {
        self.out.push(b']');
    }

    fn map(&mut self) {
        self.out.push(b'{');
        self.maps.push(OpenMap {
            start: self.out.len(),
            entries: Vec::new(),
        });
    }

    fn key(&mut self, key: &str) {
        let at = self.out.len();
        if let Some(map) = self.maps.last_mut() {
            map.entries.push((key.to_owned(), at));
        }
        self.str(key);
        self.out.push(b':');
    }

    fn map_end(&mut self) {
        let Some(mut map) = self.maps.pop() else {
            return;
        };
        if map.entries.len() > 1 {
            // Entries sorted by key, the last of a key written twice kept (as a map of
            // `Value`s keeps it), separated by commas.
            let end = self.out.len();
            let mut spans: Vec<(String, std::ops::Range<usize>)> = Vec::new();
            for (key, start) in map.entries.drain(..).rev() {
                let stop = spans.last().map_or(end, |(_, span)| span.start);
                spans.push((key, start..stop));
            }
            spans.reverse();
            // Stable: of equal keys, the later stays later.
            spans.sort_by(|a, b| a.0.cmp(&b.0));
            self.sorted.clear();
            for (i, (key, span)) in spans.iter().enumerate() {
                if spans.get(i + 1).is_some_and(|(next, _)| next == key) {
                    continue;
                }
                if !self.sorted.is_empty() {
                    self.sorted.push(b',');
                }
                self.sorted.extend_from_slice(&self.out[span.clone()]);
            }
            self.out.truncate(map.start);
            self.out.extend_from_slice(&self.sorted);
        }
        self.out.push(b'}');
    }

    fn branch(&mut self, _: u32, branch: &Schema, ns: &Namespace) {
        if !matches!(branch, Schema::Null) {
            self.out.push(b'{');
            self.str(&branch_name(branch, ns));
            self.out.push(b':');
        }
    }

    fn branch_end(&mut self, _: u32, branch: &Schema) {
        if !matches!(branch, Schema::Null) {
            self.out.push(b'}');
        }
    }
}

type Step<T> = std::result::Result<T, String>;

/// The named type a reference names, and the namespace it is in.
fn named<'a>(name: &Name, ns: &Namespace, names: &'a Names) -> Step<(&'a Schema, Namespace)> {
    let full = name.fully_qualified_name(ns);
    match names.get(&full) {
        Some(schema) => Ok((schema, full.namespace)),
        None => Err(format!("the schema names no type {full}")),
    }
}

/// The namespace inside a named type.
fn inner_namespace(name: &Name, ns: &Namespace) -> Namespace {
    name.fully_qualified_name(ns).namespace
}

/// The name a union branch goes by in Avro's JSON encoding.
fn branch_name(schema: &Schema, ns: &Namespace) -> String {
    match schema {
        Schema::Duration => "duration".into(),
        Schema::Decimal(decimal) => branch_name(&decimal.inner, ns),
        Schema::Record(RecordSchema { name, .. }) => name.fully_qualified_name(ns).fullname(None),
        Schema::Enum(e) => e.name.fully_qualified_name(ns).fullname(None),
        Schema::Fixed(f) => f.name.fully_qualified_name(ns).fullname(None),
        Schema::Ref { name } => name.fully_qualified_name(ns).fullname(None),
        // A primitive, or a logical type on one, by the primitive; an array or a map by its
        // kind ("union" for a union in a union, which is not a valid schema).
        schema => schema::kind(schema).name().into(),
    }
}

/// Bytes as a string of the characters U+0000 to U+00FF.
fn bytes_to_json(bytes: &[u8]) -> Json {
    Json::String(bytes.iter().map(|&b| char::from(b)).collect())
}

fn json_to_bytes(json: &Json) -> Step<Vec<u8>> {
    let Json::String(s) = json else {
        return Err(format!("expected a string of bytes, found {}", kind(json)));
    };
    s.chars()
        .map(|c| {
            u8::try_from(u32::from(c))
                .map_err(|_| format!("{c:?} is not a byte (U+0000 to U+00FF)"))
        })
        .collect()
}

fn float_to_json(f: f64) -> Json {
    match Number::from_f64(f) {
        Some(n) => Json::Number(n),
        None if f.is_nan() => Json::String("NaN".into()),
        None if f > 0.0 => Json::String("Infinity".into()),
        None => Json::String("-Infinity".into()),
    }
}

fn json_to_float(json: &Json) -> Step<f64> {
    match json {
        Json::Number(n) => n.as_f64().ok_or_else(|| format!("{n} is not a number")),
        Json::String(s) if s == "NaN" => Ok(f64::NAN),
        Json::String(s) if s == "Infinity" => Ok(f64::INFINITY),
        Json::String(s) if s == "-Infinity" => Ok(f64::NEG_INFINITY),
        other => Err(format!("expected a number, found {}", kind(other))),
    }
}

fn json_to_long(json: &Json) -> Step<i64> {
    match json {
        Json::Number(n) => n.as_i64().ok_or_else(|| format!("{n} is not a long")),
        other => Err(format!("expected an integer, found {}", kind(other))),
    }
}

fn json_to_int(json: &Json) -> Step<i32> {
    let n = json_to_long(json)?;
    i32::try_from(n).map_err(|_| format!("{n} is not an int"))
}

/// What a JSON value is, for messages.
fn kind(json: &Json) -> &'static str {
    match json {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}

fn encode(
    value: &Value,
    schema: &Schema,
    names: &Names,
    ns: &Namespace,
    path: &mut String,
    depth: usize,
) -> Step<Json> {
    check::level(depth, || {
        encode_level(value, schema, names, ns, path, depth)
    })
}

fn encode_level(
    value: &Value,
    schema: &Schema,
    names: &Names,
    ns: &Namespace,
    path: &mut String,
    depth: usize,
) -> Step<Json> {
    if depth > MAX_DEPTH {
        return Err(format!("nested deeper than {MAX_DEPTH}"));
    }
    let depth = depth + 1;
    let mismatch = || format!("{value:?} is not a value of {}", branch_name(schema, ns));
    Ok(match (schema, value) {
        (Schema::Ref { name }, _) => {
            let (named, ns) = named(name, ns, names)?;
            // A reference is not a level of nesting (as the datum limits count them).
            return encode(value, named, names, &ns, path, depth - 1);
        }
        (Schema::Union(union), Value::Union(i, inner)) => {
            let Some(branch) = union.variants().get(*i as usize) else {
                return Err(format!("the union has no branch {i}"));
            };
            match branch {
                Schema::Null => Json::Null,
                branch => {
                    let json = encode(inner, branch, names, ns, path, depth)?;
                    let mut object = Map::new();
                    object.insert(branch_name(branch, ns), json);
                    Json::Object(object)
                }
            }
        }
        (Schema::Null, Value::Null) => Json::Null,
        (Schema::Boolean, Value::Boolean(b)) => Json::Bool(*b),
        (Schema::Int, Value::Int(n))
        | (Schema::Date, Value::Date(n) | Value::Int(n))
        | (Schema::TimeMillis, Value::TimeMillis(n) | Value::Int(n)) => Json::from(*n),
        (Schema::Long, Value::Long(n)) => Json::from(*n),
        (Schema::Long, Value::Int(n)) => Json::from(*n),
        (Schema::TimeMicros, Value::TimeMicros(n) | Value::Long(n))
        | (Schema::TimestampMillis, Value::TimestampMillis(n) | Value::Long(n))
        | (Schema::TimestampMicros, Value::TimestampMicros(n) | Value::Long(n))
        | (Schema::TimestampNanos, Value::TimestampNanos(n) | Value::Long(n))
        | (Schema::LocalTimestampMillis, Value::LocalTimestampMillis(n) | Value::Long(n))
        | (Schema::LocalTimestampMicros, Value::LocalTimestampMicros(n) | Value::Long(n))
        | (Schema::LocalTimestampNanos, Value::LocalTimestampNanos(n) | Value::Long(n)) => {
            Json::from(*n)
        }
        (Schema::Float, Value::Float(f)) => float_to_json(f64::from(*f)),
        (Schema::Double, Value::Double(f)) => float_to_json(*f),
        (Schema::Double, Value::Float(f)) => float_to_json(f64::from(*f)),
        (Schema::Bytes, Value::Bytes(b)) => bytes_to_json(b),
        (Schema::Fixed(fixed), Value::Fixed(n, b)) if *n == fixed.size => bytes_to_json(b),
        (Schema::String, Value::String(s)) => Json::String(s.clone()),
        (Schema::Uuid, Value::Uuid(u)) => Json::String(u.to_string()),
        (Schema::Uuid, Value::String(s)) => Json::String(s.clone()),
        (Schema::Enum(e), Value::Enum(_, symbol)) if e.symbols.contains(symbol) => {
            Json::String(symbol.clone())
        }
        (Schema::Decimal(_), Value::Decimal(d)) => {
            let bytes: Vec<u8> = d
                .try_into()
                .map_err(|e: apache_avro::Error| e.to_string())?;
            bytes_to_json(&bytes)
        }
        (Schema::Duration, Value::Duration(d)) => bytes_to_json(&<[u8; 12]>::from(*d)),
        (Schema::Array(array), Value::Array(items)) => {
            let len = path.len();
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                path.push_str(&format!("[{i}]"));
                out.push(encode(item, &array.items, names, ns, path, depth)?);
                path.truncate(len);
            }
            Json::Array(out)
        }
        (Schema::Map(map), Value::Map(entries)) => {
            let len = path.len();
            let mut keys: Vec<&String> = entries.keys().collect();
            keys.sort();
            let mut out = Map::new();
            for key in keys {
                path.push_str(&format!("{{{key:?}}}"));
                out.insert(
                    key.clone(),
                    encode(&entries[key], &map.types, names, ns, path, depth)?,
                );
                path.truncate(len);
            }
            Json::Object(out)
        }
        (Schema::Record(RecordSchema { name, fields, .. }), Value::Record(values)) => {
            let inner = inner_namespace(name, ns);
            let len = path.len();
            let mut out = Map::new();
            for (i, field) in fields.iter().enumerate() {
                path.push('.');
                path.push_str(&field.name);
                // A decoded value holds its fields in the schema's order: look there first,
                // so that a record of many fields is not searched once per field.
                let found = match values.get(i) {
                    Some((n, v)) if *n == field.name => Some(v),
                    _ => values
                        .iter()
                        .find(|(n, _)| *n == field.name)
                        .map(|(_, v)| v),
                };
                let Some(v) = found else {
                    return Err("missing".into());
                };
                out.insert(
                    field.name.clone(),
                    encode(v, &field.schema, names, &inner, path, depth)?,
                );
                path.truncate(len);
            }
            Json::Object(out)
        }
        _ => return Err(mismatch()),
    })
}

fn decode(
    json: &Json,
    schema: &Schema,
    names: &Names,
    ns: &Namespace,
    path: &mut String,
    depth: usize,
) -> Step<Value> {
    check::level(depth, || decode_level(json, schema, names, ns, path, depth))
}

fn decode_level(
    json: &Json,
    schema: &Schema,
    names: &Names,
    ns: &Namespace,
    path: &mut String,
    depth: usize,
) -> Step<Value> {
    if depth > MAX_DEPTH {
        return Err(format!("nested deeper than {MAX_DEPTH}"));
    }
    let depth = depth + 1;
    Ok(match schema {
        Schema::Ref { name } => {
            let (named, ns) = named(name, ns, names)?;
            // A reference is not a level of nesting (as the datum limits count them).
            return decode(json, named, names, &ns, path, depth - 1);
        }
        Schema::Union(union) => {
            let variants = union.variants();
            // Avro's JSON encoding: null, or {"branch name": value}.
            if let Json::Null = json {
                if let Some(i) = variants.iter().position(|v| matches!(v, Schema::Null)) {
                    return Ok(Value::Union(i as u32, Box::new(Value::Null)));
                }
            }
            if let Json::Object(object) = json {
                if object.len() == 1 {
                    let (key, inner) = object.iter().next().expect("one entry");
                    if let Some(i) = variants.iter().position(|v| branch_name(v, ns) == *key) {
                        let len = path.len();
                        path.push_str(&format!("{{{key:?}}}"));
                        let value = decode(inner, &variants[i], names, ns, path, depth)?;
                        path.truncate(len);
                        return Ok(Value::Union(i as u32, Box::new(value)));
                    }
                }
            }
            // A bare value: the first branch it fits.
            for (i, variant) in variants.iter().enumerate() {
                let mut scratch = path.clone();
                if let Ok(value) = decode(json, variant, names, ns, &mut scratch, depth) {
                    return Ok(Value::Union(i as u32, Box::new(value)));
                }
            }
            let branches: Vec<String> = variants.iter().map(|v| branch_name(v, ns)).collect();
            return Err(format!(
                "{} fits no branch of the union [{}]",
                kind(json),
                branches.join(", ")
            ));
        }
        Schema::Null => match json {
            Json::Null => Value::Null,
            other => return Err(format!("expected null, found {}", kind(other))),
        },
        Schema::Boolean => match json {
            Json::Bool(b) => Value::Boolean(*b),
            other => return Err(format!("expected a boolean, found {}", kind(other))),
        },
        Schema::Int => Value::Int(json_to_int(json)?),
        Schema::Date => Value::Date(json_to_int(json)?),
        Schema::TimeMillis => Value::TimeMillis(json_to_int(json)?),
        Schema::Long => Value::Long(json_to_long(json)?),
        Schema::TimeMicros => Value::TimeMicros(json_to_long(json)?),
        Schema::TimestampMillis => Value::TimestampMillis(json_to_long(json)?),
        Schema::TimestampMicros => Value::TimestampMicros(json_to_long(json)?),
        Schema::TimestampNanos => Value::TimestampNanos(json_to_long(json)?),
        Schema::LocalTimestampMillis => Value::LocalTimestampMillis(json_to_long(json)?),
        Schema::LocalTimestampMicros => Value::LocalTimestampMicros(json_to_long(json)?),
        Schema::LocalTimestampNanos => Value::LocalTimestampNanos(json_to_long(json)?),
        Schema::Float => Value::Float(json_to_float(json)? as f32),
        Schema::Double => Value::Double(json_to_float(json)?),
        Schema::Bytes => Value::Bytes(json_to_bytes(json)?),
        Schema::BigDecimal => return Err("big-decimal values are not read from JSON".into()),
        Schema::String => match json {
            Json::String(s) => Value::String(s.clone()),
            other => return Err(format!("expected a string, found {}", kind(other))),
        },
        // Kept as written (its case too), once it is a UUID's text as records hold one.
        Schema::Uuid => match json {
            Json::String(s) if check::uuid_text(s.as_bytes()).is_some() => Value::String(s.clone()),
            Json::String(s) => {
                return Err(format!(
                    "{s:?} is not a UUID's text (hex digits in groups of 8-4-4-4-12)"
                ))
            }
            other => return Err(format!("expected a UUID string, found {}", kind(other))),
        },
        Schema::Fixed(fixed) => {
            let bytes = json_to_bytes(json)?;
            if bytes.len() != fixed.size {
                return Err(format!(
                    "{} bytes, not the {} of the fixed type",
                    bytes.len(),
                    fixed.size
                ));
            }
            Value::Fixed(fixed.size, bytes)
        }
        Schema::Duration => {
            let bytes: [u8; 12] = json_to_bytes(json)?
                .try_into()
                .map_err(|b: Vec<u8>| format!("{} bytes, not the 12 of a duration", b.len()))?;
            Value::Duration(Duration::from(bytes))
        }
        Schema::Decimal(decimal) => {
            let bytes = json_to_bytes(json)?;
            if let Schema::Fixed(fixed) = &*decimal.inner {
                if bytes.len() != fixed.size {
                    return Err(format!(
                        "{} bytes, not the {} of the fixed type",
                        bytes.len(),
                        fixed.size
                    ));
                }
            }
            Value::Decimal(Decimal::from(bytes))
        }
        Schema::Enum(e) => match json {
            Json::String(s) => match e.symbols.iter().position(|symbol| symbol == s) {
                Some(i) => Value::Enum(i as u32, s.clone()),
                None => return Err(format!("{s:?} is not one of the symbols {:?}", e.symbols)),
            },
            other => return Err(format!("expected an enum symbol, found {}", kind(other))),
        },
        Schema::Array(array) => {
            let Json::Array(items) = json else {
                return Err(format!("expected an array, found {}", kind(json)));
            };
            let len = path.len();
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                path.push_str(&format!("[{i}]"));
                out.push(decode(item, &array.items, names, ns, path, depth)?);
                path.truncate(len);
            }
            Value::Array(out)
        }
        Schema::Map(map) => {
            let Json::Object(entries) = json else {
                return Err(format!("expected an object (a map), found {}", kind(json)));
            };
            let len = path.len();
            let mut out = std::collections::HashMap::with_capacity(entries.len());
            for (key, item) in entries {
                path.push_str(&format!("{{{key:?}}}"));
                out.insert(
                    key.clone(),
                    decode(item, &map.types, names, ns, path, depth)?,
                );
                path.truncate(len);
            }
            Value::Map(out)
        }
        Schema::Record(RecordSchema { name, fields, .. }) => {
            let Json::Object(object) = json else {
                return Err(format!(
                    "expected an object (a record), found {}",
                    kind(json)
                ));
            };
            let inner = inner_namespace(name, ns);
            let len = path.len();
            if let Some(extra) = object
                .keys()
                .find(|k| !fields.iter().any(|f| f.name == **k))
            {
                path.push('.');
                path.push_str(extra);
                return Err(format!(
                    "the record {} has no such field",
                    name.fullname(None)
                ));
            }
            let mut out = Vec::with_capacity(fields.len());
            for field in fields {
                path.push('.');
                path.push_str(&field.name);
                let value = match (object.get(&field.name), &field.default) {
                    (Some(json), _) => decode(json, &field.schema, names, &inner, path, depth)?,
                    (None, Some(default)) => {
                        default_value(default, &field.schema, names, &inner, path, depth)?
                    }
                    (None, None) => return Err("missing, and the field has no default".into()),
                };
                path.truncate(len);
                out.push((field.name.clone(), value));
            }
            Value::Record(out)
        }
    })
}

/// A field's default: Avro's JSON encoding, except that a union's default is a value of its
/// first branch, bare.
pub(crate) fn default_value(
    json: &Json,
    schema: &Schema,
    names: &Names,
    ns: &Namespace,
    path: &mut String,
    depth: usize,
) -> Step<Value> {
    let schema = match schema {
        Schema::Ref { name } => named(name, ns, names)?.0,
        schema => schema,
    };
    match schema {
        Schema::Union(union) => match union.variants().first() {
            Some(first) => {
                let value = decode(json, first, names, ns, path, depth)
                    .map_err(|e| format!("its default: {e}"))?;
                Ok(Value::Union(0, Box::new(value)))
            }
            None => Err("its default: the union has no branch".into()),
        },
        schema => {
            decode(json, schema, names, ns, path, depth).map_err(|e| format!("its default: {e}"))
        }
    }
}
