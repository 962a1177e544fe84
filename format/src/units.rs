//! Numbers with units for people: byte sizes and rates, in the three forms diskpulse
//! prints. Binary units throughout (KiB = 1024 B, MiB = 2^20 B, GiB = 2^30 B).
//!
//! - [`bytes`]: two or three significant digits, thousands separated ("7.63 MiB",
//!   "512 B"), "–" for no value: report.html.
//! - [`bytes_fixed`]: fixed decimals per unit so a column lines up ("1.50 GiB",
//!   "12.3 MiB", "5 KiB"): the report's text table and headline.
//! - [`bytes_exact`]: the exact size when it is a whole number of a unit ("1 GiB",
//!   "125 MiB", "4 KiB"), one decimal otherwise: sizes a user typed (lab volumes).
//! - [`rate_mib_s`]: a rate in MiB/s ("1.50 GiB/s", "42 MiB/s", "3.25 MiB/s"), "-" for
//!   no value.
//!
//! (`diskpulse probe`'s fio-style "8k" block sizes are a different thing: they are
//! fio's spelling of its own options.)

/// Bytes in a MiB.
pub const MIB: f64 = 1024.0 * 1024.0;

const KIB_U: u64 = 1 << 10;
const MIB_U: u64 = 1 << 20;
const GIB_U: u64 = 1 << 30;

/// What [`bytes`], [`num`] and [`sig`] print for a value that is not there.
pub const NONE: &str = "–";

/// Thousands separated, `decimals` after the point.
pub fn num(x: f64, decimals: usize) -> String {
    if !x.is_finite() {
        return NONE.into();
    }
    let t = format!("{:.*}", decimals, x.abs());
    let (int, frac) = t.split_once('.').unwrap_or((&t, ""));
    let mut out = String::new();
    if x < 0.0 && t.bytes().any(|b| b.is_ascii_digit() && b != b'0') {
        out.push('-');
    }
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if !frac.is_empty() {
        out.push('.');
        out.push_str(frac);
    }
    out
}

/// Two or three significant digits (no decimals for a whole number), thousands
/// separated above.
pub fn sig(x: f64) -> String {
    let a = x.abs();
    if !x.is_finite() {
        NONE.into()
    } else if a >= 100.0 || x == x.trunc() {
        num(x, 0)
    } else if a >= 10.0 {
        num(x, 1)
    } else {
        num(x, 2)
    }
}

/// A byte count with significant digits ("7.63 MiB", "512 B").
pub fn bytes(b: f64) -> String {
    if !b.is_finite() {
        NONE.into()
    } else if b >= 1024.0 * MIB {
        format!("{} GiB", sig(b / 1024.0 / MIB))
    } else if b >= MIB {
        format!("{} MiB", sig(b / MIB))
    } else if b >= 1024.0 {
        format!("{} KiB", sig(b / 1024.0))
    } else {
        format!("{} B", num(b, 0))
    }
}

/// A byte count with fixed decimals per unit ("1.50 GiB", "12.3 MiB", "5 KiB").
pub fn bytes_fixed(b: f64) -> String {
    if b >= 1024.0 * MIB {
        format!("{:.2} GiB", b / 1024.0 / MIB)
    } else if b >= MIB {
        format!("{:.1} MiB", b / MIB)
    } else {
        format!("{:.0} KiB", b / 1024.0)
    }
}

/// A size, exact when it is a whole number of a unit ("1 GiB", "125 MiB", "1.5 GiB").
pub fn bytes_exact(b: u64) -> String {
    if b >= GIB_U && b.is_multiple_of(GIB_U) {
        format!("{} GiB", b >> 30)
    } else if b >= GIB_U {
        format!("{:.1} GiB", b as f64 / GIB_U as f64)
    } else if b >= MIB_U && b.is_multiple_of(MIB_U) {
        format!("{} MiB", b >> 20)
    } else if b >= MIB_U {
        format!("{:.1} MiB", b as f64 / MIB_U as f64)
    } else if b >= KIB_U && b.is_multiple_of(KIB_U) {
        format!("{} KiB", b >> 10)
    } else {
        format!("{b} B")
    }
}

/// A rate given in MiB/s ("1.50 GiB/s", "42 MiB/s", "3.25 MiB/s"; "-" if not finite).
pub fn rate_mib_s(mib_s: f64) -> String {
    if !mib_s.is_finite() {
        "-".into()
    } else if mib_s >= 1024.0 {
        format!("{:.2} GiB/s", mib_s / 1024.0)
    } else if mib_s >= 10.0 {
        format!("{mib_s:.0} MiB/s")
    } else {
        format!("{mib_s:.2} MiB/s")
    }
}

/// Seconds as a clock: "0:05", "1:12", "1:02:03".
pub fn clock(s: f64) -> String {
    let t = if s.is_finite() && s > 0.0 {
        s.round() as u64
    } else {
        0
    };
    if t >= 3600 {
        format!("{}:{:02}:{:02}", t / 3600, t / 60 % 60, t % 60)
    } else {
        format!("{}:{:02}", t / 60, t % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_form_prints_what_its_readers_expect() {
        assert_eq!(bytes(8005723.0), "7.63 MiB");
        assert_eq!(bytes(512.0), "512 B");
        assert_eq!(bytes(f64::NAN), NONE);
        assert_eq!(bytes_fixed(1.5 * 1024.0 * MIB), "1.50 GiB");
        assert_eq!(bytes_fixed(12.34 * MIB), "12.3 MiB");
        assert_eq!(bytes_fixed(5.0 * 1024.0), "5 KiB");
        assert_eq!(bytes_exact(1 << 30), "1 GiB");
        assert_eq!(bytes_exact(125 << 20), "125 MiB");
        assert_eq!(bytes_exact(3 << 29), "1.5 GiB");
        assert_eq!(bytes_exact(4096), "4 KiB");
        assert_eq!(bytes_exact(1000), "1000 B");
        assert_eq!(rate_mib_s(2048.0), "2.00 GiB/s");
        assert_eq!(rate_mib_s(42.4), "42 MiB/s");
        assert_eq!(rate_mib_s(3.254), "3.25 MiB/s");
        assert_eq!(rate_mib_s(f64::INFINITY), "-");
        assert_eq!(num(1234567.891, 1), "1,234,567.9");
        assert_eq!(sig(4.5), "4.50");
    }
}
