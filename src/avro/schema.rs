//! Writer schemas: parsed, fingerprinted, announced in metadata blocks, and collected by
//! fingerprint from the metadata blocks a reader meets.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, OnceLock};

use apache_avro::headers::HeaderBuilder;
use apache_avro::schema::ResolvedSchema;
use apache_avro::Schema;

use super::canonical;
use super::check::{self, Names};
use super::error::{Error, Result, SchemaProblem};
use super::{FINGERPRINT_KEY, SCHEMA_KEY};
use crate::Block;

/// A writer schema: the schema, the JSON text a file stores it as, and its fingerprint.
///
/// Cheap to clone (shared).
#[derive(Clone)]
pub struct WriterSchema(Arc<Inner>);

struct Inner {
    schema: Schema,
    json: String,
    fingerprint: u64,
    /// The decoding form: two schemas of one fingerprint decode alike if and only if theirs
    /// are the same.
    decoding: String,
    /// Built when first used: a reader holds every schema a file announces, most of which
    /// (in a scan for the file's schemas, or a file of many versions) decode nothing, and
    /// this copies the schema's named types again.
    names: OnceLock<Names>,
    /// Its form as a flat record, if it is one: built when first used, as `names` is.
    flat: OnceLock<Option<check::Flat>>,
}

impl std::fmt::Debug for WriterSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriterSchema")
            .field("fingerprint", &format_args!("{:016x}", self.0.fingerprint))
            .field("json", &self.0.json)
            .finish()
    }
}

impl PartialEq for WriterSchema {
    /// The same fingerprint and the same JSON text.
    fn eq(&self, other: &Self) -> bool {
        self.0.fingerprint == other.0.fingerprint && self.0.json == other.0.json
    }
}

impl WriterSchema {
    /// Parses a schema from its JSON text, which a file stores as given (under `avro.schema`):
    /// documentation, aliases, defaults and other attributes are kept for whoever reads it.
    pub fn parse(json: &str) -> Result<Self> {
        let value: serde_json::Value = serde_json::from_str(json)
            .map_err(|e| Error::InvalidSchema(format!("not JSON: {e}")))?;
        precheck(&value).map_err(Error::InvalidSchema)?;
        let schema = guarded(|| Schema::parse(&value))
            .and_then(|parsed| parsed.map_err(|e| e.to_string()))
            .map_err(Error::InvalidSchema)?;
        Self::with_json(schema, json.to_owned(), &value).map_err(Error::InvalidSchema)
    }

    /// A schema built in code (or derived with `apache-avro`'s `AvroSchema`), stored as the
    /// JSON `apache-avro` writes for it (with its documentation, aliases and defaults).
    ///
    /// `apache-avro` writes some schemas differently from how they were given (0.21 names a
    /// `duration` fixed type `duration`), which changes their fingerprint: to store a
    /// schema's JSON as written, [`parse`](Self::parse) it.
    pub fn new(schema: Schema) -> Result<Self> {
        let value = guarded(|| serde_json::to_value(&schema))
            .and_then(|json| json.map_err(|e| e.to_string()))
            .map_err(Error::InvalidSchema)?;
        Self::with_json(schema, value.to_string(), &value).map_err(Error::InvalidSchema)
    }

    fn with_json(
        schema: Schema,
        json: String,
        value: &serde_json::Value,
    ) -> std::result::Result<Self, String> {
        let fingerprint = canonical::fingerprint64(canonical::canonical_form(value)?.as_bytes());
        let decoding = canonical::decoding_form(value)?;
        // What building the decoder would refuse (a name defined twice, a reference to no
        // type), found now without keeping the copies it makes.
        guarded(|| ResolvedSchema::try_from(&schema).map(drop))?.map_err(|e| e.to_string())?;
        Ok(WriterSchema(Arc::new(Inner {
            schema,
            json,
            fingerprint,
            decoding,
            names: OnceLock::new(),
            flat: OnceLock::new(),
        })))
    }

    /// Whether `other` decodes every datum to the same values: the same Parsing Canonical
    /// Form and the same logical types (spec 15.3's decoding form). Documentation, aliases,
    /// defaults and other attributes may differ.
    pub fn decodes_like(&self, other: &WriterSchema) -> bool {
        self.0.decoding == other.0.decoding
    }

    /// The schema.
    pub fn schema(&self) -> &Schema {
        &self.0.schema
    }

    /// The JSON text stored under `avro.schema`.
    pub fn json(&self) -> &str {
        &self.0.json
    }

    /// The CRC-64-AVRO ("Rabin") fingerprint of the schema's Parsing Canonical Form, as its 8
    /// bytes read little-endian: what every record written with it carries (spec 15.1).
    pub fn fingerprint(&self) -> u64 {
        self.0.fingerprint
    }

    /// The single-object prefix of every record written with this schema: `c3 01` and the
    /// fingerprint's 8 bytes, little-endian.
    pub fn prefix(&self) -> [u8; super::PREFIX_LEN] {
        Prefix::of(self.0.fingerprint).0
    }

    /// The canonical form's fingerprint as a header for `apache-avro`'s single-object
    /// readers and writers, whose own fingerprints differ for some schemas (see
    /// [`canonical`]).
    pub(crate) fn header(&self) -> Prefix {
        Prefix::of(self.0.fingerprint)
    }

    /// The entries of the metadata block that announces this schema: `avro.schema` (the JSON
    /// text) and `avro.fingerprint` (8 bytes).
    pub fn metadata(&self) -> [(&'static str, Vec<u8>); 2] {
        [
            (SCHEMA_KEY, self.0.json.as_bytes().to_vec()),
            (FINGERPRINT_KEY, self.0.fingerprint.to_le_bytes().to_vec()),
        ]
    }

    /// The schema a metadata block announces: `None` when the block has no `avro.schema`
    /// key, an error when its schema cannot be used (spec: it does not parse, or its
    /// fingerprint is missing or wrong). `offset` is the block's, for the error.
    pub fn from_metadata<'a>(
        entries: impl IntoIterator<Item = (&'a str, &'a [u8])>,
        offset: u64,
    ) -> Option<Result<Self>> {
        let (json, stored) = schema_entries(entries);
        let problem = |problem| Error::Schema { offset, problem };
        let invalid = |what: String| problem(SchemaProblem::Invalid { what });
        let json = json?;
        let Ok(text) = std::str::from_utf8(json) else {
            return Some(Err(invalid("not UTF-8".into())));
        };
        let schema = match WriterSchema::parse(text) {
            Ok(schema) => schema,
            Err(Error::InvalidSchema(what)) => return Some(Err(invalid(what))),
            Err(e) => return Some(Err(e)),
        };
        let Some(stored) = stored else {
            return Some(Err(invalid(format!("no {FINGERPRINT_KEY} beside it"))));
        };
        if stored != schema.fingerprint().to_le_bytes() {
            return Some(Err(problem(SchemaProblem::FingerprintMismatch {
                stored: stored.to_vec(),
                computed: schema.fingerprint(),
            })));
        }
        Some(Ok(schema))
    }

    /// The named types the schema defines, by full name: what its references name.
    pub fn names(&self) -> &Names {
        self.0.names.get_or_init(|| check::names(&self.0.schema))
    }

    /// Walks `datum` as this schema says (spec 15.3), handing each value to `visit`: a flat
    /// record (a record of fields that hold no other values, or such a value or null, as
    /// most logs' records are) by a walk made for it, any other by the walk of trees. Every
    /// typed walk of a record goes through here.
    #[inline]
    pub(crate) fn walk<V: check::Visit>(
        &self,
        datum: &[u8],
        limits: &check::DatumLimits,
        visit: &mut V,
    ) -> std::result::Result<check::Walked, check::Failure> {
        let flat = self.0.flat.get_or_init(|| check::flat(&self.0.schema));
        if let (Some(flat), Schema::Record(record)) = (flat, &self.0.schema) {
            if let Some(walked) = check::walk_flat(record, flat, self.names(), datum, limits, visit)
            {
                return walked;
            }
        }
        check::walk(&self.0.schema, self.names(), datum, limits, visit)
    }

    /// Checks `datum` as a reader checks a record (spec 15.3, checks 3 to 5): its layout
    /// walked within `limits`, nothing left after it, its values. `record` is scratch space
    /// for the single-object record, left holding it.
    pub(crate) fn check_datum(
        &self,
        datum: &[u8],
        limits: &check::DatumLimits,
        record: &mut Vec<u8>,
    ) -> std::result::Result<(), String> {
        let walked = match self.walk(datum, limits, &mut ()) {
            Ok(walked) => walked,
            Err(check::Failure::Invalid { at, what }) => {
                return Err(format!("at byte {at}: {what}"))
            }
            Err(check::Failure::Limit { what, limit }) => {
                return Err(format!("it would decode to more than {limit} {what}"))
            }
        };
        if walked.end != datum.len() {
            let left = datum.len() - walked.end;
            return Err(format!("{left} bytes left after the datum"));
        }
        if let Some(check::Failure::Invalid { at, what }) = walked.invalid {
            return Err(format!("at byte {at}: {what}"));
        }
        record.clear();
        record.extend_from_slice(&self.prefix());
        record.extend_from_slice(datum);
        Ok(())
    }
}

/// A metadata block's `avro.schema` and `avro.fingerprint` values, each if present.
fn schema_entries<'a>(
    entries: impl IntoIterator<Item = (&'a str, &'a [u8])>,
) -> (Option<&'a [u8]>, Option<&'a [u8]>) {
    let (mut json, mut stored) = (None, None);
    for (key, value) in entries {
        match key {
            SCHEMA_KEY => json = Some(value),
            FINGERPRINT_KEY => stored = Some(value),
            _ => {}
        }
    }
    (json, stored)
}

/// The type under a logical type: what resolution compares, and what a union branch is
/// called in Avro's JSON encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Null,
    Boolean,
    Int,
    Long,
    Float,
    Double,
    Bytes,
    String,
    Fixed,
    Enum,
    Record,
    Array,
    Map,
    Union,
}

impl Kind {
    /// Its name in a schema.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Null => "null",
            Kind::Boolean => "boolean",
            Kind::Int => "int",
            Kind::Long => "long",
            Kind::Float => "float",
            Kind::Double => "double",
            Kind::Bytes => "bytes",
            Kind::String => "string",
            Kind::Fixed => "fixed",
            Kind::Enum => "enum",
            Kind::Record => "record",
            Kind::Array => "array",
            Kind::Map => "map",
            Kind::Union => "union",
        }
    }
}

/// The type under `schema`'s logical type, if any (a reference is taken for a record).
pub(crate) fn kind(schema: &Schema) -> Kind {
    match schema {
        Schema::Null => Kind::Null,
        Schema::Boolean => Kind::Boolean,
        Schema::Int | Schema::Date | Schema::TimeMillis => Kind::Int,
        Schema::Long
        | Schema::TimeMicros
        | Schema::TimestampMillis
        | Schema::TimestampMicros
        | Schema::TimestampNanos
        | Schema::LocalTimestampMillis
        | Schema::LocalTimestampMicros
        | Schema::LocalTimestampNanos => Kind::Long,
        Schema::Float => Kind::Float,
        Schema::Double => Kind::Double,
        Schema::Bytes | Schema::BigDecimal => Kind::Bytes,
        Schema::String | Schema::Uuid => Kind::String,
        Schema::Fixed(_) | Schema::Duration => Kind::Fixed,
        Schema::Decimal(decimal) => kind(&decimal.inner),
        Schema::Enum(_) => Kind::Enum,
        Schema::Record(_) => Kind::Record,
        Schema::Array(_) => Kind::Array,
        Schema::Map(_) => Kind::Map,
        Schema::Union(_) => Kind::Union,
        // Followed before a kind is asked for.
        Schema::Ref { .. } => Kind::Record,
    }
}

/// A single-object prefix, as `apache-avro` takes one.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Prefix([u8; super::PREFIX_LEN]);

impl Prefix {
    fn of(fingerprint: u64) -> Self {
        let mut prefix = [0u8; super::PREFIX_LEN];
        prefix[..2].copy_from_slice(&super::MARKER);
        prefix[2..].copy_from_slice(&fingerprint.to_le_bytes());
        Prefix(prefix)
    }
}

impl HeaderBuilder for Prefix {
    fn build_header(&self) -> Vec<u8> {
        self.0.to_vec()
    }
}

/// Writer schemas by fingerprint: the schemas a reader has met in metadata blocks, and those
/// its caller gave it (a schema registry of sorts).
///
/// A fingerprint names one schema in a file (spec 15.3). A schema the file announces again
/// under its fingerprint, or another that decodes alike (other documentation, defaults or
/// aliases), replaces the one before. A schema that decodes differently under a fingerprint
/// the file already announced puts that fingerprint **in conflict** from its block on: a CRC-64
/// fingerprint can be forged in milliseconds, and two logical types share one, so the records
/// after it that name the fingerprint cannot be attributed, and are reported
/// ([`RecordProblem::SchemaConflict`](super::RecordProblem::SchemaConflict)) rather than
/// decoded with a schema their writer may not have announced. Schemas given by the caller
/// ([`add`](Self::add)) are the file's defaults: the file's own replace them.
#[derive(Debug, Clone)]
pub struct Schemas {
    /// Each fingerprint's schema, with when it was last added (a count that only grows): the
    /// order the file announced them in, without a search on every add (a file may announce
    /// many).
    by_fingerprint: HashMap<u64, Entry>,
    added: u64,
    limits: SchemaLimits,
    /// The bytes of schema text held, together.
    held: u64,
}

/// The default number of schemas a typed reader holds from one file: 4,096.
pub const DEFAULT_MAX_SCHEMAS: usize = 4096;

/// The default bytes of schema text (`avro.schema`) a typed reader holds from one file,
/// together: 16 MiB.
pub const DEFAULT_MAX_SCHEMA_BYTES: u64 = 16 << 20;

/// Bounds on the schemas a typed reader holds from one file (spec 15.4): a file of a few MB
/// can announce thousands of schemas, and a parsed schema takes ten to thirty times its
/// text in memory. Checked before a schema is parsed; a metadata block past either is
/// reported ([`SchemaProblem::Limit`]) and its schema not held, so the records that name it
/// are `schema-unknown`. Not damage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "limits do nothing until used: each method returns the changed limits"]
pub struct SchemaLimits {
    max_schemas: usize,
    max_bytes: u64,
}

impl Default for SchemaLimits {
    fn default() -> Self {
        SchemaLimits {
            max_schemas: DEFAULT_MAX_SCHEMAS,
            max_bytes: DEFAULT_MAX_SCHEMA_BYTES,
        }
    }
}

impl SchemaLimits {
    /// The most schemas held (default 4,096). Schemas that replace one of the same
    /// fingerprint do not count again.
    pub fn max_schemas(mut self, schemas: usize) -> Self {
        self.max_schemas = schemas;
        self
    }

    /// The most bytes of schema text held, together (default 16 MiB).
    pub fn max_bytes(mut self, bytes: u64) -> Self {
        self.max_bytes = bytes;
        self
    }
}

#[derive(Debug, Clone)]
struct Entry {
    added: u64,
    schema: WriterSchema,
    /// The offset of the block that first announced it, or `None` for a schema the caller
    /// gave.
    announced: Option<u64>,
    /// The offset of the first block that claimed the fingerprint for a schema that decodes
    /// differently.
    conflict: Option<u64>,
}

/// What a fingerprint names at a place in a file.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Named<'a> {
    /// The schema.
    Schema(&'a WriterSchema),
    /// No schema known.
    Unknown,
    /// Two schemas that decode differently, announced at these offsets.
    Conflict { first: u64, second: u64 },
}

impl Default for Schemas {
    fn default() -> Self {
        Schemas::with_limits(SchemaLimits::default())
    }
}

impl Schemas {
    /// No schemas, the default limits.
    pub fn new() -> Self {
        Self::default()
    }

    /// No schemas; the file's are held within `limits`.
    pub fn with_limits(limits: SchemaLimits) -> Self {
        Schemas {
            by_fingerprint: HashMap::new(),
            added: 0,
            limits,
            held: 0,
        }
    }

    /// Changes the limits for the schemas added from now on.
    pub fn set_limits(&mut self, limits: SchemaLimits) {
        self.limits = limits;
    }

    /// Fails if holding `json` under `fingerprint` (as a metadata block at `offset` states
    /// them, before either is checked) would pass the limits.
    fn room_for(&self, json: usize, fingerprint: Option<u64>, offset: u64) -> Result<()> {
        let replaced = fingerprint.and_then(|fp| self.by_fingerprint.get(&fp));
        let over = if replaced.is_none() && self.by_fingerprint.len() >= self.limits.max_schemas {
            Some(("schemas", self.limits.max_schemas as u64))
        } else {
            let freed = replaced.map_or(0, |e| e.schema.json().len() as u64);
            (self.held - freed + json as u64 > self.limits.max_bytes)
                .then_some(("bytes of schema text", self.limits.max_bytes))
        };
        match over {
            None => Ok(()),
            Some((what, limit)) => Err(Error::Schema {
                offset,
                problem: SchemaProblem::Limit { what, limit },
            }),
        }
    }

    /// Puts `entry` in the table, counting its text.
    fn hold(&mut self, fingerprint: u64, entry: Entry) {
        self.held += entry.schema.json().len() as u64;
        if let Some(old) = self.by_fingerprint.insert(fingerprint, entry) {
            self.held -= old.schema.json().len() as u64;
        }
    }

    /// Adds `schema` as one given from outside the file (as a schema registry gives them),
    /// replacing one of the same fingerprint given before; it is then the newest.
    pub fn add(&mut self, schema: WriterSchema) {
        self.added += 1;
        let added = self.added;
        match self.by_fingerprint.get_mut(&schema.fingerprint()) {
            // The file's own announcement is not replaced by a given schema.
            Some(entry) if entry.announced.is_some() => {}
            _ => {
                let entry = Entry {
                    added,
                    schema: schema.clone(),
                    announced: None,
                    conflict: None,
                };
                self.hold(schema.fingerprint(), entry);
            }
        }
    }

    /// Adds `schema` as the metadata block at `offset` announces it (spec 15.3). Fails, naming
    /// the block that announced the fingerprint first, when that block's schema decodes
    /// differently: the fingerprint is then in conflict from `offset` on.
    ///
    /// Fails too, holding nothing, when holding the schema would pass the table's
    /// [`SchemaLimits`].
    pub fn announce(&mut self, schema: WriterSchema, offset: u64) -> Result<()> {
        let fingerprint = schema.fingerprint();
        self.room_for(schema.json().len(), Some(fingerprint), offset)?;
        self.added += 1;
        let added = self.added;
        let entry = match self.by_fingerprint.get_mut(&fingerprint) {
            Some(entry) if entry.announced.is_some() => entry,
            _ => {
                let entry = Entry {
                    added,
                    schema,
                    announced: Some(offset),
                    conflict: None,
                };
                self.hold(fingerprint, entry);
                return Ok(());
            }
        };
        let first = entry.announced.expect("announced");
        if entry.schema.decodes_like(&schema) {
            // The same schema again, or one of other documentation: the newest text is kept,
            // the first announcement's place too.
            self.held = self.held - entry.schema.json().len() as u64 + schema.json().len() as u64;
            entry.schema = schema;
            entry.added = added;
            return Ok(());
        }
        if offset == first {
            // The first announcement met again (a reader given this file's scan meets it).
            return Ok(());
        }
        entry.conflict = Some(entry.conflict.map_or(offset, |c| c.min(offset)));
        Err(Error::Schema {
            offset,
            problem: SchemaProblem::Conflict { fingerprint, first },
        })
    }

    /// Adds every schema of `other`, as it has them: its announcements as announcements (with
    /// their conflicts), the schemas it was given as given.
    pub fn extend(&mut self, other: &Schemas) {
        let mut entries: Vec<&Entry> = other.by_fingerprint.values().collect();
        entries.sort_unstable_by_key(|e| e.added);
        for entry in entries {
            match entry.announced {
                None => self.add(entry.schema.clone()),
                Some(offset) => {
                    let _ = self.announce(entry.schema.clone(), offset);
                    if let (Some(conflict), Some(mine)) = (
                        entry.conflict,
                        self.by_fingerprint.get_mut(&entry.schema.fingerprint()),
                    ) {
                        mine.conflict = Some(mine.conflict.map_or(conflict, |c| c.min(conflict)));
                    }
                }
            }
        }
    }

    /// The schema with this fingerprint, if known and not in conflict.
    pub fn get(&self, fingerprint: u64) -> Option<&WriterSchema> {
        match self.by_fingerprint.get(&fingerprint) {
            Some(entry) if entry.conflict.is_none() => Some(&entry.schema),
            _ => None,
        }
    }

    /// What `fingerprint` names for a record of the data block at `offset`: the schema, or a
    /// conflict if the record follows a second claim to it.
    pub(crate) fn named(&self, fingerprint: u64, offset: u64) -> Named<'_> {
        let Some(entry) = self.by_fingerprint.get(&fingerprint) else {
            return Named::Unknown;
        };
        match (entry.conflict, entry.announced) {
            (Some(second), Some(first)) if offset > second => Named::Conflict { first, second },
            _ => Named::Schema(&entry.schema),
        }
    }

    /// The fingerprints in conflict, with the offsets of their first and second claims.
    pub fn conflicts(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        self.by_fingerprint
            .iter()
            .filter_map(|(fp, e)| Some((*fp, e.announced?, e.conflict?)))
    }

    /// How many schemas are known.
    pub fn len(&self) -> usize {
        self.by_fingerprint.len()
    }

    /// Whether no schema is known.
    pub fn is_empty(&self) -> bool {
        self.by_fingerprint.is_empty()
    }

    /// The known schemas, oldest first: in the order they were added (a schema added again
    /// counts from its last addition), so in a file's order for [`Schemas::scan`]. A
    /// fingerprint in conflict gives the schema announced first.
    pub fn iter(&self) -> impl Iterator<Item = &WriterSchema> {
        let mut all: Vec<&Entry> = self.by_fingerprint.values().collect();
        all.sort_unstable_by_key(|e| e.added);
        all.into_iter().map(|e| &e.schema)
    }

    /// The schema added last: for a file, the one it announced last.
    pub fn latest(&self) -> Option<&WriterSchema> {
        self.by_fingerprint
            .values()
            .max_by_key(|e| e.added)
            .map(|e| &e.schema)
    }

    /// Adds the schema an intact metadata block announces, if any; an error (naming the
    /// block's offset) for a schema that cannot be used, which is not added, or one that puts
    /// its fingerprint in conflict.
    pub fn add_from_block(&mut self, block: &Block<'_>) -> Result<Option<WriterSchema>> {
        let offset = block.info().offset;
        let (json, stored) = schema_entries(block.entries());
        if let Some(known) = self.met_again(json, stored, offset) {
            return Ok(Some(known));
        }
        self.room_for_block(json, stored, offset)?;
        match WriterSchema::from_metadata(block.entries(), offset) {
            None => Ok(None),
            Some(Err(e)) => Err(e),
            Some(Ok(schema)) => {
                self.announce(schema.clone(), offset)?;
                Ok(Some(schema))
            }
        }
    }

    /// The schema this table holds as announced by the metadata block at `offset` with this
    /// text and stored fingerprint (a reader given a scan of its file meets each block again),
    /// made the newest as announcing it again would: the same schema, not parsed again.
    fn met_again(
        &mut self,
        json: Option<&[u8]>,
        stored: Option<&[u8]>,
        offset: u64,
    ) -> Option<WriterSchema> {
        let fingerprint = u64::from_le_bytes(stored?.try_into().ok()?);
        let entry = self.by_fingerprint.get_mut(&fingerprint)?;
        if entry.announced != Some(offset) || entry.schema.json().as_bytes() != json? {
            return None;
        }
        self.added += 1;
        entry.added = self.added;
        Some(entry.schema.clone())
    }

    /// [`room_for`](Self::room_for) the schema text `json` a metadata block announces, if
    /// any, under the fingerprint it stores.
    fn room_for_block(
        &self,
        json: Option<&[u8]>,
        stored: Option<&[u8]>,
        offset: u64,
    ) -> Result<()> {
        let Some(json) = json else {
            return Ok(());
        };
        let fingerprint = stored.and_then(|fp| Some(u64::from_le_bytes(fp.try_into().ok()?)));
        self.room_for(json.len(), fingerprint, offset)
    }

    /// Collects the schemas of every metadata block in `bytes` (a whole file), in file order,
    /// skipping data blocks by their lengths (spec 9.3): for readers that start past a file's
    /// schema blocks
    /// ([`ReaderBuilder::from_slice_at_record`](crate::ReaderBuilder::from_slice_at_record), a
    /// range read), and for what a file's records are (its newest schema). Damage and
    /// unusable schemas are passed over; a full read reports them.
    pub fn scan(bytes: &[u8]) -> Self {
        Self::scan_with(bytes, &crate::ReaderBuilder::new())
    }

    /// [`Schemas::scan`] with a reader's options (its limits and dictionaries).
    pub fn scan_with(bytes: &[u8], options: &crate::ReaderBuilder) -> Self {
        Self::scan_limited(bytes, options, SchemaLimits::default())
    }

    /// [`Schemas::scan_with`], holding the file's schemas within `limits` (those past them are
    /// passed over, as a full read reports them).
    pub fn scan_limited(
        bytes: &[u8],
        options: &crate::ReaderBuilder,
        limits: SchemaLimits,
    ) -> Self {
        Self::of_metadata(options.from_slice(bytes).metadata().flatten(), limits)
    }

    /// The schemas of `blocks`, a file's metadata blocks in file order (from
    /// [`Remote::metadata`](crate::Remote::metadata), say), held within `limits` as
    /// [`scan_limited`](Self::scan_limited) holds them.
    pub fn of_metadata(
        blocks: impl IntoIterator<Item = crate::Metadata>,
        limits: SchemaLimits,
    ) -> Self {
        let mut schemas = Schemas::with_limits(limits);
        for metadata in blocks {
            let entries = || {
                metadata
                    .entries
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_slice()))
            };
            let (json, stored) = schema_entries(entries());
            if schemas
                .room_for_block(json, stored, metadata.offset)
                .is_err()
            {
                continue;
            }
            if let Some(Ok(schema)) = WriterSchema::from_metadata(entries(), metadata.offset) {
                // A conflict is kept in the table; a full read reports it.
                let _ = schemas.announce(schema, metadata.offset);
            }
        }
        schemas
    }
}

/// Refuses what `apache-avro` 0.21 panics on when it parses a schema or makes its canonical
/// form, rather than reporting: a name, type name or alias that is not an Avro name (it
/// unwraps their parsing), and a size, precision or scale that is not an `i64`. Avro's names are
/// `[A-Za-z_][A-Za-z0-9_]*`, joined by dots in full names. Only what holds schemas is looked
/// into (types, fields, items, values, union branches), not defaults or other attributes,
/// which may hold any JSON. It also refuses a named type that defines a primitive type's name.
fn precheck(json: &serde_json::Value) -> std::result::Result<(), String> {
    use serde_json::Value;
    let fullname = |s: &str| s.split('.').all(is_name);
    match json {
        Value::String(name) if !fullname(name) => Err(format!("type {name:?} is not an Avro name")),
        Value::Array(branches) => branches.iter().try_for_each(precheck),
        Value::Object(object) => {
            names(object)?;
            // Avro: "Primitive type names have no namespace and their names may not be
            // defined in any namespace" (a reference to `int` could name either).
            let named = matches!(
                object.get("type").and_then(Value::as_str),
                Some("record" | "error" | "enum" | "fixed")
            );
            if let (true, Some(Value::String(name))) = (named, object.get("name")) {
                let simple = name.rsplit('.').next().unwrap_or(name);
                if canonical::PRIMITIVES.contains(&simple) {
                    return Err(format!(
                        "type name {name:?} is a primitive type's, which no schema may define"
                    ));
                }
            }
            for key in ["type", "items", "values"] {
                if let Some(schema) = object.get(key) {
                    precheck(schema)?;
                }
            }
            if let Some(Value::Array(fields)) = object.get("fields") {
                for field in fields {
                    if let Value::Object(field) = field {
                        names(field)?;
                        if let Some(schema) = field.get("type") {
                            precheck(schema)?;
                        }
                    }
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The names, aliases and sizes of a schema or field object, for [`precheck`].
fn names(object: &serde_json::Map<String, serde_json::Value>) -> std::result::Result<(), String> {
    use serde_json::Value;
    let fullname = |s: &str| s.split('.').all(is_name);
    for (key, value) in object {
        match (key.as_str(), value) {
            ("name", Value::String(name)) if !fullname(name) => {
                return Err(format!("name {name:?} is not an Avro name"));
            }
            ("namespace", Value::String(ns)) if !(ns.is_empty() || fullname(ns)) => {
                return Err(format!("namespace {ns:?} is not an Avro namespace"));
            }
            ("aliases", Value::Array(aliases)) => {
                for alias in aliases {
                    if let Value::String(alias) = alias {
                        if !fullname(alias) {
                            return Err(format!("alias {alias:?} is not an Avro name"));
                        }
                    }
                }
            }
            // Its canonical form takes these, wherever they are (custom attributes too), as
            // an `i64` or a string of one.
            ("size" | "precision" | "scale", value)
                if !(value.as_i64().is_some()
                    || value.as_str().is_some_and(|s| s.parse::<i64>().is_ok())) =>
            {
                return Err(format!("{key} {value} is not an integer"));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Whether `s` is an Avro name: `[A-Za-z_][A-Za-z0-9_]*`.
fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Runs `f`, turning a panic inside `apache-avro` (which has some on inputs it does not
/// expect) into an error, so that no schema or datum a file holds can end the program.
pub(crate) fn guarded<T>(f: impl FnOnce() -> T) -> std::result::Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|panic| {
        let what = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or("unknown");
        format!("apache-avro failed: {what}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// apache-avro 0.21 panics on these (fuzz/regressions/avro_read/name-not-an-avro-name):
    /// they are refused before it sees them.
    #[test]
    fn schemas_apache_avro_panics_on_are_refused() {
        for json in [
            r#"{"type":"record","name":"Eve/t","fields":[]}"#,
            r#"{"type":"record","name":"E","fields":[{"name":"a","type":"jo/ng"}]}"#,
            r#"{"type":"record","name":"E","aliases":["a b"],"fields":[]}"#,
            r#"{"type":"record","name":"E","fields":[{"name":"a","type":{"type":"array","items":"long","name":"x y"}}]}"#,
            r#"{"type":"fixed","name":"F","size":18446744073709551615}"#,
            r#"{"type":"enum","name":"E","namespace":"a..b","symbols":["A"]}"#,
            r#"{"type":"record","name":"E","size":"x","fields":[]}"#,
            r#"{"type":"record","name":"E","fields":[{"name":"a","type":"long","scale":1.5}]}"#,
        ] {
            assert!(
                matches!(WriterSchema::parse(json), Err(Error::InvalidSchema(_))),
                "{json}"
            );
        }
    }

    /// Avro lets no schema define a primitive type's name, in any namespace (spec 15.3,
    /// check 1); a field may bear one, and a `name` attribute of another type means nothing.
    #[test]
    fn primitive_names_are_not_defined() {
        for json in [
            r#"{"type":"record","name":"int","fields":[]}"#,
            r#"{"type":"record","name":"com.example.long","fields":[]}"#,
            r#"{"type":"record","name":"R","namespace":"n","fields":[{"name":"f","type":{"type":"enum","name":"null","symbols":["A"]}}]}"#,
            r#"{"type":"fixed","name":"string","size":4}"#,
            r#"{"type":"error","name":"boolean","fields":[]}"#,
        ] {
            let e = WriterSchema::parse(json).expect_err(json);
            assert!(e.to_string().contains("primitive"), "{json}: {e}");
        }
        for json in [
            r#"{"type":"record","name":"R","fields":[{"name":"int","type":"int"}]}"#,
            r#"{"type":"record","name":"integer","fields":[]}"#,
            r#"{"type":"array","items":"long","name":"int"}"#,
        ] {
            WriterSchema::parse(json).expect(json);
        }
    }

    /// Defaults and other attributes may hold any JSON, names included.
    #[test]
    fn defaults_are_not_schemas() {
        let json = r#"{"type":"record","name":"E","x-meta":{"name":"not a name"},"fields":[
            {"name":"who","type":{"type":"record","name":"P","fields":[
                {"name":"name","type":"string"}]},"default":{"name":"John Smith"}}]}"#;
        WriterSchema::parse(json).unwrap();
    }
}
