//! A temporary file for tests and the fuzz harness (which includes this file by path, so it
//! depends on the standard library only).

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

/// A file under the system temporary directory, removed on drop.
#[derive(Debug)]
pub struct TempFile(pub PathBuf);

impl TempFile {
    pub fn with_contents(bytes: &[u8]) -> Self {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let name = format!(
            "cobsfile-test-{}-{}-{}.cobs",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed),
            nanos
        );
        let path = std::env::temp_dir().join(name);
        std::fs::write(&path, bytes).expect("write temp file");
        TempFile(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
