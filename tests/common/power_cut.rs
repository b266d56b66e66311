//! A power-cut scenario on the simulated file system (`cobsfile::fs::SimFs`): appenders, one
//! or several at once, each with its durability, append to a log, sync, wait, close, reopen,
//! and rotate it (rename it away and reopen a new one), with faults or without; then the power
//! is cut and every crash state is checked.
//!
//! Checked at every step: each record an appender reported durable is in what a power cut
//! could not take (the group-commit watermark never runs ahead of a sync). Checked on every
//! crash state: the durable records are all read back, intact, once, each appender's in its
//! order; no record that was never appended appears; recovery keeps the same records; a fresh
//! appender reopens the log, cutting no intact block, and appends after what is there.
//!
//! Every choice comes from a [`Choices`]: seeded in `tests/power_loss.rs`, the fuzzer's bytes
//! in `fuzz/harness.rs`. It depends only on the standard library and the crate.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use cobsfile::fs::{Faults, SimFs};
use cobsfile::{Appender, AppenderBuilder, Durability, Ending, Error, ReaderBuilder};

/// The log.
pub const PATH: &str = "/sim/log.cobs";
const DIR: &str = "/sim";

/// Where the choices of a case come from.
pub trait Choices {
    /// A number in `0..n` (`n` > 0).
    fn below(&mut self, n: u64) -> u64;
}

/// Record `i` of a run: its number, its length, then bytes derived from both, so a record read
/// back tells which it is and whether it is intact.
pub fn record(i: u64, len: usize) -> Vec<u8> {
    let mut r = i.to_le_bytes().to_vec();
    r.extend_from_slice(&(len as u32).to_le_bytes());
    r.extend((12..len).map(|k| (i as usize * 31 + k * 7) as u8));
    r
}

/// The event time of record `i`, if it was appended with one (the records of every other
/// batch are): a little out of order, some before 1970.
pub fn time_of(i: u64) -> i64 {
    (i as i64 - 50) * 1_000_000 + (i as i64 * 7919) % 5_000
}

/// The number of an intact record.
pub fn parse(r: &[u8]) -> Option<u64> {
    let i = u64::from_le_bytes(r.get(..8)?.try_into().ok()?);
    let len = u32::from_le_bytes(r.get(8..12)?.try_into().ok()?) as usize;
    (r.len() == len && record(i, len) == r).then_some(i)
}

/// What runs: one appender at a time with one durability, or several at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    None,
    Flush,
    Fsync,
    Group,
    FsyncFaults,
    GroupFaults,
    /// Up to 3 appenders open at once, each with a durability of its own.
    Shared,
    SharedFaults,
}

impl Mode {
    pub const ALL: [Mode; 8] = [
        Mode::None,
        Mode::Flush,
        Mode::Fsync,
        Mode::Group,
        Mode::FsyncFaults,
        Mode::GroupFaults,
        Mode::Shared,
        Mode::SharedFaults,
    ];

    /// The name `POWER_LOSS_MODE` takes.
    pub fn name(self) -> &'static str {
        match self {
            Mode::None => "none",
            Mode::Flush => "flush",
            Mode::Fsync => "fsync",
            Mode::Group => "group",
            Mode::FsyncFaults => "fsync-faults",
            Mode::GroupFaults => "group-faults",
            Mode::Shared => "shared",
            Mode::SharedFaults => "shared-faults",
        }
    }

    pub fn parse(name: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.name() == name)
    }

    fn faults(self) -> bool {
        matches!(
            self,
            Mode::FsyncFaults | Mode::GroupFaults | Mode::SharedFaults
        )
    }

    fn writers(self) -> u64 {
        match self {
            Mode::Shared | Mode::SharedFaults => 3,
            _ => 1,
        }
    }

    /// The durability of a writer's appenders.
    fn durability(self, choices: &mut dyn Choices) -> Durability {
        let group = Durability::group(Duration::from_millis(1));
        match self {
            Mode::None => Durability::None,
            Mode::Flush => Durability::Flush,
            Mode::Fsync | Mode::FsyncFaults => Durability::Fsync,
            Mode::Group | Mode::GroupFaults => group,
            Mode::Shared | Mode::SharedFaults => [
                Durability::None,
                Durability::Flush,
                Durability::Fsync,
                group,
            ][choices.below(4) as usize],
        }
    }
}

/// A writer: a process that appends to the log with one durability, opening an appender when
/// it needs one.
struct Writer {
    durability: Durability,
    log: Option<Appender>,
    /// The record numbers of the open appender's sequence numbers.
    seqs: Vec<u64>,
}

/// What a run did before the cut.
#[derive(Default)]
pub struct Run {
    /// Every record handed to an appender, by number: its length and writer (some of a failed
    /// batch may never have reached the file).
    appended: BTreeMap<u64, (usize, usize)>,
    /// Records reported durable.
    durable: BTreeSet<u64>,
    /// Records appended with their times ([`time_of`]).
    timed: BTreeSet<u64>,
    next: u64,
    /// The log's names, oldest first: rotated ones, then [`PATH`].
    files: Vec<PathBuf>,
}

impl Run {
    fn reported_durable(&mut self, writer: &Writer, upto_seq: u64) {
        self.durable
            .extend(writer.seqs.iter().take(upto_seq as usize).copied());
    }

    /// Reads the records of `bytes`, checking that each is one appended, intact, not in
    /// `seen` yet, and later than what `last` says its writer's last record read was.
    /// A record read with a time has its own; a durable record appended with one has it
    /// (its time block went to the file in the same write as its data block).
    fn read(&self, bytes: &[u8], seen: &mut BTreeSet<u64>, last: &mut BTreeMap<usize, u64>) {
        let mut reader = ReaderBuilder::new().from_slice(bytes);
        let mut records = Vec::new();
        while let Some(item) = reader.next_record() {
            if let Ok(r) = item {
                let r = r.to_vec();
                records.push((r, reader.record_time()));
            }
        }
        for (r, time) in &records {
            let i = parse(r).unwrap_or_else(|| panic!("a record never appended: {r:02x?}"));
            match time {
                Some(t) => assert!(
                    self.timed.contains(&i) && *t == time_of(i),
                    "record {i} read with time {t}"
                ),
                None => assert!(
                    !(self.timed.contains(&i) && self.durable.contains(&i)),
                    "durable record {i} read without its time"
                ),
            }
            let Some(&(_, writer)) = self.appended.get(&i) else {
                panic!("record {i} was never appended");
            };
            assert!(seen.insert(i), "record {i} read twice");
            if let Some(&before) = last.get(&writer) {
                assert!(before < i, "record {i} after {before} of the same writer");
            }
            last.insert(writer, i);
        }
    }

    /// The records of the log's files as `image` gives them, oldest file first, checked as
    /// [`read`](Self::read) does.
    fn read_all(&self, image: impl Fn(&Path) -> Option<Vec<u8>>) -> BTreeSet<u64> {
        let (mut seen, mut last) = (BTreeSet::new(), BTreeMap::new());
        for path in &self.files {
            if let Some(bytes) = image(path) {
                self.read(&bytes, &mut seen, &mut last);
            }
        }
        seen
    }
}

fn open(fs: &SimFs, durability: Durability, block_target: usize) -> cobsfile::Result<Appender> {
    AppenderBuilder::new()
        .durability(durability)
        .max_delay(Duration::from_secs(3600))
        .block_target(block_target)
        .open_in(fs, PATH)
}

/// Closes `writer`'s appender, if open: what a closing sync covered is durable.
fn close(run: &mut Run, writer: &mut Writer) -> cobsfile::Result<()> {
    let Some(app) = writer.log.take() else {
        return Ok(());
    };
    let result = app.close();
    if result.is_ok()
        && matches!(
            writer.durability,
            Durability::Fsync | Durability::Group { .. }
        )
    {
        run.reported_durable(writer, writer.seqs.len() as u64);
    }
    writer.seqs.clear();
    result
}

/// Runs one case in `mode`: operations, each checked, then a cut, and the checks of
/// [`check`] on the crash state each of `crash_seeds` chooses. Returns the crash states
/// checked.
///
/// With one appender at a time, the choices are drawn as they were before several appenders
/// and rotation came, so that the seeds of cases found then replay the same case.
pub fn run_case(mode: Mode, choices: &mut dyn Choices, crash_seeds: &[u64]) -> u64 {
    let fs = SimFs::new(choices.below(u64::MAX));
    if mode.faults() {
        fs.set_faults(Faults {
            write_error: 10,
            short_write: 50,
            sync_error: 30,
        });
    }
    let block_target = [64, 512, 4096][choices.below(3) as usize];
    let ops = 1 + choices.below(40);
    let shared = mode.writers() > 1;
    let mut run = Run {
        files: vec![PathBuf::from(PATH)],
        ..Run::default()
    };
    let count = if shared {
        1 + choices.below(mode.writers())
    } else {
        1
    };
    let mut writers: Vec<Writer> = (0..count)
        .map(|_| Writer {
            durability: mode.durability(choices),
            log: None,
            seqs: Vec::new(),
        })
        .collect();
    for _ in 0..ops {
        let w = match shared {
            true => choices.below(writers.len() as u64) as usize,
            false => 0,
        };
        if shared && choices.below(20) == 0 {
            // Rotation: the log renamed away; every writer closes its appender and opens the
            // new log when it next appends.
            let to = PathBuf::from(format!("{PATH}.{}", run.files.len()));
            match fs.rename(PATH, &to) {
                Ok(()) => {
                    let at = run.files.len() - 1;
                    run.files.insert(at, to);
                }
                Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{e}"),
            }
            for writer in &mut writers {
                if let Err(e) = close(&mut run, writer) {
                    assert!(mode.faults(), "{e}");
                }
            }
            continue;
        }
        let writer = &mut writers[w];
        let Some(app) = writer.log.as_mut() else {
            match open(&fs, writer.durability, block_target) {
                Ok(app) => writer.log = Some(app),
                Err(e) => assert!(mode.faults(), "open failed: {e}"),
            }
            continue;
        };
        let outcome = match choices.below(10) {
            0..=4 => {
                let n = 1 + choices.below(4);
                let records: Vec<Vec<u8>> = (0..n)
                    .map(|_| {
                        let max = if choices.below(8) == 0 { 3000 } else { 300 };
                        let len = 12 + choices.below(max) as usize;
                        let i = run.next;
                        run.next += 1;
                        run.appended.insert(i, (len, w));
                        writer.seqs.push(i);
                        record(i, len)
                    })
                    .collect();
                // Every other batch with times, by the number of its first record (so that
                // the choices drawn stay those of runs before times existed).
                let first = run.next - n;
                if first.is_multiple_of(2) {
                    run.timed.extend(first..run.next);
                    let timed = (first..)
                        .zip(&records)
                        .map(|(i, r)| (r.as_slice(), time_of(i)));
                    app.append_batch_at(timed).map(drop)
                } else {
                    app.append_batch(records.iter().map(Vec::as_slice))
                        .map(drop)
                }
            }
            5 => app.sync().map(drop),
            6 => match writer.seqs.len() as u64 {
                0 => Ok(()),
                appended => {
                    let seq = choices.below(appended);
                    let waited = app.wait_durable(seq);
                    if waited.is_ok() {
                        run.reported_durable(writer, seq + 1);
                    }
                    waited
                }
            },
            7 => app.flush(),
            8 => close(&mut run, writer),
            _ => Ok(()),
        };
        if let Some(app) = &writer.log {
            let durable = app.durable();
            run.reported_durable(writer, durable);
        }
        if let Err(e) = outcome {
            assert!(mode.faults(), "{e}");
            if let Some(mut app) = writer.log.take() {
                // A failed write or sync makes nothing more durable, ever. A group commit's
                // sync under way when a write failed may still succeed (it covers records
                // written before): `sync` waits for it, and nothing changes after.
                assert!(matches!(app.sync(), Err(Error::AppenderBroken { .. })));
                let durable = app.durable();
                run.reported_durable(writer, durable);
                assert!(matches!(app.sync(), Err(Error::AppenderBroken { .. })));
                assert_eq!(app.durable(), durable);
                writer.seqs.clear();
            }
        }
        // The durable watermark never runs ahead of what a sync covered.
        // In one look: a group commit may sync the directory meanwhile, renaming files.
        let synced = fs.synced();
        let synced = run.read_all(|path| synced.get(path).cloned());
        if let Some(lost) = run.durable.difference(&synced).next() {
            panic!("record {lost} reported durable before a sync covered it");
        }
    }
    for writer in &writers {
        if let Some(app) = &writer.log {
            run.reported_durable(writer, app.durable());
        }
    }
    for &seed in crash_seeds {
        check(&fs.crashed(seed), &run);
    }
    drop(writers);
    crash_seeds.len() as u64
}

/// The 19 bytes every file starts with: the leading sync byte and the header block.
fn file_start() -> Vec<u8> {
    let fs = SimFs::new(0);
    open(&fs, Durability::None, 4096).unwrap().close().unwrap();
    fs.read(PATH).unwrap()[..19].to_vec()
}

/// The checks on one crash state.
fn check(crashed: &SimFs, run: &Run) {
    for path in crashed.list(DIR) {
        assert!(run.files.contains(&path), "{} appeared", path.display());
    }
    let read = run.read_all(|path| crashed.read(path));
    if let Some(lost) = run.durable.difference(&read).next() {
        panic!("durable record {lost} lost; read {read:?}");
    }
    // Recovery copies every intact block: the same records.
    let recovered = |path: &Path| {
        let bytes = crashed.read(path)?;
        let mut out = Vec::new();
        let recovery = cobsfile::recover(&bytes, &ReaderBuilder::new(), &mut out).unwrap();
        let mut seen = BTreeSet::new();
        run.read(&bytes, &mut seen, &mut BTreeMap::new());
        assert_eq!(recovery.report.records, seen.len() as u64);
        Some(out)
    };
    assert_eq!(run.read_all(recovered), read);
    // A fresh appender reopens the log, cutting no intact block, and appends after what is
    // there.
    let before = crashed.read(PATH).unwrap_or_default();
    let mut in_log = BTreeSet::new();
    run.read(&before, &mut in_log, &mut BTreeMap::new());
    let mut log = match open(crashed, Durability::Fsync, 4096) {
        Ok(log) => log,
        Err(Error::NotACobsfile { offset: 0 }) => {
            // Nothing of the file's start is left, nor any intact block after it: the
            // appender refuses the file until it is recovered, which loses nothing.
            assert!(!before.starts_with(&file_start()), "a sound header refused");
            assert!(in_log.is_empty(), "a log with records refused: {in_log:?}");
            let mut out = Vec::new();
            cobsfile::recover(&before, &ReaderBuilder::new(), &mut out).unwrap();
            crashed.insert(PATH, out);
            open(crashed, Durability::Fsync, 4096).expect("reopening the recovered log")
        }
        Err(e) => panic!("reopening failed: {e}"),
    };
    if log.opened().completed {
        // The log ended with a block whole but for its closing sync byte, which the appender
        // wrote: its records are the log's now (spec 11.1, rule 2).
        let mut completed = before.clone();
        completed.push(0);
        in_log.clear();
        run.read(&completed, &mut in_log, &mut BTreeMap::new());
    }
    let first = run.next;
    let mut after = Run {
        appended: run.appended.clone(),
        timed: run.timed.clone(),
        files: vec![PathBuf::from(PATH)],
        ..Run::default()
    };
    for i in first..first + 3 {
        log.append(&record(i, 40)).unwrap();
        after.appended.insert(i, (40, usize::MAX));
    }
    log.close().unwrap();
    let bytes = crashed.read(PATH).unwrap();
    let mut expected = in_log;
    expected.extend(first..first + 3);
    assert_eq!(after.read_all(|path| crashed.read(path)), expected);
    let report = ReaderBuilder::new().verify(&bytes).unwrap();
    assert_eq!(report.ending, Ending::Open);
}
