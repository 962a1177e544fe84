//! `report`: from a run directory to `summary.json`, a table on stdout,
//! `timeline.png` / `timeline.svg` and `report.html`. Everything is derived from the raw counters in the
//! recording, so a run can be re-analysed with other windows.

pub mod analysis;
pub mod charts_build;
pub mod html;
pub mod run;

use std::path::Path;

use collectors::diskstats as ds;
use serde::Serialize;
use serde_json::Value;

use analysis::{BurstParams, Bursts, UiAverage, MIB};
pub use run::Run;

/// Report options.
#[derive(Debug, Clone)]
pub struct ReportOptions {
    /// Window of the "UI" average (what an array's web UI shows), ns.
    pub ui_window_ns: u64,
    pub burst: BurstParams,
    /// Write timeline.png and timeline.svg.
    pub charts: bool,
    /// Write report.html.
    pub html: bool,
    /// Window of `rates.csv`, ns.
    pub rates_window_ns: u64,
}

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions {
            ui_window_ns: 30_000_000_000,
            burst: BurstParams::default(),
            charts: true,
            html: true,
            rates_window_ns: 100_000_000,
        }
    }
}

/// Peak rates over windows of 1 ms, 10 ms, 100 ms and 1 s, MiB/s.
#[derive(Debug, Clone, Serialize)]
pub struct Peaks {
    #[serde(rename = "1ms")]
    pub p1ms: f64,
    #[serde(rename = "10ms")]
    pub p10ms: f64,
    #[serde(rename = "100ms")]
    pub p100ms: f64,
    #[serde(rename = "1s")]
    pub p1s: f64,
}

/// One direction (write or read) of one device.
#[derive(Debug, Clone, Serialize)]
pub struct Direction {
    pub bytes: f64,
    pub ios: f64,
    pub mean_mib_s: f64,
    pub peak_mib_s: Peaks,
    pub peak_iops_10ms: f64,
    /// Mean time per completed I/O (Δ read_ms or write_ms / Δ I/Os), ms: iostat's r_await/w_await.
    pub await_ms: Option<f64>,
    pub ui_average_mib_s: f64,
    /// 10 ms peak / UI average.
    pub hidden_factor: Option<f64>,
    pub bursts: Bursts,
}

/// One device's figures.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceSummary {
    pub name: String,
    pub why: Option<String>,
    pub write: Direction,
    pub read: Direction,
    pub flushes: Option<f64>,
    pub peak_flushes_per_s_100ms: Option<f64>,
    pub max_in_flight: f64,
    /// Share of the run the device was busy (io_ms), %.
    pub util_pct: f64,
    pub rows: usize,
}

/// What `report` writes to summary.json.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub run: String,
    pub duration_s: f64,
    pub ui_window_s: f64,
    pub headline: Vec<String>,
    pub devices: Vec<DeviceSummary>,
    pub memory: Option<Value>,
    pub cpu: Option<Value>,
    pub load: Option<Value>,
    pub samplers: Value,
    pub error_events: usize,
    /// One per `restart` event of a scenario: the read storm of a node re-reading its store.
    pub restarts: Vec<RestartSummary>,
}

/// A node restart and the reads it caused on the devices that hold its store.
#[derive(Debug, Clone, Serialize)]
pub struct RestartSummary {
    pub node: String,
    pub t_s: f64,
    pub devices: Vec<String>,
    /// Process start to the meta leader seeing the node current, and to /healthz ok, ms.
    pub current_ms: Option<f64>,
    pub healthy_ms: Option<f64>,
    /// From the restart to 30 s after the node was healthy (or the next restart / end).
    pub window_s: f64,
    pub read_bytes: f64,
    /// Highest read rate over 100 ms windows, MiB/s.
    pub read_peak_mib_s: f64,
    /// From the first to the last 10 ms bin reading faster than max(1 MiB/s, 10% of the peak bin).
    pub read_burst_s: f64,
}

/// Restart read bursts from `restart` / `restart_ready` events and the node's devices in
/// meta.json `broker_nodes` (every recorded device when the run does not say).
pub fn restarts(run: &Run) -> Vec<RestartSummary> {
    let starts: Vec<&run::Event> = run.events.iter().filter(|e| e.kind == "restart").collect();
    let mut out = vec![];
    for (i, e) in starts.iter().enumerate() {
        let node = e.detail["node"].as_str().unwrap_or("").to_string();
        let ready = run.events.iter().find(|r| {
            r.kind == "restart_ready" && r.t_ns >= e.t_ns && r.detail["node"] == node.as_str()
        });
        let healthy_at = ready.map(|r| r.t_ns).unwrap_or(e.t_ns);
        let mut end = healthy_at + 30_000_000_000;
        if let Some(next) = starts.get(i + 1) {
            end = end.min(next.t_ns);
        }
        end = end.min(run.duration_ns);
        let devs: Vec<String> = run.meta["broker_nodes"]
            .as_array()
            .and_then(|a| a.iter().find(|n| n["node"] == node.as_str()))
            .and_then(|n| n["devices"].as_array())
            .map(|d| {
                d.iter()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_else(|| run.disks.iter().map(|d| d.name.clone()).collect());
        let (mut bytes, mut peak, mut first, mut last) = (0.0f64, 0.0f64, None, None);
        for d in run.disks.iter().filter(|d| devs.contains(&d.name)) {
            let iv: Vec<analysis::Interval> = analysis::read_bytes(d)
                .into_iter()
                .filter(|x| x.t1_ns > e.t_ns && x.t0_ns < end)
                .collect();
            let n100 = (end / 100_000_000 + 1) as usize;
            let w100 = analysis::window_sums(&iv, 100_000_000, n100);
            let k0 = (e.t_ns / 100_000_000) as usize;
            bytes += w100.iter().skip(k0).sum::<f64>();
            peak = peak.max(w100.iter().skip(k0).cloned().fold(0.0, f64::max) / 0.1 / MIB);
            let n10 = (end / 10_000_000 + 1) as usize;
            let w10 = analysis::window_sums(&iv, 10_000_000, n10);
            let top = w10.iter().cloned().fold(0.0, f64::max);
            let thr = (0.1 * top).max(MIB * 0.01);
            for (k, v) in w10.iter().enumerate().skip((e.t_ns / 10_000_000) as usize) {
                if *v > thr {
                    // Over all the node's devices: the earliest first and the latest last bin.
                    first = Some(first.map_or(k, |f: usize| f.min(k)));
                    last = Some(last.map_or(k, |l: usize| l.max(k)));
                }
            }
        }
        out.push(RestartSummary {
            node,
            t_s: e.t_ns as f64 / 1e9,
            devices: devs,
            current_ms: ready.and_then(|r| r.detail["current_ms"].as_f64()),
            healthy_ms: ready.and_then(|r| r.detail["healthy_ms"].as_f64()),
            window_s: (end.saturating_sub(e.t_ns)) as f64 / 1e9,
            read_bytes: bytes,
            read_peak_mib_s: peak,
            read_burst_s: match (first, last) {
                (Some(a), Some(b)) => (b - a + 1) as f64 * 0.01,
                _ => 0.0,
            },
        });
    }
    out
}

fn direction(
    d: &run::DiskRows,
    bytes_field: usize,
    ios_field: usize,
    ms_field: usize,
    dur: u64,
    o: &ReportOptions,
) -> (Direction, UiAverage) {
    let iv = analysis::intervals(d, bytes_field, analysis::SECTOR_BYTES);
    let ios = analysis::intervals(d, ios_field, 1.0);
    let p = |w| analysis::peak_rate(&iv, w, dur) / MIB;
    let peaks = Peaks {
        p1ms: p(1_000_000),
        p10ms: p(10_000_000),
        p100ms: p(100_000_000),
        p1s: p(1_000_000_000),
    };
    let ui = analysis::ui_average(&iv, o.ui_window_ns, dur);
    let nbins = (dur / o.burst.bin_ns) as usize;
    let bins = analysis::window_sums(&iv, o.burst.bin_ns, nbins);
    let bursts = analysis::find_bursts(&bins, &o.burst);
    let bytes = analysis::total(&iv);
    let ui_mib = ui.max_bytes_per_s / MIB;
    let n_ios = analysis::total(&ios);
    let busy_ms = analysis::total(&analysis::intervals(d, ms_field, 1.0));
    let dir = Direction {
        await_ms: (n_ios > 0.0).then(|| busy_ms / n_ios),
        bytes,
        ios: n_ios,
        mean_mib_s: bytes / MIB / (dur.max(1) as f64 / 1e9),
        hidden_factor: (ui_mib > 0.0 && peaks.p10ms.is_finite()).then(|| peaks.p10ms / ui_mib),
        peak_mib_s: peaks,
        peak_iops_10ms: analysis::peak_rate(&ios, 10_000_000, dur),
        ui_average_mib_s: ui_mib,
        bursts,
    };
    (dir, ui)
}

/// Per-device analysis plus the UI-average series for the charts.
pub struct DeviceAnalysis {
    pub summary: DeviceSummary,
    pub ui_write: UiAverage,
    pub ui_read: UiAverage,
}

pub fn analyse_device(
    d: &run::DiskRows,
    why: Option<String>,
    dur: u64,
    o: &ReportOptions,
) -> DeviceAnalysis {
    let (write, ui_write) = direction(
        d,
        ds::F_SECTORS_WRITTEN,
        ds::F_WRITES,
        ds::F_WRITE_MS,
        dur,
        o,
    );
    let (read, ui_read) = direction(d, ds::F_SECTORS_READ, ds::F_READS, ds::F_READ_MS, dur, o);
    let flush =
        analysis::has_field(d, ds::F_FLUSHES).then(|| analysis::intervals(d, ds::F_FLUSHES, 1.0));
    let io_ms = analysis::total(&analysis::intervals(d, ds::F_IO_MS, 1.0));
    let span = match (d.t_ns.first(), d.t_ns.last()) {
        (Some(a), Some(b)) if b > a => (b - a) as f64 / 1e6,
        _ => f64::NAN,
    };
    let summary = DeviceSummary {
        name: d.name.clone(),
        why,
        write,
        read,
        flushes: flush.as_ref().map(|f| analysis::total(f)),
        peak_flushes_per_s_100ms: flush
            .as_ref()
            .map(|f| analysis::peak_rate(f, 100_000_000, dur)),
        max_in_flight: d
            .f
            .iter()
            .filter_map(|r| r[ds::F_IN_FLIGHT])
            .max()
            .unwrap_or(0) as f64,
        util_pct: 100.0 * io_ms / span,
        rows: d.t_ns.len(),
    };
    DeviceAnalysis {
        summary,
        ui_write,
        ui_read,
    }
}

pub(crate) fn fmt_rate(mib_s: f64) -> String {
    if !mib_s.is_finite() {
        "-".into()
    } else if mib_s >= 1024.0 {
        format!("{:.2} GiB/s", mib_s / 1024.0)
    } else if mib_s >= 10.0 {
        format!("{mib_s:.0} MiB/s")
    } else {
        format!("{mib_s:.2} MiB/s")
    }
}

fn fmt_bytes(b: f64) -> String {
    if b >= 1024.0 * MIB {
        format!("{:.2} GiB", b / 1024.0 / MIB)
    } else if b >= MIB {
        format!("{:.1} MiB", b / MIB)
    } else {
        format!("{:.0} KiB", b / 1024.0)
    }
}

/// The sentence the report exists for.
pub fn headline(s: &DeviceSummary, ui_window_s: f64) -> String {
    let w = &s.write;
    let b = &w.bursts;
    let ui = format!(
        "a {ui_window_s:.0} s average shows {}",
        fmt_rate(w.ui_average_mib_s)
    );
    if w.bytes == 0.0 {
        return format!("{}: no writes recorded", s.name);
    }
    match (b.count, b.period_s) {
        (n, Some(p)) if n >= 2 => format!(
            "{}: writes come in bursts of {} (10 ms peak; {} at 1 ms) every {:.2} s ({}, cv {:.2}), {} per burst over {:.0} ms; {}; the 10 ms peak is {:.0}x that",
            s.name,
            fmt_rate(w.peak_mib_s.p10ms),
            fmt_rate(w.peak_mib_s.p1ms),
            p,
            if b.regular { "regular" } else { "irregular" },
            b.period_cv.unwrap_or(0.0),
            fmt_bytes(b.mean_bytes.unwrap_or(0.0)),
            b.mean_duration_ms.unwrap_or(0.0),
            ui,
            w.hidden_factor.unwrap_or(f64::NAN)
        ),
        _ => format!(
            "{}: no periodic write bursts ({} burst(s)); peak {} at 10 ms, mean {}; {}",
            s.name,
            b.count,
            fmt_rate(w.peak_mib_s.p10ms),
            fmt_rate(w.mean_mib_s),
            ui
        ),
    }
}

fn memory_summary(run: &Run) -> Option<Value> {
    let m = run.mem.as_ref()?;
    let max = |c: &str| {
        m.col(c)
            .map(|v| v.iter().cloned().fold(0.0, f64::max) / 1024.0)
    };
    Some(serde_json::json!({
        "dirty_max_mib": max("dirty_kib"),
        "writeback_max_mib": max("writeback_kib"),
        "samples": m.len(),
    }))
}

fn cpu_summary(run: &Run) -> Option<Value> {
    let c = run.cpu.as_ref()?;
    if c.len() < 2 {
        return None;
    }
    let first = |name: &str| c.col(name).map(|v| v[v.len() - 1] - v[0]).unwrap_or(0.0);
    let names = &collectors::procstat::CPU_COLUMNS[..collectors::procstat::CPU_TICK_COLUMNS];
    let total: f64 = names.iter().map(|n| first(n)).sum();
    if total <= 0.0 {
        return None;
    }
    let pct = |n: &str| 100.0 * first(n) / total;
    Some(serde_json::json!({
        "user_pct": pct("user_ticks") + pct("nice_ticks"),
        "system_pct": pct("system_ticks") + pct("irq_ticks") + pct("softirq_ticks"),
        "iowait_pct": pct("iowait_ticks"),
        "idle_pct": pct("idle_ticks"),
    }))
}

/// Per role of load.csv: ops, rate over the role's span, errors, worst window p99.
fn load_summary(run: &Run) -> Option<Value> {
    if run.load.is_empty() {
        return None;
    }
    let mut roles = serde_json::Map::new();
    for (role, l) in &run.load {
        let sum = |c: &str| {
            l.col(c)
                .map(|v| v.iter().filter(|x| x.is_finite()).sum::<f64>())
                .unwrap_or(0.0)
        };
        let max = |c: &str| {
            l.col(c).and_then(|v| {
                let m = v
                    .iter()
                    .cloned()
                    .filter(|x| x.is_finite())
                    .fold(f64::NAN, f64::max);
                m.is_finite().then_some(m)
            })
        };
        let span_s = match (l.t_ns.first(), l.t_ns.last(), l.col("window_ns")) {
            (Some(&a), Some(&b), Some(w)) => (b as f64 - (a as f64 - w[0])) / 1e9,
            _ => f64::NAN,
        };
        let ops = sum("ops");
        roles.insert(
            role.clone(),
            serde_json::json!({
                "ops": ops,
                "bytes": sum("bytes"),
                "errors": sum("errors"),
                "ops_per_s": ops / span_s,
                "worst_window_lat_p99_us": max("lat_p99_us"),
                "lat_max_us": max("lat_max_us"),
                "worst_window_co_p99_us": max("co_p99_us"),
            }),
        );
    }
    Some(Value::Object(roles))
}

/// Analyses a run and writes `summary.json` (and the charts) into it.
pub fn report(dir: &Path, o: &ReportOptions) -> anyhow::Result<Summary> {
    let (run, analyses, summary) = analyse(dir, o)?;
    write_outputs(dir, &run, &analyses, &summary, o)?;
    Ok(summary)
}

/// Reads and analyses a run without writing anything.
pub fn analyse(
    dir: &Path,
    o: &ReportOptions,
) -> anyhow::Result<(Run, Vec<DeviceAnalysis>, Summary)> {
    let run = Run::read(dir)?;
    let dur = run.duration_ns;
    let analyses: Vec<DeviceAnalysis> = run
        .disks
        .iter()
        .map(|d| analyse_device(d, run.device_why(&d.name), dur, o))
        .collect();
    let ui_s = o.ui_window_ns as f64 / 1e9;
    // Devices the user asked about come first in the headline; busiest first otherwise.
    let mut order: Vec<&DeviceSummary> = analyses.iter().map(|a| &a.summary).collect();
    order.sort_by(|a, b| b.write.bytes.total_cmp(&a.write.bytes));
    let headline: Vec<String> = order
        .iter()
        .filter(|s| s.write.bytes > 0.0)
        .map(|s| headline(s, ui_s))
        .collect();
    let summary = Summary {
        run: dir.display().to_string(),
        duration_s: dur as f64 / 1e9,
        ui_window_s: ui_s,
        headline,
        devices: analyses.iter().map(|a| a.summary.clone()).collect(),
        memory: memory_summary(&run),
        cpu: cpu_summary(&run),
        load: load_summary(&run),
        samplers: run.meta["samplers"].clone(),
        error_events: run.events.iter().filter(|e| e.kind == "error").count(),
        restarts: restarts(&run),
    };
    Ok((run, analyses, summary))
}

/// Writes summary.json, rates.csv, timeline.png/.svg and report.html into `dir`.
fn write_outputs(
    dir: &Path,
    run: &Run,
    analyses: &[DeviceAnalysis],
    summary: &Summary,
    o: &ReportOptions,
) -> anyhow::Result<()> {
    std::fs::write(
        dir.join("summary.json"),
        serde_json::to_vec_pretty(summary)?,
    )
    .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", dir.join("summary.json").display()))?;
    write_rates_csv(run, o.rates_window_ns, &dir.join("rates.csv"))?;
    if o.charts || o.html {
        let tl = charts_build::timeline(run, analyses, o);
        let write = |name: &str, bytes: &[u8]| {
            let p = dir.join(name);
            std::fs::write(&p, bytes)
                .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", p.display()))
        };
        if o.charts {
            write("timeline.svg", charts::render_svg(&tl).as_bytes())?;
            write("timeline.png", &charts::render_png(&tl)?)?;
        }
        if o.html {
            write("report.html", html::run_page(run, summary, &tl).as_bytes())?;
        }
    }
    Ok(())
}

/// The table `report` prints.
pub fn table(s: &Summary) -> String {
    let mut out = String::new();
    use std::fmt::Write;
    let _ = writeln!(out, "run {} ({:.1} s)", s.run, s.duration_s);
    let _ = writeln!(
        out,
        "{:<10} {:>4} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8} {:>7} {:>9} {:>8}",
        "device",
        "dir",
        "total",
        "mean",
        "peak 1ms",
        "peak 10ms",
        "peak 100ms",
        "peak 1s",
        format!("UI {:.0}s", s.ui_window_s),
        "hidden",
        "bursts",
        "period"
    );
    for d in &s.devices {
        for (name, x) in [("write", &d.write), ("read", &d.read)] {
            if x.bytes == 0.0 && name == "read" {
                continue;
            }
            let _ =
                writeln!(
                out,
                "{:<10} {:>4} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8} {:>7} {:>9} {:>8}",
                d.name,
                if name == "write" { "W" } else { "R" },
                fmt_bytes(x.bytes),
                fmt_rate(x.mean_mib_s),
                fmt_rate(x.peak_mib_s.p1ms),
                fmt_rate(x.peak_mib_s.p10ms),
                fmt_rate(x.peak_mib_s.p100ms),
                fmt_rate(x.peak_mib_s.p1s),
                fmt_rate(x.ui_average_mib_s).replace(" MiB/s", ""),
                x.hidden_factor.map(|h| format!("{h:.0}x")).unwrap_or("-".into()),
                x.bursts.count,
                x.bursts.period_s.map(|p| format!("{p:.2}s")).unwrap_or("-".into()),
            );
        }
    }
    if let Some(Value::Object(roles)) = &s.load {
        for (role, l) in roles {
            let _ = writeln!(
                out,
                "broker {role}: {} ops ({:.0}/s), worst window p99 {} us, errors {}",
                l["ops"],
                l["ops_per_s"].as_f64().unwrap_or(0.0),
                l["worst_window_lat_p99_us"],
                l["errors"]
            );
        }
    }
    if let Some(m) = &s.memory {
        let _ = writeln!(
            out,
            "memory: Dirty up to {:.1} MiB, Writeback up to {:.1} MiB",
            m["dirty_max_mib"].as_f64().unwrap_or(0.0),
            m["writeback_max_mib"].as_f64().unwrap_or(0.0)
        );
    }
    let ds_s = &s.samplers["diskstats"];
    if ds_s.get("samples").is_some() {
        let _ = writeln!(
            out,
            "sampler: {} of {} diskstats samples at {} us, jitter p99 {:.0} us",
            ds_s["samples"],
            ds_s["expected"],
            ds_s["interval_us"],
            ds_s["jitter_p99_us"].as_f64().unwrap_or(f64::NAN)
        );
    }
    for r in &s.restarts {
        let _ = writeln!(
            out,
            "restart {} at {:.1} s: read {} from {} (peak {} over 100 ms, burst {:.2} s); healthy after {} ms",
            r.node,
            r.t_s,
            fmt_bytes(r.read_bytes),
            r.devices.join("+"),
            fmt_rate(r.read_peak_mib_s),
            r.read_burst_s,
            r.healthy_ms.map(|h| format!("{h:.0}")).unwrap_or("-".into())
        );
    }
    for h in &s.headline {
        let _ = writeln!(out, "{h}");
    }
    out
}

/// Header of `rates.csv`.
pub const RATES_HEADER: &str = "t_ns,window_ns,device,read_mib_s,write_mib_s,read_iops,write_iops,flushes_per_s,util_pct,r_await_ms,w_await_ms,in_flight_max";

/// Writes `rates.csv`: per device and window, rates derived from the raw counters (the
/// window's share of each counter delta, as everywhere in the report). `t_ns` is the
/// window start; awaits are empty in windows without completed I/O.
pub fn write_rates_csv(run: &Run, window_ns: u64, path: &Path) -> anyhow::Result<()> {
    use std::fmt::Write as _;
    let n = run.duration_ns.div_ceil(window_ns) as usize;
    let w_s = window_ns as f64 / 1e9;
    let mut out = String::with_capacity(n * run.disks.len() * 80 + 200);
    out.push_str(RATES_HEADER);
    out.push('\n');
    let sums = |d: &run::DiskRows, f: usize, scale: f64| {
        analysis::window_sums(&analysis::intervals(d, f, scale), window_ns, n)
    };
    for d in &run.disks {
        let rb = sums(d, ds::F_SECTORS_READ, analysis::SECTOR_BYTES);
        let wb = sums(d, ds::F_SECTORS_WRITTEN, analysis::SECTOR_BYTES);
        let ri = sums(d, ds::F_READS, 1.0);
        let wi = sums(d, ds::F_WRITES, 1.0);
        let rms = sums(d, ds::F_READ_MS, 1.0);
        let wms = sums(d, ds::F_WRITE_MS, 1.0);
        let io = sums(d, ds::F_IO_MS, 1.0);
        let fl = analysis::has_field(d, ds::F_FLUSHES).then(|| sums(d, ds::F_FLUSHES, 1.0));
        let mut inflight = vec![0u64; n];
        for (t, r) in d.t_ns.iter().zip(&d.f) {
            let k = ((t / window_ns) as usize).min(n.saturating_sub(1));
            if let Some(v) = r[ds::F_IN_FLIGHT] {
                inflight[k] = inflight[k].max(v);
            }
        }
        let await_ms = |ms: f64, ios: f64| {
            if ios > 0.0 {
                format!("{:.3}", ms / ios)
            } else {
                String::new()
            }
        };
        for k in 0..n {
            let _ = writeln!(
                out,
                "{},{window_ns},{},{:.3},{:.3},{:.1},{:.1},{},{:.1},{},{},{}",
                k as u64 * window_ns,
                d.name,
                rb[k] / MIB / w_s,
                wb[k] / MIB / w_s,
                ri[k] / w_s,
                wi[k] / w_s,
                fl.as_ref()
                    .map(|f| format!("{:.1}", f[k] / w_s))
                    .unwrap_or_default(),
                100.0 * io[k] / (w_s * 1e3),
                await_ms(rms[k], ri[k]),
                await_ms(wms[k], wi[k]),
                inflight[k],
            );
        }
    }
    std::fs::write(path, out).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))
}
