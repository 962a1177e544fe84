//! `STUDY/report.html`: the study's answers, its invalid runs, the tables, the charts of
//! the figures that vary, then every run (its status, its headline and interference
//! sentences, where its own report.html is), in one self-contained file (nothing linked
//! or loaded). Rendered from the same [`Page`] as study.md.

use std::path::Path;

use super::study_charts::StudyChart;
use super::study_page::{Page, Table};
use format::study::StudyRun;
use format::summary::Summary;
use report::html::escape as esc;

/// One run on the study page: its status (and why it is invalid), its headline and
/// interference sentences from its summary.json, and where its own report is. The run's
/// timeline is not inlined: at ~0.7 MB of SVG a run it made a 6-run study page 4.3 MB;
/// its own report.html (timeline, zoomable chart, tables) is beside this page, named and
/// not linked, so the page stays self-contained.
fn run_fragment(study: &Path, r: &StudyRun) -> String {
    let dir = study.join(&r.dir);
    let mut o = format!(
        "<h3>{} r{} ({})</h3>\n",
        esc(&r.cell),
        r.repeat,
        esc(&r.status)
    );
    if let Some(why) = &r.invalid {
        o.push_str(&format!("<p class=\"fail\">INVALID: {}</p>\n", esc(why)));
    }
    if let Some(e) = &r.error {
        o.push_str(&format!("<p class=\"fail\">{}</p>\n", esc(e)));
    }
    match Summary::read(&dir) {
        Ok(Some(s)) => {
            let lines: Vec<&String> = s
                .headline
                .iter()
                .chain(s.interference.iter().flat_map(|i| &i.lines))
                .collect();
            if !lines.is_empty() {
                o.push_str("<ul>\n");
                for l in lines {
                    o.push_str(&format!("<li>{}</li>\n", esc(l)));
                }
                o.push_str("</ul>\n");
            }
        }
        Ok(None) => o.push_str("<p class=\"muted\">no summary.json</p>\n"),
        Err(e) => o.push_str(&format!(
            "<p class=\"fail\">no summary: {}</p>\n",
            esc(&format!("{e:#}"))
        )),
    }
    if dir.join("report.html").exists() {
        o.push_str(&format!(
            "<p class=\"muted\">Its timeline and tables: {}/report.html beside this page.</p>\n",
            esc(&r.dir)
        ));
    }
    o
}

/// The study page's own rules (the run sections use the report's stylesheet).
const STUDY_CSS: &str = "section.answers li { font-size: 15px; margin: 5px 0; } \
li.distinguishable { font-weight: 600; } .fail { color: #b00020; } \
div.study-charts { display: flex; flex-wrap: wrap; gap: 8px 24px; } \
figure.study-chart { margin: 0; max-width: 760px; } \
figure.study-chart svg { max-width: 100%; height: auto; } \
figure.study-chart figcaption { color: #666; font-size: 12.5px; }";

fn table_html(t: &Table) -> String {
    let mut o = String::from("<table><tr>");
    for c in &t.header {
        o.push_str(&format!("<th>{}</th>", esc(c)));
    }
    o.push_str("</tr>\n");
    for r in &t.rows {
        o.push_str("<tr>");
        for c in r {
            o.push_str(&format!("<td>{}</td>", esc(c)));
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</table>\n");
    o
}

/// The answers: per question its heading and its verdicts, the ones that could not be
/// given and why, then how they were made.
fn answers_section(p: &Page) -> String {
    if p.questions.is_empty() {
        return String::new();
    }
    let mut o = String::from("<section class=\"answers\">\n<h2>Answers</h2>\n");
    for q in &p.questions {
        o.push_str(&format!("<h3>{}</h3>\n<ul>\n", esc(&q.heading)));
        for v in &q.verdicts {
            let class = match v.distinguishable {
                Some(true) => "distinguishable",
                Some(false) => "not-distinguishable",
                None => "no-noise",
            };
            o.push_str(&format!(
                "<li class=\"verdict {class}\">{}</li>\n",
                esc(&v.line)
            ));
        }
        for u in &q.unanswered {
            o.push_str(&format!("<li class=\"unanswered fail\">{}</li>\n", esc(u)));
        }
        o.push_str("</ul>\n");
    }
    o.push_str(&format!(
        "<p class=\"muted\">{}</p>\n</section>\n",
        esc(&p.method)
    ));
    o
}

/// The charts section: each figure's bar chart inline (the page stays self-contained:
/// no links; the caption names the PNG/SVG files).
fn charts_section(charts_: &[StudyChart]) -> String {
    if charts_.is_empty() {
        return String::new();
    }
    let mut o = String::from("<h2>Charts</h2>\n<div class=\"study-charts\">\n");
    for c in charts_ {
        o.push_str(&format!(
            "<figure class=\"study-chart\">{}<figcaption>{} (also charts/{k}.png and charts/{k}.svg beside this page)</figcaption></figure>\n",
            c.svg,
            esc(&c.title),
            k = c.key
        ));
    }
    o.push_str("</div>\n");
    o
}

/// The whole study page, rendered from the same [`Page`] as study.md: the title, the
/// answers, the invalid runs, the tables, the charts (two a row on a wide screen), then
/// every run.
pub fn study_page(study: &Path, p: &Page, charts_: &[StudyChart], runs: &[StudyRun]) -> String {
    let mut body = format!(
        "<style>{STUDY_CSS}</style>\n<p>{}</p>\n<p>{}</p>\n",
        esc(&p.description),
        esc(&p.runs_line)
    );
    body.push_str(&answers_section(p));
    if !p.invalid.is_empty() {
        body.push_str("<h2>Invalid runs, left out of every figure</h2>\n");
        for l in &p.invalid {
            body.push_str(&format!("<p class=\"fail\">{}</p>\n", esc(l)));
        }
    }
    // The tables (a few columns: they fit a screen) before the charts, which are long.
    body.push_str(&format!("<h2>{}</h2>\n", esc(&p.cells_heading)));
    body.push_str(&table_html(&p.cells));
    for b in &p.by {
        body.push_str(&format!("<h2>{}</h2>\n", esc(&b.heading)));
        body.push_str(&table_html(&b.table));
    }
    body.push_str(&format!("<p class=\"muted\">{}</p>\n", esc(&p.full_note)));
    body.push_str(&charts_section(charts_));
    if !p.failed.is_empty() {
        body.push_str("<h2>Runs that did not finish</h2>\n");
        for l in &p.failed {
            body.push_str(&format!("<p class=\"fail\">{}</p>\n", esc(l)));
        }
    }
    body.push_str("<h2>Runs</h2>\n");
    for r in runs {
        body.push_str(&run_fragment(study, r));
    }
    report::html::page(&format!("diskpulse study: {}", p.title), &[body])
}
