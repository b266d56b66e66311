//! Event times of records (spec 8.8 and 9.9): the payload of a time block, which gives the
//! times of the records of the data block after it, and the windows readers read by.
//!
//! A time is a signed number of nanoseconds since the Unix epoch, UTC (an `i64`: the years
//! 1677 to 2262). Nothing here does I/O or keeps state.

use crate::varint;

/// The earliest and the latest time of a block's records, both included.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TimeSpan {
    /// The earliest time, in nanoseconds since the Unix epoch.
    pub min: i64,
    /// The latest time, in nanoseconds since the Unix epoch; never before `min`.
    pub max: i64,
}

impl TimeSpan {
    /// The span of `times`: `None` for no times, or for times further apart than `i64::MAX`
    /// nanoseconds (some 292 years), which one time block cannot describe.
    pub fn of(times: &[i64]) -> Option<TimeSpan> {
        let (&first, rest) = times.split_first()?;
        let (mut min, mut max) = (first, first);
        for &t in rest {
            min = min.min(t);
            max = max.max(t);
        }
        max.checked_sub(min)?;
        Some(TimeSpan { min, max })
    }

    /// Whether `t` lies in this span.
    pub fn contains(&self, t: i64) -> bool {
        self.min <= t && t <= self.max
    }
}

/// The times a reader returns records of (spec 9.9): `since ..= until`, both included, either
/// bound absent for none on that side. The default window has neither bound: every record
/// with a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Window {
    /// The earliest time returned, in nanoseconds since the Unix epoch.
    pub since: Option<i64>,
    /// The latest time returned, in nanoseconds since the Unix epoch.
    pub until: Option<i64>,
}

impl Window {
    /// The window `since ..= until`.
    pub fn new(since: Option<i64>, until: Option<i64>) -> Self {
        Window { since, until }
    }

    /// Whether a record of time `t` is in the window.
    #[inline]
    pub fn contains(&self, t: i64) -> bool {
        self.since.is_none_or(|since| since <= t) && self.until.is_none_or(|until| t <= until)
    }

    /// Whether a block whose records' times lie in `span` may hold a record of the window.
    pub fn meets(&self, span: TimeSpan) -> bool {
        self.since.is_none_or(|since| since <= span.max)
            && self.until.is_none_or(|until| span.min <= until)
    }

    /// Whether no time is in the window (`since` after `until`).
    pub fn is_empty(&self) -> bool {
        matches!((self.since, self.until), (Some(since), Some(until)) if since > until)
    }
}

/// The most bytes a time block for `n` records takes after its opening sync byte, up to and
/// including its closing one (spec 8.8): a payload of three varints and `n` steps, each at
/// most 10 bytes, in a body of at most the payload and the envelope (a compressed one may
/// be no larger), COBS-encoded, behind a type field of one byte and a length of at most 10.
/// So the time block before a data block of `n` records opens within this many bytes of it.
pub(crate) fn frame_bound(n: u64) -> u64 {
    let body = n.saturating_add(3).saturating_mul(varint::MAX_LEN as u64) + 5;
    (1 + varint::MAX_LEN as u64 + 1).saturating_add(body + body / 254 + 1)
}

/// The type field of a time block: type 8 as a zig-zag varint.
pub(crate) const TYPE_FIELD: u8 = 16;

/// Appends the payload of a time block for records of `times` (spec 8.8) to `out`; `span`
/// is [`TimeSpan::of`] the same times, which the caller has checked exists.
pub(crate) fn encode_payload(times: &[i64], span: TimeSpan, out: &mut Vec<u8>) {
    let mut field = [0; varint::MAX_LEN];
    let mut put = |value: i64, out: &mut Vec<u8>| {
        let len = varint::encode(value, &mut field);
        out.extend_from_slice(&field[..len]);
    };
    put(times.len() as i64, out);
    put(span.min, out);
    // Within `i64` by `TimeSpan::of`; so is every step, two times of the span apart at most.
    put(span.max - span.min, out);
    let mut previous = span.min;
    for &t in times {
        put(t - previous, out);
        previous = t;
    }
}

/// The most records a time block may describe for a reader whose maximum body size is
/// `max_body`: their times, 8 bytes each once decoded, take no more than a body (spec 10).
pub(crate) fn max_records(max_body: usize) -> u64 {
    max_body as u64 / 8
}

/// The most records a writer whose maximum body size is `max_body` puts in a data block with
/// times: so many that the time block's body, at most 10 bytes a step and 35 more, stays within
/// `max_body` (and so within [`max_records`] of a reader with the same limit).
pub(crate) fn max_timed_records(max_body: usize) -> usize {
    (max_body.saturating_sub(35) / varint::MAX_LEN).max(1)
}

/// The metadata key (spec 8.8) under which a writer may name the field of its records that
/// their event times were taken from (`pack --time-field` does), so that tools show the times
/// under that name.
pub const TIME_FIELD_KEY: &str = "cobsfile.time_field";

/// What is wrong with a time block's payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bad {
    /// It breaks a rule of spec 8.8: damage.
    Malformed(&'static str),
    /// It describes more than [`max_records`] records: a limit of this reader, not damage.
    TooManyRecords,
}

/// Checks the payload of a time block (spec 8.8) and puts the times of its records into
/// `times` (cleared first), refusing more than `max_records` of them before allocating for
/// any. Returns their span, or what is wrong with the payload.
pub(crate) fn parse_payload(
    payload: &[u8],
    max_records: u64,
    times: &mut Vec<i64>,
) -> Result<TimeSpan, Bad> {
    use Bad::Malformed;
    times.clear();
    let mut fields = varint::Fields::new(payload);
    let count = fields.next("invalid count varint").map_err(Malformed)?;
    if count < 1 {
        return Err(Malformed("time block for no records"));
    }
    // Each step takes at least one byte: this bounds the loop.
    let count = count as u64;
    if count > payload.len() as u64 {
        return Err(Malformed("count larger than the block"));
    }
    // And this the allocation, before it is made.
    if count > max_records {
        return Err(Bad::TooManyRecords);
    }
    let min = fields.next("invalid min varint").map_err(Malformed)?;
    let span = fields.next("invalid span varint").map_err(Malformed)?;
    if span < 0 {
        return Err(Malformed("negative span"));
    }
    let max = min
        .checked_add(span)
        .ok_or(Malformed("latest time past 2^63 - 1"))?;
    times.reserve(count as usize);
    let (mut hit_min, mut hit_max) = (false, false);
    let mut previous = min;
    for _ in 0..count {
        let step = fields.next("invalid step varint").map_err(Malformed)?;
        let t = previous
            .checked_add(step)
            .filter(|t| (min..=max).contains(t))
            .ok_or(Malformed("time outside the block's span"))?;
        hit_min |= t == min;
        hit_max |= t == max;
        times.push(t);
        previous = t;
    }
    if !fields.is_done() {
        return Err(Malformed("bytes after the last step"));
    }
    if !(hit_min && hit_max) {
        return Err(Malformed("span not that of the times"));
    }
    Ok(TimeSpan { min, max })
}

/// Appends the payload of a time index (spec 8.9) for time blocks at index positions
/// `entries` (increasing) with their spans, to `out`.
pub(crate) fn encode_index_payload(entries: &[(u64, TimeSpan)], out: &mut Vec<u8>) {
    varint::write(entries.len() as i64, out);
    let mut previous = 0;
    for &(position, span) in entries {
        varint::write((position - previous) as i64, out);
        varint::write(span.min, out);
        varint::write(span.max - span.min, out);
        previous = position;
    }
}

/// Walks a time index payload (spec 8.9), calling `each` with every entry's index position
/// and span, and checks it. Returns the number of entries. `each` may stop the walk by
/// returning `None` (reported as malformed).
pub(crate) fn parse_index_payload(
    payload: &[u8],
    mut each: impl FnMut(u64, TimeSpan) -> Option<()>,
) -> Result<u64, &'static str> {
    let mut fields = varint::Fields::new(payload);
    let count =
        u64::try_from(fields.next("invalid count varint")?).map_err(|_| "negative count")?;
    // Each entry takes at least 3 bytes: this bounds the loop by the payload size.
    if count > payload.len() as u64 / 3 {
        return Err("count larger than the block");
    }
    let mut position = 0u64;
    for i in 0..count {
        let gap = u64::try_from(fields.next("invalid gap varint")?).map_err(|_| "negative gap")?;
        if i > 0 && gap == 0 {
            return Err("entries not in increasing order");
        }
        position = position.checked_add(gap).ok_or("position out of range")?;
        let min = fields.next("invalid min varint")?;
        let span = fields.next("invalid span varint")?;
        let max = u64::try_from(span)
            .ok()
            .and_then(|_| min.checked_add(span))
            .ok_or("span negative or past 2^63 - 1")?;
        each(position, TimeSpan { min, max }).ok_or("entry not usable")?;
    }
    if !fields.is_done() {
        return Err("bytes after the last entry");
    }
    Ok(count)
}

/// Pairs time blocks with the data blocks they describe (spec 8.8), as a decoder settles
/// blocks in file order: the times of the data block settled last, if a time block described
/// it, and a count of the time blocks that described nothing.
#[derive(Debug, Default)]
pub(crate) struct Pairing {
    /// The times the last time block gives, while the block after it is not settled.
    pending: Vec<i64>,
    /// Where the block that time block describes must open (its closing sync byte).
    pending_at: Option<u64>,
    /// The span of the pending times.
    pending_span: Option<TimeSpan>,
    /// The times of the records of the data block settled last, when `timed`.
    times: Vec<i64>,
    timed: bool,
    /// Time blocks followed by a block they do not describe, or by damage.
    pub unpaired: u64,
}

impl Pairing {
    /// A time block closing at `end`, giving `times`, was settled.
    pub fn time_block(&mut self, end: u64, times: &[i64]) {
        self.other();
        self.pending.clear();
        self.pending.extend_from_slice(times);
        self.pending_at = Some(end);
        self.pending_span = TimeSpan::of(times);
    }

    /// The span of the times of the data block that opens at `offset`, if the time block
    /// settled last describes the block there (once it is settled, with as many records).
    pub fn describes(&self, offset: u64) -> Option<TimeSpan> {
        self.pending_span
            .filter(|_| self.pending_at == Some(offset))
    }

    /// The data block at `offset` was passed over undecoded (a window read): whether the time
    /// block settled last describes it. Its record count is not known: the time block's is
    /// taken for it.
    pub fn passed(&mut self, offset: u64) -> bool {
        self.timed = false;
        let described = self.pending_at == Some(offset);
        match described {
            true => self.pending_at = None,
            false => self.other(),
        }
        described
    }

    /// A data block at `offset` holding `items` records was settled: whether a time block
    /// describes it.
    pub fn data_block(&mut self, offset: u64, items: u64) -> bool {
        self.timed = self.pending_at == Some(offset) && self.pending.len() as u64 == items;
        if self.timed {
            std::mem::swap(&mut self.times, &mut self.pending);
            self.pending_at = None;
        } else {
            self.other();
        }
        self.timed
    }

    /// A block of another type, or damage, was settled: a time block before it describes
    /// nothing.
    pub fn other(&mut self) {
        self.timed = false;
        if self.pending_at.take().is_some() {
            self.unpaired += 1;
        }
    }

    /// Gives the data block settled last the times a time block closing at its offset gives
    /// (found by a range read that began at that data block), if they are as many as its
    /// records.
    pub fn found_before(&mut self, times: &[i64], items: u64) {
        if times.len() as u64 == items {
            self.times.clear();
            self.times.extend_from_slice(times);
            self.timed = true;
        }
    }

    /// Reading goes back to the sync byte at `at`: a time block closing there still
    /// describes the block that opens there; anything else is forgotten.
    pub fn rewind(&mut self, at: u64) {
        self.timed = false;
        if self.pending_at != Some(at) {
            self.pending_at = None;
        }
    }

    /// Forgets everything, counts included (a decoder made the decoder of another range).
    pub fn reset(&mut self) {
        self.timed = false;
        self.pending_at = None;
        self.unpaired = 0;
    }

    /// The times of the records of the data block settled last, if a time block described
    /// it.
    pub fn times(&self) -> Option<&[i64]> {
        self.timed.then_some(&self.times[..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn round_trip(times: &[i64]) -> Vec<i64> {
        let span = TimeSpan::of(times).expect("a span");
        let mut payload = Vec::new();
        encode_payload(times, span, &mut payload);
        let mut back = Vec::new();
        assert_eq!(parse_payload(&payload, u64::MAX, &mut back), Ok(span));
        back
    }

    #[test]
    fn the_count_is_limited_before_anything_is_allocated() {
        let times = vec![5; 100];
        let mut payload = Vec::new();
        encode_payload(&times, TimeSpan::of(&times).unwrap(), &mut payload);
        let mut back = Vec::new();
        assert_eq!(
            parse_payload(&payload, 99, &mut back),
            Err(Bad::TooManyRecords)
        );
        assert_eq!(back.capacity(), 0);
        assert!(parse_payload(&payload, 100, &mut back).is_ok());
        // A writer's time block stays within a reader's limit when both have the same body size.
        for max_body in [1, 64, 4096, 1 << 20, 64 << 20] {
            let n = max_timed_records(max_body);
            assert!(n == 1 || (n as u64) <= max_records(max_body), "{max_body}");
            assert!(
                n == 1 || (n + 3) * varint::MAX_LEN + 5 <= max_body,
                "{max_body}"
            );
        }
    }

    #[test]
    fn known_payload() {
        let mut payload = Vec::new();
        let times = [10, 7, 12];
        encode_payload(&times, TimeSpan::of(&times).unwrap(), &mut payload);
        // count 3, min 7, span 5, steps 3, -3, 5
        assert_eq!(payload, [6, 14, 10, 6, 5, 10]);
    }

    #[test]
    fn extremes() {
        assert_eq!(round_trip(&[i64::MIN, -1]), [i64::MIN, -1]);
        assert_eq!(
            round_trip(&[i64::MAX, 0, i64::MAX]),
            [i64::MAX, 0, i64::MAX]
        );
        assert_eq!(TimeSpan::of(&[i64::MIN, 0]), None);
        assert_eq!(TimeSpan::of(&[]), None);
    }

    #[test]
    fn rejects_bad_payloads() {
        let mut times = Vec::new();
        let bad: [(&[u8], &str); 9] = [
            (&[0, 0, 0], "time block for no records"),
            (&[10, 0, 0, 0], "count larger than the block"),
            (&[6, 0, 0, 0], "invalid step varint"),
            (&[2, 0, 1, 0], "negative span"),
            (&[2, 0, 4, 6], "time outside the block's span"),
            (&[4, 0, 4, 0, 1], "time outside the block's span"),
            (&[2, 0, 4, 0], "span not that of the times"),
            (&[2, 0, 0, 0, 0], "bytes after the last step"),
            (
                &[
                    2, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 2, 0,
                ],
                "latest time past 2^63 - 1",
            ),
        ];
        for (payload, problem) in bad {
            assert_eq!(
                parse_payload(payload, u64::MAX, &mut times),
                Err(Bad::Malformed(problem)),
                "{payload:?}"
            );
        }
    }

    #[test]
    fn windows() {
        let span = TimeSpan { min: 10, max: 20 };
        assert!(Window::default().meets(span));
        assert!(Window::new(Some(20), None).meets(span));
        assert!(!Window::new(Some(21), None).meets(span));
        assert!(Window::new(None, Some(10)).meets(span));
        assert!(!Window::new(None, Some(9)).meets(span));
        assert!(Window::new(Some(11), Some(12)).meets(span));
        assert!(Window::new(Some(2), Some(1)).is_empty());
        assert!(!Window::new(Some(2), Some(1)).contains(1));
    }

    proptest! {
        #[test]
        fn times_round_trip(times in proptest::collection::vec(any::<i64>(), 1..50)) {
            if TimeSpan::of(&times).is_some() {
                prop_assert_eq!(round_trip(&times), times);
            }
        }

        #[test]
        fn near_times_round_trip(base in any::<i64>(), offsets in proptest::collection::vec(-1_000_000i64..1_000_000, 1..50)) {
            let times: Vec<i64> = offsets.iter().map(|o| base.saturating_add(*o)).collect();
            prop_assert_eq!(round_trip(&times), times);
        }

        #[test]
        fn any_payload_parses_or_is_refused(payload in proptest::collection::vec(any::<u8>(), 0..40)) {
            let mut times = Vec::new();
            if let Ok(span) = parse_payload(&payload, u64::MAX, &mut times) {
                prop_assert!(!times.is_empty());
                prop_assert!(times.iter().all(|t| span.contains(*t)));
                prop_assert_eq!(TimeSpan::of(&times), Some(span));
            }
        }
    }
}
