//! A pull reader's threads ([`ReaderBuilder::threads`](crate::ReaderBuilder::threads)): the
//! range reads of what the reader has left, cut and scheduled as every range read's are
//! ([`Schedule`]), whose blocks the reader's own decoder then settles in file order.
//!
//! Each range is read by its own decoder, on a worker or on the reader's thread (which reads
//! ranges while the part it needs next is not ready, as a range read's calling thread does):
//! what it meets goes into the range's parts in order ([`Met`]), each decoded block with the
//! buffers it was decoded into, and each damaged range by its start and cause. The reader's
//! decoder takes those buffers over ([`Decoder::swap_scratch`]) and settles blocks, damage and
//! the input's end exactly as it settles what it reads itself: it merges damage, counts
//! blocks, stops at a header of a newer version and judges the ending, so that records,
//! errors, [`Stats`](crate::Stats) and [`Ending`](crate::Ending) are those of one thread
//! (spec 9.4: the ranges together meet every intact block once, and damage that goes on
//! across a cut is one damaged range once merged). Only the reader's decoder reports; the
//! ranges' decoders only read.
//!
//! The reader keeps the dictionaries of the dictionary blocks it settles, as it would have
//! decoding them itself: a reader that goes back to one thread (to skip data blocks for
//! [`Reader::metadata`](crate::Reader::metadata), say) reads on from where the caller is
//! with the dictionaries a read from the start knows.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use super::{Bytes, Ctx, Cuts, Part, RangeRead, Reading, Schedule, Searches, Slack, PART_BUDGET};
use crate::block::{BlockType, Body, Scratch, Spares};
use crate::codec::{Dictionary, Loaded};
use crate::decoder::{BlockInfo, Decoder, Input, Step};
use crate::error::{Cause, Error};
use crate::limits::Limits;
use crate::parallel::{Finished, Kept};
use crate::source::Shared;

/// What a range's decoder met, in file order.
pub(crate) enum Met {
    /// An intact block (or a header of a newer version, which stops the read), decoded into
    /// `scratch`.
    Block {
        info: BlockInfo,
        body: Body,
        scratch: Scratch,
        /// The thread that decoded it, which its buffers go back to.
        home: usize,
    },
    /// Damage from the absolute offset `start`, whose first damaged piece ends at `first_end`
    /// (see [`Decoder::first_piece_end`]).
    Damage {
        start: u64,
        first_end: u64,
        cause: Cause,
    },
    /// The end of the range's input at this absolute offset.
    End(u64),
    /// A data block a window read passed over: its offset and size.
    Passed(u64, u64),
    /// An error that ends the read.
    Failed(Error),
}

/// Parts waiting for the reader's thread beyond a range read's bound of two a thread, while
/// those waiting weigh less than [`READER_SLACK_PAYLOAD`] beyond the bound's usual parts. The
/// reader's thread iterates every record besides reading ranges of its own, so the workers run
/// ahead of it: with two parts a thread, on two threads, they waited at the bound 6-9% of the
/// time and the reader's thread 3-4% (its own range may not go on while the bound is full).
/// The slack is the one reader thread's, so it does not grow with the threads; counted in
/// what parts weigh (see [`Slack`]), it adds at most its budget and one part to what a file
/// can make a reader hold.
pub(super) const READER_SLACK: Slack = Slack {
    parts: 12,
    payload: READER_SLACK_PAYLOAD,
};

/// The payload budget of [`READER_SLACK`]: twelve parts of the usual size.
const READER_SLACK_PAYLOAD: u64 = 12 * PART_BUDGET;

/// What each thing a range met weighs in its part besides a block's payload: the entry and a
/// block's buffers' own small allocations, about 1 KiB. Without it a part of blocks of a few
/// bytes of payload each (a log flushed after every record: 15 bytes a block) held hundreds
/// of thousands of blocks: reading 45 MB of them held 424 MB at once on two threads (10 MB on
/// one), 526 MB with the slack; with it 23 MB (`tests/memory.rs`). Blocks of the usual sizes
/// (tens of KiB and more) weigh what they did within a few percent.
const MET_WEIGHT: u64 = 1024;

/// Buffers kept for the thread that decoded into them (see [`Job::recent`]).
const RECENT: usize = 4;

/// What the threads of one pull read share.
struct Job {
    schedule: Schedule<'static, VecDeque<Met>>,
    bytes: Shared,
    searches: Searches,
    limits: Limits,
    /// The dictionaries the reader was given.
    given: Vec<Dictionary>,
    spares: Arc<Spares>,
    /// Buffers the reader's decoder gave back, to decode later blocks into: as many as the
    /// blocks in flight, so that a steady read allocates none. The last few each thread
    /// decoded into wait in `recent` instead.
    free: Mutex<Vec<Scratch>>,
    /// For each thread (the reader's first), the last [`RECENT`] buffers it decoded into that
    /// the reader gave back, room for them made when the read starts: a thread decodes into
    /// its own again, whose lines its core's cache may still hold, where buffers handed out
    /// in the order they came back were last written by the other core as often as not. Two
    /// threads over 400 MB of small JSON, paired processes: 0.90-0.91x the time with zstd 3,
    /// 0.96x uncompressed (BENCHMARKS.md, "Buffers back to the thread that decoded into
    /// them"). A few a thread, not a list a thread: lists that each grow on their own
    /// allocated more than a steady read may (`tests/parallel_alloc.rs`), and one list
    /// searched for a thread's own took time in proportion to the blocks in flight.
    recent: Vec<Mutex<Vec<Scratch>>>,
    /// Decoders of ranges read, to read later ranges with (see [`Decoder::restart_range`]).
    decoders: Mutex<Vec<Decoder>>,
    /// The dictionaries the decoders loaded into zstd.
    loaded: Arc<Loaded>,
    /// The reader's time window, if any.
    window: Option<crate::Window>,
}

/// Locks `mutex`, ignoring poisoning: what it guards (free lists) stays consistent.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl Job {
    fn ctx(&self) -> Ctx<'_> {
        Ctx {
            bytes: Bytes::Slice(self.bytes.bytes()),
            searches: &self.searches,
            // Pull readers of windows follow no plan (a planned reader reads on its thread).
            planned: false,
        }
    }

    /// A decoder of the range whose first sync byte is `first_sync`, with the reader's options.
    fn decoder(&self, first_sync: u64, stop: u64) -> Decoder {
        let kept = lock(&self.decoders).pop();
        if let Some(mut decoder) = kept {
            decoder.restart_range(first_sync, stop);
            return decoder;
        }
        let mut decoder = Decoder::range(self.limits, first_sync, stop).share_spares(&self.spares);
        decoder.share_loaded(&self.loaded);
        decoder.set_window(self.window);
        for dictionary in &self.given {
            decoder.give_dictionary(dictionary);
        }
        decoder
    }

    fn start(&self, range: std::ops::Range<u64>) -> RangeRead {
        RangeRead::new(|first, stop| self.decoder(first, stop), self.ctx(), range)
    }

    /// Keeps the decoder of a range read to the end.
    fn end(&self, reader: RangeRead) {
        lock(&self.decoders).push(reader.into_decoder());
    }

    /// Buffers to decode a block into on thread `home`: those it decoded into last, if the
    /// reader has given any back, so that a block is decoded into memory in this core's
    /// cache rather than the other's; else any, before new ones.
    fn scratch(&self, home: usize) -> Scratch {
        let own = lock(&self.recent[home]).pop();
        let free = own.or_else(|| lock(&self.free).pop()).or_else(|| {
            // Another thread's recent ones, rather than new buffers: no more are made than
            // the blocks in flight need.
            let mut others = self.recent.iter().enumerate().filter(|&(i, _)| i != home);
            others.find_map(|(_, recent)| lock(recent).pop())
        });
        free.unwrap_or_else(|| self.spares.scratch())
    }

    /// Takes back the buffers thread `home` decoded into: among its recent ones, the oldest
    /// of which goes to the common list.
    fn give_back(&self, home: usize, scratch: Scratch) {
        let mut recent = lock(&self.recent[home]);
        if recent.len() == RECENT {
            let oldest = recent.remove(0);
            lock(&self.free).push(oldest);
        }
        recent.push(scratch);
    }

    /// Reads on in a range until what it met weighs [`PART_BUDGET`] (its blocks' payload and
    /// [`MET_WEIGHT`] for each thing met), or it ends.
    fn read(
        &self,
        mut met: VecDeque<Met>,
        reader: &mut RangeRead,
        home: usize,
    ) -> Part<VecDeque<Met>> {
        let ctx = self.ctx();
        let mut payload = 0;
        let mut last = true;
        let mut passed = Vec::new();
        loop {
            let item = reader.next_block(ctx, &mut passed);
            payload += passed.len() as u64 * MET_WEIGHT;
            met.extend(
                passed
                    .drain(..)
                    .map(|(offset, size, _)| Met::Passed(offset, size)),
            );
            let size = match item {
                Some(Ok(block)) => block.info().payload_size,
                Some(Err(Error::Damaged { start, cause, .. })) => {
                    payload += MET_WEIGHT;
                    let first_end = reader.decoder().first_piece_end();
                    met.push_back(Met::Damage {
                        start,
                        first_end,
                        cause,
                    });
                    continue;
                }
                Some(Err(e)) => {
                    // A header of a newer version: settled by the reader's decoder, it stops
                    // that one in the same place. Nothing else is read in this range.
                    let stopping = reader.decoder().take_stopping(self.scratch(home));
                    met.push_back(match stopping {
                        Some((info, body, scratch)) => Met::Block {
                            info,
                            body,
                            scratch,
                            home,
                        },
                        None => Met::Failed(e),
                    });
                    break;
                }
                None => {
                    if let Some(end) = reader.decoder().ended_at() {
                        met.push_back(Met::End(end));
                    }
                    break;
                }
            };
            if met.capacity() == 0 {
                // Room for the part's blocks if they are as large as its first, at once.
                met.reserve((PART_BUDGET / size.max(1024)).saturating_add(2) as usize);
            }
            let (info, body, scratch) =
                (reader.decoder().take_current(self.scratch(home))).expect("the block just read");
            met.push_back(Met::Block {
                info,
                body,
                scratch,
                home,
            });
            payload += size + MET_WEIGHT;
            if payload >= PART_BUDGET {
                last = false;
                break;
            }
        }
        Part {
            last,
            payload,
            ..Part::new(met)
        }
    }
}

impl Drop for Job {
    /// Leaves buffers to later readers of the same options.
    fn drop(&mut self) {
        let free = self.free.get_mut().unwrap_or_else(|e| e.into_inner());
        let recent = self.recent.iter_mut();
        let recent = recent.flat_map(|r| r.get_mut().unwrap_or_else(|e| e.into_inner()).drain(..));
        for scratch in free.drain(..).chain(recent) {
            self.spares.keep_scratch(scratch);
        }
    }
}

/// The range reads of a pull reader with threads; see the module documentation.
pub(crate) struct Pull {
    job: Arc<Job>,
    /// The workers' tasks, each closed when its worker left the read. Behind a mutex only
    /// so that readers stay `Sync`; always reached through `get_mut`.
    workers: Mutex<Vec<Finished>>,
    /// The range the reader's thread reads, if any.
    own: Option<Reading<RangeRead>>,
    /// The range, and the part of it, to take next.
    index: usize,
    seq: usize,
    /// What the part taken last holds that the reader's decoder has not settled yet.
    met: VecDeque<Met>,
    /// Where the last range's input ended.
    end: Option<u64>,
    /// Where a reader on one thread would read on, having returned what was settled.
    consumed: u64,
    /// Every range was taken.
    done: bool,
    /// The thread the buffers the reader's decoder holds go back to.
    held: usize,
}

impl std::fmt::Debug for Pull {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pull")
            .field("consumed", &self.consumed)
            .finish_non_exhaustive()
    }
}

impl Pull {
    /// The range reads of what `decoder` reads on from, in `bytes` (the reader's whole
    /// input), on `threads` threads: workers of `kept` and the calling thread. `None` if that
    /// is too little to cut into ranges.
    pub(crate) fn start(
        kept: &Kept,
        threads: usize,
        min_split: u64,
        bytes: Shared,
        decoder: &Decoder,
    ) -> Option<Self> {
        // A read that follows a plan of ranges (a window read by a time index) reads few
        // blocks, on the reader's thread.
        if decoder.has_plan() {
            return None;
        }
        let span = decoder.position()..decoder.stop();
        let len = bytes.bytes().len() as u64;
        let cuts = Cuts::new(&span, threads, min_split, len, None)?;
        let given = (decoder.dictionaries.iter())
            .filter(|(_, offset)| offset.is_none())
            .map(|(dictionary, _)| dictionary.clone())
            .collect();
        let job = Arc::new(Job {
            schedule: Schedule::new(cuts, threads, READER_SLACK),
            bytes,
            searches: Searches::default(),
            limits: *decoder.limits(),
            given,
            spares: Arc::clone(decoder.spares()),
            free: Mutex::default(),
            recent: (0..threads)
                .map(|_| Mutex::new(Vec::with_capacity(RECENT)))
                .collect(),
            decoders: Mutex::default(),
            loaded: Arc::default(),
            window: decoder.window(),
        });
        let mut workers = Vec::with_capacity(threads - 1);
        for home in 1..threads {
            let job = Arc::clone(&job);
            let task = move || {
                job.schedule.work(
                    |range| job.start(range),
                    |met, reader, _| job.read(met, reader, home),
                    |reader| job.end(reader),
                )
            };
            // A worker that cannot start leaves its ranges to the others.
            match kept.run(task) {
                Ok(finished) => workers.push(finished),
                Err(_) => break,
            }
        }
        Some(Pull {
            job,
            workers: Mutex::new(workers),
            own: None,
            index: 0,
            seq: 0,
            met: VecDeque::new(),
            end: None,
            consumed: span.start,
            done: false,
            held: 0,
        })
    }

    /// Where a reader on one thread would read on, having returned what was settled.
    pub(crate) fn consumed(&self) -> u64 {
        self.consumed
    }

    /// The next step of `decoder`, the reader's: what the ranges met, settled in order.
    /// `None` at the end.
    pub(crate) fn next(&mut self, decoder: &mut Decoder) -> Option<Step> {
        loop {
            while let Some(met) = self.met.pop_front() {
                match met {
                    Met::Block {
                        info,
                        body,
                        mut scratch,
                        home,
                    } => {
                        let offset = info.offset;
                        self.consumed = offset + info.size;
                        decoder.swap_scratch(&mut scratch);
                        // The buffers given back are those of the block settled before.
                        self.job.give_back(self.held, scratch);
                        self.held = home;
                        if info.block_type == BlockType::Dictionary {
                            decoder.keep_settled_dictionary(offset, &body);
                        }
                        let step = decoder.settle_decoded(offset, Ok((info, body)));
                        if let Some(at) = decoder.take_look_back() {
                            let bytes = self.job.bytes.bytes();
                            let input = Input {
                                bytes,
                                offset: 0,
                                end: true,
                            };
                            decoder.times_before(at, input);
                        }
                        if step.is_some() {
                            return step;
                        }
                    }
                    // Bytes that changed under the read (a mapped file cut while its ranges
                    // were read at different times) can show one range's damage starting
                    // inside a block an earlier range read whole: it starts after that block.
                    Met::Damage {
                        start,
                        first_end,
                        cause,
                    } => {
                        if let Some(err) = decoder.note_damage(start.max(self.consumed), cause) {
                            // This damage ended a range of the other kind, now reported: one
                            // thread would be past the first piece of it, holding it, and a
                            // reader that goes on on one thread reads on from there.
                            self.consumed = self.consumed.max(first_end);
                            return Some(Step::Damaged(err));
                        }
                    }
                    Met::Passed(offset, size) => {
                        self.consumed = offset + size;
                        if let Some(step) = decoder.settle_passed(offset, size) {
                            return Some(step);
                        }
                    }
                    Met::End(end) => self.end = Some(end),
                    Met::Failed(e) => {
                        self.done = true;
                        return Some(Step::Stopped(e));
                    }
                }
            }
            if self.done {
                return None;
            }
            let job = &*self.job;
            let part = job.schedule.take(
                self.index,
                self.seq,
                &mut self.own,
                |range| job.start(range),
                |met, reader, _| job.read(met, reader, 0),
                |reader| job.end(reader),
            );
            let Some(part) = part else {
                self.done = true;
                let end = (self.end).unwrap_or(job.bytes.bytes().len() as u64);
                self.consumed = end;
                return decoder.end_at(end);
            };
            match part.last {
                true => (self.index, self.seq) = (self.index + 1, 0),
                false => self.seq += 1,
            }
            let taken = std::mem::replace(&mut self.met, part.value);
            job.schedule.recycle(taken);
        }
    }
}

impl Drop for Pull {
    /// Stops the workers and waits for them to leave the read (each finishes the part it
    /// reads, at most about [`PART_BUDGET`] bytes of payload), so that their threads are free
    /// for the next reader. Not after a read to the end, which they have left already, or
    /// are leaving: waiting for them then cost two wake-ups in turn (see [`Kept`]).
    fn drop(&mut self) {
        if self.done {
            return;
        }
        self.job.schedule.stop();
        let workers = self.workers.get_mut().unwrap_or_else(|e| e.into_inner());
        for finished in workers.drain(..) {
            let _ = finished.recv();
        }
    }
}
