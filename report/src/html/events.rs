//! The bottom of a run section: the events and the samplers' health.

use crate::run::Run;
use crate::Summary;
use format::events::Body;
use std::fmt::Write as _;

use super::escape;
use super::format::*;

const MAX_EVENT_ROWS: usize = 300;

pub(super) fn events(s: &mut String, run: &Run) {
    let shown: Vec<_> = run
        .events
        .iter()
        // Too chatty for the table: one per client connect/close.
        .filter(|e| !matches!(e.body, Body::NatsClient(_)))
        .collect();
    if shown.is_empty() {
        return;
    }
    let errors = shown.iter().any(|e| matches!(e.body, Body::Error(_)));
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
            let detail = e.detail_text();
            (
                matches!(e.body, Body::Error(_)).then_some("lvl-fail"),
                vec![
                    n(format!("{} s", num(e.t_ns as f64 / 1e9, 3))),
                    t(e.kind().to_string()),
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

pub(super) fn samplers(s: &mut String, summary: &Summary) {
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
            let x = |f: fn(&::format::meta::SamplerStats) -> f64| st.map_or(f64::NAN, f);
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
