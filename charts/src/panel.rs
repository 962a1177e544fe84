//! One panel: a plotters chart with its own y axis on the shared time axis.
//!
//! plotters builds the chart (`ChartBuilder` with the same label-area width and right
//! margin in every panel, so every plot spans the same pixels), maps values to
//! pixels, and draws the grid, the tick labels (at our ticks, see [`crate::ticks`]),
//! the unit along the y axis and, under the bottom panel, the time labels and the
//! axis title. On top come the frame, the series' bands then lines (from
//! [`Shape`]), and in the strip above the plot the panel's title and legend.
//!
//! The plot is the pixels from the first to the last one the time range maps to;
//! its frame runs along them, and each envelope column is one of the pixel columns
//! between.

use plotters::element::DashedPathElement;
use plotters::prelude::{
    ChartBuilder, Color, DrawingAreaErrorKind, FontStyle, PathElement, Polygon, Rectangle, Text,
    TRANSPARENT,
};
use plotters::style::text_anchor::HPos;

use crate::area::{Area, DrawResult};
use crate::axis::Axis;
use crate::layout::{
    text_width, Layout, BOTTOM_H, MARGIN_LEFT, MARGIN_RIGHT, PANEL_GAP_H, PANEL_HEADER_H,
};
use crate::shape::Shape;
use crate::style::{
    clean, font, line_style, series_color, BAND_OPACITY, FRAME, GRID, MUTED, SERIES_DASH, SHADE,
    SHADE_OPACITY, TEXT,
};
use crate::ticks::{log_ticks, nice_ticks, time_axis_title};
use crate::{Panel, Series, Style, YScale};

/// Space left under the time axis's title, so its descenders are not cut.
const BOTTOM_PAD: u32 = 5;
/// Space left of the unit along the y axis (plotters puts it at its area's edge).
const Y_DESC_PAD: u32 = 6;

/// Draws panel `index` (the bottom one carries the time axis) and returns the first
/// and last pixel rows of its plot.
pub(crate) fn draw_panel(
    root: &Area,
    panel: &Panel,
    index: usize,
    bottom: bool,
    layout: &Layout,
) -> Result<(i32, i32), DrawingAreaErrorKind<std::io::Error>> {
    let top = layout.panels_top + index as u32 * layout.panel_h;
    let (t0, t1) = layout.range;
    let area = root.clone().shrink(
        (0, top),
        (
            layout.width,
            layout.panel_h + if bottom { BOTTOM_H - BOTTOM_PAD } else { 0 },
        ),
    );

    let shapes: Vec<Shape> = panel
        .series
        .iter()
        .map(|se| Shape::of(se, layout.range, layout.columns()))
        .collect();
    let y_ticks = shapes
        .iter()
        .filter_map(Shape::value_range)
        .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)))
        .map(|(lo, hi)| match panel.y_scale {
            YScale::Log { floor } => log_ticks(floor, hi),
            YScale::Capped { max } if hi > max => {
                nice_ticks(if panel.y_min_zero { lo.min(0.0) } else { lo }, max)
            }
            _ if panel.y_min_zero => nice_ticks(lo.min(0.0), hi.max(0.0)),
            _ => nice_ticks(lo, hi),
        });
    let y_axis = match (panel.y_scale, &y_ticks) {
        (YScale::Log { .. }, Some(t)) => Axis::log(t),
        _ => Axis::value(y_ticks.as_ref()),
    };
    let x_axis = Axis::time(layout.range, (layout.plot_w / 90).max(2) as usize);
    let x_title = time_axis_title(x_axis.step(), t1);

    let mut chart = ChartBuilder::on(&area)
        .margin_top(PANEL_HEADER_H)
        .margin_right(MARGIN_RIGHT)
        .margin_bottom(if bottom { 0 } else { PANEL_GAP_H })
        .margin_left(Y_DESC_PAD)
        .y_label_area_size(MARGIN_LEFT - Y_DESC_PAD)
        .x_label_area_size(if bottom {
            BOTTOM_H + PANEL_GAP_H - BOTTOM_PAD
        } else {
            0
        })
        .build_cartesian_2d(x_axis, y_axis)?;
    let mut mesh = chart.configure_mesh();
    mesh.bold_line_style(GRID)
        .light_line_style(TRANSPARENT)
        // No axis lines or tick marks (the frame is the axis); the tick size only
        // sets how far the labels sit from the plot.
        .axis_style(TRANSPARENT)
        .set_all_tick_mark_size(3)
        .label_style(font(10.0, FontStyle::Normal, TEXT, HPos::Center))
        .axis_desc_style(font(10.0, FontStyle::Normal, MUTED, HPos::Center))
        .x_desc(x_title);
    if !panel.y_label.is_empty() {
        mesh.y_desc(clean(&panel.y_label));
    }
    mesh.draw()?;

    let (xs, ys) = chart.plotting_area().get_pixel_range();
    let (left, right, plot_top, plot_bottom) = (xs.start, xs.end - 1, ys.start, ys.end - 1);
    // The markers and the envelope's columns are placed by `Layout`'s arithmetic.
    debug_assert_eq!(
        (left, (right - left) as usize),
        (MARGIN_LEFT as i32, layout.columns())
    );
    draw_shades(root, layout, plot_top, plot_bottom)?;
    root.draw(&Rectangle::new(
        [(left, plot_top), (right, plot_bottom)],
        FRAME.stroke_width(1),
    ))?;
    let header_y = (top + PANEL_HEADER_H / 2) as i32;
    root.draw(&Text::new(
        clean(&panel.title),
        (left, header_y),
        font(12.0, FontStyle::Bold, TEXT, HPos::Left),
    ))?;
    draw_legend(root, &panel.series, right, header_y)?;

    if y_ticks.is_none() {
        root.draw(&Text::new(
            "no data",
            ((left + right) / 2, (plot_top + plot_bottom) / 2),
            font(13.0, FontStyle::Italic, MUTED, HPos::Center),
        ))?;
        return Ok((plot_top, plot_bottom));
    }

    let x_of = |ts: f64| chart.backend_coord(&(ts, 0.0)).0;
    let y_of = |v: f64| chart.backend_coord(&(t0, v)).1;
    // Bands first (under every line), then lines in series order.
    for (i, (series, shape)) in panel.series.iter().zip(&shapes).enumerate() {
        if series.style == Style::Stems {
            continue;
        }
        let tint = series_color(series, i).mix(BAND_OPACITY).filled();
        for polygon in shape.band(left, y_of) {
            root.draw(&Polygon::new(polygon, tint))?;
        }
    }
    for (i, (series, shape)) in panel.series.iter().zip(&shapes).enumerate() {
        let dashed = series.style == Style::DashedLine;
        let style = line_style(series_color(series, i), dashed);
        if series.style == Style::Stems {
            let floor = y_of(0.0).min(plot_bottom);
            for stem in shape.stems(left, floor, x_of, y_of) {
                root.draw(&PathElement::new(stem, style))?;
            }
            continue;
        }
        for path in shape.line(left, series.style == Style::Step, x_of, y_of) {
            if dashed {
                root.draw(&DashedPathElement::new(
                    path,
                    SERIES_DASH.0,
                    SERIES_DASH.1,
                    style,
                ))?;
            } else {
                root.draw(&PathElement::new(path, style))?;
            }
        }
    }
    Ok((plot_top, plot_bottom))
}

/// The timeline's shaded spans over the plot's rows, folded to pixel columns (one
/// rect per run of shaded columns, see [`crate::layout::shade_runs`]); drawn after the
/// grid, under the frame and the data.
fn draw_shades(root: &Area, layout: &Layout, plot_top: i32, plot_bottom: i32) -> DrawResult {
    for &(xa, xb) in &layout.shade_runs {
        root.draw(&Rectangle::new(
            [(xa, plot_top), (xb, plot_bottom)],
            SHADE.mix(SHADE_OPACITY).filled(),
        ))?;
    }
    Ok(())
}

/// Legend entries right-aligned at the panel's top right, in series order: a tinted
/// swatch for a band, a short line (dashed for a dashed series), the label.
fn draw_legend(root: &Area, series: &[Series], right: i32, y: i32) -> DrawResult {
    const SWATCH: i32 = 18;
    const FONT_PX: f64 = 10.5;
    const GAP: i32 = 14;
    let entries: Vec<(usize, &Series)> = series
        .iter()
        .enumerate()
        .filter(|(_, se)| !se.label.is_empty())
        .collect();
    let widths: Vec<i32> = entries
        .iter()
        .map(|(_, se)| SWATCH + 4 + text_width(&se.label, FONT_PX).round() as i32 + GAP)
        .collect();
    let mut x = right - widths.iter().sum::<i32>() + GAP;
    for ((i, se), w) in entries.iter().zip(&widths) {
        let color = series_color(se, *i);
        if se.style == Style::Envelope {
            root.draw(&Rectangle::new(
                [(x, y - 4), (x + SWATCH, y + 4)],
                color.mix(BAND_OPACITY).filled(),
            ))?;
        }
        let line = [(x, y), (x + SWATCH, y)];
        if se.style == Style::DashedLine {
            root.draw(&DashedPathElement::new(line, 5, 3, line_style(color, true)))?;
        } else {
            root.draw(&PathElement::new(line, color.stroke_width(2)))?;
        }
        root.draw(&Text::new(
            clean(&se.label),
            (x + SWATCH + 4, y),
            font(FONT_PX, FontStyle::Normal, TEXT, HPos::Left),
        ))?;
        x += w;
    }
    Ok(())
}
