//! The AMQP load rides through a broker restart (issue 14 item 2): a real RabbitMQ node
//! is stopped (SIGTERM, a clean stop) and started again with its data while a paced
//! load runs in this process. The load finishes; the outage is in its events; the counts
//! add up (every publish confirmed or counted lost, every call answered or counted
//! failed); every confirmed message is consumed; the open-loop schedule is kept across
//! the outage (a message scheduled while the node was down waited for it, and its latency
//! from the intended start says so); the node and its epmd are gone afterwards.

mod common;
use common::*;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use collectors::clock::Clock;
use diskpulse::broker::{BrokerProcess, RabbitNode, RabbitOptions};
use diskpulse::format::events::Event;
use diskpulse::load::record::{ClientTotals, Role};
use diskpulse::load::{self, LoadEnv};
use diskpulse::recording::EventLog;

struct Node {
    node: RabbitNode,
    dir: tempfile::TempDir,
}

impl Node {
    async fn start(name: &str) -> Option<Node> {
        if !have_rabbitmq() {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let mut o = RabbitOptions::new(dir.path().join("store"), dir.path().join("run"));
        o.name = name.into();
        let node = RabbitNode::start(o, &EventLog::disabled(Clock::start()))
            .await
            .unwrap();
        Some(Node { node, dir })
    }

    /// Stops the node and checks that nothing of it runs any more.
    async fn stop_and_check_gone(mut self) {
        let (pid, epmd) = (self.node.pid(), self.node.epmd_pid());
        self.node.stop().await.unwrap();
        for p in [pid, epmd] {
            let t0 = Instant::now();
            while process_exists(p) && t0.elapsed() < Duration::from_secs(5) {
                std::thread::sleep(Duration::from_millis(50));
            }
            assert!(
                !process_exists(p),
                "pid {p} (beam.smp or our epmd) still runs"
            );
        }
        assert!(!self
            .dir
            .path()
            .join("store/diskpulse-rabbitmq.pids")
            .exists());
    }
}

/// A load run in this process, its events in a file of their own.
struct Run {
    handle: tokio::task::JoinHandle<anyhow::Result<load::LoadOutcome>>,
    events: std::path::PathBuf,
    /// Ctrl-C.
    stop: Arc<AtomicBool>,
    _dir: tempfile::TempDir,
}

fn start_load(url: &str, argv: &[&str]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("events.jsonl");
    let clock = Clock::start();
    let a = load::args_from(argv.iter().copied()).unwrap();
    a.validate().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let env = LoadEnv {
        clock,
        events: EventLog::create(&events, clock).unwrap(),
        stop: stop.clone(),
        servers: vec![url.to_string()],
        load_csv: None,
    };
    let handle = tokio::spawn(async move { load::run(&a, &env).await });
    Run {
        handle,
        events,
        stop,
        _dir: dir,
    }
}

fn events(path: &std::path::Path) -> Vec<Event> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn of_client<'a>(ev: &'a [Event], kind: &str, client: &str) -> Vec<&'a Event> {
    ev.iter()
        .filter(|e| e.kind() == kind && e.detail()["client"].as_str() == Some(client))
        .collect()
}

fn ops(clients: &[ClientTotals], role: Role) -> u64 {
    clients
        .iter()
        .filter(|c| c.role == role)
        .map(|c| c.ops)
        .sum()
}

fn kind(clients: &[ClientTotals], role: Role, kind: &str) -> u64 {
    clients
        .iter()
        .filter(|c| c.role == role)
        .map(|c| c.errors_by_kind.get(kind).copied().unwrap_or(0))
        .sum()
}

fn kinds(clients: &[ClientTotals], role: Role) -> Vec<&'static str> {
    let mut k: Vec<&'static str> = clients
        .iter()
        .filter(|c| c.role == role)
        .flat_map(|c| c.errors_by_kind.keys().copied())
        .collect();
    k.sort();
    k.dedup();
    k
}

/// Stops the node once `after` has passed (SIGTERM, a clean stop; or SIGKILL: a crash),
/// starts it again; returns how long it was gone: from the stop's return (nothing
/// answers) to the start's (it serves again).
async fn restart_after(n: &mut Node, after: Duration, crash: bool) -> Duration {
    tokio::time::sleep(after).await;
    if crash {
        n.node.kill();
    } else {
        n.node.stop().await.unwrap();
    }
    let gone = Instant::now();
    n.node.start_again().await.unwrap();
    gone.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paced_publisher_rides_through_a_restart_and_every_confirmed_message_is_consumed() {
    let Some(mut n) = Node::start("ride-pub").await else {
        return;
    };
    let url = n.node.amqp_url();
    // 1000 messages at 250 msgs/s: a 4 s schedule, the node away from 1 s on.
    let run = start_load(
        &url,
        &[
            "amqp-pub",
            "--msgs",
            "1000",
            "--rate",
            "250",
            "--window",
            "64",
            "--queue-type",
            "quorum",
            "--queue",
            "ride",
            "--consume",
            "1",
            "--prefetch",
            "64",
            "--quiet",
        ],
    );
    let down = restart_after(&mut n, Duration::from_secs(1), false).await;
    let out = tokio::time::timeout(Duration::from_secs(120), run.handle)
        .await
        .expect("the load finished within 120 s")
        .unwrap()
        .expect("the load ended without an error");
    let c = &out.clients;
    let ev = events(&run.events);

    // The outage is in the events, once per client: disconnected, reconnected, the first
    // confirm after it.
    for client in ["diskpulse-amqp-pub-0", "diskpulse-amqp-consume-0"] {
        assert_eq!(
            of_client(&ev, "amqp_disconnected", client).len(),
            1,
            "{client}: {ev:?}"
        );
        assert_eq!(
            of_client(&ev, "amqp_reconnected", client).len(),
            1,
            "{client}"
        );
    }
    assert_eq!(
        of_client(&ev, "first_ack_after_reconnect", "diskpulse-amqp-pub-0").len(),
        1
    );

    // Every publish is confirmed or counted lost: nothing else happened to them.
    let confirmed = ops(c, Role::AmqpPub);
    let lost = kind(c, Role::AmqpPub, "lost_unconfirmed");
    let pub_kinds = kinds(c, Role::AmqpPub);
    assert!(
        pub_kinds.iter().all(|k| *k == "lost_unconfirmed"),
        "{pub_kinds:?}"
    );
    assert_eq!(
        confirmed + lost,
        1000,
        "confirmed {confirmed} + lost {lost}"
    );
    assert!(confirmed >= 500, "only {confirmed} confirmed");

    // Every confirmed message is consumed, once, by the consumer that rode through the
    // restart beside the publisher (unconfirmed ones may have been stored too; one
    // delivered again is a `duplicate`, not counted twice).
    let beside = ops(c, Role::AmqpConsume);
    assert!(
        beside >= confirmed && beside <= 1000,
        "consumed {beside}, confirmed {confirmed}, sent 1000"
    );
    // What is left in the queue: messages it consumed and acked whose acks the broker
    // never got (the connection dropped first), delivered again to the next consumer:
    // at least once. Never more than the consumer's prefetch window at the drop.
    let after = start_load(
        &url,
        &[
            "amqp-consume",
            "--queue-type",
            "quorum",
            "--queue",
            "ride",
            "--quiet",
        ],
    );
    let drained = tokio::time::timeout(Duration::from_secs(60), after.handle)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let again = ops(&drained.clients, Role::AmqpConsume);
    let prefetch = 64;
    assert!(again <= prefetch, "{again} messages left after the run");
    // A consumer's failures: a message delivered again, an ack that failed with the
    // connection (that message is delivered again and counted then).
    let cons_kinds = kinds(c, Role::AmqpConsume);
    assert!(
        cons_kinds
            .iter()
            .all(|k| ["duplicate", "connection_lost"].contains(k)),
        "{cons_kinds:?}"
    );

    // No coordinated omission: a message scheduled while the node was gone waited for it,
    // and its latency from the intended start includes that wait.
    let co_max = c
        .iter()
        .filter(|c| c.role == Role::AmqpPub)
        .map(|c| c.co.max())
        .max()
        .unwrap();
    assert!(
        co_max as f64 >= down.as_nanos() as f64 * 0.9,
        "the largest latency from the intended start {} ms < the outage {} ms",
        co_max / 1_000_000,
        down.as_millis()
    );
    println!(
        "outage {} ms; confirmed {confirmed}, lost_unconfirmed {lost}, consumed {beside}, left in the queue {again}, duplicates {}; co max {} ms",
        down.as_millis(),
        kind(c, Role::AmqpConsume, "duplicate"),
        co_max / 1_000_000
    );
    n.stop_and_check_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paced_caller_rides_through_a_restart_and_counts_the_calls_the_outage_failed() {
    let Some(mut n) = Node::start("ride-call").await else {
        return;
    };
    let url = n.node.amqp_url();
    // The node is killed (a crash) 1 s in and started again. 40 calls/s for 30 s: exactly
    // 1200 intended starts, many of them after the node is back (its start took 5 to
    // 15 s on a busy machine of ours, a clean stop 5 s more); a call not
    // answered within 2 s of its send, or not sent within 2 s of its intended start, is a
    // timeout.
    let run = start_load(
        &url,
        &[
            "amqp-call",
            "--duration",
            "30s",
            "--rate",
            "40",
            "--window",
            "16",
            "--timeout",
            "2s",
            "--reply",
            "1",
            "--queue",
            "ride-rpc",
            "--quiet",
        ],
    );
    let down = restart_after(&mut n, Duration::from_secs(1), true).await;
    let out = tokio::time::timeout(Duration::from_secs(120), run.handle)
        .await
        .expect("the load finished within 120 s")
        .unwrap()
        .expect("the load ended without an error");
    let c = &out.clients;
    let ev = events(&run.events);
    for client in ["diskpulse-amqp-call-0", "diskpulse-amqp-serve-0"] {
        assert_eq!(
            of_client(&ev, "amqp_reconnected", client).len(),
            1,
            "{client}: {ev:?}"
        );
    }
    // Replies come again after the restart: the first within a second of the reconnect,
    // and the node back well before the schedule's end (else this test says nothing).
    let back = of_client(&ev, "amqp_reconnected", "diskpulse-amqp-call-0")[0].t_ns;
    assert!(
        back < 26_000_000_000,
        "the node came back only {} s into a 30 s schedule: too busy a machine for this test",
        back / 1_000_000_000
    );
    let first = of_client(&ev, "first_ack_after_reconnect", "diskpulse-amqp-call-0");
    assert_eq!(first.len(), 1, "{ev:?}");
    assert!(first[0].t_ns - back < 1_000_000_000);
    // Every call is answered, or failed by the outage (outstanding when the connection
    // dropped, or due while the node was gone for longer than --timeout), or left
    // unanswered at the end: nothing dropped silently.
    let answered = ops(c, Role::AmqpCall);
    let failed: u64 = ["connection_lost", "timeout", "unanswered"]
        .iter()
        .map(|k| kind(c, Role::AmqpCall, k))
        .sum();
    let call_kinds = kinds(c, Role::AmqpCall);
    assert!(
        call_kinds
            .iter()
            .all(|k| ["connection_lost", "timeout", "unanswered", "late_reply"].contains(k)),
        "{call_kinds:?}"
    );
    assert_eq!(
        answered + failed,
        1200,
        "answered {answered} + failed {failed}"
    );
    // The node was gone for longer than --timeout: the calls due meanwhile failed.
    assert!(down > Duration::from_secs(2), "outage {down:?}");
    // Before the kill (1 s) and after the return (4 s or more of the schedule), 40/s.
    assert!(
        failed > 0 && answered >= 150,
        "answered {answered}, failed {failed}"
    );
    println!(
        "outage {} ms; answered {answered}, failed {failed}: connection_lost {}, timeout {}, unanswered {}",
        down.as_millis(),
        kind(c, Role::AmqpCall, "connection_lost"),
        kind(c, Role::AmqpCall, "timeout"),
        kind(c, Role::AmqpCall, "unanswered"),
    );
    for e in ev
        .iter()
        .filter(|e| e.kind().starts_with("amqp_") || e.kind().contains("after_reconnect"))
    {
        println!("  {:.3} s {} {}", e.t_ns as f64 / 1e9, e.kind(), e.detail());
    }
    n.stop_and_check_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_while_the_broker_is_away_ends_the_load_at_once_with_what_it_counted() {
    let Some(mut n) = Node::start("ride-stop").await else {
        return;
    };
    let url = n.node.amqp_url();
    let run = start_load(
        &url,
        &[
            "amqp-pub",
            "--duration",
            "60s",
            "--rate",
            "200",
            "--consume",
            "1",
            "--queue",
            "ride-stop",
            "--quiet",
        ],
    );
    // The node dies 1 s in and does not come back; Ctrl-C 1 s later.
    tokio::time::sleep(Duration::from_secs(1)).await;
    n.node.kill();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let t0 = Instant::now();
    run.stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let out = tokio::time::timeout(Duration::from_secs(30), run.handle)
        .await
        .expect("the load ended within 30 s of Ctrl-C")
        .unwrap()
        .expect("the load ended without an error");
    let ended = t0.elapsed();
    assert!(
        ended < Duration::from_secs(3),
        "ended {ended:?} after Ctrl-C"
    );
    let c = &out.clients;
    let ev = events(&run.events);
    // Each client gave up reconnecting because of the stop, once.
    for client in ["diskpulse-amqp-pub-0", "diskpulse-amqp-consume-0"] {
        let failed = of_client(&ev, "amqp_reconnect_failed", client);
        assert_eq!(failed.len(), 1, "{client}: {ev:?}");
        assert_eq!(
            failed[0].detail()["error"].as_str(),
            Some("the run was stopped")
        );
    }
    // What was confirmed before the kill is counted; nothing else went wrong.
    assert!(ops(c, Role::AmqpPub) >= 100, "{}", ops(c, Role::AmqpPub));
    let pub_kinds = kinds(c, Role::AmqpPub);
    assert!(
        pub_kinds.iter().all(|k| *k == "lost_unconfirmed"),
        "{pub_kinds:?}"
    );
    println!(
        "ended {} ms after Ctrl-C; confirmed {}, lost_unconfirmed {}",
        ended.as_millis(),
        ops(c, Role::AmqpPub),
        kind(c, Role::AmqpPub, "lost_unconfirmed")
    );
    n.stop_and_check_gone().await;
}
