//! `cobsfile.Writer` (a new file, or any binary file object) and `cobsfile.Appender` (a log
//! reopened after a crash, appended with the durability asked for).

use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use cobsfile::avro::{AvroWriter, WriterSchema};
use cobsfile::fs::{NewFile, NewFileWriter};
use cobsfile::{Appender as LogAppender, AppenderBuilder, Compression, Dictionary, Durability};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};

use crate::errors::{avro_error, file_error};
use crate::values::from_py;

/// Where a writer's bytes go: a new file (named when the writer closes), or a Python file
/// object.
enum Out {
    File(NewFileWriter),
    Python(Py<PyAny>),
}

impl Write for Out {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Out::File(f) => f.write(buf),
            Out::Python(obj) => Python::attach(|py| {
                let n = obj
                    .call_method1(py, "write", (PyBytes::new(py, buf),))
                    .map_err(io::Error::other)?;
                // A raw file object may write less than it was given, and says how much.
                Ok(n.extract::<Option<usize>>(py)
                    .ok()
                    .flatten()
                    .unwrap_or(buf.len()))
            }),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Out::File(f) => f.flush(),
            Out::Python(obj) => Python::attach(|py| {
                if obj.bind(py).hasattr("flush").unwrap_or(false) {
                    obj.call_method0(py, "flush").map_err(io::Error::other)?;
                }
                Ok(())
            }),
        }
    }
}

/// A compression from `None`, `"zstd"`, or `("zstd", level)`.
pub(crate) fn compression_of(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Compression> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(Compression::None);
    };
    let bad = || PyValueError::new_err("compression must be None, 'zstd' or ('zstd', level)");
    let (name, level): (String, i32) = if let Ok(name) = obj.extract::<String>() {
        (name, 3)
    } else {
        obj.extract().map_err(|_| bad())?
    };
    match name.as_str() {
        "zstd" => Compression::zstd(level).map_err(|e| PyValueError::new_err(e.to_string())),
        "none" => Ok(Compression::None),
        _ => Err(bad()),
    }
}

/// Metadata entries from a dict of str to str or bytes.
fn entries_of(dict: Option<&Bound<'_, PyDict>>) -> PyResult<Vec<(String, Vec<u8>)>> {
    let mut entries = Vec::new();
    if let Some(dict) = dict {
        for (k, v) in dict.iter() {
            let key: String = k
                .extract()
                .map_err(|_| PyTypeError::new_err("metadata keys must be str"))?;
            let value: Vec<u8> = if v.is_instance_of::<PyString>() {
                v.extract::<String>()?.into_bytes()
            } else {
                v.extract()
                    .map_err(|_| PyTypeError::new_err("metadata values must be str or bytes"))?
            };
            entries.push((key, value));
        }
    }
    Ok(entries)
}

/// A schema from a JSON string (or a dict, turned into JSON by the Python layer).
fn schema_of(py: Python<'_>, json: &str) -> PyResult<WriterSchema> {
    WriterSchema::parse(json).map_err(|e| avro_error(py, e))
}

/// Bytes of a record to write: bytes-like only.
fn record_of<'a>(obj: &'a Bound<'_, PyAny>) -> PyResult<std::borrow::Cow<'a, [u8]>> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(std::borrow::Cow::Borrowed(b.as_bytes()));
    }
    if obj.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(
            "records are bytes: encode a str first (or give the writer a schema to write dicts)",
        ));
    }
    obj.extract::<Vec<u8>>()
        .map(std::borrow::Cow::Owned)
        .map_err(|_| PyTypeError::new_err("records are bytes (or dicts, with a schema)"))
}

// One per writer, boxed or not: its size does not matter.
#[allow(clippy::large_enum_variant)]
enum Sink {
    Plain(cobsfile::Writer<Out>),
    Typed(AvroWriter<cobsfile::Writer<Out>>),
}

/// Writes a new cobsfile. Use as a context manager: leaving the block finishes the file (index
/// and end block); leaving it by an exception writes the records given but not the end
/// block, so the file reads as unfinished, which is what it is.
///
/// A path is written as `cobsfile pack -o` writes one: into a new file that takes the name
/// only when the writer closes (synced first), so a process killed while writing leaves what
/// the name held before, and a writer may replace (overwrite=True) the file its own reader is
/// reading.
#[pyclass(module = "cobsfile._cobsfile", subclass)]
pub(crate) struct Writer {
    sink: Mutex<Option<Sink>>,
    records: u64,
    /// The new file of a path, given its name when the writer closes or is dropped.
    new_file: Option<(NewFile, PathBuf)>,
}

/// Names `new_file`, with the path in an error.
fn place(new_file: NewFile, path: &std::path::Path) -> io::Result<()> {
    new_file.persist().map_err(|e| {
        let hint = if e.kind() == io::ErrorKind::AlreadyExists {
            " (another file took the name while it was written)"
        } else {
            ""
        };
        io::Error::new(e.kind(), format!("{}: {e}{hint}", path.display()))
    })
}

impl Drop for Writer {
    /// A writer dropped open (never closed) leaves its file unfinished under its name, as one
    /// left by an exception: the records written stay readable.
    fn drop(&mut self) {
        let sink = self
            .sink
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        drop(sink);
        if let Some((new_file, path)) = self.new_file.take() {
            let _ = place(new_file, &path);
        }
    }
}

impl Writer {
    fn sink(&mut self) -> PyResult<&mut Sink> {
        self.sink
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .as_mut()
            .ok_or_else(|| PyValueError::new_err("the writer is closed"))
    }
}

#[pymethods]
impl Writer {
    #[new]
    #[pyo3(signature = (target, *, compression=None, block_size=None, metadata=None, dictionary=None, schema=None, threads=1, index=true, overwrite=false, seal=None, seal_every=None, lines=true))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        target: &Bound<'_, PyAny>,
        compression: Option<&Bound<'_, PyAny>>,
        block_size: Option<usize>,
        metadata: Option<&Bound<'_, PyDict>>,
        dictionary: Option<Vec<u8>>,
        schema: Option<String>,
        threads: usize,
        index: bool,
        overwrite: bool,
        seal: Option<PathBuf>,
        seal_every: Option<u64>,
        lines: bool,
    ) -> PyResult<Self> {
        let compression = compression_of(compression)?;
        let sealing = sealing_key(py, seal, seal_every)?;
        let entries = entries_of(metadata)?;
        let schema = schema.map(|json| schema_of(py, &json)).transpose()?;
        let mut new_file = None;
        let out = if target.hasattr("write")? && !target.is_instance_of::<PyString>() {
            Out::Python(target.clone().unbind())
        } else {
            let path: PathBuf = target
                .extract()
                .map_err(|_| PyTypeError::new_err("expected a path or a binary file object"))?;
            let fail = |e: io::Error, hint: &str| {
                PyErr::from(io::Error::new(
                    e.kind(),
                    format!("{}: {e}{hint}", path.display()),
                ))
            };
            // A writer never replaces a file by accident: overwrite=True says it may.
            if !overwrite && std::fs::symlink_metadata(&path).is_ok() {
                let e = io::Error::from(io::ErrorKind::AlreadyExists);
                return Err(fail(
                    e,
                    " (overwrite=True replaces it; cobsfile.Appender appends to it)",
                ));
            }
            if path.is_dir() {
                return Err(fail(io::Error::from(io::ErrorKind::IsADirectory), ""));
            }
            let file = py
                .detach(|| NewFile::create(&path, overwrite))
                .map_err(|e| fail(e, ""))?;
            let out = Out::File(file.writer());
            new_file = Some((file, path));
            out
        };
        let mut builder = cobsfile::WriterBuilder::new()
            .compression(compression)
            .line_layout(lines)
            .threads(threads)
            .index(index);
        if let Some(size) = block_size {
            builder = builder.block_target(size);
        }
        if let Some(d) = dictionary {
            builder = builder.dictionary(Dictionary::new(d), true);
        }
        if let Some((key, every)) = sealing {
            builder = builder.seal(key).seal_every(every, None);
        }
        let mut writer = py
            .detach(|| builder.build(out))
            .map_err(|e| file_error(py, e))?;
        if !entries.is_empty() {
            writer
                .write_metadata(entries.iter().map(|(k, v)| (k.as_str(), v.as_slice())))
                .map_err(|e| file_error(py, e))?;
        }
        let sink = match schema {
            None => Sink::Plain(writer),
            Some(schema) => {
                Sink::Typed(AvroWriter::new(writer, schema).map_err(|e| avro_error(py, e))?)
            }
        };
        Ok(Writer {
            sink: Mutex::new(Some(sink)),
            records: 0,
            new_file,
        })
    }

    /// Writes one record: bytes, or with a schema a value of it (a dict for a record); with
    /// its event time if given (an int of nanoseconds since the epoch, or an aware datetime).
    #[pyo3(signature = (record, time=None))]
    fn write(
        &mut self,
        py: Python<'_>,
        record: &Bound<'_, PyAny>,
        time: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let time = crate::time::optional_nanos(time)?;
        match self.sink()? {
            Sink::Plain(writer) => {
                let bytes = record_of(record)?;
                py.detach(|| match time {
                    Some(time) => writer.write_record_at(&bytes, time),
                    None => writer.write_record(&bytes),
                })
                .map_err(|e| file_error(py, e))?;
            }
            Sink::Typed(writer) => {
                let schema = writer.schema();
                let value = from_py(record, schema.schema(), schema.names())?;
                py.detach(|| writer.write_value_at(&value, time).map(drop))
                    .map_err(|e| avro_error(py, e))?;
            }
        }
        self.records += 1;
        Ok(())
    }

    /// Writes every record of an iterable; returns how many.
    fn write_many(&mut self, py: Python<'_>, records: &Bound<'_, PyAny>) -> PyResult<u64> {
        let mut n = 0;
        for record in records.try_iter()? {
            self.write(py, &record?, None)?;
            n += 1;
        }
        Ok(n)
    }

    /// Writes a metadata block with these entries (str keys, str or bytes values).
    fn write_metadata(&mut self, py: Python<'_>, entries: &Bound<'_, PyDict>) -> PyResult<()> {
        let entries = entries_of(Some(entries))?;
        let pairs = entries.iter().map(|(k, v)| (k.as_str(), v.as_slice()));
        match self.sink()? {
            Sink::Plain(w) => w.write_metadata(pairs),
            Sink::Typed(w) => w.get_mut().write_metadata(pairs),
        }
        .map_err(|e| file_error(py, e))
    }

    /// Writes the open block, so that a reader sees every record written so far.
    fn flush(&mut self, py: Python<'_>) -> PyResult<()> {
        let sink = self.sink()?;
        py.detach(|| match sink {
            Sink::Plain(w) => w.flush(),
            Sink::Typed(w) => w.get_mut().flush(),
        })
        .map_err(|e| file_error(py, e))
    }

    /// Finishes the file: the open block, the index and the end block. Idempotent.
    fn close(&mut self, py: Python<'_>) -> PyResult<()> {
        let Some(sink) = self
            .sink
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        else {
            return Ok(());
        };
        let out = py
            .detach(|| match sink {
                Sink::Plain(w) => w.finish().map_err(cobsfile::avro::Error::File),
                Sink::Typed(w) => w.finish(),
            })
            .map_err(|e| avro_error(py, e))?;
        match out {
            // Synced, then named.
            Out::File(_) => match self.new_file.take() {
                Some((new_file, path)) => py.detach(|| place(new_file, &path)).map_err(PyErr::from),
                None => Ok(()),
            },
            Out::Python(obj) => {
                let obj = obj.bind(py);
                if obj.hasattr("flush")? {
                    obj.call_method0("flush")?;
                }
                Ok(())
            }
        }
    }

    /// Records written so far.
    #[getter]
    fn records(&self) -> u64 {
        self.records
    }

    /// Whether `close` was called.
    #[getter]
    fn closed(&mut self) -> bool {
        self.sink.get_mut().map(|s| s.is_none()).unwrap_or(true)
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __exit__(
        &mut self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        if exc_type.is_some_and(|t| !t.is_none()) {
            // Dropped unfinished: the blocks written stay readable; no end block claims the
            // file complete.
            let sink = self
                .sink
                .get_mut()
                .unwrap_or_else(|p| p.into_inner())
                .take();
            py.detach(move || drop(sink));
            if let Some((new_file, path)) = self.new_file.take() {
                // The exception goes on; a failure to name the file is reported beside it.
                if let Err(e) = py.detach(|| place(new_file, &path)) {
                    PyErr::from(e).print(py);
                }
            }
            return Ok(false);
        }
        self.close(py)?;
        Ok(false)
    }
}

/// A durability from "none", "flush", "fsync" or "group:10ms" (also "group:2s", "group:500us").
pub(crate) fn durability_of(text: &str) -> PyResult<Durability> {
    let bad = || {
        PyValueError::new_err(format!(
            "durability must be 'none', 'flush', 'fsync' or 'group:INTERVAL' (e.g. 'group:10ms'), not {text:?}"
        ))
    };
    Ok(match text {
        "none" => Durability::None,
        "flush" => Durability::Flush,
        "fsync" => Durability::Fsync,
        _ => {
            let interval = text.strip_prefix("group:").ok_or_else(bad)?;
            let (number, unit) = interval
                .find(|c: char| !c.is_ascii_digit())
                .map(|i| interval.split_at(i))
                .ok_or_else(bad)?;
            let n: u64 = number.parse().map_err(|_| bad())?;
            let d = match unit {
                "us" => Duration::from_micros(n),
                "ms" => Duration::from_millis(n),
                "s" => Duration::from_secs(n),
                _ => return Err(bad()),
            };
            if d.is_zero() {
                return Err(bad());
            }
            Durability::group(d)
        }
    })
}

/// Appends records to a log file, creating it if missing; after a crash it cuts (or fences
/// off) the torn last block first. Several processes may append to one file at once.
#[pyclass(module = "cobsfile._cobsfile", subclass)]
pub(crate) struct Appender {
    log: Option<LogAppender>,
    /// With a schema: the encoder of typed records (its buffers reused).
    encoder: Option<AvroWriter<Encoder>>,
    opened: Py<PyDict>,
}

impl Appender {
    fn log(&mut self) -> PyResult<&mut LogAppender> {
        self.log
            .as_mut()
            .ok_or_else(|| PyValueError::new_err("the appender is closed"))
    }

    /// The record to append for `obj`: its bytes, or with a schema its typed encoding.
    fn encode(&mut self, obj: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
        match &mut self.encoder {
            None => Ok(record_of(obj)?.into_owned()),
            Some(writer) => {
                let schema = writer.schema();
                let value = from_py(obj, schema.schema(), schema.names())?;
                let record = writer
                    .encode_value(&value)
                    .map_err(|e| avro_error(obj.py(), e))?;
                Ok(record.to_vec())
            }
        }
    }
}

/// A sink that only encodes (typed appends take the record and append it themselves).
struct Encoder;

impl cobsfile::avro::RecordSink for Encoder {
    type Receipt = ();
    fn write_record(&mut self, _: &[u8]) -> cobsfile::Result<()> {
        Ok(())
    }
    fn write_metadata(&mut self, _: &[(&str, &[u8])]) -> cobsfile::Result<()> {
        Ok(())
    }
    fn announce(&mut self, _: &[(&str, &[u8])]) -> cobsfile::Result<()> {
        Ok(())
    }
}

#[pymethods]
impl Appender {
    #[new]
    #[pyo3(signature = (path, *, durability="none", compression=None, block_size=None, dictionary=None, schema=None, max_delay=None, threads=1, segment_size=None, segment_age=None, retain_size=None, retain_age=None, retain_count=None, seal=None, seal_every=None, lines=true))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        durability: &str,
        compression: Option<&Bound<'_, PyAny>>,
        block_size: Option<usize>,
        dictionary: Option<Vec<u8>>,
        schema: Option<String>,
        max_delay: Option<f64>,
        threads: usize,
        segment_size: Option<u64>,
        segment_age: Option<f64>,
        retain_size: Option<u64>,
        retain_age: Option<f64>,
        retain_count: Option<u64>,
        seal: Option<PathBuf>,
        seal_every: Option<u64>,
        lines: bool,
    ) -> PyResult<Self> {
        let sealing = sealing_key(py, seal, seal_every)?;
        let mut builder = AppenderBuilder::new()
            .durability(durability_of(durability)?)
            .compression(compression_of(compression)?)
            .line_layout(lines)
            .threads(threads);
        if let Some(size) = block_size {
            builder = builder.block_target(size);
        }
        if let Some(d) = dictionary {
            builder = builder.dictionary(Dictionary::new(d), true);
        }
        if let Some((key, every)) = sealing {
            builder = builder.seal(key).seal_every(every, None);
        }
        if let Some(seconds) = max_delay {
            let delay = Duration::try_from_secs_f64(seconds)
                .map_err(|_| PyValueError::new_err("max_delay must be seconds, >= 0"))?;
            builder = builder.max_delay(delay);
        }
        let seconds = |name: &str, value: f64| {
            Duration::try_from_secs_f64(value)
                .ok()
                .filter(|d| !d.is_zero())
                .ok_or_else(|| PyValueError::new_err(format!("{name} must be seconds, > 0")))
        };
        let mut segmented = false;
        if let Some(bytes) = segment_size {
            if bytes == 0 {
                return Err(PyValueError::new_err("segment_size must be > 0"));
            }
            builder = builder.segment_size(bytes);
            segmented = true;
        }
        if let Some(age) = segment_age {
            builder = builder.segment_age(seconds("segment_age", age)?);
            segmented = true;
        }
        if let Some(bytes) = retain_size {
            builder = builder.retain_size(bytes);
            segmented = true;
        }
        if let Some(age) = retain_age {
            builder = builder.retain_age(seconds("retain_age", age)?);
            segmented = true;
        }
        if let Some(count) = retain_count {
            if count == 0 {
                return Err(PyValueError::new_err("retain_count must be > 0"));
            }
            builder = builder.retain_count(count);
            segmented = true;
        }
        // A log directory when asked, or when the path is one that holds segments.
        segmented |=
            path.is_dir() && cobsfile::segments::list_segments(&path).is_ok_and(|s| !s.is_empty());
        if segmented && path.is_file() {
            return Err(PyValueError::new_err(format!(
                "{}: a file, not a log directory: segment_* and retain_* options keep a log \
                 as a directory of segments",
                path.display()
            )));
        }
        let schema = schema.map(|json| schema_of(py, &json)).transpose()?;
        let mut log = py
            .detach(|| match segmented {
                true => builder.open_dir(&path),
                false => builder.open(&path),
            })
            .map_err(|e| crate::errors::path_error(py, &path, e))?;
        if let Some(schema) = &schema {
            // Announced once per file (an appender that finds it announced writes nothing).
            let entries = schema.metadata();
            py.detach(|| log.announce(entries.iter().map(|(k, v)| (*k, v.as_slice()))))
                .map_err(|e| file_error(py, e))?;
        }
        let o = log.opened();
        let opened = PyDict::new(py);
        opened.set_item("created", o.created)?;
        opened.set_item("exclusive", o.exclusive)?;
        opened.set_item("torn", o.torn.as_ref().map(|r| (r.start, r.end)))?;
        opened.set_item("truncated", o.truncated)?;
        opened.set_item("completed", o.completed)?;
        opened.set_item("log_block", o.log_block)?;
        opened.set_item("header_lost", o.header_lost)?;
        let encoder = schema
            .map(|schema| AvroWriter::new(Encoder, schema).map_err(|e| avro_error(py, e)))
            .transpose()?;
        Ok(Appender {
            log: Some(log),
            encoder,
            opened: opened.unbind(),
        })
    }

    /// Appends one record (bytes, or with a schema a value of it); returns its sequence
    /// number (from 1, in this appender), which `wait_durable` takes.
    /// With `time`, the record's event time: an int of nanoseconds since the epoch, or an
    /// aware datetime.
    #[pyo3(signature = (record, time=None))]
    fn append(
        &mut self,
        py: Python<'_>,
        record: &Bound<'_, PyAny>,
        time: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<u64> {
        let time = crate::time::optional_nanos(time)?;
        let bytes = self.encode(record)?;
        let log = self.log()?;
        py.detach(|| match time {
            Some(time) => log.append_at(&bytes, time),
            None => log.append(&bytes),
        })
        .map_err(|e| file_error(py, e))
    }

    /// Appends the records of an iterable as one batch (one block with `flush` or `fsync`
    /// durability); returns the last one's sequence number (or the last before, if empty).
    fn append_many(&mut self, py: Python<'_>, records: &Bound<'_, PyAny>) -> PyResult<u64> {
        let mut all = Vec::new();
        for record in records.try_iter()? {
            all.push(self.encode(&record?)?);
        }
        let log = self.log()?;
        let range = py
            .detach(|| log.append_batch(all.iter().map(Vec::as_slice)))
            .map_err(|e| file_error(py, e))?;
        Ok(range.end.saturating_sub(1).max(range.start))
    }

    /// Writes a metadata block with these entries.
    fn write_metadata(&mut self, py: Python<'_>, entries: &Bound<'_, PyDict>) -> PyResult<()> {
        let entries = entries_of(Some(entries))?;
        let log = self.log()?;
        py.detach(|| log.write_metadata(entries.iter().map(|(k, v)| (k.as_str(), v.as_slice()))))
            .map_err(|e| file_error(py, e))
    }

    /// Writes the open block (readers see it; not synced).
    fn flush(&mut self, py: Python<'_>) -> PyResult<()> {
        let log = self.log()?;
        py.detach(|| log.flush()).map_err(|e| file_error(py, e))
    }

    /// Makes everything appended so far durable (written and synced), in any mode.
    fn sync(&mut self, py: Python<'_>) -> PyResult<()> {
        let log = self.log()?;
        py.detach(|| log.sync()).map_err(|e| file_error(py, e))
    }

    /// Waits until record `seq` is durable (group commit); returns at once in other modes
    /// once it is.
    fn wait_durable(&mut self, py: Python<'_>, seq: u64) -> PyResult<()> {
        let log = self.log()?;
        py.detach(|| log.wait_durable(seq))
            .map_err(|e| file_error(py, e))
    }

    /// Records (by sequence number) known durable.
    #[getter]
    fn durable(&mut self) -> PyResult<u64> {
        Ok(self.log()?.durable())
    }

    /// What opening found: created, exclusive, torn (a byte range or None), truncated,
    /// completed, log_block, header_lost.
    #[getter]
    fn opened<'py>(&self, py: Python<'py>) -> Bound<'py, PyDict> {
        self.opened.bind(py).clone()
    }

    /// Writes the open block, syncs as the durability asks, and closes. Idempotent.
    fn close(&mut self, py: Python<'_>) -> PyResult<()> {
        match self.log.take() {
            None => Ok(()),
            Some(log) => py.detach(|| log.close()).map_err(|e| file_error(py, e)),
        }
    }

    #[getter]
    fn closed(&self) -> bool {
        self.log.is_none()
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __exit__(
        &mut self,
        py: Python<'_>,
        _exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }
}

/// Registers the classes.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Writer>()?;
    m.add_class::<Appender>()?;
    Ok(())
}

/// The private key file `seal` names, read (refused if others can read it), and how often to
/// seal: `seal_every` bytes of blocks, 1 MiB by default.
fn sealing_key(
    py: Python<'_>,
    seal: Option<PathBuf>,
    seal_every: Option<u64>,
) -> PyResult<Option<(cobsfile::key::SealingKey, u64)>> {
    let Some(path) = seal else {
        if seal_every.is_some() {
            return Err(PyValueError::new_err(
                "seal_every needs seal= (a private key file)",
            ));
        }
        return Ok(None);
    };
    if seal_every == Some(0) {
        return Err(PyValueError::new_err("seal_every must be > 0"));
    }
    let key = cobsfile::key::SealingKey::read(&path).map_err(|e| file_error(py, e))?;
    Ok(Some((
        key,
        seal_every.unwrap_or(cobsfile::seal::DEFAULT_SEAL_BYTES),
    )))
}
