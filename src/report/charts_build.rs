//! Turns a run into a [`charts::Timeline`]: broker acks/s and ack latency on top, then per
//! device throughput (with the UI-average overlay), IOPS, in-flight and flushes/s, then
//! Dirty/Writeback memory and CPU, all on one time axis. The finest series the recording
//! holds go in as they are; the charts crate keeps min/max envelopes per pixel column.

use charts::{Marker, Panel, Series, Style, Timeline};
use collectors::diskstats as ds;

use super::analysis::{self, UiAverage, MIB};
use super::run::Run;
use super::{DeviceAnalysis, ReportOptions};

/// Events drawn as markers (the others stay in events.jsonl and summary.json).
const MARKER_KINDS: [&str; 9] = [
    "broker_ready",
    "phase_start",
    "phase_end",
    "interrupted",
    "error",
    "device_gone",
    "device_back",
    "device_appeared",
    "command_exit",
];

const WRITE: &str = "#d62728";
const READ: &str = "#1f77b4";

fn series(label: &str, t: Vec<f64>, v: Vec<f64>, style: Style, color: &str) -> Series {
    Series {
        label: label.into(),
        t_s: t,
        v,
        style,
        color: Some(color.into()),
    }
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

fn scaled(mut s: (Vec<f64>, Vec<f64>), k: f64) -> (Vec<f64>, Vec<f64>) {
    s.1.iter_mut().for_each(|x| *x *= k);
    s
}

pub fn timeline(run: &Run, analyses: &[DeviceAnalysis], o: &ReportOptions) -> Timeline {
    let end_s = run.duration_ns as f64 / 1e9;
    let ui_label = format!("{:.0} s UI average", o.ui_window_ns as f64 / 1e9);
    let mut panels = vec![];
    const ROLE_COLORS: [&str; 5] = ["#2ca02c", "#1f77b4", "#9467bd", "#ff7f0e", "#8c564b"];
    let mut rate_series = vec![];
    let mut lat_series = vec![];
    for (i, (role, l)) in run.load.iter().enumerate() {
        let color = ROLE_COLORS[i % ROLE_COLORS.len()];
        let t: Vec<f64> = l.t_ns.iter().map(|&t| t as f64 / 1e9).collect();
        if let (Some(ops), Some(w)) = (l.col("ops"), l.col("window_ns")) {
            // A window much shorter than the others (the first or last, clipped to the
            // load) gives no meaningful rate: 169 acks in 0.3 ms is not 560k acks/s.
            let mut ws: Vec<f64> = w.to_vec();
            ws.sort_by(|a, b| a.total_cmp(b));
            let typical = ws.get(ws.len() / 2).copied().unwrap_or(0.0);
            let v = ops
                .iter()
                .zip(w)
                .map(|(a, w)| {
                    if *w >= typical / 2.0 {
                        a / (w / 1e9)
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
        }
        for (c, label) in [("lat_p50_us", "p50"), ("lat_p99_us", "p99")] {
            if let Some(v) = l.col(c) {
                if v.iter().any(|x| x.is_finite()) {
                    let style = if label == "p50" {
                        Style::Line
                    } else {
                        Style::DashedLine
                    };
                    lat_series.push(series(
                        &format!("{role} {label}"),
                        t.clone(),
                        v.to_vec(),
                        style,
                        color,
                    ));
                }
            }
        }
    }
    if !rate_series.is_empty() {
        panels.push(Panel {
            title: "broker operations/s (acks, messages, requests per role)".into(),
            y_label: "ops/s".into(),
            series: rate_series,
            y_min_zero: true,
        });
    }
    if !lat_series.is_empty() {
        panels.push(Panel {
            title: "operation latency per window (ack, reply, end to end)".into(),
            y_label: "us".into(),
            series: lat_series,
            y_min_zero: true,
        });
    }
    for (d, a) in run.disks.iter().zip(analyses) {
        // Idle devices (nothing read or written) get no panels of their own.
        if a.summary.write.bytes == 0.0 && a.summary.read.bytes == 0.0 {
            continue;
        }
        let n = &d.name;
        let w = scaled(analysis::rate_series(&analysis::write_bytes(d)), 1.0 / MIB);
        let r = scaled(analysis::rate_series(&analysis::read_bytes(d)), 1.0 / MIB);
        let mut tp = vec![series("write", w.0, w.1, Style::Envelope, WRITE)];
        tp.push(ui_overlay(
            &format!("write, {ui_label}"),
            &a.ui_write,
            end_s,
            WRITE,
        ));
        if a.summary.read.bytes > 0.0 {
            tp.push(series("read", r.0, r.1, Style::Envelope, READ));
            tp.push(ui_overlay(
                &format!("read, {ui_label}"),
                &a.ui_read,
                end_s,
                READ,
            ));
        }
        panels.push(Panel {
            title: format!("{n} throughput MiB/s"),
            y_label: "MiB/s".into(),
            series: tp,
            y_min_zero: true,
        });
        let wi = analysis::rate_series(&analysis::intervals(d, ds::F_WRITES, 1.0));
        let ri = analysis::rate_series(&analysis::intervals(d, ds::F_READS, 1.0));
        panels.push(Panel {
            title: format!("{n} IOPS"),
            y_label: "IO/s".into(),
            series: vec![
                series("write", wi.0, wi.1, Style::Envelope, WRITE),
                series("read", ri.0, ri.1, Style::Envelope, READ),
            ],
            y_min_zero: true,
        });
        let inf = analysis::gauge_series(d, ds::F_IN_FLIGHT);
        panels.push(Panel {
            title: format!("{n} in flight"),
            y_label: "I/Os".into(),
            series: vec![series(
                "in flight",
                inf.0,
                inf.1,
                Style::Envelope,
                "#9467bd",
            )],
            y_min_zero: true,
        });
        if analysis::has_field(d, ds::F_FLUSHES) {
            let f = analysis::rate_series(&analysis::intervals(d, ds::F_FLUSHES, 1.0));
            panels.push(Panel {
                title: format!("{n} flushes/s"),
                y_label: "flush/s".into(),
                series: vec![series("flushes/s", f.0, f.1, Style::Envelope, "#8c564b")],
                y_min_zero: true,
            });
        }
    }
    if let Some(m) = &run.mem {
        let t: Vec<f64> = m.t_ns.iter().map(|&t| t as f64 / 1e9).collect();
        let mut s = vec![];
        for (c, label, color) in [
            ("dirty_kib", "Dirty", "#e377c2"),
            ("writeback_kib", "Writeback", "#17becf"),
        ] {
            if let Some(v) = m.col(c) {
                s.push(series(
                    label,
                    t.clone(),
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
        });
    }
    if let Some(c) = &run.cpu {
        if c.len() >= 2 {
            let names =
                &collectors::procstat::CPU_COLUMNS[..collectors::procstat::CPU_TICK_COLUMNS];
            let cols: Vec<&[f64]> = names.iter().filter_map(|n| c.col(n)).collect();
            if cols.len() == names.len() {
                let mut t = vec![];
                let mut busy = vec![];
                let mut iow = vec![];
                for k in 1..c.len() {
                    let d = |i: usize| cols[i][k] - cols[i][k - 1];
                    let tot: f64 = (0..8).map(d).sum();
                    t.push(c.t_ns[k] as f64 / 1e9);
                    if tot > 0.0 {
                        busy.push(100.0 * (tot - d(3) - d(4)) / tot);
                        iow.push(100.0 * d(4) / tot);
                    } else {
                        busy.push(f64::NAN);
                        iow.push(f64::NAN);
                    }
                }
                panels.push(Panel {
                    title: "CPU % (all cores)".into(),
                    y_label: "%".into(),
                    series: vec![
                        series("busy", t.clone(), busy, Style::Line, "#7f7f7f"),
                        series("iowait", t, iow, Style::Line, "#bcbd22"),
                    ],
                    y_min_zero: true,
                });
            }
        }
    }
    let events = run
        .events
        .iter()
        .filter(|e| MARKER_KINDS.contains(&e.kind.as_str()))
        .map(|e| Marker {
            t_s: e.t_ns as f64 / 1e9,
            label: e.kind.clone(),
        })
        .collect();
    Timeline {
        title: format!(
            "diskpulse {}",
            run.dir.file_name().unwrap_or_default().to_string_lossy()
        ),
        x_range_s: (0.0, end_s),
        panels,
        events,
        width_px: 1600,
        panel_height_px: 170,
    }
}
