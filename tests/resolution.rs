//! Avro's schema resolution, rule by rule as Avro's specification gives it: what resolves
//! comes back as the reader schema's value; what does not (a narrowing, a cast, another name)
//! is an error naming the field path, never a changed value. The Python suite checks the same
//! cases against fastavro's resolution (python/tests/test_resolution.py).

#![cfg(feature = "avro")]

use apache_avro::types::Value;
use apache_avro::Schema;
use cobsfile::avro::{AvroReaderBuilder, AvroWriter, Error, RecordProblem, WriterSchema};
use cobsfile::{ReaderBuilder, Writer};
use proptest::prelude::*;

/// A record `R` with one field `x` of the type `json`.
fn one_field(json: &str) -> String {
    format!(r#"{{"type":"record","name":"R","fields":[{{"name":"x","type":{json}}}]}}"#)
}

/// `value` written with `writer` (a schema's JSON), read with `reader`: the value, or the
/// record's problem.
fn resolve(writer: &str, value: Value, reader: &str) -> Result<Value, RecordProblem> {
    let writer = WriterSchema::parse(writer).unwrap();
    let mut typed = AvroWriter::new(Writer::new(Vec::new()).unwrap(), writer).unwrap();
    typed.write_value(&value).unwrap();
    let file = typed.finish().unwrap();
    let reader = Schema::parse_str(reader).unwrap();
    let mut read = AvroReaderBuilder::new()
        .reader_schema(reader)
        .build(ReaderBuilder::new().from_slice(&file));
    let found = read.next_value().expect("a record");
    assert!(read.next_value().is_none());
    match found {
        Ok(value) => Ok(value),
        Err(Error::Record { problem, .. }) => Err(problem),
        Err(e) => panic!("{e}"),
    }
}

/// The field `x`'s value, resolved from `writer_type` to `reader_type`.
fn field(writer_type: &str, value: Value, reader_type: &str) -> Result<Value, RecordProblem> {
    let record = Value::Record(vec![("x".into(), value)]);
    let found = resolve(&one_field(writer_type), record, &one_field(reader_type))?;
    match found {
        Value::Record(mut fields) => Ok(fields.remove(0).1),
        other => panic!("{other:?}"),
    }
}

/// Asserts that resolution failed at `path`, with a reason that holds `says`.
fn fails_at(found: Result<Value, RecordProblem>, path: &str, says: &str) {
    match found {
        Err(RecordProblem::Unresolvable { path: at, what, .. }) => {
            assert_eq!(at, path, "{what}");
            assert!(what.contains(says), "{what:?} does not say {says:?}");
        }
        other => panic!("expected a failure at {path}, got {other:?}"),
    }
}

#[test]
fn narrowing_is_refused_not_cast() {
    // A long read as an int was 4294967301 -> 5.
    fails_at(
        field(r#""long""#, Value::Long(4_294_967_301), r#""int""#),
        ".x",
        "long does not resolve to the reader's int",
    );
    // Through unions: 2^40 read as ["null","int"] was 0.
    fails_at(
        field(
            r#"["null","long"]"#,
            Value::Union(1, Box::new(Value::Long(1 << 40))),
            r#"["null","int"]"#,
        ),
        ".x",
        "matches no branch",
    );
    // A double read as a float was Infinity.
    fails_at(
        field(r#""double""#, Value::Double(1e300), r#""float""#),
        ".x",
        "double does not resolve to the reader's float",
    );
    fails_at(
        field(r#""long""#, Value::Long(1), r#""string""#),
        ".x",
        "does not resolve",
    );
    fails_at(
        field(r#""boolean""#, Value::Boolean(true), r#""int""#),
        ".x",
        "does not resolve",
    );
}

#[test]
fn the_promotions_of_the_specification_resolve() {
    let cases: Vec<(&str, Value, &str, Value)> = vec![
        (r#""int""#, Value::Int(-7), r#""long""#, Value::Long(-7)),
        (r#""int""#, Value::Int(3), r#""float""#, Value::Float(3.0)),
        (r#""int""#, Value::Int(3), r#""double""#, Value::Double(3.0)),
        (
            r#""long""#,
            Value::Long(1 << 40),
            r#""float""#,
            Value::Float((1u64 << 40) as f32),
        ),
        (
            r#""long""#,
            Value::Long(-5),
            r#""double""#,
            Value::Double(-5.0),
        ),
        (
            r#""float""#,
            Value::Float(1.5),
            r#""double""#,
            Value::Double(1.5),
        ),
        (
            r#""string""#,
            Value::String("hé".into()),
            r#""bytes""#,
            Value::Bytes("hé".into()),
        ),
        (
            r#""bytes""#,
            Value::Bytes(b"ok".to_vec()),
            r#""string""#,
            Value::String("ok".into()),
        ),
        // A writer union read as its branch, and a plain value read into a reader union.
        (
            r#"["null","int"]"#,
            Value::Union(1, Box::new(Value::Int(9))),
            r#""long""#,
            Value::Long(9),
        ),
        (
            r#""int""#,
            Value::Int(9),
            r#"["null","string","long"]"#,
            Value::Union(2, Box::new(Value::Long(9))),
        ),
        // A reader union takes the branch of the writer's own type before a promotion.
        (
            r#""int""#,
            Value::Int(9),
            r#"["null","long","int"]"#,
            Value::Union(2, Box::new(Value::Int(9))),
        ),
    ];
    for (writer, value, reader, expected) in cases {
        assert_eq!(
            field(writer, value, reader).unwrap(),
            expected,
            "{writer} -> {reader}"
        );
    }
    // Bytes that are not UTF-8 are not a string.
    fails_at(
        field(r#""bytes""#, Value::Bytes(vec![0xff]), r#""string""#),
        ".x",
        "not UTF-8",
    );
    // A writer union's branch that the reader's type does not take fails for that value only.
    fails_at(
        field(
            r#"["null","string"]"#,
            Value::Union(1, Box::new(Value::String("s".into()))),
            r#"["null","long"]"#,
        ),
        ".x",
        "string matches no branch",
    );
    assert_eq!(
        field(
            r#"["null","string"]"#,
            Value::Union(0, Box::new(Value::Null)),
            r#"["null","long"]"#,
        )
        .unwrap(),
        Value::Union(0, Box::new(Value::Null))
    );
}

#[test]
fn defaults_are_read_as_avro_json() {
    // A bytes default "\u00ff\u00fe" is the two bytes ff fe (not c3 bf c3 be).
    let writer = r#"{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}"#;
    let reader = r#"{"type":"record","name":"R","fields":[{"name":"a","type":"int"},
        {"name":"b","type":"bytes","default":"\u00ff\u00fe"},
        {"name":"f","type":{"type":"fixed","name":"Two","size":2},"default":"\u0001\u00ff"},
        {"name":"u","type":["null","long"],"default":null},
        {"name":"r","type":{"type":"record","name":"In","fields":[{"name":"s","type":"string"}]},
         "default":{"s":"x"}}]}"#;
    let value = resolve(
        writer,
        Value::Record(vec![("a".into(), Value::Int(1))]),
        reader,
    );
    assert_eq!(
        value.unwrap(),
        Value::Record(vec![
            ("a".into(), Value::Int(1)),
            ("b".into(), Value::Bytes(vec![0xff, 0xfe])),
            ("f".into(), Value::Fixed(2, vec![0x01, 0xff])),
            ("u".into(), Value::Union(0, Box::new(Value::Null))),
            (
                "r".into(),
                Value::Record(vec![("s".into(), Value::String("x".into()))])
            ),
        ])
    );
    // A field the writer lacks and the reader gives no default: an error naming it.
    let reader = r#"{"type":"record","name":"R","fields":[{"name":"a","type":"int"},
        {"name":"b","type":"long"}]}"#;
    fails_at(
        resolve(
            writer,
            Value::Record(vec![("a".into(), Value::Int(1))]),
            reader,
        ),
        ".b",
        "no default",
    );
}

#[test]
fn named_types_resolve_by_name_or_alias_only() {
    let writer = r#"{"type":"record","name":"ns.Old","fields":[{"name":"a","type":"int"}]}"#;
    let value = || Value::Record(vec![("a".into(), Value::Int(1))]);
    // Renamed without an alias: refused.
    fails_at(
        resolve(
            writer,
            value(),
            r#"{"type":"record","name":"New","fields":[{"name":"a","type":"int"}]}"#,
        ),
        "",
        "record ns.Old does not resolve to the reader's record New",
    );
    // With the old name as an alias (full or not), and another namespace: read.
    for aliases in [r#"["ns.Old"]"#, r#"["Old"]"#] {
        let reader = format!(
            r#"{{"type":"record","name":"New","aliases":{aliases},"fields":[{{"name":"a","type":"int"}}]}}"#
        );
        assert_eq!(resolve(writer, value(), &reader).unwrap(), value());
    }
    let reader = r#"{"type":"record","name":"other.Old","fields":[{"name":"a","type":"long"}]}"#;
    assert_eq!(
        resolve(writer, value(), reader).unwrap(),
        Value::Record(vec![("a".into(), Value::Long(1))])
    );
    // Fields renamed by the reader's aliases.
    let reader =
        r#"{"type":"record","name":"Old","fields":[{"name":"b","aliases":["a"],"type":"int"}]}"#;
    assert_eq!(
        resolve(writer, value(), reader).unwrap(),
        Value::Record(vec![("b".into(), Value::Int(1))])
    );

    // Enums: by name; a symbol the reader lacks takes its default, or fails.
    let colour = r#"{"type":"enum","name":"C","symbols":["RED","GREEN","BLUE"]}"#;
    let green = || Value::Enum(1, "GREEN".into());
    assert_eq!(
        field(
            colour,
            green(),
            r#"{"type":"enum","name":"C","symbols":["GREEN","RED"]}"#
        )
        .unwrap(),
        Value::Enum(0, "GREEN".into())
    );
    assert_eq!(
        field(
            colour,
            green(),
            r#"{"type":"enum","name":"C","symbols":["RED","OTHER"],"default":"OTHER"}"#
        )
        .unwrap(),
        Value::Enum(1, "OTHER".into())
    );
    fails_at(
        field(
            colour,
            green(),
            r#"{"type":"enum","name":"C","symbols":["RED"]}"#,
        ),
        ".x",
        "no symbol \"GREEN\"",
    );
    fails_at(
        field(
            colour,
            green(),
            r#"{"type":"enum","name":"D","symbols":["GREEN"]}"#,
        ),
        ".x",
        "enum C does not resolve to the reader's enum D",
    );

    // Fixed: the same name and size.
    let four = r#"{"type":"fixed","name":"F","size":4}"#;
    let bytes = || Value::Fixed(4, vec![1, 2, 3, 4]);
    assert_eq!(field(four, bytes(), four).unwrap(), bytes());
    fails_at(
        field(four, bytes(), r#"{"type":"fixed","name":"F","size":5}"#),
        ".x",
        "does not resolve",
    );
    fails_at(
        field(four, bytes(), r#"{"type":"fixed","name":"G","size":4}"#),
        ".x",
        "does not resolve",
    );
}

#[test]
fn types_of_another_kind_never_resolve() {
    let map = r#"{"type":"map","values":"long"}"#;
    let entries = || Value::Map([("a".to_string(), Value::Long(1))].into_iter().collect());
    // map -> record
    fails_at(
        field(
            map,
            entries(),
            r#"{"type":"record","name":"M","fields":[{"name":"a","type":"long"}]}"#,
        ),
        ".x",
        "does not resolve",
    );
    // string -> enum
    fails_at(
        field(
            r#""string""#,
            Value::String("RED".into()),
            r#"{"type":"enum","name":"C","symbols":["RED"]}"#,
        ),
        ".x",
        "does not resolve",
    );
    // fixed -> string, fixed -> bytes
    let four = r#"{"type":"fixed","name":"F","size":4}"#;
    for reader in [r#""string""#, r#""bytes""#] {
        fails_at(
            field(four, Value::Fixed(4, b"abcd".to_vec()), reader),
            ".x",
            "does not resolve",
        );
    }
    // array -> map, and items that do not resolve, named by their index
    fails_at(
        field(
            r#"{"type":"array","items":"long"}"#,
            Value::Array(vec![Value::Long(1)]),
            map,
        ),
        ".x",
        "does not resolve",
    );
    fails_at(
        field(
            r#"{"type":"array","items":"long"}"#,
            Value::Array(vec![Value::Long(1), Value::Long(2)]),
            r#"{"type":"array","items":"int"}"#,
        ),
        ".x[0]",
        "does not resolve",
    );
    fails_at(
        field(map, entries(), r#"{"type":"map","values":"int"}"#),
        ".x{\"a\"}",
        "does not resolve",
    );
}

#[test]
fn logical_types_keep_their_meaning() {
    let millis = r#"{"type":"long","logicalType":"timestamp-millis"}"#;
    let micros = r#"{"type":"long","logicalType":"timestamp-micros"}"#;
    let t = 1_700_000_000_000i64;
    // The same logical type, or one side's alone: the same number.
    assert_eq!(
        field(millis, Value::TimestampMillis(t), millis).unwrap(),
        Value::TimestampMillis(t)
    );
    assert_eq!(
        field(millis, Value::TimestampMillis(t), r#""long""#).unwrap(),
        Value::Long(t)
    );
    assert_eq!(
        field(r#""long""#, Value::Long(t), millis).unwrap(),
        Value::TimestampMillis(t)
    );
    // Another logical type would be another instant.
    fails_at(
        field(millis, Value::TimestampMillis(t), micros),
        ".x",
        "timestamp-millis does not resolve to the reader's timestamp-micros",
    );
    // Decimals: the same precision and scale only.
    let dec = |p: u32, s: u32| {
        format!(r#"{{"type":"bytes","logicalType":"decimal","precision":{p},"scale":{s}}}"#)
    };
    let value = || Value::Decimal(apache_avro::Decimal::from(vec![0x01, 0x00]));
    assert_eq!(field(&dec(10, 2), value(), &dec(10, 2)).unwrap(), value());
    fails_at(
        field(&dec(10, 2), value(), &dec(10, 3)),
        ".x",
        "does not resolve",
    );
    assert_eq!(
        field(&dec(10, 2), value(), r#""bytes""#).unwrap(),
        Value::Bytes(vec![0x01, 0x00])
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Every value resolves to its own writer schema as itself (recursive schemas too).
    #[test]
    fn a_schema_resolves_to_itself(depth in 0usize..20) {
        let list = r#"{"type":"record","name":"L","fields":[{"name":"n","type":["null","L","long"]}]}"#;
        let value = Value::Record(vec![("n".into(), Value::Union(2, Box::new(Value::Long(3))))]);
        let value = (0..depth).fold(value, |inner, _| {
            Value::Record(vec![("n".into(), Value::Union(1, Box::new(inner)))])
        });
        prop_assert_eq!(resolve(list, value.clone(), list).unwrap(), value);
    }

    /// Widening an int field to long, float or double keeps the number, whatever it is.
    #[test]
    fn widening_keeps_the_number(n in any::<i32>()) {
        prop_assert_eq!(field(r#""int""#, Value::Int(n), r#""long""#).unwrap(), Value::Long(n.into()));
        prop_assert_eq!(field(r#""int""#, Value::Int(n), r#""double""#).unwrap(), Value::Double(n.into()));
    }

    /// Narrowing fails for every long, in range of an int or not: resolution is by schema,
    /// not by value.
    #[test]
    fn narrowing_fails_whatever_the_value(n in any::<i64>()) {
        prop_assert!(field(r#""long""#, Value::Long(n), r#""int""#).is_err());
    }
}
