//! How records are delimited outside a cobsfile: one per line, or a 4-byte length prefix.

use std::io::{self, BufRead, Read, Write};

use byteorder::{ByteOrder, LittleEndian};

/// The metadata key `pack --framing lines` writes, with the value `no`, after the records of
/// an input whose last line had no newline, so that `cat` leaves the newline off that line
/// too (spec 8.2's reserved keys).
pub const FINAL_NEWLINE_KEY: &str = "cobsfile.lines.final-newline";

/// Whether a metadata block holds the note that the input's last line had no newline.
pub fn notes_no_final_newline(block: &cobsfile::Block<'_>) -> bool {
    block
        .entries()
        .any(|(key, value)| key == FINAL_NEWLINE_KEY && value == b"no")
}

/// A record framing for `pack` input and `cat` output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Framing {
    /// One record per newline-terminated line; the newline is not part of the record. A last
    /// line without a newline is a record too.
    Lines,
    /// Each record is a 4-byte little-endian length followed by that many bytes.
    Len32,
}

impl Framing {
    /// Reads records of at most `max_len` bytes from `input`, calling `each` with every one.
    /// The buffer is reused, so this allocates nothing per record once warmed up. Returns
    /// whether the input ended with a line that had no newline (never with `len32`).
    pub fn read_records<E>(
        self,
        input: &mut impl BufRead,
        max_len: usize,
        mut each: impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<bool, E>
    where
        E: From<FramingError>,
    {
        let mut record = Vec::new();
        let mut offset = 0u64;
        let mut unterminated = false;
        loop {
            record.clear();
            let read = match self {
                Framing::Lines => read_line(input, &mut record, max_len, offset),
                Framing::Len32 => read_len32(input, &mut record, max_len, offset),
            };
            let used = read.map_err(|error| E::from(FramingError { offset, error }))?;
            if used == 0 {
                return Ok(unterminated);
            }
            // A line that took all its bytes without a newline is the input's last.
            unterminated = self == Framing::Lines && used == record.len();
            offset += used as u64;
            each(&record)?;
        }
    }

    /// Writes one record in this framing.
    pub fn write_record(self, out: &mut impl Write, record: &[u8]) -> io::Result<()> {
        match self {
            Framing::Lines => {
                out.write_all(record)?;
                out.write_all(b"\n")
            }
            Framing::Len32 => {
                let len = u32::try_from(record.len()).map_err(|_| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("record of {} bytes is too long for len32", record.len()),
                    )
                })?;
                let mut prefix = [0; 4];
                LittleEndian::write_u32(&mut prefix, len);
                out.write_all(&prefix)?;
                out.write_all(record)
            }
        }
    }
}

/// A framing problem in the input, at a byte offset.
#[derive(Debug)]
pub struct FramingError {
    pub offset: u64,
    pub error: io::Error,
}

impl std::fmt::Display for FramingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.error.kind() {
            // These messages name their offset already.
            io::ErrorKind::UnexpectedEof | io::ErrorKind::InvalidData => {
                write!(f, "{}", self.error)
            }
            _ => write!(f, "{} at input offset {}", self.error, self.offset),
        }
    }
}

/// Reads a line without its newline; returns the bytes consumed (0 at end of input).
fn read_line(
    input: &mut impl BufRead,
    record: &mut Vec<u8>,
    max_len: usize,
    offset: u64,
) -> io::Result<usize> {
    let limit = max_len as u64 + 1;
    let used = input.by_ref().take(limit).read_until(b'\n', record)?;
    if record.last() == Some(&b'\n') {
        record.pop();
    }
    if record.len() > max_len {
        return Err(too_long(offset, max_len));
    }
    Ok(used)
}

fn too_long(offset: u64, max_len: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("record at input offset {offset} is longer than the maximum of {max_len} bytes"),
    )
}

/// Reads a length-prefixed record; returns the bytes consumed (0 at end of input).
fn read_len32(
    input: &mut impl BufRead,
    record: &mut Vec<u8>,
    max_len: usize,
    offset: u64,
) -> io::Result<usize> {
    let mut prefix = [0; 4];
    let got = read_full(input, &mut prefix)?;
    if got == 0 {
        return Ok(0);
    }
    if got < 4 {
        return Err(truncated(format!(
            "input ends inside the length prefix at input offset {offset}"
        )));
    }
    let len = LittleEndian::read_u32(&prefix) as u64;
    if len > max_len as u64 {
        return Err(too_long(offset, max_len));
    }
    let got = input.by_ref().take(len).read_to_end(record)?;
    if (got as u64) < len {
        return Err(truncated(format!(
            "record at input offset {offset} declares {len} bytes but the input ends after {got}"
        )));
    }
    Ok(4 + got)
}

fn truncated(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, message)
}

/// Fills `buf` as far as the input allows; returns the bytes read.
fn read_full(input: &mut impl BufRead, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match input.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(framing: Framing, input: &[u8]) -> Result<Vec<Vec<u8>>, String> {
        let mut out = Vec::new();
        framing
            .read_records(&mut &input[..], 100, |r| {
                out.push(r.to_vec());
                Ok::<(), FramingError>(())
            })
            .map_err(|e| format!("{} at {}", e.error, e.offset))?;
        Ok(out)
    }

    #[test]
    fn lines() {
        assert_eq!(
            records(Framing::Lines, b"a\n\nbc\nd").unwrap(),
            [&b"a"[..], b"", b"bc", b"d"]
        );
        assert!(records(Framing::Lines, b"").unwrap().is_empty());
    }

    #[test]
    fn len32_round_trip_and_truncation() {
        let mut bytes = Vec::new();
        for r in [&b"x"[..], b"", b"\n\0yz"] {
            Framing::Len32.write_record(&mut bytes, r).unwrap();
        }
        assert_eq!(
            records(Framing::Len32, &bytes).unwrap(),
            [&b"x"[..], b"", b"\n\0yz"]
        );
        let err = records(Framing::Len32, &bytes[..bytes.len() - 1]).unwrap_err();
        assert!(err.contains("declares 4 bytes"), "{err}");
        assert!(records(Framing::Len32, &[1, 0]).is_err());
        let long = records(Framing::Len32, &[101, 0, 0, 0]).unwrap_err();
        assert!(long.contains("longer than the maximum"), "{long}");
    }

    #[test]
    fn lines_longer_than_the_maximum_fail() {
        let line = [b'x'; 101];
        assert!(records(Framing::Lines, &line)
            .unwrap_err()
            .contains("longer than the maximum"));
        assert_eq!(records(Framing::Lines, &line[..100]).unwrap()[0].len(), 100);
    }
}
