//! Turns a run into a [`charts::Timeline`]: broker acks/s and ack latency on top, then per
//! device throughput (with the UI-average overlay), IOPS, in-flight and flushes/s, then
//! Dirty/Writeback memory and CPU, all on one time axis. A run that also holds `probe.csv`
//! (`diskpulse probe` inside a recording) or `fsync.csv` (`diskpulse fsync`) gets their
//! latency panels under the broker's; a run without them simply has no such panels. The finest series the recording
//! holds go in as they are; the charts crate keeps min/max envelopes per pixel column.

use std::collections::BTreeMap;
use std::path::Path;

use charts::{Marker, Panel, Series, Style, Timeline};
use collectors::diskstats as ds;

use super::analysis::{self, UiAverage, MIB};
use super::run::{read_table_by, Run, Table};
use super::{DeviceAnalysis, ReportOptions};

/// Events drawn as markers (the others stay in events.jsonl and summary.json).
const MARKER_KINDS: [&str; 13] = [
    "broker_ready",
    "node_stop",
    "restart",
    "restart_ready",
    "broker_log",
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
    panels.extend(probe_panel(&run.dir));
    panels.extend(fsync_panel(&run.dir));
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
            label: match (e.detail["phase"].as_str(), e.detail["node"].as_str()) {
                (Some(p), _) if e.kind == "phase_start" => p.to_string(),
                (Some(p), _) if e.kind == "phase_end" => format!("{p} end"),
                (_, Some(n)) => format!("{} {n}", e.kind),
                _ => e.kind.clone(),
            },
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

/// `probe.csv` split by `direction` (`read`, `write`, `sync`); `None` when the run has no
/// probe (or the file cannot be read: the panel is then left out, the rest of the report
/// stands).
pub fn read_probe(dir: &Path) -> Option<BTreeMap<String, Table>> {
    let p = dir.join("probe.csv");
    if !p.exists() {
        return None;
    }
    read_table_by(&p, "direction")
        .ok()
        .filter(|m| m.values().any(|t| !t.is_empty()))
}

/// A probe latency column: `clat_*_us` (what the probe writes: completion latency, fio's
/// clat), or `lat_*_us` as other per-window files name it.
pub fn probe_lat<'a>(t: &'a Table, q: &str) -> Option<&'a [f64]> {
    t.col(&format!("clat_{q}_us"))
        .or_else(|| t.col(&format!("lat_{q}_us")))
}

fn direction_color(dir: &str) -> &'static str {
    match dir {
        "write" => WRITE,
        "read" => READ,
        _ => "#8c564b",
    }
}

fn probe_panel(dir: &Path) -> Option<Panel> {
    let probe = read_probe(dir)?;
    let mut s = vec![];
    for (direction, t) in &probe {
        let ts: Vec<f64> = t.t_ns.iter().map(|&t| t as f64 / 1e9).collect();
        for (q, style) in [("p50", Style::Line), ("p99", Style::DashedLine)] {
            if let Some(v) = probe_lat(t, q) {
                if v.iter().any(|x| x.is_finite()) {
                    s.push(series(
                        &format!("{direction} {q}"),
                        ts.clone(),
                        v.to_vec(),
                        style,
                        direction_color(direction),
                    ));
                }
            }
        }
    }
    (!s.is_empty()).then(|| Panel {
        title: "direct-I/O probe latency per window (completion; sync: the sync call)".into(),
        y_label: "us".into(),
        series: s,
        y_min_zero: true,
    })
}

/// One row of `fsync.csv`: one test (`diskpulse fsync`), its span on the run clock and
/// its per-op latency (writes + sync), µs. Latencies are NaN where the test did not run.
#[derive(Debug, Clone)]
pub struct FsyncRow {
    pub t_ns: u64,
    pub t_end_ns: u64,
    pub test: String,
    pub status: String,
    pub ops: f64,
    pub ops_per_s: f64,
    pub lat_p50_us: f64,
    pub lat_p99_us: f64,
    pub lat_max_us: f64,
    /// The fdatasync/fsync call alone (NaN for tests without one).
    pub sync_lat_p50_us: f64,
    pub sync_lat_p99_us: f64,
    pub reason: String,
}

/// Splits one CSV line; a field in double quotes may hold commas and `""`.
fn split_csv(line: &str) -> Vec<String> {
    let mut out = vec![];
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    out.push(cur);
    out
}

/// Reads `fsync.csv` by its header (columns it lacks are NaN or empty); empty when the run
/// has none. A row cut off by a crash (no newline, or too few fields) is left out.
pub fn read_fsync(dir: &Path) -> Vec<FsyncRow> {
    let Ok(text) = std::fs::read_to_string(dir.join("fsync.csv")) else {
        return vec![];
    };
    let mut lines = text.split_inclusive('\n').filter(|l| l.ends_with('\n'));
    let Some(header) = lines.next() else {
        return vec![];
    };
    let cols = split_csv(header.trim_end());
    let idx = |n: &str| cols.iter().position(|c| c == n);
    let mut rows = vec![];
    for line in lines {
        let f = split_csv(line.trim_end_matches(['\n', '\r']));
        if f.len() != cols.len() {
            continue;
        }
        let s = |n: &str| idx(n).map(|i| f[i].clone()).unwrap_or_default();
        let x = |n: &str| s(n).parse::<f64>().unwrap_or(f64::NAN);
        let (Ok(t0), Ok(t1)) = (s("t_ns").parse::<u64>(), s("t_end_ns").parse::<u64>()) else {
            continue;
        };
        rows.push(FsyncRow {
            t_ns: t0,
            t_end_ns: t1,
            test: s("test"),
            status: s("status"),
            ops: x("ops"),
            ops_per_s: x("ops_per_s"),
            lat_p50_us: x("lat_p50_us"),
            lat_p99_us: x("lat_p99_us"),
            lat_max_us: x("lat_max_us"),
            sync_lat_p50_us: x("sync_lat_p50_us"),
            sync_lat_p99_us: x("sync_lat_p99_us"),
            reason: s("reason"),
        });
    }
    rows
}

/// Each fsync test as a level line over its span (p50 solid, p99 dashed), broken between
/// tests: the table in report.html names them.
fn fsync_panel(dir: &Path) -> Option<Panel> {
    let rows = read_fsync(dir);
    let mut t = vec![];
    let (mut p50, mut p99) = (vec![], vec![]);
    for r in rows.iter().filter(|r| r.lat_p50_us.is_finite()) {
        for (ts, a, b) in [
            (r.t_ns as f64 / 1e9, r.lat_p50_us, r.lat_p99_us),
            (
                r.t_end_ns.max(r.t_ns) as f64 / 1e9,
                r.lat_p50_us,
                r.lat_p99_us,
            ),
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
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_fields_keep_their_commas() {
        assert_eq!(
            split_csv(r#"1,2,a,"cut short, by ""Ctrl-C""",x"#),
            vec!["1", "2", "a", r#"cut short, by "Ctrl-C""#, "x"]
        );
        assert_eq!(split_csv(""), vec![""]);
    }

    #[test]
    fn fsync_rows_by_header_and_without_a_cut_off_tail() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("fsync.csv"),
            "t_ns,t_end_ns,test,status,ops,secs,ops_per_s,lat_min_us,lat_mean_us,lat_p50_us,lat_p99_us,lat_p999_us,lat_max_us,sync_lat_min_us,sync_lat_mean_us,sync_lat_p50_us,sync_lat_p99_us,sync_lat_p999_us,sync_lat_max_us,reason\n\
             100,2000,one_8k.fdatasync,ok,500,1.0,500.0,1,2,3,4,5,6,1,1,2,3,4,5,\n\
             2000,2000,one_8k.open_direct,n/a,,,,,,,,,,,,,,,,\"O_DIRECT refused, EINVAL\"\n\
             3000,4000,two",
        )
        .unwrap();
        let r = read_fsync(d.path());
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].test, "one_8k.fdatasync");
        assert_eq!(r[0].lat_p99_us, 4.0);
        assert_eq!(r[0].sync_lat_p50_us, 2.0);
        assert!(r[1].lat_p50_us.is_nan());
        assert_eq!(r[1].reason, "O_DIRECT refused, EINVAL");
        assert!(read_fsync(&d.path().join("none")).is_empty());
    }
}
