//! Rasterizes the chart's own SVG with `resvg`, so the PNG and the SVG look the same.
//!
//! Fonts come from the system (`fontdb::Database::load_system_fonts`: on Linux the
//! fontconfig directories, e.g. `/usr/share/fonts`), loaded once per process. The SVG
//! asks for "DejaVu Sans, sans-serif"; when DejaVu is missing, the generic sans-serif
//! is pointed at whatever family is installed; with no fonts at all the image still
//! renders, without its text.

use std::sync::{Arc, OnceLock};

use resvg::tiny_skia;
use resvg::usvg::{self, fontdb};

use crate::{render_svg, ChartError, Timeline};

/// Renders the timeline to PNG bytes (8-bit RGBA, white background). The image is as
/// wide and high as the SVG from [`render_svg`] says.
pub fn render_png(t: &Timeline) -> Result<Vec<u8>, ChartError> {
    svg_to_png(&render_svg(t))
}

/// Rasterizes an SVG document (e.g. from [`render_svg`]) at one pixel per SVG unit.
pub fn svg_to_png(svg: &str) -> Result<Vec<u8>, ChartError> {
    let options = usvg::Options {
        fontdb: fonts(),
        ..usvg::Options::default()
    };
    let tree = usvg::Tree::from_str(svg, &options).map_err(|e| ChartError::Svg {
        message: e.to_string(),
    })?;
    let size = tree.size().to_int_size();
    let (width_px, height_px) = (size.width(), size.height());
    let mut pixmap = tiny_skia::Pixmap::new(width_px, height_px).ok_or(ChartError::ImageSize {
        width_px,
        height_px,
    })?;
    resvg::render(
        &tree,
        tiny_skia::Transform::identity(),
        &mut pixmap.as_mut(),
    );
    pixmap.encode_png().map_err(|e| ChartError::PngEncode {
        message: e.to_string(),
    })
}

/// The system's fonts, loaded on first use (loading scans the font directories).
fn fonts() -> Arc<fontdb::Database> {
    static FONTS: OnceLock<Arc<fontdb::Database>> = OnceLock::new();
    FONTS
        .get_or_init(|| {
            let mut db = fontdb::Database::new();
            db.load_system_fonts();
            let has = |family: &str| {
                db.faces()
                    .any(|f| f.families.iter().any(|(name, _)| name == family))
            };
            // fontdb's generic sans-serif is "Arial"; make it one that exists.
            let fallback = ["DejaVu Sans", "Liberation Sans", "Noto Sans", "FreeSans"]
                .into_iter()
                .find(|f| has(f))
                .map(str::to_string)
                .or_else(|| {
                    db.faces()
                        .find_map(|f| f.families.first().map(|(name, _)| name.clone()))
                });
            if let Some(family) = fallback {
                db.set_sans_serif_family(family);
            }
            Arc::new(db)
        })
        .clone()
}
