//! Harm episodes other than write bursts (issue 23): the times something was stuck, found
//! from what the run recorded, and the rule that puts an operation inside one.
//!
//! # The episodes
//! - **Device stall** (per device, from diskstats): requests in flight and no read,
//!   write, discard or flush completing for at least [`DEVICE_STALL_MIN_MS`]. It starts at
//!   the row after which nothing completed and ends at the row that shows a completion
//!   again (1 ms rows: to the millisecond). Devices stalled at once are one episode.
//! - **Long flush** (per device, from diskstats' flush count and flush time): flushes
//!   completed in one row interval whose time per flush is at least [`FLUSH_MIN_MS`]; it
//!   ends at the row that counts it and began its time per flush earlier (the kernel adds
//!   a flush's time when it completes). Flushes overlapping on several devices are one
//!   episode ("a 466 ms flush on loop11 and loop12").
//! - **Victim stall** (per load role and probe direction, from load.csv/probe.csv): the
//!   victim had operations outstanding and completed none. A row with 0 completions whose
//!   `oldest_wait_us` is at least its window (the oldest operation waited through the whole
//!   window) is stalled; consecutive ones are one stall. The oldest stuck operation was
//!   due at `t_ns + window_ns - oldest_wait` (exact to the ns the writer measured); the
//!   stall ends when it completed: then plus the largest latency from the intended start
//!   in the next window with completions (`co_max_us`, `lat_co_max_us`; the latency from
//!   the send where there is none), kept inside that window; and starts when it was sent:
//!   its completion less the largest latency from the send in that window (`lat_max_us`,
//!   `clat_max_us`), no earlier than it was due (a victim behind its schedule sends late,
//!   and until then what it had in flight was completing). A stall shorter than a window leaves no such row and shows as a spike
//!   ([`super::spikes`]). Victims stalled at once are one episode. A victim stall is what
//!   was hurt, not why: its cause is the device stall, flush or fault that overlaps it,
//!   or none ("no device had ..."): a frozen file system or a stopped broker holds
//!   operations while the disk idles.
//!
//! # Inside and outside: an operation's life
//! An operation is inside an episode when its life, from its start (the send, or the
//! intended start for a series "from intended start") to its completion, overlaps the
//! episode. The histograms ([`format::hist`]) say each operation's latency `L` and
//! the window `[a, b)` it completed in, not where in it: the completion is taken as
//! uniform over the window's *live part* (the window less its own series' victim stalls,
//! during which by definition nothing of it completed), and each latency bucket counts
//! inside with the share of that part in which an operation of latency `L` would have
//! overlapped an episode `[s, e)`, i.e. completed in `(s, e + L)`; the rest counts
//! outside. So an operation that waited 466 ms through a flush and completed after it is
//! inside (the case a completion-window rule got backwards), a 100 µs operation completed
//! next to a 30 ms burst is inside with the share of its window the burst and its life
//! touch, and nothing is dropped: inside plus outside is every operation. Percentiles are
//! read from the merged, weighted histograms (weights in thousandths of an operation),
//! never averaged. A finer `--window` / `--stats-window` sharpens the split.
//!
//! Units: run clock ns inside; s and ms in the summary.
//!
//! Long because its tests (the last quarter) build each kind of harm at a known moment and
//! check the episode found there; the code itself is under 750 lines.

use std::collections::BTreeMap;

/// CPU busy (all but idle and iowait) over this is a saturation episode, %.
pub(crate) const CPU_BUSY_PCT: f64 = 90.0;

use hdrhistogram::Histogram;

use format::hist::Interval;
use format::load::LoadRow;
use format::probe::ProbeRow;
use format::summary::EpisodeSummary;

use super::analysis::Span;

/// A span and what it was, in words (a sync call) or where (a flush request's device).
pub(crate) type Named = (Span, String);

/// Requests in flight and nothing completing for this long is a device stall, ms.
const DEVICE_STALL_MIN_MS: f64 = 50.0;
/// A flush whose time is at least this is an episode of its own, ms.
pub(crate) const FLUSH_MIN_MS: f64 = 20.0;
/// Episodes kept per device and kind (a device stalled every second of a day is still
/// reported, its first ones).
const MAX_PER_DEVICE: usize = 10_000;
/// Weights are counted in thousandths of an operation.
pub(crate) const WEIGHT: f64 = 1000.0;

/// A device's stall: requests in flight, none completing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceStall {
    pub start_ns: u64,
    pub end_ns: u64,
    /// The most requests in flight during it.
    pub max_in_flight: u64,
}

/// Flushes whose time per flush was at least [`FLUSH_MIN_MS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LongFlush {
    pub start_ns: u64,
    pub end_ns: u64,
    pub count: u64,
}

/// What one device's rows say of stalls and long flushes, accumulated row by row.
#[derive(Debug, Clone, Default)]
pub struct DiskHarm {
    pub stalls: Vec<DeviceStall>,
    pub flushes: Vec<LongFlush>,
    /// The stall under way: its start and most requests in flight.
    open: Option<(u64, u64)>,
}

impl DiskHarm {
    /// The row interval `(t0, t1]`: requests in flight at `t0` and `t1`, whether anything
    /// completed in it, the flushes completed and their time (ms).
    pub fn interval(
        &mut self,
        (t0, t1): (u64, u64),
        in_flight: (Option<u64>, Option<u64>),
        completed: bool,
        flushes: Option<f64>,
        flush_ms: Option<f64>,
    ) {
        let busy = in_flight.0.is_some_and(|x| x > 0);
        if busy && !completed {
            let m = in_flight.0.max(in_flight.1).unwrap_or(0);
            let o = self.open.get_or_insert((t0, m));
            o.1 = o.1.max(m);
        } else if let Some((s, m)) = self.open.take() {
            self.close(s, if completed { t1 } else { t0 }, m);
        }
        if let (Some(n), Some(ms)) = (flushes, flush_ms) {
            if n >= 1.0 && ms / n >= FLUSH_MIN_MS && self.flushes.len() < MAX_PER_DEVICE {
                let each_ns = (ms / n * 1e6) as u64;
                self.flushes.push(LongFlush {
                    start_ns: t1.saturating_sub(each_ns),
                    end_ns: t1,
                    count: n as u64,
                });
            }
        }
    }

    fn close(&mut self, s: u64, e: u64, m: u64) {
        if e.saturating_sub(s) as f64 >= DEVICE_STALL_MIN_MS * 1e6
            && self.stalls.len() < MAX_PER_DEVICE
        {
            self.stalls.push(DeviceStall {
                start_ns: s,
                end_ns: e,
                max_in_flight: m,
            });
        }
    }

    /// The rows ended at `t`: a stall still under way ends there.
    pub fn finish(&mut self, t: Option<u64>) {
        if let (Some((s, m)), Some(t)) = (self.open.take(), t) {
            self.close(s, t, m);
        }
    }
}

/// Who was hurt: a probe direction or a load role, in a phase.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Victim {
    /// `probe` or `load`.
    pub source: &'static str,
    pub name: String,
    pub phase: Option<u32>,
}

impl Victim {
    /// `probe write`, `js-pub`, `phase 2 probe read`.
    pub fn label(&self) -> String {
        let p = self
            .phase
            .map(|p| format!("phase {p} "))
            .unwrap_or_default();
        if self.source == "probe" {
            format!("{p}probe {}", self.name)
        } else {
            format!("{p}{}", self.name)
        }
    }
}

/// A victim's stall.
#[derive(Debug, Clone, PartialEq)]
pub struct VictimStall {
    pub victim: Victim,
    pub start_ns: u64,
    pub end_ns: u64,
}

/// One window of a victim, as the stall finder reads it.
struct Win {
    t_ns: u64,
    window_ns: u64,
    done: u64,
    oldest_wait_us: Option<f64>,
    /// The largest latency from the intended start (else from the send), µs.
    max_us: Option<f64>,
    /// The largest latency from the send (the probe's submission), µs.
    send_max_us: Option<f64>,
}

/// Every victim's stalls: load roles first, then probe directions.
pub(crate) fn victim_stalls(
    load: &BTreeMap<String, Vec<LoadRow>>,
    probe: Option<&BTreeMap<String, Vec<ProbeRow>>>,
) -> Vec<VictimStall> {
    let mut groups: BTreeMap<Victim, Vec<Win>> = BTreeMap::new();
    for (role, rows) in load {
        for r in rows {
            groups
                .entry(Victim {
                    source: "load",
                    name: role.clone(),
                    phase: r.phase,
                })
                .or_default()
                .push(Win {
                    t_ns: r.t_ns,
                    window_ns: r.window_ns,
                    done: r.ops,
                    oldest_wait_us: r.oldest_wait_us,
                    max_us: r.co_max_us.or(r.lat_max_us),
                    send_max_us: r.lat_max_us,
                });
        }
    }
    for (dir, rows) in probe.into_iter().flatten() {
        for r in rows {
            groups
                .entry(Victim {
                    source: "probe",
                    name: dir.clone(),
                    phase: r.phase,
                })
                .or_default()
                .push(Win {
                    t_ns: r.t_ns,
                    window_ns: r.window_ns,
                    done: r.ios,
                    oldest_wait_us: r.oldest_wait_us,
                    max_us: r.lat_co_max_us.or(r.clat_max_us),
                    send_max_us: r.clat_max_us,
                });
        }
    }
    let mut out = vec![];
    for (victim, mut ws) in groups {
        // A direction the probe never completed anything in (reads of a write-only
        // probe share the rows' oldest wait) is no victim.
        if ws.iter().all(|w| w.done == 0) {
            continue;
        }
        ws.sort_by_key(|w| w.t_ns);
        let stalled = |w: &Win| {
            w.done == 0
                && w.oldest_wait_us
                    .is_some_and(|x| x * 1e3 >= w.window_ns as f64)
        };
        let mut i = 0;
        while i < ws.len() {
            if !stalled(&ws[i]) {
                i += 1;
                continue;
            }
            let first = &ws[i];
            let wait_ns = (first.oldest_wait_us.unwrap_or(0.0) * 1e3) as u64;
            // The oldest stuck operation's intended start.
            let due = (first.t_ns + first.window_ns).saturating_sub(wait_ns);
            let mut j = i;
            while j + 1 < ws.len() && stalled(&ws[j + 1]) {
                j += 1;
            }
            let last_end = ws[j].t_ns + ws[j].window_ns;
            let (mut start, end) = (due, last_end);
            let end = match ws.get(j + 1) {
                Some(next) if next.done > 0 => {
                    // It completed `max_us` after it was due...
                    let done = next.max_us.map(|m| due + (m * 1e3) as u64);
                    // ... and `send_max_us` after it was sent: a victim behind its
                    // schedule sent it late, and until then it was not in flight (what
                    // it had in flight was completing).
                    if let (Some(d), Some(sent)) = (done, next.send_max_us) {
                        start = start.max(d.saturating_sub((sent * 1e3) as u64));
                    }
                    done.unwrap_or(next.t_ns)
                        .clamp(next.t_ns, next.t_ns + next.window_ns)
                }
                // The victim ended stalled (or its rows stop): the stall lasts to the end
                // of its last stalled window.
                _ => end,
            };
            let start = start.min(last_end.saturating_sub(ws[j].window_ns).max(due));
            out.push(VictimStall {
                victim: victim.clone(),
                start_ns: start,
                end_ns: end.max(start + 1),
            });
            i = j + 1;
        }
    }
    out
}

/// Sorted, disjoint union of spans.
pub fn union(spans: impl IntoIterator<Item = Span>) -> Vec<Span> {
    let mut v: Vec<Span> = spans.into_iter().filter(|(s, e)| e > s).collect();
    v.sort();
    let mut out: Vec<Span> = vec![];
    for (s, e) in v {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// The part of window `[a, b)` outside `own` (sorted, disjoint): where the series could
/// have completed something.
fn live_part(a: u64, b: u64, own: &[Span]) -> Vec<Span> {
    let mut out = vec![];
    let mut at = a;
    for &(s, e) in own {
        if e <= at {
            continue;
        }
        if s >= b {
            break;
        }
        if s > at {
            out.push((at, s.min(b)));
        }
        at = at.max(e);
        if at >= b {
            break;
        }
    }
    if at < b {
        out.push((at, b));
    }
    out
}

/// The share of `live` (completion uniform over it) in which an operation of latency
/// `l_ns` would have overlapped one of `spans` (sorted, disjoint): completed in
/// `(s, e + l)`.
fn overlap_share(live: &[Span], l_ns: u64, spans: &[Span]) -> f64 {
    let total: u64 = live.iter().map(|(a, b)| b - a).sum();
    if total == 0 || spans.is_empty() {
        return 0.0;
    }
    let (a, b) = (live[0].0, live[live.len() - 1].1);
    // The spans that can matter: ending (plus l) after a, starting before b. `spans` is
    // sorted by both ends (disjoint).
    let from = spans.partition_point(|&(_, e)| e.saturating_add(l_ns) <= a);
    let to = spans.partition_point(|&(s, _)| s < b);
    if from >= to {
        return 0.0;
    }
    // (s, e + l) of neighbouring spans may overlap once widened: union them.
    let widened = union(
        spans[from..to]
            .iter()
            .map(|&(s, e)| (s, e.saturating_add(l_ns))),
    );
    let mut hit = 0u64;
    for &(la, lb) in live {
        for &(s, e) in &widened {
            let (x, y) = (la.max(s), lb.min(e));
            if y > x {
                hit += y - x;
            }
        }
    }
    (hit as f64 / total as f64).min(1.0)
}

/// A histogram of the range the logs use that takes weighted counts.
fn weighted() -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("static bounds");
    h.auto(true);
    h
}

/// One series' operations split by their lives against `spans` (sorted, disjoint), the
/// series' own stalls `own` (sorted, disjoint) taken out of where they completed.
/// Returns the inside and outside histograms (weighted, [`WEIGHT`] per operation) and
/// how many windows had any weight inside.
pub fn split(
    windows: &[&Interval],
    spans: &[Span],
    own: &[Span],
) -> (Histogram<u64>, Histogram<u64>, usize) {
    let (mut inside, mut outside) = (weighted(), weighted());
    let mut touched = 0;
    for w in windows {
        let (a, b) = (w.start_ns, w.start_ns + w.duration_ns.max(1));
        let mut live = live_part(a, b, own);
        if live.is_empty() {
            live = vec![(a, b)];
        }
        let mut any = false;
        for (v, n) in w.hist.buckets() {
            let share = overlap_share(&live, v, spans);
            let total = n as f64 * WEIGHT;
            let win = (total * share).round() as u64;
            let wout = (total as u64).saturating_sub(win);
            if win > 0 {
                any = true;
                let _ = inside.record_n(v, win);
            }
            if wout > 0 {
                let _ = outside.record_n(v, wout);
            }
        }
        touched += any as usize;
    }
    (inside, outside, touched)
}

/// Groups of overlapping spans: each group's union span and its members' items, in time
/// order.
fn groups<T: Clone>(mut items: Vec<(Span, T)>) -> Vec<(Span, Vec<T>)> {
    items.sort_by_key(|(sp, _)| *sp);
    let mut out: Vec<(Span, Vec<T>)> = vec![];
    for (sp, t) in items {
        match out.last_mut() {
            Some((g, members)) if sp.0 < g.1 => {
                g.1 = g.1.max(sp.1);
                members.push(t);
            }
            _ => out.push((sp, vec![t])),
        }
    }
    out
}

/// Names, each once, in first-seen order, joined: `loop11 and loop12`, `a, b and c`.
fn and_list(names: &[String]) -> String {
    let mut v: Vec<&str> = vec![];
    for n in names {
        if !v.contains(&n.as_str()) {
            v.push(n);
        }
    }
    match v.len() {
        0 => String::new(),
        1 => v[0].to_string(),
        n => format!("{} and {}", v[..n - 1].join(", "), v[n - 1]),
    }
}

fn s_of(ns: u64) -> f64 {
    ns as f64 / 1e9
}

fn ms_of(sp: Span) -> f64 {
    sp.1.saturating_sub(sp.0) as f64 / 1e6
}

fn when(sp: Span) -> String {
    format!(
        "{:.2}-{:.2} s ({} ms)",
        s_of(sp.0),
        s_of(sp.1),
        format::units::sig(ms_of(sp))
    )
}

fn overlapping(a: Span, b: Span) -> bool {
    a.0 < b.1 && b.0 < a.1
}

/// What the run recorded besides the victims: one device stall or flush group, or a CPU
/// or fault span, in words; `background` when it covers more than half of the run (a CPU
/// busy throughout explains no one stall).
struct Context {
    span: Span,
    what: String,
    background: bool,
}

/// The run's harm episodes other than write bursts, in time order: victim stalls (with
/// what overlaps each: a device stall, a long flush, CPU saturation, a fault), device
/// stalls, long flushes and CPU saturation. `disks`: each device's harm; `cpu`: CPU
/// saturation spans; `faults`: the run's own faults (span, words); `run`: the span the
/// latency series cover; `traced`: with `--trace`, the long sync calls (span, words) and
/// the flush/PREFLUSH/FUA requests served for [`FLUSH_MIN_MS`] or more (span, device).
#[allow(
    clippy::too_many_lines,
    reason = "every kind of harm episode gathered in one place, in the order they are ranked"
)]
pub(crate) fn assemble(
    disks: &[(String, &DiskHarm)],
    stalls: &[VictimStall],
    cpu: &[Span],
    faults: &[(Span, String)],
    run: Span,
    traced: (&[Named], &[Named]),
) -> Vec<EpisodeSummary> {
    let (sync_calls, flush_requests) = traced;
    let mut out = vec![];
    let background = |sp: Span| {
        let (a, b) = (sp.0.max(run.0), sp.1.min(run.1));
        b.saturating_sub(a) * 2 > run.1.saturating_sub(run.0)
    };
    let dev_stalls = groups(
        disks
            .iter()
            .flat_map(|(n, h)| {
                h.stalls
                    .iter()
                    .map(move |s| ((s.start_ns, s.end_ns), (n.clone(), s.max_in_flight)))
            })
            .collect(),
    );
    let flushes = groups(
        disks
            .iter()
            .flat_map(|(n, h)| {
                h.flushes
                    .iter()
                    .map(move |f| ((f.start_ns, f.end_ns), n.clone()))
            })
            .chain(flush_requests.iter().cloned())
            .collect(),
    );
    let mut context: Vec<Context> = vec![];
    for (sp, members) in &dev_stalls {
        let names: Vec<String> = members.iter().map(|(n, _)| n.clone()).collect();
        let most = members.iter().map(|(_, m)| *m).max().unwrap_or(0);
        context.push(Context {
            span: *sp,
            what: format!(
                "{} had requests in flight (up to {most}) and completed none {}",
                and_list(&names),
                when(*sp)
            ),
            background: false,
        });
    }
    for (sp, names) in &flushes {
        context.push(Context {
            span: *sp,
            what: format!(
                "a {} ms flush on {} ending at {:.2} s",
                format::units::sig(ms_of(*sp)),
                and_list(names),
                s_of(sp.1)
            ),
            background: false,
        });
    }
    for (sp, what) in sync_calls {
        context.push(Context {
            span: *sp,
            what: what.clone(),
            background: false,
        });
    }
    for &sp in cpu {
        context.push(Context {
            span: sp,
            what: format!("CPU over {:.0}% busy {}", CPU_BUSY_PCT, when(sp)),
            background: background(sp),
        });
    }
    for (sp, what) in faults {
        context.push(Context {
            span: *sp,
            what: what.clone(),
            background: false,
        });
    }
    let victim_groups = groups(
        stalls
            .iter()
            .map(|v| ((v.start_ns, v.end_ns), v.victim.label()))
            .collect(),
    );
    for (sp, victims) in &victim_groups {
        let causes: Vec<&str> = context
            .iter()
            .filter(|c| !c.background && overlapping(c.span, *sp))
            .map(|c| c.what.as_str())
            .collect();
        let behind: Vec<&str> = context
            .iter()
            .filter(|c| c.background && overlapping(c.span, *sp))
            .map(|c| c.what.as_str())
            .collect();
        let devices: Vec<String> = dev_stalls
            .iter()
            .filter(|(d, _)| overlapping(*d, *sp))
            .flat_map(|(_, m)| m.iter().map(|(n, _)| n.clone()))
            .chain(
                flushes
                    .iter()
                    .filter(|(f, _)| overlapping(*f, *sp))
                    .flat_map(|(_, m)| m.iter().cloned()),
            )
            .collect();
        let cause = (!causes.is_empty()).then(|| causes.join("; "));
        let mut why = cause.as_ref().map(|c| format!("overlapping it: {c}")).unwrap_or_else(|| {
            format!(
                "no device had requests in flight without completing any for {DEVICE_STALL_MIN_MS:.0} ms \
                 or more, no flush took {FLUSH_MIN_MS:.0} ms or more, and no CPU saturation or fault \
                 the run saw overlaps it"
            )
        });
        if !behind.is_empty() {
            why.push_str(&format!(
                " (background, most of the run: {})",
                behind.join("; ")
            ));
        }
        out.push(EpisodeSummary {
            kind: STALL.into(),
            start_s: s_of(sp.0),
            end_s: s_of(sp.1),
            duration_ms: ms_of(*sp),
            devices: dedup(devices),
            victims: dedup(victims.clone()),
            line: format!(
                "stall {}: {} had operations outstanding and none completing; {why}",
                when(*sp),
                and_list(victims)
            ),
            cause,
        });
    }
    let hurt = |sp: Span| -> Vec<String> {
        dedup(
            stalls
                .iter()
                .filter(|v| overlapping((v.start_ns, v.end_ns), sp))
                .map(|v| v.victim.label())
                .collect(),
        )
    };
    for (sp, members) in &dev_stalls {
        let names: Vec<String> = members.iter().map(|(n, _)| n.clone()).collect();
        let most = members.iter().map(|(_, m)| *m).max().unwrap_or(0);
        let during: Vec<String> = flushes
            .iter()
            .filter(|(f, _)| overlapping(*f, *sp))
            .map(|(f, n)| {
                format!(
                    "a {} ms flush on {}",
                    format::units::sig(ms_of(*f)),
                    and_list(n)
                )
            })
            .collect();
        let mut line = format!(
            "device stall {}: {} had requests in flight (up to {most}) and completed none",
            when(*sp),
            and_list(&names)
        );
        if !during.is_empty() {
            line.push_str(&format!(", with {}", during.join(" and ")));
        }
        out.push(EpisodeSummary {
            kind: DEVICE_STALL.into(),
            start_s: s_of(sp.0),
            end_s: s_of(sp.1),
            duration_ms: ms_of(*sp),
            devices: dedup(names),
            victims: hurt(*sp),
            cause: None,
            line,
        });
    }
    for (sp, names) in &flushes {
        out.push(EpisodeSummary {
            kind: FLUSH.into(),
            start_s: s_of(sp.0),
            end_s: s_of(sp.1),
            duration_ms: ms_of(*sp),
            devices: dedup(names.clone()),
            victims: hurt(*sp),
            cause: None,
            line: format!("flush {} on {}", when(*sp), and_list(names)),
        });
    }
    for (sp, what) in sync_calls {
        out.push(EpisodeSummary {
            kind: SYNC_CALL.into(),
            start_s: s_of(sp.0),
            end_s: s_of(sp.1),
            duration_ms: ms_of(*sp),
            devices: vec![],
            victims: hurt(*sp),
            cause: None,
            line: format!("sync call {}", what),
        });
    }
    for &sp in cpu {
        out.push(EpisodeSummary {
            kind: CPU.into(),
            start_s: s_of(sp.0),
            end_s: s_of(sp.1),
            duration_ms: ms_of(sp),
            devices: vec![],
            victims: hurt(sp),
            cause: None,
            line: format!("CPU over {:.0}% busy {}", CPU_BUSY_PCT, when(sp)),
        });
    }
    out.sort_by(|a, b| a.start_s.total_cmp(&b.start_s));
    out
}

fn dedup(v: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = vec![];
    for x in v {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}

/// The episode kinds, as summary.json spells them.
pub(crate) const STALL: &str = "stall";
pub(crate) const DEVICE_STALL: &str = "device stall";
pub(crate) const FLUSH: &str = "flush";
pub const CPU: &str = "cpu";
pub(crate) const SYNC_CALL: &str = "sync call";

/// A kind in a sentence: "outside stalls", "outside long flushes".
pub(crate) fn kind_plural(kind: &str) -> &'static str {
    match kind {
        STALL => "stalls",
        DEVICE_STALL => "device stalls",
        FLUSH => "long flushes",
        SYNC_CALL => "long sync calls",
        _ => "CPU saturation",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use format::hist;

    const MS: u64 = 1_000_000;

    fn row(t_ms: u64, ops: u64, wait_ms: f64, co_max_ms: Option<f64>) -> LoadRow {
        LoadRow {
            t_ns: t_ms * MS,
            window_ns: 100 * MS,
            role: "js-pub".into(),
            ops,
            co_max_us: co_max_ms.map(|m| m * 1e3),
            oldest_wait_us: Some(wait_ms * 1e3),
            active_ns: 100 * MS,
            ..Default::default()
        }
    }

    #[test]
    fn a_victim_stall_runs_from_the_oldest_stuck_operation_to_its_completion() {
        // Acks every window; at 1.23 s the broker stops; windows 1.3 and 1.4 complete
        // nothing (the oldest waited 70 then 170 ms at their ends); at 1.5-1.6 the oldest
        // completes 300 ms after its intended start.
        let rows = vec![
            row(1100, 100, 0.5, Some(2.0)),
            row(1200, 30, 0.5, Some(2.0)),
            row(1300, 0, 170.0, None),
            row(1400, 0, 270.0, None),
            row(1500, 90, 0.4, Some(300.0)),
            row(1600, 100, 0.5, Some(2.0)),
        ];
        let load = BTreeMap::from([("js-pub".to_string(), rows)]);
        let s = victim_stalls(&load, None);
        assert_eq!(s.len(), 1, "{s:?}");
        assert_eq!(s[0].victim.label(), "js-pub");
        assert_eq!(s[0].start_ns, 1230 * MS);
        assert_eq!(s[0].end_ns, 1530 * MS);
        // Behind its schedule, the load sent that operation 20 ms after it was due: the
        // stall starts when it went in flight.
        let mut late = load.clone();
        late.get_mut("js-pub").unwrap()[4].lat_max_us = Some(280_000.0);
        let s = victim_stalls(&late, None);
        assert_eq!((s[0].start_ns, s[0].end_ns), (1250 * MS, 1530 * MS));
        // A quiet window (nothing outstanding) is no stall; nor is one whose oldest
        // waited less than the window.
        let quiet = vec![
            row(0, 10, 0.0, Some(1.0)),
            row(100, 0, 0.0, None),
            row(200, 0, 60.0, None),
            row(300, 10, 0.0, Some(61.0)),
        ];
        let load = BTreeMap::from([("js-pub".to_string(), quiet)]);
        assert!(victim_stalls(&load, None).is_empty());
        // A role that never completed anything is no victim.
        let never = vec![row(0, 0, 100.0, None), row(100, 0, 200.0, None)];
        let load = BTreeMap::from([("js-pub".to_string(), never)]);
        assert!(victim_stalls(&load, None).is_empty());
    }

    #[test]
    fn a_device_stall_is_in_flight_without_completions_for_50_ms() {
        let mut h = DiskHarm::default();
        // 1 ms rows: a completion each until 100 ms, then 8 in flight and nothing done
        // until 180 ms; then a 30 ms stall (too short), then flushes.
        for t in 1..300u64 {
            let stuck = (100..180).contains(&t) || (200..230).contains(&t);
            let flush = (t == 250).then_some(1.0);
            h.interval(
                ((t - 1) * MS, t * MS),
                (Some(8), Some(8)),
                !stuck,
                flush.or(Some(0.0)),
                flush.map(|_| 40.0).or(Some(0.0)),
            );
        }
        h.finish(Some(300 * MS));
        assert_eq!(
            h.stalls,
            vec![DeviceStall {
                start_ns: 99 * MS,
                end_ns: 180 * MS,
                max_in_flight: 8
            }]
        );
        assert_eq!(
            h.flushes,
            vec![LongFlush {
                start_ns: 210 * MS,
                end_ns: 250 * MS,
                count: 1
            }]
        );
        // Nothing in flight is idle, not stalled.
        let mut idle = DiskHarm::default();
        for t in 1..300u64 {
            idle.interval(
                ((t - 1) * MS, t * MS),
                (Some(0), Some(0)),
                false,
                None,
                None,
            );
        }
        idle.finish(Some(300 * MS));
        assert!(idle.stalls.is_empty());
    }

    fn window(k: u64, us: &[(u64, u64)]) -> Interval {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
        for &(v, n) in us {
            h.record_n(v * 1000, n).unwrap();
        }
        Interval {
            tag: "write".into(),
            start_ns: k * 100 * MS,
            duration_ns: 100 * MS,
            hist: hist::Sparse::of(&h),
        }
    }

    #[test]
    fn an_operation_that_waited_through_an_episode_and_completed_after_it_is_inside() {
        // A flush 4.68-5.14 s; window 5.1-5.2 s holds 10 operations that waited 500 ms
        // (lives from ~4.6 s) and 90 of 1 ms that began after the flush had ended.
        let flush = [(4680 * MS, 5140 * MS)];
        let w = window(51, &[(500_000, 10), (1_000, 90)]);
        let (i, o, touched) = split(&[&w], &flush, &[]);
        assert_eq!(touched, 1);
        // All 10 slow ones inside; a 1 ms one completed in (4.68, 5.141) of 5.1-5.2 s:
        // 41% of its window.
        let inside_ops = i.len() as f64 / WEIGHT;
        assert!(
            (inside_ops - (10.0 + 90.0 * 0.41)).abs() < 0.01,
            "{inside_ops}"
        );
        assert!((i.len() + o.len()) as f64 / WEIGHT - 100.0 < 1e-9);
        assert!(i.value_at_quantile(0.99) >= 499_000_000);
        assert!(o.max() < 2_000_000, "no slow one outside: {}", o.max());
        // A window far before the flush is all outside.
        let early = window(10, &[(500_000, 10)]);
        let (i, _, t) = split(&[&early], &flush, &[]);
        assert_eq!((i.len(), t), (0, 0));
    }

    #[test]
    fn an_operation_completes_only_in_the_live_part_of_its_window() {
        // The series itself stalled 2.05-2.45 s. Window 2.0-2.1 completed its 50 fast
        // ones before 2.05: none of them lived in the stall. Window 2.4-2.5 completed
        // after 2.45: its one 400 ms operation is inside, its 1 ms ones mostly not.
        let stall = [(2050 * MS, 2450 * MS)];
        let before = window(20, &[(100, 50)]);
        let after = window(24, &[(400_000, 1), (1_000, 49)]);
        let (i, o, _) = split(&[&before, &after], &stall, &stall);
        // 1 + 49 * (1 ms / 50 ms live) inside.
        let inside_ops = i.len() as f64 / WEIGHT;
        assert!(
            (inside_ops - (1.0 + 49.0 * 0.02)).abs() < 0.01,
            "{inside_ops}"
        );
        assert!(i.value_at_quantile(0.99) >= 399_000_000);
        assert!(((i.len() + o.len()) as f64 / WEIGHT - 100.0).abs() < 1e-9);
        // Without the live part, half of window 2.0-2.1's fast ones would be inside.
        let (i, _, _) = split(&[&before], &stall, &[]);
        assert!((i.len() as f64 / WEIGHT - 25.0).abs() < 0.1);
    }

    #[test]
    fn a_traced_sync_call_and_flush_request_overlapping_a_stall_are_named_with_it() {
        let stalls = vec![VictimStall {
            victim: Victim {
                source: "load",
                name: "js-pub".into(),
                phase: None,
            },
            start_ns: 4680 * MS,
            end_ns: 5140 * MS,
        }];
        let calls = vec![(
            (4640 * MS, 4700 * MS),
            "nats-server fdatasync on 00000007.blk at 4.64 s (60 ms)".to_string(),
        )];
        let flushes = vec![
            ((4680 * MS, 5140 * MS), "loop11".to_string()),
            ((4690 * MS, 5130 * MS), "loop12".to_string()),
        ];
        let e = assemble(&[], &stalls, &[], &[], (0, 10_000 * MS), (&calls, &flushes));
        let kinds: Vec<&str> = e.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(kinds, ["sync call", "stall", "flush"], "{e:#?}");
        let stall = &e[1];
        assert_eq!(
            stall.cause.as_deref(),
            Some(
                "a 460 ms flush on loop11 and loop12 ending at 5.14 s; \
                 nats-server fdatasync on 00000007.blk at 4.64 s (60 ms)"
            )
        );
        assert_eq!(stall.devices, ["loop11", "loop12"]);
        assert_eq!(e[0].victims, ["js-pub"]);
        // Nothing overlapping: the sentence that says what was looked at.
        let e = assemble(&[], &stalls, &[], &[], (0, 10_000 * MS), (&[], &[]));
        assert!(
            e[0].line.contains("no device had requests in flight"),
            "{}",
            e[0].line
        );
        assert_eq!(e[0].cause, None);
    }

    #[test]
    fn live_parts_and_unions() {
        assert_eq!(
            live_part(0, 100, &[(20, 40), (60, 200)]),
            [(0, 20), (40, 60)]
        );
        assert_eq!(live_part(0, 100, &[]), [(0, 100)]);
        assert!(live_part(0, 100, &[(0, 100)]).is_empty());
        assert_eq!(union([(5, 9), (0, 3), (2, 4), (9, 9)]), [(0, 4), (5, 9)]);
        assert!((overlap_share(&[(0, 100)], 10, &[(50, 60)]) - 0.2).abs() < 1e-12);
        assert_eq!(overlap_share(&[(0, 100)], 10, &[]), 0.0);
    }
}
