//! A load that rides through a fault (issue 9): a real nats-server with a JetStream store
//! in a tempdir is SIGKILLed under `diskpulse load MODE` at 2 s and started again on the
//! same port and store at 4 s. The load must keep its --duration, resume once the server
//! is back, count the lost acks as timeouts, put the fault into summary.json (`faults`),
//! and lose nothing it counted as done: every acked message is in the stream, every
//! acked KV revision is readable. Needs `nats-server` on PATH (with `CI=true` a missing
//! one fails the test).

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

/// What one load run through a kill at 2 s and a restart at 4 s left behind.
struct Ridden {
    elapsed: Duration,
    /// The --json document.
    json: serde_json::Value,
    stderr: String,
    out: std::path::PathBuf,
    /// Status, stdout and stderr, for assertion messages.
    ctx: String,
    port: u16,
    /// The restarted server (still running) and the temporary directory.
    server: Server,
    _tmp: tempfile::TempDir,
}

/// Runs `diskpulse load ARGS --json --record` against a server of the test that is
/// SIGKILLed at 2 s and started again on the same port and store at 4 s. `None` (skip)
/// without nats-server.
fn ride(args: &[&str]) -> Option<Ridden> {
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
fn role_windows(load_csv: &Path, role_name: &str) -> Vec<(u64, u64)> {
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
fn ops_in(rows: &[(u64, u64)], load_start_ns: u64, from_s: f64, to_s: f64) -> u64 {
    rows.iter()
        .filter(|(t, _)| {
            let s = t.saturating_sub(load_start_ns) as f64 / 1e9;
            s >= from_s && s < to_s
        })
        .map(|(_, n)| n)
        .sum()
}

/// The `load_start` event's `t_ns`.
fn load_start_ns(out: &Path) -> u64 {
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
fn ends_by_duration_and_drain(r: &Ridden, duration_s: f64) {
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
fn one_fault(r: &Ridden, timeouts: u64, bound_s: f64) -> serde_json::Value {
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
    f
}

#[test]
fn js_pub_rides_through_a_sigkilled_broker_and_loses_no_acked_message() {
    let Some(r) = ride(&["js-pub", "--duration", "8s", "--rate", "2000"]) else {
        return;
    };
    let ctx = &r.ctx;
    ends_by_duration_and_drain(&r, 8.0);

    let client = &r.json["clients"][0];
    let timeouts = client["errors_by_kind"]["timeout"].as_u64().unwrap_or(0);
    assert!(timeouts > 0, "lost acks counted as timeouts\n{ctx}");

    // The fault is on the timeline: no acks while the server is gone, acks again after.
    let rows = role_windows(&r.out.join("load.csv"), "js-pub");
    let t0 = load_start_ns(&r.out);
    assert!(
        ops_in(&rows, t0, 0.0, 1.8) > 0,
        "acks before the kill: {rows:?}"
    );
    assert_eq!(
        ops_in(&rows, t0, 2.5, 3.5),
        0,
        "no acks while the server is gone: {rows:?}"
    );
    assert!(
        ops_in(&rows, t0, 4.5, 8.0) > 0,
        "acks/s back above zero after the restart: {rows:?}\n{ctx}"
    );

    // Disconnect and reconnect are events.
    let events = std::fs::read_to_string(r.out.join("events.jsonl")).unwrap();
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
    let check = &r.json["stream_check"];
    let acked = check["acked"].as_u64().unwrap();
    assert_eq!(acked, client["ops"].as_u64().unwrap());
    assert!(acked > 2_000, "{check}");
    let stored = check["msgs_after"]
        .as_u64()
        .expect("stream info after the run")
        - check["msgs_before"].as_u64().unwrap();
    assert!(stored >= acked, "acked messages missing: {check}\n{ctx}");
    assert!(!r.stderr.contains("POSSIBLE DATA LOSS"), "{ctx}");

    one_fault(&r, timeouts, 2.0);

    // The failure line says when the server stopped answering (the kill, ~2 s after the
    // command started, so a little less into the load), not when the loss was counted
    // (the reconnect, after 4 s).
    let last = r.stderr.lines().last().unwrap_or("");
    let at_s: f64 = last
        .strip_prefix("the server stopped answering at ")
        .and_then(|x| x.split_once(" s into the load (timeout)"))
        .map(|(t, _)| t.parse().unwrap())
        .unwrap_or_else(|| panic!("last line: {last}\n{ctx}"));
    assert!((1.0..2.5).contains(&at_s), "{last}\n{ctx}");
}

#[test]
fn kv_put_rides_through_and_every_acked_revision_is_readable() {
    let Some(r) = ride(&[
        "kv-put",
        "--duration",
        "8s",
        "--rate",
        "500",
        "--keys",
        "100000",
        "--bucket",
        "ride",
    ]) else {
        return;
    };
    let ctx = &r.ctx;
    ends_by_duration_and_drain(&r, 8.0);
    let client = &r.json["clients"][0];
    let timeouts = client["errors_by_kind"]["timeout"].as_u64().unwrap_or(0);
    assert!(timeouts > 0, "lost acks counted as timeouts\n{ctx}");
    let rows = role_windows(&r.out.join("load.csv"), "kv-put");
    let t0 = load_start_ns(&r.out);
    assert!(
        ops_in(&rows, t0, 0.0, 1.8) > 0,
        "puts before the kill: {rows:?}"
    );
    assert!(
        ops_in(&rows, t0, 4.5, 8.0) > 0,
        "puts acked after the restart: {rows:?}\n{ctx}"
    );
    one_fault(&r, timeouts, 2.0);

    // Every acked put is readable. Keys are put in order (k0000000, k0000001, ...; one
    // client, more keys than puts, so each key once): read every key that was attempted.
    // Each one there holds what kv-put wrote; at least the acked ones are there, at most
    // those plus the ones whose ack was lost.
    let acked = client["ops"].as_u64().unwrap();
    let attempted = acked + client["errors"].as_u64().unwrap();
    let (present, wrong) = kv_keys_present(r.port, "ride", attempted);
    assert_eq!(wrong, 0, "values that are not what kv-put wrote\n{ctx}");
    assert!(
        present >= acked && present <= acked + timeouts,
        "{present} keys there, {acked} acked, {timeouts} lost\n{ctx}"
    );
    drop(r.server);
}

/// Of keys 0..n of bucket `bucket`, how many are there, and how many of those hold a value
/// other than what kv-put writes.
fn kv_keys_present(port: u16, bucket: &str, n: u64) -> (u64, u64) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = async_nats::connect(format!("nats://127.0.0.1:{port}"))
            .await
            .unwrap();
        let kv = async_nats::jetstream::new(client)
            .get_key_value(bucket)
            .await
            .unwrap();
        let (mut present, mut wrong) = (0, 0);
        for i in 0..n {
            let key = diskpulse::load::content::key_name(i);
            if let Some(v) = kv.get(key.as_str()).await.unwrap() {
                present += 1;
                let seed = diskpulse::load::content::kv_seed(i, v.len());
                if !diskpulse::load::content::matches(seed, 0, &v) {
                    wrong += 1;
                }
            }
        }
        (present, wrong)
    })
}

#[test]
fn obj_put_rides_through_an_object_cut_mid_put_is_one_failure_and_puts_go_on() {
    let Some(r) = ride(&[
        "obj-put",
        "--duration",
        "8s",
        "--rate",
        "20",
        "--object-size",
        "256k",
        "--bucket",
        "rideobj",
    ]) else {
        return;
    };
    let ctx = &r.ctx;
    ends_by_duration_and_drain(&r, 8.0);
    let client = &r.json["clients"][0];
    let timeouts = client["errors_by_kind"]["timeout"].as_u64().unwrap_or(0);
    // One put was in flight (window 1) when the server died: one failure, not a hang.
    assert_eq!(timeouts, 1, "the cut put counted as a timeout\n{ctx}");
    assert_eq!(client["errors"].as_u64(), Some(1), "{ctx}");
    let rows = role_windows(&r.out.join("load.csv"), "obj-put");
    let t0 = load_start_ns(&r.out);
    assert!(
        ops_in(&rows, t0, 0.0, 1.8) > 0,
        "puts before the kill: {rows:?}"
    );
    assert!(
        ops_in(&rows, t0, 4.5, 8.0) > 0,
        "puts go on after the restart: {rows:?}\n{ctx}"
    );
    one_fault(&r, timeouts, 2.0);

    // Every object in the bucket reads back whole and verified (the cut one has no
    // metadata, so it is not listed; one whose ack was lost may be there, and whole).
    let get = common::diskpulse()
        .args(["load", "obj-get", "--server"])
        .arg(format!("nats://127.0.0.1:{}", r.port))
        .args(["--bucket", "rideobj", "--objects", "100", "--json"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&get.stdout);
    assert!(
        get.status.success(),
        "obj-get after the fault: {text}\n{}",
        String::from_utf8_lossy(&get.stderr)
    );
    drop(r.server);
}

/// Every role of `roles` worked before the kill and again after the restart, the load
/// kept its --duration, and summary.json has the one fault with a first ack after it.
fn every_role_resumes(r: &Ridden, roles: &[&str]) -> serde_json::Value {
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

#[test]
fn core_pub_and_sub_ride_through() {
    let Some(r) = ride(&[
        "pub",
        "--sub",
        "1",
        "--duration",
        "8s",
        "--rate",
        "2000",
        "--subject",
        "ride.core",
    ]) else {
        return;
    };
    let f = every_role_resumes(&r, &["pub", "sub"]);
    // The publish whose write found the connection gone is one failure (paced: each
    // publish is written at once); the backlog of the outage is sent after the restart.
    let roles = r.json["roles"].as_array().unwrap();
    let role = |name: &str| roles.iter().find(|x| x["role"] == name).unwrap().clone();
    assert_eq!(
        role("pub")["errors_by_kind"]["disconnected"].as_u64(),
        Some(1),
        "{}",
        r.ctx
    );
    let (sent, got) = (role("pub")["ops"].as_u64(), role("sub")["ops"].as_u64());
    assert!(got <= sent && got > Some(0), "{}", r.ctx);
    assert!(f["ops_lost"].as_u64() >= Some(1), "{f}");
}

#[test]
fn request_reply_rides_through_and_lost_replies_time_out() {
    let Some(r) = ride(&[
        "request",
        "--reply",
        "1",
        "--window",
        "8",
        "--duration",
        "8s",
        "--rate",
        "500",
        "--subject",
        "ride.svc",
    ]) else {
        return;
    };
    let f = every_role_resumes(&r, &["request", "reply"]);
    let timeouts = r.json["clients"][0]["errors_by_kind"]["timeout"]
        .as_u64()
        .unwrap_or(0);
    assert!(timeouts > 0, "lost replies counted as timeouts\n{}", r.ctx);
    assert!(f["timeouts"].as_u64() >= Some(1), "{f}");
}

#[test]
fn js_consume_beside_js_pub_rides_through() {
    let Some(r) = ride(&[
        "js-pub",
        "--consume",
        "1",
        "--duration",
        "8s",
        "--rate",
        "1000",
        "--stream",
        "RIDEC",
        "--subject",
        "ride.js",
    ]) else {
        return;
    };
    every_role_resumes(&r, &["js-pub", "js-consume"]);
}

#[test]
fn js_pub_with_msg_id_reconciles_exactly_after_a_kill() {
    let Some(r) = ride(&[
        "js-pub",
        "--msg-id",
        "--duration",
        "8s",
        "--rate",
        "2000",
        "--stream",
        "RIDEID",
        "--subject",
        "ride.id",
    ]) else {
        return;
    };
    let ctx = &r.ctx;
    ends_by_duration_and_drain(&r, 8.0);
    let client = &r.json["clients"][0];
    let errors = client["errors"].as_u64().unwrap();
    assert!(errors > 0, "acks lost at the kill\n{ctx}");
    let check = &r.json["stream_check"];
    let n = |v: &serde_json::Value| v.as_u64().unwrap_or_else(|| panic!("{check}"));
    let (before, after, acked) = (
        n(&check["msgs_before"]),
        n(&check["msgs_after"]),
        n(&check["acked"]),
    );
    let m = &check["msg_id"];
    eprintln!("stream_check: {check}");
    // Every publish whose ack never came was remembered and sent again.
    assert_eq!(n(&m["lost"]), errors, "{check}\n{ctx}");
    assert_eq!(n(&m["retry_failed"]), 0, "{check}");
    assert_eq!(
        n(&m["lost_stored"]) + n(&m["republished"]),
        errors,
        "{check}"
    );
    // Exact: stored during the run = acked + the lost ones the server did store.
    assert_eq!(
        after - before,
        acked + n(&m["lost_stored"]),
        "{check}\n{ctx}"
    );
    // After the retry every message of the run is there exactly once.
    assert_eq!(n(&m["msgs_final"]) - before, acked + errors, "{check}");
    drop(r.server);
}

#[test]
fn msg_id_outside_js_pub_is_a_usage_error_naming_the_flag() {
    let o = common::diskpulse()
        .args([
            "load",
            "kv-put",
            "--msg-id",
            "--server",
            "nats://127.0.0.1:1",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--msg-id is for js-pub"), "{err}");
}
