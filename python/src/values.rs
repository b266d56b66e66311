//! Avro values and Python objects, both ways, as fastavro maps them: records and maps are
//! dicts, arrays lists, enums their symbol, unions their branch's value, `bytes` and `fixed`
//! bytes; `date` a `datetime.date`, `time-*` a `datetime.time`, `timestamp-millis`/`-micros` an
//! aware `datetime` in UTC (`local-timestamp-*` a naive one), `uuid` a `uuid.UUID`, `decimal` a
//! `decimal.Decimal`.

use std::collections::HashMap;

use apache_avro::schema::{Schema, UnionSchema};
use apache_avro::types::Value;
use cobsfile::avro::{apache_avro, DatumLimits, Visit};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

/// Python's modules and functions the conversions call, looked up once.
struct Py_ {
    date_fromordinal: Py<PyAny>,
    datetime_utc: Py<PyAny>,
    epoch_ordinal: i64,
    time: Py<PyAny>,
    timedelta: Py<PyAny>,
    naive_epoch: Py<PyAny>,
    uuid: Py<PyAny>,
    decimal: Py<PyAny>,
}

static PY: PyOnceLock<Py_> = PyOnceLock::new();

fn py_(py: Python<'_>) -> PyResult<&Py_> {
    PY.get_or_try_init(py, || {
        let datetime = py.import("datetime")?;
        let date = datetime.getattr("date")?;
        let dt = datetime.getattr("datetime")?;
        let utc = datetime.getattr("timezone")?.getattr("utc")?;
        let epoch_ordinal: i64 = date
            .call1((1970, 1, 1))?
            .call_method0("toordinal")?
            .extract()?;
        Ok(Py_ {
            date_fromordinal: date.getattr("fromordinal")?.unbind(),
            datetime_utc: utc.unbind(),
            epoch_ordinal,
            time: datetime.getattr("time")?.unbind(),
            timedelta: datetime.getattr("timedelta")?.unbind(),
            naive_epoch: dt.call1((1970, 1, 1))?.unbind(),
            uuid: py.import("uuid")?.getattr("UUID")?.unbind(),
            decimal: py.import("decimal")?.getattr("Decimal")?.unbind(),
        })
    })
}

/// A decoded Avro value of `schema` as a Python object (the schema gives decimals their
/// scale; `names` resolves its references).
pub(crate) fn to_py(
    py: Python<'_>,
    value: Value,
    schema: &Schema,
    names: &Names,
) -> PyResult<Py<PyAny>> {
    let schema = match schema {
        Schema::Ref { name } => names.get(name).unwrap_or(schema),
        other => other,
    };
    Ok(match value {
        Value::Null => py.None(),
        Value::Boolean(b) => PyBool::new(py, b).to_owned().into_any().unbind(),
        Value::Int(i) => i.into_pyobject(py)?.into_any().unbind(),
        Value::Long(i) => i.into_pyobject(py)?.into_any().unbind(),
        Value::Float(f) => (f as f64).into_pyobject(py)?.into_any().unbind(),
        Value::Double(f) => f.into_pyobject(py)?.into_any().unbind(),
        Value::Bytes(b) | Value::Fixed(_, b) => PyBytes::new(py, &b).into_any().unbind(),
        Value::String(s) | Value::Enum(_, s) => PyString::new(py, &s).into_any().unbind(),
        Value::Union(i, inner) => {
            let branch = match schema {
                Schema::Union(u) => u.variants().get(i as usize).unwrap_or(schema),
                other => other,
            };
            to_py(py, *inner, branch, names)?
        }
        Value::Array(items) => {
            let item_schema = match schema {
                Schema::Array(a) => a.items.as_ref(),
                other => other,
            };
            let list = PyList::empty(py);
            for item in items {
                list.append(to_py(py, item, item_schema, names)?)?;
            }
            list.into_any().unbind()
        }
        Value::Map(entries) => {
            let value_schema = match schema {
                Schema::Map(m) => m.types.as_ref(),
                other => other,
            };
            let dict = PyDict::new(py);
            for (k, v) in entries {
                dict.set_item(k, to_py(py, v, value_schema, names)?)?;
            }
            dict.into_any().unbind()
        }
        Value::Record(fields) => {
            let dict = PyDict::new(py);
            for (i, (k, v)) in fields.into_iter().enumerate() {
                let field_schema = match schema {
                    Schema::Record(r) => r.fields.get(i).map(|f| &f.schema).unwrap_or(schema),
                    other => other,
                };
                let v = to_py(py, v, field_schema, names)?;
                dict.set_item(k, v)?;
            }
            dict.into_any().unbind()
        }
        Value::Date(days) => {
            let p = py_(py)?;
            p.date_fromordinal
                .call1(py, (p.epoch_ordinal + i64::from(days),))?
        }
        Value::TimeMillis(ms) => time_of(py, i64::from(ms) * 1000)?,
        Value::TimeMicros(us) => time_of(py, us)?,
        Value::TimestampMillis(ms) => utc_datetime(py, ms.saturating_mul(1000))?,
        Value::TimestampMicros(us) => utc_datetime(py, us)?,
        Value::LocalTimestampMillis(ms) => naive_datetime(py, ms.saturating_mul(1000))?,
        Value::LocalTimestampMicros(us) => naive_datetime(py, us)?,
        // Python's datetime holds microseconds: nanoseconds stay an int, as in fastavro.
        Value::TimestampNanos(ns) | Value::LocalTimestampNanos(ns) => {
            ns.into_pyobject(py)?.into_any().unbind()
        }
        Value::Uuid(uuid) => py_(py)?.uuid.call1(py, (uuid.to_string(),))?,
        Value::Decimal(decimal) => {
            let scale = match schema {
                Schema::Decimal(d) => d.scale as i64,
                _ => 0,
            };
            let bytes: Vec<u8> = Vec::<u8>::try_from(decimal)
                .map_err(|e| PyValueError::new_err(format!("decimal: {e}")))?;
            decimal_of(py, &bytes, scale)?
        }
        Value::BigDecimal(big) => py_(py)?.decimal.call1(py, (big.to_string(),))?,
        Value::Duration(d) => {
            let months: u32 = d.months().into();
            let days: u32 = d.days().into();
            let millis: u32 = d.millis().into();
            PyTuple::new(py, [months, days, millis])?
                .into_any()
                .unbind()
        }
    })
}

fn time_of(py: Python<'_>, micros: i64) -> PyResult<Py<PyAny>> {
    let p = py_(py)?;
    let (h, rest) = (micros / 3_600_000_000, micros % 3_600_000_000);
    let (m, rest) = (rest / 60_000_000, rest % 60_000_000);
    let (s, us) = (rest / 1_000_000, rest % 1_000_000);
    p.time.call1(py, (h, m, s, us))
}

fn utc_datetime(py: Python<'_>, micros: i64) -> PyResult<Py<PyAny>> {
    let p = py_(py)?;
    let naive = naive_datetime(py, micros)?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("tzinfo", p.datetime_utc.bind(py))?;
    naive.call_method(py, "replace", (), Some(&kwargs))
}

fn naive_datetime(py: Python<'_>, micros: i64) -> PyResult<Py<PyAny>> {
    let p = py_(py)?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("microseconds", micros)?;
    let delta = p.timedelta.call(py, (), Some(&kwargs))?;
    p.naive_epoch.call_method1(py, "__add__", (delta,))
}

/// The named types of a schema, by full name: references are followed through them.
pub(crate) use cobsfile::avro::NamedTypes as Names;

/// A Python object as a value of `schema`, for a typed write. What does not fit is a
/// `TypeError` or `ValueError` naming the field.
pub(crate) fn from_py(obj: &Bound<'_, PyAny>, schema: &Schema, names: &Names) -> PyResult<Value> {
    let mut walk = Walk {
        depth: 0,
        steps: 0,
        wasted: 0,
        max_depth: DatumLimits::default().depth(),
    };
    from_py_at(obj, schema, names, &mut String::new(), &mut walk)
}

/// How far a conversion has gone: its nesting now (a self-referential dict would recurse
/// without end), the values it has converted, and those spent on union branches that did not
/// fit (a union tries its branches in turn, which unions nested in unions would multiply).
struct Walk {
    depth: usize,
    steps: u64,
    wasted: u64,
    max_depth: usize,
}

/// The values a conversion may spend on union branches that did not fit, beyond as many as
/// it converted: enough for any value whose unions are tried in turn once per value, far
/// less than nested unions would take (2 to the power of the depth).
const MAX_WASTED: u64 = 1 << 20;

fn mismatch(path: &str, what: &str, obj: &Bound<'_, PyAny>) -> PyErr {
    let type_name = obj
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into());
    let at = if path.is_empty() { "the record" } else { path };
    PyTypeError::new_err(format!("{at}: expected {what}, got {type_name}"))
}

fn from_py_at(
    obj: &Bound<'_, PyAny>,
    schema: &Schema,
    names: &Names,
    path: &mut String,
    walk: &mut Walk,
) -> PyResult<Value> {
    walk.steps += 1;
    let nests = matches!(
        schema,
        Schema::Record(_) | Schema::Array(_) | Schema::Map(_) | Schema::Union(_)
    );
    if nests {
        if walk.depth >= walk.max_depth {
            let at = if path.is_empty() { "the record" } else { path };
            return Err(PyValueError::new_err(format!(
                "{at}: nested deeper than {} levels, the most a reader decodes (a value that \
                 holds itself?)",
                walk.max_depth
            )));
        }
        walk.depth += 1;
    }
    let value = convert(obj, schema, names, path, walk);
    if nests {
        walk.depth -= 1;
    }
    value
}

fn convert(
    obj: &Bound<'_, PyAny>,
    schema: &Schema,
    names: &Names,
    path: &mut String,
    walk: &mut Walk,
) -> PyResult<Value> {
    let py = obj.py();
    Ok(match schema {
        Schema::Null => {
            if !obj.is_none() {
                return Err(mismatch(path, "None", obj));
            }
            Value::Null
        }
        Schema::Boolean => Value::Boolean(
            obj.cast::<PyBool>()
                .map_err(|_| mismatch(path, "bool", obj))?
                .is_true(),
        ),
        Schema::Int => Value::Int(int_of(obj, path)?),
        Schema::Long => Value::Long(int_of(obj, path)?),
        Schema::Float => Value::Float(float_of(obj, path)? as f32),
        Schema::Double => Value::Double(float_of(obj, path)?),
        Schema::Bytes => Value::Bytes(bytes_of(obj, path)?),
        Schema::String => {
            if !obj.is_instance_of::<PyString>() {
                return Err(mismatch(path, "str", obj));
            }
            Value::String(obj.extract()?)
        }
        Schema::Fixed(f) => {
            let bytes = bytes_of(obj, path)?;
            if bytes.len() != f.size {
                return Err(PyValueError::new_err(format!(
                    "{path}: fixed {} needs {} bytes, got {}",
                    f.name.fullname(None),
                    f.size,
                    bytes.len()
                )));
            }
            Value::Fixed(f.size, bytes)
        }
        Schema::Enum(e) => {
            let symbol: String = obj.extract().map_err(|_| mismatch(path, "str", obj))?;
            match e.symbols.iter().position(|s| *s == symbol) {
                Some(i) => Value::Enum(i as u32, symbol),
                None => {
                    return Err(PyValueError::new_err(format!(
                        "{path}: {symbol:?} is not a symbol of enum {} ({})",
                        e.name.fullname(None),
                        e.symbols.join(", ")
                    )))
                }
            }
        }
        Schema::Array(a) => {
            if obj.is_instance_of::<PyString>() || obj.is_instance_of::<PyBytes>() {
                return Err(mismatch(path, "a list", obj));
            }
            let mut items = Vec::new();
            for (i, item) in obj
                .try_iter()
                .map_err(|_| mismatch(path, "a list", obj))?
                .enumerate()
            {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                items.push(from_py_at(&item?, &a.items, names, path, walk)?);
                path.truncate(len);
            }
            Value::Array(items)
        }
        Schema::Map(m) => {
            let dict = obj
                .cast::<PyDict>()
                .map_err(|_| mismatch(path, "a dict", obj))?;
            let mut entries = HashMap::with_capacity(dict.len());
            for (k, v) in dict.iter() {
                let key: String = k.extract().map_err(|_| mismatch(path, "str keys", &k))?;
                let len = path.len();
                path.push_str(&format!("[{key:?}]"));
                let value = from_py_at(&v, &m.types, names, path, walk)?;
                path.truncate(len);
                entries.insert(key, value);
            }
            Value::Map(entries)
        }
        Schema::Record(r) => {
            let dict = obj
                .cast::<PyDict>()
                .map_err(|_| mismatch(path, "a dict", obj))?;
            let mut fields = Vec::with_capacity(r.fields.len());
            for field in &r.fields {
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(&field.name);
                let value = match dict.get_item(&field.name)? {
                    Some(v) => from_py_at(&v, &field.schema, names, path, walk)?,
                    None => match &field.default {
                        Some(default) => {
                            let json = default.to_string();
                            let text = py.import("json")?.call_method1("loads", (json,))?;
                            from_py_at(&text, &field.schema, names, path, walk)?
                        }
                        None if matches!(&field.schema, Schema::Union(u) if u.variants().first() == Some(&Schema::Null)) => {
                            Value::Union(0, Box::new(Value::Null))
                        }
                        None => {
                            return Err(PyValueError::new_err(format!(
                                "{path}: missing field of record {}",
                                r.name.fullname(None)
                            )))
                        }
                    },
                };
                path.truncate(len);
                fields.push((field.name.clone(), value));
            }
            Value::Record(fields)
        }
        Schema::Union(u) => union_of(obj, u, names, path, walk)?,
        Schema::Ref { name } => match names.get(name) {
            Some(schema) => from_py_at(obj, schema, names, path, walk)?,
            None => {
                return Err(PyValueError::new_err(format!(
                    "{path}: unknown type {}",
                    name.fullname(None)
                )))
            }
        },
        Schema::Date => match obj.call_method0("toordinal") {
            Ok(ordinal) => {
                let ordinal: i64 = ordinal.extract()?;
                Value::Date((ordinal - py_(py)?.epoch_ordinal) as i32)
            }
            Err(_) => Value::Date(int_of(obj, path)?),
        },
        Schema::TimeMillis => Value::TimeMillis((time_micros(obj, path)? / 1000) as i32),
        Schema::TimeMicros => Value::TimeMicros(time_micros(obj, path)?),
        Schema::TimestampMillis => Value::TimestampMillis(epoch_micros(obj, path)? / 1000),
        Schema::TimestampMicros => Value::TimestampMicros(epoch_micros(obj, path)?),
        Schema::LocalTimestampMillis => {
            Value::LocalTimestampMillis(epoch_micros(obj, path)? / 1000)
        }
        Schema::LocalTimestampMicros => Value::LocalTimestampMicros(epoch_micros(obj, path)?),
        Schema::TimestampNanos => Value::TimestampNanos(int_of(obj, path)?),
        Schema::LocalTimestampNanos => Value::LocalTimestampNanos(int_of(obj, path)?),
        Schema::Uuid => {
            let text: String = obj.str()?.extract()?;
            let uuid = text.parse().map_err(|e| {
                PyValueError::new_err(format!("{path}: {text:?} is not a UUID: {e}"))
            })?;
            Value::Uuid(uuid)
        }
        Schema::Decimal(d) => {
            // The unscaled integer of `obj` at the schema's scale, in as many bytes as it
            // needs (or the fixed's size), big-endian two's complement.
            let decimal = py_(py)?.decimal.bind(py).call1((obj,))?;
            let scaled = decimal.call_method1("scaleb", (d.scale as i64,))?;
            let unscaled = scaled.call_method0("to_integral_value")?;
            if !unscaled.eq(&scaled)? {
                return Err(PyValueError::new_err(format!(
                    "{path}: {} has more than {} decimal places",
                    obj.str()?,
                    d.scale
                )));
            }
            let int = unscaled.call_method0("__int__")?;
            let bits: usize = int.call_method0("bit_length")?.extract()?;
            let len = match d.inner.as_ref() {
                Schema::Fixed(f) => f.size,
                _ => bits / 8 + 1,
            };
            let kwargs = PyDict::new(py);
            kwargs.set_item("signed", true)?;
            let bytes: Vec<u8> = int
                .call_method("to_bytes", (len, "big"), Some(&kwargs))
                .map_err(|_| {
                    PyValueError::new_err(format!(
                        "{path}: {} does not fit the decimal",
                        obj.str().map(|s| s.to_string()).unwrap_or_default()
                    ))
                })?
                .extract()?;
            Value::Decimal(bytes.into())
        }
        Schema::BigDecimal => {
            let text: String = obj.str()?.extract()?;
            Value::BigDecimal(text.parse().map_err(|e| {
                PyValueError::new_err(format!("{path}: {text:?} is not a decimal: {e:?}"))
            })?)
        }
        Schema::Duration => {
            let (months, days, millis): (u32, u32, u32) = obj
                .extract()
                .map_err(|_| mismatch(path, "(months, days, millis)", obj))?;
            Value::Duration(apache_avro::Duration::new(
                apache_avro::Months::new(months),
                apache_avro::Days::new(days),
                apache_avro::Millis::new(millis),
            ))
        }
    })
}

fn union_of(
    obj: &Bound<'_, PyAny>,
    union: &UnionSchema,
    names: &Names,
    path: &mut String,
    walk: &mut Walk,
) -> PyResult<Value> {
    // fastavro's rule, simplified: the first branch the object converts to.
    let mut last = None;
    for (i, branch) in union.variants().iter().enumerate() {
        if obj.is_none() != matches!(branch, Schema::Null) {
            continue;
        }
        // A bool is an int to Python; it is only ever a boolean here.
        if obj.is_instance_of::<PyBool>() && !matches!(branch, Schema::Boolean) {
            continue;
        }
        let before = walk.steps;
        match from_py_at(obj, branch, names, path, walk) {
            Ok(value) => return Ok(Value::Union(i as u32, Box::new(value))),
            Err(e) => last = Some(e),
        }
        walk.wasted += walk.steps - before;
        if walk.wasted > MAX_WASTED + walk.steps.saturating_sub(walk.wasted) {
            let at = if path.is_empty() { "the record" } else { path };
            return Err(PyValueError::new_err(format!(
                "{at}: more than {MAX_WASTED} values tried in union branches that do not fit \
                 (unions nested in unions)"
            )));
        }
    }
    Err(last.unwrap_or_else(|| mismatch(path, "a value of the union", obj)))
}

fn int_of<T: for<'a, 'py> FromPyObject<'a, 'py>>(
    obj: &Bound<'_, PyAny>,
    path: &str,
) -> PyResult<T> {
    if obj.is_instance_of::<PyBool>() || !obj.is_instance_of::<PyInt>() {
        return Err(mismatch(path, "int", obj));
    }
    obj.extract::<T>()
        .map_err(|_| PyValueError::new_err(format!("{path}: {} is out of range", obj)))
}

fn float_of(obj: &Bound<'_, PyAny>, path: &str) -> PyResult<f64> {
    if obj.is_instance_of::<PyFloat>()
        || (obj.is_instance_of::<PyInt>() && !obj.is_instance_of::<PyBool>())
    {
        obj.extract()
    } else {
        Err(mismatch(path, "float", obj))
    }
}

fn bytes_of(obj: &Bound<'_, PyAny>, path: &str) -> PyResult<Vec<u8>> {
    if obj.is_instance_of::<PyString>() {
        return Err(mismatch(path, "bytes", obj));
    }
    obj.extract::<Vec<u8>>()
        .map_err(|_| mismatch(path, "bytes", obj))
}

fn time_micros(obj: &Bound<'_, PyAny>, path: &str) -> PyResult<i64> {
    if obj.is_instance_of::<PyInt>() {
        return int_of(obj, path);
    }
    let h: i64 = obj
        .getattr("hour")
        .map_err(|_| mismatch(path, "datetime.time", obj))?
        .extract()?;
    let m: i64 = obj.getattr("minute")?.extract()?;
    let s: i64 = obj.getattr("second")?.extract()?;
    let us: i64 = obj.getattr("microsecond")?.extract()?;
    Ok(((h * 60 + m) * 60 + s) * 1_000_000 + us)
}

/// Microseconds since the Unix epoch of a datetime (a naive one as if in UTC) or an int
/// (taken as is).
fn epoch_micros(obj: &Bound<'_, PyAny>, path: &str) -> PyResult<i64> {
    if obj.is_instance_of::<PyInt>() {
        return int_of(obj, path);
    }
    let py = obj.py();
    let p = py_(py)?;
    let naive = match obj.getattr("tzinfo") {
        Ok(tz) if !tz.is_none() => {
            let utc = obj.call_method1("astimezone", (p.datetime_utc.bind(py),))?;
            let kwargs = PyDict::new(py);
            kwargs.set_item("tzinfo", py.None())?;
            utc.call_method("replace", (), Some(&kwargs))?
        }
        Ok(_) => obj.clone(),
        Err(_) => return Err(mismatch(path, "datetime", obj)),
    };
    let delta = naive.call_method1("__sub__", (p.naive_epoch.bind(py),))?;
    let days: i64 = delta.getattr("days")?.extract()?;
    let seconds: i64 = delta.getattr("seconds")?.extract()?;
    let micros: i64 = delta.getattr("microseconds")?.extract()?;
    Ok((days * 86_400 + seconds) * 1_000_000 + micros)
}

/// Builds a datum's Python object in the walk that checks it (a [`Visit`]), as [`to_py`]
/// converts its value: no `Value` is built first. Holds the GIL for the walk.
pub(crate) struct PyBuilder<'py> {
    py: Python<'py>,
    /// The dicts and lists open, innermost last, each dict with the key of the value to come.
    open: Vec<Open<'py>>,
    /// The object of the last datum walked, if the walk finished one.
    done: Option<Bound<'py, PyAny>>,
    /// The first conversion Python refused (a date past year 9999, say).
    failed: Option<PyErr>,
    /// Record field names as Python strings, each made once: they repeat in every record.
    names: FieldNames,
}

/// Record field names made into Python strings, each once. Records of a file repeat the same
/// fields in the same order, so each name is first looked for where the datum before had the
/// name at the same step of its walk (a comparison of a few bytes), then by its hash.
#[derive(Default)]
pub(crate) struct FieldNames {
    /// The names in the order the last datum's walk met them (the first `FIELDS_IN_ORDER`).
    order: Vec<(Box<str>, Py<PyString>)>,
    /// How many names this datum's walk has met.
    at: usize,
    by_name: std::collections::HashMap<Box<str>, Py<PyString>>,
}

/// How many fields of a datum [`FieldNames`] keeps in walk order (an array of records can
/// have any number).
const FIELDS_IN_ORDER: usize = 4096;

impl FieldNames {
    fn restart(&mut self) {
        self.at = 0;
    }

    fn get<'py>(&mut self, py: Python<'py>, name: &str) -> Bound<'py, PyString> {
        let at = self.at;
        self.at += 1;
        if let Some((known, made)) = self.order.get(at) {
            if **known == *name {
                return made.bind(py).clone();
            }
        }
        let made = match self.by_name.get(name) {
            Some(made) => made.bind(py).clone(),
            None => {
                let made = PyString::intern(py, name);
                self.by_name.insert(name.into(), made.clone().unbind());
                made
            }
        };
        let entry = (name.into(), made.clone().unbind());
        if at < self.order.len() {
            self.order[at] = entry;
        } else if at == self.order.len() && at < FIELDS_IN_ORDER {
            self.order.push(entry);
        }
        made
    }
}

enum Open<'py> {
    Dict(Bound<'py, PyDict>, Option<Bound<'py, PyString>>),
    List(Bound<'py, PyList>),
}

impl<'py> PyBuilder<'py> {
    /// A builder that reuses (and adds to) the field names of earlier builders.
    pub(crate) fn new(py: Python<'py>, names: FieldNames) -> Self {
        PyBuilder {
            py,
            open: Vec::new(),
            done: None,
            failed: None,
            names,
        }
    }

    /// The field names made so far, for the next builder.
    pub(crate) fn into_names(self) -> FieldNames {
        self.names
    }

    /// The object built by the last walk, or why Python refused part of it (`None` if the
    /// walk did not finish).
    pub(crate) fn take(&mut self) -> Option<PyResult<Py<PyAny>>> {
        if let Some(e) = self.failed.take() {
            return Some(Err(e));
        }
        self.done.take().map(|done| Ok(done.unbind()))
    }

    /// Hands `made` to the innermost dict or list, or makes it the datum's object.
    fn place(&mut self, made: PyResult<Bound<'py, PyAny>>) {
        let obj = match made {
            Ok(obj) => obj,
            Err(e) => {
                self.failed.get_or_insert(e);
                return;
            }
        };
        let placed = match self.open.last_mut() {
            None => {
                self.done = Some(obj);
                Ok(())
            }
            Some(Open::Dict(dict, key)) => match key.take() {
                Some(key) => dict.set_item(key, obj),
                None => Ok(()),
            },
            Some(Open::List(list)) => list.append(obj),
        };
        if let Err(e) = placed {
            self.failed.get_or_insert(e);
        }
    }

    fn close(&mut self) {
        let obj = match self.open.pop() {
            Some(Open::Dict(dict, _)) => dict.into_any(),
            Some(Open::List(list)) => list.into_any(),
            None => return,
        };
        self.place(Ok(obj));
    }

    fn owned(&self, made: PyResult<Py<PyAny>>) -> PyResult<Bound<'py, PyAny>> {
        made.map(|obj| obj.into_bound(self.py))
    }
}

/// A decimal's unscaled value (big-endian two's complement) at `scale`, as a `decimal.Decimal`.
fn decimal_of(py: Python<'_>, unscaled: &[u8], scale: i64) -> PyResult<Py<PyAny>> {
    let kwargs = PyDict::new(py);
    kwargs.set_item("signed", true)?;
    let unscaled = py.get_type::<PyInt>().call_method(
        "from_bytes",
        (PyBytes::new(py, unscaled), "big"),
        Some(&kwargs),
    )?;
    Ok(py_(py)?
        .decimal
        .bind(py)
        .call1((unscaled,))?
        .call_method1("scaleb", (-scale,))?
        .unbind())
}

/// A zig-zag varint at the start of `bytes`, and the bytes after it.
fn zigzag(bytes: &[u8]) -> Option<(i64, &[u8])> {
    let mut z: u64 = 0;
    for (i, &byte) in bytes.iter().enumerate().take(10) {
        z |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some(((z >> 1) as i64 ^ -((z & 1) as i64), &bytes[i + 1..]));
        }
    }
    None
}

impl<'py> Visit for PyBuilder<'py> {
    fn begin(&mut self) {
        self.names.restart();
        self.open.clear();
        self.done = None;
        self.failed = None;
    }

    fn null(&mut self) {
        self.place(Ok(self.py.None().into_bound(self.py)));
    }

    fn boolean(&mut self, value: bool) {
        self.place(Ok(PyBool::new(self.py, value).to_owned().into_any()));
    }

    fn int(&mut self, schema: &Schema, value: i32) {
        let py = self.py;
        let made = match schema {
            Schema::Date => py_(py).and_then(|p| {
                p.date_fromordinal
                    .call1(py, (p.epoch_ordinal + i64::from(value),))
            }),
            Schema::TimeMillis => time_of(py, i64::from(value) * 1000),
            _ => Ok(value
                .into_pyobject(py)
                .map(|v| v.into_any().unbind())
                .unwrap()),
        };
        let made = self.owned(made);
        self.place(made);
    }

    fn long(&mut self, schema: &Schema, value: i64) {
        let py = self.py;
        let made = match schema {
            Schema::TimeMicros => time_of(py, value),
            Schema::TimestampMillis => utc_datetime(py, value.saturating_mul(1000)),
            Schema::TimestampMicros => utc_datetime(py, value),
            Schema::LocalTimestampMillis => naive_datetime(py, value.saturating_mul(1000)),
            Schema::LocalTimestampMicros => naive_datetime(py, value),
            // Python's datetime holds microseconds: nanoseconds stay an int, as in fastavro.
            _ => Ok(value
                .into_pyobject(py)
                .map(|v| v.into_any().unbind())
                .unwrap()),
        };
        let made = self.owned(made);
        self.place(made);
    }

    fn float(&mut self, value: f32) {
        self.place(Ok(PyFloat::new(self.py, f64::from(value)).into_any()));
    }

    fn double(&mut self, value: f64) {
        self.place(Ok(PyFloat::new(self.py, value).into_any()));
    }

    fn bytes(&mut self, schema: &Schema, value: &[u8]) {
        let py = self.py;
        let made = match schema {
            Schema::Decimal(decimal) => decimal_of(py, value, decimal.scale as i64),
            Schema::BigDecimal => match zigzag(value).and_then(|(len, rest)| {
                let len = usize::try_from(len).ok().filter(|&len| len <= rest.len())?;
                let (unscaled, rest) = rest.split_at(len);
                Some((unscaled, zigzag(rest)?.0))
            }) {
                Some((unscaled, scale)) => decimal_of(py, unscaled, scale),
                None => Err(PyValueError::new_err(
                    "a big-decimal that is not well formed",
                )),
            },
            Schema::Duration => {
                let part = |i: usize| {
                    u32::from_le_bytes([value[i], value[i + 1], value[i + 2], value[i + 3]])
                };
                PyTuple::new(py, [part(0), part(4), part(8)]).map(|t| t.into_any().unbind())
            }
            _ => Ok(PyBytes::new(py, value).into_any().unbind()),
        };
        let made = self.owned(made);
        self.place(made);
    }

    fn string(&mut self, value: &str) {
        self.place(Ok(PyString::new(self.py, value).into_any()));
    }

    fn uuid(&mut self, value: apache_avro::Uuid, _text: Option<&str>) {
        let py = self.py;
        let made = py_(py).and_then(|p| p.uuid.call1(py, (value.to_string(),)));
        let made = self.owned(made);
        self.place(made);
    }

    fn symbol(&mut self, _: u32, symbol: &str) {
        self.place(Ok(PyString::new(self.py, symbol).into_any()));
    }

    fn record(&mut self, _: &apache_avro::schema::RecordSchema) {
        self.open.push(Open::Dict(PyDict::new(self.py), None));
    }

    fn field(&mut self, name: &str) {
        let py = self.py;
        let Some(Open::Dict(_, key)) = self.open.last_mut() else {
            return;
        };
        // Field names repeat in every record: each is made (and its hash computed) once, not
        // looked up in the interpreter's interned strings at every field of every record.
        *key = Some(self.names.get(py, name));
    }

    fn record_end(&mut self) {
        self.close();
    }

    fn array(&mut self) {
        self.open.push(Open::List(PyList::empty(self.py)));
    }

    fn array_end(&mut self) {
        self.close();
    }

    fn map(&mut self) {
        self.open.push(Open::Dict(PyDict::new(self.py), None));
    }

    fn key(&mut self, key: &str) {
        if let Some(Open::Dict(_, next)) = self.open.last_mut() {
            *next = Some(PyString::new(self.py, key));
        }
    }

    fn map_end(&mut self) {
        self.close();
    }
}
