//! Consistent Overhead Byte Stuffing (Cheshire & Baker): removes every 0x00 from a byte string
//! at a cost of at most one byte in 254.
//!
//! The encoding is a sequence of code blocks. A code byte `n` (1..=254) is followed by `n - 1`
//! non-zero data bytes and stands for those bytes plus one implied 0x00; code 0xFF is followed by
//! 254 data bytes with no implied zero. The implied zero of the last block is dropped. When the
//! input ends right after a full 0xFF block, no empty block follows: the output is byte-identical
//! to the `cobs` crate's `encode`.
//!
//! Both directions have two paths. Where zeros are sparse (text, JSON) they work on runs
//! found with `memchr`, copying slices instead of bytes. Where zeros are dense (binary
//! records, about one zero in two bytes), code blocks are a few bytes long and a `memcpy` per
//! block would dominate: the encoder then handles 8 bytes at a time without branches, and the
//! decoder copies a fixed 16 bytes per short block. Neither uses `unsafe`.

use memchr::memchr;

/// The largest number of data bytes one code block carries.
const MAX_RUN: usize = 254;

/// An upper bound on the encoded length of `n` input bytes.
pub const fn max_encoded_len(n: usize) -> usize {
    n + n / MAX_RUN + 1
}

/// An incremental encoder that appends COBS to a `Vec`, so a body assembled from several
/// slices (header fields, records, checksum) is encoded without first being copied together.
pub struct Encoder<'a> {
    out: &'a mut Vec<u8>,
    /// Index in `out` of the current block's code byte.
    code_at: usize,
    /// Data bytes in the current block.
    run: usize,
    /// The last block was a full 0xFF block and no new block has been opened yet.
    after_full: bool,
}

impl<'a> Encoder<'a> {
    /// Starts encoding at the end of `out`.
    pub fn new(out: &'a mut Vec<u8>) -> Self {
        let code_at = out.len();
        out.push(0);
        Encoder {
            out,
            code_at,
            run: 0,
            after_full: false,
        }
    }

    /// Encodes `data` as the continuation of everything pushed so far.
    ///
    /// Eight bytes at a time without branches while the current block is short (which is
    /// always where zeros are dense); run by run with `memchr` and slice copies once it grows
    /// long (which is where zeros are sparse).
    pub fn push(&mut self, mut data: &[u8]) {
        if data.is_empty() {
            return;
        }
        if self.after_full {
            self.open_block();
        }
        loop {
            data = self.push_words(data);
            match memchr(0, data) {
                Some(zero) => {
                    self.push_run(&data[..zero]);
                    self.push_zero();
                    data = &data[zero + 1..];
                    if data.is_empty() {
                        return;
                    }
                }
                None => {
                    self.push_run(data);
                    return;
                }
            }
        }
    }

    /// Encodes whole 8-byte words of `data` while the current block stays below `MAX_RUN`
    /// data bytes whatever the word holds, and returns the rest.
    ///
    /// Each word is copied with its zero bytes replaced: a zero followed by another zero in
    /// the word becomes that block's code, the distance to it ([`NEXT_ZERO`]); the last zero
    /// becomes the code slot of the block it opens. The block open before the word gets its
    /// code from the word's first zero. A word without zeros writes that code too, a value
    /// that a later word, `push_zero` or `finish` overwrites, so there is no branch on the
    /// word's contents.
    #[inline]
    fn push_words<'d>(&mut self, mut data: &'d [u8]) -> &'d [u8] {
        let out = &mut *self.out;
        let mut code_at = self.code_at;
        let mut run = self.run;
        while run + 8 < MAX_RUN {
            let Some((word, rest)) = data.split_first_chunk::<8>() else {
                break;
            };
            let w = u64::from_le_bytes(*word);
            let zeros = zero_mask(w);
            let base = out.len();
            out.extend_from_slice(&(w | NEXT_ZERO[usize::from(zeros)]).to_le_bytes());
            let first = (u32::from(zeros) | 0x100).trailing_zeros() as usize;
            out[code_at] = (base + first - code_at) as u8;
            let last = 31 - (u32::from(zeros) | 1).leading_zeros() as usize;
            let moved = 0usize.wrapping_sub(usize::from(zeros != 0));
            code_at += (base + last - code_at) & moved;
            run = base + 7 - code_at;
            data = rest;
        }
        self.code_at = code_at;
        self.run = run;
        data
    }

    /// Closes the encoding and returns the number of bytes it appended.
    pub fn finish(self, started_at: usize) -> usize {
        if !self.after_full {
            self.out[self.code_at] = (self.run + 1) as u8;
        }
        self.out.len() - started_at
    }

    fn open_block(&mut self) {
        self.code_at = self.out.len();
        self.out.push(0);
        self.run = 0;
        self.after_full = false;
    }

    /// Appends non-zero bytes.
    fn push_run(&mut self, mut run: &[u8]) {
        while !run.is_empty() {
            if self.after_full {
                self.open_block();
            }
            let take = run.len().min(MAX_RUN - self.run);
            self.out.extend_from_slice(&run[..take]);
            self.run += take;
            run = &run[take..];
            if self.run == MAX_RUN {
                self.out[self.code_at] = 0xFF;
                self.after_full = true;
            }
        }
    }

    fn push_zero(&mut self) {
        if self.after_full {
            self.open_block();
        }
        self.out[self.code_at] = (self.run + 1) as u8;
        self.open_block();
    }
}

/// Bit `j` set where byte `j` of a little-endian word is zero.
#[inline]
fn zero_mask(w: u64) -> u8 {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // High bit of each byte set where the byte is non-zero (no carries cross bytes).
    let nonzero = (((w & LOW7) + LOW7) | w) & HIGH;
    // Gather the eight flags into the top byte: no partial sums carry (see the tests).
    ((((nonzero ^ HIGH) >> 7).wrapping_mul(0x0102_0408_1020_4080)) >> 56) as u8
}

/// For each pattern of zero bytes in a word (bit `j`: byte `j` is zero), the word to OR into
/// it: each zero byte followed by another zero byte in the word holds the distance to it.
static NEXT_ZERO: [u64; 256] = next_zero_table();

const fn next_zero_table() -> [u64; 256] {
    let mut table = [0u64; 256];
    let mut m = 0;
    while m < 256 {
        let mut j = 0;
        while j < 8 {
            if m & (1 << j) != 0 {
                let mut k = j + 1;
                while k < 8 && m & (1 << k) == 0 {
                    k += 1;
                }
                if k < 8 {
                    table[m] |= ((k - j) as u64) << (8 * j);
                }
            }
            j += 1;
        }
        m += 1;
    }
    table
}

/// Appends the COBS encoding of `src` to `out` and returns its length.
pub fn encode(src: &[u8], out: &mut Vec<u8>) -> usize {
    let start = out.len();
    out.reserve(max_encoded_len(src.len()));
    let mut enc = Encoder::new(out);
    enc.push(src);
    enc.finish(start)
}

/// Why an encoding could not be decoded; `offset` is relative to the start of the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeError {
    /// Offset of the offending byte: a zero, or a code byte whose block runs past the end.
    pub offset: usize,
}

/// Decodes `src` into `out` (which is cleared first).
pub fn decode(src: &[u8], out: &mut Vec<u8>) -> Result<(), DecodeError> {
    if let Some(zero) = memchr(0, src) {
        return Err(DecodeError { offset: zero });
    }
    decode_zero_free(src, out)
}

/// Bytes a short code block's data is copied with, whatever its length: one fixed-size copy
/// is much cheaper than a `memcpy` call of a few bytes.
const SHORT: usize = 16;

/// Decodes `src`, which the caller has already checked contains no 0x00, into `out`
/// (cleared first). `out` never grows past `src.len()` bytes.
pub(crate) fn decode_zero_free(src: &[u8], out: &mut Vec<u8>) -> Result<(), DecodeError> {
    let n = src.len();
    // Room for the whole input: decoding only ever shrinks it. What `out` held is overwritten.
    if out.len() < n {
        out.resize(n, 0);
    }
    let dst = &mut out[..];
    let mut at = 0;
    // Decoded bytes so far: `o <= at`, since each code block decodes to at most its length.
    let mut o = 0;
    // Blocks that end before the last byte and whose `SHORT` bytes after the code byte are in
    // `src`: copy those bytes whatever the block's length, then step over the data.
    while at + SHORT < n {
        let code = usize::from(src[at]);
        let end = at + code;
        if code == 0 || end >= n {
            break;
        }
        if code <= SHORT + 1 {
            dst[o..o + SHORT].copy_from_slice(&src[at + 1..at + 1 + SHORT]);
        } else {
            dst[o..o + code - 1].copy_from_slice(&src[at + 1..end]);
        }
        o += code - 1;
        // The implied zero; after a 0xFF block it is not counted, and the next block's copy
        // overwrites it.
        dst[o] = 0;
        o += usize::from(code != 0xFF);
        at = end;
    }
    while at < n {
        let code = usize::from(src[at]);
        let end = at + code;
        let Some(data) = src.get(at + 1..end) else {
            out.truncate(o);
            return Err(DecodeError { offset: at });
        };
        dst[o..o + data.len()].copy_from_slice(data);
        o += data.len();
        if code != 0xFF && end < n {
            dst[o] = 0;
            o += 1;
        }
        at = end;
    }
    out.truncate(o);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn enc(src: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        encode(src, &mut out);
        out
    }

    #[test]
    fn code_table_examples() {
        assert_eq!(enc(&[]), [0x01]);
        assert_eq!(enc(&[0]), [0x01, 0x01]);
        assert_eq!(enc(&[0, 0]), [0x01, 0x01, 0x01]);
        assert_eq!(
            enc(&[0x11, 0x22, 0x00, 0x33]),
            [0x03, 0x11, 0x22, 0x02, 0x33]
        );
        assert_eq!(
            enc(&[0x11, 0x00, 0x00, 0x00]),
            [0x02, 0x11, 0x01, 0x01, 0x01]
        );
        let full: Vec<u8> = (1..=254).collect();
        let mut expect = vec![0xFF];
        expect.extend(&full);
        assert_eq!(enc(&full), expect, "254 bytes end without an empty block");
        let mut with_zero = full.clone();
        with_zero.push(0);
        expect.extend([0x01, 0x01]);
        assert_eq!(enc(&with_zero), expect);
    }

    #[test]
    fn decode_rejects_bad_input() {
        let mut out = Vec::new();
        assert_eq!(
            decode(&[0x02, 0x00], &mut out),
            Err(DecodeError { offset: 1 })
        );
        assert_eq!(
            decode(&[0x03, 0x11], &mut out),
            Err(DecodeError { offset: 0 })
        );
        assert_eq!(
            decode(&[0x01, 0x05, 1], &mut out),
            Err(DecodeError { offset: 1 })
        );
    }

    /// The plain decoder the fast one must agree with, errors included.
    fn reference_decode(src: &[u8]) -> Result<Vec<u8>, DecodeError> {
        let mut out = Vec::new();
        let mut at = 0;
        while at < src.len() {
            let code = usize::from(src[at]);
            let end = at + code;
            let Some(data) = src.get(at + 1..end) else {
                return Err(DecodeError { offset: at });
            };
            out.extend_from_slice(data);
            if code != 0xFF && end < src.len() {
                out.push(0);
            }
            at = end;
        }
        Ok(out)
    }

    #[test]
    fn zero_mask_is_exact() {
        for m in 0..=255u8 {
            for v in [0x01u8, 0x7f, 0x80, 0x81, 0xfe, 0xff] {
                let word: [u8; 8] = std::array::from_fn(|j| {
                    if m >> j & 1 == 1 {
                        0
                    } else {
                        v.wrapping_add((j as u8).wrapping_mul(37)).max(1)
                    }
                });
                assert_eq!(zero_mask(u64::from_le_bytes(word)), m, "{word:02x?}");
            }
        }
    }

    #[test]
    fn next_zero_table() {
        assert_eq!(NEXT_ZERO[0], 0);
        assert_eq!(
            NEXT_ZERO[0b0000_0001], 0,
            "a lone zero waits for the next word"
        );
        assert_eq!(NEXT_ZERO[0b1000_0001], 7);
        assert_eq!(NEXT_ZERO[0b0000_1010], 2 << 8);
        assert_eq!(NEXT_ZERO[0b1111_1111], 0x0001_0101_0101_0101);
    }

    fn zero_rich() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(prop_oneof![Just(0u8), any::<u8>(), 1u8..], 0..2000)
    }

    /// Runs of non-zero bytes from none to past `MAX_RUN`, between runs of zeros: blocks that
    /// fill up in either encoder path, or just fail to.
    fn runs() -> impl Strategy<Value = Vec<u8>> {
        let run = prop_oneof![0usize..12, 240usize..270, 500usize..520];
        prop::collection::vec((run, 0usize..4, 1u8..), 0..12).prop_map(|segments| {
            let mut out = Vec::new();
            for (len, zeros, fill) in segments {
                out.extend((0..len).map(|i| fill.wrapping_add(i as u8).max(1)));
                out.resize(out.len() + zeros, 0);
            }
            out
        })
    }

    proptest! {
        #[test]
        fn matches_the_cobs_crate(src in zero_rich()) {
            let ours = enc(&src);
            prop_assert_eq!(&ours, &cobs::encode_vec(&src));
            prop_assert!(!ours.contains(&0));
            prop_assert!(ours.len() <= max_encoded_len(src.len()));
            let mut back = Vec::new();
            decode(&ours, &mut back).unwrap();
            prop_assert_eq!(&back, &src);
            prop_assert_eq!(cobs::decode_vec(&ours).unwrap(), src);
        }

        #[test]
        fn long_runs_match_the_cobs_crate(src in runs()) {
            let ours = enc(&src);
            prop_assert_eq!(&ours, &cobs::encode_vec(&src));
            let mut back = Vec::new();
            decode(&ours, &mut back).unwrap();
            prop_assert_eq!(&back, &src);
        }

        #[test]
        fn fast_decode_matches_reference(
            src in prop::collection::vec(prop_oneof![1u8..20, 1u8..], 0..700),
            stale in 0usize..1000,
        ) {
            // `out` is reused without clearing: stale bytes must not leak into the result.
            let mut out = vec![0xAA; stale];
            match (decode_zero_free(&src, &mut out), reference_decode(&src)) {
                (Ok(()), Ok(expected)) => prop_assert_eq!(out, expected),
                (Err(e), Err(expected)) => prop_assert_eq!(e, expected),
                (ours, theirs) => prop_assert!(false, "{:?} vs {:?}", ours, theirs),
            }
        }

        #[test]
        fn incremental_equals_whole(src in prop_oneof![zero_rich(), runs()], cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8)) {
            let mut points: Vec<usize> = cuts.iter().map(|c| c.index(src.len() + 1)).collect();
            points.sort_unstable();
            let mut out = Vec::new();
            let mut enc = Encoder::new(&mut out);
            let mut last = 0;
            for p in points {
                enc.push(&src[last..p]);
                last = p;
            }
            enc.push(&src[last..]);
            enc.finish(0);
            prop_assert_eq!(out, cobs::encode_vec(&src));
        }

        #[test]
        fn decode_never_panics(src: Vec<u8>) {
            let mut out = Vec::new();
            if decode(&src, &mut out).is_ok() {
                prop_assert!(out.len() <= src.len());
            }
        }
    }
}
