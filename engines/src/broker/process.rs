//! What the broker processes diskpulse runs have in common, nats-server ([`super::Broker`])
//! and RabbitMQ ([`super::RabbitNode`]): one trait, [`BrokerProcess`], for what callers
//! ask of either (its store directory, whether it runs, its `meta.json` entry, stop,
//! kill, start again), and the process mechanics both use to stop a child.
//!
//! What must stay true: a stop is SIGTERM, then waiting (looking every `poll`) up to the
//! broker's own stop timeout, then SIGKILL; a child is always reaped; a child held by a
//! [`ChildGuard`] is killed and reaped when the guard drops.

use std::future::Future;
use std::path::Path;
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

/// A broker process diskpulse started (a nats-server node, a RabbitMQ node).
pub trait BrokerProcess {
    /// The short name events call it by (`n1`, or the RabbitMQ node's short name).
    fn name(&self) -> &str;
    /// The pid of the running process (of the last one after a stop).
    fn pid(&self) -> u32;
    /// The server's version, e.g. `2.15.1`.
    fn version(&self) -> &str;
    /// The log its stdout and stderr are appended to.
    fn log_path(&self) -> &Path;
    /// Where it keeps its data (absolute).
    fn store_dir(&self) -> &Path;
    /// Whether the process is still running (reaps it if it has exited).
    fn is_running(&mut self) -> bool;
    /// What `meta.json` records about one process of this kind.
    type Meta: serde::Serialize;
    /// What `meta.json` records about it.
    fn meta(&self) -> Self::Meta;
    /// SIGTERM, up to its stop timeout, then SIGKILL; records `broker_stop`. Idempotent.
    fn stop(&mut self) -> impl Future<Output = anyhow::Result<()>> + Send;
    /// SIGKILL at once (what a crash leaves); the data stays for
    /// [`BrokerProcess::start_again`]. Records `broker_stop` with `how: "sigkill"`.
    /// Idempotent.
    fn kill(&mut self);
    /// Starts a stopped process again with its data; an error if it runs.
    fn start_again(&mut self) -> impl Future<Output = anyhow::Result<()>> + Send;
}

/// Whether `child` is still running (reaps it if it has exited).
pub(super) fn running(child: &mut Option<Child>) -> bool {
    match child.as_mut() {
        Some(c) => matches!(c.try_wait(), Ok(None)),
        None => false,
    }
}

/// Stops `child` (pid `pid`): SIGTERM, then a look every `poll` until `timeout`, then
/// SIGKILL. Returns how it ended (`already_exited`, `sigterm`, `sigkill_after_timeout`,
/// the `how` of `broker_stop`) and its exit status.
pub(super) async fn terminate(
    child: &mut Child,
    pid: u32,
    timeout: Duration,
    poll: Duration,
) -> std::io::Result<(&'static str, Option<ExitStatus>)> {
    if let Some(status) = child.try_wait()? {
        return Ok(("already_exited", Some(status)));
    }
    // SAFETY: kill(2) with a pid we spawned and have not reaped yet, so it cannot have
    // been reused.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(("sigterm", Some(status)));
        }
        if Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(poll).await;
    }
    Ok(("sigkill_after_timeout", kill_and_reap(child)))
}

/// Kills and reaps a child on drop unless it was taken out.
pub(super) struct ChildGuard(pub(super) Option<Child>);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            kill_and_reap(c);
        }
    }
}

/// SIGKILL (if still running) and wait; returns the exit status if it could be read.
pub(super) fn kill_and_reap(child: &mut Child) -> Option<ExitStatus> {
    if let Ok(Some(s)) = child.try_wait() {
        return Some(s);
    }
    let _ = child.kill();
    child.wait().ok()
}
