//! Object storage for tables: `s3://bucket/key` (a file) or `s3://bucket/prefix/` (a
//! directory), through `cobsfile-store` (configured by the AWS_* environment variables).

use std::sync::Arc;

use datafusion::common::{plan_datafusion_err, Result};
use datafusion::execution::object_store::{DefaultObjectStoreRegistry, ObjectStoreRegistry};
use datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};
use datafusion::prelude::SessionContext;
use object_store::ObjectStore;
use url::Url;

pub use cobsfile_store::{
    fetch, fetch_into, fetch_mapped, store_error_line, FileBytes, RemoteObject, StoreFetch, Wait,
};

/// [`cobsfile_store::store_of`], its error a planning error.
#[allow(clippy::type_complexity)]
fn store_of(
    location: &str,
) -> Result<Option<(Arc<dyn ObjectStore>, Url, object_store::path::Path)>> {
    cobsfile_store::store_of(location).map_err(|e| plan_datafusion_err!("{e}"))
}

/// Makes the store of `location` known to `ctx`, if it names one: for `s3://BUCKET/...`, an
/// S3 client of `BUCKET` configured by the environment (see the module documentation). Local
/// paths need nothing. Fails with one line for a URL this crate cannot read, or an S3
/// location without credentials.
pub fn register_store(ctx: &SessionContext, location: &str) -> Result<()> {
    if let Some((store, root, _)) = store_of(location)? {
        ctx.register_object_store(&root, store);
    }
    Ok(())
}

/// The object stores of a session: DataFusion's own (the local file system, and stores
/// registered by hand), and for each bucket an `s3://` URL names, an S3 client made when the
/// bucket is first asked for, configured by the environment (see the module documentation).
/// A Ballista scheduler and executor given these read the same tables at `s3://` URLs as the
/// client that registered them, with no store registered on each.
#[derive(Debug, Default)]
pub struct ObjectStores {
    known: DefaultObjectStoreRegistry,
}

impl ObjectStores {
    /// A runtime environment with these object stores (and DataFusion's defaults otherwise).
    pub fn runtime_env() -> Result<Arc<RuntimeEnv>> {
        RuntimeEnvBuilder::new()
            .with_object_store_registry(Arc::new(ObjectStores::default()))
            .build_arc()
    }
}

impl ObjectStoreRegistry for ObjectStores {
    fn register_store(
        &self,
        url: &Url,
        store: Arc<dyn ObjectStore>,
    ) -> Option<Arc<dyn ObjectStore>> {
        self.known.register_store(url, store)
    }

    fn deregister_store(&self, url: &Url) -> Result<Arc<dyn ObjectStore>> {
        self.known.deregister_store(url)
    }

    fn get_store(&self, url: &Url) -> Result<Arc<dyn ObjectStore>> {
        if let Ok(store) = self.known.get_store(url) {
            return Ok(store);
        }
        match store_of(url.as_str())? {
            Some((store, root, _)) => {
                self.known.register_store(&root, Arc::clone(&store));
                Ok(store)
            }
            None => self.known.get_store(url),
        }
    }
}
