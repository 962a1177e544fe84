//! One session pipeline: the recording, the broker, its /varz and /jsz monitor, the work
//! (a load, a scenario's phases) and the report, started and stopped in one order for
//! `demo`, `load` and `run` (scenarios).
//!
//! The order, on every exit path:
//!
//! ```text
//! open:   recording (run directory, clock, events, samplers)   [Session::open]
//! run:    broker (embedded nodes, or servers we did not start)  [Session::run]
//!         proc_io sampler (the embedded servers' /proc/PID/io into proc_io.csv)
//!         monitor (/varz, /jsz into varz.csv, jsz.csv; a RabbitMQ node's /metrics
//!         into rabbitmq_metrics.csv)
//!         the body (load, phases), with a stop flag
//!         monitor stopped, broker stopped (its meta kept for meta.json)
//! close:  recording finished (meta.json complete), report       [Session::close]
//! ```
//!
//! What must stay true:
//! - Whatever happens after `open`, the recording is closed (`close`, or `Recording`'s
//!   Drop) and every server we started is stopped (`Cluster::stop`, or its Drop).
//! - The body gets its own stop flag, set on Ctrl-C (the caller's flag) and when a server
//!   we started dies under it (with `watch_broker`): then the load winds down instead of
//!   counting errors to the end of its duration, a `broker_died` event names the node
//!   (`name`, `pid`, `status`), and [`Ran::died`] says so. A scenario does not watch:
//!   its restart phases stop nodes on purpose.
//! - Nothing here writes a file of its own: the files are the recording's, the
//!   monitor's, the broker's and the report's.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use collectors::clock::Clock;

use engines::broker::{monitor, BrokerProcess, Cluster, ClusterOptions, RabbitNode, RabbitOptions};
use engines::load::LoadEnv;
use engines::recording::session::{Recording, SamplerSetup};
use engines::recording::EventLog;
use format::events::{Body, BrokerDied};
use format::usage;
use report::{self, ReportOptions, Summary};

/// Where the session records. (One value a session, moved once: the size of `New`,
/// which holds the whole sampler setup, does not matter.)
#[allow(clippy::large_enum_variant)]
pub enum RecordTo {
    /// Nothing recorded: a clock that starts now, no events, no run directory.
    Nothing,
    /// A new run directory with the disk samplers (`--record`, `demo`, each scenario run).
    New {
        dir: PathBuf,
        setup: SamplerSetup,
        argv: Vec<String>,
    },
    /// The run of a parent (`diskpulse record -- diskpulse load ...`, a scenario's load
    /// phase): its directory and clock from `DISKPULSE_RUN_DIR` and
    /// `DISKPULSE_CLOCK_ZERO_NS`, events appended to its `events.jsonl`.
    Parent { dir: PathBuf },
}

/// The servers of a session.
pub enum BrokerPlan {
    /// No broker (a scenario without `[broker]`).
    None,
    /// Servers we did not start; `monitors` are `(name, monitor URL)` to poll (may be empty).
    External {
        servers: Vec<String>,
        monitors: Vec<(String, String)>,
    },
    /// 1, 3 or 5 embedded nodes.
    Embedded(ClusterOptions),
    /// An embedded RabbitMQ node (the AMQP load modes).
    Rabbit(RabbitOptions),
}

/// The tokio runtime of a session.
#[derive(Debug, Clone, Copy)]
pub enum Threads {
    /// A multi-thread runtime with one worker per core.
    All,
    /// A current-thread runtime for 1, else a multi-thread runtime with this many workers.
    Exactly(usize),
}

/// An open session: the recording runs.
pub struct Session {
    rec: Option<Recording>,
    clock: Clock,
    events: EventLog,
    run_dir: Option<PathBuf>,
    rt: tokio::runtime::Runtime,
    user_stop: Arc<AtomicBool>,
}

/// What the body of [`Session::run`] works with.
pub struct Live {
    pub clock: Clock,
    pub events: EventLog,
    /// The run directory when recording (own or parent's).
    pub run_dir: Option<PathBuf>,
    /// Client URLs: the embedded nodes', or the external servers.
    pub servers: Vec<String>,
    /// The embedded nodes (scenario phases stop and start them).
    pub cluster: Option<Cluster>,
    /// The embedded RabbitMQ node.
    pub rabbit: Option<RabbitNode>,
    /// Set on Ctrl-C and when a watched server dies: the body's stop flag.
    pub stop: Arc<AtomicBool>,
    /// With a recording: what to call with a broker process started by a child (a
    /// scenario's AMQP load phase starts its own RabbitMQ node): its `/proc/PID/io`
    /// sampled and, with `--trace`, its sync calls traced as the broker's.
    pub process_hook: Option<engines::broker::OnNodeStart>,
    /// The recording's `--chunk`/`--keep` (None when the run is not chunked or not
    /// recorded): files written beside it (varz.csv, the agents' files) follow it.
    pub flight: Option<Arc<engines::recording::chunks::Flight>>,
}

impl Live {
    /// Where and on which clock a load runs in this session; `load.csv` goes into the
    /// run directory when there is one.
    pub fn load_env(&self) -> LoadEnv {
        LoadEnv {
            clock: self.clock,
            events: self.events.clone(),
            stop: self.stop.clone(),
            servers: self.servers.clone(),
            load_csv: self.run_dir.as_ref().map(|d| d.join("load.csv")),
        }
    }
}

/// How [`Session::run`] went.
pub struct Ran<T> {
    /// The body's result, or why the broker or monitor did not start (the body did not run).
    pub result: anyhow::Result<T>,
    /// The embedded cluster's `meta()` (nodes, every server's meta) or the RabbitMQ
    /// node's, taken before it stopped.
    pub cluster_meta: Option<format::meta::BrokerSection>,
    /// A watched server that died during the body: "nats-server n1 (pid 123) exited: ...".
    pub died: Option<String>,
}

impl Session {
    /// Starts the recording (if any) and builds the runtime. `user_stop` is the flag
    /// Ctrl-C sets.
    pub fn open(
        record: RecordTo,
        threads: Threads,
        user_stop: Arc<AtomicBool>,
    ) -> anyhow::Result<Session> {
        Self::open_with_live(record, threads, user_stop, None)
    }

    /// [`Session::open`], a new recording's diskstats sampler also feeding `live` (the
    /// progress line of `demo` and `run` counts write bursts from it).
    pub fn open_with_live(
        record: RecordTo,
        threads: Threads,
        user_stop: Arc<AtomicBool>,
        live: Option<Arc<engines::live::Live>>,
    ) -> anyhow::Result<Session> {
        let (rec, clock, events, run_dir) = match record {
            RecordTo::Nothing => {
                let c = Clock::start();
                (None, c, EventLog::disabled(c), None)
            }
            RecordTo::New { dir, setup, argv } => {
                let mut r = Recording::start_with_live(&dir, &setup, &argv, live)?;
                // `kill -USR1`: keep the window around now from --keep (demo, run, load).
                r.keep_on_usr1()?;
                let (c, e, d) = (r.clock, r.events.clone(), r.dir.clone());
                (Some(r), c, e, Some(d))
            }
            RecordTo::Parent { dir } => {
                // Both are set by `record -- CMD` and `run` for the commands they start;
                // a user who set them by hand (or left them in a shell) is told which.
                let unset = "both are set by `record -- CMD` and `run` for the commands they start: unset DISKPULSE_RUN_DIR to run on your own";
                let c = Clock::from_env().ok_or_else(|| {
                    let v = std::env::var_os("DISKPULSE_CLOCK_ZERO_NS");
                    match v {
                        None => usage!("DISKPULSE_RUN_DIR is set but DISKPULSE_CLOCK_ZERO_NS is not; {unset}"),
                        Some(v) => usage!(
                            "DISKPULSE_CLOCK_ZERO_NS '{}' is not a whole number of ns (the run's clock zero); {unset}",
                            v.to_string_lossy()
                        ),
                    }
                })?;
                let e = EventLog::append(&dir.join("events.jsonl"), c)
                    .map_err(|e| usage!("DISKPULSE_RUN_DIR {}: {e:#}; {unset}", dir.display()))?;
                (None, c, e, Some(dir))
            }
        };
        let rt = match threads {
            Threads::Exactly(1) => tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?,
            Threads::Exactly(n) => tokio::runtime::Builder::new_multi_thread()
                .worker_threads(n)
                .enable_all()
                .build()?,
            Threads::All => tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?,
        };
        Ok(Session {
            rec,
            clock,
            events,
            run_dir,
            rt,
            user_stop,
        })
    }

    pub fn clock(&self) -> Clock {
        self.clock
    }

    pub fn events(&self) -> &EventLog {
        &self.events
    }

    /// The run directory (own recording or parent's).
    pub fn run_dir(&self) -> Option<&Path> {
        self.run_dir.as_deref()
    }

    /// Whether this session has its own recording (and so `meta.json` and a report).
    pub fn records(&self) -> bool {
        self.rec.is_some()
    }

    /// Sets a section of `meta.json`; nothing without a recording of our own.
    pub fn set<S: format::meta::Section>(&mut self, s: &S) -> anyhow::Result<()> {
        match self.rec.as_mut() {
            Some(r) => r.set(s),
            None => Ok(()),
        }
    }

    /// Starts the broker and the monitor, runs `body`, then stops the monitor and the
    /// broker, in that order, whatever the body returned. The monitor runs when there is
    /// a run directory and something to poll, every `monitor_interval`.
    #[allow(
        clippy::too_many_lines,
        reason = "the session's steps in order, each next to what it stops on an error"
    )]
    pub fn run<T>(
        &mut self,
        broker: BrokerPlan,
        monitor_interval: Duration,
        watch_broker: bool,
        body: impl AsyncFnOnce(&mut Live) -> anyhow::Result<T>,
    ) -> Ran<T> {
        let mut ran = Ran {
            result: Err(anyhow::anyhow!("the session did not run")),
            cluster_meta: None,
            died: None,
        };
        let (clock, events, run_dir) = (self.clock, self.events.clone(), self.run_dir.clone());
        let user_stop = self.user_stop.clone();
        let rec = &mut self.rec;
        self.rt.block_on(async {
            let mut rabbit = None;
            let (cluster, servers, targets) = match broker {
                BrokerPlan::None => (None, vec![], vec![]),
                BrokerPlan::External { servers, monitors } => (None, servers, monitors),
                BrokerPlan::Rabbit(opts) => match RabbitNode::start(opts, &events).await {
                    Ok(n) => {
                        // The VM's /proc/PID/io and (with --trace) its sync calls, as for
                        // nats-server.
                        if let Some(r) = rec.as_mut() {
                            let pids = vec![(n.name().to_string(), n.pid())];
                            if let Err(e) = r.sample_processes(Path::new("/proc"), &pids) {
                                events.error("proc_io", "open", &format!("{e:#}"));
                            }
                            r.trace_pid(n.pid());
                        }
                        let urls = vec![n.amqp_url()];
                        rabbit = Some(n);
                        (None, urls, vec![])
                    }
                    Err(e) => {
                        ran.result = Err(e);
                        return;
                    }
                },
                BrokerPlan::Embedded(opts) => match Cluster::start(opts, &events).await {
                    Ok(mut c) => {
                        // The servers' /proc/PID/io every 10 ms into proc_io.csv: how
                        // much of each device's traffic is the broker's.
                        // With --trace, their sync calls too (nothing without).
                        if let Some(r) = rec.as_mut() {
                            if let Err(e) = r.sample_processes(Path::new("/proc"), &c.pids()) {
                                events.error("proc_io", "open", &format!("{e:#}"));
                            }
                            for (_, pid) in c.pids() {
                                r.trace_pid(pid);
                            }
                            c.on_node_start(r.process_hook());
                        }
                        let (urls, targets) = (c.client_urls(), c.monitor_targets());
                        (Some(c), urls, targets)
                    }
                    Err(e) => {
                        ran.result = Err(e);
                        return;
                    }
                },
            };
            let mut live = Live {
                clock,
                events: events.clone(),
                run_dir: run_dir.clone(),
                servers,
                cluster,
                rabbit,
                stop: Arc::new(AtomicBool::new(false)),
                process_hook: rec.as_ref().map(|r| r.process_hook()),
                flight: rec.as_ref().and_then(|r| r.flight()),
            };
            let mon_stop = Arc::new(AtomicBool::new(false));
            // varz.csv, jsz.csv and rabbitmq_metrics.csv are cut by the recording's
            // `--chunk` and dropped by its `--keep`, as its own files are.
            let files = run_dir
                .as_ref()
                .map(|d| engines::recording::chunks::RunFiles {
                    dir: d.clone(),
                    flight: live.flight.clone(),
                });
            let mon = match (&files, targets.is_empty()) {
                (Some(f), false) => {
                    match monitor::start_monitor(
                        targets,
                        clock,
                        f,
                        events.clone(),
                        mon_stop.clone(),
                        monitor_interval,
                    )
                    .await
                    {
                        Ok(m) => Some(m),
                        Err(e) => {
                            ran.result = Err(e);
                            stop_cluster(&mut live, &mut ran).await;
                            return;
                        }
                    }
                }
                _ => None,
            };
            // An embedded RabbitMQ node's /metrics, polled like /varz.
            let rabbit_mon = match (&files, &live.rabbit) {
                (Some(f), Some(n)) => match engines::broker::rabbit_metrics::start(
                    n.name().to_string(),
                    &n.metrics_url(),
                    clock,
                    f,
                    events.clone(),
                    mon_stop.clone(),
                    monitor_interval,
                ) {
                    Ok(m) => Some(m),
                    Err(e) => {
                        events.error("monitor", "rabbitmq_metrics", &format!("{e:#}"));
                        None
                    }
                },
                _ => None,
            };
            let pids = match (&live.cluster, &live.rabbit, watch_broker) {
                (Some(c), _, true) => c.pids(),
                (None, Some(n), true) => vec![(n.name().to_string(), n.pid())],
                _ => vec![],
            };
            let broker_kind = if live.rabbit.is_some() {
                "rabbitmq node"
            } else {
                "nats-server"
            };
            let died = Arc::new(Mutex::new(None));
            let watcher = tokio::spawn(watch(
                user_stop,
                live.stop.clone(),
                pids,
                broker_kind,
                events.clone(),
                died.clone(),
            ));
            ran.result = body(&mut live).await;
            watcher.abort();
            ran.died = died.lock().unwrap_or_else(|p| p.into_inner()).take();
            mon_stop.store(true, Ordering::SeqCst);
            if let Some(m) = mon {
                if let Ok(Err(e)) = m.await {
                    events.error("monitor", "poller", &format!("{e:#}"));
                }
            }
            if let Some(m) = rabbit_mon {
                if let Ok(Err(e)) = m.await {
                    events.error("monitor", "rabbitmq_metrics", &format!("{e:#}"));
                }
            }
            stop_cluster(&mut live, &mut ran).await;
        });
        ran
    }

    /// Finishes the recording (meta.json complete) and, with `report`, writes the report.
    /// Without a recording of its own, nothing. Returns the run directory, the summary and
    /// the warnings of reading the recording back, for the command to print at its end.
    pub fn close(
        self,
        report: Option<&ReportOptions>,
    ) -> anyhow::Result<Option<(PathBuf, Summary, Vec<String>)>> {
        let Some(rec) = self.rec else {
            return Ok(None);
        };
        let dir = rec.dir.clone();
        rec.finish()?;
        match report {
            Some(o) => {
                let (s, warnings) = report::report_noted(&dir, o)?;
                Ok(Some((dir, s, warnings)))
            }
            None => Ok(None),
        }
    }
}

/// Stops the embedded nodes, keeping their meta; a stop error becomes the result's
/// error only when the body succeeded.
async fn stop_cluster<T>(live: &mut Live, ran: &mut Ran<T>) {
    if let Some(mut n) = live.rabbit.take() {
        ran.cluster_meta = Some(format::meta::BrokerSection::Rabbit(n.meta()));
        if let Err(e) = n.stop().await {
            if ran.result.is_ok() {
                ran.result = Err(e);
            }
        }
    }
    if let Some(mut c) = live.cluster.take() {
        ran.cluster_meta = Some(format::meta::BrokerSection::Cluster(c.meta()));
        c.record_store_usage();
        if let Err(e) = c.stop().await {
            if ran.result.is_ok() {
                ran.result = Err(e);
            }
        }
    }
}

/// How often the watcher looks at Ctrl-C and the servers' processes.
const WATCH_EVERY: Duration = Duration::from_millis(20);

/// Copies Ctrl-C into the body's stop flag, and sets it when a server in `pids` is gone
/// (or a zombie: it exited and we have not reaped it yet).
async fn watch(
    user_stop: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    pids: Vec<(String, u32)>,
    broker_kind: &'static str,
    events: EventLog,
    died: Arc<Mutex<Option<String>>>,
) {
    loop {
        if user_stop.load(Ordering::Relaxed) {
            stop.store(true, Ordering::SeqCst);
            return;
        }
        if let Some((name, pid)) = pids.iter().find(|(_, p)| !process_alive(*p)) {
            events.event(Body::BrokerDied(BrokerDied {
                name: name.clone(),
                pid: *pid,
            }));
            *died.lock().unwrap_or_else(|p| p.into_inner()) = Some(format!(
                "{broker_kind} {name} (pid {pid}) exited during the run; its log is in the run directory"
            ));
            stop.store(true, Ordering::SeqCst);
            return;
        }
        tokio::time::sleep(WATCH_EVERY).await;
    }
}

/// Whether `pid` runs: its /proc entry exists and is not a zombie.
fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // "pid (comm) S ...": the state follows the last ')'.
        Ok(s) => s
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_some_and(|state| state != 'Z' && state != 'X'),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reaped_or_zombie_child_is_not_alive() {
        assert!(process_alive(std::process::id()));
        let mut c = std::process::Command::new("true").spawn().unwrap();
        let pid = c.id();
        // Exited but not reaped: a zombie.
        let t0 = std::time::Instant::now();
        while process_alive(pid) && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(!process_alive(pid), "pid {pid} still alive");
        c.wait().unwrap();
        assert!(!process_alive(pid));
    }
}
