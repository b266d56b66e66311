//! A simulated file system that can lose power: deterministic, seeded by a `u64`.

use std::collections::BTreeMap;
use std::io::{self, IoSlice};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use super::{Contents, FileSystem, Handle};
use crate::error::Result;

/// The unit a disk writes whole: a write survives a power cut sector by sector.
const SECTOR: u64 = 512;

/// Faults [`SimFs`] injects, drawn from its seed: chances per thousand calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Faults {
    /// A write fails (`EIO` or `ENOSPC`), writing nothing.
    pub write_error: u32,
    /// A write writes only part of what it was given.
    pub short_write: u32,
    /// A sync fails (`EIO` or `ENOSPC`); the writes it was to make durable may then be lost
    /// even if a later sync succeeds (as on Linux, which reports a writeback error once).
    pub sync_error: u32,
}

/// A simulated file system for testing durability (see the [module](super)).
///
/// Per file it keeps the bytes a reader sees (the page cache), the bytes on the disk as of the
/// last successful sync, and the writes and cuts since. [`crashed`](Self::crashed) gives the
/// state after a power cut, one a POSIX file system may legally leave: each unsynced write lost,
/// kept, or kept in part, 512-byte sector by sector, in any order (a later write may survive an
/// earlier one lost); the length as of the last sync or any change since, zeros where a length
/// persisted without its data; a file created but whose directory was not synced, gone. Synced
/// data always survives. Locks do not.
///
/// Handles are cheap clones sharing one state: a test opens appenders on a `SimFs`, cuts the
/// power with `crashed`, and opens fresh appenders on the result, while the old ones, on the old
/// state, no longer matter.
#[derive(Debug, Clone)]
pub struct SimFs {
    state: Arc<Mutex<Sim>>,
    /// Signals syncs held and released.
    gate: Arc<Condvar>,
}

#[derive(Debug)]
struct Sim {
    files: BTreeMap<PathBuf, SimFile>,
    faults: Faults,
    rng: Rng,
    /// Faults asked for explicitly, taken before any drawn from the seed.
    next_write: Option<io::ErrorKind>,
    next_sync: Option<io::ErrorKind>,
    next_handle: u64,
    /// Successful syncs so far.
    syncs: u64,
    /// Syncs return only once this is false again (their outcome is decided when called).
    held: bool,
    /// Syncs waiting to return.
    in_sync: usize,
}

#[derive(Debug, Clone, Default)]
struct SimFile {
    /// What reads see.
    current: Vec<u8>,
    /// On the disk as of the last successful sync.
    durable: Vec<u8>,
    /// Changes since, in order; a change a failed sync was to make durable is `lost`.
    pending: Vec<Pending>,
    /// The directory entry is on the disk.
    entry_durable: bool,
    exclusive: Option<u64>,
    shared: Vec<u64>,
}

#[derive(Debug, Clone)]
struct Pending {
    change: Change,
    /// A failed sync covered it: a later successful sync does not make it durable.
    lost: bool,
}

#[derive(Debug, Clone)]
enum Change {
    Write { at: u64, data: Vec<u8> },
    SetLen(u64),
}

/// SplitMix64.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn per_mille(&mut self, chance: u32) -> bool {
        chance > 0 && self.below(1000) < u64::from(chance)
    }
}

fn error(kind: io::ErrorKind) -> io::Error {
    io::Error::new(kind, "simulated fault")
}

impl Sim {
    fn fault(&mut self, chance: u32) -> Option<io::ErrorKind> {
        self.rng.per_mille(chance).then(|| {
            if self.rng.below(2) == 0 {
                io::ErrorKind::Other // EIO
            } else {
                io::ErrorKind::StorageFull // ENOSPC
            }
        })
    }
}

fn apply(bytes: &mut Vec<u8>, change: &Change) {
    match change {
        Change::Write { at, data } => {
            let at = *at as usize;
            if bytes.len() < at + data.len() {
                bytes.resize(at + data.len(), 0);
            }
            bytes[at..at + data.len()].copy_from_slice(data);
        }
        Change::SetLen(len) => bytes.resize(*len as usize, 0),
    }
}

impl SimFs {
    /// An empty file system whose choices (faults, crash states) derive from `seed`.
    pub fn new(seed: u64) -> Self {
        SimFs {
            state: Arc::new(Mutex::new(Sim {
                files: BTreeMap::new(),
                faults: Faults::default(),
                rng: Rng(seed),
                next_write: None,
                next_sync: None,
                next_handle: 0,
                syncs: 0,
                held: false,
                in_sync: 0,
            })),
            gate: Arc::new(Condvar::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Sim> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Injects `faults` from now on, drawn from the seed.
    pub fn set_faults(&self, faults: Faults) {
        self.lock().faults = faults;
    }

    /// The next write fails with `kind` (`Other` for `EIO`, `StorageFull` for `ENOSPC`).
    pub fn fail_next_write(&self, kind: io::ErrorKind) {
        self.lock().next_write = Some(kind);
    }

    /// The next sync fails with `kind`.
    pub fn fail_next_sync(&self, kind: io::ErrorKind) {
        self.lock().next_sync = Some(kind);
    }

    /// Holds every sync from returning (its outcome decided) until `held` is false again: a
    /// test can then act while another thread is in a sync.
    pub fn hold_syncs(&self, held: bool) {
        self.lock().held = held;
        self.gate.notify_all();
    }

    /// Waits until a sync is held (see [`hold_syncs`](Self::hold_syncs)).
    pub fn wait_for_held_sync(&self) {
        let mut sim = self.lock();
        while sim.in_sync == 0 {
            sim = self.gate.wait(sim).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// The bytes a reader of `path` sees now, if it exists.
    pub fn read(&self, path: impl AsRef<Path>) -> Option<Vec<u8>> {
        self.lock()
            .files
            .get(path.as_ref())
            .map(|f| f.current.clone())
    }

    /// Puts a file with `bytes` at `path`, synced (directory entry included).
    pub fn insert(&self, path: impl AsRef<Path>, bytes: Vec<u8>) {
        let file = SimFile {
            current: bytes.clone(),
            durable: bytes,
            entry_durable: true,
            ..SimFile::default()
        };
        self.lock().files.insert(path.as_ref().to_path_buf(), file);
    }

    /// Changes not yet durable, over all files (those a failed sync covered included).
    pub fn pending(&self) -> usize {
        self.lock().files.values().map(|f| f.pending.len()).sum()
    }

    /// Syncs that returned Ok so far.
    pub fn syncs(&self) -> u64 {
        self.lock().syncs
    }

    /// The file system after a power cut now, as chosen by `seed` (see the type's
    /// documentation): a new `SimFs`, without faults or locks, everything in it durable. This
    /// one goes on as before, for handles still open on it.
    pub fn crashed(&self, seed: u64) -> SimFs {
        let sim = self.lock();
        let mut rng = Rng(seed);
        let after = SimFs::new(rng.next());
        let mut files = BTreeMap::new();
        for (path, file) in &sim.files {
            if !file.entry_durable && rng.below(2) == 0 {
                continue;
            }
            let bytes = crash_file(file, &mut rng);
            let file = SimFile {
                current: bytes.clone(),
                durable: bytes,
                entry_durable: true,
                ..SimFile::default()
            };
            files.insert(path.clone(), file);
        }
        after.lock().files = files;
        after
    }
}

/// The bytes of `file` on the disk after a power cut, as `rng` chooses.
fn crash_file(file: &SimFile, rng: &mut Rng) -> Vec<u8> {
    let mut bytes = file.durable.clone();
    // The length as of the last sync or as of any change since.
    let mut lens = vec![file.durable.len() as u64];
    let mut len = file.durable.len() as u64;
    for p in &file.pending {
        len = match &p.change {
            Change::Write { at, data } => len.max(at + data.len() as u64),
            Change::SetLen(to) => *to,
        };
        lens.push(len);
    }
    // Each write dropped, kept, or kept sector by sector, the writes in any order.
    let mut order: Vec<usize> = (0..file.pending.len()).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    for i in order {
        let Change::Write { at, data } = &file.pending[i].change else {
            continue;
        };
        let how = rng.below(3);
        if how == 0 {
            continue;
        }
        let end = at + data.len() as u64;
        let mut sector = at / SECTOR * SECTOR;
        while sector < end {
            let from = sector.max(*at);
            let to = (sector + SECTOR).min(end);
            if how == 1 || rng.below(2) == 0 {
                let piece = &data[(from - at) as usize..(to - at) as usize];
                apply(
                    &mut bytes,
                    &Change::Write {
                        at: from,
                        data: piece.to_vec(),
                    },
                );
            }
            sector += SECTOR;
        }
    }
    let len = lens[rng.below(lens.len() as u64) as usize];
    bytes.resize(len as usize, 0);
    bytes
}

impl FileSystem for SimFs {
    fn open_append(&self, path: &Path) -> io::Result<Arc<dyn Handle>> {
        let mut sim = self.lock();
        sim.next_handle += 1;
        let id = sim.next_handle;
        sim.files.entry(path.to_path_buf()).or_default();
        Ok(Arc::new(SimHandle {
            fs: self.clone(),
            path: path.to_path_buf(),
            id,
        }))
    }
}

/// A file open on a [`SimFs`].
#[derive(Debug)]
struct SimHandle {
    fs: SimFs,
    path: PathBuf,
    id: u64,
}

impl SimHandle {
    fn with<T>(&self, f: impl FnOnce(&mut Sim, &mut SimFile) -> io::Result<T>) -> io::Result<T> {
        let mut guard = self.fs.lock();
        let sim = &mut *guard;
        let mut file = sim
            .files
            .remove(&self.path)
            .ok_or_else(|| error(io::ErrorKind::NotFound))?;
        let result = f(sim, &mut file);
        sim.files.insert(self.path.clone(), file);
        result
    }
}

impl SimHandle {
    /// Syncs: decides the outcome, the disk's state with it.
    fn sync_now(&self) -> io::Result<()> {
        self.with(|sim, file| {
            let fault = sim.next_sync.take();
            let faults = sim.faults;
            if let Some(kind) = fault.or_else(|| sim.fault(faults.sync_error)) {
                // Reported once: the writes it covered may never reach the disk.
                for p in &mut file.pending {
                    p.lost = true;
                }
                return Err(error(kind));
            }
            for p in file.pending.drain(..) {
                match p.change {
                    // Lost for good, but the length it set, which later writes extend.
                    Change::Write { at, ref data } if p.lost => {
                        let end = (at as usize + data.len()).max(file.durable.len());
                        file.durable.resize(end, 0);
                    }
                    ref change => apply(&mut file.durable, change),
                }
            }
            file.durable.resize(file.current.len(), 0);
            sim.syncs += 1;
            Ok(())
        })
    }
}

impl Handle for SimHandle {
    fn len(&self) -> io::Result<u64> {
        self.with(|_, file| Ok(file.current.len() as u64))
    }

    fn contents(&self) -> Result<Contents> {
        Ok(Contents::Read(
            self.with(|_, file| Ok(file.current.clone()))?,
        ))
    }

    fn append(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.with(|sim, file| {
            let fault = sim.next_write.take();
            let faults = sim.faults;
            if let Some(kind) = fault.or_else(|| sim.fault(faults.write_error)) {
                return Err(error(kind));
            }
            let mut data: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
            if data.len() > 1 && sim.rng.per_mille(faults.short_write) {
                data.truncate(1 + sim.rng.below(data.len() as u64 - 1) as usize);
            }
            let change = Change::Write {
                at: file.current.len() as u64,
                data,
            };
            apply(&mut file.current, &change);
            let Change::Write { data, .. } = &change else {
                unreachable!()
            };
            let n = data.len();
            file.pending.push(Pending {
                change,
                lost: false,
            });
            Ok(n)
        })
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.with(|_, file| {
            let change = Change::SetLen(len);
            apply(&mut file.current, &change);
            file.pending.push(Pending {
                change,
                lost: false,
            });
            Ok(())
        })
    }

    fn sync_data(&self) -> io::Result<()> {
        let result = self.sync_now();
        let mut sim = self.fs.lock();
        sim.in_sync += 1;
        self.fs.gate.notify_all();
        while sim.held {
            sim = self.fs.gate.wait(sim).unwrap_or_else(|e| e.into_inner());
        }
        sim.in_sync -= 1;
        result
    }

    fn sync_entry(&self) -> io::Result<()> {
        let mut sim = self.fs.lock();
        let dir = self.path.parent().map(Path::to_path_buf);
        for (path, file) in &mut sim.files {
            if path.parent().map(Path::to_path_buf) == dir {
                file.entry_durable = true;
            }
        }
        Ok(())
    }

    fn try_lock(&self) -> io::Result<bool> {
        self.with(|_, file| {
            let others = file.exclusive.is_some_and(|id| id != self.id)
                || file.shared.iter().any(|&id| id != self.id);
            if others {
                return Ok(false);
            }
            file.shared.retain(|&id| id != self.id);
            file.exclusive = Some(self.id);
            Ok(true)
        })
    }

    fn lock_shared(&self) -> io::Result<()> {
        self.with(|_, file| {
            if file.exclusive.is_some_and(|id| id != self.id) {
                // A real lock would wait; nothing in a simulation would ever release it.
                return Err(error(io::ErrorKind::WouldBlock));
            }
            if file.exclusive == Some(self.id) {
                file.exclusive = None;
            }
            if !file.shared.contains(&self.id) {
                file.shared.push(self.id);
            }
            Ok(())
        })
    }
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        if let Some(file) = self.fs.lock().files.get_mut(&self.path) {
            if file.exclusive == Some(self.id) {
                file.exclusive = None;
            }
            file.shared.retain(|&id| id != self.id);
        }
    }
}
