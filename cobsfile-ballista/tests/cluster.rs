//! A Ballista cluster on localhost (a scheduler and two executors, child processes of the
//! built binary) runs SQL over cobsfiles and answers as a local session does.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use cobsfile::avro::{json::from_json_str, AvroWriter, WriterSchema};
use cobsfile::{Compression, WriterBuilder};
use cobsfile_datafusion::{CobsfileContext, CobsfileOptions};
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::prelude::SessionContext;

#[path = "../../tests/s3/server.rs"]
mod s3;

const BIN: &str = env!("CARGO_BIN_EXE_cobsfile-ballista");
const EVENTS: &str = include_str!("../../samples/events.jsonl");
const SCHEMA: &str = include_str!("../../samples/events.avsc");
/// Startup on a loaded 2-core machine can be slow; a healthy one takes a second or two.
const STARTUP: Duration = Duration::from_secs(60);

const GROUP_BY: &str = "SELECT service, CAST(level AS VARCHAR) AS level, count(*) AS n, \
    round(avg(latency_ms), 6) AS latency FROM {t} GROUP BY 1, 2 ORDER BY 1, 2";
const JOIN: &str = "SELECT a.service, CAST(a.level AS VARCHAR) AS level, count(*) AS n, \
    round(sum(b.latency_ms), 3) AS latency FROM {t} a JOIN {t} b \
    ON a.request_id = b.request_id AND a.host = b.host GROUP BY 1, 2 ORDER BY 1, 2";

/// The processes of the cluster, killed when it is dropped: at the end, or when a test fails.
struct Cluster {
    children: Vec<(String, Child)>,
    logs: PathBuf,
    scheduler_port: u16,
    work_dirs: Vec<PathBuf>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for (_, child) in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A port nothing listens on now (the executors take theirs as numbers).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `GET path` on the scheduler's port: its health probes answer plain HTTP.
fn http_get(port: u16, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    Some(response)
}

impl Cluster {
    fn start(dir: &Path, executors: usize) -> Cluster {
        Cluster::start_with(dir, executors, None)
    }

    /// A cluster whose processes are configured for `store` by the environment alone.
    fn start_with(dir: &Path, executors: usize, store: Option<&s3::Server>) -> Cluster {
        let configure = |cmd: &mut Command| {
            if let Some(server) = store {
                server.configure(cmd);
            }
        };
        let logs = dir.join("logs");
        std::fs::create_dir_all(&logs).unwrap();
        let mut cluster = Cluster {
            children: Vec::new(),
            logs,
            scheduler_port: 0,
            work_dirs: Vec::new(),
        };

        // The scheduler picks a free port and prints it.
        let mut scheduler = Command::new(BIN);
        configure(&mut scheduler);
        let mut scheduler = scheduler
            .args(["scheduler", "--bind", "127.0.0.1", "--port", "0"])
            .stdout(Stdio::piped())
            .stderr(cluster.log_file("scheduler"))
            .spawn()
            .unwrap();
        let stdout = scheduler.stdout.take().unwrap();
        cluster.children.push(("scheduler".into(), scheduler));
        let (lines, printed) = mpsc::channel();
        std::thread::spawn(move || {
            // Reads to the end, so the scheduler never blocks on a full pipe.
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = lines.send(line);
            }
        });
        let line = printed
            .recv_timeout(STARTUP)
            .unwrap_or_else(|_| cluster.fail("the scheduler printed no address"));
        let address = line
            .split_whitespace()
            .find(|word| word.starts_with("127.0.0.1:"))
            .unwrap_or_else(|| cluster.fail(&format!("no address in '{line}'")));
        cluster.scheduler_port = address["127.0.0.1:".len()..].parse().unwrap();

        for i in 0..executors {
            let name = format!("executor-{i}");
            let work_dir = dir.join(&name);
            let mut child = Command::new(BIN);
            configure(&mut child);
            let child = child
                .arg("executor")
                .args([
                    "--scheduler",
                    &format!("127.0.0.1:{}", cluster.scheduler_port),
                ])
                .args(["--bind", "127.0.0.1"])
                .args(["--port", &free_port().to_string()])
                .args(["--grpc-port", &free_port().to_string()])
                .args(["--concurrent-tasks", "2"])
                .arg("--work-dir")
                .arg(&work_dir)
                .stdout(Stdio::null())
                .stderr(cluster.log_file(&name))
                .spawn()
                .unwrap();
            cluster.children.push((name, child));
            cluster.work_dirs.push(work_dir);
        }

        // Ready when the scheduler counts every executor as registered.
        let wanted = format!("ready: {executors} executors registered");
        let deadline = Instant::now() + STARTUP;
        loop {
            if let Some(response) = http_get(cluster.scheduler_port, "/readyz") {
                if response.contains(&wanted) {
                    break;
                }
            }
            cluster.check_running();
            if Instant::now() > deadline {
                let last = http_get(cluster.scheduler_port, "/readyz").unwrap_or_default();
                cluster.fail(&format!("executors did not register: {last}"));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        cluster
    }

    fn log_file(&self, name: &str) -> File {
        File::create(self.logs.join(format!("{name}.log"))).unwrap()
    }

    /// Fails with every process's log, so that a failure says what happened.
    fn fail(&self, why: &str) -> ! {
        let mut message = format!("{why}\n");
        for (name, _) in &self.children {
            let log =
                std::fs::read_to_string(self.logs.join(format!("{name}.log"))).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            message.push_str(&format!("--- {name} (last lines of its log)\n"));
            for line in tail.iter().rev() {
                message.push_str(line);
                message.push('\n');
            }
        }
        panic!("{message}");
    }

    fn check_running(&mut self) {
        let mut exited = None;
        for (name, child) in &mut self.children {
            if let Ok(Some(status)) = child.try_wait() {
                exited = Some(format!("{name} exited: {status}"));
            }
        }
        if let Some(why) = exited {
            self.fail(&why);
        }
    }

    /// The files an executor wrote in its work directory (shuffle output of its tasks).
    fn files_written(&self, executor: usize) -> usize {
        fn count(dir: &Path) -> usize {
            std::fs::read_dir(dir)
                .map(|entries| {
                    entries
                        .map_while(Result::ok)
                        .map(|entry| {
                            let path = entry.path();
                            if path.is_dir() {
                                count(&path)
                            } else {
                                1
                            }
                        })
                        .sum()
                })
                .unwrap_or(0)
        }
        count(&self.work_dirs[executor])
    }
}

/// Four cobsfiles of the sample events as JSON records, small zstd blocks.
fn json_files(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let lines: Vec<&str> = EVENTS.lines().collect();
    for (i, part) in lines.chunks(lines.len().div_ceil(4)).enumerate() {
        let mut writer = WriterBuilder::new()
            .block_target(4096)
            .compression(Compression::Zstd { level: 3 })
            .build(Vec::new())
            .unwrap();
        for line in part {
            writer.write_record(line.as_bytes()).unwrap();
        }
        std::fs::write(
            dir.join(format!("events-{i}.cobs")),
            writer.finish().unwrap(),
        )
        .unwrap();
    }
}

/// Two cobsfiles of the sample events as typed (Avro) records.
fn avro_files(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let schema = WriterSchema::parse(SCHEMA).unwrap();
    let lines: Vec<&str> = EVENTS.lines().collect();
    for (i, part) in lines.chunks(lines.len().div_ceil(2)).enumerate() {
        let writer = WriterBuilder::new()
            .block_target(4096)
            .build(Vec::new())
            .unwrap();
        let mut writer = AvroWriter::new(writer, schema.clone()).unwrap();
        for line in part {
            writer
                .write_value(&from_json_str(line, &schema).unwrap())
                .unwrap();
        }
        std::fs::write(
            dir.join(format!("typed-{i}.cobs")),
            writer.finish().unwrap(),
        )
        .unwrap();
    }
}

async fn answer(ctx: &SessionContext, sql: &str) -> String {
    let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    pretty_format_batches(&batches).unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_answers_as_a_local_session_does() {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let json_dir = dir.path().join("json");
    let avro_dir = dir.path().join("avro");
    json_files(&json_dir);
    avro_files(&avro_dir);
    let json_dir = json_dir.to_str().unwrap();
    let avro_dir = avro_dir.to_str().unwrap();

    let cluster = Cluster::start(dir.path(), 2);
    let url = format!("df://127.0.0.1:{}", cluster.scheduler_port);
    let remote = cobsfile_ballista::remote_context(&url).await.unwrap();
    // Both ways of registering a table: the library's, and SQL.
    remote
        .register_cobsfile("events", json_dir, CobsfileOptions::new())
        .await
        .unwrap();
    remote
        .sql(&format!(
            "CREATE EXTERNAL TABLE typed STORED AS COBSFILE LOCATION '{avro_dir}/'"
        ))
        .await
        .unwrap();

    let local = SessionContext::new();
    local
        .register_cobsfile("events", json_dir, CobsfileOptions::new())
        .await
        .unwrap();
    local
        .register_cobsfile("typed", avro_dir, CobsfileOptions::new())
        .await
        .unwrap();

    for table in ["events", "typed"] {
        for query in [GROUP_BY, JOIN] {
            let sql = query.replace("{t}", table);
            let expected = answer(&local, &sql).await;
            let got = tokio::time::timeout(Duration::from_secs(60), answer(&remote, &sql))
                .await
                .unwrap_or_else(|_| cluster.fail(&format!("no answer in 60 s to {sql}")));
            assert_eq!(got, expected, "{sql}");
            assert!(got.contains("| billing"), "{got}");
        }
    }

    // Both executors ran tasks: each logged some and wrote their shuffle output.
    for executor in 0..2 {
        let log = std::fs::read_to_string(cluster.logs.join(format!("executor-{executor}.log")))
            .unwrap_or_default();
        let files = cluster.files_written(executor);
        if !log.contains("Finished task") || files == 0 {
            cluster.fail(&format!(
                "executor-{executor} ran no task ({files} files in its work directory)"
            ));
        }
    }
    eprintln!("cluster test: {:.1} s", started.elapsed().as_secs_f64());
}

/// Tables in an S3-compatible server (started on loopback): the scheduler lists them and the
/// executors read them from the bucket, configured by the environment alone, and the cluster
/// answers as a local session over the same files on disk, which are gone by the time it does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_reads_tables_in_object_storage() {
    use object_store::ObjectStoreExt;
    let dir = tempfile::tempdir().unwrap();
    let json_dir = dir.path().join("json");
    let avro_dir = dir.path().join("avro");
    json_files(&json_dir);
    avro_files(&avro_dir);
    let server = s3::Server::start(dir.path());
    server.bucket("lake");
    let bucket = std::sync::Arc::new(server.store("lake"));
    for (local, prefix) in [(&json_dir, "events"), (&avro_dir, "typed")] {
        for entry in std::fs::read_dir(local).unwrap() {
            let path = entry.unwrap().path();
            let key = format!("{prefix}/{}", path.file_name().unwrap().to_str().unwrap());
            bucket
                .put(&key.as_str().into(), std::fs::read(&path).unwrap().into())
                .await
                .unwrap();
        }
    }

    let local = SessionContext::new();
    local
        .register_cobsfile("events", json_dir.to_str().unwrap(), CobsfileOptions::new())
        .await
        .unwrap();
    local
        .register_cobsfile("typed", avro_dir.to_str().unwrap(), CobsfileOptions::new())
        .await
        .unwrap();
    let mut expected = Vec::new();
    for table in ["events", "typed"] {
        for query in [GROUP_BY, JOIN] {
            let sql = query.replace("{t}", table);
            expected.push((sql.clone(), answer(&local, &sql).await));
        }
    }
    // No file on disk is left for the cluster to read.
    std::fs::remove_dir_all(&json_dir).unwrap();
    std::fs::remove_dir_all(&avro_dir).unwrap();

    let cluster = Cluster::start_with(dir.path(), 2, Some(&server));
    let url = format!("df://127.0.0.1:{}", cluster.scheduler_port);
    let remote = cobsfile_ballista::remote_context(&url).await.unwrap();
    // The client infers the tables' schemas: it is given the bucket's store (the test's own
    // environment is not the server's).
    remote.register_object_store(&url::Url::parse("s3://lake").unwrap(), bucket);
    remote
        .register_cobsfile("events", "s3://lake/events/", CobsfileOptions::new())
        .await
        .unwrap();
    remote
        .sql("CREATE EXTERNAL TABLE typed STORED AS COBSFILE LOCATION 's3://lake/typed/'")
        .await
        .unwrap();
    for (sql, expected) in expected {
        let got = tokio::time::timeout(Duration::from_secs(60), answer(&remote, &sql))
            .await
            .unwrap_or_else(|_| cluster.fail(&format!("no answer in 60 s to {sql}")));
        assert_eq!(got, expected, "{sql}");
        assert!(got.contains("| billing"), "{got}");
    }
}
