//! Golden vectors in spec/vectors/, checked in both directions.
//!
//! Each `NAME.cobs` has a `NAME.txt` beside it. Lines starting with `%` are directives, `#`
//! comments; the other lines are what a reader yields, block by block:
//!
//! ```text
//! header VERSION
//! metadata "KEY" "VALUE" ...
//! data COUNT            followed by COUNT lines: record "BYTES", with ` at TIME` when a
//!                       time block describes the data block
//! time COUNT MIN SPAN   followed by COUNT lines: at TIME
//! time-index COUNT      followed by COUNT lines: at-entry POSITION MIN SPAN
//! dictionary ID "BYTES"
//! index COUNT SPAN      followed by COUNT lines: entry TYPE SIZE ITEMS
//! end
//! log
//! unknown TYPE "PAYLOAD"
//! damaged START END CAUSE
//! error unsupported-version VERSION
//! ending finished|open|unfinished|empty
//! ```
//!
//! Typed vectors (spec 15) also list what a typed reader yields, before the `ending` line:
//! `avro value VALUE`, `avro error NAME OFFSET INDEX` (a record), `avro schema-error NAME
//! OFFSET` (a metadata block), `avro damaged START END CAUSE`; they are checked with the
//! `avro` feature, in both directions (each value the typed writer encodes is its record;
//! with `% other-encodings`, records encoded as other Avro writers may, such as blocks of a
//! negative count, it decodes to the same value).
//!
//! The `ending` line, last, is how the file ends (spec 9.5.1), as `verify` reports it; every
//! vector has one but those a newer version stops.
//!
//! Strings are printable ASCII with `\xNN` for every other byte, `"` and `\`.
//! Directives: `% block-target N` (writer option), `% compression LEVEL` (zstd), `% lines`
//! (compressed data blocks hold their records as lines, spec 8.3; without it, as before),
//! `% dictionary "BYTES" embed|external` (the writer's dictionary), `% reader-dictionary
//! "BYTES"` (a dictionary given to the readers), `% from NAME OP...` (this vector is NAME with
//! edits: `flip OFFSET MASK`, `set OFFSET BYTE`, `truncate LEN`, `prepend "BYTES"`,
//! `zero START END`, `append NAME`, `append-from NAME OFFSET`: the bytes of vector NAME from
//! OFFSET on, `append-block TYPE "FIELDS" "STORED" "PLAIN"`: a block built by hand, whose body
//! is FIELDS, STORED and the CRC of its type field, FIELDS and PLAIN, `pad`: one sync byte,
//! the fence an appending writer puts in front of each block), `% header-version N` (the
//! header block declares version N).
//!
//! Writer direction: a vector without `% from` must be exactly what `Writer` produces from its
//! lines, ending with the end block `finish` writes, with an index block
//! (`WriterBuilder::index`) before it exactly when the lines have one; a derived vector must
//! be exactly its edits applied to the vector it names. The `ending-open` and
//! `ending-appended` vectors are what an `Appender` writes.
//! Reader direction: the slice, mapped and streaming readers must all yield exactly the lines,
//! and `verify` (on one thread and on several, and of a stream) must report the ending.
//! `COBSFILE_BLESS=1 cargo test --test vectors` rewrites the .cobs files from the .txt files.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use cobsfile::key::SealingKey;
use cobsfile::seal::{Sealer, Status};
use cobsfile::{
    Appender, AppenderBuilder, BlockType, Cause, Compression, Dictionary, Durability, Ending,
    Error, Index, Reader, ReaderBuilder, Source, WriterBuilder,
};

/// The key of a `% key SEED` directive: the Ed25519 key whose 32-byte seed is SEED repeated.
fn sealing_key(seed: &[u8]) -> SealingKey {
    SealingKey::from_seed([num(seed) as u8; 32])
}

#[path = "common/temp_file.rs"]
mod temp_file;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("spec/vectors")
}

fn esc(bytes: &[u8]) -> String {
    let mut out = String::from("\"");
    for &b in bytes {
        match b {
            b'"' | b'\\' => out.push_str(&format!("\\x{b:02x}")),
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push('"');
    out
}

/// Splits a line into words, where a quoted string is one word (returned unescaped).
fn words(line: &str) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b' ' => i += 1,
            b'"' => {
                let mut word = Vec::new();
                i += 1;
                while bytes[i] != b'"' {
                    if bytes[i] == b'\\' {
                        let hex = &line[i + 2..i + 4];
                        word.push(u8::from_str_radix(hex, 16).expect("hex escape"));
                        i += 4;
                    } else {
                        word.push(bytes[i]);
                        i += 1;
                    }
                }
                out.push(word);
                i += 1;
            }
            _ => {
                let end = line[i..].find(' ').map_or(line.len(), |n| i + n);
                out.push(bytes[i..end].to_vec());
                i = end;
            }
        }
    }
    out
}

fn text(word: &[u8]) -> &str {
    std::str::from_utf8(word).expect("UTF-8 word")
}

fn num(word: &[u8]) -> i64 {
    let word = text(word);
    match word.strip_prefix("0x") {
        Some(hex) => i64::from_str_radix(hex, 16).expect("hex number"),
        None => word.parse().expect("number"),
    }
}

/// The spec's name of a cause (section 9.8), written out here from the spec's table as an
/// oracle for `Cause::name`, which every use checks against it.
fn cause_name(cause: &Cause) -> &'static str {
    let name = spec_cause_name(cause);
    assert_eq!(cause.name(), name, "Cause::name disagrees with spec 9.8");
    name
}

fn spec_cause_name(cause: &Cause) -> &'static str {
    match cause {
        Cause::NoSync { .. } => "no-sync",
        Cause::ZeroRun { .. } => "zero-run",
        Cause::Varint { .. } => "varint",
        Cause::InvalidField { .. } => "invalid-field",
        Cause::TooLarge { .. } => "too-large",
        Cause::Truncated { .. } => "truncated",
        Cause::SyncMismatch { .. } => "sync-mismatch",
        Cause::Cobs { .. } => "cobs",
        Cause::BodyTooLarge { .. } => "body-too-large",
        Cause::Crc { .. } => "crc",
        Cause::UnsupportedCodec { .. } => "unsupported-codec",
        Cause::Dictionary { .. } => "dictionary",
        Cause::SizeMismatch { .. } => "size-mismatch",
        Cause::Decompress { .. } => "decompress",
        Cause::Malformed { .. } => "malformed",
        Cause::Limit { .. } => "limit",
        _ => "other",
    }
}

/// What a reader yields, as vector lines.
fn dump<S: Source>(reader: &mut Reader<S>) -> Vec<String> {
    let mut lines = Vec::new();
    while let Some(item) = reader.next_block() {
        let block = match item {
            Ok(block) => block,
            Err(Error::Damaged { start, end, cause }) => {
                lines.push(format!("damaged {start} {end} {}", cause_name(&cause)));
                continue;
            }
            Err(Error::UnsupportedVersion { version, .. }) => {
                lines.push(format!("error unsupported-version {version}"));
                continue;
            }
            Err(other) => panic!("unexpected error {other}"),
        };
        match block.info().block_type {
            BlockType::Header => lines.push(format!("header {}", block.version().unwrap())),
            BlockType::Metadata => {
                let mut line = String::from("metadata");
                for (key, value) in block.entries() {
                    line.push_str(&format!(" {} {}", esc(key.as_bytes()), esc(value)));
                }
                lines.push(line);
            }
            BlockType::Data => {
                lines.push(format!("data {}", block.info().items.unwrap()));
                let times = block.times();
                lines.extend(block.records().enumerate().map(|(i, r)| match times {
                    Some(times) => format!("record {} at {}", esc(r), times[i]),
                    None => format!("record {}", esc(r)),
                }));
            }
            BlockType::TimeIndex => {
                let mut entries = Vec::new();
                let payload = block.payload();
                let mut at = 0;
                let mut next = || {
                    let (v, used) = cobsfile::varint::read(&payload[at..]).unwrap();
                    at += used;
                    v
                };
                let count = next();
                let mut position = 0;
                for _ in 0..count {
                    position += next();
                    let (min, span) = (next(), next());
                    entries.push(format!("at-entry {position} {min} {span}"));
                }
                lines.push(format!("time-index {count}"));
                lines.extend(entries);
            }
            BlockType::Time => {
                let times = block.times().unwrap();
                let (min, max) = (times.iter().min().unwrap(), times.iter().max().unwrap());
                lines.push(format!("time {} {min} {}", times.len(), max - min));
                lines.extend(times.iter().map(|t| format!("at {t}")));
            }
            BlockType::Dictionary => {
                let id = cobsfile::dictionary_id(block.payload());
                lines.push(format!("dictionary {id:016x} {}", esc(block.payload())));
            }
            BlockType::Index => {
                let Some(index) = Index::from_block(&block) else {
                    // Its span reaches back before the file's start (blocks were taken out).
                    let payload = block.payload();
                    let (count, used) = cobsfile::varint::read(payload).unwrap();
                    let (span, _) = cobsfile::varint::read(&payload[used..]).unwrap();
                    lines.push(format!("index {count} {span} unusable"));
                    continue;
                };
                let span = index.offset() - index.start();
                lines.push(format!("index {} {span}", index.len()));
                lines.extend(
                    index.entries().iter().map(|e| {
                        format!("entry {} {} {}", e.block_type.type_id(), e.size, e.records)
                    }),
                );
            }
            BlockType::End => lines.push("end".into()),
            BlockType::Log => lines.push("log".into()),
            BlockType::Seal => {
                let seal = cobsfile::seal::Seal::from_bytes(block.payload()).expect("a seal");
                let hex =
                    |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
                lines.push(format!(
                    "seal {} {} {} {} {} {} {} {}",
                    seal.sequence,
                    seal.first,
                    seal.leaves.len(),
                    seal.carried.len(),
                    seal.time,
                    hex(&seal.file_id),
                    hex(&seal.chain),
                    seal.key_id
                ));
                for (word, list) in [("leaf", &seal.leaves), ("carried", &seal.carried)] {
                    lines.extend(
                        list.iter()
                            .map(|l| format!("{word} {} {}", hex(&l.hash), l.size)),
                    );
                }
            }
            BlockType::Unknown(id) => lines.push(format!("unknown {id} {}", esc(block.payload()))),
            other => panic!("a block_type this test does not know: {other:?}"),
        }
    }
    lines
}

struct Vector {
    name: String,
    directives: Vec<Vec<Vec<u8>>>,
    lines: Vec<String>,
    /// What a typed reader yields, from the `avro` lines.
    #[cfg_attr(not(feature = "avro"), allow(dead_code))]
    avro: Vec<String>,
    /// What verification with the vector's key says, from the `sealed` and `tampered` lines.
    sealed: Vec<String>,
    /// How the file ends, from the `ending` line.
    ending: Option<String>,
}

fn load(name: &str) -> Vector {
    let txt = fs::read_to_string(dir().join(format!("{name}.txt"))).expect("vector text");
    let mut directives = Vec::new();
    let mut lines = Vec::new();
    let mut avro = Vec::new();
    let mut sealed = Vec::new();
    let mut ending = None;
    for line in txt.lines() {
        if let Some(directive) = line.strip_prefix("% ") {
            directives.push(words(directive));
        } else if line.starts_with("avro ") {
            assert!(ending.is_none(), "{name}: the ending line is not last");
            avro.push(line.to_owned());
        } else if line.starts_with("sealed ") || line.starts_with("tampered ") {
            assert!(ending.is_none(), "{name}: the ending line is not last");
            sealed.push(line.to_owned());
        } else if let Some(kind) = line.strip_prefix("ending ") {
            assert!(ending.is_none(), "{name}: two ending lines");
            ending = Some(kind.to_owned());
        } else if !line.starts_with('#') && !line.trim().is_empty() {
            assert!(ending.is_none(), "{name}: the ending line is not last");
            lines.push(line.to_owned());
        }
    }
    Vector {
        name: name.to_owned(),
        directives,
        lines,
        avro,
        sealed,
        ending,
    }
}

fn directive<'a>(v: &'a Vector, name: &str) -> Option<&'a [Vec<u8>]> {
    v.directives
        .iter()
        .find(|d| d[0] == name.as_bytes())
        .map(|d| &d[1..])
}

/// The readers' options a vector's directives give: `% reader-dictionary "BYTES"` (a
/// dictionary given), `% reader-max-dictionaries N` (the limit on dictionaries kept, spec 10).
fn reader_options(v: &Vector) -> ReaderBuilder {
    let mut builder = ReaderBuilder::new();
    if let Some(d) = directive(v, "reader-dictionary") {
        builder = builder.dictionary(Dictionary::new(d[0].clone()));
    }
    if let Some(n) = directive(v, "reader-max-dictionaries") {
        let n = text(&n[0]).parse().expect("a count");
        builder = builder.limits(cobsfile::Limits::default().max_dictionaries(n));
    }
    builder
}

/// A header block declaring `version`, built by hand from the spec.
fn header_block(version: i64) -> Vec<u8> {
    let mut body = vec![0u8];
    body.extend_from_slice(b"COBSFILE");
    cobsfile::varint::write(version, &mut body);
    let mut crc = crc32fast::Hasher::new();
    crc.update(&[0x02]);
    crc.update(&body);
    body.extend_from_slice(&crc.finalize().to_le_bytes());
    let mut encoded = Vec::new();
    cobsfile::cobs::encode(&body, &mut encoded);
    encoded.push(0);
    let mut block = vec![0x00, 0x02];
    cobsfile::varint::write(encoded.len() as i64, &mut block);
    block.extend_from_slice(&encoded);
    block
}

/// The bytes a vector's text says it holds.
fn build(v: &Vector) -> Vec<u8> {
    if let Some(from) = directive(v, "from") {
        return derive(from);
    }
    if let Some(version) = directive(v, "header-version") {
        return header_block(num(&version[0]));
    }
    let block_target = directive(v, "block-target").map_or(1 << 20, |w| num(&w[0]) as usize);
    let index = v.lines.iter().any(|l| l.starts_with("index "));
    // Vectors written before records as lines keep their bytes: `% lines` asks for them.
    let lines = directive(v, "lines").is_some();
    let mut builder = WriterBuilder::new()
        .block_target(block_target)
        .index(index)
        .line_layout(lines);
    if let Some(level) = directive(v, "compression") {
        builder = builder.compression(Compression::zstd(num(&level[0]) as i32).unwrap());
    }
    if let Some(d) = directive(v, "dictionary") {
        builder = builder.dictionary(Dictionary::new(d[0].clone()), d[1] == b"embed");
    }
    if let Some(key) = directive(v, "key") {
        // Seals made again byte for byte: a chain of the key, file and chain ids of fixed
        // bytes, a fixed clock; sealed where the lines say, and by `finish`.
        let sealer = Sealer::new(sealing_key(&key[0]), [0x11; 16], [0x22; 16])
            .with_clock(|| 1_767_225_600_000_000_000);
        builder = builder.seal_with(sealer).seal_every(u64::MAX, None);
    }
    let mut writer = builder.build(Vec::new()).unwrap();
    let mut lines = v.lines.iter().map(|l| words(l)).peekable();
    assert_eq!(lines.next().map(|l| l[0].clone()), Some(b"header".to_vec()));
    while let Some(line) = lines.next() {
        match text(&line[0]) {
            // The file id a writer that seals writes first.
            "metadata" if line.get(1).is_some_and(|k| k == b"cobsfile.file_id") => {}
            "metadata" => {
                let entries = line[1..].chunks(2).map(|kv| (text(&kv[0]), &kv[1]));
                writer.write_metadata(entries).unwrap();
            }
            "data" => {
                for _ in 0..num(&line[1]) {
                    let record = lines.next().expect("record line");
                    assert_eq!(record[0], b"record");
                    match record.get(2..4) {
                        Some([at, time]) if at == b"at" => {
                            writer.write_record_at(&record[1], num(time)).unwrap()
                        }
                        _ => writer.write_record(&record[1]).unwrap(),
                    }
                }
                writer.flush().unwrap();
            }
            "unknown" => writer.write_raw_block(num(&line[1]), &line[2]).unwrap(),
            "seal" => {
                // Its leaves follow; the last seal, before the end block, `finish` writes.
                let n = (num(&line[3]) + num(&line[4])) as usize;
                lines.by_ref().take(n).for_each(drop);
                if lines.peek().is_none_or(|l| l[0] != b"end") {
                    writer.seal().unwrap();
                }
            }
            "dictionary" => {} // written by the writer when it embeds its dictionary
            // Written by the writer before the data block of records with times.
            "time" => lines.by_ref().take(num(&line[1]) as usize).for_each(drop),
            // Written by `finish`, before the index, from the time blocks written.
            "time-index" => lines.by_ref().take(num(&line[1]) as usize).for_each(drop),
            "index" => {
                // Written by `finish`; its entries are what the writer wrote before it.
                lines.by_ref().take(num(&line[1]) as usize).for_each(drop);
                assert!(
                    lines
                        .peek()
                        .is_some_and(|l| l[0] == b"end" || l[0] == b"seal"),
                    "{}: an index not followed by the end block (or the last seal)",
                    v.name
                );
            }
            "end" => assert!(lines.peek().is_none(), "{}: end block not last", v.name),
            other => panic!("{}: unknown line {other}", v.name),
        }
    }
    assert_eq!(
        v.lines.last().map(String::as_str),
        Some("end"),
        "{}: a writer's vector ends with the end block `finish` writes",
        v.name
    );
    writer.finish().unwrap()
}

/// Applies `% from NAME OP...` edits to the bytes of vector NAME.
fn derive(from: &[Vec<u8>]) -> Vec<u8> {
    let base = text(&from[0]);
    let mut bytes = fs::read(dir().join(format!("{base}.cobs"))).expect("base vector");
    let mut ops = from[1..].iter();
    while let Some(op) = ops.next() {
        let mut arg = || num(ops.next().expect("edit argument")) as usize;
        match text(op) {
            "flip" => {
                let (at, mask) = (arg(), arg());
                bytes[at] ^= mask as u8;
            }
            "set" => {
                let (at, value) = (arg(), arg());
                bytes[at] = value as u8;
            }
            "truncate" => {
                let len = arg();
                bytes.truncate(len);
            }
            "zero" => {
                let (start, end) = (arg(), arg());
                bytes[start..end].fill(0);
            }
            "append" => {
                let name = text(ops.next().expect("vector name"));
                bytes.extend(fs::read(dir().join(format!("{name}.cobs"))).expect("vector"));
            }
            "append-from" => {
                let name = text(ops.next().expect("vector name"));
                let from = num(ops.next().expect("offset")) as usize;
                let other = fs::read(dir().join(format!("{name}.cobs"))).expect("vector");
                bytes.extend_from_slice(&other[from..]);
            }
            "append-block" => {
                // A block built by hand after the last byte, which must be a sync byte: type,
                // length, COBS(fields, stored payload, CRC of type field, fields and plain
                // payload), 0x00.
                let block_type = arg() as i64;
                let mut field = || ops.next().expect("block field").clone();
                let (fields, stored, plain) = (field(), field(), field());
                assert_eq!(bytes.last(), Some(&0), "append-block after a sync byte");
                bytes.extend(raw_block(block_type, &fields, &stored, &plain));
            }
            "pad" => {
                assert_eq!(bytes.last(), Some(&0), "pad after a sync byte");
                bytes.push(0);
            }
            "cut" => {
                // Bytes START..END taken out: a block whole, from after its opening sync
                // byte to its closing one, leaves the framing sound.
                let (start, end) = (arg(), arg());
                bytes.drain(start..end);
            }
            "replace-block" => {
                // Bytes START..END (a block from its type field to its closing sync byte)
                // replaced by a block built by hand as for `append-block`.
                let (start, end) = (arg(), arg());
                let block_type = arg() as i64;
                let mut field = || ops.next().expect("block field").clone();
                let (fields, stored, plain) = (field(), field(), field());
                let block = raw_block(block_type, &fields, &stored, &plain);
                bytes.splice(start..end, block);
            }
            "finish" => {
                // Finished in place by this crate (spec 11.3).
                let file = temp_file::TempFile::with_contents(&bytes);
                let finish = cobsfile::finish_log(&file.0, &cobsfile::ReaderBuilder::new());
                assert!(
                    matches!(finish, Ok(cobsfile::Finish::Finished(_))),
                    "{finish:?}"
                );
                bytes = fs::read(&file.0).unwrap();
            }
            "prepend" => {
                let mut prefix = ops.next().expect("prefix").clone();
                prefix.extend_from_slice(&bytes);
                bytes = prefix;
            }
            other => panic!("unknown edit {other}"),
        }
    }
    bytes
}

/// A block from its type field to its closing sync byte, built from the format description
/// alone (sections 4, 6 and 7), so that a vector can hold what no writer writes.
fn raw_block(block_type: i64, fields: &[u8], stored: &[u8], plain: &[u8]) -> Vec<u8> {
    let mut type_field = Vec::new();
    cobsfile::varint::write(block_type, &mut type_field);
    let mut crc = crc32fast::Hasher::new();
    crc.update(&type_field);
    crc.update(fields);
    crc.update(plain);
    let mut body = fields.to_vec();
    body.extend_from_slice(stored);
    body.extend_from_slice(&crc.finalize().to_le_bytes());
    let mut encoded = Vec::new();
    cobsfile::cobs::encode(&body, &mut encoded);
    let mut out = type_field;
    cobsfile::varint::write(encoded.len() as i64 + 1, &mut out);
    out.extend(encoded);
    out.push(0);
    out
}

/// Vector names, base vectors first so derived ones can be blessed in one run.
fn names() -> Vec<String> {
    let mut names: Vec<(bool, String)> = fs::read_dir(dir())
        .expect("spec/vectors")
        .filter_map(|e| {
            let path = e.ok()?.path();
            (path.extension()? == "txt").then(|| path.file_stem().unwrap().to_string_lossy().into())
        })
        .map(|name: String| (directive(&load(&name), "from").is_some(), name))
        .collect();
    names.sort();
    names.into_iter().map(|(_, name)| name).collect()
}

#[test]
fn writer_produces_the_vectors() {
    let bless = std::env::var_os("COBSFILE_BLESS").is_some();
    let names = names();
    for name in &names {
        let v = load(name);
        let built = build(&v);
        let path = dir().join(format!("{name}.cobs"));
        if bless {
            fs::write(&path, &built).unwrap();
        }
        let stored = fs::read(&path).unwrap_or_else(|_| panic!("{name}.cobs missing"));
        assert_eq!(
            built, stored,
            "{name}: bytes differ from what its text describes"
        );
    }
    assert!(names.len() >= 14, "vectors missing: {names:?}");
}

/// A reader that hands out `n` bytes at a time, to exercise the streaming window.
struct Trickle<'a>(&'a [u8], usize);

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.0.len().min(buf.len()).min(self.1);
        buf[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        Ok(n)
    }
}

#[test]
fn readers_yield_the_vectors() {
    for name in names() {
        let v = load(&name);
        let path = dir().join(format!("{name}.cobs"));
        let bytes = fs::read(&path).unwrap();
        let builder = reader_options(&v);
        let ending = v.ending.as_deref();
        let mut slice = builder.from_slice(&bytes);
        assert_eq!(dump(&mut slice), v.lines, "{name}: slice reader");
        assert_eq!(
            slice.ending().map(|e| e.name()),
            ending,
            "{name}: slice reader"
        );
        let mapped = cobsfile::open(&path).unwrap();
        let mut reader = mapped.reader_with(&builder);
        assert_eq!(dump(&mut reader), v.lines, "{name}: mapped reader");
        assert_eq!(reader.ending().map(|e| e.name()), ending, "{name}: mapped");
        for chunk in [1, 7, 1 << 20] {
            let mut stream = builder.from_read(Trickle(&bytes, chunk));
            assert_eq!(
                dump(&mut stream),
                v.lines,
                "{name}: stream reader, {chunk}-byte reads"
            );
            assert_eq!(stream.ending().map(|e| e.name()), ending, "{name}: stream");
        }

        // `verify`, on one thread, on several over ranges a few bytes long, and of a stream.
        let verified = |report: Result<cobsfile::Report, Error>| {
            report.ok().map(|r| {
                let complete = matches!(r.ending, Ending::Finished | Ending::Open);
                assert_eq!(r.is_clean(), r.damaged.is_empty() && complete, "{name}");
                r.ending.name()
            })
        };
        assert_eq!(verified(builder.verify(&bytes)), ending, "{name}: verify");
        for threads in [2, 3] {
            let ranges = builder.clone().threads(threads).min_split(1);
            assert_eq!(
                verified(ranges.verify(&bytes)),
                ending,
                "{name}: verify on {threads} threads"
            );
        }
        let stream = cobsfile::verify(&mut builder.from_read(Trickle(&bytes, 7)));
        assert_eq!(verified(stream), ending, "{name}: verify of a stream");
        let stopped = v.lines.iter().any(|l| l.starts_with("error "));
        assert_eq!(
            ending.is_none(),
            stopped,
            "{name}: an ending line, unless stopped"
        );
    }
}

/// Verification with a vector's `% key` says what its `sealed` and `tampered` lines say:
/// `sealed AUTHENTIC-BLOCKS AUTHENTIC-RECORDS UNSEALED-BLOCKS`, then `tampered KIND START END`
/// for each finding (spec 9.10).
#[test]
fn sealed_vectors_verify_as_their_lines_say() {
    let mut checked = 0;
    for name in names() {
        let v = load(&name);
        let Some(seed) = key_of(&v) else {
            assert!(v.sealed.is_empty(), "{name}: sealed lines without a key");
            continue;
        };
        let bytes = fs::read(dir().join(format!("{name}.cobs"))).unwrap();
        for threads in [1, 2] {
            let options = ReaderBuilder::new().threads(threads).min_split(1);
            let key = sealing_key(&seed).verifying_key();
            let (_, sealed) = options.verify_seals(&bytes, &[key]).unwrap();
            let (blocks, records) = sealed.count(Status::Authentic);
            let mut got = vec![format!(
                "sealed {blocks} {records} {}",
                sealed.count(Status::Unsealed).0
            )];
            got.extend(sealed.tampered.iter().map(|t| {
                format!(
                    "tampered {} {} {}",
                    t.kind.name(),
                    t.range.start,
                    t.range.end
                )
            }));
            assert_eq!(got, v.sealed, "{name}: on {threads} thread(s)");
        }
        checked += 1;
    }
    assert!(checked >= 4, "sealed vectors missing");
}

/// The key seed of a vector: its own `% key`, or that of the vector it derives from.
fn key_of(v: &Vector) -> Option<Vec<u8>> {
    if let Some(key) = directive(v, "key") {
        return Some(key[0].clone());
    }
    let from = directive(v, "from")?;
    key_of(&load(text(&from[0])))
}

/// An appender writes what `ending-open` and `ending-appended` show: a log it starts begins
/// with the header and a log block; appending to a finished file puts a log block first; each
/// block it appends has a sync byte of its own in front (spec 11.1).
#[test]
fn an_appender_writes_the_log_vectors() {
    let file = temp_file::TempFile::with_contents(&[]);
    let mut log = AppenderBuilder::new()
        .durability(Durability::Flush)
        .open(&file.0)
        .unwrap();
    assert!(log.opened().created && log.opened().log_block);
    log.append(b"hello").unwrap();
    log.close().unwrap();
    let open = fs::read(dir().join("ending-open.cobs")).unwrap();
    assert_eq!(fs::read(&file.0).unwrap(), open, "a new log");

    fs::write(&file.0, fs::read(dir().join("one-record.cobs")).unwrap()).unwrap();
    let mut log = AppenderBuilder::new()
        .durability(Durability::Flush)
        .open(&file.0)
        .unwrap();
    assert!(!log.opened().created && log.opened().log_block);
    log.append(b"after").unwrap();
    log.close().unwrap();
    let appended = fs::read(dir().join("ending-appended.cobs")).unwrap();
    assert_eq!(
        fs::read(&file.0).unwrap(),
        appended,
        "a finished file appended to"
    );

    // An open log stays as it is when reopened: no second log block.
    let log = Appender::open(&file.0).unwrap();
    assert!(!log.opened().log_block);
    log.close().unwrap();
    assert_eq!(fs::read(&file.0).unwrap(), appended, "reopened");
}

#[test]
fn every_file_starts_with_the_same_bytes() {
    let no_records = fs::read(dir().join("no-records.cobs")).unwrap();
    let (start, end) = no_records.split_at(19);
    assert_eq!(
        start,
        header_block(1),
        "the header block is as the spec spells it out"
    );
    let spec_bytes = [
        0x00, 0x02, 0x20, 0x01, 0x0e, b'C', b'O', b'B', b'S', b'F', b'I', b'L', b'E', 0x02, 0x31,
        0xed, 0xe8, 0x56, 0x00,
    ];
    assert_eq!(start, spec_bytes, "spec/FORMAT.md section 5");
    // The end and log blocks as sections 8.6 and 8.7 spell them out, after the sync byte
    // that opens them.
    let end_block = [0x0c, 0x0e, 0x01, 0x05, 0xf3, 0x5d, 0x6c, 0xed, 0x00];
    assert_eq!(end, end_block, "spec/FORMAT.md section 8.6");
    assert_eq!(
        end_block[4..8],
        crc32fast::hash(&[0x0c, 0x00]).to_le_bytes()
    );
    assert_eq!(raw_block(6, b"\x00", b"", b""), end_block);
    let log_block = [0x0e, 0x0e, 0x01, 0x05, 0x71, 0x3f, 0x5a, 0xdf, 0x00];
    assert_eq!(
        log_block[4..8],
        crc32fast::hash(&[0x0e, 0x00]).to_le_bytes()
    );
    assert_eq!(raw_block(7, b"\x00", b"", b""), log_block);
    let open = fs::read(dir().join("ending-open.cobs")).unwrap();
    assert_eq!(open[19..28], log_block, "spec/FORMAT.md section 8.7");
    let empty = start.to_vec();
    assert_eq!(
        crc32fast::hash(b"123456789"),
        0xCBF4_3926,
        "the CRC of section 7"
    );
    for name in names() {
        let v = load(&name);
        if directive(&v, "from").is_none() && directive(&v, "header-version").is_none() {
            let bytes = fs::read(dir().join(format!("{name}.cobs"))).unwrap();
            assert!(bytes.starts_with(&empty), "{name}");
        }
    }
}

/// Every vector recovers (spec 9.5) to a clean file holding what a full read of the vector
/// returns, which recovers to itself; and the reports of verify and recover agree.
#[test]
fn vectors_recover_to_what_readers_yield() {
    for name in names() {
        let v = load(&name);
        let bytes = fs::read(dir().join(format!("{name}.cobs"))).unwrap();
        let builder = reader_options(&v);
        let report = match builder.verify(&bytes) {
            Ok(report) => report,
            // A newer version: recovery stops there too, keeping what came before it.
            Err(e) => {
                let cobsfile::Error::UnsupportedVersion {
                    offset, version, ..
                } = e
                else {
                    panic!("{name}: {e}");
                };
                let mut out = Vec::new();
                let recovery = cobsfile::recover(&bytes, &builder, &mut out).unwrap();
                let newer = recovery.newer_version.expect("stopped");
                assert_eq!((newer.offset, newer.version), (offset, version), "{name}");
                assert!(builder.verify(&out).unwrap().is_clean(), "{name}");
                continue;
            }
        };
        let mut out = Vec::new();
        let recovery = cobsfile::recover(&bytes, &builder, &mut out).unwrap();
        assert_eq!(
            recovery.report, report,
            "{name}: recover reports what verify does"
        );
        let (expected, _) = builder.from_slice(&bytes).read_all();
        let (records, errors) = builder.from_slice(&out).read_all();
        assert!(
            errors.is_empty(),
            "{name}: recovered file damaged: {errors:?}"
        );
        assert_eq!(records, expected, "{name}: records");
        let mut again = Vec::new();
        let second = cobsfile::recover(&out, &builder, &mut again).unwrap();
        assert!(second.is_lossless(), "{name}");
        assert_eq!(again, out, "{name}: recovering a recovered file changes it");
    }
}

#[cfg(feature = "avro")]
#[path = "common/avro_lines.rs"]
mod avro_lines;

/// Typed readers yield the `avro` lines (over a slice, a stream and on threads), and the
/// typed writer writes the records of the vectors it could have written: each value a
/// typed reader returns encodes to its record, and each usable schema block is what
/// `WriterSchema::metadata` gives.
#[cfg(feature = "avro")]
#[test]
fn typed_readers_yield_the_avro_vectors() {
    use cobsfile::avro::{AvroReader, AvroWriter, WriterSchema};

    let mut typed = 0;
    for name in names() {
        let v = load(&name);
        if v.avro.is_empty() {
            continue;
        }
        typed += 1;
        let bytes = fs::read(dir().join(format!("{name}.cobs"))).unwrap();
        let mut slice = AvroReader::new(ReaderBuilder::new().from_slice(&bytes));
        assert_eq!(avro_lines::typed_lines(&mut slice), v.avro, "{name}: slice");
        let shared: std::sync::Arc<[u8]> = bytes.clone().into();
        let mut threads = AvroReader::new(
            ReaderBuilder::new()
                .threads(2)
                .min_split(64)
                .from_shared(&shared),
        );
        assert_eq!(
            avro_lines::typed_lines(&mut threads),
            v.avro,
            "{name}: threads"
        );
        let mut stream = AvroReader::new(ReaderBuilder::new().from_read(Trickle(&bytes, 7)));
        assert_eq!(
            avro_lines::typed_lines(&mut stream),
            v.avro,
            "{name}: stream"
        );
        if directive(&v, "from").is_some() {
            continue;
        }
        let mut reader = AvroReader::new(ReaderBuilder::new().from_slice(&bytes));
        while let Some(item) = reader.next_datum() {
            let Ok(datum) = item else { continue };
            let Ok(value) =
                apache_avro::from_avro_datum(datum.schema.schema(), &mut datum.datum(), None)
            else {
                continue;
            };
            let sink = WriterBuilder::new().build(Vec::new()).unwrap();
            let mut writer = AvroWriter::new(sink, datum.schema.clone()).unwrap();
            let encoded = writer.encode_value(&value).unwrap();
            if directive(&v, "other-encodings").is_some() {
                let again =
                    apache_avro::from_avro_datum(datum.schema.schema(), &mut &encoded[10..], None);
                assert_eq!(again.unwrap(), value, "{name}");
            } else {
                assert_eq!(encoded, datum.record, "{name}");
            }
        }
        let mut reader = ReaderBuilder::new().from_slice(&bytes);
        for metadata in reader.metadata().map(Result::unwrap) {
            let entries = metadata.entries.iter().map(|(k, v)| (k.as_str(), &v[..]));
            if let Some(Ok(schema)) = WriterSchema::from_metadata(entries, metadata.offset) {
                let expected: Vec<(String, Vec<u8>)> = schema
                    .metadata()
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v))
                    .collect();
                assert_eq!(metadata.entries, expected, "{name}");
            }
        }
    }
    assert_eq!(typed, 9, "the Avro vectors");
}
