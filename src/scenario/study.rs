//! The study report: per run the figures of the reference study's tables (avg put obj/s,
//! avg get obj/s, msgs/s, MiB/s) and what it could not see (write burst period and peak,
//! hidden factor, p99 ack latency, p99 fsync latency, probe write latency, restart read
//! burst, probe write p99 outside/inside write bursts, ack p99 before/during a restart's
//! re-read, failed operations), and with agents each node's write MiB/s, util and broker
//! I/O ([`node_figures`]); per cell mean and spread over repeats; a table per matrix axis. Written as
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
use crate::format::study::{self as fmt, Figures, NodeFigures, Study, StudyRun};
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
    if let Some(ns) = meta.as_ref().and_then(|m| m.duration_ns).filter(|n| *n > 0) {
        x.nodes = node_figures(run_dir, ns);
    }
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
                        x.ack_p50_us =
                            max_opt(x.ack_p50_us, finite(r.lat_us.as_ref().and_then(|l| l.p50)));
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
        if summary.duration_s > 0.0 {
            x.writes_per_s = finite(Some(d.write.ios / summary.duration_s));
            x.flushes_per_s = finite(d.flushes.map(|f| f / summary.duration_s));
        }
    }
    if let Some(t) = &summary.trace {
        let calls: u64 = t.fsync.iter().flat_map(|p| p.by_call.values()).sum();
        if summary.duration_s > 0.0 {
            x.sync_calls_per_s = finite(Some(calls as f64 / summary.duration_s));
        }
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

/// A probe that left more than this share of its scheduled I/Os unissued fell behind its
/// rate: its latency is the saturated device's, not the one at the rate asked for.
pub const PROBE_MISSED_SHARE_INVALID: f64 = 0.01;

/// Why a finished run cannot stand in a comparison, or None when it can: a probe phase
/// that fell behind its rate (more than [`PROBE_MISSED_SHARE_INVALID`] of its scheduled
/// I/Os never issued: the cells would be compared at different throughputs), or a load
/// whose operations failed with kinds its phase did not expect (`expect_failures`).
pub fn invalid_reason(run_dir: &Path) -> Option<String> {
    let meta = Meta::read(run_dir).ok()?;
    let phases = meta.phases();
    let mut why = vec![];
    for ph in &phases {
        match ph.kind.as_str() {
            "probe" => {
                let Ok(p) = ProbeJson::read(&run_dir.join(format!("probe-{}.json", ph.index)))
                else {
                    continue;
                };
                let missed = p.diskpulse.rate_missed_ios;
                let issued = p.total_ios();
                let share = missed as f64 / (missed + issued).max(1) as f64;
                if share > PROBE_MISSED_SHARE_INVALID {
                    let asked = p
                        .diskpulse
                        .rate_iops_total
                        .map(|r| format!(" of {} IOPS", crate::units::num(r, 0)))
                        .unwrap_or_default();
                    why.push(format!(
                        "phase {} probe fell behind its rate{asked}: {missed} of {} scheduled I/Os never issued ({:.0}%)",
                        ph.index,
                        missed + issued,
                        share * 100.0
                    ));
                }
            }
            "load" if ph.result["failures_expected"] != Value::Bool(true) => {
                let failed: Vec<String> = ph
                    .load()
                    .map(|l| l.roles)
                    .unwrap_or_default()
                    .iter()
                    .flat_map(|r| r.failures.iter().map(move |f| (r, f)))
                    .filter(|(_, f)| f.count > 0)
                    .map(|(r, f)| format!("{} {} {}", f.count, r.role, f.kind))
                    .collect();
                if !failed.is_empty() {
                    why.push(format!(
                        "phase {} load had failed operations ({})",
                        ph.index,
                        failed.join(", ")
                    ));
                }
            }
            _ => {}
        }
    }
    (!why.is_empty()).then(|| why.join("; "))
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

/// Per agent node of a run (`meta.json` `agents`): its busiest device's mean and 10 ms peak
/// write MiB/s and the highest utilisation among its devices, from
/// `agents_diskstats.csv.gz` (read in one pass, no row held), over the run's `duration_ns`;
/// and its broker's write and read MiB/s from `agents_proc_io.csv` when its agent sampled
/// one. The devices counted are those the agent was asked for (named, holding a path);
/// all of the node's when its agent did not say why it samples each.
pub fn node_figures(run_dir: &Path, duration_ns: u64) -> BTreeMap<String, NodeFigures> {
    let mut out = BTreeMap::new();
    let Some(meta) = crate::format::agents::read_meta(run_dir) else {
        return out;
    };
    let asked = |node: &str, dev: &str| -> bool {
        let Some(nm) = meta.nodes.get(node) else {
            return false;
        };
        let why = |i: usize| nm.device_why.get(i).map(String::as_str).unwrap_or("");
        let chosen =
            |w: &str| w == "named" || w.starts_with("holds") || w.starts_with("btrfs member");
        if !(0..nm.devices.len()).any(|i| chosen(why(i))) {
            return true;
        }
        nm.devices
            .iter()
            .position(|d| d == dev)
            .is_some_and(|i| chosen(why(i)))
    };
    /// One device of one node as the rows go by.
    #[derive(Default)]
    struct Dev {
        first: Option<(u64, u64)>,
        last: (u64, u64),
        prev_sw: u64,
        bin: u64,
        bin_sectors: u64,
        peak_sectors: u64,
    }
    const BIN_NS: u64 = 10_000_000;
    let mut devs: BTreeMap<(String, String), Dev> = BTreeMap::new();
    {
        let head = crate::format::agents::header("diskstats");
        let cols: Vec<&str> = head.split(',').collect();
        let at = |name: &str| cols.iter().position(|c| *c == name);
        let (Some(sw), Some(io)) = (at("sectors_written"), at("io_ms")) else {
            return out;
        };
        // Its chunks, then the file (`record --chunk`); what a kill -9 left stands.
        let _ = crate::format::agents::for_each_row(
            run_dir,
            crate::format::agents::DISKSTATS_FILE,
            |line| {
                let f: Vec<&str> = line.split(',').collect();
                if f.len() < cols.len() {
                    return;
                }
                let (Ok(t), Ok(w), Ok(busy)) = (
                    f[1].parse::<u64>(),
                    f[sw].parse::<u64>(),
                    f[io].parse::<u64>(),
                ) else {
                    return;
                };
                if !asked(f[0], f[2]) {
                    return;
                }
                let d = devs
                    .entry((f[0].to_string(), f[2].to_string()))
                    .or_default();
                if d.first.is_none() {
                    d.first = Some((w, busy));
                    d.prev_sw = w;
                    d.bin = t / BIN_NS;
                }
                // A counter's growth since the previous row lands in this row's 10 ms window.
                if t / BIN_NS != d.bin {
                    d.peak_sectors = d.peak_sectors.max(d.bin_sectors);
                    d.bin = t / BIN_NS;
                    d.bin_sectors = 0;
                }
                d.bin_sectors += w.saturating_sub(d.prev_sw);
                d.prev_sw = w;
                d.last = (w, busy);
            },
        );
    }
    let secs = duration_ns as f64 / 1e9;
    let mib = |sectors: u64| sectors as f64 * 512.0 / 1048576.0;
    for ((node, _), d) in &devs {
        let Some((w0, b0)) = d.first else { continue };
        let written = d.last.0.saturating_sub(w0);
        let util = d.last.1.saturating_sub(b0) as f64 / 1e3 / secs * 100.0;
        let peak = mib(d.peak_sectors.max(d.bin_sectors)) / (BIN_NS as f64 / 1e9);
        let nf: &mut NodeFigures = out.entry(node.clone()).or_default();
        nf.util_pct = max_opt(nf.util_pct, Some(util.min(100.0)));
        let mean = mib(written) / secs;
        if nf.write_mib_s.is_none_or(|m| mean > m) {
            nf.write_mib_s = Some(mean);
            nf.write_peak_mib_s = Some(peak);
        }
    }
    // The broker's I/O: its write_bytes and read_bytes over the span of its rows (a pid
    // that changes, a restarted broker, starts again from its own first row).
    {
        let head = crate::format::agents::header("proc_io");
        let cols: Vec<&str> = head.split(',').collect();
        let at = |name: &str| cols.iter().position(|c| *c == name).unwrap_or(0);
        let (pid_c, rb, wb) = (at("pid"), at("read_bytes"), at("write_bytes"));
        // node -> (pid, first t, last t, bytes read and written so far, this pid's first
        // counters, its last counters)
        type Acc = (String, u64, u64, u64, u64, (u64, u64), (u64, u64));
        let mut acc: BTreeMap<String, Acc> = BTreeMap::new();
        let _ = crate::format::agents::for_each_row(
            run_dir,
            crate::format::agents::PROC_IO_FILE,
            |line| {
                let f: Vec<&str> = line.split(',').collect();
                if f.len() < cols.len() {
                    return;
                }
                let (Ok(t), Ok(r), Ok(w)) = (
                    f[1].parse::<u64>(),
                    f[rb].parse::<u64>(),
                    f[wb].parse::<u64>(),
                ) else {
                    return;
                };
                let a = acc
                    .entry(f[0].to_string())
                    .or_insert_with(|| (f[pid_c].to_string(), t, t, 0, 0, (r, w), (r, w)));
                if a.0 != f[pid_c] {
                    a.3 += a.6 .0.saturating_sub(a.5 .0);
                    a.4 += a.6 .1.saturating_sub(a.5 .1);
                    a.0 = f[pid_c].to_string();
                    a.5 = (r, w);
                }
                a.2 = t;
                a.6 = (r, w);
            },
        );
        for (node, a) in acc {
            let span = (a.2 - a.1) as f64 / 1e9;
            if span <= 0.0 {
                continue;
            }
            let read = a.3 + a.6 .0.saturating_sub(a.5 .0);
            let written = a.4 + a.6 .1.saturating_sub(a.5 .1);
            let nf = out.entry(node).or_default();
            nf.broker_read_mib_s = Some(read as f64 / 1048576.0 / span);
            nf.broker_write_mib_s = Some(written as f64 / 1048576.0 / span);
        }
    }
    out
}

/// What a study answers, as study.md prints it first: its verdicts ("## Answers") and the
/// runs left out of them ("## Invalid runs"). `run` prints these lines at its end.
#[derive(Debug, Clone, Default)]
pub struct Answers {
    /// The questions, as study.md's "## Answers" has them: each heading, verdicts and the
    /// comparisons that could not be made.
    pub questions: Vec<super::verdict::Question>,
    pub verdicts: Vec<super::verdict::Verdict>,
    /// "<cell> r<k>: INVALID: <reason>".
    pub invalid: Vec<String>,
    /// The finished, valid runs the verdicts are made of.
    pub valid_runs: usize,
    /// The matrix parameters (none: nothing to compare).
    pub params: Vec<String>,
}

/// Writes study.json, study.csv, study.md and report.html from the runs in study.json;
/// study.md and report.html are both rendered from one [`super::study_page::Page`].
/// Returns the answers it wrote.
pub fn write_reports(study: &Path) -> anyhow::Result<Answers> {
    let mut sj = Study::read(study)?;
    for r in sj.runs.iter_mut() {
        r.invalid = if r.ok() {
            invalid_reason(&study.join(&r.dir))
        } else {
            None
        };
    }
    let per_run: Vec<(StudyRun, Figures)> = sj
        .runs
        .iter()
        .map(|r| (r.clone(), figures(&study.join(&r.dir))))
        .collect();
    let params = sj.param_names();
    // CSV: one row per run, every cell quoted as needed.
    let cols = fmt::columns(per_run.iter().map(|(_, x)| x));
    let mut csv = fmt::csv_header(&params, &cols);
    for (r, x) in &per_run {
        csv.push_str(&fmt::csv_row(r, &params, &cols, x));
    }
    std::fs::write(study.join(fmt::CSV_FILE), csv)?;
    let csv_columns = fmt::CSV_KEY_COLUMNS.len() + params.len() + cols.len();
    let page = super::study_page::build(&sj, &per_run, csv_columns);
    std::fs::write(study.join("study.md"), page.markdown())?;
    let cells = super::study_page::cells(&sj, &per_run);
    let present: Vec<(String, String)> = cols
        .iter()
        .filter(|(k, _)| per_run.iter().any(|(_, x)| x.get(k).is_some()))
        .cloned()
        .collect();
    let cell_json: Vec<Value> = cells
        .iter()
        .filter(|c| !c.valid.is_empty())
        .map(|c| {
            json!({"cell": c.id, "params": c.params, "runs": c.valid.len(),
                   "figures": super::study_page::figures_json(c, &present)})
        })
        .collect();
    sj.rest.insert(
        "figures_per_run".into(),
        json!(per_run
            .iter()
            .map(|(r, x)| json!({"cell": r.cell, "repeat": r.repeat, "status": r.status, "invalid": r.invalid, "figures": x}))
            .collect::<Vec<_>>()),
    );
    sj.rest.insert("cells_summary".into(), json!(cell_json));
    let verdicts: Vec<&super::verdict::Verdict> =
        page.questions.iter().flat_map(|q| &q.verdicts).collect();
    sj.rest.insert("verdicts".into(), json!(verdicts));
    sj.rest.insert(
        "unanswered".into(),
        json!(page
            .questions
            .iter()
            .flat_map(|q| &q.unanswered)
            .collect::<Vec<_>>()),
    );
    sj.rest.insert(
        "axes".into(),
        super::study_page::axes_json(&params, &cells, &present),
    );
    std::fs::write(study.join(fmt::JSON_FILE), serde_json::to_vec_pretty(&sj)?)?;
    // One chart per figure that varies (STUDY/charts/), also inlined in report.html.
    let charts_ = super::study_charts::build(&sj, &per_run);
    super::study_charts::write(study, &charts_)?;
    std::fs::write(
        study.join("report.html"),
        super::html::study_page(study, &page, &charts_, &sj.runs),
    )?;
    Ok(Answers {
        questions: page.questions.clone(),
        valid_runs: per_run.iter().filter(|(r, _)| r.counts()).count(),
        verdicts: verdicts.into_iter().cloned().collect(),
        invalid: sj
            .runs
            .iter()
            .filter_map(|r| {
                r.invalid
                    .as_deref()
                    .map(|why| format!("{} r{}: INVALID: {why}", r.cell, r.repeat))
            })
            .collect(),
        params,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An agents_diskstats.csv.gz row: sectors written `sw`, io_ms `busy`.
    fn ds_row(node: &str, dev: &str, t_ns: u64, sw: u64, busy: u64) -> String {
        let mut c = [0u64; crate::format::diskstats::MAX_FIELDS];
        c[6] = sw;
        c[9] = busy;
        let c: Vec<String> = c.iter().map(u64::to_string).collect();
        format!("{node},{t_ns},{dev},7,1,{}\n", c.join(","))
    }

    #[test]
    fn node_columns_come_from_the_agents_files_of_the_devices_asked_for() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let meta = json!({"tool": "diskpulse", "format_version": crate::format::FORMAT_VERSION, "duration_ns": 10_000_000_000u64, "agents": {"servers": [], "nodes": {
            "a": {"offset_ns": 1, "bound_ns": 1, "probes": 1, "max_bound_used_ns": 1, "sources": {},
                  "agent_dropped_batches": 0, "agent_reconnects": 0, "agent_cpu_ns": 0,
                  "agent_published_bytes": 0, "devices": ["loop1", "vda"],
                  "device_why": ["named", "backing file of loop1"]},
            "b": {"offset_ns": 1, "bound_ns": 1, "probes": 1, "max_bound_used_ns": 1, "sources": {},
                  "agent_dropped_batches": 0, "agent_reconnects": 0, "agent_cpu_ns": 0,
                  "agent_published_bytes": 0, "devices": ["loop2"]}}}});
        std::fs::write(d.join("meta.json"), meta.to_string()).unwrap();
        let mut text = crate::format::agents::header("diskstats") + "\n";
        // a/loop1: 20 MiB over the run; busy 2.5 s. Rows are written on change only, so a
        // row's growth happened since the sample before it (1 ms): the 16 MiB row is a
        // 16 MiB window, the 4 MiB two rows 4 ms apart share another.
        text += &ds_row("a", "loop1", 1_000_000_000, 100, 0);
        text += &ds_row("a", "loop1", 3_000_000_000, 100 + 16 * 2048, 1000);
        text += &ds_row("a", "loop1", 5_001_000_000, 100 + 18 * 2048, 1000);
        text += &ds_row("a", "loop1", 5_005_000_000, 100 + 20 * 2048, 2500);
        // a/vda (the loop device's backing disk): more bytes, not counted.
        text += &ds_row("a", "vda", 1_000_000_000, 0, 0);
        text += &ds_row("a", "vda", 9_000_000_000, 400 * 2048, 9000);
        // b: no why from its agent: every device counts.
        text += &ds_row("b", "loop2", 1_000_000_000, 0, 0);
        text += &ds_row("b", "loop2", 2_000_000_000, 10 * 2048, 500);
        let mut gz = flate2::write::GzEncoder::new(
            std::fs::File::create(d.join("agents_diskstats.csv.gz")).unwrap(),
            flate2::Compression::fast(),
        );
        gz.write_all(text.as_bytes()).unwrap();
        gz.finish().unwrap();
        // b's broker: 6 MiB written over 2 s across a restart (a new pid).
        let mut p = crate::format::agents::header("proc_io") + "\n";
        for (t, pid, w) in [
            (1u64, 10, 1u64 << 20),
            (2, 10, 4 << 20),
            (2, 11, 0),
            (3, 11, 3 << 20),
        ] {
            p += &format!(
                "b,{},{pid},nats-server,0,0,0,0,0,{w},0\n",
                t * 1_000_000_000
            );
        }
        std::fs::write(d.join("agents_proc_io.csv"), p).unwrap();
        let x = figures(d);
        let a = &x.nodes["a"];
        assert!((a.write_mib_s.unwrap() - 2.0).abs() < 1e-9, "{a:?}");
        assert!((a.write_peak_mib_s.unwrap() - 1600.0).abs() < 1e-9, "{a:?}");
        assert!((a.util_pct.unwrap() - 25.0).abs() < 1e-9, "{a:?}");
        assert_eq!(a.broker_write_mib_s, None);
        let b = &x.nodes["b"];
        assert!((b.write_mib_s.unwrap() - 1.0).abs() < 1e-9, "{b:?}");
        assert!((b.broker_write_mib_s.unwrap() - 3.0).abs() < 1e-9, "{b:?}");
        assert_eq!(b.broker_read_mib_s, Some(0.0));
        let cols = fmt::columns([&x]);
        let row = fmt::csv_row(&StudyRun::default(), &[], &cols, &x);
        let header = fmt::csv_header(&[], &cols);
        assert!(header.contains(",node_a_write_mib_s,node_a_write_peak_mib_s,node_a_util_pct,node_a_broker_write_mib_s,node_a_broker_read_mib_s,node_b_write_mib_s,"), "{header}");
        assert!(
            row.trim_end().ends_with(",2,1600,25,,,1,1000,5,3,0"),
            "{row}"
        );
    }

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
        let row = fmt::csv_row(&StudyRun::default(), &[], &fmt::columns([&x]), &x);
        assert!(
            row.contains(",1256,") || row.trim_end().ends_with(",1256"),
            "{row}"
        );
    }
}

#[cfg(test)]
mod order_tests {
    use super::*;
    use crate::format::study::{StudyCell, StudyRun};

    /// The tables list cells and axis values in the order the matrix gave them (the
    /// order the runs ran), not sorted as text ("100ms" before "10ms").
    #[test]
    fn tables_keep_the_matrix_order() {
        let dir = tempfile::tempdir().unwrap();
        let lat = ["0ms", "10ms", "50ms", "100ms"];
        let mut sj = Study {
            scenario: "order".into(),
            status: "ok".into(),
            ..Default::default()
        };
        for l in lat {
            for m in ["call", "cast"] {
                let params = vec![("latency".into(), l.into()), ("mode".into(), m.into())];
                let id = format!("latency-{l}_mode-{m}");
                sj.cells.push(StudyCell {
                    id: id.clone(),
                    params: params.clone(),
                });
                std::fs::create_dir_all(dir.path().join(&id)).unwrap();
                sj.runs.push(StudyRun {
                    cell: id.clone(),
                    params,
                    repeat: 1,
                    dir: id,
                    status: "ok".into(),
                    ..Default::default()
                });
            }
        }
        std::fs::write(
            dir.path().join(crate::format::study::JSON_FILE),
            serde_json::to_string(&sj).unwrap(),
        )
        .unwrap();
        write_reports(dir.path()).unwrap();
        let md = std::fs::read_to_string(dir.path().join("study.md")).unwrap();
        // A markdown table under heading `h`: the values of its column `col`.
        let column = |h: &str, col: &str| -> Vec<String> {
            let sec = md.split(h).nth(1).unwrap_or_else(|| panic!("{h}: {md}"));
            let lines: Vec<&str> = sec
                .lines()
                .skip_while(|l| !l.starts_with('|'))
                .take_while(|l| l.starts_with('|'))
                .collect();
            let cells = |l: &str| -> Vec<String> {
                l.trim_matches('|')
                    .split('|')
                    .map(|c| c.trim().to_string())
                    .collect()
            };
            let i = cells(lines[0]).iter().position(|c| c == col).unwrap();
            lines[2..].iter().map(|l| cells(l)[i].clone()).collect()
        };
        let twice: Vec<String> = lat
            .iter()
            .flat_map(|l| [l.to_string(), l.to_string()])
            .collect();
        assert_eq!(column("## Cells", "latency"), twice, "{md}");
        // By latency: within each mode (call first, as the matrix has it), the latencies
        // in the matrix's order.
        let by = column("## By latency, within each mode", "latency");
        let once: Vec<String> = lat.map(String::from).to_vec();
        assert_eq!(by, [once.clone(), once].concat(), "{md}");
        assert_eq!(
            column("## By latency, within each mode", "mode"),
            [["call"; 4], ["cast"; 4]].concat(),
            "{md}"
        );
        assert_eq!(
            column("## Cells: by mode, within each latency", "latency"),
            twice,
            "{md}"
        );
    }
}

#[cfg(test)]
mod invalid_tests {
    use super::*;
    use crate::format::study::{StudyCell, StudyRun};

    /// A run directory with one probe phase that issued `issued` I/Os and left `missed`
    /// unissued at 15,000 IOPS asked, with write p99 `p99_ms`, and one load phase with
    /// `failed` timeouts (`expected` marks them expected).
    fn run_dir(d: &Path, issued: u64, missed: u64, p99_ms: f64, failed: u64, expected: bool) {
        std::fs::create_dir_all(d).unwrap();
        let failures = if failed > 0 {
            json!([{"role": "js-pub", "kind": "timeout", "count": failed}])
        } else {
            json!([])
        };
        let meta = json!({"tool": "diskpulse", "format_version": crate::format::FORMAT_VERSION,
            "phases": [
                {"index": 1, "kind": "probe", "args": [], "stopped": false, "result": {}},
                {"index": 2, "kind": "load", "args": [], "stopped": false, "result": {
                    "failures_expected": expected,
                    "roles": [{"role": "js-pub", "ops": 100, "msgs_per_s": 10.0, "failures": failures}]}}]});
        std::fs::write(d.join("meta.json"), meta.to_string()).unwrap();
        let probe = json!({"diskpulse": {"rate_iops_total": 15000.0, "rate_missed_ios": missed},
            "jobs": [{"write": {"total_ios": issued,
                "clat_ns": {"mean": 1e6, "percentile": {"99.000000": p99_ms * 1e6}}}}]});
        std::fs::write(d.join("probe-1.json"), probe.to_string()).unwrap();
    }

    #[test]
    fn a_probe_behind_its_rate_or_a_failed_load_makes_a_run_invalid() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        run_dir(&d.join("ok"), 10_000, 50, 1.0, 0, false);
        assert_eq!(invalid_reason(&d.join("ok")), None, "0.5% missed stands");
        run_dir(&d.join("behind"), 54_000, 76_000, 1.0, 0, false);
        let why = invalid_reason(&d.join("behind")).unwrap();
        assert!(why.contains("fell behind its rate of 15,000 IOPS"), "{why}");
        assert!(why.contains("76000 of 130000"), "{why}");
        run_dir(&d.join("failed"), 10_000, 0, 1.0, 256, false);
        let why = invalid_reason(&d.join("failed")).unwrap();
        assert!(why.contains("256 js-pub timeout"), "{why}");
        run_dir(&d.join("expected"), 10_000, 0, 1.0, 256, true);
        assert_eq!(invalid_reason(&d.join("expected")), None);
    }

    #[test]
    fn an_invalid_run_is_named_on_the_page_and_in_study_csv_and_left_out_of_its_cell() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let mut sj = Study {
            scenario: "raid".into(),
            status: "ok".into(),
            ..Default::default()
        };
        let params = vec![("raid".to_string(), "1".to_string())];
        sj.cells.push(StudyCell {
            id: "raid-1".into(),
            params: params.clone(),
        });
        // Two runs that kept their rate at 2 ms, one that fell behind at 80 ms.
        for (rep, missed, p99) in [(1u32, 0u64, 2.0), (2, 60_000, 80.0), (3, 0, 2.0)] {
            let dir_name = format!("raid-1/r{rep}");
            run_dir(&d.join(&dir_name), 75_000, missed, p99, 0, false);
            sj.runs.push(StudyRun {
                cell: "raid-1".into(),
                params: params.clone(),
                repeat: rep,
                dir: dir_name,
                status: "ok".into(),
                ..Default::default()
            });
        }
        std::fs::write(
            d.join(crate::format::study::JSON_FILE),
            serde_json::to_string(&sj).unwrap(),
        )
        .unwrap();
        write_reports(d).unwrap();
        let md = std::fs::read_to_string(d.join("study.md")).unwrap();
        assert!(md.contains("1 invalid and left out"), "{md}");
        assert!(
            md.contains("- raid-1 r2: INVALID: phase 1 probe fell behind its rate"),
            "{md}"
        );
        // The cell's probe write p99 is the two valid runs' 2 ms (2000 us), not a mean with 80 ms.
        let cells = md.split("## Cells").nth(1).unwrap();
        let header = cells.lines().find(|l| l.starts_with("| raid |")).unwrap();
        assert!(
            header.starts_with("| raid | valid runs | probe write p99 (ms) |"),
            "{header}"
        );
        let row = cells.lines().find(|l| l.starts_with("| 1 |")).unwrap();
        assert!(
            row.starts_with("| 1 | 2 of 3 | 2.00 (2.00..2.00) |"),
            "2 runs counted, in ms: {row}"
        );
        assert!(!row.contains("80"), "{row}");
        let csv = std::fs::read_to_string(d.join("study.csv")).unwrap();
        let mut lines = csv.lines();
        assert!(lines
            .next()
            .unwrap()
            .starts_with("cell,repeat,status,invalid,raid,"));
        let rows: Vec<&str> = lines.collect();
        assert!(rows[0].starts_with("raid-1,1,ok,,1,"), "{csv}");
        // The reason holds a comma ("15,000 IOPS"): quoted, as CSV does.
        assert!(
            rows[1].starts_with("raid-1,2,ok,\"phase 1 probe fell behind"),
            "{csv}"
        );
        let html = std::fs::read_to_string(d.join("report.html")).unwrap();
        assert!(html.contains("INVALID"), "the page names it");
    }
}

#[cfg(test)]
mod page_tests {
    use super::*;
    use crate::format::study::{StudyCell, StudyRun};

    /// A finished run: a load phase at a fixed 100 msgs/s with no failures (the
    /// scenario's input: the same in every run) and a probe phase whose write p99 is
    /// `p99_ms`, 0.2% of its I/Os missed (valid) or 40% (invalid).
    fn run_dir(d: &Path, p99_ms: f64, behind: bool) {
        std::fs::create_dir_all(d).unwrap();
        let meta = json!({"tool": "diskpulse", "format_version": crate::format::FORMAT_VERSION,
            "phases": [
                {"index": 1, "kind": "load", "args": [], "stopped": false, "result": {
                    "roles": [{"role": "js-pub", "ops": 1500, "msgs_per_s": 100.0, "mib_per_s": 1.5,
                               "failures": []}]}},
                {"index": 2, "kind": "probe", "args": [], "stopped": false, "result": {}}]});
        std::fs::write(d.join("meta.json"), meta.to_string()).unwrap();
        let missed = if behind { 40_000 } else { 100 };
        let probe = json!({"diskpulse": {"rate_iops_total": 4000.0, "rate_missed_ios": missed},
            "jobs": [{"write": {"total_ios": 60_000,
                "clat_ns": {"mean": 1e6, "percentile": {"99.000000": p99_ms * 1e6}}}}]});
        std::fs::write(d.join("probe-2.json"), probe.to_string()).unwrap();
    }

    /// sync x raid, 2 repeats a cell. raid 1 doubles the write p99 at sync 5s (4 vs 2 ms)
    /// and triples it at sync always (30 vs 10 ms); one raid-1/always run fell behind its
    /// rate at 900 ms. Averaged over sync, "by raid" would read 6 and 17 ms.
    fn study() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let mut sj = Study {
            scenario: "beside".into(),
            description: "sync x raid".into(),
            status: "done".into(),
            ..Default::default()
        };
        for (sync, raid, p99s) in [
            ("5s", "0", [(2.0, false), (2.02, false)]),
            ("5s", "1", [(4.0, false), (4.04, false)]),
            ("always", "0", [(10.0, false), (10.2, false)]),
            ("always", "1", [(30.0, false), (900.0, true)]),
        ] {
            let params = vec![
                ("sync".to_string(), sync.to_string()),
                ("raid".to_string(), raid.to_string()),
            ];
            let id = format!("sync-{sync}_raid-{raid}");
            sj.cells.push(StudyCell {
                id: id.clone(),
                params: params.clone(),
            });
            for (rep, (p99, behind)) in p99s.into_iter().enumerate() {
                let dir_name = format!("cells/{id}/r{}", rep + 1);
                run_dir(&d.join(&dir_name), p99, behind);
                sj.runs.push(StudyRun {
                    cell: id.clone(),
                    params: params.clone(),
                    repeat: rep as u32 + 1,
                    dir: dir_name,
                    status: "ok".into(),
                    ..Default::default()
                });
            }
        }
        std::fs::write(
            d.join(crate::format::study::JSON_FILE),
            serde_json::to_string(&sj).unwrap(),
        )
        .unwrap();
        write_reports(d).unwrap();
        dir
    }

    #[test]
    fn the_html_page_opens_with_the_answers_and_charts_only_figures_that_vary() {
        let dir = study();
        let d = dir.path();
        let html = std::fs::read_to_string(d.join("report.html")).unwrap();
        let at = |s: &str| html.find(s).unwrap_or_else(|| panic!("no {s} in the page"));
        // Answers first: before the invalid runs, any chart, any table and any run.
        let answers = at("<h2>Answers</h2>");
        for later in [
            "<h2>Invalid runs",
            "<h2>Charts</h2>",
            "<figure",
            "<table",
            "<h2>Cells",
            "<h2>Runs</h2>",
        ] {
            assert!(answers < at(later), "Answers after {later}");
        }
        assert!(
            !html[..answers].contains("<h2>"),
            "nothing comes before the answers"
        );
        // The first question (sync, the matrix's first parameter), with its noise and
        // the interval's method named.
        let first = &html[answers..at("<h2>Invalid runs")];
        assert!(
            first.contains("<h3>sync: always against 5s</h3>"),
            "{first}"
        );
        assert!(first.contains("<h3>raid: 1 against 0</h3>"), "{first}");
        assert!(
            first.contains("raid 1: probe write p99 2.00x raid 0 at sync 5s (4.02 vs 2.01 ms, 2 repeats each; Welch 95% interval"),
            "{first}"
        );
        // The invalid run is out of the verdict: 30 vs 10.1 ms with 1 repeat, said.
        assert!(
            first.contains("raid 1: probe write p99 2.97x raid 0 at sync always (30.0 vs 10.1 ms, 1 and 2 repeats, 1 invalid left out; too few repeats for a statement of noise)"),
            "{first}"
        );
        assert!(first.contains("Welch 95% interval of the ratio"), "{first}");
        assert!(html.contains(
            "sync-always_raid-1 r2: INVALID: phase 2 probe fell behind its rate of 4,000 IOPS"
        ));
        // Charts: the write p99 varies; msgs/s and MiB/s (the load's fixed rate), failed
        // ops (0 everywhere) and flushes/s (no run has it) do not.
        let charts = d.join("charts");
        assert!(charts.join("probe_write_lat_p99_us.svg").exists());
        for fixed in ["msgs_per_s", "mib_per_s", "failures", "flushes_per_s"] {
            assert!(!charts.join(format!("{fixed}.svg")).exists(), "{fixed}");
            assert!(!charts.join(format!("{fixed}.png")).exists(), "{fixed}");
        }
        let svgs: Vec<_> = std::fs::read_dir(&charts)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().unwrap() == "svg")
            .collect();
        assert_eq!(
            html.matches("<figure class=\"study-chart\">").count(),
            svgs.len()
        );
        for p in &svgs {
            let svg = std::fs::read_to_string(p).unwrap();
            assert!(
                svg.contains("<title>"),
                "{}: a chart with no bar",
                p.display()
            );
        }
        // In ms, 3 significant digits; never raw µs.
        let svg = std::fs::read_to_string(charts.join("probe_write_lat_p99_us.svg")).unwrap();
        assert!(svg.contains(">ms<"), "{svg}");
        assert!(svg.contains("mean 4.02 (min 4, max 4.04, n 2)"), "{svg}");
        assert!(!html.contains("2010") && !html.contains("4020"), "raw µs");
    }

    #[test]
    fn by_raid_never_averages_over_sync_and_the_tables_fit_a_screen() {
        let dir = study();
        let md = std::fs::read_to_string(dir.path().join("study.md")).unwrap();
        let table = |h: &str| -> Vec<Vec<String>> {
            let sec = md.split(h).nth(1).unwrap_or_else(|| panic!("{h}: {md}"));
            sec.lines()
                .skip_while(|l| !l.starts_with('|'))
                .take_while(|l| l.starts_with('|'))
                .filter(|l| !l.starts_with("|---"))
                .map(|l| {
                    l.trim_matches('|')
                        .split('|')
                        .map(|c| c.trim().to_string())
                        .collect()
                })
                .collect()
        };
        let by = table("## Cells: by raid, within each sync\n");
        assert_eq!(
            by[0],
            ["sync", "raid", "valid runs", "probe write p99 (ms)"],
            "the answer figure only (msgs/s is a fixed input): {md}"
        );
        let rows: Vec<[&str; 4]> = by[1..]
            .iter()
            .map(|r| [&*r[0], &*r[1], &*r[2], r[3].split(' ').next().unwrap()])
            .collect();
        assert_eq!(
            rows,
            [
                ["5s", "0", "2", "2.01"],
                ["5s", "1", "2", "4.02"],
                ["always", "0", "2", "10.1"],
                ["always", "1", "1 of 2", "30.0"],
            ],
            "{md}"
        );
        // An average over sync (6 ms / 17 ms) is nowhere.
        for mixed in ["6.01", "6.05", "17.0", "6.03"] {
            assert!(!md.contains(&format!("| {mixed}")), "{mixed}: {md}");
        }
        let sync = table("## By sync, within each raid\n");
        assert_eq!(sync[0][..2], ["raid", "sync"]);
        assert_eq!(sync.len(), 5);
        // Every table fits a screen; the full one is study.csv, and the page says so.
        for t in [by, sync] {
            assert!(t[0].len() <= 8, "{:?}", t[0]);
        }
        assert!(md.contains("is in study.csv beside this page"), "{md}");
        let json: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("study.json")).unwrap())
                .unwrap();
        let axis = json["axes"]["raid"].as_array().unwrap();
        assert_eq!(axis.len(), 4, "one entry per cell, none averaged");
        assert_eq!(axis[0]["others"], json!([["sync", "5s"]]));
    }
}
