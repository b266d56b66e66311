//! Seals: signed statements that a run of blocks is exactly what a writer wrote (issue 35).
//!
//! This module is the sans-I/O core of sealing: what a seal says, its bytes, the hash that
//! stands for each block it covers, and a [`Sealer`] that a writer feeds the blocks it
//! writes and asks for seals. Writers, verification and the format's seal block build on it.
//!
//! A writer that seals is a **chain**: a random 16-byte chain id, and seals numbered from 0,
//! each naming the hash of the one before. A seal lists one **leaf** per block written since
//! the chain's previous seal, in order: the BLAKE3 hash (keyed for this use) of the chain id,
//! the block's place in the chain, and the block's bytes between its two sync bytes. Leaves
//! bound to their place make a block moved, removed, duplicated or inserted show as a leaf
//! that does not match; leaves per block keep damage local (a damaged block fails its own
//! leaf, and every other block still matches its own). Each seal also carries the previous
//! seal's leaves, so that a damaged seal costs no block its proof while the next seal stands.
//! Every seal names the file's id (random, chosen when the file was made), so that seals and
//! blocks spliced in from another file, even one sealed with the same key, do not pass for
//! this file's. The seal's bytes up to its signature are signed with Ed25519.

use crate::key::{KeyId, SealingKey, VerifyingKey};
use crate::varint;

/// A 32-byte BLAKE3 hash.
pub type Hash = [u8; 32];

/// The version of a seal's payload this crate writes and reads.
pub const SEAL_VERSION: i64 = 1;

/// The context string of the keyed hash of leaves (BLAKE3's key derivation mode).
const LEAF_CONTEXT: &str = "cobsfile 2026-12-05 seal leaf";

/// What the signature covers before the payload's bytes, so that a signature made for
/// something else is never one of a seal.
const SIGNED_PREFIX: &[u8] = b"cobsfile seal\0";

/// The hash that stands for a block in a seal: the block's bytes between its sync bytes, at
/// place `index` (from 0) of the chain `chain`.
pub fn leaf(chain: &[u8; 16], index: u64, block: &[u8]) -> Hash {
    let mut hasher = blake3::Hasher::new_derive_key(LEAF_CONTEXT);
    hasher.update(chain);
    hasher.update(&index.to_le_bytes());
    hasher.update(block);
    *hasher.finalize().as_bytes()
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
    pub leaves: Vec<Hash>,
    /// The leaves of the blocks the previous seal covered (empty for the first).
    pub carried: Vec<Hash>,
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
        let mut out = Vec::with_capacity(128 + 32 * (self.leaves.len() + self.carried.len()));
        varint::write(SEAL_VERSION, &mut out);
        out.extend_from_slice(&self.file_id);
        out.extend_from_slice(&self.chain);
        varint::write(self.sequence as i64, &mut out);
        out.extend_from_slice(&self.previous);
        varint::write(self.first as i64, &mut out);
        for list in [&self.leaves, &self.carried] {
            varint::write(list.len() as i64, &mut out);
            for leaf in list {
                out.extend_from_slice(leaf);
            }
        }
        varint::write(self.time, &mut out);
        out.extend_from_slice(&self.key_id.0);
        out
    }

    /// What the signature signs: `SIGNED_PREFIX`, then the payload up to the signature.
    fn signed_message(&self) -> Vec<u8> {
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
        let leaves = r.hashes()?;
        let carried = r.hashes()?;
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

    fn hashes(&mut self) -> Result<Vec<Hash>, MalformedSeal> {
        let n = self.count()?;
        if n > (self.0.len() / 32) as u64 {
            return Err(MalformedSeal("more leaves than bytes"));
        }
        (0..n).map(|_| self.array::<32>()).collect()
    }
}

/// A chain's sealing state: fed the blocks the writer writes ([`block`](Self::block)), it
/// makes the seal of those written since its last ([`seal`](Self::seal)).
#[derive(Debug)]
pub struct Sealer {
    key: SealingKey,
    file_id: [u8; 16],
    chain: [u8; 16],
    sequence: u64,
    previous: Hash,
    /// The place in the chain of the next block.
    next: u64,
    /// The leaves of the blocks written since the last seal.
    pending: Vec<Hash>,
    /// The leaves the last seal covered.
    last: Vec<Hash>,
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
            last: Vec::new(),
        }
    }

    /// 16 bytes from the system's random source: a file id, or a chain id.
    pub fn random_id() -> std::io::Result<[u8; 16]> {
        let mut id = [0u8; 16];
        getrandom::fill(&mut id)
            .map_err(|e| std::io::Error::other(format!("no random bytes: {e}")))?;
        Ok(id)
    }

    /// Notes a block the writer wrote: its bytes between its two sync bytes.
    pub fn block(&mut self, block: &[u8]) {
        self.pending.push(leaf(&self.chain, self.next, block));
        self.next += 1;
    }

    /// Blocks written since the last seal.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// The seal of the blocks written since the last, made at `time` (nanoseconds since the
    /// Unix epoch). The next seal names it and carries its leaves.
    pub fn seal(&mut self, time: i64) -> Seal {
        let leaves = std::mem::take(&mut self.pending);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn sealer(seed: u8) -> Sealer {
        Sealer::new(SealingKey::from_seed([seed; 32]), [1; 16], [2; 16])
    }

    #[test]
    fn a_seal_reads_back_and_is_signed_by_its_key_alone() {
        let mut s = sealer(7);
        s.block(b"first block");
        s.block(b"second block");
        let first = s.seal(1_000);
        s.block(b"third block");
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
        assert_eq!(second.leaves, [leaf(&[2; 16], 2, b"third block")]);
    }

    #[test]
    fn any_change_to_a_signed_seal_breaks_its_signature() {
        let mut s = sealer(7);
        s.block(b"a");
        s.seal(1);
        s.block(b"b");
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
    fn leaves_are_bound_to_their_place_and_chain() {
        let a = leaf(&[2; 16], 0, b"block");
        assert_ne!(a, leaf(&[2; 16], 1, b"block"));
        assert_ne!(a, leaf(&[3; 16], 0, b"block"));
        assert_ne!(a, leaf(&[2; 16], 0, b"block!"));
    }

    #[test]
    fn malformed_payloads_are_refused_without_allocating_for_their_counts() {
        let mut s = sealer(7);
        s.block(b"a");
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
