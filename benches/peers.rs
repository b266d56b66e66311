//! Writing the corpora in the peer formats and reading files back (cobsfile and its peers),
//! shared by the benchmarks and examples that compare them (included with `#[path]`, next to
//! `corpus.rs`). Each reader returns the bytes of the records it read.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::hint::black_box;
use std::io::Cursor;

use apache_avro::types::Value;
use apache_avro::Schema;
use cobsfile::ReaderBuilder;
use mcap::records::MessageHeader;

use crate::corpus::Corpus;

/// The records of `c` as a cobsfile with the writer's default options, in `buf` (cleared
/// first).
pub fn write_cobsfile_default(c: &Corpus, buf: &mut Vec<u8>) {
    buf.clear();
    let mut w = cobsfile::Writer::new(&mut *buf).expect("header");
    for r in c.records() {
        w.write_record(r).expect("write");
    }
    w.finish().expect("finish");
}

/// The records of `c` as an Avro object container file (schema `"bytes"`, `Codec::Null`) in
/// `buf` (cleared first), through `append_ser` of `serde_bytes::Bytes`: Avro's fastest path,
/// no copy before the encoder.
pub fn write_avro_serde(c: &Corpus, schema: &Schema, buf: &mut Vec<u8>) {
    buf.clear();
    let mut w = apache_avro::Writer::with_codec(schema, &mut *buf, apache_avro::Codec::Null);
    for r in c.records() {
        w.append_ser(serde_bytes::Bytes::new(r)).expect("append");
    }
    w.into_inner().expect("flush");
}

/// The records of `c` as an MCAP file written with `options` into `buf` (cleared first): one
/// channel, one message per record, sequence and times = the record's index.
pub fn write_mcap(c: &Corpus, options: mcap::WriteOptions, mut buf: Vec<u8>) -> Vec<u8> {
    buf.clear();
    let mut w = options.create(Cursor::new(buf)).expect("mcap header");
    let channel = w
        .add_channel(0, "events", "application/octet-stream", &BTreeMap::new())
        .expect("channel");
    for (i, r) in c.records().enumerate() {
        let header = MessageHeader {
            channel_id: channel,
            sequence: i as u32,
            log_time: i as u64,
            publish_time: i as u64,
        };
        w.write_to_known_channel(&header, r).expect("message");
    }
    w.finish().expect("finish");
    w.into_inner().into_inner()
}

pub fn read_cobsfile_slice(file: &[u8]) -> usize {
    let mut reader = ReaderBuilder::new().from_slice(file);
    let mut n = 0;
    while let Some(r) = reader.next_record() {
        n += black_box(r.expect("intact")).len();
    }
    n
}

pub fn read_cobsfile_stream(file: &[u8]) -> usize {
    let mut reader = ReaderBuilder::new().from_read(file);
    let mut n = 0;
    while let Some(r) = reader.next_record() {
        n += black_box(r.expect("intact")).len();
    }
    n
}

pub fn avro_schema() -> Schema {
    Schema::parse_str(r#""bytes""#).expect("schema")
}

pub fn read_avro(file: &[u8]) -> usize {
    let reader = apache_avro::Reader::new(file).expect("avro header");
    let mut n = 0;
    for v in reader {
        match v.expect("avro record") {
            Value::Bytes(b) => n += black_box(b).len(),
            other => panic!("unexpected {other:?}"),
        }
    }
    n
}

pub fn read_mcap(file: &[u8]) -> usize {
    let mut n = 0;
    for m in mcap::MessageStream::new(file).expect("mcap") {
        n += black_box(m.expect("message").data).len();
    }
    n
}
