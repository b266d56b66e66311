//! One file, or the blocks that open in one byte range of it, read into record batches.
//!
//! Synchronous and independent of DataFusion's runtime: the opener runs it on a blocking
//! thread. Records come from the library's readers (a range read when the scan has a range,
//! spec 9.4), so the ranges of a file together yield each intact record exactly once.

use std::fmt;
use std::ops::{ControlFlow, Range};
use std::sync::Arc;

use arrow_avro::reader::{Decoder as AvroDecoder, ReaderBuilder as AvroArrowBuilder};
use arrow_avro::schema::AvroSchema;
use datafusion::arrow::array::{
    ArrayRef, BinaryBuilder, RecordBatch, RecordBatchOptions, StringArray,
    TimestampNanosecondBuilder, UInt64Builder,
};
use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::arrow::json::reader::{Decoder as JsonDecoder, ReaderBuilder as JsonBuilder};
use datafusion::common::{exec_datafusion_err, DataFusionError, Result};

use cobsfile::avro::{
    DatumLimits, Error as AvroError, RecordCheck, RecordProblem, Schemas, WriterSchema,
};
use cobsfile::BlockType;

use crate::columns::{Columns, JsonColumns};
use crate::options::{CobsfileOptions, OnDamage};
use crate::schema::{guard, sample, store_of, Mode, Sample, RAW_COLUMNS};
use crate::store::{FileBytes, StoreFetch};

/// Bytes a scan skipped, or records it could not make rows of, and why: a damaged range in
/// the library's one shape (`cobsfile::Damage::status`), with the file it is in and the
/// records skipped whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// The file, as the table lists it.
    pub file: String,
    /// The bytes concerned: a damaged range, or the block of records that were skipped.
    pub range: Range<u64>,
    /// Records skipped whole (0 for a damaged range, whose records cannot be counted).
    pub records: u64,
    /// `damaged`, or `unreadable` (bytes intact that this reader cannot read, records of a
    /// schema it does not know among them).
    pub status: &'static str,
    /// The cause's name: spec 9.8's for a range, the record problem's (`schema-unknown`,
    /// `schema-conflict`) for records.
    pub cause: &'static str,
    /// What went wrong, as a sentence.
    pub message: String,
}

impl Damage {
    /// The library's damaged range, in `file`.
    pub fn of(file: &str, damage: &cobsfile::Damage) -> Self {
        Damage {
            file: file.to_string(),
            range: damage.range.clone(),
            records: 0,
            status: damage.status(),
            cause: damage.cause.name(),
            message: damage.cause.to_string(),
        }
    }
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.records == 0 {
            write!(
                f,
                "{}: bytes {}..{} skipped: {}",
                self.file, self.range.start, self.range.end, self.message
            )
        } else {
            write!(
                f,
                "{}: {} record(s) of the block at offset {} skipped: {}",
                self.file, self.records, self.range.start, self.message
            )
        }
    }
}

/// What to read and how.
#[derive(Debug, Clone)]
pub(crate) struct ScanSpec {
    pub mode: Mode,
    /// The columns produced, in order: the file schema projected.
    pub projected: SchemaRef,
    /// Their indices in the file schema.
    pub projection: Vec<usize>,
    /// Where the event time column is among the projected columns, if it is one of them:
    /// the other columns are made from the records, this one from their times.
    pub time: Option<usize>,
    /// Where the column of the rows' file is among the projected columns, if it is one.
    pub file: Option<usize>,
    pub batch_size: usize,
    /// Rows after which the scan stops.
    pub limit: Option<usize>,
    pub options: CobsfileOptions,
    /// How the library reads the file: the options' limits, and any zstd dictionaries.
    pub reader: cobsfile::ReaderBuilder,
}

/// The record bytes a batch holds at most, however few its rows: batches are cut by rows
/// (`batch_size`) and by bytes, so that records of a MiB each do not make batches of
/// gigabytes.
pub(crate) const MAX_BATCH_BYTES: usize = 8 << 20;

/// Where batches and damage go.
pub(crate) trait Sink {
    /// Takes a batch; false stops the scan (its reader has gone).
    fn batch(&mut self, batch: RecordBatch) -> bool;
    /// Takes skipped bytes or records.
    fn damage(&mut self, damage: Damage);
}

/// A whole file a scan reads: its bytes (in memory, or mapped), or an object in a store read
/// by byte ranges. The reads are the same; only where bytes come from differs.
#[derive(Clone, Copy)]
pub(crate) enum Whole<'a> {
    Slice(&'a [u8]),
    /// A mapped file, which the library advises the kernel how it is read.
    Mapped(&'a cobsfile::MappedFile),
    Remote(&'a cobsfile::Remote<StoreFetch>),
}

impl<'a> Whole<'a> {
    /// The file `bytes` holds.
    pub(crate) fn of(bytes: &'a FileBytes) -> Self {
        match bytes {
            FileBytes::Mapped(m, _) => Whole::Mapped(m),
            FileBytes::Remote(r) => Whole::Remote(r),
        }
    }

    /// The file's intact metadata blocks, in file order.
    pub(crate) fn metadata(
        &self,
        file: &str,
        reader: &cobsfile::ReaderBuilder,
    ) -> Result<Vec<cobsfile::Metadata>> {
        Ok(match self {
            Whole::Slice(bytes) => reader.metadata_of(bytes),
            Whole::Mapped(m) => {
                // Metadata blocks here and there, by the index at the tail: the pages touched.
                let _random = m.random_access();
                reader.metadata_of(m.bytes())
            }
            Whole::Remote(remote) => remote
                .metadata(reader)
                .map_err(|e| exec_datafusion_err!("{file}: {e}"))?,
        })
    }

    /// The file's Avro schemas, in file order, held within the options' limits.
    pub(crate) fn schemas(
        &self,
        file: &str,
        reader: &cobsfile::ReaderBuilder,
        options: &CobsfileOptions,
    ) -> Result<Schemas> {
        Ok(Schemas::of_metadata(
            self.metadata(file, reader)?,
            options.schema_limits(),
        ))
    }

    /// Fails for a file that is not a cobsfile (spec 9.5, as the library decides it).
    pub(crate) fn check_is_cobsfile(
        &self,
        file: &str,
        reader: &cobsfile::ReaderBuilder,
    ) -> Result<()> {
        let verdict = match self {
            Whole::Slice(bytes) => reader.not_a_cobsfile(bytes),
            Whole::Mapped(m) => {
                let _random = m.random_access();
                reader.not_a_cobsfile(m.bytes())
            }
            Whole::Remote(remote) => remote
                .not_a_cobsfile(reader)
                .map_err(|e| exec_datafusion_err!("{file}: {e}"))?,
        };
        match verdict {
            Some(verdict) => Err(exec_datafusion_err!("{file}: {verdict}")),
            None => Ok(()),
        }
    }

    /// The file's index, if it ends with a usable one.
    pub(crate) fn index(&self) -> Option<cobsfile::Index> {
        match self {
            Whole::Slice(bytes) => cobsfile::Index::find(bytes),
            Whole::Mapped(m) => {
                let _random = m.random_access();
                cobsfile::Index::find(m.bytes())
            }
            Whole::Remote(remote) => remote.index().cloned(),
        }
    }

    /// A sample of the file: its schemas, and without any, up to `max_records` records.
    pub(crate) fn sample(
        &self,
        file: &str,
        reader: &cobsfile::ReaderBuilder,
        options: &CobsfileOptions,
        max_records: usize,
    ) -> Result<Sample> {
        let metadata = self.metadata(file, reader)?;
        let time_field = metadata.iter().find_map(|block| {
            let (_, name) = (block.entries.iter()).find(|(k, _)| k == cobsfile::TIME_FIELD_KEY)?;
            String::from_utf8(name.clone()).ok()
        });
        let indexed_times = self
            .index()
            .is_some_and(|index| (index.entries().iter()).any(|e| e.block_type == BlockType::Time));
        let schemas = Schemas::of_metadata(metadata, options.schema_limits());
        let mut found = match self {
            Whole::Slice(bytes) => sample(&schemas, reader.from_slice(bytes), options, max_records),
            Whole::Mapped(m) => sample(&schemas, m.reader_for_sample(reader), options, max_records),
            Whole::Remote(remote) => sample(&schemas, remote.reader(reader), options, max_records),
        };
        found.timed |= indexed_times || time_field.is_some();
        found.time_field = time_field;
        Ok(found)
    }

    fn read_ranges_within<T, W, K>(
        &self,
        reader: &cobsfile::ReaderBuilder,
        range: Range<u64>,
        work: &W,
        sink: &mut K,
    ) -> cobsfile::Result<cobsfile::Report>
    where
        T: Default + Send,
        W: cobsfile::RangeWork<T> + ?Sized,
        K: cobsfile::RangeSink<T> + ?Sized,
    {
        match self {
            Whole::Slice(bytes) => reader.read_ranges_within(bytes, range, work, sink),
            Whole::Mapped(m) => m.read_ranges_within(reader, range, work, sink),
            Whole::Remote(remote) => remote.read_ranges_within(reader, range, work, sink),
        }
    }
}

/// Reads `bytes` (a whole file named `file`), only the blocks opening in `range` if given,
/// through the library's range reads (spec 9.4) on the threads `spec.reader` says: each range
/// makes its rows into batches on its own thread, and they come to `sink` in file order.
pub(crate) fn scan(
    bytes: Whole<'_>,
    file: &str,
    range: Option<Range<u64>>,
    spec: &ScanSpec,
    sink: &mut dyn Sink,
) -> Result<()> {
    let from_start = range.as_ref().is_none_or(|r| r.start == 0);
    let schemas = match spec.mode {
        Mode::Avro(_) => bytes.schemas(file, &spec.reader, &spec.options)?,
        _ => Schemas::new(),
    };
    // A table the file's schemas do not resolve to fails here, once, before any thread.
    let rows = Rows::new(spec, file, &schemas)?;
    let work = Work {
        spec,
        file,
        schemas: &schemas,
        rows_per_batch: spec.batch_size.min(spec.limit.unwrap_or(usize::MAX)).max(1),
    };
    let mut out = Out {
        sink,
        file,
        on_damage: spec.options.on_damage.clone(),
        left: spec.limit.unwrap_or(usize::MAX),
        error: None,
        spare: Some(Batches {
            rows: Some(rows),
            ..Batches::default()
        }),
    };
    let read =
        bytes.read_ranges_within(&spec.reader, range.unwrap_or(0..u64::MAX), &work, &mut out);
    let report = match read {
        Ok(report) => report,
        // The library's damage policy ended the read (`on_damage` `error`).
        Err(e) => match cobsfile::Damage::of_error(&e) {
            Some(damage) => {
                return Err(DataFusionError::Execution(
                    Damage::of(file, &damage).to_string(),
                ))
            }
            None => return Err(exec_datafusion_err!("{file}: {e}")),
        },
    };
    if let Some(e) = out.error {
        return Err(e);
    }
    if from_start && report.blocks.total() == 0 {
        bytes.check_is_cobsfile(file, &spec.reader)?;
    }
    Ok(())
}

/// What a range's thread makes of its blocks: rows, in batches.
struct Work<'a> {
    spec: &'a ScanSpec,
    file: &'a str,
    schemas: &'a Schemas,
    /// Rows a batch holds at most (fewer under a small `LIMIT`).
    rows_per_batch: usize,
}

/// A part of a range's rows, made on the range's thread. Its row builder and typed record
/// check come back to make later parts ([`RangeSink::recycle`](cobsfile::RangeSink::recycle)).
#[derive(Default)]
struct Batches {
    rows: Option<Rows>,
    check: Option<RecordCheck>,
    /// Record bytes in the rows not yet made a batch.
    pending: usize,
    batches: Vec<RecordBatch>,
    /// Records skipped whole (typed records of a schema this reader does not know).
    skipped: Vec<Damage>,
    /// What ends the scan: a record the table cannot hold, or (with `on_damage` `error`)
    /// records skipped.
    error: Option<DataFusionError>,
}

impl Work<'_> {
    fn rows<'p>(&self, part: &'p mut Batches) -> Result<&'p mut Rows> {
        if part.rows.is_none() {
            part.rows = Some(Rows::new(self.spec, self.file, self.schemas)?);
        }
        Ok(part.rows.as_mut().expect("made"))
    }

    /// The block's records into `part`'s rows, a batch made whenever enough are.
    fn records(&self, part: &mut Batches, block: &cobsfile::Block<'_>) -> Result<()> {
        let offset = block.info().offset;
        let typed = matches!(self.spec.mode, Mode::Avro(_));
        let mut records = block.records();
        let mut index = 0;
        while let Some(record) = records.next() {
            let index = {
                index += 1;
                index - 1
            };
            // Made at the first record (a block of none makes nothing that could fail).
            if part.rows.is_none() || (typed && part.check.is_none()) {
                self.rows(part)?;
                if typed {
                    part.check.get_or_insert_with(|| {
                        RecordCheck::new(self.schemas.clone(), DatumLimits::default())
                    });
                }
            }
            // Typed records are checked (spec 15.3), and where the rows' columns allow,
            // made into them by the same walk ([`Columns`]).
            let mut kept = false;
            if let (Some(rows), Some(check)) = (part.rows.as_mut(), part.check.as_mut()) {
                let checked = match rows.columns() {
                    Some(columns) => check.check_ref(record, offset, columns),
                    None => check.check_ref(record, offset, &mut ()),
                };
                match checked {
                    Ok(schema) => kept = rows.keep(schema, records.time())?,
                    Err(
                        problem @ (RecordProblem::SchemaUnknown { .. }
                        | RecordProblem::SchemaConflict { .. }),
                    ) => {
                        let damage = Damage {
                            file: self.file.to_string(),
                            range: offset..offset,
                            records: 1,
                            status: "unreadable",
                            cause: problem.name(),
                            message: problem.to_string(),
                        };
                        if self.spec.options.on_damage.fails() {
                            return Err(DataFusionError::Execution(damage.to_string()));
                        }
                        part.skipped.push(damage);
                        continue;
                    }
                    Err(problem) => {
                        let e = AvroError::Record {
                            offset,
                            index: index as u64,
                            ordinal: 0,
                            problem,
                        };
                        return Err(exec_datafusion_err!("{}: {e}", self.file));
                    }
                }
            }
            let rows = part.rows.as_mut().expect("made");
            if !kept {
                rows.push(record, records.time(), offset, index as u64)?;
            }
            let full = rows.len() >= self.rows_per_batch;
            part.pending += record.len();
            if full || part.pending >= MAX_BATCH_BYTES {
                self.flush(part)?;
            }
        }
        Ok(())
    }

    fn flush(&self, part: &mut Batches) -> Result<()> {
        part.pending = 0;
        if let Some(batch) = self.rows(part)?.flush()? {
            part.batches.push(batch);
        }
        Ok(())
    }
}

impl cobsfile::RangeWork<Batches> for Work<'_> {
    fn block(&self, part: &mut Batches, block: &cobsfile::Block<'_>) {
        if part.error.is_some() || block.info().block_type != BlockType::Data {
            return;
        }
        if let Err(e) = self.records(part, block) {
            part.error = Some(e);
        }
    }

    /// A part ends at its first batch under a `LIMIT` (which it may meet), or at an error.
    fn part_full(&self, part: &Batches) -> bool {
        part.error.is_some() || (self.spec.limit.is_some() && !part.batches.is_empty())
    }

    fn end_part(&self, part: &mut Batches) {
        if part.error.is_none() {
            if let Err(e) = self.flush(part) {
                part.error = Some(e);
            }
        }
    }
}

/// The calling thread's end of a scan: batches and damage in file order to the scan's sink.
struct Out<'a> {
    sink: &'a mut dyn Sink,
    file: &'a str,
    on_damage: OnDamage,
    /// Rows still wanted (`LIMIT`).
    left: usize,
    error: Option<DataFusionError>,
    /// A part handed over and emptied, to make the next one with.
    spare: Option<Batches>,
}

impl Out<'_> {
    /// Records skipped (typed records of a schema this reader does not know): reported, or
    /// with `on_damage` `error` the end of the scan.
    fn skipped(&mut self, damage: Damage) -> ControlFlow<()> {
        if self.on_damage.fails() {
            self.error = Some(DataFusionError::Execution(damage.to_string()));
            return ControlFlow::Break(());
        }
        self.report(damage);
        ControlFlow::Continue(())
    }

    /// Skipped bytes or records to the scan's sink (metrics, the damage hook) and the log.
    fn report(&mut self, damage: Damage) {
        log::warn!("{damage}");
        self.sink.damage(damage);
    }
}

impl cobsfile::RangeSink<Batches> for Out<'_> {
    fn part(&mut self, mut part: Batches) -> ControlFlow<()> {
        for damage in std::mem::take(&mut part.skipped) {
            self.skipped(damage)?;
        }
        for batch in part.batches.drain(..) {
            if self.left == 0 {
                break;
            }
            let batch = match batch.num_rows() > self.left {
                true => batch.slice(0, self.left),
                false => batch,
            };
            self.left -= batch.num_rows();
            if !self.sink.batch(batch) {
                return ControlFlow::Break(());
            }
        }
        if let Some(e) = part.error.take() {
            self.error = Some(e);
            return ControlFlow::Break(());
        }
        self.spare = Some(part);
        match self.left {
            0 => ControlFlow::Break(()),
            _ => ControlFlow::Continue(()),
        }
    }

    fn recycle(&mut self) -> Option<Batches> {
        self.spare.take()
    }

    /// A damaged range, reported; the library's policy then says whether the scan goes on
    /// (with `on_damage` `error` it fails with this range, which is reported once, as the
    /// error).
    fn damage(&mut self, damage: &cobsfile::Damage) -> ControlFlow<()> {
        if !self.on_damage.fails() {
            self.report(Damage::of(self.file, damage));
        }
        ControlFlow::Continue(())
    }
}

/// Rows being gathered into a batch: the columns made from records, and the event time
/// and file columns if the scan has them.
struct Rows {
    kind: Kind,
    time: Option<TimeColumn>,
    /// The file column's place among the scan's columns, and the file.
    file: Option<(usize, Arc<str>)>,
    /// The scan's columns, those made from records among them.
    schema: SchemaRef,
}

/// The event time column being gathered.
struct TimeColumn {
    /// Its place among the scan's columns.
    at: usize,
    times: TimestampNanosecondBuilder,
}

impl Rows {
    fn new(spec: &ScanSpec, file: &str, schemas: &Schemas) -> Result<Self> {
        // The record columns are made as a scan without the time and file columns makes
        // them.
        let mut inner = spec.clone();
        let mut fields: Vec<_> = spec.projected.fields().iter().cloned().collect();
        let mut extra: Vec<usize> = spec.time.into_iter().chain(spec.file).collect();
        extra.sort_unstable();
        for &at in extra.iter().rev() {
            inner.projection.remove(at);
            fields.remove(at);
        }
        inner.projected = Arc::new(Schema::new_with_metadata(
            fields,
            spec.projected.metadata().clone(),
        ));
        (inner.time, inner.file) = (None, None);
        Ok(Rows {
            kind: Kind::new(&inner, file, schemas)?,
            time: spec.time.map(|at| TimeColumn {
                at,
                times: TimestampNanosecondBuilder::new().with_timezone("UTC"),
            }),
            file: spec.file.map(|at| (at, Arc::from(file))),
            schema: spec.projected.clone(),
        })
    }

    /// Columns the check of typed records makes rows into as it walks them, if any.
    fn columns(&mut self) -> Option<&mut Columns> {
        match &mut self.kind {
            Kind::Avro(avro) => avro.fast.as_deref_mut(),
            _ => None,
        }
    }

    /// Keeps the typed record the check just walked into [`columns`](Self::columns), of
    /// writer schema `schema`, as a row; false if those columns cannot (the record then
    /// goes to [`push`](Self::push)).
    fn keep(&mut self, schema: &WriterSchema, time: Option<i64>) -> Result<bool> {
        let Kind::Avro(avro) = &mut self.kind else {
            return Ok(false);
        };
        if !avro.keep(schema)? {
            return Ok(false);
        }
        if let Some(column) = &mut self.time {
            column.times.append_option(time);
        }
        Ok(true)
    }

    fn push(&mut self, record: &[u8], time: Option<i64>, offset: u64, index: u64) -> Result<()> {
        self.kind.push(record, offset, index)?;
        if let Some(column) = &mut self.time {
            column.times.append_option(time);
        }
        Ok(())
    }

    fn len(&self) -> usize {
        self.kind.len()
    }

    fn flush(&mut self) -> Result<Option<RecordBatch>> {
        let Some(batch) = self.kind.flush()? else {
            return Ok(None);
        };
        if self.time.is_none() && self.file.is_none() {
            return Ok(Some(batch));
        }
        let rows = batch.num_rows();
        let mut extra: Vec<(usize, ArrayRef)> = Vec::new();
        if let Some(column) = &mut self.time {
            extra.push((column.at, Arc::new(column.times.finish())));
        }
        if let Some((at, file)) = &self.file {
            extra.push((*at, Arc::new(StringArray::from(vec![&**file; rows]))));
        }
        extra.sort_by_key(|(at, _)| *at);
        let mut columns = batch.columns().to_vec();
        for (at, column) in extra {
            columns.insert(at, column);
        }
        let options = RecordBatchOptions::new().with_row_count(Some(rows));
        Ok(Some(RecordBatch::try_new_with_options(
            self.schema.clone(),
            columns,
            &options,
        )?))
    }
}

/// The columns made from records, being gathered.
enum Kind {
    /// No column asked for (`count(*)`): rows counted, records not decoded.
    Count {
        rows: usize,
        schema: SchemaRef,
    },
    Raw(RawRows),
    Json(JsonRows),
    Avro(AvroRows),
}

impl Kind {
    fn new(spec: &ScanSpec, file: &str, schemas: &Schemas) -> Result<Self> {
        if spec.projection.is_empty() {
            return Ok(Kind::Count {
                rows: 0,
                schema: spec.projected.clone(),
            });
        }
        Ok(match &spec.mode {
            Mode::Raw => Kind::Raw(RawRows {
                columns: spec.projection.clone(),
                schema: spec.projected.clone(),
                file: file.to_string(),
                records: BinaryBuilder::new(),
                offsets: UInt64Builder::new(),
                ordinals: UInt64Builder::new(),
                rows: 0,
            }),
            Mode::Json => Kind::Json(JsonRows {
                decoder: JsonBuilder::new(spec.projected.clone())
                    .with_batch_size(spec.batch_size.max(1))
                    .build_decoder()?,
                fast: JsonColumns::new(&spec.projected).map(Box::new),
                schema: spec.projected.clone(),
                file: file.to_string(),
                blocks: None,
                rows: 0,
                ready: Vec::new(),
            }),
            Mode::Avro(reader_schema) => {
                Kind::Avro(AvroRows::new(spec, reader_schema, file, schemas)?)
            }
        })
    }

    fn push(&mut self, record: &[u8], offset: u64, index: u64) -> Result<()> {
        match self {
            Kind::Count { rows, .. } => {
                *rows += 1;
                Ok(())
            }
            Kind::Raw(raw) => {
                raw.records.append_value(record);
                raw.offsets.append_value(offset);
                raw.ordinals.append_value(index);
                raw.rows += 1;
                Ok(())
            }
            Kind::Json(json) => json.push(record, offset, index),
            Kind::Avro(avro) => avro.push(record, offset, index),
        }
    }

    fn len(&self) -> usize {
        match self {
            Kind::Count { rows, .. } => *rows,
            Kind::Raw(raw) => raw.rows,
            Kind::Json(json) => json.rows,
            Kind::Avro(avro) => avro.rows,
        }
    }

    fn flush(&mut self) -> Result<Option<RecordBatch>> {
        match self {
            Kind::Count { rows, schema } => {
                if *rows == 0 {
                    return Ok(None);
                }
                let options = RecordBatchOptions::new().with_row_count(Some(*rows));
                *rows = 0;
                Ok(Some(RecordBatch::try_new_with_options(
                    schema.clone(),
                    vec![],
                    &options,
                )?))
            }
            Kind::Raw(raw) => raw.flush(),
            Kind::Json(json) => json.flush(),
            Kind::Avro(avro) => avro.flush(),
        }
    }
}

struct RawRows {
    columns: Vec<usize>,
    schema: SchemaRef,
    file: String,
    records: BinaryBuilder,
    offsets: UInt64Builder,
    ordinals: UInt64Builder,
    rows: usize,
}

impl RawRows {
    fn flush(&mut self) -> Result<Option<RecordBatch>> {
        if self.rows == 0 {
            return Ok(None);
        }
        let records: ArrayRef = Arc::new(self.records.finish());
        let offsets: ArrayRef = Arc::new(self.offsets.finish());
        let ordinals: ArrayRef = Arc::new(self.ordinals.finish());
        let files: ArrayRef = Arc::new(StringArray::from(vec![self.file.as_str(); self.rows]));
        self.rows = 0;
        let columns = self
            .columns
            .iter()
            .map(|&c| match RAW_COLUMNS.get(c) {
                Some(&"record") => Ok(records.clone()),
                Some(&"file") => Ok(files.clone()),
                Some(&"block_offset") => Ok(offsets.clone()),
                Some(&"ordinal") => Ok(ordinals.clone()),
                _ => Err(exec_datafusion_err!(
                    "raw cobsfile tables have no column {c}"
                )),
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Some(RecordBatch::try_new(self.schema.clone(), columns)?))
    }
}

struct JsonRows {
    decoder: JsonDecoder,
    /// Rows made by one pass over each record ([`JsonColumns`]), where the table's columns
    /// allow. A record it does not take goes to `decoder`, which makes the row or the
    /// error it always made; rows are in one of the two at a time, in file order.
    fast: Option<Box<JsonColumns>>,
    schema: SchemaRef,
    file: String,
    /// Offsets of the first and last blocks of the rows `decoder` holds.
    blocks: Option<(u64, u64)>,
    /// Rows taken since the last batch.
    rows: usize,
    /// Batches completed when records went from one of the two to the other.
    ready: Vec<RecordBatch>,
}

impl JsonRows {
    fn push(&mut self, record: &[u8], offset: u64, index: u64) -> Result<()> {
        if let Some(fast) = &mut self.fast {
            if fast.push(record) {
                if !self.decoder.is_empty() {
                    // The decoder's rows came first; `fast` holds only this one.
                    if let Some(batch) = self.take()? {
                        self.ready.push(batch);
                    }
                }
                self.rows += 1;
                return Ok(());
            }
            if let Some(batch) = self.take_fast()? {
                self.ready.push(batch);
            }
        }
        // One value per record, complete at the record's end: a row is counted where its
        // value begins and done where it ends, so no separator need follow it (a number,
        // which only a following byte would end, is not a row of a table anyway).
        let before = self.decoder.len();
        let fed = match self.decoder.decode(record) {
            Err(e) => Err(e.to_string()),
            Ok(n) if n < record.len() => Err("more than one JSON value".to_string()),
            Ok(_) if self.decoder.len() != before + 1 || self.decoder.has_partial_record() => {
                Err("not one JSON value".to_string())
            }
            Ok(_) => Ok(()),
        };
        if let Err(e) = fed {
            return Err(exec_datafusion_err!(
                "{}: record {index} of the block at offset {offset} is not a JSON record of \
                 the table: {e}",
                self.file
            ));
        }
        let first = self.blocks.map_or(offset, |(first, _)| first);
        self.blocks = Some((first, offset));
        self.rows += 1;
        Ok(())
    }

    /// The rows `fast` holds, as a batch.
    fn take_fast(&mut self) -> Result<Option<RecordBatch>> {
        match &mut self.fast {
            Some(fast) if fast.rows() > 0 => {
                let columns = fast.finish()?;
                Ok(Some(RecordBatch::try_new(self.schema.clone(), columns)?))
            }
            _ => Ok(None),
        }
    }

    /// The rows the decoder holds, as a batch.
    fn take(&mut self) -> Result<Option<RecordBatch>> {
        let blocks = self.blocks.take();
        match self.decoder.flush() {
            Ok(Some(batch)) => Ok(Some(batch.with_schema(self.schema.clone())?)),
            Ok(None) => Ok(None),
            Err(e) => {
                let (first, last) = blocks.unwrap_or((0, 0));
                Err(exec_datafusion_err!(
                    "{}: records of the blocks at offsets {first}..={last} do not fit the \
                     table's schema: {e}",
                    self.file
                ))
            }
        }
    }

    fn flush(&mut self) -> Result<Option<RecordBatch>> {
        let last = self.take()?;
        let fast = self.take_fast()?;
        self.rows = 0;
        joined(&self.schema, std::mem::take(&mut self.ready), last, fast)
    }
}

/// The rows of a batch made by two paths, rows in one of them at a time: those completed
/// when records went from one to the other (`ready`), then the rows of the one that holds
/// any (`last` or `fast`), as one batch.
fn joined(
    schema: &SchemaRef,
    mut batches: Vec<RecordBatch>,
    last: Option<RecordBatch>,
    fast: Option<RecordBatch>,
) -> Result<Option<RecordBatch>> {
    batches.extend(last);
    batches.extend(fast);
    match batches.len() {
        0 => Ok(None),
        1 => Ok(batches.pop()),
        _ => Ok(Some(datafusion::arrow::compute::concat_batches(
            schema, &batches,
        )?)),
    }
}

struct AvroRows {
    /// Rows made by the check's walk of the records (those it can make).
    fast: Option<Box<Columns>>,
    /// Rows made by the Arrow project's decoder (the others). Rows are in one of the two at
    /// a time, so that they stay in order.
    decoder: AvroDecoder,
    schema: SchemaRef,
    file: String,
    rows: usize,
    /// Batches the decoder completed while taking a record (when the writer schema changed).
    ready: Vec<RecordBatch>,
}

impl AvroRows {
    fn new(spec: &ScanSpec, reader_schema: &str, file: &str, schemas: &Schemas) -> Result<Self> {
        let mut written: Vec<(u64, &str)> = schemas
            .iter()
            .map(|s| (s.fingerprint(), s.json()))
            .collect();
        // A file with no schema of its own still builds: its records are then reported
        // schema-unknown by the library's reader before they get here.
        let fallback = [(0u64, reader_schema)];
        if written.is_empty() {
            written.extend_from_slice(&fallback);
        }
        let store = store_of(written.into_iter())?;
        let decoder = guard(|| {
            AvroArrowBuilder::new()
                .with_writer_schema_store(store)
                .with_reader_schema(AvroSchema::new(reader_schema.to_string()))
                .with_projection(spec.projection.clone())
                .with_batch_size(spec.batch_size.max(1))
                .build_decoder()
        })
        .map_err(|panic| exec_datafusion_err!("{file}: Avro reader failed: {panic}"))?
        .map_err(|e| {
            exec_datafusion_err!(
                "{file}: the file's Avro schemas do not resolve to the table's: {e}"
            )
        })?;
        Ok(AvroRows {
            fast: Columns::new(reader_schema, &spec.projection, &spec.projected).map(Box::new),
            decoder,
            schema: spec.projected.clone(),
            file: file.to_string(),
            rows: 0,
            ready: Vec::new(),
        })
    }

    /// Keeps the record just walked into `fast` as a row; false if it cannot.
    fn keep(&mut self, schema: &WriterSchema) -> Result<bool> {
        let Some(fast) = &mut self.fast else {
            return Ok(false);
        };
        if !fast.keep(schema) {
            return Ok(false);
        }
        if !self.decoder.batch_is_empty() {
            // The decoder's rows came first; `fast` holds only this one.
            if let Some(batch) = self.take()? {
                self.ready.push(batch);
            }
        }
        self.rows += 1;
        Ok(true)
    }

    /// The rows `fast` holds, as a batch.
    fn take_fast(&mut self) -> Result<Option<RecordBatch>> {
        match &mut self.fast {
            Some(fast) if fast.rows() > 0 => {
                let columns = fast.finish()?;
                Ok(Some(RecordBatch::try_new(self.schema.clone(), columns)?))
            }
            _ => Ok(None),
        }
    }

    fn push(&mut self, record: &[u8], offset: u64, index: u64) -> Result<()> {
        if let Some(batch) = self.take_fast()? {
            self.ready.push(batch);
        }
        let fail = |file: &str, what: String| {
            exec_datafusion_err!(
                "{file}: record {index} of the block at offset {offset} cannot be read as a \
                 row of the table: {what}"
            )
        };
        let mut at = 0;
        let mut stalled = false;
        while at < record.len() {
            let decoder = &mut self.decoder;
            let n = match guard(|| decoder.decode(&record[at..])) {
                Ok(Ok(n)) => n,
                Ok(Err(e)) => return Err(fail(&self.file, e.to_string())),
                Err(panic) => return Err(fail(&self.file, panic)),
            };
            at += n;
            if at < record.len() {
                // The record's writer schema differs from the last one: the decoder takes
                // the prefix, then wants the rows it holds flushed before the body.
                if n == 0 && stalled {
                    return Err(fail(&self.file, "the decoder took none of it".into()));
                }
                stalled = n == 0;
                if let Some(batch) = self.take()? {
                    self.ready.push(batch);
                }
            }
        }
        self.rows += 1;
        Ok(())
    }

    fn take(&mut self) -> Result<Option<RecordBatch>> {
        let decoder = &mut self.decoder;
        let batch = guard(|| decoder.flush())
            .map_err(|panic| exec_datafusion_err!("{}: Avro reader failed: {panic}", self.file))?
            .map_err(|e| exec_datafusion_err!("{}: {e}", self.file))?;
        batch
            .map(|b| RecordBatch::try_new(self.schema.clone(), b.columns().to_vec()))
            .transpose()
            .map_err(|e| exec_datafusion_err!("{}: {e}", self.file))
    }

    fn flush(&mut self) -> Result<Option<RecordBatch>> {
        let last = self.take()?;
        let fast = self.take_fast()?;
        self.rows = 0;
        joined(&self.schema, std::mem::take(&mut self.ready), last, fast)
    }
}
