//! A progress bar on stderr for long work, shown only when stderr is a terminal.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Progress through a known or unknown number of bytes.
pub struct Progress(Option<ProgressBar>);

impl Progress {
    /// Starts a bar over `total` bytes (a spinner when unknown).
    pub fn start(total: Option<u64>, verb: &str) -> Self {
        if !std::io::stderr().is_terminal() {
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
        bar.set_draw_target(ProgressDrawTarget::stderr_with_hz(4));
        bar.set_message(verb.to_owned());
        Progress(Some(bar))
    }

    /// Records that `pos` bytes are done.
    pub fn set(&self, pos: u64) {
        if let Some(bar) = &self.0 {
            bar.set_position(pos);
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}
