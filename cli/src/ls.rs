//! `cobsfile ls`: one row per block.

use std::io::{self, BufWriter, Write};

use cobsfile::{BlockInfo, Damage, Error, Index, Reader, Source};
use serde_json::{json, Value};

use super::input::{self, ReadJob};
use super::verify::damage_json;
use super::{quiet_broken_pipe, Failure, Outcome};

/// The `ls` command's job.
pub struct Ls {
    pub name: String,
    pub json: bool,
    /// The input's index, when it was read without the input at hand.
    pub index: Option<Index>,
}

/// One row of the listing.
struct Row {
    offset: u64,
    block_type: String,
    size: u64,
    items: Option<u64>,
    codec: &'static str,
    /// `intact`, `damaged` or `unreadable`.
    status: &'static str,
    /// For damaged and unreadable rows: the range, and the error that reported it.
    damage: Option<(Damage, String)>,
    /// A time block's earliest and latest time, or a data block's it describes.
    times: Option<cobsfile::TimeSpan>,
}

impl Row {
    fn block(info: &BlockInfo, times: Option<cobsfile::TimeSpan>) -> Self {
        Row {
            times,
            offset: info.offset,
            block_type: info.block_type.name(),
            size: info.size,
            items: info.items,
            codec: info.codec,
            status: "intact",
            damage: None,
        }
    }

    fn damage(damage: Damage, err: &Error) -> Self {
        let status = damage.status();
        Row {
            offset: damage.range.start,
            block_type: status.into(),
            size: damage.range.end - damage.range.start,
            items: None,
            codec: "-",
            status,
            damage: Some((damage, err.to_string())),
            times: None,
        }
    }

    fn write(&self, out: &mut impl Write, name: &str, json: bool) -> io::Result<()> {
        if json {
            let mut row = json!({
                "file": name,
                "offset": self.offset,
                "type": self.block_type,
                "size": self.size,
                "records": self.items,
                "codec": self.codec,
                "status": self.status,
            });
            // Event times in nanoseconds since the epoch (spec 8.8).
            if let (Some(times), Some(row)) = (self.times, row.as_object_mut()) {
                row.insert("min_time".into(), times.min.into());
                row.insert("max_time".into(), times.max.into());
            }
            // A damaged range's row has every field `verify --json` gives the range.
            if let (Some((damage, _)), Some(row)) = (&self.damage, row.as_object_mut()) {
                if let Value::Object(fields) = damage_json(damage) {
                    row.extend(fields);
                }
            }
            return writeln!(out, "{row}");
        }
        let items = self.items.map_or("-".to_owned(), |n| n.to_string());
        let status = match &self.damage {
            Some((_, message)) => format!("{}: {message}", self.status),
            None => self.status.to_owned(),
        };
        writeln!(
            out,
            "{:>12}  {:<12}  {:>10}  {:>8}  {:<9}  {status}",
            self.offset, self.block_type, self.size, items, self.codec
        )
    }
}

impl ReadJob for Ls {
    type Output = Outcome;

    fn with_index(&mut self, index: &Index) {
        self.index = Some(index.clone());
    }

    fn run<S: Source>(self, mut reader: Reader<S>, _: Option<u64>) -> Result<Outcome, Failure> {
        let reader = &mut reader;
        let mut out = BufWriter::new(io::stdout().lock());
        if !self.json {
            let header = writeln!(
                out,
                "{:>12}  {:<12}  {:>10}  {:>8}  {:<9}  status",
                "offset", "type", "size", "records", "codec"
            );
            if !quiet_broken_pipe(header)? {
                return Ok(Outcome::Clean);
            }
        }
        // What a damaged range held, as `verify` says it, when the whole input is at hand
        // (a mapped file) and ends with an index of the file from its start.
        let source = reader.source();
        let index = match self.index {
            Some(index) => Some(index),
            None => (source.base() == 0 && source.at_eof())
                .then(|| Index::find(source.window()))
                .flatten(),
        }
        .filter(|i| i.start() == 0);
        let mut diagnostics = input::Diagnostics::new(self.name.clone());
        let mut blocks = reader.blocks();
        while let Some(item) = blocks.next() {
            let row = match item {
                Ok(info) => Row::block(&info, blocks.reader().block_times()),
                Err(e) => {
                    let row = match Damage::of_error(&e) {
                        Some(mut damage) => {
                            if let Some(index) = &index {
                                damage.attribute(index);
                            }
                            Row::damage(damage, &e)
                        }
                        None => return Err(Failure::at(&self.name, e)),
                    };
                    diagnostics.error(blocks.reader(), e)?;
                    row
                }
            };
            if !quiet_broken_pipe(row.write(&mut out, &self.name, self.json))? {
                break;
            }
        }
        quiet_broken_pipe(out.flush())?;
        diagnostics.finish(reader)
    }
}
