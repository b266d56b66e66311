//! Files that shrink while they are mapped: cobsfile's own appender does not cut a file that
//! a mapped reader holds.

mod common;

use std::fs::{self, OpenOptions};
use std::sync::mpsc;
use std::time::Duration;

use cobsfile::{Appender, AppenderBuilder, Durability, Error};
use common::TempFile;

/// The records of the test file: numbered, so any that comes back can be told apart.
fn record(i: usize) -> Vec<u8> {
    let mut out = format!("record {i:07} ").into_bytes();
    // Zeros and other bytes, so COBS has work to do.
    out.extend((0..200 + i % 300).map(|j| (i * 31 + j * 7) as u8));
    out
}

/// Cuts the file at `path` to `len` bytes through a handle of its own, as another process
/// would.
fn cut(path: &std::path::Path, len: u64) {
    OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len)
        .unwrap();
}

/// A log of three records in blocks of their own, with the last block torn in half, as a
/// crashed writer leaves it; and the length of the log before the torn block.
fn torn_log() -> (TempFile, u64) {
    let file = TempFile::with_contents(b"");
    let options = AppenderBuilder::new().durability(Durability::Flush);
    let mut log = options.open(&file.0).unwrap();
    log.append(&record(0)).unwrap();
    log.append(&record(1)).unwrap();
    log.close().unwrap();
    let clean = fs::metadata(&file.0).unwrap().len();
    let mut log = options.open(&file.0).unwrap();
    log.append(&vec![7; 20_000]).unwrap();
    log.close().unwrap();
    let full = fs::metadata(&file.0).unwrap().len();
    cut(&file.0, clean + (full - clean) / 2);
    (file, clean)
}

#[test]
fn an_appender_fences_off_a_torn_tail_rather_than_cut_a_file_a_reader_maps() {
    let (file, clean) = torn_log();
    let torn_len = fs::metadata(&file.0).unwrap().len();
    let mapped = cobsfile::open(&file.0).unwrap();

    let mut log = AppenderBuilder::new()
        .durability(Durability::Flush)
        .open(&file.0)
        .unwrap();
    let opened = log.opened().clone();
    assert!(!opened.exclusive, "{opened:?}");
    assert_eq!(opened.torn, Some(clean..torn_len));
    assert!(!opened.truncated && !opened.completed, "{opened:?}");
    log.append(b"after").unwrap();
    log.close().unwrap();
    assert!(fs::metadata(&file.0).unwrap().len() > torn_len);

    // The mapping still holds every byte it mapped: the torn block is damage at its end.
    let (records, errors) = mapped.reader().read_all();
    assert_eq!(records, [record(0), record(1)]);
    match errors[..] {
        [Error::Damaged { start, end, .. }] => assert_eq!((start, end), (clean + 1, torn_len)),
        _ => panic!("{errors:?}"),
    }
    drop(mapped);
    let (records, errors) = cobsfile::open(&file.0).unwrap().reader().read_all();
    assert_eq!(records, [record(0), record(1), b"after".to_vec()]);
    assert_eq!(errors.len(), 1);
}

#[test]
fn the_appender_still_cuts_a_torn_tail_once_the_reader_is_gone() {
    let (file, clean) = torn_log();
    drop(cobsfile::open(&file.0).unwrap());
    // Retried: another test's child process may hold a copy of this file's descriptor for
    // a moment (from its fork to its exec), and with it a lock.
    for _ in 0..500 {
        let log = Appender::open(&file.0).unwrap();
        if log.opened().exclusive {
            assert!(log.opened().truncated, "{:?}", log.opened());
            drop(log);
            assert_eq!(fs::metadata(&file.0).unwrap().len(), clean);
            return;
        }
        drop(log);
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("the log stayed locked");
}

#[test]
fn a_reader_maps_a_log_while_an_appender_has_it_open() {
    let (file, _) = torn_log();
    let mut log = Appender::open(&file.0).unwrap();
    // The appender holds a shared lock once open; mapping must not wait for it to close.
    let (tx, rx) = mpsc::channel();
    let path = file.0.clone();
    std::thread::spawn(move || {
        let mapped = cobsfile::open(&path).unwrap();
        tx.send(mapped.reader().read_all().0.len()).unwrap();
    });
    let records = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("mapping waited for the appender");
    assert_eq!(records, 2);
    log.append(b"more").unwrap();
    log.close().unwrap();
}
