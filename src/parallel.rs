//! Worker threads that encode blocks for a [`Writer`](crate::Writer), with results taken back
//! in file order.
//!
//! A [`Pool`] is `n` worker threads, each with its own state (a zstd
//! context created once, when the pool starts), pulling jobs from one shared bounded channel
//! in the order they were sent, so an idle worker always takes the next job, whichever worker
//! is slow. Each job gets a sequence number; results come back on one channel in any order,
//! and the thread that sent the jobs takes them in sequence order, holding those that arrive
//! early aside.
//!
//! At most [`DEPTH`] blocks per worker are in flight. When that many are, the submitting
//! thread first takes the oldest result back and writes it. Buffers travel inside the jobs and come back with the results to free lists, so a
//! steady state allocates nothing per record and nothing per block.
//!
//! Dropping a pool closes the job channel and joins the threads: a worker finishes the job it
//! holds, if any, and exits, so a drop waits for at most one block per worker. A worker that
//! panics (a bug) sends its panic back, and it is resumed on the thread that takes results.

use std::collections::VecDeque;
use std::fmt;
use std::io::{self, Write};
use std::panic::{self, AssertUnwindSafe};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};

use crate::block::{self, types};
use crate::codec::{Compression, Compressor, Dictionary};
use crate::error::Result;

/// Blocks in flight per worker thread.
pub(crate) const DEPTH: usize = 2;

/// Locks `mutex`, ignoring poisoning: the data behind it (a receiver) stays consistent.
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
    handles: Vec<JoinHandle<()>>,
    /// The sequence number of the next job.
    next: u64,
    /// Results that came back before the ones sent earlier were asked for.
    early: Vec<(u64, D)>,
}

impl<J: Send + 'static, D: Send + 'static> Pool<J, D> {
    /// Starts one thread per state, named `name-i`. Each takes the next job from the shared
    /// queue, runs `work` on its state and the job, and sends the result back. At most
    /// `in_flight` jobs may be sent and not yet received: sending then never blocks.
    fn spawn<S: Send + 'static>(
        name: &str,
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
    fn recv(&mut self, seq: u64) -> D {
        loop {
            if let Some(i) = self.early.iter().position(|(s, _)| *s == seq) {
                return self.early.swap_remove(i).1;
            }
            let done = self.done.get_mut().unwrap_or_else(|p| p.into_inner());
            match done.recv() {
                Ok((s, Ok(result))) if s == seq => return result,
                Ok((s, Ok(result))) => self.early.push((s, result)),
                Ok((_, Err(panic))) => panic::resume_unwind(panic),
                Err(_) => panic!("every cobsfile worker thread has exited"),
            }
        }
    }

    /// The number of worker threads.
    fn len(&self) -> usize {
        self.handles.len()
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
    /// A data block sent to the workers: the job's sequence number.
    Worker(u64),
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
            pool: Pool::spawn("cobsfile-encode", states, limit, encode)?,
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

    /// Queues the data block `payload[start..]` for a worker to encode. If the queue was
    /// full, first writes the oldest block to `inner`, and returns the error that failed
    /// (the new block is queued either way).
    pub fn write_data<W: Write>(
        &mut self,
        payload: Vec<u8>,
        start: usize,
        inner: &mut W,
    ) -> Result<()> {
        let room = self.make_room(inner);
        let out = self.free_outs.pop().unwrap_or_default();
        let seq = self.pool.send(EncodeJob {
            payload,
            start,
            out,
            result: Ok(0),
        });
        self.queue.push_back(Slot::Worker(seq));
        room
    }

    /// Encodes an uncompressed block of type `kind` on this thread and queues it behind the
    /// blocks in flight, so blocks reach `inner` in the order they were written.
    pub fn write_block<W: Write>(
        &mut self,
        kind: i64,
        payload: &[u8],
        inner: &mut W,
    ) -> Result<()> {
        let mut out = self.free_outs.pop().unwrap_or_default();
        let start = match block::encode(kind, payload, None, &mut out) {
            Ok(start) => start,
            Err(e) => {
                self.free_outs.push(out);
                return Err(e);
            }
        };
        let room = self.make_room(inner);
        self.queue.push_back(Slot::Ready { out, start });
        room
    }

    /// Writes every block in flight, in order; stops at the first error (the blocks after it
    /// stay queued).
    pub fn drain<W: Write>(&mut self, inner: &mut W) -> Result<()> {
        while !self.queue.is_empty() {
            self.write_oldest(inner)?;
        }
        Ok(())
    }

    /// Blocks queued and not yet written.
    #[cfg(test)]
    pub fn in_flight(&self) -> usize {
        self.queue.len()
    }

    /// Writes the oldest block if the queue is full.
    fn make_room<W: Write>(&mut self, inner: &mut W) -> Result<()> {
        if self.queue.len() >= self.limit {
            self.write_oldest(inner)
        } else {
            Ok(())
        }
    }

    /// Waits for the oldest block and writes it in one `write_all`. A block whose encoding
    /// or writing failed is lost; the error is returned.
    fn write_oldest<W: Write>(&mut self, inner: &mut W) -> Result<()> {
        let Some(slot) = self.queue.pop_front() else {
            return Ok(());
        };
        let (out, start) = match slot {
            Slot::Ready { out, start } => (out, Ok(start)),
            Slot::Worker(seq) => {
                let job = self.pool.recv(seq);
                self.free_payloads.push(job.payload);
                (job.out, job.result)
            }
        };
        let written = start.and_then(|start| Ok(inner.write_all(&out[start..])?));
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
    };

    #[test]
    fn a_writer_keeps_a_bounded_number_of_blocks_in_flight() {
        let mut writer = WriterBuilder::new()
            .block_size(100)
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
        for _ in 0..50 {
            let mut payload = encoders.spare_payload();
            payload.extend_from_slice(&[0, 1, 1, b'x']);
            encoders.write_data(payload, 2, &mut sink).unwrap();
            assert!(encoders.free_payloads.len() + encoders.queue.len() <= encoders.limit + 1);
        }
        encoders.drain(&mut sink).unwrap();
        // Every buffer ever allocated is back in a free list.
        assert!(encoders.free_outs.len() <= encoders.limit);
        assert!(encoders.free_payloads.len() <= encoders.limit + 1);
        assert!(!encoders.free_outs.is_empty());
    }
}
