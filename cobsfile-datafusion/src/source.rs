//! DataFusion's file source and opener for cobsfiles: each opened file (or byte range of one)
//! is read on a blocking thread that sends record batches to the scan.

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::common::runtime::SpawnedTask;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{exec_datafusion_err, Result};
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::{
    FileOpenFuture, FileOpener, FileScanConfig, FileSource,
};
use datafusion::datasource::projection::{ProjectionOpener, SplitProjection};
use datafusion::datasource::table_schema::TableSchema;
use datafusion::physical_expr::projection::ProjectionExprs;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::metrics::{Count, ExecutionPlanMetricsSet, MetricBuilder};
use datafusion::physical_plan::DisplayFormatType;
use futures::StreamExt;
use object_store::ObjectStore;

use crate::options::CobsfileOptions;
use crate::scan::{scan, Damage, ScanSpec, Sink, Whole};
use crate::schema::mode_of;
use crate::store::FileBytes;

/// Called with every damaged range and skipped record a scan meets (besides the metrics and
/// the log's warning): how the command line reports them.
pub type DamageHook = Arc<dyn Fn(&Damage) + Send + Sync>;

/// The file source of cobsfile scans.
#[derive(Clone)]
pub struct CobsfileSource {
    table_schema: TableSchema,
    options: CobsfileOptions,
    projection: SplitProjection,
    batch_size: Option<usize>,
    metrics: ExecutionPlanMetricsSet,
    hook: Option<DamageHook>,
}

impl fmt::Debug for CobsfileSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CobsfileSource")
            .field("options", &self.options)
            .field("file_indices", &self.projection.file_indices)
            .finish()
    }
}

impl CobsfileSource {
    /// A source of rows of `table_schema` read with `options`.
    pub fn new(table_schema: impl Into<TableSchema>, options: CobsfileOptions) -> Self {
        let table_schema = table_schema.into();
        CobsfileSource {
            projection: SplitProjection::unprojected(&table_schema),
            table_schema,
            options,
            batch_size: None,
            metrics: ExecutionPlanMetricsSet::new(),
            hook: None,
        }
    }

    /// Also reports damage to `hook`.
    pub fn with_damage_hook(mut self, hook: Option<DamageHook>) -> Self {
        self.hook = hook;
        self
    }

    /// The options the source reads with.
    pub fn options(&self) -> &CobsfileOptions {
        &self.options
    }
}

impl FileSource for CobsfileSource {
    fn create_file_opener(
        &self,
        object_store: Arc<dyn ObjectStore>,
        base_config: &FileScanConfig,
        partition: usize,
    ) -> Result<Arc<dyn FileOpener>> {
        let file_schema = self.table_schema.file_schema();
        let mode = mode_of(file_schema, &self.options)?.ok_or_else(|| {
            exec_datafusion_err!(
                "a cobsfile table's schema must say how its records are read: give the \
                 option records (avro, json or raw)"
            )
        })?;
        let projection = self.projection.file_indices.clone();
        let spec = ScanSpec {
            mode,
            projected: Arc::new(file_schema.project(&projection)?),
            projection,
            batch_size: self
                .batch_size
                .ok_or_else(|| exec_datafusion_err!("no batch size set for the cobsfile scan"))?,
            limit: base_config.limit,
            options: self.options.clone(),
            reader: self.options.reader(),
        };
        let metrics = Metrics {
            damaged_ranges: MetricBuilder::new(&self.metrics).counter("damaged_ranges", partition),
            damaged_bytes: MetricBuilder::new(&self.metrics).counter("damaged_bytes", partition),
            skipped_records: MetricBuilder::new(&self.metrics)
                .counter("skipped_records", partition),
        };
        let opener = Arc::new(CobsfileOpener {
            spec: Arc::new(spec),
            store: object_store,
            metrics,
            hook: self.hook.clone(),
        });
        ProjectionOpener::try_new(self.projection.clone(), opener, file_schema)
    }

    fn table_schema(&self) -> &TableSchema {
        &self.table_schema
    }

    fn with_batch_size(&self, batch_size: usize) -> Arc<dyn FileSource> {
        let mut source = self.clone();
        source.batch_size = Some(batch_size);
        Arc::new(source)
    }

    fn try_pushdown_projection(
        &self,
        projection: &ProjectionExprs,
    ) -> Result<Option<Arc<dyn FileSource>>> {
        let mut source = self.clone();
        let merged = self.projection.source.try_merge(projection)?;
        source.projection = SplitProjection::new(self.table_schema.file_schema(), &merged);
        Ok(Some(Arc::new(source)))
    }

    fn projection(&self) -> Option<&ProjectionExprs> {
        Some(&self.projection.source)
    }

    fn metrics(&self) -> &ExecutionPlanMetricsSet {
        &self.metrics
    }

    fn file_type(&self) -> &str {
        "cobsfile"
    }

    fn fmt_extra(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, ", on_damage={}", self.options.on_damage)
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        datafusion::physical_plan::apply_expression_roots(self.projection.source.iter(), f)
    }
}

impl From<CobsfileSource> for Arc<dyn FileSource> {
    fn from(source: CobsfileSource) -> Self {
        Arc::new(source)
    }
}

#[derive(Clone)]
struct Metrics {
    damaged_ranges: Count,
    damaged_bytes: Count,
    skipped_records: Count,
}

/// Opens one file or byte range of one for a scan.
struct CobsfileOpener {
    spec: Arc<ScanSpec>,
    store: Arc<dyn ObjectStore>,
    metrics: Metrics,
    hook: Option<DamageHook>,
}

/// Channel sink of a scan on a blocking thread.
struct Sender {
    tx: tokio::sync::mpsc::Sender<Result<RecordBatch>>,
    metrics: Metrics,
    hook: Option<DamageHook>,
}

impl Sink for Sender {
    fn batch(&mut self, batch: RecordBatch) -> bool {
        self.tx.blocking_send(Ok(batch)).is_ok()
    }
    fn damage(&mut self, damage: Damage) {
        if damage.records == 0 {
            self.metrics.damaged_ranges.add(1);
            self.metrics
                .damaged_bytes
                .add((damage.range.end - damage.range.start) as usize);
        } else {
            self.metrics.skipped_records.add(damage.records as usize);
        }
        if let Some(hook) = &self.hook {
            hook(&damage);
        }
    }
}

impl FileOpener for CobsfileOpener {
    fn open(&self, file: PartitionedFile) -> Result<FileOpenFuture> {
        let spec = self.spec.clone();
        let store = self.store.clone();
        let metrics = self.metrics.clone();
        let hook = self.hook.clone();
        let range = match &file.range {
            Some(r) if r.start < 0 || r.end < r.start => {
                return Err(exec_datafusion_err!(
                    "{}: invalid byte range {}..{}",
                    file.object_meta.location,
                    r.start,
                    r.end
                ))
            }
            Some(r) => Some(r.start as u64..r.end as u64),
            None => None,
        };
        Ok(Box::pin(async move {
            let bytes = FileBytes::load(&store, &file.object_meta).await?;
            let name = bytes.name(&file.object_meta);
            let (tx, rx) = tokio::sync::mpsc::channel(2);
            let task = SpawnedTask::spawn_blocking(move || {
                let mut sink = Sender { tx, metrics, hook };
                if let Err(e) = scan(Whole::of(&bytes), &name, range, &spec, &mut sink) {
                    let _ = sink.tx.blocking_send(Err(e));
                }
            });
            let stream = futures::stream::unfold((rx, task), |(mut rx, task)| async move {
                rx.recv().await.map(|batch| (batch, (rx, task)))
            });
            Ok(stream.boxed())
        }))
    }
}
