//! `cobsfile finish`: finish open logs in place (spec 11.3), as an appender of a log directory
//! finishes the segments it leaves: a log rotated away, say, so that readers seek in it and
//! read time windows by its index.

use std::path::PathBuf;

use super::{input, Failure, Outcome, ReadOptions};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    read: ReadOptions,
    /// The logs to finish: each gets an index (its padding and damage listed as gaps), a time
    /// index and an end block, in place, once no appender, mapping reader or follower has it
    /// open. A log directory's segments but the newest.
    #[arg(value_name = "LOG", required = true)]
    logs: Vec<PathBuf>,
}

pub fn run(args: Args) -> Result<Outcome, Failure> {
    let options = args.read.builder()?;
    super::each_arg(&args.logs, None, |path| {
        let name = input::name(path);
        if let Some(dir) = super::log_dir(path) {
            let done = cobsfile::segments::maintain(dir, &Default::default(), &options)
                .map_err(|e| Failure::at(&name, e))?;
            println!(
                "{name}: {} segment(s) finished, {} left as they are (open elsewhere)",
                done.finished, done.busy
            );
            return Ok(Outcome::Clean);
        }
        match cobsfile::finish_log(path, &options).map_err(|e| Failure::at(&name, e))? {
            cobsfile::Finish::Finished(f) => {
                println!(
                    "{name}: finished: {} blocks, {} records{}{}",
                    f.blocks,
                    f.records,
                    if f.indexed {
                        ", indexed"
                    } else {
                        ", no index (a block could not be checked)"
                    },
                    if f.cut > 0 {
                        format!("; a torn tail of {} bytes cut", f.cut)
                    } else {
                        String::new()
                    }
                );
                Ok(Outcome::Clean)
            }
            cobsfile::Finish::Already => {
                println!("{name}: finished already");
                Ok(Outcome::Clean)
            }
            cobsfile::Finish::Empty => Err(Failure::at(&name, "empty: nothing to finish")),
            cobsfile::Finish::Busy => Err(Failure::at(
                &name,
                "open elsewhere (an appender, a reader that maps it, or a follower): left as it is",
            )),
        }
    })
}
