//! verify and recover under damage: property tests per kind of damage, and a torture test
//! over thousands of random cases mixing them.
//!
//! The guarantee under test: every record of every block the damage did not touch comes back,
//! in order; no record that was never written comes back; `verify` reports what a full read
//! finds; `recover` writes a valid file holding exactly the intact blocks a full read returns
//! (header blocks aside), which recovers to itself byte for byte.
//!
//! **Which blocks are untouched.** Every byte of a damaged file is tracked back to where it
//! came from: a byte of one of the clean files at some index, or nowhere (inserted garbage, a
//! changed value). A block of a clean file is untouched at position `q` of the damaged file if
//! the bytes `q..=q + size` came, in order and unchanged, from its span, both sync bytes
//! included. This is the position oracle of `tests/damage.rs` for every kind of damage and
//! any combination at once: an edit in place touches the blocks whose span holds a changed
//! byte; an insertion touches the block whose span it splits; a deletion the blocks it cuts
//! into; a duplicated range leaves its source untouched and may hold whole blocks (which are
//! then untouched twice); truncation touches the block it cuts; prepended garbage and an
//! appended file touch nothing. Every untouched occurrence must come back, at its position;
//! a block compressed with a dictionary the file embeds comes back only when the reader knows
//! the dictionary (given to it, or an intact dictionary block before it).
//!
//! **What may come back.** A block that comes back is one whose bytes are a clean block's (it
//! may lie across a seam of a duplicated range, see `tests/damage.rs`), or, for a compressed
//! block, one whose decoded content is a clean block's: zstd ignores some bits of its frame
//! header, so a flip there leaves the block intact (its CRC covers the uncompressed payload).
//! For edits in place the blocks that come back are exactly the untouched ones (and such
//! re-encoded blocks at their own place).

mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use cobsfile::{BlockType, Compression, Dictionary, Ending, ReaderBuilder, Report, WriterBuilder};
use common::Rng;
use common::*;
use proptest::prelude::*;

/// The bytes every version 1 file starts with (spec section 5).
const HEADER: [u8; 19] = [
    0x00, 0x02, 0x20, 0x01, 0x0e, 0x43, 0x4f, 0x42, 0x53, 0x46, 0x49, 0x4c, 0x45, 0x02, 0x31, 0xed,
    0xe8, 0x56, 0x00,
];
const HEADER_LEN: usize = HEADER.len();

// ---------------------------------------------------------------------------------------------
// Files.

/// How a file's data blocks are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Codec {
    None,
    Zstd(i32),
    /// zstd with the test dictionary, embedded in the file.
    Embedded(i32),
    /// zstd with the test dictionary, given to readers.
    External(i32),
}

/// One call on a writer.
#[derive(Debug, Clone)]
enum Item {
    Record(Vec<u8>),
    Metadata(Vec<(String, Vec<u8>)>),
    /// A block of a type this version does not define, written with `write_raw_block`.
    Raw(i64, Vec<u8>),
}

/// What a test file is made of.
#[derive(Debug, Clone)]
struct Plan {
    items: Vec<Item>,
    block_target: usize,
    codec: Codec,
}

/// A zstd dictionary of raw content: words the generated text records are made of.
fn dictionary() -> &'static Dictionary {
    static DICT: OnceLock<Dictionary> = OnceLock::new();
    DICT.get_or_init(|| {
        let mut bytes = Vec::new();
        for (i, w) in WORDS.iter().cycle().take(400).enumerate() {
            bytes.extend_from_slice(w.as_bytes());
            bytes.push(if i % 7 == 0 { b'\n' } else { b' ' });
        }
        Dictionary::new(bytes)
    })
}

const WORDS: &[&str] = &[
    "{\"event\":",
    "\"level\":\"info\"",
    "\"service\":\"checkout\"",
    "order",
    "payment",
    "accepted",
    "refused",
    "\"status\":200",
    "}",
    "\u{0}\u{0}",
];

/// Text that compresses well (with or without the dictionary), zero bytes now and then.
fn text_record(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::with_capacity(len + 24);
    while out.len() < len {
        out.extend_from_slice(WORDS[rng.below(WORDS.len() as u64) as usize].as_bytes());
        out.push(b' ');
    }
    out.truncate(len);
    out
}

/// Record bytes of one of the shared contents or text.
fn record(len: usize, content: u8, seed: u64) -> Vec<u8> {
    match content % 6 {
        0 => record_bytes(len, Content::Random, seed),
        1 => record_bytes(len, Content::ZeroFree, seed),
        2 => record_bytes(len, Content::ZeroRich, seed),
        3 => record_bytes(len, Content::AllZero, seed),
        4 => record_bytes(len, Content::Runs254, seed),
        _ => text_record(len, seed),
    }
}

impl Plan {
    /// Writes the file.
    fn write(&self) -> Vec<u8> {
        let mut builder = WriterBuilder::new().block_target(self.block_target);
        match self.codec {
            Codec::None => {}
            Codec::Zstd(level) => builder = builder.compression(Compression::Zstd { level }),
            Codec::Embedded(level) | Codec::External(level) => {
                let embed = matches!(self.codec, Codec::Embedded(_));
                builder = builder
                    .compression(Compression::Zstd { level })
                    .dictionary(dictionary().clone(), embed);
            }
        }
        let mut writer = builder.build(Vec::new()).expect("build");
        for item in &self.items {
            match item {
                Item::Record(r) => writer.write_record(r).expect("write_record"),
                Item::Metadata(m) => writer
                    .write_metadata(m.iter().map(|(k, v)| (k.as_str(), v.as_slice())))
                    .expect("write_metadata"),
                Item::Raw(t, p) => writer.write_raw_block(*t, p).expect("write_raw_block"),
            }
        }
        writer.finish().expect("finish")
    }

    fn records(&self) -> Vec<Vec<u8>> {
        self.items
            .iter()
            .filter_map(|i| match i {
                Item::Record(r) => Some(r.clone()),
                _ => None,
            })
            .collect()
    }

    /// A random plan: up to `max_items` items, records up to `max_len` bytes.
    fn random(rng: &mut Rng, max_items: u64, max_len: u64) -> Plan {
        let n = rng.below(max_items + 1);
        let items = (0..n)
            .map(|_| match rng.below(20) {
                0 | 1 => Item::Metadata(random_entries(rng)),
                2 => Item::Raw(random_type(rng), random_payload(rng)),
                3 if rng.below(4) == 0 => {
                    // Long enough for full COBS runs of 254 bytes.
                    let len = 250 + rng.below(800) as usize;
                    Item::Record(record(len, rng.below(6) as u8, rng.next_u64()))
                }
                _ => {
                    let len = rng.below(max_len + 1) as usize;
                    Item::Record(record(len, rng.below(6) as u8, rng.next_u64()))
                }
            })
            .collect();
        let block_target = match rng.below(3) {
            0 => 1 + rng.below(8),
            1 => 8 + rng.below(56),
            _ => 64 + rng.below(300),
        } as usize;
        let level = [-3, 1, 3][rng.below(3) as usize];
        let codec = match rng.below(8) {
            0..=3 => Codec::None,
            4 | 5 => Codec::Zstd(level),
            6 => Codec::Embedded(level),
            _ => Codec::External(level),
        };
        Plan {
            items,
            block_target,
            codec,
        }
    }
}

fn random_entries(rng: &mut Rng) -> Vec<(String, Vec<u8>)> {
    let mut map = BTreeMap::new();
    for _ in 0..rng.below(4) {
        let key = format!("k{}", rng.below(100));
        let len = rng.below(20) as usize;
        map.insert(key, record(len, rng.below(6) as u8, rng.next_u64()));
    }
    map.into_iter().collect()
}

/// A type id for `write_raw_block`: an application's (negative) or a reserved one.
fn random_type(rng: &mut Rng) -> i64 {
    match rng.below(4) {
        0 => -1 - rng.below(1000) as i64,
        1 => i64::MIN + rng.below(10) as i64,
        2 => 12 + rng.below(52) as i64,
        _ => 64 + rng.below(1 << 40) as i64,
    }
}

fn random_payload(rng: &mut Rng) -> Vec<u8> {
    let len = rng.below(40) as usize;
    record(len, rng.below(6) as u8, rng.next_u64())
}

fn items_strategy(max_len: usize) -> impl Strategy<Value = Vec<Item>> {
    prop::collection::vec(
        prop_oneof![
            16 => (0..=max_len, 0u8..6, any::<u64>())
                .prop_map(|(len, c, seed)| Item::Record(record(len, c, seed))),
            // Long enough for full COBS runs of 254 bytes.
            1 => (250usize..1000, 0u8..6, any::<u64>())
                .prop_map(|(len, c, seed)| Item::Record(record(len, c, seed))),
            2 => metadata_strategy().prop_map(Item::Metadata),
            1 => (any::<u64>(), any::<u64>()).prop_map(|(a, b)| {
                let mut rng = Rng::new(a ^ b.rotate_left(17));
                Item::Raw(random_type(&mut rng), random_payload(&mut rng))
            }),
        ],
        0..40,
    )
}

fn plan_strategy() -> impl Strategy<Value = Plan> {
    (
        items_strategy(60),
        prop_oneof![1usize..8, 8usize..64, 64usize..300],
        prop_oneof![
            4 => Just(Codec::None),
            2 => prop::sample::select(vec![-3, 1, 3]).prop_map(Codec::Zstd),
            1 => prop::sample::select(vec![-3, 1, 3]).prop_map(Codec::Embedded),
            1 => prop::sample::select(vec![-3, 1, 3]).prop_map(Codec::External),
        ],
    )
        .prop_map(|(items, block_target, codec)| Plan {
            items,
            block_target,
            codec,
        })
}

// ---------------------------------------------------------------------------------------------
// Damage, with every byte tracked back to where it came from.

/// One edit. Positions are taken modulo the length of the file at that point, so edits
/// combine in any order.
#[derive(Debug, Clone)]
enum Damage {
    /// XOR masks (non-zero) at positions.
    Flips(Vec<(u64, u8)>),
    /// A range set to 0x00.
    Zero {
        at: u64,
        len: usize,
    },
    /// Bytes inserted before a position (0..=len).
    Insert {
        at: u64,
        bytes: Vec<u8>,
    },
    Delete {
        at: u64,
        len: usize,
    },
    /// `[from, from + len)` copied before `to` (0..=len).
    Duplicate {
        from: u64,
        len: usize,
        to: u64,
    },
    /// Cut to `at % (len + 1)` bytes.
    Truncate {
        at: u64,
    },
    /// Another file appended (as `cat a b` would).
    Append(Plan),
    /// Garbage in front.
    Prepend(Vec<u8>),
}

impl Damage {
    /// Whether the edit changes bytes only in place (or changes nothing).
    fn in_place(&self) -> bool {
        matches!(self, Damage::Flips(_) | Damage::Zero { .. })
    }
}

/// A byte of a damaged file and where it came from: (file, index) in a clean file, or
/// nowhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Byte {
    value: u8,
    origin: Option<(usize, usize)>,
}

/// A clean file as written, and its blocks as a reader returns them.
#[derive(Debug, Clone)]
struct Clean {
    file: Vec<u8>,
    blocks: Vec<Blk>,
    records: Vec<Vec<u8>>,
}

impl Clean {
    fn new(plan: &Plan, options: &ReaderBuilder) -> Clean {
        let file = plan.write();
        let mut reader = options.from_slice(&file);
        let mut blocks = Vec::new();
        while let Some(item) = reader.next_block() {
            blocks.push(Blk::of(&item.expect("a clean file reads clean")));
        }
        let records: Vec<Vec<u8>> = blocks.iter().flat_map(|b| b.records.clone()).collect();
        assert_eq!(records, plan.records());
        let raw: Vec<(i64, Vec<u8>)> = blocks
            .iter()
            .filter_map(|b| match b.block_type {
                BlockType::Unknown(t) => Some((t, b.payload.clone())),
                _ => None,
            })
            .collect();
        let written: Vec<(i64, Vec<u8>)> = plan
            .items
            .iter()
            .filter_map(|i| match i {
                Item::Raw(t, p) => Some((*t, p.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(raw, written);
        Clean {
            file,
            blocks,
            records,
        }
    }
}

/// A test case: clean files (the first is the one damaged, the others appended) and the
/// damaged bytes with their origins.
struct Case {
    cleans: Vec<Clean>,
    bytes: Vec<Byte>,
    options: ReaderBuilder,
    /// Only edits in place on the first file.
    in_place: bool,
    /// A range was duplicated: what comes back need not be in written order.
    duplicated: bool,
    damages: Vec<Damage>,
}

impl std::fmt::Debug for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hex = |b: &[u8]| -> String { b.iter().map(|b| format!("{b:02x}")).collect() };
        writeln!(f, "Case {{ damages: {:?}", self.damages)?;
        for (i, c) in self.cleans.iter().enumerate() {
            let spans: Vec<(u64, u64)> = c.blocks.iter().map(|b| (b.offset, b.size)).collect();
            writeln!(f, "  clean {i}: {} spans {spans:?}", hex(&c.file))?;
        }
        write!(f, "  damaged: {} }}", hex(&self.damaged()))
    }
}

impl Case {
    fn new(plan: &Plan, damages: Vec<Damage>) -> Case {
        let mut plans = vec![plan];
        for d in &damages {
            if let Damage::Append(p) = d {
                plans.push(p);
            }
        }
        let mut options = ReaderBuilder::new();
        if plans.iter().any(|p| matches!(p.codec, Codec::External(_))) {
            options = options.dictionary(dictionary().clone());
        }
        let cleans: Vec<Clean> = plans.iter().map(|p| Clean::new(p, &options)).collect();
        let mut bytes: Vec<Byte> = cleans[0]
            .file
            .iter()
            .enumerate()
            .map(|(i, &value)| Byte {
                value,
                origin: Some((0, i)),
            })
            .collect();
        let mut appended = 0;
        for d in &damages {
            apply(&mut bytes, d, &cleans, &mut appended);
        }
        Case {
            in_place: damages.iter().all(Damage::in_place),
            duplicated: damages
                .iter()
                .any(|d| matches!(d, Damage::Duplicate { .. })),
            cleans,
            bytes,
            options,
            damages,
        }
    }

    fn damaged(&self) -> Vec<u8> {
        self.bytes.iter().map(|b| b.value).collect()
    }

    /// Every record of every clean file, in the order the files were joined.
    fn written(&self) -> Vec<Vec<u8>> {
        self.cleans
            .iter()
            .flat_map(|c| c.records.iter().cloned())
            .collect()
    }

    /// The untouched occurrences of clean blocks: (position in the damaged file, block).
    fn untouched(&self) -> Vec<(usize, &Blk)> {
        let mut starts: HashMap<(usize, usize), Vec<usize>> = HashMap::new();
        for (q, b) in self.bytes.iter().enumerate() {
            if let Some(origin) = b.origin {
                starts.entry(origin).or_default().push(q);
            }
        }
        let mut found = Vec::new();
        for (f, clean) in self.cleans.iter().enumerate() {
            for blk in &clean.blocks {
                let (o, size) = (blk.offset as usize, blk.size as usize);
                for &q in starts.get(&(f, o)).map_or(&[][..], Vec::as_slice) {
                    let whole = (0..=size).all(|i| {
                        self.bytes.get(q + i).is_some_and(|b| {
                            b.origin == Some((f, o + i)) && b.value == clean.file[o + i]
                        })
                    });
                    if whole {
                        found.push((q, blk));
                    }
                }
            }
        }
        found.sort_by_key(|&(q, _)| q);
        found
    }
}

/// Applies one edit.
fn apply(bytes: &mut Vec<Byte>, damage: &Damage, cleans: &[Clean], appended: &mut usize) {
    let set = |b: &mut Byte, value: u8| {
        if b.value != value {
            *b = Byte {
                value,
                origin: None,
            };
        }
    };
    let garbage = |v: &[u8]| -> Vec<Byte> {
        v.iter()
            .map(|&value| Byte {
                value,
                origin: None,
            })
            .collect()
    };
    let len = bytes.len();
    match damage {
        Damage::Flips(flips) => {
            for &(at, mask) in flips {
                if len > 0 {
                    let b = &mut bytes[(at % len as u64) as usize];
                    set(b, b.value ^ mask.max(1));
                }
            }
        }
        Damage::Zero { at, len: n } => {
            if len > 0 {
                let start = (at % len as u64) as usize;
                for b in &mut bytes[start..(start + n).min(len)] {
                    set(b, 0);
                }
            }
        }
        Damage::Insert { at, bytes: new } => {
            let p = (at % (len as u64 + 1)) as usize;
            bytes.splice(p..p, garbage(new));
        }
        Damage::Delete { at, len: n } => {
            if len > 0 {
                let p = (at % len as u64) as usize;
                bytes.drain(p..(p + n).min(len));
            }
        }
        Damage::Duplicate { from, len: n, to } => {
            if len > 0 {
                let a = (from % len as u64) as usize;
                let copy: Vec<Byte> = bytes[a..(a + n).min(len)].to_vec();
                let p = (to % (len as u64 + 1)) as usize;
                bytes.splice(p..p, copy);
            }
        }
        Damage::Truncate { at } => bytes.truncate((at % (len as u64 + 1)) as usize),
        Damage::Append(_) => {
            *appended += 1;
            let f = *appended;
            bytes.extend(cleans[f].file.iter().enumerate().map(|(i, &value)| Byte {
                value,
                origin: Some((f, i)),
            }));
        }
        Damage::Prepend(new) => {
            bytes.splice(0..0, garbage(new));
        }
    }
}

fn random_bytes(rng: &mut Rng, max: u64) -> Vec<u8> {
    let n = 1 + rng.below(max) as usize;
    let zeros = rng.below(4);
    (0..n)
        .map(|_| match rng.below(4) {
            k if k < zeros => 0,
            _ => rng.next_u64() as u8,
        })
        .collect()
}

fn random_damage(rng: &mut Rng, block_type: u64) -> Damage {
    match block_type {
        0 => Damage::Flips(
            (0..1 + rng.below(4))
                .map(|_| (rng.next_u64(), 1 + rng.below(255) as u8))
                .collect(),
        ),
        1 => Damage::Zero {
            at: rng.next_u64(),
            len: 1 + rng.below(40) as usize,
        },
        2 => Damage::Insert {
            at: rng.next_u64(),
            bytes: random_bytes(rng, 12),
        },
        3 => Damage::Delete {
            at: rng.next_u64(),
            len: 1 + rng.below(30) as usize,
        },
        4 => Damage::Duplicate {
            from: rng.next_u64(),
            len: 1 + rng.below(200) as usize,
            to: rng.next_u64(),
        },
        5 => Damage::Truncate { at: rng.next_u64() },
        6 => Damage::Append(Plan::random(rng, 12, 40)),
        _ => Damage::Prepend(match rng.below(3) {
            0 => b"garbage\n".to_vec(),
            _ => random_bytes(rng, 40),
        }),
    }
}

fn damage_strategy() -> impl Strategy<Value = Damage> {
    let bytes = || prop::collection::vec(prop_oneof![Just(0u8), any::<u8>()], 1..12);
    prop_oneof![
        prop::collection::vec((any::<u64>(), 1u8..=255), 1..5).prop_map(Damage::Flips),
        (any::<u64>(), 1usize..40).prop_map(|(at, len)| Damage::Zero { at, len }),
        (any::<u64>(), bytes()).prop_map(|(at, bytes)| Damage::Insert { at, bytes }),
        (any::<u64>(), 1usize..30).prop_map(|(at, len)| Damage::Delete { at, len }),
        (any::<u64>(), 1usize..200, any::<u64>()).prop_map(|(from, len, to)| Damage::Duplicate {
            from,
            len,
            to
        }),
        any::<u64>().prop_map(|at| Damage::Truncate { at }),
        (items_strategy(30), 1usize..100).prop_map(|(items, block_target)| Damage::Append(Plan {
            items,
            block_target,
            codec: Codec::None,
        })),
        prop_oneof![Just(b"garbage\n".to_vec()), bytes()].prop_map(Damage::Prepend),
    ]
}

// ---------------------------------------------------------------------------------------------
// Checks.

/// Counts of notable things seen, printed by the torture test.
static REENCODED: AtomicU64 = AtomicU64::new(0);

/// The intact blocks and errors of a full read with `options`.
fn full_read(bytes: &[u8], options: &ReaderBuilder) -> (Vec<Blk>, Vec<Fault>) {
    let mut reader = options.from_slice(bytes);
    let (mut blocks, mut errors) = (Vec::new(), Vec::new());
    while let Some(item) = reader.next_block() {
        match item {
            Ok(b) => blocks.push(Blk::of(&b)),
            Err(e) => errors.push(Fault::from(e)),
        }
    }
    (blocks, errors)
}

/// What a block holds, wherever it is: kind, records, entries, payload.
type BlockContent<'a> = (BlockType, &'a [Vec<u8>], &'a [(String, Vec<u8>)], &'a [u8]);

/// What a block holds, wherever it is.
fn content(b: &Blk) -> BlockContent<'_> {
    (b.block_type, &b.records, &b.entries, &b.payload)
}

fn contents<'a>(blocks: &[&'a Blk]) -> Vec<BlockContent<'a>> {
    blocks.iter().map(|b| content(b)).collect()
}

/// Checks what a full read of the damaged file returns against the oracles; returns the
/// blocks and errors.
fn check_read(case: &Case, damaged: &[u8]) -> (Vec<Blk>, Vec<Fault>) {
    let (blocks, errors) = full_read(damaged, &case.options);
    let dictionary_given = given_dictionary(&case.options);

    // Every untouched occurrence comes back where it is, unless it needs a dictionary that
    // the reader does not know at that point.
    let by_offset: HashMap<u64, &Blk> = blocks.iter().map(|b| (b.offset, b)).collect();
    let first_dictionary = blocks
        .iter()
        .find(|b| b.block_type == BlockType::Dictionary)
        .map(|b| b.offset);
    let mut expected = Vec::new();
    for (q, clean) in case.untouched() {
        let available = !clean.codec.starts_with("zstd+dict")
            || dictionary_given
            || first_dictionary.is_some_and(|d| d < q as u64);
        if !available {
            continue;
        }
        let got = by_offset.get(&(q as u64)).unwrap_or_else(|| {
            panic!("untouched block at {q} did not come back: {case:?}\nerrors {errors:?}")
        });
        assert_eq!(content(got), content(clean), "block at {q}: {case:?}");
        assert_eq!(got.size, clean.size);
        expected.push(q as u64);
    }

    // What comes back is a clean block, byte for byte or (compressed) by content; after
    // edits in place, the one at the same place.
    let clean_bytes: HashMap<&[u8], &Blk> = case
        .cleans
        .iter()
        .flat_map(|c| {
            c.blocks.iter().map(move |b| {
                let span = b.offset as usize..=(b.offset + b.size) as usize;
                (&c.file[span], b)
            })
        })
        .collect();
    for b in &blocks {
        if expected.binary_search(&b.offset).is_ok() {
            continue;
        }
        let span = &damaged[b.offset as usize..=(b.offset + b.size) as usize];
        let same_bytes = clean_bytes
            .get(span)
            .is_some_and(|c| content(c) == content(b));
        if same_bytes && !case.in_place {
            continue;
        }
        let reencoded = |c: &Blk| c.codec != "none" && content(c) == content(b);
        let ok = if case.in_place {
            case.cleans[0]
                .blocks
                .iter()
                .any(|c| c.offset == b.offset && c.size == b.size && reencoded(c))
        } else {
            case.cleans.iter().flat_map(|c| &c.blocks).any(reencoded)
        };
        assert!(
            ok,
            "block at {} ({:?}, {} bytes) is no clean block: {case:?}",
            b.offset, b.block_type, b.size
        );
        REENCODED.fetch_add(1, Ordering::Relaxed);
    }

    // No record that was never written; in written order unless a range was duplicated.
    let records: Vec<Vec<u8>> = blocks.iter().flat_map(|b| b.records.clone()).collect();
    let written = case.written();
    assert!(records.len() <= written.len() || case.duplicated);
    if case.duplicated {
        for r in &records {
            assert!(
                written.contains(r),
                "a record that was never written: {case:?}"
            );
        }
    } else {
        assert!(
            is_subsequence(&records, &written),
            "records not written, or out of order: {case:?}"
        );
    }
    (blocks, errors)
}

/// Whether `options` holds the test dictionary (readers do not tell; the case knows).
fn given_dictionary(options: &ReaderBuilder) -> bool {
    // ReaderBuilder is opaque: decode a codec 2 block made for the test and see.
    static PROBE: OnceLock<Vec<u8>> = OnceLock::new();
    let probe = PROBE.get_or_init(|| {
        let mut writer = WriterBuilder::new()
            .compression(Compression::Zstd { level: 1 })
            .dictionary(dictionary().clone(), false)
            .build(Vec::new())
            .expect("build");
        writer.write_record(&text_record(200, 1)).expect("write");
        writer.finish().expect("finish")
    });
    let (records, errors) = options.from_slice(probe).read_all();
    errors.is_empty() && records.len() == 1
}

/// Checks `verify` of `bytes` against a full read (`blocks`, `errors`), through the slice and
/// the stream reader, and returns the report.
fn check_verify(bytes: &[u8], options: &ReaderBuilder, blocks: &[Blk], errors: &[Fault]) -> Report {
    let report = cobsfile::verify(&mut options.from_slice(bytes)).expect("verify");
    let len = bytes.len() as u64;
    assert_eq!(report.len, len);
    let records: u64 = blocks.iter().map(|b| b.records.len() as u64).sum();
    assert_eq!(report.records, records);
    assert_eq!(report.blocks.total(), blocks.len() as u64);
    let count = |k: BlockType| blocks.iter().filter(|b| b.block_type == k).count() as u64;
    assert_eq!(report.blocks.header, count(BlockType::Header));
    assert_eq!(report.blocks.metadata, count(BlockType::Metadata));
    assert_eq!(report.blocks.data, count(BlockType::Data));
    assert_eq!(report.blocks.dictionary, count(BlockType::Dictionary));
    let mut unknown = BTreeMap::new();
    for b in blocks {
        if let BlockType::Unknown(t) = b.block_type {
            *unknown.entry(t).or_insert(0u64) += 1;
        }
    }
    assert_eq!(report.blocks.unknown, unknown);
    assert_eq!(
        report.block_bytes,
        blocks.iter().map(|b| b.size).sum::<u64>()
    );
    let mut expected = errors.to_vec();
    for e in &mut expected {
        if let Fault::Damaged {
            cause: cobsfile::Cause::SyncMismatch { found, .. },
            ..
        } = e
        {
            *found = 0;
        }
    }
    let normalized: Vec<Fault> = report
        .damaged
        .iter()
        .map(|d| {
            Fault::from(cobsfile::Error::Damaged {
                start: d.range.start,
                end: d.range.end,
                cause: d.cause.clone(),
            })
        })
        .collect();
    assert_eq!(
        normalized, expected,
        "verify reports what a full read finds"
    );
    assert_eq!(report.damaged.is_empty(), errors.is_empty());

    // How the file ends (spec 9.5.1), from the full read: the last intact block, whether
    // damage follows it, and the last end or log block since the last header block.
    let last = blocks.last();
    let damage_after = errors.iter().any(|e| match e {
        Fault::Damaged { start, .. } => last.is_none_or(|b| *start > b.offset),
        _ => false,
    });
    let mark = blocks
        .iter()
        .map(|b| b.block_type)
        .rfind(|t| matches!(t, BlockType::Header | BlockType::End | BlockType::Log));
    let ending = if len == 0 {
        Ending::Empty
    } else if last.is_some_and(|b| matches!(b.block_type, BlockType::End | BlockType::Index))
        && !damage_after
    {
        Ending::Finished
    } else if mark == Some(BlockType::Log) {
        Ending::Open
    } else {
        Ending::Unfinished
    };
    assert_eq!(report.ending, ending, "how the file ends");
    let complete = matches!(ending, Ending::Finished | Ending::Open);
    assert_eq!(report.is_clean(), errors.is_empty() && complete);

    // Damaged ranges: non-empty, sorted, disjoint, inside the input; with the intact ranges
    // they tile the input.
    let mut at = 0;
    for d in &report.damaged {
        assert!(d.range.start < d.range.end && d.range.end <= len, "{d:?}");
        assert!(
            d.range.start >= at,
            "damaged ranges overlap or are unsorted"
        );
        at = d.range.end;
    }
    let mut tiles: Vec<(u64, u64)> = report
        .damaged
        .iter()
        .map(|d| (d.range.start, d.range.end))
        .chain(report.intact_ranges().iter().map(|r| (r.start, r.end)))
        .collect();
    tiles.sort_unstable();
    let mut at = 0;
    for (s, e) in tiles {
        assert_eq!(s, at, "intact and damaged ranges do not tile the input");
        assert!(e > s);
        at = e;
    }
    assert_eq!(at, len);
    assert!(report.block_bytes + report.damaged_bytes() <= len);

    // The stream reader reports the same, within bounded memory.
    let mut stream = options.from_read(ChunkedReader::new(bytes, len ^ 0x5eed, 97));
    let streamed = cobsfile::verify(&mut stream).expect("verify a stream");
    assert_eq!(normalize(&streamed), normalize(&report), "stream verify");
    assert!(stream.source().capacity() <= 2 * (256 << 10) + bytes.len());
    report
}

/// A report without what its damaged ranges held.
fn without_held(report: &Report) -> Report {
    let mut report = report.clone();
    for d in &mut report.damaged {
        d.held = None;
    }
    report
}

/// What the damaged ranges held, when the damaged file still ends with a usable index, is
/// the blocks that index lists in them; otherwise nothing is said.
fn check_held(report: &Report, damaged: &[u8]) {
    let index = cobsfile::Index::find(damaged).filter(|i| i.start() == 0);
    for d in &report.damaged {
        match &index {
            Some(index) if d.range.start <= index.offset() => {
                let held = d.held.as_ref().expect("held, from the index");
                let listed: Vec<_> = index
                    .entries()
                    .iter()
                    .filter(|e| e.offset + 1 >= d.range.start && e.offset < d.range.end)
                    .collect();
                assert_eq!(held.blocks, listed.len() as u64);
                let records: u64 = listed.iter().map(|e| e.records).sum();
                assert_eq!(held.records, records);
            }
            _ => assert!(d.held.is_none()),
        }
    }
}

/// A report with `SyncMismatch::found` dropped (a stream reader names its window's end).
fn normalize(report: &Report) -> Report {
    let mut report = report.clone();
    for d in &mut report.damaged {
        if let cobsfile::Cause::SyncMismatch { found, .. } = &mut d.cause {
            *found = 0;
        }
    }
    report
}

/// Recovers `damaged` and checks the recovered file; returns it.
fn check_recover(case: &Case, damaged: &[u8], blocks: &[Blk], report: &Report) -> Vec<u8> {
    let options = &case.options;
    let mut out = Vec::new();
    let recovery = cobsfile::recover(damaged, options, &mut out).expect("recover");
    check_held(&recovery.report, damaged);
    assert_eq!(
        without_held(&recovery.report),
        *report,
        "recover reports what verify does"
    );
    assert_eq!(recovery.written, out.len() as u64);
    assert_eq!(recovery.is_lossless(), report.damaged.is_empty());
    let kept: Vec<&Blk> = blocks
        .iter()
        .filter(|b| {
            !matches!(
                b.block_type,
                BlockType::Header | BlockType::Index | BlockType::End
            )
        })
        .collect();
    // The header, the kept blocks, a fresh index, an end block.
    assert_eq!(recovery.blocks, 3 + kept.len() as u64);

    // The header, then every intact block but headers, indexes and end blocks, byte for byte,
    // then an index of them and an end block.
    let mut expected = HEADER.to_vec();
    for b in &kept {
        expected.extend_from_slice(&damaged[b.offset as usize + 1..=(b.offset + b.size) as usize]);
    }
    assert!(
        out.starts_with(&expected),
        "recover copies intact blocks byte for byte"
    );
    let index = cobsfile::Index::find(&out).expect("recovered files end with an index");
    assert_eq!(index.offset() as usize, expected.len() - 1);
    assert_eq!(index.start(), 0);
    assert_eq!(index.len(), 1 + kept.len());
    assert!(
        expected.len() <= damaged.len() + HEADER_LEN,
        "output of {} bytes (before its index) from {}",
        expected.len(),
        damaged.len()
    );

    // Clean, and every reader returns what the full read of the damaged file did: records,
    // metadata, unknown blocks, in the same order.
    let (again, errors) = full_read(&out, options);
    assert!(
        errors.is_empty(),
        "recovered file damaged: {errors:?}\n{case:?}"
    );
    assert_eq!(again[0].block_type, BlockType::Header);
    assert_eq!(again[0].offset, 0);
    let n = again.len();
    assert_eq!(
        again[n - 1].block_type,
        BlockType::End,
        "a recovered file is finished"
    );
    assert_eq!(again[n - 2].block_type, BlockType::Index);
    let again_kept: Vec<&Blk> = again[1..n - 2].iter().collect();
    assert!(again_kept.iter().all(|b| !matches!(
        b.block_type,
        BlockType::Header | BlockType::Index | BlockType::End
    )));
    for (entry, block) in index.entries().iter().zip(&again) {
        assert_eq!(
            (entry.offset, entry.block_type, entry.size),
            (block.offset, block.block_type, block.size)
        );
    }
    assert_eq!(contents(&again_kept), contents(&kept));
    for (a, k) in again_kept.iter().zip(&kept) {
        assert_eq!(a.size, k.size);
        assert_eq!(a.codec, k.codec);
        if matches!(k.block_type, BlockType::Unknown(_)) {
            assert_eq!(
                out[a.offset as usize..=(a.offset + a.size) as usize],
                damaged[k.offset as usize..=(k.offset + k.size) as usize],
                "an unknown block changed"
            );
        }
    }
    let report_out = check_verify(&out, options, &again, &errors);
    assert!(report_out.is_clean());
    assert_eq!(report_out.ending, Ending::Finished);
    assert_eq!(report_out.records, report.records);
    let stream: Vec<Vec<u8>> = {
        let mut reader = options.from_read(ChunkedReader::new(&out, out.len() as u64, 300));
        let (records, errors) = reader.read_all();
        assert!(errors.is_empty());
        records
    };
    let records: Vec<Vec<u8>> = blocks.iter().flat_map(|b| b.records.clone()).collect();
    assert_eq!(stream, records);
    let metadata: Vec<Vec<(String, Vec<u8>)>> = options
        .from_slice(&out)
        .metadata()
        .map(|m| m.expect("metadata").entries)
        .collect();
    let damaged_metadata: Vec<Vec<(String, Vec<u8>)>> = blocks
        .iter()
        .filter(|b| b.block_type == BlockType::Metadata)
        .map(|b| b.entries.clone())
        .collect();
    assert_eq!(metadata, damaged_metadata);

    // Recovering the recovered file changes nothing.
    let mut twice = Vec::new();
    let second = cobsfile::recover(&out, options, &mut twice).expect("recover again");
    assert!(second.is_lossless());
    assert_eq!(twice, out, "recovering a recovered file changed it");
    assert_eq!(second.report.records, report.records);
    out
}

/// Every check for one case.
fn check_case(case: &Case) {
    let damaged = case.damaged();
    let (blocks, errors) = check_read(case, &damaged);
    let report = check_verify(&damaged, &case.options, &blocks, &errors);
    if case.in_place {
        // Every byte belongs to a block: an unchanged file is clean, and a changed one is
        // clean only if every block reads back exactly as written. That happens when the
        // change lies in a zstd frame and decodes to the same payload, which the CRC (over
        // the payload uncompressed) rightly accepts (the case below).
        let changed = case.bytes.iter().any(|b| b.origin.is_none());
        if !changed {
            assert!(report.is_clean(), "{case:?}");
        } else if report.is_clean() {
            assert_eq!(blocks, case.cleans[0].blocks, "{case:?}");
        }
    }
    if case.damages.iter().all(|d| matches!(d, Damage::Append(_))) {
        assert!(report.is_clean(), "concatenated files are clean");
    }
    let out = check_recover(case, &damaged, &blocks, &report);
    if case.damages.is_empty() {
        assert_eq!(out, damaged, "recovering a clean file gives it back");
    }
}

// ---------------------------------------------------------------------------------------------
// Property tests, one kind of damage each.

fn check(plan: &Plan, damages: Vec<Damage>) {
    check_case(&Case::new(plan, damages));
}

proptest! {
    #![proptest_config(config(48))]

    #[test]
    fn untouched_files_recover_to_themselves(plan in plan_strategy()) {
        check(&plan, vec![]);
    }

    #[test]
    fn bit_flips(plan in plan_strategy(), flips in prop::collection::vec((any::<u64>(), 1u8..=255), 1..5)) {
        check(&plan, vec![Damage::Flips(flips)]);
    }

    #[test]
    fn zeroed_range(plan in plan_strategy(), at: u64, len in 1usize..60) {
        check(&plan, vec![Damage::Zero { at, len }]);
    }

    #[test]
    fn inserted_bytes(
        plan in plan_strategy(),
        at: u64,
        bytes in prop::collection::vec(prop_oneof![Just(0u8), any::<u8>()], 1..12),
    ) {
        check(&plan, vec![Damage::Insert { at, bytes }]);
    }

    #[test]
    fn deleted_bytes(plan in plan_strategy(), at: u64, len in 1usize..40) {
        check(&plan, vec![Damage::Delete { at, len }]);
    }

    #[test]
    fn duplicated_range(plan in plan_strategy(), from: u64, len in 1usize..300, to: u64) {
        check(&plan, vec![Damage::Duplicate { from, len, to }]);
    }

    #[test]
    fn truncation(plan in plan_strategy(), at: u64) {
        check(&plan, vec![Damage::Truncate { at }]);
    }

    #[test]
    fn two_files_concatenated(plan in plan_strategy(), second in plan_strategy()) {
        check(&plan, vec![Damage::Append(second)]);
    }

    #[test]
    fn garbage_prepended(
        plan in plan_strategy(),
        garbage in prop_oneof![
            Just(b"garbage\n".to_vec()),
            prop::collection::vec(any::<u8>(), 1..64),
            prop::collection::vec(prop_oneof![Just(0u8), Just(1u8), Just(6u8), any::<u8>()], 1..64),
        ],
    ) {
        check(&plan, vec![Damage::Prepend(garbage)]);
    }

    #[test]
    fn mixed(plan in plan_strategy(), damages in prop::collection::vec(damage_strategy(), 1..4)) {
        check(&plan, damages);
    }
}

// ---------------------------------------------------------------------------------------------
// Torture.

/// Thousands of random cases: every kind of damage, 1 to 3 at once, on random files. The
/// number of cases is `COBSFILE_TORTURE_CASES` (default 3000), the seed
/// `COBSFILE_TORTURE_SEED` (default fixed); a failing case names its index and seed.
#[test]
fn torture() {
    let cases: u64 = std::env::var("COBSFILE_TORTURE_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000);
    let seed: u64 = std::env::var("COBSFILE_TORTURE_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x70_27_u64);
    let started = std::time::Instant::now();
    let mut kinds = [0u64; 8];
    let mut lossless = 0;
    for i in 0..cases {
        let case_seed = seed.wrapping_mul(0x1000_0000_01b3) ^ i;
        let mut rng = Rng::new(case_seed);
        let plan = Plan::random(&mut rng, 40, 60);
        let damages: Vec<Damage> = (0..1 + rng.below(3))
            .map(|_| {
                let block_type = rng.below(8);
                kinds[block_type as usize] += 1;
                random_damage(&mut rng, block_type)
            })
            .collect();
        let case = Case::new(&plan, damages);
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check_case(&case)));
        if let Err(e) = result {
            eprintln!("torture case {i} (seed {case_seed:#x}) failed");
            std::panic::resume_unwind(e);
        }
        if i % 16 == 0 {
            // Decoding on worker threads recovers the same bytes.
            let damaged = case.damaged();
            let (mut one, mut two) = (Vec::new(), Vec::new());
            cobsfile::recover(&damaged, &case.options, &mut one).expect("recover");
            cobsfile::recover(&damaged, &case.options.clone().threads(2), &mut two)
                .expect("recover on two threads");
            assert_eq!(
                one, two,
                "torture case {i} (seed {case_seed:#x}): threads differ"
            );
        }
        if cobsfile::verify(&mut case.options.from_slice(&case.damaged()))
            .expect("verify")
            .is_clean()
        {
            lossless += 1;
        }
    }
    eprintln!(
        "torture: {cases} cases in {:.1?} (damage kinds {kinds:?}, {lossless} clean, {} blocks \
         intact but re-encoded)",
        started.elapsed(),
        REENCODED.load(Ordering::Relaxed)
    );
}

// ---------------------------------------------------------------------------------------------
// Cases the random ones reach rarely or never.

/// An empty input holds nothing damaged, and is empty, not clean (spec sections 5 and 9.5.1);
/// recovering it writes a header, an index and an end block, which then recovers to itself.
#[test]
fn empty_and_header_only_inputs() {
    let options = ReaderBuilder::new();
    let mut out = Vec::new();
    let recovery = cobsfile::recover(&[], &options, &mut out).expect("recover");
    assert!(recovery.is_lossless());
    assert_eq!(recovery.report.ending, Ending::Empty);
    assert!(
        out.starts_with(&HEADER),
        "the output is a valid file, so not empty"
    );
    let index = cobsfile::Index::find(&out).expect("and ends with an index");
    assert_eq!(index.len(), 1);
    assert_eq!(recovery.written, out.len() as u64);
    assert_eq!(recovery.blocks, 3);
    let mut again = Vec::new();
    cobsfile::recover(&out, &options, &mut again).expect("recover");
    assert_eq!(again, out);
    assert!(options.verify(&out).unwrap().is_clean());
    let report = cobsfile::verify(&mut options.from_slice(&[])).expect("verify");
    assert!(report.damaged.is_empty() && !report.is_clean());
    assert_eq!(report.ending, Ending::Empty);
    assert_eq!(report.len, 0);
    assert!(report.intact_ranges().is_empty());
    // One sync byte, or two (padding): nothing damaged, nothing in it, and not a finished
    // file: a file cut right after its first byte.
    for input in [&[0u8][..], &[0, 0]] {
        let report = cobsfile::verify(&mut options.from_slice(input)).expect("verify");
        assert!(report.damaged.is_empty(), "{input:?}");
        assert_eq!(report.ending, Ending::Unfinished, "{input:?}");
        assert_eq!(report.blocks.total(), 0);
    }
    // The header alone (a writer killed right after it): unfinished; recovered, finished.
    let report = options.verify(&HEADER).unwrap();
    assert_eq!(
        (report.ending, report.damaged.len()),
        (Ending::Unfinished, 0)
    );
    let mut out = Vec::new();
    let recovery = cobsfile::recover(&HEADER, &options, &mut out).expect("recover");
    assert!(recovery.is_lossless());
    assert_eq!(options.verify(&out).unwrap().ending, Ending::Finished);
}

/// Recovering drops the input's index and end blocks (they describe the old file) and keeps its
/// log blocks, and ends with its own index and end block: an open log, an unfinished file and
/// a finished file appended to all recover to finished files.
#[test]
fn recovered_files_are_finished() {
    let options = ReaderBuilder::new();
    let finished = Plan {
        items: vec![Item::Record(b"one".to_vec()), Item::Record(b"two".to_vec())],
        block_target: 4,
        codec: Codec::None,
    }
    .write();
    let end = finished.len() - 10;
    let log_block = raw_block(7, b"");
    let data = raw_block(3, &data_payload(&[b"three"]));
    let appended = [&finished[..], &[0], &log_block, &[0], &data].concat();
    let open = [&HEADER[..], &log_block, &data].concat();
    let cases = [
        (&finished[..], Ending::Finished, 2),
        (&finished[..=end], Ending::Finished, 2),
        (&appended[..], Ending::Open, 4),
        (&open[..], Ending::Open, 2),
        (&open[..HEADER_LEN + log_block.len()], Ending::Open, 1),
        (&HEADER[..], Ending::Unfinished, 0),
    ];
    for (input, ending, kept) in cases {
        let mut out = Vec::new();
        let recovery = cobsfile::recover(input, &options, &mut out).expect("recover");
        assert_eq!(recovery.report.ending, ending, "{input:?}");
        assert!(recovery.is_lossless());
        assert_eq!(recovery.blocks, 3 + kept, "{input:?}");
        let report = options.verify(&out).unwrap();
        assert!(report.is_clean());
        assert_eq!(report.ending, Ending::Finished);
        assert_eq!((report.blocks.index, report.blocks.end), (1, 1));
        assert_eq!(report.blocks.log, recovery.report.blocks.log);
        assert!(cobsfile::Index::find(&out).is_some());
    }
    // A finished file written by this version recovers to itself.
    let mut out = Vec::new();
    cobsfile::recover(&finished, &options, &mut out).expect("recover");
    assert_eq!(out, finished);
}

/// A header declaring a newer version stops recovery where it stops any reader (spec 8.1 and
/// 9.5): the blocks before it are recovered into a finished, clean file, nothing after it is
/// read, and the recovery says where it stopped; verify stops alike, with an error.
#[test]
fn a_newer_version_stops_recovery() {
    let v1 = Plan {
        items: vec![Item::Record(b"before".to_vec())],
        block_target: 10,
        codec: Codec::None,
    }
    .write();
    let v2 = [
        &[0u8][..],
        &raw_block(1, &header_payload(2)),
        &raw_block(3, &data_payload(&[b"after"])),
    ]
    .concat();
    for (input, before) in [
        (v2.clone(), Vec::<Vec<u8>>::new()),
        ([&v1[..], &v2[..]].concat(), vec![b"before".to_vec()]),
    ] {
        let mut out = Vec::new();
        let recovery = cobsfile::recover(&input, &ReaderBuilder::new(), &mut out).unwrap();
        let newer = recovery.newer_version.expect("stopped at the newer header");
        assert_eq!(newer.version, 2);
        assert_eq!(newer.offset, input.len() as u64 - v2.len() as u64);
        assert!(!recovery.is_lossless());
        let (records, errors) = ReaderBuilder::new().from_slice(&out).read_all();
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(records, before);
        assert!(ReaderBuilder::new().verify(&out).unwrap().is_clean());
        match cobsfile::verify(&mut ReaderBuilder::new().from_slice(&input)) {
            Err(cobsfile::Error::UnsupportedVersion { version: 2, .. }) => {}
            other => panic!("{other:?}"),
        }
    }
}

/// A file that embeds its dictionary, with the dictionary block damaged: without the
/// dictionary, the blocks compressed with it are unreadable (reported, not damage) and not
/// copied; given the dictionary, they are copied, and the recovered file then needs it too.
#[test]
fn a_lost_dictionary_block() {
    let items: Vec<Item> = (0..200)
        .map(|i| Item::Record(text_record(40 + i % 30, i as u64)))
        .collect();
    let file = Plan {
        items: items.clone(),
        block_target: 300,
        codec: Codec::Embedded(3),
    }
    .write();
    let (blocks, errors) = full_read(&file, &ReaderBuilder::new());
    assert!(errors.is_empty());
    assert_eq!(blocks[1].block_type, BlockType::Dictionary);
    let compressed = blocks
        .iter()
        .filter(|b| b.codec.starts_with("zstd+dict"))
        .count();
    assert!(compressed > 5, "{compressed} blocks use the dictionary");
    let mut damaged = file.clone();
    let middle = blocks[1].offset + blocks[1].size / 2;
    damaged[middle as usize] ^= 0x40;

    let without = ReaderBuilder::new();
    let mut out = Vec::new();
    let recovery = cobsfile::recover(&damaged, &without, &mut out).expect("recover");
    // The blocks that need the dictionary follow the damaged dictionary block directly: its
    // damage (the CRC), then their range, unreadable, never merged with it (spec 9.1), so the
    // report tells that a dictionary would bring them back.
    let kinds: Vec<_> = recovery
        .report
        .damaged
        .iter()
        .map(|d| d.cause.name())
        .collect();
    assert_eq!(kinds, ["crc", "dictionary"]);
    let lost_without = recovery.report.damaged_bytes();
    let (kept, errors) = full_read(&out, &without);
    assert!(errors.is_empty());
    assert!(kept.iter().all(|b| !b.codec.starts_with("zstd+dict")));
    assert_eq!(
        kept.iter().map(|b| b.records.len()).sum::<usize>() as u64,
        recovery.report.records
    );

    let with = ReaderBuilder::new().dictionary(dictionary().clone());
    let mut out = Vec::new();
    let recovery = cobsfile::recover(&damaged, &with, &mut out).expect("recover");
    assert_eq!(recovery.report.damaged.len(), 1);
    assert!(recovery.report.damaged_bytes() < lost_without);
    assert!(
        recovery.report.damaged[0].is_damage(),
        "{:?}",
        recovery.report.damaged
    );
    let written: Vec<Vec<u8>> = items
        .iter()
        .filter_map(|i| match i {
            Item::Record(r) => Some(r.clone()),
            _ => None,
        })
        .collect();
    let (records, errors) = with.from_slice(&out).read_all();
    assert!(errors.is_empty());
    assert_eq!(records, written, "only the dictionary block was lost");
    let (_, errors) = without.from_slice(&out).read_all();
    assert!(
        !errors.is_empty(),
        "the recovered file does not embed the dictionary"
    );
}

/// Two files embedding different dictionaries, concatenated: clean, and recovered whole.
#[test]
fn concatenated_files_with_different_dictionaries() {
    let records = |seed: u64| -> Vec<Vec<u8>> {
        (0..100)
            .map(|i| text_record(30 + i % 50, seed + i as u64))
            .collect()
    };
    let write = |dictionary: Dictionary, records: &[Vec<u8>]| {
        let mut writer = WriterBuilder::new()
            .block_target(200)
            .compression(Compression::Zstd { level: 3 })
            .dictionary(dictionary, true)
            .build(Vec::new())
            .expect("build");
        for r in records {
            writer.write_record(r).expect("write");
        }
        writer.finish().expect("finish")
    };
    let other = Dictionary::new(text_record(3000, 77));
    assert_ne!(other.id(), dictionary().id());
    let (a, b) = (records(0), records(1000));
    let joined = [write(dictionary().clone(), &a), write(other, &b)].concat();
    let options = ReaderBuilder::new();
    let mut out = Vec::new();
    let recovery = cobsfile::recover(&joined, &options, &mut out).expect("recover");
    assert!(recovery.is_lossless(), "{:?}", recovery.report.damaged);
    assert_eq!(recovery.report.blocks.dictionary, 2);
    let (got, errors) = options.from_slice(&out).read_all();
    assert!(errors.is_empty());
    assert_eq!(got, [a, b].concat());
    let mut again = Vec::new();
    cobsfile::recover(&out, &options, &mut again).expect("recover");
    assert_eq!(again, out);
}

/// Only regular files are mapped: a device or pipe reports no length, and mapping it would
/// make it an empty, clean file.
#[test]
fn only_regular_files_are_mapped() {
    let err = cobsfile::open("/dev/null").expect_err("a device is not mapped");
    assert!(err.to_string().contains("not a regular file"), "{err}");
}

/// A changed byte inside a zstd frame can decode to the same payload (zstd's encoding has
/// slack): the CRC, over the payload uncompressed, accepts the block, rightly, since what it
/// holds is what was written. Every flip of every byte of a file with an embedded, compressed
/// dictionary block either shows as damage or reads back every block exactly as written.
#[test]
fn a_change_a_zstd_frame_decodes_away_reads_as_written() {
    let plan = Plan {
        items: (0..6)
            .map(|i| Item::Record(text_record(20 + i, i as u64)))
            .collect(),
        block_target: 20,
        codec: Codec::Embedded(1),
    };
    let options = ReaderBuilder::new();
    let clean = Clean::new(&plan, &options);
    let mut decoded_away = 0;
    for at in 0..clean.file.len() {
        for mask in [0x01, 0x5c, 0x80] {
            let mut bytes = clean.file.clone();
            bytes[at] ^= mask;
            if options.verify(&bytes).unwrap().is_clean() {
                decoded_away += 1;
                assert_eq!(
                    full_read(&bytes, &options).0,
                    clean.blocks,
                    "byte {at} ^ {mask:#x}"
                );
            }
        }
    }
    // With the pinned zstd (1.5.7), some flips in the dictionary block's frame decode away.
    assert!(decoded_away > 0);
}

/// Records and their times as a full read gives them.
fn timed(bytes: &[u8]) -> Vec<(Vec<u8>, Option<i64>)> {
    let mut reader = ReaderBuilder::new().from_slice(bytes);
    let mut out = Vec::new();
    while let Some(item) = reader.next_record() {
        if let Ok(record) = item {
            let record = record.to_vec();
            out.push((record, reader.record_time()));
        }
    }
    out
}

/// A time block whose data block was lost describes no block; copied next to the next data
/// block of as many records it would lend it its times. Recovery leaves it out, writes a time
/// index of the time blocks it keeps, and a file without damage comes back byte for byte.
#[test]
fn recovery_never_lends_a_time_to_the_wrong_records() {
    let mut writer = WriterBuilder::new()
        .block_target(64)
        .build(Vec::new())
        .unwrap();
    for i in 0..40i64 {
        let record = format!("record {i:03} {}", "x".repeat(60));
        match i {
            // Record 11 has no time: its data block follows record 10's directly.
            11 => writer.write_record(record.as_bytes()).unwrap(),
            _ => writer.write_record_at(record.as_bytes(), i * 1000).unwrap(),
        }
    }
    let file = writer.finish().unwrap();
    let mut out = Vec::new();
    cobsfile::recover(&file, &ReaderBuilder::new(), &mut out).unwrap();
    assert!(out == file, "an undamaged file recovers to itself");

    let mut reader = ReaderBuilder::new().from_slice(&file);
    let mut data = Vec::new();
    while let Some(block) = reader.next_block() {
        let info = block.unwrap().info().clone();
        if info.block_type == BlockType::Data {
            data.push(info);
        }
    }
    // A byte of record 10's data block flipped: its time block describes nothing.
    let mut damaged = file.clone();
    damaged[(data[10].offset + 5) as usize] ^= 0x20;
    let before = timed(&damaged);
    assert_eq!(before.len(), 39);
    let mut out = Vec::new();
    let recovery = cobsfile::recover(&damaged, &ReaderBuilder::new(), &mut out).unwrap();
    assert_eq!(recovery.report.damaged.len(), 1);
    assert_eq!(timed(&out), before);
    for (record, time) in timed(&out) {
        let i: i64 = std::str::from_utf8(&record[7..10])
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(time, (i != 11).then_some(i * 1000), "record {i}");
    }
    // The output's time index serves window reads.
    let window = cobsfile::Window::new(Some(20_000), Some(24_000));
    let mut reader = ReaderBuilder::new().window(window).from_slice(&out);
    assert!(reader.reads_by_time_index());
    assert_eq!(reader.read_all().0.len(), 5);
}

/// Dictionary blocks past the reader's limit on the dictionaries it keeps are intact but
/// unreadable to it (spec 10): recovery leaves them out and reports them as such, naming the
/// limit, never as damage (spec 9.5); raising the limit keeps every one.
#[test]
fn dictionaries_past_the_limit_are_reported_and_kept_with_a_larger_one() {
    let mut file = cobsfile::WriterBuilder::new()
        .build(Vec::new())
        .unwrap()
        .finish()
        .unwrap();
    file.truncate(19);
    for i in 0..8u32 {
        let mut dictionary = *b"dictionary..";
        dictionary[8..].copy_from_slice(&i.to_le_bytes());
        file.extend(raw_block(4, &dictionary));
    }
    file.extend(raw_block(3, &data_payload(&[b"after the dictionaries"])));
    let limited = ReaderBuilder::new().limits(cobsfile::Limits::default().max_dictionaries(5));
    let mut out = Vec::new();
    let recovery = cobsfile::recover(&file, &limited, &mut out).expect("recover");
    let ranges: Vec<_> = recovery.report.damaged.iter().collect();
    assert_eq!(ranges.len(), 1, "{ranges:?}");
    assert!(!ranges[0].is_damage());
    assert_eq!(ranges[0].cause.name(), "limit");
    assert!(
        ranges[0].cause.to_string().contains("dictionaries"),
        "{}",
        ranges[0].cause
    );
    let (kept, errors) = full_read(&out, &ReaderBuilder::new());
    assert!(errors.is_empty());
    let dictionaries = |blocks: &[Blk]| {
        blocks
            .iter()
            .filter(|b| b.block_type == BlockType::Dictionary)
            .count()
    };
    assert_eq!(dictionaries(&kept), 5);

    let mut out = Vec::new();
    let recovery = cobsfile::recover(&file, &ReaderBuilder::new(), &mut out).expect("recover");
    assert!(recovery.report.damaged.is_empty());
    let (kept, _) = full_read(&out, &ReaderBuilder::new());
    assert_eq!(dictionaries(&kept), 8);
}
