//! The AMQP modes against a real RabbitMQ node (Debian's rabbitmq-server, installed by
//! scripts/setup): what is published with confirms is consumed exactly once, every call
//! gets exactly one reply, every cast arrives; the node and its epmd are gone afterwards
//! (checked by their pids and the node name, never by killing anyone's processes); a
//! wrong `--server amqp://` fails with one clear line and no secret in it.
//!
//! In-process runs start a [`RabbitNode`] per test; CLI runs start the `diskpulse`
//! binary, which starts its own node.

mod common;
use common::*;

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use collectors::clock::Clock;
use diskpulse::broker::{BrokerProcess, RabbitNode, RabbitOptions};
use diskpulse::load::record::{ClientTotals, Role};
use diskpulse::load::{self, LoadEnv};
use diskpulse::recording::EventLog;

/// A RabbitMQ node for one test (stopped by `stop`, or killed on drop).
struct Node {
    node: RabbitNode,
    dir: tempfile::TempDir,
}

impl Node {
    async fn start(name: &str) -> Option<Node> {
        if !have_rabbitmq() {
            return None;
        }
        Some(Node::start_in(name, tempfile::tempdir().unwrap()).await)
    }

    async fn start_in(name: &str, dir: tempfile::TempDir) -> Node {
        let mut o = RabbitOptions::new(dir.path().join("store"), dir.path().join("run"));
        o.name = name.into();
        let node = RabbitNode::start(o, &EventLog::disabled(Clock::start()))
            .await
            .unwrap();
        Node { node, dir }
    }
}

async fn run(url: &str, argv: &[&str]) -> Vec<ClientTotals> {
    let a = load::args_from(argv.iter().copied()).unwrap();
    a.validate().unwrap();
    let env = LoadEnv {
        clock: Clock::start(),
        events: EventLog::disabled(Clock::start()),
        stop: Arc::new(AtomicBool::new(false)),
        servers: vec![url.to_string()],
        load_csv: None,
    };
    load::run(&a, &env).await.unwrap().clients
}

fn ops(clients: &[ClientTotals], role: Role) -> u64 {
    clients
        .iter()
        .filter(|c| c.role == role)
        .map(|c| c.ops)
        .sum()
}

fn errors(clients: &[ClientTotals]) -> Vec<String> {
    clients
        .iter()
        .filter(|c| c.errors > 0)
        .map(|c| format!("{:?}[{}]: {:?}", c.role, c.index, c.errors_by_kind))
        .collect()
}

/// Whether a process whose command line contains `marker` runs (the node's name is ours
/// alone: `dp-<name>-<pid>@localhost`).
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

/// Waits up to `secs` for a process to be gone (a killed child of init is reaped soon).
fn gone_within(pid: u32, secs: u64) -> bool {
    let t0 = Instant::now();
    while process_exists(pid) && t0.elapsed() < Duration::from_secs(secs) {
        std::thread::sleep(Duration::from_millis(50));
    }
    !process_exists(pid)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistent_messages_published_with_confirms_to_a_quorum_queue_are_consumed_exactly_once() {
    let Some(mut n) = Node::start("quorum").await else {
        return;
    };
    let url = n.node.amqp_url();
    let published = run(
        &url,
        &[
            "amqp-pub",
            "--msgs",
            "3000",
            "--clients",
            "2",
            "--queue-type",
            "quorum",
            "--queue",
            "q1",
            "--quiet",
        ],
    )
    .await;
    assert_eq!(errors(&published), Vec::<String>::new());
    assert_eq!(
        ops(&published, Role::AmqpPub),
        3000,
        "every publish confirmed"
    );
    // A consumer alone drains the queue: exactly what was confirmed, nothing twice.
    let consumed = run(
        &url,
        &[
            "amqp-consume",
            "--clients",
            "2",
            "--queue-type",
            "quorum",
            "--queue",
            "q1",
            "--quiet",
        ],
    )
    .await;
    assert_eq!(errors(&consumed), Vec::<String>::new());
    assert_eq!(ops(&consumed, Role::AmqpConsume), 3000);
    // The quorum WAL is in the store directory we gave it.
    let store = n.node.store_dir().to_path_buf();
    let wal = walk(&store).into_iter().any(|p| {
        p.to_string_lossy().contains("quorum") && p.extension().is_some_and(|e| e == "wal")
    });
    assert!(wal, "no quorum WAL file under {}", store.display());

    // Stopped: the VM, its epmd and anything naming the node are gone.
    let (pid, epmd, node) = (n.node.pid(), n.node.epmd_pid(), n.node.node().to_string());
    n.node.stop().await.unwrap();
    assert!(gone_within(pid, 5), "beam.smp pid {pid} still runs");
    assert!(gone_within(epmd, 5), "our epmd pid {epmd} still runs");
    assert_eq!(process_named(&node), None, "a process still names {node}");
    assert!(!n.dir.path().join("store/diskpulse-rabbitmq.pids").exists());
}

/// With `--rate` the publisher sleeps between publishes; a confirm is timed when it
/// arrives, not when the loop next looks (which was once the window was full: 256
/// unconfirmed at 200 msgs/s made every confirm ~1.3 s "late").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paced_publisher_times_each_confirm_when_it_arrives() {
    let Some(mut n) = Node::start("paced").await else {
        return;
    };
    let url = n.node.amqp_url();
    let published = run(
        &url,
        &[
            "amqp-pub", "--msgs", "600", "--rate", "200", "--window", "256", "--queue", "paced",
            "--quiet",
        ],
    )
    .await;
    assert_eq!(errors(&published), Vec::<String>::new());
    assert_eq!(ops(&published, Role::AmqpPub), 600);
    let p50_ms: Vec<f64> = published
        .iter()
        .filter(|c| c.role == Role::AmqpPub)
        .map(|c| c.lat.value_at_quantile(0.5) as f64 / 1e6)
        .collect();
    // 256 / 200 msgs/s = 1280 ms if timed when the window fills; a confirm on loopback
    // takes a few ms.
    assert!(
        p50_ms.iter().all(|&p| p < 200.0),
        "confirm p50 {p50_ms:?} ms"
    );
    n.node.stop().await.unwrap();
}

fn walk(d: &Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![];
    if let Ok(rd) = std::fs::read_dir(d) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_gets_exactly_one_reply_and_classic_publishes_are_confirmed() {
    let Some(mut n) = Node::start("call").await else {
        return;
    };
    let url = n.node.amqp_url();
    let clients = run(
        &url,
        &[
            "amqp-call",
            "--msgs",
            "3000",
            "--clients",
            "3",
            "--window",
            "8",
            "--reply",
            "2",
            "--queue",
            "rpc",
            "--quiet",
        ],
    )
    .await;
    // A second or unknown reply would be an error kind (duplicate_reply, unknown_reply).
    assert_eq!(errors(&clients), Vec::<String>::new());
    for c in clients.iter().filter(|c| c.role == Role::AmqpCall) {
        assert_eq!(c.ops, 1000, "client {} replies", c.index);
        assert_eq!(c.lat.len(), 1000, "one latency per reply");
    }
    assert_eq!(
        ops(&clients, Role::AmqpServe),
        3000,
        "each request served once"
    );
    // Classic durable queue, persistent, confirms.
    let clients = run(
        &url,
        &[
            "amqp-pub",
            "--msgs",
            "2000",
            "--queue",
            "c1",
            "--consume",
            "1",
            "--quiet",
        ],
    )
    .await;
    assert_eq!(errors(&clients), Vec::<String>::new());
    assert_eq!(ops(&clients, Role::AmqpPub), 2000);
    assert_eq!(ops(&clients, Role::AmqpConsume), 2000);
    n.node.stop().await.unwrap();
}

/// `--inject-latency 20ms` on amqp-call: callers go through the proxy, responders do not,
/// so one call crosses the delay twice: p50 between 40 and 45 ms (direct: well under 40).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amqp_call_through_a_20ms_proxy_takes_two_delays_a_call() {
    let Some(mut n) = Node::start("lat").await else {
        return;
    };
    let url = n.node.amqp_url();
    let argv = |extra: &'static [&'static str]| {
        let mut v = vec![
            "amqp-call",
            "--msgs",
            "100",
            "--clients",
            "1",
            "--window",
            "1",
            "--reply",
            "1",
            "--queue",
            "lat",
            "--quiet",
        ];
        v.extend_from_slice(extra);
        v
    };
    let p50 = |clients: &[ClientTotals]| {
        let c = clients.iter().find(|c| c.role == Role::AmqpCall).unwrap();
        assert_eq!(c.ops, 100, "every call answered");
        c.lat.value_at_quantile(0.5) as f64 / 1e6
    };
    let direct = run(&url, &argv(&[])).await;
    let delayed = run(&url, &argv(&["--inject-latency", "20ms"])).await;
    assert_eq!(errors(&delayed), Vec::<String>::new());
    let (d, l) = (p50(&direct), p50(&delayed));
    eprintln!("amqp-call p50: direct {d:.3} ms, --inject-latency 20ms {l:.3} ms");
    assert!(d < 20.0, "direct p50 {d} ms");
    assert!(
        (40.0..=45.0).contains(&l),
        "p50 {l} ms through a 20 ms proxy"
    );
    n.node.stop().await.unwrap();
}

/// The binary: cast N arrives N at the responders, the recording names the broker
/// (report, meta.json), and the node and its epmd are gone when the command returns.
#[test]
fn cast_n_arrives_n_and_the_node_is_gone_when_the_command_returns() {
    if !have_rabbitmq() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let o = diskpulse()
        .args([
            "load",
            "amqp-cast",
            "--msgs",
            "2000",
            "--reply",
            "2",
            "--json",
            "--quiet",
        ])
        .args([
            "--queue",
            "cast1",
            "--record",
            "--interval",
            "10ms",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let json_end = stdout.rfind('}').unwrap();
    let v: serde_json::Value = serde_json::from_str(&stdout[..=json_end]).unwrap();
    let sum = |role: &str| -> u64 {
        v["clients"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["role"] == role)
            .map(|c| c["ops"].as_u64().unwrap())
            .sum()
    };
    assert_eq!(sum("amqp-cast"), 2000);
    assert_eq!(sum("amqp-serve"), 2000, "every cast arrived once");
    // The node's pids from the recording's events: both gone, nothing names the node.
    let events = std::fs::read_to_string(out.join("events.jsonl")).unwrap();
    let start: serde_json::Value = events
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["kind"] == "broker_start" || e["event"] == "broker_start")
        .unwrap_or_else(|| panic!("no broker_start event in {events}"));
    let d = if start["detail"].is_object() {
        &start["detail"]
    } else {
        &start
    };
    let pid = d["pid"].as_u64().unwrap() as u32;
    let epmd = d["epmd_pid"].as_u64().unwrap() as u32;
    let node = d["node"].as_str().unwrap().to_string();
    assert!(!process_exists(pid), "beam.smp pid {pid} still runs");
    assert!(!process_exists(epmd), "epmd pid {epmd} still runs");
    assert_eq!(process_named(&node), None, "a process still names {node}");
    // The report names the broker it ran.
    let meta = read_json(&out.join("meta.json"));
    assert_eq!(meta["broker"]["kind"], "rabbitmq", "{}", meta["broker"]);
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        html.contains("rabbitmq 3."),
        "report.html does not name rabbitmq"
    );
    assert!(
        !html.contains("nats-server 3."),
        "report.html calls RabbitMQ nats-server"
    );
    // Its own counters on the timeline: the messages it took in, as a rate.
    assert!(
        html.contains(": messages/s (its /metrics)"),
        "report.html has no RabbitMQ messages panel"
    );
    // The node's /metrics, polled like /varz: the final row counts every cast received.
    let text = std::fs::read_to_string(out.join("rabbitmq_metrics.csv")).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = header
        .iter()
        .position(|h| *h == "messages_received")
        .unwrap();
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert!(rows.len() >= 2, "{text}");
    assert_eq!(rows.last().unwrap()[col], "2000", "{text}");
    // The log is in the run directory.
    assert!(std::fs::metadata(out.join("rabbitmq.log")).unwrap().len() > 0);
}

/// A `kill -9` of diskpulse leaves no node: the VM halts when its stdin pipe closes, epmd
/// gets PR_SET_PDEATHSIG.
#[test]
fn a_killed_diskpulse_leaves_no_node_and_no_epmd() {
    if !have_rabbitmq() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let mut child = diskpulse()
        .args([
            "load",
            "amqp-pub",
            "--duration",
            "120s",
            "--rate",
            "100",
            "--quiet",
        ])
        .arg("--store-dir")
        .arg(&store)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pids = store.join("diskpulse-rabbitmq.pids");
    let t0 = Instant::now();
    let v = loop {
        if let Ok(t) = std::fs::read_to_string(&pids) {
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&t) {
                break v;
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no pid file at {}",
            pids.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let pid = v["beam_pid"].as_u64().unwrap() as u32;
    let epmd = v["epmd_pid"].as_u64().unwrap() as u32;
    // Let it start serving, then kill diskpulse outright.
    std::thread::sleep(Duration::from_secs(3));
    assert!(process_exists(pid) && process_exists(epmd));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        gone_within(pid, 20),
        "beam.smp pid {pid} outlived diskpulse"
    );
    assert!(gone_within(epmd, 5), "epmd pid {epmd} outlived diskpulse");
    assert_eq!(process_named(v["node"].as_str().unwrap()), None);
}

#[test]
fn a_wrong_amqp_port_fails_with_one_clear_line_and_no_password() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("amqp://guest:hunter2@127.0.0.1:{port}");
    let o = diskpulse()
        .args([
            "load", "amqp-pub", "--msgs", "10", "--quiet", "--server", &url,
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "cannot connect to the AMQP broker at amqp://***@127.0.0.1:{port}"
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("hunter2"), "{stderr}");
    assert!(!String::from_utf8_lossy(&o.stdout).contains("hunter2"));
    // Usage errors: exit 2, nothing started.
    for (args, says) in [
        (vec!["--server", "nats://127.0.0.1:4222"], "is not amqp"),
        (vec!["--queue", "amq.x"], "--queue 'amq.x'"),
        (vec!["--cluster", "3"], "--cluster"),
    ] {
        let o = diskpulse()
            .args(["load", "amqp-pub", "--msgs", "10"])
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

/// What a crashed run left (its pid file names a VM and an epmd) is killed at the next
/// start on the same store, and only if the pid's command line still names that node or
/// epmd port: a pid now used by another process is left alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_start_kills_what_a_crash_left_and_nothing_else() {
    if !have_rabbitmq() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    std::fs::create_dir_all(&store).unwrap();
    let node = format!("dp-crashed-{}@localhost", std::process::id());
    // A stand-in for the VM: its command line names the node, as beam.smp's does.
    let mut vm = std::process::Command::new("bash")
        .args(["-c", &format!("exec -a 'beam.smp -sname {node}' sleep 300")])
        .spawn()
        .unwrap();
    // A pid file's epmd pid that is now someone else's process.
    let mut other = std::process::Command::new("sleep")
        .arg("300")
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    std::fs::write(
        store.join("diskpulse-rabbitmq.pids"),
        serde_json::json!({"node": node, "beam_pid": vm.id(), "epmd_pid": other.id(), "epmd_port": 1})
            .to_string(),
    )
    .unwrap();
    let mut n = Node::start_in("after-crash", dir).await;
    let killed = vm.try_wait().unwrap();
    assert!(
        killed.is_some_and(|s| std::os::unix::process::ExitStatusExt::signal(&s) == Some(9)),
        "the leftover VM was not killed: {killed:?}"
    );
    assert_eq!(
        other.try_wait().unwrap(),
        None,
        "another process's pid was signalled"
    );
    other.kill().unwrap();
    other.wait().unwrap();
    // The new node wrote its own pid file; it goes when the node stops.
    let pids = n.node.store_dir().join("diskpulse-rabbitmq.pids");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&pids).unwrap()).unwrap();
    assert_eq!(v["beam_pid"].as_u64(), Some(n.node.pid() as u64));
    n.node.stop().await.unwrap();
    assert!(!pids.exists());
}

/// A scenario's AMQP load phase starts its own RabbitMQ node (the phase child's child):
/// with `volume = "store"` its data directory is on the lab volume, and with `trace` the
/// run traces the node's VM (`beam.smp`) as the broker's process, so a quorum queue's WAL
/// fsyncs (before every confirm) are in fsync_calls.csv and in study.csv. The node is
/// gone when the run returns.
#[test]
fn a_scenario_traces_the_rabbitmq_node_its_amqp_load_started() {
    if !have_rabbitmq() || !can_use_loop_devices() {
        return;
    }
    if !std::path::Path::new("/sys/kernel/tracing").is_dir() {
        skip("no tracefs in this kernel (CONFIG_TRACING)");
        return;
    }
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    let sc = d.path().join("rq.toml");
    std::fs::write(
        &sc,
        r#"name = "rq-trace"
[[volumes]]
name = "store"
lab = { size = "512M", fs = "ext4" }
[samplers]
trace = true
[[phases]]
kind = "load"
volume = "store"
args = ["amqp-pub", "--queue-type", "quorum", "--queue", "rq", "--msgs", "3000", "--size", "1k"]
"#,
    )
    .unwrap();
    let out = d.path().join("study");
    let o = diskpulse()
        .args(["run"])
        .arg(&sc)
        .arg("--out")
        .arg(&out)
        .args(["--lab-root", &d.path().join("lab").display().to_string()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let run = out.join("cells/base/r1");
    // The node the phase's child started, named by the scenario's own recording.
    let events = std::fs::read_to_string(run.join("events.jsonl")).unwrap();
    let watched: Vec<u32> = events
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["kind"] == "process_watched" && e["detail"]["name"] == "rabbitmq")
        .filter_map(|e| e["detail"]["pid"].as_u64().map(|p| p as u32))
        .collect();
    assert_eq!(watched.len(), 1, "process_watched events: {watched:?}");
    let beam = watched[0];
    let (calls, _) = diskpulse::format::fsync_calls::read(&run).unwrap();
    let node: Vec<_> = calls.iter().filter(|c| c.pid == beam).collect();
    // Each confirm waits for the WAL's fsync: 3000 messages take many batches.
    assert!(
        node.len() >= 10,
        "{} sync calls of beam.smp pid {beam} (of {} traced)",
        node.len(),
        calls.len()
    );
    // On the lab volume: the node's files are under its mount, MOUNT/rabbitmq.
    assert!(
        node.iter().any(|c| c.file.contains("/rabbitmq/")),
        "no sync call on a file under MOUNT/rabbitmq: {:?}",
        node.iter().take(5).map(|c| &c.file).collect::<Vec<_>>()
    );
    // Only the broker's calls: nothing of diskpulse itself.
    assert!(
        calls.iter().all(|c| c.pid == beam),
        "other processes traced"
    );
    // study.csv has the rate.
    let csv = std::fs::read_to_string(out.join("study.csv")).unwrap();
    let mut lines = csv.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let row: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = head.iter().position(|h| *h == "sync_calls_per_s").unwrap();
    let v: f64 = row[col].parse().unwrap_or(0.0);
    assert!(v > 0.0, "sync_calls_per_s '{}' in {csv}", row[col]);
    assert!(gone_within(beam, 10), "beam.smp {beam} still runs");
}
