//! Timing for the examples that measure throughput.

#![allow(dead_code)]

use std::time::{Duration, Instant};

/// Runs per measurement.
pub const RUNS: usize = 5;

/// How long one run of `f` takes.
pub fn time(f: impl FnOnce()) -> Duration {
    let start = Instant::now();
    f();
    start.elapsed()
}

/// The best time of `RUNS` runs of `f`.
pub fn best(mut f: impl FnMut()) -> Duration {
    (0..RUNS).map(|_| time(&mut f)).min().expect("runs")
}
