//! `cobsfile verify`: every block read and checked; a report of intact and damaged ranges.

use std::io::{self, Write};
use std::path::Path;

use cobsfile::{Cause, Reader, Report, Source};
use serde_json::{json, Value};

use super::input::{self, ReadJob};
use super::{Failure, Outcome, ReadOptions};

/// The `verify` command's job.
pub struct Verify {
    pub name: String,
    pub json: bool,
}

impl Verify {
    /// Verifies the file at `path` (mapped, on the options' threads) or stdin (streamed).
    pub fn run(self, path: &Path, options: &ReadOptions) -> Result<Outcome, Failure> {
        let builder = options.builder()?;
        let report = match input::open(path)? {
            input::Input::Stream(stream) => cobsfile::verify(&mut builder.from_read(stream)),
            input::Input::Mapped(file) => builder.verify(file.bytes()),
        };
        self.print(&report.map_err(|e| Failure::at(&self.name, e))?)
    }

    fn print(&self, report: &Report) -> Result<Outcome, Failure> {
        not_a_cobsfile(&self.name, report)?;
        let mut out = io::stdout().lock();
        let written = if self.json {
            writeln!(out, "{}", report_json(&self.name, report))
        } else {
            write_text(&mut out, &self.name, report, "damaged")
        };
        super::quiet_broken_pipe(written)?;
        Ok(outcome(report))
    }
}

impl ReadJob for Verify {
    type Output = Outcome;

    fn run<S: Source>(self, reader: &mut Reader<S>, _: Option<u64>) -> Result<Outcome, Failure> {
        let report = cobsfile::verify(reader).map_err(|e| Failure::at(&self.name, e))?;
        self.print(&report)
    }
}

/// Fails for a non-empty input in which nothing at all is intact (spec 9.5).
pub fn not_a_cobsfile(name: &str, report: &Report) -> Result<(), Failure> {
    if report.blocks.total() > 0 || report.damaged.is_empty() {
        return Ok(());
    }
    let over_limit = report
        .damaged
        .iter()
        .map(|d| &d.cause)
        .find(|c| c.is_over_limit());
    Err(no_intact_block(name, over_limit))
}

/// What a command says of an input in which nothing is intact: not a cobsfile, or, when
/// blocks were refused for their size (`over_limit`), a `--max-body-size` too small for it.
pub fn no_intact_block(name: &str, over_limit: Option<&Cause>) -> Failure {
    match over_limit {
        Some(cause) => Failure::at(
            name,
            format!("no block fits within --max-body-size ({cause}); raise it to read this file"),
        ),
        None => Failure::at(name, "not a cobsfile: no intact block found"),
    }
}

/// Clean when nothing is damaged or unreadable.
pub fn outcome(report: &Report) -> Outcome {
    if report.damaged.is_empty() {
        Outcome::Clean
    } else {
        Outcome::Damaged
    }
}

/// One line per damaged range (`verb` says what became of it), then a summary line.
pub fn write_text(out: &mut impl Write, name: &str, report: &Report, verb: &str) -> io::Result<()> {
    for d in &report.damaged {
        let state = if d.is_damage() { verb } else { "unreadable" };
        let held = d.held.as_ref().map_or(String::new(), |h| {
            format!(
                " (held {} block(s): {} data with {} records, {} metadata)",
                h.blocks, h.data_blocks, h.records, h.metadata_blocks
            )
        });
        writeln!(
            out,
            "{name}: bytes {}..{} {state}: {}{held}",
            d.range.start, d.range.end, d.cause
        )?;
    }
    let b = &report.blocks;
    let mut kinds = format!(
        "{} header, {} metadata, {} data, {} dictionary, {} index",
        b.header, b.metadata, b.data, b.dictionary, b.index
    );
    for (id, n) in &b.unknown {
        kinds.push_str(&format!(", {n} of unknown type {id}"));
    }
    let state = if report.damaged.is_empty() {
        "clean".to_owned()
    } else {
        let bytes = report.damaged_bytes();
        format!(
            "{} {verb} range(s), {bytes} bytes ({:.3}%)",
            report.damaged.len(),
            100.0 * bytes as f64 / report.len.max(1) as f64
        )
    };
    writeln!(
        out,
        "{name}: {state}; intact: {} blocks ({kinds}), {} records, {} of {} bytes",
        b.total(),
        report.records,
        report.intact_bytes(),
        report.len
    )
}

/// The report as a JSON object.
pub fn report_json(name: &str, report: &Report) -> Value {
    let b = &report.blocks;
    let unknown: Vec<Value> = b
        .unknown
        .iter()
        .map(|(id, n)| json!({ "type": id, "blocks": n }))
        .collect();
    let damaged: Vec<Value> = report
        .damaged
        .iter()
        .map(|d| {
            json!({
                "start": d.range.start,
                "end": d.range.end,
                "status": if d.is_damage() { "damaged" } else { "unreadable" },
                "cause": d.cause.to_string(),
                "held": d.held.as_ref().map(|h| json!({
                    "blocks": h.blocks,
                    "data_blocks": h.data_blocks,
                    "metadata_blocks": h.metadata_blocks,
                    "records": h.records,
                })),
            })
        })
        .collect();
    let intact: Vec<Value> = report
        .intact_ranges()
        .iter()
        .map(|r| json!([r.start, r.end]))
        .collect();
    json!({
        "file": name,
        "size": report.len,
        "clean": report.damaged.is_empty(),
        "blocks": {
            "total": b.total(),
            "header": b.header,
            "metadata": b.metadata,
            "data": b.data,
            "dictionary": b.dictionary,
            "index": b.index,
            "unknown": unknown,
        },
        "records": report.records,
        "intact_bytes": report.intact_bytes(),
        "block_bytes": report.block_bytes,
        "damaged_bytes": report.damaged_bytes(),
        "intact": intact,
        "damaged": damaged,
    })
}
