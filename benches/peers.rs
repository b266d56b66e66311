//! Writing the corpora in the peer formats, shared by the benchmarks and examples that compare
//! cobsfile with them (included with `#[path]`, next to `corpus.rs`).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::Cursor;

use mcap::records::MessageHeader;

use crate::corpus::Corpus;

/// The records of `c` as an MCAP file written with `options` into `buf` (cleared first): one
/// channel, one message per record, sequence and times = the record's index.
pub fn write_mcap(c: &Corpus, options: mcap::WriteOptions, mut buf: Vec<u8>) -> Vec<u8> {
    buf.clear();
    let mut w = options.create(Cursor::new(buf)).expect("mcap header");
    let channel = w
        .add_channel(0, "events", "application/octet-stream", &BTreeMap::new())
        .expect("channel");
    for (i, r) in c.records().enumerate() {
        let header = MessageHeader {
            channel_id: channel,
            sequence: i as u32,
            log_time: i as u64,
            publish_time: i as u64,
        };
        w.write_to_known_channel(&header, r).expect("message");
    }
    w.finish().expect("finish");
    w.into_inner().into_inner()
}
