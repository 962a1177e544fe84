//! What a probe measures, per window and in total.
//!
//! Each job thread owns a [`WindowStats`] and records every I/O into it without locks
//! or allocation: counts, exact moments (min/max/mean/stddev) and HdrHistograms (ns,
//! 3 significant digits, fixed size). When a window ends the thread hands the whole
//! `WindowStats` to the aggregator and takes a cleared one from its free list; the
//! aggregator merges windows into the run totals and into the rows of `probe.csv`.
//!
//! Latency kinds (ns), in fio's words where fio has them:
//! - `slat`: from when the I/O was ready to go to when the system call that submitted
//!   it returned (io_uring and libaio; 0 samples for the sync engine, as in fio);
//! - `clat`: from there to when the job reaped the completion (for the sync engine: the
//!   `pread`/`pwrite` call itself, as fio's psync); see decision 0090;
//! - `lat`: `slat + clat`;
//! - `lat_co` (ours): from the I/O's intended start on the rate schedule to completion:
//!   an I/O that started late because the device was slow counts its wait (coordinated
//!   omission corrected). Without a rate, the intended start is when a queue slot came
//!   free, and `lat_co` equals `lat`.
//! - `sync`: each fsync/fdatasync, from its submission to its completion.

use hdrhistogram::Histogram;

use crate::directio::{latency_histogram, record_ns};

pub const READ: usize = 0;
pub const WRITE: usize = 1;
/// fio's third direction: discards (`rw=trim`, `randtrim`, `trimwrite`).
pub const TRIM: usize = 2;
/// Directions a window counts: read, write, trim (fio's order).
pub const DIRS: usize = 3;

/// Exact count, sum, sum of squares, min and max of latencies in ns.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Moments {
    pub n: u64,
    pub sum: u64,
    sumsq: u128,
    pub min: u64,
    pub max: u64,
}

impl Moments {
    #[inline]
    pub fn add(&mut self, v: u64) {
        if self.n == 0 || v < self.min {
            self.min = v;
        }
        if v > self.max {
            self.max = v;
        }
        self.n += 1;
        self.sum += v;
        self.sumsq += v as u128 * v as u128;
    }

    pub fn merge(&mut self, o: &Moments) {
        if o.n == 0 {
            return;
        }
        if self.n == 0 || o.min < self.min {
            self.min = o.min;
        }
        self.max = self.max.max(o.max);
        self.n += o.n;
        self.sum += o.sum;
        self.sumsq += o.sumsq;
    }

    pub fn mean(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum as f64 / self.n as f64
        }
    }

    /// Sample standard deviation (n - 1), as fio prints it.
    pub fn stddev(&self) -> f64 {
        if self.n < 2 {
            return 0.0;
        }
        let n = self.n as f64;
        let mean = self.sum as f64 / n;
        let var = (self.sumsq as f64 - n * mean * mean) / (n - 1.0);
        var.max(0.0).sqrt()
    }
}

/// One direction (read, write or trim) in one window, or in total.
pub struct DirStats {
    pub ios: u64,
    pub bytes: u64,
    /// Completions that moved fewer bytes than asked.
    pub short_ios: u64,
    pub clat: Histogram<u64>,
    pub lat_co: Histogram<u64>,
    pub clat_m: Moments,
    pub lat_m: Moments,
    pub slat_m: Moments,
}

impl Default for DirStats {
    fn default() -> Self {
        DirStats::new()
    }
}

impl DirStats {
    pub fn new() -> DirStats {
        DirStats {
            ios: 0,
            bytes: 0,
            short_ios: 0,
            clat: latency_histogram(),
            lat_co: latency_histogram(),
            clat_m: Moments::default(),
            lat_m: Moments::default(),
            slat_m: Moments::default(),
        }
    }

    fn reset(&mut self) {
        self.ios = 0;
        self.bytes = 0;
        self.short_ios = 0;
        self.clat.reset();
        self.lat_co.reset();
        self.clat_m = Moments::default();
        self.lat_m = Moments::default();
        self.slat_m = Moments::default();
    }

    pub fn merge(&mut self, o: &DirStats) {
        self.ios += o.ios;
        self.bytes += o.bytes;
        self.short_ios += o.short_ios;
        if !o.clat.is_empty() {
            self.clat.add(&o.clat).expect("same histogram bounds");
        }
        if !o.lat_co.is_empty() {
            self.lat_co.add(&o.lat_co).expect("same histogram bounds");
        }
        self.clat_m.merge(&o.clat_m);
        self.lat_m.merge(&o.lat_m);
        self.slat_m.merge(&o.slat_m);
    }
}

/// Everything recorded in one window (or merged over many).
pub struct WindowStats {
    pub dir: [DirStats; DIRS],
    pub sync_ios: u64,
    pub sync: Histogram<u64>,
    pub sync_m: Moments,
}

impl Default for WindowStats {
    fn default() -> Self {
        WindowStats::new()
    }
}

impl WindowStats {
    /// Allocates the histograms (about 1.3 MiB); recording never allocates afterwards.
    pub fn new() -> WindowStats {
        WindowStats {
            dir: [DirStats::new(), DirStats::new(), DirStats::new()],
            sync_ios: 0,
            sync: latency_histogram(),
            sync_m: Moments::default(),
        }
    }

    pub fn reset(&mut self) {
        self.dir.iter_mut().for_each(DirStats::reset);
        self.sync_ios = 0;
        self.sync.reset();
        self.sync_m = Moments::default();
    }

    pub fn merge(&mut self, o: &WindowStats) {
        for (d, od) in self.dir.iter_mut().zip(&o.dir) {
            d.merge(od);
        }
        self.sync_ios += o.sync_ios;
        if !o.sync.is_empty() {
            self.sync.add(&o.sync).expect("same histogram bounds");
        }
        self.sync_m.merge(&o.sync_m);
    }

    pub fn is_empty(&self) -> bool {
        self.dir.iter().all(|d| d.ios == 0) && self.sync_ios == 0
    }

    /// Records one completed read, write or trim. Times are `CLOCK_MONOTONIC` ns:
    /// `intended` <= `start` <= `issue` <= `done`. `async_engine` says whether `slat`
    /// means anything (it does not for the sync engine, as in fio).
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn record_io(
        &mut self,
        dir: usize,
        asked: u64,
        moved: u64,
        intended: u64,
        start: u64,
        issue: u64,
        done: u64,
        async_engine: bool,
    ) {
        let d = &mut self.dir[dir];
        d.ios += 1;
        d.bytes += moved;
        if moved < asked {
            d.short_ios += 1;
        }
        let clat = done.saturating_sub(issue);
        d.clat_m.add(clat);
        record_ns(&mut d.clat, clat);
        d.lat_m.add(done.saturating_sub(start));
        if async_engine {
            d.slat_m.add(issue.saturating_sub(start));
        }
        record_ns(&mut d.lat_co, done.saturating_sub(intended));
    }

    /// Records one fsync/fdatasync.
    #[inline]
    pub(crate) fn record_sync(&mut self, ns: u64) {
        self.sync_ios += 1;
        self.sync_m.add(ns);
        record_ns(&mut self.sync, ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moments_match_a_direct_computation() {
        let mut m = Moments::default();
        let v = [10u64, 20, 30, 40];
        for x in v {
            m.add(x);
        }
        assert_eq!((m.min, m.max, m.n), (10, 40, 4));
        assert!((m.mean() - 25.0).abs() < 1e-9);
        // sample stddev of 10,20,30,40 = sqrt(500/3)
        assert!((m.stddev() - (500.0f64 / 3.0).sqrt()).abs() < 1e-9);
        let mut a = Moments::default();
        a.add(5);
        a.merge(&m);
        assert_eq!((a.min, a.max, a.n, a.sum), (5, 40, 5, 105));
    }

    #[test]
    fn windows_merge_and_reset() {
        let mut a = WindowStats::new();
        let mut b = WindowStats::new();
        a.record_io(READ, 4096, 4096, 0, 10, 20, 1_020, true);
        b.record_io(READ, 4096, 2048, 0, 0, 0, 5_000, true);
        b.record_sync(700);
        a.merge(&b);
        assert_eq!(a.dir[READ].ios, 2);
        assert_eq!(a.dir[READ].bytes, 6144);
        assert_eq!(a.dir[READ].short_ios, 1);
        assert_eq!(a.dir[READ].clat_m.min, 1_000);
        assert_eq!(a.dir[READ].lat_co.len(), 2);
        assert_eq!(a.sync_ios, 1);
        a.reset();
        assert!(a.is_empty());
        assert!(a.dir[READ].clat.is_empty());
    }
}
