//! A simulated file system that can lose power: deterministic, seeded by a `u64`.

use std::collections::BTreeMap;
use std::io::{self, IoSlice};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use super::{Contents, FileSystem, Handle, NewHandle};
use crate::error::Result;

/// The unit a disk writes whole: a write survives a power cut sector by sector.
const SECTOR: u64 = 512;

/// Faults [`SimFs`] injects, drawn from its seed: chances per thousand calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Faults {
    /// A write, a cut (`set_len`), or the creation of a file fails (`EIO` or `ENOSPC`),
    /// changing nothing.
    pub write_error: u32,
    /// A write writes only part of what it was given.
    pub short_write: u32,
    /// A sync of a file or a directory fails (`EIO` or `ENOSPC`); the writes it was to make
    /// durable may then be lost even if a later sync succeeds (as on Linux, which reports a
    /// writeback error once).
    pub sync_error: u32,
}

/// A simulated file system for testing durability (see the [module](super)).
///
/// Files are inodes, which names (paths) refer to. Per inode it keeps the bytes a reader sees
/// (the page cache), the bytes on the disk as of the last successful sync, and the writes and
/// cuts since; per directory, the names on the disk as of its last sync and the changes since
/// (a file created, a file given a name, a rename), in order. [`crashed`](Self::crashed)
/// gives the state after a power cut, one a POSIX file system may legally leave: each unsynced
/// write lost, kept, or kept in part, 512-byte sector by sector, in any order (a later write
/// may survive an earlier one lost); a file's length as of its last sync or any change since,
/// zeros where a length persisted without its data; of each directory's unsynced changes, the
/// first few, in the order they were made (a journaling file system keeps a prefix), none or
/// all; a file no name on the disk refers to, gone. Synced data and synced names always
/// survive. Locks do not.
///
/// [`stop_after`](Self::stop_after) cuts the power at a chosen step: every operation after it
/// fails, so a test can cut a procedure short after each of its steps in turn.
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
    inodes: BTreeMap<u64, Inode>,
    /// The names lookups see.
    names: BTreeMap<PathBuf, u64>,
    /// The names on the disk as of each directory's last sync.
    durable_names: BTreeMap<PathBuf, u64>,
    /// Changes to directories since their last sync, in order.
    dir_changes: Vec<DirChange>,
    faults: Faults,
    rng: Rng,
    /// Faults asked for explicitly, taken before any drawn from the seed.
    next_write: Option<io::ErrorKind>,
    next_sync: Option<io::ErrorKind>,
    next_id: u64,
    /// Successful syncs so far.
    syncs: u64,
    /// Operations that change the file system so far.
    steps: u64,
    /// The power goes once this many operations have run: every one after fails.
    stop_at: Option<u64>,
    /// Syncs return only once this is false again (their outcome is decided when called).
    held: bool,
    /// Syncs waiting to return.
    in_sync: usize,
}

#[derive(Debug, Clone, Default)]
struct Inode {
    /// What reads see.
    current: Vec<u8>,
    /// On the disk as of the last successful sync.
    durable: Vec<u8>,
    /// Changes since, in order; a change a failed sync was to make durable is `lost`.
    pending: Vec<Pending>,
    exclusive: Option<u64>,
    shared: Vec<u64>,
    /// Failed syncs so far, and how many of them each handle open on the file has been told
    /// of: as Linux does (`errseq_t`), a sync through any handle open when a sync failed
    /// reports that failure once, whichever handle's writes it took.
    errors: u64,
    told: BTreeMap<u64, u64>,
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

/// A change to a directory's names.
#[derive(Debug, Clone)]
enum DirChange {
    /// `path` names `inode` (a file created, or linked).
    Link { path: PathBuf, inode: u64 },
    /// `from` becomes `to`, replacing what `to` named.
    Rename { from: PathBuf, to: PathBuf },
    /// `path` names nothing any more.
    Unlink { path: PathBuf },
}

impl DirChange {
    fn dir(&self) -> Option<&Path> {
        match self {
            DirChange::Link { path, .. } => path.parent(),
            DirChange::Rename { to, .. } => to.parent(),
            DirChange::Unlink { path } => path.parent(),
        }
    }

    fn apply(&self, names: &mut BTreeMap<PathBuf, u64>) {
        match self {
            DirChange::Link { path, inode } => {
                names.insert(path.clone(), *inode);
            }
            DirChange::Rename { from, to } => {
                if let Some(inode) = names.remove(from) {
                    names.insert(to.clone(), inode);
                }
            }
            DirChange::Unlink { path } => {
                names.remove(path);
            }
        }
    }
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
    /// Counts an operation that changes the file system; fails once the power is gone.
    fn step(&mut self) -> io::Result<()> {
        if self.stop_at.is_some_and(|at| self.steps >= at) {
            return Err(io::Error::other("simulated power cut"));
        }
        self.steps += 1;
        Ok(())
    }

    /// Fails with the fault asked for, if any, or else one drawn with `chance` per mille.
    fn fault(&mut self, asked: Option<io::ErrorKind>, chance: u32) -> io::Result<()> {
        let drawn = || {
            self.rng.per_mille(chance).then(|| {
                if self.rng.below(2) == 0 {
                    io::ErrorKind::Other // EIO
                } else {
                    io::ErrorKind::StorageFull // ENOSPC
                }
            })
        };
        match asked.or_else(drawn) {
            Some(kind) => Err(error(kind)),
            None => Ok(()),
        }
    }

    /// A write or creation fault, asked for or drawn.
    fn write_fault(&mut self) -> io::Result<()> {
        let asked = self.next_write.take();
        self.fault(asked, self.faults.write_error)
    }

    /// A sync fault, asked for or drawn.
    fn sync_fault(&mut self) -> io::Result<()> {
        let asked = self.next_sync.take();
        self.fault(asked, self.faults.sync_error)
    }

    fn new_inode(&mut self, inode: Inode) -> u64 {
        self.next_id += 1;
        self.inodes.insert(self.next_id, inode);
        self.next_id
    }

    fn inode(&mut self, id: u64) -> io::Result<&mut Inode> {
        self.inodes
            .get_mut(&id)
            .ok_or_else(|| error(io::ErrorKind::NotFound))
    }

    /// Makes the changes to `dir`'s names durable.
    fn sync_dir(&mut self, dir: Option<&Path>) {
        let (synced, kept) = std::mem::take(&mut self.dir_changes)
            .into_iter()
            .partition::<Vec<_>, _>(|c| c.dir() == dir);
        for change in synced {
            change.apply(&mut self.durable_names);
        }
        self.dir_changes = kept;
    }

    /// Appends `data` at the end of inode `id`, all of it.
    fn append(&mut self, id: u64, data: Vec<u8>) -> io::Result<usize> {
        let inode = self.inode(id)?;
        let change = Change::Write {
            at: inode.current.len() as u64,
            data,
        };
        apply(&mut inode.current, &change);
        let Change::Write { data, .. } = &change else {
            unreachable!()
        };
        let n = data.len();
        inode.pending.push(Pending {
            change,
            lost: false,
        });
        Ok(n)
    }

    /// Syncs inode `id` through `handle`: decides the outcome, the disk's state with it.
    fn sync_inode(&mut self, id: u64, handle: u64) -> io::Result<()> {
        self.step()?;
        let failed = self.sync_fault();
        let inode = self.inode(id)?;
        if let Err(e) = failed {
            // The writes it covered may never reach the disk; other handles learn of it at
            // their next sync.
            for p in &mut inode.pending {
                p.lost = true;
            }
            inode.errors += 1;
            inode.told.insert(handle, inode.errors);
            return Err(e);
        }
        let told = inode.told.entry(handle).or_insert(inode.errors);
        if *told < inode.errors {
            *told = inode.errors;
            return Err(io::Error::other("simulated fault, of an earlier sync"));
        }
        let inode = self.inode(id)?;
        for p in inode.pending.drain(..) {
            match p.change {
                // Lost for good, but the length it set, which later writes extend.
                Change::Write { at, ref data } if p.lost => {
                    let end = (at as usize + data.len()).max(inode.durable.len());
                    inode.durable.resize(end, 0);
                }
                ref change => apply(&mut inode.durable, change),
            }
        }
        inode.durable.resize(inode.current.len(), 0);
        self.syncs += 1;
        Ok(())
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
                inodes: BTreeMap::new(),
                names: BTreeMap::new(),
                durable_names: BTreeMap::new(),
                dir_changes: Vec::new(),
                faults: Faults::default(),
                rng: Rng(seed),
                next_write: None,
                next_sync: None,
                next_id: 0,
                syncs: 0,
                steps: 0,
                stop_at: None,
                held: false,
                in_sync: 0,
            })),
            gate: Arc::new(Condvar::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Sim> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `fsync` of the directory holding `path`: a step that may fail; its names durable.
    fn sync_dir_of(&self, path: &Path) -> io::Result<()> {
        let mut sim = self.lock();
        sim.step()?;
        sim.sync_fault()?;
        sim.sync_dir(path.parent());
        Ok(())
    }

    /// Writes `bufs` at the end of inode `id`: all of it, or, as a fault, part of it.
    fn append(&self, id: u64, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let mut sim = self.lock();
        sim.step()?;
        sim.write_fault()?;
        let mut data: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
        let chance = sim.faults.short_write;
        if data.len() > 1 && sim.rng.per_mille(chance) {
            data.truncate(1 + sim.rng.below(data.len() as u64 - 1) as usize);
        }
        sim.append(id, data)
    }

    /// Injects `faults` from now on, drawn from the seed.
    pub fn set_faults(&self, faults: Faults) {
        self.lock().faults = faults;
    }

    /// The next write (or creation) fails with `kind` (`Other` for `EIO`, `StorageFull` for
    /// `ENOSPC`).
    pub fn fail_next_write(&self, kind: io::ErrorKind) {
        self.lock().next_write = Some(kind);
    }

    /// The next sync fails with `kind`.
    pub fn fail_next_sync(&self, kind: io::ErrorKind) {
        self.lock().next_sync = Some(kind);
    }

    /// Cuts the power after `steps` more operations that change the file system (creating,
    /// naming, writing, cutting or syncing a file, syncing a directory): every one after them
    /// fails. [`crashed`](Self::crashed) then gives what a power cut there leaves.
    pub fn stop_after(&self, steps: u64) {
        let mut sim = self.lock();
        sim.stop_at = Some(sim.steps + steps);
    }

    /// Whether the power was cut by [`stop_after`](Self::stop_after).
    pub fn stopped(&self) -> bool {
        let sim = self.lock();
        sim.stop_at.is_some_and(|at| sim.steps >= at)
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
        let sim = self.lock();
        let id = sim.names.get(path.as_ref())?;
        sim.inodes.get(id).map(|f| f.current.clone())
    }

    /// The files on the disk, in one look: each name as of its directory's last sync, with
    /// its bytes as of the file's last sync. What a power cut now leaves holds at least these
    /// bytes, under these names or those the directories' unsynced changes give them.
    pub fn synced(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        let sim = self.lock();
        sim.durable_names
            .iter()
            .filter_map(|(path, id)| Some((path.clone(), sim.inodes.get(id)?.durable.clone())))
            .collect()
    }

    /// The names of the files in the directory `dir` now, sorted.
    pub fn list(&self, dir: impl AsRef<Path>) -> Vec<PathBuf> {
        let sim = self.lock();
        sim.names
            .keys()
            .filter(|p| p.parent() == Some(dir.as_ref()))
            .cloned()
            .collect()
    }

    /// Puts a file with `bytes` at `path`, synced (its name included).
    pub fn insert(&self, path: impl AsRef<Path>, bytes: Vec<u8>) {
        let mut sim = self.lock();
        let id = sim.new_inode(Inode {
            current: bytes.clone(),
            durable: bytes,
            ..Inode::default()
        });
        let path = path.as_ref().to_path_buf();
        sim.names.insert(path.clone(), id);
        sim.durable_names.insert(path, id);
    }

    /// Renames `from` to `to` (`rename(2)`, replacing what `to` named), as log rotation does;
    /// durable once the directory is synced.
    pub fn rename(&self, from: impl AsRef<Path>, to: impl AsRef<Path>) -> io::Result<()> {
        let mut sim = self.lock();
        sim.step()?;
        if !sim.names.contains_key(from.as_ref()) {
            return Err(error(io::ErrorKind::NotFound));
        }
        let change = DirChange::Rename {
            from: from.as_ref().to_path_buf(),
            to: to.as_ref().to_path_buf(),
        };
        change.apply(&mut sim.names);
        sim.dir_changes.push(change);
        Ok(())
    }

    /// Syncs successful so far.
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
        // Of each directory's changes since its last sync, a prefix.
        let mut dirs: BTreeMap<Option<&Path>, usize> = BTreeMap::new();
        for change in &sim.dir_changes {
            *dirs.entry(change.dir()).or_default() += 1;
        }
        let mut keep: BTreeMap<Option<&Path>, usize> = dirs
            .into_iter()
            .map(|(dir, n)| (dir, rng.below(n as u64 + 1) as usize))
            .collect();
        let mut names = sim.durable_names.clone();
        for change in &sim.dir_changes {
            let left = keep.get_mut(&change.dir()).expect("counted");
            if *left > 0 {
                *left -= 1;
                change.apply(&mut names);
            }
        }
        let mut inodes = BTreeMap::new();
        for id in names.values() {
            if inodes.contains_key(id) {
                continue;
            }
            let bytes = crash_file(&sim.inodes[id], &mut rng);
            let inode = Inode {
                current: bytes.clone(),
                durable: bytes,
                ..Inode::default()
            };
            inodes.insert(*id, inode);
        }
        {
            let mut state = after.lock();
            state.next_id = sim.next_id;
            state.inodes = inodes;
            state.durable_names = names.clone();
            state.names = names;
        }
        after
    }
}

/// The bytes of `file` on the disk after a power cut, as `rng` chooses.
fn crash_file(file: &Inode, rng: &mut Rng) -> Vec<u8> {
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
        let inode = match sim.names.get(path) {
            Some(&inode) => inode,
            None => {
                sim.step()?;
                sim.write_fault()?;
                let inode = sim.new_inode(Inode::default());
                let change = DirChange::Link {
                    path: path.to_path_buf(),
                    inode,
                };
                change.apply(&mut sim.names);
                sim.dir_changes.push(change);
                inode
            }
        };
        sim.next_id += 1;
        let id = sim.next_id;
        let file = sim.inode(inode)?;
        file.told.insert(id, file.errors);
        Ok(Arc::new(SimHandle {
            fs: self.clone(),
            path: path.to_path_buf(),
            inode,
            id,
        }))
    }

    fn create_new(&self, path: &Path) -> io::Result<Arc<dyn NewHandle>> {
        let mut sim = self.lock();
        sim.step()?;
        sim.write_fault()?;
        let inode = sim.new_inode(Inode::default());
        Ok(Arc::new(SimNew {
            fs: self.clone(),
            path: path.to_path_buf(),
            inode,
            id: inode,
        }))
    }

    fn open_existing(&self, path: &Path) -> io::Result<Arc<dyn Handle>> {
        if !self.lock().names.contains_key(path) {
            return Err(error(io::ErrorKind::NotFound));
        }
        self.open_append(path)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        Ok(SimFs::list(self, dir))
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut sim = self.lock();
        sim.step()?;
        if !sim.names.contains_key(path) {
            return Err(error(io::ErrorKind::NotFound));
        }
        let change = DirChange::Unlink {
            path: path.to_path_buf(),
        };
        change.apply(&mut sim.names);
        sim.dir_changes.push(change);
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut sim = self.lock();
        sim.step()?;
        sim.sync_fault()?;
        sim.sync_dir(Some(dir));
        Ok(())
    }
}

/// A file open on a [`SimFs`].
#[derive(Debug)]
struct SimHandle {
    fs: SimFs,
    /// The name it was opened by.
    path: PathBuf,
    inode: u64,
    /// This handle, for locks.
    id: u64,
}

impl SimHandle {
    fn with<T>(&self, f: impl FnOnce(&mut Inode) -> io::Result<T>) -> io::Result<T> {
        f(self.fs.lock().inode(self.inode)?)
    }
}

impl Handle for SimHandle {
    fn len(&self) -> io::Result<u64> {
        self.with(|file| Ok(file.current.len() as u64))
    }

    fn contents(&self) -> Result<Contents> {
        Ok(Contents::Read(self.with(|file| Ok(file.current.clone()))?))
    }

    fn append(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.fs.append(self.inode, bufs)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut sim = self.fs.lock();
        sim.step()?;
        sim.write_fault()?;
        let file = sim.inode(self.inode)?;
        let change = Change::SetLen(len);
        apply(&mut file.current, &change);
        file.pending.push(Pending {
            change,
            lost: false,
        });
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        let mut sim = self.fs.lock();
        let result = sim.sync_inode(self.inode, self.id);
        sim.in_sync += 1;
        self.fs.gate.notify_all();
        while sim.held {
            sim = self.fs.gate.wait(sim).unwrap_or_else(|e| e.into_inner());
        }
        sim.in_sync -= 1;
        result
    }

    fn sync_entry(&self) -> io::Result<()> {
        self.fs.sync_dir_of(&self.path)
    }

    fn try_lock(&self) -> io::Result<bool> {
        self.with(|file| {
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
        self.with(|file| {
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
        if let Ok(file) = self.fs.lock().inode(self.inode) {
            if file.exclusive == Some(self.id) {
                file.exclusive = None;
            }
            file.shared.retain(|&id| id != self.id);
            file.told.remove(&self.id);
        }
    }
}

/// A new file on a [`SimFs`], without a name until placed.
#[derive(Debug)]
struct SimNew {
    fs: SimFs,
    path: PathBuf,
    inode: u64,
    /// The handle, for syncs.
    id: u64,
}

impl NewHandle for SimNew {
    fn append(&self, buf: &[u8]) -> io::Result<usize> {
        self.fs.append(self.inode, &[IoSlice::new(buf)])
    }

    fn sync(&self) -> io::Result<()> {
        self.fs.lock().sync_inode(self.inode, self.id)
    }

    fn place(&self, replace: bool) -> io::Result<()> {
        let mut sim = self.fs.lock();
        sim.step()?;
        if !replace {
            // `linkat` of the unnamed file to its name, which fails if the name is taken.
            if sim.names.contains_key(&self.path) {
                return Err(error(io::ErrorKind::AlreadyExists));
            }
            let change = DirChange::Link {
                path: self.path.clone(),
                inode: self.inode,
            };
            change.apply(&mut sim.names);
            sim.dir_changes.push(change);
            return Ok(());
        }
        // `linkat` to a temporary name, then `rename` over the final one: two steps.
        let temp = super::temp_path(&self.path);
        let link = DirChange::Link {
            path: temp.clone(),
            inode: self.inode,
        };
        link.apply(&mut sim.names);
        sim.dir_changes.push(link);
        sim.step()?;
        let rename = DirChange::Rename {
            from: temp,
            to: self.path.clone(),
        };
        rename.apply(&mut sim.names);
        sim.dir_changes.push(rename);
        Ok(())
    }

    fn sync_entry(&self) -> io::Result<()> {
        self.fs.sync_dir_of(&self.path)
    }
}
