//! Record batches handed to Python through the Arrow C stream interface: an object with
//! `__arrow_c_stream__` that pyarrow (15 and later), polars, DuckDB and others import without a
//! copy.

use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_array::{RecordBatch, RecordBatchIterator};
use arrow_schema::SchemaRef;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

/// Batches read, exported once as an Arrow C stream.
#[pyclass(module = "cobsfile._cobsfile")]
pub(crate) struct ArrowStream {
    schema: SchemaRef,
    batches: Option<Vec<RecordBatch>>,
}

impl ArrowStream {
    pub(crate) fn new(schema: SchemaRef, batches: Vec<RecordBatch>) -> Self {
        ArrowStream {
            schema,
            batches: Some(batches),
        }
    }
}

#[pymethods]
impl ArrowStream {
    /// The Arrow PyCapsule interface: a capsule named `arrow_array_stream`. The schema
    /// asked for is not applied (it is the schema read); the stream can be taken once.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &mut self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = requested_schema;
        let batches = self
            .batches
            .take()
            .ok_or_else(|| PyValueError::new_err("the Arrow stream was already taken"))?;
        let reader = RecordBatchIterator::new(batches.into_iter().map(Ok), self.schema.clone());
        let stream = FFI_ArrowArrayStream::new(Box::new(reader));
        // The consumer moves the stream out (leaving its release callback null); a stream
        // never taken is released when the capsule is dropped (FFI_ArrowArrayStream's Drop).
        PyCapsule::new_with_value(py, stream, c"arrow_array_stream")
    }

    /// Rows in all batches.
    #[getter]
    fn num_rows(&self) -> usize {
        self.batches
            .as_ref()
            .map(|b| b.iter().map(RecordBatch::num_rows).sum())
            .unwrap_or(0)
    }
}
