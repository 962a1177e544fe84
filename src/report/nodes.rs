//! `report` of a `record --agents` run: one panel per node (its devices' read and write
//! MiB/s from `agents_diskstats.csv.gz`) on the run's time axis, and a table of each
//! node's clock offset, its bound and its batches (meta.json `agents`).

use std::fmt::Write as _;

use charts::{Panel, Series, Style, Timeline};

use super::html::escape;
use super::run::Run;
use crate::format::agents::{self, AgentsMeta, NodeDisk};

/// The nodes' timeline: a panel per node, the same time axis as the run's timeline.
pub fn timeline(run: &Run, disks: &[NodeDisk], meta: &AgentsMeta) -> Timeline {
    let mut t = Timeline {
        title: "Nodes (record --agents): MiB/s per device, on this run's clock".into(),
        x_range_s: (0.0, run.duration_ns as f64 / 1e9),
        ..Default::default()
    };
    let (range, columns) = charts::plot_geometry(&t);
    for (node, nm) in &meta.nodes {
        let mut p = Panel {
            title: format!(
                "{node} MiB/s (offset {}, bound {})",
                nm.offset_ns
                    .map_or("unknown".into(), |o| format!("{:+.3} ms", o as f64 / 1e6)),
                nm.bound_ns
                    .map_or("–".into(), |b| format!("±{:.3} ms", b as f64 / 1e6)),
            ),
            y_label: "MiB/s".into(),
            ..Default::default()
        };
        for d in disks.iter().filter(|d| &d.node == node) {
            for (what, v) in [("read", &d.sectors_read), ("write", &d.sectors_written)] {
                let mut s = Series {
                    label: format!("{} {what}", d.device),
                    style: Style::Envelope,
                    ..Default::default()
                };
                for i in 1..d.t_ns.len() {
                    let dt = d.t_ns[i].saturating_sub(d.t_ns[i - 1]);
                    if dt == 0 {
                        continue;
                    }
                    let bytes = v[i].saturating_sub(v[i - 1]) as f64 * 512.0;
                    s.t_s.push(d.t_ns[i] as f64 / 1e9);
                    s.v.push(bytes / (1 << 20) as f64 / (dt as f64 / 1e9));
                }
                p.series.push(s.fold(range, columns));
            }
        }
        t.panels.push(p);
    }
    t
}

/// The HTML section (nothing for a run without agents).
pub fn section(s: &mut String, run: &Run) {
    let Some(meta) = agents::read_meta(&run.dir) else {
        return;
    };
    let disks = match agents::read_diskstats(&run.dir) {
        Ok(d) => d.unwrap_or_default(),
        Err(e) => {
            let _ = writeln!(s, "<p class=\"notice\">{}</p>", escape(&format!("{e:#}")));
            vec![]
        }
    };
    s.push_str("<h3>Nodes</h3>\n<p class=\"muted\">Samples of other hosts' agents, mapped onto this run's clock: agent time minus the node's offset (agent clock minus this clock, from the clock probe with the lowest round trip); the true offset lies within the bound (half that round trip).</p>\n");
    s.push_str("<table>\n<tr><th>node</th><th class=\"num\">offset</th><th class=\"num\">bound</th><th class=\"num\">probes</th><th class=\"num\">diskstats batches</th><th class=\"num\">lost</th><th class=\"num\">duplicates dropped</th><th class=\"num\">agent dropped</th><th class=\"num\">reconnects</th><th class=\"num\">max lag</th><th>devices</th></tr>\n");
    for (node, nm) in &meta.nodes {
        let sum = |f: fn(&agents::SourceMeta) -> u64| nm.sources.values().map(f).sum::<u64>();
        let lag = nm.sources.values().filter_map(|x| x.max_lag_ns).max();
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
            escape(node),
            nm.offset_ns
                .map_or("–".into(), |o| format!("{:+.3} ms", o as f64 / 1e6)),
            nm.bound_ns
                .map_or("–".into(), |b| format!("±{:.3} ms", b as f64 / 1e6)),
            nm.probes,
            nm.sources.get("diskstats").map_or(0, |x| x.batches),
            sum(|x| x.lost),
            sum(|x| x.duplicates),
            nm.agent_dropped_batches,
            nm.agent_reconnects,
            lag.map_or("–".into(), |l| format!("{:.0} ms", l as f64 / 1e6)),
            escape(&nm.devices.join(", ")),
        );
    }
    s.push_str("</table>\n");
    if !disks.is_empty() {
        let t = timeline(run, &disks, &meta);
        s.push_str("<figure class=\"timeline\">\n");
        s.push_str(&charts::render_svg(&t));
        s.push_str("\n<figcaption>One panel per node, on the same time axis as the run's timeline (seconds since the run's start).</figcaption>\n</figure>\n");
    }
}
