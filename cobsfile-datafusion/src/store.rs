//! Object storage: tables at `s3://bucket/key` (a file) or `s3://bucket/prefix/` (a directory)
//! read from any S3-compatible store, configured as the AWS tools are, by the environment:
//! `AWS_ENDPOINT_URL` (a store other than AWS), `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
//! `AWS_SESSION_TOKEN`, `AWS_REGION`, and `AWS_ALLOW_HTTP=true` for a plain-HTTP endpoint.

use std::sync::Arc;
use std::time::Duration;

use datafusion::common::{plan_datafusion_err, Result};
use datafusion::execution::object_store::{DefaultObjectStoreRegistry, ObjectStoreRegistry};
use datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};
use datafusion::prelude::SessionContext;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path as ObjectPath;
use object_store::{BackoffConfig, ClientConfigKey, ObjectStore, ObjectStoreExt, RetryConfig};
use url::Url;

/// How long a connection to the store may take to open: a wrong endpoint fails in seconds,
/// not after minutes of retries.
const CONNECT_TIMEOUT: &str = "5s";

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

/// The whole object at `location` (`s3://BUCKET/KEY`), fetched: what a command that reads one
/// file reads from object storage. Fails with one line naming `location`: an error of kind
/// [`NotFound`](std::io::ErrorKind::NotFound) for a missing object or bucket.
pub fn fetch(location: &str) -> std::io::Result<bytes::Bytes> {
    let other = |e: datafusion::common::DataFusionError| {
        let message = e.strip_backtrace();
        let message = message
            .strip_prefix("Error during planning: ")
            .unwrap_or(&message);
        std::io::Error::other(message.to_string())
    };
    let Some((store, _, key)) = store_of(location).map_err(other)? else {
        return Err(std::io::Error::other(format!(
            "{location}: not an object storage URL"
        )));
    };
    if key.as_ref().is_empty() {
        return Err(std::io::Error::other(format!(
            "{location}: names a bucket, not an object"
        )));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime
        .block_on(async { store.get(&key).await?.bytes().await })
        .map_err(|e| match e {
            object_store::Error::NotFound { .. } => std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{location}: not found (no such object or bucket)"),
            ),
            e => {
                let message = e.to_string();
                let message = message
                    .strip_prefix("Generic S3 error: ")
                    .unwrap_or(&message);
                // One line, however the server words its answer.
                let message = message.split_whitespace().collect::<Vec<_>>().join(" ");
                std::io::Error::other(format!("{location}: {message}"))
            }
        })
}

/// The store `location` names, the URL it is registered under (the bucket's, `s3://BUCKET`)
/// and the object's key in it; `None` for a local path.
#[allow(clippy::type_complexity)]
fn store_of(location: &str) -> Result<Option<(Arc<dyn ObjectStore>, Url, ObjectPath)>> {
    let Some((scheme, _)) = location.split_once("://") else {
        return Ok(None);
    };
    let url = Url::parse(location).map_err(|e| plan_datafusion_err!("{location}: {e}"))?;
    match scheme {
        "file" => Ok(None),
        "s3" | "s3a" => {
            let bucket = url
                .host_str()
                .filter(|b| !b.is_empty())
                .ok_or_else(|| plan_datafusion_err!("{location}: no bucket in the URL"))?;
            if std::env::var_os("AWS_ACCESS_KEY_ID").is_none()
                && std::env::var_os("AWS_WEB_IDENTITY_TOKEN_FILE").is_none()
                && std::env::var_os("AWS_CONTAINER_CREDENTIALS_FULL_URI").is_none()
                && std::env::var_os("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI").is_none()
            {
                return Err(plan_datafusion_err!(
                    "{location}: no credentials for S3: set AWS_ACCESS_KEY_ID and \
                     AWS_SECRET_ACCESS_KEY (and AWS_ENDPOINT_URL for a store other than AWS)"
                ));
            }
            let store = AmazonS3Builder::from_env()
                .with_bucket_name(bucket)
                .with_config(
                    AmazonS3ConfigKey::Client(ClientConfigKey::ConnectTimeout),
                    CONNECT_TIMEOUT,
                )
                .with_retry(RetryConfig {
                    backoff: BackoffConfig::default(),
                    max_retries: 3,
                    retry_timeout: Duration::from_secs(30),
                })
                .build()
                .map_err(|e| plan_datafusion_err!("{location}: {e}"))?;
            let key = ObjectPath::from_url_path(url.path())
                .map_err(|e| plan_datafusion_err!("{location}: {e}"))?;
            let mut root = url;
            root.set_path("");
            Ok(Some((Arc::new(store), root, key)))
        }
        other => Err(plan_datafusion_err!(
            "{location}: '{other}://' is not a store this tool reads (local paths and s3:// are)"
        )),
    }
}
