//! Avro's schema resolution (Avro specification, "Schema Resolution"), exactly as the
//! specification defines it: a value decoded with its writer schema, walked beside the writer
//! schema and the reader schema, becomes a value of the reader schema, or fails naming the path
//! to the first part that does not resolve.
//!
//! What resolves:
//! - the same primitive type; the promotions `int` to `long`, `float` or `double`, `long` to
//!   `float` or `double`, `float` to `double`, `string` to `bytes`, and `bytes` to `string`
//!   (bytes that are UTF-8);
//! - records, enums and fixed types of the same unqualified name, or whose reader schema has
//!   the writer's name among its aliases; fixed types of the same size; enum symbols the reader
//!   knows, or the reader's default symbol; record fields matched by name or by the reader
//!   field's aliases, a reader field the writer lacks taking its default, a writer field the
//!   reader lacks passed over;
//! - arrays and maps whose items or values resolve;
//! - a writer union through the branch the value took; a reader union through its first
//!   branch of the writer's type (or, failing one, of a type the writer's promotes to);
//! - logical types: the underlying types resolve as above, and where both schemas carry a
//!   logical type it must be the same one (a `decimal` of the same precision and scale): a
//!   `timestamp-millis` read as `timestamp-micros` would be a different instant, so it fails.
//!   One side's logical type alone is kept or dropped: the number is the same.
//!
//! Nothing else resolves: no narrowing (`long` to `int`, `double` to `float`), no map read as
//! a record, no string read as an enum. `apache-avro`'s own `Value::resolve` sees only the
//! value and casts (a `long` 4294967301 read as `int` becomes 5), so it is used here only to
//! give a value of the reader's exact underlying type its logical representation.

use apache_avro::schema::{Alias, Name, Namespace, RecordField, Schema};
use apache_avro::types::Value;

use super::check::{self, Names};
use super::json;
use super::schema::{guarded, kind, Kind, WriterSchema};

/// Nesting deeper than this is refused; a datum is checked against the reader's (smaller)
/// depth limit before it is decoded, so this is a backstop for values built in code.
/// (Each level of a value the datum limits allow is at most two calls here: a union on the
/// writer's side, then on the reader's.)
const MAX_DEPTH: usize = 2 * (check::MAX_DEPTH_CEILING + 1);

/// A reader schema, with its named types for following references.
#[derive(Debug, Clone)]
pub(crate) struct ReaderSchema {
    schema: Schema,
    names: Names,
}

/// Why a value does not resolve: where (`.field`, `[index]`, `{"key"}` from the root), and
/// what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unresolved {
    pub(crate) path: String,
    pub(crate) what: String,
}

type Step<T> = std::result::Result<T, String>;

impl ReaderSchema {
    pub(crate) fn new(schema: Schema) -> Self {
        let names = check::names(&schema);
        ReaderSchema { schema, names }
    }

    /// `value`, a value of `writer`, resolved to this schema.
    pub(crate) fn resolve(
        &self,
        value: Value,
        writer: &WriterSchema,
    ) -> std::result::Result<Value, Unresolved> {
        let mut walk = Walk {
            writer_names: writer.names(),
            reader_names: &self.names,
            path: String::new(),
        };
        let writer_side = Side {
            schema: writer.schema(),
            ns: &None,
        };
        let reader_side = Side {
            schema: &self.schema,
            ns: &None,
        };
        match walk.resolve(value, writer_side, reader_side, 0) {
            Ok(value) => Ok(value),
            Err(what) => Err(Unresolved {
                path: walk.path,
                what,
            }),
        }
    }
}

/// A schema and the namespace it is read in.
#[derive(Clone, Copy)]
struct Side<'a, 'n> {
    schema: &'a Schema,
    ns: &'n Namespace,
}

impl<'a, 'n> Side<'a, 'n> {
    fn new(schema: &'a Schema, ns: &'n Namespace) -> Self {
        Side { schema, ns }
    }
}

struct Walk<'a> {
    writer_names: &'a Names,
    reader_names: &'a Names,
    path: String,
}

/// The name a type goes by in errors.
fn type_name(schema: &Schema) -> String {
    match schema {
        Schema::Record(r) => format!("record {}", r.name.fullname(None)),
        Schema::Enum(e) => format!("enum {}", e.name.fullname(None)),
        Schema::Fixed(f) => format!("fixed {} of {} bytes", f.name.fullname(None), f.size),
        Schema::Decimal(d) => format!(
            "decimal({}, {}) on {}",
            d.precision,
            d.scale,
            type_name(&d.inner)
        ),
        Schema::Ref { name } => name.fullname(None),
        schema => logical_name(schema)
            .unwrap_or(kind(schema).name())
            .to_string(),
    }
}

/// The logical type a schema carries, by its name in Avro's specification.
fn logical_name(schema: &Schema) -> Option<&'static str> {
    Some(match schema {
        Schema::Date => "date",
        Schema::TimeMillis => "time-millis",
        Schema::TimeMicros => "time-micros",
        Schema::TimestampMillis => "timestamp-millis",
        Schema::TimestampMicros => "timestamp-micros",
        Schema::TimestampNanos => "timestamp-nanos",
        Schema::LocalTimestampMillis => "local-timestamp-millis",
        Schema::LocalTimestampMicros => "local-timestamp-micros",
        Schema::LocalTimestampNanos => "local-timestamp-nanos",
        Schema::BigDecimal => "big-decimal",
        Schema::Uuid => "uuid",
        Schema::Duration => "duration",
        Schema::Decimal(_) => "decimal",
        _ => return None,
    })
}

/// Whether the writer's type may be read as the reader's (Avro's promotions), by kind.
fn promotes(writer: Kind, reader: Kind) -> bool {
    use Kind::*;
    matches!(
        (writer, reader),
        (Int, Long | Float | Double)
            | (Long, Float | Double)
            | (Float, Double)
            | (String, Bytes)
            | (Bytes, String)
    )
}

/// The unqualified part of a name.
fn unqualified(name: &Name) -> &str {
    &name.name
}

/// The name and aliases of a named type.
fn named_parts(schema: &Schema) -> Option<(&Name, Option<&Vec<Alias>>)> {
    match schema {
        Schema::Record(r) => Some((&r.name, r.aliases.as_ref())),
        Schema::Enum(e) => Some((&e.name, e.aliases.as_ref())),
        Schema::Fixed(f) => Some((&f.name, f.aliases.as_ref())),
        Schema::Decimal(d) => named_parts(&d.inner),
        _ => None,
    }
}

/// Whether a writer's named type and a reader's are the same type: the same unqualified
/// name, or the writer's name (unqualified or full) among the reader's aliases. `duration`,
/// which `apache-avro` keeps without its fixed type's name, matches `duration`.
fn same_name(writer: Side<'_, '_>, reader: Side<'_, '_>) -> bool {
    let (Some((w, _)), Some((r, aliases))) =
        (named_parts(writer.schema), named_parts(reader.schema))
    else {
        return matches!(
            (writer.schema, reader.schema),
            (Schema::Duration, Schema::Duration)
        );
    };
    if unqualified(w) == unqualified(r) {
        return true;
    }
    let full = w.fully_qualified_name(writer.ns);
    let reader_ns = r.fully_qualified_name(reader.ns).namespace;
    aliases.into_iter().flatten().any(|alias| {
        alias.name() == unqualified(w)
            || alias.fully_qualified_name(&reader_ns).fullname(None) == full.fullname(None)
    })
}

/// Whether two logical types (or none) let the underlying value through unchanged in meaning:
/// the same one, or only one side with one.
fn logical_agrees(writer: &Schema, reader: &Schema) -> Step<()> {
    let (Some(w), Some(r)) = (logical_name(writer), logical_name(reader)) else {
        return Ok(());
    };
    let same = match (writer, reader) {
        (Schema::Decimal(w), Schema::Decimal(r)) => {
            w.precision == r.precision && w.scale == r.scale
        }
        _ => w == r,
    };
    if same {
        Ok(())
    } else {
        Err(format!(
            "the writer's {} does not resolve to the reader's {}",
            type_name(writer),
            type_name(reader)
        ))
    }
}

/// Whether a writer type and a reader union branch match without promotion (`exact`) or with
/// one: the same kind (named types by name), or a promotion.
fn branch_matches(writer: Side<'_, '_>, branch: Side<'_, '_>, exact: bool) -> bool {
    let (w, r) = (kind(writer.schema), kind(branch.schema));
    match (w, r) {
        (Kind::Record | Kind::Enum, _) | (Kind::Fixed, Kind::Fixed) if w == r => {
            same_name(writer, branch)
        }
        _ if w == r => logical_agrees(writer.schema, branch.schema).is_ok(),
        _ => !exact && promotes(w, r) && logical_agrees(writer.schema, branch.schema).is_ok(),
    }
}

impl<'a> Walk<'a> {
    /// `schema`, with a reference followed to the type it names.
    fn follow(&self, side: Side<'a, '_>, names: &'a Names) -> Step<(&'a Schema, Namespace)> {
        match side.schema {
            Schema::Ref { name } => {
                let full = name.fully_qualified_name(side.ns);
                match names.get(&full) {
                    Some(schema) => Ok((schema, full.namespace)),
                    None => Err(format!("the schema names no type {}", full.fullname(None))),
                }
            }
            schema => Ok((schema, side.ns.clone())),
        }
    }

    fn resolve(
        &mut self,
        value: Value,
        writer: Side<'a, '_>,
        reader: Side<'a, '_>,
        depth: usize,
    ) -> Step<Value> {
        check::level(depth, || self.resolve_level(value, writer, reader, depth))
    }

    fn resolve_level(
        &mut self,
        value: Value,
        writer: Side<'a, '_>,
        reader: Side<'a, '_>,
        depth: usize,
    ) -> Step<Value> {
        if depth > MAX_DEPTH {
            return Err(format!("nested deeper than {MAX_DEPTH}"));
        }
        let depth = depth + 1;
        let (w, wns) = self.follow(writer, self.writer_names)?;
        let (r, rns) = self.follow(reader, self.reader_names)?;
        let writer = Side {
            schema: w,
            ns: &wns,
        };
        let reader = Side {
            schema: r,
            ns: &rns,
        };
        match (w, r) {
            (Schema::Union(union), _) => {
                let Value::Union(i, inner) = value else {
                    return Err("the writer's value is not of its union".into());
                };
                let Some(branch) = union.variants().get(i as usize) else {
                    return Err(format!("the writer's union has no branch {i}"));
                };
                let branch = Side {
                    schema: branch,
                    ns: &wns,
                };
                self.resolve(*inner, branch, reader, depth)
            }
            (_, Schema::Union(union)) => {
                let found = [true, false].into_iter().find_map(|exact| {
                    union.variants().iter().position(|b| {
                        self.follow(
                            Side {
                                schema: b,
                                ns: &rns,
                            },
                            self.reader_names,
                        )
                        .is_ok_and(|(b, ns)| {
                            branch_matches(writer, Side { schema: b, ns: &ns }, exact)
                        })
                    })
                });
                let Some(j) = found else {
                    return Err(format!(
                        "the writer's {} matches no branch of the reader's union",
                        type_name(w)
                    ));
                };
                let branch = Side {
                    schema: &union.variants()[j],
                    ns: &rns,
                };
                let inner = self.resolve(value, writer, branch, depth)?;
                Ok(Value::Union(j as u32, Box::new(inner)))
            }
            (Schema::Record(wr), Schema::Record(rr)) => {
                if !same_name(writer, reader) {
                    return Err(self.mismatch(w, r));
                }
                let Value::Record(values) = value else {
                    return Err("the writer's value is not a record".into());
                };
                if values.len() != wr.fields.len() {
                    return Err("the writer's record has the wrong number of fields".into());
                }
                let mut values: Vec<Option<Value>> =
                    values.into_iter().map(|(_, v)| Some(v)).collect();
                let w_inner = wr.name.fully_qualified_name(&wns).namespace;
                let r_inner = rr.name.fully_qualified_name(&rns).namespace;
                let mut out = Vec::with_capacity(rr.fields.len());
                let len = self.path.len();
                for field in &rr.fields {
                    self.path.push('.');
                    self.path.push_str(&field.name);
                    let value = match writer_field(
                        wr.lookup.get(&field.name).copied(),
                        field,
                        &wr.lookup,
                    ) {
                        Some(i) => {
                            let Some(value) = values[i].take() else {
                                return Err("two reader fields name this writer field".into());
                            };
                            let w_field = Side {
                                schema: &wr.fields[i].schema,
                                ns: &w_inner,
                            };
                            let r_field = Side {
                                schema: &field.schema,
                                ns: &r_inner,
                            };
                            self.resolve(value, w_field, r_field, depth)?
                        }
                        None => {
                            match &field.default {
                                Some(default) => json::default_value(
                                    default,
                                    &field.schema,
                                    self.reader_names,
                                    &r_inner,
                                    &mut self.path,
                                    depth,
                                )?,
                                None => return Err(
                                    "the writer has no such field, and the reader's has no default"
                                        .into(),
                                ),
                            }
                        }
                    };
                    self.path.truncate(len);
                    out.push((field.name.clone(), value));
                }
                Ok(Value::Record(out))
            }
            (Schema::Enum(we), Schema::Enum(re)) => {
                if !same_name(writer, reader) {
                    return Err(self.mismatch(w, r));
                }
                let symbol = match value {
                    Value::Enum(i, _) => we.symbols.get(i as usize).cloned(),
                    _ => None,
                };
                let Some(symbol) = symbol else {
                    return Err("the writer's value is not one of its symbols".into());
                };
                let chosen = if re.symbols.contains(&symbol) {
                    symbol
                } else {
                    match &re.default {
                        Some(default) => default.clone(),
                        None => {
                            return Err(format!(
                                "the reader's enum has no symbol {symbol:?} and no default"
                            ))
                        }
                    }
                };
                match re.symbols.iter().position(|s| *s == chosen) {
                    Some(i) => Ok(Value::Enum(i as u32, chosen)),
                    None => Err(format!("the reader's default {chosen:?} is not its symbol")),
                }
            }
            (Schema::Array(wa), Schema::Array(ra)) => {
                let Value::Array(items) = value else {
                    return Err("the writer's value is not an array".into());
                };
                let (w_item, r_item) = (Side::new(&wa.items, &wns), Side::new(&ra.items, &rns));
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.into_iter().enumerate() {
                    out.push(self.step(format_args!("[{i}]"), item, w_item, r_item, depth)?);
                }
                Ok(Value::Array(out))
            }
            (Schema::Map(wm), Schema::Map(rm)) => {
                let Value::Map(entries) = value else {
                    return Err("the writer's value is not a map".into());
                };
                let (w_value, r_value) = (Side::new(&wm.types, &wns), Side::new(&rm.types, &rns));
                let mut out = std::collections::HashMap::with_capacity(entries.len());
                for (key, item) in entries {
                    let item =
                        self.step(format_args!("{{{key:?}}}"), item, w_value, r_value, depth)?;
                    out.insert(key, item);
                }
                Ok(Value::Map(out))
            }
            _ => self.primitive(value, writer, reader),
        }
    }

    /// An item of an array or a map (`step` names it in the path), resolved; the path keeps
    /// the step when it fails.
    fn step(
        &mut self,
        step: std::fmt::Arguments<'_>,
        value: Value,
        writer: Side<'a, '_>,
        reader: Side<'a, '_>,
        depth: usize,
    ) -> Step<Value> {
        use std::fmt::Write;
        let len = self.path.len();
        let _ = self.path.write_fmt(step);
        let value = self.resolve(value, writer, reader, depth)?;
        self.path.truncate(len);
        Ok(value)
    }

    /// A value of a primitive type, fixed type or logical type, read as the reader's.
    fn primitive(&self, value: Value, writer: Side<'_, '_>, reader: Side<'_, '_>) -> Step<Value> {
        let (w, r) = (writer.schema, reader.schema);
        let (wk, rk) = (kind(w), kind(r));
        let composite = |k| matches!(k, Kind::Record | Kind::Enum | Kind::Array | Kind::Map);
        if composite(wk) || composite(rk) || !(wk == rk || promotes(wk, rk)) {
            return Err(self.mismatch(w, r));
        }
        if wk == Kind::Fixed {
            let size = |s: &Schema| match s {
                Schema::Fixed(f) => Some(f.size),
                Schema::Decimal(d) => match &*d.inner {
                    Schema::Fixed(f) => Some(f.size),
                    _ => None,
                },
                Schema::Duration => Some(12),
                _ => None,
            };
            if !same_name(writer, reader) || size(w) != size(r) {
                return Err(self.mismatch(w, r));
            }
        }
        logical_agrees(w, r)?;
        if logical_name(w).is_some() && logical_name(w) == logical_name(r) {
            // The same logical type (a decimal of the same precision and scale): as it is.
            return Ok(value);
        }
        // The value as the writer's underlying type, then as the reader's.
        let plain = match (plain(value)?, rk) {
            (Value::Int(n), Kind::Long) => Value::Long(n.into()),
            (Value::Int(n), Kind::Float) => Value::Float(n as f32),
            (Value::Int(n), Kind::Double) => Value::Double(n.into()),
            (Value::Long(n), Kind::Float) => Value::Float(n as f32),
            (Value::Long(n), Kind::Double) => Value::Double(n as f64),
            (Value::Float(f), Kind::Double) => Value::Double(f.into()),
            (Value::String(s), Kind::Bytes) => Value::Bytes(s.into_bytes()),
            // A decimal on a fixed type, as its plain bytes.
            (Value::Bytes(b), Kind::Fixed) => Value::Fixed(b.len(), b),
            (Value::Bytes(b), Kind::String) => match String::from_utf8(b) {
                Ok(s) => Value::String(s),
                Err(_) => return Err("the writer's bytes are not UTF-8, so not a string".into()),
            },
            (value, _) => value,
        };
        match (plain, r) {
            (plain, r) if logical_name(r).is_none() => Ok(plain),
            // The bytes are the decimal's unscaled number, whatever its precision.
            (Value::Bytes(b) | Value::Fixed(_, b), Schema::Decimal(_)) => {
                Ok(Value::Decimal(apache_avro::Decimal::from(b)))
            }
            (plain, r) => Self::represent(plain, r),
        }
    }

    /// A value of the reader's underlying type in its logical type's representation.
    fn represent(plain: Value, r: &Schema) -> Step<Value> {
        // Only the representation changes: the value is of the reader's underlying type.
        match guarded(|| plain.resolve(r)) {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(format!("not a value of the reader's {}: {e}", type_name(r))),
            Err(panic) => Err(panic),
        }
    }

    fn mismatch(&self, writer: &Schema, reader: &Schema) -> String {
        format!(
            "the writer's {} does not resolve to the reader's {}",
            type_name(writer),
            type_name(reader)
        )
    }
}

/// The writer field a reader field reads: the one of its name, or else of one of its
/// aliases.
fn writer_field(
    by_name: Option<usize>,
    field: &RecordField,
    lookup: &std::collections::BTreeMap<String, usize>,
) -> Option<usize> {
    by_name.or_else(|| {
        field
            .aliases
            .iter()
            .flatten()
            .find_map(|alias| lookup.get(alias).copied())
    })
}

/// A value in its underlying type's representation: a logical type's value as the `int`,
/// `long`, `bytes`, `string` or `fixed` it is written as.
fn plain(value: Value) -> Step<Value> {
    Ok(match value {
        Value::Date(n) | Value::TimeMillis(n) => Value::Int(n),
        Value::TimeMicros(n)
        | Value::TimestampMillis(n)
        | Value::TimestampMicros(n)
        | Value::TimestampNanos(n)
        | Value::LocalTimestampMillis(n)
        | Value::LocalTimestampMicros(n)
        | Value::LocalTimestampNanos(n) => Value::Long(n),
        Value::Uuid(u) => Value::String(u.to_string()),
        Value::Duration(d) => Value::Fixed(12, <[u8; 12]>::from(d).to_vec()),
        Value::Decimal(d) => {
            let bytes: Vec<u8> = (&d)
                .try_into()
                .map_err(|e: apache_avro::Error| e.to_string())?;
            Value::Bytes(bytes)
        }
        Value::BigDecimal(d) => {
            // Its bytes as `apache-avro` writes them: the datum of a `bytes`.
            let datum = apache_avro::to_avro_datum(&Schema::BigDecimal, Value::BigDecimal(d))
                .map_err(|e| e.to_string())?;
            apache_avro::from_avro_datum(&Schema::Bytes, &mut &datum[..], None)
                .map_err(|e| e.to_string())?
        }
        value => value,
    })
}
