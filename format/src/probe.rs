//! `probe.csv` and `probe.json`: `diskpulse probe` inside a recording.
//!
//! ## `probe.csv`
//! One row per window (`--window`, 100 ms) and direction (`read`, `write`, `trim` for a discarding job, and `sync`
//! with `--fsync`/`--fdatasync`), all jobs merged, every window from the probe's start to
//! its end (one in which nothing completed is a row with 0 `ios` and empty latencies), written as soon as every job is past
//! the window. Windows lie on the run's grid (multiples of `window_ns` from the run's
//! zero: the probe starts its measured phase on a window boundary when it runs inside a
//! recording).
//! - `t_ns`: the window's START on the run clock; the row covers `[t_ns, t_ns + window_ns)`.
//! - `window_ns`: the window's length.
//! - `ios`, `bytes`, `short_ios`: completions in the window (counts; a column's sum is
//!   the run's total); an I/O counts in the window where it completed.
//! - `clat_mean_us`, `clat_p50_us`, `clat_p90_us`, `clat_p99_us`, `clat_p999_us`,
//!   `clat_max_us`: completion latency (from submission; on `sync` rows the sync call's
//!   own latency), µs with one decimal; empty when the window had no completion.
//! - `lat_co_p50_us`, `lat_co_p99_us`, `lat_co_p999_us`, `lat_co_max_us`: latency from
//!   the intended start on the `--rate-iops-total` schedule (coordinated omission corrected);
//!   without a rate, from when the queue slot came free. Empty on `sync` rows.
//! - `ramp`: 1 for windows inside `--ramp` (not in the summary's totals), else 0.
//! - `active_ns`: the part of the window the probe ran (the first window from the
//!   probe's start, the last up to its last completion).
//! - `phase`: the scenario phase the probe ran in (`DISKPULSE_PHASE`, see
//!   [`super::ENV_PHASE`]); empty outside a scenario. Absent in format version 2 (read
//!   as empty).
//! - `oldest_wait_us`: how long the oldest I/O (or sync call) still in flight at the
//!   window's end had waited since its intended start (its submission without a rate),
//!   µs with one decimal, the longest over the jobs; 0 when none was in flight. The same
//!   on every direction's row of a window. Through a stall it grows by a window per row
//!   while `ios` is 0. A job learns it when it next completes something (it is blocked
//!   in the kernel until then), so the rows of a stall are written after it. Absent
//!   before the column (read as `None`).
//!
//! Several probes of one run (overlapping scenario phases) append to one `probe.csv`
//! (one header, whole rows), so rows of different phases interleave and are not in
//! time order: [`read`] sorts each direction's rows by `t_ns`, then `phase`. Each
//! window's latency histograms also go to `probe.hlog` ([`super::hist`]).
//!
//! The row writer formats into a reused buffer with itoa (no allocation per row).
//!
//! ## `probe.json`
//! The fio-shaped JSON the probe prints with `--output-format json`; [`ProbeJson`] holds
//! the parts diskpulse reads back (the study's probe figures).

use std::collections::BTreeMap;
use std::path::Path;

use collectors::probe::stats::WindowStats;
use hdrhistogram::Histogram;
use serde::Deserialize;

use super::csv::{read_rows, t_ns_cell};
use crate::csv::put_u64;

pub const FILE: &str = "probe.csv";
pub const JSON_FILE: &str = "probe.json";

/// The header: every column, in file order (the one list writers and readers use).
pub const HEADER: &str = "t_ns,window_ns,direction,ios,bytes,short_ios,clat_mean_us,clat_p50_us,clat_p90_us,clat_p99_us,clat_p999_us,clat_max_us,lat_co_p50_us,lat_co_p99_us,lat_co_p999_us,lat_co_max_us,ramp,active_ns,phase,oldest_wait_us";

/// The columns of [`HEADER`].
pub fn columns() -> Vec<&'static str> {
    HEADER.split(',').collect()
}

/// What a row describes: a direction of `WindowStats::dir` or the sync calls.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    Dir(usize),
    Sync,
}

/// One window of the probe on the run clock, for [`format_row`].
#[derive(Clone, Copy, Debug)]
pub struct Window {
    pub t_ns: u64,
    pub window_ns: u64,
    pub active_ns: u64,
    pub ramp: bool,
    /// The scenario phase (`DISKPULSE_PHASE`), `None` outside a scenario.
    pub phase: Option<u32>,
    /// The oldest I/O in flight at the window's end: how long it had waited, ns (0: none).
    pub oldest_wait_ns: u64,
}

/// Appends one `probe.csv` row (with its newline) to `b`.
pub fn format_row(b: &mut Vec<u8>, w: &Window, name: &str, kind: Kind, s: &WindowStats) {
    put_u64(b, w.t_ns);
    b.push(b',');
    put_u64(b, w.window_ns);
    b.push(b',');
    b.extend_from_slice(name.as_bytes());
    let (ios, bytes, short, clat, mean, max, co): (u64, u64, u64, &Histogram<u64>, f64, u64, _) =
        match kind {
            Kind::Dir(d) => {
                let x = &s.dir[d];
                (
                    x.ios,
                    x.bytes,
                    x.short_ios,
                    &x.clat,
                    x.clat_m.mean(),
                    x.clat_m.max,
                    Some(&x.lat_co),
                )
            }
            Kind::Sync => (
                s.sync_ios,
                0,
                0,
                &s.sync,
                s.sync_m.mean(),
                s.sync_m.max,
                None,
            ),
        };
    for v in [ios, bytes, short] {
        b.push(b',');
        put_u64(b, v);
    }
    let empty = ios == 0;
    b.push(b',');
    if !empty {
        push_us_1dp(b, mean.round() as u64);
    }
    for q in [0.5, 0.9, 0.99, 0.999] {
        b.push(b',');
        if !empty {
            // The exact max caps the histogram's bucket value.
            push_us_1dp(b, clat.value_at_quantile(q).min(max));
        }
    }
    b.push(b',');
    if !empty {
        push_us_1dp(b, max);
    }
    for q in [Some(0.5), Some(0.99), Some(0.999), None] {
        b.push(b',');
        if let (false, Some(h)) = (empty, co) {
            push_us_1dp(
                b,
                match q {
                    Some(q) => h.value_at_quantile(q),
                    None => h.max(),
                },
            );
        }
    }
    b.extend_from_slice(if w.ramp { b",1," } else { b",0," });
    put_u64(b, w.active_ns);
    b.push(b',');
    if let Some(p) = w.phase {
        put_u64(b, p as u64);
    }
    b.push(b',');
    push_us_1dp(b, w.oldest_wait_ns);
    b.push(b'\n');
}

/// Nanoseconds as microseconds with one decimal, rounded half up (1234567 -> 1234.6).
fn push_us_1dp(out: &mut Vec<u8>, ns: u64) {
    let tenths = ns.saturating_add(50) / 100;
    put_u64(out, tenths / 10);
    out.push(b'.');
    out.push(b'0' + (tenths % 10) as u8);
}

/// One row of `probe.csv`, read back.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProbeRow {
    pub t_ns: u64,
    pub window_ns: u64,
    pub direction: String,
    pub ios: u64,
    pub bytes: u64,
    pub short_ios: u64,
    pub clat_mean_us: Option<f64>,
    pub clat_p50_us: Option<f64>,
    pub clat_p90_us: Option<f64>,
    pub clat_p99_us: Option<f64>,
    pub clat_p999_us: Option<f64>,
    pub clat_max_us: Option<f64>,
    lat_co_p50_us: Option<f64>,
    lat_co_p99_us: Option<f64>,
    lat_co_p999_us: Option<f64>,
    pub lat_co_max_us: Option<f64>,
    pub ramp: bool,
    pub active_ns: u64,
    /// The scenario phase that wrote the row; `None` outside a scenario (and in format
    /// version 2).
    pub phase: Option<u32>,
    /// How long the oldest I/O in flight at the window's end had waited, µs (0: none);
    /// `None` in files before the column.
    pub oldest_wait_us: Option<f64>,
}

/// Reads `probe.csv`, split by direction, each direction's rows sorted by `t_ns` then
/// `phase` (probes of overlapping phases append to one file); `None` when the run has no
/// probe rows.
pub fn read(dir: &Path) -> anyhow::Result<Option<BTreeMap<String, Vec<ProbeRow>>>> {
    Ok(read_noted(dir)?.0)
}

/// The rows of probe.csv by direction.
type ByDirection = BTreeMap<String, Vec<ProbeRow>>;

/// [`read`] with the reading's warnings: a damaged row is skipped, naming file:line; a
/// header without `t_ns`, `window_ns` and `direction` refuses the file.
pub fn read_noted(dir: &Path) -> anyhow::Result<(Option<ByDirection>, Vec<String>)> {
    let mut out: ByDirection = BTreeMap::new();
    let warnings = read_rows(&dir.join(FILE), &["t_ns", "window_ns", "direction"], |c| {
        let t_ns = t_ns_cell(c.str("t_ns"))?;
        let Some(window_ns) = c.u64("window_ns") else {
            return Err(format!(
                "window_ns '{}' is not a number",
                c.str("window_ns")
            ));
        };
        let row = ProbeRow {
            t_ns,
            window_ns,
            direction: c.str("direction").to_string(),
            ios: c.u64("ios").unwrap_or(0),
            bytes: c.u64("bytes").unwrap_or(0),
            short_ios: c.u64("short_ios").unwrap_or(0),
            clat_mean_us: c.f64("clat_mean_us"),
            clat_p50_us: c.f64("clat_p50_us"),
            clat_p90_us: c.f64("clat_p90_us"),
            clat_p99_us: c.f64("clat_p99_us"),
            clat_p999_us: c.f64("clat_p999_us"),
            clat_max_us: c.f64("clat_max_us"),
            lat_co_p50_us: c.f64("lat_co_p50_us"),
            lat_co_p99_us: c.f64("lat_co_p99_us"),
            lat_co_p999_us: c.f64("lat_co_p999_us"),
            lat_co_max_us: c.f64("lat_co_max_us"),
            ramp: c.str("ramp") == "1",
            active_ns: c.u64("active_ns").unwrap_or(window_ns),
            phase: c.u64("phase").map(|p| p as u32),
            oldest_wait_us: c.f64("oldest_wait_us"),
        };
        out.entry(row.direction.clone()).or_default().push(row);
        Ok(())
    })?
    .unwrap_or_default();
    for rows in out.values_mut() {
        rows.sort_by_key(|r| (r.t_ns, r.phase));
    }
    Ok(((!out.is_empty()).then_some(out), warnings))
}

/// A latency distribution of `probe.json` (ns), fio's shape.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct LatNs {
    #[serde(default)]
    pub mean: Option<f64>,
    /// fio's keys: "99.000000" and so on.
    #[serde(default)]
    pub percentile: BTreeMap<String, f64>,
}

impl LatNs {
    /// The percentile `p` (e.g. 99.0), whatever the key's decimals.
    pub fn percentile(&self, p: f64) -> Option<f64> {
        self.percentile
            .iter()
            .find(|(k, _)| k.parse::<f64>().is_ok_and(|x| (x - p).abs() < 1e-9))
            .map(|(_, v)| *v)
    }
}

/// A direction of a job in `probe.json`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct JobDirection {
    #[serde(default)]
    pub total_ios: u64,
    #[serde(default)]
    pub clat_ns: LatNs,
}

/// A job's sync calls in `probe.json`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct JobSync {
    #[serde(default)]
    pub lat_ns: LatNs,
}

/// A job of `probe.json`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Job {
    #[serde(default)]
    pub read: JobDirection,
    #[serde(default)]
    pub write: JobDirection,
    #[serde(default)]
    pub sync: JobSync,
}

/// The parts of `probe.json` (and of a scenario's `probe-N.json`) diskpulse reads.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ProbeJson {
    #[serde(default)]
    pub jobs: Vec<Job>,
    /// diskpulse's own block: the rate asked for and what it could not issue.
    #[serde(default)]
    pub diskpulse: ProbeExtra,
}

/// `probe.json`'s `diskpulse` block, the parts a study reads.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ProbeExtra {
    /// `--rate-iops-total` (None without a rate).
    #[serde(default)]
    pub rate_iops_total: Option<f64>,
    /// I/Os the rate schedule made due before the end that were never issued: the device
    /// (or the CPU) did not keep up.
    #[serde(default)]
    pub rate_missed_ios: u64,
}

impl ProbeJson {
    /// I/Os issued over every job and direction.
    pub fn total_ios(&self) -> u64 {
        self.jobs
            .iter()
            .map(|j| j.read.total_ios + j.write.total_ios)
            .sum()
    }
}

impl ProbeJson {
    pub fn read(path: &Path) -> anyhow::Result<ProbeJson> {
        let text = super::regular::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        serde_json::from_str(&text)
            .map_err(|e| anyhow::anyhow!("{}: not a probe result: {e}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use collectors::probe::stats::{READ, WRITE};

    #[test]
    fn a_row_has_every_column_and_empty_latencies_without_ios() {
        let mut s = WindowStats::new();
        s.record_io(READ, 8192, 8192, 0, 1_000, 1_000, 81_000, true);
        let w = Window {
            t_ns: 5_000_000,
            window_ns: 100_000_000,
            active_ns: 60_000_000,
            ramp: false,
            phase: None,
            oldest_wait_ns: 0,
        };
        let mut b = vec![];
        format_row(&mut b, &w, "read", Kind::Dir(READ), &s);
        format_row(
            &mut b,
            &Window {
                ramp: true,
                phase: Some(2),
                oldest_wait_ns: 412_345_678,
                ..w
            },
            "write",
            Kind::Dir(WRITE),
            &s,
        );
        let text = String::from_utf8(b).unwrap();
        let rows: Vec<&str> = text.lines().collect();
        assert_eq!(rows[0].split(',').count(), columns().len(), "{}", rows[0]);
        assert_eq!(rows[1].split(',').count(), columns().len(), "{}", rows[1]);
        assert!(
            rows[0].starts_with("5000000,100000000,read,1,8192,0,80.0,80.0,"),
            "{}",
            rows[0]
        );
        assert!(
            rows[0].ends_with(",81.0,81.0,81.0,81.0,0,60000000,,0.0"),
            "{}",
            rows[0]
        );
        assert_eq!(
            rows[1],
            "5000000,100000000,write,0,0,0,,,,,,,,,,,1,60000000,2,412345.7"
        );
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(FILE), format!("{}\n{text}", HEADER)).unwrap();
        let back = read(d.path()).unwrap().unwrap();
        assert_eq!(back["read"][0].ios, 1);
        assert_eq!(back["read"][0].clat_max_us, Some(80.0));
        assert_eq!(back["read"][0].lat_co_max_us, Some(81.0));
        assert!(back["write"][0].ramp && back["write"][0].clat_p50_us.is_none());
        assert_eq!(back["read"][0].phase, None);
        assert_eq!(back["write"][0].phase, Some(2));
        assert_eq!(back["write"][0].oldest_wait_us, Some(412345.7));
    }

    #[test]
    fn rows_of_two_phases_read_in_time_order_and_version_2_rows_have_no_phase() {
        let d = tempfile::tempdir().unwrap();
        let v3 = format!(
            "{HEADER}\n\
             200,100,write,1,8,0,,,,,,,,,,,0,100,2,0.0\n\
             100,100,write,1,8,0,,,,,,,,,,,0,100,1,0.0\n\
             100,100,write,1,8,0,,,,,,,,,,,0,100,,0.0\n"
        );
        std::fs::write(d.path().join(FILE), v3).unwrap();
        let back = read(d.path()).unwrap().unwrap();
        let order: Vec<_> = back["write"].iter().map(|r| (r.t_ns, r.phase)).collect();
        assert_eq!(order, vec![(100, None), (100, Some(1)), (200, Some(2))]);
        let v2_header = HEADER.strip_suffix(",phase,oldest_wait_us").unwrap();
        std::fs::write(
            d.path().join(FILE),
            format!("{v2_header}\n100,100,read,3,24,0,,,,,,,,,,,0,100\n"),
        )
        .unwrap();
        let back = read(d.path()).unwrap().unwrap();
        assert_eq!(back["read"][0].ios, 3);
        assert_eq!(back["read"][0].phase, None);
        assert_eq!(back["read"][0].oldest_wait_us, None);
    }

    #[test]
    fn percentiles_are_found_whatever_their_decimals() {
        let j: ProbeJson = serde_json::from_str(
            r#"{"jobs":[{"write":{"total_ios":3,"clat_ns":{"mean":1500.0,"percentile":{"99.000000":4000,"50.000000":1000}}}}]}"#,
        )
        .unwrap();
        assert_eq!(j.jobs[0].write.clat_ns.percentile(99.0), Some(4000.0));
        assert_eq!(j.jobs[0].write.clat_ns.percentile(99.9), None);
        assert_eq!(j.jobs[0].read.total_ios, 0);
    }
}
