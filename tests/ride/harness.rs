//! The harness: a nats-server of the test killed at 2 s and started again at 4 s under
//! `diskpulse load`, and what to read from the run it leaves.

use std::io::Read;
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common;

/// A nats-server process of this test; SIGKILLed on drop.
pub struct Server(pub Child);

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

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// What one load run through a kill at 2 s and a restart at 4 s left behind.
pub struct Ridden {
    pub elapsed: Duration,
    /// The --json document.
    pub json: serde_json::Value,
    pub stderr: String,
    pub out: std::path::PathBuf,
    /// Status, stdout and stderr, for assertion messages.
    pub ctx: String,
    pub port: u16,
    /// The restarted server (still running) and the temporary directory.
    pub server: Server,
    pub _tmp: tempfile::TempDir,
}

/// Runs `diskpulse load ARGS --json --record` against a server of the test that is
/// SIGKILLed at 2 s and started again on the same port and store at 4 s. `None` (skip)
/// without nats-server.
pub fn ride(args: &[&str]) -> Option<Ridden> {
    ride_with(args, true)
}

/// [`ride`], and with `restart` false the server is killed at 2 s and never comes back.
pub fn ride_with(args: &[&str], restart: bool) -> Option<Ridden> {
    if !common::have_nats_server() {
        return common::skip("nats-server not on PATH").then(|| unreachable!());
    }
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let out = tmp.path().join("run");
    let port = free_port();
    let server = Server::start(port, &store);

    let t0 = Instant::now();
    let mut load = common::diskpulse()
        .arg("load")
        .args(args)
        .arg("--server")
        .arg(format!("nats://127.0.0.1:{port}"))
        .args(["--json", "--record"])
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
    let server = if restart {
        Server::start(port, &store)
    } else {
        // Nothing listens: a child that exits at once stands in for the server's slot.
        Server(Command::new("true").spawn().unwrap())
    };
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
    let ctx = format!("{status:?}\nstdout:\n{stdout}\nstderr:\n{stderr}");
    // The --json document comes first on stdout (the run directory follows).
    let json: serde_json::Value = serde_json::Deserializer::from_str(&stdout)
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("no JSON\n{ctx}"))
        .unwrap();
    Some(Ridden {
        elapsed,
        json,
        stderr,
        out,
        ctx,
        port,
        server,
        _tmp: tmp,
    })
}

/// `(t_ns, ops)` of every `role` row of load.csv.
pub fn role_windows(load_csv: &Path, role_name: &str) -> Vec<(u64, u64)> {
    let text = std::fs::read_to_string(load_csv).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (t, role, ops) = (col("t_ns"), col("role"), col("ops"));
    lines
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|f| f[role] == role_name)
        .map(|f| (f[t].parse().unwrap(), f[ops].parse().unwrap()))
        .collect()
}

/// Operations of `rows` in windows starting in `[from_s, to_s)` of the load's own clock
/// (`load_start_ns` is when the load started on the run clock).
pub fn ops_in(rows: &[(u64, u64)], load_start_ns: u64, from_s: f64, to_s: f64) -> u64 {
    rows.iter()
        .filter(|(t, _)| {
            let s = t.saturating_sub(load_start_ns) as f64 / 1e9;
            s >= from_s && s < to_s
        })
        .map(|(_, n)| n)
        .sum()
}

/// The `load_start` event's `t_ns`.
pub fn load_start_ns(out: &Path) -> u64 {
    let events = std::fs::read_to_string(out.join("events.jsonl")).unwrap();
    events
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|e| e["kind"] == "load_start")
        .and_then(|e| e["t_ns"].as_u64())
        .expect("a load_start event")
}

/// The load ran for `duration_s` plus at most the 2 s drain (its load_start..load_stop
/// events), never for the 30 s ack timeout; the whole command (which also writes the
/// report, slow on a busy machine) well under that timeout.
pub fn ends_by_duration_and_drain(r: &Ridden, duration_s: f64) {
    let events = std::fs::read_to_string(r.out.join("events.jsonl")).unwrap();
    let t = |kind: &str| {
        events
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .find(|e| e["kind"] == kind)
            .and_then(|e| e["t_ns"].as_u64())
            .unwrap_or_else(|| panic!("no {kind} event: {events}"))
    };
    let ran_s = (t("load_stop") - t("load_start")) as f64 / 1e9;
    assert!(
        ran_s > duration_s - 0.1 && ran_s < duration_s + 2.5,
        "the load ran {ran_s:.2} s\n{}",
        r.ctx
    );
    assert!(
        r.elapsed < Duration::from_secs(30),
        "took {:?}\n{}",
        r.elapsed,
        r.ctx
    );
}

/// summary.json's `faults`, checked against the client's timeouts: one fault, the first
/// ack after the broker is back within `bound_s`, and lost ops == timeouts.
pub fn one_fault(r: &Ridden, timeouts: u64, bound_s: f64) -> serde_json::Value {
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(r.out.join("summary.json")).unwrap()).unwrap();
    let faults = summary["faults"].as_array().expect("summary.json faults[]");
    assert_eq!(faults.len(), 1, "one fault: {faults:?}\n{}", r.ctx);
    let f = faults[0].clone();
    let ttfa = f["time_to_first_ack_ms"]
        .as_f64()
        .unwrap_or_else(|| panic!("time to first ack: {f}"));
    assert!(
        ttfa > 0.0 && ttfa < bound_s * 1e3,
        "time to first ack in (0, {bound_s} s): {f}"
    );
    // The outage is where the test put it: killed at ~2 s, back at ~4 s.
    let down = f["end_s"].as_f64().unwrap() - f["start_s"].as_f64().unwrap();
    assert!((1.0..8.0).contains(&down), "an outage of ~2 s: {f}");
    assert_eq!(
        f["ops_lost"].as_u64(),
        Some(timeouts),
        "lost == timeouts: {f}"
    );
    assert_eq!(f["timeouts"].as_u64(), Some(timeouts), "{f}");
    // report prints it, and report.html has it in a table.
    assert!(r.stderr.contains("fault at "), "{}", r.ctx);
    let html = std::fs::read_to_string(r.out.join("report.html")).unwrap();
    assert!(html.contains("Faults under the load"), "report.html");
    f
}

/// Every role of `roles` worked before the kill and again after the restart, the load
/// kept its --duration, and summary.json has the one fault with a first ack after it.
pub fn every_role_resumes(r: &Ridden, roles: &[&str]) -> serde_json::Value {
    ends_by_duration_and_drain(r, 8.0);
    let t0 = load_start_ns(&r.out);
    for role in roles {
        let rows = role_windows(&r.out.join("load.csv"), role);
        assert!(
            ops_in(&rows, t0, 0.0, 1.8) > 0,
            "{role} before the kill: {rows:?}"
        );
        assert!(
            ops_in(&rows, t0, 4.5, 8.0) > 0,
            "{role} again after the restart: {rows:?}\n{}",
            r.ctx
        );
    }
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(r.out.join("summary.json")).unwrap()).unwrap();
    let faults = summary["faults"].as_array().expect("summary.json faults[]");
    assert_eq!(faults.len(), 1, "one fault: {faults:?}\n{}", r.ctx);
    let ttfa = faults[0]["time_to_first_ack_ms"].as_f64();
    assert!(
        ttfa.is_some_and(|t| t < 2000.0),
        "first ack after the fault: {faults:?}"
    );
    faults[0].clone()
}

/// The first client's `(ops, errors)` of the --json document: acked and failed.
pub fn ops_and_errors(r: &Ridden) -> (u64, u64) {
    let c = &r.json["clients"][0];
    (c["ops"].as_u64().unwrap(), c["errors"].as_u64().unwrap())
}
