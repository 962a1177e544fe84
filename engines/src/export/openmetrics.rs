//! OpenMetrics text (`application/openmetrics-text; version=1.0.0`) as `promtool tsdb
//! create-blocks-from openmetrics` reads it: each family once (`# TYPE`, `# HELP`, its
//! name without `_total` for a counter), all its samples together, each series' samples
//! in time order, timestamps in seconds with millisecond precision, `# EOF` last.

use std::collections::BTreeMap;
use std::io::Write;

use super::names::{label, value};
use super::Group;

/// The family name of a sample name: a counter's without `_total`.
fn family(metric: &str, counter: bool) -> &str {
    if counter {
        metric.strip_suffix("_total").unwrap_or(metric)
    } else {
        metric
    }
}

/// `s.mmm` of a wall-clock time in ns.
pub fn timestamp(unix_ns: u64) -> String {
    let ms = unix_ns / 1_000_000;
    format!("{}.{:03}", ms / 1000, ms % 1000)
}

/// Writes `groups` (times on the run clock, `zero_unix_ns` its zero on the wall clock).
pub fn write(out: &mut impl Write, groups: &[Group], zero_unix_ns: u64) -> std::io::Result<u64> {
    // Families in order of first appearance, each with its (group, field) pairs.
    let mut order: Vec<&str> = vec![];
    let mut members: BTreeMap<&str, Vec<(usize, usize)>> = BTreeMap::new();
    for (gi, g) in groups.iter().enumerate() {
        for (fi, f) in g.fields.iter().enumerate() {
            let e = members.entry(f.metric.as_str()).or_insert_with(|| {
                order.push(f.metric.as_str());
                vec![]
            });
            e.push((gi, fi));
        }
    }
    let mut samples = 0u64;
    for metric in order {
        let m = &members[metric];
        let first = &groups[m[0].0].fields[m[0].1];
        let fam = family(metric, first.counter);
        let kind = if first.counter { "counter" } else { "gauge" };
        writeln!(out, "# TYPE {fam} {kind}")?;
        writeln!(out, "# HELP {fam} {}", help_text(&first.help))?;
        for &(gi, fi) in m {
            let g = &groups[gi];
            let f = &g.fields[fi];
            let labels: Vec<String> = g
                .labels
                .iter()
                .chain(&f.extra)
                .map(|(k, v)| format!("{k}=\"{}\"", label(v)))
                .collect();
            let labels = if labels.is_empty() {
                String::new()
            } else {
                format!("{{{}}}", labels.join(","))
            };
            for (t, v) in g.t_ns.iter().zip(&f.v) {
                if v.is_nan() {
                    continue;
                }
                writeln!(
                    out,
                    "{metric}{labels} {} {}",
                    value(*v),
                    timestamp(zero_unix_ns + t)
                )?;
                samples += 1;
            }
        }
    }
    writeln!(out, "# EOF")?;
    Ok(samples)
}

/// HELP text escaped (backslash and newline).
fn help_text(h: &str) -> String {
    h.replace('\\', "\\\\").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::Field;

    #[test]
    fn one_family_per_name_counters_without_total_and_eof() {
        let f = |metric: &str, counter| Field {
            metric: metric.into(),
            extra: vec![],
            key: "k".into(),
            counter,
            integer: true,
            help: "h".into(),
            v: vec![1.0, f64::NAN, 3.0],
        };
        let g = |dev: &str| Group {
            measurement: "diskstats".into(),
            labels: vec![("device".into(), dev.into())],
            t_ns: vec![0, 1_000_000_000, 2_000_000_000],
            fields: vec![
                f("node_disk_reads_completed_total", true),
                f("node_disk_io_now", false),
            ],
        };
        let mut out = vec![];
        let n = write(&mut out, &[g("a"), g("b\"")], 1_700_000_000_123_456_789).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(n, 8);
        assert_eq!(
            text.matches("# TYPE node_disk_reads_completed counter")
                .count(),
            1
        );
        assert_eq!(text.matches("# TYPE node_disk_io_now gauge").count(), 1);
        assert!(
            text.contains("node_disk_reads_completed_total{device=\"b\\\"\"} 3 1700000002.123\n"),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"));
        // All of a family's samples before the next family.
        let a = text.find("node_disk_io_now{").unwrap();
        assert!(text.rfind("node_disk_reads_completed_total{").unwrap() < a);
    }
}
