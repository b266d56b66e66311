//! Worker threads that encode blocks for a [`Writer`](crate::Writer) and decode blocks for a
//! [`Reader`](crate::Reader), with results taken back in file order.
//!
//! Both sides use the same [`Pool`]: `n` worker threads, each with its own state (a zstd
//! context created once, when the pool starts), pulling jobs from one shared bounded channel
//! in the order they were sent, so an idle worker always takes the next job, whichever worker
//! is slow. Each job gets a sequence number; results come back on one channel in any order,
//! and the thread that sent the jobs takes them in sequence order, holding those that arrive
//! early aside.
//!
//! A reader's pool has `n - 1` workers, and the reader's thread is the `n`-th: while the
//! result it needs is not back, it takes the next job from the queue and runs it on its own
//! state, rather than sleep. Its work between two blocks (handing out records) is small, so a
//! reader that only waited would leave a core idle, and be woken for every block: on two
//! cores, that made 2 threads read uncompressed files slower than 1 (BENCHMARKS.md, "Threads:
//! n - 1 workers and the reader's thread"). Reading a block's records touches only their
//! ranges, which the decoding keeps ([`Scratch::records`](crate::block::Scratch::records)),
//! not the block a worker decoded. A writer's thread makes the records, so its pool has `n`
//! workers.
//!
//! At most [`DEPTH`] blocks per thread are in flight. When that many are, the submitting
//! thread first takes the oldest result back (writing it, or handing it to the reader's
//! caller). Buffers travel inside the jobs and come back with the results to free lists, so a
//! steady state allocates nothing per record and nothing per block.
//!
//! Dropping a pool closes the job channel and joins the threads: a worker finishes the job it
//! holds, if any, and exits, so a drop waits for at most one block per worker. A worker that
//! panics (a bug) sends its panic back, and it is resumed on the thread that takes results.

use std::collections::VecDeque;
use std::fmt;
use std::io::{self, Write};
use std::ops::Range;
use std::panic::{self, AssertUnwindSafe};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};

use crate::block::{self, types, BlockType, Body, Place, Scratch};
use crate::codec::{Compression, Compressor, Decompressor, Dictionary};
use crate::decoder::{decode_block, BlockInfo, Decoder, Event, Input, Step};
use crate::error::{Cause, Result};
use crate::frame::{self, Check, Frame};
use crate::index::IndexBuilder;
use crate::limits::Limits;
use crate::source::Shared;
use memchr::memchr;

/// Blocks in flight per worker thread.
pub(crate) const DEPTH: usize = 2;

/// Locks `mutex`, ignoring poisoning: the data behind it stays consistent (a receiver, a list
/// only ever appended to).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A job's result, or the panic of the worker that ran it.
type Outcome<D> = thread::Result<D>;

/// The calling thread's work in a pool it takes part in: `work` on its own state.
type LocalWork<J, D> = Box<dyn FnMut(J) -> D + Send>;

/// Worker threads pulling jobs from one queue, and perhaps the calling thread too; see the
/// module documentation.
pub(crate) struct Pool<J, D> {
    /// `None` once the pool is being dropped, which ends the workers' loops.
    jobs: Option<SyncSender<(u64, J)>>,
    /// The queue's receiving end, shared by the workers (and the calling thread).
    queue: Arc<Mutex<Receiver<(u64, J)>>>,
    /// The calling thread's work, when it takes jobs from the queue while it waits for a
    /// result. Behind a mutex only for `Sync`, as `done`.
    local: Option<Mutex<LocalWork<J, D>>>,
    /// Behind a mutex only so that the pool stays `Sync` like the rest of the reader and
    /// writer; always reached through `get_mut`, never locked.
    done: Mutex<Receiver<(u64, Outcome<D>)>>,
    handles: Vec<JoinHandle<()>>,
    /// The sequence number of the next job.
    next: u64,
    /// Results that came back before the ones sent earlier were asked for.
    early: Vec<(u64, D)>,
}

impl<J: Send + 'static, D: Send + 'static> Pool<J, D> {
    /// Starts one thread per state, named `name-i`, but for the last state when `local` (and
    /// there are two or more): the calling thread works on that one itself, taking jobs from
    /// the queue while it waits for a result (see [`recv`](Self::recv)). Each worker takes the
    /// next job from the shared queue, runs `work` on its state and the job, and sends the
    /// result back. At most `in_flight` jobs may be sent and not yet received: sending then
    /// never blocks.
    fn spawn<S: Send + 'static>(
        name: &str,
        mut states: Vec<S>,
        in_flight: usize,
        work: fn(&mut S, J) -> D,
        local: bool,
    ) -> io::Result<Self> {
        let (job_tx, job_rx) = sync_channel::<(u64, J)>(in_flight);
        let (done_tx, done_rx) = sync_channel::<(u64, Outcome<D>)>(in_flight);
        let job_rx = Arc::new(Mutex::new(job_rx));
        let local = (local && states.len() > 1)
            .then(|| states.pop())
            .flatten()
            .map(|mut state| {
                let work: LocalWork<J, D> = Box::new(move |job| work(&mut state, job));
                Mutex::new(work)
            });
        let mut pool = Pool {
            jobs: Some(job_tx),
            queue: Arc::clone(&job_rx),
            local,
            done: Mutex::new(done_rx),
            handles: Vec::with_capacity(states.len()),
            next: 0,
            early: Vec::with_capacity(in_flight),
        };
        for (i, mut state) in states.into_iter().enumerate() {
            let (jobs, done) = (Arc::clone(&job_rx), done_tx.clone());
            let handle =
                thread::Builder::new()
                    .name(format!("{name}-{i}"))
                    .spawn(move || loop {
                        // The lock is held while waiting, so the waiting workers queue on it.
                        let Ok((seq, job)) = lock(&jobs).recv() else {
                            return;
                        };
                        let outcome =
                            panic::catch_unwind(AssertUnwindSafe(|| work(&mut state, job)));
                        let panicked = outcome.is_err();
                        if done.send((seq, outcome)).is_err() || panicked {
                            return;
                        }
                    })?;
            // On an early return the workers started so far are joined by `Drop`.
            pool.handles.push(handle);
        }
        Ok(pool)
    }

    /// Queues `job` and returns its sequence number.
    fn send(&mut self, job: J) -> u64 {
        let seq = self.next;
        self.next += 1;
        let jobs = self.jobs.as_ref().expect("pool not dropped");
        // The workers hold the receiver until the pool is dropped.
        jobs.send((seq, job)).expect("workers running");
        seq
    }

    /// The result of the job `seq`, waiting for it if need be. Resumes the panic of a worker
    /// that panicked, as soon as it is received.
    ///
    /// When the calling thread takes part, it runs the next queued job while the result is
    /// not back, rather than sleep until it is: on as many cores as threads, a thread that
    /// only hands out results would leave its core idle, and waking it for each result costs
    /// more than the decoding of an uncompressed block.
    fn recv(&mut self, seq: u64) -> D {
        loop {
            if let Some(i) = self.early.iter().position(|(s, _)| *s == seq) {
                return self.early.swap_remove(i).1;
            }
            let done = self.done.get_mut().unwrap_or_else(|p| p.into_inner());
            // Taking part, the calling thread takes a result that is back, or else runs the
            // next queued job (a worker waiting for one holds the queue's lock: then it is
            // empty), or else waits like a thread that does not take part.
            let ready = self.local.as_mut().and_then(|work| {
                done.try_recv().ok().or_else(|| {
                    let (s, job) = self.queue.try_lock().ok()?.try_recv().ok()?;
                    let work = work.get_mut().unwrap_or_else(|p| p.into_inner());
                    Some((s, Ok(work(job))))
                })
            });
            let received = match ready {
                Some(received) => received,
                None => done
                    .recv()
                    .unwrap_or_else(|_| panic!("every cobsfile worker thread has exited")),
            };
            match received {
                (s, Ok(result)) if s == seq => return result,
                (s, Ok(result)) => self.early.push((s, result)),
                (_, Err(panic)) => panic::resume_unwind(panic),
            }
        }
    }

    /// The number of threads that run jobs (the calling thread included when it runs some).
    fn len(&self) -> usize {
        self.handles.len() + usize::from(self.local.is_some())
    }
}

impl<J, D> Drop for Pool<J, D> {
    fn drop(&mut self) {
        self.jobs = None;
        for handle in self.handles.drain(..) {
            // A worker that panicked sent its panic back already; do not panic in drop.
            let _ = handle.join();
        }
    }
}

impl<J, D> fmt::Debug for Pool<J, D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("threads", &self.handles.len())
            .finish_non_exhaustive()
    }
}

// ---------------------------------------------------------------------------------------------
// Writing.

/// A data block to encode, and then the encoded block.
struct EncodeJob {
    /// The data block's payload at `payload[start..]`.
    payload: Vec<u8>,
    start: usize,
    /// The encoded block, at `out[result?..]`.
    out: Vec<u8>,
    result: Result<usize>,
}

/// A block on its way to the inner writer.
#[derive(Debug)]
enum Slot {
    /// A data block sent to the workers: the job's sequence number and the block's record
    /// count.
    Worker(u64, u64),
    /// A block encoded on the writer's thread (metadata, dictionary, raw), at `out[start..]`.
    Ready { out: Vec<u8>, start: usize },
}

/// Encodes a data block with the worker's compressor.
fn encode(compressor: &mut Option<Compressor>, mut job: EncodeJob) -> EncodeJob {
    job.result = block::encode(
        types::DATA,
        &job.payload[job.start..],
        compressor.as_mut(),
        &mut job.out,
    );
    job
}

/// The worker threads of a [`Writer`](crate::Writer) built with
/// [`threads`](crate::WriterBuilder::threads), and the blocks in flight, in file order.
pub(crate) struct Encoders {
    pool: Pool<EncodeJob, EncodeJob>,
    /// Blocks not yet written, oldest first.
    queue: VecDeque<Slot>,
    /// The most blocks in `queue`.
    limit: usize,
    /// Payload buffers back from the workers.
    free_payloads: Vec<Vec<u8>>,
    /// Encoded-block buffers back from the inner writer.
    free_outs: Vec<Vec<u8>>,
}

impl fmt::Debug for Encoders {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Encoders")
            .field("threads", &self.pool.len())
            .field("in_flight", &self.queue.len())
            .finish_non_exhaustive()
    }
}

impl Encoders {
    /// Starts `threads` workers, each with its own compressor (and its own prepared copy of
    /// the dictionary) when `compression` asks for one.
    pub fn new(
        threads: usize,
        compression: Compression,
        dictionary: Option<&Dictionary>,
    ) -> Result<Self> {
        let mut states = Vec::with_capacity(threads);
        for _ in 0..threads {
            states.push(match compression {
                Compression::None => None,
                Compression::Zstd { level } => Some(Compressor::new(level, dictionary)?),
            });
        }
        let limit = DEPTH * threads;
        Ok(Encoders {
            pool: Pool::spawn("cobsfile-encode", states, limit, encode, false)?,
            queue: VecDeque::with_capacity(limit),
            limit,
            free_payloads: Vec::with_capacity(limit + 1),
            free_outs: Vec::with_capacity(limit),
        })
    }

    /// An empty payload buffer, recycled when possible.
    pub fn spare_payload(&mut self) -> Vec<u8> {
        let mut buffer = self.free_payloads.pop().unwrap_or_default();
        buffer.clear();
        buffer
    }

    /// Queues the data block `payload[start..]`, holding `items` records, for a worker to
    /// encode. If the queue was full, first writes the oldest block to `inner` (recording it
    /// in `index`), and returns the error that failed (the new block is queued either way).
    pub fn write_data<W: Write>(
        &mut self,
        payload: Vec<u8>,
        start: usize,
        items: u64,
        inner: &mut W,
        index: &mut IndexBuilder,
    ) -> Result<()> {
        let room = self.make_room(inner, index);
        let out = self.free_outs.pop().unwrap_or_default();
        let seq = self.pool.send(EncodeJob {
            payload,
            start,
            out,
            result: Ok(0),
        });
        self.queue.push_back(Slot::Worker(seq, items));
        room
    }

    /// Encodes an uncompressed block of type `block_type` on this thread and queues it behind the
    /// blocks in flight, so blocks reach `inner` in the order they were written.
    pub fn write_block<W: Write>(
        &mut self,
        block_type: i64,
        payload: &[u8],
        inner: &mut W,
        index: &mut IndexBuilder,
    ) -> Result<()> {
        let mut out = self.free_outs.pop().unwrap_or_default();
        let start = match block::encode(block_type, payload, None, &mut out) {
            Ok(start) => start,
            Err(e) => {
                self.free_outs.push(out);
                return Err(e);
            }
        };
        let room = self.make_room(inner, index);
        self.queue.push_back(Slot::Ready { out, start });
        room
    }

    /// Writes every block in flight, in order; stops at the first error (the blocks after it
    /// stay queued).
    pub fn drain<W: Write>(&mut self, inner: &mut W, index: &mut IndexBuilder) -> Result<()> {
        while !self.queue.is_empty() {
            self.write_oldest(inner, index)?;
        }
        Ok(())
    }

    /// Blocks queued and not yet written.
    #[cfg(test)]
    pub fn in_flight(&self) -> usize {
        self.queue.len()
    }

    /// Writes the oldest block if the queue is full.
    fn make_room<W: Write>(&mut self, inner: &mut W, index: &mut IndexBuilder) -> Result<()> {
        if self.queue.len() >= self.limit {
            self.write_oldest(inner, index)
        } else {
            Ok(())
        }
    }

    /// Waits for the oldest block, writes it in one `write_all` and records it in `index`.
    /// A block whose encoding or writing failed is lost; the error is returned (and the index
    /// given up if the write failed).
    fn write_oldest<W: Write>(&mut self, inner: &mut W, index: &mut IndexBuilder) -> Result<()> {
        let Some(slot) = self.queue.pop_front() else {
            return Ok(());
        };
        let (out, start, items) = match slot {
            Slot::Ready { out, start } => (out, Ok(start), 0),
            Slot::Worker(seq, items) => {
                let job = self.pool.recv(seq);
                self.free_payloads.push(job.payload);
                (job.out, job.result, items)
            }
        };
        let written = start.and_then(|start| match inner.write_all(&out[start..]) {
            Ok(()) => {
                index.push(&out[start..], items);
                Ok(())
            }
            Err(e) => {
                index.disable();
                Err(e.into())
            }
        });
        self.free_outs.push(out);
        written
    }
}

// ---------------------------------------------------------------------------------------------
// Reading.

/// A frame to decode, and then the decoded block.
#[derive(Debug)]
pub(crate) struct DecodeJob {
    /// The input, when the reader shares it (a mapped file): the frame is `span` of it.
    shared: Option<Shared>,
    span: Range<usize>,
    /// Otherwise the frame's bytes from its type field to the end of its body (the length
    /// field in between is not needed but costs nothing to copy along).
    encoded: Vec<u8>,
    /// In the frame's bytes (`span` of `shared`, or `encoded`).
    type_field: Range<usize>,
    body: Range<usize>,
    block_type: BlockType,
    place: Place,
    /// The frame's size after its opening sync byte.
    size: u64,
    /// How many of the dictionaries found in the file so far (in the pool's registry) the
    /// block may use: those before it.
    known: usize,
    /// Absolute offset of the frame's closing sync byte.
    end: u64,
    /// Where the decoded payload is.
    scratch: Scratch,
    /// Filled in by the decoding (left `None` for a frame with a stray 0x00).
    result: Option<Result<(BlockInfo, Body), Cause>>,
    /// The absolute offset of a 0x00 the worker found in the body, which the reader's scan
    /// did not read ([`Check::Deferred`]): the frame is damaged, and the scan past it wrong.
    stray: Option<u64>,
}

impl DecodeJob {
    /// The absolute offset of the frame's opening sync byte.
    fn offset(&self) -> u64 {
        self.place.offset
    }
}

/// A decoding worker's state.
struct DecodeState {
    max_body_size: usize,
    decompressor: Decompressor,
    /// The dictionaries found in the file, in file order, shared with the reader's thread.
    registry: Arc<Mutex<Vec<Dictionary>>>,
    /// How many of them `decompressor` holds. A worker takes jobs in file order, so this never
    /// exceeds what the job at hand may use.
    added: usize,
}

/// Decodes a job (boxed, so that it moves through channels as a pointer; the boxes are
/// recycled) after making the dictionaries before its block available.
fn decode(state: &mut DecodeState, mut job: Box<DecodeJob>) -> Box<DecodeJob> {
    if state.added < job.known {
        for dictionary in &lock(&state.registry)[state.added..job.known] {
            // Kept: the reader's decoder kept it, under the same limits, before registering it.
            let _ = state.decompressor.add(dictionary);
        }
        state.added = job.known;
    }
    let DecodeJob {
        shared,
        span,
        encoded,
        type_field,
        body,
        block_type,
        place,
        size,
        scratch,
        ..
    } = &mut *job;
    let frame = match shared {
        Some(shared) => &shared.bytes()[span.clone()],
        None => &encoded[..],
    };
    // The check the reader's scan deferred: the body holds no 0x00 (see `frame::verify`).
    // A frame with one is not decoded: the reader's thread reports it.
    let stray = memchr(0, &frame[body.clone()]).map(|i| place.body_offset + i as u64);
    let result = match stray {
        Some(_) => None,
        None => Some(decode_block(
            &frame[type_field.clone()],
            *block_type,
            &frame[body.clone()],
            *place,
            *size,
            state.max_body_size,
            scratch,
            &mut state.decompressor,
        )),
    };
    job.stray = stray;
    job.result = result;
    job
}

/// A decompressor within `limits` holding `dictionaries` (given to the reader, `None`, or
/// kept from the block at an offset), added in order as the reader's decoder added them.
fn decompressor_with(limits: &Limits, dictionaries: &[(Dictionary, Option<u64>)]) -> Decompressor {
    let mut decompressor = Decompressor::new(limits);
    for (dictionary, offset) in dictionaries {
        // A dictionary zstd cannot load stays unavailable: its blocks are reported.
        let _ = match offset {
            None => decompressor.give(dictionary),
            Some(_) => decompressor.add(dictionary),
        };
    }
    decompressor
}

/// What the decoder found ahead of the caller, in file order.
#[derive(Debug)]
enum Entry {
    /// Damage from the absolute offset `start`; the scan went on at `resume`.
    Damage {
        start: u64,
        cause: Cause,
        resume: u64,
    },
    /// A frame sent to the workers: the job's sequence number.
    Worker(u64),
    /// A frame decoded on the reader's thread (a dictionary block).
    Ready(Box<DecodeJob>),
    /// The end of the input at the absolute offset `end`, reached at `resume`.
    End { end: u64, resume: u64 },
}

/// The worker threads of a [`Reader`](crate::Reader) built with
/// [`threads`](crate::ReaderBuilder::threads), and the frames its decoder scanned ahead of
/// the caller.
///
/// The reader's thread scans frames in order with the reader's [`Decoder`] and hands each one
/// to the workers, up to a fixed number of frames ahead: as a range of the input when the
/// reader shares it (a mapped file, kept alive by the handle each job holds), or else copied
/// out of the source (workers, which outlive any borrow, never borrow it). The scan skips each
/// body by its length ([`Check::Deferred`]); the worker then checks that the body holds no
/// 0x00, which on one thread the scan does, so that the reader's thread does not read every
/// byte. A worker that finds one reports the frame as the
/// full check would have, and everything scanned past it is dropped and scanned again from
/// that 0x00, where a scan on one thread goes on.
///
/// Dictionary blocks are decoded by the decoder itself as they are scanned, which keeps their
/// dictionaries as on one thread; each one kept joins a registry, and each later job carries
/// the number of registered dictionaries, so a worker knows exactly the dictionaries the
/// decoder knew at that block. A dictionary block waits until no frame before it is with the
/// workers: one of them may turn out damaged, and a scan from its damage may never meet the
/// dictionary block. The decoder then settles frames and damage in order, merging damage and
/// checking versions exactly as on one thread.
pub(crate) struct Decoders {
    pool: Pool<Box<DecodeJob>, Box<DecodeJob>>,
    queue: VecDeque<Entry>,
    /// Frames (`Worker` and `Ready` entries) in `queue`.
    frames: usize,
    /// The most frames in `queue`.
    limit: usize,
    /// Buffers back from the reader, boxes kept so that recycling allocates nothing.
    #[allow(clippy::vec_box)]
    free: Vec<Box<DecodeJob>>,
    /// The dictionaries found in the file, shared with the workers.
    registry: Arc<Mutex<Vec<Dictionary>>>,
    /// The length of `registry`.
    registered: usize,
    /// How many of the decoder's dictionaries the workers know (at start, or registered).
    known: usize,
    /// Whether the end of the input is queued: nothing more to scan.
    scanned: bool,
    /// The absolute offset at which a sequential reader would scan next, having returned
    /// what was taken so far.
    consumed: u64,
    /// The input, for workers to read frames from in place (a mapped file); `None`: frames
    /// are copied into the jobs.
    shared: Option<Shared>,
}

impl Drop for Decoders {
    /// Leaves the buffers of the jobs that are back to later readers.
    fn drop(&mut self) {
        let ready = self.queue.drain(..).filter_map(|entry| match entry {
            Entry::Ready(job) => Some(job),
            _ => None,
        });
        for job in self.free.drain(..).chain(ready) {
            job.scratch.release();
        }
    }
}

impl fmt::Debug for Decoders {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Decoders")
            .field("threads", &self.pool.len())
            .field("frames_in_flight", &self.frames)
            .finish_non_exhaustive()
    }
}

impl Decoders {
    /// Starts `threads` workers that know the dictionaries `decoder` knows; the scan starts at
    /// the absolute offset `at`.
    pub fn new(
        threads: usize,
        decoder: &Decoder,
        at: u64,
        shared: Option<Shared>,
    ) -> io::Result<Self> {
        let limits = decoder.limits();
        let max_body_size = limits.body_limit();
        let registry = Arc::new(Mutex::new(Vec::new()));
        let states = (0..threads)
            .map(|_| DecodeState {
                max_body_size,
                decompressor: decompressor_with(limits, &decoder.dictionaries),
                registry: Arc::clone(&registry),
                added: 0,
            })
            .collect();
        let limit = DEPTH * threads;
        Ok(Decoders {
            pool: Pool::spawn("cobsfile-decode", states, limit, decode, true)?,
            queue: VecDeque::with_capacity(2 * limit + 2),
            frames: 0,
            limit,
            free: Vec::with_capacity(limit + 1),
            registry,
            registered: 0,
            known: decoder.dictionaries.len(),
            scanned: false,
            consumed: at,
            shared,
        })
    }

    /// Whether nothing is queued: the scan is where the caller is.
    pub fn is_idle(&self) -> bool {
        self.queue.is_empty()
    }

    /// Frames queued: being decoded or decoded and not yet taken.
    #[cfg(test)]
    pub fn frames_in_flight(&self) -> usize {
        self.frames
    }

    /// The absolute offset at which a sequential reader would scan next.
    pub fn consumed(&self) -> u64 {
        self.consumed
    }

    /// The next step of `decoder` over `input` (a whole slice): scans ahead until enough
    /// frames are in flight, then settles what comes back in order. `None` at the end.
    pub fn next(&mut self, decoder: &mut Decoder, input: Input<'_>) -> Option<Step> {
        if self.is_idle() {
            // The caller may have read on its own thread while nothing was queued.
            self.consumed = decoder.position();
        }
        loop {
            while !self.scanned && self.frames < self.limit {
                match decoder.next_frame(input, Check::Deferred) {
                    Event::Damage { start, cause } => {
                        self.push_damage(start, cause, decoder.position())
                    }
                    // A dictionary block waits for the frames before it: it is found again
                    // once the next entry is settled.
                    Event::Frame(f)
                        if BlockType::from_type(f.block_type) == BlockType::Dictionary
                            && self.queue.iter().any(|e| matches!(e, Entry::Worker(_))) =>
                    {
                        decoder.back_to(input.offset + f.start as u64);
                        break;
                    }
                    Event::Frame(f) => self.push_frame(decoder, input, &f),
                    Event::End { end } => self.push_end(end, decoder.position()),
                    // A slice holds the whole input: nothing more is coming.
                    Event::NeedInput => {
                        let end = input.offset + input.bytes.len() as u64;
                        self.push_end(end, decoder.position());
                    }
                }
            }
            let step = match self.queue.pop_front()? {
                Entry::Damage {
                    start,
                    cause,
                    resume,
                } => {
                    self.consumed = resume;
                    decoder.note_damage(start, cause);
                    None
                }
                Entry::End { end, resume } => {
                    self.consumed = resume;
                    return decoder.end_at(end);
                }
                Entry::Worker(seq) => {
                    let job = self.pool.recv(seq);
                    if let Some(found) = job.stray {
                        self.rescan(decoder, job, found);
                        continue;
                    }
                    Some(job)
                }
                Entry::Ready(job) => Some(job),
            };
            let Some(mut job) = step else { continue };
            self.frames -= 1;
            self.consumed = job.end;
            let decoded = job.result.take().expect("a taken frame is decoded");
            decoder.swap_scratch(&mut job.scratch);
            let settled = decoder.settle_decoded(job.offset(), decoded);
            self.recycle(job);
            if settled.is_some() {
                return settled;
            }
        }
    }

    /// Settles the frame of `job`, in which a worker found a 0x00 at the absolute offset
    /// `found`, as damage, drops everything scanned past it, and goes back to `found`: where a
    /// full check resumes.
    fn rescan(&mut self, decoder: &mut Decoder, job: Box<DecodeJob>, found: u64) {
        let (start, cause) = frame::stray_zero_damage(job.offset(), job.end, found);
        decoder.note_damage(start, cause);
        self.recycle(job);
        while let Some(entry) = self.queue.pop_front() {
            match entry {
                // Waited for: the job's buffers come back, and no worker is left behind.
                Entry::Worker(seq) => {
                    let job = self.pool.recv(seq);
                    self.recycle(job);
                }
                Entry::Ready(job) => {
                    // Its dictionary would be known to the workers, and perhaps never met by
                    // a scan from `found`.
                    debug_assert!(false, "a dictionary block scanned past a frame still out");
                    self.recycle(job)
                }
                Entry::Damage { .. } | Entry::End { .. } => {}
            }
        }
        self.frames = 0;
        self.scanned = false;
        self.consumed = found;
        decoder.rewind(found);
    }

    /// Keeps a job's buffers for the next frame (and lets go of the input).
    fn recycle(&mut self, mut job: Box<DecodeJob>) {
        job.shared = None;
        self.free.push(job);
    }

    /// Queues damage from the absolute offset `start`; the scan goes on at `resume`. Damage
    /// right after damage is merged here already (the first start and cause stand).
    fn push_damage(&mut self, start: u64, cause: Cause, resume: u64) {
        if let Some(Entry::Damage { resume: last, .. }) = self.queue.back_mut() {
            *last = resume;
            return;
        }
        self.queue.push_back(Entry::Damage {
            start,
            cause,
            resume,
        });
    }

    /// Queues the end of the input.
    fn push_end(&mut self, end: u64, resume: u64) {
        self.scanned = true;
        self.queue.push_back(Entry::End { end, resume });
    }

    /// Queues the frame `f` of `input`: sent to a worker, or decoded here by `decoder` if it
    /// is a dictionary block (whose dictionary the decoder keeps, and the workers learn).
    fn push_frame(&mut self, decoder: &mut Decoder, input: Input<'_>, f: &Frame) {
        let mut job = self.free.pop().unwrap_or_else(|| {
            Box::new(DecodeJob {
                shared: None,
                span: 0..0,
                encoded: Vec::new(),
                type_field: 0..0,
                body: 0..0,
                block_type: BlockType::Data,
                place: Place {
                    offset: 0,
                    body_offset: 0,
                },
                size: 0,
                known: 0,
                end: 0,
                scratch: Scratch::reused(),
                result: None,
                stray: None,
            })
        });
        job.block_type = BlockType::from_type(f.block_type);
        job.place = Place {
            offset: input.offset + f.start as u64,
            body_offset: input.offset + f.body.start as u64,
        };
        job.size = (f.end - f.start) as u64;
        job.end = input.offset + f.end as u64;
        self.frames += 1;
        if job.block_type == BlockType::Dictionary {
            job.result = Some(decoder.decode_frame(input, f, Some(&mut job.scratch)));
            let new = &decoder.dictionaries[self.known..];
            if !new.is_empty() {
                let mut registry = lock(&self.registry);
                registry.extend(new.iter().map(|(d, _)| d.clone()));
                self.registered = registry.len();
                self.known = decoder.dictionaries.len();
            }
            self.queue.push_back(Entry::Ready(job));
            return;
        }
        let from = f.type_field.start;
        match &self.shared {
            // A slice's window is the whole input, from offset 0.
            Some(shared) => {
                job.shared = Some(Arc::clone(shared));
                job.span = from..f.body.end;
            }
            None => {
                job.encoded.clear();
                job.encoded
                    .extend_from_slice(&input.bytes[from..f.body.end]);
            }
        }
        job.type_field = 0..f.type_field.len();
        job.body = f.body.start - from..f.body.end - from;
        job.known = self.registered;
        job.result = None;
        let seq = self.pool.send(job);
        self.queue.push_back(Entry::Worker(seq));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ReaderBuilder, WriterBuilder};

    // The pools are `Send` and `Sync`, so readers and writers stay so.
    const _: fn() = || {
        fn check<T: Send + Sync>() {}
        check::<Encoders>();
        check::<Decoders>();
        check::<crate::Writer<Vec<u8>>>();
        check::<crate::SliceReader<'static>>();
    };

    /// A job's number and whether the calling thread ran it, after 1 ms.
    fn slow_on_workers(caller: &mut thread::ThreadId, job: u64) -> (u64, bool) {
        thread::sleep(std::time::Duration::from_millis(1));
        (job, thread::current().id() == *caller)
    }

    #[test]
    fn the_calling_thread_shares_the_jobs_and_results_keep_their_order() {
        let caller = thread::current().id();
        let mut pool =
            Pool::spawn("test", vec![caller; 2], 4, slow_on_workers, true).expect("threads");
        assert_eq!(pool.len(), 2);
        let (mut sent, mut results) = (0, Vec::new());
        while results.len() < 40 {
            while sent < 40 && sent - results.len() < 4 {
                pool.send(sent as u64);
                sent += 1;
            }
            results.push(pool.recv(results.len() as u64));
        }
        let order: Vec<u64> = results.iter().map(|&(job, _)| job).collect();
        assert_eq!(order, (0..40).collect::<Vec<_>>());
        // Each time the calling thread waits for a worker's job, it runs a queued one.
        assert!(results.iter().any(|&(_, local)| local));
        // A writer's pool leaves every job to its workers.
        let mut pool =
            Pool::spawn("test", vec![caller; 2], 4, slow_on_workers, false).expect("threads");
        assert_eq!(pool.len(), 2);
        let seqs: Vec<u64> = (0..4).map(|job| pool.send(job)).collect();
        assert!(seqs.into_iter().all(|seq| !pool.recv(seq).1));
    }

    fn file(blocks: usize) -> Vec<u8> {
        let mut writer = WriterBuilder::new()
            .block_target(100)
            .build(Vec::new())
            .unwrap();
        for i in 0..blocks {
            writer.write_record(&[b'a' + (i % 26) as u8; 100]).unwrap();
        }
        writer.finish().unwrap()
    }

    #[test]
    fn a_reader_keeps_a_bounded_number_of_frames_in_flight() {
        let file = file(200);
        for threads in [2, 3] {
            let mut reader = ReaderBuilder::new().threads(threads).from_slice(&file);
            let mut records = 0;
            while let Some(record) = reader.next_record() {
                record.unwrap();
                records += 1;
                let in_flight = reader.frames_in_flight();
                assert!(in_flight <= DEPTH * threads, "{in_flight} frames in flight");
                if records == 10 {
                    // Scanned ahead, refilled before the block being read was taken.
                    assert_eq!(in_flight, DEPTH * threads - 1);
                }
            }
            assert_eq!(records, 200);
        }
    }

    #[test]
    fn a_writer_keeps_a_bounded_number_of_blocks_in_flight() {
        let mut writer = WriterBuilder::new()
            .block_target(100)
            .threads(3)
            .build(Vec::new())
            .unwrap();
        let mut most = 0;
        for _ in 0..100 {
            writer.write_record(&[7; 100]).unwrap();
            most = most.max(writer.blocks_in_flight());
        }
        assert_eq!(most, DEPTH * 3);
        writer.flush().unwrap();
        assert_eq!(writer.blocks_in_flight(), 0);
    }

    #[test]
    fn buffers_are_recycled() {
        let mut encoders = Encoders::new(2, Compression::None, None).unwrap();
        let mut sink = Vec::new();
        let mut index = IndexBuilder::new(true);
        for _ in 0..50 {
            let mut payload = encoders.spare_payload();
            payload.extend_from_slice(&[0, 1, 1, b'x']);
            encoders
                .write_data(payload, 2, 1, &mut sink, &mut index)
                .unwrap();
            assert!(encoders.free_payloads.len() + encoders.queue.len() <= encoders.limit + 1);
        }
        encoders.drain(&mut sink, &mut index).unwrap();
        // Every buffer ever allocated is back in a free list.
        assert!(encoders.free_outs.len() <= encoders.limit);
        assert!(encoders.free_payloads.len() <= encoders.limit + 1);
        assert!(!encoders.free_outs.is_empty());
    }
}
