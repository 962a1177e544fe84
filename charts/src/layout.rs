//! Where everything goes on the image: the vertical stack of strips, the shared plot
//! edges, and the rows of event labels. Pure arithmetic in pixels, no drawing.
//!
//! Layout, top to bottom: the title, a strip of event labels (if any), the panels
//! (each `panel_height_px` tall: a title/legend strip, then the plot area, then a
//! gap), then the shared time axis's labels and title. All panels share the plot's
//! left and right edges, so one x pixel is one instant in every panel.

use plotters::coord::types::RangedCoordf64;
use plotters::prelude::Ranged;

use crate::{Marker, Shade, Timeline};

pub(crate) const MARGIN_LEFT: u32 = 66;
pub(crate) const MARGIN_RIGHT: u32 = 16;
pub(crate) const TITLE_H: u32 = 28;
pub(crate) const MARKER_ROW_H: u32 = 13;
const MARKER_ROWS_MAX: usize = 3;
pub(crate) const PANEL_HEADER_H: u32 = 22;
pub(crate) const PANEL_GAP_H: u32 = 10;
pub(crate) const BOTTOM_H: u32 = 40;
const MIN_WIDTH: u32 = 200;
const MIN_PANEL_H: u32 = 60;

/// The image's geometry for one timeline.
pub(crate) struct Layout<'a> {
    pub width: u32,
    pub height: u32,
    pub(crate) panel_h: u32,
    /// Where the first panel starts (below the title and the event labels).
    pub(crate) panels_top: u32,
    /// The plot's width in pixels: one envelope column per pixel.
    pub plot_w: u32,
    /// The shared time range in seconds.
    pub range: (f64, f64),
    /// In-range events in time order, with their label rows.
    pub markers: Vec<PlacedMarker<'a>>,
    /// The timeline's shaded spans folded to the plot's pixel columns (every panel
    /// draws them under its data): see [`shade_runs`].
    pub shade_runs: Vec<(i32, i32)>,
}

impl<'a> Layout<'a> {
    pub fn of(t: &'a Timeline) -> Self {
        let width = t.width_px.max(MIN_WIDTH);
        let panel_h = t.panel_height_px.max(MIN_PANEL_H);
        let plot_w = width - MARGIN_LEFT - MARGIN_RIGHT;
        let range = x_range(t);
        let markers = place_markers(&t.events, range, plot_w, width);
        let rows = markers.iter().map(|m| m.row + 1).max().unwrap_or(0) as u32;
        let panels_top = TITLE_H + rows * MARKER_ROW_H + if rows > 0 { 4 } else { 0 };
        let height = panels_top + t.panels.len() as u32 * panel_h + BOTTOM_H;
        Layout {
            width,
            height,
            panel_h,
            panels_top,
            plot_w,
            range,
            markers,
            shade_runs: shade_runs(&t.shades, range, plot_w),
        }
    }

    /// How many envelope columns the plot has: one per pixel column between the
    /// first and the last pixel the time range maps to.
    pub fn columns(&self) -> usize {
        self.plot_w as usize - 1
    }
}

/// plotters' own mapping of a time to a pixel (what its charts use for the grid and
/// the data): `t0` at the plot's first pixel column, `t1` at its last.
fn x_px((t0, t1): (f64, f64), plot_w: u32, ts: f64) -> i32 {
    let left = MARGIN_LEFT as i32;
    RangedCoordf64::from(t0..t1).map(&ts, (left, left + plot_w as i32 - 1))
}

/// The shaded spans as rects' left and right edges `(x0, x1)` in pixels (a rect
/// covers the pixel columns `x0..x1`), in increasing order, disjoint and not touching: the union of the spans at the plot's resolution. Spans that
/// overlap or touch at a pixel become one run, so the number of rects drawn is bounded
/// by the plot's width whatever the run's length (a 6-hour run had tens of thousands of
/// bursts, one rect each per panel), and overlapping translucent shades no longer draw
/// darker where they overlap. A span is clipped to the time range and is at least one
/// pixel wide (a 10 ms burst on a 10-minute axis still shows); one that is not finite,
/// not increasing, or outside the range is left out. O(spans + width) with a difference
/// array over the columns, no sort.
pub(crate) fn shade_runs(shades: &[Shade], range: (f64, f64), plot_w: u32) -> Vec<(i32, i32)> {
    let (t0, t1) = range;
    let left = MARGIN_LEFT as i32;
    let right = left + plot_w as i32 - 1;
    let n = (right - left + 1).max(0) as usize;
    // depth[i] - depth[i - 1]: +1 where a span starts, -1 one past where it ends.
    let mut delta = vec![0i32; n + 1];
    let mut any = false;
    for s in shades {
        if !(s.t0_s.is_finite() && s.t1_s.is_finite() && s.t1_s > s.t0_s) {
            continue;
        }
        let (a, b) = (s.t0_s.max(t0), s.t1_s.min(t1));
        if b < a {
            continue;
        }
        let xa = x_px(range, plot_w, a).clamp(left, right);
        // The rect's right edge; its columns are xa..xb.
        let xb = x_px(range, plot_w, b).min(right).max(xa + 1);
        delta[(xa - left) as usize] += 1;
        delta[(xb - left) as usize] -= 1;
        any = true;
    }
    let mut runs = Vec::new();
    if !any {
        return runs;
    }
    let mut depth = 0i32;
    let mut start: Option<i32> = None;
    for (i, d) in delta.iter().take(n).enumerate() {
        depth += d;
        let x = left + i as i32;
        match (depth > 0, start) {
            (true, None) => start = Some(x),
            (false, Some(a)) => {
                runs.push((a, x));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(a) = start {
        runs.push((a, right + 1));
    }
    runs
}

/// The shared time range: the caller's, or the data's when the caller's is unusable.
fn x_range(t: &Timeline) -> (f64, f64) {
    let (a, b) = t.x_range_s;
    if a.is_finite() && b.is_finite() && b > a {
        return (a, b);
    }
    let mut lo = f64::INFINITY;
    let mut hi = f64::NEG_INFINITY;
    for s in t.panels.iter().flat_map(|p| &p.series) {
        for &ts in &s.t_s {
            if ts.is_finite() {
                lo = lo.min(ts);
                hi = hi.max(ts);
            }
        }
    }
    if lo.is_finite() && hi > lo {
        (lo, hi)
    } else if lo.is_finite() {
        (lo, lo + 1.0)
    } else {
        (0.0, 1.0)
    }
}

/// An event whose label has a place.
pub(crate) struct PlacedMarker<'a> {
    /// The line's x pixel.
    pub x: i32,
    /// The label's centre, kept inside the image.
    pub(crate) label_x: f64,
    /// 0 is the row just under the title.
    pub row: usize,
    pub label: &'a str,
}

impl PlacedMarker<'_> {
    /// The vertical middle of the label's row.
    pub(crate) fn label_y(&self) -> f64 {
        (TITLE_H + self.row as u32 * MARKER_ROW_H) as f64 + MARKER_ROW_H as f64 / 2.0
    }
}

/// Puts each in-range marker's label in the first row where it does not overlap the
/// previous label; when all rows are taken, in the row that frees up first.
fn place_markers(
    events: &[Marker],
    (t0, t1): (f64, f64),
    plot_w: u32,
    width: u32,
) -> Vec<PlacedMarker<'_>> {
    let mut ms: Vec<&Marker> = events
        .iter()
        .filter(|m| m.t_s.is_finite() && m.t_s >= t0 && m.t_s <= t1)
        .collect();
    ms.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
    let mut row_end = [f64::NEG_INFINITY; MARKER_ROWS_MAX];
    let mut placed = Vec::with_capacity(ms.len());
    for m in ms {
        let x = x_px((t0, t1), plot_w, m.t_s);
        let w = text_width(&m.label, 10.0);
        let label_x = (x as f64).clamp(
            w / 2.0 + 2.0,
            (width as f64 - w / 2.0 - 2.0).max(w / 2.0 + 2.0),
        );
        let start = label_x - w / 2.0;
        let row = (0..MARKER_ROWS_MAX)
            .find(|&r| row_end[r] + 6.0 <= start)
            .unwrap_or_else(|| {
                (0..MARKER_ROWS_MAX)
                    .min_by(|&a, &b| row_end[a].total_cmp(&row_end[b]))
                    .unwrap_or(0)
            });
        row_end[row] = label_x + w / 2.0;
        placed.push(PlacedMarker {
            x,
            label_x,
            row,
            label: &m.label,
        });
    }
    placed
}

/// A rough width for DejaVu Sans: about 0.6 em per character.
pub(crate) fn text_width(text: &str, font_px: f64) -> f64 {
    text.chars().count() as f64 * font_px * 0.6
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Panel;

    fn marker(t_s: f64, label: &str) -> Marker {
        Marker {
            t_s,
            label: label.into(),
        }
    }

    #[test]
    fn close_markers_take_the_next_row_and_far_ones_reuse_the_first() {
        let events = [
            marker(10.0, "restart n2"),
            marker(10.5, "partition"),
            marker(90.0, "heal"),
            marker(-1.0, "before the range"),
        ];
        let placed = place_markers(&events, (0.0, 100.0), 1000, 1100);
        let rows: Vec<(&str, usize)> = placed.iter().map(|m| (m.label, m.row)).collect();
        assert_eq!(rows, [("restart n2", 0), ("partition", 1), ("heal", 0)]);
        assert!(placed[1].label_y() > placed[0].label_y());
    }

    #[test]
    fn a_label_at_the_edge_stays_inside_the_image() {
        let events = [marker(100.0, "js-pub end")];
        let placed = place_markers(&events, (0.0, 100.0), 1518, 1600);
        let half = text_width("js-pub end", 10.0) / 2.0;
        assert!(placed[0].label_x + half <= 1600.0 - 2.0);
    }

    #[test]
    fn the_image_grows_by_one_panel_per_panel_and_by_a_row_per_marker_row() {
        let t = Timeline {
            panels: vec![Panel::default(); 3],
            panel_height_px: 100,
            ..Timeline::default()
        };
        let l = Layout::of(&t);
        assert_eq!(l.height, TITLE_H + 300 + BOTTOM_H);
        let with_marker = Timeline {
            events: vec![marker(0.5, "x")],
            ..t.clone()
        };
        assert_eq!(
            Layout::of(&with_marker).panels_top,
            TITLE_H + MARKER_ROW_H + 4
        );
    }
}
