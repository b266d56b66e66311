//! Log directories through the command line (spec 11.4): `pack --append DIR` with segment and
//! retention options, `cat`, `ls` and `verify` of a directory as one log, and appenders
//! killed at random moments.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::{bin, run, scratch, stderr, stdout};

fn lines(n: std::ops::Range<usize>) -> Vec<u8> {
    n.map(|i| format!("{{\"n\":{i},\"msg\":\"event {i}\"}}\n"))
        .collect::<String>()
        .into_bytes()
}

fn segments(dir: &Path) -> Vec<std::path::PathBuf> {
    cobsfile::segments::list_segments(dir)
        .unwrap()
        .into_iter()
        .map(|(_, p)| p)
        .collect()
}

#[test]
fn pack_append_to_a_directory_rolls_and_retains_and_cat_reads_it_as_one_log() {
    let dir = scratch("segments-pack");
    let log = dir.join("log");
    let input = lines(0..5000);
    let out = run(
        bin()
            .args(["pack", "--append"])
            .arg(&log)
            .args(["--segment-size", "16K", "-"]),
        &input,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let first = segments(&log);
    assert!(first.len() > 5, "{first:?}");
    for segment in &first {
        assert!(std::fs::metadata(segment).unwrap().len() < 16 * 1024 + 4096);
    }
    // A directory is one log: its segments in order.
    let out = run(bin().arg("cat").arg(&log), b"");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(out.stdout, input);
    // --skip and --limit count the log's records, across segments.
    let out = run(
        bin()
            .arg("cat")
            .arg(&log)
            .args(["--skip", "2500", "--limit", "1000"]),
        b"",
    );
    assert_eq!(out.stdout, lines(2500..3500), "{}", stderr(&out));
    let out = run(bin().arg("cat").arg(&log).args(["--skip", "4999"]), b"");
    assert_eq!(out.stdout, lines(4999..5000));
    // The directory takes more appends: it is a log directory already.
    let out = run(
        bin().args(["pack", "--append"]).arg(&log),
        &lines(5000..5010),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let out = run(bin().arg("cat").arg(&log).args(["--skip", "5000"]), b"");
    assert_eq!(out.stdout, lines(5000..5010));
    // verify and ls: each segment, finished but the newest.
    let out = run(bin().arg("verify").arg(&log), b"");
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out) + &stderr(&out);
    assert_eq!(
        text.matches("clean, finished").count(),
        segments(&log).len() - 1,
        "{text}"
    );
    assert_eq!(text.matches("clean, open log").count(), 1, "{text}");
    let out = run(bin().arg("ls").arg(&log), b"");
    assert!(out.status.success());
    assert_eq!(stdout(&out).matches("==> ").count(), segments(&log).len());

    // Retention: at most three segments are left, the newest part of the log.
    let out = run(
        bin().args(["pack", "--append"]).arg(&log).args([
            "--segment-size",
            "16K",
            "--retain-count",
            "3",
            "-",
        ]),
        &lines(5010..6000),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(segments(&log).len(), 3);
    let out = run(bin().arg("cat").arg(&log), b"");
    let all = lines(0..6000);
    assert!(all.ends_with(&out.stdout) && out.stdout.len() > 1000);
}

#[test]
fn segment_option_mistakes_are_one_line() {
    let dir = scratch("segments-mistakes");
    let file = dir.join("file.cobs");
    std::fs::write(&file, b"").unwrap();
    for (args, want) in [
        (vec!["--segment-size", "0"], "out of range"),
        (vec!["--segment-size", "12Q"], "number of bytes"),
        (vec!["--segment-age", "0s"], "more than zero"),
        (vec!["--segment-age", "1fortnight"], "a duration"),
        (vec!["--retain-count", "0"], "0"),
        (vec!["--retain-age=-5m"], "duration"),
    ] {
        let out = run(
            bin()
                .args(["pack", "--append"])
                .arg(dir.join("log"))
                .args(&args),
            b"",
        );
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stderr(&out).contains(want), "{args:?}: {}", stderr(&out));
    }
    // A segment option without --append, and a file where a directory is wanted.
    let out = run(
        bin()
            .args(["pack", "--segment-size", "1M", "-o"])
            .arg(dir.join("x")),
        b"",
    );
    assert_eq!(out.status.code(), Some(2));
    let out = run(
        bin()
            .args(["pack", "--append"])
            .arg(&file)
            .args(["--retain-count", "2"]),
        b"x\n",
    );
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("not a log directory"), "{err}");
    // A directory that holds no segments is no log to read, nor to append to unless asked.
    let other = dir.join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("notes.txt"), b"x").unwrap();
    for args in [vec!["cat"], vec!["pack", "--append"]] {
        let out = run(bin().args(&args).arg(&other), b"x\n");
        assert_eq!(out.status.code(), Some(1));
        assert!(stderr(&out).contains("is a directory"), "{}", stderr(&out));
    }
    assert!(cobsfile::segments::list_segments(&other)
        .unwrap()
        .is_empty());
}

/// Three appenders on one directory, rolling small segments, killed (SIGKILL) at random
/// moments, round after round: every record each one appended (synced before it read the
/// next line) is read back once and in its order, with nothing of its later ones before it
/// (a prefix of what it was given), and a last appender finishes what the killed ones left
/// unfinished.
#[test]
fn appenders_killed_at_random_moments_lose_nothing_of_a_log_directory() {
    let rounds: usize = std::env::var("COBSFILE_SEGMENT_KILLS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(8);
    let dir = scratch("segments-killed");
    let log = dir.join("log");
    let mut seed = 0x5E6_0001u64;
    let mut next = || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        seed >> 33
    };
    for round in 0..rounds {
        let children: Vec<_> = (0..3)
            .map(|w| {
                let mut child = bin()
                    .args(["pack", "--append"])
                    .arg(&log)
                    .args(["--durability", "fsync", "--segment-size", "2K", "-"])
                    .stdin(Stdio::piped())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap();
                let mut stdin = child.stdin.take().unwrap();
                let feeder = std::thread::spawn(move || {
                    for i in 0..1_000_000 {
                        let line = format!("round {round:03} writer {w} record {i:07}\n");
                        if stdin.write_all(line.as_bytes()).is_err() {
                            break;
                        }
                    }
                });
                (child, feeder)
            })
            .collect();
        std::thread::sleep(Duration::from_millis(100 + next() % 400));
        for (mut child, feeder) in children {
            child.kill().unwrap();
            child.wait().unwrap();
            feeder.join().unwrap();
        }
    }
    // One more appender: its opening finishes the segments the killed ones left.
    let out = run(
        bin()
            .args(["pack", "--append"])
            .arg(&log)
            .args(["--durability", "fsync", "-"]),
        b"last\n",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let out = run(bin().arg("cat").arg(&log), b"");
    let text = stdout(&out);
    let mut seen: std::collections::BTreeMap<(usize, usize), Vec<usize>> = Default::default();
    for line in text.lines() {
        if line == "last" {
            continue;
        }
        let words: Vec<&str> = line.split(' ').collect();
        assert_eq!(words.len(), 6, "a record that was never written: {line:?}");
        let key = (words[1].parse().unwrap(), words[3].parse().unwrap());
        seen.entry(key).or_default().push(words[5].parse().unwrap());
    }
    assert_eq!(text.lines().last(), Some("last"));
    let mut appended = 0;
    for ((round, writer), numbers) in &seen {
        let want: Vec<usize> = (0..numbers.len()).collect();
        assert_eq!(
            numbers, &want,
            "round {round} writer {writer}: not a prefix of what it was given, once each"
        );
        appended += numbers.len();
    }
    assert!(
        appended > rounds * 3,
        "{appended} records in {rounds} rounds"
    );
    let all = segments(&log);
    assert!(all.len() > rounds, "{} segments", all.len());
    for segment in &all[..all.len() - 1] {
        let bytes = std::fs::read(segment).unwrap();
        let report = cobsfile::ReaderBuilder::new().verify(&bytes).unwrap();
        assert_eq!(
            report.ending,
            cobsfile::Ending::Finished,
            "{}: {report:?}",
            segment.display()
        );
    }
}

/// `cat --follow DIR` reads a log directory's records as they land, across its segments, each
/// once and in order, while an appender rolls them.
#[test]
fn cat_follow_follows_a_directory_across_rolls() {
    let dir = scratch("segments-follow");
    let log = dir.join("log");
    let out = run(
        bin()
            .args(["pack", "--append"])
            .arg(&log)
            .args(["--segment-size", "1K", "-"]),
        &lines(0..5),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let follower = bin()
        .args(["cat", "--follow"])
        .arg(&log)
        .args(["--limit", "3000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = run(
        bin().args(["pack", "--append"]).arg(&log).args([
            "--segment-size",
            "1K",
            "--durability",
            "flush",
            "-",
        ]),
        &lines(5..3000),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(segments(&log).len() > 20);
    // It ends by itself after --limit records.
    let done = follower.wait_with_output().unwrap();
    assert!(done.status.success(), "{}", stderr(&done));
    let want = lines(0..3000);
    assert!(
        done.stdout == want,
        "{} bytes, from {:?}",
        done.stdout.len(),
        String::from_utf8_lossy(&done.stdout[..done.stdout.len().min(80)])
    );
    assert_eq!(stderr(&done), "", "nothing to say of each segment");
}

/// `recover DIR -o OUT` writes each segment, recovered, into OUT under its own name: a log
/// directory that reads as the damaged one does, every segment finished.
#[test]
fn recover_of_a_directory_recovers_each_segment() {
    let dir = scratch("segments-recover");
    let log = dir.join("log");
    let out = run(
        bin()
            .args(["pack", "--append"])
            .arg(&log)
            .args(["--segment-size", "8K", "-"]),
        &lines(0..2000),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let all = segments(&log);
    // A flipped byte in the middle of the third segment.
    let mut bytes = std::fs::read(&all[2]).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x20;
    std::fs::write(&all[2], &bytes).unwrap();
    let damaged = run(bin().arg("cat").arg(&log), b"");
    assert_eq!(damaged.status.code(), Some(3), "{}", stderr(&damaged));

    let recovered = dir.join("recovered");
    let out = run(
        bin().arg("recover").arg(&log).arg("-o").arg(&recovered),
        b"",
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let names = |d: &Path| -> Vec<_> {
        segments(d)
            .iter()
            .map(|p| p.file_name().unwrap().to_owned())
            .collect()
    };
    assert_eq!(names(&recovered), names(&log));
    let again = run(bin().arg("cat").arg(&recovered), b"");
    assert!(again.status.success(), "{}", stderr(&again));
    assert_eq!(again.stdout, damaged.stdout);
    let out = run(bin().arg("verify").arg(&recovered), b"");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).matches("clean, finished").count(), all.len());
    // Into itself, or into a file: refused, one line.
    let out = run(bin().arg("recover").arg(&log).arg("-o").arg(&log), b"");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
    let file = dir.join("file");
    std::fs::write(&file, b"x").unwrap();
    let out = run(bin().arg("recover").arg(&log).arg("-o").arg(&file), b"");
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("a file"), "{}", stderr(&out));
}

/// Typed records in a log directory: each segment carries the schema, and `cat --json` with
/// `--skip`/`--limit` counts across segments.
#[test]
fn cat_json_of_a_typed_directory_counts_across_segments() {
    let dir = scratch("segments-typed");
    let schema = dir.join("e.avsc");
    std::fs::write(
        &schema,
        r#"{"type":"record","name":"E","fields":[{"name":"n","type":"long"}]}"#,
    )
    .unwrap();
    let log = dir.join("log");
    let input: String = (0..3000).map(|i| format!("{{\"n\":{i}}}\n")).collect();
    let out = run(
        bin()
            .args(["pack", "--append"])
            .arg(&log)
            .arg("--schema")
            .arg(&schema)
            .args(["--segment-size", "4K", "-"]),
        input.as_bytes(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(segments(&log).len() > 4);
    let out = run(
        bin()
            .args(["cat", "--json", "--skip", "1500", "--limit", "3"])
            .arg(&log),
        b"",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "{\"n\":1500}\n{\"n\":1501}\n{\"n\":1502}\n");
    let out = run(bin().args(["cat", "--json"]).arg(&log), b"");
    assert_eq!(stdout(&out).lines().count(), 3000);
}

/// `finish LOG` finishes a log rotated away (index, time index, end block), refuses one an
/// appender holds, and finishes a log directory's older segments a follower had held.
#[test]
fn finish_finishes_a_log_no_one_holds() {
    let dir = scratch("segments-finish");
    let log = dir.join("app.log");
    let out = run(
        bin()
            .args(["pack", "--append"])
            .arg(&log)
            .args(["--time-field", "n", "-"]),
        &lines(0..500),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let out = run(bin().arg("verify").arg(&log), b"");
    assert!(stdout(&out).contains("open log"), "{}", stdout(&out));
    let out = run(bin().arg("finish").arg(&log), b"");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("finished: ") && stdout(&out).contains("500 records, indexed"),
        "{}",
        stdout(&out)
    );
    let out = run(bin().arg("verify").arg(&log), b"");
    assert!(stdout(&out).contains("clean, finished"), "{}", stdout(&out));
    let out = run(bin().args(["cat", "--skip", "499"]).arg(&log), b"");
    assert_eq!(stdout(&out), String::from_utf8(lines(499..500)).unwrap());
    let out = run(bin().arg("finish").arg(&log), b"");
    assert!(
        stdout(&out).contains("finished already"),
        "{}",
        stdout(&out)
    );

    // Held by a follower: left as it is, one line, exit 1.
    let held = dir.join("held.log");
    run(bin().args(["pack", "--append"]).arg(&held), &lines(0..5));
    let mut follower = bin()
        .args(["cat", "--follow"])
        .arg(&held)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let out = run(bin().arg("finish").arg(&held), b"");
    follower.kill().unwrap();
    follower.wait().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
    assert!(stderr(&out).contains("open elsewhere"), "{}", stderr(&out));
    let out = run(bin().arg("finish").arg(dir.join("missing")), b"");
    assert_eq!(out.status.code(), Some(1));
}
