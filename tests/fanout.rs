//! Fan-out that delivers (issue 12, item 2): `load pub --clients 4 --sub 4` on an embedded
//! nats-server, every subscriber receives every message (exact counts) and the run exits
//! 0; a subscriber that really cannot keep up (stalled by the test-only knob
//! `DISKPULSE_TEST_SUB_STALL_MS`) is left behind by the flow control, loses messages, and
//! the run says so and exits 1.

mod common;
use common::*;

use collectors::clock::Clock;

/// Runs `diskpulse load ARGS` on its own embedded server, `run_dir` as the parent
/// recording (events.jsonl and load.csv go there). (exit code, stdout, stderr)
fn load(args: &[&str], run_dir: &std::path::Path, env: &[(&str, &str)]) -> (i32, String, String) {
    let zero = Clock::start().zero_monotonic_ns();
    let mut c = diskpulse();
    c.arg("load")
        .args(args)
        .env_remove("NATS_URL")
        .env_remove(diskpulse::load::rawsub::STALL_ENV)
        .env("DISKPULSE_RUN_DIR", run_dir)
        .env("DISKPULSE_CLOCK_ZERO_NS", zero.to_string());
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// (role, index) -> ops, and the roles' error counts by kind, from `--json`.
fn clients(doc: &serde_json::Value, role: &str) -> Vec<u64> {
    let mut v: Vec<(u64, u64)> = doc["clients"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["role"] == role)
        .map(|c| (c["index"].as_u64().unwrap(), c["ops"].as_u64().unwrap()))
        .collect();
    v.sort();
    v.into_iter().map(|x| x.1).collect()
}

fn role<'a>(doc: &'a serde_json::Value, role: &str) -> &'a serde_json::Value {
    doc["roles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["role"] == role)
        .unwrap_or_else(|| panic!("no role {role}: {doc:#}"))
}

fn events(run_dir: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(run_dir.join("events.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[test]
fn four_publishers_four_subscribers_every_subscriber_gets_every_message() {
    if !have_nats_server() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let (code, out, err) = load(
        &[
            "pub",
            "--msgs",
            "1000000",
            "--clients",
            "4",
            "--sub",
            "4",
            "--size",
            "128",
            "--subject",
            "fanout.all",
            "--json",
            "--quiet",
        ],
        d.path(),
        &[],
    );
    assert_eq!(code, 0, "exit {code}\n{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(clients(&doc, "pub"), [250_000; 4], "{err}");
    assert_eq!(
        clients(&doc, "sub"),
        [1_000_000; 4],
        "every subscriber gets every message\n{err}"
    );
    let sub = role(&doc, "sub");
    assert_eq!(sub["ops"], 4_000_000u64);
    assert_eq!(sub["errors"], 0, "{sub:#}");
    assert!(sub["msgs_per_s"].as_f64().unwrap() > 0.0);
    // The flow control was on, and no subscriber had to be left behind.
    let ev = events(d.path());
    let flow = ev
        .iter()
        .find(|e| e["kind"] == "flow_control")
        .unwrap_or_else(|| panic!("no flow_control event in {ev:#?}"));
    assert!(flow.to_string().contains("\"window_msgs\""), "{flow}");
    assert!(
        !ev.iter()
            .any(|e| e.to_string().contains("flow_control_left_behind")),
        "{ev:#?}"
    );
    eprintln!(
        "delivered {} msgs/s, publishers {} msgs/s",
        sub["msgs_per_s"],
        role(&doc, "pub")["msgs_per_s"]
    );
}

#[test]
fn a_subscriber_that_cannot_keep_up_is_reported_and_fails_the_run() {
    if !have_nats_server() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    // Subscriber 0 stops reading for 12 s after its first read: the publishers wait for
    // it (flow control) 2 s, then go on without it; the server's buffer for it (64 MiB)
    // overflows and the server drops it as a slow consumer.
    let (code, out, err) = load(
        &[
            "pub",
            "--msgs",
            "1000000",
            "--clients",
            "2",
            "--sub",
            "2",
            "--size",
            "128",
            "--subject",
            "fanout.slow",
            "--json",
            "--quiet",
        ],
        d.path(),
        &[(diskpulse::load::rawsub::STALL_ENV, "12000")],
    );
    assert_eq!(code, 1, "a run that lost messages exits 1\n{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let subs = clients(&doc, "sub");
    assert_eq!(
        subs[1], 1_000_000,
        "the other subscriber still gets every message"
    );
    assert!(subs[0] < 1_000_000, "{subs:?}");
    let missing = role(&doc, "sub")["errors_by_kind"]["missing"]
        .as_u64()
        .unwrap_or(0);
    assert_eq!(missing, 1_000_000 - subs[0], "{err}");
    // Loud: the last lines say what was lost and how many.
    assert!(err.contains("Error:"), "{err}");
    assert!(err.contains("missing") || err.contains("lost"), "{err}");
    assert!(err.contains(&missing.to_string()), "{err}");
    let ev = events(d.path());
    assert!(
        ev.iter()
            .any(|e| e.to_string().contains("flow_control_left_behind")
                && e.to_string().contains("diskpulse-sub-0")),
        "{ev:#?}"
    );
}

#[test]
fn flow_window_without_subscribers_is_a_usage_error_and_writes_nothing() {
    let d = tempfile::tempdir().unwrap();
    let csv = d.path().join("out.csv");
    for args in [
        &["pub", "--flow-window", "1000", "--duration", "1s"][..],
        &[
            "js-pub",
            "--consume",
            "1",
            "--flow-window",
            "1000",
            "--duration",
            "1s",
        ][..],
    ] {
        let o = diskpulse()
            .arg("load")
            .args(args)
            .args(["--csv", csv.to_str().unwrap()])
            .env_remove("NATS_URL")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("--flow-window") && err.contains("pub --sub M"),
            "{args:?}: {err}"
        );
        assert!(!csv.exists(), "{args:?} wrote {}", csv.display());
    }
}
