//! JSON records as Python objects, with `json.loads`'s answers: parsed in Rust straight to
//! Python objects (jiter, the parser pydantic uses), with no `str` of the record first and
//! each object key made once per distinct key rather than once per record. A record jiter
//! refuses goes to `json.loads` itself, so whatever `json.loads` parses differently from
//! strict JSON (a lone surrogate escape, a byte order mark, UTF-16, nesting deeper than
//! jiter's limit) gives exactly its object, and a malformed record its `JSONDecodeError`.

use jiter::{FloatMode, PartialMode, PythonParse, StringCacheMode};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyBytes;

/// How `json.loads` reads: `NaN`, `Infinity` and `-Infinity` accepted, floats as `float`, a
/// later duplicate key replacing an earlier one, integers of any size.
const PARSE: PythonParse = PythonParse {
    allow_inf_nan: true,
    cache_mode: StringCacheMode::Keys,
    partial_mode: PartialMode::Off,
    catch_duplicate_keys: false,
    float_mode: FloatMode::Float,
};

/// `json.loads(record)`, faster.
pub(crate) fn loads(py: Python<'_>, record: &[u8]) -> PyResult<Py<PyAny>> {
    match PARSE.python_parse(py, record) {
        Ok(value) => Ok(value.unbind()),
        Err(_) => {
            static LOADS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
            let loads = LOADS.get_or_try_init(py, || {
                py.import("json")?.getattr("loads").map(Bound::unbind)
            })?;
            loads
                .bind(py)
                .call1((PyBytes::new(py, record),))
                .map(Bound::unbind)
        }
    }
}
