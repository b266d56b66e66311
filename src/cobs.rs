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
//! found with `memchr`, copying slices instead of bytes; on x86-64 with AVX2 or AVX-512 the
//! encoder instead takes a code block at a time, 32 or 64 bytes per load, store and zero
//! check (`wide_kernel!`), twice as fast on a block in cache. Where zeros are dense (binary
//! records, about one zero in two bytes), code blocks are a few bytes long and a `memcpy` per
//! block would dominate: the encoder then handles 8 bytes at a time without branches, and the
//! decoder copies the input once and walks several chains of code bytes at once
//! (`decode_chains`, whose lock-step loop uses two unchecked indexes that its condition
//! bounds whatever the bytes). The vector kernels and `decode_chains` are the module's
//! `unsafe`. [`reference_decode`] is the plain decoder both directions are tested against,
//! and every encoding path is tested against the `cobs` crate.

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
    /// The last block closed was long: zeros are sparse here, and the word-at-a-time path,
    /// which pays off only where they are dense, is not taken.
    sparse: bool,
    /// The vector kernel this CPU has, if any: where zeros are sparse, 32 or 64 bytes are
    /// copied and checked for zeros at a time (`push_wide`).
    wide: Option<Wide>,
}

/// A block closed by a zero after at least this many data bytes marks zeros as sparse.
const SPARSE_RUN: usize = 64;

/// The first zero among `n` bytes whose zero bytes are the set bits of `zeros`, or `n`.
#[inline]
fn first_zero(zeros: u64, n: usize) -> usize {
    if zeros != 0 {
        zeros.trailing_zeros() as usize
    } else {
        n
    }
}

/// A kernel that encodes a code block at a time where zeros are sparse: the block's data
/// bytes, up to 254, are loaded and checked for zeros one vector at a time (the last vector
/// overlapping the ones before) and stored at once, with one branch per vector on whether
/// any byte was zero, which where zeros are sparse the CPU predicts. The state stays in
/// registers throughout. `$short`, for a block of fewer bytes than a vector, copies them and
/// gives the first zero among them (`Some`), or `None` for a longer block; `$zeros` gives
/// a vector's zero bytes as bits.
macro_rules! wide_kernel {
    (
        $(#[$doc:meta])*
        $name:ident, $features:literal, $width:literal,
        |$src:ident, $dst:ident, $n:ident| $short:block,
        |$v:ident| $zeros:expr,
        $load:ident, $store:ident
    ) => {
        $(#[$doc])*
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $features)]
        unsafe fn $name<'d>(&mut self, mut data: &'d [u8]) -> &'d [u8] {
            use std::arch::x86_64::*;
            let out = &mut *self.out;
            out.reserve(max_encoded_len(data.len()) + $width);
            let base = out.as_mut_ptr();
            let mut len = out.len();
            let (mut code_at, mut run, mut after_full) = (self.code_at, self.run, self.after_full);
            let mut sparse = self.sparse;
            // SAFETY (of every write through `base` below): `len` never passes the encoding
            // of the bytes consumed so far, plus one code slot, and each write reaches at
            // most one vector past it: all within what `reserve` made room for.
            while !data.is_empty() {
                if after_full {
                    unsafe { *base.add(len) = 0 };
                    code_at = len;
                    len += 1;
                    run = 0;
                    after_full = false;
                }
                let n = data.len().min(MAX_RUN - run);
                let ($src, $dst, $n) = (data.as_ptr(), unsafe { base.add(len) }, n);
                // The first zero among `data[..n]`, or `n`.
                let short: Option<usize> = $short;
                let zero = match short {
                    Some(zero) => zero,
                    None => {
                        let mut at = 0;
                        loop {
                            let last = at + $width >= n;
                            if last {
                                at = n - $width;
                            }
                            // SAFETY: `at + $width <= n <= data.len()`: a vector of
                            // readable bytes; the store is within the room reserved.
                            // Neither needs alignment.
                            let $v = unsafe { $load($src.add(at).cast()) };
                            unsafe { $store($dst.add(at).cast(), $v) };
                            let zeros: u64 = $zeros;
                            if zeros != 0 {
                                // The bytes before `at` had none.
                                break at + zeros.trailing_zeros() as usize;
                            }
                            if last {
                                break n;
                            }
                            at += $width;
                        }
                    }
                };
                len += zero;
                run += zero;
                if zero < n {
                    data = &data[zero + 1..];
                    unsafe { *base.add(code_at) = (run + 1) as u8 };
                    sparse = run >= SPARSE_RUN;
                    unsafe { *base.add(len) = 0 };
                    code_at = len;
                    len += 1;
                    run = 0;
                    if !sparse {
                        break;
                    }
                } else {
                    data = &data[n..];
                    if run == MAX_RUN {
                        unsafe { *base.add(code_at) = 0xFF };
                        after_full = true;
                    }
                }
            }
            // SAFETY: every byte below `len` was written: data by the stores, codes and
            // code slots by the byte writes.
            unsafe { out.set_len(len) };
            (self.code_at, self.run, self.after_full, self.sparse) =
                (code_at, run, after_full, sparse);
            data
        }
    };
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
            sparse: false,
            wide: Wide::detect(),
        }
    }

    /// Encodes `data` as the continuation of everything pushed so far.
    ///
    /// Eight bytes at a time without branches while the current block is short and the last
    /// one was (which is where zeros are dense); run by run with `memchr` and slice copies
    /// otherwise (where zeros are sparse). A record pushed in text is so copied whole, and
    /// not word by word up to the end of the block it lands in.
    pub fn push(&mut self, mut data: &[u8]) {
        if data.is_empty() {
            return;
        }
        if self.after_full {
            self.open_block();
        }
        loop {
            if self.sparse && self.wide.is_some() {
                data = self.push_wide(data);
                if data.is_empty() {
                    return;
                }
            }
            if !self.sparse {
                data = self.push_words(data);
                if self.wide.is_some() && self.run >= SPARSE_RUN {
                    // A long block without a zero: zeros are sparse here.
                    self.sparse = true;
                    continue;
                }
            }
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

    /// Encodes `data` 32 or 64 bytes at a time, while zeros stay sparse, and returns the rest:
    /// what follows the first zero that closes a short block. Only where `wide` is set.
    #[inline]
    fn push_wide<'d>(&mut self, data: &'d [u8]) -> &'d [u8] {
        match self.wide {
            // SAFETY: `wide` names a kernel only where `Wide::detect` found its features.
            #[cfg(target_arch = "x86_64")]
            Some(Wide::Avx512) => unsafe { self.push_wide_avx512(data) },
            #[cfg(target_arch = "x86_64")]
            Some(Wide::Avx2) => unsafe { self.push_wide_avx2(data) },
            None => unreachable!("push_wide without a kernel"),
        }
    }

    wide_kernel!(
        /// [`push_wide`](Self::push_wide) with 64-byte vectors; the last bytes of a code
        /// block shorter than 64 go through one masked load.
        push_wide_avx512,
        "avx512f,avx512bw",
        64,
        |src, dst, n| {
            (n < 64).then(|| {
                let lanes = (1u64 << n) - 1;
                // SAFETY: the masked load reads only the first `n` bytes at `src`, which
                // are `data`'s; the other lanes are neither read nor able to fault. The
                // store is within the room reserved.
                let v = unsafe { _mm512_maskz_loadu_epi8(lanes, src.cast()) };
                unsafe { _mm512_storeu_si512(dst.cast(), v) };
                first_zero(_mm512_testn_epi8_mask(v, v) & lanes, n)
            })
        },
        |v| _mm512_testn_epi8_mask(v, v),
        _mm512_loadu_si512,
        _mm512_storeu_si512
    );

    wide_kernel!(
        /// [`push_wide`](Self::push_wide) with 32-byte vectors; the last bytes of a code
        /// block shorter than 32 are copied and searched as a slice.
        push_wide_avx2,
        "avx2",
        32,
        |src, dst, n| {
            (n < 32).then(|| {
                // SAFETY: `src` starts `n` readable bytes of `data`; `dst` has room for 32
                // (reserved), and the two do not overlap (`data` is not the output).
                let tail = unsafe { std::slice::from_raw_parts(src, n) };
                unsafe { std::ptr::copy_nonoverlapping(src, dst, n) };
                memchr(0, tail).unwrap_or(n)
            })
        },
        |v| {
            let zero = _mm256_cmpeq_epi8(v, _mm256_setzero_si256());
            u64::from(_mm256_movemask_epi8(zero) as u32)
        },
        _mm256_loadu_si256,
        _mm256_storeu_si256
    );

    /// The length of the output so far: where the next pushed non-zero byte goes when no
    /// code block is full.
    pub(crate) fn output_len(&self) -> usize {
        self.out.len()
    }

    /// Sets the encoding aside between pushes, for an owner that cannot hold on to `out`;
    /// [`Paused::resume`] continues it on the same `Vec`, which must not change meanwhile
    /// except in data bytes already pushed.
    pub(crate) fn pause(self) -> Paused {
        Paused {
            code_at: self.code_at,
            run: self.run,
            after_full: self.after_full,
            sparse: self.sparse,
            wide: self.wide,
        }
    }

    /// Closes the encoding and returns the number of bytes it appended.
    pub fn finish(self, started_at: usize) -> usize {
        self.finish_output().len() - started_at
    }

    /// Closes the encoding and returns the output.
    pub(crate) fn finish_output(self) -> &'a mut Vec<u8> {
        if !self.after_full {
            self.out[self.code_at] = (self.run + 1) as u8;
        }
        self.out
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
                self.sparse = true;
            }
        }
    }

    fn push_zero(&mut self) {
        if self.after_full {
            self.open_block();
        }
        self.out[self.code_at] = (self.run + 1) as u8;
        self.sparse = self.run >= SPARSE_RUN;
        self.open_block();
    }
}

/// An [`Encoder`] set aside between pushes ([`Encoder::pause`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Paused {
    code_at: usize,
    run: usize,
    after_full: bool,
    sparse: bool,
    wide: Option<Wide>,
}

impl Paused {
    /// Continues the encoding on `out`, the `Vec` it was paused on.
    ///
    /// # Panics
    ///
    /// If `out` is shorter than the encoding's open code slot: it cannot be the same `Vec`,
    /// and the vector kernels write that slot unchecked.
    pub(crate) fn resume(self, out: &mut Vec<u8>) -> Encoder<'_> {
        assert!(self.code_at < out.len(), "resumed on another output");
        Encoder {
            out,
            code_at: self.code_at,
            run: self.run,
            after_full: self.after_full,
            sparse: self.sparse,
            wide: self.wide,
        }
    }
}

/// The vector kernels of [`Encoder::push_wide`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wide {
    /// 32-byte vectors (x86-64 with AVX2).
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// 64-byte vectors (x86-64 with AVX-512 F and BW).
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl Wide {
    /// The widest kernel this CPU has.
    fn detect() -> Option<Self> {
        Self::available().last().copied()
    }

    /// The kernels this CPU has, narrowest first.
    fn available() -> &'static [Wide] {
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw") {
                &[Wide::Avx2, Wide::Avx512]
            } else if is_x86_feature_detected!("avx2") {
                &[Wide::Avx2]
            } else {
                &[]
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            &[]
        }
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

/// The plain decoder, block by block as the specification describes it: what [`decode`] must
/// agree with, errors included, on every input. Slow; for tests, fuzzing and other readers.
pub fn reference_decode(src: &[u8]) -> Result<Vec<u8>, DecodeError> {
    // An encoding holds no 0x00; the first one is the error, wherever the blocks lead.
    if let Some(zero) = src.iter().position(|&b| b == 0) {
        return Err(DecodeError { offset: zero });
    }
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

/// Bytes a short code block's data is copied with, whatever its length: one fixed-size copy
/// is much cheaper than a `memcpy` call of a few bytes.
const SHORT: usize = 16;

/// Code blocks decoded one by one before choosing how to decode the rest.
const PROBE_BLOCKS: usize = 16;

/// Mean code block length (data bytes plus code byte) up to which the probed blocks count as
/// short, so that the rest is decoded by [`decode_chains`].
const SHORT_MEAN: usize = 32;

/// Inputs shorter than this are decoded block by block: walking several chains pays off only
/// when each has many blocks to walk.
const CHAINS_MIN: usize = 4096;

/// Decodes `src`, which the caller has already checked contains no 0x00, into `out`
/// (cleared first). `out` never grows past `src.len()` bytes.
///
/// A few code blocks are decoded one by one; if they are short, which is where zeros are
/// dense, the rest goes to [`decode_chains`], which walks several chains at once. Otherwise,
/// or where that declines, block by block to the end.
pub(crate) fn decode_zero_free(src: &[u8], out: &mut Vec<u8>) -> Result<(), DecodeError> {
    let n = src.len();
    // Room for the whole input: decoding only ever shrinks it. What `out` held is overwritten.
    if out.len() < n {
        out.resize(n, 0);
    }
    let dst = &mut out[..];
    let (at, o) = decode_blocks(src, dst, 0, 0, PROBE_BLOCKS);
    if at < n && at <= PROBE_BLOCKS * SHORT_MEAN && n - at >= CHAINS_MIN {
        if let Some(len) = decode_chains(&src[at..], &mut dst[o..]) {
            out.truncate(o + len);
            return Ok(());
        }
    }
    let (at, o) = decode_blocks(src, dst, at, o, usize::MAX);
    decode_last(src, out, at, o)
}

/// Decodes up to `blocks` code blocks of `src` from offset `at` into `dst` from offset `o`,
/// stopping early before a block that ends at or past the last byte or whose `SHORT` bytes
/// after the code byte are not all in `src`. Returns where it stopped in each.
#[inline]
fn decode_blocks(
    src: &[u8],
    dst: &mut [u8],
    mut at: usize,
    mut o: usize,
    blocks: usize,
) -> (usize, usize) {
    let n = src.len();
    // Decoded bytes so far: `o <= at`, since each code block decodes to at most its length.
    for _ in 0..blocks {
        if at + SHORT >= n {
            break;
        }
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
    (at, o)
}

/// Decodes the code blocks of `src` from offset `at` to its end, block by block and with
/// every bound checked, into `out` from offset `o`, and truncates `out` to the decoding.
fn decode_last(
    src: &[u8],
    out: &mut Vec<u8>,
    mut at: usize,
    mut o: usize,
) -> Result<(), DecodeError> {
    let n = src.len();
    while at < n {
        let code = usize::from(src[at]);
        let end = at + code;
        let Some(data) = src.get(at + 1..end) else {
            out.truncate(o);
            return Err(DecodeError { offset: at });
        };
        out[o..o + data.len()].copy_from_slice(data);
        o += data.len();
        if code != 0xFF && end < n {
            out[o] = 0;
            o += 1;
        }
        at = end;
    }
    out.truncate(o);
    Ok(())
}

/// Steps each chain of [`decode_chains`] takes between checks of where it is.
const UNROLL: usize = 2;

/// Chains [`decode_chains`] walks at once.
const CHAINS: usize = 8;

/// Decodes `src` (no 0x00, at least [`CHAINS_MIN`] bytes) into `dst`, which has room for
/// `src.len()` bytes, and returns the decoded length; or returns `None`, with `dst` holding
/// anything, if `src` is not a valid encoding or a code block is 0xFF (rare where zeros are
/// dense), for the block-by-block decoder to do it.
///
/// Without 0xFF blocks, decoding is a shift by one byte with a zero at each code byte but the
/// first: `dst[i] = src[i + 1]`, except `dst[p - 1] = 0` for each code byte at `p > 0`. The
/// copy is one `memcpy`; what is slow is finding the code bytes, each at the offset the one
/// before it names: a chain of dependent loads, about 5 cycles per code block whatever the
/// loop. So `src` is cut into [`CHAINS`] equal segments and a chain is walked from the start
/// of each at once, in lock step; each zeroes the code bytes it meets in its own segment.
/// Only the first chain starts at a true code byte; the others start at a guess, which is
/// usually a data byte. A chain from a wrong start meets the true chain within a few steps
/// where code blocks are short (its positions are then the true ones, since the walk is a
/// function of position), so afterwards each segment is mended in order: from the true
/// position entering it and the guessed start, walk both, restore the bytes the guessed chain
/// zeroed before they met, zero the true code bytes it missed, and carry the true position
/// on. A guessed chain that never meets the true one in its segment is undone entirely.
fn decode_chains(src: &[u8], dst: &mut [u8]) -> Option<usize> {
    let n = src.len();
    debug_assert!(n >= CHAINS_MIN);
    let dst = &mut dst[..n - 1];
    dst.copy_from_slice(&src[1..]);
    // Segment `k` runs from `n / CHAINS * k` to the next one's start; the last to `n`.
    let ends: [usize; CHAINS] = std::array::from_fn(|k| {
        if k + 1 == CHAINS {
            n
        } else {
            n / CHAINS * (k + 1)
        }
    });
    let mut pos: [usize; CHAINS] = std::array::from_fn(|k| n / CHAINS * k);
    // The first code byte stands for no decoded byte. (Read once: see `rounds` below for why
    // it could be 0.)
    let first = src[0];
    if first == 0 || first == 0xFF {
        return None;
    }
    pos[0] = usize::from(first);
    // The last position at which each chain met a 0xFF code (or, rarely, a position it did
    // not visit, which only makes the decoder decline). One on the true chain means this
    // decoder cannot be used.
    let mut last_full: [Option<usize>; CHAINS] = [None; CHAINS];
    // `UNROLL` steps per check of the ends: a step moves a chain at most 0xFF bytes.
    let safe_ends = ends.map(|end| end.saturating_sub(0xFF * (UNROLL - 1)));
    // Each round moves every chain on by at least `UNROLL` bytes, unless a code byte is 0:
    // the caller checked there is none, but the bytes of a mapped file can turn to zeros
    // under a reader (a file cut short, see `sigbus`), and a chain at a 0 stands still.
    // The rounds are counted so that this ends the loop, and the walks below decline at 0.
    // (A chain needs at most one round per byte of its segment, which is at most
    // `n / CHAINS + CHAINS` bytes long.)
    let mut rounds = n / CHAINS + CHAINS;
    while rounds > 0 && (0..CHAINS).all(|k| pos[k] < safe_ends[k]) {
        rounds -= 1;
        for _ in 0..UNROLL {
            // Bit 8 set where some chain met code 0xFF: a rare branch instead of one per chain.
            let mut full = 0;
            for a in &mut pos {
                // SAFETY: the loop's condition held `*a < ends[k] - 0xFF * (UNROLL - 1)` before
                // the first step, and a step adds at most 0xFF, so `*a < ends[k] <= n ==
                // src.len()`. And `*a >= 1` (chain 0 starts at `src[0]`, which is not 0; the
                // others at `n / CHAINS * k >= 1`, since `n >= CHAINS_MIN`; chains only move
                // forward, by the byte read, so this holds whatever the bytes are), so
                // `*a - 1 < n - 1 == dst.len()`. Bounds checks here cost two compares per step
                // and the registers that keep all chains out of memory.
                let code = unsafe { *src.get_unchecked(*a) };
                unsafe { *dst.get_unchecked_mut(*a - 1) = 0 };
                full |= usize::from(code) + 1;
                *a += usize::from(code);
            }
            if full > 0xFF {
                for (k, &a) in pos.iter().enumerate() {
                    if a >= 0xFF && src[a - 0xFF] == 0xFF {
                        last_full[k] = Some(a - 0xFF);
                    }
                }
            }
        }
    }
    for k in 0..CHAINS {
        while pos[k] < ends[k] {
            let a = pos[k];
            let code = src[a];
            dst[a - 1] = 0;
            match code {
                0 => return None,
                0xFF => last_full[k] = Some(a),
                _ => {}
            }
            pos[k] = a + usize::from(code);
        }
    }
    if last_full[0].is_some() {
        return None;
    }
    // Mend each segment in order. `true_at` is the first true code position at or past the
    // segment's start.
    let mut true_at = pos[0];
    for k in 1..CHAINS {
        let end = ends[k];
        let mut guess = ends[k - 1];
        while guess != true_at && (guess < end || true_at < end) {
            if guess < true_at {
                // Not on the true chain (which steps through every true position below
                // `true_at`), and zeroed by the guessed chain: restore it.
                let code = src[guess];
                if code == 0 {
                    return None;
                }
                dst[guess - 1] = code;
                guess += usize::from(code);
            } else {
                // A true code byte the guessed chain stepped over.
                let code = src[true_at];
                if code == 0 || code == 0xFF {
                    return None;
                }
                dst[true_at - 1] = 0;
                true_at += usize::from(code);
            }
        }
        if guess == true_at && guess < end {
            // The chains met: the guessed chain is the true one from here to its end.
            if last_full[k].is_some_and(|at| at >= guess) {
                return None;
            }
            true_at = pos[k];
        }
    }
    (true_at == n).then_some(n - 1)
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

    /// Pseudo-random numbers: vectors of thousands of bytes drawn element by element are slow
    /// to generate in a debug build.
    fn xorshift(mut state: u64) -> impl Iterator<Item = u64> {
        state |= 1;
        std::iter::repeat_with(move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        })
    }

    /// The chained decoder takes what it is for (and the probe hands it over): otherwise the
    /// properties below would only test the block-by-block decoder.
    #[test]
    fn chains_decode_zero_rich_bodies() {
        let data: Vec<u8> = xorshift(0x9E37_79B9_7F4A_7C15)
            .take(300_000)
            .map(|r| {
                if r.is_multiple_of(3) {
                    0
                } else {
                    (r >> 40) as u8
                }
            })
            .collect();
        let encoded = enc(&data);
        let mut dst = vec![0; encoded.len()];
        let len = decode_chains(&encoded, &mut dst).expect("no 0xFF block in this data");
        assert_eq!(&dst[..len], &data[..]);
        let (at, _) = decode_blocks(&encoded, &mut dst, 0, 0, PROBE_BLOCKS);
        assert!(
            at <= PROBE_BLOCKS * SHORT_MEAN,
            "the probe finds short blocks"
        );
        let mut out = Vec::new();
        decode(&encoded, &mut out).unwrap();
        assert_eq!(out, data);
    }

    fn zero_rich() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(prop_oneof![Just(0u8), any::<u8>(), 1u8..], 0..2000)
    }

    /// Runs of non-zero bytes from none to past `MAX_RUN`, between runs of zeros: blocks that
    /// fill up in either encoder path, or just fail to.
    fn runs() -> impl Strategy<Value = Vec<u8>> {
        let run = prop_oneof![
            0usize..12,
            60usize..70,
            120usize..135,
            240usize..270,
            500usize..520
        ];
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
        fn chains_match_reference(
            seed: u64,
            len in 0usize..12_000,
            stale in 0usize..20_000,
        ) {
            // Mostly short code blocks, some of any length, some 0xFF: chains that wander.
            let src: Vec<u8> = xorshift(seed)
                .take(len)
                .map(|r| match r % 11 {
                    0..=7 => (r >> 8) as u8 % 5 + 1,
                    8 | 9 => ((r >> 8) as u8).max(1),
                    _ => 0xFF,
                })
                .collect();
            let mut out = vec![0xAA; stale];
            match (decode_zero_free(&src, &mut out), reference_decode(&src)) {
                (Ok(()), Ok(expected)) => prop_assert_eq!(out, expected),
                (Err(e), Err(expected)) => prop_assert_eq!(e, expected),
                (ours, theirs) => prop_assert!(false, "{:?} vs {:?}", ours, theirs),
            }
            if src.len() >= CHAINS_MIN {
                let mut dst = vec![0x55; src.len()];
                if let Some(len) = decode_chains(&src, &mut dst) {
                    prop_assert_eq!(&dst[..len], &reference_decode(&src).unwrap()[..]);
                }
            }
        }

        /// Zeros where the caller promised none (the bytes of a mapped file zeroed under the
        /// reader between its check and the decoding): an answer, not a hang or a panic.
        #[test]
        fn zeros_after_the_check_end_the_decoding(
            seed: u64,
            len in CHAINS_MIN..20_000,
            zeros in prop::collection::vec(any::<prop::sample::Index>(), 1..4),
        ) {
            let data: Vec<u8> = xorshift(seed)
                .take(len)
                .map(|r| if r.is_multiple_of(3) { 0 } else { (r >> 32) as u8 })
                .collect();
            let mut src = enc(&data);
            for at in zeros {
                let at = at.index(src.len());
                src[at] = 0;
            }
            let mut out = Vec::new();
            let _ = decode_zero_free(&src, &mut out);
            prop_assert!(out.len() <= src.len());
            let mut dst = vec![0; src.len()];
            let _ = decode_chains(&src, &mut dst);
        }

        /// Valid encodings of zero-rich data, some with bytes changed (to non-zero values, as
        /// the frame check guarantees): the chained decoder on what it is for, and on damage.
        #[test]
        fn chains_match_reference_on_encodings(
            seed: u64,
            len in 4000usize..40_000,
            zeros in 2u64..6,
            runs in prop::collection::vec((any::<prop::sample::Index>(), 240usize..600), 0..3),
            changes in prop::collection::vec((any::<prop::sample::Index>(), 1u8..), 0..4),
        ) {
            let mut data: Vec<u8> = xorshift(seed)
                .take(len)
                .map(|r| if r.is_multiple_of(zeros) { 0 } else { (r >> 32) as u8 })
                .collect();
            for (at, len) in runs {
                let at = at.index(data.len());
                let end = (at + len).min(data.len());
                data[at..end].iter_mut().for_each(|b| *b = (*b).max(7));
            }
            let mut src = enc(&data);
            let pristine = changes.is_empty();
            for (at, value) in changes {
                let at = at.index(src.len());
                src[at] = value;
            }
            let mut out = Vec::new();
            let ours = decode_zero_free(&src, &mut out);
            match reference_decode(&src) {
                Ok(expected) => {
                    prop_assert_eq!(ours, Ok(()));
                    prop_assert_eq!(&out, &expected);
                }
                Err(e) => prop_assert_eq!(ours, Err(e)),
            }
            if pristine {
                prop_assert_eq!(out, data);
            }
        }

        #[test]
        fn incremental_equals_whole(src in prop_oneof![zero_rich(), runs()], cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8)) {
            let mut points: Vec<usize> = cuts.iter().map(|c| c.index(src.len() + 1)).collect();
            points.sort_unstable();
            // Every path where zeros are sparse: each vector kernel the CPU has, and
            // `memchr` with slice copies.
            let kernels = std::iter::once(None).chain(Wide::available().iter().copied().map(Some));
            for wide in kernels {
                let mut out = Vec::new();
                let mut enc = Encoder::new(&mut out);
                enc.wide = wide;
                let mut last = 0;
                for &p in &points {
                    enc.push(&src[last..p]);
                    last = p;
                }
                enc.push(&src[last..]);
                enc.finish(0);
                prop_assert_eq!(out, cobs::encode_vec(&src), "kernel: {:?}", wide);
            }
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
