//! `cobsfile sql` and `cobsfile export --parquet/--json` on the built binary: results checked
//! against the sample events themselves, Parquet read back by the `parquet` crate, damage and
//! every tired mistake ending with one line and the documented exit status.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Output;

mod common;
use common::{bin, root, run, scratch, stderr, stdout};

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::Float64Type;
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

fn samples() -> PathBuf {
    root().join("samples")
}

fn cobsfile(args: &[&str], dir: &Path) -> Output {
    run(bin().current_dir(dir).args(args), b"")
}

/// The sample events packed twice: JSON records (zstd) and typed records.
fn packed(test: &str) -> PathBuf {
    let dir = scratch(test);
    let jsonl = samples().join("events.jsonl");
    let schema = samples().join("events.avsc");
    let out = run(
        bin()
            .args(["pack", "--zstd", "3", "--block-target", "8K"])
            .arg(&jsonl)
            .arg("-o")
            .arg(dir.join("events.cobs")),
        b"",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let out = run(
        bin()
            .args(["pack", "--schema"])
            .arg(&schema)
            .arg(&jsonl)
            .arg("-o")
            .arg(dir.join("typed.cobs")),
        b"",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    dir
}

fn sample_lines() -> Vec<serde_json::Value> {
    std::fs::read_to_string(samples().join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Errors per service, as the sample says.
fn errors_by_service() -> Vec<(String, usize)> {
    let mut counts = std::collections::BTreeMap::new();
    for event in sample_lines() {
        if event["level"] == "error" {
            *counts
                .entry(event["service"].as_str().unwrap().to_string())
                .or_insert(0) += 1;
        }
    }
    counts.into_iter().collect()
}

#[test]
fn sql_answers_as_the_sample_says_in_every_format() {
    let dir = packed("sql_answers");
    let expected: String = errors_by_service()
        .iter()
        .map(|(s, n)| format!("{s},{n}\n"))
        .collect();
    for table in ["events.cobs", "typed.cobs"] {
        let out = cobsfile(
            &[
                "sql",
                "SELECT service, count(*) AS n FROM t WHERE CAST(level AS VARCHAR) = 'error' \
                 GROUP BY service ORDER BY service",
                "--table",
                &format!("t={table}"),
                "--format",
                "csv",
                "--threads",
                "2",
            ],
            &dir,
        );
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(stdout(&out), format!("service,n\n{expected}"), "{table}");
    }
    // The default: an aligned table; the table is named by the file's stem.
    let out = cobsfile(
        &["sql", "SELECT count(*) AS n FROM events", "events.cobs"],
        &dir,
    );
    assert_eq!(
        stdout(&out),
        "+------+\n| n    |\n+------+\n| 2000 |\n+------+\n"
    );
    // JSON: one object per row.
    let out = cobsfile(
        &[
            "sql",
            "SELECT host FROM typed LIMIT 2",
            "typed.cobs",
            "--format",
            "json",
        ],
        &dir,
    );
    assert_eq!(
        stdout(&out),
        "{\"host\":\"web-11\"}\n{\"host\":\"web-07\"}\n"
    );
    assert_eq!(stderr(&out), "");
}

#[test]
fn create_external_table_works_on_the_command_line() {
    let dir = packed("sql_create");
    std::fs::create_dir(dir.join("logs")).unwrap();
    std::fs::rename(dir.join("events.cobs"), dir.join("logs/a.cobs")).unwrap();
    let out = cobsfile(
        &[
            "sql",
            "CREATE EXTERNAL TABLE logs STORED AS COBSFILE LOCATION 'logs/'",
        ],
        &dir,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // A directory argument is a table too.
    let out = cobsfile(&["sql", "SELECT count(msg) AS n FROM logs", "logs/"], &dir);
    assert!(
        stdout(&out).contains("| 2000 |"),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
}

#[test]
fn damage_is_reported_and_exits_3_or_fails_with_strict() {
    let dir = packed("sql_damage");
    let mut bytes = std::fs::read(dir.join("events.cobs")).unwrap();
    let at = bytes.len() / 3;
    bytes[at] ^= 0x5a;
    std::fs::write(dir.join("events.cobs"), &bytes).unwrap();
    let out = cobsfile(
        &["sql", "SELECT count(msg) AS n FROM events", "events.cobs"],
        &dir,
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("cobsfile: ") && err.contains("events.cobs: bytes "),
        "{err}"
    );
    let n: usize = stdout(&out)
        .lines()
        .find_map(|l| l.trim_matches(|c| c == '|' || c == ' ').parse().ok())
        .unwrap();
    assert!(n < 2000 && n > 1000, "{n}");

    let out = cobsfile(
        &[
            "sql",
            "SELECT count(msg) AS n FROM events",
            "events.cobs",
            "--strict",
        ],
        &dir,
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout(&out), "");
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("events.cobs: bytes ") && err.contains("skipped"),
        "{err}"
    );

    // count(*) was answered from the index, every record written, exit 0 even with
    // --strict: it now agrees with a scan, and --strict holds for it too.
    let out = cobsfile(
        &["sql", "SELECT count(*) AS n FROM events", "events.cobs"],
        &dir,
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let all: usize = stdout(&out)
        .lines()
        .find_map(|l| l.trim_matches(|c| c == '|' || c == ' ').parse().ok())
        .unwrap();
    assert_eq!(all, n);
    let out = cobsfile(
        &[
            "sql",
            "SELECT count(*) AS n FROM events",
            "events.cobs",
            "--strict",
        ],
        &dir,
    );
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert_eq!(stdout(&out), "");
}

#[test]
fn mistakes_end_with_one_line() {
    let dir = packed("sql_mistakes");
    std::fs::write(dir.join("notes.txt"), "just some text\n").unwrap();
    let cases: &[(&[&str], i32, &str)] = &[
        (
            &["sql", "SELEC 1", "events.cobs"],
            1,
            "SQL: Expected: an SQL statement",
        ),
        (
            &["sql", "SELECT (1", "events.cobs"],
            1,
            "SQL: Expected: ), found: EOF",
        ),
        (&["sql", "  ;  ", "events.cobs"], 2, "no SQL statement"),
        (
            &["sql", "-f", "missing.sql", "events.cobs"],
            1,
            "missing.sql: no such file",
        ),
        (
            &["sql", "SELECT 1", "--infer-records", "0"],
            2,
            "'0' is not a number",
        ),
        (
            &["sql", "SELECT * FROM nope", "events.cobs"],
            1,
            "'datafusion.public.nope' not found",
        ),
        (
            &["sql", "SELECT 1", "missing.cobs"],
            1,
            "missing.cobs: no such file",
        ),
        (
            &["sql", "SELECT 1", "notes.txt"],
            1,
            "notes.txt: not a cobsfile",
        ),
        (
            &[
                "sql",
                "SELECT 1",
                "events.cobs",
                "--table",
                "events=typed.cobs",
            ],
            2,
            "two tables named 'events'",
        ),
        (
            &["sql", "SELECT 1", "--records", "xml", "events.cobs"],
            2,
            "'records' is 'xml'",
        ),
        (
            &[
                "sql",
                "SELECT * FROM typed",
                "typed.cobs",
                "--records",
                "json",
            ],
            1,
            "is not a JSON object",
        ),
        (
            &["sql", "SELECT 1", "events.cobs", "--records", "avro"],
            1,
            "no Avro schema",
        ),
        (
            &["export", "events.cobs", "typed.cobs", "-o", "x.avro"],
            2,
            "exports one cobsfile",
        ),
        (
            &["export", "events.cobs", "--parquet", "events.cobs"],
            2,
            "events.cobs",
        ),
        (&["export", "-", "--json", "x.ndjson"], 2, "not stdin"),
    ];
    for (args, code, says) in cases {
        let out = cobsfile(args, &dir);
        let err = stderr(&out);
        assert!(!err.contains("ParserError"), "{args:?}: {err}");
        assert_eq!(out.status.code(), Some(*code), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        if *code != 2 || !err.starts_with("error:") {
            assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        }
    }
    assert!(!dir.join("x.avro").exists() && !dir.join("x.ndjson").exists());
}

#[test]
fn export_to_parquet_and_json() {
    let dir = packed("sql_export");
    let out = cobsfile(
        &["export", "typed.cobs", "--parquet", "events.parquet"],
        &dir,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let reader =
        ParquetRecordBatchReaderBuilder::try_new(File::open(dir.join("events.parquet")).unwrap())
            .unwrap()
            .build()
            .unwrap();
    let lines = sample_lines();
    let mut row = 0;
    for batch in reader {
        let batch = batch.unwrap();
        let schema = batch.schema();
        let latency = batch
            .column(schema.index_of("latency_ms").unwrap())
            .as_primitive::<Float64Type>();
        let request = batch.column(schema.index_of("request_id").unwrap());
        let request = datafusion::arrow::compute::cast(
            request,
            &datafusion::arrow::datatypes::DataType::Utf8,
        )
        .unwrap();
        let request = request.as_string::<i32>();
        for i in 0..batch.num_rows() {
            assert_eq!(latency.value(i), lines[row]["latency_ms"].as_f64().unwrap());
            assert_eq!(request.value(i), lines[row]["request_id"].as_str().unwrap());
            assert!(!request.is_null(i));
            row += 1;
        }
    }
    assert_eq!(row, lines.len(), "rows in file order");

    // JSON records to NDJSON: the same objects back.
    let out = cobsfile(&["export", "events.cobs", "--json", "events.ndjson"], &dir);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let back: Vec<serde_json::Value> = std::fs::read_to_string(dir.join("events.ndjson"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(back, lines);

    // Existing outputs are kept without --force.
    let out = cobsfile(&["export", "events.cobs", "--json", "events.ndjson"], &dir);
    assert_eq!(out.status.code(), Some(2));
    let out = cobsfile(
        &[
            "export",
            "events.cobs",
            "--json",
            "events.ndjson",
            "--force",
        ],
        &dir,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// Two schemas that differ only in a primitive's logical type share a fingerprint. `sql`
/// decoded every record with the file's last schema, so a 2023 timestamp in milliseconds read
/// as 1970 in microseconds; now the second announcement puts the fingerprint in conflict
/// (spec 15.3): the records before it read as written, those after it are reported.
#[test]
fn a_logical_type_changed_under_one_fingerprint_is_not_read_with_the_other() {
    use cobsfile::avro::WriterSchema;
    let dir = scratch("sql-logical-conflict");
    let with = |unit: &str| {
        WriterSchema::parse(&format!(
            r#"{{"type":"record","name":"E","fields":[{{"name":"ts","type":{{"type":"long","logicalType":"timestamp-{unit}"}}}}]}}"#
        ))
        .unwrap()
    };
    let (millis, micros) = (with("millis"), with("micros"));
    assert_eq!(millis.fingerprint(), micros.fingerprint());
    // 2023-11-14T22:13:20Z in milliseconds, as a zigzag varint.
    let datum = |n: i64| {
        let (mut z, mut out) = (((n << 1) ^ (n >> 63)) as u64, Vec::new());
        while z >= 0x80 {
            out.push(z as u8 | 0x80);
            z >>= 7;
        }
        out.push(z as u8);
        [&millis.prefix()[..], &out].concat()
    };
    let mut writer = cobsfile::Writer::new(Vec::new()).unwrap();
    writer.write_metadata(millis.metadata()).unwrap();
    writer.write_record(&datum(1_700_000_000_000)).unwrap();
    writer.flush().unwrap();
    writer.write_metadata(micros.metadata()).unwrap();
    writer.write_record(&datum(1_700_000_000_000_000)).unwrap();
    std::fs::write(dir.join("t.cobs"), writer.finish().unwrap()).unwrap();
    let out = cobsfile(
        &["sql", "SELECT ts FROM t", "t.cobs", "--format", "csv"],
        &dir,
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("2023-11-14T22:13:20"), "{text}");
    assert!(!text.contains("1970"), "{text}");
    assert_eq!(text.lines().count(), 2, "{text}");
    assert!(
        stderr(&out).contains("schema-conflict") || stderr(&out).contains("conflict"),
        "{}",
        stderr(&out)
    );
}

/// An aligned table is printed in parts of at most 10,000 rows, each with its header, so
/// that a large result does not have to be held whole (issue 32, finding 11: 300,000 rows
/// of 1 KB took 1.9 GB): every row still comes, in order.
#[test]
fn a_large_table_is_printed_in_parts() {
    let dir = scratch("sql-table-parts");
    let out = cobsfile(
        &[
            "sql",
            "SELECT value FROM generate_series(1, 25000) ORDER BY value",
        ],
        &dir,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(text.matches("| value |").count(), 3, "{}", &text[..200]);
    let values: Vec<u64> = text
        .lines()
        .filter_map(|l| l.trim_matches(|c| c == '|' || c == ' ').parse().ok())
        .collect();
    assert_eq!(values, (1..=25000).collect::<Vec<u64>>());

    let empty = cobsfile(&["sql", "SELECT value FROM generate_series(1, 0)"], &dir);
    assert_eq!(
        stdout(&empty),
        "+-------+\n| value |\n+-------+\n+-------+\n"
    );
}

/// Several statements in one run, from the command line or a file (`-f`): each query's
/// result in turn, CREATE EXTERNAL TABLE printing nothing, a mistake in any of them before
/// any runs.
#[test]
fn several_statements_and_a_file_of_them() {
    let dir = packed("sql_statements");
    let out = cobsfile(
        &[
            "sql",
            "SELECT count(*) AS n FROM events; SELECT count(*) AS m FROM typed WHERE level = 'ERROR';",
            "events.cobs",
            "typed.cobs",
            "--format",
            "csv",
        ],
        &dir,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let errors = sample_lines()
        .iter()
        .filter(|v| v["level"] == "ERROR")
        .count();
    assert_eq!(stdout(&out), format!("n\n2000\nm\n{errors}\n"));

    std::fs::write(
        dir.join("q.sql"),
        "-- the events, as a table made here\n\
         CREATE EXTERNAL TABLE logs STORED AS COBSFILE LOCATION 'events.cobs';\n\
         SELECT count(*) AS n FROM logs;\n\
         SELECT count(*) AS t FROM typed;\n",
    )
    .unwrap();
    let out = cobsfile(&["sql", "-f", "q.sql", "typed.cobs"], &dir);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    // Two tables, a blank line between, nothing for the CREATE.
    assert_eq!(text.matches("| 2000 |").count(), 2, "{text}");
    assert!(text.starts_with("+-"), "{text}");
    assert!(text.contains("+\n\n+"), "{text}");
    // From stdin.
    let script = std::fs::read(dir.join("q.sql")).unwrap();
    let out = run(
        bin()
            .current_dir(&dir)
            .args(["sql", "-f", "-", "typed.cobs", "--format", "csv"]),
        &script,
    );
    assert_eq!(stdout(&out), "n\n2000\nt\n2000\n", "{}", stderr(&out));
    // A mistake in the last statement: nothing printed.
    let out = cobsfile(&["sql", "SELECT 1 AS a; SELEC 2", "events.cobs"], &dir);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout(&out), "");
}

/// A JSON field that first appears after the records sampled: named in the error with how
/// to reach it, and reached with --infer-records all or columns declared.
#[test]
fn a_json_field_past_the_sample_is_reached_by_inferring_from_all() {
    let dir = scratch("sql_late_field");
    let mut text = String::new();
    for i in 0..3000 {
        match i < 2500 {
            true => text.push_str(&format!("{{\"n\": {i}}}\n")),
            false => text.push_str(&format!("{{\"n\": {i}, \"host\": \"web-{}\"}}\n", i % 3)),
        }
    }
    std::fs::write(dir.join("late.jsonl"), text).unwrap();
    let out = cobsfile(&["pack", "late.jsonl", "-o", "late.cobs"], &dir);
    assert!(out.status.success(), "{}", stderr(&out));
    let query = "SELECT count(host) AS hosts FROM late";
    let out = cobsfile(&["sql", query, "late.cobs"], &dir);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("No field named host") && err.contains("--infer-records all"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    for args in [
        &["sql", query, "late.cobs", "--infer-records", "all", "--format", "csv"][..],
        &["sql", query, "late.cobs", "--infer-records", "2600", "--format", "csv"],
        &[
            "sql",
            "CREATE EXTERNAL TABLE late (n BIGINT, host VARCHAR) STORED AS COBSFILE \
             OPTIONS ('records' 'json') LOCATION 'late.cobs'; SELECT count(host) AS hosts FROM late",
            "--format",
            "csv",
        ],
    ] {
        let out = cobsfile(args, &dir);
        assert_eq!(stdout(&out), "hosts\n500\n", "{args:?}: {}", stderr(&out));
    }
}

/// A table of several files says which file each row came from, for every record format:
/// `--file-column [NAME]` or the table option `file_column`; a name the records use is one
/// clear line.
#[test]
fn a_file_column_names_each_rows_file() {
    let dir = packed("sql_file_column");
    for (table, file) in [("json", "events.cobs"), ("typed", "typed.cobs")] {
        std::fs::create_dir(dir.join(table)).unwrap();
        for part in ["a", "b"] {
            std::fs::copy(dir.join(file), dir.join(format!("{table}/{part}.cobs"))).unwrap();
        }
        let out = cobsfile(
            &[
                "sql",
                &format!(
                    "SELECT file, count(*) AS n, count(service) AS s FROM {table} GROUP BY file ORDER BY file"
                ),
                &format!("{table}/"),
                "--file-column",
                "--format",
                "csv",
            ],
            &dir,
        );
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let text = stdout(&out);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "file,n,s", "{text}");
        assert_eq!(lines.len(), 3, "{text}");
        assert!(
            lines[1].ends_with(&format!("{table}/a.cobs,2000,2000")),
            "{text}"
        );
        assert!(
            lines[2].ends_with(&format!("{table}/b.cobs,2000,2000")),
            "{text}"
        );
        // Named otherwise, alone in a query, in a filter; and by the table option.
        let out = cobsfile(
            &[
                "sql",
                &format!("SELECT count(*) AS n FROM {table} WHERE origin LIKE '%b.cobs'"),
                &format!("{table}/"),
                "--file-column",
                "origin",
                "--format",
                "csv",
            ],
            &dir,
        );
        assert_eq!(stdout(&out), "n\n2000\n", "{}", stderr(&out));
        let out = cobsfile(
            &[
                "sql",
                &format!(
                    "CREATE EXTERNAL TABLE t STORED AS COBSFILE OPTIONS ('file_column' 'src') \
                     LOCATION '{table}/'; SELECT DISTINCT src FROM t ORDER BY src"
                ),
                "--format",
                "csv",
            ],
            &dir,
        );
        let text = stdout(&out);
        assert_eq!(text.lines().count(), 3, "{text}{}", stderr(&out));
        assert!(text.starts_with("src\n"), "{text}");
    }
    // A name the records have.
    let out = cobsfile(
        &["sql", "SELECT 1", "json/", "--file-column", "service"],
        &dir,
    );
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("have a column \"service\""), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}
