//! Replays every input the fuzzers keep (`fuzz/corpus/<target>/`, `fuzz/regressions/<target>/`)
//! through the same harness functions the libFuzzer targets call, on stable: each CI run
//! re-checks every input a fuzzer ever found interesting. Inputs under a `known-bugs/`
//! directory reproduce open bugs and are listed, not replayed, until the library is fixed.

#[path = "../fuzz/harness.rs"]
mod harness;

use std::path::{Path, PathBuf};

/// The files under `dir` (recursively), sorted; those under a `known-bugs/` directory apart.
fn inputs(dir: &Path, found: &mut Vec<PathBuf>, known_bugs: &mut Vec<PathBuf>, in_bugs: bool) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.map(|e| e.expect("read_dir").path()).collect();
    paths.sort();
    for path in paths {
        let bugs = in_bugs || path.file_name().is_some_and(|n| n == "known-bugs");
        if path.is_dir() {
            inputs(&path, found, known_bugs, bugs);
        } else if bugs {
            known_bugs.push(path);
        } else {
            found.push(path);
        }
    }
}

#[test]
fn every_kept_fuzz_input_passes_its_target() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut missing = Vec::new();
    for (name, target) in harness::TARGETS {
        let corpus = root.join("corpus").join(name);
        if !corpus.is_dir() {
            missing.push(*name);
            continue;
        }
        let (mut found, mut known_bugs) = (Vec::new(), Vec::new());
        inputs(&corpus, &mut found, &mut known_bugs, false);
        inputs(
            &root.join("regressions").join(name),
            &mut found,
            &mut known_bugs,
            false,
        );
        for path in &found {
            let data = std::fs::read(path).expect("read a kept input");
            let outcome = std::panic::catch_unwind(|| target(&data));
            assert!(outcome.is_ok(), "{name}: {} fails", path.display());
        }
        println!("{name}: replayed {} inputs", found.len());
        for path in &known_bugs {
            println!("{name}: skipped known bug {}", path.display());
        }
    }
    assert!(
        missing.is_empty(),
        "targets without a corpus directory: {missing:?}"
    );
}
