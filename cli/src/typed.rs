//! Typed records (spec 15) on the command line: the schema files `pack --schema` and
//! `cat --reader-schema` take, JSON lines into typed records, typed records out as JSON lines.

use std::io::{self, BufWriter, Write};
use std::path::Path;

use cobsfile::avro::{self, AvroReaderBuilder, WriterSchema};
use cobsfile::{Reader, Source};

use super::input::{self, ReadJob};
use super::{quiet_broken_pipe, Failure, Outcome};

/// The schema in the file `path` (`.avsc`: one schema's JSON).
pub fn load_schema(path: &Path) -> Result<WriterSchema, Failure> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| Failure::at(&name, e))?;
    WriterSchema::parse(&text).map_err(|e| Failure::at(&name, e))
}

/// JSON lines into values of a schema, for `pack --schema`.
pub struct JsonLines {
    schema: WriterSchema,
    /// Skip lines that are not values of the schema (reporting each) rather than stop.
    skip: bool,
    /// The input, for messages.
    input: String,
    /// Lines read so far.
    line: u64,
    /// Lines skipped so far.
    pub skipped: u64,
}

impl JsonLines {
    pub fn new(schema: WriterSchema, skip: bool, input: String) -> Self {
        JsonLines {
            schema,
            skip,
            input,
            line: 0,
            skipped: 0,
        }
    }

    pub fn schema(&self) -> &WriterSchema {
        &self.schema
    }

    /// The value the next line holds; `None` for a line skipped (reported on stderr). A line
    /// that is not a value of the schema fails, naming its number and where in the value,
    /// unless lines are skipped.
    pub fn value(
        &mut self,
        line: &[u8],
    ) -> Result<Option<avro::apache_avro::types::Value>, String> {
        self.line += 1;
        let parsed = std::str::from_utf8(line)
            .map_err(|e| format!("not UTF-8: {e}"))
            .and_then(|text| {
                avro::json::from_json_str(text, &self.schema).map_err(|e| e.to_string())
            });
        match parsed {
            Ok(value) => Ok(Some(value)),
            Err(e) => {
                let message = format!("line {}: {e}", self.line);
                if !self.skip {
                    return Err(message);
                }
                eprintln!("cobsfile: {}: {message}; skipped", self.input);
                self.skipped += 1;
                Ok(None)
            }
        }
    }
}

/// The limits on what one typed record may decode to (spec 15.4), for the commands that
/// read typed records: a record past them is reported and left out, not damage.
#[derive(clap::Args, Debug, Clone, Copy, Default)]
pub struct DatumArgs {
    /// Typed records: the deepest nesting a record may have (records, arrays, maps and
    /// unions each add a level); a deeper one is reported and left out. [default: 128]
    #[arg(long, value_name = "LEVELS", value_parser = clap::value_parser!(u64).range(1..=1024))]
    max_depth: Option<u64>,
    /// Typed records: the most values a record may decode to (each number, string, null,
    /// array item... counts one; each costs about 56 bytes of memory decoded); one that
    /// decodes to more is reported and left out. [default: 65536 plus 16 per byte of the
    /// record, at most 4194304]
    #[arg(long, value_name = "VALUES")]
    max_values: Option<u64>,
    #[command(flatten)]
    pub schemas: SchemaArgs,
}

/// The limits on the schemas a typed reader holds from one file (spec 15.4).
#[derive(clap::Args, Debug, Clone, Copy, Default)]
pub struct SchemaArgs {
    /// Typed records: the most Avro schemas held from one file; past it a schema block is
    /// reported and its records are left out as of an unknown schema (exit 4). [default:
    /// 4096]
    #[arg(long, value_name = "SCHEMAS")]
    pub max_schemas: Option<usize>,
    /// Typed records: the most bytes of Avro schema text held from one file, together (a
    /// parsed schema takes ten to thirty times its text in memory). [default: 16M]
    #[arg(long, value_name = "BYTES", value_parser = crate::args::bytes_in(0..=u64::MAX))]
    pub max_schema_bytes: Option<usize>,
}

impl SchemaArgs {
    /// The limits asked for, the library's defaults for the others.
    pub fn limits(&self) -> avro::SchemaLimits {
        let mut limits = avro::SchemaLimits::default();
        if let Some(max) = self.max_schemas {
            limits = limits.max_schemas(max);
        }
        if let Some(max) = self.max_schema_bytes {
            limits = limits.max_bytes(max as u64);
        }
        limits
    }
}

impl DatumArgs {
    /// The limits asked for, the library's defaults for the others.
    pub fn limits(&self) -> avro::DatumLimits {
        let mut limits = avro::DatumLimits::default();
        if let Some(depth) = self.max_depth {
            limits = limits.max_depth(depth as usize);
        }
        if let Some(values) = self.max_values {
            limits = limits
                .values_base(values)
                .values_per_byte(0)
                .max_values(values);
        }
        limits
    }

    /// A typed reader's options with the limits asked for.
    pub fn reader(&self) -> AvroReaderBuilder {
        AvroReaderBuilder::new()
            .limits(self.limits())
            .schema_limits(self.schemas.limits())
    }
}

/// `cat --json`: each typed record as one line of JSON (Avro's JSON encoding), decoded with
/// its own schema or resolved to a reader schema.
pub struct JsonCat {
    pub name: String,
    pub reader_schema: Option<WriterSchema>,
    /// Records to pass over first, and the most to write after them.
    pub skip: u64,
    pub limit: Option<u64>,
    /// The typed reader's options (its limits).
    pub typed: AvroReaderBuilder,
    /// Where to say, at the end, the records still to pass over and still to write: a log
    /// directory's next segment goes on from there.
    pub left: Option<std::rc::Rc<std::cell::Cell<(u64, u64)>>>,
}

impl ReadJob for JsonCat {
    type Output = Outcome;

    fn run<S: Source>(self, reader: Reader<S>, _: Option<u64>) -> Result<Outcome, Failure> {
        let mut builder = self.typed;
        if let Some(schema) = &self.reader_schema {
            builder = builder.reader_schema(schema.schema().clone());
        }
        let mut typed = builder.build(reader);
        let mut out = BufWriter::with_capacity(1 << 18, io::stdout().lock());
        let mut diagnostics = input::Diagnostics::new(self.name.clone());
        let (mut skip, mut left) = (self.skip, self.limit.unwrap_or(u64::MAX));
        // Without a reader schema, each record's JSON is written in the walk that checks it,
        // straight from its bytes; with one, from its value resolved to the reader schema.
        let mut json = avro::json::JsonWriter::new();
        let mut line = Vec::new();
        while left > 0 {
            // Records passed over are checked (only readable ones count) but not encoded.
            let found = match (&self.reader_schema, skip) {
                (None, 0) => typed
                    .next_datum_with(&mut json)
                    .map(|found| found.map(drop)),
                (_, 1..) => typed.next_datum().map(|found| found.map(drop)),
                (Some(schema), 0) => typed.next_value().map(|found| {
                    let json = found.and_then(|value| avro::json::to_json(&value, schema))?;
                    line.clear();
                    // Writing a JSON value into a `Vec` cannot fail.
                    let _ = serde_json::to_writer(&mut line, &json);
                    Ok(())
                }),
            };
            match found {
                None => break,
                Some(Err(e)) => {
                    report(&mut diagnostics, &typed, &self.name, e)?;
                    continue;
                }
                Some(Ok(())) if skip > 0 => {
                    skip -= 1;
                    continue;
                }
                Some(Ok(())) => {}
            }
            left -= 1;
            let text = match self.reader_schema {
                None => json.text(),
                Some(_) => &line,
            };
            if !quiet_broken_pipe(out.write_all(text).and_then(|()| out.write_all(b"\n")))? {
                break;
            }
        }
        quiet_broken_pipe(out.flush())?;
        if let Some(counts) = &self.left {
            counts.set((skip, left));
        }
        diagnostics.finish(typed.reader())
    }
}

/// Reports a record or block of `typed` that cannot be used: damage to the file as every
/// command reports it; a record or schema problem on one line, the command ending no better
/// than damaged (a writer wrote it) or unreadable (a schema unknown, over the limits, not
/// resolvable). Records of bytes, not typed records, stop the command with one line.
pub fn report<S: Source>(
    diagnostics: &mut input::Diagnostics,
    typed: &avro::AvroReader<S>,
    name: &str,
    e: avro::Error,
) -> Result<(), Failure> {
    let e = match e {
        avro::Error::File(e) => return diagnostics.error(typed.reader(), e),
        e => e,
    };
    let damage = match &e {
        avro::Error::Record {
            problem: avro::RecordProblem::NoMarker { .. },
            ..
        } if typed.schemas().is_empty() => {
            return Err(Failure::at(
                name,
                "holds records that are not typed (no avro.schema block before them, and \
                 they are not single-object encoded); `cobsfile cat` without --json writes \
                 them as they are",
            ));
        }
        avro::Error::Record { problem, .. } => problem.is_damage(),
        avro::Error::Schema { problem, .. } => problem.is_damage(),
        _ => false,
    };
    let hint = match &e {
        avro::Error::Record {
            problem: avro::RecordProblem::Limit { what, .. },
            ..
        } => match *what {
            "values" => " (--max-values raises the limit)",
            _ => " (--max-depth raises the limit)",
        },
        avro::Error::Schema {
            problem: avro::SchemaProblem::Limit { what, .. },
            ..
        } => match *what {
            "schemas" => " (--max-schemas raises the limit)",
            _ => " (--max-schema-bytes raises the limit)",
        },
        _ => "",
    };
    eprintln!("cobsfile: {name}: {e}{hint}");
    diagnostics.note(if damage {
        Outcome::Damaged
    } else {
        Outcome::Unreadable
    });
    Ok(())
}
