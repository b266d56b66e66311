//! `cobsfile verify`: every block read and checked; a report of intact, damaged and unreadable
//! ranges, and of how the file ends.

use std::io::{self, Write};
use std::path::Path;

use cobsfile::key::VerifyingKey;
use cobsfile::seal::{file_id_text, hash_text, Sealed, Status};
use cobsfile::{Cause, Damage, Reader, Report, Source};
use serde_json::{json, Value};

use super::input::{self, ending_text, no_intact_block, ReadJob};
use super::{Failure, Outcome, ReadOptions};

/// `cobsfile verify`'s arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub list: super::ListArgs,
    /// Verify the seals with this public key (a `cobsfile key generate` NAME.pub; give it
    /// again for more keys): exit 6 for tampering, 7 for blocks no seal covers.
    #[arg(long, value_name = "PUB")]
    pub key: Vec<std::path::PathBuf>,
    /// With --key: check that the file still holds the seal of this hash (as verify --key
    /// printed it), and was only appended to since (exit 6 if not).
    #[arg(long, value_name = "HASH", requires = "key", value_parser = parse_hash)]
    pub extends: Option<[u8; 32]>,
    /// With --key: verify the records of this window only (the forms of `cat --since`): in a
    /// file whose index lists a time index, the blocks from the last seal before the window's
    /// blocks to the first seal after them are read, and checked against every seal the index
    /// lists (spec 9.10.1); an object in a store fetches those bytes alone.
    #[arg(long, value_name = "T", requires = "key", value_parser = super::when::parse_when,
          allow_hyphen_values = true)]
    pub since: Option<i64>,
    /// With --key: the end of the window (the forms of `cat --since`).
    #[arg(long, value_name = "T", requires = "key", value_parser = super::when::parse_when,
          allow_hyphen_values = true)]
    pub until: Option<i64>,
}

/// A seal's hash: 64 hexadecimal digits.
fn parse_hash(text: &str) -> Result<[u8; 32], String> {
    cobsfile::seal::parse_hash(text)
        .ok_or_else(|| format!("{text:?} is no seal hash (64 hexadecimal digits)"))
}

/// The public keys in the files `paths` (`--key`), each file's problem one line.
pub fn read_keys(paths: &[std::path::PathBuf]) -> Result<Vec<VerifyingKey>, Failure> {
    (paths.iter())
        .map(VerifyingKey::read)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Failure::new(e.to_string()))
}

/// What verifying a file's seals makes of a command (`verify --key`, `cat --authentic`): the
/// report's outcome, then blocks of content no seal covers (or no valid seal at all), then
/// tampering, or a seal hash kept (`--extends`) that the file no longer holds.
pub fn sealed_outcome(report: &Report, sealed: &Sealed, held: Option<bool>) -> Outcome {
    let mut outcome = Outcome::of(report);
    if sealed.has_unsealed_content() || sealed.chains.is_empty() {
        outcome = outcome.worst(Outcome::Unsealed);
    }
    if !sealed.tampered.is_empty() || held == Some(false) {
        outcome = outcome.worst(Outcome::Tampered);
    }
    outcome
}

/// `cobsfile verify`: each file in turn.
pub fn run(mut args: Args) -> Result<Outcome, Failure> {
    args.list.read.window = super::when::window(args.since, args.until)?;
    let keys = read_keys(&args.key)?;
    super::each_file(&args.list.files, None, |path| {
        let job = Verify {
            name: input::name(path),
            json: args.list.json,
        };
        match keys.is_empty() {
            true => job.run(path, &args.list.read),
            false => job.run_sealed(path, &args.list.read, &keys, args.extends.as_ref()),
        }
    })
}

/// The `verify` command's job.
pub struct Verify {
    pub name: String,
    pub json: bool,
}

impl Verify {
    /// Verifies the file at `path` (mapped, on the options' threads), an object in a store
    /// (read by byte ranges, on the options' threads) or stdin (streamed).
    pub fn run(self, path: &Path, options: &ReadOptions) -> Result<Outcome, Failure> {
        let builder = options.builder()?;
        if let Some(url) = input::object_url(path) {
            let object =
                cobsfile_store::RemoteObject::open(url).map_err(|e| Failure::new(e.to_string()))?;
            let report = object.remote().verify(&builder);
            return self.print(&report.map_err(|e| Failure::at(&self.name, e))?);
        }
        let report = match input::open(path)? {
            input::Input::Stream(stream) => cobsfile::verify(&mut builder.from_read(stream)),
            input::Input::Mapped(file) => builder.verify(file.bytes()),
        };
        self.print(&report.map_err(|e| Failure::at(&self.name, e))?)
    }

    /// Verifies the file at `path` and its seals with `keys` (spec 9.10): mapped, or stdin
    /// read whole.
    fn run_sealed(
        self,
        path: &Path,
        options: &ReadOptions,
        keys: &[VerifyingKey],
        extends: Option<&[u8; 32]>,
    ) -> Result<Outcome, Failure> {
        let builder = options.builder()?;
        let held = Held::open(path, &self.name, true)?;
        let (report, sealed) = held.verify_seals(&builder, keys, &self.name)?;
        not_a_cobsfile(&self.name, &report)?;
        let held = extends.map(|hash| (hash, sealed.extends(hash)));
        // A verification of part of the file reports on the bytes it read.
        let mut report = report;
        if let Some(span) = sealed.verified() {
            report.len = span.end - span.start;
        }
        let mut out = io::stdout().lock();
        let written = if self.json {
            let mut value = report_json(&self.name, &report);
            value["seals"] = seals_json(&sealed, held);
            writeln!(out, "{value}")
        } else {
            write_text(&mut out, &self.name, &report, "damaged")
                .and_then(|()| write_seals(&mut out, &self.name, &sealed, held))
        };
        super::quiet_broken_pipe(written)?;
        Ok(sealed_outcome(&report, &sealed, held.map(|(_, held)| held)))
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
        Ok(Outcome::of(report))
    }
}

impl ReadJob for Verify {
    type Output = Outcome;

    fn run<S: Source>(self, mut reader: Reader<S>, _: Option<u64>) -> Result<Outcome, Failure> {
        let reader = &mut reader;
        let report = cobsfile::verify(reader).map_err(|e| Failure::at(&self.name, e))?;
        self.print(&report)
    }
}

/// Fails for an input that is not a cobsfile (spec 9.5, as the library decides it).
pub fn not_a_cobsfile(name: &str, report: &Report) -> Result<(), Failure> {
    match report.not_a_cobsfile() {
        Some(verdict) => Err(no_intact_block(name, &verdict)),
        None => Ok(()),
    }
}

/// The ending of `report` as the summary says it.
fn report_ending(report: &Report) -> String {
    let ends_in_damage = report
        .damaged
        .last()
        .is_some_and(|d| d.range.end == report.len);
    ending_text(report.ending, Some(ends_in_damage))
}

/// Why the unreadable ranges of `report` could not be read, each reason once.
pub(crate) fn unreadable_reasons(report: &Report) -> Vec<String> {
    let mut reasons: Vec<String> = Vec::new();
    for d in unreadable(report) {
        let reason = match &d.cause {
            Cause::Dictionary { needed, .. } => {
                format!("needs zstd dictionary {needed:016x}, give it with --dict")
            }
            Cause::UnsupportedCodec { codec, .. } => {
                format!("codec {codec}, which this tool does not support")
            }
            Cause::Limit { what, limit, .. } => {
                format!("over this reader's limit of {limit} {what}")
            }
            other => other.to_string(),
        };
        if !reasons.contains(&reason) {
            reasons.push(reason);
        }
    }
    reasons
}

/// The damaged ranges of `report` (not the unreadable ones).
fn damaged(report: &Report) -> impl Iterator<Item = &Damage> {
    report.damaged.iter().filter(|d| d.is_damage())
}

/// The unreadable ranges of `report`.
fn unreadable(report: &Report) -> impl Iterator<Item = &Damage> {
    report.damaged.iter().filter(|d| !d.is_damage())
}

fn bytes_in<'a>(ranges: impl Iterator<Item = &'a Damage>) -> u64 {
    ranges.map(|d| d.range.end - d.range.start).sum()
}

/// One line per damaged or unreadable range (`verb` says what became of a damaged one), a
/// line for the unreadable ones together, then a summary line: clean or what is damaged, how
/// the file ends, what is intact.
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
    let reasons = unreadable_reasons(report);
    if !reasons.is_empty() {
        // The blocks in them, when the file's index says.
        let ranges = unreadable(report).count();
        let held: Option<u64> = unreadable(report)
            .map(|d| d.held.as_ref().map(|h| h.blocks))
            .sum();
        let what = match held {
            Some(blocks) => format!("{blocks} block(s) in {ranges} range(s)"),
            None => format!("{ranges} range(s)"),
        };
        writeln!(
            out,
            "{name}: unreadable: {what}, {} bytes: {}",
            bytes_in(unreadable(report)),
            reasons.join("; ")
        )?;
    }
    let b = &report.blocks;
    let mut kinds = format!(
        "{} header, {} metadata, {} data, {} dictionary, {} index, {} end, {} log",
        b.header, b.metadata, b.data, b.dictionary, b.index, b.end, b.log
    );
    // Named only in files that have them, so that other files' lines stay as they were.
    if b.time > 0 {
        kinds.push_str(&format!(", {} time", b.time));
    }
    if b.seal > 0 {
        kinds.push_str(&format!(", {} seal", b.seal));
    }
    for (id, n) in &b.unknown {
        kinds.push_str(&format!(", {n} of unknown type {id}"));
    }
    let state = if report.is_clean() {
        "clean, ".to_owned()
    } else if report.has_damage() {
        let bytes = bytes_in(damaged(report));
        format!(
            "{} {verb} range(s), {bytes} bytes ({:.3}%); ",
            damaged(report).count(),
            100.0 * bytes as f64 / report.len.max(1) as f64
        )
    } else {
        String::new()
    };
    writeln!(
        out,
        "{name}: {state}{}; intact: {} blocks ({kinds}), {} records, {} of {} bytes",
        report_ending(report),
        b.total(),
        report.records,
        report.intact_bytes(),
        report.len
    )
}

/// A damaged or unreadable range as a JSON object: the one shape every report of a range has
/// (see `cobsfile::Damage::status`), in `verify --json` and in `ls --json`'s rows alike.
pub fn damage_json(d: &Damage) -> Value {
    json!({
        "start": d.range.start,
        "end": d.range.end,
        "status": d.status(),
        "cause": d.cause.name(),
        "message": d.cause.to_string(),
        "held": d.held.as_ref().map(|h| json!({
            "blocks": h.blocks,
            "data_blocks": h.data_blocks,
            "metadata_blocks": h.metadata_blocks,
            "records": h.records,
        })),
    })
}

/// The report as a JSON object.
pub fn report_json(name: &str, report: &Report) -> Value {
    let b = &report.blocks;
    let unknown: Vec<Value> = b
        .unknown
        .iter()
        .map(|(id, n)| json!({ "type": id, "blocks": n }))
        .collect();
    let intact: Vec<Value> = report
        .intact_ranges()
        .iter()
        .map(|r| json!([r.start, r.end]))
        .collect();
    json!({
        "file": name,
        "size": report.len,
        "clean": report.is_clean(),
        "ending": report.ending.name(),
        "blocks": {
            "total": b.total(),
            "header": b.header,
            "metadata": b.metadata,
            "data": b.data,
            "dictionary": b.dictionary,
            "index": b.index,
            "end": b.end,
            "log": b.log,
            "time": b.time,
            "seal": b.seal,
            "unknown": unknown,
        },
        "records": report.records,
        "intact_bytes": report.intact_bytes(),
        "block_bytes": report.block_bytes,
        "damaged_bytes": bytes_in(damaged(report)),
        "unreadable_bytes": bytes_in(unreadable(report)),
        "intact": intact,
        "damaged": damaged(report).map(damage_json).collect::<Vec<_>>(),
        "unreadable": unreadable(report).map(damage_json).collect::<Vec<_>>(),
        "unreadable_reasons": unreadable_reasons(report),
    })
}

/// The time of a seal, as RFC 3339 in UTC.
fn seal_time(nanos: i64) -> String {
    chrono::DateTime::from_timestamp_nanos(nanos)
        .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
}

/// What verification of the seals found, after the report's lines: a line per tampering, one
/// for the unsealed blocks, one for what is authentic, and one for `--extends`.
fn write_seals(
    out: &mut impl Write,
    name: &str,
    sealed: &Sealed,
    held: Option<(&[u8; 32], bool)>,
) -> io::Result<()> {
    for t in &sealed.tampered {
        writeln!(
            out,
            "{name}: bytes {}..{} tampered ({}): {}",
            t.range.start,
            t.range.end,
            t.kind.name(),
            t.detail
        )?;
    }
    let (blocks, records) = sealed.count(Status::Unsealed);
    // An index finishing added, alone unsealed, is no news (spec 9.10).
    if sealed.has_unsealed_content() {
        let ranges: Vec<String> = (sealed.ranges(Status::Unsealed).iter())
            .map(|r| format!("{}..{}", r.start, r.end))
            .collect();
        writeln!(
            out,
            "{name}: unsealed: {blocks} block(s), {records} record(s), no seal covers them (bytes {})",
            ranges.join(", ")
        )?;
    }
    if let Some(span) = sealed.verified() {
        writeln!(
            out,
            "{name}: verified bytes {}..{} only: the window's blocks, between seals (spec 9.10.1)",
            span.start, span.end,
        )?;
    }
    let (blocks, records) = sealed.count(Status::Authentic);
    match &sealed.chains[..] {
        [] => writeln!(
            out,
            "{name}: no valid seal by the key(s) given: nothing is authentic"
        )?,
        chains => {
            let seals: u64 = chains.iter().map(|c| c.seals).sum();
            let last = chains.iter().max_by_key(|c| c.last_time).expect("a chain");
            let file = sealed.file_id.map_or(String::new(), |id| {
                format!(" of file {}", file_id_text(&id))
            });
            writeln!(
                out,
                "{name}: authentic: {blocks} block(s), {records} record(s), in {seals} seal(s){file} of {} chain(s) by key {}; last seal {} at {}",
                chains.len(),
                last.key_id,
                hash_text(&last.last_hash),
                seal_time(last.last_time)
            )?;
        }
    }
    if let Some((hash, held)) = held {
        match held {
            true => writeln!(out, "{name}: extends seal {}: held, only appended to since", hash_text(hash))?,
            false => writeln!(
                out,
                "{name}: tampered: does not hold seal {} unaltered (cut back, rewritten, or another file)",
                hash_text(hash)
            )?,
        }
    }
    Ok(())
}

/// What verification of the seals found, as JSON.
fn seals_json(sealed: &Sealed, held: Option<(&[u8; 32], bool)>) -> Value {
    let part = |status: Status| {
        let (blocks, records) = sealed.count(status);
        let ranges: Vec<Value> = (sealed.ranges(status).iter())
            .map(|r| json!({ "start": r.start, "end": r.end }))
            .collect();
        json!({ "blocks": blocks, "records": records, "ranges": ranges })
    };
    let tampered: Vec<Value> = (sealed.tampered.iter())
        .map(|t| {
            json!({
                "start": t.range.start,
                "end": t.range.end,
                "status": "tampered",
                "kind": t.kind.name(),
                "message": t.detail,
            })
        })
        .collect();
    let chains: Vec<Value> = (sealed.chains.iter())
        .map(|c| {
            json!({
                "chain": file_id_text(&c.chain),
                "key_id": c.key_id.to_string(),
                "seals": c.seals,
                "blocks": c.blocks,
                "last_seal": hash_text(&c.last_hash),
                "last_sequence": c.last_sequence,
                "last_time": seal_time(c.last_time),
            })
        })
        .collect();
    json!({
        "authentic": part(Status::Authentic),
        "unsealed": part(Status::Unsealed),
        "tampered": tampered,
        "chains": chains,
        "file_id": sealed.file_id.as_ref().map(file_id_text),
        "span": sealed.verified().map(|span| json!({ "start": span.start, "end": span.end })),
        "extends": held.map(|(hash, held)| json!({ "seal": hash_text(hash), "held": held })),
    })
}

/// The bytes of a file whose seals are verified: mapped, stdin read whole, or an object in a
/// store, read by byte ranges (each thread fetching its own) or fetched whole (into an unnamed
/// temporary file, mapped) for a reader that reads it twice, verifying, then reading what is
/// authentic.
pub enum Held {
    Mapped(cobsfile::MappedFile),
    Bytes(Vec<u8>),
    Remote(Box<cobsfile_store::RemoteObject>),
}

impl Held {
    /// The file at `path`; an object read `by_ranges` or fetched whole.
    pub fn open(path: &Path, name: &str, by_ranges: bool) -> Result<Held, Failure> {
        if let Some(url) = input::object_url(path) {
            if by_ranges {
                let object = cobsfile_store::RemoteObject::open(url)
                    .map_err(|e| Failure::new(e.to_string()))?;
                return Ok(Held::Remote(Box::new(object)));
            }
            let file =
                cobsfile_store::fetch_mapped(url).map_err(|e| Failure::new(e.to_string()))?;
            return Ok(Held::Mapped(file));
        }
        Ok(match input::open(path)? {
            input::Input::Stream(mut stream) => {
                let mut all = Vec::new();
                io::Read::read_to_end(&mut stream, &mut all)
                    .map_err(|e| Failure::new(format!("{name}: {e}")))?;
                Held::Bytes(all)
            }
            input::Input::Mapped(file) => Held::Mapped(file),
        })
    }

    /// `ReaderBuilder::verify_seals` of the file.
    pub fn verify_seals(
        &self,
        builder: &cobsfile::ReaderBuilder,
        keys: &[VerifyingKey],
        name: &str,
    ) -> Result<(Report, Sealed), Failure> {
        match self {
            Held::Mapped(file) => builder.verify_seals(file.bytes(), keys),
            Held::Bytes(bytes) => builder.verify_seals(bytes, keys),
            Held::Remote(object) => object.remote().verify_seals(builder, keys),
        }
        .map_err(|e| Failure::at(name, e))
    }

    /// `ReaderBuilder::read_authentic` of the file.
    pub fn read_authentic<T, F, K>(
        &self,
        builder: &cobsfile::ReaderBuilder,
        sealed: &Sealed,
        on_block: F,
        sink: &mut K,
        name: &str,
    ) -> Result<Report, Failure>
    where
        T: Default + Send,
        F: Fn(&mut T, &cobsfile::Block<'_>) + Sync,
        K: cobsfile::RangeSink<T> + ?Sized,
    {
        match self {
            Held::Mapped(file) => builder.read_authentic(file.bytes(), sealed, on_block, sink),
            Held::Bytes(bytes) => builder.read_authentic(bytes, sealed, on_block, sink),
            Held::Remote(object) => object
                .remote()
                .read_authentic(builder, sealed, on_block, sink),
        }
        .map_err(|e| Failure::at(name, e))
    }
}
