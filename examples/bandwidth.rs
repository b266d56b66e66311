//! How fast this machine reads memory on 1 and 2 threads: the ceiling of a read that touches
//! every byte of a file once, as an uncompressed read does (its check for a 0x00, or its
//! COBS decoding, is where the bytes first come from memory).
//!
//! ```text
//! cargo run --release --example bandwidth
//! ```
//!
//! Each thread ORs together the words of its half of a buffer of 100 MB (the size of the
//! benchmarks' corpora), which the compiler vectorizes; the buffer is written first, so no
//! page faults are timed. Six rounds, each the best of 10 passes per thread count, the
//! counts alternating.

use std::time::Instant;

const BYTES: usize = 100 << 20;

/// Reads every word of `words`.
fn or_all(words: &[u64]) -> u64 {
    words.iter().fold(0, |acc, &w| acc | w)
}

/// The time of a pass over `words` on `threads` threads, in seconds.
fn pass(words: &[u64], threads: usize) -> f64 {
    let start = Instant::now();
    let part = words.len().div_ceil(threads);
    let found = std::thread::scope(|scope| {
        let handles: Vec<_> = words
            .chunks(part)
            .map(|chunk| scope.spawn(move || or_all(chunk)))
            .collect();
        handles
            .into_iter()
            .fold(0, |acc, h| acc | h.join().unwrap())
    });
    assert_eq!(std::hint::black_box(found), 1);
    start.elapsed().as_secs_f64()
}

fn main() {
    let words = vec![1u64; BYTES / 8];
    for _ in 0..6 {
        let best = |threads| {
            (0..10)
                .map(|_| pass(&words, threads))
                .fold(f64::INFINITY, f64::min)
        };
        let (one, two) = (best(1), best(2));
        println!(
            "1 thread {:5.1} GB/s   2 threads {:5.1} GB/s   ({:.2}x)",
            BYTES as f64 / one / 1e9,
            BYTES as f64 / two / 1e9,
            one / two
        );
    }
}
