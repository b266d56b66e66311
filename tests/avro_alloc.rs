//! Hostile typed records cost memory in proportion to their length, not to what they claim:
//! checked with a counting global allocator (this test binary only, one test function, so no
//! other test allocates meanwhile).

#![cfg(feature = "avro")]

mod counting;

use cobsfile::avro::{AvroReader, AvroReaderBuilder, Error, SchemaLimits, WriterSchema};
use cobsfile::{ReaderBuilder, Writer};
use counting::{peak_bytes, reset_peak};

/// A file announcing `schema` (its JSON as given, with the right fingerprint when it parses)
/// and holding one record: the schema's prefix, then `datum`.
fn file(schema_json: &str, fingerprint: [u8; 8], datum: &[u8]) -> Vec<u8> {
    let mut writer = Writer::new(Vec::new()).unwrap();
    writer
        .write_metadata([
            ("avro.schema", schema_json.as_bytes()),
            ("avro.fingerprint", &fingerprint[..]),
        ])
        .unwrap();
    let mut record = vec![0xc3, 0x01];
    record.extend_from_slice(&fingerprint);
    record.extend_from_slice(datum);
    writer.write_record(&record).unwrap();
    writer.finish().unwrap()
}

fn typed(json: &str, datum: &[u8]) -> Vec<u8> {
    let fingerprint = WriterSchema::parse(json)
        .unwrap()
        .fingerprint()
        .to_le_bytes();
    file(json, fingerprint, datum)
}

/// The problems a typed reader reports reading `bytes`, and the most bytes it held at once.
fn read(bytes: &[u8]) -> (Vec<&'static str>, u64) {
    let mut reader = AvroReader::new(ReaderBuilder::new().from_slice(bytes));
    reset_peak();
    let before = peak_bytes();
    let mut problems = Vec::new();
    while let Some(item) = reader.next_value() {
        match item {
            Ok(value) => panic!("a hostile record decoded: {value:?}"),
            Err(e) => problems.push(Error::name(&e)),
        }
    }
    (problems, peak_bytes() - before)
}

/// A zig-zag varint of `n`.
fn long(n: i64) -> Vec<u8> {
    let mut out = Vec::new();
    cobsfile::varint::write(n, &mut out);
    out
}

/// The memory the default limits let a datum of `len` bytes decode to: 65,536 values plus 16
/// a byte, each an `apache_avro::types::Value`, in vectors that double as they grow (the old
/// and the new held at once).
fn values_allowed(len: usize) -> u64 {
    let values = (65_536 + 16 * len as u64).next_power_of_two();
    3 * values * std::mem::size_of::<apache_avro::types::Value>() as u64
}

#[test]
fn hostile_records_cost_what_their_length_allows() {
    let list = r#"{"type":"record","name":"L","fields":[{"name":"next","type":["null","L"]}]}"#;
    // Claims under apache-avro's own limit of 512 MiB per allocation, which it would make.
    let string = long(400 << 20);
    let mut nulls = long(4 << 20);
    nulls.push(0);
    let mut entries = long(4 << 20);
    entries.extend_from_slice(&[0x00, 0x00]);
    let mut deep_schema = String::new();
    for _ in 0..10_000 {
        deep_schema.push_str(r#"{"type":"array","items":"#);
    }
    deep_schema.push_str(r#""null""#);
    deep_schema.push_str(&"}".repeat(10_000));
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "a string of 400 MiB",
            typed(r#""string""#, &string),
            "undecodable",
        ),
        (
            "bytes of 400 MiB",
            typed(r#""bytes""#, &string),
            "undecodable",
        ),
        (
            "4 Mi nulls",
            typed(r#"{"type":"array","items":"null"}"#, &nulls),
            "limit",
        ),
        (
            "4 Mi map entries",
            typed(r#"{"type":"map","values":"null"}"#, &entries),
            "undecodable",
        ),
        (
            "a fixed of 2^40 bytes, as the file's schema says",
            typed(
                r#"{"type":"fixed","name":"F","size":1099511627776}"#,
                b"abc",
            ),
            "undecodable",
        ),
        (
            "a list 100,000 deep",
            typed(list, &vec![2; 100_000]),
            "limit",
        ),
        (
            "a schema nested 10,000 deep",
            file(&deep_schema, [0; 8], b""),
            "schema-invalid",
        ),
    ];
    for (what, bytes, problem) in cases {
        let (problems, peak) = read(&bytes);
        let expected: &[&str] = match problem {
            "schema-invalid" => &["schema-invalid", "schema-unknown"],
            _ => std::slice::from_ref(&problem),
        };
        assert_eq!(problems, expected, "{what}");
        // The reader's own buffers (a block, its decoded body) plus the values the default
        // limits let a datum of this length decode to (built as the walk that checks it goes,
        // up to the limit), never what the datum claims.
        assert!(
            peak < 4 * bytes.len() as u64 + (1 << 20) + values_allowed(bytes.len()),
            "{what}: {peak} bytes held reading a file of {}",
            bytes.len()
        );
    }
    many_schemas_cost_what_the_limits_allow();
}

/// A file of a few MB announcing thousands of schemas (issue 32, finding 10: `sql count(*)`
/// of 3,000 schemas of 30 fields, 3.4 MB, held 854 MB): each schema is held once, as
/// parsed, without copies for decoders no record has used yet; and within the reader's
/// schema limits, checked before a schema is parsed.
fn many_schemas_cost_what_the_limits_allow() {
    const SCHEMAS: usize = 2000;
    let mut writer = Writer::new(Vec::new()).unwrap();
    let mut text = 0;
    for i in 0..SCHEMAS {
        let fields: Vec<String> = (0..30)
            .map(|j| format!(r#"{{"name":"f{j}","type":"long"}}"#))
            .collect();
        let json = format!(
            r#"{{"type":"record","name":"R{i}","fields":[{}]}}"#,
            fields.join(",")
        );
        let schema = WriterSchema::parse(&json).unwrap();
        text += json.len();
        writer
            .write_metadata(schema.metadata().iter().map(|(k, v)| (*k, &v[..])))
            .unwrap();
        let mut record = schema.prefix().to_vec();
        record.extend_from_slice(&[0; 30]);
        writer.write_record(&record).unwrap();
        writer.flush().unwrap();
    }
    let bytes = writer.finish().unwrap();
    let read = |limits: SchemaLimits| {
        let reader = ReaderBuilder::new().from_slice(&bytes);
        let mut typed = AvroReaderBuilder::new().schema_limits(limits).build(reader);
        reset_peak();
        let before = peak_bytes();
        let (mut datums, mut problems) = (0, Vec::new());
        while let Some(item) = typed.next_datum() {
            match item {
                Ok(_) => datums += 1,
                Err(e) => problems.push(Error::name(&e)),
            }
        }
        (datums, problems, peak_bytes() - before)
    };

    let (datums, problems, peak) = read(SchemaLimits::default());
    assert_eq!((datums, problems.len()), (SCHEMAS, 0));
    // A parsed schema of 30 fields takes about 12 KB; each was held three or four times over.
    assert!(
        peak < 20 * text as u64,
        "{peak} bytes held for {SCHEMAS} schemas of {text} bytes of text"
    );

    for limits in [
        SchemaLimits::default().max_schemas(100),
        SchemaLimits::default().max_bytes(100 * (text / SCHEMAS) as u64 + 50),
    ] {
        let (datums, problems, peak) = read(limits);
        assert_eq!(datums, 100, "{limits:?}");
        let limited = problems.iter().filter(|p| **p == "limit").count();
        let unknown = problems.iter().filter(|p| **p == "schema-unknown").count();
        assert_eq!(
            (limited, unknown),
            (SCHEMAS - 100, SCHEMAS - 100),
            "{limits:?}"
        );
        assert!(
            peak < 2 * text as u64,
            "{limits:?}: {peak} bytes held for 100 schemas"
        );
    }
}
