//! `record --agents`: subscribes to the agents' batches, probes each agent's clock, and
//! writes the rows, mapped onto the recorder's clock, into the run directory
//! ([`format::agents`]).
//!
//! Per node and source, batches are written in sequence order, each once: a repeated one
//! is counted (`duplicates`) and dropped; a missing one (a gap before a later batch, or
//! behind the last number the agent's heartbeat names) is asked for again every second
//! on `diskpulse.<node>.resend`, and after [`GIVE_UP`] counted `lost` and skipped. Rows
//! wait until the node's clock has been probed once (they are mapped with its estimate).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use collectors::clock::Clock;
use futures::StreamExt;

use super::{best_probe, decode_batch, subject, Probe, Status, SOURCES};
use crate::load::connect::ConnectArgs;
use crate::recording::chunks::RunFiles;
use crate::recording::writer::{ChunkSink, GZIP_LEVEL};
use crate::recording::EventLog;
use format::agents::{self as fmt, AgentsMeta, NodeMeta, SourceMeta};
use format::csv::put_u64;
use format::events::{self as ev, Body};

/// How long a gap is asked for again before its batches are counted lost.
const GIVE_UP: Duration = Duration::from_secs(10);
/// Probes at the start (50 ms apart), then one every [`PROBE_EVERY`].
const FIRST_PROBES: u32 = 10;
const PROBE_EVERY: Duration = Duration::from_secs(2);
/// The probes the estimate chooses from: those of the last 30 s.
const PROBE_WINDOW_NS: i128 = 30_000_000_000;

/// A connection made before the run directory exists (a bad server fails with nothing
/// written).
pub struct Connected {
    rt: tokio::runtime::Runtime,
    client: async_nats::Client,
    nodes: Vec<String>,
    servers: Vec<String>,
}

/// Connects to the servers of `c` (fails within a few seconds if none answers).
pub fn connect(c: &ConnectArgs, nodes: Vec<String>) -> anyhow::Result<Connected> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let client = rt.block_on(super::node::connect_forever(
        c,
        "diskpulse-record-agents",
        false,
    ))?;
    let servers = c
        .server_list()
        .iter()
        .map(|u| format::redact::text(u))
        .collect();
    Ok(Connected {
        rt,
        client,
        nodes,
        servers,
    })
}

/// The running collector.
pub struct Collector {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<anyhow::Result<AgentsMeta>>,
    nodes: Vec<String>,
    /// Per node: a clock probe has come back (the agent runs and is connected).
    answered: Arc<Vec<AtomicBool>>,
}

impl Connected {
    /// Starts collecting into `dir`, on the recording's `clock` (`zero_unix_ns`: its zero
    /// on the wall clock).
    pub fn start(
        self,
        files: &RunFiles,
        clock: Clock,
        zero_unix_ns: u64,
        events: EventLog,
    ) -> anyhow::Result<Collector> {
        // Cut by the recording's `--chunk` and dropped by its `--keep` as its own files
        // are; `t_ns` is these rows' second cell (after `node`).
        let mut sinks = HashMap::new();
        for s in SOURCES {
            let level = (s == "diskstats").then_some(GZIP_LEVEL);
            sinks.insert(
                s.to_string(),
                files.sink_at(fmt::file(s), &fmt::header(s), level, 1)?,
            );
        }
        let clock_sink = files.sink_at(fmt::CLOCK_FILE, fmt::CLOCK_HEADER, None, 1)?;
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let node_names = self.nodes.clone();
        let answered: Arc<Vec<AtomicBool>> =
            Arc::new(self.nodes.iter().map(|_| AtomicBool::new(false)).collect());
        let ans = answered.clone();
        let thread = std::thread::Builder::new()
            .name("agents".into())
            .spawn(move || {
                let Connected {
                    rt,
                    client,
                    nodes,
                    servers,
                } = self;
                let r = rt.block_on(collect(
                    client,
                    nodes,
                    servers,
                    sinks,
                    clock_sink,
                    clock,
                    zero_unix_ns,
                    events,
                    st,
                    ans,
                ));
                rt.shutdown_timeout(Duration::from_secs(1));
                r
            })?;
        Ok(Collector {
            stop,
            thread,
            nodes: node_names,
            answered,
        })
    }
}

impl Collector {
    /// The nodes whose agent has not answered a clock request yet.
    pub fn not_answered(&self) -> Vec<String> {
        self.nodes
            .iter()
            .zip(self.answered.iter())
            .filter(|(_, a)| !a.load(Ordering::Relaxed))
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// Stops (after the batches in flight and a last try for gaps) and returns `agents`
    /// for meta.json.
    pub fn finish(self) -> anyhow::Result<AgentsMeta> {
        self.stop.store(true, Ordering::SeqCst);
        self.thread
            .join()
            .map_err(|_| anyhow::anyhow!("the agents' collector panicked"))?
    }
}

#[derive(Default)]
struct Src {
    expected: Option<u64>,
    pending: BTreeMap<u64, (u64, Bytes)>,
    gap_since: Option<Instant>,
    last_resend: Option<Instant>,
    last_arrival: Option<Instant>,
    meta: SourceMeta,
}

struct Node {
    name: String,
    probes: Vec<Probe>,
    best: Option<Probe>,
    srcs: Vec<Src>,
    status: Option<Status>,
    max_bound_used: Option<u64>,
    /// The run is ending: write with whatever estimate there is.
    last_call: bool,
}

impl Node {
    /// Writes what can be written in sequence order.
    fn drain(&mut self, i: usize, sink: &mut ChunkSink, now_ns: u64, zero_unix_ns: u64) {
        // The first probes come 50 ms apart: rows wait for all of them (or 3 s, or the
        // end), so the first rows are not mapped with a round trip the machine's load inflated.
        let first_old = self
            .probes
            .first()
            .is_some_and(|p| now_ns as i128 - (p.t4 - zero_unix_ns as i128) > 3_000_000_000);
        if self.probes.len() < FIRST_PROBES as usize && !self.last_call && !first_old {
            return;
        }
        let Some(best) = self.best else { return };
        let offset = best.offset_ns();
        let bound = (best.rtt_ns() / 2) as u64;
        let s = &mut self.srcs[i];
        let Some(mut exp) = s.expected else { return };
        while let Some((base, rows)) = s.pending.remove(&exp) {
            let last = write_rows(
                &self.name,
                base,
                &rows,
                offset,
                zero_unix_ns,
                sink,
                &mut s.meta,
            );
            sink.row_done(now_ns);
            if let Some(t) = last {
                let lag = now_ns.saturating_sub(t);
                s.meta.max_lag_ns = Some(s.meta.max_lag_ns.unwrap_or(0).max(lag));
            }
            s.meta.batches += 1;
            s.meta.last_seq = Some(exp);
            self.max_bound_used = Some(self.max_bound_used.unwrap_or(0).max(bound));
            exp += 1;
        }
        s.expected = Some(exp);
        if s.pending.is_empty() {
            s.gap_since = None;
        }
    }
}

/// `node,t_ns,rest` for each row: `t_ns` = agent time (`base + t`) minus the offset,
/// on the recorder's run clock. Returns the last row's `t_ns`.
fn write_rows(
    node: &str,
    base: u64,
    rows: &[u8],
    offset: i128,
    zero_unix_ns: u64,
    sink: &mut ChunkSink,
    m: &mut SourceMeta,
) -> Option<u64> {
    let mut last = None;
    for line in rows.split(|&b| b == b'\n') {
        let Some(comma) = line.iter().position(|&b| b == b',') else {
            continue;
        };
        let Some(t) = std::str::from_utf8(&line[..comma])
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
        else {
            continue;
        };
        let t_rec = base as i128 + t as i128 - offset - zero_unix_ns as i128;
        if t_rec < 0 {
            m.rows_before_start += 1;
            continue;
        }
        let b = sink.buf();
        b.extend_from_slice(node.as_bytes());
        b.push(b',');
        put_u64(b, t_rec as u64);
        b.extend_from_slice(&line[comma..]);
        b.push(b'\n');
        m.rows += 1;
        last = Some(t_rec as u64);
    }
    last
}

#[allow(clippy::too_many_arguments)]
#[allow(
    clippy::too_many_lines,
    reason = "one select loop over the agents' subjects: every arm shares the per-node state it updates"
)]
async fn collect(
    client: async_nats::Client,
    names: Vec<String>,
    servers: Vec<String>,
    mut sinks: HashMap<String, ChunkSink>,
    mut clock_sink: ChunkSink,
    clock: Clock,
    zero_unix_ns: u64,
    events: EventLog,
    stop: Arc<AtomicBool>,
    answered: Arc<Vec<AtomicBool>>,
) -> anyhow::Result<AgentsMeta> {
    let mut subs = vec![];
    for n in &names {
        subs.push(client.subscribe(format!("diskpulse.{n}.*")).await?);
    }
    super::super::load::connect::round_trip(&client).await?;
    let mut msgs = futures::stream::select_all(subs);
    let mut nodes: Vec<Node> = names
        .iter()
        .map(|n| Node {
            name: n.clone(),
            probes: vec![],
            best: None,
            srcs: SOURCES.iter().map(|_| Src::default()).collect(),
            status: None,
            max_bound_used: None,
            last_call: false,
        })
        .collect();
    let index: HashMap<String, usize> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.clone(), i))
        .collect();
    // The clock probes: a task per node, results through a channel.
    let (ptx, mut prx) = tokio::sync::mpsc::unbounded_channel::<(usize, Probe)>();
    let probe_stop = Arc::new(AtomicBool::new(false));
    let mut probers = vec![];
    for (i, n) in names.iter().enumerate() {
        let (c, tx, subj, ps) = (
            client.clone(),
            ptx.clone(),
            subject(n, "clock"),
            probe_stop.clone(),
        );
        probers.push(tokio::spawn(async move {
            let now = || zero_unix_ns as i128 + clock.now_ns() as i128;
            let mut k = 0u32;
            while !ps.load(Ordering::Relaxed) {
                let t1 = now();
                let r = tokio::time::timeout(
                    Duration::from_secs(1),
                    c.request(subj.clone(), Bytes::new()),
                )
                .await;
                let t4 = now();
                if let Ok(Ok(m)) = r {
                    let text = String::from_utf8_lossy(&m.payload).to_string();
                    let mut it = text.split(' ').map(|x| x.parse::<i128>());
                    if let (Some(Ok(t2)), Some(Ok(t3))) = (it.next(), it.next()) {
                        let _ = tx.send((i, Probe { t1, t2, t3, t4 }));
                        k += 1;
                    }
                }
                let wait = if k < FIRST_PROBES {
                    Duration::from_millis(50)
                } else {
                    PROBE_EVERY
                };
                // Sleep in short steps so a stop is quick.
                let until = Instant::now() + wait;
                while Instant::now() < until && !ps.load(Ordering::Relaxed) {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }));
    }
    drop(ptx);
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    let mut stopping: Option<Instant> = None;
    loop {
        tokio::select! {
            m = msgs.next() => {
                let Some(m) = m else { break };
                let mut parts = m.subject.as_str().splitn(3, '.');
                let (_, Some(node), Some(what)) = (parts.next(), parts.next(), parts.next()) else { continue };
                let Some(&ni) = index.get(node) else { continue };
                let n = &mut nodes[ni];
                if what == "status" {
                    if let Ok(st) = serde_json::from_slice::<Status>(&m.payload) {
                        n.status = Some(st);
                    }
                    continue;
                }
                let Some(si) = SOURCES.iter().position(|s| *s == what) else { continue };
                let Some((head, rows)) = decode_batch(&m.payload) else {
                    events.error("agents", "batch", &format!("{node}.{what}: a message that is not a batch ({} bytes)", m.payload.len()));
                    continue;
                };
                let s = &mut n.srcs[si];
                s.meta.bytes += m.payload.len() as u64;
                s.last_arrival = Some(Instant::now());
                if s.expected.is_none() {
                    s.expected = Some(head.seq);
                    s.meta.first_seq = Some(head.seq);
                    events.event(Body::AgentFirstBatch(ev::AgentFirstBatch {
                        node: node.to_string(),
                        source: what.to_string(),
                        seq: head.seq,
                    }));
                }
                if head.seq < s.expected.unwrap_or(0) || s.pending.contains_key(&head.seq) {
                    s.meta.duplicates += 1;
                    continue;
                }
                let rows = m.payload.slice_ref(rows);
                s.pending.insert(head.seq, (head.base_ns, rows));
                n.drain(si, sinks.get_mut(SOURCES[si]).expect("a sink per source"), clock.now_ns(), zero_unix_ns);
            }
            p = prx.recv() => {
                let Some((ni, p)) = p else { continue };
                answered[ni].store(true, Ordering::Relaxed);
                let n = &mut nodes[ni];
                n.probes.push(p);
                n.best = best_probe(&n.probes, PROBE_WINDOW_NS);
                let b = clock_sink.buf();
                b.extend_from_slice(n.name.as_bytes());
                b.push(b',');
                put_u64(b, (p.t4 - zero_unix_ns as i128).max(0) as u64);
                b.extend_from_slice(format!(",{},{}\n", p.offset_ns(), p.rtt_ns()).as_bytes());
                clock_sink.row_done(clock.now_ns());
                for (si, src) in SOURCES.iter().enumerate() {
                    n.drain(si, sinks.get_mut(*src).expect("a sink per source"), clock.now_ns(), zero_unix_ns);
                }
            }
            _ = tick.tick() => {
                for n in nodes.iter_mut() {
                    for (si, src) in SOURCES.iter().enumerate() {
                        n.drain(si, sinks.get_mut(*src).expect("a sink per source"), clock.now_ns(), zero_unix_ns);
                        chase_gap(&client, n, si, &events).await;
                        if !n.srcs[si].pending.is_empty() {
                            n.drain(si, sinks.get_mut(*src).expect("a sink per source"), clock.now_ns(), zero_unix_ns);
                        }
                    }
                }
                if stop.load(Ordering::Relaxed) {
                    let since = *stopping.get_or_insert_with(Instant::now);
                    probe_stop.store(true, Ordering::Relaxed);
                    let gaps = nodes.iter().any(|n| n.srcs.iter().any(|s| !s.pending.is_empty()));
                    // The batches in flight (up to ~250 ms old), and a last try for gaps.
                    if since.elapsed() >= Duration::from_millis(400) && (!gaps || since.elapsed() > Duration::from_secs(3)) {
                        break;
                    }
                }
            }
        }
    }
    for p in probers {
        p.abort();
    }
    // Batches still waiting behind a gap at the end: the gap is lost; they are written.
    for n in nodes.iter_mut() {
        n.last_call = true;
        for (si, src) in SOURCES.iter().enumerate() {
            while let Some(&f) = n.srcs[si].pending.keys().next() {
                let s = &mut n.srcs[si];
                let exp = s.expected.unwrap_or(f);
                if n.best.is_none() {
                    break;
                }
                if f > exp {
                    s.meta.lost += f - exp;
                    s.expected = Some(f);
                }
                let sink = sinks.get_mut(*src).expect("a sink per source");
                n.drain(si, sink, clock.now_ns(), zero_unix_ns);
            }
        }
    }
    let mut meta = AgentsMeta {
        servers,
        nodes: BTreeMap::new(),
    };
    for n in nodes {
        let st = n.status.clone().unwrap_or_default();
        let mut nm = NodeMeta {
            offset_ns: n.best.map(|b| b.offset_ns() as i64),
            bound_ns: n.best.map(|b| (b.rtt_ns() / 2) as u64),
            probes: n.probes.len() as u64,
            max_bound_used_ns: n.max_bound_used,
            agent_dropped_batches: st.dropped_batches,
            agent_reconnects: st.reconnects,
            agent_cpu_ns: st.process_cpu_ns,
            agent_published_bytes: st.published_bytes,
            devices: st.devices.clone(),
            device_why: st.device_why.clone(),
            sources: BTreeMap::new(),
        };
        for (si, s) in n.srcs.into_iter().enumerate() {
            // The broker's sources (varz, jsz, proc_io) only when the agent sampled one.
            if si >= 3 && s.meta.first_seq.is_none() && s.meta.bytes == 0 {
                continue;
            }
            nm.sources.insert(SOURCES[si].to_string(), s.meta);
        }
        if nm.offset_ns.is_none() {
            events.error(
                "agents",
                "no_clock",
                &format!("agent {} never answered a clock request on {}: its samples are not in the run; is `diskpulse agent --name {}` running and connected to this cluster?", n.name, subject(&n.name, "clock"), n.name),
            );
        }
        meta.nodes.insert(n.name, nm);
    }
    for (_, s) in sinks.drain() {
        s.finish()?;
    }
    clock_sink.finish()?;
    Ok(meta)
}

/// Asks for a gap's batches again (once a second), and gives up on it after [`GIVE_UP`].
async fn chase_gap(client: &async_nats::Client, n: &mut Node, si: usize, events: &EventLog) {
    let known_last = n
        .status
        .as_ref()
        .and_then(|st| st.last_seq.get(SOURCES[si]).copied());
    let s = &mut n.srcs[si];
    let Some(exp) = s.expected else { return };
    let first_pending = s.pending.keys().next().copied();
    let quiet = s
        .last_arrival
        .is_none_or(|t| t.elapsed() > Duration::from_millis(500));
    let upto = match (first_pending, known_last) {
        (Some(f), _) => f - 1,
        (None, Some(l)) if l >= exp && quiet => l,
        _ => {
            s.gap_since = None;
            return;
        }
    };
    if upto < exp {
        return;
    }
    let since = *s.gap_since.get_or_insert_with(Instant::now);
    if since.elapsed() > GIVE_UP {
        let lost = upto + 1 - exp;
        s.meta.lost += lost;
        s.expected = Some(upto + 1);
        s.gap_since = None;
        events.error(
            "agents",
            "lost",
            &format!(
                "{}.{}: batches {exp}..{upto} never came ({lost} lost)",
                n.name, SOURCES[si]
            ),
        );
        return;
    }
    if s.last_resend
        .is_none_or(|t| t.elapsed() >= Duration::from_secs(1))
    {
        s.last_resend = Some(Instant::now());
        s.meta.resend_requests += 1;
        events.event(Body::AgentResend(ev::AgentResend {
            node: n.name.clone(),
            source: SOURCES[si].to_string(),
            from: exp,
            to: upto,
        }));
        let _ = client
            .publish(
                subject(&n.name, "resend"),
                Bytes::from(format!("{} {exp} {upto}", SOURCES[si])),
            )
            .await;
    }
}
