//! The cobsfile `FileFormat`: schema inference, statistics from index blocks, scan plans; and
//! its factory, for `CREATE EXTERNAL TABLE ... STORED AS COBSFILE`.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::Session;
use datafusion::common::runtime::SpawnedTask;
use datafusion::common::stats::Precision;
use datafusion::common::{DataFusionError, GetExt, Result, Statistics};
use datafusion::datasource::file_format::file_compression_type::FileCompressionType;
use datafusion::datasource::file_format::{FileFormat, FileFormatFactory};
use datafusion::datasource::physical_plan::{FileScanConfig, FileSource};
use datafusion::datasource::source::DataSourceExec;
use datafusion::datasource::table_schema::TableSchema;
use datafusion::physical_plan::ExecutionPlan;
use object_store::{ObjectMeta, ObjectStore};

use crate::options::CobsfileOptions;
use crate::scan::Whole;
use crate::schema::infer;
use crate::source::{CobsfileSource, DamageHook};
use crate::store::FileBytes;

/// The name `STORED AS` takes, and the factory's key: `cobsfile`.
pub const FORMAT_NAME: &str = "cobsfile";

/// cobsfiles as a DataFusion file format.
#[derive(Clone, Default)]
pub struct CobsfileFormat {
    options: CobsfileOptions,
    hook: Option<DamageHook>,
}

impl fmt::Debug for CobsfileFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CobsfileFormat")
            .field("options", &self.options)
            .finish()
    }
}

impl CobsfileFormat {
    /// The format with `options`.
    pub fn new(options: CobsfileOptions) -> Self {
        CobsfileFormat {
            options,
            hook: None,
        }
    }

    /// Also reports every damaged range and skipped record its scans meet to `hook`.
    pub fn with_damage_hook(mut self, hook: DamageHook) -> Self {
        self.hook = Some(hook);
        self
    }

    /// The format's options.
    pub fn options(&self) -> &CobsfileOptions {
        &self.options
    }
}

#[async_trait]
impl FileFormat for CobsfileFormat {
    fn get_ext(&self) -> String {
        self.options
            .file_extension
            .trim_start_matches('.')
            .to_string()
    }

    fn get_ext_with_compression(&self, _compression: &FileCompressionType) -> Result<String> {
        Ok(self.get_ext())
    }

    /// Files are never compressed whole (blocks compress themselves); saying so makes a
    /// `CREATE EXTERNAL TABLE` of a directory take the files with the format's extension.
    fn compression_type(&self) -> Option<FileCompressionType> {
        Some(FileCompressionType::UNCOMPRESSED)
    }

    async fn infer_schema(
        &self,
        _state: &dyn Session,
        store: &Arc<dyn ObjectStore>,
        objects: &[ObjectMeta],
    ) -> Result<SchemaRef> {
        let mut samples = Vec::new();
        let mut budget = self.options.schema_infer_max_records;
        for object in objects {
            let bytes = FileBytes::load(store, object)
                .await
                .map_err(|e| DataFusionError::Execution(e.to_string()))?;
            let name = bytes.name(object);
            let options = self.options.clone();
            // Off the runtime: an object in a store is fetched as it is read.
            let (found, name) = SpawnedTask::spawn_blocking(move || {
                let reader = options.reader();
                Whole::of(&bytes).check_is_cobsfile(&name, &reader)?;
                let found = Whole::of(&bytes).sample(&name, &reader, &options, budget)?;
                Ok::<_, DataFusionError>((found, name))
            })
            .join()
            .await
            .map_err(|e| DataFusionError::External(Box::new(e)))??;
            budget -= found.records.len().min(budget);
            let done = found.records.is_empty() && !found.avro.is_empty() || budget == 0;
            samples.push((name, found));
            if done {
                break;
            }
        }
        infer(&samples, &self.options)
    }

    async fn infer_stats(
        &self,
        _state: &dyn Session,
        store: &Arc<dyn ObjectStore>,
        table_schema: SchemaRef,
        object: &ObjectMeta,
    ) -> Result<Statistics> {
        let mut statistics = Statistics::new_unknown(&table_schema);
        statistics.total_byte_size = Precision::Inexact(object.size as usize);
        // Strict answers are checked: a count from the index is not.
        if self.options.index_statistics && !self.options.on_damage.fails() {
            let bytes = FileBytes::load(store, object)
                .await
                .map_err(|e| DataFusionError::Execution(e.to_string()))?;
            if let Some(index) = Whole::of(&bytes).index() {
                if index.start() == 0 {
                    statistics.num_rows = Precision::Exact(index.records() as usize);
                }
            }
        }
        Ok(statistics)
    }

    async fn create_physical_plan(
        &self,
        _state: &dyn Session,
        conf: FileScanConfig,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(DataSourceExec::from_data_source(conf))
    }

    fn file_source(&self, table_schema: TableSchema) -> Arc<dyn FileSource> {
        Arc::new(
            CobsfileSource::new(table_schema, self.options.clone())
                .with_damage_hook(self.hook.clone()),
        )
    }
}

/// Makes [`CobsfileFormat`]s from `CREATE EXTERNAL TABLE`'s options.
#[derive(Clone, Default)]
pub struct CobsfileFormatFactory {
    options: CobsfileOptions,
    hook: Option<DamageHook>,
}

impl fmt::Debug for CobsfileFormatFactory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CobsfileFormatFactory")
            .field("options", &self.options)
            .finish()
    }
}

impl CobsfileFormatFactory {
    /// A factory whose formats start from the default options.
    pub fn new() -> Self {
        Self::with_options(CobsfileOptions::default())
    }

    /// A factory whose formats start from `options`.
    pub fn with_options(options: CobsfileOptions) -> Self {
        CobsfileFormatFactory {
            options,
            hook: None,
        }
    }

    /// Formats made also report damage to `hook`.
    pub fn with_damage_hook(mut self, hook: DamageHook) -> Self {
        self.hook = Some(hook);
        self
    }
}

impl FileFormatFactory for CobsfileFormatFactory {
    fn create(
        &self,
        _state: &dyn Session,
        format_options: &HashMap<String, String>,
    ) -> Result<Arc<dyn FileFormat>> {
        let options = self.options.clone().with_map(format_options)?;
        let mut format = CobsfileFormat::new(options);
        format.hook = self.hook.clone();
        Ok(Arc::new(format))
    }

    fn default(&self) -> Arc<dyn FileFormat> {
        let mut format = CobsfileFormat::new(self.options.clone());
        format.hook = self.hook.clone();
        Arc::new(format)
    }
}

impl GetExt for CobsfileFormatFactory {
    fn get_ext(&self) -> String {
        FORMAT_NAME.to_string()
    }
}
