//! Typed records made into Arrow columns by the library's check of each datum itself: one
//! walk ([`RecordCheck::check_ref`](cobsfile::avro::RecordCheck::check_ref)) checks a
//! datum (spec 15.3) and hands its values here as it meets them, so that a record is walked
//! once instead of once by the check and again by the Arrow project's Avro decoder.
//!
//! It serves the records whose writer schema *is* the table's reader schema (resolution is
//! then the identity) and a table whose columns are all of the flat kinds [`Kind`] lists,
//! made into exactly the arrays the Arrow project's reader makes of them (the tests compare
//! the two). Fields the scan does not project may be of any type: the walk checks them all
//! the same. Anything else (another writer schema, a nested column) goes to that reader, as
//! before. A record's values are taken as the walk meets them and kept only once the walk
//! has found the whole record sound; otherwise they are taken back.
//!
//! JSON records are made into the same columns by one pass of a JSON parser over each
//! ([`JsonColumns`], in `json`).

use std::sync::Arc;

use datafusion::arrow::array::{
    make_array, Array, ArrayRef, BinaryArray, BooleanArray, DictionaryArray, PrimitiveArray,
    StringArray,
};
use datafusion::arrow::buffer::{Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use datafusion::arrow::datatypes::{
    DataType, Float32Type, Float64Type, Int32Type, Int64Type, Schema as ArrowSchema, TimeUnit,
};
use datafusion::common::Result;

use cobsfile::avro::apache_avro::schema::{EnumSchema, RecordSchema, Schema};
use cobsfile::avro::{Visit, WriterSchema};

mod json;
pub(crate) use json::JsonColumns;

/// How a top-level field's values become a column.
#[derive(Debug)]
enum Kind {
    /// Not projected: checked by the walk, kept nowhere.
    Skip,
    Utf8,
    Binary,
    Boolean,
    /// `int`, `date` or `time-millis`: Int32, Date32 or Time32(ms).
    Int,
    /// `long` or a time or timestamp of it: Int64, Timestamp or Time64.
    Long,
    Float,
    Double,
    /// An enum's indexes, as Dictionary(Int32, Utf8) over its symbols.
    Enum(Arc<StringArray>),
}

/// One top-level field's values so far.
#[derive(Debug)]
struct Column {
    kind: Kind,
    /// The Arrow type the table gives it.
    data_type: DataType,
    /// Its place among the scan's columns.
    at: usize,
    /// Validity, for a field of a union with `null` (`None` otherwise).
    valid: Option<Vec<bool>>,
    /// Numbers (`Int`, `Long`, `Boolean` as 0/1, `Enum` indexes).
    longs: Vec<i64>,
    /// Floats and doubles.
    doubles: Vec<f64>,
    /// Byte strings: where each ends in `data` (exact while `data` holds at most
    /// `i32::MAX` bytes, which [`finish`](Self::finish) checks).
    ends: Vec<i32>,
    data: Vec<u8>,
}

impl Column {
    fn new(kind: Kind, data_type: DataType, at: usize, nullable: bool) -> Self {
        Column {
            kind,
            data_type,
            at,
            valid: nullable.then(Vec::new),
            longs: Vec::new(),
            doubles: Vec::new(),
            ends: Vec::new(),
            data: Vec::new(),
        }
    }

    fn len(&self) -> usize {
        match self.kind {
            Kind::Skip => 0,
            Kind::Utf8 | Kind::Binary => self.ends.len(),
            Kind::Float | Kind::Double => self.doubles.len(),
            _ => self.longs.len(),
        }
    }

    fn truncate(&mut self, rows: usize) {
        if let Some(valid) = &mut self.valid {
            valid.truncate(rows);
        }
        self.longs.truncate(rows);
        self.doubles.truncate(rows);
        self.ends.truncate(rows);
        self.data
            .truncate(self.ends.last().map_or(0, |&end| end as usize));
    }

    /// A null: the validity's `false`, and a value of no meaning in its place (a column that
    /// may be null).
    fn null(&mut self) {
        if let Some(valid) = &mut self.valid {
            valid.push(false);
        }
        match self.kind {
            Kind::Skip => {}
            Kind::Utf8 | Kind::Binary => self.ends.push(self.data.len() as i32),
            Kind::Float | Kind::Double => self.doubles.push(0.0),
            _ => self.longs.push(0),
        }
    }

    #[inline(always)]
    fn valid(&mut self) {
        if let Some(valid) = &mut self.valid {
            valid.push(true);
        }
    }

    #[inline(always)]
    fn long(&mut self, value: i64) {
        self.valid();
        self.longs.push(value);
    }

    #[inline(always)]
    fn double(&mut self, value: f64) {
        self.valid();
        self.doubles.push(value);
    }

    #[inline(always)]
    fn bytes(&mut self, value: &[u8]) {
        self.valid();
        self.data.extend_from_slice(value);
        self.ends.push(self.data.len() as i32);
    }

    fn finish(&mut self) -> Result<ArrayRef> {
        let nulls = self.valid.as_mut().map(|v| NullBuffer::from(refill(v)));
        let array: ArrayRef = match &self.kind {
            Kind::Skip => unreachable!("skipped fields make no column"),
            Kind::Utf8 | Kind::Binary => {
                if i32::try_from(self.data.len()).is_err() {
                    return Err(datafusion::common::exec_datafusion_err!(
                        "a batch's strings exceed 2 GiB"
                    ));
                }
                let mut offsets = Vec::with_capacity(self.ends.len() + 1);
                offsets.push(0i32);
                offsets.extend_from_slice(&self.ends);
                self.ends.clear();
                let offsets = OffsetBuffer::new(ScalarBuffer::from(offsets));
                let data = Buffer::from_vec(refill(&mut self.data));
                match self.kind {
                    // SAFETY: the offsets are checked (`OffsetBuffer::new`: from 0, none
                    // decreasing), end at the data's length and are exact (its length fits
                    // in an i32, above); every value between two of them is a `&str` (the
                    // walk's, handed to `Visit::string`, or the JSON parser's, in `json`) and
                    // nulls are empty, so the data is UTF-8 at every offset; `nulls` has a
                    // bit per value. A second check of the UTF-8
                    // cost 1.3% of a typed scan (perf, the filter query of benches/sql.rs).
                    Kind::Utf8 => {
                        Arc::new(unsafe { StringArray::new_unchecked(offsets, data, nulls) })
                    }
                    _ => Arc::new(BinaryArray::try_new(offsets, data, nulls)?),
                }
            }
            Kind::Boolean => {
                let values: Vec<bool> = self.longs.drain(..).map(|v| v != 0).collect();
                Arc::new(BooleanArray::new(values.into(), nulls))
            }
            Kind::Int => {
                let values: Vec<i32> = self.longs.drain(..).map(|v| v as i32).collect();
                let array = PrimitiveArray::<Int32Type>::try_new(values.into(), nulls)?;
                retyped(Arc::new(array), &self.data_type)?
            }
            Kind::Long => {
                let values = refill(&mut self.longs);
                let array = PrimitiveArray::<Int64Type>::try_new(values.into(), nulls)?;
                retyped(Arc::new(array), &self.data_type)?
            }
            Kind::Float => {
                let values: Vec<f32> = self.doubles.drain(..).map(|v| v as f32).collect();
                Arc::new(PrimitiveArray::<Float32Type>::try_new(
                    values.into(),
                    nulls,
                )?)
            }
            Kind::Double => {
                let values = refill(&mut self.doubles);
                Arc::new(PrimitiveArray::<Float64Type>::try_new(
                    values.into(),
                    nulls,
                )?)
            }
            Kind::Enum(symbols) => {
                let keys: Vec<i32> = self.longs.drain(..).map(|v| v as i32).collect();
                let keys = PrimitiveArray::<Int32Type>::try_new(keys.into(), nulls)?;
                Arc::new(DictionaryArray::<Int32Type>::try_new(
                    keys,
                    symbols.clone() as ArrayRef,
                )?)
            }
        };
        Ok(array)
    }
}

/// What `values` holds, taken for a batch, leaving in its place an empty vector with the room
/// it had (as the columns drained into a batch keep theirs): the next batch then grows no
/// vector, where growing one from nothing moved its bytes a dozen times, and again after
/// each short batch that ends a range (5.7% of a typed scan's instructions, callgrind).
fn refill<T>(values: &mut Vec<T>) -> Vec<T> {
    let room = values.capacity();
    std::mem::replace(values, Vec::with_capacity(room))
}

/// `array` as `data_type`, a type of the same layout (a timestamp of 64-bit numbers, say).
fn retyped(array: ArrayRef, data_type: &DataType) -> Result<ArrayRef> {
    if array.data_type() == data_type {
        return Ok(array);
    }
    let data = array
        .to_data()
        .into_builder()
        .data_type(data_type.clone())
        .build()?;
    Ok(make_array(data))
}

/// The kind of column a field of schema `schema` makes as Arrow type `data_type`, and
/// whether it may be null; `None` for those this module does not make.
fn kind_of(schema: &Schema, data_type: &DataType) -> Option<(Kind, bool)> {
    if let Schema::Union(union) = schema {
        let variants = union.variants();
        let inner = match variants {
            [Schema::Null, other] | [other, Schema::Null] => other,
            _ => return None,
        };
        return match kind_of(inner, data_type)? {
            (kind, false) => Some((kind, true)),
            _ => None,
        };
    }
    use DataType as D;
    let kind = match (schema, data_type) {
        (Schema::String, D::Utf8) => Kind::Utf8,
        (Schema::Bytes, D::Binary) => Kind::Binary,
        (Schema::Boolean, D::Boolean) => Kind::Boolean,
        (Schema::Int, D::Int32)
        | (Schema::Date, D::Date32)
        | (Schema::TimeMillis, D::Time32(TimeUnit::Millisecond)) => Kind::Int,
        (Schema::Long, D::Int64)
        | (Schema::TimeMicros, D::Time64(TimeUnit::Microsecond))
        | (Schema::TimestampMillis, D::Timestamp(TimeUnit::Millisecond, Some(_)))
        | (Schema::TimestampMicros, D::Timestamp(TimeUnit::Microsecond, Some(_)))
        | (Schema::TimestampNanos, D::Timestamp(TimeUnit::Nanosecond, Some(_)))
        | (Schema::LocalTimestampMillis, D::Timestamp(TimeUnit::Millisecond, None))
        | (Schema::LocalTimestampMicros, D::Timestamp(TimeUnit::Microsecond, None))
        | (Schema::LocalTimestampNanos, D::Timestamp(TimeUnit::Nanosecond, None)) => Kind::Long,
        (Schema::Float, D::Float32) => Kind::Float,
        (Schema::Double, D::Float64) => Kind::Double,
        (Schema::Enum(EnumSchema { symbols, .. }), D::Dictionary(key, value))
            if **key == D::Int32 && **value == D::Utf8 =>
        {
            Kind::Enum(Arc::new(StringArray::from_iter_values(symbols)))
        }
        _ => return None,
    };
    Some((kind, false))
}

/// Rows of one writer schema, made into columns as the check walks each record.
#[derive(Debug)]
pub(crate) struct Columns {
    /// The reader schema, which a record's writer schema must be.
    reader: Schema,
    /// Whether the writer schema of this fingerprint was found to be the reader schema.
    decided: Option<(u64, bool)>,
    /// One per top-level field, in the schema's order.
    fields: Vec<Column>,
    /// Columns made (the scan's, in order).
    width: usize,
    /// Rows kept.
    rows: usize,
    /// The walk of the record at hand: records and arrays it is inside (1 in the top-level
    /// record), the field it is at, values taken and not yet kept, and whether a value did
    /// not fit.
    nesting: u32,
    field: usize,
    taken: usize,
    broken: bool,
}

impl Columns {
    /// Columns of the records of `reader_schema` (JSON) for a scan of the top-level fields
    /// `projection` as the Arrow fields of `projected`; `None` if some column is not of a
    /// kind made here.
    pub(crate) fn new(
        reader_schema: &str,
        projection: &[usize],
        projected: &ArrowSchema,
    ) -> Option<Self> {
        let reader = WriterSchema::parse(reader_schema).ok()?;
        let Schema::Record(RecordSchema { fields, .. }) = reader.schema() else {
            return None;
        };
        if projection.is_empty() || projection.len() != projected.fields().len() {
            return None;
        }
        let mut columns: Vec<Column> = fields
            .iter()
            .map(|_| Column::new(Kind::Skip, DataType::Null, 0, false))
            .collect();
        for (at, (&field, arrow)) in projection.iter().zip(projected.fields()).enumerate() {
            let column = columns.get_mut(field)?;
            if !matches!(column.kind, Kind::Skip) {
                return None; // projected twice
            }
            let (kind, nullable) = kind_of(&fields[field].schema, arrow.data_type())?;
            column.kind = kind;
            column.data_type = arrow.data_type().clone();
            column.at = at;
            column.valid = nullable.then(Vec::new);
        }
        Some(Columns {
            reader: reader.schema().clone(),
            decided: None,
            fields: columns,
            width: projection.len(),
            rows: 0,
            nesting: 0,
            field: 0,
            taken: 0,
            broken: false,
        })
    }

    /// Rows kept and not yet made a batch.
    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// Keeps the record just walked, checked sound and of writer schema `schema`; false if it
    /// is not one this module makes columns of. The values of a record not kept (or whose
    /// walk failed) are taken back before the next walk or batch.
    pub(crate) fn keep(&mut self, schema: &WriterSchema) -> bool {
        let fingerprint = schema.fingerprint();
        let same = match self.decided {
            Some((f, same)) if f == fingerprint => same,
            _ => {
                let same = *schema.schema() == self.reader;
                self.decided = Some((fingerprint, same));
                same
            }
        };
        let whole = self.nesting == 0 && self.field.wrapping_add(1) == self.fields.len();
        if !same || self.broken || !whole || self.taken != self.width {
            return false;
        }
        self.rows += 1;
        self.taken = 0;
        true
    }

    /// Takes back the values of a record walked and not kept, if any.
    fn take_back(&mut self) {
        if self.taken == 0 {
            return;
        }
        self.taken = 0;
        let rows = self.rows;
        for column in &mut self.fields {
            if column.len() != rows {
                column.truncate(rows);
            }
        }
    }

    /// The rows kept, as the scan's columns in order; none are kept after.
    pub(crate) fn finish(&mut self) -> Result<Vec<ArrayRef>> {
        self.take_back();
        let mut out: Vec<Option<ArrayRef>> = vec![None; self.width];
        for column in &mut self.fields {
            if !matches!(column.kind, Kind::Skip) {
                out[column.at] = Some(column.finish()?);
            }
        }
        self.rows = 0;
        Ok(out
            .into_iter()
            .map(|c| c.expect("every column made"))
            .collect())
    }

    /// Hands a top-level value to its field's column with `put`, if the field is kept
    /// (`fits` says whether it takes such a value).
    #[inline(always)]
    fn put(&mut self, fits: impl Fn(&Column) -> bool, put: impl FnOnce(&mut Column)) {
        if self.nesting != 1 {
            return;
        }
        match self.fields.get_mut(self.field) {
            Some(Column {
                kind: Kind::Skip, ..
            }) => {}
            Some(column) if fits(column) => {
                self.taken += 1;
                put(column);
            }
            _ => self.broken = true,
        }
    }
}

impl Visit for Columns {
    fn begin(&mut self) {
        self.take_back();
        self.nesting = 0;
        self.field = usize::MAX;
        self.broken = false;
    }

    #[inline(always)]
    fn null(&mut self) {
        self.put(|c| c.valid.is_some(), |c| c.null());
    }

    #[inline(always)]
    fn boolean(&mut self, value: bool) {
        self.put(
            |c| matches!(c.kind, Kind::Boolean),
            |c| c.long(i64::from(value)),
        );
    }

    #[inline(always)]
    fn int(&mut self, _schema: &Schema, value: i32) {
        self.put(
            |c| matches!(c.kind, Kind::Int),
            |c| c.long(i64::from(value)),
        );
    }

    #[inline(always)]
    fn long(&mut self, _schema: &Schema, value: i64) {
        self.put(|c| matches!(c.kind, Kind::Long), |c| c.long(value));
    }

    #[inline(always)]
    fn float(&mut self, value: f32) {
        self.put(
            |c| matches!(c.kind, Kind::Float),
            |c| c.double(f64::from(value)),
        );
    }

    #[inline(always)]
    fn double(&mut self, value: f64) {
        self.put(|c| matches!(c.kind, Kind::Double), |c| c.double(value));
    }

    #[inline(always)]
    fn bytes(&mut self, _schema: &Schema, value: &[u8]) {
        self.put(|c| matches!(c.kind, Kind::Binary), |c| c.bytes(value));
    }

    #[inline(always)]
    fn string(&mut self, value: &str) {
        self.put(
            |c| matches!(c.kind, Kind::Utf8),
            |c| c.bytes(value.as_bytes()),
        );
    }

    #[inline(always)]
    fn symbol(&mut self, index: u32, _symbol: &str) {
        self.put(
            |c| matches!(c.kind, Kind::Enum(_)),
            |c| c.long(i64::from(index)),
        );
    }

    fn record(&mut self, _schema: &RecordSchema) {
        // A record as a kept field's value: a column of it would be nested.
        self.put(|_| false, |_| {});
        self.nesting += 1;
    }

    #[inline(always)]
    fn field(&mut self, _name: &str) {
        if self.nesting == 1 {
            self.field = self.field.wrapping_add(1);
        }
    }

    fn record_end(&mut self) {
        self.nesting -= 1;
    }

    fn array(&mut self) {
        self.put(|_| false, |_| {});
        self.nesting += 1;
    }

    fn array_end(&mut self) {
        self.nesting -= 1;
    }

    fn map(&mut self) {
        self.array();
    }

    fn map_end(&mut self) {
        self.nesting -= 1;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use arrow_avro::reader::ReaderBuilder as AvroArrowBuilder;
    use arrow_avro::schema::AvroSchema;
    use datafusion::arrow::array::RecordBatch;
    use proptest::prelude::*;

    use cobsfile::avro::apache_avro::to_avro_datum;
    use cobsfile::avro::apache_avro::types::Value;
    use cobsfile::avro::{DatumLimits, RecordCheck, Schemas};

    use super::*;
    use crate::schema::{avro_schema, store_of};

    /// The field types tried: (schema JSON, a value of it from a seed).
    const TYPES: [&str; 18] = [
        r#""string""#,
        r#""bytes""#,
        r#""boolean""#,
        r#""int""#,
        r#""long""#,
        r#""float""#,
        r#""double""#,
        r#"{"type":"enum","name":"E%","symbols":["a","b","c"]}"#,
        r#"{"type":"int","logicalType":"date"}"#,
        r#"{"type":"int","logicalType":"time-millis"}"#,
        r#"{"type":"long","logicalType":"time-micros"}"#,
        r#"{"type":"long","logicalType":"timestamp-millis"}"#,
        r#"{"type":"long","logicalType":"timestamp-micros"}"#,
        r#"{"type":"long","logicalType":"local-timestamp-micros"}"#,
        // Kinds made only by arrow-avro: a scan that projects one uses it throughout.
        r#"{"type":"array","items":"int"}"#,
        r#"{"type":"map","values":"string"}"#,
        r#"{"type":"record","name":"R%","fields":[{"name":"x","type":"long"}]}"#,
        r#""null""#,
    ];

    fn value(kind: usize, seed: u64) -> Value {
        let small = (seed % 2001) as i64 - 1000;
        match kind {
            0 => Value::String(match seed % 3 {
                0 => format!("s{seed}é"),
                1 => "x".repeat((seed % 200) as usize),
                _ => format!("s{seed}"),
            }),
            1 => Value::Bytes(seed.to_le_bytes()[..(seed % 9) as usize].to_vec()),
            2 => Value::Boolean(seed.is_multiple_of(2)),
            3 => Value::Int(seed as i32),
            4 => Value::Long(seed as i64),
            5 => Value::Float(small as f32 / 8.0),
            6 => Value::Double(seed as f64 / 3.0),
            7 => {
                let i = (seed % 3) as u32;
                Value::Enum(i, ["a", "b", "c"][i as usize].to_string())
            }
            8 => Value::Date(small as i32),
            9 => Value::TimeMillis((seed % 86_400_000) as i32),
            10 => Value::TimeMicros((seed % 86_400_000_000) as i64),
            11 => Value::TimestampMillis(seed as i64 >> 8),
            12 => Value::TimestampMicros(seed as i64 >> 4),
            13 => Value::LocalTimestampMicros(seed as i64 >> 4),
            14 => Value::Array((0..seed % 4).map(|i| Value::Int(i as i32)).collect()),
            15 => Value::Map(HashMap::from([(
                "k".to_string(),
                Value::String("v".into()),
            )])),
            16 => Value::Record(vec![("x".into(), Value::Long(small))]),
            _ => Value::Null,
        }
    }

    /// A field: its type's index in `TYPES`, and whether (and how) it is a union with null.
    #[derive(Debug, Clone)]
    struct FieldSpec {
        kind: usize,
        nullable: Option<bool>,
    }

    fn schema_json(fields: &[FieldSpec]) -> String {
        let fields: Vec<String> = fields
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let t = TYPES[f.kind].replace('%', &i.to_string());
                let t = match f.nullable {
                    Some(true) if f.kind != 17 => format!(r#"["null",{t}]"#),
                    Some(false) if f.kind != 17 => format!(r#"[{t},"null"]"#),
                    _ => t,
                };
                format!(r#"{{"name":"f{i}","type":{t}}}"#)
            })
            .collect();
        format!(
            r#"{{"type":"record","name":"Row","fields":[{}]}}"#,
            fields.join(",")
        )
    }

    /// The rows of `records` as the check's walk makes them, and as arrow-avro does.
    fn both(json: &str, projection: &[usize], records: &[Vec<u8>]) -> (RecordBatch, RecordBatch) {
        let table = avro_schema(json).unwrap();
        let projected = Arc::new(table.project(projection).unwrap());
        let writer = WriterSchema::parse(json).unwrap();
        let mut schemas = Schemas::new();
        schemas.add(writer.clone());
        let mut check = RecordCheck::new(schemas, DatumLimits::default());
        let mut columns =
            Columns::new(json, projection, &projected).expect("flat columns are made");
        for record in records {
            let schema = check.check_with(record, 0, &mut columns).unwrap();
            assert!(columns.keep(&schema));
        }
        let fast = RecordBatch::try_new(projected.clone(), columns.finish().unwrap()).unwrap();
        let store = store_of(std::iter::once((writer.fingerprint(), json))).unwrap();
        let mut decoder = AvroArrowBuilder::new()
            .with_writer_schema_store(store)
            .with_reader_schema(AvroSchema::new(json.to_string()))
            .with_projection(projection.to_vec())
            .with_batch_size(records.len().max(1))
            .build_decoder()
            .unwrap();
        for record in records {
            assert_eq!(decoder.decode(record).unwrap(), record.len());
        }
        let batch = decoder.flush().unwrap().unwrap();
        let slow = RecordBatch::try_new(projected, batch.columns().to_vec()).unwrap();
        (fast, slow)
    }

    fn encode(json: &str, fields: &[FieldSpec], seeds: &[u64]) -> Vec<Vec<u8>> {
        let writer = WriterSchema::parse(json).unwrap();
        seeds
            .iter()
            .map(|&seed| {
                let values = fields
                    .iter()
                    .enumerate()
                    .map(|(i, f)| {
                        let seed = seed.wrapping_mul(i as u64 + 7).rotate_left(i as u32);
                        let v = value(f.kind, seed);
                        let v = match f.nullable {
                            Some(first) if f.kind != 17 => {
                                let null = seed.is_multiple_of(5);
                                let index = u32::from(null != first);
                                match null {
                                    true => Value::Union(index, Box::new(Value::Null)),
                                    false => Value::Union(index, Box::new(v)),
                                }
                            }
                            _ => v,
                        };
                        (format!("f{i}"), v)
                    })
                    .collect();
                let mut record = writer.prefix().to_vec();
                record.extend(to_avro_datum(writer.schema(), Value::Record(values)).unwrap());
                record
            })
            .collect()
    }

    proptest! {
        /// Whatever the flat fields, their order and the columns projected, the check's walk
        /// makes exactly the arrays arrow-avro makes.
        #[test]
        fn the_walk_makes_the_arrays_arrow_avro_makes(
            fields in prop::collection::vec(
                (0..14usize, prop::option::of(any::<bool>()))
                    .prop_map(|(kind, nullable)| FieldSpec { kind, nullable }),
                1..8,
            ),
            skipped in prop::collection::vec((14..18usize, any::<bool>()), 0..3),
            order in any::<u64>(),
            seeds in prop::collection::vec(any::<u64>(), 1..40),
        ) {
            // Fields of kinds not made here go last, unprojected.
            let mut all = fields.clone();
            all.extend(skipped.iter().map(|&(kind, n)| FieldSpec { kind, nullable: n.then_some(true) }));
            let json = schema_json(&all);
            let records = encode(&json, &all, &seeds);
            // Some of the flat fields, in an order of the seed's choosing.
            let mut projection: Vec<usize> = (0..fields.len())
                .filter(|i| (order >> (i % 64)) & 3 != 0)
                .collect();
            if projection.is_empty() {
                projection.push(0);
            }
            let turn = (order % projection.len() as u64) as usize;
            projection.rotate_left(turn);
            let (fast, slow) = both(&json, &projection, &records);
            prop_assert_eq!(fast, slow);
        }
    }

    /// Values a walk took before it failed, or of a record not kept, are not in the batch.
    #[test]
    fn values_of_records_not_kept_are_taken_back() {
        let fields = [
            FieldSpec {
                kind: 4,
                nullable: None,
            },
            FieldSpec {
                kind: 0,
                nullable: Some(true),
            },
        ];
        let json = schema_json(&fields);
        let good = encode(&json, &fields, &[1, 2, 3]);
        // The long taken, then a string that is not UTF-8.
        let mut bad = good[0].clone();
        *bad.last_mut().unwrap() = 0xff;
        let writer = WriterSchema::parse(&json).unwrap();
        let other = WriterSchema::parse(&json.replace("Row", "Other")).unwrap();
        let mut schemas = Schemas::new();
        schemas.add(writer);
        let mut check = RecordCheck::new(schemas, DatumLimits::default());
        let table = avro_schema(&json).unwrap();
        let projected = Arc::new(table.project(&[1, 0]).unwrap());
        let mut columns = Columns::new(&json, &[1, 0], &projected).unwrap();
        for (i, record) in good.iter().enumerate() {
            if i == 1 {
                assert!(check.check_with(&bad, 0, &mut columns).is_err());
            }
            let schema = check.check_with(record, 0, &mut columns).unwrap();
            assert!(columns.keep(&schema));
            if i == 1 {
                // Walked, then found of another schema: not kept.
                check.check_with(record, 0, &mut columns).unwrap();
                assert!(!columns.keep(&other));
            }
        }
        assert_eq!(columns.rows(), 3);
        let fast = RecordBatch::try_new(projected.clone(), columns.finish().unwrap()).unwrap();
        let (_, slow) = both(&json, &[1, 0], &good);
        assert_eq!(fast, slow);
    }

    #[test]
    fn columns_of_other_kinds_are_left_to_arrow_avro() {
        for kind in 14..18 {
            let fields = [
                FieldSpec {
                    kind: 0,
                    nullable: None,
                },
                FieldSpec {
                    kind,
                    nullable: None,
                },
            ];
            let json = schema_json(&fields);
            let table = avro_schema(&json).unwrap();
            let projected = table.project(&[0, 1]).unwrap();
            assert!(Columns::new(&json, &[0, 1], &projected).is_none(), "{json}");
            let projected = table.project(&[0]).unwrap();
            assert!(Columns::new(&json, &[0], &projected).is_some(), "{json}");
        }
    }
}
