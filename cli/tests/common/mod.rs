//! What the command-line tests share: the built binary, scratch directories, running it.

#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cobsfile"))
}

/// The repository's root, where `samples/` and `spec/` are.
pub fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// A fresh, empty scratch directory for one test. Emptied first: a process id is reused (a
/// container starts its processes at the same ids on every run), and what an earlier run left
/// would otherwise be taken for this run's output.
pub fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cobsfile-cli-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub fn run(cmd: &mut Command, stdin: &[u8]) -> Output {
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

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A data block (type 3) holding `payload`, codec 0, from its type field to its closing sync
/// byte, built from the spec: type, length, COBS(codec, payload, CRC-32 of type field, codec
/// and payload), 0x00.
pub fn data_block(payload: &[u8]) -> Vec<u8> {
    let mut body = vec![0u8];
    body.extend_from_slice(payload);
    let mut crc = crc32fast::Hasher::new();
    crc.update(&[0x06]);
    crc.update(&body);
    body.extend_from_slice(&crc.finalize().to_le_bytes());
    let mut encoded = Vec::new();
    cobsfile::cobs::encode(&body, &mut encoded);
    let mut out = vec![0x06];
    cobsfile::varint::write(encoded.len() as i64 + 1, &mut out);
    out.extend_from_slice(&encoded);
    out.push(0);
    out
}
