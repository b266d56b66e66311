//! `cobsfile.Reader`: records, metadata, blocks and damage of one file, and its rows as Arrow.

use std::ops::Range;
use std::sync::{Arc, Mutex};

use cobsfile::avro::SchemaLimits;
use cobsfile::avro::{
    AvroReader, AvroReaderBuilder, Error as AvroError, RecordProblem, Schemas, WriterSchema,
};
use cobsfile::{
    BlockType, Chunks, Dictionary, MappedFile, Metadata, NotACobsfile, ReaderBuilder, SliceReader,
    SliceSource, Source, StreamReader, StreamSource,
};
use cobsfile_datafusion::{RemoteObject, StoreFetch};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyList, PyMemoryView, PyString};
use self_cell::self_cell;

use crate::errors::{self, avro_error, file_error};
use crate::values::{to_py, FieldNames, PyBuilder};

/// The bytes a reader reads: a mapped file, bytes it was given (or read from a file object),
/// or an object in S3-compatible storage, read in place by byte ranges.
pub(crate) enum Bytes {
    Mapped(MappedFile),
    Owned(Arc<[u8]>),
    Remote(Box<RemoteObject>, String),
}

/// A reader of records of [`Bytes`]: over the bytes held, or fetching as it reads.
pub(crate) enum AnyReader<'a> {
    Slice(SliceReader<'a>),
    Remote(StreamReader<Chunks<'a, StoreFetch>>),
}

impl Bytes {
    /// The bytes, when they are held whole (not for an object read by ranges).
    pub(crate) fn whole(&self) -> Option<&[u8]> {
        match self {
            Bytes::Mapped(map) => Some(map.bytes()),
            Bytes::Owned(bytes) => Some(bytes),
            Bytes::Remote(..) => None,
        }
    }

    /// The bytes held whole: an object is fetched whole (into an unnamed temporary file,
    /// mapped), for a job that reads every byte in order anyway (recovery).
    pub(crate) fn into_whole(self) -> std::io::Result<Bytes> {
        match self {
            Bytes::Remote(_, url) => Ok(Bytes::Mapped(cobsfile_datafusion::fetch_mapped(&url)?)),
            held => Ok(held),
        }
    }

    /// A reader from the start: its worker threads read held bytes in place; an object is
    /// fetched as the reader goes, so a read that stops early fetches little.
    pub(crate) fn reader(&self, options: &ReaderBuilder) -> AnyReader<'_> {
        match self {
            Bytes::Mapped(map) => AnyReader::Slice(map.reader_with(options)),
            Bytes::Owned(bytes) => AnyReader::Slice(options.from_shared(bytes)),
            Bytes::Remote(object, _) => AnyReader::Remote(object.remote().reader(options)),
        }
    }

    /// The intact metadata blocks, in file order: an object's from the blocks its index
    /// lists, fetched alone.
    pub(crate) fn metadata(
        &self,
        options: &ReaderBuilder,
    ) -> Result<Vec<Metadata>, cobsfile::Error> {
        let scan = |bytes: &[u8]| options.from_slice(bytes).metadata().flatten().collect();
        match self {
            Bytes::Mapped(map) => Ok(scan(map.bytes())),
            Bytes::Owned(bytes) => Ok(scan(bytes)),
            Bytes::Remote(object, _) => object.remote().metadata(options),
        }
    }

    /// The Avro schemas the file announces, oldest first (each once, where it was last
    /// announced).
    pub(crate) fn schemas(&self, options: &ReaderBuilder) -> Result<Schemas, cobsfile::Error> {
        Ok(Schemas::of_metadata(
            self.metadata(options)?,
            SchemaLimits::default(),
        ))
    }

    /// Whether the bytes are no cobsfile at all (the library's verdict, spec 9.5).
    pub(crate) fn not_a_cobsfile(
        &self,
        options: &ReaderBuilder,
    ) -> Result<Option<NotACobsfile>, cobsfile::Error> {
        match self {
            Bytes::Remote(object, _) => object.remote().not_a_cobsfile(options),
            held => Ok(held.whole().and_then(|bytes| options.not_a_cobsfile(bytes))),
        }
    }

    /// Every block read and checked on the options' threads: an object by byte ranges, each
    /// thread fetching its own.
    pub(crate) fn verify(
        &self,
        options: &ReaderBuilder,
    ) -> Result<cobsfile::Report, cobsfile::Error> {
        match self {
            Bytes::Remote(object, _) => object.remote().verify(options),
            Bytes::Mapped(map) => options.verify(map.bytes()),
            Bytes::Owned(bytes) => options.verify(bytes),
        }
    }

    /// The verification of the seals signed by one of `keys` (`ReaderBuilder::verify_seals`):
    /// an object's by byte ranges, only the blocks about a window's where its index says.
    pub(crate) fn verify_seals(
        &self,
        options: &ReaderBuilder,
        keys: &[cobsfile::key::VerifyingKey],
    ) -> Result<(cobsfile::Report, cobsfile::seal::Sealed), cobsfile::Error> {
        match self {
            Bytes::Remote(object, _) => object.remote().verify_seals(options, keys),
            Bytes::Mapped(map) => options.verify_seals(map.bytes(), keys),
            Bytes::Owned(bytes) => options.verify_seals(bytes, keys),
        }
    }
}

/// What damage does: skipped (and listed in `damage`), raised, or passed to a callable.
pub(crate) enum OnDamage {
    Skip,
    Raise,
    Call(Py<PyAny>),
}

impl OnDamage {
    pub(crate) fn parse(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let Some(obj) = obj else {
            return Ok(OnDamage::Skip);
        };
        if let Ok(name) = obj.extract::<String>() {
            return match name.as_str() {
                "skip" => Ok(OnDamage::Skip),
                "raise" => Ok(OnDamage::Raise),
                other => Err(PyValueError::new_err(format!(
                    "on_damage must be 'skip', 'raise' or a callable, not {other:?}"
                ))),
            };
        }
        if obj.is_callable() {
            return Ok(OnDamage::Call(obj.clone().unbind()));
        }
        Err(PyTypeError::new_err(
            "on_damage must be 'skip', 'raise' or a callable",
        ))
    }

    /// Records `damage` in `seen`, then skips it, raises it or hands it to the callable (whose
    /// exception, if any, is raised).
    pub(crate) fn handle(
        &self,
        py: Python<'_>,
        damage: Damage,
        seen: &mut Vec<Damage>,
    ) -> PyResult<()> {
        seen.push(damage.clone());
        match self {
            OnDamage::Skip => Ok(()),
            OnDamage::Raise => Err(damage.to_err(py)),
            OnDamage::Call(f) => f.call1(py, (damage,)).map(drop),
        }
    }

    fn clone_ref(&self, py: Python<'_>) -> Self {
        match self {
            OnDamage::Skip => OnDamage::Skip,
            OnDamage::Raise => OnDamage::Raise,
            OnDamage::Call(f) => OnDamage::Call(f.clone_ref(py)),
        }
    }
}

/// A damaged (or unreadable) byte range a read skipped, in the library's one shape of a
/// damaged range (`cobsfile::Damage::status`): the fields `verify --json` and `ls --json` give
/// it, and `records` and `kind` for records a typed read skipped whole.
#[pyclass(module = "cobsfile", frozen, get_all, eq)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Damage {
    /// First byte skipped.
    pub start: u64,
    /// One past the last byte skipped: the next intact block's sync byte, or the end.
    pub end: u64,
    /// "damaged", or "unreadable" for bytes this reader cannot read though they may be intact
    /// (a zstd dictionary it was not given, a limit it keeps, a record of a schema it does
    /// not know).
    pub status: String,
    /// The cause's name, for scripts: spec 9.8's (`crc`, `truncated`, ...), or the record
    /// problem's (`schema-unknown`).
    pub cause: String,
    /// What went wrong, as a sentence.
    pub message: String,
    /// What the range held as written, when the file's index says; else None.
    pub held: Option<Held>,
    /// "damaged", "unreadable", or "record" for typed records skipped whole.
    pub kind: String,
    /// Records skipped whole, when known (a block of records whose schema is unknown).
    pub records: u64,
}

/// The blocks and records a damaged range held when it was written, as the file's index lists
/// them.
#[pyclass(module = "cobsfile", frozen, get_all, eq)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Held {
    pub blocks: u64,
    pub data_blocks: u64,
    pub metadata_blocks: u64,
    pub records: u64,
}

#[pymethods]
impl Held {
    fn __repr__(&self) -> String {
        format!(
            "Held(blocks={}, data_blocks={}, metadata_blocks={}, records={})",
            self.blocks, self.data_blocks, self.metadata_blocks, self.records
        )
    }
}

#[pymethods]
impl Damage {
    fn __repr__(&self) -> String {
        format!(
            "Damage(start={}, end={}, status={:?}, cause={:?})",
            self.start, self.end, self.status, self.cause
        )
    }

    fn __str__(&self) -> String {
        self.text()
    }

    /// Bytes in the range.
    #[getter]
    fn size(&self) -> u64 {
        self.end - self.start
    }

    /// The range as `verify --json` gives it: `start`, `end`, `status`, `cause`, `message` and
    /// `held` (a dict, or None), and `records` skipped whole.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("start", self.start)?;
        d.set_item("end", self.end)?;
        d.set_item("status", &self.status)?;
        d.set_item("cause", &self.cause)?;
        d.set_item("message", &self.message)?;
        match &self.held {
            Some(h) => {
                let held = PyDict::new(py);
                held.set_item("blocks", h.blocks)?;
                held.set_item("data_blocks", h.data_blocks)?;
                held.set_item("metadata_blocks", h.metadata_blocks)?;
                held.set_item("records", h.records)?;
                d.set_item("held", held)?;
            }
            None => d.set_item("held", py.None())?,
        }
        d.set_item("records", self.records)?;
        Ok(d)
    }
}

impl Damage {
    /// The range as a sentence: `bytes START..END damaged: MESSAGE`, or the records skipped.
    pub(crate) fn text(&self) -> String {
        if self.kind == "record" {
            format!(
                "{} record(s) of the block at offset {} skipped: {}",
                self.records, self.start, self.message
            )
        } else {
            format!(
                "bytes {}..{} {}: {}",
                self.start, self.end, self.status, self.message
            )
        }
    }

    /// The library's damaged range.
    pub(crate) fn of(damage: &cobsfile::Damage) -> Self {
        Damage {
            start: damage.range.start,
            end: damage.range.end,
            status: damage.status().into(),
            cause: damage.cause.name().into(),
            message: damage.cause.to_string(),
            held: damage.held.as_ref().map(|h| Held {
                blocks: h.blocks,
                data_blocks: h.data_blocks,
                metadata_blocks: h.metadata_blocks,
                records: h.records,
            }),
            kind: damage.status().into(),
            records: 0,
        }
    }

    /// The damaged range an error names, if it names one.
    pub(crate) fn of_error(error: &cobsfile::Error) -> Option<Self> {
        cobsfile::Damage::of_error(error).map(|d| Damage::of(&d))
    }

    /// `records` typed records at `offset` skipped whole for `problem`.
    pub(crate) fn records(offset: u64, records: u64, cause: &str, message: String) -> Self {
        Damage {
            start: offset,
            end: offset,
            status: "unreadable".into(),
            cause: cause.into(),
            message,
            held: None,
            kind: "record".into(),
            records,
        }
    }

    /// As an exception (for `on_damage="raise"`).
    pub(crate) fn to_err(&self, py: Python<'_>) -> PyErr {
        errors::damaged(
            py,
            self.text(),
            (self.start, self.end),
            &self.status,
            &self.cause,
            &self.message,
        )
    }
}

/// A block of the file, or a damaged range where blocks were lost.
#[pyclass(module = "cobsfile", frozen, get_all)]
#[derive(Debug, Clone)]
pub(crate) struct BlockInfo {
    /// Offset of the block's opening sync byte (of the first damaged byte).
    pub offset: u64,
    /// "header", "metadata", "data", "dictionary", "index", "end", "log", "unknown(N)"; None
    /// for a damaged range.
    pub r#type: Option<String>,
    /// Bytes after the opening sync byte up to and including the closing one (of the range).
    pub size: u64,
    /// Records of a data block, entries of a metadata or index block.
    pub records: Option<u64>,
    /// How the payload is stored: "none", "zstd", "zstd+dict", "zstd-lines", "zstd+dict-lines".
    pub codec: Option<String>,
    /// The payload's size uncompressed.
    pub payload_size: Option<u64>,
    /// "intact", "damaged" or "unreadable".
    pub status: String,
    /// Why a range is damaged or unreadable: the cause's name (spec 9.8), as `Damage.cause`.
    pub cause: Option<String>,
    /// The cause as a sentence, as `Damage.message`.
    pub message: Option<String>,
}

#[pymethods]
impl BlockInfo {
    fn __repr__(&self) -> String {
        match &self.r#type {
            Some(t) => format!(
                "BlockInfo(offset={}, type={t:?}, size={}, records={}, codec={:?}, status={:?})",
                self.offset,
                self.size,
                self.records.map_or("None".to_string(), |n| n.to_string()),
                self.codec.as_deref().unwrap_or(""),
                self.status
            ),
            None => format!(
                "BlockInfo(offset={}, size={}, status={:?}, cause={:?})",
                self.offset,
                self.size,
                self.status,
                self.cause.as_deref().unwrap_or("")
            ),
        }
    }
}

type Avro<'a> = AnyAvro<'a>;

/// A reader of typed records of [`Bytes`].
pub(crate) enum AnyAvro<'a> {
    Slice(AvroReader<SliceSource<'a>>),
    Remote(AvroReader<StreamSource<Chunks<'a, StoreFetch>>>),
}

self_cell!(
    /// A reader of records over bytes it owns a share of.
    struct RecordCursor {
        owner: Arc<Bytes>,
        #[not_covariant]
        dependent: AnyReader,
    }
);

self_cell!(
    /// A reader of typed records over bytes it owns a share of.
    struct AvroCursor {
        owner: Arc<Bytes>,
        #[not_covariant]
        dependent: Avro,
    }
);

/// The records of the current data block, copied out of the decoder while the GIL was
/// released, handed out one `bytes` at a time.
#[derive(Default)]
struct Batch {
    payload: Vec<u8>,
    records: Vec<Range<usize>>,
    /// Each record's event time, if its block has times.
    times: Vec<Option<i64>>,
    next: usize,
}

enum Step {
    Filled,
    Damage(Damage),
    End,
}

/// The reading state.
struct State {
    cursor: RecordCursor,
    batch: Batch,
    done: bool,
}

impl State {
    /// Reads on to the next data block with records (or damage, or the end).
    fn fill(&mut self) -> Result<Step, cobsfile::Error> {
        let batch = &mut self.batch;
        self.cursor.with_dependent_mut(|_, reader| match reader {
            AnyReader::Slice(reader) => fill(reader, batch),
            AnyReader::Remote(reader) => fill(reader, batch),
        })
    }
}

/// Reads `reader` on to its next data block with records (copied into `batch`), damage, or
/// the end.
fn fill<S: Source>(
    reader: &mut cobsfile::Reader<S>,
    batch: &mut Batch,
) -> Result<Step, cobsfile::Error> {
    loop {
        match reader.next_block() {
            None => return Ok(Step::End),
            Some(Err(e)) => match Damage::of_error(&e) {
                Some(damage) => return Ok(Step::Damage(damage)),
                None => return Err(e),
            },
            Some(Ok(block)) => {
                if block.info().block_type != BlockType::Data {
                    continue;
                }
                let payload = block.payload();
                batch.payload.clear();
                batch.payload.extend_from_slice(payload);
                batch.records.clear();
                batch.times.clear();
                batch.next = 0;
                let base = payload.as_ptr() as usize;
                let mut records = block.records();
                while let Some(record) = records.next() {
                    let start = record.as_ptr() as usize - base;
                    batch.records.push(start..start + record.len());
                    batch.times.push(records.time());
                }
                if !batch.records.is_empty() {
                    return Ok(Step::Filled);
                }
            }
        }
    }
}

/// A cobsfile opened for reading. Iterating yields each record of every intact data block as
/// `bytes`, in file order; damaged ranges are skipped (`on_damage`), never returned.
#[pyclass(module = "cobsfile._cobsfile", subclass)]
pub(crate) struct Reader {
    bytes: Arc<Bytes>,
    name: String,
    options: ReaderBuilder,
    on_damage: OnDamage,
    state: Mutex<State>,
    damage: Vec<Damage>,
}

/// The bytes of `source`: a path (mapped), bytes-like (copied), a file object (read whole), or
/// an `s3://` URL (read by byte ranges).
pub(crate) fn open_source(py: Python<'_>, source: &Bound<'_, PyAny>) -> PyResult<(Bytes, String)> {
    if source.is_instance_of::<PyBytes>()
        || source.is_instance_of::<PyByteArray>()
        || source.is_instance_of::<PyMemoryView>()
    {
        let bytes: Vec<u8> = if let Ok(b) = source.cast::<PyBytes>() {
            b.as_bytes().to_vec()
        } else {
            py.get_type::<PyBytes>().call1((source,))?.extract()?
        };
        return Ok((Bytes::Owned(bytes.into()), "<bytes>".into()));
    }
    if source.hasattr("read")? && !source.is_instance_of::<PyString>() {
        let data = source.call_method0("read")?;
        let bytes: Vec<u8> = data
            .extract()
            .map_err(|_| PyTypeError::new_err("the file object must be opened in binary mode"))?;
        let name = source
            .getattr("name")
            .and_then(|n| n.str().map(|s| s.to_string()))
            .unwrap_or_else(|_| "<file>".into());
        return Ok((Bytes::Owned(bytes.into()), name));
    }
    if let Ok(url) = source.extract::<String>() {
        if url.starts_with("s3://") || url.starts_with("s3a://") {
            // Read in place by byte ranges (its size and tail, where its index is, fetched
            // now, with the GIL released), configured by the AWS_* environment variables as
            // the command line's object storage is.
            let object = py.detach(|| cobsfile_datafusion::RemoteObject::open(&url))?;
            // A read that holds the interpreter's lock (typed records built as they are
            // checked) lets other Python threads run while each request is out.
            let object = object.wait_in(Arc::new(|wait: &mut (dyn FnMut() + Send)| {
                Python::attach(|py| py.detach(wait))
            }));
            return Ok((Bytes::Remote(Box::new(object), url.clone()), url));
        }
    }
    let path: std::path::PathBuf = source
        .extract()
        .map_err(|_| PyTypeError::new_err("expected a path, bytes or a binary file object"))?;
    let name = path.display().to_string();
    let map = py
        .detach(|| MappedFile::open(&path))
        .map_err(|e| errors::path_error(py, &path, e))?;
    Ok((Bytes::Mapped(map), name))
}

/// Reader options from keyword arguments.
pub(crate) fn reader_options(
    dictionaries: Option<Vec<Vec<u8>>>,
    threads: usize,
    max_body_size: Option<usize>,
    window: Option<cobsfile::Window>,
) -> ReaderBuilder {
    // Clones of one set of options share their decoding buffers and worker threads: a
    // Python program that opens file after file reuses them, as one that kept its options
    // would. The library keeps none for the process; the package does, for its callers.
    static BASE: std::sync::OnceLock<ReaderBuilder> = std::sync::OnceLock::new();
    let mut options = BASE
        .get_or_init(ReaderBuilder::new)
        .clone()
        .threads(threads);
    for d in dictionaries.unwrap_or_default() {
        options = options.dictionary(Dictionary::new(d));
    }
    if let Some(max) = max_body_size {
        options = options.max_body_size(max);
    }
    if let Some(window) = window {
        options = options.window(window);
    }
    options
}

impl Reader {
    /// Applies `on_damage` to `damage`: Ok to go on, or the exception to raise.
    fn damaged(&mut self, py: Python<'_>, damage: Damage) -> PyResult<()> {
        self.on_damage.handle(py, damage, &mut self.damage)
    }

    /// The next record as `bytes`, and its event time if it has one; None at the end.
    fn next_record(&mut self, py: Python<'_>) -> PyResult<Option<(Py<PyBytes>, Option<i64>)>> {
        self.next_as(py, |py, record, time| {
            Ok((PyBytes::new(py, record).unbind(), time))
        })
    }

    /// The next record made into a Python object by `make` (from the record's bytes, where
    /// the decoder left them, and its event time); None at the end.
    fn next_as<T>(
        &mut self,
        py: Python<'_>,
        mut make: impl FnMut(Python<'_>, &[u8], Option<i64>) -> PyResult<T>,
    ) -> PyResult<Option<T>> {
        loop {
            let state = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
            let batch = &mut state.batch;
            if let Some(range) = batch.records.get(batch.next).cloned() {
                let time = batch.times.get(batch.next).copied().flatten();
                batch.next += 1;
                return make(py, &batch.payload[range], time).map(Some);
            }
            if state.done {
                return Ok(None);
            }
            let step = py.detach(|| state.fill());
            match step {
                Ok(Step::Filled) => {}
                Ok(Step::End) => state.done = true,
                Ok(Step::Damage(damage)) => self.damaged(py, damage)?,
                Err(e) => {
                    state.done = true;
                    return Err(file_error(py, e));
                }
            }
        }
    }
}

#[pymethods]
impl Reader {
    #[new]
    #[pyo3(signature = (source, *, on_damage=None, dictionaries=None, threads=1, max_body_size=None, since=None, until=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        source: &Bound<'_, PyAny>,
        on_damage: Option<&Bound<'_, PyAny>>,
        dictionaries: Option<Vec<Vec<u8>>>,
        threads: usize,
        max_body_size: Option<usize>,
        since: Option<&Bound<'_, PyAny>>,
        until: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let on_damage = OnDamage::parse(on_damage)?;
        let (since, until) = (
            crate::time::optional_nanos(since)?,
            crate::time::optional_nanos(until)?,
        );
        let window =
            (since.is_some() || until.is_some()).then(|| cobsfile::Window::new(since, until));
        let (bytes, name) = open_source(py, source)?;
        let bytes = Arc::new(bytes);
        let options = reader_options(dictionaries, threads, max_body_size, window);
        let cursor = {
            let options = options.clone();
            RecordCursor::new(bytes.clone(), |bytes| bytes.reader(&options))
        };
        let reader = Reader {
            bytes,
            name,
            options,
            on_damage,
            state: Mutex::new(State {
                cursor,
                batch: Batch::default(),
                done: false,
            }),
            damage: Vec::new(),
        };
        // A non-empty input with no intact block is not a cobsfile: say so now, not after
        // an iteration that returned nothing.
        let (bytes, options) = (&reader.bytes, &reader.options);
        let verdict = py
            .detach(|| bytes.not_a_cobsfile(options))
            .map_err(|e| file_error(py, e))?;
        if let Some(verdict) = verdict {
            return Err(errors::raise::<errors::NotACobsfileError>(
                py,
                format!("{}: {verdict}", reader.name),
                Some(0),
            ));
        }
        Ok(reader)
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<Py<PyBytes>>> {
        Ok(self.next_record(py)?.map(|(record, _)| record))
    }

    /// The next record and its event time (nanoseconds since the epoch, or None), or None at
    /// the end.
    fn _next_timed(&mut self, py: Python<'_>) -> PyResult<Option<(Option<i64>, Py<PyBytes>)>> {
        Ok(self.next_record(py)?.map(|(record, time)| (time, record)))
    }

    /// The records parsed as JSON, as `json.loads` parses them.
    fn _json_records(slf: Py<Self>) -> JsonRecords {
        JsonRecords { reader: slf }
    }

    /// Lets go of the file (its mapping) or bytes: iteration ends, and later calls see an
    /// empty input. Typed-record iterators already made keep their own share.
    fn close(&mut self) {
        self.bytes = Arc::new(Bytes::Owned(Arc::new([])));
        let options = self.options.clone();
        let state = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        state.cursor = RecordCursor::new(self.bytes.clone(), |bytes| bytes.reader(&options));
        state.batch = Batch::default();
        state.done = true;
    }

    /// The file's name (its path, `<bytes>`, or a file object's name).
    #[getter]
    fn name(&self) -> String {
        self.name.clone()
    }

    /// Damaged ranges this reader has skipped so far (all of them once iteration ends).
    #[getter]
    fn damage(&self) -> Vec<Damage> {
        self.damage.clone()
    }

    /// Whether damage is skipped without a word (on_damage="skip"): the Python layer then
    /// warns where a result lacks rows.
    #[getter]
    fn _on_damage_is_skip(&self) -> bool {
        matches!(self.on_damage, OnDamage::Skip)
    }

    /// The entries of every intact metadata block, in file order (a later value of a key
    /// replaces an earlier one): keys `str`, values `bytes`.
    #[getter]
    fn metadata<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (bytes, options) = (&self.bytes, &self.options);
        let entries = py.detach(|| {
            // In the order keys first appear; each key's place found in a map, not by a
            // search of the keys so far (a file may hold many).
            let mut entries: Vec<(String, Vec<u8>)> = Vec::new();
            let mut place: std::collections::HashMap<String, usize> =
                std::collections::HashMap::new();
            for metadata in bytes.metadata(options)? {
                for (k, v) in metadata.entries {
                    match place.get(&k) {
                        Some(&i) => entries[i].1 = v,
                        None => {
                            place.insert(k.clone(), entries.len());
                            entries.push((k, v));
                        }
                    }
                }
            }
            Ok(entries)
        });
        let entries = entries.map_err(|e| file_error(py, e))?;
        let dict = PyDict::new(py);
        for (k, v) in entries {
            dict.set_item(k, PyBytes::new(py, &v))?;
        }
        Ok(dict)
    }

    /// Every intact block of the file and every damaged range, in order.
    fn blocks(&self, py: Python<'_>) -> PyResult<Vec<BlockInfo>> {
        let (bytes, options) = (&self.bytes, &self.options);
        py.detach(|| match bytes.reader(options) {
            AnyReader::Slice(mut reader) => block_list(&mut reader),
            AnyReader::Remote(mut reader) => block_list(&mut reader),
        })
        .map_err(|e| file_error(py, e))
    }

    /// The Avro schemas the file announces (JSON), oldest first.
    fn avro_schemas(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let (bytes, options) = (&self.bytes, &self.options);
        let schemas = py
            .detach(|| bytes.schemas(options))
            .map_err(|e| file_error(py, e))?;
        Ok(schemas.iter().map(|s| s.json().to_string()).collect())
    }

    /// Typed records as Python objects (dicts for records), decoded with the Avro schema each
    /// record names, resolved to `reader_schema` (JSON) if given.
    #[pyo3(signature = (reader_schema=None))]
    fn _avro_records(
        &self,
        py: Python<'_>,
        reader_schema: Option<String>,
    ) -> PyResult<AvroRecords> {
        let (bytes, options) = (&self.bytes, &self.options);
        let schemas = py
            .detach(|| bytes.schemas(options))
            .map_err(|e| file_error(py, e))?;
        if schemas.is_empty() {
            return Err(errors::raise::<errors::RecordError>(
                py,
                format!(
                    "{}: no Avro schema in the file (decode='json' reads JSON records)",
                    self.name
                ),
                None,
            ));
        }
        let mut builder = AvroReaderBuilder::new().schemas(&schemas);
        let mut resolved = None;
        if let Some(json) = reader_schema {
            let schema = WriterSchema::parse(&json).map_err(|e| {
                errors::raise::<errors::RecordError>(py, format!("reader schema: {e}"), None)
            })?;
            builder = builder.reader_schema(schema.schema().clone());
            resolved = Some(schema);
        }
        let options = options.clone();
        let cursor = AvroCursor::new(self.bytes.clone(), |bytes| match bytes.reader(&options) {
            AnyReader::Slice(reader) => AnyAvro::Slice(builder.build(reader)),
            AnyReader::Remote(reader) => AnyAvro::Remote(builder.build(reader)),
        });
        Ok(AvroRecords {
            cursor: Mutex::new(cursor),
            resolved,
            on_damage: self.on_damage.clone_ref(py),
            pending: std::collections::VecDeque::new(),
            done: false,
            damage: Vec::new(),
            names: FieldNames::default(),
        })
    }

    /// Rows of the file as Arrow record batches, exported through the Arrow C stream
    /// interface (see `to_arrow`).
    #[pyo3(signature = (columns=None, records="auto", reader_schema=None, batch_size=65536, threads=1))]
    fn _arrow_stream(
        &mut self,
        py: Python<'_>,
        columns: Option<Vec<String>>,
        records: &str,
        reader_schema: Option<String>,
        batch_size: usize,
        threads: usize,
    ) -> PyResult<crate::arrow::ArrowStream> {
        let mut options = cobsfile_datafusion::CobsfileOptions::new();
        // Damage is read past, then handled as on_damage says, as iteration handles it (a
        // DamagedError for "raise").
        let mut set = vec![("records".to_string(), records.to_string())];
        if let Some(schema) = reader_schema {
            set.push(("reader_schema".into(), schema));
        }
        for (k, v) in set {
            options
                .set(&k, &v)
                .map_err(|e| PyValueError::new_err(e.to_string()))?;
        }
        let (bytes, name, reader) = (&self.bytes, &self.name, &self.options);
        let columns = columns.as_deref();
        let read = py.detach(|| match &**bytes {
            Bytes::Remote(object, _) => cobsfile_datafusion::read_object(
                object, name, &options, reader, columns, batch_size, threads,
            ),
            held => cobsfile_datafusion::read_file(
                held.whole().unwrap_or_default(),
                name,
                &options,
                reader,
                columns,
                batch_size,
                threads,
            ),
        });
        let read = read.map_err(|e| {
            let message = e.strip_backtrace().to_string();
            let message = message
                .strip_prefix("Execution error: ")
                .or_else(|| message.strip_prefix("Error during planning: "))
                .unwrap_or(&message)
                .to_string();
            errors::raise::<errors::Error>(py, message, None)
        })?;
        for d in read.damage {
            let damage = Damage {
                start: d.range.start,
                end: d.range.end,
                status: d.status.into(),
                cause: d.cause.into(),
                message: d.message,
                held: None,
                kind: if d.records > 0 { "record" } else { d.status }.into(),
                records: d.records,
            };
            self.damaged(py, damage)?;
        }
        Ok(crate::arrow::ArrowStream::new(read.schema, read.batches))
    }
}

/// Every intact block of `reader` and every damaged range, in order.
fn block_list<S: Source>(
    reader: &mut cobsfile::Reader<S>,
) -> Result<Vec<BlockInfo>, cobsfile::Error> {
    let mut out = Vec::new();
    while let Some(block) = reader.next_block() {
        match block {
            Ok(block) => {
                let info = block.info();
                out.push(BlockInfo {
                    offset: info.offset,
                    r#type: Some(info.block_type.name()),
                    size: info.size,
                    records: info.items,
                    codec: Some(info.codec.to_string()),
                    payload_size: Some(info.payload_size),
                    status: "intact".into(),
                    cause: None,
                    message: None,
                });
            }
            Err(e) => match Damage::of_error(&e) {
                Some(d) => out.push(BlockInfo {
                    offset: d.start,
                    r#type: None,
                    size: d.end - d.start,
                    records: None,
                    codec: None,
                    payload_size: None,
                    status: d.status,
                    cause: Some(d.cause),
                    message: Some(d.message),
                }),
                None => return Err(e),
            },
        }
    }
    Ok(out)
}

/// A record whose value Python cannot hold: an error about that record, after which reading
/// goes on.
fn not_python(py: Python<'_>, e: PyErr, offset: u64, index: u64) -> PyErr {
    errors::raise::<errors::RecordError>(
        py,
        format!("record {index} of the block at offset {offset}: not a Python value: {e}"),
        Some(offset),
    )
}

/// Values decoded at a time (with the GIL released, when resolved to a reader schema).
const VALUES_PER_STEP: usize = 256;

/// What a typed read meets besides a value: damage, or an error (queued in its place). Returns
/// whether reading stops here (`Some(true)`), pauses to hand on what was queued
/// (`Some(false)`), or goes on (`None`).
fn step_error(pending: &mut std::collections::VecDeque<AvroStep>, e: AvroError) -> Option<bool> {
    match e {
        AvroError::File(e @ cobsfile::Error::Damaged { .. }) => {
            pending.extend(Damage::of_error(&e).map(AvroStep::Damage));
            Some(false)
        }
        AvroError::Record {
            offset,
            problem: problem @ RecordProblem::SchemaUnknown { .. },
            ..
        } => {
            pending.push_back(AvroStep::Damage(Damage::records(
                offset,
                1,
                problem.name(),
                problem.to_string(),
            )));
            Some(false)
        }
        // A metadata block whose schema cannot be used: its records come as SchemaUnknown.
        AvroError::Schema { .. } => None,
        // A record written wrong, or an I/O error: raised in its place, after the records
        // before it.
        e => {
            let stop = !matches!(e, AvroError::Record { .. });
            pending.push_back(AvroStep::Error(e));
            Some(stop)
        }
    }
}

/// Queues the objects of `reader`'s next records (each built in the walk that checks it, with
/// the GIL held: no `Value` first), and what it meets besides; whether reading stops here.
fn objects<S: Source>(
    reader: &mut AvroReader<S>,
    builder: &mut PyBuilder<'_>,
    pending: &mut std::collections::VecDeque<AvroStep>,
) -> bool {
    while pending.len() < VALUES_PER_STEP {
        let next = reader
            .next_datum_with(builder)
            .map(|r| r.map(|d| (d.offset, d.index)));
        let next = match next {
            None => return true,
            Some(Ok((offset, index))) => match builder.take() {
                Some(Ok(object)) => {
                    pending.push_back(AvroStep::Object(object));
                    continue;
                }
                Some(Err(e)) => {
                    pending.push_back(AvroStep::NotPython(e, offset, index));
                    continue;
                }
                None => continue,
            },
            Some(Err(e)) => e,
        };
        if let Some(stop) = step_error(pending, next) {
            return stop;
        }
    }
    false
}

/// Queues the values of `reader`'s next records, resolved to `resolved`, and what it meets
/// besides; whether reading stops here.
fn values<S: Source>(
    reader: &mut AvroReader<S>,
    resolved: &WriterSchema,
    pending: &mut std::collections::VecDeque<AvroStep>,
) -> bool {
    while pending.len() < VALUES_PER_STEP {
        let next = reader.next_value().map(|r| {
            let (offset, index) = reader.last_record().unwrap_or_default();
            r.map(|v| (v, offset, index))
        });
        let e = match next {
            None => return true,
            Some(Ok((value, offset, index))) => {
                pending.push_back(AvroStep::Value {
                    value,
                    schema: resolved.clone(),
                    offset,
                    index,
                });
                continue;
            }
            Some(Err(e)) => e,
        };
        if let Some(stop) = step_error(pending, e) {
            return stop;
        }
    }
    false
}

enum AvroStep {
    /// A record's object, built as its datum was checked.
    Object(Py<PyAny>),
    /// A record's value Python cannot hold (a date past year 9999, say), and where it is.
    NotPython(PyErr, u64, u64),
    Value {
        value: cobsfile::avro::apache_avro::types::Value,
        /// The schema the value is of: its writer's, or the reader schema it was resolved to.
        schema: WriterSchema,
        offset: u64,
        index: u64,
    },
    Damage(Damage),
    Error(AvroError),
}

/// The typed records of a reader, as Python objects.
#[pyclass(module = "cobsfile._cobsfile")]
pub(crate) struct AvroRecords {
    cursor: Mutex<AvroCursor>,
    /// The reader schema every value is resolved to, if one was given.
    resolved: Option<WriterSchema>,
    on_damage: OnDamage,
    pending: std::collections::VecDeque<AvroStep>,
    done: bool,
    damage: Vec<Damage>,
    /// Field names as Python strings, kept from batch to batch.
    names: FieldNames,
}

#[pymethods]
impl AvroRecords {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        loop {
            if let Some(step) = self.pending.pop_front() {
                match step {
                    AvroStep::Value {
                        value,
                        schema,
                        offset,
                        index,
                    } => {
                        // A value Python cannot hold (a date past year 9999, say) is an
                        // error about that record; reading goes on after it.
                        let names = schema.names();
                        return to_py(py, value, schema.schema(), names)
                            .map(Some)
                            .map_err(|e| not_python(py, e, offset, index));
                    }
                    AvroStep::Object(object) => return Ok(Some(object)),
                    AvroStep::NotPython(e, offset, index) => {
                        return Err(not_python(py, e, offset, index))
                    }
                    AvroStep::Error(e) => return Err(avro_error(py, e)),
                    AvroStep::Damage(damage) => {
                        self.on_damage.handle(py, damage, &mut self.damage)?;
                        continue;
                    }
                }
            }
            if self.done {
                return Ok(None);
            }
            let cursor = self.cursor.get_mut().unwrap_or_else(|p| p.into_inner());
            let pending = &mut self.pending;
            let Some(resolved) = &self.resolved else {
                // Without a reader schema, each record's object is built in the walk that
                // checks it, with the GIL held: no `Value` first.
                let mut builder = PyBuilder::new(py, std::mem::take(&mut self.names));
                self.done = cursor.with_dependent_mut(|_, reader| match reader {
                    AnyAvro::Slice(reader) => objects(reader, &mut builder, pending),
                    AnyAvro::Remote(reader) => objects(reader, &mut builder, pending),
                });
                self.names = builder.into_names();
                continue;
            };
            self.done = py.detach(|| {
                cursor.with_dependent_mut(|_, reader| match reader {
                    AnyAvro::Slice(reader) => values(reader, resolved, pending),
                    AnyAvro::Remote(reader) => values(reader, resolved, pending),
                })
            });
        }
    }

    /// Damaged ranges and records skipped so far.
    #[getter]
    fn damage(&self) -> Vec<Damage> {
        self.damage.clone()
    }
}

/// The records of a reader parsed as JSON, one object a record.
#[pyclass(module = "cobsfile._cobsfile")]
pub(crate) struct JsonRecords {
    reader: Py<Reader>,
}

#[pymethods]
impl JsonRecords {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        let mut reader = self.reader.bind(py).try_borrow_mut()?;
        reader.next_as(py, |py, record, _| crate::json::loads(py, record))
    }
}

/// Registers the classes.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Reader>()?;
    m.add_class::<AvroRecords>()?;
    m.add_class::<JsonRecords>()?;
    m.add_class::<Damage>()?;
    m.add_class::<Held>()?;
    m.add_class::<BlockInfo>()?;
    let _ = PyList::empty(m.py());
    Ok(())
}
