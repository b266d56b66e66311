//! The command-line tool, run as a built binary.

use std::io::Write;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

mod common;
use common::{bin, root, run, scratch, stderr, stdout};

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
            .arg("-f")
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
    // Byte for byte: the last line had no newline, and gets none (issue 12).
    assert_eq!(out.stdout, input);
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
        bin().args(["pack", "--framing", "len32", "--block-target", "100"]),
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
    let file = pack(&dir, &sample, &["--block-target", "65536"]);
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

/// `pack --zstd` writes 2 MiB blocks unless told otherwise; uncompressed, 256 KiB; a
/// `--block-target` given wins either way. (`samples/events.jsonl`, 400 KB, repeated to
/// about 1.4 MB.)
#[test]
fn zstd_blocks_default_to_two_mebibytes() {
    let dir = scratch("zstd-default-blocks");
    let sample = std::fs::read(root().join("samples/events.jsonl")).unwrap();
    let input = dir.join("events.jsonl");
    std::fs::write(&input, sample.repeat(4)).unwrap();
    let data_blocks = |extra: &[&str]| {
        let file = pack(&dir, &input, extra);
        let out = run(bin().args(["ls", "--json"]).arg(&file), b"");
        json_lines(&out)
            .iter()
            .filter(|r| r["type"] == "data")
            .count()
    };
    assert_eq!(data_blocks(&["--zstd", "3"]), 1);
    assert!(data_blocks(&[]) >= 5);
    assert!(data_blocks(&["--zstd", "3", "--block-target", "256K"]) >= 5);
}

#[test]
fn ls_json_lists_every_block() {
    let dir = scratch("ls");
    let sample = root().join("samples/events.jsonl");
    let file = pack(
        &dir,
        &sample,
        &["--block-target", "100000", "--meta", "k=v"],
    );
    let out = run(bin().args(["ls", "--json"]).arg(&file), b"");
    assert_eq!(out.status.code(), Some(0));
    let rows = json_lines(&out);
    assert_eq!(rows[0]["type"], "header");
    assert_eq!(rows[1]["type"], "metadata");
    assert!(rows.iter().all(|r| r["status"] == "intact"));
    assert!(rows.iter().all(|r| r.get("cause").is_none()));
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

    // A damaged block is a row whose status is a fixed word, with the cause's name and the
    // message beside it, so that `select(.status == "damaged")` finds it.
    let mut bytes = std::fs::read(&file).unwrap();
    let data = rows.iter().find(|r| r["type"] == "data").unwrap();
    let middle = data["offset"].as_u64().unwrap() + data["size"].as_u64().unwrap() / 2;
    bytes[middle as usize] ^= 0x01;
    std::fs::write(&file, &bytes).unwrap();
    let out = run(bin().args(["ls", "--json"]).arg(&file), b"");
    assert_eq!(out.status.code(), Some(3));
    let rows = json_lines(&out);
    let damaged: Vec<_> = rows.iter().filter(|r| r["status"] == "damaged").collect();
    assert_eq!(damaged.len(), 1, "{rows:?}");
    assert_eq!(damaged[0]["offset"], data["offset"].as_u64().unwrap() + 1);
    assert!(
        ["crc", "cobs", "sync-mismatch", "malformed"]
            .contains(&damaged[0]["cause"].as_str().unwrap()),
        "{damaged:?}"
    );
    assert!(damaged[0]["message"].as_str().unwrap().contains("offset"));
    assert_eq!(
        rows.iter().filter(|r| r["status"] == "intact").count(),
        rows.len() - 1
    );
    // One shape: the row holds the range exactly as `verify --json` reports it, what it held
    // as written included.
    let verify = json_lines(&run(bin().args(["verify", "--json"]).arg(&file), b""));
    let range = &verify[0]["damaged"][0];
    assert!(range["held"]["records"].as_u64().unwrap() > 0, "{range}");
    for key in ["start", "end", "status", "cause", "message", "held"] {
        assert_eq!(damaged[0][key], range[key], "{key}");
    }
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
        let txt = std::fs::read_to_string(path.with_extension("txt")).unwrap();
        if txt.contains("\n% reader-max-") {
            // Read with limits the tool is not given.
            continue;
        }
        let damaged_lines = txt.lines().filter(|l| l.starts_with("damaged ")).count();
        // The tool is not given the external dictionary the zstd-dictionary-* vectors need.
        let unreadable = name.starts_with("zstd-dictionary-")
            || txt
                .lines()
                .any(|l| l.starts_with("damaged ") && l.ends_with(" dictionary"));
        let damaged = txt
            .lines()
            .any(|l| l.starts_with("damaged ") && !l.ends_with(" dictionary"));
        let complete = txt
            .lines()
            .any(|l| l == "ending finished" || l == "ending open");
        // Damage first (3), then an unfinished or empty file (5), then unreadable blocks (4).
        let expected = match name.as_str() {
            "version-2" => 1,
            _ if damaged => 3,
            _ if !complete => 5,
            _ if unreadable => 4,
            _ => 0,
        };
        assert_eq!(
            out.status.code(),
            Some(expected),
            "{name}: {}",
            stderr(&out)
        );
        assert_eq!(
            stderr(&out).contains(": unfinished: ") || stderr(&out).contains(": empty: "),
            !complete && name != "version-2",
            "{name}: {}",
            stderr(&out)
        );
        assert_clean_stderr(&out, damaged_lines.max(1) + 2);
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
        let verified = run(bin().args(["verify", "--json"]).arg(&path), b"");
        assert_eq!(verified.status.code(), Some(expected), "verify {name}");
        if let Some(ending) = txt.lines().find_map(|l| l.strip_prefix("ending ")) {
            let report = &json_lines(&verified)[0];
            assert_eq!(report["ending"], ending, "verify {name}");
            assert_eq!(report["clean"], expected == 0, "verify {name}");
        }
        if name == "damaged-after-unreadable" {
            // Side by side, neither hides the other (spec 9.1): both damaged ranges, both
            // unreadable ones.
            let report = &json_lines(&verified)[0];
            let causes = |key: &str| -> Vec<String> {
                let ranges = report[key].as_array().unwrap();
                ranges.iter().map(|r| r["cause"].to_string()).collect()
            };
            assert_eq!(causes("damaged"), ["\"crc\"", "\"crc\""]);
            assert_eq!(
                causes("unreadable"),
                ["\"unsupported-codec\"", "\"unsupported-codec\""]
            );
        }
    }
}

/// The exit statuses `--help` lists are the spec's (section 16), in the same order of
/// precedence.
#[test]
fn help_lists_the_specs_exit_statuses() {
    let spec = std::fs::read_to_string(root().join("spec/FORMAT.md")).unwrap();
    let section = spec.split("## 16. ").nth(1).expect("spec section 16");
    let statuses: Vec<&str> = section
        .lines()
        .filter_map(|l| l.strip_prefix("| ")?.split(' ').next())
        .filter(|n| n.parse::<u8>().is_ok())
        .collect();
    assert_eq!(statuses, ["0", "1", "2", "3", "4", "5", "6", "7"]);
    let help = stdout(&run(bin().arg("--help"), b""));
    let listed: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Exit status"))
        .filter_map(|l| l.strip_prefix("  ")?.split("  ").next())
        .filter(|n| n.parse::<u8>().is_ok())
        .collect();
    assert_eq!(listed, statuses);
    let order = "the first of 1, 6, 3, 7, 5, 4";
    assert!(section.contains(order) && help.contains(order));
}

#[test]
fn usage_errors_exit_2() {
    let out = run(bin().args(["cat"]), b"");
    assert_eq!(out.status.code(), Some(2));
    let out = run(bin().args(["pack", "--framing", "csv"]), b"");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn completions_cover_the_commands_and_their_options() {
    let out = run(bin().args(["completions", "bash"]), b"");
    assert!(out.status.success(), "{}", stderr(&out));
    let script = String::from_utf8(out.stdout).unwrap();
    for word in [
        "pack",
        "cat",
        "ls",
        "meta",
        "verify",
        "recover",
        "dict",
        "train",
        "completions",
        "man",
        "--max-body-size",
        "--durability",
        "--block-target",
    ] {
        assert!(script.contains(word), "{word} is not completed");
    }
    // Where bash is installed, the script parses.
    if let Ok(mut child) = Command::new("bash")
        .arg("-n")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(script.as_bytes())
            .unwrap();
        let checked = child.wait_with_output().unwrap();
        assert!(checked.status.success(), "{}", stderr(&checked));
    }
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let out = run(bin().args(["completions", shell]), b"");
        assert!(out.status.success(), "{shell}: {}", stderr(&out));
        let script = String::from_utf8(out.stdout).unwrap();
        assert!(script.contains("max-body-size"), "{shell}");
    }
}

#[test]
fn completions_for_an_unknown_shell_is_a_usage_error() {
    for args in [&["completions", "tcsh"][..], &["completions"]] {
        let out = run(bin().args(args), b"");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn man_prints_roff_and_writes_a_page_per_command() {
    let out = run(bin().arg("man"), b"");
    assert!(out.status.success(), "{}", stderr(&out));
    let page = String::from_utf8(out.stdout).unwrap();
    assert!(page.starts_with(".ie") || page.starts_with(".TH"), "{page}");
    assert!(page.contains("\n.TH cobsfile 1 "), "{page}");
    assert!(page.contains("cobsfile\\-pack(1)"), "{page}");

    let dir = scratch("man").join("man1");
    let _ = std::fs::remove_dir_all(&dir);
    let out = run(bin().arg("man").arg("--dir").arg(&dir), b"");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    let pages = listing(&dir);
    for name in [
        "cobsfile.1",
        "cobsfile-pack.1",
        "cobsfile-cat.1",
        "cobsfile-verify.1",
        "cobsfile-dict-train.1",
        "cobsfile-man.1",
    ] {
        assert!(pages.iter().any(|p| p == name), "{name} missing: {pages:?}");
    }
    assert_eq!(
        std::fs::read_to_string(dir.join("cobsfile.1")).unwrap(),
        page
    );
    let pack = std::fs::read_to_string(dir.join("cobsfile-pack.1")).unwrap();
    assert!(pack.contains("block\\-target"), "{pack}");
    std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
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
    assert!(json_lines(&listing)
        .iter()
        .any(|r| r["codec"] == "zstd-lines"));
    // --no-lines: records after their lengths, for readers that predate lines; the same
    // records, in a larger file.
    let old = dir.join("events.nolines.cobs");
    let out = run(
        bin()
            .args(["pack", "--zstd", "-3", "--no-lines", "-o"])
            .arg(&old)
            .arg(&sample),
        b"",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let listing = run(bin().args(["ls", "--json"]).arg(&old), b"");
    let codecs: Vec<_> = json_lines(&listing)
        .iter()
        .filter(|r| r["type"] == "data")
        .map(|r| r["codec"].clone())
        .collect();
    assert!(
        !codecs.is_empty() && codecs.iter().all(|c| c == "zstd"),
        "{codecs:?}"
    );
    let out = run(bin().arg("cat").arg(&old), b"");
    assert_eq!(out.stdout, std::fs::read(&sample).unwrap());
    assert!(std::fs::metadata(&old).unwrap().len() > std::fs::metadata(&compressed).unwrap().len());
    let out = run(bin().args(["pack", "--no-lines"]).arg(&sample), b"");
    assert_eq!(
        out.status.code(),
        Some(2),
        "--no-lines without --zstd is a usage error"
    );

    // Train a dictionary, pack with it kept outside the file, read with and without it.
    let dict = dir.join("events.dict");
    let out = run(
        bin()
            .args(["dict", "train", "-f", "--size", "8192", "-o"])
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
                "--block-target",
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
    // Without it: unreadable, reported once, exit 4 (not damage), no record.
    let out = run(bin().arg("cat").arg(&external), b"");
    assert_eq!(out.status.code(), Some(4));
    assert_clean_stderr(&out, 1);
    assert!(stderr(&out).contains("unreadable"), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    // Embedded: readable on its own.
    let embedded = dir.join("emb.cobs");
    let out = run(
        bin()
            .args(["pack", "--zstd", "3", "--block-target", "4096", "--dict"])
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
    // Checked when the command line is parsed, naming the range --help gives.
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("99 is out of range: -131072..=22"),
        "{}",
        stderr(&out)
    );
    let help = run(bin().args(["pack", "--help"]), b"");
    assert!(stdout(&help).contains("-131072"), "{}", stdout(&help));
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
    let indexed = pack(&scratch("skip-index"), &sample, &["--block-target", "4096"]);
    let plain = pack(
        &scratch("skip-plain"),
        &sample,
        &["--block-target", "4096", "--no-index"],
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
            for threads in ["1", "2"] {
                let out = run(
                    bin().args(&args).args(["--threads", threads]).arg(file),
                    b"",
                );
                assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
                assert_eq!(
                    String::from_utf8(out.stdout).unwrap(),
                    expect(skip, to),
                    "{args:?}, {threads} thread(s)"
                );
                assert!(out.stderr.is_empty());
            }
        }
        let out = run(bin().args(&args).arg("-"), &stdin);
        assert_eq!(out.status.code(), Some(0), "{args:?} -: {}", stderr(&out));
        assert_eq!(
            String::from_utf8(out.stdout).unwrap(),
            expect(skip, to),
            "{args:?} -"
        );
    }

    // `ls` lists the index as the last block but the end block; `pack --no-index` writes
    // none, and ends the file with the end block all the same.
    let rows = json_lines(&run(bin().args(["ls", "--json"]).arg(&indexed), b""));
    let (end, rows) = rows.split_last().unwrap();
    assert_eq!(end["type"], "end");
    assert_eq!(rows.last().unwrap()["type"], "index");
    assert_eq!(
        rows.last().unwrap()["records"].as_u64().unwrap() as usize,
        rows.len() - 1,
        "one entry per block before it"
    );
    let rows = json_lines(&run(bin().args(["ls", "--json"]).arg(&plain), b""));
    assert!(rows.iter().all(|r| r["type"] != "index"));
    assert_eq!(rows.last().unwrap()["type"], "end");
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
        let mut args = vec!["--block-target", "4096"];
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

// ---------------------------------------------------------------------------------------------
// verify and recover.

/// A file written by the library: metadata, records in small blocks, a block of an
/// application's type.
fn written_file() -> Vec<u8> {
    let mut writer = cobsfile::WriterBuilder::new()
        .block_target(200)
        .build(Vec::new())
        .unwrap();
    writer
        .write_metadata([("source", &b"cli test"[..])])
        .unwrap();
    for i in 0..300 {
        writer
            .write_record(format!("event {i} \0 payload").as_bytes())
            .unwrap();
    }
    writer.write_raw_block(-7, b"application block").unwrap();
    writer.write_record(b"last").unwrap();
    writer.finish().unwrap()
}

/// The same file with one byte flipped in its middle.
fn damaged_file() -> Vec<u8> {
    let mut bytes = written_file();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x20;
    bytes
}

/// What the library's recover writes for `bytes`.
fn library_recover(bytes: &[u8]) -> (Vec<u8>, cobsfile::Recovery) {
    let mut out = Vec::new();
    let recovery = cobsfile::recover(bytes, &cobsfile::ReaderBuilder::new(), &mut out).unwrap();
    (out, recovery)
}

/// The names in a directory.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn verify(path: &Path, json: bool) -> Output {
    let mut cmd = bin();
    cmd.arg("verify");
    if json {
        cmd.arg("--json");
    }
    run(cmd.arg(path), b"")
}

fn recover(input: &Path, output: &Path, json: bool) -> Output {
    let mut cmd = bin();
    cmd.arg("recover");
    if json {
        cmd.arg("--json");
    }
    run(cmd.arg(input).arg("-o").arg(output).arg("--force"), b"")
}

#[test]
fn verify_exits_0_only_for_a_clean_file() {
    let dir = scratch("verify");
    let clean = dir.join("clean.cobs");
    std::fs::write(&clean, written_file()).unwrap();
    let out = verify(&clean, false);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(out.stderr.is_empty());
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.contains(": clean, finished;"), "{text}");
    assert!(text.contains("301 records"), "{text}");
    assert!(text.contains("1 of unknown type -7"), "{text}");

    let damaged = dir.join("damaged.cobs");
    std::fs::write(&damaged, damaged_file()).unwrap();
    let out = verify(&damaged, false);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(out.stderr.is_empty(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        text.lines().count(),
        2,
        "one damaged range, then the summary: {text}"
    );
    assert!(
        text.lines().next().unwrap().contains(" damaged: "),
        "{text}"
    );
    assert!(text.contains("1 damaged range(s)"), "{text}");
    assert!(text.contains("; finished;"), "{text}");

    // From stdin, the same.
    let out = run(bin().args(["verify", "-"]), &damaged_file());
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stdout).contains("<stdin>: bytes "));
    let out = run(bin().args(["verify", "-"]), &written_file());
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn verify_fails_with_one_line_on_what_it_cannot_read() {
    for path in [
        root().join("Cargo.toml"),
        PathBuf::from("/nonexistent/file.cobs"),
        root().join("spec/vectors/version-2.cobs"),
    ] {
        for json in [false, true] {
            let out = verify(&path, json);
            assert_eq!(out.status.code(), Some(1), "{path:?}: {}", stderr(&out));
            assert_clean_stderr(&out, 1);
            assert_eq!(stderr(&out).lines().count(), 1);
            assert!(stderr(&out).contains(&path.display().to_string()));
            assert!(out.stdout.is_empty(), "{path:?}");
        }
    }
    let out = verify(&root().join("Cargo.toml"), false);
    assert!(stderr(&out).contains("not a cobsfile"), "{}", stderr(&out));
    let out = run(bin().args(["verify", "-"]), b"plain text, not a cobsfile\n");
    assert_eq!(out.status.code(), Some(1));
    assert_clean_stderr(&out, 1);
}

#[test]
fn verify_of_an_empty_file_says_empty_and_exits_5() {
    // Spec sections 5 and 9.5.1: a file of zero bytes holds no blocks, nothing damaged, and
    // is empty, not clean: what a writer that never wrote leaves, or a file cut to nothing.
    let dir = scratch("verify-empty");
    let empty = dir.join("empty.cobs");
    std::fs::write(&empty, b"").unwrap();
    let out = verify(&empty, true);
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    let report = &json_lines(&out)[0];
    assert_eq!(report["clean"], false);
    assert_eq!(report["ending"], "empty");
    assert_eq!(report["size"], 0);
    assert_eq!(report["blocks"]["total"], 0);
    assert_eq!(report["damaged"], serde_json::json!([]));
    let out = verify(&empty, false);
    assert_eq!(out.status.code(), Some(5));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("empty.cobs: empty: 0 bytes"), "{text}");
    assert!(!text.contains("clean"), "{text}");
    // From stdin too; and `cat` says so on stderr, exiting 5 as well.
    let out = run(bin().args(["verify", "-"]), b"");
    assert_eq!(out.status.code(), Some(5));
    let out = run(bin().arg("cat").arg(&empty), b"");
    assert_eq!(out.status.code(), Some(5));
    assert!(out.stdout.is_empty());
    assert_clean_stderr(&out, 1);
    assert!(stderr(&out).contains("empty"), "{}", stderr(&out));
}

#[test]
fn verify_json_has_every_field() {
    let dir = scratch("verify-json");
    let bytes = damaged_file();
    let path = dir.join("damaged.cobs");
    std::fs::write(&path, &bytes).unwrap();
    let out = verify(&path, true);
    assert_eq!(out.status.code(), Some(3));
    let rows = json_lines(&out);
    assert_eq!(rows.len(), 1, "one object");
    let r = &rows[0];
    let report = cobsfile::verify(&mut cobsfile::ReaderBuilder::new().from_slice(&bytes)).unwrap();
    assert_eq!(r["file"], path.display().to_string());
    assert_eq!(r["size"], bytes.len() as u64);
    assert_eq!(r["clean"], false);
    assert_eq!(r["ending"], "finished");
    assert_eq!(r["unreadable"], serde_json::json!([]));
    assert_eq!(r["unreadable_bytes"], 0);
    assert_eq!(r["blocks"]["end"], 1);
    assert_eq!(r["blocks"]["log"], 0);
    assert_eq!(r["records"], report.records);
    assert_eq!(r["blocks"]["total"], report.blocks.total());
    assert_eq!(r["blocks"]["header"], 1);
    assert_eq!(r["blocks"]["metadata"], 1);
    assert_eq!(r["blocks"]["data"], report.blocks.data);
    assert_eq!(r["blocks"]["dictionary"], 0);
    assert_eq!(
        r["blocks"]["unknown"],
        serde_json::json!([{ "type": -7, "blocks": 1 }])
    );
    assert_eq!(r["damaged_bytes"], report.damaged_bytes());
    assert_eq!(
        r["intact_bytes"],
        bytes.len() as u64 - report.damaged_bytes()
    );
    let damaged = r["damaged"].as_array().unwrap();
    assert_eq!(damaged.len(), 1);
    assert_eq!(damaged[0]["start"], report.damaged[0].range.start);
    assert_eq!(damaged[0]["end"], report.damaged[0].range.end);
    assert_eq!(damaged[0]["status"], "damaged");
    // A fixed word for scripts (spec 9.8's name), the sentence beside it.
    assert_eq!(damaged[0]["cause"], report.damaged[0].cause.name());
    assert_eq!(damaged[0]["message"], report.damaged[0].cause.to_string());
    // Intact and damaged ranges tile the file.
    let mut ranges: Vec<(u64, u64)> = r["intact"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p[0].as_u64().unwrap(), p[1].as_u64().unwrap()))
        .chain(
            damaged
                .iter()
                .map(|d| (d["start"].as_u64().unwrap(), d["end"].as_u64().unwrap())),
        )
        .collect();
    ranges.sort_unstable();
    let mut at = 0;
    for (start, end) in ranges {
        assert_eq!(start, at);
        at = end;
    }
    assert_eq!(at, bytes.len() as u64);

    let clean = dir.join("clean.cobs");
    std::fs::write(&clean, written_file()).unwrap();
    let r = &json_lines(&verify(&clean, true))[0];
    assert_eq!(r["clean"], true);
    assert_eq!(r["ending"], "finished");
    assert_eq!(r["records"], 301);
    assert_eq!(r["damaged"], serde_json::json!([]));
    assert_eq!(r["intact"], serde_json::json!([[0, written_file().len()]]));
}

#[test]
fn recover_a_clean_file_gives_it_back() {
    let dir = scratch("recover-clean");
    let input = dir.join("in.cobs");
    let output = dir.join("out.cobs");
    let bytes = written_file();
    std::fs::write(&input, &bytes).unwrap();
    let out = recover(&input, &output, false);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(out.stderr.is_empty());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains(": clean, finished;"), "{text}");
    assert!(text.contains("out.cobs: wrote "), "{text}");
    // A file as the writer wrote it is exactly what recover writes.
    assert_eq!(std::fs::read(&output).unwrap(), bytes);

    // Two files concatenated are clean, but come out as one: one header, no padding.
    let joined = [&bytes[..], &bytes[..]].concat();
    std::fs::write(&input, &joined).unwrap();
    let out = recover(&input, &output, false);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let recovered = std::fs::read(&output).unwrap();
    // The second file's padding byte and header (1 + 18 bytes) are left out, and the two
    // indexes make way for one of both files' blocks.
    let index = cobsfile::Index::find(&bytes).unwrap();
    let joined_index = cobsfile::Index::find(&recovered).unwrap();
    assert_eq!(joined_index.len(), 2 * index.len() - 1);
    assert_eq!(joined_index.records(), 2 * index.records());
    // Each file's blocks between its header and its index, once each.
    assert_eq!(joined_index.offset(), 2 * index.offset() - 18);
    assert_eq!(recovered, library_recover(&joined).0);
    assert_eq!(
        run(bin().arg("cat").arg(&output), b"").stdout,
        run(bin().arg("cat").arg(&input), b"").stdout
    );
    assert_eq!(
        listing(&dir),
        ["in.cobs", "out.cobs"],
        "no temporary file left"
    );
}

#[test]
fn recover_with_losses_exits_3_and_recovers_to_itself() {
    let dir = scratch("recover-damaged");
    let input = dir.join("in.cobs");
    let output = dir.join("out.cobs");
    let again = dir.join("again.cobs");
    let bytes = damaged_file();
    std::fs::write(&input, &bytes).unwrap();
    std::fs::write(&output, b"replaced once recovery is complete").unwrap();
    let out = recover(&input, &output, false);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(out.stderr.is_empty(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.lines().next().unwrap().contains(" lost: "), "{text}");
    assert!(text.contains("1 lost range(s)"), "{text}");
    let (expected, recovery) = library_recover(&bytes);
    assert_eq!(std::fs::read(&output).unwrap(), expected);
    assert!(text.contains(&format!(
        "wrote {} blocks, {} records, {} bytes",
        recovery.blocks, recovery.report.records, recovery.written
    )));

    // The output is clean and holds what cat gets from the damaged input.
    let out = verify(&output, false);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let from_damaged = run(bin().arg("cat").arg(&input), b"");
    assert_eq!(from_damaged.status.code(), Some(3));
    let from_recovered = run(bin().arg("cat").arg(&output), b"");
    assert_eq!(from_recovered.status.code(), Some(0));
    assert_eq!(from_recovered.stdout, from_damaged.stdout);

    // Recovering it again changes nothing, and loses nothing.
    let out = recover(&output, &again, false);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(std::fs::read(&again).unwrap(), expected);
    assert_eq!(listing(&dir), ["again.cobs", "in.cobs", "out.cobs"]);

    // Decoding on threads changes neither the report nor the output.
    let threaded = dir.join("threaded.cobs");
    let out = run(
        bin()
            .args(["recover", "--json", "--threads", "3"])
            .arg(&input)
            .arg("-o")
            .arg(&threaded),
        b"",
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(std::fs::read(&threaded).unwrap(), expected);
    let one = verify(&input, true);
    let two = run(
        bin()
            .args(["verify", "--json", "--threads", "2"])
            .arg(&input),
        b"",
    );
    assert_eq!(two.status.code(), Some(3));
    assert_eq!(json_lines(&one), json_lines(&two));
}

#[test]
fn recover_json_reports_what_was_written() {
    let dir = scratch("recover-json");
    let input = dir.join("in.cobs");
    let output = dir.join("out.cobs");
    let bytes = damaged_file();
    std::fs::write(&input, &bytes).unwrap();
    let out = recover(&input, &output, true);
    assert_eq!(out.status.code(), Some(3));
    let rows = json_lines(&out);
    assert_eq!(rows.len(), 1);
    let r = &rows[0];
    let (written, recovery) = library_recover(&bytes);
    assert_eq!(r["output"], output.display().to_string());
    assert_eq!(r["blocks_written"], recovery.blocks);
    assert_eq!(r["bytes_written"], written.len() as u64);
    assert_eq!(r["clean"], false);
    assert_eq!(r["records"], recovery.report.records);
    assert_eq!(r["damaged"].as_array().unwrap().len(), 1);
    assert_eq!(r["blocks"]["unknown"][0]["type"], -7);
}

#[test]
fn recover_from_stdin() {
    let dir = scratch("recover-stdin");
    let output = dir.join("out.cobs");
    let bytes = damaged_file();
    let out = run(bin().args(["recover", "-", "-o"]).arg(&output), &bytes);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("<stdin>: "));
    assert_eq!(std::fs::read(&output).unwrap(), library_recover(&bytes).0);
}

#[test]
fn recover_fails_on_garbage_and_leaves_no_output() {
    let dir = scratch("recover-garbage");
    let output = dir.join("out.cobs");
    for input in [
        root().join("Cargo.toml"),
        root().join("spec/vectors/version-2.cobs"),
        PathBuf::from("/nonexistent/file.cobs"),
    ] {
        let out = recover(&input, &output, false);
        assert_eq!(out.status.code(), Some(1), "{input:?}: {}", stderr(&out));
        assert_clean_stderr(&out, 1);
        assert!(stderr(&out).contains(&input.display().to_string()));
        assert!(out.stdout.is_empty());
        assert!(listing(&dir).is_empty(), "{input:?}: {:?}", listing(&dir));
    }
    // An existing output stays as it was.
    std::fs::write(&output, b"keep").unwrap();
    let out = recover(&root().join("Cargo.toml"), &output, false);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(std::fs::read(&output).unwrap(), b"keep");
    assert_eq!(listing(&dir), ["out.cobs"]);
    // From stdin too.
    let out = run(
        bin().args(["recover", "-", "-o"]).arg(dir.join("x.cobs")),
        b"\x01\x02 garbage \x00\x00\x00 more",
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_clean_stderr(&out, 1);
    assert_eq!(listing(&dir), ["out.cobs"]);
}

#[test]
fn recover_refuses_to_overwrite_its_input() {
    let dir = scratch("recover-self");
    let input = dir.join("in.cobs");
    let bytes = damaged_file();
    std::fs::write(&input, &bytes).unwrap();
    let other_spelling = dir
        .join("..")
        .join(dir.file_name().unwrap())
        .join("in.cobs");
    let link = dir.join("link.cobs");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&input, &link).unwrap();
    for output in [&input, &other_spelling, &link] {
        let out = recover(&input, output, false);
        assert_ne!(out.status.code(), Some(0), "{output:?}");
        assert_ne!(out.status.code(), Some(3), "{output:?}");
        assert_clean_stderr(&out, 1);
        assert_eq!(out.status.code(), Some(2), "{output:?}");
        assert!(stderr(&out).contains("is an input"), "{}", stderr(&out));
        assert_eq!(std::fs::read(&input).unwrap(), bytes, "input changed");
        assert_eq!(listing(&dir), ["in.cobs", "link.cobs"]);
    }
    // Nor is stdout an output.
    let out = run(bin().arg("recover").arg(&input).args(["-o", "-"]), b"");
    assert_eq!(out.status.code(), Some(2));
    assert_clean_stderr(&out, 1);
    assert!(out.stdout.is_empty());
}

#[test]
fn recover_into_a_directory_or_nowhere_fails_cleanly() {
    let dir = scratch("recover-dir");
    let input = dir.join("in.cobs");
    std::fs::write(&input, damaged_file()).unwrap();
    let sub = dir.join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    for output in [sub.clone(), dir.join("missing/out.cobs")] {
        let out = recover(&input, &output, false);
        assert_eq!(out.status.code(), Some(1), "{output:?}: {}", stderr(&out));
        assert_clean_stderr(&out, 1);
        assert_eq!(listing(&dir), ["in.cobs", "sub"], "{output:?}");
        assert!(listing(&sub).is_empty());
    }
}

/// A path naming a pipe (`/dev/stdin` fed by a pipe, a FIFO, `<(zcat f.cobs.gz)`) is read as
/// a stream: a pipe's metadata says 0 bytes, and mapping it would make it an empty, clean
/// file (verify exiting 0, recover writing a bare header).
#[test]
fn a_pipe_named_by_a_path_is_read_not_taken_for_empty() {
    let dir = scratch("recover-pipe");
    let bytes = damaged_file();
    let out = run(bin().args(["verify", "/dev/stdin"]), &bytes);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    let output = dir.join("out.cobs");
    let out = run(
        bin().args(["recover", "/dev/stdin", "-o"]).arg(&output),
        &bytes,
    );
    let written = std::fs::read(&output).unwrap_or_default();
    assert_ne!(
        out.status.code(),
        Some(0),
        "{} bytes written",
        written.len()
    );
    if out.status.code() == Some(3) {
        assert_eq!(written, library_recover(&bytes).0);
    }
}

// ---------------------------------------------------------------------------------------------
// pack --append.

/// `pack --append` creates a log, appends to it without a second header in every durability
/// mode, cuts a torn tail off with one line saying so, and refuses an unknown mode.
#[test]
fn pack_append_creates_appends_and_cuts_a_torn_tail() {
    let dir = scratch("append");
    let log = dir.join("events.cobs");
    let _ = std::fs::remove_file(&log);
    let mut expected = String::new();
    for (i, mode) in ["none", "flush", "fsync", "group:5"].iter().enumerate() {
        let input = format!("{{\"batch\":{i},\"n\":1}}\n{{\"batch\":{i},\"n\":2}}\n");
        expected.push_str(&input);
        let out = run(
            bin().args(["pack", "--append"]).arg(&log).args([
                "--durability",
                mode,
                "--meta",
                &format!("batch={i}"),
            ]),
            input.as_bytes(),
        );
        assert_eq!(out.status.code(), Some(0), "{mode}: {}", stderr(&out));
        assert!(out.stderr.is_empty(), "{mode}: {}", stderr(&out));
    }
    let bytes = std::fs::read(&log).unwrap();
    let report = cobsfile::ReaderBuilder::new().verify(&bytes).unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(report.blocks.header, 1, "the header is written once");
    assert_eq!(report.blocks.metadata, 4);
    let out = run(bin().arg("cat").arg(&log), b"");
    assert_eq!(String::from_utf8(out.stdout).unwrap(), expected);

    // A torn block at the end (a crash mid-write) is cut off when the log is reopened.
    let torn = &bytes[bytes.len() - 40..bytes.len() - 1];
    let mut file = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    file.write_all(&[0]).unwrap();
    file.write_all(torn).unwrap();
    drop(file);
    let out = run(bin().args(["pack", "--append"]).arg(&log), b"last\n");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_clean_stderr(&out, 1);
    assert!(stderr(&out).contains("cut off"), "{}", stderr(&out));
    let out = run(bin().arg("verify").arg(&log), b"");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = run(bin().arg("cat").arg(&log), b"");
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        format!("{expected}last\n")
    );

    let out = run(
        bin()
            .args(["pack", "--append"])
            .arg(&log)
            .args(["--durability", "sometimes"]),
        b"",
    );
    assert_eq!(out.status.code(), Some(2));
    let out = run(
        bin().args(["pack", "--append"]).arg(&log).args(["-o", "x"]),
        b"",
    );
    assert_eq!(out.status.code(), Some(2), "--append and -o conflict");
    let not_a_log = dir.join("not-a-log");
    std::fs::write(&not_a_log, b"plain text\n").unwrap();
    let out = run(bin().args(["pack", "--append"]).arg(&not_a_log), b"x\n");
    assert_eq!(out.status.code(), Some(1));
    assert_clean_stderr(&out, 1);
    assert!(stderr(&out).contains("offset 0"), "{}", stderr(&out));
    assert_eq!(std::fs::read(&not_a_log).unwrap(), b"plain text\n");
}

/// With other writers on the log, the bytes after its last intact block may be a block one of
/// them is writing: `pack --append` neither cuts them nor calls them torn (issue 11, finding 9:
/// 11 "torn block" messages for 3 real torn blocks with several writers).
/// A power cut before a log's first sync can leave zeros where its header was, with intact
/// blocks after them: `pack --append` appends, says so, and `verify` reports the lost start.
/// A file of zeros with no intact block is no log: refused.
#[test]
fn pack_append_to_a_log_whose_header_a_power_cut_took() {
    let dir = scratch("append-header-lost");
    let log = dir.join("log.cobs");
    let _ = std::fs::remove_file(&log);
    let out = run(bin().args(["pack", "--append"]).arg(&log), b"first\n");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mut bytes = std::fs::read(&log).unwrap();
    bytes[..19].fill(0);
    std::fs::write(&log, &bytes).unwrap();
    let out = run(bin().args(["pack", "--append"]).arg(&log), b"second\n");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("header is lost"), "{}", stderr(&out));
    let out = run(bin().arg("cat").arg(&log), b"");
    assert_eq!(stdout(&out), "first\nsecond\n");
    assert_eq!(out.status.code(), Some(3), "the lost start is damage");

    let zeros = dir.join("zeros.cobs");
    std::fs::write(&zeros, vec![0; 4096]).unwrap();
    let out = run(bin().args(["pack", "--append"]).arg(&zeros), b"x\n");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(
        std::fs::read(&zeros).unwrap(),
        vec![0; 4096],
        "a refused file is untouched"
    );
}

#[test]
fn pack_append_beside_other_writers_does_not_call_their_blocks_torn() {
    let dir = scratch("append-shared");
    let log = dir.join("log.cobs");
    let out = run(bin().args(["pack", "--append"]).arg(&log), b"first\n");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // Another writer holds the log open, in the middle of a block.
    let other = cobsfile::Appender::open(&log).unwrap();
    let mut file = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    file.write_all(&[0, 6, 0x80, 0x02, 1, 7, 7]).unwrap();
    drop(file);
    let out = run(bin().args(["pack", "--append"]).arg(&log), b"second\n");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains("torn"), "{}", stderr(&out));
    assert!(stderr(&out).contains("fenced off"), "{}", stderr(&out));
    drop(other);
    // Alone, it knows: the tail is torn, and is cut.
    let mut file = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    file.write_all(&[0, 6, 0x80, 0x02, 1, 7, 7]).unwrap();
    drop(file);
    let out = run(bin().args(["pack", "--append"]).arg(&log), b"third\n");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("a torn block, cut off"),
        "{}",
        stderr(&out)
    );
}

/// A `--max-body-size` too small for every block of a valid file says so, not "not a cobsfile"
/// (issue 11, finding 9). Every block body holds at least 5 bytes (its codec and CRC), and the
/// end block's no more: a limit below 5 refuses every block.
#[test]
fn a_max_body_size_too_small_for_every_block_says_so() {
    let file = root().join("spec/vectors/one-record.cobs");
    for command in ["cat", "verify", "ls", "meta"] {
        // 0 is refused when the command line is parsed, with the range.
        let out = run(
            bin().arg(command).args(["--max-body-size", "0"]).arg(&file),
            b"",
        );
        assert_eq!(out.status.code(), Some(2), "{command}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("out of range: 1.."),
            "{}",
            stderr(&out)
        );
        for limit in ["1", "4"] {
            let out = run(
                bin()
                    .arg(command)
                    .args(["--max-body-size", limit])
                    .arg(&file),
                b"",
            );
            assert_eq!(
                out.status.code(),
                Some(1),
                "{command} {limit}: {}",
                stderr(&out)
            );
            assert!(
                stderr(&out).contains("raise it to read this file"),
                "{command} {limit}: {}",
                stderr(&out)
            );
        }
    }
    let out = run(
        bin()
            .args(["cat", "--threads", "2", "--max-block-size", "4"])
            .arg(&file),
        b"",
    );
    assert!(stderr(&out).contains("raise it"), "{}", stderr(&out));
}

/// A header of a newer version stops recovery there: what came before is recovered (exit 3,
/// one line saying where it stopped); a file that is newer from its start is refused (exit 1).
#[test]
fn recover_stops_at_a_newer_version() {
    let dir = scratch("recover-newer");
    let v2 = std::fs::read(root().join("spec/vectors/version-2.cobs")).unwrap();
    let both = dir.join("both.cobs");
    let mut bytes = std::fs::read(root().join("spec/vectors/one-record.cobs")).unwrap();
    bytes.extend(&v2[1..]);
    std::fs::write(&both, &bytes).unwrap();
    let out = dir.join("out.cobs");
    let run_recover =
        |input: &std::path::Path| run(bin().arg("recover").arg(input).arg("-o").arg(&out), b"");
    let recovered = run_recover(&both);
    assert_eq!(recovered.status.code(), Some(3), "{}", stderr(&recovered));
    assert!(
        stderr(&recovered).contains("format version 2"),
        "{}",
        stderr(&recovered)
    );
    let cat = run(bin().arg("cat").arg(&out), b"");
    assert_eq!(cat.stdout, b"hello\n");
    std::fs::remove_file(&out).unwrap();
    let refused = run_recover(&root().join("spec/vectors/version-2.cobs"));
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    assert!(!out.exists());
}

// ---------------------------------------------------------------------------------------------
// Pipes: `pack --atomic-pipe` and `pack --pipe-buffer`.

/// Lines of `len` bytes, each starting with `tag` and its number.
fn tagged_lines(tag: &str, count: usize, len: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..count {
        let line = format!("{tag} {i:06} ");
        out.extend_from_slice(line.as_bytes());
        out.resize(out.len() + len - line.len(), b'a' + (i % 26) as u8);
        out.push(b'\n');
    }
    out
}

#[test]
fn pack_atomic_pipe_writes_blocks_of_at_most_pipe_buf() {
    let input = tagged_lines("w", 3000, 300);
    let out = run(bin().args(["pack", "--atomic-pipe", "--zstd", "3"]), &input);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let file = out.stdout;
    let blocks: Vec<_> = cobsfile::ReaderBuilder::new()
        .from_slice(&file)
        .blocks()
        .map(Result::unwrap)
        .collect();
    assert!(blocks.len() > 20);
    assert!(blocks
        .iter()
        .all(|b| b.size <= cobsfile::pipe::PIPE_BUF as u64
            && b.block_type != cobsfile::BlockType::Index));
    let out = run(bin().args(["cat", "-"]), &file);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(out.stdout, input);

    let out = run(
        bin().args(["pack", "--atomic-pipe"]),
        &tagged_lines("w", 1, 5000),
    );
    assert_eq!(out.status.code(), Some(1));
    assert_clean_stderr(&out, 1);
    assert!(
        stderr(&out).contains("maximum of 4041 bytes"),
        "{}",
        stderr(&out)
    );
}

/// Four `pack --atomic-pipe` processes write into one pipe read by one `cat -`: every line
/// comes out once, each producer's in order.
#[test]
fn producers_sharing_a_pipe_keep_every_record() {
    let dir = scratch("atomic-pipe");
    let mut consumer = bin()
        .args(["cat", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pipe = std::os::fd::OwnedFd::from(consumer.stdin.take().unwrap());
    let inputs: Vec<_> = (0..4)
        .map(|p| tagged_lines(&format!("p{p}"), 4000, 40 + 300 * p))
        .collect();
    let producers: Vec<_> = inputs
        .iter()
        .enumerate()
        .map(|(p, input)| {
            let path = dir.join(format!("in{p}"));
            std::fs::write(&path, input).unwrap();
            let mut args = vec!["pack", "--atomic-pipe"];
            if p % 2 == 1 {
                args.extend(["--zstd", "1"]);
            }
            bin()
                .args(args)
                .arg(&path)
                .stdout(pipe.try_clone().unwrap())
                .spawn()
                .unwrap()
        })
        .collect();
    drop(pipe);
    let out = consumer.wait_with_output().unwrap();
    for mut producer in producers {
        assert!(producer.wait().unwrap().success());
    }
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lines: Vec<&[u8]> = out.stdout.split_inclusive(|&b| b == b'\n').collect();
    for (p, input) in inputs.iter().enumerate() {
        let tag = format!("p{p} ");
        let mine: Vec<u8> = lines
            .iter()
            .filter(|l| l.starts_with(tag.as_bytes()))
            .flat_map(|l| l.iter().copied())
            .collect();
        assert!(
            mine == *input,
            "producer {p}: lines lost, doubled or out of order"
        );
    }
    assert_eq!(lines.len(), 4 * 4000);
}

#[test]
fn pack_pipe_buffer_sets_the_pipe_on_stdout_or_says_why_not() {
    let input = tagged_lines("x", 100, 50);
    for (bytes, note) in [("1048576", false), ("10000000000", true)] {
        let mut child = bin()
            .args(["pack", "--pipe-buffer", bytes])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(&input).unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let mut file = Vec::new();
        std::io::Read::read_to_end(&mut stdout, &mut file).unwrap();
        let size = cobsfile::pipe::buffer_size(&stdout).unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(size, if note { 65536 } else { 1 << 20 });
        assert_eq!(!out.stderr.is_empty(), note, "{}", stderr(&out));
        assert_clean_stderr(&out, 1);
        let out = run(bin().args(["cat", "-"]), &file);
        assert_eq!(out.stdout, input);
    }

    let output = scratch("pipe-buffer").join("out.cobs");
    let out = run(
        bin()
            .args(["pack", "--pipe-buffer", "65536", "-o"])
            .arg(&output),
        &input,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_clean_stderr(&out, 1);
    assert!(stderr(&out).contains("ignored"), "{}", stderr(&out));
    let out = run(bin().arg("cat").arg(&output), &[]);
    assert_eq!(out.stdout, input);
}

// ---------------------------------------------------------------------------------------------
// cat --follow

/// A `cobsfile cat --follow` running on a file, its stdout read line by line on a thread;
/// killed on drop.
struct Following {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Following {
    fn start(path: &Path) -> Self {
        let mut child = bin()
            .args(["cat", "--follow"])
            .arg(path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let (send, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in stdout.lines() {
                if send.send(line.unwrap()).is_err() {
                    break;
                }
            }
        });
        Following { child, lines }
    }

    /// The next line written, waiting for it at most 10 s.
    fn line(&self) -> String {
        self.lines
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("a line from cat --follow")
    }

    /// Stops it and returns its stderr.
    fn stop(mut self) -> String {
        self.child.kill().unwrap();
        let mut err = String::new();
        std::io::Read::read_to_string(&mut self.child.stderr.take().unwrap(), &mut err).unwrap();
        err
    }
}

impl Drop for Following {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A writer of records to a new file at `path`, one block per record.
fn log_writer(path: &Path) -> cobsfile::Writer<std::fs::File> {
    let file = std::fs::File::create(path).unwrap();
    cobsfile::WriterBuilder::new()
        .block_target(1)
        .build(file)
        .unwrap()
}

fn append_record(writer: &mut cobsfile::Writer<std::fs::File>, record: &str) {
    writer.write_record(record.as_bytes()).unwrap();
    writer.flush().unwrap();
}

#[test]
fn cat_follow_prints_records_as_they_land_through_rotation() {
    let dir = scratch("follow");
    let path = dir.join("log.cobs");
    let mut writer = log_writer(&path);
    append_record(&mut writer, "first");
    let following = Following::start(&path);
    assert_eq!(following.line(), "first");

    for i in 0..3 {
        append_record(&mut writer, &format!("event {i}"));
        assert_eq!(following.line(), format!("event {i}"));
    }

    // Log rotation: the old file is read to its end, then the new one from its start.
    append_record(&mut writer, "last of the old file");
    std::fs::rename(&path, dir.join("log.cobs.1")).unwrap();
    let mut writer = log_writer(&path);
    append_record(&mut writer, "first of the new file");
    assert_eq!(following.line(), "last of the old file");
    assert_eq!(following.line(), "first of the new file");

    let err = following.stop();
    assert!(err.contains("replaced"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn cat_follow_reads_through_copytruncate_without_losing_or_repeating_a_record() {
    // logrotate's `copytruncate`: records the follower had not read yet when the log was
    // copied and cut are read from the copy, then the log again from its start.
    let dir = scratch("follow-copytruncate");
    let path = dir.join("log.cobs");
    let mut appender = cobsfile::AppenderBuilder::new()
        .durability(cobsfile::Durability::Flush)
        .open(&path)
        .unwrap();
    appender.append(b"first").unwrap();
    let following = Following::start(&path);
    assert_eq!(following.line(), "first");

    for i in 0..200 {
        appender.append(format!("before {i}").as_bytes()).unwrap();
    }
    std::fs::copy(&path, dir.join("log.cobs.1")).unwrap();
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(0).unwrap();
    for i in 0..3 {
        appender.append(format!("after {i}").as_bytes()).unwrap();
    }
    for i in 0..200 {
        assert_eq!(following.line(), format!("before {i}"));
    }
    for i in 0..3 {
        assert_eq!(following.line(), format!("after {i}"));
    }
    let err = following.stop();
    assert_eq!(err.matches("truncated").count(), 1, "{err}");
    assert!(!err.contains("damaged"), "{err}");
}

#[test]
fn cat_follow_prints_what_an_appender_writes_after_a_torn_tail() {
    // Issue 11, finding 4: a torn tail of about 200 KB; an appender opens the log, which a
    // follower reads, and appends 20 records before the follower looks again. The follower's
    // shared lock makes the appender fence the tail rather than cut it (spec 9.7), so the
    // follower reports the torn block once and prints every record.
    let dir = scratch("follow-cut");
    let path = dir.join("log.cobs");
    let mut writer = log_writer(&path);
    append_record(&mut writer, "first");
    append_record(&mut writer, &"x".repeat(300_000));
    drop(writer);
    let len = std::fs::metadata(&path).unwrap().len();
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(len - 100_000).unwrap();
    let following = Following::start(&path);
    assert_eq!(following.line(), "first");

    let mut appender = cobsfile::AppenderBuilder::new()
        .durability(cobsfile::Durability::Flush)
        .open(&path)
        .unwrap();
    let opened = appender.opened();
    assert!(!opened.exclusive && !opened.truncated, "{opened:?}");
    for i in 0..20 {
        appender.append(format!("after {i}").as_bytes()).unwrap();
    }
    appender.close().unwrap();
    for i in 0..20 {
        assert_eq!(following.line(), format!("after {i}"));
    }
    let err = following.stop();
    assert_eq!(err.matches("damaged").count(), 1, "{err}");
    assert!(err.contains("bytes 35.."), "{err}");
    assert!(std::fs::metadata(&path).unwrap().len() > len - 100_000);
}

#[test]
fn cat_follow_ends_quietly_when_the_reader_of_its_output_goes_away() {
    let dir = scratch("follow-pipe");
    let path = dir.join("log.cobs");
    let mut writer = log_writer(&path);
    let mut child = bin()
        .args(["cat", "--follow"])
        .arg(&path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    // It waits for records; the first one it writes finds nobody reading.
    std::thread::sleep(std::time::Duration::from_millis(300));
    append_record(&mut writer, "nobody reads this");

    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("cat --follow did not end when its output was closed");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(0), "{err}");
    assert_eq!(err, "");
}

#[test]
fn cat_follow_needs_a_file() {
    let out = run(bin().args(["cat", "--follow", "-"]), b"");
    assert_eq!(out.status.code(), Some(1));
    assert_clean_stderr(&out, 1);
    let out = run(
        bin().args(["cat", "--follow", "/nonexistent/log.cobs"]),
        b"",
    );
    assert_eq!(out.status.code(), Some(1));
    assert_clean_stderr(&out, 1);
}

// ---------------------------------------------------------------------------------------------
// Files that shrink under a reader.

/// The lines of a numbered log: about 32 MiB, so that a `cat` held up by its output is far
/// from the middle of the file.
fn numbered_lines() -> Vec<String> {
    (0..160_000)
        .map(|i| format!("line {i:07} {}", "x".repeat(180 + i % 20)))
        .collect()
}

/// Writes `lines` as a log at `path` in 64 KiB blocks, without an index.
fn write_numbered(path: &Path, lines: &[String]) -> cobsfile::Writer<std::fs::File> {
    let mut writer = cobsfile::WriterBuilder::new()
        .block_target(64 << 10)
        .index(false)
        .build(std::fs::File::create(path).unwrap())
        .unwrap();
    for line in lines {
        writer.write_record(line.as_bytes()).unwrap();
    }
    writer
}

/// A `cobsfile cat` of `path` that has written its first line, so it has mapped the file, and
/// now waits for its output to be read: it is held up near the file's start.
struct HeldCat {
    child: std::process::Child,
    out: std::io::BufReader<std::process::ChildStdout>,
    first: String,
}

impl HeldCat {
    fn start(args: &[&str], path: &Path) -> HeldCat {
        let mut child = bin()
            .arg("cat")
            .args(args)
            .arg(path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        std::io::BufRead::read_line(&mut out, &mut first).unwrap();
        HeldCat { child, out, first }
    }

    /// Reads the rest of the output: the status, the lines and stderr.
    fn finish(mut self) -> (std::process::ExitStatus, Vec<String>, String) {
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut self.out, &mut rest).unwrap();
        let mut err = String::new();
        std::io::Read::read_to_string(&mut self.child.stderr.take().unwrap(), &mut err).unwrap();
        let status = self.child.wait().unwrap();
        let text = self.first + &rest;
        (status, text.lines().map(str::to_owned).collect(), err)
    }
}

/// `cat` (on one thread and on two) of a file that another process cuts in the middle while
/// `cat` reads it: the bytes that vanished are one damaged range, reported, and `cat` exits
/// 3 having written every record before the cut, not ended by SIGBUS.
#[test]
fn cat_of_a_file_cut_under_it_reports_the_lost_bytes_as_damage() {
    use std::os::unix::process::ExitStatusExt;
    let dir = scratch("cut-under-cat");
    let path = dir.join("log.cobs");
    let lines = numbered_lines();
    for args in [&[][..], &["--threads", "2"]] {
        write_numbered(&path, &lines).finish().unwrap();
        let len = std::fs::metadata(&path).unwrap().len();
        let cat = HeldCat::start(args, &path);
        let cut = len / 2 + 1234;
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(cut)
            .unwrap();
        let (status, got, err) = cat.finish();
        assert_eq!(status.signal(), None, "{args:?}: ended by a signal; {err}");
        assert_eq!(status.code(), Some(3), "{args:?}: {err}");
        let before_cut = cobsfile::ReaderBuilder::new()
            .from_slice(&std::fs::read(&path).unwrap())
            .read_all()
            .0
            .len();
        assert_eq!(got.len(), before_cut, "{args:?}");
        assert!(got[..] == lines[..before_cut], "{args:?}: records differ");
        // The damage, and that the file (cut) no longer ends with its end block.
        assert_eq!(err.lines().count(), 2, "{args:?}: {err}");
        assert!(
            err.contains("damaged") && err.contains(&format!("..{len} ")),
            "{args:?}: {err}"
        );
        assert!(err.contains(": unfinished: "), "{args:?}: {err}");
    }
}

/// `pack --append` on a log with a torn tail that a `cat` is reading: the appender is not
/// alone on the file, so it fences the tail off instead of cutting the bytes from under the
/// reader, which reads on to the end it mapped.
#[test]
fn pack_append_fences_rather_than_cuts_a_log_that_cat_is_reading() {
    use std::os::unix::process::ExitStatusExt;
    let dir = scratch("append-beside-cat");
    let path = dir.join("log.cobs");
    let lines = numbered_lines();
    let mut writer = write_numbered(&path, &lines);
    writer.flush().unwrap();
    let clean = std::fs::metadata(&path).unwrap().len();
    writer.write_record(&vec![b'y'; 256 << 10]).unwrap();
    writer.finish().unwrap();
    // The last block torn in its middle, over many pages, as a crashed writer leaves it.
    let torn = clean + (std::fs::metadata(&path).unwrap().len() - clean) / 2;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(torn)
        .unwrap();

    let cat = HeldCat::start(&[], &path);
    let out = run(bin().args(["pack", "--append"]).arg(&path), b"appended\n");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("fenced off"), "{}", stderr(&out));
    assert!(std::fs::metadata(&path).unwrap().len() > torn);

    let (status, got, err) = cat.finish();
    assert_eq!(status.signal(), None, "ended by a signal; {err}");
    assert_eq!(status.code(), Some(3), "{err}");
    assert!(got == lines, "records differ");
    assert!(err.contains(&format!("..{torn} damaged")), "{err}");
}

/// `recover` killed while it writes its output leaves nothing in the output's directory but
/// the complete output, if it got that far: no partial file, under the output's name or a
/// temporary one.
#[test]
fn recover_killed_while_writing_leaves_no_temporary_file() {
    let dir = scratch("recover-killed");
    let input = dir.join("in.cobs");
    let output = dir.join("out.cobs");
    let _ = std::fs::remove_file(&output);
    write_numbered(&input, &numbered_lines()).finish().unwrap();
    let mut child = bin()
        .arg("recover")
        .arg(&input)
        .arg("-o")
        .arg(&output)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Killed once it has a file in the directory open besides its input, or has ended.
    let fds = PathBuf::from(format!("/proc/{}/fd", child.id()));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let writing = std::fs::read_dir(&fds)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|fd| std::fs::read_link(fd.path()).ok())
            .any(|target| target.starts_with(&dir) && target != input);
        if writing || child.try_wait().unwrap().is_some() || std::time::Instant::now() > deadline {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let names = listing(&dir);
    assert!(
        names == ["in.cobs"] || names == ["in.cobs", "out.cobs"],
        "{names:?}"
    );
    if names.len() == 2 {
        let report = cobsfile::ReaderBuilder::new()
            .verify(&std::fs::read(&output).unwrap())
            .unwrap();
        assert!(report.is_clean());
    }
}

// ---------------------------------------------------------------------------------------------
// How a file ends (spec 9.5.1), and the exit statuses that follow from it.

/// `verify --json` of `path`: its exit status and report.
fn verify_json(path: &Path) -> (Option<i32>, serde_json::Value) {
    let out = verify(path, true);
    assert!(out.stderr.is_empty(), "{}", stderr(&out));
    (out.status.code(), json_lines(&out).remove(0))
}

#[test]
fn help_lists_the_exit_statuses() {
    let out = run(bin().arg("--help"), b"");
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8(out.stdout).unwrap();
    for status in [
        "  0  clean",
        "  1  an error",
        "  2  usage",
        "  3  damage",
        "  4  unreadable",
    ] {
        assert!(help.contains(status), "{status}: {help}");
    }
    assert!(help.contains("  5  the file is unfinished"), "{help}");
    assert!(help.contains("  6  tampering found"), "{help}");
    assert!(help.contains("  7  verify --key found blocks"), "{help}");
    assert!(
        help.contains("the first of 1, 6, 3, 7, 5, 4 wins"),
        "{help}"
    );
}

#[test]
fn a_finished_pack_verifies_finished_and_clean() {
    let dir = scratch("ending-finished");
    let sample = root().join("samples/events.jsonl");
    for extra in [&[][..], &["--no-index"], &["--threads", "2", "--zstd", "1"]] {
        let file = pack(&dir, &sample, extra);
        let (code, report) = verify_json(&file);
        assert_eq!(code, Some(0), "{extra:?}");
        assert_eq!(report["ending"], "finished", "{extra:?}");
        assert_eq!(report["clean"], true, "{extra:?}");
        assert_eq!(report["blocks"]["end"], 1, "{extra:?}");
        let out = verify(&file, false);
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains(": clean, finished; intact: "), "{text}");
    }
}

#[test]
fn a_pack_killed_mid_write_verifies_unfinished_and_exits_5() {
    let dir = scratch("ending-killed");
    let out_path = dir.join("killed.cobs");
    // `pack > killed.cobs`: with -o, a killed pack leaves nothing under the name (see
    // `a_killed_pack_leaves_nothing_under_the_final_name`); into a redirection, the blocks
    // written so far stay.
    let mut child = bin()
        .args(["pack", "--block-target", "1000"])
        .stdin(Stdio::piped())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Enough records for a few blocks, then nothing more: `pack` waits on its input, between
    // two blocks, when it is stopped as `timeout` stops it.
    let mut input = child.stdin.take().unwrap();
    for i in 0..500 {
        writeln!(input, "{{\"event\":{i},\"payload\":\"xxxxxxxxxxxxxxxx\"}}").unwrap();
    }
    input.flush().unwrap();
    let mut len = 0;
    let mut still = 0;
    while still < 20 {
        std::thread::sleep(std::time::Duration::from_millis(20));
        let now = std::fs::metadata(&out_path).map_or(0, |m| m.len());
        still = if now == len && now > 19 { still + 1 } else { 0 };
        len = now;
    }
    // SAFETY: a signal to our own child process, which has not been waited for.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let status = child.wait().unwrap();
    assert!(!status.success());
    drop(input);

    let (code, report) = verify_json(&out_path);
    assert_eq!(code, Some(5), "{report}");
    assert_eq!(report["ending"], "unfinished");
    assert_eq!(report["clean"], false);
    assert_eq!(report["damaged"], serde_json::json!([]));
    assert!(report["records"].as_u64().unwrap() > 0);
    let out = verify(&out_path, false);
    assert_eq!(out.status.code(), Some(5));
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(
        text.contains(": unfinished: ends at a block boundary without the end block"),
        "{text}"
    );
    assert!(!text.contains("clean"), "{text}");
}

#[test]
fn a_file_cut_right_after_a_block_is_unfinished_for_verify_cat_and_recover() {
    let dir = scratch("ending-cut");
    let sample = root().join("samples/events.jsonl");
    let file = pack(&dir, &sample, &["--block-target", "4096"]);
    let bytes = std::fs::read(&file).unwrap();
    // Right after the closing sync byte of the third data block.
    let third = cobsfile::ReaderBuilder::new()
        .from_slice(&bytes)
        .blocks()
        .map(Result::unwrap)
        .filter(|b| b.block_type == cobsfile::BlockType::Data)
        .nth(2)
        .unwrap();
    let cut_at = (third.offset + third.size + 1) as usize;
    let cut = dir.join("cut.cobs");
    std::fs::write(&cut, &bytes[..cut_at]).unwrap();
    let records: Vec<u8> = cobsfile::ReaderBuilder::new()
        .from_slice(&bytes[..cut_at])
        .read_all()
        .0
        .iter()
        .flat_map(|r| [&r[..], b"\n"].concat())
        .collect();

    for threads in ["1", "2"] {
        let out = run(bin().args(["verify", "--threads", threads]).arg(&cut), b"");
        assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(
            text.contains(": unfinished: ends at a block boundary"),
            "{text}"
        );
        let out = run(
            bin()
                .args(["verify", "--json", "--threads", threads])
                .arg(&cut),
            b"",
        );
        let report = &json_lines(&out)[0];
        assert_eq!(
            (report["clean"].clone(), report["ending"].clone()),
            (false.into(), "unfinished".into())
        );

        // `cat` writes every record there is, says on stderr that the file is unfinished,
        // and exits 5, as `zcat` of a cut file fails.
        let out = run(bin().args(["cat", "--threads", threads]).arg(&cut), b"");
        assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
        assert_eq!(out.stdout, records);
        assert_clean_stderr(&out, 1);
        assert!(
            stderr(&out).contains("cut.cobs: unfinished: "),
            "{}",
            stderr(&out)
        );
    }
    // From stdin too.
    let out = run(bin().args(["cat", "-"]), &bytes[..cut_at]);
    assert_eq!(out.status.code(), Some(5));
    assert_eq!(out.stdout, records);
    // `--limit` stops before the end: nothing to say about it.
    let out = run(bin().args(["cat", "--limit", "3"]).arg(&cut), b"");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(out.stderr.is_empty());

    // `recover` says the input is unfinished (exit 5) and writes a finished file.
    let output = dir.join("recovered.cobs");
    let out = recover(&cut, &output, false);
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("cut.cobs: unfinished: "), "{text}");
    assert!(text.contains("recovered.cobs: wrote "), "{text}");
    let (code, report) = verify_json(&output);
    assert_eq!(
        (code, report["ending"].clone()),
        (Some(0), "finished".into())
    );
    assert_eq!(run(bin().arg("cat").arg(&output), b"").stdout, records);
}

#[test]
fn a_log_made_by_pack_append_is_open_and_clean() {
    let dir = scratch("ending-open");
    let log = dir.join("log.cobs");
    let _ = std::fs::remove_file(&log);
    for input in [&b"one\ntwo\n"[..], b"three\n"] {
        let out = run(bin().args(["pack", "--append"]).arg(&log), input);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    let (code, report) = verify_json(&log);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["ending"], "open");
    assert_eq!(report["clean"], true);
    assert_eq!(
        report["blocks"]["log"], 1,
        "one log block, written when the log was made"
    );
    let text = String::from_utf8(verify(&log, false).stdout).unwrap();
    assert!(text.contains(": clean, open log; intact: "), "{text}");
    let out = run(bin().arg("cat").arg(&log), b"");
    assert_eq!(
        (out.status.code(), &out.stdout[..]),
        (Some(0), &b"one\ntwo\nthree\n"[..])
    );
    assert!(out.stderr.is_empty());

    // Appending to a finished file makes it an open log: a log block after its end block.
    let finished = pack(&dir, &root().join("samples/events.jsonl"), &[]);
    let (code, _) = verify_json(&finished);
    assert_eq!(code, Some(0));
    let out = run(bin().args(["pack", "--append"]).arg(&finished), b"later\n");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (code, report) = verify_json(&finished);
    assert_eq!((code, report["ending"].clone()), (Some(0), "open".into()));
    assert_eq!(
        (
            report["blocks"]["end"].clone(),
            report["blocks"]["log"].clone()
        ),
        (1.into(), 1.into())
    );
    let rows = json_lines(&run(bin().args(["ls", "--json"]).arg(&finished), b""));
    let types: Vec<&str> = rows.iter().map(|r| r["type"].as_str().unwrap()).collect();
    assert_eq!(types[types.len() - 3..], ["end", "log", "data"]);
}

/// A zstd file compressed with a dictionary kept outside it, by `pack`.
fn external_dictionary_file(dir: &Path, meta: bool) -> (PathBuf, PathBuf) {
    let sample = root().join("samples/events.jsonl");
    let dict = dir.join("events.dict");
    let out = run(
        bin()
            .args(["dict", "train", "-f", "--size", "8192", "-o"])
            .arg(&dict)
            .arg(&sample),
        b"",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let file = dir.join("external.cobs");
    let mut cmd = bin();
    cmd.args([
        "pack",
        "--zstd",
        "3",
        "--block-target",
        "4096",
        "--external-dict",
        "--dict",
    ])
    .arg(&dict);
    if meta {
        cmd.args(["--meta", "source=test"]);
    }
    let out = run(cmd.arg("-f").arg("-o").arg(&file).arg(&sample), b"");
    assert!(out.status.success(), "{}", stderr(&out));
    (file, dict)
}

#[test]
fn a_missing_external_dictionary_is_unreadable_exit_4_not_damage() {
    let dir = scratch("ending-unreadable");
    let (file, dict) = external_dictionary_file(&dir, false);
    let out = verify(&file, false);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines.len(),
        3,
        "the range, the unreadable line, the summary: {text}"
    );
    assert!(lines[0].contains(" unreadable: "), "{text}");
    assert!(lines[1].contains("external.cobs: unreadable: "), "{text}");
    assert!(lines[1].contains("block(s) in 1 range(s)"), "{text}");
    assert!(
        lines[1].contains("needs zstd dictionary ") && lines[1].ends_with("give it with --dict"),
        "{text}"
    );
    assert!(lines[2].contains(": finished; intact: "), "{text}");
    assert!(!text.contains("damaged"), "{text}");

    let (code, report) = verify_json(&file);
    assert_eq!(code, Some(4));
    assert_eq!(report["clean"], false);
    assert_eq!(report["ending"], "finished");
    assert_eq!(report["damaged"], serde_json::json!([]));
    assert_eq!(report["damaged_bytes"], 0);
    let unreadable = report["unreadable"].as_array().unwrap();
    assert_eq!(unreadable.len(), 1);
    assert_eq!(unreadable[0]["status"], "unreadable");
    assert_eq!(
        report["unreadable_bytes"],
        unreadable[0]["end"].as_u64().unwrap() - unreadable[0]["start"].as_u64().unwrap()
    );
    assert_eq!(report["unreadable_reasons"].as_array().unwrap().len(), 1);

    // `cat` and `recover` exit 4 too; with the dictionary, all is clean.
    let out = run(bin().arg("cat").arg(&file), b"");
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let out = recover(&file, &dir.join("recovered.cobs"), false);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let out = run(bin().arg("verify").arg("--dict").arg(&dict).arg(&file), b"");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn damage_beside_a_missing_dictionary_exits_3() {
    let dir = scratch("ending-damage-and-unreadable");
    let (file, _) = external_dictionary_file(&dir, true);
    // The header block damaged: the metadata block after it stays intact and separates the
    // damage from the unreadable data blocks.
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[8] ^= 0x01;
    std::fs::write(&file, &bytes).unwrap();
    let out = verify(&file, false);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains(" damaged: "), "{text}");
    assert!(text.contains("external.cobs: unreadable: "), "{text}");
    assert!(text.contains("1 damaged range(s)"), "{text}");
    let (code, report) = verify_json(&file);
    assert_eq!(code, Some(3));
    assert_eq!(report["damaged"].as_array().unwrap().len(), 1);
    assert_eq!(report["unreadable"].as_array().unwrap().len(), 1);
    let out = run(bin().arg("cat").arg(&file), b"");
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));

    // Damage and an unfinished file: damage wins. An unfinished file with unreadable blocks:
    // unfinished wins.
    let cut = dir.join("cut.cobs");
    std::fs::write(&cut, &bytes[..bytes.len() - 10]).unwrap();
    assert_eq!(verify_json(&cut).0, Some(3));
    let clean = std::fs::read(external_dictionary_file(&dir, true).0).unwrap();
    let end = clean.len() - 10;
    let before_index = clean[..end].iter().rposition(|&b| b == 0).unwrap();
    std::fs::write(&cut, &clean[..=before_index]).unwrap();
    let (code, report) = verify_json(&cut);
    assert_eq!(
        (code, report["ending"].clone()),
        (Some(5), "unfinished".into())
    );
    assert_eq!(report["unreadable"].as_array().unwrap().len(), 1);
}

// ---------------------------------------------------------------------------------------------
// Never destroy data through a mistake (issue 12).

/// A scratch directory holding `in.txt`, three lines.
fn with_input(test: &str) -> (PathBuf, PathBuf) {
    let dir = scratch(test);
    for entry in std::fs::read_dir(&dir).unwrap() {
        let _ = std::fs::remove_file(entry.unwrap().path());
    }
    let input = dir.join("in.txt");
    std::fs::write(&input, "a\nb\nc\n").unwrap();
    (dir, input)
}

#[test]
fn an_output_that_is_an_input_is_refused_whatever_its_name() {
    let (dir, input) = with_input("same-file");
    let hard = dir.join("hard.txt");
    std::fs::hard_link(&input, &hard).unwrap();
    let soft = dir.join("soft.txt");
    std::os::unix::fs::symlink(&input, &soft).unwrap();
    let spelled = dir.join("..").join(dir.file_name().unwrap()).join("in.txt");
    for output in [&input, &hard, &soft, &spelled] {
        for force in [false, true] {
            let mut cmd = bin();
            cmd.arg("pack").arg("-o").arg(output).arg(&input);
            if force {
                cmd.arg("--force");
            }
            let out = run(&mut cmd, b"");
            assert_eq!(out.status.code(), Some(2), "{output:?}: {}", stderr(&out));
            assert_clean_stderr(&out, 1);
            assert!(stderr(&out).contains("is an input"), "{}", stderr(&out));
            assert_eq!(std::fs::read(&input).unwrap(), b"a\nb\nc\n");
        }
    }
    // Standard input redirected from the output.
    let out = bin()
        .args(["pack", "--force", "-o"])
        .arg(&input)
        .stdin(std::fs::File::open(&input).unwrap())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("is standard input"),
        "{}",
        stderr(&out)
    );
    // Standard output that is the input (`pack in > in`, with the shell's truncation left
    // out so the test can see the input kept).
    let out = bin()
        .arg("pack")
        .arg(&input)
        .stdout(
            std::fs::OpenOptions::new()
                .write(true)
                .open(&input)
                .unwrap(),
        )
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("is also standard output"),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read(&input).unwrap(), b"a\nb\nc\n");
    // dict train and pack --append too.
    let out = run(
        bin().args(["dict", "train", "-o"]).arg(&input).arg(&input),
        b"",
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let log = dir.join("log.cobs");
    let out = run(bin().args(["pack", "--append"]).arg(&log).arg(&input), b"");
    assert!(out.status.success(), "{}", stderr(&out));
    let before = std::fs::read(&log).unwrap();
    let out = run(bin().args(["pack", "--append"]).arg(&log).arg(&log), b"");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(std::fs::read(&log).unwrap(), before);
    assert_eq!(std::fs::read(&input).unwrap(), b"a\nb\nc\n");
    assert_eq!(
        listing(&dir),
        ["hard.txt", "in.txt", "log.cobs", "soft.txt"]
    );
}

#[test]
fn an_existing_output_is_replaced_only_with_force_and_only_when_complete() {
    let (dir, input) = with_input("force");
    let output = dir.join("out.cobs");
    std::fs::write(&output, "precious").unwrap();
    let pack = |extra: &[&str]| {
        run(
            bin()
                .arg("pack")
                .args(extra)
                .arg("-o")
                .arg(&output)
                .arg(&input),
            b"",
        )
    };
    let out = pack(&[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("already exists"), "{}", stderr(&out));
    assert!(stderr(&out).contains("--force"), "{}", stderr(&out));
    assert_eq!(std::fs::read(&output).unwrap(), b"precious");
    // Bad options fail before the output is touched, forced or not.
    for bad in [
        &["-f", "--zstd", "99"][..],
        &["-f", "--zstd", "3", "--dict", "missing.dict"],
    ] {
        let out = pack(bad);
        assert!(!out.status.success(), "{bad:?}");
        assert_eq!(std::fs::read(&output).unwrap(), b"precious", "{bad:?}");
    }
    // A pack that fails halfway (a len32 record cut short) leaves the old file as it was.
    std::fs::write(dir.join("cut.bin"), [9, 0, 0, 0, b'x']).unwrap();
    let out = run(
        bin()
            .args(["pack", "-f", "--framing", "len32", "-o"])
            .arg(&output)
            .arg(dir.join("cut.bin")),
        b"",
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        !stderr(&out).contains(".cobsfile-"),
        "names a temporary file: {}",
        stderr(&out)
    );
    assert_eq!(std::fs::read(&output).unwrap(), b"precious");
    // With --force, replaced.
    let out = pack(&["--force"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let cat = run(bin().arg("cat").arg(&output), b"");
    assert_eq!(cat.stdout, b"a\nb\nc\n");
    assert_eq!(listing(&dir), ["cut.bin", "in.txt", "out.cobs"]);
    // Devices are written to, not replaced, and need no --force.
    let out = run(bin().args(["pack", "-o", "/dev/null"]).arg(&input), b"");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(std::fs::metadata("/dev/null")
        .unwrap()
        .file_type()
        .is_char_device());
    // dict train and recover ask for --force too.
    let dict = dir.join("d.dict");
    std::fs::write(&dict, "kept").unwrap();
    let out = run(
        bin().args(["dict", "train", "-o"]).arg(&dict).arg(&input),
        b"",
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(std::fs::read(&dict).unwrap(), b"kept");
    let recovered = dir.join("cut.bin");
    let out = run(
        bin().arg("recover").arg(&output).arg("-o").arg(&recovered),
        b"",
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(std::fs::read(&recovered).unwrap(), [9, 0, 0, 0, b'x']);
}

#[test]
fn a_killed_pack_leaves_nothing_under_the_final_name() {
    let (dir, _) = with_input("killed-pack");
    let output = dir.join("out.cobs");
    let mut child = bin()
        .args(["pack", "--block-target", "1", "-o"])
        .arg(&output)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for i in 0..1000 {
        writeln!(stdin, "record {i}").unwrap();
    }
    stdin.flush().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    drop(stdin);
    assert_eq!(listing(&dir), ["in.txt"]);
}

// ---------------------------------------------------------------------------------------------
// Closed pipes end every command quietly (issue 12).

/// Waits up to `secs` for `child` to end.
fn wait_for(child: &mut std::process::Child, secs: u64, what: &str) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not end when its output was closed");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn pack_to_a_closed_pipe_ends_quietly() {
    let mut child = bin()
        .args(["pack", "--block-target", "1K"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // `head -c 10`: read a little, then go away.
    let mut first = [0u8; 10];
    let mut stdout = child.stdout.take().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        for i in 0..200_000 {
            if writeln!(stdin, "a record to pack, number {i}").is_err() {
                break;
            }
        }
    });
    std::io::Read::read_exact(&mut stdout, &mut first).unwrap();
    drop(stdout);
    let status = wait_for(&mut child, 20, "pack");
    feeder.join().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(err.is_empty(), "{err}");
}

#[test]
fn cat_follow_ends_when_its_output_closes_while_nothing_lands() {
    let dir = scratch("follow-idle-pipe");
    let path = dir.join("log.cobs");
    let mut writer = log_writer(&path);
    append_record(&mut writer, "the only record");
    let mut child = bin()
        .args(["cat", "--follow"])
        .arg(&path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // `cat -f log | head -1`: one line, then the reader goes away, and no record follows.
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
    assert_eq!(line, "the only record\n");
    drop(stdout);
    let status = wait_for(&mut child, 10, "cat --follow");
    assert_eq!(status.code(), Some(0));
    drop(writer);
}

#[test]
fn meta_json_keeps_the_files_key_order() {
    let dir = scratch("meta-order");
    let file = dir.join("m.cobs");
    let out = run(
        bin()
            .args([
                "pack", "-f", "--meta", "zeta=1", "--meta", "alpha=2", "--meta", "mid=3", "-o",
            ])
            .arg(&file),
        b"x\n",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let out = run(bin().args(["meta", "--json"]).arg(&file), b"");
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let at = |key: &str| text.find(&format!("\"{key}\"")).unwrap();
    assert!(
        at("zeta") < at("alpha") && at("alpha") < at("mid"),
        "{text}"
    );
}

#[test]
fn the_same_condition_is_worded_the_same_way_by_every_command() {
    let dir = scratch("wording");
    let d = dir.display().to_string();
    let missing = dir.join("missing").display().to_string();
    let out_file = dir.join("o.cobs").display().to_string();
    let commands: Vec<Vec<&str>> = vec![
        vec!["pack", "PATH"],
        vec!["pack", "-o", &out_file, "-f", "PATH"],
        vec!["pack", "--append", "PATH", "/dev/null"],
        vec!["cat", "PATH"],
        vec!["ls", "PATH"],
        vec!["meta", "PATH"],
        vec!["verify", "PATH"],
        vec!["recover", "PATH", "-o", &out_file, "-f"],
        vec!["dict", "train", "-o", &out_file, "-f", "PATH"],
    ];
    for (path, words) in [
        (&d, "is a directory"),
        (&missing, "no such file or directory"),
    ] {
        for command in &commands {
            let args: Vec<&str> = command
                .iter()
                .map(|a| if *a == "PATH" { path.as_str() } else { a })
                .collect();
            if args[0] == "pack" && args[1] == "--append" && path == &missing {
                continue; // a missing log is created
            }
            let out = run(bin().args(&args), b"");
            assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
            assert_clean_stderr(&out, 1);
            let err = stderr(&out);
            assert_eq!(
                err.trim_end(),
                format!("cobsfile: {path}: {words}"),
                "{args:?}"
            );
            assert!(
                !err.contains("I/O error") && !err.contains("os error"),
                "{err}"
            );
        }
    }
}

#[test]
fn pack_then_cat_gives_back_any_input_byte_for_byte() {
    let dir = scratch("lines-exact");
    let inputs: [&[u8]; 9] = [
        b"",
        b"\n",
        b"a",
        b"a\n",
        b"a\nb",
        b"a\nb\n",
        b"\n\n",
        b"a\n\nb",
        b"no newline at the end, after many lines\n1\n2\n3",
    ];
    let file = dir.join("f.cobs");
    for input in inputs {
        for block_target in ["1", "256K"] {
            let out = run(
                bin()
                    .args(["pack", "-f", "--block-target", block_target, "-o"])
                    .arg(&file),
                input,
            );
            assert!(out.status.success(), "{}", stderr(&out));
            let bytes = std::fs::read(&file).unwrap();
            for how in [&["cat"][..], &["cat", "--threads", "2"], &["cat", "-"]] {
                let mut cmd = bin();
                cmd.args(how);
                let from_stdin = how.contains(&"-");
                if !from_stdin {
                    cmd.arg(&file);
                }
                let stdin = if from_stdin { &bytes[..] } else { b"" };
                let out = run(&mut cmd, stdin);
                assert_eq!(out.status.code(), Some(0), "{how:?}: {}", stderr(&out));
                assert_eq!(
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(input),
                    "{how:?}, block target {block_target}"
                );
            }
        }
    }
    // --limit ends what it wrote with a newline.
    run(bin().args(["pack", "-f", "-o"]).arg(&file), b"a\nb\nc");
    let out = run(bin().args(["cat", "--limit", "2"]).arg(&file), b"");
    assert_eq!(out.stdout, b"a\nb\n");
}

#[test]
fn option_values_are_checked_when_the_command_line_is_read() {
    let dir = scratch("option-values");
    let out_file = dir.join("o.cobs");
    let refused: [&[&str]; 9] = [
        &["pack", "--block-target", "0"],
        &["pack", "--block-target", "65M"],
        &["pack", "--block-target", "4X"],
        &["pack", "--meta", "=v"],
        &["pack", "--durability", "fsync"],
        &["pack", "--zstd", "23"],
        &["pack", "--threads", "-1"],
        &["cat", "--max-body-size", "0", "f"],
        &["pack", "--atomic-pipe", "--block-target", "1K"],
    ];
    for args in refused {
        let out = run(bin().args(args).arg("-o").arg(&out_file), b"x\n");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(!out_file.exists(), "{args:?}");
    }
    let accepted: [&[&str]; 5] = [
        &["--block-target", "4M"],
        &["--block-target", "1"],
        &["--threads", "0"],
        &["--zstd", "-8"],
        &["--zstd", "22", "--block-target", "64KiB"],
    ];
    for args in accepted {
        let out = run(
            bin()
                .arg("pack")
                .args(args)
                .arg("-f")
                .arg("-o")
                .arg(&out_file),
            b"x\ny\n",
        );
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        let cat = run(bin().args(["cat", "--threads", "0"]).arg(&out_file), b"");
        assert_eq!(cat.stdout, b"x\ny\n", "{args:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Several files per command (issue 12).

#[test]
fn several_files_are_each_read_labelled_and_the_worst_status_wins() {
    let dir = scratch("many-files");
    let a = dir.join("a.cobs");
    let b = dir.join("b.cobs");
    let damaged = dir.join("damaged.cobs");
    let garbage = dir.join("garbage.cobs");
    run(bin().args(["pack", "-f", "-o"]).arg(&a), b"a1\na2\n");
    run(bin().args(["pack", "-f", "-o"]).arg(&b), b"b1\n");
    std::fs::write(&damaged, damaged_file()).unwrap();
    std::fs::write(&garbage, b"not a cobsfile at all").unwrap();

    let out = run(bin().arg("cat").arg(&a).arg(&b), b"");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(out.stdout, b"a1\na2\nb1\n");
    let out = run(bin().args(["cat", "--limit", "1"]).arg(&a).arg(&b), b"");
    assert_eq!(out.stdout, b"a1\nb1\n", "--limit applies to each file");

    // verify: a line per file, in order; the worst status: damage (3) over clean...
    let out = run(bin().arg("verify").arg(&a).arg(&damaged).arg(&b), b"");
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let text = stdout(&out);
    let (pa, pd, pb) = (
        text.find("a.cobs: clean").unwrap(),
        text.find("damaged.cobs: bytes").unwrap(),
        text.find("b.cobs: clean").unwrap(),
    );
    assert!(pa < pd && pd < pb, "{text}");
    // ...and an error (1) over damage, the files after it still read.
    let out = run(bin().arg("verify").arg(&damaged).arg(&garbage).arg(&b), b"");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("garbage.cobs: not a cobsfile"),
        "{}",
        stderr(&out)
    );
    assert!(stdout(&out).contains("b.cobs: clean"), "{}", stdout(&out));
    let out = run(bin().args(["verify", "--json"]).arg(&a).arg(&b), b"");
    let objects = json_lines(&out);
    assert_eq!(objects.len(), 2);
    assert!(objects[1]["file"].as_str().unwrap().ends_with("b.cobs"));

    // ls and meta: headed by each file's name in text; a "file" field in JSON.
    let out = run(bin().arg("ls").arg(&a).arg(&b), b"");
    let text = stdout(&out);
    assert!(
        text.starts_with(&format!("==> {} <==\n", a.display())),
        "{text}"
    );
    assert!(
        text.contains(&format!("\n\n==> {} <==\n", b.display())),
        "{text}"
    );
    let out = run(bin().args(["ls", "--json"]).arg(&a).arg(&b), b"");
    let rows = json_lines(&out);
    assert!(rows.iter().any(|r| r["file"] == a.display().to_string()));
    assert!(rows.iter().any(|r| r["file"] == b.display().to_string()));
    let out = run(bin().args(["meta"]).arg(&a).arg(&garbage), b"");
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("==> "), "{}", stdout(&out));

    // --follow takes one file.
    let out = run(bin().args(["cat", "-f"]).arg(&a).arg(&b), b"");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}
