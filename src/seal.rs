//! Seals: signed statements that a run of blocks is exactly what a writer wrote (spec 8.10).
//!
//! This module is the sans-I/O core of sealing: what a seal says, its bytes, the hash that
//! stands for each block it covers, a [`Sealer`] that a writer feeds the blocks it writes and
//! asks for seals, and the [`verify`] of a file's blocks against its seals.
//!
//! A writer that seals is a **chain**: a random 16-byte chain id, and seals numbered from 0,
//! each naming the hash of the one before. A seal lists, in order, one **leaf** per block the
//! chain wrote since its previous seal: the BLAKE3 hash (in key-derivation mode, for this use
//! alone) of the block's bytes between its two sync bytes, and the block's size. The seal
//! binds each leaf to its place: the chain, the seal's number and the place of its first
//! block. A leaf per block keeps damage local (a damaged block is missing, and every other
//! block still matches its leaf); the order of the leaves makes a block moved, removed,
//! duplicated or inserted show. Each seal also carries the previous seal's leaves, so that a
//! damaged seal costs no block its proof while the next seal stands. Every seal names the
//! file's id (random, chosen when the file was made, and kept in its metadata), so that seals
//! spliced in from another file, even one sealed with the same key, do not pass for this
//! file's. The seal's bytes up to its signature are signed with Ed25519.

use crate::block::BlockType;
use crate::key::{KeyId, SealingKey, VerifyingKey};
use crate::varint;

/// A 32-byte BLAKE3 hash.
pub type Hash = [u8; 32];

/// The version of a seal's payload this crate writes and reads.
pub const SEAL_VERSION: i64 = 1;

/// The metadata key whose value is the file's id, 32 lowercase hexadecimal digits: written by
/// a writer that seals in its first metadata block (spec 8.10).
pub const FILE_ID_KEY: &str = "cobsfile.file_id";

/// A writer seals when the blocks it wrote since its last seal hold this many bytes, by
/// default (see [`WriterBuilder::seal_every`](crate::WriterBuilder::seal_every)).
pub const DEFAULT_SEAL_BYTES: u64 = 1 << 20;

/// Whether blocks of type `type_id` are outside every chain (spec 8.10): header, log, seal and
/// end blocks, which hold nothing but what their type says (a seal vouches for itself), are
/// never sealed; a verifier takes them for structure.
pub fn outside_chains(type_id: i64) -> bool {
    use crate::block::types;
    matches!(
        type_id,
        types::HEADER | types::LOG | types::SEAL | types::END
    )
}

/// A file id (or a chain id) as its metadata value, and reports, write it: 32 lowercase
/// hexadecimal digits.
pub fn file_id_text(id: &[u8; 16]) -> String {
    crate::key::hex(id)
}

/// The file id a metadata value holds, if it is one (32 lowercase hexadecimal digits).
pub fn parse_file_id(value: &[u8]) -> Option<[u8; 16]> {
    crate::key::unhex(value)
}

/// A seal's hash as reports write it: 64 lowercase hexadecimal digits.
pub fn hash_text(hash: &Hash) -> String {
    crate::key::hex(hash)
}

/// The seal hash `text` spells (64 hexadecimal digits, either case, as a user copied it), if
/// it is one.
pub fn parse_hash(text: &str) -> Option<Hash> {
    crate::key::unhex(text.to_ascii_lowercase().as_bytes())
}

/// Nanoseconds since the Unix epoch by the system clock (0 before it).
fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// The context string of the hash of leaves (BLAKE3's key derivation mode).
const LEAF_CONTEXT: &str = "cobsfile 2026-12-06 seal leaf";

/// What the signature covers before the payload's bytes, so that a signature made for
/// something else is never one of a seal.
const SIGNED_PREFIX: &[u8] = b"cobsfile seal\0";

/// The bytes an entry of a seal takes at least: a hash and a one-byte size.
const MIN_ENTRY: usize = 33;

/// The hash that stands for a block in a seal: of `frame`, the block's bytes between its two
/// sync bytes (its type field, length field and COBS-encoded body).
pub fn leaf(frame: &[u8]) -> Hash {
    let mut hasher = blake3::Hasher::new_derive_key(LEAF_CONTEXT);
    hasher.update(frame);
    *hasher.finalize().as_bytes()
}

/// What a seal says of one block: its leaf and its size (spec 6: the bytes after its opening
/// sync byte up to and including its closing one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Leaf {
    /// [`leaf`] of the block's bytes between its sync bytes.
    pub hash: Hash,
    /// The block's size.
    pub size: u64,
}

impl Leaf {
    /// The leaf of a block written whole: `block` runs from its type field to its closing
    /// sync byte (its size).
    pub fn of_block(block: &[u8]) -> Leaf {
        Leaf {
            hash: leaf(block.strip_suffix(&[0]).unwrap_or(block)),
            size: block.len() as u64,
        }
    }
}

/// A seal: a chain's statement, signed, of the blocks it wrote since its previous seal.
#[derive(Clone, PartialEq, Eq)]
pub struct Seal {
    /// The id of the file the chain writes.
    pub file_id: [u8; 16],
    /// The chain's id.
    pub chain: [u8; 16],
    /// The seal's number in its chain, from 0.
    pub sequence: u64,
    /// The hash ([`Seal::hash`]) of the chain's previous seal; zeros for its first.
    pub previous: Hash,
    /// The place in the chain of the first block this seal covers (the blocks its chain
    /// wrote before it).
    pub first: u64,
    /// The leaves of the blocks this seal covers, in order.
    pub leaves: Vec<Leaf>,
    /// The leaves of the blocks the previous seal covered (empty for the first).
    pub carried: Vec<Leaf>,
    /// When the seal was made, in nanoseconds since the Unix epoch.
    pub time: i64,
    /// The id of the key that signed it.
    pub key_id: KeyId,
    /// The Ed25519 signature of `cobsfile seal\0` and the payload's bytes before it.
    pub signature: [u8; 64],
}

impl std::fmt::Debug for Seal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Seal")
            .field("sequence", &self.sequence)
            .field("first", &self.first)
            .field("leaves", &self.leaves.len())
            .field("carried", &self.carried.len())
            .field("time", &self.time)
            .field("key_id", &self.key_id)
            .finish_non_exhaustive()
    }
}

/// Why a seal's payload could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed seal: {0}")]
pub struct MalformedSeal(pub &'static str);

impl Seal {
    /// The payload's bytes up to the signature: what is signed, after `SIGNED_PREFIX`.
    fn unsigned_bytes(&self) -> Vec<u8> {
        let mut out =
            Vec::with_capacity(160 + (MIN_ENTRY + 3) * (self.leaves.len() + self.carried.len()));
        varint::write(SEAL_VERSION, &mut out);
        out.extend_from_slice(&self.file_id);
        out.extend_from_slice(&self.chain);
        varint::write(self.sequence as i64, &mut out);
        out.extend_from_slice(&self.previous);
        varint::write(self.first as i64, &mut out);
        for list in [&self.leaves, &self.carried] {
            varint::write(list.len() as i64, &mut out);
            for leaf in list {
                out.extend_from_slice(&leaf.hash);
                varint::write(leaf.size as i64, &mut out);
            }
        }
        varint::write(self.time, &mut out);
        out.extend_from_slice(&self.key_id.0);
        out
    }

    /// What the signature signs: `SIGNED_PREFIX`, then the payload up to the signature.
    pub fn signed_message(&self) -> Vec<u8> {
        [SIGNED_PREFIX, &self.unsigned_bytes()].concat()
    }

    /// The seal block's payload.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = self.unsigned_bytes();
        out.extend_from_slice(&self.signature);
        out
    }

    /// The seal in a seal block's payload. The lists are read only as far as the payload
    /// holds them: a count larger than the bytes left is refused before anything is
    /// allocated for it.
    pub fn from_bytes(payload: &[u8]) -> Result<Seal, MalformedSeal> {
        let mut r = Bytes(payload);
        let version = r.varint()?;
        if version != SEAL_VERSION {
            return Err(MalformedSeal("an unknown version"));
        }
        let file_id = r.array::<16>()?;
        let chain = r.array::<16>()?;
        let sequence = r.count()?;
        let previous = r.array::<32>()?;
        let first = r.count()?;
        let leaves = r.leaves()?;
        let carried = r.leaves()?;
        let time = r.varint()?;
        let key_id = KeyId(r.array::<8>()?);
        let signature = r.array::<64>()?;
        if !r.0.is_empty() {
            return Err(MalformedSeal("bytes after the signature"));
        }
        if sequence == 0 && (previous != [0; 32] || !carried.is_empty() || first != 0) {
            return Err(MalformedSeal(
                "a chain's first seal that names earlier ones",
            ));
        }
        Ok(Seal {
            file_id,
            chain,
            sequence,
            previous,
            first,
            leaves,
            carried,
            time,
            key_id,
            signature,
        })
    }

    /// The seal's hash: BLAKE3 of its payload, signature included. The next seal of the chain
    /// names it; a user keeps it to prove later that a file only grew since
    /// (`verify --extends`).
    pub fn hash(&self) -> Hash {
        *blake3::hash(&self.to_bytes()).as_bytes()
    }

    /// Whether `key` signed this seal (and is the key it names).
    pub fn signed_by(&self, key: &VerifyingKey) -> bool {
        if key.id() != self.key_id {
            return false;
        }
        key.verifies(&self.signed_message(), &self.signature)
    }
}

/// Reads a payload front to back.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn varint(&mut self) -> Result<i64, MalformedSeal> {
        let (value, len) = varint::read(self.0).map_err(|_| MalformedSeal("an invalid varint"))?;
        self.0 = &self.0[len..];
        Ok(value)
    }

    fn count(&mut self) -> Result<u64, MalformedSeal> {
        u64::try_from(self.varint()?).map_err(|_| MalformedSeal("a negative count"))
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], MalformedSeal> {
        if self.0.len() < N {
            return Err(MalformedSeal("cut short"));
        }
        let (head, rest) = self.0.split_at(N);
        self.0 = rest;
        Ok(head.try_into().expect("N bytes"))
    }

    fn leaves(&mut self) -> Result<Vec<Leaf>, MalformedSeal> {
        let n = self.count()?;
        if n > (self.0.len() / MIN_ENTRY) as u64 {
            return Err(MalformedSeal("more leaves than bytes"));
        }
        (0..n)
            .map(|_| {
                let hash = self.array::<32>()?;
                let size = self.count()?;
                if size == 0 {
                    return Err(MalformedSeal("a block of size 0"));
                }
                Ok(Leaf { hash, size })
            })
            .collect()
    }
}

/// A chain shared by a writer and the log directory it appends to, which starts a new chain
/// for each segment it rolls to.
pub(crate) type SharedSealer = std::sync::Arc<std::sync::Mutex<Sealer>>;

/// Locks a shared chain, ignoring poisoning (its state stays whole between calls).
pub(crate) fn lock(sealer: &SharedSealer) -> std::sync::MutexGuard<'_, Sealer> {
    sealer.lock().unwrap_or_else(|e| e.into_inner())
}

/// A chain's sealing state: fed the blocks the writer writes ([`block`](Self::block)), it
/// makes the seal of those written since its last ([`seal`](Self::seal)).
#[derive(Debug, Clone)]
pub struct Sealer {
    key: SealingKey,
    file_id: [u8; 16],
    chain: [u8; 16],
    sequence: u64,
    previous: Hash,
    /// The place in the chain of the next block.
    next: u64,
    /// The leaves of the blocks written since the last seal, and their bytes.
    pending: Vec<Leaf>,
    pending_bytes: u64,
    /// The leaves the last seal covered.
    last: Vec<Leaf>,
    /// The time a seal made now carries.
    clock: fn() -> i64,
}

impl Sealer {
    /// A new chain of seals signed with `key` for the file `file_id`; `chain` is its id,
    /// random ([`Sealer::random_id`]).
    pub fn new(key: SealingKey, file_id: [u8; 16], chain: [u8; 16]) -> Sealer {
        Sealer {
            key,
            file_id,
            chain,
            sequence: 0,
            previous: [0; 32],
            next: 0,
            pending: Vec::new(),
            pending_bytes: 0,
            last: Vec::new(),
            clock: now,
        }
    }

    /// The same chain with the time its seals carry taken from `clock` (nanoseconds since the
    /// Unix epoch) rather than the system clock: for seals made again byte for byte (test
    /// vectors).
    pub fn with_clock(mut self, clock: fn() -> i64) -> Sealer {
        self.clock = clock;
        self
    }

    /// The seal of the blocks written since the last, made now by its clock.
    pub fn seal_now(&mut self) -> Seal {
        let time = (self.clock)();
        self.seal(time)
    }

    /// 16 bytes from the system's random source: a file id, or a chain id.
    pub fn random_id() -> std::io::Result<[u8; 16]> {
        let mut id = [0u8; 16];
        getrandom::fill(&mut id)
            .map_err(|e| std::io::Error::other(format!("no random bytes: {e}")))?;
        Ok(id)
    }

    /// The file id the seals name.
    pub fn file_id(&self) -> [u8; 16] {
        self.file_id
    }

    /// Starts a new chain, `chain`, for the file `file_id` (a log directory's next segment),
    /// with the same key and clock; what the old chain had not sealed is dropped.
    pub(crate) fn restart(&mut self, file_id: [u8; 16], chain: [u8; 16]) {
        *self = Sealer::new(self.key.clone(), file_id, chain).with_clock(self.clock);
    }

    /// The key it signs with.
    pub(crate) fn key(&self) -> &SealingKey {
        &self.key
    }

    /// Notes, of `bytes` (blocks as a writer wrote them, each from its type field to its
    /// closing sync byte, after an optional leading sync byte), every block a chain covers.
    pub(crate) fn blocks_written(&mut self, bytes: &[u8]) {
        let bytes = bytes.strip_prefix(&[0]).unwrap_or(bytes);
        for block in bytes.split_inclusive(|&b| b == 0) {
            let type_id = varint::read(block).map_or(0, |(t, _)| t);
            if !outside_chains(type_id) {
                self.block(block);
            }
        }
    }

    /// Notes a block the writer wrote whole: `block` runs from its type field to its closing
    /// sync byte.
    pub fn block(&mut self, block: &[u8]) {
        let leaf = Leaf::of_block(block);
        self.pending_bytes += leaf.size;
        self.pending.push(leaf);
        self.next += 1;
    }

    /// Blocks written since the last seal.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Bytes of the blocks written since the last seal.
    pub fn pending_bytes(&self) -> u64 {
        self.pending_bytes
    }

    /// The seal of the blocks written since the last, made at `time` (nanoseconds since the
    /// Unix epoch). The next seal names it and carries its leaves.
    pub fn seal(&mut self, time: i64) -> Seal {
        let leaves = std::mem::take(&mut self.pending);
        self.pending_bytes = 0;
        let first = self.next - leaves.len() as u64;
        let mut seal = Seal {
            file_id: self.file_id,
            chain: self.chain,
            sequence: self.sequence,
            previous: self.previous,
            first,
            leaves,
            carried: std::mem::take(&mut self.last),
            time,
            key_id: self.key.id(),
            signature: [0; 64],
        };
        seal.signature = self.key.sign(&seal.signed_message());
        self.sequence += 1;
        self.previous = seal.hash();
        self.last = seal.leaves.clone();
        seal
    }
}

/// A block as verification sees it: where it is, what it is, and its leaf (or, for a seal
/// block, the seal it holds).
#[derive(Debug, Clone)]
pub struct Seen {
    /// Absolute offset of its opening sync byte.
    pub offset: u64,
    /// Its size (spec 6).
    pub size: u64,
    /// Its type.
    pub block_type: BlockType,
    /// Records of a data block.
    pub records: u64,
    /// [`leaf`] of its bytes between its sync bytes (zeros for a seal block).
    pub hash: Hash,
    /// A seal block's seal, as its payload reads.
    pub seal: Option<Box<Result<Seal, MalformedSeal>>>,
}

impl Seen {
    /// The block at `offset`, `size` bytes long, of type `block_type` holding `records`
    /// records: `frame` is its bytes between its sync bytes, `payload` its payload decoded.
    pub fn new(
        offset: u64,
        size: u64,
        block_type: BlockType,
        records: u64,
        frame: &[u8],
        payload: &[u8],
    ) -> Seen {
        let (hash, seal) = match block_type {
            BlockType::Seal => ([0; 32], Some(Box::new(Seal::from_bytes(payload)))),
            _ => (leaf(frame), None),
        };
        Seen {
            offset,
            size,
            block_type,
            records,
            hash,
            seal,
        }
    }

    fn end(&self) -> u64 {
        self.offset + self.size
    }
}

/// How blocks were tampered with (spec 9.10): content changed (its CRC made to match), blocks
/// taken out, moved, repeated or added, and seals that are not this file's chains' own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Tampering {
    /// A block holds other bytes than the sealed block in its place.
    Altered,
    /// Sealed blocks are missing, and no damage there could have held them.
    Removed,
    /// A sealed block is after a block its writer wrote after it.
    Reordered,
    /// A sealed block is there a second time.
    Duplicated,
    /// A block no seal covers lies between two blocks one chain wrote one after the other.
    Inserted,
    /// A seal that names another file (its seals or blocks spliced in).
    OtherFile,
    /// A seal signed by a key not given.
    OtherKey,
    /// A seal whose signature does not verify with the key it names.
    Forged,
    /// A seal that is there a second time.
    Replayed,
    /// A seal block whose payload is no seal.
    MalformedSeal,
    /// A seal that contradicts its chain's others (it does not follow the one before it).
    Conflicting,
    /// A seal of a chain is missing, and no damage there could have held it.
    SealRemoved,
}

impl Tampering {
    /// A short name: `altered`, `removed`, `reordered`, `duplicated`, `inserted`,
    /// `other-file`, `other-key`, `forged`, `replayed`, `malformed-seal`, `conflicting` or
    /// `seal-removed`.
    pub fn name(self) -> &'static str {
        match self {
            Tampering::Altered => "altered",
            Tampering::Removed => "removed",
            Tampering::Reordered => "reordered",
            Tampering::Duplicated => "duplicated",
            Tampering::Inserted => "inserted",
            Tampering::OtherFile => "other-file",
            Tampering::OtherKey => "other-key",
            Tampering::Forged => "forged",
            Tampering::Replayed => "replayed",
            Tampering::MalformedSeal => "malformed-seal",
            Tampering::Conflicting => "conflicting",
            Tampering::SealRemoved => "seal-removed",
        }
    }
}

/// One finding of tampering: what, and the bytes where (an empty range where blocks were
/// taken out).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tampered {
    /// The bytes: the blocks concerned, or where removed blocks were.
    pub range: std::ops::Range<u64>,
    /// What was done.
    pub kind: Tampering,
    /// What was found, in words.
    pub detail: String,
}

impl std::fmt::Display for Tampered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (start, end) = (self.range.start, self.range.end);
        write!(
            f,
            "bytes {start}..{end} tampered ({}): {}",
            self.kind.name(),
            self.detail
        )
    }
}

/// What verification says of one block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// A valid seal of its chain covers it, in its place.
    Authentic,
    /// No seal covers it: written after its writer's last seal, or by a writer that does not
    /// seal, or (in a file of several chains) added by someone else; never authentic.
    Unsealed,
    /// Tampered with (see [`Sealed::tampered`]).
    Tampered,
    /// A valid seal block, or a header, log or end block (which no seal covers, spec 8.10).
    Structure,
}

/// A block and what verification says of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Where the block is: its opening sync byte and its end (its closing sync byte).
    pub range: std::ops::Range<u64>,
    /// Its type.
    pub block_type: BlockType,
    /// Records of a data block.
    pub records: u64,
    /// What verification says of it.
    pub status: Status,
}

/// A chain of seals found valid, as verification saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainSummary {
    /// The chain's id.
    pub chain: [u8; 16],
    /// The key that signed its seals.
    pub key_id: KeyId,
    /// Valid seals of it found.
    pub seals: u64,
    /// Blocks its seals cover.
    pub blocks: u64,
    /// The hash of its last seal found: what a user keeps to check later that the file only
    /// grew ([`Sealed::extends`]).
    pub last_hash: Hash,
    /// That seal's number in its chain.
    pub last_sequence: u64,
    /// That seal's time, in nanoseconds since the Unix epoch.
    pub last_time: i64,
}

/// What [`verify`] found: each block's verdict, the tampering, and the chains.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sealed {
    /// The file's id, as its valid seals name it (of its first part, when files were
    /// concatenated), if it has one.
    pub file_id: Option<[u8; 16]>,
    /// Every intact block, in file order.
    pub blocks: Vec<Verdict>,
    /// What was tampered with, in file order.
    pub tampered: Vec<Tampered>,
    /// The chains of valid seals, in the order their first seal lies in the file.
    pub chains: Vec<ChainSummary>,
    /// The hashes of the valid seals (see [`Seal::hash`]).
    pub seal_hashes: Vec<Hash>,
    /// The bytes whose blocks were verified, when only part of the file was
    /// ([`verify_span`]); `None` when all of it was.
    pub span: Option<std::ops::Range<u64>>,
}

impl Sealed {
    /// Whether nothing was tampered with, at least one valid seal was found, and every
    /// block but seal and end blocks is authentic. Damage is reported apart: a damaged block
    /// is no block here.
    pub fn is_authentic(&self) -> bool {
        self.tampered.is_empty() && !self.chains.is_empty() && !self.has_unsealed_content()
    }

    /// Whether blocks no seal covers hold content: anything but an index or a time index,
    /// which a writer that finishes a log in place adds (spec 11.3) and which hold only where
    /// the other blocks are (nothing a reader of authentic records takes from them).
    pub fn has_unsealed_content(&self) -> bool {
        self.blocks.iter().any(|b| {
            b.status == Status::Unsealed
                && !matches!(b.block_type, BlockType::Index | BlockType::TimeIndex)
        })
    }

    /// The blocks of `status`, consecutive ones merged into one byte range.
    pub fn ranges(&self, status: Status) -> Vec<std::ops::Range<u64>> {
        let mut out: Vec<std::ops::Range<u64>> = Vec::new();
        for b in self.blocks.iter().filter(|b| b.status == status) {
            match out.last_mut() {
                Some(last) if last.end == b.range.start => last.end = b.range.end,
                _ => out.push(b.range.clone()),
            }
        }
        out
    }

    /// The bytes a verification of part of a file read ([`verify_span`]): from its span's start
    /// to the end of the last block that opens in the span. `None` when the whole file was
    /// verified.
    pub fn verified(&self) -> Option<std::ops::Range<u64>> {
        let span = self.span.as_ref()?;
        let within = self.blocks.iter().filter(|b| span.contains(&b.range.start));
        let end = within.map(|b| b.range.end).max().unwrap_or(span.start);
        Some(span.start..end)
    }

    /// Whether the block opening at `offset` is authentic.
    pub fn authentic_at(&self, offset: u64) -> bool {
        let at = self.blocks.partition_point(|b| b.range.start < offset);
        (self.blocks.get(at))
            .is_some_and(|b| b.range.start == offset && b.status == Status::Authentic)
    }

    /// Blocks and records of `status`.
    pub fn count(&self, status: Status) -> (u64, u64) {
        let of = self.blocks.iter().filter(|b| b.status == status);
        of.fold((0, 0), |(n, r), b| (n + 1, r + b.records))
    }

    /// Whether a valid seal of hash `hash` is in the file and nothing was tampered with:
    /// the file holds what it held when that seal was made, and was only appended to since
    /// (Certificate Transparency's consistency, for a seal hash a user kept).
    pub fn extends(&self, hash: &Hash) -> bool {
        self.tampered.is_empty() && self.seal_hashes.contains(hash)
    }
}

/// Bytes of `lost` within `range`: of blocks, since a damaged range (as reports give them,
/// from after a sync byte to the next intact block's opening sync byte) counts with the sync
/// byte before it, which opened the block it lost (a block's size counts its closing sync
/// byte, spec 6).
fn lost_in(lost: &[std::ops::Range<u64>], range: std::ops::Range<u64>) -> u64 {
    // In file order, apart: from the first that ends after the range starts.
    let first = lost.partition_point(|l| l.end <= range.start);
    lost[first..]
        .iter()
        .take_while(|l| l.start.saturating_sub(1) < range.end)
        .map(|l| {
            let start = l.start.saturating_sub(1);
            l.end.min(range.end).saturating_sub(start.max(range.start))
        })
        .sum()
}

/// A chain as verification rebuilds it from its valid seals.
struct Chain<'a> {
    id: [u8; 16],
    key_id: KeyId,
    /// The valid seals, by sequence, with their offsets.
    seals: std::collections::BTreeMap<u64, (u64, &'a Seal)>,
    /// The leaf of each place a seal gives (as many as the seals list: places are numbers a
    /// seal names, not bounded by the file).
    expected: std::collections::BTreeMap<u64, Leaf>,
    /// The block matched at each place matched.
    matched: std::collections::BTreeMap<u64, usize>,
    /// The next place expected, and where the block matched last ends.
    next: u64,
    last_end: u64,
    /// Whether `next` is known: always in a verification of the whole file; in one of a
    /// span, once a seal of the chain or a block of it was met in the span.
    started: bool,
    /// Whether the chain was started by a block whose leaf its seals give at several places
    /// (identical blocks), and no block of one place has been met since: a jump ahead then
    /// places the blocks met since, rather than showing blocks taken out.
    loose: bool,
}

/// Verifies blocks against their seals (spec 9.10): `blocks` are a file's intact blocks in
/// file order, `lost` the byte ranges a read found damaged or unreadable (in file order, as
/// a report lists them), `keys` the keys
/// whose seals count. Seals signed by other keys, forged, of another file, repeated or
/// contradicting their chain are tampering; each block that a valid seal covers in its place
/// is authentic; blocks missing, moved, repeated, changed or added among a chain's blocks are
/// tampering, unless damage there could have held the missing ones; the rest is unsealed.
pub fn verify(blocks: &[Seen], lost: &[std::ops::Range<u64>], keys: &[VerifyingKey]) -> Sealed {
    verify_in(blocks, lost, keys, None)
}

/// [`verify`] of part of a file (spec 9.10.1): `blocks` are the intact blocks opening in
/// `span`, and the file's seal blocks outside it (found where its index lists them), in file
/// order; `lost` the damaged ranges of the span and the seal blocks
/// that could not be read. Every seal is checked as [`verify`] checks it; each chain's blocks
/// are matched from the first place the span shows it at (the place after a seal of the chain
/// met in the span, else the place of its first block), and places its seals in the span list
/// are accounted for up to each seal. What lies outside the span is not judged: blocks taken
/// out, added or changed before a chain's first block in the span or after its last seal
/// there are not seen.
pub fn verify_span(
    blocks: &[Seen],
    lost: &[std::ops::Range<u64>],
    keys: &[VerifyingKey],
    span: std::ops::Range<u64>,
) -> Sealed {
    verify_in(blocks, lost, keys, Some(span))
}

/// Sealed blocks of `chain`, at places `missing`, are not where they should be, between the
/// chain's last block matched and `gap.end`: blocks no seal covers there since (`unknown`, the
/// last of them) replaced them, or they were taken out, unless damage in `gap` could have held
/// them.
#[allow(clippy::too_many_arguments)]
fn missing_places(
    sealed: &mut Sealed,
    status: &mut [Status],
    unknown: &mut Vec<usize>,
    blocks: &[Seen],
    lost: &[std::ops::Range<u64>],
    chain: &Chain<'_>,
    missing: std::ops::Range<u64>,
    gap: std::ops::Range<u64>,
) {
    let missing_bytes: u64 = (chain.expected.range(missing.clone()))
        .map(|(_, l)| l.size)
        .sum();
    let first = unknown.partition_point(|&u| blocks[u].offset < gap.start);
    let replaced = unknown.split_off(first);
    for &u in &replaced {
        status[u] = Status::Tampered;
        let detail = format!(
            "a block no seal covers, where chain {} wrote other blocks",
            short(&chain.id)
        );
        let r = blocks[u].offset..blocks[u].end();
        sealed.tampered.push(Tampered {
            range: r,
            kind: Tampering::Altered,
            detail,
        });
    }
    let count = missing.end - missing.start;
    if replaced.is_empty() && lost_in(lost, gap.clone()) < missing_bytes {
        sealed.tampered.push(Tampered {
            range: gap,
            kind: Tampering::Removed,
            detail: format!(
                "{count} sealed block(s) of chain {} missing (places {}..{})",
                short(&chain.id),
                missing.start,
                missing.end
            ),
        });
    }
}

fn verify_in(
    blocks: &[Seen],
    lost: &[std::ops::Range<u64>],
    keys: &[VerifyingKey],
    span: Option<std::ops::Range<u64>>,
) -> Sealed {
    // A span from the file's first byte is matched as the whole file is, from place 0.
    let whole_start = span.as_ref().is_none_or(|s| s.start == 0);
    // The file's parts: a header block starts one (files concatenated, spec 5). A part's id is
    // the one its valid seals name; a part whose valid seals name two ids is spliced, and no
    // block of it can be taken for authentic (whose file is it?).
    let mut part = Vec::with_capacity(blocks.len());
    let mut parts = 1;
    for (at, b) in blocks.iter().enumerate() {
        if b.block_type == BlockType::Header && at > 0 {
            parts += 1;
        }
        part.push(parts - 1);
    }
    // Whether a seal's key is one given, and signed it: each signature checked at most once,
    // and none of a seal whose hash a seal found signed (after it) names as the one before it,
    // which commits to its every byte (spec 9.10, step 1): a chain of seals costs one check,
    // not one a seal (850 checks, 42 ms, of a 870 MB file sealed every MiB).
    let mut signed: Vec<Option<bool>> = vec![None; blocks.len()];
    let mut vouched: std::collections::HashSet<Hash> = Default::default();
    for (at, b) in blocks.iter().enumerate().rev() {
        let Some(Ok(seal)) = b.seal.as_deref() else {
            continue;
        };
        let Some(key) = keys.iter().find(|k| k.id() == seal.key_id) else {
            continue;
        };
        let ok = vouched.contains(&seal.hash()) || seal.signed_by(key);
        if ok && seal.sequence > 0 {
            vouched.insert(seal.previous);
        }
        signed[at] = Some(ok);
    }
    let mut ids: Vec<Option<[u8; 16]>> = vec![None; parts];
    let mut spliced = vec![false; parts];
    for (at, b) in blocks.iter().enumerate() {
        if let Some(Ok(seal)) = b.seal.as_deref() {
            if signed[at] == Some(true) {
                let p = part[at];
                match ids[p] {
                    None => ids[p] = Some(seal.file_id),
                    Some(id) => spliced[p] |= id != seal.file_id,
                }
            }
        }
    }
    let mut sealed = Sealed {
        file_id: ids[0],
        span: span.clone(),
        ..Sealed::default()
    };
    let mut status: Vec<Status> = vec![Status::Unsealed; blocks.len()];
    let tamper = |sealed: &mut Sealed, range, kind, detail: String| {
        sealed.tampered.push(Tampered {
            range,
            kind,
            detail,
        })
    };

    // The seals: each valid one joins its chain.
    let mut chains: Vec<Chain<'_>> = Vec::new();
    let mut seen_seals: std::collections::HashSet<Hash> = std::collections::HashSet::new();
    for (at, b) in blocks.iter().enumerate() {
        let Some(seal) = b.seal.as_deref() else {
            if outside_chains(b.block_type.type_id()) {
                status[at] = Status::Structure;
            }
            continue;
        };
        status[at] = Status::Tampered;
        let range = b.offset..b.end();
        let seal = match seal {
            Ok(seal) => seal,
            Err(e) => {
                tamper(&mut sealed, range, Tampering::MalformedSeal, e.to_string());
                continue;
            }
        };
        let Some(signed) = signed[at] else {
            let detail = format!("a seal signed by key {}, not a key given", seal.key_id);
            tamper(&mut sealed, range, Tampering::OtherKey, detail);
            continue;
        };
        if !signed {
            let detail = format!("a seal whose signature key {} did not make", seal.key_id);
            tamper(&mut sealed, range, Tampering::Forged, detail);
            continue;
        }
        if spliced[part[at]] {
            let detail = format!(
                "a seal of file {}, among seals of another file",
                file_id_text(&seal.file_id)
            );
            tamper(&mut sealed, range, Tampering::OtherFile, detail);
            continue;
        }
        let hash = seal.hash();
        if !seen_seals.insert(hash) {
            let detail = format!("seal {} of its chain, a second time", seal.sequence);
            tamper(&mut sealed, range, Tampering::Replayed, detail);
            continue;
        }
        let chain = match chains.iter_mut().position(|c| c.id == seal.chain) {
            Some(c) => &mut chains[c],
            None => {
                chains.push(Chain {
                    id: seal.chain,
                    key_id: seal.key_id,
                    seals: Default::default(),
                    expected: Default::default(),
                    matched: Default::default(),
                    next: 0,
                    last_end: 0,
                    started: whole_start,
                    loose: false,
                });
                chains.last_mut().expect("pushed")
            }
        };
        if chain.seals.contains_key(&seal.sequence) {
            let detail = format!("a second, different seal {} of its chain", seal.sequence);
            tamper(&mut sealed, range, Tampering::Conflicting, detail);
            continue;
        }
        chain.seals.insert(seal.sequence, (b.offset, seal));
        status[at] = Status::Structure;
        sealed.seal_hashes.push(hash);
    }

    // Each chain's places, from its seals (and, where a seal is missing, the leaves the next
    // one carries); seals that contradict the one before them, and seals missing where no
    // damage could have held them.
    for chain in &mut chains {
        let mut before: Option<(u64, u64, &Seal)> = None;
        let mut conflicting = Vec::new();
        for (&sequence, &(offset, seal)) in &chain.seals {
            let expected_previous = match before {
                Some((s, _, prev)) if s + 1 == sequence => Some(prev.hash()),
                _ => None,
            };
            let gap_from = before.map_or(0, |(_, o, _)| o);
            let missing = sequence - before.map_or(0, |(s, _, _)| s + 1);
            if missing > 0 && lost_in(lost, gap_from..offset) == 0 {
                conflicting.push((
                    offset..offset,
                    Tampering::SealRemoved,
                    format!("{missing} seal(s) of its chain before seal {sequence} missing"),
                ));
            }
            let follows = match (expected_previous, before) {
                (Some(hash), Some((_, _, prev))) => {
                    hash == seal.previous
                        && prev.first + prev.leaves.len() as u64 == seal.first
                        && prev.leaves == seal.carried
                }
                _ => true,
            };
            if !follows {
                let size = blocks
                    .iter()
                    .find(|b| b.offset == offset)
                    .map_or(0, |b| b.size);
                conflicting.push((
                    offset..offset + size,
                    Tampering::Conflicting,
                    format!(
                        "seal {sequence} does not follow seal {} of its chain",
                        sequence - 1
                    ),
                ));
            }
            let places = [
                (
                    seal.first.saturating_sub(seal.carried.len() as u64),
                    &seal.carried,
                ),
                (seal.first, &seal.leaves),
            ];
            for (first, leaves) in places {
                for (i, leaf) in leaves.iter().enumerate() {
                    let place = first.saturating_add(i as u64);
                    chain.expected.entry(place).or_insert(*leaf);
                }
            }
            before = Some((sequence, offset, seal));
        }
        for (range, kind, detail) in conflicting {
            tamper(&mut sealed, range, kind, detail);
        }
    }

    // Blocks to places: each block is matched to the place its chain expects next, or found
    // at another place (blocks missing before it, or it moved or repeated), or at none. Each
    // leaf's places, by chain and place, so that a block costs a few lookups, however many
    // blocks are alike.
    // Sorted by leaf, then chain and place: a block's candidates are one run of it, found by
    // binary search (48 bytes a place, no allocation per leaf).
    let mut places: Vec<(Hash, usize, u64)> = (chains.iter().enumerate())
        .flat_map(|(c, chain)| (chain.expected.iter()).map(move |(&p, l)| (l.hash, c, p)))
        .collect();
    places.sort_unstable();
    // In a verification of a span, a valid seal of a chain met in the span says where the
    // chain stands there: every place it lists is behind it, and the chain's next block is
    // the place after them.
    let mut checkpoints: std::collections::HashMap<u64, (usize, u64)> = Default::default();
    if let Some(span) = span.as_ref().filter(|_| !whole_start) {
        for (c, chain) in chains.iter().enumerate() {
            let within = chain
                .seals
                .values()
                .filter(|(offset, _)| span.contains(offset));
            for &(offset, seal) in within {
                let end = seal.first.saturating_add(seal.leaves.len() as u64);
                checkpoints.insert(offset, (c, end));
            }
        }
    }
    let mut unknown: Vec<usize> = Vec::new();
    for (at, b) in blocks.iter().enumerate() {
        if outside_chains(b.block_type.type_id()) {
            if let Some(&(c, end)) = checkpoints.get(&b.offset).filter(|_| b.seal.is_some()) {
                let chain = &mut chains[c];
                if chain.started && !chain.loose && end > chain.next {
                    let (missing, gap) = (chain.next..end, chain.last_end..b.offset);
                    let (s, u) = (&mut status, &mut unknown);
                    missing_places(&mut sealed, s, u, blocks, lost, chain, missing, gap);
                }
                if !chain.started || chain.loose || end > chain.next {
                    chain.next = end;
                    chain.last_end = b.end();
                }
                (chain.started, chain.loose) = (true, false);
            }
            continue;
        }
        let fits = |c: usize, place: u64| {
            chains[c]
                .expected
                .get(&place)
                .is_some_and(|l| l.hash == b.hash && l.size == b.size)
        };
        let from = places.partition_point(|x| x.0 < b.hash);
        let to = places.partition_point(|x| x.0 <= b.hash);
        let candidates = &places[from..to];
        // The place its chain expects next; else the nearest ahead; else one behind. A chain
        // not yet started (a span's) takes the first place that fits.
        let exact = (0..chains.len()).find(|&c| chains[c].started && fits(c, chains[c].next));
        let mut ahead: Option<(usize, u64, bool)> = None;
        let mut behind: Option<(usize, u64)> = None;
        if exact.is_none() {
            for group in candidates.chunk_by(|x, y| x.1 == y.1) {
                let c = group[0].1;
                let (next, started) = (chains[c].next, chains[c].started);
                let i = match started {
                    true => group.partition_point(|&(_, _, p)| p <= next),
                    false => 0,
                };
                let from = if started { next } else { 0 };
                if let Some(&(_, _, p)) = group[i..].iter().find(|&&(_, _, p)| fits(c, p)) {
                    let alike = group
                        .iter()
                        .filter(|&&(_, _, q)| fits(c, q))
                        .nth(1)
                        .is_some();
                    let first = |c: usize| if chains[c].started { chains[c].next } else { 0 };
                    if ahead.is_none_or(|(ac, ap, _)| p - from < ap - first(ac)) {
                        ahead = Some((c, p, alike));
                    }
                }
                if started {
                    let mut before = group[..i].iter();
                    if let Some(&(_, _, p)) = before.find(|&&(_, _, p)| p < next && fits(c, p)) {
                        behind.get_or_insert((c, p));
                    }
                }
            }
        }
        let matched = exact.map(|c| (c, chains[c].next, false)).or(ahead);
        if let Some((c, place, alike)) = matched {
            // A block whose leaf the chain's seals give at one place alone says where the
            // chain stands.
            let one_place = chains[c].loose
                && (candidates.iter())
                    .filter(|&&(_, k, q)| k == c && fits(c, q))
                    .nth(1)
                    .is_none();
            let chain = &mut chains[c];
            if !chain.started {
                // The chain's first block in the span: where it stands. Identical blocks
                // leave that open until a block of one place is met.
                (chain.started, chain.loose) = (true, alike);
            } else if place > chain.next && !chain.loose {
                // Places next..place are missing: lost to damage, replaced by blocks no seal
                // covers (altered), or taken out. The blocks no seal covers since the chain's
                // last block are the last of those set aside (blocks come in file order).
                let (missing, gap) = (chain.next..place, chain.last_end..b.offset);
                let (s, u) = (&mut status, &mut unknown);
                missing_places(&mut sealed, s, u, blocks, lost, chain, missing, gap);
            }
            if one_place {
                chain.loose = false;
            }
            chain.matched.insert(place, at);
            chain.next = place + 1;
            chain.last_end = b.end();
            status[at] = Status::Authentic;
            continue;
        }
        if let Some((c, place)) = behind {
            let chain = &chains[c];
            let (kind, detail) = match chain.matched.get(&place) {
                Some(&first) => (
                    Tampering::Duplicated,
                    format!("the block at byte {} again", blocks[first].offset),
                ),
                None => (
                    Tampering::Reordered,
                    format!(
                        "block {place} of chain {}, after block {} of it",
                        short(&chain.id),
                        chain.next - 1
                    ),
                ),
            };
            status[at] = Status::Tampered;
            tamper(&mut sealed, b.offset..b.end(), kind, detail);
            continue;
        }
        unknown.push(at);
    }

    // The places no block filled at the end of each chain (in a span: what lies after it is
    // not judged).
    for chain in chains.iter().filter(|_| span.is_none()) {
        let missing: Vec<(&u64, &Leaf)> = chain.expected.range(chain.next..).collect();
        let (Some(first), Some(last)) = (missing.first(), missing.last()) else {
            continue;
        };
        let missing_bytes: u64 = missing.iter().map(|(_, l)| l.size).sum();
        let end = blocks.last().map_or(0, Seen::end).max(chain.last_end);
        if lost_in(lost, chain.last_end..end) < missing_bytes {
            let detail = format!(
                "{} sealed block(s) of chain {} missing (places {}..{})",
                missing.len(),
                short(&chain.id),
                first.0,
                *last.0 + 1
            );
            tamper(
                &mut sealed,
                chain.last_end..chain.last_end,
                Tampering::Removed,
                detail,
            );
        }
    }

    // Header, log and end blocks, in no chain, between two blocks of one chain that its
    // writer wrote one after the other: none of those writes them there, so they were added
    // (a header there would make what follows read as another file).
    for (at, b) in blocks.iter().enumerate() {
        if b.seal.is_some() || !outside_chains(b.block_type.type_id()) {
            continue;
        }
        // The chain's blocks matched before and after it, at consecutive places.
        let between = chains.iter().any(|chain| {
            let mut by_block = chain.matched.iter().map(|(&p, &m)| (m, p));
            let before = by_block.clone().take_while(|&(m, _)| m < at).last();
            let after = by_block.find(|&(m, _)| m > at);
            matches!((before, after), (Some((_, p)), Some((_, q))) if p + 1 == q)
        });
        if between {
            status[at] = Status::Tampered;
            let detail = format!(
                "a {} block between two blocks one chain wrote one after the other",
                b.block_type.name()
            );
            tamper(&mut sealed, b.offset..b.end(), Tampering::Inserted, detail);
        }
    }

    // Blocks no seal covers: in a file of one chain, those between two of its blocks were
    // added; the rest (and all of them in a file of several chains, whose writers may have
    // crashed before sealing) are unsealed.
    if let [chain] = &chains[..] {
        let first = chain.matched.values().min().map(|&m| blocks[m].offset);
        let last = chain.matched.values().max().map(|&m| blocks[m].offset);
        if let (Some(first), Some(last)) = (first, last) {
            for &u in &unknown {
                let offset = blocks[u].offset;
                if offset > first && offset < last {
                    status[u] = Status::Tampered;
                    let detail = format!(
                        "a block no seal covers, among the blocks of chain {}",
                        short(&chain.id)
                    );
                    tamper(
                        &mut sealed,
                        offset..blocks[u].end(),
                        Tampering::Inserted,
                        detail,
                    );
                }
            }
        }
    }

    // Parts holding authentic blocks of chains of two files (their seals elsewhere, past a
    // header put among them) are spliced too.
    let mut files: Vec<Option<[u8; 16]>> = vec![None; parts];
    for chain in &chains {
        let Some((_, &(_, seal))) = chain.seals.first_key_value() else {
            continue;
        };
        for &at in chain.matched.values() {
            let p = part[at];
            match files[p] {
                None => files[p] = Some(seal.file_id),
                Some(id) if id != seal.file_id => spliced[p] = true,
                Some(_) => {}
            }
        }
    }

    // Spliced parts: nothing in them is authentic.
    for (p, _) in spliced.iter().enumerate().filter(|(_, s)| **s) {
        let mut range: Option<std::ops::Range<u64>> = None;
        for at in (0..blocks.len()).filter(|&at| part[at] == p) {
            let b = &blocks[at];
            let r = range.get_or_insert(b.offset..b.end());
            r.end = b.end();
            if status[at] != Status::Structure {
                status[at] = Status::Tampered;
            }
        }
        if let Some(range) = range {
            let detail = "seals of two files signed by the key(s) given: blocks spliced from \
                          another file; none of these bytes is taken for authentic"
                .to_string();
            tamper(&mut sealed, range, Tampering::OtherFile, detail);
        }
    }

    sealed
        .tampered
        .sort_by_key(|t| (t.range.start, t.range.end));
    sealed.blocks = blocks
        .iter()
        .zip(status)
        .map(|(b, status)| Verdict {
            range: b.offset..b.end(),
            block_type: b.block_type,
            records: b.records,
            status,
        })
        .collect();
    sealed.chains = chains
        .iter()
        .filter_map(|c| {
            let (&last_sequence, &(_, last)) = c.seals.last_key_value()?;
            Some(ChainSummary {
                chain: c.id,
                key_id: c.key_id,
                seals: c.seals.len() as u64,
                blocks: c.matched.len() as u64,
                last_hash: last.hash(),
                last_sequence,
                last_time: last.time,
            })
        })
        .collect();
    sealed
}

/// The first 4 bytes of a chain id, in hexadecimal: enough to tell chains apart in a message.
fn short(id: &[u8; 16]) -> String {
    crate::key::hex(&id[..4])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sealer(seed: u8) -> Sealer {
        Sealer::new(SealingKey::from_seed([seed; 32]), [1; 16], [2; 16])
    }

    #[test]
    fn a_seal_reads_back_and_is_signed_by_its_key_alone() {
        let mut s = sealer(7);
        s.block(b"first block\0");
        s.block(b"second block\0");
        let first = s.seal(1_000);
        s.block(b"third block\0");
        let second = s.seal(2_000);
        let key = SealingKey::from_seed([7; 32]).verifying_key();
        let other = SealingKey::from_seed([8; 32]).verifying_key();
        for seal in [&first, &second] {
            let back = Seal::from_bytes(&seal.to_bytes()).unwrap();
            assert_eq!(&back, seal);
            assert!(back.signed_by(&key));
            assert!(!back.signed_by(&other));
        }
        assert_eq!((first.sequence, first.first, first.leaves.len()), (0, 0, 2));
        assert_eq!((second.sequence, second.first), (1, 2));
        assert_eq!(second.previous, first.hash());
        assert_eq!(second.carried, first.leaves);
        let third = Leaf {
            hash: leaf(b"third block"),
            size: 12,
        };
        assert_eq!(second.leaves, [third]);
    }

    #[test]
    fn any_change_to_a_signed_seal_breaks_its_signature() {
        let mut s = sealer(7);
        s.block(b"a\0");
        s.seal(1);
        s.block(b"b\0");
        let seal = s.seal(2);
        let key = SealingKey::from_seed([7; 32]).verifying_key();
        let bytes = seal.to_bytes();
        for i in 0..bytes.len() {
            for bit in [0x01, 0x80] {
                let mut changed = bytes.clone();
                changed[i] ^= bit;
                if let Ok(back) = Seal::from_bytes(&changed) {
                    assert!(
                        !back.signed_by(&key),
                        "byte {i} bit {bit:#x} changed unseen"
                    );
                }
            }
        }
    }

    #[test]
    fn malformed_payloads_are_refused_without_allocating_for_their_counts() {
        let mut s = sealer(7);
        s.block(b"a\0");
        let bytes = s.seal(1).to_bytes();
        for cut in 0..bytes.len() {
            assert!(Seal::from_bytes(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(Seal::from_bytes(&longer).is_err());
        // A leaf count of 2^62 in 150 bytes.
        let mut huge = bytes[..1 + 16 + 16 + 1 + 32 + 1].to_vec();
        varint::write(1 << 62, &mut huge);
        huge.extend_from_slice(&[0; 150]);
        assert_eq!(
            Seal::from_bytes(&huge),
            Err(MalformedSeal("more leaves than bytes"))
        );
    }
}
