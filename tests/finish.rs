//! Finishing a log in place (spec 11.3): the index lists the fences' padding and damage as
//! gaps, seeks and window reads use it, a finish cut short finishes again to the same bytes,
//! and a log someone has open is left alone.

use std::fs;

use cobsfile::{
    finish_log, finish_log_in, AppenderBuilder, BlockType, Durability, Ending, Finish, Index,
    ReaderBuilder, Window,
};

#[path = "common/temp_file.rs"]
mod temp_file;
use temp_file::TempFile;

type Event = (Vec<u8>, Option<i64>);

/// A log written by three appenders in turn, each batch fenced (spec 11.1), some records with
/// times (out of order), some without.
fn log(path: &std::path::Path, batches: usize) -> Vec<Event> {
    let mut events = Vec::new();
    for round in 0..3 {
        let mut log = AppenderBuilder::new()
            .durability(Durability::Flush)
            .open(path)
            .unwrap();
        for b in 0..batches {
            let i = (round * batches + b) as i64;
            if i % 3 == 0 {
                let record = format!("untimed {i}").into_bytes();
                log.append(&record).unwrap();
                events.push((record, None));
            } else {
                let batch: Vec<(Vec<u8>, i64)> = (0..5)
                    .map(|j| {
                        (
                            format!("event {i}.{j}").into_bytes(),
                            i * 100 + (j * 37) % 11,
                        )
                    })
                    .collect();
                log.append_batch_at(batch.iter().map(|(r, t)| (&r[..], *t)))
                    .unwrap();
                events.extend(batch.into_iter().map(|(r, t)| (r, Some(t))));
            }
        }
        log.close().unwrap();
    }
    events
}

fn read(bytes: &[u8], options: &ReaderBuilder) -> (Vec<Event>, usize) {
    let mut reader = options.from_slice(bytes);
    let mut events = Vec::new();
    let mut errors = 0;
    while let Some(record) = reader.next_record() {
        match record {
            Ok(record) => {
                let record = record.to_vec();
                events.push((record, reader.record_time()));
            }
            Err(_) => errors += 1,
        }
    }
    (events, errors)
}

fn finished(path: &std::path::Path) -> cobsfile::Finished {
    match finish_log(path, &ReaderBuilder::new()).unwrap() {
        Finish::Finished(f) => f,
        other => panic!("not finished: {other:?}"),
    }
}

#[test]
fn a_finished_log_seeks_and_reads_windows_by_its_index() {
    let file = TempFile::with_contents(&[]);
    let events = log(&file.0, 40);
    let before = fs::read(&file.0).unwrap();
    let done = finished(&file.0);
    assert!(done.indexed && done.timed, "{done:?}");
    assert_eq!(done.records, events.len() as u64);
    assert!(done.gap_bytes > 100, "every fence is a gap: {done:?}");
    let bytes = fs::read(&file.0).unwrap();
    assert!(
        bytes.starts_with(&before),
        "finishing only appends to an undamaged log"
    );

    let report = ReaderBuilder::new().verify(&bytes).unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(report.ending, Ending::Finished);
    assert_eq!(read(&bytes, &ReaderBuilder::new()), (events.clone(), 0));

    // The index: every block opens where its entry says, and seeking to each record gives
    // that record and the rest.
    let index = Index::find(&bytes).expect("a usable index");
    assert_eq!(index.start(), 0);
    assert_eq!(index.records(), events.len() as u64);
    for e in index.entries() {
        let at = e.offset as usize;
        assert_eq!(bytes[at], 0, "{e:?}");
        if e.block_type == BlockType::Gap {
            assert_eq!(bytes[at + 1], 0, "a gap here is padding: {e:?}");
        } else {
            assert_eq!(bytes[at + e.size as usize], 0, "{e:?}");
        }
    }
    for k in [0, 1, 7, events.len() / 2, events.len() - 1] {
        let mut reader = ReaderBuilder::new().from_slice_at_record(&bytes, k as u64);
        let record = reader.next_record().unwrap().unwrap().to_vec();
        assert_eq!(record, events[k].0, "record {k}");
    }

    // A window read by the time index reads exactly the window, and decodes few blocks.
    let window = Window::new(Some(3_000), Some(3_500));
    let want: Vec<Event> = events
        .iter()
        .filter(|(_, t)| t.is_some_and(|t| window.contains(t)))
        .cloned()
        .collect();
    assert!(want.len() >= 10);
    let options = ReaderBuilder::new().window(window);
    assert_eq!(read(&bytes, &options), (want.clone(), 0));
    let mut reader = options.from_slice(&bytes);
    reader.read_all();
    let stats = reader.stats();
    assert!(
        stats.blocks < 40,
        "the time index plans the read: {stats:?}"
    );
    assert_eq!(stats.outside_window_blocks, 0, "{stats:?}");
    for split in [1, 300] {
        let ranges = ReaderBuilder::new()
            .window(window)
            .threads(2)
            .min_split(split);
        assert_eq!(read(&bytes, &ranges), (want.clone(), 0));
    }

    // Finished once: a second finish changes nothing.
    assert_eq!(
        finish_log(&file.0, &ReaderBuilder::new()).unwrap(),
        Finish::Already
    );
    assert_eq!(fs::read(&file.0).unwrap(), bytes);
}

#[test]
fn damage_in_a_log_is_a_gap_and_stays_damage() {
    let file = TempFile::with_contents(&[]);
    let events = log(&file.0, 20);
    let mut bytes = fs::read(&file.0).unwrap();
    // A torn block in the middle, as a crashed appender leaves one before the next fence.
    let middle = bytes.len() / 2;
    let mut open = middle + memchr::memchr(0, &bytes[middle..]).unwrap();
    while bytes[open + 1] != 6 {
        // Not yet a data block's type field: on to the next sync byte.
        open += 1 + memchr::memchr(0, &bytes[open + 1..]).unwrap();
    }
    let next = open + 1 + memchr::memchr(0, &bytes[open + 1..]).unwrap();
    bytes.splice(open + 1..next, b"\x06\x7f torn".iter().copied());
    fs::write(&file.0, &bytes).unwrap();
    let (survivors, errors) = read(&bytes, &ReaderBuilder::new());
    assert_eq!(errors, 1);
    assert!(survivors.len() < events.len());

    let done = finished(&file.0);
    assert!(done.indexed, "{done:?}");
    assert_eq!(done.records, survivors.len() as u64);
    let finished = fs::read(&file.0).unwrap();
    let report = ReaderBuilder::new().verify(&finished).unwrap();
    assert_eq!(report.damaged.len(), 1, "{report:?}");
    assert_eq!(report.ending, Ending::Finished);
    let index = Index::find(&finished).expect("a usable index");
    let damage = &report.damaged[0].range;
    assert!(
        index
            .entries()
            .iter()
            .any(|e| e.block_type == BlockType::Gap
                && e.offset < damage.start
                && e.offset + e.size >= damage.end),
        "a gap covers the damage {damage:?}"
    );
    assert_eq!(
        read(&finished, &ReaderBuilder::new()),
        (survivors.clone(), 1)
    );
    for k in 0..survivors.len() as u64 {
        let mut reader = ReaderBuilder::new().from_slice_at_record(&finished, k);
        let record = reader.next_record().unwrap().unwrap().to_vec();
        assert_eq!(record, survivors[k as usize].0, "record {k}");
    }
}

/// A finish cut short at any byte (a crash before its write landed whole) finishes again
/// to the bytes one finish writes; so does a torn block at the end, which it cuts.
#[test]
fn a_finish_cut_short_finishes_again_to_the_same_bytes() {
    let file = TempFile::with_contents(&[]);
    log(&file.0, 6);
    let before = fs::read(&file.0).unwrap();
    finished(&file.0);
    let after = fs::read(&file.0).unwrap();
    for cut in before.len()..after.len() {
        fs::write(&file.0, &after[..cut]).unwrap();
        match finish_log(&file.0, &ReaderBuilder::new()).unwrap() {
            Finish::Finished(_) => {}
            // Cut before the end block's last byte: the end block is completed.
            Finish::Already if cut + 1 == after.len() => {}
            other => panic!("cut at {cut}: {other:?}"),
        }
        assert_eq!(fs::read(&file.0).unwrap(), after, "cut at {cut}");
    }
    // A torn block at the end, and one lacking only its closing sync byte.
    let mut torn = before.clone();
    torn.extend_from_slice(b"\x00\x06\x40partial");
    fs::write(&file.0, &torn).unwrap();
    let done = finished(&file.0);
    assert_eq!(done.cut, 10);
    assert_eq!(fs::read(&file.0).unwrap(), after);
}

#[test]
fn a_log_someone_has_open_is_left_alone() {
    let file = TempFile::with_contents(&[]);
    log(&file.0, 3);
    let before = fs::read(&file.0).unwrap();
    let appender = AppenderBuilder::new().open(&file.0).unwrap();
    assert_eq!(
        finish_log(&file.0, &ReaderBuilder::new()).unwrap(),
        Finish::Busy
    );
    let mapped = cobsfile::open(&file.0).unwrap();
    appender.close().unwrap();
    assert_eq!(
        finish_log(&file.0, &ReaderBuilder::new()).unwrap(),
        Finish::Busy
    );
    drop(mapped);
    assert_eq!(fs::read(&file.0).unwrap(), before);
    finished(&file.0);

    // An empty file, a missing one, and one that is no cobsfile.
    let empty = TempFile::with_contents(&[]);
    assert_eq!(
        finish_log(&empty.0, &ReaderBuilder::new()).unwrap(),
        Finish::Empty
    );
    let garbage = TempFile::with_contents(b"not a log at all\n");
    assert!(finish_log(&garbage.0, &ReaderBuilder::new()).is_err());
    assert_eq!(fs::read(&garbage.0).unwrap(), b"not a log at all\n");
    let fs_ = cobsfile::fs::SimFs::new(1);
    let missing = finish_log_in(&fs_, "/nowhere/log", &ReaderBuilder::new());
    assert!(missing.is_err());
}
