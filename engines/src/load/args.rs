//! The load generator's flags ([`LoadArgs`]), what they mean together, and the checks
//! made before anything starts.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

pub use super::modes::{AckMode, Discard, Mode, QueueType, Storage};

use super::connect;
use super::record::Role;
use format::cli::{parse_duration, parse_size};
use format::usage;

/// Default in-flight acks for async JetStream publishing.
pub const DEFAULT_WINDOW: usize = 256;

/// The largest `max_payload` a nats-server accepts (64 MiB): no message can be larger.
const MAX_NATS_PAYLOAD: u64 = 64 << 20;
/// nats-server's default `max_payload` (1 MiB), what an embedded server allows.
pub const DEFAULT_MAX_PAYLOAD: u64 = 1 << 20;
/// --rate above this: operations closer than 10 ns apart, which no client sends.
const MAX_RATE: f64 = 1e8;
/// A week: longer runs are several runs.
const MAX_DURATION: Duration = Duration::from_secs(7 * 24 * 3600);
/// In-flight operations per client.
const MAX_WINDOW: usize = 1_000_000;
/// Messages per pull fetch.
const MAX_BATCH: usize = 1_000_000;
/// Runtime threads.
const MAX_THREADS: usize = 1024;
/// File descriptors beside the connections: stdio, the recording's files, the store,
/// the runtime's own.
const FD_RESERVE: u64 = 64;

/// RLIMIT_NOFILE as (soft, hard).
fn nofile_limit() -> anyhow::Result<(u64, u64)> {
    // SAFETY: getrlimit writes into the zeroed struct.
    let mut r: libc::rlimit = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        anyhow::bail!(
            "cannot read RLIMIT_NOFILE: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok((r.rlim_cur as u64, r.rlim_max as u64))
}

/// Raises the soft RLIMIT_NOFILE (up to the hard limit, which needs no privilege).
fn set_nofile_soft(soft: u64) -> anyhow::Result<()> {
    let (_, hard) = nofile_limit()?;
    let r = libc::rlimit {
        rlim_cur: soft as libc::rlim_t,
        rlim_max: hard as libc::rlim_t,
    };
    // SAFETY: setrlimit reads the struct; raising the soft limit to the hard one is allowed.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) } != 0 {
        anyhow::bail!(
            "cannot raise RLIMIT_NOFILE to {soft}: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
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
    /// js-pub: set Nats-Msg-Id on every publish; after the run the publishes whose ack was
    /// lost are sent again with their id (the stream de-duplicates), so the stream check
    /// is exact.
    #[arg(long)]
    pub msg_id: bool,
    /// In-flight operations per client (js-pub acks, requests, KV puts/gets, object PUTs/GETs).
    /// Default: 256 for js-pub, 1 otherwise.
    #[arg(long)]
    pub window: Option<usize>,
    /// Request (and KV get) timeout.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// AMQP modes: the queue published to and consumed from (amqp-call/amqp-cast: the
    /// request queue the responders consume).
    /// Default: diskpulse. Refused in a NATS mode, as every AMQP-only flag.
    #[arg(long = "queue")]
    pub queue_flag: Option<String>,
    /// AMQP modes: the type of the queue diskpulse declares (durable in every case).
    /// Default: classic.
    #[arg(long = "queue-type", value_enum)]
    pub queue_type_flag: Option<QueueType>,
    /// AMQP modes: transient messages (delivery mode 1) instead of persistent (2).
    #[arg(long)]
    pub transient: bool,
    /// AMQP consumers and responders: unacknowledged deliveries per consumer (basic.qos).
    /// Default: 100.
    #[arg(long = "prefetch")]
    pub prefetch_flag: Option<u16>,
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
    pub(crate) max_bytes: Option<u64>,
    /// js-pub with --max-bytes: what the full stream does, `new` (publishes fail) or
    /// `old` (the oldest messages make room: for a load left running for hours).
    #[arg(long, value_enum, default_value_t = Discard::New, requires = "max_bytes")]
    pub discard: Discard,
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
    /// Core publish and subscribe (and a cast's responders) through async-nats even where
    /// the raw protocol writer and reader could be used.
    #[arg(long)]
    pub(crate) no_raw: bool,
    /// pub --sub M: flow control, messages the publishers may be ahead of the slowest
    /// subscriber (default: 16 MiB of messages; 0 = off, publishers run free and what the
    /// subscribers cannot take is dropped by the server and counted `missing`).
    #[arg(long, value_name = "MSGS")]
    pub(crate) flow_window: Option<u64>,
    /// Stamp core publishes with their send time even without subscribers in this run
    /// (for `diskpulse load sub` elsewhere to measure end to end).
    #[arg(long)]
    pub stamp: bool,
    /// Runtime threads: 0 = automatic (one thread for JetStream, KV and object modes with
    /// one client: fewer context switches; all cores otherwise).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Delay each direction between the main role's clients and the servers by this much
    /// (tc netem's delay, through a proxy of our own per server; responders, subscribers
    /// and consumers started beside them connect directly, as a service next to its broker).
    #[arg(long, value_parser = parse_duration, value_name = "DELAY")]
    pub(crate) inject_latency: Option<Duration>,
    /// With --inject-latency: jitter around the delay, ± this (uniform) or its standard
    /// deviation (normal).
    #[arg(long, value_parser = parse_duration)]
    pub jitter: Option<Duration>,
    /// How --jitter is drawn.
    #[arg(long, value_enum, default_value_t = crate::proxy::JitterDist::Uniform)]
    pub jitter_dist: crate::proxy::JitterDist,
    /// Statistics window of load.csv.
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    pub(crate) stats_window: Duration,
    /// Write natscli's CSV (7 columns, one row per client) to FILE; diskpulse's extra
    /// columns and per-role rows go to FILE.diskpulse.csv beside it (results.csv ->
    /// results.diskpulse.csv), the per-client rates chart to results.png and .svg.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
    /// reply (and request/cast --reply M): responders spend this long on each request
    /// before replying (a service's processing time; natscli's `service serve --sleep`).
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    pub service_time: Option<Duration>,
    /// js-consume (and js-pub --consume M): the shared durable is a push consumer with
    /// queue group `diskpulse` (natscli v0.1's `--push`) instead of a pull consumer.
    #[arg(long, conflicts_with = "ordered")]
    pub push: bool,
    /// pub, request, cast, js-pub: each message's body is this file's bytes (natscli
    /// v0.2's `--payload`; `--size` becomes the file's length, nothing is stamped in it).
    #[arg(long, value_name = "FILE")]
    pub payload: Option<PathBuf>,
    /// The `--payload` file's bytes, read once before the run ([`LoadArgs::load_payload`]).
    #[arg(skip)]
    pub payload_body: Option<bytes::Bytes>,
    /// pub, request, cast, js-pub: a header on every message, `KEY:VALUE` (repeatable;
    /// natscli's `-H`); core publishes go as HPUB.
    #[arg(long = "header", short = 'H', value_name = "KEY:VALUE")]
    pub headers: Vec<String>,
    /// pub: time each publish call as natscli v0.2 does (a copy into the client's
    /// buffer, and the write when it is full), for its latency columns.
    #[arg(long)]
    pub time_publish: bool,
    /// js-pub: publish in atomic batches of N (nats-server 2.12+): N-1 publishes and a
    /// commit whose ack is awaited; the stream is given allow_atomic.
    #[arg(long, value_name = "N")]
    pub atomic_batch: Option<usize>,
    /// kv-put: the history depth (values kept per key) of a bucket diskpulse creates.
    #[arg(long)]
    pub history: Option<u8>,
    /// pub, js-pub: each message to `SUBJECT.N` (its number in the run); sub, a pub's
    /// subscribers and the stream listen on `SUBJECT.*` (natscli's `--multisubject`).
    #[arg(long)]
    pub multisubject: bool,
    /// --multisubject: N is the message's number modulo this (0: no max).
    #[arg(long, default_value_t = 100_000)]
    pub multisubject_max: u64,
    /// --multisubject: N zero-padded to the max's digits (natscli v0.2; v0.1 does not).
    #[arg(long)]
    pub multisubject_pad: bool,
    /// --multisubject: N drawn at random below --multisubject-max (natscli v0.2's
    /// `--multisubjectrandomize`).
    #[arg(long)]
    pub multisubject_random: bool,
    /// js-get: batched direct gets of N (ADR-31; the stream must allow direct gets), one
    /// timed request per batch (natscli's `js get batch`).
    #[arg(long, value_name = "N")]
    pub get_batch: Option<usize>,
    /// js-consume (shared durable, acking): each ack waits for the server's reply
    /// (natscli's `--doubleack`), so the consumer's rate includes the ack round trip.
    #[arg(long)]
    pub double_ack: bool,
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
            Mode::JsPub | Mode::JsGet | Mode::KvPut | Mode::KvGet | Mode::ObjPut | Mode::ObjGet
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

    /// `pub --sub M`'s flow-control window in messages (None: off); see [`super::flow`].
    pub(crate) fn flow_window(&self) -> Option<u64> {
        match self.flow_window {
            Some(0) => None,
            Some(w) => Some(w),
            None => Some(super::flow::Flow::default_window(self.size as usize)),
        }
    }

    /// The main role of the mode.
    pub(crate) fn main_role(&self) -> Role {
        match self.mode {
            Mode::Pub | Mode::Cast => Role::Pub,
            Mode::Sub => Role::Sub,
            Mode::Request => Role::Request,
            Mode::Reply => Role::Reply,
            Mode::JsPub => Role::JsPub,
            Mode::JsConsume => Role::JsConsume,
            Mode::JsGet => Role::JsGet,
            Mode::KvPut => Role::KvPut,
            Mode::KvGet => Role::KvGet,
            Mode::ObjPut => Role::ObjPut,
            Mode::ObjGet => Role::ObjGet,
            Mode::AmqpPub => Role::AmqpPub,
            Mode::AmqpConsume => Role::AmqpConsume,
            Mode::AmqpCall => Role::AmqpCall,
            Mode::AmqpCast => Role::AmqpCast,
        }
    }

    pub(crate) fn main_clients(&self) -> usize {
        match self.mode {
            Mode::ObjPut => self.workers.unwrap_or(self.clients),
            Mode::ObjGet if self.consumers > 0 => self.consumers,
            _ => self.clients,
        }
    }

    /// Checks flags before anything starts (exit 2, one line naming the flag, the limit
    /// and why). Writes nothing: [`LoadArgs::create_csv`] creates `--csv` after every
    /// check of the command has passed. It may raise the soft RLIMIT_NOFILE to the hard
    /// one when the clients need it (see [`LoadArgs::check_fd_limit`]).
    #[allow(
        clippy::too_many_lines,
        reason = "one check per flag, in the order the flags are documented, each next to the message naming it"
    )]
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.mode.is_amqp() {
            super::amqp::validate(self)?;
        } else {
            self.connect.validate()?;
            self.refuse_in_nats_mode()?;
        }
        if self.main_clients() == 0 {
            return Err(usage!("--clients must be at least 1"));
        }
        if let Some(r) = self.rate {
            if !(r > 0.0 && r.is_finite()) {
                return Err(usage!("--rate takes ops per second above 0; got {r}"));
            }
            if r > MAX_RATE {
                return Err(usage!(
                    "--rate {r}: at most {MAX_RATE:.0} ops/s (the pacer schedules each operation in whole ns, and no client sends faster); leave --rate out to go as fast as the clients can"
                ));
            }
        }
        if self.rate.is_some()
            && matches!(
                self.mode,
                Mode::Sub | Mode::Reply | Mode::JsConsume | Mode::AmqpConsume
            )
        {
            return Err(usage!(
                "--rate paces senders; {} receives as fast as messages come",
                self.main_role().name()
            ));
        }
        if self.flow_window.is_some() && !(self.mode == Mode::Pub && self.sub > 0) {
            return Err(usage!(
                "--flow-window holds publishers to the subscribers of the same run; it needs `pub --sub M` (got {}{})",
                self.mode.cli_name(),
                if self.mode == Mode::Pub { " without --sub" } else { "" }
            ));
        }
        if self.msg_id && self.mode != Mode::JsPub {
            return Err(usage!(
                "--msg-id is for js-pub (a stream's duplicate window de-duplicates by it); {} has no use for it",
                self.mode.cli_name()
            ));
        }
        if let Some(d) = self.duration {
            if d.is_zero() {
                return Err(usage!(
                    "--duration must be more than 0s (leave it out to run --msgs operations)"
                ));
            }
            if d > MAX_DURATION {
                return Err(usage!(
                    "--duration {}: at most 168h, a week (longer is several runs: each keeps its recording whole); run several shorter runs",
                    format::cli::fmt_duration(d)
                ));
            }
            if self.stats_window > d {
                return Err(usage!(
                    "--stats-window {} is longer than --duration {}: load.csv would have no whole window; use a window shorter than the run",
                    format::cli::fmt_duration(self.stats_window),
                    format::cli::fmt_duration(d)
                ));
            }
        }
        if self.window == Some(0) {
            return Err(usage!("--window must be at least 1"));
        }
        if let Some(w) = self.window.filter(|w| *w > MAX_WINDOW) {
            return Err(usage!(
                "--window {w}: at most {MAX_WINDOW} operations in flight per client (each holds a payload and two queue slots); use more --clients for more"
            ));
        }
        if self.stats_window < Duration::from_millis(1) {
            return Err(usage!("--stats-window must be at least 1ms"));
        }
        if self.stats_window > Duration::from_secs(3600) {
            return Err(usage!(
                "--stats-window {}: at most 1h (a load.csv row per window lines up with the 1 ms disk timeline)",
                format::cli::fmt_duration(self.stats_window)
            ));
        }
        if self.timeout.is_zero() {
            return Err(usage!(
                "--timeout must be more than 0s (every request would time out)"
            ));
        }
        if self.msgs == Some(0) {
            return Err(usage!("--msgs must be at least 1"));
        }
        self.check_latency()?;
        self.check_message_flags()?;
        if self.batch == 0 {
            return Err(usage!("--batch must be at least 1"));
        }
        if self.batch > MAX_BATCH {
            return Err(usage!(
                "--batch {}: at most {MAX_BATCH} messages per pull fetch (the server's max_request_batch default is far lower); use a smaller batch",
                self.batch
            ));
        }
        if self.keys == 0 {
            return Err(usage!("--keys must be at least 1"));
        }
        if self.size > MAX_NATS_PAYLOAD && !self.mode.is_amqp() {
            return Err(usage!(
                "--size {}: a NATS message carries at most 64 MiB (the server's max_payload cannot go higher); use a smaller --size",
                format::units::bytes_exact(self.size)
            ));
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
        if self.max_bytes == Some(0) {
            return Err(usage!(
                "--max-bytes must be more than 0 (leave it out for no limit)"
            ));
        }
        if !(1..=5).contains(&self.replicas) {
            return Err(usage!("--replicas takes 1 to 5, got {}", self.replicas));
        }
        if self.threads > MAX_THREADS {
            return Err(usage!(
                "--threads {}: at most {MAX_THREADS} (0 picks one per core)",
                self.threads
            ));
        }
        // NATS subjects are tokens separated by '.', none of them empty ("a..b", ".a").
        if !self.mode.is_amqp() && self.subject.is_empty()
            || self.subject.contains(char::is_whitespace)
            || self.subject.split('.').any(str::is_empty)
        {
            return Err(usage!(
                "--subject '{}' is not a valid subject: tokens separated by '.', none of them empty, no spaces, like diskpulse.bench",
                self.subject
            ));
        }
        if matches!(self.mode, Mode::JsPub | Mode::JsConsume | Mode::JsGet) {
            Self::check_name("--stream", &self.stream)?;
        }
        if matches!(
            self.mode,
            Mode::KvPut | Mode::KvGet | Mode::ObjPut | Mode::ObjGet
        ) {
            Self::check_name("--bucket", &self.bucket)?;
        }
        self.check_fd_limit()
    }

    /// Checks that `--csv` and the extras file beside it can be written, so a bad path fails before
    /// the run, not after it. Call it after every other check has passed: bad input
    /// writes nothing.
    pub fn create_csv(&self) -> anyhow::Result<()> {
        if let Some(p) = &self.csv {
            // Checked, not created: the files are put in place at the end through
            // format::atomic (a temporary file and a rename), so an existing file or a
            // symlink at either name is neither truncated nor followed.
            format::atomic::check_writable(p).map_err(|e| {
                usage!(
                    "--csv {}: {e:#}; name a file in a writable directory",
                    p.display()
                )
            })?;
            let x = super::natscli::extras_path(p);
            format::atomic::check_writable(&x).map_err(|e| {
                usage!(
                    "--csv {}: its extras file {}: {e:#}",
                    p.display(),
                    x.display()
                )
            })?;
        }
        Ok(())
    }

    /// The payload bytes of each message the main role sends, for modes whose messages
    /// carry `--size` (object modes send chunks, receivers send nothing).
    fn payload_bytes(&self) -> Option<u64> {
        matches!(
            self.mode,
            Mode::Pub
                | Mode::Request
                | Mode::Cast
                | Mode::JsPub
                | Mode::KvPut
                | Mode::AmqpPub
                | Mode::AmqpCall
                | Mode::AmqpCast
        )
        .then_some(self.size)
    }

    /// Refuses a `--size` above the server's `max_payload` (`whose` names the server):
    /// the server would close the connection on the first such publish, and the run
    /// would measure nothing.
    pub fn check_max_payload(&self, max_payload: u64, whose: &str) -> anyhow::Result<()> {
        match self.payload_bytes() {
            Some(size) if size > max_payload => Err(usage!(
                "--size {}: {whose} accepts messages of at most {} (its max_payload); use --size {} or less, or raise max_payload in the server's configuration",
                format::units::bytes_exact(size),
                format::units::bytes_exact(max_payload),
                format::units::bytes_exact(max_payload)
            )),
            _ => Ok(()),
        }
    }

    /// Connections this run opens: one per client of every role, two per core publisher
    /// that writes the protocol itself (its own socket beside the async-nats client), and
    /// the setup connection.
    /// The jitter of `--inject-latency` (none when absent or 0).
    pub(crate) fn latency_jitter(&self) -> Option<crate::proxy::Jitter> {
        self.jitter
            .filter(|j| !j.is_zero())
            .map(|amount| crate::proxy::Jitter {
                amount,
                dist: self.jitter_dist,
            })
    }

    /// `--inject-latency`, `--jitter`: bounds, and a connection the proxy can carry.
    fn check_latency(&self) -> anyhow::Result<()> {
        let Some(delay) = self.inject_latency else {
            if self.jitter.is_some() {
                return Err(usage!(
                    "--jitter varies the delay of --inject-latency; add --inject-latency DELAY (e.g. --inject-latency 10ms --jitter 2ms)"
                ));
            }
            return Ok(());
        };
        crate::proxy::check("--inject-latency", delay, self.latency_jitter())
            .map_err(|e| usage!("{e}"))?;
        let tls_url = self.connect.server_list().iter().any(|u| {
            let u = u.trim().to_ascii_lowercase();
            u.starts_with("tls://") || u.starts_with("amqps://")
        });
        if tls_url || self.connect.tls_ca.is_some() || self.connect.tls_cert.is_some() {
            return Err(usage!(
                "--inject-latency with TLS: the client would check the proxy's address (127.0.0.1) against the server's certificate; run `diskpulse proxy --listen HOST:PORT --upstream SERVER --delay ...` with a certificate naming HOST, or leave TLS out"
            ));
        }
        Ok(())
    }

    pub fn connections(&self) -> u64 {
        let raw_pubs =
            matches!(self.mode, Mode::Pub | Mode::Cast) && self.connect.is_plain() && !self.no_raw;
        // Saturating: `--clients 18446744073709551615` must reach the limit check, not
        // overflow here.
        let raw_subs =
            matches!(self.mode, Mode::Pub | Mode::Sub) && self.connect.is_plain() && !self.no_raw;
        let main = (self.main_clients() as u64).saturating_mul(
            if raw_pubs || (raw_subs && self.mode == Mode::Sub) {
                2
            } else {
                1
            },
        );
        let others = match self.mode {
            Mode::Pub => self.sub.saturating_mul(if raw_subs { 2 } else { 1 }),
            // A cast's responders read raw beside their async-nats client (see rawsub).
            Mode::Cast if self.connect.is_plain() && !self.no_raw => self.reply.saturating_mul(2),
            Mode::Request | Mode::Cast | Mode::AmqpCall | Mode::AmqpCast => self.reply,
            Mode::JsPub | Mode::AmqpPub => self.consume,
            Mode::ObjPut => self.consumers,
            _ => 0,
        } as u64;
        // A proxied client's connection is three descriptors here: its own, and the
        // proxy's two (client side, server side).
        let proxied = if self.inject_latency.is_some() { 3 } else { 1 };
        main.saturating_mul(proxied)
            .saturating_add(others)
            .saturating_add(1)
    }

    /// Every connection is a file descriptor: more clients than RLIMIT_NOFILE allows
    /// would fail with "Too many open files" after all the others had connected. Raises
    /// the soft limit to the hard one when that is enough; refuses otherwise.
    fn check_fd_limit(&self) -> anyhow::Result<()> {
        let need = self.connections().saturating_add(FD_RESERVE);
        let (soft, hard) = nofile_limit()?;
        if need <= soft {
            return Ok(());
        }
        if need <= hard {
            set_nofile_soft(hard)?;
            return Ok(());
        }
        // Name the flags that make the connections (`--sub 1e19` was reported as
        // "--clients 1").
        let (flag, others) = match self.mode {
            Mode::Pub => ("--sub", self.sub),
            Mode::Request | Mode::Cast | Mode::AmqpCall | Mode::AmqpCast => ("--reply", self.reply),
            Mode::JsPub | Mode::AmqpPub => ("--consume", self.consume),
            Mode::ObjPut => ("--consumers", self.consumers),
            _ => ("", 0),
        };
        let with = if others > 0 {
            format!(" {flag} {others}")
        } else {
            String::new()
        };
        Err(usage!(
            "--clients {}{with}: {} connections need about {need} file descriptors, but the limit (RLIMIT_NOFILE) is {hard}; use fewer clients, or raise the limit (`ulimit -n {need}` as root, LimitNOFILE= in a systemd unit)",
            self.main_clients(),
            self.connections()
        ))
    }

    /// A stream or bucket name the server would refuse only after the run started
    /// (exit 1 after a broker was started): letters, digits, '-' and '_', at most 255.
    fn check_name(flag: &str, name: &str) -> anyhow::Result<()> {
        let ok = !name.is_empty()
            && name.len() <= 255
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if ok {
            Ok(())
        } else {
            Err(usage!(
                "{flag} '{name}': a stream or bucket name is 1 to 255 letters, digits, '-' or '_' (no '.', '*', '>', '/' or spaces: the server refuses them), like DISKPULSE"
            ))
        }
    }

    /// --msgs, or unlimited with --duration, or nats bench's default of 100,000.
    pub fn total_ops(&self) -> Option<u64> {
        match (self.msgs, self.duration) {
            (Some(m), _) => Some(m),
            (None, Some(_)) => None,
            (None, None)
                if matches!(self.mode, Mode::Reply | Mode::JsConsume | Mode::AmqpConsume) =>
            {
                None
            }
            (None, None) if matches!(self.mode, Mode::ObjPut | Mode::ObjGet) => Some(self.objects),
            (None, None) => Some(100_000),
        }
    }

    /// Bytes per operation of the main role.
    pub(crate) fn op_size(&self) -> usize {
        match self.mode {
            Mode::ObjPut | Mode::ObjGet => self.object_size as usize,
            _ => self.size as usize,
        }
    }

    pub(crate) fn window_for(&self, role: Role) -> usize {
        self.window
            .unwrap_or(match role {
                Role::JsPub | Role::AmqpPub if !self.sync => DEFAULT_WINDOW,
                _ => 1,
            })
            .max(1)
            .min(if self.sync || self.atomic_batch.is_some() {
                1
            } else {
                usize::MAX
            })
    }
}
