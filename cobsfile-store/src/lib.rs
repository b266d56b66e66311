//! cobsfiles in object storage: `s3://bucket/key` (a file) or `s3://bucket/prefix/` (a
//! directory) in any S3-compatible store, configured as the AWS tools are, by the environment:
//! `AWS_ENDPOINT_URL` (a store other than AWS), `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
//! `AWS_SESSION_TOKEN`, `AWS_REGION`, and `AWS_ALLOW_HTTP=true` for a plain-HTTP endpoint.
//!
//! A thin driver of the library's [`cobsfile::Remote`] over the `object_store` crate, apart
//! from any query engine: the command line reads objects through it without Apache DataFusion
//! (whose integration, `cobsfile-datafusion`, uses it for its tables).

use std::sync::Arc;
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path as ObjectPath;
use object_store::{
    BackoffConfig, ClientConfigKey, GetOptions, GetResultPayload, ObjectMeta, ObjectStore,
    ObjectStoreExt, RetryConfig,
};
use url::Url;

/// How long a connection to the store may take to open: a wrong endpoint fails in seconds,
/// not after minutes of retries.
const CONNECT_TIMEOUT: &str = "5s";

/// The whole object at `location` (`s3://BUCKET/KEY`), fetched: what a command that reads one
/// file reads from object storage. Fails with one line naming `location`: an error of kind
/// [`NotFound`](std::io::ErrorKind::NotFound) for a missing object or bucket.
pub fn fetch(location: &str) -> std::io::Result<bytes::Bytes> {
    let mut out = Vec::new();
    fetch_into(location, &mut out)?;
    Ok(out.into())
}

/// The store and key of the object `location` names (`s3://BUCKET/KEY`), or the error that
/// says why it names none.
fn object_of(location: &str) -> std::io::Result<(Arc<dyn ObjectStore>, ObjectPath)> {
    let Some((store, _, key)) = store_of(location)? else {
        return Err(std::io::Error::other(format!(
            "{location}: not an object storage URL"
        )));
    };
    if key.as_ref().is_empty() {
        return Err(std::io::Error::other(format!(
            "{location}: names a bucket, not an object"
        )));
    }
    // A prefix is a directory (as `sql` reads it); a command that reads one file refuses
    // it as it refuses a local directory.
    if location.ends_with('/') {
        return Err(std::io::Error::other(format!(
            "{location}: is a prefix (a directory), not an object"
        )));
    }
    Ok((store, key))
}

/// An object opened to be read by byte ranges outside a query (the command line): a
/// [`cobsfile::Remote`] whose requests run on a runtime of its own. Opening asks for the
/// object's size and then its tail, where its index is.
///
/// ```no_run
/// let object = cobsfile_store::RemoteObject::open("s3://logs/2026/12.cobs")?;
/// let options = cobsfile::ReaderBuilder::new();
/// for block in object.remote().metadata(&options)? {
///     println!("{:?}", block.entries);
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RemoteObject {
    // Dropped before the runtime its requests run on.
    remote: cobsfile::Remote<StoreFetch>,
    _runtime: tokio::runtime::Runtime,
}

impl RemoteObject {
    /// Opens the object at `location` (`s3://BUCKET/KEY`); fails as [`fetch`] does.
    pub fn open(location: &str) -> std::io::Result<Self> {
        let (store, key) = object_of(location)?;
        // Requests are spawned on the runtime and waited for from the reading thread, so it
        // has a worker of its own.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?;
        let opened = runtime.block_on(async {
            let meta = store
                .head(&key)
                .await
                .map_err(|e| request_error(&location, e, "not found (no such object or bucket)"))?;
            FileBytes::load(&store, &meta).await
        })?;
        match opened {
            FileBytes::Remote(remote) => Ok(RemoteObject {
                remote: *remote,
                _runtime: runtime,
            }),
            FileBytes::Mapped(..) => Err(std::io::Error::other(format!(
                "{location}: a local file, not an object"
            ))),
        }
    }

    /// The object, whose every request from now on is waited for inside `wait`: given the
    /// wait, `wait` must run it once. A caller that holds a lock other threads need while a
    /// request is out (an interpreter's lock: Python's package) lets go of it there.
    pub fn wait_in(self, wait: Wait) -> Self {
        // Set once, here, on the object's own fetcher.
        let _ = self.remote.fetcher().wait.set(wait);
        self
    }

    /// The object, read by byte ranges.
    pub fn remote(&self) -> &cobsfile::Remote<StoreFetch> {
        &self.remote
    }
}

/// [`fetch`], written to `out` as it arrives rather than held whole: an object larger than
/// memory can be kept in a file. Returns the bytes written.
pub fn fetch_into(location: &str, out: &mut dyn std::io::Write) -> std::io::Result<u64> {
    use futures::StreamExt;
    let (store, key) = object_of(location)?;
    let failed = |e: object_store::Error| {
        request_error(&location, e, "not found (no such object or bucket)")
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let mut body = store.get(&key).await.map_err(failed)?.into_stream();
        let mut written = 0u64;
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(failed)?;
            out.write_all(&chunk)?;
            written += chunk.len() as u64;
        }
        Ok(written)
    })
}

/// The whole object at `location` (`s3://BUCKET/KEY`), streamed into an unnamed temporary
/// file as it arrives and mapped: what a command or a Python reader that reads every block
/// reads, in the page cache and on disk rather than in its own memory. The file is gone
/// once the map is dropped. Fails as [`fetch`] does; a local disk that fails (full, say)
/// is named as such.
pub fn fetch_mapped(location: &str) -> std::io::Result<cobsfile::MappedFile> {
    use std::io::Write;
    let kept = |e: std::io::Error| {
        std::io::Error::new(
            e.kind(),
            format!("{location}: keeping the fetched object in a temporary file: {e}"),
        )
    };
    let file = tempfile::tempfile().map_err(kept)?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, &file);
    let mut disk = None;
    let mut sink = Recorded {
        inner: &mut out,
        failed: &mut disk,
    };
    match fetch_into(location, &mut sink) {
        Ok(_) => {}
        Err(e) => return Err(disk.map_or(e, kept)),
    }
    out.flush().map_err(kept)?;
    drop(out);
    cobsfile::MappedFile::open_file(&file).map_err(|e| kept(std::io::Error::other(e.to_string())))
}

/// A writer that keeps the error its inner writer failed with, to tell a disk's failure
/// from the server's.
struct Recorded<'a, W> {
    inner: &'a mut W,
    failed: &'a mut Option<std::io::Error>,
}

impl<W: std::io::Write> std::io::Write for Recorded<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.inner.write(buf).inspect_err(|e| {
            *self.failed = Some(std::io::Error::new(e.kind(), e.to_string()));
        })
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// The store `location` names, the URL it is registered under (the bucket's, `s3://BUCKET`)
/// and the object's key in it; `None` for a local path.
/// The store `location` names, its root URL and the key: for `s3://BUCKET/KEY`, an S3 client
/// of `BUCKET` configured by the environment (see the crate documentation); `None` for a local
/// path. Fails with one line for a URL this crate cannot read, or an S3 location without
/// credentials.
#[allow(clippy::type_complexity)]
pub fn store_of(
    location: &str,
) -> std::io::Result<Option<(Arc<dyn ObjectStore>, Url, ObjectPath)>> {
    let plan = |message: String| std::io::Error::other(message);
    let Some((scheme, _)) = location.split_once("://") else {
        return Ok(None);
    };
    let url = Url::parse(location).map_err(|e| plan(format!("{location}: {e}")))?;
    match scheme {
        "file" => Ok(None),
        "s3" | "s3a" => {
            let bucket = url
                .host_str()
                .filter(|b| !b.is_empty())
                .ok_or_else(|| plan(format!("{location}: no bucket in the URL")))?;
            if std::env::var_os("AWS_ACCESS_KEY_ID").is_none()
                && std::env::var_os("AWS_WEB_IDENTITY_TOKEN_FILE").is_none()
                && std::env::var_os("AWS_CONTAINER_CREDENTIALS_FULL_URI").is_none()
                && std::env::var_os("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI").is_none()
            {
                return Err(plan(format!(
                    "{location}: no credentials for S3: set AWS_ACCESS_KEY_ID and \
                     AWS_SECRET_ACCESS_KEY (and AWS_ENDPOINT_URL for a store other than AWS)"
                )));
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
                .map_err(|e| plan(format!("{location}: {e}")))?;
            let key = ObjectPath::from_url_path(url.path())
                .map_err(|e| plan(format!("{location}: {e}")))?;
            let mut root = url;
            root.set_path("");
            Ok(Some((Arc::new(store), root, key)))
        }
        other => Err(plan(format!(
            "{location}: '{other}://' is not a store this tool reads (local paths and s3:// are)"
        ))),
    }
}

/// The bytes the first request for an object asks for: its tail, where a cobsfile's index is
/// (what [`cobsfile::Remote::open`] reads first).
const TAIL: u64 = cobsfile::TAIL_FETCH;

/// A file a scan reads: mapped when the store is the local file system, read by byte ranges
/// otherwise.
/// An object's bytes as a reader has them: a local file mapped (a store that serves files,
/// such as the local file system's), or the object read by byte ranges.
pub enum FileBytes {
    Mapped(cobsfile::MappedFile, std::path::PathBuf),
    Remote(Box<cobsfile::Remote<StoreFetch>>),
}

impl FileBytes {
    /// Maps or opens the object `meta` names: the first request asks for its tail (where its
    /// index is), and a local file answers with the file itself. An object that is not the
    /// one `meta` describes (another ETag or size: replaced, or appended to, since the query
    /// listed it) is refused, then and at every later request, rather than read with ranges
    /// cut for the other.
    /// The object `meta` describes, in `store`: its tail fetched (where its index is) and,
    /// unless the store serves a local file, opened to be read by byte ranges on the current
    /// tokio runtime.
    pub async fn load(store: &Arc<dyn ObjectStore>, meta: &ObjectMeta) -> std::io::Result<Self> {
        let tail = meta.size.saturating_sub(TAIL)..meta.size;
        let options = GetOptions {
            range: (meta.size > 0).then(|| tail.clone().into()),
            ..GetOptions::default()
        };
        let result = store
            .get_opts(&meta.location, options)
            .await
            .map_err(|e| fetch_error(meta, e))?;
        let payload = match result.payload {
            GetResultPayload::File(file, path) => {
                let mapped = cobsfile::MappedFile::open_file(&file)
                    .map_err(|e| std::io::Error::other(format!("{}: {e}", path.display())))?;
                return Ok(FileBytes::Mapped(mapped, path));
            }
            payload => payload,
        };
        let result = object_store::GetResult { payload, ..result };
        same_object(meta, &result.meta)?;
        let bytes = result.bytes().await.map_err(|e| fetch_error(meta, e))?;
        let fetch = StoreFetch {
            store: Arc::clone(store),
            meta: meta.clone(),
            runtime: tokio::runtime::Handle::current(),
            tail: std::sync::Mutex::new(Some((tail, bytes))),
            wait: std::sync::OnceLock::new(),
        };
        // Opening may fetch more of the tail (an index larger than it): off the runtime.
        let remote = tokio::task::spawn_blocking(move || cobsfile::Remote::open(fetch))
            .await
            .map_err(std::io::Error::other)??;
        Ok(FileBytes::Remote(Box::new(remote)))
    }

    /// The file's name for messages: its path when local, its location in the store otherwise.
    /// The name of the object in messages: the local file's path, or the object's key.
    pub fn name(&self, meta: &ObjectMeta) -> String {
        match self {
            FileBytes::Mapped(_, path) => path.display().to_string(),
            FileBytes::Remote(_) => meta.location.to_string(),
        }
    }
}

/// Reads an object by byte ranges for a [`cobsfile::Remote`], as DataFusion's Parquet reader
/// reads: ranges less than 1 MiB apart coalesced into one request, up to 10 requests at a
/// time, on the runtime of the query that opened it. Every answer is checked to come from
/// the object the query listed.
pub struct StoreFetch {
    store: Arc<dyn ObjectStore>,
    meta: ObjectMeta,
    runtime: tokio::runtime::Handle,
    /// The tail fetched when the object was opened, for `Remote::open` to take.
    tail: std::sync::Mutex<Option<(std::ops::Range<u64>, bytes::Bytes)>>,
    /// What each request is waited for inside, if anything ([`RemoteObject::wait_in`]).
    wait: std::sync::OnceLock<Wait>,
}

/// A function that runs the wait for a request given to it: see [`RemoteObject::wait_in`].
pub type Wait = Arc<dyn Fn(&mut (dyn FnMut() + Send)) + Send + Sync>;

/// Ranges of one fetch closer than this are asked for in one request. Smaller than
/// object_store's default (1 MiB, made for a Parquet file's column chunks): the ranges a
/// cobsfile reader asks for at once are small blocks spread over a file (the dictionaries,
/// metadata or seals an index lists, a seal about every MiB), which 1 MiB would fetch with
/// everything between them.
const COALESCE: u64 = 64 << 10;

impl cobsfile::Fetch for StoreFetch {
    fn size(&self) -> u64 {
        self.meta.size
    }

    fn fetch(&self, ranges: &[std::ops::Range<u64>]) -> std::io::Result<Vec<Vec<u8>>> {
        if let [range] = ranges {
            let mut tail = self.tail.lock().unwrap_or_else(|e| e.into_inner());
            if tail.as_ref().is_some_and(|(r, _)| r == range) {
                let (_, bytes) = tail.take().expect("checked");
                return Ok(vec![bytes.to_vec()]);
            }
        }
        let (store, meta) = (Arc::clone(&self.store), self.meta.clone());
        let ranges = ranges.to_vec();
        // Spawned on the query's runtime and waited for here: a runtime shut down under the
        // read (a query whose other partitions were done) cancels it, rather than the
        // client's timers failing in a runtime that is going away.
        let mut task = self.runtime.spawn(async move {
            let get = |range: std::ops::Range<u64>| {
                let (store, meta) = (&store, &meta);
                async move {
                    let options = GetOptions {
                        range: Some(range.into()),
                        ..GetOptions::default()
                    };
                    let result = store
                        .get_opts(&meta.location, options)
                        .await
                        .map_err(|e| fetch_error(meta, e))?;
                    same_object(meta, &result.meta)?;
                    result.bytes().await.map_err(|e| fetch_error(meta, e))
                }
            };
            object_store::coalesce_ranges(&ranges, get, COALESCE).await
        });
        let mut done = None;
        let mut block = || done = Some(futures::executor::block_on(&mut task));
        match self.wait.get() {
            Some(wait) => wait(&mut block),
            None => block(),
        }
        let fetched = done.expect("the wait ran the request").map_err(|e| {
            std::io::Error::other(format!(
                "{}: the read was cancelled ({e})",
                self.meta.location
            ))
        })??;
        Ok(fetched.into_iter().map(|b| b.to_vec()).collect())
    }
}

/// Fails when `now` is not the object `listed` describes.
fn same_object(listed: &ObjectMeta, now: &ObjectMeta) -> std::io::Result<()> {
    let other_tag = matches!((&listed.e_tag, &now.e_tag), (Some(a), Some(b)) if a != b);
    if other_tag || now.size != listed.size {
        return Err(std::io::Error::other(format!(
            "{}: the object changed since the query listed it ({} bytes then, {} now); run \
             the query again",
            listed.location, listed.size, now.size
        )));
    }
    Ok(())
}

/// A failed request for `meta`'s object, as one line naming it.
fn fetch_error(meta: &ObjectMeta, e: object_store::Error) -> std::io::Error {
    request_error(
        &meta.location,
        e,
        "the object is gone since the query listed it",
    )
}

/// A failed request for the object `name`, as one line naming it; `gone` says what a missing
/// object means to the caller.
fn request_error(
    name: &dyn std::fmt::Display,
    e: object_store::Error,
    gone: &str,
) -> std::io::Error {
    match e {
        object_store::Error::NotFound { .. } => {
            std::io::Error::new(std::io::ErrorKind::NotFound, format!("{name}: {gone}"))
        }
        e => std::io::Error::other(format!("{name}: {}", store_error_line(&e))),
    }
}

/// An object store's error on one line, however the server words its answer, and without
/// the client's category ("Generic S3 error"), which says nothing to the user.
pub fn store_error_line(e: &object_store::Error) -> String {
    let message = e.to_string();
    let message = message
        .strip_prefix("Generic S3 error: ")
        .unwrap_or(&message);
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}
