//! The typed writer: announces its schema in a metadata block, then writes each value as a
//! record in Avro's single-object encoding.

use std::io::Write;

use apache_avro::types::Value;
use apache_avro::GenericSingleObjectWriter;
use serde::Serialize;

use super::check::DatumLimits;
use super::error::{Error, Result};
use super::path;
use super::schema::{guarded, WriterSchema};
use crate::{Appender, Writer};

/// Where a typed writer puts its records and schema blocks: a [`Writer`] or an [`Appender`]
/// (or a `&mut` one).
pub trait RecordSink {
    /// What writing a record gives back: nothing for a [`Writer`], the record's sequence
    /// number for an [`Appender`] (for [`Appender::wait_durable`]).
    type Receipt;

    /// Writes one record.
    fn write_record(&mut self, record: &[u8]) -> crate::Result<Self::Receipt>;

    /// Writes one record with an event time, in nanoseconds since the Unix epoch (spec 8.8),
    /// or without one. A sink that keeps no times refuses a time rather than drop it.
    fn write_record_at(
        &mut self,
        record: &[u8],
        time: Option<i64>,
    ) -> crate::Result<Self::Receipt> {
        match time {
            None => self.write_record(record),
            Some(_) => Err(crate::Error::InvalidMetadata(
                "this sink keeps no event times".into(),
            )),
        }
    }

    /// Writes a metadata block with these entries, after the records written so far.
    fn write_metadata(&mut self, entries: &[(&str, &[u8])]) -> crate::Result<()>;

    /// Writes a metadata block that the records after it need (a schema): as
    /// [`write_metadata`](Self::write_metadata), and for an [`Appender`], again whenever it
    /// starts a log truncated to nothing ([`Appender::announce`]).
    fn announce(&mut self, entries: &[(&str, &[u8])]) -> crate::Result<()> {
        self.write_metadata(entries)
    }
}

impl<W: Write> RecordSink for Writer<W> {
    type Receipt = ();

    fn write_record(&mut self, record: &[u8]) -> crate::Result<()> {
        Writer::write_record(self, record)
    }

    fn write_record_at(&mut self, record: &[u8], time: Option<i64>) -> crate::Result<()> {
        match time {
            Some(time) => Writer::write_record_at(self, record, time),
            None => Writer::write_record(self, record),
        }
    }

    fn write_metadata(&mut self, entries: &[(&str, &[u8])]) -> crate::Result<()> {
        Writer::write_metadata(self, entries.iter().copied())
    }
}

impl RecordSink for Appender {
    type Receipt = u64;

    fn write_record(&mut self, record: &[u8]) -> crate::Result<u64> {
        self.append(record)
    }

    fn write_record_at(&mut self, record: &[u8], time: Option<i64>) -> crate::Result<u64> {
        match time {
            Some(time) => self.append_at(record, time),
            None => self.append(record),
        }
    }

    fn write_metadata(&mut self, entries: &[(&str, &[u8])]) -> crate::Result<()> {
        Appender::write_metadata(self, entries.iter().copied())
    }

    fn announce(&mut self, entries: &[(&str, &[u8])]) -> crate::Result<()> {
        Appender::announce(self, entries.iter().copied())
    }
}

impl<T: RecordSink + ?Sized> RecordSink for &mut T {
    type Receipt = T::Receipt;

    fn write_record(&mut self, record: &[u8]) -> crate::Result<T::Receipt> {
        (**self).write_record(record)
    }

    fn write_record_at(&mut self, record: &[u8], time: Option<i64>) -> crate::Result<T::Receipt> {
        (**self).write_record_at(record, time)
    }

    fn write_metadata(&mut self, entries: &[(&str, &[u8])]) -> crate::Result<()> {
        (**self).write_metadata(entries)
    }

    fn announce(&mut self, entries: &[(&str, &[u8])]) -> crate::Result<()> {
        (**self).announce(entries)
    }
}

/// Writes typed records: a metadata block with the schema (`avro.schema`, `avro.fingerprint`)
/// first, then each value as a record in Avro's single-object encoding (`c3 01`, the schema's
/// fingerprint, the Avro binary datum).
///
/// A value that does not conform to the schema is refused with an error naming where, and
/// nothing is written for it. Buffers are reused: a record costs its encoding.
///
/// ```
/// use cobsfile::avro::{AvroReader, AvroWriter, WriterSchema};
/// use apache_avro::types::Value;
///
/// let schema = WriterSchema::parse(r#"{"type":"record","name":"Event","fields":[
///     {"name":"id","type":"long"},{"name":"what","type":"string"}]}"#)?;
/// let mut writer = AvroWriter::new(cobsfile::Writer::new(Vec::new())?, schema)?;
/// writer.write_value(&Value::Record(vec![
///     ("id".into(), Value::Long(1)),
///     ("what".into(), Value::String("start".into())),
/// ]))?;
/// #[derive(serde::Serialize)]
/// struct Event<'a> { id: i64, what: &'a str }
/// writer.write(&Event { id: 2, what: "stop" })?;
/// let file = writer.finish()?;
///
/// let mut reader = AvroReader::new(cobsfile::ReaderBuilder::new().from_slice(&file));
/// let first = reader.next_value().unwrap()?;
/// assert!(matches!(&first, Value::Record(fields) if fields[0].1 == Value::Long(1)));
/// assert_eq!(reader.count(), 1);
/// # Ok::<(), cobsfile::avro::Error>(())
/// ```
pub struct AvroWriter<S> {
    sink: S,
    schema: WriterSchema,
    /// Every schema this writer announced, by fingerprint: a change to one that decodes
    /// differently under a fingerprint already announced is refused.
    announced: std::collections::HashMap<u64, WriterSchema>,
    encoder: GenericSingleObjectWriter,
    record: Vec<u8>,
    /// What [`write_datum`](AvroWriter::write_datum) checks datums within.
    limits: DatumLimits,
}

impl<S> std::fmt::Debug for AvroWriter<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AvroWriter")
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

impl<S: RecordSink> AvroWriter<S> {
    /// Writes the metadata block announcing `schema` to `sink`, and returns a writer of
    /// records with it.
    pub fn new(mut sink: S, schema: WriterSchema) -> Result<Self> {
        let encoder = encoder(&schema)?;
        announce(&mut sink, &schema)?;
        Ok(AvroWriter {
            sink,
            announced: [(schema.fingerprint(), schema.clone())].into(),
            limits: DatumLimits::default(),
            schema,
            encoder,
            record: Vec::new(),
        })
    }

    /// Writes the records that follow with `schema`: writes the metadata block announcing it
    /// (a schema change in the middle of a file; spec: records carry the fingerprint of the
    /// schema they were written with, so records of both stay readable).
    ///
    /// Refuses a schema that shares its fingerprint with one this writer announced but
    /// decodes differently (another logical type on a primitive, say): readers could not tell
    /// their records apart, and report such a fingerprint in conflict (spec 15.3).
    pub fn change_schema(&mut self, schema: WriterSchema) -> Result<()> {
        if let Some(before) = self.announced.get(&schema.fingerprint()) {
            if !before.decodes_like(&schema) {
                return Err(Error::InvalidSchema(format!(
                    "it shares fingerprint {:016x} with a schema this writer announced, but \
                     decodes differently (a logical type changed): readers could not tell \
                     their records apart; change a name or a field, or start a new file",
                    schema.fingerprint()
                )));
            }
        }
        let encoder = encoder(&schema)?;
        announce(&mut self.sink, &schema)?;
        self.announced.insert(schema.fingerprint(), schema.clone());
        self.encoder = encoder;
        self.schema = schema;
        Ok(())
    }

    /// The schema records are written with.
    pub fn schema(&self) -> &WriterSchema {
        &self.schema
    }

    /// Writes `value`, which must conform to the schema as it is (no conversion).
    pub fn write_value(&mut self, value: &Value) -> Result<S::Receipt> {
        self.encode_value(value)?;
        Ok(self.sink.write_record(&self.record)?)
    }

    /// Writes `value` as [`write_value`](Self::write_value) does, with the event time of its
    /// record (nanoseconds since the Unix epoch; spec 8.8), or without one: see
    /// [`timestamp_field`] for a time the value holds.
    pub fn write_value_at(&mut self, value: &Value, time: Option<i64>) -> Result<S::Receipt> {
        self.encode_value(value)?;
        Ok(self.sink.write_record_at(&self.record, time)?)
    }

    /// Writes `value` converted to Avro by `serde` and then to the schema (Avro's schema
    /// resolution of a value: an `i32` for a `long` field, a string for an enum symbol, an
    /// `Option` for a union with null).
    pub fn write<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<S::Receipt> {
        let to_value = || {
            guarded(|| apache_avro::to_value(value))
                .map_err(|reason| invalid(String::new(), reason))?
                .map_err(|e| invalid(String::new(), reason(&e)))
        };
        let schema = self.schema.schema();
        let resolved = match guarded(|| to_value().map(|v| v.resolve(schema))) {
            Ok(Ok(Ok(resolved))) => resolved,
            Ok(Err(e)) => return Err(e),
            // Converted again to find where it does not fit: the first conversion was
            // consumed, and copying every value to keep one for errors costs every write.
            Ok(Ok(Err(e))) => {
                return Err(invalid(path::find(&to_value()?, &self.schema), reason(&e)))
            }
            Err(panic) => return Err(invalid(String::new(), panic)),
        };
        self.write_value(&resolved)
    }

    /// The limits [`write_datum`](Self::write_datum) checks datums within (by default a
    /// reader's default limits, so that a default reader reads everything written). Raised,
    /// the writer copies datums that only readers given the same limits read (spec 15.4).
    pub fn set_limits(&mut self, limits: DatumLimits) {
        self.limits = limits;
    }

    /// Writes a datum already in Avro's binary encoding of the schema, as it is (an Avro
    /// object container file's record, copied byte for byte): checked first as a reader
    /// checks a record (spec 15.3: its layout, the limits of
    /// [`set_limits`](Self::set_limits), nothing left after it, its values), so that nothing
    /// is written that a reader would refuse.
    pub fn write_datum(&mut self, datum: &[u8]) -> Result<S::Receipt> {
        let refuse = |reason: String| invalid(String::new(), reason);
        self.schema
            .check_datum(datum, &self.limits, &mut self.record)
            .map_err(refuse)?;
        Ok(self.sink.write_record(&self.record)?)
    }

    /// The record `write_value` would write for `value` (prefix and datum), without writing
    /// it; valid until the next call.
    pub fn encode_value(&mut self, value: &Value) -> Result<&[u8]> {
        self.record.clear();
        match guarded(|| self.encoder.write_value_ref(value, &mut self.record)) {
            Ok(Ok(_)) => Ok(&self.record),
            Ok(Err(e)) => Err(invalid(path::find(value, &self.schema), reason(&e))),
            Err(panic) => Err(invalid(String::new(), panic)),
        }
    }

    /// The sink.
    pub fn get_ref(&self) -> &S {
        &self.sink
    }

    /// The sink, e.g. to write other metadata, or an [`Appender`]'s
    /// [`wait_durable`](Appender::wait_durable).
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.sink
    }

    /// The sink back.
    pub fn into_inner(self) -> S {
        self.sink
    }
}

impl<W: Write> AvroWriter<Writer<W>> {
    /// Finishes the file ([`Writer::finish`]) and returns its output.
    pub fn finish(self) -> Result<W> {
        Ok(self.sink.finish()?)
    }
}

fn encoder(schema: &WriterSchema) -> Result<GenericSingleObjectWriter> {
    guarded(|| {
        GenericSingleObjectWriter::new_with_capacity_and_header_builder(
            schema.schema(),
            1024,
            schema.header(),
        )
    })
    .map_err(Error::InvalidSchema)?
    .map_err(|e| Error::InvalidSchema(e.to_string()))
}

fn announce<S: RecordSink>(sink: &mut S, schema: &WriterSchema) -> Result<()> {
    let [(k1, v1), (k2, v2)] = schema.metadata();
    Ok(sink.announce(&[(k1, &v1), (k2, &v2)])?)
}

fn invalid(path: String, reason: String) -> Error {
    Error::InvalidValue { path, reason }
}

/// `apache-avro`'s reason for refusing a value, without the value and schema it repeats.
fn reason(e: &apache_avro::Error) -> String {
    match e.details() {
        apache_avro::error::Details::ValidationWithReason { reason, .. } => reason.clone(),
        apache_avro::error::Details::Validation => "does not match the schema".into(),
        _ => e.to_string(),
    }
}

/// The instant the field `name` of a record value holds, in nanoseconds since the Unix epoch:
/// a field of one of Avro's timestamp logical types (`timestamp-millis`, `-micros`,
/// `-nanos`), or a union of one with null. `Ok(None)` for a null; an error naming what is
/// wrong for a value that is not a record, a missing field, a field of another type (a
/// `local-timestamp-*` has no time zone, so it names no instant), or an instant outside the
/// years 1677 to 2262.
pub fn timestamp_field(value: &Value, name: &str) -> std::result::Result<Option<i64>, String> {
    let Value::Record(fields) = value else {
        return Err("the value is not a record".into());
    };
    let Some((_, field)) = fields.iter().find(|(field, _)| field == name) else {
        return Err(format!("no field {name:?}"));
    };
    let field = match field {
        Value::Union(_, inner) => inner.as_ref(),
        other => other,
    };
    let (value, per_second) = match *field {
        Value::Null => return Ok(None),
        Value::TimestampMillis(ms) => (ms, 1_000),
        Value::TimestampMicros(us) => (us, 1_000_000),
        Value::TimestampNanos(ns) => (ns, 1_000_000_000),
        _ => {
            return Err(format!(
                "field {name:?} is not of a timestamp logical type (timestamp-millis, \
                 timestamp-micros or timestamp-nanos)"
            ))
        }
    };
    value
        .checked_mul(1_000_000_000 / per_second)
        .map(Some)
        .ok_or_else(|| format!("field {name:?}: {value} is outside the years 1677 to 2262"))
}
