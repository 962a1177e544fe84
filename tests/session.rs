//! The session pipeline's exit paths with the real binary and a real nats-server: a
//! broker killed under a recorded load ends the load at once, keeps a complete
//! recording and its report, and exits 1 with one line that names the server.

mod common;
use common::*;

use std::path::Path;
use std::time::{Duration, Instant};

/// The pid in the first `broker_ready` event of a run's events.jsonl, once there is one.
fn broker_pid(events: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(events).ok()?;
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["kind"] == "broker_ready")
        .and_then(|e| e["detail"]["pid"].as_u64())
        .map(|p| p as u32)
}

#[test]
fn a_broker_killed_under_a_recorded_load_ends_it_and_keeps_the_recording() {
    if !have_nats_server() {
        return;
    }
    if !need_root("recording") {
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let run = out.path().join("run");
    let child = diskpulse()
        .args(["load", "js-pub", "--duration", "60s", "--quiet", "--record"])
        .arg("--out")
        .arg(&run)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let pid = loop {
        if let Some(p) = broker_pid(&run.join("events.jsonl")) {
            break p;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "no broker_ready event"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    // Let the load run a moment, then kill the server as a crash would.
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: kill(2) on the nats-server the test's own child started.
    assert_eq!(unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) }, 0);
    let killed = Instant::now();
    let o = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    // The load stops within its 2 s drain of unacked publishes plus the report, not at 60 s.
    assert!(
        killed.elapsed() < Duration::from_secs(20),
        "ran {:?} after the broker died; stderr: {stderr}",
        killed.elapsed()
    );
    assert_eq!(o.status.code(), Some(1), "stderr: {stderr}");
    assert!(
        stderr.contains(&format!("nats-server n1 (pid {pid}) exited during the run")),
        "{stderr}"
    );
    let events = std::fs::read_to_string(run.join("events.jsonl")).unwrap();
    assert!(
        events.lines().any(|l| l.contains("\"broker_died\"")),
        "no broker_died event: {events}"
    );
    let meta = read_json(&run.join("meta.json"));
    assert_eq!(meta["complete"], true);
    assert_eq!(meta["broker"]["servers"][0]["pid"], pid);
    let summary = read_json(&run.join("summary.json"));
    let load = &summary["load"]["js-pub"];
    assert!(load["ops"].as_f64().unwrap() > 0.0, "{load:#}");
    assert!(!process_exists(pid), "nats-server {pid} still there");
}
