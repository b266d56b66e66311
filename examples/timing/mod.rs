//! Timing for the examples that measure throughput.

use std::time::{Duration, Instant};

/// Runs per measurement.
pub const RUNS: usize = 5;

/// The best time of `RUNS` runs of `f`.
pub fn best(mut f: impl FnMut()) -> Duration {
    (0..RUNS)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .min()
        .expect("runs")
}
