//! A scenario's phases: `sleep`, `load`, `probe`, `fsync` and `check` (diskpulse
//! subcommands run as children on the run's clock), and `restart`, `stop`, `start` of
//! broker nodes (with the time to current and healthy, and the store recovery lines of
//! the server's log as events).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::run::{vol_cgroup, vol_dir, StudyOptions};
use super::spec;
use crate::broker::{monitor, Cluster};
use crate::cli::parse_duration;
use crate::lab::Volume;
use crate::recording::EventLog;

pub(super) fn phase_label(p: &spec::PhaseDecl) -> String {
    p.name.clone().unwrap_or_else(|| {
        let k = p.kind.get_ref();
        match p.args.first() {
            Some(a) if k == "load" => format!("load {a}"),
            _ => k.clone(),
        }
    })
}

fn sysctl_drop_caches() -> anyhow::Result<()> {
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3\n").map_err(|e| {
        anyhow::anyhow!("cannot drop the page cache (/proc/sys/vm/drop_caches): {e}; run as root")
    })
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

/// Runs a diskpulse subcommand as a child on the run's clock; returns its stdout.
fn child(
    exe: &Path,
    args: &[String],
    run_dir: &Path,
    zero_ns: u64,
    cgroup: Option<&Path>,
    stop: &AtomicBool,
) -> anyhow::Result<(i32, String)> {
    let mut c = Command::new(exe)
        .args(args)
        .env(collectors::clock::ENV_ZERO, zero_ns.to_string())
        .env("DISKPULSE_RUN_DIR", run_dir)
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
    let mut signalled = false;
    let status = loop {
        if let Some(st) = c.try_wait()? {
            break st;
        }
        if stop.load(Ordering::Relaxed) && !signalled {
            // SAFETY: our own child.
            unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
            signalled = true;
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
            message: format!("`diskpulse {}` exited with {code}: {last}", args.join(" ")),
            stdout,
        }
        .into());
    }
    Ok((code, stdout))
}

/// The nodes a restart/stop/start phase names (1-based), or all.
fn phase_nodes(p: &spec::PhaseDecl, n: usize) -> anyhow::Result<Vec<usize>> {
    match &p.nodes {
        None => Ok((1..=n).collect()),
        Some(toml::Value::String(s)) if s == "all" => Ok((1..=n).collect()),
        Some(toml::Value::Integer(i)) => Ok(vec![*i as usize]),
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
        if monitor::get_json(monitor_url, "/healthz", Duration::from_secs(1))
            .await
            .ok()
            .is_some_and(|v| v["status"] == "ok")
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
            let detail = json!({"node": node, "line": line.chars().take(300).collect::<String>()});
            match log_line_t_ns(line, zero_wall) {
                Some(t) => events.event_at(t, "broker_log", detail),
                None => events.event("broker_log", detail),
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) async fn run_phase(
    p: &spec::PhaseDecl,
    index: usize,
    kind: &str,
    dir: &Path,
    vols: &[(String, PathBuf, Option<Volume>)],
    cluster: Option<&mut Cluster>,
    events: &EventLog,
    zero_ns: u64,
    o: &StudyOptions,
) -> anyhow::Result<Value> {
    let target = p.volume.as_ref().map(|v| v.get_ref().as_str());
    let cg = target.and_then(|t| vol_cgroup(vols, t));
    let run_child = |args: Vec<String>, cg: Option<PathBuf>| {
        let exe = o.exe.clone();
        let dir = dir.to_path_buf();
        let stop = o.stop.clone();
        async move {
            tokio::task::spawn_blocking(move || {
                child(&exe, &args, &dir, zero_ns, cg.as_deref(), &stop)
            })
            .await?
        }
    };
    let json_or_text =
        |s: &str| serde_json::from_str::<Value>(s).unwrap_or_else(|_| Value::String(s.to_string()));
    match kind {
        "sleep" => {
            let d = parse_duration(p.duration.as_deref().unwrap_or("0s"))
                .map_err(anyhow::Error::msg)?;
            let t0 = Instant::now();
            while t0.elapsed() < d && !o.stop.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(50).min(d)).await;
            }
            Ok(json!({"slept_s": t0.elapsed().as_secs_f64()}))
        }
        "load" => {
            let c = cluster.ok_or_else(|| {
                anyhow::anyhow!("a load phase needs a [broker] (or --server in its args)")
            });
            let mut args = vec!["load".to_string()];
            args.extend(p.args.iter().cloned());
            if !p.args.iter().any(|a| a == "--server") {
                for u in c?.client_urls() {
                    args.push("--server".into());
                    args.push(u);
                }
            }
            args.extend(["--quiet".into(), "--json".into()]);
            let (_, out) = run_child(args, None).await?;
            Ok(json_or_text(&out))
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
            Ok(json_or_text(&out))
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
            Ok(json_or_text(&out))
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
            let exe = o.exe.clone();
            let out = tokio::task::spawn_blocking(move || {
                Command::new(&exe)
                    .args(&args)
                    .stderr(Stdio::null())
                    .output()
            })
            .await??;
            let text = String::from_utf8_lossy(&out.stdout).to_string();
            std::fs::write(dir.join("check.json"), &text)?;
            Ok(json_or_text(&text))
        }
        "restart" | "stop" | "start" => {
            let c = cluster.ok_or_else(|| anyhow::anyhow!("a {kind} phase needs a [broker]"))?;
            let nodes = phase_nodes(p, c.size())?;
            let mut res = vec![];
            if kind != "start" {
                for &n in &nodes {
                    events.event("node_stop", json!({"node": c.node(n).name()}));
                    c.stop_node(n).await?;
                }
            }
            if kind == "restart" {
                if p.drop_caches {
                    sysctl_drop_caches()?;
                    events.event("drop_caches", json!({}));
                }
                if let Some(d) = &p.down_for {
                    tokio::time::sleep(parse_duration(d).map_err(anyhow::Error::msg)?).await;
                }
            }
            if kind != "stop" {
                let mut logs = vec![];
                for &n in &nodes {
                    let name = c.node(n).name().to_string();
                    let log = c.node(n).log_path().to_path_buf();
                    let log_len = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
                    events.event(
                        "restart",
                        json!({"node": name, "drop_caches": p.drop_caches}),
                    );
                    logs.push((n, name, log, log_len));
                }
                let t0 = Instant::now();
                c.start_nodes(&nodes).await?;
                let current = t0.elapsed();
                for (n, name, log, log_len) in logs {
                    let healthy =
                        wait_healthy(&c.node(n).monitor_url(), Duration::from_secs(120)).await;
                    let healthy_ms = healthy.map(|_| t0.elapsed().as_secs_f64() * 1e3);
                    events.event(
                        "restart_ready",
                        json!({"node": name, "current_ms": current.as_secs_f64() * 1e3, "healthy_ms": healthy_ms}),
                    );
                    log_recovery_events(&log, log_len, &name, events);
                    res.push(json!({"node": name, "current_ms": current.as_secs_f64() * 1e3, "healthy_ms": healthy_ms}));
                }
            }
            Ok(json!({"nodes": res}))
        }
        other => anyhow::bail!("unknown phase kind {other}"),
    }
}
