//! Pages of a mapped file that vanish under a reader read as zeros, instead of ending the
//! process (Linux).
//!
//! A mapping shows the file as it is now. When the file shrinks (another process runs
//! `truncate`, or rewrites it through `O_TRUNC`), the pages past its new end are gone, and
//! a load from one of them raises SIGBUS, whose default action ends the process; so does a
//! page the kernel cannot read in (an I/O error) or a poisoned memory page under the file.
//! For the mappings registered here, a handler installed once per process puts a private,
//! read-only page of zeros in place of the lost one and returns: the load runs again and
//! reads zeros, which the readers report as damage (zero-filled data where blocks should be,
//! spec 5 and 9.1), as they would for a file zeroed before it was opened.
//!
//! # How it works, and what a change here must keep true
//!
//! The handler runs in whatever thread faulted, at any instruction, possibly while that
//! thread holds the allocator's lock or any other. So it does only what is safe there: loads
//! of atomics, and the system calls `fstat`, `mmap` and `sigaction` (plus `raise` when it
//! hands the signal on). `fstat`, `sigaction` and `raise` are async-signal-safe by POSIX;
//! `mmap` is not on POSIX's list, but on Linux it is a plain system call wrapper, without
//! locks or allocation, in glibc and musl alike. No allocation, no lock, no panic.
//!
//! * **Registry.** Each live mapping holds a [`Slot`]: its address range and the descriptor
//!   of its file. Slots come in chunks of [`SLOTS`]: the first is static; more are allocated
//!   (outside the handler) when every slot is taken, linked by an atomic pointer and never
//!   freed, so the handler walks them with loads alone and there is no limit on mappings.
//!   A slot is a seqlock: its writer (the mapping that claimed it) makes `seq` odd, changes
//!   the fields, and makes it even again; the handler uses the fields only if it read the
//!   same even `seq` before and after them, and otherwise skips the slot. Skipping is safe:
//!   a slot changes only while its mapping is being made or dropped, and no thread can be
//!   reading a mapping then (its bytes are borrowed from the `MappedFile` that owns it), so
//!   the slot of the faulting mapping is always stable.
//! * **Registration order.** A mapping is registered before any byte of it is handed out
//!   and unregistered before it is unmapped, so the handler never writes zeros over
//!   addresses that something else may have mapped since.
//! * **Zeros.** The handler asks `fstat` for the file's length now. If the faulting page lies
//!   wholly past it, the file shrank: every page from there to the end of the mapping is gone
//!   and is replaced in one `mmap(MAP_FIXED)`, so a reader running on through the lost part
//!   takes one signal, not one per page. Otherwise (an I/O error, a poisoned page, a file
//!   that grew back) only the faulting page is. Replacing pages changes bytes under the
//!   readers' `&[u8]`; see the safety discussion in `mapped.rs` for why that is the lesser
//!   evil and what the readers do about it.
//! * **Other faults.** A SIGBUS outside every registered mapping, or one the kernel did not
//!   raise for a fault (sent with `kill`), goes to the handler installed before this one (the
//!   standard library's, which reports stack overflows), or gets the disposition that was in
//!   place before (ignored, or the default: the process ends as it would have without this
//!   module).
//!
//! A program that installs its own SIGBUS handler after the first mapping is made replaces
//! this one (unless it chains to it); its mappings of files that shrink then end the process
//! again.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::ptr;
use std::sync::atomic::{fence, AtomicBool, AtomicI32, AtomicPtr, AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Slots per chunk of the registry.
const SLOTS: usize = 64;

/// One registered mapping: where it lies and which file it maps. Written only by the mapping
/// that claimed it (`taken`); read by the handler under the seqlock `seq`.
struct Slot {
    taken: AtomicBool,
    /// Even while the fields below are stable, odd while they change.
    seq: AtomicUsize,
    /// The mapping's first address, and one past its last byte (0..0 when free).
    start: AtomicUsize,
    end: AtomicUsize,
    /// The mapped file's descriptor, for `fstat`.
    fd: AtomicI32,
}

impl Slot {
    const fn new() -> Self {
        Slot {
            taken: AtomicBool::new(false),
            seq: AtomicUsize::new(0),
            start: AtomicUsize::new(0),
            end: AtomicUsize::new(0),
            fd: AtomicI32::new(-1),
        }
    }

    /// Changes the fields; only the slot's owner calls this.
    fn publish(&self, start: usize, end: usize, fd: i32) {
        let seq = self.seq.load(Ordering::Relaxed);
        self.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        // Orders the odd `seq` before the field stores, for a handler that reads a new field.
        fence(Ordering::Release);
        self.start.store(start, Ordering::Relaxed);
        self.end.store(end, Ordering::Relaxed);
        self.fd.store(fd, Ordering::Relaxed);
        self.seq.store(seq.wrapping_add(2), Ordering::Release);
    }

    /// The fields, if they were stable while read.
    fn read(&self) -> Option<Mapping> {
        let before = self.seq.load(Ordering::Acquire);
        if before & 1 == 1 {
            return None;
        }
        let mapping = Mapping {
            start: self.start.load(Ordering::Relaxed),
            end: self.end.load(Ordering::Relaxed),
            fd: self.fd.load(Ordering::Relaxed),
        };
        // Orders the field loads before the second load of `seq`.
        fence(Ordering::Acquire);
        (self.seq.load(Ordering::Relaxed) == before).then_some(mapping)
    }
}

/// A slot's fields, read.
#[derive(Clone, Copy)]
struct Mapping {
    start: usize,
    end: usize,
    fd: i32,
}

struct Chunk {
    slots: [Slot; SLOTS],
    next: AtomicPtr<Chunk>,
}

impl Chunk {
    const fn new() -> Self {
        Chunk {
            slots: [const { Slot::new() }; SLOTS],
            next: AtomicPtr::new(ptr::null_mut()),
        }
    }

    fn next(&self) -> Option<&'static Chunk> {
        // SAFETY: `next` is null or points to a chunk leaked by `claim` (never freed), which
        // it published with a release store after initializing it.
        unsafe { self.next.load(Ordering::Acquire).as_ref() }
    }
}

static FIRST: Chunk = Chunk::new();

/// The chunks of the registry, in order.
fn chunks() -> impl Iterator<Item = &'static Chunk> {
    std::iter::successors(Some(&FIRST), |chunk| chunk.next())
}

/// Claims a free slot, adding a chunk when every slot is taken.
fn claim() -> &'static Slot {
    loop {
        let mut last = &FIRST;
        for chunk in chunks() {
            for slot in &chunk.slots {
                let free = slot
                    .taken
                    .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok();
                if free {
                    return slot;
                }
            }
            last = chunk;
        }
        // Every slot is taken: link a new chunk at the end (another thread may have linked
        // one meanwhile; this one then goes after it) and look again.
        let new: &'static Chunk = Box::leak(Box::new(Chunk::new()));
        let mut tail = last;
        while let Err(next) = tail.next.compare_exchange(
            ptr::null_mut(),
            ptr::from_ref(new).cast_mut(),
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            // SAFETY: as in `Chunk::next`: a non-null `next` is a leaked, published chunk.
            tail = unsafe { &*next };
        }
    }
}

/// The registered mapping that holds `addr`, if any.
fn find(addr: usize) -> Option<Mapping> {
    chunks()
        .flat_map(|chunk| &chunk.slots)
        .filter_map(Slot::read)
        .find(|m| m.start <= addr && addr < m.end)
}

/// A mapping registered with the handler; unregistered when dropped, which must happen
/// before the mapping is unmapped.
pub(crate) struct Registration(&'static Slot);

impl std::fmt::Debug for Registration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let m = self.0.read();
        f.debug_struct("Registration")
            .field("range", &m.map(|m| m.start..m.end))
            .finish()
    }
}

/// Registers the mapping of `file` whose bytes are `bytes`, installing the handler first if
/// no mapping has yet. `file` must stay open until the registration is dropped.
pub(crate) fn register(bytes: &[u8], file: &File) -> io::Result<Registration> {
    install()?;
    let slot = claim();
    let start = bytes.as_ptr() as usize;
    slot.publish(start, start + bytes.len(), file.as_raw_fd());
    Ok(Registration(slot))
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.0.publish(0, 0, -1);
        self.0.taken.store(false, Ordering::Release);
    }
}

/// The page size, set before the handler is installed.
static PAGE: AtomicUsize = AtomicUsize::new(0);

/// What SIGBUS did before the handler was installed.
static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();

/// Installs the handler, once per process.
fn install() -> io::Result<()> {
    static INSTALLED: OnceLock<Result<(), i32>> = OnceLock::new();
    let installed = INSTALLED.get_or_init(|| {
        // SAFETY: sysconf reads a configuration value and has no memory effects.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        PAGE.store(usize::try_from(page).unwrap_or(4096), Ordering::Relaxed);
        // SAFETY: all-zero is a valid value of this plain C struct, and sigaction only writes
        // the current action into it.
        let previous = unsafe {
            let mut previous: libc::sigaction = std::mem::zeroed();
            (libc::sigaction(libc::SIGBUS, ptr::null(), &mut previous) == 0).then_some(previous)
        };
        let Some(previous) = previous else {
            return Err(errno());
        };
        // Stored before the handler exists, so the handler always finds it.
        let _ = PREVIOUS.set(previous);
        // SAFETY: all-zero is a valid sigaction; the fields set make it an SA_SIGINFO action
        // whose handler has the signature SA_SIGINFO calls for, blocking no other signal.
        // sigemptyset and sigaction touch only the structs they are given.
        let set = unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_sigbus as *const () as libc::sighandler_t;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(libc::SIGBUS, &action, ptr::null_mut()) == 0
        };
        if set {
            Ok(())
        } else {
            Err(errno())
        }
    });
    installed.map_err(io::Error::from_raw_os_error)
}

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// The handler. See the module documentation for what it may do.
extern "C" fn on_sigbus(
    signal: libc::c_int,
    info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
) {
    // SAFETY: the kernel hands an SA_SIGINFO handler a valid siginfo_t; `si_addr` is the
    // faulting address for the fault codes matched below, and only used for them.
    let (code, addr) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
    let lost_page = matches!(
        code,
        libc::BUS_ADRERR | libc::BUS_OBJERR | libc::BUS_MCEERR_AR
    );
    if lost_page {
        if let Some(mapping) = find(addr) {
            if keeping_errno(|| zero_fill(addr, mapping)) {
                return;
            }
        }
    }
    // A fault of the faulting instruction, which the kernel delivers even when SIGBUS is
    // ignored (and raises again if the handler returns), as against a signal sent with `kill`
    // or a report of a poisoned page no one is reading (BUS_MCEERR_AO).
    let fault = lost_page || code == libc::BUS_ADRALN;
    hand_on(signal, info, context, fault);
}

/// Runs `f`, then puts this thread's errno back as it was: the system calls `f` makes may set
/// it, and the code the signal interrupted may be about to read it.
fn keeping_errno<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: __errno_location returns a pointer to this thread's errno, valid for as long as
    // the thread lives; it is read and written on this thread only.
    let errno = unsafe { libc::__errno_location() };
    // SAFETY: as above.
    let saved = unsafe { errno.read() };
    let result = f();
    // SAFETY: as above.
    unsafe { errno.write(saved) };
    result
}

/// Puts zero pages in place of the lost page of `mapping` at `addr` (and of every page after
/// it, if the file now ends before it); whether that worked.
fn zero_fill(addr: usize, mapping: Mapping) -> bool {
    let page = PAGE.load(Ordering::Relaxed);
    let first = addr & !(page - 1);
    let mapped_end = mapping.end.next_multiple_of(page);
    // SAFETY: all-zero is a valid value of this plain C struct, and fstat only writes into it;
    // the descriptor is the mapping's, open while it is registered.
    let stat = unsafe {
        let mut stat: libc::stat = std::mem::zeroed();
        (libc::fstat(mapping.fd, &mut stat) == 0).then_some(stat)
    };
    // Unknown: the page alone is replaced.
    let len_now = stat.map_or(u64::MAX, |stat| u64::try_from(stat.st_size).unwrap_or(0));
    // The mapping starts at offset 0 of the file, page-aligned.
    let offset = (first - mapping.start) as u64;
    let len = if len_now <= offset {
        mapped_end - first
    } else {
        page
    };
    // SAFETY: `first..first + len` lies within the registered mapping, which is live (the
    // faulting thread borrows it) and which this crate only ever reads. MAP_FIXED replaces
    // those pages of it, and nothing else, with private read-only zero pages; the mapping's
    // owner unmaps the whole range when it is dropped, these pages included.
    let mapped = unsafe {
        libc::mmap(
            first as *mut libc::c_void,
            len,
            libc::PROT_READ,
            libc::MAP_FIXED | libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    mapped != libc::MAP_FAILED
}

/// Hands a SIGBUS that is not a lost page of a registered mapping to what SIGBUS did before;
/// `fault` says the kernel raised it for the faulting instruction.
fn hand_on(
    signal: libc::c_int,
    info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
    fault: bool,
) {
    let previous = PREVIOUS.get();
    let handler = previous.map_or(libc::SIG_DFL, |p| p.sa_sigaction);
    if handler == libc::SIG_IGN && !fault {
        return;
    }
    if let Some(previous) =
        previous.filter(|_| handler != libc::SIG_DFL && handler != libc::SIG_IGN)
    {
        if previous.sa_flags & libc::SA_SIGINFO != 0 {
            // SAFETY: with SA_SIGINFO, `sa_sigaction` is a handler of this signature, which
            // expects exactly the arguments the kernel gave this one.
            let handler = unsafe {
                std::mem::transmute::<
                    libc::sighandler_t,
                    extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void),
                >(handler)
            };
            handler(signal, info, context);
        } else {
            // SAFETY: without SA_SIGINFO, `sa_sigaction` is a plain `void (*)(int)` handler.
            let handler = unsafe {
                std::mem::transmute::<libc::sighandler_t, extern "C" fn(libc::c_int)>(handler)
            };
            handler(signal);
        }
        return;
    }
    // The default action, which ends the process (and which the kernel takes for a fault even
    // when SIGBUS is ignored): restored for good, and the signal raised again, to be delivered
    // as soon as this handler returns.
    // SAFETY: an all-zero sigaction with SIG_DFL is a valid action; sigaction reads it and
    // raise sends a signal to this thread, both async-signal-safe.
    unsafe {
        let mut default: libc::sigaction = std::mem::zeroed();
        default.sa_sigaction = libc::SIG_DFL;
        libc::sigaction(signal, &default, ptr::null_mut());
        libc::raise(signal);
    }
}
