//! The index block: what the writer lists, seeking with it, and readers that never depend on
//! it (damaged, missing, misplaced or hostile indexes).

mod common;

use cobsfile::{BlockType, Compression, Error, Index, ReaderBuilder, WriterBuilder};
use common::{config, raw_block, Rng};
use proptest::prelude::*;

/// A file of `records` records of random small sizes, with a metadata block every so often.
fn file_with(
    records: usize,
    block_target: usize,
    threads: usize,
    zstd: bool,
    seed: u64,
) -> Vec<u8> {
    let mut builder = WriterBuilder::new()
        .block_target(block_target)
        .threads(threads);
    if zstd {
        builder = builder.compression(Compression::zstd(1).unwrap());
    }
    let mut writer = builder.build(Vec::new()).unwrap();
    let mut rng = Rng::new(seed);
    for i in 0..records {
        if rng.below(40) == 0 {
            writer.write_metadata([("at", i.to_string())]).unwrap();
        }
        let pad = "x".repeat(rng.below(60) as usize);
        writer
            .write_record(format!("record {i} {pad}").as_bytes())
            .unwrap();
    }
    writer.finish().unwrap()
}

/// The records and errors a reader yields.
fn read(mut reader: cobsfile::SliceReader<'_>) -> (Vec<Vec<u8>>, Vec<Error>, u64) {
    let (records, errors) = reader.read_all();
    (records, errors, reader.stats().blocks)
}

fn seek(file: &[u8], options: &ReaderBuilder, k: u64) -> (Vec<Vec<u8>>, Vec<Error>, u64) {
    read(options.from_slice_at_record(file, k))
}

fn skip(file: &[u8], options: &ReaderBuilder, k: u64) -> (Vec<Vec<u8>>, Vec<Error>, u64) {
    let mut reader = options.from_slice(file);
    reader.skip_records(k);
    read(reader)
}

/// How many intact blocks a reader that seeks with `index` to record `k` decodes: those from
/// the target block on, the index and the end block.
fn blocks_from_target(index: &Index, k: u64) -> u64 {
    let target = index
        .block_for_record(k)
        .or_else(|| index.block_for_record(index.records() - 1))
        .unwrap();
    let after = index
        .entries()
        .iter()
        .filter(|e| e.offset >= target.offset)
        .count();
    after as u64 + 2
}

proptest! {
    #![proptest_config(config(64))]

    /// On a clean file, seeking to record k with the index, and passing over k records from the
    /// start, both give exactly the records k.. of a full read; the seek decodes only the
    /// blocks from the one holding record k on.
    #[test]
    fn seeking_gives_the_records_of_a_full_read(
        records in 0usize..600,
        block_target in 1usize..400,
        writer_threads in prop_oneof![Just(0usize), Just(2)],
        reader_threads in prop_oneof![Just(0usize), Just(2)],
        zstd: bool,
        k_fraction in 0.0f64..1.1,
        seed: u64,
    ) {
        let file = file_with(records, block_target, writer_threads, zstd, seed);
        let options = ReaderBuilder::new().threads(reader_threads).min_split(256);
        // Shared bytes, which a reader with threads reads on them; seeking reads on one.
        let (full, errors, _) = read(options.from_shared(&file.as_slice().into()));
        prop_assert!(errors.is_empty());
        prop_assert_eq!(full.len(), records);
        let index = Index::find(&file).expect("the writer wrote an index");
        prop_assert_eq!(index.records(), records as u64);
        prop_assert_eq!(index.start(), 0);

        let k = (records as f64 * k_fraction) as u64;
        let tail = full[(k as usize).min(records)..].to_vec();
        let (sought, errors, blocks) = seek(&file, &options, k);
        prop_assert!(errors.is_empty());
        prop_assert_eq!(&sought, &tail, "seek to {}", k);
        if k > 0 && records > 0 {
            prop_assert_eq!(blocks, blocks_from_target(&index, k), "seek to {} read too much", k);
        }
        let (skipped, errors, _) = skip(&file, &options, k);
        prop_assert!(errors.is_empty());
        prop_assert_eq!(&skipped, &tail, "skip {}", k);
    }

    /// Bit flips inside the index block never change what a full read returns (only damage
    /// at the end is added), and seeking still gives the right records: a damaged index is
    /// not found, and readers fall back to counting.
    #[test]
    fn a_damaged_index_changes_no_record(
        records in 1usize..300,
        block_target in 1usize..300,
        flips in prop::collection::vec((any::<u64>(), 1u8..=255), 1..4),
        k_fraction in 0.0f64..1.1,
        seed: u64,
    ) {
        let clean = file_with(records, block_target, 0, false, seed);
        let index = Index::find(&clean).unwrap();
        let options = ReaderBuilder::new();
        let (full, _, _) = read(options.from_slice(&clean));
        let mut file = clean.clone();
        // The index block's bytes after its opening sync byte, up to and including its
        // closing one, which opens the end block (9 bytes after it).
        let first = index.offset() as usize + 1;
        let room = (file.len() - 9 - first) as u64;
        for (at, mask) in flips {
            file[first + (at % room) as usize] ^= mask;
        }
        let (records_read, errors, _) = read(options.from_slice(&file));
        prop_assert_eq!(&records_read, &full);
        for e in &errors {
            match e {
                Error::Damaged { start, .. } => prop_assert!(*start >= first as u64, "{}", e),
                other => prop_assert!(false, "{}", other),
            }
        }
        let k = (records as f64 * k_fraction) as u64;
        let (sought, _, _) = seek(&file, &options, k);
        prop_assert_eq!(&sought[..], &full[(k as usize).min(records)..], "seek to {}", k);
    }

    /// `Index::find` and seeking never panic, whatever the bytes: random bytes, and a clean
    /// file with random bytes changed anywhere. What a seek returns is always a tail of what a
    /// full read returns.
    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in prop::collection::vec(prop_oneof![Just(0u8), any::<u8>()], 0..600),
        edits in prop::collection::vec((any::<u64>(), any::<u8>()), 0..6),
        k in 0u64..200,
        seed: u64,
    ) {
        let _ = Index::find(&bytes);
        let _ = seek(&bytes, &ReaderBuilder::new(), k);
        let mut file = file_with(100, 50, 0, false, seed);
        for (at, byte) in edits {
            let len = file.len() as u64;
            file[(at % len) as usize] = byte;
        }
        if let Some(index) = Index::find(&file) {
            let _ = index.block_for_record(k);
            let _ = index.block_at_or_after(k * 10);
        }
        let (full, _, _) = read(ReaderBuilder::new().from_slice(&file));
        let (sought, _, _) = seek(&file, &ReaderBuilder::new(), k);
        prop_assert!(full.ends_with(&sought));
    }

    /// A hand-built index block with an arbitrary payload at the end of a clean file: never a
    /// panic, the records of a full read are the same, and a seek returns a tail of them.
    #[test]
    fn hostile_index_payloads(
        entries in prop::collection::vec((prop_oneof![Just(1i64), Just(2), Just(3), any::<i64>()], 0i64..200, 0i64..20), 0..12),
        span_delta in -3i64..3,
        k in 0u64..120,
        seed: u64,
    ) {
        let mut file = file_with(60, 80, 0, false, seed);
        let index = Index::find(&file).unwrap();
        file.truncate(index.offset() as usize + 1);
        let (full, _, _) = read(ReaderBuilder::new().from_slice(&file));
        let mut payload = Vec::new();
        cobsfile::varint::write(entries.len() as i64, &mut payload);
        let span: i64 = entries.iter().map(|e| e.1).fold(0i64, i64::wrapping_add);
        cobsfile::varint::write(span.wrapping_add(span_delta), &mut payload);
        for (block_type, size, items) in &entries {
            for v in [*block_type, *size, *items] {
                cobsfile::varint::write(v, &mut payload);
            }
        }
        file.extend(raw_block(5, &payload));
        let _ = Index::find(&file);
        let (records, _, _) = read(ReaderBuilder::new().from_slice(&file));
        prop_assert_eq!(&records, &full);
        let (sought, _, _) = seek(&file, &ReaderBuilder::new(), k);
        prop_assert!(full.ends_with(&sought));
    }
}

/// The index the writer writes lists exactly the blocks a reader sees, on one thread and
/// on two, with compression and an embedded dictionary.
#[test]
fn the_index_lists_the_blocks_a_reader_sees() {
    let samples: Vec<Vec<u8>> = (0..500)
        .map(|i| format!("{{\"event\":{i},\"kind\":\"sample\"}}").into_bytes())
        .collect();
    let dictionary = cobsfile::Dictionary::train(&samples, 4096).unwrap();
    for threads in [0, 2] {
        let mut writer = WriterBuilder::new()
            .block_target(1000)
            .compression(Compression::zstd(3).unwrap())
            .dictionary(dictionary.clone(), true)
            .threads(threads)
            .build(Vec::new())
            .unwrap();
        writer.write_metadata([("source", "test")]).unwrap();
        for (i, sample) in samples.iter().enumerate() {
            writer.write_record(sample).unwrap();
            if i == 250 {
                writer.write_raw_block(-7, b"application block").unwrap();
            }
        }
        let file = writer.finish().unwrap();
        let blocks: Vec<_> = ReaderBuilder::new()
            .from_slice(&file)
            .blocks()
            .map(Result::unwrap)
            .collect();
        let (end, blocks) = blocks.split_last().unwrap();
        assert_eq!(end.block_type, BlockType::End);
        let (last, before) = blocks.split_last().unwrap();
        assert_eq!(last.block_type, BlockType::Index);
        assert_eq!(last.items, Some(before.len() as u64));
        let index = Index::find(&file).unwrap();
        assert_eq!(index.offset(), last.offset);
        assert_eq!(index.len(), before.len());
        let mut first_record = 0;
        for (entry, block) in index.entries().iter().zip(before) {
            let records = match block.block_type {
                BlockType::Data => block.items.unwrap(),
                _ => 0,
            };
            assert_eq!(
                (entry.offset, entry.block_type, entry.size, entry.records),
                (block.offset, block.block_type, block.size, records)
            );
            assert_eq!(entry.first_record, first_record);
            first_record += records;
        }
        assert_eq!(index.records(), 500);
        assert_eq!(before[1].block_type, BlockType::Dictionary);
        // A seek far into the file finds the embedded dictionary before its range.
        let mut reader = ReaderBuilder::new().from_slice_at_record(&file, 400);
        assert_eq!(reader.next_record().unwrap().unwrap(), &samples[400][..]);
        assert_eq!(reader.stats().blocks, 1);
        // Byte offsets: the block at or after any offset.
        for entry in index.entries() {
            assert_eq!(index.block_at_or_after(entry.offset), Some(entry));
            if entry.offset > 0 {
                assert_eq!(index.block_at_or_after(entry.offset - 1), Some(entry));
            }
        }
        assert_eq!(index.block_at_or_after(index.offset()), None);
        // The same file without an index reads the same.
        let mut writer = WriterBuilder::new()
            .block_target(1000)
            .index(false)
            .build(Vec::new())
            .unwrap();
        writer.write_record(b"x").unwrap();
        assert!(Index::find(&writer.finish().unwrap()).is_none());
    }
}

/// 10 data blocks of 10 records, "0" to "99", with the index at the end, and the offset of
/// each data block.
fn ten_blocks() -> (Vec<u8>, Vec<u64>) {
    let mut writer = WriterBuilder::new()
        .block_target(30)
        .build(Vec::new())
        .unwrap();
    for i in 0..100 {
        writer.write_record(format!("{i:02}").as_bytes()).unwrap();
    }
    let file = writer.finish().unwrap();
    let index = Index::find(&file).unwrap();
    let offsets: Vec<u64> = index
        .entries()
        .iter()
        .filter(|e| e.block_type == BlockType::Data)
        .map(|e| e.offset)
        .collect();
    assert_eq!(offsets.len(), 10);
    assert!(index.entries().iter().skip(1).all(|e| e.records == 10));
    (file, offsets)
}

fn texts(records: &[Vec<u8>]) -> Vec<String> {
    records
        .iter()
        .map(|r| String::from_utf8_lossy(r).into_owned())
        .collect()
}

fn range(from: u32, to: u32) -> Vec<String> {
    (from..to).map(|i| format!("{i:02}")).collect()
}

/// Record ordinals on a damaged file: with the index, as written (a lost block's records are
/// missing); without, counted as a full read returns them.
#[test]
fn ordinals_on_a_damaged_file() {
    let (mut file, offsets) = ten_blocks();
    // Lose the block holding records 30..40.
    file[offsets[3] as usize + 5] ^= 0x10;
    let options = ReaderBuilder::new();

    let (records, errors, _) = seek(&file, &options, 25);
    assert_eq!(texts(&records), [range(25, 30), range(40, 100)].concat());
    assert_eq!(errors.len(), 1);

    // Record 35 was in the lost block: the first intact record written after it is 40, and
    // the loss is reported.
    let (records, errors, _) = seek(&file, &options, 35);
    assert_eq!(texts(&records), range(40, 100));
    assert!(matches!(errors[..], [Error::Damaged { start, .. }] if start == offsets[3] + 1));

    let (records, errors, _) = seek(&file, &options, 45);
    assert_eq!(texts(&records), range(45, 100));
    assert!(errors.is_empty());

    // Counting as returned: the 35th record a full read returns is "45".
    let (records, errors, _) = skip(&file, &options, 35);
    assert_eq!(texts(&records), range(45, 100));
    assert_eq!(errors.len(), 1);

    // Every block after record 95's is lost, and the last block too: nothing past 95.
    let mut file = ten_blocks().0;
    file[offsets[9] as usize + 5] ^= 0x10;
    let (records, errors, _) = seek(&file, &options, 95);
    assert!(records.is_empty());
    assert_eq!(errors.len(), 1);
    let (records, errors, _) = seek(&file, &options, 200);
    assert!(records.is_empty());
    assert_eq!(errors.len(), 1);
}

/// An index whose blocks do not start at offset 0 (garbage or another file before them) is
/// used for byte offsets, not for record ordinals; an index that is not the last block is not
/// used at all.
#[test]
fn misplaced_indexes() {
    let (file, _) = ten_blocks();
    let index = Index::find(&file).unwrap();

    let mut prefixed = b"garbage".to_vec();
    prefixed.extend_from_slice(&file);
    let moved = Index::find(&prefixed).unwrap();
    assert_eq!(moved.start(), 7);
    assert_eq!(moved.offset(), index.offset() + 7);
    assert_eq!(
        moved.block_at_or_after(20).map(|e| e.offset),
        index.block_at_or_after(13).map(|e| e.offset + 7)
    );
    let (records, errors, blocks) = seek(&prefixed, &ReaderBuilder::new(), 50);
    assert_eq!(texts(&records), range(50, 100));
    assert_eq!(errors.len(), 1, "the garbage, met counting from the start");
    assert_eq!(blocks, 13, "read from the start");

    // Two files concatenated: the second one's index covers its own blocks only.
    let mut joined = file.clone();
    joined.extend_from_slice(&file);
    let second = Index::find(&joined).unwrap();
    assert_eq!(second.start(), file.len() as u64);
    let (records, errors, _) = seek(&joined, &ReaderBuilder::new(), 150);
    assert_eq!(texts(&records), range(50, 100));
    assert!(errors.is_empty());

    // A block appended after the end block: no index.
    let mut appended = file.clone();
    appended.extend(raw_block(3, &common::data_payload(&[b"late"])));
    assert!(Index::find(&appended).is_none());
    let (records, _, _) = seek(&appended, &ReaderBuilder::new(), 99);
    assert_eq!(texts(&records), ["99", "late"]);

    // Nor after a log block and data appended to the finished file, as an appender does.
    let mut logged = file.clone();
    logged.extend(raw_block(7, b""));
    logged.extend(raw_block(3, &common::data_payload(&[b"late"])));
    assert!(Index::find(&logged).is_none());

    // A block between the index and the end block: no index either.
    let end = file.len() - 10;
    let mut between = file[..=end].to_vec();
    between.extend(raw_block(-1, b"application"));
    between.extend_from_slice(&file[end + 1..]);
    assert!(Index::find(&between).is_none());

    // A damaged end block hides the index (seeking reads from the start, and gets there).
    let mut damaged = file.clone();
    damaged[end + 5] ^= 0x01;
    assert!(Index::find(&damaged).is_none());
    let (records, errors, _) = seek(&damaged, &ReaderBuilder::new(), 99);
    assert_eq!((texts(&records), errors.len()), (vec!["99".to_owned()], 1));
}

/// An index block followed by the end block is found, as the last block was before end blocks
/// existed; so is the index of a file an older writer finished, without an end block.
#[test]
fn the_index_before_the_end_block_and_the_index_of_older_files_are_found() {
    let (file, offsets) = ten_blocks();
    let end = file.len() - 10;
    assert_eq!(
        file[end..],
        [0, 0x0c, 0x0e, 0x01, 0x05, 0xf3, 0x5d, 0x6c, 0xed, 0]
    );
    let index = Index::find(&file).unwrap();
    assert_eq!(
        index.offset() as usize,
        file[..end].iter().rposition(|&b| b == 0).unwrap()
    );
    let (records, errors, blocks) = seek(&file, &ReaderBuilder::new(), 95);
    assert_eq!((texts(&records), errors.len()), (range(95, 100), 0));
    assert_eq!(blocks, 3, "the target block, the index and the end block");

    let older = &file[..=end];
    assert_eq!(Index::find(older), Some(index));
    let (records, errors, blocks) = seek(older, &ReaderBuilder::new(), 95);
    assert_eq!((texts(&records), errors.len()), (range(95, 100), 0));
    assert_eq!(blocks, 2, "the target block and the index");
    assert_eq!(
        ReaderBuilder::new().verify(older).unwrap().ending,
        cobsfile::Ending::Finished,
        "an older writer's finished file"
    );
    assert_eq!(offsets.len(), 10);
}

/// An intact index that lies (a record count that does not match the block it points at) is
/// caught by the check and not used.
#[test]
fn a_lying_index_is_not_trusted() {
    let (file, _) = ten_blocks();
    let index = Index::find(&file).unwrap();
    let mut payload = Vec::new();
    cobsfile::varint::write(index.len() as i64, &mut payload);
    cobsfile::varint::write((index.offset() - index.start()) as i64, &mut payload);
    for e in index.entries() {
        // Every data block claims 11 records.
        let records = if e.block_type == BlockType::Data {
            11
        } else {
            0
        };
        for v in [e.block_type.type_id(), e.size as i64, records] {
            cobsfile::varint::write(v, &mut payload);
        }
    }
    let mut lying = file[..=index.offset() as usize].to_vec();
    lying.extend(raw_block(5, &payload));
    assert_eq!(Index::find(&lying).unwrap().records(), 110);
    let (records, errors, blocks) = seek(&lying, &ReaderBuilder::new(), 55);
    assert_eq!(texts(&records), range(55, 100));
    assert!(errors.is_empty());
    assert_eq!(blocks, 12, "read from the start");
}

#[test]
fn metadata_by_the_index_is_what_a_scan_finds() {
    let mut writer = cobsfile::WriterBuilder::new()
        .block_target(200)
        .build(Vec::new())
        .unwrap();
    for i in 0..300 {
        if i % 100 == 0 {
            writer.write_metadata([("part", format!("{i}"))]).unwrap();
        }
        writer
            .write_record(format!("record {i}").as_bytes())
            .unwrap();
    }
    let file = writer.finish().unwrap();
    let options = cobsfile::ReaderBuilder::new();
    let scanned: Vec<_> = options.from_slice(&file).metadata().flatten().collect();
    assert_eq!(scanned.len(), 3);
    assert_eq!(options.metadata_of(&file), scanned);
    // Without the index (cut off), or with a block gone from where it lists it, the scan.
    let cut = &file[..file.len() - 40];
    let scanned_cut: Vec<_> = options.from_slice(cut).metadata().flatten().collect();
    assert_eq!(options.metadata_of(cut), scanned_cut);
    let mut moved = file.clone();
    let at = scanned[1].offset as usize + 3;
    moved[at] ^= 0x40;
    let damaged: Vec<_> = options.from_slice(&moved).metadata().flatten().collect();
    assert_eq!(damaged.len(), 2);
    assert_eq!(options.metadata_of(&moved), damaged);
}
