//! The study report: per run the figures of the reference study's tables (avg put obj/s,
//! avg get obj/s, msgs/s, MiB/s) and what it could not see (write burst period and peak,
//! hidden factor, p99 ack latency, p99 fsync latency, probe write latency, restart read
//! burst); per cell mean and spread over repeats; a table per matrix axis. Written as
//! `study.json`, `study.csv`, `study.md` and `report.html` in the study directory.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{json, Value};

/// The figures taken from one run (None where the run has no such thing).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Figures {
    pub put_obj_per_s: Option<f64>,
    pub get_obj_per_s: Option<f64>,
    pub msgs_per_s: Option<f64>,
    pub mib_per_s: Option<f64>,
    pub burst_period_s: Option<f64>,
    pub burst_peak_mib_s: Option<f64>,
    pub hidden_factor: Option<f64>,
    pub ack_p99_us: Option<f64>,
    pub fsync_p99_us: Option<f64>,
    pub probe_write_lat_mean_us: Option<f64>,
    pub probe_write_lat_p99_us: Option<f64>,
    pub probe_read_lat_p99_us: Option<f64>,
    pub restart_read_mib: Option<f64>,
    pub restart_read_peak_mib_s: Option<f64>,
    pub restart_read_s: Option<f64>,
    pub restart_healthy_ms: Option<f64>,
}

/// Column names and how to read them, in table order.
pub const FIGURES: [(&str, &str); 16] = [
    ("put_obj_per_s", "Avg Put Obj/s"),
    ("get_obj_per_s", "Avg Get Obj/s"),
    ("msgs_per_s", "msgs/s"),
    ("mib_per_s", "MiB/s"),
    ("burst_period_s", "burst period s"),
    ("burst_peak_mib_s", "burst peak MiB/s (10 ms)"),
    ("hidden_factor", "hidden factor"),
    ("ack_p99_us", "p99 ack us"),
    ("fsync_p99_us", "p99 fsync us"),
    ("probe_write_lat_mean_us", "probe write mean us"),
    ("probe_write_lat_p99_us", "probe write p99 us"),
    ("probe_read_lat_p99_us", "probe read p99 us"),
    ("restart_read_mib", "restart read MiB"),
    ("restart_read_peak_mib_s", "restart read peak MiB/s"),
    ("restart_read_s", "restart read s"),
    ("restart_healthy_ms", "restart to healthy ms"),
];

fn f(v: &Value) -> Option<f64> {
    v.as_f64().filter(|x| x.is_finite())
}

fn max_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// Reads one run's figures from its meta.json (phase results) and summary.json.
pub fn figures(run_dir: &Path) -> Figures {
    let read = |n: &str| -> Value {
        std::fs::read_to_string(run_dir.join(n))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or(Value::Null)
    };
    let meta = read("meta.json");
    let summary = read("summary.json");
    let mut x = Figures::default();
    for ph in meta["phases"].as_array().into_iter().flatten() {
        let res = &ph["result"];
        match ph["kind"].as_str() {
            Some("load") => {
                for r in res["roles"].as_array().into_iter().flatten() {
                    let rate = f(&r["msgs_per_s"]);
                    match r["role"].as_str() {
                        Some("obj-put") => x.put_obj_per_s = max_opt(x.put_obj_per_s, rate),
                        Some("obj-get") => x.get_obj_per_s = max_opt(x.get_obj_per_s, rate),
                        _ => {}
                    }
                    if x.msgs_per_s.is_none() {
                        x.msgs_per_s = rate;
                        x.mib_per_s = f(&r["mib_per_s"]);
                    }
                    if matches!(
                        r["role"].as_str(),
                        Some("js-pub" | "kv-put" | "obj-put" | "request")
                    ) {
                        x.ack_p99_us = max_opt(x.ack_p99_us, f(&r["lat_us"]["p99"]));
                    }
                }
            }
            Some("probe") => {
                for j in res["jobs"].as_array().into_iter().flatten() {
                    let w = &j["write"];
                    if w["total_ios"].as_u64().unwrap_or(0) > 0 {
                        x.probe_write_lat_mean_us = f(&w["clat_ns"]["mean"]).map(|v| v / 1e3);
                        x.probe_write_lat_p99_us =
                            f(&w["clat_ns"]["percentile"]["99.000000"]).map(|v| v / 1e3);
                    }
                    let r = &j["read"];
                    if r["total_ios"].as_u64().unwrap_or(0) > 0 {
                        x.probe_read_lat_p99_us =
                            f(&r["clat_ns"]["percentile"]["99.000000"]).map(|v| v / 1e3);
                    }
                    x.fsync_p99_us = max_opt(
                        x.fsync_p99_us,
                        f(&j["sync"]["lat_ns"]["percentile"]["99.000000"]).map(|v| v / 1e3),
                    );
                }
            }
            Some("fsync") => {
                for t in res["tests"].as_array().into_iter().flatten() {
                    x.fsync_p99_us = max_opt(x.fsync_p99_us, f(&t["lat_p99_us"]));
                }
            }
            _ => {}
        }
    }
    // The busiest writer among the devices that hold the volumes.
    let mut best: Option<&Value> = None;
    for d in summary["devices"].as_array().into_iter().flatten() {
        if !d["why"].as_str().unwrap_or("").starts_with("holds")
            && !d["why"].as_str().unwrap_or("").starts_with("btrfs member")
        {
            continue;
        }
        if best.is_none_or(|b| f(&d["write"]["bytes"]) > f(&b["write"]["bytes"])) {
            best = Some(d);
        }
    }
    if let Some(d) = best {
        x.burst_period_s = f(&d["write"]["bursts"]["period_s"]);
        x.burst_peak_mib_s = f(&d["write"]["peak_mib_s"]["10ms"]);
        x.hidden_factor = f(&d["write"]["hidden_factor"]);
    }
    for r in summary["restarts"].as_array().into_iter().flatten() {
        x.restart_read_mib = max_opt(
            x.restart_read_mib,
            f(&r["read_bytes"]).map(|b| b / 1048576.0),
        );
        x.restart_read_peak_mib_s = max_opt(x.restart_read_peak_mib_s, f(&r["read_peak_mib_s"]));
        x.restart_read_s = max_opt(x.restart_read_s, f(&r["read_burst_s"]));
        x.restart_healthy_ms = max_opt(x.restart_healthy_ms, f(&r["healthy_ms"]));
    }
    x
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

fn fig_value(x: &Figures, key: &str) -> Option<f64> {
    serde_json::to_value(x)
        .ok()?
        .get(key)
        .and_then(|v| v.as_f64())
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

/// Writes study.json, study.csv, study.md and report.html from the runs in study.json.
pub fn write_reports(study: &Path) -> anyhow::Result<()> {
    let sj: Value = serde_json::from_str(&std::fs::read_to_string(study.join("study.json"))?)?;
    let runs: Vec<Value> = sj["runs"].as_array().cloned().unwrap_or_default();
    let mut per_run = vec![];
    for r in &runs {
        let dir = study.join(r["dir"].as_str().unwrap_or(""));
        per_run.push((r.clone(), figures(&dir)));
    }
    // Per cell.
    let mut cells: BTreeMap<String, (Value, Vec<&Figures>)> = BTreeMap::new();
    for (r, x) in &per_run {
        if r["status"] != "ok" {
            continue;
        }
        cells
            .entry(r["cell"].as_str().unwrap_or("").to_string())
            .or_insert_with(|| (r["params"].clone(), vec![]))
            .1
            .push(x);
    }
    let present: Vec<(&str, &str)> = FIGURES
        .iter()
        .filter(|(k, _)| per_run.iter().any(|(_, x)| fig_value(x, k).is_some()))
        .copied()
        .collect();
    let params: Vec<String> = sj["cells"][0]["params"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|p| p[0].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let mut md = format!(
        "# {}\n\n{}\n\nRuns: {} ({} ok). Values: mean over repeats (min..max).\n\n",
        sj["scenario"].as_str().unwrap_or(""),
        sj["description"].as_str().unwrap_or(""),
        runs.len(),
        per_run.iter().filter(|(r, _)| r["status"] == "ok").count()
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
        let mut row: Vec<String> = params
            .iter()
            .map(|k| {
                p.as_array()
                    .and_then(|a| a.iter().find(|kv| kv[0] == k.as_str()))
                    .and_then(|kv| kv[1].as_str())
                    .unwrap_or("")
                    .to_string()
            })
            .collect();
        row.push(xs.len().to_string());
        let mut figs = serde_json::Map::new();
        for (k, _) in &present {
            let s = stats(&xs.iter().map(|x| fig_value(x, k)).collect::<Vec<_>>());
            row.push(cell_str(s));
            figs.insert(
                k.to_string(),
                s.map(|(m, lo, hi, n)| json!({"mean": m, "min": lo, "max": hi, "n": n}))
                    .unwrap_or(Value::Null),
            );
        }
        md.push_str(&format!("| {} |\n", row.join(" | ")));
        cell_json.push(json!({"cell": id, "params": p, "runs": xs.len(), "figures": figs}));
    }
    // One table per matrix axis: runs grouped by that parameter's value.
    let mut axes_json = serde_json::Map::new();
    for k in &params {
        md.push_str(&format!("\n## By {k}\n\n"));
        md.push_str(&header(&[k.clone(), "runs".into()]));
        let mut groups: BTreeMap<String, Vec<&Figures>> = BTreeMap::new();
        for (r, x) in &per_run {
            if r["status"] != "ok" {
                continue;
            }
            let v = r["params"]
                .as_array()
                .and_then(|a| a.iter().find(|kv| kv[0] == k.as_str()))
                .and_then(|kv| kv[1].as_str())
                .unwrap_or("")
                .to_string();
            groups.entry(v).or_default().push(x);
        }
        let mut rows = vec![];
        for (v, xs) in &groups {
            let mut row = vec![v.clone(), xs.len().to_string()];
            let mut figs = serde_json::Map::new();
            for (f, _) in &present {
                let s = stats(&xs.iter().map(|x| fig_value(x, f)).collect::<Vec<_>>());
                row.push(cell_str(s));
                figs.insert(
                    f.to_string(),
                    s.map(|(m, lo, hi, n)| json!({"mean": m, "min": lo, "max": hi, "n": n}))
                        .unwrap_or(Value::Null),
                );
            }
            md.push_str(&format!("| {} |\n", row.join(" | ")));
            rows.push(json!({"value": v, "runs": xs.len(), "figures": figs}));
        }
        axes_json.insert(k.clone(), json!(rows));
    }
    let failed: Vec<&Value> = runs.iter().filter(|r| r["status"] != "ok").collect();
    if !failed.is_empty() {
        md.push_str("\n## Runs that did not finish\n\n");
        for r in failed {
            md.push_str(&format!(
                "- {} r{}: {} {}\n",
                r["cell"].as_str().unwrap_or(""),
                r["repeat"],
                r["status"].as_str().unwrap_or(""),
                r["error"].as_str().unwrap_or("")
            ));
        }
    }
    std::fs::write(study.join("study.md"), &md)?;
    // CSV: one row per run.
    let mut csv = String::from("cell,repeat,status");
    for k in &params {
        csv.push(',');
        csv.push_str(k);
    }
    for (k, _) in FIGURES {
        csv.push(',');
        csv.push_str(k);
    }
    csv.push('\n');
    for (r, x) in &per_run {
        let mut row = vec![
            r["cell"].as_str().unwrap_or("").to_string(),
            r["repeat"].to_string(),
            r["status"].as_str().unwrap_or("").to_string(),
        ];
        for k in &params {
            row.push(
                r["params"]
                    .as_array()
                    .and_then(|a| a.iter().find(|kv| kv[0] == k.as_str()))
                    .and_then(|kv| kv[1].as_str())
                    .unwrap_or("")
                    .to_string(),
            );
        }
        for (k, _) in FIGURES {
            row.push(fig_value(x, k).map(|v| format!("{v}")).unwrap_or_default());
        }
        csv.push_str(&row.join(","));
        csv.push('\n');
    }
    std::fs::write(study.join("study.csv"), csv)?;
    let mut full = sj.clone();
    full["figures_per_run"] = json!(per_run.iter().map(|(r, x)| json!({"cell": r["cell"], "repeat": r["repeat"], "status": r["status"], "figures": x})).collect::<Vec<_>>());
    full["cells_summary"] = json!(cell_json);
    full["axes"] = Value::Object(axes_json);
    std::fs::write(study.join("study.json"), serde_json::to_vec_pretty(&full)?)?;
    std::fs::write(
        study.join("report.html"),
        super::html::study_page(
            study,
            &md,
            &per_run.iter().map(|(r, _)| r.clone()).collect::<Vec<_>>(),
        ),
    )?;
    Ok(())
}
