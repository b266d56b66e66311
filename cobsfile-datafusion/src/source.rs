//! DataFusion's file source and opener for cobsfiles: each opened file (or byte range of one)
//! is read on a blocking thread that sends record batches to the scan.

use std::fmt;
use std::sync::Arc;

use cobsfile::Window;
use datafusion::arrow::array::RecordBatch;
use datafusion::common::config::ConfigOptions;
use datafusion::common::runtime::SpawnedTask;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{exec_datafusion_err, Result, ScalarValue};
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::{
    FileOpenFuture, FileOpener, FileScanConfig, FileSource,
};
use datafusion::datasource::projection::{ProjectionOpener, SplitProjection};
use datafusion::datasource::table_schema::TableSchema;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::expressions::{BinaryExpr, Column, Literal};
use datafusion::physical_expr::projection::ProjectionExprs;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::filter_pushdown::{FilterPushdownPropagation, PushedDown};
use datafusion::physical_plan::metrics::{Count, ExecutionPlanMetricsSet, MetricBuilder};
use datafusion::physical_plan::DisplayFormatType;
use futures::StreamExt;
use object_store::ObjectStore;

use crate::options::CobsfileOptions;
use crate::scan::{scan, Damage, ScanSpec, Sink, Whole};
use crate::schema::{file_column_of, mode_of, time_column_of};
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
    /// The event times the query's filters leave (from those on the time column): the scan
    /// reads only the blocks that may hold them (spec 9.9).
    window: Option<Window>,
}

impl fmt::Debug for CobsfileSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CobsfileSource")
            .field("options", &self.options)
            .field("file_indices", &self.projection.file_indices)
            .field("window", &self.window)
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
            window: None,
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

    /// The window of event times the scan reads, if its filters set one.
    pub fn window(&self) -> Option<Window> {
        self.window
    }

    /// Reads only records whose event times are in `window` (as a query's filters on the
    /// time column do).
    pub fn with_window(mut self, window: Option<Window>) -> Self {
        self.window = window;
        self
    }
}

/// Narrows `window` by `filter` if it bounds the time column (index `column` of the table's
/// schema) by a literal time, alone or in a conjunction: `ts >= t`, `ts < t`, `t <= ts`,
/// `ts = t`, and `BETWEEN`, which the planner makes into two of these. Returns whether it did.
fn narrow(window: &mut Window, filter: &Arc<dyn PhysicalExpr>, column: usize) -> bool {
    let Some(binary) = filter.downcast_ref::<BinaryExpr>() else {
        return false;
    };
    if *binary.op() == Operator::And {
        let left = narrow(window, binary.left(), column);
        return narrow(window, binary.right(), column) | left;
    }
    let is_column = |e: &Arc<dyn PhysicalExpr>| {
        e.downcast_ref::<Column>()
            .is_some_and(|c| c.index() == column)
    };
    let time = |e: &Arc<dyn PhysicalExpr>| match e.downcast_ref::<Literal>()?.value() {
        ScalarValue::TimestampNanosecond(Some(t), _) => Some(*t),
        _ => None,
    };
    // As `column op t`.
    let (op, t) = match (binary.left(), binary.right()) {
        (c, l) if is_column(c) => (*binary.op(), time(l)),
        (l, c) if is_column(c) => match binary.op().swap() {
            Some(op) => (op, time(l)),
            None => return false,
        },
        _ => return false,
    };
    let Some(t) = t else {
        return false;
    };
    let (since, until) = match op {
        Operator::Eq => (Some(t), Some(t)),
        Operator::GtEq => (Some(t), None),
        Operator::LtEq => (None, Some(t)),
        // No time is after `i64::MAX` or before `i64::MIN`: then an empty window.
        Operator::Gt => match t.checked_add(1) {
            Some(since) => (Some(since), None),
            None => (Some(i64::MAX), Some(i64::MIN)),
        },
        Operator::Lt => match t.checked_sub(1) {
            Some(until) => (None, Some(until)),
            None => (Some(i64::MAX), Some(i64::MIN)),
        },
        _ => return false,
    };
    if let Some(since) = since {
        window.since = Some(window.since.map_or(since, |s| s.max(since)));
    }
    if let Some(until) = until {
        window.until = Some(window.until.map_or(until, |u| u.min(until)));
    }
    true
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
        let time = time_column_of(file_schema, &self.options)
            .and_then(|column| projection.iter().position(|&c| c == column));
        let file = file_column_of(file_schema)
            .and_then(|column| projection.iter().position(|&c| c == column));
        let reader = match self.window {
            Some(window) => self.options.reader().window(window),
            None => self.options.reader(),
        };
        let spec = ScanSpec {
            mode,
            projected: Arc::new(file_schema.project(&projection)?),
            projection,
            time,
            file,
            batch_size: self
                .batch_size
                .ok_or_else(|| exec_datafusion_err!("no batch size set for the cobsfile scan"))?,
            limit: base_config.limit,
            options: self.options.clone(),
            reader,
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
        write!(f, ", on_damage={}", self.options.on_damage)?;
        if let Some(window) = self.window {
            let bound = |t: Option<i64>| t.map_or(String::new(), |t| t.to_string());
            write!(
                f,
                ", time={}..={}",
                bound(window.since),
                bound(window.until)
            )?;
        }
        Ok(())
    }

    /// Filters on the event time column narrow the window of times the scan reads; they are
    /// all still applied above the scan (which returns exactly the window's records, so
    /// applying them again costs little).
    fn try_pushdown_filters(
        &self,
        filters: Vec<Arc<dyn PhysicalExpr>>,
        _config: &ConfigOptions,
    ) -> Result<FilterPushdownPropagation<Arc<dyn FileSource>>> {
        let unchanged = vec![PushedDown::No; filters.len()];
        let Some(column) = time_column_of(self.table_schema.file_schema(), &self.options) else {
            return Ok(FilterPushdownPropagation::with_parent_pushdown_result(
                unchanged,
            ));
        };
        let mut window = self.window.unwrap_or_default();
        let mut narrowed = false;
        for filter in &filters {
            narrowed |= narrow(&mut window, filter, column);
        }
        if !narrowed {
            return Ok(FilterPushdownPropagation::with_parent_pushdown_result(
                unchanged,
            ));
        }
        let source = self.clone().with_window(Some(window));
        Ok(
            FilterPushdownPropagation::with_parent_pushdown_result(unchanged)
                .with_updated_node(Arc::new(source)),
        )
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
            let bytes = FileBytes::load(&store, &file.object_meta)
                .await
                .map_err(|e| datafusion::common::DataFusionError::Execution(e.to_string()))?;
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
