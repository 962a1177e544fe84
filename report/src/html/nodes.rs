//! `report` of a `record --agents` run: per node a panel of its devices' read and write
//! MiB/s (`agents_diskstats.csv.gz`) and, when its agent sampled the node's broker, the
//! broker's panels beside it: msgs in/s, MiB/s (bytes in from `agents_varz.csv`, bytes
//! written and read from `agents_proc_io.csv`), CPU % and memory; all on the run's time
//! axis; a source the node lacks draws no panel. And a table of each node's clock offset,
//! its bound and its batches (meta.json `agents`).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use charts::{Panel, Series, Style, Timeline};

use super::escape;
use crate::run::Run;
use format::agents::{self, AgentsMeta, NodeDisk, NodeSeries};

/// The nodes' broker samples: varz (`in_msgs`, `in_bytes`, `cpu_pct`, `mem_bytes`) and
/// proc_io (`write_bytes`, `read_bytes`) per node.
#[derive(Debug, Clone, Default)]
pub(crate) struct Brokers {
    pub varz: BTreeMap<String, NodeSeries>,
    pub proc_io: BTreeMap<String, NodeSeries>,
}

const VARZ_COLUMNS: [&str; 4] = ["in_msgs", "in_bytes", "cpu_pct", "mem_bytes"];
const PROC_IO_COLUMNS: [&str; 2] = ["write_bytes", "read_bytes"];

impl Brokers {
    pub fn read(dir: &std::path::Path) -> anyhow::Result<Brokers> {
        Ok(Brokers {
            varz: agents::read_source(dir, "varz", &VARZ_COLUMNS)?,
            proc_io: agents::read_source(dir, "proc_io", &PROC_IO_COLUMNS)?,
        })
    }
}

/// A counter's rate per second times `scale`, a point per row after the first; a counter
/// that went back (a restarted broker, a new pid) starts again from that row.
fn rate(label: &str, t: &[u64], v: &[f64], scale: f64) -> Series {
    let mut s = Series {
        label: label.into(),
        style: Style::Envelope,
        ..Default::default()
    };
    for i in 1..t.len().min(v.len()) {
        let dt = t[i].saturating_sub(t[i - 1]);
        let dv = v[i] - v[i - 1];
        if dt == 0 || dv.is_nan() || dv < 0.0 {
            continue;
        }
        s.t_s.push(t[i] as f64 / 1e9);
        s.v.push(dv * scale / (dt as f64 / 1e9));
    }
    s
}

/// A level (a gauge) times `scale`.
fn level(label: &str, t: &[u64], v: &[f64], scale: f64) -> Series {
    Series {
        label: label.into(),
        style: Style::Line,
        t_s: t.iter().map(|t| *t as f64 / 1e9).collect(),
        v: v.iter().map(|v| v * scale).collect(),
        ..Default::default()
    }
}

/// The broker panels of `node`: none for a source its agent did not sample.
fn broker_panels(node: &str, b: &Brokers, range: (f64, f64), columns: usize) -> Vec<Panel> {
    const MIB: f64 = 1.0 / 1048576.0;
    let mut out = vec![];
    let panel = |title: String, y: &str, series: Vec<Series>| Panel {
        title,
        y_label: y.into(),
        series: series.into_iter().map(|s| s.fold(range, columns)).collect(),
        ..Default::default()
    };
    let varz = b.varz.get(node).filter(|s| !s.t_ns.is_empty());
    let pio = b.proc_io.get(node).filter(|s| s.t_ns.len() > 1);
    if let Some(v) = varz {
        out.push(panel(
            format!("{node} broker msgs in/s (varz)"),
            "msgs/s",
            vec![rate("in msgs", &v.t_ns, &v.cols[0], 1.0)],
        ));
    }
    let mut mib = vec![];
    if let Some(v) = varz {
        mib.push(rate("in (client bytes, varz)", &v.t_ns, &v.cols[1], MIB));
    }
    if let Some(p) = pio {
        mib.push(rate("written (proc_io)", &p.t_ns, &p.cols[0], MIB));
        mib.push(rate("read (proc_io)", &p.t_ns, &p.cols[1], MIB));
    }
    if !mib.is_empty() {
        out.push(panel(format!("{node} broker MiB/s"), "MiB/s", mib));
    }
    if let Some(v) = varz {
        out.push(panel(
            format!("{node} broker CPU % (varz)"),
            "%",
            vec![level("cpu", &v.t_ns, &v.cols[2], 1.0)],
        ));
        out.push(panel(
            format!("{node} broker memory MiB (varz)"),
            "MiB",
            vec![level("mem", &v.t_ns, &v.cols[3], MIB)],
        ));
    }
    out
}

/// The nodes' timeline: a panel per node, the same time axis as the run's timeline.
pub fn timeline(run: &Run, disks: &[NodeDisk], brokers: &Brokers, meta: &AgentsMeta) -> Timeline {
    let mut t = Timeline {
        title:
            "Nodes (record --agents): MiB/s per device and the node's broker, on this run's clock"
                .into(),
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
        if !p.series.is_empty() {
            t.panels.push(p);
        }
        t.panels
            .extend(broker_panels(node, brokers, range, columns));
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
    let brokers = Brokers::read(&run.dir).unwrap_or_else(|e| {
        let _ = writeln!(s, "<p class=\"notice\">{}</p>", escape(&format!("{e:#}")));
        Brokers::default()
    });
    let t = timeline(run, &disks, &brokers, &meta);
    if !t.panels.is_empty() {
        s.push_str("<figure class=\"timeline\">\n");
        s.push_str(&charts::render_svg(&t));
        s.push_str("\n<figcaption>Per node its devices' panel and its broker's (when its agent samples one), on the same time axis as the run's timeline (seconds since the run's start).</figcaption>\n</figure>\n");
    }
}
