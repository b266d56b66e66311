//! Avro object container files (`cobsfile::avro::container`): files `apache-avro` writes, with
//! every codec, read block by block with their datums as written; files written here read by
//! `apache-avro`; damage skipped to the next sync marker, costing only its block; hostile
//! headers and blocks refused with offsets, within limits.

#![cfg(feature = "avro")]

use apache_avro::types::Value;
use apache_avro::{Codec as AvroCodec, Schema};
use cobsfile::avro::container::{
    read_header, Codec, Container, ContainerLimits, ContainerWriter, HeaderError,
};
use cobsfile::avro::WriterSchema;
use proptest::prelude::*;

const EVENT: &str = r#"{"type": "record", "name": "Event", "fields": [
  {"name": "id", "type": "long"},
  {"name": "what", "type": "string"},
  {"name": "score", "type": ["null", "double"]}
]}"#;

fn event(i: i64) -> Value {
    Value::Record(vec![
        ("id".into(), Value::Long(i)),
        (
            "what".into(),
            Value::String(format!(
                "event number {i} {}",
                "x".repeat((i % 50) as usize)
            )),
        ),
        (
            "score".into(),
            if i % 3 == 0 {
                Value::Union(0, Box::new(Value::Null))
            } else {
                Value::Union(1, Box::new(Value::Double(i as f64 / 7.0)))
            },
        ),
    ])
}

fn codecs() -> Vec<(AvroCodec, Codec)> {
    vec![
        (AvroCodec::Null, Codec::Null),
        (AvroCodec::Deflate(Default::default()), Codec::Deflate),
        (AvroCodec::Snappy, Codec::Snappy),
        (AvroCodec::Zstandard(Default::default()), Codec::Zstandard),
        (AvroCodec::Bzip2(Default::default()), Codec::Bzip2),
        (AvroCodec::Xz(Default::default()), Codec::Xz),
    ]
}

/// A container file of `n` events written by `apache-avro`, in blocks of about 1 KiB, with
/// one user metadata entry.
fn avro_file(codec: AvroCodec, n: i64) -> Vec<u8> {
    let schema = Schema::parse_str(EVENT).unwrap();
    let mut writer = apache_avro::Writer::builder()
        .schema(&schema)
        .writer(Vec::new())
        .codec(codec)
        .block_size(1024)
        .build();
    writer.add_user_metadata("origin".into(), b"test").unwrap();
    for i in 0..n {
        writer.append(event(i)).unwrap();
    }
    writer.into_inner().unwrap()
}

/// The datums of every block `Container` reads, and the damage it skips.
fn read(bytes: &[u8]) -> (Vec<Vec<u8>>, Vec<(u64, u64)>) {
    let mut container = Container::new(bytes, ContainerLimits::default()).unwrap();
    let (mut datums, mut damage) = (Vec::new(), Vec::new());
    while let Some(block) = container.next_block() {
        match block {
            Ok(block) => datums.extend(block.datums().map(<[u8]>::to_vec)),
            Err(d) => damage.push((d.start, d.end)),
        }
    }
    (datums, damage)
}

/// Each event's Avro binary encoding, as apache-avro makes it.
fn encoded(n: i64) -> Vec<Vec<u8>> {
    let schema = Schema::parse_str(EVENT).unwrap();
    (0..n)
        .map(|i| apache_avro::to_avro_datum(&schema, event(i)).unwrap())
        .collect()
}

#[test]
fn every_codec_reads_back_the_datums_as_written() {
    for (avro, codec) in codecs() {
        let bytes = avro_file(avro, 500);
        let header = read_header(&bytes).unwrap();
        assert_eq!(header.codec, codec);
        assert_eq!(header.metadata, [("origin".to_string(), b"test".to_vec())]);
        let (datums, damage) = read(&bytes);
        assert!(damage.is_empty(), "{codec:?}: {damage:?}");
        assert_eq!(datums, encoded(500), "{codec:?}");
    }
}

#[test]
fn files_written_here_read_with_apache_avro() {
    let schema = WriterSchema::parse(EVENT).unwrap();
    for (_, codec) in codecs() {
        let metadata = [("origin".to_string(), b"cobsfile".to_vec())];
        let mut writer = ContainerWriter::new(Vec::new(), &schema, codec, &metadata).unwrap();
        for datum in encoded(3000) {
            writer.write_datum(&datum).unwrap();
        }
        let bytes = writer.finish().unwrap();
        let reader = apache_avro::Reader::new(&bytes[..]).unwrap();
        assert_eq!(
            reader.user_metadata().get("origin").map(Vec::as_slice),
            Some(&b"cobsfile"[..])
        );
        let values: Vec<Value> = reader.map(Result::unwrap).collect();
        assert_eq!(
            values,
            (0..3000).map(event).collect::<Vec<_>>(),
            "{codec:?}"
        );
        // And back: the same datums.
        assert_eq!(read(&bytes).0, encoded(3000), "{codec:?}");
    }
}

/// Where apache-avro's reader stops at a damaged block, the container reader skips to the
/// next sync marker: the damage costs its block.
#[test]
fn damage_costs_its_block_and_reading_goes_on() {
    for (avro, codec) in codecs() {
        let mut bytes = avro_file(avro, 2000);
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x5a;
        let (datums, damage) = read(&bytes);
        let all = encoded(2000);
        // Every datum read is one written, in order (where the codec checks its data: with
        // `null`, `deflate` and `zstandard` a changed byte can pass every check).
        let mut next = 0;
        let checked = matches!(codec, Codec::Snappy | Codec::Bzip2 | Codec::Xz);
        for d in datums.iter().filter(|_| checked) {
            let at = all[next..]
                .iter()
                .position(|a| a == d)
                .unwrap_or_else(|| panic!("{codec:?}: a datum never written"));
            next += at + 1;
        }
        if codec != Codec::Null {
            // A compressed block fails its checks: exactly one range lost, around the flip.
            assert_eq!(damage.len(), 1, "{codec:?}");
            assert!(
                damage[0].0 <= middle as u64 && (middle as u64) < damage[0].1,
                "{codec:?}"
            );
            assert!(datums.len() >= 2000 - 100, "{codec:?}: {}", datums.len());
        }
        // apache-avro 0.21 stops at the damaged block, or panics in it (a damaged bzip2 or
        // xz block: `codec.rs` unwraps the decoder's error).
        let stopped = std::panic::catch_unwind(|| {
            apache_avro::Reader::new(&bytes[..])
                .map(|r| r.take_while(Result::is_ok).count())
                .unwrap_or(0)
        })
        .unwrap_or(0);
        assert!(datums.len() >= stopped, "{codec:?}: fewer than apache-avro");
    }
}

#[test]
fn a_cut_file_keeps_its_whole_blocks() {
    let bytes = avro_file(AvroCodec::Null, 1000);
    let cut = &bytes[..bytes.len() - 100];
    let (datums, damage) = read(cut);
    assert_eq!(damage.len(), 1);
    assert_eq!(damage[0].1, cut.len() as u64);
    assert_eq!(datums[..], encoded(1000)[..datums.len()]);
}

#[test]
fn bad_headers_name_what_is_wrong() {
    let good = avro_file(AvroCodec::Null, 10);
    assert_eq!(read_header(b"PAR1xxxx").unwrap_err(), HeaderError::NoMagic);
    assert_eq!(
        read_header(b"Ob").unwrap_err(),
        HeaderError::Truncated { offset: 2 }
    );
    for len in 4..60 {
        assert!(read_header(&good[..len]).is_err(), "cut at {len}");
    }
    // An unknown codec, a schema that does not parse.
    let mut codec = avro_file(AvroCodec::Null, 1);
    let key = codec.windows(10).position(|w| w == b"avro.codec").unwrap();
    let at = key + 10 + 1; // the value's length byte, then "null"
    assert_eq!(&codec[at..at + 4], b"null");
    codec[at..at + 4].copy_from_slice(b"lz4x");
    assert_eq!(
        read_header(&codec).unwrap_err(),
        HeaderError::UnknownCodec("lz4x".into())
    );
    let mut schema = good.clone();
    let at = schema.windows(6).position(|w| w == b"record").unwrap();
    schema[at..at + 6].copy_from_slice(b"recorx");
    assert!(matches!(read_header(&schema), Err(HeaderError::Schema(_))));
}

/// A block that claims more datums, or decompresses to more, than the limits allow is
/// reported without being decompressed or walked.
#[test]
fn blocks_over_the_limits_are_reported() {
    let bytes = avro_file(AvroCodec::Deflate(Default::default()), 1000);
    let limits = ContainerLimits::default().max_block(512);
    let mut container = Container::new(&bytes, limits).unwrap();
    let first = container.next_block().unwrap().unwrap_err();
    assert!(
        first.cause.contains("more than the limit"),
        "{}",
        first.cause
    );
    // A deflate bomb: 64 MiB of zeros as one block of a `bytes` schema.
    let schema = WriterSchema::parse(r#""bytes""#).unwrap();
    let mut datum = vec![0x80, 0x80, 0x80, 0x40]; // a length of 64 MiB, zigzag
    datum.extend(std::iter::repeat_n(0u8, 64 << 20));
    let mut writer = ContainerWriter::new(Vec::new(), &schema, Codec::Deflate, &[]).unwrap();
    writer.write_datum(&datum).unwrap();
    let bomb = writer.finish().unwrap();
    assert!(bomb.len() < 200 << 10);
    let limits = ContainerLimits::default().max_block(1 << 20);
    let mut container = Container::new(&bomb, limits).unwrap();
    let damage = container.next_block().unwrap().unwrap_err();
    assert!(
        damage.cause.contains("more than the limit"),
        "{}",
        damage.cause
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Any edits: never a panic, every datum read is one written, damage inside the file.
    #[test]
    fn edits_never_give_a_datum_that_was_not_written(
        codec in 0usize..6,
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let (avro, _) = codecs().swap_remove(codec);
        let mut bytes = avro_file(avro, 300);
        for (at, value) in edits {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        let Ok(mut container) = Container::new(&bytes, ContainerLimits::default()) else {
            return Ok(());
        };
        let all = encoded(300);
        while let Some(block) = container.next_block() {
            match block {
                Ok(block) => {
                    for d in block.datums() {
                        // Only snappy (its CRC-32), bzip2 and xz check their data: with the
                        // others an edit can keep every structure valid.
                        if matches!(codec, 2 | 4 | 5) {
                            prop_assert!(all.iter().any(|a| a == d));
                        }
                    }
                }
                Err(d) => prop_assert!(d.start < d.end && d.end <= bytes.len() as u64),
            }
        }
    }
}

/// Blocks that each decompress to the largest a block may be and then fail their checks
/// cost their decompression every time: a file of them took 0.22 s a block, without end.
/// They are charged to the file's budget like intact ones, and past it the reader stops,
/// saying so, rather than reading on.
#[test]
fn damaged_blocks_are_paid_from_the_files_budget() {
    // Each block: 4 MiB of zeros as one datum of an `int` schema, so it decompresses whole,
    // then fails (a varint of zeros is one datum, followed by 4 MiB left over).
    let schema = WriterSchema::parse(r#""int""#).unwrap();
    let mut writer = ContainerWriter::new(Vec::new(), &schema, Codec::Deflate, &[])
        .unwrap()
        .block_target(8 << 20);
    let zeros = vec![0u8; 4 << 20];
    writer.write_datum(&zeros).unwrap();
    let block = writer.finish().unwrap();
    let header = read_header(&block).unwrap();
    let body = block[header.len..].to_vec();
    let mut file = block.clone();
    for _ in 0..50 {
        file.extend_from_slice(&body);
    }
    let limits = ContainerLimits::default().max_total(22 << 20);
    let mut container = Container::new(&file, limits).unwrap();
    let mut damaged = 0;
    let last = loop {
        match container.next_block() {
            Some(Err(d)) if d.over_budget => break d,
            Some(Err(_)) => damaged += 1,
            Some(Ok(_)) => panic!("the block has bytes left over"),
            None => panic!("read to the end"),
        }
    };
    assert_eq!(damaged, 5, "4 MiB each within 22 MiB");
    assert!(
        last.cause.contains("23068672 bytes in all"),
        "{}",
        last.cause
    );
    assert_eq!(last.end, file.len() as u64);
    assert!(container.next_block().is_none());
}
