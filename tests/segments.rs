//! Log directories (spec 11.4): appenders roll segments by size and age, finish the segments
//! they leave, and retention removes the oldest; several appenders share one directory.

use std::path::{Path, PathBuf};
use std::time::Duration;

use cobsfile::segments::{list_segments, segment_name, SEGMENT_CREATED_KEY};
use cobsfile::{
    AppenderBuilder, Compression, Dictionary, Durability, Ending, Index, ReaderBuilder,
};

/// A fresh directory under the system's temporary one, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!(
            "cobsfile-segments-{name}-{}-{n}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The records of every segment of `dir`, in log order, with each segment's verification.
fn read_dir(dir: &Path, options: &ReaderBuilder) -> (Vec<Vec<u8>>, Vec<cobsfile::Report>) {
    let mut records = Vec::new();
    let mut reports = Vec::new();
    for (_, path) in list_segments(dir).unwrap() {
        let bytes = std::fs::read(&path).unwrap();
        let (got, errors) = options.from_slice(&bytes).read_all();
        assert!(errors.is_empty(), "{}: {errors:?}", path.display());
        records.extend(got);
        reports.push(options.verify(&bytes).unwrap());
    }
    (records, reports)
}

fn record(i: usize) -> Vec<u8> {
    format!("event {i:06} {}", "x".repeat(i % 50)).into_bytes()
}

/// Every segment but the newest is finished, with an index that counts its records; the
/// newest is an open log; all are clean.
fn check_finished(dir: &Path, reports: &[cobsfile::Report]) {
    let segments = list_segments(dir).unwrap();
    for (i, ((_, path), report)) in segments.iter().zip(reports).enumerate() {
        assert!(report.is_clean(), "{}: {report:?}", path.display());
        let last = i + 1 == segments.len();
        let want = if last { Ending::Open } else { Ending::Finished };
        assert_eq!(report.ending, want, "{}", path.display());
        if !last {
            let bytes = std::fs::read(path).unwrap();
            let index = Index::find(&bytes).expect("a finished segment has an index");
            assert_eq!(index.records(), report.records);
        }
    }
}

#[test]
fn segments_roll_by_size_and_are_finished_when_left() {
    let dir = TempDir::new("size");
    let options = AppenderBuilder::new()
        .durability(Durability::Flush)
        .segment_size(4096)
        .maintain_in_background(false);
    let mut log = options.open_dir(&dir.0).unwrap();
    let want: Vec<Vec<u8>> = (0..2000).map(record).collect();
    for r in &want {
        log.append(r).unwrap();
    }
    assert!(log.segments_error().is_none());
    log.close().unwrap();
    let segments = list_segments(&dir.0).unwrap();
    assert!(segments.len() > 10, "{} segments", segments.len());
    let seqs: Vec<u64> = segments.iter().map(|(s, _)| *s).collect();
    assert_eq!(seqs, (1..=segments.len() as u64).collect::<Vec<_>>());
    for (seq, path) in &segments {
        assert_eq!(
            path.file_name().unwrap().to_str().unwrap(),
            segment_name(*seq)
        );
        // No segment is much over the size: a block goes to a new one once it is reached.
        assert!(std::fs::metadata(path).unwrap().len() < 4096 + 600);
    }
    let (got, reports) = read_dir(&dir.0, &ReaderBuilder::new());
    assert_eq!(got, want);
    check_finished(&dir.0, &reports);

    // Each segment says when it was made, in order.
    let mut made = Vec::new();
    for (_, path) in &segments {
        let bytes = std::fs::read(path).unwrap();
        let value = ReaderBuilder::new()
            .from_slice(&bytes)
            .metadata()
            .find_map(|m| m.unwrap().get(SEGMENT_CREATED_KEY).map(|v| v.to_vec()))
            .map(|v| String::from_utf8(v).unwrap())
            .expect("created");
        made.push(value.parse::<i64>().unwrap());
    }
    assert!(made.windows(2).all(|w| w[0] <= w[1]), "{made:?}");

    // Reopened, the log goes on in its newest segment.
    let newest = segments.last().unwrap().1.clone();
    let mut log = options.open_dir(&dir.0).unwrap();
    assert_eq!(log.segment().unwrap(), newest);
    log.append(b"after reopening").unwrap();
    log.close().unwrap();
    let (got, _) = read_dir(&dir.0, &ReaderBuilder::new());
    assert_eq!(got.last().unwrap(), b"after reopening");
    assert_eq!(got.len(), want.len() + 1);
}

#[test]
fn segments_roll_by_age_and_a_finished_newest_is_never_appended_to() {
    let dir = TempDir::new("age");
    let options = AppenderBuilder::new()
        .durability(Durability::Flush)
        .segment_age(Duration::from_millis(150))
        .maintain_in_background(false);
    let mut log = options.open_dir(&dir.0).unwrap();
    log.append(b"one").unwrap();
    log.append(b"two").unwrap();
    std::thread::sleep(Duration::from_millis(200));
    log.append(b"three").unwrap();
    log.close().unwrap();
    let segments = list_segments(&dir.0).unwrap();
    assert_eq!(segments.len(), 2);
    let (got, reports) = read_dir(&dir.0, &ReaderBuilder::new());
    assert_eq!(got, [&b"one"[..], b"two", b"three"]);
    check_finished(&dir.0, &reports);

    // The newest finished by hand: the next appender starts a segment after it.
    let newest = &segments[1].1;
    cobsfile::finish_log(newest, &ReaderBuilder::new()).unwrap();
    let mut log = options.open_dir(&dir.0).unwrap();
    assert_eq!(log.segment().unwrap(), dir.0.join(segment_name(3)));
    log.append(b"four").unwrap();
    log.close().unwrap();
    let (got, _) = read_dir(&dir.0, &ReaderBuilder::new());
    assert_eq!(got, [&b"one"[..], b"two", b"three", b"four"]);
}

#[test]
fn retention_removes_the_oldest_segments_by_count_size_and_age() {
    let dir = TempDir::new("retain");
    let want: Vec<Vec<u8>> = (0..3000).map(record).collect();
    let base = AppenderBuilder::new()
        .durability(Durability::Flush)
        .segment_size(2048)
        .maintain_in_background(false);

    let mut log = base.clone().retain_count(4).open_dir(&dir.0).unwrap();
    for r in &want {
        log.append(r).unwrap();
    }
    log.close().unwrap();
    let segments = list_segments(&dir.0).unwrap();
    assert_eq!(segments.len(), 4);
    let (got, reports) = read_dir(&dir.0, &ReaderBuilder::new());
    assert!(want.ends_with(&got), "what is kept is the newest part");
    assert!(got.len() > 10);
    check_finished(&dir.0, &reports);
    let first = segments[0].0;
    assert!(first > 10);

    // By size: at most so many bytes, the segment appended to aside.
    let mut log = base.clone().retain_size(5000).open_dir(&dir.0).unwrap();
    log.append(b"by size").unwrap();
    log.close().unwrap();
    let total: u64 = list_segments(&dir.0)
        .unwrap()
        .iter()
        .map(|(_, p)| std::fs::metadata(p).unwrap().len())
        .sum();
    let newest = std::fs::metadata(&list_segments(&dir.0).unwrap().last().unwrap().1)
        .unwrap()
        .len();
    assert!(total <= 5000 || total == newest, "{total} bytes");
    let (got, _) = read_dir(&dir.0, &ReaderBuilder::new());
    assert_eq!(got.last().unwrap(), b"by size");

    // By age: segments whose successor was made long enough ago go, the newest stays.
    std::thread::sleep(Duration::from_millis(300));
    let mut log = base
        .clone()
        .segment_size(u64::MAX)
        .segment_age(Duration::from_millis(100))
        .retain_age(Duration::from_millis(250))
        .open_dir(&dir.0)
        .unwrap();
    log.append(b"by age").unwrap();
    // The segment of "by size" was left only now: its records may be that young.
    let (got, _) = read_dir(&dir.0, &ReaderBuilder::new());
    assert_eq!(got.len(), 2, "{got:?}");
    std::thread::sleep(Duration::from_millis(300));
    log.append(b"later").unwrap();
    log.close().unwrap();
    let (got, _) = read_dir(&dir.0, &ReaderBuilder::new());
    assert_eq!(got, [&b"by age"[..], b"later"]);
}

#[test]
fn a_segment_someone_reads_is_neither_finished_nor_removed() {
    let dir = TempDir::new("held");
    let options = AppenderBuilder::new()
        .durability(Durability::Flush)
        .segment_size(1024)
        .retain_count(2)
        .maintain_in_background(false);
    let mut log = options.open_dir(&dir.0).unwrap();
    let mut i = 0;
    while list_segments(&dir.0).unwrap().len() < 2 {
        log.append(&record(i)).unwrap();
        i += 1;
    }
    let first = list_segments(&dir.0).unwrap()[0].1.clone();
    let mapped = cobsfile::open(&first).unwrap();
    for _ in 0..500 {
        log.append(&record(i)).unwrap();
        i += 1;
    }
    assert!(first.exists(), "a mapped segment stays");
    assert!(list_segments(&dir.0).unwrap().len() > 2);
    assert_eq!(mapped.reader().read_all().1.len(), 0);
    drop(mapped);
    log.append(b"last").unwrap();
    // The next roll's pass removes it.
    for _ in 0..200 {
        log.append(&record(i)).unwrap();
        i += 1;
    }
    log.close().unwrap();
    assert!(!first.exists());
    assert!(list_segments(&dir.0).unwrap().len() <= 2);
}

/// A segment a follower still held when the appender rolled away from it is finished soon
/// after the follower moves on, and a segment a reader held against retention is removed
/// soon after the reader lets it go: without another roll, by a pass run again.
#[test]
fn segments_held_at_a_roll_are_finished_and_removed_once_let_go() {
    use cobsfile::{FollowEvent, FollowerBuilder};
    let dir = TempDir::new("held-retry");
    let options = AppenderBuilder::new()
        .durability(Durability::Flush)
        .segment_size(1024)
        .retain_count(3);
    let mut log = options.open_dir(&dir.0).unwrap();
    log.append(b"first").unwrap();
    let mut follower = FollowerBuilder::new().open(&dir.0).unwrap();
    match follower.next_event_timeout(Duration::from_secs(10)) {
        Some(Ok(FollowEvent::Record(r))) => assert_eq!(r, b"first"),
        other => panic!("{other:?}"),
    }
    let first = log.segment().unwrap();
    let mapped = cobsfile::open(&first).unwrap();
    // Rolls while the follower holds the first segment: it is not finished then.
    let mut i = 0;
    while list_segments(&dir.0).unwrap().len() < 5 {
        log.append(&record(i)).unwrap();
        i += 1;
    }
    std::thread::sleep(Duration::from_millis(300));
    let bytes = std::fs::read(&first).unwrap();
    let ending = ReaderBuilder::new().verify(&bytes).unwrap().ending;
    assert_eq!(ending, Ending::Open, "held by the follower and a reader");
    // The follower reads on into the newer segments, and lets the first go.
    for _ in 0..i {
        match follower.next_event_timeout(Duration::from_secs(10)) {
            Some(Ok(FollowEvent::Record(_) | FollowEvent::NextSegment)) => {}
            other => panic!("{other:?}"),
        }
    }
    drop(follower);
    drop(mapped);
    // The pass that removes it finishes the others first, and removes down to three.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let settled = || !first.exists() && list_segments(&dir.0).unwrap().len() <= 3;
    while !settled() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(settled(), "removed once let go, without another roll");
    let (_, reports) = read_dir(&dir.0, &ReaderBuilder::new());
    check_finished(&dir.0, &reports);
    log.close().unwrap();
}

#[test]
fn several_appenders_share_a_directory_and_lose_nothing() {
    let dir = TempDir::new("shared");
    let options = AppenderBuilder::new()
        .durability(Durability::Flush)
        .segment_size(8192);
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let (options, dir) = (options.clone(), dir.0.clone());
            std::thread::spawn(move || {
                let mut log = options.open_dir(&dir).unwrap();
                for i in 0..1500 {
                    log.append(format!("writer {t} event {i:05}").as_bytes())
                        .unwrap();
                }
                log.close().unwrap();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // The last appender to leave a segment finishes it; one left unfinished by a race is
    // finished by the next opening's pass.
    AppenderBuilder::new()
        .maintain_in_background(false)
        .open_dir(&dir.0)
        .unwrap()
        .close()
        .unwrap();
    let (got, reports) = read_dir(&dir.0, &ReaderBuilder::new());
    assert_eq!(got.len(), 4 * 1500);
    for t in 0..4 {
        let mine: Vec<String> = got
            .iter()
            .map(|r| String::from_utf8(r.clone()).unwrap())
            .filter(|r| r.starts_with(&format!("writer {t} ")))
            .collect();
        let want: Vec<String> = (0..1500)
            .map(|i| format!("writer {t} event {i:05}"))
            .collect();
        assert_eq!(mine, want, "each writer's records once, in its order");
    }
    check_finished(&dir.0, &reports);
}

#[test]
fn every_segment_of_a_compressed_log_reads_alone() {
    let dir = TempDir::new("dict");
    let samples: Vec<Vec<u8>> = (0..2000).map(record).collect();
    let dictionary = Dictionary::train(&samples, 4096).unwrap();
    let options = AppenderBuilder::new()
        .durability(Durability::Flush)
        .compression(Compression::Zstd { level: 3 })
        .dictionary(dictionary, true)
        .segment_size(4096)
        .maintain_in_background(false);
    let mut log = options.open_dir(&dir.0).unwrap();
    log.announce([("schema", b"events".as_slice())]).unwrap();
    for r in &samples {
        log.append(r).unwrap();
    }
    log.close().unwrap();
    let segments = list_segments(&dir.0).unwrap();
    assert!(segments.len() > 3);
    for (_, path) in &segments {
        // Read without the dictionary: each segment embeds it, and holds the announced
        // metadata.
        let bytes = std::fs::read(path).unwrap();
        let report = ReaderBuilder::new().verify(&bytes).unwrap();
        assert!(report.is_clean(), "{}: {report:?}", path.display());
        let schema = ReaderBuilder::new()
            .from_slice(&bytes)
            .metadata()
            .find_map(|m| m.unwrap().get("schema").map(|v| v.to_vec()));
        assert_eq!(
            schema.as_deref(),
            Some(&b"events"[..]),
            "{}",
            path.display()
        );
    }
    let (got, reports) = read_dir(&dir.0, &ReaderBuilder::new());
    assert_eq!(got, samples);
    check_finished(&dir.0, &reports);
}

/// A follower of a log directory reads every record once, across rolls, while appenders
/// write, finish and remove segments; it lets go of the segments it has read, so that they
/// are finished.
#[test]
fn a_follower_follows_a_directory_across_rolls() {
    use cobsfile::{FollowEvent, FollowerBuilder};
    let dir = TempDir::new("follow");
    let options = AppenderBuilder::new()
        .durability(Durability::Flush)
        .segment_size(2048);
    let mut log = options.open_dir(&dir.0).unwrap();
    log.append(b"first").unwrap();
    let mut follower = FollowerBuilder::new().open(&dir.0).unwrap();
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let (options, dir) = (options.clone(), dir.0.clone());
            std::thread::spawn(move || {
                let mut log = options.open_dir(&dir).unwrap();
                for i in 0..800 {
                    log.append(format!("writer {w} event {i:04}").as_bytes())
                        .unwrap();
                    if i % 100 == 0 {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                }
                log.close().unwrap();
            })
        })
        .collect();
    let mut got = Vec::new();
    let mut next_segments = 0;
    while got.len() < 1 + 2 * 800 {
        match follower.next_event_timeout(Duration::from_secs(20)) {
            Some(Ok(FollowEvent::Record(r))) => got.push(String::from_utf8(r.to_vec()).unwrap()),
            Some(Ok(FollowEvent::NextSegment)) => next_segments += 1,
            Some(other) => panic!("{other:?}"),
            None => panic!("nothing for 20 s after {} records", got.len()),
        }
    }
    for w in writers {
        w.join().unwrap();
    }
    log.close().unwrap();
    assert_eq!(got[0], "first");
    for w in 0..2 {
        let mine: Vec<&String> = got
            .iter()
            .filter(|r| r.starts_with(&format!("writer {w} ")))
            .collect();
        let want: Vec<String> = (0..800)
            .map(|i| format!("writer {w} event {i:04}"))
            .collect();
        assert_eq!(mine.len(), 800);
        assert!(
            mine.iter().zip(&want).all(|(a, b)| *a == b),
            "writer {w} in order, once"
        );
    }
    assert!(next_segments > 5, "{next_segments}");
    // Nothing more, and nothing twice.
    assert!(follower
        .next_event_timeout(Duration::from_millis(300))
        .is_none());
    // The segments it read are let go: a pass finishes them all.
    AppenderBuilder::new()
        .maintain_in_background(false)
        .open_dir(&dir.0)
        .unwrap()
        .close()
        .unwrap();
    let (_, reports) = read_dir(&dir.0, &ReaderBuilder::new());
    check_finished(&dir.0, &reports);

    // From the end: only what comes after.
    let mut tail = FollowerBuilder::new().from_end(true).open(&dir.0).unwrap();
    let mut log = options.open_dir(&dir.0).unwrap();
    log.append(b"later").unwrap();
    loop {
        match tail.next_event_timeout(Duration::from_secs(10)) {
            Some(Ok(FollowEvent::Record(r))) => break assert_eq!(r, b"later"),
            // The appender may roll first (the newest segment is full).
            Some(Ok(FollowEvent::NextSegment)) => {}
            other => panic!("{other:?}"),
        }
    }
    log.close().unwrap();
}

/// A follower opened on a directory of several segments reads them oldest first, whatever
/// the newest holds; so does one that moves on while the segment it leaves still has records.
#[test]
fn a_follower_reads_older_segments_first() {
    use cobsfile::{FollowEvent, FollowerBuilder};
    let dir = TempDir::new("follow-order");
    let options = AppenderBuilder::new()
        .durability(Durability::Flush)
        .segment_size(1024)
        .maintain_in_background(false);
    let mut log = options.open_dir(&dir.0).unwrap();
    let want: Vec<Vec<u8>> = (0..300).map(record).collect();
    for r in &want[..200] {
        log.append(r).unwrap();
    }
    assert!(list_segments(&dir.0).unwrap().len() > 5);
    let mut follower = FollowerBuilder::new().open(&dir.0).unwrap();
    for r in &want[200..] {
        log.append(r).unwrap();
    }
    log.close().unwrap();
    let mut got = Vec::new();
    while got.len() < want.len() {
        match follower.next_event_timeout(Duration::from_secs(10)) {
            Some(Ok(FollowEvent::Record(r))) => got.push(r.to_vec()),
            Some(Ok(FollowEvent::NextSegment)) => {}
            other => panic!("{other:?} after {} records", got.len()),
        }
    }
    assert!(got == want, "in log order");
}

/// A roll that fails (the disk full when the new segment is made) costs no record: the
/// appender goes on in the segment it has, and rolls a second later.
#[test]
fn a_failed_roll_keeps_appending_where_it_was() {
    use cobsfile::fs::SimFs;
    let fs = SimFs::new(5);
    let dir = Path::new("/sim/log");
    let mut log = AppenderBuilder::new()
        .durability(Durability::Fsync)
        .segment_size(300)
        .maintain_in_background(false)
        .open_dir_in(std::sync::Arc::new(fs.clone()), dir)
        .unwrap();
    let mut i = 0;
    while fs.list(dir).len() < 2 {
        log.append(&record(i)).unwrap();
        i += 1;
    }
    let segment = log.segment().unwrap();
    while fs.read(&segment).unwrap().len() < 300 {
        log.append(&record(i)).unwrap();
        i += 1;
    }
    let before = fs.list(dir).len();
    // The next append rolls: making the segment fails.
    fs.fail_next_write(std::io::ErrorKind::StorageFull);
    for _ in 0..5 {
        log.append(&record(i)).unwrap();
        i += 1;
    }
    assert_eq!(
        log.segment().unwrap(),
        segment,
        "still in the segment it had"
    );
    assert_eq!(fs.list(dir).len(), before);
    std::thread::sleep(Duration::from_millis(1100));
    log.append(&record(i)).unwrap();
    i += 1;
    assert_ne!(
        log.segment().unwrap(),
        segment,
        "rolled once the retry was due"
    );
    log.close().unwrap();
    let mut got = Vec::new();
    for path in fs.list(dir) {
        let bytes = fs.read(&path).unwrap();
        got.extend(ReaderBuilder::new().from_slice(&bytes).read_all().0);
    }
    assert_eq!(got, (0..i).map(record).collect::<Vec<_>>());
}

#[test]
fn find_record_locates_each_record_of_a_log_by_its_segments() {
    let dir = TempDir::new("find");
    let options = AppenderBuilder::new()
        .durability(Durability::Flush)
        .segment_size(2048)
        .maintain_in_background(false);
    let mut log = options.open_dir(&dir.0).unwrap();
    for i in 0..600 {
        log.append_at(&record(i), i as i64).unwrap();
    }
    log.close().unwrap();
    // Damage in a finished segment: its index still counts the records written (spec 9.6,
    // ordinals as written), a read from its start no longer returns them all.
    let segments = list_segments(&dir.0).unwrap();
    assert!(segments.len() > 5);
    let damaged = &segments[2].1;
    let mut bytes = std::fs::read(damaged).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(damaged, &bytes).unwrap();
    let log = cobsfile::segments::LogDir::open(&dir.0).unwrap();

    for (reader, by_index) in [
        (ReaderBuilder::new(), true),
        (
            ReaderBuilder::new().window(cobsfile::Window::new(Some(100), Some(450))),
            false,
        ),
    ] {
        // Each segment's count: its index's where that counts the whole segment and no
        // window leaves records out, else what a read returns; the newest has no index.
        let counts: Vec<u64> = (log.segments().iter())
            .map(
                |s| match s.file.index().filter(|i| by_index && i.start() == 0) {
                    Some(index) => index.records(),
                    None => s.file.reader_with(&reader).read_all().0.len() as u64,
                },
            )
            .collect();
        assert!(
            by_index
                == (counts[2]
                    > log.segments()[2]
                        .file
                        .reader_with(&reader)
                        .read_all()
                        .0
                        .len() as u64)
        );
        let mut n = 0;
        for (at, &count) in counts.iter().enumerate() {
            for within in 0..count {
                assert_eq!(log.find_record(&reader, n), (at, within), "record {n}");
                n += 1;
            }
        }
        let past = (log.segments().len(), 0);
        assert_eq!(log.find_record(&reader, n), past);
        assert_eq!(log.find_record(&reader, u64::MAX), past);
    }
}
