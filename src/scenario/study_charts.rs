//! A study's figures as bar charts: one chart per figure (study.csv column) that any run
//! has, each cell a bar (mean over its repeats, a whisker from the smallest to the
//! largest repeat), cells grouped by the matrix: the first parameter picks the bar's
//! colour (RAID 0 vs RAID 1), the others the group along the x axis (object size). With
//! one parameter its values are the groups, one colour. Written as
//! `STUDY/charts/FIGURE.svg` and `.png` (720 px wide, wider when the groups need it) and inlined in `report.html`.

use std::path::Path;

use charts::{Bar, Bars};

use crate::format::study::{Figures, Study, StudyRun, FIGURES};

/// A figure's unit, from its name's suffix (the FIGURES naming convention).
fn unit(key: &str) -> &'static str {
    if key.ends_with("_per_s") {
        "per second"
    } else if key.ends_with("_mib_s") || key == "mib_per_s" {
        "MiB/s"
    } else if key.ends_with("_us") {
        "us"
    } else if key.ends_with("_ms") {
        "ms"
    } else if key.ends_with("_mib") {
        "MiB"
    } else if key.ends_with("_s") {
        "s"
    } else if key.ends_with("ratio") || key.ends_with("factor") {
        "x"
    } else if key == "failures" {
        "operations"
    } else {
        ""
    }
}

/// One chart, ready to write: the figure's key and title, and the SVG.
pub struct StudyChart {
    pub key: &'static str,
    pub title: &'static str,
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
    let ok: Vec<&(StudyRun, Figures)> = runs.iter().filter(|(r, _)| r.counts()).collect();
    let mut out = vec![];
    for (key, title) in FIGURES {
        let mut any = false;
        let values: Vec<Vec<Option<Bar>>> = groups
            .iter()
            .map(|g| {
                series
                    .iter()
                    .map(|s| {
                        let xs: Vec<f64> = ok
                            .iter()
                            .filter(|(r, _)| {
                                group_of(&r.params) == *g
                                    && (series_label.is_empty() || r.param(&series_label) == s)
                            })
                            .filter_map(|(_, x)| x.get(key))
                            .filter(|v| v.is_finite())
                            .collect();
                        if xs.is_empty() {
                            return None;
                        }
                        any = true;
                        Some(Bar {
                            mean: xs.iter().sum::<f64>() / xs.len() as f64,
                            min: xs.iter().copied().fold(f64::INFINITY, f64::min),
                            max: xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                            n: xs.len(),
                        })
                    })
                    .collect()
            })
            .collect();
        if !any {
            continue;
        }
        let bars = Bars {
            title: format!("{title} (mean of repeats, whiskers min..max)"),
            y_label: unit(key).into(),
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
    if charts_.is_empty() {
        return Ok(());
    }
    let dir = study.join("charts");
    std::fs::create_dir_all(&dir)?;
    for c in charts_ {
        std::fs::write(dir.join(format!("{}.svg", c.key)), &c.svg)?;
        let png = charts::svg_to_png(&c.svg)
            .map_err(|e| anyhow::anyhow!("rendering the {} chart: {e}", c.key))?;
        std::fs::write(dir.join(format!("{}.png", c.key)), png)?;
    }
    Ok(())
}
