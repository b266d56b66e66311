//! Times on the command line: the instants `cat --since` and `--until` take, and the event
//! times `pack --time-field` finds in JSON records. All are nanoseconds since the Unix epoch,
//! UTC (spec 8.8).

use std::fmt;

use chrono::{DateTime, Duration, Local, LocalResult, NaiveDate, NaiveDateTime, TimeZone, Utc};
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};

/// What `--since` and `--until` take, for the help and for errors.
pub const WHEN_FORMS: &str = "an RFC 3339 time (2025-12-01T10:00:00Z, or with an offset), a local \
    date and time (2025-12-01 10:00:00, 2025-12-01), epoch seconds (1764583200, @1764583200.5), \
    now, today, yesterday, tomorrow, or a time relative to now (-1h, -30min, +2d, \"1 hour ago\")";

/// The window of `--since` and `--until`, if either is given; refused (a usage mistake) when
/// no time is in it.
pub fn window(
    since: Option<i64>,
    until: Option<i64>,
) -> Result<Option<cobsfile::Window>, crate::Failure> {
    if since.is_none() && until.is_none() {
        return Ok(None);
    }
    let window = cobsfile::Window::new(since, until);
    if window.is_empty() {
        return Err(crate::Failure::usage(
            "--since is after --until: no time is in the window",
        ));
    }
    Ok(Some(window))
}

/// `--since`/`--until`: an instant as [`parse_when_at`] reads it, relative to now.
pub fn parse_when(arg: &str) -> Result<i64, String> {
    parse_when_at(arg, Local::now())
}

/// An instant in one of the forms journalctl takes (and RFC 3339), in nanoseconds since the
/// epoch: times without an offset, and days, are in the local time zone.
pub fn parse_when_at(arg: &str, now: DateTime<Local>) -> Result<i64, String> {
    let bad = || format!("expected {WHEN_FORMS}; got {arg:?}");
    let text = arg.trim();
    let instant = match text {
        "now" => Some(now.with_timezone(&Utc)),
        "today" => local_midnight(now.date_naive()),
        "yesterday" => now.date_naive().pred_opt().and_then(local_midnight),
        "tomorrow" => now.date_naive().succ_opt().and_then(local_midnight),
        _ => None,
    };
    if let Some(instant) = instant {
        return nanos(instant).ok_or_else(bad);
    }
    if let Some(offset) = relative(text) {
        let offset = offset.ok_or_else(bad)?;
        return nanos(now.with_timezone(&Utc))
            .and_then(|now| now.checked_add(offset))
            .ok_or_else(|| format!("{arg:?} is outside the years 1677 to 2262"));
    }
    if let Some(seconds) = text
        .strip_prefix('@')
        .or(Some(text))
        .and_then(epoch_seconds)
    {
        return seconds.ok_or_else(|| format!("{arg:?} is outside the years 1677 to 2262"));
    }
    if let Ok(instant) = DateTime::parse_from_rfc3339(&text.replacen(' ', "T", 1)) {
        return nanos(instant.with_timezone(&Utc))
            .ok_or_else(|| format!("{arg:?} is outside the years 1677 to 2262"));
    }
    for format in [
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(local) = NaiveDateTime::parse_from_str(text, format) {
            let instant = match Local.from_local_datetime(&local) {
                LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => t,
                LocalResult::None => {
                    return Err(format!("{arg:?} does not exist here (a clock change)"))
                }
            };
            return nanos(instant.with_timezone(&Utc)).ok_or_else(bad);
        }
    }
    if let Ok(day) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        return local_midnight(day).and_then(nanos).ok_or_else(bad);
    }
    Err(bad())
}

fn nanos(instant: DateTime<Utc>) -> Option<i64> {
    instant.timestamp_nanos_opt()
}

/// The start of `day` in the local time zone (the first instant of it, where a clock change
/// skips midnight).
fn local_midnight(day: NaiveDate) -> Option<DateTime<Utc>> {
    let midnight = day.and_hms_opt(0, 0, 0)?;
    match Local.from_local_datetime(&midnight) {
        LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => Some(t.with_timezone(&Utc)),
        LocalResult::None => (1..=4)
            .find_map(|h| {
                Local
                    .from_local_datetime(&(midnight + Duration::hours(h)))
                    .earliest()
            })
            .map(|t| t.with_timezone(&Utc)),
    }
}

/// A time relative to now, in nanoseconds: `-1h`, `+30min`, `-2 days`, `1 hour ago`. `None`
/// if `text` is not in that form; `Some(None)` if it is but overflows.
fn relative(text: &str) -> Option<Option<i64>> {
    let (sign, rest) = match text.strip_suffix("ago") {
        Some(rest) => (-1, rest.trim_end()),
        None => match text.as_bytes().first()? {
            b'-' => (-1, &text[1..]),
            b'+' => (1, &text[1..]),
            _ => return None,
        },
    };
    Some(span(rest)?.map(|n| n * sign))
}

/// A span of time, digits and a unit (`90s`, `30min`, `2 days`, `1w`), in nanoseconds:
/// `None` if `text` is not in that form; `Some(None)` if it is but overflows.
fn span(text: &str) -> Option<Option<i64>> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (digits, unit) = text.split_at(split);
    let n: i64 = digits.parse().ok()?;
    let unit = match unit.trim() {
        "ns" | "nsec" => 1,
        "us" | "usec" => 1_000,
        "ms" | "msec" => 1_000_000,
        "s" | "sec" | "secs" | "second" | "seconds" => 1_000_000_000,
        "m" | "min" | "mins" | "minute" | "minutes" => 60_000_000_000,
        "h" | "hr" | "hour" | "hours" => 3_600_000_000_000,
        "d" | "day" | "days" => 86_400_000_000_000,
        "w" | "week" | "weeks" => 604_800_000_000_000,
        _ => return None,
    };
    Some(n.checked_mul(unit))
}

/// A duration for options such as `--segment-age` and `--retain-age`: digits and a unit, as
/// journalctl and systemd take them (`500ms`, `90s`, `30min`, `12h`, `7d`, `2w`); more than
/// zero.
pub fn parse_duration(arg: &str) -> Result<std::time::Duration, String> {
    match span(arg) {
        Some(Some(ns)) if ns > 0 => Ok(std::time::Duration::from_nanos(ns as u64)),
        Some(Some(_)) => Err(format!("{arg:?} is no time at all: give more than zero")),
        Some(None) => Err(format!("{arg} is too long")),
        None => Err(format!(
            "expected a duration, digits and a unit (ms, s, min, h, d, w), got {arg:?}"
        )),
    }
}

/// Epoch seconds, with a fraction of up to 9 digits: `Some(None)` if out of range.
fn epoch_seconds(text: &str) -> Option<Option<i64>> {
    let (negative, text) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    if whole.is_empty()
        || !whole.bytes().all(|b| b.is_ascii_digit())
        || fraction.len() > 9
        || !fraction.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let whole: i64 = match whole.parse() {
        Ok(n) => n,
        Err(_) => return Some(None),
    };
    let fraction: i64 = format!("{fraction:0<9}").parse().unwrap_or(0);
    let nanos = whole
        .checked_mul(1_000_000_000)
        .and_then(|n| n.checked_add(fraction));
    Some(nanos.map(|n| if negative { -n } else { n }))
}

/// How `pack --time-field` reads a number: seconds, milliseconds, microseconds or
/// nanoseconds since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TimeUnit {
    S,
    Ms,
    Us,
    Ns,
}

impl TimeUnit {
    fn nanos(self) -> i64 {
        match self {
            TimeUnit::S => 1_000_000_000,
            TimeUnit::Ms => 1_000_000,
            TimeUnit::Us => 1_000,
            TimeUnit::Ns => 1,
        }
    }
}

/// `pack --time-field NAME`: the event time of a JSON record, from its top-level field NAME:
/// an RFC 3339 string, or a number of `unit`s since the epoch.
#[derive(Debug, Clone)]
pub struct TimeField {
    pub name: String,
    pub unit: TimeUnit,
}

impl TimeField {
    /// The time of the JSON object `record`, or what is wrong with it.
    pub fn time_of(&self, record: &[u8]) -> Result<i64, String> {
        let mut de = serde_json::Deserializer::from_slice(record);
        let found = FindField(&self.name)
            .deserialize(&mut de)
            .map_err(|e| format!("not a JSON object with a field {:?}: {e}", self.name))?;
        match found {
            None => Err(format!("no field {:?}", self.name)),
            Some(Found::Text(text)) => DateTime::parse_from_rfc3339(&text)
                .ok()
                .and_then(|t| t.with_timezone(&Utc).timestamp_nanos_opt())
                .ok_or_else(|| {
                    format!(
                        "field {:?}: {text:?} is not an RFC 3339 time between the years 1677 \
                         and 2262 (such as 2025-12-01T10:00:00Z)",
                        self.name
                    )
                }),
            Some(Found::Int(n)) => n.checked_mul(self.unit.nanos()).ok_or_else(|| {
                format!(
                    "field {:?}: {n} is outside the years 1677 to 2262",
                    self.name
                )
            }),
            Some(Found::Float(x)) => {
                let nanos = (x * self.unit.nanos() as f64).round();
                // Within i64 (the bound is exact in f64); NaN fails both.
                if (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&nanos) {
                    Ok(nanos as i64)
                } else {
                    Err(format!(
                        "field {:?}: {x} is outside the years 1677 to 2262",
                        self.name
                    ))
                }
            }
            Some(Found::Other) => Err(format!(
                "field {:?} is neither an RFC 3339 string nor a number",
                self.name
            )),
        }
    }
}

/// The value of the field looked for.
enum Found {
    Text(String),
    Int(i64),
    Float(f64),
    Other,
}

/// Finds one top-level field of a JSON object, skipping the others without building them.
struct FindField<'a>(&'a str);

impl<'de> DeserializeSeed<'de> for FindField<'_> {
    type Value = Option<Found>;

    fn deserialize<D: de::Deserializer<'de>>(self, de: D) -> Result<Self::Value, D::Error> {
        de.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for FindField<'_> {
    type Value = Option<Found>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if key == self.0 && found.is_none() {
                found = Some(map.next_value::<FieldValue>()?.0);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

/// A field's value, kept only if it can be a time.
struct FieldValue(Found);

impl<'de> de::Deserialize<'de> for FieldValue {
    fn deserialize<D: de::Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = FieldValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a time")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<FieldValue, E> {
                Ok(FieldValue(Found::Text(v.to_owned())))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<FieldValue, E> {
                Ok(FieldValue(Found::Int(v)))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<FieldValue, E> {
                Ok(FieldValue(
                    i64::try_from(v).map_or(Found::Float(v as f64), Found::Int),
                ))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<FieldValue, E> {
                Ok(FieldValue(Found::Float(v)))
            }
            fn visit_unit<E: de::Error>(self) -> Result<FieldValue, E> {
                Ok(FieldValue(Found::Other))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<FieldValue, E> {
                Ok(FieldValue(Found::Other))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<FieldValue, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(FieldValue(Found::Other))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<FieldValue, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(FieldValue(Found::Other))
            }
        }
        de.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Local> {
        DateTime::parse_from_rfc3339(text)
            .unwrap()
            .with_timezone(&Local)
    }

    #[test]
    fn instants() {
        let now = at("2025-12-01T10:30:00Z");
        let t = |arg| parse_when_at(arg, now);
        let ten_thirty = 1_764_585_000_000_000_000;
        assert_eq!(t("now"), Ok(ten_thirty));
        assert_eq!(t("2025-12-01T10:30:00Z"), Ok(ten_thirty));
        assert_eq!(t("2025-12-01 11:30:00+01:00"), Ok(ten_thirty));
        assert_eq!(t("2025-12-01T10:30:00.000000001Z"), Ok(ten_thirty + 1));
        assert_eq!(t("1764585000"), Ok(ten_thirty));
        assert_eq!(t("@1764585000.25"), Ok(ten_thirty + 250_000_000));
        assert_eq!(t("-1h"), Ok(ten_thirty - 3_600_000_000_000));
        assert_eq!(t("+30min"), Ok(ten_thirty + 1_800_000_000_000));
        assert_eq!(t("1 hour ago"), Ok(ten_thirty - 3_600_000_000_000));
        assert_eq!(t("-2 days"), Ok(ten_thirty - 2 * 86_400_000_000_000));
        assert_eq!(t("-1"), Ok(-1_000_000_000));
        let today = t("today").unwrap();
        assert_eq!(t("yesterday"), Ok(today - 86_400_000_000_000));
        assert_eq!(t("tomorrow"), Ok(today + 86_400_000_000_000));
        assert!(today <= ten_thirty + 14 * 3_600_000_000_000);
        for bad in [
            "",
            "soon",
            "1h",
            "-1 fortnight",
            "2025-13-01",
            "-99999999999999d",
            "@",
        ] {
            let e = t(bad).unwrap_err();
            assert!(
                e.contains("expected") || e.contains("outside"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn fields() {
        let field = |unit| TimeField {
            name: "ts".into(),
            unit,
        };
        let s = field(TimeUnit::S);
        assert_eq!(
            s.time_of(br#"{"a":[1,{"ts":0}],"ts":"1970-01-01T00:00:01Z"}"#),
            Ok(1_000_000_000)
        );
        assert_eq!(s.time_of(br#"{"ts":1.5}"#), Ok(1_500_000_000));
        assert_eq!(s.time_of(br#"{"ts":-2}"#), Ok(-2_000_000_000));
        assert_eq!(
            field(TimeUnit::Ms).time_of(br#"{"ts":1500}"#),
            Ok(1_500_000_000)
        );
        assert_eq!(
            field(TimeUnit::Ns).time_of(br#"{"ts":9223372036854775807}"#),
            Ok(i64::MAX)
        );
        for bad in [
            &br#"{"t":1}"#[..],
            br#"{"ts":null}"#,
            br#"{"ts":"yesterday"}"#,
            b"[1]",
            b"{",
            br#"{"ts":1e300}"#,
        ] {
            assert!(s.time_of(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
        assert!(s.time_of(br#"{"ts":9223372037}"#).is_err());
    }
}
