//! The study page as a type: what study.md and report.html say, in the order they say it.
//! Both are rendered from one [`Page`] (study.md by [`Page::markdown`], report.html by
//! `html.rs`), so neither is parsed back from the other.
//!
//! What must stay true (issue 23):
//! - The page opens with the answers: one [`Question`] per matrix parameter, each verdict
//!   a ratio with its statement of noise, the interval's method named ([`Page::method`]).
//! - Invalid runs are listed with their reason right after the answers and counted in no
//!   figure, table or verdict; a cell with no valid run still has its row, marked so.
//! - Tables show the few figures that answer the questions ([`table_figures`]), values in
//!   ms or s (µs figures) with 3 significant digits; the full table is study.csv.
//! - A "by X" table never averages over another varied parameter: its rows are cells,
//!   grouped by the other parameters' values, X's values side by side within each group.

use std::collections::BTreeMap;

use super::verdict::{self, Question, Scale};
use format::study::{AxisRow, CellFigures, FigureStats, Figures, Study, StudyRun, FIGURES};

/// A table: a header and rows of printed cells.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Table {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

/// One "by X" table: parameter X's values side by side within each value of the others.
#[derive(Debug, Clone, PartialEq)]
pub struct ByTable {
    pub param: String,
    pub heading: String,
    pub table: Table,
}

/// The study page, top first.
#[derive(Debug, Clone, Default)]
pub struct Page {
    pub title: String,
    pub description: String,
    /// "Runs: 6 (6 finished, 2 invalid and left out)."
    pub runs_line: String,
    pub questions: Vec<Question>,
    /// How the answers are made (the interval named).
    pub method: String,
    /// "raid-1 r2: INVALID: phase 1 probe fell behind its rate ..."
    pub invalid: Vec<String>,
    /// "Cells", or with 2+ parameters the grouping the cells' (the matrix's) order is:
    /// "Cells: by sync, within each raid" (its last parameter within the others).
    pub cells_heading: String,
    pub cells: Table,
    /// The "by X" tables of the parameters before the last (the last one's is the cells
    /// table).
    pub by: Vec<ByTable>,
    /// Where every figure of every run is (study.csv) and how many columns it has.
    pub full_note: String,
    /// "raid-0 r1: failed ERROR"
    pub failed: Vec<String>,
}

/// One cell of the matrix with its runs: the figures of its valid runs, and how many of
/// its runs finished.
pub struct CellRuns<'a> {
    pub id: String,
    pub params: Vec<(String, String)>,
    pub valid: Vec<&'a Figures>,
    pub finished: usize,
}

impl CellRuns<'_> {
    /// Mean, min, max and n of figure `key` over the valid runs that have it.
    pub fn stats(&self, key: &str) -> Option<(f64, f64, f64, usize)> {
        let xs: Vec<f64> = self.valid.iter().filter_map(|x| x.get(key)).collect();
        if xs.is_empty() {
            return None;
        }
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
        let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Some((mean, min, max, xs.len()))
    }
    fn param(&self, k: &str) -> &str {
        self.params
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
            .unwrap_or("")
    }
}

/// The cells in the matrix's order, each with its finished runs.
pub fn cells<'a>(sj: &Study, per_run: &'a [(StudyRun, Figures)]) -> Vec<CellRuns<'a>> {
    let mut out: Vec<CellRuns> = sj
        .cells
        .iter()
        .map(|c| CellRuns {
            id: c.id.clone(),
            params: c.params.clone(),
            valid: vec![],
            finished: 0,
        })
        .collect();
    for (r, x) in per_run {
        let i = match out.iter().position(|c| c.id == r.cell) {
            Some(i) => i,
            None => {
                out.push(CellRuns {
                    id: r.cell.clone(),
                    params: r.params.clone(),
                    valid: vec![],
                    finished: 0,
                });
                out.len() - 1
            }
        };
        if r.ok() {
            out[i].finished += 1;
        }
        if r.counts() {
            out[i].valid.push(x);
        }
    }
    out
}

/// A figure's title without its unit ("probe write p99", not "probe write p99 us"):
/// the answer figures' own titles, else the table title with " us" taken out.
pub fn short_title(key: &str) -> String {
    if let Some((_, t)) = verdict::ANSWER_FIGURES.iter().find(|(k, _)| *k == key) {
        return t.to_string();
    }
    let t = FIGURES
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, t)| *t)
        .unwrap_or(key);
    t.replace(" us", "")
}

/// The figures whose cell means differ ([`verdict::varies`]) across the cells that have
/// them: the answer figures first (in the questions' order), then the others in
/// study.csv's order. A fixed input (msgs/s at a fixed rate), a figure no valid run has
/// (flushes/s without flush counts) and 0 failed ops everywhere are not among them.
pub fn varying_figures(cells: &[CellRuns]) -> Vec<&'static str> {
    let varies = |key: &str| {
        let means: Vec<f64> = cells
            .iter()
            .filter_map(|c| c.stats(key).map(|s| s.0))
            .collect();
        verdict::varies(&means)
    };
    let mut out: Vec<&'static str> = verdict::ANSWER_FIGURES
        .iter()
        .map(|(k, _)| *k)
        .filter(|k| varies(k))
        .collect();
    for (k, _) in FIGURES {
        if !out.contains(&k) && varies(k) {
            out.push(k);
        }
    }
    out
}

/// The most columns of figures a table on the page has (the rest are in study.csv).
pub const TABLE_FIGURES_MAX: usize = 5;

/// The figures the tables show: the varying answer figures, else the first varying
/// figures, else (nothing varies) the answer figures the runs have; at most
/// [`TABLE_FIGURES_MAX`].
pub fn table_figures(cells: &[CellRuns]) -> Vec<&'static str> {
    let all = varying_figures(cells);
    let answers: Vec<&'static str> = all
        .iter()
        .copied()
        .filter(|k| verdict::ANSWER_FIGURES.iter().any(|(a, _)| a == k))
        .collect();
    let mut v = if !answers.is_empty() {
        answers
    } else if !all.is_empty() {
        all
    } else {
        // Nothing varies (one cell): the answer figures the valid runs have.
        verdict::ANSWER_FIGURES
            .iter()
            .map(|(k, _)| *k)
            .filter(|k| cells.iter().any(|c| c.stats(k).is_some()))
            .collect()
    };
    v.truncate(TABLE_FIGURES_MAX);
    v
}

/// Each figure's scale from its largest cell mean.
fn scales(cells: &[CellRuns], figs: &[&'static str]) -> Vec<Scale> {
    figs.iter()
        .map(|k| {
            let max = cells
                .iter()
                .filter_map(|c| c.stats(k).map(|s| s.2))
                .fold(0.0, f64::max);
            verdict::scale(k, max)
        })
        .collect()
}

/// A column's title with its unit: "probe write p99 (ms)", "write burst peak (10 ms, MiB/s)".
fn header_of(key: &str, sc: &Scale) -> String {
    let t = short_title(key);
    match (sc.unit, t.strip_suffix(')')) {
        ("" | "x", _) => t,
        (u, Some(open)) => format!("{open}, {u})"),
        (u, None) => format!("{t} ({u})"),
    }
}

/// A cell's printed value: "22.8 (19.9..25.1)" (mean (min..max) with 2+ repeats).
fn value_cell(c: &CellRuns, key: &str, sc: &Scale) -> String {
    match c.stats(key) {
        None if c.valid.is_empty() && c.finished > 0 => "invalid".into(),
        None => "-".into(),
        Some((m, lo, hi, n)) if n > 1 => {
            format!("{} ({}..{})", sc.number(m), sc.number(lo), sc.number(hi))
        }
        Some((m, ..)) => sc.number(m),
    }
}

fn runs_cell(c: &CellRuns) -> String {
    if c.valid.len() == c.finished {
        c.valid.len().to_string()
    } else {
        format!("{} of {}", c.valid.len(), c.finished)
    }
}

/// The cells table: the parameters, the valid runs, the [`table_figures`].
pub fn cells_table(params: &[String], cells: &[CellRuns], figs: &[&'static str]) -> Table {
    let sc = scales(cells, figs);
    let mut header: Vec<String> = params.to_vec();
    header.push("valid runs".into());
    header.extend(figs.iter().zip(&sc).map(|(k, s)| header_of(k, s)));
    let rows = cells
        .iter()
        .map(|c| {
            let mut row: Vec<String> = params.iter().map(|p| c.param(p).to_string()).collect();
            row.push(runs_cell(c));
            row.extend(figs.iter().zip(&sc).map(|(k, s)| value_cell(c, k, s)));
            row
        })
        .collect();
    Table { header, rows }
}

/// The other parameters' value combinations, in the cells' order.
fn combos_without(params: &[String], p: &str, cells: &[CellRuns]) -> Vec<Vec<(String, String)>> {
    let mut out: Vec<Vec<(String, String)>> = vec![];
    for c in cells {
        let o: Vec<(String, String)> = params
            .iter()
            .filter(|q| *q != p)
            .map(|q| (q.clone(), c.param(q).to_string()))
            .collect();
        if !out.contains(&o) {
            out.push(o);
        }
    }
    out
}

/// "by X, within each Y and Z".
fn by_heading(params: &[String], p: &str) -> String {
    let o: Vec<&str> = params
        .iter()
        .filter(|q| *q != p)
        .map(String::as_str)
        .collect();
    format!("by {p}, within each {}", o.join(" and "))
}

/// The cells table's heading: with 2+ parameters, the grouping the matrix's order is.
pub fn cells_heading(params: &[String]) -> String {
    match params.last() {
        Some(last) if params.len() > 1 => format!("Cells: {}", by_heading(params, last)),
        _ => "Cells".into(),
    }
}

/// One "by X" table per parameter but the last, with 2+ parameters (the cells table, in
/// the matrix's order, is the last one's; with one parameter it is the only one): rows
/// are cells, grouped by the other parameters' values (the held columns first), X's
/// values in the matrix's order within each group. Nothing is averaged across cells.
pub fn by_tables(params: &[String], cells: &[CellRuns], figs: &[&'static str]) -> Vec<ByTable> {
    if params.len() < 2 {
        return vec![];
    }
    let sc = scales(cells, figs);
    let mut out = vec![];
    for p in &params[..params.len() - 1] {
        let others: Vec<&String> = params.iter().filter(|q| *q != p).collect();
        let mut header: Vec<String> = others.iter().map(|q| q.to_string()).collect();
        header.push(p.clone());
        header.push("valid runs".into());
        header.extend(figs.iter().zip(&sc).map(|(k, s)| header_of(k, s)));
        let mut rows = vec![];
        for combo in combos_without(params, p, cells) {
            for c in cells
                .iter()
                .filter(|c| combo.iter().all(|(k, v)| c.param(k) == v))
            {
                let mut row: Vec<String> = combo.iter().map(|(_, v)| v.clone()).collect();
                row.push(c.param(p).to_string());
                row.push(runs_cell(c));
                row.extend(figs.iter().zip(&sc).map(|(k, s)| value_cell(c, k, s)));
                rows.push(row);
            }
        }
        let h = by_heading(params, p);
        out.push(ByTable {
            param: p.clone(),
            heading: format!("B{}", &h[1..]),
            table: Table { header, rows },
        });
    }
    out
}

/// study.json's `axes`: per parameter, one entry per cell grouped as its "by X" table
/// groups them (`value`, the `others` held, `runs`, per figure `mean`/`min`/`max`/`n`).
pub fn axes(
    params: &[String],
    cells: &[CellRuns],
    figs: &[(String, String)],
) -> BTreeMap<String, Vec<AxisRow>> {
    let mut axes = BTreeMap::new();
    for p in params {
        let mut rows = vec![];
        for combo in combos_without(params, p, cells) {
            for c in cells
                .iter()
                .filter(|c| combo.iter().all(|(k, v)| c.param(k) == v))
            {
                rows.push(AxisRow {
                    figures: figure_stats(c, figs),
                    others: combo.clone(),
                    runs: c.valid.len(),
                    value: c.param(p).to_string(),
                });
            }
        }
        axes.insert(p.clone(), rows);
    }
    axes
}

/// Per figure: `mean`, `min`, `max`, `n` over the cell's valid runs (None without one).
pub fn figure_stats(c: &CellRuns, figs: &[(String, String)]) -> CellFigures {
    figs.iter()
        .map(|(k, _)| {
            let stats = c
                .stats(k)
                .map(|(mean, min, max, n)| FigureStats { max, mean, min, n });
            (k.clone(), stats)
        })
        .collect()
}

/// The method line under the answers.
pub fn method_line() -> String {
    format!(
        "Each answer is the mean over one value's valid repeats against the first value's, every other parameter held, for the figures compared that differ by more than 2% across the valid runs. The interval is the {} of the ratio (Welch's t on the log of the means, by the delta method); a ratio whose interval holds 1.0 is not distinguishable from no change. Invalid runs are left out of every answer, table and chart.",
        verdict::INTERVAL_NAME
    )
}

fn md_table(t: &Table) -> String {
    let mut o = format!(
        "| {} |\n|{}\n",
        t.header.join(" | "),
        "---|".repeat(t.header.len())
    );
    for r in &t.rows {
        o.push_str(&format!("| {} |\n", r.join(" | ")));
    }
    o
}

impl Page {
    /// study.md.
    pub fn markdown(&self) -> String {
        let mut md = format!(
            "# {}\n\n{}\n\n{}\n\n",
            self.title, self.description, self.runs_line
        );
        if !self.questions.is_empty() {
            md.push_str("## Answers\n\n");
            for q in &self.questions {
                md.push_str(&format!("### {}\n\n", q.heading));
                for v in &q.verdicts {
                    md.push_str(&format!("- {}\n", v.line));
                }
                for u in &q.unanswered {
                    md.push_str(&format!("- {u}\n"));
                }
                md.push('\n');
            }
            md.push_str(&self.method);
            md.push_str("\n\n");
        }
        if !self.invalid.is_empty() {
            md.push_str("## Invalid runs, left out of every figure\n\n");
            for l in &self.invalid {
                md.push_str(&format!("- {l}\n"));
            }
            md.push('\n');
        }
        md.push_str(&format!("## {}\n\n", self.cells_heading));
        md.push_str(&md_table(&self.cells));
        for b in &self.by {
            md.push_str(&format!("\n## {}\n\n", b.heading));
            md.push_str(&md_table(&b.table));
        }
        md.push_str(&format!("\n{}\n", self.full_note));
        if !self.failed.is_empty() {
            md.push_str("\n## Runs that did not finish\n\n");
            for l in &self.failed {
                md.push_str(&format!("- {l}\n"));
            }
        }
        md
    }
}

/// The page of a study whose runs have these figures (`per_run`, every run in
/// study.json's order, its `invalid` already set).
pub fn build(sj: &Study, per_run: &[(StudyRun, Figures)], csv_columns: usize) -> Page {
    let params = sj.param_names();
    let cs = cells(sj, per_run);
    let finished: Vec<(&StudyRun, &Figures)> = per_run
        .iter()
        .filter(|(r, _)| r.ok())
        .map(|(r, x)| (r, x))
        .collect();
    let invalid: Vec<&StudyRun> = sj.runs.iter().filter(|r| r.invalid.is_some()).collect();
    let figs = table_figures(&cs);
    Page {
        title: sj.scenario.clone(),
        description: sj.description.clone(),
        runs_line: format!(
            "Runs: {} ({} finished{}). Values: mean over a cell's valid repeats (min..max), latencies in ms or s.",
            per_run.len(),
            finished.len(),
            if invalid.is_empty() {
                String::new()
            } else {
                format!(", {} invalid and left out", invalid.len())
            }
        ),
        questions: verdict::questions(&finished, &params),
        method: method_line(),
        invalid: invalid
            .iter()
            .map(|r| {
                format!(
                    "{} r{}: INVALID: {}",
                    r.cell,
                    r.repeat,
                    r.invalid.as_deref().unwrap_or("")
                )
            })
            .collect(),
        cells_heading: cells_heading(&params),
        cells: cells_table(&params, &cs, &figs),
        by: by_tables(&params, &cs, &figs),
        full_note: format!(
            "The tables show the figures that answer the questions. Every figure of every run ({} columns, invalid runs included and marked) is in study.csv beside this page.",
            csv_columns
        ),
        failed: sj
            .runs
            .iter()
            .filter(|r| !r.ok())
            .map(|r| {
                format!(
                    "{} r{}: {} {}",
                    r.cell,
                    r.repeat,
                    r.status,
                    r.error.as_deref().unwrap_or("")
                )
            })
            .collect(),
    }
}
