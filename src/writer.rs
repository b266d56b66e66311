//! Writing records and metadata into blocks.

use std::io::Write;

use crate::block::{self, types, BlockType, DataEncoder, ENVELOPE_LEN};
use crate::codec::{Compression, Compressor, Dictionary};
use crate::emit::{emit, emit_with_times};
use crate::error::{Error, Result};
use crate::index::IndexBuilder;
use crate::key::SealingKey;
use crate::limits::DEFAULT_MAX_BODY_SIZE;
use crate::parallel::{Encoders, Kept};
use crate::pipe;
use crate::seal::{file_id_text, Sealer, SharedSealer, DEFAULT_SEAL_BYTES, FILE_ID_KEY};
use crate::time::{self, TimeSpan};
use crate::varint;

/// The default target of record bytes per uncompressed data block: 256 KiB (see
/// BENCHMARKS.md, "Block size").
pub const DEFAULT_BLOCK_TARGET: usize = 256 * 1024;

/// The default target of record bytes per compressed data block: 2 MiB. zstd finds repeats
/// only within a block, and real data repeats over long distances: on real JSON, 256 KiB blocks
/// made files 1.13-1.25x the size of whole-stream `zstd -3`, 2 MiB blocks 1.01-1.08x, for
/// reading and writing as fast. A damaged byte then costs one block: on those files 93-268 KB
/// stored (BENCHMARKS.md, "Block size and compression").
pub const DEFAULT_COMPRESSED_BLOCK_TARGET: usize = 2 << 20;

/// Options for writers.
///
/// ```
/// let mut file = Vec::new();
/// let writer = cobsfile::WriterBuilder::new()
///     .block_target(64 * 1024)
///     .build(&mut file)?;
/// writer.finish()?;
/// # Ok::<(), cobsfile::Error>(())
/// ```
#[derive(Debug, Clone)]
#[must_use = "options do nothing until used: each method returns the changed options"]
pub struct WriterBuilder {
    /// `None`: the default for the compression, [`WriterBuilder::get_block_target`].
    block_target: Option<usize>,
    max_body_size: usize,
    compression: Compression,
    dictionary: Option<(Dictionary, bool)>,
    /// Whether compressed data blocks hold their records as lines where they can.
    lines: bool,
    threads: usize,
    index: bool,
    /// Whether `build` starts the output with the leading sync byte and header block (not
    /// when appending to a file that has them).
    header: bool,
    atomic_limit: Option<usize>,
    /// How its writers seal, if they do.
    seal: Option<Sealing>,
    /// Worker threads its writers leave to one another (shared by clones).
    kept: Kept,
}

/// How a writer seals (spec 8.10): see [`WriterBuilder::seal`].
#[derive(Debug, Clone)]
struct Sealing {
    /// The chain: made anew by each `build` from the key (random ids), or given whole.
    chain: Chain,
    /// Seal once the blocks since the last seal hold this many bytes.
    every: u64,
    /// Seal once this long has passed since the last seal, at the next block.
    interval: Option<std::time::Duration>,
    /// The id of the file appended to, which holds it; `None`: the writer writes its own.
    file_id: Option<[u8; 16]>,
}

#[derive(Debug, Clone)]
enum Chain {
    Key(Box<SealingKey>),
    Given(Box<Sealer>),
    /// Shared with the log directory the writer appends to.
    Shared(SharedSealer),
}

/// Room kept in front of a data block's records for their count, written when it closes.
const COUNT_ROOM: usize = varint::MAX_LEN;

impl Default for WriterBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl WriterBuilder {
    /// Default options: blocks of [`DEFAULT_BLOCK_TARGET`] (of
    /// [`DEFAULT_COMPRESSED_BLOCK_TARGET`] when compressed), at most [`DEFAULT_MAX_BODY_SIZE`].
    pub fn new() -> Self {
        WriterBuilder {
            block_target: None,
            max_body_size: DEFAULT_MAX_BODY_SIZE,
            compression: Compression::None,
            dictionary: None,
            lines: true,
            threads: 0,
            index: true,
            header: true,
            atomic_limit: None,
            seal: None,
            kept: Kept::default(),
        }
    }

    /// Seals what the writer writes with `key` (spec 8.10): a seal block once the blocks
    /// written since the last seal hold [`DEFAULT_SEAL_BYTES`] (see
    /// [`seal_every`](Self::seal_every)), when [`Writer::seal`] is called, and at
    /// [`finish`](Writer::finish), after the index, so that every block of a finished file
    /// but its end block is sealed. Each writer built is a chain of seals of its own
    /// (random ids); a new file gets a random file id, in a metadata block right after its
    /// header. Seals prove, to anyone with the public key, that no sealed block was altered,
    /// removed, reordered or added (see [`seal::verify`](crate::seal::verify)).
    ///
    /// ```
    /// let key = cobsfile::key::SealingKey::from_seed([7; 32]);
    /// let mut writer = cobsfile::WriterBuilder::new().seal(key.clone()).build(Vec::new())?;
    /// writer.write_record(b"sealed")?;
    /// let file = writer.finish()?;
    /// let (_, sealed) = cobsfile::ReaderBuilder::new().verify_seals(&file, &[key.verifying_key()])?;
    /// assert!(sealed.is_authentic());
    /// # Ok::<(), cobsfile::Error>(())
    /// ```
    pub fn seal(self, key: SealingKey) -> Self {
        self.sealing(Chain::Key(Box::new(key)))
    }

    /// Seals with `sealer`, a chain made by the caller (its file id and chain id chosen, its
    /// clock set): for one writer only, since two writers of one chain would make seals that
    /// contradict each other. As [`seal`](Self::seal) otherwise.
    pub fn seal_with(self, sealer: Sealer) -> Self {
        self.sealing(Chain::Given(Box::new(sealer)))
    }

    /// Seals with `chain`, at the default moments.
    fn sealing(mut self, chain: Chain) -> Self {
        self.seal = Some(Sealing {
            chain,
            every: DEFAULT_SEAL_BYTES,
            interval: None,
            file_id: None,
        });
        self
    }

    /// The id of the file a writer that seals appends to (its metadata holds it), or `None`
    /// if it holds none: the writer then writes one first.
    pub(crate) fn seal_file_id(mut self, file_id: Option<[u8; 16]>) -> Self {
        if let Some(sealing) = &mut self.seal {
            sealing.file_id = file_id;
        }
        self
    }

    /// Whether writers seal.
    pub(crate) fn seals(&self) -> bool {
        self.seal.is_some()
    }

    /// The key writers seal with, if they seal.
    pub(crate) fn sealing_key(&self) -> Option<SealingKey> {
        match &self.seal.as_ref()?.chain {
            Chain::Key(key) => Some((**key).clone()),
            Chain::Given(sealer) => Some(sealer.key().clone()),
            Chain::Shared(sealer) => Some(crate::seal::lock(sealer).key().clone()),
        }
    }

    /// Seals with `sealer`, shared with whoever starts its next chains (a log directory).
    pub(crate) fn seal_shared(mut self, sealer: SharedSealer) -> Self {
        if let Some(sealing) = &mut self.seal {
            sealing.chain = Chain::Shared(sealer);
        }
        self
    }

    /// When a writer that seals seals on its own: once the blocks written since its last seal
    /// hold `bytes` bytes (default [`DEFAULT_SEAL_BYTES`], 1 MiB; `u64::MAX`: never by size),
    /// and, with `interval`, once that long has passed since its last seal, checked as each
    /// block is written. Does nothing unless the writer seals.
    pub fn seal_every(mut self, bytes: u64, interval: Option<std::time::Duration>) -> Self {
        if let Some(sealing) = &mut self.seal {
            sealing.every = bytes.max(1);
            sealing.interval = interval;
        }
        self
    }

    /// The target number of record bytes (each record plus its length prefix) per data block
    /// (default 256 KiB uncompressed, [`DEFAULT_COMPRESSED_BLOCK_TARGET`], 2 MiB, compressed).
    /// A block is closed before a record that would take it past the target (or its body past
    /// the maximum body size); a record larger than the target gets a block of its own.
    ///
    /// Larger blocks compress better (zstd finds repeats only within a block) and a damaged
    /// byte costs the whole block it lands in; a reader holds one decoded block.
    pub fn block_target(mut self, bytes: usize) -> Self {
        self.block_target = Some(bytes.max(1));
        self
    }

    /// The block target these options write with: the one set, or the default for the
    /// compression.
    pub fn get_block_target(&self) -> usize {
        self.block_target.unwrap_or(match self.compression {
            Compression::None => DEFAULT_BLOCK_TARGET,
            Compression::Zstd { .. } => DEFAULT_COMPRESSED_BLOCK_TARGET,
        })
    }

    /// The largest block body the writer produces (default 64 MiB): records that would not
    /// fit are refused with [`Error::RecordTooLarge`]. Keep it at or below the readers' limit.
    pub fn max_body_size(mut self, bytes: usize) -> Self {
        self.max_body_size = bytes;
        self
    }

    /// How data blocks are compressed (default [`Compression::None`]). A block whose
    /// compressed form would not be smaller is stored as is.
    pub fn compression(mut self, compression: Compression) -> Self {
        self.compression = compression;
        self
    }

    /// Whether compressed data blocks whose records hold no newline (0x0A) store them as
    /// lines, each followed by a newline, rather than each after its length (default true;
    /// spec 8.3, codecs 3 and 4). Lines compress as the text they came from does: short-line
    /// logs take 10-30 % less room (BENCHMARKS.md). Files so written are read by this
    /// revision and later; readers that predate it report such blocks as unreadable (an
    /// unsupported codec, never damage), so `false` writes files they read whole.
    pub fn line_layout(mut self, lines: bool) -> Self {
        self.lines = lines;
        self
    }

    /// Compresses data blocks with `dictionary` (with zstd compression only). With `embed`,
    /// the dictionary is written into the file in a dictionary block after the header, so the
    /// file stays readable on its own; without, readers must be given the same dictionary.
    /// Either way every block names the dictionary by its id.
    pub fn dictionary(mut self, dictionary: Dictionary, embed: bool) -> Self {
        self.dictionary = Some((dictionary, embed));
        self
    }

    /// Encodes (and compresses) data blocks on `threads` worker threads (default 0; 0 and 1
    /// encode on the calling thread).
    ///
    /// Each worker has its own zstd context, created once. Up to 2 blocks per thread are in
    /// flight; when that many are, the writer waits for the oldest and writes it. Blocks reach
    /// the inner writer in the order they were closed (metadata and raw blocks included), each
    /// in one `write_all`, and the file is byte for byte the one a single thread writes.
    ///
    /// A block may so reach the inner writer after the call that closed it returns, and an
    /// error encoding or writing it is returned by a later call (the next that has to wait for
    /// it, or [`flush`](Writer::flush) or [`finish`](Writer::finish), which wait for every
    /// block); the block is then lost. Dropping the writer writes the blocks in flight and
    /// stops the threads.
    ///
    /// ```
    /// use cobsfile::{Compression, WriterBuilder};
    ///
    /// let mut writer = WriterBuilder::new()
    ///     .compression(Compression::zstd(3)?)
    ///     .threads(2)
    ///     .build(Vec::new())?;
    /// for i in 0..10_000 {
    ///     writer.write_record(format!("{{\"event\":{i}}}").as_bytes())?;
    /// }
    /// let file = writer.finish()?;
    /// let (records, errors) = cobsfile::ReaderBuilder::new().from_slice(&file).read_all();
    /// assert_eq!((records.len(), errors.len()), (10_000, 0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = threads;
        self
    }

    /// Whether [`finish`](Writer::finish) writes an index block before its end block
    /// (default true):
    /// the offset, size and record count of every block written, a few bytes per block, with
    /// which readers go straight to the k-th record
    /// ([`ReaderBuilder::from_slice_at_record`](crate::ReaderBuilder::from_slice_at_record))
    /// or to a byte offset ([`Index`](crate::Index)). Readers never need it: a file without
    /// one, or with a damaged one, reads the same. A writer dropped without `finish`, or one
    /// whose inner writer failed, writes none; so does one whose index would exceed the
    /// maximum block size.
    ///
    /// ```
    /// let mut writer = cobsfile::WriterBuilder::new().index(false).build(Vec::new())?;
    /// writer.write_record(b"no index")?;
    /// let file = writer.finish()?;
    /// assert!(cobsfile::Index::find(&file).is_none());
    /// # Ok::<(), cobsfile::Error>(())
    /// ```
    pub fn index(mut self, index: bool) -> Self {
        self.index = index;
        self
    }

    /// The dictionary data blocks are compressed with, if any.
    pub(crate) fn get_dictionary(&self) -> Option<&Dictionary> {
        self.dictionary.as_ref().map(|(dictionary, _)| dictionary)
    }

    /// The dictionary block this writer embeds (spec 7.2), from its type field to its closing
    /// sync byte, if it embeds one: a log directory's appender starts each new segment with it.
    pub(crate) fn embedded_dictionary_block(&self) -> Result<Option<Vec<u8>>> {
        let (Some((dictionary, true)), Compression::Zstd { level }) =
            (&self.dictionary, self.compression)
        else {
            return Ok(None);
        };
        // Compressed without a dictionary, which the reader does not have yet.
        let mut plain = Compressor::new(level, None)?;
        let mut out = Vec::new();
        let start = block::encode(
            types::DICTIONARY,
            dictionary.bytes(),
            Some(&mut plain),
            &mut out,
        )?;
        Ok(Some(out.split_off(start)))
    }

    /// Leaves out the leading sync byte and header block, for output that goes after an
    /// existing file's blocks.
    pub(crate) fn without_header(mut self) -> Self {
        self.header = false;
        self
    }

    /// Hands every block to the inner writer in one write of at most `limit` bytes (default:
    /// no limit), so that several writers can share one pipe: POSIX makes writes of at most
    /// [`PIPE_BUF`](crate::pipe::PIPE_BUF) bytes to a pipe atomic, never interleaved with other
    /// writers' bytes.
    ///
    /// The maximum block size shrinks so that the largest block of any content, COBS overhead
    /// and envelope included, fits in `limit` (4066 body bytes for 4096); a compressed block is
    /// never larger than its records stored as they are. Records too large for such a block
    /// are refused with [`Error::RecordTooLarge`] (see [`Writer::max_record_len`]), and so is
    /// a dictionary to embed whose block would not fit (as an I/O error). No index is written:
    /// it describes a file written by one writer, which a shared pipe is not. Each writer's
    /// [`finish`](Writer::finish) writes its end block, so the stream is finished when the last
    /// block in it is one: the last writer to finish did.
    ///
    /// Each writer starts with its own sync byte and header block, one write of 19 bytes;
    /// readers take the headers of later writers, met mid-stream, as those of concatenated
    /// files. Each later write is one block ending with its sync byte, which opens the next
    /// block whoever writes it.
    ///
    /// ```
    /// use cobsfile::pipe::PIPE_BUF;
    ///
    /// let mut writer = cobsfile::WriterBuilder::new().atomic_writes(PIPE_BUF).build(Vec::new())?;
    /// assert_eq!(writer.max_record_len(), 4041);
    /// writer.write_record(&[b'x'; 4041])?;
    /// assert!(writer.write_record(&[b'x'; 4042]).is_err());
    /// # Ok::<(), cobsfile::Error>(())
    /// ```
    pub fn atomic_writes(mut self, limit: usize) -> Self {
        self.atomic_limit = Some(limit);
        self
    }

    /// Starts a file on `inner`: writes the leading sync byte and the header block (and the
    /// dictionary block when a dictionary is to be embedded).
    ///
    /// End the file with [`Writer::finish`], which reports any error writing it. A writer
    /// dropped unfinished writes its pending records but ignores errors and writes no index,
    /// and `cobsfile verify` reports the file as unfinished (see [`Writer`]).
    pub fn build<W: Write>(mut self, inner: W) -> Result<Writer<W>> {
        if let Some(limit) = self.atomic_limit {
            self.max_body_size = self.max_body_size.min(pipe::max_body_len(limit));
            self.index = false;
        }
        let dictionary = self.dictionary.as_ref().map(|(d, _)| d);
        let (compressor, encoders) = if self.threads > 1 {
            let encoders = Encoders::new(
                &self.kept,
                self.threads,
                self.compression,
                dictionary,
                self.lines,
            )?;
            (None, Some(encoders))
        } else {
            let compressor = Compressor::for_writer(self.compression, dictionary, self.lines)?;
            (compressor, None)
        };
        let mut index = IndexBuilder::new(self.index);
        // The chain, and the file id to write first if the file has none yet.
        let mut new_file_id = None;
        if let Some(sealing) = &self.seal {
            let sealer = match &sealing.chain {
                Chain::Given(sealer) => {
                    std::sync::Arc::new(std::sync::Mutex::new((**sealer).clone()))
                }
                Chain::Key(key) => {
                    let file_id = match sealing.file_id {
                        Some(id) => id,
                        None => Sealer::random_id()?,
                    };
                    let chain = Sealer::new((**key).clone(), file_id, Sealer::random_id()?);
                    std::sync::Arc::new(std::sync::Mutex::new(chain))
                }
                Chain::Shared(sealer) => std::sync::Arc::clone(sealer),
            };
            if sealing.file_id.is_none() {
                new_file_id = Some(crate::seal::lock(&sealer).file_id());
            }
            index.sealer = Some(sealer);
        }
        let block_target = self.get_block_target();
        // Uncompressed blocks encoded on this thread are encoded as records arrive; the
        // others, from a payload of records (which zstd and the worker threads take).
        let data =
            (encoders.is_none() && compressor.is_none()).then(|| DataEncoder::new(block_target));
        let mut writer = Writer {
            inner: Some(inner),
            index,
            block_target,
            options: self,
            compressor,
            encoders,
            data,
            count: 0,
            pending: 0,
            records: vec![0; COUNT_ROOM],
            out: Vec::new(),
            times: Vec::new(),
            span: None,
            time_payload: Vec::new(),
            time_block: Vec::new(),
            pair: Vec::new(),
            time_compressor: None,
            last_seal: std::time::Instant::now(),
        };
        if writer.options.header {
            writer.out = block::file_start();
            writer.write_out(0, 0)?;
        }
        if let Some(block) = writer.options.embedded_dictionary_block()? {
            writer.out = block;
            writer.write_out(0, 0)?;
        }
        if let Some(id) = new_file_id {
            writer.write_metadata([(FILE_ID_KEY, file_id_text(&id))])?;
        }
        Ok(writer)
    }
}

/// Writes records into data blocks and metadata into metadata blocks.
///
/// Each block reaches the inner writer in one `write_all` of one buffer, so blocks written to
/// an `O_APPEND` file are never interleaved with other writers' bytes mid-block; on a pipe,
/// only writes of at most [`PIPE_BUF`](crate::pipe::PIPE_BUF) bytes are safe from that (see
/// [`WriterBuilder::atomic_writes`]).
/// Buffers are kept between blocks: writing a record allocates nothing in steady state.
///
/// # Call `finish`
///
/// [`finish`](Self::finish) ends the file: it writes the open data block, the blocks in
/// flight and the index, flushes, and returns the inner writer; an error writing any of
/// those is reported there and nowhere else. A writer dropped without it (an
/// early return through `?`, say) still writes the open data block and the blocks in flight,
/// but **ignores every error** doing so (a full disk goes unnoticed), writes no index and
/// does not flush the inner writer (a `BufWriter` flushes itself on drop, also ignoring
/// errors); it writes nothing while its thread panics. Nor does it write the final block that
/// marks a file finished, so `cobsfile verify` reports a dropped writer's file as unfinished,
/// as it would a crashed one's; its intact blocks read as usual. Dropping is how tests
/// simulate a crash, never a way to end a file.
///
/// ```
/// let mut writer = cobsfile::Writer::new(Vec::new())?;
/// writer.write_metadata([("schema", b"event-v1")])?;
/// writer.write_record(b"first")?;
/// writer.write_record(b"")?;
/// let file = writer.finish()?;
/// assert_eq!(file[0], 0);
/// # Ok::<(), cobsfile::Error>(())
/// ```
#[derive(Debug)]
pub struct Writer<W: Write> {
    /// `None` once `finish` has taken it.
    inner: Option<W>,
    options: WriterBuilder,
    /// Record bytes per data block (the options' target, or the compression's default).
    block_target: usize,
    /// The zstd context, kept for every block (on one thread).
    compressor: Option<Compressor>,
    /// The worker threads and the blocks in flight, with `threads > 1`.
    encoders: Option<Encoders>,
    /// The open data block, encoded as records arrive: uncompressed, on this thread.
    data: Option<DataEncoder>,
    /// Records in the open data block.
    count: u64,
    /// Bytes of records (with their length prefixes) in the open data block.
    pending: usize,
    /// Without `data`: room for the count, then the open data block's records, each with
    /// its length prefix.
    records: Vec<u8>,
    /// The encoded block being written.
    out: Vec<u8>,
    /// The blocks written so far, for the index `finish` writes.
    index: IndexBuilder,
    /// The event times of the open data block's records, when they have times (all of them
    /// or none do), and their span.
    times: Vec<i64>,
    span: Option<TimeSpan>,
    /// The time block of the data block being closed: payload, and encoded block.
    time_payload: Vec<u8>,
    time_block: Vec<u8>,
    /// A time block and its data block, together for their one write.
    pair: Vec<u8>,
    /// Compresses time blocks when data blocks are compressed: zstd without the dictionary
    /// (spec 8.8: a time block is never stored with codec 2). Made when first needed.
    time_compressor: Option<Compressor>,
    /// When the writer last sealed (or started), for [`WriterBuilder::seal_every`]'s interval.
    last_seal: std::time::Instant,
}

impl<W: Write> Writer<W> {
    /// Starts a file on `inner` with default options.
    pub fn new(inner: W) -> Result<Self> {
        WriterBuilder::new().build(inner)
    }

    /// The largest record this writer accepts.
    pub fn max_record_len(&self) -> usize {
        self.options
            .max_body_size
            .saturating_sub(ENVELOPE_LEN + 2 * varint::MAX_LEN)
    }

    /// Adds a record to the open data block, closing the block when it reaches its target.
    pub fn write_record(&mut self, record: &[u8]) -> Result<()> {
        self.take_record(record, None)
    }

    /// Adds a record with an event time (nanoseconds since the Unix epoch, UTC), as
    /// [`write_record`](Self::write_record) adds one without: the file gets a time block before
    /// each data block of timed records (spec 8.8), by which readers find the records of a
    /// time window ([`ReaderBuilder::window`](crate::ReaderBuilder::window)) without decoding
    /// the others. Times need not be sorted. A data block holds records with times or records
    /// without, so a record of the other kind closes the open block first; so does a time
    /// further than `i64::MAX` nanoseconds (292 years) from another of the block's, and a
    /// record past the most a time block may describe (a tenth of the maximum body size).
    ///
    /// ```
    /// let mut writer = cobsfile::Writer::new(Vec::new())?;
    /// writer.write_record_at(b"boot", 1_700_000_000_000_000_000)?;
    /// writer.write_record_at(b"late", 1_699_999_999_000_000_000)?;
    /// let file = writer.finish()?;
    ///
    /// let mut reader = cobsfile::ReaderBuilder::new().from_slice(&file);
    /// assert_eq!(reader.next_record().unwrap()?, b"boot");
    /// assert_eq!(reader.record_time(), Some(1_700_000_000_000_000_000));
    /// assert_eq!(reader.next_record().unwrap()?, b"late");
    /// assert_eq!(reader.record_time(), Some(1_699_999_999_000_000_000));
    /// # Ok::<(), cobsfile::Error>(())
    /// ```
    pub fn write_record_at(&mut self, record: &[u8], time: i64) -> Result<()> {
        self.take_record(record, Some(time))
    }

    /// [`write_record`](Self::write_record) with the record's time, if it has one.
    fn take_record(&mut self, record: &[u8], time: Option<i64>) -> Result<()> {
        let len = record.len();
        let max = self.max_record_len();
        if len > max {
            return Err(Error::RecordTooLarge { len, max });
        }
        // A data block's records all have times or none do, their times fit one span, and
        // their time block stays within the maximum body size (spec 10).
        if self.count > 0 {
            let fits = match (time, self.span) {
                (None, None) => true,
                (Some(t), Some(open)) => {
                    TimeSpan::of(&[open.min, open.max, t]).is_some()
                        && self.times.len() < time::max_timed_records(self.options.max_body_size)
                }
                _ => false,
            };
            if !fits {
                self.close_block()?;
            }
        }
        let framed = varint::encoded_len(len as i64) + len;
        // The body with this record: codec, count, records and CRC. It must not exceed the
        // maximum block size even when the target allows more.
        let mut body =
            ENVELOPE_LEN + varint::encoded_len(self.count as i64 + 1) + self.pending + framed;
        if time.is_some() && self.options.atomic_limit.is_some() {
            // The time block goes in the same write: room for it as for more records.
            body += time_frame_bound(self.count + 1);
        }
        if self.count > 0
            && (self.pending + framed > self.block_target || body > self.options.max_body_size)
        {
            self.close_block()?;
        }
        match &mut self.data {
            Some(data) => data.push(record),
            None => block::put_bytes(record, &mut self.records),
        }
        if let Some(t) = time {
            self.times.push(t);
            self.span = Some(match self.span {
                Some(open) => TimeSpan {
                    min: open.min.min(t),
                    max: open.max.max(t),
                },
                None => TimeSpan { min: t, max: t },
            });
        }
        self.count += 1;
        self.pending += framed;
        if self.pending >= self.block_target {
            self.close_block()?;
        }
        Ok(())
    }

    /// Closes the open data block, then writes a metadata block holding `entries`.
    pub fn write_metadata<K, V>(&mut self, entries: impl IntoIterator<Item = (K, V)>) -> Result<()>
    where
        K: AsRef<str>,
        V: AsRef<[u8]>,
    {
        self.close_block()?;
        let mut payload = Vec::new();
        block::metadata_payload(entries, &mut payload)?;
        if payload.len() + ENVELOPE_LEN > self.options.max_body_size {
            return Err(Error::InvalidMetadata(format!(
                "{} bytes of metadata exceed the maximum body size",
                payload.len()
            )));
        }
        self.write_block(types::METADATA, &payload)?;
        self.seal_if_due()
    }

    /// Closes the open data block, then writes a block of a type this format version does not
    /// define, holding `payload` as is. Readers of this version skip such blocks and report
    /// them. Negative type ids are left to applications; positive ids above the defined ones
    /// are reserved for future versions (see spec/FORMAT.md). Defined types are refused, and
    /// 10, which an index gives its gap entries (spec 8.5).
    pub fn write_raw_block(&mut self, type_id: i64, payload: &[u8]) -> Result<()> {
        if !matches!(BlockType::from_type(type_id), BlockType::Unknown(id) if id != 0 && id != types::GAP)
        {
            return Err(Error::InvalidBlockType(type_id));
        }
        if payload.len() + ENVELOPE_LEN > self.options.max_body_size {
            return Err(Error::RecordTooLarge {
                len: payload.len(),
                max: self.options.max_body_size.saturating_sub(ENVELOPE_LEN),
            });
        }
        self.close_block()?;
        self.write_block(type_id, payload)?;
        self.seal_if_due()
    }

    /// Writes one uncompressed block (behind the blocks in flight).
    fn write_block(&mut self, block_type: i64, payload: &[u8]) -> Result<()> {
        if let Some(encoders) = &mut self.encoders {
            let inner = self
                .inner
                .as_mut()
                .expect("inner writer present until finish");
            return encoders.write_block(block_type, payload, inner, &mut self.index);
        }
        let start = block::encode(block_type, payload, None, &mut self.out)?;
        self.write_out(start, 0)
    }

    /// Closes the open data block, writes every block in flight, and flushes the inner
    /// writer.
    pub fn flush(&mut self) -> Result<()> {
        self.close_block()?;
        self.drain()?;
        self.inner_mut().flush()?;
        Ok(())
    }

    /// Waits for the blocks in flight and writes them.
    fn drain(&mut self) -> Result<()> {
        match (&mut self.encoders, &mut self.inner) {
            (Some(encoders), Some(inner)) => encoders.drain(inner, &mut self.index),
            _ => Ok(()),
        }
    }

    /// Blocks closed and not yet written (tests of the bound).
    #[cfg(test)]
    pub(crate) fn blocks_in_flight(&self) -> usize {
        self.encoders.as_ref().map_or(0, Encoders::in_flight)
    }

    /// Closes the open data block, writes the index block (see [`WriterBuilder::index`]) and
    /// then the end block, flushes, and returns the inner writer.
    ///
    /// The end block (spec 8.6), always the last block of a finished file, is what tells a
    /// finished file from one cut at a block boundary or left by a writer that stopped
    /// without finishing ([`Report::ending`](crate::Report::ending)): a writer dropped
    /// without `finish` writes its open block but no end block.
    ///
    /// Every file should end with it: its error is the one report of a failed write, which
    /// dropping the writer instead ignores (see [`Writer`]).
    pub fn finish(mut self) -> Result<W> {
        self.close_block()?;
        // The index lists the blocks as written: every block in flight first.
        self.drain()?;
        // The time index right before the index, which lists it (spec 8.9).
        if let Some(payload) = self.index.time_payload(self.options.max_body_size) {
            self.write_block(types::TIME_INDEX, &payload)?;
        }
        if let Some(payload) = self.index.payload(self.options.max_body_size) {
            self.index.disable();
            self.write_block(types::INDEX, &payload)?;
        }
        // The last seal covers every block but the end block (spec 8.10).
        if (self.index.sealer.as_ref()).is_some_and(|s| crate::seal::lock(s).pending() > 0) {
            self.write_seal()?;
        }
        self.write_block(types::END, &[])?;
        self.flush()?;
        Ok(self
            .inner
            .take()
            .expect("inner writer present until finish"))
    }

    /// The inner writer. With [`threads`](WriterBuilder::threads), blocks in flight have not
    /// reached it yet: [`flush`](Self::flush) first.
    pub fn get_ref(&self) -> &W {
        self.inner
            .as_ref()
            .expect("inner writer present until finish")
    }

    fn inner_mut(&mut self) -> &mut W {
        self.inner
            .as_mut()
            .expect("inner writer present until finish")
    }

    /// Encodes the time block of the open data block's records, if they have times, into
    /// `time_block`: returns where it starts there.
    fn close_times(&mut self) -> Result<Option<(usize, TimeSpan)>> {
        let Some(span) = self.span.take() else {
            return Ok(None);
        };
        self.time_payload.clear();
        time::encode_payload(&self.times, span, &mut self.time_payload);
        self.times.clear();
        if let (None, Compression::Zstd { level }) =
            (&self.time_compressor, self.options.compression)
        {
            self.time_compressor = Some(Compressor::new(level, None)?);
        }
        let start = block::encode(
            types::TIME,
            &self.time_payload,
            self.time_compressor.as_mut(),
            &mut self.time_block,
        )?;
        Ok(Some((start, span)))
    }

    /// Encodes the open data block, if it holds records, and writes it (after its time
    /// block, in the same write, if its records have times); then seals if that is due.
    fn close_block(&mut self) -> Result<()> {
        self.close_data_block()?;
        self.seal_if_due()
    }

    /// Writes a seal if the writer seals and one is due ([`WriterBuilder::seal_every`]).
    fn seal_if_due(&mut self) -> Result<()> {
        let (Some(sealing), Some(sealer)) = (&self.options.seal, &self.index.sealer) else {
            return Ok(());
        };
        let due = {
            let sealer = crate::seal::lock(sealer);
            sealer.pending_bytes() >= sealing.every
                || (sealer.pending() > 0
                    && sealing
                        .interval
                        .is_some_and(|interval| self.last_seal.elapsed() >= interval))
        };
        match due {
            true => self.write_seal(),
            false => Ok(()),
        }
    }

    /// Writes the seal of the blocks written since the last (behind the blocks in flight,
    /// which the next seal covers).
    fn write_seal(&mut self) -> Result<()> {
        let Some(sealer) = &self.index.sealer else {
            return Ok(());
        };
        let payload = crate::seal::lock(sealer).seal_now().to_bytes();
        self.last_seal = std::time::Instant::now();
        self.write_block(types::SEAL, &payload)
    }

    /// Writes every block it holds, then a seal of every block written since the last seal
    /// (none if there is none): a reader can then prove each of them authentic (spec 8.10).
    /// Does nothing more than [`flush`](Self::flush) for a writer that does not seal.
    pub fn seal(&mut self) -> Result<()> {
        self.close_data_block()?;
        self.drain()?;
        if (self.index.sealer.as_ref()).is_some_and(|s| crate::seal::lock(s).pending() > 0) {
            self.write_seal()?;
        }
        self.flush()
    }

    /// Encodes the open data block, if it holds records, and writes it (after its time
    /// block, in the same write, if its records have times).
    #[inline(never)]
    fn close_data_block(&mut self) -> Result<()> {
        if self.count == 0 {
            return Ok(());
        }
        let count = self.count;
        let time_start = self.close_times()?;
        let time_block = time_start.map(|(start, span)| (&self.time_block[start..], span));
        if let Some(data) = &mut self.data {
            (self.count, self.pending) = (0, 0);
            let start = data.finish(count)?;
            let inner = self
                .inner
                .as_mut()
                .expect("inner writer present until finish");
            let block = &data.output()[start..];
            return emit_with_times(
                inner,
                self.options.atomic_limit,
                &mut self.index,
                time_block,
                block,
                count,
                &mut self.pair,
            );
        }
        let mut count_field = [0; varint::MAX_LEN];
        let count_len = varint::encode(count as i64, &mut count_field);
        let payload_start = COUNT_ROOM - count_len;
        self.records[payload_start..COUNT_ROOM].copy_from_slice(&count_field[..count_len]);
        if let Some(encoders) = &mut self.encoders {
            let mut next = encoders.spare_payload();
            next.resize(COUNT_ROOM, 0);
            let payload = std::mem::replace(&mut self.records, next);
            (self.count, self.pending) = (0, 0);
            let inner = self
                .inner
                .as_mut()
                .expect("inner writer present until finish");
            let time_block = time_block.map(|(bytes, span)| (bytes.to_vec(), span));
            return encoders.write_data(
                payload,
                payload_start,
                count,
                time_block,
                inner,
                &mut self.index,
            );
        }
        let payload = &self.records[payload_start..];
        let start = block::encode(
            types::DATA,
            payload,
            self.compressor.as_mut(),
            &mut self.out,
        )?;
        (self.count, self.pending) = (0, 0);
        self.records.truncate(COUNT_ROOM);
        let inner = self
            .inner
            .as_mut()
            .expect("inner writer present until finish");
        emit_with_times(
            inner,
            self.options.atomic_limit,
            &mut self.index,
            time_block,
            &self.out[start..],
            count,
            &mut self.pair,
        )
    }

    /// Writes `out[start..]`, a block holding `items` records, in one `write_all`, and
    /// records it for the index.
    fn write_out(&mut self, start: usize, items: u64) -> Result<()> {
        let inner = self
            .inner
            .as_mut()
            .expect("inner writer present until finish");
        let block = &self.out[start..];
        emit(
            inner,
            self.options.atomic_limit,
            &mut self.index,
            block,
            items,
        )
    }
}

/// The most bytes the time block of `n` records takes, framed (spec 8.8: three varints and
/// one per record, each at most 10 bytes; the envelope; COBS; type, length and sync byte).
fn time_frame_bound(n: u64) -> usize {
    let body = (n as usize + 3) * varint::MAX_LEN + ENVELOPE_LEN;
    2 * varint::MAX_LEN + body + body / 254 + 2
}

impl<W: Write> Drop for Writer<W> {
    /// Writes the open data block and the blocks in flight if `finish` was not called, but no
    /// index and no end block: the file is then unfinished
    /// ([`Ending::Unfinished`](crate::Ending::Unfinished)). Errors are ignored here: call
    /// `finish` or `flush` to see them.
    fn drop(&mut self) {
        if self.inner.is_some() && !std::thread::panicking() {
            let _ = self.close_block();
            while self.drain().is_err() {}
        }
    }
}
