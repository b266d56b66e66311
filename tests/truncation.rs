//! Files that shrink while they are mapped: the bytes that vanish read as damage, never as a
//! SIGBUS that ends the process; and cobsfile's own appender does not cut a file that a
//! mapped reader holds.
//!
//! **Child processes.** A test that ends its process with SIGBUS when lost pages are not
//! handled runs its case in a child: this test binary again, `--exact child_case --ignored`
//! with `COBSFILE_TRUNCATION_CASE` naming the case. The parent fails if the child was ended by
//! a signal or failed, and shows its output. `child_case` is ignored in ordinary runs and
//! returns at once without that variable.

mod common;

use std::fs::{self, OpenOptions};
use std::os::unix::process::ExitStatusExt;
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

use cobsfile::{Appender, AppenderBuilder, Durability, Error, ReaderBuilder, WriterBuilder};
use common::TempFile;

/// The records of the test file: numbered, so any that comes back can be told apart.
fn record(i: usize) -> Vec<u8> {
    let mut out = format!("record {i:07} ").into_bytes();
    // Zeros and other bytes, so COBS has work to do.
    out.extend((0..200 + i % 300).map(|j| (i * 31 + j * 7) as u8));
    out
}

const RECORDS: usize = 20_000;

/// A file of `RECORDS` records in 16 KiB blocks (about 7 MB, hundreds of pages).
fn written_file() -> TempFile {
    let mut writer = WriterBuilder::new()
        .block_target(16 << 10)
        .build(Vec::new())
        .unwrap();
    for i in 0..RECORDS {
        writer.write_record(&record(i)).unwrap();
    }
    TempFile::with_contents(&writer.finish().unwrap())
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

/// Where the cut goes: in the middle of the file, not on a page or block boundary.
fn cut_point(len: u64) -> u64 {
    len / 2 + 1234
}

/// What a reader must find in the file after the cut, judged by reading its remaining bytes
/// from scratch: the records before the block the cut went through, and where the damage
/// starts (the cut block's first byte after its sync byte).
fn expected_after_cut(path: &std::path::Path) -> (Vec<Vec<u8>>, u64) {
    let bytes = fs::read(path).unwrap();
    let (records, errors) = ReaderBuilder::new().from_slice(&bytes).read_all();
    assert_eq!(errors.len(), 1, "the cut goes through a block: {errors:?}");
    let Error::Damaged { start, end, .. } = errors[0] else {
        panic!("{:?}", errors[0]);
    };
    assert_eq!(end, bytes.len() as u64);
    for (i, r) in records.iter().enumerate() {
        assert_eq!(*r, record(i));
    }
    assert!(records.len() > RECORDS / 4 && records.len() < RECORDS);
    (records, start)
}

/// Checks what a read of the mapping gave after the cut: the records a reader of the cut file
/// gets, nothing more, and one damaged range from where the cut block starts to the end of
/// the mapping.
fn check(path: &std::path::Path, mapped_len: u64, records: &[Vec<u8>], errors: &[Error]) {
    let (expected, damage_start) = expected_after_cut(path);
    assert_eq!(records.len(), expected.len(), "records");
    assert!(records == expected, "records differ");
    match errors {
        [Error::Damaged { start, end, .. }] => {
            assert_eq!((*start, *end), (damage_start, mapped_len));
        }
        other => panic!("expected one damaged range, got {other:?}"),
    }
}

/// [`check`] for a reader with threads, which reads ahead of what it returns (parts of its
/// ranges, up to about `3n + 2` of 1 MiB of payload): blocks its threads read before the cut
/// were intact then and are returned, so the records are those written, from the first on,
/// at least as many as the cut file holds; then one damaged range, from a block's start at or
/// after where the cut file's damage starts, to the end of the mapping. Nothing corrupt,
/// nothing lost before the cut.
fn check_read_ahead(
    path: &std::path::Path,
    mapped_len: u64,
    records: &[Vec<u8>],
    errors: &[Error],
) {
    let (expected, damage_start) = expected_after_cut(path);
    assert!(
        records.len() >= expected.len(),
        "records lost: {}",
        records.len()
    );
    for (i, r) in records.iter().enumerate() {
        assert!(*r == record(i), "record {i} differs");
    }
    match errors {
        [Error::Damaged { start, end, .. }] => {
            assert!(
                *start >= damage_start,
                "damage from {start}, before {damage_start}"
            );
            assert_eq!(*end, mapped_len);
        }
        other => panic!("expected one damaged range, got {other:?}"),
    }
}

/// Reads the mapped file on `threads`, cutting it once a quarter of the records are read.
fn read_through_a_cut(threads: usize) {
    let options = &ReaderBuilder::new().threads(threads);
    let file = written_file();
    let mapped = cobsfile::open(&file.0).unwrap();
    let len = mapped.bytes().len() as u64;
    let mut reader = mapped.reader_with(options);
    let (mut records, mut errors) = (Vec::new(), Vec::new());
    while let Some(item) = reader.next_record() {
        match item {
            Ok(record) => records.push(record.to_vec()),
            Err(e) => errors.push(e),
        }
        if records.len() == RECORDS / 4 {
            cut(&file.0, cut_point(len));
        }
    }
    match threads {
        1 => check(&file.0, len, &records, &errors),
        _ => check_read_ahead(&file.0, len, &records, &errors),
    }
}

/// A small log (about 70 KB, 17 pages) for many mappings at once.
fn small_file() -> TempFile {
    let mut writer = WriterBuilder::new()
        .block_target(4096)
        .build(Vec::new())
        .unwrap();
    for i in 0..300 {
        writer.write_record(&record(i)).unwrap();
    }
    TempFile::with_contents(&writer.finish().unwrap())
}

/// Many mappings at once, made and read on several threads (the registry of mappings grows
/// past its first chunk), of a file cut under all of them.
fn many_mappings() {
    let file = small_file();
    let len = fs::metadata(&file.0).unwrap().len();
    let open = |path: std::path::PathBuf| {
        std::thread::spawn(move || {
            (0..50)
                .map(|_| cobsfile::open(&path).unwrap())
                .collect::<Vec<_>>()
        })
    };
    let opened: Vec<_> = (0..4).map(|_| open(file.0.clone())).collect();
    let groups: Vec<Vec<_>> = opened.into_iter().map(|t| t.join().unwrap()).collect();
    cut(&file.0, 10_000);
    let expected = ReaderBuilder::new()
        .from_slice(&fs::read(&file.0).unwrap())
        .read_all()
        .0
        .len();
    std::thread::scope(|scope| {
        for group in &groups {
            scope.spawn(move || {
                for mapped in group {
                    let (records, errors) = mapped.reader().read_all();
                    assert_eq!(records.len(), expected);
                    assert!(
                        matches!(errors[..], [Error::Damaged { end, .. }] if end == len),
                        "{errors:?}"
                    );
                }
            });
        }
    });
}

/// The cases run in a child.
fn run_case(case: &str) {
    match case {
        "many" => many_mappings(),
        "foreign" | "foreign-default" => {
            // A mapping this crate did not make, of a file that shrinks: SIGBUS ends the
            // process, as it would without the crate's handler, which hands it to the one
            // before it (the standard library's) or to the default action.
            if case == "foreign-default" {
                default_sigbus();
            }
            let file = written_file();
            let _ours = cobsfile::open(&file.0).unwrap();
            let handle = fs::File::open(&file.0).unwrap();
            // SAFETY: the test reads past the end of a file it cut, to see the process end.
            let theirs = unsafe { memmap2::Mmap::map(&handle) }.unwrap();
            cut(&file.0, 0);
            std::hint::black_box(theirs[theirs.len() - 1]);
            panic!("read a page the file no longer has");
        }
        "raised" => {
            default_sigbus();
            let file = written_file();
            let _ours = cobsfile::open(&file.0).unwrap();
            // SAFETY: raise sends a signal to this thread; by default SIGBUS ends the process.
            unsafe { libc::raise(libc::SIGBUS) };
            panic!("SIGBUS raised and survived");
        }
        "raised-ignored" => {
            // SAFETY: sets SIGBUS to be ignored, before the crate installs its handler.
            unsafe { libc::signal(libc::SIGBUS, libc::SIG_IGN) };
            let file = written_file();
            let mapped = cobsfile::open(&file.0).unwrap();
            // SAFETY: raise sends a signal to this thread, ignored as it was before.
            unsafe { libc::raise(libc::SIGBUS) };
            // The handler is still there for the mapping.
            cut(&file.0, 5000);
            let (_, errors) = mapped.reader().read_all();
            assert_eq!(errors.len(), 1, "{errors:?}");
        }
        "sequential" => read_through_a_cut(1),
        "threads" => read_through_a_cut(2),
        "verify" | "recover" | "metadata" => {
            let file = written_file();
            let mapped = cobsfile::open(&file.0).unwrap();
            let bytes = mapped.bytes();
            let len = bytes.len() as u64;
            // The first pages are read, then the file is cut under the mapping.
            assert_eq!(bytes[0], 0);
            cut(&file.0, cut_point(len));
            let (expected, damage_start) = expected_after_cut(&file.0);
            let options = ReaderBuilder::new().threads(2).min_split(64 << 10);
            let report = match case {
                "verify" => options.verify(bytes).unwrap(),
                "recover" => {
                    let recovery = cobsfile::recover(bytes, &options, Vec::new()).unwrap();
                    recovery.report
                }
                _ => {
                    // A skipping scan lands on zeros where the cut block should end.
                    let found: Vec<_> = mapped.metadata().collect();
                    assert!(
                        matches!(found[..], [Err(Error::Damaged { end, .. })] if end == len),
                        "{found:?}"
                    );
                    return;
                }
            };
            assert_eq!(report.records, expected.len() as u64);
            let damaged: Vec<_> = report.damaged.iter().map(|d| d.range.clone()).collect();
            assert_eq!(damaged.len(), 1, "{damaged:?}");
            assert_eq!(damaged[0], damage_start..len);
        }
        _ => panic!("unknown case {case}"),
    }
}

/// Sets SIGBUS to its default action (the process ends), in place of the standard
/// library's handler, before the crate installs its own.
fn default_sigbus() {
    // SAFETY: sets the disposition of SIGBUS; no handler of this process is replaced that
    // anything relies on in these child processes.
    unsafe { libc::signal(libc::SIGBUS, libc::SIG_DFL) };
}

/// Runs `case` in a child process and fails if it was ended by a signal or failed.
fn in_child(case: &str) {
    let (status, output) = run_child(case);
    if let Some(signal) = status.signal() {
        panic!("case {case}: the child was ended by signal {signal}\n{output}");
    }
    assert!(status.success(), "case {case}: {status}\n{output}");
}

/// Runs `case` in a child process; its exit status, and its output for messages.
fn run_child(case: &str) -> (std::process::ExitStatus, String) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_case",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
            "-q",
        ])
        .env("COBSFILE_TRUNCATION_CASE", case)
        .output()
        .unwrap();
    let output = format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status, output)
}

/// Runs a case when this binary is started as a child (see the module documentation).
#[test]
#[ignore = "the child process of the tests below, started by them"]
fn child_case() {
    if let Ok(case) = std::env::var("COBSFILE_TRUNCATION_CASE") {
        run_case(&case);
    }
}

#[test]
fn a_file_cut_while_a_reader_reads_it_reads_as_damage() {
    in_child("sequential");
}

#[test]
fn a_file_cut_while_a_reader_on_two_threads_reads_it_reads_as_damage() {
    in_child("threads");
}

#[test]
fn verify_of_a_file_cut_while_mapped_reports_the_lost_bytes() {
    in_child("verify");
}

#[test]
fn recover_of_a_file_cut_while_mapped_keeps_what_is_left() {
    in_child("recover");
}

#[test]
fn a_metadata_scan_of_a_file_cut_while_mapped_reports_the_lost_bytes() {
    in_child("metadata");
}

#[test]
fn many_mappings_of_a_file_cut_under_them_read_as_damage() {
    in_child("many");
}

/// The handler is the crate's business only: a SIGBUS it did not cause goes where it went
/// before. A lost page of a mapping the crate did not make still ends the process, through
/// the standard library's handler or the default action; a SIGBUS sent to the process ends
/// it by default, and is ignored if it was.
#[test]
fn other_sigbus_goes_where_it_went_before() {
    for case in ["foreign", "foreign-default", "raised"] {
        let (status, output) = run_child(case);
        assert_eq!(status.signal(), Some(libc::SIGBUS), "case {case}\n{output}");
    }
    in_child("raised-ignored");
}

// ---------------------------------------------------------------------------------------------
// cobsfile's own appender.

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
