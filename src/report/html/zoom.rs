//! report.html's interactive timeline: every panel on one time axis in uPlot (from the
//! npm registry, installed by `scripts/setup`, read from disk when the report is written
//! and inlined into the page: never copied into the repository, nothing fetched).
//!
//! Drag to zoom (down to single milliseconds), double-click to reset, the buttons pan and
//! zoom out; the panels follow each other (uPlot's cursor sync and a `setScale` hook that
//! hands the x range of the chart that moved to every other one); the legend shows the
//! values under the cursor; events are dashed lines, the write bursts shaded spans.
//!
//! Data: per device, write and read MiB/s per window (`analysis::window_rates`, the same
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

use super::super::analysis::MIB;
use super::super::run::Run;
use super::escape;

/// At most this many values in the page (all devices' series together).
pub const POINT_BUDGET: usize = 2_000_000;

/// Window widths the device series may use, finest first.
pub const WIDTHS_NS: [u64; 5] = [
    1_000_000,
    10_000_000,
    100_000_000,
    1_000_000_000,
    10_000_000_000,
];

/// The two files the page inlines.
pub const JS_FILE: &str = "uPlot.iife.min.js";
pub const CSS_FILE: &str = "uPlot.min.css";

/// Where `scripts/setup` installs uPlot (`npm install --prefix /usr/local/share/diskpulse`).
pub const SETUP_DIR: &str = "/usr/local/share/diskpulse/node_modules/uplot/dist";

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
pub fn resolution_ns(duration_ns: u64, series: usize, other_points: usize) -> u64 {
    let left = POINT_BUDGET.saturating_sub(other_points);
    for w in WIDTHS_NS {
        if series * duration_ns.div_ceil(w) as usize <= left {
            return w;
        }
    }
    WIDTHS_NS[WIDTHS_NS.len() - 1]
}

fn num(s: &mut String, v: f64) {
    if !v.is_finite() {
        s.push_str("null");
    } else if v == 0.0 {
        s.push('0');
    } else {
        let t = format!("{v:.6}");
        let t = t.trim_end_matches('0').trim_end_matches('.');
        s.push_str(t);
    }
}

fn nums(s: &mut String, v: impl IntoIterator<Item = f64>) {
    s.push('[');
    for (i, x) in v.into_iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        num(s, x);
    }
    s.push(']');
}

/// A JSON string safe inside `<script>` (no `<`, so no `</script>`).
fn text(s: &mut String, t: &str) {
    let j = serde_json::to_string(t).unwrap_or_else(|_| "\"\"".into());
    s.push_str(&j.replace('<', "\\u003c").replace('>', "\\u003e"));
}

/// Panels of the static timeline the zoomable one takes as they are.
fn taken(title: &str) -> bool {
    title.starts_with("broker operations/s")
        || title.starts_with("operation latency")
        || title.starts_with("page cache")
        || title.starts_with("CPU %")
}

/// The page data (JSON): devices at the chosen resolution, the taken panels, events and
/// bursts.
pub fn data_json(run: &Run, timeline: &Timeline) -> (String, u64) {
    let duration = run.duration_ns.max(1);
    // One device's intervals at a time (an hour of 1 ms rows is ~48 bytes an interval a
    // device): which devices moved bytes first, their intervals again when written out.
    let busy: Vec<_> = run.disks.iter().filter(|d| d.busy()).collect();
    let panels: Vec<_> = timeline.panels.iter().filter(|p| taken(&p.title)).collect();
    let other: usize = panels
        .iter()
        .flat_map(|p| p.series.iter())
        .map(|s| 2 * s.v.len())
        .sum();
    let width = resolution_ns(duration, 2 * busy.len(), other);
    let mut s = String::with_capacity(64 * 1024);
    let _ = write!(
        s,
        "{{\"end_s\":{},\"res_ms\":{},\"budget\":{POINT_BUDGET},\"devices\":[",
        duration as f64 / 1e9,
        width as f64 / 1e6
    );
    // The windows `report`'s pass over the rows kept (or a pass of their own), per busy
    // device in the same order (report/stream.rs: the rows are not held).
    let rates = run.busy_window_rates(width).unwrap_or_default();
    for (i, (name, w, r)) in rates.into_iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str("{\"name\":");
        text(&mut s, &name);
        let _ = write!(s, ",\"step_s\":{},\"write\":", width as f64 / 1e9);
        nums(&mut s, w.into_iter().map(|x| x / MIB));
        s.push_str(",\"read\":");
        if let Some(r) = r {
            nums(&mut s, r.into_iter().map(|x| x / MIB));
        } else {
            s.push_str("null");
        }
        s.push('}');
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
    s.push_str("]}");
    (s, width)
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
pub fn section(run: &Run, timeline: &Timeline, uplot: &Result<Uplot, String>) -> String {
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
    let (json, width) = data_json(run, timeline);
    let res = if width == WIDTHS_NS[0] {
        "Every device series holds 1 ms windows (MiB/s over each millisecond): zoom in down \
         to single milliseconds."
            .to_string()
    } else {
        format!(
            "This run holds more 1 ms values than the page's budget of {POINT_BUDGET} points: \
             the device series hold {} windows (mean MiB/s per window), so the deepest zoom \
             shows {} steps. The static timeline above keeps every 1 ms peak in its min..max bands.",
            width_text(width),
            width_text(width)
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
  function fmtT(v) { return v == null ? "\u2013" : v.toFixed(3) + " s"; }
  function fmtV(u, v) { return v == null ? "\u2013" : (Math.abs(v) >= 100 ? v.toFixed(1) : v.toPrecision(4)); }
  function spanText(u) {
    var el = document.getElementById("dp-zoom-span");
    var a = u.scales.x.min, b = u.scales.x.max;
    if (el && a != null) { el.textContent = "Showing " + fmtT(a) + " .. " + fmtT(b) + " (" + ((b - a) * 1000).toFixed(1) + " ms; device data in " + D.res_ms + " ms windows)."; }
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
  }
  var stepped = uPlot.paths.stepped({ align: 1 });
  function windowIdx(u, i, xv) {
    var xs = u.data[0];
    while (i > 0 && xs[i] > xv) i--;
    while (i + 1 < xs.length && xs[i + 1] <= xv) i++;
    return i;
  }
  function make(title, unit, series, data, step) {
    var w = Math.max(400, box.clientWidth || 1200);
    var opts = {
      title: title, width: w, height: 200,
      cursor: { sync: { key: "diskpulse", setSeries: false }, drag: { x: true, y: false },
                // A window's value holds from its start to the next one's: the legend shows
                // the window the cursor is in, not the nearest start.
                dataIdx: step ? function (u, si, i, xv) { return windowIdx(u, i, xv); } : undefined },
      scales: { x: { time: false } },
      axes: [{ values: function (u, vs) { return vs.map(function (v) { return v.toFixed(3); }); } }, { label: unit, size: 60 }],
      series: [{ label: "t", value: function (u, v) { return fmtT(v); } }].concat(series.map(function (s) {
        return { label: s.label, stroke: s.color, width: 1, dash: s.dash ? [6, 4] : undefined, spanGaps: false,
                 paths: step ? stepped : undefined, value: fmtV };
      })),
      hooks: { setScale: [follow], draw: [marks] }
    };
    var div = document.createElement("div");
    box.appendChild(div);
    var u = new uPlot(opts, data, div);
    u.dpTitle = title;
    charts.push(u);
  }
  D.devices.forEach(function (d) {
    var n = d.write.length, x = new Array(n);
    for (var k = 0; k < n; k++) x[k] = k * d.step_s;
    var series = [{ label: "write MiB/s", color: "#d62728" }], data = [x, d.write];
    if (d.read) { series.push({ label: "read MiB/s", color: "#1f77b4" }); data.push(d.read); }
    make(d.name + " throughput MiB/s", "MiB/s", series, data, true);
  });
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
    titles: function () { return charts.map(function (u) { return u.dpTitle; }); },
    zoom: zoom,
    reset: function () { zoom(0, D.end_s * 1000); },
    scale: function (i) { var u = charts[i]; return [u.scales.x.min * 1000, u.scales.x.max * 1000]; },
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
