//! What goes wrong reading and writing typed records: each record or schema problem names the
//! block it was found in by its byte offset.

/// The result type of the typed reader and writer.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong reading or writing typed records.
///
/// Reading goes on after every error but [`Error::File`] ones that stop a reader (I/O, a newer
/// format version), as with [`Reader`](crate::Reader): a record or a schema that cannot be used
/// is reported once, and the next record is read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The file itself: damage (the records of a damaged block are lost with it), I/O, a
    /// newer format version, a record too large for a block. See [`crate::Error`].
    #[error(transparent)]
    File(#[from] crate::Error),

    /// A record of an intact data block that cannot be returned: it is not a single-object
    /// encoded datum, names a schema the reader does not know, or does not decode under its
    /// schema. Nothing of it is returned.
    #[error("record {index} of the block at offset {offset}: {problem}")]
    Record {
        /// Absolute offset of the opening sync byte of the data block holding the record.
        offset: u64,
        /// The record's position in its block, from 0.
        index: u64,
        /// The record's position among the records this reader met, from 0 (lost blocks'
        /// records not counted).
        ordinal: u64,
        /// What is wrong.
        problem: RecordProblem,
    },

    /// A metadata block announces a schema (key `avro.schema`) that cannot be used: it does
    /// not parse, or its `avro.fingerprint` is missing or is not the schema's. The reader
    /// ignores the block; records that name the schema are then reported as
    /// [`RecordProblem::SchemaUnknown`].
    #[error("metadata block at offset {offset}: {problem}")]
    Schema {
        /// Absolute offset of the metadata block's opening sync byte.
        offset: u64,
        /// What is wrong.
        problem: SchemaProblem,
    },

    /// A schema given to a writer or a reader does not parse.
    #[error("invalid Avro schema: {0}")]
    InvalidSchema(String),

    /// A value handed to a writer does not conform to its schema; nothing was written.
    #[error("value does not conform to the schema{}: {reason}", if path.is_empty() { String::new() } else { format!(" at {path}") })]
    InvalidValue {
        /// Where in the value: `.field`, `[index]` and `{"key"}` steps from the value's root
        /// (empty: the root, or not found).
        path: String,
        /// `apache-avro`'s reason.
        reason: String,
    },
}

impl Error {
    /// A word for the problem, for scripts: a [`Cause::name`](crate::Cause::name) for
    /// [`Error::Damaged`](crate::Error::Damaged), the names of [`RecordProblem::name`] and
    /// [`SchemaProblem::name`], `invalid-schema`, `invalid-value`, or `error` for other
    /// file errors.
    pub fn name(&self) -> &'static str {
        match self {
            Error::File(crate::Error::Damaged { cause, .. }) => cause.name(),
            Error::File(_) => "error",
            Error::Record { problem, .. } => problem.name(),
            Error::Schema { problem, .. } => problem.name(),
            Error::InvalidSchema(_) => "invalid-schema",
            Error::InvalidValue { .. } => "invalid-value",
        }
    }

    /// Whether reading can go on after this error: everything but file errors other than
    /// damage (I/O failures, a newer format version), after which a reader returns nothing
    /// more.
    pub fn is_recoverable(&self) -> bool {
        !matches!(self, Error::File(e) if !matches!(e, crate::Error::Damaged { .. }))
    }
}

/// Why a record of an intact block is not returned (spec 15.3).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecordProblem {
    /// The record does not start with the single-object marker `c3 01` followed by an 8-byte
    /// fingerprint.
    #[error("not a single-object encoded Avro datum (starts {})", hex(found))]
    NoMarker {
        /// The record's first bytes (up to 10).
        found: Vec<u8>,
    },
    /// The record's fingerprint names no schema the reader knows: the metadata block with the
    /// schema was lost to damage, never written, or lies before where reading started.
    #[error("schema {fingerprint:016x} is unknown (its metadata block is lost, was never read, or was over a limit)")]
    SchemaUnknown {
        /// The fingerprint, as the 8 bytes read little-endian.
        fingerprint: u64,
    },
    /// The record's fingerprint was claimed by two schemas that decode differently, and the
    /// record follows the second claim (at offset `second`; the first at `first`): which one
    /// its writer announced cannot be known, so it is decoded with neither (spec 15.3).
    #[error(
        "schema {fingerprint:016x} is in conflict: the blocks at offsets {first} and {second} \
         announce two schemas that decode differently under it, so the record's writer schema \
         cannot be known"
    )]
    SchemaConflict {
        /// The fingerprint, as the 8 bytes read little-endian.
        fingerprint: u64,
        /// Offset of the block that announced the fingerprint first.
        first: u64,
        /// Offset of the block that claimed it for another schema.
        second: u64,
    },
    /// The datum does not decode under its writer schema.
    #[error("datum does not decode under schema {fingerprint:016x} at its byte {at}: {what}")]
    Undecodable {
        /// The writer schema's fingerprint.
        fingerprint: u64,
        /// Offset in the datum (after the 10-byte prefix) where decoding failed; 0 when
        /// `apache-avro` does not say.
        at: u64,
        /// What is wrong.
        what: String,
    },
    /// The datum decodes, but bytes are left after it.
    #[error("{left} bytes left after the datum of schema {fingerprint:016x} (of {len})")]
    TrailingBytes {
        /// The writer schema's fingerprint.
        fingerprint: u64,
        /// Bytes left over.
        left: u64,
        /// The datum's bytes in all.
        len: u64,
    },
    /// Decoding the datum would go over one of the reader's
    /// [`DatumLimits`](super::DatumLimits); a reader with larger limits decodes it.
    #[error("datum would decode to more than the reader's limit of {limit} {what}")]
    Limit {
        /// What is limited: `"values"` or `"levels of nesting"`.
        what: &'static str,
        /// The limit.
        limit: u64,
    },
    /// The datum decodes under its writer schema, but not to the reader schema (Avro's schema
    /// resolution fails: a field without a default, a type that is neither the same nor one
    /// Avro promotes to, a named type of another name).
    #[error("cannot resolve schema {fingerprint:016x} to the reader schema at {}: {what}", if path.is_empty() { "the root" } else { path.as_str() })]
    Unresolvable {
        /// The writer schema's fingerprint.
        fingerprint: u64,
        /// Where in the value: `.field`, `[index]` and `{"key"}` steps from its root (empty:
        /// the root).
        path: String,
        /// Why.
        what: String,
    },
    /// The value decodes but does not deserialize into the type asked for.
    #[error("cannot deserialize the value: {what}")]
    Deserialize {
        /// `apache-avro`'s reason.
        what: String,
    },
}

impl RecordProblem {
    /// The problem's name in the spec's table: `no-marker`, `schema-unknown`,
    /// `schema-conflict`, `undecodable`,
    /// `trailing-bytes`, `limit`, `unresolvable` or `deserialize`.
    pub fn name(&self) -> &'static str {
        match self {
            RecordProblem::NoMarker { .. } => "no-marker",
            RecordProblem::SchemaUnknown { .. } => "schema-unknown",
            RecordProblem::SchemaConflict { .. } => "schema-conflict",
            RecordProblem::Undecodable { .. } => "undecodable",
            RecordProblem::TrailingBytes { .. } => "trailing-bytes",
            RecordProblem::Limit { .. } => "limit",
            RecordProblem::Unresolvable { .. } => "unresolvable",
            RecordProblem::Deserialize { .. } => "deserialize",
        }
    }

    /// Whether the file is wrong (`no-marker`, `undecodable`, `trailing-bytes`: bytes a
    /// writer got wrong; `schema-conflict`: announcements that contradict each other), rather
    /// than the reader unable to use it: a schema it lacks, a limit, a reader schema or type
    /// that does not fit.
    pub fn is_damage(&self) -> bool {
        matches!(
            self,
            RecordProblem::NoMarker { .. }
                | RecordProblem::SchemaConflict { .. }
                | RecordProblem::Undecodable { .. }
                | RecordProblem::TrailingBytes { .. }
        )
    }
}

/// Why a metadata block's schema is not used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaProblem {
    /// `avro.schema` is not UTF-8 or does not parse as an Avro schema, or `avro.fingerprint`
    /// is missing.
    #[error("invalid avro.schema: {what}")]
    Invalid {
        /// What is wrong.
        what: String,
    },
    /// `avro.fingerprint` is not the 8-byte fingerprint of `avro.schema`.
    #[error(
        "avro.fingerprint {} is not {computed:016x}, the fingerprint of avro.schema",
        hex(stored)
    )]
    FingerprintMismatch {
        /// The bytes stored under `avro.fingerprint`.
        stored: Vec<u8>,
        /// The fingerprint of the schema, as the 8 bytes read little-endian.
        computed: u64,
    },
    /// The block announces a schema under a fingerprint that an earlier block of the file
    /// announced for a schema that decodes differently (another Parsing Canonical Form, a
    /// CRC-64 collision made on purpose, or another logical type): the fingerprint no longer
    /// tells which schema a record was written with, and the records after this block that
    /// name it are not decoded ([`RecordProblem::SchemaConflict`]).
    #[error(
        "avro.schema claims fingerprint {fingerprint:016x}, which the block at offset {first} \
         announced for a schema that decodes differently; records after this block that name \
         it cannot be attributed to either"
    )]
    Conflict {
        /// The fingerprint both claim.
        fingerprint: u64,
        /// Offset of the block that announced it first.
        first: u64,
    },
    /// Holding the block's schema would pass the reader's
    /// [`SchemaLimits`](super::SchemaLimits): the schema is not held, and the records that
    /// name it are `schema-unknown`. Not damage.
    #[error(
        "avro.schema not held: a reader holds at most {limit} {what} from one file, and the \
         records that name it are read as of an unknown schema"
    )]
    Limit {
        /// What is counted: `schemas`, or `bytes of schema text`.
        what: &'static str,
        /// The limit.
        limit: u64,
    },
}

impl SchemaProblem {
    /// The problem's name in the spec's table: `schema-invalid`, `fingerprint-mismatch`,
    /// `schema-conflict` or `limit`.
    pub fn name(&self) -> &'static str {
        match self {
            SchemaProblem::Invalid { .. } => "schema-invalid",
            SchemaProblem::FingerprintMismatch { .. } => "fingerprint-mismatch",
            SchemaProblem::Conflict { .. } => "schema-conflict",
            SchemaProblem::Limit { .. } => "limit",
        }
    }
}

impl SchemaProblem {
    /// Whether the file is wrong (a schema that cannot be used, or contradicts another),
    /// rather than the reader unable to hold it: `limit` is not damage.
    pub fn is_damage(&self) -> bool {
        !matches!(self, SchemaProblem::Limit { .. })
    }
}

fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 3);
    for (i, b) in bytes.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(&format!("{b:02x}"));
    }
    if out.is_empty() {
        out.push_str("empty");
    }
    out
}
