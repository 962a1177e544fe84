//! The devices: their queue attributes, per-window peaks and hidden factor, bursts.

use crate::run::Run;
use crate::{DeviceSummary, Direction, Summary};
use std::fmt::Write as _;

use super::escape;
use super::format::*;

/// The scheduler in use: the bracketed entry of sysfs `scheduler` ("none [mq-deadline]").
pub(super) fn active_scheduler(raw: &str) -> String {
    match (raw.find('['), raw.find(']')) {
        (Some(a), Some(b)) if b > a => raw[a + 1..b].to_string(),
        _ => raw.to_string(),
    }
}

pub(super) fn devices(s: &mut String, run: &Run, summary: &Summary) {
    s.push_str("<h3>Devices</h3>\n");
    let meta_devs = &run.meta.devices;
    // The report's order (`report::order`: the devices asked about, then what lies under
    // them), then a device meta.json names that has no row at all. One that has rows but
    // is not in the summary was left out by `report --device`.
    let mut names: Vec<String> = summary.devices.iter().map(|d| d.name.clone()).collect();
    for d in meta_devs {
        if !names.contains(&d.name) && !run.disks.iter().any(|x| x.name == d.name) {
            names.push(d.name.clone());
        }
    }
    if names.is_empty() {
        s.push_str("<p class=\"muted\">No devices recorded.</p>\n");
        return;
    }
    let rows: Vec<_> = names
        .iter()
        .map(|name| {
            let m = meta_devs.iter().find(|d| &d.name == name);
            let sd = summary.devices.iter().find(|d| &d.name == name);
            let qs = |k: &str| m.and_then(|m| m.queue.get(k)).map(|v| v.trim().to_string());
            let yes_no = |k: &str| match qs(k).as_deref() {
                Some("1") => "yes".to_string(),
                Some("0") => "no".to_string(),
                Some(v) => v.to_string(),
                None => NONE.into(),
            };
            let model = [qs("vendor"), qs("model")]
                .into_iter()
                .flatten()
                .filter(|v| !v.is_empty())
                .collect::<Vec<_>>()
                .join(" ");
            let size = qs("size_sectors")
                .and_then(|v| v.parse::<f64>().ok())
                .map(|x| bytes(x * 512.0))
                .unwrap_or_else(|| NONE.into());
            let mut why = m
                .and_then(|m| m.why.clone())
                .or_else(|| sd.and_then(|d| d.why.clone()))
                .unwrap_or_default();
            if let Some(p) = m.and_then(|m| m.parent.as_deref()) {
                let _ = write!(why, " (on {p})");
            }
            if let Some(b) = qs("loop_backing_file") {
                let _ = write!(why, " (backing file {b})");
            }
            let idle = sd.is_some_and(|d| d.write.bytes == 0.0 && d.read.bytes == 0.0);
            vec![
                t(name.clone()),
                n(m.map(|m| format!("{}:{}", m.major, m.minor))
                    .unwrap_or_else(|| NONE.into())),
                t(if idle { format!("{why} (idle)") } else { why }),
                t(qs("write_cache").unwrap_or_else(|| NONE.into())),
                t(yes_no("fua")),
                t(yes_no("rotational")),
                t(qs("scheduler")
                    .map(|v| active_scheduler(&v))
                    .unwrap_or_else(|| NONE.into())),
                t(if model.is_empty() { NONE.into() } else { model }),
                n(size),
                n(sd.map(|d| pct(d.util_pct)).unwrap_or_else(|| NONE.into())),
                n(sd.map(|d| num(d.max_in_flight, 0))
                    .unwrap_or_else(|| NONE.into())),
                n(sd.and_then(|d| d.flushes)
                    .map(|x| num(x, 0))
                    .unwrap_or_else(|| NONE.into())),
            ]
        })
        .map(|r| (None, r))
        .collect();
    table(
        s,
        &[
            "device",
            "#maj:min",
            "why recorded",
            "write_cache",
            "fua",
            "rotational",
            "scheduler",
            "model",
            "#size",
            "#busy (io_ms)",
            "#max in flight",
            "#flushes",
        ],
        &rows,
    );
}

pub(super) fn windows(s: &mut String, summary: &Summary) {
    let ui = secs(summary.ui_window_s);
    let _ = writeln!(
        s,
        "<h3>Per-window figures</h3>\n<p class=\"muted\">Peaks are the highest rate over aligned \
         windows of that width; the UI average is the highest {ui} average (what an array's UI \
         draws); the hidden factor is the 10 ms peak over it.</p>"
    );
    let mut rows = vec![];
    let mut notes = vec![];
    for d in &summary.devices {
        for (label, x) in [("write", &d.write), ("read", &d.read)] {
            if label == "read" && x.bytes == 0.0 {
                continue;
            }
            rows.push((None, window_row(d, label, x)));
            if let (false, Some(p)) = (x.bunched.is_empty(), &x.service_peak_mib_s) {
                notes.push(format!(
                    "* {} {label}: the {} completion peak(s) are completion bunching: I/Os that \
                     waited in the device completed together, so their bytes land in one window; \
                     not a rate the device moved. Counted over their service time: {} at 1 ms, \
                     {} at 10 ms, {} at 100 ms.",
                    d.name,
                    x.bunched.join(", "),
                    rate(p.p1ms),
                    rate(p.p10ms),
                    rate(p.p100ms)
                ));
            }
        }
    }
    if rows.is_empty() {
        s.push_str("<p class=\"muted\">No devices recorded.</p>\n");
        return;
    }
    let ui_head = format!("#UI avg ({ui})");
    table(
        s,
        &[
            "device",
            "dir",
            "#total",
            "#I/Os",
            "#mean",
            "#peak 1 ms",
            "#peak 10 ms",
            "#peak 100 ms",
            "#peak 1 s",
            &ui_head,
            "#hidden factor",
            "#peak IOPS (10 ms)",
            "#await",
        ],
        &rows,
    );
    for l in notes {
        let _ = writeln!(s, "<p class=\"muted bunching\">{}</p>", escape(&l));
    }
}

fn window_row(d: &DeviceSummary, label: &str, x: &Direction) -> Vec<Cell> {
    let peak = |v: f64, width: &str| {
        if x.bunched.iter().any(|b| b == width) {
            format!("{}*", rate(v))
        } else {
            rate(v)
        }
    };
    let name = match crate::order::label_of(d) {
        Some(l) => format!("{} ({l})", d.name),
        None => d.name.clone(),
    };
    vec![
        t(name),
        t(label),
        n(bytes(x.bytes)),
        n(num(x.ios, 0)),
        n(rate(x.mean_mib_s)),
        n(peak(x.peak_mib_s.p1ms, "1ms")),
        n(peak(x.peak_mib_s.p10ms, "10ms")),
        n(peak(x.peak_mib_s.p100ms, "100ms")),
        n(peak(x.peak_mib_s.p1s, "1s")),
        n(rate(x.ui_average_mib_s)),
        n(x.hidden_factor
            .filter(|h| h.is_finite())
            .map(|h| format!("{}x", sig(h)))
            .unwrap_or_else(|| NONE.into())),
        n(per_s(x.peak_iops_10ms, "IO")),
        n(x.await_ms
            .map(|a| us(a * 1e3))
            .unwrap_or_else(|| NONE.into())),
    ]
}

/// Rows shown per burst table; the rest are in summary.json.
const MAX_BURST_ROWS: usize = 200;

pub(super) fn bursts(s: &mut String, summary: &Summary) {
    s.push_str("<h3>Bursts</h3>\n");
    let mut any = false;
    for d in &summary.devices {
        for (label, x) in [("write", &d.write), ("read", &d.read)] {
            let b = &x.bursts;
            if b.count == 0 {
                if x.bytes > 0.0 {
                    any = true;
                    let line = format!(
                        "{} {label}: steady at {}, no bursts.",
                        d.name,
                        rate(x.mean_mib_s)
                    );
                    let _ = writeln!(s, "<h4>{}</h4>", escape(&line));
                }
                continue;
            }
            any = true;
            let mut line = format!("{} {label}: {} burst(s)", d.name, b.count);
            // A period from 3 bursts on, its regularity from 4 (analysis's rule).
            if let Some(p) = b.period_s {
                let _ = write!(line, " every {}", secs(p));
                if let Some(cv) = b.period_cv {
                    let _ = write!(
                        line,
                        " ({}, cv {})",
                        if b.regular { "regular" } else { "irregular" },
                        sig(cv)
                    );
                }
            }
            let _ = write!(
                line,
                "; {} per burst over {} on average; {} of the {label} bytes. Busy: 10 ms bins above {}.",
                bytes(opt(b.mean_bytes)),
                us(opt(b.mean_duration_ms) * 1e3),
                pct(100.0 * b.share_of_bytes),
                rate(b.threshold_mib_s)
            );
            let _ = writeln!(s, "<h4>{}</h4>", escape(&line));
            let rows: Vec<_> = b
                .list
                .iter()
                .take(MAX_BURST_ROWS)
                .enumerate()
                .map(|(i, x)| {
                    (
                        None,
                        vec![
                            n(num(i as f64 + 1.0, 0)),
                            n(format!("{} s", num(x.start_s, 3))),
                            n(us(x.duration_ms * 1e3)),
                            n(bytes(x.bytes)),
                            n(rate(x.peak_mib_s)),
                        ],
                    )
                })
                .collect();
            table(
                s,
                &["##", "#start", "#duration", "#bytes", "#peak (10 ms)"],
                &rows,
            );
            if b.list.len() > MAX_BURST_ROWS {
                let _ = writeln!(
                    s,
                    "<p class=\"muted\">{} more in summary.json.</p>",
                    b.list.len() - MAX_BURST_ROWS
                );
            }
        }
    }
    if !any {
        s.push_str(
            "<p class=\"muted\">No bursts found on any device (and none wrote or read).</p>\n",
        );
    }
}
