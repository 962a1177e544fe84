//! The load generator: every workload `nats bench` runs and the ones it cannot, on the
//! run clock, beside the disk samplers.
//!
//! Modes: `pub`, `sub`, `request`, `reply`, `cast` (core NATS); `js-pub`, `js-consume`;
//! `kv-put`, `kv-get`; `obj-put`, `obj-get`. Modes that belong together run together in one
//! invocation (`pub --sub 4`, `request --reply 2`, `js-pub --consume 2`, `obj-put
//! --consumers 20`). Each client is its own connection; clients are spread round-robin
//! over the servers. See [`record`] for what is measured and [`collect`] for `load.csv`;
//! [`js`], [`kv`] and [`obj`] for the JetStream modes and what they verify, [`content`]
//! for the keys, values and objects derived from their names.

pub mod collect;
pub mod connect;
pub mod content;
pub mod js;
pub mod kv;
pub mod obj;
pub mod output;
pub mod pace;
pub mod raw;
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

impl Mode {
    /// The mode as the command line spells it (`js-pub`): what meta.json and events say.
    pub fn cli_name(self) -> String {
        self.to_possible_value()
            .map(|v| v.get_name().to_string())
            .unwrap_or_else(|| format!("{self:?}"))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Storage {
    File,
    Memory,
}

/// The JetStream storage type of a [`Storage`].
pub fn storage_type(s: Storage) -> jetstream::stream::StorageType {
    match s {
        Storage::File => jetstream::stream::StorageType::File,
        Storage::Memory => jetstream::stream::StorageType::Memory,
    }
}

/// How js-consume pull consumers acknowledge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AckMode {
    /// Ack every message (a publish the client does not wait for), as `nats bench`.
    Explicit,
    /// Ack policy none: no ack traffic in what is measured.
    None,
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
    /// js-pub: consumers started in this process before the publishers (pull, or --ordered).
    #[arg(long, default_value_t = 0)]
    pub consume: usize,
    /// Total operations of the main role, split over the clients (js-consume pull: messages
    /// over all clients; --ordered: per client). Default 100,000 (obj modes: --objects;
    /// js-consume: until the stream is drained).
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
    /// In-flight operations per client (js-pub acks, requests, KV puts/gets, object PUTs/GETs).
    /// Default: 256 for js-pub, 1 otherwise.
    #[arg(long)]
    pub window: Option<usize>,
    /// Request (and KV get) timeout.
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
    /// js-consume (pull): ack every message, or ack policy none.
    #[arg(long, value_enum, default_value_t = AckMode::Explicit)]
    pub ack: AckMode,
    /// kv: number of distinct keys.
    #[arg(long, default_value_t = 1000)]
    pub keys: u64,
    /// obj: object size (1k .. 1024k).
    #[arg(long, default_value = "8k", value_parser = parse_size)]
    pub object_size: u64,
    /// obj: objects to put (split over --workers).
    #[arg(long, default_value_t = 100)]
    pub objects: u64,
    /// obj-put: putting workers (default: --clients).
    #[arg(long)]
    pub workers: Option<usize>,
    /// obj-put: getting consumers started with the putters; obj-get: consumers (default: --clients).
    #[arg(long, default_value_t = 0)]
    pub consumers: usize,
    /// Core publish through async-nats even where the raw protocol writer could be used.
    #[arg(long)]
    pub no_raw: bool,
    /// Stamp core publishes with their send time even without subscribers in this run
    /// (for `diskpulse load sub` elsewhere to measure end to end).
    #[arg(long)]
    pub stamp: bool,
    /// Runtime threads: 0 = automatic (one thread for JetStream, KV and object modes with
    /// one client: fewer context switches; all cores otherwise).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
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
    /// Threads for the tokio runtime (1 = current-thread runtime).
    pub fn runtime_threads(&self) -> usize {
        if self.threads > 0 {
            return self.threads;
        }
        let others = self.sub + self.reply + self.consume + self.consumers;
        let single = matches!(
            self.mode,
            Mode::JsPub | Mode::KvPut | Mode::KvGet | Mode::ObjPut | Mode::ObjGet
        ) && self.main_clients() <= 1
            && others == 0;
        if single {
            1
        } else {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2)
        }
    }

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
        if self.rate.is_some() && matches!(self.mode, Mode::Sub | Mode::Reply | Mode::JsConsume) {
            return Err(usage!(
                "--rate paces senders; {} receives as fast as messages come",
                self.main_role().name()
            ));
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
        if self.batch == 0 {
            return Err(usage!("--batch must be at least 1"));
        }
        if self.keys == 0 {
            return Err(usage!("--keys must be at least 1"));
        }
        if matches!(self.mode, Mode::ObjPut | Mode::ObjGet) {
            if !(1024..=1024 * 1024).contains(&self.object_size) {
                return Err(usage!(
                    "--object-size takes 1k to 1024k, got {} bytes",
                    self.object_size
                ));
            }
            if self.objects == 0 {
                return Err(usage!("--objects must be at least 1"));
            }
        }
        if self.workers == Some(0) {
            return Err(usage!("--workers must be at least 1"));
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
            (None, None) if matches!(self.mode, Mode::Reply | Mode::JsConsume) => None,
            (None, None) if matches!(self.mode, Mode::ObjPut | Mode::ObjGet) => Some(self.objects),
            (None, None) => Some(100_000),
        }
    }

    /// Bytes per operation of the main role.
    fn op_size(&self) -> usize {
        match self.mode {
            Mode::ObjPut | Mode::ObjGet => self.object_size as usize,
            _ => self.size as usize,
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

/// What [`prepare`] found or made.
#[derive(Default)]
struct Prepared {
    /// kv-get: the bucket serves direct gets.
    kv_direct: bool,
    /// obj modes: the objects getters may read.
    catalog: Option<Arc<obj::Catalog>>,
    /// The shared pull consumer was created (and is deleted at the end).
    pull_consumer: bool,
}

/// Creates or checks what the mode needs (stream, consumer, bucket) before any worker.
async fn prepare(a: &LoadArgs, client: &async_nats::Client, url: &str) -> anyhow::Result<Prepared> {
    let js = jetstream::new(client.clone());
    let url = connect::redact_url(url);
    let mut p = Prepared::default();
    match a.mode {
        Mode::JsPub => {
            prepare_stream(a, &js).await?;
            if a.consume > 0 && !a.ordered {
                js::prepare_pull(a, &js, a.consume, true).await?;
                p.pull_consumer = true;
            }
        }
        Mode::JsConsume => {
            if !js::stream_exists(&js, &a.stream).await? {
                return Err(js::stream_not_found(&a.stream, &url));
            }
            if !a.ordered {
                js::prepare_pull(a, &js, a.main_clients(), false).await?;
                p.pull_consumer = true;
            }
        }
        Mode::KvPut | Mode::KvGet => {
            p.kv_direct = kv::prepare(a, &js, &url, a.mode == Mode::KvPut).await?;
        }
        Mode::ObjPut | Mode::ObjGet => {
            p.catalog = Some(obj::prepare(a, &js, &url, a.mode == Mode::ObjPut).await?);
        }
        _ => {}
    }
    Ok(p)
}

/// js-pub: creates the stream (or checks that an existing one captures the subject).
async fn prepare_stream(a: &LoadArgs, js: &jetstream::Context) -> anyhow::Result<()> {
    let mut cfg = jetstream::stream::Config {
        name: a.stream.clone(),
        subjects: vec![a.subject.clone()],
        storage: storage_type(a.storage),
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

/// Which roles send (and hold a [`workers::SenderGuard`]); receivers of the same run drain
/// after them.
fn is_sender(r: Role) -> bool {
    matches!(
        r,
        Role::Pub | Role::Request | Role::JsPub | Role::KvPut | Role::KvGet | Role::ObjPut
    )
}

/// What a client opened before the load starts (subscriptions, consumers, buckets), so
/// that setting up is not load time and receivers exist before the first send.
enum Opened {
    Nothing,
    Sub(async_nats::Subscriber),
    Consumer(js::Source),
    Objects(Box<async_nats::jetstream::object_store::ObjectStore>),
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
    let prepared = prepare(a, &setup, &server_of(0)).await?;

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
        raw: Option<raw::RawConn>,
    }
    let mut conns: Vec<Conn> = vec![];
    let mut roles: Vec<(Role, usize)> = vec![(main, n_main)];
    match a.mode {
        Mode::Pub if a.sub > 0 => roles.push((Role::Sub, a.sub)),
        Mode::Request | Mode::Cast if a.reply > 0 => roles.push((Role::Reply, a.reply)),
        Mode::JsPub if a.consume > 0 => roles.push((Role::JsConsume, a.consume)),
        Mode::ObjPut if a.consumers > 0 => roles.push((Role::ObjGet, a.consumers)),
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
            // Core publishers without TLS or credentials write the protocol themselves.
            let raw = if role == Role::Pub && a.connect.is_plain() && !a.no_raw {
                raw::RawConn::connect(&server, &name).await?
            } else {
                None
            };
            conns.push(Conn {
                role,
                index: i,
                server,
                client,
                raw,
            });
        }
    }

    // Receivers subscribe (and consumers, buckets open) before any sender starts.
    let n_senders = conns.iter().filter(|c| is_sender(c.role)).count() as u64;
    senders_left.store(n_senders, std::sync::atomic::Ordering::SeqCst);
    let mut opened = vec![];
    for c in &conns {
        opened.push(match c.role {
            Role::Sub => Opened::Sub(c.client.subscribe(subject.clone()).await?),
            Role::Reply => Opened::Sub(
                c.client
                    .queue_subscribe(subject.clone(), "diskpulse".into())
                    .await?,
            ),
            Role::JsConsume => {
                Opened::Consumer(js::open(a, c.client.clone(), a.mode == Mode::JsPub).await?)
            }
            Role::ObjPut | Role::ObjGet => Opened::Objects(Box::new(
                obj::open(a, &js_context(c.client.clone(), 1, a.timeout)).await?,
            )),
            _ => Opened::Nothing,
        });
    }
    for c in &conns {
        if matches!(c.role, Role::Sub | Role::Reply) {
            // The server has the subscription before the first message is sent.
            connect::round_trip(&c.client).await?;
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
        senders_done_ns: Arc::new(AtomicU64::new(0)),
        expected,
        with_senders: n_senders > 0,
    };
    env.events.event(
        "load_start",
        serde_json::json!({"mode": a.mode.cli_name(), "clients": n_main,
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

    // js-consume alone: --msgs counts all pull clients' messages together (they split the
    // stream), or each ordered client's (each reads every message).
    let consume_limit = match (a.mode, a.msgs) {
        (Mode::JsConsume, Some(m)) if a.ordered => js::Limit::Own(m),
        (Mode::JsConsume, Some(m)) => js::Limit::Shared(Arc::new(AtomicU64::new(0)), m),
        _ => js::Limit::None,
    };
    let catalog = prepared.catalog.clone().unwrap_or_default();
    let mut tasks = vec![];
    for (c, open) in conns.into_iter().zip(opened) {
        let rec = Recorder::new(c.role, c.index, &c.server, clock, window_ns, tx.clone());
        let n_role = roles
            .iter()
            .find(|r| r.0 == c.role)
            .map(|r| r.1)
            .unwrap_or(1);
        let is_main = c.role == main;
        let plan = SendPlan {
            count: total.map(|t| share(t, c.index, n_role)),
            // --rate paces the main role; getters beside putters go as fast as they can.
            pacer: a.rate.filter(|_| is_main).map(|r| {
                Pacer::new(
                    clock,
                    start_ns,
                    r / n_role as f64,
                    c.index as f64 / n_role as f64,
                    end_ns,
                )
            }),
            // Core publishers stamp only when someone in this run receives (or --stamp):
            // a stamp costs a clock read and a copy per message, which is a third of a
            // core publish; JetStream publishes always carry one (for later consumers).
            stamp: a.stamp || !matches!(c.role, Role::Pub) || a.sub > 0,
            size: if is_main {
                a.op_size()
            } else {
                a.object_size as usize
            },
        };
        let ctx = ctx.clone();
        let subj = subject.clone();
        // Getters beside putters work one object at a time, like the study's consumers.
        let w = if is_main { a.window_for(c.role) } else { 1 };
        let timeout = a.timeout;
        let t = match (c.role, open) {
            (Role::Pub, _) => match c.raw {
                Some(r) => tokio::spawn(raw::raw_pub(r, a.subject.clone(), plan, rec, ctx)),
                None => tokio::spawn(workers::core_pub(c.client, subj, plan, rec, ctx)),
            },
            (Role::Sub, Opened::Sub(sub)) => tokio::spawn(workers::core_sub(sub, rec, ctx)),
            (Role::Request, _) => {
                tokio::spawn(workers::request(c.client, subj, w, timeout, plan, rec, ctx))
            }
            (Role::Reply, Opened::Sub(sub)) => tokio::spawn(workers::reply(
                c.client,
                sub,
                a.size as usize,
                a.msgs.filter(|_| a.mode == Mode::Reply),
                rec,
                ctx,
            )),
            (Role::JsPub, _) => {
                let js = js_context(c.client, w, timeout);
                tokio::spawn(workers::js_pub(js, subj, w, plan, rec, ctx))
            }
            (Role::JsConsume, Opened::Consumer(src)) => tokio::spawn(js::consume(
                src,
                a.ack == AckMode::Explicit,
                consume_limit.clone(),
                rec,
                ctx,
            )),
            (Role::KvPut, _) => {
                let js = js_context(c.client, w, timeout);
                let space = kv::KeySpace {
                    keys: a.keys,
                    index: c.index,
                    n: n_role,
                };
                tokio::spawn(kv::put(js, a.bucket.clone(), space, w, plan, rec, ctx))
            }
            (Role::KvGet, _) => {
                let space = kv::KeySpace {
                    keys: a.keys,
                    index: c.index,
                    n: n_role,
                };
                tokio::spawn(kv::get(
                    c.client,
                    a.bucket.clone(),
                    prepared.kv_direct,
                    space,
                    w,
                    timeout,
                    plan,
                    rec,
                    ctx,
                ))
            }
            (Role::ObjPut, Opened::Objects(store)) => tokio::spawn(obj::put(
                *store,
                c.index,
                n_role,
                catalog.clone(),
                w,
                plan,
                rec,
                ctx,
            )),
            (Role::ObjGet, Opened::Objects(store)) => {
                tokio::spawn(obj::get(*store, catalog.clone(), w, plan, rec, ctx))
            }
            (role, _) => anyhow::bail!("role {} has nothing opened to work on", role.name()),
        };
        tasks.push(t);
    }
    drop(tx);
    let mut panicked = None;
    for t in tasks {
        if let Err(e) = t.await {
            panicked.get_or_insert(e);
        }
    }
    let ended_ns = clock.now_ns();
    let collected = collector.await??;
    env.events.event("load_stop", serde_json::json!({}));
    if prepared.pull_consumer {
        js::cleanup_pull(&a.stream, &jetstream::new(setup.clone())).await;
    }
    if let Some(e) = panicked {
        anyhow::bail!("a load worker failed: {e}");
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mode_is_named_as_the_command_line_spells_it() {
        assert_eq!(Mode::JsPub.cli_name(), "js-pub");
        assert_eq!(Mode::ObjGet.cli_name(), "obj-get");
        assert_eq!(Mode::Pub.cli_name(), "pub");
    }
}
