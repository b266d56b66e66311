//! Where in a value it stops conforming to a schema, for the writer's errors: `apache-avro`
//! gives a reason but not a path.

use apache_avro::schema::{Namespace, RecordSchema, Schema};
use apache_avro::types::Value;

use super::check::Names;
use super::schema::WriterSchema;

/// The path to the first part of `value` that does not fit `schema` (`.field`, `[index]`,
/// `{"key"}` steps), or an empty string for the value itself or when none is found.
pub(crate) fn find(value: &Value, schema: &WriterSchema) -> String {
    let mut path = String::new();
    locate(value, schema.schema(), schema.names(), &None, &mut path, 0);
    path
}

/// Whether `value` is found not to fit `schema`; `path` then ends with the steps to where.
fn locate(
    value: &Value,
    schema: &Schema,
    names: &Names,
    ns: &Namespace,
    path: &mut String,
    depth: usize,
) -> bool {
    super::check::level(depth, || {
        locate_level(value, schema, names, ns, path, depth)
    })
}

fn locate_level(
    value: &Value,
    schema: &Schema,
    names: &Names,
    ns: &Namespace,
    path: &mut String,
    depth: usize,
) -> bool {
    if depth > super::check::MAX_DEPTH_CEILING + 1 {
        return false;
    }
    let len = path.len();
    let found = match (value, schema) {
        (_, Schema::Ref { name }) => {
            let full = name.fully_qualified_name(ns);
            match names.get(&full) {
                Some(named) => return locate(value, named, names, &full.namespace, path, depth),
                None => true,
            }
        }
        (Value::Union(i, inner), Schema::Union(union)) => match union.variants().get(*i as usize) {
            Some(variant) => return locate(inner, variant, names, ns, path, depth + 1),
            None => true,
        },
        (_, Schema::Union(union)) => !union.variants().iter().any(|variant| {
            let mut scratch = String::new();
            !locate(value, variant, names, ns, &mut scratch, depth + 1)
        }),
        (
            Value::Record(fields),
            Schema::Record(RecordSchema {
                name,
                fields: schema_fields,
                ..
            }),
        ) => {
            let inner = name.fully_qualified_name(ns).namespace;
            let mut found = false;
            for field in schema_fields {
                path.push('.');
                path.push_str(&field.name);
                match fields.iter().find(|(n, _)| *n == field.name) {
                    Some((_, v)) => {
                        if locate(v, &field.schema, names, &inner, path, depth + 1) {
                            found = true;
                        }
                    }
                    None => found = field.default.is_none(),
                }
                if found {
                    break;
                }
                path.truncate(len);
            }
            if !found {
                // A field the schema does not have.
                if let Some((extra, _)) = fields
                    .iter()
                    .find(|(n, _)| !schema_fields.iter().any(|f| f.name == *n))
                {
                    path.push('.');
                    path.push_str(extra);
                    found = true;
                }
            }
            return found;
        }
        (Value::Array(items), Schema::Array(array)) => {
            for (i, item) in items.iter().enumerate() {
                path.push_str(&format!("[{i}]"));
                if locate(item, &array.items, names, ns, path, depth + 1) {
                    return true;
                }
                path.truncate(len);
            }
            false
        }
        (Value::Map(entries), Schema::Map(map)) => {
            let mut keys: Vec<&String> = entries.keys().collect();
            keys.sort();
            for key in keys {
                path.push_str(&format!("{{{key:?}}}"));
                if locate(&entries[key], &map.types, names, ns, path, depth + 1) {
                    return true;
                }
                path.truncate(len);
            }
            false
        }
        (Value::Record(_) | Value::Array(_) | Value::Map(_), _) => true,
        (_, Schema::Record(_) | Schema::Array(_) | Schema::Map(_)) => true,
        (value, schema) => !leaf_fits(value, schema),
    };
    found
}

/// Whether a value that is not a record, array or map fits a schema of the same kind, as
/// `apache-avro` validates it (sizes and symbols included).
fn leaf_fits(value: &Value, schema: &Schema) -> bool {
    match (value, schema) {
        (Value::Null, Schema::Null)
        | (Value::Boolean(_), Schema::Boolean)
        | (Value::Int(_), Schema::Int | Schema::Long | Schema::Date | Schema::TimeMillis)
        | (
            Value::Long(_),
            Schema::Long
            | Schema::TimeMicros
            | Schema::TimestampMillis
            | Schema::TimestampMicros
            | Schema::LocalTimestampMillis
            | Schema::LocalTimestampMicros,
        )
        | (Value::Float(_), Schema::Float | Schema::Double)
        | (Value::Double(_), Schema::Double)
        | (Value::Bytes(_), Schema::Bytes | Schema::Decimal(_))
        | (Value::String(_), Schema::String | Schema::Uuid)
        | (Value::Date(_), Schema::Date)
        | (Value::TimeMillis(_), Schema::TimeMillis)
        | (Value::TimeMicros(_), Schema::TimeMicros)
        | (Value::TimestampMillis(_), Schema::TimestampMillis)
        | (Value::TimestampMicros(_), Schema::TimestampMicros)
        | (Value::TimestampNanos(_), Schema::TimestampNanos)
        | (Value::LocalTimestampMillis(_), Schema::LocalTimestampMillis)
        | (Value::LocalTimestampMicros(_), Schema::LocalTimestampMicros)
        | (Value::LocalTimestampNanos(_), Schema::LocalTimestampNanos)
        | (Value::Decimal(_), Schema::Decimal(_))
        | (Value::BigDecimal(_), Schema::BigDecimal)
        | (Value::Duration(_), Schema::Duration)
        | (Value::Uuid(_), Schema::Uuid)
        | (Value::Fixed(_, _), Schema::Decimal(_)) => true,
        (Value::Fixed(n, _), Schema::Fixed(fixed)) => *n == fixed.size,
        (Value::Bytes(b), Schema::Fixed(fixed)) => b.len() == fixed.size,
        (Value::Fixed(n, _), Schema::Duration) => *n == 12,
        (Value::String(s), Schema::Enum(e)) => e.symbols.contains(s),
        (Value::Enum(i, s), Schema::Enum(e)) => match e.symbols.get(*i as usize) {
            Some(symbol) => symbol == s,
            None => e.default.is_some(),
        },
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_the_field() {
        let schema = WriterSchema::parse(
            r#"{"type":"record","name":"r","fields":[
                {"name":"a","type":"long"},
                {"name":"b","type":{"type":"array","items":{"type":"record","name":"i","fields":[
                    {"name":"c","type":["null","string"]}]}}}]}"#,
        )
        .unwrap();
        let item = |c: Value| Value::Record(vec![("c".into(), c)]);
        let value = Value::Record(vec![
            ("a".into(), Value::Long(1)),
            (
                "b".into(),
                Value::Array(vec![item(Value::Null), item(Value::Int(3))]),
            ),
        ]);
        assert_eq!(find(&value, &schema), ".b[1].c");
        let value = Value::Record(vec![("a".into(), Value::String("x".into()))]);
        assert_eq!(find(&value, &schema), ".a");
        let value = Value::Record(vec![("a".into(), Value::Long(1))]);
        assert_eq!(find(&value, &schema), ".b");
    }
}
