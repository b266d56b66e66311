//! What an appender reported durable survives a power cut: appenders, one or several at once,
//! run on a simulated file system (`cobsfile::fs::SimFs`) that loses, keeps, or keeps in part
//! (sector by sector, in any order) every write not yet synced, keeps a prefix of each
//! directory's unsynced changes (files created, renamed), and can fail writes and syncs; after
//! a cut at a random moment, a fresh appender reopens the log and the readers read it. The
//! scenario and its checks are in `tests/common/power_cut.rs`, shared with the fuzz target
//! `power_loss`. New files that replace others (`cobsfile::fs::NewFile`: recovery, packing)
//! are cut after each of their steps in turn.
//!
//! Every case derives from one seed. A failing case names its mode and seed; replay it with
//! `POWER_LOSS_MODE=fsync POWER_LOSS_SEED=0x... cargo test -p cobsfile --test power_loss replay
//! -- --ignored --nocapture` (the group-commit timer runs on its own thread, so in those modes a
//! replay repeats the same operations and crash choices, not necessarily the same timing). A
//! long run: `POWER_LOSS_CASES=20000 cargo test --release -p cobsfile --test power_loss`.

use std::collections::BTreeSet;
use std::io::ErrorKind;
use std::path::Path;

mod common;
#[path = "common/power_cut.rs"]
mod power_cut;

use cobsfile::fs::{NewFile, SimFs};
use cobsfile::{AppenderBuilder, Durability, Error, ReaderBuilder};
use common::Rng;
use power_cut::{parse, record, run_case, Choices, Mode, PATH};
use proptest::prelude::*;

/// Crash states checked per case (each a different cut of the same run).
const CRASHES: u64 = 4;

impl Choices for Rng {
    fn below(&mut self, n: u64) -> u64 {
        Rng::below(self, n.max(1))
    }
}

/// The crash states of case `seed`.
fn crash_seeds(seed: u64) -> Vec<u64> {
    (0..CRASHES)
        .map(|k| seed.wrapping_add(k).wrapping_mul(0x2545_f491_4f6c_dd1d))
        .collect()
}

fn case(mode: Mode, seed: u64) {
    let result =
        std::panic::catch_unwind(|| run_case(mode, &mut Rng::new(seed), &crash_seeds(seed)));
    if let Err(e) = result {
        let msg = e
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        panic!(
            "power-loss case failed: POWER_LOSS_MODE={} POWER_LOSS_SEED={seed:#x}: {msg}",
            mode.name()
        );
    }
}

/// Cases per property: 256, or `POWER_LOSS_CASES` for a long run.
fn cases() -> u32 {
    std::env::var("POWER_LOSS_CASES").map_or(256, |n| n.parse().expect("POWER_LOSS_CASES"))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), max_shrink_iters: 0, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn fsync_keeps_every_appended_record(seed in any::<u64>()) { case(Mode::Fsync, seed) }

    #[test]
    fn group_commit_keeps_every_record_below_durable(seed in any::<u64>()) { case(Mode::Group, seed) }

    #[test]
    fn flush_keeps_what_sync_and_wait_durable_reported(seed in any::<u64>()) { case(Mode::Flush, seed) }

    #[test]
    fn none_keeps_what_sync_and_wait_durable_reported(seed in any::<u64>()) { case(Mode::None, seed) }

    #[test]
    fn failed_writes_and_syncs_make_nothing_more_durable(seed in any::<u64>()) { case(Mode::FsyncFaults, seed) }

    #[test]
    fn failed_group_commits_make_nothing_more_durable(seed in any::<u64>()) { case(Mode::GroupFaults, seed) }

    #[test]
    fn several_appenders_keep_each_ones_durable_records(seed in any::<u64>()) { case(Mode::Shared, seed) }

    #[test]
    fn several_appenders_keep_their_durable_records_through_faults(seed in any::<u64>()) { case(Mode::SharedFaults, seed) }
}

/// Replays one case: `POWER_LOSS_MODE` (fsync, group, flush, none, fsync-faults,
/// group-faults) and `POWER_LOSS_SEED` (decimal or 0x hex).
#[test]
#[ignore = "replays the case POWER_LOSS_MODE and POWER_LOSS_SEED name"]
fn replay() {
    let mode = std::env::var("POWER_LOSS_MODE").expect("POWER_LOSS_MODE");
    let mode = Mode::parse(&mode).unwrap_or_else(|| panic!("unknown mode {mode}"));
    let seed = std::env::var("POWER_LOSS_SEED").expect("POWER_LOSS_SEED");
    let seed = match seed.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).unwrap(),
        None => seed.parse().unwrap(),
    };
    run_case(mode, &mut Rng::new(seed), &crash_seeds(seed));
}

/// Cases that failed once, kept as they were found.
#[test]
fn regressions() {
    // wait_durable after flush waited forever with group commit (the timer only committed
    // records not yet written).
    case(Mode::Group, 17759258367718171878);
    // The log vanished in the cut with records `sync` had reported durable: its directory
    // was never synced (the second appender on the file did not know it was new).
    case(Mode::Fsync, 0xb7435673c8dd8d4d);
    case(Mode::None, 0x25e8a2c3ad80b92e);
    case(Mode::Flush, 0xdbd0f97210cba1a5);
    // The cut took the header, whose sync had failed under an earlier appender, while a later
    // appender's records survived: the appender refused the file until it was recovered; it
    // now appends after the records (`a_log_whose_header_a_power_cut_took_stays_appendable`).
    case(Mode::FsyncFaults, 0x5428012976702fb4);
    case(Mode::Flush, 0xa53e20fdc5a043e4);
    // A write cut short just before its block's closing sync byte, written again whole: the
    // torn copy, closed by the next sync byte, was intact too, and its records read twice.
    case(Mode::FsyncFaults, 0x8e67de058cd649b0);
    case(Mode::GroupFaults, 0x511c4e24686f439e);
    case(Mode::SharedFaults, 0x4d89fecfcc63f475);
    // One appender's sync failed and took another's writes with it; the simulator let the
    // other's next sync succeed, where Linux reports the failure to every handle open on the
    // file: it reported records durable that were lost.
    case(Mode::SharedFaults, 0xaad12b0c336f1656);
    // A crash kept a block written whole but for its closing sync byte (a short write), and
    // dropped that byte's own write: the reopening appender completes the block, whose
    // records the check had not counted as the log's (found by the long run).
    case(Mode::SharedFaults, 0x46b3561d139b7021);
    case(Mode::GroupFaults, 0x93cecdb3b3ca3a1e);
}

fn open(fs: &SimFs) -> cobsfile::Result<cobsfile::Appender> {
    AppenderBuilder::new()
        .durability(Durability::Fsync)
        .open_in(fs, PATH)
}

/// The numbers of the intact records of `bytes`, and the damage a reader reports.
fn read(bytes: &[u8]) -> (Vec<u64>, usize) {
    let (records, errors) = ReaderBuilder::new().from_slice(bytes).read_all();
    let numbers = records.iter().map(|r| parse(r).expect("intact")).collect();
    (numbers, errors.len())
}

/// A failed sync is never retried into a success: the appender is broken from then on.
#[test]
fn a_failed_sync_breaks_the_appender() {
    let fs = SimFs::new(1);
    let mut log = open(&fs).unwrap();
    log.append(b"kept").unwrap();
    assert_eq!(log.durable(), 1);
    fs.fail_next_sync(ErrorKind::Other);
    assert!(log.append(b"lost").is_err());
    assert!(matches!(log.sync(), Err(Error::AppenderBroken { .. })));
    assert!(matches!(
        log.wait_durable(1),
        Err(Error::AppenderBroken { .. })
    ));
    assert_eq!(log.durable(), 1);
}

/// A log created on the simulated file system vanishes in a cut unless its directory was
/// synced: the first sync of a log an appender created syncs the directory too.
#[test]
fn a_created_log_survives_once_synced() {
    for seed in 0..64 {
        let fs = SimFs::new(seed);
        let mut log = open(&fs).unwrap();
        log.append(&record(0, 20)).unwrap();
        let crashed = fs.crashed(seed);
        let bytes = crashed.read(PATH).expect("a synced log vanished");
        assert_eq!(read(&bytes).0, [0]);
    }
}

/// A write the system cuts short leaves a torn block that another writer's block may already
/// follow: the rest of it must never be written after it (it would run into that block). The
/// appender writes the block again, whole, behind a sync byte of its own.
#[test]
fn a_write_cut_short_is_written_again_whole() {
    for seed in 0..32 {
        let fs = SimFs::new(seed);
        fs.set_faults(cobsfile::fs::Faults {
            short_write: 200,
            ..Default::default()
        });
        let mut log = AppenderBuilder::new()
            .durability(Durability::Flush)
            .open_in(&fs, PATH)
            .unwrap();
        let mut other = AppenderBuilder::new()
            .durability(Durability::Flush)
            .open_in(&fs, PATH)
            .unwrap();
        for i in 0..20 {
            let writer = if i % 2 == 0 { &mut log } else { &mut other };
            writer.append(&record(i, 100)).unwrap();
        }
        drop((log, other));
        let bytes = fs.read(PATH).unwrap();
        let (records, damage) = read(&bytes);
        assert_eq!(records, (0..20).collect::<Vec<_>>(), "seed {seed}");
        // Each write cut short is a torn block: damage, never a lost record.
        assert!(damage <= 20, "seed {seed}");
    }
}

/// A power cut before a new log's first sync can take its header (here: the header's sync
/// failed, and a later appender's records were synced): zeros stand where the header was.
/// Records after it are durable; the log stays a log: the appender appends after them.
#[test]
fn a_log_whose_header_a_power_cut_took_stays_appendable() {
    let fs = SimFs::new(3);
    let mut first = AppenderBuilder::new()
        .durability(Durability::Fsync)
        .open_in(&fs, PATH)
        .unwrap();
    fs.fail_next_sync(ErrorKind::Other);
    assert!(first.append(&record(0, 30)).is_err());
    drop(first);
    let mut second = open(&fs).unwrap();
    second.append(&record(1, 30)).unwrap();
    drop(second);
    // Every crash state keeps record 1; in some the header is gone.
    let mut lost_headers = 0;
    for seed in 0..64 {
        let crashed = fs.crashed(seed);
        let bytes = crashed.read(PATH).unwrap();
        assert!(read(&bytes).0.contains(&1), "seed {seed}");
        let mut log = open(&crashed).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        lost_headers += usize::from(log.opened().header_lost);
        log.append(&record(2, 30)).unwrap();
        drop(log);
        let after = crashed.read(PATH).unwrap();
        let (records, _) = read(&after);
        assert_eq!(records.last(), Some(&2), "seed {seed}");
        assert!(records.contains(&1), "seed {seed}");
    }
    assert!(lost_headers > 0, "no crash state took the header");
    // A file that only starts with zeros, with no intact block after them, is not a log.
    let fs = SimFs::new(0);
    fs.insert(PATH, vec![0; 4096]);
    assert!(matches!(open(&fs), Err(Error::NotACobsfile { offset: 0 })));
}

/// Writing a new file that replaces another (a recovered log, a packed one): a power cut
/// after any step of it leaves the old file or the whole new one under the name, never a
/// part; once `persist` returns, the new one.
#[test]
fn a_new_file_is_old_or_new_whole_after_a_cut_at_any_step() {
    let path = Path::new("/sim/out.cobs");
    let old = b"the old file".to_vec();
    let mut states = 0;
    for replace in [false, true] {
        for steps in 0.. {
            let fs = SimFs::new(steps);
            if replace {
                fs.insert(path, old.clone());
            }
            fs.stop_after(steps);
            // A log to recover, the new file's content.
            let log = fs.clone();
            let written = (|| {
                let mut new = NewFile::create_in(&fs, path, replace)?;
                for i in 0..4 {
                    std::io::Write::write_all(&mut new, &record(i, 700))?;
                }
                new.persist()
            })();
            let new: Vec<u8> = (0..4).flat_map(|i| record(i, 700)).collect();
            for seed in 0..16 {
                let crashed = log.crashed(seed);
                let there = crashed.read(path);
                match (&there, replace) {
                    (Some(bytes), _) if *bytes == new => {}
                    (Some(bytes), true) if *bytes == old && written.is_err() => {}
                    (None, false) if written.is_err() => {}
                    _ => panic!(
                        "replace {replace}, cut after {steps} steps ({written:?}): {:?}",
                        there.map(|b| b.len())
                    ),
                }
                // Nothing else is left but, after a cut, a file under a temporary name.
                for other in crashed.list("/sim") {
                    assert!(other == path || written.is_err(), "{}", other.display());
                }
                states += 1;
            }
            if !fs.stopped() {
                assert!(written.is_ok());
                break;
            }
        }
    }
    assert!(states > 100);
}

/// Every record a recovery writes into a new file that replaces the damaged log survives a
/// power cut at any step: the name holds the old log or the recovered one.
#[test]
fn recovery_into_a_new_file_is_old_or_new_whole_after_a_cut_at_any_step() {
    let fs = SimFs::new(9);
    let mut log = open(&fs).unwrap();
    for i in 0..50 {
        log.append(&record(i, 200)).unwrap();
    }
    drop(log);
    let mut damaged = fs.read(PATH).unwrap();
    damaged[3000] ^= 0x55;
    let recovered = {
        let mut out = Vec::new();
        cobsfile::recover(&damaged, &ReaderBuilder::new(), &mut out).unwrap();
        out
    };
    let target = Path::new("/sim/recovered.cobs");
    for steps in 0.. {
        let fs = SimFs::new(steps);
        fs.insert(target, damaged.clone());
        fs.stop_after(steps);
        let written = (|| {
            let mut new = NewFile::create_in(&fs, target, true)?;
            cobsfile::recover(&damaged, &ReaderBuilder::new(), &mut new)
                .map_err(std::io::Error::other)?;
            new.persist()
        })();
        for seed in 0..16 {
            let there = fs.crashed(seed).read(target).expect("the name vanished");
            assert!(
                there == recovered || (there == damaged && written.is_err()),
                "cut after {steps} steps ({written:?})"
            );
        }
        if !fs.stopped() {
            written.unwrap();
            break;
        }
    }
}

/// The log directory of the segment scenario.
const SEGMENTS: &str = "/sim/segments";

/// A power cut at any moment of a log directory's life (appends, rolls, finishing, retention,
/// reopening) keeps every record an appender reported durable, unless retention removed its
/// segment, and nothing twice: after any crash state, the segments left are a run of sequence
/// numbers, the records of those at or after the first one left that were durable are all
/// there, once, intact; and a fresh appender reopens the directory, finishes what is left
/// unfinished and appends after it.
fn segments_case(seed: u64) {
    let mut rng = Rng::new(seed);
    let fs = SimFs::new(rng.next_u64());
    let appenders = 1 + rng.below(3) as usize;
    let mut options = AppenderBuilder::new()
        .durability(Durability::Fsync)
        .segment_size(200 + rng.below(3000))
        .maintain_in_background(false);
    let retained = rng.below(4);
    match retained {
        0 => options = options.retain_count(2 + rng.below(4)),
        1 => options = options.retain_size(1000 + rng.below(6000)),
        _ => {}
    }
    // The power goes after so many steps, somewhere in the run (or never).
    fs.stop_after(rng.below(400));
    let open = |fs: &SimFs| options.open_dir_in(std::sync::Arc::new(fs.clone()), SEGMENTS);
    let mut logs: Vec<Option<cobsfile::Appender>> = (0..appenders).map(|_| None).collect();
    // Each durable record, with the sequence number of the segment it went to.
    let mut durable: Vec<(u64, u64)> = Vec::new();
    let mut appended = 0u64;
    'run: for _ in 0..200 {
        let k = rng.below(appenders as u64) as usize;
        if logs[k].is_none() {
            match open(&fs) {
                Ok(log) => logs[k] = Some(log),
                Err(_) => break 'run,
            }
        }
        let log = logs[k].as_mut().unwrap();
        match rng.below(20) {
            0 => {
                let log = logs[k].take().unwrap();
                if log.close().is_err() {
                    break 'run;
                }
            }
            _ => {
                let i = appended;
                appended += 1;
                let r = record(i, 12 + rng.below(300) as usize);
                if log.append(&r).is_err() {
                    break 'run;
                }
                let segment = log.segment().unwrap();
                let name = segment.file_name().unwrap().to_str().unwrap();
                let seq = cobsfile::segments::segment_seq(name).unwrap();
                durable.push((i, seq));
            }
        }
    }
    drop(logs);
    if std::env::var_os("SEGMENTS_DEBUG").is_some() {
        let left = fs.list(SEGMENTS).len();
        let last = durable.last().map(|d| d.1);
        eprintln!("seed {seed:#x}: {appended} appended, {} durable, last segment {last:?}, {left} left, stopped {}", durable.len(), fs.stopped());
    }
    for crash in crash_seeds(seed) {
        let crashed = fs.crashed(crash);
        let segments: Vec<(u64, Vec<u8>)> = crashed
            .list(SEGMENTS)
            .into_iter()
            .filter_map(|p| {
                let seq = cobsfile::segments::segment_seq(p.file_name()?.to_str()?)?;
                Some((seq, crashed.read(&p).unwrap()))
            })
            .collect();
        let seqs: Vec<u64> = segments.iter().map(|(s, _)| *s).collect();
        if let (Some(first), Some(last)) = (seqs.first(), seqs.last()) {
            assert_eq!(
                seqs,
                (*first..=*last).collect::<Vec<_>>(),
                "segments left are a run (seed {seed:#x})"
            );
        }
        let mut seen = BTreeSet::new();
        for (seq, bytes) in &segments {
            let (records, _) = ReaderBuilder::new().from_slice(bytes).read_all();
            for r in records {
                let i = parse(&r).unwrap_or_else(|| panic!("a corrupt record in {seq}"));
                assert!(i < appended, "a record never appended");
                assert!(seen.insert(i), "record {i} twice (seed {seed:#x})");
            }
        }
        let first = seqs.first().copied().unwrap_or(u64::MAX);
        if retained > 1 && !durable.is_empty() {
            assert_eq!(first, 1, "no retention, yet segments went (seed {seed:#x})");
        }
        for (i, seq) in &durable {
            if *seq >= first {
                assert!(
                    seen.contains(i),
                    "durable record {i} of segment {seq} lost (seed {seed:#x}, crash {crash:#x}, left {seqs:?})"
                );
            }
        }
        // Reopened: what is left unfinished before the newest is finished, and appending
        // goes on after what is there.
        let mut log = open(&crashed).unwrap_or_else(|e| panic!("reopen (seed {seed:#x}): {e}"));
        log.append(&record(appended, 40)).unwrap();
        log.close().unwrap();
        let mut names = crashed.list(SEGMENTS);
        names.retain(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .and_then(cobsfile::segments::segment_seq)
                .is_some()
        });
        names.sort();
        let (newest, older) = names.split_last().unwrap();
        let bytes = crashed.read(newest).unwrap();
        let (records, _) = ReaderBuilder::new().from_slice(&bytes).read_all();
        assert_eq!(parse(records.last().unwrap()), Some(appended));
        for path in older {
            let bytes = crashed.read(path).unwrap();
            let report = ReaderBuilder::new().verify(&bytes).unwrap();
            assert_eq!(
                report.ending,
                cobsfile::Ending::Finished,
                "{} (seed {seed:#x})",
                path.display()
            );
            if let Some(index) = cobsfile::Index::find(&bytes) {
                assert_eq!(index.records(), report.records, "{}", path.display());
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), max_shrink_iters: 0, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn segment_rolls_finishing_and_retention_keep_every_durable_record(seed in any::<u64>()) {
        segments_case(seed)
    }
}
