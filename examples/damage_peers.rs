//! What survives damage: the same records written as cobsfile, Apache Avro object container
//! files and MCAP (each uncompressed and with zstd) and as a plain length + CRC-32 framing,
//! each file damaged the same way, then read back with each format's stock reader.
//!
//! ```text
//! cargo run --release --example damage_peers                    # 100 MB corpora
//! COBSFILE_BENCH_MB=10 cargo run --release --example damage_peers
//! cargo run --release --example damage_peers -- small-json      # corpora by name
//! ```
//!
//! Damage, at positions relative to each file's own length, all deterministic:
//! - `flip@25%`: the byte at offset `len / 4` XORed with 0x40;
//! - `cut@60%`: only the first `len * 6 / 10` bytes kept;
//! - `16 flips`: 16 bytes at positions drawn by splitmix64 from a fixed seed, each XORed with
//!   a non-zero byte from the same generator;
//! - `4KiB zeros@50%`: the 4096 bytes from offset `len / 2` set to 0x00.
//!
//! Readers, each going on past errors as far as its API lets it:
//! - cobsfile: `ReaderBuilder::new().from_slice(..)`, `next_record()` until `None`; damage
//!   comes as `Err` items and reading goes on;
//! - Avro: `apache_avro::Reader::new(..)` iterated; after its first `Err` it returns `None`;
//! - MCAP: `mcap::MessageStream::new(..)` (chunk CRCs not checked, the default) and
//!   `new_with_options(.., Options::ValidateChunkCrcs)`; both end after their first `Err`;
//! - length + CRC: `u32` LE length, the record, `u32` LE CRC-32 of the record; the reader
//!   stops at the first frame whose length runs past the end or whose CRC does not match.
//!
//! Every record a reader returns is looked up by content among the records written: found
//! (and not yet matched) it counts as *intact*, found again as a *duplicate*, not found as
//! *silently corrupted*, i.e. returned as a good record although it was never written.
//! *Untouched* records are those whose container unit (cobsfile block, Avro block, MCAP chunk,
//! length + CRC frame) holds no damaged byte, located in the undamaged file; the last column
//! says how many of them came back intact, what a reader that skips exactly the damaged units
//! would return.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{BufReader, Read, Write};
use std::ops::Range;
use std::os::fd::AsFd;
use std::path::Path;
use std::process::{Command, Stdio};

use apache_avro::types::Value;
use apache_avro::{Codec, Schema, ZstandardSettings};
use cobsfile::{BlockType, Compression, ReaderBuilder, WriterBuilder};

#[path = "../benches/corpus.rs"]
mod corpus;
#[path = "../benches/peers.rs"]
mod peers;

use corpus::{Corpus, Kind, SplitMix64};

/// The zstd level of every compressed file.
const ZSTD_LEVEL: i32 = 3;

/// Seed of the `16 flips` positions and masks.
const FLIP_SEED: u64 = 0xDA3A_6E00_0000_0016;

// ---------------------------------------------------------------------------------------------
// Files

/// How a file was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Cobsfile,
    CobsfileZstd,
    AvroNull,
    AvroZstd,
    Mcap,
    McapZstd,
    LenCrc,
}

impl Format {
    const ALL: [Format; 7] = [
        Format::Cobsfile,
        Format::CobsfileZstd,
        Format::AvroNull,
        Format::AvroZstd,
        Format::Mcap,
        Format::McapZstd,
        Format::LenCrc,
    ];
}

/// One file as written: its bytes and its container units, each a byte range and the range of
/// record indexes it holds.
struct File {
    format: Format,
    bytes: Vec<u8>,
    units: Vec<(Range<usize>, Range<usize>)>,
}

fn write(format: Format, c: &Corpus) -> File {
    let bytes = match format {
        Format::Cobsfile => write_cobsfile(c, Compression::None),
        Format::CobsfileZstd => {
            write_cobsfile(c, Compression::zstd(ZSTD_LEVEL).expect("zstd level"))
        }
        Format::AvroNull => write_avro(c, Codec::Null),
        Format::AvroZstd => write_avro(
            c,
            Codec::Zstandard(ZstandardSettings::new(ZSTD_LEVEL as u8)),
        ),
        Format::Mcap => write_mcap(c, None),
        Format::McapZstd => write_mcap(c, Some(mcap::Compression::Zstd)),
        Format::LenCrc => write_len_crc(c),
    };
    let units = match format {
        Format::Cobsfile | Format::CobsfileZstd => cobsfile_units(&bytes),
        Format::AvroNull | Format::AvroZstd => avro_units(&bytes),
        Format::Mcap | Format::McapZstd => mcap_units(&bytes),
        Format::LenCrc => len_crc_units(&bytes),
    };
    let covered: usize = units.iter().map(|(_, r)| r.len()).sum();
    assert_eq!(covered, c.len(), "{format:?}: units cover every record");
    File {
        format,
        bytes,
        units,
    }
}

fn write_cobsfile(c: &Corpus, compression: Compression) -> Vec<u8> {
    let mut w = WriterBuilder::new()
        .compression(compression)
        .build(Vec::new())
        .expect("header");
    for r in c.records() {
        w.write_record(r).expect("write");
    }
    w.finish().expect("finish")
}

/// Data blocks from offset to closing sync byte (which opens the next block: damage to it
/// touches both).
fn cobsfile_units(file: &[u8]) -> Vec<(Range<usize>, Range<usize>)> {
    let mut units = Vec::new();
    let mut next = 0;
    let mut reader = ReaderBuilder::new().from_slice(file);
    for info in reader.blocks() {
        let info = info.expect("undamaged file");
        if info.block_type == BlockType::Data {
            let n = info.items.expect("record count") as usize;
            let start = info.offset as usize;
            units.push((start..start + info.size as usize + 1, next..next + n));
            next += n;
        }
    }
    units
}

/// Avro records of schema `"bytes"`, through serde (as `benches/throughput.rs` writes them),
/// default block size (16,000 bytes before the codec).
fn write_avro(c: &Corpus, codec: Codec) -> Vec<u8> {
    let schema = Schema::parse_str(r#""bytes""#).expect("schema");
    let mut w = apache_avro::Writer::with_codec(&schema, Vec::new(), codec);
    for r in c.records() {
        w.append_ser(serde_bytes::Bytes::new(r)).expect("append");
    }
    w.into_inner().expect("flush")
}

/// Reads an Avro `long` (zig-zag varint) at `*pos`.
fn avro_long(file: &[u8], pos: &mut usize) -> i64 {
    let mut z = 0u64;
    let mut shift = 0;
    loop {
        let b = file[*pos];
        *pos += 1;
        z |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return (z >> 1) as i64 ^ -((z & 1) as i64);
        }
        shift += 7;
    }
}

/// Avro data blocks, from their record count to the end of their sync marker.
fn avro_units(file: &[u8]) -> Vec<(Range<usize>, Range<usize>)> {
    assert_eq!(&file[..4], b"Obj\x01");
    let mut pos = 4;
    // The header's metadata map: blocks of entries, a zero count at the end.
    loop {
        let mut count = avro_long(file, &mut pos);
        if count == 0 {
            break;
        }
        if count < 0 {
            count = -count;
            avro_long(file, &mut pos); // block size in bytes
        }
        for _ in 0..count {
            for _ in 0..2 {
                let len = avro_long(file, &mut pos) as usize;
                pos += len;
            }
        }
    }
    pos += 16; // sync marker
    let mut units = Vec::new();
    let mut next = 0;
    while pos < file.len() {
        let start = pos;
        let n = avro_long(file, &mut pos) as usize;
        let size = avro_long(file, &mut pos) as usize;
        pos += size + 16;
        units.push((start..pos, next..next + n));
        next += n;
    }
    assert_eq!(pos, file.len());
    units
}

/// MCAP with its default options (chunk CRCs written) but for compression; one channel, one
/// message per record, log time = record index.
fn write_mcap(c: &Corpus, compression: Option<mcap::Compression>) -> Vec<u8> {
    peers::write_mcap(
        c,
        mcap::WriteOptions::new().compression(compression),
        Vec::new(),
    )
}

/// MCAP chunks from the summary's chunk indexes (message log times are record indexes).
fn mcap_units(file: &[u8]) -> Vec<(Range<usize>, Range<usize>)> {
    let summary = mcap::Summary::read(file)
        .expect("summary")
        .expect("a summary");
    summary
        .chunk_indexes
        .iter()
        .map(|ci| {
            let start = ci.chunk_start_offset as usize;
            (
                start..start + ci.chunk_length as usize,
                ci.message_start_time as usize..ci.message_end_time as usize + 1,
            )
        })
        .collect()
}

fn write_len_crc(c: &Corpus) -> Vec<u8> {
    let mut out = Vec::with_capacity(c.data.len() + 8 * c.len());
    for r in c.records() {
        out.extend_from_slice(&(r.len() as u32).to_le_bytes());
        out.extend_from_slice(r);
        out.extend_from_slice(&crc32fast::hash(r).to_le_bytes());
    }
    out
}

fn len_crc_units(file: &[u8]) -> Vec<(Range<usize>, Range<usize>)> {
    let mut units = Vec::new();
    let mut pos = 0;
    while pos < file.len() {
        let len = u32::from_le_bytes(file[pos..pos + 4].try_into().expect("4 bytes")) as usize;
        let i = units.len();
        units.push((pos..pos + 8 + len, i..i + 1));
        pos += 8 + len;
    }
    units
}

// ---------------------------------------------------------------------------------------------
// Damage

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scenario {
    Flip,
    Cut,
    Flips16,
    Zeros,
}

impl Scenario {
    const ALL: [Scenario; 4] = [
        Scenario::Flip,
        Scenario::Cut,
        Scenario::Flips16,
        Scenario::Zeros,
    ];

    fn name(self) -> &'static str {
        match self {
            Scenario::Flip => "flip@25%",
            Scenario::Cut => "cut@60%",
            Scenario::Flips16 => "16 flips",
            Scenario::Zeros => "4KiB zeros@50%",
        }
    }

    /// The damaged file and the damaged byte ranges (in the original file's offsets).
    fn apply(self, file: &[u8]) -> (Vec<u8>, Vec<Range<usize>>) {
        let len = file.len();
        let mut out = file.to_vec();
        let ranges = match self {
            Scenario::Flip => {
                let at = len / 4;
                out[at] ^= 0x40;
                std::iter::once(at..at + 1).collect()
            }
            Scenario::Cut => {
                let keep = len * 6 / 10;
                out.truncate(keep);
                std::iter::once(keep..len).collect()
            }
            Scenario::Flips16 => {
                let mut rng = SplitMix64(FLIP_SEED);
                let mut ranges = Vec::new();
                for _ in 0..16 {
                    let at = rng.range(0, len);
                    let mask = rng.range(1, 256) as u8;
                    out[at] ^= mask;
                    ranges.push(at..at + 1);
                }
                ranges
            }
            Scenario::Zeros => {
                let at = len / 2;
                let end = (at + 4096).min(len);
                out[at..end].fill(0);
                std::iter::once(at..end).collect()
            }
        };
        (out, ranges)
    }
}

// ---------------------------------------------------------------------------------------------
// Readers

/// Readers under test.
#[derive(Debug, Clone, Copy)]
enum ReadWith {
    Cobsfile,
    Avro,
    Mcap { check_crcs: bool },
    LenCrc,
}

/// The rows of the report: a file format and the reader used on it.
const ROWS: [(&str, Format, ReadWith); 9] = [
    ("cobsfile", Format::Cobsfile, ReadWith::Cobsfile),
    ("cobsfile zstd 3", Format::CobsfileZstd, ReadWith::Cobsfile),
    ("avro null", Format::AvroNull, ReadWith::Avro),
    ("avro zstd 3", Format::AvroZstd, ReadWith::Avro),
    ("mcap", Format::Mcap, ReadWith::Mcap { check_crcs: false }),
    (
        "mcap, CRCs checked",
        Format::Mcap,
        ReadWith::Mcap { check_crcs: true },
    ),
    (
        "mcap zstd",
        Format::McapZstd,
        ReadWith::Mcap { check_crcs: false },
    ),
    (
        "mcap zstd, CRCs checked",
        Format::McapZstd,
        ReadWith::Mcap { check_crcs: true },
    ),
    ("len+crc32", Format::LenCrc, ReadWith::LenCrc),
];

/// How a read ended, and the first error it met.
struct Outcome {
    summary: String,
    first_error: Option<String>,
}

impl Outcome {
    fn new(summary: &str, first_error: Option<String>) -> Self {
        Outcome {
            summary: summary.into(),
            first_error,
        }
    }
}

/// Reads `file`, handing every record returned to `each`.
fn read(with: ReadWith, file: &[u8], each: &mut dyn FnMut(&[u8])) -> Outcome {
    match with {
        ReadWith::Cobsfile => {
            let mut reader = ReaderBuilder::new().from_slice(file);
            let mut errors = 0;
            let mut first_error = None;
            while let Some(item) = reader.next_record() {
                match item {
                    Ok(record) => each(record),
                    Err(e) => {
                        errors += 1;
                        first_error.get_or_insert_with(|| e.to_string());
                    }
                }
            }
            let summary = match errors {
                0 => "read to end".to_string(),
                1 => "continued past 1 error".to_string(),
                n => format!("continued past {n} errors"),
            };
            Outcome {
                summary,
                first_error,
            }
        }
        ReadWith::Avro => {
            let reader = match apache_avro::Reader::new(file) {
                Ok(reader) => reader,
                Err(e) => return Outcome::new("failed to open", Some(e.to_string())),
            };
            for item in reader {
                match item {
                    Ok(Value::Bytes(b)) => each(&b),
                    Ok(other) => {
                        return Outcome::new(
                            "stopped at a non-bytes value",
                            Some(format!("{other:?}")),
                        )
                    }
                    // The iterator returns `None` after its first error.
                    Err(e) => return Outcome::new("stopped at error", Some(e.to_string())),
                }
            }
            Outcome::new("read to end", None)
        }
        ReadWith::Mcap { check_crcs } => {
            let stream = if check_crcs {
                mcap::MessageStream::new_with_options(
                    file,
                    mcap::read::Options::ValidateChunkCrcs.into(),
                )
            } else {
                mcap::MessageStream::new(file)
            };
            let stream = match stream {
                Ok(stream) => stream,
                Err(e) => return Outcome::new("failed to open", Some(e.to_string())),
            };
            for item in stream {
                match item {
                    Ok(message) => each(&message.data),
                    // The stream returns `None` after its first error.
                    Err(e) => return Outcome::new("stopped at error", Some(e.to_string())),
                }
            }
            Outcome::new("read to end", None)
        }
        ReadWith::LenCrc => {
            let mut pos = 0;
            while pos < file.len() {
                let rest = &file[pos..];
                let stop = |why: &str| {
                    Outcome::new("stopped at error", Some(format!("{why} at offset {pos}")))
                };
                if rest.len() < 8 {
                    return stop("truncated frame");
                }
                let len = u32::from_le_bytes(rest[..4].try_into().expect("4 bytes")) as usize;
                if rest.len() - 8 < len {
                    return stop("length past the end");
                }
                let record = &rest[4..4 + len];
                let crc = u32::from_le_bytes(rest[4 + len..8 + len].try_into().expect("4 bytes"));
                if crc != crc32fast::hash(record) {
                    return stop("CRC mismatch");
                }
                each(record);
                pos += 8 + len;
            }
            Outcome::new("read to end", None)
        }
    }
}

/// The first argument that makes the program read one damaged file and stream the records.
const CHILD_FLAG: &str = "--read-in-child";

/// Reads the file `path` with the reader of row `row` in a child process, handing every record
/// it returns to `each`. A reader may abort its process (an allocation of a size read from the
/// damaged file fails, say); the records it returned before that still count.
fn read_in_child(row: usize, path: &Path, each: &mut dyn FnMut(&[u8])) -> Outcome {
    let mut child = Command::new(std::env::current_exe().expect("own path"))
        .arg(CHILD_FLAG)
        .arg(row.to_string())
        .arg(path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the reader");
    let mut stdout = BufReader::with_capacity(1 << 20, child.stdout.take().expect("stdout"));
    let mut stderr = child.stderr.take().expect("stderr");
    let errors = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let mut outcome = None;
    let mut buf = Vec::new();
    let mut tag = [0u8; 5];
    while stdout.read_exact(&mut tag).is_ok() {
        let len = u32::from_le_bytes(tag[1..].try_into().expect("4 bytes")) as usize;
        buf.resize(len, 0);
        if stdout.read_exact(&mut buf).is_err() {
            break;
        }
        match tag[0] {
            b'R' => each(&buf),
            _ => {
                let text = String::from_utf8_lossy(&buf);
                let (summary, first) = text.split_once('\t').unwrap_or((&text, ""));
                outcome = Some(Outcome {
                    summary: summary.to_string(),
                    first_error: (!first.is_empty()).then(|| first.to_string()),
                });
            }
        }
    }
    let status = child.wait().expect("wait for the reader");
    let errors = errors.join().expect("stderr");
    match outcome {
        Some(outcome) if status.success() => outcome,
        _ => Outcome {
            summary: format!("process died ({status})"),
            first_error: errors
                .lines()
                .find(|l| !l.trim().is_empty())
                .map(str::to_string),
        },
    }
}

/// The child's side of [`read_in_child`]: `R`, length, record for each record, then `O`,
/// length, summary and first error separated by a tab.
fn child(args: &[String]) {
    let row: usize = args[0].parse().expect("row");
    let file = std::fs::read(&args[1]).expect("read the damaged file");
    // Unbuffered, one write per record: whatever the reader returned before an abort has
    // reached the parent.
    let mut out = std::fs::File::from(
        std::io::stdout()
            .as_fd()
            .try_clone_to_owned()
            .expect("stdout"),
    );
    let mut message = Vec::new();
    let mut put = |tag: u8, bytes: &[u8]| {
        message.clear();
        message.push(tag);
        message.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        message.extend_from_slice(bytes);
        out.write_all(&message).expect("write to the parent");
    };
    let outcome = read(ROWS[row].2, &file, &mut |r| put(b'R', r));
    let text = format!(
        "{}\t{}",
        outcome.summary,
        outcome.first_error.unwrap_or_default()
    );
    put(b'O', text.as_bytes());
}

// ---------------------------------------------------------------------------------------------
// Matching returned records against written ones

/// The written records by content; equal records form one group, in index order.
struct Written<'a> {
    groups: HashMap<&'a [u8], u32>,
    members: Vec<Vec<u32>>,
    /// Records equal to an earlier record.
    repeats: usize,
}

impl<'a> Written<'a> {
    fn new(c: &'a Corpus) -> Self {
        let mut groups = HashMap::with_capacity(c.len());
        let mut members: Vec<Vec<u32>> = Vec::with_capacity(c.len());
        let mut repeats = 0;
        for (i, r) in c.records().enumerate() {
            let next = members.len() as u32;
            let g = *groups.entry(r).or_insert(next);
            if g == next {
                members.push(Vec::with_capacity(1));
            } else {
                repeats += 1;
            }
            members[g as usize].push(i as u32);
        }
        Written {
            groups,
            members,
            repeats,
        }
    }
}

/// Counts for one read.
#[derive(Debug, Default)]
struct Counts {
    returned: usize,
    intact: usize,
    corrupted: usize,
    duplicates: usize,
    out_of_order: usize,
    /// Intact records that came from untouched units.
    untouched_intact: usize,
}

/// Matches the records a read returns against `written`.
struct Matcher<'w, 'a> {
    written: &'w Written<'a>,
    /// Per group, how many of its members have been matched.
    taken: Vec<u32>,
    /// Per record index, whether its unit is untouched.
    untouched: &'w [bool],
    last: Option<u32>,
    counts: Counts,
}

impl<'w, 'a> Matcher<'w, 'a> {
    fn new(written: &'w Written<'a>, untouched: &'w [bool]) -> Self {
        Matcher {
            written,
            taken: vec![0; written.members.len()],
            untouched,
            last: None,
            counts: Counts::default(),
        }
    }

    fn record(&mut self, r: &[u8]) {
        self.counts.returned += 1;
        let Some(&g) = self.written.groups.get(r) else {
            self.counts.corrupted += 1;
            return;
        };
        let members = &self.written.members[g as usize];
        let taken = &mut self.taken[g as usize];
        let Some(&index) = members.get(*taken as usize) else {
            self.counts.duplicates += 1;
            return;
        };
        *taken += 1;
        self.counts.intact += 1;
        if self.untouched[index as usize] {
            self.counts.untouched_intact += 1;
        }
        if self.last.is_some_and(|last| index < last) {
            self.counts.out_of_order += 1;
        }
        self.last = Some(index);
    }
}

/// Per record index, whether no damaged byte falls in its unit.
fn untouched_records(file: &File, records: usize, damage: &[Range<usize>]) -> Vec<bool> {
    let mut untouched = vec![true; records];
    for (bytes, indexes) in &file.units {
        if damage
            .iter()
            .any(|d| d.start < bytes.end && bytes.start < d.end)
        {
            untouched[indexes.clone()].fill(false);
        }
    }
    untouched
}

// ---------------------------------------------------------------------------------------------
// Report

struct Row {
    corpus: &'static str,
    format: &'static str,
    scenario: Scenario,
    written: usize,
    untouched: usize,
    counts: Counts,
    outcome: Outcome,
    /// Records in the largest unit of the file.
    largest_unit: usize,
}

fn percent(part: usize, whole: usize) -> String {
    if whole == 0 {
        "–".into()
    } else {
        // Rounded down, so that 100 % means every record.
        let hundredths = (10_000 * part as u128 / whole as u128) as f64;
        format!("{:.2} %", hundredths / 100.0)
    }
}

/// How a read ended, in a word.
fn ending(outcome: &Outcome) -> &'static str {
    let s = outcome.summary.as_str();
    if s.starts_with("continued") {
        "continued"
    } else if s.starts_with("read to end") {
        "to end"
    } else if s.starts_with("process died") {
        "aborted"
    } else if s.starts_with("failed to open") {
        "no open"
    } else {
        "stopped"
    }
}

/// Per corpus, formats × scenarios: records returned intact, silently corrupted, how it ended.
fn print_summary(rows: &[Row]) {
    println!("## Summary\n");
    println!(
        "Each cell: records returned intact (% of written) · records returned silently \
         corrupted · how the read ended (continued past errors, to end without error, stopped \
         at the first error, process aborted)."
    );
    let mut corpora: Vec<&str> = rows.iter().map(|r| r.corpus).collect();
    corpora.dedup();
    for corpus in corpora {
        let written = rows
            .iter()
            .find(|r| r.corpus == corpus)
            .map_or(0, |r| r.written);
        println!("\n### {corpus}, {written} records written\n");
        let mut header = "| format |".to_string();
        let mut rule = "|---|".to_string();
        for scenario in Scenario::ALL {
            let _ = write!(header, " {} |", scenario.name());
            rule.push_str("---|");
        }
        println!("{header}\n{rule}");
        for (label, _, _) in ROWS {
            let mut line = format!("| {label} |");
            for scenario in Scenario::ALL {
                let row = rows
                    .iter()
                    .find(|r| r.corpus == corpus && r.format == label && r.scenario == scenario)
                    .expect("every cell was read");
                let _ = write!(
                    line,
                    " {} · {} · {} |",
                    percent(row.counts.intact, row.written),
                    row.counts.corrupted,
                    ending(&row.outcome)
                );
            }
            println!("{line}");
        }
    }
}

fn main() {
    let names: Vec<String> = std::env::args().skip(1).collect();
    if names.first().map(String::as_str) == Some(CHILD_FLAG) {
        child(&names[1..]);
        return;
    }
    let dir = std::env::temp_dir().join(format!("damage_peers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary directory");
    let kinds: Vec<Kind> = if names.is_empty() {
        Kind::ALL.to_vec()
    } else {
        names
            .iter()
            .map(|n| {
                *Kind::ALL
                    .iter()
                    .find(|k| k.name() == n)
                    .unwrap_or_else(|| panic!("unknown corpus {n}"))
            })
            .collect()
    };

    let mut rows = Vec::new();
    let mut sizes = String::new();
    for kind in kinds {
        let c = Corpus::generate(kind, corpus::corpus_bytes());
        eprintln!("corpus {}", c.describe());
        let written = Written::new(&c);
        if written.repeats > 0 {
            eprintln!(
                "  {} records repeat an earlier one (matched in order)",
                written.repeats
            );
        }
        let files: Vec<File> = Format::ALL.iter().map(|&f| write(f, &c)).collect();
        for file in &files {
            let _ = writeln!(
                sizes,
                "| {} | {:?} | {} | {} | {} |",
                kind.name(),
                file.format,
                file.bytes.len(),
                file.units.len(),
                file.units.iter().map(|(_, r)| r.len()).max().unwrap_or(0),
            );
        }

        for scenario in Scenario::ALL {
            for file in &files {
                let (damaged, ranges) = scenario.apply(&file.bytes);
                let path = dir.join(format!("{:?}", file.format));
                std::fs::write(&path, &damaged).expect("write the damaged file");
                drop(damaged);
                let untouched = untouched_records(file, c.len(), &ranges);
                let untouched_count = untouched.iter().filter(|&&u| u).count();
                for (row, &(label, format, _)) in ROWS.iter().enumerate() {
                    if format != file.format {
                        continue;
                    }
                    let mut matcher = Matcher::new(&written, &untouched);
                    let outcome = read_in_child(row, &path, &mut |r| matcher.record(r));
                    eprintln!(
                        "  {} / {label} / {}: {} returned; {}{}",
                        kind.name(),
                        scenario.name(),
                        matcher.counts.returned,
                        outcome.summary,
                        outcome
                            .first_error
                            .as_deref()
                            .map(|e| format!(" (first: {e})"))
                            .unwrap_or_default()
                    );
                    rows.push(Row {
                        corpus: kind.name(),
                        format: label,
                        scenario,
                        written: c.len(),
                        untouched: untouched_count,
                        counts: matcher.counts,
                        outcome,
                        largest_unit: file.units.iter().map(|(_, r)| r.len()).max().unwrap_or(0),
                    });
                }
            }
        }
    }

    let _ = std::fs::remove_dir_all(&dir);

    print_summary(&rows);

    println!("\n## Files\n");
    println!("| corpus | format | bytes | units | records in the largest unit |");
    println!("|---|---|---:|---:|---:|");
    print!("{sizes}");

    for scenario in Scenario::ALL {
        println!("\n## {}\n", scenario.name());
        println!(
            "| corpus | format | written | returned | intact | % intact | silently corrupted | \
             untouched | untouched returned intact | reader |"
        );
        println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---|");
        for row in rows.iter().filter(|r| r.scenario == scenario) {
            let c = &row.counts;
            let mut reader = row.outcome.summary.clone();
            if c.duplicates > 0 {
                let _ = write!(reader, "; {} duplicates", c.duplicates);
            }
            if c.out_of_order > 0 {
                let _ = write!(reader, "; {} out of order", c.out_of_order);
            }
            println!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                row.corpus,
                row.format,
                row.written,
                c.returned,
                c.intact,
                percent(c.intact, row.written),
                c.corrupted,
                row.untouched,
                percent(c.untouched_intact, row.untouched),
                reader,
            );
        }
    }

    // What cobsfile promises: no corrupted record, every untouched block back, and after one
    // flipped byte at most one block's records lost.
    println!("\n## cobsfile checks\n");
    let mut failed = 0;
    for row in rows.iter().filter(|r| r.format.starts_with("cobsfile")) {
        let c = &row.counts;
        let mut problems = Vec::new();
        if c.corrupted > 0 || c.duplicates > 0 || c.out_of_order > 0 {
            problems.push(format!(
                "{} corrupted, {} duplicates, {} out of order",
                c.corrupted, c.duplicates, c.out_of_order
            ));
        }
        if c.untouched_intact != row.untouched {
            problems.push(format!(
                "{} of {} untouched records returned",
                c.untouched_intact, row.untouched
            ));
        }
        let lost = row.written - c.intact;
        if row.scenario == Scenario::Flip && lost > row.largest_unit {
            problems.push(format!(
                "lost {lost} records, more than the largest block ({})",
                row.largest_unit
            ));
        }
        let line = format!(
            "{} / {} / {}: lost {lost} records",
            row.corpus,
            row.format,
            row.scenario.name()
        );
        if problems.is_empty() {
            println!("- ok: {line}");
        } else {
            failed += 1;
            println!("- FAILED: {line}: {}", problems.join("; "));
        }
    }
    if failed > 0 {
        eprintln!("{failed} cobsfile checks failed");
        std::process::exit(1);
    }
}
