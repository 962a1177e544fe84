//! Interference: how much one thing that ran at the same time hurt another, measured on
//! the run clock from the per-window latency histograms of `load.hlog` and `probe.hlog`
//! ([`format::hist`]). Written into summary.json's `interference`.
//!
//! Three comparisons:
//! - **Write bursts.** Per device with write bursts (summary.json
//!   `devices[].write.bursts.list`, found on 10 ms bins) and per latency series (a tag:
//!   the probe's `read`/`write`/`sync` per phase, each load role, and each one's `.co`
//!   twin, latency from the intended start), the operations whose lives overlapped a
//!   burst are *inside*, the rest *outside* (the rule: [`super::episodes`]). Each side's
//!   histograms are merged and its percentiles read from the merge, never averaged from
//!   per-window percentiles.
//! - **Other harm** (`harm`, `episodes`): per episode kind (stalls, device stalls, long
//!   flushes, CPU saturation: [`super::episodes`]) and series, the same split against the
//!   union of the kind's episodes.
//! - **Restart read bursts.** Per restart (summary.json `restarts[]`) and load series: the
//!   windows that overlap the node's read burst (its first to its last busy 10 ms bin
//!   after the restart; from the restart to healthy when it read nothing) are *during*,
//!   the windows that end by the time the node went down (its `node_stop`/`node_kill`
//!   event before the `restart`; the restart itself without one), from the series' first
//!   window, are *before*: the outage and a page-cache drop are in neither. (Windows, not
//!   lives: a restart's spans are seconds long, its windows 100 ms.)
//!
//! A series with nothing outside the episodes gets no ratio, and its line says so.
//!
//! Units: times on the run clock in ns inside, s and ms in the summary; latency µs in
//! the summary (the histograms hold ns).

use hdrhistogram::Histogram;

use format::events::{Body, Event};
use format::hist::{self, Interval};
use format::summary::{
    BurstInterference, DeviceSummary, EpisodeSummary, HarmInterference, Interference, Percentiles,
    RestartInterference, RestartSummary,
};
use format::units::{num, sig};

pub(crate) use super::series::burst_spans;
use super::series::short;
pub use super::series::{lat, overlaps, series, Series, Span};

/// Percentiles of a merged histogram (ns) in µs.
pub fn percentiles(h: Option<&Histogram<u64>>) -> Percentiles {
    let Some(h) = h.filter(|h| !h.is_empty()) else {
        return Percentiles::default();
    };
    let q = |q: f64| Some(h.value_at_quantile(q) as f64 / 1e3);
    Percentiles {
        count: h.len(),
        p50_us: q(0.50),
        p90_us: q(0.90),
        p99_us: q(0.99),
        p999_us: q(0.999),
        max_us: Some(h.max() as f64 / 1e3),
    }
}

fn ratio(num: &Percentiles, den: &Percentiles) -> Option<f64> {
    match (num.p99_us, den.p99_us) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

fn times(r: Option<f64>) -> String {
    r.map(|r| format!(" ({}x)", short(r))).unwrap_or_default()
}

/// Percentiles of a weighted histogram ([`super::episodes::WEIGHT`] per operation), µs;
/// `count` in operations (rounded).
fn weighted_percentiles(h: &Histogram<u64>) -> Percentiles {
    let mut p = percentiles(Some(h));
    p.count = (h.len() as f64 / super::episodes::WEIGHT).round() as u64;
    p
}

/// The inside and outside percentiles of a split, the inside share of its weight and the
/// p99 ratio.
fn sides(
    hin: &Histogram<u64>,
    hout: &Histogram<u64>,
) -> (Percentiles, Percentiles, f64, Option<f64>) {
    let (pin, pout) = (weighted_percentiles(hin), weighted_percentiles(hout));
    let total = hin.len() + hout.len();
    let share = if total > 0 {
        hin.len() as f64 / total as f64
    } else {
        0.0
    };
    let r = ratio(&pin, &pout);
    (pin, pout, share, r)
}

/// One series inside versus outside one device's write bursts, by the operations' lives
/// ([`super::episodes::split`]); `own`: the series' own stalls (sorted, disjoint).
fn against_bursts(s: &Series, device: &str, spans: &[Span], own: &[Span]) -> BurstInterference {
    let spans = super::episodes::union(spans.iter().copied());
    let (hin, hout, touched) = super::episodes::split(&s.windows, &spans, own);
    let (pin, pout, share, p99_ratio) = sides(&hin, &hout);
    let line = format!(
        "{} p99 {} outside {device}'s write bursts, {} inside{}, {}% of its {} lived through one",
        s.label(),
        lat(pout.p99_us),
        lat(pin.p99_us),
        times(p99_ratio),
        num(100.0 * share, 1),
        s.ops_noun()
    );
    BurstInterference {
        series: s.label(),
        source: s.source.into(),
        name: s.tag.name.clone(),
        phase: s.tag.phase,
        co: s.tag.co,
        device: device.into(),
        window_ms: s.window_ms(),
        windows_inside: touched,
        windows_outside: s.windows.len() - touched,
        inside: pin,
        outside: pout,
        p99_ratio,
        share_in_bursts: share,
        line,
    }
}

/// The span a restart's re-read covers: its read burst, or the restart to healthy.
fn reread_span(r: &RestartSummary) -> Span {
    let ns = |s: f64| (s * 1e9).round().max(0.0) as u64;
    match r.read_burst_start_s {
        Some(a) => (ns(a), ns(a + r.read_burst_s.max(0.01))),
        None => {
            let to = r.t_s + r.healthy_ms.or(r.current_ms).unwrap_or(0.0) / 1e3;
            (ns(r.t_s), ns(to).max(ns(r.t_s) + 1))
        }
    }
}

/// When the restarted node went down: its last `node_stop` or `node_kill` event at or
/// before the `restart` event (a scenario's restart stops the node, may drop the page
/// cache, then starts it); the restart itself when there is none.
fn went_down_ns(events: &[Event], r: &RestartSummary) -> u64 {
    let restart_ns = (r.t_s * 1e9).round() as u64;
    events
        .iter()
        .filter(|e| {
            matches!(e.body, Body::NodeStop(_) | Body::NodeKill(_))
                && e.t_ns <= restart_ns
                && e.body.node() == Some(r.node.as_str())
        })
        .map(|e| e.t_ns)
        .max()
        .unwrap_or(restart_ns)
}

/// One load series during a restart's re-read versus before the node went down
/// (`down_ns`, see [`went_down_ns`]).
fn against_restart(s: &Series, r: &RestartSummary, down_ns: u64) -> RestartInterference {
    let restart_ns = down_ns;
    let during_span = reread_span(r);
    let before: Vec<&Interval> = s
        .windows
        .iter()
        .copied()
        .filter(|w| w.start_ns + w.duration_ns <= restart_ns)
        .collect();
    let during: Vec<&Interval> = s
        .windows
        .iter()
        .copied()
        .filter(|w| overlaps(w, &[during_span]))
        .collect();
    let pb = percentiles(hist::merge(before.iter().copied()).as_ref());
    let pd = percentiles(hist::merge(during.iter().copied()).as_ref());
    let p99_ratio = ratio(&pd, &pb);
    let from_s = before
        .iter()
        .map(|w| w.start_ns)
        .min()
        .unwrap_or(restart_ns) as f64
        / 1e9;
    let line = format!(
        "{} p99 {} before {} went down for its restart at {} s, {} during its re-read{}",
        s.label(),
        lat(pb.p99_us),
        r.node,
        num(r.t_s, 1),
        lat(pd.p99_us),
        times(p99_ratio)
    );
    RestartInterference {
        node: r.node.clone(),
        restart_s: r.t_s,
        series: s.label(),
        name: s.tag.name.clone(),
        phase: s.tag.phase,
        co: s.tag.co,
        before_from_s: from_s,
        before_to_s: down_ns as f64 / 1e9,
        during_from_s: during_span.0 as f64 / 1e9,
        during_to_s: during_span.1 as f64 / 1e9,
        before: pb,
        during: pd,
        p99_ratio,
        line,
    }
}

/// The rule in words, with the windows the series used.
fn rule(series: &[Series]) -> String {
    let mut w: Vec<String> = series
        .iter()
        .map(|s| format!("{} {} ms", s.source, sig(s.window_ms())))
        .collect();
    w.dedup();
    format!(
        "an operation is inside a burst, stall or flush when its life (send or intended start to \
         completion) overlaps it; the histograms give each operation's latency and the window it \
         completed in ({}), so its completion is taken as uniform over the part of that window in \
         which its series was not stalled, and it counts inside with the share of that part in \
         which its life would have overlapped (bursts are found on 10 ms bins); before a restart: \
         windows that end by the time the node went down; during its re-read: windows that \
         overlap the node's read burst",
        w.join(", ")
    )
}

/// The devices whose bursts are "the broker's": those of meta.json `broker_nodes`, else
/// those the user named or that hold a volume (`why` "named", "holds ..." or "btrfs
/// member ...": `report::order`'s first two ranks). A loop device's backing disk also
/// carries everything else on the machine, so it is not one of them.
pub(crate) fn broker_devices(meta: &format::meta::Meta, devices: &[DeviceSummary]) -> Vec<String> {
    let nodes: Vec<String> = meta
        .broker_nodes()
        .unwrap_or_default()
        .into_iter()
        .flat_map(|n| n.devices)
        .collect();
    if !nodes.is_empty() {
        return nodes;
    }
    devices
        .iter()
        .filter(|d| {
            d.why.as_deref().is_some_and(|w| {
                w == "named" || w.starts_with("holds") || w.starts_with("btrfs member")
            })
        })
        .map(|d| d.name.clone())
        .collect()
}

/// What the run recorded of harm besides write bursts ([`super::episodes`]).
#[derive(Default)]
pub struct HarmInputs<'a> {
    /// Each device's stalls and long flushes.
    pub disks: Vec<(String, &'a super::episodes::DiskHarm)>,
    /// Each load role's and probe direction's stalls (load.csv, probe.csv).
    pub stalls: Vec<super::episodes::VictimStall>,
    /// cpu.csv's folded `busy_pct` points.
    pub(crate) cpu_busy: Option<(Vec<u64>, Vec<f64>)>,
    /// With `--trace`: sync calls of 20 ms or more (span, words) and flush, PREFLUSH and
    /// FUA requests served that long (span, device).
    pub sync_calls: Vec<(Span, String)>,
    pub(crate) flush_requests: Vec<(Span, String)>,
}

/// The most lines of one episode kind in `lines` (all are in `episodes`).
const MAX_EPISODE_LINES: usize = 5;

/// One series against the union of one kind's episodes.
fn against_kind(
    s: &Series,
    kind: &str,
    n: usize,
    spans: &[Span],
    own: &[Span],
) -> HarmInterference {
    let (hin, hout, _) = super::episodes::split(&s.windows, spans, own);
    let (pin, pout, share, p99_ratio) = sides(&hin, &hout);
    let what = super::episodes::kind_plural(kind);
    let line = if pout.count == 0 {
        format!(
            "{} p99 {} inside {what}; none of its {} lived outside them, so there is no \
             baseline to compare with",
            s.label(),
            lat(pin.p99_us),
            s.ops_noun()
        )
    } else {
        format!(
            "{} p99 {} outside {what}, {} inside{}: {} of its {} lived through one",
            s.label(),
            lat(pout.p99_us),
            lat(pin.p99_us),
            times(p99_ratio),
            num(pin.count as f64, 0),
            s.ops_noun()
        )
    };
    HarmInterference {
        kind: kind.into(),
        episodes: n,
        series: s.label(),
        source: s.source.into(),
        name: s.tag.name.clone(),
        phase: s.tag.phase,
        co: s.tag.co,
        inside: pin,
        outside: pout,
        p99_ratio,
        share_inside: share,
        line,
    }
}

/// summary.json's `interference` from the run's histograms, devices, restarts and harm
/// episodes; None when the run has no latency histograms. `preferred`
/// ([`broker_devices`]) come first and give the quotable lines; among them and among the
/// rest, the busiest writer first.
pub fn interference(
    probe: &[Interval],
    load: &[Interval],
    devices: &[DeviceSummary],
    preferred: &[String],
    restarts: &[RestartSummary],
    events: &[Event],
    harm: HarmInputs,
) -> Option<Interference> {
    let all = series(probe, load);
    if all.is_empty() {
        return None;
    }
    // Each series' own stalls: where none of its operations completed.
    let own_of = |s: &Series| -> Vec<Span> {
        super::episodes::union(
            harm.stalls
                .iter()
                .filter(|v| {
                    v.victim.source == s.source
                        && v.victim.name == s.tag.name
                        && v.victim.phase == s.tag.phase
                })
                .map(|v| (v.start_ns, v.end_ns)),
        )
    };
    let mut devs: Vec<&DeviceSummary> = devices
        .iter()
        .filter(|d| !d.write.bursts.list.is_empty())
        .collect();
    devs.sort_by(|a, b| {
        let pa = preferred.contains(&a.name);
        let pb = preferred.contains(&b.name);
        pb.cmp(&pa).then(b.write.bytes.total_cmp(&a.write.bytes))
    });
    let mut out = Interference {
        rule: rule(&all),
        ..Default::default()
    };
    if devs.is_empty() {
        // No bursts to be inside of: say so of the device the lines would be about, rather
        // than a ratio of everything against nothing.
        let steady = devices
            .iter()
            .filter(|d| d.write.bytes > 0.0)
            .max_by(|a, b| {
                let pa = preferred.contains(&a.name);
                let pb = preferred.contains(&b.name);
                pa.cmp(&pb).then(a.write.bytes.total_cmp(&b.write.bytes))
            });
        if let Some(d) = steady {
            out.lines.push(format!(
                "{} wrote steadily at {}, no bursts: no latency inside versus outside bursts to compare",
                d.name,
                format::units::rate_mib_s(d.write.mean_mib_s)
            ));
        }
    }
    for (k, d) in devs.iter().enumerate() {
        let spans = burst_spans(d);
        for s in &all {
            let b = against_bursts(s, &d.name, &spans, &own_of(s));
            if k == 0 && !s.tag.co {
                out.lines.push(b.line.clone());
            }
            out.bursts.push(b);
        }
    }
    for r in restarts {
        let down_ns = went_down_ns(events, r);
        for s in all.iter().filter(|s| s.source == "load") {
            let x = against_restart(s, r, down_ns);
            if !s.tag.co {
                out.lines.push(x.line.clone());
            }
            out.restarts.push(x);
        }
    }
    // The harm episodes, their lines (a few of each kind), and each series inside versus
    // outside each kind.
    let cpu = super::spikes::cpu_spans(harm.cpu_busy);
    let faults = super::spikes::fault_spans(events);
    let covered = (
        all.iter()
            .filter_map(|s| s.windows.first().map(|w| w.start_ns))
            .min()
            .unwrap_or(0),
        all.iter()
            .filter_map(|s| s.windows.last().map(|w| w.end_ns()))
            .max()
            .unwrap_or(0),
    );
    out.episodes = super::episodes::assemble(
        &harm.disks,
        &harm.stalls,
        &cpu,
        &faults,
        covered,
        (&harm.sync_calls, &harm.flush_requests),
    );
    for kind in [
        super::episodes::STALL,
        super::episodes::DEVICE_STALL,
        super::episodes::FLUSH,
        super::episodes::SYNC_CALL,
        super::episodes::CPU,
    ] {
        let of_kind: Vec<&EpisodeSummary> =
            out.episodes.iter().filter(|e| e.kind == kind).collect();
        if of_kind.is_empty() {
            continue;
        }
        // Long flushes print when a series stalled through them; the rest always (a few).
        let mut printed = 0;
        for e in &of_kind {
            let worth = !(kind == super::episodes::FLUSH || kind == super::episodes::SYNC_CALL)
                || !e.victims.is_empty();
            if worth && printed < MAX_EPISODE_LINES {
                out.lines.push(e.line.clone());
                printed += 1;
            }
        }
        let left = of_kind.len() - printed;
        if printed > 0 && left > 0 {
            out.lines.push(format!(
                "and {left} more {} (summary.json interference.episodes)",
                super::episodes::kind_plural(kind)
            ));
        }
        let ns = |s: f64| (s * 1e9).round().max(0.0) as u64;
        let spans = super::episodes::union(
            of_kind
                .iter()
                .map(|e| (ns(e.start_s), ns(e.end_s).max(ns(e.start_s) + 1))),
        );
        for s in &all {
            let h = against_kind(s, kind, of_kind.len(), &spans, &own_of(s));
            if !s.tag.co && h.inside.count > 0 {
                out.lines.push(h.line.clone());
            }
            out.harm.push(h);
        }
    }
    // The devices the run is about; every device when it names none.
    let about: Vec<&DeviceSummary> = devices
        .iter()
        .filter(|d| preferred.is_empty() || preferred.contains(&d.name))
        .collect();
    let episodes = super::spikes::episodes(&about, &cpu, &faults, &out.episodes);
    for s in all.iter().filter(|s| !s.tag.co) {
        for sp in super::spikes::spikes(s, &episodes) {
            out.lines.push(sp.line.clone());
            out.spikes.push(sp);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use format::summary::{Burst, Bursts, Direction, Peaks};

    /// A 100 ms window at `k * 100 ms` holding `n` values of `us` µs each.
    fn window(tag: &str, k: u64, us: &[(u64, u64)]) -> Interval {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
        for &(v, n) in us {
            h.record_n(v * 1000, n).unwrap();
        }
        Interval {
            tag: tag.into(),
            start_ns: k * 100_000_000,
            duration_ns: 100_000_000,
            hist: hist::Sparse::of(&h),
        }
    }

    fn device(name: &str, bursts: &[(f64, f64)]) -> DeviceSummary {
        let list: Vec<Burst> = bursts
            .iter()
            .map(|&(start_s, duration_ms)| Burst {
                start_s,
                duration_ms,
                bytes: 1.0,
                peak_mib_s: 1.0,
            })
            .collect();
        let bursts = Bursts {
            bin_ms: 10.0,
            threshold_mib_s: 1.0,
            count: list.len(),
            period_s: None,
            period_cv: None,
            regular: false,
            mean_bytes: None,
            mean_duration_ms: None,
            share_of_bytes: 0.0,
            list,
        };
        let dir = Direction {
            bytes: 1e6,
            ios: 1.0,
            mean_mib_s: 1.0,
            peak_mib_s: Peaks {
                p1ms: 0.0,
                p10ms: 0.0,
                p100ms: 0.0,
                p1s: 0.0,
            },
            peak_iops_10ms: 0.0,
            await_ms: None,
            ui_average_mib_s: 0.0,
            hidden_factor: None,
            bursts,
            service_peak_mib_s: None,
            bunched: vec![],
            headline_peak_10ms_mib_s: None,
        };
        DeviceSummary {
            name: name.into(),
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

    #[test]
    fn a_30ms_burst_claims_the_whole_100ms_window_it_touches() {
        let w = window("write", 2, &[(100, 1)]);
        // 230..260 ms overlaps the window 200..300 ms.
        assert!(overlaps(&w, &[(230_000_000, 260_000_000)]));
        // Ending exactly at the window's start does not.
        assert!(!overlaps(&w, &[(150_000_000, 200_000_000)]));
        assert!(!overlaps(&w, &[(300_000_000, 330_000_000)]));
    }

    #[test]
    fn inside_and_outside_come_from_merged_windows_not_averaged_percentiles() {
        // Ten windows of 99 fast writes (100 µs) and one slow one; bursts cover windows 3
        // and 4 whole, whose writes are 10 ms.
        let mut iv = vec![];
        for k in 0..10 {
            let slow = if k == 3 || k == 4 { 10_000 } else { 100 };
            iv.push(window("write", k, &[(slow, 99), (slow * 2, 1)]));
        }
        let d = device("vdb", &[(0.30, 100.0), (0.40, 100.0)]);
        let x = interference(&iv, &[], &[d], &[], &[], &[], HarmInputs::default()).unwrap();
        let b = &x.bursts[0];
        // Windows 3 and 4 are inside whole; of window 5 (0.5-0.6 s) a 100 µs write that
        // completed in its first 100 µs (0.1%) lived in the burst: 0.1 of a write.
        assert_eq!((b.windows_inside, b.windows_outside), (3, 7));
        assert_eq!((b.inside.count, b.outside.count), (200, 800));
        // p99 of 800 values, 792 of 100 µs and 8 of 200 µs: 100 µs.
        assert!((b.outside.p99_us.unwrap() - 100.0).abs() < 0.1, "{b:?}");
        assert!((b.inside.p99_us.unwrap() - 10_000.0).abs() < 10.0, "{b:?}");
        assert!((b.inside.max_us.unwrap() - 20_000.0).abs() < 20.0, "{b:?}");
        assert!(
            (b.share_in_bursts - 0.2001).abs() < 1e-4,
            "{}",
            b.share_in_bursts
        );
        assert!((b.p99_ratio.unwrap() - 100.0).abs() < 0.2);
        assert_eq!(
            x.lines[0],
            "probe write p99 100 µs outside vdb's write bursts, 10 ms inside (100x), 20.0% of its writes lived through one"
        );
        // And the two slow windows are one spike, explained by the bursts in them.
        assert_eq!(x.spikes.len(), 1, "{:?}", x.spikes);
        assert_eq!(x.spikes[0].explained_by.len(), 2, "{:?}", x.spikes);
        assert_eq!(x.lines.len(), 2);
        assert!(x.rule.contains("probe 100 ms"), "{}", x.rule);
    }

    #[test]
    fn a_stall_the_disk_did_not_cause_is_named_with_its_victims_and_no_cause() {
        // js-pub acks 1 ms, stopped 2.05-2.45 s (windows 21-23 complete nothing), its
        // stuck acks completing in window 24 at 400 ms; the disk idle throughout.
        let load: Vec<Interval> = (0..40)
            .filter(|k| !(21..=23).contains(k))
            .map(|k| {
                let us: &[(u64, u64)] = if k == 24 {
                    &[(400_000, 5), (1_000, 45)]
                } else {
                    &[(1_000, 100)]
                };
                window("js-pub", k, us)
            })
            .collect();
        let stalls = vec![super::super::episodes::VictimStall {
            victim: super::super::episodes::Victim {
                source: "load",
                name: "js-pub".into(),
                phase: None,
            },
            start_ns: 2_050_000_000,
            end_ns: 2_450_000_000,
        }];
        let x = interference(
            &[],
            &load,
            &[],
            &[],
            &[],
            &[],
            HarmInputs {
                stalls,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(x.episodes.len(), 1, "{:?}", x.episodes);
        let e = &x.episodes[0];
        assert_eq!(e.kind, "stall");
        assert_eq!(e.victims, ["js-pub"]);
        assert_eq!(e.cause, None);
        assert!(e.line.starts_with("stall 2.05-2.45 s (400 ms): js-pub had operations outstanding and none completing; no device had"), "{}", e.line);
        let h = &x.harm[0];
        assert_eq!(
            (h.kind.as_str(), h.series.as_str()),
            ("stall", "js-pub latency")
        );
        // The 5 stuck acks inside, and 45 x 1 ms / 50 ms live of the fast ones.
        assert_eq!(h.inside.count, 6);
        assert!(h.inside.p99_us.unwrap() > 399_000.0, "{h:?}");
        assert!(h.p99_ratio.unwrap() > 100.0, "{h:?}");
        assert!(x.lines.contains(&h.line), "{:?}", x.lines);
    }

    #[test]
    fn a_steady_device_gives_no_ratio_and_says_why() {
        let iv: Vec<_> = (0..10).map(|k| window("write", k, &[(100, 9)])).collect();
        let x = interference(
            &iv,
            &[],
            &[device("vdb", &[])],
            &[],
            &[],
            &[],
            HarmInputs::default(),
        )
        .unwrap();
        assert!(x.bursts.is_empty(), "{:?}", x.bursts);
        assert_eq!(
            x.lines,
            vec!["vdb wrote steadily at 1.00 MiB/s, no bursts: no latency inside versus outside bursts to compare"]
        );
    }

    #[test]
    fn each_phase_and_the_corrected_twin_are_their_own_series() {
        let probe = vec![
            window("p1:write", 0, &[(100, 1)]),
            window("p2:write", 1, &[(100, 1)]),
        ];
        let load = vec![
            window("p0:js-pub", 0, &[(500, 1)]),
            window("p0:js-pub.co", 0, &[(900, 1)]),
        ];
        let d = device("vdb", &[(0.0, 10.0)]);
        let x = interference(&probe, &load, &[d], &[], &[], &[], HarmInputs::default()).unwrap();
        let names: Vec<&str> = x.bursts.iter().map(|b| b.series.as_str()).collect();
        assert_eq!(
            names,
            [
                "phase 1 probe write",
                "phase 2 probe write",
                "phase 0 js-pub latency",
                "phase 0 js-pub latency from intended start"
            ]
        );
        // The corrected twin has no quotable line of its own.
        assert_eq!(x.lines.len(), 3);
    }

    #[test]
    fn a_restart_compares_its_read_burst_with_the_time_before_the_node_went_down() {
        // Acks at 1 ms until n2 stops at 0.6 s, 5 ms while it is down, n2 starts again at
        // 1.0 s, 50 ms during its re-read at 1.2..1.5 s, 1 ms after.
        let load: Vec<Interval> = (0..20)
            .map(|k| {
                let us = match k {
                    6..=9 => 5_000,
                    12..=14 => 50_000,
                    _ => 1_000,
                };
                window("js-pub", k, &[(us, 10)])
            })
            .collect();
        let r = RestartSummary {
            node: "n2".into(),
            t_s: 1.0,
            devices: vec![],
            current_ms: None,
            healthy_ms: Some(100.0),
            window_s: 1.0,
            read_bytes: 1.0,
            read_peak_mib_s: 1.0,
            read_burst_s: 0.3,
            read_burst_start_s: Some(1.2),
        };
        let ev = |t_ns: u64, kind: &str, node: &str| Event {
            t_ns,
            body: match kind {
                "node_stop" => Body::NodeStop(format::events::NodeStop { node: node.into() }),
                "restart" => Body::Restart(format::events::Restart {
                    node: node.into(),
                    ..Default::default()
                }),
                _ => unreachable!("{kind}"),
            },
        };
        let events = [
            ev(200_000_000, "node_stop", "n1"),
            ev(600_000_000, "node_stop", "n2"),
            ev(1_000_000_000, "restart", "n2"),
        ];
        let x = interference(&[], &load, &[], &[], &[r], &events, HarmInputs::default()).unwrap();
        let y = &x.restarts[0];
        assert_eq!((y.before.count, y.during.count), (60, 30));
        assert_eq!((y.before_from_s, y.before_to_s), (0.0, 0.6));
        assert!((y.before.p99_us.unwrap() - 1000.0).abs() < 1.0, "{y:?}");
        assert!((y.during.p99_us.unwrap() - 50_000.0).abs() < 50.0, "{y:?}");
        assert_eq!(
            y.line,
            "js-pub latency p99 1.0 ms before n2 went down for its restart at 1.0 s, 50 ms during its re-read (50x)"
        );
    }

    #[test]
    fn the_brokers_devices_come_first_and_give_the_lines() {
        let iv = vec![window("write", 0, &[(100, 1)])];
        let mut backing = device("vda", &[(0.0, 10.0)]);
        backing.write.bytes = 1e9;
        let store = device("loop0", &[(0.0, 10.0)]);
        let x = interference(
            &iv,
            &[],
            &[backing, store],
            &["loop0".into()],
            &[],
            &[],
            HarmInputs::default(),
        )
        .unwrap();
        let devs: Vec<&str> = x.bursts.iter().map(|b| b.device.as_str()).collect();
        assert_eq!(devs, ["loop0", "vda"]);
        assert_eq!(x.lines.len(), 1);
        assert!(x.lines[0].contains("loop0's"), "{:?}", x.lines);
    }

    #[test]
    fn no_histograms_no_section() {
        assert!(interference(
            &[],
            &[],
            &[device("vdb", &[(0.0, 10.0)])],
            &[],
            &[],
            &[],
            HarmInputs::default()
        )
        .is_none());
    }
}
