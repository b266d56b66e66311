//! `SessionContext` conveniences: register the format for `CREATE EXTERNAL TABLE`, register
//! or read a file, directory or glob of cobsfiles.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::common::Result;
use datafusion::datasource::listing::{
    ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl,
};
use datafusion::datasource::listing_table_factory::ListingTableFactory;
use datafusion::execution::context::SessionState;
use datafusion::prelude::{DataFrame, SessionContext};

use crate::format::{CobsfileFormat, CobsfileFormatFactory, FORMAT_NAME};
use crate::options::CobsfileOptions;

/// Adds cobsfiles to a [`SessionContext`].
#[async_trait]
pub trait CobsfileContext {
    /// Makes `CREATE EXTERNAL TABLE name STORED AS COBSFILE LOCATION '...'` work, with
    /// `OPTIONS ('records' 'json', 'on_damage' 'error', ...)` (see [`CobsfileOptions::set`]).
    fn register_cobsfile_format(&self) -> Result<()>;

    /// Registers a table `name` of the cobsfile, directory of cobsfiles or glob `path`.
    async fn register_cobsfile(
        &self,
        name: &str,
        path: &str,
        options: CobsfileOptions,
    ) -> Result<()>;

    /// A data frame over the cobsfile, directory of cobsfiles or glob `path`.
    async fn read_cobsfile(&self, path: &str, options: CobsfileOptions) -> Result<DataFrame>;
}

/// Registers the format and its table factory on a session state.
pub fn register_format(state: &mut SessionState, factory: CobsfileFormatFactory) -> Result<()> {
    state.register_file_format(Arc::new(factory), true)?;
    state.table_factories_mut().insert(
        FORMAT_NAME.to_uppercase(),
        Arc::new(ListingTableFactory::new()),
    );
    Ok(())
}

/// The listing table of `paths` (cobsfiles, directories of them, globs) read with `format`.
pub async fn listing_table(
    state: &SessionState,
    paths: &[impl AsRef<str>],
    format: CobsfileFormat,
) -> Result<Arc<ListingTable>> {
    let urls = paths
        .iter()
        .map(|p| ListingTableUrl::parse(p.as_ref()))
        .collect::<Result<Vec<_>>>()?;
    // Files named one by one are read whatever their names; directories and globs take the
    // files with the options' extension (so does a mix, unless a named file lacks it).
    let wanted = format.options().file_extension.clone();
    let named_without = urls.iter().any(|url| {
        let many = url.is_collection() || url.as_str().contains(['*', '?', '[']);
        !many && !url.as_str().ends_with(wanted.as_str())
    });
    let extension = if named_without { String::new() } else { wanted };
    let options = ListingOptions::new(Arc::new(format)).with_file_extension(extension);
    let config = ListingTableConfig::new_with_multi_paths(urls)
        .with_listing_options(options)
        .infer_schema(state)
        .await?;
    Ok(Arc::new(ListingTable::try_new(config)?))
}

#[async_trait]
impl CobsfileContext for SessionContext {
    fn register_cobsfile_format(&self) -> Result<()> {
        let state = self.state_ref();
        let mut state = state.write();
        register_format(&mut state, CobsfileFormatFactory::new())
    }

    async fn register_cobsfile(
        &self,
        name: &str,
        path: &str,
        options: CobsfileOptions,
    ) -> Result<()> {
        let table = listing_table(&self.state(), &[path], CobsfileFormat::new(options)).await?;
        self.register_table(name, table)?;
        Ok(())
    }

    async fn read_cobsfile(&self, path: &str, options: CobsfileOptions) -> Result<DataFrame> {
        let table = listing_table(&self.state(), &[path], CobsfileFormat::new(options)).await?;
        self.read_table(table)
    }
}
