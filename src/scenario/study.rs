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

use format::fsync;
use format::meta::Meta;
use format::probe::ProbeJson;
use format::study::{self as fmt, Figures, NodeFigures, Study, StudyRun};
use format::summary::Summary;

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
        |b: Option<&format::summary::DeviceSummary>, d| match b {
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
                        .map(|r| format!(" of {} IOPS", format::units::num(r, 0)))
                        .unwrap_or_default();
                    why.push(format!(
                        "phase {} probe fell behind its rate{asked}: {missed} of {} scheduled I/Os never issued ({:.0}%)",
                        ph.index,
                        missed + issued,
                        share * 100.0
                    ));
                }
            }
            "load" if !ph.failures_expected() => {
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
    let Some(meta) = format::agents::read_meta(run_dir) else {
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
        let head = format::agents::header("diskstats");
        let cols: Vec<&str> = head.split(',').collect();
        let at = |name: &str| cols.iter().position(|c| *c == name);
        let (Some(sw), Some(io)) = (at("sectors_written"), at("io_ms")) else {
            return out;
        };
        // Its chunks, then the file (`record --chunk`); what a kill -9 left stands.
        let _ = format::agents::for_each_row(run_dir, format::agents::DISKSTATS_FILE, |line| {
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
        });
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
        let head = format::agents::header("proc_io");
        let cols: Vec<&str> = head.split(',').collect();
        let at = |name: &str| cols.iter().position(|c| *c == name).unwrap_or(0);
        let (pid_c, rb, wb) = (at("pid"), at("read_bytes"), at("write_bytes"));
        // node -> (pid, first t, last t, bytes read and written so far, this pid's first
        // counters, its last counters)
        type Acc = (String, u64, u64, u64, u64, (u64, u64), (u64, u64));
        let mut acc: BTreeMap<String, Acc> = BTreeMap::new();
        let _ = format::agents::for_each_row(run_dir, format::agents::PROC_IO_FILE, |line| {
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
        });
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
    format::atomic::write(&study.join(fmt::CSV_FILE), csv.as_bytes())?;
    let csv_columns = fmt::CSV_KEY_COLUMNS.len() + params.len() + cols.len();
    let page = super::study_page::build(&sj, &per_run, csv_columns);
    format::atomic::write(&study.join("study.md"), page.markdown().as_bytes())?;
    let cells = super::study_page::cells(&sj, &per_run);
    let present: Vec<(String, String)> = cols
        .iter()
        .filter(|(k, _)| per_run.iter().any(|(_, x)| x.get(k).is_some()))
        .cloned()
        .collect();
    sj.cells_summary = Some(
        cells
            .iter()
            .filter(|c| !c.valid.is_empty())
            .map(|c| fmt::CellSummary {
                cell: c.id.clone(),
                figures: super::study_page::figure_stats(c, &present),
                params: c.params.clone(),
                runs: c.valid.len(),
            })
            .collect(),
    );
    sj.figures_per_run = Some(
        per_run
            .iter()
            .map(|(r, x)| fmt::RunFigures {
                cell: r.cell.clone(),
                figures: x.clone(),
                invalid: r.invalid.clone(),
                repeat: r.repeat,
                status: r.status.clone(),
            })
            .collect(),
    );
    let verdicts: Vec<&super::verdict::Verdict> =
        page.questions.iter().flat_map(|q| &q.verdicts).collect();
    sj.verdicts = Some(verdicts.iter().map(|v| (*v).clone()).collect());
    sj.unanswered = Some(
        page.questions
            .iter()
            .flat_map(|q| q.unanswered.iter().cloned())
            .collect(),
    );
    sj.axes = Some(super::study_page::axes(&params, &cells, &present));
    sj.write(study)?;
    // One chart per figure that varies (STUDY/charts/), also inlined in report.html.
    let charts_ = super::study_charts::build(&sj, &per_run);
    super::study_charts::write(study, &charts_)?;
    format::atomic::write(
        &study.join("report.html"),
        super::html::study_page(study, &page, &charts_, &sj.runs).as_bytes(),
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
mod tests;
