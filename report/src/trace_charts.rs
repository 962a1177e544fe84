//! The traced sync calls and block requests on the timeline (`--trace`, issue 11): one
//! lane per process with a mark per sync call at its start, as tall as it took, then
//! per traced broker device a mark per block request at its issue, as tall as its
//! service time, coloured by op. Marks are [`charts::Style::Stems`]: when a pixel column
//! holds many, it shows the slowest, so no slow call hides.

use std::collections::BTreeMap;

use charts::{Panel, Series, Style};

use super::run::Run;

/// The marks of one series as they are read: every point, or (a run with a time axis)
/// folded into the plot's pixel columns as they arrive ([`charts::Folding`]: the same
/// drawing, without holding the points of a traced run of hours).
enum Marks {
    Points(Vec<f64>, Vec<f64>),
    Fold(charts::Folding, usize),
}

impl Marks {
    fn new(geometry: Option<((f64, f64), usize)>) -> Marks {
        match geometry {
            Some((range, columns)) => Marks::Fold(charts::Folding::new(range, columns), 0),
            None => Marks::Points(vec![], vec![]),
        }
    }

    fn push(&mut self, t_s: f64, ms: f64) {
        match self {
            Marks::Points(t, v) => {
                t.push(t_s);
                v.push(ms);
            }
            Marks::Fold(f, n) => {
                f.push(t_s, ms);
                *n += 1;
            }
        }
    }

    fn len(&self) -> usize {
        match self {
            Marks::Points(t, _) => t.len(),
            Marks::Fold(_, n) => *n,
        }
    }

    /// The series, labelled `label` with the number of marks.
    fn series(self, label: &str, color: &str) -> Series {
        let label = format!("{} {label}", self.len());
        let s = Series {
            label,
            t_s: vec![],
            v: vec![],
            style: Style::Stems,
            color: Some(color.into()),
            folded: None,
        };
        match self {
            Marks::Points(t_s, v) => Series { t_s, v, ..s },
            Marks::Fold(f, _) => f.finish(s),
        }
    }
}

/// Processes with their own lane; the rest share one.
const LANES: usize = 4;

const OP_COLORS: [(&str, &str); 4] = [
    ("write", "#d62728"),
    ("read", "#1f77b4"),
    ("flush", "#8c564b"),
    ("discard", "#7f7f7f"),
];

/// The sync-call lanes and the request panels; none when the run was not traced. The
/// calls and requests are read again from the run's files, one pass each; with
/// `geometry` (the plot's time axis and pixel columns) each series is folded as it is
/// read.
pub fn panels(run: &Run, broker: &[String], geometry: Option<((f64, f64), usize)>) -> Vec<Panel> {
    let mut out = vec![];
    let Some(fold) = &run.trace else {
        return out;
    };
    // The busiest processes get a lane each (by their number of calls, then pid).
    let mut lanes = fold.process_counts();
    lanes.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
    let n_rest = lanes.len().saturating_sub(LANES);
    let mut own: Vec<(u32, String, Marks)> = lanes
        .iter()
        .take(LANES)
        .map(|(pid, comm, _)| (*pid, comm.clone(), Marks::new(geometry)))
        .collect();
    let mut rest = Marks::new(geometry);
    let mut requests: BTreeMap<String, BTreeMap<String, Marks>> = BTreeMap::new();
    if !lanes.is_empty() {
        let _ = format::fsync_calls::for_each(&run.dir, |c| {
            let (t, ms) = (c.t_ns as f64 / 1e9, c.dur_ns as f64 / 1e6);
            match own.iter_mut().find(|l| l.0 == c.pid) {
                Some(l) => l.2.push(t, ms),
                None => rest.push(t, ms),
            }
        });
    }
    if fold.requests > 0 {
        let _ = format::block_requests::for_each(&run.dir, |r| {
            if !broker.is_empty() && !broker.contains(&r.device) {
                return;
            }
            // (A key is copied once per device and op, not once per request.)
            if !requests.contains_key(&r.device) {
                requests.insert(r.device.clone(), BTreeMap::new());
            }
            let Some(ops) = requests.get_mut(&r.device) else {
                return;
            };
            if !ops.contains_key(&r.op) {
                ops.insert(r.op.clone(), Marks::new(geometry));
            }
            if let Some(m) = ops.get_mut(&r.op) {
                m.push(r.t_ns as f64 / 1e9, r.service_ns as f64 / 1e6);
            }
        });
    }
    for (pid, comm, marks) in own {
        out.push(Panel {
            title: format!(
                "{comm} (pid {pid}): sync calls, one mark per call at its start, height its duration"
            ),
            y_label: "ms".into(),
            series: vec![marks.series("calls", "#17becf")],
            y_min_zero: true,
            y_scale: Default::default(),
        });
    }
    if rest.len() > 0 {
        out.push(Panel {
            title: format!("{n_rest} other processes: sync calls"),
            y_label: "ms".into(),
            series: vec![rest.series("calls", "#17becf")],
            y_min_zero: true,
            y_scale: Default::default(),
        });
    }
    for (dev, ops) in requests {
        let series = ops
            .into_iter()
            .map(|(op, marks)| {
                let color = OP_COLORS
                    .iter()
                    .find(|c| c.0 == op)
                    .map(|c| c.1)
                    .unwrap_or("#bcbd22");
                let n = marks.len();
                let mut s = marks.series("", color);
                s.label = format!("{op} ({n})");
                s
            })
            .collect();
        out.push(Panel {
            title: format!(
                "{dev} block requests: one mark per request at its issue, height its service time"
            ),
            y_label: "ms".into(),
            series,
            y_min_zero: true,
            y_scale: Default::default(),
        });
    }
    out
}
