//! The one timed durable-write loop, used by `diskpulse fsync` ([`crate::fsync`]) and by
//! check's flush tests ([`crate::check::flush`]): open flags, whole writes, an optional
//! sync call, clock reads and HdrHistograms, in one place.
//!
//! How an op is timed (must stay true for both users): ops run back to back and one
//! `CLOCK_MONOTONIC` read ends an op and starts the next, so an op's latency includes the
//! few ns of bookkeeping between ops (as pg_test_fsync's ops/s does) and a 1 µs buffered
//! write is not slowed by a second clock read. When the op ends with a separate sync call,
//! the end of that call ends the op, and the call alone goes into a second histogram.
//! The first `warmup_ops` ops are not recorded and the time limit starts after them.
//!
//! Ops without a sync call that take about a microsecond (an 8 KiB write into the page
//! cache, fsync's "write" row) go through [`run_sampled`] instead: every op is counted,
//! but only one in `every` is timed (a clock read before and after it), and the time limit
//! is looked at then. A clock read and a histogram record per op were ~5% of such an op
//! (perf: `__vdso_clock_gettime` 1.8%, the loop and record 1.6%), which pg_test_fsync,
//! reading the clock only at the start and the end of a test, does not pay (decision 0099).
//!
//! Units: latencies in ns; `first_ns`/`last_ns` are raw monotonic ns.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hdrhistogram::Histogram;

use crate::clock::monotonic_ns;
use crate::directio::{self, LatencyNs};

/// Writes all of `buf` at `off` with one `pwrite(2)` (the call itself, as pg_test_fsync
/// makes it). A regular file or block device takes a whole 1-16 KiB write or fails: a
/// short write is an error here, EINTR is retried.
#[inline]
pub fn write_all_at(f: &File, buf: &[u8], off: u64) -> std::io::Result<()> {
    loop {
        // SAFETY: buf is valid for buf.len() bytes; the descriptor is open for the call.
        let n = unsafe {
            libc::pwrite(
                f.as_raw_fd(),
                buf.as_ptr().cast(),
                buf.len(),
                off as libc::off_t,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n as usize != buf.len() {
            return Err(std::io::Error::other(format!(
                "short write: {n} of {} bytes at offset {off}",
                buf.len()
            )));
        }
        return Ok(());
    }
}

/// When a timed loop ends.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Measured time, from the end of the warm-up.
    pub duration: Duration,
    /// Ops run first and not recorded.
    pub(crate) warmup_ops: u64,
    /// Recorded ops at most.
    pub(crate) max_ops: u64,
}

/// What a loop recorded.
#[derive(Debug)]
pub struct Timed {
    /// Per op (writes plus sync call), ns.
    pub lat: Histogram<u64>,
    /// The sync call alone, ns, when the ops have one.
    pub sync_lat: Option<Histogram<u64>>,
    pub ops: u64,
    /// Monotonic ns at which the first recorded op started and the last one ended.
    pub first_ns: Option<u64>,
    pub last_ns: u64,
    /// Ops attempted, warm-up included (the failing one not counted).
    pub attempted: u64,
    /// The stop flag ended the loop.
    pub stopped: bool,
}

impl Timed {
    fn new(has_sync: bool) -> Timed {
        Timed {
            lat: directio::latency_histogram(),
            sync_lat: has_sync.then(directio::latency_histogram),
            ops: 0,
            first_ns: None,
            last_ns: 0,
            attempted: 0,
            stopped: false,
        }
    }

    #[inline]
    fn record(&mut self, t0: u64, sync: Option<(u64, u64)>, t1: u64) {
        self.first_ns.get_or_insert(t0);
        self.last_ns = t1;
        self.ops += 1;
        directio::record_ns(&mut self.lat, t1 - t0);
        if let (Some(h), Some((s0, s1))) = (self.sync_lat.as_mut(), sync) {
            directio::record_ns(h, s1 - s0);
        }
    }

    /// ns from the start of the first recorded op to the end of the last.
    pub fn elapsed_ns(&self) -> u64 {
        self.first_ns.map_or(0, |f| self.last_ns.saturating_sub(f))
    }

    pub fn latency(&self) -> LatencyNs {
        LatencyNs::from_histogram(&self.lat)
    }

    pub(crate) fn sync_latency(&self) -> Option<LatencyNs> {
        self.sync_lat.as_ref().map(LatencyNs::from_histogram)
    }
}

/// Runs `op(i)` for i = 0, 1, ... until `limits` or `stop`. `op` does one op's writes and
/// its sync call, returning the call's (start, end) monotonic ns if it made one;
/// `has_sync` says whether ops make one, `sync_ends_op` whether the call's end is the op's
/// end (otherwise the op does more after it, and a clock read ends it). The first error ends the loop and is returned
/// beside what was recorded until then.
pub fn run<E>(
    limits: &Limits,
    has_sync: bool,
    sync_ends_op: bool,
    stop: &AtomicBool,
    mut op: impl FnMut(u64) -> Result<Option<(u64, u64)>, E>,
) -> (Timed, Result<(), E>) {
    let mut t = Timed::new(has_sync);
    let dur = limits.duration.as_nanos() as u64;
    let mut t0 = monotonic_ns();
    let mut deadline = t0 + dur;
    let result = loop {
        if stop.load(Ordering::Relaxed) {
            t.stopped = true;
            break Ok(());
        }
        let sync = match op(t.attempted) {
            Ok(s) => s,
            Err(e) => break Err(e),
        };
        let t1 = match sync {
            Some((_, s1)) if sync_ends_op => s1,
            _ => monotonic_ns(),
        };
        t.attempted += 1;
        if t.attempted > limits.warmup_ops {
            t.record(t0, sync, t1);
            if t.ops >= limits.max_ops || t1 >= deadline {
                break Ok(());
            }
        } else if t.attempted == limits.warmup_ops {
            deadline = t1 + dur;
        }
        t0 = t1;
    };
    (t, result)
}

/// As [`run`] for ops without a sync call (no warm-up), timing only op 0, `every`,
/// 2 * `every`, ... (a clock read before and after each) while counting every op: the
/// histogram holds one op in `every`, `ops` all of them, and `first_ns`/`last_ns` are
/// read at the start and the end, so ops/s is pg_test_fsync's (ops over the test's time)
/// without a clock read per op. The time limit and `max_ops` are looked at on the timed
/// ops; `stop` on every op.
pub fn run_sampled<E>(
    limits: &Limits,
    every: u64,
    stop: &AtomicBool,
    mut op: impl FnMut(u64) -> Result<(), E>,
) -> (Timed, Result<(), E>) {
    let every = every.max(1);
    let mut t = Timed::new(false);
    let start = monotonic_ns();
    let deadline = start + limits.duration.as_nanos() as u64;
    t.first_ns = Some(start);
    let result = loop {
        if stop.load(Ordering::Relaxed) {
            t.stopped = true;
            break Ok(());
        }
        let i = t.attempted;
        if !i.is_multiple_of(every) {
            if let Err(e) = op(i) {
                break Err(e);
            }
            t.attempted += 1;
            t.ops += 1;
            if t.ops >= limits.max_ops {
                break Ok(());
            }
            continue;
        }
        let t0 = monotonic_ns();
        if let Err(e) = op(i) {
            break Err(e);
        }
        let t1 = monotonic_ns();
        directio::record_ns(&mut t.lat, t1 - t0);
        t.attempted += 1;
        t.ops += 1;
        if t.ops >= limits.max_ops || t1 >= deadline {
            break Ok(());
        }
    };
    t.last_ns = monotonic_ns();
    (t, result)
}

/// Calls `sync` on `f`, returning its (start, end) monotonic ns.
#[inline]
pub(crate) fn timed_call(
    f: &File,
    sync: impl FnOnce(&File) -> std::io::Result<()>,
) -> std::io::Result<(u64, u64)> {
    let s0 = monotonic_ns();
    sync(f)?;
    Ok((s0, monotonic_ns()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warmup_is_not_recorded_and_max_ops_ends_the_loop() {
        let d = tempfile::tempdir_in("/var/tmp").unwrap();
        let f = File::options()
            .read(true)
            .write(true)
            .create_new(true)
            .open(d.path().join("f"))
            .unwrap();
        let lim = Limits {
            duration: Duration::from_secs(60),
            warmup_ops: 3,
            max_ops: 10,
        };
        let (t, r) = run(&lim, true, true, &AtomicBool::new(false), |i| {
            write_all_at(&f, &[1u8; 512], i * 512)?;
            timed_call(&f, File::sync_data).map(Some)
        });
        r.map_err(|e: std::io::Error| e).unwrap();
        assert_eq!((t.attempted, t.ops), (13, 10));
        assert_eq!(t.lat.len(), 10);
        assert_eq!(t.sync_lat.as_ref().unwrap().len(), 10);
        assert!(t.sync_lat.unwrap().max() <= t.lat.max(), "sync within op");
        assert_eq!(f.metadata().unwrap().len(), 13 * 512, "warm-up ops did run");
        assert!(!t.stopped);
    }

    #[test]
    fn sampled_ops_are_all_counted_and_one_in_every_is_timed() {
        let lim = Limits {
            duration: Duration::from_secs(60),
            warmup_ops: 0,
            max_ops: 100,
        };
        let mut seen = vec![];
        let (t, r) = run_sampled(&lim, 16, &AtomicBool::new(false), |i| {
            seen.push(i);
            Ok::<_, ()>(())
        });
        r.unwrap();
        // Ops 0, 16, ..., 96 timed.
        assert_eq!((t.ops, t.attempted), (100, 100));
        assert_eq!(seen, (0..100).collect::<Vec<u64>>());
        assert_eq!(t.lat.len(), 7, "one op in 16 is in the histogram");
        assert!(t.sync_lat.is_none());
        assert!(t.last_ns >= t.first_ns.unwrap());
        // Every op times itself when every = 1, as `run` does.
        let (t, _) = run_sampled(&lim, 1, &AtomicBool::new(false), |_| Ok::<_, ()>(()));
        assert_eq!((t.ops, t.lat.len()), (100, 100));
        // An error ends it, keeping the count.
        let (t, r) = run_sampled(&lim, 16, &AtomicBool::new(false), |i| {
            if i == 40 {
                Err("boom")
            } else {
                Ok(())
            }
        });
        assert_eq!((r, t.ops, t.lat.len()), (Err("boom"), 40, 3));
    }

    #[test]
    fn an_error_ends_the_loop_and_keeps_what_was_recorded() {
        let lim = Limits {
            duration: Duration::from_secs(60),
            warmup_ops: 0,
            max_ops: u64::MAX,
        };
        let (t, r) = run(&lim, false, false, &AtomicBool::new(false), |i| {
            if i == 5 {
                Err("boom")
            } else {
                Ok(None)
            }
        });
        assert_eq!(r, Err("boom"));
        assert_eq!(t.ops, 5);
        let stop = AtomicBool::new(true);
        let (t, r) = run(&lim, false, false, &stop, |_| Ok::<_, ()>(None));
        assert!(r.is_ok() && t.stopped && t.ops == 0);
    }
}
