//! What reading holds in memory is bounded by a small number of blocks, whatever the thread
//! count and however well the blocks compress (issue 11, finding 5: `cat --threads 2` of 120
//! records of 60 MB, zstd-compressed into 225 KB, once peaked at 7.1 GB because each range's
//! output was held whole). Checked with a counting global allocator that tracks the bytes live
//! at once (this test binary only, one test function, so no other test allocates meanwhile).

mod counting;

use std::ops::ControlFlow;

use cobsfile::{Block, Compression, RangeSink, ReaderBuilder, WriterBuilder};
use counting::{live_bytes, peak_bytes, reset_peak};

const RECORD: usize = 4 << 20;
const RECORDS: usize = 48;

/// Formats the records of a part into one buffer, as `cat --threads` does, and writes it
/// nowhere.
#[derive(Default)]
struct Drain {
    records: usize,
}

impl RangeSink<Vec<u8>> for Drain {
    fn part(&mut self, part: Vec<u8>) -> ControlFlow<()> {
        self.records += part.len() / RECORD;
        ControlFlow::Continue(())
    }
}

/// Reads every record of `reader`, each `len` bytes long, and returns how many there were
/// and the most bytes live at once meanwhile (the reader's own included, until it is dropped).
fn read_counting<S: cobsfile::Source>(mut reader: cobsfile::Reader<S>, len: usize) -> (usize, u64) {
    let before = live_bytes();
    reset_peak();
    let mut records = 0;
    while let Some(record) = reader.next_record() {
        assert_eq!(record.unwrap().len(), len);
        records += 1;
    }
    drop(reader);
    (records, peak_bytes() - before)
}

#[test]
fn reading_holds_a_bounded_number_of_blocks() {
    // 48 records of 4 MiB, each its own block, compressing to a few KiB each: 192 MiB of
    // records in a file of about 200 KiB.
    let mut writer = WriterBuilder::new()
        .compression(Compression::zstd(1).unwrap())
        .build(Vec::new())
        .unwrap();
    for i in 0..RECORDS {
        writer.write_record(&vec![b'a' + i as u8; RECORD]).unwrap();
    }
    let file = writer.finish().unwrap();
    assert!(file.len() < 1 << 20, "{} bytes", file.len());
    let total = (RECORD * RECORDS) as u64;
    // What may be live at once, whatever the file's size: the parts waiting (at most two per
    // thread, and two more of the range being taken: 10 blocks on 4 threads) and, on each
    // thread, the part it fills and the payload it decodes (8 on 4 threads): 18 blocks,
    // bounded by 20 blocks' worth, well under the 48 the records make. (Bounded as a share of
    // these records instead, two thirds of 24, a run on a loaded machine once passed it by
    // 0.4 %: the schedule's bound is in blocks, not in a share of the file.)
    let bound = 20 * RECORD as u64;

    for threads in [1, 2, 4] {
        let options = ReaderBuilder::new().threads(threads).min_split(1);
        let format = |out: &mut Vec<u8>, block: &Block<'_>| {
            for record in block.records() {
                out.extend_from_slice(record);
            }
        };
        let before = live_bytes();
        reset_peak();
        let mut sink = Drain::default();
        let report = options.read_ranges(&file, format, &mut sink).unwrap();
        let peak = peak_bytes() - before;
        assert_eq!(sink.records, RECORDS);
        assert!(report.is_clean());
        assert!(
            peak < bound,
            "scan on {threads} threads: {peak} bytes live at once, for {total} bytes of records"
        );

        let (records, peak) = read_counting(options.from_slice(&file), RECORD);
        assert_eq!(records, RECORDS);
        assert!(
            peak < bound,
            "reader on {threads} threads: {peak} bytes live at once, for {total} bytes of records"
        );
    }

    // The readers above read a borrowed slice, which they cannot share with threads: on one
    // thread. A reader of an input it can share reads on threads, and what it holds is
    // bounded by the blocks in flight too, though by more than a range read's. Records of
    // 1 MiB, one block each and one block a part: the blocks in flight are at most those
    // waiting (two a thread, two of the range being taken, and the pull reader's slack of
    // twelve, as these parts are of the usual size), a part and a decoder's buffers on each
    // thread, and the two the reader's thread settles and hands out: 4 x threads + 16. Each
    // holds up to about 2.5 times its payload: records stored as lines are decompressed into
    // one buffer (and an eighth more), made into the payload of spec 8.3 in a second, with
    // room for the records' ranges noted in a third (a quarter of the lines' size).
    const SMALL: usize = 1 << 20;
    const SMALL_RECORDS: usize = 240;
    let mut writer = WriterBuilder::new()
        .compression(Compression::zstd(1).unwrap())
        .build(Vec::new())
        .unwrap();
    for i in 0..SMALL_RECORDS {
        writer
            .write_record(&vec![b'a' + (i % 26) as u8; SMALL])
            .unwrap();
    }
    let small: std::sync::Arc<[u8]> = writer.finish().unwrap().into();
    for threads in [2, 4] {
        let blocks = 4 * threads as u64 + 16;
        let bound = blocks * SMALL as u64 * 5 / 2;
        let options = ReaderBuilder::new().threads(threads).min_split(1);
        let (records, peak) = read_counting(options.from_shared(&small), SMALL);
        assert_eq!(records, SMALL_RECORDS);
        assert!(
            peak < bound,
            "reader of a shared input on {threads} threads: {peak} bytes live at once ({:.1} \
             records' worth, of {SMALL_RECORDS}), bound {blocks} blocks' buffers",
            peak as f64 / SMALL as f64
        );
    }

    // Blocks of a few bytes (a log flushed after every record: 15 bytes a block). A part of
    // a range is cut by what it holds, its blocks' payload and 1 KiB for each block besides,
    // not by payload alone: cut at 1 MiB of payload, a part held hundreds of thousands of
    // such blocks, each with its buffers and entry, and two threads held 424 MB at once for
    // 45 MB of them. Now the parts in flight (4 x threads + 16, as above) hold about 1 MiB
    // each; bounded here by twice that.
    let mut writer = WriterBuilder::new().build(Vec::new()).unwrap();
    let tiny_records = 1_000_000;
    for i in 0..tiny_records {
        writer.write_record(&[b'a' + (i % 26) as u8]).unwrap();
        writer.flush().unwrap();
    }
    let tiny: std::sync::Arc<[u8]> = writer.finish().unwrap().into();
    for threads in [2, 4] {
        let bound = (2 * (4 * threads as u64 + 16)) << 20;
        let options = ReaderBuilder::new().threads(threads);
        let (records, peak) = read_counting(options.from_shared(&tiny), 1);
        assert_eq!(records, tiny_records);
        assert!(
            peak < bound,
            "reader of {} bytes of one-record blocks on {threads} threads: {peak} bytes live \
             at once, bound {bound}",
            tiny.len()
        );
        // Verifying holds no more than reading. The index says what damaged ranges held, so
        // a clean file's is not read: parsed whole, it held about 100 bytes a block (312 MB
        // for 3 million 15-byte blocks).
        let before = live_bytes();
        reset_peak();
        let report = options.verify(&tiny).unwrap();
        let peak = peak_bytes() - before;
        assert!(report.is_clean());
        assert_eq!(report.records, tiny_records as u64);
        drop(report);
        assert!(
            peak < bound,
            "verify of {} bytes of one-record blocks on {threads} threads: {peak} bytes live \
             at once, bound {bound}",
            tiny.len()
        );
    }
}
