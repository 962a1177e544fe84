//! The broker's own I/O (`proc_io.csv`, [`format::proc_io`]) beside its devices':
//! summary.json's `broker_io` (per process totals, per device the broker's share of the
//! bytes written and read) and the broker's write rate drawn on each broker device's
//! throughput panel.
//!
//! What the share compares: `/proc/PID/io` `write_bytes` counts bytes when the process
//! dirties them (or writes them with O_DIRECT); diskstats counts them when the device
//! completes them, writeback included. Over a run the two line up; over 10 ms they do
//! not (a buffered write reaches the device at the next sync), so the share is taken
//! over the whole span the processes were sampled, and the timeline draws both rates
//! for the eye to line up.

use charts::{Series, Style};

use super::analysis::{self, Interval, MIB};
use super::run::Run;
use collectors::procio::{READ_BYTES, WRITE_BYTES};
use format::proc_io::{self, ProcRows};
use format::summary::{BrokerIo, DeviceShare, DeviceSummary, ProcessIo};
use format::units::bytes_fixed;

/// Counter `field` of `p` as intervals (for the window arithmetic of [`analysis`]).
fn proc_intervals(p: &ProcRows, field: usize) -> Vec<Interval> {
    proc_io::intervals(p, field)
        .into_iter()
        .map(|(t0_ns, t1_ns, d)| Interval {
            t0_ns,
            t1_ns,
            v: Some(d as f64),
        })
        .collect()
}

/// The part of `iv` inside `[t0, t1]`, in proportion to overlap.
fn sum_between(iv: &[Interval], t0: u64, t1: u64) -> f64 {
    iv.iter()
        .filter_map(|i| {
            let v = i.v?;
            let (a, b) = (i.t0_ns.max(t0), i.t1_ns.min(t1));
            if b <= a || i.t1_ns <= i.t0_ns {
                return None;
            }
            Some(v * (b - a) as f64 / (i.t1_ns - i.t0_ns) as f64)
        })
        .sum()
}

fn delta(p: &ProcRows, field: usize) -> u64 {
    proc_io::intervals(p, field).iter().map(|x| x.2).sum()
}

fn pct(a: f64, b: f64) -> Option<f64> {
    (b > 0.0).then(|| 100.0 * a / b)
}

/// The processes sampled at least twice in proc_io.csv.
fn sampled(run: &Run) -> Option<Vec<&ProcRows>> {
    let procs = run.proc_io.as_ref()?;
    let procs: Vec<&ProcRows> = procs.iter().filter(|p| p.rows.len() >= 2).collect();
    (!procs.is_empty()).then_some(procs)
}

/// The span proc_io.csv sampled the broker over (first to last sample of any process):
/// the devices' bytes inside it are what the broker's share is taken of.
pub(crate) fn sampled_span(run: &Run) -> Option<(u64, u64)> {
    let procs = sampled(run)?;
    let t0 = procs
        .iter()
        .filter_map(|p| p.rows.first())
        .map(|r| r.t_ns)
        .min()?;
    let t1 = procs
        .iter()
        .filter_map(|p| p.rows.last())
        .map(|r| r.t_ns)
        .max()?;
    Some((t0, t1))
}

/// Each device's bytes written and read inside [`sampled_span`], from every row in
/// memory (the pass over the rows sums them as it goes: [`super::stream`]).
pub fn device_bytes_in_memory(
    run: &Run,
    disks: &[format::diskstats::DiskRows],
) -> Vec<(String, f64, f64)> {
    let Some((t0, t1)) = sampled_span(run) else {
        return vec![];
    };
    disks
        .iter()
        .map(|d| {
            (
                d.name.clone(),
                sum_between(&analysis::write_bytes(d), t0, t1),
                sum_between(&analysis::read_bytes(d), t0, t1),
            )
        })
        .collect()
}

/// summary.json's `broker_io`; None without proc_io.csv (or without two samples).
/// `device_bytes`: per device (name, bytes written, bytes read) inside [`sampled_span`].
pub fn broker_io(
    run: &Run,
    devices: &[DeviceSummary],
    broker: &[String],
    device_bytes: &[(String, f64, f64)],
) -> Option<BrokerIo> {
    let procs = sampled(run)?;
    let processes = procs
        .iter()
        .map(|p| {
            let first = p.rows.first().map(|r| r.t_ns).unwrap_or(0);
            let last = p.rows.last().map(|r| r.t_ns).unwrap_or(0);
            let wiv = proc_intervals(p, WRITE_BYTES);
            let peak = analysis::peak_rate(&wiv, 100_000_000, last) / MIB;
            ProcessIo {
                pid: p.pid,
                comm: p.comm.clone(),
                sampled_s: (last - first) as f64 / 1e9,
                read_bytes: delta(p, READ_BYTES),
                write_bytes: delta(p, WRITE_BYTES),
                cancelled_write_bytes: delta(p, 6),
                rchar: delta(p, 0),
                wchar: delta(p, 1),
                syscr: delta(p, 2),
                syscw: delta(p, 3),
                write_peak_mib_s_100ms: if peak.is_finite() { peak } else { 0.0 },
            }
        })
        .collect::<Vec<_>>();
    let bw: u64 = processes.iter().map(|p| p.write_bytes).sum();
    let br: u64 = processes.iter().map(|p| p.read_bytes).sum();
    let shares = device_bytes
        .iter()
        .filter(|d| broker.is_empty() || broker.contains(&d.0))
        .filter(|d| devices.iter().any(|s| s.name == d.0))
        .map(|(name, dw, dr)| {
            let (dw, dr) = (*dw, *dr);
            let (ws, rs) = (pct(bw as f64, dw), pct(br as f64, dr));
            let b = |x: f64| bytes_fixed(x).trim().to_string();
            let reads = match rs {
                Some(r) => format!("; it read {} of the {} read ({r:.0}%)", b(br as f64), b(dr)),
                None => String::new(),
            };
            let line = match ws {
                Some(w) if w <= 100.0 => format!(
                    "{}: the broker wrote {} of the {} written ({w:.0}%){reads}",
                    name,
                    b(bw as f64),
                    b(dw)
                ),
                _ => format!(
                    "{}: the broker dirtied {}, the device wrote {} meanwhile (the rest was still in the page cache){reads}",
                    name,
                    b(bw as f64),
                    b(dw)
                ),
            };
            DeviceShare {
                device: name.clone(),
                broker_write_bytes: bw,
                device_write_bytes: dw,
                write_share_pct: ws,
                broker_read_bytes: br,
                device_read_bytes: dr,
                read_share_pct: rs,
                line,
            }
        })
        .collect();
    Some(BrokerIo {
        processes,
        devices: shares,
    })
}

/// The broker processes' write rate, MiB/s, summed over 10 ms bins (their sampling
/// interval), for the write panel of a broker device; None without proc_io.csv.
pub(crate) fn write_series(run: &Run, color: &str) -> Option<Series> {
    let procs = run.proc_io.as_ref()?;
    let bin = 10_000_000u64;
    let n = (run.duration_ns / bin + 1) as usize;
    let mut sums = vec![0.0; n];
    for p in procs {
        for (k, v) in analysis::window_sums(&proc_intervals(p, WRITE_BYTES), bin, n)
            .into_iter()
            .enumerate()
        {
            sums[k] += v;
        }
    }
    let t = (0..n)
        .map(|k| (k as f64 + 0.5) * bin as f64 / 1e9)
        .collect();
    let v = sums.iter().map(|b| b / MIB / (bin as f64 / 1e9)).collect();
    let comms: Vec<&str> = procs.iter().map(|p| p.comm.as_str()).collect();
    let mut name = comms.first().copied().unwrap_or("broker").to_string();
    if procs.len() > 1 {
        name = format!("{name} x{}", procs.len());
    }
    Some(Series {
        label: format!("{name} write_bytes (/proc/PID/io, dirtied)"),
        t_s: t,
        v,
        style: Style::Line,
        color: Some(color.into()),
        folded: None,
    })
}
