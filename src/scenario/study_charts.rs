//! A study's figures as bar charts: one chart per figure (study.csv column) whose cell
//! means differ across the cells ([`super::study_page::varying_figures`]: no chart of a
//! fixed input such as msgs/s at a fixed rate, none of a figure no valid run has, none of
//! 0 failed ops everywhere), the answer figures first. Each cell a bar (mean over its
//! valid repeats, a whisker from the smallest to the largest), never a mean over cells:
//! the first parameter picks the bar's colour (RAID 0 vs RAID 1), the others the group
//! along the x axis (object size). With one parameter its values are the groups, one
//! colour. µs figures are drawn in ms (in s from 1 s), values rounded to 3 significant
//! digits. Written as `STUDY/charts/FIGURE.svg` and `.png` (720 px wide, wider when the
//! groups need it) and inlined in `report.html`.

use std::path::Path;

use charts::{Bar, Bars};

use super::study_page::{self, CellRuns};
use super::verdict::{self, Scale};
use format::study::{Figures, Study, StudyRun};

/// The value axis' label: the figure's unit on the page ("ms", "MiB/s"), "per second"
/// for a rate its title names, "operations" for failed ops.
fn axis_label(key: &str, sc: &Scale) -> &'static str {
    match sc.unit {
        "" if key.ends_with("_per_s") => "per second",
        "" if key == "failures" => "operations",
        u => u,
    }
}

/// `v` rounded to 3 significant digits (the bars' titles then print no more).
fn round3(v: f64) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let f = 10f64.powi(2 - v.abs().log10().floor() as i32);
    (v * f).round() / f
}

/// One chart, ready to write: the figure's key and title, and the SVG.
pub struct StudyChart {
    pub key: &'static str,
    pub title: String,
    pub svg: String,
}

/// The values of parameter `k` in the cells' (the matrix's) order, each once.
fn values_of(sj: &Study, k: &str) -> Vec<String> {
    let mut v: Vec<String> = vec![];
    for c in &sj.cells {
        if let Some((_, val)) = c.params.iter().find(|(n, _)| n == k) {
            if !v.contains(val) {
                v.push(val.clone());
            }
        }
    }
    v
}

/// The charts of the figures the finished runs have.
pub fn build(sj: &Study, runs: &[(StudyRun, Figures)]) -> Vec<StudyChart> {
    let params = sj.param_names();
    let (series_label, group_keys): (String, Vec<String>) = match params.as_slice() {
        [] => (String::new(), vec![]),
        [one] => (String::new(), vec![one.clone()]),
        [first, rest @ ..] => (first.clone(), rest.to_vec()),
    };
    let series: Vec<String> = if series_label.is_empty() {
        vec![String::new()]
    } else {
        values_of(sj, &series_label)
    };
    // Groups: the other parameters' combinations, in the cells' order.
    let group_of = |p: &[(String, String)]| -> String {
        let vals: Vec<String> = group_keys
            .iter()
            .map(|k| {
                let v = p
                    .iter()
                    .find(|(n, _)| n == k)
                    .map(|(_, v)| v.as_str())
                    .unwrap_or("");
                if group_keys.len() > 1 {
                    format!("{k}={v}")
                } else {
                    v.to_string()
                }
            })
            .collect();
        if vals.is_empty() {
            "all runs".into()
        } else {
            // One line per parameter under the group's bars.
            vals.join("\n")
        }
    };
    let mut groups: Vec<String> = vec![];
    for c in &sj.cells {
        let g = group_of(&c.params);
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    if groups.is_empty() {
        groups.push(group_of(&[]));
    }
    // Wide enough that each group's label lines (about 7 px a character) and bars fit.
    let longest = groups
        .iter()
        .flat_map(|g| g.split('\n'))
        .chain(series.iter().map(String::as_str))
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(0) as u32;
    let slot = (longest * 7 + 16).max(series.len() as u32 * 36).max(90);
    let width = (80 + groups.len() as u32 * slot).clamp(720, 4000);
    let cells = study_page::cells(sj, runs);
    let cell_of = |g: &str, ser: &str| -> Option<&CellRuns> {
        cells.iter().find(|c| {
            group_of(&c.params) == g
                && (series_label.is_empty()
                    || c.params.iter().any(|(k, v)| *k == series_label && v == ser))
        })
    };
    let mut out = vec![];
    for key in study_page::varying_figures(&cells) {
        let max = cells
            .iter()
            .filter_map(|c| c.stats(key).map(|s| s.2))
            .fold(0.0, f64::max);
        let sc = verdict::scale(key, max);
        let values: Vec<Vec<Option<Bar>>> = groups
            .iter()
            .map(|g| {
                series
                    .iter()
                    .map(|s| {
                        let (mean, min, max, n) = cell_of(g, s)?.stats(key)?;
                        Some(Bar {
                            mean: round3(mean / sc.div),
                            min: round3(min / sc.div),
                            max: round3(max / sc.div),
                            n,
                        })
                    })
                    .collect()
            })
            .collect();
        let title = study_page::short_title(key);
        let bars = Bars {
            title: format!("{title} (mean of valid repeats, whiskers min..max)"),
            y_label: axis_label(key, &sc).into(),
            x_label: group_keys.join(", "),
            groups: groups.clone(),
            series_label: series_label.clone(),
            series: series.clone(),
            values,
            width_px: width,
            height_px: 320,
        };
        out.push(StudyChart {
            key,
            title,
            svg: charts::render_bars_svg(&bars),
        });
    }
    out
}

/// Writes `STUDY/charts/KEY.svg` and `KEY.png` for each chart.
pub fn write(study: &Path, charts_: &[StudyChart]) -> anyhow::Result<()> {
    let dir = study.join("charts");
    if charts_.is_empty() && !dir.exists() {
        return Ok(());
    }
    std::fs::create_dir_all(&dir)?;
    // A chart an earlier report drew of a figure that no longer varies goes: what is in
    // charts/ is what the page shows.
    for e in std::fs::read_dir(&dir)?.flatten() {
        let p = e.path();
        let ours = p.extension().is_some_and(|x| x == "png" || x == "svg");
        let stem = p.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        if ours && !charts_.iter().any(|c| c.key == stem) {
            std::fs::remove_file(&p)?;
        }
    }
    for c in charts_ {
        format::atomic::write(&dir.join(format!("{}.svg", c.key)), c.svg.as_bytes())?;
        let png = charts::svg_to_png(&c.svg)
            .map_err(|e| anyhow::anyhow!("rendering the {} chart: {e}", c.key))?;
        format::atomic::write(&dir.join(format!("{}.png", c.key)), &png)?;
    }
    Ok(())
}
