//! Embedded nats-server processes.
//!
//! [`Broker::start`] runs one `nats-server` with JetStream on loopback ports of its own,
//! for as long as the [`Broker`] value lives; [`Cluster::start`] runs 1, 3 or 5 of them
//! joined by a `cluster {}` block (see `cluster.rs`). What must stay true:
//!
//! - A server is started from an argument vector (`nats-server -c RUN/nats-server.conf`),
//!   never through a shell, and listens on `127.0.0.1` only (client, monitoring and
//!   cluster ports).
//! - Its stdout and stderr both go to `RUN/nats-server.log` (one file opened in append
//!   mode, shared by both streams), so the log is complete, including Go panics and
//!   anything printed before the server's logger is set up. A restarted server
//!   ([`Broker::start_again`]) appends to the same log.
//! - It runs in its own process group, so a Ctrl-C in the terminal reaches diskpulse
//!   only; diskpulse then stops the server cleanly ([`Broker::stop`]: SIGTERM, up to
//!   10 s, then SIGKILL). Every exit path stops it: [`Drop`] kills and reaps a server
//!   that is still running. A `kill -9` of diskpulse kills it too (PR_SET_PDEATHSIG,
//!   [`crate::lab::os::die_with_parent`]): it is spawned from the runtime's own threads,
//!   which live as long as the session.
//! - `start` returns only once JetStream answers an account-info request on the client
//!   port, from the server we started (its `server_name` is checked), within 30 s.
//!
//! Ports are found by binding `127.0.0.1:0` and dropping the socket; another process may
//! take the port in between, so a start whose log says "address already in use" is
//! retried on fresh ports (up to [`START_ATTEMPTS`] times). A restart tries the server's
//! previous ports first, so its URLs stay valid.
//!
//! Events recorded (each with the server's `name`): `broker_start` (pid, version, ports),
//! `broker_ready` (`ready_ms`: milliseconds from spawn to JetStream answering),
//! `broker_stop` (how and exit status), `broker_port_clash`. Times are on the run clock
//! of the [`EventLog`].

mod cluster;
mod config;
mod http;
mod load_flags;
pub mod monitor;
pub use load_flags::check_load_flags;
mod process;
pub mod rabbit_metrics;
pub mod rabbitmq;
pub(crate) mod store_usage;

pub use cluster::{Cluster, ClusterOptions, OnNodeStart};
use config::{config_text, free_ports, ClusterConf};
pub use config::{find_nats_server, SyncMode};
pub(crate) use config::{log_tail, nats_server_version};
pub use monitor::start_monitor;
pub(crate) use monitor::start_monitor_to;
pub use process::BrokerProcess;
use process::{kill_and_reap, running, terminate, ChildGuard};
pub use rabbitmq::{RabbitNode, RabbitOptions, RabbitTls};

use std::fs::{self, File, OpenOptions};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

use crate::recording::EventLog;
use format::events::{self as ev, Body};

/// How long `start` waits for JetStream to answer.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long `stop` waits after SIGTERM before SIGKILL.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// How many times `start` tries fresh ports when a port was taken.
const START_ATTEMPTS: u32 = 5;

/// What to start.
#[derive(Debug, Clone)]
pub struct BrokerOptions {
    /// `--nats-server PATH`; `None` searches `PATH`.
    pub binary: Option<PathBuf>,
    /// JetStream `store_dir` (created if missing).
    pub store_dir: PathBuf,
    pub sync: SyncMode,
    /// Receives `nats-server.conf` and `nats-server.log` (created if missing).
    pub run_dir: PathBuf,
    /// `server_name`, e.g. `n1`.
    pub name: String,
}

/// A nats-server process diskpulse runs: alone ([`Broker::start`]) or as a node of a
/// [`Cluster`]. Stopped on [`Broker::stop`] or drop; [`Broker::start_again`] restarts
/// it with its data and (if still free) its ports.
pub struct Broker {
    child: Option<Child>,
    /// The pid of the running (or last) process; 0 before the first start.
    pid: u32,
    binary: PathBuf,
    exe: Option<PathBuf>,
    version: String,
    client_port: u16,
    monitor_port: u16,
    cluster: Option<ClusterConf>,
    opts: BrokerOptions,
    config_path: PathBuf,
    config_text: String,
    log_path: PathBuf,
    events: EventLog,
    ready_timeout: Duration,
    ready_ms: f64,
    attempts: u32,
    /// How many times a process was started and became ready.
    starts: u32,
}

/// A server process spawned but not yet handed to its [`Broker`]; dropping it kills and
/// reaps the process.
struct Starting {
    guard: ChildGuard,
    pid: u32,
    /// Where this process's part of the (appended) log begins.
    log_start: u64,
    spawned_at: Instant,
}

/// What a look at a starting server found.
enum Check {
    /// JetStream answered, this many ms after spawn.
    Ready(f64),
    /// Not yet; why (the last readiness error).
    NotYet(String),
    /// It exited because a port was taken: try fresh ports.
    PortClash,
}

impl Broker {
    /// Starts nats-server and returns once JetStream answers (or fails within 30 s with
    /// the tail of the server log).
    pub async fn start(opts: BrokerOptions, events: &EventLog) -> anyhow::Result<Broker> {
        let binary = find_nats_server(opts.binary.as_deref())?;
        let version = nats_server_version(&binary)?;
        let mut b = Broker::prepare(opts, binary, version, "nats-server", events)?;
        b.run(true).await?;
        Ok(b)
    }

    /// A server that is configured but not started: directories created (paths made
    /// absolute, so the config and the server's own log name them unambiguously), the
    /// log `RUN/<stem>.log` truncated. `start`/`run` pick ports and write the config.
    fn prepare(
        opts: BrokerOptions,
        binary: PathBuf,
        version: String,
        stem: &str,
        events: &EventLog,
    ) -> anyhow::Result<Broker> {
        fs::create_dir_all(&opts.store_dir)
            .with_context(|| format!("cannot create store_dir {}", opts.store_dir.display()))?;
        fs::create_dir_all(&opts.run_dir)
            .with_context(|| format!("cannot create run directory {}", opts.run_dir.display()))?;
        let store_dir = fs::canonicalize(&opts.store_dir)?;
        let run_dir = fs::canonicalize(&opts.run_dir)?;
        let config_path = run_dir.join(format!("{stem}.conf"));
        let log_path = run_dir.join(format!("{stem}.log"));
        File::create(&log_path).with_context(|| format!("cannot create {}", log_path.display()))?;
        Ok(Broker {
            child: None,
            pid: 0,
            binary,
            exe: None,
            version,
            client_port: 0,
            monitor_port: 0,
            cluster: None,
            opts: BrokerOptions {
                store_dir,
                run_dir,
                ..opts
            },
            config_path,
            config_text: String::new(),
            log_path,
            events: events.clone(),
            ready_timeout: READY_TIMEOUT,
            ready_ms: 0.0,
            attempts: 0,
            starts: 0,
        })
    }

    /// Sets the ports (and cluster block) and writes the config file.
    fn configure(
        &mut self,
        client_port: u16,
        monitor_port: u16,
        cluster: Option<ClusterConf>,
    ) -> anyhow::Result<()> {
        self.client_port = client_port;
        self.monitor_port = monitor_port;
        self.cluster = cluster;
        self.config_text = config_text(
            &self.opts,
            &self.opts.store_dir,
            client_port,
            monitor_port,
            self.cluster.as_ref(),
        );
        fs::write(&self.config_path, &self.config_text)
            .with_context(|| format!("cannot write {}", self.config_path.display()))
    }

    /// Fresh client, monitoring (and, for a cluster node, route) ports; a cluster node's
    /// own entry in its route list follows its new route port.
    fn configure_fresh_ports(&mut self) -> anyhow::Result<()> {
        let p = free_ports(3)?;
        let cluster = self.cluster.clone().map(|mut c| {
            for r in c.routes.iter_mut().filter(|r| **r == c.port) {
                *r = p[2];
            }
            c.port = p[2];
            c
        });
        self.configure(p[0], p[1], cluster)
    }

    /// Starts the configured server and waits until JetStream answers. With
    /// `fresh_ports` the first attempt already uses fresh ports; otherwise it tries the
    /// configured ones first (a restart). A port clash is retried on fresh ports.
    async fn run(&mut self, fresh_ports: bool) -> anyhow::Result<()> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            if fresh_ports || attempt > 1 {
                self.configure_fresh_ports()?;
            }
            let mut s = self.spawn()?;
            let deadline = s.spawned_at + self.ready_timeout;
            loop {
                match self.check(&mut s).await? {
                    Check::Ready(ms) => {
                        self.adopt(s, ms, attempt);
                        return Ok(());
                    }
                    Check::PortClash => break,
                    Check::NotYet(why) => {
                        if Instant::now() >= deadline {
                            self.abandon(s, "start_timeout");
                            bail!(
                                "nats-server {} (pid {}) did not answer JetStream requests at {} within {} s ({why}); log {}:\n{}",
                                self.opts.name,
                                self.pid,
                                self.client_url(),
                                self.ready_timeout.as_secs(),
                                self.log_path.display(),
                                log_tail(&self.log_path, 20)
                            );
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            self.port_clash(attempt)?;
        }
    }

    /// Records a port clash; an error once [`START_ATTEMPTS`] were used up.
    fn port_clash(&self, attempt: u32) -> anyhow::Result<()> {
        if attempt >= START_ATTEMPTS {
            bail!(
                "nats-server {} could not bind free loopback ports in {START_ATTEMPTS} attempts; log {}:\n{}",
                self.opts.name,
                self.log_path.display(),
                log_tail(&self.log_path, 20)
            );
        }
        self.events
            .event(Body::BrokerPortClash(ev::BrokerPortClash {
                name: self.opts.name.clone(),
                client_port: Some(self.client_port),
                monitor_port: Some(self.monitor_port),
                cluster_port: Some(self.cluster.as_ref().map(|c| c.port)),
                attempt,
                ..Default::default()
            }));
        Ok(())
    }

    /// Spawns the server with its config; records `broker_start`.
    fn spawn(&mut self) -> anyhow::Result<Starting> {
        let log = OpenOptions::new()
            .append(true)
            .create(true)
            .open(&self.log_path)
            .with_context(|| format!("cannot open {}", self.log_path.display()))?;
        let log_start = log.metadata().map(|m| m.len()).unwrap_or(0);
        let log_err = log.try_clone()?;
        let spawned_at = Instant::now();
        let mut cmd = Command::new(&self.binary);
        crate::lab::os::die_with_parent(&mut cmd);
        let child = cmd
            .arg("-c")
            .arg(&self.config_path)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            // Own process group: a terminal's Ctrl-C (SIGINT to the foreground group)
            // must not reach the server before we stop it cleanly.
            .process_group(0)
            .spawn()
            .with_context(|| format!("cannot start {}", self.binary.display()))?;
        let pid = child.id();
        self.pid = pid;
        self.events.event(Body::BrokerStart(ev::BrokerStart {
            name: self.opts.name.clone(),
            pid,
            version: self.version.clone(),
            binary: self.binary.display().to_string(),
            client_port: Some(self.client_port),
            monitor_port: Some(self.monitor_port),
            cluster_port: Some(self.cluster.as_ref().map(|c| c.port)),
            start: self.starts + 1,
            ..Default::default()
        }));
        Ok(Starting {
            guard: ChildGuard(Some(child)),
            pid,
            log_start,
            spawned_at,
        })
    }

    /// One look at a starting server: exited (port clash, or an error with the log
    /// tail), JetStream answering (records `broker_ready`), or not yet.
    async fn check(&self, s: &mut Starting) -> anyhow::Result<Check> {
        let child = s.guard.0.as_mut().expect("held until adopted");
        if let Some(status) = child.try_wait()? {
            let text = fs::read(&self.log_path).unwrap_or_default();
            let this_run = String::from_utf8_lossy(&text[(s.log_start as usize).min(text.len())..])
                .to_string();
            if this_run.contains("address already in use") {
                return Ok(Check::PortClash);
            }
            self.events.event(Body::BrokerStop(ev::BrokerStop {
                name: self.opts.name.clone(),
                pid: s.pid,
                how: "exited_early".to_string(),
                status: Some(Some(status.to_string())),
                ..Default::default()
            }));
            bail!(
                "nats-server {} exited during start ({status}); config {}, log {}:\n{}",
                self.opts.name,
                self.config_path.display(),
                self.log_path.display(),
                log_tail(&self.log_path, 20)
            );
        }
        if self.cluster.is_some() {
            // A cluster node's JetStream answers only once the meta group has a leader;
            // until then a JetStream request waits out its whole timeout. The monitoring
            // port says at once whether there is a leader.
            let jsz = http::get_doc::<format::monitor::Jsz>(
                &self.monitor_url(),
                "/jsz",
                Duration::from_secs(1),
            )
            .await;
            match jsz {
                Ok(v) if v.meta_leader().is_some() => {}
                Ok(_) => return Ok(Check::NotYet("no JetStream meta leader yet".into())),
                Err(e) => return Ok(Check::NotYet(format!("{e:#}"))),
            }
        }
        match jetstream_answers(&self.client_url(), &self.opts.name).await {
            Ok(()) => {
                let ready_ms = s.spawned_at.elapsed().as_secs_f64() * 1e3;
                self.events.event(Body::BrokerReady(ev::BrokerReady {
                    name: self.opts.name.clone(),
                    pid: s.pid,
                    ready_ms,
                    kind: None,
                }));
                Ok(Check::Ready(ready_ms))
            }
            Err(e) => Ok(Check::NotYet(format!("{e:#}"))),
        }
    }

    /// Takes a ready process over.
    fn adopt(&mut self, mut s: Starting, ready_ms: f64, attempts: u32) {
        let child = s.guard.0.take().expect("held until adopted");
        self.exe = fs::read_link(format!("/proc/{}/exe", child.id())).ok();
        self.child = Some(child);
        self.ready_ms = ready_ms;
        self.attempts = attempts;
        self.starts += 1;
    }

    /// Kills a process that did not become ready; records `broker_stop` with `how`.
    fn abandon(&self, mut s: Starting, how: &str) {
        let status = s.guard.0.as_mut().and_then(kill_and_reap);
        s.guard.0 = None;
        self.events.event(Body::BrokerStop(ev::BrokerStop {
            name: self.opts.name.clone(),
            pid: s.pid,
            how: how.to_string(),
            status: Some(status.map(|s| s.to_string())),
            ..Default::default()
        }));
    }

    /// `nats://127.0.0.1:PORT`.
    pub fn client_url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.client_port)
    }

    /// `http://127.0.0.1:PORT` (`/varz`, `/jsz`, `/healthz`).
    pub fn monitor_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.monitor_port)
    }

    /// The route port of a cluster node (`None` for a server alone).
    pub fn cluster_port(&self) -> Option<u16> {
        self.cluster.as_ref().map(|c| c.port)
    }

    /// `RUN/nats-server.conf` (`RUN/nats-server-n2.conf` for a cluster node).
    pub fn config_path(&self) -> &Path {
        &self.config_path
    }

    fn stopped(&self, how: &str, status: Option<ExitStatus>, t0: Instant) {
        self.events.event(Body::BrokerStop(ev::BrokerStop {
            name: self.opts.name.clone(),
            kind: None,
            pid: self.pid,
            how: how.to_string(),
            status: Some(status.map(|s| s.to_string())),
            stop_ms: Some(t0.elapsed().as_secs_f64() * 1e3),
        }));
    }
}

impl BrokerProcess for Broker {
    type Meta = format::meta::ServerMeta;

    /// `server_name`, e.g. `n1`.
    fn name(&self) -> &str {
        &self.opts.name
    }

    /// The pid of the running process (of the last one after `stop`).
    fn pid(&self) -> u32 {
        self.pid
    }

    /// The server version, e.g. `2.15.1`.
    fn version(&self) -> &str {
        &self.version
    }

    /// `RUN/nats-server.log` (`RUN/nats-server-n2.log` for a cluster node).
    fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// The JetStream store directory (absolute).
    fn store_dir(&self) -> &Path {
        &self.opts.store_dir
    }

    /// Whether the process is still running (reaps it if it has exited).
    fn is_running(&mut self) -> bool {
        running(&mut self.child)
    }

    /// What `meta.json` records about this server.
    fn meta(&self) -> format::meta::ServerMeta {
        format::meta::ServerMeta {
            name: self.opts.name.clone(),
            binary: self.binary.display().to_string(),
            // The file actually running (a PATH entry may be a wrapper such as a pyenv shim).
            exe: self.exe.as_ref().map(|p| p.display().to_string()),
            version: self.version.clone(),
            pid: self.pid,
            client_port: self.client_port,
            monitor_port: self.monitor_port,
            cluster_port: self.cluster_port(),
            cluster_name: self.cluster.as_ref().map(|c| c.name.clone()),
            client_url: self.client_url(),
            monitor_url: self.monitor_url(),
            store_dir: self.opts.store_dir.display().to_string(),
            sync: self.opts.sync.to_string(),
            config_path: self.config_path.display().to_string(),
            config: self.config_text.clone(),
            log_path: self.log_path.display().to_string(),
            ready_ms: self.ready_ms,
            start_attempts: self.attempts,
            starts: self.starts,
        }
    }

    /// SIGTERM, wait up to 10 s, then SIGKILL. Idempotent.
    async fn stop(&mut self) -> anyhow::Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        let t0 = Instant::now();
        let poll = Duration::from_millis(10);
        let (how, status) = terminate(&mut child, self.pid, STOP_TIMEOUT, poll).await?;
        self.stopped(how, status, t0);
        Ok(())
    }

    /// SIGKILL at once, no clean shutdown (what a crash leaves on the store); the data
    /// stays for [`Broker::start_again`]. Records `broker_stop` with `how: "sigkill"`.
    /// Idempotent.
    fn kill(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let t0 = Instant::now();
        let status = kill_and_reap(&mut child);
        self.stopped("sigkill", status, t0);
    }

    /// Starts a stopped server again with its config, data and ports (fresh ports only
    /// if one was taken meanwhile: then its URLs change) and waits until JetStream
    /// answers. An error if it is running.
    async fn start_again(&mut self) -> anyhow::Result<()> {
        if self.is_running() {
            bail!(
                "nats-server {} (pid {}) is running; stop it first",
                self.opts.name,
                self.pid
            );
        }
        if let Some(mut c) = self.child.take() {
            // It exited on its own since we last looked: reap it and say so.
            let status = c.wait().ok();
            self.stopped("exited", status, Instant::now());
        }
        self.run(false).await
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let t0 = Instant::now();
            let status = kill_and_reap(&mut child);
            self.stopped("sigkill_on_drop", status, t0);
        }
    }
}

/// Connects to `url` and asks JetStream for account info; checks that the server that
/// answered is the one named `name` (not some other process that took the port).
async fn jetstream_answers(url: &str, name: &str) -> anyhow::Result<()> {
    let client = async_nats::ConnectOptions::new()
        .name("diskpulse-readiness")
        .connection_timeout(Duration::from_secs(1))
        .max_reconnects(Some(0))
        .connect(url)
        .await?;
    let info = client.server_info();
    if info.server_name != name {
        bail!(
            "the server at {url} is '{}', not '{name}'",
            info.server_name
        );
    }
    let js = async_nats::jetstream::ContextBuilder::new()
        .timeout(Duration::from_secs(2))
        .build(client);
    js.query_account().await?;
    Ok(())
}
