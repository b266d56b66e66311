//! `cobsfile completions` and `cobsfile man`: shell completion scripts and man pages, made
//! from the same clap definitions as the tool's arguments, so they cannot fall out of date.

use std::io::{self, Write};
use std::path::PathBuf;

use clap::CommandFactory;
use clap_complete::Shell;

use super::{quiet_broken_pipe, Cli, Failure, Outcome};

#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_name = "SHELL")]
    shell: Shell,
}

#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// Write a page for every command into DIR (created if missing): cobsfile.1,
    /// cobsfile-pack.1, ..., cobsfile-dict-train.1, to install into a man1 directory.
    #[arg(long, value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
    dir: Option<PathBuf>,
}

/// Prints the completion script for `args.shell` to stdout.
pub fn completions(args: CompletionsArgs) -> Result<Outcome, Failure> {
    // Generated into memory: the generators panic on a failed write, and a closed pipe is
    // no failure.
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "cobsfile", &mut script);
    print(&script)
}

/// Prints the top-level man page to stdout, or writes every command's page into a directory.
pub fn man(args: ManArgs) -> Result<Outcome, Failure> {
    match args.dir {
        None => {
            // Without `help`, as `generate_to` makes the pages: the same cobsfile.1.
            let command = Cli::command().disable_help_subcommand(true);
            let mut page = Vec::new();
            clap_mangen::Man::new(command).render(&mut page)?;
            print(&page)
        }
        Some(dir) => {
            let name = dir.display().to_string();
            std::fs::create_dir_all(&dir).map_err(|e| Failure::at(&name, e))?;
            clap_mangen::generate_to(Cli::command(), &dir).map_err(|e| Failure::at(&name, e))?;
            Ok(Outcome::Clean)
        }
    }
}

fn print(bytes: &[u8]) -> Result<Outcome, Failure> {
    let mut out = io::stdout().lock();
    if quiet_broken_pipe(out.write_all(bytes))? {
        quiet_broken_pipe(out.flush())?;
    }
    Ok(Outcome::Clean)
}
