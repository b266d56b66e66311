//! The metadata scan of a mapped file (`MappedFile::metadata`) returns the same metadata as a
//! full read, on clean files and after damage to data blocks, and advises the mapping for
//! random access only while it runs.

mod common;

use cobsfile::{BlockInfo, BlockType, Error, MappedFile, Metadata, ReaderBuilder, WriterBuilder};
use common::{record_bytes, Content, TempFile};

/// 48 data blocks of about 4 KiB, a metadata block before every 8th.
fn sample() -> Vec<u8> {
    let mut writer = WriterBuilder::new()
        .block_target(4096)
        .build(Vec::new())
        .expect("build");
    for block in 0..48u64 {
        if block % 8 == 0 {
            writer
                .write_metadata([("block", block.to_string()), ("kind", "sample".into())])
                .expect("metadata");
        }
        for i in 0..4 {
            let record = record_bytes(1000, Content::Random, block * 4 + i);
            writer.write_record(&record).expect("record");
        }
        writer.flush().expect("flush");
    }
    writer.finish().expect("finish")
}

/// The metadata blocks a full read finds.
fn full_read(bytes: &[u8]) -> Vec<Metadata> {
    let mut reader = ReaderBuilder::new().from_slice(bytes);
    let mut found = Vec::new();
    while let Some(item) = reader.next_block() {
        let Ok(block) = item else { continue };
        if block.info().block_type == BlockType::Metadata {
            found.push(Metadata {
                offset: block.info().offset,
                entries: block
                    .entries()
                    .map(|(k, v)| (k.to_owned(), v.to_vec()))
                    .collect(),
            });
        }
    }
    found
}

/// The metadata blocks and errors the mapped scan finds.
fn mapped_scan(file: &MappedFile) -> (Vec<Metadata>, Vec<Error>) {
    let (mut found, mut errors) = (Vec::new(), Vec::new());
    for item in file.metadata() {
        match item {
            Ok(block) => found.push(block),
            Err(e) => errors.push(e),
        }
    }
    (found, errors)
}

/// [`mapped_scan`] of `bytes`, written to a file and mapped.
fn scan_bytes(bytes: &[u8]) -> (Vec<Metadata>, Vec<Error>) {
    let tmp = TempFile::with_contents(bytes);
    let file = cobsfile::open(&tmp.0).expect("open");
    mapped_scan(&file)
}

/// The data blocks of `bytes`.
fn data_blocks(bytes: &[u8]) -> Vec<BlockInfo> {
    ReaderBuilder::new()
        .from_slice(bytes)
        .blocks()
        .filter_map(Result::ok)
        .filter(|b| b.block_type == BlockType::Data)
        .collect()
}

/// Flips bits of the byte at `at`, never making it 0x00 (a new sync byte).
fn flip(bytes: &mut [u8], at: usize) {
    bytes[at] ^= if bytes[at] == 0x40 { 0x20 } else { 0x40 };
}

#[test]
fn clean_file_same_metadata_as_a_full_read() {
    let bytes = sample();
    let (found, errors) = scan_bytes(&bytes);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(found.len(), 6);
    assert_eq!(found, full_read(&bytes));
}

#[test]
fn damaged_data_body_same_metadata_as_a_full_read() {
    let mut bytes = sample();
    let data = data_blocks(&bytes);
    let victim = &data[13];
    flip(&mut bytes, (victim.offset + victim.size / 2) as usize);
    let (found, errors) = scan_bytes(&bytes);
    // The scan skips the damaged block by its length and never sees the damage.
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(found.len(), 6);
    assert_eq!(found, full_read(&bytes));
}

#[test]
fn damaged_length_falls_back_to_the_next_sync_byte() {
    let mut bytes = sample();
    // The data block just before the second metadata block: a bad length there must not
    // hide that metadata block.
    let victim = data_blocks(&bytes)[7].clone();
    // Type 3 is one varint byte; the length field follows it.
    let length = victim.offset as usize + 2;
    flip(&mut bytes, length);
    let (found, errors) = scan_bytes(&bytes);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        matches!(errors[0], Error::Damaged { start, .. } if start == victim.offset + 1),
        "{errors:?}"
    );
    assert_eq!(found.len(), 6);
    assert_eq!(found, full_read(&bytes));
}

#[test]
fn empty_file_scans_clean() {
    let tmp = TempFile::with_contents(&[]);
    let file = cobsfile::open(&tmp.0).expect("open");
    let (found, errors) = mapped_scan(&file);
    assert!(found.is_empty() && errors.is_empty());
}

/// Whether the mapping that holds `addr` is advised for random reads ("rr" in its VmFlags).
#[cfg(target_os = "linux")]
fn random_read_advised(addr: usize) -> bool {
    let smaps = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
    let mut inside = false;
    for line in smaps.lines() {
        let range = line
            .split_whitespace()
            .next()
            .and_then(|field| field.split_once('-'))
            .and_then(|(a, b)| {
                Some(usize::from_str_radix(a, 16).ok()?..usize::from_str_radix(b, 16).ok()?)
            });
        if let Some(range) = range {
            inside = range.contains(&addr);
        } else if inside {
            if let Some(flags) = line.strip_prefix("VmFlags:") {
                return flags.split_whitespace().any(|flag| flag == "rr");
            }
        }
    }
    panic!("no mapping holds {addr:#x}")
}

#[cfg(target_os = "linux")]
#[test]
fn advice_is_random_while_a_scan_is_alive() {
    let tmp = TempFile::with_contents(&sample());
    let file = cobsfile::open(&tmp.0).expect("open");
    let addr = file.bytes().as_ptr() as usize;
    assert!(!random_read_advised(addr));

    let mut first = file.metadata();
    assert!(random_read_advised(addr));
    assert!(first.next().is_some());
    let second = file.metadata_with(&ReaderBuilder::new());
    drop(first);
    // The second scan still runs: the advice stays.
    assert!(random_read_advised(addr));
    assert_eq!(second.count(), 6);
    assert!(!random_read_advised(addr));

    // A full read is not advised.
    let mut reader = file.reader();
    while reader.next_record().is_some() {}
    assert!(!random_read_advised(addr));
}
