//! `diskpulse nats-bench pub|sub|service|js|kv ...`: today's natscli `nats bench` form
//! (v0.2 and later, natscli's `cli/bench_command.go` and `cli/cheats/bench.md`), mapped
//! onto `diskpulse load` as the v0.1 flat form is ([`super::nats_bench`]), printed and
//! written in natscli v0.2's report and CSV ([`engines::load::natscli_v2`]).
//!
//! Which form runs (decision 0094): a first word that is one of natscli v0.2's
//! subcommands (`pub`, `sub`, `service`, `js`, `kv`) is the v0.2 form; anything else is
//! the v0.1 form's SUBJECT. A v0.1 subject spelled like a subcommand goes after `--`
//! (`diskpulse nats-bench --pub 1 -- pub`).
//!
//! Every flag of natscli v0.2 is one struct ([`Common`]); a flag that natscli does not
//! have on the subcommand given is refused naming it ([`Bench::check_flags`]), so a
//! command line natscli refuses is refused here too.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};

use ::format::cli::{parse_duration, parse_size};
use ::format::usage;
use engines::load::connect::ConnectArgs;
use engines::load::natscli_v2::Kind;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Acks {
    Explicit,
    None,
    All,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum V2Storage {
    File,
    Memory,
}

/// The flags of natscli v0.2's `nats bench` subcommands, natscli's defaults.
#[derive(Args, Debug, Clone)]
pub struct Common {
    /// Number of concurrent clients.
    #[arg(long, default_value_t = 1)]
    pub clients: usize,
    /// Number of messages to publish or subscribe to (`service serve`: serve this many
    /// requests, all servers together, then end; without it, until Ctrl-C).
    #[arg(long)]
    pub msgs: Option<u64>,
    /// Enable or disable the progress bar (`--progress=false`, or `--no-progress`).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub progress: Option<bool>,
    /// Disable the progress bar.
    #[arg(long)]
    pub no_progress: bool,
    /// Save benchmark data to CSV file (natscli v0.2's columns, latencies included);
    /// diskpulse's extra columns go to FILE.diskpulse.csv.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Size of the test messages (128, 1KB, 4KiB, 1MB: K = 1024).
    #[arg(long, default_value = "128", value_parser = parse_size)]
    pub size: u64,
    /// Sleep for this long between publications (per client), or, `service serve`, before
    /// replying to each request.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    pub sleep: Option<Duration>,
    /// Throttle the aggregate send rate to about THROUGHPUT msgs/s across all clients.
    #[arg(long, value_name = "THROUGHPUT")]
    pub throughput: Option<u64>,
    /// Run for about this long: --msgs becomes THROUGHPUT x DURATION (needs --throughput).
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    pub duration: Option<Duration>,
    /// js: the stream to create or use.
    #[arg(long, default_value = "benchstream")]
    pub stream: String,
    /// kv: the bucket to use.
    #[arg(long, default_value = "benchbucket")]
    pub bucket: String,
    /// js pub: create or update the stream first.
    #[arg(long)]
    pub create: bool,
    /// js pub, consume, fetch, ordered, kv put: purge the stream or bucket first.
    #[arg(long)]
    pub purge: bool,
    /// js pub: async acks in flight per client (1: synchronous publishing); js consume,
    /// fetch, ordered: messages buffered per pull.
    #[arg(long)]
    pub batch: Option<usize>,
    /// js consume, fetch: the consumer's acknowledgement mode.
    #[arg(long, value_enum)]
    pub acks: Option<Acks>,
    /// js consume, fetch: acknowledge synchronously, waiting for the server's reply.
    #[arg(long)]
    pub doubleack: bool,
    /// kv put, get: keys between 0 and this number (0: one key per message).
    #[arg(long)]
    pub randomize: Option<u64>,
    /// js pub, kv put: storage of the stream or bucket created.
    #[arg(long, value_enum)]
    pub storage: Option<V2Storage>,
    /// js pub, kv put: replicas of the stream or bucket created.
    #[arg(long)]
    pub replicas: Option<usize>,
    /// js pub, kv put: the maximum size of the stream or bucket.
    #[arg(long, value_parser = parse_size)]
    pub maxbytes: Option<u64>,
    /// js pub: set a message id on each publish (the stream de-duplicates).
    #[arg(long)]
    pub dedup: bool,
    /// pub, js pub: each message on SUBJECT.N (N its number, modulo --multisubjectmax,
    /// zero-padded); sub: listen on SUBJECT.*.
    #[arg(long)]
    pub multisubject: bool,
    /// pub, js pub --multisubject: the number of subjects (0: no max).
    #[arg(long)]
    pub multisubjectmax: Option<u64>,
    /// pub, js pub --multisubject: pick each message's subject at random.
    #[arg(long)]
    pub multisubjectrandomize: bool,
    /// pub, service request, js pub: a file whose bytes are each message's body.
    #[arg(long, value_name = "FILE")]
    pub payload: Option<PathBuf>,
    /// pub, service request, js pub: add a header to every message, KEY:VALUE
    /// (repeatable).
    #[arg(long = "header", short = 'H', value_name = "KEY:VALUE")]
    pub header: Vec<String>,
    /// Print diskpulse's summary as JSON (as `load --json`).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Embedded broker (no --server and no $NATS_URL): the nats-server binary.
    #[arg(long, value_name = "PATH")]
    pub nats_server: Option<PathBuf>,
}

/// A subcommand whose only argument is a subject.
#[derive(Args, Debug, Clone)]
pub struct WithSubject {
    /// Subject to use for the benchmark.
    pub subject: String,
    #[command(flatten)]
    pub c: Common,
}

/// A subcommand without arguments.
#[derive(Args, Debug, Clone)]
pub struct NoSubject {
    #[command(flatten)]
    pub c: Common,
}

/// `js pub [sync|async|atomic|batch] SUBJECT`.
#[derive(Args, Debug, Clone)]
pub struct JsPub {
    /// `[sync|async|atomic|batch] SUBJECT`: `atomic` (or `batch`) publishes atomic batches
    /// of --batch; without the mode word, --batch 1 publishes synchronously and a larger
    /// --batch asynchronously (natscli 0.2.0's form, the cheat sheet's). `fast` is refused.
    #[arg(num_args = 1..=2, required = true, value_name = "[MODE] SUBJECT")]
    pub words: Vec<String>,
    #[command(flatten)]
    pub c: Common,
}

/// `js get sync|batch`.
#[derive(Args, Debug, Clone)]
pub struct JsGet {
    /// `sync` (one get per message) or `batch` (batched direct gets of --batch).
    #[arg(value_name = "sync|batch")]
    pub mode: String,
    #[command(flatten)]
    pub c: Common,
}

/// natscli v0.2's `nats bench` subcommands.
#[derive(Subcommand, Debug, Clone)]
pub enum Bench {
    /// Publish Core NATS messages.
    #[command(
        after_help = "Examples:\n  diskpulse nats-bench pub foo --clients 10 --msgs 10000 --size 512\n  diskpulse nats-bench pub foo --throughput 50000 --duration 30s"
    )]
    Pub(WithSubject),
    /// Subscribe to Core NATS messages.
    #[command(after_help = "Examples:\n  diskpulse nats-bench sub foo --clients 5 --msgs 10000")]
    Sub(WithSubject),
    /// Micro-service mode: `service serve SUBJECT`, `service request SUBJECT`.
    #[command(subcommand)]
    #[command(
        after_help = "Examples:\n  diskpulse nats-bench service serve foo --clients 4\n  diskpulse nats-bench service request foo --clients 4 --msgs 20000"
    )]
    Service(Service),
    /// JetStream: `js pub`, `js ordered`, `js consume`, `js fetch`, `js get`.
    #[command(subcommand)]
    #[command(
        after_help = "Examples:\n  diskpulse nats-bench js pub foo --create --batch 1000\n  diskpulse nats-bench js pub atomic foo --create --batch 500\n  diskpulse nats-bench js ordered\n  diskpulse nats-bench js consume\n  diskpulse nats-bench js fetch --acks=none --batch=1000\n  diskpulse nats-bench js get sync --clients 2"
    )]
    Js(Js),
    /// KV: `kv put`, `kv get`.
    #[command(subcommand)]
    #[command(
        after_help = "Examples:\n  diskpulse nats-bench kv put\n  diskpulse nats-bench kv get --randomize 100"
    )]
    Kv(Kv),
}

#[derive(Subcommand, Debug, Clone)]
pub enum Service {
    /// Service requests (until --msgs requests are served, or Ctrl-C).
    #[command(
        after_help = "Examples:\n  diskpulse nats-bench service serve foo --clients 4 --msgs 20000"
    )]
    Serve(WithSubject),
    /// Send requests and wait for their replies.
    #[command(
        after_help = "Examples:\n  diskpulse nats-bench service request foo --clients 4 --msgs 20000"
    )]
    Request(WithSubject),
}

#[derive(Subcommand, Debug, Clone)]
pub enum Js {
    /// Publish JetStream messages.
    #[command(
        after_help = "Examples:\n  diskpulse nats-bench js pub foo --create --batch 1000\n  diskpulse nats-bench js pub sync foo --create --msgs 10000"
    )]
    Pub(JsPub),
    /// Consume the stream with an ephemeral ordered consumer per client.
    #[command(after_help = "Examples:\n  diskpulse nats-bench js ordered --clients 2")]
    Ordered(NoSubject),
    /// Consume the stream through a durable consumer shared by the clients.
    #[command(after_help = "Examples:\n  diskpulse nats-bench js consume --clients 4")]
    Consume(NoSubject),
    /// Consume the stream through a durable consumer with fetches of --batch.
    #[command(after_help = "Examples:\n  diskpulse nats-bench js fetch --acks=none --batch=1000")]
    Fetch(NoSubject),
    /// Get the stream's messages by sequence, each client all of them (`js get sync`, or
    /// `js get batch --batch N`).
    #[command(
        after_help = "Examples:\n  diskpulse nats-bench js get sync --clients 2 --msgs 10000"
    )]
    Get(JsGet),
}

#[derive(Subcommand, Debug, Clone)]
pub enum Kv {
    /// Put messages in a KV bucket.
    #[command(after_help = "Examples:\n  diskpulse nats-bench kv put --clients 2 --msgs 10000")]
    Put(NoSubject),
    /// Get messages from a KV bucket.
    #[command(after_help = "Examples:\n  diskpulse nats-bench kv get --clients 2 --randomize 100")]
    Get(NoSubject),
}

/// What one v0.2 command line runs: natscli's kind and the `load` arguments.
pub struct Plan {
    pub kind: Kind,
    pub argv: Vec<String>,
    pub common: Common,
    /// natscli's banner (stderr).
    pub banner: String,
}

impl Bench {
    fn common(&self) -> &Common {
        match self {
            Bench::Pub(a) | Bench::Sub(a) => &a.c,
            Bench::Service(Service::Serve(a) | Service::Request(a)) => &a.c,
            Bench::Js(Js::Pub(a)) => &a.c,
            Bench::Js(Js::Ordered(a) | Js::Consume(a) | Js::Fetch(a)) => &a.c,
            Bench::Js(Js::Get(a)) => &a.c,
            Bench::Kv(Kv::Put(a) | Kv::Get(a)) => &a.c,
        }
    }

    /// natscli's name of the subcommand (`js fetch`).
    fn name(&self) -> &'static str {
        match self {
            Bench::Pub(_) => "pub",
            Bench::Sub(_) => "sub",
            Bench::Service(Service::Serve(_)) => "service serve",
            Bench::Service(Service::Request(_)) => "service request",
            Bench::Js(Js::Pub(_)) => "js pub",
            Bench::Js(Js::Ordered(_)) => "js ordered",
            Bench::Js(Js::Consume(_)) => "js consume",
            Bench::Js(Js::Fetch(_)) => "js fetch",
            Bench::Js(Js::Get(_)) => "js get",
            Bench::Kv(Kv::Put(_)) => "kv put",
            Bench::Kv(Kv::Get(_)) => "kv get",
        }
    }

    /// Refuses the flags natscli does not have on this subcommand, naming the first.
    fn check_flags(&self) -> anyhow::Result<()> {
        let c = self.common();
        let n = self.name();
        let js_pub = n == "js pub";
        let js_consumer = matches!(n, "js consume" | "js fetch");
        let sends = matches!(n, "pub" | "service request" | "js pub" | "kv put");
        let carries = matches!(n, "pub" | "service request" | "js pub");
        let spreads = matches!(n, "pub" | "js pub");
        let allowed: [(&str, bool, bool); 18] = [
            ("--multisubjectrandomize", c.multisubjectrandomize, spreads),
            ("--doubleack", c.doubleack, js_consumer),
            ("--multisubject", c.multisubject, spreads || n == "sub"),
            ("--multisubjectmax", c.multisubjectmax.is_some(), spreads),
            ("--throughput", c.throughput.is_some(), sends),
            ("--duration", c.duration.is_some(), sends),
            (
                "--sleep",
                c.sleep.is_some(),
                sends || n == "service serve" || n.starts_with("js ") || n == "kv get",
            ),
            ("--create", c.create, js_pub),
            (
                "--purge",
                c.purge,
                js_pub || js_consumer || n == "js ordered" || n == "kv put",
            ),
            ("--batch", c.batch.is_some(), n.starts_with("js ")),
            ("--payload", c.payload.is_some(), carries),
            ("-H", !c.header.is_empty(), carries),
            ("--acks", c.acks.is_some(), js_consumer),
            ("--randomize", c.randomize.is_some(), n.starts_with("kv ")),
            ("--storage", c.storage.is_some(), js_pub || n == "kv put"),
            ("--replicas", c.replicas.is_some(), js_pub || n == "kv put"),
            ("--maxbytes", c.maxbytes.is_some(), js_pub || n == "kv put"),
            ("--dedup", c.dedup, js_pub),
        ];
        for (flag, given, ok) in allowed {
            if given && !ok {
                return Err(usage!(
                    "{flag} is not a flag of `nats bench {n}` (natscli refuses it too); leave it out"
                ));
            }
        }
        engines::load::message::check_headers(&c.header)?;
        if c.clients == 0 {
            return Err(usage!(
                "--clients 0: at least one client (natscli's default is 1)"
            ));
        }
        Ok(())
    }

    /// --msgs as natscli reads it: --duration x --throughput when given, else --msgs, else 100,000.
    fn msgs(&self) -> anyhow::Result<u64> {
        let c = self.common();
        if let Some(d) = c.duration {
            let Some(t) = c.throughput.filter(|t| *t > 0) else {
                return Err(usage!(
                    "--duration {} needs --throughput: it sets --msgs to THROUGHPUT x DURATION (natscli's rule); add e.g. --throughput 50000",
                    ::format::cli::fmt_duration(d)
                ));
            };
            let m = (t as f64 * d.as_secs_f64()).round() as u64;
            if m == 0 {
                return Err(usage!(
                    "--throughput {t} --duration {}: that is zero messages; use a longer --duration",
                    ::format::cli::fmt_duration(d)
                ));
            }
            return Ok(m);
        }
        match c.msgs {
            Some(0) => Err(usage!("--msgs 0: the number of messages must be above 0")),
            Some(m) => Ok(m),
            None => Ok(100_000),
        }
    }

    /// The aggregate send rate --throughput and --sleep give (ops/s over all clients):
    /// --sleep S lets each client send at most 1/S per second.
    fn rate(&self) -> Option<f64> {
        let c = self.common();
        let by_sleep = c
            .sleep
            .filter(|s| !s.is_zero())
            .map(|s| c.clients as f64 / s.as_secs_f64());
        let by_throughput = c.throughput.filter(|t| *t > 0).map(|t| t as f64);
        match (by_sleep, by_throughput) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The `load` arguments and natscli's kind of this command line.
    pub fn plan(&self) -> anyhow::Result<Plan> {
        self.check_flags()?;
        let c = self.common();
        let msgs = self.msgs()?;
        let clients = c.clients.to_string();
        let mut v: Vec<String> = vec![];
        let mut push = |xs: &[&str]| v.extend(xs.iter().map(|x| x.to_string()));
        let (kind, subject) = match self {
            Bench::Pub(a) => {
                push(&["pub"]);
                (Kind::CORE_PUB, Some(a.subject.clone()))
            }
            Bench::Sub(a) => {
                push(&["sub"]);
                (Kind::CORE_SUB, Some(a.subject.clone()))
            }
            Bench::Service(Service::Serve(a)) => {
                push(&["reply"]);
                if let Some(s) = c.sleep.filter(|s| !s.is_zero()) {
                    push(&["--service-time", &::format::cli::fmt_duration(s)]);
                }
                (Kind::SERVE, Some(a.subject.clone()))
            }
            Bench::Service(Service::Request(a)) => {
                push(&["request"]);
                (Kind::REQUEST, Some(a.subject.clone()))
            }
            Bench::Js(Js::Pub(a)) => {
                let (mode, subject) = match a.words.as_slice() {
                    [s] => (None, s.clone()),
                    [m, s] => (Some(m.as_str()), s.clone()),
                    _ => unreachable!("clap takes 1 or 2"),
                };
                let batch = c.batch.unwrap_or(500).max(1);
                let k = js_pub_kind(mode, batch, &subject)?;
                push(&["js-pub", "--stream", &c.stream]);
                if k == Kind::JS_SYNC_PUB {
                    push(&["--sync"]);
                } else if k == Kind::JS_ATOMIC_PUB {
                    let most = engines::load::message::MAX_ATOMIC_BATCH;
                    if batch > most {
                        return Err(usage!(
                            "js pub atomic --batch {batch}: 1 to {most} messages (nats-server's limit on one atomic batch)"
                        ));
                    }
                    push(&["--atomic-batch", &batch.to_string()]);
                } else {
                    push(&["--window", &batch.to_string()]);
                }
                if c.dedup {
                    if k == Kind::JS_ATOMIC_PUB {
                        return Err(usage!(
                            "--dedup with js pub atomic is not run here (each batch is stored once, by its commit); leave --dedup out"
                        ));
                    }
                    push(&["--msg-id"]);
                }
                (k, Some(subject))
            }
            Bench::Js(Js::Get(g)) => {
                push(&["js-get", "--stream", &c.stream]);
                let (kind, extra) = js_get_kind(&g.mode, c.batch)?;
                push(&extra.iter().map(String::as_str).collect::<Vec<_>>());
                (kind, None)
            }
            Bench::Js(j) => {
                push(&["js-consume", "--stream", &c.stream]);
                if let Some(b) = c.batch {
                    push(&["--batch", &b.to_string()]);
                }
                let kind = match j {
                    Js::Ordered(_) => {
                        push(&["--ordered"]);
                        Kind::JS_ORDERED
                    }
                    Js::Consume(_) => Kind::JS_CONSUME,
                    _ => Kind::JS_FETCH,
                };
                match c.acks {
                    Some(Acks::None) => push(&["--ack", "none"]),
                    Some(Acks::All) => push(&["--ack", "all"]),
                    _ => {}
                }
                // natscli acks nothing with --acks=none, --doubleack or not.
                if c.doubleack && c.acks != Some(Acks::None) {
                    push(&["--double-ack"]);
                }
                (kind, None)
            }
            Bench::Kv(k) => {
                let put = matches!(k, Kv::Put(_));
                push(&[if put { "kv-put" } else { "kv-get" }, "--bucket", &c.bucket]);
                // natscli: keys 0..msgs without --randomize, 0..R with it.
                let keys = c.randomize.filter(|r| *r > 0).unwrap_or(msgs);
                push(&["--keys", &keys.to_string()]);
                (if put { Kind::KV_PUT } else { Kind::KV_GET }, None)
            }
        };
        push(&["--clients", &clients]);
        if let Some(s) = &subject {
            push(&["--subject", s]);
        }
        // The server serves until Ctrl-C unless --msgs is given (natscli: always).
        let open_ended = kind == Kind::SERVE && c.msgs.is_none();
        // natscli's getters each get --msgs (every one reads the same messages).
        let load_msgs = if kind == Kind::JS_GET_SYNC || kind == Kind::JS_GET_BATCH {
            msgs.saturating_mul(c.clients as u64)
        } else {
            msgs
        };
        if !open_ended {
            push(&["--msgs", &load_msgs.to_string()]);
        }
        push(&["--size", &c.size.to_string()]);
        if let Some(r) = self.rate().filter(|_| kind != Kind::SERVE) {
            push(&["--rate", &format!("{r}")]);
        }
        if kind == Kind::CORE_PUB {
            // natscli v0.2's latency columns: each publish call timed.
            push(&["--time-publish"]);
        }
        if let Some(p) = &c.payload {
            push(&["--payload", &p.to_string_lossy()]);
        }
        if c.multisubject {
            let max = c.multisubjectmax.unwrap_or(100_000).to_string();
            push(&[
                "--multisubject",
                "--multisubject-max",
                &max,
                "--multisubject-pad",
            ]);
            if c.multisubjectrandomize {
                push(&["--multisubject-random"]);
            }
        }
        for h in &c.header {
            push(&["--header", h]);
        }
        store_and_output_flags(c, &mut push);
        let banner = banner(kind, subject.as_deref(), msgs, c, self.name());
        Ok(Plan {
            kind,
            argv: v,
            common: c.clone(),
            banner,
        })
    }
}

/// The `load` flags of the stream or bucket created (`--storage`, `--replicas`,
/// `--maxbytes`, `--purge`) and of the output (`--no-progress`, `--json`).
fn store_and_output_flags(c: &Common, push: &mut impl FnMut(&[&str])) {
    let stores = c.storage.is_some() || c.replicas.is_some() || c.maxbytes.is_some();
    if stores || c.purge {
        if let Some(s) = c.storage {
            push(&[
                "--storage",
                if s == V2Storage::Memory {
                    "memory"
                } else {
                    "file"
                },
            ]);
        }
        if let Some(r) = c.replicas {
            push(&["--replicas", &r.to_string()]);
        }
        if let Some(m) = c.maxbytes {
            push(&["--max-bytes", &m.to_string()]);
        }
        if c.purge {
            push(&["--purge"]);
        }
    }
    if c.no_progress || c.progress == Some(false) {
        push(&["--quiet"]);
    }
    if c.json {
        push(&["--json"]);
    }
}

/// The kind of `js get MODE` and its extra `load` flags: `sync` (a get per message) or
/// `batch` (`--get-batch BATCH`, batched direct gets); `--batch` only with `batch`.
fn js_get_kind(mode: &str, batch: Option<usize>) -> anyhow::Result<(Kind, Vec<String>)> {
    match mode {
        "sync" if batch.is_none() => Ok((Kind::JS_GET_SYNC, vec![])),
        "batch" => {
            let b = batch.unwrap_or(500).max(1).to_string();
            Ok((Kind::JS_GET_BATCH, vec!["--get-batch".into(), b]))
        }
        "sync" => Err(usage!(
            "--batch is a flag of `js get batch`, not of `js get sync` (natscli refuses it too); leave it out"
        )),
        m => Err(usage!(
            "js get {m}: the get mode is `sync` (a get per message) or `batch` (batched direct gets of --batch)"
        )),
    }
}

/// The kind of `js pub [MODE] SUBJECT`: `sync`, `async`, `atomic` (or natscli's alias
/// `batch`); without the word, `--batch 1` is sync and more async (natscli 0.2.0).
/// `fast` (nats-server 2.14's flow-controlled fast batches) is refused, saying why.
fn js_pub_kind(mode: Option<&str>, batch: usize, subject: &str) -> anyhow::Result<Kind> {
    Ok(match mode {
        Some("sync") => Kind::JS_SYNC_PUB,
        Some("async") => Kind::JS_ASYNC_PUB,
        Some("atomic" | "batch") => Kind::JS_ATOMIC_PUB,
        None if batch == 1 => Kind::JS_SYNC_PUB,
        None => Kind::JS_ASYNC_PUB,
        Some("fast") => {
            return Err(usage!(
                "js pub fast is not run here: fast batch publishing is orbit.go's flow-controlled protocol (its acks every --batch messages, a gap mode), which diskpulse does not speak; use `js pub atomic {subject} --batch N` or `js pub async {subject}`"
            ))
        }
        Some(m) => {
            return Err(usage!(
                "js pub {m}: the publish mode is `sync`, `async` or `atomic` (`batch`); e.g. `js pub async {subject} --batch 500`"
            ))
        }
    })
}

/// natscli's banner: `Starting <label> benchmark [clients=1, msg-size=128 B, msgs=..]`,
/// the names sorted as natscli sorts them.
fn banner(kind: Kind, subject: Option<&str>, msgs: u64, c: &Common, name: &str) -> String {
    use engines::load::natscli_v2::ibytes;
    let mut kv: Vec<(&str, String)> = vec![
        ("clients", c.clients.to_string()),
        ("msg-size", ibytes(c.size)),
        ("msgs", ::engines::load::natscli::commas(msgs)),
    ];
    if let Some(s) = subject {
        kv.push(("subject", s.to_string()));
    }
    let sleep = c.sleep.map(::format::cli::fmt_duration);
    kv.push(("sleep", sleep.unwrap_or_else(|| "0s".into())));
    if name.starts_with("js ") {
        kv.push(("stream", c.stream.clone()));
        if name != "js get" {
            kv.push(("purge", c.purge.to_string()));
        }
    }
    if name == "js pub" {
        kv.push(("batch", c.batch.unwrap_or(500).to_string()));
    }
    if name.starts_with("kv ") {
        kv.push(("bucket", c.bucket.clone()));
    }
    if let Some(t) = c.throughput {
        kv.push(("throughput", ::engines::load::natscli::commas(t)));
    }
    kv.sort();
    let inner: Vec<String> = kv.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("Starting {} benchmark [{}]", kind.label, inner.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(args: &[&str]) -> String {
        #[derive(clap::Parser)]
        struct W {
            #[command(subcommand)]
            b: Bench,
        }
        use clap::Parser;
        let w = W::try_parse_from(std::iter::once("nats-bench").chain(args.iter().copied()))
            .unwrap_or_else(|e| panic!("{args:?}: {e}"));
        match w.b.plan() {
            Ok(p) => format!("{} | {}", p.kind.label, p.argv.join(" ")),
            Err(e) => format!("ERR {e}"),
        }
    }

    #[test]
    fn the_cheat_sheet_lines_map_onto_load_modes() {
        assert_eq!(
            plan(&[
                "pub",
                "foo",
                "--clients",
                "10",
                "--msgs",
                "10000",
                "--size",
                "512"
            ]),
            "Core NATS publisher | pub --clients 10 --subject foo --msgs 10000 --size 512 --time-publish"
        );
        assert_eq!(
            plan(&["service", "serve", "--clients", "4", "testservice"]),
            "Core NATS service server | reply --clients 4 --subject testservice --size 128"
        );
        assert_eq!(
            plan(&["js", "pub", "foo", "--create", "--batch", "1000"]),
            "JetStream asynchronous publisher | js-pub --stream benchstream --window 1000 --clients 1 --subject foo --msgs 100000 --size 128"
        );
        assert!(
            plan(&["js", "pub", "foo", "--purge", "--batch=1", "--clients=10"]).starts_with(
                "JetStream synchronous publisher | js-pub --stream benchstream --sync "
            )
        );
        assert!(plan(&[
            "js",
            "fetch",
            "--clients",
            "4",
            "--acks=none",
            "--batch=1000"
        ])
        .contains("js-consume --stream benchstream --batch 1000 --ack none --clients 4"));
        assert!(
            plan(&["service", "serve", "testservice", "--sleep", "50us"])
                .contains("reply --service-time 50us ")
        );
        assert!(plan(&["pub", "foo", "--sleep=100ns"]).contains("--rate 10000000"));
        assert!(plan(&[
            "pub",
            "foo",
            "--clients",
            "4",
            "--throughput",
            "50000",
            "--duration",
            "30s"
        ])
        .contains("--msgs 1500000 --size 128 --rate 50000"));
        assert!(
            plan(&["kv", "get", "--randomize=100000", "--clients", "10"]).starts_with(
                "JetStream KV getter | kv-get --bucket benchbucket --keys 100000 --clients 10"
            )
        );
        assert!(plan(&["js", "ordered", "--no-progress"]).ends_with("--quiet"));
        assert!(plan(&["js", "ordered", "--progress=false"]).ends_with("--quiet"));
    }

    #[test]
    fn flags_natscli_does_not_have_there_are_refused_by_name() {
        for (args, flag) in [
            (&["sub", "foo", "--throughput", "5"][..], "--throughput"),
            (&["pub", "foo", "--create"], "--create"),
            (&["pub", "foo", "--duration", "1s"], "needs --throughput"),
            (&["kv", "put", "--acks", "none"], "--acks"),
            (&["js", "pub", "fast", "foo"], "js pub fast"),
            (&["js", "get", "all"], "js get all"),
            (&["js", "get", "sync", "--batch", "5"], "--batch"),
            (&["sub", "foo", "--payload", "f"], "--payload"),
            (&["kv", "put", "-H", "a:b"], "-H"),
        ] {
            let p = plan(args);
            assert!(p.starts_with("ERR ") && p.contains(flag), "{args:?}: {p}");
        }
    }
}
