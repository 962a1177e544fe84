//! The rows of `rates.csv` ([`format::rates`]): per device and window, rates
//! derived from the raw counters (the window's share of each counter delta, as
//! everywhere in the report). Windows start at multiples of the window from the run's
//! zero; awaits are empty in windows without completed I/O.

use collectors::diskstats as ds;

use super::analysis::{self, MIB};
use super::run::{DiskRows, Run};
use super::stream;
use collectors::diskstats::MAX_FIELDS;
use format::rates::{Iostat, IostatDir, RatesRow};

/// The rows of one device from the windows the pass over the rows kept
/// ([`super::stream::Rates`]: per window each field's sum, sectors as bytes, and the
/// in-flight maximum; which fields the rows hold), `window_ns` wide over the run. The
/// windows are read back one at a time.
pub fn device_rows<'a>(
    run: &Run,
    name: &'a str,
    windows: &'a stream::Rates,
    has: &'a [bool; MAX_FIELDS],
    window_ns: u64,
) -> impl Iterator<Item = RatesRow> + 'a {
    let n = run.duration_ns.div_ceil(window_ns) as usize;
    let w_s = window_ns as f64 / 1e9;
    let zero_unix_ns = run.meta.clock_zero_unix_ns;
    let await_ms = |ms: f64, ios: f64| (ios > 0.0).then(|| ms / ios);
    let iostat_of = move |s: &[f64; MAX_FIELDS], f: [usize; 4]| -> Option<IostatDir> {
        has[f[0]].then(|| iostat_dir(&f.map(|x| [s[x]]), 0, w_s))
    };
    windows
        .windows()
        .take(n)
        .enumerate()
        .map(move |(k, (s, in_flight))| {
            let t_ns = k as u64 * window_ns;
            let fl = has[ds::F_FLUSHES].then_some(s[ds::F_FLUSHES]);
            let fl_ms = has[ds::F_FLUSH_MS].then_some(s[ds::F_FLUSH_MS]);
            let io = s[ds::F_IO_MS];
            RatesRow {
                t_ns,
                unix_ms: (zero_unix_ns + t_ns) / 1_000_000,
                window_ns,
                device: name.to_string(),
                read_mib_s: s[ds::F_SECTORS_READ] / MIB / w_s,
                write_mib_s: s[ds::F_SECTORS_WRITTEN] / MIB / w_s,
                read_iops: s[ds::F_READS] / w_s,
                write_iops: s[ds::F_WRITES] / w_s,
                flushes_per_s: fl.map(|f| f / w_s),
                util_pct: 100.0 * io / (w_s * 1e3),
                r_await_ms: await_ms(s[ds::F_READ_MS], s[ds::F_READS]),
                w_await_ms: await_ms(s[ds::F_WRITE_MS], s[ds::F_WRITES]),
                in_flight_max: in_flight,
                iostat: Some(Iostat {
                    r: iostat_of(
                        &s,
                        [
                            ds::F_READS,
                            ds::F_READS_MERGED,
                            ds::F_SECTORS_READ,
                            ds::F_READ_MS,
                        ],
                    )
                    .unwrap_or_default(),
                    w: iostat_of(
                        &s,
                        [
                            ds::F_WRITES,
                            ds::F_WRITES_MERGED,
                            ds::F_SECTORS_WRITTEN,
                            ds::F_WRITE_MS,
                        ],
                    )
                    .unwrap_or_default(),
                    d: iostat_of(
                        &s,
                        [
                            ds::F_DISCARDS,
                            ds::F_DISCARDS_MERGED,
                            ds::F_SECTORS_DISCARDED,
                            ds::F_DISCARD_MS,
                        ],
                    ),
                    f: fl.map(|f| {
                        let ms = fl_ms.unwrap_or(0.0);
                        (f / w_s, if f > 0.0 { ms / f } else { 0.0 })
                    }),
                    aqu_sz: s[ds::F_WEIGHTED_MS] / (w_s * 1e3),
                    util_pct: 100.0 * io / (w_s * 1e3),
                }),
            }
        })
}

/// rates.csv's rows from every row in memory: the reference the streamed rows are tested
/// against.
pub fn rows_in_memory(run: &Run, disks: &[DiskRows], window_ns: u64) -> Vec<RatesRow> {
    let n = run.duration_ns.div_ceil(window_ns) as usize;
    let w_s = window_ns as f64 / 1e9;
    let zero_unix_ns = run.meta.clock_zero_unix_ns;
    let sums = |d: &DiskRows, f: usize, scale: f64| {
        analysis::window_sums(&analysis::intervals(d, f, scale), window_ns, n)
    };
    let mut out = Vec::with_capacity(n * disks.len());
    for d in disks {
        let rb = sums(d, ds::F_SECTORS_READ, analysis::SECTOR_BYTES);
        let wb = sums(d, ds::F_SECTORS_WRITTEN, analysis::SECTOR_BYTES);
        let ri = sums(d, ds::F_READS, 1.0);
        let wi = sums(d, ds::F_WRITES, 1.0);
        let rms = sums(d, ds::F_READ_MS, 1.0);
        let wms = sums(d, ds::F_WRITE_MS, 1.0);
        let io = sums(d, ds::F_IO_MS, 1.0);
        let fl = analysis::has_field(d, ds::F_FLUSHES).then(|| sums(d, ds::F_FLUSHES, 1.0));
        let fl_ms = analysis::has_field(d, ds::F_FLUSH_MS).then(|| sums(d, ds::F_FLUSH_MS, 1.0));
        let weighted = sums(d, ds::F_WEIGHTED_MS, 1.0);
        // iostat's three directions: (completed, merged, sectors, ms) counters.
        let dir_sums = |f: [usize; 4]| -> Option<[Vec<f64>; 4]> {
            analysis::has_field(d, f[0]).then(|| {
                f.map(|x| {
                    let scale = if x == f[2] {
                        analysis::SECTOR_BYTES
                    } else {
                        1.0
                    };
                    sums(d, x, scale)
                })
            })
        };
        let r_x = dir_sums([
            ds::F_READS,
            ds::F_READS_MERGED,
            ds::F_SECTORS_READ,
            ds::F_READ_MS,
        ]);
        let w_x = dir_sums([
            ds::F_WRITES,
            ds::F_WRITES_MERGED,
            ds::F_SECTORS_WRITTEN,
            ds::F_WRITE_MS,
        ]);
        let d_x = dir_sums([
            ds::F_DISCARDS,
            ds::F_DISCARDS_MERGED,
            ds::F_SECTORS_DISCARDED,
            ds::F_DISCARD_MS,
        ]);
        let mut inflight = vec![0u64; n];
        for (t, r) in d.t_ns.iter().zip(&d.f) {
            let k = ((t / window_ns) as usize).min(n.saturating_sub(1));
            if let Some(v) = r.get(ds::F_IN_FLIGHT) {
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
                iostat: Some(Iostat {
                    r: r_x
                        .as_ref()
                        .map(|x| iostat_dir(x, k, w_s))
                        .unwrap_or_default(),
                    w: w_x
                        .as_ref()
                        .map(|x| iostat_dir(x, k, w_s))
                        .unwrap_or_default(),
                    d: d_x.as_ref().map(|x| iostat_dir(x, k, w_s)),
                    f: fl.as_ref().map(|f| {
                        let ms = fl_ms.as_ref().map_or(0.0, |m| m[k]);
                        (f[k] / w_s, if f[k] > 0.0 { ms / f[k] } else { 0.0 })
                    }),
                    aqu_sz: weighted[k] / (w_s * 1e3),
                    util_pct: 100.0 * io[k] / (w_s * 1e3),
                }),
            });
        }
    }
    out
}

/// One direction's iostat -x columns from its window sums (completed, merged, bytes, ms),
/// as sysstat 12.6 computes them: rates per second, kB = 1024 bytes, await and request
/// size per completed request and 0 without one, %rqm of merged + completed.
fn iostat_dir<V: AsRef<[f64]>>(x: &[V; 4], k: usize, w_s: f64) -> IostatDir {
    let x = x.each_ref().map(|v| v.as_ref());
    let (ios, merged, bytes, ms) = (x[0][k], x[1][k], x[2][k], x[3][k]);
    let per_io = |v: f64| if ios > 0.0 { v / ios } else { 0.0 };
    IostatDir {
        per_s: ios / w_s,
        kb_s: bytes / 1024.0 / w_s,
        rqm_s: merged / w_s,
        rqm_pct: if merged + ios > 0.0 {
            100.0 * merged / (merged + ios)
        } else {
            0.0
        },
        await_ms: per_io(ms),
        req_sz_kb: per_io(bytes / 1024.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iostat_columns_are_iostats_formulas() {
        // 2 s window: 400 writes, 100 merged, 3200 KiB, 1000 ms of waiting.
        let x = [
            vec![400.0],
            vec![100.0],
            vec![3200.0 * 1024.0],
            vec![1000.0],
        ];
        let d = iostat_dir(&x, 0, 2.0);
        assert_eq!(d.per_s, 200.0);
        assert_eq!(d.kb_s, 1600.0);
        assert_eq!(d.rqm_s, 50.0);
        assert_eq!(d.rqm_pct, 20.0);
        assert_eq!(d.await_ms, 2.5);
        assert_eq!(d.req_sz_kb, 8.0);
        let none = iostat_dir(&[vec![0.0], vec![0.0], vec![0.0], vec![0.0]], 0, 1.0);
        assert_eq!(none, IostatDir::default());
    }
}
