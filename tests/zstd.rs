//! zstd blocks: round trips at many levels, with and without dictionaries, mixed codecs, every
//! reader; and every way a compressed block can be wrong, each with its own error, the reader
//! going on with the next block and never returning a record it was not given.

mod common;

use common::{data_payload, header_payload, raw_block, raw_block_with, Fault, TempFile};
use proptest::prelude::*;

use cobsfile::{varint, Cause, Compression, Dictionary, Error, ReaderBuilder, WriterBuilder};

/// JSON-like events that compress well, some records repeated, some random.
fn events(count: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut rng = common::Rng::new(seed);
    (0..count)
        .map(|i| {
            let pad = "x".repeat((rng.next_u64() % 300) as usize);
            format!(
                "{{\"n\":{i},\"level\":\"{}\",\"service\":\"checkout\",\"msg\":\"order {}\",\"pad\":\"{pad}\"}}",
                ["info", "warn", "error"][(rng.next_u64() % 3) as usize],
                rng.next_u64() % 1000
            )
            .into_bytes()
        })
        .collect()
}

fn dictionary() -> Dictionary {
    let samples = events(2000, 99);
    Dictionary::train(&samples, 4096).expect("training")
}

fn write(records: &[Vec<u8>], level: Option<i32>, dict: Option<(&Dictionary, bool)>) -> Vec<u8> {
    let mut builder = WriterBuilder::new().block_target(4096);
    if let Some(level) = level {
        builder = builder.compression(Compression::zstd(level).unwrap());
    }
    if let Some((d, embed)) = dict {
        builder = builder.dictionary(d.clone(), embed);
    }
    let mut writer = builder.build(Vec::new()).unwrap();
    for r in records {
        writer.write_record(r).unwrap();
    }
    writer.finish().unwrap()
}

/// Records and errors through the slice, mapped and streaming readers, which must agree.
fn read_every_way(file: &[u8], builder: &ReaderBuilder) -> (Vec<Vec<u8>>, Vec<Error>) {
    let (records, errors) = builder.from_slice(file).read_all();
    let temp = TempFile::with_contents(file);
    let mapped = cobsfile::open(&temp.0).unwrap();
    let (m_records, m_errors) = mapped.reader_with(builder).read_all();
    let (s_records, s_errors) = builder
        .from_read(common::ChunkedReader::new(file, 7, 999))
        .read_all();
    assert_eq!(records, m_records);
    assert_eq!(records, s_records);
    // Compared as faults: a stream names the end of its window where the next sync byte
    // lies beyond it, so `SyncMismatch::found` may differ.
    let faults =
        |errors: &[Error]| -> Vec<Fault> { errors.iter().map(|e| Fault::from(clone(e))).collect() };
    assert_eq!(faults(&errors), faults(&m_errors));
    assert_eq!(faults(&errors), faults(&s_errors));
    (records, errors)
}

/// A copy of a reader error (the error type is not `Clone`: it may hold an I/O error).
fn clone(e: &Error) -> Error {
    match e {
        Error::Damaged { start, end, cause } => Error::Damaged {
            start: *start,
            end: *end,
            cause: cause.clone(),
        },
        other => panic!("unexpected error {other}"),
    }
}

#[test]
fn round_trips_at_every_level_and_compresses() {
    let records = events(600, 1);
    let raw: usize = records.iter().map(Vec::len).sum();
    for level in [-7, -3, -1, 1, 3, 9, 19, 22] {
        let file = write(&records, Some(level), None);
        assert!(
            file.len() * 3 < raw,
            "level {level}: {} of {raw}",
            file.len()
        );
        let (back, errors) = read_every_way(&file, &ReaderBuilder::new());
        assert!(errors.is_empty(), "level {level}: {errors:?}");
        assert_eq!(back, records, "level {level}");
    }
}

#[test]
fn dictionaries_embedded_and_external() {
    let records = events(300, 2);
    let dict = dictionary();
    let embedded = write(&records, Some(3), Some((&dict, true)));
    let (back, errors) = read_every_way(&embedded, &ReaderBuilder::new());
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(back, records);

    let external = write(&records, Some(3), Some((&dict, false)));
    let given = ReaderBuilder::new().dictionary(dict.clone());
    let (back, errors) = read_every_way(&external, &given);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(back, records);
    let plain = write(&records, Some(3), None);
    assert!(
        external.len() < plain.len(),
        "the dictionary helps small blocks"
    );
}

#[test]
fn a_missing_or_wrong_dictionary_names_both_ids_and_yields_nothing() {
    let records = events(300, 3);
    let dict = dictionary();
    let other = Dictionary::new(b"another dictionary".to_vec());
    let mut file = write(&records, Some(3), Some((&dict, false)));
    // A plain block after the dictionary blocks must still come back.
    let tail = raw_block(3, &data_payload(&[b"after"]));
    file.extend_from_slice(&tail);
    for (builder, given) in [
        (ReaderBuilder::new(), None),
        (
            ReaderBuilder::new().dictionary(other.clone()),
            Some(other.id()),
        ),
    ] {
        let (back, errors) = read_every_way(&file, &builder);
        assert_eq!(
            back,
            vec![b"after".to_vec()],
            "no record of a dictionary block"
        );
        assert_eq!(errors.len(), 1, "{errors:?}");
        match &errors[0] {
            Error::Damaged {
                cause:
                    cause @ Cause::Dictionary {
                        needed, given: g, ..
                    },
                ..
            } => {
                assert_eq!(*needed, dict.id());
                assert_eq!(*g, given);
                assert!(!cause.is_damage());
                let message = errors[0].to_string();
                assert!(
                    message.contains(&format!("{:016x}", dict.id())),
                    "{message}"
                );
                if let Some(id) = given {
                    assert!(message.contains(&format!("{id:016x}")), "{message}");
                }
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn mixed_codecs_in_one_file() {
    let mut file = write(&events(50, 4), Some(3), None);
    let plain = write(&events(50, 5), None, None);
    let fast = write(&events(50, 6), Some(-5), None);
    let header_len = 19;
    file.extend_from_slice(&plain[header_len..]);
    file.extend_from_slice(&fast[header_len..]);
    let mut expected = events(50, 4);
    expected.extend(events(50, 5));
    expected.extend(events(50, 6));
    let (back, errors) = read_every_way(&file, &ReaderBuilder::new());
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(back, expected);
    let codecs: Vec<_> = ReaderBuilder::new()
        .from_slice(&file)
        .blocks()
        .map(|b| b.unwrap().codec)
        .collect();
    assert!(
        codecs.contains(&"zstd-lines") && codecs.contains(&"none"),
        "{codecs:?}"
    );
}

/// A file of a header, a hand-built zstd block, and a plain block that must survive.
fn with_block(block: Vec<u8>) -> Vec<u8> {
    let mut file = vec![0];
    file.extend(raw_block(1, &header_payload(1)));
    file.extend(block);
    file.extend(raw_block(3, &data_payload(&[b"after"])));
    file
}

/// Codec 1 fields for a payload of `size` bytes.
fn zstd_fields(size: i64) -> Vec<u8> {
    let mut fields = Vec::new();
    varint::write(1, &mut fields);
    varint::write(size, &mut fields);
    fields
}

fn single_cause(file: &[u8], max_body_size: usize) -> Cause {
    let builder = ReaderBuilder::new().max_body_size(max_body_size);
    let (records, errors) = read_every_way(file, &builder);
    assert_eq!(records, vec![b"after".to_vec()], "{errors:?}");
    assert_eq!(errors.len(), 1, "{errors:?}");
    match &errors[0] {
        Error::Damaged { cause, .. } => cause.clone(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn each_bad_frame_has_its_own_error() {
    let payload = data_payload(&[b"hello hello hello hello hello hello", b"again hello hello"]);
    let frame = zstd::bulk::compress(&payload, 3).unwrap();
    let size = payload.len() as i64;

    // Control: the hand-built block reads.
    let good = with_block(raw_block_with(3, &zstd_fields(size), &frame, &payload));
    let (whole, errors) = read_every_way(&good, &ReaderBuilder::new());
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(whole.len(), 3);

    // Truncated frame (with a CRC that matches the payload it should have held).
    let cut = &frame[..frame.len() - 3];
    let cause = single_cause(
        &with_block(raw_block_with(3, &zstd_fields(size), cut, &payload)),
        1 << 20,
    );
    assert!(
        matches!(cause, Cause::Decompress { .. } | Cause::SizeMismatch { .. }),
        "{cause:?}"
    );

    // A bit flipped inside the frame: zstd or the CRC catches it, or (a flag zstd ignores) it
    // decodes to the very payload written, which the CRC then vouches for. Never garbage.
    let mut caught = 0;
    for i in 0..frame.len() {
        let mut flipped = frame.clone();
        flipped[i] ^= 0x10;
        let file = with_block(raw_block_with(3, &zstd_fields(size), &flipped, &payload));
        let (records, errors) = read_every_way(&file, &ReaderBuilder::new());
        if errors.is_empty() {
            assert_eq!(
                records, whole,
                "byte {i}: no error, so every record as written"
            );
            continue;
        }
        caught += 1;
        assert_eq!(records, vec![b"after".to_vec()], "byte {i}: {errors:?}");
        assert!(
            matches!(
                &errors[..],
                [Error::Damaged {
                    cause: Cause::Decompress { .. }
                        | Cause::SizeMismatch { .. }
                        | Cause::Crc { .. },
                    ..
                }]
            ),
            "byte {i}: {errors:?}"
        );
    }
    assert!(
        caught > frame.len() / 2,
        "{caught} of {} flips caught",
        frame.len()
    );

    // The frame holds more than the declared size: refused, not allocated.
    let cause = single_cause(
        &with_block(raw_block_with(3, &zstd_fields(size - 1), &frame, &payload)),
        1 << 20,
    );
    assert!(
        matches!(cause, Cause::SizeMismatch { declared, .. } if declared == size as u64 - 1),
        "{cause:?}"
    );
    // ... or less.
    let cause = single_cause(
        &with_block(raw_block_with(3, &zstd_fields(size + 1), &frame, &payload)),
        1 << 20,
    );
    assert!(matches!(cause, Cause::SizeMismatch { .. }), "{cause:?}");

    // A small block claiming a terabyte: refused before any allocation.
    let cause = single_cause(
        &with_block(raw_block_with(3, &zstd_fields(1 << 40), &frame, &payload)),
        1 << 20,
    );
    assert!(
        matches!(cause, Cause::BodyTooLarge { size, .. } if size == 1 << 40),
        "{cause:?}"
    );

    // Codec 2 with a dictionary id cut short.
    let mut fields = Vec::new();
    varint::write(2, &mut fields);
    fields.extend_from_slice(&[1, 2, 3]);
    let cause = single_cause(
        &with_block(raw_block_with(3, &fields, &[], &payload)),
        1 << 20,
    );
    assert!(
        matches!(cause, Cause::Malformed { .. } | Cause::Dictionary { .. }),
        "{cause:?}"
    );

    // An unknown codec.
    let mut fields = Vec::new();
    varint::write(9, &mut fields);
    let cause = single_cause(
        &with_block(raw_block_with(3, &fields, &payload, &payload)),
        1 << 20,
    );
    assert!(
        matches!(cause, Cause::UnsupportedCodec { codec: 9, .. }),
        "{cause:?}"
    );
}

#[test]
fn a_bomb_inflating_past_the_limit_is_refused() {
    // 16 MiB of zeros compresses to a few hundred bytes; the reader's limit is 1 MiB.
    let payload = data_payload(&[&vec![0u8; 16 << 20]]);
    let frame = zstd::bulk::compress(&payload, 3).unwrap();
    assert!(frame.len() < 4096);
    let size = payload.len() as i64;
    let cause = single_cause(
        &with_block(raw_block_with(3, &zstd_fields(size), &frame, &payload)),
        1 << 20,
    );
    assert!(matches!(cause, Cause::BodyTooLarge { .. }), "{cause:?}");
    // Declared small, the frame is cut off at the declared size.
    let cause = single_cause(
        &with_block(raw_block_with(3, &zstd_fields(1000), &frame, &payload)),
        1 << 20,
    );
    assert!(matches!(cause, Cause::SizeMismatch { .. }), "{cause:?}");
}

proptest! {
    #![proptest_config(common::config(24))]

    #[test]
    fn damaged_compressed_files_never_yield_unwritten_records(
        seed in any::<u64>(),
        level in prop::sample::select(vec![-3, 1, 3]),
        flips in prop::collection::vec(any::<prop::sample::Index>(), 1..4),
        embed in any::<bool>(),
    ) {
        let records = events(200, seed);
        let dict = dictionary();
        let mut file = write(&records, Some(level), Some((&dict, embed)));
        for f in &flips {
            let i = f.index(file.len());
            file[i] ^= 0x04;
        }
        let builder = ReaderBuilder::new().dictionary(dict.clone());
        let (back, _) = read_every_way(&file, &builder);
        prop_assert!(common::is_subsequence(&back, &records));
    }
}

/// Compressed blocks default to 2 MiB of records, uncompressed ones to 256 KiB; a target set
/// is kept whatever the compression, and appenders follow their writer's default.
#[test]
fn compressed_blocks_default_to_a_larger_target() {
    use cobsfile::{BlockType, DEFAULT_BLOCK_TARGET, DEFAULT_COMPRESSED_BLOCK_TARGET};
    let zstd = Compression::Zstd { level: 3 };
    assert_eq!(
        WriterBuilder::new().get_block_target(),
        DEFAULT_BLOCK_TARGET
    );
    assert_eq!(
        WriterBuilder::new().compression(zstd).get_block_target(),
        DEFAULT_COMPRESSED_BLOCK_TARGET
    );
    assert_eq!(
        WriterBuilder::new()
            .block_target(1000)
            .compression(zstd)
            .get_block_target(),
        1000
    );
    let data_blocks = |builder: WriterBuilder| {
        let mut writer = builder.build(Vec::new()).unwrap();
        for i in 0..20_000u32 {
            writer
                .write_record(format!("{{\"event\":{i},\"pad\":\"{:050}\"}}", i).as_bytes())
                .unwrap();
        }
        let file = writer.finish().unwrap();
        let mut reader = ReaderBuilder::new().from_slice(&file);
        let mut n = 0;
        while let Some(block) = reader.next_block() {
            n += (block.unwrap().info().block_type == BlockType::Data) as usize;
        }
        n
    };
    // 20,000 records of 70 bytes: 1.4 MB.
    assert_eq!(data_blocks(WriterBuilder::new().compression(zstd)), 1);
    assert_eq!(data_blocks(WriterBuilder::new()), 6);
    assert_eq!(
        data_blocks(
            WriterBuilder::new()
                .compression(zstd)
                .block_target(256 << 10)
        ),
        6
    );
}

/// The codec names of the data blocks of `file`, in order, as `builder` reads them.
fn data_codecs(file: &[u8], builder: &ReaderBuilder) -> Vec<&'static str> {
    builder
        .from_slice(file)
        .blocks()
        .map(|b| b.unwrap())
        .filter(|b| b.block_type == cobsfile::BlockType::Data)
        .map(|b| b.codec)
        .collect()
}

#[test]
fn records_as_lines_where_no_record_holds_a_newline() {
    let records = events(400, 11);
    let with_newline = {
        let mut r = events(400, 12);
        r[200] = b"two\nlines".to_vec();
        r
    };
    let d = dictionary();
    for (records, dict, expected) in [
        (&records, None, "zstd-lines"),
        (&records, Some((&d, true)), "zstd+dict-lines"),
        (&records, Some((&d, false)), "zstd+dict-lines"),
    ] {
        let file = write(records, Some(3), dict);
        let mut builder = ReaderBuilder::new();
        if let Some((d, false)) = dict {
            builder = builder.dictionary(d.clone());
        }
        let codecs = data_codecs(&file, &builder);
        assert!(codecs.iter().all(|c| *c == expected), "{codecs:?}");
        let (back, errors) = read_every_way(&file, &builder);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(&back, records);
    }
    // The block holding a newline keeps length-prefixed records; the others are lines.
    let file = write(&with_newline, Some(3), None);
    let codecs = data_codecs(&file, &ReaderBuilder::new());
    assert_eq!(
        codecs.iter().filter(|c| **c == "zstd").count(),
        1,
        "{codecs:?}"
    );
    assert!(codecs.iter().filter(|c| **c == "zstd-lines").count() > 5);
    let (back, errors) = read_every_way(&file, &ReaderBuilder::new());
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(back, with_newline);
    // For readers that predate lines: codecs 1 and 2 only, the same records.
    let mut writer = WriterBuilder::new()
        .block_target(4096)
        .compression(Compression::zstd(3).unwrap())
        .line_layout(false)
        .build(Vec::new())
        .unwrap();
    for r in &records {
        writer.write_record(r).unwrap();
    }
    let old = writer.finish().unwrap();
    assert!(data_codecs(&old, &ReaderBuilder::new())
        .iter()
        .all(|c| *c == "zstd"));
    assert_eq!(read_every_way(&old, &ReaderBuilder::new()).0, records);
    assert!(old.len() > file.len() / 2);
}

/// Codec 3 fields for lines of `size` bytes.
fn lines_fields(size: i64) -> Vec<u8> {
    let mut fields = Vec::new();
    varint::write(3, &mut fields);
    varint::write(size, &mut fields);
    fields
}

#[test]
fn records_as_lines_built_by_hand() {
    // Lines read as the records they hold, an empty one among them; no bytes, no records.
    for (lines, records) in [
        (&b"one\n\nthree\n"[..], vec![&b"one"[..], b"", b"three"]),
        (b"", vec![]),
        (b"\n", vec![b""]),
    ] {
        let frame = zstd::bulk::compress(lines, 3).unwrap();
        let file = with_block(raw_block_with(
            3,
            &lines_fields(lines.len() as i64),
            &frame,
            lines,
        ));
        let (back, errors) = read_every_way(&file, &ReaderBuilder::new());
        assert!(errors.is_empty(), "{errors:?}");
        let mut expected: Vec<Vec<u8>> = records.iter().map(|r| r.to_vec()).collect();
        expected.push(b"after".to_vec());
        assert_eq!(back, expected);
    }
    // Bytes after the last newline: malformed, nothing of the block returned.
    let lines = b"one\ntwo";
    let frame = zstd::bulk::compress(lines, 3).unwrap();
    let cause = single_cause(
        &with_block(raw_block_with(3, &lines_fields(7), &frame, lines)),
        1 << 20,
    );
    assert!(matches!(cause, Cause::Malformed { .. }), "{cause:?}");
    // A CRC over the records' payload rather than the lines: damage.
    let lines = b"one\ntwo\n";
    let frame = zstd::bulk::compress(lines, 3).unwrap();
    let cause = single_cause(
        &with_block(raw_block_with(
            3,
            &lines_fields(8),
            &frame,
            &data_payload(&[b"one", b"two"]),
        )),
        1 << 20,
    );
    assert!(matches!(cause, Cause::Crc { .. }), "{cause:?}");
    // Lines in a metadata block: malformed.
    let mut file = vec![0];
    file.extend(raw_block(1, &header_payload(1)));
    file.extend(raw_block_with(2, &lines_fields(8), &frame, lines));
    file.extend(raw_block(3, &data_payload(&[b"after"])));
    let (back, errors) = read_every_way(&file, &ReaderBuilder::new());
    assert_eq!(back, vec![b"after".to_vec()]);
    assert!(
        matches!(
            &errors[..],
            [Error::Damaged {
                cause: Cause::Malformed { .. },
                ..
            }]
        ),
        "{errors:?}"
    );
    // Records whose payload would be larger than the reader holds, though their lines are
    // not: refused before room is made for it. 2,000 records of 100 bytes: 202,000 bytes of
    // lines, 204,002 of payload (two-byte lengths, a two-byte count).
    let record = [b'r'; 100];
    let lines: Vec<u8> = (0..2000)
        .flat_map(|_| record.iter().chain(b"\n"))
        .copied()
        .collect();
    let frame = zstd::bulk::compress(&lines, 3).unwrap();
    let block = raw_block_with(3, &lines_fields(lines.len() as i64), &frame, &lines);
    let cause = single_cause(&with_block(block.clone()), 203_000);
    assert!(
        matches!(cause, Cause::BodyTooLarge { size: 204_002, .. }),
        "{cause:?}"
    );
    let (back, errors) = read_every_way(
        &with_block(block),
        &ReaderBuilder::new().max_body_size(204_002),
    );
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(back.len(), 2001);
}
