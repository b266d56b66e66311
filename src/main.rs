//! The `cobsfile` command-line tool: argument parsing and output formatting around the library.

mod cli;

use std::process::ExitCode;

fn main() -> ExitCode {
    cli::run()
}
