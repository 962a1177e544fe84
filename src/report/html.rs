//! `report.html`: one run as one self-contained page (inline CSS and inline SVG; no
//! scripts, no fonts, nothing fetched), written by `report` beside `summary.json`.
//!
//! The page is built from fragments so the study report can put several runs on one
//! page: [`run_section`] is one run's HTML (a `<section>` whose headings start at `<h2>`,
//! with no ids but its own [`section_id`]), and [`page`] wraps fragments in the document
//! with the stylesheet. The timeline is the same [`Timeline`] as `timeline.svg`;
//! `charts::render_svg` gives SVG without ids, urls or scripts, so any number of them can
//! be inlined side by side.
//!
//! What must stay true: every piece of text that comes from a recording (argv, device
//! names, models, event details, check messages, fsync reasons) goes through [`escape`];
//! every number carries its unit; a missing value is shown as "–", never as 0.

use std::fmt::Write as _;
use std::path::Path;

use charts::Timeline;
use serde_json::Value;

mod format;

use super::analysis::MIB;
use super::charts_build;
use super::run::Run;
use super::{DeviceSummary, Direction, ReportOptions, Summary};
use crate::format::fsync::FsyncRow;
use crate::format::probe::ProbeRow;
use format::*;

/// Escapes text for HTML element content and double- or single-quoted attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Control characters (other than tab and newline) are not allowed in HTML text.
            c if c.is_control() && c != '\t' && c != '\n' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// The stylesheet [`page`] embeds; the classes [`run_section`] uses.
pub const CSS: &str = r#"
:root { color-scheme: light; }
body { font-family: "DejaVu Sans", "Helvetica Neue", Arial, sans-serif; font-size: 14px;
  color: #222; background: #fff; margin: 0 auto; padding: 16px 24px 48px; max-width: 1640px; }
h1 { font-size: 22px; margin: 8px 0 12px; }
h2 { font-size: 19px; margin: 28px 0 8px; padding-top: 8px; border-top: 2px solid #ccc; }
h3 { font-size: 15px; margin: 22px 0 6px; }
h4 { font-size: 13px; margin: 14px 0 4px; font-weight: normal; }
section.run { margin-bottom: 40px; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 6px 0 12px; }
dl.meta dt { color: #666; }
dl.meta dd { margin: 0; overflow-wrap: anywhere; }
td code { white-space: nowrap; }
code, .mono { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 12.5px; }
.headline { border-left: 4px solid #d62728; background: #fbf3f3; padding: 6px 12px; margin: 10px 0; }
.headline p { margin: 4px 0; font-size: 15px; }
.notice { border-left: 4px solid #b8860b; background: #fff8e1; padding: 6px 12px; margin: 8px 0; }
.muted { color: #666; }
figure.timeline { margin: 8px 0; }
figure.timeline svg { display: block; width: 100%; height: auto; border: 1px solid #ddd; }
figure.timeline figcaption { color: #666; font-size: 12.5px; margin-top: 4px; }
table { border-collapse: collapse; margin: 4px 0 10px; font-size: 13px; }
th, td { padding: 3px 8px; border-bottom: 1px solid #e4e4e4; text-align: left; vertical-align: top; }
th { background: #f4f4f4; font-weight: 600; white-space: nowrap; }
td.num, th.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
tr.lvl-pass td { background: #e8f5e9; }
tr.lvl-info td { background: #eef3f8; }
tr.lvl-warn td { background: #fff4cc; }
tr.lvl-fail td { background: #fde0dd; }
span.lvl { font-weight: bold; }
tr.lvl-pass span.lvl { color: #1b6e2a; }
tr.lvl-warn span.lvl { color: #8a5a00; }
tr.lvl-fail span.lvl { color: #b00020; }
tr.lvl-info span.lvl { color: #355f8a; }
details summary { cursor: pointer; color: #355f8a; margin: 4px 0; }
"#;

/// A whole HTML document: `title` as the page title and `<h1>`, then the fragments in
/// order (e.g. a study table, then one [`run_section`] per run).
pub fn page(title: &str, body_fragments: &[String]) -> String {
    let mut s = String::with_capacity(body_fragments.iter().map(|f| f.len()).sum::<usize>() + 8192);
    let t = escape(title);
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"generator\" content=\"diskpulse {}\">\n<title>{t}</title>\n<style>{CSS}</style>\n\
         </head>\n<body>\n<h1>{t}</h1>\n",
        env!("CARGO_PKG_VERSION")
    );
    for f in body_fragments {
        s.push_str(f);
        s.push('\n');
    }
    s.push_str("</body>\n</html>\n");
    s
}

/// The run's name: its directory's last component.
pub fn run_name(run: &Run) -> String {
    run.dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| run.dir.display().to_string())
}

/// The `id` of a run's `<section>` (`run-` and the run name with anything but
/// `[A-Za-z0-9_-]` replaced by `-`), for links from a study table. Unique as long as the
/// run names are.
pub fn section_id(run: &Run) -> String {
    let n: String = run_name(run)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("run-{n}")
}

/// The timeline of a run when the caller has no [`super::DeviceAnalysis`] at hand (the
/// study report): analyses every device again and builds the same chart as
/// `timeline.svg`.
pub fn timeline(run: &Run, o: &ReportOptions) -> Timeline {
    let analyses: Vec<_> = run
        .disks
        .iter()
        .map(|d| super::analyse_device(d, run.device_why(&d.name), run.duration_ns, o))
        .collect();
    charts_build::timeline(run, &analyses, o)
}

/// One run's `report.html` (what `report` writes).
pub fn run_page(run: &Run, summary: &Summary, timeline: &Timeline) -> String {
    page(
        &format!("diskpulse report: {}", run_name(run)),
        &[run_section(run, summary, timeline)],
    )
}

/// One run as an HTML fragment: header, headline, the timeline (inline SVG), check
/// findings (when the run directory has `check.json`), devices, per-window figures,
/// bursts, broker load, fsync and probe results (when recorded), memory and CPU, events
/// and sampler health. Reads `check.json`, `fsync.csv` and `probe.csv` from the run
/// directory if they are there.
pub fn run_section(run: &Run, summary: &Summary, timeline: &Timeline) -> String {
    let mut s = String::with_capacity(256 * 1024);
    let _ = write!(
        s,
        "<section class=\"run\" id=\"{}\">\n<h2>{}</h2>\n",
        escape(&section_id(run)),
        escape(&run_name(run))
    );
    header(&mut s, run, summary);
    headline(&mut s, summary);
    notices(&mut s, run, summary);
    s.push_str("<h3>Timeline</h3>\n<figure class=\"timeline\">\n");
    s.push_str(&charts::render_svg(timeline));
    let _ = write!(
        s,
        "\n<figcaption>One time axis (seconds since the run's start). Light bands are each pixel \
         column's min..max, so a 1 ms burst stays visible; lines are means. Dashed over throughput: \
         the {} UI average. Dashed vertical lines: events.</figcaption>\n</figure>\n",
        escape(&secs(summary.ui_window_s))
    );
    check_findings(&mut s, &run.dir);
    devices(&mut s, run, summary);
    windows(&mut s, summary);
    bursts(&mut s, summary);
    load(&mut s, run, summary);
    fsync(&mut s, &run.fsync);
    if let Some(p) = &run.probe {
        probe(&mut s, p);
    }
    memory_cpu(&mut s, summary);
    events(&mut s, run);
    samplers(&mut s, summary);
    s.push_str("</section>\n");
    s
}

// ---- the parts of a run section ----

/// Shell-style quoting for display: an argument with anything unusual in single quotes.
fn shell_quote(a: &str) -> String {
    let plain = !a.is_empty()
        && a.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./:=,@%+-".contains(c));
    if plain {
        a.to_string()
    } else {
        format!("'{}'", a.replace('\'', r"'\''"))
    }
}

fn wall_time(raw: &str) -> String {
    match chrono::DateTime::parse_from_rfc3339(raw) {
        Ok(t) => t
            .with_timezone(&chrono::Utc)
            .format("%Y-%m-%d %H:%M:%S%.3f UTC")
            .to_string(),
        Err(_) => raw.to_string(),
    }
}

fn header(s: &mut String, run: &Run, summary: &Summary) {
    let m = &run.meta;
    let mut rows: Vec<(&str, String)> = vec![
        ("run", run.dir.display().to_string()),
        ("host", m.host.clone()),
        ("kernel", m.kernel.clone()),
        ("start", wall_time(&m.start_wall)),
        ("duration", secs(summary.duration_s)),
    ];
    if let Some(b) = m.broker() {
        let mut d = format!("nats-server {}", b.version.as_deref().unwrap_or(NONE));
        if let Some(sync) = &b.sync {
            let _ = write!(d, ", sync {sync}");
        }
        if let Some(dir) = &b.store_dir {
            let _ = write!(d, ", store {dir}");
        }
        rows.push(("broker", d));
    }
    rows.push(("recorded by", format!("diskpulse {}", m.version)));
    s.push_str("<dl class=\"meta\">\n");
    for (k, v) in rows {
        let _ = writeln!(s, "<dt>{}</dt><dd>{}</dd>", escape(k), escape(&v));
    }
    if !m.argv.is_empty() {
        let line: Vec<String> = m.argv.iter().map(|a| shell_quote(a)).collect();
        let _ = writeln!(
            s,
            "<dt>command</dt><dd><code>{}</code></dd>",
            escape(&line.join(" "))
        );
    }
    s.push_str("</dl>\n");
}

fn headline(s: &mut String, summary: &Summary) {
    if summary.headline.is_empty() {
        s.push_str("<p class=\"muted\">No writes recorded on any device.</p>\n");
        return;
    }
    s.push_str("<div class=\"headline\">\n");
    for h in &summary.headline {
        let _ = writeln!(s, "<p>{}</p>", escape(h));
    }
    s.push_str("</div>\n");
}

fn notices(s: &mut String, run: &Run, summary: &Summary) {
    if !run.meta.complete {
        s.push_str(
            "<p class=\"notice\">The recording did not close cleanly (crash or kill): the figures \
             cover what was written up to its last whole row.</p>\n",
        );
    }
    if summary.error_events > 0 {
        let _ = writeln!(
            s,
            "<p class=\"notice\">{} error event(s) during the run: see Events below.</p>",
            summary.error_events
        );
    }
}

fn check_findings(s: &mut String, dir: &Path) {
    let p = dir.join("check.json");
    if !p.exists() {
        return;
    }
    s.push_str("<h3>Check findings</h3>\n");
    let doc: Option<Value> = std::fs::read(&p)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    let Some(findings) = doc.as_ref().and_then(|d| d["findings"].as_array()) else {
        s.push_str(
            "<p class=\"notice\">check.json is here but is not <code>diskpulse check --json</code> \
             output.</p>\n",
        );
        return;
    };
    let d = doc.as_ref().unwrap();
    let c = &d["counts"];
    if c.is_object() {
        let _ = writeln!(
            s,
            "<p>{} FAIL, {} WARN, {} PASS, {} INFO (<code>diskpulse check</code> run before or during the recording).</p>",
            text(&c["fail"]),
            text(&c["warn"]),
            text(&c["pass"]),
            text(&c["info"])
        );
    }
    let rows: Vec<_> = findings
        .iter()
        .map(|x| {
            let level = x["level"].as_str().unwrap_or("INFO").to_ascii_uppercase();
            let class = match level.as_str() {
                "PASS" => "lvl-pass",
                "WARN" => "lvl-warn",
                "FAIL" => "lvl-fail",
                _ => "lvl-info",
            };
            let place = [x["target"].as_str(), x["device"].as_str()]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(" / ");
            let advice = x["advice"].as_str().unwrap_or("");
            (
                Some(class),
                vec![
                    Cell::H(format!("<span class=\"lvl\">{}</span>", escape(&level))),
                    Cell::H(format!("<code>{}</code>", escape(&text(&x["code"])))),
                    t(if place.is_empty() {
                        "machine".into()
                    } else {
                        place
                    }),
                    t(text(&x["message"])),
                    t(if advice.is_empty() {
                        String::new()
                    } else {
                        format!("→ {advice}")
                    }),
                ],
            )
        })
        .collect();
    table(s, &["level", "code", "where", "finding", "advice"], &rows);
}

/// The scheduler in use: the bracketed entry of sysfs `scheduler` ("none [mq-deadline]").
fn active_scheduler(raw: &str) -> String {
    match (raw.find('['), raw.find(']')) {
        (Some(a), Some(b)) if b > a => raw[a + 1..b].to_string(),
        _ => raw.to_string(),
    }
}

fn devices(s: &mut String, run: &Run, summary: &Summary) {
    s.push_str("<h3>Devices</h3>\n");
    let meta_devs = &run.meta.devices;
    let mut names: Vec<String> = meta_devs.iter().map(|d| d.name.clone()).collect();
    for d in &summary.devices {
        if !names.contains(&d.name) {
            names.push(d.name.clone());
        }
    }
    if names.is_empty() {
        s.push_str("<p class=\"muted\">No devices recorded.</p>\n");
        return;
    }
    let rows: Vec<_> = names
        .iter()
        .map(|name| {
            let m = meta_devs.iter().find(|d| &d.name == name);
            let sd = summary.devices.iter().find(|d| &d.name == name);
            let qs = |k: &str| m.and_then(|m| m.queue.get(k)).map(|v| v.trim().to_string());
            let yes_no = |k: &str| match qs(k).as_deref() {
                Some("1") => "yes".to_string(),
                Some("0") => "no".to_string(),
                Some(v) => v.to_string(),
                None => NONE.into(),
            };
            let model = [qs("vendor"), qs("model")]
                .into_iter()
                .flatten()
                .filter(|v| !v.is_empty())
                .collect::<Vec<_>>()
                .join(" ");
            let size = qs("size_sectors")
                .and_then(|v| v.parse::<f64>().ok())
                .map(|x| bytes(x * 512.0))
                .unwrap_or_else(|| NONE.into());
            let mut why = m
                .and_then(|m| m.why.clone())
                .or_else(|| sd.and_then(|d| d.why.clone()))
                .unwrap_or_default();
            if let Some(p) = m.and_then(|m| m.parent.as_deref()) {
                let _ = write!(why, " (on {p})");
            }
            if let Some(b) = qs("loop_backing_file") {
                let _ = write!(why, " (backing file {b})");
            }
            let idle = sd.is_some_and(|d| d.write.bytes == 0.0 && d.read.bytes == 0.0);
            vec![
                t(name.clone()),
                n(m.map(|m| format!("{}:{}", m.major, m.minor))
                    .unwrap_or_else(|| NONE.into())),
                t(if idle { format!("{why} (idle)") } else { why }),
                t(qs("write_cache").unwrap_or_else(|| NONE.into())),
                t(yes_no("fua")),
                t(yes_no("rotational")),
                t(qs("scheduler")
                    .map(|v| active_scheduler(&v))
                    .unwrap_or_else(|| NONE.into())),
                t(if model.is_empty() { NONE.into() } else { model }),
                n(size),
                n(sd.map(|d| pct(d.util_pct)).unwrap_or_else(|| NONE.into())),
                n(sd.map(|d| num(d.max_in_flight, 0))
                    .unwrap_or_else(|| NONE.into())),
                n(sd.and_then(|d| d.flushes)
                    .map(|x| num(x, 0))
                    .unwrap_or_else(|| NONE.into())),
            ]
        })
        .map(|r| (None, r))
        .collect();
    table(
        s,
        &[
            "device",
            "#maj:min",
            "why recorded",
            "write_cache",
            "fua",
            "rotational",
            "scheduler",
            "model",
            "#size",
            "#busy (io_ms)",
            "#max in flight",
            "#flushes",
        ],
        &rows,
    );
}

fn windows(s: &mut String, summary: &Summary) {
    let ui = secs(summary.ui_window_s);
    let _ = writeln!(
        s,
        "<h3>Per-window figures</h3>\n<p class=\"muted\">Peaks are the highest rate over aligned \
         windows of that width; the UI average is the highest {ui} average (what an array's UI \
         draws); the hidden factor is the 10 ms peak over it.</p>"
    );
    let mut rows = vec![];
    for d in &summary.devices {
        for (label, x) in [("write", &d.write), ("read", &d.read)] {
            if label == "read" && x.bytes == 0.0 {
                continue;
            }
            rows.push((None, window_row(d, label, x)));
        }
    }
    if rows.is_empty() {
        s.push_str("<p class=\"muted\">No devices recorded.</p>\n");
        return;
    }
    let ui_head = format!("#UI avg ({ui})");
    table(
        s,
        &[
            "device",
            "dir",
            "#total",
            "#I/Os",
            "#mean",
            "#peak 1 ms",
            "#peak 10 ms",
            "#peak 100 ms",
            "#peak 1 s",
            &ui_head,
            "#hidden factor",
            "#peak IOPS (10 ms)",
            "#await",
        ],
        &rows,
    );
}

fn window_row(d: &DeviceSummary, label: &str, x: &Direction) -> Vec<Cell> {
    vec![
        t(d.name.clone()),
        t(label),
        n(bytes(x.bytes)),
        n(num(x.ios, 0)),
        n(rate(x.mean_mib_s)),
        n(rate(x.peak_mib_s.p1ms)),
        n(rate(x.peak_mib_s.p10ms)),
        n(rate(x.peak_mib_s.p100ms)),
        n(rate(x.peak_mib_s.p1s)),
        n(rate(x.ui_average_mib_s)),
        n(x.hidden_factor
            .filter(|h| h.is_finite())
            .map(|h| format!("{}x", sig(h)))
            .unwrap_or_else(|| NONE.into())),
        n(per_s(x.peak_iops_10ms, "IO")),
        n(x.await_ms
            .map(|a| us(a * 1e3))
            .unwrap_or_else(|| NONE.into())),
    ]
}

/// Rows shown per burst table; the rest are in summary.json.
const MAX_BURST_ROWS: usize = 200;

fn bursts(s: &mut String, summary: &Summary) {
    s.push_str("<h3>Bursts</h3>\n");
    let mut any = false;
    for d in &summary.devices {
        for (label, x) in [("write", &d.write), ("read", &d.read)] {
            let b = &x.bursts;
            if b.count == 0 {
                continue;
            }
            any = true;
            let mut line = format!("{} {label}: {} burst(s)", d.name, b.count);
            if let Some(p) = b.period_s {
                let _ = write!(
                    line,
                    " every {} ({}, cv {})",
                    secs(p),
                    if b.regular { "regular" } else { "irregular" },
                    sig(opt(b.period_cv))
                );
            }
            let _ = write!(
                line,
                "; {} per burst over {} on average; {} of the {label} bytes. Busy: 10 ms bins above {}.",
                bytes(opt(b.mean_bytes)),
                us(opt(b.mean_duration_ms) * 1e3),
                pct(100.0 * b.share_of_bytes),
                rate(b.threshold_mib_s)
            );
            let _ = writeln!(s, "<h4>{}</h4>", escape(&line));
            let rows: Vec<_> = b
                .list
                .iter()
                .take(MAX_BURST_ROWS)
                .enumerate()
                .map(|(i, x)| {
                    (
                        None,
                        vec![
                            n(num(i as f64 + 1.0, 0)),
                            n(format!("{} s", num(x.start_s, 3))),
                            n(us(x.duration_ms * 1e3)),
                            n(bytes(x.bytes)),
                            n(rate(x.peak_mib_s)),
                        ],
                    )
                })
                .collect();
            table(
                s,
                &["##", "#start", "#duration", "#bytes", "#peak (10 ms)"],
                &rows,
            );
            if b.list.len() > MAX_BURST_ROWS {
                let _ = writeln!(
                    s,
                    "<p class=\"muted\">{} more in summary.json.</p>",
                    b.list.len() - MAX_BURST_ROWS
                );
            }
        }
    }
    if !any {
        s.push_str("<p class=\"muted\">No bursts found on any device.</p>\n");
    }
}

fn load(s: &mut String, run: &Run, summary: &Summary) {
    if summary.load.is_empty() {
        return;
    }
    s.push_str("<h3>Broker load</h3>\n");
    let meta_roles = run.meta.load().map(|l| l.roles).unwrap_or_default();
    let rows: Vec<_> = summary
        .load
        .iter()
        .map(|(role, l)| {
            let m = meta_roles.iter().find(|r| &r.role == role);
            let lat = m.and_then(|m| m.lat_us.as_ref());
            (
                None,
                vec![
                    t(role.clone()),
                    n(m.and_then(|m| m.clients)
                        .map(|c| c.to_string())
                        .unwrap_or_else(|| NONE.into())),
                    n(num(l.ops as f64, 0)),
                    n(per_s(l.ops_per_s, "op")),
                    n(rate(if l.ops > 0 { l.mib_per_s } else { f64::NAN })),
                    n(num(l.errors as f64, 0)),
                    t(m.and_then(|m| m.latency_meaning.clone())
                        .unwrap_or_else(|| NONE.into())),
                    n(us(opt(lat.and_then(|l| l.p50)))),
                    n(us(opt(lat.and_then(|l| l.p99)))),
                    n(us(opt(l.worst_window_lat_p99_us))),
                    n(us(opt(l.lat_max_us))),
                    n(us(opt(l.worst_window_co_p99_us))),
                ],
            )
        })
        .collect();
    table(
        s,
        &[
            "role",
            "#clients",
            "#ops",
            "#rate",
            "#payload",
            "#errors",
            "latency is",
            "#p50 (run)",
            "#p99 (run)",
            "#worst 100 ms p99",
            "#max",
            "#worst p99 from intended start",
        ],
        &rows,
    );
}

fn fsync(s: &mut String, rows: &[FsyncRow]) {
    if rows.is_empty() {
        return;
    }
    s.push_str(
        "<h3>fsync tests</h3>\n<p class=\"muted\">From fsync.csv (<code>diskpulse fsync</code> in \
         the recording): latency per op is the writes and the sync together.</p>\n",
    );
    let rows: Vec<_> = rows
        .iter()
        .map(|r| {
            (
                (r.status != "ok").then_some("lvl-info"),
                vec![
                    Cell::H(format!("<code>{}</code>", escape(&r.test))),
                    t(r.status.clone()),
                    n(format!("{} s", num(r.t_ns as f64 / 1e9, 3))),
                    n(if r.measured.is_some() {
                        secs(r.t_end_ns.saturating_sub(r.t_ns) as f64 / 1e9)
                    } else {
                        NONE.into()
                    }),
                    n(num(
                        r.measured.as_ref().map_or(f64::NAN, |m| m.ops as f64),
                        0,
                    )),
                    n(per_s(
                        r.measured.as_ref().map_or(f64::NAN, |m| m.ops_per_s),
                        "op",
                    )),
                    n(us(r.lat(|l| l.p50))),
                    n(us(r.lat(|l| l.p99))),
                    n(us(r.lat(|l| l.max))),
                    n(us(r.sync_lat(|l| l.p50))),
                    n(us(r.sync_lat(|l| l.p99))),
                    t(r.reason.clone()),
                ],
            )
        })
        .collect();
    table(
        s,
        &[
            "test",
            "status",
            "#start",
            "#took",
            "#ops",
            "#rate",
            "#p50",
            "#p99",
            "#max",
            "#sync call p50",
            "#sync call p99",
            "note",
        ],
        &rows,
    );
}

fn probe(s: &mut String, p: &std::collections::BTreeMap<String, Vec<ProbeRow>>) {
    s.push_str(
        "<h3>Direct-I/O probe</h3>\n<p class=\"muted\">From probe.csv (<code>diskpulse probe</code> \
         in the recording), all windows including ramp; latency is completion latency (sync: the \
         sync call).</p>\n",
    );
    let rows: Vec<_> = p
        .iter()
        .map(|(direction, tab)| {
            let lat = |q: &str| -> Vec<f64> {
                tab.iter()
                    .map(|r| charts_build::probe_lat(r, q))
                    .filter(|x| x.is_finite())
                    .collect()
            };
            let max = |v: Vec<f64>| v.into_iter().fold(f64::NAN, f64::max);
            let median = |mut v: Vec<f64>| {
                v.sort_by(|a, b| a.total_cmp(b));
                v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
            };
            let span_s = tab.iter().map(|r| r.active_ns).sum::<u64>() as f64 / 1e9;
            let ios = tab.iter().map(|r| r.ios).sum::<u64>() as f64;
            let bytes_sum = tab.iter().map(|r| r.bytes).sum::<u64>() as f64;
            // Sync rows count sync calls and move no data.
            let sync = direction == "sync";
            let data = |x: String| if sync { NONE.to_string() } else { x };
            (
                None,
                vec![
                    t(direction.clone()),
                    n(num(tab.len() as f64, 0)),
                    n(num(ios, 0)),
                    n(data(bytes(bytes_sum))),
                    n(per_s(ios / span_s, if sync { "sync" } else { "IO" })),
                    n(data(rate(bytes_sum / MIB / span_s))),
                    n(us(median(lat("p50")))),
                    n(us(max(lat("p99")))),
                    n(us(max(lat("max")))),
                ],
            )
        })
        .collect();
    table(
        s,
        &[
            "direction",
            "#windows",
            "#I/Os (syncs)",
            "#bytes",
            "#rate",
            "#throughput",
            "#median window p50",
            "#worst window p99",
            "#max",
        ],
        &rows,
    );
}

fn memory_cpu(s: &mut String, summary: &Summary) {
    let mut parts = vec![];
    if let Some(m) = &summary.memory {
        parts.push(format!(
            "page cache: Dirty up to {}, Writeback up to {}",
            bytes(opt(m.dirty_max_mib) * MIB),
            bytes(opt(m.writeback_max_mib) * MIB)
        ));
    }
    if let Some(c) = &summary.cpu {
        parts.push(format!(
            "CPU (all cores, whole run): user {}, system {}, iowait {}, idle {}",
            pct(c.user_pct),
            pct(c.system_pct),
            pct(c.iowait_pct),
            pct(c.idle_pct)
        ));
    }
    if parts.is_empty() {
        return;
    }
    s.push_str("<h3>Memory and CPU</h3>\n<ul>\n");
    for p in parts {
        let _ = writeln!(s, "<li>{}</li>", escape(&p));
    }
    s.push_str("</ul>\n");
}

/// Events too chatty for the table (one per client connect/close).
const QUIET_EVENTS: [&str; 1] = ["nats_client"];
const MAX_EVENT_ROWS: usize = 300;

fn events(s: &mut String, run: &Run) {
    let shown: Vec<_> = run
        .events
        .iter()
        .filter(|e| !QUIET_EVENTS.contains(&e.kind.as_str()))
        .collect();
    if shown.is_empty() {
        return;
    }
    let errors = shown.iter().any(|e| e.kind == "error");
    let _ = writeln!(
        s,
        "<h3>Events</h3>\n<details{}>\n<summary>{} event(s){}</summary>",
        if errors { " open" } else { "" },
        shown.len(),
        if errors { ", errors among them" } else { "" }
    );
    let rows: Vec<_> = shown
        .iter()
        .take(MAX_EVENT_ROWS)
        .map(|e| {
            let detail = match &e.detail {
                Value::Object(m) if m.is_empty() => String::new(),
                Value::Null => String::new(),
                d => d.to_string(),
            };
            (
                (e.kind == "error").then_some("lvl-fail"),
                vec![
                    n(format!("{} s", num(e.t_ns as f64 / 1e9, 3))),
                    t(e.kind.clone()),
                    Cell::H(format!("<span class=\"mono\">{}</span>", escape(&detail))),
                ],
            )
        })
        .collect();
    table(s, &["#t", "kind", "detail"], &rows);
    if shown.len() > MAX_EVENT_ROWS {
        let _ = writeln!(
            s,
            "<p class=\"muted\">{} more in events.jsonl.</p>",
            shown.len() - MAX_EVENT_ROWS
        );
    }
    s.push_str("</details>\n");
}

fn samplers(s: &mut String, summary: &Summary) {
    let map = &summary.samplers;
    if map.is_empty() {
        return;
    }
    s.push_str(
        "<h3>Sampler health</h3>\n<p class=\"muted\">Samples taken against the number the \
         interval asks for over the run, and how late each read was against its deadline.</p>\n",
    );
    let rows: Vec<_> = map
        .iter()
        .map(|(name, v)| {
            let st = v.stats.as_ref();
            let x = |f: fn(&crate::format::meta::SamplerStats) -> f64| st.map_or(f64::NAN, f);
            let samples = x(|s| s.samples as f64);
            let expected = x(|s| s.expected as f64);
            let share = if expected > 0.0 {
                format!(" ({})", pct(100.0 * samples / expected))
            } else {
                String::new()
            };
            let rt = match st.map(|s| s.realtime_priority) {
                Some(true) => "yes",
                Some(false) => "no",
                None => NONE,
            };
            let source = v.source.clone().unwrap_or_else(|| v.file.clone());
            (
                None,
                vec![
                    t(name.clone()),
                    t(source),
                    n(us(v.interval_us as f64)),
                    n(format!(
                        "{} of {}{share}",
                        num(samples, 0),
                        num(expected, 0)
                    )),
                    n(num(x(|s| s.skipped as f64), 0)),
                    n(us(x(|s| s.jitter_p50_us))),
                    n(us(x(|s| s.jitter_p99_us))),
                    n(us(x(|s| s.jitter_max_us))),
                    n(pct(100.0 * x(|s| s.cpu_share_of_core))),
                    t(rt),
                ],
            )
        })
        .collect();
    table(
        s,
        &[
            "sampler",
            "source",
            "#interval",
            "#samples",
            "#skipped",
            "#jitter p50",
            "#jitter p99",
            "#jitter max",
            "#CPU of one core",
            "real-time",
        ],
        &rows,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            escape(r#"<script>alert('x')</script> & "y""#),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;y&quot;"
        );
        assert_eq!(escape("a\u{1}b"), "a\u{fffd}b");
    }

    #[test]
    fn argv_is_shown_as_a_shell_would_take_it() {
        assert_eq!(active_scheduler("none [mq-deadline] kyber"), "mq-deadline");
        assert_eq!(shell_quote("--out"), "--out");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn a_page_wraps_fragments_and_escapes_its_title() {
        let p = page("a <b>", &["<p>one</p>".into(), "<p>two</p>".into()]);
        assert!(p.starts_with("<!DOCTYPE html>"));
        assert!(p.contains("<title>a &lt;b&gt;</title>"));
        assert!(p.find("<p>one</p>").unwrap() < p.find("<p>two</p>").unwrap());
        assert!(!p.contains("<script"));
    }
}
