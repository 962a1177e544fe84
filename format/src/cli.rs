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

/// The most of a user's value a message echoes: a value longer than this (a 2 MB
/// `filename=` in a job file) is shown by its start and end around a count of what was
/// cut, so a message stays a line a terminal can show.
pub const ECHO_MAX: usize = 200;

/// `s` as a message echoes it: whole up to `max` bytes, else its first and last
/// `max / 2` bytes (on character boundaries) around "[... N bytes ...]".
pub fn cut(s: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if s.len() <= max {
        return s.into();
    }
    let mut head = max / 2;
    while !s.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = s.len() - max / 2;
    while !s.is_char_boundary(tail) {
        tail += 1;
    }
    format!(
        "{}[... {} bytes ...]{}",
        &s[..head],
        tail - head,
        &s[tail..]
    )
    .into()
}

/// Linux's limits on a path (PATH_MAX 4096 with its NUL) and on one name in it
/// (NAME_MAX 255): the message for a longer one names the flag and shows the value cut
/// (a 2 MB `filename=` in a job file was echoed whole).
pub fn check_path_length(flag: &str, p: &std::path::Path) -> Result<(), String> {
    use std::os::unix::ffi::OsStrExt as _;
    let bytes = p.as_os_str().as_bytes().len();
    let why = if bytes > 4095 {
        format!("{bytes} bytes")
    } else if p.iter().any(|c| c.as_bytes().len() > 255) {
        "a name in it is longer than 255 bytes".to_string()
    } else {
        return Ok(());
    };
    Err(format!(
        "{flag} '{}': {why}; Linux takes paths of at most 4095 bytes and names of at most 255; give a shorter path",
        cut(&p.to_string_lossy(), ECHO_MAX)
    ))
}

/// An error and its causes on one line, as `{:#}` prints them, but a cause whose text
/// the line already ends with is not said again: an error type whose message embeds its
/// source and also returns it from `source()` (thiserror's `{source}` fields, tempfile's
/// path errors) would otherwise print the OS error twice ("(os error 30): Read-only file
/// system (os error 30)").
pub fn error_chain(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let c = cause.to_string();
        if text.is_empty() {
            text = c;
        } else if !text.ends_with(&c) {
            text.push_str(": ");
            text.push_str(&c);
        }
    }
    text
}

/// Returns a usage error (exit code 2) from a formatted message.
#[macro_export]
macro_rules! usage {
    ($($t:tt)*) => { anyhow::Error::new($crate::cli::UsageError(format!($($t)*))) };
}

/// The longest duration [`parse_duration`] accepts: 10^18 ns (about 31 years), so sums of
/// durations stay far from u64 nanoseconds' end.
pub const MAX_DURATION_NS: u64 = 1_000_000_000_000_000_000;

/// Parses `1ms`, `500us`, `30s`, `1.5s`, `2m`, `1h`, `250ns`. Exact decimal arithmetic
/// (no float): `999999999999999999ns` reads back as written; digits below a nanosecond are
/// rounded. Never panics; too long is refused with the limit.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let bad = || format!("takes a duration like 1ms, 500us, 30s or 2m; got '{s}'");
    let too_long = || format!("takes a duration up to 10^18 ns (about 31 years); '{s}' is longer");
    let ns_per: u128 = match unit {
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" | "min" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => return Err(bad()),
    };
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if (int.is_empty() && frac.is_empty()) || frac.contains('.') {
        return Err(bad());
    }
    // Leading zeros change nothing; more digits than that cannot fit.
    let int = int.trim_start_matches('0');
    if int.len() > 30 {
        return Err(too_long());
    }
    let whole: u128 = if int.is_empty() {
        0
    } else {
        int.parse().map_err(|_| bad())?
    };
    // The fraction: its first 18 digits are enough below 1 ns (the largest unit is
    // 3.6e12 ns); 10^18 x 3.6e12 fits a u128.
    let digits = &frac[..frac.len().min(18)];
    let frac_ns = if digits.is_empty() {
        0
    } else {
        let f: u128 = digits.parse().map_err(|_| bad())?;
        let scale = 10u128.pow(digits.len() as u32);
        (f * ns_per + scale / 2) / scale
    };
    let ns = whole
        .checked_mul(ns_per)
        .and_then(|w| w.checked_add(frac_ns))
        .filter(|ns| *ns <= u128::from(MAX_DURATION_NS))
        .ok_or_else(too_long)?;
    Ok(Duration::from_nanos(ns as u64))
}

/// Parses `128`, `128B`, `4k`, `4KiB`, `1m`, `1MiB` into bytes (k = 1024). Never panics;
/// a size beyond u64 bytes is refused with the limit.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let bad = || format!("takes a size like 128, 4k or 1MiB; got '{s}'");
    let too_large = || format!("takes a size up to 16 EiB (u64 bytes); '{s}' is larger");
    let mul: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return Err(bad()),
    };
    if num.is_empty() {
        return Err(bad());
    }
    let v: u64 = num.parse().map_err(|_| too_large())?;
    v.checked_mul(mul).ok_or_else(too_large)
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
    fn a_long_value_is_cut_to_its_ends() {
        let v = format!("/var/tmp/{}.dat", "a".repeat(2_000_000));
        let c = cut(&v, ECHO_MAX);
        assert!(c.len() < ECHO_MAX + 40, "{}", c.len());
        assert!(
            c.starts_with("/var/tmp/aaa") && c.ends_with("aaa.dat"),
            "{c}"
        );
        assert!(c.contains("bytes ...]"), "{c}");
        assert_eq!(cut("short", ECHO_MAX), "short");
        // Never in the middle of a character.
        let _ = cut(&"é".repeat(500), 101);
    }

    #[test]
    fn a_cause_the_message_already_ends_with_is_said_once() {
        let io = std::io::Error::from_raw_os_error(30);
        let e = anyhow::Error::new(io).context(format!(
            "x: open failed: {}",
            std::io::Error::from_raw_os_error(30)
        ));
        let t = error_chain(&e);
        assert_eq!(t.matches("os error 30").count(), 1, "{t}");
        let e = anyhow::anyhow!("inner").context("outer");
        assert_eq!(error_chain(&e), "outer: inner");
    }

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
        assert!(parse_duration(".s").is_err());
        assert!(parse_duration("1.2.3s").is_err());
        assert_eq!(parse_duration(".5s"), Ok(Duration::from_millis(500)));
        assert_eq!(
            parse_duration("1.0000000005s"),
            Ok(Duration::from_nanos(1_000_000_001))
        );
        assert_eq!(
            parse_duration("999999999999999999ns"),
            Ok(Duration::from_nanos(999_999_999_999_999_999))
        );
        let e = parse_duration("99999999999999999999h").unwrap_err();
        assert!(e.contains("31 years"), "{e}");
        assert_eq!(fmt_duration(Duration::from_millis(5000)), "5s");
        assert_eq!(fmt_duration(Duration::from_micros(250)), "250us");
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("128"), Ok(128));
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert!(parse_size("1 k").is_err());
        let e = parse_size("99999999999999999999").unwrap_err();
        assert!(e.contains("16 EiB"), "{e}");
        let e = parse_size("1e30G").unwrap_err();
        assert!(e.contains("'1e30G'"), "{e}");
    }
}
