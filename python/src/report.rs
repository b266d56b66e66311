//! `cobsfile.verify` and `cobsfile.recover`, and the reports they return.

use std::fs;
use std::io::{self, BufWriter};
use std::path::PathBuf;

use cobsfile::fs::NewFile;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::file_error;
use crate::reader::{open_source, reader_options, Damage};

/// What a full read of a file found.
#[pyclass(module = "cobsfile", frozen, get_all)]
pub(crate) struct Report {
    /// The input's length in bytes.
    pub len: u64,
    /// Records in intact data blocks.
    pub records: u64,
    /// Intact blocks by type ("header", "metadata", "data", ...).
    pub blocks: Py<PyDict>,
    /// Bytes in intact blocks.
    pub block_bytes: u64,
    /// Damaged and unreadable ranges, in order.
    pub damaged: Vec<Damage>,
    /// How the file ends: "finished", "open" (a log), "unfinished" or "empty".
    pub ending: String,
    /// Nothing damaged or unreadable, and finished or an open log.
    pub clean: bool,
    /// Bytes in damaged (or unreadable) ranges.
    pub damaged_bytes: u64,
    /// What the seals say, when `verify` was given keys; None otherwise.
    pub seals: Option<Py<Seals>>,
}

/// What verification of a file's seals found (spec 9.10).
#[pyclass(module = "cobsfile", frozen, get_all)]
pub(crate) struct Seals {
    /// Nothing tampered with, a valid seal found, every block authentic.
    pub authentic: bool,
    /// Authentic blocks and their records.
    pub authentic_blocks: u64,
    pub authentic_records: u64,
    /// Blocks no seal covers, their records, and their byte ranges.
    pub unsealed_blocks: u64,
    pub unsealed_records: u64,
    pub unsealed: Vec<(u64, u64)>,
    /// Each tampering: (start, end, kind, message); kind as `verify --key` names it.
    pub tampered: Vec<(u64, u64, String, String)>,
    /// Each chain of valid seals: a dict of "chain", "key_id", "seals", "blocks",
    /// "last_seal" (hex), "last_time" (nanoseconds since the epoch).
    pub chains: Vec<Py<PyDict>>,
    /// The hash of the newest valid seal (hex): keep it, and `extends` proves later that the
    /// file was only appended to since. None without a valid seal.
    pub last_seal: Option<String>,
    /// The file's id (hex), if it has one.
    pub file_id: Option<String>,
    /// The bytes (start, end) verified when only the blocks about a window were (`since`,
    /// `until`; spec 9.10.1); None when the whole file was.
    pub span: Option<(u64, u64)>,
    hashes: Vec<[u8; 32]>,
    untampered: bool,
}

#[pymethods]
impl Seals {
    /// Whether the file still holds the valid seal of `seal_hash` (hex, as `last_seal`) and
    /// nothing was tampered with: it was only appended to since.
    fn extends(&self, seal_hash: &str) -> PyResult<bool> {
        let hash = parse_hash(seal_hash)?;
        Ok(self.untampered && self.hashes.contains(&hash))
    }

    fn __repr__(&self) -> String {
        format!(
            "Seals(authentic={}, authentic_records={}, unsealed_records={}, tampered={})",
            if self.authentic { "True" } else { "False" },
            self.authentic_records,
            self.unsealed_records,
            self.tampered.len()
        )
    }

    fn __bool__(&self) -> bool {
        self.authentic
    }
}

fn parse_hash(text: &str) -> PyResult<[u8; 32]> {
    cobsfile::seal::parse_hash(text).ok_or_else(|| {
        PyValueError::new_err(format!("{text:?} is no seal hash (64 hexadecimal digits)"))
    })
}

impl Seals {
    fn of(py: Python<'_>, sealed: &cobsfile::seal::Sealed) -> PyResult<Seals> {
        use cobsfile::seal::{file_id_text, hash_text, Status};
        let (authentic_blocks, authentic_records) = sealed.count(Status::Authentic);
        let (unsealed_blocks, unsealed_records) = sealed.count(Status::Unsealed);
        let mut chains = Vec::new();
        for c in &sealed.chains {
            let d = PyDict::new(py);
            d.set_item("chain", file_id_text(&c.chain))?;
            d.set_item("key_id", c.key_id.to_string())?;
            d.set_item("seals", c.seals)?;
            d.set_item("blocks", c.blocks)?;
            d.set_item("last_seal", hash_text(&c.last_hash))?;
            d.set_item("last_time", c.last_time)?;
            chains.push(d.unbind());
        }
        let last = sealed.chains.iter().max_by_key(|c| c.last_time);
        Ok(Seals {
            authentic: sealed.is_authentic(),
            authentic_blocks,
            authentic_records,
            unsealed_blocks,
            unsealed_records,
            unsealed: (sealed.ranges(Status::Unsealed).iter())
                .map(|r| (r.start, r.end))
                .collect(),
            tampered: (sealed.tampered.iter())
                .map(|t| {
                    let kind = t.kind.name().to_string();
                    (t.range.start, t.range.end, kind, t.detail.clone())
                })
                .collect(),
            chains,
            last_seal: last.map(|c| hash_text(&c.last_hash)),
            file_id: sealed.file_id.as_ref().map(file_id_text),
            span: sealed.verified().map(|r| (r.start, r.end)),
            hashes: sealed.seal_hashes.clone(),
            untampered: sealed.tampered.is_empty(),
        })
    }
}

#[pymethods]
impl Report {
    fn __repr__(&self) -> String {
        format!(
            "Report(len={}, records={}, damaged={} range(s), {} bytes, ending={:?}, clean={})",
            self.len,
            self.records,
            self.damaged.len(),
            self.damaged_bytes,
            self.ending,
            if self.clean { "True" } else { "False" }
        )
    }

    fn __bool__(&self) -> bool {
        self.clean
    }
}

impl Report {
    fn of(py: Python<'_>, report: &cobsfile::Report) -> PyResult<Self> {
        let blocks = PyDict::new(py);
        let b = &report.blocks;
        for (name, n) in [
            ("header", b.header),
            ("metadata", b.metadata),
            ("data", b.data),
            ("dictionary", b.dictionary),
            ("index", b.index),
            ("end", b.end),
            ("log", b.log),
            ("time", b.time),
            ("seal", b.seal),
        ] {
            blocks.set_item(name, n)?;
        }
        for (id, n) in &b.unknown {
            blocks.set_item(cobsfile::BlockType::Unknown(*id).name(), n)?;
        }
        Ok(Report {
            len: report.len,
            records: report.records,
            blocks: blocks.unbind(),
            block_bytes: report.block_bytes,
            damaged: report.damaged.iter().map(Damage::of).collect(),
            ending: report.ending.name().to_string(),
            clean: report.is_clean(),
            damaged_bytes: report.damaged_bytes(),
            seals: None,
        })
    }
}

/// What `recover` wrote, and what the input held.
#[pyclass(module = "cobsfile", frozen, get_all)]
pub(crate) struct Recovery {
    /// The full read of the input: what was intact, and the damaged ranges (what was lost).
    pub report: Py<Report>,
    /// Blocks written (header, index and end blocks included).
    pub blocks: u64,
    /// Bytes written.
    pub written: u64,
    /// Nothing was lost.
    pub lossless: bool,
    /// Where a header of a newer format version stopped the read: (offset, version), or None.
    pub newer_version: Option<(u64, i64)>,
}

#[pymethods]
impl Recovery {
    fn __repr__(&self) -> String {
        format!(
            "Recovery(records={}, blocks={}, written={}, lost={} range(s), lossless={})",
            self.report.get().records,
            self.blocks,
            self.written,
            self.report.get().damaged.len(),
            if self.lossless { "True" } else { "False" }
        )
    }
}

/// Reads every block of `source` (a path, bytes or a binary file object) and reports what is
/// intact, damaged and unreadable, and how the file ends; with `keys` (public key files),
/// also what its seals prove, in `report.seals` (an object in a store read by byte ranges).
/// With `keys` and `since`/`until`, only the blocks about the window's are read and verified,
/// against every seal the file's index lists (spec 9.10.1; `report.seals.span` says which
/// bytes), where the index lists a time index.
#[pyfunction]
#[pyo3(signature = (source, *, dictionaries=None, threads=1, max_body_size=None, keys=None, since=None, until=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn verify(
    py: Python<'_>,
    source: &Bound<'_, PyAny>,
    dictionaries: Option<Vec<Vec<u8>>>,
    threads: usize,
    max_body_size: Option<usize>,
    keys: Option<Vec<PathBuf>>,
    since: Option<&Bound<'_, PyAny>>,
    until: Option<&Bound<'_, PyAny>>,
) -> PyResult<Report> {
    let (since, until) = (
        crate::time::optional_nanos(since)?,
        crate::time::optional_nanos(until)?,
    );
    let window = (since.is_some() || until.is_some()).then(|| cobsfile::Window::new(since, until));
    if window.is_some() && keys.is_none() {
        return Err(PyValueError::new_err(
            "since and until choose what a verification of seals reads: give keys",
        ));
    }
    let (bytes, _) = open_source(py, source)?;
    let options = reader_options(dictionaries, threads, max_body_size, window);
    if let Some(paths) = keys {
        if paths.is_empty() {
            return Err(PyValueError::new_err(
                "keys is empty: give public key files",
            ));
        }
        let keys = (paths.iter())
            .map(cobsfile::key::VerifyingKey::read)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| file_error(py, e))?;
        let (report, sealed) = py
            .detach(|| bytes.verify_seals(&options, &keys))
            .map_err(|e| file_error(py, e))?;
        let mut out = Report::of(py, &report)?;
        out.seals = Some(Py::new(py, Seals::of(py, &sealed)?)?);
        return Ok(out);
    }
    let report = py
        .detach(|| bytes.verify(&options))
        .map_err(|e| file_error(py, e))?;
    Report::of(py, &report)
}

/// Writes to `destination` a new, finished file of every intact block of `source`, in order,
/// and reports what was lost. The destination must not exist (unless `overwrite`) and must
/// not be the source; it appears whole or not at all (`cobsfile::fs::NewFile`).
#[pyfunction]
#[pyo3(signature = (source, destination, *, overwrite=false, dictionaries=None, max_body_size=None))]
pub(crate) fn recover(
    py: Python<'_>,
    source: &Bound<'_, PyAny>,
    destination: PathBuf,
    overwrite: bool,
    dictionaries: Option<Vec<Vec<u8>>>,
    max_body_size: Option<usize>,
) -> PyResult<Recovery> {
    if let Ok(src) = source.extract::<PathBuf>() {
        let same = match (fs::canonicalize(&src), fs::canonicalize(&destination)) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        };
        if same {
            return Err(PyValueError::new_err(format!(
                "{}: the destination is the source; recover into a new file",
                destination.display()
            )));
        }
    }
    if !overwrite && destination.exists() {
        return Err(PyErr::from(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "{}: exists (overwrite=True replaces it)",
                destination.display()
            ),
        )));
    }
    let (bytes, _) = open_source(py, source)?;
    // Recovery reads every byte in order: an object is fetched whole first.
    let bytes = py.detach(|| bytes.into_whole()).map_err(PyErr::from)?;
    let options = reader_options(dictionaries, 1, max_body_size, None);
    // The library's new file: named only once whole and synced, nothing left behind on an
    // error; it refuses a name taken meanwhile unless `overwrite`.
    let recovery = py
        .detach(|| -> Result<cobsfile::Recovery, cobsfile::Error> {
            let mut out = BufWriter::new(NewFile::create(&destination, overwrite)?);
            let recovery =
                cobsfile::recover(bytes.whole().unwrap_or_default(), &options, &mut out)?;
            out.into_inner().map_err(|e| e.into_error())?.persist()?;
            Ok(recovery)
        })
        .map_err(|e| crate::errors::path_error(py, &destination, e))?;
    Ok(Recovery {
        report: Py::new(py, Report::of(py, &recovery.report)?)?,
        blocks: recovery.blocks,
        written: recovery.written,
        lossless: recovery.is_lossless(),
        newer_version: recovery.newer_version.map(|n| (n.offset, n.version)),
    })
}

/// The segments of the log directory `path`, in log order (spec 11.4): paths of the files
/// named by a sequence number of 20 digits and `.cobs`. Empty for a directory without them.
#[pyfunction]
pub(crate) fn segments(path: PathBuf) -> PyResult<Vec<PathBuf>> {
    let listed = cobsfile::segments::list_segments(&path)?;
    Ok(listed.into_iter().map(|(_, p)| p).collect())
}
