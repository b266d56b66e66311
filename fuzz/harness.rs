//! The fuzz targets' bodies: one plain function per target, each asserting what must hold for
//! any input, not just that nothing panics.
//!
//! Compiled twice: into each libFuzzer binary under `fuzz/fuzz_targets/` (nightly features,
//! sanitizers) and into `tests/fuzz_corpus.rs`, which replays every kept input on stable in
//! `cargo test`. So it depends only on the library and the standard library, and it installs a
//! global allocator that measures, per thread, the peak of bytes live while a reader runs.

#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::VecDeque;
use std::io::{self, Read};
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use cobsfile::{
    cobs, varint, Appender, AppenderBuilder, BlockType, Cause, Compression, Dictionary, Durability,
    Ending, Error, Index, Limits, RangeSink, ReaderBuilder, Window, WriterBuilder,
};

// The tests' temporary file, shared by path: the harness depends on std and the library only.
#[path = "../tests/common/temp_file.rs"]
mod temp_file;
use temp_file::TempFile;

// The power-cut scenario of `tests/power_loss.rs`, driven here by the fuzzer's bytes.
#[path = "../tests/common/power_cut.rs"]
mod power_cut;

/// The largest block the slice and mapped readers accept here.
const SLICE_MAX_BLOCK: usize = 1 << 16;
/// The largest block the streaming reader accepts here.
const STREAM_MAX_BLOCK: usize = 1 << 12;
/// The dictionaries a reader here keeps from its input, by count and bytes together: small, so
/// that a flood of dictionary blocks (issue 11, finding 6) meets them within a fuzzer's input.
const MAX_DICTIONARIES: usize = 8;
const MAX_DICTIONARY_BYTES: usize = 16 * 1024;
/// What the kept dictionaries may cost a reader: their bytes, and a map entry each.
const DICTIONARY_MEMORY: usize = MAX_DICTIONARY_BYTES + MAX_DICTIONARIES * 256;
/// What a streaming reader asks of its input at a time (`source.rs`).
const READ_CHUNK: usize = 256 * 1024;
/// Allocations a reader may hold besides its block buffers: small vectors, error strings.
const SLACK: usize = 64 * 1024;
/// How much more than its length a streaming reader's window buffer may allocate: none
/// (`StreamSource::refill` grows it with `reserve_exact`; it once let `Vec` double it, which
/// `fuzz/regressions/read_stream/window-allocation-doubles` caught).
const WINDOW_GROWTH: usize = 1;

/// A target: checks one input, panicking when an invariant fails.
pub type Target = fn(&[u8]);

/// Every target, by name, for the corpus replay.
pub const TARGETS: &[(&str, Target)] = &[
    ("read_slice", read_slice),
    ("read_stream", read_stream),
    ("block", block),
    ("cobs_decode", cobs_decode),
    ("cobs_round_trip", cobs_round_trip),
    ("varint", varint),
    ("zstd", zstd),
    ("append_after_garbage", append_after_garbage),
    ("recover", recover),
    ("scan", scan),
    ("damage", damage),
    ("seek", seek),
    ("follow", follow),
    ("power_loss", power_loss),
    ("finish_log", finish_log),
    ("seal", seal),
    #[cfg(feature = "avro")]
    ("avro_read", avro_read),
    #[cfg(feature = "avro")]
    ("avro_import", avro_import),
];

// ---------------------------------------------------------------------------------------------
// Targets.

/// The slice reader over arbitrary bytes: its items tile the input (blocks between sync bytes,
/// damage inside the input, never two damaged ranges in a row), its memory stays within a few
/// blocks of its limit, every data block's records write and read back the same, the metadata
/// scan reports damage inside the input, and the mapped reader and a reader on 2 threads see
/// exactly what it sees.
pub fn read_slice(data: &[u8]) {
    let options = slice_options();
    let (summary, peak) = measure(|| summarize(&mut options.from_slice(data)));
    let bound = 4 * SLICE_MAX_BLOCK + DICTIONARY_MEMORY + SLACK;
    assert!(
        peak <= bound,
        "the slice reader held {peak} bytes at once, over its bound of {bound}"
    );

    let items = block_items(&mut options.from_slice(data));
    check_tiling(data, &items);
    for b in items.iter().flatten() {
        rewrite_and_compare(b);
    }
    let (records, errors) = options.from_slice(data).read_all();
    assert_eq!(summary, Summary::of(&records, &errors));

    for item in options.from_slice(data).metadata() {
        if let Err(e) = item {
            check_in_range(&e, data.len());
        }
    }

    let threads = 2;
    let (threaded_summary, peak) =
        measure_all(|| summarize(&mut options.clone().threads(threads).from_slice(data)));
    assert_eq!(threaded_summary, summary);
    // Each worker decodes at most 2 frames ahead of the caller (`parallel.rs`), and the
    // caller's decoder keeps the dictionaries.
    let bound = (2 * threads + 4) * SLICE_MAX_BLOCK + DICTIONARY_MEMORY + (threads + 1) * SLACK;
    assert!(
        peak <= bound,
        "the reader on {threads} threads held {peak} bytes at once, over its bound of {bound}"
    );
    let threaded = options.clone().threads(threads).from_slice(data).read_all();
    assert_eq!(threaded.0, records, "2 threads read other records");
    assert_eq!(
        faults(&threaded.1),
        faults(&errors),
        "2 threads found other damage"
    );

    check_window(&options, data);

    let file = TempFile::with_contents(data);
    let mapped = cobsfile::open(&file.0).expect("map the input");
    assert_eq!(mapped.bytes(), data);
    let (mapped_records, mapped_errors) = mapped.reader_with(&options).read_all();
    assert_eq!(
        mapped_records, records,
        "the mapped reader read other records"
    );
    assert_eq!(
        faults(&mapped_errors),
        faults(&errors),
        "the mapped reader found other damage"
    );
}

/// Records with their event times, as `reader` returns them.
fn timed_records<S: cobsfile::Source>(reader: &mut cobsfile::Reader<S>) -> Vec<(Vec<u8>, i64)> {
    let mut records = Vec::new();
    while let Some(item) = reader.next_record() {
        if let Ok(record) = item {
            let record = record.to_vec();
            if let Some(time) = reader.record_time() {
                records.push((record, time));
            }
        }
    }
    records
}

/// A read of a time window (spec 9.9), one drawn from the times the input holds: it returns
/// the full read's records whose times lie in it, on one thread and on two. A read by a time
/// index trusts the index about the blocks it does not read (like a seek, spec 9.6), so there
/// it returns some of them, in order, and all of them when the index tells the truth.
fn check_window(options: &ReaderBuilder, data: &[u8]) {
    let full = timed_records(&mut options.from_slice(data));
    let seed = fnv(data);
    let pick = |k: u64| {
        full.get((k % full.len().max(1) as u64) as usize)
            .map(|r| r.1)
    };
    let (a, b) = (pick(seed), pick(seed >> 17));
    let window = match (a, b, seed % 3) {
        (Some(a), Some(b), 0) => Window::new(Some(a.min(b)), Some(a.max(b))),
        (Some(a), _, 1) => Window::new(Some(a), None),
        (_, Some(b), _) => Window::new(None, Some(b)),
        _ => Window::new(Some(i64::MIN), Some(i64::MAX)),
    };
    let want: Vec<_> = full
        .iter()
        .filter(|r| window.contains(r.1))
        .cloned()
        .collect();
    let windowed = options.clone().window(window);
    let mut reader = windowed.from_slice(data);
    let planned = reader.reads_by_time_index();
    let got = timed_records(&mut reader);
    if planned {
        let mut rest = want.iter();
        assert!(
            got.iter().all(|g| rest.any(|w| w == g)),
            "a window read by the time index returned records a full read does not"
        );
    } else {
        assert_eq!(got, want, "a window read returned other records");
    }
    let shared: std::sync::Arc<[u8]> = data.into();
    let threaded = timed_records(
        &mut windowed
            .clone()
            .threads(2)
            .min_split(64)
            .from_shared(&shared),
    );
    assert_eq!(
        threaded, got,
        "a window read on 2 threads returned other records"
    );
    // Range reads, cut small, plan each range as one reader plans the whole input.
    let mut ranged = Collect::default();
    let on_block = |records: &mut Vec<Vec<u8>>, block: &cobsfile::Block<'_>| {
        records.extend(block.records().map(<[u8]>::to_vec));
    };
    let ranges = windowed.clone().threads(3).min_split(64);
    if ranges.read_ranges(data, on_block, &mut ranged).is_ok() {
        let records: Vec<&[u8]> = got.iter().map(|r| r.0.as_slice()).collect();
        assert!(
            ranged.records.iter().map(Vec::as_slice).eq(records),
            "a window read by ranges returned other records"
        );
    }
}

/// The streaming reader over arbitrary bytes fed in chunks of pseudo-random sizes: it returns
/// the slice reader's records, as many damaged ranges, each inside the input, and its window
/// and peak memory stay under the bounds its block limit sets, however long the input.
pub fn read_stream(data: &[u8]) {
    let options = limited(STREAM_MAX_BLOCK);
    let (slice_records, slice_errors) = options.from_slice(data).read_all();
    let window = 2 * STREAM_MAX_BLOCK + READ_CHUNK + 64;
    let seed = fnv(data);
    let ((summary, capacity), peak) = measure(|| {
        let mut stream = options.from_read(Chunked::new(data, seed));
        let summary = summarize(&mut stream);
        (summary, stream.source().capacity())
    });
    assert_eq!(summary, Summary::of(&slice_records, &slice_errors));
    assert!(
        capacity <= window,
        "stream window of {capacity} bytes, over its bound of {window}"
    );
    let bound = WINDOW_GROWTH * window + 3 * STREAM_MAX_BLOCK + DICTIONARY_MEMORY + SLACK;
    assert!(
        peak <= bound,
        "the streaming reader held {peak} bytes at once, over its bound of {bound}"
    );
    let (records, errors) = options.from_read(Chunked::new(data, seed)).read_all();
    assert_eq!(
        records, slice_records,
        "the stream and slice readers disagree"
    );
    assert_eq!(errors.len(), slice_errors.len());
    for e in &errors {
        check_in_range(e, data.len());
    }
}

/// One block, decoded through a reader over the byte range of its opening sync byte (the path
/// a reader of a split file takes, no index involved): the input, between two sync bytes, is
/// the block. The range reader sees only that block, exactly as a full reader sees it first,
/// with damage inside the input; a decoded block writes and reads back the same.
pub fn block(data: &[u8]) {
    let mut framed = Vec::with_capacity(data.len() + 2);
    framed.push(0);
    framed.extend_from_slice(data);
    framed.push(0);
    let options = ReaderBuilder::new().max_body_size(SLICE_MAX_BLOCK);
    let items = block_items(&mut options.from_slice_range(&framed, 0..1));
    for (i, item) in items.iter().enumerate() {
        match item {
            Ok(b) => {
                assert_eq!(b.offset, 0, "item {i}: a block that does not open at 0");
                assert!(b.offset + b.size < framed.len() as u64);
                rewrite_and_compare(b);
            }
            Err(e) => check_in_range(e, framed.len()),
        }
    }
    assert!(
        items.iter().filter(|i| i.is_ok()).count() <= 1,
        "the range 0..1 opened more than one block"
    );
    // The full reader's first item: the same block, or damage from the same byte, which the
    // range reader clips at the first sync byte after its range that can open a block.
    // An input that starts with 0x00 opens its block (or damage) after the range.
    let full = block_items(&mut options.from_slice(&framed));
    if data.first() == Some(&0) {
        return;
    }
    match (items.first(), full.first()) {
        (None, None) => {}
        (Some(Ok(a)), Some(Ok(b))) => assert_eq!(a, b, "the range and full readers disagree"),
        (
            Some(Err(Error::Damaged { start, end, .. })),
            Some(Err(Error::Damaged {
                start: full_start,
                end: full_end,
                ..
            })),
        ) => assert!(
            start == full_start && end <= full_end,
            "range reader damage {start}..{end}, full reader {full_start}..{full_end}"
        ),
        _ => assert_eq!(
            summarize_items(&items[..1.min(items.len())]),
            summarize_items(&full[..1.min(full.len())]),
            "the range and full readers disagree on the first item"
        ),
    }
    let _ = Index::find(&framed);
}

/// COBS decoding of arbitrary bytes: the same result as the plain reference decoder, errors
/// included (also on the bytes made zero-free and repeated, which reaches the decoder that walks
/// several chains at once); never more bytes out than in; an error names an offset inside the
/// input; what decodes encodes back to bytes that decode to it again.
pub fn cobs_decode(data: &[u8]) {
    let (ours, decoded) = decode_as_reference(data);
    // The same bytes without zeros, as the frame check hands bodies to the decoder, and
    // repeated past the size at which several chains are walked at once.
    let zero_free: Vec<u8> = data.iter().map(|&b| b.max(1)).collect();
    let long = zero_free.repeat(if zero_free.is_empty() {
        0
    } else {
        4096 / zero_free.len() + 1
    });
    for body in [&zero_free, &long] {
        let _checked = decode_as_reference(body);
    }
    match ours {
        Ok(()) => {
            assert!(decoded.len() <= data.len(), "decoding grew the input");
            let mut encoded = Vec::new();
            cobs::encode(&decoded, &mut encoded);
            assert!(!encoded.contains(&0));
            let mut again = Vec::new();
            cobs::decode(&encoded, &mut again).expect("an encoding decodes");
            assert_eq!(again, decoded);
        }
        Err(e) => assert!(e.offset < data.len().max(1), "error offset {}", e.offset),
    }
}

/// Decodes `src` with the library, checks the outcome against the plain reference decoder
/// (errors included), and returns it.
fn decode_as_reference(src: &[u8]) -> (Result<(), cobs::DecodeError>, Vec<u8>) {
    let mut decoded = Vec::new();
    let ours = cobs::decode(src, &mut decoded);
    match cobs::reference_decode(src) {
        Ok(expected) => assert_eq!(decoded, expected, "differs from the reference decoder"),
        Err(e) => assert_eq!(ours, Err(e), "error differs from the reference decoder"),
    }
    (ours, decoded)
}

/// COBS encoding of arbitrary bytes: no 0x00, within `max_encoded_len`, decodes back exactly,
/// both whole and through the incremental encoder fed in pieces.
pub fn cobs_round_trip(data: &[u8]) {
    let mut encoded = Vec::new();
    let n = cobs::encode(data, &mut encoded);
    assert_eq!(n, encoded.len());
    assert!(!encoded.contains(&0), "the encoding holds a 0x00");
    assert!(encoded.len() <= cobs::max_encoded_len(data.len()));
    let mut decoded = Vec::new();
    cobs::decode(&encoded, &mut decoded).expect("an encoding decodes");
    assert_eq!(decoded, data, "the round trip changed the bytes");

    // The same bytes pushed in pieces whose sizes the bytes choose.
    let mut pieces = Vec::from(&b"prefix"[..]);
    let start = pieces.len();
    let mut encoder = cobs::Encoder::new(&mut pieces);
    let mut rest = data;
    while !rest.is_empty() {
        let take = (usize::from(rest[0]) % 300 + 1).min(rest.len());
        encoder.push(&rest[..take]);
        rest = &rest[take..];
    }
    encoder.finish(start);
    assert_eq!(
        &pieces[start..],
        &encoded[..],
        "the encoder fed in pieces differs"
    );
}

/// Varints: what reads is in shortest form and writes back to the same bytes; a value taken
/// from the input writes without a 0x00 (unless 0) and reads back exactly.
pub fn varint(data: &[u8]) {
    match varint::read(data) {
        Ok((n, used)) => {
            assert!((1..=varint::MAX_LEN).contains(&used) && used <= data.len());
            assert_eq!(
                varint::encoded_len(n),
                used,
                "a varint not in shortest form read"
            );
            let mut out = Vec::new();
            varint::write(n, &mut out);
            assert_eq!(out, data[..used], "reads from other bytes than it writes");
        }
        Err(varint::VarintError::Truncated) => assert!(
            data.len() < varint::MAX_LEN && data.iter().all(|b| b & 0x80 != 0),
            "truncated, yet a last byte is there"
        ),
        Err(_) => {}
    }
    let mut word = [0u8; 8];
    let take = data.len().min(8);
    word[..take].copy_from_slice(&data[..take]);
    let n = i64::from_le_bytes(word);
    assert_eq!(varint::unzigzag(varint::zigzag(n)), n);
    let mut out = Vec::new();
    varint::write(n, &mut out);
    let mut fixed = [0u8; varint::MAX_LEN];
    let len = varint::encode(n, &mut fixed);
    assert_eq!(out, fixed[..len]);
    assert_eq!(varint::encoded_len(n), len);
    assert!(n == 0 || !out.contains(&0), "{n} encodes with a 0x00");
    assert_eq!(varint::read(&out), Ok((n, len)));
}

/// zstd blocks, with or without a dictionary (embedded or given): the input chooses the
/// records, the level, the dictionary and the damage done to the written file. Every record
/// read back is one that was written (as a multiset), damage lies inside the file, and an
/// undamaged file reads back exactly.
pub fn zstd(data: &[u8]) {
    let mut input = Unstructured(data);
    let flags = input.u8();
    let level = i32::from(input.u8() % 10) - 2; // -2..=7: fast enough to fuzz
    let block_target = 64 + usize::from(input.u16()) % 4096;
    let dictionary = (flags & 1 != 0).then(|| {
        let len = 8 + usize::from(input.u8());
        Dictionary::new(input.bytes(len).to_vec())
    });
    let embed = flags & 2 != 0;
    let records = input.records(64, 2048);

    let mut builder = WriterBuilder::new()
        .block_target(block_target)
        .compression(Compression::zstd(level).expect("a valid level"))
        .index(flags & 4 != 0);
    if let Some(d) = &dictionary {
        builder = builder.dictionary(d.clone(), embed);
    }
    let mut writer = match builder.build(Vec::new()) {
        Ok(writer) => writer,
        // Bytes with zstd's dictionary magic that zstd cannot load: a writer refuses them
        // (and a reader reports the block that embeds them, spec 8.4).
        Err(Error::Zstd(_)) if dictionary.is_some() => return,
        Err(e) => panic!("build a writer: {e}"),
    };
    for r in &records {
        writer.write_record(r).expect("write a record");
    }
    let clean = writer.finish().expect("finish");

    let mut options = ReaderBuilder::new();
    if let (Some(d), false) = (&dictionary, embed) {
        options = options.dictionary(d.clone());
    }
    let (read, errors) = options.from_slice(&clean).read_all();
    assert!(errors.is_empty(), "an undamaged file reads with {errors:?}");
    assert_eq!(read, records, "an undamaged file reads back other records");

    let mut damaged = clean.clone();
    let mut edits = 0;
    while let Some(at) = input.u16_opt() {
        let op = input.u8();
        if damaged.is_empty() || edits == 16 {
            break;
        }
        edits += 1;
        let at = usize::from(at) % damaged.len();
        match op % 4 {
            0 => damaged[at] ^= 1 << (op / 4 % 8),
            1 => damaged.insert(at, input.u8()),
            2 => {
                damaged.remove(at);
            }
            _ => damaged[at] = 0,
        }
    }
    let (read, errors) = options.from_slice(&damaged).read_all();
    for e in &errors {
        check_in_range(e, damaged.len());
    }
    let mut written: Vec<&[u8]> = records.iter().map(Vec::as_slice).collect();
    written.sort_unstable();
    for r in &read {
        let at = written
            .binary_search(&r.as_slice())
            .unwrap_or_else(|_| panic!("record {r:02x?} was read but not written (or once)"));
        written.remove(at);
    }
    if damaged == clean {
        assert!(errors.is_empty() && read == records);
    }
}

/// Appending after arbitrary bytes (optionally behind a valid header): an appender refuses the
/// file only when it does not start with a header of a version this library reads (or, as a
/// power cut leaves one, zeros in its place with an intact block after them: spec 11.1, rule
/// 1); when it opens it, the records appended are all there, in order, as the last records of
/// the file, and any damage lies inside the bytes that were there before.
pub fn append_after_garbage(data: &[u8]) {
    let mut input = Unstructured(data);
    let flags = input.u8();
    let mut before = Vec::new();
    if flags & 1 != 0 {
        let writer = WriterBuilder::new().index(false).build(Vec::new());
        before = writer.expect("build").finish().expect("finish");
    }
    let garbage_len = usize::from(input.u16()) % 4096;
    before.extend_from_slice(input.bytes(garbage_len));
    let records = input.records(16, 512);

    let file = TempFile::with_contents(&before);
    let starts_with_header = starts_with_header(&before);
    let opened = AppenderBuilder::new()
        .durability(Durability::Flush)
        .block_target(256)
        .open(&file.0);
    let mut log = match opened {
        Ok(log) => log,
        Err(e @ Error::UnsupportedVersion { .. }) => {
            // Refused for a newer version only where a full read stops for one.
            let (_, errors) = ReaderBuilder::new().from_slice(&before).read_all();
            assert!(
                errors
                    .iter()
                    .any(|e| matches!(e, Error::UnsupportedVersion { .. })),
                "refused for a newer version ({e}) that a full read does not meet"
            );
            return;
        }
        Err(e) => {
            assert!(
                !starts_with_header,
                "refused a file that starts with a header block: {e}"
            );
            return;
        }
    };
    let header_lost = log.opened().header_lost;
    // One or two sync bytes alone are a file with no blocks, started again (spec 5).
    let no_blocks = before.len() <= 2 && before.iter().all(|&b| b == 0);
    assert_eq!(
        header_lost,
        !no_blocks && !starts_with_header,
        "opened a file without a header block: {:?}",
        log.opened()
    );
    if header_lost {
        // Zeros where the header's bytes are not: a power cut's, not any file's.
        let empty = WriterBuilder::new().index(false).build(Vec::new());
        let start = empty.expect("build").finish().expect("finish");
        assert!(
            before.len() >= 19 && (0..19).all(|i| before[i] == start[i] || before[i] == 0),
            "took a file for one whose header a power cut took: {:02x?}",
            &before[..before.len().min(19)]
        );
    }
    let completed = log.opened().completed;
    let log_block = log.opened().log_block;
    for r in &records {
        log.append(r).expect("append");
    }
    log.close().expect("close");
    let after = std::fs::read(&file.0).expect("read the log back");
    check_appended(&before, &after, completed, &records);
    // An appender leaves an open log (spec 9.5.1), whatever the file was: it wrote a log
    // block first unless the file already was one.
    let report = ReaderBuilder::new().verify(&after).expect("verify the log");
    assert_eq!(
        report.ending,
        Ending::Open,
        "not an open log after appending (log block written: {log_block})"
    );
    drop(Appender::open(&file.0).expect("reopen the log"));
    let reopened = std::fs::read(&file.0).expect("read the log back");
    assert_eq!(reopened, after, "reopening a closed log changed it");
}

/// Finishing a log in place (spec 11.3), of a log appenders wrote (with times, by several
/// openings, so with fences) and then edited (bytes flipped, cut, garbage appended), or of
/// arbitrary bytes: it refuses only what an appender refuses; a full read of the finished file
/// returns the records a full read returned before, in order; the file is finished, finishing
/// it again changes nothing, and its index (when written) counts those records, seeks to each
/// of them, and lists every byte up to itself.
pub fn finish_log(data: &[u8]) {
    let mut input = Unstructured(data);
    let flags = input.u8();
    let file = TempFile::with_contents(&[]);
    if flags & 1 != 0 {
        for round in 0..1 + flags / 2 % 3 {
            let records = input.records(12, 300);
            let mut log = AppenderBuilder::new()
                .durability(Durability::Flush)
                .block_target(1 + usize::from(input.u16()) % 600)
                .open(&file.0)
                .expect("open");
            for (i, r) in records.iter().enumerate() {
                if (i + usize::from(round)) % 3 == 0 {
                    log.append(r).expect("append");
                } else {
                    log.append_at(r, i64::from(input.u16()) - 30_000)
                        .expect("append");
                }
            }
            log.close().expect("close");
        }
    }
    let mut before = std::fs::read(&file.0).expect("read");
    for _ in 0..input.u8() % 4 {
        let at = usize::from(input.u16());
        match input.u8() % 3 {
            0 if !before.is_empty() => {
                let at = at % before.len();
                before[at] ^= input.u8() | 1;
            }
            1 => before.truncate(at.min(before.len())),
            _ => {
                let n = usize::from(input.u8());
                before.extend_from_slice(input.bytes(n));
            }
        }
    }
    std::fs::write(&file.0, &before).expect("write");
    let (records, _) = ReaderBuilder::new().from_slice(&before).read_all();
    let finished = match cobsfile::finish_log(&file.0, &ReaderBuilder::new()) {
        Ok(finished) => finished,
        Err(e) => {
            // Refused only where an appender refuses.
            let appender = AppenderBuilder::new().open(&file.0);
            assert!(
                appender.is_err(),
                "finish refused ({e}) a log an appender opens"
            );
            return;
        }
    };
    let after = std::fs::read(&file.0).expect("read back");
    let (again, _) = ReaderBuilder::new().from_slice(&after).read_all();
    // A last block whole but for its closing sync byte is completed (spec 11.3, 11.1 rule 2):
    // its records come after the others. Nothing else changes.
    let completed = before.last().is_some_and(|&b| b != 0) && again.len() > records.len();
    assert!(
        again == records || (completed && again.starts_with(&records)),
        "finishing changed the records: {finished:?}"
    );
    let records = again;
    if let cobsfile::Finish::Empty = finished {
        // No bytes, or one or two sync bytes alone: no blocks (spec 5), left as they are.
        assert!(
            before.len() <= 2 && before.iter().all(|&b| b == 0),
            "{before:?}"
        );
        assert_eq!(after, before);
        return;
    }
    let report = ReaderBuilder::new().verify(&after).expect("verify");
    assert_eq!(report.ending, Ending::Finished, "{finished:?}");
    let second = cobsfile::finish_log(&file.0, &ReaderBuilder::new()).expect("again");
    assert_eq!(second, cobsfile::Finish::Already);
    assert!(
        std::fs::read(&file.0).expect("read") == after,
        "a second finish changed it"
    );
    let cobsfile::Finish::Finished(done) = finished else {
        return;
    };
    if !done.indexed {
        return;
    }
    let index = cobsfile::Index::find(&after).expect("the index written is usable");
    assert_eq!(index.start(), 0);
    assert_eq!(index.records(), records.len() as u64);
    let mut at = 0;
    for e in index.entries() {
        assert_eq!(e.offset, at);
        at += e.size;
    }
    assert_eq!(at, index.offset());
    for k in [0, records.len() / 2, records.len().saturating_sub(1)] {
        if k < records.len() {
            // Damage the seek meets before the record is reported first.
            let mut reader = ReaderBuilder::new().from_slice_at_record(&after, k as u64);
            let got = loop {
                match reader.next_record().expect("a record") {
                    Ok(record) => break record.to_vec(),
                    Err(Error::Damaged { .. }) => continue,
                    Err(e) => panic!("seek to record {k}: {e}"),
                }
            };
            assert!(got == records[k], "seek to record {k}");
        }
    }
}

/// Recovering arbitrary bytes: fails only on a newer format version; the output verifies
/// clean, recovers to itself byte for byte, and holds the records a full read of the input
/// returns, in order.
pub fn recover(data: &[u8]) {
    let options = ReaderBuilder::new().max_body_size(SLICE_MAX_BLOCK);
    let mut out = Vec::new();
    // Recovery never fails on its input: a newer version's header stops it there (spec 9.5),
    // where a full read stops too.
    let recovery = match cobsfile::recover(data, &options, &mut out) {
        Ok(r) => r,
        Err(e) => panic!("recover failed: {e}"),
    };
    let (_, read_errors) = options.from_slice(data).read_all();
    let stopped = read_errors.iter().find_map(|e| match e {
        Error::UnsupportedVersion {
            offset, version, ..
        } => Some((*offset, *version)),
        _ => None,
    });
    assert_eq!(
        recovery.newer_version.map(|n| (n.offset, n.version)),
        stopped,
        "recovery stops where a full read stops"
    );
    assert_eq!(recovery.written, out.len() as u64);
    for d in &recovery.report.damaged {
        assert!(d.range.start < d.range.end && d.range.end <= data.len() as u64);
    }
    let report = options.verify(&out).expect("verify the output");
    assert!(
        report.is_clean(),
        "the recovered file has damage: {report:?}"
    );
    let mut again = Vec::new();
    let second = cobsfile::recover(&out, &options, &mut again).expect("recover the output");
    assert!(second.is_lossless());
    assert!(again == out, "recovering the output changed it");
    let (input_records, _) = options.from_slice(data).read_all();
    let (output_records, errors) = options.from_slice(&out).read_all();
    assert!(errors.is_empty());
    assert_eq!(
        output_records, input_records,
        "recovery lost or added records"
    );
    assert_eq!(recovery.report.records, input_records.len() as u64);
}

/// Reading a slice in ranges on 2 threads, with a split size the input chooses: the report is
/// the single reader's, and the records collected range by range are the single reader's.
pub fn scan(data: &[u8]) {
    let (split, bytes) = match data {
        [a, rest @ ..] => (1 + u64::from(*a), rest),
        [] => (1, data),
    };
    let single = slice_options();
    let threads = 2;
    let threaded = single.clone().threads(threads).min_split(split);
    let expected = match cobsfile::verify(&mut single.from_slice(bytes)) {
        Ok(mut report) => {
            if let Some(index) = Index::find(bytes).filter(|i| i.start() == 0) {
                report.attribute(&index);
            }
            Ok(report)
        }
        Err(e) => Err(e.to_string()),
    };
    let got = threaded.verify(bytes).map_err(|e| e.to_string());
    assert_eq!(
        got, expected,
        "verify on 2 threads differs from one reader's"
    );
    if expected.is_err() {
        return;
    }
    let mut sink = Collect::default();
    let report = threaded
        .read_ranges(
            bytes,
            |records: &mut Vec<Vec<u8>>, block| records.extend(block.records().map(<[u8]>::to_vec)),
            &mut sink,
        )
        .expect("scan");
    let (records, _) = single.from_slice(bytes).read_all();
    assert_eq!(sink.records, records, "scan collected other records");

    // What range reads hold at once, the sink keeping nothing: each range's reader at most a
    // few blocks and the dictionaries before and in its range (issue 11, finding 5), and the
    // calling thread the parts in flight, whatever the input's compression ratio.
    let (counted, peak) = measure_all(|| {
        let mut total = CountSink::default();
        threaded
            .read_ranges(
                bytes,
                |n: &mut u64, block| *n += block.records().count() as u64,
                &mut total,
            )
            .map(|_| total.0)
    });
    assert_eq!(counted.expect("range reads"), records.len() as u64);
    let bound = (threads + 1) * (4 * SLICE_MAX_BLOCK + DICTIONARY_MEMORY + SLACK);
    assert!(
        peak <= bound,
        "range reads on {threads} threads held {peak} bytes at once, over its bound of {bound}"
    );
    assert_eq!(report.records, records.len() as u64);
    let reported: Vec<_> = sink.damage.iter().map(|d| d.range.clone()).collect();
    let expected: Vec<_> = report.damaged.iter().map(|d| d.range.clone()).collect();
    assert_eq!(
        reported, expected,
        "the sink was given other damage than reported"
    );

    // The same range read by byte ranges, fetched in pieces as small as the input says:
    // the same records, damage and report.
    let first = 1 + split % 97;
    let remote = cobsfile::Remote::open(InMemory(bytes))
        .expect("an in-memory fetch")
        .fetch_sizes(first, first * 3);
    let mut fetched = Collect::default();
    let got = remote
        .read_ranges(
            &threaded,
            |records: &mut Vec<Vec<u8>>, block| records.extend(block.records().map(<[u8]>::to_vec)),
            &mut fetched,
        )
        .expect("a remote scan");
    assert_eq!(got, report, "a remote scan reported otherwise");
    assert_eq!(
        fetched.records, sink.records,
        "a remote scan read other records"
    );
    assert_eq!(
        remote.metadata(&single).expect("metadata"),
        single
            .from_slice(bytes)
            .metadata()
            .filter_map(Result::ok)
            .collect::<Vec<_>>(),
        "a remote file's metadata differs"
    );
}

/// A file in memory, served by byte ranges.
struct InMemory<'a>(&'a [u8]);

impl cobsfile::Fetch for InMemory<'_> {
    fn size(&self) -> u64 {
        self.0.len() as u64
    }
    fn fetch(&self, ranges: &[std::ops::Range<u64>]) -> std::io::Result<Vec<Vec<u8>>> {
        Ok(ranges
            .iter()
            .map(|r| self.0[r.start as usize..r.end as usize].to_vec())
            .collect())
    }
}

/// The promise under damage, on a file written from the input's choices (records, metadata
/// and application blocks, block size, zstd or not, index or not) and then damaged by edits
/// the input also chooses: every block whose bytes the edits left whole, both sync bytes
/// included, comes back at its new position with its content; every block that comes back
/// holds the content of a block that was written (so every record read was written); damage
/// lies inside the file; the streaming reader reads what the slice reader reads; recovery
/// keeps exactly what a read returns.
///
/// The edits are those a disk, a copy or a crash makes, not forgeries: at most 3 bit flips in
/// all (CRC-32 detects any 3 flipped bits in a block this size, spec 6), zeroed, deleted and
/// inserted ranges, and truncation. Inserted bytes come from a generator the input seeds, so
/// the fuzzer cannot write a block with a valid CRC into them.
pub fn damage(data: &[u8]) {
    let mut input = Unstructured(data);
    let flags = input.u8();
    let block_target = 32 + usize::from(input.u16()) % 2048;
    let mut builder = WriterBuilder::new()
        .block_target(block_target)
        .index(flags & 1 != 0);
    if flags & 2 != 0 {
        builder = builder.compression(Compression::zstd(1).expect("level 1"));
    }
    let every = 1 + usize::from(flags >> 4);
    let records = input.records(64, 1024);
    let mut writer = builder.build(Vec::new()).expect("build a writer");
    for (i, r) in records.iter().enumerate() {
        writer.write_record(r).expect("write a record");
        if i % every == every - 1 {
            match flags >> 2 & 3 {
                1 => writer
                    .write_metadata([(format!("k{i}"), input.bytes(12).to_vec())])
                    .expect("write metadata"),
                2 => writer
                    .write_raw_block(-1 - i64::from(input.u8() % 4), input.bytes(16))
                    .expect("write a raw block"),
                _ => {}
            }
        }
    }
    let clean = writer.finish().expect("finish");
    let options = ReaderBuilder::new().max_body_size(SLICE_MAX_BLOCK);
    let report = options.verify(&clean).expect("verify the clean file");
    assert!(
        report.is_clean() && report.ending == Ending::Finished,
        "a file just written is not clean and finished: {report:?}"
    );
    let written: Vec<BlockItem> = block_items(&mut options.from_slice(&clean))
        .into_iter()
        .map(|i| i.expect("a file just written reads clean"))
        .collect();
    let read: Vec<&Vec<u8>> = written.iter().flat_map(|b| &b.records).collect();
    assert!(
        read.into_iter().eq(&records),
        "the clean file reads back other records"
    );

    // Damage, every byte tracked back to its offset in the clean file (None: not from there).
    let mut bytes = clean.clone();
    let mut origin: Vec<Option<usize>> = (0..clean.len()).map(Some).collect();
    let mut flips = 0;
    let mut seed = fnv(data);
    for _ in 0..8 {
        let Some(at) = input.u16_opt() else { break };
        let op = input.u8();
        let len = bytes.len();
        let at = usize::from(at) % (len + 1);
        let n = 1 + usize::from(op >> 3);
        match op % 5 {
            0 if at < len && flips < 3 => {
                flips += 1;
                bytes[at] ^= 1 << (op >> 3 & 7);
                origin[at] = None;
            }
            1 => {
                let end = (at + n).min(len);
                for (b, o) in bytes[at..end].iter_mut().zip(&mut origin[at..end]) {
                    if *b != 0 {
                        *b = 0;
                        *o = None;
                    }
                }
            }
            2 => {
                let end = (at + n).min(len);
                bytes.drain(at..end);
                origin.drain(at..end);
            }
            3 => {
                let new: Vec<u8> = (0..n)
                    .map(|_| {
                        seed = seed
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        // A zero now and then, as real garbage has.
                        let b = (seed >> 56) as u8;
                        if b < 16 {
                            0
                        } else {
                            b
                        }
                    })
                    .collect();
                bytes.splice(at..at, new);
                origin.splice(at..at, std::iter::repeat_n(None, n));
            }
            4 => {
                bytes.truncate(at);
                origin.truncate(at);
            }
            _ => {}
        }
    }

    let items = block_items(&mut options.from_slice(&bytes));
    check_tiling(&bytes, &items);
    let mut at_position = vec![None; clean.len()];
    for (q, o) in origin.iter().enumerate() {
        if let Some(o) = *o {
            at_position[o] = Some(q);
        }
    }
    let got: Vec<&BlockItem> = items.iter().flatten().collect();
    for w in &written {
        let (o, size) = (w.offset as usize, w.size as usize);
        let Some(q) = at_position[o] else { continue };
        let whole = (0..=size).all(|i| origin.get(q + i) == Some(&Some(o + i)));
        if !whole {
            continue;
        }
        let back = got.iter().find(|b| b.offset == q as u64);
        let expected = BlockItem {
            offset: q as u64,
            ..w.clone()
        };
        assert_eq!(
            back,
            Some(&&expected),
            "the untouched block at {o} (now {q}) did not come back"
        );
    }
    for b in &got {
        assert!(
            written.iter().any(|w| BlockItem {
                offset: b.offset,
                size: b.size,
                ..w.clone()
            } == **b),
            "a block that was never written came back at {}: {b:?}",
            b.offset
        );
    }

    // What the full read above returned: its blocks' records and its damage.
    let slice_records: Vec<Vec<u8>> = got.iter().flat_map(|b| b.records.clone()).collect();
    let slice_errors = items.iter().filter(|i| i.is_err()).count();
    let (stream_records, stream_errors) = options.from_read(Chunked::new(&bytes, seed)).read_all();
    assert_eq!(
        stream_records, slice_records,
        "the stream and slice readers disagree"
    );
    assert_eq!(stream_errors.len(), slice_errors);
    let mut out = Vec::new();
    cobsfile::recover(&bytes, &options, &mut out).expect("recover");
    let (recovered, errors) = options.from_slice(&out).read_all();
    assert!(
        errors.is_empty(),
        "the recovered file has damage: {errors:?}"
    );
    assert_eq!(
        recovered, slice_records,
        "recovery kept other records than a read returns"
    );

    // Seeking with the index: exact on the clean file, a suffix of a full read on the damaged.
    let k = u64::from(input.u16()) % (records.len() as u64 + 2);
    let (sought, errors) = options.from_slice_at_record(&clean, k).read_all();
    assert!(
        errors.is_empty(),
        "seeking in the clean file met {errors:?}"
    );
    let skip = (k as usize).min(records.len());
    assert!(
        sought == records[skip..],
        "seeking record {k} of the clean file read other records"
    );
    check_seek(&bytes, &options, k, &slice_records);
}

/// Seeking by record over arbitrary bytes (the first two choose the record): an index block,
/// however forged, only chooses where reading starts. The records read are those a full read
/// returns from some block on (a suffix, less the records passed over in its first block), and
/// damage lies inside the input.
pub fn seek(data: &[u8]) {
    let (record, bytes) = match data {
        [a, b, rest @ ..] => (u64::from(u16::from_le_bytes([*a, *b])), rest),
        _ => (0, data),
    };
    let options = ReaderBuilder::new().max_body_size(SLICE_MAX_BLOCK);
    let (records, _) = options.from_slice(bytes).read_all();
    check_seek(bytes, &options, record, &records);
    if let Some(index) = Index::find(bytes) {
        assert!(index.start() <= index.offset() && index.offset() < bytes.len() as u64);
        let mut at = index.start();
        for e in index.entries() {
            assert_eq!(e.offset, at, "index entries do not tile its span");
            at += e.size;
        }
        assert_eq!(at, index.offset());
    }
}

/// Following a file that grows, is cut back and is rotated under the follower. The input is
/// a script and a file: a first byte n > 0 is the number of 3-byte operations that follow it
/// (an input that starts with 0x00, as a file does, is the file alone), each an operation byte
/// and a little-endian parameter:
///
/// - `op % 4 == 0`: append the next `1 + param % 4096` bytes of the file;
/// - `1`: truncate to `param % (len + 1)` bytes (0, a torn tail, blocks read, anything);
/// - `2`: an appender opens the log alone, which cuts a torn tail (spec 11.1), appends
///   `param % 8` records of one block each, and closes;
/// - `3`: rotation: the file is renamed away and a new empty one takes its path; but for an
///   operation byte of 7 modulo 8, logrotate's `copytruncate`: the file is copied beside it
///   (`NAME.1`, the copy of an earlier such operation replaced) and truncated to nothing.
///
/// After each operation the follower is drained (it looks at the file), unless the operation
/// byte has its high bit set: then the next operations happen between the same two looks.
/// The rest of the file is then appended in chunks (sizes drawn from the input), the follower
/// drained after each.
///
/// At every look, the follower has returned what a full read of the bytes it read returns:
/// the same records in order and the same damage, less damage at the very end while the file
/// may still grow (`Stream`). What it read is known from the file's states alone (spec 9.7,
/// rules 3-5): a file whose 64 bytes up to the closing sync byte of the last block returned
/// (the resume point) changed, or that is shorter than that byte, was truncated: the copy, if
/// it holds those bytes and more, is read from the resume point to its end, then the
/// truncation is reported and the file read from its start; growth is read on (even where the
/// file was cut and grown back between two looks to the same bytes there, which it cannot
/// see); a file shorter than what was read is read again from the resume point; a file
/// renamed away is read to its end, reported as replaced, and the new one read from its
/// start. So every record of every block that was whole when read and never cut is returned,
/// and no record that was not written.
pub fn follow(data: &[u8]) {
    use std::fs::OpenOptions;
    use std::io::Write as _;

    let (script, data) = match data.split_first() {
        Some((&n, rest)) if n > 0 => rest.split_at((3 * usize::from(n)).min(rest.len())),
        _ => (&[][..], data),
    };
    let file = TempFile::with_contents(&[]);
    let path = file.0.clone();
    let beside = |suffix: &str| {
        let mut name = path.clone().into_os_string();
        name.push(suffix);
        TempFile(PathBuf::from(name))
    };
    // Not named as copies: a follower never reads them as one. Each kept to the end, so that
    // no copy made later takes the inode of one the follower read (it never takes the file
    // it read before a rotation for a copy).
    let mut rotated = Vec::new();
    let copied = beside(".1");
    // The copy's bytes, once there is one.
    let mut copy: Option<Vec<u8>> = None;
    let options = ReaderBuilder::new().max_body_size(STREAM_MAX_BLOCK);
    let mut follower = cobsfile::FollowerBuilder::new()
        .reader(options.clone())
        .open(&path)
        .expect("follow an empty file");
    let mut stream = Stream::new(&options, Vec::new());
    // The follower's file once the path names another (frozen: nothing writes to it then).
    let mut renamed: Option<Vec<u8>> = None;
    let mut appended = 0;

    let mut look = |follower: &mut cobsfile::Follower,
                    renamed: &mut Option<Vec<u8>>,
                    copy: &Option<Vec<u8>>| {
        let mut events = VecDeque::new();
        while let Some(event) = follower.next_event_timeout(Duration::ZERO) {
            events.push_back(match event {
                Ok(cobsfile::FollowEvent::Record(r)) => Followed::Record(r.to_vec()),
                Ok(cobsfile::FollowEvent::Truncated { read, len, copy }) => Followed::Truncated {
                    read,
                    len,
                    copied: copy.is_some(),
                },
                Ok(cobsfile::FollowEvent::Replaced) => Followed::Replaced,
                Ok(other) => panic!("unknown event {other}"),
                Err(e) => Followed::Error(e),
            });
        }
        let current = std::fs::read(&path).expect("read the followed file");
        let followed = renamed.as_deref().unwrap_or(&current);
        stream.changed(&options, followed, copy.as_deref(), &mut events);
        if renamed.take().is_some() {
            stream.take_until(&mut events, "Replaced");
            stream.check(true);
            match events.pop_front() {
                Some(Followed::Replaced) => {}
                other => panic!("the file was replaced, and the follower says {other:?}"),
            }
            stream = Stream::new(&options, current);
        }
        stream.take_until(&mut events, "end");
        stream.check(false);
    };

    let mut data = data;
    for op in script.chunks_exact(3) {
        let param = u16::from_le_bytes([op[1], op[2]]);
        match op[0] % 4 {
            0 => {
                let (chunk, rest) = data.split_at((1 + usize::from(param) % 4096).min(data.len()));
                data = rest;
                let mut out = OpenOptions::new().append(true).open(&path).expect("open");
                out.write_all(chunk).expect("append");
            }
            1 => {
                let out = OpenOptions::new().write(true).open(&path).expect("open");
                let len = out.metadata().expect("metadata").len();
                out.set_len(u64::from(param) % (len + 1)).expect("truncate");
            }
            2 => {
                // Refused (no header, a newer version): the file is left as it was.
                if let Ok(mut appender) = AppenderBuilder::new()
                    .durability(Durability::Flush)
                    .open(&path)
                {
                    for _ in 0..param % 8 {
                        let pad = "x".repeat(usize::from(param >> 8));
                        let record = format!("appended {appended} {pad}");
                        appender.append(record.as_bytes()).expect("append");
                        appended += 1;
                    }
                    appender.close().expect("close the appender");
                }
            }
            _ if op[0] % 8 == 7 => {
                let bytes = std::fs::read(&path).expect("read");
                std::fs::write(&copied.0, &bytes).expect("copy");
                // Newer than any look, however slow the run: the follower may take it.
                let later = std::time::SystemTime::now() + Duration::from_secs(3600);
                std::fs::File::options()
                    .write(true)
                    .open(&copied.0)
                    .and_then(|f| f.set_modified(later))
                    .expect("date the copy");
                copy = Some(bytes);
                let out = OpenOptions::new().write(true).open(&path).expect("open");
                out.set_len(0).expect("truncate");
            }
            _ => {
                if renamed.is_none() {
                    renamed = Some(std::fs::read(&path).expect("read"));
                }
                let to = beside(&format!("~rotated{}", rotated.len()));
                std::fs::rename(&path, &to.0).expect("rotate");
                rotated.push(to);
                std::fs::File::create(&path).expect("create the new file");
            }
        }
        if op[0] & 0x80 == 0 {
            look(&mut follower, &mut renamed, &copy);
        }
    }
    let mut chunks = Chunked::new(data, fnv(data));
    let mut buf = vec![0; 4096];
    loop {
        let n = chunks.read(&mut buf).expect("a chunk");
        if n == 0 {
            break;
        }
        let mut out = OpenOptions::new().append(true).open(&path).expect("open");
        out.write_all(&buf[..n]).expect("append a chunk");
        look(&mut follower, &mut renamed, &copy);
    }
    look(&mut follower, &mut renamed, &copy);
}

/// What a follower returned, owned.
#[derive(Debug)]
enum Followed {
    Record(Vec<u8>),
    Error(Error),
    Truncated { read: u64, len: u64, copied: bool },
    Replaced,
}

/// What a follower read of its file, and what its reader returned since it started: it
/// returns what a reader returns from those bytes (see `follow`).
struct Stream {
    /// The file's bytes as the follower read them, from offset 0.
    bytes: Vec<u8>,
    /// The file's bytes when the follower last looked: those it keeps up to its resume point
    /// (which may differ from those it read, where a tail it had read was cut and written
    /// over between two looks).
    seen: Vec<u8>,
    reader: ReaderBuilder,
    records: Vec<Vec<u8>>,
    errors: Vec<Error>,
    /// The resume points of the cut tails read again so far: what the follower reported
    /// before each is final (spec 9.7), so a damaged range there does not merge with what
    /// was read after it, as it would in one read of the bytes.
    finals: Vec<u64>,
}

impl Stream {
    fn new(options: &ReaderBuilder, bytes: Vec<u8>) -> Self {
        Stream {
            seen: bytes.clone(),
            bytes,
            reader: options.clone(),
            records: Vec::new(),
            errors: Vec::new(),
            finals: Vec::new(),
        }
    }

    /// Readers of the bytes read, one per stretch between the final points, in order.
    fn readers(&self) -> impl Iterator<Item = cobsfile::Reader<cobsfile::SliceSource<'_>>> {
        let len = self.bytes.len() as u64;
        let mut starts = vec![0];
        starts.extend(self.finals.iter().copied().filter(|&f| f < len));
        let ends: Vec<u64> = starts.iter().skip(1).copied().chain([len]).collect();
        (starts.into_iter().zip(ends))
            .map(move |(start, end)| self.reader.from_slice_range(&self.bytes, start..end))
    }

    /// What the follower returns from the bytes read: a full read of them, but for ranges
    /// that do not merge across the final points.
    fn read_all(&self) -> (Vec<Vec<u8>>, Vec<Error>) {
        let (mut records, mut errors): (Vec<Vec<u8>>, Vec<Error>) = (Vec::new(), Vec::new());
        for mut reader in self.readers() {
            let (r, e) = reader.read_all();
            records.extend(r);
            let mut e = e.into_iter().peekable();
            // A stretch that stops in a run of zeros reads on through it: the next one starts
            // inside the same damage, seen from both sides (as range reads merge it).
            if let (Some(Error::Damaged { end: last, .. }), Some(Error::Damaged { start, .. })) =
                (errors.last_mut(), e.peek())
            {
                if *start <= *last {
                    let Some(Error::Damaged { end, .. }) = e.next() else {
                        unreachable!()
                    };
                    *last = (*last).max(end);
                }
            }
            errors.extend(e);
        }
        (records, errors)
    }

    /// Whether the follower stopped reading this file (a header of a newer version).
    fn stopped(&self) -> bool {
        self.errors
            .iter()
            .any(|e| matches!(e, Error::UnsupportedVersion { .. }))
    }

    /// The resume point: the offset of the closing sync byte of the last block the reader
    /// returned, or 0.
    fn resume(&self) -> usize {
        let mut close = self.finals.last().map_or(0, |&f| f as usize);
        // The damaged range before, if the last item was one: its end and kind.
        let mut range: Option<(u64, bool)> = None;
        for mut reader in self.readers() {
            while let Some(item) = reader.next_block() {
                match item {
                    Ok(block) => {
                        close = (block.info().offset + block.info().size) as usize;
                        range = None;
                    }
                    Err(Error::Damaged { start, end, cause }) => {
                        // A range that one of the other kind ended (spec 9.1) was reported as soon
                        // as that one was noted: final, up to the sync byte it ends at (spec
                        // 9.7). A frame found unsound is noted once the 0x00 that ends its
                        // damage is read: not yet if none follows in the bytes read.
                        let frame = matches!(
                            cause,
                            Cause::NoSync { .. }
                                | Cause::ZeroRun { .. }
                                | Cause::Varint { .. }
                                | Cause::InvalidField { .. }
                                | Cause::TooLarge { .. }
                                | Cause::SyncMismatch { .. }
                                | Cause::Truncated { .. }
                        );
                        let waited = frame && !self.bytes[start as usize..].contains(&0);
                        if let Some((before, kind)) = range {
                            if kind != cause.is_damage() && !waited {
                                close = before as usize;
                            }
                        }
                        range = Some((end, cause.is_damage()));
                    }
                    Err(_) => range = None,
                }
            }
        }
        close
    }

    /// The 64 bytes up to the resume point `resume` that the follower keeps from its last
    /// look, if it had one past 0 then.
    fn witness(&self, resume: usize) -> Option<&[u8]> {
        let at = (resume + 1).saturating_sub(64);
        self.seen.get(at..=resume).filter(|_| resume > 0)
    }

    /// Whether `file` holds the witness bytes where the followed file held them.
    fn witnessed(&self, resume: usize, file: &[u8]) -> bool {
        let at = (resume + 1).saturating_sub(64);
        self.witness(resume)
            .is_some_and(|witness| file.get(at..=resume) == Some(witness))
    }

    /// What the follower makes of its file, now `followed`, since it last looked (spec 9.7),
    /// with `copy` beside it.
    fn changed(
        &mut self,
        options: &ReaderBuilder,
        followed: &[u8],
        copy: Option<&[u8]>,
        events: &mut VecDeque<Followed>,
    ) {
        let read = self.bytes.len();
        let resume = self.resume();
        let rewritten = self.witness(resume).is_some() && !self.witnessed(resume, followed);
        if !rewritten && followed.len() >= read {
            if followed.len() > read && !self.stopped() {
                self.bytes.extend_from_slice(&followed[read..]);
            }
            self.seen = followed.to_vec();
            return;
        }
        if !rewritten && !self.stopped() && followed.len() > resume {
            // A cut tail: read again from the resume point.
            if resume > 0 && self.finals.last().is_none_or(|&f| f < resume as u64) {
                self.finals.push(resume as u64);
            }
            self.bytes.truncate(resume);
            self.bytes.extend_from_slice(&followed[resume..]);
            self.seen = followed.to_vec();
            return;
        }
        // Truncated: what the copy holds past the resume point first, if it is one.
        let copy = copy
            .filter(|copy| !self.stopped() && copy.len() > resume && self.witnessed(resume, copy));
        if let Some(copy) = copy {
            self.bytes.truncate(resume);
            self.bytes.extend_from_slice(&copy[resume..]);
        }
        self.take_until(events, "Truncated");
        self.check(copy.is_some());
        match events.pop_front() {
            Some(Followed::Truncated {
                read: r,
                len,
                copied,
            }) => assert_eq!(
                (r, len, copied),
                (read as u64, followed.len() as u64, copy.is_some()),
                "truncation reported with other lengths, or the copy not read"
            ),
            other => {
                let (_, errors) = self.read_all();
                panic!("{read} bytes read, cut to {}: {other:?}; resume {resume}, finals {:?}, errors {errors:?}", followed.len(), self.finals)
            }
        }
        *self = Stream::new(options, followed.to_vec());
    }

    /// Moves the records and errors at the front of `events` here, up to the event `marker`
    /// names ("Truncated", "Replaced"; any other event is unexpected).
    fn take_until(&mut self, events: &mut VecDeque<Followed>, marker: &str) {
        while let Some(event) = events.pop_front() {
            match event {
                Followed::Record(r) => self.records.push(r),
                Followed::Error(e) => self.errors.push(e),
                other if marker == "Truncated" || marker == "Replaced" => {
                    events.push_front(other);
                    return;
                }
                other => panic!("unexpected event {other:?}"),
            }
        }
    }

    /// The follower returned what its reader returns from the bytes read: the same records,
    /// the same damage, less damage running to the end while that end is not `last` (the
    /// file was replaced, or its copy read).
    fn check(&self, last: bool) {
        let (records, errors) = self.read_all();
        assert!(
            self.records == records,
            "the follower returned other records than a full read of what it read: {} for {}",
            self.records.len(),
            records.len()
        );
        let mut expected = faults(&errors);
        let end = self.bytes.len() as u64;
        // Before it, a range of the other kind right up to it (spec 9.1: they do not merge)
        // is still held too if the follower waits on a block cut off there, as damage is
        // reported once what follows it is known.
        let mut may_hold = false;
        if !last && matches!(errors.last(), Some(Error::Damaged { end: e, .. }) if *e == end) {
            expected.pop();
            if let [.., Error::Damaged { end: b, .. }, Error::Damaged { start, .. }] = &errors[..] {
                may_hold = b + 1 == *start;
            }
        }
        let found = faults(&self.errors);
        if may_hold && found.len() + 1 == expected.len() {
            expected.pop();
        }
        assert_eq!(
            found,
            expected,
            "the follower found other damage than a full read of what it read, {} bytes: {:?}",
            self.bytes.len(),
            faults(&errors)
        );
    }
}

/// The power-cut scenario of `tests/power_loss.rs` (`tests/common/power_cut.rs`) with every
/// choice taken from the input: the mode, the crash states, the file system's seed (its
/// faults), the appenders, their operations and records. Whatever they are, every record an
/// appender reported durable is in what a sync covered at every step, and in every crash
/// state, read back once and intact, after recovery too; the log reopens and appends.
pub fn power_loss(data: &[u8]) {
    let mut choices = InputChoices(data);
    use power_cut::Choices;
    let mode = power_cut::Mode::ALL[choices.below(power_cut::Mode::ALL.len() as u64) as usize];
    let crash_seeds = [choices.below(u64::MAX), choices.below(u64::MAX)];
    power_cut::run_case(mode, &mut choices, &crash_seeds);
}

/// Choices read from a fuzzer's input, a byte at a time where one is enough; zeros once it
/// runs out.
struct InputChoices<'a>(&'a [u8]);

impl power_cut::Choices for InputChoices<'_> {
    fn below(&mut self, n: u64) -> u64 {
        let bytes = match n {
            0..=256 => 1,
            257..=65536 => 2,
            _ => 8,
        };
        let mut value = 0u64;
        for _ in 0..bytes {
            let (&byte, rest) = self.0.split_first().unwrap_or((&0, &[]));
            self.0 = rest;
            value = value << 8 | u64::from(byte);
        }
        value % n.max(1)
    }
}

// ---------------------------------------------------------------------------------------------
// Checks shared by the targets.

/// A block as a reader returned it, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
struct BlockItem {
    offset: u64,
    size: u64,
    block_type: BlockType,
    payload: Vec<u8>,
    records: Vec<Vec<u8>>,
    entries: Vec<(String, Vec<u8>)>,
    version: Option<i64>,
}

fn block_items<S: cobsfile::Source>(
    reader: &mut cobsfile::Reader<S>,
) -> Vec<Result<BlockItem, Error>> {
    let mut items = Vec::new();
    while let Some(item) = reader.next_block() {
        items.push(item.map(|b| {
            BlockItem {
                offset: b.info().offset,
                size: b.info().size,
                block_type: b.info().block_type,
                payload: b.payload().to_vec(),
                records: b.records().map(<[u8]>::to_vec).collect(),
                entries: b
                    .entries()
                    .map(|(k, v)| (k.to_owned(), v.to_vec()))
                    .collect(),
                version: b.version(),
            }
        }));
    }
    items
}

/// The items as comparable values (errors by their message, minus the stream-only detail).
fn summarize_items(items: &[Result<BlockItem, Error>]) -> Vec<Result<BlockItem, String>> {
    items
        .iter()
        .map(|i| match i {
            Ok(b) => Ok(b.clone()),
            Err(e) => Err(fault(e)),
        })
        .collect()
}

/// Items tile the input: each block lies between two sync bytes with none inside, each damaged
/// range lies inside the input and ends at a sync byte or the input's end, items come in
/// order, and two damaged ranges never follow each other.
fn check_tiling(data: &[u8], items: &[Result<BlockItem, Error>]) {
    let len = data.len() as u64;
    let mut at = 0;
    // Whether the item before was a damaged range, and if so whether damage or unreadable.
    let mut previous_damaged: Option<bool> = None;
    for (i, item) in items.iter().enumerate() {
        match item {
            Ok(b) => {
                assert!(b.offset >= at, "block {i} at {} before {at}", b.offset);
                let end = b.offset + b.size;
                assert!(end < len, "block {i} runs past the input");
                assert_eq!(
                    data[b.offset as usize], 0,
                    "block {i} opens off a sync byte"
                );
                assert_eq!(data[end as usize], 0, "block {i} closes off a sync byte");
                let inside = &data[b.offset as usize + 1..end as usize];
                assert!(!inside.contains(&0), "block {i} holds a sync byte");
                at = end;
                previous_damaged = None;
            }
            Err(Error::Damaged { start, end, cause }) => {
                assert!(start < end && *end <= len, "damage {start}..{end} of {len}");
                assert!(*start >= at, "damage {i} at {start} before {at}");
                assert!(
                    *end == len || data[*end as usize] == 0,
                    "damage ends off a sync byte"
                );
                // Ranges in a row alternate: damage, then bytes unreadable, never merged.
                assert!(
                    previous_damaged != Some(cause.is_damage()),
                    "two damaged ranges of one kind in a row, {i}: {cause}"
                );
                previous_damaged = Some(cause.is_damage());
                at = *end;
            }
            Err(Error::UnsupportedVersion { offset, .. }) => {
                assert_eq!(i, items.len() - 1, "reading went on after a newer version");
                assert!(*offset < len);
            }
            Err(e) => panic!("unexpected error {e}"),
        }
    }
}

/// A data block's records, a metadata block's entries or an unknown block's payload, written
/// into a new file and read back, are the same.
fn rewrite_and_compare(b: &BlockItem) {
    let mut writer = WriterBuilder::new()
        .index(false)
        .build(Vec::new())
        .expect("build");
    let wrote = match b.block_type {
        BlockType::Data => b.records.iter().all(|r| writer.write_record(r).is_ok()),
        // A damaged-looking but CRC-clean file may repeat a key, which writers refuse.
        BlockType::Metadata => writer.write_metadata(b.entries.clone()).is_ok(),
        BlockType::Unknown(id) => writer.write_raw_block(id, &b.payload).is_ok(),
        BlockType::Header => {
            assert_eq!(b.version, Some(cobsfile::FORMAT_VERSION));
            return;
        }
        _ => return,
    };
    if !wrote {
        return;
    }
    let file = writer.finish().expect("finish");
    let items = block_items(&mut ReaderBuilder::new().from_slice(&file));
    let items: Vec<BlockItem> = items
        .into_iter()
        .map(|i| i.expect("a file just written reads clean"))
        .filter(|i| i.block_type != BlockType::Header)
        .collect();
    let records: Vec<&Vec<u8>> = items.iter().flat_map(|i| &i.records).collect();
    let entries: Vec<&(String, Vec<u8>)> = items.iter().flat_map(|i| &i.entries).collect();
    match b.block_type {
        BlockType::Data => assert!(records.iter().copied().eq(&b.records), "records differ"),
        BlockType::Metadata => assert!(entries.iter().copied().eq(&b.entries), "entries differ"),
        _ => assert_eq!(items[0].payload, b.payload, "payload differs"),
    }
}

/// A reader seeking record `record` of `bytes` reads a suffix of `records` (a full read's)
/// with damage inside the input. A seek reads none of the blocks before the one it starts at
/// and trusts the index about them (spec 9.6): behind a forged index, it may start past a
/// header of a newer version, where a full read stops. So when a full read stopped there, the
/// records sought are only a run of the file's records read on past such headers.
fn check_seek(bytes: &[u8], options: &ReaderBuilder, record: u64, records: &[Vec<u8>]) {
    let (sought, errors) = options.from_slice_at_record(bytes, record).read_all();
    for e in &errors {
        check_in_range(e, bytes.len());
    }
    let (past_versions, stopped) = records_past_versions(bytes, options);
    if stopped {
        assert!(
            sought.is_empty()
                || past_versions
                    .windows(sought.len())
                    .any(|w| w == sought.as_slice()),
            "seeking record {record} read records that are not a run of the file's"
        );
        return;
    }
    assert_eq!(past_versions, records);
    assert!(
        sought.len() <= records.len() && sought == records[records.len() - sought.len()..],
        "seeking record {record} read {} records that are not the last ones of a full read",
        sought.len()
    );
}

/// The records of every intact block of `bytes`, reading on past each header of a newer
/// version where a full read stops, and whether there was such a header.
fn records_past_versions(bytes: &[u8], options: &ReaderBuilder) -> (Vec<Vec<u8>>, bool) {
    let mut records = Vec::new();
    let (mut from, mut stopped) = (0, false);
    loop {
        let mut reader = options.from_slice_range(bytes, from..u64::MAX);
        let mut stop = None;
        while let Some(item) = reader.next_record() {
            match item {
                Ok(r) => records.push(r.to_vec()),
                Err(Error::UnsupportedVersion { offset, .. }) => {
                    stop = Some(offset);
                    break;
                }
                Err(_) => {}
            }
        }
        match stop {
            Some(offset) => {
                stopped = true;
                from = offset + 1;
            }
            None => return (records, stopped),
        }
    }
}

fn check_in_range(e: &Error, len: usize) {
    match e {
        Error::Damaged { start, end, .. } => {
            assert!(
                start < end && *end <= len as u64,
                "damage {start}..{end} of {len}"
            )
        }
        Error::UnsupportedVersion { offset, .. } => assert!(*offset < len as u64),
        e => panic!("unexpected error {e}"),
    }
}

/// An error as a comparable string; a sync mismatch's `found` is dropped, since a streaming
/// reader names the end of its window when the next sync byte lies beyond it.
fn fault(e: &Error) -> String {
    match e {
        Error::Damaged {
            start,
            end,
            cause: Cause::SyncMismatch { expected, .. },
        } => format!("{start}..{end} sync mismatch, expected {expected}"),
        e => e.to_string(),
    }
}

fn faults(errors: &[Error]) -> Vec<String> {
    errors.iter().map(fault).collect()
}

/// Whether `bytes` starts with a header block (any version).
fn starts_with_header(bytes: &[u8]) -> bool {
    match ReaderBuilder::new()
        .from_slice_range(bytes, 0..1)
        .next_block()
    {
        Some(Ok(b)) => b.info().block_type == BlockType::Header && b.info().offset == 0,
        Some(Err(Error::UnsupportedVersion { offset: 0, .. })) => true,
        _ => false,
    }
}

/// What an appender left: the appended records last, in order; damage only in the bytes that
/// were there before (plus the closing sync byte an appender adds to a torn block).
fn check_appended(before: &[u8], after: &[u8], completed: bool, appended: &[Vec<u8>]) {
    let (records, errors) = ReaderBuilder::new().from_slice(after).read_all();
    assert!(
        records.len() >= appended.len() && records[records.len() - appended.len()..] == *appended,
        "the appended records are not the last ones read: {} read, {} appended, errors {errors:?}",
        records.len(),
        appended.len()
    );
    let limit = before.len() as u64 + u64::from(completed);
    for e in &errors {
        match e {
            Error::Damaged { end, .. } => assert!(
                *end <= limit,
                "damage {e} past the {limit} bytes there were before appending"
            ),
            e => panic!("unexpected error reading the log: {e}"),
        }
    }
}

/// What a reader returned: records and damage, hashed, without keeping them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Summary {
    records: u64,
    record_hash: u64,
    errors: u64,
}

impl Summary {
    fn of(records: &[Vec<u8>], errors: &[Error]) -> Self {
        let mut s = Summary::default();
        for r in records {
            s.add(r);
        }
        s.errors = errors.len() as u64;
        s
    }

    fn add(&mut self, record: &[u8]) {
        self.records += 1;
        self.record_hash = fnv_from(self.record_hash ^ record.len() as u64, record);
    }
}

/// Reads every record, keeping nothing, so that only the reader allocates.
fn summarize<S: cobsfile::Source>(reader: &mut cobsfile::Reader<S>) -> Summary {
    let mut s = Summary::default();
    while let Some(item) = reader.next_record() {
        match item {
            Ok(r) => s.add(r),
            Err(_) => s.errors += 1,
        }
    }
    s
}

#[derive(Default)]
struct Collect {
    records: Vec<Vec<u8>>,
    damage: Vec<cobsfile::Damage>,
}

impl RangeSink<Vec<Vec<u8>>> for Collect {
    fn part(&mut self, part: Vec<Vec<u8>>) -> ControlFlow<()> {
        self.records.extend(part);
        ControlFlow::Continue(())
    }

    fn damage(&mut self, damage: &cobsfile::Damage) -> ControlFlow<()> {
        self.damage.push(damage.clone());
        ControlFlow::Continue(())
    }
}

// ---------------------------------------------------------------------------------------------
// Structure from bytes.

/// A cursor that reads choices from the fuzzer's bytes; past the end every choice is 0.
struct Unstructured<'a>(&'a [u8]);

impl<'a> Unstructured<'a> {
    fn u8(&mut self) -> u8 {
        self.bytes(1).first().copied().unwrap_or(0)
    }

    fn u16(&mut self) -> u16 {
        self.u16_opt().unwrap_or(0)
    }

    fn u16_opt(&mut self) -> Option<u16> {
        match *self.0 {
            [a, b, ..] => {
                self.0 = &self.0[2..];
                Some(u16::from_le_bytes([a, b]))
            }
            _ => None,
        }
    }

    fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (taken, rest) = self.0.split_at(n.min(self.0.len()));
        self.0 = rest;
        taken
    }

    /// Up to `max_count` records of up to `max_len` bytes: copied from the input, one byte
    /// repeated, or text-like lines (so that zstd has something to compress).
    fn records(&mut self, max_count: usize, max_len: usize) -> Vec<Vec<u8>> {
        let count = usize::from(self.u8()) % (max_count + 1);
        (0..count)
            .map(|i| {
                let block_type = self.u8();
                let len = usize::from(self.u16()) % (max_len + 1);
                match block_type % 3 {
                    0 => self.bytes(len.min(64)).to_vec(),
                    1 => vec![self.u8(); len],
                    _ => format!("{{\"event\":{i},\"kind\":{block_type},\"pad\":{len}}}")
                        .into_bytes()
                        .repeat(1 + len / 64),
                }
            })
            .collect()
    }
}

/// An `io::Read` handing out its bytes in chunks of 1 to 4096 bytes, sizes drawn from a seed.
struct Chunked<'a> {
    data: &'a [u8],
    state: u64,
}

impl<'a> Chunked<'a> {
    fn new(data: &'a [u8], seed: u64) -> Self {
        Chunked { data, state: seed }
    }
}

impl Read for Chunked<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.state = self.state.wrapping_mul(6364136223846793005).wrapping_add(1);
        let r = (self.state >> 33) as usize;
        let want = if r.is_multiple_of(4) {
            1 + r % 4096
        } else {
            1 + r % 16
        };
        let n = want.min(buf.len()).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

/// A reader's options here: blocks up to `max_body`, few dictionaries.
fn limited(max_body: usize) -> ReaderBuilder {
    ReaderBuilder::new().limits(
        Limits::default()
            .max_body_size(max_body)
            .max_dictionaries(MAX_DICTIONARIES)
            .max_dictionary_bytes(MAX_DICTIONARY_BYTES as u64),
    )
}

/// The slice, mapped and range readers' options here.
fn slice_options() -> ReaderBuilder {
    limited(SLICE_MAX_BLOCK)
}

/// A range sink that adds up counts and keeps nothing else.
#[derive(Default)]
struct CountSink(u64);

impl RangeSink<u64> for CountSink {
    fn part(&mut self, part: u64) -> ControlFlow<()> {
        self.0 += part;
        ControlFlow::Continue(())
    }
}

fn fnv(data: &[u8]) -> u64 {
    fnv_from(0xcbf2_9ce4_8422_2325, data)
}

fn fnv_from(mut h: u64, data: &[u8]) -> u64 {
    for &b in data {
        h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
    }
    h
}

/// The typed reader (feature `avro`) over a file, with small limits: no panic, whatever the
/// schemas and records hold; each record is a value or one error, as the datum reader sees
/// it; every value returned conforms to the schema its record names; memory stays within a
/// bound of the reader's limits and the input's length.
///
/// An input that starts with 0x00 is the file. Any other is a schema and datums: the
/// schema's length (2 bytes) and JSON, then datums (a length byte each), which the harness
/// writes into a file as a writer of typed records would (the schema's metadata block, each
/// datum after the prefix of the schema's fingerprint), so that mutations land on the schema
/// and the datums rather than on CRCs.
#[cfg(feature = "avro")]
pub fn avro_read(data: &[u8]) {
    match data.first() {
        Some(0) | None => avro_read_file(data),
        Some(_) => {
            let mut u = Unstructured(&data[1..]);
            let len = usize::from(u.u16()) % 4096;
            let json = u.bytes(len);
            let fingerprint = std::str::from_utf8(json)
                .ok()
                .and_then(|json| cobsfile::avro::WriterSchema::parse(json).ok())
                .map_or([0; 8], |schema| schema.fingerprint().to_le_bytes());
            let mut writer = WriterBuilder::new().build(Vec::new()).expect("header");
            writer
                .write_metadata([("avro.schema", json), ("avro.fingerprint", &fingerprint)])
                .expect("metadata");
            while !u.0.is_empty() {
                let len = usize::from(u.u8());
                let mut record = vec![0xc3, 0x01];
                record.extend_from_slice(&fingerprint);
                record.extend_from_slice(u.bytes(len));
                writer.write_record(&record).expect("record");
            }
            avro_read_file(&writer.finish().expect("finish"));
        }
    }
}

#[cfg(feature = "avro")]
fn avro_read_file(data: &[u8]) {
    use cobsfile::avro::{AvroReaderBuilder, DatumLimits, Error as AvroError};

    let limits = DatumLimits::default()
        .values_base(1024)
        .values_per_byte(16)
        .max_depth(32);
    let typed = AvroReaderBuilder::new().limits(limits);
    let (items, peak) = measure(|| {
        let mut reader = typed.build(slice_options().from_slice(data));
        let mut items = Vec::new();
        while let Some(item) = reader.next_value() {
            items.push(item.map_err(|e| e.name()));
        }
        items
    });
    // The reader's blocks, each value's tree (at most 1024 + 16 per byte of its datum, a few
    // hundred bytes each), the schemas' JSON parsed more than once.
    let bound = 4 * SLICE_MAX_BLOCK
        + DICTIONARY_MEMORY
        + SLACK
        + 2048 * (1024 + 16 * data.len())
        + 64 * data.len();
    assert!(
        peak <= bound,
        "the typed reader held {peak} bytes at once, over its bound of {bound}"
    );

    let mut reader = typed.build(slice_options().from_slice(data));
    let mut checked = Vec::new();
    while let Some(item) = reader.next_datum() {
        checked.push(match item {
            Ok(datum) => {
                assert_eq!(datum.record[..2], [0xc3, 0x01]);
                assert_eq!(
                    datum.record[2..10],
                    datum.schema.fingerprint().to_le_bytes()
                );
                Ok(datum.schema.clone())
            }
            Err(e) => {
                if let AvroError::Record { offset, .. } | AvroError::Schema { offset, .. } = &e {
                    assert!((*offset as usize) < data.len(), "{e}");
                }
                Err(e.name())
            }
        });
    }
    // Each item of next_value is the item of next_datum, decoded in the same walk: a value of
    // its schema exactly where the check passed.
    assert_eq!(
        items.len(),
        checked.len(),
        "next_value and next_datum disagree"
    );
    for (item, check) in items.iter().zip(&checked) {
        match (item, check) {
            (Ok(value), Ok(schema)) => assert!(value.validate(schema.schema()), "{value:?}"),
            (Err(name), Ok(_)) => panic!("the check passed a record next_value refused: {name}"),
            (Err(name), Err(checked)) => assert_eq!(name, checked),
            (Ok(value), Err(checked)) => {
                panic!("{value:?} returned where the check found {checked}")
            }
        }
    }

    // JSON written in the walk: for the same records, valid JSON exactly where a value was
    // returned, the JSON of that value; within the bound of the values' trees.
    let (written, peak) = measure(|| {
        let mut reader = typed.build(slice_options().from_slice(data));
        let mut json = cobsfile::avro::json::JsonWriter::new();
        let mut written = Vec::new();
        while let Some(item) = reader.next_datum_with(&mut json) {
            written.push(item.map(|_| json.text().to_vec()).map_err(|e| e.name()));
        }
        written
    });
    assert!(
        peak <= bound,
        "JSON from the typed reader held {peak} bytes at once, over its bound of {bound}"
    );
    assert_eq!(written.len(), items.len(), "JSON and values disagree");
    for ((json, item), check) in written.iter().zip(&items).zip(&checked) {
        match (json, item, check) {
            (Ok(json), Ok(value), Ok(schema)) => {
                let json: serde_json::Value = serde_json::from_slice(json).expect("valid JSON");
                let expected = cobsfile::avro::json::to_json(value, schema).expect("to_json");
                assert_eq!(json, expected);
            }
            (Err(name), Err(other), _) => assert_eq!(name, other),
            (json, item, _) => panic!("JSON {json:?} where the value is {item:?}"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Memory: a global allocator that counts the bytes live and their peak, per thread and in the
// whole process.

struct Measuring;

/// Bytes live in the process, and their peak since `measure_all` last reset it.
static LIVE_ALL: AtomicUsize = AtomicUsize::new(0);
static PEAK_ALL: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static LIVE: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

fn grow(bytes: usize) {
    let now = LIVE_ALL.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK_ALL.fetch_max(now, Ordering::Relaxed);
    let _ = LIVE.try_with(|live| {
        let now = live.get() + bytes;
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

fn shrink(bytes: usize) {
    LIVE_ALL.fetch_sub(bytes, Ordering::Relaxed);
    // Memory freed on another thread than the one that allocated it saturates at 0.
    let _ = LIVE.try_with(|live| live.set(live.get().saturating_sub(bytes)));
}

// SAFETY: delegates every call to the system allocator unchanged; only counts bytes in atomics
// and in thread-locals that need no allocation (const-initialized `Cell`s without destructors).
unsafe impl GlobalAlloc for Measuring {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grow(layout.size());
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        grow(layout.size());
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        shrink(layout.size());
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        shrink(layout.size());
        grow(new_size);
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Measuring = Measuring;

/// Runs `f` and returns its result and the most bytes it had allocated at once on this thread
/// (zstd's own C allocations are not counted).
fn measure<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(base));
    let result = f();
    let peak = PEAK.with(Cell::get);
    (result, peak.saturating_sub(base))
}

/// Runs `f` and returns its result and the most bytes the whole process had allocated at once
/// meanwhile, beyond what it had when `f` started: the memory of readers that run on worker
/// threads. Only meaningful where nothing else allocates at the same time: a fuzz target's
/// process, and `tests/fuzz_corpus.rs`, whose one test runs alone in its binary.
fn measure_all<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE_ALL.load(Ordering::Relaxed);
    PEAK_ALL.store(base, Ordering::Relaxed);
    let result = f();
    let peak = PEAK_ALL.load(Ordering::Relaxed);
    (result, peak.saturating_sub(base))
}

/// The schema of the container files `avro_import` writes from its input.
#[cfg(feature = "avro")]
const IMPORT_SCHEMA: &str = r#"{"type": "record", "name": "R", "fields": [
  {"name": "n", "type": "long"}, {"name": "s", "type": "string"}]}"#;

/// Reading an Avro object container file as `cobsfile import` does
/// (`cobsfile::avro::container`): no panic, whatever the bytes; after the header, the blocks
/// read and the damaged ranges skipped tile the file, in order, to its end; every datum of a
/// block that passed its checks is one the typed writer takes (the container's check and the
/// writer's agree), and each block holds as many as it says.
///
/// An input that starts with 0x00 is the file. Any other picks a codec (its first byte), then
/// gives datums (a number and a string's bytes each) that `ContainerWriter` writes in small
/// blocks, then up to 4 edits of the file's bytes: so that mutations land in blocks whose
/// compression and framing are whole, rather than only on headers.
#[cfg(feature = "avro")]
pub fn avro_import(data: &[u8]) {
    use cobsfile::avro::apache_avro::types::Value;
    use cobsfile::avro::container::{Codec, Container, ContainerLimits, ContainerWriter};
    use cobsfile::avro::{AvroWriter, WriterSchema};

    let file = match data.first() {
        Some(0) | None => data.get(1..).unwrap_or(&[]).to_vec(),
        Some(&choice) => {
            let codecs = [
                Codec::Null,
                Codec::Deflate,
                Codec::Snappy,
                Codec::Zstandard,
                Codec::Bzip2,
                Codec::Xz,
            ];
            let schema = WriterSchema::parse(IMPORT_SCHEMA).expect("schema");
            let codec = codecs[usize::from(choice) % codecs.len()];
            let mut u = Unstructured(&data[1..]);
            let mut writer = ContainerWriter::new(Vec::new(), &schema, codec, &[])
                .expect("header")
                .block_target(64);
            for _ in 0..usize::from(u.u8()) % 64 {
                let n = i64::from(u.u16()) - 30_000;
                let len = usize::from(u.u8()) % 40;
                let text: String = u
                    .bytes(len)
                    .iter()
                    .map(|&b| char::from(b'a' + b % 26))
                    .collect();
                let value = Value::Record(vec![
                    ("n".into(), Value::Long(n)),
                    ("s".into(), Value::String(text)),
                ]);
                let datum = cobsfile::avro::apache_avro::to_avro_datum(schema.schema(), value);
                writer.write_datum(&datum.expect("datum")).expect("datum");
            }
            let mut file = writer.finish().expect("finish");
            for _ in 0..u.u8() % 5 {
                let at = usize::from(u.u16()) % file.len();
                file[at] = u.u8();
            }
            file
        }
    };
    let limits = ContainerLimits::default()
        .max_block(1 << 20)
        .max_datums(1 << 16);
    let Ok(mut container) = Container::new(&file, limits) else {
        return;
    };
    let header = container.header().clone();
    let mut at = header.len as u64;
    let mut typed = AvroWriter::new(
        WriterBuilder::new().build(Vec::new()).expect("writer"),
        header.schema.clone(),
    )
    .expect("the header's schema parsed");
    while let Some(item) = container.next_block() {
        match item {
            Ok(block) => {
                assert_eq!(
                    block.range.start, at,
                    "a block not where the last item ended"
                );
                assert!(block.range.end > at);
                at = block.range.end;
                let mut count = 0;
                for datum in block.datums() {
                    typed
                        .write_datum(datum)
                        .unwrap_or_else(|e| panic!("a datum the container passed: {e}"));
                    count += 1;
                }
                assert_eq!(count, block.count);
            }
            Err(damage) => {
                assert_eq!(damage.start, at, "damage not where the last item ended");
                assert!(damage.end > damage.start);
                at = damage.end;
            }
        }
    }
    assert_eq!(
        at,
        file.len() as u64,
        "the items do not reach the end of the file"
    );
}

// ---------------------------------------------------------------------------------------------
// Seals.

/// A sealed file of `records` records, small blocks, a seal every few blocks; `tag` makes the
/// records (and the file id) of another file.
fn sealed_file(records: usize, tag: u8, seal_every: u64) -> Vec<u8> {
    let key = cobsfile::key::SealingKey::from_seed([7; 32]);
    let sealer = cobsfile::seal::Sealer::new(key, [tag; 16], [tag ^ 0x55; 16]).with_clock(|| 1);
    let mut writer = WriterBuilder::new()
        .block_target(64)
        .seal_with(sealer)
        .seal_every(seal_every, None)
        .build(Vec::new())
        .expect("build");
    for i in 0..records {
        let record = format!("{tag} record {i} {}", "x".repeat(i % 7));
        writer.write_record(record.as_bytes()).expect("write");
    }
    writer.finish().expect("finish")
}

/// A file's blocks, each from its type field to its closing sync byte.
fn blocks_of(file: &[u8]) -> Vec<Vec<u8>> {
    let mut reader = ReaderBuilder::new().from_slice(file);
    let mut out = Vec::new();
    while let Some(block) = reader.next_block() {
        let Ok(block) = block else { continue };
        let info = block.info();
        out.push(file[(info.offset + 1) as usize..=(info.offset + info.size) as usize].to_vec());
    }
    out
}

/// A data block (type 3, codec 0) holding `records`, built from the spec.
fn hand_data_block(records: &[&[u8]]) -> Vec<u8> {
    let mut body = vec![0u8];
    varint::write(records.len() as i64, &mut body);
    for r in records {
        varint::write(r.len() as i64, &mut body);
        body.extend_from_slice(r);
    }
    let mut crc = crc32(&[0x06]);
    crc = crc32_more(crc, &body);
    body.extend_from_slice(&crc.to_le_bytes());
    let mut encoded = Vec::new();
    cobs::encode(&body, &mut encoded);
    let mut out = vec![0x06];
    varint::write(encoded.len() as i64 + 1, &mut out);
    out.extend_from_slice(&encoded);
    out.push(0);
    out
}

/// CRC-32 (IEEE), bit by bit: the harness depends on the library and std alone.
fn crc32(bytes: &[u8]) -> u32 {
    crc32_more(0, bytes)
}

fn crc32_more(crc: u32, bytes: &[u8]) -> u32 {
    let mut c = !crc;
    for &b in bytes {
        c ^= b as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xEDB8_8320
            } else {
                c >> 1
            };
        }
    }
    !c
}

/// Checks that what `verdicts` call authentic, one of `writers` wrote (its blocks, each from
/// its type field to its closing sync byte), in that order, each once; with `parts`, one
/// writer per part of `file` (a header starts a part, as files concatenated).
fn authentic_in_order<'a>(
    file: &[u8],
    writers: [&Vec<Vec<u8>>; 2],
    verdicts: impl Iterator<Item = &'a cobsfile::seal::Verdict>,
    parts: bool,
) {
    let mut next = [0usize; 2];
    let mut writer: Option<usize> = None;
    for verdict in verdicts {
        if verdict.block_type == BlockType::Header {
            writer = None;
        }
        if verdict.status != cobsfile::seal::Status::Authentic {
            continue;
        }
        let bytes = &file[(verdict.range.start + 1) as usize..=verdict.range.end as usize];
        let found = writers.iter().enumerate().find_map(|(w, blocks)| {
            let at = (next[w]..blocks.len()).find(|&k| blocks[k] == bytes)?;
            Some((w, at))
        });
        let Some((w, at)) = found else {
            panic!(
                "an authentic block at {:?} that no writer wrote there",
                verdict.range
            );
        };
        assert!(
            !parts || writer.is_none_or(|one| one == w),
            "authentic blocks of two files in one part, at {:?}",
            verdict.range
        );
        writer = Some(w);
        next[w] = at + 1;
    }
}

/// Tampering and damage, driven by the input, on a sealed file: blocks removed, repeated,
/// swapped, changed with their CRC made to match, spliced from another file sealed with the
/// same key (seals too), bytes flipped, the file cut. Whatever was done:
/// - verification never panics, and says the same on 1 and 2 threads;
/// - nothing it calls authentic is other than the writer wrote it: the authentic blocks' bytes,
///   in file order, are blocks of the original file in their original order, each once;
/// - with no edit, the file is authentic; with edits of whole blocks only and no flip, nothing
///   is damage, and every block the edits did not touch is still authentic in a file of one
///   chain unless the seals that cover it were taken out;
/// - a file that lost or gained blocks (other than at its end) is never authentic.
pub fn seal(data: &[u8]) {
    let Some((&first, ops)) = data.split_first() else {
        return;
    };
    let records = 20 + (first as usize % 60);
    let original = sealed_file(records, 1, 200 + 50 * (first as u64 % 8));
    let other = sealed_file(30, 2, 200);
    let ours = blocks_of(&original);
    let theirs = blocks_of(&other);
    let mut blocks: Vec<Vec<u8>> = ours.clone();
    let mut flipped: Option<(usize, u8)> = None;
    let mut edited = false;
    let mut changed_middle = false;
    for op in ops.chunks(3).take(8) {
        let [kind, a, b] = [op[0], *op.get(1).unwrap_or(&0), *op.get(2).unwrap_or(&0)];
        let n = blocks.len();
        if n < 3 {
            break;
        }
        // Never the header (block 0): a file without one is another matter (spec 9.5).
        let i = 1 + a as usize % (n - 1);
        let j = 1 + b as usize % (n - 1);
        edited = true;
        match kind % 7 {
            0 => {
                blocks.remove(i);
                changed_middle |= i < n - 1;
            }
            1 => {
                let copy = blocks[i].clone();
                blocks.insert(j, copy);
                changed_middle = true;
            }
            2 => {
                blocks.swap(i, j);
                changed_middle |= i != j;
            }
            3 => {
                // Its records, one byte changed, re-framed with a valid CRC.
                let file = [&[0u8][..], &blocks[i]].concat();
                let mut reader = ReaderBuilder::new().from_slice(&file);
                let mut records: Vec<Vec<u8>> = Vec::new();
                while let Some(Ok(r)) = reader.next_record() {
                    records.push(r.to_vec());
                }
                if let Some(r) = records.first_mut().filter(|r| !r.is_empty()) {
                    r[0] ^= 1 | b;
                    let refs: Vec<&[u8]> = records.iter().map(Vec::as_slice).collect();
                    blocks[i] = hand_data_block(&refs);
                    changed_middle = true;
                }
            }
            4 => {
                let from = &theirs[b as usize % theirs.len()];
                blocks.insert(i, from.clone());
                changed_middle = true;
            }
            5 => {
                // Cut at a block boundary.
                blocks.truncate(i.max(2));
            }
            _ => {
                let block = &mut blocks[i];
                let at = b as usize % block.len().saturating_sub(1).max(1);
                if block.len() > 2 {
                    block[at] ^= 1 << (a % 8);
                    flipped = Some((i, at as u8));
                }
            }
        }
    }
    let mut file = vec![0u8];
    for b in &blocks {
        file.extend_from_slice(b);
    }
    let key = cobsfile::key::SealingKey::from_seed([7; 32]).verifying_key();
    let (report, sealed) = ReaderBuilder::new()
        .verify_seals(&file, &[key])
        .expect("verify");
    let (_, threaded) = ReaderBuilder::new()
        .threads(2)
        .min_split(64)
        .verify_seals(&file, &[key])
        .expect("verify on 2 threads");
    assert_eq!(threaded, sealed, "two threads verify alike");

    // What is authentic, one writer wrote (ours, or the other file's: a file whose own seals
    // are all gone is the other's, as far as its bytes can tell), in that order, once; one
    // writer per part of the file (a header starts a part, as files concatenated).
    authentic_in_order(&file, [&ours, &theirs], sealed.blocks.iter(), true);
    if !edited {
        assert!(sealed.is_authentic(), "{:?}", sealed.tampered);
        assert!(report.damaged.is_empty());
    }
    if flipped.is_none() && edited {
        assert!(
            report.damaged.is_empty(),
            "whole blocks only: {:?}",
            report.damaged
        );
    }
    // Blocks of content (all but header, log, seal and end blocks, which hold nothing but
    // their type, and index and time index blocks, which hold only where the others are and
    // may be added unsealed, spec 9.10) moved, lost, changed or added: never authentic, unless
    // the edits undid one another or only cut the file.
    let content = |blocks: &[Vec<u8>]| -> Vec<Vec<u8>> {
        (blocks.iter())
            .filter(|b| {
                let t = varint::read(b).map_or(0, |(t, _)| t);
                !cobsfile::seal::outside_chains(t) && t != 5 && t != 9
            })
            .cloned()
            .collect()
    };
    let (before, after) = (content(&ours), content(&blocks));
    if changed_middle && flipped.is_none() && !before.starts_with(&after) {
        assert!(!sealed.is_authentic(), "tampering unseen");
    }

    // Part of the file verified (spec 9.10.1): the blocks opening in a span that starts at any
    // block, with every seal of the file. What it calls authentic, one writer wrote there, in
    // order (as above); untouched, it finds nothing tampered and agrees with the whole.
    let n = blocks.len().max(1);
    let from = first as usize % n;
    let to = from + 1 + (first as usize / 7) % n;
    let offset = |k: usize| {
        1 + blocks[..k.min(blocks.len())]
            .iter()
            .map(Vec::len)
            .sum::<usize>()
            - 1
    };
    let span = offset(from) as u64..offset(to) as u64;
    let mut seen = Vec::new();
    let mut reader = ReaderBuilder::new().from_slice(&file);
    while let Some(block) = reader.next_block() {
        let Ok(block) = block else { continue };
        let info = block.info();
        if !span.contains(&info.offset) && info.block_type != BlockType::Seal {
            continue;
        }
        let frame = &file[(info.offset + 1) as usize..(info.offset + info.size) as usize];
        let records = match info.block_type {
            BlockType::Data => info.items.unwrap_or(0),
            _ => 0,
        };
        seen.push(cobsfile::seal::Seen::new(
            info.offset,
            info.size,
            info.block_type,
            records,
            frame,
            block.payload(),
        ));
    }
    let lost: Vec<_> = report.damaged.iter().map(|d| d.range.clone()).collect();
    let part = cobsfile::seal::verify_span(&seen, &lost, &[key], span.clone());
    let within = part.blocks.iter().filter(|v| span.contains(&v.range.start));
    authentic_in_order(&file, [&ours, &theirs], within, false);
    if !edited {
        assert!(
            part.tampered.is_empty(),
            "span {span:?}: {:?}",
            part.tampered
        );
        for v in part.blocks.iter().filter(|v| span.contains(&v.range.start)) {
            let whole = sealed.blocks.iter().find(|w| w.range == v.range);
            assert_eq!(whole.map(|w| w.status), Some(v.status), "span {span:?}");
        }
    }
}
