//! Zig-zag varints ("long" in Avro): the only integer encoding of the format.
//!
//! A signed value `n` is mapped to `(n << 1) ^ (n >> 63)` and written as little-endian base-128
//! groups, the high bit of each byte set when more follow. A non-zero value in shortest form
//! contains no 0x00 byte, which is why the block header can sit between sync bytes unescaped.
//! Readers reject non-shortest forms (an overlong varint can end in 0x00) and varints of more
//! than 10 bytes.

/// The longest varint: 64 bits in 7-bit groups.
pub const MAX_LEN: usize = 10;

/// What is wrong with a varint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum VarintError {
    /// The input ends inside the varint.
    #[error("truncated")]
    Truncated,
    /// The varint has a redundant trailing zero group.
    #[error("not in shortest form")]
    Overlong,
    /// The varint is longer than 10 bytes or overflows 64 bits.
    #[error("longer than 64 bits")]
    TooLong,
}

/// Maps a signed value to its zig-zag form.
#[inline]
pub fn zigzag(n: i64) -> u64 {
    ((n << 1) ^ (n >> 63)) as u64
}

/// Maps a zig-zag value back to the signed value.
#[inline]
pub fn unzigzag(z: u64) -> i64 {
    ((z >> 1) as i64) ^ -((z & 1) as i64)
}

/// Encodes `n` into `out`, returning the number of bytes used (1..=10).
#[inline]
pub fn encode(n: i64, out: &mut [u8; MAX_LEN]) -> usize {
    let mut z = zigzag(n);
    let mut i = 0;
    while z >= 0x80 {
        out[i] = (z as u8) | 0x80;
        z >>= 7;
        i += 1;
    }
    out[i] = z as u8;
    i + 1
}

/// Appends the encoding of `n` to `out`.
#[inline]
pub fn write(n: i64, out: &mut Vec<u8>) {
    // Byte pushes, not a copy from a scratch array: most varints are one or two bytes, and a
    // `memcpy` call per record length was a tenth of the writer's time on small records.
    let mut z = zigzag(n);
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// The number of bytes the encoding of `n` takes.
#[inline]
pub fn encoded_len(n: i64) -> usize {
    let bits = 64 - zigzag(n).leading_zeros() as usize;
    bits.max(1).div_ceil(7)
}

/// A walk over the varint fields of a payload, one after another.
pub(crate) struct Fields<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Fields<'a> {
    /// A walk from the start of `bytes`.
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Fields { bytes, at: 0 }
    }

    /// The next field, or `what` it is when it is not a valid varint (cut off, too long,
    /// overlong).
    pub(crate) fn next(&mut self, what: &'static str) -> Result<i64, &'static str> {
        let (value, used) = read(&self.bytes[self.at..]).map_err(|_| what)?;
        self.at += used;
        Ok(value)
    }

    /// Whether every byte has been read.
    pub(crate) fn is_done(&self) -> bool {
        self.at == self.bytes.len()
    }
}

/// Decodes a varint from the start of `input`, returning the value and the bytes consumed.
#[inline]
pub fn read(input: &[u8]) -> Result<(i64, usize), VarintError> {
    // Fast paths: one byte, and two (a record's length from 64 bytes to 8 KiB).
    match *input {
        [] => Err(VarintError::Truncated),
        [b0, ..] if b0 < 0x80 => Ok((unzigzag(u64::from(b0)), 1)),
        [b0, b1, ..] if b1 < 0x80 && b1 != 0 => {
            Ok((unzigzag(u64::from(b0 & 0x7f) | u64::from(b1) << 7), 2))
        }
        _ => read_long(input),
    }
}

/// [`read`] of a varint of more than two bytes, or one that is not valid.
#[inline(never)]
fn read_long(input: &[u8]) -> Result<(i64, usize), VarintError> {
    let mut z: u64 = 0;
    for (i, &b) in input.iter().enumerate().take(MAX_LEN) {
        let group = u64::from(b & 0x7f);
        if i == MAX_LEN - 1 && b > 1 {
            return Err(VarintError::TooLong);
        }
        z |= group << (7 * i);
        if b < 0x80 {
            if b == 0 {
                return Err(VarintError::Overlong);
            }
            return Ok((unzigzag(z), i + 1));
        }
    }
    if input.len() < MAX_LEN {
        Err(VarintError::Truncated)
    } else {
        Err(VarintError::TooLong)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_encodings() {
        let cases: &[(i64, &[u8])] = &[
            (0, &[0x00]),
            (-1, &[0x01]),
            (1, &[0x02]),
            (-64, &[0x7f]),
            (64, &[0x80, 0x01]),
            (
                i64::MAX,
                &[0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
            ),
            (
                i64::MIN,
                &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
            ),
        ];
        for &(n, bytes) in cases {
            let mut out = Vec::new();
            write(n, &mut out);
            assert_eq!(out, bytes, "encoding {n}");
            assert_eq!(read(bytes), Ok((n, bytes.len())), "decoding {n}");
            assert_eq!(encoded_len(n), bytes.len());
        }
    }

    #[test]
    fn rejects_bad_forms() {
        assert_eq!(read(&[]), Err(VarintError::Truncated));
        assert_eq!(read(&[0x80]), Err(VarintError::Truncated));
        assert_eq!(read(&[0x82, 0x00]), Err(VarintError::Overlong));
        assert_eq!(read(&[0xff; 10]), Err(VarintError::TooLong));
        assert_eq!(read(&[0xff; 11]), Err(VarintError::TooLong));
        let mut eleven = [0x80; 11];
        eleven[10] = 1;
        assert_eq!(read(&eleven), Err(VarintError::TooLong));
        // 10th byte may only carry the 64th bit.
        let mut big = [0xff; 10];
        big[9] = 0x02;
        assert_eq!(read(&big), Err(VarintError::TooLong));
    }

    proptest! {
        #[test]
        fn round_trip(n: i64, tail: Vec<u8>) {
            let mut out = Vec::new();
            write(n, &mut out);
            prop_assert_eq!(out.len(), encoded_len(n));
            // Non-zero values never contain a zero byte.
            prop_assert!(n == 0 || !out.contains(&0));
            out.extend_from_slice(&tail);
            prop_assert_eq!(read(&out), Ok((n, encoded_len(n))));
        }

        /// The two-byte path decodes what the general loop decodes, and refuses what it
        /// refuses (a second byte of 0 is overlong): `read` is the one-byte case, then the
        /// loop, as it was before that path.
        #[test]
        fn fast_paths_agree_with_the_loop(
            bytes in proptest::collection::vec(any::<u8>(), 0..4),
            n in -10_000i64..10_000,
        ) {
            let before = match bytes.first() {
                None => Err(VarintError::Truncated),
                Some(&b) if b < 0x80 => Ok((unzigzag(u64::from(b)), 1)),
                Some(_) => read_long(&bytes),
            };
            prop_assert_eq!(read(&bytes), before);
            let mut out = Vec::new();
            write(n, &mut out);
            prop_assert_eq!(read(&out), Ok((n, out.len())));
            if out.len() > 1 {
                prop_assert_eq!(read(&out), read_long(&out));
            }
        }

        #[test]
        fn never_panics(bytes: Vec<u8>) {
            if let Ok((n, used)) = read(&bytes) {
                let mut out = Vec::new();
                write(n, &mut out);
                prop_assert_eq!(&bytes[..used], &out[..]);
            }
        }
    }
}
