//! Consistent Overhead Byte Stuffing (Cheshire & Baker): removes every 0x00 from a byte string
//! at a cost of at most one byte in 254.
//!
//! The encoding is a sequence of code blocks. A code byte `n` (1..=254) is followed by `n - 1`
//! non-zero data bytes and stands for those bytes plus one implied 0x00; code 0xFF is followed by
//! 254 data bytes with no implied zero. The implied zero of the last block is dropped. When the
//! input ends right after a full 0xFF block, no empty block follows: the output is byte-identical
//! to the `cobs` crate's `encode`.
//!
//! Both directions work on runs found with `memchr`, copying slices instead of bytes.

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
    pub fn push(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            match memchr(0, data) {
                Some(zero) => {
                    self.push_run(&data[..zero]);
                    self.push_zero();
                    data = &data[zero + 1..];
                }
                None => {
                    self.push_run(data);
                    return;
                }
            }
        }
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

/// Decodes `src`, which the caller has already checked contains no 0x00, into `out`
/// (cleared first). `out` never grows past `src.len()` bytes.
pub(crate) fn decode_zero_free(src: &[u8], out: &mut Vec<u8>) -> Result<(), DecodeError> {
    out.clear();
    out.reserve(src.len());
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

    fn zero_rich() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(prop_oneof![Just(0u8), any::<u8>(), 1u8..], 0..2000)
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
        fn incremental_equals_whole(src in zero_rich(), cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8)) {
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
