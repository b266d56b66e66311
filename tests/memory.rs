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

        let before = live_bytes();
        reset_peak();
        let mut reader = options.from_slice(&file);
        let mut records = 0;
        while let Some(record) = reader.next_record() {
            assert_eq!(record.unwrap().len(), RECORD);
            records += 1;
        }
        drop(reader);
        let peak = peak_bytes() - before;
        assert_eq!(records, RECORDS);
        assert!(
            peak < bound,
            "reader on {threads} threads: {peak} bytes live at once, for {total} bytes of records"
        );
    }
}
