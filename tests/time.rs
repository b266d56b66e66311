//! Event times (spec 8.8): written per record, read back per record and per block by every
//! path (one thread, threads, range reads cut anywhere, streams), and time blocks that
//! describe no data block.

use std::ops::ControlFlow;

use cobsfile::{
    AppenderBuilder, Block, BlockType, Compression, Durability, RangeSink, ReaderBuilder, Window,
    WriterBuilder,
};
use proptest::prelude::*;

/// A record and its time, if it has one.
type Event = (Vec<u8>, Option<i64>);

fn write(events: &[Event], builder: WriterBuilder) -> Vec<u8> {
    let mut writer = builder.build(Vec::new()).unwrap();
    for (record, time) in events {
        match time {
            Some(t) => writer.write_record_at(record, *t).unwrap(),
            None => writer.write_record(record).unwrap(),
        }
    }
    writer.finish().unwrap()
}

/// Records and their times as a reader returns them, and the errors it met.
fn read(file: &[u8], options: &ReaderBuilder) -> (Vec<Event>, Vec<String>) {
    let shared: std::sync::Arc<[u8]> = file.into();
    let mut reader = options.from_shared(&shared);
    let mut events = Vec::new();
    let mut errors = Vec::new();
    while let Some(item) = reader.next_record() {
        match item {
            Ok(record) => {
                let record = record.to_vec();
                events.push((record, reader.record_time()));
            }
            Err(e) => errors.push(e.to_string()),
        }
    }
    (events, errors)
}

/// Records and times as range reads of `options` give them, block by block.
fn read_ranges(file: &[u8], options: &ReaderBuilder) -> (Vec<Event>, Vec<String>) {
    #[derive(Default)]
    struct Sink(Vec<Event>, Vec<String>);
    impl RangeSink<Vec<Event>> for Sink {
        fn part(&mut self, part: Vec<Event>) -> ControlFlow<()> {
            self.0.extend(part);
            ControlFlow::Continue(())
        }
        fn damage(&mut self, damage: &cobsfile::Damage) -> ControlFlow<()> {
            self.1.push(damage.to_string());
            ControlFlow::Continue(())
        }
    }
    let collect = |events: &mut Vec<Event>, block: &Block<'_>| {
        let mut records = block.records();
        while let Some(record) = records.next() {
            events.push((record.to_vec(), records.time()));
        }
    };
    let mut sink = Sink::default();
    options.read_ranges(file, collect, &mut sink).unwrap();
    (sink.0, sink.1)
}

fn events(n: usize, time: impl Fn(usize) -> Option<i64>) -> Vec<Event> {
    (0..n)
        .map(|i| (format!("event {i:05}").into_bytes(), time(i)))
        .collect()
}

#[test]
fn times_come_back_as_written() {
    let base = 1_764_000_000_000_000_000i64;
    let cases: Vec<(&str, Vec<Event>)> = vec![
        (
            "sorted",
            events(3000, |i| Some(base + i as i64 * 1_000_000)),
        ),
        (
            "unsorted",
            events(3000, |i| {
                Some(base + ((i * 7919) % 3000) as i64 * 3_000_000_000)
            }),
        ),
        (
            "negative",
            events(500, |i| Some(-(i as i64) * 1_000_000_007)),
        ),
        (
            "extremes",
            events(40, |i| Some(if i % 2 == 0 { i64::MIN } else { -1 })),
        ),
        (
            "mixed",
            events(3000, |i| (i / 700 % 2 == 0).then_some(base + i as i64)),
        ),
        (
            "far apart",
            events(10, |i| Some(if i % 2 == 0 { i64::MIN } else { i64::MAX })),
        ),
        ("none", events(1000, |_| None)),
    ];
    let builders = [
        ("plain", WriterBuilder::new().block_target(2000)),
        (
            "zstd",
            WriterBuilder::new()
                .block_target(2000)
                .compression(Compression::zstd(3).unwrap()),
        ),
        (
            "threads",
            WriterBuilder::new()
                .block_target(2000)
                .compression(Compression::zstd(1).unwrap())
                .threads(3),
        ),
        (
            "uncompressed threads",
            WriterBuilder::new().block_target(2000).threads(2),
        ),
    ];
    for (what, events) in &cases {
        for (how, builder) in &builders {
            let file = write(events, builder.clone());
            let one = ReaderBuilder::new();
            let (got, errors) = read(&file, &one);
            assert!(errors.is_empty(), "{what}, {how}: {errors:?}");
            assert!(&got == events, "{what}, {how}: one thread");
            let threads = ReaderBuilder::new().threads(2).min_split(1000);
            assert!(read(&file, &threads).0 == *events, "{what}, {how}: threads");
            for split in [1, 700, 5000] {
                let ranges = ReaderBuilder::new().threads(3).min_split(split);
                assert!(
                    read_ranges(&file, &ranges).0 == *events,
                    "{what}, {how}: ranges of {split}"
                );
            }
            let mut stream = ReaderBuilder::new().from_read(&file[..]);
            let mut streamed = Vec::new();
            while let Some(record) = stream.next_record() {
                let record = record.unwrap().to_vec();
                streamed.push((record, stream.record_time()));
            }
            assert!(streamed == *events, "{what}, {how}: stream");
            let report = cobsfile::verify(&mut one.from_slice(&file)).unwrap();
            assert!(report.is_clean(), "{what}, {how}");
        }
    }
}

#[test]
fn far_apart_times_take_blocks_of_their_own() {
    let file = write(
        &events(4, |i| Some(if i % 2 == 0 { i64::MIN } else { i64::MAX })),
        WriterBuilder::new(),
    );
    let mut reader = ReaderBuilder::new().from_slice(&file);
    let mut spans = Vec::new();
    while let Some(block) = reader.next_block() {
        let block = block.unwrap();
        if block.info().block_type == BlockType::Time {
            spans.push(block.times().unwrap().to_vec());
        }
    }
    assert_eq!(spans, [[i64::MIN], [i64::MAX], [i64::MIN], [i64::MAX]]);
}

#[test]
fn time_blocks_stay_within_the_body_limit_writer_and_reader_share() {
    // Empty records take a byte each in a data block and up to ten in a time block: a writer
    // closes a timed block before its time block could pass the body limit, or describe more
    // records than a reader with the same limit decodes times for (8 bytes each, spec 10).
    let max_body = 4096;
    let base = 1_700_000_000_000_000_000i64;
    let far = events(3000, |i| {
        Some(base + (i as i64 % 7) * 1_000_000_000_000_000)
    });
    let empty: Vec<Event> = far.iter().map(|(_, t)| (Vec::new(), *t)).collect();
    let file = write(
        &empty,
        WriterBuilder::new()
            .max_body_size(max_body)
            .block_target(1 << 20),
    );
    let options = ReaderBuilder::new().max_body_size(max_body);
    let mut reader = options.from_slice(&file);
    while let Some(block) = reader.next_block() {
        let block = block.unwrap();
        if block.info().block_type == BlockType::Time {
            assert!(block.info().items.unwrap() <= max_body as u64 / 10);
        }
    }
    assert_eq!(read(&file, &options), (empty.clone(), vec![]));

    // A reader with a lower limit reads the records, and reports each time block it will not
    // decode as unreadable (a limit, not damage), its records without times: here time blocks
    // of one-byte steps, 406 records in some 410 bytes, whose times would take 3248.
    let near: Vec<Event> = (0..406 * 7).map(|i| (Vec::new(), Some(i % 7))).collect();
    let file = write(
        &near,
        WriterBuilder::new()
            .max_body_size(max_body)
            .block_target(1 << 20),
    );
    assert_eq!(read(&file, &options), (near.clone(), vec![]));
    let low = ReaderBuilder::new().max_body_size(max_body / 2);
    let (events, errors) = read(&file, &low);
    assert_eq!(events.len(), near.len());
    assert!(events.iter().all(|e| e.1.is_none()));
    assert!(!errors.is_empty());
    assert!(
        errors
            .iter()
            .all(|e| e.contains("records of one time block")),
        "{errors:?}"
    );
}

#[test]
fn a_time_block_describes_only_the_data_block_right_after_it() {
    let base = 1_000_000_000i64;
    let timed = events(30, |i| Some(base + i as i64));
    let file = write(&timed, WriterBuilder::new().block_target(100));
    let mut reader = ReaderBuilder::new().from_slice(&file);
    let mut blocks = Vec::new();
    while let Some(block) = reader.next_block() {
        let info = block.unwrap().info().clone();
        blocks.push(info);
    }
    let time_blocks: Vec<_> = blocks
        .iter()
        .filter(|b| b.block_type == BlockType::Time)
        .collect();
    assert!(time_blocks.len() > 3);
    for t in &time_blocks {
        let next = blocks
            .iter()
            .find(|b| b.offset == t.offset + t.size)
            .unwrap();
        assert_eq!(next.block_type, BlockType::Data);
        assert_eq!(next.items, t.items);
    }

    // A flipped byte in a data block: its time block describes nothing, and only that block's
    // records are lost; every other record keeps its time.
    let data = blocks
        .iter()
        .filter(|b| b.block_type == BlockType::Data)
        .nth(1)
        .unwrap();
    let mut damaged = file.clone();
    damaged[(data.offset + 4) as usize] ^= 0x10;
    let mut reader = ReaderBuilder::new().from_slice(&damaged);
    let mut kept = Vec::new();
    while let Some(item) = reader.next_record() {
        if let Ok(record) = item {
            let record = record.to_vec();
            kept.push((record, reader.record_time()));
        }
    }
    assert_eq!(reader.stats().unpaired_time_blocks, 1);
    assert_eq!(reader.stats().damaged_regions, 1);
    let lost = data.items.unwrap() as usize;
    assert_eq!(kept.len(), timed.len() - lost);
    assert!(kept.iter().all(|e| timed.contains(e)));

    // A flipped byte in a time block: its data block's records are read, without times.
    let time = time_blocks[1];
    let mut damaged = file.clone();
    damaged[(time.offset + 4) as usize] ^= 0x10;
    let (events, errors) = read(&damaged, &ReaderBuilder::new());
    assert_eq!(errors.len(), 1);
    assert_eq!(events.len(), timed.len());
    let untimed: Vec<_> = events.iter().filter(|e| e.1.is_none()).collect();
    assert_eq!(untimed.len() as u64, time.items.unwrap());
    for (got, want) in events.iter().zip(&timed) {
        assert_eq!(got.0, want.0);
        assert!(got.1.is_none() || got.1 == want.1);
    }
}

#[test]
fn appended_records_keep_their_times() {
    let dir = std::env::temp_dir().join(format!("cobsfile-time-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("log");
    let options = AppenderBuilder::new().durability(Durability::Flush);
    for round in 0..3i64 {
        let mut appender = options.open(&path).unwrap();
        appender.append(b"untimed").unwrap();
        appender.append_at(b"timed", round * 10).unwrap();
        let batch = [(&b"a"[..], round * 10 + 2), (&b"b"[..], round * 10 + 1)];
        appender.append_batch_at(batch).unwrap();
        appender.close().unwrap();
    }
    let file = std::fs::read(&path).unwrap();
    let (events, errors) = read(&file, &ReaderBuilder::new());
    assert!(errors.is_empty());
    let want: Vec<Event> = (0..3i64)
        .flat_map(|round| {
            [
                (b"untimed".to_vec(), None),
                (b"timed".to_vec(), Some(round * 10)),
                (b"a".to_vec(), Some(round * 10 + 2)),
                (b"b".to_vec(), Some(round * 10 + 1)),
            ]
        })
        .collect();
    assert_eq!(events, want);
    std::fs::remove_dir_all(&dir).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever the times, the block sizes and where ranges are cut, every path gives the
    /// records with the times they were written with; after damage, every path gives what a
    /// full read on one thread gives.
    #[test]
    fn every_path_reads_the_same_times(
        times in proptest::collection::vec(proptest::option::weighted(0.8, any::<i64>()), 1..200),
        target in 8usize..400,
        split in 1u64..600,
        flips in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 0..3),
    ) {
        let events: Vec<Event> = times
            .iter()
            .enumerate()
            .map(|(i, t)| (format!("r{i}").into_bytes(), *t))
            .collect();
        let mut file = write(&events, WriterBuilder::new().block_target(target));
        let one = ReaderBuilder::new();
        prop_assert_eq!(&read(&file, &one).0, &events);
        for (at, mask) in &flips {
            let i = at.index(file.len());
            file[i] ^= mask;
        }
        let (want, errors) = read(&file, &one);
        let threads = ReaderBuilder::new().threads(2).min_split(split);
        prop_assert_eq!(&read(&file, &threads), &(want.clone(), errors.clone()));
        let ranges = ReaderBuilder::new().threads(3).min_split(split);
        prop_assert_eq!(&read_ranges(&file, &ranges), &(want, errors));
    }
}

/// The records of `events` (as a full read returns them, with their times) whose time lies in
/// `window`.
fn in_window(events: &[Event], window: Window) -> Vec<Event> {
    events
        .iter()
        .filter(|(_, t)| t.is_some_and(|t| window.contains(t)))
        .cloned()
        .collect()
}

#[test]
fn a_window_reads_exactly_its_records_and_decodes_only_blocks_that_may_hold_them() {
    let second = 1_000_000_000i64;
    // A day of events, a little out of order, with untimed records now and then.
    let events = events(20_000, |i| {
        (i % 997 != 5).then(|| (i as i64 * 4 + (i as i64 * 7919) % 11 - 5) * second)
    });
    // Without an index: every frame is checked, blocks outside the window passed over.
    let file = write(
        &events,
        WriterBuilder::new().block_target(4000).index(false),
    );
    let window = Window::new(Some(40_000 * second), Some(40_600 * second));
    let want = in_window(&events, window);
    assert!(want.len() > 100);
    let options = ReaderBuilder::new().window(window);
    let (got, errors) = read(&file, &options);
    assert!(errors.is_empty());
    assert!(got == want);

    let mut reader = options.from_slice(&file);
    let mut decoded = 0;
    while let Some(block) = reader.next_block() {
        if block.unwrap().info().block_type == BlockType::Data {
            decoded += 1;
        }
    }
    let stats = reader.stats();
    assert!(decoded <= 4, "{decoded} data blocks decoded");
    assert!(stats.outside_window_blocks > 50, "{stats:?}");
    assert!(stats.untimed_blocks_passed > 10, "{stats:?}");

    let threads = ReaderBuilder::new()
        .window(window)
        .threads(2)
        .min_split(10_000);
    assert!(read(&file, &threads).0 == want);
    assert!(read_ranges(&file, &threads).0 == want);
    let mut stream = options.from_read(&file[..]);
    let mut streamed = Vec::new();
    while let Some(record) = stream.next_record() {
        let record = record.unwrap().to_vec();
        streamed.push((record, stream.record_time()));
    }
    assert!(streamed == want);

    // Skipping counts the records of the window.
    let mut reader = options.from_slice(&file);
    reader.skip_records(10);
    let record = reader.next_record().unwrap().unwrap().to_vec();
    assert_eq!(record, want[10].0);
    assert_eq!(reader.record_time(), want[10].1);

    // With an index and its time index, the same records, and only the blocks that may
    // hold them are read (with the header): nothing is passed over.
    let indexed = write(&events, WriterBuilder::new().block_target(4000));
    assert!(read(&indexed, &options) == (want.clone(), vec![]));
    assert!(read(&indexed, &threads).0 == want);
    let mut reader = options.from_slice(&indexed);
    assert!(reader.read_all().0.len() == want.len());
    let planned = reader.stats();
    assert_eq!(planned.outside_window_blocks, 0, "{planned:?}");
    assert_eq!(planned.untimed_blocks_passed, stats.untimed_blocks_passed);
    assert!(planned.blocks <= 9, "{planned:?}");
    // Range reads, cut anywhere, read the same blocks by the time index.
    for split in [1, 500, 10_000] {
        let ranges = ReaderBuilder::new()
            .window(window)
            .threads(3)
            .min_split(split);
        assert!(read_ranges(&indexed, &ranges) == (want.clone(), vec![]));
        let report = ranges.verify(&indexed).unwrap();
        assert_eq!(report.blocks.total(), planned.blocks, "{report:?}");
        assert_eq!(report.untimed_blocks_passed, planned.untimed_blocks_passed);
    }

    // An empty window, and one before every time.
    for window in [
        Window::new(Some(5), Some(4)),
        Window::new(None, Some(-10 * second)),
    ] {
        let options = ReaderBuilder::new().window(window);
        assert_eq!(read(&file, &options), (vec![], vec![]));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// A window read on every path gives the records of a full read whose times are in the
    /// window, and every path gives the same records and damage, whatever the damage.
    #[test]
    fn a_window_read_is_the_full_read_filtered(
        times in proptest::collection::vec(proptest::option::weighted(0.9, -1000i64..1000), 1..300),
        target in 8usize..300,
        split in 1u64..600,
        since in proptest::option::of(-1100i64..1100),
        until in proptest::option::of(-1100i64..1100),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 0..3),
        indexed in any::<bool>(),
    ) {
        let events: Vec<Event> = times
            .iter()
            .enumerate()
            .map(|(i, t)| (format!("r{i}").into_bytes(), *t))
            .collect();
        let mut file = write(&events, WriterBuilder::new().block_target(target).index(indexed));
        for (at, mask) in &flips {
            let i = at.index(file.len());
            file[i] ^= mask;
        }
        let window = Window::new(since, until);
        let full = read(&file, &ReaderBuilder::new()).0;
        let options = ReaderBuilder::new().window(window);
        let (got, errors) = read(&file, &options);
        prop_assert_eq!(&got, &in_window(&full, window));
        let threads = ReaderBuilder::new().window(window).threads(2).min_split(split);
        prop_assert_eq!(&read(&file, &threads), &(got.clone(), errors.clone()));
        // Range reads plan each range by the time index as one reader plans the whole file:
        // the same records. Both report only the damage in the blocks they read (spec 9.9),
        // but where damage runs into a block the plan leaves out, one reader's range may
        // take it in while a range read's stops at the jump: the damage is compared without
        // a time index only.
        let ranges = ReaderBuilder::new().window(window).threads(3).min_split(split);
        let (ranged, ranged_errors) = read_ranges(&file, &ranges);
        prop_assert_eq!(&ranged, &got);
        if !indexed {
            prop_assert_eq!(&ranged_errors, &errors);
        }
    }
}

/// Writers that share a pipe write every block in one write of at most PIPE_BUF bytes: a time
/// block and its data block together, with room kept for the time block however far apart
/// the times are.
#[test]
fn atomic_writes_hold_a_time_block_and_its_data_block() {
    struct Writes(Vec<usize>, Vec<u8>);
    impl std::io::Write for Writes {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.push(buf.len());
            self.1.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let limit = cobsfile::pipe::PIPE_BUF;
    let mut writer = WriterBuilder::new()
        .atomic_writes(limit)
        .build(Writes(Vec::new(), Vec::new()))
        .unwrap();
    let mut events = Vec::new();
    for i in 0..5000i64 {
        // Times far apart, so that each step takes 9 or 10 bytes.
        let t = if i % 2 == 0 {
            i64::MIN / 2 + i
        } else {
            i64::MAX / 2 - i
        };
        let record = format!("e{i}").into_bytes();
        writer.write_record_at(&record, t).unwrap();
        events.push((record, Some(t)));
    }
    let out = writer.finish().unwrap();
    assert!(
        out.0.iter().all(|&n| n <= limit),
        "{:?}",
        out.0.iter().max()
    );
    let (got, errors) = read(&out.1, &ReaderBuilder::new());
    assert!(errors.is_empty());
    assert!(got == events);
}
