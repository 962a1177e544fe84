//! The trace section of report.html (`--trace`, issue 11): summary.json's `trace` and
//! `broker_io` as tables: the broker's share of each device's bytes, sync-call latency
//! per process, per device and op the service/queue percentiles with biolatency's log2
//! histogram and the request sizes, the slowest calls and requests with what else was
//! going on at that ms. The marks are on the timeline above.

use std::fmt::Write as _;

use super::escape;
use super::format::*;
use ::format::summary::{Log2Bucket, Percentiles, Summary};

fn lat_cells(p: &Percentiles) -> Vec<Cell> {
    vec![
        n(num(p.count as f64, 0)),
        n(us(opt(p.p50_us))),
        n(us(opt(p.p90_us))),
        n(us(opt(p.p99_us))),
        n(us(opt(p.p999_us))),
        n(us(opt(p.max_us))),
    ]
}

/// A log2 histogram as `lo..hi: count` cells joined by line breaks, with a bar of `#`
/// scaled to the fullest bucket (biolatency's picture, as text).
fn hist(b: &[Log2Bucket], unit: &str, fmt: impl Fn(u64) -> String) -> String {
    let top = b.iter().map(|x| x.count).max().unwrap_or(0).max(1);
    let lines: Vec<String> = b
        .iter()
        .map(|x| {
            let bar = "#".repeat(((x.count * 30).div_ceil(top)) as usize);
            format!(
                "{:>8} .. {:<8} {unit} {:>7} {bar}",
                fmt(x.lo),
                fmt(x.hi),
                num(x.count as f64, 0)
            )
        })
        .collect();
    format!("<pre>{}</pre>", escape(&lines.join("\n")))
}

pub(super) fn broker_io(s: &mut String, summary: &Summary) {
    let Some(b) = &summary.broker_io else {
        return;
    };
    s.push_str("<h3>The broker's own I/O</h3>\n");
    s.push_str(
        "<p class=\"muted\">/proc/PID/io of the embedded servers every 10 ms (proc_io.csv): \
         write_bytes counts bytes when the server dirties them, the device when it writes them, \
         so the share is over the whole span sampled.</p>\n",
    );
    let rows: Vec<_> = b
        .devices
        .iter()
        .map(|d| {
            (
                None,
                vec![
                    t(d.device.clone()),
                    n(bytes(d.broker_write_bytes as f64)),
                    n(bytes(d.device_write_bytes)),
                    n(d.write_share_pct.map(pct).unwrap_or(NONE.into())),
                    n(bytes(d.broker_read_bytes as f64)),
                    n(bytes(d.device_read_bytes)),
                    n(d.read_share_pct.map(pct).unwrap_or(NONE.into())),
                ],
            )
        })
        .collect();
    table(
        s,
        &[
            "device",
            "#broker wrote",
            "#device wrote",
            "#share",
            "#broker read",
            "#device read",
            "#share",
        ],
        &rows,
    );
    let rows: Vec<_> = b
        .processes
        .iter()
        .map(|p| {
            (
                None,
                vec![
                    t(format!("{} (pid {})", p.comm, p.pid)),
                    n(secs(p.sampled_s)),
                    n(bytes(p.write_bytes as f64)),
                    n(bytes(p.read_bytes as f64)),
                    n(bytes(p.cancelled_write_bytes as f64)),
                    n(bytes(p.wchar as f64)),
                    n(num(p.syscw as f64, 0)),
                    n(rate(p.write_peak_mib_s_100ms)),
                ],
            )
        })
        .collect();
    table(
        s,
        &[
            "process",
            "#sampled",
            "#write_bytes",
            "#read_bytes",
            "#cancelled",
            "#wchar",
            "#syscw",
            "#write peak 100 ms",
        ],
        &rows,
    );
}

#[allow(
    clippy::too_many_lines,
    reason = "the trace section's tables in the order the page shows them"
)]
pub(super) fn trace(s: &mut String, summary: &Summary) {
    let Some(x) = &summary.trace else {
        return;
    };
    s.push_str("<h3>Traced sync calls and block requests</h3>\n");
    let _ = writeln!(s, "<p class=\"muted\">{}</p>", escape(&x.source));
    if let Some(l) = &x.lost_line {
        let _ = writeln!(s, "<p class=\"notice failure\">{}</p>", escape(l));
    }
    if !x.lines.is_empty() {
        s.push_str("<div class=\"headline\">\n");
        for l in x.lines.iter().filter(|l| Some(*l) != x.lost_line.as_ref()) {
            let _ = writeln!(s, "<p>{}</p>", escape(l));
        }
        s.push_str("</div>\n");
    }
    if !x.fsync.is_empty() {
        let rows: Vec<_> = x
            .fsync
            .iter()
            .map(|p| {
                let kinds: Vec<String> =
                    p.by_call.iter().map(|(k, c)| format!("{c} {k}")).collect();
                let mut cells = vec![
                    t(format!("{} (pid {})", p.comm, p.pid)),
                    t(kinds.join(", ")),
                ];
                cells.extend(lat_cells(&p.latency));
                cells.push(n(num(p.errors as f64, 0)));
                cells.push(n(secs(p.total_s)));
                (None, cells)
            })
            .collect();
        s.push_str("<h4>Sync calls per process</h4>\n");
        table(
            s,
            &[
                "process",
                "calls",
                "#n",
                "#p50",
                "#p90",
                "#p99",
                "#p99.9",
                "#max",
                "#failed",
                "#time in calls",
            ],
            &rows,
        );
    }
    if !x.requests_by_op.is_empty() {
        let rows: Vec<_> = x
            .requests_by_op
            .iter()
            .map(|g| {
                let mut cells = vec![
                    t(g.device.clone()),
                    t(g.op.clone()),
                    n(bytes(g.bytes as f64)),
                ];
                cells.extend(lat_cells(&g.service));
                cells.push(n(us(opt(g.queue.p99_us))));
                cells.push(n(format!("{} / {}", g.fua, g.preflush)));
                cells.push(n(num(g.errors as f64, 0)));
                (None, cells)
            })
            .collect();
        s.push_str(
            "<h4>Block requests per device and op (service time: issue to completion)</h4>\n",
        );
        table(
            s,
            &[
                "device",
                "op",
                "#bytes",
                "#n",
                "#p50",
                "#p90",
                "#p99",
                "#p99.9",
                "#max",
                "#queued p99",
                "#FUA / PREFLUSH",
                "#failed",
            ],
            &rows,
        );
        s.push_str(
            "<h4>Service time (µs, log2 buckets) and request size (bytes, log2 buckets)</h4>\n",
        );
        let rows: Vec<_> = x
            .requests_by_op
            .iter()
            .map(|g| {
                (
                    None,
                    vec![
                        t(format!("{} {}", g.device, g.op)),
                        Cell::H(hist(&g.service_hist_us, "us", |v| num(v as f64, 0))),
                        Cell::H(hist(&g.size_hist_bytes, "B", |v| bytes(v as f64))),
                    ],
                )
            })
            .collect();
        table(s, &["device op", "service time", "size"], &rows);
    }
    if !x.slowest_fsyncs.is_empty() {
        let rows: Vec<_> = x
            .slowest_fsyncs
            .iter()
            .map(|c| {
                (
                    None,
                    vec![
                        n(secs(c.t_s)),
                        n(format!("{} ms", sig(c.dur_ms))),
                        t(format!("{} (pid {}, tid {})", c.comm, c.pid, c.tid)),
                        t(c.call.clone()),
                        t(c.file.clone()),
                        n(c.ret.to_string()),
                        t(c.at.line.clone()),
                    ],
                )
            })
            .collect();
        s.push_str("<h4>The slowest sync calls, and what else was going on then</h4>\n");
        table(
            s,
            &[
                "#start",
                "#took",
                "process",
                "call",
                "file",
                "#ret",
                "at that ms",
            ],
            &rows,
        );
    }
    if !x.slowest_requests.is_empty() {
        let rows: Vec<_> = x
            .slowest_requests
            .iter()
            .map(|r| {
                (
                    None,
                    vec![
                        n(secs(r.t_s)),
                        n(format!("{} ms", sig(r.service_ms))),
                        n(r.queue_ms
                            .map(|q| format!("{} ms", sig(q)))
                            .unwrap_or(NONE.into())),
                        t(format!("{} {} {}", r.device, r.op, r.flags)),
                        n(bytes(r.bytes as f64)),
                        n(r.sector.to_string()),
                        t(r.comm.clone()),
                        t(r.at.line.clone()),
                    ],
                )
            })
            .collect();
        s.push_str("<h4>The slowest block requests, and what else was going on then</h4>\n");
        table(
            s,
            &[
                "#issued",
                "#service",
                "#queued",
                "request",
                "#bytes",
                "#sector",
                "issued by",
                "at that ms",
            ],
            &rows,
        );
    }
}
