//! The collector: merges workers' windows into `RUN/load.csv` rows and their totals into
//! the run's summary.
//!
//! `load.csv` (its columns, units and reader: [`format::load`]): one row per
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
//! it, `load.hlog` ([`format::hist`]): per window and role, the merged latency
//! histogram (tag = the role, from the actual send) and the corrected one (`ROLE.co`,
//! from the intended start), phase-prefixed inside a scenario; a window without any
//! latency (core publish, a broker that is down) has no interval. Rows and intervals are
//! written once a window is 300 ms old and no worker still holds operations of it
//! ([`super::record::Hold`]; a worker waiting through a stall holds its window's rows
//! back up to 3 s), so rows are strictly increasing, one per window and role; each batch
//! one locked append (loads of overlapping phases share both files).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use collectors::clock::Clock;
use hdrhistogram::Histogram;
use tokio::sync::mpsc;

use super::record::{ClientTotals, Msg, Role};
use crate::recording::EventLog;

use crate::recording::writer::SharedAppend;
use format::events::{Body, LoadLateWindows};
use format::hist::{self, LineWriter};
use format::load::LoadRow;
pub use format::load::HEADER as LOAD_CSV_HEADER;

/// How long after its end a window is written.
const GRACE_NS: u64 = 300_000_000;
/// How long a worker's open window may hold rows back (each pending row holds two
/// histograms): a window older than this is written without the worker's part, which
/// goes to the first unwritten row when it comes ([`Collected::late_windows`]).
const MAX_HOLD_NS: u64 = 3_000_000_000;

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
    /// Worker windows that came after their row was written (a worker's clock read more
    /// than the grace before it counted): added to the role's first unwritten row.
    pub late_windows: u64,
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
        let phase = format::phase_from_env().map_err(|e| format::usage!("{e:#}"))?;
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

/// What the collector knows between rows.
struct State {
    pending: BTreeMap<(u64, Role), Acc>,
    spans: BTreeMap<Role, Span>,
    tracked: std::collections::BTreeSet<Role>,
    /// Each worker's [`super::record::Hold`].
    holds: Vec<super::record::Hold>,
    /// Windows before this are written: a late report about one goes to this one.
    written: u64,
    late: u64,
    clients: Vec<ClientTotals>,
    seen_kinds: std::collections::BTreeSet<(Role, &'static str)>,
    clock: Clock,
    window_ns: u64,
    start_ns: u64,
    events: EventLog,
}

impl State {
    /// The earliest window a worker still holds operations of (`u64::MAX`: none).
    /// A worker that is gone (its recorder dropped without finishing) holds nothing.
    fn held(&mut self) -> u64 {
        self.holds.retain(|h| std::sync::Arc::strong_count(h) > 1);
        self.holds
            .iter()
            .map(|h| h.load(std::sync::atomic::Ordering::Acquire))
            .min()
            .unwrap_or(u64::MAX)
    }

    fn take(&mut self, m: Msg) {
        match m {
            Msg::Start { role, window, hold } => {
                let window = window.max(self.start_ns / self.window_ns);
                let s = self.spans.entry(role).or_insert(Span {
                    live: 0,
                    first: window,
                    last: None,
                });
                s.live += 1;
                s.last = None;
                s.first = s.first.min(window);
                self.holds.push(hold);
            }
            Msg::Window(w) => {
                let window = if w.window < self.written {
                    self.late += 1;
                    self.written
                } else {
                    w.window
                };
                let a = self
                    .pending
                    .entry((window, w.role))
                    .or_insert_with(empty_acc);
                a.ops += w.ops;
                a.bytes += w.bytes;
                a.errors += w.errors;
                let _ = a.lat.add(&w.lat);
                let _ = a.co.add(&w.co);
            }
            Msg::Tracks(role) => {
                self.tracked.insert(role);
            }
            Msg::Outstanding {
                role,
                window,
                wait_ns,
            } => {
                if window >= self.written {
                    let a = self.pending.entry((window, role)).or_insert_with(empty_acc);
                    a.oldest_wait_ns = a.oldest_wait_ns.max(wait_ns);
                }
            }
            Msg::Done(t) => {
                if let Some(s) = self.spans.get_mut(&t.role) {
                    s.live = s.live.saturating_sub(1);
                    if s.live == 0 {
                        s.last = Some(self.clock.now_ns().saturating_sub(1) / self.window_ns);
                    }
                }
                self.clients.push(*t);
            }
            Msg::ErrorKind(role, kind, detail) => {
                // One event per role and kind, however many workers see it.
                if self.seen_kinds.insert((role, kind)) {
                    self.events.error(role.name(), kind, &detail);
                }
            }
        }
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
    // The first window that idle rows were not filled in for yet.
    let mut filled = start_ns / window_ns;
    let mut rows = 0u64;
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
    let mut st = State {
        pending: BTreeMap::new(),
        spans: BTreeMap::new(),
        tracked: Default::default(),
        holds: vec![],
        written: 0,
        late: 0,
        clients: vec![],
        seen_kinds: Default::default(),
        clock,
        window_ns,
        start_ns,
        events,
    };
    loop {
        tokio::select! {
            m = rx.recv() => match m {
                Some(m) => st.take(m),
                None => break,
            },
            _ = tick.tick() => {
                let now = clock.now_ns();
                // No row at or after a window a worker still holds operations of; its
                // message is in the channel once its hold moved on: take what is there.
                let held = st.held();
                while let Ok(m) = rx.try_recv() {
                    st.take(m);
                }
                let upto = (now.saturating_sub(GRACE_NS) / window_ns)
                    .min(held.max(now.saturating_sub(MAX_HOLD_NS) / window_ns));
                if upto > st.written {
                    fill_idle(&mut st.pending, &st.spans, &mut filled, upto);
                    write_ready(&mut st.pending, &st.tracked, upto, u64::MAX, &mut rows)?;
                    st.written = upto;
                }
            }
        }
    }
    let end = clock.now_ns();
    // Every window the load overlapped: up to the one holding its last instant.
    fill_idle(
        &mut st.pending,
        &st.spans,
        &mut filled,
        end.saturating_sub(1) / window_ns + 1,
    );
    write_ready(&mut st.pending, &st.tracked, u64::MAX, end, &mut rows)?;
    if st.late > 0 {
        // Counted in the row after their own: say so rather than move them silently.
        st.events.event(Body::LoadLateWindows(LoadLateWindows {
            windows: st.late,
            max_hold_ms: MAX_HOLD_NS / 1_000_000,
        }));
    }
    let mut clients = st.clients;
    clients.sort_by_key(|c| (c.role, c.index));
    Ok(Collected {
        clients,
        rows,
        late_windows: st.late,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::record::Recorder;

    const W: u64 = 5_000_000;

    /// Two workers of one role; `a` counts one op, then waits `stall` while `b` counts an
    /// op every 5 ms, then `a` counts again (sending its first window only then).
    /// Returns the role's rows as (t_ns, ops) and the events file's text.
    async fn stalled_worker(stall: std::time::Duration) -> (Vec<(u64, u64)>, u64, String) {
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let csv = dir.path().join("load.csv");
        let clock = Clock::start();
        let events = EventLog::create(&dir.path().join("events.jsonl"), clock).unwrap();
        let (tx, rx) = mpsc::unbounded_channel();
        let start = clock.now_ns();
        let collector = tokio::spawn(collect(rx, Some(csv.clone()), clock, W, start, events));
        let mut a = Recorder::new(Role::JsPub, 0, "nats://x", clock, W, tx.clone());
        let mut b = Recorder::new(Role::JsPub, 1, "nats://x", clock, W, tx.clone());
        drop(tx);
        let first = clock.now_ns();
        a.op(first, 10);
        let until = std::time::Instant::now() + stall;
        let mut n = 1;
        while std::time::Instant::now() < until {
            b.op(clock.now_ns(), 10);
            n += 1;
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        a.op(clock.now_ns(), 10);
        n += 1;
        a.finish();
        b.finish();
        let c = collector.await.unwrap().unwrap();
        assert_eq!(c.clients.iter().map(|c| c.ops).sum::<u64>(), n);
        let rows: Vec<(u64, u64)> = std::fs::read_to_string(&csv)
            .unwrap()
            .lines()
            .skip(1)
            .map(|l| {
                let f: Vec<&str> = l.split(',').collect();
                (f[0].parse().unwrap(), f[3].parse().unwrap())
            })
            .collect();
        assert_eq!(
            rows.iter().map(|r| r.1).sum::<u64>(),
            n,
            "every op in a row"
        );
        for pair in rows.windows(2) {
            assert!(
                pair[0].0 < pair[1].0,
                "rows not strictly increasing: {pair:?}"
            );
        }
        let first_row = rows.iter().find(|r| r.0 == first / W * W).unwrap();
        let ev = std::fs::read_to_string(dir.path().join("events.jsonl")).unwrap();
        (rows.clone(), first_row.1, ev)
    }

    #[tokio::test]
    async fn a_worker_waiting_past_the_grace_holds_its_window_back_not_doubles_it() {
        // 0.8 s: longer than the 300 ms grace, shorter than the 3 s hold.
        let (rows, in_first, ev) = stalled_worker(std::time::Duration::from_millis(800)).await;
        assert!(rows.len() > 100, "{}", rows.len());
        // a's first op is in its own window's row (with b's first, when they share one).
        assert!(in_first >= 1, "{rows:?}");
        assert!(!ev.contains("load_late_windows"), "{ev}");
    }

    #[tokio::test]
    async fn a_worker_waiting_past_the_hold_has_its_window_counted_late_and_said() {
        let (rows, _, ev) = stalled_worker(std::time::Duration::from_millis(3_600)).await;
        assert!(rows.len() > 500, "{}", rows.len());
        assert!(ev.contains("\"kind\":\"load_late_windows\""), "{ev}");
        assert!(ev.contains("\"windows\":1"), "{ev}");
    }
}
