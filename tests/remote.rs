//! Files read by byte ranges ([`cobsfile::Remote`]): the same records, damage and reports as
//! the same reads over the whole file in memory, on any file, range cut, thread count and
//! fetch size; and only the bytes a read needs fetched.

mod common;

use std::ops::{ControlFlow, Range};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use cobsfile::{Compression, Dictionary, Fetch, ReaderBuilder, Remote, WriterBuilder};
use common::*;
use proptest::prelude::*;

/// A file in memory served by byte ranges, counting what it serves; it can be made to fail
/// every fetch from the `fail_after`-th on.
struct Served {
    bytes: Vec<u8>,
    served: AtomicU64,
    requests: AtomicU64,
    fail_after: Option<u64>,
    asked: Mutex<Vec<Range<u64>>>,
}

impl Served {
    fn new(bytes: Vec<u8>) -> Self {
        Served {
            bytes,
            served: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            fail_after: None,
            asked: Mutex::new(Vec::new()),
        }
    }
}

impl Fetch for Served {
    fn size(&self) -> u64 {
        self.bytes.len() as u64
    }
    fn fetch(&self, ranges: &[Range<u64>]) -> std::io::Result<Vec<Vec<u8>>> {
        let n = self.requests.fetch_add(1, Ordering::SeqCst);
        if self.fail_after.is_some_and(|after| n >= after) {
            return Err(std::io::Error::other("the server went away"));
        }
        self.asked.lock().unwrap().extend(ranges.iter().cloned());
        Ok(ranges
            .iter()
            .map(|r| {
                assert!(r.start < r.end && r.end <= self.size(), "asked for {r:?}");
                self.served.fetch_add(r.end - r.start, Ordering::SeqCst);
                self.bytes[r.start as usize..r.end as usize].to_vec()
            })
            .collect())
    }
}

#[derive(Default)]
struct Collect {
    records: Vec<Vec<u8>>,
    damage: Vec<cobsfile::Damage>,
    /// Stop after this many parts.
    parts_left: Option<usize>,
}

impl cobsfile::RangeSink<Vec<Vec<u8>>> for Collect {
    fn part(&mut self, mut records: Vec<Vec<u8>>) -> ControlFlow<()> {
        self.records.append(&mut records);
        match &mut self.parts_left {
            Some(0) => ControlFlow::Break(()),
            Some(n) => {
                *n -= 1;
                ControlFlow::Continue(())
            }
            None => ControlFlow::Continue(()),
        }
    }
    fn damage(&mut self, damage: &cobsfile::Damage) -> ControlFlow<()> {
        self.damage.push(damage.clone());
        ControlFlow::Continue(())
    }
}

fn records_of(out: &mut Vec<Vec<u8>>, block: &cobsfile::Block<'_>) {
    out.extend(block.records().map(<[u8]>::to_vec));
}

proptest! {
    #![proptest_config(config(256))]

    /// Every span of a file read by byte ranges (fetches of any size) gives the records, the
    /// damaged ranges and the report that the same span read from memory gives.
    #[test]
    fn remote_spans_read_as_in_memory(
        mut file in file_strategy(),
        edits in prop::collection::vec((any::<u64>(), any::<u8>(), any::<u8>()), 0..4),
        cut in prop_oneof![Just(None), any::<usize>().prop_map(Some)],
        points in prop::collection::vec(any::<u64>(), 0..3),
        threads in prop_oneof![Just(0usize), Just(2), Just(3)],
        min_split in 1u64..300,
        first in 1u64..100,
        largest in 1u64..400,
    ) {
        damage(&mut file, &edits);
        if let Some(cut) = cut {
            file.truncate(cut % (file.len() + 1));
        }
        let options = ReaderBuilder::new().threads(threads).min_split(min_split);
        let remote = Remote::open(Served::new(file.clone())).unwrap().fetch_sizes(first, largest);
        let index = cobsfile::Index::find(&file);
        prop_assert_eq!(remote.index(), index.as_ref());
        for pair in cuts(file.len(), &points).windows(2) {
            let span = pair[0]..pair[1];
            let mut local = Collect::default();
            let expected = options.read_ranges_within(&file, span.clone(), &records_of, &mut local);
            let mut fetched = Collect::default();
            let got = remote.read_ranges_within(&options, span.clone(), &records_of, &mut fetched);
            prop_assert_eq!(format!("{got:?}"), format!("{expected:?}"), "span {:?}", span);
            prop_assert_eq!(&fetched.records, &local.records);
            prop_assert_eq!(&fetched.damage, &local.damage);
        }
        prop_assert_eq!(
            format!("{:?}", remote.verify(&options)),
            format!("{:?}", options.verify(&file))
        );
        let metadata: Vec<_> = options.from_slice(&file).metadata().filter_map(Result::ok).collect();
        let got = remote.metadata(&options).unwrap();
        prop_assert_eq!(got, metadata);
        prop_assert_eq!(
            remote.not_a_cobsfile(&options).unwrap(),
            options.not_a_cobsfile(&file)
        );
    }
}

/// A file of `records` records of about 100 bytes in default blocks, with its index.
fn big_file(records: usize) -> Vec<u8> {
    let mut writer = WriterBuilder::new().build(Vec::new()).unwrap();
    let mut rng = common::Rng::new(7);
    for i in 0..records {
        let mut pad = [0u8; 40];
        rng.fill(&mut pad);
        let record = format!("{{\"n\":{i},\"pad\":\"{}\"}}", hex(&pad));
        writer.write_record(record.as_bytes()).unwrap();
    }
    writer.finish().unwrap()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A full read in partitions fetches each byte about once: the ranges plus the frames that
/// straddle their ends, and the index; a read that stops after its first records fetches
/// what they are in; the metadata and the record count come from the tail.
#[test]
fn a_read_fetches_what_it_reads() {
    let file = big_file(300_000);
    let len = file.len() as u64;
    assert!(len > 25 << 20, "{len}");
    let (records, errors) = ReaderBuilder::new().from_slice(&file).read_all();
    assert!(errors.is_empty());

    for (partitions, threads) in [(1u64, 1usize), (4, 2), (7, 3)] {
        let remote = Remote::open(Served::new(file.clone())).unwrap();
        let options = ReaderBuilder::new().threads(threads);
        let mut sink = Collect::default();
        let step = len.div_ceil(partitions);
        for p in 0..partitions {
            let end = if p + 1 == partitions {
                u64::MAX
            } else {
                (p + 1) * step
            };
            remote
                .read_ranges_within(&options, p * step..end, &records_of, &mut sink)
                .unwrap();
        }
        assert_eq!(sink.records, records);
        let served = remote.fetcher().served.load(Ordering::SeqCst);
        assert!(
            served as f64 <= 1.05 * len as f64,
            "{partitions} partitions on {threads} threads fetched {served} of {len} bytes"
        );
    }

    // The first 10 records (a `LIMIT 10`: parts of 10 records): a first fetch of each
    // range the threads start, and the tail.
    struct Ten;
    impl cobsfile::RangeWork<Vec<Vec<u8>>> for Ten {
        fn block(&self, part: &mut Vec<Vec<u8>>, block: &cobsfile::Block<'_>) {
            records_of(part, block);
        }
        fn part_full(&self, part: &Vec<Vec<u8>>) -> bool {
            part.len() >= 10
        }
    }
    for threads in [1usize, 2] {
        let remote = Remote::open(Served::new(file.clone())).unwrap();
        let options = ReaderBuilder::new().threads(threads);
        let mut sink = Collect {
            parts_left: Some(0),
            ..Collect::default()
        };
        remote
            .read_ranges_within(&options, 0..u64::MAX, &Ten, &mut sink)
            .unwrap();
        assert_eq!(sink.records[..10], records[..10]);
        let served = remote.fetcher().served.load(Ordering::SeqCst);
        // On one thread, the first fetch; on more, a first and a second fetch of each range
        // the threads start (2 per thread, whose workers read up to 2 parts ahead), whatever
        // the file's size.
        let most = match threads {
            1 => cobsfile::FIRST_FETCH,
            _ => 2 * threads as u64 * 3 * cobsfile::FIRST_FETCH,
        } + (64 << 10);
        assert!(
            served <= most,
            "{threads} threads: {served} of {len} bytes for the first records: {:?}",
            remote.fetcher().asked.lock().unwrap()
        );
    }

    // Metadata and the count of records from the index, at the tail.
    let remote = Remote::open(Served::new(file.clone())).unwrap();
    assert_eq!(remote.index().unwrap().records(), 300_000);
    assert!(remote.metadata(&ReaderBuilder::new()).unwrap().is_empty());
    assert_eq!(remote.not_a_cobsfile(&ReaderBuilder::new()).unwrap(), None);
    let served = remote.fetcher().served.load(Ordering::SeqCst);
    assert!(served < len / 100, "{served} of {len} bytes for metadata");
}

/// The dictionaries a range needs come from the blocks its index lists, not from all the
/// bytes before it.
#[test]
fn a_range_fetches_only_the_dictionaries_before_it() {
    let mut writer = WriterBuilder::new()
        .compression(Compression::Zstd { level: 1 })
        .block_target(4096)
        .dictionary(Dictionary::new(b"event number ".repeat(20)), true)
        .build(Vec::new())
        .unwrap();
    for i in 0..200_000 {
        writer
            .write_record(format!("event number {i}").as_bytes())
            .unwrap();
    }
    let file = writer.finish().unwrap();
    let len = file.len() as u64;
    let remote = Remote::open(Served::new(file.clone()))
        .unwrap()
        .fetch_sizes(4096, 65536);
    let mut sink = Collect::default();
    remote
        .read_ranges_within(
            &ReaderBuilder::new(),
            len / 2..len / 2 + 10_000,
            &records_of,
            &mut sink,
        )
        .unwrap();
    assert!(!sink.records.is_empty() && sink.damage.is_empty());
    let served = remote.fetcher().served.load(Ordering::SeqCst);
    assert!(served < 150_000, "{served} of {len} bytes");
    let asked = remote.fetcher().asked.lock().unwrap();
    assert!(asked.iter().any(|r| r.start < 100), "{asked:?}");
}

/// A fetch that fails ends the read with that error, once, on any number of threads; the
/// records before it are the file's.
#[test]
fn a_failed_fetch_is_an_error_never_fewer_records() {
    let file = big_file(50_000);
    let (records, _) = ReaderBuilder::new().from_slice(&file).read_all();
    for threads in [1usize, 2, 3] {
        for fail_after in [0u64, 1, 2, 5] {
            let mut served = Served::new(file.clone());
            served.fail_after = Some(fail_after);
            let remote = match Remote::open(served) {
                Ok(remote) => remote.fetch_sizes(4096, 16384),
                Err(e) => {
                    assert_eq!(fail_after, 0);
                    assert!(e.to_string().contains("went away"), "{e}");
                    continue;
                }
            };
            let mut sink = Collect::default();
            let got = remote.read_ranges(
                &ReaderBuilder::new().threads(threads),
                records_of,
                &mut sink,
            );
            let e = got.expect_err("a failed fetch");
            assert!(e.to_string().contains("went away"), "{e}");
            assert!(sink.records.len() < records.len());
            assert_eq!(sink.records[..], records[..sink.records.len()]);
        }
    }
}

/// A file cut short after it was opened (the object replaced by a shorter one): the fetch
/// that finds it shorter is an error, never a read of other bytes.
#[test]
fn a_file_that_shrinks_under_the_reader_is_an_error() {
    struct Shrunk(Vec<u8>);
    impl Fetch for Shrunk {
        fn size(&self) -> u64 {
            self.0.len() as u64
        }
        fn fetch(&self, ranges: &[Range<u64>]) -> std::io::Result<Vec<Vec<u8>>> {
            // Serves the tail, then only half of what is asked.
            Ok(ranges
                .iter()
                .map(|r| {
                    let end = if r.end == self.size() {
                        r.end
                    } else {
                        (r.start + r.end) / 2
                    };
                    self.0[r.start as usize..end as usize].to_vec()
                })
                .collect())
        }
    }
    let file = big_file(20_000);
    let remote = Remote::open(Shrunk(file)).unwrap().fetch_sizes(1000, 4000);
    let e = remote
        .read_ranges(&ReaderBuilder::new(), records_of, &mut Collect::default())
        .unwrap_err();
    assert!(e.to_string().contains("changed while it was read"), "{e}");
}

/// A file whose end holds no sync byte for longer than any index a reader accepts (garbage,
/// or a huge last block): opening it fetches at most that much of its end, however large it
/// is, and finds no index.
#[test]
fn opening_a_file_without_an_index_fetches_a_bounded_tail() {
    let mut bytes = vec![0x01u8; 200 << 20];
    bytes[0] = 0;
    let remote = Remote::open(Served::new(bytes)).unwrap();
    assert!(remote.index().is_none());
    let served = remote.fetcher().served.load(Ordering::SeqCst);
    let most =
        cobsfile::cobs::max_encoded_len(cobsfile::DEFAULT_MAX_BODY_SIZE) as u64 + (128 << 10);
    assert!(served <= 2 * most, "{served} bytes fetched for the tail");
    assert!(served < 100 << 20, "{served}");
}

/// A window read by ranges of a fetched file goes by its time index as a read of the file in
/// memory does: the same records, and only the tail, the header and the window's blocks
/// fetched, however many threads.
#[test]
fn a_window_read_fetches_only_the_window() {
    let mut writer = WriterBuilder::new().build(Vec::new()).unwrap();
    let mut rng = common::Rng::new(34);
    let second = 1_000_000_000i64;
    for i in 0..200_000i64 {
        let mut pad = [0u8; 40];
        rng.fill(&mut pad);
        let record = format!("{{\"n\":{i},\"pad\":\"{}\"}}", hex(&pad));
        // A little out of order.
        let time = (i + (i * 7919) % 7 - 3) * second;
        writer.write_record_at(record.as_bytes(), time).unwrap();
    }
    let file = writer.finish().unwrap();
    let len = file.len() as u64;
    let window = cobsfile::Window::new(Some(100_000 * second), Some(101_999 * second));
    for threads in [0, 1, 3] {
        let options = ReaderBuilder::new()
            .window(window)
            .threads(threads)
            .min_split(1 << 20);
        let mut local = Collect::default();
        let expected = options.read_ranges(&file, records_of, &mut local).unwrap();
        assert!(local.records.len() >= 2_000, "{}", local.records.len());
        let served = Served::new(file.clone());
        let remote = Remote::open(served).unwrap();
        let mut fetched = Collect::default();
        let got = remote
            .read_ranges(&options, records_of, &mut fetched)
            .unwrap();
        assert_eq!(format!("{got:?}"), format!("{expected:?}"));
        assert!(fetched.records == local.records, "threads {threads}");
        let bytes = remote.fetcher().served.load(Ordering::SeqCst);
        // The tail (index, time index), the header, and the hour's blocks with a fetch's
        // slack around them: well under 5% of the 14 MB.
        assert!(
            bytes * 20 < len,
            "threads {threads}: {bytes} of {len} bytes fetched"
        );
    }
}

/// An index may claim a time index of any size up to the file's: a window read fetches it only
/// if it is no larger than a block may be.
#[test]
fn a_lying_time_index_size_is_not_fetched() {
    // A header, a data block of 4 MiB of records, listed by the index as a time index.
    let mut file = vec![0];
    file.extend(raw_block(1, &header_payload(1)));
    let record = vec![b'x'; 1 << 20];
    let records = [&record[..], &record, &record, &record];
    file.extend(raw_block(3, &data_payload(&records)));
    let sizes = [19 - 1, file.len() as u64 - 19];
    let mut payload = Vec::new();
    cobsfile::varint::write(2, &mut payload);
    cobsfile::varint::write((sizes[0] + sizes[1]) as i64, &mut payload);
    for (block_type, size) in [(1, sizes[0]), (9, sizes[1])] {
        for field in [block_type, size as i64, 0] {
            cobsfile::varint::write(field, &mut payload);
        }
    }
    file.extend(raw_block(5, &payload));
    file.extend(raw_block(6, &[]));
    assert!(cobsfile::Index::find(&file).is_some());
    // Reads fetch at most 64 KiB a request; the claimed time index is 4 MiB.
    let remote = Remote::open(Served::new(file))
        .unwrap()
        .fetch_sizes(4096, 64 << 10);
    let options = ReaderBuilder::new()
        .max_body_size(64 << 10)
        .window(cobsfile::Window::new(Some(0), Some(1)));
    let mut fetched = Collect::default();
    let _ = remote.read_ranges(&options, records_of, &mut fetched);
    let asked = remote.fetcher().asked.lock().unwrap().clone();
    let largest = asked.iter().map(|r| r.end - r.start).max().unwrap();
    assert!(largest <= 64 << 10, "a request for {largest} bytes");
}
