//! Issue 15 on one machine: three "hosts" (network namespaces joined by veth pairs on a
//! bridge, 198.19.x.0/24 from the benchmarking range 198.18.0.0/15), a 3-node nats-server
//! cluster with one node per namespace, a `diskpulse agent` per namespace on its own loop
//! device, one of them with a +250 ms clock skew, and `diskpulse record --agents` in the
//! root namespace. The merged recording must place writes made at known times on the
//! skewed node within the reported bound (under 2 ms), and lose or repeat no batch across
//! a restart of that node's broker. Everything is torn down by a Drop guard, on panic too.
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one story, from what it sets up to its last assertion"
)]

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

const SKEW_NS: i64 = 250_000_000;

/// Namespaces, bridge, processes and loop devices; all removed on drop.
struct Hosts {
    id: u32,
    net: u8,
    bridge: String,
    ns: Vec<String>,
    procs: Vec<Child>,
    servers: Vec<Option<Child>>,
    loops: Vec<LoopDev>,
    dir: PathBuf,
}

impl Hosts {
    fn ip(&self, i: usize) -> String {
        format!("198.19.{}.{}", self.net, 10 + i)
    }

    fn new(n: usize) -> Hosts {
        let id = std::process::id() % 100_000;
        let mut h = Hosts {
            id,
            net: (std::process::id() % 200 + 20) as u8,
            bridge: format!("dpag{id}b"),
            ns: vec![],
            procs: vec![],
            servers: vec![],
            loops: vec![],
            dir: PathBuf::from(format!("/tmp/agent-test-{id}")),
        };
        let _ = std::fs::remove_dir_all(&h.dir);
        std::fs::create_dir_all(&h.dir).unwrap();
        sh("ip", &["link", "add", &h.bridge, "type", "bridge"]);
        sh(
            "ip",
            &[
                "addr",
                "add",
                &format!("198.19.{}.1/24", h.net),
                "dev",
                &h.bridge,
            ],
        );
        sh("ip", &["link", "set", &h.bridge, "up"]);
        for i in 0..n {
            let ns = format!("dpag{id}-{i}");
            sh("ip", &["netns", "add", &ns]);
            h.ns.push(ns.clone());
            sh(
                "ip",
                &["netns", "exec", &ns, "ip", "link", "set", "lo", "up"],
            );
            let (v, p) = (format!("dpag{id}v{i}"), format!("dpag{id}p{i}"));
            sh(
                "ip",
                &["link", "add", &v, "type", "veth", "peer", "name", &p],
            );
            sh("ip", &["link", "set", &p, "netns", &ns]);
            sh("ip", &["link", "set", &v, "master", &h.bridge]);
            sh("ip", &["link", "set", &v, "up"]);
            let ip = format!("{}/24", h.ip(i));
            sh(
                "ip",
                &["netns", "exec", &ns, "ip", "addr", "add", &ip, "dev", &p],
            );
            sh("ip", &["netns", "exec", &ns, "ip", "link", "set", &p, "up"]);
            h.loops.push(LoopDev::new("64M"));
        }
        h
    }

    fn start_server(&mut self, i: usize) {
        let n = self.ns.len();
        let routes: Vec<String> = (0..n)
            .filter(|j| *j != i)
            .map(|j| format!("nats://{}:6222", self.ip(j)))
            .collect();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("server{i}.log")))
            .unwrap();
        let c = Command::new("ip")
            .args(["netns", "exec", &self.ns[i], "nats-server"])
            .args(["-a", &self.ip(i), "-p", "4222", "-n", &format!("node{i}")])
            .args(["--cluster", &format!("nats://{}:6222", self.ip(i))])
            .args(["--cluster_name", "dpagents", "--routes", &routes.join(",")])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        if self.servers.len() <= i {
            self.servers.resize_with(i + 1, || None);
        }
        self.servers[i] = Some(c);
        let addr: std::net::SocketAddr = format!("{}:4222", self.ip(i)).parse().unwrap();
        let t0 = Instant::now();
        while std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "nats-server node{i} did not listen on {addr}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn stop_server(&mut self, i: usize) {
        if let Some(mut c) = self.servers[i].take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn start_agent(&mut self, i: usize, skew_ns: i64) {
        let log = std::fs::File::create(self.dir.join(format!("agent{i}.log"))).unwrap();
        let c = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.ns[i],
                env!("CARGO_BIN_EXE_diskpulse"),
            ])
            .args(["agent", "--server", &format!("nats://{}:4222", self.ip(i))])
            .args([
                "--name",
                &format!("node{i}"),
                "--device",
                &self.loops[i].dev,
            ])
            .env("DISKPULSE_AGENT_CLOCK_SKEW_NS", skew_ns.to_string())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.procs.push(c);
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for c in self
            .procs
            .iter_mut()
            .chain(self.servers.iter_mut().flatten())
        {
            // SIGTERM first (the agent ends cleanly), then insist.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        }
        std::thread::sleep(Duration::from_millis(300));
        for c in self
            .procs
            .iter_mut()
            .chain(self.servers.iter_mut().flatten())
        {
            let _ = c.kill();
            let _ = c.wait();
        }
        for ns in &self.ns {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
        let _ = Command::new("ip")
            .args(["link", "del", &self.bridge])
            .status();
        self.loops.clear();
        let _ = std::fs::remove_dir_all(&self.dir);
        let _ = self.id;
    }
}

fn monotonic_ns() -> u64 {
    collectors::clock::monotonic_ns()
}

/// `(t_ns, sectors_written)` of `node`'s rows for `device`, in file order.
fn rows_of(dir: &Path, node: &str, device: &str) -> Vec<(u64, u64)> {
    let mut s = String::new();
    flate2::read::MultiGzDecoder::new(
        std::fs::File::open(dir.join("agents_diskstats.csv.gz")).unwrap(),
    )
    .read_to_string(&mut s)
    .unwrap();
    let mut lines = s.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(head[0], "node");
    let sw = head.iter().position(|c| *c == "sectors_written").unwrap();
    lines
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|f| f[0] == node && f[2] == device)
        .map(|f| (f[1].parse().unwrap(), f[sw].parse().unwrap()))
        .collect()
}

/// The first row after `after_ns` whose sectors_written grew: when the agent saw the write.
fn first_write_after(rows: &[(u64, u64)], after_ns: u64) -> Option<u64> {
    rows.windows(2)
        .find(|w| w[1].0 > after_ns && w[1].1 > w[0].1)
        .map(|w| w[1].0)
}

#[test]
fn three_agents_in_three_namespaces_one_skewed_merge_onto_one_clock_across_a_broker_restart() {
    if !(need_root("network namespaces and loop devices")
        && can_use_loop_devices()
        && have_tool("ip", "iproute2")
        && have_nats_server())
    {
        return;
    }
    let mut h = Hosts::new(3);
    for i in 0..3 {
        h.start_server(i);
    }
    for i in 0..3 {
        h.start_agent(i, if i == 1 { SKEW_NS } else { 0 });
    }
    let run = h.dir.join("run");
    let servers: Vec<String> = (0..3).map(|i| format!("nats://{}:4222", h.ip(i))).collect();
    let rec = diskpulse()
        .args(["record", "--agents", "node0,node1,node2"])
        .args(["--server", &servers.join(",")])
        .args([
            "--device",
            &h.loops[0].dev,
            "--duration",
            "16s",
            "--no-progress",
        ])
        .arg("--out")
        .arg(&run)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    h.procs.push(rec);
    // The recorder's zero, from meta.json as soon as it is written.
    let t0 = Instant::now();
    let zero = loop {
        if let Ok(t) = std::fs::read_to_string(run.join("meta.json")) {
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&t) {
                break v["clock_zero_monotonic_ns"].as_u64().unwrap();
            }
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "no meta.json");
        std::thread::sleep(Duration::from_millis(20));
    };
    let dev1 = PathBuf::from(&h.loops[1].dev);
    let mut writes = vec![];
    let mut write = |h: &Hosts| {
        let _ = h;
        let a = monotonic_ns() - zero;
        write_direct(&dev1, 1 << 20, 1 << 20);
        let b = monotonic_ns() - zero;
        writes.push((a, b));
    };
    std::thread::sleep(Duration::from_secs(4));
    write(&h);
    // node1's broker goes away for 2 s and comes back; its agent buffers meanwhile.
    std::thread::sleep(Duration::from_secs(1));
    h.stop_server(1);
    std::thread::sleep(Duration::from_secs(2));
    h.start_server(1);
    std::thread::sleep(Duration::from_secs(3));
    write(&h);
    // The recorder ends by itself.
    let mut rec = h.procs.pop().unwrap();
    let t1 = Instant::now();
    let status = loop {
        if let Some(s) = rec.try_wait().unwrap() {
            break s;
        }
        assert!(t1.elapsed() < Duration::from_secs(40), "record did not end");
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut err = String::new();
    rec.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    eprintln!("{err}");
    assert!(status.success(), "record failed: {err}");

    let meta = read_json(&run.join("meta.json"));
    let agents = &meta["agents"]["nodes"];
    for i in 0..3 {
        let n = &agents[format!("node{i}")];
        let off = n["offset_ns"]
            .as_i64()
            .unwrap_or_else(|| panic!("node{i}: {n:#}"));
        let bound = n["bound_ns"].as_u64().unwrap() as i64;
        let want = if i == 1 { SKEW_NS } else { 0 };
        eprintln!("node{i}: offset {off} ns, bound {bound} ns (true {want})");
        assert!(
            (off - want).abs() <= bound,
            "node{i}: offset {off} ns is {} ns from the true {want}, beyond its bound {bound}",
            (off - want).abs()
        );
        assert!(
            bound < 2_000_000,
            "node{i}: bound {bound} ns is not under 2 ms"
        );
        for (src, s) in n["sources"].as_object().unwrap() {
            let (first, last) = (
                s["first_seq"]
                    .as_u64()
                    .unwrap_or_else(|| panic!("node{i} {src}: {s:#}")),
                s["last_seq"]
                    .as_u64()
                    .unwrap_or_else(|| panic!("node{i} {src}: {s:#}")),
            );
            assert_eq!(s["lost"], 0, "node{i} {src}: {s:#}");
            assert_eq!(
                s["batches"].as_u64().unwrap(),
                last - first + 1,
                "node{i} {src}: every batch from first to last written once: {s:#}"
            );
        }
        assert_eq!(n["agent_dropped_batches"], 0, "node{i}: {n:#}");
        let lag = n["sources"]["cpu"]["max_lag_ns"].as_u64().unwrap_or(0);
        assert!(
            lag > 0,
            "node{i}: a batch is written after its samples: {n:#}"
        );
    }
    let n1 = &agents["node1"];
    assert!(
        n1["agent_reconnects"].as_u64().unwrap() >= 1,
        "node1's agent did not see its broker go and come back: {n1:#}"
    );
    // report.html: a panel per node on the run's time axis, each node's offset and bound.
    let out = diskpulse().arg("report").arg(&run).output().unwrap();
    assert!(
        out.status.success(),
        "report failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    for i in 0..3 {
        let n = &agents[format!("node{i}")];
        let off = format!("{:+.3} ms", n["offset_ns"].as_i64().unwrap() as f64 / 1e6);
        let bound = format!("±{:.3} ms", n["bound_ns"].as_u64().unwrap() as f64 / 1e6);
        let title = format!("node{i} MiB/s (offset {off}, bound {bound})");
        assert!(
            html.contains(&title),
            "report.html lacks the panel '{title}'"
        );
        assert!(
            html.contains(&format!("<td>node{i}</td><td class=\"num\">{off}</td>")),
            "report.html's node table lacks node{i} {off}"
        );
    }

    // The writes, as the skewed node's agent saw them, on the recorder's clock.
    let dev1_name = h.loops[1].name().to_string();
    let rows = rows_of(&run, "node1", &dev1_name);
    assert!(rows.len() > 10, "{rows:?}");
    for w in rows.windows(2) {
        assert!(w[1].0 > w[0].0, "node1 rows repeat or go back: {w:?}");
        assert!(
            w[1].0 - w[0].0 <= 1_100_000_000,
            "node1 rows have a hole of {} ms (samples lost across the restart?)",
            (w[1].0 - w[0].0) / 1_000_000
        );
    }
    let bound = n1["max_bound_used_ns"].as_u64().unwrap();
    // A sample sees the write at most one interval (1 ms) plus the sampler's lateness after
    // it completes: 1 ms more on the late side.
    let late = 2_000_000;
    for (a, b) in &writes {
        let seen = first_write_after(&rows, a.saturating_sub(bound + late))
            .unwrap_or_else(|| panic!("no write seen on node1 after {a} ns"));
        eprintln!(
            "write from {a} to {b} ns (root clock), seen by node1's agent at {seen} ns (mapped): {:+.3} ms after its end, bound {:.3} ms",
            (seen as f64 - *b as f64) / 1e6,
            bound as f64 / 1e6
        );
        assert!(
            seen + bound >= *a && seen <= b + bound + late,
            "the write made from {a} to {b} ns is placed at {seen} ns: outside the bound {bound} ns (+{late} ns sampling)"
        );
    }
}

/// A free TCP port on 127.0.0.1 (bound and released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Kills its processes on drop (also on panic).
struct Procs(Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Waits for a child spawned with `stderr(Stdio::piped())`: its exit status and stderr.
fn finish(c: &mut Child) -> (std::process::ExitStatus, String) {
    let status = c.wait().unwrap();
    let mut err = String::new();
    c.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    (status, err)
}

/// `diskpulse load js-pub` of `msgs` 1 KiB messages to `url`, which must succeed.
fn js_pub(url: &str, msgs: &str) {
    let load = diskpulse()
        .args(["load", "js-pub", "--server", url, "--msgs", msgs])
        .args(["--size", "1024", "--window", "64"])
        .output()
        .unwrap();
    assert!(
        load.status.success(),
        "js-pub failed: {}",
        String::from_utf8_lossy(&load.stderr)
    );
}

#[test]
fn a_batch_whose_send_was_lost_is_asked_for_again_and_written_once() {
    if !have_nats_server() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let url = format!("nats://127.0.0.1:{port}");
    let mut procs = Procs(vec![]);
    procs.0.push(
        Command::new("nats-server")
            .args(["-a", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let t0 = Instant::now();
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "nats-server did not listen"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let run = dir.path().join("run");
    let rec = diskpulse()
        .args(["record", "--agents", "solo", "--server", &url])
        .args(["--duration", "7s", "--no-progress", "--interval", "10ms"])
        .arg("--out")
        .arg(&run)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    procs.0.push(rec);
    std::thread::sleep(Duration::from_millis(500));
    // cpu batches come every 100 ms: 25 and 26 about 2.5 s in, well inside the recording.
    procs.0.push(
        diskpulse()
            .args([
                "agent",
                "--server",
                &url,
                "--name",
                "solo",
                "--duration",
                "12s",
            ])
            .env("DISKPULSE_AGENT_TEST_WITHHOLD", "cpu:25,cpu:26,meminfo:30")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let (status, err) = finish(&mut procs.0[1]);
    assert!(status.success(), "record failed: {err}");
    let meta = read_json(&run.join("meta.json"));
    let n = &meta["agents"]["nodes"]["solo"];
    for src in ["cpu", "meminfo"] {
        let s = &n["sources"][src];
        let (first, last) = (
            s["first_seq"].as_u64().unwrap(),
            s["last_seq"].as_u64().unwrap(),
        );
        assert!(
            first < 25 && last > 30,
            "{src}: the withheld batches fall inside the run: {s:#}"
        );
        assert!(
            s["resend_requests"].as_u64().unwrap() >= 1,
            "{src}: the gap was not asked for again: {s:#}"
        );
        assert_eq!(s["lost"], 0, "{src}: {s:#}");
        assert_eq!(
            s["batches"].as_u64().unwrap(),
            last - first + 1,
            "{src}: {s:#}"
        );
    }
    // cpu.csv's rows of the node: 100 ms apart, none missing, none twice.
    let text = std::fs::read_to_string(run.join("agents_cpu.csv")).unwrap();
    let t: Vec<u64> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(1).unwrap().parse().unwrap())
        .collect();
    for w in t.windows(2) {
        assert!(
            w[1] > w[0] && w[1] - w[0] < 150_000_000,
            "agents_cpu.csv rows {} and {} ns: a hole or a repeat",
            w[0],
            w[1]
        );
    }
    let events = std::fs::read_to_string(run.join("events.jsonl")).unwrap();
    assert!(events.contains("\"agent_resend\""), "{events}");
}

#[test]
fn bad_agent_input_is_a_usage_error_with_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let cases: [(&[&str], &str); 6] = [
        (
            &[
                "record",
                "--agents",
                "a.b",
                "--server",
                "nats://127.0.0.1:1",
            ],
            "not a node name",
        ),
        (&["record", "--agents", "a"], "--agents needs --server"),
        (
            &["agent", "--name", "x y", "--server", "nats://127.0.0.1:1"],
            "not a node name",
        ),
        (&["agent", "--name", "n"], "--server"),
        (
            &[
                "agent",
                "--name",
                "n",
                "--server",
                "nats://127.0.0.1:1",
                "--broker-pid",
                "4000000000",
            ],
            "--broker-pid 4000000000",
        ),
        (
            &[
                "agent",
                "--name",
                "n",
                "--server",
                "nats://127.0.0.1:1",
                "--broker-monitor",
                "ftp://u:secret@h:1",
            ],
            "--broker-monitor",
        ),
    ];
    for (args, want) in cases {
        let o = diskpulse()
            .args(args)
            .arg("--out")
            .arg(&out)
            .env_remove("NATS_URL")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        // `agent` has no --out: clap refuses it first; without it the check is ours.
        if args[0] == "agent" {
            let o = diskpulse()
                .args(args)
                .env_remove("NATS_URL")
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
            assert!(err.contains(want), "{args:?}: {err}");
            assert!(
                !err.contains("secret"),
                "{args:?} printed a password: {err}"
            );
            continue;
        }
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!out.exists(), "{args:?} wrote {}", out.display());
    }
}

/// The CSV `file` of a run as rows of fields, the header dropped.
fn csv_rows(file: &Path) -> Vec<Vec<String>> {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect()
}

#[test]
fn an_agent_samples_its_local_brokers_varz_and_proc_io() {
    if !have_nats_server() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (port, mport) = (free_port(), free_port());
    let url = format!("nats://127.0.0.1:{port}");
    let mut procs = Procs(vec![]);
    procs.0.push(
        Command::new("nats-server")
            .args(["-a", "127.0.0.1", "-p", &port.to_string()])
            .args(["-m", &mport.to_string(), "-js", "-sd"])
            .arg(dir.path().join("store"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let server_pid = procs.0[0].id();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let t0 = Instant::now();
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "nats-server did not listen"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let run = dir.path().join("run");
    procs.0.push(
        diskpulse()
            .args(["record", "--agents", "brk", "--server", &url])
            .args(["--duration", "7s", "--no-progress", "--interval", "10ms"])
            .arg("--out")
            .arg(&run)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(500));
    procs.0.push(
        diskpulse()
            .args([
                "agent",
                "--server",
                &url,
                "--name",
                "brk",
                "--duration",
                "9s",
            ])
            .args(["--broker-monitor", &format!("http://127.0.0.1:{mport}")])
            .args(["--broker-pid", &server_pid.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(1500));
    // The broker writes its store: 20000 messages of 1 KiB, ~20 MB.
    js_pub(&url, "20000");
    let (status, err) = finish(&mut procs.0[1]);
    assert!(status.success(), "record failed: {err}");
    // varz: a row every 250 ms with the node column, in_msgs counting the load.
    let varz = csv_rows(&run.join("agents_varz.csv"));
    assert!(varz.len() >= 15, "{} varz rows in 7 s", varz.len());
    assert!(varz.iter().all(|r| r[0] == "brk"), "{varz:?}");
    let in_msgs = |r: &Vec<String>| r[10].parse::<u64>().unwrap();
    let grew = in_msgs(varz.last().unwrap()) - in_msgs(&varz[0]);
    assert!(
        grew >= 20_000,
        "varz in_msgs grew by {grew} over 20000 publishes"
    );
    let jsz = csv_rows(&run.join("agents_jsz.csv"));
    assert!(
        jsz.len() >= 15 && jsz.iter().all(|r| r[0] == "brk"),
        "{jsz:?}"
    );
    // proc_io: the server's pid, write_bytes growing by the store's ~20 MB.
    let pio = csv_rows(&run.join("agents_proc_io.csv"));
    assert!(
        pio.len() >= 300,
        "{} proc_io rows in 7 s at 10 ms",
        pio.len()
    );
    assert!(
        pio.iter()
            .all(|r| r[0] == "brk" && r[2] == server_pid.to_string()),
        "{:?}",
        &pio[..3]
    );
    let wb = |r: &Vec<String>| r[9].parse::<u64>().unwrap();
    let written = wb(pio.last().unwrap()) - wb(&pio[0]);
    assert!(
        written >= 15 << 20,
        "the broker's write_bytes grew by {written} over a 20 MB js-pub load"
    );
    // On the recorder's clock: in time order, inside the run.
    let t: Vec<u64> = pio.iter().map(|r| r[1].parse().unwrap()).collect();
    assert!(
        t.windows(2).all(|w| w[1] > w[0]),
        "proc_io rows out of order"
    );
    let meta = read_json(&run.join("meta.json"));
    let s = &meta["agents"]["nodes"]["brk"]["sources"];
    for src in ["varz", "jsz", "proc_io"] {
        assert_eq!(s[src]["lost"], 0, "{src}: {:#}", s[src]);
        assert!(
            s[src]["batches"].as_u64().unwrap() > 0,
            "{src}: {:#}",
            s[src]
        );
    }
    // report.html: the node's broker panels beside its devices' panel.
    let out = diskpulse().arg("report").arg(&run).output().unwrap();
    assert!(
        out.status.success(),
        "report failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    let disk = html
        .find("brk MiB/s (offset")
        .expect("the node's devices' panel");
    for title in [
        "brk broker msgs in/s (varz)",
        "brk broker MiB/s",
        "in (client bytes, varz)",
        "written (proc_io)",
        "read (proc_io)",
        "brk broker CPU % (varz)",
        "brk broker memory MiB (varz)",
    ] {
        let at = html
            .find(title)
            .unwrap_or_else(|| panic!("report.html lacks '{title}'"));
        assert!(
            at > disk,
            "'{title}' comes before the node's devices' panel"
        );
    }
}

/// Without `--broker-monitor`/`--broker-pid` an agent samples the one nats-server it can
/// see (its monitor port from the command line, its pid for /proc/PID/io). A pid namespace
/// of the test's own (`unshare --pid --mount-proc`) makes that server the only one in
/// sight, as on a broker host, whatever else runs on this machine.
#[test]
fn an_agent_without_broker_flags_finds_the_one_nats_server_it_can_see() {
    if !have_nats_server() || !need_root("a pid namespace") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (port, mport) = (free_port(), free_port());
    let url = format!("nats://127.0.0.1:{port}");
    let run = dir.path().join("run");
    let mut procs = Procs(vec![]);
    // In the namespace: the server, then (1 s after its monitor port listens, the recorder
    // started meanwhile) the agent with no broker flags. When the agent ends, the
    // namespace's init ends and the kernel ends the server; --kill-child ends them all if
    // the test dies first.
    let script = format!(
        "nats-server -a 127.0.0.1 -p {port} -m {mport} -js -sd {store} >/dev/null 2>&1 &
         for i in $(seq 100); do (echo > /dev/tcp/127.0.0.1/{mport}) 2>/dev/null && break; sleep 0.1; done
         sleep 1
         exec {bin} agent --server {url} --name auto --duration 9s",
        store = dir.path().join("store").display(),
        bin = env!("CARGO_BIN_EXE_diskpulse"),
    );
    procs.0.push(
        Command::new("unshare")
            .args([
                "--pid",
                "--fork",
                "--mount-proc",
                "--kill-child",
                "bash",
                "-c",
            ])
            .arg(&script)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let t0 = Instant::now();
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "nats-server did not listen"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    procs.0.push(
        diskpulse()
            .args(["record", "--agents", "auto", "--server", &url])
            .args(["--duration", "8s", "--no-progress", "--interval", "10ms"])
            .arg("--out")
            .arg(&run)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(1500));
    js_pub(&url, "5000");
    let (status, err) = finish(&mut procs.0[1]);
    assert!(status.success(), "record failed: {err}");
    let (agent, aerr) = finish(&mut procs.0[0]);
    assert!(agent.success(), "agent failed: {aerr}");
    // Found: its /varz every 250 ms counting the load, and its /proc/PID/io.
    let varz = csv_rows(&run.join("agents_varz.csv"));
    assert!(
        varz.len() >= 10 && varz.iter().all(|r| r[0] == "auto"),
        "{} varz rows: {aerr}",
        varz.len()
    );
    let in_msgs = |r: &Vec<String>| r[10].parse::<u64>().unwrap();
    let grew = in_msgs(varz.last().unwrap()) - in_msgs(&varz[0]);
    assert!(
        grew >= 5000,
        "varz in_msgs grew by {grew} over 5000 publishes"
    );
    let pio = csv_rows(&run.join("agents_proc_io.csv"));
    assert!(
        pio.len() >= 100 && pio.iter().all(|r| r[0] == "auto"),
        "{} proc_io rows: {aerr}",
        pio.len()
    );
    let wb = |r: &Vec<String>| r[9].parse::<u64>().unwrap();
    let written = wb(pio.last().unwrap()) - wb(&pio[0]);
    assert!(
        written >= 4 << 20,
        "the found broker's write_bytes grew by {written} over a 5 MB js-pub load"
    );
}
