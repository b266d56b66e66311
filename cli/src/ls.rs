//! `cobsfile ls`: one row per block.

use std::io::{self, BufWriter, Write};

use cobsfile::{BlockInfo, Cause, Error, Reader, Source};
use serde_json::json;

use super::input::{self, ReadJob};
use super::{quiet_broken_pipe, Failure, Outcome};

/// The `ls` command's job.
pub struct Ls {
    pub name: String,
    pub json: bool,
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
    /// For damaged and unreadable rows: the cause's name (spec 9.8) and the message.
    cause: Option<(&'static str, String)>,
}

impl Row {
    fn block(info: &BlockInfo) -> Self {
        Row {
            offset: info.offset,
            block_type: info.block_type.name(),
            size: info.size,
            items: info.items,
            codec: info.codec,
            status: "intact",
            cause: None,
        }
    }

    fn damage(start: u64, end: u64, cause: &Cause, err: &Error) -> Self {
        let status = if cause.is_damage() {
            "damaged"
        } else {
            "unreadable"
        };
        Row {
            offset: start,
            block_type: status.into(),
            size: end - start,
            items: None,
            codec: "-",
            status,
            cause: Some((cause.name(), err.to_string())),
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
            if let Some((cause, message)) = &self.cause {
                row["cause"] = (*cause).into();
                row["message"] = message.clone().into();
            }
            return writeln!(out, "{row}");
        }
        let items = self.items.map_or("-".to_owned(), |n| n.to_string());
        let status = match &self.cause {
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
        let mut diagnostics = input::Diagnostics::new(self.name.clone());
        let mut blocks = reader.blocks();
        while let Some(item) = blocks.next() {
            let row = match item {
                Ok(info) => Row::block(&info),
                Err(e) => {
                    let row = match &e {
                        Error::Damaged { start, end, cause } => {
                            Row::damage(*start, *end, cause, &e)
                        }
                        _ => return Err(Failure::at(&self.name, e)),
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
