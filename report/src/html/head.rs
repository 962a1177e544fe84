//! The top of a run section: the run's facts (host, kernel, start, broker, command), the
//! headline, notices, and the findings of a `check.json` in the run directory.

use std::path::Path;

use crate::run::Run;
use crate::Summary;
use std::fmt::Write as _;

use super::escape;
use super::format::*;

/// Shell-style quoting for display: an argument with anything unusual in single quotes.
pub(super) fn shell_quote(a: &str) -> String {
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

pub(super) fn header(s: &mut String, run: &Run, summary: &Summary) {
    let m = &run.meta;
    let mut rows: Vec<(&str, String)> = vec![
        ("run", run.dir.display().to_string()),
        ("host", m.host.clone()),
        ("kernel", m.kernel.clone()),
        ("start", wall_time(&m.start_wall)),
        ("duration", secs(summary.duration_s)),
    ];
    if let Some(b) = m.broker() {
        let mut d = format!("{} {}", b.program(), b.version.as_deref().unwrap_or(NONE));
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

pub(super) fn headline(s: &mut String, summary: &Summary) {
    if summary.headline.is_empty() {
        s.push_str("<p class=\"muted\">No writes recorded on any device.</p>\n");
        return;
    }
    s.push_str("<div class=\"headline\">\n");
    // The device sentences, then what ran at the same time did to each other.
    for h in summary
        .headline
        .iter()
        .chain(summary.interference.iter().flat_map(|i| &i.lines))
    {
        let _ = writeln!(s, "<p>{}</p>", escape(h));
    }
    s.push_str("</div>\n");
}

pub(super) fn notices(s: &mut String, run: &Run, summary: &Summary) {
    // Failed operations first and loudest, the largest count first.
    for f in summary.failures.iter().rev() {
        let _ = writeln!(
            s,
            "<p class=\"notice failure\"><strong>{}</strong> ({}, last at {:.1} s)</p>",
            escape(&f.line),
            escape(&f.role),
            f.last_s
        );
    }
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

pub(super) fn check_findings(s: &mut String, dir: &Path) {
    let Some(doc) = ::format::check::read(dir) else {
        return;
    };
    s.push_str("<h3>Check findings</h3>\n");
    let Ok(doc) = doc else {
        s.push_str(
            "<p class=\"notice\">check.json is here but is not <code>diskpulse check --json</code> \
             output.</p>\n",
        );
        return;
    };
    if let Some(c) = &doc.counts {
        let _ = writeln!(
            s,
            "<p>{} FAIL, {} WARN, {} PASS, {} INFO (<code>diskpulse check</code> run before or during the recording).</p>",
            c.fail, c.warn, c.pass, c.info
        );
    }
    let rows: Vec<_> = doc
        .findings
        .iter()
        .map(|x| {
            let level = if x.level.is_empty() {
                "INFO".to_string()
            } else {
                x.level.to_ascii_uppercase()
            };
            let class = match level.as_str() {
                "PASS" => "lvl-pass",
                "WARN" => "lvl-warn",
                "FAIL" => "lvl-fail",
                _ => "lvl-info",
            };
            let place = [x.target.as_deref(), x.device.as_deref()]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(" / ");
            (
                Some(class),
                vec![
                    Cell::H(format!("<span class=\"lvl\">{}</span>", escape(&level))),
                    Cell::H(format!("<code>{}</code>", escape(&x.code))),
                    t(if place.is_empty() {
                        "machine".into()
                    } else {
                        place
                    }),
                    t(x.message.clone()),
                    t(if x.advice.is_empty() {
                        String::new()
                    } else {
                        format!("→ {}", x.advice)
                    }),
                ],
            )
        })
        .collect();
    table(s, &["level", "code", "where", "finding", "advice"], &rows);
}
