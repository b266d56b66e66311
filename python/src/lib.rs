//! The native module of the `cobsfile` Python package (`cobsfile._cobsfile`): thin bindings
//! of the Rust library. Arguments are converted, the library does the work with the GIL
//! released, and results and errors are converted back. The Python layer
//! (`python/cobsfile/__init__.py`) adds what is easier said in Python.

use pyo3::prelude::*;

mod arrow;
mod errors;
mod follow;
mod json;
mod reader;
mod report;
mod time;
mod values;
mod writer;

#[pymodule]
fn _cobsfile(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    reader::register(m)?;
    writer::register(m)?;
    m.add_class::<follow::Follower>()?;
    m.add_class::<report::Report>()?;
    m.add_class::<report::Recovery>()?;
    m.add_class::<report::Seals>()?;
    m.add_class::<arrow::ArrowStream>()?;
    m.add_function(wrap_pyfunction!(report::verify, m)?)?;
    m.add_function(wrap_pyfunction!(report::recover, m)?)?;
    m.add_function(wrap_pyfunction!(report::segments, m)?)?;
    m.add("FORMAT_VERSION", cobsfile::FORMAT_VERSION)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
