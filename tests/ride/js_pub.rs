//! js-pub (issue 9's Done-means test), js-pub --consume, --msg-id.

use crate::common;
use crate::harness::*;

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

/// Every publish a fixed `--rate` made due is counted: acked, failed or timed out, never
/// nothing (issue 23). The server is SIGKILLed at 2 s and comes back at 4 s: the
/// publishes due while it was gone are either lost acks (timeouts) or sent when it is
/// back, and then their latency from the intended start covers the outage.
#[test]
fn js_pub_at_a_fixed_rate_counts_every_due_publish_and_its_latency_covers_the_outage() {
    let Some(r) = ride(&["js-pub", "--duration", "8s", "--rate", "1000"]) else {
        return;
    };
    let ctx = &r.ctx;
    let (ops, errors) = ops_and_errors(&r);
    assert_eq!(ops + errors, 8_000, "due = 1000/s x 8 s\n{ctx}");
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(r.out.join("summary.json")).unwrap()).unwrap();
    let co_p99_ms = summary["load"]["js-pub"]["worst_window_co_p99_us"]
        .as_f64()
        .unwrap_or_else(|| panic!("no co p99: {}", summary["load"]))
        / 1e3;
    // The server was gone from ~2 s to ~4 s after the command started: a publish due at
    // the kill and sent after the restart waited at least ~1.5 s from its intended start.
    assert!(
        co_p99_ms > 1_000.0,
        "worst window's latency from the intended start {co_p99_ms:.0} ms: the outage is not in it\n{ctx}"
    );
}

/// The same outage with no server coming back: the publishes due after the kill are
/// `not_sent` failures (the sender was held by a full window of acks that never came),
/// so acked + failed is still every one the schedule made due.
#[test]
fn js_pub_at_a_fixed_rate_counts_publishes_due_after_the_server_is_gone_for_good() {
    let Some(r) = ride_with(&["js-pub", "--duration", "8s", "--rate", "1000"], false) else {
        return;
    };
    let ctx = &r.ctx;
    let (ops, errors) = ops_and_errors(&r);
    assert_eq!(ops + errors, 8_000, "due = 1000/s x 8 s\n{ctx}");
    let not_sent = r.json["clients"][0]["errors_by_kind"]["not_sent"]
        .as_u64()
        .unwrap_or(0);
    // ~6 s of the schedule came after the kill; the client buffers some of it.
    assert!(not_sent > 3_000, "not_sent {not_sent}\n{ctx}");
    assert!(
        ops > 500 && ops < 2_600,
        "acked before the kill: {ops}\n{ctx}"
    );
    assert!(
        r.stderr.contains("never sent"),
        "the failure line says they were never sent\n{ctx}"
    );
}
