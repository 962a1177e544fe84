//! One clock for the whole run.
//!
//! Every sample, event, latency and broker metric is stamped with nanoseconds since the
//! run's zero, read from `CLOCK_MONOTONIC`. The zero itself is a raw `CLOCK_MONOTONIC`
//! value; because that clock is system-wide, a child process (for example
//! `diskpulse record -- diskpulse load ...`) that is handed the zero through
//! [`ENV_ZERO`] stamps on exactly the same axis.
//!
//! The wall-clock time of the zero is taken once, right next to the monotonic read,
//! and goes into `meta.json`; nothing else uses the wall clock.

use std::time::Duration;

/// Environment variable through which a parent hands its clock zero to a child.
pub const ENV_ZERO: &str = "DISKPULSE_CLOCK_ZERO_NS";

/// Reads a Linux clock (`CLOCK_MONOTONIC`, `CLOCK_THREAD_CPUTIME_ID`, ...) in nanoseconds.
#[inline]
pub fn read_clock_ns(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid, writable timespec; the clocks we pass always exist on Linux.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Reads `CLOCK_MONOTONIC` in nanoseconds.
#[inline]
pub fn monotonic_ns() -> u64 {
    read_clock_ns(libc::CLOCK_MONOTONIC)
}

/// What the machine's `CLOCK_MONOTONIC` can tell apart, which decides whether 1 ms samples
/// and microsecond latencies mean anything (`check`'s `clock` finding, meta.json `clock`).
/// Where the kernel runs on a clocksource without a fine counter (`jiffies`: a timer
/// tick, 1-10 ms), every timestamp moves in whole ticks.
#[derive(Debug, Clone, PartialEq)]
pub struct ClockFacts {
    /// The kernel's clocksource (`tsc`, `kvm-clock`, `hpet`, `jiffies`, ...); `None` where
    /// sysfs does not say.
    pub source: Option<String>,
    /// The clocksources the kernel could switch to.
    pub available: Vec<String>,
    /// The smallest step `CLOCK_MONOTONIC` took between two reads, back to back.
    pub step_ns: u64,
    /// What one read costs, on average over the measurement (a vDSO read is tens of ns;
    /// a clocksource without one costs a system call or a hypervisor exit).
    pub read_ns: f64,
}

/// Clocksources whose reads move only with the timer tick.
pub const COARSE_SOURCES: [&str; 2] = ["jiffies", "refined-jiffies"];

/// A step of `CLOCK_MONOTONIC` above this (1% of a 1 ms sample period) makes 1 ms
/// timestamps unreliable.
const MAX_FINE_STEP_NS: u64 = 10_000;

impl ClockFacts {
    /// Reads the clocksource from `sys` (`/sys`) and reads the clock back to back for
    /// `span` to see its step and cost.
    pub fn measure(sys: &std::path::Path, span: Duration) -> ClockFacts {
        let dir = sys.join("devices/system/clocksource/clocksource0");
        let read = |f: &str| {
            std::fs::read_to_string(dir.join(f))
                .ok()
                .map(|s| s.trim().to_string())
        };
        let (step_ns, read_ns) = clock_steps(span.as_nanos() as u64);
        ClockFacts {
            source: read("current_clocksource").filter(|s| !s.is_empty()),
            available: read("available_clocksource")
                .map(|s| s.split_whitespace().map(String::from).collect())
                .unwrap_or_default(),
            step_ns,
            read_ns,
        }
    }

    /// Whether timestamps move in steps too coarse for 1 ms samples.
    pub fn coarse(&self) -> bool {
        self.step_ns > MAX_FINE_STEP_NS
            || self
                .source
                .as_deref()
                .is_some_and(|s| COARSE_SOURCES.contains(&s))
    }
}

/// Reads `CLOCK_MONOTONIC` back to back for `span_ns` (at least until it moved twice):
/// the smallest nonzero step seen and the mean cost of a read.
fn clock_steps(span_ns: u64) -> (u64, f64) {
    let start = monotonic_ns();
    let mut last = start;
    let mut step = u64::MAX;
    let mut moves = 0u32;
    let mut reads = 0u64;
    loop {
        let t = monotonic_ns();
        reads += 1;
        if t > last {
            step = step.min(t - last);
            last = t;
            moves += 1;
        }
        if t - start >= span_ns && moves >= 2 {
            return (step, (t - start) as f64 / reads as f64);
        }
    }
}

/// The run's clock: nanoseconds since `zero` on `CLOCK_MONOTONIC`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clock {
    zero_ns: u64,
}

impl Clock {
    /// A clock whose zero is now.
    pub fn start() -> Clock {
        Clock {
            zero_ns: monotonic_ns(),
        }
    }

    /// A clock with a given zero (a raw `CLOCK_MONOTONIC` value in ns).
    fn from_zero(zero_monotonic_ns: u64) -> Clock {
        Clock {
            zero_ns: zero_monotonic_ns,
        }
    }

    /// The clock a parent diskpulse handed down through [`ENV_ZERO`], if any.
    pub fn from_env() -> Option<Clock> {
        let v = std::env::var(ENV_ZERO).ok()?;
        v.trim().parse::<u64>().ok().map(Clock::from_zero)
    }

    /// The raw `CLOCK_MONOTONIC` value of this clock's zero.
    pub fn zero_monotonic_ns(&self) -> u64 {
        self.zero_ns
    }

    /// Nanoseconds since the zero (0 for reads that predate it).
    #[inline]
    pub fn now_ns(&self) -> u64 {
        monotonic_ns().saturating_sub(self.zero_ns)
    }

    /// Converts a run-relative time to a raw `CLOCK_MONOTONIC` value.
    #[inline]
    fn to_monotonic_ns(self, t_ns: u64) -> u64 {
        self.zero_ns + t_ns
    }

    /// Sleeps until run-relative time `t_ns` with an absolute deadline
    /// (`clock_nanosleep(TIMER_ABSTIME)`), so sleeps never accumulate drift.
    pub(crate) fn sleep_until_ns(&self, t_ns: u64) {
        sleep_until_monotonic_ns(self.to_monotonic_ns(t_ns));
    }

    /// Elapsed time since the zero as a [`Duration`].
    pub fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.now_ns())
    }
}

/// Sleeps until an absolute `CLOCK_MONOTONIC` time, retrying on EINTR.
pub(crate) fn sleep_until_monotonic_ns(deadline_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
    };
    loop {
        // SAFETY: ts is a valid timespec; remaining time is not requested with TIMER_ABSTIME.
        let rc = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        if rc != libc::EINTR {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn now_is_monotonic_and_relative_to_zero() {
        let c = Clock::start();
        let a = c.now_ns();
        let b = c.now_ns();
        assert!(b >= a);
        assert!(a < 1_000_000_000, "a fresh clock reads {a} ns");
        let later = Clock::from_zero(c.zero_monotonic_ns() + 10_000_000_000);
        assert_eq!(later.now_ns(), 0, "reads before the zero saturate at 0");
    }

    #[test]
    fn clock_facts_read_sysfs_and_see_the_clock_move() {
        let sys = tempfile::tempdir().unwrap();
        let dir = sys.path().join("devices/system/clocksource/clocksource0");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("current_clocksource"), "jiffies\n").unwrap();
        std::fs::write(dir.join("available_clocksource"), "tsc hpet jiffies \n").unwrap();
        let f = ClockFacts::measure(sys.path(), Duration::from_millis(2));
        assert_eq!(f.source.as_deref(), Some("jiffies"));
        assert_eq!(f.available, ["tsc", "hpet", "jiffies"]);
        assert!(f.coarse(), "jiffies is coarse whatever the step: {f:?}");
        // The real clock: it moved, and a read costs something but not a millisecond.
        assert!(f.step_ns > 0 && f.step_ns < u64::MAX, "{f:?}");
        assert!(f.read_ns > 0.0 && f.read_ns < 1e6, "{f:?}");
        let fine = ClockFacts {
            source: Some("tsc".into()),
            step_ns: 40,
            ..f.clone()
        };
        assert!(!fine.coarse());
        let ticks = ClockFacts {
            step_ns: 4_000_000,
            ..fine
        };
        assert!(ticks.coarse(), "a 4 ms step is coarse whatever the name");
        let none = ClockFacts::measure(&sys.path().join("absent"), Duration::from_millis(1));
        assert_eq!((none.source, none.available.len()), (None, 0));
    }

    #[test]
    fn absolute_sleep_reaches_its_deadline() {
        let c = Clock::start();
        let deadline = c.now_ns() + 3_000_000;
        c.sleep_until_ns(deadline);
        assert!(c.now_ns() >= deadline);
    }
}
