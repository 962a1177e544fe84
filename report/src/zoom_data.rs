//! The zoomable timeline's device data for a time span, at the best level for it: the
//! raw 1 ms windows (MiB/s written and read in each `[k ms, (k+1) ms)`, every interval
//! between two consecutive diskstats rows spread over the windows it overlaps, as
//! [`super::analysis::window_sums`] does) or an envelope level of `envelopes.csv.gz`
//! (10 ms .. 10 s: mean, min and max MiB/s per window, as the recorder wrote them).
//! report.html embeds spans of it (`html::zoom`); `diskpulse view` serves any span the
//! page asks for (`crate::view`).
//!
//! Memory is bounded by the span's windows, never by the recording: raw rows stream
//! through [`RawWindows::add`] one at a time (from `format::diskstats::for_each_row` or a
//! report's rows in memory), envelope rows through `format::envelopes::for_each`.
//! Times in the page's JSON are seconds since the run's zero; values MiB/s.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;

use collectors::diskstats::{self as ds, counter_delta};

use format::csv::Flow;
use format::envelopes::{self as env, LEVELS_NS};

/// The raw level: 1 ms windows.
pub(crate) const RAW_NS: u64 = 1_000_000;

const MIB: f64 = 1024.0 * 1024.0;
const SECTOR_BYTES: f64 = 512.0;

/// Where a span's values come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// diskstats rows, windows of `level_ns` (mean MiB/s per window).
    Raw,
    /// envelopes.csv.gz rows of `level_ns` (mean, min, max per window).
    Envelopes,
}

/// One device's series in a span.
#[derive(Debug, Clone, Default)]
pub struct DevSpan {
    pub name: String,
    /// Window starts (ns). Raw: every window of the span; envelopes: the windows that
    /// hold a row (an idle stretch is one interval whose end lies in a later window).
    pub t_ns: Vec<u64>,
    pub write: Vec<f64>,
    pub read: Vec<f64>,
    /// Envelopes only (empty for raw; NaN where the window has no value of that measure).
    pub(crate) write_min: Vec<f64>,
    pub(crate) write_max: Vec<f64>,
    pub(crate) read_min: Vec<f64>,
    pub(crate) read_max: Vec<f64>,
}

impl DevSpan {
    fn moved(v: &[f64]) -> bool {
        v.iter().any(|&x| x.is_finite() && x != 0.0)
    }
    /// Whether the device wrote or read anything in the span.
    pub fn busy(&self) -> bool {
        Self::moved(&self.write) || Self::moved(&self.read) || Self::moved(&self.write_max)
    }
    /// How many values it puts in the page.
    pub fn values(&self) -> usize {
        self.write.len()
            + self.read.len()
            + self.write_min.len()
            + self.write_max.len()
            + self.read_min.len()
            + self.read_max.len()
    }
}

/// A time span's device data at one level.
#[derive(Debug, Clone)]
pub struct Span {
    pub t0_ns: u64,
    pub t1_ns: u64,
    pub(crate) level_ns: u64,
    pub source: Source,
    pub devices: Vec<DevSpan>,
}

impl Span {
    pub fn values(&self) -> usize {
        self.devices.iter().map(DevSpan::values).sum()
    }
}

/// The level for `[t0, t1)` drawn `px` points wide: raw 1 ms when the span holds at most
/// `px` ms, else the finest envelope level holding at most `px` windows (the coarsest if
/// none does).
fn level_for(t0_ns: u64, t1_ns: u64, px: u64) -> u64 {
    let len = t1_ns.saturating_sub(t0_ns).max(1);
    std::iter::once(RAW_NS)
        .chain(LEVELS_NS)
        .find(|&l| len.div_ceil(l) <= px.max(1))
        .unwrap_or(LEVELS_NS[LEVELS_NS.len() - 1])
}

/// Per-window MiB/s of several spans at once from raw rows handed over one at a time
/// (each device's rows in time order; devices may interleave). Windows lie on the grid of
/// `width_ns` from the run's zero; the last one is cut by `duration_ns`.
pub(crate) struct RawWindows {
    spans: Vec<(u64, u64)>,
    width_ns: u64,
    duration_ns: u64,
    index: HashMap<String, usize>,
    devs: Vec<RawDev>,
}

struct RawDev {
    name: String,
    /// (t_ns, sectors read, sectors written) of the previous row.
    last: Option<(u64, Option<u64>, Option<u64>)>,
    /// Per span: bytes written and read per window.
    w: Vec<Vec<f64>>,
    r: Vec<Vec<f64>>,
}

impl RawWindows {
    /// `spans`: `[t0, t1)` each (widened to whole windows, cut at `duration_ns`).
    pub fn new(spans: &[(u64, u64)], width_ns: u64, duration_ns: u64) -> RawWindows {
        let width_ns = width_ns.max(1);
        let spans = spans
            .iter()
            .map(|&(a, b)| {
                let a = a - a % width_ns;
                let b = b.min(duration_ns).max(a);
                (a, a + (b - a).div_ceil(width_ns) * width_ns)
            })
            .collect();
        RawWindows {
            spans,
            width_ns,
            duration_ns,
            index: HashMap::new(),
            devs: vec![],
        }
    }

    /// The latest span end (a streaming reader may stop a little after it).
    pub fn end_ns(&self) -> u64 {
        self.spans.iter().map(|s| s.1).max().unwrap_or(0)
    }

    /// One diskstats row of `device`.
    pub fn add(
        &mut self,
        device: &str,
        t_ns: u64,
        sectors_read: Option<u64>,
        sectors_written: Option<u64>,
    ) {
        let i = match self.index.get(device) {
            Some(&i) => i,
            None => {
                let n = |&(a, b): &(u64, u64)| ((b - a) / self.width_ns) as usize;
                self.devs.push(RawDev {
                    name: device.to_string(),
                    last: None,
                    w: self.spans.iter().map(|s| vec![0.0; n(s)]).collect(),
                    r: self.spans.iter().map(|s| vec![0.0; n(s)]).collect(),
                });
                self.index.insert(device.to_string(), self.devs.len() - 1);
                self.devs.len() - 1
            }
        };
        let d = &mut self.devs[i];
        let Some((t0, r0, w0)) = d.last.replace((t_ns, sectors_read, sectors_written)) else {
            return;
        };
        if t_ns <= t0 {
            return;
        }
        let change = |field, a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(a), Some(b)) => counter_delta(field, a, b)
                .map(|x| x as f64 * SECTOR_BYTES)
                .filter(|&x| x > 0.0),
            _ => None,
        };
        let dw = change(ds::F_SECTORS_WRITTEN, w0, sectors_written);
        let dr = change(ds::F_SECTORS_READ, r0, sectors_read);
        if dw.is_none() && dr.is_none() {
            return;
        }
        for (s, &(a, b)) in self.spans.iter().enumerate() {
            if t_ns <= a || t0 >= b {
                continue;
            }
            let span = (t_ns - t0) as f64;
            let mut k = ((t0.max(a) - a) / self.width_ns) as usize;
            loop {
                let w_start = a + k as u64 * self.width_ns;
                if w_start >= t_ns || w_start >= b {
                    break;
                }
                let o = (t_ns.min(w_start + self.width_ns) - t0.max(w_start)) as f64 / span;
                if let Some(v) = dw {
                    d.w[s][k] += v * o;
                }
                if let Some(v) = dr {
                    d.r[s][k] += v * o;
                }
                k += 1;
            }
        }
    }

    /// The spans, devices in order of first appearance; the rates MiB/s.
    pub fn finish(self) -> Vec<Span> {
        let RawWindows {
            spans,
            width_ns,
            duration_ns,
            devs,
            ..
        } = self;
        let rate = |k: usize, a: u64, bytes: f64| {
            let w0 = a + k as u64 * width_ns;
            let len = (w0 + width_ns).min(duration_ns).saturating_sub(w0).max(1);
            bytes / (len as f64 / 1e9) / MIB
        };
        spans
            .iter()
            .enumerate()
            .map(|(s, &(a, b))| Span {
                t0_ns: a,
                t1_ns: b,
                level_ns: width_ns,
                source: Source::Raw,
                devices: devs
                    .iter()
                    .map(|d| DevSpan {
                        name: d.name.clone(),
                        t_ns: (0..d.w[s].len()).map(|k| a + k as u64 * width_ns).collect(),
                        write: d.w[s]
                            .iter()
                            .enumerate()
                            .map(|(k, &x)| rate(k, a, x))
                            .collect(),
                        read: d.r[s]
                            .iter()
                            .enumerate()
                            .map(|(k, &x)| rate(k, a, x))
                            .collect(),
                        ..Default::default()
                    })
                    .collect(),
            })
            .collect()
    }
}

/// Raw windows of `width_ns` for `spans`, streamed from the run's diskstats.csv.gz (rows
/// from 2 s before the first span to 2 s past the last: every device has a row at least
/// once a second).
fn raw_spans(
    run_dir: &Path,
    spans: &[(u64, u64)],
    width_ns: u64,
    duration_ns: u64,
) -> anyhow::Result<Vec<Span>> {
    let mut rw = RawWindows::new(spans, width_ns, duration_ns);
    let stop = rw.end_ns().saturating_add(2_000_000_000);
    // Each device's row before the first span: within a second of it.
    let from = spans
        .iter()
        .map(|s| s.0)
        .min()
        .unwrap_or(0)
        .saturating_sub(2_000_000_000);
    format::diskstats::for_each_run_row_from(run_dir, from, |r| {
        if r.t_ns > stop {
            return Flow::Stop;
        }
        rw.add(
            r.device,
            r.t_ns,
            r.f.get(ds::F_SECTORS_READ),
            r.f.get(ds::F_SECTORS_WRITTEN),
        );
        Flow::Go
    })?;
    Ok(rw.finish())
}

/// Level `level_ns` of envelopes.csv.gz over `[t0, t1)` (windows overlapping it).
pub(crate) fn envelope_span(
    path: &Path,
    level_ns: u64,
    t0_ns: u64,
    t1_ns: u64,
) -> anyhow::Result<Span> {
    let (mr, mw) = (
        env::MEASURES
            .iter()
            .position(|m| *m == "read_mib_s")
            .unwrap_or(0),
        env::MEASURES
            .iter()
            .position(|m| *m == "write_mib_s")
            .unwrap_or(1),
    );
    let q = env::Query {
        window_ns: level_ns,
        t0_ns,
        t1_ns,
        device: None,
        measures: (1 << mr) | (1 << mw),
    };
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut devs: Vec<DevSpan> = vec![];
    env::for_each(path, &q, |r| {
        let i = match index.get(r.device) {
            Some(&i) => i,
            None => {
                devs.push(DevSpan {
                    name: r.device.to_string(),
                    ..Default::default()
                });
                index.insert(r.device.to_string(), devs.len() - 1);
                devs.len() - 1
            }
        };
        let d = &mut devs[i];
        // A window's rows come together; a later window starts a new entry.
        if d.t_ns.last() != Some(&r.t_ns) {
            d.t_ns.push(r.t_ns);
            for v in [
                &mut d.write,
                &mut d.write_min,
                &mut d.write_max,
                &mut d.read,
                &mut d.read_min,
                &mut d.read_max,
            ] {
                v.push(f64::NAN);
            }
        }
        let k = d.t_ns.len() - 1;
        let (mean, min, max) = if r.measure == mw {
            (&mut d.write, &mut d.write_min, &mut d.write_max)
        } else {
            (&mut d.read, &mut d.read_min, &mut d.read_max)
        };
        mean[k] = r.mean;
        min[k] = r.min;
        max[k] = r.max;
    })?;
    Ok(Span {
        t0_ns,
        t1_ns,
        level_ns,
        source: Source::Envelopes,
        devices: devs,
    })
}

/// The span `[t0, t1)` of the run in `run_dir` drawn `px` points wide, at
/// [`level_for`]'s level: envelopes when the run has them and the level is not raw,
/// otherwise raw rows in windows of that level (an older run without envelopes).
pub fn span(
    run_dir: &Path,
    duration_ns: u64,
    t0_ns: u64,
    t1_ns: u64,
    px: u64,
) -> anyhow::Result<Span> {
    let level = level_for(t0_ns, t1_ns, px);
    let envelopes = run_dir.join(env::FILE);
    if level != RAW_NS && envelopes.is_file() {
        return envelope_span(&envelopes, level, t0_ns, t1_ns);
    }
    let mut v = raw_spans(run_dir, &[(t0_ns, t1_ns)], level, duration_ns)?;
    Ok(v.pop().unwrap_or(Span {
        t0_ns,
        t1_ns,
        level_ns: level,
        source: Source::Raw,
        devices: vec![],
    }))
}

/// A number as JSON (`null` for NaN/infinite), at most 6 decimals.
pub fn num(s: &mut String, v: f64) {
    if !v.is_finite() {
        s.push_str("null");
    } else if v == 0.0 {
        s.push('0');
    } else {
        let t = format!("{v:.6}");
        let t = t.trim_end_matches('0').trim_end_matches('.');
        s.push_str(t);
    }
}

pub fn nums(s: &mut String, v: impl IntoIterator<Item = f64>) {
    s.push('[');
    for (i, x) in v.into_iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        num(s, x);
    }
    s.push(']');
}

/// A JSON string safe inside `<script>` (no `<`, so no `</script>`).
pub fn text(s: &mut String, t: &str) {
    let j = serde_json::to_string(t).unwrap_or_else(|_| "\"\"".into());
    s.push_str(&j.replace('<', "\\u003c").replace('>', "\\u003e"));
}

/// The span as the page reads it: `{"t0_s","t1_s","level_ms","source","devices":[{"name",
/// "t0_s" and "step_s" (raw: every window) or "t" (envelopes: window starts, s), "write",
/// "read" (null when the span holds none), and for envelopes "write_min", "write_max",
/// "read_min", "read_max"}]}`. Devices that moved nothing in the span are left out
/// unless `keep_idle`.
pub fn span_json(s: &mut String, sp: &Span, keep_idle: bool) {
    s.push_str("{\"t0_s\":");
    num(s, sp.t0_ns as f64 / 1e9);
    s.push_str(",\"t1_s\":");
    num(s, sp.t1_ns as f64 / 1e9);
    s.push_str(",\"level_ms\":");
    num(s, sp.level_ns as f64 / 1e6);
    let _ = write!(
        s,
        ",\"source\":\"{}\",\"devices\":[",
        match sp.source {
            Source::Raw => "raw",
            Source::Envelopes => "envelopes",
        }
    );
    let mut first = true;
    for d in sp.devices.iter().filter(|d| keep_idle || d.busy()) {
        if !first {
            s.push(',');
        }
        first = false;
        s.push_str("{\"name\":");
        text(s, &d.name);
        match sp.source {
            Source::Raw => {
                s.push_str(",\"t0_s\":");
                num(s, d.t_ns.first().copied().unwrap_or(sp.t0_ns) as f64 / 1e9);
                s.push_str(",\"step_s\":");
                num(s, sp.level_ns as f64 / 1e9);
            }
            Source::Envelopes => {
                s.push_str(",\"t\":");
                nums(s, d.t_ns.iter().map(|&t| t as f64 / 1e9));
            }
        }
        s.push_str(",\"write\":");
        nums(s, d.write.iter().copied());
        let reads = DevSpan::moved(&d.read) || DevSpan::moved(&d.read_max);
        s.push_str(",\"read\":");
        if reads {
            nums(s, d.read.iter().copied());
        } else {
            s.push_str("null");
        }
        if sp.source == Source::Envelopes {
            for (k, v) in [
                ("write_min", &d.write_min),
                ("write_max", &d.write_max),
                ("read_min", &d.read_min),
                ("read_max", &d.read_max),
            ] {
                let _ = write!(s, ",\"{k}\":");
                if k.starts_with("read") && !reads {
                    s.push_str("null");
                } else {
                    nums(s, v.iter().copied());
                }
            }
        }
        s.push('}');
    }
    s.push_str("]}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_level_is_the_finest_that_fits_the_width() {
        // 50 ms on 1000 px: raw.
        assert_eq!(level_for(0, 50_000_000, 1000), RAW_NS);
        // 1 s on 1000 px: raw (1000 windows); 1.5 s: 10 ms.
        assert_eq!(level_for(0, 1_000_000_000, 1000), RAW_NS);
        assert_eq!(level_for(0, 1_500_000_000, 1000), 10_000_000);
        // 6 h on 1000 px: 10 s is too fine too (2160): the coarsest.
        assert_eq!(level_for(0, 21_600_000_000_000, 1000), 10_000_000_000);
    }

    #[test]
    fn raw_windows_spread_intervals_by_overlap_and_keep_spans_apart() {
        let mut rw = RawWindows::new(
            &[(0, 3_000_000), (10_000_000, 12_000_000)],
            RAW_NS,
            20_000_000,
        );
        // 2048 sectors (1 MiB) written over 0.5 ms .. 2.5 ms: a quarter, a half, a quarter.
        rw.add("a", 500_000, Some(0), Some(0));
        rw.add("a", 2_500_000, Some(0), Some(2048));
        // An idle second device, then one interval in the second span.
        rw.add("b", 0, Some(0), Some(0));
        rw.add("b", 11_000_000, Some(2048), Some(0));
        rw.add("b", 12_000_000, Some(4096), Some(0));
        let s = rw.finish();
        assert_eq!(s.len(), 2);
        let a = &s[0].devices[0];
        assert_eq!(a.name, "a");
        assert_eq!(a.t_ns, vec![0, 1_000_000, 2_000_000]);
        assert_eq!(a.write, vec![250.0, 500.0, 250.0]);
        let b = &s[1].devices[1];
        // 11 ms spread over 0..11 ms: 1/11 of it in 10..11 ms; 11..12 ms: all of the next.
        assert!((b.read[0] - 1000.0 / 11.0).abs() < 1e-9, "{:?}", b.read);
        assert_eq!(b.read[1], 1000.0);
        assert!(!s[1].devices[0].busy());
    }

    #[test]
    fn span_json_reads_back() {
        let sp = Span {
            t0_ns: 0,
            t1_ns: 20_000_000,
            level_ns: 10_000_000,
            source: Source::Envelopes,
            devices: vec![DevSpan {
                name: "</script>".into(),
                t_ns: vec![0, 10_000_000],
                write: vec![1.5, 2.0],
                read: vec![0.0, 0.0],
                write_min: vec![1.0, f64::NAN],
                write_max: vec![2.0, 3.0],
                read_min: vec![0.0, 0.0],
                read_max: vec![0.0, 0.0],
            }],
        };
        let mut s = String::new();
        span_json(&mut s, &sp, false);
        assert!(!s.contains('<'));
        let v: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v["source"], "envelopes");
        assert_eq!(v["level_ms"], 10);
        assert_eq!(v["devices"][0]["name"], "</script>");
        assert_eq!(v["devices"][0]["t"][1], 0.01);
        assert_eq!(v["devices"][0]["write_min"][1], serde_json::Value::Null);
        assert_eq!(v["devices"][0]["read"], serde_json::Value::Null);
    }
}
