//! natscli v0.2's message and JetStream flags of `diskpulse nats-bench`, each checked
//! where it could be false, against a JetStream nats-server of our own: `--payload`'s
//! bytes and `-H`'s headers arrive at a subscriber, a responder and the stream as given
//! (HPUB on the raw writer); `--acks=all` makes an ack-all consumer and `--doubleack`
//! still gets every message; `js get sync` reads every stored message per client (and `js
//! get batch` in batches) and fails on sequences the stream lacks; `js pub atomic` stores
//! whole batches; core `pub`'s latency columns hold each publish call's time; `js pub
//! fast` and modes natscli lacks are refused in one line saying why; v0.1's `--history`
//! sets the bucket's depth and `--retries` is taken; `--multisubject` (both forms) spreads
//! messages over numbered subjects that receivers and the stream take.

mod common;
use common::*;

use std::path::Path;
use std::time::Duration;

use futures::StreamExt;

const HEADER_LAT: &str = "#RunID,ClientID,MsgCount,MsgBytes,MsgsPerSec,BytesPerSec,DurationSecs,MinLatencyMicroSecs,AvgLatencyMicroSecs,MaxLatencyMicroSecs,P50LatencyMicroSecs,P90LatencyMicroSecs,P99LatencyMicroSecs,P99.9LatencyMicroSecs,StdDevLatencyMicroSecs";

/// `nats-bench ARGS --server URL --no-progress` in `dir`: (exit code, stdout, stderr).
fn run(dir: &Path, url: &str, args: &[&str]) -> (i32, String, String) {
    let mut c = diskpulse();
    c.arg("nats-bench")
        .args(args)
        .args(["--server", url, "--no-progress"])
        .current_dir(dir);
    for v in [
        "NATS_URL",
        "NATS_USER",
        "NATS_PASSWORD",
        "DISKPULSE_RUN_DIR",
    ] {
        c.env_remove(v);
    }
    let o = c.output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The same, off the async runtime; asserts exit 0.
async fn ok(dir: &Path, url: &str, args: &[&str]) -> (String, String) {
    let (d, u) = (dir.to_path_buf(), url.to_string());
    let a: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let (code, out, err) = tokio::task::spawn_blocking(move || {
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        run(&d, &u, &a)
    })
    .await
    .unwrap();
    assert_eq!(code, 0, "{args:?}\nstdout:\n{out}\nstderr:\n{err}");
    (out, err)
}

/// The CSV's data rows, after checking its header.
fn rows(p: &Path, header: &str) -> Vec<Vec<String>> {
    let t = std::fs::read_to_string(p).unwrap();
    let mut l = t.lines();
    assert_eq!(l.next(), Some(header), "{t}");
    l.map(|r| r.split(',').map(String::from).collect())
        .collect()
}

fn setup() -> Option<(JsServer, tempfile::TempDir)> {
    if !have_nats_server() {
        return None;
    }
    Some((JsServer::start(), tempfile::tempdir().unwrap()))
}

/// 300 bytes no `--size` would make (every byte value, then a tail).
fn payload_file(dir: &Path) -> (std::path::PathBuf, Vec<u8>) {
    let body: Vec<u8> = (0..300u32).map(|i| (i * 7 % 256) as u8).collect();
    let p = dir.join("payload.bin");
    std::fs::write(&p, &body).unwrap();
    (p, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payload_and_headers_arrive_as_given_at_a_subscriber_a_responder_and_the_stream() {
    let Some((srv, dir)) = setup() else { return };
    let (d, u) = (dir.path(), srv.url.as_str());
    let (file, body) = payload_file(d);
    let f = file.to_str().unwrap();
    let nc = async_nats::connect(u).await.unwrap();

    // Core pub (the raw writer's HPUB): every message the file's bytes with both headers.
    let mut sub = nc.subscribe("hdr.core").await.unwrap();
    nc.flush().await.unwrap();
    let args = [
        "pub",
        "hdr.core",
        "--msgs",
        "20",
        "--payload",
        f,
        "-H",
        "Trace-Id: 42",
        "-H",
        "B:two",
    ];
    ok(d, u, &args).await;
    for i in 0..20 {
        let m = tokio::time::timeout(Duration::from_secs(5), sub.next())
            .await
            .unwrap_or_else(|_| panic!("message {i} of 20 never came"))
            .unwrap();
        assert_eq!(m.payload.as_ref(), body.as_slice(), "message {i}'s body");
        let h = m.headers.expect("headers");
        assert_eq!(h.get("Trace-Id").map(|v| v.as_str()), Some("42"));
        assert_eq!(h.get("B").map(|v| v.as_str()), Some("two"));
    }

    // service request: the responder sees them.
    let mut svc = nc.subscribe("hdr.svc").await.unwrap();
    nc.flush().await.unwrap();
    let rnc = nc.clone();
    let responder = tokio::spawn(async move {
        let mut seen = vec![];
        while let Some(m) = svc.next().await {
            let h = m.headers.clone().unwrap_or_default();
            seen.push((m.payload.to_vec(), h.get("K").map(|v| v.to_string())));
            rnc.publish(m.reply.unwrap(), "ok".into()).await.unwrap();
            if seen.len() == 5 {
                break;
            }
        }
        seen
    });
    let args = [
        "service",
        "request",
        "hdr.svc",
        "--msgs",
        "5",
        "--payload",
        f,
        "-H",
        "K:v",
    ];
    ok(d, u, &args).await;
    let seen = responder.await.unwrap();
    assert_eq!(seen.len(), 5);
    assert!(seen
        .iter()
        .all(|(p, k)| p == &body && k.as_deref() == Some("v")));

    // js pub: stored with them.
    let args = [
        "js",
        "pub",
        "async",
        "hdr.js",
        "--create",
        "--stream",
        "HDR",
        "--msgs",
        "10",
        "--payload",
        f,
        "-H",
        "K:stored",
    ];
    let (_, err) = ok(d, u, &args).await;
    assert!(err.contains("--payload"), "{err}");
    let js = async_nats::jetstream::new(nc.clone());
    let s = js.get_stream("HDR").await.unwrap();
    for seq in [1, 10] {
        let m = s.get_raw_message(seq).await.unwrap();
        assert_eq!(m.payload.as_ref(), body.as_slice());
        assert_eq!(m.headers.get("K").map(|v| v.as_str()), Some("stored"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn js_get_reads_every_stored_message_per_client_and_atomic_batches_are_stored_whole() {
    let Some((srv, dir)) = setup() else { return };
    let (d, u) = (dir.path(), srv.url.as_str());
    // nats bench js pub atomic foo --create --batch 100 (500 messages, 5 batches)
    let args = [
        "js", "pub", "atomic", "foo", "--create", "--batch", "100", "--msgs", "500", "--csv",
        "a.csv",
    ];
    let (out, _) = ok(d, u, &args).await;
    assert!(
        out.contains("NATS JetStream atomic batch publisher stats: "),
        "{out}"
    );
    let r = rows(&d.join("a.csv"), HEADER_LAT);
    assert_eq!((r.len(), r[0][2].as_str()), (1, "500"));
    let nc = async_nats::connect(u).await.unwrap();
    let js = async_nats::jetstream::new(nc.clone());
    let mut s = js.get_stream("benchstream").await.unwrap();
    let info = s.info().await.unwrap();
    assert_eq!(info.state.messages, 500);
    // One latency per batch, from the commit: min > 0.
    assert!(r[0][7].parse::<f64>().unwrap() > 0.0, "{r:?}");

    // nats bench js get sync --clients 2 --msgs 500: each client reads all 500.
    let args = [
        "js",
        "get",
        "sync",
        "--clients",
        "2",
        "--msgs",
        "500",
        "--csv",
        "g.csv",
    ];
    let (out, _) = ok(d, u, &args).await;
    assert!(
        out.contains("NATS JetStream synchronous getter aggregated stats: "),
        "{out}"
    );
    let r = rows(&d.join("g.csv"), HEADER_LAT);
    let ids: Vec<(&str, &str)> = r.iter().map(|r| (r[1].as_str(), r[2].as_str())).collect();
    assert_eq!(ids, [("S0", "500"), ("S1", "500")]);
    assert_eq!(
        r[0][3],
        (500 * 128).to_string(),
        "MsgBytes: the payloads read"
    );

    // nats bench js get batch --batch 64 --clients 2 --msgs 500: batched direct gets, one
    // latency per batch (8 of them: 7 x 64 + 52).
    let args = [
        "js",
        "get",
        "batch",
        "--batch",
        "64",
        "--clients",
        "2",
        "--msgs",
        "500",
        "--csv",
        "gb.csv",
    ];
    let (out, _) = ok(d, u, &args).await;
    assert!(
        out.contains("NATS JetStream batched direct getter aggregated stats: "),
        "{out}"
    );
    let r = rows(&d.join("gb.csv"), HEADER_LAT);
    let ids: Vec<(&str, &str)> = r.iter().map(|r| (r[1].as_str(), r[2].as_str())).collect();
    assert_eq!(ids, [("S0", "500"), ("S1", "500")]);
    // No get failed (diskpulse's extras: Errors is the 9th column).
    let extras = std::fs::read_to_string(d.join("gb.diskpulse.csv")).unwrap();
    for l in extras.lines().skip(1) {
        assert_eq!(l.split(',').nth(8), Some("0"), "{extras}");
    }

    // More than the stream holds: the gets past its last sequence fail, exit 1.
    let (code, _, err) = tokio::task::spawn_blocking({
        let (d, u) = (d.to_path_buf(), u.to_string());
        move || run(&d, &u, &["js", "get", "sync", "--msgs", "510"])
    })
    .await
    .unwrap();
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("not_found") || err.contains("not found"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_all_is_an_ack_all_consumer_and_core_pub_times_each_publish() {
    let Some((srv, dir)) = setup() else { return };
    let (d, u) = (dir.path(), srv.url.as_str());
    ok(d, u, &["js", "pub", "foo", "--create", "--msgs", "2000"]).await;
    let nc = async_nats::connect(u).await.unwrap();
    let js = async_nats::jetstream::new(nc);
    // Watch the durable while `js fetch --acks=all` runs.
    let watch = tokio::spawn(async move {
        for _ in 0..2000 {
            if let Ok(s) = js.get_stream("benchstream").await {
                if let Ok(i) = s.consumer_info("diskpulse-benchstream").await {
                    return Some(i.config.ack_policy);
                }
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        None
    });
    let args = [
        "js",
        "fetch",
        "--acks=all",
        "--batch",
        "100",
        "--msgs",
        "2000",
        "--csv",
        "f.csv",
    ];
    let (_, err) = ok(d, u, &args).await;
    assert!(err.contains("--ack all"), "{err}");
    assert_eq!(
        watch.await.unwrap(),
        Some(async_nats::jetstream::consumer::AckPolicy::All)
    );
    let r = rows(&d.join("f.csv"), HEADER_LAT);
    assert_eq!(r[0][2], "2000");
    // --doubleack: each ack waits for the server's reply; the consumer still gets all.
    let args = [
        "js",
        "consume",
        "--doubleack",
        "--msgs",
        "500",
        "--csv",
        "c.csv",
    ];
    let (_, err) = ok(d, u, &args).await;
    assert!(err.contains("--double-ack"), "{err}");
    assert_eq!(rows(&d.join("c.csv"), HEADER_LAT)[0][2], "500");

    // Core pub: natscli v0.2's latency columns are each publish call's time, not 0.
    let args = [
        "pub",
        "foo.core",
        "--clients",
        "2",
        "--msgs",
        "2000",
        "--csv",
        "p.csv",
    ];
    ok(d, u, &args).await;
    for r in rows(&d.join("p.csv"), HEADER_LAT) {
        let lat: Vec<f64> = r[7..].iter().map(|x| x.parse().unwrap()).collect();
        assert!(lat[0] > 0.0 && lat[2] >= lat[0], "min, max: {r:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fast_batches_and_unknown_modes_are_refused_saying_why_and_v01_history_is_the_bucket_s() {
    let Some((srv, dir)) = setup() else { return };
    let (d, u) = (dir.path(), srv.url.as_str());
    for (args, says) in [
        (
            &["js", "pub", "fast", "foo"][..],
            "js pub fast is not run here",
        ),
        (&["js", "get", "all"], "js get all"),
        (
            &["js", "pub", "atomic", "foo", "--batch", "1001"],
            "1 to 1000",
        ),
        (&["sub", "foo", "--payload", "x"], "--payload"),
        (&["pub", "foo", "-H", "novalue"], "KEY:VALUE"),
    ] {
        let (code, out, err) = run(d, u, args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?}: {out}");
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    // natscli v0.1: nats bench s --kv --pub 1 --history 5
    let args = [
        "s",
        "--kv",
        "--pub",
        "1",
        "--msgs",
        "50",
        "--history",
        "5",
        "--bucket",
        "H5",
    ];
    ok(d, u, &args).await;
    let js = async_nats::jetstream::new(async_nats::connect(u).await.unwrap());
    let kv = js.get_key_value("H5").await.unwrap();
    assert_eq!(kv.status().await.unwrap().history(), 5);
    // natscli v0.1's --retries is parsed and never read there: taken, and said so.
    let args = ["s", "--js", "--pub", "1", "--msgs", "10", "--retries", "5"];
    let (_, err) = ok(d, u, &args).await;
    assert!(
        err.contains("--retries 5: natscli 0.1 parses it and never uses it"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multisubject_spreads_messages_over_numbered_subjects_that_receivers_and_the_stream_take() {
    let Some((srv, dir)) = setup() else { return };
    let (d, u) = (dir.path(), srv.url.as_str());
    let nc = async_nats::connect(u).await.unwrap();
    // natscli v0.2: nats bench pub ms --multisubject --multisubjectmax 100 (zero-padded).
    let mut sub = nc.subscribe("ms.*").await.unwrap();
    nc.flush().await.unwrap();
    let args = [
        "pub",
        "ms",
        "--clients",
        "2",
        "--msgs",
        "300",
        "--multisubject",
        "--multisubjectmax",
        "100",
    ];
    ok(d, u, &args).await;
    let mut counts = std::collections::BTreeMap::new();
    for _ in 0..300 {
        let m = tokio::time::timeout(Duration::from_secs(5), sub.next())
            .await
            .expect("all 300 on ms.*")
            .unwrap();
        *counts.entry(m.subject.to_string()).or_insert(0u32) += 1;
    }
    let want: Vec<String> = (0..100).map(|n| format!("ms.{n:03}")).collect();
    assert_eq!(counts.keys().cloned().collect::<Vec<_>>(), want);
    assert!(counts.values().all(|&c| c == 3), "{counts:?}");

    // --multisubjectrandomize: subjects drawn below the max, not in turn.
    let mut sub = nc.subscribe("msr.*").await.unwrap();
    nc.flush().await.unwrap();
    let args = [
        "pub",
        "msr",
        "--msgs",
        "200",
        "--multisubject",
        "--multisubjectmax",
        "10",
        "--multisubjectrandomize",
    ];
    ok(d, u, &args).await;
    let mut order = vec![];
    for _ in 0..200 {
        let m = tokio::time::timeout(Duration::from_secs(5), sub.next())
            .await
            .expect("all 200 on msr.*")
            .unwrap();
        order.push(m.subject.to_string());
    }
    let allowed: Vec<String> = (0..10).map(|n| format!("msr.{n:02}")).collect();
    assert!(order.iter().all(|s| allowed.contains(s)), "{order:?}");
    let in_turn: Vec<String> = (0..200).map(|i| allowed[i % 10].clone()).collect();
    assert_ne!(order, in_turn, "drawn at random, not in turn");

    // natscli v0.1: nats bench ms1 --pub 2 --sub 2 --multisubject: every subscriber (on
    // ms1.*) gets every message; and --js: the stream captures ms2.*.
    let args = [
        "ms1",
        "--pub",
        "2",
        "--sub",
        "2",
        "--multisubject",
        "--msgs",
        "1000",
        "--csv",
        "v1.csv",
    ];
    ok(d, u, &args).await;
    let t = std::fs::read_to_string(d.join("v1.csv")).unwrap();
    let subs: Vec<&str> = t.lines().filter(|l| l.contains(",S")).collect();
    assert_eq!(subs.len(), 2, "{t}");
    assert!(
        subs.iter().all(|l| l.split(',').nth(2) == Some("1000")),
        "{t}"
    );
    let args = [
        "ms2",
        "--js",
        "--pub",
        "1",
        "--multisubject",
        "--msgs",
        "50",
        "--stream",
        "MS2",
    ];
    ok(d, u, &args).await;
    let js = async_nats::jetstream::new(nc);
    let mut s = js.get_stream("MS2").await.unwrap();
    let info = s.info().await.unwrap();
    assert_eq!(info.config.subjects, ["ms2.*"]);
    assert_eq!(info.state.messages, 50);
    assert_eq!(
        s.get_raw_message(50).await.unwrap().subject.as_str(),
        "ms2.49"
    );
}
