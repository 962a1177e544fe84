//! Grouped bar charts with error bars: a study's figure per cell, cells grouped along the
//! x axis by some matrix parameters and coloured by another (RAID 0 vs RAID 1 bars per
//! object size), each bar the mean over repeats with a whisker from the smallest to the
//! largest repeat.
//!
//! Written as SVG by hand rather than through plotters: a bar chart has no time axis,
//! no envelope and no thousands of points, and plotters' category axes would put the
//! group labels where it likes; here every label is one `<text>` element whose content
//! is the label as given (what the tests and a reader of the SVG look for). The value
//! axis uses the timeline's 1-2-5 ticks and compact labels, from 0.

use crate::style::{clean, palette_hex, FONT_FAMILY};
use crate::ticks::{format_compact, nice_ticks};

/// One bar: the mean, and the smallest and largest of the `n` values it is the mean of.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bar {
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

/// A grouped bar chart: `values[g][s]` is group `g`'s bar of series `s` (None: no bar).
#[derive(Debug, Clone)]
pub struct Bars {
    pub title: String,
    /// The value axis' label, unit included ("obj/s", "us").
    pub y_label: String,
    /// What the groups are ("object_size"); shown under the x axis.
    pub x_label: String,
    /// The groups' labels; a `\n` breaks a label into lines (one per parameter).
    pub groups: Vec<String>,
    /// What the series are ("raid"); the legend reads "raid = 0", "raid = 1". Empty with
    /// one unnamed series: no legend.
    pub series_label: String,
    pub series: Vec<String>,
    pub values: Vec<Vec<Option<Bar>>>,
    pub width_px: u32,
    pub height_px: u32,
}

fn esc(s: &str) -> String {
    clean(s)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn text(x: f64, y: f64, size: f64, anchor: &str, extra: &str, s: &str) -> String {
    format!(
        "<text x=\"{x:.1}\" y=\"{y:.1}\" font-family=\"{FONT_FAMILY}\" font-size=\"{size}\" fill=\"#222222\" text-anchor=\"{anchor}\"{extra}>{}</text>\n",
        esc(s)
    )
}

/// The chart as a standalone SVG document (no ids, no scripts: several inline in one page).
pub fn render_bars_svg(b: &Bars) -> String {
    let (w, h) = (b.width_px.max(200) as f64, b.height_px.max(150) as f64);
    let legend = !b.series_label.is_empty() || b.series.len() > 1;
    let (left, right, top) = (64.0, 16.0, if legend { 52.0 } else { 32.0 });
    let lines = b
        .groups
        .iter()
        .map(|g| g.split('\n').count())
        .max()
        .unwrap_or(1) as f64;
    let bottom = 42.0 + 14.0 * lines;
    let (pw, ph) = (w - left - right, h - top - bottom);
    let hi = b
        .values
        .iter()
        .flatten()
        .flatten()
        .map(|v| v.max.max(v.mean))
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let ticks = nice_ticks(0.0, if hi > 0.0 { hi } else { 1.0 });
    let y = |v: f64| top + ph - (v - ticks.lo) / (ticks.hi - ticks.lo) * ph;
    let mut o = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\">\n<rect x=\"0\" y=\"0\" width=\"{w}\" height=\"{h}\" fill=\"#ffffff\"/>\n"
    );
    o += &text(left, 20.0, 14.0, "start", " font-weight=\"bold\"", &b.title);
    if legend {
        let mut lx = left;
        for (i, s) in b.series.iter().enumerate() {
            let label = if b.series_label.is_empty() {
                s.clone()
            } else {
                format!("{} = {s}", b.series_label)
            };
            o += &format!(
                "<rect x=\"{lx:.1}\" y=\"30\" width=\"12\" height=\"12\" fill=\"{}\"/>\n",
                palette_hex(i)
            );
            o += &text(lx + 16.0, 40.0, 12.0, "start", "", &label);
            lx += 16.0 + 7.5 * label.chars().count() as f64 + 18.0;
        }
    }
    // Grid and value axis.
    for t in &ticks.values {
        let ty = y(*t);
        o += &format!(
            "<line x1=\"{left}\" y1=\"{ty:.1}\" x2=\"{:.1}\" y2=\"{ty:.1}\" stroke=\"#e6e6e6\" stroke-width=\"1\"/>\n",
            left + pw
        );
        o += &text(
            left - 6.0,
            ty + 4.0,
            11.0,
            "end",
            "",
            &format_compact(*t, ticks.step),
        );
    }
    o += &format!(
        "<text x=\"14\" y=\"{:.1}\" font-family=\"{FONT_FAMILY}\" font-size=\"12\" fill=\"#666666\" text-anchor=\"middle\" transform=\"rotate(-90 14 {:.1})\">{}</text>\n",
        top + ph / 2.0,
        top + ph / 2.0,
        esc(&b.y_label)
    );
    o += &format!(
        "<rect x=\"{left}\" y=\"{top}\" width=\"{pw:.1}\" height=\"{ph:.1}\" fill=\"none\" stroke=\"#b0b0b0\" stroke-width=\"1\"/>\n"
    );
    // Bars: each group a slot, its series side by side in 80% of it.
    let ng = b.groups.len().max(1) as f64;
    let ns = b.series.len().max(1) as f64;
    let slot = pw / ng;
    let bw = slot * 0.8 / ns;
    for (g, name) in b.groups.iter().enumerate() {
        let x0 = left + slot * g as f64 + slot * 0.1;
        for (s, v) in b.values.get(g).into_iter().flatten().enumerate() {
            let Some(v) = v.filter(|v| v.mean.is_finite()) else {
                continue;
            };
            let x = x0 + bw * s as f64;
            let (yt, yb) = (y(v.mean.max(0.0)), y(0.0));
            o += &format!(
                "<rect x=\"{:.1}\" y=\"{yt:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"><title>{}</title></rect>\n",
                x + 1.0,
                (bw - 2.0).max(1.0),
                (yb - yt).max(0.0),
                palette_hex(s),
                esc(&format!(
                    "{} {}: mean {} (min {}, max {}, n {})",
                    name.replace('\n', " "),
                    b.series.get(s).map(String::as_str).unwrap_or(""),
                    format_compact(v.mean, v.mean.abs() / 1000.0),
                    format_compact(v.min, v.min.abs() / 1000.0),
                    format_compact(v.max, v.max.abs() / 1000.0),
                    v.n
                ))
            );
            if v.n > 1 && v.min.is_finite() && v.max.is_finite() {
                let cx = x + bw / 2.0;
                let (y1, y2) = (y(v.min), y(v.max));
                o += &format!(
                    "<path d=\"M{cx:.1} {y1:.1}V{y2:.1}M{:.1} {y1:.1}H{:.1}M{:.1} {y2:.1}H{:.1}\" stroke=\"#222222\" stroke-width=\"1\" fill=\"none\"/>\n",
                    cx - bw / 6.0,
                    cx + bw / 6.0,
                    cx - bw / 6.0,
                    cx + bw / 6.0
                );
            }
        }
        let cx = left + slot * (g as f64 + 0.5);
        if name.contains('\n') {
            o += &format!(
                "<text x=\"{cx:.1}\" y=\"{:.1}\" font-family=\"{FONT_FAMILY}\" font-size=\"11\" fill=\"#222222\" text-anchor=\"middle\">",
                top + ph + 16.0
            );
            for (i, l) in name.split('\n').enumerate() {
                let dy = if i == 0 { 0.0 } else { 14.0 };
                o += &format!("<tspan x=\"{cx:.1}\" dy=\"{dy}\">{}</tspan>", esc(l));
            }
            o += "</text>\n";
        } else {
            o += &text(cx, top + ph + 16.0, 11.0, "middle", "", name);
        }
    }
    o += &text(
        left + pw / 2.0,
        h - 12.0,
        12.0,
        "middle",
        " fill-opacity=\"0.8\"",
        &b.x_label,
    );
    o += "</svg>\n";
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bar(mean: f64, min: f64, max: f64, n: usize) -> Option<Bar> {
        Some(Bar { mean, min, max, n })
    }

    #[test]
    fn groups_series_and_whiskers_are_in_the_svg() {
        let b = Bars {
            title: "Avg Put Obj/s".into(),
            y_label: "obj/s".into(),
            x_label: "object_size".into(),
            groups: vec!["8k".into(), "1024k".into()],
            series_label: "raid".into(),
            series: vec!["0".into(), "1".into()],
            values: vec![
                vec![bar(1000.0, 900.0, 1100.0, 3), bar(800.0, 800.0, 800.0, 1)],
                vec![bar(50.0, 40.0, 60.0, 3), None],
            ],
            width_px: 640,
            height_px: 320,
        };
        let svg = render_bars_svg(&b);
        for label in [
            "Avg Put Obj/s",
            ">8k<",
            ">1024k<",
            "raid = 0",
            "raid = 1",
            ">obj/s<",
        ] {
            assert!(svg.contains(label), "{label} in {svg}");
        }
        assert_eq!(
            svg.matches("<rect").count(),
            2 + 2 + 3,
            "background, frame, legend x2, 3 bars"
        );
        // Whiskers only where there are repeats: 2 of the 3 bars.
        assert_eq!(svg.matches("<path").count(), 2);
        // Several parameters per group: one line each.
        let mut b2 = b.clone();
        b2.groups = vec!["nodes=1\nsync=always".into(), "nodes=3\nsync=5s".into()];
        let svg2 = render_bars_svg(&b2);
        assert!(svg2.contains(">sync=always</tspan>") && svg2.contains(">nodes=3</tspan>"));
        assert!(
            svg2.contains("<title>nodes=1 sync=always 0: mean"),
            "{svg2}"
        );
        let png = crate::svg_to_png(&svg).unwrap();
        assert_eq!(&png[1..4], b"PNG");
    }
}
