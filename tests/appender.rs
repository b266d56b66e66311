//! The appender: reopening a log (the header written once, a torn tail cut or fenced off),
//! several processes appending to one file at once, and a writer killed at random moments.
//!
//! **Child processes.** The multi-process tests run this test binary again as their children:
//! `--exact child_append --ignored` with `COBSFILE_CHILD` (what to do) and
//! `COBSFILE_CHILD_PATH` (the log) in the environment. `child_append` is ignored in ordinary
//! runs and returns at once without those variables. A child says what it did on stdout in
//! lines holding `@child ` (libtest prints its own lines around them): `opened EXCLUSIVE
//! CREATED` after opening, `durable N` once every record with a sequence number below N is
//! durable, `done` after closing.
//!
//! **Records.** Every record names its writer and its sequence number and is otherwise
//! derived from them, so a reader can tell each record's origin and check every byte:
//! `writer (1 byte) | sequence number (u32 LE) | pseudo-random bytes (zeros included) | CRC-32
//! of all that (LE)`, 9 bytes to a few KiB. A record that comes back torn, mixed with another,
//! duplicated or out of order fails the checks below.

mod common;

use std::fs::{self, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use cobsfile::fs::SimFs;
use cobsfile::{
    Appender, AppenderBuilder, BlockType, Durability, Ending, Error, Opened, ReaderBuilder,
    WriterBuilder,
};
use common::{header_payload, raw_block, Rng, TempFile};

// ---------------------------------------------------------------------------------------------
// Records.

/// Bytes of a record before its payload (writer, sequence number) and after it (CRC-32).
const RECORD_OVERHEAD: usize = 9;

/// The record `seq` of `writer`, `len` bytes long (at least `RECORD_OVERHEAD`).
fn record(writer: u8, seq: u64, len: usize) -> Vec<u8> {
    let mut out = vec![0; len];
    out[0] = writer;
    out[1..5].copy_from_slice(&u32::try_from(seq).expect("seq fits u32").to_le_bytes());
    Rng::new(u64::from(writer) << 32 | seq).fill(&mut out[5..len - 4]);
    let crc = crc32fast::hash(&out[..len - 4]);
    out[len - 4..].copy_from_slice(&crc.to_le_bytes());
    out
}

/// A record length for `seq` of `writer`: log-uniform over `RECORD_OVERHEAD..RECORD_OVERHEAD +
/// max`, so that most records are small and some are large.
fn record_len(writer: u8, seq: u64, max: usize) -> usize {
    let mut rng = Rng::new(!(u64::from(writer) << 32 | seq));
    let bits = rng.below(u64::from(max.max(2).ilog2()) + 1);
    RECORD_OVERHEAD + rng.below(1 << bits) as usize
}

/// The writer and sequence number of a record, after checking every byte of it.
fn check_record(bytes: &[u8]) -> (u8, u64) {
    assert!(
        bytes.len() >= RECORD_OVERHEAD,
        "a record of {} bytes",
        bytes.len()
    );
    let writer = bytes[0];
    let seq = u64::from(u32::from_le_bytes(bytes[1..5].try_into().unwrap()));
    assert!(
        bytes == record(writer, seq, bytes.len()),
        "record {seq} of writer {writer} ({} bytes) is not what was written",
        bytes.len()
    );
    (writer, seq)
}

// ---------------------------------------------------------------------------------------------
// The child process.

/// What a child process does.
#[derive(Debug, Clone)]
struct ChildSpec {
    path: PathBuf,
    writer: u8,
    /// The sequence number of its first record.
    start: u64,
    /// Records to append (`u64::MAX`: until killed).
    count: u64,
    durability: Durability,
    block_target: usize,
    /// Record payloads up to this many bytes.
    max_len: usize,
    /// Records appended between reports of durability (with `Fsync` and `Group`).
    batch: u64,
    /// Wait for a line on stdin after opening, so that several children start together.
    barrier: bool,
    /// `RLIMIT_FSIZE`, if not 0: writes past this many bytes of file fail (`EFBIG`).
    file_size_limit: u64,
}

impl ChildSpec {
    fn new(path: &Path, writer: u8, durability: Durability) -> Self {
        ChildSpec {
            path: path.to_owned(),
            writer,
            start: 0,
            count: u64::MAX,
            durability,
            block_target: cobsfile::DEFAULT_BLOCK_TARGET,
            max_len: 4096,
            batch: 1,
            barrier: false,
            file_size_limit: 0,
        }
    }

    fn encode(&self) -> String {
        let durability = match self.durability {
            Durability::None => "none".to_owned(),
            Durability::Flush => "flush".to_owned(),
            Durability::Fsync => "fsync".to_owned(),
            Durability::Group { interval, bytes } => {
                format!("group:{}:{bytes}", interval.as_micros())
            }
        };
        format!(
            "writer={} start={} count={} durability={durability} block={} max={} batch={} \
             barrier={} limit={}",
            self.writer,
            self.start,
            self.count,
            self.block_target,
            self.max_len,
            self.batch,
            self.barrier,
            self.file_size_limit
        )
    }

    fn from_env() -> Option<Self> {
        let spec = std::env::var("COBSFILE_CHILD").ok()?;
        let path = std::env::var_os("COBSFILE_CHILD_PATH").expect("COBSFILE_CHILD_PATH");
        let mut out = ChildSpec::new(Path::new(&path), 0, Durability::None);
        for field in spec.split_whitespace() {
            let (key, value) = field.split_once('=').expect("key=value");
            let number = || value.parse::<u64>().expect("a number");
            match key {
                "writer" => out.writer = number() as u8,
                "start" => out.start = number(),
                "count" => out.count = number(),
                "block" => out.block_target = number() as usize,
                "max" => out.max_len = number() as usize,
                "batch" => out.batch = number(),
                "barrier" => out.barrier = value == "true",
                "limit" => out.file_size_limit = number(),
                "durability" => {
                    out.durability = match value.split(':').collect::<Vec<_>>()[..] {
                        ["none"] => Durability::None,
                        ["flush"] => Durability::Flush,
                        ["fsync"] => Durability::Fsync,
                        ["group", interval, bytes] => Durability::Group {
                            interval: Duration::from_micros(interval.parse().unwrap()),
                            bytes: bytes.parse().unwrap(),
                        },
                        _ => panic!("durability {value}"),
                    }
                }
                _ => panic!("unknown child field {key}"),
            }
        }
        Some(out)
    }

    /// Starts this test binary as a child doing this.
    fn spawn(&self) -> Child {
        Command::new(std::env::current_exe().expect("current_exe"))
            .args([
                "--exact",
                "child_append",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
                "-q",
            ])
            .env("COBSFILE_CHILD", self.encode())
            .env("COBSFILE_CHILD_PATH", &self.path)
            .stdin(if self.barrier {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn child")
    }

    /// The child's work.
    fn run(&self) {
        if self.file_size_limit > 0 {
            let limit = libc::rlimit {
                rlim_cur: self.file_size_limit as libc::rlim_t,
                rlim_max: libc::RLIM_INFINITY,
            };
            // SAFETY: plain system calls on this process, with a valid `rlimit`; ignoring
            // SIGXFSZ makes a write past the limit fail with EFBIG instead of ending the
            // process.
            unsafe {
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &limit), 0);
            }
        }
        let mut log = AppenderBuilder::new()
            .durability(self.durability)
            .block_target(self.block_target)
            .max_delay(Duration::from_millis(5))
            .open(&self.path)
            .expect("child: open");
        let opened = log.opened().clone();
        say(&format!("opened {} {}", opened.exclusive, opened.created));
        if self.barrier {
            let mut line = String::new();
            std::io::stdin().read_line(&mut line).expect("child: stdin");
        }
        let end = self.start.saturating_add(self.count);
        let mut seq = self.start;
        while seq < end {
            let mut last = 0;
            for _ in 0..self.batch.min(end - seq) {
                let len = record_len(self.writer, seq, self.max_len);
                last = log
                    .append(&record(self.writer, seq, len))
                    .expect("child: append");
                seq += 1;
            }
            match self.durability {
                Durability::Fsync => say(&format!("durable {seq}")),
                Durability::Group { .. } => {
                    log.wait_durable(last).expect("child: wait_durable");
                    say(&format!("durable {seq}"));
                }
                _ => {}
            }
        }
        log.close().expect("child: close");
        say("done");
    }
}

/// Writes one line of the child protocol to stdout, at once.
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "@child {line}").expect("child: stdout");
    out.flush().expect("child: stdout");
}

/// A line of the child protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Said {
    Opened { exclusive: bool, created: bool },
    Durable(u64),
    Done,
}

impl Said {
    fn parse(line: &str) -> Option<Said> {
        let (_, said) = line.split_once("@child ")?;
        let words: Vec<&str> = said.split_whitespace().collect();
        Some(match words[..] {
            ["opened", exclusive, created] => Said::Opened {
                exclusive: exclusive == "true",
                created: created == "true",
            },
            ["durable", n] => Said::Durable(n.parse().expect("durable N")),
            ["done"] => Said::Done,
            _ => panic!("unknown child line {line:?}"),
        })
    }
}

/// What the child says, as it says it; the channel closes when its stdout does.
fn listen(stdout: ChildStdout) -> Receiver<Said> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(said) = Said::parse(&line) {
                if tx.send(said).is_err() {
                    break;
                }
            }
        }
    });
    rx
}

/// Does the work of a child process when run as one (see the module documentation).
#[test]
#[ignore = "the child process of the multi-process tests, started by them"]
fn child_append() {
    if let Some(spec) = ChildSpec::from_env() {
        spec.run();
    }
}

/// A setting from the environment, for shorter or longer runs.
fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

// ---------------------------------------------------------------------------------------------
// Files.

/// A path under the temporary directory where no file is, removed at the end.
fn missing_file() -> TempFile {
    let file = TempFile::with_contents(b"");
    fs::remove_file(&file.0).expect("remove");
    file
}

/// The bytes every version 1 file starts with: the leading sync byte and the header block.
fn header() -> Vec<u8> {
    let mut out = vec![0];
    out.extend(raw_block(1, &header_payload(cobsfile::FORMAT_VERSION)));
    out
}

/// The records of `bytes` and the number of header blocks, after checking that nothing is
/// damaged.
fn read_clean(bytes: &[u8]) -> (Vec<Vec<u8>>, u64) {
    let report = ReaderBuilder::new().verify(bytes).expect("verify");
    assert!(report.is_clean(), "damage: {:?}", report.damaged);
    let (records, errors) = ReaderBuilder::new().from_slice(bytes).read_all();
    assert!(errors.is_empty());
    assert_eq!(records.len() as u64, report.records);
    (records, report.blocks.header)
}

fn append_all(log: &mut Appender, records: &[&[u8]]) {
    for record in records {
        log.append(record).expect("append");
    }
}

fn opened(created: bool, exclusive: bool, torn: Option<(u64, u64)>, truncated: bool) -> Opened {
    Opened {
        created,
        exclusive,
        torn: torn.map(|(start, end)| start..end),
        truncated,
        completed: false,
        // A log this crate's appenders made is open: only a new one needs its log block.
        log_block: created,
        header_lost: false,
    }
}

/// Opens `path` with `options` as the only appender on it. Another thread of this process
/// may be starting a child process, which holds a copy of every open file description from
/// its fork until its exec (descriptors close on exec), a shared lock included: until then an
/// appender opening the file is not alone (and, rightly, fences instead of cutting), so the
/// opening is retried.
fn open_alone(options: &AppenderBuilder, path: &std::path::Path) -> Appender {
    for _ in 0..500 {
        let log = options.open(path).expect("open");
        if log.opened().exclusive {
            return log;
        }
        drop(log);
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("{} stayed locked", path.display());
}

/// Waits until `done` holds, for at most `limit`; whether it did.
fn eventually(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}

// ---------------------------------------------------------------------------------------------
// One process.

#[test]
fn a_missing_file_starts_a_log_and_reopening_writes_no_second_header() {
    let file = missing_file();
    let mut log = open_alone(
        &AppenderBuilder::new().durability(Durability::Fsync),
        &file.0,
    );
    assert_eq!(*log.opened(), opened(true, true, None, false));
    append_all(&mut log, &[b"one", b"two"]);
    log.close().expect("close");
    assert!(fs::read(&file.0).unwrap().starts_with(&header()));

    for (i, record) in [b"three", b"four!"].iter().enumerate() {
        let mut log = open_alone(&AppenderBuilder::new(), &file.0);
        assert_eq!(
            *log.opened(),
            opened(false, true, None, false),
            "reopen {i}"
        );
        log.append(*record).expect("append");
        log.close().expect("close");
    }
    let bytes = fs::read(&file.0).unwrap();
    assert!(bytes.starts_with(&header()));
    let (records, headers) = read_clean(&bytes);
    assert_eq!(headers, 1);
    assert_eq!(records, [&b"one"[..], b"two", b"three", b"four!"]);
}

/// An empty file, and one of one or two sync bytes alone (a cobsfile with no blocks, cut
/// before its header: spec 5, vectors `ending-sync-byte`, `ending-sync-bytes`), start a new
/// log. Three zeros are zero-filled bytes, refused.
#[test]
fn an_empty_file_starts_a_new_log() {
    for contents in [&[][..], &[0], &[0, 0]] {
        let file = TempFile::with_contents(contents);
        let mut log = open_alone(&AppenderBuilder::new(), &file.0);
        assert_eq!(*log.opened(), opened(true, true, None, false));
        log.append(b"first").expect("append");
        log.close().expect("close");
        let bytes = fs::read(&file.0).unwrap();
        assert!(bytes.starts_with(&header()));
        assert_eq!(read_clean(&bytes), (vec![b"first".to_vec()], 1));
    }
    let file = TempFile::with_contents(&[0, 0, 0]);
    let e = Appender::open(&file.0).expect_err("zero-filled bytes");
    assert!(e.to_string().contains("not a cobsfile"), "{e}");
}

#[test]
fn a_file_that_is_not_a_cobsfile_is_refused_and_left_alone() {
    for contents in [
        &b"{\"event\":1}\n{\"event\":2}\n"[..],
        &[0; 64],
        &header()[..12],
        &header()[1..],
    ] {
        let file = TempFile::with_contents(contents);
        let e = Appender::open(&file.0).expect_err("not a cobsfile");
        assert!(e.to_string().contains("offset 0"), "{e}");
        assert_eq!(fs::read(&file.0).unwrap(), contents, "the file was changed");
    }
}

#[test]
fn a_newer_format_version_is_refused() {
    let version = cobsfile::FORMAT_VERSION + 1;
    let mut contents = vec![0];
    contents.extend(raw_block(1, &header_payload(version)));
    contents.extend(raw_block(3, &common::data_payload(&[b"from the future"])));
    let file = TempFile::with_contents(&contents);
    match Appender::open(&file.0) {
        Err(Error::UnsupportedVersion {
            offset, version: v, ..
        }) => assert_eq!((offset, v), (0, version)),
        other => panic!("expected UnsupportedVersion, got {other:?}"),
    }
    assert_eq!(fs::read(&file.0).unwrap(), contents);
}

/// A newer version's header after version 1 blocks (files concatenated) is refused too:
/// readers stop there, so records appended after it could not be read (found by fuzzing).
#[test]
fn a_newer_format_version_further_on_is_refused() {
    let version = cobsfile::FORMAT_VERSION + 1;
    let mut contents = header();
    contents.extend(raw_block(3, &common::data_payload(&[b"today"])));
    contents.push(0);
    contents.extend(raw_block(1, &header_payload(version)));
    contents.extend(raw_block(3, &common::data_payload(&[b"from the future"])));
    let file = TempFile::with_contents(&contents);
    match Appender::open(&file.0) {
        Err(Error::UnsupportedVersion { version: v, .. }) => assert_eq!(v, version),
        other => panic!("expected UnsupportedVersion, got {other:?}"),
    }
    assert_eq!(fs::read(&file.0).unwrap(), contents);
}

/// A log of `before` flushed in blocks of their own, and its length; then the same log with
/// one more block holding `last`, as bytes.
fn log_and_one_more_block(path: &Path, before: &[&[u8]], last: &[u8]) -> (u64, Vec<u8>) {
    let options = AppenderBuilder::new().durability(Durability::Flush);
    let mut log = options.open(path).expect("open");
    append_all(&mut log, before);
    log.close().expect("close");
    let clean = fs::metadata(path).unwrap().len();
    let mut log = options.open(path).expect("reopen");
    log.append(last).expect("append");
    log.close().expect("close");
    (clean, fs::read(path).unwrap())
}

const BEFORE: [&[u8]; 3] = [b"alpha", b"", b"gamma \x00 with a zero"];

#[test]
fn a_torn_tail_is_cut_off_by_an_appender_alone_on_the_file() {
    let file = missing_file();
    let last = record(7, 0, 300);
    let (clean, full) = log_and_one_more_block(&file.0, &BEFORE, &last);
    // Every way the last block's write could have stopped short, from its fence byte alone to
    // all but its closing sync byte.
    for cut in clean + 1..full.len() as u64 {
        fs::write(&file.0, &full[..cut as usize]).unwrap();
        let mut log = open_alone(
            &AppenderBuilder::new().durability(Durability::Flush),
            &file.0,
        );
        // A block that lacks only its closing sync byte gets it, and is kept.
        let whole = cut == full.len() as u64 - 1;
        let mut expected = opened(false, true, Some((clean, cut)), !whole);
        expected.completed = whole;
        assert_eq!(*log.opened(), expected, "cut at {cut}");
        let kept = if whole { full.len() as u64 } else { clean };
        assert_eq!(fs::metadata(&file.0).unwrap().len(), kept);
        log.append(b"after").expect("append");
        log.close().expect("close");
        let bytes = fs::read(&file.0).unwrap();
        assert_eq!(bytes[..kept as usize], full[..kept as usize]);
        let (records, headers) = read_clean(&bytes);
        assert_eq!(headers, 1);
        let mut written = BEFORE.to_vec();
        if whole {
            written.push(&last);
        }
        written.push(b"after");
        assert_eq!(records, written, "cut at {cut}");
    }
}

#[test]
fn a_torn_tail_is_fenced_off_while_another_appender_holds_the_file() {
    let file = missing_file();
    let last = record(7, 0, 300);
    let (clean, full) = log_and_one_more_block(&file.0, &BEFORE, &last);
    let options = AppenderBuilder::new().durability(Durability::Flush);
    for cut in clean + 1..full.len() as u64 {
        fs::write(&file.0, &full[..clean as usize]).unwrap();
        let mut holder = open_alone(&options, &file.0);
        assert_eq!(*holder.opened(), opened(false, true, None, false));
        // A third writer's block, torn: its process died in the middle of the write.
        OpenOptions::new()
            .append(true)
            .open(&file.0)
            .unwrap()
            .write_all(&full[clean as usize..cut as usize])
            .unwrap();

        let mut log = options.open(&file.0).expect("open");
        assert_eq!(
            *log.opened(),
            opened(false, false, Some((clean, cut)), false),
            "cut at {cut}"
        );
        assert_eq!(fs::metadata(&file.0).unwrap().len(), cut);
        log.append(b"after").expect("append");
        holder.append(b"holder").expect("append");
        log.close().expect("close");
        holder.close().expect("close");

        let bytes = fs::read(&file.0).unwrap();
        assert_eq!(bytes[..cut as usize], full[..cut as usize]);
        let report = ReaderBuilder::new().verify(&bytes).expect("verify");
        // The torn range without its first byte, the torn block's sync byte, which readers
        // take for padding; when that byte is all there is, it stands between two sync bytes,
        // a run of three zeros, and is damage itself. A block that lacks only its closing
        // sync byte gets it from the fence and comes back whole.
        let damage: Vec<_> = report.damaged.iter().map(|d| d.range.clone()).collect();
        let whole = cut == full.len() as u64 - 1;
        let expected = match cut - clean {
            _ if whole => None,
            1 => Some(clean..cut),
            _ => Some(clean + 1..cut),
        };
        assert_eq!(damage, Vec::from_iter(expected), "cut at {cut}");
        let (records, errors) = ReaderBuilder::new().from_slice(&bytes).read_all();
        assert_eq!(errors.len(), damage.len());
        let mut written = BEFORE.to_vec();
        if whole {
            written.push(&last);
        }
        written.extend([&b"after"[..], b"holder"]);
        assert_eq!(records, written, "cut at {cut}");
        assert_eq!(report.blocks.header, 1);
    }
}

#[test]
fn a_quiet_log_reaches_the_file_within_max_delay() {
    let file = missing_file();
    let mut log = AppenderBuilder::new()
        .max_delay(Duration::from_millis(20))
        .open(&file.0)
        .expect("open");
    let len = fs::metadata(&file.0).unwrap().len();
    log.append(b"quiet").expect("append");
    assert!(
        eventually(Duration::from_secs(5), || fs::metadata(&file.0)
            .unwrap()
            .len()
            > len),
        "the record did not reach the file without a flush"
    );
    // The appender is still open: the block was written by its timer, not by closing.
    let (records, _) = read_clean(&fs::read(&file.0).unwrap());
    assert_eq!(records, [b"quiet"]);
    assert_eq!(log.durable(), 0, "Durability::None syncs nothing by itself");
    log.sync().expect("sync");
    assert_eq!(log.durable(), 1);
    log.close().expect("close");
}

#[test]
fn group_commit_makes_every_record_durable() {
    let file = missing_file();
    let mut log = AppenderBuilder::new()
        .durability(Durability::Group {
            interval: Duration::from_millis(5),
            bytes: 1 << 20,
        })
        .block_target(4096)
        .open(&file.0)
        .expect("open");
    for seq in 0..500 {
        log.append(&record(1, seq, record_len(1, seq, 1000)))
            .expect("append");
    }
    assert!(
        eventually(Duration::from_secs(5), || log.durable() == 500),
        "durable() stayed at {} of 500",
        log.durable()
    );
    let mut last = 0;
    for seq in 500..1000 {
        last = log
            .append(&record(1, seq, record_len(1, seq, 1000)))
            .expect("append");
    }
    assert_eq!(last, 999);
    log.wait_durable(last).expect("wait_durable");
    assert_eq!(log.durable(), 1000);
    // What `durable()` covers is in the file (read while the appender is open).
    let (records, _) = read_clean(&fs::read(&file.0).unwrap());
    assert_eq!(records.len(), 1000);
    for (seq, r) in records.iter().enumerate() {
        assert_eq!(check_record(r), (1, seq as u64));
    }
    log.close().expect("close");
}

/// A record that `flush` (or `write_metadata`) wrote before its commit is still committed:
/// the group-commit timer used to wait only for records not yet written, so `wait_durable`
/// on a flushed record waited forever (found by `tests/power_loss.rs`, mode group, seed
/// 17759258367718171878).
#[test]
fn group_commit_syncs_records_flush_wrote() {
    let file = missing_file();
    let mut log = AppenderBuilder::new()
        .durability(Durability::group(Duration::from_millis(5)))
        .open(&file.0)
        .expect("open");
    let seq = log.append(b"flushed").expect("append");
    log.flush().expect("flush");
    assert!(
        eventually(Duration::from_secs(5), || log.durable() == 1),
        "a flushed record never became durable"
    );
    log.wait_durable(seq).expect("wait_durable");
    log.write_metadata([("k", b"v")]).expect("metadata");
    let seq = log.append(b"metadata wrote it").expect("append");
    log.write_metadata([("k", b"w")]).expect("metadata");
    assert!(
        eventually(Duration::from_secs(5), || log.durable() == 2),
        "a record written with metadata never became durable"
    );
    log.wait_durable(seq).expect("wait_durable");
    log.close().expect("close");
}

/// A sync asked for while the group-commit timer syncs waits for that sync's outcome. A
/// failed `fdatasync` reports its error once (Linux marks the pages it could not write clean),
/// so a second sync that started meanwhile could succeed and report records durable that
/// never reached the disk.
#[test]
fn a_sync_during_a_failed_group_commit_reports_the_failure() {
    let fs = SimFs::new(7);
    let mut log = AppenderBuilder::new()
        .durability(Durability::group(Duration::from_millis(1)))
        .open_in(&fs, "/sim/log")
        .expect("open");
    log.sync().expect("sync");
    fs.hold_syncs(true);
    fs.fail_next_sync(std::io::ErrorKind::Other);
    log.append(b"lost").expect("append");
    // The timer is in its sync, which fails.
    fs.wait_for_held_sync();
    let release = {
        let fs = fs.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            fs.hold_syncs(false);
        })
    };
    let synced = log.sync();
    release.join().unwrap();
    assert!(
        matches!(synced, Err(Error::AppenderBroken { .. })),
        "{synced:?}"
    );
    assert_eq!(log.durable(), 0);
}

#[test]
fn group_commit_starts_early_once_enough_bytes_wait() {
    let file = missing_file();
    let mut log = AppenderBuilder::new()
        .durability(Durability::Group {
            // Longer than the test may take: only the byte bound can start the commit.
            interval: Duration::from_secs(3600),
            bytes: 10_000,
        })
        .open(&file.0)
        .expect("open");
    // The 10th record brings the bytes waiting to 10,000: a commit of at least the first
    // 10 starts. The next 9 stay short of the bound and wait for the interval (or `close`).
    for seq in 0..19 {
        log.append(&record(2, seq, 1000)).expect("append");
    }
    log.wait_durable(9).expect("wait_durable");
    assert!(log.durable() >= 10);
    log.close().expect("close");
}

// ---------------------------------------------------------------------------------------------
// Several processes.

/// `COBSFILE_SHARED_RECORDS` records per writer (default 20,000) from 4 processes started
/// together on one file: the file reads without damage; every record comes back once, whole,
/// in its writer's order; every block holds one writer's records.
fn shared_appending(durability: Durability, block_target: usize) {
    const WRITERS: u8 = 4;
    let count = env_or("COBSFILE_SHARED_RECORDS", 20_000);
    let file = missing_file();
    let mut children: Vec<(Child, Receiver<Said>)> = (0..WRITERS)
        .map(|writer| {
            let mut spec = ChildSpec::new(&file.0, writer, durability);
            spec.count = count;
            spec.block_target = block_target;
            spec.barrier = true;
            let mut child = spec.spawn();
            let said = listen(child.stdout.take().unwrap());
            (child, said)
        })
        .collect();

    // Every child holds the file open before any appends.
    let mut exclusive = 0;
    let mut created = 0;
    for (_, said) in &children {
        match said.recv_timeout(Duration::from_secs(120)) {
            Ok(Said::Opened {
                exclusive: e,
                created: c,
            }) => {
                exclusive += u32::from(e);
                created += u32::from(c);
            }
            other => panic!("a child did not open the log: {other:?}"),
        }
    }
    // The first to open created the file; it held it alone while it wrote the header and
    // the log block.
    assert_eq!((exclusive, created), (1, 1));
    for (child, _) in &mut children {
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"go\n").unwrap();
    }
    for (mut child, said) in children {
        let status = child.wait().unwrap();
        assert!(status.success(), "a child failed: {status}");
        assert_eq!(said.iter().last(), Some(Said::Done));
    }

    let bytes = fs::read(&file.0).unwrap();
    let report = ReaderBuilder::new().verify(&bytes).expect("verify");
    assert!(report.is_clean(), "damage: {:?}", report.damaged);
    assert_eq!(report.blocks.header, 1);
    assert_eq!(report.records, u64::from(WRITERS) * count);

    let mut next = vec![0u64; WRITERS as usize];
    let (mut data_blocks, mut switches, mut previous) = (0, 0, None);
    let mut reader = ReaderBuilder::new().from_slice(&bytes);
    while let Some(block) = reader.next_block() {
        let block = block.expect("intact");
        match block.info().block_type {
            BlockType::Header => assert_eq!(block.info().offset, 0),
            // The creator starts the log with it, right after the header; the others find
            // the log open and write none.
            BlockType::Log => assert_eq!(block.info().offset, 18),
            BlockType::Data => {
                let mut writers = block.records().map(|r| {
                    let (writer, seq) = check_record(r);
                    assert_eq!(seq, next[writer as usize], "writer {writer} out of order");
                    next[writer as usize] += 1;
                    writer
                });
                let writer = writers.next().expect("a data block holds records");
                assert!(writers.all(|w| w == writer), "a block mixes writers");
                data_blocks += 1;
                switches += u32::from(previous.is_some_and(|p| p != writer));
                previous = Some(writer);
            }
            other => panic!("a {other:?} block in an appended log"),
        }
    }
    assert_eq!(next, vec![count; WRITERS as usize]);
    eprintln!(
        "{durability:?}: {} bytes, {data_blocks} data blocks, the writer changed {switches} times",
        bytes.len()
    );
}

#[test]
fn four_processes_append_to_one_file_unsynced() {
    shared_appending(Durability::None, 4096);
}

#[test]
fn four_processes_append_to_one_file_a_block_per_record() {
    shared_appending(Durability::Flush, 4096);
}

// ---------------------------------------------------------------------------------------------
// A writer killed again and again.

/// A child appends to one file and is killed with SIGKILL at a random moment,
/// `COBSFILE_CRASH_KILLS` times (default 50). After each kill, reopening succeeds and cuts the
/// torn tail, if any (the only damage the file may have); every record the child reported
/// durable is there, each once, in order, as written; at most the records of the block in
/// flight (and, with group commit, those not yet committed) are missing; and the next child
/// goes on appending from there.
#[test]
fn a_writer_killed_at_random_moments_loses_at_most_its_last_block() {
    let kills = env_or("COBSFILE_CRASH_KILLS", 50);
    let file = missing_file();
    let mut rng = Rng::new(0xC2A5_4000_0000_0005);
    // The writer (round) of each record in the file so far.
    let mut owners: Vec<u8> = Vec::new();
    // The file after the last reopen.
    let mut clean = Vec::new();
    let (mut torn_tails, mut reported) = (0, 0);
    for round in 0..kills {
        let writer = round as u8;
        let group = round % 3 == 2;
        let mut spec = ChildSpec::new(
            &file.0,
            writer,
            if group {
                Durability::Group {
                    interval: Duration::from_millis(2),
                    bytes: 1 << 20,
                }
            } else {
                Durability::Fsync
            },
        );
        spec.start = owners.len() as u64;
        spec.batch = if group { 1 + rng.below(16) } else { 1 };
        // Some large records, whose blocks span pages: a write the kill can tear.
        spec.max_len = if round % 2 == 0 { 4096 } else { 256 << 10 };
        let mut child = spec.spawn();
        let said = listen(child.stdout.take().unwrap());
        let mut durable = spec.start;
        if round % 2 == 1 {
            // Half the rounds let the child report something durable first.
            match said.recv_timeout(Duration::from_secs(120)) {
                // Not asserting `exclusive`: a child this process starts for another test
                // may hold the lock for a moment (see `open_alone`).
                Ok(Said::Opened { created, .. }) => assert_eq!(created, clean.is_empty()),
                other => panic!("round {round}: the child did not open the log: {other:?}"),
            }
            match said.recv_timeout(Duration::from_secs(120)) {
                Ok(Said::Durable(n)) => durable = n,
                other => panic!("round {round}: the child reported nothing: {other:?}"),
            }
        }
        std::thread::sleep(Duration::from_micros(1000 + rng.below(29_000)));
        child.kill().expect("kill");
        let status = child.wait().unwrap();
        assert!(
            !status.success() && status.code().is_none(),
            "round {round}: the child ended by itself: {status}"
        );
        for s in said.iter() {
            match s {
                Said::Durable(n) => durable = durable.max(n),
                Said::Opened { .. } => {}
                Said::Done => panic!("round {round}: the child finished"),
            }
        }
        reported += durable - spec.start;

        // The file as the killed child left it: only its end may be damaged.
        let before = fs::read(&file.0).unwrap_or_default();
        assert!(before.starts_with(&clean), "round {round}: the log changed");
        let report = ReaderBuilder::new().verify(&before).expect("verify");
        assert!(
            report
                .damaged
                .iter()
                .all(|d| d.range.end == before.len() as u64),
            "round {round}: damage before the end: {:?}",
            report.damaged
        );

        let log = open_alone(&AppenderBuilder::new(), &file.0);
        let o = log.opened().clone();
        log.close().expect("close");
        assert_eq!(o.created, before.is_empty(), "round {round}: {o:?}");
        assert!(o.exclusive);
        assert_eq!(o.truncated || o.completed, o.torn.is_some());
        assert!(!(o.truncated && o.completed));
        if let Some(torn) = &o.torn {
            torn_tails += 1;
            assert_eq!(torn.end, before.len() as u64);
            for d in &report.damaged {
                assert!(torn.start < d.range.start, "round {round}: {torn:?} {d:?}");
            }
        } else {
            assert!(report.is_clean(), "round {round}: damage, no torn tail");
        }

        let after = fs::read(&file.0).unwrap();
        if o.completed {
            // A block cut just short of its closing sync byte got it.
            assert_eq!(after[..], [&before[..], &[0]].concat(), "round {round}");
        } else {
            let cut = o.torn.map_or(before.len(), |t| t.start as usize);
            assert_eq!(after[..], before[..cut], "round {round}");
        }
        assert!(after.starts_with(&header()));
        let (records, headers) = read_clean(&after);
        assert_eq!(headers, 1);
        for (seq, r) in records.iter().enumerate() {
            let (w, s) = check_record(r);
            assert_eq!(s, seq as u64, "round {round}: records out of order");
            match owners.get(seq) {
                Some(&owner) => assert_eq!(w, owner, "round {round}: record {seq} changed"),
                None => assert_eq!(w, writer, "round {round}: record {seq} not from this child"),
            }
        }
        let n = records.len() as u64;
        assert!(
            n >= durable,
            "round {round}: {n} records, {durable} reported durable"
        );
        assert!(
            n <= durable + spec.batch,
            "round {round}: {n} records, {durable} reported durable, batches of {}",
            spec.batch
        );
        owners.resize(records.len(), writer);
        clean = after;
    }
    // The log goes on after the last kill.
    let mut log = Appender::open(&file.0).expect("reopen");
    let seq = owners.len() as u64;
    log.append(&record(255, seq, 100)).expect("append");
    log.close().expect("close");
    let (records, _) = read_clean(&fs::read(&file.0).unwrap());
    assert_eq!(records.len() as u64, seq + 1);
    eprintln!(
        "{kills} kills: {seq} records kept ({reported} reported durable), {torn_tails} torn tails cut"
    );
}

/// A group commit whose write fails (here `EFBIG`, past `RLIMIT_FSIZE`; a full disk or an I/O
/// error alike) must not report the records of the lost block durable.
#[test]
fn a_failed_group_commit_reports_nothing_durable() {
    let file = missing_file();
    let mut spec = ChildSpec::new(
        &file.0,
        1,
        Durability::Group {
            interval: Duration::from_millis(5),
            bytes: u64::MAX,
        },
    );
    // The header fits; the first block, 10 records of 9 bytes and more, does not.
    spec.file_size_limit = 100;
    spec.count = 10;
    spec.batch = 10;
    spec.max_len = 300;
    let mut child = spec.spawn();
    let said = listen(child.stdout.take().unwrap());
    // The child may fail (its appender reports the error); it must not claim durability.
    let _ = child.wait().unwrap();
    let durable = said
        .iter()
        .filter_map(|s| match s {
            Said::Durable(n) => Some(n),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let bytes = fs::read(&file.0).unwrap();
    let (records, _) = ReaderBuilder::new().from_slice(&bytes).read_all();
    assert!(
        records.len() as u64 >= durable,
        "{durable} records reported durable, {} in the file",
        records.len()
    );
}

// ---------------------------------------------------------------------------------------------
// Log blocks (spec 8.7, 11.1 rule 6).

/// What an appender opening a file with `before` in it does: whether it writes a log block,
/// and that the file is an open log once it has appended a record (and stays one, with no
/// second log block, when reopened).
fn appends_to(before: &[u8]) -> bool {
    let file = TempFile::with_contents(before);
    let mut log = open_alone(
        &AppenderBuilder::new().durability(Durability::Flush),
        &file.0,
    );
    let log_block = log.opened().log_block;
    log.append(b"appended").expect("append");
    log.close().expect("close");
    let bytes = fs::read(&file.0).unwrap();
    let report = ReaderBuilder::new().verify(&bytes).expect("verify");
    assert_eq!(report.ending, Ending::Open, "{before:?}");
    assert!(report.is_clean(), "{:?}", report.damaged);
    let log = open_alone(&AppenderBuilder::new(), &file.0);
    assert!(!log.opened().log_block, "a second log block");
    log.close().expect("close");
    assert_eq!(
        fs::read(&file.0).unwrap(),
        bytes,
        "reopening an open log changed it"
    );
    log_block
}

fn written(records: &[&[u8]], index: bool, finish: bool) -> Vec<u8> {
    let mut file = Vec::new();
    let mut writer = WriterBuilder::new()
        .index(index)
        .build(&mut file)
        .expect("build");
    for r in records {
        writer.write_record(r).expect("write");
    }
    if finish {
        writer.finish().expect("finish");
    } else {
        drop(writer);
    }
    file
}

#[test]
fn an_appender_makes_any_file_an_open_log_with_one_log_block() {
    // New: the header and the log block, in one write.
    let mut start = header();
    start.extend(raw_block(7, b""));
    let file = missing_file();
    let log = open_alone(&AppenderBuilder::new(), &file.0);
    assert!(log.opened().created && log.opened().log_block);
    log.close().expect("close");
    assert_eq!(
        fs::read(&file.0).unwrap(),
        start,
        "a new log, nothing appended yet"
    );
    assert!(appends_to(b""));

    // Finished files, with and without an index; an older writer's finished file (its index
    // last); an unfinished one; an older log (header and data, no log block); a header alone.
    let finished = written(&[b"one", b"two"], true, true);
    assert!(appends_to(&finished));
    assert!(appends_to(&written(&[b"one"], false, true)));
    let older = &finished[..finished.len() - 9];
    assert_eq!(
        ReaderBuilder::new().verify(older).unwrap().ending,
        Ending::Finished
    );
    assert!(appends_to(older));
    assert!(appends_to(&written(&[b"one"], false, false)));
    assert!(appends_to(&header()));

    // Already an open log: nothing to add, whatever follows its log block.
    assert!(!appends_to(&start));
    let mut open = start.clone();
    open.extend(raw_block(3, &common::data_payload(&[b"one"])));
    open.extend(raw_block(-1, b"application"));
    assert!(!appends_to(&open));

    // A finished file with a torn tail: cut, then a log block.
    let mut torn = finished.clone();
    torn.extend_from_slice(&[0x06, 0x40, 0x01]);
    assert!(appends_to(&torn));

    // Concatenated files: the last file decides (a header starts a file, spec 9.5.1).
    assert!(appends_to(&[&open[..], &finished[..]].concat()));
    assert!(!appends_to(&[&finished[..], &open[..]].concat()));
    // A log block before another file's header does not make that file an open log.
    assert!(appends_to(
        &[&open[..], &written(&[b"x"], false, false)[..]].concat()
    ));
}
