//! The package's exceptions, and the library's errors as them.
//!
//! Every exception of the package derives from `cobsfile.Error` and carries `offset`, the byte
//! offset the problem was found at (`None` when it has none). A damaged range is a
//! `DamagedError` with `start`, `end` and `cause` besides. I/O errors are Python's own
//! (`FileNotFoundError`, `PermissionError`, ...).

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    cobsfile,
    Error,
    PyException,
    "A cobsfile error. `offset` is the byte offset it was found at, or None."
);
create_exception!(
    cobsfile,
    DamagedError,
    Error,
    "A damaged (or unreadable) byte range: `start`, `end` (exclusive) and `cause`."
);
create_exception!(
    cobsfile,
    NotACobsfileError,
    Error,
    "The input holds no cobsfile: no header block, or no intact block at all."
);
create_exception!(
    cobsfile,
    RecordError,
    Error,
    "A typed record that cannot be written or read: it does not fit its Avro schema, or its \
     schema is unknown. `offset` is its block's offset when read."
);

/// A new exception of type `T` with `message` and `offset` set.
pub(crate) fn raise<T: pyo3::PyTypeInfo>(
    py: Python<'_>,
    message: String,
    offset: Option<u64>,
) -> PyErr {
    let err = PyErr::new::<T, _>(message);
    let _ = err.value(py).setattr("offset", offset);
    err
}

/// The library's error as a Python exception.
pub(crate) fn file_error(py: Python<'_>, e: cobsfile::Error) -> PyErr {
    use cobsfile::Error as E;
    if let Some(d) = cobsfile::Damage::of_error(&e) {
        // In the library's words: `bytes START..END damaged: CAUSE` (or "unreadable").
        return damaged(
            py,
            e.to_string(),
            (d.range.start, d.range.end),
            d.status(),
            d.cause.name(),
            &d.cause.to_string(),
        );
    }
    match e {
        E::Io(io) => io.into(),
        E::NotACobsfile { offset } => {
            raise::<NotACobsfileError>(py, E::NotACobsfile { offset }.to_string(), Some(offset))
        }
        e @ E::UnsupportedVersion { offset, .. } => raise::<Error>(py, e.to_string(), Some(offset)),
        other => raise::<Error>(py, other.to_string(), None),
    }
}

/// The library's error about the file at `path`, its message led by the path (an I/O error
/// stays Python's own: `FileNotFoundError: events.cobs: No such file or directory`).
pub(crate) fn path_error(py: Python<'_>, path: &std::path::Path, e: cobsfile::Error) -> PyErr {
    let name = path.display();
    match e {
        cobsfile::Error::Io(io) => std::io::Error::new(io.kind(), format!("{name}: {io}")).into(),
        // Python's own error for a directory, as its open() raises.
        cobsfile::Error::NotARegularFile if path.is_dir() => std::io::Error::new(
            std::io::ErrorKind::IsADirectory,
            format!("{name}: is a directory"),
        )
        .into(),
        other => {
            let err = file_error(py, other);
            let message = format!("{name}: {}", err.value(py));
            let _ = err.value(py).setattr("args", (message,));
            err
        }
    }
}

/// A `DamagedError` saying `text` about `start..end`: the fields of a `Damage` besides.
pub(crate) fn damaged(
    py: Python<'_>,
    text: String,
    (start, end): (u64, u64),
    status: &str,
    cause: &str,
    message: &str,
) -> PyErr {
    let err = raise::<DamagedError>(py, text, Some(start));
    let value = err.value(py);
    let _ = value.setattr("start", start);
    let _ = value.setattr("end", end);
    let _ = value.setattr("status", status);
    let _ = value.setattr("cause", cause);
    let _ = value.setattr("message", message);
    err
}

/// An error of the typed-record layer as a Python exception.
pub(crate) fn avro_error(py: Python<'_>, e: cobsfile::avro::Error) -> PyErr {
    use cobsfile::avro::Error as A;
    match e {
        A::File(e) => file_error(py, e),
        e @ A::Record { offset, .. } => raise::<RecordError>(py, e.to_string(), Some(offset)),
        other => raise::<RecordError>(py, other.to_string(), None),
    }
}

/// Registers the exceptions in the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("Error", py.get_type::<Error>())?;
    m.add("DamagedError", py.get_type::<DamagedError>())?;
    m.add("NotACobsfileError", py.get_type::<NotACobsfileError>())?;
    m.add("RecordError", py.get_type::<RecordError>())?;
    Ok(())
}
