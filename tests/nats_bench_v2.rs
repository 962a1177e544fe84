//! `diskpulse nats-bench` in natscli v0.2's form: each of the 15 lines of natscli's
//! `cli/cheats/bench.md` (scaled down: fewer messages, lower rates) against a JetStream
//! nats-server of our own, each exiting 0, printing natscli v0.2's report for its kind and
//! writing natscli v0.2's CSV header; the walkthrough's v0.1 line beside them with v0.1's
//! header; `--` for a v0.1 subject spelled like a subcommand; responders that end by
//! themselves at --msgs; --throughput, --duration and --sleep counted.

mod common;
use common::*;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// natscli v0.2's headers (internal/bench/stats.go).
const HEADER: &str = "#RunID,ClientID,MsgCount,MsgBytes,MsgsPerSec,BytesPerSec,DurationSecs";
const HEADER_LAT: &str = "#RunID,ClientID,MsgCount,MsgBytes,MsgsPerSec,BytesPerSec,DurationSecs,MinLatencyMicroSecs,AvgLatencyMicroSecs,MaxLatencyMicroSecs,P50LatencyMicroSecs,P90LatencyMicroSecs,P99LatencyMicroSecs,P99.9LatencyMicroSecs,StdDevLatencyMicroSecs";

fn cmd(dir: &Path, url: &str, args: &[&str]) -> Command {
    let mut c = diskpulse();
    c.arg("nats-bench")
        .args(args)
        .args(["--server", url])
        .current_dir(dir);
    for v in [
        "NATS_URL",
        "NATS_USER",
        "NATS_PASSWORD",
        "DISKPULSE_RUN_DIR",
    ] {
        c.env_remove(v);
    }
    c
}

/// Runs `nats-bench ARGS --server URL --csv out.csv` in `dir`: (exit code, stdout, csv).
fn bench(dir: &Path, url: &str, args: &[&str]) -> (i32, String, String) {
    let csv = dir.join("out.csv");
    let _ = std::fs::remove_file(&csv);
    let o = cmd(dir, url, args).arg("--csv").arg(&csv).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    let code = o.status.code().unwrap_or(-1);
    assert_eq!(code, 0, "{args:?}\nstdout:\n{out}\nstderr:\n{err}");
    (code, out, std::fs::read_to_string(&csv).unwrap_or_default())
}

/// The CSV's rows after checking its header; every row has the header's column count.
fn rows(csv: &str, header: &str) -> Vec<Vec<String>> {
    let mut l = csv.lines();
    assert_eq!(l.next(), Some(header), "{csv}");
    let n = header.split(',').count();
    let rows: Vec<Vec<String>> = l
        .map(|r| r.split(',').map(String::from).collect())
        .collect();
    for r in &rows {
        assert_eq!(r.len(), n, "{r:?}");
    }
    rows
}

/// The sum of MsgCount, after checking the ids are PREFIX0..PREFIX(n-1).
fn total(rows: &[Vec<String>], prefix: &str, n: usize) -> u64 {
    let ids: Vec<String> = rows.iter().map(|r| r[1].clone()).collect();
    let want: Vec<String> = (0..n).map(|i| format!("{prefix}{i}")).collect();
    assert_eq!(ids, want);
    rows.iter().map(|r| r[2].parse::<u64>().unwrap()).sum()
}

/// natscli's multi-client report: `[1]`..`[n]` lines, the aggregate, the rates line and,
/// with latencies, the latencies line.
fn check_aggregated(out: &str, label: &str, n: usize, latencies: bool) {
    for i in 1..=n {
        assert!(out.contains(&format!("\n [{i}] ")), "[{i}] in:\n{out}");
    }
    assert!(
        out.contains(&format!("\n NATS {label} aggregated stats: ")),
        "{label} in:\n{out}"
    );
    assert!(out.contains("\n message rates min "), "{out}");
    assert_eq!(
        out.contains("\n latencies per operation min "),
        latencies,
        "{out}"
    );
}

/// A background `nats-bench` (a subscriber or a server), killed if still there on drop.
struct Bg(Child);

impl Bg {
    fn spawn(dir: &Path, url: &str, args: &[&str]) -> Bg {
        Bg(cmd(dir, url, args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap())
    }

    /// Waits up to `secs` for it to end by itself: (exit code, stdout).
    fn wait(mut self, secs: u64) -> (i32, String) {
        let t0 = Instant::now();
        while self.0.try_wait().unwrap().is_none() {
            assert!(
                t0.elapsed() < Duration::from_secs(secs),
                "did not end by itself in {secs} s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let o = std::mem::replace(&mut self.0, Command::new("true").spawn().unwrap())
            .wait_with_output()
            .unwrap();
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stdout).into_owned(),
        )
    }

    fn ended(&mut self) -> bool {
        self.0.try_wait().unwrap().is_some()
    }
}

impl Drop for Bg {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One request until the service answers (each counts one served request).
fn until_served(dir: &Path, url: &str, subject: &str) {
    for _ in 0..100 {
        let ok = cmd(dir, url, &["service", "request", subject, "--msgs", "1"])
            .output()
            .unwrap()
            .status
            .success();
        if ok {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the service on {subject} never answered");
}

fn setup() -> Option<(JsServer, tempfile::TempDir)> {
    if !have_nats_server() {
        return None;
    }
    Some((JsServer::start(), tempfile::tempdir().unwrap()))
}

#[test]
fn core_pub_sub_and_rate_lines_of_the_cheat_sheet_run_in_natscli_v2_s_shape() {
    let Some((srv, dir)) = setup() else { return };
    let (d, u) = (dir.path(), srv.url.as_str());
    // nats bench pub foo --clients 10 --msgs 10000 --size 512
    let (_, out, csv) = bench(
        d,
        u,
        &[
            "pub",
            "foo",
            "--clients",
            "10",
            "--msgs",
            "2000",
            "--size",
            "512",
        ],
    );
    check_aggregated(&out, "Core NATS publisher", 10, true);
    let r = rows(&csv, HEADER_LAT);
    assert_eq!(total(&r, "P", 10), 2000);
    assert!(r
        .iter()
        .all(|r| r[3].parse::<u64>().unwrap() == 512 * r[2].parse::<u64>().unwrap()));

    // nats bench sub foo --clients 5 --msgs 10000: publishers until every subscriber has its share.
    let mut sub = Bg::spawn(
        d,
        u,
        &[
            "sub",
            "foo",
            "--clients",
            "5",
            "--msgs",
            "1000",
            "--csv",
            "sub.csv",
        ],
    );
    let mut batches = 0;
    while !sub.ended() && batches < 20 {
        bench(d, u, &["pub", "foo", "--msgs", "1000", "--no-progress"]);
        batches += 1;
        std::thread::sleep(Duration::from_millis(300));
    }
    let (code, out) = sub.wait(30);
    assert_eq!(code, 0, "{out}");
    check_aggregated(&out, "Core NATS subscriber", 5, false);
    let r = rows(&std::fs::read_to_string(d.join("sub.csv")).unwrap(), HEADER);
    assert!(total(&r, "S", 5) >= 5000, "{r:?}");

    // nats bench pub foo --sleep=100ns
    let (_, out, csv) = bench(d, u, &["pub", "foo", "--sleep=100ns", "--msgs", "2000"]);
    assert!(out.contains("\nNATS Core NATS publisher stats: "), "{out}");
    assert_eq!(total(&rows(&csv, HEADER_LAT), "P", 1), 2000);

    // nats bench pub foo --msgs 1000000 --clients 4 --throughput 50000
    let (_, out, csv) = bench(
        d,
        u,
        &[
            "pub",
            "foo",
            "--msgs",
            "2000",
            "--clients",
            "4",
            "--throughput",
            "4000",
        ],
    );
    check_aggregated(&out, "Core NATS publisher", 4, true);
    let r = rows(&csv, HEADER_LAT);
    assert_eq!(total(&r, "P", 4), 2000);
    // 2000 at 4000/s: 0.5 s; paced, never much faster (generous: 0.3 s).
    let secs = |r: &[Vec<String>]| {
        r.iter()
            .map(|r| r[6].parse::<f64>().unwrap())
            .fold(0.0, f64::max)
    };
    assert!(secs(&r) > 0.3, "{r:?}");

    // nats bench pub foo --clients 4 --throughput 50000 --duration 30s: msgs = 2000 x 1.
    let (_, _, csv) = bench(
        d,
        u,
        &[
            "pub",
            "foo",
            "--clients",
            "4",
            "--throughput",
            "2000",
            "--duration",
            "1s",
        ],
    );
    let r = rows(&csv, HEADER_LAT);
    assert_eq!(total(&r, "P", 4), 2000, "THROUGHPUT x DURATION messages");
    assert!(secs(&r) > 0.6 && secs(&r) < 10.0, "about 1 s: {r:?}");

    // --sleep 1ms: each client at most 1000 msgs/s, so 300 take 0.3 s or more.
    let (_, _, csv) = bench(d, u, &["pub", "foo", "--sleep", "1ms", "--msgs", "300"]);
    let r = rows(&csv, HEADER_LAT);
    assert!(secs(&r) > 0.2, "{r:?}");
}

#[test]
fn service_lines_run_and_servers_end_at_msgs() {
    let Some((srv, dir)) = setup() else { return };
    let (d, u) = (dir.path(), srv.url.as_str());
    // nats bench service serve --clients 4 testservice (ending after 2000 + the probes).
    let serve = Bg::spawn(
        d,
        u,
        &[
            "service",
            "serve",
            "--clients",
            "4",
            "testservice",
            "--msgs",
            "2001",
            "--no-progress",
        ],
    );
    // Only the probe that was answered is served: 2000 more end the servers.
    until_served(d, u, "testservice");
    // nats bench service request --clients 4 testservice --msgs 20000
    let (_, out, csv) = bench(
        d,
        u,
        &[
            "service",
            "request",
            "--clients",
            "4",
            "testservice",
            "--msgs",
            "2000",
        ],
    );
    check_aggregated(&out, "Core NATS service requester", 4, true);
    assert_eq!(total(&rows(&csv, HEADER_LAT), "P", 4), 2000);
    let (code, out) = serve.wait(30);
    assert_eq!(code, 0);
    assert!(
        out.contains("No publisher or subscribers. Nothing to report."),
        "{out}"
    );

    // nats bench service serve testservice --sleep 50us
    let serve = Bg::spawn(
        d,
        u,
        &[
            "service", "serve", "slow", "--sleep", "50us", "--msgs", "201",
        ],
    );
    until_served(d, u, "slow");
    bench(d, u, &["service", "request", "slow", "--msgs", "200"]);
    assert_eq!(serve.wait(30).0, 0);

    // natscli v0.1's --reply --sub 2 --msgs 2000 ends by itself too.
    let reply = Bg::spawn(d, u, &["v1", "--reply", "--sub", "2", "--msgs", "2001"]);
    until_served(d, u, "v1");
    bench(d, u, &["v1", "--request", "--pub", "2", "--msgs", "2000"]);
    assert_eq!(reply.wait(30).0, 0);
}

#[test]
fn jetstream_and_kv_lines_run_in_natscli_v2_s_shape() {
    let Some((srv, dir)) = setup() else { return };
    let (d, u) = (dir.path(), srv.url.as_str());
    // nats bench js pub foo --create --batch 1000
    let (_, out, csv) = bench(
        d,
        u,
        &[
            "js", "pub", "foo", "--create", "--batch", "1000", "--msgs", "5000",
        ],
    );
    assert!(
        out.contains("\nNATS JetStream asynchronous publisher stats: "),
        "{out}"
    );
    assert!(
        out.contains(" ~ P99.9: "),
        "an async publisher's latencies: {out}"
    );
    assert_eq!(total(&rows(&csv, HEADER_LAT), "P", 1), 5000);
    // nats bench js pub foo --purge --batch=1 --clients=10
    let (_, out, csv) = bench(
        d,
        u,
        &[
            "js",
            "pub",
            "foo",
            "--purge",
            "--batch=1",
            "--clients=10",
            "--msgs",
            "500",
        ],
    );
    check_aggregated(&out, "JetStream synchronous publisher", 10, true);
    assert_eq!(total(&rows(&csv, HEADER_LAT), "P", 10), 500);
    // nats bench js ordered --no-progress
    let (_, out, csv) = bench(d, u, &["js", "ordered", "--no-progress", "--msgs", "500"]);
    assert!(
        out.contains("\nNATS JetStream ordered ephemeral consumer stats: "),
        "{out}"
    );
    assert_eq!(total(&rows(&csv, HEADER_LAT), "S", 1), 500);
    // nats bench js consume --clients 4
    let (_, out, csv) = bench(d, u, &["js", "consume", "--clients", "4", "--msgs", "500"]);
    check_aggregated(&out, "JetStream durable consumer (callback)", 4, true);
    assert_eq!(total(&rows(&csv, HEADER_LAT), "S", 4), 500);
    // nats bench js fetch --clients 4 --acks=none --batch=1000
    let (_, out, csv) = bench(
        d,
        u,
        &[
            "js",
            "fetch",
            "--clients",
            "4",
            "--acks=none",
            "--batch=100",
            "--msgs",
            "500",
        ],
    );
    check_aggregated(&out, "JetStream durable consumer (fetch)", 4, true);
    assert_eq!(total(&rows(&csv, HEADER_LAT), "S", 4), 500);
    // nats bench kv put --clients 10
    let (_, out, csv) = bench(d, u, &["kv", "put", "--clients", "10", "--msgs", "1000"]);
    check_aggregated(&out, "JetStream KV putter", 10, true);
    assert_eq!(total(&rows(&csv, HEADER_LAT), "P", 10), 1000);
    // nats bench kv get --randomize=100000 --clients 10
    let (_, out, csv) = bench(
        d,
        u,
        &[
            "kv",
            "get",
            "--randomize=1000",
            "--clients",
            "10",
            "--msgs",
            "1000",
        ],
    );
    check_aggregated(&out, "JetStream KV getter", 10, true);
    assert_eq!(total(&rows(&csv, HEADER_LAT), "S", 10), 1000);
}

#[test]
fn the_walkthrough_s_v01_line_and_a_subject_after_dashes_keep_v01_s_shape() {
    let Some((srv, dir)) = setup() else { return };
    let (d, u) = (dir.path(), srv.url.as_str());
    // nats bench my_subject --msgs 1000000 --pub 4 --sub 4 --csv=results.csv
    let (_, out, csv) = bench(
        d,
        u,
        &["my_subject", "--msgs", "20000", "--pub", "4", "--sub", "4"],
    );
    assert!(out.contains("NATS Pub/Sub stats: "), "{out}");
    let r = rows(&csv, HEADER);
    assert_eq!(r.len(), 8);
    // A v0.1 subject spelled like a v0.2 subcommand: after `--`.
    let mut c = diskpulse();
    c.args([
        "nats-bench",
        "--server",
        u,
        "--pub",
        "1",
        "--msgs",
        "100",
        "--csv",
        "x.csv",
        "--",
        "pub",
    ])
    .current_dir(d)
    .env_remove("NATS_URL");
    let o = c.output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("Pub stats: "), "{out}");
    let r = rows(&std::fs::read_to_string(d.join("x.csv")).unwrap(), HEADER);
    assert_eq!(total(&r, "P", 1), 100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_is_a_push_consumer_whose_clients_share_a_queue_group() {
    let Some((srv, dir)) = setup() else { return };
    let (d, u) = (dir.path(), srv.url.as_str());
    // natscli v0.1: nats bench s --js --pub 1 --sub 2 --push
    let csv = d.join("push.csv");
    let mut run = Bg::spawn(
        d,
        u,
        &[
            "s", "--js", "--pub", "1", "--sub", "2", "--push", "--msgs", "20000", "--csv",
            "push.csv",
        ],
    );
    let js = async_nats::jetstream::new(async_nats::connect(u).await.unwrap());
    let mut seen = None;
    // The consumer lives from before the first publish to the end of the run.
    while seen.is_none() && !run.ended() {
        if let Ok(s) = js.get_stream("benchstream").await {
            if let Ok(info) = s.consumer_info("diskpulse-benchstream").await {
                seen = Some(info.config.clone());
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let cfg = seen.expect("the run's durable consumer, seen while it ran");
    assert_eq!(
        cfg.deliver_subject.as_deref(),
        Some("diskpulse.push.benchstream")
    );
    assert_eq!(cfg.deliver_group.as_deref(), Some("diskpulse"));
    let (code, out) = tokio::task::spawn_blocking(move || run.wait(60))
        .await
        .unwrap();
    assert_eq!(code, 0, "{out}");
    let r = rows(&std::fs::read_to_string(&csv).unwrap(), HEADER);
    let subs: Vec<u64> = r
        .iter()
        .filter(|r| r[1].starts_with('S'))
        .map(|r| r[2].parse().unwrap())
        .collect();
    assert_eq!(subs.len(), 2);
    assert_eq!(
        subs.iter().sum::<u64>(),
        20000,
        "the queue group split the messages: {subs:?}"
    );
    assert!(subs.iter().all(|&n| n > 0), "both got some: {subs:?}");
}
