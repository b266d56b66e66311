//! Codecs that carry plans with cobsfile scans from one process to another: logical plans from
//! a client to Ballista's scheduler ([`CobsfileLogicalCodec`]), physical plans from the
//! scheduler to its executors ([`CobsfilePhysicalCodec`]).
//!
//! Each wraps an inner codec that gets every node that is not a cobsfile one: DataFusion's
//! default codec, or Ballista's (which also carries its shuffle readers and writers).
//!
//! **Logical plans.** `datafusion-proto` writes a [`ListingTable`] itself and knows only its
//! own file formats: a cobsfile table fails with "unknown file format" before any codec is
//! asked. So a plan's cobsfile tables are first wrapped in a [`CobsfileTable`]
//! ([`wrap_cobsfile_tables`], or the analyzer rule [`WrapCobsfileTables`] in a client's session),
//! which `datafusion-proto` hands to the codec. Decoding gives back a plain [`ListingTable`] with
//! a [`CobsfileFormat`]: the table's paths (with their globs), file extension, partition
//! columns, sort orders, definition, its schema (whose metadata says how records are decoded)
//! and the [`CobsfileOptions`]. Not carried: a damage hook (a closure), constraints and column
//! defaults (the client's optimizer has used the constraints already; cobsfile tables take no
//! inserts).
//!
//! **Physical plans.** A `DataSourceExec` whose [`FileScanConfig`] reads with a
//! [`CobsfileSource`] travels as `datafusion-proto`'s own `FileScanExecConf` (file groups, byte
//! ranges, statistics, projection, limit, orderings, the table schema) and the source's
//! options; the executor rebuilds the source from the schema and the options.
//!
//! ```
//! use std::sync::Arc;
//! use cobsfile_datafusion::codec::{CobsfileLogicalCodec, CobsfilePhysicalCodec};
//! use datafusion_proto::physical_plan::DefaultPhysicalExtensionCodec;
//!
//! let logical = CobsfileLogicalCodec::default();
//! let physical = CobsfilePhysicalCodec::new(Arc::new(DefaultPhysicalExtensionCodec {}));
//! ```

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::{DataType, Schema, SchemaRef};
use datafusion::catalog::{ScanArgs, ScanResult, Session, TableProvider};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult};
use datafusion::common::{
    not_impl_err, plan_datafusion_err, Constraints, DFSchemaRef, DataFusionError, Result,
    Statistics, TableReference,
};
use datafusion::datasource::file_format::FileFormatFactory;
use datafusion::datasource::listing::{
    ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl,
};
use datafusion::datasource::physical_plan::FileScanConfig;
use datafusion::datasource::source::DataSourceExec;
use datafusion::datasource::{provider_as_source, source_as_provider};
use datafusion::execution::TaskContext;
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::{
    AggregateUDF, Expr, Extension, HigherOrderUDF, LogicalPlan, MergeIntoClause, ScalarUDF,
    TableProviderFilterPushDown, TableSource, TableType, WindowUDF,
};
use datafusion::optimizer::AnalyzerRule;
use datafusion::physical_expr_common::physical_expr::proto_decode::PhysicalExprDecodeCtx;
use datafusion::physical_expr_common::physical_expr::proto_encode::PhysicalExprEncodeCtx;
use datafusion::physical_plan::{ExecutionPlan, PhysicalExpr};
use datafusion_proto::logical_plan::from_proto::parse_sorts;
use datafusion_proto::logical_plan::to_proto::serialize_sorts;
use datafusion_proto::logical_plan::{DefaultLogicalExtensionCodec, LogicalExtensionCodec};
use datafusion_proto::physical_plan::from_proto::parse_protobuf_file_scan_config;
use datafusion_proto::physical_plan::to_proto::serialize_file_scan_config;
use datafusion_proto::physical_plan::{
    DefaultPhysicalExtensionCodec, PhysicalExtensionCodec, PhysicalPlanDecodeContext,
    PhysicalProtoConverterExtension,
};
use datafusion_proto::protobuf;
use prost::Message;

use crate::format::{CobsfileFormat, CobsfileFormatFactory};
use crate::options::CobsfileOptions;
use crate::source::CobsfileSource;

/// Written in every node the codecs encode, so bytes another codec wrote are refused by name.
const CODEC_TAG: &str = "cobsfile/1";

/// What the logical codec writes for a table provider or a file format.
#[derive(Clone, PartialEq, Message)]
struct LogicalNode {
    #[prost(string, tag = "1")]
    codec: String,
    #[prost(message, optional, tag = "2")]
    table: Option<TableNode>,
    #[prost(message, optional, tag = "3")]
    format: Option<FormatNode>,
    /// What the inner codec wrote for anything else.
    #[prost(bytes = "vec", optional, tag = "4")]
    inner: Option<Vec<u8>>,
}

/// A listing table of cobsfiles. Its schema travels beside it (the scan's schema).
#[derive(Clone, PartialEq, Message)]
struct TableNode {
    #[prost(message, repeated, tag = "1")]
    paths: Vec<TablePath>,
    #[prost(string, tag = "2")]
    file_extension: String,
    #[prost(message, repeated, tag = "3")]
    partition_cols: Vec<protobuf::PartitionColumn>,
    #[prost(message, repeated, tag = "4")]
    file_sort_order: Vec<protobuf::SortExprNodeCollection>,
    #[prost(map = "string, string", tag = "5")]
    options: HashMap<String, String>,
    #[prost(string, optional, tag = "6")]
    definition: Option<String>,
}

/// A table path: its URL and, for a path with a glob, the glob (which the URL does not hold).
#[derive(Clone, PartialEq, Message)]
struct TablePath {
    #[prost(string, tag = "1")]
    url: String,
    #[prost(string, optional, tag = "2")]
    glob: Option<String>,
}

/// The cobsfile file format (`COPY ... STORED AS cobsfile`, or a format factory).
#[derive(Clone, PartialEq, Message)]
struct FormatNode {
    #[prost(map = "string, string", tag = "1")]
    options: HashMap<String, String>,
}

/// What the physical codec writes for an execution plan node.
#[derive(Clone, PartialEq, Message)]
struct PhysicalNode {
    #[prost(string, tag = "1")]
    codec: String,
    #[prost(message, optional, tag = "2")]
    scan: Option<ScanNode>,
    /// What the inner codec wrote for any other node.
    #[prost(bytes = "vec", optional, tag = "3")]
    inner: Option<Vec<u8>>,
}

/// A cobsfile scan: the shared file scan configuration and the source's options.
#[derive(Clone, PartialEq, Message)]
struct ScanNode {
    #[prost(message, optional, tag = "1")]
    base_conf: Option<protobuf::FileScanExecConf>,
    #[prost(map = "string, string", tag = "2")]
    options: HashMap<String, String>,
    /// The window of event times the scan reads (`CobsfileSource::window`), if it has one.
    #[prost(message, optional, tag = "3")]
    window: Option<WindowNode>,
}

/// A window of event times: nanoseconds since the Unix epoch, each bound inclusive.
#[derive(Clone, PartialEq, Message)]
struct WindowNode {
    #[prost(sint64, optional, tag = "1")]
    since: Option<i64>,
    #[prost(sint64, optional, tag = "2")]
    until: Option<i64>,
}

fn encode_message(message: &impl Message, buf: &mut Vec<u8>) -> Result<()> {
    message
        .encode(buf)
        .map_err(|e| DataFusionError::Internal(format!("cobsfile codec: cannot encode: {e}")))
}

/// Decodes what the cobsfile codecs wrote, refusing other bytes with a message that says why.
fn decode_message<M: Message + Default>(buf: &[u8], codec: impl Fn(&M) -> &str) -> Result<M> {
    let refuse = || {
        plan_datafusion_err!(
            "cobsfile codec: a plan node of {} bytes that no cobsfile codec wrote; the client, \
             the scheduler and every executor must all use the cobsfile codecs",
            buf.len()
        )
    };
    let message = M::decode(buf).map_err(|_| refuse())?;
    if codec(&message) != CODEC_TAG {
        return Err(refuse());
    }
    Ok(message)
}

/// The cobsfile format of a listing table, if it has one.
fn cobsfile_format(table: &ListingTable) -> Option<&CobsfileFormat> {
    table.options().format.downcast_ref::<CobsfileFormat>()
}

/// A [`ListingTable`] of cobsfiles that `datafusion-proto` hands to the logical codec (it writes
/// listing tables itself, and knows no cobsfile format). It reads exactly as the table it wraps.
///
/// Made by [`wrap_cobsfile_tables`] and [`WrapCobsfileTables`].
#[derive(Debug, Clone)]
pub struct CobsfileTable {
    table: Arc<ListingTable>,
}

impl CobsfileTable {
    /// Wraps `table`; an error unless it is a [`ListingTable`] with a [`CobsfileFormat`].
    pub fn try_new(table: Arc<dyn TableProvider>) -> Result<Self> {
        let any: Arc<dyn std::any::Any + Send + Sync> = table;
        let table = any.downcast::<ListingTable>().map_err(|_| {
            plan_datafusion_err!("a CobsfileTable wraps a listing table, not another provider")
        })?;
        if cobsfile_format(&table).is_none() {
            return Err(plan_datafusion_err!(
                "a CobsfileTable wraps a listing table of cobsfiles, not of format {:?}",
                table.options().format
            ));
        }
        Ok(CobsfileTable { table })
    }

    /// The listing table it wraps.
    pub fn listing_table(&self) -> &Arc<ListingTable> {
        &self.table
    }
}

#[async_trait]
impl TableProvider for CobsfileTable {
    fn schema(&self) -> SchemaRef {
        self.table.schema()
    }

    fn constraints(&self) -> Option<&Constraints> {
        self.table.constraints()
    }

    fn table_type(&self) -> TableType {
        self.table.table_type()
    }

    fn get_table_definition(&self) -> Option<&str> {
        self.table.get_table_definition()
    }

    fn get_logical_plan(&'_ self) -> Option<Cow<'_, LogicalPlan>> {
        self.table.get_logical_plan()
    }

    fn get_column_default(&self, column: &str) -> Option<&Expr> {
        self.table.get_column_default(column)
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        self.table.scan(state, projection, filters, limit).await
    }

    async fn scan_with_args<'a>(
        &self,
        state: &dyn Session,
        args: ScanArgs<'a>,
    ) -> Result<ScanResult> {
        self.table.scan_with_args(state, args).await
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        self.table.supports_filters_pushdown(filters)
    }

    fn statistics(&self) -> Option<Statistics> {
        self.table.statistics()
    }

    async fn insert_into(
        &self,
        state: &dyn Session,
        input: Arc<dyn ExecutionPlan>,
        insert_op: InsertOp,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        self.table.insert_into(state, input, insert_op).await
    }

    async fn delete_from(
        &self,
        state: &dyn Session,
        filters: Vec<Expr>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        self.table.delete_from(state, filters).await
    }

    async fn update(
        &self,
        state: &dyn Session,
        assignments: Vec<(String, Expr)>,
        filters: Vec<Expr>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        self.table.update(state, assignments, filters).await
    }

    async fn truncate(&self, state: &dyn Session) -> Result<Arc<dyn ExecutionPlan>> {
        self.table.truncate(state).await
    }

    async fn merge_into(
        &self,
        state: &dyn Session,
        source: Arc<dyn ExecutionPlan>,
        merge_schema: DFSchemaRef,
        on: Expr,
        clauses: Vec<MergeIntoClause>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        self.table
            .merge_into(state, source, merge_schema, on, clauses)
            .await
    }
}

/// The source wrapped in a [`CobsfileTable`] if it is a listing table of cobsfiles.
fn wrap_source(source: &Arc<dyn TableSource>) -> Result<Option<Arc<dyn TableSource>>> {
    let Ok(provider) = source_as_provider(source) else {
        return Ok(None);
    };
    let is_cobsfile = provider
        .downcast_ref::<ListingTable>()
        .is_some_and(|table| cobsfile_format(table).is_some());
    if !is_cobsfile {
        return Ok(None);
    }
    Ok(Some(provider_as_source(Arc::new(CobsfileTable::try_new(
        provider,
    )?))))
}

/// `plan` with the source of every scan of a [`ListingTable`] of cobsfiles (subqueries too)
/// wrapped in a [`CobsfileTable`], so that [`CobsfileLogicalCodec`] can serialize it. The plan
/// reads the same.
pub fn wrap_cobsfile_tables(plan: LogicalPlan) -> Result<LogicalPlan> {
    plan.transform_up_with_subqueries(|node| match node {
        LogicalPlan::TableScan(mut scan) => match wrap_source(&scan.source)? {
            Some(source) => {
                scan.source = source;
                Ok(Transformed::yes(LogicalPlan::TableScan(scan)))
            }
            None => Ok(Transformed::no(LogicalPlan::TableScan(scan))),
        },
        other => Ok(Transformed::no(other)),
    })
    .data()
}

/// An analyzer rule doing [`wrap_cobsfile_tables`]: in the session of a client whose plans are
/// serialized (a Ballista client), so that its cobsfile tables reach the scheduler.
#[derive(Debug, Default, Clone, Copy)]
pub struct WrapCobsfileTables;

impl AnalyzerRule for WrapCobsfileTables {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        wrap_cobsfile_tables(plan)
    }

    fn name(&self) -> &str {
        "wrap_cobsfile_tables"
    }
}

/// Serializes logical plans whose scans read cobsfiles (wrapped in [`CobsfileTable`]s, see
/// [`wrap_cobsfile_tables`]), and the cobsfile format factory; everything else goes to the inner
/// codec.
#[derive(Debug, Clone)]
pub struct CobsfileLogicalCodec {
    inner: Arc<dyn LogicalExtensionCodec>,
}

impl Default for CobsfileLogicalCodec {
    /// Wraps DataFusion's default codec.
    fn default() -> Self {
        Self::new(Arc::new(DefaultLogicalExtensionCodec {}))
    }
}

impl CobsfileLogicalCodec {
    /// The codec, giving what is not cobsfile to `inner` (for Ballista, its
    /// `BallistaLogicalExtensionCodec`).
    pub fn new(inner: Arc<dyn LogicalExtensionCodec>) -> Self {
        CobsfileLogicalCodec { inner }
    }

    /// The codec anything not cobsfile goes to.
    pub fn inner(&self) -> &Arc<dyn LogicalExtensionCodec> {
        &self.inner
    }

    fn encode_table(&self, table: &ListingTable, format: &CobsfileFormat) -> Result<TableNode> {
        let options = table.options();
        if options.output_partitioning.is_some() {
            return not_impl_err!(
                "cobsfile codec: a cobsfile table with a declared output partitioning cannot \
                 be serialized"
            );
        }
        let paths = table
            .table_paths()
            .iter()
            .map(|url| TablePath {
                url: url.as_str().to_string(),
                glob: url
                    .get_glob()
                    .as_ref()
                    .map(|glob| glob.as_str().to_string()),
            })
            .collect();
        let partition_cols = options
            .table_partition_cols
            .iter()
            .map(|(name, data_type)| {
                let arrow_type = protobuf::ArrowType::try_from(data_type).map_err(|e| {
                    plan_datafusion_err!(
                        "cobsfile codec: partition column '{name}' of type {data_type}: {e}"
                    )
                })?;
                Ok(protobuf::PartitionColumn {
                    name: name.clone(),
                    arrow_type: Some(arrow_type),
                })
            })
            .collect::<Result<_>>()?;
        let file_sort_order = options
            .file_sort_order
            .iter()
            .map(|order| {
                Ok(protobuf::SortExprNodeCollection {
                    sort_expr_nodes: serialize_sorts(order, self)?,
                })
            })
            .collect::<Result<_>>()?;
        Ok(TableNode {
            paths,
            file_extension: options.file_extension.clone(),
            partition_cols,
            file_sort_order,
            options: format.options().to_map(),
            definition: table.get_table_definition().map(str::to_string),
        })
    }

    fn decode_table(
        &self,
        node: &TableNode,
        schema: SchemaRef,
        ctx: &TaskContext,
    ) -> Result<Arc<dyn TableProvider>> {
        let options = CobsfileOptions::new().with_map(&node.options)?;
        let partition_cols = node
            .partition_cols
            .iter()
            .map(|col| {
                let arrow_type = col.arrow_type.as_ref().ok_or_else(|| {
                    plan_datafusion_err!(
                        "cobsfile codec: partition column '{}' has no type",
                        col.name
                    )
                })?;
                let data_type = DataType::try_from(arrow_type).map_err(|e| {
                    plan_datafusion_err!("cobsfile codec: partition column '{}': {e}", col.name)
                })?;
                Ok((col.name.clone(), data_type))
            })
            .collect::<Result<Vec<_>>>()?;
        // The scan's schema is the table's: the file schema, then the partition columns.
        let file_schema = Schema::new(
            schema
                .fields()
                .iter()
                .filter(|field| !partition_cols.iter().any(|(name, _)| name == field.name()))
                .cloned()
                .collect::<Vec<_>>(),
        )
        .with_metadata(schema.metadata().clone());
        let file_sort_order = node
            .file_sort_order
            .iter()
            .map(|order| Ok(parse_sorts(&order.sort_expr_nodes, ctx, self)?))
            .collect::<Result<Vec<_>>>()?;
        let urls = node
            .paths
            .iter()
            .map(|path| {
                let url = ListingTableUrl::parse(&path.url)?;
                match &path.glob {
                    Some(glob) => url.with_glob(glob),
                    None => Ok(url),
                }
            })
            .collect::<Result<Vec<_>>>()?;
        if urls.is_empty() {
            return Err(plan_datafusion_err!(
                "cobsfile codec: a cobsfile table without any path"
            ));
        }
        let listing = ListingOptions::new(Arc::new(CobsfileFormat::new(options)))
            .with_file_extension(node.file_extension.clone())
            .with_table_partition_cols(partition_cols)
            .with_file_sort_order(file_sort_order);
        let config = ListingTableConfig::new_with_multi_paths(urls)
            .with_listing_options(listing)
            .with_schema(Arc::new(file_schema));
        let table = ListingTable::try_new(config)?
            .with_cache(ctx.runtime_env().cache_manager.get_file_statistic_cache())
            .with_definition(node.definition.clone());
        Ok(Arc::new(table))
    }

    fn write(&self, buf: &mut Vec<u8>, node: LogicalNode) -> Result<()> {
        encode_message(
            &LogicalNode {
                codec: CODEC_TAG.to_string(),
                ..node
            },
            buf,
        )
    }

    fn read(buf: &[u8]) -> Result<LogicalNode> {
        decode_message(buf, |node: &LogicalNode| &node.codec)
    }
}

impl LogicalExtensionCodec for CobsfileLogicalCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[LogicalPlan],
        ctx: &TaskContext,
    ) -> Result<Extension> {
        self.inner.try_decode(buf, inputs, ctx)
    }

    fn try_encode(&self, node: &Extension, buf: &mut Vec<u8>) -> Result<()> {
        self.inner.try_encode(node, buf)
    }

    fn try_decode_table_provider(
        &self,
        buf: &[u8],
        table_ref: &TableReference,
        schema: SchemaRef,
        ctx: &TaskContext,
    ) -> Result<Arc<dyn TableProvider>> {
        let node = Self::read(buf)?;
        match (node.table, node.inner) {
            (Some(table), _) => self.decode_table(&table, schema, ctx),
            (None, Some(inner)) => self
                .inner
                .try_decode_table_provider(&inner, table_ref, schema, ctx),
            (None, None) => Err(plan_datafusion_err!(
                "cobsfile codec: table '{table_ref}' was written without a table"
            )),
        }
    }

    fn try_encode_table_provider(
        &self,
        table_ref: &TableReference,
        node: Arc<dyn TableProvider>,
        buf: &mut Vec<u8>,
    ) -> Result<()> {
        let table = match node.downcast_ref::<CobsfileTable>() {
            Some(wrapped) => Some(wrapped.listing_table().as_ref()),
            None => node.downcast_ref::<ListingTable>(),
        };
        if let Some((table, format)) =
            table.and_then(|table| cobsfile_format(table).map(|format| (table, format)))
        {
            let table = self.encode_table(table, format)?;
            return self.write(
                buf,
                LogicalNode {
                    table: Some(table),
                    ..Default::default()
                },
            );
        }
        let mut inner = Vec::new();
        self.inner
            .try_encode_table_provider(table_ref, node, &mut inner)?;
        self.write(
            buf,
            LogicalNode {
                inner: Some(inner),
                ..Default::default()
            },
        )
    }

    fn try_decode_file_format(
        &self,
        buf: &[u8],
        ctx: &TaskContext,
    ) -> Result<Arc<dyn FileFormatFactory>> {
        let node = Self::read(buf)?;
        match (node.format, node.inner) {
            (Some(format), _) => {
                let options = CobsfileOptions::new().with_map(&format.options)?;
                Ok(Arc::new(CobsfileFormatFactory::with_options(options)))
            }
            (None, Some(inner)) => self.inner.try_decode_file_format(&inner, ctx),
            (None, None) => Err(plan_datafusion_err!(
                "cobsfile codec: a file format was written without a format"
            )),
        }
    }

    fn try_encode_file_format(
        &self,
        buf: &mut Vec<u8>,
        node: Arc<dyn FileFormatFactory>,
    ) -> Result<()> {
        if node.downcast_ref::<CobsfileFormatFactory>().is_some() {
            // The factory's options are those of the format it makes by default.
            let format = node.default();
            let format = format.downcast_ref::<CobsfileFormat>().ok_or_else(|| {
                DataFusionError::Internal(
                    "cobsfile codec: the cobsfile format factory made another format".into(),
                )
            })?;
            return self.write(
                buf,
                LogicalNode {
                    format: Some(FormatNode {
                        options: format.options().to_map(),
                    }),
                    ..Default::default()
                },
            );
        }
        let mut inner = Vec::new();
        self.inner.try_encode_file_format(&mut inner, node)?;
        self.write(
            buf,
            LogicalNode {
                inner: Some(inner),
                ..Default::default()
            },
        )
    }

    // Functions are the inner codec's, bytes as they are: an empty payload means "by name".

    fn try_decode_udf(&self, name: &str, buf: &[u8]) -> Result<Arc<ScalarUDF>> {
        self.inner.try_decode_udf(name, buf)
    }

    fn try_encode_udf(&self, node: &ScalarUDF, buf: &mut Vec<u8>) -> Result<()> {
        self.inner.try_encode_udf(node, buf)
    }

    fn try_decode_higher_order_function(
        &self,
        name: &str,
        buf: &[u8],
    ) -> Result<Arc<HigherOrderUDF>> {
        self.inner.try_decode_higher_order_function(name, buf)
    }

    fn try_encode_higher_order_function(
        &self,
        node: &HigherOrderUDF,
        buf: &mut Vec<u8>,
    ) -> Result<()> {
        self.inner.try_encode_higher_order_function(node, buf)
    }

    fn try_decode_udaf(&self, name: &str, buf: &[u8]) -> Result<Arc<AggregateUDF>> {
        self.inner.try_decode_udaf(name, buf)
    }

    fn try_encode_udaf(&self, node: &AggregateUDF, buf: &mut Vec<u8>) -> Result<()> {
        self.inner.try_encode_udaf(node, buf)
    }

    fn try_decode_udwf(&self, name: &str, buf: &[u8]) -> Result<Arc<WindowUDF>> {
        self.inner.try_decode_udwf(name, buf)
    }

    fn try_encode_udwf(&self, node: &WindowUDF, buf: &mut Vec<u8>) -> Result<()> {
        self.inner.try_encode_udwf(node, buf)
    }
}

/// Serializes `DataSourceExec`s that read cobsfiles; every other node goes to the inner codec.
#[derive(Debug, Clone)]
pub struct CobsfilePhysicalCodec {
    inner: Arc<dyn PhysicalExtensionCodec>,
}

impl Default for CobsfilePhysicalCodec {
    /// Wraps DataFusion's default codec.
    fn default() -> Self {
        Self::new(Arc::new(DefaultPhysicalExtensionCodec {}))
    }
}

impl CobsfilePhysicalCodec {
    /// The codec, giving what is not cobsfile to `inner` (for Ballista, its
    /// `BallistaPhysicalExtensionCodec`, which carries its shuffle readers and writers).
    pub fn new(inner: Arc<dyn PhysicalExtensionCodec>) -> Self {
        CobsfilePhysicalCodec { inner }
    }

    /// The codec anything not cobsfile goes to.
    pub fn inner(&self) -> &Arc<dyn PhysicalExtensionCodec> {
        &self.inner
    }

    fn write(&self, buf: &mut Vec<u8>, node: PhysicalNode) -> Result<()> {
        encode_message(
            &PhysicalNode {
                codec: CODEC_TAG.to_string(),
                ..node
            },
            buf,
        )
    }
}

impl PhysicalExtensionCodec for CobsfilePhysicalCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[Arc<dyn ExecutionPlan>],
        ctx: &TaskContext,
        proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let node = decode_message(buf, |node: &PhysicalNode| &node.codec)?;
        let scan = match (node.scan, node.inner) {
            (Some(scan), _) => scan,
            (None, Some(inner)) => {
                return self.inner.try_decode(&inner, inputs, ctx, proto_converter)
            }
            (None, None) => {
                return Err(plan_datafusion_err!(
                    "cobsfile codec: a plan node was written without a plan"
                ))
            }
        };
        let base_conf = scan.base_conf.as_ref().ok_or_else(|| {
            plan_datafusion_err!("cobsfile codec: a cobsfile scan without its file scan config")
        })?;
        let options = CobsfileOptions::new().with_map(&scan.options)?;
        let table_schema = FileScanConfig::parse_table_schema_from_proto(base_conf)?;
        let window = (scan.window).map(|w| cobsfile::Window::new(w.since, w.until));
        let source = Arc::new(CobsfileSource::new(table_schema, options).with_window(window));
        let decode_ctx = PhysicalPlanDecodeContext::new(ctx, self);
        let config =
            parse_protobuf_file_scan_config(base_conf, &decode_ctx, proto_converter, source)?;
        Ok(DataSourceExec::from_data_source(config))
    }

    fn try_encode(
        &self,
        node: Arc<dyn ExecutionPlan>,
        buf: &mut Vec<u8>,
        proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<()> {
        let scan = node
            .downcast_ref::<DataSourceExec>()
            .and_then(|exec| exec.downcast_to_file_source::<CobsfileSource>());
        if let Some((config, source)) = scan {
            let base_conf = serialize_file_scan_config(config, self, proto_converter)?;
            return self.write(
                buf,
                PhysicalNode {
                    scan: Some(ScanNode {
                        base_conf: Some(base_conf),
                        options: source.options().to_map(),
                        window: source.window().map(|w| WindowNode {
                            since: w.since,
                            until: w.until,
                        }),
                    }),
                    ..Default::default()
                },
            );
        }
        let mut inner = Vec::new();
        self.inner.try_encode(node, &mut inner, proto_converter)?;
        self.write(
            buf,
            PhysicalNode {
                inner: Some(inner),
                ..Default::default()
            },
        )
    }

    // Functions and expressions are the inner codec's, bytes as they are: an empty payload
    // means "by name".

    fn try_decode_udf(&self, name: &str, buf: &[u8]) -> Result<Arc<ScalarUDF>> {
        self.inner.try_decode_udf(name, buf)
    }

    fn try_encode_udf(&self, node: &ScalarUDF, buf: &mut Vec<u8>) -> Result<()> {
        self.inner.try_encode_udf(node, buf)
    }

    fn try_decode_higher_order_function(
        &self,
        name: &str,
        buf: &[u8],
    ) -> Result<Arc<HigherOrderUDF>> {
        self.inner.try_decode_higher_order_function(name, buf)
    }

    fn try_encode_higher_order_function(
        &self,
        node: &HigherOrderUDF,
        buf: &mut Vec<u8>,
    ) -> Result<()> {
        self.inner.try_encode_higher_order_function(node, buf)
    }

    fn try_decode_expr(
        &self,
        buf: &[u8],
        inputs: &[Arc<dyn PhysicalExpr>],
        ctx: &PhysicalExprDecodeCtx<'_>,
    ) -> Result<Arc<dyn PhysicalExpr>> {
        self.inner.try_decode_expr(buf, inputs, ctx)
    }

    fn try_encode_expr(
        &self,
        node: &Arc<dyn PhysicalExpr>,
        buf: &mut Vec<u8>,
        ctx: &PhysicalExprEncodeCtx<'_>,
    ) -> Result<()> {
        self.inner.try_encode_expr(node, buf, ctx)
    }

    fn try_decode_udaf(&self, name: &str, buf: &[u8]) -> Result<Arc<AggregateUDF>> {
        self.inner.try_decode_udaf(name, buf)
    }

    fn try_encode_udaf(&self, node: &AggregateUDF, buf: &mut Vec<u8>) -> Result<()> {
        self.inner.try_encode_udaf(node, buf)
    }

    fn try_decode_udwf(&self, name: &str, buf: &[u8]) -> Result<Arc<WindowUDF>> {
        self.inner.try_decode_udwf(name, buf)
    }

    fn try_encode_udwf(&self, node: &WindowUDF, buf: &mut Vec<u8>) -> Result<()> {
        self.inner.try_encode_udwf(node, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CobsfileContext, RecordFormat};
    use cobsfile::avro::{json::from_json_str, AvroWriter, WriterSchema};
    use cobsfile::{Compression, WriterBuilder};
    use datafusion::arrow::array::RecordBatch;
    use datafusion::arrow::util::pretty::pretty_format_batches;
    use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
    use datafusion::physical_plan::{collect, displayable};
    use datafusion::prelude::{SessionConfig, SessionContext};
    use datafusion_proto::bytes::{
        logical_plan_from_bytes_with_extension_codec, logical_plan_to_bytes_with_extension_codec,
        physical_plan_from_bytes_with_extension_codec, physical_plan_to_bytes_with_extension_codec,
    };
    use datafusion_proto::physical_plan::DefaultPhysicalProtoConverter;

    const EVENTS: &str = include_str!("../../samples/events.jsonl");
    const SCHEMA: &str = include_str!("../../samples/events.avsc");
    const GROUP_BY: &str = "SELECT service, count(*) AS n FROM t GROUP BY service ORDER BY service";
    const AVRO_GROUP_BY: &str = "SELECT service, CAST(level AS VARCHAR) AS level, count(*) AS n, \
        round(avg(latency_ms), 6) AS latency FROM t GROUP BY 1, 2 ORDER BY 1, 2";

    /// Three cobsfiles of the sample events as JSON records (small zstd blocks) in `dir`.
    fn json_files(dir: &std::path::Path) {
        let lines: Vec<&str> = EVENTS.lines().collect();
        for (i, part) in lines.chunks(lines.len().div_ceil(3)).enumerate() {
            let mut writer = WriterBuilder::new()
                .block_target(4096)
                .compression(Compression::Zstd { level: 3 })
                .build(Vec::new())
                .unwrap();
            for line in part {
                writer.write_record(line.as_bytes()).unwrap();
            }
            std::fs::write(dir.join(format!("part-{i}.cobs")), writer.finish().unwrap()).unwrap();
        }
    }

    /// One cobsfile of the sample events as typed (Avro) records in `dir`.
    fn avro_file(dir: &std::path::Path) {
        let schema = WriterSchema::parse(SCHEMA).unwrap();
        let writer = WriterBuilder::new()
            .block_target(4096)
            .build(Vec::new())
            .unwrap();
        let mut writer = AvroWriter::new(writer, schema.clone()).unwrap();
        for line in EVENTS.lines() {
            writer
                .write_value(&from_json_str(line, &schema).unwrap())
                .unwrap();
        }
        std::fs::write(dir.join("events.cobs"), writer.finish().unwrap()).unwrap();
    }

    /// A session whose scans cut the files into byte ranges.
    fn context() -> SessionContext {
        let config = SessionConfig::new()
            .with_target_partitions(4)
            .with_repartition_file_min_size(1)
            .with_batch_size(100);
        SessionContext::new_with_config(config)
    }

    fn pretty(batches: &[RecordBatch]) -> String {
        pretty_format_batches(batches).unwrap().to_string()
    }

    fn display(plan: &Arc<dyn ExecutionPlan>) -> String {
        displayable(plan.as_ref()).indent(true).to_string()
    }

    /// The options of every cobsfile scan in `plan`.
    fn scan_options(plan: &Arc<dyn ExecutionPlan>) -> Vec<CobsfileOptions> {
        let mut found = Vec::new();
        plan.apply(|node| {
            if let Some((_, source)) = node
                .downcast_ref::<DataSourceExec>()
                .and_then(|exec| exec.downcast_to_file_source::<CobsfileSource>())
            {
                found.push(source.options().clone());
            }
            Ok(TreeNodeRecursion::Continue)
        })
        .unwrap();
        found
    }

    /// `sql`'s physical plan through the physical codec, decoded in a session that knows
    /// neither the table nor the format: the same plan, read the same.
    async fn physical_round_trip(ctx: &SessionContext, sql: &str) -> Arc<dyn ExecutionPlan> {
        let plan = ctx
            .sql(sql)
            .await
            .unwrap()
            .create_physical_plan()
            .await
            .unwrap();
        let codec = CobsfilePhysicalCodec::default();
        let bytes = physical_plan_to_bytes_with_extension_codec(plan.clone(), &codec).unwrap();
        let fresh = SessionContext::new();
        let back = physical_plan_from_bytes_with_extension_codec(&bytes, &fresh.task_ctx(), &codec)
            .unwrap();
        // File groups, byte ranges, projection, limit and the source's options all show.
        assert_eq!(display(&back), display(&plan));
        assert!(
            display(&plan).contains("file_type=cobsfile"),
            "{}",
            display(&plan)
        );
        assert_eq!(scan_options(&back), scan_options(&plan));
        assert!(!scan_options(&back).is_empty());
        back
    }

    #[tokio::test]
    async fn a_physical_plan_round_trips_and_reads_the_same() {
        let dir = tempfile::tempdir().unwrap();
        json_files(dir.path());
        let ctx = context();
        let options = CobsfileOptions::new().on_damage(crate::OnDamage::Fail);
        ctx.register_cobsfile("t", dir.path().to_str().unwrap(), options.clone())
            .await
            .unwrap();
        let back = physical_round_trip(&ctx, GROUP_BY).await;
        assert!(
            display(&back).contains(".cobs:0.."),
            "no byte ranges: {}",
            display(&back)
        );
        assert!(scan_options(&back).iter().all(|o| *o == options));
        let expected = ctx.sql(GROUP_BY).await.unwrap().collect().await.unwrap();
        let got = collect(back, SessionContext::new().task_ctx())
            .await
            .unwrap();
        assert_eq!(pretty(&got), pretty(&expected));
        assert!(pretty(&got).contains("| billing"), "{}", pretty(&got));

        // A projection and a limit pushed into the scan travel too.
        let back = physical_round_trip(&ctx, "SELECT host, latency_ms FROM t LIMIT 7").await;
        let got = collect(back, SessionContext::new().task_ctx())
            .await
            .unwrap();
        assert_eq!(got.iter().map(|b| b.num_rows()).sum::<usize>(), 7);
        assert_eq!(got[0].schema().fields().len(), 2);
    }

    #[tokio::test]
    async fn a_physical_plan_of_typed_records_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        avro_file(dir.path());
        let ctx = context();
        let options = CobsfileOptions::new()
            .records(RecordFormat::Avro)
            .reader_schema(SCHEMA);
        ctx.register_cobsfile("t", dir.path().to_str().unwrap(), options.clone())
            .await
            .unwrap();
        let back = physical_round_trip(&ctx, AVRO_GROUP_BY).await;
        assert!(scan_options(&back).iter().all(|o| *o == options));
        let expected = ctx
            .sql(AVRO_GROUP_BY)
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let got = collect(back, SessionContext::new().task_ctx())
            .await
            .unwrap();
        assert_eq!(pretty(&got), pretty(&expected));
    }

    #[tokio::test]
    async fn a_logical_plan_round_trips_and_reads_the_same() {
        let dir = tempfile::tempdir().unwrap();
        json_files(dir.path());
        let ctx = context();
        let options = CobsfileOptions::new().schema_infer_max_records(500);
        // A glob, which the table's URL alone does not hold.
        let glob = format!("{}/part-*.cobs", dir.path().to_str().unwrap());
        ctx.register_cobsfile("t", &glob, options.clone())
            .await
            .unwrap();
        let codec = CobsfileLogicalCodec::default();
        let plan = ctx.sql(GROUP_BY).await.unwrap().logical_plan().clone();

        // datafusion-proto refuses a listing table of a format it does not know...
        let e = logical_plan_to_bytes_with_extension_codec(&plan, &codec).unwrap_err();
        assert!(e.to_string().contains("unknown file format"), "{e}");
        // ... and hands the wrapped one to the codec.
        let wrapped = wrap_cobsfile_tables(plan).unwrap();
        let bytes = logical_plan_to_bytes_with_extension_codec(&wrapped, &codec).unwrap();
        let fresh = SessionContext::new();
        let back = logical_plan_from_bytes_with_extension_codec(&bytes, &fresh.task_ctx(), &codec)
            .unwrap();

        // The decoded scan reads a plain listing table of cobsfiles, with the options.
        let mut tables = Vec::new();
        back.apply(|node| {
            if let LogicalPlan::TableScan(scan) = node {
                tables.push(source_as_provider(&scan.source).unwrap());
            }
            Ok(TreeNodeRecursion::Continue)
        })
        .unwrap();
        assert_eq!(tables.len(), 1);
        let table = tables[0].downcast_ref::<ListingTable>().unwrap();
        assert_eq!(cobsfile_format(table).unwrap().options(), &options);
        assert_eq!(
            table.table_paths()[0].get_glob().as_ref().unwrap().as_str(),
            "part-*.cobs"
        );
        assert_eq!(
            table.schema().metadata(),
            ctx.table_provider("t").await.unwrap().schema().metadata()
        );

        let expected = ctx.sql(GROUP_BY).await.unwrap().collect().await.unwrap();
        let got = fresh
            .execute_logical_plan(back)
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        assert_eq!(pretty(&got), pretty(&expected));
    }

    #[tokio::test]
    async fn the_analyzer_rule_wraps_what_a_session_optimizes() {
        let dir = tempfile::tempdir().unwrap();
        json_files(dir.path());
        let ctx = context();
        ctx.register_cobsfile("t", dir.path().to_str().unwrap(), CobsfileOptions::new())
            .await
            .unwrap();
        ctx.add_analyzer_rule(Arc::new(WrapCobsfileTables));
        let sql = "SELECT a.service, count(*) AS n FROM t a JOIN t b \
            ON a.request_id = b.request_id AND a.host = b.host \
            WHERE a.latency_ms > 10 GROUP BY a.service ORDER BY a.service";
        let df = ctx.sql(sql).await.unwrap();
        let optimized = ctx.state().optimize(df.logical_plan()).unwrap();
        let codec = CobsfileLogicalCodec::default();
        let bytes = logical_plan_to_bytes_with_extension_codec(&optimized, &codec).unwrap();
        let fresh = SessionContext::new();
        let back = logical_plan_from_bytes_with_extension_codec(&bytes, &fresh.task_ctx(), &codec)
            .unwrap();
        let expected = df.collect().await.unwrap();
        let got = fresh
            .execute_logical_plan(back)
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        assert_eq!(pretty(&got), pretty(&expected));
    }

    #[tokio::test]
    async fn a_window_of_event_times_travels_with_its_scan() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = WriterBuilder::new()
            .block_target(2048)
            .build(Vec::new())
            .unwrap();
        for (i, line) in EVENTS.lines().enumerate() {
            writer
                .write_record_at(line.as_bytes(), i as i64 * 1_000_000_000)
                .unwrap();
        }
        std::fs::write(dir.path().join("t.cobs"), writer.finish().unwrap()).unwrap();
        let ctx = context();
        ctx.register_cobsfile("t", dir.path().to_str().unwrap(), CobsfileOptions::new())
            .await
            .unwrap();
        let sql = "SELECT count(*) AS n FROM t \
            WHERE time BETWEEN '1970-01-01T00:01:40Z' AND '1970-01-01T00:03:19Z'";
        let back = physical_round_trip(&ctx, sql).await;
        // The display, which the round trip keeps, shows the window.
        assert!(
            display(&back).contains(", time=100000000000..=199000000000"),
            "{}",
            display(&back)
        );
        let got = collect(back, SessionContext::new().task_ctx())
            .await
            .unwrap();
        assert!(pretty(&got).contains("| 100 |"), "{}", pretty(&got));
    }

    #[tokio::test]
    async fn the_format_factory_round_trips() {
        let codec = CobsfileLogicalCodec::default();
        let options = CobsfileOptions::new().records(RecordFormat::Raw);
        let mut buf = Vec::new();
        codec
            .try_encode_file_format(
                &mut buf,
                Arc::new(CobsfileFormatFactory::with_options(options.clone())),
            )
            .unwrap();
        let back = codec
            .try_decode_file_format(&buf, &SessionContext::new().task_ctx())
            .unwrap();
        let format = back.default();
        assert_eq!(
            format.downcast_ref::<CobsfileFormat>().unwrap().options(),
            &options
        );
    }

    #[test]
    fn bytes_another_codec_wrote_are_refused_by_name() {
        let ctx = SessionContext::new().task_ctx();
        let e = CobsfilePhysicalCodec::default()
            .try_decode(&[0x08, 0x01], &[], &ctx, &DefaultPhysicalProtoConverter {})
            .unwrap_err();
        assert!(e.to_string().contains("no cobsfile codec wrote"), "{e}");
        let e = CobsfileLogicalCodec::default()
            .try_decode_file_format(b"garbage", &ctx)
            .unwrap_err();
        assert!(e.to_string().contains("no cobsfile codec wrote"), "{e}");
    }
}
