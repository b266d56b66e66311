//! Worker threads: `WriterBuilder::threads` writes byte for byte what one thread writes, and
//! `ReaderBuilder::threads` yields exactly what one thread yields (records, blocks, errors,
//! stats, in every mix of calls), on clean and damaged files, with and without zstd and
//! dictionaries; memory stays bounded and nothing hangs when a reader or writer is dropped
//! midway.

mod common;

use std::io::{self, Write};
use std::sync::mpsc;
use std::sync::OnceLock;
use std::time::Duration;

use cobsfile::{
    BlockInfo, Compression, Dictionary, Ending, Error, ReaderBuilder, Stats, WriterBuilder,
};
use common::{is_subsequence, Blk, RecordingWriter, Rng, TempFile};
use proptest::prelude::*;

// ---------------------------------------------------------------------------------------------
// Inputs.

/// Words log messages are made of, so records compress like logs.
const WORDS: &[&str] = &[
    "request", "user", "order", "payment", "timeout", "retry", "cache", "miss", "hit", "db",
    "query", "slow", "ok", "failed", "checkout", "session", "token", "expired", "upstream",
];

/// A JSON log event of about `len` bytes (at least the fixed fields).
fn event(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    let mut message = String::new();
    while message.len() + 120 < len {
        message.push_str(WORDS[rng.below(WORDS.len() as u64) as usize]);
        message.push(' ');
    }
    format!(
        "{{\"ts\":\"2024-05-{:02}T12:{:02}:{:02}Z\",\"level\":\"{}\",\"service\":\"svc-{}\",\"host\":\"h{}\",\"id\":{},\"msg\":\"{message}\"}}",
        1 + rng.below(28),
        rng.below(60),
        rng.below(60),
        ["info", "warn", "error", "debug"][rng.below(4) as usize],
        rng.below(7),
        rng.below(40),
        rng.next_u64(),
    )
    .into_bytes()
}

/// The dictionary the tests compress with: raw content made of events.
fn dictionary() -> &'static Dictionary {
    static DICTIONARY: OnceLock<Dictionary> = OnceLock::new();
    DICTIONARY.get_or_init(|| {
        let mut bytes = Vec::new();
        for i in 0..40 {
            bytes.extend_from_slice(&event(200, 1000 + i));
        }
        Dictionary::new(bytes)
    })
}

/// One call on a writer.
#[derive(Debug, Clone)]
enum Op {
    /// A record: a log event, or random bytes (which zstd cannot shrink).
    Record {
        len: usize,
        text: bool,
        seed: u64,
    },
    Metadata(Vec<(String, Vec<u8>)>),
    Raw(i64, Vec<u8>),
    Flush,
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        20 => (0..3000usize, any::<bool>(), any::<u64>())
            .prop_map(|(len, text, seed)| Op::Record { len, text, seed }),
        1 => common::metadata_strategy().prop_map(Op::Metadata),
        1 => (prop_oneof![Just(-3i64), Just(12)], prop::collection::vec(any::<u8>(), 0..50))
            .prop_map(|(t, p)| Op::Raw(t, p)),
        1 => Just(Op::Flush),
    ]
}

/// How a file is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Codec {
    None,
    Zstd(i32),
    /// Zstd at level 3 with the test dictionary, embedded in the file or not.
    Dictionary {
        embed: bool,
    },
}

fn codec_strategy() -> impl Strategy<Value = Codec> {
    prop_oneof![
        Just(Codec::None),
        Just(Codec::Zstd(-1)),
        Just(Codec::Zstd(3)),
        any::<bool>().prop_map(|embed| Codec::Dictionary { embed }),
    ]
}

fn builder(codec: Codec, block_target: usize, threads: usize) -> WriterBuilder {
    let builder = WriterBuilder::new()
        .block_target(block_target)
        .threads(threads);
    match codec {
        Codec::None => builder,
        Codec::Zstd(level) => builder.compression(Compression::zstd(level).unwrap()),
        Codec::Dictionary { embed } => builder
            .compression(Compression::zstd(3).unwrap())
            .dictionary(dictionary().clone(), embed),
    }
}

fn record(len: usize, text: bool, seed: u64) -> Vec<u8> {
    if text {
        event(len, seed)
    } else {
        common::record_bytes(len, common::Content::Random, seed)
    }
}

/// Applies `ops` to `writer`.
fn apply<W: Write>(writer: &mut cobsfile::Writer<W>, ops: &[Op]) {
    for op in ops {
        match op {
            Op::Record { len, text, seed } => {
                writer.write_record(&record(*len, *text, *seed)).unwrap()
            }
            Op::Metadata(m) => writer
                .write_metadata(m.iter().map(|(k, v)| (k.as_str(), v.as_slice())))
                .unwrap(),
            Op::Raw(t, p) => writer.write_raw_block(*t, p).unwrap(),
            Op::Flush => writer.flush().unwrap(),
        }
    }
}

/// Every `write` call the writer made, and the number of flushes.
fn writes(ops: &[Op], codec: Codec, block_target: usize, threads: usize) -> (Vec<Vec<u8>>, usize) {
    let mut writer = builder(codec, block_target, threads)
        .build(RecordingWriter::default())
        .unwrap();
    apply(&mut writer, ops);
    let inner = writer.finish().unwrap();
    (inner.writes, inner.flushes)
}

fn write_file(ops: &[Op], codec: Codec, block_target: usize) -> Vec<u8> {
    let mut writer = builder(codec, block_target, 0).build(Vec::new()).unwrap();
    apply(&mut writer, ops);
    writer.finish().unwrap()
}

/// Ways to damage a file.
#[derive(Debug, Clone)]
enum Damage {
    None,
    Flips(Vec<(usize, u8)>),
    Truncate(usize),
    Insert(usize, Vec<u8>),
    Zero(usize, usize),
    Duplicate(usize, usize, usize),
    /// Cut right after a sync byte: at a block boundary, as a killed writer leaves a file.
    CutAtSync(usize),
    /// A log block and a data block appended, each behind a sync byte of its own, as an
    /// appender appends to a finished file.
    AppendLog,
    /// Single bytes set to 0x00: inside a body, a frame whose length still lands on its
    /// closing sync byte (which a parallel reader's scan does not check; its workers do).
    Stray(Vec<usize>),
}

fn damage_strategy() -> impl Strategy<Value = Damage> {
    prop_oneof![
        1 => Just(Damage::None),
        3 => prop::collection::vec((any::<usize>(), 1..=255u8), 1..6).prop_map(Damage::Flips),
        1 => any::<usize>().prop_map(Damage::Truncate),
        1 => (any::<usize>(), prop::collection::vec(prop_oneof![Just(0u8), any::<u8>()], 1..300))
            .prop_map(|(p, b)| Damage::Insert(p, b)),
        1 => (any::<usize>(), 1..2000usize).prop_map(|(p, n)| Damage::Zero(p, n)),
        1 => any::<(usize, usize, usize)>().prop_map(|(a, b, p)| Damage::Duplicate(a, b, p)),
        1 => any::<usize>().prop_map(Damage::CutAtSync),
        1 => Just(Damage::AppendLog),
        2 => prop::collection::vec(any::<usize>(), 1..4).prop_map(Damage::Stray),
    ]
}

fn damage(mut file: Vec<u8>, damage: &Damage) -> Vec<u8> {
    let len = file.len().max(1);
    match damage {
        Damage::None => {}
        Damage::Flips(flips) => {
            for (at, mask) in flips {
                if let Some(b) = file.get_mut(at % len) {
                    *b ^= mask;
                }
            }
        }
        Damage::Truncate(at) => file.truncate(at % len),
        Damage::Stray(at) => {
            for at in at {
                if let Some(b) = file.get_mut(at % len) {
                    *b = 0;
                }
            }
        }
        Damage::Insert(at, bytes) => {
            let at = at % len;
            file.splice(at..at, bytes.iter().copied());
        }
        Damage::Zero(at, n) => {
            let at = at % len;
            let end = (at + n).min(file.len());
            file[at..end].fill(0);
        }
        Damage::Duplicate(a, b, p) => {
            let (a, b) = ((a % len).min(b % len), (a % len).max(b % len));
            let copy = file[a..b.min(file.len())].to_vec();
            let p = p % len;
            file.splice(p..p, copy);
        }
        Damage::CutAtSync(k) => {
            let syncs: Vec<usize> = (0..file.len()).filter(|&i| file[i] == 0).collect();
            if !syncs.is_empty() {
                file.truncate(syncs[k % syncs.len()] + 1);
            }
        }
        Damage::AppendLog => {
            file.push(0);
            file.extend(common::raw_block(7, b""));
            file.push(0);
            file.extend(common::raw_block(3, &common::data_payload(&[b"appended"])));
        }
    }
    file
}

// ---------------------------------------------------------------------------------------------
// Observing readers exactly.

/// What one call yielded, owned; errors by their full `Debug` form.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Out {
    Record(Result<Vec<u8>, String>),
    Block(Result<Blk, String>),
    Info(Result<BlockInfo, String>),
    Metadata(Result<cobsfile::Metadata, String>),
    None,
}

fn err(e: Error) -> String {
    format!("{e:?}")
}

/// One call on a reader.
#[derive(Debug, Clone, Copy)]
enum Call {
    Record,
    Block,
    Info,
    Metadata,
}

fn call<S: cobsfile::Source>(reader: &mut cobsfile::Reader<S>, c: Call) -> Out {
    match c {
        Call::Record => match reader.next_record() {
            Some(r) => Out::Record(r.map(<[u8]>::to_vec).map_err(err)),
            None => Out::None,
        },
        Call::Block => match reader.next_block() {
            Some(b) => Out::Block(b.map(|b| Blk::of(&b)).map_err(err)),
            None => Out::None,
        },
        Call::Info => match reader.blocks().next() {
            Some(b) => Out::Info(b.map_err(err)),
            None => Out::None,
        },
        Call::Metadata => match reader.metadata().next() {
            Some(m) => Out::Metadata(m.map_err(err)),
            None => Out::None,
        },
    }
}

/// What a reader said after a call: its stats, and how the input ends once it knows.
type After = (Stats, Option<Ending>);

/// Makes the calls `calls`, over and over, until three in a row yield nothing; the outputs,
/// and the stats and ending after each call.
fn trace<S: cobsfile::Source>(
    mut reader: cobsfile::Reader<S>,
    calls: &[Call],
) -> Vec<(Out, After)> {
    let mut out = Vec::new();
    let mut nothing = 0;
    for &c in calls.iter().cycle() {
        let o = call(&mut reader, c);
        nothing = if o == Out::None { nothing + 1 } else { 0 };
        out.push((o, (reader.stats().clone(), reader.ending())));
        if nothing == 3 {
            return out;
        }
        assert!(out.len() < 1 << 22, "the reader does not end");
    }
    unreachable!("calls cycle")
}

/// Asserts that readers with 2..=4 threads (over shared bytes, and once over a mapped file)
/// yield exactly what the reader on one thread yields: for each API alone until the end, and
/// for a mix of calls driven by `seed`.
fn assert_same_as_sequential(file: &[u8], options: &ReaderBuilder, seed: u64) {
    let mut rng = Rng::new(seed);
    let mixed: Vec<Call> = (0..64)
        .map(|_| match rng.below(8) {
            0..=3 => Call::Record,
            4 | 5 => Call::Block,
            6 => Call::Info,
            _ => Call::Metadata,
        })
        .collect();
    let scripts: [&[Call]; 5] = [
        &[Call::Record],
        &[Call::Block],
        &[Call::Info],
        &[Call::Metadata],
        &mixed,
    ];
    let temp = TempFile::with_contents(file);
    let mapped = cobsfile::open(&temp.0).unwrap();
    let shared: std::sync::Arc<[u8]> = file.into();
    for script in scripts {
        let sequential = trace(options.from_slice(file), script);
        if matches!(script, [Call::Block] | [Call::Record]) {
            // Read to the end: the reader knows how the input ends, as verify does.
            let ending = sequential.last().and_then(|(_, (_, ending))| *ending);
            let report = cobsfile::verify(&mut options.from_slice(file));
            assert_eq!(ending, report.ok().map(|r| r.ending), "{script:?}");
        }
        for threads in [2, 3, 4] {
            // Ranges of at least 64, 256 and 1024 bytes: many cuts, through blocks and damage.
            let min_split = 64 << (2 * (threads - 2));
            let options = options.clone().threads(threads).min_split(min_split);
            let parallel = trace(options.from_shared(&shared), script);
            assert_same_trace(
                &parallel,
                &sequential,
                &format!("{threads} threads, ranges of {min_split}, {script:?}"),
            );
        }
        let threaded = options.clone().threads(2).min_split(100);
        let parallel = trace(mapped.reader_with(&threaded), script);
        assert_same_trace(&parallel, &sequential, &format!("mapped, {script:?}"));
        // A borrowed slice, which threads cannot share, is read on the calling thread.
        let parallel = trace(threaded.from_slice(file), script);
        assert_same_trace(&parallel, &sequential, &format!("borrowed, {script:?}"));
    }
}

/// Fails naming the first call whose output differs (records abbreviated).
fn assert_same_trace(got: &[(Out, After)], expected: &[(Out, After)], what: &str) {
    let short = |o: &(Out, After)| {
        let text = format!("{o:?}");
        text.chars().take(400).collect::<String>()
    };
    for (i, (g, e)) in got.iter().zip(expected).enumerate() {
        assert!(
            g == e,
            "{what}: call {i} yields\n{}\ninstead of\n{}",
            short(g),
            short(e)
        );
    }
    assert_eq!(got.len(), expected.len(), "{what}: number of calls");
}

/// Runs `f` on a thread and fails if it takes longer than a minute (instead of hanging).
fn within_a_minute<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("hung (or panicked)")
}

// ---------------------------------------------------------------------------------------------
// Writer.

/// Every codec the tests run through.
const CODECS: [Codec; 5] = [
    Codec::None,
    Codec::Zstd(-1),
    Codec::Zstd(3),
    Codec::Dictionary { embed: true },
    Codec::Dictionary { embed: false },
];

/// `count` text records of `len` bytes.
fn text_records(count: u64, len: usize) -> Vec<Op> {
    (0..count)
        .map(|seed| Op::Record {
            len,
            text: true,
            seed,
        })
        .collect()
}

/// `count` records of 187 bytes and up (by `spread`), every `binary_every`-th one binary.
fn mixed_records(count: usize, spread: usize, binary_every: usize) -> Vec<Op> {
    (0..count)
        .map(|i| Op::Record {
            len: 187 + (i * 7919) % spread,
            text: i % binary_every != 0,
            seed: i as u64,
        })
        .collect()
}

proptest! {
    #![proptest_config(common::config(48))]

    /// The parallel writer makes the same `write` calls as one thread (so the same bytes, each
    /// block in one call, in the same order, metadata and raw blocks included) and the same
    /// flushes.

#[test]
    fn the_parallel_writer_writes_what_one_thread_writes(
        ops in prop::collection::vec(op_strategy(), 0..80),
        codec in codec_strategy(),
        block_target in prop_oneof![Just(1usize), Just(300), Just(4096), Just(20_000)],
    ) {
        let expected = writes(&ops, codec, block_target, 0);
        prop_assert_eq!(&writes(&ops, codec, block_target, 1), &expected);
        for threads in 2..=4 {
            let got = writes(&ops, codec, block_target, threads);
            prop_assert!(got == expected, "{} threads write differently", threads);
        }
    }
}

#[test]
fn every_level_and_dictionary_is_byte_identical() {
    let ops = mixed_records(400, 3000, 13);
    for codec in CODECS {
        let expected = writes(&ops, codec, 16 * 1024, 0);
        assert!(expected.0.len() > 20, "{codec:?}: too few blocks");
        for threads in 1..=4 {
            assert!(
                writes(&ops, codec, 16 * 1024, threads) == expected,
                "{codec:?}, {threads} threads"
            );
        }
    }
}

/// A `Write` that counts `write` calls (one per block) and checks them against a bound.
struct Counting {
    writes: usize,
}

impl Write for Counting {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.writes += 1;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn the_writer_keeps_at_most_two_blocks_per_thread_in_flight() {
    for threads in [2, 3, 4] {
        let mut writer = WriterBuilder::new()
            .block_target(100)
            .threads(threads)
            .build(Counting { writes: 0 })
            .unwrap();
        // Each record fills a block, which is closed at once.
        for closed in 1..=200 {
            writer.write_record(&[b'x'; 99]).unwrap();
            let written = writer.get_ref().writes - 1; // the header
            assert!(written <= closed);
            assert!(
                closed - written <= 2 * threads,
                "{threads} threads: {} blocks in flight",
                closed - written
            );
        }
        // The header, 200 data blocks, the index and the end block.
        assert_eq!(writer.finish().unwrap().writes, 203);
    }
}

#[test]
fn dropping_a_writer_midway_writes_everything_and_returns() {
    let file = within_a_minute(|| {
        let mut file = Vec::new();
        {
            let mut writer = builder(Codec::Zstd(3), 4096, 4).build(&mut file).unwrap();
            for i in 0..2000 {
                writer.write_record(&event(300, i)).unwrap();
            }
            writer.write_metadata([("last", "yes")]).unwrap();
            writer.write_record(b"after the metadata").unwrap();
        }
        file
    });
    let (records, errors) = ReaderBuilder::new().from_slice(&file).read_all();
    assert!(errors.is_empty());
    assert_eq!(records.len(), 2001);
    assert_eq!(records[1999], event(300, 1999));
    assert_eq!(records[2000], b"after the metadata");
}

/// A `Write` that fails every write after the first `ok`.
struct Failing {
    ok: usize,
    writes: Vec<Vec<u8>>,
}

impl Write for Failing {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.writes.len() == self.ok {
            return Err(io::Error::other("disk full"));
        }
        self.writes.push(buf.to_vec());
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn write_errors_come_back_and_blocks_stay_in_order() {
    let ops = text_records(300, 500);
    let (expected, _) = writes(&ops, Codec::Zstd(3), 2000, 0);
    for threads in [2, 4] {
        let failed = within_a_minute(move || {
            let mut writer = builder(Codec::Zstd(3), 2000, threads)
                .build(Failing {
                    ok: 20,
                    writes: Vec::new(),
                })
                .unwrap();
            let mut errors = 0;
            for i in 0..300 {
                if let Err(e) = writer.write_record(&event(500, i)) {
                    assert!(matches!(e, Error::Io(_)), "{e}");
                    errors += 1;
                }
            }
            if writer.flush().is_err() {
                errors += 1;
            }
            let writes = writer.get_ref().writes.clone();
            drop(writer); // must not hang with the writer failing
            (errors, writes)
        });
        let (errors, got) = failed;
        assert!(errors > 0);
        assert_eq!(got, expected[..20]);
    }
}

// ---------------------------------------------------------------------------------------------
// Reader.

proptest! {
    #![proptest_config(common::config(40))]

    /// Parallel readers agree exactly with the reader on one thread, on damaged files too.
    #[test]
    fn the_parallel_reader_reads_what_one_thread_reads(
        ops in prop::collection::vec(op_strategy(), 0..60),
        codec in codec_strategy(),
        block_target in prop_oneof![Just(1usize), Just(500), Just(4096)],
        given in any::<bool>(),
        small_limit in prop::bool::weighted(0.1),
        damage_kind in damage_strategy(),
        seed in any::<u64>(),
    ) {
        let file = damage(write_file(&ops, codec, block_target), &damage_kind);
        let mut options = ReaderBuilder::new();
        if given {
            options = options.dictionary(dictionary().clone());
        }
        if small_limit {
            options = options.max_body_size(3000);
        }
        assert_same_as_sequential(&file, &options, seed);
    }
}

/// A file whose first blocks need the test dictionary before any block provides it, then the
/// dictionary block, then blocks that need it: concatenated files.
fn dictionary_late_file() -> Vec<u8> {
    let ops = text_records(40, 400);
    let mut file = write_file(&ops, Codec::Dictionary { embed: false }, 1000);
    let mut writer = builder(Codec::Dictionary { embed: true }, 1000, 0)
        .build(Vec::new())
        .unwrap();
    writer.write_metadata([("part", "two")]).unwrap();
    apply(&mut writer, &ops);
    file.extend_from_slice(&writer.finish().unwrap());
    file
}

/// A 0x00 in a block before a dictionary block: the parallel reader's workers find it after
/// its scan went past, and the dictionary block must not be scanned (and its dictionary
/// handed to the workers) before that is known.
#[test]
fn a_stray_zero_before_a_dictionary_block_reads_as_on_one_thread() {
    let first_part = write_file(
        &text_records(40, 400),
        Codec::Dictionary { embed: false },
        1000,
    );
    let file = dictionary_late_file();
    assert!(file.starts_with(&first_part));
    let options = ReaderBuilder::new().dictionary(dictionary().clone());
    for back in (16..3000).step_by(97) {
        let mut damaged = file.clone();
        let at = first_part.len() - back;
        if damaged[at] == 0 {
            continue;
        }
        damaged[at] = 0;
        assert_same_as_sequential(&damaged, &options, back as u64);
        assert_same_as_sequential(&damaged, &ReaderBuilder::new(), back as u64);
    }
}

/// A flood of frames whose lengths land on their sync bytes but whose bodies hold a 0x00:
/// each one sends the parallel reader's scan back; it still reads what one thread reads, and
/// ends.
#[test]
fn a_flood_of_stray_zeros_reads_as_on_one_thread() {
    let file = write_file(&text_records(3000, 40), Codec::None, 1);
    let mut damaged = file.clone();
    let mut zeroed = 0;
    for at in (2..file.len() - 2).step_by(13) {
        if file[at - 1..=at + 1].iter().all(|&b| b != 0) {
            damaged[at] = 0;
            zeroed += 1;
        }
    }
    assert!(zeroed > 1000, "{zeroed} bytes zeroed");
    within_a_minute(move || assert_same_as_sequential(&damaged, &ReaderBuilder::new(), 7));
}

#[test]
fn dictionary_blocks_count_from_where_they_are() {
    let file = dictionary_late_file();
    // Without the dictionary the first part is lost (one merged region), the second is read.
    let (records, errors) = ReaderBuilder::new()
        .threads(3)
        .min_split(64)
        .from_shared(&file.clone().into())
        .read_all();
    assert_eq!(records.len(), 40);
    assert_eq!(errors.len(), 1);
    assert!(format!("{errors:?}").contains("Dictionary"), "{errors:?}");
    for seed in 0..8 {
        assert_same_as_sequential(&file, &ReaderBuilder::new(), seed);
        assert_same_as_sequential(
            &file,
            &ReaderBuilder::new().dictionary(dictionary().clone()),
            seed,
        );
    }
    // Given the dictionary, both parts are read.
    let options = ReaderBuilder::new().dictionary(dictionary().clone());
    let (records, errors) = options
        .clone()
        .threads(2)
        .min_split(64)
        .from_shared(&file.clone().into())
        .read_all();
    assert_eq!((records.len(), errors.len()), (80, 0));
}

#[test]
fn metadata_midway_does_not_leak_dictionaries_scanned_ahead() {
    // header, metadata, blocks needing the dictionary, ..., the dictionary, blocks needing it.
    let ops = text_records(30, 400);
    let mut writer = builder(Codec::Dictionary { embed: false }, 1000, 0)
        .build(Vec::new())
        .unwrap();
    writer.write_metadata([("part", "one")]).unwrap();
    apply(&mut writer, &ops[..2]);
    let mut file = writer.finish().unwrap();
    file.extend_from_slice(&write_file(&ops, Codec::Dictionary { embed: true }, 1000));

    let read = |threads: usize| {
        let shared: std::sync::Arc<[u8]> = file.clone().into();
        let mut reader = ReaderBuilder::new()
            .threads(threads)
            .min_split(64)
            .from_shared(&shared);
        let header = reader.next_block().unwrap().unwrap().info().clone();
        // With 3 or more threads the scan is past the dictionary block by now; metadata()
        // must go back to where the caller is and forget that dictionary.
        let meta = reader.metadata().next().unwrap().unwrap();
        let (records, errors) = reader.read_all();
        (
            header,
            meta,
            records,
            format!("{errors:?}"),
            reader.stats().clone(),
        )
    };
    let sequential = read(0);
    assert_eq!(sequential.2.len(), 30);
    assert!(sequential.3.contains("Dictionary"));
    for threads in [2, 3, 4] {
        assert_eq!(read(threads), sequential, "{threads} threads");
    }
}

#[test]
fn metadata_midway_keeps_the_dictionaries_already_read() {
    // header, dictionary, then metadata every 10 records.
    let mut ops = Vec::new();
    for i in 0..60 {
        if i % 10 == 0 {
            ops.push(Op::Metadata(vec![("i".into(), vec![i as u8])]));
        }
        ops.push(Op::Record {
            len: 400,
            text: true,
            seed: i,
        });
    }
    let file = write_file(&ops, Codec::Dictionary { embed: true }, 1000);
    let read = |threads: usize| {
        let shared: std::sync::Arc<[u8]> = file.clone().into();
        let mut reader = ReaderBuilder::new()
            .threads(threads)
            .min_split(64)
            .from_shared(&shared);
        let mut out = Vec::new();
        // A record (the dictionary block is read by then), then metadata, alternately.
        loop {
            let record = reader
                .next_record()
                .map(|r| r.map(<[u8]>::to_vec).map_err(err));
            let meta = reader.metadata().next().map(|m| m.map_err(err));
            if record.is_none() && meta.is_none() {
                break;
            }
            out.push((record, meta, reader.stats().clone()));
        }
        out
    };
    let sequential = read(0);
    // Six rounds: a metadata call passes over the records of the current data block not yet
    // returned, as next_block does (each round's record opens a block after the metadata).
    assert_eq!(sequential.len(), 6);
    assert!(sequential
        .iter()
        .all(|(r, m, _)| matches!(r, Some(Ok(_))) && (m.is_none() || matches!(m, Some(Ok(_))))));
    // And every record returned is one that was written, in order.
    let all = ReaderBuilder::new().from_slice(&file).read_all().0;
    let returned: Vec<Vec<u8>> = sequential
        .iter()
        .filter_map(|(r, _, _)| r.clone()?.ok())
        .collect();
    assert!(is_subsequence(&returned, &all));
    for threads in [2, 3, 4] {
        assert_eq!(read(threads), sequential, "{threads} threads");
    }
    for seed in 0..16 {
        assert_same_as_sequential(&file, &ReaderBuilder::new(), seed);
    }
}

#[test]
fn a_damaged_dictionary_block_is_not_used() {
    let ops = text_records(30, 400);
    let mut file = write_file(&ops, Codec::Dictionary { embed: true }, 1000);
    // The dictionary block follows the header; flip a byte in its middle.
    let info = ReaderBuilder::new()
        .from_slice(&file)
        .blocks()
        .nth(1)
        .unwrap()
        .unwrap();
    assert_eq!(info.block_type, cobsfile::BlockType::Dictionary);
    file[(info.offset + info.size / 2) as usize] ^= 0x10;
    let (records, errors) = ReaderBuilder::new()
        .threads(2)
        .min_split(64)
        .from_shared(&file.clone().into())
        .read_all();
    assert!(records.is_empty());
    // The dictionary block's damage, then the blocks that needed it, unreadable: two ranges
    // (spec 9.1).
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(matches!(&errors[1], Error::Damaged { cause, .. } if !cause.is_damage()));
    for seed in 0..4 {
        assert_same_as_sequential(&file, &ReaderBuilder::new(), seed);
    }
}

#[test]
fn a_newer_version_stops_parallel_readers_too() {
    let ops = text_records(50, 300);
    let mut file = write_file(&ops, Codec::Zstd(3), 1000);
    // A second file declaring version 2 in the middle.
    let mut newer = vec![0];
    newer.extend_from_slice(&common::raw_block(1, &common::header_payload(2)));
    file.extend_from_slice(&newer[1..]);
    file.extend_from_slice(&write_file(&ops, Codec::Zstd(3), 1000)[1..]);
    for seed in 0..4 {
        assert_same_as_sequential(&file, &ReaderBuilder::new(), seed);
    }
    let (records, errors) = ReaderBuilder::new()
        .threads(2)
        .min_split(64)
        .from_shared(&file.clone().into())
        .read_all();
    assert_eq!(records.len(), 50);
    assert!(matches!(errors[..], [Error::UnsupportedVersion { .. }]));
}

#[test]
fn every_codec_reads_the_same_in_parallel() {
    let ops = mixed_records(300, 5000, 17);
    for codec in CODECS {
        let file = write_file(&ops, codec, 8192);
        for given in [false, true] {
            let mut options = ReaderBuilder::new();
            if given {
                options = options.dictionary(dictionary().clone());
            }
            assert_same_as_sequential(&file, &options, 1);
            let (records, errors) = options
                .clone()
                .threads(3)
                .min_split(64)
                .from_shared(&file.clone().into())
                .read_all();
            if codec == (Codec::Dictionary { embed: false }) && !given {
                assert!(records.is_empty() && errors.len() == 1, "{errors:?}");
            } else {
                assert_eq!(records.len(), 300, "{codec:?}");
                assert!(errors.is_empty());
            }
        }
    }
}

#[test]
fn stream_readers_ignore_threads() {
    let ops = text_records(100, 300);
    let file = write_file(&ops, Codec::Zstd(3), 2000);
    let (records, errors) = ReaderBuilder::new()
        .threads(4)
        .from_read(&file[..])
        .read_all();
    assert_eq!((records.len(), errors.len()), (100, 0));
}

#[test]
fn dropping_a_reader_midway_returns() {
    let ops = text_records(3000, 300);
    let file: std::sync::Arc<[u8]> = write_file(&ops, Codec::Zstd(3), 1000).into();
    within_a_minute(move || {
        for threads in [2, 4, 16] {
            // Shared bytes in ranges of 1,000 bytes: the threads read ahead, many parts.
            let options = ReaderBuilder::new().threads(threads).min_split(1000);
            let mut reader = options.from_shared(&file);
            assert_eq!(reader.next_record().unwrap().unwrap(), event(300, 0));
            drop(reader);
            let mut reader = options.from_shared(&file);
            assert!(reader.blocks().take(5).all(|b| b.is_ok()));
            drop(reader);
            // Never used for a full read: no threads started.
            let mut reader = options.from_shared(&file);
            assert!(reader.metadata().next().is_none());
            // Dropped halfway, then again at once with the same options' threads.
            let mut reader = options.from_shared(&file);
            assert_eq!(reader.records().take(1500).count(), 1500);
            drop(reader);
            assert_eq!(options.from_shared(&file).read_all().0.len(), 3000);
        }
    });
}

/// A scan whose ranges each hand over several parts never hangs: when the calling thread moves
/// on to the next range, that range's worker may be waiting on the bound that holds for the
/// others, and another worker waiting to start a range; both must be woken (they once were
/// not, and recovering 50 MB on 2 threads hung every time).
#[test]
fn a_scan_of_many_parts_per_range_does_not_hang() {
    let mut writer = WriterBuilder::new().build(Vec::new()).unwrap();
    let record = vec![b'x'; 5000];
    for _ in 0..6_000 {
        writer.write_record(&record).unwrap();
    }
    let file = std::sync::Arc::new(writer.finish().unwrap());
    for threads in [2, 3] {
        let file = std::sync::Arc::clone(&file);
        let blocks = within_a_minute(move || {
            let options = ReaderBuilder::new().threads(threads);
            let mut out = Vec::new();
            let mut blocks = 0;
            for _ in 0..10 {
                out.clear();
                blocks += cobsfile::recover(&file, &options, &mut out).unwrap().blocks;
            }
            blocks
        });
        assert!(blocks > 10 * 100, "{threads} threads: {blocks} blocks");
    }
}
