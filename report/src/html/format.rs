//! Numbers for humans (units everywhere, "–" for no value, never 0) and the one table
//! shape every part of report.html uses.

use std::fmt::Write as _;

use super::escape;

pub(super) use ::format::units::{bytes, num, sig, NONE};

pub(super) fn rate(mib_s: f64) -> String {
    if mib_s.is_finite() {
        ::format::units::rate_mib_s(mib_s)
    } else {
        NONE.into()
    }
}

/// A latency or duration given in µs.
pub(super) fn us(x: f64) -> String {
    if !x.is_finite() {
        NONE.into()
    } else if x >= 1e6 {
        format!("{} s", sig(x / 1e6))
    } else if x >= 1e3 {
        format!("{} ms", sig(x / 1e3))
    } else {
        format!("{} µs", sig(x))
    }
}

/// A duration given in seconds.
pub(super) fn secs(x: f64) -> String {
    if !x.is_finite() {
        NONE.into()
    } else if x >= 3600.0 {
        format!(
            "{} h {} min",
            (x / 3600.0).floor(),
            ((x % 3600.0) / 60.0).floor()
        )
    } else if x >= 120.0 {
        format!("{} min {} s", (x / 60.0).floor(), (x % 60.0).round())
    } else if x >= 1.0 || x == 0.0 {
        format!("{} s", sig(x))
    } else {
        us(x * 1e6)
    }
}

pub(super) fn per_s(x: f64, unit: &str) -> String {
    if x.is_finite() {
        format!("{} {unit}/s", sig(x))
    } else {
        NONE.into()
    }
}

pub(super) fn pct(x: f64) -> String {
    if x.is_finite() {
        format!("{} %", sig(x))
    } else {
        NONE.into()
    }
}

pub(super) fn opt(x: Option<f64>) -> f64 {
    x.unwrap_or(f64::NAN)
}

/// A cell: text (escaped when written) and whether it is a number (right-aligned).
pub(super) enum Cell {
    T(String),
    N(String),
    /// Already HTML.
    H(String),
}

pub(super) fn t(s: impl Into<String>) -> Cell {
    Cell::T(s.into())
}
pub(super) fn n(s: impl Into<String>) -> Cell {
    Cell::N(s.into())
}

/// `head` entries starting with '#' are numeric columns (the '#' is not shown).
pub(super) fn table(s: &mut String, head: &[&str], rows: &[(Option<&str>, Vec<Cell>)]) {
    s.push_str("<table>\n<thead><tr>");
    for h in head {
        match h.strip_prefix('#') {
            Some(h) => {
                let _ = write!(s, "<th class=\"num\">{}</th>", escape(h));
            }
            None => {
                let _ = write!(s, "<th>{}</th>", escape(h));
            }
        }
    }
    s.push_str("</tr></thead>\n<tbody>\n");
    for (class, cells) in rows {
        match class {
            Some(c) => {
                let _ = write!(s, "<tr class=\"{}\">", escape(c));
            }
            None => s.push_str("<tr>"),
        }
        for c in cells {
            match c {
                Cell::T(x) => {
                    let _ = write!(s, "<td>{}</td>", escape(x));
                }
                Cell::N(x) => {
                    let _ = write!(s, "<td class=\"num\">{}</td>", escape(x));
                }
                Cell::H(x) => {
                    let _ = write!(s, "<td>{x}</td>");
                }
            }
        }
        s.push_str("</tr>\n");
    }
    s.push_str("</tbody>\n</table>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_carry_units_and_no_value_is_a_dash() {
        assert_eq!(num(-1234.0, 0), "-1,234");
        assert_eq!(num(999.0, 0), "999");
        assert_eq!(us(850.0), "850 µs");
        assert_eq!(us(22331.4), "22.3 ms");
        assert_eq!(us(f64::NAN), NONE);
        assert_eq!(bytes(8005723.0), "7.63 MiB");
        assert_eq!(bytes(512.0), "512 B");
        assert_eq!(secs(4.5), "4.50 s");
        assert_eq!(secs(30.0), "30 s");
        assert_eq!(us(20_000.0), "20 ms");
        assert_eq!(secs(0.095), "95 ms");
        assert_eq!(secs(125.0), "2 min 5 s");
        assert_eq!(per_s(38072.3, "op"), "38,072 op/s");
    }
}
