//! `load.csv`: the load generator (`diskpulse load`, demo, a scenario's load phase), one
//! row per stats window (`--stats-window`, 100 ms) and role that did anything.
//!
//! - `t_ns`: the window's START on the run clock; windows are multiples of `window_ns`
//!   from the run's zero (see [`super`]), the row covers `[t_ns, t_ns + window_ns)`.
//! - `window_ns`: the window's length.
//! - `role`: `pub`, `sub`, `request`, `reply`, `cast`, `js-pub`, `js-consume`, `kv-put`,
//!   `kv-get`, `obj-put`, `obj-get`.
//! - `ops`, `bytes`, `errors`: counts in the window (a column's sum is the run's total).
//! - `lat_p50_us`, `lat_p90_us`, `lat_p99_us`, `lat_p999_us`, `lat_max_us`: latency
//!   from the actual send, µs with one decimal; empty for roles without latency (core
//!   publish) or a window without any.
//! - `co_p50_us`, `co_p99_us`, `co_max_us`: latency from the intended start (µs).
//! - `active_ns`: the part of the window the load ran (shorter than `window_ns` in the
//!   first and last window), so `ops / active_ns` is the rate while it ran.
//! - `phase`: the scenario phase the load ran in (`DISKPULSE_PHASE`, see
//!   [`super::ENV_PHASE`]); empty outside a scenario. Absent in format version 2 (read
//!   as empty).
//! - `oldest_wait_us`: how long the oldest operation still in flight at the window's end
//!   had waited since its intended start (µs, one decimal; 0 when nothing was
//!   outstanding): through a stall it grows window by window while `ops` is 0. Empty for
//!   roles that do not keep account of what they have in flight (receivers, responders,
//!   the AMQP roles) and in files written before the column (read as `None`).
//!
//! Loads of overlapping scenario phases append to one `load.csv` (one header, whole
//! rows), so rows are not in time order: [`read`] sorts each role's rows by `t_ns`, then
//! `phase`. Each window's latency histograms also go to `load.hlog` ([`super::hist`]).
//!
//! Also here: [`StreamCheck`], the `stream_check` of `diskpulse load --json`'s document
//! (js-pub's reconciliation), which the load engine writes and a scenario's load phase
//! reads back from the child's document ([`super::phases::LoadDocument::stream_check`]).

use std::collections::BTreeMap;
use std::path::Path;

use super::csv::{line, read_rows_chunked, t_ns_cell};

pub const FILE: &str = "load.csv";

/// The header: every column, in file order (the one list writers and readers use).
pub const HEADER: &str = "t_ns,window_ns,role,ops,bytes,errors,lat_p50_us,lat_p90_us,lat_p99_us,lat_p999_us,lat_max_us,co_p50_us,co_p99_us,co_max_us,active_ns,phase,oldest_wait_us";

/// The columns of [`HEADER`].
pub fn columns() -> Vec<&'static str> {
    HEADER.split(',').collect()
}

/// One row of `load.csv`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoadRow {
    pub t_ns: u64,
    pub window_ns: u64,
    pub role: String,
    pub ops: u64,
    pub bytes: u64,
    pub errors: u64,
    pub lat_p50_us: Option<f64>,
    pub lat_p90_us: Option<f64>,
    pub lat_p99_us: Option<f64>,
    pub lat_p999_us: Option<f64>,
    pub lat_max_us: Option<f64>,
    pub co_p50_us: Option<f64>,
    pub co_p99_us: Option<f64>,
    pub co_max_us: Option<f64>,
    pub active_ns: u64,
    /// The scenario phase (`DISKPULSE_PHASE`); `None` outside a scenario and in format
    /// version 2.
    pub phase: Option<u32>,
    /// How long the oldest operation still in flight at the window's end had waited since
    /// its intended start, µs (0: nothing outstanding); `None` for roles that do not
    /// track what they have in flight, and in files before the column.
    pub oldest_wait_us: Option<f64>,
}

fn us(x: Option<f64>) -> String {
    x.map(|v| format!("{v:.1}")).unwrap_or_default()
}

impl LoadRow {
    /// The row as a CSV line, with its newline.
    pub fn to_line(&self) -> String {
        line(&[
            self.t_ns.to_string(),
            self.window_ns.to_string(),
            self.role.clone(),
            self.ops.to_string(),
            self.bytes.to_string(),
            self.errors.to_string(),
            us(self.lat_p50_us),
            us(self.lat_p90_us),
            us(self.lat_p99_us),
            us(self.lat_p999_us),
            us(self.lat_max_us),
            us(self.co_p50_us),
            us(self.co_p99_us),
            us(self.co_max_us),
            self.active_ns.to_string(),
            self.phase.map(|p| p.to_string()).unwrap_or_default(),
            us(self.oldest_wait_us),
        ])
    }

    /// Ops per second while the role ran in this window.
    pub fn ops_per_s(&self) -> f64 {
        self.ops as f64 / (self.active_ns.max(1) as f64 / 1e9)
    }
}

/// Reads `load.csv` and its closed chunks `chunks/load.NNNNNN.csv` (`record --chunk`)
/// as one file (nothing when the run has none), split by role, each role's rows
/// sorted by `t_ns` then `phase`.
pub fn read(dir: &Path) -> anyhow::Result<BTreeMap<String, Vec<LoadRow>>> {
    Ok(read_noted(dir)?.0)
}

/// The rows of load.csv by role.
pub type ByRole = BTreeMap<String, Vec<LoadRow>>;

/// [`read`] with the reading's warnings: a damaged row is skipped, naming file:line; a
/// header without `t_ns`, `window_ns` and `role` refuses the file.
pub fn read_noted(dir: &Path) -> anyhow::Result<(ByRole, Vec<String>)> {
    let mut out: ByRole = BTreeMap::new();
    // The closed chunks (`record --chunk`) then the current file, as one file.
    let warnings = read_rows_chunked(dir, FILE, &NEEDED, |c| {
        let t_ns = t_ns_cell(c.str("t_ns"))?;
        let Some(window_ns) = c.u64("window_ns") else {
            return Err(format!(
                "window_ns '{}' is not a number",
                c.str("window_ns")
            ));
        };
        let row = LoadRow {
            t_ns,
            window_ns,
            role: c.str("role").to_string(),
            ops: count_cell(c, "ops")?,
            bytes: count_cell(c, "bytes")?,
            errors: count_cell(c, "errors")?,
            lat_p50_us: lat_cell(c, "lat_p50_us")?,
            lat_p90_us: lat_cell(c, "lat_p90_us")?,
            lat_p99_us: lat_cell(c, "lat_p99_us")?,
            lat_p999_us: lat_cell(c, "lat_p999_us")?,
            lat_max_us: lat_cell(c, "lat_max_us")?,
            co_p50_us: lat_cell(c, "co_p50_us")?,
            co_p99_us: lat_cell(c, "co_p99_us")?,
            co_max_us: lat_cell(c, "co_max_us")?,
            active_ns: c.u64("active_ns").unwrap_or(window_ns),
            phase: c.u64("phase").map(|p| p as u32),
            oldest_wait_us: lat_cell(c, "oldest_wait_us")?,
        };
        out.entry(row.role.clone()).or_default().push(row);
        Ok(())
    })?
    .unwrap_or_default();
    for rows in out.values_mut() {
        rows.sort_by_key(|r| (r.t_ns, r.phase));
    }
    Ok((out, warnings))
}

/// The columns every load.csv has had (format version 2 on): a file without one of them
/// is refused, naming it (its report would show latencies of `null`).
const NEEDED: [&str; 12] = [
    "t_ns",
    "window_ns",
    "role",
    "ops",
    "bytes",
    "errors",
    "lat_p50_us",
    "lat_p90_us",
    "lat_p99_us",
    "lat_p999_us",
    "lat_max_us",
    "active_ns",
];

/// The most a count cell of one window may hold: 2^53 (what an f64 keeps exactly; no
/// load does 9e15 operations in a window). Past it (`18446744073709551615`, a wrapped
/// `-1`) the row is damaged.
pub const MAX_COUNT: u64 = 1 << 53;

/// A count cell (`ops`, `bytes`, `errors`): empty is 0; text, a negative number or one
/// past [`MAX_COUNT`] make the row damaged (skipped with the reason, never read as 0).
fn count_cell(c: &super::csv::Cells, name: &str) -> Result<u64, String> {
    let s = c.str(name);
    if s.is_empty() {
        return Ok(0);
    }
    match s.parse::<u64>() {
        Ok(v) if v <= MAX_COUNT => Ok(v),
        Ok(v) => Err(format!("{name} {v} is past any count of a window (2^53)")),
        Err(_) => Err(format!(
            "{name} '{s}' is not a count (a whole number, 0 or more)"
        )),
    }
}

/// A latency cell (µs): empty is `None`; text, NaN, infinity or a negative number make
/// the row damaged (skipped with the reason).
fn lat_cell(c: &super::csv::Cells, name: &str) -> Result<Option<f64>, String> {
    let s = c.str(name);
    if s.is_empty() {
        return Ok(None);
    }
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(Some(v)),
        _ => Err(format!("{name} '{s}' is not a latency (µs, 0 or more)")),
    }
}

/// The load roles as load.csv's `role` column spells them (`load::record::Role::name`,
/// in `Role::ALL`'s order; a test in `load::record` holds the two together).
pub const ROLE_NAMES: [&str; 16] = [
    "pub",
    "sub",
    "request",
    "reply",
    "js-pub",
    "js-consume",
    "kv-put",
    "kv-get",
    "obj-put",
    "obj-get",
    "amqp-pub",
    "amqp-consume",
    "amqp-call",
    "amqp-cast",
    "amqp-serve",
    "js-get",
];

/// `load --json`'s `stream_check` (js-pub): the stream's messages before and after the
/// run beside the publishes acked; the load engine's reconciliation (`load::reconcile`)
/// makes it, a scenario's load phase reads it back (an acked message missing is data
/// loss, never an expected failure).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StreamCheck {
    pub stream: String,
    pub msgs_before: u64,
    /// `None`: the server did not answer stream info after the run.
    pub msgs_after: Option<u64>,
    pub acked: u64,
    /// `--msg-id` only: what the retry of the publishes whose ack was lost found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub msg_id: Option<Retried>,
}

/// What the retry of the lost publishes found (`--msg-id`).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct Retried {
    /// Publishes whose ack never came (timeouts at a reconnect, unacked at the stop).
    pub lost: u64,
    /// Of those, the ones the stream already held (the retry's ack said duplicate).
    pub lost_stored: u64,
    /// The ones it did not hold, stored now by the retry.
    pub republished: u64,
    /// Retries that got no ack either (the server gone again): not reconciled.
    pub retry_failed: u64,
    /// The stream's messages after the retry.
    pub msgs_final: Option<u64>,
}

impl StreamCheck {
    /// Messages stored during the run.
    pub fn stored(&self) -> Option<u64> {
        self.msgs_after.map(|a| a.saturating_sub(self.msgs_before))
    }

    /// Acked messages the stream does not hold (possible data loss), if known.
    pub fn missing(&self) -> Option<u64> {
        self.stored().map(|s| self.acked.saturating_sub(s))
    }

    /// `--msg-id`: whether `stored == acked + lost_stored` holds (`None`: not known, or
    /// some retries were not acked).
    pub fn exact(&self) -> Option<bool> {
        let r = self.msg_id.as_ref()?;
        if r.retry_failed > 0 {
            return None;
        }
        Some(self.stored()? == self.acked + r.lost_stored)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_reads_back_as_written() {
        let d = tempfile::tempdir().unwrap();
        let r = LoadRow {
            t_ns: 200_000_000,
            window_ns: 100_000_000,
            role: "js-pub".into(),
            ops: 12,
            bytes: 1536,
            errors: 0,
            lat_p50_us: Some(101.5),
            lat_p99_us: Some(350.0),
            active_ns: 40_000_000,
            phase: Some(4),
            oldest_wait_us: Some(12.5),
            ..Default::default()
        };
        let earlier = LoadRow {
            t_ns: 100_000_000,
            phase: None,
            ..r.clone()
        };
        let text = format!("{}\n{}{}", HEADER, r.to_line(), earlier.to_line());
        assert_eq!(
            text.lines().nth(1).unwrap().split(',').count(),
            columns().len()
        );
        std::fs::write(d.path().join(FILE), text).unwrap();
        let back = read(d.path()).unwrap();
        assert_eq!(back["js-pub"], vec![earlier, r.clone()]);
        // Version 2: no phase column (nor oldest_wait_us).
        let v2 = format!(
            "{}\n{}",
            HEADER.strip_suffix(",phase,oldest_wait_us").unwrap(),
            r.to_line().trim_end().strip_suffix(",4,12.5").unwrap()
        );
        std::fs::write(d.path().join(FILE), v2 + "\n").unwrap();
        let back = read(d.path()).unwrap();
        assert_eq!(back["js-pub"][0].phase, None);
        assert_eq!(back["js-pub"][0].oldest_wait_us, None);
        assert_eq!(back["js-pub"][0].ops, 12);
        assert_eq!(r.ops_per_s(), 300.0);
    }
}
