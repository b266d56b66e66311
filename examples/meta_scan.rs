//! How much of a large file the metadata scan reads, against a full read: pages resident in
//! the page cache after a cold scan (mincore), page faults (getrusage) and wall time. One row
//! times opening and dropping the mapping alone, what every mapped read pays before reading.
//!
//! ```text
//! cargo build --release && cargo run --release --example meta_scan [FILE]
//! ```
//!
//! FILE (or `COBSFILE_META_FILE`; default `/tmp/cobsfile-meta-scan.cobs`) is built once and
//! reused: 1024 data blocks of 1 MiB of random (incompressible) records, uncompressed, with a
//! metadata block before every 64th, about 1 GiB. "Cold" runs first write the file back and
//! drop it from the page cache (`posix_fadvise(POSIX_FADV_DONTNEED)`), checked with mincore;
//! "warm" runs follow a run that read what they need. Times are medians of `RUNS` runs. The
//! `cobsfile` binary is taken from next to this example's directory (`COBSFILE_BIN` to
//! override). A damaged copy (`FILE.damaged`, removed at the end) has a data block's length
//! field and another data block's body flipped. Linux only.

#[cfg(target_os = "linux")]
fn main() {
    bench::main();
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("meta_scan measures the page cache with Linux interfaces; it runs on Linux only");
}

#[cfg(target_os = "linux")]
mod os {
    //! The operating system's view of a file: pages in the page cache, eviction, page faults.

    use std::fs::File;
    use std::io;
    use std::os::fd::AsRawFd;

    /// The page size in bytes.
    pub fn page_size() -> usize {
        // SAFETY: sysconf reads a configuration value; it has no memory effects.
        let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        usize::try_from(size).unwrap_or(4096)
    }

    /// Pages of `file` in the page cache, and its length in pages.
    pub fn resident(file: &File) -> io::Result<(usize, usize)> {
        let len = file.metadata()?.len() as usize;
        if len == 0 {
            return Ok((0, 0));
        }
        // SAFETY: the mapping is only passed to mincore, never read, so a concurrent change
        // to the file cannot affect this code; the caller does not truncate the file.
        let map = unsafe { memmap2::Mmap::map(file)? };
        let pages = len.div_ceil(page_size());
        let mut vec = vec![0u8; pages];
        // SAFETY: `map` is a live mapping of `len` bytes at a page-aligned address, and `vec`
        // holds one byte for each of its pages, as mincore writes.
        let rc = unsafe { libc::mincore(map.as_ptr() as *mut libc::c_void, len, vec.as_mut_ptr()) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok((vec.iter().filter(|&&b| b & 1 != 0).count(), pages))
    }

    /// Writes `file` back and drops its pages from the page cache.
    pub fn evict(file: &File) -> io::Result<()> {
        file.sync_all()?;
        // SAFETY: posix_fadvise takes a file descriptor, which `file` keeps open, and plain
        // integers; it touches no memory of this process.
        let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok(())
    }

    /// Page faults so far, minor and major: of this process, or (`children`) of its children
    /// that have been waited for.
    pub fn faults(children: bool) -> (i64, i64) {
        let who = if children {
            libc::RUSAGE_CHILDREN
        } else {
            libc::RUSAGE_SELF
        };
        // SAFETY: an all-zero rusage is a valid value of this plain C struct.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `usage` is a valid, writable rusage for getrusage to fill.
        let rc = unsafe { libc::getrusage(who, &mut usage) };
        assert_eq!(rc, 0, "getrusage: {}", io::Error::last_os_error());
        (usage.ru_minflt, usage.ru_majflt)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn counts_pages_read_and_faults() {
            let path = std::env::temp_dir().join(format!("meta-scan-os-{}", std::process::id()));
            let pages = 8;
            std::fs::write(&path, vec![7u8; pages * page_size()]).unwrap();
            let file = File::open(&path).unwrap();
            std::fs::read(&path).unwrap();
            assert_eq!(resident(&file).unwrap(), (pages, pages));
            // A tmpfs keeps its pages; on other file systems they go.
            evict(&file).unwrap();
            assert!(resident(&file).unwrap().0 <= pages);
            std::fs::remove_file(&path).unwrap();

            let before = faults(false);
            let mut touched = vec![0u8; 64 * page_size()];
            for page in touched.chunks_mut(page_size()) {
                page[0] = 1;
            }
            std::hint::black_box(&touched);
            assert!(faults(false).0 > before.0);
            assert!(faults(true).0 >= 0);
        }
    }
}

#[cfg(target_os = "linux")]
mod bench {
    use std::fs::File;
    use std::io::{Seek, SeekFrom, Write};
    use std::path::{Path, PathBuf};
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    use cobsfile::{BlockType, Error, MappedFile, WriterBuilder};

    use crate::os;

    const BLOCK: usize = 1 << 20;
    const DATA_BLOCKS: u64 = 1024;
    const METADATA_EVERY: u64 = 64;
    const METADATA_BLOCKS: usize = (DATA_BLOCKS / METADATA_EVERY) as usize;
    /// With its 2-byte length prefix, 256 records fill a 1 MiB block exactly.
    const RECORD: usize = 4094;
    const RECORDS: u64 = DATA_BLOCKS * (BLOCK / (RECORD + 2)) as u64;
    const RUNS: usize = 5;
    /// Mappings opened and dropped in one run of the opening row.
    const OPENS: usize = 1000;

    /// SplitMix64, for incompressible records.
    struct Rng(u64);

    impl Rng {
        fn fill(&mut self, out: &mut [u8]) {
            for chunk in out.chunks_mut(8) {
                self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
                let mut z = self.0;
                z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                chunk.copy_from_slice(&(z ^ (z >> 31)).to_le_bytes()[..chunk.len()]);
            }
        }
    }

    /// Writes the test file at `path` unless a file of the right size is there already.
    fn build(path: &Path) {
        let expected = 1u64 << 30;
        if std::fs::metadata(path).is_ok_and(|m| m.len() > expected) {
            println!("reusing {}", path.display());
            return;
        }
        println!("building {} ...", path.display());
        let partial = path.with_extension("partial");
        let out = File::create(&partial).expect("create");
        let mut writer = WriterBuilder::new()
            .block_target(BLOCK)
            .build(out)
            .expect("writer");
        let mut rng = Rng(42);
        let mut record = vec![0u8; RECORD];
        for block in 0..DATA_BLOCKS {
            if block % METADATA_EVERY == 0 {
                let entries = [
                    ("first-block", block.to_string()),
                    ("source", "meta_scan".into()),
                ];
                writer.write_metadata(entries).expect("metadata");
            }
            for _ in 0..BLOCK / (RECORD + 2) {
                rng.fill(&mut record);
                writer.write_record(&record).expect("record");
            }
        }
        writer.finish().expect("finish").sync_all().expect("sync");
        std::fs::rename(&partial, path).expect("rename");
    }

    /// What one measured run did.
    #[derive(Clone, Copy)]
    struct Run {
        wall: Duration,
        /// Pages of the file resident after the run.
        resident: usize,
        minor: i64,
        major: i64,
    }

    /// A row of the table: the median run of several.
    struct Row {
        what: String,
        runs: usize,
        median: Run,
    }

    /// The file as the measurements see it.
    struct Subject {
        file: File,
        pages: usize,
    }

    impl Subject {
        fn new(path: &Path) -> Self {
            let file = File::open(path).expect("open");
            let pages = os::resident(&file).expect("mincore").1;
            Subject { file, pages }
        }

        fn resident(&self) -> usize {
            os::resident(&self.file).expect("mincore").0
        }

        /// Drops the file from the page cache and checks that it went.
        fn evict(&self) {
            os::evict(&self.file).expect("posix_fadvise");
            let left = self.resident();
            assert!(
                left * 1000 <= self.pages,
                "{left} of {} pages still resident after eviction",
                self.pages
            );
        }

        /// Runs `f` `runs` times (evicting the file first if `cold`) and returns the median
        /// run by wall time; `children` counts the faults of child processes instead.
        fn measure(
            &self,
            what: &str,
            runs: usize,
            cold: bool,
            children: bool,
            mut f: impl FnMut(),
        ) -> Row {
            let mut all: Vec<Run> = (0..runs)
                .map(|_| {
                    if cold {
                        self.evict();
                    }
                    let (minor, major) = os::faults(children);
                    let start = Instant::now();
                    f();
                    let wall = start.elapsed();
                    let (minor_after, major_after) = os::faults(children);
                    Run {
                        wall,
                        resident: self.resident(),
                        minor: minor_after - minor,
                        major: major_after - major,
                    }
                })
                .collect();
            all.sort_by_key(|run| run.wall);
            let row = Row {
                what: what.to_owned(),
                runs,
                median: all[runs / 2],
            };
            eprintln!("{}: {:?}", row.what, row.median.wall);
            row
        }
    }

    /// The advised mapped scan: every metadata block and the damage met.
    fn scan(path: &Path) -> (usize, usize) {
        let file = MappedFile::open(path).expect("map");
        count(file.metadata())
    }

    /// Maps the file, reads its first byte and drops the mapping, `OPENS` times: what opening
    /// a file costs a reader before it reads anything.
    fn open_and_drop(path: &Path) {
        for _ in 0..OPENS {
            let file = MappedFile::open(path).expect("map");
            std::hint::black_box(file.bytes()[0]);
        }
    }

    /// The same scan through a plain reader over the mapping, without the advice.
    fn scan_unadvised(path: &Path) -> (usize, usize) {
        let file = MappedFile::open(path).expect("map");
        count(file.reader().metadata())
    }

    fn count(items: impl Iterator<Item = cobsfile::Result<cobsfile::Metadata>>) -> (usize, usize) {
        let (mut found, mut damaged) = (0, 0);
        for item in items {
            match item {
                Ok(_) => found += 1,
                Err(Error::Damaged { .. }) => damaged += 1,
                Err(e) => panic!("{e}"),
            }
        }
        (found, damaged)
    }

    /// Every record through the library: records and bytes.
    fn full_read(path: &Path) -> (u64, u64) {
        let file = MappedFile::open(path).expect("map");
        let mut reader = file.reader();
        let (mut records, mut bytes) = (0, 0);
        while let Some(record) = reader.next_record() {
            records += 1;
            bytes += record.expect("intact").len() as u64;
        }
        (records, bytes)
    }

    /// Runs a command with stdout to /dev/null; returns its exit code.
    fn run(program: &Path, args: &[&Path]) -> i32 {
        Command::new(program)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("spawn")
            .code()
            .unwrap_or(-1)
    }

    fn cobsfile_bin() -> PathBuf {
        if let Some(bin) = std::env::var_os("COBSFILE_BIN") {
            return bin.into();
        }
        let exe = std::env::current_exe().expect("current exe");
        let bin = exe
            .parent()
            .and_then(Path::parent)
            .expect("target dir")
            .join("cobsfile");
        assert!(
            bin.exists(),
            "{} not found: run `cargo build --release` first",
            bin.display()
        );
        bin
    }

    /// A copy of the file with the length field of the data block before the metadata block
    /// at `metadata_index` and the middle of a later data block's body flipped. Returns the
    /// copy's path and the offset of the damaged length's block.
    fn damaged_copy(path: &Path, metadata_index: usize) -> (PathBuf, u64) {
        let copy = path.with_extension("damaged");
        std::fs::copy(path, &copy).expect("copy");
        let file = MappedFile::open(&copy).expect("map");
        let blocks: Vec<_> = file
            .reader()
            .blocks()
            .map(|b| b.expect("clean copy"))
            .collect();
        let metadata = blocks
            .iter()
            .enumerate()
            .filter(|(_, b)| b.block_type == BlockType::Metadata)
            .nth(metadata_index)
            .expect("metadata block")
            .0;
        let victim = &blocks[metadata - 1];
        let body_victim = &blocks[metadata + 10];
        assert_eq!(
            (victim.block_type, body_victim.block_type),
            (BlockType::Data, BlockType::Data)
        );
        // Type 3 is one varint byte; the 4-byte length field follows. Flip its second byte.
        let flips = [victim.offset + 3, body_victim.offset + body_victim.size / 2];
        let bytes = file.bytes();
        let patched: Vec<u8> = flips
            .iter()
            .map(|&at| {
                bytes[at as usize]
                    ^ if bytes[at as usize] == 0x10 {
                        0x20
                    } else {
                        0x10
                    }
            })
            .collect();
        let victim_offset = victim.offset;
        drop(file);
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .open(&copy)
            .expect("open copy");
        for (at, byte) in flips.iter().zip(patched) {
            out.seek(SeekFrom::Start(*at)).expect("seek");
            out.write_all(&[byte]).expect("write");
        }
        out.sync_all().expect("sync");
        (copy, victim_offset)
    }

    fn print(rows: &[Row], pages: usize) {
        let page = os::page_size();
        println!();
        println!("| run | runs | wall (median) | file pages resident after | = MiB | % of file | minor faults | major faults |");
        println!("|---|---|---|---|---|---|---|---|");
        for row in rows {
            let r = row.median;
            println!(
                "| {} | {} | {:.2} ms | {} | {:.1} | {:.2} % | {} | {} |",
                row.what,
                row.runs,
                r.wall.as_secs_f64() * 1e3,
                r.resident,
                (r.resident * page) as f64 / (1 << 20) as f64,
                100.0 * r.resident as f64 / pages as f64,
                r.minor,
                r.major,
            );
        }
    }

    pub fn main() {
        let path: PathBuf = std::env::args_os()
            .nth(1)
            .or_else(|| std::env::var_os("COBSFILE_META_FILE"))
            .map_or_else(|| "/tmp/cobsfile-meta-scan.cobs".into(), PathBuf::from);
        let bin = cobsfile_bin();
        build(&path);
        let subject = Subject::new(&path);
        let size = subject.file.metadata().expect("stat").len();
        println!(
            "{}: {size} bytes, {} pages of {} bytes; {DATA_BLOCKS} data blocks of {BLOCK} bytes of records, {METADATA_BLOCKS} metadata blocks",
            path.display(),
            subject.pages,
            os::page_size(),
        );

        let expect_clean = |(found, damaged): (usize, usize)| {
            assert_eq!(
                (found, damaged),
                (METADATA_BLOCKS, 0),
                "metadata blocks, damage"
            );
        };
        let mut rows = Vec::new();
        rows.push(subject.measure("library scan, cold", 3, true, false, || {
            expect_clean(scan(&path))
        }));
        rows.push(
            subject.measure("library scan, warm", RUNS, false, false, || {
                expect_clean(scan(&path))
            }),
        );
        rows.push(subject.measure(
            &format!("{OPENS} x open, read a byte, drop (`MappedFile::open`), warm"),
            RUNS,
            false,
            false,
            || open_and_drop(&path),
        ));
        rows.push(subject.measure("`cobsfile meta`, cold", 3, true, true, || {
            assert_eq!(run(&bin, &[Path::new("meta"), &path]), 0)
        }));
        rows.push(
            subject.measure("`cobsfile meta`, warm", RUNS, false, true, || {
                assert_eq!(run(&bin, &[Path::new("meta"), &path]), 0)
            }),
        );
        rows.push(
            subject.measure("library scan without advice, cold", 3, true, false, || {
                expect_clean(scan_unadvised(&path))
            }),
        );
        rows.push(subject.measure("`cat`, cold", 1, true, true, || {
            assert_eq!(run(Path::new("cat"), &[&path]), 0)
        }));
        rows.push(subject.measure("`cat`, warm", RUNS, false, true, || {
            assert_eq!(run(Path::new("cat"), &[&path]), 0)
        }));
        rows.push(subject.measure("`cobsfile cat`, warm", 3, false, true, || {
            assert_eq!(run(&bin, &[Path::new("cat"), &path]), 0)
        }));
        rows.push(
            subject.measure("library full read, warm", 3, false, false, || {
                assert_eq!(full_read(&path), (RECORDS, RECORDS * RECORD as u64))
            }),
        );

        let (copy, victim) = damaged_copy(&path, METADATA_BLOCKS / 2);
        println!("damaged copy: length field of the data block at {victim} and a later data body flipped");
        let damaged = Subject::new(&copy);
        let expect_damaged = |(found, damaged): (usize, usize)| {
            assert_eq!(
                (found, damaged),
                (METADATA_BLOCKS, 1),
                "metadata blocks, damage"
            );
        };
        rows.push(
            damaged.measure("damaged copy: library scan, cold", 3, true, false, || {
                expect_damaged(scan(&copy))
            }),
        );
        rows.push(damaged.measure(
            "damaged copy: library scan, warm",
            RUNS,
            false,
            false,
            || expect_damaged(scan(&copy)),
        ));
        drop(damaged);
        std::fs::remove_file(&copy).expect("remove damaged copy");

        print(&rows, subject.pages);
    }
}
