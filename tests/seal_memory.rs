//! What a verification of seals holds is bounded by a named limit (issue 35): each block it
//! notes costs a bounded number of bytes until the seals are matched, and past
//! `Limits::max_verified_blocks` it stops with an error naming the offset, rather than holding
//! more than ten times a file of the smallest blocks. Checked with a counting global allocator
//! (this test binary only, one test function).

mod counting;

use cobsfile::key::SealingKey;
use cobsfile::{Error, Limits, ReaderBuilder, WriterBuilder};
use counting::{live_bytes, peak_bytes, reset_peak};

#[test]
fn a_verification_of_seals_holds_a_bounded_amount_per_block_and_stops_at_its_limit() {
    // 100,000 blocks of one record of one byte: the smallest blocks a writer makes, sealed.
    let key = SealingKey::from_seed([7; 32]);
    let mut writer = WriterBuilder::new()
        .block_target(1)
        .seal(key.clone())
        .build(Vec::new())
        .unwrap();
    let blocks = 100_000u64;
    for i in 0..blocks {
        writer.write_record(&[i as u8]).unwrap();
    }
    let file = writer.finish().unwrap();
    let keys = [key.verifying_key()];

    let before = live_bytes();
    reset_peak();
    let (_, sealed) = ReaderBuilder::new().verify_seals(&file, &keys).unwrap();
    let peak = peak_bytes() - before;
    assert!(sealed.is_authentic());
    assert_eq!(sealed.count(cobsfile::seal::Status::Authentic).1, blocks);
    let per_block = peak / blocks;
    eprintln!(
        "{} bytes of file, {blocks} blocks: {peak} bytes at the peak, {per_block} per block",
        file.len()
    );
    // Noted blocks, the seals' leaves, each place's expected leaf, the verdicts: measured
    // 496 bytes a block of the smallest (spec 9.10's work, not the file's size).
    assert!(per_block < 600, "{per_block} bytes per block");
    drop(sealed);

    // Past the limit: an error naming it and where, having held about the limit's worth
    // besides what finding the file's index holds (its entries, which it counts).
    let before = live_bytes();
    reset_peak();
    let index = cobsfile::Index::find(&file).unwrap();
    drop(index);
    let finding = peak_bytes() - before;
    let limit = 10_000;
    let options = ReaderBuilder::new().limits(Limits::default().max_verified_blocks(limit));
    let before = live_bytes();
    reset_peak();
    let failed = options.verify_seals(&file, &keys);
    let peak = peak_bytes() - before;
    match failed {
        Err(Error::TooManyBlocks { offset, limit: l }) => {
            assert_eq!(l, limit);
            assert!(offset > 0 && offset < file.len() as u64);
            let text = Error::TooManyBlocks { offset, limit: l }.to_string();
            assert!(
                text.contains("10000 blocks") && text.contains(&offset.to_string()),
                "{text}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(
        peak < finding + 300 * limit + (2 << 20),
        "{peak} bytes held past a limit of {limit} ({finding} to find the index)"
    );
    // On two threads alike.
    let failed = options
        .threads(2)
        .min_split(4096)
        .verify_seals(&file, &keys);
    assert!(
        matches!(failed, Err(Error::TooManyBlocks { .. })),
        "{failed:?}"
    );
}
