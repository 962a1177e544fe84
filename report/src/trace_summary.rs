//! summary.json `trace`: the traced sync calls and block requests of a run, from the
//! fold `Run::read` fed ([`super::trace::TraceFold`]), with what the run was doing at the
//! slowest calls' ms and how the calls line up with the write bursts (a second pass over
//! fsync_calls). Apart from the fold so the fold needs nothing of the run it feeds.

use super::interference::{burst_spans, lat};
use super::run::Run;
use super::trace::{TraceFold, LEAD_NS, SLOWEST};
use super::trace_context::at_that_ms;
use format::summary::{DeviceSummary, FsyncsInBursts, SlowFsync, SlowRequest, TraceSummary};

/// The sync calls against each broker device's write bursts (every device's when the
/// run does not say which are the broker's).
///
/// The calls are read again from the run's files (a second pass: their start times are
/// not held). `calls` is how many the fold counted.
fn in_bursts(
    dir: &std::path::Path,
    calls: usize,
    devices: &[DeviceSummary],
    broker: &[String],
) -> Vec<FsyncsInBursts> {
    let chosen: Vec<&DeviceSummary> = devices
        .iter()
        .filter(|d| broker.is_empty() || broker.contains(&d.name))
        .filter(|d| !d.write.bursts.list.is_empty())
        .collect();
    if chosen.is_empty() {
        return vec![];
    }
    let spans: Vec<Vec<(u64, u64)>> = chosen.iter().map(|d| burst_spans(d)).collect();
    let holds = |(a, b): (u64, u64), t: u64| t + LEAD_NS >= a && t <= b;
    // Per device: calls in any burst, and which bursts hold a call.
    let mut calls_in = vec![0usize; chosen.len()];
    let mut held: Vec<Vec<bool>> = spans.iter().map(|s| vec![false; s.len()]).collect();
    let _ = format::fsync_calls::for_each(dir, |c| {
        for (k, sp) in spans.iter().enumerate() {
            let mut inside = false;
            for (i, &s) in sp.iter().enumerate() {
                if holds(s, c.t_ns) {
                    inside = true;
                    held[k][i] = true;
                }
            }
            calls_in[k] += inside as usize;
        }
    });
    chosen
        .iter()
        .enumerate()
        .map(|(k, d)| {
            let spans = &spans[k];
            let calls_in = calls_in[k];
            let with = held[k].iter().filter(|h| **h).count();
            FsyncsInBursts {
                device: d.name.clone(),
                bursts: spans.len(),
                bursts_with_fsync: with,
                calls,
                calls_in_bursts: calls_in,
                lead_ms: LEAD_NS as f64 / 1e6,
                line: format!(
                    "{}: {with} of its {} write bursts hold a traced sync call (or start up to {} ms after one); {calls_in} of {} calls fell in bursts",
                    d.name,
                    spans.len(),
                    LEAD_NS / 1_000_000,
                    calls
                ),
            }
        })
        .collect()
}

/// summary.json's `trace`; None when the run was not traced.
pub fn trace(run: &Run, devices: &[DeviceSummary], broker: &[String]) -> Option<TraceSummary> {
    let meta = run.meta.trace()?;
    let empty = TraceFold::default();
    let fold = run.trace.as_ref().unwrap_or(&empty);
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
            .filter(|e| matches!(e.body, format::events::Body::TraceLost(_)))
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
    let slowest_fsyncs = fold
        .slow_calls
        .kept
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
    let slowest_requests = fold
        .slow_requests
        .kept
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
    let fsync = fold.processes();
    let requests_by_op = fold.request_groups();
    let fsyncs_in_bursts = in_bursts(&run.dir, fold.calls as usize, devices, broker);
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
            format::units::bytes_fixed(g.bytes as f64).trim(),
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
        calls: fold.calls,
        requests: fold.requests,
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
