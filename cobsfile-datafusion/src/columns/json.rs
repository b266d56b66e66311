//! JSON records made into flat Arrow columns in one pass over each record: the values of
//! projected keys are taken as they are met, every other value is checked and skipped
//! without being copied (the Arrow project's JSON decoder copies every string of a record
//! into its tape, projected or not, before it makes a column).
//!
//! It serves tables whose projected columns are all nullable strings, 64-bit integers,
//! doubles or booleans: what inference makes of JSON's strings, numbers and booleans. A
//! record is taken only where the Arrow project's decoder would make the same row of it
//! (`JsonRows` in the scan hands every other record to that decoder, which then makes the
//! row or the error it always made): one object in valid UTF-8, in JSON's grammar (RFC
//! 8259) except that a number is any run of the bytes numbers are made of, as that decoder
//! reads them; each projected key at most once, with a value of its column's kind or
//! `null`; a missing key is a null. Escapes are decoded as that decoder decodes them; a
//! surrogate escape not in a pair is left to it. Numbers are parsed from their text by the
//! function that decoder uses (`lexical_core`); an integer column takes only the text of
//! an integer within 64 bits (that decoder would cast other numbers). The tests compare the
//! two on random records, sound and not.

use std::collections::HashMap;

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::datatypes::{DataType, Schema as ArrowSchema};
use datafusion::common::Result;

use super::{Column, Kind};

/// Projected columns past which a key is looked up by hash rather than compared with each.
const LINEAR: usize = 8;

/// Arrays and objects a skipped value may nest (deeper ones go to the Arrow decoder).
const MAX_NESTING: u32 = 64;

/// Rows of JSON records, made into the scan's columns.
#[derive(Debug)]
pub(crate) struct JsonColumns {
    /// One per projected column, in the scan's order.
    columns: Vec<Column>,
    /// The columns' names (the records' keys), in the same order.
    names: Vec<Box<[u8]>>,
    /// Names to columns, when there are more than [`LINEAR`].
    by_name: Option<HashMap<Box<[u8]>, usize>>,
    /// Which columns the record at hand has given a value.
    seen: Vec<bool>,
    /// Rows kept.
    rows: usize,
    /// A string with escapes, decoded.
    unescaped: Vec<u8>,
}

/// Why a record is not taken: it goes to the Arrow decoder.
struct NotTaken;

type Taken<T = ()> = std::result::Result<T, NotTaken>;

/// A record being read: its bytes, the place reached, and the bits of every string byte
/// met (a byte over 0x7F means the record's UTF-8 must be checked).
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
    high: u8,
}

impl<'a> Cursor<'a> {
    #[inline(always)]
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    #[inline(always)]
    fn space(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    /// Past `byte`, after white space.
    #[inline(always)]
    fn expect(&mut self, byte: u8) -> Taken {
        self.space();
        if self.peek() != Some(byte) {
            return Err(NotTaken);
        }
        self.at += 1;
        Ok(())
    }

    /// A string's bytes up to its closing quote, the opening one passed: `Ok(Some(raw))`
    /// if it holds no escape, `Ok(None)` if it does (the cursor is then at the first).
    #[inline(always)]
    fn plain_string(&mut self) -> Taken<Option<&'a [u8]>> {
        let start = self.at;
        let rest = &self.bytes[start..];
        // Eight bytes at a time to the first quote or backslash (the lowest byte that
        // `zero_bytes` marks is exact); bytes past the string's end are noted in `high` as
        // well, which at worst asks for a check of the record's UTF-8 it did not need.
        let mut i = 0;
        let mut high = 0;
        while let Some(chunk) = rest.get(i..i + 8) {
            let word = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
            high |= word;
            let stops =
                zero_bytes(word ^ 0x2222_2222_2222_2222) | zero_bytes(word ^ 0x5C5C_5C5C_5C5C_5C5C);
            if stops != 0 {
                i += (stops.trailing_zeros() / 8) as usize;
                break;
            }
            i += 8;
        }
        if high & 0x8080_8080_8080_8080 != 0 {
            self.high |= 0x80;
        }
        for (j, &b) in rest[i..].iter().enumerate() {
            self.high |= b;
            match b {
                b'"' => {
                    self.at = start + i + j + 1;
                    return Ok(Some(&rest[..i + j]));
                }
                b'\\' => {
                    self.at = start + i + j;
                    return Ok(None);
                }
                _ => {}
            }
        }
        Err(NotTaken)
    }

    /// The rest of a string from its first escape, decoded onto `out` (which holds the
    /// bytes before it); the closing quote passed.
    fn escaped_string(&mut self, out: &mut Vec<u8>) -> Taken {
        loop {
            match self.peek().ok_or(NotTaken)? {
                b'"' => {
                    self.at += 1;
                    return Ok(());
                }
                b'\\' => {
                    let byte = match self.bytes.get(self.at + 1).ok_or(NotTaken)? {
                        b'"' => b'"',
                        b'\\' => b'\\',
                        b'/' => b'/',
                        b'b' => 8,
                        b'f' => 12,
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'u' => {
                            let high = self.hex(self.at + 2)?;
                            let (c, len) = match high {
                                0xD800..=0xDBFF => {
                                    if self.bytes.get(self.at + 6..self.at + 8) != Some(b"\\u") {
                                        return Err(NotTaken);
                                    }
                                    let low = self.hex(self.at + 8)?;
                                    if !(0xDC00..=0xDFFF).contains(&low) {
                                        return Err(NotTaken);
                                    }
                                    let n = ((u32::from(high) - 0xD800) << 10)
                                        + (u32::from(low) - 0xDC00)
                                        + 0x1_0000;
                                    (char::from_u32(n).ok_or(NotTaken)?, 12)
                                }
                                0xDC00..=0xDFFF => return Err(NotTaken),
                                _ => (char::from_u32(u32::from(high)).ok_or(NotTaken)?, 6),
                            };
                            out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
                            self.at += len;
                            continue;
                        }
                        _ => return Err(NotTaken),
                    };
                    out.push(byte);
                    self.at += 2;
                }
                b => {
                    self.high |= b;
                    out.push(b);
                    self.at += 1;
                }
            }
        }
    }

    /// The four hex digits at `at`.
    fn hex(&self, at: usize) -> Taken<u16> {
        let digits = self.bytes.get(at..at + 4).ok_or(NotTaken)?;
        let mut n = 0u16;
        for &d in digits {
            n = n << 4 | char::from(d).to_digit(16).ok_or(NotTaken)? as u16;
        }
        Ok(n)
    }

    /// A string, the opening quote passed: its bytes, decoded into `scratch` if it has
    /// escapes.
    #[inline(always)]
    fn string<'s>(&'s mut self, scratch: &'s mut Vec<u8>) -> Taken<&'s [u8]> {
        let start = self.at;
        match self.plain_string()? {
            Some(raw) => Ok(raw),
            None => {
                scratch.clear();
                scratch.extend_from_slice(&self.bytes[start..self.at]);
                self.escaped_string(scratch)?;
                Ok(scratch)
            }
        }
    }

    /// A number's text: the run of bytes the Arrow decoder takes as one (its first byte a
    /// digit or `-`, checked by the caller).
    #[inline(always)]
    fn number(&mut self) -> &'a [u8] {
        let start = self.at;
        while let Some(b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E') = self.peek() {
            self.at += 1;
        }
        &self.bytes[start..self.at]
    }

    /// Past the literal `word` (its first byte seen).
    #[inline(always)]
    fn literal(&mut self, word: &[u8]) -> Taken {
        if self.bytes.get(self.at..self.at + word.len()) != Some(word) {
            return Err(NotTaken);
        }
        self.at += word.len();
        Ok(())
    }

    /// The items of an array (`close` `]`) or the members of an object (`close` `}`), its
    /// opening byte passed, to its closing byte: a member's key to `key`, then each value's
    /// first byte (after white space) to `value`, with what `key` made of its key.
    #[inline(always)]
    fn items<K>(
        &mut self,
        close: u8,
        scratch: &mut Vec<u8>,
        mut key: impl FnMut(&[u8]) -> K,
        mut value: impl FnMut(&mut Self, &mut Vec<u8>, Option<K>, u8) -> Taken,
    ) -> Taken {
        self.space();
        if self.peek() == Some(close) {
            self.at += 1;
            return Ok(());
        }
        loop {
            let found = match close {
                b'}' => {
                    self.expect(b'"')?;
                    let found = key(self.string(scratch)?);
                    self.expect(b':')?;
                    Some(found)
                }
                _ => None,
            };
            self.space();
            let first = self.peek().ok_or(NotTaken)?;
            value(self, scratch, found, first)?;
            self.space();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b) if b == close => {
                    self.at += 1;
                    return Ok(());
                }
                _ => return Err(NotTaken),
            }
        }
    }

    /// Past a value of any kind, at `first` (after white space), checked and not kept.
    fn skip(&mut self, first: u8, depth: u32, scratch: &mut Vec<u8>) -> Taken {
        match first {
            b'"' => {
                self.at += 1;
                self.string(scratch).map(|_| ())
            }
            b'-' | b'0'..=b'9' => {
                self.number();
                Ok(())
            }
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'[' | b'{' if depth < MAX_NESTING => {
                self.at += 1;
                let close = if first == b'{' { b'}' } else { b']' };
                self.items(
                    close,
                    scratch,
                    |_| (),
                    |cursor, scratch, _, first| cursor.skip(first, depth + 1, scratch),
                )
            }
            _ => Err(NotTaken),
        }
    }
}

/// The bytes of `word` that are zero, as their high bits: exact for the lowest one (a byte
/// above a zero byte may be marked too, by the borrow).
#[inline(always)]
fn zero_bytes(word: u64) -> u64 {
    word.wrapping_sub(0x0101_0101_0101_0101) & !word & 0x8080_8080_8080_8080
}

/// Whether the short byte strings `a` and `b` are equal, compared in line (a call to
/// `memcmp` for each key and name of the same length took 4 % of a JSON scan).
#[inline(always)]
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// The value at `first` of a projected key into its column (`seen`: whether the record gave
/// the key before).
#[inline(always)]
fn value(
    column: &mut Column,
    seen: &mut bool,
    first: u8,
    cursor: &mut Cursor<'_>,
    scratch: &mut Vec<u8>,
) -> Taken {
    if std::mem::replace(seen, true) {
        return Err(NotTaken); // a key given twice: the Arrow decoder keeps the last
    }
    match (&column.kind, first) {
        (_, b'n') => {
            cursor.literal(b"null")?;
            column.null();
        }
        (Kind::Utf8, b'"') => {
            cursor.at += 1;
            column.bytes(cursor.string(scratch)?);
        }
        (Kind::Boolean, b't') => {
            cursor.literal(b"true")?;
            column.long(1);
        }
        (Kind::Boolean, b'f') => {
            cursor.literal(b"false")?;
            column.long(0);
        }
        (Kind::Long, b'-' | b'0'..=b'9') => {
            let text = cursor.number();
            column.long(lexical_core::parse::<i64>(text).map_err(|_| NotTaken)?);
        }
        (Kind::Double, b'-' | b'0'..=b'9') => {
            let text = cursor.number();
            column.double(lexical_core::parse::<f64>(text).map_err(|_| NotTaken)?);
        }
        _ => return Err(NotTaken),
    }
    Ok(())
}

/// The column of key `key` among `names` (looked up in `by_name` if there is one), if it is
/// projected.
#[inline(always)]
fn index(
    names: &[Box<[u8]>],
    by_name: Option<&HashMap<Box<[u8]>, usize>>,
    key: &[u8],
) -> Option<usize> {
    match by_name {
        Some(map) => map.get(key).copied(),
        None => names.iter().position(|name| same(name, key)),
    }
}

impl JsonColumns {
    /// Columns for a scan whose columns are `projected`; `None` if some column is not of a
    /// kind made here.
    pub(crate) fn new(projected: &ArrowSchema) -> Option<Self> {
        let fields = projected.fields();
        if fields.is_empty() {
            return None;
        }
        let mut columns = Vec::with_capacity(fields.len());
        for (at, field) in fields.iter().enumerate() {
            if !field.is_nullable() {
                return None;
            }
            let kind = match field.data_type() {
                DataType::Utf8 => Kind::Utf8,
                DataType::Int64 => Kind::Long,
                DataType::Float64 => Kind::Double,
                DataType::Boolean => Kind::Boolean,
                _ => return None,
            };
            columns.push(Column::new(kind, field.data_type().clone(), at, true));
        }
        let names: Vec<Box<[u8]>> = fields.iter().map(|f| f.name().as_bytes().into()).collect();
        let by_name: HashMap<Box<[u8]>, usize> = names
            .iter()
            .enumerate()
            .map(|(at, name)| (name.clone(), at))
            .collect();
        if by_name.len() != names.len() {
            return None; // two columns of one name: which a key fills is the Arrow decoder's
        }
        let by_name = (names.len() > LINEAR).then_some(by_name);
        Some(JsonColumns {
            seen: vec![false; columns.len()],
            columns,
            names,
            by_name,
            rows: 0,
            unescaped: Vec::new(),
        })
    }

    /// Rows kept and not yet made a batch.
    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// Takes `record` as a row; false, taking nothing, if it is not one made here (see the
    /// module documentation).
    pub(crate) fn push(&mut self, record: &[u8]) -> bool {
        self.seen.fill(false);
        let mut cursor = Cursor {
            bytes: record,
            at: 0,
            high: 0,
        };
        let taken = self.take(&mut cursor).is_ok()
            // Bytes past 0x7F are in strings only (the grammar allows them nowhere else).
            && (cursor.high < 0x80 || std::str::from_utf8(record).is_ok());
        if !taken {
            let rows = self.rows;
            for column in &mut self.columns {
                column.truncate(rows);
            }
            return false;
        }
        for (column, seen) in self.columns.iter_mut().zip(&self.seen) {
            if !seen {
                column.null();
            }
        }
        self.rows += 1;
        true
    }

    /// The record's values into the columns (some may have been taken when it is not one
    /// made here: the caller takes them back).
    fn take(&mut self, cursor: &mut Cursor<'_>) -> Taken {
        let JsonColumns {
            columns,
            names,
            by_name,
            seen,
            unescaped,
            ..
        } = self;
        cursor.expect(b'{')?;
        cursor.items(
            b'}',
            unescaped,
            |key| index(names, by_name.as_ref(), key),
            |cursor, scratch, found, first| match found.flatten() {
                None => cursor.skip(first, 0, scratch),
                Some(at) => value(&mut columns[at], &mut seen[at], first, cursor, scratch),
            },
        )?;
        cursor.space();
        match cursor.at == cursor.bytes.len() {
            true => Ok(()),
            false => Err(NotTaken),
        }
    }

    /// The rows kept, as the scan's columns in order; none are kept after.
    pub(crate) fn finish(&mut self) -> Result<Vec<ArrayRef>> {
        self.rows = 0;
        self.columns.iter_mut().map(Column::finish).collect()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::RecordBatch;
    use datafusion::arrow::datatypes::Field;
    use datafusion::arrow::json::reader::ReaderBuilder;
    use proptest::prelude::*;

    use super::*;

    const NAMES: [&str; 5] = ["s", "n", "x", "flag", "é k"];
    const KINDS: [DataType; 4] = [
        DataType::Utf8,
        DataType::Int64,
        DataType::Float64,
        DataType::Boolean,
    ];

    /// A JSON string of `text`, with some characters escaped as `escape` says.
    fn quoted(text: &str, escape: u8) -> String {
        let mut out = String::from("\"");
        for c in text.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                c if escape % 3 == 1 && !c.is_ascii() => {
                    let mut units = [0u16; 2];
                    for unit in c.encode_utf16(&mut units) {
                        out.push_str(&format!("\\u{unit:04X}"));
                    }
                }
                'e' if escape % 3 == 2 => out.push_str("\\u0065"),
                '/' if escape % 2 == 1 => out.push_str("\\/"),
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }

    /// Values of every kind, as JSON text: sound ones first, then the odd ones a decoder
    /// may treat in its own way.
    fn value() -> impl Strategy<Value = String> {
        prop_oneof![
            ("[a-zé😀/\"\\\\\n\t ]{0,40}", any::<u8>()).prop_map(|(s, e)| quoted(&s, e)),
            any::<i64>().prop_map(|n| n.to_string()),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| format!("{f:?}")),
            (-1000i32..1000, -30i32..30).prop_map(|(m, e)| format!("{m}e{e}")),
            (-1000i32..1000, 0u32..999).prop_map(|(i, f)| format!("{i}.{f:03}")),
            any::<bool>().prop_map(|b| b.to_string()),
            Just("null".to_string()),
            prop_oneof![
                Just("123456789012345678901234567890".to_string()),
                Just("-0".to_string()),
                Just("0.0".to_string()),
                Just("1E400".to_string()),
                Just("01".to_string()),
                Just("1.".to_string()),
                Just("+1".to_string()),
                Just("[1, \"a\", {\"b\": null}]".to_string()),
                Just("{\"s\": 1, \"n\": [true]}".to_string()),
                Just("\"12\"".to_string()),
                Just("\"tab\there\"".to_string()),
                Just("\"\\ud800\"".to_string()),
                Just("\"\\udc00\"".to_string()),
                Just("\"\\ud800\\u0041\"".to_string()),
                Just("\"\\x41\"".to_string()),
                Just("\"\\u12\"".to_string()),
                Just("\"\\u00e9\\u00E9\\n\"".to_string()),
                Just("\"a\\\"".to_string()),
                Just("\"\\ud83d\\ude00\"".to_string()),
                Just("NaN".to_string()),
                Just("tru".to_string()),
            ],
        ]
    }

    /// A record: an object of members (keys of the table and others, some escaped or
    /// twice), white space, and now and then bytes that make it something else.
    fn record() -> impl Strategy<Value = Vec<u8>> {
        let key = prop_oneof![
            (0..NAMES.len(), any::<u8>()).prop_map(|(i, e)| quoted(NAMES[i], e)),
            Just("\"other\"".to_string()),
            Just("\"\"".to_string()),
        ];
        (
            prop::collection::vec((key, value()), 0..7),
            prop::sample::select(vec!["", " ", "\t", "\r\n "]),
            0u8..40,
        )
            .prop_map(|(members, space, odd)| {
                let body: Vec<String> = members
                    .iter()
                    .map(|(k, v)| format!("{k}{space}:{space}{v}"))
                    .collect();
                let mut text = format!("{space}{{{}}}{space}", body.join(","));
                match odd {
                    0 => text.push_str(" {}"),
                    1 => text = text.replacen('}', ",}", 1),
                    2 => text = text.replacen('{', "[", 1),
                    3 => text = "[]".into(),
                    4 => text = "null".into(),
                    _ => {}
                }
                let mut bytes = text.into_bytes();
                if odd == 5 {
                    bytes.truncate(bytes.len() / 2);
                }
                if odd == 6 && !bytes.is_empty() {
                    let at = bytes.len() / 2;
                    bytes.insert(at, 0xff);
                }
                bytes
            })
    }

    fn table() -> impl Strategy<Value = Arc<ArrowSchema>> {
        prop::sample::subsequence(NAMES.to_vec(), 1..=NAMES.len()).prop_flat_map(|names| {
            let n = names.len();
            prop::collection::vec(0..KINDS.len(), n).prop_map(move |kinds| {
                Arc::new(ArrowSchema::new(
                    names
                        .iter()
                        .zip(kinds)
                        .map(|(name, k)| Field::new(*name, KINDS[k].clone(), true))
                        .collect::<Vec<_>>(),
                ))
            })
        })
    }

    /// The Arrow project's decoder's rows of `records`, each fed alone; `None` if it refuses
    /// any.
    fn arrow_json(schema: &Arc<ArrowSchema>, records: &[&[u8]]) -> Option<RecordBatch> {
        let mut decoder = ReaderBuilder::new(schema.clone())
            .with_batch_size(1 << 20)
            .build_decoder()
            .unwrap();
        for record in records {
            let before = decoder.len();
            let n = decoder.decode(record).ok()?;
            if n < record.len() || decoder.len() != before + 1 || decoder.has_partial_record() {
                return None;
            }
        }
        decoder.flush().ok()?
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// The rows taken are the rows the Arrow project's decoder makes of the same
        /// records; a record not taken is one it refuses or makes otherwise, or one that
        /// is not plain (members twice, lenient commas, kinds it converts).
        #[test]
        fn rows_taken_are_arrow_jsons(
            schema in table(),
            records in prop::collection::vec(
                prop_oneof![
                    8 => record(),
                    1 => prop::collection::vec(any::<u8>(), 0..40),
                    1 => "[{}\\[\\]\":, 0-9a-z\\\\]{0,40}".prop_map(String::into_bytes),
                ],
                1..24,
            ),
        ) {
            let mut fast = JsonColumns::new(&schema).unwrap();
            let mut taken: Vec<&[u8]> = Vec::new();
            for record in &records {
                if fast.push(record) {
                    taken.push(record);
                }
            }
            prop_assert_eq!(fast.rows(), taken.len());
            let made = RecordBatch::try_new(schema.clone(), fast.finish().unwrap()).unwrap();
            let theirs = arrow_json(&schema, &taken);
            if taken.is_empty() {
                prop_assert!(theirs.is_none() || theirs.as_ref().unwrap().num_rows() == 0);
            } else {
                prop_assert_eq!(Some(made), theirs);
            }
            // Columns are empty again after a batch.
            prop_assert_eq!(fast.rows(), 0);
        }

        /// Plain records are taken: an object of distinct keys with values of their columns'
        /// kinds (or null), other keys of any value.
        #[test]
        fn plain_records_are_taken(
            schema in table(),
            rows in prop::collection::vec(
                prop::collection::vec((any::<bool>(), any::<u64>(), value()), NAMES.len()), 1..16),
        ) {
            let mut fast = JsonColumns::new(&schema).unwrap();
            for row in rows {
                let mut members = Vec::new();
                for (field, (present, seed, other)) in schema.fields().iter().zip(&row) {
                    if !present {
                        continue;
                    }
                    let v = match (field.data_type(), seed % 5) {
                        (_, 0) => "null".to_string(),
                        (DataType::Utf8, _) => quoted(&format!("v{seed}é"), (*seed % 7) as u8),
                        (DataType::Int64, _) => (*seed as i64).to_string(),
                        (DataType::Float64, _) => format!("{:?}", *seed as f64 / 7.0),
                        _ => (seed % 2 == 0).to_string(),
                    };
                    members.push(format!("{}:{v}", quoted(field.name(), 0)));
                    if seed % 3 == 0 && other.starts_with(['{', '[', '"', 't', 'f', 'n', '-', '1']) {
                        // Keys not in the table may hold anything valid.
                        if serde_json::from_str::<serde_json::Value>(other).is_ok() {
                            members.push(format!("\"other{seed}\":{other}"));
                        }
                    }
                }
                let text = format!("{{{}}}", members.join(", "));
                prop_assert!(fast.push(text.as_bytes()), "{}", text);
            }
        }
    }

    /// A string ends at its first quote, or stops at its first backslash, wherever they
    /// fall among the eight-byte words; a byte past 0x7F before either is noted.
    #[test]
    fn strings_end_at_their_quote_at_every_length() {
        for len in 0..40 {
            for (stop, wide) in [(b'"', None), (b'\\', None), (b'"', Some(len / 2))] {
                let mut bytes = vec![b'a'; len];
                if let Some(at) = wide {
                    if at < len {
                        bytes[at] = 0xC3;
                    }
                }
                bytes.push(stop);
                bytes.extend_from_slice(b"zz\"\\");
                let mut cursor = Cursor {
                    bytes: &bytes,
                    at: 0,
                    high: 0,
                };
                let got = cursor.plain_string().ok().unwrap();
                match stop {
                    b'"' => {
                        assert_eq!(got, Some(&bytes[..len]), "{len}");
                        assert_eq!(cursor.at, len + 1);
                    }
                    _ => {
                        assert_eq!(got, None);
                        assert_eq!(cursor.at, len);
                    }
                }
                assert_eq!(
                    cursor.high >= 0x80,
                    wide.is_some_and(|at| at < len),
                    "{len}"
                );
            }
            let unclosed = vec![b'a'; len];
            let mut cursor = Cursor {
                bytes: &unclosed,
                at: 0,
                high: 0,
            };
            assert!(cursor.plain_string().is_err());
        }
    }

    #[test]
    fn only_flat_nullable_columns_are_made_here() {
        let field = |t: DataType, nullable| ArrowSchema::new(vec![Field::new("a", t, nullable)]);
        assert!(JsonColumns::new(&field(DataType::Utf8, true)).is_some());
        assert!(JsonColumns::new(&field(DataType::Utf8, false)).is_none());
        assert!(JsonColumns::new(&field(DataType::Int32, true)).is_none());
        assert!(JsonColumns::new(&ArrowSchema::empty()).is_none());
        let twice = ArrowSchema::new(vec![
            Field::new("a", DataType::Utf8, true),
            Field::new("a", DataType::Int64, true),
        ]);
        assert!(JsonColumns::new(&twice).is_none());
        let wide = ArrowSchema::new(
            (0..20)
                .map(|i| Field::new(format!("c{i}"), DataType::Int64, true))
                .collect::<Vec<_>>(),
        );
        let mut fast = JsonColumns::new(&wide).unwrap();
        assert!(fast.push(br#"{"c19": 5, "c3": -1, "zz": [1]}"#));
        assert!(!fast.push(br#"{"c19": 5, "c19": 6}"#));
        let columns = fast.finish().unwrap();
        assert_eq!(columns[19].len(), 1);
        assert!(columns[0].is_null(0));
    }
}
