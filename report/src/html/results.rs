//! What ran on the devices: broker load per role, fsync tests, the direct-I/O probe,
//! memory and CPU.

use std::collections::BTreeMap;

use crate::analysis::MIB;
use crate::charts_build;
use crate::run::Run;
use crate::Summary;
use ::format::fsync::FsyncRow;
use ::format::probe::ProbeRow;
use std::fmt::Write as _;

use super::escape;
use super::format::*;

pub(super) fn load(s: &mut String, run: &Run, summary: &Summary) {
    if summary.load.is_empty() {
        return;
    }
    s.push_str("<h3>Broker load</h3>\n");
    let meta_roles = run.meta.load().map(|l| l.roles).unwrap_or_default();
    let rows: Vec<_> = summary
        .load
        .iter()
        .map(|(role, l)| {
            let m = meta_roles.iter().find(|r| &r.role == role);
            let lat = m.and_then(|m| m.lat_us.as_ref());
            (
                None,
                vec![
                    t(role.clone()),
                    n(m.and_then(|m| m.clients)
                        .map(|c| c.to_string())
                        .unwrap_or_else(|| NONE.into())),
                    n(num(l.ops as f64, 0)),
                    n(per_s(l.ops_per_s, "op")),
                    n(rate(if l.ops > 0 { l.mib_per_s } else { f64::NAN })),
                    n(num(l.errors as f64, 0)),
                    t(m.and_then(|m| m.latency_meaning.clone())
                        .unwrap_or_else(|| NONE.into())),
                    n(us(opt(lat.and_then(|l| l.p50)))),
                    n(us(opt(lat.and_then(|l| l.p99)))),
                    n(us(opt(l.worst_window_lat_p99_us))),
                    n(us(opt(l.lat_max_us))),
                    n(us(opt(l.worst_window_co_p99_us))),
                ],
            )
        })
        .collect();
    table(
        s,
        &[
            "role",
            "#clients",
            "#ops",
            "#rate",
            "#payload",
            "#errors",
            "latency is",
            "#p50 (run)",
            "#p99 (run)",
            "#worst 100 ms p99",
            "#max",
            "#worst p99 from intended start",
        ],
        &rows,
    );
}

/// Faults under the load (issue 9): one row each, from summary.json's `faults`.
pub(super) fn faults(s: &mut String, summary: &Summary) {
    if summary.faults.is_empty() {
        return;
    }
    s.push_str("<h3>Faults under the load</h3>\n");
    let ms = |x: Option<f64>| x.map(|v| num(v, 0)).unwrap_or_else(|| NONE.into());
    let rows: Vec<_> = summary
        .faults
        .iter()
        .map(|f| {
            (
                None,
                vec![
                    t(match &f.node {
                        Some(node) => format!("{} {node}", f.cause),
                        None => f.cause.clone(),
                    }),
                    n(num(f.start_s, 2)),
                    n(f.end_s.map(|e| num(e, 2)).unwrap_or_else(|| NONE.into())),
                    n(ms(f.outage_ms)),
                    n(ms(f.time_to_first_ack_ms)),
                    n(num(f.ops_lost as f64, 0)),
                    n(num(f.timeouts as f64, 0)),
                    n(num(f.errors_all_clients as f64, 0)),
                    n(f.recovered_s
                        .map(|r| num(r, 2))
                        .unwrap_or_else(|| NONE.into())),
                    t(f.clients.join(", ")),
                ],
            )
        })
        .collect();
    table(
        s,
        &[
            "fault",
            "#down at (s)",
            "#back at (s)",
            "#outage (ms)",
            "#first ack after (ms)",
            "#ops lost",
            "#of which timeouts",
            "#failed on all clients",
            "#recovered at (s)",
            "clients",
        ],
        &rows,
    );
}

pub(super) fn fsync(s: &mut String, rows: &[FsyncRow]) {
    if rows.is_empty() {
        return;
    }
    s.push_str(
        "<h3>fsync tests</h3>\n<p class=\"muted\">From fsync.csv (<code>diskpulse fsync</code> in \
         the recording): latency per op is the writes and the sync together.</p>\n",
    );
    let rows: Vec<_> = rows
        .iter()
        .map(|r| {
            (
                (r.status != "ok").then_some("lvl-info"),
                vec![
                    Cell::H(format!("<code>{}</code>", escape(&r.test))),
                    t(r.status.clone()),
                    n(format!("{} s", num(r.t_ns as f64 / 1e9, 3))),
                    n(if r.measured.is_some() {
                        secs(r.t_end_ns.saturating_sub(r.t_ns) as f64 / 1e9)
                    } else {
                        NONE.into()
                    }),
                    n(num(
                        r.measured.as_ref().map_or(f64::NAN, |m| m.ops as f64),
                        0,
                    )),
                    n(per_s(
                        r.measured.as_ref().map_or(f64::NAN, |m| m.ops_per_s),
                        "op",
                    )),
                    n(us(r.lat(|l| l.p50))),
                    n(us(r.lat(|l| l.p99))),
                    n(us(r.lat(|l| l.max))),
                    n(us(r.sync_lat(|l| l.p50))),
                    n(us(r.sync_lat(|l| l.p99))),
                    t(r.reason.clone()),
                ],
            )
        })
        .collect();
    table(
        s,
        &[
            "test",
            "status",
            "#start",
            "#took",
            "#ops",
            "#rate",
            "#p50",
            "#p99",
            "#max",
            "#sync call p50",
            "#sync call p99",
            "note",
        ],
        &rows,
    );
}

pub(super) fn probe(s: &mut String, p: &BTreeMap<String, Vec<ProbeRow>>) {
    s.push_str(
        "<h3>Direct-I/O probe</h3>\n<p class=\"muted\">From probe.csv (<code>diskpulse probe</code> \
         in the recording), all windows including ramp; latency is completion latency (sync: the \
         sync call).</p>\n",
    );
    let rows: Vec<_> = p
        .iter()
        .map(|(direction, tab)| {
            let lat = |q: &str| -> Vec<f64> {
                tab.iter()
                    .map(|r| charts_build::probe_lat(r, q))
                    .filter(|x| x.is_finite())
                    .collect()
            };
            let max = |v: Vec<f64>| v.into_iter().fold(f64::NAN, f64::max);
            let median = |mut v: Vec<f64>| {
                v.sort_by(|a, b| a.total_cmp(b));
                v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
            };
            let span_s = tab.iter().map(|r| r.active_ns).sum::<u64>() as f64 / 1e9;
            let ios = tab.iter().map(|r| r.ios).sum::<u64>() as f64;
            let bytes_sum = tab.iter().map(|r| r.bytes).sum::<u64>() as f64;
            // Sync rows count sync calls and move no data.
            let sync = direction == "sync";
            let data = |x: String| if sync { NONE.to_string() } else { x };
            (
                None,
                vec![
                    t(direction.clone()),
                    n(num(tab.len() as f64, 0)),
                    n(num(ios, 0)),
                    n(data(bytes(bytes_sum))),
                    n(per_s(ios / span_s, if sync { "sync" } else { "IO" })),
                    n(data(rate(bytes_sum / MIB / span_s))),
                    n(us(median(lat("p50")))),
                    n(us(max(lat("p99")))),
                    n(us(max(lat("max")))),
                ],
            )
        })
        .collect();
    table(
        s,
        &[
            "direction",
            "#windows",
            "#I/Os (syncs)",
            "#bytes",
            "#rate",
            "#throughput",
            "#median window p50",
            "#worst window p99",
            "#max",
        ],
        &rows,
    );
}

pub(super) fn memory_cpu(s: &mut String, summary: &Summary) {
    let mut parts = vec![];
    if let Some(m) = &summary.memory {
        parts.push(format!(
            "page cache: Dirty up to {}, Writeback up to {}",
            bytes(opt(m.dirty_max_mib) * MIB),
            bytes(opt(m.writeback_max_mib) * MIB)
        ));
    }
    if let Some(c) = &summary.cpu {
        parts.push(format!(
            "CPU (all cores, whole run): user {}, system {}, iowait {}, idle {}",
            pct(c.user_pct),
            pct(c.system_pct),
            pct(c.iowait_pct),
            pct(c.idle_pct)
        ));
    }
    if parts.is_empty() {
        return;
    }
    s.push_str("<h3>Memory and CPU</h3>\n<ul>\n");
    for p in parts {
        let _ = writeln!(s, "<li>{}</li>", escape(&p));
    }
    s.push_str("</ul>\n");
}
