//! The study report: per run the figures of the reference study's tables (avg put obj/s,
//! avg get obj/s, msgs/s, MiB/s) and what it could not see (write burst period and peak,
//! hidden factor, p99 ack latency, p99 fsync latency, probe write latency, restart read
//! burst, probe write p99 outside/inside write bursts, ack p99 before/during a restart's
//! re-read, failed operations); per cell mean and spread over repeats; a table per matrix axis. Written as
//! `study.json`, `study.csv`, `study.md` and `report.html` in the study directory, and a
//! bar chart per figure in `charts/` (`study_charts.rs`).
//!
//! Every figure is read, typed, from a file in the run directory ([`crate::format`]):
//! `summary.json` (devices, restarts), `meta.json`'s `phases[]` (a load phase's roles),
//! `probe-N.json` (a probe phase's fio-shaped result) and `fsync.csv`.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{json, Value};

use crate::format::fsync;
use crate::format::meta::Meta;
use crate::format::probe::ProbeJson;
use crate::format::study::{self as fmt, Figures, Study, StudyRun, FIGURES};
use crate::format::summary::Summary;

fn max_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

fn finite(x: Option<f64>) -> Option<f64> {
    x.filter(|v| v.is_finite())
}

/// Reads one run's figures from the files in its directory (a file that is missing or
/// does not parse gives no figures of its own; the others stand).
pub fn figures(run_dir: &Path) -> Figures {
    let mut x = Figures::default();
    let meta = Meta::read(run_dir).ok();
    let phases = meta.as_ref().map(|m| m.phases()).unwrap_or_default();
    // Failed operations from meta.json (the run's own load and every load phase), so a
    // run without summary.json still shows them; summary.json's `failures[]` is the same.
    if let Some(m) = &meta {
        let loads = m
            .load()
            .into_iter()
            .chain(phases.iter().filter_map(|p| p.load()));
        let n: u64 = loads
            .flat_map(|l| l.roles)
            .flat_map(|r| r.failures)
            .map(|f| f.count)
            .sum();
        x.failures = Some(n as f64);
    }
    for ph in &phases {
        match ph.kind.as_str() {
            "load" => {
                for r in ph.load().map(|l| l.roles).unwrap_or_default() {
                    let rate = finite(r.msgs_per_s);
                    match r.role.as_str() {
                        "obj-put" => x.put_obj_per_s = max_opt(x.put_obj_per_s, rate),
                        "obj-get" => x.get_obj_per_s = max_opt(x.get_obj_per_s, rate),
                        _ => {}
                    }
                    if x.msgs_per_s.is_none() {
                        x.msgs_per_s = rate;
                        x.mib_per_s = finite(r.mib_per_s);
                    }
                    if matches!(
                        r.role.as_str(),
                        "js-pub" | "kv-put" | "obj-put" | "request" | "amqp-pub" | "amqp-call"
                    ) {
                        x.ack_p99_us =
                            max_opt(x.ack_p99_us, finite(r.lat_us.as_ref().and_then(|l| l.p99)));
                    }
                }
            }
            "probe" => {
                let file = run_dir.join(format!("probe-{}.json", ph.index));
                let Ok(p) = ProbeJson::read(&file) else {
                    continue;
                };
                for j in &p.jobs {
                    let us = |v: Option<f64>| finite(v).map(|v| v / 1e3);
                    if j.write.total_ios > 0 {
                        x.probe_write_lat_mean_us = us(j.write.clat_ns.mean);
                        x.probe_write_lat_p99_us = us(j.write.clat_ns.percentile(99.0));
                    }
                    if j.read.total_ios > 0 {
                        x.probe_read_lat_p99_us = us(j.read.clat_ns.percentile(99.0));
                    }
                    x.fsync_p99_us = max_opt(x.fsync_p99_us, us(j.sync.lat_ns.percentile(99.0)));
                }
            }
            _ => {}
        }
    }
    for t in fsync::read(run_dir).unwrap_or_default() {
        x.fsync_p99_us = max_opt(x.fsync_p99_us, finite(Some(t.lat(|l| l.p99))));
    }
    let Ok(Some(summary)) = Summary::read(run_dir) else {
        return x;
    };
    // The busiest writer among the devices that hold the volumes.
    let holds = |why: &Option<String>| {
        why.as_deref()
            .is_some_and(|w| w.starts_with("holds") || w.starts_with("btrfs member"))
    };
    let best = summary.devices.iter().filter(|d| holds(&d.why)).fold(
        None,
        |b: Option<&crate::format::summary::DeviceSummary>, d| match b {
            Some(b) if b.write.bytes >= d.write.bytes => Some(b),
            _ => Some(d),
        },
    );
    if let Some(d) = best {
        x.burst_period_s = finite(d.write.bursts.period_s);
        x.burst_peak_mib_s = finite(Some(d.write.peak_mib_s.p10ms));
        x.hidden_factor = finite(d.write.hidden_factor);
    }
    for r in &summary.restarts {
        x.restart_read_mib = max_opt(x.restart_read_mib, Some(r.read_bytes / 1048576.0));
        x.restart_read_peak_mib_s = max_opt(x.restart_read_peak_mib_s, Some(r.read_peak_mib_s));
        x.restart_read_s = max_opt(x.restart_read_s, Some(r.read_burst_s));
        x.restart_healthy_ms = max_opt(x.restart_healthy_ms, r.healthy_ms);
    }
    interference_figures(&mut x, &summary);
    if x.failures.is_none() {
        x.failures = Some(summary.failures.iter().map(|f| f.count as f64).sum());
    }
    x
}

/// The interference columns from summary.json: the probe's writes against the bursts of
/// the broker's busiest device (the first entry: `bursts` lists that device first), and the acks
/// of the load's acked roles before and during the worst restart re-read.
fn interference_figures(x: &mut Figures, summary: &Summary) {
    let Some(i) = &summary.interference else {
        return;
    };
    if let Some(b) = i
        .bursts
        .iter()
        .find(|b| b.source == "probe" && b.name == "write" && !b.co)
    {
        x.probe_write_p99_outside_bursts_us = finite(b.outside.p99_us);
        x.probe_write_p99_inside_bursts_us = finite(b.inside.p99_us);
        x.probe_write_p99_burst_ratio = finite(b.p99_ratio);
    }
    for r in i
        .restarts
        .iter()
        .filter(|r| !r.co && matches!(r.name.as_str(), "js-pub" | "kv-put" | "obj-put" | "request"))
    {
        x.ack_p99_before_restart_us = max_opt(x.ack_p99_before_restart_us, finite(r.before.p99_us));
        x.ack_p99_during_reread_us = max_opt(x.ack_p99_during_reread_us, finite(r.during.p99_us));
        x.ack_p99_reread_ratio = max_opt(x.ack_p99_reread_ratio, finite(r.p99_ratio));
    }
}

/// Mean, min and max of the values present.
fn stats(v: &[Option<f64>]) -> Option<(f64, f64, f64, usize)> {
    let xs: Vec<f64> = v.iter().flatten().copied().collect();
    if xs.is_empty() {
        return None;
    }
    let mean = xs.iter().sum::<f64>() / xs.len() as f64;
    let min = xs.iter().cloned().fold(f64::INFINITY, f64::min);
    let max = xs.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    Some((mean, min, max, xs.len()))
}

fn fmt(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn cell_str(s: Option<(f64, f64, f64, usize)>) -> String {
    match s {
        None => "-".into(),
        Some((m, lo, hi, n)) if n > 1 => format!("{} ({}..{})", fmt(m), fmt(lo), fmt(hi)),
        Some((m, _, _, _)) => fmt(m),
    }
}

/// Per figure present: mean/min/max/n of `xs` for the JSON, and the table cells.
fn figure_stats(
    present: &[(&str, &str)],
    xs: &[&Figures],
) -> (serde_json::Map<String, Value>, Vec<String>) {
    let mut figs = serde_json::Map::new();
    let mut cells = vec![];
    for (k, _) in present {
        let s = stats(&xs.iter().map(|x| x.get(k)).collect::<Vec<_>>());
        cells.push(cell_str(s));
        figs.insert(
            k.to_string(),
            s.map(|(m, lo, hi, n)| json!({"mean": m, "min": lo, "max": hi, "n": n}))
                .unwrap_or(Value::Null),
        );
    }
    (figs, cells)
}

/// Writes study.json, study.csv, study.md and report.html from the runs in study.json.
pub fn write_reports(study: &Path) -> anyhow::Result<()> {
    let mut sj = Study::read(study)?;
    let per_run: Vec<(StudyRun, Figures)> = sj
        .runs
        .iter()
        .map(|r| (r.clone(), figures(&study.join(&r.dir))))
        .collect();
    // Per cell.
    // Per cell: its parameters and the figures of its runs.
    type Cell<'a> = (Vec<(String, String)>, Vec<&'a Figures>);
    let mut cells: BTreeMap<String, Cell> = BTreeMap::new();
    for (r, x) in per_run.iter().filter(|(r, _)| r.ok()) {
        cells
            .entry(r.cell.clone())
            .or_insert_with(|| (r.params.clone(), vec![]))
            .1
            .push(x);
    }
    let present: Vec<(&str, &str)> = FIGURES
        .iter()
        .filter(|(k, _)| per_run.iter().any(|(_, x)| x.get(k).is_some()))
        .copied()
        .collect();
    let params = sj.param_names();
    let mut md = format!(
        "# {}\n\n{}\n\nRuns: {} ({} ok). Values: mean over repeats (min..max).\n\n",
        sj.scenario,
        sj.description,
        per_run.len(),
        per_run.iter().filter(|(r, _)| r.ok()).count()
    );
    let header = |first: &[String]| {
        let mut h = first.to_vec();
        h.extend(present.iter().map(|p| p.1.to_string()));
        format!("| {} |\n|{}\n", h.join(" | "), "---|".repeat(h.len()))
    };
    let mut cell_json = vec![];
    md.push_str("## Cells\n\n");
    let mut first = params.clone();
    first.push("runs".into());
    md.push_str(&header(&first));
    for (id, (p, xs)) in &cells {
        let value = |k: &String| {
            p.iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        };
        let mut row: Vec<String> = params.iter().map(value).collect();
        row.push(xs.len().to_string());
        let (figs, cells) = figure_stats(&present, xs);
        row.extend(cells);
        md.push_str(&format!("| {} |\n", row.join(" | ")));
        cell_json.push(json!({"cell": id, "params": p, "runs": xs.len(), "figures": figs}));
    }
    // One table per matrix axis: runs grouped by that parameter's value.
    let mut axes_json = serde_json::Map::new();
    for k in &params {
        md.push_str(&format!("\n## By {k}\n\n"));
        md.push_str(&header(&[k.clone(), "runs".into()]));
        let mut groups: BTreeMap<String, Vec<&Figures>> = BTreeMap::new();
        for (r, x) in per_run.iter().filter(|(r, _)| r.ok()) {
            groups.entry(r.param(k).to_string()).or_default().push(x);
        }
        let mut rows = vec![];
        for (v, xs) in &groups {
            let mut row = vec![v.clone(), xs.len().to_string()];
            let (figs, cells) = figure_stats(&present, xs);
            row.extend(cells);
            md.push_str(&format!("| {} |\n", row.join(" | ")));
            rows.push(json!({"value": v, "runs": xs.len(), "figures": figs}));
        }
        axes_json.insert(k.clone(), json!(rows));
    }
    let failed: Vec<&StudyRun> = sj.runs.iter().filter(|r| !r.ok()).collect();
    if !failed.is_empty() {
        md.push_str("\n## Runs that did not finish\n\n");
        for r in failed {
            md.push_str(&format!(
                "- {} r{}: {} {}\n",
                r.cell,
                r.repeat,
                r.status,
                r.error.as_deref().unwrap_or("")
            ));
        }
    }
    std::fs::write(study.join("study.md"), &md)?;
    // CSV: one row per run, every cell quoted as needed.
    let mut csv = fmt::csv_header(&params);
    for (r, x) in &per_run {
        csv.push_str(&fmt::csv_row(r, &params, x));
    }
    std::fs::write(study.join(fmt::CSV_FILE), csv)?;
    sj.rest.insert(
        "figures_per_run".into(),
        json!(per_run
            .iter()
            .map(|(r, x)| json!({"cell": r.cell, "repeat": r.repeat, "status": r.status, "figures": x}))
            .collect::<Vec<_>>()),
    );
    sj.rest.insert("cells_summary".into(), json!(cell_json));
    sj.rest.insert("axes".into(), Value::Object(axes_json));
    std::fs::write(study.join(fmt::JSON_FILE), serde_json::to_vec_pretty(&sj)?)?;
    // One chart per figure (STUDY/charts/), also inlined in report.html.
    let charts_ = super::study_charts::build(&sj, &per_run);
    super::study_charts::write(study, &charts_)?;
    std::fs::write(
        study.join("report.html"),
        super::html::study_page(study, &md, &charts_, &sj.runs),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interference_and_failures_reach_the_study_columns() {
        let dir = tempfile::tempdir().unwrap();
        let pct = |p99: f64| json!({"count": 10, "p50_us": 1.0, "p90_us": 1.0, "p99_us": p99, "p999_us": p99, "max_us": p99});
        let burst = |name: &str, co: bool, out: f64, inside: f64| {
            json!({"series": name, "source": "probe", "name": name, "phase": null, "co": co,
                   "device": "vdb", "window_ms": 100.0, "windows_inside": 1, "windows_outside": 9,
                   "inside": pct(inside), "outside": pct(out), "p99_ratio": inside / out,
                   "share_in_bursts": 0.1, "line": ""})
        };
        let restart = |name: &str, before: f64, during: f64| {
            json!({"node": "n2", "restart_s": 5.0, "series": name, "name": name, "phase": 1,
                   "co": false, "before_from_s": 0.0, "before_to_s": 5.0, "during_from_s": 5.1,
                   "during_to_s": 5.5, "before": pct(before), "during": pct(during),
                   "p99_ratio": during / before, "line": ""})
        };
        let s = json!({
            "format_version": crate::format::FORMAT_VERSION, "run": "r", "duration_s": 10.0,
            "ui_window_s": 30.0, "headline": [], "devices": [], "memory": null, "cpu": null,
            "load": {}, "samplers": {}, "error_events": 0, "restarts": [],
            "interference": {"rule": "", "lines": [],
                "bursts": [burst("read", false, 5.0, 6.0), burst("write", true, 7.0, 700.0),
                           burst("write", false, 1200.0, 38000.0), burst("write", false, 1.0, 2.0)],
                "restarts": [restart("js-pub", 1000.0, 45000.0), restart("sub", 1.0, 1e6),
                             restart("js-pub", 2000.0, 4000.0)]},
            "failures": [{"role": "js-pub", "kind": "timeout", "count": 256},
                         {"role": "js-pub", "kind": "insufficient_resources", "count": 1000}]
        });
        std::fs::write(dir.path().join("summary.json"), s.to_string()).unwrap();
        let x = figures(dir.path());
        // The probe's writes, not the corrected twin, against the first device (the broker's).
        assert_eq!(x.probe_write_p99_outside_bursts_us, Some(1200.0));
        assert_eq!(x.probe_write_p99_inside_bursts_us, Some(38000.0));
        assert!((x.probe_write_p99_burst_ratio.unwrap() - 38000.0 / 1200.0).abs() < 1e-9);
        // Acked roles only, the worst restart.
        assert_eq!(x.ack_p99_before_restart_us, Some(2000.0));
        assert_eq!(x.ack_p99_during_reread_us, Some(45000.0));
        assert_eq!(x.ack_p99_reread_ratio, Some(45.0));
        // No meta.json here: failures come from summary.json.
        assert_eq!(x.failures, Some(1256.0));
        let row = fmt::csv_row(&StudyRun::default(), &[], &x);
        assert!(
            row.contains(",1256,") || row.trim_end().ends_with(",1256"),
            "{row}"
        );
    }
}
