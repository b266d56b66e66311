//! A progress bar on stderr for long work, shown only when stderr is a terminal that the
//! output does not go to, and only once the work has taken a second: a quick command draws
//! nothing, and records written to the terminal are never mixed with a bar.

use std::cell::Cell;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How long work goes on before its bar is drawn.
const DELAY: Duration = Duration::from_secs(1);

/// Progress through a known or unknown number of bytes.
pub struct Progress(Option<Bar>);

struct Bar {
    bar: ProgressBar,
    started: Instant,
    shown: Cell<bool>,
}

impl Progress {
    /// Starts a bar over `total` bytes (a spinner when unknown).
    pub fn start(total: Option<u64>, verb: &str) -> Self {
        // Output to a terminal is taken to be the same terminal as stderr's.
        if !std::io::stderr().is_terminal() || std::io::stdout().is_terminal() {
            return Progress(None);
        }
        let bar = match total {
            Some(total) => ProgressBar::new(total).with_style(
                ProgressStyle::with_template(
                    "{msg} {wide_bar} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
                )
                .expect("valid template"),
            ),
            None => ProgressBar::new_spinner().with_style(
                ProgressStyle::with_template("{msg} {spinner} {bytes} {bytes_per_sec}")
                    .expect("valid template"),
            ),
        };
        // Hidden until the delay has passed.
        bar.set_draw_target(ProgressDrawTarget::hidden());
        bar.set_message(verb.to_owned());
        Progress(Some(Bar {
            bar,
            started: Instant::now(),
            shown: Cell::new(false),
        }))
    }

    /// Records that `pos` bytes are done.
    pub fn set(&self, pos: u64) {
        if let Some(Bar {
            bar,
            started,
            shown,
        }) = &self.0
        {
            if !shown.get() && started.elapsed() >= DELAY {
                bar.set_draw_target(ProgressDrawTarget::stderr_with_hz(4));
                shown.set(true);
            }
            bar.set_position(pos);
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(Bar { bar, .. }) = &self.0 {
            bar.finish_and_clear();
        }
    }
}
