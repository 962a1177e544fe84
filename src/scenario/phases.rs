//! A scenario's phases: `sleep`, `load`, `probe`, `fsync` and `check` (diskpulse
//! subcommands run as children on the run's clock, each told its phase index in
//! `DISKPULSE_PHASE`), and `restart`, `stop`, `start`, `kill` of broker nodes (with the
//! time to current and healthy, and the store recovery lines of the server's log as
//! events).
//!
//! Phases may run at the same time ([`super::executor`]): each has its own stop flag
//! (Ctrl-C, the end of the phase it runs `during`, or another phase failing). A child is
//! then sent SIGINT, and SIGKILL after [`STOP_GRACE`]; a sleep ends. The cluster is shared:
//! a node phase locks it only while it stops, kills or starts nodes, a load phase only to
//! read the client URLs.
//!
//! Each phase gives a typed result for meta.json (`format::phases::PhaseResult`): a child's
//! stdout goes there whole through `PhaseResult::of_stdout`, never read by key here.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::run::{vol_cgroup, vol_dir};
use super::spec;
use engines::broker::{monitor, BrokerProcess, Cluster, RabbitNode};
use engines::lab::Volume;
use engines::recording::EventLog;
use format::cli::parse_duration;
use format::events::{self as ev, Body};
use format::phases::{NodeOutcome, NodeStarted, NodesResult, PhaseResult};

/// How long a stopped phase's child has between SIGINT and SIGKILL (a probe or load
/// prints what it measured on SIGINT, which takes well under a second).
pub const STOP_GRACE: Duration = Duration::from_secs(10);

pub(super) fn phase_label(p: &spec::PhaseDecl) -> String {
    p.name
        .as_ref()
        .map(|n| n.get_ref().clone())
        .unwrap_or_else(|| {
            let k = p.kind.get_ref();
            match p.args.first() {
                Some(a) if k == "load" => format!("load {a}"),
                _ => k.clone(),
            }
        })
}

/// Writes back the file systems that hold `dirs` (syncfs: not every file system of the
/// machine, whose dirty pages, e.g. other builds', can take many seconds) and drops the
/// page cache, so a restarted node re-reads its store from the device.
fn sysctl_drop_caches(dirs: &[PathBuf]) -> anyhow::Result<()> {
    for d in dirs {
        if let Ok(f) = std::fs::File::open(d) {
            // SAFETY: syncfs on a descriptor we own.
            unsafe { libc::syncfs(std::os::fd::AsRawFd::as_raw_fd(&f)) };
        }
    }
    std::fs::write("/proc/sys/vm/drop_caches", "3\n").map_err(|e| {
        anyhow::anyhow!("cannot drop the page cache (/proc/sys/vm/drop_caches): {e}; run as root")
    })
}

/// A load child that failed only with the error kinds its phase expects (`expect_failures`,
/// e.g. timeouts beside a `kill`): its result, marked `failures_expected`, else None.
fn expected_failures(e: &anyhow::Error, expected: &[toml::Spanned<String>]) -> Option<PhaseResult> {
    let c = e.downcast_ref::<ChildFailed>()?;
    let PhaseResult::Load(mut doc) = PhaseResult::of_failed_stdout("load", &c.stdout) else {
        return None;
    };
    let load = doc.load()?;
    let mut failures = load.roles.iter().flat_map(|r| &r.failures).peekable();
    let all_expected = failures.peek().is_some()
        && failures.all(|f| expected.iter().any(|x| *x.get_ref() == f.kind));
    // Never an acked message missing from the stream: that is data loss, not the fault.
    let lost_acked = doc
        .stream_check()
        .and_then(|sc| sc.missing())
        .is_some_and(|m| m > 0);
    if !all_expected || lost_acked {
        return None;
    }
    doc.failures_expected = true;
    Some(PhaseResult::Load(doc))
}

/// A child that exited with a failure. It may still have printed its result (a load whose
/// operations failed prints its JSON, then exits 1): the phase keeps it, so the run's
/// summary.json has the load's `failures`.
#[derive(Debug)]
pub struct ChildFailed {
    pub message: String,
    pub stdout: String,
}

impl std::fmt::Display for ChildFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ChildFailed {}

/// How long a check phase may take before it is killed and the phase fails.
const CHECK_TIMEOUT: Duration = Duration::from_secs(600);

/// Runs the check phase's `diskpulse check` child up to [`CHECK_TIMEOUT`] (it reads
/// attributes and writes a few MiB: minutes mean a device that does not answer).
fn check_child(
    exe: &Path,
    args: &[String],
) -> Result<collectors::exec::Finished, collectors::exec::ExecError> {
    let mut c = Command::new(exe);
    c.args(args);
    engines::lab::os::die_with_parent(&mut c);
    let limit = collectors::exec::Limit::new(
        CHECK_TIMEOUT,
        "the check phase (`diskpulse check`)",
        "is the volume's device answering? (`dmesg` may say why)",
    );
    collectors::exec::output_within(&mut c, &limit)
}

/// Runs a diskpulse subcommand as a child on the run's clock, as phase `phase`; returns
/// its stdout. When `stop` is set the child gets SIGINT, and SIGKILL after [`STOP_GRACE`].
#[allow(clippy::too_many_arguments)]
fn child(
    exe: &Path,
    args: &[String],
    run_dir: &Path,
    zero_ns: u64,
    phase: usize,
    cgroup: Option<&Path>,
    stop: &AtomicBool,
    beam_hook: Option<&engines::broker::OnNodeStart>,
) -> anyhow::Result<(i32, String)> {
    let mut c = Command::new(exe);
    // Waited for on this blocking thread, which lives as long as the child.
    engines::lab::os::die_with_parent(&mut c);
    let mut c = c
        .args(args)
        .env(collectors::clock::ENV_ZERO, zero_ns.to_string())
        .env("DISKPULSE_RUN_DIR", run_dir)
        .env(format::ENV_PHASE, phase.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot start {}: {e}", exe.display()))?;
    if let Some(cg) = cgroup {
        // Right after spawn: the child's first I/O (file setup) comes later than this.
        let _ = std::fs::write(cg.join("cgroup.procs"), c.id().to_string());
    }
    let mut out = c.stdout.take().expect("piped");
    let mut err = c.stderr.take().expect("piped");
    let t_out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut out, &mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut s);
        s
    });
    let mut signalled: Option<Instant> = None;
    // The RabbitMQ VMs the child starts (an AMQP load starts its own node): handed to
    // the hook once each, looked for every 200 ms while the child runs.
    let (mut beams, mut looked) = (Vec::<u32>::new(), None::<Instant>);
    let status = loop {
        if let Some(st) = c.try_wait()? {
            break st;
        }
        if let Some(hook) = beam_hook {
            if looked.is_none_or(|t| t.elapsed() >= Duration::from_millis(200)) {
                looked = Some(Instant::now());
                for pid in descendants_named(Path::new("/proc"), c.id(), "beam.smp") {
                    // The node's VM boots rabbit (`-s rabbit boot`); the short VMs it
                    // runs itself (`-sname epmd-starter-N ... -s erlang halt`) are not it.
                    let boots_rabbit = std::fs::read(format!("/proc/{pid}/cmdline"))
                        .is_ok_and(|c| c.windows(12).any(|w| w == b"rabbit\0boot\0"));
                    if boots_rabbit && !beams.contains(&pid) {
                        beams.push(pid);
                        hook("rabbitmq", pid);
                    }
                }
            }
        }
        match signalled {
            None if stop.load(Ordering::Relaxed) => {
                // SAFETY: our own child, not reaped yet.
                unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
                signalled = Some(Instant::now());
            }
            Some(t) if t.elapsed() >= STOP_GRACE => {
                let _ = c.kill();
            }
            _ => {}
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = t_out.join().unwrap_or_default();
    let stderr = t_err.join().unwrap_or_default();
    let code = status.code().unwrap_or(1);
    if code != 0 && code != 130 {
        let last = stderr
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .to_string();
        return Err(ChildFailed {
            message: format!(
                "`diskpulse {}` exited with {code}: {last}",
                format::redact::argv(args).join(" ")
            ),
            stdout,
        }
        .into());
    }
    Ok((code, stdout))
}

/// The processes under `proc` (a /proc) named `comm` that descend from `ancestor`.
pub(crate) fn descendants_named(proc: &Path, ancestor: u32, comm: &str) -> Vec<u32> {
    let Ok(rd) = std::fs::read_dir(proc) else {
        return vec![];
    };
    // pid -> (parent, name), from /proc/PID/stat: "PID (NAME) STATE PPID ...".
    let mut procs = std::collections::HashMap::new();
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let name = stat[open + 1..close].to_string();
        let ppid = stat[close + 1..]
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<u32>().ok())
            .unwrap_or(0);
        procs.insert(pid, (ppid, name));
    }
    let mut found: Vec<u32> = procs
        .iter()
        .filter(|(_, (_, name))| name == comm)
        .filter(|(pid, _)| {
            let mut p = **pid;
            for _ in 0..16 {
                match procs.get(&p) {
                    Some((pp, _)) if *pp == ancestor => return true,
                    Some((pp, _)) if *pp > 1 => p = *pp,
                    _ => return false,
                }
            }
            false
        })
        .map(|(pid, _)| *pid)
        .collect();
    found.sort_unstable();
    found
}

/// The nodes a restart/stop/start phase names (1-based), or all.
pub(crate) fn phase_nodes(p: &spec::PhaseDecl, n: usize) -> anyhow::Result<Vec<usize>> {
    match &p.nodes {
        None => Ok((1..=n).collect()),
        Some(toml::Value::String(s)) if s == "all" => Ok((1..=n).collect()),
        Some(toml::Value::Integer(i)) if *i >= 1 && (*i as usize) <= n => Ok(vec![*i as usize]),
        Some(toml::Value::Integer(i)) => anyhow::bail!("nodes: {i} is not a node number 1..{n}"),
        Some(toml::Value::Array(a)) => a
            .iter()
            .map(|v| match v {
                toml::Value::Integer(i) if *i >= 1 && (*i as usize) <= n => Ok(*i as usize),
                other => anyhow::bail!("nodes: {other} is not a node number 1..{n}"),
            })
            .collect(),
        Some(other) => anyhow::bail!("nodes = {other}: a node number, a list, or \"all\""),
    }
}

/// Waits until a server's /healthz (JetStream and its streams) answers 200.
async fn wait_healthy(monitor_url: &str, limit: Duration) -> Option<Duration> {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if monitor::get_doc::<format::monitor::Healthz>(
            monitor_url,
            "/healthz",
            Duration::from_secs(1),
        )
        .await
        .is_ok_and(|h| h.is_ok())
        {
            return Some(t0.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

/// The time a nats-server log line was written, on the run clock: its local wall-clock
/// stamp (`[pid] 2026/11/30 08:10:36.103968 [INF] ...`) minus the run's zero in wall time.
fn log_line_t_ns(line: &str, zero_wall: chrono::DateTime<chrono::Local>) -> Option<u64> {
    let rest = line.split_once("] ")?.1;
    let stamp: String = rest.chars().take(26).collect();
    let naive = chrono::NaiveDateTime::parse_from_str(&stamp, "%Y/%m/%d %H:%M:%S%.f").ok()?;
    let wall = naive.and_local_timezone(chrono::Local).single()?;
    let ns = (wall - zero_wall).num_nanoseconds()?;
    u64::try_from(ns).ok()
}

/// Lines a restarting nats-server logs about recovering its store, as events at the
/// time the server wrote them.
fn log_recovery_events(log: &Path, from_byte: u64, node: &str, events: &EventLog) {
    let Ok(text) = std::fs::read(log) else { return };
    let tail = String::from_utf8_lossy(&text[(from_byte as usize).min(text.len())..]).to_string();
    let clock = events.clock();
    let zero_wall = chrono::Local::now()
        - chrono::Duration::nanoseconds(clock.now_ns().min(i64::MAX as u64) as i64);
    for line in tail.lines() {
        let l = line.to_ascii_lowercase();
        if l.contains("recover") || l.contains("rebuild") || l.contains("restor") {
            let body = Body::BrokerLog(ev::BrokerLog {
                node: node.to_string(),
                line: line.chars().take(300).collect(),
            });
            match log_line_t_ns(line, zero_wall) {
                Some(t) => events.event_at(t, body),
                None => events.event(body),
            }
        }
    }
}

/// The broker nodes, shared by phases that run at the same time.
pub(super) type SharedCluster = tokio::sync::Mutex<Option<Cluster>>;

/// The scenario's embedded RabbitMQ node (`[broker] kind = "rabbitmq"`), shared likewise.
pub(super) type SharedRabbit = tokio::sync::Mutex<Option<RabbitNode>>;

/// What every phase of a run sees.
pub(super) struct PhaseCtx<'a> {
    pub dir: &'a Path,
    pub vols: &'a [(String, PathBuf, Option<Volume>)],
    pub cluster: &'a SharedCluster,
    pub rabbit: &'a SharedRabbit,
    pub events: &'a EventLog,
    pub zero_ns: u64,
    /// The diskpulse binary for the children.
    pub exe: &'a Path,
    /// Per node (n1 first): the cgroup of the throttled lab volume its store is on.
    pub node_cgroups: &'a [Option<PathBuf>],
    /// With a recording: called with each RabbitMQ VM (`beam.smp`) an AMQP load phase's
    /// child starts, so the run samples its `/proc/PID/io` and traces its sync calls.
    pub process_hook: Option<engines::broker::OnNodeStart>,
}

/// Sleeps `d` or until `stop`; returns how long it slept.
async fn sleep_unless(d: Duration, stop: &AtomicBool) -> Duration {
    let t0 = Instant::now();
    while t0.elapsed() < d && !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(20).min(d - t0.elapsed())).await;
    }
    t0.elapsed()
}

/// Runs phase `index` until it ends or `stop` is set; returns its result for meta.json.
pub(super) async fn run_phase(
    p: &spec::PhaseDecl,
    index: usize,
    cx: &PhaseCtx<'_>,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<PhaseResult> {
    let kind = p.kind.get_ref().as_str();
    let (dir, vols) = (cx.dir, cx.vols);
    let target = p.volume.as_ref().map(|v| v.get_ref().as_str());
    let cg = target.and_then(|t| vol_cgroup(vols, t));
    // An AMQP load starts a RabbitMQ node of its own: its VM is the broker's process.
    let amqp_load = kind == "load" && p.args.first().is_some_and(|m| m.starts_with("amqp-"));
    let run_child = |args: Vec<String>, cg: Option<PathBuf>| {
        let exe = cx.exe.to_path_buf();
        let dir = dir.to_path_buf();
        let stop = stop.clone();
        let zero_ns = cx.zero_ns;
        let hook = cx.process_hook.clone().filter(|_| amqp_load);
        async move {
            tokio::task::spawn_blocking(move || {
                child(
                    &exe,
                    &args,
                    &dir,
                    zero_ns,
                    index,
                    cg.as_deref(),
                    &stop,
                    hook.as_ref(),
                )
            })
            .await?
        }
    };
    match kind {
        "sleep" => {
            let d = parse_duration(p.duration.as_deref().unwrap_or("0s"))
                .map_err(anyhow::Error::msg)?;
            let slept = sleep_unless(d, &stop).await;
            Ok(PhaseResult::Slept {
                slept_s: slept.as_secs_f64(),
            })
        }
        "load" => {
            let mut args = vec!["load".to_string()];
            args.extend(p.args.iter().cloned());
            // An AMQP mode without --server starts its own RabbitMQ node inside the
            // scenario's recording (its log in the run directory, its data in the
            // phase's --store-dir or a fresh /var/tmp one); the [broker] is nats-server.
            let amqp = p.args.first().is_some_and(|m| m.starts_with("amqp-"));
            let has = |f: &str| {
                p.args
                    .iter()
                    .any(|a| a == f || a.starts_with(&format!("{f}=")))
            };
            // `volume = "NAME"` on an AMQP load: the node's store on that volume
            // (MOUNT/rabbitmq), as [broker] volumes hold the nats-servers' stores.
            // A `[broker] kind = "rabbitmq"`: the AMQP load goes to that node.
            if amqp && !has("--server") {
                if let Some(n) = cx.rabbit.lock().await.as_ref() {
                    args.push("--server".into());
                    args.push(n.amqp_url());
                }
            }
            let to_broker = args.iter().any(|a| a == "--server");
            if amqp && !to_broker && !has("--server") && !has("--store-dir") {
                if let Some((_, mount, _)) = target.and_then(|t| vols.iter().find(|v| v.0 == t)) {
                    let store = mount.join("rabbitmq");
                    std::fs::create_dir_all(&store)
                        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", store.display()))?;
                    args.push("--store-dir".into());
                    args.push(store.display().to_string());
                }
            }
            if !amqp && !p.args.iter().any(|a| a == "--server") {
                let urls = cx
                    .cluster
                    .lock()
                    .await
                    .as_ref()
                    .map(Cluster::client_urls)
                    .ok_or_else(|| {
                        anyhow::anyhow!("a load phase needs a [broker] (or --server in its args)")
                    })?;
                for u in urls {
                    args.push("--server".into());
                    args.push(u);
                }
            }
            args.extend(["--quiet".into(), "--json".into()]);
            match run_child(args, None).await {
                Ok((_, out)) => Ok(PhaseResult::of_stdout(kind, &out)),
                Err(e) => match expected_failures(&e, &p.expect_failures) {
                    Some(v) => Ok(v),
                    None => Err(e),
                },
            }
        }
        "probe" => {
            let mut args = vec!["probe".to_string()];
            if let Some(t) = target {
                args.push("--filename".into());
                args.push(
                    vol_dir(vols, t)?
                        .join(format!("diskpulse-probe-{index}.dat"))
                        .display()
                        .to_string(),
                );
            }
            args.extend(p.args.iter().cloned());
            args.extend(["--output-format".into(), "json".into()]);
            let (_, out) = run_child(args, cg).await?;
            std::fs::write(dir.join(format!("probe-{index}.json")), &out)?;
            Ok(PhaseResult::of_stdout(kind, &out))
        }
        "fsync" => {
            let mut args = vec!["fsync".to_string()];
            if let Some(t) = target {
                args.push("--dir".into());
                args.push(vol_dir(vols, t)?.display().to_string());
            }
            args.extend(p.args.iter().cloned());
            args.push("--json".into());
            let (_, out) = run_child(args, cg).await?;
            std::fs::write(dir.join(format!("fsync-{index}.json")), &out)?;
            Ok(PhaseResult::of_stdout(kind, &out))
        }
        "check" => {
            let mut args = vec!["check".to_string()];
            match target {
                Some(t) => args.push(vol_dir(vols, t)?.display().to_string()),
                None => {
                    for (_, d, _) in vols {
                        args.push(d.display().to_string());
                    }
                }
            }
            args.extend(p.args.iter().cloned());
            args.push("--json".into());
            // check exits 1 on FAIL findings: that is a finding, not a failed phase.
            let exe = cx.exe.to_path_buf();
            let out = tokio::task::spawn_blocking(move || check_child(&exe, &args)).await??;
            let text = String::from_utf8_lossy(&out.stdout).to_string();
            std::fs::write(dir.join("check.json"), &text)?;
            Ok(PhaseResult::of_stdout(kind, &text))
        }
        "restart" | "stop" | "start" | "kill" => node_phase(p, kind, cx, &stop).await,
        other => anyhow::bail!("unknown phase kind {other}"),
    }
}

/// A node phase's result that names its nodes (stopped, killed, or the run ended while
/// they were down: `interrupted`).
fn named(names: Vec<String>, interrupted: bool) -> PhaseResult {
    PhaseResult::Nodes(NodesResult {
        interrupted,
        nodes: names.into_iter().map(NodeOutcome::Name).collect(),
    })
}

/// `restart`, `stop`, `start` and `kill`: the cluster is locked only while nodes stop,
/// die or start, so loads running beside keep their URLs and other node phases wait
/// only for that.
async fn node_phase(
    p: &spec::PhaseDecl,
    kind: &str,
    cx: &PhaseCtx<'_>,
    stop: &AtomicBool,
) -> anyhow::Result<PhaseResult> {
    let events = cx.events;
    if cx.rabbit.lock().await.is_some() {
        return rabbit_node_phase(p, kind, cx, stop).await;
    }
    let no_broker = || anyhow::anyhow!("a {kind} phase needs a [broker]");
    let (nodes, names) = {
        let g = cx.cluster.lock().await;
        let c = g.as_ref().ok_or_else(no_broker)?;
        let nodes = phase_nodes(p, c.size())?;
        let names: Vec<String> = nodes
            .iter()
            .map(|&n| c.node(n).name().to_string())
            .collect();
        (nodes, names)
    };
    match kind {
        "restart" | "stop" => {
            let mut g = cx.cluster.lock().await;
            let c = g.as_mut().ok_or_else(no_broker)?;
            for (&n, name) in nodes.iter().zip(&names) {
                events.event(Body::NodeStop(ev::NodeStop { node: name.clone() }));
                c.stop_node(n).await?;
            }
        }
        "kill" => {
            let mut g = cx.cluster.lock().await;
            let c = g.as_mut().ok_or_else(no_broker)?;
            for (&n, name) in nodes.iter().zip(&names) {
                events.event(Body::NodeKill(ev::NodeKill {
                    node: name.clone(),
                    pid: c.node(n).pid(),
                }));
                c.kill_node(n)?;
            }
        }
        _ => {}
    }
    if kind == "stop" || (kind == "kill" && p.down_for.is_none()) {
        return Ok(named(names, false));
    }
    if kind == "restart" && p.drop_caches {
        let stores: Vec<PathBuf> = {
            let g = cx.cluster.lock().await;
            let c = g.as_ref().ok_or_else(no_broker)?;
            nodes
                .iter()
                .map(|&n| c.node(n).store_dir().to_path_buf())
                .collect()
        };
        let t0 = Instant::now();
        tokio::task::spawn_blocking(move || sysctl_drop_caches(&stores)).await??;
        events.event(Body::DropCaches(ev::DropCaches {
            ms: t0.elapsed().as_secs_f64() * 1e3,
        }));
    }
    if kind != "start" {
        if let Some(d) = &p.down_for {
            let d = parse_duration(d).map_err(anyhow::Error::msg)?;
            if sleep_unless(d, stop).await < d {
                // Stopped while the nodes were down: the run is ending, the session stops
                // the rest.
                return Ok(named(names, true));
            }
        }
    }
    let mut logs = vec![];
    let (t0, current, monitors) = {
        let mut g = cx.cluster.lock().await;
        let c = g.as_mut().ok_or_else(no_broker)?;
        for (&n, name) in nodes.iter().zip(&names) {
            let log = c.node(n).log_path().to_path_buf();
            let log_len = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
            events.event(Body::Restart(ev::Restart {
                node: name.clone(),
                drop_caches: p.drop_caches,
                after: kind.to_string(),
            }));
            logs.push((name.clone(), log, log_len));
        }
        let t0 = Instant::now();
        c.start_nodes(&nodes).await?;
        // A throttled volume limits the started process too, as it did the first (from
        // the moment it answers: its recovery reads before that are not throttled).
        for &n in &nodes {
            if let Some(Some(cg)) = cx.node_cgroups.get(n - 1) {
                let _ = std::fs::write(cg.join("cgroup.procs"), c.node(n).pid().to_string());
            }
        }
        let monitors: Vec<String> = nodes.iter().map(|&n| c.node(n).monitor_url()).collect();
        (t0, t0.elapsed(), monitors)
    };
    let mut res = vec![];
    for ((name, log, log_len), url) in logs.into_iter().zip(monitors) {
        let healthy = wait_healthy(&url, Duration::from_secs(120)).await;
        let healthy_ms = healthy.map(|_| t0.elapsed().as_secs_f64() * 1e3);
        events.event(Body::RestartReady(ev::RestartReady {
            node: name.clone(),
            current_ms: current.as_secs_f64() * 1e3,
            healthy_ms,
        }));
        log_recovery_events(&log, log_len, &name, events);
        res.push(NodeOutcome::Started(NodeStarted {
            current_ms: current.as_secs_f64() * 1e3,
            healthy_ms,
            node: name,
        }));
    }
    Ok(PhaseResult::Nodes(NodesResult {
        interrupted: false,
        nodes: res,
    }))
}

/// `restart`, `stop`, `start` and `kill` on the scenario's RabbitMQ node: the same events
/// as for nats-server nodes (`node_stop`, `node_kill`, `restart`, `restart_ready`, each
/// with the node's name), so the report's faults and restart sections read them alike.
/// The node is ready when it logged its boot complete (`RabbitNode::start_again`), so
/// `healthy_ms` is `current_ms`.
async fn rabbit_node_phase(
    p: &spec::PhaseDecl,
    kind: &str,
    cx: &PhaseCtx<'_>,
    stop: &AtomicBool,
) -> anyhow::Result<PhaseResult> {
    let events = cx.events;
    let gone = || anyhow::anyhow!("a {kind} phase: the RabbitMQ node is gone");
    let (name, store) = {
        let g = cx.rabbit.lock().await;
        let n = g.as_ref().ok_or_else(gone)?;
        phase_nodes(p, 1)?;
        (n.name().to_string(), n.store_dir().to_path_buf())
    };
    match kind {
        "restart" | "stop" => {
            let mut g = cx.rabbit.lock().await;
            let n = g.as_mut().ok_or_else(gone)?;
            events.event(Body::NodeStop(ev::NodeStop { node: name.clone() }));
            n.stop().await?;
        }
        "kill" => {
            let mut g = cx.rabbit.lock().await;
            let n = g.as_mut().ok_or_else(gone)?;
            events.event(Body::NodeKill(ev::NodeKill {
                node: name.clone(),
                pid: n.pid(),
            }));
            n.kill();
        }
        _ => {}
    }
    let names = vec![name.clone()];
    if kind == "stop" || (kind == "kill" && p.down_for.is_none()) {
        return Ok(named(names, false));
    }
    if kind == "restart" && p.drop_caches {
        let t0 = Instant::now();
        let stores = vec![store];
        tokio::task::spawn_blocking(move || sysctl_drop_caches(&stores)).await??;
        events.event(Body::DropCaches(ev::DropCaches {
            ms: t0.elapsed().as_secs_f64() * 1e3,
        }));
    }
    if kind != "start" {
        if let Some(d) = &p.down_for {
            let d = parse_duration(d).map_err(anyhow::Error::msg)?;
            if sleep_unless(d, stop).await < d {
                return Ok(named(names, true));
            }
        }
    }
    let mut g = cx.rabbit.lock().await;
    let n = g.as_mut().ok_or_else(gone)?;
    events.event(Body::Restart(ev::Restart {
        node: name.clone(),
        drop_caches: p.drop_caches,
        after: kind.to_string(),
    }));
    let t0 = Instant::now();
    n.start_again().await?;
    let current_ms = t0.elapsed().as_secs_f64() * 1e3;
    // The new VM: throttled as the first was, its /proc/PID/io sampled and its sync
    // calls traced as the broker's.
    if let Some(Some(cg)) = cx.node_cgroups.first() {
        let _ = std::fs::write(cg.join("cgroup.procs"), n.pid().to_string());
    }
    if let Some(h) = &cx.process_hook {
        h(&name, n.pid());
    }
    events.event(Body::RestartReady(ev::RestartReady {
        node: name.clone(),
        current_ms,
        healthy_ms: Some(current_ms),
    }));
    Ok(PhaseResult::Nodes(NodesResult {
        interrupted: false,
        nodes: vec![NodeOutcome::Started(NodeStarted {
            current_ms,
            healthy_ms: Some(current_ms),
            node: name,
        })],
    }))
}
