//! P2a: a job's think time (fio's `thinktime`, `thinktime_spin`, `thinktime_blocks`,
//! `thinktime_blocks_type`), minimum rates (`ratemin`, `rate_iops_min`, `rate_cycle`:
//! fio's check_min_rate), `fill_device`'s end and the `latency_target` search's depth
//! (`lattarget`), as methods of the engines' [`Ctx`].
//! The engines call `issued_one`/`completed_one` per I/O (two adds and a compare),
//! issue while `has_room`, pause with `think` once nothing is in flight (a latency_target
//! drain is such a pause, of no length), and `min_rate_check` after each reap.

use std::sync::atomic::Ordering;

use super::lattarget::{LatTarget, Step};
use super::spec::Timing;
use super::stats::{READ, WRITE};
use super::{pace, Ctx, ProbeError};
use crate::clock::monotonic_ns;

/// P2a: a job's think-time and minimum-rate counters.
#[derive(Debug, Default)]
pub(crate) struct TimingState {
    /// I/Os issued (or completed, with thinktime_blocks_type=complete) since the last pause.
    since_think: u32,
    think_pending: bool,
    /// Completed I/Os and bytes per direction since the start, and at the last check.
    done: [(u64, u64); super::stats::DIRS],
    last: [(u64, u64); super::stats::DIRS],
    last_check_ns: u64,
    /// The job's start (CLOCK_MONOTONIC ns): fio's 2 s settle period counts from it.
    start_ns: u64,
    /// fio's latency_target search (None without latency_target).
    lat: Option<LatTarget>,
    /// Let what is in flight complete before issuing more (a latency_target ramp down or
    /// final run); `reset` then starts the job's figures again (the final run).
    drain: bool,
    reset: bool,
    /// A completion over latency_target at depth 1 (fio's fatal error): its latency, ns.
    lat_fatal: Option<u64>,
}

impl TimingState {
    /// `meas_ns`: the end of the ramp; `iodepth`: the most a latency_target search goes to.
    pub(crate) fn new(start_ns: u64, t: &Timing, iodepth: u32, meas_ns: u64) -> TimingState {
        TimingState {
            start_ns,
            lat: t
                .latency
                .map(|l| LatTarget::new(l, iodepth, start_ns, meas_ns)),
            ..TimingState::default()
        }
    }
}

/// P2a: think time, minimum rates, fill_device's end (fio's handle_thinktime,
/// check_min_rate; see `spec::Timing`).
impl Ctx<'_> {
    /// Counts one issued I/O toward the next think time.
    #[inline]
    pub(crate) fn issued_one(&mut self) {
        if self.timing.think_ns > 0 && !self.timing.think_on_complete {
            self.count_think();
        }
    }

    #[inline]
    fn count_think(&mut self) {
        self.tstate.since_think += 1;
        if self.tstate.since_think >= self.timing.think_blocks.max(1) {
            self.tstate.since_think = 0;
            self.tstate.think_pending = true;
        }
    }

    /// Whether the job is to pause once nothing is in flight.
    #[inline]
    pub(crate) fn think_pending(&self) -> bool {
        self.tstate.think_pending || self.tstate.drain
    }

    /// Whether another I/O may go with `busy` already in flight or queued: below iodepth,
    /// and below the depth a latency_target search is at (fio's queue_full).
    #[inline]
    pub(crate) fn has_room(&self, busy: usize) -> bool {
        let cap = match &self.tstate.lat {
            Some(l) => l.depth(),
            None => self.depth,
        };
        busy < cap.max(1) as usize
    }

    /// The pause itself (fio: spin `thinktime_spin`, sleep the rest), never past the end.
    /// A latency_target drain ends here (nothing is in flight): its new cycle starts now.
    pub(crate) fn think(&mut self) {
        if self.tstate.drain {
            self.drained();
            if !self.tstate.think_pending {
                return;
            }
        }
        self.tstate.think_pending = false;
        let now = monotonic_ns();
        let spin_end = (now + self.timing.think_spin_ns).min(self.end_ns);
        while monotonic_ns() < spin_end {
            std::hint::spin_loop();
        }
        let end = (now + self.timing.think_ns).min(self.end_ns);
        let mut t = monotonic_ns();
        // Wakes on `stop` within 50 ms.
        while t < end && !self.stop.load(Ordering::Relaxed) {
            pace::wait_until(end.min(t + 50_000_000));
            t = monotonic_ns();
        }
    }

    /// Counts one completed I/O for the minimum rates (and think time by completions).
    /// `lat_ns`: the I/O's latency from its start (fio's `lat`, what latency_target is
    /// about); `now`: its completion.
    #[inline]
    pub(crate) fn completed_one(&mut self, dir: usize, bytes: u64, lat_ns: u64, now: u64) {
        let d = &mut self.tstate.done[dir];
        d.0 += 1;
        d.1 += bytes;
        if self.timing.think_ns > 0 && self.timing.think_on_complete {
            self.count_think();
        }
        if let Some(l) = self.tstate.lat.as_mut() {
            match l.completed(lat_ns, now) {
                Ok(Step::Drain) => self.tstate.drain = true,
                Ok(_) => {}
                Err(lat) => {
                    self.tstate.lat_fatal.get_or_insert(lat);
                }
            }
        }
    }

    /// A latency_target drain is over: the new cycle starts now, and a final run's
    /// figures start again (fio quiesces, then resets its stats).
    #[cold]
    fn drained(&mut self) {
        self.tstate.drain = false;
        let now = monotonic_ns();
        if let Some(l) = self.tstate.lat.as_mut() {
            l.drained(now);
        }
        if std::mem::take(&mut self.tstate.reset) {
            self.win.reset_figures(now);
        }
    }

    /// fio's lat_target_check after a reap at `now` (not in the ramp), and its fatal error.
    fn latency_check(&mut self, now: u64) -> Option<ProbeError> {
        let l = self.tstate.lat.as_mut()?;
        self.win.latency_depth = Some(l.depth());
        if let Some(lat_ns) = self.tstate.lat_fatal.take() {
            return Some(ProbeError::LatencyTarget {
                path: self.target.path.clone(),
                lat_ns,
                target_ns: l.spec.target_ns,
            });
        }
        match l.check(now) {
            Step::Go => {}
            Step::Drain => self.tstate.drain = true,
            Step::FinalRun => {
                self.tstate.drain = true;
                self.tstate.reset = true;
            }
            // The job ends as its runtime would end it.
            Step::Done => self.end_ns = self.end_ns.min(now),
        }
        self.win.latency_depth = Some(l.depth());
        None
    }

    /// fio's check_min_rate, after completions at `now`: past a 2 s settle period from the
    /// job's start and the ramp, once per rate_cycle, each direction that has done I/O
    /// must have done at least ratemin bytes/s (else rate_iops_min I/Os per s) since the
    /// last check.
    pub(crate) fn min_rate_check(&mut self, now: u64) -> Option<ProbeError> {
        if let Some(e) = self.latency_check(now) {
            return Some(e);
        }
        let t = &self.timing;
        if t.min_bytes_s == [0, 0] && t.min_iops == [0, 0] {
            return None;
        }
        let st = &mut self.tstate;
        if now < st.start_ns + 2_000_000_000 || now < self.win.meas_ns {
            return None;
        }
        if st.last_check_ns == 0 {
            st.last = st.done;
            st.last_check_ns = now;
            return None;
        }
        let spent = now - st.last_check_ns;
        if spent < t.rate_cycle_ns.max(1) {
            return None;
        }
        let spent_ms = (spent / 1_000_000).max(1);
        for dir in [READ, WRITE] {
            let (ios, bytes) = st.done[dir];
            if ios == 0 {
                continue;
            }
            let (ios0, bytes0) = st.last[dir];
            let (what, got) = if t.min_bytes_s[dir] > 0 {
                let rate = (bytes - bytes0) * 1000 / spent_ms;
                (rate < t.min_bytes_s[dir]).then(|| {
                    (
                        format!("rate_min={}B/s", t.min_bytes_s[dir]),
                        format!("{rate}B/s"),
                    )
                })
            } else if t.min_iops[dir] > 0 {
                let rate = (ios - ios0) * 1000 / spent_ms;
                (rate < t.min_iops[dir]).then(|| {
                    (
                        format!("rate_iops_min={}", t.min_iops[dir]),
                        format!("{rate} IOPS"),
                    )
                })
            } else {
                None
            }
            .unzip();
            if let (Some(what), Some(got)) = (what, got) {
                return Some(ProbeError::MinRate {
                    path: self.target.path.clone(),
                    what,
                    got,
                    cycle_ms: spent_ms,
                });
            }
        }
        st.last = st.done;
        st.last_check_ns = now;
        None
    }

    /// With fill_device, a write that found the file system full ends the job (fio's
    /// terminating condition); any other error is an error.
    pub(crate) fn ends_at_enospc(&self, e: &std::io::Error, dir: usize) -> bool {
        self.timing.fill_device && dir == WRITE && e.raw_os_error() == Some(libc::ENOSPC)
    }
}
