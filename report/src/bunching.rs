//! Rates a disk can do (issue 23 item 6): telling a burst from completion bunching.
//!
//! diskstats counts a request's bytes when it *completes*. After a stall (a cache flush,
//! a frozen file system under a loop device, a host that paused the virtual disk) the
//! requests that waited complete together, and one 1 ms or 10 ms window holds bytes the
//! device moved over the whole stall: "224 MiB in one 10 ms bin", "116 GiB/s at 1 ms" on
//! a virtio disk. That is not a rate the device did, and the report must not headline it.
//!
//! # The rule
//! Each diskstats interval `(t0, t1]` says how many I/Os completed in it (`writes` or
//! `reads`), their bytes, and the time they spent in service (`write_ms` / `read_ms`: the
//! kernel adds each request's issue-to-completion time when it completes). Their mean
//! service time is `L = Δms / ΔI/Os`. The *service-time* series counts the interval's
//! bytes uniformly over `[min(t0, t1 - L), t1)`: over the time its I/Os were in service,
//! not at the instant they completed (an interval longer than `L` keeps its own span, so
//! a steady stream of short requests is counted exactly as at completion). `L` is capped
//! at [`LAG_MAX_NS`] (the pass holds that much look-back); a longer one is counted over
//! 10 s, which overstates the rate, never understates it.
//!
//! Its peaks over the same aligned windows (1 ms, 10 ms, 100 ms, 1 s) are summary.json's
//! `service_peak_mib_s`. A window width's completion peak (`peak_mib_s`) is **completion
//! bunching** when it is more than [`RATIO`] (2) times that width's service-time peak:
//! then more than half of the peak window's bytes were in service for longer than the
//! window, so they were moved over a longer time than it. A steady pipeline at any queue
//! depth is not bunching (Little's law: its completions per window are its rate, and
//! spreading each over its service time gives the same figure back), nor is a real 40 ms
//! burst of 5 ms writes at 10 ms.
//!
//! What the report does with it ([`super::derive::headline`]): a bunched width is never
//! the headline figure; the headline quotes the 10 ms peak, or, when that is bunching, the
//! 10 ms service-time peak and says so; summary.json lists the bunched widths
//! (`bunched`), the tables mark them, the throughput charts' y axis stops at the
//! service-time 1 ms peak and says what it clipped.
//!
//! # A plausible bound
//! A headline peak above [`PLAUSIBLE_MIB_S`] (16 GiB/s: more than one PCIe 5.0 x4 NVMe
//! drive moves, ~14 GiB/s) carries a caveat: a cache in between (a loop device's page
//! cache, a hypervisor's) answered, not a disk. With `--trace`, block_requests.csv.gz
//! holds each request's own issue and completion: spreading each over its own service time
//! would be exact; this module uses the per-interval mean (issue 23 leaves that for later).
//!
//! Units: ns on the run clock, bytes, MiB/s (2^20 bytes per second) in the peaks.

use std::collections::VecDeque;

use format::summary::Peaks;

/// The longest service time an interval's bytes are spread back over, ns.
const LAG_MAX_NS: u64 = 10_000_000_000;
/// A completion peak more than this many times the service-time peak is bunching.
const RATIO: f64 = 2.0;
/// Above this a peak carries a caveat (see the module doc), MiB/s.
pub(crate) const PLAUSIBLE_MIB_S: f64 = 16.0 * 1024.0;
/// The window widths of [`Peaks`], ns, with their summary.json names.
const WIDTHS: [(u64, &str); 4] = [
    (1_000_000, "1ms"),
    (10_000_000, "10ms"),
    (100_000_000, "100ms"),
    (1_000_000_000, "1s"),
];

const MIB: f64 = 1024.0 * 1024.0;

/// How long before `t1` the bytes of an interval `(t0, t1]` whose `ios` completions
/// spent `ms` in service in all are counted from, ns (the module's rule): the interval's
/// own length, or the I/Os' mean service time when that is longer (at most
/// [`LAG_MAX_NS`]).
fn service_span_ns(t0: u64, t1: u64, ios: Option<f64>, ms: Option<f64>) -> u64 {
    let lag_ns = match (ios, ms) {
        (Some(n), Some(m)) if n > 0.0 && m > 0.0 => (m / n * 1e6).min(LAG_MAX_NS as f64) as u64,
        _ => 0,
    };
    (t1 - t0.min(t1)).max(lag_ns)
}

/// The highest window sum of `n` windows of `width` ns, of values spread uniformly over
/// spans that may reach back up to [`LAG_MAX_NS`] before the latest row: the windows
/// that a later span can still touch are held (a window's full share goes through a
/// difference list, so a span costs O(1) whatever its length).
#[derive(Debug, Clone)]
struct ServiceMax {
    width: u64,
    n: usize,
    /// The first window held.
    base: usize,
    /// Running sum of `diff` up to the window before `base`.
    run: f64,
    /// Per held window: the change of the full-window share from the previous window,
    /// and the partial shares of spans that start or end inside it.
    diff: VecDeque<f64>,
    part: VecDeque<f64>,
    max: f64,
}

impl ServiceMax {
    pub fn new(width: u64, n: usize) -> ServiceMax {
        ServiceMax {
            width,
            n,
            base: 0,
            run: 0.0,
            diff: VecDeque::new(),
            part: VecDeque::new(),
            max: 0.0,
        }
    }

    fn slot(&mut self, k: usize) -> Option<usize> {
        let i = k.checked_sub(self.base)?;
        if i >= self.diff.len() {
            self.diff.resize(i + 1, 0.0);
            self.part.resize(i + 1, 0.0);
        }
        Some(i)
    }

    /// `v` spread uniformly over `[a, b)`. A span reaching before the windows still held
    /// (a row that came late) starts at the first held one.
    pub fn add(&mut self, a: u64, b: u64, v: f64) {
        if v == 0.0 || b <= a || self.n == 0 {
            return;
        }
        let w = self.width;
        // What falls before the first window held is dropped, not piled into it.
        let rate = v / (b - a) as f64;
        let a = a.max(self.base as u64 * w);
        if b <= a {
            return;
        }
        let v = rate * (b - a) as f64;
        let ka = (a / w) as usize;
        let kb = ((b - 1) / w) as usize;
        if ka >= self.n {
            return;
        }
        if ka == kb {
            if let Some(i) = self.slot(ka) {
                self.part[i] += v;
            }
            return;
        }
        if let Some(i) = self.slot(ka) {
            self.part[i] += rate * ((ka as u64 + 1) * w - a) as f64;
        }
        if kb < self.n {
            if let Some(i) = self.slot(kb) {
                self.part[i] += rate * (b - kb as u64 * w) as f64;
            }
        }
        let (m0, m1) = (ka + 1, kb.min(self.n));
        if m0 < m1 {
            let full = rate * w as f64;
            if let Some(i) = self.slot(m0) {
                self.diff[i] += full;
            }
            if m1 < self.n {
                if let Some(i) = self.slot(m1) {
                    self.diff[i] -= full;
                }
            }
        }
    }

    /// Closes the windows that end at or before `t` (no later span reaches them).
    pub fn settle(&mut self, t: u64) {
        let upto = ((t / self.width) as usize).min(self.n);
        while self.base < upto {
            let d = self.diff.pop_front().unwrap_or(0.0);
            let p = self.part.pop_front().unwrap_or(0.0);
            self.run += d;
            self.max = self.max.max(self.run + p);
            self.base += 1;
            if self.diff.is_empty() && self.run.abs() < 1e-6 {
                // Nothing held: skip the empty windows at once.
                self.run = 0.0;
                self.base = upto;
            }
        }
    }

    /// The highest window's rate, per second (NaN when no window fits the run).
    pub(crate) fn peak_rate(&self) -> f64 {
        if self.n == 0 {
            return f64::NAN;
        }
        let mut run = self.run;
        let mut max = self.max;
        for (d, p) in self.diff.iter().zip(&self.part) {
            run += d;
            max = max.max(run + p);
        }
        max / (self.width as f64 / 1e9)
    }
}

/// One direction's service-time peaks at the four widths.
#[derive(Debug, Clone)]
pub struct Service {
    peaks: [ServiceMax; 4],
}

impl Service {
    /// For a run of `duration_ns` (windows that fit it, as the completion peaks).
    pub fn new(duration_ns: u64) -> Service {
        Service {
            peaks: WIDTHS.map(|(w, _)| ServiceMax::new(w, (duration_ns / w) as usize)),
        }
    }

    /// The interval `(t0, t1]`: `bytes` completed by `ios` I/Os that spent `ms` in service.
    #[inline]
    pub fn add(&mut self, t0: u64, t1: u64, bytes: f64, ios: Option<f64>, ms: Option<f64>) {
        let len = service_span_ns(t0, t1, ios, ms);
        if len == 0 {
            return;
        }
        // A span reaching before the run's zero keeps its rate: its share before 0 was
        // moved before the recording, and is not counted in the first window.
        let a = t1.saturating_sub(len);
        let kept = bytes * (t1 - a) as f64 / len as f64;
        for p in self.peaks.iter_mut() {
            p.add(a, t1, kept);
            p.settle(t1.saturating_sub(LAG_MAX_NS));
        }
    }

    /// The peaks, MiB/s.
    pub fn peaks(&self) -> Peaks {
        let p = |i: usize| self.peaks[i].peak_rate() / MIB;
        Peaks {
            p1ms: p(0),
            p10ms: p(1),
            p100ms: p(2),
            p1s: p(3),
        }
    }
}

/// The widths (summary.json names) whose completion peak is bunching: more than
/// [`RATIO`] times the service-time peak of the same width.
pub fn bunched(completion: &Peaks, service: &Peaks) -> Vec<String> {
    let pairs = [
        (completion.p1ms, service.p1ms),
        (completion.p10ms, service.p10ms),
        (completion.p100ms, service.p100ms),
        (completion.p1s, service.p1s),
    ];
    WIDTHS
        .iter()
        .zip(pairs)
        .filter(|(_, (c, s))| c.is_finite() && s.is_finite() && *c > RATIO * *s)
        .map(|((_, name), _)| name.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// 1 ms rows of a device writing `per_ms` bytes a millisecond with `lat_ms` service
    /// time each, at queue depth `lat_ms`: every interval completes its share.
    fn steady(s: &mut Service, from_ms: u64, to_ms: u64, per_ms: f64, lat_ms: f64) {
        for k in from_ms..to_ms {
            // 4 I/Os a ms, each lat_ms in service.
            s.add(k * MS, (k + 1) * MS, per_ms, Some(4.0), Some(4.0 * lat_ms));
        }
    }

    #[test]
    fn a_steady_deep_queue_is_counted_as_at_completion() {
        let mut s = Service::new(2_000 * MS);
        steady(&mut s, 0, 2_000, 1024.0 * 1024.0, 8.0);
        let p = s.peaks();
        // 1 MiB a ms is 1000 MiB/s whatever the queue depth.
        for x in [p.p1ms, p.p10ms, p.p100ms, p.p1s] {
            assert!((x - 1000.0).abs() < 1.0, "{p:?}");
        }
    }

    #[test]
    fn a_backlog_completing_at_once_is_bunching_and_a_short_burst_is_not() {
        let mut s = Service::new(3_000 * MS);
        // A real 40 ms burst of 5 ms writes at 1 GiB/s (1 MiB a ms) at 1 s.
        steady(&mut s, 1_000, 1_040, 1024.0 * 1024.0, 5.0);
        // 32 MiB that waited 450 ms complete in one 1 ms interval at 2.5 s: 64 I/Os.
        s.add(
            2_499 * MS,
            2_500 * MS,
            32.0 * MIB,
            Some(64.0),
            Some(64.0 * 450.0),
        );
        let service = s.peaks();
        // As diskstats counts them: the backlog's 32 MiB in one 1 ms and one 10 ms window.
        let completion = Peaks {
            p1ms: 32.0 * 1024.0,
            p10ms: 3276.8,
            p100ms: 400.0,
            p1s: 40.0,
        };
        // 32 MiB over 450 ms is ~71 MiB/s; the burst's 1000 MiB/s stands at 1 and 10 ms
        // (at 100 ms a little less: its first writes were in service before 1 s).
        assert!((service.p1ms - 1000.0).abs() < 5.0, "{service:?}");
        assert!((service.p10ms - 1000.0).abs() < 5.0, "{service:?}");
        assert!(
            service.p100ms > 350.0 && service.p100ms < 400.0,
            "{service:?}"
        );
        assert_eq!(bunched(&completion, &service), ["1ms", "10ms"]);
        // Without the backlog, the burst's own figures are not bunching.
        let burst = Peaks {
            p1ms: 1000.0,
            p10ms: 1000.0,
            p100ms: 400.0,
            p1s: 40.0,
        };
        assert!(bunched(&burst, &service).is_empty());
    }

    #[test]
    fn a_long_span_is_spread_by_overlap_across_windows() {
        let mut m = ServiceMax::new(10 * MS, 100);
        // 30 units over 5..35 ms: 5, 10, 10, 5 in windows 0..3.
        m.add(5 * MS, 35 * MS, 30.0);
        m.settle(1_000 * MS);
        assert!(
            (m.peak_rate() - 10.0 / 0.01).abs() < 1e-6,
            "{}",
            m.peak_rate()
        );
        // The lag cap: a 60 s service time is counted over 10 s; a short one over the
        // interval itself.
        let t = 100 * 1_000 * MS;
        assert_eq!(
            service_span_ns(t, t + MS, Some(1.0), Some(60_000.0)),
            LAG_MAX_NS
        );
        assert_eq!(service_span_ns(t, t + 5 * MS, Some(1.0), Some(1.0)), 5 * MS);
    }
}
