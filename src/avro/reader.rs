//! The typed reader: collects the schemas the file announces, and decodes each record with the
//! schema its fingerprint names.

use apache_avro::types::Value;
use apache_avro::Schema;
use serde::de::DeserializeOwned;

use super::check::{DatumLimits, Failure, Visit, Walked};
use super::error::{Error, RecordProblem, Result};
use super::resolve::{ReaderSchema, Unresolved};
use super::schema::{guarded, Named, SchemaLimits, Schemas, WriterSchema};
use super::value::ValueBuilder;
use super::{MARKER, PREFIX_LEN};
use crate::reader::ItemAt;
use crate::{Reader, Source};

/// Options for typed readers.
#[derive(Debug, Clone, Default)]
#[must_use = "options do nothing until used: each method returns the changed options"]
pub struct AvroReaderBuilder {
    schemas: Schemas,
    reader_schema: Option<ReaderSchema>,
    limits: DatumLimits,
}

impl AvroReaderBuilder {
    /// Default options: no schemas but the file's, no reader schema, the default limits.
    pub fn new() -> Self {
        Self::default()
    }

    /// Decodes records into `schema` by Avro's schema resolution, exactly as Avro's
    /// specification defines it (fields added with defaults, fields removed, the widening
    /// promotions such as `int` to `long`, aliases; never a narrowing or a cast), whatever
    /// schema each was written with. A record whose writer schema does not resolve to it is
    /// reported ([`RecordProblem::Unresolvable`]).
    pub fn reader_schema(mut self, schema: Schema) -> Self {
        self.reader_schema = Some(ReaderSchema::new(schema));
        self
    }

    /// Knows `schema` from the start, as if the file announced it first: records that name it
    /// decode even when the file's metadata block with it is lost, or lies before where
    /// reading starts. Schemas the file announces replace given ones of the same fingerprint.
    pub fn schema(mut self, schema: WriterSchema) -> Self {
        self.schemas.add(schema);
        self
    }

    /// Knows these schemas from the start (see [`schema`](Self::schema)); e.g.
    /// [`Schemas::scan`] of the whole file, for a reader that starts past its schema blocks.
    pub fn schemas(mut self, schemas: &Schemas) -> Self {
        self.schemas.extend(schemas);
        self
    }

    /// Bounds what a record may decode to (see [`DatumLimits`]).
    pub fn limits(mut self, limits: DatumLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Bounds the schemas held from the file (see [`SchemaLimits`]).
    pub fn schema_limits(mut self, limits: SchemaLimits) -> Self {
        self.schemas.set_limits(limits);
        self
    }

    /// A typed reader of the records `reader` reads.
    pub fn build<S: Source>(&self, reader: Reader<S>) -> AvroReader<S> {
        AvroReader {
            reader,
            check: RecordCheck::new(self.schemas.clone(), self.limits),
            reader_schema: self.reader_schema.clone(),
            block: None,
            index: 0,
            ordinal: 0,
            builder: ValueBuilder::default(),
        }
    }
}

/// A record checked against its writer schema, not decoded: its single-object encoding and
/// where it was found. See [`AvroReader::next_datum`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Datum<'a> {
    /// The writer schema the record's fingerprint names.
    pub schema: WriterSchema,
    /// The whole record: `c3 01`, the fingerprint, the datum.
    pub record: &'a [u8],
    /// Absolute offset of the opening sync byte of the record's data block.
    pub offset: u64,
    /// The record's position in its block, from 0.
    pub index: u64,
    /// The record's position among the records this reader met, from 0.
    pub ordinal: u64,
    /// The limits it was checked within.
    limits: DatumLimits,
}

impl<'a> Datum<'a> {
    /// The Avro binary datum, after the 10-byte prefix: what an Avro object container file
    /// stores for the record.
    pub fn datum(&self) -> &'a [u8] {
        &self.record[PREFIX_LEN..]
    }

    /// The record's value, decoded with its writer schema (not resolved to a reader schema):
    /// what [`AvroReader::next_value`] returns without one. (A reader that wants values walks
    /// each datum once with [`AvroReader::next_value`]; this walks it again.)
    pub fn value(&self) -> Result<Value> {
        let mut builder = ValueBuilder::default();
        let datum = self.datum();
        let walked = self.schema.walk(datum, &self.limits, &mut builder);
        match (walked, builder.take()) {
            (Ok(walked), Some(value)) if walked.end == datum.len() && walked.invalid.is_none() => {
                Ok(value)
            }
            // It passed this check when it was read.
            _ => Err(Error::Record {
                offset: self.offset,
                index: self.index,
                ordinal: self.ordinal,
                problem: RecordProblem::Undecodable {
                    fingerprint: self.schema.fingerprint(),
                    at: 0,
                    what: "the datum no longer passes its check".into(),
                },
            }),
        }
    }
}

/// The check every typed record passes before it is decoded (spec 15.3, checks 1 to 5): it
/// starts with the marker `c3 01`, its fingerprint names a known schema, and its datum, walked
/// as that schema says without allocating, ends exactly at the end of the record, declares no
/// length past it, stays within the [`DatumLimits`] and holds only valid values.
///
/// An [`AvroReader`] checks each record it meets with one. For records met some other way (the
/// blocks of a [`read_ranges`](crate::ReaderBuilder::read_ranges), each range on its own
/// thread), make one from the file's schemas ([`Schemas::scan`]) per thread: it is the same
/// check, so what passes decodes, and nothing else is handed on.
#[derive(Debug, Clone)]
pub struct RecordCheck {
    schemas: Schemas,
    limits: DatumLimits,
    /// The schema of the last record checked, and its block's offset.
    last: Option<(u64, WriterSchema)>,
}

impl RecordCheck {
    /// A check of records written with `schemas`, within `limits`.
    pub fn new(schemas: Schemas, limits: DatumLimits) -> Self {
        RecordCheck {
            schemas,
            limits,
            last: None,
        }
    }

    /// The schemas it knows.
    pub fn schemas(&self) -> &Schemas {
        &self.schemas
    }

    /// Checks `record`, of the data block at offset `block`: its writer schema, or what is
    /// wrong with it.
    pub fn check(
        &mut self,
        record: &[u8],
        block: u64,
    ) -> std::result::Result<WriterSchema, RecordProblem> {
        self.check_with(record, block, &mut ())
    }

    /// Checks `record` as [`check`](Self::check) does, handing each of its values to `visit`
    /// as the check meets them (see [`AvroReader::next_datum_with`]).
    pub fn check_with<V: Visit>(
        &mut self,
        record: &[u8],
        block: u64,
        visit: &mut V,
    ) -> std::result::Result<WriterSchema, RecordProblem> {
        self.check_ref(record, block, visit).cloned()
    }

    /// [`check_with`](Self::check_with), lending the writer schema rather than giving a
    /// handle of it (which costs two atomic operations a record).
    #[inline]
    pub fn check_ref<V: Visit>(
        &mut self,
        record: &[u8],
        block: u64,
        visit: &mut V,
    ) -> std::result::Result<&WriterSchema, RecordProblem> {
        if record.len() < PREFIX_LEN || record[..2] != MARKER {
            return Err(RecordProblem::NoMarker {
                found: record[..record.len().min(PREFIX_LEN)].to_vec(),
            });
        }
        let mut fingerprint = [0u8; 8];
        fingerprint.copy_from_slice(&record[2..PREFIX_LEN]);
        let fingerprint = u64::from_le_bytes(fingerprint);
        // Records of one schema usually follow one another. What a fingerprint names may
        // change from block to block (a later claim to it puts it in conflict), never within
        // one.
        let known = matches!(
            &self.last,
            Some((at, last)) if *at == block && last.fingerprint() == fingerprint
        );
        if !known {
            let schema = match self.schemas.named(fingerprint, block) {
                Named::Schema(schema) => schema.clone(),
                Named::Unknown => return Err(RecordProblem::SchemaUnknown { fingerprint }),
                Named::Conflict { first, second } => {
                    return Err(RecordProblem::SchemaConflict {
                        fingerprint,
                        first,
                        second,
                    })
                }
            };
            self.last = Some((block, schema));
        }
        let (_, schema) = self.last.as_ref().expect("set above");
        let datum = &record[PREFIX_LEN..];
        match schema.walk(datum, &self.limits, visit) {
            Ok(walked) if walked.end != datum.len() => Err(RecordProblem::TrailingBytes {
                fingerprint,
                left: (datum.len() - walked.end) as u64,
                len: datum.len() as u64,
            }),
            Ok(Walked {
                invalid: Some(Failure::Invalid { at, what }),
                ..
            }) => Err(RecordProblem::Undecodable {
                fingerprint,
                at: at as u64,
                what,
            }),
            Ok(_) => Ok(schema),
            Err(Failure::Invalid { at, what }) => Err(RecordProblem::Undecodable {
                fingerprint,
                at: at as u64,
                what,
            }),
            Err(Failure::Limit { what, limit }) => Err(RecordProblem::Limit { what, limit }),
        }
    }
}

/// Reads typed records: the values of records written by an
/// [`AvroWriter`](super::AvroWriter), or anything else that writes Avro's single-object
/// encoding and announces its schemas in metadata blocks (spec 15).
///
/// It reads the file in order with [`Reader`], so it meets each metadata block before the
/// records after it, and keeps every schema announced, by fingerprint. Each record is decoded
/// with the schema its fingerprint names, from the slice the reader already holds. What
/// cannot be returned is an error naming the record's block and position, after which
/// reading goes on: damage (the block's records are lost), a metadata block whose schema
/// cannot be used, a record whose schema is unknown or that does not decode
/// ([`Error::Record`]). A record is never decoded with a schema it does not name, and nothing
/// undecodable is returned.
///
/// It is an [`Iterator`] of values, as [`next_value`](Self::next_value) returns them.
#[derive(Debug)]
pub struct AvroReader<S> {
    reader: Reader<S>,
    /// The schemas known so far, and the check each record passes.
    check: RecordCheck,
    reader_schema: Option<ReaderSchema>,
    /// The block of the last record, and that record's index in it.
    block: Option<u64>,
    index: u64,
    /// Records met so far.
    ordinal: u64,
    /// What builds values in the walk that checks them (its stack kept between records).
    builder: ValueBuilder,
}

impl<S: Source> AvroReader<S> {
    /// A typed reader with default options ([`AvroReaderBuilder`]).
    pub fn new(reader: Reader<S>) -> Self {
        AvroReaderBuilder::new().build(reader)
    }

    /// The next record, checked as every record is before it is decoded (spec 15.3) but not
    /// decoded: for copying records as they are (into an Avro object container file, say).
    /// Errors as for [`next_value`](Self::next_value).
    pub fn next_datum(&mut self) -> Option<Result<Datum<'_>>> {
        self.next_datum_with(&mut ())
    }

    /// The next record, as [`next_datum`](Self::next_datum) returns it, each of its values
    /// handed to `visit` as the check meets it: one walk of the datum that checks it and
    /// turns it into what `visit` makes of it (JSON text with a
    /// [`JsonWriter`](super::json::JsonWriter), say), without decoding it to a `Value`.
    /// What `visit` made is whole only when a record is returned: after an error it holds
    /// part of a record, or nothing.
    pub fn next_datum_with<V: Visit>(&mut self, visit: &mut V) -> Option<Result<Datum<'_>>> {
        let (range, offset, index, ordinal, schema) = match self.next_checked(visit)? {
            Ok(found) => found,
            Err(e) => return Some(Err(e)),
        };
        Some(Ok(Datum {
            schema,
            record: self.reader.record(range),
            offset,
            index,
            ordinal,
            limits: self.check.limits,
        }))
    }

    /// The next record's value, decoded with its writer schema and resolved to the reader
    /// schema if one was given; or an error, after which reading goes on.
    pub fn next_value(&mut self) -> Option<Result<Value>> {
        // The value is built in the walk that checks the datum.
        let mut builder = std::mem::take(&mut self.builder);
        let found = self.next_datum_with(&mut builder).map(|found| {
            found.map(|datum| (datum.offset, datum.index, datum.ordinal, datum.schema))
        });
        let value = builder.take();
        self.builder = builder;
        let (offset, index, ordinal, writer) = match found? {
            Ok(found) => found,
            Err(e) => return Some(Err(e)),
        };
        let value = value.expect("a datum that passed its check has a value");
        let fingerprint = writer.fingerprint();
        let problem = |problem| Error::Record {
            offset,
            index,
            ordinal,
            problem,
        };
        let Some(reader_schema) = &self.reader_schema else {
            return Some(Ok(value));
        };
        Some(match guarded(|| reader_schema.resolve(value, &writer)) {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(Unresolved { path, what })) => Err(problem(RecordProblem::Unresolvable {
                fingerprint,
                path,
                what,
            })),
            Err(panic) => Err(problem(RecordProblem::Unresolvable {
                fingerprint,
                path: String::new(),
                what: panic,
            })),
        })
    }

    /// The next record's value deserialized into `T` (from the value
    /// [`next_value`](Self::next_value) returns); a value that does not fit `T` is reported
    /// ([`RecordProblem::Deserialize`]) and reading goes on.
    pub fn next_as<T: DeserializeOwned>(&mut self) -> Option<Result<T>> {
        let value = match self.next_value()? {
            Ok(value) => value,
            Err(e) => return Some(Err(e)),
        };
        let (offset, index) = (self.block.unwrap_or(0), self.index);
        let ordinal = self.ordinal - 1;
        let problem = |what| Error::Record {
            offset,
            index,
            ordinal,
            problem: RecordProblem::Deserialize { what },
        };
        Some(match guarded(|| apache_avro::from_value::<T>(&value)) {
            Ok(Ok(typed)) => Ok(typed),
            Ok(Err(e)) => Err(problem(e.to_string())),
            Err(panic) => Err(problem(panic)),
        })
    }

    /// Where the record last met is: its data block's offset and its place in that block
    /// (what an error about it names); `None` before the first.
    pub fn last_record(&self) -> Option<(u64, u64)> {
        self.block.map(|block| (block, self.index))
    }

    /// The schemas known so far: those given, and those of the metadata blocks read.
    pub fn schemas(&self) -> &Schemas {
        &self.check.schemas
    }

    /// The reader of the file's blocks, e.g. for its [`stats`](Reader::stats) or
    /// [`ending`](Reader::ending).
    pub fn reader(&self) -> &Reader<S> {
        &self.reader
    }

    /// The reader of the file's blocks back.
    pub fn into_inner(self) -> Reader<S> {
        self.reader
    }

    /// The next record that passes its [`RecordCheck`]: its range in the
    /// reader's buffer, block offset, index, ordinal and schema. Metadata blocks met on the
    /// way add their schemas (or are reported).
    #[allow(clippy::type_complexity)]
    fn next_checked<V: Visit>(
        &mut self,
        visit: &mut V,
    ) -> Option<Result<(std::ops::Range<usize>, u64, u64, u64, WriterSchema)>> {
        loop {
            let (range, block) = match self.reader.next_item_at()? {
                Err(e) => return Some(Err(e.into())),
                Ok(ItemAt::Metadata) => {
                    let block = self.reader.current_block().expect("the block just read");
                    match self.check.schemas.add_from_block(&block) {
                        Err(e) => {
                            // It may put the last fingerprint in conflict.
                            self.check.last = None;
                            return Some(Err(e));
                        }
                        Ok(None) => continue,
                        Ok(Some(_)) => {
                            // It may replace the schema of the last fingerprint.
                            self.check.last = None;
                            continue;
                        }
                    }
                }
                Ok(ItemAt::Record { range, block }) => (range, block),
            };
            if self.block == Some(block) {
                self.index += 1;
            } else {
                self.block = Some(block);
                self.index = 0;
            }
            let ordinal = self.ordinal;
            self.ordinal += 1;
            return Some(
                match self
                    .check
                    .check_with(self.reader.record(range.clone()), block, visit)
                {
                    Ok(schema) => Ok((range, block, self.index, ordinal, schema)),
                    Err(problem) => Err(Error::Record {
                        offset: block,
                        index: self.index,
                        ordinal,
                        problem,
                    }),
                },
            );
        }
    }
}

impl<S: Source> Iterator for AvroReader<S> {
    type Item = Result<Value>;

    fn next(&mut self) -> Option<Result<Value>> {
        self.next_value()
    }
}
