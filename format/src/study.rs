//! The study directory of `diskpulse run`: `study.json` (written by the scenario runner
//! as runs go, completed by the study report) and `study.csv` (one row per run).
//!
//! `study.json`: `scenario`, `description`, `file`, `repeat`, `cells[]` (`id`,
//! `params` as `[name, value]` pairs), `runs[]` (`cell`, `params`, `repeat`, `dir`
//! relative to the study, `status` ok/failed/interrupted, `error`, `elapsed_s`),
//! `status`, `format_version`; after the report also `figures_per_run[]`,
//! `cells_summary[]`, `axes`, `verdicts[]` and `unanswered[]` (see [`Study`]).
//!
//! `study.csv`: `cell,repeat,status,invalid`, one column per matrix parameter, then the
//! [`FIGURES`] in order, then with agents (a scenario's `[agents]`) for each node any run
//! has, in name order, the [`NODE_FIGURES`] as `node_<NODE>_<figure>`; cells are quoted
//! when they hold a comma or a quote; an empty cell is a figure the run does not have.

use std::collections::BTreeMap;
use std::path::Path;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::csv::line;

pub const JSON_FILE: &str = "study.json";
pub const CSV_FILE: &str = "study.csv";

/// A cell of the matrix.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct StudyCell {
    pub id: String,
    #[serde(default)]
    pub params: Vec<(String, String)>,
}

/// One run of a cell.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct StudyRun {
    pub cell: String,
    #[serde(default)]
    pub params: Vec<(String, String)>,
    pub repeat: u32,
    pub dir: String,
    pub status: String,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub elapsed_s: f64,
    /// Why a finished run is left out of the comparison (its probe fell behind its rate,
    /// its load failed), set when the study's reports are written; None when it stands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalid: Option<String>,
}

impl StudyRun {
    /// The value of matrix parameter `k` in this run ("" if it has none).
    pub fn param(&self, k: &str) -> &str {
        self.params
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
            .unwrap_or("")
    }
    pub fn ok(&self) -> bool {
        self.status == "ok"
    }
    /// Finished and valid: the runs a cell's figures and the verdicts are made of.
    pub fn counts(&self) -> bool {
        self.ok() && self.invalid.is_none()
    }
}

/// `study.json`. The runner writes the first fields and the header (`file`,
/// `format_version`, `repeat`) as runs go ([`Study::write_running`]); the study report
/// adds `axes`, `cells_summary`, `figures_per_run`, `unanswered` and `verdicts`
/// ([`Study::write`]). A report section that does not read (a hand-edited file) reads as
/// absent: the report writes every one again.
///
/// Byte for byte: the runner's file goes through a `serde_json::Value`, so all its keys
/// come out sorted; the report's keeps the declared order of the first five fields, then
/// the rest, declared in sorted order, each section written through a `Value` (its keys
/// sorted at every depth) by [`sorted`].
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Study {
    #[serde(default)]
    pub scenario: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub cells: Vec<StudyCell>,
    #[serde(default)]
    pub runs: Vec<StudyRun>,
    #[serde(default)]
    pub status: String,
    /// Per matrix parameter: one row per cell, grouped as its "by X" table groups them.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "sorted",
        deserialize_with = "lenient"
    )]
    pub axes: Option<BTreeMap<String, Vec<AxisRow>>>,
    /// Per cell with a valid run: its figures' mean, min, max and n.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "sorted",
        deserialize_with = "lenient"
    )]
    pub cells_summary: Option<Vec<CellSummary>>,
    /// Every run's figures, in `runs`' order.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "sorted",
        deserialize_with = "lenient"
    )]
    pub figures_per_run: Option<Vec<RunFigures>>,
    /// The scenario file as given to `run`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format_version: Option<u32>,
    /// The matrix's `repeat`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<u32>,
    /// The comparisons that could not be made, and why.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "sorted",
        deserialize_with = "lenient"
    )]
    pub unanswered: Option<Vec<String>>,
    /// Every verdict of every question, in the questions' order.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "sorted",
        deserialize_with = "lenient"
    )]
    pub verdicts: Option<Vec<Verdict>>,
}

/// The version of study.json the runner writes.
pub const STUDY_FORMAT_VERSION: u32 = 1;

/// Writes `t` through a `serde_json::Value`: its keys sorted at every depth, whatever the
/// order its types declare them in.
fn sorted<T: Serialize, S: Serializer>(t: &T, s: S) -> Result<S::Ok, S::Error> {
    serde_json::to_value(t)
        .map_err(serde::ser::Error::custom)?
        .serialize(s)
}

/// Reads a report section, or `None` when it does not read as its type.
fn lenient<'de, D: Deserializer<'de>, T: DeserializeOwned>(d: D) -> Result<Option<T>, D::Error> {
    Ok(serde_json::from_value(Value::deserialize(d)?).ok())
}

/// A figure over a cell's valid runs that have it.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct FigureStats {
    pub max: f64,
    pub mean: f64,
    pub min: f64,
    pub n: usize,
}

/// Per figure (its key in [`FIGURES`] or a node's column): its stats, `None` when no
/// valid run of the cell has it.
pub type CellFigures = BTreeMap<String, Option<FigureStats>>;

/// study.json `axes.PARAM[]`: one cell in its "by PARAM" table: the parameter's
/// `value`, the `others` held, the valid `runs` and the figures.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct AxisRow {
    pub figures: CellFigures,
    pub others: Vec<(String, String)>,
    pub runs: usize,
    pub value: String,
}

/// study.json `cells_summary[]`: a cell with valid runs and its figures.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CellSummary {
    pub cell: String,
    pub figures: CellFigures,
    pub params: Vec<(String, String)>,
    pub runs: usize,
}

/// study.json `figures_per_run[]`: one run (as in `runs`) and its figures; `invalid`
/// is `null` when the run stands.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RunFigures {
    pub cell: String,
    pub figures: Figures,
    pub invalid: Option<String>,
    pub repeat: u32,
    pub status: String,
}

/// One answer: `param = b` against `param = a` with `others` held, for one figure
/// (study.json `verdicts[]`; made by the scenario's `verdict.rs`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Verdict {
    pub param: String,
    pub a: String,
    pub b: String,
    /// The other parameters and the value each was held at.
    pub others: Vec<(String, String)>,
    pub figure: String,
    pub mean_a: f64,
    pub mean_b: f64,
    /// Valid repeats on each side (the ones the means are of).
    pub n_a: usize,
    pub n_b: usize,
    /// Finished runs of the two sides left out as invalid.
    pub invalid_a: usize,
    pub invalid_b: usize,
    /// mean_b / mean_a.
    pub ratio: f64,
    /// The Welch 95% interval of the ratio (None with fewer than 2 repeats a side).
    pub interval: Option<(f64, f64)>,
    /// The interval excludes 1.0 (None without an interval).
    pub distinguishable: Option<bool>,
    /// The sentence on the page.
    pub line: String,
}

impl Study {
    /// The runner's study.json, as runs go (every key sorted, see [`Study`]).
    pub fn write_running(&self, dir: &Path) -> anyhow::Result<()> {
        let v = serde_json::to_value(self)?;
        crate::atomic::write(&dir.join(JSON_FILE), &serde_json::to_vec_pretty(&v)?)
    }

    /// The report's study.json (see [`Study`] for the order).
    pub fn write(&self, dir: &Path) -> anyhow::Result<()> {
        crate::atomic::write(&dir.join(JSON_FILE), &serde_json::to_vec_pretty(self)?)
    }

    pub fn read(dir: &Path) -> anyhow::Result<Study> {
        let p = dir.join(JSON_FILE);
        let text = std::fs::read_to_string(&p)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", p.display()))?;
        serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))
    }

    /// The matrix parameters' names, in the cells' order.
    pub fn param_names(&self) -> Vec<String> {
        self.cells
            .first()
            .map(|c| c.params.iter().map(|(k, _)| k.clone()).collect())
            .unwrap_or_default()
    }
}

/// The figures taken from one run (None where the run has no such thing).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Figures {
    pub put_obj_per_s: Option<f64>,
    pub get_obj_per_s: Option<f64>,
    pub msgs_per_s: Option<f64>,
    pub mib_per_s: Option<f64>,
    pub burst_period_s: Option<f64>,
    pub burst_peak_mib_s: Option<f64>,
    pub hidden_factor: Option<f64>,
    /// The busiest volume device's write I/Os, flush requests and the traced broker
    /// processes' sync calls (fsync, fdatasync, ...), each per second of the run.
    pub writes_per_s: Option<f64>,
    pub flushes_per_s: Option<f64>,
    pub sync_calls_per_s: Option<f64>,
    /// The acked roles' p50 (the call's p50 in the call/cast table).
    pub ack_p50_us: Option<f64>,
    pub ack_p99_us: Option<f64>,
    pub fsync_p99_us: Option<f64>,
    pub probe_write_lat_mean_us: Option<f64>,
    pub probe_write_lat_p99_us: Option<f64>,
    pub probe_read_lat_p99_us: Option<f64>,
    pub restart_read_mib: Option<f64>,
    pub restart_read_peak_mib_s: Option<f64>,
    pub restart_read_s: Option<f64>,
    pub restart_healthy_ms: Option<f64>,
    /// summary.json `interference`: the probe's write p99 outside and inside the bursts of
    /// the broker's busiest device (µs) and inside / outside.
    pub probe_write_p99_outside_bursts_us: Option<f64>,
    pub probe_write_p99_inside_bursts_us: Option<f64>,
    pub probe_write_p99_burst_ratio: Option<f64>,
    /// The load's ack p99 before a restart and during its re-read (µs), during / before.
    pub ack_p99_before_restart_us: Option<f64>,
    pub ack_p99_during_reread_us: Option<f64>,
    pub ack_p99_reread_ratio: Option<f64>,
    /// Failed load operations (summary.json `failures[]`, all kinds); 0 when none failed.
    pub failures: Option<f64>,
    /// Per agent node (a scenario's `[agents]`): study.csv's `node_<NODE>_<figure>`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub nodes: BTreeMap<String, NodeFigures>,
}

/// One agent node's figures, from the run's `agents_diskstats.csv.gz` and
/// `agents_proc_io.csv` over the run's duration.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct NodeFigures {
    /// The node's busiest device (most bytes written among those its agent was asked for:
    /// named, or holding a `--path`; any of its devices if none): mean write MiB/s.
    pub write_mib_s: Option<f64>,
    /// That device's peak write MiB/s over 10 ms windows (on the run's clock).
    pub write_peak_mib_s: Option<f64>,
    /// The highest utilisation of those devices: time busy (`io_ms`) / the run, %.
    pub util_pct: Option<f64>,
    /// The node's broker process (its agent's `--broker-pid`): `write_bytes` and
    /// `read_bytes` of /proc/PID/io, MiB/s over the span of its rows.
    pub broker_write_mib_s: Option<f64>,
    pub broker_read_mib_s: Option<f64>,
}

/// The per-node figures' names (after `node_<NODE>_` in study.csv) and titles.
pub const NODE_FIGURES: [(&str, &str); 5] = [
    ("write_mib_s", "write MiB/s"),
    ("write_peak_mib_s", "write peak MiB/s (10 ms)"),
    ("util_pct", "util %"),
    ("broker_write_mib_s", "broker write MiB/s"),
    ("broker_read_mib_s", "broker read MiB/s"),
];

impl NodeFigures {
    /// The figure named `key` (one of [`NODE_FIGURES`]).
    pub fn get(&self, key: &str) -> Option<f64> {
        let v = match key {
            "write_mib_s" => self.write_mib_s,
            "write_peak_mib_s" => self.write_peak_mib_s,
            "util_pct" => self.util_pct,
            "broker_write_mib_s" => self.broker_write_mib_s,
            "broker_read_mib_s" => self.broker_read_mib_s,
            _ => None,
        };
        v.filter(|x| x.is_finite())
    }
}

/// study.csv's column of node `node`'s figure `key`.
pub fn node_column(node: &str, key: &str) -> String {
    format!("node_{node}_{key}")
}

/// The columns after the parameters: `(key, title)` of every [`FIGURES`] entry, then of
/// each node's figures for the nodes any of `runs` has (name order).
pub fn columns<'a>(runs: impl IntoIterator<Item = &'a Figures>) -> Vec<(String, String)> {
    let mut cols: Vec<(String, String)> = FIGURES
        .iter()
        .map(|(k, t)| (k.to_string(), t.to_string()))
        .collect();
    let nodes: std::collections::BTreeSet<&String> =
        runs.into_iter().flat_map(|x| x.nodes.keys()).collect();
    for n in nodes {
        for (k, t) in NODE_FIGURES {
            cols.push((node_column(n, k), format!("{n} {t}")));
        }
    }
    cols
}

/// The figures' names (study.csv's columns) and how tables title them, in order.
pub const FIGURES: [(&str, &str); 27] = [
    ("put_obj_per_s", "Avg Put Obj/s"),
    ("get_obj_per_s", "Avg Get Obj/s"),
    ("msgs_per_s", "msgs/s"),
    ("mib_per_s", "MiB/s"),
    ("burst_period_s", "burst period s"),
    ("burst_peak_mib_s", "burst peak MiB/s (10 ms)"),
    ("hidden_factor", "hidden factor"),
    ("writes_per_s", "writes/s"),
    ("flushes_per_s", "flushes/s"),
    ("sync_calls_per_s", "sync calls/s"),
    ("ack_p50_us", "p50 ack us"),
    ("ack_p99_us", "p99 ack us"),
    ("fsync_p99_us", "p99 fsync us"),
    ("probe_write_lat_mean_us", "probe write mean us"),
    ("probe_write_lat_p99_us", "probe write p99 us"),
    ("probe_read_lat_p99_us", "probe read p99 us"),
    ("restart_read_mib", "restart read MiB"),
    ("restart_read_peak_mib_s", "restart read peak MiB/s"),
    ("restart_read_s", "restart read s"),
    ("restart_healthy_ms", "restart to healthy ms"),
    (
        "probe_write_p99_outside_bursts_us",
        "probe write p99 us outside bursts",
    ),
    (
        "probe_write_p99_inside_bursts_us",
        "probe write p99 us inside bursts",
    ),
    ("probe_write_p99_burst_ratio", "probe write p99 in/out"),
    ("ack_p99_before_restart_us", "p99 ack us before restart"),
    ("ack_p99_during_reread_us", "p99 ack us during re-read"),
    ("ack_p99_reread_ratio", "p99 ack during/before"),
    ("failures", "failed ops"),
];

impl Figures {
    /// The figure named `key` (one of [`FIGURES`]).
    pub fn get(&self, key: &str) -> Option<f64> {
        let v = match key {
            "put_obj_per_s" => self.put_obj_per_s,
            "get_obj_per_s" => self.get_obj_per_s,
            "msgs_per_s" => self.msgs_per_s,
            "mib_per_s" => self.mib_per_s,
            "burst_period_s" => self.burst_period_s,
            "burst_peak_mib_s" => self.burst_peak_mib_s,
            "hidden_factor" => self.hidden_factor,
            "writes_per_s" => self.writes_per_s,
            "flushes_per_s" => self.flushes_per_s,
            "sync_calls_per_s" => self.sync_calls_per_s,
            "ack_p50_us" => self.ack_p50_us,
            "ack_p99_us" => self.ack_p99_us,
            "fsync_p99_us" => self.fsync_p99_us,
            "probe_write_lat_mean_us" => self.probe_write_lat_mean_us,
            "probe_write_lat_p99_us" => self.probe_write_lat_p99_us,
            "probe_read_lat_p99_us" => self.probe_read_lat_p99_us,
            "restart_read_mib" => self.restart_read_mib,
            "restart_read_peak_mib_s" => self.restart_read_peak_mib_s,
            "restart_read_s" => self.restart_read_s,
            "restart_healthy_ms" => self.restart_healthy_ms,
            "probe_write_p99_outside_bursts_us" => self.probe_write_p99_outside_bursts_us,
            "probe_write_p99_inside_bursts_us" => self.probe_write_p99_inside_bursts_us,
            "probe_write_p99_burst_ratio" => self.probe_write_p99_burst_ratio,
            "ack_p99_before_restart_us" => self.ack_p99_before_restart_us,
            "ack_p99_during_reread_us" => self.ack_p99_during_reread_us,
            "ack_p99_reread_ratio" => self.ack_p99_reread_ratio,
            "failures" => self.failures,
            _ => {
                return self.nodes.iter().find_map(|(n, f)| {
                    let rest = key.strip_prefix("node_")?.strip_prefix(n.as_str())?;
                    f.get(rest.strip_prefix('_')?)
                })
            }
        };
        v.filter(|x| x.is_finite())
    }
}

/// study.csv's fixed leading columns.
/// `invalid` is empty for a run that stands, else why it is left out of the comparison.
pub const CSV_KEY_COLUMNS: [&str; 4] = ["cell", "repeat", "status", "invalid"];

/// study.csv's header for these matrix parameters and figure columns ([`columns`]),
/// with newline.
pub fn csv_header(params: &[String], cols: &[(String, String)]) -> String {
    let mut h: Vec<&str> = CSV_KEY_COLUMNS.to_vec();
    h.extend(params.iter().map(String::as_str));
    h.extend(cols.iter().map(|(k, _)| k.as_str()));
    line(&h)
}

/// One study.csv row (with newline), every cell quoted as needed.
pub fn csv_row(
    run: &StudyRun,
    params: &[String],
    cols: &[(String, String)],
    x: &Figures,
) -> String {
    let mut cells = vec![
        run.cell.clone(),
        run.repeat.to_string(),
        run.status.clone(),
        run.invalid.clone().unwrap_or_default(),
    ];
    cells.extend(params.iter().map(|k| run.param(k).to_string()));
    cells.extend(
        cols.iter()
            .map(|(k, _)| x.get(k).map(|v| format!("{v}")).unwrap_or_default()),
    );
    line(&cells)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_figure_has_a_getter_and_a_serialized_name() {
        let v = serde_json::to_value(Figures::default()).unwrap();
        let names: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(names.len(), FIGURES.len());
        let mut x = Figures::default();
        for (i, (k, _)) in FIGURES.iter().enumerate() {
            assert!(v.get(*k).is_some(), "{k}");
            let mut j = serde_json::to_value(&x).unwrap();
            j[*k] = serde_json::json!(i as f64 + 0.5);
            x = serde_json::from_value(j).unwrap();
            assert_eq!(x.get(k), Some(i as f64 + 0.5), "{k}");
        }
    }

    #[test]
    fn node_columns_follow_the_figures_for_every_node_any_run_has() {
        let mut a = Figures::default();
        a.nodes.insert(
            "n_1".into(),
            NodeFigures {
                write_mib_s: Some(2.5),
                ..Default::default()
            },
        );
        let mut b = Figures::default();
        b.nodes.insert(
            "n".into(),
            NodeFigures {
                broker_write_mib_s: Some(7.0),
                ..Default::default()
            },
        );
        let cols = columns([&a, &b]);
        assert_eq!(cols.len(), FIGURES.len() + 2 * NODE_FIGURES.len());
        assert_eq!(cols[FIGURES.len()].0, "node_n_write_mib_s");
        assert_eq!(cols[FIGURES.len() + 5].0, "node_n_1_write_mib_s");
        // A node's name that another's starts with does not take its figures.
        assert_eq!(a.get("node_n_1_write_mib_s"), Some(2.5));
        assert_eq!(b.get("node_n_1_write_mib_s"), None);
        assert_eq!(b.get("node_n_broker_write_mib_s"), Some(7.0));
        let r = StudyRun::default();
        let row = csv_row(&r, &[], &cols, &b);
        let cells = super::super::csv::split(row.trim_end());
        assert_eq!(cells.len(), 4 + cols.len());
        assert_eq!(cells[4 + FIGURES.len() + 3], "7");
        assert_eq!(cells[4 + FIGURES.len()], "");
        // Without agents the JSON has no `nodes` (the figures' names stay FIGURES).
        assert!(serde_json::to_value(&a).unwrap().get("nodes").is_some());
        assert!(serde_json::to_value(Figures::default())
            .unwrap()
            .get("nodes")
            .is_none());
    }

    #[test]
    fn a_comma_in_a_value_stays_in_its_cell() {
        let r = StudyRun {
            cell: "raid=1,sync=5s".into(),
            params: vec![("opts".into(), "noatime,discard".into())],
            repeat: 2,
            dir: "cells/x/r2".into(),
            status: "ok".into(),
            ..Default::default()
        };
        let params = vec!["opts".to_string()];
        let cols = columns([&Figures::default()]);
        let row = csv_row(&r, &params, &cols, &Figures::default());
        let cells = super::super::csv::split(row.trim_end());
        assert_eq!(cells.len(), 4 + 1 + FIGURES.len());
        assert_eq!(cells[0], "raid=1,sync=5s");
        assert_eq!(cells[3], "");
        assert_eq!(cells[4], "noatime,discard");
        let header = super::super::csv::split(csv_header(&params, &cols).trim_end());
        assert_eq!(header.len(), cells.len());
    }
}
