//! Open-loop pacing: a schedule decides when each operation should start.
//!
//! Worker `i` of `n` sharing a total rate `R` gets `R/n` ops/s, phase-shifted by `i/n` of
//! an interval so workers interleave. Intended start `k` is `start + (k + phase) / rate`.
//! Latency is measured from that intended start (`co`), so a stall in the server shows
//! as latency for every operation it delayed, not as fewer samples (coordinated
//! omission). tokio's timer has 1 ms granularity: a worker sleeps while the next start is
//! more than 2 ms away and otherwise sends at once, up to 2 ms early, never late on its
//! own account (it aims 1.5 ms early); an early send is measured from its actual send, so it never looks faster.

use std::time::Duration;

use collectors::clock::Clock;

pub(crate) struct Pacer {
    clock: Clock,
    start_ns: u64,
    interval_ns: f64,
    phase: f64,
    k: u64,
    /// Intended starts at or after this are not issued (the run's end), ns.
    end_ns: Option<u64>,
}

impl Pacer {
    /// `rate_per_s` for this worker; `phase` in [0, 1).
    pub fn new(
        clock: Clock,
        start_ns: u64,
        rate_per_s: f64,
        phase: f64,
        end_ns: Option<u64>,
    ) -> Pacer {
        Pacer {
            clock,
            start_ns,
            interval_ns: 1e9 / rate_per_s.max(1e-9),
            phase,
            k: 0,
            end_ns,
        }
    }

    /// The intended start of the next operation.
    pub fn peek(&self) -> u64 {
        self.start_ns + ((self.k as f64 + self.phase) * self.interval_ns) as u64
    }

    /// How many intended starts not yet issued fall before `t_ns` (and before the end of
    /// the run): operations that were due but never started, because the sender was held
    /// (a full window of acks from a server that is gone, a send stage that could not
    /// finish) until it stopped. Counted so an outage is never nothing (issue 23).
    pub(crate) fn due_before(&self, t_ns: u64) -> u64 {
        let until = self.end_ns.map_or(t_ns, |e| e.min(t_ns));
        if until <= self.start_ns {
            return 0;
        }
        // The first k with start + (k + phase) * interval >= until.
        let first_not_due = ((until - self.start_ns) as f64 / self.interval_ns - self.phase).ceil();
        (first_not_due.max(0.0) as u64).saturating_sub(self.k)
    }

    /// Undoes the last [`Pacer::next`]: its start was not issued.
    pub(crate) fn give_back(&mut self) {
        self.k = self.k.saturating_sub(1);
    }

    /// Waits for the next intended start and returns it; `None` once the schedule has
    /// passed the end of the run.
    pub async fn next(&mut self) -> Option<u64> {
        let t = self.peek();
        if self.end_ns.is_some_and(|e| t >= e) {
            return None;
        }
        let now = self.clock.now_ns();
        // tokio's timer wakes on 1 ms ticks, often up to a tick late: aim 1.5 ms early.
        if t > now + 2_000_000 {
            tokio::time::sleep(Duration::from_nanos(t - now - 1_500_000)).await;
        }
        self.k += 1;
        Some(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn issues_exactly_rate_times_duration() {
        let clock = Clock::start();
        let start = clock.now_ns();
        let mut p = Pacer::new(clock, start, 2000.0, 0.5, Some(start + 200_000_000));
        let mut n = 0;
        let mut last = 0;
        while let Some(t) = p.next().await {
            assert!(t >= last);
            last = t;
            n += 1;
        }
        assert_eq!(n, 400);
        // Never more than 2 ms ahead of the schedule (the documented bound: a start less
        // than 2 ms away is issued at once).
        let now = clock.now_ns();
        assert!(now + 2_000_000 >= last, "{} us early", (last - now) / 1000);
    }

    #[tokio::test]
    async fn due_before_counts_the_starts_not_yet_issued_up_to_the_end() {
        let clock = Clock::start();
        let start = clock.now_ns();
        // 1000/s, phase 0.5: starts at 0.5 ms, 1.5 ms, ...; the run ends at 10 ms.
        let mut p = Pacer::new(clock, start, 1000.0, 0.5, Some(start + 10_000_000));
        assert_eq!(p.due_before(start), 0);
        assert_eq!(p.due_before(start + 500_000), 0);
        assert_eq!(p.due_before(start + 500_001), 1);
        assert_eq!(p.due_before(start + 3_000_000), 3);
        // Never past the end of the run.
        assert_eq!(p.due_before(start + 60_000_000_000), 10);
        p.next().await.unwrap();
        p.next().await.unwrap();
        assert_eq!(p.due_before(start + 3_000_000), 1);
        assert_eq!(p.due_before(start + 60_000_000_000), 8);
    }
}
