//! Atomic writes for pipes shared by several writers, and the pipe buffer size.

mod common;

use cobsfile::pipe::{self, PIPE_BUF};
use cobsfile::{Compression, Dictionary, Error, ReaderBuilder, WriterBuilder};
use common::{record_bytes, Content, RecordingWriter, Rng};

/// The file's leading sync byte and header block: the first write of every writer.
const START: [u8; 19] = [
    0x00, 0x02, 0x20, 0x01, 0x0e, 0x43, 0x4f, 0x42, 0x53, 0x46, 0x49, 0x4c, 0x45, 0x02, 0x31, 0xed,
    0xe8, 0x56, 0x00,
];

const CONTENTS: [Content; 5] = [
    Content::Random,
    Content::ZeroFree,
    Content::ZeroRich,
    Content::AllZero,
    Content::Runs254,
];

/// Checks that `writes` are the file start, then whole blocks (type to closing sync byte, no
/// other zero byte) of at most `limit` bytes each.
fn assert_whole_blocks_within(writes: &[Vec<u8>], limit: usize) {
    assert_eq!(writes[0], START);
    for (i, write) in writes.iter().enumerate().skip(1) {
        assert!(write.len() <= limit, "write {i}: {} > {limit}", write.len());
        assert_eq!(write.last(), Some(&0), "write {i} ends inside a block");
        assert!(
            !write[..write.len() - 1].contains(&0),
            "write {i} holds more than one block"
        );
    }
}

#[test]
fn every_write_is_one_block_within_the_limit() {
    let mut rng = Rng::new(5);
    for limit in [256, 512, PIPE_BUF, 5000] {
        for (zstd, threads) in [(false, 1), (true, 1), (true, 2), (false, 3)] {
            let mut builder = WriterBuilder::new().atomic_writes(limit).threads(threads);
            if zstd {
                builder = builder.compression(Compression::zstd(3).unwrap());
            }
            let mut writer = builder.build(RecordingWriter::default()).unwrap();
            let max = writer.max_record_len();
            let mut records = Vec::new();
            for i in 0..400u64 {
                let len = match rng.below(4) {
                    0 => max,
                    1 => rng.below(max as u64 + 1) as usize,
                    _ => rng.below(64) as usize,
                };
                let record = record_bytes(len, CONTENTS[i as usize % 5], rng.next_u64());
                writer.write_record(&record).unwrap();
                records.push(record);
                if i % 97 == 0 {
                    writer.write_metadata([("at", i.to_string())]).unwrap();
                }
            }
            let recorded = writer.finish().unwrap();
            assert_whole_blocks_within(&recorded.writes, limit);

            let file = recorded.writes.concat();
            let (read, errors) = ReaderBuilder::new().from_slice(&file).read_all();
            assert!(errors.is_empty(), "{errors:?}");
            assert_eq!(
                read, records,
                "limit {limit}, zstd {zstd}, threads {threads}"
            );
            assert!(cobsfile::Index::find(&file).is_none(), "no index");
        }
    }
}

/// The bound is tight: a record of the largest accepted length, of the content COBS expands
/// most (no zero byte) and stored as is, comes within a few bytes of the limit.
#[test]
fn the_largest_record_fills_the_limit() {
    for limit in [512, PIPE_BUF, 65536] {
        let mut writer = WriterBuilder::new()
            .atomic_writes(limit)
            .build(RecordingWriter::default())
            .unwrap();
        let max = writer.max_record_len();
        let too_large = writer.write_record(&vec![1; max + 1]);
        assert!(
            matches!(too_large, Err(Error::RecordTooLarge { len, max: m }) if len == max + 1 && m == max),
            "{too_large:?}"
        );
        writer
            .write_record(&record_bytes(max, Content::ZeroFree, 1))
            .unwrap();
        let writes = writer.finish().unwrap().writes;
        assert_whole_blocks_within(&writes, limit);
        // The file's start, the data block and the end block.
        assert_eq!(writes.len(), 3);
        assert!(
            writes[1].len() + 40 > limit,
            "{} of {limit}",
            writes[1].len()
        );
    }
}

#[test]
fn blocks_that_cannot_fit_are_refused_and_never_written() {
    let mut writer = WriterBuilder::new()
        .atomic_writes(PIPE_BUF)
        .build(RecordingWriter::default())
        .unwrap();
    let refused = writer.write_metadata([("big", vec![7; PIPE_BUF])]);
    assert!(
        matches!(refused, Err(Error::InvalidMetadata(_))),
        "{refused:?}"
    );
    let refused = writer.write_raw_block(-1, &[7; PIPE_BUF]);
    assert!(
        matches!(refused, Err(Error::RecordTooLarge { .. })),
        "{refused:?}"
    );
    writer.write_raw_block(-1, &[7; 4000]).unwrap();
    assert_whole_blocks_within(&writer.finish().unwrap().writes, PIPE_BUF);

    // A dictionary to embed whose block exceeds the limit: the writer does not start.
    let mut rng = Rng::new(9);
    let mut dictionary = vec![0; 16 * 1024];
    rng.fill(&mut dictionary);
    let built = WriterBuilder::new()
        .atomic_writes(PIPE_BUF)
        .compression(Compression::zstd(3).unwrap())
        .dictionary(Dictionary::new(dictionary), true)
        .build(RecordingWriter::default());
    assert!(
        matches!(built, Err(Error::TooLargeForOneWrite { .. })),
        "{built:?}"
    );
}

#[cfg(target_os = "linux")]
mod linux {
    use std::fs::File;
    use std::io;
    use std::os::fd::FromRawFd;

    use super::*;

    /// A new pipe: (read end, write end), closed on exec.
    fn pipe() -> (File, File) {
        let mut fds = [0; 2];
        // SAFETY: pipe2 writes two descriptors into the array it is given, which holds two.
        let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
        assert_eq!(rc, 0, "{}", io::Error::last_os_error());
        // SAFETY: both descriptors were just opened by pipe2 and nothing else owns them.
        unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) }
    }

    /// Writers on 4 threads share one pipe, each through its own `Writer` (one zstd, one on
    /// two threads); the reader at the other end gets every record once, in each writer's
    /// order, and no damage. Once with the default pipe buffer, once with one page.
    #[test]
    fn writers_sharing_a_pipe_never_interleave_blocks() {
        const WRITERS: u64 = 4;
        const RECORDS: u64 = 3000;
        for buffer in [None, Some(4096)] {
            let (read_end, write_end) = pipe();
            if let Some(bytes) = buffer {
                assert_eq!(pipe::set_buffer_size(&write_end, bytes).unwrap(), bytes);
            }
            let writers: Vec<_> = (0..WRITERS)
                .map(|id| {
                    let sink = write_end.try_clone().unwrap();
                    std::thread::spawn(move || write_tagged(id, RECORDS, sink))
                })
                .collect();
            drop(write_end);

            let mut reader = ReaderBuilder::new().from_read(read_end);
            let mut next = [0u64; WRITERS as usize];
            let mut switches = 0;
            let mut last = u64::MAX;
            while let Some(record) = reader.next_record() {
                let record = record.unwrap();
                let (id, seq) = (
                    record[0] as u64,
                    u64::from_le_bytes(record[1..9].try_into().unwrap()),
                );
                assert_eq!(seq, next[id as usize], "writer {id}: out of order or lost");
                assert_eq!(
                    record[9..],
                    tagged_body(id, seq),
                    "writer {id}, record {seq}"
                );
                next[id as usize] += 1;
                switches += u64::from(id != last);
                last = id;
            }
            for writer in writers {
                writer.join().unwrap();
            }
            assert_eq!(next, [RECORDS; WRITERS as usize]);
            assert!(
                switches > WRITERS,
                "the writers hardly overlapped ({switches} switches)"
            );
        }
    }

    /// Record `seq` of writer `id`: the id, the sequence number, then a body.
    fn write_tagged(id: u64, records: u64, sink: File) {
        let mut builder = WriterBuilder::new().atomic_writes(PIPE_BUF);
        match id {
            1 => builder = builder.compression(Compression::zstd(1).unwrap()),
            2 => {
                builder = builder
                    .compression(Compression::zstd(3).unwrap())
                    .threads(2)
            }
            _ => {}
        }
        let mut writer = builder.build(sink).unwrap();
        let mut record = Vec::new();
        for seq in 0..records {
            record.clear();
            record.push(id as u8);
            record.extend_from_slice(&seq.to_le_bytes());
            record.extend_from_slice(&tagged_body(id, seq));
            writer.write_record(&record).unwrap();
        }
        writer.finish().unwrap();
    }

    fn tagged_body(id: u64, seq: u64) -> Vec<u8> {
        let len = Rng::new(id << 32 | seq).below(1500) as usize;
        record_bytes(len, CONTENTS[(seq % 5) as usize], seq)
    }

    #[test]
    fn set_buffer_size_rounds_up_to_pages_and_reads_back() {
        let (read_end, write_end) = pipe();
        assert_eq!(pipe::buffer_size(&read_end).unwrap(), 65536);
        assert_eq!(pipe::set_buffer_size(&write_end, 5000).unwrap(), 8192);
        assert_eq!(pipe::buffer_size(&read_end).unwrap(), 8192);
        assert_eq!(pipe::set_buffer_size(&read_end, 1 << 20).unwrap(), 1 << 20);
        assert_eq!(pipe::buffer_size(&write_end).unwrap(), 1 << 20);
    }

    #[test]
    fn set_buffer_size_refuses_what_it_cannot_do_and_leaves_the_pipe_alone() {
        let (read_end, write_end) = pipe();
        let path = common::TempFile::with_contents(b"x");
        let file = File::open(&path.0).unwrap();
        let refused = pipe::set_buffer_size(&file, 65536).unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::InvalidInput, "{refused}");
        assert!(pipe::buffer_size(&file).is_err());

        let refused = pipe::set_buffer_size(&write_end, 1 << 40).unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::InvalidInput, "{refused}");
        // Shrinking below what the pipe holds is refused by the kernel.
        io::Write::write_all(&mut &write_end, &[1; 3 * 4096]).unwrap();
        assert!(pipe::set_buffer_size(&write_end, 4096).is_err());
        assert_eq!(pipe::buffer_size(&read_end).unwrap(), 65536);
    }
}
