//! The aggregator: merges the job threads' windows as they arrive, per window over all
//! jobs (for `on_window`, probe.csv, in order, as soon as every job is past it) and per
//! job over the windows after the ramp (the totals of the summary and fio's JSON). It
//! runs on the calling thread of [`super::run_files`]; windows no job completed in are
//! emitted empty, and each window's `oldest_wait_ns` is the longest any job's oldest
//! I/O in flight had waited at its end.

use std::sync::mpsc::{Receiver, SyncSender};

use super::stats::{self, WindowStats};
use super::{window_index, window_start, JobResult, JobSample, Msg, ProbeSpec, Usage, WindowRow};

/// Merges the jobs' windows: per window over all jobs (for `on_window`, in order, as
/// soon as every job is past it) and per job over the windows after the ramp.
#[allow(
    clippy::too_many_lines,
    reason = "one merge of the jobs' windows, each figure next to the others it is computed with"
)]
pub(super) fn aggregate(
    spec: &ProbeSpec,
    n: usize,
    start: u64,
    rx: Receiver<Msg>,
    free_tx: &[SyncSender<Box<WindowStats>>],
    on_window: &mut dyn FnMut(&WindowRow),
) -> (Vec<JobResult>, u64) {
    let w = spec.window_ns.max(1);
    let meas = start + spec.ramp_ns;
    let first = window_index(start, meas, w);
    let mut jobs: Vec<JobResult> = (0..n)
        .map(|j| JobResult {
            job: j as u32,
            totals: WindowStats::new(),
            runtime_ns: 0,
            samples: vec![],
            usage: Usage::default(),
            rate_missed: 0,
            error: None,
            verified_bytes: 0,
            verify_reads: stats::DirStats::new(),
            verify_ns: 0,
            latency_depth: None,
        })
        .collect();
    // Where each job's figures start: the ramp's end, or latency_target's final run.
    let mut from = vec![meas; n];
    let mut done_upto = vec![first - 1; n];
    let mut done = vec![false; n];
    let mut last_done = vec![start; n];
    let mut pending: std::collections::BTreeMap<i64, Box<WindowStats>> = Default::default();
    // Per window not yet emitted: the longest any job's oldest I/O in flight had waited at
    // its end (ns; absent: 0).
    let mut waits: std::collections::BTreeMap<i64, u64> = Default::default();
    let mut pool: Vec<Box<WindowStats>> = vec![];
    let empty = WindowStats::new();
    let mut next_emit = first;
    let mut max_idx = first;
    let mut emit = |upto: i64,
                    final_end: Option<u64>,
                    pending: &mut std::collections::BTreeMap<i64, Box<WindowStats>>,
                    waits: &mut std::collections::BTreeMap<i64, u64>,
                    pool: &mut Vec<Box<WindowStats>>,
                    next_emit: &mut i64| {
        while *next_emit <= upto {
            let idx = *next_emit;
            let stats = pending.remove(&idx);
            let oldest_wait_ns = waits.remove(&idx).unwrap_or(0);
            let mut end = window_start(idx + 1, meas, w);
            if let Some(f) = final_end {
                if idx == upto {
                    end = f.max(window_start(idx, meas, w)).min(end);
                }
            }
            on_window(&WindowRow {
                idx,
                start_ns: window_start(idx, meas, w).max(start),
                end_ns: end,
                ramp: idx < 0,
                stats: stats.as_deref().unwrap_or(&empty),
                oldest_wait_ns,
            });
            if let Some(mut b) = stats {
                b.reset();
                pool.push(b);
            }
            *next_emit += 1;
        }
    };
    while let Ok(msg) = rx.recv() {
        match msg {
            Msg::Window {
                job,
                idx,
                next,
                mut stats,
                oldest_ns,
            } => {
                let j = job as usize;
                if oldest_ns != u64::MAX && idx >= next_emit {
                    // Every window end from idx's to the one before `next` that came after
                    // the oldest's start (at most 100,000 windows of one stall).
                    for k in idx..next.min(idx + 100_000) {
                        let end = window_start(k + 1, meas, w);
                        if end > oldest_ns {
                            let e = waits.entry(k).or_insert(0);
                            *e = (*e).max(end - oldest_ns);
                        }
                    }
                }
                if idx >= 0 {
                    jobs[j].totals.merge(&stats);
                    if next != i64::MAX {
                        jobs[j].samples.push(JobSample {
                            ios: std::array::from_fn(|d| stats.dir[d].ios),
                            bytes: std::array::from_fn(|d| stats.dir[d].bytes),
                            window_ns: w,
                        });
                        // Windows this job skipped had no completions: zero samples.
                        for _ in (idx + 1)..next.min(idx + 1_000_000) {
                            jobs[j].samples.push(JobSample {
                                ios: [0; stats::DIRS],
                                bytes: [0; stats::DIRS],
                                window_ns: w,
                            });
                        }
                    }
                }
                if !stats.is_empty() {
                    max_idx = max_idx.max(idx);
                    pending
                        .entry(idx)
                        .or_insert_with(|| pool.pop().unwrap_or_default())
                        .merge(&stats);
                }
                stats.reset();
                let _ = free_tx[j].try_send(stats);
                // A job's last window (next == MAX) stays open until its Done message
                // brings the time of its last completion: that window ends there.
                done_upto[j] = done_upto[j].max(if next == i64::MAX { idx - 1 } else { next - 1 });
            }
            Msg::Done {
                job,
                last_done_ns,
                latency_depth,
                usage,
                rate_missed,
                error,
                verified,
            } => {
                let j = job as usize;
                done[j] = true;
                done_upto[j] = i64::MAX;
                last_done[j] = last_done_ns;
                jobs[j].runtime_ns = last_done_ns.saturating_sub(from[j]);
                jobs[j].latency_depth = latency_depth;
                jobs[j].usage = usage;
                jobs[j].rate_missed = rate_missed;
                jobs[j].error = error;
                jobs[j].verified_bytes = verified.bytes;
                jobs[j].verify_reads = verified.reads;
                jobs[j].verify_ns = verified.ns;
            }
            Msg::Reset { job, at_ns } => {
                let j = job as usize;
                jobs[j].totals.reset();
                jobs[j].samples.clear();
                from[j] = at_ns.max(meas);
            }
        }
        if done.iter().all(|d| *d) {
            break;
        }
        let upto = *done_upto.iter().min().unwrap();
        if upto != i64::MAX {
            emit(
                upto,
                None,
                &mut pending,
                &mut waits,
                &mut pool,
                &mut next_emit,
            );
        }
    }
    let end = last_done.iter().copied().max().unwrap_or(start);
    let last = max_idx.max(window_index(end.saturating_sub(1).max(start), meas, w));
    emit(
        last,
        Some(end),
        &mut pending,
        &mut waits,
        &mut pool,
        &mut next_emit,
    );
    (jobs, end)
}
