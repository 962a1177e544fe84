//! The live `/metrics` page: Prometheus text format 0.0.4 (what node_exporter serves),
//! from a [`Snapshot`]. The burst finder and the hidden factor run here, on the HTTP
//! thread, over the copied 10 ms bins: the sampler never pays for them.

use std::fmt::Write;

use super::{Snapshot, DIRECTIONS, UI_WINDOW_BINS, WINDOWS_NS, WINDOW_LABELS};
use crate::export::names::{self, label, value, DISK_METRICS};
use report::analysis::{find_bursts, BurstParams};

/// Every metric family name the page can hold (the dashboard test checks its queries
/// against this list).
pub fn family_names() -> Vec<&'static str> {
    let mut v: Vec<&str> = DISK_METRICS.iter().map(|m| m.name).collect();
    v.extend([
        names::PEAK,
        names::BURSTS,
        names::BURST_PERIOD,
        names::HIDDEN,
        names::UI_AVERAGE,
        "diskpulse_history_seconds",
        "diskpulse_samples_total",
        "diskpulse_sample_interval_seconds",
        "diskpulse_recording_seconds",
    ]);
    v
}

fn head(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// Burst figures of one direction's history.
struct Derived {
    bursts: usize,
    period_s: Option<f64>,
    ui_bytes_per_s: f64,
    hidden: Option<f64>,
}

fn derive(hist: &std::collections::VecDeque<f32>) -> Derived {
    let p = BurstParams::default();
    let bins: Vec<f64> = hist.iter().map(|&b| b as f64).collect();
    let b = find_bursts(&bins, &p);
    let bin_s = p.bin_ns as f64 / 1e9;
    let ui = &bins[bins.len().saturating_sub(UI_WINDOW_BINS)..];
    let ui_rate = if ui.is_empty() {
        0.0
    } else {
        ui.iter().sum::<f64>() / (ui.len() as f64 * bin_s)
    };
    let peak10 = ui.iter().cloned().fold(0.0, f64::max) / bin_s;
    Derived {
        bursts: b.count,
        period_s: b.period_s,
        ui_bytes_per_s: ui_rate,
        hidden: (ui_rate > 0.0).then(|| peak10 / ui_rate),
    }
}

/// The page.
pub fn page(s: &Snapshot) -> String {
    let mut out = String::with_capacity(4096 + s.devices.len() * 4096);
    let devs: Vec<_> = s.devices.iter().filter(|d| !d.name.is_empty()).collect();
    for m in DISK_METRICS {
        let n = if m.counter { "counter" } else { "gauge" };
        let present: Vec<_> = devs
            .iter()
            .filter_map(|d| d.counters.get(m.field).map(|v| (d, v)))
            .collect();
        if present.is_empty() {
            continue;
        }
        head(&mut out, m.name, n, m.help);
        for (d, v) in present {
            let _ = writeln!(
                out,
                "{}{{device=\"{}\"}} {}",
                m.name,
                label(&d.name),
                value(v as f64 * m.scale)
            );
        }
    }
    head(
        &mut out,
        names::PEAK,
        "gauge",
        "Highest rate in bytes per second over aligned windows of `window` since the previous scrape (the start for the first); windows shorter than the sampling interval are left out.",
    );
    for d in &devs {
        for (dir, dname) in DIRECTIONS.iter().enumerate() {
            for (w, wl) in WINDOW_LABELS.iter().enumerate() {
                if WINDOWS_NS[w] < s.interval_ns {
                    continue;
                }
                let _ = writeln!(
                    out,
                    "{}{{device=\"{}\",direction=\"{dname}\",window=\"{wl}\"}} {}",
                    names::PEAK,
                    label(&d.name),
                    value(d.peak[dir][w])
                );
            }
        }
    }
    let derived: Vec<[Derived; 2]> = devs
        .iter()
        .map(|d| [derive(&d.history[0]), derive(&d.history[1])])
        .collect();
    type Pick = fn(&Derived) -> Option<f64>;
    let fams: [(&str, &str, Pick); 4] = [
        (
            names::BURSTS,
            "Write or read bursts (10 ms bins, report's burst finder) in the last diskpulse_history_seconds.",
            |x| Some(x.bursts as f64),
        ),
        (
            names::BURST_PERIOD,
            "Median time between burst starts in the last diskpulse_history_seconds, seconds (absent with fewer than two bursts).",
            |x| x.period_s,
        ),
        (
            names::UI_AVERAGE,
            "Mean rate in bytes per second over the last 30 s: what an array UI's 30 s average shows now.",
            |x| Some(x.ui_bytes_per_s),
        ),
        (
            names::HIDDEN,
            "Highest 10 ms rate in the last 30 s over the 30 s mean: how much the UI average hides (absent when idle).",
            |x| x.hidden,
        ),
    ];
    for (name, help, pick) in fams {
        head(&mut out, name, "gauge", help);
        for (d, dv) in devs.iter().zip(&derived) {
            for (dir, dname) in DIRECTIONS.iter().enumerate() {
                if let Some(v) = pick(&dv[dir]) {
                    let _ = writeln!(
                        out,
                        "{name}{{device=\"{}\",direction=\"{dname}\"}} {}",
                        label(&d.name),
                        value(v)
                    );
                }
            }
        }
    }
    let history_s = devs.iter().map(|d| d.history[1].len()).max().unwrap_or(0) as f64 * 0.01;
    head(
        &mut out,
        "diskpulse_history_seconds",
        "gauge",
        "Seconds of 10 ms bins the burst figures cover (at most 60).",
    );
    let _ = writeln!(out, "diskpulse_history_seconds {}", value(history_s));
    head(
        &mut out,
        "diskpulse_samples_total",
        "counter",
        "diskstats samples the recorder has taken.",
    );
    let _ = writeln!(out, "diskpulse_samples_total {}", s.samples);
    head(
        &mut out,
        "diskpulse_sample_interval_seconds",
        "gauge",
        "The diskstats sampling interval.",
    );
    let _ = writeln!(
        out,
        "diskpulse_sample_interval_seconds {}",
        value(s.interval_ns as f64 / 1e9)
    );
    head(
        &mut out,
        "diskpulse_recording_seconds",
        "gauge",
        "Run clock of the last sample: seconds since the recording started.",
    );
    let _ = writeln!(
        out,
        "diskpulse_recording_seconds {}",
        value(s.t_ns as f64 / 1e9)
    );
    out
}
