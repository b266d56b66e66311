//! `pack --time-field` and `cat --since/--until`, run as the built binary: the records of a
//! window are exactly those whose times lie in it, by every path, and every mistake is one
//! clear line.

use std::path::Path;
use std::process::Output;

mod common;
use common::{bin, run, scratch, stderr};

/// 20,000 JSON events a second apart from 2025-12-01T00:00:00Z, a little out of order; every
/// 1000th with its time as an RFC 3339 string instead of epoch seconds.
fn events() -> Vec<(String, i64)> {
    let start = 1_764_547_200i64;
    (0..20_000i64)
        .map(|i| {
            let seconds = start + i + (i * 7919) % 5 - 2;
            let ts = match i % 1000 {
                0 => format!("\"{}\"", rfc3339(seconds)),
                _ => seconds.to_string(),
            };
            (
                format!("{{\"ts\":{ts},\"msg\":\"event {i}\"}}"),
                seconds * 1_000_000_000,
            )
        })
        .collect()
}

fn rfc3339(seconds: i64) -> String {
    let out = run(
        std::process::Command::new("date")
            .args(["-u", "-d"])
            .arg(format!("@{seconds}"))
            .arg("+%Y-%m-%dT%H:%M:%SZ"),
        b"",
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn write_input(dir: &Path, events: &[(String, i64)]) -> std::path::PathBuf {
    let path = dir.join("events.jsonl");
    let text: String = events.iter().map(|(line, _)| format!("{line}\n")).collect();
    std::fs::write(&path, text).unwrap();
    path
}

fn lines(out: &Output) -> Vec<String> {
    String::from_utf8(out.stdout.clone())
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn cat_since_until_gives_exactly_the_records_of_the_window() {
    let dir = scratch("time-window");
    let events = events();
    let input = write_input(&dir, &events);
    for (name, extra) in [
        ("plain", &["--block-size", "8K"][..]),
        ("zstd", &["--zstd", "3", "--block-size", "16K"][..]),
    ] {
        let file = dir.join(format!("{name}.cobs"));
        let out = run(
            bin()
                .args(["pack", "--time-field", "ts", "-o"])
                .arg(&file)
                .args(extra)
                .arg(&input),
            b"",
        );
        assert!(out.status.success(), "{}", stderr(&out));
        // 10 minutes from 01:00:00 on.
        let (since, until) = (1_764_550_800i64, 1_764_551_400i64);
        let want: Vec<String> = events
            .iter()
            .filter(|(_, t)| (since * 1_000_000_000..=until * 1_000_000_000).contains(t))
            .map(|(line, _)| line.clone())
            .collect();
        assert!(want.len() > 500);
        for (s, u) in [
            ("2025-12-01T01:00:00Z", "2025-12-01T01:10:00Z"),
            ("2025-12-01T02:00:00+01:00", "@1764551400"),
            ("1764550800", "1764551400.0"),
        ] {
            for threads in ["1", "2"] {
                let out = run(
                    bin()
                        .args(["cat", "--since", s, "--until", u, "--threads", threads])
                        .arg(&file),
                    b"",
                );
                assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
                assert!(out.stderr.is_empty(), "{}", stderr(&out));
                assert_eq!(lines(&out), want, "{name} {s} {u} threads {threads}");
            }
        }
        // Only one bound.
        let out = run(
            bin()
                .args(["cat", "--until", "2025-12-01T00:00:10Z"])
                .arg(&file),
            b"",
        );
        let first: Vec<_> = (events.iter())
            .filter(|(_, t)| *t <= 1_764_547_210_000_000_000)
            .map(|(l, _)| l.clone())
            .collect();
        assert_eq!(lines(&out), first);
        // Relative to now: all of it lies long before an hour ago.
        let out = run(bin().args(["cat", "--since", "-1h"]).arg(&file), b"");
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(out.stdout.is_empty());
        let out = run(bin().args(["cat", "--until", "today"]).arg(&file), b"");
        assert_eq!(lines(&out).len(), events.len());
    }
}

#[test]
fn records_without_times_are_left_out_and_said_so() {
    let dir = scratch("time-untimed");
    let file = dir.join("log.cobs");
    let timed = dir.join("timed.jsonl");
    std::fs::write(&timed, "{\"ts\":10,\"n\":1}\n{\"ts\":20,\"n\":2}\n").unwrap();
    let untimed = dir.join("untimed.jsonl");
    std::fs::write(&untimed, "no time here\n").unwrap();
    for (input, extra) in [(&timed, &["--time-field", "ts"][..]), (&untimed, &[][..])] {
        let out = run(
            bin()
                .args(["pack", "--append"])
                .arg(&file)
                .args(extra)
                .arg(input),
            b"",
        );
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let out = run(bin().args(["cat", "--since", "15"]).arg(&file), b"");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(lines(&out), ["{\"ts\":20,\"n\":2}"]);
    let err = stderr(&out);
    assert!(
        err.contains("left out 1 data block(s) whose records have no event time"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1);
    // Without a window every record is there.
    let out = run(bin().arg("cat").arg(&file), b"");
    assert_eq!(lines(&out).len(), 3);
}

#[test]
fn time_mistakes_are_one_line() {
    let dir = scratch("time-mistakes");
    let input = dir.join("in.jsonl");
    std::fs::write(&input, "{\"ts\":1}\n{\"ts\":\"noon\"}\n").unwrap();
    let file = dir.join("out.cobs");
    let out = run(
        bin()
            .args(["pack", "--time-field", "ts", "-o"])
            .arg(&file)
            .arg(&input),
        b"",
    );
    assert_ne!(out.status.code(), Some(0));
    let err = stderr(&out);
    assert!(
        err.contains("record 2") && err.contains("RFC 3339"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!file.exists(), "no output is left behind");

    std::fs::write(&input, "{\"ts\":1}\n{\"t\":2}\n").unwrap();
    let out = run(
        bin()
            .args(["pack", "--time-field", "ts", "-o"])
            .arg(&file)
            .arg(&input),
        b"",
    );
    assert!(
        stderr(&out).contains("record 2: no field \"ts\""),
        "{}",
        stderr(&out)
    );

    std::fs::write(&input, "{\"ts\":1}\n").unwrap();
    let out = run(
        bin()
            .args(["pack", "--time-field", "ts", "-o"])
            .arg(&file)
            .arg(&input),
        b"",
    );
    assert!(out.status.success());
    for args in [
        &["cat", "--since", "soon"][..],
        &["cat", "--since", "1h"],
        &["cat", "--since", "2025-12-02", "--until", "2025-12-01"],
        &["pack", "--time-unit", "ms"],
    ] {
        let out = run(bin().args(args).arg(&file), b"");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(!stderr(&out).contains("panicked"));
    }
}

#[test]
fn time_units() {
    let dir = scratch("time-units");
    let input = dir.join("in.jsonl");
    std::fs::write(&input, "{\"ts\":1500}\n{\"ts\":2500}\n").unwrap();
    let file = dir.join("out.cobs");
    let out = run(
        bin()
            .args(["pack", "--time-field", "ts", "--time-unit", "ms", "-o"])
            .arg(&file)
            .arg(&input),
        b"",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let out = run(
        bin()
            .args(["cat", "--since", "2", "--until", "3"])
            .arg(&file),
        b"",
    );
    assert_eq!(lines(&out), ["{\"ts\":2500}"]);
    // `ls --json` gives the time block's and its data block's earliest and latest times.
    let out = run(bin().args(["ls", "--json"]).arg(&file), b"");
    let rows: Vec<serde_json::Value> = lines(&out)
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let timed: Vec<_> = rows
        .iter()
        .filter(|r| r.get("min_time").is_some())
        .collect();
    assert_eq!(timed.len(), 2, "{rows:?}");
    assert_eq!(timed[0]["type"], "time");
    assert_eq!(timed[1]["type"], "data");
    for row in timed {
        assert_eq!(row["min_time"], 1_500_000_000i64);
        assert_eq!(row["max_time"], 2_500_000_000i64);
    }
}

#[test]
fn cat_follow_since_writes_the_records_of_the_window_as_they_land() {
    use std::io::BufRead;
    let dir = scratch("time-follow");
    let log = dir.join("log.cobs");
    let append = |lines: &str| {
        let input = dir.join("in.jsonl");
        std::fs::write(&input, lines).unwrap();
        let out = run(
            bin()
                .args(["pack", "--append"])
                .arg(&log)
                .args(["--time-field", "ts", "--durability", "flush"])
                .arg(&input),
            b"",
        );
        assert!(out.status.success(), "{}", stderr(&out));
    };
    append("{\"ts\":10}\n{\"ts\":20}\n");
    let mut child = bin()
        .args(["cat", "--follow", "--since", "15", "--until", "100"])
        .arg(&log)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let (send, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines() {
            if send.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    let line = || {
        lines
            .recv_timeout(std::time::Duration::from_secs(10))
            .unwrap()
    };
    assert_eq!(line(), "{\"ts\":20}");
    append("{\"ts\":5}\n{\"ts\":50}\n{\"ts\":500}\n{\"ts\":60}\n");
    assert_eq!(line(), "{\"ts\":50}");
    assert_eq!(line(), "{\"ts\":60}");
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(lines.try_recv().is_err(), "nothing outside the window");
}
