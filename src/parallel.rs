//! Worker threads that encode blocks for a [`Writer`](crate::Writer), with results taken
//! back in file order; and the threads kept from one pool of workers to the next ([`Kept`]),
//! which readers' range reads run on too ([`range::Pull`](crate::range::Pull)).
//!
//! A [`Pool`] is `n` worker threads, each with its own state (a zstd context created once,
//! when the pool starts), pulling jobs from one shared bounded channel in the order they were
//! sent, so an idle worker always takes the next job, whichever worker is slow. Each job gets
//! a sequence number; results come back on one channel in any order, and the thread that sent
//! the jobs takes them in sequence order, holding those that arrive early aside. A writer's
//! thread makes the records, so its pool has `n` workers.
//!
//! At most [`DEPTH`] blocks per thread are in flight. When that many are, the submitting
//! thread first takes the oldest result back (writing it). Buffers travel inside the jobs and
//! come back with the results to free lists, so a steady state allocates nothing per record
//! and nothing per block.
//!
//! Dropping a pool closes the job channel and waits for the workers that hold a job: a worker
//! finishes the job it holds, if any, and leaves the pool, so a drop waits for at most one
//! block per worker, and not at all when every result was taken.
//! The threads are kept for the next pool or range read ([`Kept`]): starting and ending a
//! thread for every writer or reader cost more than its blocks' hand-offs. A worker that
//! panics (a bug) sends its panic back, and it is resumed on the thread that takes results.

use std::collections::VecDeque;
use std::fmt;
use std::io::{self, Write};
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::Duration;

use crate::block::{self, types};
use crate::codec::{Compression, Compressor, Dictionary};
use crate::error::Result;
use crate::index::IndexBuilder;

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

/// Worker threads pulling jobs from one queue; see the module documentation.
pub(crate) struct Pool<J, D> {
    /// `None` once the pool is being dropped, which ends the workers' loops.
    jobs: Option<SyncSender<(u64, J)>>,
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
    /// Runs each state on a worker thread of `kept`. Each worker takes the next job from the
    /// shared queue, runs `work` on its state and the job, and sends the result back. At most
    /// `in_flight` jobs may be sent and not yet received: sending then never blocks.
    fn spawn<S: Send + 'static>(
        kept: &Kept,
        states: Vec<S>,
        in_flight: usize,
        work: fn(&mut S, J) -> D,
    ) -> io::Result<Self> {
        let (job_tx, job_rx) = sync_channel::<(u64, J)>(in_flight);
        let (done_tx, done_rx) = sync_channel::<(u64, Outcome<D>)>(in_flight);
        let job_rx = Arc::new(Mutex::new(job_rx));
        let mut pool = Pool {
            jobs: Some(job_tx),
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
    fn recv(&mut self, seq: u64) -> D {
        loop {
            if let Some(i) = self.early.iter().position(|(s, _)| *s == seq) {
                return self.early.swap_remove(i).1;
            }
            let done = self.done.get_mut().unwrap_or_else(|p| p.into_inner());
            let received = done
                .recv()
                .unwrap_or_else(|_| panic!("every cobsfile worker thread has exited"));
            self.received += 1;
            match received {
                (s, Ok(result)) if s == seq => return result,
                (s, Ok(result)) => self.early.push((s, result)),
                (_, Err(panic)) => panic::resume_unwind(panic),
            }
        }
    }

    /// The number of threads that run jobs.
    fn len(&self) -> usize {
        self.workers
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
pub(crate) type Finished = Receiver<()>;

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
    pub(crate) fn run(&self, task: impl FnOnce() + Send + 'static) -> io::Result<Finished> {
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
    Worker(u64, u64, Option<(Vec<u8>, crate::TimeSpan)>),
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
    /// A time block and its data block, together for their one write.
    pair: Vec<u8>,
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
        lines: bool,
    ) -> Result<Self> {
        let mut states = Vec::with_capacity(threads);
        for _ in 0..threads {
            states.push(Compressor::for_writer(compression, dictionary, lines)?);
        }
        let limit = DEPTH * threads;
        Ok(Encoders {
            pool: Pool::spawn(kept, states, limit, encode)?,
            queue: VecDeque::with_capacity(limit),
            limit,
            free_payloads: Vec::with_capacity(limit + 1),
            free_outs: Vec::with_capacity(limit),
            pair: Vec::new(),
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
        time_block: Option<(Vec<u8>, crate::TimeSpan)>,
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
        self.queue.push_back(Slot::Worker(seq, items, time_block));
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
        let (out, start, items, time_block) = match slot {
            Slot::Ready { out, start } => (out, Ok(start), 0, None),
            Slot::Worker(seq, items, time_block) => {
                let job = self.pool.recv(seq);
                self.free_payloads.push(job.payload);
                (job.out, job.result, items, time_block)
            }
        };
        let written = start.and_then(|start| {
            crate::emit::emit_with_times(
                inner,
                None,
                index,
                time_block.as_ref().map(|(bytes, span)| (&bytes[..], *span)),
                &out[start..],
                items,
                &mut self.pair,
            )
        });
        self.free_outs.push(out);
        written
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WriterBuilder;

    // The pools are `Send` and `Sync`, so readers and writers stay so.
    const _: fn() = || {
        fn check<T: Send + Sync>() {}
        check::<Encoders>();
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
    fn workers_share_the_jobs_and_results_keep_their_order() {
        let caller = thread::current().id();
        let mut pool =
            Pool::spawn(&Kept::default(), vec![caller; 2], 4, slow_on_workers).expect("threads");
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
        // A writer's pool leaves every job to its workers.
        assert!(results.iter().all(|&(_, local)| !local));
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
        let mut encoders =
            Encoders::new(&Kept::default(), 2, Compression::None, None, true).unwrap();
        let mut sink = Vec::new();
        let mut index = IndexBuilder::new(true);
        for _ in 0..50 {
            let mut payload = encoders.spare_payload();
            payload.extend_from_slice(&[0, 1, 1, b'x']);
            encoders
                .write_data(payload, 2, 1, None, &mut sink, &mut index)
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
