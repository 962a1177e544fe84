//! Command-line parsing helpers: durations with units, and usage errors (exit code 2).

use std::time::Duration;

/// A usage error: bad input the user can fix. `main` prints it and exits with 2.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// Returns a usage error (exit code 2) from a formatted message.
#[macro_export]
macro_rules! usage {
    ($($t:tt)*) => { anyhow::Error::new($crate::cli::UsageError(format!($($t)*))) };
}

/// Parses `1ms`, `500us`, `30s`, `1.5s`, `2m`, `1h`, `250ns`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let bad = || format!("takes a duration like 1ms, 500us, 30s or 2m; got '{s}'");
    if num.is_empty() || unit.is_empty() {
        return Err(bad());
    }
    let v: f64 = num.parse().map_err(|_| bad())?;
    let ns_per = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        _ => return Err(bad()),
    };
    let ns = v * ns_per;
    if !ns.is_finite() || ns > 1e18 {
        return Err(bad());
    }
    Ok(Duration::from_nanos(ns.round() as u64))
}

/// Parses `128`, `128B`, `4k`, `4KiB`, `1m`, `1MiB` into bytes (k = 1024).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let bad = || format!("takes a size like 128, 4k or 1MiB; got '{s}'");
    let v: u64 = num.parse().map_err(|_| bad())?;
    let mul = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return Err(bad()),
    };
    v.checked_mul(mul).ok_or_else(bad)
}

/// Formats a duration the way [`parse_duration`] reads it.
pub fn fmt_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns.is_multiple_of(1_000_000_000) {
        format!("{}s", ns / 1_000_000_000)
    } else if ns.is_multiple_of(1_000_000) {
        format!("{}ms", ns / 1_000_000)
    } else if ns.is_multiple_of(1_000) {
        format!("{}us", ns / 1_000)
    } else {
        format!("{ns}ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1ms"), Ok(Duration::from_millis(1)));
        assert_eq!(parse_duration("500us"), Ok(Duration::from_micros(500)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        let e = parse_duration("1 ms").unwrap_err();
        assert!(e.contains("'1 ms'"), "{e}");
        assert!(parse_duration("10").is_err());
        assert!(parse_duration("ms").is_err());
        assert_eq!(fmt_duration(Duration::from_millis(5000)), "5s");
        assert_eq!(fmt_duration(Duration::from_micros(250)), "250us");
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("128"), Ok(128));
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert!(parse_size("1 k").is_err());
    }
}
