//! Latency spikes, each explained or called unexplained (issue 23): per latency series
//! (the probe's directions, each load role; not the `co` twins) the windows whose p99
//! stands out, each with the episodes the run saw that overlap it, or the sentence that
//! nothing it saw does. Written into summary.json's `interference.spikes` and its lines.
//!
//! The rule:
//! - A window is a spike when its p99 is at least [`SPIKE_FACTOR`] times the series'
//!   median window p99 and at least [`SPIKE_MIN_US`]; windows next to each other are one
//!   spike (its p99 the highest of them); the [`MAX_SPIKES`] highest per series are listed.
//! - The episodes looked at: every device's write bursts (summary.json
//!   `devices[].write.bursts.list`), device stalls and long flushes (any device:
//!   [`super::episodes`]), the CPU over [`CPU_BUSY_PCT`]% busy (cpu.csv's
//!   folded `busy_pct`), and the faults the run made itself (events `node_stop`,
//!   `node_kill`, `restart`, `broker_died`, `device_gone`). An episode explains a spike
//!   when it overlaps the wait of the spike's slowest operations, from `end - p99` (less
//!   one window: where in its window it completed is not known) to the spike's end, and
//!   began by `end - p99 / 2`: it was there for at least half of that wait. A burst that
//!   began later (the broker writing its backlog after a SIGSTOP) is a consequence.
//! - Write bursts are those of the devices the run is about (the broker's, else those
//!   that hold a volume: [`super::interference::broker_devices`]); a backing disk's bursts
//!   (other writers' on a shared disk) explain nothing unless the run has no such device.
//! - An episode that covers more than half of the series' span (a CPU busy the whole
//!   run) is background, not an explanation of one window: the line names it after the
//!   verdict ("background: ...") and `explained_by` leaves it out.
//! - With none, the line says "no write burst, device stall, long flush, CPU saturation
//!   or fault the run saw overlaps it" ([`NOTHING`]): a latency spike the disk did not
//!   cause is not blamed on it. What is not looked at yet (writeback pressure, the
//!   trace's exact flush requests) is not claimed.
//!
//! Units: run clock ns inside; s and µs in the summary.

use format::events::{Body, Event};
use format::hist::Interval;
use format::summary::{DeviceSummary, EpisodeSummary, Spike};

use super::series::{burst_spans, lat, Series, Span};

/// A window's p99 over the series' median window p99 that makes it a spike.
const SPIKE_FACTOR: f64 = 5.0;
/// ... and at least this, µs (a 40 µs p99 five times a 8 µs median is no spike).
const SPIKE_MIN_US: f64 = 1000.0;
/// Spikes listed per series, highest first.
const MAX_SPIKES: usize = 3;
pub(crate) use super::episodes::CPU_BUSY_PCT;

/// The sentence of a spike nothing the run saw overlaps.
const NOTHING: &str =
    "no write burst, device stall, long flush, CPU saturation or fault the run saw overlaps it";

/// Whether an event is a fault the run made at a known moment.
fn is_fault(b: &Body) -> bool {
    matches!(
        b,
        Body::NodeStop(_)
            | Body::NodeKill(_)
            | Body::Restart(_)
            | Body::BrokerDied(_)
            | Body::DeviceGone(_)
    )
}

/// An episode: a span and what it was, in words.
pub struct Episode {
    pub span: Span,
    pub what: String,
}

/// The CPU's saturation spans: busy at or over [`CPU_BUSY_PCT`]%, from cpu.csv's folded
/// `busy_pct` points (each point's span from the point before).
pub(crate) fn cpu_spans(cpu_busy: Option<(Vec<u64>, Vec<f64>)>) -> Vec<Span> {
    let mut out = vec![];
    if let Some((t, v)) = cpu_busy {
        let mut start: Option<u64> = None;
        let mut prev_t = 0u64;
        for (&t, &v) in t.iter().zip(&v) {
            match (start, v >= CPU_BUSY_PCT) {
                (None, true) => start = Some(prev_t.min(t)),
                (Some(s), false) => {
                    out.push((s, t.max(s + 1)));
                    start = None;
                }
                _ => {}
            }
            prev_t = t;
        }
        if let Some(s) = start {
            out.push((s, prev_t.max(s + 1)));
        }
    }
    out
}

/// The faults the run made itself, each a 1 ns span and its words.
pub(crate) fn fault_spans(events: &[Event]) -> Vec<(Span, String)> {
    events
        .iter()
        .filter(|e| is_fault(&e.body))
        .map(|e| {
            (
                (e.t_ns, e.t_ns + 1),
                format!(
                    "{} at {:.2} s",
                    e.kind().replace('_', " "),
                    e.t_ns as f64 / 1e9
                ),
            )
        })
        .collect()
}

/// The episodes a spike can be explained by: the devices' write bursts, CPU saturation,
/// faults, and the device stalls and long flushes of `harm` (not the victims' own stalls:
/// those are the harm, not its cause).
pub fn episodes(
    devices: &[&DeviceSummary],
    cpu: &[Span],
    faults: &[(Span, String)],
    harm: &[EpisodeSummary],
) -> Vec<Episode> {
    let mut out = vec![];
    for d in devices {
        for (b, span) in d.write.bursts.list.iter().zip(burst_spans(d)) {
            out.push(Episode {
                span,
                what: format!(
                    "{}'s write burst at {:.2} s ({} ms, {} MiB/s)",
                    d.name,
                    b.start_s,
                    format::units::sig(b.duration_ms),
                    format::units::sig(b.peak_mib_s)
                ),
            });
        }
    }
    for &(s, e) in cpu {
        out.push(cpu_episode(s, e));
    }
    for (span, what) in faults {
        out.push(Episode {
            span: *span,
            what: what.clone(),
        });
    }
    for h in harm
        .iter()
        .filter(|h| h.kind == super::episodes::DEVICE_STALL || h.kind == super::episodes::FLUSH)
    {
        let ns = |s: f64| (s * 1e9).round() as u64;
        out.push(Episode {
            span: (ns(h.start_s), ns(h.end_s).max(ns(h.start_s) + 1)),
            what: h.line.clone(),
        });
    }
    out
}

/// A ratio in words: "100x", "5.3x".
fn times(r: f64) -> String {
    if r >= 10.0 {
        format!("{r:.0}")
    } else {
        format!("{r:.1}")
    }
}

fn cpu_episode(s: u64, e: u64) -> Episode {
    Episode {
        span: (s, e.max(s + 1)),
        what: format!(
            "CPU over {CPU_BUSY_PCT:.0}% busy from {:.2} to {:.2} s",
            s as f64 / 1e9,
            e as f64 / 1e9
        ),
    }
}

/// The `q` quantile of a window's values, µs (from its buckets, without decoding).
fn window_quantile_us(w: &Interval, q: f64) -> Option<f64> {
    let n = w.hist.len();
    if n == 0 {
        return None;
    }
    let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
    let mut seen = 0;
    for (v, c) in w.hist.buckets() {
        seen += c;
        if seen >= rank {
            return Some(v as f64 / 1e3);
        }
    }
    None
}

/// The spikes of one series against `episodes`.
pub fn spikes(s: &Series, episodes: &[Episode]) -> Vec<Spike> {
    let (Some(first), Some(last)) = (s.windows.first(), s.windows.last()) else {
        return vec![];
    };
    let span_ns = (last.start_ns + last.duration_ns)
        .saturating_sub(first.start_ns)
        .max(1);
    let background = |e: &Episode| {
        let a = e.span.0.max(first.start_ns);
        let b = e.span.1.min(last.start_ns + last.duration_ns);
        b.saturating_sub(a) * 2 > span_ns
    };
    let p99: Vec<(usize, f64)> = s
        .windows
        .iter()
        .enumerate()
        .filter_map(|(i, w)| window_quantile_us(w, 0.99).map(|p| (i, p)))
        .collect();
    if p99.len() < 3 {
        return vec![];
    }
    let mut sorted: Vec<f64> = p99.iter().map(|(_, p)| *p).collect();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    let bar = (median * SPIKE_FACTOR).max(SPIKE_MIN_US);
    // Runs of spike windows next to each other (by the series' own window grid).
    let mut groups: Vec<(usize, usize, f64)> = vec![];
    for &(i, p) in p99.iter().filter(|(_, p)| *p >= bar) {
        match groups.last_mut() {
            Some((_, last, worst)) if *last + 1 == i => {
                *last = i;
                *worst = worst.max(p);
            }
            _ => groups.push((i, i, p)),
        }
    }
    groups.sort_by(|a, b| b.2.total_cmp(&a.2));
    groups.truncate(MAX_SPIKES);
    groups
        .into_iter()
        .map(|(first, last, worst)| {
            let (a, b) = (s.windows[first], s.windows[last]);
            let start = a.start_ns;
            let end = b.start_ns + b.duration_ns.max(1);
            let worst_ns = (worst * 1e3) as u64;
            let wait_from = end.saturating_sub(worst_ns).min(start);
            let reach = wait_from.saturating_sub(a.duration_ns);
            let began_by = end.saturating_sub(worst_ns / 2);
            let (bg, explained_by): (Vec<&Episode>, Vec<&Episode>) = episodes
                .iter()
                .filter(|e| e.span.0 <= began_by && reach < e.span.1)
                .partition(|e| background(e));
            let explained_by: Vec<String> = explained_by.iter().map(|e| e.what.clone()).collect();
            let mut why = if explained_by.is_empty() {
                NOTHING.to_string()
            } else {
                explained_by.join("; ")
            };
            if !bg.is_empty() {
                let b: Vec<&str> = bg.iter().map(|e| e.what.as_str()).collect();
                why.push_str(&format!(" (background, most of the run: {})", b.join("; ")));
            }
            Spike {
                series: s.label(),
                start_s: start as f64 / 1e9,
                end_s: end as f64 / 1e9,
                p99_us: worst,
                median_window_p99_us: median,
                line: format!(
                    "{} p99 {} at {:.2}-{:.2} s ({}x its median window's {}): {why}",
                    s.label(),
                    lat(Some(worst)),
                    start as f64 / 1e9,
                    end as f64 / 1e9,
                    times(worst / median.max(1e-9)),
                    lat(Some(median)),
                ),
                explained_by,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use format::hist::{self, Tag};
    use hdrhistogram::Histogram;

    fn window(k: u64, us: u64) -> Interval {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
        h.record_n(us * 1000, 50).unwrap();
        Interval {
            tag: "js-pub".into(),
            start_ns: k * 100_000_000,
            duration_ns: 100_000_000,
            hist: hist::Sparse::of(&h),
        }
    }

    fn series(ws: &[Interval]) -> Series<'_> {
        Series {
            source: "load",
            tag: Tag {
                phase: None,
                name: "js-pub".into(),
                co: false,
            },
            windows: ws.iter().collect(),
        }
    }

    #[test]
    fn a_spike_nothing_overlaps_is_called_unexplained_and_one_a_burst_overlaps_names_it() {
        // 2 ms everywhere, 300 ms in windows 20-22 (2.0-2.3 s), 50 ms in window 40.
        let ws: Vec<Interval> = (0..50)
            .map(|k| {
                window(
                    k,
                    match k {
                        20..=22 => 300_000,
                        40 => 50_000,
                        _ => 2_000,
                    },
                )
            })
            .collect();
        let s = series(&ws);
        let burst = Episode {
            span: (4_020_000_000, 4_060_000_000),
            what: "loop12's write burst at 4.02 s (40 ms, 570 MiB/s)".into(),
        };
        let sp = spikes(&s, &[burst]);
        assert_eq!(sp.len(), 2, "{sp:?}");
        assert!((sp[0].start_s - 2.0).abs() < 1e-9 && (sp[0].end_s - 2.3).abs() < 1e-9);
        assert!(sp[0].explained_by.is_empty());
        assert!(
            sp[0]
                .line
                .ends_with(": no write burst, device stall, long flush, CPU saturation or fault the run saw overlaps it"),
            "{}",
            sp[0].line
        );
        assert_eq!(
            sp[1].explained_by,
            vec!["loop12's write burst at 4.02 s (40 ms, 570 MiB/s)"]
        );
        // A steady series has none.
        let flat: Vec<Interval> = (0..50).map(|k| window(k, 2_000)).collect();
        assert!(spikes(&series(&flat), &[]).is_empty());
        // A CPU busy for the whole run is background: named, not an explanation.
        let busy = Episode {
            span: (0, 5_000_000_000),
            what: "CPU over 90% busy from 0.00 to 5.00 s".into(),
        };
        let sp = spikes(&s, &[busy]);
        assert!(sp[0].explained_by.is_empty(), "{sp:?}");
        assert!(
            sp[0].line.ends_with("no write burst, device stall, long flush, CPU saturation or fault the run saw overlaps it (background, most of the run: CPU over 90% busy from 0.00 to 5.00 s)"),
            "{}",
            sp[0].line
        );
    }

    #[test]
    fn an_episode_just_before_the_spike_explains_it() {
        let ws: Vec<Interval> = (0..20)
            .map(|k| window(k, if k == 10 { 400_000 } else { 1_000 }))
            .collect();
        // Window 10 (1.0-1.1 s) has a 400 ms p99: its slowest waited from ~0.7 s. A
        // freeze that ended before window 10 began was waited through.
        let e = |a: u64, b: u64| Episode {
            span: (a * 1_000_000, b * 1_000_000),
            what: "freeze".into(),
        };
        assert_eq!(
            spikes(&series(&ws), &[e(700, 750)])[0].explained_by,
            vec!["freeze"]
        );
        // One over before the wait began (less a window) was not.
        assert!(spikes(&series(&ws), &[e(300, 350)])[0]
            .explained_by
            .is_empty());
        // One that began after half the wait (at 0.95 s of 0.7-1.1 s) is a consequence.
        assert!(spikes(&series(&ws), &[e(950, 960)])[0]
            .explained_by
            .is_empty());
    }
}
