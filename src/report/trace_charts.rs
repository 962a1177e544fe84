//! The traced sync calls and block requests on the timeline (`--trace`, issue 11): one
//! lane per process with a mark per sync call at its start, as tall as it took, then
//! per traced broker device a mark per block request at its issue, as tall as its
//! service time, coloured by op. Marks are [`charts::Style::Stems`]: when a pixel column
//! holds many, it shows the slowest, so no slow call hides.

use std::collections::BTreeMap;

use charts::{Panel, Series, Style};

use super::run::Run;

/// Marks of one series: `(t_s, ms)`.
type Marks = Vec<(f64, f64)>;

/// Processes with their own lane; the rest share one.
const LANES: usize = 4;

const OP_COLORS: [(&str, &str); 4] = [
    ("write", "#d62728"),
    ("read", "#1f77b4"),
    ("flush", "#8c564b"),
    ("discard", "#7f7f7f"),
];

fn stems(label: &str, pts: &[(f64, f64)], color: &str) -> Series {
    Series {
        label: label.into(),
        t_s: pts.iter().map(|p| p.0).collect(),
        v: pts.iter().map(|p| p.1).collect(),
        style: Style::Stems,
        color: Some(color.into()),
        folded: None,
    }
}

/// The sync-call lanes and the request panels; none when the run was not traced.
pub fn panels(run: &Run, broker: &[String]) -> Vec<Panel> {
    let mut out = vec![];
    if let Some(calls) = &run.fsync_calls {
        let mut by: BTreeMap<u32, (String, Marks)> = BTreeMap::new();
        for c in calls {
            by.entry(c.pid)
                .or_insert_with(|| (c.comm.clone(), vec![]))
                .1
                .push((c.t_ns as f64 / 1e9, c.dur_ns as f64 / 1e6));
        }
        let mut lanes: Vec<(u32, String, Marks)> =
            by.into_iter().map(|(p, (c, v))| (p, c, v)).collect();
        lanes.sort_by(|a, b| b.2.len().cmp(&a.2.len()).then(a.0.cmp(&b.0)));
        let rest: Marks = lanes
            .iter()
            .skip(LANES)
            .flat_map(|l| l.2.iter().copied())
            .collect();
        let n_rest = lanes.len().saturating_sub(LANES);
        for (pid, comm, pts) in lanes.iter().take(LANES) {
            out.push(Panel {
                title: format!(
                    "{comm} (pid {pid}): sync calls, one mark per call at its start, height its duration"
                ),
                y_label: "ms".into(),
                series: vec![stems(&format!("{} calls", pts.len()), pts, "#17becf")],
                y_min_zero: true,
            });
        }
        if !rest.is_empty() {
            out.push(Panel {
                title: format!("{n_rest} other processes: sync calls"),
                y_label: "ms".into(),
                series: vec![stems(&format!("{} calls", rest.len()), &rest, "#17becf")],
                y_min_zero: true,
            });
        }
    }
    if let Some(reqs) = &run.block_requests {
        let mut by: BTreeMap<&str, BTreeMap<&str, Marks>> = BTreeMap::new();
        for r in reqs
            .iter()
            .filter(|r| broker.is_empty() || broker.contains(&r.device))
        {
            by.entry(&r.device)
                .or_default()
                .entry(&r.op)
                .or_default()
                .push((r.t_ns as f64 / 1e9, r.service_ns as f64 / 1e6));
        }
        for (dev, ops) in by {
            let series = ops
                .iter()
                .map(|(op, pts)| {
                    let color = OP_COLORS
                        .iter()
                        .find(|c| c.0 == *op)
                        .map(|c| c.1)
                        .unwrap_or("#bcbd22");
                    stems(&format!("{op} ({})", pts.len()), pts, color)
                })
                .collect();
            out.push(Panel {
                title: format!("{dev} block requests: one mark per request at its issue, height its service time"),
                y_label: "ms".into(),
                series,
                y_min_zero: true,
            });
        }
    }
    out
}
