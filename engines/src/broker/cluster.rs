//! A JetStream cluster of 1, 3 or 5 embedded nats-servers on loopback.
//!
//! [`Cluster::start`] writes one config per node (`RUN/nats-server-n1.conf`, log
//! `RUN/nats-server-n1.log`, ...), each with its own client, monitoring and route ports
//! and its own JetStream store directory, and a `cluster {}` block whose `routes` list
//! every node. It returns once every node answers JetStream requests and the meta group
//! has a leader that sees every other node as current (read from each node's `/jsz`
//! `meta_cluster`), or fails within `ready_timeout` with each node's log tail.
//!
//! A 1-node cluster is exactly the single [`Broker`] of `demo`: no `cluster {}` block,
//! `RUN/nats-server.conf` and `RUN/nats-server.log`.
//!
//! Nodes are numbered from 1 like their names: node 1 is `n1` (`node(1)`,
//! `stop_node(1)`); `nodes()[0]` is n1 too. [`Cluster::stop_node`] and
//! [`Cluster::start_node`] stop one node and start it again with its data in place, on
//! its previous ports when they are still free (fresh ports otherwise; the other nodes
//! still reach it, because it dials them). [`Cluster::kill_node`] is `stop_node` without
//! the clean shutdown (SIGKILL). `start_node` returns once the node answers
//! and the meta leader sees it current again; a stream's own replicas catch up after
//! that, in the background.
//!
//! Every exit path stops every node: `stop` (SIGTERM, then SIGKILL after 10 s, all
//! nodes at once), a failed start (the nodes started so far are killed) and drop (each
//! [`Broker`] kills its server).
//!
//! Events (besides each node's `broker_*` events with its `name`): `cluster_ready`
//! (`nodes`, `ready_ms` from the first spawn, `meta_leader`; after `start_node` also
//! `restarted` and `current_ms` from that node's spawn).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};

use super::http::get_doc;
use super::{
    find_nats_server, free_ports, log_tail, nats_server_version, Broker, BrokerOptions,
    BrokerProcess, Check, ClusterConf, Starting, SyncMode, READY_TIMEOUT, START_ATTEMPTS,
};
use crate::recording::EventLog;
use format::events::{self as ev, Body};

/// The `cluster { name }` unless told otherwise.
pub(crate) const DEFAULT_CLUSTER_NAME: &str = "diskpulse";

/// What to start.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// `--nats-server PATH`; `None` searches `PATH`.
    pub binary: Option<PathBuf>,
    /// 1, 3 or 5.
    pub nodes: usize,
    /// One directory per node (e.g. on different volumes), or one base directory: with
    /// several nodes each gets `base/n1`, `base/n2`, ...; a single node uses it as is.
    pub store_dirs: Vec<PathBuf>,
    pub sync: SyncMode,
    /// Receives each node's config and log (created if missing).
    pub run_dir: PathBuf,
    /// `cluster { name }`.
    pub cluster_name: String,
    /// How long `start` and `start_node` wait for JetStream and the meta group.
    pub ready_timeout: Duration,
}

impl ClusterOptions {
    /// Options with the default binary (PATH), cluster name and 30 s ready timeout.
    pub fn new(
        nodes: usize,
        store_dirs: Vec<PathBuf>,
        sync: SyncMode,
        run_dir: impl Into<PathBuf>,
    ) -> ClusterOptions {
        ClusterOptions {
            binary: None,
            nodes,
            store_dirs,
            sync,
            run_dir: run_dir.into(),
            cluster_name: DEFAULT_CLUSTER_NAME.to_string(),
            ready_timeout: READY_TIMEOUT,
        }
    }

    /// Each node's store directory, as `store_dirs` gives them.
    pub fn node_store_dirs(&self) -> anyhow::Result<Vec<PathBuf>> {
        let list = || {
            self.store_dirs
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        match self.store_dirs.len() {
            0 => bail!("no store directory given (--store-dir DIR, or one per node: a,b,c)"),
            1 if self.nodes == 1 => Ok(self.store_dirs.clone()),
            1 => Ok((1..=self.nodes)
                .map(|i| self.store_dirs[0].join(format!("n{i}")))
                .collect()),
            k if k == self.nodes => Ok(self.store_dirs.clone()),
            k => bail!(
                "--store-dir takes one directory (each node gets n1, n2, .. under it) or one per node ({}); got {k}: '{}'",
                self.nodes,
                list()
            ),
        }
    }
}

pub use crate::recording::OnNodeStart;

pub struct Cluster {
    nodes: Vec<Broker>,
    on_start: Option<OnNodeStart>,
    cluster_name: Option<String>,
    events: EventLog,
    ready_timeout: Duration,
    ready_ms: f64,
    meta_leader: Option<String>,
}

impl Cluster {
    /// Starts the nodes and returns once JetStream answers on each and the meta group
    /// has a leader with every peer current.
    pub async fn start(opts: ClusterOptions, events: &EventLog) -> anyhow::Result<Cluster> {
        let n = opts.nodes;
        if ![1, 3, 5].contains(&n) {
            bail!(
                "--cluster takes 1, 3 or 5 nodes (the JetStream meta group needs a majority: an even count survives no more failed nodes than one node fewer); got {n}"
            );
        }
        let dirs = opts.node_store_dirs()?;
        let binary = find_nats_server(opts.binary.as_deref())?;
        let version = nats_server_version(&binary)?;
        let mut nodes = Vec::with_capacity(n);
        for (i, dir) in dirs.into_iter().enumerate() {
            let name = format!("n{}", i + 1);
            let stem = if n == 1 {
                "nats-server".to_string()
            } else {
                format!("nats-server-{name}")
            };
            let mut b = Broker::prepare(
                BrokerOptions {
                    binary: opts.binary.clone(),
                    store_dir: dir,
                    sync: opts.sync,
                    run_dir: opts.run_dir.clone(),
                    name,
                },
                binary.clone(),
                version.clone(),
                &stem,
                events,
            )?;
            b.ready_timeout = opts.ready_timeout;
            nodes.push(b);
        }
        for (i, a) in nodes.iter().enumerate() {
            if let Some(b) = nodes[i + 1..]
                .iter()
                .find(|b| b.store_dir() == a.store_dir())
            {
                bail!(
                    "{} and {} would share the store directory {}; give each node its own",
                    a.name(),
                    b.name(),
                    a.store_dir().display()
                );
            }
        }
        let t0 = Instant::now();
        let mut cluster = Cluster {
            on_start: None,
            nodes,
            cluster_name: (n > 1).then(|| opts.cluster_name.clone()),
            events: events.clone(),
            ready_timeout: opts.ready_timeout,
            ready_ms: 0.0,
            meta_leader: None,
        };
        if n == 1 {
            cluster.nodes[0].run(true).await?;
        } else {
            cluster.spawn_all(&opts.cluster_name).await?;
            let deadline = t0 + opts.ready_timeout;
            cluster.meta_leader = Some(cluster.wait_meta_current(deadline).await?);
        }
        cluster.ready_ms = t0.elapsed().as_secs_f64() * 1e3;
        events.event(Body::ClusterReady(ev::ClusterReady {
            nodes: n as u64,
            cluster_name: Some(cluster.cluster_name.clone()),
            ready_ms: Some(cluster.ready_ms),
            meta_leader: cluster.meta_leader.clone(),
            ..Default::default()
        }));
        Ok(cluster)
    }

    /// Starts every node of a multi-node cluster at once (a node's JetStream cannot
    /// answer before a majority is up) and waits until each answers; a port clash
    /// anywhere restarts all of them on fresh ports, so every config names the same
    /// routes.
    async fn spawn_all(&mut self, cluster_name: &str) -> anyhow::Result<()> {
        let n = self.nodes.len();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let p = free_ports(3 * n)?;
            let routes = p[2 * n..].to_vec();
            for (i, b) in self.nodes.iter_mut().enumerate() {
                b.configure(
                    p[i],
                    p[n + i],
                    Some(ClusterConf {
                        name: cluster_name.to_string(),
                        port: routes[i],
                        routes: routes.clone(),
                    }),
                )?;
            }
            let mut starting: Vec<Option<Starting>> = Vec::with_capacity(n);
            for b in self.nodes.iter_mut() {
                match b.spawn() {
                    Ok(s) => starting.push(Some(s)),
                    Err(e) => {
                        self.abandon_all(&mut starting, "cluster_start_failed");
                        return Err(e);
                    }
                }
            }
            let deadline = Instant::now() + self.ready_timeout;
            let mut ready: Vec<Option<f64>> = vec![None; n];
            let mut why: Vec<String> = vec!["not answering yet".to_string(); n];
            let clashed = loop {
                // Look at every node that is not ready yet, concurrently: a node whose
                // JetStream waits for the meta group can take a while to answer.
                let results = {
                    let looks = self
                        .nodes
                        .iter()
                        .zip(starting.iter_mut())
                        .enumerate()
                        .filter(|(i, _)| ready[*i].is_none())
                        .map(|(i, (b, s))| {
                            let s = s.as_mut().expect("held until adopted");
                            async move { (i, b.check(s).await) }
                        });
                    futures::future::join_all(looks).await
                };
                let mut clash = None;
                for (i, r) in results {
                    match r {
                        Ok(Check::Ready(ms)) => ready[i] = Some(ms),
                        Ok(Check::NotYet(w)) => why[i] = w,
                        Ok(Check::PortClash) => clash = Some(i),
                        Err(e) => {
                            starting[i] = None; // it has exited; its event is written
                            self.abandon_all(&mut starting, "cluster_start_failed");
                            return Err(e);
                        }
                    }
                }
                if let Some(i) = clash {
                    starting[i] = None;
                    self.abandon_all(&mut starting, "port_clash_restart");
                    break i;
                }
                if ready.iter().all(Option::is_some) {
                    for (i, b) in self.nodes.iter_mut().enumerate() {
                        let s = starting[i].take().expect("held until adopted");
                        b.adopt(s, ready[i].expect("all ready"), attempt);
                    }
                    return Ok(());
                }
                if Instant::now() >= deadline {
                    self.abandon_all(&mut starting, "start_timeout");
                    let waiting = (0..n)
                        .filter(|i| ready[*i].is_none())
                        .map(|i| format!("{}: {}", self.nodes[i].name(), why[i]))
                        .collect::<Vec<_>>()
                        .join("; ");
                    bail!(
                        "the {n}-node cluster did not answer JetStream requests within {} s ({waiting}); logs:\n{}",
                        self.ready_timeout.as_secs(),
                        self.log_tails()
                    );
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            };
            if attempt >= START_ATTEMPTS {
                bail!(
                    "the cluster could not bind free loopback ports in {START_ATTEMPTS} attempts; logs:\n{}",
                    self.log_tails()
                );
            }
            self.nodes[clashed].port_clash(attempt)?;
        }
    }

    fn abandon_all(&self, starting: &mut [Option<Starting>], how: &str) {
        for (b, s) in self.nodes.iter().zip(starting.iter_mut()) {
            if let Some(s) = s.take() {
                b.abandon(s, how);
            }
        }
    }

    /// Waits until every running node sees the same meta leader, which is running and
    /// sees every other running node current. Returns the leader's name.
    async fn wait_meta_current(&mut self, deadline: Instant) -> anyhow::Result<String> {
        let mut why;
        loop {
            if let Some(i) = self
                .nodes
                .iter_mut()
                .position(|b| b.child.is_some() && !b.is_running())
            {
                let b = &self.nodes[i];
                bail!(
                    "nats-server {} exited while the cluster formed; log {}:\n{}",
                    b.name(),
                    b.log_path().display(),
                    log_tail(b.log_path(), 20)
                );
            }
            match meta_state(&self.nodes).await {
                Ok(leader) => return Ok(leader),
                Err(w) => why = w,
            }
            if Instant::now() >= deadline {
                bail!(
                    "the cluster's JetStream meta group did not get a leader with every peer current within {} s ({why}); logs:\n{}",
                    self.ready_timeout.as_secs(),
                    self.log_tails()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The last lines of every node's log, each under its name, for error messages.
    fn log_tails(&self) -> String {
        self.nodes
            .iter()
            .map(|b| {
                format!(
                    "--- {} ({}):\n{}",
                    b.name(),
                    b.log_path().display(),
                    log_tail(b.log_path(), 12)
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// How many nodes the cluster has.
    pub fn size(&self) -> usize {
        self.nodes.len()
    }

    /// `nats://127.0.0.1:PORT` of every node, n1 first.
    pub fn client_urls(&self) -> Vec<String> {
        self.nodes.iter().map(Broker::client_url).collect()
    }

    /// `(name, monitor URL)` of every node: what [`super::start_monitor`] takes.
    pub fn monitor_targets(&self) -> Vec<(String, String)> {
        self.nodes
            .iter()
            .map(|b| (b.name().to_string(), b.monitor_url()))
            .collect()
    }

    /// `(name, pid)` of every node, n1 first: what a watcher looks at.
    pub fn pids(&self) -> Vec<(String, u32)> {
        self.nodes
            .iter()
            .map(|b| (b.name().to_string(), b.pid()))
            .collect()
    }

    /// Calls `f(name, pid)` for every node started again from now on.
    pub fn on_node_start(&mut self, f: OnNodeStart) {
        self.on_start = Some(f);
    }

    fn started(&self, i: usize) {
        if let Some(f) = &self.on_start {
            f(self.nodes[i].name(), self.nodes[i].pid());
        }
    }

    /// All nodes, n1 first (`nodes()[0]` is node 1).
    pub fn nodes(&self) -> &[Broker] {
        &self.nodes
    }

    /// Node `n`, counted from 1 like the names (`node(1)` is n1). Panics if there is no
    /// such node.
    pub fn node(&self, n: usize) -> &Broker {
        match self.index(n) {
            Ok(i) => &self.nodes[i],
            Err(e) => panic!("{e}"),
        }
    }

    fn index(&self, n: usize) -> anyhow::Result<usize> {
        if n == 0 || n > self.nodes.len() {
            return Err(anyhow!(
                "no node {n}: nodes are numbered 1 to {} (n1..n{})",
                self.nodes.len(),
                self.nodes.len()
            ));
        }
        Ok(n - 1)
    }

    /// Stops node `n` (SIGTERM, SIGKILL after 10 s); its data stays. Idempotent.
    pub async fn stop_node(&mut self, n: usize) -> anyhow::Result<()> {
        let i = self.index(n)?;
        self.nodes[i].stop().await
    }

    /// Kills node `n` with SIGKILL, no clean shutdown; its data stays. Idempotent.
    pub fn kill_node(&mut self, n: usize) -> anyhow::Result<()> {
        let i = self.index(n)?;
        self.nodes[i].kill();
        Ok(())
    }

    /// Starts a stopped node `n` again with its data and returns once it answers
    /// JetStream requests and the meta leader sees it current. An error if it runs.
    pub async fn start_node(&mut self, n: usize) -> anyhow::Result<()> {
        let i = self.index(n)?;
        let t0 = Instant::now();
        // The routes as they are now (another node may have moved to fresh ports).
        let routes: Vec<u16> = self.nodes.iter().filter_map(Broker::cluster_port).collect();
        let b = &mut self.nodes[i];
        if b.is_running() {
            bail!("{} is running; stop_node({n}) first", b.name());
        }
        if let Some(mut c) = b.cluster.clone() {
            c.routes = routes;
            let (cp, mp) = (b.client_port, b.monitor_port);
            b.configure(cp, mp, Some(c))?;
        }
        b.start_again().await?;
        self.started(i);
        if self.nodes.len() > 1 {
            let leader = self.wait_meta_current(t0 + self.ready_timeout).await?;
            self.events.event(Body::ClusterReady(ev::ClusterReady {
                nodes: self.nodes.len() as u64,
                restarted: Some(ev::Restarted::One(self.nodes[i].name().to_string())),
                current_ms: Some(t0.elapsed().as_secs_f64() * 1e3),
                meta_leader: Some(leader),
                ..Default::default()
            }));
        }
        Ok(())
    }

    /// Starts several stopped nodes at once (a whole cluster restarting: one node alone
    /// cannot elect a meta leader, so starting them one by one would wait forever) and
    /// returns once every one answers JetStream and the meta leader sees them current.
    pub async fn start_nodes(&mut self, ns: &[usize]) -> anyhow::Result<()> {
        let idx: Vec<usize> = ns
            .iter()
            .map(|&n| self.index(n))
            .collect::<anyhow::Result<_>>()?;
        let t0 = Instant::now();
        let routes: Vec<u16> = self.nodes.iter().filter_map(Broker::cluster_port).collect();
        for &i in &idx {
            let b = &mut self.nodes[i];
            if b.is_running() {
                bail!("{} is running; stop it first", b.name());
            }
            if let Some(mut c) = b.cluster.clone() {
                c.routes = routes.clone();
                let (cp, mp) = (b.client_port, b.monitor_port);
                b.configure(cp, mp, Some(c))?;
            }
        }
        let starts = self
            .nodes
            .iter_mut()
            .enumerate()
            .filter(|(i, _)| idx.contains(i))
            .map(|(_, b)| b.start_again());
        futures::future::join_all(starts)
            .await
            .into_iter()
            .collect::<anyhow::Result<Vec<()>>>()?;
        for &i in &idx {
            self.started(i);
        }
        if self.nodes.len() > 1 {
            let leader = self.wait_meta_current(t0 + self.ready_timeout).await?;
            self.events.event(Body::ClusterReady(ev::ClusterReady {
                nodes: self.nodes.len() as u64,
                restarted: Some(ev::Restarted::Many(
                    idx.iter()
                        .map(|&i| self.nodes[i].name().to_string())
                        .collect(),
                )),
                current_ms: Some(t0.elapsed().as_secs_f64() * 1e3),
                meta_leader: Some(leader),
                ..Default::default()
            }));
        }
        Ok(())
    }

    /// The meta leader as the running nodes agree on it now (`None` while they do not,
    /// or for a single node).
    pub async fn meta_leader(&self) -> Option<String> {
        if self.nodes.len() == 1 {
            return None;
        }
        meta_state(&self.nodes).await.ok()
    }

    /// Stops every node (all at once: SIGTERM, SIGKILL after 10 s). Idempotent.
    pub async fn stop(&mut self) -> anyhow::Result<()> {
        let results = futures::future::join_all(self.nodes.iter_mut().map(Broker::stop)).await;
        results.into_iter().collect::<anyhow::Result<Vec<()>>>()?;
        Ok(())
    }

    /// Records how full each node's store volume is (`store_volume` events).
    pub fn record_store_usage(&self) {
        super::store_usage::record(&self.nodes, &self.events);
    }

    /// What `meta.json` records: the cluster and every node's [`Broker::meta`].
    pub fn meta(&self) -> format::meta::ClusterMeta {
        format::meta::ClusterMeta {
            nodes: self.nodes.len(),
            cluster_name: self.cluster_name.clone(),
            ready_ms: self.ready_ms,
            meta_leader_at_start: self.meta_leader.clone(),
            servers: self.nodes.iter().map(Broker::meta).collect(),
            version: None,
        }
    }
}

/// Reads every running node's `/jsz`: `Ok(leader)` when all see the same leader, it is
/// running and it sees every other running node current; otherwise why not.
async fn meta_state(nodes: &[Broker]) -> Result<String, String> {
    let running: Vec<&Broker> = nodes.iter().filter(|b| b.child.is_some()).collect();
    let views = futures::future::join_all(running.iter().map(|b| get_jsz(b.monitor_url()))).await;
    let mut leader: Option<(&str, String)> = None;
    let mut leader_view = None;
    for (b, v) in running.iter().zip(&views) {
        let v = v.as_ref().map_err(|e| format!("{}: {e}", b.name()))?;
        let l = v
            .meta_cluster
            .leader
            .as_deref()
            .filter(|l| !l.is_empty())
            .ok_or_else(|| format!("{} sees no meta leader", b.name()))?;
        match &leader {
            None => leader = Some((b.name(), l.to_string())),
            Some((who, first)) if first != l => {
                return Err(format!("{who} sees leader {first}, {} sees {l}", b.name()))
            }
            _ => {}
        }
        if l == b.name() {
            leader_view = Some(v);
        }
    }
    let Some((_, leader)) = leader else {
        return Err("no node is running".into());
    };
    let view = leader_view.ok_or_else(|| format!("the meta leader {leader} is not running"))?;
    let replicas = &view.meta_cluster.replicas;
    for b in running.iter().filter(|b| b.name() != leader) {
        let current = replicas.iter().any(|r| r.name == b.name() && r.current);
        if !current {
            return Err(format!(
                "the meta leader {leader} does not see {} current yet",
                b.name()
            ));
        }
    }
    Ok(leader)
}

/// The part of nats-server's `/jsz` that says who leads the JetStream meta group and
/// which peers it sees current (the rest of the document is not read here).
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct Jsz {
    meta_cluster: MetaCluster,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct MetaCluster {
    leader: Option<String>,
    replicas: Vec<Replica>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct Replica {
    name: String,
    current: bool,
}

async fn get_jsz(url: String) -> Result<Jsz, String> {
    get_doc(&url, "/jsz", Duration::from_secs(1))
        .await
        .map_err(|e| format!("{e:#}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_dirs_one_base_or_one_per_node() {
        let o = ClusterOptions::new(3, vec!["/b".into()], SyncMode::Always, "/r");
        assert_eq!(
            o.node_store_dirs().unwrap(),
            vec![
                PathBuf::from("/b/n1"),
                PathBuf::from("/b/n2"),
                PathBuf::from("/b/n3")
            ]
        );
        let o = ClusterOptions::new(1, vec!["/b".into()], SyncMode::Always, "/r");
        assert_eq!(o.node_store_dirs().unwrap(), vec![PathBuf::from("/b")]);
        let o = ClusterOptions::new(
            3,
            vec!["/x".into(), "/y".into(), "/z".into()],
            SyncMode::Always,
            "/r",
        );
        assert_eq!(o.node_store_dirs().unwrap()[2], PathBuf::from("/z"));
        let o = ClusterOptions::new(3, vec!["/x".into(), "/y".into()], SyncMode::Always, "/r");
        let e = o.node_store_dirs().unwrap_err().to_string();
        assert!(e.contains("one per node (3); got 2: '/x,/y'"), "{e}");
    }
}
