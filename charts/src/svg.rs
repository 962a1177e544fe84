//! Writes a [`Timeline`] as one standalone SVG document.
//!
//! Layout, top to bottom: the title, a strip of event labels (if any), the panels
//! (each `panel_height_px` tall: a title/legend strip, then the plot area), then the
//! shared time axis's labels and title. All panels share the plot's left and right
//! edges, so one x pixel is one instant in every panel.
//!
//! The plot is one pixel column per [`envelope`] column. A series with more than two
//! points per column in range is downsampled: a `band` path of 1-px vertical bars
//! (min..max) and a `line` path through the column means. A shorter series is drawn
//! through its points. Coordinates are rounded to 0.1 px. Each panel is a
//! `<g class="panel">`; each series draws at most one `band` and one `line` path.

use std::fmt::Write as _;

use crate::envelope::{envelope, Column};
use crate::ticks::{format_compact, format_time_s, nice_ticks, time_axis_title, time_ticks};
use crate::{Marker, Panel, Series, Style, Timeline};

const FONT_FAMILY: &str = "DejaVu Sans, sans-serif";
const PALETTE: [&str; 10] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];
const TEXT: &str = "#222";
const MUTED: &str = "#666";
const GRID: &str = "#e6e6e6";
const FRAME: &str = "#b0b0b0";
const MARKER: &str = "#555";
const BAND_OPACITY: &str = "0.4";

const MARGIN_LEFT: u32 = 66;
const MARGIN_RIGHT: u32 = 16;
const TITLE_H: u32 = 28;
const MARKER_ROW_H: u32 = 13;
const MARKER_ROWS_MAX: usize = 3;
const PANEL_HEADER_H: u32 = 22;
const PANEL_GAP_H: u32 = 10;
const BOTTOM_H: u32 = 40;
const MIN_WIDTH: u32 = 200;
const MIN_PANEL_H: u32 = 60;

/// More points than this many per column in range means downsampling.
const RAW_POINTS_PER_COLUMN: usize = 2;

/// Renders the timeline as a standalone SVG document (no XML prolog).
pub fn render_svg(t: &Timeline) -> String {
    let width = t.width_px.max(MIN_WIDTH);
    let panel_h = t.panel_height_px.max(MIN_PANEL_H);
    let plot_left = MARGIN_LEFT;
    let plot_w = width - MARGIN_LEFT - MARGIN_RIGHT;
    let (t0, t1) = x_range(t);
    let x_of = |ts: f64| plot_left as f64 + (ts - t0) / (t1 - t0) * plot_w as f64;

    // Event labels go in rows above the first panel, staggered when they would collide.
    let markers = place_markers(&t.events, t0, t1, &x_of, width);
    let rows = markers.iter().map(|m| m.row + 1).max().unwrap_or(0) as u32;
    let panels_top = TITLE_H + rows * MARKER_ROW_H + if rows > 0 { 4 } else { 0 };
    let height = panels_top + t.panels.len() as u32 * panel_h + BOTTOM_H;

    let mut s = String::with_capacity(64 * 1024);
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="{FONT_FAMILY}" font-size="11" fill="{TEXT}">"#
    );
    let _ = write!(
        s,
        r##"<rect x="0" y="0" width="{width}" height="{height}" fill="#fff"/>"##
    );
    let _ = write!(
        s,
        r#"<text class="title" x="10" y="19" font-size="15" font-weight="bold">{}</text>"#,
        esc(&t.title)
    );

    let (x_step, x_ticks) = time_ticks(t0, t1, (plot_w / 90).max(2) as usize);
    let x_tick_px: Vec<f64> = x_ticks.iter().map(|&ts| x_of(ts)).collect();

    let mut last_plot_bottom = panels_top as f64;
    for (i, panel) in t.panels.iter().enumerate() {
        let top = panels_top + i as u32 * panel_h;
        let area = PlotArea {
            left: plot_left as f64,
            width: plot_w as f64,
            top: (top + PANEL_HEADER_H) as f64,
            height: (panel_h - PANEL_HEADER_H - PANEL_GAP_H) as f64,
        };
        last_plot_bottom = area.bottom();
        draw_panel(
            &mut s,
            panel,
            top,
            &area,
            (t0, t1),
            plot_w as usize,
            &x_tick_px,
        );
    }

    // The shared time axis: labels under the bottom panel.
    if !t.panels.is_empty() {
        s.push_str(r#"<g class="x-axis" font-size="10" text-anchor="middle">"#);
        for (&ts, &x) in x_ticks.iter().zip(&x_tick_px) {
            let _ = write!(
                s,
                r#"<text x="{}" y="{}">{}</text>"#,
                n1(x),
                n1(last_plot_bottom + 13.0),
                format_time_s(ts, x_step)
            );
        }
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" fill="{MUTED}" font-size="11">{}</text></g>"#,
            n1(plot_left as f64 + plot_w as f64 / 2.0),
            height - 8,
            time_axis_title(x_step, t1)
        );
    }

    // Event markers last, so they sit on top of the data.
    if !markers.is_empty() {
        let y_top = panels_top as f64 - 2.0;
        let y_bottom = if t.panels.is_empty() {
            y_top
        } else {
            last_plot_bottom
        };
        s.push_str(r#"<g class="markers">"#);
        let mut d = String::new();
        for m in &markers {
            let _ = write!(d, "M{},{}V{}", n1(m.x), n1(y_top), n1(y_bottom));
        }
        let _ = write!(
            s,
            r#"<path d="{d}" fill="none" stroke="{MARKER}" stroke-width="1" stroke-dasharray="4 3"/>"#
        );
        for m in &markers {
            let _ = write!(
                s,
                r#"<text x="{}" y="{}" font-size="10" text-anchor="middle" fill="{MARKER}">{}</text>"#,
                n1(m.label_x),
                TITLE_H + (m.row as u32 + 1) * MARKER_ROW_H - 2,
                esc(m.label)
            );
        }
        s.push_str("</g>");
    }

    s.push_str("</svg>\n");
    s
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

struct PlotArea {
    left: f64,
    width: f64,
    top: f64,
    height: f64,
}

impl PlotArea {
    fn right(&self) -> f64 {
        self.left + self.width
    }
    fn bottom(&self) -> f64 {
        self.top + self.height
    }
}

/// What one series contributes to a panel once mapped to columns or points.
enum Shape {
    /// Downsampled: one entry per pixel column.
    Columns(Vec<Column>),
    /// Drawn point by point: runs of `(t_s, v)` separated by gaps.
    Runs(Vec<Vec<(f64, f64)>>),
}

impl Shape {
    fn value_range(&self) -> Option<(f64, f64)> {
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
}

fn shape_of(series: &Series, (t0, t1): (f64, f64), columns: usize) -> Shape {
    let n = series.t_s.len().min(series.v.len());
    let (t, v) = (&series.t_s[..n], &series.v[..n]);
    let in_range = t.iter().filter(|ts| **ts >= t0 && **ts <= t1).count();
    if in_range > columns * RAW_POINTS_PER_COLUMN {
        Shape::Columns(envelope(t, v, t0, t1, columns))
    } else {
        Shape::Runs(runs_of(t, v, t0, t1, series.style == Style::Step))
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

fn draw_panel(
    s: &mut String,
    panel: &Panel,
    top: u32,
    area: &PlotArea,
    range: (f64, f64),
    columns: usize,
    x_tick_px: &[f64],
) {
    s.push_str(r#"<g class="panel">"#);
    let _ = write!(
        s,
        r#"<text class="panel-title" x="{}" y="{}" font-size="12" font-weight="bold">{}</text>"#,
        n1(area.left),
        top + 15,
        esc(&panel.title)
    );
    draw_legend(s, &panel.series, area.right(), (top + 15) as f64);

    // Frame and vertical time grid, shared by every panel.
    let mut grid = String::new();
    for &x in x_tick_px {
        let _ = write!(grid, "M{},{}V{}", n1(x), n1(area.top), n1(area.bottom()));
    }

    let shapes: Vec<Shape> = panel
        .series
        .iter()
        .map(|se| shape_of(se, range, columns))
        .collect();
    let data_range = shapes
        .iter()
        .filter_map(Shape::value_range)
        .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)));

    let Some((mut lo, mut hi)) = data_range else {
        push_grid(s, &grid);
        push_frame(s, area);
        let _ = write!(
            s,
            r#"<text class="no-data" x="{}" y="{}" text-anchor="middle" font-size="13" font-style="italic" fill="{MUTED}">no data</text>"#,
            n1(area.left + area.width / 2.0),
            n1(area.top + area.height / 2.0 + 4.0)
        );
        draw_y_label(s, &panel.y_label, area);
        s.push_str("</g>");
        return;
    };

    if panel.y_min_zero {
        lo = lo.min(0.0);
        hi = hi.max(0.0);
    }
    let ticks = nice_ticks(lo, hi);
    let y_of = |v: f64| area.bottom() - (v - ticks.lo) / (ticks.hi - ticks.lo) * area.height;
    for &tv in &ticks.values {
        let _ = write!(
            grid,
            "M{},{}H{}",
            n1(area.left),
            n1(y_of(tv)),
            n1(area.right())
        );
    }
    push_grid(s, &grid);
    push_frame(s, area);

    s.push_str(r#"<g class="y-axis" font-size="10" text-anchor="end">"#);
    for &tv in &ticks.values {
        let _ = write!(
            s,
            r#"<text x="{}" y="{}">{}</text>"#,
            n1(area.left - 5.0),
            n1(y_of(tv) + 3.5),
            format_compact(tv, ticks.step)
        );
    }
    s.push_str("</g>");
    draw_y_label(s, &panel.y_label, area);

    let col_w = area.width / columns as f64;
    let x_of = |ts: f64| area.left + (ts - range.0) / (range.1 - range.0) * area.width;
    // Bands first (under every line), then lines in series order.
    for (i, (series, shape)) in panel.series.iter().zip(&shapes).enumerate() {
        if let Shape::Columns(cols) = shape {
            let color = esc(series_color(series, i));
            let mut d = String::new();
            for (c, col) in cols.iter().enumerate() {
                if col.n == 0 {
                    continue;
                }
                let (y_max, y_min) = (y_of(col.max), y_of(col.min));
                if r1(y_min) - r1(y_max) < 0.1 {
                    continue; // flat: the line covers it
                }
                let x = area.left + (c as f64 + 0.5) * col_w;
                let _ = write!(d, "M{},{}V{}", n1(x), n1(y_max), n1(y_min));
            }
            if !d.is_empty() {
                let _ = write!(
                    s,
                    r#"<path class="band" d="{d}" fill="none" stroke="{color}" stroke-opacity="{BAND_OPACITY}" stroke-width="{}"/>"#,
                    n1(col_w.max(0.1))
                );
            }
        }
    }
    for (i, (series, shape)) in panel.series.iter().zip(&shapes).enumerate() {
        let color = esc(series_color(series, i));
        let step = series.style == Style::Step;
        let mut d = String::new();
        match shape {
            Shape::Columns(cols) => {
                let mut run: Vec<(f64, f64)> = Vec::new();
                for (c, col) in cols.iter().enumerate() {
                    if col.n == 0 {
                        push_run(&mut d, &run, step);
                        run.clear();
                    } else {
                        run.push((area.left + (c as f64 + 0.5) * col_w, y_of(col.mean)));
                    }
                }
                push_run(&mut d, &run, step);
            }
            Shape::Runs(runs) => {
                for r in runs {
                    let px: Vec<(f64, f64)> =
                        r.iter().map(|&(ts, v)| (x_of(ts), y_of(v))).collect();
                    push_run(&mut d, &px, step);
                }
            }
        }
        if d.is_empty() {
            continue;
        }
        let (width, dash) = match series.style {
            Style::DashedLine => ("1.6", r#" stroke-dasharray="6 4""#),
            _ => ("1.3", ""),
        };
        let _ = write!(
            s,
            r#"<path class="line" d="{d}" fill="none" stroke="{color}" stroke-width="{width}" stroke-linejoin="round"{dash}/>"#
        );
    }
    s.push_str("</g>");
}

/// Appends one subpath through `pts` (pixels). A lone point becomes a 1-px dash so it
/// stays visible.
fn push_run(d: &mut String, pts: &[(f64, f64)], step: bool) {
    match pts {
        [] => {}
        [(x, y)] => {
            let _ = write!(d, "M{},{}H{}", n1(x - 0.5), n1(*y), n1(x + 0.5));
        }
        [(x0, y0), rest @ ..] => {
            let _ = write!(d, "M{},{}", n1(*x0), n1(*y0));
            if step {
                for (x, y) in rest {
                    let _ = write!(d, "H{}V{}", n1(*x), n1(*y));
                }
            } else {
                d.push('L');
                for (k, (x, y)) in rest.iter().enumerate() {
                    if k > 0 {
                        d.push(' ');
                    }
                    let _ = write!(d, "{},{}", n1(*x), n1(*y));
                }
            }
        }
    }
}

fn push_grid(s: &mut String, grid: &str) {
    if !grid.is_empty() {
        let _ = write!(
            s,
            r#"<path class="grid" d="{grid}" fill="none" stroke="{GRID}" stroke-width="1"/>"#
        );
    }
}

fn push_frame(s: &mut String, a: &PlotArea) {
    let _ = write!(
        s,
        r#"<rect class="frame" x="{}" y="{}" width="{}" height="{}" fill="none" stroke="{FRAME}" stroke-width="1"/>"#,
        n1(a.left),
        n1(a.top),
        n1(a.width),
        n1(a.height)
    );
}

fn draw_y_label(s: &mut String, label: &str, a: &PlotArea) {
    if label.is_empty() {
        return;
    }
    let (x, y) = (14.0, a.top + a.height / 2.0);
    let _ = write!(
        s,
        r#"<text class="y-label" x="{x}" y="{y}" transform="rotate(-90 {x} {y})" text-anchor="middle" font-size="10" fill="{MUTED}">{}</text>"#,
        esc(label),
        x = n1(x),
        y = n1(y)
    );
}

/// Legend entries right-aligned at the panel's top right, in series order.
fn draw_legend(s: &mut String, series: &[Series], right: f64, baseline: f64) {
    const SWATCH: f64 = 18.0;
    const FONT: f64 = 10.5;
    let entries: Vec<(usize, &Series)> = series
        .iter()
        .enumerate()
        .filter(|(_, se)| !se.label.is_empty())
        .collect();
    if entries.is_empty() {
        return;
    }
    let widths: Vec<f64> = entries
        .iter()
        .map(|(_, se)| SWATCH + 4.0 + text_width(&se.label, FONT) + 14.0)
        .collect();
    let mut x = right - widths.iter().sum::<f64>() + 14.0;
    s.push_str(r#"<g class="legend" font-size="10.5">"#);
    for ((i, se), w) in entries.iter().zip(&widths) {
        let color = esc(series_color(se, *i));
        let y = baseline - 3.5;
        if se.style == Style::Envelope {
            let _ = write!(
                s,
                r#"<rect x="{}" y="{}" width="{SWATCH}" height="8" fill="{color}" fill-opacity="{BAND_OPACITY}"/>"#,
                n1(x),
                n1(y - 4.0)
            );
        }
        let dash = match se.style {
            Style::DashedLine => r#" stroke-dasharray="5 3""#,
            _ => "",
        };
        let _ = write!(
            s,
            r#"<path d="M{},{}H{}" stroke="{color}" stroke-width="1.6"{dash}/>"#,
            n1(x),
            n1(y),
            n1(x + SWATCH)
        );
        let _ = write!(
            s,
            r#"<text x="{}" y="{}">{}</text>"#,
            n1(x + SWATCH + 4.0),
            n1(baseline),
            esc(&se.label)
        );
        x += w;
    }
    s.push_str("</g>");
}

struct PlacedMarker<'a> {
    x: f64,
    label_x: f64,
    row: usize,
    label: &'a str,
}

/// Puts each in-range marker's label in the first row where it does not overlap the
/// previous label; when all rows are taken, in the row that frees up first.
fn place_markers<'a>(
    events: &'a [Marker],
    t0: f64,
    t1: f64,
    x_of: &dyn Fn(f64) -> f64,
    width: u32,
) -> Vec<PlacedMarker<'a>> {
    let mut ms: Vec<&Marker> = events
        .iter()
        .filter(|m| m.t_s.is_finite() && m.t_s >= t0 && m.t_s <= t1)
        .collect();
    ms.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
    let mut row_end = [f64::NEG_INFINITY; MARKER_ROWS_MAX];
    let mut placed = Vec::with_capacity(ms.len());
    for m in ms {
        let x = x_of(m.t_s);
        let w = text_width(&m.label, 10.0);
        let label_x = x.clamp(
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

fn series_color(se: &Series, index: usize) -> &str {
    se.color
        .as_deref()
        .unwrap_or(PALETTE[index % PALETTE.len()])
}

/// A rough width for DejaVu Sans: about 0.6 em per character.
fn text_width(text: &str, font_px: f64) -> f64 {
    text.chars().count() as f64 * font_px * 0.6
}

/// Escapes text for use in XML content and attribute values.
fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Control characters are not allowed in XML 1.0.
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => {}
            c => out.push(c),
        }
    }
    out
}

fn r1(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

/// A coordinate rounded to 0.1 px, written without a trailing ".0".
fn n1(v: f64) -> Num {
    Num((v * 10.0).round() as i64)
}

struct Num(i64);

impl std::fmt::Display for Num {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let a = self.0.unsigned_abs();
        if self.0 < 0 {
            f.write_str("-")?;
        }
        write!(f, "{}", a / 10)?;
        if !a.is_multiple_of(10) {
            write!(f, ".{}", a % 10)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coordinates_are_rounded_to_a_tenth() {
        assert_eq!(n1(12.34).to_string(), "12.3");
        assert_eq!(n1(12.0).to_string(), "12");
        assert_eq!(n1(-0.04).to_string(), "0");
        assert_eq!(n1(-0.25).to_string(), "-0.3");
        assert_eq!(n1(1599.96).to_string(), "1600");
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

    #[test]
    fn text_is_escaped() {
        assert_eq!(esc("a<b & \"c\"\u{1}"), "a&lt;b &amp; &quot;c&quot;");
    }
}
