//! A scenario with `[broker] kind = "rabbitmq"` (issue 14): one embedded RabbitMQ node
//! with its store on the scenario's volume, an `amqp-pub --rate` load with confirms to a
//! quorum queue pointed at it (`--server` filled in by the run), and a `restart` phase in
//! the middle of the load. The run ends ok; events.jsonl has node_stop / restart /
//! restart_ready with the node's name and the AMQP clients' reconnect; summary.json has
//! the fault; every publish is confirmed or counted lost; no beam.smp or epmd of the run
//! is left. Also: what does not apply to RabbitMQ is refused with FILE:LINE:COLUMN and
//! exit 2, nothing written.
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one story, from what it sets up to its last assertion"
)]

mod common;
use common::*;

use std::time::{Duration, Instant};

fn events(run: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(run.join("events.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn of_kind<'a>(ev: &'a [serde_json::Value], kind: &str) -> Vec<&'a serde_json::Value> {
    ev.iter().filter(|e| e["kind"] == kind).collect()
}

/// Whether a process whose command line contains `marker` runs.
fn process_named(marker: &str) -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let c = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        String::from_utf8_lossy(&c)
            .replace('\0', " ")
            .contains(marker)
            .then_some(pid)
    })
}

fn gone_within(pid: u32, secs: u64) -> bool {
    let t0 = Instant::now();
    while process_exists(pid) && t0.elapsed() < Duration::from_secs(secs) {
        std::thread::sleep(Duration::from_millis(50));
    }
    !process_exists(pid)
}

#[test]
fn a_rabbitmq_broker_restarted_under_an_amqp_load_ends_ok_with_the_fault_and_the_counts() {
    if !have_rabbitmq() {
        return;
    }
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    let vol = d.path().join("vol");
    let sc = d.path().join("rr.toml");
    std::fs::write(
        &sc,
        format!(
            r#"name = "rabbit-restart"
[[volumes]]
name = "store"
path = "{}"
create = true
[broker]
kind = "rabbitmq"
volumes = ["store"]
[[phases]]
kind = "load"
name = "load"
args = ["amqp-pub", "--rate", "200", "--msgs", "1200", "--window", "64", "--queue-type", "quorum", "--queue", "rr", "--size", "1k"]
expect_failures = ["lost_unconfirmed"]
[[phases]]
kind = "restart"
name = "restart"
with = "load"
at = "2s"
"#,
            vol.display()
        ),
    )
    .unwrap();
    let out = d.path().join("study");
    // Cut into chunks of a second: the node's rabbitmq_metrics.csv with the rest.
    let o = diskpulse()
        .args(["run"])
        .arg(&sc)
        .args(["--chunk", "1s", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "{stderr}");
    let run = out.join("cells/base/r1");
    let ev = events(&run);

    // The node's events, with its name: stopped, started again, ready.
    for k in ["node_stop", "restart", "restart_ready"] {
        let e = of_kind(&ev, k);
        assert_eq!(e.len(), 1, "{k}: {e:?}");
        assert_eq!(e[0]["detail"]["node"], "n1", "{k}: {e:?}");
    }
    let ready = of_kind(&ev, "restart_ready")[0];
    let current = ready["detail"]["current_ms"].as_f64().unwrap();
    assert!(current > 0.0 && current < 60_000.0, "{ready}");
    // The AMQP client saw the outage and came back.
    assert!(
        !of_kind(&ev, "amqp_disconnected").is_empty(),
        "no amqp_disconnected in {}",
        run.display()
    );
    assert!(
        !of_kind(&ev, "amqp_reconnected").is_empty(),
        "no amqp_reconnected in {}",
        run.display()
    );
    // Two VMs (the first and the restarted one), each with its epmd; the restarted one
    // watched as the broker's process (its /proc/PID/io sampled, traced with --trace).
    let starts = of_kind(&ev, "broker_start");
    assert_eq!(starts.len(), 2, "broker_start: {starts:?}");
    let pids: Vec<u32> = starts
        .iter()
        .flat_map(|e| [&e["detail"]["pid"], &e["detail"]["epmd_pid"]])
        .filter_map(|p| p.as_u64().map(|p| p as u32))
        .collect();
    assert_eq!(pids.len(), 4, "{starts:?}");
    let watched: Vec<u32> = of_kind(&ev, "process_watched")
        .iter()
        .filter(|e| e["detail"]["name"] == "n1")
        .filter_map(|e| e["detail"]["pid"].as_u64().map(|p| p as u32))
        .collect();
    assert_eq!(watched, [pids[2]], "process_watched n1 vs {starts:?}");
    // Both VMs' /proc/PID/io sampled; each wrote (the quorum queue's WAL and segments).
    let (procs, _) = diskpulse::format::proc_io::read_noted(&run).unwrap();
    let procs = procs.expect("proc_io.csv");
    for vm in [pids[0], pids[2]] {
        let p = procs
            .iter()
            .find(|p| p.pid == vm)
            .unwrap_or_else(|| panic!("pid {vm} not in proc_io.csv"));
        let w = p.rows.last().unwrap().write_bytes() - p.rows[0].write_bytes();
        assert!(w > 0, "beam.smp {vm} wrote nothing: {} rows", p.rows.len());
    }

    // The load went to the scenario's node (no node of its own), its store on the volume.
    let meta = read_json(&run.join("meta.json"));
    assert_eq!(meta["broker"]["kind"], "rabbitmq", "{}", meta["broker"]);
    assert_eq!(meta["broker"]["starts"], 2, "{}", meta["broker"]);
    let store = meta["broker"]["store_dir"].as_str().unwrap();
    assert!(
        store.starts_with(&vol.display().to_string()),
        "store {store} not on the volume {}",
        vol.display()
    );
    assert!(vol.join("rabbitmq/n1").is_dir());
    assert!(run.join("rabbitmq_metrics.csv").is_file());
    // Chunked as the recording is, and read back as one: every row of every chunk once,
    // in order, across the restart.
    let m = &meta["chunks"]["files"]["rabbitmq_metrics.csv"];
    let closed = m["closed"]
        .as_array()
        .unwrap_or_else(|| panic!("no rabbitmq_metrics.csv chunks: {}", meta["chunks"]));
    // Two before the restart and one after at least (a loaded machine's restart took 16 s
    // and left three: 11-12.8 s, then 29 s).
    assert!(closed.len() >= 3, "{m}");
    let rows: u64 = closed.iter().map(|c| c["rows"].as_u64().unwrap()).sum();
    let by = diskpulse::format::monitor::read(&run, "rabbitmq_metrics.csv").unwrap();
    let t = &by.values().next().expect("rows of the node").t_ns;
    assert_eq!(by.len(), 1, "{:?}", by.keys());
    assert_eq!(t.len() as u64, rows, "rows read vs chunks' rows: {m}");
    assert!(t.windows(2).all(|w| w[1] > w[0]), "rows out of order");
    let url = meta["broker"]["client_url"].as_str().unwrap();
    let load = meta["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["kind"] == "load")
        .unwrap();
    let args: Vec<&str> = load["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    assert!(!args.contains(&"--store-dir"), "{args:?}");
    let _ = url;

    // Every publish is confirmed or counted lost, nothing else.
    let clients = load["result"]["clients"]
        .as_array()
        .unwrap_or_else(|| panic!("load result: {load}"));
    let confirmed: u64 = clients.iter().filter_map(|c| c["ops"].as_u64()).sum();
    let lost: u64 = clients
        .iter()
        .filter_map(|c| c["errors_by_kind"]["lost_unconfirmed"].as_u64())
        .sum();
    for c in clients {
        for (k, _) in c["errors_by_kind"].as_object().into_iter().flatten() {
            assert_eq!(k, "lost_unconfirmed", "{c}");
        }
    }
    assert_eq!(
        confirmed + lost,
        1200,
        "confirmed {confirmed} + lost {lost}"
    );
    assert!(confirmed >= 600, "only {confirmed} confirmed");

    // summary.json has the fault, caused by the node's stop.
    let summary = read_json(&run.join("summary.json"));
    let faults = summary["faults"].as_array().expect("summary.json faults[]");
    assert_eq!(faults.len(), 1, "{faults:?}");
    assert_eq!(faults[0]["cause"], "node_stop", "{faults:?}");
    eprintln!(
        "restart: current {current:.0} ms; confirmed {confirmed}, lost_unconfirmed {lost}; fault {}",
        faults[0]
    );

    // Nothing of the node left: both VMs, the last epmd, and nothing with its node name.
    for p in pids {
        assert!(gone_within(p, 10), "beam.smp or epmd {p} still runs");
    }
    let node = meta["broker"]["node"].as_str().unwrap();
    assert_eq!(process_named(node), None, "a process of node {node} runs");
}

fn dry(text: &str) -> (i32, String) {
    let d = tempfile::tempdir().unwrap();
    let sc = d.path().join("bad.toml");
    std::fs::write(&sc, text).unwrap();
    let out = d.path().join("out");
    let o = diskpulse()
        .args(["run"])
        .arg(&sc)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(!out.exists(), "{} was written", out.display());
    let e = String::from_utf8_lossy(&o.stderr).replace(&sc.display().to_string(), "FILE");
    (o.status.code().unwrap_or(-1), e)
}

#[test]
fn what_does_not_apply_to_a_rabbitmq_broker_is_refused_with_its_place() {
    let head = "name = \"x\"\n[[volumes]]\nname = \"v\"\npath = \"/var/tmp\"\n[broker]\nkind = \"rabbitmq\"\nvolumes = [\"v\"]\n";
    let load = "[[phases]]\nkind = \"load\"\nargs = [\"amqp-pub\", \"--msgs\", \"10\"]\n";
    let cases = [
        (
            format!("{head}nodes = \"3\"\n{load}"),
            "FILE:8:9:",
            "nodes '3': the embedded RabbitMQ is one node",
        ),
        (
            format!("{head}nats_server = \"/usr/bin/nats-server\"\n{load}"),
            "FILE:8:15:",
            "nats_server is for kind = \"nats\"",
        ),
        (
            format!("{head}sync = \"always\"\n{load}"),
            "FILE:8:8:",
            "sync is nats-server's",
        ),
        (
            head.replace("\"rabbitmq\"", "\"rabit\"") + load,
            "FILE:6:8:",
            "broker kind 'rabit'",
        ),
        (
            format!("{head}[[phases]]\nkind = \"load\"\nargs = [\"js-pub\", \"--msgs\", \"10\"]\n"),
            "FILE:",
            "'js-pub' is a NATS load mode",
        ),
        (
            format!("{head}{load}[[phases]]\nkind = \"kill\"\nnodes = [2]\n"),
            "FILE:12:8:",
            "a 'kill' phase names nodes [2]",
        ),
    ];
    for (text, place, msg) in cases {
        let (code, e) = dry(&text);
        assert_eq!(code, 2, "{text}\n{e}");
        assert!(e.contains(place) && e.contains(msg), "{place} {msg}:\n{e}");
    }
}

/// `kill` with `down_for`: SIGKILL (no clean stop), the node started again 1 s later with
/// what its store holds; the fault is the kill, every publish is confirmed or counted
/// lost, and neither VM nor epmd is left.
#[test]
fn a_killed_rabbitmq_broker_comes_back_under_the_load_and_nothing_is_left() {
    if !have_rabbitmq() {
        return;
    }
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    let vol = d.path().join("vol");
    let sc = d.path().join("rk.toml");
    std::fs::write(
        &sc,
        format!(
            r#"name = "rabbit-kill"
[[volumes]]
name = "store"
path = "{}"
create = true
[broker]
kind = "rabbitmq"
volumes = ["store"]
[[phases]]
kind = "load"
name = "load"
args = ["amqp-pub", "--rate", "200", "--msgs", "1000", "--window", "64", "--queue-type", "quorum", "--queue", "rk", "--size", "1k"]
expect_failures = ["lost_unconfirmed"]
[[phases]]
kind = "kill"
nodes = 1
with = "load"
at = "2s"
down_for = "1s"
"#,
            vol.display()
        ),
    )
    .unwrap();
    let out = d.path().join("study");
    let o = diskpulse()
        .args(["run"])
        .arg(&sc)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "{stderr}");
    let run = out.join("cells/base/r1");
    let ev = events(&run);
    let starts = of_kind(&ev, "broker_start");
    assert_eq!(starts.len(), 2, "broker_start: {starts:?}");
    let kill = of_kind(&ev, "node_kill");
    assert_eq!(kill.len(), 1, "{kill:?}");
    assert_eq!(kill[0]["detail"]["node"], "n1");
    // The pid killed is the first VM's.
    assert_eq!(kill[0]["detail"]["pid"], starts[0]["detail"]["pid"]);
    assert!(of_kind(&ev, "node_stop").is_empty());
    for k in ["restart", "restart_ready", "amqp_reconnected"] {
        assert!(!of_kind(&ev, k).is_empty(), "no {k} in {}", run.display());
    }
    let meta = read_json(&run.join("meta.json"));
    let load = meta["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["kind"] == "load")
        .unwrap();
    let clients = load["result"]["clients"].as_array().unwrap();
    let confirmed: u64 = clients.iter().filter_map(|c| c["ops"].as_u64()).sum();
    let lost: u64 = clients
        .iter()
        .filter_map(|c| c["errors_by_kind"]["lost_unconfirmed"].as_u64())
        .sum();
    assert_eq!(
        confirmed + lost,
        1000,
        "confirmed {confirmed} + lost {lost}"
    );
    let summary = read_json(&run.join("summary.json"));
    let faults = summary["faults"].as_array().expect("summary.json faults[]");
    assert_eq!(faults.len(), 1, "{faults:?}");
    assert_eq!(faults[0]["cause"], "node_kill", "{faults:?}");
    eprintln!(
        "kill: confirmed {confirmed}, lost_unconfirmed {lost}; restart_ready {}; fault {}",
        of_kind(&ev, "restart_ready")[0]["detail"],
        faults[0]
    );
    for e in starts {
        for k in ["pid", "epmd_pid"] {
            let p = e["detail"][k].as_u64().unwrap() as u32;
            assert!(gone_within(p, 10), "{k} {p} still runs");
        }
    }
}
