//! The interference section of report.html: summary.json's `interference` as tables (per
//! device's write bursts: each latency series inside versus outside; per restart: each
//! load series during the re-read versus before), under the sentences one can quote.

use std::fmt::Write as _;

use super::escape;
use super::format::*;
use ::format::summary::{Percentiles, Summary};

/// The p50/p99/p99.9/max cells of one side, and its operation count.
fn side(p: &Percentiles) -> Vec<Cell> {
    vec![
        n(num(p.count as f64, 0)),
        n(us(opt(p.p50_us))),
        n(us(opt(p.p99_us))),
        n(us(opt(p.p999_us))),
        n(us(opt(p.max_us))),
    ]
}

/// The columns of [`side`] outside then inside.
const OUT_IN: [&str; 10] = [
    "#ops outside",
    "#p50",
    "#p99",
    "#p99.9",
    "#max",
    "#ops inside",
    "#p50 in",
    "#p99 in",
    "#p99.9 in",
    "#max in",
];

/// A table's header: `first`, the outside and inside columns, `last`.
fn header(first: &[&'static str], last: &[&'static str]) -> Vec<&'static str> {
    [first, &OUT_IN[..], last].concat()
}

fn ratio(r: Option<f64>) -> String {
    r.map(|r| format!("{}x", sig(r)))
        .unwrap_or_else(|| NONE.into())
}

pub(super) fn interference(s: &mut String, summary: &Summary) {
    let Some(x) = &summary.interference else {
        return;
    };
    s.push_str("<h3>Interference</h3>\n");
    if !x.lines.is_empty() {
        s.push_str("<div class=\"headline\">\n");
        for l in &x.lines {
            let _ = writeln!(s, "<p>{}</p>", escape(l));
        }
        s.push_str("</div>\n");
    }
    let _ = writeln!(
        s,
        "<p class=\"muted\">Percentiles of the merged per-window histograms (load.hlog, \
         probe.hlog), never averaged. The rule: {}. The bursts are shaded on the timeline.</p>",
        escape(&x.rule)
    );
    if x.bursts.is_empty() {
        s.push_str("<p class=\"muted\">No device had write bursts to measure against.</p>\n");
    } else {
        let rows: Vec<_> = x
            .bursts
            .iter()
            .map(|b| {
                let mut cells = vec![t(b.device.clone()), t(b.series.clone())];
                cells.push(n(format!("{} ms", sig(b.window_ms))));
                cells.extend(side(&b.outside));
                cells.extend(side(&b.inside));
                cells.push(n(ratio(b.p99_ratio)));
                cells.push(n(pct(100.0 * b.share_in_bursts)));
                (None, cells)
            })
            .collect();
        s.push_str("<h4>Latency outside versus inside write bursts</h4>\n");
        table(
            s,
            &header(
                &["device", "series", "#window"],
                &["#p99 in/out", "#ops in bursts"],
            ),
            &rows,
        );
    }
    if !x.restarts.is_empty() {
        let rows: Vec<_> = x
            .restarts
            .iter()
            .map(|r| {
                let mut cells = vec![
                    t(r.node.clone()),
                    n(secs(r.restart_s)),
                    t(r.series.clone()),
                    n(format!(
                        "{}–{} s",
                        num(r.during_from_s, 2),
                        num(r.during_to_s, 2)
                    )),
                ];
                cells.extend(side(&r.before));
                cells.extend(side(&r.during));
                cells.push(n(ratio(r.p99_ratio)));
                (None, cells)
            })
            .collect();
        s.push_str("<h4>Load latency before a restart versus during its re-read</h4>\n");
        table(
            s,
            &[
                "node",
                "#restart at",
                "series",
                "#re-read",
                "#ops before",
                "#p50",
                "#p99",
                "#p99.9",
                "#max",
                "#ops during",
                "#p50 during",
                "#p99 during",
                "#p99.9 during",
                "#max during",
                "#p99 during/before",
            ],
            &rows,
        );
    }
    if !x.episodes.is_empty() {
        let rows: Vec<_> = x
            .episodes
            .iter()
            .take(200)
            .map(|e| {
                (
                    None,
                    vec![
                        t(e.kind.clone()),
                        n(secs(e.start_s)),
                        n(format!("{} ms", sig(e.duration_ms))),
                        t(e.devices.join(", ")),
                        t(e.victims.join(", ")),
                        t(e.cause.clone().unwrap_or_else(|| NONE.into())),
                    ],
                )
            })
            .collect();
        s.push_str("<h4>Harm episodes: stalls, device stalls, long flushes, CPU saturation</h4>\n");
        if x.episodes.len() > rows.len() {
            let _ = writeln!(
                s,
                "<p class=\"muted\">The first {} of {}; all are in summary.json.</p>",
                rows.len(),
                x.episodes.len()
            );
        }
        table(
            s,
            &[
                "kind",
                "#start",
                "#length",
                "devices",
                "stalled",
                "overlapping",
            ],
            &rows,
        );
    }
    let harm: Vec<_> = x.harm.iter().filter(|h| !h.co).collect();
    if !harm.is_empty() {
        let rows: Vec<_> = harm
            .iter()
            .map(|h| {
                let mut cells = vec![t(h.kind.clone()), t(h.series.clone())];
                cells.extend(side(&h.outside));
                cells.extend(side(&h.inside));
                cells.push(n(ratio(h.p99_ratio)));
                (None, cells)
            })
            .collect();
        s.push_str(
            "<h4>Latency of operations that lived through an episode versus the others</h4>\n",
        );
        table(s, &header(&["episodes", "series"], &["#p99 in/out"]), &rows);
    }
}
