//! Keys and seals, run as the built binary: `key generate` and `key id`, and every mistake
//! with a key one clear line that never shows a key's bytes.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Output;

mod common;
use common::{bin, run, scratch, stderr};

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
