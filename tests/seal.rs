//! Sealed files (spec 8.10, 9.10): every way of tampering with a sealed file, done with valid
//! CRCs and framing (the tests re-frame blocks themselves), is found, named and placed;
//! damage that the CRC catches is damage, not tampering, and costs only the blocks it touches.

mod common;

use cobsfile::key::SealingKey;
use cobsfile::seal::{Sealed, Sealer, Status, Tampering};
use cobsfile::{BlockType, ReaderBuilder, Report, WriterBuilder};

fn key() -> SealingKey {
    SealingKey::from_seed([7; 32])
}

/// A sealed file: metadata, 40 data blocks of 5 records, a seal about every 3 blocks.
fn sealed_file(key: &SealingKey, tag: &str) -> Vec<u8> {
    let mut writer = WriterBuilder::new()
        .block_target(200)
        .seal(key.clone())
        .seal_every(700, None)
        .build(Vec::new())
        .unwrap();
    writer.write_metadata([("source", tag)]).unwrap();
    for i in 0..200 {
        let record = format!("{tag} event {i:04} {}", "x".repeat(i % 13));
        writer.write_record(record.as_bytes()).unwrap();
    }
    writer.finish().unwrap()
}

/// A file's blocks, each from its type field to its closing sync byte, with its type.
fn blocks(file: &[u8]) -> Vec<(BlockType, Vec<u8>)> {
    let mut reader = ReaderBuilder::new().from_slice(file);
    let mut out = Vec::new();
    while let Some(block) = reader.next_block() {
        let info = block.unwrap().info().clone();
        let range = (info.offset + 1) as usize..=(info.offset + info.size) as usize;
        out.push((info.block_type, file[range].to_vec()));
    }
    out
}

/// The file of `blocks`.
fn file_of(blocks: &[(BlockType, Vec<u8>)]) -> Vec<u8> {
    let mut file = vec![0];
    for (_, bytes) in blocks {
        file.extend_from_slice(bytes);
    }
    file
}

/// Where block `i` of `blocks` opens in their file.
fn offset_of(blocks: &[(BlockType, Vec<u8>)], i: usize) -> u64 {
    blocks[..i].iter().map(|(_, b)| b.len() as u64).sum()
}

/// The places of the data blocks among `blocks`.
fn data(blocks: &[(BlockType, Vec<u8>)]) -> Vec<usize> {
    (0..blocks.len())
        .filter(|&i| blocks[i].0 == BlockType::Data)
        .collect()
}

fn check(file: &[u8]) -> (Report, Sealed) {
    let (report, sealed) = ReaderBuilder::new()
        .verify_seals(file, &[key().verifying_key()])
        .unwrap();
    // Two threads, in ranges, say the same.
    let threaded = ReaderBuilder::new()
        .threads(2)
        .min_split(300)
        .verify_seals(file, &[key().verifying_key()])
        .unwrap();
    assert_eq!(threaded.1, sealed, "two threads verify alike");
    (report, sealed)
}

fn kinds(sealed: &Sealed) -> Vec<Tampering> {
    sealed.tampered.iter().map(|t| t.kind).collect()
}

/// The data blocks' records read back.
fn authentic_records(sealed: &Sealed) -> u64 {
    sealed.count(Status::Authentic).1
}

/// The records of a block (from its type field to its closing sync byte).
fn records_in(block: &[u8]) -> u64 {
    let file = [&[0u8][..], block].concat();
    ReaderBuilder::new().from_slice(&file).read_all().0.len() as u64
}

/// A data block's bytes with its first record changed, CRC made to match.
fn altered(block: &[u8]) -> Vec<u8> {
    let file = [&[0u8][..], block].concat();
    let mut reader = ReaderBuilder::new().from_slice(&file);
    let mut records: Vec<Vec<u8>> = Vec::new();
    while let Some(r) = reader.next_record() {
        records.push(r.unwrap().to_vec());
    }
    records[0][0] ^= 1;
    let refs: Vec<&[u8]> = records.iter().map(Vec::as_slice).collect();
    common::raw_block(3, &common::data_payload(&refs))
}

#[test]
fn a_sealed_file_verifies_and_reads_as_any_file() {
    let file = sealed_file(&key(), "a");
    let (report, sealed) = check(&file);
    assert!(report.is_clean(), "{report:?}");
    assert!(sealed.is_authentic(), "{:?}", sealed.tampered);
    assert_eq!(authentic_records(&sealed), 200);
    assert!(report.blocks.seal >= 5, "{} seals", report.blocks.seal);
    assert_eq!(sealed.chains.len(), 1);
    // The index is found behind the last seal; a reader without a key reads every record.
    let index = cobsfile::Index::find(&file).expect("index");
    assert_eq!(index.records(), 200);
    let (records, errors) = ReaderBuilder::new().from_slice(&file).read_all();
    assert!(errors.is_empty());
    assert_eq!(records.len(), 200);
    assert_eq!(report.ending, cobsfile::Ending::Finished);
    // Every block but the header, the seals and the end block is authentic; those are
    // structure.
    for v in &sealed.blocks {
        let want = match v.block_type {
            BlockType::Header | BlockType::Seal | BlockType::End => Status::Structure,
            _ => Status::Authentic,
        };
        assert_eq!(v.status, want, "{v:?}");
    }
}

#[test]
fn another_key_finds_nothing_authentic() {
    let file = sealed_file(&key(), "a");
    let other = SealingKey::from_seed([8; 32]).verifying_key();
    let (_, sealed) = ReaderBuilder::new().verify_seals(&file, &[other]).unwrap();
    assert!(!sealed.is_authentic());
    assert!(kinds(&sealed).iter().all(|k| *k == Tampering::OtherKey));
    assert_eq!(authentic_records(&sealed), 0);
}

#[test]
fn a_flipped_byte_is_damage_and_costs_one_block() {
    let file = sealed_file(&key(), "a");
    let b = blocks(&file);
    let d = data(&b);
    let victim = d[10];
    let mut damaged = file.clone();
    let at = offset_of(&b, victim) as usize + 5;
    damaged[at] ^= 0x20;
    let (report, sealed) = check(&damaged);
    assert_eq!(report.damaged.len(), 1);
    assert!(sealed.tampered.is_empty(), "{:?}", sealed.tampered);
    assert_eq!(authentic_records(&sealed), 200 - records_in(&b[victim].1));
    assert_eq!(sealed.count(Status::Unsealed).0, 0);
}

#[test]
fn a_damaged_seal_costs_no_block_its_proof() {
    let file = sealed_file(&key(), "a");
    let b = blocks(&file);
    let seals: Vec<usize> = (0..b.len())
        .filter(|&i| b[i].0 == BlockType::Seal)
        .collect();
    let mut damaged = file.clone();
    let at = offset_of(&b, seals[2]) as usize + 40;
    damaged[at] ^= 0x20;
    let (report, sealed) = check(&damaged);
    assert_eq!(report.damaged.len(), 1);
    assert!(sealed.tampered.is_empty(), "{:?}", sealed.tampered);
    assert_eq!(authentic_records(&sealed), 200);
}

#[test]
fn content_changed_with_its_crc_fixed_is_altered() {
    let file = sealed_file(&key(), "a");
    let mut b = blocks(&file);
    let victim = data(&b)[7];
    let lost = records_in(&b[victim].1);
    b[victim].1 = altered(&b[victim].1);
    let start = offset_of(&b, victim);
    let tampered = file_of(&b);
    let (report, sealed) = check(&tampered);
    assert!(report.damaged.is_empty(), "the CRC matches: no damage");
    assert_eq!(kinds(&sealed), [Tampering::Altered]);
    assert_eq!(sealed.tampered[0].range.start, start);
    assert_eq!(authentic_records(&sealed), 200 - lost);
}

#[test]
fn a_block_removed_is_found_where_it_was() {
    let file = sealed_file(&key(), "a");
    let mut b = blocks(&file);
    let victim = data(&b)[12];
    let at = offset_of(&b, victim);
    let lost = records_in(&b[victim].1);
    b.remove(victim);
    let (report, sealed) = check(&file_of(&b));
    assert!(report.damaged.is_empty());
    assert_eq!(kinds(&sealed), [Tampering::Removed]);
    // Between the block of its chain before it and the one after (seals may lie between).
    let range = sealed.tampered[0].range.clone();
    assert!(
        range.start <= at && range.end >= at,
        "{range:?} against {at}"
    );
    assert_eq!(authentic_records(&sealed), 200 - lost);
}

#[test]
fn blocks_swapped_are_reordered() {
    let file = sealed_file(&key(), "a");
    let mut b = blocks(&file);
    let d = data(&b);
    b.swap(d[3], d[4]);
    let (_, sealed) = check(&file_of(&b));
    assert!(
        kinds(&sealed).contains(&Tampering::Reordered),
        "{:?}",
        sealed.tampered
    );
    assert!(!sealed.is_authentic());
}

#[test]
fn a_block_repeated_is_duplicated() {
    let file = sealed_file(&key(), "a");
    let mut b = blocks(&file);
    let d = data(&b);
    let copy = b[d[5]].clone();
    b.insert(d[9], copy);
    let (_, sealed) = check(&file_of(&b));
    assert_eq!(kinds(&sealed), [Tampering::Duplicated]);
    assert_eq!(authentic_records(&sealed), 200);
}

#[test]
fn a_block_added_is_inserted() {
    let file = sealed_file(&key(), "a");
    let mut b = blocks(&file);
    let d = data(&b);
    let extra = common::raw_block(3, &common::data_payload(&[b"not written by the writer"]));
    b.insert(d[6], (BlockType::Data, extra));
    let (_, sealed) = check(&file_of(&b));
    assert_eq!(kinds(&sealed), [Tampering::Inserted]);
    assert_eq!(authentic_records(&sealed), 200);
}

#[test]
fn blocks_and_seals_of_another_file_sealed_with_the_same_key_are_not_this_files() {
    let file = sealed_file(&key(), "a");
    let other = sealed_file(&key(), "b");
    let mut b = blocks(&file);
    let theirs = blocks(&other);
    // Their data block and the seal after it, spliced in among ours.
    let d = data(&theirs);
    let seal = (d[4]..theirs.len())
        .find(|&i| theirs[i].0 == BlockType::Seal)
        .unwrap();
    let at = data(&b)[8];
    b.insert(at, theirs[seal].clone());
    b.insert(at, theirs[d[4]].clone());
    let (_, sealed) = check(&file_of(&b));
    let k = kinds(&sealed);
    assert!(k.contains(&Tampering::OtherFile), "{k:?}");
    // Whichever file's blocks come first, a file holding valid seals of two files is
    // spliced: none of it is taken for authentic (their metadata put first would otherwise
    // make their blocks this file's).
    assert_eq!(authentic_records(&sealed), 0);
    let len = file_of(&b).len() as u64;
    let whole = (sealed.tampered.iter()).find(|t| t.range.start == 0 && t.range.end == len - 1);
    assert!(
        whole.is_some_and(|t| t.kind == Tampering::OtherFile),
        "{:?}",
        sealed.tampered
    );
}

#[test]
fn a_seal_signed_by_another_key_or_forged_is_tampering() {
    let file = sealed_file(&key(), "a");
    let b = blocks(&file);
    let s = (0..b.len()).find(|&i| b[i].0 == BlockType::Seal).unwrap();
    let payload_of = |block: &[u8]| {
        let file = [&[0u8][..], block].concat();
        let mut reader = ReaderBuilder::new().from_slice(&file);
        reader.next_block().unwrap().unwrap().payload().to_vec()
    };
    let seal = cobsfile::seal::Seal::from_bytes(&payload_of(&b[s].1)).unwrap();

    // Signed again by another key, named as its signer.
    let other = SealingKey::from_seed([9; 32]);
    let mut resigned = seal.clone();
    resigned.key_id = other.id();
    resigned.signature = other.sign(&resigned.signed_message());
    // A leaf changed, the signature kept.
    let mut forged = seal.clone();
    forged.leaves[0].hash[0] ^= 1;
    for (changed, want) in [(resigned, Tampering::OtherKey), (forged, Tampering::Forged)] {
        let mut c = b.clone();
        c[s].1 = common::raw_block(11, &changed.to_bytes());
        let (_, sealed) = check(&file_of(&c));
        assert!(
            kinds(&sealed).contains(&want),
            "{want:?}: {:?}",
            sealed.tampered
        );
    }
}

#[test]
fn a_seal_replayed_or_removed_is_tampering() {
    let file = sealed_file(&key(), "a");
    let b = blocks(&file);
    let seals: Vec<usize> = (0..b.len())
        .filter(|&i| b[i].0 == BlockType::Seal)
        .collect();

    let mut replayed = b.clone();
    replayed.insert(seals[5], b[seals[1]].clone());
    let (_, sealed) = check(&file_of(&replayed));
    assert_eq!(kinds(&sealed), [Tampering::Replayed]);

    let mut removed = b.clone();
    removed.remove(seals[3]);
    let (_, sealed) = check(&file_of(&removed));
    assert_eq!(kinds(&sealed), [Tampering::SealRemoved]);
    // The next seal carries the removed one's leaves: every block still verifies.
    assert_eq!(authentic_records(&sealed), 200);
}

#[test]
fn a_file_cut_back_to_a_seal_verifies_but_no_longer_extends_what_it_held() {
    let file = sealed_file(&key(), "a");
    let (_, whole) = check(&file);
    let last = whole.chains[0].last_hash;
    assert!(whole.extends(&last));
    let b = blocks(&file);
    let seals: Vec<usize> = (0..b.len())
        .filter(|&i| b[i].0 == BlockType::Seal)
        .collect();
    let cut = file_of(&b[..=seals[4]]);
    let (report, sealed) = check(&cut);
    assert_eq!(report.ending, cobsfile::Ending::Unfinished);
    assert!(
        sealed.is_authentic(),
        "a cut at a seal is not seen from the file alone"
    );
    assert!(!sealed.extends(&last), "but it does not hold the seal kept");
    let kept = sealed.chains[0].last_hash;
    assert!(whole.extends(&kept), "the whole file extends the cut one");
}

#[test]
fn blocks_after_the_last_seal_are_unsealed() {
    let mut writer = WriterBuilder::new()
        .block_target(200)
        .seal(key())
        .seal_every(700, None)
        .build(Vec::new())
        .unwrap();
    for i in 0..100 {
        writer
            .write_record(format!("event {i:04}").as_bytes())
            .unwrap();
    }
    writer.seal().unwrap();
    for i in 100..130 {
        writer
            .write_record(format!("event {i:04}").as_bytes())
            .unwrap();
    }
    writer.flush().unwrap();
    let file = writer.get_ref().clone();
    drop(writer);
    let (_, sealed) = check(&file);
    assert!(sealed.tampered.is_empty(), "{:?}", sealed.tampered);
    assert_eq!(authentic_records(&sealed), 100);
    let (_, unsealed) = sealed.count(Status::Unsealed);
    assert!(unsealed > 0 && unsealed <= 30, "{unsealed}");
    assert!(!sealed.is_authentic());
}

#[test]
fn seals_made_again_with_the_same_chain_and_clock_are_the_same_bytes() {
    let make = || {
        let sealer = Sealer::new(key(), [1; 16], [2; 16]).with_clock(|| 1_700_000_000_000_000_000);
        let mut writer = WriterBuilder::new()
            .seal_with(sealer)
            .build(Vec::new())
            .unwrap();
        writer.write_record(b"one").unwrap();
        writer.finish().unwrap()
    };
    let file = make();
    assert_eq!(file, make());
    let (_, sealed) = check(&file);
    assert!(sealed.is_authentic());
    assert_eq!(sealed.file_id, Some([1; 16]));
}

#[test]
fn appenders_that_seal_are_chains_of_one_log_and_a_crash_leaves_blocks_unsealed() {
    use cobsfile::{AppenderBuilder, Durability};
    let file = common::TempFile::with_contents(&[]);
    let options = AppenderBuilder::new()
        .durability(Durability::Flush)
        .block_target(200)
        .seal(key())
        .seal_every(1000, None);
    // Two sessions closed cleanly: every block sealed.
    for session in 0..2 {
        let mut log = options.open(&file.0).unwrap();
        for i in 0..50 {
            log.append(format!("session {session} event {i}").as_bytes())
                .unwrap();
        }
        log.close().unwrap();
    }
    let bytes = std::fs::read(&file.0).unwrap();
    let (report, sealed) = check(&bytes);
    assert_eq!(report.ending, cobsfile::Ending::Open);
    assert!(sealed.is_authentic(), "{:?}", sealed.tampered);
    assert_eq!(sealed.chains.len(), 2);
    assert_eq!(authentic_records(&sealed), 100);
    // One file id, written once, by the appender that started the log.
    let ids = ReaderBuilder::new()
        .metadata_of(&bytes)
        .iter()
        .filter(|m| m.get(cobsfile::seal::FILE_ID_KEY).is_some())
        .count();
    assert_eq!(ids, 1);

    // A session that crashes after its last seal: its later blocks are unsealed, not
    // tampered with; the next session seals its own.
    let mut log = options.open(&file.0).unwrap();
    for i in 0..10 {
        log.append(format!("crashed {i}").as_bytes()).unwrap();
    }
    log.sync().unwrap();
    for i in 10..15 {
        log.append(format!("crashed {i}").as_bytes()).unwrap();
    }
    drop(log);
    let mut log = options.open(&file.0).unwrap();
    log.append(b"after the crash").unwrap();
    log.close().unwrap();
    let bytes = std::fs::read(&file.0).unwrap();
    let (_, sealed) = check(&bytes);
    assert!(sealed.tampered.is_empty(), "{:?}", sealed.tampered);
    assert_eq!(authentic_records(&sealed), 111);
    assert_eq!(sealed.count(Status::Unsealed).1, 5);

    // A log file that was not sealed gets its id from the first appender that seals it.
    let plain = common::TempFile::with_contents(&[]);
    let mut log = AppenderBuilder::new().open(&plain.0).unwrap();
    log.append(b"before sealing").unwrap();
    log.close().unwrap();
    let mut log = options.open(&plain.0).unwrap();
    log.append(b"sealed").unwrap();
    log.close().unwrap();
    let (_, sealed) = check(&std::fs::read(&plain.0).unwrap());
    assert!(sealed.tampered.is_empty(), "{:?}", sealed.tampered);
    assert_eq!(sealed.count(Status::Authentic).1, 1);
    assert_eq!(sealed.count(Status::Unsealed).1, 1);
}

#[test]
fn a_header_or_end_block_put_among_a_chains_blocks_is_inserted() {
    let file = sealed_file(&key(), "a");
    let b = blocks(&file);
    let d = data(&b);
    for extra in [b[0].clone(), b[b.len() - 1].clone()] {
        let mut c = b.clone();
        c.insert(d[5], extra);
        let (_, sealed) = check(&file_of(&c));
        assert_eq!(
            kinds(&sealed),
            [Tampering::Inserted],
            "{:?}",
            sealed.tampered
        );
    }
}

#[test]
fn sealed_files_concatenated_verify_each_by_its_own_id() {
    let a = sealed_file(&key(), "a");
    let b = sealed_file(&key(), "b");
    let both = [&a[..], &b[..]].concat();
    let (_, sealed) = check(&both);
    assert!(sealed.is_authentic(), "{:?}", sealed.tampered);
    assert_eq!(authentic_records(&sealed), 400);
    assert_eq!(sealed.chains.len(), 2);
}

#[test]
fn a_validly_signed_seal_naming_far_places_costs_what_it_lists() {
    // A seal its key signed, naming places near 2^62 (only a key holder could make it): the
    // verifier holds what the seal lists, never a table as long as the places it names.
    let file = sealed_file(&key(), "a");
    let mut b = blocks(&file);
    let s = (0..b.len()).find(|&i| b[i].0 == BlockType::Seal).unwrap();
    let payload = {
        let one = [&[0u8][..], &b[s].1].concat();
        let mut r = ReaderBuilder::new().from_slice(&one);
        r.next_block().unwrap().unwrap().payload().to_vec()
    };
    let mut seal = cobsfile::seal::Seal::from_bytes(&payload).unwrap();
    seal.sequence = 1 << 62;
    seal.first = 1 << 62;
    seal.previous = [1; 32];
    seal.carried = seal.leaves.clone();
    seal.signature = key().sign(&seal.signed_message());
    b.insert(
        s + 1,
        (BlockType::Seal, common::raw_block(11, &seal.to_bytes())),
    );
    let (_, sealed) = check(&file_of(&b));
    assert!(!sealed.tampered.is_empty());
}

#[test]
fn many_blocks_alike_verify_in_time_proportional_to_the_file() {
    // 20,000 data blocks of the same bytes: each matches its place at once.
    let mut writer = WriterBuilder::new()
        .block_target(10)
        .seal(key())
        .build(Vec::new())
        .unwrap();
    for _ in 0..20_000 {
        writer.write_record(b"same record").unwrap();
    }
    let file = writer.finish().unwrap();
    let (_, sealed) = check(&file);
    assert!(sealed.is_authentic());
    assert_eq!(authentic_records(&sealed), 20_000);
    // Repeated blocks taken out of the middle are still found, at the first place they can
    // be.
    let mut b = blocks(&file);
    let d = data(&b);
    b.remove(d[10_000]);
    let (_, sealed) = check(&file_of(&b));
    assert_eq!(
        kinds(&sealed),
        [Tampering::Removed],
        "{:?}",
        sealed.tampered
    );
}

#[test]
fn a_writer_seals_after_its_interval_and_by_size() {
    let count_seals = |bytes: &[u8]| ReaderBuilder::new().verify(bytes).unwrap().blocks.seal;
    // By time: a seal at the first block written once the interval has passed.
    let mut writer = WriterBuilder::new()
        .seal(key())
        .seal_every(u64::MAX, Some(std::time::Duration::from_millis(20)))
        .build(Vec::new())
        .unwrap();
    writer.write_record(b"first").unwrap();
    writer.flush().unwrap();
    assert_eq!(count_seals(writer.get_ref()), 0);
    std::thread::sleep(std::time::Duration::from_millis(30));
    writer.write_record(b"second").unwrap();
    writer.flush().unwrap();
    assert_eq!(count_seals(writer.get_ref()), 1);
    // By size: one seal per 1,000 bytes of blocks, about.
    let mut writer = WriterBuilder::new()
        .block_target(100)
        .seal(key())
        .seal_every(1000, None)
        .build(Vec::new())
        .unwrap();
    for i in 0..1000 {
        writer
            .write_record(format!("record {i}").as_bytes())
            .unwrap();
    }
    let file = writer.finish().unwrap();
    let seals = count_seals(&file);
    // Counted in the bytes of the blocks sealed, not of the seals.
    let sealed_bytes: u64 = blocks(&file)
        .iter()
        .filter(|(t, _)| *t != BlockType::Seal)
        .map(|(_, b)| b.len() as u64)
        .sum();
    let expected = sealed_bytes / 1000;
    assert!(
        seals >= expected * 8 / 10 && seals <= expected + 2,
        "{seals} seals for {sealed_bytes} bytes sealed"
    );
    let (_, sealed) = check(&file);
    assert!(sealed.is_authentic());
}

#[test]
fn a_sealed_log_finished_in_place_stays_authentic() {
    use cobsfile::{AppenderBuilder, Durability};
    let file = common::TempFile::with_contents(&[]);
    let mut log = AppenderBuilder::new()
        .durability(Durability::Flush)
        .block_target(200)
        .seal(key())
        .open(&file.0)
        .unwrap();
    for i in 0..100 {
        log.append(format!("event {i}").as_bytes()).unwrap();
    }
    log.close().unwrap();
    let finished = cobsfile::finish_log(&file.0, &ReaderBuilder::new()).unwrap();
    assert!(
        matches!(finished, cobsfile::Finish::Finished(_)),
        "{finished:?}"
    );
    let bytes = std::fs::read(&file.0).unwrap();
    let (report, sealed) = check(&bytes);
    assert_eq!(report.ending, cobsfile::Ending::Finished);
    // The index finishing added is unsealed, and keeps nothing else from being authentic.
    assert!(sealed.is_authentic(), "{:?}", sealed.tampered);
    assert_eq!(authentic_records(&sealed), 100);
    assert_eq!(sealed.count(Status::Unsealed).0, 1);
}

#[test]
fn a_log_directory_that_seals_seals_each_segment_as_a_file_of_its_own() {
    use cobsfile::segments::list_segments;
    use cobsfile::{AppenderBuilder, Durability};
    let dir = std::env::temp_dir().join(format!("cobsfile-seal-dir-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let options = AppenderBuilder::new()
        .durability(Durability::Flush)
        .segment_size(3000)
        .seal(key())
        .seal_every(1000, None)
        .maintain_in_background(false);
    let mut total = 0;
    for session in 0..2 {
        let mut log = options.open_dir(&dir).unwrap();
        for i in 0..300 {
            log.append(format!("session {session} event {i:04}").as_bytes())
                .unwrap();
            total += 1;
        }
        log.close().unwrap();
    }
    let segments = list_segments(&dir).unwrap();
    assert!(segments.len() > 4, "{} segments", segments.len());
    let mut records = 0;
    let mut ids = std::collections::HashSet::new();
    for (_, path) in &segments {
        let bytes = std::fs::read(path).unwrap();
        let (report, sealed) = check(&bytes);
        assert!(report.damaged.is_empty(), "{}", path.display());
        assert!(
            sealed.is_authentic(),
            "{}: {:?} unsealed {:?}",
            path.display(),
            sealed.tampered,
            sealed.ranges(Status::Unsealed)
        );
        assert!(
            ids.insert(sealed.file_id.expect("an id")),
            "each segment its own id"
        );
        records += authentic_records(&sealed);
    }
    assert_eq!(records, total);
    // A segment's blocks moved into another: seals of two files in one.
    let first = std::fs::read(&segments[0].1).unwrap();
    let second = std::fs::read(&segments[1].1).unwrap();
    let mut b = blocks(&first);
    let theirs = blocks(&second);
    let d = data(&theirs)[0];
    let at = data(&b)[1];
    b.insert(at, theirs[d].clone());
    let s = (d..theirs.len())
        .find(|&i| theirs[i].0 == BlockType::Seal)
        .unwrap();
    b.insert(at + 1, theirs[s].clone());
    let (_, sealed) = check(&file_of(&b));
    assert!(
        kinds(&sealed).contains(&Tampering::OtherFile),
        "{:?}",
        sealed.tampered
    );
    assert_eq!(authentic_records(&sealed), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_sealed_log_torn_by_a_crash_reopens_without_tampering() {
    use cobsfile::{AppenderBuilder, Durability};
    let file = common::TempFile::with_contents(&[]);
    let options = AppenderBuilder::new()
        .durability(Durability::Flush)
        .block_target(200)
        .seal(key());
    let mut log = options.open(&file.0).unwrap();
    for i in 0..50 {
        log.append(format!("before {i}").as_bytes()).unwrap();
    }
    log.sync().unwrap();
    for i in 0..5 {
        log.append(format!("unsealed {i}").as_bytes()).unwrap();
    }
    drop(log);
    // The crash tore the block being written: half of a block's bytes at the end.
    let whole = common::raw_block(3, &common::data_payload(&[b"torn record"]));
    let mut bytes = std::fs::read(&file.0).unwrap();
    bytes.extend_from_slice(&whole[..whole.len() / 2]);
    std::fs::write(&file.0, &bytes).unwrap();
    let mut log = options.open(&file.0).unwrap();
    assert!(log.opened().torn.is_some());
    for i in 0..20 {
        log.append(format!("after {i}").as_bytes()).unwrap();
    }
    log.close().unwrap();
    let (report, sealed) = check(&std::fs::read(&file.0).unwrap());
    assert!(
        report.damaged.is_empty(),
        "the torn block was cut: {:?}",
        report.damaged
    );
    assert!(sealed.tampered.is_empty(), "{:?}", sealed.tampered);
    assert_eq!(authentic_records(&sealed), 70);
    assert_eq!(sealed.count(Status::Unsealed).1, 5);
}

// Verifying part of a file (spec 9.10.1): a window's blocks against the seals the index lists.

const T0: i64 = 1_767_225_600_000_000_000;
const SECOND: i64 = 1_000_000_000;

/// A sealed file of 600 timed records, one a second, records alike or not.
fn timed_file(key: &SealingKey, alike: bool) -> Vec<u8> {
    let mut writer = WriterBuilder::new()
        .block_target(200)
        .seal(key.clone())
        .seal_every(700, None)
        .build(Vec::new())
        .unwrap();
    for i in 0..600 {
        let record = match alike {
            true => "the same event".to_string(),
            false => format!("event {i:04} {}", "x".repeat(i % 13)),
        };
        writer
            .write_record_at(record.as_bytes(), T0 + i as i64 * SECOND)
            .unwrap();
    }
    writer.finish().unwrap()
}

/// Seconds `from..to` of the files above.
fn seconds(from: i64, to: i64) -> ReaderBuilder {
    ReaderBuilder::new().window(cobsfile::Window::new(
        Some(T0 + from * SECOND),
        Some(T0 + to * SECOND),
    ))
}

/// The verification of `file` in `window`, on one thread and on two, which agree.
fn check_window(file: &[u8], window: &ReaderBuilder) -> (Report, Sealed) {
    let keys = [key().verifying_key()];
    let one = window.verify_seals(file, &keys).unwrap();
    let two = (window.clone().threads(2).min_split(300))
        .verify_seals(file, &keys)
        .unwrap();
    assert_eq!(two.1, one.1, "two threads verify alike");
    one
}

/// What the whole file's verification says of each block that `part`'s verified.
fn agrees_with_whole(file: &[u8], part: &Sealed) {
    let (_, whole) = check(file);
    for b in &part.blocks {
        let of_whole = whole.blocks.iter().find(|w| w.range == b.range).unwrap();
        assert_eq!(b.status, of_whole.status, "block at {:?}", b.range);
    }
}

#[test]
fn a_window_verifies_its_blocks_against_the_seals_alone() {
    for alike in [false, true] {
        let file = timed_file(&key(), alike);
        let (report, sealed) = check_window(&file, &seconds(300, 360));
        let span = sealed.span.clone().expect("a window's span verified");
        assert!(sealed.tampered.is_empty(), "{:?}", sealed.tampered);
        assert!(sealed.is_authentic());
        // A few seal intervals about the window, not the file.
        assert!(span.start > 0 && span.end < file.len() as u64, "{span:?}");
        assert!(span.end - span.start < file.len() as u64 / 5, "{span:?}");
        assert!(report.blocks.data < 20, "{:?} read", report.blocks);
        // Every block of the window's seconds is verified, authentic.
        let records = seconds(300, 360).from_slice(&file).read_all().0.len();
        assert!(records >= 60, "{records}");
        assert!(authentic_records(&sealed) >= 60);
        agrees_with_whole(&file, &sealed);
        // Every seal of the file counts: the chain is the whole file's.
        let (_, whole) = check(&file);
        let summary = |s: &Sealed| -> Vec<_> {
            (s.chains.iter())
                .map(|c| (c.chain, c.seals, c.last_hash, c.last_sequence))
                .collect()
        };
        assert_eq!(summary(&sealed), summary(&whole));
        assert_eq!(sealed.seal_hashes, whole.seal_hashes);
        // Windows at the file's start and end, and one that holds nothing.
        for (from, to) in [(0, 20), (580, 700), (1000, 2000), (-50, 1000)] {
            let (_, sealed) = check_window(&file, &seconds(from, to));
            assert!(
                sealed.tampered.is_empty(),
                "{from}..{to}: {:?}",
                sealed.tampered
            );
            agrees_with_whole(&file, &sealed);
        }
    }
}

/// `file` with its blocks changed by `edit`, and made whole again as an editor that knows
/// the format would: a fresh index and time index over the blocks (what recovery writes).
fn edited(file: &[u8], edit: impl FnOnce(&mut Vec<(BlockType, Vec<u8>)>)) -> Vec<u8> {
    let mut blocks = blocks(file);
    edit(&mut blocks);
    let mut out = Vec::new();
    cobsfile::recover(&file_of(&blocks), &ReaderBuilder::new(), &mut out).unwrap();
    out
}

/// The places among `blocks` of the data blocks whose records are in seconds 300..360, each
/// after its time block.
fn in_window(blocks: &[(BlockType, Vec<u8>)]) -> Vec<usize> {
    let file = file_of(blocks);
    let kept: Vec<u64> = {
        let mut reader = seconds(300, 360).from_slice(&file);
        let mut offsets = Vec::new();
        while let Some(block) = reader.next_block() {
            let info = block.unwrap().info().clone();
            if info.block_type == BlockType::Data {
                offsets.push(info.offset);
            }
        }
        offsets
    };
    (0..blocks.len())
        .filter(|&i| kept.contains(&offset_of(blocks, i)))
        .collect()
}

#[test]
fn tampering_within_a_window_is_found_by_its_verification() {
    let file = timed_file(&key(), false);
    let original = blocks(&file);
    let window = in_window(&original);
    assert!(window.len() >= 4, "{window:?}");
    let (a, b) = (window[1], window[2]);
    // Each edit keeps time blocks with their data blocks (a time block and its data block
    // are taken, moved or added together).
    type Edit = Box<dyn Fn(&mut Vec<(BlockType, Vec<u8>)>)>;
    let edits: Vec<(&str, Edit)> = vec![
        (
            "altered",
            Box::new(move |blocks| blocks[a].1 = altered(&blocks[a].1)),
        ),
        (
            "removed",
            Box::new(move |blocks| {
                blocks.drain(a - 1..=a);
            }),
        ),
        (
            "swapped",
            Box::new(move |blocks| {
                let pair: Vec<_> = blocks.drain(a - 1..=a).collect();
                let at = b - 1;
                for (i, block) in pair.into_iter().enumerate() {
                    blocks.insert(at + i, block);
                }
            }),
        ),
        (
            "repeated",
            Box::new(move |blocks| {
                let pair: Vec<_> = blocks[a - 1..=a].to_vec();
                for (i, block) in pair.into_iter().enumerate() {
                    blocks.insert(b + 1 + i, block);
                }
            }),
        ),
        (
            "added",
            Box::new(move |blocks| {
                let block = common::raw_block(3, &common::data_payload(&[b"forged"]));
                blocks.insert(a + 1, (BlockType::Data, block));
            }),
        ),
    ];
    for (name, edit) in edits {
        let tampered = edited(&file, edit);
        let (_, sealed) = check_window(&tampered, &seconds(300, 360));
        let span = sealed.span.clone().expect("a window's span verified");
        assert!(!sealed.tampered.is_empty(), "{name}: not found");
        for t in &sealed.tampered {
            assert!(
                t.range.start >= span.start && t.range.end <= span.end,
                "{name}: {t} outside {span:?}"
            );
        }
        // The whole file's verification finds it too.
        assert!(!check(&tampered).1.tampered.is_empty(), "{name}");
    }

    // Outside the window's span, the window's verification does not look; the whole
    // file's does.
    let far = (0..window[0] - 60)
        .rev()
        .find(|&i| original[i].0 == BlockType::Data)
        .unwrap();
    let tampered = edited(&file, |blocks| blocks[far].1 = altered(&blocks[far].1));
    let (_, sealed) = check_window(&tampered, &seconds(300, 360));
    assert!(sealed.tampered.is_empty(), "{:?}", sealed.tampered);
    assert!(!check(&tampered).1.tampered.is_empty());
}

#[test]
fn a_window_of_a_log_of_several_chains_verifies_without_tampering() {
    use cobsfile::{AppenderBuilder, Durability};
    for alike in [false, true] {
        let file = common::TempFile::with_contents(&[]);
        let options = AppenderBuilder::new()
            .durability(Durability::Flush)
            .block_target(200)
            .seal(key())
            .seal_every(100_000, None);
        // Six sessions, each a chain sealed once, at its close.
        for session in 0..6 {
            let mut log = options.open(&file.0).unwrap();
            for i in 0..100 {
                let record = match alike {
                    true => "the same event".to_string(),
                    false => format!("session {session} event {i}"),
                };
                let t = session * 100 + i;
                log.append_at(record.as_bytes(), T0 + t * SECOND).unwrap();
            }
            log.close().unwrap();
        }
        cobsfile::finish_log(&file.0, &ReaderBuilder::new()).unwrap();
        let bytes = std::fs::read(&file.0).unwrap();
        for (from, to) in [(250, 280), (150, 420), (0, 30), (590, 600)] {
            let (_, sealed) = check_window(&bytes, &seconds(from, to));
            assert!(sealed.span.is_some());
            assert!(
                sealed.tampered.is_empty(),
                "{alike} {from}..{to}: {:?}",
                sealed.tampered
            );
            agrees_with_whole(&bytes, &sealed);
        }
    }
}

/// A file in a "store" that counts the bytes it serves, and notes the most one request
/// asked for.
struct Served(
    Vec<u8>,
    std::sync::atomic::AtomicU64,
    std::sync::atomic::AtomicU64,
);

impl Served {
    fn new(file: Vec<u8>) -> Self {
        Served(file, Default::default(), Default::default())
    }
}

impl cobsfile::Fetch for Served {
    fn size(&self) -> u64 {
        self.0.len() as u64
    }
    fn fetch(&self, ranges: &[std::ops::Range<u64>]) -> std::io::Result<Vec<Vec<u8>>> {
        let served = ranges.iter().map(|r| r.end - r.start).sum();
        self.1
            .fetch_add(served, std::sync::atomic::Ordering::Relaxed);
        self.2
            .fetch_max(served, std::sync::atomic::Ordering::Relaxed);
        Ok(ranges
            .iter()
            .map(|r| self.0[r.start as usize..r.end as usize].to_vec())
            .collect())
    }
}

#[test]
fn a_remote_file_verifies_by_byte_ranges_and_a_window_fetches_little() {
    let mut writer = WriterBuilder::new()
        .block_target(4096)
        .seal(key())
        .seal_every(64 << 10, None)
        .build(Vec::new())
        .unwrap();
    for i in 0..50_000 {
        let record = format!("event {i:06} from host-{}", i % 17);
        writer
            .write_record_at(record.as_bytes(), T0 + i * SECOND)
            .unwrap();
    }
    let file = writer.finish().unwrap();
    let keys = [key().verifying_key()];
    let len = file.len() as u64;
    for options in [
        ReaderBuilder::new(),
        ReaderBuilder::new().threads(2).min_split(64 << 10),
        seconds(20_000, 20_060),
        seconds(20_000, 20_060).threads(2).min_split(4096),
    ] {
        let remote = cobsfile::Remote::open(Served::new(file.clone())).unwrap();
        let served_before = remote
            .fetcher()
            .1
            .load(std::sync::atomic::Ordering::Relaxed);
        let (report, sealed) = remote.verify_seals(&options, &keys).unwrap();
        let served = remote
            .fetcher()
            .1
            .load(std::sync::atomic::Ordering::Relaxed)
            - served_before;
        let (local_report, local) = options.verify_seals(&file, &keys).unwrap();
        assert_eq!(sealed, local, "fetched by ranges as in memory");
        assert_eq!(report.blocks, local_report.blocks);
        assert!(sealed.is_authentic(), "{:?}", sealed.tampered);
        match options.get_window() {
            None => assert!(
                served >= len && served < len + len / 20,
                "{served} of {len}"
            ),
            Some(_) => {
                assert!(sealed.span.is_some());
                assert!(authentic_records(&sealed) >= 60);
                // The seal intervals about the window (64 KiB each), the time index and the
                // seals: not the file.
                let seals: u64 = (cobsfile::Index::find(&file).unwrap().entries().iter())
                    .filter(|e| e.block_type == BlockType::Seal)
                    .map(|e| e.size)
                    .sum();
                assert!(served < 3 * (64 << 10) + 2 * seals, "{served} of {len}");
                assert!(served < len / 10, "{served} of {len}");
            }
        }
    }
}

#[test]
fn a_sealing_appender_whose_log_is_copied_and_truncated_seals_the_new_file_as_its_own() {
    use cobsfile::{AppenderBuilder, Durability};
    let file = common::TempFile::with_contents(&[]);
    let mut log = AppenderBuilder::new()
        .durability(Durability::Flush)
        .block_target(200)
        .seal(key())
        .open(&file.0)
        .unwrap();
    log.announce([("schema", "events v1")]).unwrap();
    for i in 0..50 {
        log.append(format!("before {i}").as_bytes()).unwrap();
    }
    log.sync().unwrap();
    // logrotate's copytruncate, under the appender.
    let copy = std::fs::read(&file.0).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&file.0)
        .unwrap()
        .set_len(0)
        .unwrap();
    log.sync().unwrap();
    for i in 0..50 {
        log.append(format!("after {i}").as_bytes()).unwrap();
    }
    log.close().unwrap();
    let (_, sealed) = check(&copy);
    assert!(sealed.is_authentic(), "{:?}", sealed.tampered);
    assert_eq!(authentic_records(&sealed), 50);
    let new = std::fs::read(&file.0).unwrap();
    let (report, sealed) = check(&new);
    assert!(report.damaged.is_empty(), "{:?}", report.damaged);
    assert!(
        sealed.is_authentic(),
        "{:?} {:?}",
        sealed.tampered,
        sealed.blocks
    );
    assert_eq!(authentic_records(&sealed), 50);
    // Another file: its own id.
    assert_ne!(sealed.file_id, check(&copy).1.file_id);
    // It starts again with what was announced, sealed with it.
    let metadata = ReaderBuilder::new().metadata_of(&new);
    assert!(metadata.iter().any(|m| m.get("schema").is_some()));
}

#[test]
fn an_index_that_lists_most_blocks_as_seals_is_read_a_batch_at_a_time() {
    // 30 MB of sealed, timed records in blocks of 64 KiB.
    let mut writer = WriterBuilder::new()
        .block_target(64 << 10)
        .seal(key())
        .build(Vec::new())
        .unwrap();
    // Records 12,000 to 13,999 have times (in blocks a time index lists), the others none.
    for i in 0..30_000 {
        let record = format!("{i:06} {}", "x".repeat(1000));
        match i {
            12_000..14_000 => writer.write_record_at(record.as_bytes(), T0 + i * SECOND),
            _ => writer.write_record(record.as_bytes()),
        }
        .unwrap();
    }
    let file = writer.finish().unwrap();
    // The index made again with most data blocks listed as seals: a window's verification
    // reads what the index lists as seals, and this one lists most of the file.
    let index = cobsfile::Index::find(&file).unwrap();
    let entries = index.entries();
    let mut payload = Vec::new();
    cobsfile::varint::write(entries.len() as i64, &mut payload);
    cobsfile::varint::write((index.offset() - entries[0].offset) as i64, &mut payload);
    // The data blocks no time block describes become "seals"; the time index still finds
    // the window's blocks.
    for (i, e) in entries.iter().enumerate() {
        let timed = i > 0 && entries[i - 1].block_type == BlockType::Time;
        let block_type = match e.block_type {
            BlockType::Data if !timed => 11,
            other => other.type_id(),
        };
        cobsfile::varint::write(block_type, &mut payload);
        cobsfile::varint::write(e.size as i64, &mut payload);
        cobsfile::varint::write(e.records as i64, &mut payload);
    }
    let at = index.offset() as usize;
    let closed = at + 1 + file[at + 1..].iter().position(|&b| b == 0).unwrap();
    let mut crafted = file[..=at].to_vec();
    crafted.extend_from_slice(&common::raw_block(5, &payload));
    crafted.extend_from_slice(&file[closed + 1..]);
    let listed: u64 = (cobsfile::Index::find(&crafted).unwrap().entries().iter())
        .filter(|e| e.block_type == BlockType::Seal)
        .map(|e| e.size + 1)
        .sum();
    assert!(listed > 20 << 20, "{listed}");

    let keys = [key().verifying_key()];
    let window = seconds(13_000, 13_010);
    let remote = cobsfile::Remote::open(Served::new(crafted.clone())).unwrap();
    let (_, sealed) = remote.verify_seals(&window, &keys).unwrap();
    let largest = remote
        .fetcher()
        .2
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        largest <= (16 << 20) + (1 << 20),
        "one request of {largest} bytes"
    );
    // What the index lists falsely is not read as seals; the window's blocks are still
    // checked against the true ones.
    assert!(sealed.span.is_some());
    assert!(authentic_records(&sealed) >= 10);
    let (_, local) = window.verify_seals(&crafted, &keys).unwrap();
    assert_eq!(sealed, local, "fetched by ranges as in memory");
}
