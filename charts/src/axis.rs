//! Our ticks as plotters axes: plotters maps values to pixels and draws the grid and
//! the labels; [`crate::ticks`] decides where the ticks go and how they read.
//!
//! plotters' own float axes pick 1-2-5 ticks inside the data's range and label them
//! with `{:?}`; we want the value axis widened to whole ticks (so the top line is
//! labelled), compact labels (`1.5k`) and a time axis in steps a person counts in
//! (15 s, 1 min, ...) labelled `m:ss`.

use std::ops::Range;

use plotters::coord::ranged1d::{KeyPointHint, NoDefaultFormatting, Ranged, ValueFormatter};
use plotters::coord::types::RangedCoordf64;

use crate::ticks::{format_compact, format_time_s, time_ticks, Ticks};

/// One axis: its range, its ticks and how their labels are written.
pub(crate) struct Axis {
    /// The pixel mapping: over the values, or over their log10 for a log axis.
    range: RangedCoordf64,
    ticks: Vec<f64>,
    step: f64,
    time: bool,
    /// A value axis maps values clamped into `[lo, hi]` (a capped axis clips its spikes
    /// at the top edge; a log axis draws 0 on its floor).
    bounds: Option<(f64, f64)>,
    log: bool,
}

impl Axis {
    /// The shared time axis over `[t0, t1]` with at most `max_ticks` ticks.
    pub fn time((t0, t1): (f64, f64), max_ticks: usize) -> Self {
        let (step, ticks) = time_ticks(t0, t1, max_ticks);
        Axis {
            range: (t0..t1).into(),
            ticks,
            step,
            time: true,
            bounds: None,
            log: false,
        }
    }

    /// A logarithmic value axis from [`crate::ticks::log_ticks`].
    pub fn log(t: &Ticks) -> Self {
        Axis {
            range: (t.lo.log10()..t.hi.log10()).into(),
            ticks: t.values.clone(),
            step: t.step,
            time: false,
            bounds: Some((t.lo, t.hi)),
            log: true,
        }
    }

    /// A value axis from its ticks; none gives an empty 0..1 axis (a panel with no
    /// data).
    pub fn value(ticks: Option<&Ticks>) -> Self {
        match ticks {
            Some(t) => Axis {
                range: (t.lo..t.hi).into(),
                ticks: t.values.clone(),
                step: t.step,
                time: false,
                bounds: Some((t.lo, t.hi)),
                log: false,
            },
            None => Axis {
                range: (0.0..1.0).into(),
                ticks: Vec::new(),
                step: 1.0,
                time: false,
                bounds: None,
                log: false,
            },
        }
    }

    /// The distance between neighbouring ticks.
    pub fn step(&self) -> f64 {
        self.step
    }
}

impl Ranged for Axis {
    type FormatOption = NoDefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let v = match self.bounds {
            Some((lo, hi)) if value.is_finite() => value.clamp(lo, hi),
            Some((lo, _)) if self.log && *value == f64::NEG_INFINITY => lo,
            _ => *value,
        };
        let v = if self.log { v.log10() } else { v };
        self.range.map(&v, limit)
    }

    /// Our ticks are plotters' bold key points (grid lines with labels); there are no
    /// light ones.
    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        match self.bounds {
            Some((lo, hi)) if self.log => lo..hi,
            _ => self.range.range(),
        }
    }
}

impl ValueFormatter<f64> for Axis {
    fn format_ext(&self, value: &f64) -> String {
        if self.time {
            format_time_s(*value, self.step)
        } else if self.log {
            // A decade labels itself: 0.01, 1, 100, 10k.
            format_compact(*value, *value)
        } else {
            format_compact(*value, self.step)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ticks::nice_ticks;
    use plotters::coord::ranged1d::BoldPoints;

    #[test]
    fn plotters_gets_our_ticks_and_labels() {
        let t = Axis::time((0.0, 600.0), 16);
        assert_eq!(t.key_points(BoldPoints(100)).len(), 11);
        assert_eq!(t.format_ext(&540.0), "9:00");
        let v = Axis::value(Some(&nice_ticks(0.0, 1024.0)));
        assert_eq!(v.key_points(BoldPoints(3)), [0.0, 500.0, 1000.0, 1500.0]);
        assert_eq!(v.format_ext(&1500.0), "1.5k");
        assert_eq!(v.range(), 0.0..1500.0);
        assert!(Axis::value(None).key_points(BoldPoints(5)).is_empty());
    }

    #[test]
    fn a_log_axis_maps_decades_evenly_and_zero_to_its_floor() {
        let t = crate::ticks::log_ticks(0.5, 2000.0);
        assert_eq!(t.values, [0.1, 1.0, 10.0, 100.0, 1000.0, 10000.0]);
        let a = Axis::log(&t);
        // 5 decades over 100 px: 20 px each, from the bottom row 199.
        assert_eq!(a.map(&0.1, (199, 99)), 199);
        assert_eq!(a.map(&10.0, (199, 99)), 159);
        assert_eq!(a.map(&0.0, (199, 99)), 199, "0 lies on the floor");
        assert_eq!(a.map(&1e9, (199, 99)), 99, "clipped at the top");
        assert_eq!(a.format_ext(&10000.0), "10k");
        assert_eq!(a.format_ext(&0.1), "0.1");
    }

    #[test]
    fn values_map_to_pixels_as_plotters_maps_them() {
        let v = Axis::value(Some(&nice_ticks(0.0, 1024.0)));
        // y grows downwards: plotters hands the bottom row as the first limit.
        assert_eq!(v.map(&0.0, (199, 100)), 199);
        assert_eq!(v.map(&1500.0, (199, 100)), 100);
        assert_eq!(v.map(&750.0, (199, 100)), 150);
    }
}
