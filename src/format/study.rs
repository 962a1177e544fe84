//! The study directory of `diskpulse run`: `study.json` (written by the scenario runner
//! as runs go, completed by the study report) and `study.csv` (one row per run).
//!
//! `study.json`: `scenario`, `description`, `file`, `repeat`, `cells[]` (`id`,
//! `params` as `[name, value]` pairs), `runs[]` (`cell`, `params`, `repeat`, `dir`
//! relative to the study, `status` ok/failed/interrupted, `error`, `elapsed_s`),
//! `status`; after the report also `figures_per_run[]`, `cells_summary[]` and `axes`.
//!
//! `study.csv`: `cell,repeat,status`, one column per matrix parameter, then the
//! [`FIGURES`] in order; cells are quoted when they hold a comma or a quote; an empty
//! cell is a figure the run does not have.

use std::path::Path;

use serde::{Deserialize, Serialize};
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
}

/// `study.json`. Keys this type does not name are kept as they are in `rest`.
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
    #[serde(flatten)]
    pub rest: serde_json::Map<String, Value>,
}

impl Study {
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
            _ => None,
        };
        v.filter(|x| x.is_finite())
    }
}

/// study.csv's fixed leading columns.
pub const CSV_KEY_COLUMNS: [&str; 3] = ["cell", "repeat", "status"];

/// study.csv's header for these matrix parameters (with newline).
pub fn csv_header(params: &[String]) -> String {
    let mut cols: Vec<&str> = CSV_KEY_COLUMNS.to_vec();
    cols.extend(params.iter().map(String::as_str));
    cols.extend(FIGURES.iter().map(|(k, _)| *k));
    line(&cols)
}

/// One study.csv row (with newline), every cell quoted as needed.
pub fn csv_row(run: &StudyRun, params: &[String], x: &Figures) -> String {
    let mut cells = vec![run.cell.clone(), run.repeat.to_string(), run.status.clone()];
    cells.extend(params.iter().map(|k| run.param(k).to_string()));
    cells.extend(
        FIGURES
            .iter()
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
        let row = csv_row(&r, &params, &Figures::default());
        let cells = super::super::csv::split(row.trim_end());
        assert_eq!(cells.len(), 3 + 1 + FIGURES.len());
        assert_eq!(cells[0], "raid=1,sync=5s");
        assert_eq!(cells[3], "noatime,discard");
        let header = super::super::csv::split(csv_header(&params).trim_end());
        assert_eq!(header.len(), cells.len());
    }
}
