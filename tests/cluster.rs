//! The broker metrics poller against real and absent servers.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use collectors::clock::Clock;
use diskpulse::broker::monitor::VARZ_CSV_HEADER;
use diskpulse::broker::start_monitor;
use diskpulse::recording::EventLog;

fn events_of(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
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
        dir.path(),
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
        dir.path(),
        events,
        stop,
        Duration::from_millis(250),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(e.contains("https"), "{e}");
}
