//! One file read whole into record batches, without a session: what a table of that one file
//! would give `SELECT columns FROM t`, through the same scan (the Python package's
//! `to_arrow()` and `read_table()`), from memory or by byte ranges from object storage.

use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::{plan_datafusion_err, Result};

use crate::options::CobsfileOptions;
use crate::scan::{scan, Damage, ScanSpec, Sink, Whole};
use crate::schema::{file_column_of, infer, mode_of, time_column_of};

/// Rows of one file, and what its read skipped.
#[derive(Debug, Clone)]
pub struct FileBatches {
    /// The schema of the batches: the file's table schema, projected.
    pub schema: SchemaRef,
    /// The rows, in file order.
    pub batches: Vec<RecordBatch>,
    /// Damaged ranges skipped, and records skipped whole (with `on_damage` `skip`).
    pub damage: Vec<Damage>,
}

/// Reads `bytes`, a whole cobsfile named `file` in messages, into batches of at most
/// `batch_size` rows: the columns named in `columns` (all when `None`), in that order.
///
/// The table schema is inferred as for a table of this one file (`options.records`,
/// `reader_schema`, `schema_infer_max_records`); `reader` is how the library reads it (its
/// limits and any zstd dictionaries). Damage is skipped and returned, or with `on_damage`
/// `error` fails the read, as in a query.
///
/// With `threads` > 1 the file is read in byte ranges on that many threads (the library's
/// range reads, spec 9.4: each intact record once, whatever the cut), each range's rows made
/// into batches on its thread, and the batches come back in file order.
pub fn read_file(
    bytes: &[u8],
    file: &str,
    options: &CobsfileOptions,
    reader: &cobsfile::ReaderBuilder,
    columns: Option<&[String]>,
    batch_size: usize,
    threads: usize,
) -> Result<FileBatches> {
    read_whole(
        Whole::Slice(bytes),
        file,
        options,
        reader,
        columns,
        batch_size,
        threads,
    )
}

/// [`read_file`] of an object read in place by byte ranges (a [`RemoteObject`]'s): its
/// schemas from its index's metadata blocks, its records by ranges on `threads` threads, each
/// range fetched by the thread that reads it. The rows, damage and errors are those of
/// [`read_file`] over the same bytes.
///
/// [`RemoteObject`]: crate::RemoteObject
pub fn read_object(
    object: &crate::RemoteObject,
    file: &str,
    options: &CobsfileOptions,
    reader: &cobsfile::ReaderBuilder,
    columns: Option<&[String]>,
    batch_size: usize,
    threads: usize,
) -> Result<FileBatches> {
    read_whole(
        Whole::Remote(object.remote()),
        file,
        options,
        reader,
        columns,
        batch_size,
        threads,
    )
}

/// [`read_file`] of `whole`, held or read by ranges.
fn read_whole(
    whole: Whole<'_>,
    file: &str,
    options: &CobsfileOptions,
    reader: &cobsfile::ReaderBuilder,
    columns: Option<&[String]>,
    batch_size: usize,
    threads: usize,
) -> Result<FileBatches> {
    whole.check_is_cobsfile(file, reader)?;
    let found = whole.sample(file, reader, options, options.schema_infer_max_records)?;
    let schema = infer(&[(file.to_string(), found)], options)?;
    let mode = mode_of(&schema, options)?
        .ok_or_else(|| plan_datafusion_err!("{file}: no record format resolved"))?;
    let projection = match columns {
        None => (0..schema.fields().len()).collect(),
        Some(names) => names
            .iter()
            .map(|name| {
                schema.index_of(name).map_err(|_| {
                    let known: Vec<&str> =
                        schema.fields().iter().map(|f| f.name().as_str()).collect();
                    plan_datafusion_err!(
                        "{file}: no column {name:?} (columns: {})",
                        known.join(", ")
                    )
                })
            })
            .collect::<Result<Vec<usize>>>()?,
    };
    let time = time_column_of(&schema, options)
        .and_then(|column| projection.iter().position(|&c| c == column));
    let file_at =
        file_column_of(&schema).and_then(|column| projection.iter().position(|&c| c == column));
    let spec = ScanSpec {
        mode,
        projected: Arc::new(schema.project(&projection)?),
        projection,
        time,
        file: file_at,
        batch_size: batch_size.max(1),
        limit: None,
        options: options.clone(),
        reader: reader.clone().threads(threads),
    };
    read_all(whole, file, spec)
}

/// Reads all of `whole` as `spec` says, on the threads of `spec.reader`.
fn read_all(whole: Whole<'_>, file: &str, spec: ScanSpec) -> Result<FileBatches> {
    let mut sink = Gather::default();
    scan(whole, file, None, &spec, &mut sink)?;
    Ok(FileBatches {
        schema: spec.projected,
        batches: sink.batches,
        damage: sink.damage,
    })
}

#[derive(Default)]
struct Gather {
    batches: Vec<RecordBatch>,
    damage: Vec<Damage>,
}

impl Sink for Gather {
    fn batch(&mut self, batch: RecordBatch) -> bool {
        self.batches.push(batch);
        true
    }

    fn damage(&mut self, damage: Damage) {
        self.damage.push(damage);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::RecordFormat;
    use datafusion::arrow::array::{Array, BinaryArray};
    use proptest::prelude::*;

    fn rows(read: &FileBatches) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for batch in &read.batches {
            let records = batch
                .column(0)
                .as_any()
                .downcast_ref::<BinaryArray>()
                .expect("binary");
            out.extend((0..records.len()).map(|i| records.value(i).to_vec()));
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        /// Cut into any number of ranges, a damaged file reads as the library's full read
        /// reads it: the same records, in the same order, none twice.
        #[test]
        fn ranges_read_as_one(
            records in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..80), 1..300),
            block in 1usize..2000,
            zstd in any::<bool>(),
            flips in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 0..4),
            cut in proptest::option::of(any::<prop::sample::Index>()),
            parts in 1usize..7,
            min_split in 1u64..2000,
        ) {
            let compression = if zstd {
                cobsfile::Compression::Zstd { level: 1 }
            } else {
                cobsfile::Compression::None
            };
            let mut writer = cobsfile::WriterBuilder::new()
                .block_target(block)
                .compression(compression)
                .build(Vec::new())
                .unwrap();
            for r in &records {
                writer.write_record(r).unwrap();
            }
            let mut bytes = writer.finish().unwrap();
            for (at, mask) in flips {
                let i = at.index(bytes.len());
                bytes[i] ^= mask;
            }
            if let Some(at) = cut {
                bytes.truncate(at.index(bytes.len() + 1));
            }
            let library: Vec<Vec<u8>> = {
                let mut reader = cobsfile::ReaderBuilder::new().from_slice(&bytes);
                let mut out = Vec::new();
                while let Some(record) = reader.next_record() {
                    if let Ok(record) = record {
                        out.push(record.to_vec());
                    }
                }
                out
            };
            let options = CobsfileOptions::new().records(RecordFormat::Raw);
            let reader = options.reader();
            let whole = read_file(&bytes, "f", &options, &reader, Some(&["record".to_string()]), 7, 1);
            match whole {
                Err(_) => prop_assert!(library.is_empty()),
                Ok(whole) => {
                    prop_assert_eq!(&rows(&whole), &library);
                    let spec = ScanSpec {
                        mode: crate::schema::Mode::Raw,
                        projected: whole.schema.clone(),
                        projection: vec![0],
                        time: None,
                        file: None,
                        batch_size: 7,
                        limit: None,
                        options: options.clone(),
                        reader: reader.clone().threads(parts).min_split(min_split),
                    };
                    let split = read_all(Whole::Slice(&bytes), "f", spec).unwrap();
                    prop_assert_eq!(rows(&split), library);
                }
            }
        }
    }
}
