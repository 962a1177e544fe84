//! Draws diskpulse's timelines from plain series: several panels, one shared time
//! axis, rendered to a standalone SVG string and to PNG bytes.
//!
//! # Decision: plotters draws, the envelope stays ours
//! [plotters](https://docs.rs/plotters/0.3.7) (only its `svg_backend`) draws every
//! element: it builds one chart per panel, maps values to pixels, draws the grid, the
//! tick labels, the unit along the y axis, the time axis under the bottom panel, and
//! writes the bands, lines, frames, legends and event markers as SVG. `resvg` then
//! rasterizes that same SVG, so `timeline.png` is `timeline.svg` pixel for pixel.
//!
//! What stays ours, and why:
//! - **The envelope** ([`envelope`], `shape.rs`): plotters has no min/max
//!   downsampling; handing it 600,000 points would either average them away or write a
//!   600,000-point polyline. We reduce to one column per pixel and give plotters the
//!   band as polygons and the means as a line.
//! - **The ticks** ([`nice_ticks`], [`time_ticks`]): plotters' float axes stop at the
//!   data (the top line goes unlabelled) and count time in 1-2-5 seconds; ours widen
//!   the axis to whole ticks and count in 15 s, 1 min, 5 min, labelled `m:ss`. They
//!   reach plotters as its key points (`axis.rs`).
//! - **The stacking** (`layout.rs`): panels, the rows of event labels and the
//!   horizontal legend in each panel's title strip. plotters' legend is a box inside the
//!   plot, where it would cover data (a spike, at worst).
//! - **Text layout**: none of either. The SVG names the font family and resvg (or the
//!   browser) lays the text out with the system's fonts; plotters' `ttf` feature
//!   (font-kit) is off.
//!
//! plotters' SVG backend writes integer pixel coordinates and integer stroke widths:
//! lines are 1 px (dashed overlays 2 px) and a band column is exactly one pixel wide.
//!
//! This crate knows nothing of `/proc`, NATS or recordings. The caller hands it
//! [`Series`] of `(t_s, v)` pairs and gets an image back.
//!
//! # Units
//! - Time is **seconds since the run's start** (`t_s`, `x_range_s`, `Marker::t_s`), as
//!   `f64`. The caller converts from the recording's `t_ns`.
//! - Values are in whatever unit the panel's `y_label` names (MiB/s, IOPS, ms, ...);
//!   the chart only formats them (`1.2k`, `3.4M`).
//! - Sizes are pixels (`width_px`, `panel_height_px`). The image is
//!   `width_px` wide and `panels * panel_height_px + margins` high.
//! - A value that is NaN (or infinite) means "no value": it is skipped, and it breaks
//!   the line instead of being drawn as zero.
//!
//! # Charts never hide a spike
//! A series of 600,000 one-millisecond samples drawn 1,500 pixels wide puts ~400
//! samples in each pixel column. Averaging them would turn a single 1 ms burst at
//! 1 GiB/s into a 2.5 MiB/s bump. So [`envelope`] keeps, per pixel column, the
//! **min, max and mean** (and the count); the renderer draws min..max as a light band
//! (a polygon covering one 1-px bar per column) and the mean as a line. The band
//! reaches the exact peak (to the pixel) of any sample, so a burst stays visible at
//! any zoom. This holds for every [`Style`] once a series has more points than the
//! plot has room for (more than two per column); below that the points are drawn as
//! they are, which hides nothing either.
//!
//! In a downsampled series, a pixel column with no values breaks the line (a gap);
//! in a series drawn point by point, a NaN breaks it.
//!
//! # Output
//! The SVG is plotters' and standalone: no external references, no scripts, no `id`s
//! or classes (so several charts can be inlined into one HTML page), fonts named by
//! family (`DejaVu Sans, sans-serif`) and no XML prolog. [`render_png`] rasterizes that
//! same SVG with `resvg`, using the system's fonts (see [`render_png`]).

mod area;
mod axis;
mod bars;
mod envelope;
mod layout;
mod panel;
mod png;
mod shape;
mod style;
mod svg;
mod ticks;

pub use bars::{render_bars_svg, Bar, Bars};
pub use envelope::{envelope, Column};
pub use png::{render_png, svg_to_png};
pub use svg::render_svg;
pub use ticks::{format_compact, nice_ticks};

/// A multi-panel chart whose panels share one time axis.
#[derive(Debug, Clone)]
pub struct Timeline {
    pub title: String,
    /// Shared time axis in seconds since run start, `(start, end)`. If it is not a
    /// finite, increasing pair (e.g. the default `(0, 0)`), the span of all series'
    /// times is used instead.
    pub x_range_s: (f64, f64),
    pub panels: Vec<Panel>,
    /// Vertical dashed lines across all panels, labelled above the first panel.
    pub events: Vec<Marker>,
    /// Spans of time shaded in every panel, under the data (e.g. a device's write
    /// bursts), so one can see what else happened inside them.
    pub shades: Vec<Shade>,
    /// Image width; at least 200 is used.
    pub width_px: u32,
    /// Height of each panel including its title strip; at least 60 is used.
    pub panel_height_px: u32,
}

impl Default for Timeline {
    fn default() -> Self {
        Timeline {
            title: String::new(),
            x_range_s: (0.0, 0.0),
            panels: Vec::new(),
            events: Vec::new(),
            shades: Vec::new(),
            width_px: 1600,
            panel_height_px: 180,
        }
    }
}

/// One horizontal strip of the timeline with its own y axis.
#[derive(Debug, Clone)]
pub struct Panel {
    /// Shown at the panel's top left, e.g. "vda write MiB/s".
    pub title: String,
    /// The values' unit, shown along the y axis, e.g. "MiB/s".
    pub y_label: String,
    pub series: Vec<Series>,
    /// The y axis includes 0 (starts at 0 for non-negative data).
    pub y_min_zero: bool,
    /// How values map to the y axis: linear over the data (the default), linear up to a
    /// cap, or logarithmic.
    pub y_scale: YScale,
}

impl Default for Panel {
    /// An empty panel whose y axis starts at zero (what rates and counts want).
    fn default() -> Self {
        Panel {
            title: String::new(),
            y_label: String::new(),
            series: Vec::new(),
            y_min_zero: true,
            y_scale: YScale::Linear,
        }
    }
}

/// A panel's value axis (issue 23 items 6 and 8: a spike that is not a rate must not
/// flatten the rest, and a 30 s average must be readable beside 10 ms bursts).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum YScale {
    /// Linear, widened from the data's range to whole ticks.
    #[default]
    Linear,
    /// Linear, its top at the first whole tick at or above `max` when the data reach
    /// higher: a value above it is drawn at the top edge (clipped). The caller says what
    /// was clipped (in the title).
    Capped { max: f64 },
    /// Logarithmic in decades, from `floor` (rounded down to a power of ten) to the
    /// data's top: a value at or below the floor (0 included) is drawn on the floor.
    Log { floor: f64 },
}

/// One line (or envelope) in a panel. `t_s` and `v` are paired by index; extra
/// elements of the longer one are ignored. Times should be ascending for the
/// point-by-point drawing of short series; the downsampler does not care.
#[derive(Debug, Clone, Default)]
pub struct Series {
    /// Shown in the panel's legend; an empty label is left out of it.
    pub label: String,
    /// Seconds since run start.
    pub t_s: Vec<f64>,
    /// NaN = no value.
    pub v: Vec<f64>,
    pub style: Style,
    /// Any SVG colour, e.g. "#1f77b4" or "teal"; `None` (or a string that is no
    /// colour) picks from a palette by the series' index in its panel.
    pub color: Option<String>,
    /// The series already folded into the plot's pixel columns ([`Series::fold`]):
    /// then `t_s` and `v` are empty and this is drawn, exactly what the points gave.
    pub folded: Option<Folded>,
}

/// A long series folded into pixel columns ahead of drawing, so a timeline of hours at
/// 1 ms holds `columns` numbers per series instead of every point.
#[derive(Debug, Clone, PartialEq)]
pub struct Folded {
    /// The time axis and column count it was folded for ([`plot_geometry`]).
    pub range: (f64, f64),
    pub columns: usize,
    /// [`envelope`] of the points.
    pub cols: Vec<Column>,
}

impl Series {
    /// Folds the series into `columns` pixel columns over `range` when it would be
    /// downsampled there anyway (more than two points per column in range): the
    /// drawing is the same, the points are dropped. A short series is left as it is.
    /// `range` and `columns` are the plot's ([`plot_geometry`]); a series folded for
    /// another geometry is drawn from nothing (empty).
    pub fn fold(mut self, range: (f64, f64), columns: usize) -> Series {
        if shape::is_dense(&self, range, columns) {
            let n = self.t_s.len().min(self.v.len());
            let cols = envelope(&self.t_s[..n], &self.v[..n], range.0, range.1, columns);
            self.t_s = Vec::new();
            self.v = Vec::new();
            self.folded = Some(Folded {
                range,
                columns,
                cols,
            });
        }
        self
    }
}

/// [`Series::fold`] done as the points arrive, without holding them: a series of hours
/// at 1 ms takes `columns` columns (and at most `2 * columns` points while it may still
/// turn out short). [`Folding::finish`] gives exactly the series `fold` gives from the
/// same points pushed in the same order (issue 13 item 3: the report reads its rows as a
/// stream).
#[derive(Debug, Clone)]
pub struct Folding {
    range: (f64, f64),
    columns: usize,
    in_range: usize,
    /// The points while the series may still be short (not dense).
    raw: Option<(Vec<f64>, Vec<f64>)>,
    min: Vec<f64>,
    max: Vec<f64>,
    sum: Vec<f64>,
    n: Vec<usize>,
    cols_per_s: f64,
}

impl Folding {
    /// A fold over `range` in `columns` pixel columns ([`plot_geometry`]).
    pub fn new(range: (f64, f64), columns: usize) -> Folding {
        let (t0, t1) = range;
        let valid = columns > 0 && t0.is_finite() && t1.is_finite() && t1 > t0;
        let c = if valid { columns } else { 0 };
        Folding {
            range,
            columns,
            in_range: 0,
            raw: Some((Vec::new(), Vec::new())),
            min: vec![f64::INFINITY; c],
            max: vec![f64::NEG_INFINITY; c],
            sum: vec![0.0; c],
            n: vec![0; c],
            cols_per_s: if valid {
                columns as f64 / (t1 - t0)
            } else {
                0.0
            },
        }
    }

    /// The time axis it folds over.
    pub fn range(&self) -> (f64, f64) {
        self.range
    }

    /// The pixel columns it folds into.
    pub fn columns(&self) -> usize {
        self.columns
    }

    /// The next point (NaN value: no value, as in [`Series::v`]).
    #[inline]
    pub fn push(&mut self, t: f64, v: f64) {
        let (t0, t1) = self.range;
        let inside = t >= t0 && t <= t1;
        if inside {
            self.in_range += 1;
        }
        if let Some((ts, vs)) = &mut self.raw {
            if self.in_range > self.columns * shape::RAW_POINTS_PER_COLUMN {
                self.raw = None;
            } else {
                ts.push(t);
                vs.push(v);
            }
        }
        if !self.n.is_empty() && inside && v.is_finite() {
            let i = (((t - t0) * self.cols_per_s) as usize).min(self.n.len() - 1);
            if v < self.min[i] {
                self.min[i] = v;
            }
            if v > self.max[i] {
                self.max[i] = v;
            }
            self.sum[i] += v;
            self.n[i] += 1;
        }
    }

    /// `series` (its label, style and colour) with the points pushed: folded when they
    /// are dense, else the points themselves.
    pub fn finish(self, mut series: Series) -> Series {
        if self.in_range > self.columns * shape::RAW_POINTS_PER_COLUMN {
            let (t0, t1) = self.range;
            let c = self.n.len();
            let width_s = (t1 - t0) / c.max(1) as f64;
            let cols = (0..c)
                .map(|i| {
                    let t_mid = t0 + (i as f64 + 0.5) * width_s;
                    if self.n[i] == 0 {
                        Column {
                            t_mid,
                            min: f64::NAN,
                            max: f64::NAN,
                            mean: f64::NAN,
                            n: 0,
                        }
                    } else {
                        Column {
                            t_mid,
                            min: self.min[i],
                            max: self.max[i],
                            mean: self.sum[i] / self.n[i] as f64,
                            n: self.n[i],
                        }
                    }
                })
                .collect();
            series.t_s = Vec::new();
            series.v = Vec::new();
            series.folded = Some(Folded {
                range: self.range,
                columns: self.columns,
                cols,
            });
        } else if let Some((t, v)) = self.raw {
            series.t_s = t;
            series.v = v;
        }
        series
    }
}

/// The time axis `(t0, t1)` and the number of pixel columns the plots of `t` get: what
/// [`Series::fold`] needs. Set `x_range_s` (and `width_px`) first: without a valid
/// `x_range_s` the axis comes from the series' own times.
pub fn plot_geometry(t: &Timeline) -> ((f64, f64), usize) {
    let l = layout::Layout::of(t);
    (l.range, l.columns())
}

/// How a series is drawn. Whatever the style, a downsampled series also shows its
/// per-column min..max band (see the crate docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Style {
    /// Min..max band plus the mean as a line: the default for raw high-rate data.
    #[default]
    Envelope,
    /// A plain line through the points (or column means).
    Line,
    /// Each value holds until the next sample (step-after).
    Step,
    /// A dashed line, e.g. the "30 s UI average" overlay.
    DashedLine,
    /// A vertical mark from the axis's floor to the value at every point, no line
    /// between them: discrete events such as one fsync call each (its height its
    /// duration). Downsampled, a pixel column gets one mark to its highest value, so
    /// the slowest call of a column is the one seen; every mark is at least 2 px tall.
    Stems,
}

/// A labelled instant drawn as a vertical dashed line across all panels.
#[derive(Debug, Clone, Default)]
pub struct Marker {
    /// Seconds since run start.
    pub t_s: f64,
    /// Short text, e.g. "restart n2".
    pub label: String,
}

/// A span of time shaded across every panel: `[t0_s, t1_s]`, seconds since run start.
/// A span outside the time range is clipped to it; one that is not finite or not
/// increasing is left out.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Shade {
    pub t0_s: f64,
    pub t1_s: f64,
}

/// What can go wrong turning a chart into PNG bytes. (SVG rendering cannot fail.)
#[derive(Debug, thiserror::Error)]
pub enum ChartError {
    #[error("the chart's SVG could not be parsed for rasterizing: {message}")]
    Svg { message: String },
    #[error("cannot allocate a {width_px}x{height_px} pixel image (zero or too large)")]
    ImageSize { width_px: u32, height_px: u32 },
    #[error("encoding the PNG failed: {message}")]
    PngEncode { message: String },
}

#[cfg(test)]
mod folding_tests {
    use super::*;

    fn same(a: &Series, b: &Series) -> bool {
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let cols = |s: &Series| {
            s.folded.as_ref().map(|f| {
                (
                    f.range,
                    f.columns,
                    f.cols
                        .iter()
                        .map(|c| {
                            (
                                c.t_mid.to_bits(),
                                c.min.to_bits(),
                                c.max.to_bits(),
                                c.mean.to_bits(),
                                c.n,
                            )
                        })
                        .collect::<Vec<_>>(),
                )
            })
        };
        bits(&a.t_s) == bits(&b.t_s) && bits(&a.v) == bits(&b.v) && cols(a) == cols(b)
    }

    #[test]
    fn folding_as_points_arrive_is_fold() {
        let mut x = 0x1234_5678_9abc_def1u64;
        for (n, columns) in [
            (0usize, 10usize),
            (5, 10),
            (20, 10),
            (21, 10),
            (5000, 37),
            (100, 0),
        ] {
            let mut t = vec![];
            let mut v = vec![];
            for i in 0..n {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                t.push(i as f64 * 0.01 - 0.05);
                v.push(if x.is_multiple_of(11) {
                    f64::NAN
                } else {
                    (x % 1000) as f64 / 7.0
                });
            }
            let range = (0.0, n as f64 * 0.01 * 0.9);
            let whole = Series {
                t_s: t.clone(),
                v: v.clone(),
                ..Default::default()
            }
            .fold(range, columns);
            let mut f = Folding::new(range, columns);
            for (a, b) in t.iter().zip(&v) {
                f.push(*a, *b);
            }
            let streamed = f.finish(Series::default());
            assert!(same(&whole, &streamed), "n {n} columns {columns}");
        }
    }
}
