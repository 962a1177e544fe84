//! A scenario's `[agents]` (issue 15): each run's recording merges the samples of the
//! named nodes' `diskpulse agent`s, as `record --agents` does ([`engines::agent::collect`]).
//!
//! The agents are the user's to start, as on real hosts; a run starts its collector once
//! its broker is up, waits up to `wait` for every node's first clock reply (failing with
//! the nodes that did not answer and the command that starts them), runs its phases, and
//! stops the collector before the broker stops (the batches in flight still arrive).
//!
//! `server = "embedded"`: the agents cannot know the embedded broker's ports (fresh ones
//! every run), so the run listens on the fixed `listen` address and forwards it to its
//! first node ([`engines::proxy`] with no delay); between runs that address refuses, and the
//! agents, which reconnect forever, join the next run's broker on their own.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use collectors::clock::Clock;

use super::spec::{AgentsDecl, AGENTS_EMBEDDED};
use engines::agent::collect::{self, Collector};
use engines::broker::Cluster;
use engines::load::connect::ConnectArgs;
use engines::recording::chunks::RunFiles;
use engines::recording::EventLog;
use format::agents::AgentsMeta;
use format::events::{AgentsReady, Body};

/// `[agents]` checked, for one cell.
#[derive(Debug, Clone)]
pub struct AgentsPlan {
    pub nodes: Vec<String>,
    /// The agents' servers; `None`: the scenario's broker, reached at `listen`.
    pub servers: Option<Vec<String>>,
    pub listen: Option<String>,
    pub wait: Duration,
}

impl AgentsPlan {
    pub fn of(d: &AgentsDecl) -> anyhow::Result<AgentsPlan> {
        let server = d.server.get_ref();
        let embedded = server == AGENTS_EMBEDDED;
        Ok(AgentsPlan {
            nodes: d.nodes.iter().map(|n| n.get_ref().clone()).collect(),
            servers: (!embedded).then(|| server.split(',').map(|u| u.trim().to_string()).collect()),
            listen: d.listen.as_ref().map(|l| l.get_ref().clone()),
            wait: format::cli::parse_duration(&d.wait)
                .map_err(|e| anyhow::anyhow!("[agents] wait {e}"))?,
        })
    }

    /// What the agents are started with (`--server`), redacted.
    pub fn agent_url(&self) -> String {
        match (&self.servers, &self.listen) {
            (Some(s), _) => format::redact::text(&s.join(",")),
            (None, Some(l)) => format!("nats://{l}"),
            (None, None) => "the scenario's broker".into(),
        }
    }
}

/// A run's collector (and, for an embedded broker, the agents' way in).
pub struct AgentsRun {
    collector: Collector,
    proxy: Option<engines::proxy::ProxyHandle>,
}

/// Starts collecting into `dir` and waits until every node's agent answered a clock
/// request. On failure the collector is stopped, its meta stored in `slot` (what it saw
/// stays in the run) and the error names the nodes missing.
pub async fn start(
    p: &AgentsPlan,
    cluster: Option<&Cluster>,
    files: &RunFiles,
    clock: Clock,
    events: &EventLog,
    stop: &AtomicBool,
    slot: &Mutex<Option<AgentsMeta>>,
) -> anyhow::Result<AgentsRun> {
    let (servers, proxy) = match &p.servers {
        Some(s) => (s.clone(), None),
        None => {
            let c = cluster.ok_or_else(|| {
                anyhow::anyhow!(
                    "[agents] server = \"embedded\": the scenario's broker is not running"
                )
            })?;
            let urls = c.client_urls();
            let listen = p.listen.as_deref().unwrap_or("127.0.0.1:0");
            let up = urls[0].trim_start_matches("nats://").to_string();
            let (_, h) = engines::proxy::spawn_on(listen, &up, Duration::ZERO, None).map_err(|e| {
                e.context(format!(
                    "[agents] listen {listen}: the address the agents connect to (is another run or program on it?)"
                ))
            })?;
            (urls, Some(h))
        }
    };
    let connect = ConnectArgs {
        servers,
        ..Default::default()
    };
    let nodes = p.nodes.clone();
    let zero_unix_ns = engines::recording::session::clock_zero_unix_ns(clock.zero_monotonic_ns());
    let (f, ev) = (files.clone(), events.clone());
    let collector = tokio::task::spawn_blocking(move || -> anyhow::Result<Collector> {
        collect::connect(&connect, nodes)
            .map_err(|e| anyhow::anyhow!("[agents] server: {e:#}"))?
            .start(&f, clock, zero_unix_ns, ev)
    })
    .await??;
    let t0 = Instant::now();
    loop {
        let missing = collector.not_answered();
        if missing.is_empty() {
            events.event(Body::AgentsReady(AgentsReady {
                nodes: p.nodes.clone(),
                waited_ms: t0.elapsed().as_secs_f64() * 1e3,
            }));
            return Ok(AgentsRun { collector, proxy });
        }
        let interrupted = stop.load(Ordering::Relaxed);
        if interrupted || t0.elapsed() >= p.wait {
            let run = AgentsRun { collector, proxy };
            run.finish(slot).await;
            if interrupted {
                anyhow::bail!("interrupted while waiting for the agents");
            }
            let url = p.agent_url();
            let m = missing
                .iter()
                .map(|n| format!("`diskpulse agent --name {n} --server {url}`"))
                .collect::<Vec<_>>()
                .join(", ");
            anyhow::bail!(
                "[agents]: node(s) {} did not answer a clock request (diskpulse.NODE.clock) within {:?}; start {m} on each node's host before `run` (or raise [agents] wait)",
                missing.join(", "),
                p.wait
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

impl AgentsRun {
    /// Stops the collector (after the batches in flight) and stores its meta in `slot`;
    /// a failure is an error event (the run's own recording stands).
    pub async fn finish(self, slot: &Mutex<Option<AgentsMeta>>) {
        let AgentsRun { collector, proxy } = self;
        match tokio::task::spawn_blocking(move || collector.finish()).await {
            Ok(Ok(m)) => *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(m),
            Ok(Err(e)) => eprintln!("   [agents]: {e:#}"),
            Err(e) => eprintln!("   [agents]: the collector panicked: {e}"),
        }
        if let Some(mut h) = proxy {
            let _ = tokio::task::spawn_blocking(move || h.close()).await;
        }
    }
}
