//! Builders for timelines and readers of what plotters' SVG backend writes: `<text>`
//! elements, `<polygon>` bands, `<polyline>` lines and the plots' frames, found by
//! their attributes (the SVG has no classes or ids).

// Each test binary uses its own subset of these helpers.
#![allow(dead_code)]

use charts::{Panel, Series, Style, Timeline};
use resvg::usvg::roxmltree;

/// The palette's first colour, as plotters writes it: a series without a colour of
/// its own is drawn in it.
pub const FIRST: &str = "#1F77B4";
/// The colour of the event lines and labels.
pub const MARKER: &str = "#555555";

pub fn series(label: &str, t_s: Vec<f64>, v: Vec<f64>, style: Style) -> Series {
    Series {
        label: label.into(),
        t_s,
        v,
        style,
        color: None,
        folded: None,
    }
}

pub fn panel(title: &str, series: Vec<Series>) -> Panel {
    Panel {
        title: title.into(),
        y_label: "MiB/s".into(),
        series,
        y_min_zero: true,
        y_scale: Default::default(),
    }
}

/// `n` samples evenly spaced over `[0, span_s)`, all `value`.
pub fn flat(n: usize, span_s: f64, value: f64) -> (Vec<f64>, Vec<f64>) {
    let t = (0..n).map(|i| i as f64 * span_s / n as f64).collect();
    (t, vec![value; n])
}

pub fn timeline(panels: Vec<Panel>) -> Timeline {
    Timeline {
        title: "test".into(),
        x_range_s: (0.0, 10.0),
        panels,
        ..Timeline::default()
    }
}

/// One `<text>` element: where it is anchored and what it says (trimmed: plotters
/// puts the text on a line of its own).
#[derive(Debug, Clone)]
pub struct Label {
    pub x: f64,
    pub y: f64,
    /// `start`, `middle` or `end`.
    pub anchor: String,
    pub bold: bool,
    pub font_px: f64,
    pub text: String,
}

pub fn labels(svg: &str) -> Vec<Label> {
    let doc = roxmltree::Document::parse(svg).expect("SVG is well-formed XML");
    doc.descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| Label {
            x: num(&n, "x"),
            y: num(&n, "y"),
            anchor: n.attribute("text-anchor").unwrap_or("start").to_string(),
            bold: n.attribute("font-weight") == Some("bold"),
            font_px: num(&n, "font-size"),
            text: n.text().unwrap_or_default().trim().to_string(),
        })
        .collect()
}

/// The texts of the panels' titles (bold, 12 px), in document order.
pub fn panel_titles(svg: &str) -> Vec<String> {
    labels(svg)
        .into_iter()
        .filter(|l| l.bold && l.font_px == 12.0)
        .map(|l| l.text)
        .collect()
}

/// The value axes' tick labels (right-aligned against the plot), in document order.
pub fn y_labels(svg: &str) -> Vec<String> {
    labels(svg)
        .into_iter()
        .filter(|l| l.anchor == "end")
        .map(|l| l.text)
        .collect()
}

/// The time axis's tick labels: centred, below the bottom plot, not its title.
pub fn x_labels(svg: &str) -> Vec<String> {
    let bottom = frames(svg)
        .last()
        .map_or(f64::INFINITY, |f| f.bottom as f64);
    labels(svg)
        .into_iter()
        .filter(|l| l.anchor == "middle" && l.y > bottom && !l.text.starts_with("time since"))
        .map(|l| l.text)
        .collect()
}

fn num(n: &roxmltree::Node, attr: &str) -> f64 {
    n.attribute(attr)
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::NAN)
}

pub type Px = (i32, i32);

fn points_of(n: &roxmltree::Node) -> Vec<Px> {
    n.attribute("points")
        .unwrap_or_default()
        .split_whitespace()
        .map(|p| {
            let (x, y) = p.split_once(',').expect("x,y");
            (x.parse().expect("integer x"), y.parse().expect("integer y"))
        })
        .collect()
}

/// The points of every `<polygon>` filled with `fill` (`#RRGGBB`): the bands.
pub fn polygons(svg: &str, fill: &str) -> Vec<Vec<Px>> {
    points_where(svg, "polygon", "fill", fill)
}

/// The points of every `<polyline>` stroked with `stroke`: lines, dashes, legend
/// samples.
pub fn polylines(svg: &str, stroke: &str) -> Vec<Vec<Px>> {
    points_where(svg, "polyline", "stroke", stroke)
}

fn points_where(svg: &str, tag: &str, attr: &str, value: &str) -> Vec<Vec<Px>> {
    let doc = roxmltree::Document::parse(svg).expect("SVG is well-formed XML");
    doc.descendants()
        .filter(|n| n.has_tag_name(tag) && n.attribute(attr) == Some(value))
        .map(|n| points_of(&n))
        .collect()
}

/// A series' lines inside the plots: its polylines minus the legend's sample (which
/// sits in the strip above the first plot).
pub fn plot_lines(svg: &str, stroke: &str) -> Vec<Vec<Px>> {
    let top = frames(svg).first().map_or(0, |f| f.top);
    polylines(svg, stroke)
        .into_iter()
        .filter(|p| p.iter().all(|&(_, y)| y >= top))
        .collect()
}

/// A plot's frame: the pixels its time and value ranges map to, edges included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    pub left: i32,
    pub top: i32,
    pub right: i32,
    pub bottom: i32,
}

/// Every plot's frame (the unfilled rectangles), top to bottom.
pub fn frames(svg: &str) -> Vec<Frame> {
    let doc = roxmltree::Document::parse(svg).expect("SVG is well-formed XML");
    doc.descendants()
        .filter(|n| n.has_tag_name("rect") && n.attribute("fill") == Some("none"))
        .map(|n| {
            let (x, y) = (num(&n, "x") as i32, num(&n, "y") as i32);
            Frame {
                left: x,
                top: y,
                right: x + num(&n, "width") as i32,
                bottom: y + num(&n, "height") as i32,
            }
        })
        .collect()
}

/// Width, height and RGBA pixels of a PNG.
pub fn decode(png_bytes: &[u8]) -> (u32, u32, Vec<u8>) {
    let decoder = png::Decoder::new(png_bytes);
    let mut reader = decoder.read_info().expect("a valid PNG");
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).expect("a PNG frame");
    assert_eq!(info.color_type, png::ColorType::Rgba);
    buf.truncate(info.buffer_size());
    (info.width, info.height, buf)
}
