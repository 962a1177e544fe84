//! The probe's human summary: all jobs merged, latencies in microseconds.

use collectors::probe::stats::{WindowStats, READ, TRIM, WRITE};
use collectors::probe::{ProbeResult, SyncKind};
use hdrhistogram::Histogram;

use super::output::fmt_size;
use super::{Resolved, RunInfo};

/// Microseconds, 3 significant digits or so.
fn us(ns: f64) -> String {
    let u = ns / 1000.0;
    if u < 10.0 {
        format!("{u:.2}")
    } else if u < 100.0 {
        format!("{u:.1}")
    } else {
        format!("{u:.0}")
    }
}

fn lat_line(label: &str, m_min: u64, mean: f64, h: &Histogram<u64>, max: u64) -> String {
    // Histogram values are bucket tops (0.1 % wide): the exact max caps them.
    let p = |q: f64| us(h.value_at_percentile(q).min(max) as f64);
    format!(
        "    {label:<11} min {:>6}  mean {:>6}  p50 {:>6}  p90 {:>6}  p99 {:>6}  p99.9 {:>6}  p99.99 {:>6}  max {:>6}\n",
        us(m_min as f64),
        us(mean),
        p(50.0),
        p(90.0),
        p(99.0),
        p(99.9),
        p(99.99),
        us(max as f64)
    )
}

/// Below this measured time the summary says the rates are not steady figures (a 4k
/// file at bs 4k is one I/O: its "IOPS" are one latency inverted).
const TOO_SHORT_NS: u64 = 100_000_000;

/// The human summary: all jobs merged.
#[allow(
    clippy::too_many_lines,
    reason = "the human summary's lines in the order they print, like fio's"
)]
pub fn human(r: &Resolved, info: &RunInfo, res: &ProbeResult) -> String {
    let sp = &r.spec;
    let m: WindowStats = res.merged();
    let rt = res.runtime_ns().max(1);
    let secs = rt as f64 / 1e9;
    let mut o = String::new();
    let mix = if sp.rw.mixed() {
        format!(" {:.0}/{:.0}", sp.rwmixread, 100.0 - sp.rwmixread)
    } else {
        String::new()
    };
    let bs = if sp.bs[0] == sp.bs[1] {
        fmt_size(sp.bs[0])
    } else {
        format!("{},{}", fmt_size(sp.bs[0]), fmt_size(sp.bs[1]))
    };
    let rate = match sp.rate_iops {
        Some(x) => {
            // And as fio writes it: per direction and per job.
            let per_job = x / sp.numjobs as f64;
            let pct = sp.read_pct() / 100.0;
            let fio = if sp.rw.mixed() {
                format!("{:.0},{:.0}", per_job * pct, per_job * (1.0 - pct))
            } else {
                format!("{per_job:.0}")
            };
            format!(", rate {x:.0} IOPS total (fio: rate_iops={fio})")
        }
        None => String::new(),
    };
    o.push_str(&format!(
        "diskpulse probe: {}{mix}, bs {bs}, iodepth {}, {} job(s), {}, {}{}{rate}\n",
        sp.rw.name(),
        sp.iodepth,
        sp.numjobs,
        sp.engine.name(),
        if sp.direct { "direct" } else { "buffered" },
        match sp.fsync {
            Some((n, k)) => format!(", {} every {n} write(s)", k.name()),
            None => String::new(),
        },
    ));
    o.push_str(&format!(
        "  target: {} ({}, {}, {} MiB)\n",
        info.target_path.display(),
        info.target_kind,
        info.fstype,
        info.size >> 20
    ));
    o.push_str(&format!(
        "  measured {}{}\n",
        if rt >= 10_000_000 {
            format!("{secs:.2}s")
        } else {
            format!("{:.3} ms", rt as f64 / 1e6)
        },
        if sp.ramp_ns > 0 {
            format!(" after a {:.2}s ramp", sp.ramp_ns as f64 / 1e9)
        } else {
            String::new()
        }
    ));
    if let Some(l) = &sp.timing.latency {
        // fio's "latency : target=..., window=..., percentile=..%, depth=N" line.
        let depth: Vec<String> = res
            .jobs
            .iter()
            .map(|j| j.latency_depth.map_or("-".into(), |d| d.to_string()))
            .collect();
        o.push_str(&format!(
            "  latency: target={}us, window={}us, percentile={:.2}%, depth={} (fio's latency_target: the deepest queue, up to iodepth {}, that met it{})\n",
            us(l.target_ns as f64),
            us(l.window_ns as f64),
            l.percentile,
            depth.join(","),
            sp.iodepth,
            if l.keep_running { ", adjusted for the whole run" } else { "; the figures are the final run's, at that depth" }
        ));
    }
    if rt < TOO_SHORT_NS {
        o.push_str(&format!(
            "  note : TOO SHORT TO MEASURE: {:.3} ms is under {} ms, so the rates and CPU shares below are not steady figures; pass a bigger --size or --time-based --runtime 10s\n",
            rt as f64 / 1e6,
            TOO_SHORT_NS / 1_000_000
        ));
    }
    for (dir, name) in [(READ, "read"), (WRITE, "write"), (TRIM, "trim")] {
        let d = &m.dir[dir];
        let wanted = match dir {
            READ => sp.rw.reads(),
            WRITE => sp.rw.writes(),
            _ => sp.rw.trims(),
        };
        if !wanted {
            continue;
        }
        o.push_str(&format!(
            "  {name:<5}: {:.0} IOPS, {:.1} MiB/s, {} I/Os, {} MiB\n",
            d.ios as f64 / secs,
            d.bytes as f64 / secs / (1 << 20) as f64,
            d.ios,
            d.bytes >> 20
        ));
        if d.ios == 0 {
            continue;
        }
        o.push_str(&lat_line(
            "clat (us)",
            d.clat_m.min,
            d.clat_m.mean(),
            &d.clat,
            d.clat_m.max,
        ));
        if sp.rate_iops.is_some() {
            o.push_str(&lat_line(
                "lat_co (us)",
                d.lat_co.min(),
                d.lat_co.mean(),
                &d.lat_co,
                d.lat_co.max(),
            ));
        }
    }
    if let Some((_, k)) = sp.fsync {
        o.push_str(&format!(
            "  sync : {} {}s, {:.0}/s\n",
            m.sync_ios,
            k.name(),
            m.sync_ios as f64 / secs
        ));
        if m.sync_ios > 0 {
            let label = match k {
                SyncKind::Fsync => "fsync (us)",
                SyncKind::Fdatasync => "fdsync (us)",
            };
            o.push_str(&lat_line(
                label,
                m.sync_m.min,
                m.sync_m.mean(),
                &m.sync,
                m.sync_m.max,
            ));
        }
    }
    let u = res.usage();
    let ios: u64 = m.dir.iter().map(|d| d.ios).sum();
    o.push_str(&format!(
        "  cpu  : usr {:.1}% sys {:.1}% (job threads, of one core), {:.2} us CPU per I/O, {} context switches\n",
        u.usr_ns as f64 * 100.0 / rt as f64,
        u.sys_ns as f64 * 100.0 / rt as f64,
        if ios > 0 {
            (u.usr_ns + u.sys_ns) as f64 / ios as f64 / 1000.0
        } else {
            0.0
        },
        u.ctx
    ));
    if let Some(rate) = sp.rate_iops {
        o.push_str("  lat_co: from each I/O's intended start on the rate schedule (a late start counts its wait)\n");
        let missed: u64 = res.jobs.iter().map(|j| j.rate_missed).sum();
        if missed > 0 {
            o.push_str(&format!(
                "  rate : BEHIND SCHEDULE: {missed} I/Os due before the end were never issued; the device (or the CPU) did not sustain {rate:.0} IOPS\n"
            ));
        }
    }
    // P3: verify
    if let Some(v) = &sp.verify {
        let b: u64 = res.jobs.iter().map(|j| j.verified_bytes).sum();
        let reads: u64 = res.jobs.iter().map(|j| j.verify_reads.ios).sum();
        let ns = res.jobs.iter().map(|j| j.verify_ns).max().unwrap_or(0);
        if b > 0 && res.error().is_none() {
            o.push_str(&format!(
                "  verify: {} read back and checked ({}) in {reads} reads over {:.1} ms, every block good (not in the figures above; fio's JSON counts them as reads, as fio does)\n",
                super::output::fmt_size(b),
                v.kind.name(),
                ns as f64 / 1e6
            ));
        }
    }
    if !info.disks.is_empty() {
        use collectors::diskstats as ds;
        let parts: Vec<String> = info
            .disks
            .iter()
            .map(|d| {
                let g = |i: usize| d.d.get(i).copied().flatten().unwrap_or(0);
                // Discards only where there were some (a trim job's device).
                let discards = match g(ds::F_DISCARDS) {
                    0 => String::new(),
                    n => format!(", {n} discards"),
                };
                format!(
                    "{} {} reads, {} writes{discards}, {} flushes",
                    d.name,
                    g(ds::F_READS),
                    g(ds::F_WRITES),
                    g(ds::F_FLUSHES)
                )
            })
            .collect();
        o.push_str(&format!(
            "  disks: {} (the kernel's counts over the whole run, ramp included)\n",
            parts.join("; ")
        ));
    }
    if let Some(d) = &info.recorded_in {
        o.push_str(&format!(
            "  per-window rows: {}\n",
            d.join("probe.csv").display()
        ));
    }
    o
}
