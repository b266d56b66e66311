//! `cobsfile meta`: the metadata blocks, found by skipping data blocks.
//!
//! A file is scanned through [`MappedFile::metadata_with`], which keeps the kernel from
//! reading ahead around each block header; stdin is a stream and is read through. An object
//! in a store (`s3://`) with an index is read by byte ranges: its tail and the metadata blocks
//! the index lists.

use std::io::{self, BufWriter, Write};
use std::path::Path;

use cobsfile::{Metadata, Reader, Result as ReadResult, Source};
use serde_json::{json, Map, Value};

use super::input::{self, ReadJob};
use super::text::printable;
use super::{quiet_broken_pipe, Failure, ListArgs, Outcome};

/// Runs `cobsfile meta`.
pub fn run(args: ListArgs) -> Result<Outcome, Failure> {
    let headings = (!args.json).then_some("");
    super::each_file(&args.files, headings, |path| run_one(&args, path))
}

/// `meta` of one file.
fn run_one(args: &ListArgs, path: &Path) -> Result<Outcome, Failure> {
    let job = Meta {
        name: input::name(path),
        json: args.json,
    };
    let builder = args.read.builder()?;
    if let Some(url) = input::object_url(path) {
        return job.run_remote(url, &builder);
    }
    match input::open(path)? {
        input::Input::Stream(stream) => job.run(builder.from_read(stream), None),
        input::Input::Mapped(file) => {
            let mut scan = file.metadata_with(&builder);
            job.print(&mut scan, |scan| scan.reader())
        }
    }
}

/// The `meta` command's job.
pub struct Meta {
    pub name: String,
    pub json: bool,
}

/// A value as JSON: a string when it is UTF-8, else `{"hex": "..."}`.
fn json_value(value: &[u8]) -> Value {
    match std::str::from_utf8(value) {
        Ok(text) => Value::String(text.to_owned()),
        Err(_) => json!({ "hex": hex(value) }),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The schema of typed records (`avro.schema`) as JSON, and its fingerprint
/// (`avro.fingerprint`, 8 bytes little-endian) as the hex of the number, for people and
/// tools; `None` for other entries, or values that are not what these keys hold.
fn typed_value(key: &str, value: &[u8]) -> Option<Value> {
    match key {
        cobsfile::avro::SCHEMA_KEY => serde_json::from_slice(value).ok(),
        cobsfile::avro::FINGERPRINT_KEY => {
            let bytes: [u8; 8] = value.try_into().ok()?;
            Some(Value::String(format!("{:016x}", u64::from_le_bytes(bytes))))
        }
        _ => None,
    }
}

fn write_block(out: &mut impl Write, name: &str, block: &Metadata, json: bool) -> io::Result<()> {
    if json {
        let entries: Map<String, Value> = block
            .entries
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    typed_value(k, v).unwrap_or_else(|| json_value(v)),
                )
            })
            .collect();
        return writeln!(
            out,
            "{}",
            json!({ "file": name, "offset": block.offset, "entries": entries })
        );
    }
    writeln!(out, "metadata at offset {}:", block.offset)?;
    for (raw, value) in &block.entries {
        let key = printable(raw, false);
        match typed_value(raw, value) {
            // The schema indented, one line per attribute, under its key.
            Some(Value::String(fingerprint)) => {
                writeln!(out, "  {key} = {fingerprint}")?;
                continue;
            }
            Some(schema) => {
                let pretty = serde_json::to_string_pretty(&schema).map_err(io::Error::other)?;
                writeln!(out, "  {key} =")?;
                for line in pretty.lines() {
                    writeln!(out, "    {}", printable(line, false))?;
                }
                continue;
            }
            None => {}
        }
        match std::str::from_utf8(value) {
            // Debug escapes what it quotes, control characters included.
            Ok(text) => writeln!(out, "  {key} = {text:?}")?,
            Err(_) => writeln!(out, "  {key} = hex:{}", hex(value))?,
        }
    }
    Ok(())
}

impl ReadJob for Meta {
    type Output = Outcome;

    fn run<S: Source>(self, mut reader: Reader<S>, _: Option<u64>) -> Result<Outcome, Failure> {
        let reader = &mut reader;
        self.print(&mut reader.metadata(), |blocks| blocks.reader())
    }
}

impl Meta {
    /// `meta` of the object at `url`, read by byte ranges: when the object ends with a usable
    /// index, its tail and the metadata blocks the index lists, each checked to be an intact
    /// metadata block where the index says (damage elsewhere is not looked for: `verify`
    /// reads every block); otherwise a read from the start, as stdin is read.
    fn run_remote(self, url: &str, builder: &cobsfile::ReaderBuilder) -> Result<Outcome, Failure> {
        let object =
            cobsfile_store::RemoteObject::open(url).map_err(|e| Failure::new(e.to_string()))?;
        let remote = object.remote();
        if remote.index().is_none_or(|index| index.start() != 0) {
            let size = remote.size();
            return self.run(remote.reader(builder), Some(size));
        }
        let blocks = remote
            .metadata(builder)
            .map_err(|e| Failure::at(&self.name, e))?;
        let mut out = BufWriter::new(io::stdout().lock());
        for block in &blocks {
            if !quiet_broken_pipe(write_block(&mut out, &self.name, block, self.json))? {
                break;
            }
        }
        quiet_broken_pipe(out.flush())?;
        Ok(Outcome::Clean)
    }

    /// Prints the metadata blocks `blocks` yields and reports its errors; `reader` gives the
    /// reader behind it.
    fn print<I, S>(
        self,
        blocks: &mut I,
        reader: impl Fn(&I) -> &Reader<S>,
    ) -> Result<Outcome, Failure>
    where
        I: Iterator<Item = ReadResult<Metadata>>,
        S: Source,
    {
        let mut out = BufWriter::new(io::stdout().lock());
        let mut diagnostics = input::Diagnostics::new(self.name.clone());
        while let Some(item) = blocks.next() {
            match item {
                Ok(block) => {
                    if !quiet_broken_pipe(write_block(&mut out, &self.name, &block, self.json))? {
                        break;
                    }
                }
                Err(e) => diagnostics.error(reader(blocks), e)?,
            }
        }
        quiet_broken_pipe(out.flush())?;
        diagnostics.finish(reader(blocks))
    }
}
