//! Finding blocks in a byte buffer: the part of a block outside its COBS body.
//!
//! ```text
//! 0x00  type (varint, non-zero)  length (varint, > 0)  COBS body  0x00
//! ```
//!
//! `length` counts the bytes after the length field up to and including the closing sync byte.
//! A frame is sound when its length lands on a 0x00 and, in a full check, no other 0x00 lies
//! between the header and that byte. Anything else is damage, and scanning resumes at the next
//! 0x00 after the damaged block's opening sync byte, so a bad length never hides the blocks it
//! points over. One extra sync byte is padding (two files concatenated), skipped without a
//! report; a longer run of zeros is zero-filled data, reported as damage. This module is sans-I/O: it works on whatever window of the input the caller
//! holds and says when it needs more.

use std::ops::Range;

use memchr::memchr;

use crate::error::Cause;
use crate::varint::{self, VarintError};

/// How much of a frame `read_at` checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Check {
    /// The length must land on the first 0x00 after the header.
    Full,
    /// The length must land on a 0x00; the body is not read (for skipping blocks).
    Landing,
}

/// A block found in the window; all positions are indices into the window.
#[derive(Debug, Clone)]
pub(crate) struct Frame {
    /// The opening sync byte.
    pub start: usize,
    /// The type id.
    pub block_type: i64,
    /// The type field's bytes.
    pub type_field: Range<usize>,
    /// The COBS body.
    pub body: Range<usize>,
    /// The closing sync byte.
    pub end: usize,
}

/// What `read_at` found at a position.
#[derive(Debug)]
pub(crate) enum Found {
    /// A frame (checked as asked).
    Frame(Frame),
    /// Bytes `from..resume` are damaged; `resume` is the next sync byte or the window's end.
    Damage {
        from: usize,
        resume: usize,
        cause: Cause,
    },
    /// One extra sync byte follows the one at the position: padding to skip, not damage.
    Padding { resume: usize },
    /// The window ends inside what may be a sound frame and more input may follow. In a full
    /// check, the window then holds no 0x00 after `pos`.
    NeedMore,
    /// The input ends here.
    End,
}

/// The index of the first 0x00 at or after `from`, or `buf.len()`.
#[inline]
pub(crate) fn next_sync(buf: &[u8], from: usize) -> usize {
    memchr(0, &buf[from..]).map_or(buf.len(), |i| from + i)
}

/// Where a range read of `bytes` from `start` begins (spec 9.4): offset 0 for a range from the
/// start, else the first 0x00 at or after `start` (the input's end if there is none).
pub(crate) fn range_start(bytes: &[u8], start: u64) -> u64 {
    match usize::try_from(start).map_or(bytes.len(), |s| s.min(bytes.len())) {
        0 => 0,
        start => next_sync(bytes, start) as u64,
    }
}

/// Scans the window `buf`, whose first byte is at absolute offset `base`, at `pos`: normally a
/// sync byte, or the start of the input. `eof` says no bytes follow the window; `limit` caps
/// the length field. `searched` is an index up to which the caller knows the window holds no
/// 0x00 after `pos` (an earlier full check of this frame needed more input): a full check
/// looks for the closing sync byte from there on, so a frame that arrives in many small reads
/// is not searched again from its start each time.
pub(crate) fn read_at(
    buf: &[u8],
    pos: usize,
    base: u64,
    eof: bool,
    limit: u64,
    check: Check,
    searched: usize,
) -> Found {
    let at = |i: usize| base + i as u64;
    let Some(&first) = buf.get(pos) else {
        return if eof { Found::End } else { Found::NeedMore };
    };
    if first != 0 {
        let cause = Cause::NoSync { offset: at(pos) };
        return Found::Damage {
            from: pos,
            resume: next_sync(buf, pos),
            cause,
        };
    }
    let t = pos + 1;
    let damage = |cause| Found::Damage {
        from: t,
        resume: next_sync(buf, t),
        cause,
    };
    match buf.get(t) {
        None => return if eof { Found::End } else { Found::NeedMore },
        Some(0) => return zeros(buf, t, base, eof),
        Some(_) => {}
    }
    // The type may be negative (application-defined); the length must be positive.
    let field = |i: usize, name| match varint::read(&buf[i..]) {
        Ok((v, n)) if v > 0 || (v < 0 && name == "type") => Ok((v, n)),
        Ok((value, _)) => Err(Some(Cause::InvalidField {
            offset: at(i),
            field: name,
            value,
        })),
        Err(VarintError::Truncated) if !eof => Err(None),
        Err(problem) => Err(Some(Cause::Varint {
            offset: at(i),
            field: name,
            problem,
        })),
    };
    let (block_type, type_len) = match field(t, "type") {
        Ok(v) => v,
        Err(None) => return Found::NeedMore,
        Err(Some(cause)) => return damage(cause),
    };
    let l = t + type_len;
    let (length, length_len) = match field(l, "length") {
        Ok(v) => v,
        Err(None) => return Found::NeedMore,
        Err(Some(cause)) => return damage(cause),
    };
    let length = length as u64;
    if length > limit {
        return damage(Cause::TooLarge {
            offset: at(l),
            length,
            limit,
        });
    }
    let body = l + length_len;
    let end = body + length as usize - 1;
    let frame = || {
        Found::Frame(Frame {
            start: pos,
            block_type,
            type_field: t..l,
            body: body..end,
            end,
        })
    };
    let full = || next_sync(buf, body.max(searched.min(buf.len())));
    let found = match check {
        Check::Full => full(),
        Check::Landing => match buf.get(end) {
            Some(0) => end,
            Some(_) => next_sync(buf, t),
            None => buf.len(),
        },
    };
    if found == end && end < buf.len() {
        return frame();
    }
    if end >= buf.len() && (check == Check::Landing || found == buf.len()) {
        if !eof {
            return Found::NeedMore;
        }
        return damage(Cause::Truncated {
            offset: at(pos),
            needed: (end + 1 - buf.len()) as u64,
        });
    }
    if found == buf.len() && !eof && ((buf.len() - pos) as u64) <= limit {
        // Damaged, and the 0x00 it found is past the window: where, a reader of the whole
        // input says (within the longest frame a reader keeps in its window).
        return Found::NeedMore;
    }
    damage(Cause::SyncMismatch {
        expected: at(end),
        found: at(found),
    })
}

/// Classifies the zeros that start at `t`, right after a sync byte. One extra sync byte is
/// padding (two files concatenated end to end); a longer run is zero-filled data (an
/// unwritten extent after a crash, a zeroed range) and is reported as damage up to its last
/// zero, which may open the next block.
///
/// The caller has read the zero at `t`; it is not read again. In a mapped file another
/// process may change it meanwhile, and a run found to start after it would make the damage
/// end before it starts.
fn zeros(buf: &[u8], t: usize, base: u64, eof: bool) -> Found {
    let run_end = buf[t + 1..]
        .iter()
        .position(|&b| b != 0)
        .map_or(buf.len(), |n| t + 1 + n);
    if run_end - t == 1 {
        if run_end == buf.len() && !eof {
            return Found::NeedMore;
        }
        return Found::Padding { resume: t };
    }
    Found::Damage {
        from: t,
        resume: run_end - 1,
        cause: Cause::ZeroRun {
            offset: base + t as u64,
        },
    }
}

/// Checks that a frame found with [`Check::Landing`] holds no 0x00
/// before its closing sync byte; on failure returns the position of the first such byte.
/// The frame is then damaged exactly as [`Check::Full`] reports it: from the byte after its
/// opening sync byte, a [`Cause::SyncMismatch`] expecting its end and finding that byte,
/// where the scan resumes (the header holds no 0x00: varints end in a non-zero byte, and
/// overlong ones are refused).
pub(crate) fn verify(buf: &[u8], frame: &Frame) -> Result<(), usize> {
    match next_sync(buf, frame.body.start) {
        found if found == frame.end => Ok(()),
        found => Err(found),
    }
}

/// The damage a frame is when [`verify`] finds a
/// 0x00 at the absolute offset `zero`: where it starts and its cause, as [`Check::Full`]
/// reports it. `start` and `end` are the absolute offsets of its opening and closing sync
/// bytes.
pub(crate) fn stray_zero_damage(start: u64, end: u64, zero: u64) -> (u64, Cause) {
    (
        start + 1,
        Cause::SyncMismatch {
            expected: end,
            found: zero,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: u64 = 1 << 20;

    fn full(buf: &[u8], eof: bool) -> Found {
        read_at(buf, 0, 100, eof, LIMIT, Check::Full, 0)
    }

    #[test]
    fn finds_a_sound_frame() {
        // type 3 (zig-zag 6), length 3: two body bytes and the closing sync.
        let buf = [0, 6, 6, 1, 1, 0];
        match full(&buf, true) {
            Found::Frame(f) => {
                assert_eq!(
                    (f.block_type, f.type_field, f.body, f.end),
                    (3, 1..2, 3..5, 5)
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_window_ending_where_the_block_should_end_waits() {
        // The closing sync byte would be at index 5, just past the window.
        let buf = [0, 6, 6, 1, 1];
        for check in [Check::Full, Check::Landing] {
            assert!(matches!(
                read_at(&buf, 0, 0, false, LIMIT, check, 0),
                Found::NeedMore
            ));
            assert!(matches!(
                read_at(&buf, 0, 0, true, LIMIT, check, 0),
                Found::Damage { .. }
            ));
        }
    }

    #[test]
    fn waits_for_more_or_reports_truncation() {
        let buf = [0, 6, 6, 1];
        assert!(matches!(full(&buf, false), Found::NeedMore));
        assert!(matches!(full(&[0, 0x86], false), Found::NeedMore));
        match full(&buf, true) {
            Found::Damage {
                from,
                resume,
                cause,
            } => {
                assert_eq!((from, resume), (1, 4));
                assert_eq!(
                    cause,
                    Cause::Truncated {
                        offset: 100,
                        needed: 2
                    }
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_wrong_length_resumes_at_the_next_sync() {
        // Length 5 points past a sync byte at index 5.
        let buf = [0, 6, 10, 1, 1, 0, 6, 4, 1, 0];
        for check in [Check::Full, Check::Landing] {
            match read_at(&buf, 0, 0, true, LIMIT, check, 0) {
                Found::Damage { resume, .. } => assert_eq!(resume, 5, "{check:?}"),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn landing_check_skips_over_the_body() {
        // Landing on a sync byte is enough for a landing check even with a 0x00 inside.
        let buf = [0, 6, 8, 1, 0, 1, 0];
        assert!(matches!(
            read_at(&buf, 0, 0, true, LIMIT, Check::Landing, 0),
            Found::Frame(_)
        ));
        assert!(matches!(full(&buf, true), Found::Damage { resume: 4, .. }));
    }

    #[test]
    fn a_full_check_searches_from_where_it_stopped() {
        // The caller vouches for index 4 (it searched there before), so the search for the
        // closing sync byte starts at 5 and finds the one the length points at.
        let buf = [0, 6, 8, 1, 0, 1, 0];
        assert!(matches!(full(&buf, true), Found::Damage { resume: 4, .. }));
        let vouched = read_at(&buf, 0, 0, true, LIMIT, Check::Full, 5);
        assert!(matches!(vouched, Found::Frame(Frame { end: 6, .. })));
    }

    #[test]
    fn a_zero_that_changes_after_it_was_read_still_moves_the_scan_on() {
        // As if the zero at index 1 were read by `read_at`, then overwritten in a mapped file
        // before `zeros` looked at the run: the zero counts as read, and nothing ends before
        // it starts.
        assert!(matches!(
            zeros(&[0, 5, 1], 1, 0, true),
            Found::Padding { resume: 1 }
        ));
        assert!(matches!(
            zeros(&[0, 5, 0, 1], 1, 0, true),
            Found::Damage {
                from: 1,
                resume: 2,
                ..
            }
        ));
    }

    #[test]
    fn rejects_bad_headers() {
        assert!(matches!(
            full(&[0, 0, 1], true),
            Found::Padding { resume: 1 }
        ));
        assert!(matches!(full(&[0, 0], false), Found::NeedMore));
        assert!(matches!(full(&[0, 0], true), Found::Padding { resume: 1 }));
        assert!(matches!(
            full(&[0, 0, 0, 0, 6], true),
            Found::Damage {
                from: 1,
                resume: 3,
                cause: Cause::ZeroRun { offset: 101 }
            }
        ));
        assert!(matches!(
            full(&[0, 6, 1, 0], true),
            Found::Damage {
                cause: Cause::InvalidField { .. },
                ..
            }
        ));
        assert!(matches!(
            full(&[0, 0x86, 0, 0], true),
            Found::Damage {
                cause: Cause::Varint { .. },
                ..
            }
        ));
        let huge = [0, 6, 0xfe, 0xff, 0xff, 0xff, 0x0f, 1, 0];
        assert!(matches!(
            full(&huge, true),
            Found::Damage {
                cause: Cause::TooLarge { .. },
                ..
            }
        ));
        assert!(matches!(
            full(&[7, 7, 0], true),
            Found::Damage {
                from: 0,
                resume: 2,
                ..
            }
        ));
        assert!(matches!(full(&[0], true), Found::End));
        assert!(matches!(full(&[], true), Found::End));
    }
}
