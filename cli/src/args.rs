//! Option values checked when the command line is parsed, so that a bad one exits 2 with the
//! range it must be in, before anything is read or written.

use std::ops::RangeInclusive;

/// A byte count: digits, optionally followed by `K`, `M`, `G` or `T` (also `KB`/`KiB`,
/// `MB`/`MiB`, `GB`/`GiB`, `TB`/`TiB`, lowercase too), each a power of 1024 as for zstd's
/// options.
pub fn parse_bytes(arg: &str) -> Result<u64, String> {
    let split = arg.find(|c: char| !c.is_ascii_digit()).unwrap_or(arg.len());
    let (digits, suffix) = arg.split_at(split);
    let shift = match suffix.to_ascii_lowercase().as_str() {
        "" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => {
            return Err(format!(
            "expected a number of bytes, optionally with K, M, G or T (powers of 1024), got {arg:?}"
        ))
        }
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("expected a number of bytes, got {arg:?}"))?;
    n.checked_mul(1 << shift)
        .ok_or_else(|| format!("{arg} is too large"))
}

/// A byte count in `range` (see [`parse_bytes`]).
pub fn bytes_in(range: RangeInclusive<u64>) -> impl Fn(&str) -> Result<usize, String> + Clone {
    move |arg| {
        let n = parse_bytes(arg)?;
        if !range.contains(&n) {
            return Err(format!(
                "{arg} is out of range: {}..={} bytes",
                range.start(),
                range.end()
            ));
        }
        usize::try_from(n).map_err(|_| format!("{arg} is too large for this machine"))
    }
}

/// `--threads N`: 1 or more, or 0 for one per core (as `zstd -T0`).
pub fn parse_threads(arg: &str) -> Result<usize, String> {
    let n: usize = arg
        .parse()
        .map_err(|_| format!("expected a number of threads, got {arg:?}"))?;
    match n {
        0 => Ok(std::thread::available_parallelism().map_or(1, usize::from)),
        1..=1024 => Ok(n),
        _ => Err(format!("{n} is out of range: 0..=1024 (0: one per core)")),
    }
}

/// `--zstd LEVEL`: a level zstd accepts.
pub fn parse_level(arg: &str) -> Result<i32, String> {
    let levels = cobsfile::Compression::zstd_levels();
    let level: i32 = arg
        .parse()
        .map_err(|_| format!("expected a zstd level, got {arg:?}"))?;
    if !levels.contains(&level) {
        return Err(format!(
            "{level} is out of range: {}..={} (1..=22 smaller, 3 balanced, negative faster)",
            levels.start(),
            levels.end()
        ));
    }
    Ok(level)
}

/// `--zstd LEVEL`: compression at a level zstd accepts.
pub fn parse_zstd(arg: &str) -> Result<cobsfile::Compression, String> {
    cobsfile::Compression::zstd(parse_level(arg)?).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_take_binary_suffixes() {
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("64K"), Ok(64 << 10));
        assert_eq!(parse_bytes("64kib"), Ok(64 << 10));
        assert_eq!(parse_bytes("4MiB"), Ok(4 << 20));
        assert_eq!(parse_bytes("1G"), Ok(1 << 30));
        assert_eq!(parse_bytes("2GB"), Ok(2 << 30));
        assert_eq!(parse_bytes("3T"), Ok(3 << 40));
        for bad in [
            "",
            "K",
            "1.5M",
            "-1",
            "1P",
            "1 K",
            "99999999999999999999G",
            "20000000T",
        ] {
            assert!(parse_bytes(bad).is_err(), "{bad:?}");
        }
        assert!(bytes_in(1..=10)("11").is_err());
        assert_eq!(bytes_in(1..=10)("10"), Ok(10));
    }

    #[test]
    fn threads_and_levels_are_checked() {
        assert!(parse_threads("0").unwrap() >= 1);
        assert_eq!(parse_threads("3"), Ok(3));
        assert!(parse_threads("-1").is_err());
        assert!(parse_threads("100000").is_err());
        assert_eq!(parse_level("-7"), Ok(-7));
        assert_eq!(parse_level("22"), Ok(22));
        assert!(parse_level("23").unwrap_err().contains("..=22"));
        assert!(parse_level("x").is_err());
    }
}
