//! Writes a [`Timeline`] as one standalone SVG document, drawn by plotters' SVG
//! backend: the white page, the title, the panels (see [`crate::panel`]) and the
//! event markers on top of them.
//!
//! Every element is plotters': `<rect>`, `<line>`, `<polyline>`, `<polygon>` and
//! `<text>`, at integer pixel coordinates, colours as `#RRGGBB` plus an `opacity`.
//! Where each thing goes is [`Layout`]'s.

use plotters::element::DashedPathElement;
use plotters::prelude::{FontStyle, IntoDrawingArea, SVGBackend, Text, WHITE};
use plotters::style::text_anchor::HPos;

use crate::layout::{Layout, TITLE_H};
use crate::panel::draw_panel;
use crate::style::{clean, font, MARKER, MARKER_DASH, TEXT};
use crate::Timeline;

pub(crate) use crate::area::{Area, DrawResult};

/// Renders the timeline as a standalone SVG document (no XML prolog).
pub fn render_svg(t: &Timeline) -> String {
    let layout = Layout::of(t);
    let mut s = String::with_capacity(64 * 1024);
    {
        let root =
            SVGBackend::with_string(&mut s, (layout.width, layout.height)).into_drawing_area();
        // plotters' SVG backend writes into a String and never fails; its layout
        // errors need an area smaller than the minimum sizes `Layout` enforces. So an
        // error here is a bug: tests stop on it, a user still gets the document as far
        // as it was drawn (the backend closes it when dropped).
        if let Err(e) = draw(&root, t, &layout) {
            debug_assert!(false, "drawing the timeline failed: {e}");
        }
    }
    s
}

fn draw(root: &Area, t: &Timeline, layout: &Layout) -> DrawResult {
    root.fill(&WHITE)?;
    root.draw(&Text::new(
        clean(&t.title),
        (10, (TITLE_H / 2) as i32),
        font(15.0, FontStyle::Bold, TEXT, HPos::Left),
    ))?;

    let mut plot_rows = None;
    for (i, panel) in t.panels.iter().enumerate() {
        let last = i + 1 == t.panels.len();
        plot_rows = Some(draw_panel(root, panel, i, last, layout)?);
    }

    // Event markers last, so they sit on top of the data.
    let y_top = layout.panels_top as i32 - 2;
    let y_bottom = plot_rows.map_or(y_top, |(_, bottom)| bottom);
    // Markers are in time order, so their x never decreases: a line at the x of the
    // one before is the same line drawn again (a run with thousands of triggers would
    // draw thousands of dashed lines, each ~100 pieces); draw it once, and a label that
    // repeats the previous one at the same x once. Lines are then bounded by the plot's
    // width whatever the number of events.
    let mut last: Option<(i32, &str)> = None;
    for m in &layout.markers {
        let same_x = last.is_some_and(|(x, _)| x == m.x);
        let same_label = last.is_some_and(|(x, l)| x == m.x && l == m.label);
        last = Some((m.x, m.label));
        if same_label {
            continue;
        }
        if y_bottom > y_top && !same_x {
            root.draw(&DashedPathElement::new(
                [(m.x, y_top), (m.x, y_bottom)],
                MARKER_DASH.0,
                MARKER_DASH.1,
                MARKER,
            ))?;
        }
        root.draw(&Text::new(
            clean(m.label),
            (m.label_x.round() as i32, m.label_y().round() as i32),
            font(10.0, FontStyle::Normal, MARKER, HPos::Center),
        ))?;
    }
    root.present()
}
