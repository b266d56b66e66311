//! The command-line tool, run as a built binary.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cobsfile"))
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A scratch directory for one test.
fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cobsfile-cli-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn run(cmd: &mut Command, stdin: &[u8]) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let stdin = stdin.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = input.write_all(&stdin);
    });
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    out
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Stderr is a few plain lines, never a panic or a backtrace.
fn assert_clean_stderr(out: &Output, max_lines: usize) {
    let err = stderr(out);
    assert!(
        !err.contains("panicked") && !err.contains("backtrace"),
        "{err}"
    );
    assert!(err.lines().count() <= max_lines, "too many lines: {err}");
    assert!(err.lines().all(|l| l.starts_with("cobsfile: ")), "{err}");
}

/// Stdout as JSON Lines.
fn json_lines(out: &Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn pack(dir: &Path, input: &Path, extra: &[&str]) -> PathBuf {
    let out_path = dir.join("out.cobs");
    let out = run(
        bin()
            .arg("pack")
            .args(extra)
            .arg("-o")
            .arg(&out_path)
            .arg(input),
        b"",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    out_path
}

#[test]
fn pack_then_cat_gives_back_the_lines() {
    let dir = scratch("lines");
    let sample = root().join("samples/events.jsonl");
    let file = pack(&dir, &sample, &["--block-size", "65536"]);
    let out = run(bin().arg("cat").arg(&file), b"");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(out.stdout, std::fs::read(&sample).unwrap());
    assert!(out.stderr.is_empty());
}

#[test]
fn stdin_to_stdout_and_back() {
    let input = b"one\n\ntwo\nlast line without newline";
    let packed = run(bin().arg("pack"), input);
    assert!(packed.status.success(), "{}", stderr(&packed));
    assert_eq!(packed.stdout[0], 0);
    let out = run(bin().args(["cat", "-"]), &packed.stdout);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout, b"one\n\ntwo\nlast line without newline\n");
}

#[test]
fn len32_keeps_binary_records_exact() {
    let records: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"a\nb\0c".to_vec(),
        vec![0; 1000],
        vec![0xff; 300],
    ];
    let mut framed = Vec::new();
    for r in &records {
        framed.extend_from_slice(&(r.len() as u32).to_le_bytes());
        framed.extend_from_slice(r);
    }
    let packed = run(
        bin().args(["pack", "--framing", "len32", "--block-size", "100"]),
        &framed,
    );
    assert!(packed.status.success(), "{}", stderr(&packed));
    let out = run(
        bin().args(["cat", "--framing", "len32", "-"]),
        &packed.stdout,
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout, framed);
}

#[test]
fn truncated_len32_input_fails_with_one_line() {
    let out = run(
        bin().args(["pack", "--framing", "len32"]),
        &[10, 0, 0, 0, b'x'],
    );
    assert_eq!(out.status.code(), Some(1));
    assert_clean_stderr(&out, 1);
    assert!(stderr(&out).contains("<stdin>: record at input offset 0 declares 10 bytes"));
}

#[test]
fn damage_is_skipped_reported_and_exits_3() {
    let dir = scratch("damage");
    let sample = root().join("samples/events.jsonl");
    let file = pack(&dir, &sample, &["--block-size", "65536"]);
    let mut bytes = std::fs::read(&file).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(&file, &bytes).unwrap();

    let out = run(bin().arg("cat").arg(&file), b"");
    assert_eq!(out.status.code(), Some(3));
    assert_clean_stderr(&out, 1);
    let err = stderr(&out);
    assert!(err.contains("damaged") && err.contains(".."), "{err}");
    let all = std::fs::read_to_string(&sample).unwrap();
    let got = String::from_utf8(out.stdout).unwrap();
    let lost = all.lines().count() - got.lines().count();
    assert!(
        lost > 0 && lost < 400,
        "one 64 KiB block of ~330 lines lost, not {lost}"
    );
    // Every line that came back was written, in order.
    let mut written = all.lines();
    for line in got.lines() {
        assert!(written.any(|w| w == line), "unknown line {line}");
    }

    let out = run(bin().arg("ls").arg(&file), b"");
    assert_eq!(out.status.code(), Some(3));
    let listing = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        listing.lines().filter(|l| l.contains(" damaged ")).count(),
        1,
        "{listing}"
    );
}

#[test]
fn not_a_cobsfile_is_one_line() {
    let out = run(bin().arg("cat").arg(root().join("Cargo.toml")), b"");
    assert_eq!(out.status.code(), Some(1));
    assert_clean_stderr(&out, 1);
    assert!(stderr(&out).contains("Cargo.toml: not a cobsfile"));

    let out = run(bin().args(["ls", "/nonexistent/file.cobs"]), b"");
    assert_eq!(out.status.code(), Some(1));
    assert_clean_stderr(&out, 1);
    assert!(stderr(&out).contains("/nonexistent/file.cobs"));
}

#[test]
fn ls_json_lists_every_block() {
    let dir = scratch("ls");
    let sample = root().join("samples/events.jsonl");
    let file = pack(&dir, &sample, &["--block-size", "100000", "--meta", "k=v"]);
    let out = run(bin().args(["ls", "--json"]).arg(&file), b"");
    assert_eq!(out.status.code(), Some(0));
    let rows = json_lines(&out);
    assert_eq!(rows[0]["type"], "header");
    assert_eq!(rows[1]["type"], "metadata");
    assert!(rows.iter().all(|r| r["status"] == "ok"));
    let records: u64 = rows
        .iter()
        .filter(|r| r["type"] == "data")
        .map(|r| r["records"].as_u64().unwrap())
        .sum();
    assert_eq!(records, 2000);
    // Blocks tile the file.
    let len = std::fs::metadata(&file).unwrap().len();
    let last = rows.last().unwrap();
    assert_eq!(
        last["offset"].as_u64().unwrap() + last["size"].as_u64().unwrap() + 1,
        len
    );
}

#[test]
fn meta_shows_metadata_only() {
    let dir = scratch("meta");
    let sample = root().join("samples/events.jsonl");
    let file = pack(
        &dir,
        &sample,
        &["--meta", "source=sample", "--meta", "schema=event-v1"],
    );
    let out = run(bin().args(["meta", "--json"]).arg(&file), b"");
    assert_eq!(out.status.code(), Some(0));
    let rows = json_lines(&out);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["entries"]["source"], "sample");
    assert_eq!(rows[0]["entries"]["schema"], "event-v1");

    let out = run(
        bin()
            .arg("meta")
            .arg(root().join("spec/vectors/metadata.cobs")),
        b"",
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("binary = hex:00ff00"), "{text}");
    assert_eq!(text.matches("metadata at offset").count(), 3);
}

#[test]
fn duplicate_meta_keys_are_refused() {
    let out = run(
        bin().args(["pack", "--meta", "a=1", "--meta", "a=2", "-o", "/dev/null"]),
        b"x\n",
    );
    assert_eq!(out.status.code(), Some(1));
    assert_clean_stderr(&out, 1);
    assert!(stderr(&out).contains("duplicate key"));
}

#[test]
fn vectors_through_the_tool() {
    let dir = root().join("spec/vectors");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "cobs") {
            continue;
        }
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let out = run(bin().args(["cat", "--framing", "len32"]).arg(&path), b"");
        let expected = match name.as_str() {
            n if n.starts_with("damaged-") || n.ends_with("-damaged") => 3,
            // The tool is not given the external dictionary these need.
            n if n.starts_with("zstd-dictionary-") => 3,
            "version-2" => 1,
            _ => 0,
        };
        assert_eq!(
            out.status.code(),
            Some(expected),
            "{name}: {}",
            stderr(&out)
        );
        assert_clean_stderr(&out, 2);
        if name == "version-2" {
            assert!(
                stderr(&out).contains("format version 2"),
                "{}",
                stderr(&out)
            );
        }
        if name.starts_with("reserved-") {
            assert!(stderr(&out).contains("skipped 1 block(s) of unknown type"));
        }
        let ls = run(bin().arg("ls").arg(&path), b"");
        assert_eq!(ls.status.code(), Some(expected), "ls {name}");
    }
}

#[test]
fn usage_errors_exit_2() {
    let out = run(bin().args(["cat"]), b"");
    assert_eq!(out.status.code(), Some(2));
    let out = run(bin().args(["pack", "--framing", "csv"]), b"");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn zstd_pack_cat_and_dictionaries() {
    let dir = scratch("zstd");
    let sample = root().join("samples/events.jsonl");
    let plain = pack(&dir, &sample, &[]);
    let plain_len = std::fs::metadata(&plain).unwrap().len();
    let compressed = dir.join("z.cobs");
    std::fs::rename(&plain, dir.join("plain.cobs")).unwrap();
    let out = run(
        bin()
            .args(["pack", "--zstd", "-3", "-o"])
            .arg(&compressed)
            .arg(&sample),
        b"",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(std::fs::metadata(&compressed).unwrap().len() * 2 < plain_len);
    let out = run(bin().arg("cat").arg(&compressed), b"");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout, std::fs::read(&sample).unwrap());
    // Two threads: the same file, the same records.
    let threaded = dir.join("t.cobs");
    let out = run(
        bin()
            .args(["pack", "--zstd", "-3", "--threads", "2", "-o"])
            .arg(&threaded)
            .arg(&sample),
        b"",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        std::fs::read(&threaded).unwrap(),
        std::fs::read(&compressed).unwrap()
    );
    let out = run(bin().args(["cat", "--threads", "2"]).arg(&threaded), b"");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout, std::fs::read(&sample).unwrap());
    let listing = run(bin().args(["ls", "--json"]).arg(&compressed), b"");
    assert!(json_lines(&listing).iter().any(|r| r["codec"] == "zstd"));

    // Train a dictionary, pack with it kept outside the file, read with and without it.
    let dict = dir.join("events.dict");
    let out = run(
        bin()
            .args(["dict", "train", "--size", "8192", "-o"])
            .arg(&dict)
            .arg(&sample),
        b"",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("dictionary "));
    let external = dir.join("ext.cobs");
    let out = run(
        bin()
            .args([
                "pack",
                "--zstd",
                "3",
                "--block-size",
                "4096",
                "--external-dict",
                "--dict",
            ])
            .arg(&dict)
            .arg("-o")
            .arg(&external)
            .arg(&sample),
        b"",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let out = run(
        bin().arg("cat").arg("--dict").arg(&dict).arg(&external),
        b"",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(out.stdout, std::fs::read(&sample).unwrap());
    // Without it: unreadable, reported once, exit 3, no record.
    let out = run(bin().arg("cat").arg(&external), b"");
    assert_eq!(out.status.code(), Some(3));
    assert_clean_stderr(&out, 1);
    assert!(stderr(&out).contains("unreadable"), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    // Embedded: readable on its own.
    let embedded = dir.join("emb.cobs");
    let out = run(
        bin()
            .args(["pack", "--zstd", "3", "--block-size", "4096", "--dict"])
            .arg(&dict)
            .arg("-o")
            .arg(&embedded)
            .arg(&sample),
        b"",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let out = run(bin().arg("cat").arg(&embedded), b"");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(out.stdout, std::fs::read(&sample).unwrap());
}

#[test]
fn zstd_level_out_of_range_is_one_line() {
    let out = run(
        bin().args(["pack", "--zstd", "99", "-o", "/dev/null"]),
        b"x\n",
    );
    assert_eq!(out.status.code(), Some(1));
    assert_clean_stderr(&out, 1);
    assert!(stderr(&out).contains("zstd level 99"));
    let out = run(
        bin().args(["pack", "--dict", "x.dict", "-o", "/dev/null"]),
        b"x\n",
    );
    assert_eq!(out.status.code(), Some(2), "--dict needs --zstd");
}

/// `cat --skip K --limit N`, with the index and without, from a file and from stdin.
#[test]
fn cat_skip_and_limit() {
    let sample = root().join("samples/events.jsonl");
    let all = std::fs::read_to_string(&sample).unwrap();
    let lines: Vec<&str> = all.lines().collect();
    let expect = |from: usize, to: usize| -> String {
        lines[from.min(lines.len())..to.min(lines.len())]
            .iter()
            .map(|l| format!("{l}\n"))
            .collect()
    };
    let indexed = pack(&scratch("skip-index"), &sample, &["--block-size", "4096"]);
    let plain = pack(
        &scratch("skip-plain"),
        &sample,
        &["--block-size", "4096", "--no-index"],
    );
    assert!(std::fs::metadata(&plain).unwrap().len() < std::fs::metadata(&indexed).unwrap().len());
    let stdin = std::fs::read(&indexed).unwrap();
    for (skip, limit) in [
        (0, Some(3)),
        (100, Some(5)),
        (1234, None),
        (1995, Some(100)),
        (2000, None),
        (5000, Some(1)),
        (7, Some(0)),
    ] {
        let mut args = vec!["cat".to_owned(), "--skip".into(), skip.to_string()];
        if let Some(n) = limit {
            args.extend(["--limit".into(), n.to_string()]);
        }
        let to = limit.map_or(usize::MAX, |n| skip + n);
        for file in [&indexed, &plain] {
            let out = run(bin().args(&args).arg(file), b"");
            assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
            assert_eq!(
                String::from_utf8(out.stdout).unwrap(),
                expect(skip, to),
                "{args:?}"
            );
            assert!(out.stderr.is_empty());
        }
        let out = run(bin().args(&args).arg("-"), &stdin);
        assert_eq!(out.status.code(), Some(0), "{args:?} -: {}", stderr(&out));
        assert_eq!(
            String::from_utf8(out.stdout).unwrap(),
            expect(skip, to),
            "{args:?} -"
        );
    }

    // `ls` lists the index as the last block; `pack --no-index` writes none.
    let rows = json_lines(&run(bin().args(["ls", "--json"]).arg(&indexed), b""));
    assert_eq!(rows.last().unwrap()["type"], "index");
    assert_eq!(
        rows.last().unwrap()["records"].as_u64().unwrap() as usize,
        rows.len() - 1,
        "one entry per block before it"
    );
    let rows = json_lines(&run(bin().args(["ls", "--json"]).arg(&plain), b""));
    assert!(rows.iter().all(|r| r["type"] != "index"));
}

/// Damage before the records asked for: with the index it is never read (exit 0, the
/// records as written); without, it is read while counting (exit 3, records counted as
/// returned).
#[test]
fn cat_skip_over_damage() {
    let sample = root().join("samples/events.jsonl");
    let all = std::fs::read_to_string(&sample).unwrap();
    let lines: Vec<&str> = all.lines().collect();
    for (name, extra) in [
        ("skip-damage-index", None),
        ("skip-damage-plain", Some("--no-index")),
    ] {
        let mut args = vec!["--block-size", "4096"];
        args.extend(extra);
        let file = pack(&scratch(name), &sample, &args);
        // A byte in the middle of the third block.
        let rows = json_lines(&run(bin().args(["ls", "--json"]).arg(&file), b""));
        let third = &rows[3];
        let at = third["offset"].as_u64().unwrap() + third["size"].as_u64().unwrap() / 2;
        let lost = third["records"].as_u64().unwrap() as usize;
        let mut bytes = std::fs::read(&file).unwrap();
        bytes[at as usize] ^= 0x01;
        std::fs::write(&file, &bytes).unwrap();

        let out = run(
            bin()
                .args(["cat", "--skip", "1500", "--limit", "2"])
                .arg(&file),
            b"",
        );
        let got = String::from_utf8(out.stdout.clone()).unwrap();
        if extra.is_none() {
            assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
            assert_eq!(got, format!("{}\n{}\n", lines[1500], lines[1501]));
        } else {
            assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
            assert_clean_stderr(&out, 1);
            let (a, b) = (lines[1500 + lost], lines[1501 + lost]);
            assert_eq!(got, format!("{a}\n{b}\n"));
        }
    }
}
