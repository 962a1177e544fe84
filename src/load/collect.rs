//! The collector: merges workers' windows into `RUN/load.csv` rows and their totals into
//! the run's summary.
//!
//! ## `load.csv`
//! ```text
//! t_ns,window_ns,role,ops,bytes,errors,lat_p50_us,lat_p90_us,lat_p99_us,lat_p999_us,lat_max_us,co_p50_us,co_p99_us,co_max_us
//! ```
//! One row per window (100 ms by default, aligned on the run clock) and role that saw
//! anything. `t_ns` is the window's end, `window_ns` the part of the window the load ran
//! (shorter for the first and last window), so `ops / window_ns` is a rate. Counts are
//! per window (a column's sum is the run's total). `lat_*` and `co_*` are microseconds
//! with one decimal, empty where the role has no latency (core publish) or the window
//! none; `lat` is from the actual send, `co` from the intended start (see
//! [`super::record`]). Rows are written once a window is 300 ms old (late workers'
//! windows still fit) and flushed at once.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};

use collectors::clock::Clock;
use hdrhistogram::Histogram;
use tokio::sync::mpsc;

use super::record::{ClientTotals, Msg, Role};
use crate::recording::EventLog;

pub const LOAD_CSV_HEADER: &str = "t_ns,window_ns,role,ops,bytes,errors,lat_p50_us,lat_p90_us,lat_p99_us,lat_p999_us,lat_max_us,co_p50_us,co_p99_us,co_max_us";

/// How long after its end a window is written.
const GRACE_NS: u64 = 300_000_000;

struct Acc {
    ops: u64,
    bytes: u64,
    errors: u64,
    lat: Histogram<u64>,
    co: Histogram<u64>,
}

/// What the collector hands back at the end.
pub struct Collected {
    pub clients: Vec<ClientTotals>,
    pub rows: u64,
}

fn us(h: &Histogram<u64>, q: f64) -> String {
    if h.is_empty() {
        String::new()
    } else if q >= 1.0 {
        format!("{:.1}", h.max() as f64 / 1e3)
    } else {
        format!("{:.1}", h.value_at_quantile(q) as f64 / 1e3)
    }
}

/// Formats one load.csv row.
fn row(t_ns: u64, window_ns: u64, role: Role, a: &Acc) -> String {
    format!(
        "{t_ns},{window_ns},{},{},{},{},{},{},{},{},{},{},{},{}\n",
        role.name(),
        a.ops,
        a.bytes,
        a.errors,
        us(&a.lat, 0.5),
        us(&a.lat, 0.9),
        us(&a.lat, 0.99),
        us(&a.lat, 0.999),
        us(&a.lat, 1.0),
        us(&a.co, 0.5),
        us(&a.co, 0.99),
        us(&a.co, 1.0),
    )
}

/// Runs until every sender is gone. `start_ns`: when the load began (clips the first
/// window); `end_ns()` is read at the end to clip the last.
pub async fn collect(
    mut rx: mpsc::UnboundedReceiver<Msg>,
    csv: Option<std::path::PathBuf>,
    clock: Clock,
    window_ns: u64,
    start_ns: u64,
    events: EventLog,
) -> anyhow::Result<Collected> {
    let mut out = match csv.as_deref() {
        Some(p) => {
            let f = File::options()
                .create(true)
                .append(true)
                .open(p)
                .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", p.display()))?;
            let mut w = BufWriter::new(f);
            if std::fs::metadata(p).map(|m| m.len() == 0).unwrap_or(true) {
                writeln!(w, "{LOAD_CSV_HEADER}")?;
                w.flush()?;
            }
            Some(w)
        }
        None => None,
    };
    let mut pending: BTreeMap<(u64, Role), Acc> = BTreeMap::new();
    let mut clients = vec![];
    let mut rows = 0u64;
    let mut seen_kinds: std::collections::BTreeSet<(Role, &'static str)> = Default::default();
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(100));
    let clip = |w: u64, end: u64| -> (u64, u64) {
        let w0 = (w * window_ns).max(start_ns);
        let w1 = ((w + 1) * window_ns).min(end);
        (w1, w1.saturating_sub(w0).max(1))
    };
    let mut write_ready = |pending: &mut BTreeMap<(u64, Role), Acc>,
                           upto_window: u64,
                           end: u64,
                           rows: &mut u64|
     -> anyhow::Result<()> {
        let keys: Vec<(u64, Role)> = pending
            .keys()
            .take_while(|(w, _)| *w < upto_window)
            .copied()
            .collect();
        for k in keys {
            let a = pending.remove(&k).expect("key just listed");
            if let Some(o) = out.as_mut() {
                let (t, len) = clip(k.0, end);
                o.write_all(row(t, len, k.1, &a).as_bytes())?;
                *rows += 1;
            }
        }
        if let Some(o) = out.as_mut() {
            o.flush()?;
        }
        Ok(())
    };
    loop {
        tokio::select! {
            m = rx.recv() => match m {
                Some(Msg::Window(w)) => {
                    let a = pending.entry((w.window, w.role)).or_insert_with(|| Acc {
                        ops: 0, bytes: 0, errors: 0,
                        lat: collectors::directio::latency_histogram(),
                        co: collectors::directio::latency_histogram(),
                    });
                    a.ops += w.ops;
                    a.bytes += w.bytes;
                    a.errors += w.errors;
                    let _ = a.lat.add(&w.lat);
                    let _ = a.co.add(&w.co);
                }
                Some(Msg::Done(t)) => clients.push(*t),
                Some(Msg::ErrorKind(role, kind, detail)) => {
                    // One event per role and kind, however many workers see it.
                    if seen_kinds.insert((role, kind)) {
                        events.error(role.name(), kind, &detail);
                    }
                }
                None => break,
            },
            _ = tick.tick() => {
                let now = clock.now_ns();
                let upto = now.saturating_sub(GRACE_NS) / window_ns;
                write_ready(&mut pending, upto, u64::MAX, &mut rows)?;
            }
        }
    }
    let end = clock.now_ns();
    write_ready(&mut pending, u64::MAX, end, &mut rows)?;
    clients.sort_by_key(|c| (c.role, c.index));
    Ok(Collected { clients, rows })
}
