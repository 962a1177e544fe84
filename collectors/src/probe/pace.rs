//! Open-loop pacing: when each I/O is meant to start.
//!
//! A [`Schedule`] produces intended start times on `CLOCK_MONOTONIC` (ns). `linear`
//! spaces them exactly `1/rate` apart, computed from the start and the count (never by
//! adding gaps, so rounding never drifts); `poisson` draws exponential gaps with mean
//! `1/rate` (fio's `rate_process=poisson`). The schedule never waits for the device: an
//! I/O that could not start on time (all queue slots busy, the previous I/O slow) starts
//! late, and its latency is counted from the intended time (coordinated omission
//! corrected), as `wrk2` and `oha` do.
//!
//! Waiting: worker threads set their timer slack to 1 ns ([`tight_timer_slack`]);
//! the default 50 us slack would let the kernel fire a 66 us-gap deadline up to 50 us
//! late. Gaps shorter than [`SPIN_NS`] are spun (a wake-up costs about that much);
//! longer ones sleep with `clock_nanosleep(TIMER_ABSTIME)`.

use super::rng::SplitMix64;
use crate::clock::{monotonic_ns, sleep_until_monotonic_ns};

/// Below this, waiting is a spin on the clock rather than a sleep.
const SPIN_NS: u64 = 20_000;

/// fio's `rate_process`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateProcess {
    Linear,
    Poisson,
}

/// Intended start times at a fixed mean rate.
#[derive(Debug, Clone)]
pub struct Schedule {
    start_ns: u64,
    gap_ns: f64,
    k: u64,
    next_ns: u64,
    poisson: bool,
    acc_ns: f64,
}

impl Schedule {
    /// `rate` I/Os per second from `start_ns`; `phase` (0..1) shifts a linear schedule by
    /// that share of a gap, so several jobs at the same rate interleave instead of
    /// issuing together.
    pub fn new(start_ns: u64, rate: f64, process: RateProcess, phase: f64) -> Schedule {
        let gap_ns = 1e9 / rate;
        let first = start_ns + (phase * gap_ns) as u64;
        Schedule {
            start_ns: first,
            gap_ns,
            k: 0,
            next_ns: first,
            poisson: process == RateProcess::Poisson,
            acc_ns: 0.0,
        }
    }

    /// The next intended start (ns, `CLOCK_MONOTONIC`).
    #[inline]
    pub(crate) fn next_ns(&self) -> u64 {
        self.next_ns
    }

    /// Moves to the following intended start.
    #[inline]
    pub(crate) fn advance(&mut self, rng: &mut SplitMix64) {
        self.k += 1;
        if self.poisson {
            self.acc_ns += -rng.unit_open().ln() * self.gap_ns;
            self.next_ns = self.start_ns + self.acc_ns as u64;
        } else {
            self.next_ns = self.start_ns + (self.k as f64 * self.gap_ns) as u64;
        }
    }
}

/// Returns once `CLOCK_MONOTONIC` has reached `deadline_ns`: sleeps with an absolute
/// deadline when far, spins when near.
#[inline]
pub(crate) fn wait_until(deadline_ns: u64) {
    loop {
        let now = monotonic_ns();
        if now >= deadline_ns {
            return;
        }
        if deadline_ns - now > SPIN_NS {
            sleep_until_monotonic_ns(deadline_ns);
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Sets the calling thread's timer slack to 1 ns (`PR_SET_TIMERSLACK`), so sleeps and
/// io_uring wait timeouts end at their deadline instead of up to 50 us later.
pub(crate) fn tight_timer_slack() {
    // SAFETY: prctl with PR_SET_TIMERSLACK takes an unsigned long value; no pointers.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_schedule_has_exact_count_per_second() {
        let mut r = SplitMix64::new(1);
        let mut s = Schedule::new(1_000, 3_000.0, RateProcess::Linear, 0.0);
        let mut n = 0;
        while s.next_ns() < 1_000 + 1_000_000_000 {
            n += 1;
            s.advance(&mut r);
        }
        assert_eq!(n, 3_000);
    }

    #[test]
    fn poisson_schedule_has_the_mean_rate_and_varied_gaps() {
        let mut r = SplitMix64::new(3);
        let mut s = Schedule::new(0, 10_000.0, RateProcess::Poisson, 0.0);
        let mut n = 0u64;
        let mut short = 0u64;
        let mut last = 0;
        while s.next_ns() < 10_000_000_000 {
            n += 1;
            s.advance(&mut r);
            if s.next_ns() - last < 100_000 {
                short += 1;
            }
            last = s.next_ns();
        }
        assert!((99_000..101_000).contains(&n), "{n}");
        // P(gap < mean) = 1 - 1/e = 63 %
        let share = short as f64 / n as f64;
        assert!((0.61..0.65).contains(&share), "{share}");
    }

    #[test]
    fn phase_shifts_a_linear_schedule() {
        let s = Schedule::new(0, 1_000.0, RateProcess::Linear, 0.5);
        assert_eq!(s.next_ns(), 500_000);
    }
}
