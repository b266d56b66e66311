//! Worker threads: `WriterBuilder::threads` writes byte for byte what one thread writes, with
//! and without zstd and dictionaries; memory stays bounded and nothing hangs when a writer is
//! dropped midway or fails.

mod common;

use std::io::{self, Write};
use std::sync::mpsc;
use std::sync::OnceLock;
use std::time::Duration;

use cobsfile::{Compression, Dictionary, Error, ReaderBuilder, WriterBuilder};
use common::{RecordingWriter, Rng};
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
        1 => (prop_oneof![Just(-3i64), Just(9)], prop::collection::vec(any::<u8>(), 0..50))
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

fn builder(codec: Codec, block_size: usize, threads: usize) -> WriterBuilder {
    let builder = WriterBuilder::new().block_size(block_size).threads(threads);
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
fn writes(ops: &[Op], codec: Codec, block_size: usize, threads: usize) -> (Vec<Vec<u8>>, usize) {
    let mut writer = builder(codec, block_size, threads)
        .build(RecordingWriter::default())
        .unwrap();
    apply(&mut writer, ops);
    let inner = writer.finish().unwrap();
    (inner.writes, inner.flushes)
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

proptest! {
    #![proptest_config(common::config(48))]

    /// The parallel writer makes the same `write` calls as one thread (so the same bytes, each
    /// block in one call, in the same order, metadata and raw blocks included) and the same
    /// flushes.
    #[test]
    fn the_parallel_writer_writes_what_one_thread_writes(
        ops in prop::collection::vec(op_strategy(), 0..80),
        codec in codec_strategy(),
        block_size in prop_oneof![Just(1usize), Just(300), Just(4096), Just(20_000)],
    ) {
        let expected = writes(&ops, codec, block_size, 0);
        prop_assert_eq!(&writes(&ops, codec, block_size, 1), &expected);
        for threads in 2..=4 {
            let got = writes(&ops, codec, block_size, threads);
            prop_assert!(got == expected, "{} threads write differently", threads);
        }
    }
}

#[test]
fn every_level_and_dictionary_is_byte_identical() {
    let ops: Vec<Op> = (0..400)
        .map(|i| Op::Record {
            len: 187 + (i * 7919) % 3000,
            text: i % 13 != 0,
            seed: i as u64,
        })
        .collect();
    for codec in [
        Codec::None,
        Codec::Zstd(-1),
        Codec::Zstd(3),
        Codec::Dictionary { embed: true },
        Codec::Dictionary { embed: false },
    ] {
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
            .block_size(100)
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
        assert_eq!(writer.finish().unwrap().writes, 201);
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
    let ops: Vec<Op> = (0..300)
        .map(|i| Op::Record {
            len: 500,
            text: true,
            seed: i,
        })
        .collect();
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
