//! Keys and seals, run as the built binary: `key generate` and `key id`, and every mistake
//! with a key one clear line that never shows a key's bytes.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Output;

mod common;
use common::{bin, data_block, run, scratch, stderr};

fn cobsfile(args: &[&str]) -> Output {
    run(bin().args(args), b"")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn generate(dir: &Path, name: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    let out = cobsfile(&["key", "generate", "-o", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    path
}

#[test]
fn key_generate_writes_a_private_key_only_its_owner_reads_and_a_public_key() {
    let dir = scratch("key-generate");
    let path = generate(&dir, "archive");
    let public = dir.join("archive.pub");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let secret = std::fs::read_to_string(&path).unwrap();
    let public_line = std::fs::read_to_string(&public).unwrap();
    assert!(
        secret.starts_with("cobsfile-ed25519-secret-key "),
        "{secret}"
    );
    assert!(public_line.starts_with("cobsfile-ed25519-public-key "));
    assert_eq!(secret.len(), 28 + 64 + 1);
    assert_eq!(public_line.len(), 28 + 64 + 1);

    // Both halves name the same key id, the one `generate` printed.
    let printed = stdout(&cobsfile(&[
        "key",
        "generate",
        "-o",
        dir.join("other").to_str().unwrap(),
    ]));
    assert!(printed.contains("key id "), "{printed}");
    let id_secret = stdout(&cobsfile(&["key", "id", path.to_str().unwrap()]));
    let id_public = stdout(&cobsfile(&["key", "id", public.to_str().unwrap()]));
    assert_eq!(id_secret, id_public);
    assert_eq!(id_secret.trim().len(), 16);
    let other = stdout(&cobsfile(&[
        "key",
        "id",
        dir.join("other.pub").to_str().unwrap(),
    ]));
    assert_ne!(other, id_public, "two keys generated alike");

    // Never overwritten: the key stays as it was.
    let out = cobsfile(&["key", "generate", "-o", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("exists; a key is never overwritten"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), secret);
    // Nor is a public key left by an earlier pair.
    std::fs::remove_file(&path).unwrap();
    let out = cobsfile(&["key", "generate", "-o", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(!path.exists(), "no private key without its public key");
    assert_eq!(std::fs::read_to_string(&public).unwrap(), public_line);
}

#[test]
fn every_mistake_with_a_key_is_one_line_without_its_bytes() {
    let dir = scratch("key-mistakes");
    let path = generate(&dir, "k");
    let secret = std::fs::read_to_string(&path).unwrap();
    let hex = secret.split(' ').nth(1).unwrap().trim().to_owned();
    let check = |args: &[&str], wants: &str| {
        let out = cobsfile(args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(wants), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(!err.contains(&hex), "a key's bytes in {err}");
    };
    let at = |name: &str| dir.join(name).to_str().unwrap().to_owned();

    check(&["key", "id", &at("missing.pub")], "no such file");
    // Others may read it: refused, whatever it holds.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    check(
        &["key", "id", &at("k")],
        "others can read or write this private key (mode 644)",
    );
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(at("garbage.pub"), b"ssh-ed25519 AAAA\n").unwrap();
    check(
        &["key", "id", &at("garbage.pub")],
        "not a cobsfile public key file",
    );
    std::fs::write(
        at("short.pub"),
        format!("cobsfile-ed25519-public-key {}\n", &hex[..60]),
    )
    .unwrap();
    check(
        &["key", "id", &at("short.pub")],
        "malformed key (64 hexadecimal digits expected)",
    );
    std::fs::write(at("long.pub"), vec![b'x'; 4096]).unwrap();
    check(&["key", "id", &at("long.pub")], "not a key file (too long)");
    check(&["key", "id", dir.to_str().unwrap()], "not a regular file");
    // 32 bytes that are no point of the curve.
    let off_curve = (2u8..)
        .map(|y| {
            let mut bytes = [0u8; 32];
            bytes[0] = y;
            bytes
        })
        .find(|bytes| cobsfile::key::VerifyingKey::from_bytes(*bytes).is_err())
        .unwrap();
    let off_curve: String = off_curve.iter().map(|b| format!("{b:02x}")).collect();
    std::fs::write(
        at("off-curve.pub"),
        format!("cobsfile-ed25519-public-key {off_curve}\n"),
    )
    .unwrap();
    check(
        &["key", "id", &at("off-curve.pub")],
        "not an Ed25519 public key",
    );
    check(
        &["key", "generate", "-o", &at("no/such/dir/k")],
        "no such file",
    );

    // A usage mistake is clap's (exit 2).
    let out = cobsfile(&["key", "generate"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

/// A file packed with `--seal`: 3,000 records, a seal about every 4 KiB.
fn packed(dir: &Path, key: &Path) -> std::path::PathBuf {
    let input = dir.join("events.txt");
    let text: String = (0..3000).map(|i| format!("event {i:05}\n")).collect();
    std::fs::write(&input, text).unwrap();
    let out = dir.join("events.cobs");
    let done = cobsfile(&[
        "pack",
        input.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--block-target",
        "1K",
        "--seal",
        key.to_str().unwrap(),
        "--seal-every",
        "4K",
    ]);
    assert!(done.status.success(), "{}", stderr(&done));
    out
}

fn verify(file: &Path, key: &Path, more: &[&str]) -> Output {
    let mut args = vec![
        "verify",
        file.to_str().unwrap(),
        "--key",
        key.to_str().unwrap(),
    ];
    args.extend_from_slice(more);
    cobsfile(&args)
}

/// The seal hash `verify --key` printed last.
fn last_seal(out: &Output) -> String {
    let text = stdout(out);
    let at = text.find("last seal ").expect("a last seal") + "last seal ".len();
    text[at..at + 64].to_owned()
}

#[test]
fn pack_seal_then_verify_key_proves_the_file_and_finds_each_tampering() {
    let dir = scratch("seal-verify");
    let key = generate(&dir, "archive");
    let public = dir.join("archive.pub");
    let file = packed(&dir, &key);

    let out = verify(&file, &public, &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let text = stdout(&out);
    assert!(
        text.contains("authentic: ") && text.contains("3000 record(s)"),
        "{text}"
    );
    let hash = last_seal(&out);
    let out = verify(&file, &public, &["--extends", &hash]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));

    // Without a key, the file is any file: cat reads every record, verify is clean.
    let out = cobsfile(&["cat", file.to_str().unwrap()]);
    assert_eq!(out.stdout.iter().filter(|&&b| b == b'\n').count(), 3000);
    assert!(cobsfile(&["verify", file.to_str().unwrap()])
        .status
        .success());

    // A block cut out, framing and all, as `ls` places it: exit 6, the kind and bytes named.
    let ls = stdout(&cobsfile(&["ls", "--json", file.to_str().unwrap()]));
    let blocks: Vec<serde_json::Value> = ls
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|v: &serde_json::Value| v["type"] == "data")
        .collect();
    let victim = &blocks[blocks.len() / 2];
    let (offset, size) = (
        victim["offset"].as_u64().unwrap() as usize,
        victim["size"].as_u64().unwrap() as usize,
    );
    let bytes = std::fs::read(&file).unwrap();
    let cut = [&bytes[..offset + 1], &bytes[offset + size + 1..]].concat();
    let tampered = dir.join("tampered.cobs");
    std::fs::write(&tampered, &cut).unwrap();
    let out = verify(&tampered, &public, &[]);
    assert_eq!(out.status.code(), Some(6), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("tampered (removed)"),
        "{}",
        stdout(&out)
    );
    // Without --key it reads clean: only the seals tell.
    let out = cobsfile(&["verify", tampered.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));

    // A flipped byte is damage (3), not tampering.
    let mut flipped = bytes.clone();
    flipped[offset + 4] ^= 0x10;
    let damaged = dir.join("damaged.cobs");
    std::fs::write(&damaged, &flipped).unwrap();
    let out = verify(&damaged, &public, &[]);
    assert_eq!(out.status.code(), Some(3), "{}", stdout(&out));
    assert!(!stdout(&out).contains("tampered"), "{}", stdout(&out));

    // Cut back to an earlier seal: it verifies, but no longer extends the seal kept.
    let seals: Vec<&serde_json::Value> = ls
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["type"] == "seal")
        .collect::<Vec<_>>()
        .leak()
        .iter()
        .collect();
    let early = &seals[seals.len() / 2];
    let end = (early["offset"].as_u64().unwrap() + early["size"].as_u64().unwrap()) as usize;
    let shorter = dir.join("shorter.cobs");
    std::fs::write(&shorter, &bytes[..=end]).unwrap();
    let out = verify(&shorter, &public, &[]);
    assert_eq!(out.status.code(), Some(5), "{}", stdout(&out));
    let out = verify(&shorter, &public, &["--extends", &hash]);
    assert_eq!(out.status.code(), Some(6), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("does not hold seal"),
        "{}",
        stdout(&out)
    );

    // Another key finds nothing authentic: every seal is another key's.
    let other = generate(&dir, "other");
    let out = verify(&file, &other.with_extension("pub"), &[]);
    assert_eq!(out.status.code(), Some(6), "{}", stdout(&out));
    assert!(stdout(&out).contains("other-key"));

    // JSON names the same.
    let out = verify(&tampered, &public, &["--json"]);
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(value["seals"]["tampered"][0]["kind"], "removed");
    assert!(value["seals"]["authentic"]["records"].as_u64().unwrap() < 3000);
}

#[test]
fn an_unsealed_file_verified_with_a_key_is_exit_7_and_key_mistakes_are_one_line() {
    let dir = scratch("seal-unsealed");
    let key = generate(&dir, "archive");
    let input = dir.join("in.txt");
    std::fs::write(&input, "a\nb\n").unwrap();
    let plain = dir.join("plain.cobs");
    let out = cobsfile(&[
        "pack",
        input.to_str().unwrap(),
        "-o",
        plain.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    let out = verify(&plain, &dir.join("archive.pub"), &[]);
    assert_eq!(out.status.code(), Some(7), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("nothing is authentic"),
        "{}",
        stdout(&out)
    );

    // The private key where the public one is wanted, a missing key, a bad hash.
    for (args, words) in [
        (vec!["--key", key.to_str().unwrap()], "public"),
        (vec!["--key", "/nonexistent.pub"], "nonexistent"),
    ] {
        let mut all = vec!["verify", plain.to_str().unwrap()];
        all.extend(args);
        let out = cobsfile(&all);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(words), "{err}");
    }
    let public = dir.join("archive.pub");
    let out = verify(&plain, &public, &["--extends", "abc"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    // --seal with a public key, or a key others can read, is refused before anything is written.
    let out = cobsfile(&[
        "pack",
        input.to_str().unwrap(),
        "-o",
        dir.join("x.cobs").to_str().unwrap(),
        "--seal",
        public.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(!dir.join("x.cobs").exists());
}

#[test]
fn cat_authentic_returns_only_records_a_valid_seal_covers() {
    let dir = scratch("seal-cat");
    let key = generate(&dir, "archive");
    let public = dir.join("archive.pub");
    let file = packed(&dir, &key);
    let cat = |file: &Path| {
        cobsfile(&[
            "cat",
            file.to_str().unwrap(),
            "--key",
            public.to_str().unwrap(),
            "--authentic",
        ])
    };
    let out = cat(&file);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let all: String = (0..3000).map(|i| format!("event {i:05}\n")).collect();
    assert_eq!(stdout(&out), all);

    // A record changed with the block's CRC made to match: cat without a key prints it; cat
    // --authentic leaves its block out, says so, and exits 6.
    let bytes = std::fs::read(&file).unwrap();
    let at = bytes
        .windows(11)
        .position(|w| w == b"event 01500")
        .expect("the record, stored as is");
    // The block holding it, re-framed from its records with one changed, its CRC made to
    // match.
    let ls = stdout(&cobsfile(&["ls", "--json", file.to_str().unwrap()]));
    let block = ls
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| {
            let (o, s) = (
                v["offset"].as_u64().unwrap() as usize,
                v["size"].as_u64().unwrap() as usize,
            );
            v["type"] == "data" && o < at && at < o + s
        })
        .unwrap();
    let (o, s) = (
        block["offset"].as_u64().unwrap() as usize,
        block["size"].as_u64().unwrap() as usize,
    );
    let one = [&[0u8][..], &bytes[o + 1..=o + s]].concat();
    let records: Vec<Vec<u8>> = {
        let mut r = cobsfile::ReaderBuilder::new().from_slice(&one);
        let mut v = Vec::new();
        while let Some(x) = r.next_record() {
            v.push(x.unwrap().to_vec());
        }
        v
    };
    let records: Vec<Vec<u8>> = records
        .into_iter()
        .map(|r| {
            if r == b"event 01500" {
                b"event 01509".to_vec()
            } else {
                r
            }
        })
        .collect();
    let mut payload = Vec::new();
    cobsfile::varint::write(records.len() as i64, &mut payload);
    for r in &records {
        cobsfile::varint::write(r.len() as i64, &mut payload);
        payload.extend_from_slice(r);
    }
    let data = data_block(&payload);
    let tampered = [&bytes[..=o], &data[..], &bytes[o + s + 1..]].concat();
    let path = dir.join("tampered.cobs");
    std::fs::write(&path, &tampered).unwrap();
    let plain = cobsfile(&["cat", path.to_str().unwrap()]);
    assert!(stdout(&plain).contains("event 01509"));
    let out = cat(&path);
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    assert!(
        !stdout(&out).contains("event 0150"),
        "the altered block left out"
    );
    assert!(
        stderr(&out).contains("tampered (altered)"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn pack_append_seal_to_a_log_directory_seals_every_segment() {
    let dir = scratch("seal-dir");
    let key = generate(&dir, "archive");
    let public = dir.join("archive.pub");
    let log = dir.join("log");
    for part in 0..2 {
        let input = dir.join(format!("part{part}.txt"));
        let text: String = (0..4000)
            .map(|i| format!("part {part} event {i:05}\n"))
            .collect();
        std::fs::write(&input, text).unwrap();
        let out = cobsfile(&[
            "pack",
            input.to_str().unwrap(),
            "--append",
            log.to_str().unwrap(),
            "--segment-size",
            "32K",
            "--seal",
            key.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let segments = std::fs::read_dir(&log).unwrap().count();
    assert!(segments >= 3, "{segments} segments");
    let out = verify(&log, &public, &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert_eq!(stdout(&out).matches("authentic: ").count(), segments);
    let out = cobsfile(&[
        "cat",
        "--key",
        public.to_str().unwrap(),
        "--authentic",
        log.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).lines().count(), 8000);
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));
}

/// `verify --key --since/--until` verifies the window's blocks between seals (spec 9.10.1) and
/// says which bytes; `cat --key --authentic --since/--until` prints what `cat --since/--until`
/// prints, on any number of threads, with --skip and --limit counted among authentic records.
#[test]
fn a_window_of_a_sealed_file_verifies_and_reads_alone() {
    let dir = scratch("seal-window");
    let key = generate(&dir, "archive");
    let public = dir.join("archive.pub");
    let input = dir.join("events.jsonl");
    let text: String = (0..20_000)
        .map(|i| format!("{{\"ts\": {}, \"n\": {i}}}\n", 1_767_225_600 + i))
        .collect();
    std::fs::write(&input, text).unwrap();
    let file = dir.join("events.cobs");
    let (input, file_arg) = (input.to_str().unwrap(), file.to_str().unwrap());
    let done = cobsfile(&[
        "pack",
        input,
        "-o",
        file_arg,
        "--time-field",
        "ts",
        "--block-target",
        "8K",
        "--seal",
        key.to_str().unwrap(),
        "--seal-every",
        "32K",
    ]);
    assert!(done.status.success(), "{}", stderr(&done));
    let window = ["--since", "@1767235600", "--until", "@1767235699"];
    let out = verify(&file, &public, &window);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let text = stdout(&out);
    assert!(text.contains("clean, finished"), "{text}");
    assert!(text.contains("only: the window's blocks"), "{text}");
    let json = verify(&file, &public, &[&window[..], &["--json"]].concat());
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let span = &v["seals"]["span"];
    let (start, end) = (
        span["start"].as_u64().unwrap(),
        span["end"].as_u64().unwrap(),
    );
    let len = std::fs::metadata(&file).unwrap().len();
    assert!(
        start > 0 && end < len && end - start < len / 4,
        "{span} of {len}"
    );
    // The whole file's verification has no span.
    let whole = verify(&file, &public, &["--json"]);
    let v: serde_json::Value = serde_json::from_slice(&whole.stdout).unwrap();
    assert!(v["seals"]["span"].is_null());

    let plain = cobsfile(&[&["cat", file_arg][..], &window].concat());
    assert_eq!(stdout(&plain).lines().count(), 100);
    let public = public.to_str().unwrap();
    for threads in ["1", "2"] {
        let authentic = cobsfile(
            &[
                &[
                    "cat",
                    file_arg,
                    "--key",
                    public,
                    "--authentic",
                    "--threads",
                    threads,
                ][..],
                &window,
            ]
            .concat(),
        );
        assert_eq!(authentic.status.code(), Some(0), "{}", stderr(&authentic));
        assert_eq!(stdout(&authentic), stdout(&plain), "{threads} thread(s)");
        let some = cobsfile(
            &[
                &[
                    "cat",
                    file_arg,
                    "--key",
                    public,
                    "--authentic",
                    "--threads",
                    threads,
                ][..],
                &["--skip", "10", "--limit", "5"],
                &window,
            ]
            .concat(),
        );
        let all = stdout(&plain);
        let lines: Vec<&str> = all.lines().skip(10).take(5).collect();
        assert_eq!(stdout(&some), lines.join("\n") + "\n");
    }
    // A window without a key is a usage mistake.
    let out = cobsfile(&[&["verify", file_arg][..], &window].concat());
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}
