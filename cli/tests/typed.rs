//! Typed records on the command line: `pack --schema`, `cat --json` (and `--reader-schema`),
//! `meta` showing the schema, and Avro object container files through `import` and `export`,
//! with `apache-avro` reading what `export` writes.

use std::path::{Path, PathBuf};
use std::process::Output;

mod common;
use common::{bin, root, run, scratch, stderr, stdout};

use cobsfile::avro::apache_avro::{self, types::Value};

fn samples() -> PathBuf {
    root().join("samples")
}

/// Stderr holds only the tool's own lines (no panic), at most `max`.
fn clean(out: &Output, max: usize) {
    let err = stderr(out);
    assert!(err.lines().all(|l| l.starts_with("cobsfile: ")), "{err}");
    assert!(err.lines().count() <= max, "{err}");
}

/// `pack --schema SCHEMA [extra] INPUT -o OUTPUT`.
fn pack_typed(schema: &Path, input: &Path, output: &Path, extra: &[&str]) -> Output {
    run(
        bin()
            .args(["pack", "--schema"])
            .arg(schema)
            .args(extra)
            .arg(input)
            .arg("-o")
            .arg(output),
        b"",
    )
}

/// The sample events packed as typed records.
fn typed_sample(dir: &Path) -> PathBuf {
    let out = dir.join("events.cobs");
    let done = pack_typed(
        &samples().join("events.avsc"),
        &samples().join("events.jsonl"),
        &out,
        &[],
    );
    assert_eq!(done.status.code(), Some(0), "{}", stderr(&done));
    out
}

#[test]
fn pack_schema_then_cat_json_gives_the_lines_back() {
    let dir = scratch("round-trip");
    let file = typed_sample(&dir);
    let out = run(bin().args(["cat", "--json"]).arg(&file), b"");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lines = std::fs::read(samples().join("events.jsonl")).unwrap();
    assert_eq!(out.stdout, lines, "cat --json is not the input");
    // --skip and --limit count typed records.
    let out = run(
        bin()
            .args(["cat", "--json", "--skip", "1998", "--limit", "1"])
            .arg(&file),
        b"",
    );
    let second_last = lines.split(|&b| b == b'\n').nth(1998).unwrap();
    assert_eq!(out.stdout, [second_last, b"\n"].concat());
    // meta shows the schema as indented JSON and the fingerprint as hex.
    let out = run(bin().arg("meta").arg(&file), b"");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("  avro.schema =\n    {\n      \"type\": \"record\""),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("  avro.fingerprint = ") && l.len() == 37),
        "{text}"
    );
    let out = run(bin().args(["meta", "--json"]).arg(&file), b"");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["entries"]["avro.schema"]["name"], "LogEvent");
}

#[test]
fn a_line_that_does_not_conform_stops_pack_and_leaves_nothing() {
    let dir = scratch("invalid");
    let input = dir.join("in.jsonl");
    let good = r#"{"ts":"t","level":"info","service":"s","host":"h","request_id":"r","latency_ms":1.5,"msg":"m"}"#;
    let bad_enum = good.replace("\"info\"", "\"fatal\"");
    std::fs::write(&input, format!("{good}\n{bad_enum}\nnot json\n{good}\n")).unwrap();
    let output = dir.join("out.cobs");
    let schema = samples().join("events.avsc");
    let out = pack_typed(&schema, &input, &output, &[]);
    assert_eq!(out.status.code(), Some(1));
    clean(&out, 1);
    assert!(stderr(&out).contains("line 2"), "{}", stderr(&out));
    assert!(stderr(&out).contains(".level"), "{}", stderr(&out));
    assert!(!output.exists(), "a partial output was left");
    // --invalid skip: the valid lines are written, each skipped one reported, exit 3.
    let out = pack_typed(&schema, &input, &output, &["--invalid", "skip"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    clean(&out, 3);
    assert!(stderr(&out).contains("line 3"), "{}", stderr(&out));
    let out = run(bin().args(["cat", "--json"]).arg(&output), b"");
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        format!("{good}\n{good}\n")
    );
    // A schema file that does not parse: one line, exit 1, nothing written.
    let broken = dir.join("broken.avsc");
    std::fs::write(&broken, r#"{"type": "recor"#).unwrap();
    let other = dir.join("other.cobs");
    let out = pack_typed(&broken, &input, &other, &[]);
    assert_eq!(out.status.code(), Some(1));
    clean(&out, 1);
    assert!(!other.exists());
}

#[test]
fn cat_json_resolves_to_a_reader_schema_and_refuses_untyped_files() {
    let dir = scratch("resolve");
    let file = typed_sample(&dir);
    let reader = dir.join("v2.avsc");
    std::fs::write(
        &reader,
        r#"{"type":"record","name":"LogEvent","namespace":"example.events","fields":[
            {"name":"service","type":"string"},
            {"name":"region","type":"string","default":"eu"},
            {"name":"latency","type":"double","aliases":["latency_ms"]}]}"#,
    )
    .unwrap();
    let out = run(
        bin()
            .args(["cat", "--json", "--reader-schema"])
            .arg(&reader)
            .arg(&file),
        b"",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let first: serde_json::Value = serde_json::from_str(
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        first,
        serde_json::json!({"service": "billing", "region": "eu", "latency": 68.88})
    );
    // Records of bytes: one line, exit 1.
    let raw = dir.join("raw.cobs");
    let out = run(
        bin()
            .arg("pack")
            .arg(samples().join("events.jsonl"))
            .arg("-o")
            .arg(&raw),
        b"",
    );
    assert_eq!(out.status.code(), Some(0));
    let out = run(bin().args(["cat", "--json"]).arg(&raw), b"");
    assert_eq!(out.status.code(), Some(1));
    clean(&out, 1);
    assert!(stderr(&out).contains("not typed"), "{}", stderr(&out));
}

/// `export` with every codec writes a file apache-avro reads as the same values; `import`
/// of it gives the same records back, byte for byte.
#[test]
fn export_then_import_gives_the_same_records_with_every_codec() {
    let dir = scratch("export");
    let file = typed_sample(&dir);
    let raw = run(bin().arg("cat").arg(&file), b"").stdout;
    let json = run(bin().args(["cat", "--json"]).arg(&file), b"").stdout;
    for codec in ["null", "deflate", "snappy", "zstandard", "bzip2", "xz"] {
        let avro = dir.join(format!("events.{codec}.avro"));
        let out = run(
            bin()
                .arg("export")
                .arg(&file)
                .arg("-o")
                .arg(&avro)
                .args(["--codec", codec]),
            b"",
        );
        assert_eq!(out.status.code(), Some(0), "{codec}: {}", stderr(&out));
        let bytes = std::fs::read(&avro).unwrap();
        let reader = apache_avro::Reader::new(&bytes[..]).unwrap();
        let values: Vec<Value> = reader.map(Result::unwrap).collect();
        assert_eq!(values.len(), 2000, "{codec}");
        let back = dir.join(format!("back.{codec}.cobs"));
        let out = run(bin().arg("import").arg(&avro).arg("-o").arg(&back), b"");
        assert_eq!(out.status.code(), Some(0), "{codec}: {}", stderr(&out));
        assert_eq!(run(bin().arg("cat").arg(&back), b"").stdout, raw, "{codec}");
        assert_eq!(
            run(bin().args(["cat", "--json"]).arg(&back), b"").stdout,
            json,
            "{codec}"
        );
    }
}

/// `import --zstd --no-lines` stores records after their lengths (codecs 1 and 2), for
/// readers that predate records as lines, as `pack --no-lines` does; the records are the same.
#[test]
fn import_no_lines_writes_no_lines_codecs() {
    let dir = scratch("import-no-lines");
    let file = typed_sample(&dir);
    let raw = run(bin().arg("cat").arg(&file), b"").stdout;
    let avro = dir.join("events.avro");
    let out = run(bin().arg("export").arg(&file).arg("-o").arg(&avro), b"");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let back = dir.join("back.cobs");
    let out = run(
        bin()
            .arg("import")
            .arg(&avro)
            .args(["--zstd", "3", "--no-lines", "-o"])
            .arg(&back),
        b"",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(run(bin().arg("cat").arg(&back), b"").stdout, raw);
    let listing = String::from_utf8(run(bin().arg("ls").arg(&back), b"").stdout).unwrap();
    assert!(listing.contains("zstd"), "{listing}");
    assert!(!listing.contains("lines"), "{listing}");
    let out = run(
        bin()
            .arg("import")
            .arg(&avro)
            .args(["--no-lines", "-o"])
            .arg(dir.join("x.cobs")),
        b"",
    );
    assert_eq!(out.status.code(), Some(2), "--no-lines without --zstd");
}

/// A damaged Avro file: every block that passes its checks is imported, the lost bytes are
/// reported, exit 3; apache-avro's own reader stops at the damage.
#[test]
fn import_reads_on_past_damage() {
    let dir = scratch("import-damage");
    let file = typed_sample(&dir);
    let avro = dir.join("events.avro");
    let out = run(
        bin()
            .arg("export")
            .arg(&file)
            .arg("-o")
            .arg(&avro)
            .args(["--codec", "snappy"]),
        b"",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mut bytes = std::fs::read(&avro).unwrap();
    let middle = bytes.len() / 3;
    bytes[middle] ^= 0x20;
    let damaged = dir.join("damaged.avro");
    std::fs::write(&damaged, &bytes).unwrap();
    let stopped = apache_avro::Reader::new(&bytes[..])
        .map(|r| r.take_while(Result::is_ok).count())
        .unwrap_or(0);
    let back = dir.join("back.cobs");
    let out = run(bin().arg("import").arg(&damaged).arg("-o").arg(&back), b"");
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    clean(&out, 2);
    assert!(stderr(&out).contains("damaged"), "{}", stderr(&out));
    let json = run(bin().args(["cat", "--json"]).arg(&back), b"").stdout;
    let lines = json
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .count();
    assert!(
        lines > stopped,
        "{lines} records, apache-avro read {stopped}"
    );
    assert!(lines < 2000);
    // Every record imported is one of the originals.
    let all = std::fs::read_to_string(samples().join("events.jsonl")).unwrap();
    for line in String::from_utf8(json).unwrap().lines() {
        assert!(all.contains(line), "{line}");
    }
}

#[test]
fn import_and_export_refuse_what_they_cannot_convert() {
    let dir = scratch("refuse");
    // Not an Avro file; a truncated one: one line, exit 1, no output.
    let not_avro = dir.join("x.avro");
    std::fs::write(&not_avro, b"PAR1 not avro").unwrap();
    let out_path = dir.join("x.cobs");
    let out = run(
        bin().arg("import").arg(&not_avro).arg("-o").arg(&out_path),
        b"",
    );
    assert_eq!(out.status.code(), Some(1));
    clean(&out, 1);
    assert!(!out_path.exists());
    std::fs::write(&not_avro, b"Obj\x01\x04\x16avro.schema").unwrap();
    let out = run(
        bin().arg("import").arg(&not_avro).arg("-o").arg(&out_path),
        b"",
    );
    assert_eq!(out.status.code(), Some(1));
    clean(&out, 1);
    assert!(stderr(&out).contains("offset"), "{}", stderr(&out));
    assert!(!out_path.exists());
    // A cobsfile of two schemas: export needs a reader schema to make one Avro file.
    let file = typed_sample(&dir);
    let v2 = dir.join("v2.avsc");
    std::fs::write(
        &v2,
        r#"{"type":"record","name":"LogEvent","namespace":"example.events","fields":[
            {"name":"service","type":"string"},{"name":"msg","type":"string"}]}"#,
    )
    .unwrap();
    let out = run(
        bin()
            .args(["pack", "--append"])
            .arg(&file)
            .arg("--schema")
            .arg(&v2),
        b"{\"service\":\"s\",\"msg\":\"m\"}\n",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let avro = dir.join("two.avro");
    let out = run(bin().arg("export").arg(&file).arg("-o").arg(&avro), b"");
    assert_eq!(out.status.code(), Some(1));
    clean(&out, 1);
    assert!(
        stderr(&out).contains("more than one schema"),
        "{}",
        stderr(&out)
    );
    assert!(!avro.exists());
    let out = run(
        bin()
            .arg("export")
            .arg(&file)
            .arg("-o")
            .arg(&avro)
            .arg("--reader-schema")
            .arg(&v2),
        b"",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let bytes = std::fs::read(&avro).unwrap();
    assert_eq!(apache_avro::Reader::new(&bytes[..]).unwrap().count(), 2001);
}

/// A typed file of one record per datum given (raw bytes after the prefix, valid or not),
/// written with `schema`, through the library's writer without its checks.
fn typed_raw(path: &Path, schema: &str, datums: &[&[u8]]) {
    let schema = cobsfile::avro::WriterSchema::parse(schema).unwrap();
    let mut writer = cobsfile::Writer::new(Vec::new()).unwrap();
    writer.write_metadata(schema.metadata()).unwrap();
    for datum in datums {
        writer
            .write_record(&[&schema.prefix()[..], datum].concat())
            .unwrap();
    }
    std::fs::write(path, writer.finish().unwrap()).unwrap();
}

/// A reader schema that would narrow a value is refused, naming the field, not cast
/// (a long 4294967301 read as an int was 5).
#[test]
fn reader_schemas_resolve_exactly_or_not_at_all() {
    let dir = scratch("exact-resolution");
    let file = dir.join("long.cobs");
    let long = r#"{"type":"record","name":"R","fields":[{"name":"x","type":"long"}]}"#;
    // 4294967301 as a zigzag varint.
    let mut datum = Vec::new();
    let mut n = 4_294_967_301u64 << 1;
    while n >= 0x80 {
        datum.push((n as u8) | 0x80);
        n >>= 7;
    }
    datum.push(n as u8);
    typed_raw(&file, long, &[&datum]);
    let narrow = dir.join("int.avsc");
    std::fs::write(
        &narrow,
        r#"{"type":"record","name":"R","fields":[{"name":"x","type":"int"}]}"#,
    )
    .unwrap();
    let out = run(
        bin()
            .args(["cat", "--json", "--reader-schema"])
            .arg(&narrow)
            .arg(&file),
        b"",
    );
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        stderr(&out).contains("at .x: the writer's long does not resolve to the reader's int"),
        "{}",
        stderr(&out)
    );
    clean(&out, 2);
    let avro = dir.join("int.avro");
    let out = run(
        bin()
            .args(["export", "--reader-schema"])
            .arg(&narrow)
            .arg(&file)
            .arg("-o")
            .arg(&avro),
        b"",
    );
    assert_ne!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!avro.exists());
    // Widening reads.
    let wide = dir.join("double.avsc");
    std::fs::write(
        &wide,
        r#"{"type":"record","name":"R","fields":[{"name":"x","type":"double"}]}"#,
    )
    .unwrap();
    let out = run(
        bin()
            .args(["cat", "--json", "--reader-schema"])
            .arg(&wide)
            .arg(&file),
        b"",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout_text(&out), "{\"x\":4294967301.0}\n");
}

fn stdout_text(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// `export` copies only datums whose values are valid (spec 15.3, check 5): a string that is
/// not UTF-8, an enum index out of range, a boolean byte of 2 are reported as `cat --json`
/// reports them, and the Avro file holds the good records, which apache-avro reads.
#[test]
fn export_refuses_what_cat_json_refuses() {
    let dir = scratch("export-invalid");
    let file = dir.join("bad.cobs");
    let schema = r#"{"type":"record","name":"R","fields":[{"name":"s","type":"string"},
        {"name":"e","type":{"type":"enum","name":"E","symbols":["A","B"]}},
        {"name":"b","type":"boolean"}]}"#;
    // "ok", A, true; then each field wrong in turn.
    let good: &[u8] = &[4, b'o', b'k', 0, 1];
    let not_utf8: &[u8] = &[4, 0xff, 0xfe, 0, 1];
    let enum_out_of_range: &[u8] = &[4, b'o', b'k', 8, 1];
    let boolean_two: &[u8] = &[4, b'o', b'k', 0, 2];
    typed_raw(
        &file,
        schema,
        &[good, not_utf8, good, enum_out_of_range, boolean_two, good],
    );
    let cat = run(bin().args(["cat", "--json"]).arg(&file), b"");
    assert_eq!(cat.status.code(), Some(3), "{}", stderr(&cat));
    assert_eq!(stdout_text(&cat).lines().count(), 3);
    let avro = dir.join("bad.avro");
    let out = run(bin().arg("export").arg(&file).arg("-o").arg(&avro), b"");
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(stderr(&out).lines().count(), 3, "{}", stderr(&out));
    let reader = apache_avro::Reader::new(std::fs::File::open(&avro).unwrap()).unwrap();
    let values: Vec<Value> = reader.map(|v| v.unwrap()).collect();
    assert_eq!(values.len(), 3);
}

/// `meta` shows metadata keys and values from a file escaped: a key holding a newline, ESC
/// or BEL cannot write to the terminal.
#[test]
fn meta_escapes_what_it_prints() {
    let dir = scratch("meta-escapes");
    let file = dir.join("keys.cobs");
    let mut writer = cobsfile::Writer::new(Vec::new()).unwrap();
    writer
        .write_metadata([("evil\n\x1b]0;title\x07", "\x1b[2Jvalue")])
        .unwrap();
    std::fs::write(&file, writer.finish().unwrap()).unwrap();
    let out = run(bin().arg("meta").arg(&file), b"");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout_text(&out);
    assert!(!text.contains('\x1b') && !text.contains('\x07'), "{text:?}");
    assert!(
        text.contains(r#"  evil\n\u{1b}]0;title\u{7} = "\u{1b}[2Jvalue""#),
        "{text}"
    );
    assert_eq!(text.lines().count(), 2, "{text}");
}

/// Runs `cmd` with its standard output (and, if `both`, its standard error) on a new
/// pseudo-terminal; returns its exit code, what the terminal showed, and its standard error
/// when that is not the terminal.
#[cfg(unix)]
fn on_terminal(mut cmd: std::process::Command, both: bool) -> (Option<i32>, String, String) {
    use std::io::Read;
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::process::Stdio;
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty writes two descriptors into the integers given; the null pointers ask
    // for no name, no settings and no window size.
    let done = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(done, 0, "openpty");
    // SAFETY: both descriptors are new and owned by nothing else.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    cmd.stdin(Stdio::null())
        .stdout(Stdio::from(slave.try_clone().unwrap()));
    if both {
        cmd.stderr(Stdio::from(slave.try_clone().unwrap()));
    } else {
        cmd.stderr(Stdio::piped());
    }
    let mut child = cmd.spawn().unwrap();
    // The terminal closes when the child's ends are its only ones: the command holds copies.
    drop(cmd);
    drop(slave);
    let mut master = std::fs::File::from(master);
    let mut shown = Vec::new();
    // Read until the terminal closes (EIO once the child's ends are gone).
    let mut buf = [0u8; 4096];
    loop {
        match master.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => shown.extend_from_slice(&buf[..n]),
        }
    }
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        e.read_to_string(&mut err).unwrap();
    }
    let status = child.wait().unwrap();
    (
        status.code(),
        String::from_utf8_lossy(&shown).into_owned(),
        err,
    )
}

/// `cat` of typed records to a terminal refuses, as `pack` refuses to write binary to one;
/// `cat --json` shows them. A bar is never drawn on the terminal the records go to.
#[cfg(unix)]
#[test]
fn a_terminal_gets_text_and_no_progress_bar() {
    let dir = scratch("terminal");
    let file = typed_sample(&dir);
    let command = |args: &[&str], file: &Path| {
        let mut command = bin();
        command.args(args).arg(file);
        command
    };
    let (code, shown, err) = on_terminal(command(&["cat"], &file), false);
    assert_eq!(code, Some(1), "{err}");
    assert!(!shown.contains('\0'), "{shown:?}");
    assert!(err.contains("cat --json"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let (code, shown, _) = on_terminal(command(&["cat", "--json"], &file), true);
    assert_eq!(code, Some(0));
    assert!(
        shown.contains("\"service\""),
        "{}",
        &shown[..shown.len().min(200)]
    );
    let plain = dir.join("plain.cobs");
    let out = run(
        bin()
            .arg("pack")
            .arg(samples().join("events.jsonl"))
            .arg("-o")
            .arg(&plain),
        b"",
    );
    assert_eq!(out.status.code(), Some(0));
    let (code, shown, _) = on_terminal(command(&["cat"], &plain), true);
    assert_eq!(code, Some(0));
    assert!(!shown.contains("reading"), "a bar was drawn");
    assert_eq!(shown.lines().count(), 2000);
}

/// An intact Avro file whose block holds one datum nested deeper than the limit: that datum
/// is left out and reported with the option that raises the limit, the block's other datums
/// imported (the whole block was reported as damaged, good records included); the option
/// imports it too.
#[test]
fn import_leaves_out_only_the_datum_over_a_limit() {
    let dir = scratch("import-limit");
    let schema = apache_avro::Schema::parse_str(
        r#"{"type":"record","name":"List","fields":[
        {"name":"value","type":"long"},{"name":"next","type":["null","List"]}]}"#,
    )
    .unwrap();
    // 100 records deep: each adds a record and a union, 200 levels.
    let list = |depth: usize| {
        (0..depth).fold(
            Value::Record(vec![
                ("value".into(), Value::Long(0)),
                ("next".into(), Value::Union(0, Box::new(Value::Null))),
            ]),
            |inner, i| {
                Value::Record(vec![
                    ("value".into(), Value::Long(i as i64 + 1)),
                    ("next".into(), Value::Union(1, Box::new(inner))),
                ])
            },
        )
    };
    // apache-avro recurses deeply (debug builds): on a thread with room for it.
    let bytes = std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(move || {
            let mut writer = apache_avro::Writer::new(&schema, Vec::new());
            for value in [list(1), list(100), list(2)] {
                writer.append(value).unwrap();
            }
            writer.into_inner().unwrap()
        })
        .unwrap()
        .join()
        .unwrap();
    let avro = dir.join("deep.avro");
    std::fs::write(&avro, bytes).unwrap();
    let back = dir.join("back.cobs");
    let out = run(bin().arg("import").arg(&avro).arg("-o").arg(&back), b"");
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    clean(&out, 2);
    assert!(
        stderr(&out).contains("datum 1 of the block")
            && stderr(&out).contains("levels of nesting; left out (--max-depth raises the limit)"),
        "{}",
        stderr(&out)
    );
    let json = run(bin().args(["cat", "--json"]).arg(&back), b"");
    assert_eq!(stdout_text(&json).lines().count(), 2);
    let out = run(
        bin()
            .args(["import", "-f", "--max-depth", "300"])
            .arg(&avro)
            .arg("-o")
            .arg(&back),
        b"",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let records = cobsfile::ReaderBuilder::new()
        .from_slice(&std::fs::read(&back).unwrap())
        .read_all()
        .0;
    assert_eq!(records.len(), 3);
    // A reader with the default limits reports the deep record, naming the option; with
    // the same option it reads it.
    let json = run(bin().args(["cat", "--json"]).arg(&back), b"");
    assert_eq!(json.status.code(), Some(4), "{}", stderr(&json));
    assert!(
        stderr(&json).contains("(--max-depth raises the limit)"),
        "{}",
        stderr(&json)
    );
    assert_eq!(stdout_text(&json).lines().count(), 2);
    let json = run(
        bin()
            .args(["cat", "--json", "--max-depth", "300"])
            .arg(&back),
        b"",
    );
    assert_eq!(json.status.code(), Some(0), "{}", stderr(&json));
    assert_eq!(stdout_text(&json).lines().count(), 3);
}

/// A few hundred bytes of Avro blocks that declare millions of empty datums (a `null`
/// schema), or decompress to the largest block each, became gigabytes or minutes: the whole
/// file's blocks now have a budget (64 MiB plus 256 bytes per byte of the file, each datum
/// costing at least its 10-byte record), and past it import stops with one line naming the
/// option, exit 4.
#[test]
fn import_has_a_budget_for_the_whole_file() {
    let dir = scratch("import-budget");
    let zigzag = |n: i64, out: &mut Vec<u8>| {
        let mut z = ((n << 1) ^ (n >> 63)) as u64;
        while z >= 0x80 {
            out.push(z as u8 | 0x80);
            z >>= 7;
        }
        out.push(z as u8);
    };
    let sync = [7u8; 16];
    let mut file = b"Obj\x01".to_vec();
    zigzag(1, &mut file);
    for text in ["avro.schema", "\"null\""] {
        zigzag(text.len() as i64, &mut file);
        file.extend_from_slice(text.as_bytes());
    }
    zigzag(0, &mut file);
    file.extend_from_slice(&sync);
    // Blocks of 2^24 empty datums each: 21 bytes, 160 MiB of records.
    for _ in 0..12 {
        zigzag(1 << 24, &mut file);
        zigzag(0, &mut file);
        file.extend_from_slice(&sync);
    }
    assert!(file.len() < 300, "{}", file.len());
    let avro = dir.join("nulls.avro");
    std::fs::write(&avro, &file).unwrap();
    let out_path = dir.join("nulls.cobs");
    let out = run(bin().arg("import").arg(&avro).arg("-o").arg(&out_path), b"");
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    clean(&out, 2);
    assert!(
        stderr(&out).contains("(--max-avro-total raises the budget)"),
        "{}",
        stderr(&out)
    );
    // What was written stays within the budget.
    let written = std::fs::metadata(&out_path).unwrap().len();
    assert!(written < 128 << 20, "{written} bytes");
    // A budget given: the same, sooner.
    let out = run(
        bin()
            .args(["import", "-f", "--max-avro-total", "1M"])
            .arg(&avro)
            .arg("-o")
            .arg(&out_path),
        b"",
    );
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(std::fs::metadata(&out_path).unwrap().len() < 1 << 20);
}

/// A file of five schemas, each announced before the one record written with it.
fn five_schemas(path: &Path) {
    let mut writer = cobsfile::Writer::new(Vec::new()).unwrap();
    for i in 0..5 {
        let json =
            format!(r#"{{"type":"record","name":"R{i}","fields":[{{"name":"x","type":"long"}}]}}"#);
        let schema = cobsfile::avro::WriterSchema::parse(&json).unwrap();
        writer.write_metadata(schema.metadata()).unwrap();
        writer
            .write_record(&[&schema.prefix()[..], &[2 * i as u8][..]].concat())
            .unwrap();
    }
    std::fs::write(path, writer.finish().unwrap()).unwrap();
}

/// The schemas held from one file are bounded, by count and by bytes of text (issue 32,
/// finding 10: 3,000 schemas in 3.4 MB took `sql count(*)` to 854 MB); past a limit a schema
/// block is reported with the option that raises it, and its records are left out as of an
/// unknown schema: unreadable (exit 4), not damage.
#[test]
fn the_schemas_held_from_a_file_are_bounded() {
    let dir = scratch("schema-limits");
    let file = dir.join("five.cobs");
    five_schemas(&file);
    let cat = |extra: &[&str]| run(bin().args(["cat", "--json"]).args(extra).arg(&file), b"");

    let all = cat(&[]);
    assert_eq!(all.status.code(), Some(0), "{}", stderr(&all));
    assert_eq!(stdout_text(&all).lines().count(), 5);

    for (option, value) in [("--max-schemas", "3"), ("--max-schema-bytes", "250")] {
        let out = cat(&[option, value]);
        assert_eq!(out.status.code(), Some(4), "{option}: {}", stderr(&out));
        assert_eq!(
            stdout_text(&out),
            "{\"x\":0}\n{\"x\":1}\n{\"x\":2}\n",
            "{option}"
        );
        let err = stderr(&out);
        let hint = format!("({option} raises the limit)");
        assert_eq!(err.matches(&hint).count(), 2, "{err}");
        assert_eq!(err.matches("is unknown").count(), 2, "{err}");
        clean(&out, 4);
    }

    let sql = |extra: &[&str]| {
        run(
            bin()
                .args(["sql", "SELECT count(*) AS n FROM five", "--format", "csv"])
                .args(extra)
                .arg(&file),
            b"",
        )
    };
    let out = sql(&[]);
    assert_eq!(
        (out.status.code(), stdout_text(&out)),
        (Some(0), "n\n5\n".to_string()),
        "{}",
        stderr(&out)
    );
    let out = sql(&["--max-schemas", "3"]);
    assert_eq!(stdout_text(&out), "n\n3\n", "{}", stderr(&out));
    assert_ne!(out.status.code(), Some(0));
}

/// A `uuid` is shown as its underlying string, exactly as the record holds it (upper case
/// too); one of 16 bytes, which are no text, as its text in lower case; forms that are not a
/// UUID's text (braced, unhyphenated) are refused, each on a line (spec 15.3, vector
/// `avro-uuid`).
#[test]
fn cat_json_shows_a_uuid_as_its_string() {
    let out = run(
        bin()
            .args(["cat", "--json"])
            .arg(root().join("spec/vectors/avro-uuid.cobs")),
        b"",
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "{\"id\":\"8622c5e0-2243-4d47-8377-ca001f3e30b0\"}\n\
         {\"id\":\"8622C5E0-2243-4D47-8377-CA001F3E30B0\"}\n\
         {\"id\":\"8622c5e0-2243-4d47-8377-ca001f3e30b0\"}\n"
    );
    assert_eq!(stderr(&out).matches("a uuid is not a UUID").count(), 3);
}
