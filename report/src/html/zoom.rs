//! report.html's interactive timeline: every panel on one time axis in uPlot (from the
//! npm registry, installed by `scripts/setup`, read from disk when the report is written
//! and inlined into the page: never copied into the repository, nothing fetched).
//!
//! Drag to zoom (down to single milliseconds), double-click to reset, the buttons pan and
//! zoom out; the panels follow each other (uPlot's cursor sync and a `setScale` hook that
//! hands the x range of the chart that moved to every other one); the legend shows the
//! values under the cursor; events are dashed lines, the write bursts shaded spans.
//!
//! Data: per device, write and read MiB/s per window (`analysis::window_sums` over the window, the same
//! intervals the static timeline draws) at 1 ms while the page's points stay within
//! [`POINT_BUDGET`]; above it, at the finest of 10 ms, 100 ms, 1 s, 10 s that fits, and
//! the page says so. Then the load's rate and latency panels, page cache and CPU as the
//! static timeline has them (their own windows).
//!
//! `window.diskpulse` lets a test (or a person at the console) drive it: `zoom(t0_ms,
//! t1_ms)`, `reset()`, `titles()`, `scale(i)` (the x range of chart `i`, ms),
//! `visible(title)` (each series' `[t_ms, value]` points inside the chart's x range, read
//! from uPlot's own data), `valuesAt(title, t_ms)` (each series' value in the window holding that ms, as the
//! legend shows it).
//!
//! Without uPlot the page says so in one line and keeps the static SVG; `report` prints the
//! same line on stderr.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use charts::Timeline;

use collectors::diskstats as ds;

use super::super::run::Run;
use super::super::zoom_data::{self, num, nums, text, RawWindows, Span, RAW_NS};
use super::escape;
use ::format::envelopes::LEVELS_NS;

/// At most this many values in the page (all devices' series together).
const POINT_BUDGET: usize = 2_000_000;

/// Window widths the device series may use, finest first.
const WIDTHS_NS: [u64; 5] = [
    1_000_000,
    10_000_000,
    100_000_000,
    1_000_000_000,
    10_000_000_000,
];

/// The two files the page inlines.
const JS_FILE: &str = "uPlot.iife.min.js";
const CSS_FILE: &str = "uPlot.min.css";

/// Where `scripts/setup` installs uPlot (`npm install --prefix /usr/local/share/diskpulse`).
const SETUP_DIR: &str = "/usr/local/share/diskpulse/node_modules/uplot/dist";

/// uPlot's script and stylesheet, read from disk.
pub struct Uplot {
    pub js: String,
    pub css: String,
    pub dir: PathBuf,
}

/// Finds uPlot: `DISKPULSE_UPLOT_DIR` (a folder holding `uPlot.iife.min.js` and
/// `uPlot.min.css`, or the package folder with them under `dist/`) when set, else
/// [`SETUP_DIR`] and npm's global folders. `Err` is the one line report.html and stderr
/// show.
pub fn find_uplot() -> Result<Uplot, String> {
    let fix = "run scripts/setup (npm install --prefix /usr/local/share/diskpulse uplot@1) \
               or point DISKPULSE_UPLOT_DIR at uPlot's dist folder";
    let load = |d: &Path| -> Option<Uplot> {
        for dir in [d.to_path_buf(), d.join("dist")] {
            if let (Ok(js), Ok(css)) = (
                std::fs::read_to_string(dir.join(JS_FILE)),
                std::fs::read_to_string(dir.join(CSS_FILE)),
            ) {
                return Some(Uplot { js, css, dir });
            }
        }
        None
    };
    if let Some(d) = std::env::var_os("DISKPULSE_UPLOT_DIR") {
        let d = PathBuf::from(d);
        return load(&d).ok_or_else(|| {
            format!(
                "no interactive timeline: DISKPULSE_UPLOT_DIR={} holds no {JS_FILE} and {CSS_FILE}; {fix}",
                d.display()
            )
        });
    }
    for d in [
        SETUP_DIR,
        "/usr/local/lib/node_modules/uplot/dist",
        "/usr/lib/node_modules/uplot/dist",
    ] {
        if let Some(u) = load(Path::new(d)) {
            return Ok(u);
        }
    }
    Err(format!(
        "no interactive timeline: uPlot is not installed ({SETUP_DIR}/{JS_FILE} not found); {fix}"
    ))
}

/// The window width for the device series: the finest in [`WIDTHS_NS`] whose points
/// (`series` series over the run) fit [`POINT_BUDGET`] beside `other_points`.
fn resolution_ns(duration_ns: u64, series: usize, other_points: usize) -> u64 {
    let left = POINT_BUDGET.saturating_sub(other_points);
    for w in WIDTHS_NS {
        if series * duration_ns.div_ceil(w) as usize <= left {
            return w;
        }
    }
    WIDTHS_NS[WIDTHS_NS.len() - 1]
}

/// Panels of the static timeline the zoomable one takes as they are.
fn taken(title: &str) -> bool {
    title.starts_with("broker operations/s")
        || title.starts_with("operation latency")
        || title.starts_with("page cache")
        || title.starts_with("CPU %")
}

/// How far around a write burst its 1 ms windows are embedded in a long run's page.
const BURST_MARGIN_NS: u64 = 1_000_000_000;
/// A burst longer than this gets 1 ms windows for its first this-long only.
const BURST_MAX_NS: u64 = 20_000_000_000;

/// What the page embeds for the device charts: `layers[0]` covers the whole run, the
/// rest (long runs only) are 1 ms windows around bursts.
pub struct Embedded {
    pub layers: Vec<Span>,
    /// The bursts (`[t0, t1)` ns) whose neighbourhood holds 1 ms windows, and how many
    /// bursts the run has.
    bursts_at_1ms: Vec<(u64, u64)>,
    pub bursts: usize,
}

/// The device data the page embeds, within [`POINT_BUDGET`] beside `other` values:
/// - every 1 ms window of the run when that fits (short runs, as before);
/// - otherwise the whole run at the finest envelope level (mean, min and max MiB/s from
///   `envelopes.csv.gz`) that fits half of what is left (a run without envelopes, older
///   than them: the finest of [`WIDTHS_NS`] from the raw rows, means only), and 1 ms
///   windows around the write bursts (±[`BURST_MARGIN_NS`], in the order they happened)
///   while the rest of the budget lasts.
///
/// The raw rows are streamed from the run's files (across its chunks) one row at a time;
/// nothing here holds more than the page's values.
pub fn embedded(run: &Run, timeline: &Timeline, other: usize, devices: &[String]) -> Embedded {
    let duration = run.duration_ns.max(1);
    let left = POINT_BUDGET.saturating_sub(other);
    // The report's devices in its order (`report::order`; `report --device` keeps some).
    let busy: Vec<_> = devices
        .iter()
        .filter_map(|n| run.disks.iter().find(|d| &d.name == n))
        .filter(|d| d.busy())
        .collect();
    let per_window: usize = busy.iter().map(|d| 1 + (d.read_bytes > 0.0) as usize).sum();
    // The windows are fed from a pass of their own over the rows, one row at a time (the
    // rows are never held: report/stream.rs); devices in the pass's order are
    // `run.disks`' order, and a hole's rows without values reach the windows as such.
    let feed = |spans: &[(u64, u64)], width: u64| {
        let mut rw = RawWindows::new(spans, width, duration);
        let _ = ::format::diskstats::for_each_row_until(
            run.diskstats_files(),
            run.row_limit_ns(),
            |_, d, t, f| {
                if busy.iter().any(|b| b.name == d.name) {
                    rw.add(
                        &d.name,
                        t,
                        f.get(ds::F_SECTORS_READ),
                        f.get(ds::F_SECTORS_WRITTEN),
                    );
                }
            },
        );
        let mut spans = rw.finish();
        for sp in spans.iter_mut() {
            in_order(sp, &busy);
        }
        spans
    };
    // Every device's bursts, in the order they happened.
    let mut bursts: Vec<(u64, u64)> = timeline
        .shades
        .iter()
        .map(|b| {
            (
                (b.t0_s.max(0.0) * 1e9) as u64,
                (b.t1_s.max(0.0) * 1e9) as u64,
            )
        })
        .collect();
    bursts.sort_unstable();
    if per_window * duration.div_ceil(RAW_NS) as usize <= left {
        return Embedded {
            layers: feed(&[(0, duration)], RAW_NS),
            bursts_at_1ms: bursts.clone(),
            bursts: bursts.len(),
        };
    }
    // The whole run, in at most half the budget.
    let half = left / 2;
    let envelopes = run.dir.join(::format::envelopes::FILE);
    let mut base = None;
    if envelopes.is_file() {
        let level = LEVELS_NS
            .iter()
            .copied()
            .find(|&l| 3 * per_window * duration.div_ceil(l) as usize <= half)
            .unwrap_or(LEVELS_NS[LEVELS_NS.len() - 1]);
        if let Ok(mut sp) = zoom_data::envelope_span(&envelopes, level, 0, duration) {
            sp.devices.retain(|d| busy.iter().any(|b| b.name == d.name));
            in_order(&mut sp, &busy);
            base = Some(sp);
        }
    }
    let base = match base {
        Some(b) => b,
        None => {
            let width = resolution_ns(duration, per_window, other + half);
            feed(&[(0, duration)], width).remove(0)
        }
    };
    // 1 ms around the bursts, in the order they happened, while the budget lasts.
    let mut room = left.saturating_sub(base.values());
    let mut spans: Vec<(u64, u64)> = vec![];
    let mut chosen = vec![];
    for &(b0, b1) in &bursts {
        let a = b0.saturating_sub(BURST_MARGIN_NS);
        let b = (b1.min(b0 + BURST_MAX_NS) + BURST_MARGIN_NS).min(duration);
        let b = b.max(a);
        // Overlapping the previous neighbourhood: grow it.
        let (from, grow) = match spans.last() {
            Some(&(_, p1)) if a <= p1 => (p1, true),
            _ => (a, false),
        };
        let cost = per_window * b.saturating_sub(from).div_ceil(RAW_NS) as usize;
        if cost > room {
            break;
        }
        room -= cost;
        match spans.last_mut() {
            Some(last) if grow => last.1 = last.1.max(b),
            _ => spans.push((a, b)),
        }
        chosen.push((b0, b1));
    }
    let mut layers = vec![base];
    if !spans.is_empty() {
        layers.extend(feed(&spans, RAW_NS));
    }
    Embedded {
        layers,
        bursts_at_1ms: chosen,
        bursts: bursts.len(),
    }
}

/// A span's devices in the order of `busy` (the report's).
fn in_order(sp: &mut Span, busy: &[&crate::run::Disk]) {
    sp.devices.sort_by_key(|d| {
        busy.iter()
            .position(|b| b.name == d.name)
            .unwrap_or(usize::MAX)
    });
}

/// The page data (JSON): the device layers ([`embedded`]) of `devices` (the report's, in
/// its order), the taken panels, events and bursts; with what was embedded.
fn data_json(run: &Run, timeline: &Timeline, devices: &[String]) -> (String, Embedded) {
    let duration = run.duration_ns.max(1);
    let panels: Vec<_> = timeline.panels.iter().filter(|p| taken(&p.title)).collect();
    let other: usize = panels
        .iter()
        .flat_map(|p| p.series.iter())
        .map(|s| 2 * s.v.len())
        .sum();
    let emb = embedded(run, timeline, other, devices);
    let mut s = String::with_capacity(64 * 1024);
    let _ = write!(
        s,
        "{{\"end_s\":{},\"res_ms\":{},\"budget\":{POINT_BUDGET},\"layers\":[",
        duration as f64 / 1e9,
        emb.layers[0].level_ns as f64 / 1e6
    );
    for (i, l) in emb.layers.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        // Every busy device in every layer, so the charts have the same series.
        zoom_data::span_json(&mut s, l, true);
    }
    s.push_str("],\"panels\":[");
    for (i, p) in panels.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str("{\"title\":");
        text(&mut s, &p.title);
        s.push_str(",\"unit\":");
        text(&mut s, &p.y_label);
        s.push_str(",\"series\":[");
        for (j, x) in p.series.iter().enumerate() {
            if j > 0 {
                s.push(',');
            }
            s.push_str("{\"label\":");
            text(&mut s, &x.label);
            s.push_str(",\"color\":");
            text(&mut s, x.color.as_deref().unwrap_or("#333"));
            let _ = write!(
                s,
                ",\"dash\":{},\"t\":",
                matches!(x.style, charts::Style::DashedLine)
            );
            nums(&mut s, x.t_s.iter().copied());
            s.push_str(",\"v\":");
            nums(&mut s, x.v.iter().copied());
            s.push('}');
        }
        s.push_str("]}");
    }
    s.push_str("],\"events\":[");
    for (i, e) in timeline.events.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str("{\"t_s\":");
        num(&mut s, e.t_s);
        s.push_str(",\"label\":");
        text(&mut s, &e.label);
        s.push('}');
    }
    s.push_str("],\"bursts\":[");
    for (i, b) in timeline.shades.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push('[');
        num(&mut s, b.t0_s);
        s.push(',');
        num(&mut s, b.t1_s);
        s.push(']');
    }
    s.push_str("],\"axes\":{");
    // Per device chart: a capped y axis (completion bunching clipped) and its title.
    let mut first = true;
    for p in timeline.panels.iter() {
        let Some(name) = throughput_device(&p.title) else {
            continue;
        };
        if !first {
            s.push(',');
        }
        first = false;
        text(&mut s, name);
        s.push_str(":{\"title\":");
        text(&mut s, &p.title);
        s.push_str(",\"cap\":");
        match p.y_scale {
            charts::YScale::Capped { max } => num(&mut s, max),
            _ => s.push_str("null"),
        }
        s.push('}');
    }
    s.push_str("},\"ui_views\":[");
    let mut first = true;
    for p in timeline.panels.iter() {
        let charts::YScale::Log { floor } = p.y_scale else {
            continue;
        };
        let Some(device) = p.title.split(" write: the ").next() else {
            continue;
        };
        if !first {
            s.push(',');
        }
        first = false;
        s.push_str("{\"device\":");
        text(&mut s, device);
        s.push_str(",\"title\":");
        text(&mut s, &p.title);
        s.push_str(",\"unit\":");
        text(&mut s, &p.y_label);
        s.push_str(",\"floor\":");
        num(&mut s, floor);
        s.push_str(",\"series\":[");
        for (j, x) in p.series.iter().enumerate() {
            if j > 0 {
                s.push(',');
            }
            s.push_str("{\"label\":");
            text(&mut s, &x.label);
            s.push_str(",\"color\":");
            text(&mut s, x.color.as_deref().unwrap_or("#333"));
            let _ = write!(
                s,
                ",\"dash\":{},\"t\":",
                matches!(x.style, charts::Style::DashedLine)
            );
            nums(&mut s, x.t_s.iter().copied());
            s.push_str(",\"v\":");
            // A log axis has no 0: what is under the floor is drawn on it.
            nums(&mut s, x.v.iter().map(|v| v.max(floor)));
            s.push('}');
        }
        s.push_str("]}");
    }
    s.push_str("]}");
    (s, emb)
}

/// The device of a static timeline's throughput panel ("loop0 throughput MiB/s ...").
fn throughput_device(title: &str) -> Option<&str> {
    title.split_once(" throughput MiB/s").map(|(d, _)| d)
}

fn width_text(ns: u64) -> String {
    if ns >= 1_000_000_000 {
        format!("{} s", ns / 1_000_000_000)
    } else {
        format!("{} ms", ns / 1_000_000)
    }
}

/// The interactive timeline's HTML (a heading, a notice, the charts' container and the
/// scripts), or with `Err` from [`find_uplot`] the one-line notice.
pub fn section(
    run: &Run,
    timeline: &Timeline,
    uplot: &Result<Uplot, String>,
    devices: &[String],
) -> String {
    let mut s = String::new();
    s.push_str("<h3>Zoomable timeline</h3>\n");
    let u = match uplot {
        Ok(u) => u,
        Err(why) => {
            let _ = writeln!(
                s,
                "<p class=\"notice\" id=\"dp-zoom-missing\">{} (the static timeline above stays).</p>",
                escape(why)
            );
            return s;
        }
    };
    let (json, emb) = data_json(run, timeline, devices);
    let base = &emb.layers[0];
    let res = if base.level_ns == RAW_NS {
        "Every device series holds 1 ms windows (MiB/s over each millisecond): zoom in down \
         to single milliseconds."
            .to_string()
    } else {
        let whole = match base.source {
            zoom_data::Source::Envelopes => format!(
                "the whole run as {} windows from envelopes.csv.gz (mean, min and max MiB/s per window)",
                width_text(base.level_ns)
            ),
            zoom_data::Source::Raw => format!(
                "the whole run as {} windows (mean MiB/s per window; this run has no envelopes.csv.gz)",
                width_text(base.level_ns)
            ),
        };
        const LISTED: usize = 6;
        let mut spans: Vec<String> = emb.layers[1..]
            .iter()
            .take(LISTED)
            .map(|l| format!("{:.3}-{:.3} s", l.t0_ns as f64 / 1e9, l.t1_ns as f64 / 1e9))
            .collect();
        if emb.layers.len() - 1 > LISTED {
            let last = &emb.layers[emb.layers.len() - 1];
            spans.push(format!(
                "... {} spans in all, the last ending at {:.3} s",
                emb.layers.len() - 1,
                last.t1_ns as f64 / 1e9
            ));
        }
        let detail = if spans.is_empty() {
            "no 1 ms windows (no write burst, or none fits)".to_string()
        } else {
            format!(
                "1 ms windows around {} of the run's {} write bursts (from {} s before each to {} s after, in the order they happened): {}",
                emb.bursts_at_1ms.len(),
                emb.bursts,
                BURST_MARGIN_NS / 1_000_000_000,
                BURST_MARGIN_NS / 1_000_000_000,
                spans.join(", ")
            )
        };
        format!(
            "This run holds more 1 ms values than the page's budget of {POINT_BUDGET}: it embeds \
             {whole}, and {detail}. Zoomed in elsewhere, the page shows the finest of these that \
             covers the view; `diskpulse view RUN` serves every span down to 1 ms. The static \
             timeline above keeps every 1 ms peak in its min..max bands."
        )
    };
    let _ = write!(
        s,
        "<p class=\"muted\" id=\"dp-zoom-res\">{}</p>\n\
         <p class=\"muted\">Drag across a chart to zoom (every chart follows), double-click to \
         show the whole run again; the legend shows the values under the cursor. Dashed lines: \
         events; shaded spans: write bursts. Load, page-cache and CPU panels keep their own \
         windows. <span id=\"dp-zoom-span\"></span></p>\n\
         <p><button type=\"button\" id=\"dp-pan-left\">&#9664; pan</button> \
         <button type=\"button\" id=\"dp-pan-right\">pan &#9654;</button> \
         <button type=\"button\" id=\"dp-zoom-out\">zoom out</button> \
         <button type=\"button\" id=\"dp-reset\">whole run</button></p>\n\
         <div id=\"dp-zoom\"></div>\n<style>{}</style>\n\
         <script type=\"application/json\" id=\"dp-zoom-data\">{json}</script>\n\
         <script>{}</script>\n<script>{SCRIPT}</script>\n",
        escape(&res),
        u.css.replace("</", "<\\/"),
        u.js.replace("</script", "<\\/script"),
    );
    s
}

/// The page's own script: builds one uPlot chart per panel from `#dp-zoom-data`.
const SCRIPT: &str = r##"(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("dp-zoom-data").textContent);
  var box = document.getElementById("dp-zoom");
  var charts = [];
  var syncing = false;
  var layers = D.layers, cur_layer = null, devCharts = [];
  // Served by `diskpulse view`: deeper data is fetched for the span shown.
  var served = /^https?:$/.test(location.protocol);
  var timer = 0, pending = 0, seq = 0;
  function fmtT(v) { return v == null ? "\u2013" : v.toFixed(3) + " s"; }
  function fmtV(u, v) { return v == null ? "\u2013" : (Math.abs(v) >= 100 ? v.toFixed(1) : v.toPrecision(4)); }
  function spanText(u) {
    var el = document.getElementById("dp-zoom-span");
    var a = u.scales.x.min, b = u.scales.x.max;
    if (el && a != null) { el.textContent = "Showing " + fmtT(a) + " .. " + fmtT(b) + " (" + ((b - a) * 1000).toFixed(1) + " ms; device data in " + (cur_layer ? cur_layer.level_ms + " ms windows from " + (cur_layer.source === "raw" ? "the raw rows" : "envelopes") : D.res_ms + " ms windows") + ")."; }
  }
  function marks(u) {
    var ctx = u.ctx, bb = u.bbox;
    ctx.save();
    ctx.beginPath(); ctx.rect(bb.left, bb.top, bb.width, bb.height); ctx.clip();
    ctx.fillStyle = "rgba(214,39,40,0.10)";
    D.bursts.forEach(function (b) {
      var x0 = u.valToPos(b[0], "x", true), x1 = u.valToPos(b[1], "x", true);
      ctx.fillRect(x0, bb.top, Math.max(1, x1 - x0), bb.height);
    });
    ctx.strokeStyle = "#555"; ctx.fillStyle = "#555"; ctx.setLineDash([4, 3]);
    ctx.font = Math.round(11 * devicePixelRatio) + "px sans-serif";
    D.events.forEach(function (e) {
      var x = Math.round(u.valToPos(e.t_s, "x", true));
      ctx.beginPath(); ctx.moveTo(x, bb.top); ctx.lineTo(x, bb.top + bb.height); ctx.stroke();
      ctx.fillText(e.label, x + 3, bb.top + 12 * devicePixelRatio);
    });
    ctx.restore();
  }
  function follow(u, key) {
    if (key !== "x" || syncing) return;
    syncing = true;
    var mn = u.scales.x.min, mx = u.scales.x.max;
    charts.forEach(function (c) { if (c !== u) c.setScale("x", { min: mn, max: mx }); });
    syncing = false;
    spanText(u);
    if (!timer) timer = setTimeout(function () { timer = 0; refresh(); }, 20);
  }
  var stepped = uPlot.paths.stepped({ align: 1 });
  function windowIdx(u, i, xv) {
    var xs = u.data[0];
    while (i > 0 && xs[i] > xv) i--;
    while (i + 1 < xs.length && xs[i + 1] <= xv) i++;
    return i;
  }
  function make(title, unit, series, data, step, extra) {
    var w = Math.max(400, box.clientWidth || 1200);
    extra = extra || {};
    var opts = {
      title: extra.title || title, width: w, height: 200,
      cursor: { sync: { key: "diskpulse", setSeries: false }, drag: { x: true, y: false },
                // A window's value holds from its start to the next one's: the legend shows
                // the window the cursor is in, not the nearest start.
                dataIdx: step ? function (u, si, i, xv) { return windowIdx(u, i, xv); } : undefined },
      scales: { x: { time: false }, y: extra.y || { auto: true } },
      axes: [{ values: function (u, vs) { return vs.map(function (v) { return v.toFixed(3); }); } }, { label: unit, size: 60 }],
      series: [{ label: "t", value: function (u, v) { return fmtT(v); } }].concat(series.map(function (s) {
        return { label: s.label, stroke: s.color, width: s.dash && extra.spanGaps ? 2 : 1, dash: s.dash ? [6, 4] : undefined,
                 spanGaps: !!extra.spanGaps, paths: step ? stepped : undefined, value: fmtV };
      })),
      hooks: { setScale: [follow], draw: [marks] }
    };
    var div = document.createElement("div");
    box.appendChild(div);
    var u = new uPlot(opts, data, div);
    u.dpTitle = title;
    charts.push(u);
  }
  // A device chart's columns from a layer: x, write, write max, write min (and the
  // three read ones). Raw windows hold one value: max and min are that value. A gap
  // between envelope windows (an idle stretch's one interval ends later) is a null.
  function columns(L, name, reads) {
    var d = null;
    for (var i = 0; i < L.devices.length; i++) if (L.devices[i].name === name) d = L.devices[i];
    var n = reads ? 7 : 4, out = [];
    for (var c = 0; c < n; c++) out.push([]);
    if (!d) return out;
    var step = L.level_ms / 1000, k, m = d.write.length;
    var w = d.write, wx = d.write_max || w, wn = d.write_min || w;
    var r = d.read || null, rx = d.read_max || r, rn = d.read_min || r;
    for (k = 0; k < m; k++) {
      var x = d.t ? d.t[k] : d.t0_s + k * step;
      out[0].push(x); out[1].push(w[k]); out[2].push(wx[k]); out[3].push(wn[k]);
      if (reads) { out[4].push(r ? r[k] : 0); out[5].push(r ? rx[k] : 0); out[6].push(r ? rn[k] : 0); }
      var next = d.t ? (k + 1 < m ? d.t[k + 1] : null) : null;
      if (next != null && next - x > step * 1.5) {
        out[0].push(x + step);
        for (var c2 = 1; c2 < n; c2++) out[c2].push(null);
      }
    }
    return out;
  }
  layers[0].devices.forEach(function (d) {
    var reads = layers.some(function (L) { return L.devices.some(function (e) { return e.name === d.name && e.read; }); });
    var series = [{ label: "write MiB/s", color: "#d62728" }, { label: "write max", color: "rgba(214,39,40,0.45)", dash: true },
                  { label: "write min", color: "rgba(214,39,40,0.25)", dash: true }];
    if (reads) series.push({ label: "read MiB/s", color: "#1f77b4" }, { label: "read max", color: "rgba(31,119,180,0.45)", dash: true },
                           { label: "read min", color: "rgba(31,119,180,0.25)", dash: true });
    // A device whose 1 ms completion peaks are bunching: the y axis stops at what it
    // moved counted over its I/Os' service time (the static timeline's axis), the title says so.
    var ax = (D.axes || {})[d.name] || {}, extra = { title: ax.title };
    if (ax.cap != null) extra.y = { auto: false, range: function () { return [0, ax.cap]; } };
    make(d.name + " throughput MiB/s", "MiB/s", series, columns(layers[0], d.name, reads), true, extra);
    devCharts.push({ u: charts[charts.length - 1], name: d.name, reads: reads });
    // The UI average against the 10 ms windows of the same writes, on a log axis.
    (D.ui_views || []).forEach(function (v) {
      if (v.device !== d.name) return;
      var tables = v.series.map(function (s) { return [s.t, s.v]; });
      var top = v.floor * 10;
      v.series.forEach(function (s) { s.v.forEach(function (x) { if (x != null && x > top) top = x; }); });
      top = Math.pow(10, Math.ceil(Math.log10(top)));
      make(v.title, v.unit, v.series, uPlot.join(tables), false,
           { y: { distr: 3, log: 10, auto: false, range: function () { return [v.floor, top]; } }, spanGaps: true });
      charts[charts.length - 1].dpLog = { floor: v.floor, top: top };
    });
  });
  cur_layer = layers[0];
  function apply(L) {
    if (L === cur_layer) return;
    cur_layer = L;
    devCharts.forEach(function (c) { c.u.setData(columns(L, c.name, c.reads), false); });
    if (charts.length) spanText(charts[0]);
  }
  // The finest embedded layer that covers [a, b] (s).
  function embeddedFor(a, b) {
    var pick = layers[0];
    layers.forEach(function (L) { if (L.t0_s <= a + 1e-9 && L.t1_s >= b - 1e-9 && L.level_ms < pick.level_ms) pick = L; });
    return pick;
  }
  function px() { return Math.max(200, Math.round(box.clientWidth || 1200)); }
  function refresh() {
    if (!devCharts.length) return;
    var r = cur(), L = embeddedFor(r[0], r[1]);
    // Embedded data as fine as the width can show, or nothing finer to ask for.
    if (!served || L.level_ms <= 1 || (r[1] - r[0]) * 1000 / L.level_ms >= px() / 2) { apply(L); return; }
    var pad = (r[1] - r[0]) * 0.1, a = Math.max(0, r[0] - pad), b = Math.min(D.end_s, r[1] + pad);
    var my = ++seq;
    pending++;
    fetch("span?t0_ms=" + (a * 1000).toFixed(3) + "&t1_ms=" + (b * 1000).toFixed(3) + "&px=" + Math.round(px() * 1.2))
      .then(function (resp) { if (!resp.ok) throw new Error("span: HTTP " + resp.status); return resp.json(); })
      .then(function (S) { if (my === seq) apply(S); })
      .catch(function (e) { if (my === seq) apply(L); var el = document.getElementById("dp-zoom-span"); if (el) el.textContent += " (" + e + ")"; })
      .then(function () { pending--; });
  }
  D.panels.forEach(function (p) {
    var tables = p.series.map(function (s) { return [s.t, s.v]; });
    var data = tables.length === 1 ? tables[0] : uPlot.join(tables);
    make(p.title, p.unit, p.series, data, false);
  });
  function find(title) {
    for (var i = 0; i < charts.length; i++) if (charts[i].dpTitle === title) return charts[i];
    throw new Error("no chart titled " + title);
  }
  function zoom(t0, t1) { if (charts.length) charts[0].setScale("x", { min: t0 / 1000, max: t1 / 1000 }); }
  function cur() { var u = charts[0]; return u ? [u.scales.x.min, u.scales.x.max] : [0, D.end_s]; }
  if (!charts.length) box.textContent = "Nothing to draw: no device read or wrote, and the run has no load, page-cache or CPU series.";
  document.getElementById("dp-reset").onclick = function () { zoom(0, D.end_s * 1000); };
  document.getElementById("dp-zoom-out").onclick = function () {
    var r = cur(), m = (r[0] + r[1]) / 2, h = Math.min(D.end_s, 2 * (r[1] - r[0]));
    var a = Math.max(0, Math.min(m - h, D.end_s - 2 * h)); zoom(a * 1000, Math.min(D.end_s, a + 2 * h) * 1000);
  };
  function pan(dir) {
    var r = cur(), w = r[1] - r[0], a = Math.max(0, Math.min(D.end_s - w, r[0] + dir * w / 2));
    zoom(a * 1000, (a + w) * 1000);
  }
  document.getElementById("dp-pan-left").onclick = function () { pan(-1); };
  document.getElementById("dp-pan-right").onclick = function () { pan(1); };
  window.diskpulse = {
    resolution_ms: D.res_ms,
    served: served,
    // The device charts' current data: its window (ms) and where it came from.
    level: function () { return cur_layer ? { level_ms: cur_layer.level_ms, source: cur_layer.source, t0_s: cur_layer.t0_s, t1_s: cur_layer.t1_s } : null; },
    // Resolves once the data for the span shown is in the charts.
    settled: function () {
      return new Promise(function (res) { (function check() { if (!timer && !pending) res(); else setTimeout(check, 10); })(); });
    },
    titles: function () { return charts.map(function (u) { return u.dpTitle; }); },
    zoom: zoom,
    reset: function () { zoom(0, D.end_s * 1000); },
    scale: function (i) { var u = charts[i]; return [u.scales.x.min * 1000, u.scales.x.max * 1000]; },
    // Chart `title`'s y range and kind (distr 3: log), and where value `v` is drawn as a
    // share of the plot's height from its bottom (0..1).
    yScale: function (title) { var u = find(title); return { min: u.scales.y.min, max: u.scales.y.max, distr: u.scales.y.distr }; },
    heightOf: function (title, v) { var u = find(title), h = u.bbox.height; return (h - u.valToPos(v, "y", true) + u.bbox.top) / h; },
    visible: function (title) {
      var u = find(title), mn = u.scales.x.min, mx = u.scales.x.max, out = {};
      for (var j = 1; j < u.series.length; j++) {
        var pts = [];
        for (var k = 0; k < u.data[0].length; k++) {
          var x = u.data[0][k];
          if (x >= mn - 1e-9 && x <= mx + 1e-9) pts.push([Math.round(x * 1e6) / 1e3, u.data[j][k]]);
        }
        out[u.series[j].label] = pts;
      }
      return out;
    },
    valuesAt: function (title, tMs) {
      var u = find(title), i = windowIdx(u, u.valToIdx(tMs / 1000), tMs / 1000), out = {};
      for (var j = 1; j < u.series.length; j++) out[u.series[j].label] = u.data[j][i];
      return out;
    }
  };
  // Every chart starts on the whole run (each one's data would give its own range).
  zoom(0, D.end_s * 1000);
  if (charts.length) spanText(charts[0]);
})();"##;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_finest_width_that_fits_the_budget() {
        // 4 devices x 2 series x 10 min at 1 ms = 4.8 M: too many; 10 ms is 480 k.
        assert_eq!(resolution_ns(600_000_000_000, 8, 0), 10_000_000);
        // 60 s: 480 k at 1 ms.
        assert_eq!(resolution_ns(60_000_000_000, 8, 0), 1_000_000);
        // Other panels' points count against it.
        assert_eq!(resolution_ns(60_000_000_000, 8, 1_600_000), 10_000_000);
        // A day of 4 devices: 1 s windows (691 k).
        assert_eq!(resolution_ns(86_400_000_000_000, 8, 0), 1_000_000_000);
    }

    #[test]
    fn numbers_and_text_are_safe_json() {
        let mut s = String::new();
        nums(&mut s, [0.0, 1.5, f64::NAN, 2.0 / 3.0]);
        assert_eq!(s, "[0,1.5,null,0.666667]");
        let mut t = String::new();
        text(&mut t, "</script><b>\"x\"");
        assert!(!t.contains('<'));
        assert_eq!(
            serde_json::from_str::<String>(&t).unwrap(),
            "</script><b>\"x\""
        );
    }
}
