//! Hostile inputs of issue 11, each one a finding that once broke a promise: crafted files
//! (lying lengths, size claims, floods of dictionaries, broken dictionaries), and what a log's
//! appender does with blocks larger than a reader's limits. Each test names its finding.

mod common;

use std::ops::ControlFlow;

use cobsfile::{
    AppenderBuilder, Block, Cause, Compression, Dictionary, Error, Limits, RangeSink,
    ReaderBuilder, WriterBuilder,
};
use common::{data_payload, header_payload, raw_block, raw_block_with, TempFile};

/// The 19 bytes every version 1 file starts with.
fn file_start() -> Vec<u8> {
    let mut file = vec![0];
    file.extend(raw_block(1, &header_payload(1)));
    file
}

/// Asserts that two reads agree, without printing thousands of records when they do not.
fn assert_same(
    got: &(Vec<Vec<u8>>, Vec<String>),
    expected: &(Vec<Vec<u8>>, Vec<String>),
    what: &str,
) {
    assert_eq!(got.1, expected.1, "{what}: errors");
    assert_eq!(got.0.len(), expected.0.len(), "{what}: records");
    assert!(got.0 == expected.0, "{what}: records differ");
}

/// The records and errors of a sequential read.
fn read(bytes: &[u8], options: &ReaderBuilder) -> (Vec<Vec<u8>>, Vec<String>) {
    // Shared bytes, which a reader with threads reads on them (a borrowed slice, on one).
    let (records, errors) = options.from_shared(&bytes.into()).read_all();
    (records, errors.iter().map(|e| e.to_string()).collect())
}

/// The records and errors of a stream reader, reading in small chunks.
fn read_stream(bytes: &[u8], options: &ReaderBuilder) -> (Vec<Vec<u8>>, Vec<String>) {
    let chunks = common::ChunkedReader::new(bytes, 7, 4096);
    let (records, errors) = options.from_read(chunks).read_all();
    (records, errors.iter().map(|e| e.to_string()).collect())
}

/// The records `ReaderBuilder::read_ranges` gives in order, and its damage reports.
fn read_scan(bytes: &[u8], options: &ReaderBuilder) -> (Vec<Vec<u8>>, Vec<String>) {
    #[derive(Default)]
    struct Sink(Vec<Vec<u8>>, Vec<String>);
    impl RangeSink<Vec<Vec<u8>>> for Sink {
        fn part(&mut self, part: Vec<Vec<u8>>) -> ControlFlow<()> {
            self.0.extend(part);
            ControlFlow::Continue(())
        }
        fn damage(&mut self, damage: &cobsfile::Damage) -> ControlFlow<()> {
            self.1.push(damage.to_string());
            ControlFlow::Continue(())
        }
    }
    let mut sink = Sink::default();
    let collect = |records: &mut Vec<Vec<u8>>, block: &Block<'_>| {
        records.extend(block.records().map(<[u8]>::to_vec));
    };
    options
        .read_ranges(bytes, collect, &mut sink)
        .expect("scan");
    (sink.0, sink.1)
}

// ---------------------------------------------------------------------------------------------
// Finding 2: a damaged length that lands on a later sync byte, before the embedded dictionary.

/// A file of 4000 records in zstd blocks compressed with an embedded dictionary, with a
/// damaged block right before the dictionary block whose length points at a sync byte past
/// it: a full read resynchronizes at the damaged block's own end and finds the dictionary; a
/// skipping scan follows the length and jumps over it.
fn lying_length_before_dictionary() -> Vec<u8> {
    let records: Vec<Vec<u8>> = (0..4000)
        .map(|i| format!("{{\"event\":{i},\"kind\":\"click\",\"page\":\"/home\"}}").into_bytes())
        .collect();
    let dictionary = Dictionary::new(records[..50].concat());
    let mut writer = WriterBuilder::new()
        .block_target(2000)
        .compression(Compression::zstd(3).unwrap())
        .dictionary(dictionary, true)
        .index(false)
        .build(Vec::new())
        .unwrap();
    for r in &records {
        writer.write_record(r).unwrap();
    }
    let written = writer.finish().unwrap();
    // Inserted after the header's closing sync byte (offset 18): a data block of 3 body bytes
    // (type, two length bytes, body, closing sync byte: 7 bytes), whose length points at the
    // closing sync byte of the block after the dictionary block, as if the body ran there.
    let dictionary_close = memchr_from(&written, 19);
    let target = memchr_from(&written, dictionary_close + 1) + 7;
    let body_start = 19 + 1 + 2;
    let mut field = Vec::new();
    cobsfile::varint::write((target + 1 - body_start) as i64, &mut field);
    assert_eq!(field.len(), 2);
    let mut damaged = vec![6];
    damaged.extend(field);
    damaged.extend([1, 2, 3, 0]);
    let mut file = written[..19].to_vec();
    file.extend(&damaged);
    file.extend(&written[19..]);
    file
}

/// The index of the first 0x00 at or after `from`.
fn memchr_from(bytes: &[u8], from: usize) -> usize {
    from + bytes[from..].iter().position(|&b| b == 0).unwrap()
}

#[test]
fn finding_2_threads_and_ranges_find_a_dictionary_behind_a_lying_length() {
    let file = lying_length_before_dictionary();
    let sequential = read(&file, &ReaderBuilder::new());
    assert_eq!(sequential.0.len(), 4000, "{:?}", sequential.1);
    assert_eq!(sequential.1.len(), 1, "{:?}", sequential.1);
    for threads in [1, 2, 4] {
        let options = ReaderBuilder::new().threads(threads).min_split(64);
        assert_same(
            &read(&file, &options),
            &sequential,
            &format!("{threads} threads"),
        );
        let scan = read_scan(&file, &options);
        assert_same(&scan, &sequential, &format!("scan, {threads} threads"));
    }
    assert_same(
        &read_stream(&file, &ReaderBuilder::new()),
        &sequential,
        "stream",
    );
    // Every cut into two ranges gives the records of one read.
    for cut in (1..file.len() as u64).step_by(97) {
        let options = ReaderBuilder::new();
        let mut records = options.from_slice_range(&file, 0..cut).read_all().0;
        records.extend(options.from_slice_range(&file, cut..u64::MAX).read_all().0);
        assert!(
            records == sequential.0,
            "cut at {cut}: {} records",
            records.len()
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Finding 7: size claims, and spec 7.1's "exactly one zstd frame".

/// A zstd frame of `payload` whose header does not declare its content size.
fn frame_without_size(payload: &[u8]) -> Vec<u8> {
    let mut compressor = zstd::bulk::Compressor::new(1).unwrap();
    compressor
        .set_parameter(zstd::zstd_safe::CParameter::ContentSizeFlag(false))
        .unwrap();
    compressor.compress(payload).unwrap()
}

/// The body fields of a codec 1 block declaring `size` bytes.
fn zstd_fields(size: u64) -> Vec<u8> {
    let mut fields = vec![2]; // codec 1
    cobsfile::varint::write(size as i64, &mut fields);
    fields
}

/// Minor page faults of the calling thread so far.
#[cfg(target_os = "linux")]
fn thread_page_faults() -> i64 {
    // SAFETY: `getrusage` writes one `rusage` into the zeroed struct it is given.
    unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::getrusage(libc::RUSAGE_THREAD, &mut usage), 0);
        usage.ru_minflt
    }
}

#[test]
#[cfg(target_os = "linux")]
fn finding_7_a_size_claim_costs_only_the_bytes_produced() {
    // 200 blocks of a few bytes each, each claiming 64 MiB: a reader that fills the claimed
    // size before decompressing touches 64 MiB of pages (16384 faults) and spends its time
    // writing zeros; one that only reserves it touches what the frame writes.
    let payload = data_payload(&[b"tiny"]);
    let frame = frame_without_size(&payload);
    let mut file = file_start();
    for _ in 0..200 {
        file.extend(raw_block_with(3, &zstd_fields(64 << 20), &frame, &payload));
    }
    file.extend(raw_block(3, &data_payload(&[b"last"])));
    for stream in [false, true] {
        let file = file.clone();
        let (records, errors, faults) = std::thread::spawn(move || {
            let before = thread_page_faults();
            let (records, errors) = match stream {
                false => read(&file, &ReaderBuilder::new()),
                true => read_stream(&file, &ReaderBuilder::new()),
            };
            (records, errors, thread_page_faults() - before)
        })
        .join()
        .unwrap();
        assert_eq!(records, [b"last".to_vec()]);
        // The blocks past the reader's budget for decompressing damaged blocks are
        // unreadable to it, a range of their own (spec 9.1).
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(errors[0].contains("does not decompress to its declared 67108864 bytes"));
        assert!(errors[1].contains("limit of 1073769984 bytes decompressed for damaged blocks"));
        assert!(faults < 4096, "stream {stream}: {faults} page faults");
    }
}

#[test]
fn finding_7_a_block_holds_exactly_one_zstd_frame() {
    let payload = data_payload(&[b"record"]);
    let frame = zstd::bulk::compress(&payload, 3).unwrap();
    let half = payload.len() / 2;
    let mut two = zstd::bulk::compress(&payload[..half], 3).unwrap();
    two.extend(zstd::bulk::compress(&payload[half..], 3).unwrap());
    // A skippable frame (magic 0x184D2A50, 4 bytes of content), then the frame.
    let mut skippable = vec![0x50, 0x2a, 0x4d, 0x18, 4, 0, 0, 0, 1, 2, 3, 4];
    skippable.extend(&frame);
    let mut trailing = frame.clone();
    trailing.push(7);
    let size = payload.len() as u64;
    for (what, stored) in [
        ("two frames", &two),
        ("a skippable frame first", &skippable),
        ("a byte after the frame", &trailing),
    ] {
        let mut file = file_start();
        file.extend(raw_block_with(3, &zstd_fields(size), stored, &payload));
        file.extend(raw_block_with(3, &zstd_fields(size), &frame, &payload));
        let (records, errors) = read(&file, &ReaderBuilder::new());
        assert_eq!(records, [b"record".to_vec()], "{what}");
        assert_eq!(errors.len(), 1, "{what}: {errors:?}");
        assert!(errors[0].contains("damaged"), "{what}: {errors:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Finding 6: dictionary floods; finding 9: a dictionary zstd cannot load.

/// A file of `n` distinct 12-byte dictionary blocks and one data block.
fn dictionary_flood(n: u32) -> Vec<u8> {
    let mut file = file_start();
    for i in 0..n {
        let mut dictionary = *b"dictionary..";
        dictionary[8..].copy_from_slice(&i.to_le_bytes());
        file.extend(raw_block(4, &dictionary));
    }
    file.extend(raw_block(3, &data_payload(&[b"after the flood"])));
    file
}

#[test]
fn finding_6_a_dictionary_flood_is_bounded_and_reported_once() {
    let file = dictionary_flood(5000);
    let limits = Limits::default().max_dictionaries(100);
    for (what, options) in [
        ("one thread", ReaderBuilder::new().limits(limits)),
        (
            "two threads",
            ReaderBuilder::new()
                .limits(limits)
                .threads(2)
                .min_split(1000),
        ),
    ] {
        let shared: std::sync::Arc<[u8]> = file.as_slice().into();
        let mut reader = options.from_shared(&shared);
        let mut dictionaries = 0;
        let mut errors = Vec::new();
        while let Some(block) = reader.next_block() {
            match block {
                Ok(block) => {
                    dictionaries +=
                        u32::from(block.info().block_type == cobsfile::BlockType::Dictionary)
                }
                Err(e) => errors.push(e),
            }
        }
        assert_eq!(dictionaries, 100, "{what}");
        assert_eq!(errors.len(), 1, "{what}: {errors:?}");
        let Error::Damaged { cause, .. } = &errors[0] else {
            panic!("{what}: {errors:?}")
        };
        assert!(
            matches!(
                cause,
                Cause::Limit {
                    what: "dictionaries",
                    limit: 100,
                    ..
                }
            ),
            "{what}: {cause}"
        );
        assert!(!cause.is_damage());
    }
    let (records, errors) = read_stream(&file, &ReaderBuilder::new().limits(limits));
    assert_eq!(records, [b"after the flood".to_vec()]);
    assert_eq!(errors.len(), 1, "{errors:?}");
    // The bytes limit, and the default limits on a flood of 2000.
    let by_bytes = Limits::default().max_dictionary_bytes(120);
    let report = ReaderBuilder::new().limits(by_bytes).verify(&file).unwrap();
    assert_eq!(report.blocks.dictionary, 10);
    assert_eq!(report.damaged.len(), 1);
    let report = ReaderBuilder::new()
        .verify(&dictionary_flood(2000))
        .unwrap();
    assert_eq!(
        report.blocks.dictionary,
        cobsfile::DEFAULT_MAX_DICTIONARIES as u64
    );
}

#[test]
fn finding_9_a_dictionary_zstd_cannot_load_is_reported_at_its_block() {
    // zstd's dictionary magic, then junk.
    let junk = [
        0x37, 0xa4, 0x30, 0xec, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
    ];
    let id = cobsfile::dictionary_id(&junk);
    let payload = data_payload(&[b"never decoded"]);
    let mut fields = vec![4]; // codec 2
    fields.extend(id.to_le_bytes());
    cobsfile::varint::write(payload.len() as i64, &mut fields);
    let mut file = file_start();
    let dictionary_at = file.len() as u64 - 1;
    file.extend(raw_block(4, &junk));
    let data_at = file.len() as u64 - 1;
    file.extend(raw_block_with(
        3,
        &fields,
        &[0x28, 0xb5, 0x2f, 0xfd, 0],
        &payload,
    ));
    file.extend(raw_block(3, &data_payload(&[b"plain"])));
    let report = ReaderBuilder::new().verify(&file).unwrap();
    assert_eq!(report.records, 1);
    assert_eq!(report.damaged.len(), 1, "{:?}", report.damaged);
    let damage = &report.damaged[0];
    assert_eq!(damage.range.start, dictionary_at + 1);
    assert!(
        matches!(damage.cause, Cause::Malformed { offset, .. } if offset == dictionary_at),
        "{}",
        damage.cause
    );
    assert!(damage.range.end > data_at, "{damage}");
}

// ---------------------------------------------------------------------------------------------
// Finding 1: an appender never cuts a sound block, whatever a reader's limits.

#[test]
fn finding_1_a_sound_block_over_the_default_limit_is_never_cut() {
    let log = TempFile::with_contents(b"");
    std::fs::remove_file(&log.0).unwrap();
    let big = vec![b'x'; cobsfile::DEFAULT_MAX_BODY_SIZE + 1024];
    let mut appender = AppenderBuilder::new()
        .max_body_size(2 * cobsfile::DEFAULT_MAX_BODY_SIZE)
        .durability(cobsfile::Durability::Fsync)
        .open(&log.0)
        .unwrap();
    appender.append(&big).unwrap();
    assert_eq!(appender.durable(), 1);
    appender.close().unwrap();
    let len = std::fs::metadata(&log.0).unwrap().len();
    // Reopened with default options: the block is over the default limit but sound.
    let mut appender = AppenderBuilder::new().open(&log.0).unwrap();
    assert_eq!(appender.opened().torn, None);
    assert_eq!(std::fs::metadata(&log.0).unwrap().len(), len);
    appender.append(b"small").unwrap();
    appender.close().unwrap();
    let bytes = std::fs::read(&log.0).unwrap();
    let options = ReaderBuilder::new().max_body_size(2 * cobsfile::DEFAULT_MAX_BODY_SIZE);
    let (records, errors) = options.from_slice(&bytes).read_all();
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(records, [big, b"small".to_vec()]);
}

// ---------------------------------------------------------------------------------------------
// Finding 8: a log truncated to nothing under a live appender (logrotate's copytruncate).

/// What logrotate's copytruncate does to a log once it has copied it away: cuts it to nothing
/// under the processes that have it open.
fn copytruncate(path: &std::path::Path) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(0)
        .unwrap();
}

#[test]
fn finding_8_a_log_truncated_to_nothing_under_its_appender_starts_again_with_a_header() {
    let log = TempFile::with_contents(b"");
    let mut appender = AppenderBuilder::new()
        .durability(cobsfile::Durability::Flush)
        .open(&log.0)
        .unwrap();
    appender.append(b"before the rotation").unwrap();
    copytruncate(&log.0);
    appender.append(b"after").unwrap();
    appender.append(b"and after").unwrap();
    appender.close().unwrap();

    let bytes = std::fs::read(&log.0).unwrap();
    assert!(bytes.starts_with(&file_start()), "{:?}", &bytes[..20]);
    let report = ReaderBuilder::new().verify(&bytes).unwrap();
    assert!(report.is_clean(), "{:?}", report.damaged);
    assert_eq!(report.blocks.header, 1);
    // It starts again as an open log: the header and a log block, ahead of the block.
    assert_eq!(
        (report.blocks.log, report.ending),
        (1, cobsfile::Ending::Open)
    );
    assert_eq!(bytes[19..21], [0x0e, 0x0e]);
    let (records, _) = read(&bytes, &ReaderBuilder::new());
    assert_eq!(records, [b"after".to_vec(), b"and after".to_vec()]);
    // And the log reopens for appending.
    let mut appender = AppenderBuilder::new().open(&log.0).unwrap();
    assert_eq!(appender.opened().torn, None);
    appender.append(b"reopened").unwrap();
    appender.close().unwrap();
}

/// A log compressed with a dictionary it embeds starts again with the dictionary too when it is
/// truncated to nothing under its appender: its blocks read without the dictionary given.
#[test]
fn finding_8_a_log_truncated_under_its_appender_embeds_its_dictionary_again() {
    let samples: Vec<Vec<u8>> = (0..500)
        .map(|i| format!("{{\"event\":{i},\"service\":\"api\"}}").into_bytes())
        .collect();
    let dictionary = cobsfile::Dictionary::train(&samples, 2048).unwrap();
    let log = TempFile::with_contents(b"");
    let mut appender = AppenderBuilder::new()
        .durability(cobsfile::Durability::Flush)
        .compression(cobsfile::Compression::Zstd { level: 3 })
        .dictionary(dictionary, true)
        .open(&log.0)
        .unwrap();
    appender.append(&samples[0]).unwrap();
    copytruncate(&log.0);
    for s in &samples[1..100] {
        appender.append(s).unwrap();
    }
    appender.close().unwrap();
    let bytes = std::fs::read(&log.0).unwrap();
    let report = ReaderBuilder::new().verify(&bytes).unwrap();
    assert!(report.is_clean(), "{:?}", report.damaged);
    assert_eq!(report.blocks.dictionary, 1);
    let (records, _) = read(&bytes, &ReaderBuilder::new());
    assert_eq!(records, samples[1..100]);
}

// ---------------------------------------------------------------------------------------------
// Issue 32, finding 13: genuine zstd frames that expand to the largest body, each with a
// wrong CRC, made `verify` of a 10 MB file take 37 s: every one was decompressed in full, for
// nothing.

#[test]
fn decompressing_damaged_blocks_has_a_budget() {
    const SIZE: usize = 8 << 20;
    let payload = data_payload(&[&vec![0u8; SIZE - 8][..]]);
    let frame = zstd::bulk::compress(&payload, 1).unwrap();
    let mut wrong = payload.clone();
    wrong[10] = 1;
    let mut file = file_start();
    for i in 0..40u8 {
        // A genuine frame of SIZE bytes, its CRC computed over other bytes; then an intact
        // uncompressed block, so that no two damaged ranges touch.
        file.extend(raw_block_with(
            3,
            &zstd_fields(payload.len() as u64),
            &frame,
            &wrong,
        ));
        file.extend(raw_block(3, &data_payload(&[&[b'a' + i % 26]])));
    }
    // An intact compressed block after them still reads: it is small.
    let small = data_payload(&[b"compressed"]);
    file.extend(raw_block_with(
        3,
        &zstd_fields(small.len() as u64),
        &zstd::bulk::compress(&small, 1).unwrap(),
        &small,
    ));
    assert!(file.len() < 64 << 10, "{} bytes", file.len());

    let causes = |options: &ReaderBuilder| {
        let (records, errors) = options.from_slice(&file).read_all();
        let causes: Vec<&str> = errors
            .iter()
            .map(|e| match e {
                Error::Damaged { cause, .. } => cause.name(),
                other => panic!("{other}"),
            })
            .collect();
        (records.len(), causes)
    };
    // By default 1 GiB: the 320 MiB of these are all checked, and reported as damage.
    let (records, found) = causes(&ReaderBuilder::new());
    assert_eq!(records, 41);
    assert_eq!(found, vec!["crc"; 40]);

    // With 64 MiB, eight are checked (plus 64 bytes for each byte of body met, a few KiB
    // here); each after them would pass the limit, and is unreadable without being
    // decompressed. The blocks between, and the small one at the end, read.
    let limited = ReaderBuilder::new().limits(Limits::default().max_damaged_decoding(64 << 20));
    let (records, found) = causes(&limited);
    assert_eq!(records, 41);
    let mut expected = vec!["crc"; 8];
    expected.extend(vec!["limit"; 32]);
    assert_eq!(found, expected);
    let message = limited.from_slice(&file).read_all().1[8].to_string();
    assert!(
        message.contains("bytes decompressed for damaged blocks"),
        "{message}"
    );
}

#[test]
#[cfg(target_os = "linux")]
fn a_time_block_of_zero_steps_costs_no_more_than_a_body() {
    // A few KiB of zstd inflate to a time block of 2^23 + 1 zero steps: valid by spec 8.8, and
    // 64 MiB of times once decoded, eight times its payload. A reader refuses more than its
    // body limit's worth (8 bytes a time) from the count alone, before allocating, and reads
    // the data block after it without times.
    let n = (64 << 20) / 8 + 1;
    let mut times = Vec::new();
    cobsfile::varint::write(n, &mut times);
    times.extend([0, 0]); // min 0, span 0
    times.resize(times.len() + n as usize, 0);
    let mut data = Vec::new();
    cobsfile::varint::write(n, &mut data);
    data.resize(data.len() + n as usize, 0); // empty records
    let mut file = file_start();
    for payload in [&times, &data] {
        let frame = zstd::bulk::compress(payload, 3).unwrap();
        let type_id = if payload == &times { 8 } else { 3 };
        file.extend(raw_block_with(
            type_id,
            &zstd_fields(payload.len() as u64),
            &frame,
            payload,
        ));
    }
    assert!(file.len() < 64 << 10, "{} bytes", file.len());

    let (count, errors, untimed, faults) = std::thread::spawn(move || {
        let before = thread_page_faults();
        let mut reader = ReaderBuilder::new().from_slice(&file);
        let (mut count, mut errors, mut untimed) = (0u64, Vec::new(), true);
        while let Some(item) = reader.next_record() {
            match item {
                Ok(_) => {
                    count += 1;
                    untimed &= reader.record_time().is_none();
                }
                Err(e) => errors.push(e.to_string()),
            }
        }
        (count, errors, untimed, thread_page_faults() - before)
    })
    .join()
    .unwrap();
    assert_eq!(count, n as u64);
    assert!(untimed);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].contains("records of one time block") && errors[0].contains("offset 18"),
        "{}",
        errors[0]
    );
    // The two 8 MiB payloads take some 4100 pages; the times would have taken 16384 more.
    assert!(faults < 8192, "{faults} page faults");
}
