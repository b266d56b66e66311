//! Round trips: whatever a `Writer` writes, every reader (slice, mapped, chunked stream) gives
//! back exactly, in order, without errors; and the file has the layout the writer promises.

mod common;

use cobsfile::{varint, BlockType, ReaderBuilder, WriterBuilder};
use common::*;
use proptest::prelude::*;

/// A record length, possibly relative to the block size.
#[derive(Debug, Clone)]
enum Len {
    Abs(usize),
    /// A record whose length prefix plus bytes is the block size plus this (clamped at 0).
    NearBlock(i64),
}

#[derive(Debug, Clone)]
enum OpSpec {
    Record {
        len: Len,
        content: Content,
        seed: u64,
    },
    Metadata(Vec<(String, Vec<u8>)>),
}

fn len_strategy() -> impl Strategy<Value = Len> {
    prop_oneof![
        2 => Just(Len::Abs(0)),
        4 => (1usize..=16).prop_map(Len::Abs),
        3 => (250usize..=260).prop_map(Len::Abs),
        2 => (505usize..=512).prop_map(Len::Abs),
        3 => (0usize..=3000).prop_map(Len::Abs),
        3 => (-4i64..=4).prop_map(Len::NearBlock),
        1 => (3000usize..=40_000).prop_map(Len::Abs),
    ]
}

fn op_strategy() -> impl Strategy<Value = OpSpec> {
    prop_oneof![
        8 => (len_strategy(), content_strategy(), any::<u64>())
            .prop_map(|(len, content, seed)| OpSpec::Record { len, content, seed }),
        1 => metadata_strategy().prop_map(OpSpec::Metadata),
    ]
}

fn block_size_strategy() -> impl Strategy<Value = usize> {
    prop_oneof![
        2 => 1usize..=8,
        3 => 9usize..=300,
        2 => 250usize..=260,
        2 => 300usize..=5000,
        1 => 5000usize..=70_000,
        1 => Just(1 << 20),
        1 => 1usize..=(1 << 20),
    ]
}

/// The records of a record of framed size `framed` (length prefix plus bytes), if any.
fn len_for_framed(framed: i64) -> usize {
    let framed = framed.max(1) as usize;
    (0..=framed)
        .rev()
        .find(|&len| varint::encoded_len(len as i64) + len <= framed)
        .unwrap_or(0)
}

fn realize(specs: &[OpSpec], block_target: usize) -> Vec<Op> {
    specs
        .iter()
        .map(|spec| match spec {
            OpSpec::Record { len, content, seed } => {
                let len = match *len {
                    Len::Abs(n) => n,
                    // Near-block records only for blocks up to 64 KiB here; the MiB cases are
                    // in `large_records_round_trip`.
                    Len::NearBlock(d) if block_target <= 70_000 => {
                        len_for_framed(block_target as i64 + d)
                    }
                    Len::NearBlock(d) => (block_target % 3000) + d.unsigned_abs() as usize,
                };
                Op::Record(record_bytes(len, *content, *seed))
            }
            OpSpec::Metadata(entries) => Op::Metadata(entries.clone()),
        })
        .collect()
}

/// A block the writer is expected to write after the header.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Expect {
    Data(Vec<Vec<u8>>),
    Metadata(Vec<(String, Vec<u8>)>),
}

/// The blocks the writer must produce, from its documented rules: a data block is closed before
/// a record that would take its record bytes (records plus length prefixes) past the target or
/// its body past the maximum block size, and as soon as its record bytes reach the target; a
/// metadata block closes the open data block; `finish` closes it too.
fn model(ops: &[Op], options: Options) -> Vec<Expect> {
    let mut out = Vec::new();
    let mut open: Vec<Vec<u8>> = Vec::new();
    let mut bytes = 0;
    let close = |open: &mut Vec<Vec<u8>>, bytes: &mut usize, out: &mut Vec<Expect>| {
        if !open.is_empty() {
            out.push(Expect::Data(std::mem::take(open)));
            *bytes = 0;
        }
    };
    for op in ops {
        match op {
            Op::Record(r) => {
                let framed = varint::encoded_len(r.len() as i64) + r.len();
                let body = 1 + varint::encoded_len(open.len() as i64 + 1) + bytes + framed + 4;
                if !open.is_empty()
                    && (bytes + framed > options.block_target || body > options.max_body_size)
                {
                    close(&mut open, &mut bytes, &mut out);
                }
                open.push(r.clone());
                bytes += framed;
                if bytes >= options.block_target {
                    close(&mut open, &mut bytes, &mut out);
                }
            }
            Op::Metadata(m) => {
                close(&mut open, &mut bytes, &mut out);
                out.push(Expect::Metadata(m.clone()));
            }
        }
    }
    close(&mut open, &mut bytes, &mut out);
    out
}

/// Checks a clean file as read by one reader against what was written.
fn check_clean(file: &[u8], ops: &[Op], options: Options, o: &Observed) {
    // No damage anywhere.
    assert!(
        o.blocks.iter().all(Result::is_ok),
        "errors: {:?}",
        o.errors().collect::<Vec<_>>()
    );
    assert!(o.record_errors.is_empty());
    assert!(o.metadata.iter().all(Result::is_ok));

    // Every record back, identical and in order; metadata too.
    let written: Vec<&[u8]> = ops.iter().filter_map(Op::record).collect();
    assert_eq!(o.records.len(), written.len(), "record count");
    for (i, (got, want)) in o.records.iter().zip(&written).enumerate() {
        assert!(
            got.as_slice() == *want,
            "record {i} differs (len {} vs {})",
            got.len(),
            want.len()
        );
    }
    let metadata: Vec<&Vec<(String, Vec<u8>)>> = ops
        .iter()
        .filter_map(|op| match op {
            Op::Metadata(m) => Some(m),
            Op::Record(_) => None,
        })
        .collect();
    let read: Vec<&Vec<(String, Vec<u8>)>> = o
        .metadata
        .iter()
        .map(|m| &m.as_ref().unwrap().entries)
        .collect();
    assert_eq!(read, metadata);

    // The blocks tile the file: the header at 0, each next block at offset + size, and the last
    // block's closing sync byte is the file's last byte (no padding from a writer).
    let blocks: Vec<&Blk> = o.ok_blocks().collect();
    assert_eq!(blocks[0].offset, 0);
    assert_eq!(blocks[0].block_type, BlockType::Header);
    assert_eq!(blocks[0].version, Some(cobsfile::FORMAT_VERSION));
    for pair in blocks.windows(2) {
        assert_eq!(pair[1].offset, pair[0].offset + pair[0].size);
    }
    let last = blocks.last().unwrap();
    assert_eq!(last.offset + last.size + 1, file.len() as u64);
    let total: u64 = blocks.iter().map(|b| b.size).sum();
    assert_eq!(
        total + 1,
        file.len() as u64,
        "block sizes add up to the file length minus one"
    );

    // Record counts add up.
    let counted: u64 = blocks
        .iter()
        .filter(|b| b.block_type == BlockType::Data)
        .map(|b| b.items.unwrap())
        .sum();
    assert_eq!(counted, written.len() as u64);

    // Block size: a data block holds at most the target of record bytes unless it holds a
    // single record, never holds zero records, and no body exceeds the maximum block size.
    for b in &blocks {
        assert!(
            b.payload.len() + 5 <= options.max_body_size,
            "body over the maximum"
        );
        if b.block_type == BlockType::Data {
            let bytes: usize = b
                .records
                .iter()
                .map(|r| varint::encoded_len(r.len() as i64) + r.len())
                .sum();
            assert!(!b.records.is_empty(), "empty data block");
            assert!(
                b.records.len() == 1 || bytes <= options.block_target,
                "block at {} holds {} records of {bytes} bytes, target {}",
                b.offset,
                b.records.len(),
                options.block_target
            );
        }
    }

    // The last block is the end block (spec 8.6), the file is finished, and the block before
    // it is the index, listing every block before it as a reader sees it (unless it would not
    // fit in a block).
    let (end, blocks) = blocks.split_last().expect("blocks");
    assert_eq!(end.block_type, BlockType::End, "the end block is last");
    assert_eq!(end.payload.len(), 0);
    assert_eq!(o.ending, Some(cobsfile::Ending::Finished));
    let blocks = match blocks.split_last() {
        Some((last, before)) if last.block_type == BlockType::Index => {
            check_index(file, last, before);
            before
        }
        _ => {
            // The index's body: codec, count, span, an entry per block, CRC.
            let len = |n: u64| varint::encoded_len(n as i64);
            let type_len = |b: &Blk| varint::encoded_len(b.block_type.type_id());
            let span: u64 = blocks.iter().map(|b| b.size).sum();
            let entries: usize = blocks
                .iter()
                .map(|b| {
                    let records = if b.block_type == BlockType::Data {
                        b.items.unwrap()
                    } else {
                        0
                    };
                    type_len(b) + len(b.size) + len(records)
                })
                .sum();
            let body = 1 + len(blocks.len() as u64) + len(span) + entries + 4;
            assert!(
                body > options.max_body_size,
                "no index after {} blocks",
                blocks.len()
            );
            blocks
        }
    };

    // Exactly the blocks the writer's rules call for.
    let layout: Vec<Expect> = blocks[1..]
        .iter()
        .map(|b| match b.block_type {
            BlockType::Data => Expect::Data(b.records.clone()),
            BlockType::Metadata => Expect::Metadata(b.entries.clone()),
            other => panic!("unexpected {other:?} block"),
        })
        .collect();
    let expected = model(ops, options);
    if layout != expected {
        let summary = |e: &[Expect]| -> Vec<String> {
            e.iter()
                .map(|x| match x {
                    Expect::Data(r) => {
                        format!("data{:?}", r.iter().map(Vec::len).collect::<Vec<_>>())
                    }
                    Expect::Metadata(m) => format!("meta({})", m.len()),
                })
                .collect()
        };
        panic!(
            "block layout differs:\n got      {:?}\n expected {:?}",
            summary(&layout),
            summary(&expected)
        );
    }
}

/// Writes `ops`, checks how the writer hands blocks to its output, and reads the file back
/// through all three readers.
fn round_trip(ops: &[Op], options: Options, seed: u64) {
    let file = write_file(ops, options);
    check_write_calls(ops, options, &file);
    let reader = ReaderBuilder::new().max_body_size(options.max_body_size);
    let slice = read_via(&file, &reader, Via::Slice);
    check_clean(&file, ops, options, &slice);
    for via in [
        Via::Mapped,
        Via::Stream {
            seed,
            max_chunk: 1 + (seed >> 40) as usize % 70_000,
        },
    ] {
        let other = read_via(&file, &reader, via);
        assert_eq!(other, slice, "{via:?} disagrees with the slice reader");
    }
    if options.max_body_size == cobsfile::DEFAULT_MAX_BODY_SIZE {
        // `cobsfile::open(path)?.reader()`, the shorthand, with default options.
        let temp = TempFile::with_contents(&file);
        let mapped = cobsfile::open(&temp.0).unwrap();
        let (records, errors) = mapped.reader().read_all();
        assert!(errors.is_empty());
        assert_eq!(records, slice.records);
    }
}

/// The index found at the end of `file` is the block `index_block` and lists exactly `blocks`.
fn check_index(file: &[u8], index_block: &Blk, blocks: &[&Blk]) {
    let index = cobsfile::Index::find(file).expect("the writer's index is found");
    assert_eq!((index.offset(), index.start()), (index_block.offset, 0));
    let listed: Vec<_> = index
        .entries()
        .iter()
        .map(|e| (e.offset, e.block_type, e.size, e.records))
        .collect();
    let seen: Vec<_> = blocks
        .iter()
        .map(|b| {
            let records = if b.block_type == BlockType::Data {
                b.items.unwrap()
            } else {
                0
            };
            (b.offset, b.block_type, b.size, records)
        })
        .collect();
    assert_eq!(listed, seen, "the index lists the blocks a reader sees");
    let records: u64 = seen.iter().map(|s| s.3).sum();
    assert_eq!(index.records(), records);
}

/// The writer hands each block to its output in one `write` call (a `write_all` of one
/// buffer on an output that takes everything): the first call is the leading sync byte and the
/// header block, each later call exactly one block without its opening sync byte.
fn check_write_calls(ops: &[Op], options: Options, file: &[u8]) {
    let mut writer = options.builder().build(RecordingWriter::default()).unwrap();
    for op in ops {
        match op {
            Op::Record(r) => writer.write_record(r).unwrap(),
            Op::Metadata(m) => writer
                .write_metadata(m.iter().map(|(k, v)| (k, v)))
                .unwrap(),
        }
    }
    let out = writer.finish().unwrap();
    assert_eq!(
        out.writes.concat(),
        file,
        "output depends on the block_type of Write"
    );
    let mut header = vec![0];
    header.extend(raw_block(1, &header_payload(1)));
    assert_eq!(
        out.writes[0], header,
        "first write: sync byte and header block"
    );
    for (i, w) in out.writes.iter().enumerate().skip(1) {
        assert!(w.len() >= 2);
        assert_ne!(w[0], 0, "write {i} does not start with a type byte");
        assert_eq!(
            *w.last().unwrap(),
            0,
            "write {i} does not end with a sync byte"
        );
        assert!(
            !w[..w.len() - 1].contains(&0),
            "write {i} is not exactly one block"
        );
    }
    assert!(out.flushes >= 1, "finish flushes");
}

fn ops_strategy() -> impl Strategy<Value = (Vec<OpSpec>, usize, u64)> {
    (
        prop::collection::vec(op_strategy(), 0..40),
        block_size_strategy(),
        any::<u64>(),
    )
}

proptest! {
    #![proptest_config(config(256))]

    /// Arbitrary records and metadata at arbitrary block sizes.
    #[test]
    fn records_and_metadata_round_trip((specs, block_target, seed) in ops_strategy()) {
        let ops = realize(&specs, block_target);
        round_trip(&ops, Options::block_target(block_target), seed);
    }

    /// Many small records, including empty ones, at small block sizes: many blocks.
    #[test]
    fn many_small_records_round_trip(
        lens in prop::collection::vec(0usize..12, 0..400),
        content in content_strategy(),
        block_target in 1usize..64,
        seed: u64,
    ) {
        let ops: Vec<Op> = lens
            .iter()
            .enumerate()
            .map(|(i, &len)| Op::Record(record_bytes(len, content, seed ^ i as u64)))
            .collect();
        round_trip(&ops, Options::block_target(block_target), seed);
    }

    /// The writer's maximum block size is a hard limit, whatever the target: a reader limited
    /// to the same size reads every block.
    #[test]
    fn max_body_size_is_respected(
        max_body_size in 64usize..3000,
        block_target in prop_oneof![1usize..4000, Just(1 << 20)],
        lens in prop::collection::vec(any::<prop::sample::Index>(), 1..60),
        content in content_strategy(),
        seed: u64,
    ) {
        let options = Options { block_target, max_body_size };
        let max_record = options.builder().build(Vec::new()).unwrap().max_record_len();
        let ops: Vec<Op> = lens
            .iter()
            .enumerate()
            .map(|(i, len)| Op::Record(record_bytes(len.index(max_record + 1), content, seed ^ i as u64)))
            .collect();
        round_trip(&ops, options, seed);
    }
}

proptest! {
    #![proptest_config(config(4))]

    /// Records of several MiB among small ones, block sizes up to 1 MiB.
    #[test]
    fn large_records_round_trip(
        specs in prop::collection::vec(
            prop_oneof![
                (0usize..3000, content_strategy(), any::<u64>()),
                ((1usize << 20) - 8..(1 << 20) + 8, content_strategy(), any::<u64>()),
                ((2usize << 20)..(5 << 20), content_strategy(), any::<u64>()),
            ],
            1..6,
        ),
        block_target in prop_oneof![Just(1usize << 20), 1usize..=(1 << 20)],
        seed: u64,
    ) {
        let ops: Vec<Op> = specs
            .iter()
            .map(|&(len, content, seed)| Op::Record(record_bytes(len, content, seed)))
            .collect();
        round_trip(&ops, Options::block_target(block_target), seed);
    }
}

#[test]
fn empty_file_and_empty_writer() {
    // A writer that wrote nothing leaves the sync byte and the header, the spec's 19 bytes,
    // then (unless told not to) its index, and its end block.
    let file = WriterBuilder::new()
        .index(false)
        .build(Vec::new())
        .unwrap()
        .finish()
        .unwrap();
    assert_eq!(
        file,
        [
            0x00, 0x02, 0x20, 0x01, 0x0e, 0x43, 0x4f, 0x42, 0x53, 0x46, 0x49, 0x4c, 0x45, 0x02,
            0x31, 0xed, 0xe8, 0x56, 0x00, 0x0c, 0x0e, 0x01, 0x05, 0xf3, 0x5d, 0x6c, 0xed, 0x00
        ]
    );
    round_trip(&[], Options::block_target(100), 1);
    // A zero-byte input holds nothing, for every reader, and is empty (spec 9.5.1), not clean.
    let o = read_all_ways(&[], &ReaderBuilder::new(), 7, true);
    assert!(o.blocks.is_empty() && o.records.is_empty() && o.metadata.is_empty());
    assert_eq!(o.ending, Some(cobsfile::Ending::Empty));
    let report = ReaderBuilder::new().verify(&[]).unwrap();
    assert!(report.damaged.is_empty() && !report.is_clean());
    // A writer dropped without `finish` leaves its blocks but no end block: unfinished.
    let mut file = Vec::new();
    {
        let mut writer = WriterBuilder::new().build(&mut file).unwrap();
        writer.write_record(b"written").unwrap();
    }
    let report = ReaderBuilder::new().verify(&file).unwrap();
    assert_eq!((report.records, report.damaged.len()), (1, 0));
    assert_eq!(report.ending, cobsfile::Ending::Unfinished);
    assert!(!report.is_clean());
}

#[test]
fn empty_records_round_trip() {
    for block_target in [1, 2, 3, 100] {
        for n in [1, 2, 3, 200, 1000] {
            let ops = vec![Op::Record(Vec::new()); n];
            round_trip(&ops, Options::block_target(block_target), n as u64);
        }
    }
}

#[test]
fn cobs_run_edges_round_trip() {
    // Every length around one and two full COBS runs, zero-free (full 0xFF code blocks, the
    // end rule) and with a zero at each end.
    let mut ops = Vec::new();
    for len in (250..=260).chain(505..=512) {
        ops.push(Op::Record(record_bytes(len, Content::ZeroFree, len as u64)));
        let mut r = record_bytes(len, Content::ZeroFree, len as u64);
        r[0] = 0;
        ops.push(Op::Record(r.clone()));
        *r.last_mut().unwrap() = 0;
        ops.push(Op::Record(r));
    }
    for block_target in [1, 250, 251, 252, 253, 254, 255, 256, 257, 258, 1 << 20] {
        round_trip(
            &ops,
            Options::block_target(block_target),
            block_target as u64,
        );
    }
}

/// A hand-built file (built from the format description, not by the writer) with unknown
/// block types - reserved (10), application-defined (-1) and large (2^40) - among data and
/// metadata: readers skip them in `next_record` and show them in `blocks()`.
#[test]
fn unknown_block_types_are_skipped() {
    let mut file = vec![0];
    file.extend(raw_block(1, &header_payload(1)));
    file.extend(raw_block(3, &data_payload(&[b"before", b""])));
    file.extend(raw_block(10, b"a future block"));
    file.extend(raw_block(-1, b"application \x00 data"));
    file.extend(raw_block(1 << 40, b""));
    file.extend(raw_block(i64::MIN, b"\x00\x00"));
    file.extend(raw_block(i64::MAX, b"x"));
    let mut meta = Vec::new();
    varint::write(1, &mut meta);
    for s in [&b"key"[..], b"\x00value"] {
        varint::write(s.len() as i64, &mut meta);
        meta.extend_from_slice(s);
    }
    file.extend(raw_block(2, &meta));
    file.extend(raw_block(3, &data_payload(&[b"after"])));

    let o = read_all_ways(&file, &ReaderBuilder::new(), 3, true);
    assert!(
        o.errors().next().is_none(),
        "{:?}",
        o.errors().collect::<Vec<_>>()
    );
    assert_eq!(o.records, [&b"before"[..], b"", b"after"]);
    let kinds: Vec<BlockType> = o.ok_blocks().map(|b| b.block_type).collect();
    assert_eq!(
        kinds,
        [
            BlockType::Header,
            BlockType::Data,
            BlockType::Unknown(10),
            BlockType::Unknown(-1),
            BlockType::Unknown(1 << 40),
            BlockType::Unknown(i64::MIN),
            BlockType::Unknown(i64::MAX),
            BlockType::Metadata,
            BlockType::Data
        ]
    );
    let payloads: Vec<&[u8]> = o.ok_blocks().map(|b| b.payload.as_slice()).collect();
    assert_eq!(payloads[3], b"application \x00 data");
    assert_eq!(o.record_stats.unknown_blocks, 5);
    assert_eq!(o.metadata.len(), 1);
    assert_eq!(
        o.metadata[0].as_ref().unwrap().get("key"),
        Some(&b"\x00value"[..])
    );

    // The hand-built header and data blocks are byte for byte what the writer writes.
    let mut writer = WriterBuilder::new().index(false).build(Vec::new()).unwrap();
    writer.write_record(b"before").unwrap();
    writer.write_record(b"").unwrap();
    let written = writer.finish().unwrap();
    let mut expected = vec![0];
    expected.extend(raw_block(1, &header_payload(1)));
    expected.extend(raw_block(3, &data_payload(&[b"before", b""])));
    expected.extend(raw_block(6, b""));
    assert_eq!(written, expected);
}

#[test]
fn a_record_too_large_is_refused_and_the_writer_goes_on() {
    let options = Options {
        block_target: 10,
        max_body_size: 100,
    };
    let mut writer = options.builder().build(Vec::new()).unwrap();
    let max = writer.max_record_len();
    assert!(writer.write_record(&vec![1; max + 1]).is_err());
    writer.write_record(&vec![0; max]).unwrap();
    writer.write_record(b"x").unwrap();
    let file = writer.finish().unwrap();
    let o = read_all_ways(&file, &ReaderBuilder::new().max_body_size(100), 5, true);
    assert!(o.errors().next().is_none());
    assert_eq!(o.records, [vec![0; max], b"x".to_vec()]);
}

/// A 1 MiB block arriving one byte per read. The streaming reader used to search the whole
/// pending block for its closing sync byte again after every read: quadratic (this test ran
/// for over 5 minutes in a debug build); now each byte is searched once.
#[test]
fn a_large_block_in_one_byte_reads() {
    let record = record_bytes(1 << 20, Content::ZeroRich, 8);
    let ops = [
        Op::Record(b"before".to_vec()),
        Op::Record(record),
        Op::Record(b"after".to_vec()),
    ];
    let file = write_file(&ops, Options::block_target(1 << 22));
    let o = read_via(
        &file,
        &ReaderBuilder::new(),
        Via::Stream {
            seed: 1,
            max_chunk: 1,
        },
    );
    check_clean(&file, &ops, Options::block_target(1 << 22), &o);
}

/// `max_body_size(usize::MAX)`, "no limit", used to overflow computing the length limit.
#[test]
fn no_read_limit() {
    let ops = [Op::Record(b"x".to_vec()), Op::Record(vec![0; 70_000])];
    let file = write_file(&ops, Options::block_target(10));
    let o = read_all_ways(
        &file,
        &ReaderBuilder::new().max_body_size(usize::MAX),
        4,
        true,
    );
    check_clean(&file, &ops, Options::block_target(10), &o);
}
