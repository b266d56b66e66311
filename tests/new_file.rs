//! `cobsfile::fs::NewFile` on the real file system: the file appears under its name only
//! once whole, a name taken meanwhile is never overwritten unless replacing was asked for, and
//! nothing is left behind. (What a power cut at each step leaves is `tests/power_loss.rs`.)

use std::io::Write;
use std::path::{Path, PathBuf};

use cobsfile::fs::NewFile;

/// A fresh, empty directory for one test.
fn dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cobsfile-new-file-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_new_file_appears_only_when_persisted() {
    let dir = dir("appears");
    let path = dir.join("out.cobs");
    let mut file = NewFile::create(&path, false).unwrap();
    file.write_all(b"whole").unwrap();
    let mut writer = file.writer();
    writer.write_all(b" file").unwrap();
    assert!(!path.exists(), "named before it was whole");
    file.persist().unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"whole file");
    assert_eq!(names(&dir), ["out.cobs"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_name_taken_meanwhile_is_not_overwritten() {
    let dir = dir("taken");
    let path = dir.join("out.cobs");
    let mut file = NewFile::create(&path, false).unwrap();
    file.write_all(b"new").unwrap();
    std::fs::write(&path, b"someone else's").unwrap();
    let err = file.persist().unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists, "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), b"someone else's");
    assert_eq!(names(&dir), ["out.cobs"], "a temporary file was left");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn replacing_replaces_and_dropping_leaves_nothing() {
    let dir = dir("replace");
    let path = dir.join("out.cobs");
    std::fs::write(&path, b"old").unwrap();
    let mut file = NewFile::create(&path, true).unwrap();
    file.write_all(b"new").unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"old");
    file.persist().unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"new");
    let mut dropped = NewFile::create(&path, true).unwrap();
    dropped.write_all(b"abandoned").unwrap();
    drop(dropped);
    assert_eq!(std::fs::read(&path).unwrap(), b"new");
    assert_eq!(names(&dir), ["out.cobs"]);
    std::fs::remove_dir_all(&dir).unwrap();
}
