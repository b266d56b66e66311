//! One file read whole into record batches, without a session: what a table of that one file
//! would give `SELECT columns FROM t`, through the same scan (the Python package's
//! `to_arrow()` and `read_table()`).

use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::{plan_datafusion_err, Result};

use crate::options::CobsfileOptions;
use crate::scan::{scan, Damage, ScanSpec, Sink};
use crate::schema::{infer, mode_of, sample};

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
pub fn read_file(
    bytes: &[u8],
    file: &str,
    options: &CobsfileOptions,
    reader: &cobsfile::ReaderBuilder,
    columns: Option<&[String]>,
    batch_size: usize,
) -> Result<FileBatches> {
    crate::scan::not_a_cobsfile(bytes, file, reader)?;
    let found = sample(bytes, reader, options, options.schema_infer_max_records);
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
    let spec = ScanSpec {
        mode,
        projected: Arc::new(schema.project(&projection)?),
        projection,
        batch_size: batch_size.max(1),
        limit: None,
        options: options.clone(),
        reader: reader.clone(),
    };
    let mut sink = Gather::default();
    scan(bytes, file, None, &spec, &mut sink)?;
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
