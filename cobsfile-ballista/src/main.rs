//! `cobsfile-ballista`: a Ballista scheduler or executor that reads cobsfiles.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::OnceLock;
use std::time::Instant;

use clap::{Parser, Subcommand};
use log::{LevelFilter, Log, Metadata, Record};

/// Runs a Ballista scheduler or executor that reads cobsfiles (the cobsfile codecs installed).
///
/// Start one scheduler, then executors pointing at it; clients connect to the scheduler
/// (df://HOST:PORT). Every machine must see the files under the same path. Logs go to stderr;
/// RUST_LOG=debug (or error, warn, info, trace, off) sets their level.
#[derive(Parser)]
#[command(name = "cobsfile-ballista", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs the scheduler: clients send it queries, it plans them into stages and hands their
    /// tasks to the executors.
    Scheduler {
        /// The address to listen on.
        #[arg(long, value_name = "HOST", default_value = "0.0.0.0")]
        bind: String,
        /// The port to listen on (0: any free port); the address listened on is printed.
        #[arg(long, value_name = "N", default_value_t = 50050)]
        port: u16,
        /// The host name executors reach this scheduler by: they report task status there
        /// [default: the --bind address, or localhost when it is 0.0.0.0 or ::].
        #[arg(long, value_name = "HOST")]
        external_host: Option<String>,
    },
    /// Runs an executor: it registers with the scheduler and runs the tasks it is given.
    Executor {
        /// The scheduler's address.
        #[arg(long, value_name = "HOST:PORT", value_parser = parse_host_port)]
        scheduler: (String, u16),
        /// The address to listen on.
        #[arg(long, value_name = "HOST", default_value = "0.0.0.0")]
        bind: String,
        /// The Arrow Flight port: other executors and clients fetch results from it.
        #[arg(long, value_name = "N", default_value_t = 50051)]
        port: u16,
        /// The gRPC port the scheduler launches tasks on.
        #[arg(long, value_name = "N", default_value_t = 50052)]
        grpc_port: u16,
        /// The host name the scheduler, other executors and clients reach this executor by
        /// [default: the address it connects to the scheduler from].
        #[arg(long, value_name = "HOST")]
        external_host: Option<String>,
        /// Where shuffle data is written [default: a temporary directory].
        #[arg(long, value_name = "DIR")]
        work_dir: Option<PathBuf>,
        /// Tasks run at once (0: one per CPU core).
        #[arg(long, value_name = "N", default_value_t = 0)]
        concurrent_tasks: usize,
    },
}

fn parse_host_port(value: &str) -> Result<(String, u16), String> {
    let (host, port) = value
        .rsplit_once(':')
        .ok_or_else(|| format!("expected HOST:PORT, got '{value}'"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(format!("expected HOST:PORT, got '{value}': no host"));
    }
    let port = port
        .parse()
        .map_err(|_| format!("expected HOST:PORT, got '{value}': '{port}' is not a port"))?;
    Ok((host.to_string(), port))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    // Ballista's own scheduler binary runs on 32 MiB stacks: planning recurses deeply.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(32 * 1024 * 1024)
        .build();
    let result = match runtime {
        Ok(runtime) => runtime.block_on(run(cli.command)),
        Err(e) => Err(format!("cannot start the runtime: {e}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            // One line, whatever the error's own formatting.
            let message = message.split_whitespace().collect::<Vec<_>>().join(" ");
            eprintln!("cobsfile-ballista: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn run(command: Command) -> Result<(), String> {
    match command {
        Command::Scheduler {
            bind,
            port,
            external_host,
        } => {
            let listener = tokio::net::TcpListener::bind((bind.as_str(), port))
                .await
                .map_err(|e| format!("scheduler: cannot listen on {bind}:{port}: {e}"))?;
            let address = listener
                .local_addr()
                .map_err(|e| format!("scheduler: {e}"))?;
            let external_host = external_host.unwrap_or_else(|| {
                if address.ip().is_unspecified() {
                    "localhost".to_string()
                } else {
                    bind.clone()
                }
            });
            let mut config = cobsfile_ballista::scheduler_config();
            config.external_host = external_host.clone();
            println!(
                "cobsfile-ballista scheduler listening on {address} (executors reach it as \
                 {external_host}:{}; clients connect to df://{external_host}:{})",
                address.port(),
                address.port()
            );
            // The line above is how a script or test learns a port chosen by the system.
            let _ = std::io::stdout().flush();
            cobsfile_ballista::run_scheduler(listener, config)
                .await
                .map_err(|e| format!("scheduler: {e}"))
        }
        Command::Executor {
            scheduler: (scheduler_host, scheduler_port),
            bind,
            port,
            grpc_port,
            external_host,
            work_dir,
            concurrent_tasks,
        } => {
            if port == 0 || grpc_port == 0 {
                return Err(format!(
                    "executor: --port {port} --grpc-port {grpc_port}: an executor needs two \
                     ports others can reach, not 0"
                ));
            }
            // Ballista reports a Flight port in use only in its log, then stops as if asked
            // to: try both ports first, to say so.
            for port in [port, grpc_port] {
                std::net::TcpListener::bind((bind.as_str(), port))
                    .map_err(|e| format!("executor: cannot listen on {bind}:{port}: {e}"))?;
            }
            let work_dir = match work_dir {
                Some(dir) => {
                    std::fs::create_dir_all(&dir).map_err(|e| {
                        format!(
                            "executor: cannot create the work directory {}: {e}",
                            dir.display()
                        )
                    })?;
                    let dir = dir.to_str().ok_or_else(|| {
                        format!(
                            "executor: the work directory {} is not UTF-8",
                            dir.display()
                        )
                    })?;
                    Some(dir.to_string())
                }
                None => None,
            };
            let config = ballista_executor::executor_process::ExecutorProcessConfig {
                bind_host: bind.clone(),
                external_host,
                port,
                grpc_port,
                scheduler_host: scheduler_host.clone(),
                scheduler_port,
                vcores: concurrent_tasks,
                work_dir,
                ..cobsfile_ballista::executor_config()
            };
            println!(
                "cobsfile-ballista executor {} for the scheduler at {scheduler_host}:{scheduler_port}: \
                 Arrow Flight on {bind}:{port}, gRPC on {bind}:{grpc_port}",
                config.executor_id
            );
            let _ = std::io::stdout().flush();
            cobsfile_ballista::run_executor(config)
                .await
                .map_err(|e| format!("executor (scheduler {scheduler_host}:{scheduler_port}): {e}"))
        }
    }
}

/// Logs to stderr: `RUST_LOG` as a level for every message if set, else Ballista's and
/// cobsfile's messages from `info` and the rest from `warn`.
struct StderrLogger;

static LEVEL: OnceLock<Option<LevelFilter>> = OnceLock::new();
static START: OnceLock<Instant> = OnceLock::new();

impl StderrLogger {
    fn level_for(target: &str) -> LevelFilter {
        match LEVEL.get().copied().flatten() {
            Some(level) => level,
            None if target.starts_with("ballista") || target.starts_with("cobsfile") => {
                LevelFilter::Info
            }
            None => LevelFilter::Warn,
        }
    }
}

impl Log for StderrLogger {
    fn enabled(&self, metadata: &Metadata) -> bool {
        metadata.level() <= Self::level_for(metadata.target())
    }

    fn log(&self, record: &Record) {
        if self.enabled(record.metadata()) {
            let elapsed = START.get().map(|start| start.elapsed().as_secs_f64());
            eprintln!(
                "[{:9.3}s {:5} {}] {}",
                elapsed.unwrap_or(0.0),
                record.level(),
                record.target(),
                record.args()
            );
        }
    }

    fn flush(&self) {}
}

static LOGGER: StderrLogger = StderrLogger;

fn init_logging() {
    let _ = START.set(Instant::now());
    let level = std::env::var("RUST_LOG")
        .ok()
        .and_then(|value| value.trim().parse::<LevelFilter>().ok());
    let _ = LEVEL.set(level);
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(level.unwrap_or(LevelFilter::Info));
    }
}
