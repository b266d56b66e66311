//! The one walk of a datum against its writer schema (spec 15.3, checks 3 to 5): every length
//! and count it declares must fit in the record that holds it, each value counts against
//! [`DatumLimits`] and nesting against its depth limit, and each value must be valid. The walk
//! allocates nothing itself; it hands each value, checked, to a [`Visit`], which makes of it
//! what its caller wants: nothing (the check alone), JSON text
//! ([`JsonWriter`](super::json::JsonWriter)), a `Value` (the typed reader), a language's
//! objects. So what a record costs is bounded by its length and the limits, whatever its
//! bytes claim, and a record is decoded exactly as it is checked.
//!
//! (Decoders that allocate what a datum declares before reading it, as `apache-avro`'s does
//! up to 512 MiB per allocation, and arrow-avro's, are handed only datums this walk passed.)

use std::collections::{HashMap, HashSet};

use apache_avro::schema::{
    ArraySchema, DecimalSchema, EnumSchema, FixedSchema, MapSchema, Name, Namespace, RecordSchema,
};
use apache_avro::Schema;

/// Bounds on what one record may decode to, whatever its bytes declare (spec 15.4).
///
/// A datum decodes to at most `values_base + values_per_byte * len` values, and never more
/// than `max_values` (each null, number, string, record, array item and so on counts one;
/// `len` is the datum's length), nested at most `max_depth` deep (records, arrays, maps and
/// unions each add a level). A record past any is reported as over a limit (not damage: a
/// reader with larger limits decodes it). The defaults, 65,536 values plus 16 per byte up to
/// 4,194,304, and 128 levels, pass every datum whose values take a byte each on average up
/// to 4 MiB of them, keep the memory `apache-avro` spends on a datum under about 250 MB
/// however long it is (each decoded value takes about 56 bytes: a record of a few MiB of
/// nulls, which zstd makes a few hundred bytes, took gigabytes before the cap), and keep its
/// recursion within a thread's default stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "limits do nothing until used: each method returns the changed limits"]
pub struct DatumLimits {
    pub(crate) values_base: u64,
    pub(crate) values_per_byte: u64,
    pub(crate) values_cap: u64,
    pub(crate) max_depth: usize,
}

impl Default for DatumLimits {
    fn default() -> Self {
        DatumLimits {
            values_base: 1 << 16,
            values_per_byte: 16,
            values_cap: 1 << 22,
            max_depth: 128,
        }
    }
}

impl DatumLimits {
    /// The values any datum may decode to, however short (default 65,536).
    pub fn values_base(mut self, values: u64) -> Self {
        self.values_base = values;
        self
    }

    /// The values a datum may decode to per byte of its length (default 16).
    pub fn values_per_byte(mut self, values: u64) -> Self {
        self.values_per_byte = values;
        self
    }

    /// The most values any datum may decode to, however long (default 4,194,304: about
    /// 250 MB of decoded values).
    pub fn max_values(mut self, values: u64) -> Self {
        self.values_cap = values;
        self
    }

    /// The deepest nesting of records, arrays, maps and unions a datum may have (default 128,
    /// at most [`MAX_DEPTH_CEILING`]). Decoding recurses once per level, on a stack grown for
    /// the record when the thread's has no room for it.
    pub fn max_depth(mut self, depth: usize) -> Self {
        self.max_depth = depth.min(MAX_DEPTH_CEILING);
        self
    }

    /// The deepest nesting a datum may have (see [`max_depth`](Self::max_depth)): what a
    /// writer that wants its records read with these limits checks its values against.
    pub fn depth(&self) -> usize {
        self.max_depth
    }

    /// Limits 16 times as wide, nested at most 1,024 deep: what a reader walks a datum over
    /// its limits with, to find where it ends and keep the datums after it. The walk
    /// allocates nothing, and its recursion stays within a thread's default stack.
    pub(crate) fn widened(&self) -> DatumLimits {
        DatumLimits {
            values_base: self.values_base.saturating_mul(16),
            values_per_byte: self.values_per_byte.saturating_mul(16),
            values_cap: self.values_cap.saturating_mul(16),
            max_depth: self
                .max_depth
                .saturating_mul(8)
                .clamp(self.max_depth, MAX_DEPTH_CEILING),
        }
    }

    /// The most values a datum of `len` bytes may decode to.
    #[inline]
    fn values_for(&self, len: usize) -> u64 {
        self.values_per_byte
            .saturating_mul(len as u64)
            .saturating_add(self.values_base)
            .min(self.values_cap)
    }
}

/// Why a datum failed its check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The bytes do not follow the schema (at the datum's byte `at`).
    Invalid { at: usize, what: String },
    /// The datum is over one of the [`DatumLimits`].
    Limit { what: &'static str, limit: u64 },
}

/// The named types of a schema that its references name, by full name: what following a
/// reference needs.
pub type Names = HashMap<Name, Schema>;

/// Every record, enum and fixed type that a reference in `schema` names, by full name (its
/// namespace, or the enclosing one). Types no reference names are left out: each entry is a
/// copy of its type, and most schemas (a record of primitives) have no references at all.
pub(crate) fn names(schema: &Schema) -> Names {
    let mut referenced = HashSet::new();
    walk_names(schema, &None, &mut |named| {
        if let Named::Reference(full) = named {
            referenced.insert(full);
        }
    });
    let mut names = HashMap::new();
    if !referenced.is_empty() {
        walk_names(schema, &None, &mut |named| {
            if let Named::Definition(full, defined) = named {
                if referenced.contains(&full) {
                    names.entry(full).or_insert_with(|| defined.clone());
                }
            }
        });
    }
    names
}

/// A name met in a schema: a type defined, or a reference to one.
enum Named<'s> {
    Definition(Name, &'s Schema),
    Reference(Name),
}

/// Calls `meet` with each name `schema` defines or references, fully qualified.
fn walk_names<'s>(schema: &'s Schema, namespace: &Namespace, meet: &mut impl FnMut(Named<'s>)) {
    match schema {
        Schema::Array(ArraySchema { items, .. }) => walk_names(items, namespace, meet),
        Schema::Map(MapSchema { types, .. }) => walk_names(types, namespace, meet),
        Schema::Union(union) => {
            for variant in union.variants() {
                walk_names(variant, namespace, meet);
            }
        }
        Schema::Record(RecordSchema { name, fields, .. }) => {
            let full = name.fully_qualified_name(namespace);
            let inner = full.namespace.clone();
            meet(Named::Definition(full, schema));
            for field in fields {
                walk_names(&field.schema, &inner, meet);
            }
        }
        Schema::Enum(EnumSchema { name, .. }) | Schema::Fixed(FixedSchema { name, .. }) => {
            meet(Named::Definition(
                name.fully_qualified_name(namespace),
                schema,
            ));
        }
        Schema::Ref { name } => meet(Named::Reference(name.fully_qualified_name(namespace))),
        _ => {}
    }
}

/// The deepest nesting any limits allow (and every walk of a value accepts): 1,024 levels.
pub const MAX_DEPTH_CEILING: usize = 1024;

/// Stack kept free below any walk.
const STACK_BASE: usize = 256 << 10;

/// Levels a walk takes without looking at the stack: a few KiB each in a debug build, well
/// within [`STACK_BASE`].
const SHALLOW: usize = 8;

/// Level `depth` of a recursive walk of this crate's (the check, JSON, resolution, paths):
/// every [`SHALLOW`] levels it goes on on a new stack segment if this one is nearly used up.
#[inline]
pub(crate) fn level<T>(depth: usize, f: impl FnOnce() -> T) -> T {
    if depth % SHALLOW != SHALLOW - 1 {
        return f();
    }
    stacker::maybe_grow(STACK_BASE / 2, 4 << 20, f)
}

/// What a walk of a datum meets, in order (spec 15.3): one event per value, as the datum's
/// bytes give it, checked before it is handed on. A walk's visitor turns a datum into what its
/// caller wants (JSON text, a language's objects) from the bytes, without building Avro values
/// first; the unit type `()` is the visitor that wants nothing, the check alone.
///
/// Every method has a default that does nothing. Events arrive only for values that are
/// valid, and a walk that fails may stop at any event: a visitor's output is complete only
/// when the walk succeeds. Logical types arrive as their underlying type, with the schema
/// that names the logical type (`int` and `long` with a date, time or timestamp; `bytes`
/// with a decimal, duration or fixed), except a `uuid`, which arrives checked and parsed.
pub trait Visit {
    /// A datum's walk begins (before its first event).
    fn begin(&mut self) {}
    /// A `null`.
    fn null(&mut self) {}
    /// A `boolean` (its byte 0 or 1).
    fn boolean(&mut self, _value: bool) {}
    /// An `int`, `date` or `time-millis` (`schema` says which).
    fn int(&mut self, _schema: &Schema, _value: i32) {}
    /// A `long`, or a time or timestamp in micro-, milli- or nanoseconds (`schema` says
    /// which).
    fn long(&mut self, _schema: &Schema, _value: i64) {}
    /// A `float`.
    fn float(&mut self, _value: f32) {}
    /// A `double`.
    fn double(&mut self, _value: f64) {}
    /// A `bytes`, `fixed`, `decimal` (its two's-complement bytes), `duration` (its 12
    /// bytes) or `big-decimal` (its bytes), as `schema` says.
    fn bytes(&mut self, _schema: &Schema, _value: &[u8]) {}
    /// A `string` (UTF-8).
    fn string(&mut self, _value: &str) {}
    /// A `uuid`: its 16 bytes, or its text (`text`, as the record holds it: 36 characters,
    /// hex digits of either case in groups of 8, 4, 4, 4 and 12 between hyphens).
    fn uuid(&mut self, _value: uuid::Uuid, _text: Option<&str>) {}
    /// An enum's symbol, and its index among the symbols.
    fn symbol(&mut self, _index: u32, _symbol: &str) {}
    /// A record begins: each field then follows as [`field`](Self::field) and its value.
    fn record(&mut self, _schema: &RecordSchema) {}
    /// A record's field of this name: its value follows.
    fn field(&mut self, _name: &str) {}
    /// The record's fields are done.
    fn record_end(&mut self) {}
    /// An array begins: each item then follows as [`item`](Self::item) and its value.
    fn array(&mut self) {}
    /// An array's item: its value follows.
    fn item(&mut self) {}
    /// The array's items are done.
    fn array_end(&mut self) {}
    /// A map begins: each entry then follows as [`key`](Self::key) and its value, in the
    /// datum's order (a key may come twice: Avro's readers keep the last).
    fn map(&mut self) {}
    /// A map entry's key (UTF-8): its value follows.
    fn key(&mut self, _key: &str) {}
    /// The map's entries are done.
    fn map_end(&mut self) {}
    /// A union's value follows, of its branch `index`, `branch` (in namespace `ns`, for
    /// naming it), and then [`branch_end`](Self::branch_end).
    fn branch(&mut self, _index: u32, _branch: &Schema, _ns: &Namespace) {}
    /// The union's value is done.
    fn branch_end(&mut self, _index: u32, _branch: &Schema) {}
}

impl Visit for () {}

/// What a walk of a datum found: where it ends, and the first value that is not valid (spec
/// 15.3, check 5),
/// which a caller names only after the datum's end passed its own check (check 4).
#[derive(Debug)]
pub(crate) struct Walked {
    pub end: usize,
    pub invalid: Option<Failure>,
}

/// Walks the datum at the start of `bytes` as `schema` says (spec 15.3, checks 3 and 5):
/// its layout within `limits`, and its values.
#[cfg(test)]
pub(crate) fn check(
    schema: &Schema,
    names: &Names,
    bytes: &[u8],
    limits: &DatumLimits,
) -> Result<Walked, Failure> {
    walk(schema, names, bytes, limits, &mut ())
}

/// Whether `bytes` are all ASCII, eight at a time and inline: for the short strings records
/// hold, the standard library's `is_ascii` (a call, then alignment) took a tenth of a typed
/// scan's time. The bytes past the last whole word are read as one word (or two halves)
/// that overlaps what was read already, not one by one (`perf annotate`: that loop's
/// dispatch on the length left was a fifth of the walk's samples).
#[inline(always)]
fn is_ascii(bytes: &[u8]) -> bool {
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let n = bytes.len();
    let word = |at: usize| {
        let mut le = [0u8; 8];
        le.copy_from_slice(&bytes[at..at + 8]);
        u64::from_le_bytes(le)
    };
    let half = |at: usize| {
        let mut le = [0u8; 4];
        le.copy_from_slice(&bytes[at..at + 4]);
        u64::from(u32::from_le_bytes(le))
    };
    let high = match n {
        8.. => {
            let mut high = word(n - 8);
            let mut at = 0;
            while at + 8 < n {
                high |= word(at);
                at += 8;
            }
            high
        }
        4..=7 => half(0) | half(n - 4),
        1..=3 => u64::from(bytes[0] | bytes[n / 2] | bytes[n - 1]),
        0 => 0,
    };
    high & HIGH == 0
}

/// [`check`], handing each value to `visit` as it is met.
#[inline]
pub(crate) fn walk<V: Visit>(
    schema: &Schema,
    names: &Names,
    bytes: &[u8],
    limits: &DatumLimits,
    visit: &mut V,
) -> Result<Walked, Failure> {
    visit.begin();
    let mut walk = Walk {
        bytes,
        at: 0,
        values: 0,
        max_values: limits.values_for(bytes.len()),
        max_depth: limits.max_depth,
        names,
        invalid: None,
        visit,
    };
    walk.value(schema, &None, 0)?;
    Ok(Walked {
        end: walk.at,
        invalid: walk.invalid,
    })
}

/// [`walk`] of a datum of the [`Flat`] record `record` (`flat` its form), which meets the
/// same values, makes the same events and finds the same faults; `None`, walking nothing,
/// where `limits` could stop it (the walk of trees then finds where).
#[inline]
pub(crate) fn walk_flat<V: Visit>(
    record: &RecordSchema,
    flat: &Flat,
    names: &Names,
    bytes: &[u8],
    limits: &DatumLimits,
    visit: &mut V,
) -> Option<Result<Walked, Failure>> {
    let max_values = limits.values_for(bytes.len());
    if flat.values > max_values || flat.depth > limits.max_depth {
        return None;
    }
    visit.begin();
    let mut walk = Walk {
        bytes,
        at: 0,
        values: flat.values,
        max_values,
        max_depth: limits.max_depth,
        names,
        invalid: None,
        visit,
    };
    Some(walk.flat_record(record, flat).map(|()| Walked {
        end: walk.at,
        invalid: walk.invalid,
    }))
}

/// A value that holds no other, by how it is walked: what a field of a [`Flat`] record holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Leaf {
    Null,
    Boolean,
    /// `int`, `date`, `time-millis`.
    Int,
    /// `long` and the times and timestamps made of one.
    Long,
    Float,
    Double,
    Bytes,
    String,
    Enum,
    Fixed,
}

impl Leaf {
    fn of(schema: &Schema) -> Option<Leaf> {
        Some(match schema {
            Schema::Null => Leaf::Null,
            Schema::Boolean => Leaf::Boolean,
            Schema::Int | Schema::Date | Schema::TimeMillis => Leaf::Int,
            Schema::Long
            | Schema::TimeMicros
            | Schema::TimestampMillis
            | Schema::TimestampMicros
            | Schema::TimestampNanos
            | Schema::LocalTimestampMillis
            | Schema::LocalTimestampMicros
            | Schema::LocalTimestampNanos => Leaf::Long,
            Schema::Float => Leaf::Float,
            Schema::Double => Leaf::Double,
            Schema::Bytes => Leaf::Bytes,
            Schema::String => Leaf::String,
            Schema::Enum(_) => Leaf::Enum,
            Schema::Fixed(_) => Leaf::Fixed,
            _ => return None,
        })
    }
}

/// A record whose fields each hold a [`Leaf`], or a union of `null` and a leaf (in either
/// order): what most records of logs are. Such a record always decodes to the same number of
/// values, nested to the same depth, so its walk counts them once, not value by value, and
/// goes from field to field by a list made once per schema instead of matching each field's
/// schema as a tree.
#[derive(Debug)]
pub(crate) struct Flat {
    fields: Box<[FlatField]>,
    /// The values every datum of the record decodes to: the record, each field's value, and
    /// each union's branch value.
    values: u64,
    /// The levels of nesting: the record's, and a union's.
    depth: usize,
}

#[derive(Debug, Clone, Copy)]
struct FlatField {
    leaf: Leaf,
    /// For a union: the index of its `null` branch, and of its leaf's.
    union: Option<(u32, u32)>,
}

/// The [`Flat`] form of `schema`, if it is a flat record.
pub(crate) fn flat(schema: &Schema) -> Option<Flat> {
    let Schema::Record(RecordSchema { fields, .. }) = schema else {
        return None;
    };
    let field = |schema: &Schema| match schema {
        Schema::Union(union) => match union.variants() {
            [Schema::Null, other] => Some((Leaf::of(other)?, Some((0, 1)))),
            [other, Schema::Null] => Some((Leaf::of(other)?, Some((1, 0)))),
            _ => None,
        },
        other => Some((Leaf::of(other)?, None)),
    };
    let fields = fields
        .iter()
        .map(|f| field(&f.schema).map(|(leaf, union)| FlatField { leaf, union }))
        .collect::<Option<Box<[_]>>>()?;
    // A union of two nulls is no union `apache-avro` parses; a leaf of `Null` in a union
    // would walk its null twice over, so it is left to the walk of trees.
    if fields
        .iter()
        .any(|f| f.union.is_some() && f.leaf == Leaf::Null)
    {
        return None;
    }
    let unions = fields.iter().filter(|f| f.union.is_some()).count();
    Some(Flat {
        values: 1 + fields.len() as u64 + unions as u64,
        depth: if unions > 0 { 2 } else { 1 },
        fields,
    })
}

struct Walk<'a, 'v, V> {
    bytes: &'a [u8],
    at: usize,
    values: u64,
    max_values: u64,
    max_depth: usize,
    names: &'a Names,
    /// The first value met that is not valid; the walk goes on over the layout.
    invalid: Option<Failure>,
    visit: &'v mut V,
}

impl<'a, V: Visit> Walk<'a, '_, V> {
    fn invalid(&self, what: impl Into<String>) -> Failure {
        Failure::Invalid {
            at: self.at,
            what: what.into(),
        }
    }

    /// Notes a value that is not valid, which began at byte `at` (the first such is kept).
    #[cold]
    fn bad_value(&mut self, at: usize, what: String) {
        if self.invalid.is_none() {
            self.invalid = Some(Failure::Invalid { at, what });
        }
    }

    /// A zig-zag varint of at most 64 bits: 10 bytes at most, the 10th 0 or 1 (spec 3, which
    /// `apache-avro` and fastavro do not check: they drop the bits past 64).
    #[inline(always)]
    fn long(&mut self, what: &str) -> Result<i64, Failure> {
        // Most numbers, lengths and counts take one byte.
        if let Some(&byte) = self.bytes.get(self.at) {
            if byte & 0x80 == 0 {
                self.at += 1;
                return Ok(i64::from(byte >> 1) ^ -i64::from(byte & 1));
            }
        }
        self.long_slow(what)
    }

    fn long_slow(&mut self, what: &str) -> Result<i64, Failure> {
        let mut z: u64 = 0;
        for i in 0..10 {
            let Some(&byte) = self.bytes.get(self.at) else {
                return Err(self.invalid(format!("{what} runs past the end of the record")));
            };
            self.at += 1;
            if i == 9 && byte > 1 {
                return Err(self.invalid(format!("{what} is longer than 64 bits")));
            }
            z |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok((z >> 1) as i64 ^ -((z & 1) as i64));
            }
        }
        unreachable!("the 10th byte ends the varint or fails")
    }

    /// An `int`: a varint within 32 bits.
    #[inline(always)]
    fn int(&mut self, what: &str) -> Result<Option<i32>, Failure> {
        let start = self.at;
        let n = self.long(what)?;
        match i32::try_from(n) {
            Ok(n) => Ok(Some(n)),
            Err(_) => {
                self.bad_value(start, format!("{what} {n} is out of an int's range"));
                Ok(None)
            }
        }
    }

    /// The next `n` bytes.
    #[inline(always)]
    fn take(&mut self, n: u64, what: &str) -> Result<&'a [u8], Failure> {
        let left = (self.bytes.len() - self.at) as u64;
        if n > left {
            return Err(self.invalid(format!(
                "{what} of {n} bytes runs past the end of the record ({left} left)"
            )));
        }
        let start = self.at;
        self.at += n as usize;
        Ok(&self.bytes[start..self.at])
    }

    /// A length-prefixed byte string.
    #[inline(always)]
    fn bytes(&mut self, what: &str) -> Result<&'a [u8], Failure> {
        let start = self.at;
        let len = self.long(what)?;
        if len < 0 {
            self.at = start;
            return Err(self.invalid(format!("{what} has a negative length {len}")));
        }
        self.take(len as u64, what)
    }

    /// A length-prefixed UTF-8 string (`None`, noted, if it is not UTF-8).
    #[inline(always)]
    fn string(&mut self, what: &str) -> Result<Option<&'a str>, Failure> {
        // Most strings of records are short ASCII: a length of one or two bytes (under
        // 8192), the bytes within the record. Taken here without the error paths' values
        // (which cost a quarter of a typed scan's walk in stores and loads of them); all
        // else below.
        let head = match self.bytes.get(self.at..) {
            Some([b0, ..]) if b0 & 0x80 == 0 => Some((usize::from(*b0), 1)),
            Some([b0, b1, ..]) if b1 & 0x80 == 0 => {
                Some((usize::from(b0 & 0x7f) | usize::from(*b1) << 7, 2))
            }
            _ => None,
        };
        if let Some((zigzag, len_len)) = head {
            if zigzag & 1 == 0 {
                let start = self.at + len_len;
                if let Some(text) = self.bytes.get(start..start + (zigzag >> 1)) {
                    if is_ascii(text) {
                        self.at = start + text.len();
                        // SAFETY: ASCII is UTF-8.
                        return Ok(Some(unsafe { std::str::from_utf8_unchecked(text) }));
                    }
                }
            }
        }
        self.string_slow(what)
    }

    fn string_slow(&mut self, what: &str) -> Result<Option<&'a str>, Failure> {
        let start = self.at;
        let bytes = self.bytes(what)?;
        // Most strings are ASCII, checked a word at a time: several times faster than
        // `from_utf8` for the short strings records are made of.
        if is_ascii(bytes) {
            // SAFETY: ASCII is UTF-8.
            return Ok(Some(unsafe { std::str::from_utf8_unchecked(bytes) }));
        }
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(Some(s)),
            Err(e) => {
                self.bad_value(start, format!("{what} is not UTF-8 ({e})"));
                Ok(None)
            }
        }
    }

    #[inline]
    fn count(&mut self) -> Result<(), Failure> {
        self.values += 1;
        if self.values > self.max_values {
            return Err(Failure::Limit {
                what: "values",
                limit: self.max_values,
            });
        }
        Ok(())
    }

    #[inline]
    fn value(&mut self, schema: &Schema, ns: &Namespace, depth: usize) -> Result<(), Failure> {
        if depth % SHALLOW == SHALLOW - 1 {
            return level(depth, || self.value_here(schema, ns, depth));
        }
        self.value_here(schema, ns, depth)
    }

    /// A value of a record's field or a union's branch: a leaf walked here, without the call
    /// that [`value`](Self::value) is (most values of most records are leaves).
    #[inline(always)]
    fn value_inline(
        &mut self,
        schema: &Schema,
        ns: &Namespace,
        depth: usize,
    ) -> Result<(), Failure> {
        match schema {
            Schema::Union(_)
            | Schema::Record(_)
            | Schema::Array(_)
            | Schema::Map(_)
            | Schema::Ref { .. } => self.value(schema, ns, depth),
            _ => {
                self.count()?;
                self.leaf(schema)
            }
        }
    }

    fn value_here(&mut self, schema: &Schema, ns: &Namespace, depth: usize) -> Result<(), Failure> {
        self.count()?;
        let start = self.at;
        match schema {
            Schema::Union(union) => {
                let depth = self.deeper(depth)?;
                let index = self.long("a union index")?;
                let variants = union.variants();
                match usize::try_from(index).ok().and_then(|i| variants.get(i)) {
                    Some(variant) => {
                        self.visit.branch(index as u32, variant, ns);
                        self.value_inline(variant, ns, depth)?;
                        self.visit.branch_end(index as u32, variant);
                    }
                    None => {
                        self.at = start;
                        return Err(self.not_a_branch(index, variants.len()));
                    }
                }
            }
            Schema::Record(record) => {
                let depth = self.deeper(depth)?;
                // The namespace of the record's full name, as `Name::fully_qualified_name`
                // gives it, without making the name.
                let inner = match (&record.name.namespace, ns) {
                    (Some(_), _) => &record.name.namespace,
                    (None, Some(enclosing)) if !enclosing.is_empty() => ns,
                    (None, _) => &None,
                };
                self.visit.record(record);
                for field in &record.fields {
                    self.visit.field(&field.name);
                    self.value_inline(&field.schema, inner, depth)?;
                }
                self.visit.record_end();
            }
            Schema::Array(ArraySchema { items, .. }) => {
                let depth = self.deeper(depth)?;
                self.visit.array();
                self.blocks(|walk| {
                    walk.visit.item();
                    walk.value(items, ns, depth)
                })?;
                self.visit.array_end();
            }
            Schema::Map(MapSchema { types, .. }) => {
                let depth = self.deeper(depth)?;
                self.visit.map();
                self.blocks(|walk| {
                    if let Some(key) = walk.string("a map key")? {
                        walk.visit.key(key);
                    }
                    walk.value(types, ns, depth)
                })?;
                self.visit.map_end();
            }
            Schema::Ref { name } => {
                let full = name.fully_qualified_name(ns);
                match self.names.get(&full) {
                    // A reference names a record, enum or fixed type, which `value` counts.
                    Some(named) => {
                        self.values -= 1;
                        return self.value(named, &full.namespace, depth);
                    }
                    None => return Err(self.invalid(format!("the schema names no type {full}"))),
                }
            }
            leaf => return self.leaf(leaf),
        }
        Ok(())
    }

    /// A value of a schema that holds no other (counted already). Inlined into the walk of
    /// records and unions in optimized builds only: a debug build's frames would grow past
    /// what [`SHALLOW`] levels allow.
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn leaf(&mut self, schema: &Schema) -> Result<(), Failure> {
        if let Some(leaf) = Leaf::of(schema) {
            return self.flat_leaf(leaf, schema);
        }
        let start = self.at;
        match schema {
            Schema::Duration => {
                let b = self.take(12, "a duration")?;
                self.visit.bytes(schema, b);
            }
            Schema::BigDecimal => {
                let b = self.bytes("a big-decimal")?;
                if big_decimal_is_valid(b) {
                    self.visit.bytes(schema, b);
                } else {
                    self.bad_value(
                        start,
                        "a big-decimal is not a length-prefixed integer and a scale".into(),
                    );
                }
            }
            Schema::Uuid => {
                let b = self.bytes("a uuid")?;
                // 16 bytes are the UUID's bytes (as `apache-avro` reads one); anything else
                // is its text in RFC 9562's one form, hex digits of either case (spec 15.3:
                // not braced, URN or unhyphenated forms, which `uuid` also parses).
                let uuid = match b.len() {
                    16 => uuid::Uuid::from_slice(b).ok().map(|u| (u, None)),
                    _ => uuid_text(b).map(|(u, s)| (u, Some(s))),
                };
                match uuid {
                    Some((uuid, text)) => self.visit.uuid(uuid, text),
                    None => self.bad_value(start, "a uuid is not a UUID".into()),
                }
            }
            Schema::Decimal(DecimalSchema { inner, .. }) => {
                let b = match &**inner {
                    Schema::Fixed(FixedSchema { size, .. }) => {
                        self.take(*size as u64, "a fixed")?
                    }
                    Schema::Bytes => self.bytes("bytes")?,
                    // A schema that parses has no other.
                    _ => return Err(self.invalid("a decimal's type is neither bytes nor a fixed")),
                };
                self.visit.bytes(schema, b);
            }
            // Walked by `value_here`, or leaves walked by `flat_leaf`.
            _ => unreachable!("not a leaf of this match"),
        }
        Ok(())
    }

    /// A leaf's value (counted already), `schema` being the schema `leaf` was made of.
    #[inline(always)]
    fn flat_leaf(&mut self, leaf: Leaf, schema: &Schema) -> Result<(), Failure> {
        let start = self.at;
        match leaf {
            Leaf::Null => self.visit.null(),
            Leaf::Boolean => match self.take(1, "a boolean")?[0] {
                0 => self.visit.boolean(false),
                1 => self.visit.boolean(true),
                other => self.bad_value(start, format!("a boolean byte is {other}, not 0 or 1")),
            },
            Leaf::Int => {
                if let Some(n) = self.int("an int")? {
                    self.visit.int(schema, n);
                }
            }
            Leaf::Long => {
                let n = self.long("a long")?;
                self.visit.long(schema, n);
            }
            Leaf::Enum => {
                let Schema::Enum(EnumSchema { symbols, .. }) = schema else {
                    unreachable!("an enum's leaf is made of an enum")
                };
                if let Some(i) = self.int("an enum index")? {
                    match usize::try_from(i).ok().and_then(|i| symbols.get(i)) {
                        Some(symbol) => self.visit.symbol(i as u32, symbol),
                        None => self.bad_value(
                            start,
                            format!("enum index {i} is not one of {} symbols", symbols.len()),
                        ),
                    }
                }
            }
            Leaf::Float => {
                let b = self.take(4, "a float")?;
                self.visit
                    .float(f32::from_le_bytes([b[0], b[1], b[2], b[3]]));
            }
            Leaf::Double => {
                let b = self.take(8, "a double")?;
                let mut le = [0u8; 8];
                le.copy_from_slice(b);
                self.visit.double(f64::from_le_bytes(le));
            }
            Leaf::Bytes => {
                let b = self.bytes("bytes")?;
                self.visit.bytes(schema, b);
            }
            Leaf::String => {
                if let Some(s) = self.string("a string")? {
                    self.visit.string(s);
                }
            }
            Leaf::Fixed => {
                let Schema::Fixed(FixedSchema { size, .. }) = schema else {
                    unreachable!("a fixed's leaf is made of a fixed")
                };
                let b = self.take(*size as u64, "a fixed")?;
                self.visit.bytes(schema, b);
            }
        }
        Ok(())
    }

    /// A datum of a [`Flat`] record, as [`value`](Self::value) walks one, its values counted
    /// and its depth checked by the caller.
    fn flat_record(&mut self, record: &RecordSchema, flat: &Flat) -> Result<(), Failure> {
        // At the top, a record's namespace is that of its own name (see `value_here`).
        let inner = &record.name.namespace;
        self.visit.record(record);
        for (field, flat) in record.fields.iter().zip(&*flat.fields) {
            self.visit.field(&field.name);
            let Some((null, value)) = flat.union else {
                self.flat_leaf(flat.leaf, &field.schema)?;
                continue;
            };
            let Schema::Union(union) = &field.schema else {
                unreachable!("a flat union is made of a union")
            };
            let variants = union.variants();
            let start = self.at;
            let index = self.long("a union index")?;
            let (branch, leaf) = if index == i64::from(null) {
                (null, Leaf::Null)
            } else if index == i64::from(value) {
                (value, flat.leaf)
            } else {
                self.at = start;
                return Err(self.not_a_branch(index, variants.len()));
            };
            let variant = &variants[branch as usize];
            self.visit.branch(branch, variant, inner);
            self.flat_leaf(leaf, variant)?;
            self.visit.branch_end(branch, variant);
        }
        self.visit.record_end();
        Ok(())
    }

    #[cold]
    fn not_a_branch(&self, index: i64, branches: usize) -> Failure {
        self.invalid(format!(
            "union index {index} is not one of the union's {branches} branches"
        ))
    }

    fn deeper(&mut self, depth: usize) -> Result<usize, Failure> {
        if depth >= self.max_depth {
            return Err(Failure::Limit {
                what: "levels of nesting",
                limit: self.max_depth as u64,
            });
        }
        Ok(depth + 1)
    }

    /// The blocks of an array or a map: a count, its items, until a count of 0. A negative
    /// count is followed by the block's size in bytes.
    fn blocks(
        &mut self,
        mut item: impl FnMut(&mut Self) -> Result<(), Failure>,
    ) -> Result<(), Failure> {
        let mut sized = None;
        loop {
            let start = self.at;
            let count = self.long("a block count")?;
            let count = match count {
                0 => return Ok(()),
                n if n > 0 => n as u64,
                i64::MIN => {
                    self.at = start;
                    return Err(self.invalid("a block count of -2^63 has no positive count"));
                }
                n => {
                    let size = self.long("a block size")?;
                    let left = (self.bytes.len() - self.at) as u64;
                    if size < 0 || size as u64 > left {
                        self.at = start;
                        return Err(self.invalid(format!(
                            "a block's size {size} is not within the {left} bytes left"
                        )));
                    }
                    sized = Some((self.at, size as usize));
                    n.unsigned_abs()
                }
            };
            for _ in 0..count {
                // Each item counts as a value, so a count of 2^60 zero-byte items stops at
                // the limit.
                item(self)?;
            }
            // A reader that skips the block by its size must land where one that walks its
            // items does.
            if let Some((from, size)) = sized.take() {
                if self.at - from != size {
                    let took = self.at - from;
                    self.at = from;
                    return Err(self.invalid(format!(
                        "a block's size {size} is not the {took} bytes its items take"
                    )));
                }
            }
        }
    }
}

/// `bytes` as the text of a UUID (RFC 9562, section 4): 36 characters, hex digits of either
/// case in groups of 8, 4, 4, 4 and 12 between hyphens.
pub(crate) fn uuid_text(bytes: &[u8]) -> Option<(uuid::Uuid, &str)> {
    let hyphen = |i: usize| matches!(i, 8 | 13 | 18 | 23);
    let form = bytes.len() == 36
        && (bytes.iter().enumerate()).all(|(i, &b)| {
            if hyphen(i) {
                b == b'-'
            } else {
                b.is_ascii_hexdigit()
            }
        });
    if !form {
        return None;
    }
    // ASCII, by the form.
    let text = std::str::from_utf8(bytes).ok()?;
    Some((uuid::Uuid::parse_str(text).ok()?, text))
}

/// Whether `bytes` are a `big-decimal` as `apache-avro` reads one: a length-prefixed
/// two's-complement integer, then a `long` scale.
fn big_decimal_is_valid(bytes: &[u8]) -> bool {
    let mut walk = Walk {
        bytes,
        at: 0,
        values: 0,
        max_values: u64::MAX,
        max_depth: 0,
        names: &Names::new(),
        invalid: None,
        visit: &mut (),
    };
    walk.bytes("an integer").is_ok() && walk.long("a scale").is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(schema: &str, bytes: &[u8]) -> Result<usize, Failure> {
        let schema = Schema::parse_str(schema).unwrap();
        check(&schema, &names(&schema), bytes, &DatumLimits::default()).and_then(|walked| {
            match walked.invalid {
                Some(invalid) => Err(invalid),
                None => Ok(walked.end),
            }
        })
    }

    /// Every event a walk makes, in order.
    #[derive(Default)]
    struct Events(Vec<String>);

    impl Visit for Events {
        fn begin(&mut self) {
            self.0.push("begin".into());
        }
        fn null(&mut self) {
            self.0.push("null".into());
        }
        fn boolean(&mut self, value: bool) {
            self.0.push(format!("boolean {value}"));
        }
        fn int(&mut self, schema: &Schema, value: i32) {
            self.0.push(format!("int {schema:?} {value}"));
        }
        fn long(&mut self, schema: &Schema, value: i64) {
            self.0.push(format!("long {schema:?} {value}"));
        }
        fn float(&mut self, value: f32) {
            self.0.push(format!("float {:x}", value.to_bits()));
        }
        fn double(&mut self, value: f64) {
            self.0.push(format!("double {:x}", value.to_bits()));
        }
        fn bytes(&mut self, schema: &Schema, value: &[u8]) {
            self.0.push(format!("bytes {schema:?} {value:?}"));
        }
        fn string(&mut self, value: &str) {
            self.0.push(format!("string {value:?}"));
        }
        fn symbol(&mut self, index: u32, symbol: &str) {
            self.0.push(format!("symbol {index} {symbol}"));
        }
        fn record(&mut self, schema: &RecordSchema) {
            self.0.push(format!("record {}", schema.name));
        }
        fn field(&mut self, name: &str) {
            self.0.push(format!("field {name}"));
        }
        fn record_end(&mut self) {
            self.0.push("record end".into());
        }
        fn branch(&mut self, index: u32, branch: &Schema, ns: &Namespace) {
            self.0.push(format!("branch {index} {branch:?} {ns:?}"));
        }
        fn branch_end(&mut self, index: u32, branch: &Schema) {
            self.0.push(format!("branch end {index} {branch:?}"));
        }
    }

    /// A leaf's schema (JSON), and the bytes of a value of it made of `seed`.
    fn leaf_of(kind: u8, seed: u64, at: usize) -> (String, Vec<u8>) {
        // Avro's int and long: a zigzag varint, as the crate writes one.
        let zigzag = crate::varint::write;
        let mut value = Vec::new();
        let small = (seed % 200) as i64 - 100;
        let schema = match kind % 13 {
            0 => r#""null""#.to_string(),
            1 => {
                value.push((seed % 3) as u8);
                r#""boolean""#.to_string()
            }
            2 => {
                zigzag(
                    if seed.is_multiple_of(5) {
                        1 << 40
                    } else {
                        small
                    },
                    &mut value,
                );
                r#""int""#.to_string()
            }
            3 => {
                zigzag(small, &mut value);
                r#"{"type":"int","logicalType":"date"}"#.to_string()
            }
            4 => {
                zigzag(seed as i64, &mut value);
                r#""long""#.to_string()
            }
            5 => {
                zigzag(small * 1000, &mut value);
                r#"{"type":"long","logicalType":"timestamp-millis"}"#.to_string()
            }
            6 => {
                value.extend_from_slice(&(seed as u32).to_le_bytes());
                r#""float""#.to_string()
            }
            7 => {
                value.extend_from_slice(&seed.to_le_bytes());
                r#""double""#.to_string()
            }
            8 | 9 => {
                let text: Vec<u8> = match seed % 4 {
                    0 => b"plain".to_vec(),
                    1 => "\u{e9}t\u{e9}".as_bytes().to_vec(),
                    2 => vec![0xff, b'a'],
                    _ => (0..(seed % 40) as u8).map(|i| b'a' + i % 26).collect(),
                };
                zigzag(text.len() as i64, &mut value);
                value.extend_from_slice(&text);
                if kind % 13 == 8 {
                    r#""string""#.to_string()
                } else {
                    r#""bytes""#.to_string()
                }
            }
            10 => {
                zigzag(small % 4, &mut value);
                format!(r#"{{"type":"enum","name":"E{at}","symbols":["a","b","c"]}}"#)
            }
            11 => {
                let size = seed % 4;
                value.extend((0..size).map(|i| i as u8));
                format!(r#"{{"type":"fixed","name":"F{at}","size":{size}}}"#)
            }
            _ => {
                value.extend_from_slice(&seed.to_le_bytes()[..3]);
                r#""string""#.to_string()
            }
        };
        (schema, value)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// The walk of flat records against the walk of trees: the same events, end, faults
        /// and limits, on values of every leaf and union, cut, changed and random.
        #[test]
        fn flat_records_walk_as_trees_do(
            fields in proptest::collection::vec((0u8..13, 0u8..3, proptest::prelude::any::<u64>(), 0u8..5), 0..7),
            namespace in proptest::prelude::any::<bool>(),
            change in proptest::option::of((proptest::prelude::any::<usize>(), proptest::prelude::any::<u8>())),
            cut in proptest::option::of(proptest::prelude::any::<usize>()),
            random in proptest::option::of(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40)),
            limits in (0u64..12, 0u64..2, 0usize..4),
        ) {
            let mut json = Vec::new();
            let mut datum = Vec::new();
            for (at, &(kind, union, seed, branch)) in fields.iter().enumerate() {
                let (leaf, value) = leaf_of(kind, seed, at);
                let schema = match union {
                    0 => leaf,
                    1 => format!(r#"["null",{leaf}]"#),
                    _ => format!(r#"[{leaf},"null"]"#),
                };
                json.push(format!(r#"{{"name":"f{at}","type":{schema}}}"#));
                let null_index = if union == 1 { 0 } else { 1 };
                match (union, branch) {
                    (0, _) => datum.extend_from_slice(&value),
                    (_, 0) => datum.push(null_index * 2),
                    (_, 1) => {
                        datum.push((1 - null_index) * 2);
                        datum.extend_from_slice(&value);
                    }
                    // Union indexes past the branches, and below them.
                    (_, 2) => datum.push(4),
                    (_, 3) => datum.push(6),
                    _ => datum.push(1),
                }
            }
            let ns = if namespace { r#","namespace":"n.s""# } else { "" };
            let json = format!(r#"{{"type":"record","name":"R"{ns},"fields":[{}]}}"#, json.join(","));
            // A union of null and null, or an enum named twice, does not parse: no datum then.
            let Ok(schema) = Schema::parse_str(&json) else { return Ok(()) };
            if let Some((at, byte)) = change {
                if !datum.is_empty() {
                    let at = at % datum.len();
                    datum[at] = byte;
                }
            }
            if let Some(cut) = cut {
                datum.truncate(cut % (datum.len() + 1));
            }
            if let Some(random) = random {
                datum = random;
            }
            let limits = DatumLimits::default()
                .values_base(limits.0)
                .values_per_byte(limits.1)
                .max_depth(limits.2);
            let Schema::Record(record) = &schema else { unreachable!() };
            let Some(flat) = flat(&schema) else {
                // Only unions of null with null-free leaves are flat.
                return Ok(());
            };
            let mut flat_events = Events::default();
            let names = names(&schema);
            let flat_walked = walk_flat(record, &flat, &names, &datum, &limits, &mut flat_events);
            let mut tree_events = Events::default();
            let tree_walked = walk(&schema, &names, &datum, &limits, &mut tree_events);
            match flat_walked {
                None => {
                    let reachable =
                        limits.values_for(datum.len()) < flat.values || limits.max_depth < flat.depth;
                    proptest::prop_assert!(reachable);
                }
                Some(flat_walked) => {
                    proptest::prop_assert_eq!(
                        format!("{flat_walked:?}"),
                        format!("{tree_walked:?}")
                    );
                    proptest::prop_assert_eq!(flat_events.0, tree_events.0);
                }
            }
        }
    }

    #[test]
    fn ascii_is_told_at_every_length_and_place() {
        for len in 0..40 {
            let mut bytes = vec![b'a'; len];
            assert!(is_ascii(&bytes));
            for at in 0..len {
                for high in [0x80, 0xc3, 0xff] {
                    bytes[at] = high;
                    assert!(!is_ascii(&bytes), "{len} {at} {high}");
                    assert_eq!(is_ascii(&bytes), bytes.is_ascii());
                    bytes[at] = 0x7f;
                    assert!(is_ascii(&bytes));
                    bytes[at] = b'a';
                }
            }
        }
    }

    #[test]
    fn strings_of_every_short_length_are_told_whole_broken_or_cut() {
        for len in 0..80usize {
            let mut datum = Vec::new();
            let mut z = (len as u64) << 1;
            while z >= 0x80 {
                datum.push(z as u8 | 0x80);
                z >>= 7;
            }
            datum.push(z as u8);
            let head = datum.len();
            datum.extend(std::iter::repeat_n(b'a', len));
            assert_eq!(run(r#""string""#, &datum), Ok(head + len));
            if len > 0 {
                // UTF-8, not ASCII.
                let mut two = datum.clone();
                two[head + len - 1] = 0xc3;
                two.push(0xa9);
                two[head - 1] += 2;
                if len < 63 {
                    assert_eq!(run(r#""string""#, &two), Ok(head + len + 1), "{len}");
                }
                // Not UTF-8.
                let mut bad = datum.clone();
                bad[head] = 0xff;
                assert!(matches!(
                    run(r#""string""#, &bad),
                    Err(Failure::Invalid { .. })
                ));
                // Cut.
                let cut = &datum[..datum.len() - 1];
                assert!(matches!(
                    run(r#""string""#, cut),
                    Err(Failure::Invalid { .. })
                ));
            }
        }
    }

    #[test]
    fn lengths_must_fit_in_the_record() {
        assert_eq!(run(r#""string""#, b"\x06abc"), Ok(4));
        assert!(matches!(
            run(r#""string""#, b"\x08abc"),
            Err(Failure::Invalid { .. })
        ));
        // A string claiming 2^62 bytes.
        let huge = [0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f];
        assert!(matches!(
            run(r#""bytes""#, &huge),
            Err(Failure::Invalid { .. })
        ));
        assert!(matches!(
            run(r#""bytes""#, b"\x01"),
            Err(Failure::Invalid { .. })
        ));
        let fixed = r#"{"type":"fixed","name":"f","size":1099511627776}"#;
        assert!(matches!(run(fixed, b"ab"), Err(Failure::Invalid { .. })));
    }

    #[test]
    fn zero_byte_items_count_against_the_limit() {
        // 2^62 nulls in two bytes... and more.
        let array = r#"{"type":"array","items":"null"}"#;
        let claim = [0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x00];
        assert!(matches!(
            run(array, &claim),
            Err(Failure::Limit { what: "values", .. })
        ));
        // A thousand nulls are fine.
        assert_eq!(run(array, &[0xd0, 0x0f, 0x00]), Ok(3));
    }

    #[test]
    fn nesting_is_bounded() {
        let list = r#"{"type":"record","name":"Node","fields":[
            {"name":"next","type":["null","Node"]}]}"#;
        let mut deep = vec![2u8; 1000];
        deep.push(0);
        assert!(matches!(
            run(list, &deep),
            Err(Failure::Limit {
                what: "levels of nesting",
                ..
            })
        ));
        assert_eq!(run(list, &[2, 2, 0]), Ok(3));
        assert!(matches!(run(list, &[2, 4]), Err(Failure::Invalid { .. })));
    }

    #[test]
    fn trailing_bytes_are_left() {
        assert_eq!(run(r#""long""#, &[0x02, 0x02]), Ok(1));
        assert!(matches!(
            run(r#""long""#, &[0x80; 11]),
            Err(Failure::Invalid { .. })
        ));
    }
}
