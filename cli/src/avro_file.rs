//! `cobsfile import` and `cobsfile export`: Avro object container files into typed records and
//! back, datums copied byte for byte (`cobsfile::avro::container`).

use std::io::Read;
use std::path::PathBuf;

use cobsfile::avro::container::{Codec, Container, ContainerLimits, ContainerWriter};
use cobsfile::avro::{self, AvroReaderBuilder, AvroWriter, WriterSchema};
use cobsfile::{Compression, WriterBuilder};

use super::input::{self, Input};
use super::output::Output;
use super::{args, Failure, Outcome, ReadOptions};

#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// The Avro object container file (`-` for stdin).
    #[arg(value_name = "FILE.avro")]
    input: PathBuf,
    /// The cobsfile to write, put in place only once complete.
    #[arg(short, long, value_name = "OUT.cobs")]
    output: PathBuf,
    /// Replace OUT if it exists.
    #[arg(short, long)]
    force: bool,
    /// Target bytes of records per data block (K, M, G suffixes), as `pack --block-target`.
    /// [default: 256K, or 2M with --zstd]
    #[arg(long, value_name = "BYTES", value_parser = args::bytes_in(1..=cobsfile::DEFAULT_MAX_BODY_SIZE as u64))]
    block_target: Option<usize>,
    /// Compress data blocks with zstd at LEVEL (as `pack --zstd`).
    #[arg(long, value_name = "LEVEL", allow_hyphen_values = true, value_parser = args::parse_zstd)]
    zstd: Option<Compression>,
    /// Store compressed records each after its length (codecs 1 and 2), for readers that
    /// predate records as lines (as `pack --no-lines`).
    #[arg(long, requires = "zstd")]
    no_lines: bool,
    /// The most bytes one Avro block may decompress to (K, M, G suffixes); a larger one is
    /// reported and skipped. [default: 64M]
    #[arg(long, value_name = "BYTES", value_parser = args::bytes_in(1..=u64::MAX))]
    max_avro_block: Option<usize>,
    /// The most bytes all the Avro file's blocks may decompress to, damaged ones included,
    /// each datum counting at least the 10 bytes of its record (K, M, G suffixes); past it
    /// the import stops and says so. [default: 64M plus 256 per byte of the file]
    #[arg(long, value_name = "BYTES", value_parser = args::bytes_in(1..=u64::MAX))]
    max_avro_total: Option<usize>,
    /// A datum past these limits is reported and left out, the block's others kept; raised,
    /// the records written need the same options to be read (`cat --json`, `export`).
    #[command(flatten)]
    datums: super::typed::DatumArgs,
}

/// `cobsfile import`: every block of the Avro file that passes its checks, its datums as they
/// are; a damaged block is reported with its byte range and skipped to the next sync marker.
pub fn import(args: ImportArgs) -> Result<Outcome, Failure> {
    let name = input::name(&args.input);
    let compression = args.zstd;
    let read;
    let mapped;
    let bytes: &[u8] = match input::open(&args.input)? {
        Input::Stream(mut stream) => {
            let mut buffer = Vec::new();
            stream
                .read_to_end(&mut buffer)
                .map_err(|e| Failure::at(&name, e))?;
            read = buffer;
            &read
        }
        Input::Mapped(file) => {
            mapped = file;
            mapped.bytes()
        }
    };
    let mut limits = ContainerLimits::default();
    if let Some(max) = args.max_avro_block {
        limits = limits.max_block(max);
    }
    if let Some(max) = args.max_avro_total {
        limits = limits.max_total(max as u64);
    }
    let datums = args.datums.limits();
    let limits = limits.datums(datums);
    let mut container = Container::new(bytes, limits).map_err(|e| Failure::at(&name, e))?;
    let header = container.header().clone();
    let output = Output::create(&args.output, args.force, &[&args.input])?;
    let out_name = output.name();
    let out_fail = |e: cobsfile::Error| Failure::at(&out_name, e);
    let mut builder = WriterBuilder::new().line_layout(!args.no_lines);
    if let Some(target) = args.block_target {
        builder = builder.block_target(target);
    }
    if let Some(compression) = compression {
        builder = builder.compression(compression);
    }
    let mut writer = builder.build(output.writer()?).map_err(out_fail)?;
    if !header.metadata.is_empty() {
        // The user's metadata, kept under its own keys.
        writer
            .write_metadata(
                header
                    .metadata
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_slice())),
            )
            .map_err(out_fail)?;
    }
    let typed_fail = |e: avro::Error| match e {
        avro::Error::File(e) => Failure::at(&out_name, e),
        e => Failure::at(&name, e),
    };
    let mut typed = AvroWriter::new(&mut writer, header.schema.clone()).map_err(typed_fail)?;
    typed.set_limits(datums);
    let (mut records, mut lost_ranges, mut lost_bytes) = (0u64, 0u64, 0u64);
    let mut over_limit = 0u64;
    while let Some(block) = container.next_block() {
        match block {
            Ok(block) => {
                for datum in block.datums() {
                    typed.write_datum(datum).map_err(typed_fail)?;
                    records += 1;
                }
                // A limit is not damage: the datum is left out, the block's others kept.
                for over in &block.over_limit {
                    let option = match over.what {
                        "values" => "--max-values",
                        _ => "--max-depth",
                    };
                    eprintln!(
                        "cobsfile: {name}: datum {} of the block at bytes {}..{} would decode \
                         to more than {} {}; left out ({option} raises the limit)",
                        over.index, block.range.start, block.range.end, over.limit, over.what
                    );
                    over_limit += 1;
                }
            }
            Err(damage) if damage.over_budget => {
                // A limit, not damage: the rest of the file is not read.
                eprintln!(
                    "cobsfile: {name}: at byte {}: {}; the rest is not imported \
                     (--max-avro-total raises the budget)",
                    damage.start, damage.cause
                );
                over_limit += 1;
            }
            Err(damage) => {
                eprintln!("cobsfile: {name}: {damage}");
                lost_ranges += 1;
                lost_bytes += damage.end - damage.start;
            }
        }
    }
    drop(typed);
    writer.finish().map_err(out_fail)?;
    output.persist()?;
    if lost_ranges == 0 {
        if over_limit > 0 {
            eprintln!(
                "cobsfile: {name}: imported {records} records; {over_limit} over the limits \
                 left out"
            );
            return Ok(Outcome::Unreadable);
        }
        return Ok(Outcome::Clean);
    }
    let also = match over_limit {
        0 => String::new(),
        n => format!("; {n} over the limits left out"),
    };
    eprintln!(
        "cobsfile: {name}: imported {records} records; {lost_ranges} damaged range(s), \
         {lost_bytes} bytes, skipped{also}"
    );
    Ok(Outcome::Damaged)
}

/// `--codec`: a codec by the name `avro.codec` gives it.
fn parse_codec(name: &str) -> Result<Codec, String> {
    Codec::from_name(name).ok_or_else(|| {
        format!("expected null, deflate, snappy, zstandard, bzip2 or xz, got {name:?}")
    })
}

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// With -o: one cobsfile of typed records (`-` for stdin). With --parquet or --json:
    /// cobsfiles and directories of them (files ending .cobs), read as one table.
    #[arg(value_name = "FILE", required = true)]
    inputs: Vec<PathBuf>,
    /// The Avro object container file to write, put in place only once complete.
    #[arg(short, long, value_name = "OUT.avro", required_unless_present_any = ["parquet", "json"],
          conflicts_with_all = ["parquet", "json"])]
    output: Option<PathBuf>,
    /// Write an Apache Parquet file (zstd) instead, through Apache DataFusion: one column per
    /// field of the records (see `--records`), rows in file order.
    #[arg(long, value_name = "OUT.parquet", conflicts_with = "json")]
    parquet: Option<PathBuf>,
    /// Write newline-delimited JSON instead (one object per row), through Apache DataFusion.
    #[arg(long, value_name = "OUT.ndjson")]
    json: Option<PathBuf>,
    /// Replace OUT if it exists.
    #[arg(short, long)]
    force: bool,
    /// How the Avro file's blocks are compressed: null, deflate, snappy, zstandard, bzip2 or
    /// xz.
    #[arg(long, value_name = "CODEC", default_value = "null", value_parser = parse_codec)]
    codec: Codec,
    /// Resolve every record to this schema (Avro's schema resolution), which the Avro file is
    /// then written with: needed when the cobsfile's records were written with more than one
    /// schema. Without it, datums are copied byte for byte.
    #[arg(long, value_name = "FILE.avsc")]
    reader_schema: Option<PathBuf>,
    #[command(flatten)]
    datums: super::typed::DatumArgs,
    #[command(flatten)]
    read: ReadOptions,
    #[cfg(feature = "sql")]
    #[command(flatten)]
    table: super::sql::TableArgs,
}

/// `cobsfile export`: the typed records of a cobsfile into an Avro object container file;
/// records that cannot be read are reported (exit 3 for damage, 4 for unreadable) and left
/// out, as `cat --json` leaves them out. With `--parquet` or `--json`, the rows of any
/// cobsfiles through DataFusion ([`super::sql::export`]).
pub fn export(args: ExportArgs) -> Result<Outcome, Failure> {
    #[cfg(feature = "sql")]
    use super::sql::{self, Export as To};
    #[cfg(not(feature = "sql"))]
    enum To {
        Parquet,
        Json,
    }
    let (to, out) = match (&args.output, &args.parquet, &args.json) {
        (Some(out), None, None) => (None, out),
        (None, Some(out), None) => (Some(To::Parquet), out),
        (None, None, Some(out)) => (Some(To::Json), out),
        _ => {
            return Err(Failure::usage(
                "give one of -o OUT.avro, --parquet OUT or --json OUT",
            ))
        }
    };
    if let Some(to) = to {
        if args.inputs.iter().any(|p| super::is_stdio(p)) {
            return Err(Failure::usage(
                "--parquet and --json read files, not stdin: give the cobsfiles' paths",
            ));
        }
        #[cfg(feature = "sql")]
        return sql::export(
            &args.inputs,
            to,
            out,
            args.force,
            &args.table,
            &args.datums.schemas,
        );
        #[cfg(not(feature = "sql"))]
        return Err(Failure::usage(format!(
            "--{} needs Apache DataFusion, left out of this build of cobsfile (cargo feature sql)",
            match to {
                To::Parquet => "parquet",
                To::Json => "json",
            }
        )));
    }
    let [input] = args.inputs.as_slice() else {
        return Err(Failure::usage(
            "-o OUT.avro exports one cobsfile; give one FILE (or use --parquet/--json for several)",
        ));
    };
    let name = input::name(input);
    let reader_schema = args
        .reader_schema
        .as_deref()
        .map(super::typed::load_schema)
        .transpose()?;
    let output = Output::create(out, args.force, &[input])?;
    let job = Export {
        name,
        output,
        codec: args.codec,
        reader_schema,
        typed: args.datums.reader(),
    };
    input::read(input, &args.read, job)
}

struct Export {
    name: String,
    output: Output,
    codec: Codec,
    reader_schema: Option<WriterSchema>,
    typed: AvroReaderBuilder,
}

impl input::ReadJob for Export {
    type Output = Outcome;

    fn run<S: cobsfile::Source>(
        self,
        reader: cobsfile::Reader<S>,
        _: Option<u64>,
    ) -> Result<Outcome, Failure> {
        let out_name = self.output.name();
        let out_fail = |e: avro::Error| Failure::at(&out_name, e);
        let mut builder = self.typed;
        if let Some(schema) = &self.reader_schema {
            builder = builder.reader_schema(schema.schema().clone());
        }
        let mut typed = builder.build(reader);
        let mut diagnostics = input::Diagnostics::new(self.name.clone());
        let mut container: Option<(ContainerWriter<_>, WriterSchema)> = None;
        let mut encoded = Vec::new();
        loop {
            // The datum to write, and the schema the Avro file is written with.
            let (datum, schema): (&[u8], WriterSchema) = match &self.reader_schema {
                Some(schema) => match typed.next_value() {
                    None => break,
                    Some(Ok(value)) => {
                        encoded = avro::apache_avro::to_avro_datum(schema.schema(), value)
                            .map_err(|e| Failure::at(&out_name, e))?;
                        (&encoded, schema.clone())
                    }
                    Some(Err(e)) => {
                        super::typed::report(&mut diagnostics, &typed, &self.name, e)?;
                        continue;
                    }
                },
                None => match typed.next_datum() {
                    None => break,
                    // Copied as it is, once its values are known to be valid (spec 15.3,
                    // check 5): an Avro file gets nothing `cat --json` would refuse.
                    Some(Ok(datum)) if datum.value().is_ok() => {
                        encoded.clear();
                        encoded.extend_from_slice(datum.datum());
                        (&encoded, datum.schema)
                    }
                    Some(Ok(datum)) => {
                        let e = datum.value().expect_err("the value was refused");
                        super::typed::report(&mut diagnostics, &typed, &self.name, e)?;
                        continue;
                    }
                    Some(Err(e)) => {
                        super::typed::report(&mut diagnostics, &typed, &self.name, e)?;
                        continue;
                    }
                },
            };
            let (writer, written_with) = match &mut container {
                Some(open) => open,
                None => {
                    let writer =
                        ContainerWriter::new(self.output.writer()?, &schema, self.codec, &[])
                            .map_err(out_fail)?;
                    container.insert((writer, schema.clone()))
                }
            };
            // Schemas of one fingerprint may differ in logical types: the whole schema.
            if *written_with != schema {
                return Err(Failure::at(
                    &self.name,
                    format!(
                        "holds records of more than one schema ({:016x}, then {:016x}); an \
                         Avro file has one: give --reader-schema to resolve them all to it",
                        written_with.fingerprint(),
                        schema.fingerprint()
                    ),
                ));
            }
            writer.write_datum(datum).map_err(out_fail)?;
        }
        let outcome = diagnostics.finish(typed.reader())?;
        let Some((writer, _)) = container else {
            return Err(Failure::at(
                &self.name,
                "holds no typed records to export (no record written by `pack --schema` or \
                 `import` was read)",
            ));
        };
        writer.finish().map_err(out_fail)?;
        self.output.persist()?;
        Ok(outcome)
    }
}
