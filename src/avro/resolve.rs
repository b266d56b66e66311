//! Avro's schema resolution of a decoded value to a reader schema: `apache-avro`'s
//! `Value::resolve`, after renaming the record fields that the reader schema knows by an alias.
//!
//! `Value::resolve` sees the value, not the writer schema, and finds each reader field by its
//! name only; the Avro specification also matches a reader field whose `aliases` hold the
//! writer's field name (a field renamed). So fields are renamed first, as the reader schema's
//! aliases say, and then resolved.

use apache_avro::schema::{Namespace, RecordSchema, Schema};
use apache_avro::types::Value;

use super::check::{self, Names};

/// A reader schema, with its named types for following references.
#[derive(Debug, Clone)]
pub(crate) struct ReaderSchema {
    schema: Schema,
    names: Names,
    /// Whether any field has aliases (if not, nothing is renamed).
    aliased: bool,
}

impl ReaderSchema {
    pub(crate) fn new(schema: Schema) -> Self {
        let names = check::names(&schema);
        let aliased = names.values().chain([&schema]).any(|s| {
            matches!(s, Schema::Record(r) if r.fields.iter().any(|f| f.aliases.as_ref().is_some_and(|a| !a.is_empty())))
        });
        ReaderSchema {
            schema,
            names,
            aliased,
        }
    }

    /// `value` resolved to the schema.
    pub(crate) fn resolve(&self, mut value: Value) -> apache_avro::AvroResult<Value> {
        if self.aliased {
            rename(&mut value, &self.schema, &self.names, &None, 0);
        }
        value.resolve(&self.schema)
    }
}

/// Renames the fields of the records in `value` that `schema` knows by an alias.
fn rename(value: &mut Value, schema: &Schema, names: &Names, ns: &Namespace, depth: usize) {
    // Values are checked against the reader's depth limit when decoded; this is a backstop.
    if depth > 512 {
        return;
    }
    match (value, schema) {
        (value, Schema::Ref { name }) => {
            let full = name.fully_qualified_name(ns);
            if let Some(named) = names.get(&full) {
                rename(value, named, names, &full.namespace, depth + 1);
            }
        }
        (Value::Union(_, inner), schema) => rename(inner, schema, names, ns, depth + 1),
        (value, Schema::Union(union)) => {
            // The first branch of the value's kind.
            let kind = |s: &Schema| {
                matches!(
                    (&*value, s),
                    (Value::Record(_), Schema::Record(_) | Schema::Ref { .. })
                        | (Value::Array(_), Schema::Array(_))
                        | (Value::Map(_), Schema::Map(_))
                )
            };
            if let Some(branch) = union.variants().iter().find(|s| kind(s)) {
                rename(value, branch, names, ns, depth + 1);
            }
        }
        (
            Value::Record(fields),
            Schema::Record(RecordSchema {
                name,
                fields: wanted,
                ..
            }),
        ) => {
            let inner = name.fully_qualified_name(ns).namespace;
            for field in wanted {
                let position = match fields.iter().position(|(n, _)| *n == field.name) {
                    Some(found) => Some(found),
                    None => field.aliases.as_ref().and_then(|aliases| {
                        let found = fields.iter().position(|(n, _)| aliases.contains(n))?;
                        fields[found].0 = field.name.clone();
                        Some(found)
                    }),
                };
                if let Some(i) = position {
                    rename(&mut fields[i].1, &field.schema, names, &inner, depth + 1);
                }
            }
        }
        (Value::Array(items), Schema::Array(array)) => {
            for item in items {
                rename(item, &array.items, names, ns, depth + 1);
            }
        }
        (Value::Map(entries), Schema::Map(map)) => {
            for item in entries.values_mut() {
                rename(item, &map.types, names, ns, depth + 1);
            }
        }
        _ => {}
    }
}
