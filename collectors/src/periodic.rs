//! The sampling loop: absolute deadlines, stamped actual read times, jitter statistics.
//!
//! Deadlines are `start + k * interval` on `CLOCK_MONOTONIC`, slept to with
//! `clock_nanosleep(TIMER_ABSTIME)`, so a slow sample never shifts later ones. When the
//! thread falls more than one interval behind (the machine was busy), the missed
//! deadlines are skipped, counted, and never sampled in a burst to catch up.
//!
//! Jitter is how late a sample's read started after its deadline, in ns, kept in an
//! HdrHistogram allocated before the loop (recording into it does not allocate).

use std::sync::atomic::{AtomicBool, Ordering};

use hdrhistogram::Histogram;

use crate::clock::Clock;

/// What one sampling loop did.
#[derive(Debug, Clone)]
pub struct LoopStats {
    pub interval_ns: u64,
    pub started_ns: u64,
    pub ended_ns: u64,
    /// Samples taken.
    pub samples: u64,
    /// Deadlines that passed while the loop ran: (ended - started) / interval + 1.
    pub expected: u64,
    /// Deadlines skipped because the loop was late by more than an interval.
    pub skipped: u64,
    pub jitter: Histogram<u64>,
    /// CPU time this thread used while looping, ns (`CLOCK_THREAD_CPUTIME_ID`).
    pub thread_cpu_ns: u64,
    /// The thread ran with a real-time priority (see [`try_realtime`]).
    pub realtime: bool,
}

impl LoopStats {
    pub fn jitter_us(&self, q: f64) -> f64 {
        self.jitter.value_at_quantile(q) as f64 / 1000.0
    }
}

/// Gives the calling thread a low real-time priority (`SCHED_FIFO` 10), so that a broker
/// and a load generator saturating every core do not delay its samples. Needs root or
/// `CAP_SYS_NICE`; without them the thread keeps its normal priority and the run goes on.
/// A sampler sleeps between samples of about 10 us, so it cannot starve anything.
pub fn try_realtime() -> std::io::Result<()> {
    let param = libc::sched_param { sched_priority: 10 };
    // SAFETY: pid 0 is the calling thread; param is a valid sched_param.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn is_realtime() -> bool {
    // SAFETY: pid 0 is the calling thread.
    unsafe { libc::sched_getscheduler(0) == libc::SCHED_FIFO }
}

/// CPU time of the calling thread, ns.
pub fn thread_cpu_ns() -> u64 {
    crate::clock::read_clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// The longest a sampler sleeps without looking at its stop flag: a long interval
/// (`record --interval 1h`) still ends within this of Ctrl-C (it used to sleep the hour).
const STOP_POLL_NS: u64 = 50_000_000;

/// Sleeps until `deadline` (run-relative ns), in slices of at most [`STOP_POLL_NS`];
/// false when `stop` was set before the deadline.
fn sleep_or_stop(clock: &Clock, deadline: u64, stop: &AtomicBool) -> bool {
    loop {
        let now = clock.now_ns();
        if now + STOP_POLL_NS >= deadline {
            clock.sleep_until_ns(deadline);
            return true;
        }
        clock.sleep_until_ns(now + STOP_POLL_NS);
        if stop.load(Ordering::Relaxed) {
            return false;
        }
    }
}

/// Calls `tick(deadline_ns)` at every deadline until `stop` is set or `tick` returns
/// false. Times are run-relative on `clock`.
pub fn run(
    clock: &Clock,
    interval_ns: u64,
    stop: &AtomicBool,
    mut tick: impl FnMut(u64) -> bool,
) -> LoopStats {
    let interval_ns = interval_ns.max(1);
    // 1 ns .. 60 s, 3 significant digits: ~30 KiB, allocated once here.
    let mut jitter = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)
        .expect("static histogram bounds are valid");
    jitter.auto(false);
    let cpu0 = thread_cpu_ns();
    let start = clock.now_ns();
    let mut k: u64 = 0;
    let mut samples = 0u64;
    let mut skipped = 0u64;
    let mut deadline = start;
    loop {
        if stop.load(Ordering::Relaxed) || !sleep_or_stop(clock, deadline, stop) {
            break;
        }
        let now = clock.now_ns();
        let _ = jitter.record((now - deadline).max(1));
        samples += 1;
        if !tick(deadline) {
            break;
        }
        k += 1;
        let mut next = start + k * interval_ns;
        let after = clock.now_ns();
        if after > next + interval_ns {
            // More than a whole interval behind: skip to the next deadline in the future.
            let behind = (after - next) / interval_ns;
            skipped += behind;
            k += behind;
            next = start + k * interval_ns;
        }
        deadline = next;
    }
    let end = clock.now_ns();
    LoopStats {
        interval_ns,
        started_ns: start,
        ended_ns: end,
        samples,
        expected: (end - start) / interval_ns + 1,
        skipped,
        jitter,
        thread_cpu_ns: thread_cpu_ns() - cpu0,
        realtime: is_realtime(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_ticks_at_the_interval() {
        let clock = Clock::start();
        let stop = AtomicBool::new(false);
        let mut n = 0;
        let s = run(&clock, 2_000_000, &stop, |_| {
            n += 1;
            n < 50
        });
        assert_eq!(s.samples, 50);
        assert_eq!(n, 50);
        // 49 intervals of 2 ms: at least 98 ms elapsed.
        assert!(s.ended_ns - s.started_ns >= 98_000_000);
    }

    #[test]
    fn a_long_interval_ends_soon_after_stop() {
        let clock = Clock::start();
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(100));
            s2.store(true, Ordering::Relaxed);
        });
        // One hour between samples: only the first is taken, and the stop ends the sleep.
        let s = run(&clock, 3_600_000_000_000, &stop, |_| true);
        t.join().unwrap();
        assert_eq!(s.samples, 1);
        let ran_ns = s.ended_ns - s.started_ns;
        assert!(ran_ns < 100_000_000 + 2 * STOP_POLL_NS, "ran {ran_ns} ns");
    }

    #[test]
    fn skips_rather_than_bursts_when_late() {
        let clock = Clock::start();
        let stop = AtomicBool::new(false);
        let mut n = 0;
        let s = run(&clock, 1_000_000, &stop, |_| {
            n += 1;
            if n == 2 {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            n < 5
        });
        assert!(s.skipped >= 15, "skipped {}", s.skipped);
        assert_eq!(s.samples, 5);
    }
}
