//! Typed records (feature `avro`): round trips of arbitrary values, damage, schema evolution,
//! `apache-avro` itself as the oracle, and hostile records.

#![cfg(feature = "avro")]

use std::collections::HashMap;

use apache_avro::types::Value;
use apache_avro::{Decimal, GenericSingleObjectReader, GenericSingleObjectWriter, Schema};
use cobsfile::avro::{
    AvroReader, AvroReaderBuilder, AvroWriter, DatumLimits, Error, RecordProblem, SchemaProblem,
    Schemas, WriterSchema,
};
use cobsfile::{Compression, ReaderBuilder, Writer, WriterBuilder};
use proptest::prelude::*;

/// Every type the round trips cover: nested records, arrays, maps, unions, enums, fixed,
/// bytes, and logical types.
const EVERYTHING: &str = r#"{
  "type": "record", "name": "Everything", "namespace": "test",
  "fields": [
    {"name": "b", "type": "boolean"},
    {"name": "i", "type": "int"},
    {"name": "l", "type": "long"},
    {"name": "f", "type": "float"},
    {"name": "d", "type": "double"},
    {"name": "s", "type": "string"},
    {"name": "by", "type": "bytes"},
    {"name": "n", "type": "null"},
    {"name": "e", "type": {"type": "enum", "name": "Colour", "symbols": ["RED", "GREEN", "BLUE"]}},
    {"name": "fx", "type": {"type": "fixed", "name": "Four", "size": 4}},
    {"name": "u", "type": ["null", "string", "long", "Colour"]},
    {"name": "a", "type": {"type": "array", "items": "long"}},
    {"name": "m", "type": {"type": "map", "values": ["null", "double"]}},
    {"name": "inner", "type": {"type": "record", "name": "Inner", "fields": [
      {"name": "tags", "type": {"type": "array", "items": "string"}},
      {"name": "again", "type": "Four"}
    ]}},
    {"name": "inners", "type": {"type": "array", "items": "Inner"}},
    {"name": "date", "type": {"type": "int", "logicalType": "date"}},
    {"name": "ts_ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "ts_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "time_us", "type": {"type": "long", "logicalType": "time-micros"}},
    {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 2}},
    {"name": "id", "type": {"type": "string", "logicalType": "uuid"}}
  ]
}"#;

/// A recursive schema: a list of longs.
const LIST: &str = r#"{"type": "record", "name": "List", "fields": [
  {"name": "value", "type": "long"},
  {"name": "next", "type": ["null", "List"]}
]}"#;

const EVENT_V1: &str = r#"{"type": "record", "name": "Event", "fields": [
  {"name": "id", "type": "int"},
  {"name": "what", "type": "string"},
  {"name": "gone", "type": "boolean"}
]}"#;

/// V1 evolved: `id` promoted to long, `what` renamed `kind` (aliased), `gone` removed,
/// `level` added with a default.
const EVENT_V2: &str = r#"{"type": "record", "name": "Event", "fields": [
  {"name": "id", "type": "long"},
  {"name": "kind", "type": "string", "aliases": ["what"]},
  {"name": "level", "type": "int", "default": 3}
]}"#;

fn schema(json: &str) -> WriterSchema {
    WriterSchema::parse(json).unwrap()
}

fn finite_f64() -> impl Strategy<Value = f64> {
    any::<f64>().prop_filter("not NaN", |f| !f.is_nan())
}

fn text() -> impl Strategy<Value = String> {
    prop::string::string_regex("(?s).{0,12}").unwrap()
}

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..max)
}

fn colour() -> impl Strategy<Value = Value> {
    (0u32..3).prop_map(|i| Value::Enum(i, ["RED", "GREEN", "BLUE"][i as usize].to_owned()))
}

fn four() -> impl Strategy<Value = Value> {
    prop::collection::vec(any::<u8>(), 4).prop_map(|b| Value::Fixed(4, b))
}

fn inner() -> impl Strategy<Value = Value> {
    (prop::collection::vec(text(), 0..3), four()).prop_map(|(tags, again)| {
        Value::Record(vec![
            (
                "tags".into(),
                Value::Array(tags.into_iter().map(Value::String).collect()),
            ),
            ("again".into(), again),
        ])
    })
}

fn everything() -> impl Strategy<Value = Value> {
    let scalars = (
        any::<bool>(),
        any::<i32>(),
        any::<i64>(),
        any::<f32>().prop_filter("not NaN", |f| !f.is_nan()),
        finite_f64(),
        text(),
        bytes(20),
        colour(),
        four(),
    );
    let union = prop_oneof![
        Just(Value::Union(0, Box::new(Value::Null))),
        text().prop_map(|s| Value::Union(1, Box::new(Value::String(s)))),
        any::<i64>().prop_map(|l| Value::Union(2, Box::new(Value::Long(l)))),
        colour().prop_map(|c| Value::Union(3, Box::new(c))),
    ];
    let map_value = prop_oneof![
        Just(Value::Union(0, Box::new(Value::Null))),
        finite_f64().prop_map(|d| Value::Union(1, Box::new(Value::Double(d)))),
    ];
    let compound = (
        union,
        prop::collection::vec(any::<i64>(), 0..5),
        prop::collection::hash_map(text(), map_value, 0..4),
        inner(),
        prop::collection::vec(inner(), 0..3),
    );
    let logical = (
        any::<i32>(),
        any::<i64>(),
        any::<i64>(),
        any::<i64>(),
        prop::collection::vec(any::<u8>(), 1..9),
        any::<[u8; 16]>(),
    );
    (scalars, compound, logical).prop_map(
        |((b, i, l, f, d, s, by, e, fx), (u, a, m, inner, inners), (date, ms, us, t, dec, id))| {
            Value::Record(vec![
                ("b".into(), Value::Boolean(b)),
                ("i".into(), Value::Int(i)),
                ("l".into(), Value::Long(l)),
                ("f".into(), Value::Float(f)),
                ("d".into(), Value::Double(d)),
                ("s".into(), Value::String(s)),
                ("by".into(), Value::Bytes(by)),
                ("n".into(), Value::Null),
                ("e".into(), e),
                ("fx".into(), fx),
                ("u".into(), u),
                (
                    "a".into(),
                    Value::Array(a.into_iter().map(Value::Long).collect()),
                ),
                (
                    "m".into(),
                    Value::Map(m.into_iter().collect::<HashMap<_, _>>()),
                ),
                ("inner".into(), inner),
                ("inners".into(), Value::Array(inners)),
                ("date".into(), Value::Date(date)),
                ("ts_ms".into(), Value::TimestampMillis(ms)),
                ("ts_us".into(), Value::TimestampMicros(us)),
                ("time_us".into(), Value::TimeMicros(t)),
                ("dec".into(), Value::Decimal(Decimal::from(dec))),
                ("id".into(), Value::Uuid(apache_avro::Uuid::from_bytes(id))),
            ])
        },
    )
}

fn list() -> impl Strategy<Value = Value> {
    prop::collection::vec(any::<i64>(), 1..6).prop_map(|values| {
        let mut next = Value::Union(0, Box::new(Value::Null));
        for (i, v) in values.iter().enumerate().rev() {
            let node = Value::Record(vec![
                ("value".into(), Value::Long(*v)),
                ("next".into(), next),
            ]);
            next = match i {
                0 => node,
                _ => Value::Union(1, Box::new(node)),
            };
        }
        next
    })
}

/// cobsfile's prefix for `apache-avro`'s single-object readers and writers, whose own
/// fingerprints differ for decimal and duration types (see
/// `fingerprints_agree_with_apaches_python_implementation`).
struct Prefix([u8; 10]);

impl apache_avro::headers::HeaderBuilder for Prefix {
    fn build_header(&self) -> Vec<u8> {
        self.0.to_vec()
    }
}

/// `apache-avro`'s single-object writer of `schema`, the oracle.
fn oracle_writer(schema: &WriterSchema) -> GenericSingleObjectWriter {
    GenericSingleObjectWriter::new_with_capacity_and_header_builder(
        schema.schema(),
        64,
        Prefix(schema.prefix()),
    )
    .unwrap()
}

/// `apache-avro`'s single-object reader of `schema`, the oracle.
fn oracle_reader(schema: &WriterSchema) -> GenericSingleObjectReader {
    GenericSingleObjectReader::new_with_header_builder(
        schema.schema().clone(),
        Prefix(schema.prefix()),
    )
    .unwrap()
}

/// A file of `values` written with `schema` by the typed writer.
fn write(schema: &WriterSchema, values: &[Value], builder: WriterBuilder) -> Vec<u8> {
    let mut writer = AvroWriter::new(builder.build(Vec::new()).unwrap(), schema.clone()).unwrap();
    for value in values {
        writer.write_value(value).unwrap();
    }
    writer.finish().unwrap()
}

/// Every value and error a typed reader yields.
fn read(bytes: &[u8], builder: &AvroReaderBuilder) -> (Vec<Value>, Vec<Error>) {
    let mut reader = builder.build(ReaderBuilder::new().from_slice(bytes));
    let (mut values, mut errors) = (Vec::new(), Vec::new());
    while let Some(item) = reader.next_value() {
        match item {
            Ok(value) => values.push(value),
            Err(e) => errors.push(e),
        }
    }
    (values, errors)
}

/// The records of a file, as bytes.
fn records(bytes: &[u8]) -> Vec<Vec<u8>> {
    let (records, errors) = ReaderBuilder::new().from_slice(bytes).read_all();
    assert!(errors.is_empty(), "{errors:?}");
    records
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Values come back as written, from files of any block size, compressed or not; and
    /// `apache-avro`'s single-object writer and reader agree with cobsfile's byte for byte.
    #[test]
    fn values_round_trip(
        values in prop::collection::vec(everything(), 0..12),
        block_target in 50usize..2000,
        zstd in any::<bool>(),
    ) {
        let schema = schema(EVERYTHING);
        let mut builder = WriterBuilder::new().block_target(block_target);
        if zstd {
            builder = builder.compression(Compression::zstd(3).unwrap());
        }
        let file = write(&schema, &values, builder);
        let (read_back, errors) = read(&file, &AvroReaderBuilder::new());
        prop_assert!(errors.is_empty(), "{:?}", errors);
        prop_assert_eq!(&read_back, &values);

        // The oracle: apache-avro's own single-object encoding of each value is the record.
        let records = records(&file);
        prop_assert_eq!(records.len(), values.len());
        let mut oracle_writer = oracle_writer(&schema);
        let oracle_reader = oracle_reader(&schema);
        for (record, value) in records.iter().zip(&values) {
            let mut expected = Vec::new();
            oracle_writer.write_value_ref(value, &mut expected).unwrap();
            prop_assert_eq!(record, &expected);
            prop_assert_eq!(&oracle_reader.read_value(&mut record.as_slice()).unwrap(), value);
        }
    }

    /// Recursive schemas round trip too, on several reading threads.
    #[test]
    fn recursive_values_round_trip(values in prop::collection::vec(list(), 0..30)) {
        let schema = schema(LIST);
        let file = write(&schema, &values, WriterBuilder::new().block_target(100));
        let file: std::sync::Arc<[u8]> = file.into();
        let mut reader = AvroReader::new(ReaderBuilder::new().threads(2).min_split(64).from_shared(&file));
        let read_back: Vec<Value> = reader.by_ref().map(Result::unwrap).collect();
        prop_assert_eq!(read_back, values);
    }

    /// Flipped bytes anywhere: every value returned is one written, in order, and none is
    /// returned twice; every record of a block the damage missed comes back.
    #[test]
    fn damage_never_returns_a_value_not_written(
        values in prop::collection::vec(everything(), 1..20),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..4),
    ) {
        let schema = schema(EVERYTHING);
        let mut file = write(&schema, &values, WriterBuilder::new().block_target(300));
        for (at, mask) in &flips {
            let at = at.index(file.len());
            file[at] ^= mask;
        }
        let (read_back, errors) = read(&file, &AvroReaderBuilder::new());
        let mut written = values.iter();
        for value in &read_back {
            prop_assert!(
                written.any(|w| w == value),
                "a value not written, or out of order: {:?}", value
            );
        }
        // Unless the damage hit the schema block, no record is lost but with its block.
        let lost_schema = errors.iter().any(|e| matches!(e, Error::Record { problem: RecordProblem::SchemaUnknown { .. }, .. }));
        if !lost_schema {
            for e in &errors {
                prop_assert!(matches!(e, Error::File(cobsfile::Error::Damaged { .. }) | Error::Schema { .. }), "{}", e);
            }
        }
        // Given the schema, the same file loses no more than its damaged blocks.
        let (with_schema, errors) = read(&file, &AvroReaderBuilder::new().schema(schema.clone()));
        prop_assert!(with_schema.len() >= read_back.len());
        for e in &errors {
            prop_assert!(matches!(e, Error::File(cobsfile::Error::Damaged { .. }) | Error::Schema { .. }), "{}", e);
        }
        let (_, damaged) = ReaderBuilder::new().from_slice(&file).read_all();
        let (raw, _) = ReaderBuilder::new().from_slice(&file).read_all();
        prop_assert_eq!(with_schema.len(), raw.len(), "{:?}", damaged);
    }

    /// Records changed inside intact blocks (written so by a plain writer: what a buggy or
    /// hostile writer makes): the typed reader reports them or returns values that conform to
    /// the schema, and never panics.
    #[test]
    fn altered_records_are_reported_or_conform(
        value in everything(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let schema = schema(EVERYTHING);
        let mut record = AvroWriter::new(Writer::new(Vec::new()).unwrap(), schema.clone())
            .unwrap()
            .encode_value(&value)
            .unwrap()
            .to_vec();
        for (at, byte) in &edits {
            let at = at.index(record.len());
            record[at] = *byte;
        }
        if truncate {
            record.truncate(cut.index(record.len()));
        }
        let mut writer = Writer::new(Vec::new()).unwrap();
        let [(k1, v1), (k2, v2)] = schema.metadata();
        writer.write_metadata([(k1, v1), (k2, v2)]).unwrap();
        writer.write_record(&record).unwrap();
        let file = writer.finish().unwrap();
        let (values, errors) = read(&file, &AvroReaderBuilder::new());
        prop_assert_eq!(values.len() + errors.len(), 1);
        for value in &values {
            prop_assert!(value.validate(schema.schema()));
        }
        for e in &errors {
            match e {
                Error::Record { offset, index: 0, ordinal: 0, problem } => {
                    prop_assert!(*offset > 19, "the data block's offset, after the schema's");
                    prop_assert!(problem.is_damage() || matches!(problem, RecordProblem::SchemaUnknown { .. } | RecordProblem::Limit { .. }), "{}", e);
                }
                other => prop_assert!(false, "{}", other),
            }
        }
    }
}

/// Records written by `apache-avro`'s single-object writer into a plain cobsfile, with the
/// schema's metadata block, are read by the typed reader.
#[test]
fn apache_avro_single_objects_are_read() {
    let schema = schema(EVENT_V1);
    let mut writer = Writer::new(Vec::new()).unwrap();
    let [(k1, v1), (k2, v2)] = schema.metadata();
    writer.write_metadata([(k1, v1), (k2, v2)]).unwrap();
    let mut oracle = oracle_writer(&schema);
    let values: Vec<Value> = (0..5).map(event_v1).collect();
    for value in &values {
        let mut record = Vec::new();
        oracle.write_value_ref(value, &mut record).unwrap();
        writer.write_record(&record).unwrap();
    }
    let file = writer.finish().unwrap();
    let (read_back, errors) = read(&file, &AvroReaderBuilder::new());
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(read_back, values);
}

fn event_v1(i: i32) -> Value {
    Value::Record(vec![
        ("id".into(), Value::Int(i)),
        ("what".into(), Value::String(format!("event {i}"))),
        ("gone".into(), Value::Boolean(i % 2 == 0)),
    ])
}

fn event_v2(i: i64, level: i32) -> Value {
    Value::Record(vec![
        ("id".into(), Value::Long(i)),
        ("kind".into(), Value::String(format!("event {i}"))),
        ("level".into(), Value::Int(level)),
    ])
}

/// A file whose schema changes half way reads with each record's own schema, and with a
/// reader schema every record resolves to it: promotion, alias, removed and added fields.
/// A file's schemas come back in the order it announced them, and the newest is the one
/// announced last: what a table of the file's records is typed by.
#[test]
fn schemas_keep_the_order_they_were_announced_in() {
    let (v1, v2) = (schema(EVENT_V1), schema(EVENT_V2));
    let mut writer = AvroWriter::new(Writer::new(Vec::new()).unwrap(), v1.clone()).unwrap();
    writer.write_value(&event_v1(1)).unwrap();
    writer.change_schema(v2.clone()).unwrap();
    writer.write_value(&event_v2(2, 7)).unwrap();
    let file = writer.finish().unwrap();
    let scanned = Schemas::scan(&file);
    let order: Vec<u64> = scanned.iter().map(WriterSchema::fingerprint).collect();
    assert_eq!(order, [v1.fingerprint(), v2.fingerprint()]);
    assert_eq!(scanned.latest(), Some(&v2));

    // Added again, a schema is the newest: it counts from its last addition.
    let mut schemas = Schemas::new();
    for s in [&v2, &v1, &v2] {
        schemas.add(s.clone());
    }
    let order: Vec<u64> = schemas.iter().map(WriterSchema::fingerprint).collect();
    assert_eq!(order, [v1.fingerprint(), v2.fingerprint()]);
    assert_eq!(schemas.latest(), Some(&v2));
    assert_eq!(Schemas::new().latest(), None);
}

#[test]
fn schema_evolution_with_a_reader_schema() {
    let (v1, v2) = (schema(EVENT_V1), schema(EVENT_V2));
    let mut writer = AvroWriter::new(Writer::new(Vec::new()).unwrap(), v1.clone()).unwrap();
    writer.write_value(&event_v1(1)).unwrap();
    writer.write_value(&event_v1(2)).unwrap();
    writer.change_schema(v2.clone()).unwrap();
    writer.write_value(&event_v2(3, 7)).unwrap();
    assert_eq!(writer.schema(), &v2);
    let file = writer.finish().unwrap();

    let (as_written, errors) = read(&file, &AvroReaderBuilder::new());
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(as_written, [event_v1(1), event_v1(2), event_v2(3, 7)]);

    let resolved = AvroReaderBuilder::new().reader_schema(v2.schema().clone());
    let (as_v2, errors) = read(&file, &resolved);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(as_v2, [event_v2(1, 3), event_v2(2, 3), event_v2(3, 7)]);

    #[derive(serde::Deserialize, Debug, PartialEq)]
    struct Event {
        id: i64,
        kind: String,
        level: i32,
    }
    let mut reader = resolved.build(ReaderBuilder::new().from_slice(&file));
    let mut events = Vec::new();
    while let Some(event) = reader.next_as::<Event>() {
        events.push(event.unwrap());
    }
    assert_eq!(
        events[0],
        Event {
            id: 1,
            kind: "event 1".into(),
            level: 3
        }
    );
    assert_eq!(events.len(), 3);

    // A reader schema the old records cannot resolve to (a new field without a default):
    // those are reported, the others returned.
    let strict = Schema::parse_str(
        r#"{"type":"record","name":"Event","fields":[
            {"name":"id","type":"long"},{"name":"level","type":"int"}]}"#,
    )
    .unwrap();
    let (values, errors) = read(&file, &AvroReaderBuilder::new().reader_schema(strict));
    assert_eq!(values.len(), 1);
    assert_eq!(errors.len(), 2);
    for (i, e) in errors.iter().enumerate() {
        assert!(
            matches!(e, Error::Record { index, ordinal, problem: RecordProblem::Unresolvable { fingerprint, .. }, .. }
                if *index == i as u64 && *ordinal == i as u64 && *fingerprint == v1.fingerprint()),
            "{e}"
        );
        assert_eq!(e.name(), "unresolvable");
    }
}

/// A fresh directory for one test's log, and the log's path in it.
fn log_dir(test: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("cobsfile-avro-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("log");
    (dir, path)
}

/// A typed writer of `schema` on an appender of the log at `path`, each record written at once.
fn typed_appender(path: &std::path::Path, schema: &WriterSchema) -> AvroWriter<cobsfile::Appender> {
    let appender = cobsfile::AppenderBuilder::new()
        .durability(cobsfile::Durability::Flush)
        .open(path)
        .unwrap();
    AvroWriter::new(appender, schema.clone()).unwrap()
}

/// Two appenders of different schema versions share one log; every record reads back with
/// the schema it was written with.
#[test]
fn appenders_of_two_schema_versions_share_a_log() {
    let (dir, path) = log_dir("shared");
    let open = |schema: &WriterSchema| typed_appender(&path, schema);
    let mut old = open(&schema(EVENT_V1));
    let mut new = open(&schema(EVENT_V2));
    let mut expected = Vec::new();
    for i in 0..6 {
        if i % 2 == 0 {
            assert_eq!(old.write_value(&event_v1(i)).unwrap(), i as u64 / 2);
            expected.push(event_v1(i));
        } else {
            new.write_value(&event_v2(i as i64, 1)).unwrap();
            expected.push(event_v2(i as i64, 1));
        }
    }
    old.into_inner().close().unwrap();
    new.into_inner().close().unwrap();
    let file = std::fs::read(&path).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let (values, errors) = read(&file, &AvroReaderBuilder::new());
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(values, expected);
}

/// A typed log truncated to nothing under its appender (logrotate's `copytruncate`) starts
/// again with its schema block: the records after it keep their schema (spec 11.1 rule 5,
/// 15.1). With several appenders, the one that starts the file anew announces its own schemas
/// only: another's records stay `schema-unknown` until it next opens the log.
#[test]
fn a_typed_log_truncated_under_its_appender_keeps_its_schema() {
    let (dir, path) = log_dir("truncated");
    let open = |schema: &WriterSchema| typed_appender(&path, schema);
    let mut log = open(&schema(EVENT_V2));
    log.write_value(&event_v2(0, 1)).unwrap();
    // copytruncate: the log copied away, then cut to nothing while the appender has it open.
    let cut = || {
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(0)
            .unwrap()
    };
    cut();
    log.write_value(&event_v2(2, 1)).unwrap();
    let mut other = open(&schema(EVENT_V1));
    other.write_value(&event_v1(3)).unwrap();
    cut();
    log.write_value(&event_v2(4, 1)).unwrap();
    other.write_value(&event_v1(5)).unwrap();
    log.into_inner().close().unwrap();
    other.into_inner().close().unwrap();
    let file = std::fs::read(&path).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let (values, errors) = read(&file, &AvroReaderBuilder::new());
    assert_eq!(values, [event_v2(4, 1)]);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].name(), "schema-unknown");
}

/// A value that does not conform is refused, naming where, and nothing is written for it.
#[test]
fn invalid_values_are_refused_and_nothing_is_written() {
    let schema = schema(EVENT_V1);
    let mut writer = AvroWriter::new(Writer::new(Vec::new()).unwrap(), schema).unwrap();
    let bad = Value::Record(vec![
        ("id".into(), Value::Int(1)),
        ("what".into(), Value::Long(2)),
        ("gone".into(), Value::Boolean(true)),
    ]);
    let e = writer.write_value(&bad).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidValue { path, .. } if path == ".what"),
        "{e}"
    );
    assert!(e.to_string().contains(" at .what: "), "{e}");
    #[derive(serde::Serialize)]
    struct Wrong {
        id: i32,
        what: i32,
    }
    let e = writer.write(&Wrong { id: 1, what: 2 }).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidValue { path, .. } if path == ".what"),
        "{e}"
    );
    writer.write_value(&event_v1(5)).unwrap();
    let file = writer.finish().unwrap();
    let (values, errors) = read(&file, &AvroReaderBuilder::new());
    assert!(errors.is_empty());
    assert_eq!(values, [event_v1(5)], "only the valid value was written");
}

/// A schema metadata block lost to damage: its records are reported as of an unknown schema
/// (with their block's offset), not guessed; given the schema, a reader decodes them.
#[test]
fn records_of_a_lost_schema_are_reported_not_guessed() {
    let schema = schema(EVENT_V1);
    let mut file = write(
        &schema,
        &(0..3).map(event_v1).collect::<Vec<_>>(),
        WriterBuilder::new(),
    );
    // The metadata block follows the 19-byte start; flip a byte of its JSON.
    file[40] ^= 0x01;
    let (values, errors) = read(&file, &AvroReaderBuilder::new());
    assert!(values.is_empty());
    assert_eq!(errors.len(), 4, "{errors:?}");
    assert!(matches!(
        &errors[0],
        Error::File(cobsfile::Error::Damaged { start: 19, .. })
    ));
    for (i, e) in errors[1..].iter().enumerate() {
        match e {
            Error::Record {
                offset,
                index,
                ordinal,
                problem: RecordProblem::SchemaUnknown { fingerprint },
            } => {
                assert_eq!(
                    (*index, *ordinal, *fingerprint),
                    (i as u64, i as u64, schema.fingerprint())
                );
                assert!(
                    e.to_string().starts_with(&format!(
                        "record {i} of the block at offset {offset}: schema "
                    )),
                    "{e}"
                );
            }
            other => panic!("{other}"),
        }
    }
    let (values, errors) = read(&file, &AvroReaderBuilder::new().schema(schema));
    assert_eq!(values, (0..3).map(event_v1).collect::<Vec<_>>());
    assert_eq!(errors.len(), 1);
}

/// A metadata block whose fingerprint is not its schema's, or whose schema does not parse, is
/// reported and its schema not used.
#[test]
fn wrong_fingerprints_and_invalid_schemas_are_reported() {
    let schema = schema(EVENT_V1);
    let mut writer = Writer::new(Vec::new()).unwrap();
    writer
        .write_metadata([
            ("avro.schema", schema.json().as_bytes()),
            ("avro.fingerprint", &[1, 2, 3, 4, 5, 6, 7, 8]),
        ])
        .unwrap();
    writer
        .write_metadata([
            ("avro.schema", &b"{\"type\":\"recrd\"}"[..]),
            ("avro.fingerprint", &[0; 8]),
        ])
        .unwrap();
    writer
        .write_metadata([("avro.schema", schema.json().as_bytes())])
        .unwrap();
    writer
        .write_metadata([("other", "no schema here")])
        .unwrap();
    let mut oracle = oracle_writer(&schema);
    let mut record = Vec::new();
    oracle.write_value_ref(&event_v1(1), &mut record).unwrap();
    writer.write_record(&record).unwrap();
    let file = writer.finish().unwrap();
    let (values, errors) = read(&file, &AvroReaderBuilder::new());
    assert!(values.is_empty());
    let names: Vec<&str> = errors.iter().map(Error::name).collect();
    assert_eq!(
        names,
        [
            "fingerprint-mismatch",
            "schema-invalid",
            "schema-invalid",
            "schema-unknown"
        ]
    );
    assert!(
        matches!(&errors[0], Error::Schema { offset: 18, problem: SchemaProblem::FingerprintMismatch { computed, .. } } if *computed == schema.fingerprint()),
        "{:?}",
        errors[0]
    );
}

/// A reader that starts past the schema block (seeking to a record) knows the schemas of the
/// whole file from a scan of its metadata blocks.
#[test]
fn seeking_with_the_schemas_of_the_file() {
    let schema = schema(EVENT_V1);
    let values: Vec<Value> = (0..200).map(event_v1).collect();
    let file = write(&schema, &values, WriterBuilder::new().block_target(200));
    let reader = ReaderBuilder::new().from_slice_at_record(&file, 150);
    let (read_back, errors) = {
        let mut typed = AvroReader::new(reader);
        let first = typed.next_value().unwrap();
        assert!(matches!(
            first,
            Err(Error::Record {
                problem: RecordProblem::SchemaUnknown { .. },
                ..
            })
        ));
        (typed.count(), ())
    };
    let _ = (read_back, errors);
    let schemas = Schemas::scan(&file);
    assert_eq!(schemas.len(), 1);
    let typed = AvroReaderBuilder::new()
        .schemas(&schemas)
        .build(ReaderBuilder::new().from_slice_at_record(&file, 150));
    let read_back: Vec<Value> = typed.map(Result::unwrap).collect();
    assert_eq!(read_back, values[150..]);
}

/// Records that claim more than they hold: a string of 2^62 bytes, an array of 2^62 nulls, a
/// recursion deeper than the limit, a union index out of range. Each is reported, naming the
/// problem, without decoding.
#[test]
fn hostile_records_are_reported() {
    let cases: [(&str, &[u8], &str); 6] = [
        (
            r#""string""#,
            &[0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f],
            "undecodable",
        ),
        (
            r#"{"type":"array","items":"null"}"#,
            &[0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x00],
            "limit",
        ),
        (
            r#"{"type":"map","values":"null"}"#,
            &[0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x00],
            "undecodable",
        ),
        (LIST, &[2; 600], "limit"),
        (r#"["null","long"]"#, &[4], "undecodable"),
        (r#""long""#, &[2, 2], "trailing-bytes"),
    ];
    for (json, datum, name) in cases {
        let schema = schema(json);
        let mut record = schema.prefix().to_vec();
        record.extend_from_slice(datum);
        let mut writer = Writer::new(Vec::new()).unwrap();
        let [(k1, v1), (k2, v2)] = schema.metadata();
        writer.write_metadata([(k1, v1), (k2, v2)]).unwrap();
        writer.write_record(&record).unwrap();
        writer.write_record(b"not avro").unwrap();
        let file = writer.finish().unwrap();
        let (values, errors) = read(&file, &AvroReaderBuilder::new());
        assert!(values.is_empty(), "{json}");
        let names: Vec<&str> = errors.iter().map(Error::name).collect();
        assert_eq!(names, [name, "no-marker"], "{json}: {errors:?}");
    }
    // Larger limits decode what the default ones refuse.
    let schema = schema(r#"{"type":"array","items":"null"}"#);
    let mut record = schema.prefix().to_vec();
    record.extend_from_slice(&[0x80, 0x80, 0x10, 0x00]); // 2^17 nulls
    let mut writer = Writer::new(Vec::new()).unwrap();
    let [(k1, v1), (k2, v2)] = schema.metadata();
    writer.write_metadata([(k1, v1), (k2, v2)]).unwrap();
    writer.write_record(&record).unwrap();
    let file = writer.finish().unwrap();
    let (_, errors) = read(&file, &AvroReaderBuilder::new());
    assert_eq!(
        errors.iter().map(Error::name).collect::<Vec<_>>(),
        ["limit"]
    );
    let limits = DatumLimits::default().values_base(1 << 18);
    let (values, errors) = read(&file, &AvroReaderBuilder::new().limits(limits));
    assert!(errors.is_empty());
    assert!(matches!(&values[0], Value::Array(items) if items.len() == 1 << 17));
}

/// The schema of the sample events (samples/events.jsonl).
const SAMPLE: &str = include_str!("../samples/events.avsc");

/// The sample events as values of `SAMPLE`.
fn sample_events() -> Vec<Value> {
    let text = include_str!("../samples/events.jsonl");
    let schema = Schema::parse_str(SAMPLE).unwrap();
    text.lines()
        .map(|line| {
            let json: serde_json::Value = serde_json::from_str(line).unwrap();
            Value::from(json).resolve(&schema).unwrap()
        })
        .collect()
}

/// The 10 bytes each record carries cost almost nothing once zstd compresses the blocks:
/// measured on the 2,000 sample events (spec 15.2, per-record overhead).
#[test]
fn the_prefix_costs_little_compressed() {
    let schema = schema(SAMPLE);
    let values = sample_events();
    assert_eq!(values.len(), 2000);
    for level in [None, Some(3), Some(19)] {
        let builder = || match level {
            None => WriterBuilder::new(),
            Some(level) => WriterBuilder::new().compression(Compression::zstd(level).unwrap()),
        };
        let typed = write(&schema, &values, builder());
        let mut plain = builder().build(Vec::new()).unwrap();
        for value in &values {
            let datum = apache_avro::to_avro_datum(schema.schema(), value.clone()).unwrap();
            plain.write_record(&datum).unwrap();
        }
        let plain = plain.finish().unwrap();
        let per_record = (typed.len() as f64 - plain.len() as f64) / values.len() as f64;
        println!(
            "2,000 sample events, zstd {level:?}: {} bytes with the single-object prefix, {} of bare datums: {per_record:+.3} bytes per record",
            typed.len(),
            plain.len()
        );
        match level {
            // The prefix, and COBS's share of it.
            None => assert!((10.0..10.5).contains(&per_record), "{per_record}"),
            Some(_) => assert!(per_record.abs() < 1.5, "{per_record} bytes per record"),
        }
    }
}

/// The fingerprint, from the Avro specification's algorithm written out here, of the Parsing
/// Canonical Form written out by hand from the specification's rules, is what the vectors
/// store (spec 15.1: little-endian).
#[test]
fn fingerprints_follow_the_avro_specification() {
    const EMPTY: u64 = 0xc15d_213a_a4d7_a795;
    let table: Vec<u64> = (0..256u64)
        .map(|i| (0..8).fold(i, |fp, _| (fp >> 1) ^ (EMPTY & 0u64.wrapping_sub(fp & 1))))
        .collect();
    let fingerprint64 = |bytes: &[u8]| {
        bytes.iter().fold(EMPTY, |fp, &b| {
            (fp >> 8) ^ table[((fp ^ u64::from(b)) & 0xff) as usize]
        })
    };
    let canonical = concat!(
        r#"{"name":"spec.vectors.Event","type":"record","fields":["#,
        r#"{"name":"id","type":"long"},"#,
        r#"{"name":"kind","type":{"name":"spec.vectors.Kind","type":"enum","symbols":["START","STOP"]}},"#,
        r#"{"name":"tags","type":{"type":"array","items":"string"}},"#,
        r#"{"name":"latency","type":["null","double"]}]}"#
    );
    let file = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/spec/vectors/avro-typed.cobs"
    ))
    .unwrap();
    let mut reader = ReaderBuilder::new().from_slice(&file);
    let metadata = reader.metadata().next().unwrap().unwrap();
    let schema = schema(std::str::from_utf8(metadata.get("avro.schema").unwrap()).unwrap());
    assert_eq!(schema.schema().canonical_form(), canonical);
    let expected = fingerprint64(canonical.as_bytes());
    assert_eq!(schema.fingerprint(), expected);
    assert_eq!(
        metadata.get("avro.fingerprint").unwrap(),
        expected.to_le_bytes()
    );
    assert_eq!(schema.prefix()[2..], expected.to_le_bytes());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Avro's JSON encoding of any value reads back as the value, through JSON text too.
    #[test]
    fn json_round_trips(value in everything(), list in list()) {
        for (value, schema) in [(value, schema(EVERYTHING)), (list, schema(LIST))] {
            let json = cobsfile::avro::json::to_json(&value, &schema).unwrap();
            // A UUID read from JSON is kept as the text it was given (spec 15.6).
            let value = uuids_as_text(value);
            prop_assert_eq!(&cobsfile::avro::json::from_json(&json, &schema).unwrap(), &value);
            let text = json.to_string();
            prop_assert_eq!(&cobsfile::avro::json::from_json_str(&text, &schema).unwrap(), &value);
        }
    }
}

/// Whether `serde_json` keeps an object's keys in the order they were inserted (its
/// `preserve_order` feature, which another crate of the build may turn on).
fn json_keeps_order() -> bool {
    let mut map = serde_json::Map::new();
    map.insert("b".into(), serde_json::Value::Null);
    map.insert("a".into(), serde_json::Value::Null);
    map.keys().next().map(String::as_str) == Some("b")
}

/// A file of one record whose bytes are `record` (a single-object record of `schema`, or
/// anything), after `schema`'s metadata block: written by a plain writer, unchecked.
fn file_of_record(schema: &WriterSchema, record: &[u8]) -> Vec<u8> {
    let mut writer = Writer::new(Vec::new()).unwrap();
    let [(k1, v1), (k2, v2)] = schema.metadata();
    writer.write_metadata([(k1, v1), (k2, v2)]).unwrap();
    writer.write_record(record).unwrap();
    writer.finish().unwrap()
}

/// The record `value` encodes to, with `schema`.
fn encode(schema: &WriterSchema, value: &Value) -> Vec<u8> {
    AvroWriter::new(Writer::new(Vec::new()).unwrap(), schema.clone())
        .unwrap()
        .encode_value(value)
        .unwrap()
        .to_vec()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// JSON written straight from a record's bytes, in the walk that checks it, is the JSON of
    /// its decoded value (text for text where `serde_json` keeps the schema's field order).
    #[test]
    fn json_straight_from_datums_is_the_json_of_their_values(
        values in prop::collection::vec(everything(), 1..6),
        list in list(),
    ) {
        let keeps_order = json_keeps_order();
        for (values, schema) in [(values, schema(EVERYTHING)), (vec![list], schema(LIST))] {
            let file = write(&schema, &values, WriterBuilder::new().block_target(200));
            let mut reader = AvroReader::new(ReaderBuilder::new().from_slice(&file));
            let mut json = cobsfile::avro::json::JsonWriter::new();
            for value in &values {
                reader.next_datum_with(&mut json).unwrap().unwrap();
                let expected = cobsfile::avro::json::to_json(value, &schema).unwrap();
                let written: serde_json::Value = serde_json::from_slice(json.text()).unwrap();
                prop_assert_eq!(&written, &expected);
                if keeps_order {
                    prop_assert_eq!(std::str::from_utf8(json.text()).unwrap(), expected.to_string());
                }
            }
            prop_assert!(reader.next_datum_with(&mut json).is_none());
        }
    }

    /// The check is one a decoder can rely on, and no stricter on values: on records altered
    /// anywhere, what the typed reader returns `apache-avro` decodes whole, with the JSON
    /// written in the walk; what it refuses for a value or for bytes after the datum,
    /// `apache-avro` refuses too.
    #[test]
    fn the_check_passes_exactly_what_decodes(
        value in everything(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let schema = schema(EVERYTHING);
        let mut record = encode(&schema, &value);
        for (at, byte) in &edits {
            // The prefix stays: the fingerprint must name the schema.
            let at = 10 + at.index(record.len() - 10);
            record[at] = *byte;
        }
        // The oracle decodes a datum only after the check passed its layout: `apache-avro`
        // reserves what a count declares (gigabytes, from a few altered bytes).
        let decode = || {
            let mut rest = &record[..];
            oracle_reader(&schema).read_value(&mut rest).ok().filter(|_| rest.is_empty())
        };
        let file = file_of_record(&schema, &record);
        let mut reader = AvroReader::new(ReaderBuilder::new().from_slice(&file));
        let mut json = cobsfile::avro::json::JsonWriter::new();
        match reader.next_datum_with(&mut json).unwrap() {
            Ok(_) => {
                let decoded = decode().expect("the check passed a record that does not decode");
                let expected = cobsfile::avro::json::to_json(&decoded, &schema).unwrap();
                let mut written: serde_json::Value =
                    serde_json::from_slice(json.text()).unwrap();
                // The walk writes a UUID's text as the record holds it, in either case;
                // `apache-avro` decodes it to a UUID, written in lower case.
                if let Some(serde_json::Value::String(id)) = written.get_mut("id") {
                    *id = id.to_ascii_lowercase();
                }
                prop_assert_eq!(written, expected);
            }
            // Its layout passed, but not its values (check 5) or its end (check 4).
            Err(e @ Error::Record { problem: RecordProblem::TrailingBytes { .. }, .. }) => {
                prop_assert!(decode().is_none(), "refused a record that decodes: {}", e);
            }
            Err(e @ Error::Record { problem: RecordProblem::Undecodable { .. }, .. })
                if VALUE_FAILURES.iter().any(|what| e.to_string().contains(what)) =>
            {
                prop_assert!(decode().is_none(), "refused a record that decodes: {}", e);
            }
            Err(_) => {}
        }
    }
}

/// `value` with each UUID among a record's fields as its text.
fn uuids_as_text(value: Value) -> Value {
    match value {
        Value::Record(fields) => Value::Record(
            (fields.into_iter())
                .map(|(name, v)| match v {
                    Value::Uuid(u) => (name, Value::String(u.to_string())),
                    v => (name, v),
                })
                .collect(),
        ),
        other => other,
    }
}

/// What the check says of a value that is not valid (spec 15.3, check 5).
const VALUE_FAILURES: [&str; 6] = [
    "is not UTF-8",
    "out of an int's range",
    "a boolean byte",
    "enum index",
    "a uuid is not",
    "a big-decimal is not",
];

/// JSON written straight from records: maps sorted by key with the last of a key written
/// twice kept, unions named by their branch, numbers that are not finite as strings, bytes as
/// characters U+0000 to U+00FF, a UUID of 16 bytes as its text.
#[test]
fn json_straight_from_datums_writes_avros_json_encoding() {
    let schema = schema(
        r#"{"type":"record","name":"R","namespace":"n","fields":[
        {"name":"m","type":{"type":"map","values":{"type":"map","values":"int"}}},
        {"name":"r2","type":{"type":"record","name":"R2","fields":[{"name":"d","type":"double"}]}},
        {"name":"u","type":["null","R2",{"type":"array","items":"float"}]},
        {"name":"b","type":"bytes"},
        {"name":"id","type":{"type":"string","logicalType":"uuid"}}
    ]}"#,
    );
    // m: one block of three entries, "b" twice (the second kept), "a" holding {"z":1,"y":2};
    // r2: 1.5; u: the array branch [NaN, -inf]; b: "\x00\xff"; id: 16 bytes.
    let mut datum = vec![6];
    datum.extend([2, b'b', 2, 2, b'x', 2, 0]);
    datum.extend([2, b'a', 4, 2, b'z', 2, 2, b'y', 4, 0]);
    datum.extend([2, b'b', 2, 2, b'w', 6, 0]);
    datum.push(0);
    datum.extend(1.5f64.to_le_bytes());
    datum.extend([4, 4]);
    datum.extend(f32::NAN.to_le_bytes());
    datum.extend(f32::NEG_INFINITY.to_le_bytes());
    datum.push(0);
    datum.extend([4, 0, 0xff]);
    datum.push(32);
    datum.extend(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef_u128.to_be_bytes());
    let mut record = schema.prefix().to_vec();
    record.extend(&datum);
    let file = file_of_record(&schema, &record);
    let mut reader = AvroReader::new(ReaderBuilder::new().from_slice(&file));
    let mut json = cobsfile::avro::json::JsonWriter::new();
    reader.next_datum_with(&mut json).unwrap().unwrap();
    assert_eq!(
        std::str::from_utf8(json.text()).unwrap(),
        r#"{"m":{"a":{"y":2,"z":1},"b":{"w":3}},"r2":{"d":1.5},"u":{"array":["NaN","-Infinity"]},"b":"\u0000ÿ","id":"01234567-89ab-cdef-0123-456789abcdef"}"#
    );
}

/// JSON in Avro's encoding, with unions tagged or bare and defaults for missing fields; what
/// does not conform is refused, naming where.
#[test]
fn json_is_read_by_the_schema() {
    use cobsfile::avro::json::{from_json_str, to_json};

    let schema = schema(
        r#"{"type":"record","name":"E","namespace":"n","fields":[
            {"name":"id","type":"long"},
            {"name":"c","type":{"type":"enum","name":"Colour","symbols":["RED","BLUE"]},"default":"RED"},
            {"name":"tag","type":["null","string","long","Colour"],"default":null},
            {"name":"raw","type":"bytes","default":"\u00ff"},
            {"name":"items","type":{"type":"array","items":{"type":"record","name":"I","fields":[
                {"name":"x","type":"int"}]}},"default":[]}
        ]}"#,
    );
    let record = |tag: Value, c: Value, raw: &[u8], items: Vec<i32>| {
        let items = items
            .into_iter()
            .map(|x| Value::Record(vec![("x".into(), Value::Int(x))]))
            .collect();
        Value::Record(vec![
            ("id".into(), Value::Long(1)),
            ("c".into(), c),
            ("tag".into(), tag),
            ("raw".into(), Value::Bytes(raw.to_vec())),
            ("items".into(), Value::Array(items)),
        ])
    };
    let null = Value::Union(0, Box::new(Value::Null));
    let red = Value::Enum(0, "RED".into());
    let blue = Value::Enum(1, "BLUE".into());
    let cases = [
        (
            r#"{"id":1}"#,
            record(null.clone(), red.clone(), &[0xff], vec![]),
        ),
        (
            r#"{"id":1,"tag":{"string":"x"},"c":"BLUE","raw":"a\u0000","items":[{"x":2}]}"#,
            record(
                Value::Union(1, Box::new(Value::String("x".into()))),
                blue.clone(),
                b"a\0",
                vec![2],
            ),
        ),
        (
            r#"{"id":1,"tag":"x"}"#,
            record(
                Value::Union(1, Box::new(Value::String("x".into()))),
                red.clone(),
                &[0xff],
                vec![],
            ),
        ),
        (
            r#"{"id":1,"tag":7}"#,
            record(
                Value::Union(2, Box::new(Value::Long(7))),
                red.clone(),
                &[0xff],
                vec![],
            ),
        ),
        (
            r#"{"id":1,"tag":{"n.Colour":"BLUE"}}"#,
            record(
                Value::Union(3, Box::new(blue.clone())),
                red.clone(),
                &[0xff],
                vec![],
            ),
        ),
    ];
    for (text, expected) in cases {
        let value = from_json_str(text, &schema).unwrap();
        assert_eq!(value, expected, "{text}");
        // Written back in Avro's encoding, unions tagged.
        let again = from_json_str(&to_json(&value, &schema).unwrap().to_string(), &schema).unwrap();
        assert_eq!(again, value);
    }
    let tagged = to_json(
        &from_json_str(r#"{"id":1,"tag":"x"}"#, &schema).unwrap(),
        &schema,
    )
    .unwrap();
    assert_eq!(tagged["tag"], serde_json::json!({"string": "x"}));

    let refused = [
        (r#"{"tag":"x"}"#, ".id", "missing"),
        (r#"{"id":"1"}"#, ".id", "expected an integer"),
        (r#"{"id":1,"extra":2}"#, ".extra", "no such field"),
        (r#"{"id":1,"c":"GREEN"}"#, ".c", "not one of the symbols"),
        (r#"{"id":1,"raw":"\u0100"}"#, ".raw", "not a byte"),
        (
            r#"{"id":1,"items":[{"x":1},{"x":2.5}]}"#,
            ".items[1].x",
            "is not a long",
        ),
        (
            r#"{"id":1,"items":[{"x":4294967296}]}"#,
            ".items[0].x",
            "is not an int",
        ),
        (r#"{"id":1,"tag":[1]}"#, ".tag", "fits no branch"),
        (
            r#"{"id":1,"tag":{"long":"x"}}"#,
            ".tag{\"long\"}",
            "expected an integer",
        ),
        (r#"{"id":1"#, "", "not JSON"),
    ];
    for (text, path, reason) in refused {
        match from_json_str(text, &schema) {
            Err(Error::InvalidValue { path: p, reason: r }) => {
                assert_eq!(p, path, "{text}: {r}");
                assert!(r.contains(reason), "{text}: {r}");
            }
            other => panic!("{text}: {other:?}"),
        }
    }
}

/// The records of an Avro object container file, copied into a typed cobsfile byte for byte
/// (`write_datum`), read back as the same datums and the values apache-avro's reader gives;
/// a datum that does not decode is refused and not written.
#[test]
fn container_file_datums_are_copied_byte_for_byte() {
    let schema = schema(SAMPLE);
    let values = sample_events();
    let mut ocf =
        apache_avro::Writer::with_codec(schema.schema(), Vec::new(), apache_avro::Codec::Null);
    for value in &values {
        ocf.append_value_ref(value).unwrap();
    }
    let ocf = ocf.into_inner().unwrap();
    let datums: Vec<Vec<u8>> = values
        .iter()
        .map(|v| apache_avro::to_avro_datum(schema.schema(), v.clone()).unwrap())
        .collect();

    let mut writer = AvroWriter::new(Writer::new(Vec::new()).unwrap(), schema.clone()).unwrap();
    for datum in &datums {
        writer.write_datum(datum).unwrap();
    }
    // Cut short; a string past the end; a byte left over; a string that is not UTF-8, which
    // only decoding finds.
    let mut not_utf8 = datums[0].clone();
    not_utf8[1] = 0xff;
    for bad in [
        &datums[0][..datums[0].len() - 1],
        &[0x02, 0x09][..],
        &[datums[0].clone(), vec![0]].concat(),
        &not_utf8,
    ] {
        assert!(matches!(
            writer.write_datum(bad),
            Err(Error::InvalidValue { .. })
        ));
    }
    let file = writer.finish().unwrap();

    let mut reader = AvroReader::new(ReaderBuilder::new().from_slice(&file));
    let mut copied = Vec::new();
    while let Some(datum) = reader.next_datum() {
        copied.push(datum.unwrap().datum().to_vec());
    }
    assert_eq!(copied, datums);
    let from_ocf: Vec<Value> = apache_avro::Reader::new(&ocf[..])
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let (read_back, errors) = read(&file, &AvroReaderBuilder::new());
    assert!(errors.is_empty());
    assert_eq!(read_back, from_ocf);
}

/// A schema announced again under its fingerprint with other documentation replaces the one
/// before; one that decodes differently under it (here a fixed type that becomes a
/// `duration`) puts the fingerprint in conflict: the records after it are reported, not
/// decoded with a schema their writer may not have announced (spec 15.3). A writer refuses
/// to make such a change itself.
#[test]
fn a_fingerprint_names_one_decoding_in_a_file() {
    let plain = schema(
        r#"{"type":"record","name":"T","fields":[
        {"name":"took","type":{"type":"fixed","name":"F","size":12}}]}"#,
    );
    let documented = schema(
        r#"{"type":"record","name":"T","doc":"how long","fields":[
        {"name":"took","type":{"type":"fixed","name":"F","size":12},"default":"x"}]}"#,
    );
    let typed = schema(
        r#"{"type":"record","name":"T","doc":"how long","fields":[
            {"name":"took","type":{"type":"fixed","name":"F","size":12,"logicalType":"duration"}}]}"#,
    );
    assert_eq!(plain.fingerprint(), typed.fingerprint());
    assert_eq!(plain.fingerprint(), documented.fingerprint());
    assert!(plain.decodes_like(&documented) && !plain.decodes_like(&typed));
    let bytes = [1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0];
    let fixed = Value::Record(vec![("took".into(), Value::Fixed(12, bytes.to_vec()))]);

    let mut writer = AvroWriter::new(Writer::new(Vec::new()).unwrap(), plain.clone()).unwrap();
    writer.write_value(&fixed).unwrap();
    writer.change_schema(documented.clone()).unwrap();
    writer.write_value(&fixed).unwrap();
    let refused = writer.change_schema(typed.clone()).unwrap_err();
    assert!(
        refused.to_string().contains("decodes differently"),
        "{refused}"
    );
    let file = writer.finish().unwrap();
    let (values, errors) = read(&file, &AvroReaderBuilder::new());
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(values, [fixed.clone(), fixed.clone()]);

    // Another writer (by hand) announces the duration under the same fingerprint.
    let mut writer = Writer::new(Vec::new()).unwrap();
    writer.write_metadata(plain.metadata()).unwrap();
    let record = [&plain.prefix()[..], &bytes].concat();
    writer.write_record(&record).unwrap();
    writer.flush().unwrap();
    writer.write_metadata(typed.metadata()).unwrap();
    writer.write_record(&record).unwrap();
    let file = writer.finish().unwrap();
    let (values, errors) = read(&file, &AvroReaderBuilder::new());
    assert_eq!(values, std::slice::from_ref(&fixed));
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert_eq!(errors[0].name(), "schema-conflict");
    assert!(matches!(
        &errors[1],
        Error::Record { problem: RecordProblem::SchemaConflict { fingerprint, .. }, .. }
            if *fingerprint == plain.fingerprint()
    ));
    // A reader that starts from the file's scan agrees, record for record.
    let scanned = Schemas::scan(&file);
    assert_eq!(scanned.conflicts().count(), 1);
    let (values, errors) = read(&file, &AvroReaderBuilder::new().schemas(&scanned));
    assert_eq!(values, std::slice::from_ref(&fixed));
    assert_eq!(errors.len(), 2, "{errors:?}");
    // A schema given to the reader is replaced by the file's own.
    let (values, _) = read(&file, &AvroReaderBuilder::new().schema(typed));
    assert_eq!(values[0], fixed);
}

/// The CRC-64-AVRO fingerprint of `bytes`, for forging.
fn crc64_avro(bytes: &[u8]) -> u64 {
    const EMPTY: u64 = 0xc15d_213a_a4d7_a795;
    bytes.iter().fold(EMPTY, |mut fp, &b| {
        fp ^= u64::from(b);
        for _ in 0..8 {
            fp = (fp >> 1) ^ (EMPTY & 0u64.wrapping_sub(fp & 1));
        }
        fp
    })
}

/// A schema whose fingerprint is `target`, made from `template` (a schema's JSON with `{}`
/// where 96 letters go, each `a` or `b`): CRC-64 is affine, so the letters that give any
/// fingerprint are found by Gaussian elimination, in microseconds. The letters must stand in
/// the schema's canonical form as they stand in the template (in a record's name, say).
fn forge(template: &str, target: u64) -> WriterSchema {
    const N: usize = 96;
    let with = |letters: &[u8; N]| template.replace("{}", std::str::from_utf8(letters).unwrap());
    let form = |json: &str| WriterSchema::parse(json).unwrap().schema().canonical_form();
    let base = [b'a'; N];
    let c0 = crc64_avro(form(&with(&base)).as_bytes());
    // Each letter's effect on the fingerprint, a vector over GF(2), with the letters that
    // make it up.
    let mut rows: Vec<(u64, u128)> = (0..N)
        .map(|i| {
            let mut letters = base;
            letters[i] = b'b';
            (
                crc64_avro(form(&with(&letters)).as_bytes()) ^ c0,
                1u128 << i,
            )
        })
        .collect();
    let mut want = (target ^ c0, 0u128);
    for bit in 0..64 {
        let Some(pivot) = rows.iter().position(|(v, _)| v >> bit & 1 == 1) else {
            continue;
        };
        let (pv, pm) = rows.swap_remove(pivot);
        for (v, m) in rows.iter_mut() {
            if *v >> bit & 1 == 1 {
                *v ^= pv;
                *m ^= pm;
            }
        }
        if want.0 >> bit & 1 == 1 {
            want.0 ^= pv;
            want.1 ^= pm;
        }
    }
    assert_eq!(want.0, 0, "the letters do not span the fingerprints");
    let mut letters = base;
    for (i, letter) in letters.iter_mut().enumerate() {
        if want.1 >> i & 1 == 1 {
            *letter = b'b';
        }
    }
    let forged = WriterSchema::parse(&with(&letters)).unwrap();
    assert_eq!(forged.fingerprint(), target);
    forged
}

/// A second writer appends a schema forged to the first writer's fingerprint, with its
/// fields swapped. The first writer's later records decoded with it, fields swapped, without
/// a word; now the forged block is reported as a conflict, and the records after it that
/// name the fingerprint are reported, never decoded with either schema.
#[test]
fn a_forged_fingerprint_never_decodes_anothers_records() {
    let victim = schema(
        r#"{"type":"record","name":"Pay","fields":[
        {"name":"from","type":"long"},{"name":"to","type":"long"}]}"#,
    );
    let forged = forge(
        r#"{"type":"record","name":"P{}","fields":[
        {"name":"to","type":"long"},{"name":"from","type":"long"}]}"#,
        victim.fingerprint(),
    );
    assert!(!forged.decodes_like(&victim));
    let pay = |from: i64, to: i64| {
        Value::Record(vec![
            ("from".into(), Value::Long(from)),
            ("to".into(), Value::Long(to)),
        ])
    };
    let mut first = AvroWriter::new(Writer::new(Vec::new()).unwrap(), victim.clone()).unwrap();
    first.write_value(&pay(1, 2)).unwrap();
    let mut file = first.finish().unwrap();
    // The second writer's block, then the first writer's next record, appended.
    let mut second = Writer::new(Vec::new()).unwrap();
    second.write_metadata(forged.metadata()).unwrap();
    let mut record = victim.prefix().to_vec();
    record.extend([6, 8]); // from 3, to 4
    second.write_record(&record).unwrap();
    file.extend_from_slice(&second.finish().unwrap());

    let (values, errors) = read(&file, &AvroReaderBuilder::new());
    assert_eq!(values, [pay(1, 2)], "{errors:?}");
    let names: Vec<&str> = errors.iter().map(Error::name).collect();
    assert_eq!(names, ["schema-conflict", "schema-conflict"]);
    // A reader given the forged schema from outside decodes the first record with the file's
    // own schema all the same.
    let (values, _) = read(&file, &AvroReaderBuilder::new().schema(forged));
    assert_eq!(values[0], pay(1, 2));
}

/// A logical type on a primitive type changes the fingerprint: apache-avro (and Apache Avro's
/// Python implementation, 1.12) keep `{"type":"long"}` in the canonical form, where the plain
/// type is `"long"` (spec 15.1).
#[test]
fn a_logical_type_on_a_primitive_changes_the_fingerprint() {
    let plain = schema(r#"{"type":"record","name":"T","fields":[{"name":"at","type":"long"}]}"#);
    let timed = schema(
        r#"{"type":"record","name":"T","fields":[
            {"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}}]}"#,
    );
    assert_eq!(
        timed.schema().canonical_form(),
        r#"{"name":"T","type":"record","fields":[{"name":"at","type":{"type":"long"}}]}"#
    );
    // The values the Python implementation gives for these two schemas.
    assert_eq!(plain.fingerprint(), 1728280458692782748);
    assert_eq!(timed.fingerprint(), 13887320667972532217);
}

/// Parsing Canonical Forms and fingerprints of Apache Avro's Python implementation (1.12.2:
/// `avro.schema.parse(json).canonical_form` and `.fingerprint("CRC-64-AVRO")`, its bytes read
/// little-endian), an oracle independent of apache-avro, whose 0.21 differs for decimal and
/// duration types.
const PYTHON_CANONICAL_FORMS: &[(&str, &str, u64)] = &[
    (r#""long""#, r#""long""#, 15011871142588980663),
    (r#"{"type":"long"}"#, r#""long""#, 15011871142588980663),
    (
        r#"{"type":"long","logicalType":"timestamp-millis"}"#,
        r#"{"type":"long"}"#,
        7635232846682232745,
    ),
    (
        r#"{"type":"int","logicalType":"date"}"#,
        r#"{"type":"int"}"#,
        8145260995063234477,
    ),
    (
        r#"{"type":"string","logicalType":"uuid"}"#,
        r#"{"type":"string"}"#,
        13836284643062531879,
    ),
    (
        r#"{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}"#,
        r#"{"type":"bytes"}"#,
        17971614560321851438,
    ),
    (
        r#"{"type":"fixed","name":"F","size":8,"logicalType":"decimal","precision":10,"scale":2}"#,
        r#"{"name":"F","type":"fixed","size":8}"#,
        17610045279583317449,
    ),
    (
        r#"{"type":"fixed","name":"F","namespace":"a.b","size":12,"logicalType":"duration","doc":"x","aliases":["G"]}"#,
        r#"{"name":"a.b.F","type":"fixed","size":12}"#,
        1074561863760982557,
    ),
    (
        r#"["null","string",{"type":"array","items":{"type":"map","values":"double"}}]"#,
        r#"["null","string",{"type":"array","items":{"type":"map","values":"double"}}]"#,
        8001304648064201087,
    ),
    (
        r#"{"type":"record","name":"R","namespace":"n.s","doc":"d","fields":[{"name":"a","type":{"type":"enum","name":"E","symbols":["X","Y"],"default":"X"},"default":"Y","order":"descending","aliases":["z"]},{"name":"b","type":"E"},{"name":"c","type":{"type":"record","name":"other.Inner","fields":[{"name":"d","type":["null","n.s.R"]}]}},{"name":"e","type":"other.Inner"},{"name":"f","type":{"type":"fixed","name":"Fx","size":4}}]}"#,
        r#"{"name":"n.s.R","type":"record","fields":[{"name":"a","type":{"name":"n.s.E","type":"enum","symbols":["X","Y"]}},{"name":"b","type":"n.s.E"},{"name":"c","type":{"name":"other.Inner","type":"record","fields":[{"name":"d","type":["null","n.s.R"]}]}},{"name":"e","type":"other.Inner"},{"name":"f","type":{"name":"n.s.Fx","type":"fixed","size":4}}]}"#,
        729360834245470108,
    ),
    (
        r#"{"type":"record","name":"T","fields":[{"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}}]}"#,
        r#"{"name":"T","type":"record","fields":[{"name":"at","type":{"type":"long"}}]}"#,
        13887320667972532217,
    ),
    (
        r#"{"type":"record","name":"T","fields":[{"name":"x","type":{"type":"int","custom":1}}]}"#,
        r#"{"name":"T","type":"record","fields":[{"name":"x","type":{"type":"int"}}]}"#,
        17658769598625380948,
    ),
];

/// Fingerprints are of the Parsing Canonical Form as the Avro specification (and Apache Avro's
/// Python implementation) has it; apache-avro 0.21's own differ for decimal and duration types.
#[test]
fn fingerprints_agree_with_apaches_python_implementation() {
    for (json, canonical, expected) in PYTHON_CANONICAL_FORMS {
        let schema = schema(json);
        assert_eq!(
            schema.fingerprint(),
            *expected,
            "{json}: canonical form {canonical}"
        );
    }
    let decimal = schema(PYTHON_CANONICAL_FORMS[5].0);
    let theirs = decimal
        .schema()
        .fingerprint::<apache_avro::rabin::Rabin>()
        .bytes;
    assert_ne!(
        theirs,
        decimal.fingerprint().to_le_bytes(),
        "apache-avro 0.21 keeps precision and scale"
    );
}

/// A record of millions of nulls, a few kilobytes with zstd, decoded to gigabytes: each
/// decoded value takes about 56 bytes, and the values were bounded per byte of the record
/// only. No datum decodes to more than 4,194,304 values by default; the limit is reported,
/// and a reader given a larger one decodes it.
#[test]
fn millions_of_nulls_are_over_the_limit_however_they_compress() {
    let schema = schema(
        r#"{"type":"record","name":"N","fields":[
        {"name":"xs","type":{"type":"array","items":["null","long"]}}]}"#,
    );
    let n: u64 = 3_000_000;
    let mut datum = Vec::new();
    let mut z = n << 1;
    while z >= 0x80 {
        datum.push(z as u8 | 0x80);
        z >>= 7;
    }
    datum.push(z as u8);
    datum.resize(datum.len() + n as usize, 0); // each item the null branch
    datum.push(0);
    let mut writer = WriterBuilder::new()
        .compression(Compression::zstd(3).unwrap())
        .build(Vec::new())
        .unwrap();
    writer.write_metadata(schema.metadata()).unwrap();
    writer
        .write_record(&[&schema.prefix()[..], &datum].concat())
        .unwrap();
    let file = writer.finish().unwrap();
    assert!(file.len() < 8 << 10, "{} bytes", file.len());
    let (values, errors) = read(&file, &AvroReaderBuilder::new());
    assert!(values.is_empty());
    assert!(
        matches!(
            &errors[..],
            [Error::Record {
                problem: RecordProblem::Limit {
                    what: "values",
                    limit: 4_194_304
                },
                ..
            }]
        ),
        "{errors:?}"
    );
    let wide = AvroReaderBuilder::new().limits(DatumLimits::default().max_values(1 << 23));
    let (values, errors) = read(&file, &wide);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(values.len(), 1);
}

/// A record nested as deep as the widest depth limit allows reads through every walk of a
/// value (the check, decoding, JSON both ways, resolution), on a thread with the default
/// stack of 2 MiB: one depth limit, not one per walk (JSON once stopped at 512 calls, and
/// apache-avro's decoder overflowed that stack at 64 levels in a debug build, 1,024 in a
/// release build, aborting the process).
#[test]
fn the_deepest_record_the_limits_allow_reads_through_every_walk() {
    let json = r#"{"type":"record","name":"L","fields":[{"name":"next","type":["null","L"]}]}"#;
    let schema = WriterSchema::parse(json).unwrap();
    // Each level of the list is a record and a union: 512 records, the last one's union
    // taking its null branch, 1,024 levels.
    let mut datum = vec![2u8; 511];
    datum.push(0);
    let mut writer = Writer::new(Vec::new()).unwrap();
    writer.write_metadata(schema.metadata()).unwrap();
    writer
        .write_record(&[&schema.prefix()[..], &datum[..]].concat())
        .unwrap();
    let file = writer.finish().unwrap();
    std::thread::spawn(move || {
        let limits = DatumLimits::default().max_depth(1024);
        let read = |builder: AvroReaderBuilder| {
            let mut reader = builder
                .limits(limits)
                .build(ReaderBuilder::new().from_slice(&file));
            reader.next_value().expect("a record").expect("it reads")
        };
        let value = read(AvroReaderBuilder::new());
        let text = cobsfile::avro::json::to_json(&value, &schema).expect("to JSON");
        let back = cobsfile::avro::json::from_json(&text, &schema).expect("from JSON");
        assert_eq!(back, value);
        let resolved = read(AvroReaderBuilder::new().reader_schema(schema.schema().clone()));
        assert_eq!(resolved, value);
        // One level fewer allowed, and it is over the limit.
        let over = DatumLimits::default().max_depth(1023);
        let mut reader = AvroReaderBuilder::new()
            .limits(over)
            .build(ReaderBuilder::new().from_slice(&file));
        let err = reader
            .next_value()
            .expect("a record")
            .expect_err("over the limit");
        assert_eq!(err.name(), "limit");
    })
    .join()
    .expect("no stack overflow");
}
