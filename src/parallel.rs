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
//! Dropping a pool closes the job channel and waits for the workers that hold a job: a worker
//! finishes the job it holds, if any, and leaves the pool, so a drop waits for at most one
//! block per worker, and not at all when every result was taken.
//! The threads are kept for the next pool, of a reader or a writer ([`Kept`]): starting and
//! ending a thread for every reader cost more than its blocks' hand-offs. A worker that panics
//! (a bug) sends its panic back, and it is resumed on the thread that takes results.

use std::collections::VecDeque;
use std::fmt;
use std::io::{self, Write};
use std::ops::Range;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::Duration;

use crate::block::{self, types, BlockType, Body, FrameCopy, Place, Scratch, Spares};
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
    /// One per worker: closed when the worker has left the pool (see [`Kept::run`]). Behind a
    /// mutex only for `Sync`, as `done`.
    finished: Mutex<Vec<Finished>>,
    /// How many workers there are.
    workers: usize,
    /// The sequence number of the next job.
    next: u64,
    /// How many results came back (taken or early).
    received: u64,
    /// Results that came back before the ones sent earlier were asked for.
    early: Vec<(u64, D)>,
}

impl<J: Send + 'static, D: Send + 'static> Pool<J, D> {
    /// Runs each state on a worker thread of `kept`, but the last one when
    /// `local` (and there are two or more): the calling thread works on that one itself,
    /// taking jobs from the queue while it waits for a result (see [`recv`](Self::recv)). Each worker takes the
    /// next job from the shared queue, runs `work` on its state and the job, and sends the
    /// result back. At most `in_flight` jobs may be sent and not yet received: sending then
    /// never blocks.
    fn spawn<S: Send + 'static>(
        kept: &Kept,
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
            finished: Mutex::new(Vec::with_capacity(states.len())),
            workers: states.len(),
            next: 0,
            received: 0,
            early: Vec::with_capacity(in_flight),
        };
        for mut state in states {
            let (jobs, done) = (Arc::clone(&job_rx), done_tx.clone());
            let finished = kept.run(move || loop {
                // The lock is held while waiting, so the waiting workers queue on it.
                let Ok((seq, job)) = lock(&jobs).recv() else {
                    return;
                };
                let outcome = panic::catch_unwind(AssertUnwindSafe(|| work(&mut state, job)));
                let panicked = outcome.is_err();
                if done.send((seq, outcome)).is_err() || panicked {
                    return;
                }
            })?;
            // On an early return the workers started so far are waited for by `Drop`.
            pool.finished
                .get_mut()
                .unwrap_or_else(|p| p.into_inner())
                .push(finished);
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
            self.received += 1;
            match received {
                (s, Ok(result)) if s == seq => return result,
                (s, Ok(result)) => self.early.push((s, result)),
                (_, Err(panic)) => panic::resume_unwind(panic),
            }
        }
    }

    /// The number of threads that run jobs (the calling thread included when it runs some).
    fn len(&self) -> usize {
        self.workers + usize::from(self.local.is_some())
    }
}

impl<J, D> Drop for Pool<J, D> {
    fn drop(&mut self) {
        self.jobs = None;
        // With every result back, no worker holds a job: they leave the pool as soon as they
        // see the queue closed, and are not waited for. Waiting would cost two wake-ups in
        // turn, a tenth of a millisecond on this project's 2-core machine, which on a 2-thread
        // read of 1 MB is as long as the read (BENCHMARKS.md, "Threads kept from reader to
        // reader").
        if self.received == self.next {
            return;
        }
        let finished = self.finished.get_mut().unwrap_or_else(|p| p.into_inner());
        for finished in finished.drain(..) {
            // Closed, never sent on, once the worker is out of the pool's loop, whether it
            // returned or panicked (a panic was sent back already; do not panic in drop).
            let _ = finished.recv();
        }
    }
}

impl<J, D> fmt::Debug for Pool<J, D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("threads", &self.workers)
            .finish_non_exhaustive()
    }
}

// ---------------------------------------------------------------------------------------------
// Threads kept from pool to pool.

/// What a kept thread runs next: a pool's worker loop, until that pool is dropped.
type Task = Box<dyn FnOnce() + Send>;

/// Closed (its sender dropped, nothing ever sent) when a task given to [`Kept::run`] has
/// returned or unwound.
type Finished = Receiver<()>;

/// A kept thread waiting for a task: its id, the process it belongs to, and the sending end of
/// its channel (dropped with the [`Kept`], which ends the thread's wait).
type Waiting = (u64, u32, SyncSender<Task>);

/// Threads that ran a pool's worker and wait for the next pool's. Starting a thread and ending
/// it cost more than decoding a 256 KiB block several times over: on this project's 2-core
/// machine, 0.27 ms to end one, about a tenth of a 2-thread read of 100 MB, as one reader
/// after another started and ended its worker (BENCHMARKS.md, "Threads kept from reader to
/// reader").
///
/// Kept by the options that start pools (a [`ReaderBuilder`](crate::ReaderBuilder) or
/// [`WriterBuilder`](crate::WriterBuilder)), shared by their clones, never by the process:
/// two libraries in one process, or two tests, do not see each other's threads. A waiting
/// thread holds only a weak handle: when the last options and pools holding a `Kept` are
/// dropped, its waiting threads end at once.
#[derive(Clone)]
pub(crate) struct Kept(Arc<KeptThreads>);

struct KeptThreads {
    waiting: Mutex<Vec<Waiting>>,
    /// Ids of the threads started so far.
    started: AtomicU64,
    /// The most threads kept waiting.
    most: usize,
    /// How long a kept thread waits for a task before it ends.
    wait: Duration,
}

impl Default for Kept {
    /// At most 16 threads kept, each for at most 10 s without work.
    fn default() -> Self {
        Kept::new(16, Duration::from_secs(10))
    }
}

impl fmt::Debug for Kept {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Kept")
            .field("waiting", &lock(&self.0.waiting).len())
            .finish_non_exhaustive()
    }
}

impl Kept {
    fn new(most: usize, wait: Duration) -> Self {
        Kept(Arc::new(KeptThreads {
            waiting: Mutex::new(Vec::new()),
            started: AtomicU64::new(0),
            most,
            wait,
        }))
    }

    /// Runs `task` on a thread that waits here, or on a new one (named `cobsfile-worker`: it
    /// may work for writers and readers in turn), which then waits here for the next.
    fn run(&self, task: impl FnOnce() + Send + 'static) -> io::Result<Finished> {
        let (finished_tx, finished) = sync_channel::<()>(0);
        let mut task: Task = Box::new(move || {
            let _finished = finished_tx;
            task();
        });
        let process = std::process::id();
        loop {
            let Some((_, owner, thread)) = lock(&self.0.waiting).pop() else {
                break;
            };
            // Threads of the parent process, if this is a child that `fork` made, are not
            // there to run anything; forgotten.
            if owner != process {
                continue;
            }
            // A kept thread leaves `waiting` itself before it ends (see `keep`), so one taken
            // from it is there to receive; `Err` would mean it ended all the same.
            match thread.send(task) {
                Ok(()) => return Ok(finished),
                Err(unsent) => task = unsent.0,
            }
        }
        let id = self.0.started.fetch_add(1, Ordering::Relaxed);
        let kept = Arc::downgrade(&self.0);
        thread::Builder::new()
            .name("cobsfile-worker".to_owned())
            .spawn(move || {
                let mut task = task;
                loop {
                    // `Finished` closes as the task returns, or unwinds (ending the thread).
                    task();
                    match Kept::keep(&kept, id) {
                        Some(next) => task = next,
                        None => return,
                    }
                }
            })?;
        Ok(finished)
    }

    /// Puts the thread `id` among the waiting ones of `kept` and waits for its next task:
    /// `None` if it is to end (enough wait already, none came in time, or the `Kept` is gone).
    fn keep(kept: &std::sync::Weak<KeptThreads>, id: u64) -> Option<Task> {
        let (tx, rx) = sync_channel::<Task>(1);
        let wait = {
            // Held only while the thread puts itself among the waiting: a waiting thread does
            // not keep its `Kept` alive.
            let kept = kept.upgrade()?;
            let mut waiting = lock(&kept.waiting);
            if waiting.len() >= kept.most {
                return None;
            }
            waiting.push((id, std::process::id(), tx));
            kept.wait
        };
        match rx.recv_timeout(wait) {
            Ok(task) => return Some(task),
            // The `Kept` was dropped, and the sending end with it.
            Err(RecvTimeoutError::Disconnected) => return None,
            Err(RecvTimeoutError::Timeout) => {}
        }
        let Some(kept) = kept.upgrade() else {
            // Dropped since: a task may have been sent before.
            return rx.try_recv().ok();
        };
        let mut waiting = lock(&kept.waiting);
        match waiting.iter().position(|&(i, ..)| i == id) {
            Some(at) => {
                waiting.swap_remove(at);
                None
            }
            // Taken from `waiting` while the wait timed out: its task is on the way.
            None => {
                drop(waiting);
                drop(kept);
                rx.recv().ok()
            }
        }
    }

    /// How many threads wait for a task.
    #[cfg(test)]
    fn waiting(&self) -> usize {
        lock(&self.0.waiting).len()
    }

    /// How many threads were started.
    #[cfg(test)]
    fn started(&self) -> u64 {
        self.0.started.load(Ordering::Relaxed)
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
        kept: &Kept,
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
            pool: Pool::spawn(kept, states, limit, encode, false)?,
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
    /// In the frame's bytes (`span` of `shared`, or the copy in `copy`).
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
    /// Where the frame is copied for the worker when the reader does not share its input.
    copy: FrameCopy,
    /// Where the decoded payload is: buffers of the thread that decodes it, taken from
    /// [`Homes`] then, and given back when the reader is done with them.
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
    /// This thread's number among the reader's decoding threads, from 1, and where its
    /// buffers wait for it.
    id: usize,
    homes: Arc<Homes>,
}

/// The buffers each decoding thread of a reader decoded into before, waiting to be decoded
/// into again by the same thread once the reader is done with them. Buffers that went to
/// whichever thread took the next job were written by one core, read, and written again by
/// the other, line by line through the caches: on this project's machine (two cores of an AMD
/// EPYC under KVM), 2-thread zstd reads then ran at 0.9-1.1x one thread for an hour, and at
/// 1.9-2.0x with each thread decoding into its own buffers (BENCHMARKS.md, "Each decoding
/// thread decodes into its own buffers").
///
/// A thread with none of its own back takes new buffers while the reader has fewer than it
/// has jobs, and another thread's after that (which become its own): a reader holds as many
/// buffers as it did when they went with the jobs.
struct Homes {
    boxes: Mutex<Boxes>,
    /// Where buffers no thread holds come from and go back to: the reader's options'.
    spares: Arc<Spares>,
}

struct Boxes {
    /// Buffers back, by thread (`id - 1`).
    waiting: Vec<Vec<Scratch>>,
    /// Buffers taken new.
    made: usize,
    /// How many may be taken new before other threads' are taken.
    most: usize,
}

impl Homes {
    /// The homes of `threads` decoding threads with `most` jobs between them.
    fn new(threads: usize, most: usize, spares: Arc<Spares>) -> Self {
        Homes {
            boxes: Mutex::new(Boxes {
                waiting: (0..threads).map(|_| Vec::new()).collect(),
                made: 0,
                most,
            }),
            spares,
        }
    }

    /// Buffers for the thread `id`: its own, back, or new ones, or another thread's.
    fn take(&self, id: usize) -> Scratch {
        let mut boxes = lock(&self.boxes);
        if let Some(own) = boxes.waiting[id - 1].pop() {
            return own;
        }
        let mut scratch = if boxes.made < boxes.most {
            None
        } else {
            boxes.waiting.iter_mut().find_map(Vec::pop)
        }
        .unwrap_or_else(|| {
            boxes.made += 1;
            self.spares.scratch()
        });
        scratch.set_home(id);
        scratch
    }

    /// Gives buffers back to their thread, or to later readers if they are no thread's.
    fn give_back(&self, scratch: Scratch) {
        match scratch.home() {
            0 => self.spares.keep_scratch(scratch),
            home => lock(&self.boxes).waiting[home - 1].push(scratch),
        }
    }
}

impl Drop for Homes {
    /// Leaves the buffers to later readers.
    fn drop(&mut self) {
        let boxes = self.boxes.get_mut().unwrap_or_else(|p| p.into_inner());
        for scratch in boxes.waiting.drain(..).flatten() {
            self.spares.keep_scratch(scratch);
        }
    }
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
    job.scratch = state.homes.take(state.id);
    let DecodeJob {
        shared,
        span,
        type_field,
        body,
        block_type,
        place,
        size,
        copy,
        scratch,
        ..
    } = &mut *job;
    let frame = match shared {
        Some(shared) => &shared.bytes()[span.clone()],
        None => copy.bytes(),
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
    /// The decoding threads' buffers.
    homes: Arc<Homes>,
}

impl Drop for Decoders {
    /// Leaves the buffers of the jobs that are back to later readers.
    fn drop(&mut self) {
        let ready = self.queue.drain(..).filter_map(|entry| match entry {
            Entry::Ready(job) => Some(job),
            _ => None,
        });
        for job in self.free.drain(..).chain(ready) {
            let DecodeJob { copy, scratch, .. } = *job;
            self.homes.spares.keep_copy(copy);
            self.homes.give_back(scratch);
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
        kept: &Kept,
        threads: usize,
        decoder: &Decoder,
        at: u64,
        shared: Option<Shared>,
    ) -> io::Result<Self> {
        let limits = decoder.limits();
        let max_body_size = limits.body_limit();
        let registry = Arc::new(Mutex::new(Vec::new()));
        let limit = DEPTH * threads;
        // The reader holds a job besides those in flight: the one whose records it hands out.
        let homes = Arc::new(Homes::new(threads, limit + 1, Arc::clone(decoder.spares())));
        let states = (1..=threads)
            .map(|id| DecodeState {
                max_body_size,
                decompressor: decompressor_with(limits, &decoder.dictionaries),
                registry: Arc::clone(&registry),
                added: 0,
                id,
                homes: Arc::clone(&homes),
            })
            .collect();
        Ok(Decoders {
            pool: Pool::spawn(kept, states, limit, decode, true)?,
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
            homes,
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

    /// Keeps a job for the next frame, with its copy's buffer, gives its decoding buffers
    /// back to their thread, and lets go of the input.
    fn recycle(&mut self, mut job: Box<DecodeJob>) {
        job.shared = None;
        self.homes.give_back(std::mem::take(&mut job.scratch));
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
                copy: self.homes.spares.copy(),
                scratch: Scratch::default(),
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
            // Decoded on the reader's thread, whose state is the pool's last.
            job.scratch = self.homes.take(self.pool.len());
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
                job.copy.copy(&input.bytes[from..f.body.end]);
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

    /// The thread `kept` runs a task on, once the task has finished.
    fn thread_of(kept: &Kept) -> thread::ThreadId {
        let (tx, rx) = sync_channel(1);
        let finished = kept
            .run(move || tx.send(thread::current().id()).expect("sent"))
            .expect("thread");
        // A task that never runs fails the test rather than hangs it.
        let _ = finished.recv_timeout(Duration::from_secs(30));
        rx.recv_timeout(Duration::from_secs(30))
            .expect("the task ran")
    }

    #[test]
    fn threads_are_kept_from_task_to_task() {
        let kept = Kept::new(4, Duration::from_secs(60));
        let first = thread_of(&kept);
        // The thread puts itself among the waiting ones just after the task finished.
        while kept.waiting() == 0 {
            thread::yield_now();
        }
        for _ in 0..20 {
            assert_eq!(thread_of(&kept), first);
            while kept.waiting() == 0 {
                thread::yield_now();
            }
        }
        assert_eq!(kept.started(), 1);
    }

    #[test]
    fn kept_threads_end_when_their_options_are_dropped() {
        /// Sends on its channel when the thread that holds it ends.
        struct OnExit(SyncSender<()>);
        impl Drop for OnExit {
            fn drop(&mut self) {
                let _ = self.0.send(());
            }
        }
        thread_local! {
            static GUARD: std::cell::RefCell<Option<OnExit>> = const { std::cell::RefCell::new(None) };
        }
        // Waiting a minute for work, unless the options go.
        let kept = Kept::new(4, Duration::from_secs(60));
        let (exit_tx, exited) = sync_channel(1);
        let finished = kept
            .run(move || GUARD.with(|g| *g.borrow_mut() = Some(OnExit(exit_tx))))
            .expect("thread");
        let _ = finished.recv();
        while kept.waiting() == 0 {
            thread::yield_now();
        }
        // Another `Kept` (other options) does not run on it; a clone (cloned options) does.
        let other = Kept::new(4, Duration::from_secs(60));
        let first = thread_of(&kept.clone());
        assert_ne!(thread_of(&other), first);
        while kept.waiting() == 0 {
            thread::yield_now();
        }
        drop(kept);
        exited
            .recv_timeout(Duration::from_secs(30))
            .expect("the kept thread ended with its options");
    }

    #[test]
    fn threads_kept_are_bounded_and_end_when_idle() {
        let kept = Kept::new(3, Duration::from_millis(300));
        // Eight tasks at once, on eight threads; three of them are kept afterwards.
        let gate = Arc::new(std::sync::Barrier::new(9));
        let finished: Vec<_> = (0..8)
            .map(|_| {
                let gate = Arc::clone(&gate);
                kept.run(move || {
                    gate.wait();
                })
                .expect("thread")
            })
            .collect();
        gate.wait();
        for f in finished {
            let _ = f.recv();
        }
        assert_eq!(kept.started(), 8);
        let t0 = std::time::Instant::now();
        while kept.waiting() < 3 && t0.elapsed() < Duration::from_secs(10) {
            thread::yield_now();
        }
        assert_eq!(kept.waiting(), 3);
        // Past their wait they end, and later tasks get new threads.
        while kept.waiting() > 0 {
            thread::sleep(Duration::from_millis(5));
        }
        thread_of(&kept);
        assert_eq!(kept.started(), 9);
    }

    #[test]
    fn no_task_is_lost_when_threads_end_as_tasks_come() {
        // Threads time out about when the next task is handed to them: every task still
        // runs, and every `Finished` closes.
        let kept = Kept::new(2, Duration::from_micros(50));
        let ran = Arc::new(AtomicU64::new(0));
        for i in 0..2_000u64 {
            let ran = Arc::clone(&ran);
            let finished = kept
                .run(move || {
                    ran.fetch_add(1, Ordering::Relaxed);
                })
                .expect("thread");
            let _ = finished.recv();
            if i % 3 == 0 {
                thread::sleep(Duration::from_micros(40 + i % 30));
            }
        }
        assert_eq!(ran.load(Ordering::Relaxed), 2_000);
    }

    #[test]
    fn a_panicking_task_ends_its_thread_and_closes_finished() {
        let kept = Kept::new(4, Duration::from_secs(60));
        let finished = kept.run(|| panic!("a bug")).expect("thread");
        assert!(finished.recv().is_err(), "closed, never sent on");
        thread_of(&kept);
        assert_eq!(kept.started(), 2);
    }

    #[test]
    fn each_thread_decodes_into_its_own_buffers_within_the_jobs() {
        let homes = Homes::new(2, 3, Arc::default());
        let made = |homes: &Homes| lock(&homes.boxes).made;
        let first = homes.take(1);
        assert_eq!(first.home(), 1);
        homes.give_back(first);
        // Thread 2 takes new buffers though thread 1's are back, and thread 1 takes its own.
        let second = homes.take(2);
        assert_eq!((second.home(), made(&homes)), (2, 2));
        let own = homes.take(1);
        assert_eq!((own.home(), made(&homes)), (1, 2));
        let third = homes.take(1);
        assert_eq!((third.home(), made(&homes)), (1, 3));
        // With as many buffers as jobs, thread 1 takes thread 2's, which become its own.
        homes.give_back(second);
        let taken = homes.take(1);
        assert_eq!((taken.home(), made(&homes)), (1, 3));
        homes.give_back(taken);
        assert_eq!(lock(&homes.boxes).waiting[0].len(), 1);
        // Thread 2 takes that one, and with none back, new ones rather than a wait.
        let more = [homes.take(2), homes.take(2)];
        assert_eq!(made(&homes), 4);
        assert!(more.iter().all(|scratch| scratch.home() == 2));
        // Buffers of no thread go back to later readers, not to a thread.
        homes.give_back(Scratch::default());
        let waiting =
            |homes: &Homes| -> usize { lock(&homes.boxes).waiting.iter().map(Vec::len).sum() };
        assert_eq!(waiting(&homes), 0);
        for scratch in more.into_iter().chain([own, third]) {
            homes.give_back(scratch);
        }
        assert_eq!(waiting(&homes), 4);
    }

    #[test]
    fn threads_of_another_process_are_forgotten() {
        // As a child made by `fork` finds them: waiting, but not there to run anything.
        let kept = Kept::new(4, Duration::from_secs(60));
        let (tx, _rx) = sync_channel::<Task>(1);
        lock(&kept.0.waiting).push((1000, std::process::id().wrapping_add(1), tx));
        thread_of(&kept);
        assert_eq!(kept.started(), 1);
    }

    /// A job's number and whether the calling thread ran it, after 1 ms.
    fn slow_on_workers(caller: &mut thread::ThreadId, job: u64) -> (u64, bool) {
        thread::sleep(std::time::Duration::from_millis(1));
        (job, thread::current().id() == *caller)
    }

    #[test]
    fn the_calling_thread_shares_the_jobs_and_results_keep_their_order() {
        let caller = thread::current().id();
        let mut pool = Pool::spawn(&Kept::default(), vec![caller; 2], 4, slow_on_workers, true)
            .expect("threads");
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
        let mut pool = Pool::spawn(&Kept::default(), vec![caller; 2], 4, slow_on_workers, false)
            .expect("threads");
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
        let mut encoders = Encoders::new(&Kept::default(), 2, Compression::None, None).unwrap();
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
