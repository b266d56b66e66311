//! An S3-compatible server on loopback for tests: `tests/s3/server` (moto's server, installed
//! from PyPI on first use) on a free port, stopped with its process group when dropped. Used
//! by the command line's and Ballista's object-storage tests (`#[path]`).

#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::ObjectStoreExt;

/// The repository's root.
fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// An S3-compatible server on a free loopback port, stopped (with its process group) on drop.
pub struct Server {
    child: Child,
    port: u16,
}

impl Server {
    pub fn start(dir: &Path) -> Server {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = std::fs::File::create(dir.join("server.log")).unwrap();
        let mut child = Command::new("bash")
            .arg(root().join("tests/s3/server"))
            .arg(port.to_string())
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .process_group(0)
            .spawn()
            .expect("tests/s3/server");
        // The first run installs the server into target/s3-venv.
        let t0 = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = child.try_wait().unwrap() {
                panic!(
                    "tests/s3/server exited {status}: {}",
                    std::fs::read_to_string(dir.join("server.log")).unwrap_or_default()
                );
            }
            assert!(t0.elapsed() < Duration::from_secs(600), "no S3 server");
            std::thread::sleep(Duration::from_millis(100));
        }
        Server { child, port }
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Creates `bucket` (moto takes an unsigned request for it).
    pub fn bucket(&self, bucket: &str) {
        use std::io::{Read, Write};
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(
            s,
            "PUT /{bucket} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            self.port
        )
        .unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }

    /// A client of `bucket` on this server: the S3 client the tool uses.
    pub fn store(&self, bucket: &str) -> AmazonS3 {
        store_at(&self.endpoint(), bucket)
    }

    /// A proxy to this server that counts the bytes the server sends.
    pub fn counted(&self) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let sent = Arc::new(AtomicU64::new(0));
        let (to, counter) = (self.port, Arc::clone(&sent));
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect(("127.0.0.1", to)) else {
                    continue;
                };
                let pipe =
                    |mut from: TcpStream, mut to: TcpStream, count: Option<Arc<AtomicU64>>| {
                        std::thread::spawn(move || {
                            use std::io::{Read, Write};
                            let mut buf = vec![0u8; 64 << 10];
                            while let Ok(n) = from.read(&mut buf) {
                                if n == 0 || to.write_all(&buf[..n]).is_err() {
                                    break;
                                }
                                if let Some(count) = &count {
                                    count.fetch_add(n as u64, Ordering::SeqCst);
                                }
                            }
                            let _ = to.shutdown(std::net::Shutdown::Write);
                        });
                    };
                pipe(
                    client.try_clone().unwrap(),
                    server.try_clone().unwrap(),
                    None,
                );
                pipe(server, client, Some(Arc::clone(&counter)));
            }
        });
        Proxy { port, sent }
    }
}

/// A proxy to a [`Server`] on another loopback port, counting the bytes the server sends
/// through it (headers included): what a read costs in transfer.
pub struct Proxy {
    port: u16,
    sent: Arc<AtomicU64>,
}

impl Proxy {
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Bytes the server sent since the last call.
    pub fn take(&self) -> u64 {
        self.sent.swap(0, Ordering::SeqCst)
    }

    /// A client of `bucket` through the proxy.
    pub fn store(&self, bucket: &str) -> AmazonS3 {
        store_at(&self.endpoint(), bucket)
    }
}

/// A client of `bucket` at `endpoint`.
fn store_at(endpoint: &str, bucket: &str) -> AmazonS3 {
    {
        AmazonS3Builder::new()
            .with_endpoint(endpoint)
            .with_allow_http(true)
            .with_bucket_name(bucket)
            .with_access_key_id("test")
            .with_secret_access_key("test")
            .with_region("us-east-1")
            .build()
            .unwrap()
    }
}

impl Server {
    /// Puts `bytes` at `bucket/key`.
    pub fn put(&self, bucket: &str, key: &str, bytes: Vec<u8>) {
        let store = self.store(bucket);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime
            .block_on(store.put(&object_store::path::Path::from(key), bytes.into()))
            .unwrap();
    }

    /// The AWS_* variables that point a client at this server.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint()),
            ("AWS_ACCESS_KEY_ID", "test".into()),
            ("AWS_SECRET_ACCESS_KEY", "test".into()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ALLOW_HTTP", "true".into()),
        ]
    }

    /// `cmd` configured for this server by the environment alone (none of the test's own
    /// AWS_* variables).
    pub fn configure<'c>(&self, cmd: &'c mut Command) -> &'c mut Command {
        clean_env(cmd).envs(self.env())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // The process group the server leads: the script, pip on a first run, the server.
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .status();
        let _ = self.child.wait();
    }
}

/// `cmd` without any AWS_* variable of the environment the tests run in.
pub fn clean_env(cmd: &mut Command) -> &mut Command {
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("AWS_") {
            cmd.env_remove(key);
        }
    }
    cmd
}
