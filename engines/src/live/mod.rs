//! `record --listen ADDR`: a live `/metrics` endpoint fed by the diskstats sampler's
//! own samples (no second reader of /proc/diskstats).
//!
//! The sampler thread owns a [`Tap`]: for every device it sees in a sample it keeps the
//! counters, spreads each interval's bytes over aligned 1/10/100 ms windows exactly as
//! `report` does ([`report::analysis::window_sums`]), keeps the highest window
//! rate, and collects the completed 10 ms bins. At the end of each sample it hands what
//! it has to the shared [`Live`] with `try_lock`: when a scrape holds the lock, the
//! sampler keeps its figures and hands them over at the next sample, so a scrape never
//! makes the sampler wait. The scrape ([`http`]) copies the shared state under the lock
//! and renders outside it.
//!
//! Memory is bounded: per device two rings of [`HISTORY_BINS`] 10 ms bins (60 s, f32:
//! 48 KiB) and a few numbers; the pending bins on the sampler side (a few, handed over
//! every sample) are capped the same.

pub mod http;
pub mod render;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use collectors::diskstats::{counter_delta, DiskCounters, F_SECTORS_READ, F_SECTORS_WRITTEN};

pub(crate) use crate::export::names::{WINDOWS_NS, WINDOW_LABELS};
/// Which of [`WINDOWS_NS`] is the 10 ms bin of the burst finder (as `report`'s).
const BIN_WINDOW: usize = 1;
/// 10 ms bins kept per device and direction: 60 s.
const HISTORY_BINS: usize = 6000;
/// The UI average the live hidden factor divides by: the last 30 s (`report`'s
/// `--ui-average` default).
const UI_WINDOW_BINS: usize = 3000;
/// Directions, in the order of every `[_; 2]` here.
const DIRECTIONS: [&str; 2] = ["read", "write"];
const SECTOR: f64 = 512.0;

/// One aligned window grid (`[k*w, (k+1)*w)` on the run clock) being filled.
#[derive(Debug, Clone, Copy)]
struct Acc {
    width: u64,
    k: u64,
    sum: f64,
    started: bool,
}

impl Acc {
    fn new(width: u64) -> Acc {
        Acc {
            width,
            k: 0,
            sum: 0.0,
            started: false,
        }
    }

    /// Spreads `v` over `[t0, t1)` in proportion to overlap; `done(sum)` for each window
    /// that completes, including (at most `cap`) empty ones skipped over.
    fn add(&mut self, t0: u64, t1: u64, v: f64, cap: usize, done: &mut impl FnMut(f64)) {
        if t1 <= t0 {
            return;
        }
        let w = self.width;
        if !self.started {
            self.k = t0 / w;
            self.started = true;
        }
        let span = (t1 - t0) as f64;
        let mut a = t0;
        loop {
            let end = (self.k + 1) * w;
            if a >= end {
                done(self.sum);
                let nk = a / w;
                let skipped = (nk - self.k - 1).min(cap as u64);
                for _ in 0..skipped {
                    done(0.0);
                }
                self.k = nk;
                self.sum = 0.0;
                continue;
            }
            if a >= t1 {
                break;
            }
            let b = t1.min(end);
            self.sum += v * (b - a) as f64 / span;
            a = b;
        }
    }
}

/// Sampler-side state of one device.
struct DevLocal {
    name: String,
    last: Option<(u64, DiskCounters)>,
    /// `[direction][window]`.
    acc: [[Acc; 3]; 2],
    peak: [[f64; 3]; 2],
    /// Completed 10 ms bins (bytes) not yet handed over, per direction.
    bins: [Vec<f32>; 2],
}

impl DevLocal {
    fn new(name: String) -> DevLocal {
        let accs = WINDOWS_NS.map(Acc::new);
        DevLocal {
            name,
            last: None,
            acc: [accs, accs],
            peak: [[0.0; 3]; 2],
            // Handed over every sample: a few bins, more only while scrapes hold the lock.
            bins: [Vec::with_capacity(64), Vec::with_capacity(64)],
        }
    }
}

/// What a scrape sees of one device.
#[derive(Debug, Clone)]
pub struct DevState {
    pub name: String,
    pub counters: DiskCounters,
    /// Highest rate (bytes/s) over each of [`WINDOWS_NS`] since the previous scrape,
    /// `[direction][window]`.
    pub peak: [[f64; 3]; 2],
    /// The last [`HISTORY_BINS`] 10 ms bins (bytes), oldest first, per direction.
    pub history: [VecDeque<f32>; 2],
    /// Bins handed over since the start, per direction: a reader that keeps its own copy
    /// takes the last `bins_total - seen` of `history` (`demo`'s and `run`'s progress).
    pub bins_total: [u64; 2],
}

/// What a scrape reads, copied out of the lock.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub devices: Vec<DevState>,
    /// diskstats samples taken so far.
    pub samples: u64,
    /// Run clock of the last sample, ns.
    pub t_ns: u64,
    pub interval_ns: u64,
}

/// The state shared between the sampler and the HTTP thread.
#[derive(Debug)]
pub struct Live {
    inner: Mutex<Snapshot>,
}

impl Live {
    pub fn new(interval_ns: u64) -> Arc<Live> {
        Arc::new(Live {
            inner: Mutex::new(Snapshot {
                interval_ns,
                ..Default::default()
            }),
        })
    }

    /// The sampler's tap feeding this state.
    pub fn tap(self: &Arc<Live>) -> Tap {
        Tap {
            live: self.clone(),
            devs: vec![],
            samples: 0,
        }
    }

    /// A copy of the state for one scrape; the peaks start again from 0 ("since the
    /// last scrape").
    pub fn scrape(&self) -> Snapshot {
        let mut g = match self.inner.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let s = g.clone();
        for d in g.devices.iter_mut() {
            d.peak = [[0.0; 3]; 2];
        }
        s
    }
}

/// `record --listen`: serves `live` on `listener` (both or neither) and says where on
/// stderr; the server stops when the returned value is dropped.
pub fn serve_and_say(
    listener: Option<std::net::TcpListener>,
    live: Option<Arc<Live>>,
) -> anyhow::Result<Option<http::Server>> {
    let (Some(l), Some(live)) = (listener, live) else {
        return Ok(None);
    };
    let s = http::serve(l, live)?;
    eprintln!("serving live metrics at http://{}/metrics", s.addr);
    Ok(Some(s))
}

/// The diskstats sampler's side: fed every observation, hands over once a sample.
pub struct Tap {
    live: Arc<Live>,
    devs: Vec<Option<DevLocal>>,
    samples: u64,
}

impl Tap {
    /// One device's counters at `t` (run clock, ns); `idx` is the sampler's own index
    /// of the device (stable for the run).
    pub fn observe(&mut self, idx: usize, name: &[u8], t: u64, c: &DiskCounters) {
        if idx >= self.devs.len() {
            self.devs.resize_with(idx + 1, || None);
        }
        let d = self.devs[idx]
            .get_or_insert_with(|| DevLocal::new(String::from_utf8_lossy(name).into_owned()));
        if let Some((t0, prev)) = d.last {
            for (dir, field) in [F_SECTORS_READ, F_SECTORS_WRITTEN].into_iter().enumerate() {
                let Some(delta) = counter_delta(field, prev.f[field], c.f[field]) else {
                    continue;
                };
                let v = delta as f64 * SECTOR;
                for (w, width) in WINDOWS_NS.iter().enumerate() {
                    let peak = &mut d.peak[dir][w];
                    let bins = &mut d.bins[dir];
                    let rate = |sum: f64| sum / (*width as f64 / 1e9);
                    let mut done = |sum: f64| {
                        *peak = peak.max(rate(sum));
                        if w == BIN_WINDOW {
                            if bins.len() == HISTORY_BINS {
                                // Not handed over for a minute: keep the newest.
                                bins.remove(0);
                            }
                            bins.push(sum as f32);
                        }
                    };
                    d.acc[dir][w].add(t0, t, v, HISTORY_BINS, &mut done);
                }
            }
        }
        d.last = Some((t, *c));
    }

    /// The end of a sample: hand everything over unless a scrape holds the lock.
    pub fn sample_done(&mut self, t: u64) {
        self.samples += 1;
        let Ok(mut g) = self.live.inner.try_lock() else {
            return;
        };
        g.samples = self.samples;
        g.t_ns = t;
        for (i, d) in self.devs.iter_mut().enumerate() {
            let Some(d) = d else { continue };
            while g.devices.len() <= i {
                g.devices.push(DevState {
                    name: String::new(),
                    counters: DiskCounters::default(),
                    peak: [[0.0; 3]; 2],
                    history: Default::default(),
                    bins_total: [0; 2],
                });
            }
            let s = &mut g.devices[i];
            if s.name.is_empty() {
                s.name = d.name.clone();
                for h in s.history.iter_mut() {
                    h.reserve(HISTORY_BINS);
                }
            }
            if let Some((_, c)) = d.last {
                s.counters = c;
            }
            for dir in 0..2 {
                for w in 0..3 {
                    s.peak[dir][w] = s.peak[dir][w].max(d.peak[dir][w]);
                    d.peak[dir][w] = 0.0;
                }
                for b in d.bins[dir].drain(..) {
                    if s.history[dir].len() == HISTORY_BINS {
                        s.history[dir].pop_front();
                    }
                    s.history[dir].push_back(b);
                    s.bins_total[dir] += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters(read_sectors: u64, written_sectors: u64) -> DiskCounters {
        let mut c = DiskCounters {
            nfields: 17,
            ..Default::default()
        };
        c.f[F_SECTORS_READ] = read_sectors;
        c.f[F_SECTORS_WRITTEN] = written_sectors;
        c
    }

    #[test]
    fn acc_spreads_by_overlap_like_window_sums() {
        let mut a = Acc::new(10);
        let mut out = vec![];
        a.add(5, 15, 100.0, 100, &mut |s| out.push(s));
        a.add(15, 20, 50.0, 100, &mut |s| out.push(s));
        assert_eq!(out, vec![50.0, 100.0]);
        // A gap of three empty windows, then a sample ending on a boundary.
        a.add(20, 60, 0.0, 100, &mut |s| out.push(s));
        assert_eq!(out, vec![50.0, 100.0, 0.0, 0.0, 0.0, 0.0]);
    }

    #[test]
    fn a_burst_gives_a_10ms_peak_far_above_the_mean_and_bins_to_the_scrape() {
        let live = Live::new(1_000_000);
        let mut tap = live.tap();
        // 1 s of 1 ms samples; 8 MiB written between 500 and 504 ms, nothing else.
        let mut written = 0u64;
        for k in 0..=1000u64 {
            let t = k * 1_000_000;
            if (501..=504).contains(&k) {
                written += 8 * 1024 * 1024 / 512 / 4;
            }
            tap.observe(3, b"loop9", t, &counters(0, written));
            tap.sample_done(t);
        }
        let s = live.scrape();
        assert_eq!(s.samples, 1001);
        let d = &s.devices[3];
        assert_eq!(d.name, "loop9");
        let mib = 1024.0 * 1024.0;
        // 8 MiB in 4 ms: 2000 MiB/s in every 1 ms window, 800 MiB/s in the 10 ms one.
        assert!((d.peak[1][0] / mib - 2000.0).abs() < 1.0, "{:?}", d.peak);
        assert!((d.peak[1][1] / mib - 800.0).abs() < 1.0, "{:?}", d.peak);
        assert!((d.peak[1][2] / mib - 80.0).abs() < 1.0, "{:?}", d.peak);
        assert_eq!(d.peak[0], [0.0; 3]);
        assert_eq!(d.history[1].len(), 100);
        assert_eq!(d.bins_total[1], 100);
        let total: f64 = d.history[1].iter().map(|&b| b as f64).sum();
        assert!((total / mib - 8.0).abs() < 1e-3, "{total}");
        // Peaks are since the last scrape.
        assert_eq!(live.scrape().devices[3].peak[1], [0.0; 3]);
    }

    #[test]
    fn a_held_lock_delays_the_handover_and_loses_nothing() {
        let live = Live::new(1_000_000);
        let mut tap = live.tap();
        tap.observe(0, b"vda", 0, &counters(0, 0));
        tap.sample_done(0);
        {
            let _held = live.inner.lock().unwrap();
            for k in 1..=50u64 {
                tap.observe(0, b"vda", k * 1_000_000, &counters(k * 10, 0));
                tap.sample_done(k * 1_000_000);
            }
        }
        tap.observe(0, b"vda", 51_000_000, &counters(510, 0));
        tap.sample_done(51_000_000);
        let s = live.scrape();
        assert_eq!(s.samples, 52);
        assert_eq!(s.devices[0].counters.f[F_SECTORS_READ], 510);
        assert_eq!(s.devices[0].history[0].len(), 5);
    }
}
