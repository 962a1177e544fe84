//! summary.json's `trace` (issue 11) from `fsync_calls.csv.gz` and
//! `block_requests.csv.gz`: per process the sync calls' latency percentiles, per device
//! and op the requests' service and queue time with biolatency's log2 histogram and the
//! request sizes in log2 buckets, the slowest 10 calls and requests with what else was
//! going on at that ms ([`super::trace_context`]), how the calls line up with the
//! broker devices' write bursts, and the events the kernel lost.
//!
//! Units: the files' ns become µs in percentiles and histograms (`_us`), ms in the
//! slow lists (`_ms`), s on the run clock (`t_s`). Percentiles come from HdrHistograms
//! (3 significant digits), as everywhere in summary.json.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;

use super::interference::{burst_spans, lat, percentiles};
use super::run::Run;
use super::trace_context::at_that_ms;
use crate::format::block_requests::BlockRequest;
use crate::format::fsync_calls::FsyncCall;
use crate::format::summary::{
    DeviceSummary, FsyncProcess, FsyncsInBursts, Log2Bucket, Percentiles, RequestGroup, SlowFsync,
    SlowRequest, TraceSummary,
};

/// How many of the slowest calls and requests summary.json lists.
pub const SLOWEST: usize = 10;

/// A sync call counts as starting a burst when it begins up to this long before it: the
/// device sees the writes a sync call causes after the call started.
pub const LEAD_NS: u64 = 20_000_000;

fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 24 * 3_600_000_000_000, 3)
        .expect("static histogram bounds are valid")
}

fn pct_of(values_ns: impl Iterator<Item = u64>) -> Percentiles {
    let mut h = hist();
    for v in values_ns {
        let _ = h.record(v.max(1));
    }
    percentiles(Some(&h))
}

/// Log2 buckets of `values` (any unit): bucket `[0, 1)`, then `[2^k, 2^(k+1))`, from the
/// first non-empty bucket to the last.
pub fn log2_buckets(values: impl Iterator<Item = u64>) -> Vec<Log2Bucket> {
    let mut counts = [0u64; 65];
    for v in values {
        let k = if v == 0 {
            0
        } else {
            64 - v.leading_zeros() as usize
        };
        counts[k] += 1;
    }
    let Some(first) = counts.iter().position(|&c| c > 0) else {
        return vec![];
    };
    let last = counts.iter().rposition(|&c| c > 0).unwrap_or(first);
    (first..=last)
        .map(|k| {
            let (lo, hi) = if k == 0 {
                (0, 1)
            } else {
                (
                    1u64 << (k - 1),
                    1u64.checked_shl(k as u32).unwrap_or(u64::MAX),
                )
            };
            Log2Bucket {
                lo,
                hi,
                count: counts[k],
            }
        })
        .collect()
}

fn fsync_processes(calls: &[FsyncCall]) -> Vec<FsyncProcess> {
    let mut by: BTreeMap<u32, Vec<&FsyncCall>> = BTreeMap::new();
    for c in calls {
        by.entry(c.pid).or_default().push(c);
    }
    let mut out: Vec<FsyncProcess> = by
        .into_iter()
        .map(|(pid, v)| {
            let mut by_call = BTreeMap::new();
            for c in &v {
                *by_call.entry(c.call.clone()).or_insert(0) += 1;
            }
            FsyncProcess {
                pid,
                comm: v[0].comm.clone(),
                by_call,
                errors: v.iter().filter(|c| c.ret < 0).count() as u64,
                total_s: v.iter().map(|c| c.dur_ns).sum::<u64>() as f64 / 1e9,
                latency: pct_of(v.iter().map(|c| c.dur_ns)),
            }
        })
        .collect();
    out.sort_by(|a, b| {
        b.latency
            .count
            .cmp(&a.latency.count)
            .then(a.pid.cmp(&b.pid))
    });
    out
}

fn request_groups(reqs: &[BlockRequest]) -> Vec<RequestGroup> {
    let mut by: BTreeMap<(String, String), Vec<&BlockRequest>> = BTreeMap::new();
    for r in reqs {
        by.entry((r.device.clone(), r.op.clone()))
            .or_default()
            .push(r);
    }
    let mut dev_bytes: BTreeMap<&str, u64> = BTreeMap::new();
    for r in reqs {
        *dev_bytes.entry(&r.device).or_default() += r.bytes;
    }
    let mut out: Vec<RequestGroup> = by
        .into_iter()
        .map(|((device, op), v)| RequestGroup {
            bytes: v.iter().map(|r| r.bytes).sum(),
            fua: v.iter().filter(|r| r.fua()).count() as u64,
            preflush: v.iter().filter(|r| r.preflush()).count() as u64,
            errors: v.iter().filter(|r| r.error != 0).count() as u64,
            service: pct_of(v.iter().map(|r| r.service_ns)),
            queue: pct_of(v.iter().filter_map(|r| r.queue_ns)),
            service_hist_us: log2_buckets(v.iter().map(|r| r.service_ns / 1000)),
            size_hist_bytes: log2_buckets(v.iter().map(|r| r.bytes)),
            device,
            op,
        })
        .collect();
    out.sort_by(|a, b| {
        let (x, y) = (dev_bytes[a.device.as_str()], dev_bytes[b.device.as_str()]);
        y.cmp(&x)
            .then(a.device.cmp(&b.device))
            .then(b.service.count.cmp(&a.service.count))
    });
    out
}

/// The sync calls against each broker device's write bursts (every device's when the
/// run does not say which are the broker's).
fn in_bursts(
    calls: &[FsyncCall],
    devices: &[DeviceSummary],
    broker: &[String],
) -> Vec<FsyncsInBursts> {
    devices
        .iter()
        .filter(|d| broker.is_empty() || broker.contains(&d.name))
        .filter(|d| !d.write.bursts.list.is_empty())
        .map(|d| {
            let spans = burst_spans(d);
            let holds = |(a, b): (u64, u64), t: u64| t + LEAD_NS >= a && t <= b;
            let calls_in = calls
                .iter()
                .filter(|c| spans.iter().any(|&s| holds(s, c.t_ns)))
                .count();
            let with = spans
                .iter()
                .filter(|&&s| calls.iter().any(|c| holds(s, c.t_ns)))
                .count();
            FsyncsInBursts {
                device: d.name.clone(),
                bursts: spans.len(),
                bursts_with_fsync: with,
                calls: calls.len(),
                calls_in_bursts: calls_in,
                lead_ms: LEAD_NS as f64 / 1e6,
                line: format!(
                    "{}: {with} of its {} write bursts hold a traced sync call (or start up to {} ms after one); {calls_in} of {} calls fell in bursts",
                    d.name,
                    spans.len(),
                    LEAD_NS / 1_000_000,
                    calls.len()
                ),
            }
        })
        .collect()
}

/// summary.json's `trace`; None when the run was not traced.
pub fn trace(run: &Run, devices: &[DeviceSummary], broker: &[String]) -> Option<TraceSummary> {
    let meta = run.meta.trace()?;
    let calls: &[FsyncCall] = run.fsync_calls.as_deref().unwrap_or(&[]);
    let reqs: &[BlockRequest] = run.block_requests.as_deref().unwrap_or(&[]);
    let who = if meta.pids.is_empty() && meta.comms.is_empty() {
        "every process".to_string()
    } else {
        let mut w: Vec<String> = meta.pids.iter().map(|p| format!("pid {p}")).collect();
        w.extend(meta.comms.iter().map(|c| format!("'{c}'")));
        w.join(", ")
    };
    // `record --trace-only` leaves one half's tracepoints off (meta.json `trace.events`).
    let traced = |group: &str| meta.events.iter().any(|e| e.starts_with(group));
    let calls_of = match traced("syscalls:") {
        true => format!("sync calls of {who}"),
        false => "sync calls not traced".to_string(),
    };
    let requests_of = match (traced("block:"), meta.devices.is_empty()) {
        (false, _) => "block requests not traced".to_string(),
        (true, true) => "block requests of every device".to_string(),
        (true, false) => format!("block requests of {}", meta.devices.join(", ")),
    };
    let source = format!(
        "{calls_of}; {requests_of}; {} clock, offset bound {} ns",
        meta.clock, meta.clock_offset_bound_ns
    );
    let lost = meta.stats.as_ref().map(|s| s.lost_events).unwrap_or(0);
    let lost_line = (lost > 0).then(|| {
        let when: Vec<String> = run
            .events
            .iter()
            .filter(|e| e.kind == "trace_lost")
            .map(|e| format!("{:.1} s", e.t_ns as f64 / 1e9))
            .collect();
        format!(
            "the trace lost {lost} events{}: the calls and requests below undercount",
            if when.is_empty() {
                String::new()
            } else {
                format!(" (at {})", when.join(", "))
            }
        )
    });
    let mut slow_calls: Vec<&FsyncCall> = calls.iter().collect();
    slow_calls.sort_by(|a, b| b.dur_ns.cmp(&a.dur_ns).then(a.t_ns.cmp(&b.t_ns)));
    let slowest_fsyncs = slow_calls
        .iter()
        .take(SLOWEST)
        .map(|c| SlowFsync {
            t_s: c.t_ns as f64 / 1e9,
            dur_ms: c.dur_ns as f64 / 1e6,
            pid: c.pid,
            tid: c.tid,
            comm: c.comm.clone(),
            call: c.call.clone(),
            file: c.file.clone(),
            ret: c.ret,
            at: at_that_ms(run, devices, broker, c.t_ns),
        })
        .collect();
    let mut slow_reqs: Vec<&BlockRequest> = reqs.iter().collect();
    slow_reqs.sort_by(|a, b| b.service_ns.cmp(&a.service_ns).then(a.t_ns.cmp(&b.t_ns)));
    let slowest_requests = slow_reqs
        .iter()
        .take(SLOWEST)
        .map(|r| SlowRequest {
            t_s: r.t_ns as f64 / 1e9,
            device: r.device.clone(),
            op: r.op.clone(),
            flags: r.flags.clone(),
            sector: r.sector,
            bytes: r.bytes,
            queue_ms: r.queue_ns.map(|q| q as f64 / 1e6),
            service_ms: r.service_ns as f64 / 1e6,
            error: r.error,
            comm: r.comm.clone(),
            at: at_that_ms(run, devices, broker, r.t_ns),
        })
        .collect();
    let fsync = fsync_processes(calls);
    let requests_by_op = request_groups(reqs);
    let fsyncs_in_bursts = in_bursts(calls, devices, broker);
    let mut lines: Vec<String> = lost_line.iter().cloned().collect();
    for p in &fsync {
        let kinds: Vec<String> = p.by_call.iter().map(|(k, n)| format!("{n} {k}")).collect();
        lines.push(format!(
            "{} (pid {}): {} sync calls ({}), p50 {}, p99 {}, max {}{}",
            p.comm,
            p.pid,
            p.latency.count,
            kinds.join(", "),
            lat(p.latency.p50_us),
            lat(p.latency.p99_us),
            lat(p.latency.max_us),
            if p.errors > 0 {
                format!(", {} failed", p.errors)
            } else {
                String::new()
            }
        ));
    }
    for g in &requests_by_op {
        lines.push(format!(
            "{} {}: {} requests, {}, service p50 {}, p99 {}, max {}{}",
            g.device,
            g.op,
            g.service.count,
            crate::units::bytes_fixed(g.bytes as f64).trim(),
            lat(g.service.p50_us),
            lat(g.service.p99_us),
            lat(g.service.max_us),
            if g.queue.count > 0 {
                format!("; queued p99 {}", lat(g.queue.p99_us))
            } else {
                String::new()
            }
        ));
    }
    lines.extend(fsyncs_in_bursts.iter().map(|b| b.line.clone()));
    Some(TraceSummary {
        source,
        calls: calls.len() as u64,
        requests: reqs.len() as u64,
        lost_events: lost,
        lost_line,
        fsync,
        requests_by_op,
        slowest_fsyncs,
        slowest_requests,
        fsyncs_in_bursts,
        lines,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log2_buckets_are_biolatencys() {
        let b = log2_buckets([0u64, 1, 2, 3, 4, 7, 8, 1000].into_iter());
        let got: Vec<(u64, u64, u64)> = b.iter().map(|b| (b.lo, b.hi, b.count)).collect();
        assert_eq!(
            got,
            vec![
                (0, 1, 1),
                (1, 2, 1),
                (2, 4, 2),
                (4, 8, 2),
                (8, 16, 1),
                (16, 32, 0),
                (32, 64, 0),
                (64, 128, 0),
                (128, 256, 0),
                (256, 512, 0),
                (512, 1024, 1)
            ]
        );
        assert!(log2_buckets(std::iter::empty()).is_empty());
        let top = log2_buckets([u64::MAX].into_iter());
        assert_eq!((top[0].lo, top[0].hi), (1 << 63, u64::MAX));
    }
}
