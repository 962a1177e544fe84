//! An embedded RabbitMQ node (Debian's `rabbitmq-server`, 3.10 on Debian 12), run like the
//! embedded nats-server: a node of our own for as long as the [`RabbitNode`] value lives.
//!
//! What must stay true:
//!
//! - The node is ours alone: its own node name (`dp-<name>-<diskpulse pid>@localhost`, so
//!   a store directory used again starts a fresh node: its mnesia data is per node name),
//!   its own epmd on a
//!   private loopback port (`ERL_EPMD_PORT`, an `epmd -address 127.0.0.1 -port P` that we
//!   start and stop: a system epmd on 4369 is never used or touched), AMQP, distribution
//!   and Prometheus ports on `127.0.0.1` chosen free. `HOME` (the Erlang cookie) and the
//!   mnesia directory (queues, the quorum WAL, segment files) are in the store directory on
//!   the volume under test; the config, `enabled_plugins`, and the log (`RUN/rabbitmq.log`:
//!   the node logs to its console, stdout and stderr appended to that one file) are in the
//!   run directory. The system's `/etc/rabbitmq` files are not read
//!   (`RABBITMQ_CONF_ENV_FILE`, `RABBITMQ_CONFIG_FILE`, `RABBITMQ_ENABLED_PLUGINS_FILE`
//!   point into the run directory).
//! - `rabbitmq-server` is started with `RABBITMQ_ALLOW_INPUT=1`: the script then `exec`s
//!   the VM, so the pid we spawned *is* `beam.smp` (without it the script forks the VM
//!   into the background and a SIGKILL of the script orphans it). The VM's stdin is a pipe
//!   we hold: when diskpulse dies, however, the pipe closes and the VM halts
//!   ("Terminating erlang"); PR_SET_PDEATHSIG kills it too. epmd gets PR_SET_PDEATHSIG.
//! - Every exit path stops both: [`RabbitNode::stop`] (SIGTERM: the node stops cleanly,
//!   up to 30 s, then SIGKILL; then epmd), [`Drop`] (SIGKILL and reap). What a crash of
//!   diskpulse could still leave (a node name registered, a VM not yet gone) is found at
//!   the next start on the same store directory: `STORE/diskpulse-rabbitmq.pids` names
//!   the VM and epmd pids and the node; a process of one of those pids whose command line
//!   still names our node (or our epmd port) is killed before the new node starts
//!   (`broker_leftover_killed`). Nobody else's process is ever signalled.
//! - `start` returns once the log says the broker started ("Starting broker... completed")
//!   and the AMQP port accepts a connection, within [`READY_TIMEOUT`] (60 s: the node
//!   starts in ~5 s on an idle machine of ours, far slower under builds). A port taken
//!   between choosing and binding ("eaddrinuse") is retried on fresh ports.
//!
//! Events recorded (`name` is the node's short name): `broker_start` (`kind: "rabbitmq"`,
//! pid, version, ports), `broker_ready` (`ready_ms`), `broker_stop` (how, status),
//! `broker_leftover_killed`, `broker_port_clash`.

use std::fs::{self, File, OpenOptions};
use std::io::Read as _;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

use super::config::{free_ports, log_tail};
use super::process::{kill_and_reap, running, terminate, BrokerProcess, ChildGuard};
use crate::recording::EventLog;
use format::events::{self as ev, Body};

/// The `kind` of a RabbitMQ node's broker events (left out for nats-server).
const KIND: &str = "rabbitmq";

/// How long `start` waits for the node.
pub(crate) const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long `stop` waits after SIGTERM before SIGKILL (a clean stop flushes queues).
pub(crate) const STOP_TIMEOUT: Duration = Duration::from_secs(30);
/// How many times `start` tries fresh ports when a port was taken.
pub(crate) const START_ATTEMPTS: u32 = 5;
/// The start script of Debian's package (the one in /usr/sbin switches users first).
const DEFAULT_SERVER: &str = "/usr/lib/rabbitmq/bin/rabbitmq-server";
/// The pid file in the store directory that the next start reads (see the module doc).
const PIDS_FILE: &str = "diskpulse-rabbitmq.pids";

/// `STORE/diskpulse-rabbitmq.pids`, one line of JSON: the VM's and epmd's pids, the
/// node's name and epmd's port (what tells a pid still ours from a reused one). Written
/// by `write_pids` at each start, read by [`kill_leftovers`] and removed at the stop.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
#[serde(default)]
struct PidsFile {
    beam_pid: u32,
    epmd_pid: u32,
    epmd_port: u16,
    node: String,
}
/// What the node prints once it serves.
const READY_LINE: &str = "completed with";

/// What to start.
#[derive(Debug, Clone)]
pub struct RabbitOptions {
    /// `rabbitmq-server` (default [`DEFAULT_SERVER`], or `$DISKPULSE_RABBITMQ_SERVER`).
    pub binary: Option<PathBuf>,
    /// HOME and the mnesia directory go here (created if missing): the volume under test.
    pub store_dir: PathBuf,
    /// Receives `rabbitmq.conf`, `enabled_plugins` and `rabbitmq.log`.
    pub run_dir: PathBuf,
    /// Short name: the node is `dp-<name>-<pid>@localhost`.
    pub name: String,
    /// An `amqps://` listener beside the plain one ([`RabbitNode::amqps_url`]).
    pub tls: Option<RabbitTls>,
}

/// The node's TLS listener: PEM files (the key unencrypted).
#[derive(Debug, Clone)]
pub struct RabbitTls {
    /// The CA that signs the clients' certificates (and usually the node's).
    pub ca: PathBuf,
    /// The node's certificate (naming 127.0.0.1) and its key.
    pub cert: PathBuf,
    pub key: PathBuf,
    /// Refuse a client that presents no certificate signed by `ca`.
    pub require_client_cert: bool,
}

impl RabbitOptions {
    pub fn new(store_dir: PathBuf, run_dir: PathBuf) -> RabbitOptions {
        RabbitOptions {
            binary: None,
            store_dir,
            run_dir,
            name: "rabbit".into(),
            tls: None,
        }
    }
}

/// The `rabbitmq-server` script to run: `binary`, `$DISKPULSE_RABBITMQ_SERVER`, Debian's
/// path; an error that says how to install it.
pub fn find_rabbitmq_server(binary: Option<&Path>) -> anyhow::Result<PathBuf> {
    let p = binary.map(PathBuf::from).unwrap_or_else(|| {
        std::env::var_os("DISKPULSE_RABBITMQ_SERVER")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(DEFAULT_SERVER))
    });
    if p.is_file() {
        Ok(p)
    } else {
        bail!(
            "no rabbitmq-server at {}: install it (`apt-get install rabbitmq-server`, or run scripts/setup), or give --server amqp://HOST:PORT for a broker you started",
            p.display()
        )
    }
}

/// epmd of the Erlang installation beside the script, or on PATH.
fn find_epmd() -> anyhow::Result<PathBuf> {
    for p in ["/usr/lib/erlang/bin/epmd", "/usr/bin/epmd"] {
        if Path::new(p).is_file() {
            return Ok(PathBuf::from(p));
        }
    }
    if let Some(path) = std::env::var_os("PATH") {
        for d in std::env::split_paths(&path) {
            let p = d.join("epmd");
            if p.is_file() {
                return Ok(p);
            }
        }
    }
    bail!("no epmd found (it comes with erlang-base, a dependency of rabbitmq-server): install rabbitmq-server")
}

/// The version from the installation (`/usr/lib/rabbitmq/lib/rabbitmq_server-3.10.8`),
/// without starting anything; "unknown" if it cannot be told.
fn rabbitmq_version(binary: &Path) -> String {
    let lib = binary
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join("lib"))
        .unwrap_or_default();
    fs::read_dir(&lib)
        .ok()
        .and_then(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| {
                    e.file_name()
                        .to_str()
                        .and_then(|n| n.strip_prefix("rabbitmq_server-"))
                        .map(String::from)
                })
                .max()
        })
        .unwrap_or_else(|| "unknown".into())
}

#[derive(Debug, Clone, Copy, Default)]
struct Ports {
    amqp: u16,
    /// The TLS listener's (with [`RabbitOptions::tls`]).
    amqps: u16,
    dist: u16,
    epmd: u16,
    prometheus: u16,
}

/// A RabbitMQ node diskpulse runs. Stopped on [`RabbitNode::stop`] or drop.
pub struct RabbitNode {
    child: Option<Child>,
    /// The VM's stdin: closing it halts the VM (see the module doc).
    stdin: Option<ChildStdin>,
    epmd: Option<Child>,
    pid: u32,
    epmd_pid: u32,
    binary: PathBuf,
    epmd_binary: PathBuf,
    version: String,
    ports: Ports,
    opts: RabbitOptions,
    node: String,
    config_path: PathBuf,
    config_text: String,
    plugins_path: PathBuf,
    log_path: PathBuf,
    events: EventLog,
    ready_ms: f64,
    starts: u32,
}

impl RabbitNode {
    /// Starts epmd and the node; returns once the node serves AMQP (or fails within 60 s
    /// with the tail of its log).
    pub async fn start(opts: RabbitOptions, events: &EventLog) -> anyhow::Result<RabbitNode> {
        let binary = find_rabbitmq_server(opts.binary.as_deref())?;
        let epmd_binary = find_epmd()?;
        let version = rabbitmq_version(&binary);
        fs::create_dir_all(&opts.store_dir)
            .with_context(|| format!("cannot create store_dir {}", opts.store_dir.display()))?;
        fs::create_dir_all(&opts.run_dir)
            .with_context(|| format!("cannot create run directory {}", opts.run_dir.display()))?;
        let store_dir = fs::canonicalize(&opts.store_dir)?;
        let run_dir = fs::canonicalize(&opts.run_dir)?;
        // The pid makes the name ours alone among nodes of other diskpulse runs.
        let node = format!("dp-{}-{}@localhost", opts.name, std::process::id());
        kill_leftovers(&store_dir, events);
        let log_path = run_dir.join("rabbitmq.log");
        File::create(&log_path).with_context(|| format!("cannot create {}", log_path.display()))?;
        let mut n = RabbitNode {
            child: None,
            stdin: None,
            epmd: None,
            pid: 0,
            epmd_pid: 0,
            binary,
            epmd_binary,
            version,
            ports: Ports::default(),
            config_path: run_dir.join("rabbitmq.conf"),
            plugins_path: run_dir.join("enabled_plugins"),
            config_text: String::new(),
            log_path,
            opts: RabbitOptions {
                store_dir,
                run_dir,
                ..opts
            },
            node,
            events: events.clone(),
            ready_ms: 0.0,
            starts: 0,
        };
        n.run(true).await?;
        Ok(n)
    }

    fn configure(&mut self, p: Ports) -> anyhow::Result<()> {
        self.ports = p;
        self.config_text = format!(
            "# written by diskpulse: a node of its own on loopback ports\n\
             listeners.tcp.default = 127.0.0.1:{}\n\
             loopback_users.guest = true\n\
             log.console = true\n\
             log.console.level = info\n\
             log.file = false\n\
             prometheus.tcp.ip = 127.0.0.1\n\
             prometheus.tcp.port = {}\n",
            p.amqp, p.prometheus
        );
        if let Some(t) = &self.opts.tls {
            use std::fmt::Write;
            let _ = write!(
                self.config_text,
                "listeners.ssl.default = 127.0.0.1:{}\n\
                 ssl_options.cacertfile = {}\n\
                 ssl_options.certfile = {}\n\
                 ssl_options.keyfile = {}\n\
                 ssl_options.verify = verify_peer\n\
                 ssl_options.fail_if_no_peer_cert = {}\n",
                p.amqps,
                t.ca.display(),
                t.cert.display(),
                t.key.display(),
                t.require_client_cert
            );
        }
        fs::write(&self.config_path, &self.config_text)
            .with_context(|| format!("cannot write {}", self.config_path.display()))?;
        fs::write(&self.plugins_path, "[rabbitmq_prometheus].\n")
            .with_context(|| format!("cannot write {}", self.plugins_path.display()))
    }

    async fn run(&mut self, fresh_ports: bool) -> anyhow::Result<()> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            if fresh_ports || attempt > 1 {
                let p = free_ports(5)?;
                self.configure(Ports {
                    amqp: p[0],
                    dist: p[1],
                    epmd: p[2],
                    prometheus: p[3],
                    amqps: p[4],
                })?;
            }
            match self.try_start().await? {
                true => return Ok(()),
                false if attempt >= START_ATTEMPTS => bail!(
                    "rabbitmq node {} could not bind free loopback ports in {START_ATTEMPTS} attempts; log {}:\n{}",
                    self.node,
                    self.log_path.display(),
                    log_tail(&self.log_path, 20)
                ),
                false => self.events.event(Body::BrokerPortClash(ev::BrokerPortClash {
                    name: self.opts.name.clone(),
                    kind: Some(KIND.to_string()),
                    amqp_port: Some(self.ports.amqp),
                    attempt,
                    ..Default::default()
                })),
            }
        }
    }

    /// One start on the configured ports: Ok(false) on a port clash (both processes gone).
    #[allow(
        clippy::too_many_lines,
        reason = "one start of epmd and the Erlang VM in order, each step next to what it kills on a failure"
    )]
    async fn try_start(&mut self) -> anyhow::Result<bool> {
        let log = OpenOptions::new()
            .append(true)
            .create(true)
            .open(&self.log_path)
            .with_context(|| format!("cannot open {}", self.log_path.display()))?;
        let log_start = log.metadata().map(|m| m.len()).unwrap_or(0);
        let spawned_at = Instant::now();
        // Our own epmd, on loopback and a private port, in the foreground (no -daemon):
        // a child we stop.
        let mut cmd = Command::new(&self.epmd_binary);
        crate::lab::os::die_with_parent(&mut cmd);
        let epmd = cmd
            .args(["-address", "127.0.0.1", "-port"])
            .arg(self.ports.epmd.to_string())
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log.try_clone()?)
            .process_group(0)
            .spawn()
            .with_context(|| format!("cannot start {}", self.epmd_binary.display()))?;
        self.epmd_pid = epmd.id();
        let mut epmd = ChildGuard(Some(epmd));
        let store = &self.opts.store_dir;
        let run = &self.opts.run_dir;
        let mut cmd = Command::new(&self.binary);
        crate::lab::os::die_with_parent(&mut cmd);
        cmd.env("HOME", store)
            .env("ERL_EPMD_PORT", self.ports.epmd.to_string())
            .env("ERL_EPMD_ADDRESS", "127.0.0.1")
            .env("RABBITMQ_ALLOW_INPUT", "1")
            .env("RABBITMQ_NODENAME", &self.node)
            .env("RABBITMQ_NODE_IP_ADDRESS", "127.0.0.1")
            .env("RABBITMQ_DIST_PORT", self.ports.dist.to_string())
            .env("RABBITMQ_MNESIA_BASE", store.join("mnesia"))
            .env("RABBITMQ_LOG_BASE", run.join("rabbitmq-logs"))
            .env("RABBITMQ_CONF_ENV_FILE", run.join("rabbitmq-env.conf"))
            .env("RABBITMQ_CONFIG_FILE", run.join("rabbitmq"))
            .env("RABBITMQ_ADVANCED_CONFIG_FILE", run.join("advanced.config"))
            .env("RABBITMQ_ENABLED_PLUGINS_FILE", &self.plugins_path)
            .env_remove("NOTIFY_SOCKET")
            .stdin(Stdio::piped())
            .stdout(log.try_clone()?)
            .stderr(log)
            // Own process group: a terminal's Ctrl-C must not reach the node before we
            // stop it cleanly.
            .process_group(0);
        let mut child = cmd
            .spawn()
            .with_context(|| format!("cannot start {}", self.binary.display()))?;
        self.pid = child.id();
        self.stdin = child.stdin.take();
        let mut guard = ChildGuard(Some(child));
        self.write_pids();
        self.events.event(Body::BrokerStart(ev::BrokerStart {
            name: self.opts.name.clone(),
            kind: Some(KIND.to_string()),
            node: Some(self.node.clone()),
            pid: self.pid,
            epmd_pid: Some(self.epmd_pid),
            version: self.version.clone(),
            binary: self.binary.display().to_string(),
            amqp_port: Some(self.ports.amqp),
            dist_port: Some(self.ports.dist),
            epmd_port: Some(self.ports.epmd),
            prometheus_port: Some(self.ports.prometheus),
            start: self.starts + 1,
            ..Default::default()
        }));
        let deadline = spawned_at + READY_TIMEOUT;
        loop {
            let this_run = || {
                let mut buf = Vec::new();
                if let Ok(mut f) = File::open(&self.log_path) {
                    let _ = f.read_to_end(&mut buf);
                }
                String::from_utf8_lossy(&buf[(log_start as usize).min(buf.len())..]).to_string()
            };
            let c = guard.0.as_mut().expect("held until adopted");
            if let Some(status) = c.try_wait()? {
                let text = this_run();
                guard.0 = None;
                drop(epmd);
                if text.contains("eaddrinuse") {
                    return Ok(false);
                }
                self.stdin = None;
                self.events.event(Body::BrokerStop(ev::BrokerStop {
                    name: self.opts.name.clone(),
                    kind: Some(KIND.to_string()),
                    pid: self.pid,
                    how: "exited_early".to_string(),
                    status: Some(Some(status.to_string())),
                    stop_ms: None,
                }));
                bail!(
                    "rabbitmq node {} exited during start ({status}); config {}, log {}:\n{}",
                    self.node,
                    self.config_path.display(),
                    self.log_path.display(),
                    log_tail(&self.log_path, 20)
                );
            }
            if let Some(status) = epmd.0.as_mut().and_then(|e| e.try_wait().ok().flatten()) {
                if this_run().contains("address already in use") {
                    return Ok(false);
                }
                bail!(
                    "epmd on port {} exited during start ({status}); log {}:\n{}",
                    self.ports.epmd,
                    self.log_path.display(),
                    log_tail(&self.log_path, 20)
                );
            }
            if this_run().contains(READY_LINE)
                && tokio::net::TcpStream::connect(("127.0.0.1", self.ports.amqp))
                    .await
                    .is_ok()
            {
                self.ready_ms = spawned_at.elapsed().as_secs_f64() * 1e3;
                self.child = guard.0.take();
                self.epmd = epmd.0.take();
                self.starts += 1;
                self.events.event(Body::BrokerReady(ev::BrokerReady {
                    name: self.opts.name.clone(),
                    kind: Some(KIND.to_string()),
                    pid: self.pid,
                    ready_ms: self.ready_ms,
                }));
                return Ok(true);
            }
            if Instant::now() >= deadline {
                self.stdin = None;
                drop(guard);
                drop(epmd);
                self.events.event(Body::BrokerStop(ev::BrokerStop {
                    name: self.opts.name.clone(),
                    kind: Some(KIND.to_string()),
                    pid: self.pid,
                    how: "start_timeout".to_string(),
                    status: None,
                    stop_ms: None,
                }));
                bail!(
                    "rabbitmq node {} (pid {}) did not start serving AMQP on 127.0.0.1:{} within {} s; log {}:\n{}",
                    self.node,
                    self.pid,
                    self.ports.amqp,
                    READY_TIMEOUT.as_secs(),
                    self.log_path.display(),
                    log_tail(&self.log_path, 20)
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// `STORE/diskpulse-rabbitmq.pids`: what the next start kills if a crash left it.
    fn write_pids(&self) {
        let v = PidsFile {
            node: self.node.clone(),
            beam_pid: self.pid,
            epmd_pid: self.epmd_pid,
            epmd_port: self.ports.epmd,
        };
        if let Ok(text) = serde_json::to_string(&v) {
            let _ = fs::write(self.opts.store_dir.join(PIDS_FILE), text);
        }
    }

    /// `amqp://127.0.0.1:PORT` (the guest user, allowed on loopback).
    pub fn amqp_url(&self) -> String {
        format!("amqp://127.0.0.1:{}/%2f", self.ports.amqp)
    }

    /// `amqps://127.0.0.1:PORT` with [`RabbitOptions::tls`] (the guest user, on loopback).
    pub fn amqps_url(&self) -> Option<String> {
        self.opts
            .tls
            .as_ref()
            .map(|_| format!("amqps://127.0.0.1:{}/%2f", self.ports.amqps))
    }

    /// `http://127.0.0.1:PORT/metrics`: the rabbitmq_prometheus endpoint.
    pub fn metrics_url(&self) -> String {
        format!("http://127.0.0.1:{}/metrics", self.ports.prometheus)
    }

    /// `dp-<name>-<pid>@localhost`.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// Our epmd's pid.
    pub fn epmd_pid(&self) -> u32 {
        self.epmd_pid
    }

    fn stop_epmd(&mut self) {
        if let Some(mut e) = self.epmd.take() {
            kill_and_reap(&mut e);
        }
        let _ = fs::remove_file(self.opts.store_dir.join(PIDS_FILE));
    }

    fn stopped(&self, how: &str, status: Option<ExitStatus>, t0: Instant) {
        self.events.event(Body::BrokerStop(ev::BrokerStop {
            name: self.opts.name.clone(),
            kind: Some(KIND.to_string()),
            pid: self.pid,
            how: how.to_string(),
            status: Some(status.map(|s| s.to_string())),
            stop_ms: Some(t0.elapsed().as_secs_f64() * 1e3),
        }));
    }
}

impl BrokerProcess for RabbitNode {
    type Meta = format::meta::RabbitNodeMeta;

    /// The node's short name (what events call it).
    fn name(&self) -> &str {
        &self.opts.name
    }

    /// The VM's pid (`beam.smp`).
    fn pid(&self) -> u32 {
        self.pid
    }

    fn version(&self) -> &str {
        &self.version
    }

    fn log_path(&self) -> &Path {
        &self.log_path
    }

    fn store_dir(&self) -> &Path {
        &self.opts.store_dir
    }

    /// Whether the VM still runs (reaps it if it has exited).
    fn is_running(&mut self) -> bool {
        running(&mut self.child)
    }

    /// What `meta.json` records about this node.
    fn meta(&self) -> format::meta::RabbitNodeMeta {
        format::meta::RabbitNodeMeta {
            kind: "rabbitmq".into(),
            name: self.opts.name.clone(),
            node: self.node.clone(),
            binary: self.binary.display().to_string(),
            version: self.version.clone(),
            pid: self.pid,
            epmd_pid: self.epmd_pid,
            amqp_port: self.ports.amqp,
            dist_port: self.ports.dist,
            epmd_port: self.ports.epmd,
            prometheus_port: self.ports.prometheus,
            client_url: self.amqp_url(),
            metrics_url: self.metrics_url(),
            store_dir: self.opts.store_dir.display().to_string(),
            config_path: self.config_path.display().to_string(),
            config: self.config_text.clone(),
            log_path: self.log_path.display().to_string(),
            ready_ms: self.ready_ms,
            starts: self.starts,
        }
    }

    /// SIGTERM (the node stops cleanly), up to 30 s, then SIGKILL; then epmd. Idempotent.
    async fn stop(&mut self) -> anyhow::Result<()> {
        if let Some(mut child) = self.child.take() {
            let t0 = Instant::now();
            let poll = Duration::from_millis(20);
            let (how, status) = terminate(&mut child, self.pid, STOP_TIMEOUT, poll).await?;
            self.stopped(how, status, t0);
        }
        self.stdin = None;
        self.stop_epmd();
        Ok(())
    }

    /// SIGKILL at once (what a crash leaves); the data stays for `start_again`.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let t0 = Instant::now();
            let s = kill_and_reap(&mut child);
            self.stopped("sigkill", s, t0);
        }
        self.stdin = None;
        self.stop_epmd();
    }

    /// Starts a stopped node again with its data (fresh ports only if one was taken).
    async fn start_again(&mut self) -> anyhow::Result<()> {
        if self.is_running() {
            bail!(
                "rabbitmq node {} (pid {}) is running; stop it first",
                self.node,
                self.pid
            );
        }
        self.stop().await?;
        self.run(false).await
    }
}

impl Drop for RabbitNode {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let t0 = Instant::now();
            let s = kill_and_reap(&mut child);
            self.stopped("sigkill_on_drop", s, t0);
        }
        self.stdin = None;
        self.stop_epmd();
    }
}

/// The NUL-separated command line of `pid`, as one string with spaces.
fn cmdline(pid: u32) -> Option<String> {
    let raw = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(String::from_utf8_lossy(&raw).replace('\0', " "))
}

/// Whether process `pid` is the one a pid file named: its command line still names our
/// node (the VM) or our epmd port (epmd). A reused pid belongs to someone else.
fn still_ours(pid: u32, marker: &str) -> bool {
    pid > 1 && cmdline(pid).is_some_and(|c| c.contains(marker))
}

/// Kills what a crashed run left on this store directory (see the module doc).
fn kill_leftovers(store_dir: &Path, events: &EventLog) {
    let path = store_dir.join(PIDS_FILE);
    let Ok(text) = fs::read_to_string(&path) else {
        return;
    };
    // A file that does not parse names no node: nothing is killed.
    let v: PidsFile = serde_json::from_str(&text).unwrap_or_default();
    let node = v.node;
    let epmd_port = v.epmd_port;
    let candidates = [
        (v.beam_pid, format!(" {node} ")),
        (v.epmd_pid, format!("-port {epmd_port} ")),
    ];
    for (pid, marker) in candidates {
        if node.is_empty() || !still_ours(pid, &marker) {
            continue;
        }
        // SAFETY: kill(2); the pid's command line names our node or epmd port.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        let t0 = Instant::now();
        while still_ours(pid, &marker) && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        events.event(Body::BrokerLeftoverKilled(ev::BrokerLeftoverKilled {
            kind: KIND.to_string(),
            pid,
            node: node.to_string(),
        }));
    }
    let _ = fs::remove_file(&path);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pid_whose_command_line_does_not_name_our_node_is_not_ours() {
        let me = std::process::id();
        assert!(!still_ours(me, "dp-nobody@localhost"));
        assert!(!still_ours(1, "init"));
        assert!(!still_ours(0, ""));
    }

    #[test]
    fn a_missing_server_says_how_to_install_it() {
        let e = find_rabbitmq_server(Some(Path::new("/nonexistent/rabbitmq-server")))
            .unwrap_err()
            .to_string();
        assert!(e.contains("apt-get install rabbitmq-server"), "{e}");
        assert!(e.contains("--server amqp://"), "{e}");
    }
}
