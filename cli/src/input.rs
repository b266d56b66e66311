//! Opening a cobsfile named on the command line: mapped when it is a regular file, streamed
//! when it is `-` (stdin) or anything else that cannot be mapped (a pipe named by a path such
//! as `/dev/stdin` or `<(zcat f.gz)`, a FIFO, a character device).

use std::fs::File;
use std::io;
use std::path::Path;

use cobsfile::{Cause, Ending, Error, MappedFile, NotACobsfile, Reader, Source};

use super::{is_stdio, Failure, Outcome, ReadOptions};

/// Work done with a reader of either kind.
pub trait ReadJob {
    /// What the job returns.
    type Output;
    /// Runs the job; `size` is the input's length when known.
    fn run<S: Source>(self, reader: Reader<S>, size: Option<u64>) -> Result<Self::Output, Failure>;

    /// Takes the index of the input, known without the input at hand (an object in a store,
    /// read as a stream, whose tail was read first), before [`run`](Self::run). Ignored by
    /// default.
    fn with_index(&mut self, index: &cobsfile::Index) {
        let _ = index;
    }
}

/// Runs `job` over the cobsfile at `path` (or stdin for `-`).
pub fn read<J: ReadJob>(path: &Path, options: &ReadOptions, job: J) -> Result<J::Output, Failure> {
    read_from(path, options, 0, job)
}

/// Runs `job` over the cobsfile at `path` (or stdin for `-`) from record `skip` on: a file
/// with a usable index is entered at the block holding that record; otherwise (and on stdin)
/// the records before it are read and passed over. An object in a store is read as a stream
/// that fetches as it reads: a job that stops early (`--limit`) fetches little more than it
/// read, and the first records come without waiting for the rest of the object.
pub fn read_from<J: ReadJob>(
    path: &Path,
    options: &ReadOptions,
    skip: u64,
    mut job: J,
) -> Result<J::Output, Failure> {
    let Some(url) = object_url(path) else {
        return read_opened(path, options, skip, job);
    };
    let builder = options.builder()?;
    let object =
        cobsfile_store::RemoteObject::open(url).map_err(|e| Failure::new(e.to_string()))?;
    let remote = object.remote();
    if let Some(index) = remote.index() {
        job.with_index(index);
    }
    let mut reader = remote.reader(&builder);
    reader.skip_records(skip);
    job.run(reader, Some(remote.size()))
}

/// [`read_from`] of a local input, or stdin.
fn read_opened<J: ReadJob>(
    path: &Path,
    options: &ReadOptions,
    skip: u64,
    job: J,
) -> Result<J::Output, Failure> {
    let builder = options.builder()?;
    match open(path)? {
        Input::Stream(stream) => {
            let mut reader = builder.from_read(stream);
            reader.skip_records(skip);
            job.run(reader, None)
        }
        Input::Mapped(file) => {
            let reader = file.reader_at_record(&builder, skip);
            job.run(reader, Some(file.bytes().len() as u64))
        }
    }
}

/// An input opened for reading.
pub enum Input {
    /// Read as a stream: stdin, or a file that cannot be mapped.
    Stream(Box<dyn io::Read>),
    /// A regular file, mapped.
    Mapped(MappedFile),
}

/// Opens the input at `path` (stdin for `-`): regular files are mapped, anything else that
/// can be read is streamed; a directory is refused.
pub fn open(path: &Path) -> Result<Input, Failure> {
    if is_stdio(path) {
        return Ok(Input::Stream(Box::new(io::stdin().lock())));
    }
    if let Some(url) = object_url(path) {
        return fetched(url);
    }
    let (file, meta) = open_file(path)?;
    if !meta.is_file() {
        return Ok(Input::Stream(Box::new(file)));
    }
    Ok(Input::Mapped(
        MappedFile::open_file(&file).map_err(|e| Failure::at(&name(path), e))?,
    ))
}

/// The object storage URL `path` is (`s3://bucket/key`), if it is one.
pub fn object_url(path: &Path) -> Option<&str> {
    path.to_str()
        .filter(|p| p.starts_with("s3://") || p.starts_with("s3a://"))
}

/// The object at `url`, fetched whole into an unnamed temporary file and mapped, so that it
/// is read as a local file is, on every thread. (`sql` reads only the byte ranges a query
/// needs, and `meta` the tail and metadata blocks of an object with an index; these commands
/// read every block, or list them.)
fn fetched(url: &str) -> Result<Input, Failure> {
    let file = cobsfile_store::fetch_mapped(url).map_err(|e| Failure::new(e.to_string()))?;
    Ok(Input::Mapped(file))
}

/// Opens records to pack or train on at `path` (stdin for `-`), with the file's size when
/// known; a directory is refused as `open` refuses it.
pub fn open_records(path: &Path) -> Result<(Box<dyn io::Read>, Option<u64>), Failure> {
    if is_stdio(path) {
        return Ok((Box::new(io::stdin().lock()), None));
    }
    let (file, meta) = open_file(path)?;
    let size = meta.is_file().then_some(meta.len());
    Ok((Box::new(file), size))
}

/// Opens the file at `path` for reading, with its metadata; a directory is refused, in the
/// same words by every command.
fn open_file(path: &Path) -> Result<(File, std::fs::Metadata), Failure> {
    let name = name(path);
    let fail = |e| Failure::at(&name, e);
    let file = File::open(path).map_err(fail)?;
    let meta = file.metadata().map_err(fail)?;
    if meta.is_dir() {
        return Err(Failure::at(&name, "is a directory"));
    }
    Ok((file, meta))
}

/// The name to use for `path` in messages.
pub fn name(path: &Path) -> String {
    if is_stdio(path) {
        "<stdin>".into()
    } else {
        path.display().to_string()
    }
}

/// Reports reader errors on stderr, one line each, and decides how a command ends.
///
/// Damage seen before the first intact block is held back: if no intact block turns up at
/// all, the input is not a cobsfile and one line says so instead of a list of damage. A reader
/// that read its input to the end knows how it ends: an unfinished or empty input gets one
/// line more, and its own outcome.
pub struct Diagnostics {
    name: String,
    held: Vec<String>,
    /// The first cause held back that is a block over the reader's size limit.
    over_limit: Option<Cause>,
    /// The first cause of damage met.
    first: Option<Cause>,
    outcome: Outcome,
}

impl Diagnostics {
    /// Reports for the input called `name`.
    pub fn new(name: String) -> Self {
        Diagnostics {
            name,
            held: Vec::new(),
            over_limit: None,
            first: None,
            outcome: Outcome::Clean,
        }
    }

    /// Takes an error from `reader`: damage is reported and reading goes on; anything else
    /// stops the command.
    pub fn error<S: Source>(&mut self, reader: &Reader<S>, err: Error) -> Result<(), Failure> {
        let Error::Damaged { cause, .. } = &err else {
            return Err(Failure::at(&self.name, err));
        };
        self.outcome = self.outcome.worst(Outcome::of_damage(cause));
        if cause.is_over_limit() && self.over_limit.is_none() {
            self.over_limit = Some(cause.clone());
        }
        if self.first.is_none() {
            self.first = Some(cause.clone());
        }
        let line = format!("cobsfile: {}: {err}", self.name);
        if reader.stats().blocks == 0 && self.held.len() < 64 {
            self.held.push(line);
        } else {
            self.release();
            eprintln!("{line}");
        }
        Ok(())
    }

    /// Takes a problem found in an intact block (a typed record that cannot be decoded) and
    /// reported already: the command ends no better than `outcome`.
    pub fn note(&mut self, outcome: Outcome) {
        self.outcome = self.outcome.worst(outcome);
    }

    fn release(&mut self) {
        for line in self.held.drain(..) {
            eprintln!("{line}");
        }
    }

    /// Ends the command: fails when a damaged input held no intact block at all; says when a
    /// reader that read to the end found the input unfinished or empty (spec 9.5.1).
    pub fn finish<S: Source>(mut self, reader: &Reader<S>) -> Result<Outcome, Failure> {
        let stats = reader.stats();
        let causes = self.over_limit.iter().chain(self.first.iter());
        if let Some(verdict) = NotACobsfile::decide(stats.damaged_bytes, stats.blocks > 0, causes) {
            return Err(no_intact_block(&self.name, &verdict));
        }
        self.release();
        if let Some(ending) = reader.ending() {
            let outcome = Outcome::of_ending(ending);
            if outcome != Outcome::Clean {
                let text = ending_text(ending, None);
                eprintln!("cobsfile: {}: {text}", self.name);
            }
            self.outcome = self.outcome.worst(outcome);
        }
        Ok(self.outcome)
    }
}

/// What a command says of an input that is not a cobsfile (the library's verdict): not a
/// cobsfile, or, when blocks were refused for their size, a `--max-body-size` too small for
/// it.
pub fn no_intact_block(name: &str, verdict: &NotACobsfile) -> Failure {
    match &verdict.over_limit {
        Some(cause) => Failure::at(
            name,
            format!("no block fits within --max-body-size ({cause}); raise it to read this file"),
        ),
        None => Failure::at(name, "not a cobsfile: no intact block found"),
    }
}

/// How a file ends, as the summary says it (spec 9.5.1). `ends_in_damage`: whether damage
/// runs to the end of the input, when known.
pub fn ending_text(ending: Ending, ends_in_damage: Option<bool>) -> String {
    match ending {
        Ending::Finished => "finished".into(),
        Ending::Open => "open log".into(),
        Ending::Empty => "empty: 0 bytes, no blocks".into(),
        _ => {
            let how = match ends_in_damage {
                Some(true) => "ends in damage, without",
                Some(false) => "ends at a block boundary without",
                None => "ends without",
            };
            format!(
                "unfinished: {how} the end block a finished file has (cut, or its writer stopped)"
            )
        }
    }
}
