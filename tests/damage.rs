//! Damage: what readers return from damaged files, hostile input, and newer versions.
//!
//! Two oracles decide what a reader must return from a damaged file.
//!
//! **Content oracle (exact, every kind of damage).** A block comes back if and only if its
//! bytes, from its opening to its closing sync byte, appear intact between two consecutive
//! sync bytes of the damaged file (padding, i.e. one extra sync byte, aside). Blocks are found
//! at every sync byte, so an intact block cannot be hidden by damage before it; anything else
//! between two sync bytes fails the frame rules or the CRC (up to a 2^-32 chance per damaged
//! block, which these tests accept). This covers duplicated blocks, which come back twice.
//!
//! **Position oracle (the rule users reason with).** Each block of the clean file spans
//! `[offset, offset + size]`, both sync bytes included; neighbours share a sync byte.
//! - An in-place edit (bit flips, zeroed or overwritten bytes) touches a block if a byte whose
//!   value changed lies in its span. Untouched blocks come back; touched ones do not (exact):
//!   a changed byte inside the span breaks the frame or the CRC, a changed opening sync byte
//!   means no block starts there, a changed closing sync byte means none ends there. So damage
//!   inside one block costs that block; damage to a sync byte at most the two blocks it joins.
//!   A lost block is always reported, even one zeroed whole: one extra sync byte is padding
//!   (spec section 5), a longer run of zeros is damage.
//! - Truncation to `n` bytes touches a block unless its closing sync byte is kept
//!   (`offset + size <= n - 1`) (exact).
//! - Inserting bytes before clean byte `p` separates bytes `p - 1` and `p`: it touches the
//!   one block whose span holds both, i.e. `offset < p <= offset + size`. So inserting right
//!   after a sync byte (`p = offset + 1`) touches the block that sync byte opens, not the one
//!   it closes; inserting right before a sync byte touches the block it closes; inserting
//!   before the first byte or after the last touches nothing. A touched block may still come
//!   back (inserted bytes ending in 0x00 right after a sync byte give it a new opening sync
//!   byte), so the rule is: every untouched block comes back, in order, and what comes back is
//!   a subsequence of what was written; exact when the inserted bytes hold no 0x00.
//! - Deleting `[p, p + k)` touches the blocks whose span meets it (again not exact: deleting a
//!   whole block but its opening sync byte leaves its successor intact behind the previous
//!   block's closing sync byte).
//! - Duplicating `[a, b)` before `p` touches blocks like an insertion at `p`; every untouched
//!   block comes back in order, and every record that comes back was written - but not
//!   necessarily as a subsequence: a block inside the copy comes back twice, and a block can
//!   even be put together across a seam when the bytes there happen to match (the type byte
//!   of every data block is 0x06), which is why the content oracle, matching bytes, is the
//!   exact one.

mod common;

use cobsfile::{BlockType, Cause, Error, Reader, ReaderBuilder, Source};
use common::*;
use proptest::prelude::*;
use proptest::sample::Index;
use std::collections::HashMap;

/// A block of the clean file.
#[derive(Debug, Clone)]
struct Span {
    offset: usize,
    size: usize,
    records: Vec<Vec<u8>>,
}

impl Span {
    fn end(&self) -> usize {
        self.offset + self.size
    }
    /// Whether any of `[from, to]` lies in the span.
    fn meets(&self, from: usize, to: usize) -> bool {
        from <= self.end() && self.offset <= to
    }
}

/// A clean file and its blocks.
#[derive(Clone)]
struct Clean {
    file: Vec<u8>,
    spans: Vec<Span>,
    blocks: Vec<Blk>,
    records: Vec<Vec<u8>>,
}

/// Short enough for a proptest failure report: the file in hex and where its blocks are.
impl std::fmt::Debug for Clean {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hex: String = self.file.iter().map(|b| format!("{b:02x}")).collect();
        let spans: Vec<(usize, usize, usize)> = self
            .spans
            .iter()
            .map(|s| (s.offset, s.size, s.records.len()))
            .collect();
        write!(
            f,
            "Clean {{ file: {hex}, (offset, size, records): {spans:?} }}"
        )
    }
}

impl Clean {
    fn new(ops: &[Op], block_target: usize) -> Self {
        let file = write_file(ops, Options::block_target(block_target));
        let o = read_via(&file, &ReaderBuilder::new(), Via::Slice);
        assert!(o.errors().next().is_none());
        let blocks: Vec<Blk> = o.ok_blocks().cloned().collect();
        let spans = blocks
            .iter()
            .map(|b| Span {
                offset: b.offset as usize,
                size: b.size as usize,
                records: b.records.clone(),
            })
            .collect();
        let records: Vec<Vec<u8>> = ops
            .iter()
            .filter_map(Op::record)
            .map(<[u8]>::to_vec)
            .collect();
        assert_eq!(o.records, records);
        Clean {
            file,
            spans,
            blocks,
            records,
        }
    }

    /// The content oracle: the blocks that must come back from `damaged`, at their offsets in
    /// it.
    fn content_oracle(&self, damaged: &[u8]) -> Vec<Blk> {
        let by_bytes: HashMap<&[u8], &Blk> = self
            .blocks
            .iter()
            .map(|b| {
                (
                    &self.file[b.offset as usize..=(b.offset + b.size) as usize],
                    b,
                )
            })
            .collect();
        let zeros: Vec<usize> = (0..damaged.len()).filter(|&i| damaged[i] == 0).collect();
        zeros
            .windows(2)
            .filter_map(|w| {
                let b = by_bytes.get(&damaged[w[0]..=w[1]])?;
                Some(Blk {
                    offset: w[0] as u64,
                    ..(*b).clone()
                })
            })
            .collect()
    }

    /// Records of the blocks `touched` says were not touched.
    fn untouched_records(&self, touched: impl Fn(&Span) -> bool) -> Vec<Vec<u8>> {
        self.spans
            .iter()
            .filter(|s| !touched(s))
            .flat_map(|s| s.records.clone())
            .collect()
    }
}

fn clean_strategy() -> impl Strategy<Value = Clean> {
    (
        prop::collection::vec(
            prop_oneof![
                8 => (0usize..40, content_strategy(), any::<u64>())
                    .prop_map(|(len, c, seed)| Op::Record(record_bytes(len, c, seed))),
                1 => metadata_strategy().prop_map(Op::Metadata),
            ],
            0..40,
        ),
        prop_oneof![1usize..8, 8usize..64, 64usize..300],
    )
        .prop_map(|(ops, block_target)| Clean::new(&ops, block_target))
}

/// Reads `damaged` with the slice and stream readers (and now and then the mapped one), which
/// must agree and satisfy the invariants of every input, and checks the content oracle.
fn read_damaged(clean: &Clean, damaged: &[u8], seed: u64) -> Observed {
    let o = read_all_ways(
        damaged,
        &ReaderBuilder::new(),
        seed,
        seed.is_multiple_of(16),
    );
    let got: Vec<Blk> = o.ok_blocks().cloned().collect();
    let expected = clean.content_oracle(damaged);
    if got != expected {
        let brief = |b: &[Blk]| -> Vec<(u64, u64, BlockType)> {
            b.iter().map(|b| (b.offset, b.size, b.block_type)).collect()
        };
        panic!(
            "content oracle: got blocks {:?}\nexpected {:?}\nerrors {:?}",
            brief(&got),
            brief(&expected),
            o.errors().collect::<Vec<_>>()
        );
    }
    // Nothing is returned from damaged bytes, so nothing that was never written.
    for r in &o.records {
        assert!(
            clean.records.contains(r),
            "a record that was never written came back"
        );
    }
    o
}

/// Checks an in-place edit (same length) against the position oracle.
fn check_in_place(clean: &Clean, damaged: &[u8], seed: u64) -> Observed {
    assert_eq!(damaged.len(), clean.file.len());
    let changed: Vec<usize> = (0..damaged.len())
        .filter(|&i| damaged[i] != clean.file[i])
        .collect();
    let touched = |s: &Span| changed.iter().any(|&i| s.meets(i, i));
    let o = read_damaged(clean, damaged, seed);
    assert_eq!(
        o.records,
        clean.untouched_records(touched),
        "position oracle"
    );

    // Errors if and only if a block was touched: even a block zeroed whole (its sync bytes
    // included) leaves a run of zeros longer than padding, which is reported (spec section 5).
    // And errors only within runs of touched blocks.
    let silent = !clean.spans.iter().any(&touched);
    assert_eq!(o.errors().next().is_none(), silent);
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for s in clean.spans.iter().filter(|s| touched(s)) {
        match runs.last_mut() {
            Some(run) if run.1 == s.offset => run.1 = s.end(),
            _ => runs.push((s.offset, s.end())),
        }
    }
    for e in o.errors() {
        let (start, end) = e.range().expect("Damaged");
        let (start, end) = (start as usize, end as usize);
        assert!(
            runs.iter().any(|&(from, to)| from <= start
                && (end <= to || (to == damaged.len() - 1 && end == damaged.len()))),
            "error {e:?} outside the touched blocks {runs:?}"
        );
    }
    o
}

/// Checks the position oracle's weak form: every untouched block's records come back, in
/// order, and what comes back is a subsequence of `possible`.
fn check_weak(o: &Observed, untouched: &[Vec<u8>], possible: &[Vec<u8>]) {
    assert!(
        is_subsequence(untouched, &o.records),
        "records of untouched blocks are missing"
    );
    assert!(
        is_subsequence(&o.records, possible),
        "records came back that were not written, or out of order"
    );
}

proptest! {
    #![proptest_config(config(256))]

    /// One flipped bit: exactly the block holding it is lost, or the two blocks sharing a
    /// flipped sync byte; one error reported.
    #[test]
    fn one_bit_flip(clean in clean_strategy(), at: Index, bit in 0u32..8, seed: u64) {
        let mut damaged = clean.file.clone();
        let at = at.index(damaged.len());
        damaged[at] ^= 1 << bit;
        let o = check_in_place(&clean, &damaged, seed);
        let touched = clean.spans.iter().filter(|s| s.meets(at, at)).count();
        let lost = clean.spans.len() - o.ok_blocks().count();
        assert_eq!(lost, touched);
        if clean.file[at] == 0 {
            assert!((1..=2).contains(&touched), "a sync byte joins at most two blocks");
        } else {
            assert_eq!(touched, 1);
        }
        assert_eq!(o.errors().count(), 1, "one damaged region, one error: {:?}", o.blocks);
    }

    /// Several flipped bits.
    #[test]
    fn bit_flips(
        clean in clean_strategy(),
        flips in prop::collection::vec((any::<Index>(), 1u8..=255), 1..6),
        seed: u64,
    ) {
        let mut damaged = clean.file.clone();
        for (at, mask) in &flips {
            let at = at.index(damaged.len());
            damaged[at] ^= mask;
        }
        check_in_place(&clean, &damaged, seed);
    }

    /// A range of bytes set to 0x00 (it may reach into neighbouring blocks).
    #[test]
    fn zeroed_range(clean in clean_strategy(), at: Index, len in 1usize..40, seed: u64) {
        let mut damaged = clean.file.clone();
        let start = at.index(damaged.len());
        let end = (start + len).min(damaged.len());
        damaged[start..end].fill(0);
        check_in_place(&clean, &damaged, seed);
    }

    /// Bytes overwritten with random ones, zeros likely.
    #[test]
    fn overwritten_bytes(
        clean in clean_strategy(),
        at: Index,
        bytes in prop::collection::vec(prop_oneof![Just(0u8), any::<u8>()], 1..12),
        seed: u64,
    ) {
        let mut damaged = clean.file.clone();
        let start = at.index(damaged.len());
        for (i, b) in bytes.iter().enumerate() {
            if let Some(d) = damaged.get_mut(start + i) {
                *d = *b;
            }
        }
        check_in_place(&clean, &damaged, seed);
    }

    /// Truncation at a random length (every length of some files: `truncation_everywhere`).
    #[test]
    fn truncation(clean in clean_strategy(), at: Index, seed: u64) {
        let n = at.index(clean.file.len() + 1);
        check_truncation(&clean, n, seed);
    }

    /// Bytes inserted anywhere, 0x00 among them often.
    #[test]
    fn inserted_bytes(
        clean in clean_strategy(),
        at: Index,
        bytes in prop::collection::vec(prop_oneof![Just(0u8), any::<u8>()], 1..10),
        seed: u64,
    ) {
        let p = at.index(clean.file.len() + 1);
        let mut damaged = clean.file[..p].to_vec();
        damaged.extend_from_slice(&bytes);
        damaged.extend_from_slice(&clean.file[p..]);
        let o = read_damaged(&clean, &damaged, seed);
        let untouched = clean.untouched_records(|s| s.offset < p && p <= s.end());
        check_weak(&o, &untouched, &clean.records);
        if !bytes.contains(&0) {
            // Without a new sync byte, the touched block is lost.
            assert_eq!(o.records, untouched);
        }
    }

    /// A range of bytes deleted.
    #[test]
    fn deleted_bytes(clean in clean_strategy(), at: Index, len in 1usize..12, seed: u64) {
        let p = at.index(clean.file.len());
        let end = (p + len).min(clean.file.len());
        let mut damaged = clean.file[..p].to_vec();
        damaged.extend_from_slice(&clean.file[end..]);
        let o = read_damaged(&clean, &damaged, seed);
        let untouched = clean.untouched_records(|s| s.meets(p, end - 1));
        check_weak(&o, &untouched, &clean.records);
    }

    /// A range of the file copied to another place (as a bad seek or replay would).
    #[test]
    fn duplicated_range(
        clean in clean_strategy(),
        from: Index,
        len in 1usize..200,
        to: Index,
        seed: u64,
    ) {
        let n = clean.file.len();
        let a = from.index(n);
        let b = (a + len).min(n);
        let p = to.index(n + 1);
        let mut damaged = clean.file[..p].to_vec();
        damaged.extend_from_slice(&clean.file[a..b]);
        damaged.extend_from_slice(&clean.file[p..]);
        let o = read_damaged(&clean, &damaged, seed);
        let untouched = clean.untouched_records(|s| s.offset < p && p <= s.end());
        // Duplicated blocks come back twice, so what comes back need not be a subsequence of
        // what was written; `read_damaged` checked that each record was written, and the
        // content oracle says exactly which blocks come back.
        assert!(
            is_subsequence(&untouched, &o.records),
            "records of untouched blocks are missing"
        );
    }

    /// Several kinds of damage at once, far apart or not.
    #[test]
    fn mixed_damage(clean in clean_strategy(), edits in edits_strategy(), seed: u64) {
        let damaged = apply_edits(&clean.file, &edits);
        let o = read_damaged(&clean, &damaged, seed);
        assert!(is_subsequence(&o.records, &clean.records));
    }

    /// Owned records (`records()`, `for record in &mut reader`, `for record in reader`) are
    /// the items of `next_record`, damage included and in the same places, from wherever
    /// iteration starts; and `read_all` splits the same items.
    #[test]
    fn owned_iteration_is_next_record(
        clean in clean_strategy(),
        edits in prop::collection::vec(edit_strategy(), 0..5),
        threads in 0usize..3,
        lent_first: Index,
        seed: u64,
    ) {
        let damaged = apply_edits(&clean.file, &edits);
        // Threads read shared bytes (a borrowed slice is read on one thread), here in ranges
        // of at least 64 bytes: many cuts, through blocks and damage.
        let shared: std::sync::Arc<[u8]> = damaged.as_slice().into();
        let options = ReaderBuilder::new().threads(threads).min_split(64);
        let expected = lent(&mut ReaderBuilder::new().from_slice(&damaged), usize::MAX);

        let (records, errors) = options.from_shared(&shared).read_all();
        let oks: Vec<Vec<u8>> = expected.iter().filter_map(|i| i.clone().ok()).collect();
        let errs: Vec<Fault> = expected.iter().filter_map(|i| i.clone().err()).collect();
        prop_assert_eq!(records, oks);
        prop_assert_eq!(errors.into_iter().map(Fault::from).collect::<Vec<_>>(), errs);

        let mut reader = options.from_shared(&shared);
        prop_assert_eq!(&owned(reader.records()), &expected);
        prop_assert!(reader.next_record().is_none());

        let mut reader = options.from_shared(&shared);
        let mut by_ref = Vec::new();
        for item in &mut reader {
            by_ref.push(item.map_err(Fault::from));
        }
        prop_assert_eq!(&by_ref, &expected);

        let mut by_value = Vec::new();
        for item in options.from_shared(&shared) {
            by_value.push(item.map_err(Fault::from));
        }
        prop_assert_eq!(&by_value, &expected);

        let stream = options.from_read(ChunkedReader::new(&damaged, seed, 64));
        prop_assert_eq!(&owned(stream.into_iter()), &expected);

        // Lending some records first, mid-block or not, then iterating the rest.
        let split = lent_first.index(expected.len() + 1);
        let mut reader = options.from_shared(&shared);
        let mut mixed = lent(&mut reader, split);
        mixed.extend(owned(reader.records()));
        prop_assert_eq!(&mixed, &expected);
    }
}

/// One edit of a file: a flipped byte, zeroed bytes, inserted bytes or deleted bytes.
type Edit = (u8, Index, Vec<u8>);

fn edit_strategy() -> impl Strategy<Value = Edit> {
    (
        0u8..4,
        any::<Index>(),
        prop::collection::vec(any::<u8>(), 1..6),
    )
}

fn edits_strategy() -> impl Strategy<Value = Vec<Edit>> {
    prop::collection::vec(edit_strategy(), 1..5)
}

/// `file` with `edits` made one after the other.
fn apply_edits(file: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut damaged = file.to_vec();
    for (kind, at, bytes) in edits {
        if damaged.is_empty() {
            break;
        }
        let p = at.index(damaged.len());
        match kind {
            0 => damaged[p] ^= bytes[0] | 1,
            1 => {
                let end = (p + bytes.len()).min(damaged.len());
                damaged[p..end].fill(0);
            }
            2 => {
                damaged.splice(p..p, bytes.iter().copied());
            }
            _ => {
                let end = (p + bytes.len()).min(damaged.len());
                damaged.drain(p..end);
            }
        }
    }
    damaged
}

/// Up to `n` items of `next_record`, copied.
fn lent<S: Source>(reader: &mut Reader<S>, n: usize) -> Vec<Result<Vec<u8>, Fault>> {
    let mut items = Vec::new();
    while items.len() < n {
        let Some(item) = reader.next_record() else {
            break;
        };
        items.push(item.map(<[u8]>::to_vec).map_err(Fault::from));
    }
    items
}

/// The items of an owned-record iterator.
fn owned(records: impl Iterator<Item = cobsfile::Result<Vec<u8>>>) -> Vec<Result<Vec<u8>, Fault>> {
    records.map(|item| item.map_err(Fault::from)).collect()
}

/// Truncation to `n` bytes: exactly the blocks whose closing sync byte is kept come back, and
/// one error names the cut block unless the cut falls right after a sync byte.
fn check_truncation(clean: &Clean, n: usize, seed: u64) {
    let damaged = &clean.file[..n];
    let o = read_damaged(clean, damaged, seed);
    assert_eq!(
        o.records,
        clean.untouched_records(|s| s.end() > n.saturating_sub(1) || n == 0)
    );
    let errors: Vec<&Fault> = o.errors().collect();
    if n == 0 || damaged[n - 1] == 0 {
        assert!(errors.is_empty(), "cut at a block boundary: {errors:?}");
    } else {
        let cut = clean
            .spans
            .iter()
            .find(|s| s.offset < n && n <= s.end())
            .unwrap();
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].range(), Some((cut.offset as u64 + 1, n as u64)));
    }
}

#[test]
fn truncation_everywhere() {
    let mut ops = vec![Op::Metadata(vec![("k".into(), b"v\x00".to_vec())])];
    for i in 0..30 {
        ops.push(Op::Record(record_bytes(
            i % 7 * 3,
            Content::ZeroRich,
            i as u64,
        )));
        if i % 11 == 5 {
            ops.push(Op::Metadata(vec![(format!("m{i}"), vec![0; i])]));
        }
    }
    ops.push(Op::Record(record_bytes(300, Content::ZeroFree, 99)));
    for block_target in [1, 10, 40] {
        let clean = Clean::new(&ops, block_target);
        for n in 0..=clean.file.len() {
            check_truncation(&clean, n, n as u64 * 7919);
        }
    }
}

#[test]
fn garbage_before_and_after() {
    let ops: Vec<Op> = (0..5).map(|i| Op::Record(vec![i; i as usize])).collect();
    let clean = Clean::new(&ops, 3);
    for garbage in [
        &b"garbage\n"[..],
        b"\x00",
        b"\x00\x00\x00",
        b"x\x00y",
        b"\x01\x02\x03\x00",
    ] {
        for damaged in [
            [garbage, &clean.file].concat(),
            [&clean.file, garbage].concat(),
            [&clean.file, garbage, &clean.file].concat(),
        ] {
            let o = read_damaged(&clean, &damaged, garbage.len() as u64);
            let copies = damaged.len() / clean.file.len();
            let expected: Vec<Vec<u8>> = (0..copies).flat_map(|_| clean.records.clone()).collect();
            assert_eq!(o.records, expected, "{garbage:?}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Hostile input.

/// Bounds the streaming reader's buffer: the largest frame the limit admits (type and length
/// varints, the encoded body, sync bytes) plus one read of 256 KiB.
fn stream_bound(max_body_size: usize) -> usize {
    let max_length = max_body_size + max_body_size / 254 + 2;
    max_length + 2 * varint_max() + 2 + 256 * 1024
}

fn varint_max() -> usize {
    cobsfile::varint::MAX_LEN
}

/// Reads `bytes` with a stream reader limited to `max` bytes per block, checking its buffer
/// after every call, and returns what it yielded.
fn stream_with_bound(
    bytes: &[u8],
    max: usize,
    seed: u64,
    max_chunk: usize,
) -> Vec<Result<Blk, Fault>> {
    let mut reader = ReaderBuilder::new()
        .max_body_size(max)
        .from_read(ChunkedReader::new(bytes, seed, max_chunk));
    let mut out = Vec::new();
    while let Some(item) = reader.next_block() {
        out.push(item.map(|b| Blk::of(&b)).map_err(Fault::from));
        let capacity = reader.source().capacity();
        assert!(
            capacity <= stream_bound(max),
            "stream buffer of {capacity} bytes"
        );
    }
    out
}

fn garbage_strategy() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..3000),
        prop::collection::vec(prop_oneof![4 => Just(0u8), 1 => any::<u8>()], 0..3000),
        prop::collection::vec(
            prop_oneof![Just(0u8), Just(0x80), Just(0xff), Just(0x06), Just(0x01)],
            0..3000
        ),
    ]
}

proptest! {
    #![proptest_config(config(256))]

    /// Random bytes, with or without a valid file in front and behind: no panic, no hang,
    /// the invariants of every input, and the valid parts come back.
    #[test]
    fn random_bytes(
        garbage in garbage_strategy(),
        before in any::<bool>(),
        after in any::<bool>(),
        max in prop_oneof![Just(cobsfile::DEFAULT_MAX_BODY_SIZE), 5usize..300],
        seed: u64,
    ) {
        let ops: Vec<Op> = (0..3).map(|i| Op::Record(vec![i + 1; 3])).collect();
        let clean = Clean::new(&ops, 1);
        let mut bytes = Vec::new();
        if before {
            bytes.extend_from_slice(&clean.file);
        }
        bytes.extend_from_slice(&garbage);
        if after {
            bytes.extend_from_slice(&clean.file);
        }
        let o = read_all_ways(&bytes, &ReaderBuilder::new().max_body_size(max), seed, seed % 16 == 0);
        if max >= 100 {
            let got: Vec<Blk> = o.ok_blocks().cloned().collect();
            prop_assert_eq!(got, clean.content_oracle(&bytes));
        }
        stream_with_bound(&bytes, max, seed, 64);
    }
}

/// Frames with hostile header fields, each between valid blocks: reported as damage, and the
/// block after it comes back.
#[test]
fn hostile_header_fields() {
    let good = raw_block(3, &data_payload(&[b"good"]));
    let mut cases: Vec<(&str, Vec<u8>)> = Vec::new();
    let varint = |n: i64| {
        let mut v = Vec::new();
        cobsfile::varint::write(n, &mut v);
        v
    };
    cases.push((
        "length 2^60",
        [varint(3), varint(1 << 60), vec![1; 20]].concat(),
    ));
    cases.push((
        "length i64::MAX",
        [varint(3), varint(i64::MAX), vec![1; 20]].concat(),
    ));
    cases.push(("length -1", [varint(3), varint(-1), vec![1; 20]].concat()));
    cases.push((
        "length i64::MIN",
        [varint(3), varint(i64::MIN), vec![1; 20]].concat(),
    ));
    cases.push((
        "length 1 << 26",
        [varint(3), varint(1 << 26), vec![1; 20]].concat(),
    ));
    cases.push((
        "11-byte type",
        [vec![0x80; 10], vec![0x01], varint(5), vec![1; 4]].concat(),
    ));
    cases.push((
        "11-byte length",
        [varint(3), vec![0x80; 10], vec![0x01], vec![1; 4]].concat(),
    ));
    cases.push((
        "10-byte length over 64 bits",
        [varint(3), vec![0xff; 9], vec![0x02], vec![1; 4]].concat(),
    ));
    cases.push(("unterminated type", vec![0xff; 30]));
    cases.push(("length 1", [varint(3), varint(1)].concat()));
    cases.push(("length 2", [varint(3), varint(2), vec![1]].concat()));
    cases.push(("length off by one", {
        let mut b = raw_block(3, &data_payload(&[b"x"]));
        b[1] += 2;
        b
    }));
    cases.push(("codec 1", {
        let mut body = vec![2u8]; // zig-zag 1
        body.extend(data_payload(&[b"x"]));
        let mut crc = crc32fast::Hasher::new();
        crc.update(&[6]);
        crc.update(&body);
        body.extend(crc.finalize().to_le_bytes());
        let mut enc = Vec::new();
        cobsfile::cobs::encode(&body, &mut enc);
        [varint(3), varint(enc.len() as i64 + 1), enc, vec![0]].concat()[..].to_vec()
    }));
    cases.push((
        "count too large",
        raw_block(3, &[varint(1000), varint(1), vec![7]].concat()),
    ));
    cases.push(("negative count", raw_block(3, &[varint(-1)].concat())));
    cases.push((
        "record past the end",
        raw_block(3, &[varint(1), varint(50), vec![7]].concat()),
    ));
    cases.push((
        "trailing bytes",
        raw_block(3, &[data_payload(&[b"x"]), vec![9]].concat()),
    ));
    cases.push((
        "duplicate metadata key",
        raw_block(
            2,
            &[
                varint(2),
                varint(1),
                b"k".to_vec(),
                varint(0),
                varint(1),
                b"k".to_vec(),
                varint(0),
            ]
            .concat(),
        ),
    ));
    cases.push((
        "non-UTF-8 key",
        raw_block(2, &[varint(1), varint(1), vec![0xff], varint(0)].concat()),
    ));
    cases.push(("header version 0", raw_block(1, &header_payload(0))));
    cases.push((
        "header version 1 with trailing bytes",
        raw_block(1, &[header_payload(1), vec![1]].concat()),
    ));
    cases.push(("header without magic", raw_block(1, b"COBSFILX\x02")));
    cases.push(("body too short", raw_block(3, &[])[..].to_vec()));

    for (name, bad) in cases {
        let mut file = vec![0];
        file.extend(raw_block(1, &header_payload(1)));
        file.extend(&good);
        let bad_at = file.len();
        file.extend(&bad);
        if *file.last().unwrap() != 0 {
            file.push(0);
        }
        file.extend(&good);
        for max in [cobsfile::DEFAULT_MAX_BODY_SIZE, 4096] {
            let o = read_all_ways(&file, &ReaderBuilder::new().max_body_size(max), 11, true);
            assert_eq!(o.records, [b"good", b"good"], "{name}");
            let errors: Vec<&Fault> = o.errors().collect();
            assert_eq!(errors.len(), 1, "{name}: {errors:?}");
            let (start, end) = errors[0].range().unwrap();
            assert_eq!(start as usize, bad_at, "{name}");
            assert_eq!(end as usize, file.len() - good.len() - 1, "{name}");
            stream_with_bound(&file, max, 5, 3);
        }
    }
}

/// A megabyte of garbage, and blocks far larger than the limit, through a stream reader limited
/// to 4 KiB: reported as damage without buffering them, and later blocks come back.
#[test]
fn stream_memory_stays_bounded() {
    const MAX: usize = 4096;
    let mut rng = common::Rng::new(42);
    let mut garbage = vec![0; 1 << 20];
    rng.fill(&mut garbage);
    let zero_free = record_bytes(1 << 20, Content::ZeroFree, 1);

    // A file with a 2 MiB record, written with the default limit, then small records.
    let mut writer = cobsfile::WriterBuilder::new().build(Vec::new()).unwrap();
    writer.write_record(b"first").unwrap();
    writer
        .write_record(&record_bytes(2 << 20, Content::Random, 3))
        .unwrap();
    writer.flush().unwrap();
    writer.write_record(b"last").unwrap();
    let big = writer.finish().unwrap();

    // A header-looking frame claiming the largest admissible length, over zero-free bytes.
    let mut claims = vec![0, 6];
    cobsfile::varint::write((MAX + MAX / 254 + 2) as i64, &mut claims);
    claims.extend_from_slice(&zero_free);
    claims.push(0);

    let tail = write_file(&[Op::Record(b"tail".to_vec())], Options::block_target(10));
    for (name, input) in [
        ("random", [&garbage[..], &tail].concat()),
        ("zero-free", [&zero_free[..], &tail].concat()),
        ("big block", [&big[..], &tail].concat()),
        ("long claim", [&claims[..], &tail].concat()),
    ] {
        for max_chunk in [1 << 16, 700] {
            // The skipping scan of metadata() holds a skipped block whole: bounded alike.
            let mut reader = ReaderBuilder::new()
                .max_body_size(MAX)
                .from_read(ChunkedReader::new(&input, 9, max_chunk));
            let metadata: Vec<_> = reader.metadata().collect();
            assert!(metadata.iter().any(Result::is_err), "{name}");
            assert!(reader.source().capacity() <= stream_bound(MAX), "{name}");

            let items = stream_with_bound(&input, MAX, 9, max_chunk);
            let records: Vec<Vec<u8>> = items
                .iter()
                .filter_map(|i| i.as_ref().ok())
                .flat_map(|b| b.records.clone())
                .collect();
            assert_eq!(
                records.last().map(Vec::as_slice),
                Some(&b"tail"[..]),
                "{name}"
            );
            assert!(items.iter().any(Result::is_err), "{name}");
            if name == "big block" {
                assert_eq!(records, [&b"first"[..], b"last", b"tail"]);
                let too_large = items.iter().any(|i| {
                    matches!(
                        i,
                        Err(Fault::Damaged {
                            cause: Cause::TooLarge { .. },
                            ..
                        })
                    )
                });
                assert!(too_large, "the big block is refused by its length");
            }
            // The slice reader agrees.
            let slice = read_via(&input, &ReaderBuilder::new().max_body_size(MAX), Via::Slice);
            assert_eq!(
                slice.blocks,
                items
                    .iter()
                    .map(|i| i.clone().map(|mut b| {
                        b.entries = slice_entries(&slice, b.offset);
                        b
                    }))
                    .collect::<Vec<_>>(),
                "{name}"
            );
        }
    }
}

fn slice_entries(o: &Observed, offset: u64) -> Vec<(String, Vec<u8>)> {
    o.ok_blocks()
        .find(|b| b.offset == offset)
        .map(|b| b.entries.clone())
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// Versions.

/// A header declaring version 2, built by hand: `UnsupportedVersion`, and the reader stops.
#[test]
fn newer_version_stops_the_reader() {
    let v2 = raw_block(1, &header_payload(2));
    let v2_longer = raw_block(1, &[header_payload(2), b"new fields".to_vec()].concat());
    let records = [
        raw_block(3, &data_payload(&[b"a"])),
        raw_block(3, &data_payload(&[b"b"])),
    ]
    .concat();
    let v1 = [vec![0], raw_block(1, &header_payload(1))].concat();

    for header in [&v2, &v2_longer] {
        // At the start of a file.
        let file = [&[0][..], header, &records].concat();
        let o = read_all_ways(&file, &ReaderBuilder::new(), 1, true);
        assert_eq!(
            o.blocks,
            [Err(Fault::Version {
                offset: 0,
                version: 2
            })]
        );
        assert!(o.records.is_empty());
        assert_eq!(
            o.record_errors,
            [Fault::Version {
                offset: 0,
                version: 2
            }]
        );
        assert_eq!(
            o.metadata,
            [Err(Fault::Version {
                offset: 0,
                version: 2
            })]
        );

        // After version 1 blocks (a concatenated file): what comes before is read.
        let file = [&v1[..], &records, header, &records].concat();
        let at = (v1.len() + records.len() - 1) as u64;
        let o = read_all_ways(&file, &ReaderBuilder::new(), 2, true);
        assert_eq!(o.records, [b"a", b"b"]);
        assert_eq!(
            o.record_errors,
            [Fault::Version {
                offset: at,
                version: 2
            }]
        );

        // After damage: the damage is reported, then the version.
        let mut file = [&v1[..], &records, header, &records].concat();
        file[v1.len() + 2] ^= 0x10;
        let o = read_all_ways(&file, &ReaderBuilder::new(), 3, true);
        assert_eq!(o.records, [b"b"]);
        let errors: Vec<&Fault> = o.errors().collect();
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(matches!(errors[0], Fault::Damaged { .. }));
        assert_eq!(
            *errors[1],
            Fault::Version {
                offset: at,
                version: 2
            }
        );
    }

    // The error names the versions.
    let file = [&[0][..], &v2].concat();
    let mut reader = ReaderBuilder::new().from_slice(&file);
    match reader.next_record() {
        Some(Err(Error::UnsupportedVersion {
            offset: 0,
            version: 2,
            supported: 1,
        })) => {}
        other => panic!("{other:?}"),
    }
    assert!(reader.next_record().is_none());
    assert!(reader.next_block().is_none());
}

/// Every single-bit flip of a few small files, exhaustively. One file holds records that look
/// like a frame header behind a byte that a flip turns into 0x00: the bytes after the new sync
/// byte then frame correctly up to the block's end and fail only their CRC. Still one damaged
/// region, so still one error.
#[test]
fn every_single_bit_flip() {
    let mut files = Vec::new();
    let mut ops = vec![Op::Metadata(vec![("key".into(), b"\x00value".to_vec())])];
    for i in 0..12u8 {
        ops.push(Op::Record(record_bytes(
            usize::from(i) * 2,
            Content::ZeroRich,
            u64::from(i),
        )));
    }
    files.push(Clean::new(&ops, 8));
    // Records 01 06 L x..x: flipping the 01 gives 00, type 3 and length L over the rest.
    let mut ops = Vec::new();
    for m in 0..6 {
        for l in 2..30u8 {
            ops.push(Op::Record([&[1, 6, l * 2][..], &vec![b'x'; m]].concat()));
        }
    }
    files.push(Clean::new(&ops, 1));
    for (f, clean) in files.iter().enumerate() {
        let mut two_errors_possible = 0;
        for at in 0..clean.file.len() {
            for bit in 0..8 {
                if f == 1 && (clean.file[at] != 1 || bit != 0) {
                    continue; // the second file is for those flips only
                }
                let mut damaged = clean.file.clone();
                damaged[at] ^= 1 << bit;
                let o = check_in_place(clean, &damaged, (at * 8 + bit) as u64);
                let errors: Vec<&Fault> = o.errors().collect();
                assert_eq!(errors.len(), 1, "file {f}, flip {at}/{bit}: {errors:?}");
                if clean.file[at] == 1 && bit == 0 {
                    two_errors_possible += 1;
                }
            }
        }
        assert!(f == 0 || two_errors_possible > 100);
    }
}

/// "Not a cobsfile" (spec 9.5) is decided once, in the library: a report and a reader's
/// options give the same verdict on every input, and every front end only words it.
#[test]
fn not_a_cobsfile_is_decided_once() {
    let mut writer = cobsfile::WriterBuilder::new()
        .block_target(64)
        .build(Vec::new())
        .unwrap();
    for i in 0..40 {
        writer
            .write_record(format!("record {i} with some text").as_bytes())
            .unwrap();
    }
    let file = writer.finish().unwrap();
    let text = b"plain text, not a cobsfile\n".to_vec();
    let mut damaged = file.clone();
    for byte in damaged.iter_mut().skip(1) {
        if *byte != 0 {
            *byte ^= 0x55;
        }
    }
    let small = ReaderBuilder::new().max_body_size(1);
    let default = ReaderBuilder::new();
    let cases: Vec<(&str, Vec<u8>, &ReaderBuilder, Option<bool>)> = vec![
        // (input, bytes, options, Some(over a limit?) when not a cobsfile)
        ("nothing", Vec::new(), &default, None),
        ("one sync byte", vec![0], &default, None),
        ("two sync bytes", vec![0, 0], &default, None),
        ("a file", file.clone(), &default, None),
        ("text", text, &default, Some(false)),
        ("every block damaged", damaged, &default, Some(false)),
        ("blocks over the limit", file, &small, Some(true)),
    ];
    for (what, bytes, options, expected) in cases {
        let verdict = options.not_a_cobsfile(&bytes);
        let report = cobsfile::verify(&mut options.from_slice(&bytes)).unwrap();
        assert_eq!(report.not_a_cobsfile(), verdict, "{what}");
        assert_eq!(
            verdict.as_ref().map(|v| v.over_limit.is_some()),
            expected,
            "{what}: {verdict:?}"
        );
        if let Some(verdict) = verdict {
            assert_eq!(verdict.len, bytes.len() as u64, "{what}");
        }
    }
}
