//! `diskpulse agent`: the samplers of a recording (diskstats at 1 ms, meminfo, cpu), their
//! rows handed to a batcher instead of files, published over NATS (format in
//! [`super`]).
//!
//! Threads: the sampler threads (the very ones `record` runs: the 1 ms diskstats loop
//! stays allocation-free on absolute deadlines; its [`ChunkSink`] hands 50 ms chunks to
//! a channel instead of a file); the batcher (every 100 ms, one batch per source with
//! rows, numbered, into the [`Outbox`]); a tokio thread that publishes the outbox while
//! the connection is up, answers clock and resend requests, and sends the heartbeat.
//!
//! The outbox holds unsent batches and, for a recorder's resend request, sent ones, up to
//! `--buffer` bytes: when the broker is away longer than that holds, the oldest batches
//! go first, unsent ones counted in `dropped_batches` (the recorder sees the gap in the
//! sequence numbers too).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use collectors::clock::Clock;
use futures::StreamExt;

use super::{encode_batch, subject, Status, SOURCES};
use crate::load::connect::ConnectArgs;
use crate::recording::samplers::{self, SamplerThread};
use crate::recording::session::{clock_zero_unix_ns, SamplerSetup};
use crate::recording::writer::ChunkSink;
use crate::recording::EventLog;

/// How often the batcher makes batches.
pub const BATCH_EVERY: Duration = Duration::from_millis(100);

/// What an agent runs.
pub struct AgentSetup {
    pub name: String,
    pub connect: ConnectArgs,
    pub samplers: SamplerSetup,
    /// The test-only clock skew ([`super::ENV_SKEW`]), ns.
    pub skew_ns: i64,
    /// The outbox's size, bytes.
    pub buffer_bytes: u64,
    pub duration: Option<Duration>,
    /// The local broker to sample (`--broker-monitor`, `--broker-pid`, or found).
    pub broker: BrokerTarget,
}

/// The nats-server on the agent's node: its monitor URL (`/varz`, `/jsz` every 250 ms)
/// and its pid (`/proc/PID/io` every 10 ms); either may be absent.
#[derive(Debug, Clone, Default)]
pub struct BrokerTarget {
    pub monitor: Option<String>,
    pub pid: Option<u32>,
}

struct Held {
    source: usize,
    seq: u64,
    payload: Bytes,
    sent: bool,
}

/// Batches waiting to be sent, and sent ones kept for a resend, bounded in bytes.
#[derive(Default)]
struct Outbox {
    held: VecDeque<Held>,
    bytes: u64,
    limit: u64,
    last_seq: [u64; SOURCES.len()],
    dropped: u64,
    resend_missing: u64,
}

impl Outbox {
    fn push(&mut self, source: usize, payload: Vec<u8>, base_ns: u64) -> u64 {
        self.last_seq[source] += 1;
        let seq = self.last_seq[source];
        let payload = Bytes::from(encode_batch(SOURCES[source], seq, base_ns, &payload));
        self.bytes += payload.len() as u64;
        self.held.push_back(Held {
            source,
            seq,
            payload,
            sent: false,
        });
        while self.bytes > self.limit && self.held.len() > 1 {
            if let Some(h) = self.held.pop_front() {
                self.bytes -= h.payload.len() as u64;
                if !h.sent {
                    self.dropped += 1;
                }
            }
        }
        seq
    }

    /// The unsent batches (source, seq, payload), marked sent.
    fn take_unsent(&mut self) -> Vec<(usize, u64, Bytes)> {
        self.held
            .iter_mut()
            .filter(|h| !h.sent)
            .map(|h| {
                h.sent = true;
                (h.source, h.seq, h.payload.clone())
            })
            .collect()
    }

    /// The held batches of `source` numbered `from..=to`, in order; those no longer held
    /// are counted.
    fn find(&mut self, source: usize, from: u64, to: u64) -> Vec<Bytes> {
        let v: Vec<Bytes> = self
            .held
            .iter()
            .filter(|h| h.source == source && h.seq >= from && h.seq <= to)
            .map(|h| h.payload.clone())
            .collect();
        let wanted = to.saturating_sub(from) + 1;
        self.resend_missing += wanted.saturating_sub(v.len() as u64);
        v
    }

    fn unsent(&self) -> u64 {
        self.held.iter().filter(|h| !h.sent).count() as u64
    }
}

/// Connects to `servers` for good: retries the first connection and every reconnection
/// without end (an agent outlives broker restarts), every 250 ms at most.
pub(crate) async fn connect_forever(
    c: &ConnectArgs,
    name: &str,
    wait_first: bool,
) -> anyhow::Result<async_nats::Client> {
    use crate::load::connect::{parse_server, redact_url, UrlAuth, SERVER_URL_FORM};
    let mut o = async_nats::ConnectOptions::new()
        .name(name)
        .connection_timeout(Duration::from_secs(3))
        .max_reconnects(None)
        .reconnect_delay_callback(|n| Duration::from_millis((50 * n as u64).min(250)))
        .subscription_capacity(1 << 16);
    if wait_first {
        o = o.retry_on_initial_connect();
    }
    let mut urls = vec![];
    for u in c.server_list() {
        let s = parse_server(&u).map_err(|why| {
            format::usage!(
                "--server '{}': {why}; expected {SERVER_URL_FORM}",
                redact_url(&u)
            )
        })?;
        match s.auth {
            Some(UrlAuth::UserPassword(u, p)) => o = o.user_and_password(u, p),
            Some(UrlAuth::Token(t)) => o = o.token(t),
            None => {}
        }
        urls.push(s.url);
    }
    if urls.is_empty() {
        return Err(format::usage!(
            "--server: name the NATS server(s) to use, e.g. --server nats://10.0.0.1:4222 (or set $NATS_URL)"
        ));
    }
    if let (Some(u), Some(p)) = (&c.user, &c.password) {
        o = o.user_and_password(u.clone(), p.clone());
    }
    if let Some(t) = &c.token {
        o = o.token(t.clone());
    }
    if let Some(f) = &c.creds {
        o = o
            .credentials_file(f)
            .await
            .map_err(|e| format::usage!("--creds {}: {e}", f.display()))?;
    }
    if let Some(n) = &c.nkey {
        o = o.nkey(crate::load::connect::read_nkey_seed(n)?);
    }
    if let Some(ca) = &c.tls_ca {
        o = o.add_root_certificates(ca.clone()).require_tls(true);
    }
    if let (Some(cert), Some(k)) = (&c.tls_cert, &c.tls_key) {
        o = o
            .add_client_certificate(cert.clone(), k.clone())
            .require_tls(true);
    }
    let shown: Vec<String> = urls.iter().map(|u| redact_url(u)).collect();
    o.connect(urls)
        .await
        .map_err(|e| anyhow::anyhow!("cannot connect to NATS at {}: {e}", shown.join(",")))
}

/// Runs an agent until `stop` (Ctrl-C) or the duration ends.
pub fn run(setup: AgentSetup, stop: Arc<AtomicBool>) -> anyhow::Result<()> {
    let clock = Clock::start();
    let base_ns = (clock_zero_unix_ns(clock.zero_monotonic_ns()) as i128 + setup.skew_ns as i128)
        .max(0) as u64;
    let events = EventLog::disabled(clock);
    let sampler_stop = Arc::new(AtomicBool::new(false));
    let (mut threads, mut rx) = start_samplers(&setup.samplers, clock, &sampler_stop, &events)?;
    // The local broker's sources: varz, jsz (the monitor, on the runtime below), proc_io.
    let mut channel = |label: &str| {
        let (tx, r) = mpsc::channel();
        rx.push(r);
        ChunkSink::to_channel(label, tx)
    };
    let varz_sink = channel("varz")?;
    let jsz_sink = channel("jsz")?;
    let procio_sink = channel("proc_io")?;
    if let Some(pid) = setup.broker.pid {
        threads.push(samplers::spawn_procio_to(
            &setup.samplers.procfs,
            Arc::new(Mutex::new(vec![pid])),
            procio_sink,
            clock,
            samplers::PROC_IO_INTERVAL_NS,
            sampler_stop.clone(),
            events.clone(),
        )?);
    } else {
        drop(procio_sink);
    }
    let outbox = Arc::new(Mutex::new(Outbox {
        limit: setup.buffer_bytes,
        ..Default::default()
    }));
    let batcher_stop = Arc::new(AtomicBool::new(false));
    let batcher = {
        let (outbox, bstop) = (outbox.clone(), batcher_stop.clone());
        std::thread::Builder::new()
            .name("agent-batch".into())
            .spawn(move || batch_loop(rx, outbox, base_ns, bstop))?
    };
    let devices: Vec<String> = setup
        .samplers
        .devices
        .iter()
        .map(|d| d.name.clone())
        .collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let monitor = match &setup.broker.monitor {
        Some(url) => {
            let _guard = rt.enter();
            Some(crate::broker::start_monitor_to(
                vec![(setup.name.clone(), url.clone())],
                clock,
                varz_sink,
                jsz_sink,
                events.clone(),
                sampler_stop.clone(),
                crate::broker::monitor::DEFAULT_INTERVAL,
            )?)
        }
        None => {
            drop((varz_sink, jsz_sink));
            None
        }
    };
    let r = rt.block_on(publish_loop(
        &setup,
        clock,
        base_ns,
        outbox,
        devices,
        stop,
        &sampler_stop,
        threads,
        batcher,
        batcher_stop,
    ));
    if let Some(m) = monitor {
        if let Ok(Err(e)) = rt.block_on(m) {
            eprintln!("diskpulse agent: broker monitor: {e:#}");
        }
    }
    rt.shutdown_timeout(Duration::from_secs(1));
    r
}

type Chunks = Vec<mpsc::Receiver<Vec<u8>>>;

fn start_samplers(
    setup: &SamplerSetup,
    clock: Clock,
    stop: &Arc<AtomicBool>,
    events: &EventLog,
) -> anyhow::Result<(Vec<SamplerThread>, Chunks)> {
    let plan = samplers::DiskPlan::of(setup);
    let mut rxs = vec![];
    let mut sink = |label: &str| {
        let (tx, rx) = mpsc::channel();
        rxs.push(rx);
        ChunkSink::to_channel(label, tx)
    };
    let disk = samplers::DiskSampler::with_sink(
        plan.source,
        plan.filter,
        &plan.names,
        sink("diskstats")?,
        None,
        events.clone(),
    )?;
    let mut threads = vec![];
    samplers::start(
        setup,
        disk,
        |name, _file, _columns| sink(name),
        clock,
        stop,
        events,
        &mut threads,
    )?;
    Ok((threads, rxs))
}

/// Every [`BATCH_EVERY`]: what each source's channel holds becomes one batch. Ends when
/// every sampler has closed its channel (after `stop`), with a last batch.
fn batch_loop(rx: Chunks, outbox: Arc<Mutex<Outbox>>, base_ns: u64, stop: Arc<AtomicBool>) {
    let mut bufs: Vec<Vec<u8>> = vec![vec![]; rx.len()];
    loop {
        let ending = stop.load(Ordering::Relaxed);
        if !ending {
            std::thread::sleep(BATCH_EVERY);
        }
        let mut open = 0;
        for (i, r) in rx.iter().enumerate() {
            loop {
                match r.try_recv() {
                    Ok(c) => bufs[i].extend_from_slice(&c),
                    Err(mpsc::TryRecvError::Empty) => {
                        open += 1;
                        break;
                    }
                    Err(mpsc::TryRecvError::Disconnected) => break,
                }
            }
        }
        if let Ok(mut o) = outbox.lock() {
            for (i, b) in bufs.iter_mut().enumerate() {
                if !b.is_empty() {
                    o.push(i, std::mem::take(b), base_ns);
                }
            }
        }
        if ending && open == 0 {
            return;
        }
        if ending {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn publish_loop(
    setup: &AgentSetup,
    clock: Clock,
    base_ns: u64,
    outbox: Arc<Mutex<Outbox>>,
    devices: Vec<String>,
    stop: Arc<AtomicBool>,
    sampler_stop: &Arc<AtomicBool>,
    threads: Vec<SamplerThread>,
    batcher: std::thread::JoinHandle<()>,
    batcher_stop: Arc<AtomicBool>,
) -> anyhow::Result<()> {
    let node = setup.name.clone();
    let client = connect_forever(&setup.connect, &format!("diskpulse-agent-{node}"), true).await?;
    let published = Arc::new(AtomicU64::new(0));
    let reconnects = Arc::new(AtomicU64::new(0));
    // Clock requests: the receive and send stamps on the samples' clock.
    let clock_task = super::answer_clock(&client, &node, move || base_ns + clock.now_ns()).await?;
    // Resend requests: `<source> <from> <to>`, answered by publishing the batches again on
    // their subject and replying with how many.
    let mut resend_sub = client.subscribe(subject(&node, "resend")).await?;
    let (c3, ob3, n3, pub3) = (
        client.clone(),
        outbox.clone(),
        node.clone(),
        published.clone(),
    );
    let resend_task = tokio::spawn(async move {
        while let Some(m) = resend_sub.next().await {
            let text = String::from_utf8_lossy(&m.payload).to_string();
            let mut it = text.split(' ');
            let (Some(src), Some(from), Some(to)) = (
                it.next().and_then(|s| SOURCES.iter().position(|x| *x == s)),
                it.next().and_then(|s| s.parse::<u64>().ok()),
                it.next().and_then(|s| s.parse::<u64>().ok()),
            ) else {
                continue;
            };
            let found = match ob3.lock() {
                Ok(mut o) => o.find(src, from, to.min(from + 10_000)),
                Err(_) => vec![],
            };
            let n = found.len();
            for p in found {
                pub3.fetch_add(p.len() as u64, Ordering::Relaxed);
                let _ = c3.publish(subject(&n3, SOURCES[src]), p).await;
            }
            if let Some(reply) = m.reply {
                let _ = c3.publish(reply, Bytes::from(n.to_string())).await;
            }
        }
    });
    let mut withhold = withheld_from_env();
    let t0 = std::time::Instant::now();
    let mut last_status = std::time::Instant::now() - Duration::from_secs(2);
    let mut was_connected = false;
    let mut ever_connected = false;
    let mut ending_since: Option<std::time::Instant> = None;
    let end: anyhow::Result<()>;
    let mut threads = Some(threads);
    let mut batcher = Some(batcher);
    eprintln!(
        "diskpulse agent {node}: sampling {} every {} us, publishing on diskpulse.{node}.*",
        if devices.is_empty() {
            "every device".to_string()
        } else {
            devices.join(",")
        },
        setup.samplers.disk_interval.as_micros()
    );
    loop {
        let connected = client.connection_state() == async_nats::connection::State::Connected;
        if connected && !was_connected && ever_connected {
            reconnects.fetch_add(1, Ordering::Relaxed);
        }
        ever_connected |= connected;
        was_connected = connected;
        if connected {
            let batch = match outbox.lock() {
                Ok(mut o) => o.take_unsent(),
                Err(_) => vec![],
            };
            for (src, seq, p) in batch {
                if let Some(i) = withhold.iter().position(|w| *w == (src, seq)) {
                    // Test-only: this batch's first send is lost (as on a dying broker).
                    withhold.swap_remove(i);
                    continue;
                }
                published.fetch_add(p.len() as u64, Ordering::Relaxed);
                let _ = client.publish(subject(&node, SOURCES[src]), p).await;
            }
        }
        if connected && last_status.elapsed() >= Duration::from_secs(1) {
            last_status = std::time::Instant::now();
            let st = status(&node, &outbox, &devices, setup, &published, &reconnects);
            if let Ok(j) = serde_json::to_vec(&st) {
                let _ = client
                    .publish(subject(&node, "status"), Bytes::from(j))
                    .await;
            }
        }
        let stop_now =
            stop.load(Ordering::Relaxed) || setup.duration.is_some_and(|d| t0.elapsed() >= d);
        if stop_now && ending_since.is_none() {
            ending_since = Some(std::time::Instant::now());
            sampler_stop.store(true, Ordering::SeqCst);
            for t in threads.take().unwrap_or_default() {
                let (name, _, r) = t.join();
                if let Err(e) = r {
                    eprintln!("diskpulse agent {node}: sampler {name}: {e:#}");
                }
            }
            batcher_stop.store(true, Ordering::SeqCst);
            if let Some(b) = batcher.take() {
                let _ = b.join();
            }
            continue; // publish the last batches
        }
        if let Some(since) = ending_since {
            let unsent = outbox.lock().map(|o| o.unsent()).unwrap_or(0);
            if unsent == 0 || since.elapsed() > Duration::from_secs(3) {
                let st = status(&node, &outbox, &devices, setup, &published, &reconnects);
                if connected {
                    if let Ok(j) = serde_json::to_vec(&st) {
                        let _ = client
                            .publish(subject(&node, "status"), Bytes::from(j))
                            .await;
                    }
                    let _ = tokio::time::timeout(Duration::from_secs(2), client.flush()).await;
                }
                eprintln!(
                    "diskpulse agent {node}: stopped; batches {:?}, dropped {}, unsent {unsent}, reconnects {}",
                    st.last_seq, st.dropped_batches, st.reconnects
                );
                end = end_fault(setup, ever_connected, connected, unsent);
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    clock_task.abort();
    resend_task.abort();
    end
}

/// How an agent's run ended, for its exit code (issue 25: an agent that never connected
/// exited 0 saying only "unsent 77"): an error naming the server when it never reached
/// it, or when the connection was gone at the end with batches unsent.
fn end_fault(
    setup: &AgentSetup,
    ever_connected: bool,
    connected: bool,
    unsent: u64,
) -> anyhow::Result<()> {
    let urls = setup
        .connect
        .server_list()
        .iter()
        .map(|u| crate::load::connect::redact_url(u))
        .collect::<Vec<_>>()
        .join(", ");
    if !ever_connected {
        anyhow::bail!(
            "never reached the NATS server {urls}: nothing was published ({unsent} batches unsent); is the server running there and is --server right?"
        );
    }
    if !connected && unsent > 0 {
        anyhow::bail!(
            "the connection to {urls} was lost and not made again: {unsent} batches unsent (a recorder's resend can no longer get them)"
        );
    }
    Ok(())
}

/// Test-only: `DISKPULSE_AGENT_TEST_WITHHOLD=cpu:20,meminfo:30` skips the first send of
/// those batches (a send lost to a dying broker, on demand), so a test sees the recorder
/// ask for them again.
const ENV_WITHHOLD: &str = "DISKPULSE_AGENT_TEST_WITHHOLD";

fn withheld_from_env() -> Vec<(usize, u64)> {
    std::env::var(ENV_WITHHOLD)
        .unwrap_or_default()
        .split(',')
        .filter_map(|x| {
            let (s, n) = x.trim().split_once(':')?;
            Some((SOURCES.iter().position(|y| *y == s)?, n.parse().ok()?))
        })
        .collect()
}

fn status(
    node: &str,
    outbox: &Arc<Mutex<Outbox>>,
    devices: &[String],
    setup: &AgentSetup,
    published: &AtomicU64,
    reconnects: &AtomicU64,
) -> Status {
    let mut st = Status {
        node: node.to_string(),
        devices: devices.to_vec(),
        device_why: setup
            .samplers
            .devices
            .iter()
            .map(|d| d.why.clone())
            .collect(),
        interval_us: setup.samplers.disk_interval.as_micros() as u64,
        process_cpu_ns: super::process_cpu_ns(),
        published_bytes: published.load(Ordering::Relaxed),
        reconnects: reconnects.load(Ordering::Relaxed),
        ..Default::default()
    };
    if let Ok(o) = outbox.lock() {
        for (i, s) in SOURCES.iter().enumerate() {
            st.last_seq.insert(s.to_string(), o.last_seq[i]);
        }
        st.dropped_batches = o.dropped;
        st.buffered_batches = o.unsent();
        st.buffered_bytes = o.bytes;
        st.resend_missing = o.resend_missing;
    }
    st
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_outbox_keeps_its_bound_and_counts_unsent_batches_it_drops() {
        // Batches of 100 bytes of rows + an 18-byte head: 118 bytes, 3 fit in 400.
        let mut o = Outbox {
            limit: 400,
            ..Default::default()
        };
        for _ in 0..3 {
            o.push(0, vec![b'x'; 100], 5);
        }
        assert_eq!(o.dropped, 0);
        assert_eq!(o.take_unsent().len(), 3);
        // Sent ones go first without counting; then unsent ones are counted.
        for _ in 0..5 {
            o.push(0, vec![b'y'; 100], 5);
        }
        assert!(o.bytes <= 400, "{}", o.bytes);
        assert_eq!(o.last_seq[0], 8);
        assert_eq!(o.dropped, 2, "3 sent and 2 unsent (4, 5) went");
        let held: Vec<u64> = o.held.iter().map(|h| h.seq).collect();
        assert_eq!(held, [6, 7, 8]);
        assert_eq!(o.unsent(), 3);
        assert_eq!(o.find(0, 5, 8).len(), 3);
        assert_eq!(o.resend_missing, 1, "5 is no longer held");
    }
}
