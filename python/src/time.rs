//! Event times from Python (spec 8.8): an `int` of nanoseconds since the Unix epoch, or an
//! aware `datetime`.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt};

/// The time `obj` gives, in nanoseconds since the Unix epoch.
pub(crate) fn nanos_of(obj: &Bound<'_, PyAny>) -> PyResult<i64> {
    if obj.is_instance_of::<PyInt>() && !obj.is_instance_of::<PyBool>() {
        return obj.extract::<i64>().map_err(|_| {
            PyValueError::new_err(
                "a time must lie within the years 1677 to 2262 (int64 nanoseconds)",
            )
        });
    }
    if obj.hasattr("utcoffset")? && obj.hasattr("timestamp")? {
        if obj.call_method0("utcoffset")?.is_none() {
            return Err(PyValueError::new_err(
                "a naive datetime names no instant: give it a time zone (tzinfo)",
            ));
        }
        // Microseconds are exact in a float of seconds for the years a time may have.
        let seconds: f64 = obj.call_method0("timestamp")?.extract()?;
        let micros = (seconds * 1e6).round();
        if !(-9.2e15..9.2e15).contains(&micros) {
            return Err(PyValueError::new_err(
                "a time must lie within the years 1677 to 2262",
            ));
        }
        return Ok(micros as i64 * 1000);
    }
    Err(PyTypeError::new_err(format!(
        "a time is an int of nanoseconds since the epoch or an aware datetime, not {}",
        obj.get_type().name()?
    )))
}

/// [`nanos_of`] of an optional argument.
pub(crate) fn optional_nanos(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<i64>> {
    obj.filter(|o| !o.is_none()).map(nanos_of).transpose()
}
