//! A schema's Parsing Canonical Form and its CRC-64-AVRO fingerprint (Avro specification,
//! "Parsing Canonical Form for Schemas" and "Schema Fingerprints"), computed from the schema's
//! JSON text.
//!
//! Not `apache-avro`'s: version 0.21 keeps a decimal's `precision` and `scale` in the form
//! (the specification strips them) and turns a `duration` fixed type into one named
//! `duration`, so its fingerprints of such schemas differ from other implementations' (Apache
//! Avro's Python implementation agrees with this module). A primitive type given as an object
//! with other attributes (`{"type": "long", "logicalType": "timestamp-millis"}`) keeps its
//! object form, `{"type":"long"}`, as both of those implementations have it; only the object
//! `{"type": "long"}` alone becomes `"long"`.

use std::collections::HashSet;

use serde_json::{Map, Value};

/// Avro's primitive type names.
pub(crate) const PRIMITIVES: [&str; 8] = [
    "null", "boolean", "int", "long", "float", "double", "bytes", "string",
];

/// Nesting deeper than this is refused (`serde_json` parses JSON at most 128 deep).
const MAX_DEPTH: usize = 256;

/// The Parsing Canonical Form of the schema whose JSON is `json`.
pub(crate) fn canonical_form(json: &Value) -> Result<String, String> {
    written(json, false)
}

/// The schema's **decoding form** (spec 15.3): its Parsing Canonical Form with, on every
/// primitive and fixed type that has them, the attributes that change what a datum's bytes
/// mean, `logicalType`, `precision` and `scale`, after its others. Two schemas with one
/// fingerprint decode every datum to the same values if and only if their decoding forms are
/// the same: a `timestamp-millis` and a `timestamp-micros` share a fingerprint, not a
/// decoding form.
pub(crate) fn decoding_form(json: &Value) -> Result<String, String> {
    written(json, true)
}

/// The canonical form, with the logical type attributes if `logical`.
fn written(json: &Value, logical: bool) -> Result<String, String> {
    let mut out = String::new();
    let mut form = Form {
        defined: HashSet::new(),
        logical,
    };
    form.form(json, "", &mut out, 0)?;
    Ok(out)
}

/// A form being written: the named types defined so far, and whether logical types are kept.
struct Form {
    defined: HashSet<String>,
    logical: bool,
}

/// The attributes of a decoding form, in the order it writes them.
const LOGICAL: [&str; 3] = ["logicalType", "precision", "scale"];

impl Form {
    /// Writes `object`'s logical type attributes, if this form keeps them.
    fn logical(&self, object: &Map<String, Value>, out: &mut String) {
        if !self.logical {
            return;
        }
        for key in LOGICAL {
            if let Some(value) = object.get(key) {
                out.push(',');
                quote(key, out);
                out.push(':');
                out.push_str(&value.to_string());
            }
        }
    }
}

/// The CRC-64-AVRO fingerprint of `bytes` (the specification's `fingerprint64`).
pub(crate) fn fingerprint64(bytes: &[u8]) -> u64 {
    const EMPTY: u64 = 0xc15d_213a_a4d7_a795;
    static TABLE: std::sync::OnceLock<[u64; 256]> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut table = [0u64; 256];
        for (i, entry) in table.iter_mut().enumerate() {
            let mut fp = i as u64;
            for _ in 0..8 {
                fp = (fp >> 1) ^ (EMPTY & 0u64.wrapping_sub(fp & 1));
            }
            *entry = fp;
        }
        table
    });
    bytes.iter().fold(EMPTY, |fp, &b| {
        (fp >> 8) ^ table[((fp ^ u64::from(b)) & 0xff) as usize]
    })
}

fn quote(s: &str, out: &mut String) {
    out.push_str(&serde_json::to_string(s).expect("a string serializes"));
}

/// A name as a full name: as is if it has a dot, else in `namespace`.
fn full_name(name: &str, namespace: &str) -> String {
    match (name.contains('.'), namespace.is_empty()) {
        (true, _) | (false, true) => name.to_owned(),
        (false, false) => format!("{namespace}.{name}"),
    }
}

/// The namespace of a full name: what comes before its last dot.
fn namespace_of(full: &str) -> &str {
    full.rsplit_once('.').map_or("", |(ns, _)| ns)
}

impl Form {
    fn form(
        &mut self,
        json: &Value,
        namespace: &str,
        out: &mut String,
        depth: usize,
    ) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err(format!("nested deeper than {MAX_DEPTH}"));
        }
        let depth = depth + 1;
        match json {
            Value::String(name) if PRIMITIVES.contains(&name.as_str()) => quote(name, out),
            Value::String(name) => quote(&full_name(name, namespace), out),
            Value::Array(branches) => {
                out.push('[');
                for (i, branch) in branches.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    self.form(branch, namespace, out, depth)?;
                }
                out.push(']');
            }
            Value::Object(object) => self.object_form(object, namespace, out, depth)?,
            other => return Err(format!("{other} is not a schema")),
        }
        Ok(())
    }

    fn object_form(
        &mut self,
        object: &Map<String, Value>,
        namespace: &str,
        out: &mut String,
        depth: usize,
    ) -> Result<(), String> {
        let Some(kind) = object.get("type") else {
            return Err("a schema object without a type".into());
        };
        let Value::String(kind) = kind else {
            // {"type": <schema>}: the schema it holds.
            out.push_str("{\"type\":");
            self.form(kind, namespace, out, depth)?;
            out.push('}');
            return Ok(());
        };
        match kind.as_str() {
            "record" | "error" | "enum" | "fixed" => {
                let Some(Value::String(name)) = object.get("name") else {
                    return Err(format!("a {kind} without a name"));
                };
                let namespace = match object.get("namespace") {
                    Some(Value::String(ns)) if !name.contains('.') => ns.as_str(),
                    _ => namespace,
                };
                let full = full_name(name, namespace);
                // A type defined before is written by its name.
                if !self.defined.insert(full.clone()) {
                    quote(&full, out);
                    return Ok(());
                }
                out.push_str("{\"name\":");
                quote(&full, out);
                out.push_str(",\"type\":");
                quote(kind, out);
                match kind.as_str() {
                    "enum" => {
                        let Some(Value::Array(symbols)) = object.get("symbols") else {
                            return Err("an enum without symbols".into());
                        };
                        out.push_str(",\"symbols\":[");
                        for (i, symbol) in symbols.iter().enumerate() {
                            let Value::String(symbol) = symbol else {
                                return Err("an enum symbol that is not a string".into());
                            };
                            if i > 0 {
                                out.push(',');
                            }
                            quote(symbol, out);
                        }
                        out.push(']');
                    }
                    "fixed" => {
                        let size = match object.get("size") {
                            Some(Value::Number(n)) => n.as_u64(),
                            Some(Value::String(s)) => s.parse::<u64>().ok(),
                            _ => None,
                        };
                        let Some(size) = size else {
                            return Err("a fixed type without an integer size".into());
                        };
                        out.push_str(&format!(",\"size\":{size}"));
                        self.logical(object, out);
                    }
                    _ => {
                        let Some(Value::Array(fields)) = object.get("fields") else {
                            return Err(format!("a {kind} without fields"));
                        };
                        let inner = namespace_of(&full).to_owned();
                        out.push_str(",\"fields\":[");
                        for (i, field) in fields.iter().enumerate() {
                            let (Some(Value::String(name)), Some(schema)) =
                                (field.get("name"), field.get("type"))
                            else {
                                return Err("a field without a name or a type".into());
                            };
                            if i > 0 {
                                out.push(',');
                            }
                            out.push_str("{\"name\":");
                            quote(name, out);
                            out.push_str(",\"type\":");
                            self.form(schema, &inner, out, depth)?;
                            out.push('}');
                        }
                        out.push(']');
                    }
                }
                out.push('}');
            }
            "array" | "map" => {
                let key = if kind == "array" { "items" } else { "values" };
                let Some(inner) = object.get(key) else {
                    return Err(format!("an {kind} without {key}"));
                };
                out.push_str("{\"type\":");
                quote(kind, out);
                out.push_str(&format!(",\"{key}\":"));
                self.form(inner, namespace, out, depth)?;
                out.push('}');
            }
            // A primitive, or a reference, given as an object: alone, its simple form; with other
            // attributes (a logical type), the object with its type only.
            _ if object.len() == 1 => {
                self.form(&Value::String(kind.clone()), namespace, out, depth)?
            }
            _ if PRIMITIVES.contains(&kind.as_str()) => {
                out.push_str("{\"type\":");
                quote(kind, out);
                self.logical(object, out);
                out.push('}');
            }
            _ => {
                out.push_str("{\"type\":");
                quote(&full_name(kind, namespace), out);
                out.push('}');
            }
        }
        Ok(())
    }
}
