//! Turns a run into a [`charts::Timeline`]: broker acks/s and ack latency on top, then per
//! device throughput (with the UI-average overlay), IOPS, in-flight and flushes/s, then
//! Dirty/Writeback memory and CPU, all on one time axis. A run that also holds `probe.csv`
//! (`diskpulse probe` inside a recording) or `fsync.csv` (`diskpulse fsync`) gets their
//! latency panels under the broker's; a run without them simply has no such panels. The finest series the recording
//! holds go in as they are; the charts crate keeps min/max envelopes per pixel column.

use charts::{Marker, Panel, Series, Shade, Style, Timeline};

use super::analysis::{UiAverage, MIB};
use super::run::Run;
use super::stream;
use super::{DeviceAnalysis, ReportOptions};
use format::csv::Table;
use format::events::{Body, Phase};
use format::fsync::FsyncRow;
use format::probe::ProbeRow;

/// Whether an event is drawn as a marker (the others stay in events.jsonl and
/// summary.json).
fn is_marker(b: &Body) -> bool {
    matches!(
        b,
        Body::BrokerReady(_)
            | Body::NodeStop(_)
            | Body::Restart(_)
            | Body::RestartReady(_)
            | Body::BrokerLog(_)
            | Body::PhaseStart(_)
            | Body::PhaseEnd(_)
            | Body::Interrupted(_)
            | Body::Error(_)
            | Body::DeviceGone(_)
            | Body::DeviceBack(_)
            | Body::DeviceAppeared(_)
            | Body::CommandExit(_)
            | Body::TraceLost(_)
            | Body::Trigger(_)
    )
}

const WRITE: &str = "#d62728";
const READ: &str = "#1f77b4";

fn series(label: &str, t: Vec<f64>, v: Vec<f64>, style: Style, color: &str) -> Series {
    Series {
        label: label.into(),
        t_s: t,
        v,
        style,
        color: Some(color.into()),
        folded: None,
    }
}

/// A counter's rate over each span between two rows where it changed, per second, as a
/// level over that span (two points): the node refreshes some counters only every few
/// seconds (the io and Raft ones on its statistics interval), so a rate between
/// consecutive polls would be 0, 0, ..., then the whole span's work in one spike. Where
/// the counter went down (the node restarted) or a value is missing, a gap (NaN) and the
/// next span starts there; after the last change nothing is drawn (not yet known).
/// (`report::nodes`' `rate` takes a point per row: right for /varz and /proc/PID/io,
/// which move at every poll, not for counters that move every few seconds.)
fn counter_rates(t_ns: &[u64], v: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let (mut t, mut r) = (vec![], vec![]);
    let mut from: Option<(u64, f64)> = None;
    for (&tk, &vk) in t_ns.iter().zip(v) {
        let Some((t0, v0)) = from else {
            from = vk.is_finite().then_some((tk, vk));
            continue;
        };
        if !vk.is_finite() || vk < v0 {
            t.push(tk as f64 / 1e9);
            r.push(f64::NAN);
            from = vk.is_finite().then_some((tk, vk));
        } else if vk > v0 && tk > t0 {
            let rate = (vk - v0) / ((tk - t0) as f64 / 1e9);
            t.extend([t0 as f64 / 1e9, tk as f64 / 1e9]);
            r.extend([rate, rate]);
            from = Some((tk, vk));
        }
    }
    (t, r)
}

/// An embedded RabbitMQ node's own counters (rabbitmq_metrics.csv) as rates between
/// polls: the messages it took in, confirmed and delivered, and what its file handle
/// cache wrote and synced and its quorum queues committed, on the devices' time axis.
/// A series the node never moved is left out; a node with neither gets no panel.
fn rabbit_panels(rabbit: &std::collections::BTreeMap<String, Table>) -> Vec<Panel> {
    let mut out = vec![];
    for (node, tab) in rabbit {
        for (title, y, cols) in [
            (
                "messages/s",
                "msgs/s",
                [
                    ("messages_received", "received/s", "#1f77b4"),
                    ("messages_confirmed", "confirmed/s", "#ff7f0e"),
                    ("messages_delivered", "delivered/s", "#2ca02c"),
                ],
            ),
            (
                "its own writes, syncs and Raft commits/s",
                "/s",
                [
                    ("io_write_ops", "writes/s", "#d62728"),
                    ("io_sync_ops", "syncs/s", "#8c564b"),
                    ("raft_commit_index", "Raft commits/s", "#9467bd"),
                ],
            ),
        ] {
            let mut s = vec![];
            for (col, label, color) in cols {
                let Some(v) = tab.col(col) else { continue };
                let (t, r) = counter_rates(&tab.t_ns, v);
                if r.iter().any(|x| *x > 0.0) {
                    s.push(series(label, t, r, Style::Line, color));
                }
            }
            if !s.is_empty() {
                out.push(Panel {
                    title: format!("RabbitMQ {node}: {title} (its /metrics)"),
                    y_label: y.into(),
                    series: s,
                    y_min_zero: true,
                    y_scale: Default::default(),
                });
            }
        }
    }
    out
}

fn ui_overlay(label: &str, ui: &UiAverage, end_s: f64, color: &str) -> Series {
    let mut t = vec![];
    let mut v = vec![];
    for (i, &(t0, r)) in ui.series.iter().enumerate() {
        let t1 = if ui.windows == 0 {
            end_s
        } else {
            ui.series
                .get(i + 1)
                .map(|x| x.0)
                .unwrap_or(t0 + ui.window_s)
        };
        t.push(t0);
        v.push(r / MIB);
        t.push(t1);
        v.push(r / MIB);
    }
    series(label, t, v, Style::DashedLine, color)
}

/// The timeline of a run, its long series (the devices' 1 ms rates and in-flight, the
/// broker's own writes) folded into the plot's pixel columns as they are built ([`charts::Series::fold`]):
/// a series holds `columns` min/max/mean/count columns, not one point per row, so the
/// timeline of an hour takes what the timeline of a minute takes. Drawn, it is the
/// same picture [`timeline_points`] gives.
pub fn timeline(run: &Run, analyses: &[DeviceAnalysis], o: &ReportOptions) -> Timeline {
    build(run, analyses, o, true)
}

/// The timeline with every point of every series (nothing folded): what a page that
/// zooms needs, and the reference [`timeline`] is tested against. It holds ~180 bytes
/// per diskstats row (hours: gigabytes).
pub fn timeline_points(run: &Run, analyses: &[DeviceAnalysis], o: &ReportOptions) -> Timeline {
    build(run, analyses, o, false)
}

/// The width [`build`] draws at.
const WIDTH_PX: u32 = 1600;

/// How the pass over the rows of a run ending at `duration_ns` builds the devices' chart
/// series for [`timeline`]: folded into the plot's pixel columns (every point for a run
/// without a time axis).
pub(crate) fn fold_mode(duration_ns: u64) -> stream::ChartMode {
    let end_s = duration_ns as f64 / 1e9;
    if end_s > 0.0 {
        let (range, columns) = charts::plot_geometry(&Timeline {
            x_range_s: (0.0, end_s),
            width_px: WIDTH_PX,
            ..Default::default()
        });
        stream::ChartMode::Fold(range, columns)
    } else {
        stream::ChartMode::Points
    }
}

/// The devices' chart series from a pass of their own over the rows, in `analyses`' order.
fn device_charts(
    run: &Run,
    mode: stream::ChartMode,
    analyses: &[DeviceAnalysis],
) -> Vec<stream::DeviceCharts> {
    let plan = stream::Plan {
        duration_ns: run.duration_ns,
        charts: mode,
        ..stream::Plan::count_only()
    };
    // The run was read before: a file that no longer reads draws no device series.
    let pass = stream::pass(run.diskstats_files(), &plan).ok();
    analyses
        .iter()
        .map(|a| {
            pass.as_ref()
                .and_then(|p| {
                    let k = p.devices.iter().position(|d| d.name == a.summary.name)?;
                    Some(p.accs[k].charts.clone())
                })
                .unwrap_or_else(|| stream::DeviceCharts::new(mode))
        })
        .collect()
}

#[allow(
    clippy::too_many_lines,
    reason = "the timeline's panels in the order they are drawn, each from the same folded series"
)]
fn build(run: &Run, analyses: &[DeviceAnalysis], o: &ReportOptions, fold: bool) -> Timeline {
    let shades = burst_shades(run, analyses);
    let end_s = run.duration_ns as f64 / 1e9;
    // The plot's time axis and pixel columns; without a time axis (an empty run) the
    // axis comes from the points themselves, so nothing is folded.
    let geometry = (fold && end_s > 0.0).then(|| {
        charts::plot_geometry(&Timeline {
            x_range_s: (run.start_ns as f64 / 1e9, end_s),
            width_px: WIDTH_PX,
            ..Default::default()
        })
    });
    let fold = |s: Series| match geometry {
        Some((range, columns)) => s.fold(range, columns),
        None => s,
    };
    let ui_label = format!("{:.0} s UI average", o.ui_window_ns as f64 / 1e9);
    let mut panels = vec![];
    const ROLE_COLORS: [&str; 5] = ["#2ca02c", "#1f77b4", "#9467bd", "#ff7f0e", "#8c564b"];
    let mut rate_series = vec![];
    let mut lat_series = vec![];
    for (i, (role, rows)) in run.load.iter().enumerate() {
        let color = ROLE_COLORS[i % ROLE_COLORS.len()];
        // A window's value is drawn at the middle of the part the load ran in it.
        let n = rows.len();
        let t: Vec<f64> = rows
            .iter()
            .enumerate()
            .map(|(i, r)| {
                // The first window is clipped at its start, the last at its end.
                let from = if i == 0 && n > 1 {
                    r.t_ns + r.window_ns.saturating_sub(r.active_ns)
                } else {
                    r.t_ns
                };
                (from + r.active_ns / 2) as f64 / 1e9
            })
            .collect();
        // A window the load ran for much less than a whole one (the first or last)
        // gives no meaningful rate: 169 acks in 0.3 ms is not 560k acks/s.
        let v = rows
            .iter()
            .map(|r| {
                if r.active_ns >= r.window_ns / 2 {
                    r.ops_per_s()
                } else {
                    f64::NAN
                }
            })
            .collect();
        rate_series.push(series(
            &format!("{role} ops/s"),
            t.clone(),
            v,
            Style::Line,
            color,
        ));
        for (label, pick) in [
            (
                "p50",
                (|r: &format::load::LoadRow| r.lat_p50_us) as fn(&_) -> _,
            ),
            ("p99", |r| r.lat_p99_us),
        ] {
            let v: Vec<f64> = rows.iter().map(|r| pick(r).unwrap_or(f64::NAN)).collect();
            if v.iter().any(|x| x.is_finite()) {
                let style = if label == "p50" {
                    Style::Line
                } else {
                    Style::DashedLine
                };
                lat_series.push(series(
                    &format!("{role} {label}"),
                    t.clone(),
                    v,
                    style,
                    color,
                ));
            }
        }
    }
    if !rate_series.is_empty() {
        panels.push(Panel {
            title: "broker operations/s (acks, messages, requests per role)".into(),
            y_label: "ops/s".into(),
            series: rate_series,
            y_min_zero: true,
            y_scale: Default::default(),
        });
    }
    if !lat_series.is_empty() {
        panels.push(Panel {
            title: "operation latency per window (ack, reply, end to end)".into(),
            y_label: "us".into(),
            series: lat_series,
            y_min_zero: true,
            y_scale: Default::default(),
        });
    }
    panels.extend(rabbit_panels(&run.rabbit));
    panels.extend(run.probe.as_ref().and_then(probe_rate_panel));
    panels.extend(run.probe.as_ref().and_then(probe_panel));
    panels.extend(fsync_panel(&run.fsync));
    let summaries: Vec<_> = analyses.iter().map(|a| a.summary.clone()).collect();
    let broker = super::interference::broker_devices(&run.meta, &summaries);
    panels.extend(super::trace_charts::panels(run, &broker, geometry));
    // The devices' series: folded as the pass over the rows built them, or every point
    // from a pass of their own.
    let mode = match geometry {
        Some((range, columns)) => stream::ChartMode::Fold(range, columns),
        None => stream::ChartMode::Points,
    };
    let kept: Option<Vec<stream::DeviceCharts>> = match mode {
        stream::ChartMode::Fold(..) => analyses
            .iter()
            .map(|a| a.charts.clone().filter(|c| c.mode() == mode))
            .collect(),
        _ => None,
    };
    let device_charts = match kept {
        Some(c) => c,
        None => device_charts(run, mode, analyses),
    };
    for (a, c) in analyses.iter().zip(device_charts) {
        // Idle devices (nothing read or written) get no panels of their own.
        if a.summary.write.bytes == 0.0 && a.summary.read.bytes == 0.0 {
            continue;
        }
        let n = &a.summary.name;
        let mut tp = vec![c.write_mib_s.finish("write", Style::Envelope, WRITE)];
        tp.push(ui_overlay(
            &format!("write, {ui_label}"),
            &a.ui_write,
            end_s,
            WRITE,
        ));
        // The broker's own writes (proc_io.csv) on its devices' panels: what share of
        // this is the broker's, and when it dirtied what the device writes later.
        if broker.is_empty() || broker.contains(n) {
            tp.extend(super::procio::write_series(run, "#000000").map(fold));
        }
        if a.summary.read.bytes > 0.0 {
            tp.push(c.read_mib_s.finish("read", Style::Envelope, READ));
            tp.push(ui_overlay(
                &format!("read, {ui_label}"),
                &a.ui_read,
                end_s,
                READ,
            ));
        }
        let (title, y_scale) = throughput_axis(&a.summary);
        panels.push(Panel {
            title,
            y_label: "MiB/s".into(),
            series: tp,
            y_min_zero: true,
            y_scale,
        });
        panels.extend(ui_view_panel(a, &ui_label, end_s));
        let wi = c.write_iops.finish("write", Style::Envelope, WRITE);
        let ri = c.read_iops.finish("read", Style::Envelope, READ);
        panels.push(Panel {
            title: format!("{n} IOPS"),
            y_label: "IO/s".into(),
            series: vec![wi, ri],
            y_min_zero: true,
            y_scale: Default::default(),
        });
        panels.push(Panel {
            title: format!("{n} in flight"),
            y_label: "I/Os".into(),
            series: vec![c.in_flight.finish("in flight", Style::Envelope, "#9467bd")],
            y_min_zero: true,
            y_scale: Default::default(),
        });
        if a.summary.flushes.is_some() {
            panels.push(Panel {
                title: format!("{n} flushes/s"),
                y_label: "flush/s".into(),
                series: vec![c.flushes.finish("flushes/s", Style::Envelope, "#8c564b")],
                y_min_zero: true,
                y_scale: Default::default(),
            });
        }
    }
    if let Some(m) = &run.mem {
        let mut s = vec![];
        for (c, label, color) in [
            ("dirty_kib", "Dirty", "#e377c2"),
            ("writeback_kib", "Writeback", "#17becf"),
        ] {
            // Each row while the run is short; a long run's rows folded as they were read
            // (each window's lowest and highest value where seen: `report::fold`), so the
            // zoomable timeline, which takes this panel's points as they are, stays small.
            if let Some((t, v)) = m.points(c) {
                s.push(series(
                    label,
                    t.iter().map(|&t| t as f64 / 1e9).collect(),
                    v.iter().map(|x| x / 1024.0).collect(),
                    Style::Envelope,
                    color,
                ));
            }
        }
        panels.push(Panel {
            title: "page cache: Dirty and Writeback MiB".into(),
            y_label: "MiB".into(),
            series: s,
            y_min_zero: true,
            y_scale: Default::default(),
        });
    }
    if let Some(c) = &run.cpu {
        // Between consecutive rows, folded like the page cache's (`report::fold`).
        let pts = |name: &str| {
            let (t, v) = c.pct.points(name).unwrap_or_default();
            (t.iter().map(|&t| t as f64 / 1e9).collect::<Vec<f64>>(), v)
        };
        let (tb, busy) = pts(super::fold::CpuFolded::BUSY);
        let (ti, iow) = pts(super::fold::CpuFolded::IOWAIT);
        if c.rows >= 2 && !tb.is_empty() {
            panels.push(Panel {
                title: "CPU % (all cores)".into(),
                y_label: "%".into(),
                series: vec![
                    series("busy", tb, busy, Style::Line, "#7f7f7f"),
                    series("iowait", ti, iow, Style::Line, "#bcbd22"),
                ],
                y_min_zero: true,
                y_scale: Default::default(),
            });
        }
    }
    let events = run
        .events
        .iter()
        .filter(|e| is_marker(&e.body))
        .map(|e| Marker {
            t_s: e.t_ns as f64 / 1e9,
            label: match (&e.body, e.body.node()) {
                (Body::PhaseStart(Phase { phase: Some(p), .. }), _) => p.clone(),
                (Body::PhaseEnd(Phase { phase: Some(p), .. }), _) => format!("{p} end"),
                (_, Some(n)) => format!("{} {n}", e.kind()),
                (Body::Trigger(t), _) => format!(
                    "trigger {}{}",
                    t.trigger,
                    match (t.device.as_ref().or(t.role.as_ref()), t.value) {
                        (Some(d), Some(v)) => format!(" {d} {v:.0}"),
                        _ => String::new(),
                    }
                ),
                (Body::TraceLost(t), _) => format!("trace lost {} events", t.lost_events),
                _ => e.kind().to_string(),
            },
        })
        .collect();
    Timeline {
        title: format!(
            "diskpulse {}",
            run.dir.file_name().unwrap_or_default().to_string_lossy()
        ),
        x_range_s: (run.start_ns as f64 / 1e9, end_s),
        panels,
        events,
        shades,
        width_px: WIDTH_PX,
        panel_height_px: 170,
    }
}

/// A device's throughput panel title ("vda throughput MiB/s", with "(backing disk of
/// loop12)" for a device under the one asked about) and its y axis: linear over the data,
/// or, when a 1 ms or 10 ms completion peak is bunching ([`super::bunching`]), stopped at
/// the highest 1 ms rate the device moved counted over its I/Os' service time, the title
/// saying what it clipped (a spike that is not a rate must not flatten every burst).
fn throughput_axis(s: &format::summary::DeviceSummary) -> (String, charts::YScale) {
    let mut title = format!("{} throughput MiB/s", s.name);
    if let Some(l) = super::order::label_of(s) {
        title.push_str(&format!(" ({l})"));
    }
    let fine = |d: &format::summary::Direction| d.bunched.iter().any(|w| w == "1ms" || w == "10ms");
    if !(fine(&s.write) || fine(&s.read)) {
        return (title, charts::YScale::Linear);
    }
    // The top: each direction's 1 ms figure, the service-time one where it is bunching.
    let top = |d: &format::summary::Direction| {
        if fine(d) {
            d.service_peak_mib_s
                .as_ref()
                .map_or(d.peak_mib_s.p1ms, |p| p.p1ms.max(p.p10ms))
        } else {
            d.peak_mib_s.p1ms
        }
    };
    let cap = top(&s.write).max(if s.read.bytes > 0.0 {
        top(&s.read)
    } else {
        0.0
    });
    let raw = s.write.peak_mib_s.p1ms.max(s.read.peak_mib_s.p1ms);
    if !(cap.is_finite() && cap > 0.0) {
        return (title, charts::YScale::Linear);
    }
    title.push_str(&format!(
        "; axis stops at {}: completion bunching up to {} clipped",
        format::units::rate_mib_s(cap),
        format::units::rate_mib_s(raw)
    ));
    (title, charts::YScale::Capped { max: cap })
}

/// The title of a device's panel of the UI average against the burst finder's bins.
fn ui_view_title(name: &str, ui_label: &str, bin_ms: f64) -> String {
    format!("{name} write: the {ui_label} against {bin_ms:.0} ms windows (log axis)")
}

/// What an array UI shows next to what the device did (issue 23 item 8): the device's
/// write MiB/s in the burst finder's bins (10 ms; the highest bin of each group on a long
/// run) and the UI average, on a log axis from a decade under the UI average, so a 30 s
/// average 100x under its 10 ms bursts is a line two decades under them, not one on the
/// floor. None for a device that wrote nothing.
fn ui_view_panel(a: &DeviceAnalysis, ui_label: &str, end_s: f64) -> Option<Panel> {
    let w = &a.summary.write;
    let ui = w.ui_average_mib_s;
    if w.bytes == 0.0 || ui.is_nan() || ui <= 0.0 || a.write_bins.points.is_empty() {
        return None;
    }
    let b = &a.write_bins;
    let bin_ms = b.bin_ns as f64 / 1e6;
    let label = if b.group == 1 {
        format!("write, {bin_ms:.0} ms windows")
    } else {
        format!(
            "write, highest {bin_ms:.0} ms window of each {:.0} ms",
            bin_ms * b.group as f64
        )
    };
    let floor = 10f64.powi(ui.log10().floor() as i32 - 1);
    let (t, v): (Vec<f64>, Vec<f64>) = b.points.iter().copied().unzip();
    Some(Panel {
        title: ui_view_title(&a.summary.name, ui_label, bin_ms),
        y_label: "MiB/s (log)".into(),
        series: vec![
            series(&label, t, v, Style::Line, WRITE),
            ui_overlay(&format!("write, {ui_label}"), &a.ui_write, end_s, "#000000"),
        ],
        y_min_zero: false,
        y_scale: charts::YScale::Log { floor },
    })
}

/// The write bursts (summary.json `devices[].write.bursts.list`) of the broker's devices
/// ([`super::interference::broker_devices`]; every device's when the run does not say),
/// shaded on every panel: what the interference sentences call "inside a burst". A loop
/// device's backing disk is left out: it also carries the rest of the machine's writes.
fn burst_shades(run: &Run, analyses: &[DeviceAnalysis]) -> Vec<Shade> {
    let summaries: Vec<_> = analyses.iter().map(|a| a.summary.clone()).collect();
    let broker = super::interference::broker_devices(&run.meta, &summaries);
    analyses
        .iter()
        .filter(|a| broker.is_empty() || broker.contains(&a.summary.name))
        .flat_map(|a| &a.summary.write.bursts.list)
        .map(|b| Shade {
            t0_s: b.start_s,
            t1_s: b.start_s + b.duration_ms / 1e3,
        })
        .collect()
}

/// A probe latency quantile of a row: `p50`, `p90`, `p99`, `p999`, `max`, `mean`
/// (completion latency, fio's clat), µs; NaN where the window had no completion.
pub(crate) fn probe_lat(r: &ProbeRow, q: &str) -> f64 {
    match q {
        "mean" => r.clat_mean_us,
        "p50" => r.clat_p50_us,
        "p90" => r.clat_p90_us,
        "p99" => r.clat_p99_us,
        "p999" => r.clat_p999_us,
        "max" => r.clat_max_us,
        _ => None,
    }
    .unwrap_or(f64::NAN)
}

fn direction_color(dir: &str) -> &'static str {
    match dir {
        "write" => WRITE,
        "read" => READ,
        _ => "#8c564b",
    }
}

/// The probe's completions per second per direction, every window drawn (one in which
/// nothing completed at zero: a stall looks like a stall, not a ramp); a window the probe
/// ran for less than half of gives no rate.
fn probe_rate_panel(probe: &std::collections::BTreeMap<String, Vec<ProbeRow>>) -> Option<Panel> {
    let mut s = vec![];
    for (direction, rows) in probe {
        let ts: Vec<f64> = rows
            .iter()
            .map(|r| (r.t_ns + r.window_ns / 2) as f64 / 1e9)
            .collect();
        let v: Vec<f64> = rows
            .iter()
            .map(|r| {
                if r.active_ns >= r.window_ns / 2 && r.window_ns > 0 {
                    r.ios as f64 / (r.window_ns as f64 / 1e9)
                } else {
                    f64::NAN
                }
            })
            .collect();
        if v.iter().any(|x| x.is_finite()) {
            s.push(series(
                &format!("{direction} completions/s"),
                ts,
                v,
                Style::Line,
                direction_color(direction),
            ));
        }
    }
    (!s.is_empty()).then(|| Panel {
        title: "direct-I/O probe completions/s per window (0: nothing completed)".into(),
        y_label: "I/Os/s".into(),
        series: s,
        y_min_zero: true,
        y_scale: Default::default(),
    })
}

fn probe_panel(probe: &std::collections::BTreeMap<String, Vec<ProbeRow>>) -> Option<Panel> {
    let mut s = vec![];
    for (direction, rows) in probe {
        // A window's latency is drawn at the window's middle.
        let ts: Vec<f64> = rows
            .iter()
            .map(|r| (r.t_ns + r.window_ns / 2) as f64 / 1e9)
            .collect();
        for (q, style) in [("p50", Style::Line), ("p99", Style::DashedLine)] {
            let v: Vec<f64> = rows.iter().map(|r| probe_lat(r, q)).collect();
            if v.iter().any(|x| x.is_finite()) {
                s.push(series(
                    &format!("{direction} {q}"),
                    ts.clone(),
                    v,
                    style,
                    direction_color(direction),
                ));
            }
        }
    }
    (!s.is_empty()).then(|| Panel {
        title: "direct-I/O probe latency per window (completion; sync: the sync call)".into(),
        y_label: "us".into(),
        series: s,
        y_min_zero: true,
        y_scale: Default::default(),
    })
}

/// Each fsync test as a level line over its span (p50 solid, p99 dashed), broken between
/// tests: the table in report.html names them.
fn fsync_panel(rows: &[FsyncRow]) -> Option<Panel> {
    let mut t = vec![];
    let (mut p50, mut p99) = (vec![], vec![]);
    for r in rows.iter().filter(|r| r.lat(|l| l.p50).is_finite()) {
        let (a, b) = (r.lat(|l| l.p50), r.lat(|l| l.p99));
        for (ts, a, b) in [
            (r.t_ns as f64 / 1e9, a, b),
            (r.t_end_ns.max(r.t_ns) as f64 / 1e9, a, b),
            (r.t_end_ns.max(r.t_ns) as f64 / 1e9, f64::NAN, f64::NAN),
        ] {
            t.push(ts);
            p50.push(a);
            p99.push(b);
        }
    }
    if t.is_empty() {
        return None;
    }
    Some(Panel {
        title: "fsync tests: latency per op (write + sync), one level per test".into(),
        y_label: "us".into(),
        series: vec![
            series("p50", t.clone(), p50, Style::Line, "#17becf"),
            series("p99", t, p99, Style::DashedLine, "#17becf"),
        ],
        y_min_zero: true,
        y_scale: Default::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(t_ns: Vec<u64>, cols: &[(&str, Vec<f64>)]) -> Table {
        Table {
            columns: cols.iter().map(|(n, _)| n.to_string()).collect(),
            t_ns,
            cols: cols.iter().map(|(_, v)| v.clone()).collect(),
        }
    }

    #[test]
    fn a_counter_becomes_a_level_per_span_between_its_changes_and_a_restart_a_gap() {
        let s = 1_000_000_000;
        // Refreshed every 1 s, polled every 250 ms: one level over each second, not
        // zeros and a spike; then the node restarts (the counter drops) and counts again.
        let (t, r) = counter_rates(
            &[0, s / 4, s / 2, s, 5 * s / 4, 2 * s, 9 * s / 4, 3 * s],
            &[10.0, 10.0, 10.0, 510.0, 510.0, 1510.0, 3.0, 53.0],
        );
        assert_eq!(t, vec![0.0, 1.0, 1.0, 2.0, 2.25, 2.25, 3.0]);
        assert_eq!(&r[..4], &[500.0, 500.0, 1000.0, 1000.0]);
        assert!(r[4].is_nan(), "the counter went down: {}", r[4]);
        assert_eq!(&r[5..], &[66.66666666666667, 66.66666666666667]);
    }

    #[test]
    fn a_rabbitmq_node_gets_a_panel_for_what_moved_and_none_for_what_did_not() {
        let mut m = std::collections::BTreeMap::new();
        m.insert(
            "n1".to_string(),
            table(
                vec![0, 1_000_000_000, 2_000_000_000],
                &[
                    ("messages_received", vec![0.0, 500.0, 1500.0]),
                    ("messages_confirmed", vec![0.0, 0.0, 0.0]),
                    ("io_sync_ops", vec![f64::NAN, f64::NAN, f64::NAN]),
                ],
            ),
        );
        let p = rabbit_panels(&m);
        assert_eq!(
            p.len(),
            1,
            "only the messages panel has a series that moved"
        );
        assert_eq!(p[0].title, "RabbitMQ n1: messages/s (its /metrics)");
        let labels: Vec<&str> = p[0].series.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, ["received/s"]);
        assert_eq!(p[0].series[0].v, vec![500.0, 500.0, 1000.0, 1000.0]);
    }
}
