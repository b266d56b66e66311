//! Range reads: readers over adjacent byte ranges, of any sizes, together return every intact
//! block exactly once and in order, the same blocks as one reader over the whole input, on
//! clean and damaged files alike.

mod common;

use cobsfile::{Compression, Dictionary, Ending, Index, ReaderBuilder, WriterBuilder};
use common::*;
use proptest::prelude::*;

/// The intact blocks one reader over the whole input returns.
fn whole(bytes: &[u8], options: &ReaderBuilder) -> Vec<Blk> {
    let mut reader = options.from_slice(bytes);
    let mut blocks = Vec::new();
    while let Some(item) = reader.next_block() {
        if let Ok(block) = item {
            blocks.push(Blk::of(&block));
        }
    }
    blocks
}

/// The intact blocks readers over the ranges between consecutive `cuts` return, in order;
/// checks that every block opens inside its range and every error lies in the input.
fn split(bytes: &[u8], options: &ReaderBuilder, cuts: &[u64]) -> Vec<Blk> {
    let mut blocks = Vec::new();
    for pair in cuts.windows(2) {
        let range = pair[0]..pair[1];
        let mut reader = options.from_slice_range(bytes, range.clone());
        while let Some(item) = reader.next_block() {
            match item {
                Ok(block) => {
                    let blk = Blk::of(&block);
                    assert!(
                        range.contains(&blk.offset),
                        "block at {} outside {range:?}",
                        blk.offset
                    );
                    blocks.push(blk);
                }
                Err(cobsfile::Error::Damaged { start, end, .. }) => {
                    assert!(start < end && end <= bytes.len() as u64);
                }
                Err(e) => panic!("unexpected error {e}"),
            }
        }
    }
    blocks
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn splits_see_every_block_once(
        mut file in file_strategy(),
        edits in prop::collection::vec((any::<u64>(), any::<u8>(), any::<u8>()), 0..4),
        points in prop::collection::vec(any::<u64>(), 0..8),
        threads in prop_oneof![Just(0usize), Just(2)],
    ) {
        damage(&mut file, &edits);
        let options = ReaderBuilder::new().threads(threads);
        let expected = whole(&file, &ReaderBuilder::new());
        let got = split(&file, &options, &cuts(file.len(), &points));
        prop_assert_eq!(got, expected);
    }
}

#[test]
fn every_split_point_of_a_small_file() {
    let ops: Vec<Op> = (0..40u64)
        .map(|i| Op::Record(record_bytes(i as usize % 23, Content::Random, i)))
        .collect();
    let mut file = write_file(&ops, Options::block_target(30));
    file[50] ^= 0x10;
    let options = ReaderBuilder::new();
    let expected = whole(&file, &options);
    for a in 0..=file.len() as u64 + 1 {
        for b in [a, a + 1, a + 7, a + 100] {
            let got = split(&file, &options, &[0, a, b, u64::MAX]);
            assert_eq!(got, expected, "cuts at {a} and {b}");
        }
    }
}

/// A range after the dictionary block still decodes the blocks compressed with it, on one
/// thread and on two.
#[test]
fn ranges_find_the_embedded_dictionary() {
    let samples: Vec<Vec<u8>> = (0..2000)
        .map(|i| format!("{{\"event\":{i},\"service\":\"api\",\"status\":\"ok\"}}").into_bytes())
        .collect();
    let dictionary = Dictionary::train(&samples, 4096).expect("train");
    let mut writer = WriterBuilder::new()
        .block_target(2000)
        .compression(Compression::Zstd { level: 3 })
        .dictionary(dictionary, true)
        .build(Vec::new())
        .expect("build");
    for s in &samples {
        writer.write_record(s).expect("write");
    }
    let file = writer.finish().expect("finish");
    for threads in [0, 2] {
        let options = ReaderBuilder::new().threads(threads);
        let expected = whole(&file, &options);
        assert!(expected.iter().any(|b| b.codec == "zstd+dict-lines"));
        let len = file.len() as u64;
        let got = split(&file, &options, &[0, len / 3, len / 2, len - 5, u64::MAX]);
        assert_eq!(got, expected, "threads {threads}");
    }
}

/// Collects what a scan hands the sink, giving the emptied values back for reuse.
#[derive(Default)]
struct Collect {
    records: Vec<Vec<u8>>,
    damage: Vec<std::ops::Range<u64>>,
    spare: Option<Vec<Vec<u8>>>,
}

impl cobsfile::RangeSink<Vec<Vec<u8>>> for Collect {
    fn part(&mut self, mut records: Vec<Vec<u8>>) -> std::ops::ControlFlow<()> {
        self.records.append(&mut records);
        self.spare = Some(records);
        std::ops::ControlFlow::Continue(())
    }
    fn recycle(&mut self) -> Option<Vec<Vec<u8>>> {
        self.spare.take()
    }
    fn damage(&mut self, damage: &cobsfile::Damage) -> std::ops::ControlFlow<()> {
        self.damage.push(damage.range.clone());
        std::ops::ControlFlow::Continue(())
    }
}

/// How a written file is made to end: as written (finished), cut right after its `k`-th sync
/// byte (at a block boundary), with a log block and a data block appended (an open log), or
/// cut to nothing.
#[derive(Debug, Clone, Copy)]
enum Shape {
    Written,
    CutAtSync(usize),
    AppendLog,
    Empty,
}

fn shape_strategy() -> impl Strategy<Value = Shape> {
    prop_oneof![
        2 => Just(Shape::Written),
        2 => any::<usize>().prop_map(Shape::CutAtSync),
        1 => Just(Shape::AppendLog),
        1 => Just(Shape::Empty),
    ]
}

fn shape(file: &mut Vec<u8>, shape: Shape) {
    match shape {
        Shape::Written => {}
        Shape::CutAtSync(k) => {
            let syncs: Vec<usize> = (0..file.len()).filter(|&i| file[i] == 0).collect();
            file.truncate(syncs[k % syncs.len()] + 1);
        }
        Shape::AppendLog => {
            file.push(0);
            file.extend(raw_block(7, b""));
            file.push(0);
            file.extend(raw_block(3, &data_payload(&[b"appended"])));
        }
        Shape::Empty => file.clear(),
    }
}

proptest! {
    #![proptest_config(config(256))]

    /// A scan on several threads over small ranges returns the records, the damage and the
    /// report of one reader, how the file ends included; recovery on several threads writes
    /// the same bytes.
    #[test]
    fn scans_match_one_reader(
        mut file in file_strategy(),
        ending in shape_strategy(),
        edits in prop::collection::vec((any::<u64>(), any::<u8>(), any::<u8>()), 0..4),
        threads in 1usize..4,
        min_split in 1u64..200,
    ) {
        shape(&mut file, ending);
        damage(&mut file, &edits);
        let one = ReaderBuilder::new();
        let expected = cobsfile::verify(&mut one.from_slice(&file)).expect("verify");
        if edits.is_empty() {
            let as_shaped = match ending {
                Shape::Written => Some(Ending::Finished),
                Shape::AppendLog => Some(Ending::Open),
                Shape::Empty => Some(Ending::Empty),
                // Finished too when cut right after the index (an older writer's file), and
                // when the cut keeps the end block; zero bytes after the last block's closing
                // sync byte are padding (the cut may keep the next part's opening sync byte).
                Shape::CutAtSync(_) if file.len() > 1 => {
                    let padding = file.iter().rev().take_while(|&&b| b == 0).count();
                    let blocks = &file[..file.len() + 1 - padding.max(1)];
                    let index = Index::find(blocks).is_some();
                    let end = [0, 0x0c, 0x0e, 0x01, 0x05, 0xf3, 0x5d, 0x6c, 0xed, 0x00];
                    let finished = index || blocks.ends_with(&end);
                    Some(if finished { Ending::Finished } else { Ending::Unfinished })
                }
                Shape::CutAtSync(_) => Some(Ending::Unfinished),
            };
            prop_assert_eq!(Some(expected.ending), as_shaped);
        }
        let (records, _) = one.from_slice(&file).read_all();

        let many = ReaderBuilder::new().threads(threads).min_split(min_split);
        let mut sink = Collect::default();
        let report = many
            .read_ranges(
                &file,
                |out: &mut Vec<Vec<u8>>, block| out.extend(block.records().map(<[u8]>::to_vec)),
                &mut sink,
            )
            .expect("scan");
        prop_assert_eq!(&report, &expected);
        prop_assert_eq!(sink.records, records);
        let ranges: Vec<_> = expected.damaged.iter().map(|d| d.range.clone()).collect();
        prop_assert_eq!(sink.damage, ranges);

        let mut a = Vec::new();
        let mut b = Vec::new();
        let ra = cobsfile::recover(&file, &one, &mut a).expect("recover");
        let rb = cobsfile::recover(&file, &many, &mut b).expect("recover");
        prop_assert_eq!(a, b);
        prop_assert_eq!(ra, rb);
    }
}

/// A mapped file's range readers split it like slice range readers.
#[test]
fn mapped_ranges() {
    let ops: Vec<Op> = (0..300u64)
        .map(|i| Op::Record(record_bytes(i as usize % 50, Content::ZeroRich, i)))
        .collect();
    let file = write_file(&ops, Options::block_target(100));
    let tmp = TempFile::with_contents(&file);
    let mapped = cobsfile::open(&tmp.0).unwrap();
    let half = file.len() as u64 / 2;
    let mut records = Vec::new();
    for range in [0..half, half..u64::MAX] {
        records.extend(mapped.range(range).read_all().0);
    }
    assert_eq!(records, ReaderBuilder::new().from_slice(&file).read_all().0);
    assert_eq!(records.len(), 300);
}

/// A range whose first block comes right after the dictionary block (found by fuzzing): the
/// search of the bytes before the range takes in the sync byte that closes that block.
#[test]
fn a_range_right_after_the_dictionary_block() {
    let file = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("spec/vectors/zstd-dictionary.cobs"),
    )
    .unwrap();
    let options = ReaderBuilder::new();
    let expected = whole(&file, &options);
    assert!(expected.iter().any(|b| b.codec == "zstd+dict"));
    for cut in 1..file.len() as u64 {
        assert_eq!(
            split(&file, &options, &[0, cut, u64::MAX]),
            expected,
            "cut at {cut}"
        );
    }
}

/// `scan` returns only once its worker threads have exited, their thread-local destructors
/// run: nothing a worker held is still live when the caller (or LeakSanitizer, which caught
/// it: `fuzz/regressions/scan/worker-exit-after-return`) looks. `std::thread::scope` alone
/// returns when the workers' closures are done, before their threads exit.
#[test]
fn scan_returns_after_its_workers_exit() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static TOUCHED: AtomicUsize = AtomicUsize::new(0);
    static DROPPED: AtomicUsize = AtomicUsize::new(0);
    // The calling thread reads ranges too; its own thread-locals live on after the scan.
    static CALLER: std::sync::OnceLock<std::thread::ThreadId> = std::sync::OnceLock::new();
    CALLER.set(std::thread::current().id()).unwrap();
    struct SlowDrop(bool);
    impl Drop for SlowDrop {
        fn drop(&mut self) {
            std::thread::sleep(std::time::Duration::from_millis(100));
            if self.0 {
                DROPPED.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
    thread_local! {
        static HELD: SlowDrop = {
            let worker = CALLER.get() != Some(&std::thread::current().id());
            if worker {
                TOUCHED.fetch_add(1, Ordering::SeqCst);
            }
            SlowDrop(worker)
        };
    }

    let mut writer = WriterBuilder::new()
        .block_target(256)
        .build(Vec::new())
        .unwrap();
    for i in 0..2000 {
        writer
            .write_record(format!("record {i}").as_bytes())
            .unwrap();
    }
    let file = writer.finish().unwrap();
    let mut sink = Collect::default();
    ReaderBuilder::new()
        .threads(2)
        .min_split(1024)
        .read_ranges(
            &file,
            |out: &mut Vec<Vec<u8>>, block| {
                HELD.with(|_| ());
                if CALLER.get() == Some(&std::thread::current().id()) {
                    // Leaves ranges to the worker, which might otherwise find none left.
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                out.extend(block.records().map(<[u8]>::to_vec));
            },
            &mut sink,
        )
        .expect("scan");
    assert_eq!(sink.records.len(), 2000);
    let touched = TOUCHED.load(Ordering::SeqCst);
    assert!(touched >= 1, "no worker thread ran");
    assert_eq!(
        DROPPED.load(Ordering::SeqCst),
        touched,
        "scan returned before its workers' thread-local destructors ran"
    );
}

/// Records of each block, in parts of at most `most` records: a [`cobsfile::RangeWork`] that
/// ends parts early and finishes them on the range's thread.
struct Parts {
    most: usize,
}

impl cobsfile::RangeWork<Vec<Vec<u8>>> for Parts {
    fn block(&self, part: &mut Vec<Vec<u8>>, block: &cobsfile::Block<'_>) {
        part.extend(block.records().map(<[u8]>::to_vec));
    }
    fn part_full(&self, part: &Vec<Vec<u8>>) -> bool {
        part.len() >= self.most
    }
    fn end_part(&self, part: &mut Vec<Vec<u8>>) {
        // Runs once per part, before the part is handed over: marks it.
        part.push(b"\xffend of part".to_vec());
    }
}

proptest! {
    #![proptest_config(config(256))]

    /// The spans `0..a`, `a..b`, `b..` of an input, each read by `read_ranges_within` on any
    /// number of threads and cut into parts anywhere, give the records of one reader over the
    /// whole input, each once and in order, and the damage it reports.
    #[test]
    fn spans_read_within_give_one_readers_records(
        mut file in file_strategy(),
        edits in prop::collection::vec((any::<u64>(), any::<u8>(), any::<u8>()), 0..4),
        points in prop::collection::vec(any::<u64>(), 0..3),
        threads in prop_oneof![Just(0usize), Just(2), Just(3)],
        min_split in 1u64..300,
        most in 1usize..20,
    ) {
        damage(&mut file, &edits);
        let (records, errors) = ReaderBuilder::new().from_slice(&file).read_all();
        let options = ReaderBuilder::new().threads(threads).min_split(min_split);
        let mut sink = Collect::default();
        let mut damaged = 0;
        let cuts = cuts(file.len(), &points);
        for pair in cuts.windows(2) {
            let report = options
                .read_ranges_within(&file, pair[0]..pair[1], &Parts { most }, &mut sink)
                .expect("read");
            damaged += report.damaged.len();
        }
        let parts = sink.records.iter().filter(|r| r.as_slice() == b"\xffend of part").count();
        let got: Vec<Vec<u8>> = sink
            .records
            .into_iter()
            .filter(|r| r.as_slice() != b"\xffend of part")
            .collect();
        prop_assert_eq!(got, records.iter().map(|r| r.to_vec()).collect::<Vec<_>>());
        prop_assert!(parts >= cuts.len() - 1);
        // Damage seen from both sides of a cut may count twice; never less than one reader's.
        prop_assert!(damaged >= errors.len());
    }
}

proptest! {
    #![proptest_config(config(128))]

    /// The library's damage policy, on any number of threads: `Fail` ends the read with the
    /// first damaged range one reader reports; `Call` is given each range one reader reports,
    /// in order, and stops the read when it says so.
    #[test]
    fn the_damage_policy_is_applied_once_in_order(
        mut file in file_strategy(),
        edits in prop::collection::vec((any::<u64>(), any::<u8>(), any::<u8>()), 1..4),
        threads in prop_oneof![Just(0usize), Just(2), Just(3)],
        min_split in 1u64..200,
    ) {
        damage(&mut file, &edits);
        let expected = cobsfile::verify(&mut ReaderBuilder::new().from_slice(&file)).unwrap();
        let options = ReaderBuilder::new().threads(threads).min_split(min_split);
        let on_block = |_: &mut (), _: &cobsfile::Block<'_>| {};
        let sink = || Collect::default();

        let failed = options
            .clone()
            .on_damage(cobsfile::OnDamage::Fail)
            .read_ranges(&file, |_: &mut Vec<Vec<u8>>, _: &cobsfile::Block<'_>| {}, &mut sink());
        match expected.damaged.first() {
            None => prop_assert!(failed.is_ok()),
            Some(first) => match failed {
                Err(cobsfile::Error::Damaged { start, end, cause }) => {
                    prop_assert_eq!(start..end, first.range.clone());
                    prop_assert_eq!(&cause, &first.cause);
                }
                other => prop_assert!(false, "{other:?}"),
            },
        }

        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = seen.clone();
        let call = cobsfile::OnDamage::Call(std::sync::Arc::new(move |d: &cobsfile::Damage| {
            log.lock().unwrap().push(d.range.clone());
            std::ops::ControlFlow::Continue(())
        }));
        let report = options
            .clone()
            .on_damage(call)
            .read_ranges(&file, on_block, &mut range_discard())
            .unwrap();
        let ranges: Vec<_> = expected.damaged.iter().map(|d| d.range.clone()).collect();
        prop_assert_eq!(&*seen.lock().unwrap(), &ranges);
        prop_assert_eq!(report, expected.clone());

        // Stopped at the first: the read ends without error, having met no more.
        let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = calls.clone();
        let stop = cobsfile::OnDamage::Call(std::sync::Arc::new(move |_: &cobsfile::Damage| {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            std::ops::ControlFlow::Break(())
        }));
        options
            .on_damage(stop)
            .read_ranges(&file, on_block, &mut range_discard())
            .unwrap();
        prop_assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), usize::from(!ranges.is_empty()));
    }
}

/// A sink that keeps nothing.
fn range_discard() -> impl cobsfile::RangeSink<()> {
    struct Nothing;
    impl cobsfile::RangeSink<()> for Nothing {
        fn part(&mut self, (): ()) -> std::ops::ControlFlow<()> {
            std::ops::ControlFlow::Continue(())
        }
    }
    Nothing
}

/// A panic in the work of a block, on a worker or on the calling thread (both read ranges),
/// reaches the caller of the range read, and no thread is left waiting for another.
#[test]
fn a_panic_in_the_work_reaches_the_caller() {
    let mut writer = WriterBuilder::new()
        .block_target(256)
        .build(Vec::new())
        .unwrap();
    for i in 0..5000 {
        writer
            .write_record(format!("record {i}").as_bytes())
            .unwrap();
    }
    let file = std::sync::Arc::new(writer.finish().unwrap());
    for threads in [2, 3] {
        for at in [0, file.len() as u64 / 3, file.len() as u64 - 100] {
            let (tx, rx) = std::sync::mpsc::channel();
            let file = std::sync::Arc::clone(&file);
            std::thread::spawn(move || {
                let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    ReaderBuilder::new()
                        .threads(threads)
                        .min_split(1024)
                        .read_ranges(
                            &file,
                            |out: &mut Vec<Vec<u8>>, block| {
                                let info = block.info();
                                if (info.offset..info.offset + info.size).contains(&at) {
                                    panic!("the work failed");
                                }
                                out.extend(block.records().map(<[u8]>::to_vec));
                            },
                            &mut Collect::default(),
                        )
                }));
                tx.send(read.is_err()).unwrap();
            });
            let panicked = rx
                .recv_timeout(std::time::Duration::from_secs(60))
                .expect("the range read returned");
            assert!(panicked, "threads {threads}, at {at}");
        }
    }
}
