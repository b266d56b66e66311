//! Typed records (feature `avro`): reading and writing the sample events as Avro through
//! cobsfile's typed reader and writer, beside `apache-avro`'s own object container file
//! reader and writer on the same records (both uncompressed: null codec, codec 0; and both
//! with zstd level 3).
//!
//! `cargo bench -p cobsfile --features avro --bench avro`. Throughput is of the Avro datums'
//! bytes (the records without cobsfile's 10-byte prefix).

use std::hint::black_box;
use std::time::Duration;

use apache_avro::types::Value;
use apache_avro::{Codec, Schema, ZstandardSettings};
use cobsfile::avro::{AvroReader, AvroReaderBuilder, AvroWriter, WriterSchema};
use cobsfile::{Compression, ReaderBuilder, WriterBuilder};
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};

/// The schema of the sample events (samples/events.jsonl).
const SAMPLE: &str = include_str!("../samples/events.avsc");

/// The events as a program deserializes them.
#[derive(serde::Deserialize)]
#[allow(dead_code)]
struct LogEvent {
    ts: String,
    level: String,
    service: String,
    host: String,
    request_id: String,
    latency_ms: f64,
    msg: String,
}

/// The 2,000 sample events, 10 times over.
fn events(schema: &Schema) -> Vec<Value> {
    let text = include_str!("../samples/events.jsonl");
    let one: Vec<Value> = text
        .lines()
        .map(|line| {
            let json: serde_json::Value = serde_json::from_str(line).expect("JSON");
            Value::from(json).resolve(schema).expect("an event")
        })
        .collect();
    (0..10).flat_map(|_| one.iter().cloned()).collect()
}

fn write_cobsfile(schema: &WriterSchema, values: &[Value], zstd: bool, buf: Vec<u8>) -> Vec<u8> {
    let mut builder = WriterBuilder::new();
    if zstd {
        builder = builder.compression(Compression::zstd(3).expect("level"));
    }
    let mut writer =
        AvroWriter::new(builder.build(buf).expect("header"), schema.clone()).expect("schema");
    for value in values {
        writer.write_value(value).expect("write");
    }
    writer.finish().expect("finish")
}

fn write_ocf(schema: &Schema, values: &[Value], codec: Codec, buf: Vec<u8>) -> Vec<u8> {
    let mut writer = apache_avro::Writer::with_codec(schema, buf, codec);
    for value in values {
        writer.append_value_ref(value).expect("append");
    }
    writer.into_inner().expect("flush")
}

fn read_cobsfile_values(file: &[u8]) -> usize {
    let mut reader = AvroReader::new(ReaderBuilder::new().from_slice(file));
    let mut n = 0;
    while let Some(value) = reader.next_value() {
        black_box(value.expect("intact"));
        n += 1;
    }
    n
}

/// The values resolved to a reader schema: the sample's fields, `latency_ms` read as it is,
/// and a field the writer lacks, taken from its default (Avro's schema resolution).
fn read_cobsfile_resolved(file: &[u8], reader_schema: &Schema) -> usize {
    let mut reader = AvroReaderBuilder::new()
        .reader_schema(reader_schema.clone())
        .build(ReaderBuilder::new().from_slice(file));
    let mut n = 0;
    while let Some(value) = reader.next_value() {
        black_box(value.expect("resolves"));
        n += 1;
    }
    n
}

fn read_cobsfile_datums(file: &[u8]) -> usize {
    let mut reader = AvroReader::new(ReaderBuilder::new().from_slice(file));
    let mut n = 0;
    while let Some(datum) = reader.next_datum() {
        n += black_box(datum.expect("intact").datum()).len();
    }
    n
}

fn read_cobsfile_typed(file: &[u8]) -> usize {
    let mut reader = AvroReader::new(ReaderBuilder::new().from_slice(file));
    let mut n = 0;
    while let Some(event) = reader.next_as::<LogEvent>() {
        n += black_box(event.expect("intact")).msg.len();
    }
    n
}

/// The records as bytes, untyped: what the container costs.
fn read_cobsfile_records(file: &[u8]) -> usize {
    let mut reader = ReaderBuilder::new().from_slice(file);
    let mut n = 0;
    while let Some(record) = reader.next_record() {
        n += black_box(record.expect("intact")).len();
    }
    n
}

fn read_ocf_values(file: &[u8]) -> usize {
    let reader = apache_avro::Reader::new(file).expect("header");
    let mut n = 0;
    for value in reader {
        black_box(value.expect("intact"));
        n += 1;
    }
    n
}

fn read_ocf_typed(file: &[u8]) -> usize {
    let reader = apache_avro::Reader::new(file).expect("header");
    let mut n = 0;
    for value in reader {
        let event: LogEvent = apache_avro::from_value(&value.expect("intact")).expect("event");
        n += black_box(event).msg.len();
    }
    n
}

type Group<'a> = BenchmarkGroup<'a, criterion::measurement::WallTime>;

fn bench(c: &mut Criterion) {
    let schema = Schema::parse_str(SAMPLE).expect("schema");
    let writer_schema = WriterSchema::parse(SAMPLE).expect("schema");
    let values = events(&schema);
    let datum_bytes: u64 = values
        .iter()
        .map(|v| {
            apache_avro::to_avro_datum(&schema, v.clone())
                .expect("datum")
                .len() as u64
        })
        .sum();
    let zstd = Codec::Zstandard(ZstandardSettings::new(3));
    let files = [
        (
            "cobsfile",
            write_cobsfile(&writer_schema, &values, false, Vec::new()),
        ),
        (
            "cobsfile-zstd3",
            write_cobsfile(&writer_schema, &values, true, Vec::new()),
        ),
        (
            "ocf-null",
            write_ocf(&schema, &values, Codec::Null, Vec::new()),
        ),
        ("ocf-zstd3", write_ocf(&schema, &values, zstd, Vec::new())),
        (
            "ocf-deflate",
            write_ocf(
                &schema,
                &values,
                Codec::Deflate(Default::default()),
                Vec::new(),
            ),
        ),
    ];
    eprintln!(
        "{} events, {datum_bytes} bytes of datums; files: {}",
        values.len(),
        files
            .iter()
            .map(|(name, f)| format!("{name} {} bytes", f.len()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for (name, file) in &files {
        let n = match name.starts_with("cobsfile") {
            true => read_cobsfile_values(file),
            false => read_ocf_values(file),
        };
        assert_eq!(n, values.len(), "{name}");
    }

    // The sample's schema with one more field, which the writer lacks.
    let mut widened: serde_json::Value = serde_json::from_str(SAMPLE).expect("schema");
    widened["fields"]
        .as_array_mut()
        .expect("fields")
        .push(serde_json::json!({"name": "region", "type": "string", "default": "eu"}));
    let reader_schema = Schema::parse(&widened).expect("reader schema");

    let mut group: Group<'_> = c.benchmark_group("avro-read");
    group.throughput(Throughput::Bytes(datum_bytes));
    for (name, file) in &files {
        match name.starts_with("cobsfile") {
            true => {
                group.bench_function(format!("{name}/values"), |b| {
                    b.iter(|| read_cobsfile_values(file))
                });
                group.bench_function(format!("{name}/struct"), |b| {
                    b.iter(|| read_cobsfile_typed(file))
                });
                group.bench_function(format!("{name}/resolved"), |b| {
                    b.iter(|| read_cobsfile_resolved(file, &reader_schema))
                });
                group.bench_function(format!("{name}/checked-datums"), |b| {
                    b.iter(|| read_cobsfile_datums(file))
                });
                group.bench_function(format!("{name}/records"), |b| {
                    b.iter(|| read_cobsfile_records(file))
                });
            }
            false => {
                group.bench_function(format!("{name}/values"), |b| {
                    b.iter(|| read_ocf_values(file))
                });
                group.bench_function(format!("{name}/struct"), |b| {
                    b.iter(|| read_ocf_typed(file))
                });
            }
        }
    }
    group.finish();

    let mut group: Group<'_> = c.benchmark_group("avro-write");
    group.throughput(Throughput::Bytes(datum_bytes));
    let mut buf = Some(Vec::with_capacity(4 << 20));
    group.bench_function("cobsfile/values", |b| {
        b.iter(|| {
            let mut out = buf.take().expect("buffer");
            out.clear();
            let file = write_cobsfile(&writer_schema, &values, false, out);
            buf = Some(black_box(file));
        })
    });
    group.bench_function("cobsfile-zstd3/values", |b| {
        b.iter(|| {
            let mut out = buf.take().expect("buffer");
            out.clear();
            let file = write_cobsfile(&writer_schema, &values, true, out);
            buf = Some(black_box(file));
        })
    });
    let codecs = [
        ("ocf-null", Codec::Null),
        ("ocf-zstd3", zstd),
        ("ocf-deflate", Codec::Deflate(Default::default())),
    ];
    for (name, codec) in codecs {
        group.bench_function(format!("{name}/values"), |b| {
            b.iter(|| {
                let mut out = buf.take().expect("buffer");
                out.clear();
                let file = write_ocf(&schema, &values, codec, out);
                buf = Some(black_box(file));
            })
        });
    }
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(1000))
        .measurement_time(Duration::from_secs(3))
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench
}
criterion_main!(benches);
