//! Runs a run's phases on their [`Schedule`]: every phase is a future on the run's tokio
//! runtime (its child waits on a blocking thread), started when its anchor's moment plus
//! its offset has come, so phases overlap as the file says.
//!
//! What must stay true:
//! - every start and end is an event on the run clock: `phase_start` (`phase` and `name`:
//!   the label, `index`, `kind`, `args`) and `phase_end` (the same but `args`, and `ok`,
//!   `stopped`);
//! - Ctrl-C (the study's stop flag) and a failing phase stop every running phase (children
//!   get SIGINT, then SIGKILL after [`super::phases::STOP_GRACE`]) and start no new one;
//!   the first failure is the run's error;
//! - a phase that runs `during` another is stopped when that one ends; if that one ended
//!   before this one's moment came, this one is skipped (recorded with `skipped`);
//! - every phase that started is in the returned records, in index order, with its
//!   `start_s` on the run clock, `elapsed_s` and its `result` or `error`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use collectors::clock::Clock;
use format::events::{self as ev, Body};
use format::phases::{PhaseRecord, PhaseResult};
use futures::stream::{FuturesUnordered, StreamExt};
use toml::Spanned;

use super::phases::{phase_label, run_phase, ChildFailed, PhaseCtx};
use super::schedule::{Anchor, Schedule};
use super::spec::PhaseDecl;

/// How often the schedule looks at the clock and the stop flags.
const TICK: Duration = Duration::from_millis(10);

/// Runs every phase on the schedule; returns the records of those that started (for
/// meta.json `phases`) and the first failure.
pub(super) async fn run_schedule(
    phases: &[Spanned<PhaseDecl>],
    schedule: &Schedule,
    cx: &PhaseCtx<'_>,
    clock: Clock,
    user_stop: &AtomicBool,
) -> (Vec<PhaseRecord>, Option<anyhow::Error>) {
    let n = phases.len();
    let events = cx.events;
    let stops: Vec<Arc<AtomicBool>> = (0..n).map(|_| Arc::new(AtomicBool::new(false))).collect();
    let mut started: Vec<Option<u64>> = vec![None; n];
    let mut ended: Vec<Option<u64>> = vec![None; n];
    let mut records: Vec<(usize, PhaseRecord)> = vec![];
    let mut err: Option<anyhow::Error> = None;
    let mut halted = false;
    let mut running = FuturesUnordered::new();
    let t_start = clock.now_ns();
    loop {
        if user_stop.load(Ordering::Relaxed) {
            halted = true;
        }
        for i in 0..n {
            let during_over = schedule.slots[i].during.is_some_and(|d| ended[d].is_some());
            if (halted || during_over) && started[i].is_some() && ended[i].is_none() {
                stops[i].store(true, Ordering::Relaxed);
            }
        }
        let now = clock.now_ns();
        for i in 0..n {
            if halted || started[i].is_some() {
                continue;
            }
            let slot = &schedule.slots[i];
            let base = match slot.anchor {
                Anchor::RunStart => Some(t_start),
                Anchor::StartOf(k) => started[k],
                Anchor::EndOf(k) => ended[k],
            };
            let Some(base) = base else { continue };
            if now < base + slot.offset.as_nanos() as u64 {
                continue;
            }
            let p = phases[i].get_ref();
            let (label, kind) = (phase_label(p), p.kind.get_ref().clone());
            started[i] = Some(now);
            events.event(Body::PhaseStart(ev::Phase {
                phase: Some(label.clone()),
                name: Some(label.clone()),
                index: Some(i as u64),
                kind: Some(kind.clone()),
                args: Some(format::redact::argv(&p.args)),
                ..Default::default()
            }));
            if let Some(d) = slot.during.filter(|&d| ended[d].is_some()) {
                // What it runs during is over already: nothing to run beside.
                ended[i] = Some(now);
                events.event(Body::PhaseEnd(ev::Phase {
                    phase: Some(label.clone()),
                    name: Some(label.clone()),
                    index: Some(i as u64),
                    kind: Some(kind.clone()),
                    ok: Some(true),
                    stopped: Some(true),
                    args: None,
                }));
                records.push((
                    i,
                    PhaseRecord {
                        args: format::redact::argv(&p.args),
                        elapsed_s: 0.0,
                        error: None,
                        index: i,
                        kind,
                        name: label,
                        result: PhaseResult::None,
                        skipped: Some(format!(
                            "phase #{d} {} had ended before this one's start",
                            phase_label(phases[d].get_ref())
                        )),
                        start_s: now as f64 / 1e9,
                        stopped: None,
                    },
                ));
                continue;
            }
            let stop = stops[i].clone();
            running.push(async move { (i, run_phase(p, i, cx, stop).await) });
        }
        if running.is_empty() && (halted || ended.iter().all(Option::is_some)) {
            break;
        }
        let done = tokio::select! {
            Some(d) = running.next(), if !running.is_empty() => Some(d),
            _ = tokio::time::sleep(TICK) => None,
        };
        let Some((i, r)) = done else { continue };
        let t = clock.now_ns();
        ended[i] = Some(t);
        let p = phases[i].get_ref();
        let (label, kind) = (phase_label(p), p.kind.get_ref().as_str());
        let t0 = started[i].expect("a phase that ended started");
        let (start_s, elapsed_s) = (t0 as f64 / 1e9, (t - t0) as f64 / 1e9);
        let stopped = stops[i].load(Ordering::Relaxed);
        events.event(Body::PhaseEnd(ev::Phase {
            phase: Some(label.clone()),
            name: Some(label.clone()),
            index: Some(i as u64),
            kind: Some(kind.to_string()),
            ok: Some(r.is_ok()),
            stopped: Some(stopped),
            args: None,
        }));
        let record = |result: PhaseResult, error: Option<String>| PhaseRecord {
            args: format::redact::argv(&p.args),
            elapsed_s,
            error,
            index: i,
            kind: kind.to_string(),
            name: label.clone(),
            result,
            skipped: None,
            start_s,
            stopped: Some(stopped),
        };
        match r {
            Ok(v) => records.push((i, record(v, None))),
            Err(e) => {
                events.error("scenario", kind, &format!("{e:#}"));
                // A child that printed its result before failing (a load whose operations
                // failed) keeps it: the report reads its failures.
                let result = e
                    .downcast_ref::<ChildFailed>()
                    .map(|c| PhaseResult::of_failed_stdout(kind, &c.stdout))
                    .unwrap_or_default();
                records.push((i, record(result, Some(format!("{e:#}")))));
                // A phase that fails because it was stopped is not the run's cause.
                if err.is_none() && !(halted && stopped) {
                    err = Some(e);
                }
                halted = true;
            }
        }
    }
    records.sort_by_key(|r| r.0);
    (records.into_iter().map(|r| r.1).collect(), err)
}
