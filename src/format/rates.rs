//! `rates.csv`: written by `report`, per device and window (`--window`, 100 ms; 1s to
//! set beside `iostat -x 1`), rates derived from the raw diskstats counters (the
//! window's share of each counter delta).
//!
//! - `t_ns`: the window's START on the run clock; the row covers `[t_ns, t_ns + window_ns)`.
//! - `unix_ms`: the same instant on the wall clock, ms since the epoch
//!   (`(clock_zero_unix_ns + t_ns) / 1e6`, see meta.json), for Grafana and pandas.
//! - `window_ns`: the window's length.
//! - `device`; `read_mib_s`, `write_mib_s` (MiB/s); `read_iops`, `write_iops` (I/O/s);
//!   `flushes_per_s` (empty before kernel 5.5); `util_pct` (share of the window with I/O
//!   in flight, %); `r_await_ms`, `w_await_ms` (mean ms per completed I/O; empty without
//!   I/O); `in_flight_max` (the highest in-flight gauge sampled in the window).

use std::path::Path;

use super::csv::{line, read_rows};

pub const FILE: &str = "rates.csv";

/// The header: every column, in file order (the one list writers and readers use).
pub const HEADER: &str = "t_ns,unix_ms,window_ns,device,read_mib_s,write_mib_s,read_iops,write_iops,flushes_per_s,util_pct,r_await_ms,w_await_ms,in_flight_max";

/// The columns of [`HEADER`].
pub fn columns() -> Vec<&'static str> {
    HEADER.split(',').collect()
}

/// One row of `rates.csv`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RatesRow {
    pub t_ns: u64,
    pub unix_ms: u64,
    pub window_ns: u64,
    pub device: String,
    pub read_mib_s: f64,
    pub write_mib_s: f64,
    pub read_iops: f64,
    pub write_iops: f64,
    pub flushes_per_s: Option<f64>,
    pub util_pct: f64,
    pub r_await_ms: Option<f64>,
    pub w_await_ms: Option<f64>,
    pub in_flight_max: u64,
}

fn opt(x: Option<f64>, decimals: usize) -> String {
    x.map(|v| format!("{v:.decimals$}")).unwrap_or_default()
}

impl RatesRow {
    /// The row as a CSV line, with its newline.
    pub fn to_line(&self) -> String {
        line(&[
            self.t_ns.to_string(),
            self.unix_ms.to_string(),
            self.window_ns.to_string(),
            self.device.clone(),
            format!("{:.3}", self.read_mib_s),
            format!("{:.3}", self.write_mib_s),
            format!("{:.1}", self.read_iops),
            format!("{:.1}", self.write_iops),
            opt(self.flushes_per_s, 1),
            format!("{:.1}", self.util_pct),
            opt(self.r_await_ms, 3),
            opt(self.w_await_ms, 3),
            self.in_flight_max.to_string(),
        ])
    }
}

/// Writes `rows` under the header.
pub fn write(path: &Path, rows: &[RatesRow]) -> anyhow::Result<()> {
    let mut out = String::with_capacity(rows.len() * 90 + 200);
    out.push_str(HEADER);
    out.push('\n');
    for r in rows {
        out.push_str(&r.to_line());
    }
    std::fs::write(path, out).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))
}

/// Reads `rates.csv`; empty when the run has none.
pub fn read(dir: &Path) -> anyhow::Result<Vec<RatesRow>> {
    let mut rows = vec![];
    read_rows(&dir.join(FILE), &["t_ns", "window_ns", "device"], |c| {
        let (Some(t_ns), Some(window_ns)) = (c.u64("t_ns"), c.u64("window_ns")) else {
            return Err("t_ns or window_ns is not a number".to_string());
        };
        let n = |name: &str| c.f64(name).unwrap_or(f64::NAN);
        rows.push(RatesRow {
            t_ns,
            unix_ms: c.u64("unix_ms").unwrap_or(0),
            window_ns,
            device: c.str("device").to_string(),
            read_mib_s: n("read_mib_s"),
            write_mib_s: n("write_mib_s"),
            read_iops: n("read_iops"),
            write_iops: n("write_iops"),
            flushes_per_s: c.f64("flushes_per_s"),
            util_pct: n("util_pct"),
            r_await_ms: c.f64("r_await_ms"),
            w_await_ms: c.f64("w_await_ms"),
            in_flight_max: c.u64("in_flight_max").unwrap_or(0),
        });
        Ok(())
    })?;
    Ok(rows)
}
