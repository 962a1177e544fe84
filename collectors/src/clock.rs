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
    pub fn from_zero(zero_monotonic_ns: u64) -> Clock {
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
    pub fn to_monotonic_ns(&self, t_ns: u64) -> u64 {
        self.zero_ns + t_ns
    }

    /// Sleeps until run-relative time `t_ns` with an absolute deadline
    /// (`clock_nanosleep(TIMER_ABSTIME)`), so sleeps never accumulate drift.
    pub fn sleep_until_ns(&self, t_ns: u64) {
        sleep_until_monotonic_ns(self.to_monotonic_ns(t_ns));
    }

    /// Elapsed time since the zero as a [`Duration`].
    pub fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.now_ns())
    }
}

/// Sleeps until an absolute `CLOCK_MONOTONIC` time, retrying on EINTR.
pub fn sleep_until_monotonic_ns(deadline_ns: u64) {
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
    fn absolute_sleep_reaches_its_deadline() {
        let c = Clock::start();
        let deadline = c.now_ns() + 3_000_000;
        c.sleep_until_ns(deadline);
        assert!(c.now_ns() >= deadline);
    }
}
