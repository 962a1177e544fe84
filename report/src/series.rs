//! Latency series and the words for them, shared by interference and spikes: the windows
//! of one `load.hlog`/`probe.hlog` tag ([`Series`]), the spans they are split against
//! (a device's write bursts), and a latency as a person reads it ([`lat`]).

use std::collections::BTreeMap;

use format::hist::{self, Interval, Tag};
use format::summary::DeviceSummary;
use format::units::num;

/// One latency series: the windows of one tag of one file.
pub struct Series<'a> {
    /// `probe` or `load`.
    pub source: &'static str,
    pub tag: Tag,
    pub windows: Vec<&'a Interval>,
}

impl Series<'_> {
    /// The series in words: `probe write`, `phase 3 probe write`, `js-pub latency`,
    /// `js-pub latency from intended start`.
    pub fn label(&self) -> String {
        let mut s = match self.tag.phase {
            Some(p) => format!("phase {p} "),
            None => String::new(),
        };
        if self.source == "probe" {
            s.push_str(&format!("probe {}", self.tag.name));
        } else {
            s.push_str(&format!("{} latency", self.tag.name));
        }
        if self.tag.co {
            s.push_str(" from intended start");
        }
        s
    }

    /// What one operation of the series is called, plural.
    pub(crate) fn ops_noun(&self) -> &'static str {
        match (self.source, self.tag.name.as_str()) {
            ("probe", "read") => "reads",
            ("probe", "write") => "writes",
            ("probe", "sync") => "syncs",
            _ => "operations",
        }
    }

    pub(crate) fn window_ms(&self) -> f64 {
        self.windows
            .iter()
            .map(|w| w.duration_ns)
            .max()
            .unwrap_or(0) as f64
            / 1e6
    }
}

/// The series of the probe's and the load's intervals, grouped by tag: the probe's first,
/// each in tag order (phase, name, corrected last).
pub fn series<'a>(probe: &'a [Interval], load: &'a [Interval]) -> Vec<Series<'a>> {
    let mut out = vec![];
    for (source, iv) in [("probe", probe), ("load", load)] {
        let mut by_tag: BTreeMap<(Option<u32>, String, bool), Vec<&Interval>> = BTreeMap::new();
        for i in iv {
            let t = hist::parse_tag(&i.tag);
            by_tag.entry((t.phase, t.name, t.co)).or_default().push(i);
        }
        for ((phase, name, co), windows) in by_tag {
            out.push(Series {
                source,
                tag: Tag { phase, name, co },
                windows,
            });
        }
    }
    out
}

pub use super::analysis::Span;

/// Whether window `w` overlaps any of `spans` (the module's rule).
pub fn overlaps(w: &Interval, spans: &[Span]) -> bool {
    let (a, b) = (w.start_ns, w.start_ns + w.duration_ns.max(1));
    spans.iter().any(|&(s, e)| a < e && s < b)
}

/// A device's write bursts as spans.
pub(crate) fn burst_spans(d: &DeviceSummary) -> Vec<Span> {
    d.write
        .bursts
        .list
        .iter()
        .map(|b| {
            let s = (b.start_s * 1e9).round() as u64;
            (s, s + (b.duration_ms * 1e6).round() as u64)
        })
        .collect()
}

/// A figure for a sentence: one decimal below 10, none above (`1.2`, `38`, `1,250`).
pub(crate) fn short(x: f64) -> String {
    num(x, if x.abs() < 10.0 { 1 } else { 0 })
}

/// A latency in µs as a person reads it: `850 µs`, `1.2 ms`, `38 ms`, `2.3 s`.
pub fn lat(us: Option<f64>) -> String {
    match us {
        None => format::units::NONE.into(),
        Some(u) if u < 1e3 => format!("{} µs", short(u)),
        Some(u) if u < 1e6 => format!("{} ms", short(u / 1e3)),
        Some(u) => format!("{} s", short(u / 1e6)),
    }
}
