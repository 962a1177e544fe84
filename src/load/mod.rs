//! The load generator: every workload `nats bench` runs and the ones it cannot, on the
//! run clock, beside the disk samplers.
//!
//! Modes: `pub`, `sub`, `request`, `reply`, `cast` (core NATS); `js-pub`, `js-consume`;
//! `kv-put`, `kv-get`; `obj-put`, `obj-get`. Modes that belong together run together in one
//! invocation (`pub --sub 4`, `request --reply 2`, `js-pub --consume 2`, `obj-put
//! --consumers 20`). Each client is its own connection; clients are spread round-robin
//! over the servers. See [`record`] for what is measured and [`collect`] for `load.csv`.

pub mod collect;
pub mod connect;
pub mod output;
pub mod pace;
pub mod record;
pub mod workers;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream;
use clap::{Args, ValueEnum};
use collectors::clock::Clock;
use tokio::sync::mpsc;

use crate::cli::{parse_duration, parse_size};
use crate::recording::EventLog;
use crate::usage;
use pace::Pacer;
use record::{Recorder, Role};
use workers::{share, Ctx, SendPlan};

/// Default in-flight acks for async JetStream publishing.
pub const DEFAULT_WINDOW: usize = 256;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Core publish (fire and forget); with --sub M, M subscribers receive every message.
    Pub,
    /// Core subscribe; end-to-end latency from the send time stamped by diskpulse publishers.
    Sub,
    /// Request/reply ("call"): wait for each reply; --reply M starts M responders here.
    Request,
    /// Responders in queue group `diskpulse` (serve until --duration or Ctrl-C).
    Reply,
    /// Fire-and-forget to a replying service's subject ("cast"); --reply M starts M here.
    Cast,
    /// JetStream publish: async with --window acks in flight (sliding), or --sync.
    JsPub,
    /// JetStream consume: pull fetch with --batch (shared durable), or --ordered.
    JsConsume,
    /// Key-value put.
    KvPut,
    /// Key-value get.
    KvGet,
    /// Object-store put (--object-size, --objects); --consumers K get them back at once.
    ObjPut,
    /// Object-store get with digest check.
    ObjGet,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Storage {
    File,
    Memory,
}

#[derive(Args, Debug, Clone)]
pub struct LoadArgs {
    /// The workload.
    #[arg(value_enum)]
    pub mode: Mode,
    #[command(flatten)]
    pub connect: connect::ConnectArgs,
    /// Subject for core modes and js-pub.
    #[arg(long, default_value = "diskpulse.bench")]
    pub subject: String,
    /// Connections (workers) of the main role.
    #[arg(long, default_value_t = 1)]
    pub clients: usize,
    /// pub: subscribers that receive every message.
    #[arg(long, default_value_t = 0)]
    pub sub: usize,
    /// request/cast: responders started in this process.
    #[arg(long, default_value_t = 0)]
    pub reply: usize,
    /// js-pub: consumers started in this process at the same time.
    #[arg(long, default_value_t = 0)]
    pub consume: usize,
    /// Total operations of the main role, split over the clients.
    #[arg(long)]
    pub msgs: Option<u64>,
    /// Run for this long (with --msgs: whichever ends first).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Message payload size (128, 4k, 1MiB).
    #[arg(long, default_value = "128", value_parser = parse_size)]
    pub size: u64,
    /// Total operations per second of the main role, open loop (latency also from the
    /// intended start). Without it, clients go as fast as they can.
    #[arg(long)]
    pub rate: Option<f64>,
    /// js-pub: wait for each ack before the next publish.
    #[arg(long)]
    pub sync: bool,
    /// In-flight operations per client (js-pub acks, requests). Default: 256 for js-pub, 1 otherwise.
    #[arg(long)]
    pub window: Option<usize>,
    /// Request timeout.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Stream name (js-pub, js-consume).
    #[arg(long, default_value = "DISKPULSE")]
    pub stream: String,
    /// KV or object-store bucket.
    #[arg(long, default_value = "diskpulse")]
    pub bucket: String,
    /// Replicas of a stream/bucket diskpulse creates.
    #[arg(long, default_value_t = 1)]
    pub replicas: usize,
    /// Storage of a stream/bucket diskpulse creates.
    #[arg(long, value_enum, default_value_t = Storage::File)]
    pub storage: Storage,
    /// Purge the stream/bucket before the run.
    #[arg(long)]
    pub purge: bool,
    /// Max bytes of a stream/bucket diskpulse creates (discard new when full).
    #[arg(long, value_parser = parse_size)]
    pub max_bytes: Option<u64>,
    /// js-consume: messages per pull fetch.
    #[arg(long, default_value_t = 100)]
    pub batch: usize,
    /// js-consume: ordered consumers (each client gets every message) instead of a shared pull consumer.
    #[arg(long)]
    pub ordered: bool,
    /// kv: number of distinct keys.
    #[arg(long, default_value_t = 1000)]
    pub keys: u64,
    /// obj: object size (1k .. 1024k).
    #[arg(long, default_value = "8k", value_parser = parse_size)]
    pub object_size: u64,
    /// obj: objects to put (split over --workers).
    #[arg(long, default_value_t = 100)]
    pub objects: u64,
    /// obj-put: putting workers (like --clients).
    #[arg(long)]
    pub workers: Option<usize>,
    /// obj-put: getting consumers started at once; obj-get: consumers (like --clients).
    #[arg(long, default_value_t = 0)]
    pub consumers: usize,
    /// Statistics window of load.csv.
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    pub stats_window: Duration,
    /// Write natscli-compatible CSV (one row per client plus one per role) to FILE.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// Parses load flags from an argument vector (for commands that drive the load
/// generator themselves, like `demo` and scenarios): `["js-pub", "--duration", "30s"]`.
pub fn args_from<I, T>(argv: I) -> anyhow::Result<LoadArgs>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    #[derive(clap::Parser)]
    struct Wrap {
        #[command(flatten)]
        load: LoadArgs,
    }
    use clap::Parser;
    let mut v: Vec<std::ffi::OsString> = vec!["load".into()];
    v.extend(argv.into_iter().map(Into::into));
    Ok(Wrap::try_parse_from(v)
        .map_err(|e| {
            usage!(
                "{}",
                e.to_string().lines().next().unwrap_or("bad load flags")
            )
        })?
        .load)
}

impl LoadArgs {
    /// The main role of the mode.
    pub fn main_role(&self) -> Role {
        match self.mode {
            Mode::Pub | Mode::Cast => Role::Pub,
            Mode::Sub => Role::Sub,
            Mode::Request => Role::Request,
            Mode::Reply => Role::Reply,
            Mode::JsPub => Role::JsPub,
            Mode::JsConsume => Role::JsConsume,
            Mode::KvPut => Role::KvPut,
            Mode::KvGet => Role::KvGet,
            Mode::ObjPut => Role::ObjPut,
            Mode::ObjGet => Role::ObjGet,
        }
    }

    pub fn main_clients(&self) -> usize {
        match self.mode {
            Mode::ObjPut => self.workers.unwrap_or(self.clients),
            Mode::ObjGet if self.consumers > 0 => self.consumers,
            _ => self.clients,
        }
    }

    /// Checks flags before anything starts (exit 2, one line).
    pub fn validate(&self) -> anyhow::Result<()> {
        self.connect.validate()?;
        if self.main_clients() == 0 {
            return Err(usage!("--clients must be at least 1"));
        }
        if self.rate.is_some_and(|r| !(r > 0.0 && r.is_finite())) {
            return Err(usage!("--rate takes ops per second above 0"));
        }
        if self.window == Some(0) {
            return Err(usage!("--window must be at least 1"));
        }
        if self.stats_window < Duration::from_millis(1) {
            return Err(usage!("--stats-window must be at least 1ms"));
        }
        if self.msgs == Some(0) {
            return Err(usage!("--msgs must be at least 1"));
        }
        if !(1..=5).contains(&self.replicas) {
            return Err(usage!("--replicas takes 1 to 5, got {}", self.replicas));
        }
        if self.subject.is_empty() || self.subject.contains(char::is_whitespace) {
            return Err(usage!(
                "--subject '{}' is not a valid subject",
                self.subject
            ));
        }
        if let Some(p) = &self.csv {
            // Created before the run, so a bad path fails at once, not after it.
            std::fs::File::create(p).map_err(|e| usage!("--csv {}: {e}", p.display()))?;
        }
        Ok(())
    }

    /// --msgs, or unlimited with --duration, or nats bench's default of 100,000.
    pub fn total_ops(&self) -> Option<u64> {
        match (self.msgs, self.duration) {
            (Some(m), _) => Some(m),
            (None, Some(_)) => None,
            (None, None) if matches!(self.mode, Mode::Reply) => None,
            (None, None) if matches!(self.mode, Mode::ObjPut | Mode::ObjGet) => Some(self.objects),
            (None, None) => Some(100_000),
        }
    }

    fn window_for(&self, role: Role) -> usize {
        self.window
            .unwrap_or(match role {
                Role::JsPub if !self.sync => DEFAULT_WINDOW,
                _ => 1,
            })
            .max(1)
            .min(if self.sync { 1 } else { usize::MAX })
    }
}

/// Where and on which clock the load runs.
pub struct LoadEnv {
    pub clock: Clock,
    pub events: EventLog,
    pub stop: Arc<AtomicBool>,
    pub servers: Vec<String>,
    /// `load.csv` goes here when recording.
    pub load_csv: Option<PathBuf>,
}

/// The outcome of a load run.
pub struct LoadOutcome {
    pub clients: Vec<record::ClientTotals>,
    pub started_ns: u64,
    pub ended_ns: u64,
    pub csv_rows: u64,
    /// The JetStream context limits used, for meta.json.
    pub js_context: serde_json::Value,
}

/// Connection capacity per client: enough that a full window never blocks on it.
fn capacity(window: usize) -> usize {
    (2 * window).max(2048)
}

fn js_context(client: async_nats::Client, window: usize, timeout: Duration) -> jetstream::Context {
    jetstream::ContextBuilder::new()
        .timeout(timeout.max(Duration::from_secs(30)))
        .ack_timeout(timeout.max(Duration::from_secs(30)))
        .max_ack_inflight(window.max(1))
        .backpressure_on_inflight(true)
        .build(client)
}

/// Creates or checks what the mode needs (stream, consumer, bucket) before any worker.
async fn prepare(a: &LoadArgs, client: &async_nats::Client) -> anyhow::Result<()> {
    if !matches!(a.mode, Mode::JsPub) {
        return Ok(());
    }
    let js = jetstream::new(client.clone());
    let storage = match a.storage {
        Storage::File => jetstream::stream::StorageType::File,
        Storage::Memory => jetstream::stream::StorageType::Memory,
    };
    let mut cfg = jetstream::stream::Config {
        name: a.stream.clone(),
        subjects: vec![a.subject.clone()],
        storage,
        num_replicas: a.replicas,
        ..Default::default()
    };
    if let Some(b) = a.max_bytes {
        cfg.max_bytes = b as i64;
        cfg.discard = jetstream::stream::DiscardPolicy::New;
    }
    let mut stream = js
        .get_or_create_stream(cfg)
        .await
        .map_err(|e| anyhow::anyhow!("cannot create stream '{}': {e}", a.stream))?;
    let info = stream.info().await?;
    if !info.config.subjects.iter().any(|s| {
        s == &a.subject || s == ">" || s.ends_with(".>") && a.subject.starts_with(&s[..s.len() - 1])
    }) {
        return Err(usage!(
            "stream '{}' exists but does not capture subject '{}' (its subjects: {:?}); pick another --stream or --subject",
            a.stream,
            a.subject,
            info.config.subjects
        ));
    }
    if a.purge {
        stream.purge().await?;
    }
    Ok(())
}

/// Runs the load; returns when every worker has finished (or after Ctrl-C).
pub async fn run(a: &LoadArgs, env: &LoadEnv) -> anyhow::Result<LoadOutcome> {
    if env.servers.is_empty() {
        anyhow::bail!("no NATS server to connect to");
    }
    let server_of = |i: usize| env.servers[i % env.servers.len()].clone();
    let setup = a
        .connect
        .connect(&server_of(0), "diskpulse-setup", 2048, &env.events)
        .await?;
    prepare(a, &setup).await?;

    let clock = env.clock;
    let window_ns = a.stats_window.as_nanos() as u64;
    let (tx, rx) = mpsc::unbounded_channel();
    let main = a.main_role();
    let n_main = a.main_clients();
    let total = a.total_ops();
    let senders_left = Arc::new(AtomicU64::new(0));
    let subject = async_nats::Subject::from(a.subject.as_str());

    // Connect every client first, so connection time is not load time.
    struct Conn {
        role: Role,
        index: usize,
        server: String,
        client: async_nats::Client,
    }
    let mut conns: Vec<Conn> = vec![];
    let mut roles: Vec<(Role, usize)> = vec![(main, n_main)];
    match a.mode {
        Mode::Pub if a.sub > 0 => roles.push((Role::Sub, a.sub)),
        Mode::Request | Mode::Cast if a.reply > 0 => roles.push((Role::Reply, a.reply)),
        _ => {}
    }
    let mut k = 0usize;
    for &(role, n) in &roles {
        let w = a.window_for(role);
        for i in 0..n {
            let server = server_of(k);
            k += 1;
            let name = format!("diskpulse-{}-{i}", role.name());
            let client = a
                .connect
                .connect(&server, &name, capacity(w), &env.events)
                .await?;
            conns.push(Conn {
                role,
                index: i,
                server,
                client,
            });
        }
    }

    // Receivers subscribe before any sender starts.
    let is_sender = |r: Role| matches!(r, Role::Pub | Role::Request | Role::JsPub);
    let n_senders = conns.iter().filter(|c| is_sender(c.role)).count() as u64;
    senders_left.store(n_senders, std::sync::atomic::Ordering::SeqCst);
    let mut subs = vec![];
    for c in &conns {
        match c.role {
            Role::Sub => subs.push(Some(c.client.subscribe(subject.clone()).await?)),
            Role::Reply => subs.push(Some(
                c.client
                    .queue_subscribe(subject.clone(), "diskpulse".into())
                    .await?,
            )),
            _ => subs.push(None),
        }
    }
    for c in &conns {
        if matches!(c.role, Role::Sub | Role::Reply) {
            c.client.flush().await?;
        }
    }

    let start_ns = clock.now_ns();
    let end_ns = a.duration.map(|d| start_ns + d.as_nanos() as u64);
    let expected = match (a.mode, total) {
        (Mode::Pub, Some(t)) => Some(t),
        (Mode::Sub, Some(t)) if a.msgs.is_some() => Some(t),
        _ => None,
    };
    let ctx = Ctx {
        clock,
        stop: env.stop.clone(),
        start_ns,
        end_ns,
        senders_left: senders_left.clone(),
        expected,
        with_senders: n_senders > 0,
    };
    env.events.event(
        "load_start",
        serde_json::json!({"mode": format!("{:?}", a.mode), "clients": n_main,
            "servers": env.servers.iter().map(|s| connect::redact_url(s)).collect::<Vec<_>>()}),
    );
    let collector = tokio::spawn(collect::collect(
        rx,
        env.load_csv.clone(),
        clock,
        window_ns,
        start_ns,
        env.events.clone(),
    ));

    let mut tasks = vec![];
    for (c, sub) in conns.into_iter().zip(subs) {
        let rec = Recorder::new(c.role, c.index, &c.server, clock, window_ns, tx.clone());
        let n_role = roles
            .iter()
            .find(|r| r.0 == c.role)
            .map(|r| r.1)
            .unwrap_or(1);
        let plan = SendPlan {
            count: total.map(|t| share(t, c.index, n_role)),
            pacer: a.rate.map(|r| {
                Pacer::new(
                    clock,
                    start_ns,
                    r / n_role as f64,
                    c.index as f64 / n_role as f64,
                    end_ns,
                )
            }),
            stamp: true,
            size: a.size as usize,
        };
        let ctx = ctx.clone();
        let subj = subject.clone();
        let w = a.window_for(c.role);
        let timeout = a.timeout;
        let t = match c.role {
            Role::Pub => tokio::spawn(workers::core_pub(c.client, subj, plan, rec, ctx)),
            Role::Sub => tokio::spawn(workers::core_sub(sub.expect("subscribed"), rec, ctx)),
            Role::Request => {
                tokio::spawn(workers::request(c.client, subj, w, timeout, plan, rec, ctx))
            }
            Role::Reply => tokio::spawn(workers::reply(
                c.client,
                sub.expect("subscribed"),
                a.size as usize,
                a.msgs.filter(|_| a.mode == Mode::Reply),
                rec,
                ctx,
            )),
            Role::JsPub => {
                let js = js_context(c.client, w, timeout);
                tokio::spawn(workers::js_pub(js, subj, w, plan, rec, ctx))
            }
            other => anyhow::bail!("mode {} is not built yet", other.name()),
        };
        tasks.push(t);
    }
    drop(tx);
    for t in tasks {
        t.await?;
    }
    let ended_ns = clock.now_ns();
    let collected = collector.await??;
    env.events.event("load_stop", serde_json::json!({}));
    let w = a.window_for(main);
    Ok(LoadOutcome {
        clients: collected.clients,
        started_ns: start_ns,
        ended_ns,
        csv_rows: collected.rows,
        js_context: serde_json::json!({
            "max_ack_inflight": w, "backpressure_on_inflight": true,
            "ack_timeout_s": a.timeout.max(Duration::from_secs(30)).as_secs_f64(),
            "client_capacity": capacity(w),
        }),
    })
}
