//! The peer for BENCHMARKS.md's command-line comparison of typed records: what `cobsfile pack
//! --schema` and `cobsfile cat --json` do, done with `apache-avro` alone on an Avro object
//! container file, through its usual APIs.
//!
//! ```sh
//! cargo run --release --example avro_peer -- write SCHEMA.avsc IN.jsonl OUT.avro [null|deflate|zstandard]
//! cargo run --release --example avro_peer -- read IN.avro > OUT.jsonl
//! ```

use std::io::{BufRead, BufWriter, Write};

use apache_avro::{Codec, Reader, Schema, Writer};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["write", schema, input, output, ref codec @ ..] => {
            let schema = Schema::parse_str(&std::fs::read_to_string(schema)?)?;
            let codec = match codec.first().copied().unwrap_or("null") {
                "null" => Codec::Null,
                "deflate" => Codec::Deflate(Default::default()),
                "zstandard" => Codec::Zstandard(Default::default()),
                other => return Err(format!("codec {other}?").into()),
            };
            let out = BufWriter::new(std::fs::File::create(output)?);
            let mut writer = Writer::with_codec(&schema, out, codec);
            let input = std::io::BufReader::new(std::fs::File::open(input)?);
            for line in input.lines() {
                // JSON to a value, resolved to the schema (a string for an enum symbol).
                let json: serde_json::Value = serde_json::from_str(&line?)?;
                let value = apache_avro::types::Value::from(json).resolve(&schema)?;
                writer.append(value)?;
            }
            writer.into_inner()?.flush()?;
        }
        ["read", input] => {
            let input = std::io::BufReader::new(std::fs::File::open(input)?);
            let mut out = BufWriter::new(std::io::stdout().lock());
            for value in Reader::new(input)? {
                let json = serde_json::Value::try_from(value?)?;
                writeln!(out, "{json}")?;
            }
            out.flush()?;
        }
        _ => {
            return Err(
                "usage: avro_peer write SCHEMA IN.jsonl OUT.avro [codec] | read IN.avro".into(),
            )
        }
    }
    Ok(())
}
