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
    range: RangedCoordf64,
    ticks: Vec<f64>,
    step: f64,
    time: bool,
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
            },
            None => Axis {
                range: (0.0..1.0).into(),
                ticks: Vec::new(),
                step: 1.0,
                time: false,
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
        self.range.map(value, limit)
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
        self.range.range()
    }
}

impl ValueFormatter<f64> for Axis {
    fn format_ext(&self, value: &f64) -> String {
        if self.time {
            format_time_s(*value, self.step)
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
    fn values_map_to_pixels_as_plotters_maps_them() {
        let v = Axis::value(Some(&nice_ticks(0.0, 1024.0)));
        // y grows downwards: plotters hands the bottom row as the first limit.
        assert_eq!(v.map(&0.0, (199, 100)), 199);
        assert_eq!(v.map(&1500.0, (199, 100)), 100);
        assert_eq!(v.map(&750.0, (199, 100)), 150);
    }
}
