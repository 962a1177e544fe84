//! The rows of `rates.csv` ([`crate::format::rates`]): per device and window, rates
//! derived from the raw counters (the window's share of each counter delta, as
//! everywhere in the report). Windows start at multiples of the window from the run's
//! zero; awaits are empty in windows without completed I/O.

use collectors::diskstats as ds;

use super::analysis::{self, MIB};
use super::run::{DiskRows, Run};
use crate::format::rates::RatesRow;

pub fn rows(run: &Run, window_ns: u64) -> Vec<RatesRow> {
    let n = run.duration_ns.div_ceil(window_ns) as usize;
    let w_s = window_ns as f64 / 1e9;
    let zero_unix_ns = run.meta.clock_zero_unix_ns;
    let sums = |d: &DiskRows, f: usize, scale: f64| {
        analysis::window_sums(&analysis::intervals(d, f, scale), window_ns, n)
    };
    let mut out = Vec::with_capacity(n * run.disks.len());
    for d in &run.disks {
        let rb = sums(d, ds::F_SECTORS_READ, analysis::SECTOR_BYTES);
        let wb = sums(d, ds::F_SECTORS_WRITTEN, analysis::SECTOR_BYTES);
        let ri = sums(d, ds::F_READS, 1.0);
        let wi = sums(d, ds::F_WRITES, 1.0);
        let rms = sums(d, ds::F_READ_MS, 1.0);
        let wms = sums(d, ds::F_WRITE_MS, 1.0);
        let io = sums(d, ds::F_IO_MS, 1.0);
        let fl = analysis::has_field(d, ds::F_FLUSHES).then(|| sums(d, ds::F_FLUSHES, 1.0));
        let mut inflight = vec![0u64; n];
        for (t, r) in d.t_ns.iter().zip(&d.f) {
            let k = ((t / window_ns) as usize).min(n.saturating_sub(1));
            if let Some(v) = r[ds::F_IN_FLIGHT] {
                inflight[k] = inflight[k].max(v);
            }
        }
        let await_ms = |ms: f64, ios: f64| (ios > 0.0).then(|| ms / ios);
        for k in 0..n {
            let t_ns = k as u64 * window_ns;
            out.push(RatesRow {
                t_ns,
                unix_ms: (zero_unix_ns + t_ns) / 1_000_000,
                window_ns,
                device: d.name.clone(),
                read_mib_s: rb[k] / MIB / w_s,
                write_mib_s: wb[k] / MIB / w_s,
                read_iops: ri[k] / w_s,
                write_iops: wi[k] / w_s,
                flushes_per_s: fl.as_ref().map(|f| f[k] / w_s),
                util_pct: 100.0 * io[k] / (w_s * 1e3),
                r_await_ms: await_ms(rms[k], ri[k]),
                w_await_ms: await_ms(wms[k], wi[k]),
                in_flight_max: inflight[k],
            });
        }
    }
    out
}
