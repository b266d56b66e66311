//! Object storage for real: `cobsfile sql` over cobsfiles in an S3-compatible server that the
//! test starts on loopback (moto's server, `tests/s3/server`), configured only by the standard
//! AWS_* environment variables. Answers and damage reports equal those of the same files read
//! locally; every mistake (no credentials, a wrong endpoint, a missing object) is one line.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Output;

mod common;
use common::{bin, root, run, scratch, stderr, stdout};

#[path = "../../tests/s3/server.rs"]
mod s3;
use s3::{clean_env, Server};

/// `cobsfile ARGS` in `dir`, configured for `server` by the environment alone.
fn cobsfile(server: &Server, args: &[&str], dir: &Path) -> Output {
    run(server.configure(bin().current_dir(dir).args(args)), b"")
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
        let local = cobsfile(&server, &["sql", query, &format!("{table}.cobs")], &dir);
        let url = match table {
            "damaged" => "s3://logs/bad/damaged.cobs".to_string(),
            _ => format!("s3://logs/events/{table}.cobs"),
        };
        let remote = cobsfile(&server, &["sql", query, &url], &dir);
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
            &["cat", "--threads", "2"],
            &["verify", "--json"],
            &["verify"],
            &["meta"],
        ] {
            let on_disk = cobsfile(&server, &[args, &[local]].concat(), &dir);
            let remote = cobsfile(&server, &[args, &[url.as_str()]].concat(), &dir);
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
    let out = cobsfile(&server, &["cat", "s3://logs/events/none.cobs"], &dir);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("s3://logs/events/none.cobs: not found"),
        "{}",
        stderr(&out)
    );

    // A prefix is a directory: its cobsfiles, not its other objects.
    let out = cobsfile(
        &server,
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
    one_line(&cobsfile(&server, &query, &dir), "s3://logs/t.cobs");
    one_line(
        &cobsfile(
            &server,
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
    // A command that reads one file, given a bucket or a prefix (a directory): the line
    // says so, where "not found" would send the user looking for a missing object.
    let (typed, _, _) = packed(&dir);
    server.put("logs", "events/a.cobs", typed);
    for command in ["cat", "ls", "meta", "verify"] {
        one_line(
            &cobsfile(&server, &[command, "s3://logs/events/"], &dir),
            "s3://logs/events/: is a prefix (a directory), not an object",
        );
        one_line(
            &cobsfile(&server, &[command, "s3://logs"], &dir),
            "s3://logs: names a bucket, not an object",
        );
    }
    // A store this tool does not read.
    one_line(
        &cobsfile(
            &server,
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

/// A `LIMIT` over a large object cut into partitions: the rows, and nothing else on stderr,
/// though the other partitions are still fetching when the answer is complete (they are
/// cancelled with the query, not left to fail in a runtime that is shutting down).
#[test]
fn a_limit_over_a_large_object_ends_cleanly() {
    let dir = scratch("s3-limit");
    let server = Server::start(&dir);
    server.bucket("logs");
    let mut writer = cobsfile::WriterBuilder::new().build(Vec::new()).unwrap();
    for i in 0..300_000 {
        let record = format!("{{\"n\":{i},\"pad\":\"{:0>80}\"}}", i as u64 * 7919);
        writer.write_record(record.as_bytes()).unwrap();
    }
    server.put("logs", "big.cobs", writer.finish().unwrap());
    for _ in 0..3 {
        let out = cobsfile(
            &server,
            &[
                "sql",
                "SELECT n FROM t LIMIT 3",
                "--table",
                "t=s3://logs/big.cobs",
                "--format",
                "csv",
            ],
            &dir,
        );
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(stdout(&out).lines().count(), 4, "{}", stdout(&out));
        assert_eq!(stderr(&out), "", "stderr");
    }
}

/// `meta` of a large object with an index reads the object's tail and the metadata blocks
/// the index lists, not the object; `cat --limit` what it reads; `verify` each byte about
/// once: the same output as for the file on disk.
#[test]
fn meta_of_a_large_object_fetches_its_tail_and_metadata_blocks() {
    let dir = scratch("s3-meta");
    let server = Server::start(&dir);
    server.bucket("logs");
    let mut writer = cobsfile::WriterBuilder::new().build(Vec::new()).unwrap();
    writer
        .write_metadata([("service", b"api".as_slice())])
        .unwrap();
    for i in 0..200_000 {
        let record = format!("{{\"n\":{i},\"pad\":\"{:0>80}\"}}", i as u64 * 7919);
        writer.write_record(record.as_bytes()).unwrap();
        if i == 100_000 {
            writer
                .write_metadata([("rotated", b"halfway".as_slice())])
                .unwrap();
        }
    }
    let file = writer.finish().unwrap();
    let len = file.len() as u64;
    std::fs::write(dir.join("big.cobs"), &file).unwrap();
    server.put("logs", "big.cobs", file);
    let proxy = server.counted();
    // `args` on the file on disk, then on the object through the proxy: both outputs, and
    // the bytes the server sent for the second.
    let on_both = |args: &[&str]| {
        let on_disk = run(bin().current_dir(&dir).args(args).arg("big.cobs"), b"");
        proxy.take();
        let remote = run(
            server
                .configure(bin().current_dir(&dir).args(args).arg("s3://logs/big.cobs"))
                .env("AWS_ENDPOINT_URL", proxy.endpoint()),
            b"",
        );
        (on_disk, remote, proxy.take())
    };
    for args in [&["meta"][..], &["meta", "--json"]] {
        let (on_disk, remote, fetched) = on_both(args);
        assert_eq!(remote.status.code(), Some(0), "{}", stderr(&remote));
        assert_eq!(stderr(&remote), "");
        assert_eq!(
            stdout(&remote).replace("s3://logs/big.cobs", "big.cobs"),
            stdout(&on_disk)
        );
        assert!(stdout(&on_disk).contains("halfway"), "{}", stdout(&on_disk));
        assert!(
            fetched < len / 50,
            "{args:?}: {fetched} bytes fetched of a {len}-byte object"
        );
    }

    // `cat --limit` fetches what it reads (the tail, then the first block in requests of 64
    // KiB doubling: about 0.5 MB here), not the object.
    let (on_disk, remote, fetched) = on_both(&["cat", "--limit", "3"]);
    assert_eq!(remote.status.code(), Some(0), "{}", stderr(&remote));
    assert_eq!(stdout(&remote), stdout(&on_disk));
    assert_eq!(stdout(&remote).lines().count(), 3);
    assert!(
        fetched < 1 << 20,
        "cat --limit: {fetched} bytes fetched of {len}"
    );

    // `verify` and `cat --threads` read every block by byte ranges on their threads, each
    // byte about once.
    for args in [
        &["verify", "--json", "--threads", "1"][..],
        &["verify", "--json", "--threads", "2"],
        &["cat", "--threads", "2"],
    ] {
        let (on_disk, remote, fetched) = on_both(args);
        assert_eq!(remote.status.code(), Some(0), "{}", stderr(&remote));
        assert_eq!(
            stdout(&remote).replace("s3://logs/big.cobs", "big.cobs"),
            stdout(&on_disk)
        );
        assert!(
            (fetched as f64) < 1.05 * len as f64,
            "{args:?}: {fetched} bytes fetched of {len}"
        );
    }

    // Without an index (cut short, or not a cobsfile), read from the start as stdin is: the
    // same output, diagnostics and exit status as for the file on disk.
    let mut cut = std::fs::read(dir.join("big.cobs")).unwrap();
    cut.truncate(cut.len() / 3);
    for (name, bytes) in [
        ("cut.cobs", cut),
        ("notes.txt", b"not a cobsfile\n".to_vec()),
    ] {
        std::fs::write(dir.join(name), &bytes).unwrap();
        server.put("logs", name, bytes);
        let url = format!("s3://logs/{name}");
        for args in [
            &["meta"][..],
            &["cat", "--limit", "10"],
            &["cat"],
            &["verify", "--json"],
            &["ls", "--json"],
            &["cat", "--threads", "2"],
        ] {
            let on_disk = run(bin().current_dir(&dir).args(args).arg(name), b"");
            let remote = cobsfile(&server, &[args, &[url.as_str()]].concat(), &dir);
            assert_eq!(
                remote.status.code(),
                on_disk.status.code(),
                "{args:?} {name}"
            );
            assert_eq!(
                stdout(&remote).replace(&url, name),
                stdout(&on_disk),
                "{args:?} {name}"
            );
            assert_eq!(
                stderr(&remote).replace(&url, name),
                stderr(&on_disk),
                "{args:?} {name}"
            );
        }
    }
}

/// A time window of a large object, by `cat --since/--until` and by SQL on its time column,
/// fetches the object's tail and the window's blocks (by the time index), not the object:
/// the same output as for the file on disk.
#[test]
fn a_window_of_a_large_object_fetches_only_its_blocks() {
    let dir = scratch("s3-window");
    let server = Server::start(&dir);
    server.bucket("logs");
    let mut writer = cobsfile::WriterBuilder::new().build(Vec::new()).unwrap();
    let start = 1_700_000_000i64;
    for i in 0..200_000i64 {
        let record = format!("{{\"n\":{i},\"pad\":\"{:0>80}\"}}", i as u64 * 7919);
        let time = (start + i) * 1_000_000_000;
        writer.write_record_at(record.as_bytes(), time).unwrap();
    }
    let file = writer.finish().unwrap();
    let len = file.len() as u64;
    std::fs::write(dir.join("big.cobs"), &file).unwrap();
    server.put("logs", "big.cobs", file);
    let proxy = server.counted();
    let on_both = |args: &[&str], table: bool| {
        let local = match table {
            true => vec!["--table".to_string(), "t=big.cobs".to_string()],
            false => vec!["big.cobs".to_string()],
        };
        let remote = match table {
            true => vec!["--table".to_string(), "t=s3://logs/big.cobs".to_string()],
            false => vec!["s3://logs/big.cobs".to_string()],
        };
        let on_disk = run(bin().current_dir(&dir).args(args).args(&local), b"");
        proxy.take();
        let fetched_run = run(
            server
                .configure(bin().current_dir(&dir).args(args).args(&remote))
                .env("AWS_ENDPOINT_URL", proxy.endpoint()),
            b"",
        );
        (on_disk, fetched_run, proxy.take())
    };
    let (since, until) = ("@1700100000", "@1700101999");
    let sql = "SELECT count(*) AS n, min(time) AS first, max(time) AS last FROM t \
               WHERE time BETWEEN '2023-11-16T02:00:00Z' AND '2023-11-16T02:33:19Z'";
    for (args, table) in [
        (&["cat", "--since", since, "--until", until][..], false),
        (
            &["cat", "--threads", "2", "--since", since, "--until", until],
            false,
        ),
        (&["sql", "--format", "csv", sql], true),
    ] {
        let (on_disk, remote, fetched) = on_both(args, table);
        assert_eq!(on_disk.status.code(), Some(0), "{}", stderr(&on_disk));
        assert_eq!(remote.status.code(), Some(0), "{}", stderr(&remote));
        assert_eq!(stdout(&remote), stdout(&on_disk), "{args:?}");
        assert_eq!(stderr(&remote), "", "{args:?}");
        let lines = stdout(&on_disk).lines().count();
        match table {
            false => assert_eq!(lines, 2000, "{args:?}"),
            true => assert!(stdout(&on_disk).contains("2000,"), "{}", stdout(&on_disk)),
        }
        assert!(
            fetched < len / 10,
            "{args:?}: {fetched} bytes fetched of a {len}-byte object"
        );
    }
}

/// A sealed file in the bucket verifies as it does locally (the object fetched whole: a
/// verification hashes every byte), and an object with a block cut out is tampering there
/// too; `cat --authentic` reads it alike; a missing object is one line.
#[test]
fn sealed_objects_verify_as_local_files() {
    let dir = scratch("s3-sealed");
    let server = Server::start(&dir);
    server.bucket("archive");
    let key = dir.join("archive");
    let out = run(bin().args(["key", "generate", "-o"]).arg(&key), b"");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let sealed = dir.join("sealed.cobs");
    let out = run(
        bin()
            .args(["pack", "--block-target", "4K", "--seal"])
            .arg(&key)
            .arg(samples().join("events.jsonl"))
            .arg("-o")
            .arg(&sealed),
        b"",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let bytes = std::fs::read(&sealed).unwrap();
    // A data block cut out, framing and all (the third block: header, file id, data...).
    let mut blocks = cobsfile::ReaderBuilder::new().from_slice(&bytes);
    let info = (0..3)
        .map(|_| blocks.next_block().unwrap().unwrap().info().clone())
        .last()
        .unwrap();
    assert_eq!(info.block_type, cobsfile::BlockType::Data);
    let (start, end) = (
        info.offset as usize + 1,
        (info.offset + info.size) as usize + 1,
    );
    let cut = [&bytes[..start], &bytes[end..]].concat();
    std::fs::write(dir.join("cut.cobs"), &cut).unwrap();
    server.put("archive", "sealed.cobs", bytes);
    server.put("archive", "cut.cobs", cut);

    let public = "archive.pub";
    for (local, remote, status) in [
        ("sealed.cobs", "s3://archive/sealed.cobs", 0),
        ("cut.cobs", "s3://archive/cut.cobs", 6),
    ] {
        let here = cobsfile(&server, &["verify", "--json", "--key", public, local], &dir);
        let there = cobsfile(
            &server,
            &["verify", "--json", "--key", public, remote],
            &dir,
        );
        assert_eq!(here.status.code(), Some(status), "{}", stdout(&here));
        assert_eq!(there.status.code(), Some(status), "{}", stderr(&there));
        let seals = |out: &Output| {
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            v["seals"].clone()
        };
        assert_eq!(seals(&here), seals(&there));
        let here = cobsfile(
            &server,
            &["cat", "--key", public, "--authentic", local],
            &dir,
        );
        let there = cobsfile(
            &server,
            &["cat", "--key", public, "--authentic", remote],
            &dir,
        );
        assert_eq!(here.stdout, there.stdout);
        assert_eq!(here.status.code(), there.status.code());
    }
    let out = cobsfile(
        &server,
        &["verify", "--key", public, "s3://archive/missing.cobs"],
        &dir,
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
}

/// A window of a large sealed object verifies by byte ranges: `verify --key --since/--until`
/// and `cat --key --authentic --since/--until` fetch the window's blocks, the seals about them
/// and every seal the index lists, not the object, and say what the same file on disk says;
/// a record altered in the window (its CRC made to match, its index rewritten by recovery)
/// is tampering there too.
#[test]
fn a_window_of_a_sealed_object_verifies_by_byte_ranges() {
    let dir = scratch("s3-sealed-window");
    let server = Server::start(&dir);
    server.bucket("audit");
    let key = dir.join("audit");
    let out = run(bin().args(["key", "generate", "-o"]).arg(&key), b"");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let signing = cobsfile::key::SealingKey::read(&key).unwrap();
    // A seal every 256 KiB: what a window's verification reads about the window.
    let mut writer = cobsfile::WriterBuilder::new()
        .seal(signing)
        .seal_every(256 << 10, None)
        .build(Vec::new())
        .unwrap();
    let start = 1_700_000_000i64;
    for i in 0..200_000i64 {
        let record = format!("{{\"n\":{i},\"pad\":\"{:0>80}\"}}", i as u64 * 7919);
        let time = (start + i) * 1_000_000_000;
        writer.write_record_at(record.as_bytes(), time).unwrap();
    }
    let file = writer.finish().unwrap();
    let len = file.len() as u64;
    // The same file with one record of the window changed, CRC fixed, and made whole again.
    let at = file
        .windows(12)
        .position(|w| w == b"{\"n\":100500,")
        .expect("the record, stored as is");
    let mut blocks = cobsfile::ReaderBuilder::new().from_slice(&file);
    let mut rebuilt = Vec::new();
    while let Some(block) = blocks.next_block() {
        let info = block.unwrap().info().clone();
        let (o, s) = (info.offset as usize, info.size as usize);
        if o < at && at < o + s {
            let one = [&[0u8][..], &file[o + 1..=o + s]].concat();
            let mut records: Vec<Vec<u8>> = {
                let mut r = cobsfile::ReaderBuilder::new().from_slice(&one);
                std::iter::from_fn(|| r.next_record().map(|x| x.unwrap().to_vec())).collect()
            };
            for r in records
                .iter_mut()
                .filter(|r| r.starts_with(b"{\"n\":100500,"))
            {
                r[5] = b'9';
            }
            let mut payload = Vec::new();
            cobsfile::varint::write(records.len() as i64, &mut payload);
            for r in &records {
                cobsfile::varint::write(r.len() as i64, &mut payload);
                payload.extend_from_slice(r);
            }
            rebuilt.extend_from_slice(&common::data_block(&payload));
        } else {
            rebuilt.extend_from_slice(&file[o + 1..=o + s]);
        }
    }
    let framed = [&[0u8][..], &rebuilt].concat();
    let mut tampered = Vec::new();
    cobsfile::recover(&framed, &cobsfile::ReaderBuilder::new(), &mut tampered).unwrap();
    for (name, bytes) in [("sealed.cobs", &file), ("tampered.cobs", &tampered)] {
        std::fs::write(dir.join(name), bytes).unwrap();
        server.put("audit", name, bytes.clone());
    }
    let proxy = server.counted();
    let (since, until) = ("@1700100000", "@1700101999");
    for (name, status) in [("sealed.cobs", 0), ("tampered.cobs", 6)] {
        let remote = format!("s3://audit/{name}");
        for args in [
            &[
                "verify",
                "--json",
                "--key",
                "audit.pub",
                "--since",
                since,
                "--until",
                until,
            ][..],
            &[
                "cat",
                "--key",
                "audit.pub",
                "--authentic",
                "--since",
                since,
                "--until",
                until,
            ],
            &[
                "cat",
                "--threads",
                "2",
                "--key",
                "audit.pub",
                "--authentic",
                "--since",
                since,
                "--until",
                until,
            ],
        ] {
            let on_disk = run(bin().current_dir(&dir).args(args).arg(name), b"");
            proxy.take();
            let fetched_run = run(
                server
                    .configure(bin().current_dir(&dir).args(args).arg(&remote))
                    .env("AWS_ENDPOINT_URL", proxy.endpoint()),
                b"",
            );
            let fetched = proxy.take();
            assert_eq!(
                on_disk.status.code(),
                Some(status),
                "{args:?} {}",
                stderr(&on_disk)
            );
            assert_eq!(
                fetched_run.status.code(),
                Some(status),
                "{}",
                stderr(&fetched_run)
            );
            assert_eq!(
                stdout(&fetched_run).replace(&remote, name),
                stdout(&on_disk),
                "{name} {args:?}"
            );
            assert!(
                fetched < len / 10,
                "{args:?}: {fetched} bytes fetched of a {len}-byte object"
            );
            if args[0] == "cat" {
                let lines = stdout(&on_disk).lines().count();
                match status {
                    0 => assert_eq!(lines, 2000, "{args:?}"),
                    _ => assert!(lines < 2000 && !stdout(&on_disk).contains("\"n\":100500,")),
                }
            }
        }
    }
}
