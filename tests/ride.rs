//! A load that rides through a fault (issue 9): a real nats-server with a JetStream store
//! in a tempdir is SIGKILLed under `diskpulse load js-pub` and started again on the same
//! port and store. The load must keep its --duration, resume publishing once the server
//! is back, count the lost acks as timeouts, and every acked message must be in the
//! stream. Needs `nats-server` on PATH (with `CI=true` a missing one fails the test).

mod common;

use std::io::Read;
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A nats-server process of this test; SIGKILLed on drop.
struct Server(Child);

impl Server {
    fn start(port: u16, store: &Path) -> Server {
        let bin = diskpulse::broker::find_nats_server(None).unwrap();
        let child = Command::new(bin)
            .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
            .arg(store)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let t0 = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "nats-server on {port} did not listen"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        Server(child)
    }

    fn kill(mut self) {
        self.0.kill().unwrap();
        self.0.wait().unwrap();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `(t_ns, ops)` of every js-pub row of load.csv.
fn windows(load_csv: &Path) -> Vec<(u64, u64)> {
    let text = std::fs::read_to_string(load_csv).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (t, role, ops) = (col("t_ns"), col("role"), col("ops"));
    lines
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|f| f[role] == "js-pub")
        .map(|f| (f[t].parse().unwrap(), f[ops].parse().unwrap()))
        .collect()
}

#[test]
fn js_pub_rides_through_a_sigkilled_broker_and_loses_no_acked_message() {
    if !common::have_nats_server() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "nats-server is needed in CI"
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let out = tmp.path().join("run");
    let port = free_port();
    let server = Server::start(port, &store);

    let t0 = Instant::now();
    let mut load = common::diskpulse()
        .args(["load", "js-pub", "--server"])
        .arg(format!("nats://127.0.0.1:{port}"))
        .args(["--duration", "8s", "--rate", "2000", "--json", "--record"])
        .arg("--out")
        .arg(&out)
        .arg("--path")
        .arg(tmp.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    server.kill();
    std::thread::sleep(Duration::from_secs(2));
    let server = Server::start(port, &store);
    let status = load.wait().unwrap();
    let elapsed = t0.elapsed();
    let (mut stdout, mut stderr) = (String::new(), String::new());
    load.stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    load.stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    drop(server);
    let ctx = format!("{status:?}\nstdout:\n{stdout}\nstderr:\n{stderr}");

    // --duration plus the 2 s drain, not the 30 s ack timeout.
    assert!(elapsed < Duration::from_secs(12), "took {elapsed:?}\n{ctx}");

    // The --json document comes first on stdout (the run directory follows).
    let json: serde_json::Value = serde_json::Deserializer::from_str(&stdout)
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("no JSON\n{ctx}"))
        .unwrap();
    let client = &json["clients"][0];
    let timeouts = client["errors_by_kind"]["timeout"].as_u64().unwrap_or(0);
    assert!(timeouts > 0, "lost acks counted as timeouts\n{ctx}");

    // The fault is on the timeline: no acks while the server is gone, acks again after.
    let rows = windows(&out.join("load.csv"));
    let ops_in = |from_s: f64, to_s: f64| -> u64 {
        rows.iter()
            .filter(|(t, _)| (*t as f64) >= from_s * 1e9 && (*t as f64) < to_s * 1e9)
            .map(|(_, n)| n)
            .sum()
    };
    assert!(ops_in(0.0, 1.8) > 0, "acks before the kill: {rows:?}");
    assert_eq!(
        ops_in(2.5, 3.5),
        0,
        "no acks while the server is gone: {rows:?}"
    );
    assert!(
        ops_in(4.5, 8.0) > 0,
        "acks/s back above zero after the restart: {rows:?}\n{ctx}"
    );

    // Disconnect and reconnect are events.
    let events = std::fs::read_to_string(out.join("events.jsonl")).unwrap();
    let client_event = |what: &str| {
        events.lines().any(|l| {
            l.contains("\"diskpulse-js-pub-0\"") && l.contains(&format!("\"event\":\"{what}\""))
        })
    };
    assert!(client_event("disconnected"), "{events}");
    assert!(
        events
            .lines()
            .filter(|l| l.contains("\"diskpulse-js-pub-0\"") && l.contains("\"connected\""))
            .count()
            >= 2,
        "a reconnect event: {events}"
    );

    // Every acked message is in the stream.
    let check = &json["stream_check"];
    let acked = check["acked"].as_u64().unwrap();
    assert_eq!(acked, client["ops"].as_u64().unwrap());
    assert!(acked > 2_000, "{check}");
    let stored = check["msgs_after"]
        .as_u64()
        .expect("stream info after the run")
        - check["msgs_before"].as_u64().unwrap();
    assert!(stored >= acked, "acked messages missing: {check}\n{ctx}");
    assert!(!stderr.contains("POSSIBLE DATA LOSS"), "{ctx}");
}
