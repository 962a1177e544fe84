//! `report.html`: one run as one self-contained page (inline CSS and inline SVG; no
//! fonts, nothing fetched), written by `report` beside `summary.json`. Its only scripts
//! are the zoomable timeline's ([`zoom`]: uPlot inlined from disk and our own), in
//! `report.html` only, not in the study report's sections.
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

use charts::Timeline;

mod devices;
mod events;
mod format;
mod head;
mod interference;
mod nodes;
mod results;
mod trace;
pub mod zoom;

use super::charts_build;
use super::run::Run;
use super::{ReportOptions, Summary};
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
.notice.failure { border-left-color: #d62728; background: #fbf3f3; font-size: 15px; }
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
fn run_name(run: &Run) -> String {
    run.dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| run.dir.display().to_string())
}

/// The `id` of a run's `<section>` (`run-` and the run name with anything but
/// `[A-Za-z0-9_-]` replaced by `-`), for links from a study table. Unique as long as the
/// run names are.
fn section_id(run: &Run) -> String {
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
    // A pass over the rows of its own (the run's end is known: no second one).
    let mut analyses: Vec<_> = match super::analysis_pass(run, o, true) {
        Ok((p, dur)) => p
            .devices
            .into_iter()
            .zip(p.accs)
            .map(|(d, a)| super::analyse_device(&d.name, a, run.device_why(&d.name), dur, o))
            .collect(),
        Err(_) => vec![],
    };
    super::order::arrange(&run.meta, &mut analyses, |a| &a.summary);
    charts_build::timeline(run, &analyses, o)
}

/// One run's `report.html` (what `report` writes): [`run_section`] with the zoomable
/// timeline ([`zoom`]) under the static one, or the line saying why there is none.
pub fn run_page(
    run: &Run,
    summary: &Summary,
    timeline: &Timeline,
    uplot: &Result<zoom::Uplot, String>,
) -> String {
    let names: Vec<String> = summary.devices.iter().map(|d| d.name.clone()).collect();
    let z = zoom::section(run, timeline, uplot, &names);
    page(
        &format!("diskpulse report: {}", run_name(run)),
        &[section_with(run, summary, timeline, Some(&z))],
    )
}

/// One run as an HTML fragment: header, headline, the timeline (inline SVG), check
/// findings (when the run directory has `check.json`), devices, per-window figures,
/// bursts, interference (latency inside versus outside the bursts), broker load, fsync and probe results (when recorded), memory and CPU, events
/// and sampler health. Reads `check.json`, `fsync.csv` and `probe.csv` from the run
/// directory if they are there.
pub fn run_section(run: &Run, summary: &Summary, timeline: &Timeline) -> String {
    section_with(run, summary, timeline, None)
}

/// [`run_section`] with `after_timeline` (HTML) right after the static timeline.
fn section_with(
    run: &Run,
    summary: &Summary,
    timeline: &Timeline,
    after_timeline: Option<&str>,
) -> String {
    let mut s = String::with_capacity(256 * 1024);
    let _ = write!(
        s,
        "<section class=\"run\" id=\"{}\">\n<h2>{}</h2>\n",
        escape(&section_id(run)),
        escape(&run_name(run))
    );
    head::header(&mut s, run, summary);
    head::headline(&mut s, summary);
    head::notices(&mut s, run, summary);
    s.push_str("<h3>Timeline</h3>\n<figure class=\"timeline\">\n");
    s.push_str(&charts::render_svg(timeline));
    let _ = write!(
        s,
        "\n<figcaption>One time axis (seconds since the run's start). Light bands are each pixel \
         column's min..max, so a 1 ms burst stays visible; lines are means. Dashed over throughput: \
         the {} UI average. Dashed vertical lines: events. Shaded spans: the write bursts of \
         the broker's devices (of every device when the run does not say which).</figcaption>\n</figure>\n",
        escape(&secs(summary.ui_window_s))
    );
    if let Some(z) = after_timeline {
        s.push_str(z);
    }
    nodes::section(&mut s, run);
    head::check_findings(&mut s, &run.dir);
    devices::devices(&mut s, run, summary);
    devices::windows(&mut s, summary);
    devices::bursts(&mut s, summary);
    interference::interference(&mut s, summary);
    trace::broker_io(&mut s, summary);
    trace::trace(&mut s, summary);
    results::load(&mut s, run, summary);
    results::faults(&mut s, summary);
    results::fsync(&mut s, &run.fsync);
    if let Some(p) = &run.probe {
        results::probe(&mut s, p);
    }
    results::memory_cpu(&mut s, summary);
    events::events(&mut s, run);
    events::samplers(&mut s, summary);
    s.push_str("</section>\n");
    s
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
        assert_eq!(
            devices::active_scheduler("none [mq-deadline] kyber"),
            "mq-deadline"
        );
        assert_eq!(head::shell_quote("--out"), "--out");
        assert_eq!(head::shell_quote("a b"), "'a b'");
        assert_eq!(head::shell_quote("it's"), r"'it'\''s'");
        assert_eq!(head::shell_quote(""), "''");
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
