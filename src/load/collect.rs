//! The collector: merges workers' windows into `RUN/load.csv` rows and their totals into
//! the run's summary.
//!
//! `load.csv` (its columns, units and reader: [`crate::format::load`]): one row per
//! window (aligned on the run clock, stamped with the window's start) and role, from the
//! role's first worker's start to its last worker's end, windows in which nothing
//! completed included (a row with 0 ops: a stall is a run of such rows, not a gap that a
//! chart draws as a ramp). Workers send nothing for a window without operations (each
//! says when it starts, [`Msg::Start`]); the collector fills those rows in.
//! `oldest_wait_us`: the sender loop reports, at the first completion or 10 ms tick after
//! each window's end, the oldest intended start among its operations in flight
//! ([`super::record::Recorder::outstanding`]); a row holds the longest of its workers'
//! waits (0: nothing was outstanding), empty for roles that do not track (receivers,
//! responders, the AMQP roles). With the scenario phase (`DISKPULSE_PHASE`) in its `phase` column. Beside
//! it, `load.hlog` ([`crate::format::hist`]): per window and role, the merged latency
//! histogram (tag = the role, from the actual send) and the corrected one (`ROLE.co`,
//! from the intended start), phase-prefixed inside a scenario; a window without any
//! latency (core publish, a broker that is down) has no interval. Rows and intervals are
//! written once a window is 300 ms old (late workers' windows still fit), each batch
//! one locked append (loads of overlapping phases share both files).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use collectors::clock::Clock;
use hdrhistogram::Histogram;
use tokio::sync::mpsc;

use super::record::{ClientTotals, Msg, Role};
use crate::recording::EventLog;

use crate::format::hist::{self, LineWriter};
use crate::format::load::LoadRow;
pub use crate::format::load::HEADER as LOAD_CSV_HEADER;
use crate::recording::writer::SharedAppend;

/// How long after its end a window is written.
const GRACE_NS: u64 = 300_000_000;

struct Acc {
    ops: u64,
    bytes: u64,
    errors: u64,
    lat: Histogram<u64>,
    co: Histogram<u64>,
    /// The longest any worker's oldest operation in flight had waited at the window's end.
    oldest_wait_ns: u64,
}

/// What the collector hands back at the end.
pub struct Collected {
    pub clients: Vec<ClientTotals>,
    pub rows: u64,
}

fn us(h: &Histogram<u64>, q: f64) -> Option<f64> {
    if h.is_empty() {
        None
    } else if q >= 1.0 {
        Some(h.max() as f64 / 1e3)
    } else {
        Some(h.value_at_quantile(q) as f64 / 1e3)
    }
}

/// One load.csv row: the window `[t_ns, t_ns + window_ns)` of which the load ran
/// `active_ns`; `tracked`: the role's workers report what they have in flight.
fn row(
    t_ns: u64,
    window_ns: u64,
    active_ns: u64,
    role: Role,
    a: &Acc,
    phase: Option<u32>,
    tracked: bool,
) -> LoadRow {
    LoadRow {
        t_ns,
        window_ns,
        role: role.name().to_string(),
        ops: a.ops,
        bytes: a.bytes,
        errors: a.errors,
        lat_p50_us: us(&a.lat, 0.5),
        lat_p90_us: us(&a.lat, 0.9),
        lat_p99_us: us(&a.lat, 0.99),
        lat_p999_us: us(&a.lat, 0.999),
        lat_max_us: us(&a.lat, 1.0),
        co_p50_us: us(&a.co, 0.5),
        co_p99_us: us(&a.co, 0.99),
        co_max_us: us(&a.co, 1.0),
        active_ns,
        phase,
        oldest_wait_us: tracked.then(|| a.oldest_wait_ns as f64 / 1e3),
    }
}

/// Where the collector writes: `load.csv` and `load.hlog`, both appended to.
struct Out {
    csv: SharedAppend,
    hlog: SharedAppend,
    csv_path: PathBuf,
    hlog_path: PathBuf,
    lines: LineWriter,
    phase: Option<u32>,
    csv_buf: Vec<u8>,
    hlog_buf: Vec<u8>,
}

impl Out {
    fn open(csv: &Path, clock: Clock) -> anyhow::Result<Out> {
        let phase = crate::format::phase_from_env().map_err(|e| crate::usage!("{e:#}"))?;
        let zero_unix = crate::recording::session::clock_zero_unix_ns(clock.zero_monotonic_ns());
        let hlog_path = csv.with_file_name(hist::LOAD_FILE);
        Ok(Out {
            csv: SharedAppend::open(csv, LOAD_CSV_HEADER)?,
            hlog: SharedAppend::open(&hlog_path, &hist::header("load.hlog", zero_unix))?,
            csv_path: csv.to_path_buf(),
            hlog_path,
            lines: LineWriter::new(),
            phase,
            csv_buf: vec![],
            hlog_buf: vec![],
        })
    }

    fn add(
        &mut self,
        t_ns: u64,
        window_ns: u64,
        active_ns: u64,
        role: Role,
        a: &Acc,
        tracked: bool,
    ) -> anyhow::Result<()> {
        let r = row(t_ns, window_ns, active_ns, role, a, self.phase, tracked);
        self.csv_buf.extend_from_slice(r.to_line().as_bytes());
        for (h, co) in [(&a.lat, false), (&a.co, true)] {
            if !h.is_empty() {
                let tag = hist::tag(self.phase, role.name(), co);
                self.lines
                    .line(&mut self.hlog_buf, &tag, t_ns, window_ns, h)?;
            }
        }
        Ok(())
    }

    /// One locked append per file for what `add` gathered.
    fn flush(&mut self) -> anyhow::Result<()> {
        self.csv
            .append(&self.csv_buf)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", self.csv_path.display()))?;
        self.hlog
            .append(&self.hlog_buf)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", self.hlog_path.display()))?;
        self.csv_buf.clear();
        self.hlog_buf.clear();
        Ok(())
    }
}

/// Where a role has workers: every window from `first` (its first worker's start) to
/// `last` (when its last worker finished; `None` while one runs) is a row.
struct Span {
    live: usize,
    first: u64,
    last: Option<u64>,
}

impl Span {
    fn covers(&self, w: u64) -> bool {
        self.first <= w && self.last.is_none_or(|l| w <= l)
    }
}

fn empty_acc() -> Acc {
    Acc {
        ops: 0,
        bytes: 0,
        errors: 0,
        lat: collectors::directio::latency_histogram(),
        co: collectors::directio::latency_histogram(),
        oldest_wait_ns: 0,
    }
}

/// The windows before `upto` that have no row yet: a row of nothing for each role that
/// had a worker then (a stall is a run of rows with 0 ops, not a gap). `from` is the
/// first window not filled yet, moved to `upto`.
fn fill_idle(
    pending: &mut BTreeMap<(u64, Role), Acc>,
    spans: &BTreeMap<Role, Span>,
    from: &mut u64,
    upto: u64,
) {
    for (role, span) in spans {
        let to = span.last.map_or(upto, |l| l.saturating_add(1).min(upto));
        for w in (*from).max(span.first)..to {
            if span.covers(w) {
                pending.entry((w, *role)).or_insert_with(empty_acc);
            }
        }
    }
    *from = (*from).max(upto);
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
        Some(p) => Some(Out::open(p, clock)?),
        None => None,
    };
    let mut pending: BTreeMap<(u64, Role), Acc> = BTreeMap::new();
    let mut spans: BTreeMap<Role, Span> = BTreeMap::new();
    let mut tracked: std::collections::BTreeSet<Role> = Default::default();
    // Windows before this are written: a late report about one is dropped (no second row).
    let mut written = 0u64;
    // The first window that idle rows were not filled in for yet.
    let mut filled = start_ns / window_ns;
    let mut clients = vec![];
    let mut rows = 0u64;
    let mut seen_kinds: std::collections::BTreeSet<(Role, &'static str)> = Default::default();
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(100));
    // (window start, the part of the window the load ran)
    let clip = |w: u64, end: u64| -> (u64, u64) {
        let w0 = (w * window_ns).max(start_ns);
        let w1 = ((w + 1) * window_ns).min(end);
        (w * window_ns, w1.saturating_sub(w0).max(1))
    };
    let mut write_ready = |pending: &mut BTreeMap<(u64, Role), Acc>,
                           tracked: &std::collections::BTreeSet<Role>,
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
                let (t, active) = clip(k.0, end);
                o.add(t, window_ns, active, k.1, &a, tracked.contains(&k.1))?;
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
                Some(Msg::Start { role, window }) => {
                    let window = window.max(start_ns / window_ns);
                    let s = spans.entry(role).or_insert(Span { live: 0, first: window, last: None });
                    s.live += 1;
                    s.last = None;
                    s.first = s.first.min(window);
                }
                Some(Msg::Window(w)) => {
                    let a = pending.entry((w.window, w.role)).or_insert_with(empty_acc);
                    a.ops += w.ops;
                    a.bytes += w.bytes;
                    a.errors += w.errors;
                    let _ = a.lat.add(&w.lat);
                    let _ = a.co.add(&w.co);
                }
                Some(Msg::Tracks(role)) => {
                    tracked.insert(role);
                }
                Some(Msg::Outstanding { role, window, wait_ns }) => {
                    if window >= written {
                        let a = pending.entry((window, role)).or_insert_with(empty_acc);
                        a.oldest_wait_ns = a.oldest_wait_ns.max(wait_ns);
                    }
                }
                Some(Msg::Done(t)) => {
                    if let Some(s) = spans.get_mut(&t.role) {
                        s.live = s.live.saturating_sub(1);
                        if s.live == 0 {
                            s.last = Some(clock.now_ns().saturating_sub(1) / window_ns);
                        }
                    }
                    clients.push(*t);
                }
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
                fill_idle(&mut pending, &spans, &mut filled, upto);
                write_ready(&mut pending, &tracked, upto, u64::MAX, &mut rows)?;
                written = written.max(upto);
            }
        }
    }
    let end = clock.now_ns();
    // Every window the load overlapped: up to the one holding its last instant.
    fill_idle(
        &mut pending,
        &spans,
        &mut filled,
        end.saturating_sub(1) / window_ns + 1,
    );
    write_ready(&mut pending, &tracked, u64::MAX, end, &mut rows)?;
    clients.sort_by_key(|c| (c.role, c.index));
    Ok(Collected { clients, rows })
}
