//! Colours, line widths and fonts: the look shared by every part of the chart.

use std::str::FromStr;

use plotters::prelude::{Color, FontDesc, FontFamily, FontStyle, RGBColor, ShapeStyle, TextStyle};
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::Series;

/// The SVG names the family; resvg (and a browser) pick the font. plotters lays no
/// text out itself (no `ttf` feature), it only writes this name.
pub(crate) const FONT_FAMILY: &str = "DejaVu Sans, sans-serif";

const PALETTE: [RGBColor; 10] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x7f, 0x7f, 0x7f),
    RGBColor(0xbc, 0xbd, 0x22),
    RGBColor(0x17, 0xbe, 0xcf),
];
/// The palette's `index`th colour (wrapping) as `#rrggbb`.
pub(crate) fn palette_hex(index: usize) -> String {
    let c = PALETTE[index % PALETTE.len()];
    format!("#{:02x}{:02x}{:02x}", c.0, c.1, c.2)
}

pub(crate) const TEXT: RGBColor = RGBColor(0x22, 0x22, 0x22);
pub(crate) const MUTED: RGBColor = RGBColor(0x66, 0x66, 0x66);
pub(crate) const GRID: RGBColor = RGBColor(0xe6, 0xe6, 0xe6);
pub(crate) const FRAME: RGBColor = RGBColor(0xb0, 0xb0, 0xb0);
pub(crate) const MARKER: RGBColor = RGBColor(0x55, 0x55, 0x55);
/// Shaded time spans ([`crate::Shade`]): a pale orange under the data.
pub(crate) const SHADE: RGBColor = RGBColor(0xff, 0xa5, 0x00);
pub(crate) const SHADE_OPACITY: f64 = 0.18;
/// How strongly a min..max band is tinted: light enough for the mean line to read
/// on top of it, dark enough for a 1-px spike to show.
pub(crate) const BAND_OPACITY: f64 = 0.4;

/// A series' colour: its own when it parses as an SVG colour ("#1f77b4", "teal"),
/// else the palette's, by the series' index in its panel.
pub(crate) fn series_color(se: &Series, index: usize) -> RGBColor {
    se.color
        .as_deref()
        .and_then(|c| svgtypes::Color::from_str(c).ok())
        .map(|c| RGBColor(c.red, c.green, c.blue))
        .unwrap_or(PALETTE[index % PALETTE.len()])
}

/// The stroke of a series' line: dashed overlays a little heavier, so they read as
/// a second layer over the data.
pub(crate) fn line_style(color: RGBColor, dashed: bool) -> ShapeStyle {
    color.stroke_width(if dashed { 2 } else { 1 })
}

/// Dash and gap lengths in pixels of a dashed series, and of the event lines.
pub(crate) const SERIES_DASH: (i32, i32) = (6, 4);
pub(crate) const MARKER_DASH: (i32, i32) = (4, 3);

/// Text `px` pixels high, anchored at its vertical middle and `h`.
pub(crate) fn font(px: f64, weight: FontStyle, color: RGBColor, h: HPos) -> TextStyle<'static> {
    TextStyle {
        // plotters' SVG backend writes `font-size` as the size divided by 1.24 (and
        // for some sizes with float noise: `13.000000000000002`, read as 13).
        font: FontDesc::new(FontFamily::Name(FONT_FAMILY), px * 1.24, weight),
        color: color.to_backend_color(),
        pos: Pos::new(h, VPos::Center),
    }
}

/// Text as plotters should get it: it escapes `<&>"'` itself, but XML 1.0 allows no
/// control characters, so those are dropped.
pub(crate) fn clean(text: &str) -> String {
    text.chars()
        .filter(|&c| (c as u32) >= 0x20 || matches!(c, '\t' | '\n' | '\r'))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_parse_or_fall_back_to_the_palette() {
        let with = |c: Option<&str>| Series {
            color: c.map(str::to_string),
            ..Series::default()
        };
        assert_eq!(
            series_color(&with(Some("#d62728")), 0),
            RGBColor(0xd6, 0x27, 0x28)
        );
        assert_eq!(
            series_color(&with(Some("teal")), 0),
            RGBColor(0, 0x80, 0x80)
        );
        assert_eq!(series_color(&with(Some("not a colour")), 1), PALETTE[1]);
        assert_eq!(series_color(&with(None), 12), PALETTE[2]);
    }

    #[test]
    fn control_characters_are_dropped() {
        assert_eq!(clean("a<b\u{1} & c\u{7f}"), "a<b & c\u{7f}");
    }
}
