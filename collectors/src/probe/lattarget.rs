//! fio's `latency_target` (with `latency_window`, `latency_percentile`, `latency_run`):
//! find the deepest queue that still meets a latency target, as fio's io_u.c does it
//! (lat_target_init/check/success/failed; read from axboe/fio, not copied).
//!
//! The search, per job: start at depth 1. Each completion whose latency (fio's `lat`:
//! from the I/O's start to its completion) is over the target counts as a miss; with
//! `latency_percentile=100` (fio's default) one miss ramps the depth down at once. After
//! every reap, once `latency_window` has passed since the cycle began, the share of I/Os
//! within the target decides: at least `latency_percentile` % is a success (double the
//! depth while nothing has failed yet, else bisect up towards the lowest depth that
//! failed), less a failure (bisect down towards the highest depth that held). A ramp
//! down waits for what is in flight to drain first (fio's io_u_quiesce). When a success
//! leaves the depth where it was, that depth is the answer: the job drains, its figures
//! are reset, and one more window runs at that depth (fio's "final run"); when that holds
//! too, the job ends. With `latency_run`, it never ends early and keeps adjusting.
//! A miss at depth 1 with percentile 100 ends the job with fio's error ("latency of N
//! nsec exceeds specified max"). During the ramp (ramp_time) misses still ramp down, but
//! windows are not judged; at the ramp's end the search starts again from depth 1.
//!
//! Units: ns for times and latencies. Must stay true: the depth is within 1..=iodepth,
//! and [`LatTarget`] only decides; the engines hold the depth and drain when told.

/// What the job was asked (fio's options; see `spec::Timing::latency`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencySpec {
    /// `latency_target`, ns (fio: microseconds unless a unit is given).
    pub target_ns: u64,
    /// `latency_window`, ns: how long a depth must hold before it is judged (fio's default 0:
    /// judged after every reap).
    pub window_ns: u64,
    /// `latency_percentile`: the share of I/Os (0-100) that must be within the target.
    pub percentile: f64,
    /// `latency_run`: keep adjusting the depth for the whole run instead of ending once
    /// it is found.
    pub keep_running: bool,
}

/// What the engine does after a step of the search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Go on at [`LatTarget::depth`].
    Go,
    /// The depth went down: let what is in flight complete before issuing more.
    Drain,
    /// The depth is found: drain, reset the job's figures, run one more window at it.
    FinalRun,
    /// The final run held: the job ends.
    Done,
}

/// One job's search state (fio's td->latency_qd, _low, _high, ...).
#[derive(Debug, Clone)]
pub(crate) struct LatTarget {
    pub(crate) spec: LatencySpec,
    max_depth: u32,
    depth: u32,
    low: u32,
    high: u32,
    stable: u32,
    cycle_start_ns: u64,
    /// Completions since the job began, and at the cycle's start.
    ios: u64,
    cycle_ios: u64,
    missed: u64,
    final_run: bool,
    /// Past the ramp (the search restarted there).
    measuring: bool,
    ramp_end_ns: u64,
}

impl LatTarget {
    /// fio's lat_target_init: depth 1, bounded by `iodepth`.
    pub(crate) fn new(spec: LatencySpec, iodepth: u32, now: u64, ramp_end_ns: u64) -> LatTarget {
        let mut t = LatTarget {
            spec,
            max_depth: iodepth.max(1),
            depth: 1,
            low: 1,
            high: iodepth.max(1),
            stable: 0,
            cycle_start_ns: now,
            ios: 0,
            cycle_ios: 0,
            missed: 0,
            final_run: false,
            measuring: now >= ramp_end_ns,
            ramp_end_ns,
        };
        t.restart(now);
        t
    }

    fn restart(&mut self, now: u64) {
        self.final_run = false;
        self.depth = 1;
        self.low = 1;
        self.high = self.max_depth;
        self.stable = 0;
        self.new_cycle(now);
    }

    /// The depth the engine may have in flight now.
    #[inline]
    pub(crate) fn depth(&self) -> u32 {
        self.depth
    }

    /// What was in flight at a ramp down or the final run has completed: the cycle the
    /// new depth is judged on starts now (fio's lat_new_cycle after io_u_quiesce).
    pub(crate) fn drained(&mut self, now: u64) {
        self.new_cycle(now);
    }

    fn new_cycle(&mut self, now: u64) {
        self.cycle_start_ns = now;
        self.cycle_ios = self.ios;
        self.missed = 0;
    }

    /// One completed I/O and its latency. `Err(lat_ns)`: a miss at depth 1 with
    /// percentile 100, fio's fatal "exceeds specified max".
    #[inline]
    pub(crate) fn completed(&mut self, lat_ns: u64, now: u64) -> Result<Step, u64> {
        self.ios += 1;
        if lat_ns <= self.spec.target_ns {
            return Ok(Step::Go);
        }
        if self.spec.percentile < 100.0 {
            self.missed += 1;
            return Ok(Step::Go);
        }
        if self.depth == 1 {
            return Err(lat_ns);
        }
        self.ramp_down(now);
        Ok(Step::Drain)
    }

    /// fio's __lat_target_failed (below depth 1 there is nothing to lower).
    fn ramp_down(&mut self, now: u64) {
        self.high = self.depth;
        if self.depth == self.low {
            self.low -= 1;
        }
        self.depth = (self.depth + self.low) / 2;
        self.stable = 0;
        self.new_cycle(now);
    }

    /// After a reap (fio's lat_target_check): judges the cycle once its window has passed.
    pub(crate) fn check(&mut self, now: u64) -> Step {
        if !self.measuring {
            if now < self.ramp_end_ns {
                return Step::Go;
            }
            // fio's reset_all_stats at the ramp's end restarts the search.
            self.measuring = true;
            if !self.final_run {
                self.restart(now);
            }
            return Step::Go;
        }
        if now.saturating_sub(self.cycle_start_ns) < self.spec.window_ns {
            return Step::Go;
        }
        let ios = self.ios - self.cycle_ios;
        // 0 of 0 is no success (fio divides and compares NaN).
        let ok = ios > 0
            && (ios - self.missed.min(ios)) as f64 * 100.0 / ios as f64 >= self.spec.percentile;
        if ok {
            return self.success(now);
        }
        if self.depth == 1 {
            // fio ignores the failure here: the cycle goes on at depth 1.
            return Step::Go;
        }
        self.ramp_down(now);
        Step::Drain
    }

    /// fio's lat_target_success.
    fn success(&mut self, now: u64) -> Step {
        let was = self.depth;
        self.low = self.depth;
        if self.depth + 1 == self.high {
            // Stuck just below a depth that failed: after 3 successes in a row, try it again.
            self.stable += 1;
            if self.stable >= 3 {
                self.high += 1;
                self.stable = 0;
            }
        }
        self.depth = if self.high != self.max_depth {
            (self.depth + self.high) / 2
        } else {
            self.depth * 2
        };
        self.depth = self.depth.min(self.max_depth);
        let mut step = Step::Go;
        if !self.spec.keep_running && self.depth == was {
            if self.final_run {
                step = Step::Done;
            } else {
                self.final_run = true;
                step = Step::FinalRun;
            }
        }
        self.new_cycle(now);
        step
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn spec(pct: f64) -> LatencySpec {
        LatencySpec {
            target_ns: 10 * MS,
            window_ns: 100 * MS,
            percentile: pct,
            keep_running: false,
        }
    }

    /// Runs windows of 10 completions at a device whose latency is `lat(depth)`, returning
    /// the depth after each window and the step that ended the search.
    fn search(t: &mut LatTarget, lat: impl Fn(u32) -> u64) -> (Vec<u32>, Step) {
        let mut now = 0;
        let mut seen = vec![];
        for _ in 0..200 {
            for _ in 0..10 {
                now += MS;
                if t.completed(lat(t.depth()), now).is_err() {
                    return (seen, Step::Done);
                }
            }
            now += 100 * MS;
            let s = t.check(now);
            seen.push(t.depth());
            if s == Step::Done {
                return (seen, s);
            }
        }
        (seen, Step::Go)
    }

    #[test]
    fn doubles_until_a_depth_fails_then_bisects_to_the_deepest_that_holds() {
        // The device meets 10 ms up to depth 11.
        let mut t = LatTarget::new(spec(100.0), 64, 0, 0);
        let (seen, end) = search(&mut t, |d| if d <= 11 { 5 * MS } else { 20 * MS });
        assert_eq!(end, Step::Done);
        assert_eq!(&seen[..4], &[2, 4, 8, 16], "doubling while nothing failed");
        assert_eq!(t.depth(), 11, "{seen:?}");
    }

    #[test]
    fn a_miss_at_depth_one_is_fios_fatal_error_unless_a_percentile_allows_it() {
        let mut t = LatTarget::new(spec(100.0), 8, 0, 0);
        assert_eq!(t.completed(11 * MS, 1), Err(11 * MS));
        let mut t = LatTarget::new(spec(90.0), 8, 0, 0);
        assert_eq!(t.completed(11 * MS, 1), Ok(Step::Go));
        // 1 miss in 10 is 90%: a success, the depth doubles.
        for i in 0..9 {
            t.completed(MS, 2 + i).unwrap();
        }
        assert_eq!(t.check(200 * MS), Step::Go);
        assert_eq!(t.depth(), 2);
    }

    #[test]
    fn a_found_depth_runs_one_more_window_then_the_job_ends() {
        let mut t = LatTarget::new(spec(100.0), 2, 0, 0);
        t.completed(MS, MS).unwrap();
        assert_eq!(t.check(101 * MS), Step::Go);
        assert_eq!(t.depth(), 2);
        t.completed(MS, 102 * MS).unwrap();
        assert_eq!(t.check(202 * MS), Step::FinalRun, "2 is iodepth: found");
        t.completed(MS, 203 * MS).unwrap();
        assert_eq!(t.check(250 * MS), Step::Go, "the window has not passed");
        assert_eq!(t.check(303 * MS), Step::Done);
        // With latency_run it never ends.
        let mut t = LatTarget::new(
            LatencySpec {
                keep_running: true,
                ..spec(100.0)
            },
            2,
            0,
            0,
        );
        for k in 1..10 {
            t.completed(MS, k * 101 * MS).unwrap();
            assert_eq!(t.check(k * 101 * MS + 100 * MS), Step::Go);
        }
    }

    #[test]
    fn a_ramp_down_drains_and_the_ramp_restarts_the_search() {
        let mut t = LatTarget::new(spec(100.0), 16, 0, 1_000 * MS);
        // In the ramp windows are not judged.
        t.completed(MS, MS).unwrap();
        assert_eq!(t.check(500 * MS), Step::Go);
        assert_eq!(t.depth(), 1);
        t.check(1_000 * MS);
        t.completed(MS, 1_001 * MS).unwrap();
        assert_eq!(t.check(1_101 * MS), Step::Go);
        assert_eq!(t.depth(), 2);
        assert_eq!(t.completed(30 * MS, 1_102 * MS), Ok(Step::Drain));
        assert_eq!(t.depth(), 1);
    }
}
