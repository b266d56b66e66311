//! `cobsfile sql` and `cobsfile export --parquet/--json`: queries through Apache DataFusion
//! (the `cobsfile-datafusion` crate), damage reported as the other commands report it.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use cobsfile_datafusion::{
    listing_table, register_format, register_store, CobsfileFormat, CobsfileFormatFactory,
    CobsfileOptions, Damage, DamageHook, OnDamage, RecordFormat,
};
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::common::TableReference;
use datafusion::error::DataFusionError;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::logical_expr::LogicalPlan;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::basic::{Compression, ZstdLevel};
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion::sql::parser::{DFParserBuilder, Statement};
use futures::StreamExt;

use crate::output::Output;
use crate::text::printable;
use crate::typed::SchemaArgs;
use crate::{quiet_broken_pipe, Failure, Outcome};

/// How `sql` prints its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// An aligned table with a header.
    Table,
    /// CSV with a header line.
    Csv,
    /// One JSON object per row (NDJSON).
    Json,
}

/// How cobsfiles become tables: shared by `sql` and `export --parquet/--json`.
#[derive(Debug, Clone, clap::Args)]
pub struct TableArgs {
    /// How records become rows: avro (typed records; columns from the file's Avro schema),
    /// json (one JSON object per record; columns inferred from a sample), raw (each record as
    /// bytes with its file, block offset and place in the block), or auto: avro when the file
    /// has an Avro schema, json when its records are JSON objects, raw otherwise.
    #[arg(long, value_name = "HOW", default_value = "auto", value_parser = parse_records)]
    records: RecordFormat,
    /// Fail on damaged bytes instead of skipping them (skipped damage is reported on stderr
    /// and ends the command with exit 3).
    #[arg(long)]
    strict: bool,
    /// JSON records read to infer a table's columns, over all its files (default 1000), or
    /// `all`: a field that first appears later is a column too. Columns can also be declared:
    /// CREATE EXTERNAL TABLE t (host VARCHAR, ms BIGINT) STORED AS COBSFILE OPTIONS ('records'
    /// 'json') LOCATION '...'.
    #[arg(long, value_name = "N|all", value_parser = parse_infer)]
    infer_records: Option<usize>,
    /// A column holding each row's file (named `file`, or NAME), for tables of several files
    /// (a directory, a glob); raw tables have one always (table option `file_column`).
    #[arg(long, value_name = "NAME", num_args = 0..=1, default_missing_value = "file")]
    file_column: Option<String>,
}

fn parse_infer(s: &str) -> Result<usize, String> {
    match s {
        "all" => Ok(usize::MAX),
        _ => match s.parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!(
                "'{s}' is not a number of records (1 or more) or 'all'"
            )),
        },
    }
}

fn parse_records(s: &str) -> Result<RecordFormat, String> {
    s.parse().map_err(|e: DataFusionError| e.strip_backtrace())
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The SQL statements, separated by ';': queries, whose results are printed in turn, and
    /// CREATE EXTERNAL TABLE ... STORED AS COBSFILE, which print nothing.
    #[arg(value_name = "SQL", required_unless_present = "script")]
    query: Option<String>,
    /// Read the SQL statements from FILE (`-` for stdin) instead; every positional argument
    /// is then a FILE of a table.
    #[arg(short = 'f', long = "file", value_name = "FILE.sql")]
    script: Option<PathBuf>,
    /// Cobsfiles, directories of them (files ending .cobs) or globs, each a table named by its
    /// file stem (`logs/events.cobs` is `events`; quote names that are not plain lowercase
    /// identifiers: "Events-2").
    #[arg(value_name = "FILE")]
    files: Vec<String>,
    /// A table NAME over PATH (a cobsfile, directory or glob); repeat for more.
    #[arg(long = "table", value_name = "NAME=PATH", value_parser = parse_table)]
    tables: Vec<(String, String)>,
    /// How results are printed.
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
    /// Threads (DataFusion partitions) that read and compute; default: one per core.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    threads: Option<u16>,
    #[command(flatten)]
    table: TableArgs,
    #[command(flatten)]
    schemas: SchemaArgs,
}

fn parse_table(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((name, path)) if !name.is_empty() && !path.is_empty() => {
            Ok((name.to_string(), path.to_string()))
        }
        _ => Err(format!("'{s}' is not NAME=PATH")),
    }
}

/// A DataFusion error on one line.
fn failure(e: DataFusionError) -> Failure {
    use datafusion::sql::sqlparser::parser::ParserError;
    // The parser's errors, in words rather than as Rust's debug text.
    if let DataFusionError::SQL(e, _) = &e {
        let text = match &**e {
            ParserError::ParserError(text) | ParserError::TokenizerError(text) => text.clone(),
            other => other.to_string(),
        };
        return Failure::new(format!(
            "SQL: {}",
            text.split_whitespace().collect::<Vec<_>>().join(" ")
        ));
    }
    let message = e.strip_backtrace();
    // Errors of the scan already name their file and offset; DataFusion's category adds
    // nothing to them.
    let message = message
        .strip_prefix("Execution error: ")
        .or_else(|| message.strip_prefix("Error during planning: "))
        .unwrap_or(&message);
    Failure::new(message.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// The most rows of one aligned table (`--format table`); a larger result is printed as
/// several tables.
const TABLE_ROWS: usize = 10_000;

/// The most bytes of values (in Arrow's memory) of one aligned table.
const TABLE_BYTES: usize = 16 << 20;

/// A session with the cobsfile format, whose scans report damage into the returned list.
struct Session {
    ctx: SessionContext,
    runtime: tokio::runtime::Runtime,
    damage: Arc<Mutex<Vec<Damage>>>,
    hook: DamageHook,
    options: CobsfileOptions,
}

impl Session {
    fn new(
        args: &TableArgs,
        schemas: &SchemaArgs,
        threads: Option<usize>,
    ) -> Result<Session, Failure> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(|e| Failure::new(format!("starting the query engine: {e}")))?;
        let mut config = SessionConfig::new();
        if let Some(n) = threads {
            config = config.with_target_partitions(n);
        }
        let ctx = SessionContext::new_with_config(config);
        let damage = Arc::new(Mutex::new(Vec::new()));
        let seen = damage.clone();
        let hook: DamageHook = Arc::new(move |d: &Damage| {
            seen.lock().expect("damage list").push(d.clone());
        });
        let mut options = CobsfileOptions::new()
            .records(args.records)
            .on_damage(if args.strict {
                OnDamage::Fail
            } else {
                OnDamage::Skip
            });
        if let Some(n) = args.infer_records {
            options = options.schema_infer_max_records(n);
        }
        if let Some(name) = &args.file_column {
            options = options.file_column(name.clone());
        }
        options.max_schemas = schemas.max_schemas;
        options.max_schema_bytes = schemas.max_schema_bytes;
        let factory =
            CobsfileFormatFactory::with_options(options.clone()).with_damage_hook(hook.clone());
        register_format(&mut ctx.state_ref().write(), factory).map_err(failure)?;
        Ok(Session {
            ctx,
            runtime,
            damage,
            hook,
            options,
        })
    }

    /// Registers `paths` as table `name`.
    fn register(&self, name: &str, paths: &[String]) -> Result<(), Failure> {
        for path in paths {
            let glob = path.contains(['*', '?', '[']);
            if !glob && !path.contains("://") {
                std::fs::metadata(path).map_err(|e| Failure::at(path, e))?;
            }
            register_store(&self.ctx, path).map_err(failure)?;
        }
        let format = CobsfileFormat::new(self.options.clone()).with_damage_hook(self.hook.clone());
        let table = self
            .runtime
            .block_on(listing_table(&self.ctx.state(), paths, format))
            .map_err(|e| match e {
                // A store's error names the request, not the table: say which.
                DataFusionError::ObjectStore(e) => failure(DataFusionError::Plan(format!(
                    "{}: {}",
                    paths.join(", "),
                    cobsfile_datafusion::store_error_line(&e)
                ))),
                e => failure(e),
            })?;
        self.ctx
            .register_table(TableReference::bare(name), table)
            .map_err(failure)?;
        Ok(())
    }

    fn stream(&self, sql: &str) -> Result<SendableRecordBatchStream, Failure> {
        self.runtime
            .block_on(async {
                let frame = self.ctx.sql(sql).await?;
                frame.execute_stream().await
            })
            .map_err(failure)
    }

    /// The statements of `text`, parsed as DataFusion parses one, all before any runs: a
    /// mistake in the third prints nothing of the first.
    fn statements(&self, text: &str) -> Result<Vec<Statement>, Failure> {
        let statements = DFParserBuilder::new(text)
            .build()
            .and_then(|mut parser| parser.parse_statements())
            .map_err(failure)?;
        if statements.is_empty() {
            return Err(Failure::usage("no SQL statement given"));
        }
        Ok(statements.into())
    }

    /// Runs `statement`: the stream of a query's rows, or `None` for a statement that makes a
    /// table (done now) and prints nothing.
    fn run(&self, statement: Statement) -> Result<Option<SendableRecordBatchStream>, Failure> {
        self.runtime
            .block_on(async {
                let plan = self.ctx.state().statement_to_plan(statement).await?;
                let quiet = matches!(plan, LogicalPlan::Ddl(_) | LogicalPlan::Statement(_));
                let frame = self.ctx.execute_logical_plan(plan).await?;
                match quiet {
                    true => Ok(None),
                    false => frame.execute_stream().await.map(Some),
                }
            })
            .map_err(failure)
    }

    /// Reports what scans skipped, one line each, and the outcome they make.
    fn finish(&self) -> Outcome {
        let damage = self.damage.lock().expect("damage list");
        for d in damage.iter() {
            eprintln!("cobsfile: {d}");
        }
        if damage.is_empty() {
            Outcome::Clean
        } else {
            Outcome::Damaged
        }
    }
}

/// The default table name of a path: its file stem (`logs/events.cobs` is `events`).
fn table_name(path: &str) -> Result<String, Failure> {
    let trimmed = path.trim_end_matches('/');
    Path::new(trimmed)
        .file_stem()
        .and_then(|s| s.to_str())
        .filter(|s| !s.is_empty() && !s.contains(['*', '?', '[']))
        .map(str::to_string)
        .ok_or_else(|| {
            Failure::usage(format!(
                "{path}: no table name in it; give one with --table NAME={path}"
            ))
        })
}

/// `cobsfile sql`.
pub fn run(mut args: Args) -> Result<Outcome, Failure> {
    // With -f, the statements are the file's, and every positional argument a table's file.
    let text = match &args.script {
        Some(script) => {
            if let Some(first) = args.query.take() {
                args.files.insert(0, first);
            }
            let read = match script.as_os_str() == "-" {
                true => io::read_to_string(io::stdin()),
                false => std::fs::read_to_string(script),
            };
            read.map_err(|e| Failure::at(&script.display().to_string(), e))?
        }
        None => args.query.clone().unwrap_or_default(),
    };
    let session = Session::new(&args.table, &args.schemas, args.threads.map(usize::from))?;
    let mut named: Vec<(String, String)> = Vec::new();
    for path in &args.files {
        named.push((table_name(path)?, path.clone()));
    }
    named.extend(args.tables.iter().cloned());
    for (i, (name, _)) in named.iter().enumerate() {
        if named[..i].iter().any(|(other, _)| other == name) {
            return Err(Failure::usage(format!(
                "two tables named '{name}': name one with --table NAME=PATH"
            )));
        }
    }
    for (name, path) in &named {
        session.register(name, std::slice::from_ref(path))?;
    }
    let statements = session.statements(&text)?;
    let mut out = io::stdout().lock();
    let mut results = 0;
    for statement in statements {
        let run = session.run(statement).map_err(|mut failure| {
            // A JSON field the sample did not meet: say how to reach it.
            let json = !matches!(args.table.records, RecordFormat::Avro | RecordFormat::Raw);
            if json && failure.message.contains("No field named") {
                failure.message.push_str(
                    " (JSON records' columns are those of the first records read: \
                     --infer-records all reads them all, or declare them with CREATE EXTERNAL \
                     TABLE t (name TYPE, ...) STORED AS COBSFILE OPTIONS ('records' 'json') \
                     LOCATION '...')",
                );
            }
            failure
        })?;
        let Some(stream) = run else {
            continue;
        };
        // Results after the first are set apart as psql sets them apart.
        if results > 0 && args.format == Format::Table && !quiet_broken_pipe(writeln!(out))? {
            break;
        }
        results += 1;
        if !print(&session, stream, args.format, &mut out)? {
            break;
        }
    }
    Ok(session.finish())
}

/// Prints the rows of `stream` as `format` says; false when the output's reader has gone.
fn print(
    session: &Session,
    mut stream: SendableRecordBatchStream,
    format: Format,
    out: &mut impl Write,
) -> Result<bool, Failure> {
    let schema = stream.schema();
    session.runtime.block_on(async {
        match format {
            Format::Table => {
                // An aligned table needs its rows before its widths: a result is printed as
                // tables of at most TABLE_ROWS rows or TABLE_BYTES of values (as psql's
                // FETCH_COUNT does), each with its header, so that memory stays bounded
                // however many rows come. The first is printed even when empty.
                let mut chunk: Vec<RecordBatch> = Vec::new();
                let (mut rows, mut bytes, mut printed) = (0, 0, false);
                let mut print = |chunk: &mut Vec<RecordBatch>| -> Result<bool, Failure> {
                    if chunk.is_empty() {
                        chunk.push(RecordBatch::new_empty(schema.clone()));
                    }
                    let table = pretty_format_batches(chunk)
                        .map_err(|e| failure(e.into()))?
                        .to_string();
                    chunk.clear();
                    // Values and column names come from files: shown escaped, not obeyed.
                    quiet_broken_pipe(writeln!(out, "{}", printable(&table, true)))
                };
                while let Some(batch) = stream.next().await {
                    let mut batch = batch.map_err(failure)?;
                    while batch.num_rows() > 0 {
                        let take = batch.num_rows().min(TABLE_ROWS - rows);
                        let part = batch.slice(0, take);
                        batch = batch.slice(take, batch.num_rows() - take);
                        rows += take;
                        // A slice counts its whole buffers: a table may end early, never late.
                        bytes += part.get_array_memory_size();
                        chunk.push(part);
                        if rows >= TABLE_ROWS || bytes >= TABLE_BYTES {
                            if !print(&mut chunk)? {
                                return Ok(false);
                            }
                            (rows, bytes, printed) = (0, 0, true);
                        }
                    }
                }
                if printed && chunk.is_empty() {
                    return Ok(true);
                }
                print(&mut chunk)
            }
            Format::Csv => {
                let mut writer = datafusion::arrow::csv::Writer::new(&mut *out);
                while let Some(batch) = stream.next().await {
                    if !written(writer.write(&batch.map_err(failure)?))? {
                        return Ok(false);
                    }
                }
                quiet_broken_pipe(writer.into_inner().flush())
            }
            Format::Json => {
                let mut writer = datafusion::arrow::json::LineDelimitedWriter::new(&mut *out);
                while let Some(batch) = stream.next().await {
                    if !written(writer.write(&batch.map_err(failure)?))? {
                        return Ok(false);
                    }
                }
                if !written(writer.finish())? {
                    return Ok(false);
                }
                quiet_broken_pipe(writer.into_inner().flush())
            }
        }
    })
}

/// Whether output was written: false when its reader has gone (`cobsfile sql ... | head`).
fn written(result: Result<(), datafusion::arrow::error::ArrowError>) -> Result<bool, Failure> {
    match result {
        Ok(()) => Ok(true),
        Err(datafusion::arrow::error::ArrowError::IoError(_, e)) => quiet_broken_pipe(Err(e)),
        Err(e) => Err(Failure::new(format!("writing output: {e}"))),
    }
}

/// What `export` writes through DataFusion.
#[derive(Debug, Clone, Copy)]
pub enum Export {
    /// Apache Parquet, zstd level 3.
    Parquet,
    /// One JSON object per row.
    Json,
}

/// `cobsfile export FILE... --parquet OUT` or `--json OUT`: every row of the files, as one
/// table (in file order: read on one thread), into a new file put in place when complete.
pub fn export(
    inputs: &[PathBuf],
    to: Export,
    out: &Path,
    force: bool,
    table: &TableArgs,
    schemas: &SchemaArgs,
) -> Result<Outcome, Failure> {
    let paths: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
    let output = Output::create(out, force, &paths)?;
    let out_name = output.name();
    let session = Session::new(table, schemas, Some(1))?;
    let names: Vec<String> = inputs.iter().map(|p| p.display().to_string()).collect();
    session.register("input", &names)?;
    let mut stream = session.stream("SELECT * FROM input")?;
    let schema = stream.schema();
    let writer = output.writer()?;
    let fail = |e: &dyn std::fmt::Display| Failure::at(&out_name, e.to_string());
    session.runtime.block_on(async {
        match to {
            Export::Parquet => {
                let zstd = ZstdLevel::try_new(3).map_err(|e| fail(&e))?;
                let properties = WriterProperties::builder()
                    .set_compression(Compression::ZSTD(zstd))
                    .build();
                let mut writer =
                    ArrowWriter::try_new(writer, schema, Some(properties)).map_err(|e| fail(&e))?;
                while let Some(batch) = stream.next().await {
                    writer
                        .write(&batch.map_err(failure)?)
                        .map_err(|e| fail(&e))?;
                }
                writer.close().map_err(|e| fail(&e))?;
            }
            Export::Json => {
                let mut writer = datafusion::arrow::json::LineDelimitedWriter::new(writer);
                while let Some(batch) = stream.next().await {
                    writer
                        .write(&batch.map_err(failure)?)
                        .map_err(|e| fail(&e))?;
                }
                writer.finish().map_err(|e| fail(&e))?;
                writer.into_inner().flush().map_err(|e| fail(&e))?;
            }
        }
        Ok::<(), Failure>(())
    })?;
    output.persist()?;
    Ok(session.finish())
}
