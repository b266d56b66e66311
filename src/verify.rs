//! Verification: every block read and checked, and a report of what is intact and what is not.

use crate::ending::Tail;
use crate::error::Result;
use crate::reader::Reader;
use crate::report::Report;
use crate::source::Source;

/// Reads every block `reader` has left and reports what is intact, what is damaged or
/// unreadable, and how the input ends ([`Report::ending`]).
///
/// Fails only when the input cannot be read or declares a format version this library does
/// not read; damage is what the report is for. For a slice or mapped file,
/// [`ReaderBuilder::verify`](crate::ReaderBuilder::verify) does the same on several threads.
pub fn verify<S: Source>(reader: &mut Reader<S>) -> Result<Report> {
    let mut report = Report::default();
    let mut tail = Tail::default();
    while let Some(item) = reader.next_block() {
        match item {
            Ok(block) => {
                tail.block(block.info().block_type);
                report.add_block(block.info());
            }
            Err(e) => {
                report.add_error(e)?;
                tail.damage();
            }
        }
    }
    let source = reader.source();
    report.len = source.base() + source.window().len() as u64;
    report.ending = tail.ending(report.len);
    Ok(report)
}
