//! summary.json's `trace` (issue 11) from `fsync_calls.csv.gz` and
//! `block_requests.csv.gz`: per process the sync calls' latency percentiles, per device
//! and op the requests' service and queue time with biolatency's log2 histogram and the
//! request sizes in log2 buckets, the slowest 10 calls and requests with what else was
//! going on at that ms ([`super::trace_context`]), how the calls line up with the
//! broker devices' write bursts, and the events the kernel lost.
//!
//! Units: the files' ns become µs in percentiles and histograms (`_us`), ms in the
//! slow lists (`_ms`), s on the run clock (`t_s`). Percentiles come from HdrHistograms
//! (3 significant digits), as everywhere in summary.json.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;

use super::interference::percentiles;
use format::block_requests::BlockRequest;
use format::fsync_calls::FsyncCall;
use format::summary::{FsyncProcess, Log2Bucket, RequestGroup};

/// How many of the slowest calls and requests summary.json lists.
pub(crate) const SLOWEST: usize = 10;

/// A sync call counts as starting a burst when it begins up to this long before it: the
/// device sees the writes a sync call causes after the call started.
pub(crate) const LEAD_NS: u64 = 20_000_000;

fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 24 * 3_600_000_000_000, 3)
        .expect("static histogram bounds are valid")
}

#[cfg(test)]
fn pct_of(values_ns: impl Iterator<Item = u64>) -> format::summary::Percentiles {
    let mut h = hist();
    for v in values_ns {
        let _ = h.record(v.max(1));
    }
    percentiles(Some(&h))
}

/// The log2 bucket of `v`: 0 for `[0, 1)`, `k` for `[2^(k-1), 2^k)`.
#[inline]
fn log2_index(v: u64) -> usize {
    if v == 0 {
        0
    } else {
        64 - v.leading_zeros() as usize
    }
}

/// Log2 buckets of `values` (any unit): bucket `[0, 1)`, then `[2^k, 2^(k+1))`, from the
/// first non-empty bucket to the last.
#[cfg(test)]
fn log2_buckets(values: impl Iterator<Item = u64>) -> Vec<Log2Bucket> {
    let mut counts = [0u64; 65];
    for v in values {
        counts[log2_index(v)] += 1;
    }
    log2_of_counts(&counts)
}

/// [`log2_buckets`] of values already counted by [`log2_index`].
fn log2_of_counts(counts: &[u64; 65]) -> Vec<Log2Bucket> {
    let Some(first) = counts.iter().position(|&c| c > 0) else {
        return vec![];
    };
    let last = counts.iter().rposition(|&c| c > 0).unwrap_or(first);
    (first..=last)
        .map(|k| {
            let (lo, hi) = if k == 0 {
                (0, 1)
            } else {
                (
                    1u64 << (k - 1),
                    1u64.checked_shl(k as u32).unwrap_or(u64::MAX),
                )
            };
            Log2Bucket {
                lo,
                hi,
                count: counts[k],
            }
        })
        .collect()
}

/// One process's sync calls, folded as they are read.
#[derive(Debug, Clone)]
struct ProcAcc {
    /// Its first call's comm.
    comm: String,
    by_call: BTreeMap<String, u64>,
    errors: u64,
    total_ns: u64,
    latency: Histogram<u64>,
}

/// One device and op's block requests, folded as they are read.
#[derive(Debug, Clone)]
struct GroupAcc {
    bytes: u64,
    fua: u64,
    preflush: u64,
    errors: u64,
    service: Histogram<u64>,
    queue: Histogram<u64>,
    service_log2_us: [u64; 65],
    size_log2: [u64; 65],
}

/// The slowest `SLOWEST` of what is pushed, by `key` (smaller first), ties in the order
/// pushed: the first `SLOWEST` of a stable sort of everything, holding at most
/// `4 * SLOWEST`.
#[derive(Debug, Clone)]
pub(crate) struct Slowest<T> {
    pub(crate) kept: Vec<T>,
}

impl<T> Default for Slowest<T> {
    fn default() -> Self {
        Slowest { kept: vec![] }
    }
}

impl<T> Slowest<T> {
    fn push<K: Ord>(&mut self, v: T, key: impl Fn(&T) -> K) {
        self.kept.push(v);
        if self.kept.len() >= 4 * SLOWEST {
            self.settle(key);
        }
    }

    fn settle<K: Ord>(&mut self, key: impl Fn(&T) -> K) {
        self.kept.sort_by_key(|v| key(v));
        self.kept.truncate(SLOWEST);
    }
}

fn call_key(c: &FsyncCall) -> (std::cmp::Reverse<u64>, u64) {
    (std::cmp::Reverse(c.dur_ns), c.t_ns)
}

fn request_key(r: &BlockRequest) -> (std::cmp::Reverse<u64>, u64) {
    (std::cmp::Reverse(r.service_ns), r.t_ns)
}

/// A traced run's sync calls and block requests folded in one pass over the files
/// (issue 13 item 3: no row held, so a traced run of hours reports in memory bounded by
/// its processes and device/op pairs): per process, per device and op, the slowest 10 of
/// each. The same figures as every row held gave.
#[derive(Debug, Clone, Default)]
pub struct TraceFold {
    procs: BTreeMap<u32, ProcAcc>,
    /// By device, then op.
    groups: BTreeMap<String, BTreeMap<String, GroupAcc>>,
    dev_bytes: BTreeMap<String, u64>,
    pub(crate) slow_calls: Slowest<FsyncCall>,
    pub(crate) slow_requests: Slowest<BlockRequest>,
    pub calls: u64,
    pub requests: u64,
    /// Sync calls of [`super::episodes::FLUSH_MIN_MS`] or more: span and words (the first
    /// [`LONG_KEPT`]), harm episodes of their own.
    pub(crate) long_calls: Vec<((u64, u64), String)>,
    /// Flush, PREFLUSH and FUA requests served in that long or longer: span and device.
    pub(crate) long_flushes: Vec<((u64, u64), String)>,
}

/// The long sync calls and flush requests kept for the harm episodes.
const LONG_KEPT: usize = 10_000;

impl TraceFold {
    pub fn call(&mut self, c: FsyncCall) {
        self.calls += 1;
        let p = self.procs.entry(c.pid).or_insert_with(|| ProcAcc {
            comm: c.comm.clone(),
            by_call: BTreeMap::new(),
            errors: 0,
            total_ns: 0,
            latency: hist(),
        });
        match p.by_call.get_mut(&c.call) {
            Some(n) => *n += 1,
            None => {
                p.by_call.insert(c.call.clone(), 1);
            }
        }
        p.errors += (c.ret < 0) as u64;
        p.total_ns += c.dur_ns;
        let _ = p.latency.record(c.dur_ns.max(1));
        if c.dur_ns as f64 >= super::episodes::FLUSH_MIN_MS * 1e6
            && self.long_calls.len() < LONG_KEPT
        {
            let file = c.file.rsplit('/').next().unwrap_or("");
            let on = if file.is_empty() {
                String::new()
            } else {
                format!(" on {file}")
            };
            self.long_calls.push((
                (c.t_ns, c.t_ns + c.dur_ns),
                format!(
                    "{} {}{on} at {:.2} s ({} ms)",
                    c.comm,
                    c.call,
                    c.t_ns as f64 / 1e9,
                    format::units::sig(c.dur_ns as f64 / 1e6)
                ),
            ));
        }
        self.slow_calls.push(c, call_key);
    }

    pub fn request(&mut self, r: BlockRequest) {
        self.requests += 1;
        let flushing = r.op == "flush" || r.flags.starts_with('F') || r.flags.ends_with('F');
        if flushing
            && r.service_ns as f64 >= super::episodes::FLUSH_MIN_MS * 1e6
            && self.long_flushes.len() < LONG_KEPT
        {
            self.long_flushes
                .push(((r.t_ns, r.t_ns + r.service_ns), r.device.clone()));
        }
        match self.dev_bytes.get_mut(&r.device) {
            Some(b) => *b += r.bytes,
            None => {
                self.dev_bytes.insert(r.device.clone(), r.bytes);
            }
        }
        // (A key is copied once per device and op, not once per request.)
        if !self.groups.contains_key(&r.device) {
            self.groups.insert(r.device.clone(), BTreeMap::new());
        }
        let Some(ops) = self.groups.get_mut(&r.device) else {
            return;
        };
        if !ops.contains_key(&r.op) {
            ops.insert(
                r.op.clone(),
                GroupAcc {
                    bytes: 0,
                    fua: 0,
                    preflush: 0,
                    errors: 0,
                    service: hist(),
                    queue: hist(),
                    service_log2_us: [0; 65],
                    size_log2: [0; 65],
                },
            );
        }
        let Some(g) = ops.get_mut(&r.op) else {
            return;
        };
        g.bytes += r.bytes;
        g.fua += r.fua() as u64;
        g.preflush += r.preflush() as u64;
        g.errors += (r.error != 0) as u64;
        let _ = g.service.record(r.service_ns.max(1));
        if let Some(q) = r.queue_ns {
            let _ = g.queue.record(q.max(1));
        }
        g.service_log2_us[log2_index(r.service_ns / 1000)] += 1;
        g.size_log2[log2_index(r.bytes)] += 1;
        self.slow_requests.push(r, request_key);
    }

    /// Reads the run's fsync_calls.csv.gz and block_requests.csv.gz (and their chunks)
    /// through the fold: the fold, the readers' warnings, and what could not be read (what
    /// it is, and why, naming the file).
    #[allow(clippy::type_complexity)]
    pub fn read(
        dir: &std::path::Path,
    ) -> (TraceFold, Vec<String>, Vec<(&'static str, anyhow::Error)>) {
        let mut f = TraceFold::default();
        let mut warnings = vec![];
        let mut errors = vec![];
        match format::fsync_calls::for_each(dir, |c| f.call(c)) {
            Ok(w) => warnings.extend(w),
            Err(e) => errors.push(("the traced sync calls", e)),
        }
        match format::block_requests::for_each(dir, |r| f.request(r)) {
            Ok(w) => warnings.extend(w),
            Err(e) => errors.push(("the traced block requests", e)),
        }
        f.slow_calls.settle(call_key);
        f.slow_requests.settle(request_key);
        (f, warnings, errors)
    }

    /// The processes' figures, the busiest first.
    pub(crate) fn processes(&self) -> Vec<FsyncProcess> {
        let mut out: Vec<FsyncProcess> = self
            .procs
            .iter()
            .map(|(&pid, p)| FsyncProcess {
                pid,
                comm: p.comm.clone(),
                by_call: p.by_call.clone(),
                errors: p.errors,
                total_s: p.total_ns as f64 / 1e9,
                latency: percentiles(Some(&p.latency)),
            })
            .collect();
        out.sort_by(|a, b| {
            b.latency
                .count
                .cmp(&a.latency.count)
                .then(a.pid.cmp(&b.pid))
        });
        out
    }

    /// Each process's pid and comm with its number of calls.
    pub(crate) fn process_counts(&self) -> Vec<(u32, String, u64)> {
        self.procs
            .iter()
            .map(|(&pid, p)| (pid, p.comm.clone(), p.latency.len()))
            .collect()
    }

    pub(crate) fn request_groups(&self) -> Vec<RequestGroup> {
        let mut out: Vec<RequestGroup> = self
            .groups
            .iter()
            .flat_map(|(device, ops)| ops.iter().map(move |(op, g)| (device, op, g)))
            .map(|(device, op, g)| RequestGroup {
                bytes: g.bytes,
                fua: g.fua,
                preflush: g.preflush,
                errors: g.errors,
                service: percentiles(Some(&g.service)),
                queue: percentiles(Some(&g.queue)),
                service_hist_us: log2_of_counts(&g.service_log2_us),
                size_hist_bytes: log2_of_counts(&g.size_log2),
                device: device.clone(),
                op: op.clone(),
            })
            .collect();
        out.sort_by(|a, b| {
            let (x, y) = (
                self.dev_bytes[a.device.as_str()],
                self.dev_bytes[b.device.as_str()],
            );
            y.cmp(&x)
                .then(a.device.cmp(&b.device))
                .then(b.service.count.cmp(&a.service.count))
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The in-memory arithmetic the fold replaced (every row held), as the reference.
    fn reference(
        calls: &[FsyncCall],
        reqs: &[BlockRequest],
    ) -> (
        Vec<FsyncProcess>,
        Vec<RequestGroup>,
        Vec<FsyncCall>,
        Vec<BlockRequest>,
    ) {
        let mut by: BTreeMap<u32, Vec<&FsyncCall>> = BTreeMap::new();
        for c in calls {
            by.entry(c.pid).or_default().push(c);
        }
        let mut procs: Vec<FsyncProcess> = by
            .into_iter()
            .map(|(pid, v)| {
                let mut by_call = BTreeMap::new();
                for c in &v {
                    *by_call.entry(c.call.clone()).or_insert(0) += 1;
                }
                FsyncProcess {
                    pid,
                    comm: v[0].comm.clone(),
                    by_call,
                    errors: v.iter().filter(|c| c.ret < 0).count() as u64,
                    total_s: v.iter().map(|c| c.dur_ns).sum::<u64>() as f64 / 1e9,
                    latency: pct_of(v.iter().map(|c| c.dur_ns)),
                }
            })
            .collect();
        procs.sort_by(|a, b| {
            b.latency
                .count
                .cmp(&a.latency.count)
                .then(a.pid.cmp(&b.pid))
        });
        let mut by: BTreeMap<(String, String), Vec<&BlockRequest>> = BTreeMap::new();
        let mut dev_bytes: BTreeMap<&str, u64> = BTreeMap::new();
        for r in reqs {
            by.entry((r.device.clone(), r.op.clone()))
                .or_default()
                .push(r);
            *dev_bytes.entry(&r.device).or_default() += r.bytes;
        }
        let mut groups: Vec<RequestGroup> = by
            .into_iter()
            .map(|((device, op), v)| RequestGroup {
                bytes: v.iter().map(|r| r.bytes).sum(),
                fua: v.iter().filter(|r| r.fua()).count() as u64,
                preflush: v.iter().filter(|r| r.preflush()).count() as u64,
                errors: v.iter().filter(|r| r.error != 0).count() as u64,
                service: pct_of(v.iter().map(|r| r.service_ns)),
                queue: pct_of(v.iter().filter_map(|r| r.queue_ns)),
                service_hist_us: log2_buckets(v.iter().map(|r| r.service_ns / 1000)),
                size_hist_bytes: log2_buckets(v.iter().map(|r| r.bytes)),
                device,
                op,
            })
            .collect();
        groups.sort_by(|a, b| {
            let (x, y) = (dev_bytes[a.device.as_str()], dev_bytes[b.device.as_str()]);
            y.cmp(&x)
                .then(a.device.cmp(&b.device))
                .then(b.service.count.cmp(&a.service.count))
        });
        let mut slow_calls: Vec<FsyncCall> = calls.to_vec();
        slow_calls.sort_by(|a, b| b.dur_ns.cmp(&a.dur_ns).then(a.t_ns.cmp(&b.t_ns)));
        slow_calls.truncate(SLOWEST);
        let mut slow_reqs: Vec<BlockRequest> = reqs.to_vec();
        slow_reqs.sort_by(|a, b| b.service_ns.cmp(&a.service_ns).then(a.t_ns.cmp(&b.t_ns)));
        slow_reqs.truncate(SLOWEST);
        (procs, groups, slow_calls, slow_reqs)
    }

    /// A small deterministic generator (no dependency): xorshift.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    #[test]
    fn the_fold_gives_what_every_row_held_gave() {
        for seed in [1u64, 7, 99, 12345] {
            let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
            let n_calls = 200 + rng.below(3000) as usize;
            let calls: Vec<FsyncCall> = (0..n_calls)
                .map(|i| FsyncCall {
                    t_ns: i as u64 * 1_000_000 + rng.below(1000),
                    // Many equal durations: ties broken by time, then by order.
                    dur_ns: 1000 * (1 + rng.below(50)) * (1 + rng.below(3) * 1000),
                    pid: 100 + rng.below(7) as u32,
                    tid: 1,
                    comm: format!("c{}", rng.below(3)),
                    call: ["fsync", "fdatasync", "sync_file_range"][rng.below(3) as usize].into(),
                    fd: Some(3),
                    file: String::new(),
                    ret: if rng.below(50) == 0 { -5 } else { 0 },
                })
                .collect();
            let n_reqs = 500 + rng.below(5000) as usize;
            let reqs: Vec<BlockRequest> = (0..n_reqs)
                .map(|i| BlockRequest {
                    t_ns: i as u64 * 200_000,
                    device: ["loop0", "loop1", "vda"][rng.below(3) as usize].into(),
                    major: 7,
                    minor: 0,
                    op: ["write", "read", "flush"][rng.below(3) as usize].into(),
                    flags: ["W", "WS", "FWFS", "R", "FF"][rng.below(5) as usize].into(),
                    sector: rng.below(1 << 20),
                    bytes: 512 << rng.below(10),
                    queue_ns: (rng.below(4) > 0).then(|| rng.below(5_000_000)),
                    service_ns: rng.below(40) * 25_000,
                    error: if rng.below(100) == 0 { -5 } else { 0 },
                    comm: "x".into(),
                })
                .collect();
            let mut f = TraceFold::default();
            for c in &calls {
                f.call(c.clone());
            }
            for r in &reqs {
                f.request(r.clone());
            }
            f.slow_calls.settle(call_key);
            f.slow_requests.settle(request_key);
            let (procs, groups, slow_calls, slow_reqs) = reference(&calls, &reqs);
            assert_eq!(f.processes(), procs, "seed {seed}: processes");
            assert_eq!(f.request_groups(), groups, "seed {seed}: groups");
            assert_eq!(f.slow_calls.kept, slow_calls, "seed {seed}: slowest calls");
            assert_eq!(
                f.slow_requests.kept, slow_reqs,
                "seed {seed}: slowest requests"
            );
            assert_eq!((f.calls, f.requests), (n_calls as u64, n_reqs as u64));
        }
    }

    #[test]
    fn log2_buckets_are_biolatencys() {
        let b = log2_buckets([0u64, 1, 2, 3, 4, 7, 8, 1000].into_iter());
        let got: Vec<(u64, u64, u64)> = b.iter().map(|b| (b.lo, b.hi, b.count)).collect();
        assert_eq!(
            got,
            vec![
                (0, 1, 1),
                (1, 2, 1),
                (2, 4, 2),
                (4, 8, 2),
                (8, 16, 1),
                (16, 32, 0),
                (32, 64, 0),
                (64, 128, 0),
                (128, 256, 0),
                (256, 512, 0),
                (512, 1024, 1)
            ]
        );
        assert!(log2_buckets(std::iter::empty()).is_empty());
        let top = log2_buckets([u64::MAX].into_iter());
        assert_eq!((top[0].lo, top[0].hi), (1 << 63, u64::MAX));
    }
}
