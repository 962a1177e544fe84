//! What one series becomes before plotters draws it: first in data space (pixel
//! columns of min/max/mean, or runs of points), then in pixels (band polygons and
//! line paths).
//!
//! A series with more than two points per column in range is downsampled by
//! [`envelope`]: its min..max band becomes one filled polygon per run of columns
//! (exactly the union of the 1-px bars, so every column reaches its exact peak) and
//! its means one line. A shorter series is drawn through its points. Pixels are
//! plotters' integer backend coordinates; points that add nothing (a repeat, or the
//! middle of three on one horizontal or vertical line) are dropped.

use crate::envelope::{envelope, Column};
use crate::{Series, Style};

/// More points than this many per column in range means downsampling.
pub(crate) const RAW_POINTS_PER_COLUMN: usize = 2;

/// Whether `series` has more points in `range` than are drawn one by one in `columns`
/// columns: then it is drawn from its [`envelope`].
pub(crate) fn is_dense(series: &Series, (t0, t1): (f64, f64), columns: usize) -> bool {
    let n = series.t_s.len().min(series.v.len());
    let in_range = series.t_s[..n]
        .iter()
        .filter(|ts| **ts >= t0 && **ts <= t1)
        .count();
    in_range > columns * RAW_POINTS_PER_COLUMN
}

/// A pixel of plotters' backend: `(x, y)`, y growing downwards.
pub(crate) type Px = (i32, i32);

/// What one series contributes to a panel once mapped to columns or points.
pub(crate) enum Shape {
    /// Downsampled: one entry per pixel column.
    Columns(Vec<Column>),
    /// Drawn point by point: runs of `(t_s, v)` separated by gaps.
    Runs(Vec<Vec<(f64, f64)>>),
}

impl Shape {
    pub fn of(series: &Series, (t0, t1): (f64, f64), columns: usize) -> Shape {
        if let Some(f) = &series.folded {
            return if f.range == (t0, t1) && f.columns == columns {
                Shape::Columns(f.cols.clone())
            } else {
                Shape::Runs(vec![])
            };
        }
        let n = series.t_s.len().min(series.v.len());
        let (t, v) = (&series.t_s[..n], &series.v[..n]);
        let in_range = t.iter().filter(|ts| **ts >= t0 && **ts <= t1).count();
        if in_range > columns * RAW_POINTS_PER_COLUMN {
            Shape::Columns(envelope(t, v, t0, t1, columns))
        } else {
            Shape::Runs(runs_of(t, v, t0, t1, series.style == Style::Step))
        }
    }

    /// The smallest and largest value drawn, if any.
    pub(crate) fn value_range(&self) -> Option<(f64, f64)> {
        let mut lo = f64::INFINITY;
        let mut hi = f64::NEG_INFINITY;
        match self {
            Shape::Columns(cols) => {
                for c in cols.iter().filter(|c| c.n > 0) {
                    lo = lo.min(c.min);
                    hi = hi.max(c.max);
                }
            }
            Shape::Runs(runs) => {
                for &(_, v) in runs.iter().flatten() {
                    lo = lo.min(v);
                    hi = hi.max(v);
                }
            }
        }
        (lo <= hi).then_some((lo, hi))
    }

    /// The min..max band as polygons, one per run of columns taller than nothing
    /// (a flat column is covered by the line). Column `c` is the pixel column
    /// `left + c`; `y_of` maps a value to its pixel row. Points drawn one by one
    /// have no band.
    pub fn band(&self, left: i32, y_of: impl Fn(f64) -> i32) -> Vec<Vec<Px>> {
        let Shape::Columns(cols) = self else {
            return Vec::new();
        };
        let mut polygons = Vec::new();
        // Top edge left to right, bottom edge collected right to left.
        let (mut top, mut bottom): (Vec<Px>, Vec<Px>) = (Vec::new(), Vec::new());
        let mut close = |top: &mut Vec<Px>, bottom: &mut Vec<Px>| {
            if !top.is_empty() {
                let mut poly = std::mem::take(top);
                for p in bottom.drain(..).rev() {
                    push_px(&mut poly, p);
                }
                polygons.push(poly);
            }
        };
        for (c, col) in cols.iter().enumerate() {
            let (y_max, y_min) = if col.n == 0 {
                (0, 0)
            } else {
                (y_of(col.max), y_of(col.min))
            };
            if y_min <= y_max {
                close(&mut top, &mut bottom);
                continue;
            }
            let x = left + c as i32;
            push_px(&mut top, (x, y_max));
            push_px(&mut top, (x + 1, y_max));
            push_px(&mut bottom, (x, y_min));
            push_px(&mut bottom, (x + 1, y_min));
        }
        close(&mut top, &mut bottom);
        polygons
    }

    /// The line through the column means or the points, as paths broken at gaps. A
    /// lone point becomes a 1-px dash so it stays visible.
    pub fn line(
        &self,
        left: i32,
        step: bool,
        x_of: impl Fn(f64) -> i32,
        y_of: impl Fn(f64) -> i32,
    ) -> Vec<Vec<Px>> {
        let runs: Vec<Vec<Px>> = match self {
            Shape::Columns(cols) => cols
                .split(|c| c.n == 0)
                .scan(0usize, |start, run| {
                    // `split` drops the separators: recover each run's first column.
                    let first = *start;
                    *start += run.len() + 1;
                    Some((first, run))
                })
                .map(|(first, run)| {
                    run.iter()
                        .enumerate()
                        .map(|(k, col)| (left + (first + k) as i32, y_of(col.mean)))
                        .collect()
                })
                .collect(),
            Shape::Runs(runs) => runs
                .iter()
                .map(|r| r.iter().map(|&(ts, v)| (x_of(ts), y_of(v))).collect())
                .collect(),
        };
        runs.into_iter()
            .filter(|r: &Vec<Px>| !r.is_empty())
            .map(|r| path_of(&r, step))
            .collect()
    }
}

impl Shape {
    /// [`Style::Stems`]: one vertical mark per point (per column when downsampled, to the
    /// column's max) from `floor` (a pixel row) up to the value, at least 2 px tall.
    pub(crate) fn stems(
        &self,
        left: i32,
        floor: i32,
        x_of: impl Fn(f64) -> i32,
        y_of: impl Fn(f64) -> i32,
    ) -> Vec<[Px; 2]> {
        let stem = |x: i32, v: f64| [(x, floor), (x, y_of(v).min(floor - 2))];
        match self {
            Shape::Columns(cols) => cols
                .iter()
                .enumerate()
                .filter(|(_, c)| c.n > 0 && c.max.is_finite())
                .map(|(c, col)| stem(left + c as i32, col.max))
                .collect(),
            Shape::Runs(runs) => runs
                .iter()
                .flatten()
                .filter(|(_, v)| v.is_finite())
                .map(|&(t, v)| stem(x_of(t), v))
                .collect(),
        }
    }
}

/// One path through `pts`, as steps (each value holds until the next point) or
/// straight segments; a lone point becomes a 1-px dash.
fn path_of(pts: &[Px], step: bool) -> Vec<Px> {
    let mut path = Vec::with_capacity(pts.len() * if step { 2 } else { 1 });
    for (k, &(x, y)) in pts.iter().enumerate() {
        if step && k > 0 {
            let (_, y_prev) = pts[k - 1];
            push_px(&mut path, (x, y_prev));
        }
        push_px(&mut path, (x, y));
    }
    if path.len() == 1 {
        let (x, y) = path[0];
        path.push((x + 1, y));
    }
    path
}

/// Appends a point unless it repeats the last one; when the last two and the new one
/// lie on one horizontal or vertical line, the new one replaces the middle.
fn push_px(path: &mut Vec<Px>, p: Px) {
    match path.as_slice() {
        [.., last] if *last == p => {}
        [.., a, b]
            if (a.0 == b.0 && b.0 == p.0 && (b.1 - a.1).signum() == (p.1 - b.1).signum())
                || (a.1 == b.1 && b.1 == p.1 && (b.0 - a.0).signum() == (p.0 - b.0).signum()) =>
        {
            *path.last_mut().expect("two points") = p;
        }
        _ => path.push(p),
    }
}

/// Splits points into runs broken by NaN values, clipped to `[t0, t1]`: a segment
/// that crosses an edge is cut at the edge (interpolated, or held for steps).
fn runs_of(t: &[f64], v: &[f64], t0: f64, t1: f64, step: bool) -> Vec<Vec<(f64, f64)>> {
    let mut runs = Vec::new();
    let mut run: Vec<(f64, f64)> = Vec::new();
    let mut prev: Option<(f64, f64)> = None;
    let at = |a: (f64, f64), b: (f64, f64), edge: f64| -> (f64, f64) {
        if step || b.0 == a.0 {
            (edge, a.1)
        } else {
            (edge, a.1 + (b.1 - a.1) * (edge - a.0) / (b.0 - a.0))
        }
    };
    for (&ts, &vs) in t.iter().zip(v) {
        if !(ts.is_finite() && vs.is_finite()) {
            if !run.is_empty() {
                runs.push(std::mem::take(&mut run));
            }
            prev = None;
            continue;
        }
        let p = (ts, vs);
        if let Some(a) = prev {
            // Entering the range from the left, or passing over it whole.
            if a.0 < t0 && p.0 > t0 {
                run.push(at(a, p, t0));
            }
            if p.0 >= t0 && p.0 <= t1 {
                run.push(p);
            } else if a.0 < t1 && p.0 > t1 {
                // Leaving the range to the right.
                run.push(at(a, p, t1));
                if !run.is_empty() {
                    runs.push(std::mem::take(&mut run));
                }
            }
        } else if p.0 >= t0 && p.0 <= t1 {
            run.push(p);
        }
        prev = Some(p);
    }
    if !run.is_empty() {
        runs.push(run);
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stems_mark_every_point_and_a_downsampled_column_at_its_max() {
        let s = |t: Vec<f64>, v: Vec<f64>| Series {
            t_s: t,
            v,
            style: Style::Stems,
            ..Default::default()
        };
        let few = Shape::of(&s(vec![1.0, 2.0], vec![5.0, f64::NAN]), (0.0, 10.0), 100);
        let st = few.stems(0, 100, |t| (t * 10.0) as i32, |v| 100 - v as i32);
        assert_eq!(st, vec![[(10, 100), (10, 95)]]);
        // 1000 points in 10 columns: one stem per column, to its highest value; a zero
        // still gets a 2 px mark.
        let t: Vec<f64> = (0..1000).map(|i| i as f64 / 100.0).collect();
        let mut v = vec![0.0; 1000];
        v[150] = 40.0;
        let many = Shape::of(&s(t, v), (0.0, 10.0), 10);
        let st = many.stems(0, 100, |t| t as i32, |v| 100 - v as i32);
        assert_eq!(st.len(), 10);
        assert_eq!(st[1], [(1, 100), (1, 60)]);
        assert_eq!(st[0], [(0, 100), (0, 98)]);
    }

    #[test]
    fn runs_break_at_nan_and_clip_to_the_range() {
        let t = [-1.0, 1.0, 2.0, 3.0, 4.0, 6.0];
        let v = [0.0, 2.0, f64::NAN, 4.0, 4.0, 8.0];
        let runs = runs_of(&t, &v, 0.0, 5.0, false);
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[0], vec![(0.0, 1.0), (1.0, 2.0)]);
        assert_eq!(runs[1], vec![(3.0, 4.0), (4.0, 4.0), (5.0, 6.0)]);
        let steps = runs_of(&t, &v, 0.0, 5.0, true);
        assert_eq!(steps[0][0], (0.0, 0.0));
        assert_eq!(steps[1][2], (5.0, 4.0));
    }

    #[test]
    fn a_segment_spanning_the_whole_range_is_cut_at_both_edges() {
        let runs = runs_of(&[-10.0, 10.0], &[0.0, 20.0], 0.0, 5.0, false);
        assert_eq!(runs, vec![vec![(0.0, 10.0), (5.0, 15.0)]]);
    }

    fn column(min: f64, max: f64) -> Column {
        Column {
            t_mid: 0.0,
            min,
            max,
            mean: (min + max) / 2.0,
            n: 1,
        }
    }

    fn gap() -> Column {
        Column {
            t_mid: 0.0,
            min: f64::NAN,
            max: f64::NAN,
            mean: f64::NAN,
            n: 0,
        }
    }

    /// Values 0..100 drawn 100 px tall, from row 200 (value 0) up to row 100.
    fn y_of(v: f64) -> i32 {
        200 - v.round() as i32
    }

    #[test]
    fn a_lone_spike_is_one_rectangle_from_its_peak_to_its_min() {
        let cols = vec![column(0.0, 0.0), column(0.0, 97.0), column(0.0, 0.0)];
        let band = Shape::Columns(cols).band(50, y_of);
        assert_eq!(band, vec![vec![(51, 103), (52, 103), (52, 200), (51, 200)]]);
    }

    #[test]
    fn the_band_is_the_union_of_the_bars_and_breaks_at_gaps_and_flat_columns() {
        let cols = vec![
            column(10.0, 20.0),
            column(10.0, 20.0),
            column(5.0, 40.0),
            gap(),
            column(30.0, 30.0),
            column(0.0, 1.0),
        ];
        let band = Shape::Columns(cols).band(0, y_of);
        assert_eq!(band.len(), 2, "{band:?}");
        // Columns 0..3: the equal bars merge, the third steps up to 40 and down to 5.
        assert_eq!(
            band[0],
            vec![
                (0, 180),
                (2, 180),
                (2, 160),
                (3, 160),
                (3, 195),
                (2, 195),
                (2, 190),
                (0, 190)
            ]
        );
        assert_eq!(band[1], vec![(5, 199), (6, 199), (6, 200), (5, 200)]);
    }

    #[test]
    fn the_mean_line_breaks_at_empty_columns_and_merges_flat_stretches() {
        let cols = vec![
            column(10.0, 10.0),
            column(10.0, 10.0),
            column(10.0, 10.0),
            gap(),
            gap(),
            column(50.0, 50.0),
        ];
        let line = Shape::Columns(cols).line(10, false, |_| 0, y_of);
        assert_eq!(
            line,
            vec![vec![(10, 190), (12, 190)], vec![(15, 150), (16, 150)]]
        );
    }

    #[test]
    fn steps_hold_each_value_until_the_next_point() {
        let runs = Shape::Runs(vec![vec![(0.0, 10.0), (1.0, 20.0), (2.0, 20.0)]]);
        let x_of = |t: f64| (t * 10.0) as i32;
        let steps = runs.line(0, true, x_of, y_of);
        assert_eq!(steps, vec![vec![(0, 190), (10, 190), (10, 180), (20, 180)]]);
        let straight = runs.line(0, false, x_of, y_of);
        assert_eq!(straight, vec![vec![(0, 190), (10, 180), (20, 180)]]);
    }
}
