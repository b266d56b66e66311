//! Object storage for real: `cobsfile sql` over cobsfiles in an S3-compatible server that the
//! test starts on loopback (moto's server, `tests/s3/server`), configured only by the standard
//! AWS_* environment variables. Answers and damage reports equal those of the same files read
//! locally; every mistake (no credentials, a wrong endpoint, a missing object) is one line.

use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{bin, root, run, scratch, stderr, stdout};

use object_store::aws::AmazonS3Builder;
use object_store::ObjectStoreExt;

/// An S3-compatible server on a free loopback port, stopped (with its process group) on drop.
struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start(dir: &Path) -> Server {
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

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Creates `bucket` (moto takes an unsigned request for it).
    fn bucket(&self, bucket: &str) {
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

    /// Puts `bytes` at `bucket/key`, through the same S3 client the tool uses.
    fn put(&self, bucket: &str, key: &str, bytes: Vec<u8>) {
        let store = AmazonS3Builder::new()
            .with_endpoint(self.endpoint())
            .with_allow_http(true)
            .with_bucket_name(bucket)
            .with_access_key_id("test")
            .with_secret_access_key("test")
            .with_region("us-east-1")
            .build()
            .unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime
            .block_on(store.put(&object_store::path::Path::from(key), bytes.into()))
            .unwrap();
    }

    /// `cobsfile ARGS` configured for this server by the environment alone.
    fn cobsfile(&self, args: &[&str], dir: &Path) -> Output {
        run(
            clean_env(bin().current_dir(dir).args(args))
                .env("AWS_ENDPOINT_URL", self.endpoint())
                .env("AWS_ACCESS_KEY_ID", "test")
                .env("AWS_SECRET_ACCESS_KEY", "test")
                .env("AWS_REGION", "us-east-1")
                .env("AWS_ALLOW_HTTP", "true"),
            b"",
        )
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // SAFETY: kill(2) with the negated id of the process group the server leads; no memory
        // is involved.
        unsafe {
            libc::kill(-(self.child.id() as i32), libc::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

/// `cmd` without any AWS_* variable of the environment the tests run in.
fn clean_env(cmd: &mut Command) -> &mut Command {
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("AWS_") {
            cmd.env_remove(key);
        }
    }
    cmd
}

fn samples() -> PathBuf {
    root().join("samples")
}

/// The sample events packed as typed records, as JSON records, and typed with a byte flipped
/// in the middle of a data block.
fn packed(dir: &Path) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let jsonl = samples().join("events.jsonl");
    let typed = dir.join("typed.cobs");
    let out = run(
        bin()
            .args(["pack", "--block-target", "16K", "--schema"])
            .arg(samples().join("events.avsc"))
            .arg(&jsonl)
            .arg("-o")
            .arg(&typed),
        b"",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let json = dir.join("json.cobs");
    let out = run(
        bin()
            .args(["pack", "--zstd", "3"])
            .arg(&jsonl)
            .arg("-o")
            .arg(&json),
        b"",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let typed = std::fs::read(typed).unwrap();
    let mut damaged = typed.clone();
    let at = damaged.len() / 2;
    damaged[at] ^= 0x40;
    (typed, std::fs::read(json).unwrap(), damaged)
}

/// The same query over local files and over their copies in the bucket: the same rows, the
/// same exit status, and the same damage lines (naming each file as it was given).
#[test]
fn sql_over_s3_answers_as_over_local_files() {
    let dir = scratch("s3-sql");
    let server = Server::start(&dir);
    let (typed, json, damaged) = packed(&dir);
    std::fs::write(dir.join("damaged.cobs"), &damaged).unwrap();
    server.bucket("logs");
    server.put("logs", "events/typed.cobs", typed);
    server.put("logs", "events/json.cobs", json);
    server.put("logs", "events/notes.txt", b"not a table".to_vec());
    server.put("logs", "bad/damaged.cobs", damaged);

    for (table, query) in [
        (
            "typed",
            "SELECT service, count(*), avg(latency_ms) FROM typed GROUP BY service ORDER BY service",
        ),
        (
            "json",
            "SELECT level, count(*), max(latency_ms) FROM json GROUP BY level ORDER BY level",
        ),
        (
            "damaged",
            "SELECT service, count(*) FROM damaged GROUP BY service ORDER BY service",
        ),
    ] {
        let local = server.cobsfile(&["sql", query, &format!("{table}.cobs")], &dir);
        let url = match table {
            "damaged" => "s3://logs/bad/damaged.cobs".to_string(),
            _ => format!("s3://logs/events/{table}.cobs"),
        };
        let remote = server.cobsfile(&["sql", query, &url], &dir);
        assert_eq!(stdout(&remote), stdout(&local), "{table}: {}", stderr(&remote));
        assert!(stdout(&local).lines().count() > 4, "{}", stdout(&local));
        assert_eq!(remote.status.code(), local.status.code(), "{}", stderr(&remote));
        let expected = if table == "damaged" { 3 } else { 0 };
        assert_eq!(local.status.code(), Some(expected), "{}", stderr(&local));
        // Damage is named by the file as given, and is otherwise the same report.
        let as_local = stderr(&remote).replace(&url, "F").replace("bad/damaged.cobs", "F");
        let local_err = stderr(&local)
            .replace(&dir.join("damaged.cobs").display().to_string(), "F")
            .replace("damaged.cobs", "F");
        assert_eq!(as_local, local_err);
    }

    // The commands that read one file read an object as they read a local file.
    for (key, local) in [
        ("events/typed.cobs", "typed.cobs"),
        ("bad/damaged.cobs", "damaged.cobs"),
    ] {
        let url = format!("s3://logs/{key}");
        for args in [
            &["cat", "--json"][..],
            &["cat", "--json", "--threads", "2"],
            &["cat", "--json", "--skip", "100", "--limit", "5"],
            &["ls", "--json"],
            &["verify", "--json"],
            &["verify"],
            &["meta"],
        ] {
            let on_disk = server.cobsfile(&[args, &[local]].concat(), &dir);
            let remote = server.cobsfile(&[args, &[url.as_str()]].concat(), &dir);
            assert_eq!(
                stdout(&remote).replace(&url, local),
                stdout(&on_disk),
                "{args:?} {key}: {}",
                stderr(&remote)
            );
            assert_eq!(
                remote.status.code(),
                on_disk.status.code(),
                "{args:?} {key}"
            );
            assert_eq!(
                stderr(&remote).replace(&url, local),
                stderr(&on_disk),
                "{args:?} {key}"
            );
        }
    }
    let out = server.cobsfile(&["cat", "s3://logs/events/none.cobs"], &dir);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("s3://logs/events/none.cobs: not found"),
        "{}",
        stderr(&out)
    );

    // A prefix is a directory: its cobsfiles, not its other objects.
    let out = server.cobsfile(
        &[
            "sql",
            "SELECT count(*) AS n FROM events",
            "s3://logs/events/",
            "--format",
            "csv",
        ],
        &dir,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "n\n4000\n");
}

/// Each mistake with object storage ends with one line and a failing status.
#[test]
fn s3_mistakes_end_with_one_line() {
    let dir = scratch("s3-mistakes");
    let server = Server::start(&dir);
    server.bucket("logs");
    let one_line = |out: &Output, says: &str| {
        assert_ne!(out.status.code(), Some(0), "{}", stdout(out));
        let err = stderr(out);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(says), "{says:?} not in {err}");
    };
    let query = [
        "sql",
        "SELECT count(*) FROM t",
        "--table",
        "t=s3://logs/t.cobs",
    ];

    // No credentials at all.
    let out = run(clean_env(bin().current_dir(&dir).args(query)), b"");
    one_line(&out, "AWS_ACCESS_KEY_ID");
    // No such object, and no such bucket.
    one_line(&server.cobsfile(&query, &dir), "s3://logs/t.cobs");
    one_line(
        &server.cobsfile(
            &[
                "sql",
                "SELECT 1 FROM t",
                "--table",
                "t=s3://nobucket/t.cobs",
            ],
            &dir,
        ),
        "nobucket",
    );
    // A store this tool does not read.
    one_line(
        &server.cobsfile(
            &["sql", "SELECT 1 FROM t", "--table", "t=gs://logs/t.cobs"],
            &dir,
        ),
        "gs://",
    );
    // An endpoint where nothing listens: refused at once, not retried for minutes.
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = run(
        clean_env(bin().current_dir(&dir).args(query))
            .env("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{closed}"))
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ALLOW_HTTP", "true"),
        b"",
    );
    one_line(&out, "s3://logs/t.cobs");
}
