//! From a run read back to the figures of `summary.json` ([`format::summary`]):
//! per device and direction, memory, CPU, load per role, restarts, and the headline.
//!
//! Long because its tests live beside it; the code is the one place each summary.json
//! figure is derived, under 700 lines.

use std::collections::BTreeMap;

use collectors::diskstats as ds;

use super::analysis::{self, UiAverage, MIB};
use super::run::{DiskRows, Run};
use super::stream;
use super::ReportOptions;
use collectors::diskstats::MAX_FIELDS;
use format::events::{Body, Event, RestartReady};
use format::procfs::{CPU_COLUMNS, CPU_TICK_COLUMNS};
use format::summary::{
    CpuSummary, DeviceSummary, Direction, LoadRoleSummary, MemorySummary, Peaks, RestartSummary,
};
use format::units::{bytes_fixed, rate_mib_s};

/// See [`restart_spans`].
type RestartSpan<'a> = (
    u64,
    u64,
    String,
    Option<(u64, &'a RestartReady)>,
    Option<Vec<String>>,
);

/// The first `restart_ready` of `node` at or after `t_ns`: its time and detail.
fn ready_after<'a>(events: &'a [Event], t_ns: u64, node: &str) -> Option<(u64, &'a RestartReady)> {
    events.iter().find_map(|r| match &r.body {
        Body::RestartReady(x) if r.t_ns >= t_ns && x.node == node => Some((r.t_ns, x)),
        _ => None,
    })
}

/// Each restart's window: (the `restart` event's time, the window's end, the node, its
/// `restart_ready` event, the node's devices from meta.json `broker_nodes`, None when the
/// run does not say). The window ends 30 s after the node was ready, at the next restart
/// or at `duration_ns`.
fn restart_spans(run: &Run, duration_ns: u64) -> Vec<RestartSpan<'_>> {
    let starts: Vec<_> = run
        .events
        .iter()
        .filter(|e| matches!(e.body, Body::Restart(_)))
        .collect();
    let nodes = run.meta.broker_nodes().unwrap_or_default();
    let mut out = vec![];
    for (i, e) in starts.iter().enumerate() {
        let node = e.body.node().unwrap_or("").to_string();
        let ready = ready_after(&run.events, e.t_ns, &node);
        let healthy_at = ready.map(|(t, _)| t).unwrap_or(e.t_ns);
        let mut end = healthy_at + 30_000_000_000;
        if let Some(next) = starts.get(i + 1) {
            end = end.min(next.t_ns);
        }
        end = end.min(duration_ns);
        let devs = nodes
            .iter()
            .find(|n| n.node == node)
            .map(|n| n.devices.clone());
        out.push((e.t_ns, end, node, ready, devs));
    }
    out
}

/// What the pass over the rows sums for each restart ([`restarts`]).
pub(crate) fn restart_windows(run: &Run, duration_ns: u64) -> Vec<stream::RestartWindow> {
    restart_spans(run, duration_ns)
        .into_iter()
        .map(|(t_ns, end_ns, _, _, devices)| stream::RestartWindow {
            t_ns,
            end_ns,
            devices,
        })
        .collect()
}

/// Restart read bursts from `restart` / `restart_ready` events and the node's devices in
/// meta.json `broker_nodes` (every recorded device when the run does not say), from the
/// windows the pass over the rows summed ([`restart_windows`] of the same run).
pub fn restarts(run: &Run, pass: &stream::Pass) -> Vec<RestartSummary> {
    let mut out = vec![];
    for (i, (t_ns, end, node, ready, devs)) in
        restart_spans(run, run.duration_ns).into_iter().enumerate()
    {
        let devs = devs.unwrap_or_else(|| run.disks.iter().map(|d| d.name.clone()).collect());
        let (mut bytes, mut peak, mut first, mut last) = (0.0f64, 0.0f64, None, None);
        for (d, a) in pass.devices.iter().zip(&pass.accs) {
            if !devs.contains(&d.name) {
                continue;
            }
            let Some((w100, w10)) = a.restarts.get(i).and_then(|x| x.as_ref()) else {
                continue;
            };
            let k0 = (t_ns / 100_000_000) as usize;
            let tail = |w: &stream::TailSums, from: usize| {
                let skip = from.saturating_sub(w.base);
                w.v.iter().skip(skip).copied().collect::<Vec<f64>>()
            };
            // Windows before the first touched are zeros: they change neither sum nor max.
            bytes += tail(w100, k0).iter().sum::<f64>();
            peak = peak.max(tail(w100, k0).iter().cloned().fold(0.0, f64::max) / 0.1 / MIB);
            let top = w10.v.iter().cloned().fold(0.0, f64::max);
            let thr = (0.1 * top).max(MIB * 0.01);
            let k10 = (t_ns / 10_000_000) as usize;
            for k in k10.max(w10.base)..w10.base + w10.v.len() {
                if w10.get(k) > thr {
                    first = Some(first.map_or(k, |f: usize| f.min(k)));
                    last = Some(last.map_or(k, |l: usize| l.max(k)));
                }
            }
        }
        out.push(RestartSummary {
            node,
            t_s: t_ns as f64 / 1e9,
            devices: devs,
            current_ms: ready.map(|(_, r)| r.current_ms),
            healthy_ms: ready.and_then(|(_, r)| r.healthy_ms),
            window_s: (end.saturating_sub(t_ns)) as f64 / 1e9,
            read_bytes: bytes,
            read_peak_mib_s: peak,
            read_burst_s: match (first, last) {
                (Some(a), Some(b)) => (b - a + 1) as f64 * 0.01,
                _ => 0.0,
            },
            read_burst_start_s: first.map(|a| a as f64 * 0.01),
        });
    }
    out
}

/// [`restarts`] from every row in memory: the reference the streamed figures are tested
/// against.
pub fn restarts_in_memory(run: &Run, disks: &[DiskRows]) -> Vec<RestartSummary> {
    let starts: Vec<_> = run
        .events
        .iter()
        .filter(|e| matches!(e.body, Body::Restart(_)))
        .collect();
    let nodes = run.meta.broker_nodes().unwrap_or_default();
    let mut out = vec![];
    for (i, e) in starts.iter().enumerate() {
        let node = e.body.node().unwrap_or("").to_string();
        let ready = ready_after(&run.events, e.t_ns, &node);
        let healthy_at = ready.map(|(t, _)| t).unwrap_or(e.t_ns);
        let mut end = healthy_at + 30_000_000_000;
        if let Some(next) = starts.get(i + 1) {
            end = end.min(next.t_ns);
        }
        end = end.min(run.duration_ns);
        let devs: Vec<String> = nodes
            .iter()
            .find(|n| n.node == node)
            .map(|n| n.devices.clone())
            .unwrap_or_else(|| disks.iter().map(|d| d.name.clone()).collect());
        let (mut bytes, mut peak, mut first, mut last) = (0.0f64, 0.0f64, None, None);
        for d in disks.iter().filter(|d| devs.contains(&d.name)) {
            let iv: Vec<analysis::Interval> = analysis::read_bytes(d)
                .into_iter()
                .filter(|x| x.t1_ns > e.t_ns && x.t0_ns < end)
                .collect();
            let n100 = (end / 100_000_000 + 1) as usize;
            let w100 = analysis::window_sums(&iv, 100_000_000, n100);
            let k0 = (e.t_ns / 100_000_000) as usize;
            bytes += w100.iter().skip(k0).sum::<f64>();
            peak = peak.max(w100.iter().skip(k0).cloned().fold(0.0, f64::max) / 0.1 / MIB);
            let n10 = (end / 10_000_000 + 1) as usize;
            let w10 = analysis::window_sums(&iv, 10_000_000, n10);
            let top = w10.iter().cloned().fold(0.0, f64::max);
            let thr = (0.1 * top).max(MIB * 0.01);
            for (k, v) in w10.iter().enumerate().skip((e.t_ns / 10_000_000) as usize) {
                if *v > thr {
                    // Over all the node's devices: the earliest first and the latest last bin.
                    first = Some(first.map_or(k, |f: usize| f.min(k)));
                    last = Some(last.map_or(k, |l: usize| l.max(k)));
                }
            }
        }
        out.push(RestartSummary {
            node,
            t_s: e.t_ns as f64 / 1e9,
            devices: devs,
            current_ms: ready.map(|(_, r)| r.current_ms),
            healthy_ms: ready.and_then(|(_, r)| r.healthy_ms),
            window_s: (end.saturating_sub(e.t_ns)) as f64 / 1e9,
            read_bytes: bytes,
            read_peak_mib_s: peak,
            read_burst_s: match (first, last) {
                (Some(a), Some(b)) => (b - a + 1) as f64 * 0.01,
                _ => 0.0,
            },
            read_burst_start_s: first.map(|a| a as f64 * 0.01),
        });
    }
    out
}

fn direction(
    d: &DiskRows,
    bytes_field: usize,
    ios_field: usize,
    ms_field: usize,
    dur: u64,
    o: &ReportOptions,
) -> (Direction, UiAverage) {
    let iv = analysis::intervals(d, bytes_field, analysis::SECTOR_BYTES);
    let ios = analysis::intervals(d, ios_field, 1.0);
    let p = |w| analysis::peak_rate(&iv, w, dur) / MIB;
    let peaks = Peaks {
        p1ms: p(1_000_000),
        p10ms: p(10_000_000),
        p100ms: p(100_000_000),
        p1s: p(1_000_000_000),
    };
    let ui = analysis::ui_average(&iv, o.ui_window_ns, dur);
    let nbins = (dur / o.burst.bin_ns) as usize;
    let bins = analysis::window_sums(&iv, o.burst.bin_ns, nbins);
    let bursts = analysis::find_bursts(&bins, &o.burst);
    let bytes = analysis::total(&iv);
    let ui_mib = ui.max_bytes_per_s / MIB;
    let n_ios = analysis::total(&ios);
    let ms = analysis::intervals(d, ms_field, 1.0);
    let busy_ms = analysis::total(&ms);
    let mut service = super::bunching::Service::new(dur);
    for ((b, n), m) in iv.iter().zip(&ios).zip(&ms) {
        if let Some(x) = b.v {
            service.add(b.t0_ns, b.t1_ns, x, n.v, m.v);
        }
    }
    let dir = Direction {
        await_ms: (n_ios > 0.0).then(|| busy_ms / n_ios),
        bytes,
        ios: n_ios,
        mean_mib_s: bytes / MIB / (dur.max(1) as f64 / 1e9),
        hidden_factor: None,
        peak_mib_s: peaks,
        peak_iops_10ms: analysis::peak_rate(&ios, 10_000_000, dur),
        ui_average_mib_s: ui_mib,
        bursts,
        service_peak_mib_s: None,
        bunched: vec![],
        headline_peak_10ms_mib_s: None,
    };
    (with_service(dir, service.peaks()), ui)
}

/// Per-device analysis plus the UI-average series for the charts.
pub struct DeviceAnalysis {
    pub summary: DeviceSummary,
    pub ui_write: UiAverage,
    pub ui_read: UiAverage,
    /// The device's chart series as the pass built them (folded); None from
    /// [`analyse_device_in_memory`].
    pub charts: Option<stream::DeviceCharts>,
    /// rates.csv's window sums and in-flight maxima, and which fields the rows hold.
    pub rates: Option<(stream::Rates, [bool; MAX_FIELDS])>,
    /// Its stalls and long flushes (empty from [`analyse_device_in_memory`]).
    pub harm: super::episodes::DiskHarm,
    /// The burst finder's write bins as MiB/s, for the chart of the UI average against
    /// them (issue 23 item 8): [`BinRates`].
    pub(crate) write_bins: BinRates,
}

/// A direction's burst-finder bins (10 ms by default) as MiB/s at each bin's middle, at
/// most [`BinRates::MAX_POINTS`]: a longer run keeps the highest bin of each group of
/// `group` bins (so every burst keeps its top).
#[derive(Debug, Clone, Default)]
pub(crate) struct BinRates {
    pub bin_ns: u64,
    /// Bins per point (1: every bin).
    pub group: usize,
    /// (t_s, MiB/s).
    pub points: Vec<(f64, f64)>,
}

impl BinRates {
    /// About the timeline plot's width in pixels: more points than columns draw nothing more.
    const MAX_POINTS: usize = 1000;

    /// From `n` bin sums (bytes) of `bin_ns`.
    pub fn of(bins: impl Iterator<Item = f64>, n: usize, bin_ns: u64) -> BinRates {
        let group = n.div_ceil(Self::MAX_POINTS).max(1);
        let bin_s = bin_ns as f64 / 1e9;
        let mut points = Vec::with_capacity(n.div_ceil(group));
        let (mut top, mut k0, mut k) = (0.0f64, 0usize, 0usize);
        for b in bins {
            top = top.max(b);
            k += 1;
            if k - k0 == group {
                let mid = (k0 + k) as f64 / 2.0 * bin_s;
                points.push((mid, top / bin_s / MIB));
                top = 0.0;
                k0 = k;
            }
        }
        if k > k0 {
            points.push(((k0 + k) as f64 / 2.0 * bin_s, top / bin_s / MIB));
        }
        BinRates {
            bin_ns,
            group,
            points,
        }
    }
}

/// [`analyse_device`] from every row in memory: the reference the streamed figures are
/// tested against.
pub fn analyse_device_in_memory(
    d: &DiskRows,
    why: Option<String>,
    dur: u64,
    o: &ReportOptions,
) -> DeviceAnalysis {
    let (write, ui_write) = direction(
        d,
        ds::F_SECTORS_WRITTEN,
        ds::F_WRITES,
        ds::F_WRITE_MS,
        dur,
        o,
    );
    let (read, ui_read) = direction(d, ds::F_SECTORS_READ, ds::F_READS, ds::F_READ_MS, dur, o);
    let flush =
        analysis::has_field(d, ds::F_FLUSHES).then(|| analysis::intervals(d, ds::F_FLUSHES, 1.0));
    let io_ms = analysis::total(&analysis::intervals(d, ds::F_IO_MS, 1.0));
    let span = match (d.t_ns.first(), d.t_ns.last()) {
        (Some(a), Some(b)) if b > a => (b - a) as f64 / 1e6,
        _ => f64::NAN,
    };
    let summary = DeviceSummary {
        name: d.name.clone(),
        why,
        write,
        read,
        flushes: flush.as_ref().map(|f| analysis::total(f)),
        peak_flushes_per_s_100ms: flush
            .as_ref()
            .map(|f| analysis::peak_rate(f, 100_000_000, dur)),
        max_in_flight: d
            .f
            .iter()
            .filter_map(|r| r.get(ds::F_IN_FLIGHT))
            .max()
            .unwrap_or(0) as f64,
        util_pct: 100.0 * io_ms / span,
        rows: d.t_ns.len(),
    };
    let iv = analysis::intervals(d, ds::F_SECTORS_WRITTEN, analysis::SECTOR_BYTES);
    let n = (dur / o.burst.bin_ns) as usize;
    let bins = analysis::window_sums(&iv, o.burst.bin_ns, n);
    DeviceAnalysis {
        summary,
        ui_write,
        ui_read,
        charts: None,
        rates: None,
        harm: Default::default(),
        write_bins: BinRates::of(bins.into_iter(), n, o.burst.bin_ns),
    }
}

fn direction_of(a: &stream::DirAcc, dur: u64, o: &ReportOptions) -> (Direction, UiAverage) {
    let p = |m: &stream::MaxSum| m.peak_rate() / MIB;
    let peaks = Peaks {
        p1ms: p(&a.peaks[0]),
        p10ms: p(&a.peaks[1]),
        p100ms: p(&a.peaks[2]),
        p1s: p(&a.peaks[3]),
    };
    let ui = analysis::ui_from_sums(&a.ui.v, o.ui_window_ns, dur, a.bytes);
    let bursts = analysis::find_bursts_streamed(|| a.bins.iter(), &o.burst);
    let bytes = a.bytes;
    let ui_mib = ui.max_bytes_per_s / MIB;
    let n_ios = a.ios;
    let busy_ms = a.busy_ms;
    let dir = Direction {
        await_ms: (n_ios > 0.0).then(|| busy_ms / n_ios),
        bytes,
        ios: n_ios,
        mean_mib_s: bytes / MIB / (dur.max(1) as f64 / 1e9),
        hidden_factor: None,
        peak_mib_s: peaks,
        peak_iops_10ms: a.ios_10ms.peak_rate(),
        ui_average_mib_s: ui_mib,
        bursts,
        service_peak_mib_s: None,
        bunched: vec![],
        headline_peak_10ms_mib_s: None,
    };
    (with_service(dir, a.service.peaks()), ui)
}

/// Adds the service-time peaks, the widths whose completion peak is bunching, the 10 ms
/// figure the headline quotes and the hidden factor from it ([`super::bunching`]).
fn with_service(mut d: Direction, service: Peaks) -> Direction {
    d.bunched = super::bunching::bunched(&d.peak_mib_s, &service);
    let p10 = if d.bunched.iter().any(|w| w == "10ms") {
        service.p10ms
    } else {
        d.peak_mib_s.p10ms
    };
    d.headline_peak_10ms_mib_s = p10.is_finite().then_some(p10);
    d.hidden_factor =
        (d.ui_average_mib_s > 0.0 && p10.is_finite()).then(|| p10 / d.ui_average_mib_s);
    d.service_peak_mib_s = Some(service);
    d
}

/// A device's figures from what the pass over its rows accumulated ([`stream`]); takes
/// its chart series and rates.csv sums along.
pub fn analyse_device(
    name: &str,
    a: stream::DevAcc,
    why: Option<String>,
    dur: u64,
    o: &ReportOptions,
) -> DeviceAnalysis {
    let (write, ui_write) = direction_of(&a.write, dur, o);
    let (read, ui_read) = direction_of(&a.read, dur, o);
    let has_flush = a.has[ds::F_FLUSHES];
    let span = match (a.first_t_ns, a.last_t_ns) {
        (Some(x), Some(y)) if y > x => (y - x) as f64 / 1e6,
        _ => f64::NAN,
    };
    let summary = DeviceSummary {
        name: name.to_string(),
        why,
        write,
        read,
        flushes: has_flush.then_some(a.flushes),
        peak_flushes_per_s_100ms: has_flush.then(|| a.flush_peak_100ms.peak_rate()),
        max_in_flight: a.max_in_flight as f64,
        util_pct: 100.0 * a.io_ms / span,
        rows: a.rows,
    };
    let write_bins = BinRates::of(a.write.bins.iter(), a.write.bins.n, o.burst.bin_ns);
    DeviceAnalysis {
        summary,
        ui_write,
        ui_read,
        charts: Some(a.charts),
        rates: a.rates.map(|r| (r, a.has)),
        harm: a.harm,
        write_bins,
    }
}

/// The sentence the report exists for. A device under the one asked about (a loop
/// device's backing disk) is labelled so ([`super::order::lower_label`]); a 1 ms or 10 ms
/// peak that is completion bunching ([`super::bunching`]) is never quoted: the 10 ms
/// figure is then the service-time one, said so, and the sentence ends saying which
/// widths were bunching; a quoted peak above [`super::bunching::PLAUSIBLE_MIB_S`] carries
/// a caveat.
pub fn headline(s: &DeviceSummary, ui_window_s: f64) -> String {
    let w = &s.write;
    let b = &w.bursts;
    let who = match super::order::label_of(s) {
        Some(l) => format!("{} ({l})", s.name),
        None => s.name.clone(),
    };
    let ui = format!(
        "a {ui_window_s:.0} s average shows {}",
        rate_mib_s(w.ui_average_mib_s)
    );
    if w.bytes == 0.0 {
        return format!("{who}: no writes recorded");
    }
    let bunched = |x: &str| w.bunched.iter().any(|b| b == x);
    let p10 = w.headline_peak_10ms_mib_s.unwrap_or(w.peak_mib_s.p10ms);
    let (p10_text, peak_name) = if bunched("10ms") {
        (
            format!("{} (counted over the I/Os' service time)", rate_mib_s(p10)),
            "10 ms peak over the I/Os' service time",
        )
    } else {
        (rate_mib_s(p10), "10 ms peak")
    };
    let mut quoted = vec![p10];
    // A bunched 1 ms figure is not quoted here; the tail says why.
    let one_ms = if bunched("1ms") {
        String::new()
    } else {
        quoted.push(w.peak_mib_s.p1ms);
        format!("; {} at 1 ms", rate_mib_s(w.peak_mib_s.p1ms))
    };
    let tail = format!("{}{}", bunching_note(w), plausible_caveat(&quoted));
    if b.count == 0 {
        return format!(
            "{who}: writes steady at {}, no bursts; peak {p10_text} at 10 ms; {ui}{tail}",
            rate_mib_s(w.mean_mib_s),
        );
    }
    let Some(p) = b.period_s else {
        return format!(
            "{who}: {} write burst(s), too few for a period; peak {p10_text} at 10 ms, mean {}; {ui}{tail}",
            b.count,
            rate_mib_s(w.mean_mib_s),
        );
    };
    // The spread only from 4 bursts on (analysis::MIN_BURSTS_FOR_REGULARITY).
    let regularity = match b.period_cv {
        Some(cv) => format!(
            " ({}, cv {cv:.2})",
            if b.regular { "regular" } else { "irregular" }
        ),
        None => format!(" ({} bursts, too few to say how regular)", b.count),
    };
    format!(
        "{who}: writes come in bursts of {} ({peak_name}{one_ms}) every {p:.2} s{regularity}, {} per burst over {:.0} ms; {ui}; the {} is {:.0}x that{tail}",
        rate_mib_s(p10),
        bytes_fixed(b.mean_bytes.unwrap_or(0.0)),
        b.mean_duration_ms.unwrap_or(0.0),
        if bunched("10ms") {
            "service-time peak"
        } else {
            "10 ms peak"
        },
        w.hidden_factor.unwrap_or(f64::NAN)
    )
}

/// "; its 1 ms and 10 ms completion peaks are completion bunching (...)" when the
/// direction has bunched widths of 1 or 10 ms; empty otherwise.
fn bunching_note(w: &Direction) -> String {
    let fine: Vec<&str> = w
        .bunched
        .iter()
        .filter_map(|x| match x.as_str() {
            "1ms" => Some("1 ms"),
            "10ms" => Some("10 ms"),
            _ => None,
        })
        .collect();
    if fine.is_empty() {
        return String::new();
    }
    format!(
        "; its {} completion peak{} {} completion bunching (I/Os that waited in the device completing together), not a rate it moved",
        fine.join(" and "),
        if fine.len() > 1 { "s" } else { "" },
        if fine.len() > 1 { "are" } else { "is" },
    )
}

/// The caveat on a quoted peak above [`super::bunching::PLAUSIBLE_MIB_S`]; empty when
/// none is.
fn plausible_caveat(quoted: &[f64]) -> String {
    let bound = super::bunching::PLAUSIBLE_MIB_S;
    match quoted.iter().copied().filter(|x| *x > bound).reduce(f64::max) {
        Some(top) => format!(
            "; caveat: {} is more than one device moves ({}, above a PCIe 5.0 x4 NVMe drive's ~14 GiB/s): a cache in between answered",
            rate_mib_s(top),
            rate_mib_s(bound)
        ),
        None => String::new(),
    }
}

pub(crate) fn memory_summary(run: &Run) -> Option<MemorySummary> {
    let m = run.mem.as_ref()?;
    // As before the fold: a column that is there but never above 0 says 0.
    let max = |c: &str| {
        m.columns
            .iter()
            .any(|x| x == c)
            .then(|| m.max_of(c).unwrap_or(0.0).max(0.0) / 1024.0)
    };
    Some(MemorySummary {
        dirty_max_mib: max("dirty_kib"),
        writeback_max_mib: max("writeback_kib"),
        samples: m.rows,
    })
}

pub(crate) fn cpu_summary(run: &Run) -> Option<CpuSummary> {
    let c = run.cpu.as_ref()?;
    if c.rows < 2 {
        return None;
    }
    let first = |name: &str| c.ticks(name).unwrap_or(0.0);
    let names = &CPU_COLUMNS[..CPU_TICK_COLUMNS];
    let total: f64 = names.iter().map(|n| first(n)).sum();
    if total <= 0.0 {
        return None;
    }
    let pct = |n: &str| 100.0 * first(n) / total;
    Some(CpuSummary {
        user_pct: pct("user_ticks") + pct("nice_ticks"),
        system_pct: pct("system_ticks") + pct("irq_ticks") + pct("softirq_ticks"),
        iowait_pct: pct("iowait_ticks"),
        idle_pct: pct("idle_ticks"),
    })
}

fn max_of(it: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    it.flatten().filter(|x| x.is_finite()).reduce(f64::max)
}

/// Per role of load.csv: ops, rate over the time the role ran, errors, worst window p99.
pub(crate) fn load_summary(run: &Run) -> BTreeMap<String, LoadRoleSummary> {
    run.load
        .iter()
        .map(|(role, rows)| {
            let ops: u64 = rows.iter().map(|r| r.ops).sum();
            let bytes: u64 = rows.iter().map(|r| r.bytes).sum();
            // From the role's start (in its first window) to its end (in its last), of
            // the windows with operations: load.csv has a row for every window the role
            // ran, idle ones too (a receiver waiting out its drain), which would dilute
            // the rate of its first to its last operation.
            let busy = |r: &format::load::LoadRow| r.ops > 0 || r.errors > 0;
            let from = rows.iter().position(busy).unwrap_or(0);
            let to = rows.iter().rposition(busy).map_or(rows.len(), |i| i + 1);
            let rows = &rows[from..to.max(from)];
            let active_s = match (rows.first(), rows.last()) {
                (Some(a), Some(b)) if rows.len() > 1 => {
                    let t0 = a.t_ns + a.window_ns.saturating_sub(a.active_ns);
                    (b.t_ns + b.active_ns).saturating_sub(t0) as f64 / 1e9
                }
                (Some(a), _) => a.active_ns as f64 / 1e9,
                _ => f64::NAN,
            };
            let s = LoadRoleSummary {
                ops,
                bytes,
                errors: rows.iter().map(|r| r.errors).sum(),
                ops_per_s: ops as f64 / active_s,
                mib_per_s: bytes as f64 / MIB / active_s,
                worst_window_lat_p99_us: max_of(rows.iter().map(|r| r.lat_p99_us)),
                lat_max_us: max_of(rows.iter().map(|r| r.lat_max_us)),
                worst_window_co_p99_us: max_of(rows.iter().map(|r| r.co_p99_us)),
            };
            (role.clone(), s)
        })
        .collect()
}

/// What the headline says besides each device's sentence (issue 23): a device whose
/// bursts are mostly someone else's bytes (the broker wrote under half of what it wrote,
/// summary.json `broker_io`), and a CPU saturated over the run (busy, all but idle and
/// iowait, at [`super::spikes::CPU_BUSY_PCT`]% or more on average).
pub(crate) fn headline_notes(
    headline: &mut Vec<String>,
    devices: &[DeviceSummary],
    broker_io: Option<&format::summary::BrokerIo>,
    cpu: Option<&CpuSummary>,
) {
    if let Some(b) = broker_io {
        for (line, d) in headline
            .iter_mut()
            .zip(devices.iter().filter(|s| s.write.bytes > 0.0))
        {
            if d.write.bursts.count == 0 {
                continue;
            }
            let Some(share) = b
                .devices
                .iter()
                .find(|x| x.device == d.name)
                .and_then(|x| x.write_share_pct)
            else {
                continue;
            };
            if share < 50.0 {
                line.push_str(&format!(
                    "; the broker wrote {}% of {}'s bytes (proc_io), so these bursts are mostly other writers'",
                    format::units::num(share, 0),
                    d.name
                ));
            }
        }
    }
    if let Some(c) = cpu {
        let busy = 100.0 - c.idle_pct - c.iowait_pct;
        if busy >= super::spikes::CPU_BUSY_PCT {
            headline.push(format!(
                "CPU {}% busy over the run (user {}%, system {}%): its latencies are those of a CPU-bound machine",
                format::units::num(busy, 0),
                format::units::num(c.user_pct, 0),
                format::units::num(c.system_pct, 0)
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use format::summary::Burst;

    #[test]
    fn a_device_whose_bursts_are_mostly_someone_elses_and_a_busy_cpu_are_said() {
        let mut vda = device(&[1.0, 4.0, 7.0, 10.0]);
        vda.name = "vda".into();
        let mut quiet = device(&[]);
        quiet.name = "vdb".into();
        let mut headline = vec!["vda: bursts".to_string(), "vdb: steady".to_string()];
        let share = |d: &str, pct: f64| format::summary::DeviceShare {
            device: d.into(),
            write_share_pct: Some(pct),
            ..Default::default()
        };
        let io = format::summary::BrokerIo {
            processes: vec![],
            devices: vec![share("vda", 24.0), share("vdb", 10.0)],
        };
        let cpu = CpuSummary {
            user_pct: 60.0,
            system_pct: 37.0,
            iowait_pct: 1.0,
            idle_pct: 2.0,
        };
        headline_notes(
            &mut headline,
            &[vda.clone(), quiet.clone()],
            Some(&io),
            Some(&cpu),
        );
        assert_eq!(
            headline,
            [
                "vda: bursts; the broker wrote 24% of vda's bytes (proc_io), so these bursts are mostly other writers'",
                // No bursts: nothing to attribute.
                "vdb: steady",
                "CPU 97% busy over the run (user 60%, system 37%): its latencies are those of a CPU-bound machine",
            ]
        );
        // The broker's own bursts and an idle CPU: nothing added.
        let mut h = vec!["vda: bursts".to_string()];
        let io = format::summary::BrokerIo {
            processes: vec![],
            devices: vec![share("vda", 80.0)],
        };
        let idle = CpuSummary {
            idle_pct: 70.0,
            ..cpu
        };
        headline_notes(&mut h, &[vda], Some(&io), Some(&idle));
        assert_eq!(h, ["vda: bursts"]);
    }

    /// A device that wrote 20 MiB/s on average, with bursts starting at `starts_s`, as
    /// the finder would describe them.
    fn device(starts_s: &[f64]) -> DeviceSummary {
        let list: Vec<Burst> = starts_s
            .iter()
            .map(|&start_s| Burst {
                start_s,
                duration_ms: 50.0,
                bytes: 8.0 * MIB,
                peak_mib_s: 400.0,
            })
            .collect();
        let bins = vec![0.0; 2000];
        let mut bursts = analysis::find_bursts(&bins, &o().burst);
        bursts.count = list.len();
        let n = list.len();
        bursts.period_s = (n >= 3).then_some(3.0);
        bursts.period_cv = (n >= 4).then_some(0.4);
        bursts.mean_bytes = (n > 0).then_some(8.0 * MIB);
        bursts.mean_duration_ms = (n > 0).then_some(50.0);
        bursts.list = list;
        let dir = Direction {
            bytes: 400.0 * MIB,
            ios: 1.0,
            mean_mib_s: 20.0,
            peak_mib_s: Peaks {
                p1ms: 500.0,
                p10ms: 400.0,
                p100ms: 100.0,
                p1s: 30.0,
            },
            peak_iops_10ms: 0.0,
            await_ms: None,
            ui_average_mib_s: 20.0,
            hidden_factor: Some(20.0),
            bursts,
            service_peak_mib_s: None,
            bunched: vec![],
            headline_peak_10ms_mib_s: Some(400.0),
        };
        DeviceSummary {
            name: "vdb".into(),
            why: None,
            write: dir.clone(),
            read: dir,
            flushes: None,
            peak_flushes_per_s_100ms: None,
            max_in_flight: 0.0,
            util_pct: 0.0,
            rows: 0,
        }
    }

    fn o() -> ReportOptions {
        ReportOptions::default()
    }

    #[test]
    fn a_steady_writer_is_steady_with_no_bursts() {
        let h = headline(&device(&[]), 20.0);
        assert!(
            h.starts_with("vdb: writes steady at 20 MiB/s, no bursts"),
            "{h}"
        );
        assert!(!h.contains("every") && !h.contains("regular"), "{h}");
    }

    #[test]
    fn two_bursts_state_no_period() {
        let h = headline(&device(&[1.0, 6.0]), 20.0);
        assert!(h.contains("2 write burst(s), too few for a period"), "{h}");
        assert!(!h.contains("every") && !h.contains("cv"), "{h}");
    }

    #[test]
    fn three_bursts_state_a_period_but_not_its_regularity() {
        let h = headline(&device(&[1.0, 4.0, 7.0]), 20.0);
        assert!(
            h.contains("every 3.00 s (3 bursts, too few to say how regular)"),
            "{h}"
        );
        assert!(!h.contains("cv") && !h.contains("irregular"), "{h}");
    }

    #[test]
    fn four_bursts_state_the_period_and_its_regularity() {
        let h = headline(&device(&[1.0, 4.0, 7.0, 10.0]), 20.0);
        assert!(h.contains("every 3.00 s (irregular, cv 0.40)"), "{h}");
    }
}
