//! `STUDY/report.html`: the study's charts and tables, then every run's section (its aligned timeline
//! and tables), in one self-contained file.

use std::path::Path;

use super::study_charts::StudyChart;
use crate::format::study::StudyRun;
use crate::report::html::escape as esc;
use crate::report::{self, ReportOptions};

/// One run's section for the study page (its timeline, tables, findings), or a line
/// saying why there is none.
fn run_fragment(dir: &Path, label: &str) -> String {
    let o = ReportOptions::default();
    match report::analyse(dir, &o) {
        Ok((run, analyses, summary)) => {
            let tl = report::charts_build::timeline(&run, &analyses, &o);
            format!(
                "<h2>{}</h2>\n{}",
                esc(label),
                report::html::run_section(&run, &summary, &tl)
            )
        }
        Err(e) => format!(
            "<h2>{}</h2><p class=\"fail\">no report: {}</p>",
            esc(label),
            esc(&format!("{e:#}"))
        ),
    }
}

/// Markdown tables (as study.md writes them) to HTML tables; other lines to paragraphs.
fn md_to_html(md: &str) -> String {
    let mut out = String::new();
    let mut in_table = false;
    for line in md.lines() {
        if line.starts_with('|') {
            let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
            if cells.iter().all(|c| c.chars().all(|ch| ch == '-')) {
                continue;
            }
            if !in_table {
                // Study tables are wide: scroll them rather than cut them off.
                out.push_str("<div style=\"overflow-x:auto\"><table><tr>");
                for c in &cells {
                    out.push_str(&format!("<th>{}</th>", esc(c)));
                }
                out.push_str("</tr>\n");
                in_table = true;
                continue;
            }
            out.push_str("<tr>");
            for c in &cells {
                out.push_str(&format!("<td>{}</td>", esc(c)));
            }
            out.push_str("</tr>\n");
            continue;
        }
        if in_table {
            out.push_str("</table></div>\n");
            in_table = false;
        }
        if let Some(h) = line.strip_prefix("## ") {
            out.push_str(&format!("<h2>{}</h2>\n", esc(h)));
        } else if let Some(h) = line.strip_prefix("# ") {
            out.push_str(&format!("<h1>{}</h1>\n", esc(h)));
        } else if let Some(li) = line.strip_prefix("- ") {
            out.push_str(&format!("<p class=\"fail\">{}</p>\n", esc(li)));
        } else if !line.trim().is_empty() {
            out.push_str(&format!("<p>{}</p>\n", esc(line)));
        }
    }
    if in_table {
        out.push_str("</table></div>\n");
    }
    out
}

/// The charts section: each figure's bar chart inline (the page stays self-contained:
/// no links; the caption names the PNG/SVG files).
fn charts_section(charts_: &[StudyChart]) -> String {
    if charts_.is_empty() {
        return String::new();
    }
    let mut o = String::from("<h2>Charts</h2>\n");
    for c in charts_ {
        o.push_str(&format!(
            "<figure class=\"study-chart\">{}<figcaption>{} (also charts/{k}.png and charts/{k}.svg beside this page)</figcaption></figure>\n",
            c.svg,
            esc(c.title),
            k = c.key
        ));
    }
    o
}

/// The whole study page: the title and notes, the charts, the tables, every run.
pub fn study_page(study: &Path, md: &str, charts_: &[StudyChart], runs: &[StudyRun]) -> String {
    let (head, tables) = match md.find("## Cells") {
        Some(i) => md.split_at(i),
        None => (md, ""),
    };
    let mut body = md_to_html(head);
    body.push_str(&charts_section(charts_));
    body.push_str(&md_to_html(tables));
    for r in runs {
        body.push_str(&run_fragment(
            &study.join(&r.dir),
            &format!("{} r{} ({})", r.cell, r.repeat, r.status),
        ));
    }
    crate::report::html::page(&format!("diskpulse study {}", study.display()), &[body])
}
