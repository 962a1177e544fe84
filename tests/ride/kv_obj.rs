//! KV and object store puts ride through.

use futures::StreamExt;

use crate::common;
use crate::harness::*;

#[test]
fn kv_put_rides_through_and_every_acked_revision_is_readable() {
    let Some(r) = ride(&[
        "kv-put",
        "--duration",
        "8s",
        "--rate",
        "2000",
        // Puts sent while the server is gone fill the window; their acks are counted lost
        // at the reconnect (with a window of 1 the one put may get its ack on the new
        // connection before the loop sees the reconnect: then nothing is lost).
        "--window",
        "64",
        "--keys",
        "1000000",
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

#[test]
fn obj_put_rides_through_an_object_cut_mid_put_is_one_failure_and_puts_go_on() {
    let Some(r) = ride(&[
        "obj-put",
        "--duration",
        "8s",
        // Closed loop (no --rate): a put is always in flight, so the kill cuts one.
        "--object-size",
        "128k",
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
        let got: Vec<Option<bool>> = futures::stream::iter(0..n)
            .map(|i| {
                let kv = kv.clone();
                async move {
                    let key = diskpulse::load::content::key_name(i);
                    let v = kv.get(key.as_str()).await.unwrap()?;
                    let seed = diskpulse::load::content::kv_seed(i, v.len());
                    Some(diskpulse::load::content::matches(seed, 0, &v))
                }
            })
            .buffer_unordered(64)
            .collect()
            .await;
        let present = got.iter().flatten().count() as u64;
        let wrong = got.iter().flatten().filter(|ok| !**ok).count() as u64;
        (present, wrong)
    })
}

/// kv-put at a fixed rate through the same outage: every put due is counted (issue 23).
#[test]
fn kv_put_at_a_fixed_rate_counts_every_due_put_through_an_outage() {
    let Some(r) = ride_with(&["kv-put", "--duration", "8s", "--rate", "500"], false) else {
        return;
    };
    let (ops, errors) = ops_and_errors(&r);
    assert_eq!(ops + errors, 4_000, "due = 500/s x 8 s\n{}", r.ctx);
    assert!(ops > 200, "puts before the kill: {ops}\n{}", r.ctx);
}
