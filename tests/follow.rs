//! Following a growing file: records as blocks land, blocks landing in pieces, torn blocks,
//! truncation, rotation, starting at the end, and waiting without spinning.

mod common;

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cobsfile::{
    AppenderBuilder, Cause, Durability, Error, FollowEvent, Follower, FollowerBuilder,
    WriterBuilder,
};
use common::{data_payload, raw_block};

/// What a follower gave, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Got {
    Record(Vec<u8>),
    Damaged {
        start: u64,
        end: u64,
        cause: Cause,
    },
    Truncated {
        read: u64,
        len: u64,
        copy: Option<PathBuf>,
    },
    Replaced,
    Other(String),
}

impl From<cobsfile::Result<FollowEvent<'_>>> for Got {
    fn from(event: cobsfile::Result<FollowEvent<'_>>) -> Self {
        match event {
            Ok(FollowEvent::Record(record)) => Got::Record(record.to_vec()),
            Ok(FollowEvent::Truncated { read, len, copy }) => Got::Truncated { read, len, copy },
            Ok(FollowEvent::Replaced) => Got::Replaced,
            Err(Error::Damaged { start, end, cause }) => Got::Damaged { start, end, cause },
            Err(other) => Got::Other(other.to_string()),
            Ok(other) => Got::Other(format!("{other:?}")),
        }
    }
}

/// How long a test waits for something that should come at once.
const PATIENCE: Duration = Duration::from_secs(10);

/// Events until `records` records have come (or the patience runs out), then whatever else
/// is ready.
fn take(follower: &mut Follower, records: usize) -> Vec<Got> {
    let deadline = Instant::now() + PATIENCE;
    let mut got = Vec::new();
    let count = |got: &[Got]| got.iter().filter(|g| matches!(g, Got::Record(_))).count();
    while count(&got) < records {
        let left = deadline.saturating_duration_since(Instant::now());
        match follower.next_event_timeout(left) {
            Some(event) => got.push(event.into()),
            None => break,
        }
    }
    got.extend(ready(follower));
    got
}

/// The events ready now, without waiting.
fn ready(follower: &mut Follower) -> Vec<Got> {
    let mut got = Vec::new();
    while let Some(event) = follower.next_event_timeout(Duration::ZERO) {
        got.push(event.into());
    }
    got
}

/// The next event, waiting for it as long as the patience lasts.
fn next(follower: &mut Follower) -> Option<Got> {
    follower.next_event_timeout(PATIENCE).map(Got::from)
}

fn records(names: impl IntoIterator<Item = String>) -> Vec<Got> {
    names
        .into_iter()
        .map(|name| Got::Record(name.into_bytes()))
        .collect()
}

/// A scratch directory for one test, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(test: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("cobsfile-follow-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn append(path: &Path, bytes: &[u8]) {
    let mut file = OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .unwrap();
    file.write_all(bytes).unwrap();
}

/// A file of the header and one data block per record, without an index.
fn file_of(records: &[&str]) -> Vec<u8> {
    let mut writer = WriterBuilder::new()
        .block_target(1)
        .index(false)
        .build(Vec::new())
        .unwrap();
    for record in records {
        writer.write_record(record.as_bytes()).unwrap();
    }
    writer.finish().unwrap()
}

/// A data block as an appending writer writes it: its own sync byte first (spec 11.1).
fn fenced_block(record: &str) -> Vec<u8> {
    let mut bytes = vec![0];
    bytes.extend(raw_block(3, &data_payload(&[record.as_bytes()])));
    bytes
}

#[test]
fn records_arrive_in_order_as_a_writer_appends() {
    let dir = Scratch::new("writer");
    let path = dir.path("log.cobs");
    File::create(&path).unwrap();
    let mut follower = Follower::open(&path).unwrap();

    let writing = path.clone();
    let writer = std::thread::spawn(move || {
        let file = OpenOptions::new().append(true).open(&writing).unwrap();
        let mut writer = WriterBuilder::new().block_target(64).build(file).unwrap();
        for i in 0..500 {
            writer
                .write_record(format!("event {i}").as_bytes())
                .unwrap();
            if i % 7 == 0 {
                writer.flush().unwrap();
            }
            if i % 50 == 0 {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        writer.finish().unwrap();
    });
    let got = take(&mut follower, 500);
    writer.join().unwrap();
    assert_eq!(got, records((0..500).map(|i| format!("event {i}"))));
    assert_eq!(
        follower
            .next_event_timeout(Duration::from_millis(50))
            .map(Got::from),
        None
    );
}

#[test]
fn a_file_landing_in_two_pieces_split_anywhere_reads_whole() {
    let dir = Scratch::new("pieces");
    let bytes = file_of(&["one", "two", "three"]);
    for split in 0..=bytes.len() {
        let path = dir.path(&format!("split-{split}.cobs"));
        std::fs::write(&path, &bytes[..split]).unwrap();
        let mut follower = Follower::open(&path).unwrap();
        let mut got = ready(&mut follower);
        append(&path, &bytes[split..]);
        got.extend(take(&mut follower, 3 - got.len()));
        assert_eq!(
            got,
            records(["one", "two", "three"].map(String::from)),
            "split at {split}"
        );
    }
}

#[test]
fn a_block_written_in_two_halves_with_a_pause_is_not_damage() {
    let dir = Scratch::new("halves");
    let path = dir.path("log.cobs");
    let file = file_of(&[]);
    std::fs::write(&path, &file).unwrap();
    let block = raw_block(3, &data_payload(&[b"slow"]));
    let (first, second) = block.split_at(block.len() / 2);
    append(&path, first);

    let mut follower = Follower::open(&path).unwrap();
    let later = path.clone();
    let second = second.to_vec();
    let writer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(600));
        append(&later, &second);
    });
    assert_eq!(next(&mut follower), Some(Got::Record(b"slow".to_vec())));
    writer.join().unwrap();
    assert_eq!(ready(&mut follower), []);
}

#[test]
fn a_torn_block_fenced_by_the_next_writer_is_damage_and_the_next_block_is_read() {
    let dir = Scratch::new("fenced");
    let path = dir.path("log.cobs");
    let mut bytes = file_of(&["before"]);
    let torn_at = bytes.len() as u64 - 1;
    let block = raw_block(3, &data_payload(&[b"torn"]));
    bytes.extend_from_slice(&block[..block.len() - 3]);
    std::fs::write(&path, &bytes).unwrap();

    let mut follower = Follower::open(&path).unwrap();
    assert_eq!(take(&mut follower, 1), records(["before".into()]));
    assert_eq!(
        follower
            .next_event_timeout(Duration::from_millis(100))
            .map(Got::from),
        None,
        "a block cut off at the end is waited for"
    );
    append(&path, &fenced_block("after"));
    let got = take(&mut follower, 1);
    assert!(
        matches!(got[0], Got::Damaged { start, end, .. } if start == torn_at + 1 && end == bytes.len() as u64),
        "{got:?}"
    );
    assert_eq!(got[1..], records(["after".into()]));
}

#[test]
fn torn_after_reports_a_block_left_incomplete_and_reads_on() {
    let dir = Scratch::new("torn-after");
    let path = dir.path("log.cobs");
    let mut bytes = file_of(&[]);
    let torn_at = bytes.len() as u64 - 1;
    let block = raw_block(3, &data_payload(&[b"torn"]));
    let (first, rest) = block.split_at(5);
    bytes.extend_from_slice(first);
    std::fs::write(&path, &bytes).unwrap();

    let started = Instant::now();
    let mut follower = FollowerBuilder::new()
        .torn_after(Duration::from_millis(200))
        .open(&path)
        .unwrap();
    let got = next(&mut follower).unwrap();
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert_eq!(
        got,
        Got::Damaged {
            start: torn_at + 1,
            end: bytes.len() as u64,
            cause: Cause::Truncated {
                offset: torn_at,
                needed: (block.len() - first.len()) as u64
            }
        }
    );
    // Reported once, however long the file stays as it is.
    assert_eq!(
        follower
            .next_event_timeout(Duration::from_millis(400))
            .map(Got::from),
        None
    );

    // The slow writer's last bytes are damage too; the next block is read.
    append(&path, rest);
    append(&path, &fenced_block("after"));
    let got = take(&mut follower, 1);
    let end = (bytes.len() + rest.len()) as u64;
    assert!(
        matches!(got[0], Got::Damaged { start, end: e, .. } if start == bytes.len() as u64 && e == end),
        "{got:?}"
    );
    assert_eq!(got[1..], records(["after".into()]));
}

#[test]
fn a_torn_block_cut_off_by_a_writer_is_dropped_without_a_report() {
    let dir = Scratch::new("cut");
    let path = dir.path("log.cobs");
    let intact = file_of(&["before"]);
    let mut bytes = intact.clone();
    let block = raw_block(3, &data_payload(&[b"torn"]));
    bytes.extend_from_slice(&block[..block.len() - 2]);
    std::fs::write(&path, &bytes).unwrap();

    let mut follower = Follower::open(&path).unwrap();
    assert_eq!(take(&mut follower, 1), records(["before".into()]));
    cut(&path, intact.len() as u64);
    assert_eq!(
        follower
            .next_event_timeout(Duration::from_millis(100))
            .map(Got::from),
        None
    );
    append(&path, &fenced_block("after"));
    assert_eq!(take(&mut follower, 1), records(["after".into()]));
}

/// A log whose last block was torn about 200 KB into its 300 KB: its length points past the
/// end of the file, and no 0x00 follows its opening sync byte.
fn log_with_a_long_torn_tail(path: &Path, records: &[&str]) -> Vec<u8> {
    let mut bytes = file_of(records);
    let block = raw_block(3, &data_payload(&[&vec![b'x'; 300_000]]));
    bytes.extend_from_slice(&block[..200_000]);
    std::fs::write(path, &bytes).unwrap();
    bytes
}

/// A writer that does not see the follower's shared lock (a program that ignores locks, or a
/// file system without them) cuts the log at `path` back to its first `intact` bytes, and an
/// appender then appends `count` records (one block each). This crate's appender itself
/// fences rather than cuts while a follower reads (`an_appender_fences_a_tail_a_follower_reads`).
fn cut_and_append(path: &Path, intact: usize, count: usize) {
    cut(path, intact as u64);
    append_after(path, count);
}

/// Cuts the file at `path` to `len` bytes, as `truncate` or a program that ignores locks.
fn cut(path: &Path, len: u64) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len)
        .unwrap();
}

/// An appender that finds no torn tail appends `count` records (one block each).
fn append_after(path: &Path, count: usize) {
    let mut appender = AppenderBuilder::new()
        .durability(Durability::Flush)
        .open(path)
        .unwrap();
    assert_eq!(appender.opened().torn, None, "{:?}", appender.opened());
    for i in 0..count {
        appender.append(format!("after {i}").as_bytes()).unwrap();
    }
    appender.close().unwrap();
}

#[test]
fn an_appender_fences_a_tail_a_follower_reads() {
    // The follower holds a shared lock, so an appender does not have the log alone and fences
    // the torn tail rather than cutting it (spec 9.7): the follower reports the torn block
    // once and returns every record appended, whenever it looks.
    let dir = Scratch::new("fence-followed");
    let path = dir.path("log.cobs");
    let bytes = log_with_a_long_torn_tail(&path, &["before"]);
    let intact = file_of(&["before"]).len() as u64;
    let mut follower = Follower::open(&path).unwrap();
    assert_eq!(take(&mut follower, 1), records(["before".into()]));
    assert_eq!(ready(&mut follower), []);

    let mut appender = AppenderBuilder::new()
        .durability(Durability::Flush)
        .open(&path)
        .unwrap();
    let opened = appender.opened();
    assert!(!opened.exclusive && !opened.truncated, "{opened:?}");
    assert_eq!(opened.torn, Some(intact..bytes.len() as u64));
    for i in 0..20 {
        appender.append(format!("after {i}").as_bytes()).unwrap();
    }
    appender.close().unwrap();
    let got = take(&mut follower, 21);
    assert!(
        matches!(got[0], Got::Damaged { start, .. } if start == intact),
        "{got:?}"
    );
    assert_eq!(got[1..], records((0..20).map(|i| format!("after {i}"))));
    drop(follower);

    // Without a follower, the appender has the log alone again and cuts a torn tail.
    let mut torn = std::fs::read(&path).unwrap();
    torn.extend_from_slice(&fenced_block("torn")[..6]);
    std::fs::write(&path, &torn).unwrap();
    let appender = AppenderBuilder::new().open(&path).unwrap();
    assert!(appender.opened().truncated, "{:?}", appender.opened());
}

#[test]
fn a_torn_tail_cut_and_appended_to_between_two_looks_loses_nothing() {
    // Issue 11, finding 4: the follower kept the torn bytes it had read in place of the
    // blocks appended over them, then waited for the rest of a block that was gone.
    let dir = Scratch::new("cut-and-append");
    let path = dir.path("log.cobs");
    log_with_a_long_torn_tail(&path, &["before"]);
    let mut follower = Follower::open(&path).unwrap();
    assert_eq!(take(&mut follower, 1), records(["before".into()]));
    assert_eq!(
        ready(&mut follower),
        [],
        "a block cut off at the end is waited for"
    );

    cut_and_append(&path, file_of(&["before"]).len(), 20);
    assert_eq!(
        take(&mut follower, 20),
        records((0..20).map(|i| format!("after {i}")))
    );
}

#[test]
fn a_torn_tail_cut_then_appended_to_is_dropped_without_a_report() {
    // The same, with the follower looking between the cut and the appends.
    let dir = Scratch::new("cut-look-append");
    let path = dir.path("log.cobs");
    log_with_a_long_torn_tail(&path, &["before"]);
    let mut follower = Follower::open(&path).unwrap();
    assert_eq!(take(&mut follower, 1), records(["before".into()]));

    cut(&path, file_of(&["before"]).len() as u64);
    assert_eq!(ready(&mut follower), []);
    append_after(&path, 20);
    assert_eq!(
        take(&mut follower, 20),
        records((0..20).map(|i| format!("after {i}")))
    );
}

#[test]
fn a_zero_filled_tail_cut_is_dropped_without_a_report() {
    // Zeros where a crash left an extent allocated but unwritten: damage the follower has not
    // reported yet, since it runs to the end. Cutting it is a cut tail, not a truncation, so
    // the records before it are not read again.
    a_cut_tail_is_dropped_without_a_report("cut-zeros", &[0; 4096]);
}

#[test]
fn a_torn_tail_after_padding_cut_is_dropped_without_a_report() {
    // An appender's block is fenced by its own sync byte: torn, it leaves that byte after the
    // last block's closing one, and the cut takes it too.
    let torn = &fenced_block(&"x".repeat(1000))[..600];
    a_cut_tail_is_dropped_without_a_report("cut-fenced", torn);
}

/// A log of one record and `tail` after it, followed; an appender alone on it cuts the tail
/// and appends three records, which the follower returns, with nothing reported for the tail.
fn a_cut_tail_is_dropped_without_a_report(name: &str, tail: &[u8]) {
    let dir = Scratch::new(name);
    let path = dir.path("log.cobs");
    let mut bytes = file_of(&["before"]);
    bytes.extend_from_slice(tail);
    std::fs::write(&path, &bytes).unwrap();
    let mut follower = Follower::open(&path).unwrap();
    assert_eq!(take(&mut follower, 1), records(["before".into()]));
    assert_eq!(ready(&mut follower), []);

    cut_and_append(&path, file_of(&["before"]).len(), 3);
    assert_eq!(
        take(&mut follower, 3),
        records((0..3).map(|i| format!("after {i}")))
    );
}

#[test]
fn a_tail_cut_and_grown_past_its_old_end_between_two_looks_costs_the_first_block() {
    // What spec 9.7 admits: the file is no shorter than what was read, so the follower takes
    // it for grown and keeps the torn bytes it read in place of the first block appended:
    // here the log block an appender writes before it appends to a finished file (spec 11.1),
    // so the records all come back.
    let dir = Scratch::new("cut-regrown");
    let path = dir.path("log.cobs");
    let mut bytes = file_of(&["before"]);
    let fence = bytes.len() as u64;
    bytes.extend_from_slice(&fenced_block("torn")[..6]);
    std::fs::write(&path, &bytes).unwrap();
    let mut follower = Follower::open(&path).unwrap();
    assert_eq!(take(&mut follower, 1), records(["before".into()]));
    assert_eq!(ready(&mut follower), []);

    cut_and_append(&path, fence as usize, 3);
    let got = take(&mut follower, 3);
    assert!(
        matches!(got[0], Got::Damaged { start, .. } if start == fence + 1),
        "{got:?}"
    );
    assert_eq!(got[1..], records((0..3).map(|i| format!("after {i}"))));
}

#[test]
fn cutting_the_closing_sync_byte_of_a_block_read_is_a_truncation() {
    let dir = Scratch::new("cut-close");
    let path = dir.path("log.cobs");
    let old = file_of(&["old 1", "old 2"]);
    let mut bytes = old.clone();
    bytes.extend_from_slice(&raw_block(3, &data_payload(&[b"torn"]))[..4]);
    std::fs::write(&path, &bytes).unwrap();
    let mut follower = Follower::open(&path).unwrap();
    assert_eq!(
        take(&mut follower, 2),
        records(["old 1", "old 2"].map(String::from))
    );

    // The closing sync byte of the second data block, which the file's end block (9 bytes
    // after its opening sync byte) follows.
    let len = old.len() as u64 - 10;
    cut(&path, len);
    assert_eq!(
        next(&mut follower),
        Some(Got::Truncated {
            read: bytes.len() as u64,
            len,
            copy: None
        })
    );
    assert_eq!(take(&mut follower, 1), records(["old 1".into()]));
}

#[test]
fn truncation_is_reported_and_reading_starts_again() {
    let dir = Scratch::new("truncate");
    let path = dir.path("log.cobs");
    let old = file_of(&["old 1", "old 2"]);
    std::fs::write(&path, &old).unwrap();
    let mut follower = Follower::open(&path).unwrap();
    assert_eq!(
        take(&mut follower, 2),
        records(["old 1", "old 2"].map(String::from))
    );

    cut(&path, 0);
    assert_eq!(
        next(&mut follower),
        Some(Got::Truncated {
            read: old.len() as u64,
            len: 0,
            copy: None
        })
    );
    append(&path, &file_of(&["new 1"]));
    assert_eq!(take(&mut follower, 1), records(["new 1".into()]));
}

/// logrotate's `copytruncate`: the file copied beside itself, then cut to nothing.
fn copytruncate(path: &Path, copy: &Path) {
    std::fs::copy(path, copy).unwrap();
    cut(path, 0);
}

/// An appender (fencing each block) of `records` to a new log at `path`, left open.
fn appender_of(path: &Path, records: &[&str]) -> cobsfile::Appender {
    let mut appender = AppenderBuilder::new()
        .durability(Durability::Flush)
        .open(path)
        .unwrap();
    for record in records {
        appender.append(record.as_bytes()).unwrap();
    }
    appender
}

#[test]
fn copytruncate_reads_what_the_copy_holds_past_the_last_block_read() {
    let dir = Scratch::new("copytruncate");
    let path = dir.path("log.cobs");
    let mut appender = appender_of(&path, &["1"]);
    // A copy of an earlier rotation, made before the follower read its last block.
    std::fs::copy(&path, dir.path("log.cobs.2")).unwrap();
    appender.append(b"2").unwrap();
    let mut follower = Follower::open(&path).unwrap();
    assert_eq!(
        take(&mut follower, 2),
        records(["1", "2"].map(String::from))
    );
    let read = std::fs::metadata(&path).unwrap().len();

    // Written after the follower last looked: only the copy holds them.
    appender.append(b"3").unwrap();
    appender.append(b"4").unwrap();
    let copy = dir.path("log.cobs.1");
    copytruncate(&path, &copy);
    // Newer than the copy and as long, named like a copy, but another log: not read.
    std::thread::sleep(Duration::from_millis(20));
    appender_of(&dir.path("other.cobs"), &["1", "x", "3", "4"])
        .close()
        .unwrap();
    std::fs::rename(dir.path("other.cobs"), dir.path("log.cobs-decoy")).unwrap();

    let got = take(&mut follower, 2);
    assert_eq!(
        got,
        [
            records(["3", "4"].map(String::from)),
            vec![Got::Truncated {
                read,
                len: 0,
                copy: Some(copy)
            }]
        ]
        .concat()
    );
    // The appender starts the log again; the follower reads it from its start.
    appender.append(b"after").unwrap();
    assert_eq!(take(&mut follower, 1), records(["after".into()]));
}

#[test]
fn copytruncate_and_appends_before_the_follower_looks_again_lose_nothing() {
    let dir = Scratch::new("copytruncate-regrown");
    let path = dir.path("log.cobs");
    let mut appender = appender_of(&path, &["first"]);
    let mut follower = Follower::open(&path).unwrap();
    assert_eq!(take(&mut follower, 1), records(["first".into()]));

    for i in 0..20 {
        appender.append(format!("before {i}").as_bytes()).unwrap();
    }
    let copy = dir.path("log.cobs.1");
    copytruncate(&path, &copy);
    // The log, started again, grows past the bytes the follower read before it looks.
    for i in 0..3 {
        appender.append(format!("after {i}").as_bytes()).unwrap();
    }
    let got = take(&mut follower, 23);
    let before = records((0..20).map(|i| format!("before {i}")));
    assert_eq!(got[..20], before);
    assert!(
        matches!(&got[20], Got::Truncated { copy: Some(c), .. } if *c == copy),
        "{got:?}"
    );
    assert_eq!(got[21..], records((0..3).map(|i| format!("after {i}"))));
}

#[test]
fn copytruncate_is_known_by_the_bytes_read_when_the_follower_had_no_look_since() {
    // Two records of one block, returned before the follower ever reached the file's end:
    // it knows the copy by the last bytes it read.
    let dir = Scratch::new("copytruncate-unlooked");
    let path = dir.path("log.cobs");
    let mut appender = appender_of(&path, &[]);
    appender
        .append_batch([b"1".as_slice(), b"2".as_slice()])
        .unwrap();
    let mut follower = Follower::open(&path).unwrap();
    assert_eq!(next(&mut follower), Some(Got::Record(b"1".to_vec())));
    assert_eq!(next(&mut follower), Some(Got::Record(b"2".to_vec())));
    appender.append(b"3").unwrap();
    let copy = dir.path("log.cobs.1");
    copytruncate(&path, &copy);
    appender.append(b"after").unwrap();
    let got = take(&mut follower, 2);
    assert_eq!(got[0], Got::Record(b"3".to_vec()), "{got:?}");
    assert!(
        matches!(&got[1], Got::Truncated { copy: Some(c), .. } if *c == copy),
        "{got:?}"
    );
    assert_eq!(got[2..], records(["after".into()]));
}

#[test]
fn copytruncate_in_the_middle_of_a_block_reports_its_part_in_the_copy_as_damage() {
    let dir = Scratch::new("copytruncate-torn");
    let path = dir.path("log.cobs");
    let mut appender = appender_of(&path, &["1"]);
    let mut follower = Follower::open(&path).unwrap();
    assert_eq!(take(&mut follower, 1), records(["1".into()]));

    appender.append(b"2").unwrap();
    let torn_at = std::fs::metadata(&path).unwrap().len();
    append(&path, &fenced_block("torn")[..5]);
    let copy = dir.path("log.cobs-20261205");
    copytruncate(&path, &copy);

    let got = take(&mut follower, 1);
    assert_eq!(got[0], Got::Record(b"2".to_vec()), "{got:?}");
    assert!(
        matches!(&got[1], Got::Damaged { start, cause: Cause::Truncated { .. }, .. } if *start == torn_at + 1),
        "{got:?}"
    );
    assert!(
        matches!(&got[2..], [Got::Truncated { len: 0, copy: Some(c), .. }] if *c == copy),
        "{got:?}"
    );
    appender.close().unwrap();
}

#[test]
fn rotation_reads_the_old_file_to_its_end_then_the_new_one() {
    let dir = Scratch::new("rotate");
    let path = dir.path("log.cobs");
    let old_writer = File::create(&path).unwrap();
    let mut writer = WriterBuilder::new()
        .block_target(1)
        .build(old_writer)
        .unwrap();
    writer.write_record(b"old 1").unwrap();
    writer.flush().unwrap();
    let mut follower = Follower::open(&path).unwrap();
    assert_eq!(take(&mut follower, 1), records(["old 1".into()]));

    // The old writer goes on writing to the renamed file, and leaves a block torn; a new file
    // takes the path. The follower sees none of it until it is asked again.
    writer.write_record(b"old 2").unwrap();
    writer.flush().unwrap();
    let rotated = dir.path("log.cobs.1");
    std::fs::rename(&path, &rotated).unwrap();
    writer.write_record(b"old 3").unwrap();
    writer.flush().unwrap();
    let torn_at = std::fs::metadata(&rotated).unwrap().len();
    append(&rotated, &raw_block(3, &data_payload(&[b"torn"]))[..4]);
    std::fs::write(&path, file_of(&["new 1", "new 2"])).unwrap();

    let got = take(&mut follower, 4);
    assert_eq!(got[..2], records(["old 2", "old 3"].map(String::from)));
    assert!(
        matches!(&got[2], Got::Damaged { start, cause: Cause::Truncated { .. }, .. } if *start == torn_at),
        "{got:?}"
    );
    assert_eq!(
        got[3..],
        [
            vec![Got::Replaced],
            records(["new 1", "new 2"].map(String::from))
        ]
        .concat()
    );
}

#[test]
fn a_path_missing_for_a_while_during_rotation_is_waited_for() {
    let dir = Scratch::new("rotate-gap");
    let path = dir.path("log.cobs");
    std::fs::write(&path, file_of(&["old"])).unwrap();
    let mut follower = Follower::open(&path).unwrap();
    assert_eq!(take(&mut follower, 1), records(["old".into()]));

    std::fs::rename(&path, dir.path("log.cobs.1")).unwrap();
    assert_eq!(
        follower
            .next_event_timeout(Duration::from_millis(300))
            .map(Got::from),
        None
    );
    std::fs::write(&path, file_of(&["new"])).unwrap();
    let got = take(&mut follower, 1);
    assert_eq!(got, [vec![Got::Replaced], records(["new".into()])].concat());
}

#[test]
fn from_end_reads_only_blocks_that_open_at_the_last_sync_byte_or_later() {
    let dir = Scratch::new("from-end");
    let path = dir.path("log.cobs");
    let mut bytes = file_of(&["old 1", "old 2"]);
    let block = fenced_block("new 1");
    let (first, rest) = block.split_at(block.len() / 2);
    bytes.extend_from_slice(first);
    std::fs::write(&path, &bytes).unwrap();

    let mut follower = FollowerBuilder::new().from_end(true).open(&path).unwrap();
    assert_eq!(ready(&mut follower), []);
    append(&path, rest);
    append(&path, &fenced_block("new 2"));
    assert_eq!(
        take(&mut follower, 2),
        records(["new 1", "new 2"].map(String::from))
    );

    // A file that ends cleanly: the next block appended is the first one read.
    let path = dir.path("clean.cobs");
    std::fs::write(&path, file_of(&["old"])).unwrap();
    let mut follower = FollowerBuilder::new().from_end(true).open(&path).unwrap();
    assert_eq!(ready(&mut follower), []);
    append(&path, &raw_block(3, &data_payload(&[b"new"])));
    assert_eq!(take(&mut follower, 1), records(["new".into()]));
}

#[test]
fn only_existing_regular_files_are_followed() {
    let dir = Scratch::new("kinds");
    assert!(matches!(
        Follower::open(dir.path("missing.cobs")),
        Err(Error::Io(e)) if e.kind() == std::io::ErrorKind::NotFound
    ));
    assert!(Follower::open(&dir.0).is_err());
    #[cfg(unix)]
    assert!(Follower::open("/dev/null").is_err());
}

/// CPU time the calling thread has used.
#[cfg(target_os = "linux")]
fn thread_cpu_time() -> Duration {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `usage` is a valid place for the rusage getrusage fills in.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, usage.as_mut_ptr()) };
    assert_eq!(rc, 0);
    // SAFETY: getrusage succeeded, so it initialized `usage`.
    let usage = unsafe { usage.assume_init() };
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    time(usage.ru_utime) + time(usage.ru_stime)
}

#[cfg(target_os = "linux")]
#[test]
fn an_idle_follower_sleeps_instead_of_spinning() {
    let dir = Scratch::new("idle");
    let path = dir.path("log.cobs");
    let mut bytes = file_of(&["only"]);
    // A block cut off at the end too: waiting on it costs no more than waiting at a sync byte.
    bytes.extend_from_slice(&raw_block(3, &data_payload(&[b"torn"]))[..6]);
    std::fs::write(&path, &bytes).unwrap();
    let mut follower = Follower::open(&path).unwrap();
    assert_eq!(take(&mut follower, 1), records(["only".into()]));

    let cpu = thread_cpu_time();
    let started = Instant::now();
    assert_eq!(
        follower
            .next_event_timeout(Duration::from_secs(1))
            .map(Got::from),
        None
    );
    let waited = started.elapsed();
    let used = thread_cpu_time() - cpu;
    assert!(waited >= Duration::from_secs(1), "{waited:?}");
    assert!(waited < Duration::from_secs(3), "{waited:?}");
    assert!(
        used < Duration::from_millis(200),
        "{used:?} of CPU in {waited:?}"
    );
}
