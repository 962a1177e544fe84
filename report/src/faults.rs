//! Faults under the load (issue 9): when the broker was gone, when it was back, how long
//! the load took to get its first ack after that, and how many operations it lost. Pure
//! functions of `events.jsonl` (run clock, ns in, s and ms out):
//!
//! - A node span runs from a scenario's `node_stop` or `node_kill` to that node's
//!   `restart_ready` (or its `restart` when no ready came).
//! - A client span runs from a `nats_client` `disconnected` to that client's next
//!   `connected` (async-nats's own events, for every connection of the load), or from an
//!   AMQP client's `amqp_disconnected` to its `amqp_reconnected` (none when it gave up:
//!   `amqp_reconnect_failed` leaves the span open).
//! - Spans that overlap are one fault. Its end (the broker back) is the first client
//!   reconnect in it, else the node's ready: what the load could see.
//! - The load's send loops emit `first_ack_after_reconnect` (`t_ns` = the first
//!   operation that succeeded after the reconnect, `reconnect_ns`, `failed`, `timeouts`)
//!   or `no_ack_after_reconnect` when the run ended first: the fault holding the
//!   `reconnect_ns` takes the earliest `t_ns` and the sums.

use std::collections::BTreeMap;

use format::events::{Body, Event, NodeKill, NodeStop, Restart, RestartReady};
use format::load::LoadRow;
use format::summary::Fault;

/// A span of one cause, before spans are merged.
struct Span {
    start_ns: u64,
    end_ns: Option<u64>,
    node: Option<(String, String)>,
    client: Option<String>,
}

/// The faults of a run, in time order.
pub fn faults(events: &[Event]) -> Vec<Fault> {
    let mut spans: Vec<Span> = vec![];
    for e in events {
        match &e.body {
            Body::NodeStop(NodeStop { node }) | Body::NodeKill(NodeKill { node, .. }) => {
                let cause = e.body.kind().to_string();
                spans.push(Span {
                    start_ns: e.t_ns,
                    end_ns: None,
                    node: Some((node.clone(), cause)),
                    client: None,
                });
            }
            Body::Restart(Restart { node, .. }) | Body::RestartReady(RestartReady { node, .. }) => {
                let ready = matches!(e.body, Body::RestartReady(_));
                if let Some(s) = spans.iter_mut().rev().find(|s| {
                    s.node.as_ref().map(|n| n.0.as_str()) == Some(node.as_str())
                        && (s.end_ns.is_none() || ready)
                }) {
                    // restart_ready comes after restart and wins.
                    if s.end_ns.is_none() || ready {
                        s.end_ns = Some(e.t_ns);
                    }
                }
            }
            Body::NatsClient(_) | Body::AmqpDisconnected(_) | Body::AmqpReconnected(_) => {
                let (client, what) = match &e.body {
                    Body::AmqpDisconnected(d) => (&d.client, "disconnected"),
                    Body::AmqpReconnected(r) => (&r.client, "connected"),
                    Body::NatsClient(c) => (&c.client, c.event.as_str()),
                    _ => continue,
                };
                let open = spans
                    .iter_mut()
                    .rev()
                    .find(|s| s.client.as_ref() == Some(client) && s.end_ns.is_none());
                match (what, open) {
                    ("disconnected", None) => spans.push(Span {
                        start_ns: e.t_ns,
                        end_ns: None,
                        node: None,
                        client: Some(client.to_string()),
                    }),
                    ("connected", Some(s)) => s.end_ns = Some(e.t_ns),
                    _ => {}
                }
            }
            _ => {}
        }
    }
    spans.sort_by_key(|s| s.start_ns);

    // Merge overlapping spans (an open span reaches to the end of the run).
    let mut groups: Vec<Vec<Span>> = vec![];
    let mut reach = 0u64;
    for s in spans {
        let overlaps = groups.last().is_some() && s.start_ns <= reach;
        let end = s.end_ns.unwrap_or(u64::MAX);
        if overlaps {
            reach = reach.max(end);
            groups.last_mut().unwrap().push(s);
        } else {
            reach = end;
            groups.push(vec![s]);
        }
    }

    let mut out: Vec<(u64, u64, Fault)> = groups.iter().map(|g| fault_of(g)).collect();
    // The load's own view: the first success after each reconnect, and what it lost.
    for e in events {
        let (first, a) = match &e.body {
            Body::FirstAckAfterReconnect(a) => (true, a),
            Body::NoAckAfterReconnect(a) => (false, a),
            _ => continue,
        };
        let r = a.reconnect_ns;
        // The fault that holds the reconnect (the loop sees it up to 10 ms late).
        let Some((_, _, f)) = out
            .iter_mut()
            .rev()
            .find(|(start, reach, _)| *start <= r && r <= reach.saturating_add(1_000_000_000))
        else {
            continue;
        };
        f.ops_lost += a.failed;
        f.timeouts += a.timeouts;
        if first {
            let t = e.t_ns as f64 / 1e9;
            if f.first_ack_s.is_none_or(|x| t < x) {
                f.first_ack_s = Some(t);
            }
        }
    }
    out.into_iter()
        .map(|(_, _, mut f)| {
            f.time_to_first_ack_ms = match (f.first_ack_s, f.end_s) {
                (Some(a), Some(b)) => Some(((a - b) * 1e3).max(0.0)),
                _ => None,
            };
            f
        })
        .collect()
}

/// One group of overlapping spans as a fault: `(start_ns, reach_ns, fault)`.
fn fault_of(g: &[Span]) -> (u64, u64, Fault) {
    let start_ns = g.iter().map(|s| s.start_ns).min().unwrap_or(0);
    let reach_ns = g
        .iter()
        .map(|s| s.end_ns.unwrap_or(u64::MAX))
        .max()
        .unwrap_or(start_ns);
    let node = g.iter().find_map(|s| s.node.clone());
    let reconnect = g
        .iter()
        .filter(|s| s.client.is_some())
        .filter_map(|s| s.end_ns)
        .min();
    let node_back = g.iter().filter(|s| s.node.is_some()).find_map(|s| s.end_ns);
    let end_ns = reconnect.or(node_back);
    let mut clients: Vec<String> = g.iter().filter_map(|s| s.client.clone()).collect();
    clients.sort();
    clients.dedup();
    let s = |ns: u64| ns as f64 / 1e9;
    let fault = Fault {
        cause: node
            .as_ref()
            .map_or(Fault::DISCONNECT, |n| n.1.as_str())
            .to_string(),
        node: node.map(|n| n.0),
        start_s: s(start_ns),
        end_s: end_ns.map(s),
        outage_ms: end_ns.map(|e| e.saturating_sub(start_ns) as f64 / 1e6),
        clients,
        ..Default::default()
    };
    (start_ns, reach_ns, fault)
}

/// Adds what every client lost to each fault from load.csv's windows (all roles summed):
/// the errors from the window holding the fault's start to the first window after the
/// broker was back with operations and no errors (the load recovered).
pub(crate) fn add_window_losses(faults: &mut [Fault], load: &BTreeMap<String, Vec<LoadRow>>) {
    let mut windows: BTreeMap<u64, (u64, u64, u64)> = BTreeMap::new();
    for r in load.values().flatten() {
        let w = windows.entry(r.t_ns).or_insert((0, 0, r.window_ns));
        w.0 += r.ops;
        w.1 += r.errors;
    }
    for f in faults.iter_mut() {
        let start = (f.start_s * 1e9) as u64;
        let back = (f.end_s.unwrap_or(f.start_s) * 1e9) as u64;
        let mut errors = 0;
        f.recovered_s = None;
        for (&t, &(ops, errs, len)) in windows.range(..) {
            if t + len <= start {
                continue;
            }
            if t >= back && ops > 0 && errs == 0 {
                f.recovered_s = Some(t as f64 / 1e9);
                break;
            }
            errors += errs;
        }
        f.errors_all_clients = errors;
    }
}

/// One line per fault, for `report`'s table and the commands' output.
pub fn line(f: &Fault) -> String {
    let what = match &f.node {
        Some(n) if f.is_kill() => format!("{n} killed"),
        Some(n) => format!("{n} stopped"),
        None => "clients lost their server".to_string(),
    };
    let back = match (f.end_s, f.outage_ms) {
        (Some(e), Some(o)) => format!("back at {e:.2} s ({o:.0} ms down)"),
        _ => "not back before the end".to_string(),
    };
    let first = match f.time_to_first_ack_ms {
        Some(ms) => format!("first ack {ms:.0} ms after"),
        None => "no ack after it".to_string(),
    };
    let recovered = match f.recovered_s {
        Some(r) => format!("; the load recovered at {r:.2} s"),
        None => String::new(),
    };
    format!(
        "fault at {:.2} s: {what}, {back}, {first}; {} operations lost ({} timed out), {} failed on all clients{recovered}",
        f.start_s, f.ops_lost, f.timeouts, f.errors_all_clients
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use format::events::{AckAfterReconnect, AmqpDisconnected, AmqpReconnect, NatsClient};

    fn ev(t_ms: u64, body: Body) -> Event {
        Event {
            t_ns: t_ms * 1_000_000,
            body,
        }
    }

    /// A scenario's node event of `kind` about `node`.
    fn on_node(t_ms: u64, kind: &str, node: &str) -> Event {
        let node = node.to_string();
        let body = match kind {
            "node_kill" => Body::NodeKill(NodeKill { node, pid: 0 }),
            "node_stop" => Body::NodeStop(NodeStop { node }),
            "restart" => Body::Restart(Restart {
                node,
                ..Default::default()
            }),
            "restart_ready" => Body::RestartReady(RestartReady {
                node,
                ..Default::default()
            }),
            _ => unreachable!("{kind}"),
        };
        ev(t_ms, body)
    }

    fn client(t_ms: u64, name: &str, what: &str) -> Event {
        let c = NatsClient {
            client: name.into(),
            event: what.into(),
            received: None,
        };
        ev(t_ms, Body::NatsClient(c))
    }

    fn acks(reconnect_ms: u64, failed: u64, timeouts: u64) -> AckAfterReconnect {
        AckAfterReconnect {
            client: "diskpulse-kv-put-0".into(),
            reconnect_ns: reconnect_ms * 1_000_000,
            failed,
            timeouts,
            ..Default::default()
        }
    }

    fn first_ack(t_ms: u64, reconnect_ms: u64, failed: u64, timeouts: u64) -> Event {
        let a = acks(reconnect_ms, failed, timeouts);
        ev(t_ms, Body::FirstAckAfterReconnect(a))
    }

    #[test]
    fn a_disconnect_and_reconnect_is_one_fault_with_the_time_to_the_first_ack() {
        let events = vec![
            client(100, "diskpulse-kv-put-0", "connected"),
            client(2_000, "diskpulse-kv-put-0", "disconnected"),
            client(2_001, "diskpulse-setup", "disconnected"),
            client(4_100, "diskpulse-setup", "connected"),
            client(4_120, "diskpulse-kv-put-0", "connected"),
            first_ack(4_150, 4_125, 7, 6),
        ];
        let f = faults(&events);
        assert_eq!(f.len(), 1, "{f:?}");
        let f = &f[0];
        assert_eq!(f.cause, "disconnect");
        assert_eq!(f.start_s, 2.0);
        assert_eq!(f.end_s, Some(4.1));
        assert_eq!(f.first_ack_s, Some(4.15));
        assert!(
            (f.time_to_first_ack_ms.unwrap() - 50.0).abs() < 1e-6,
            "{f:?}"
        );
        assert_eq!((f.ops_lost, f.timeouts), (7, 6));
        assert_eq!(f.clients, vec!["diskpulse-kv-put-0", "diskpulse-setup"]);
    }

    #[test]
    fn a_node_kill_merges_with_the_disconnects_it_caused_and_two_faults_stay_two() {
        let events = vec![
            on_node(1_000, "node_kill", "n1"),
            client(1_001, "diskpulse-js-pub-0", "disconnected"),
            on_node(2_000, "restart", "n1"),
            client(2_300, "diskpulse-js-pub-0", "connected"),
            on_node(2_500, "restart_ready", "n1"),
            first_ack(2_310, 2_305, 3, 3),
            on_node(5_000, "node_stop", "n2"),
            on_node(6_000, "restart", "n2"),
        ];
        let f = faults(&events);
        assert_eq!(f.len(), 2, "{f:?}");
        assert_eq!(f[0].cause, "node_kill");
        assert_eq!(f[0].node.as_deref(), Some("n1"));
        assert_eq!(f[0].end_s, Some(2.3), "the client's reconnect: {f:?}");
        assert!((f[0].time_to_first_ack_ms.unwrap() - 10.0).abs() < 1e-6);
        assert_eq!(f[0].ops_lost, 3);
        // No client saw the second: it ends at the node's restart, no first ack.
        assert_eq!(f[1].cause, "node_stop");
        assert_eq!(f[1].end_s, Some(6.0));
        assert_eq!(f[1].time_to_first_ack_ms, None);
        assert_eq!(f[1].ops_lost, 0);
        assert!(line(&f[0]).contains("n1 killed"), "{}", line(&f[0]));
    }

    #[test]
    fn an_amqp_outage_is_a_fault_from_disconnected_to_reconnected() {
        let amqp = |t_ms, kind: &str, client: &str| {
            let (client, role) = (client.to_string(), "amqp-pub".to_string());
            let back = AmqpReconnect {
                client: client.clone(),
                role: role.clone(),
                ..Default::default()
            };
            let body = match kind {
                "amqp_disconnected" => Body::AmqpDisconnected(AmqpDisconnected {
                    client,
                    role,
                    error: String::new(),
                }),
                "amqp_reconnected" => Body::AmqpReconnected(back),
                "amqp_reconnect_failed" => Body::AmqpReconnectFailed(back),
                _ => unreachable!("{kind}"),
            };
            ev(t_ms, body)
        };
        let f = faults(&[
            amqp(1_000, "amqp_disconnected", "diskpulse-amqp-pub-0"),
            amqp(1_002, "amqp_disconnected", "diskpulse-amqp-pub-1"),
            amqp(5_300, "amqp_reconnected", "diskpulse-amqp-pub-1"),
            amqp(5_310, "amqp_reconnected", "diskpulse-amqp-pub-0"),
            amqp(9_000, "amqp_disconnected", "diskpulse-amqp-pub-0"),
            amqp(12_000, "amqp_reconnect_failed", "diskpulse-amqp-pub-0"),
        ]);
        assert_eq!(f.len(), 2, "{f:?}");
        assert_eq!(f[0].cause, "disconnect");
        assert_eq!(f[0].start_s, 1.0);
        assert_eq!(f[0].end_s, Some(5.3), "the first client back ends it");
        assert_eq!(f[0].clients.len(), 2);
        assert_eq!(f[1].end_s, None, "a client that gave up never came back");
    }

    #[test]
    fn a_server_that_never_came_back_is_a_fault_without_an_end() {
        let events = vec![
            client(2_000, "diskpulse-pub-0", "disconnected"),
            ev(9_000, Body::NoAckAfterReconnect(acks(8_000, 4, 4))),
        ];
        let f = faults(&events);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].end_s, None);
        assert_eq!(f[0].ops_lost, 4);
        assert!(line(&f[0]).contains("not back"), "{}", line(&f[0]));
    }

    fn row(t_ms: u64, ops: u64, errors: u64) -> LoadRow {
        LoadRow {
            t_ns: t_ms * 1_000_000,
            window_ns: 100_000_000,
            role: "js-pub".into(),
            ops,
            errors,
            ..Default::default()
        }
    }

    #[test]
    fn every_clients_errors_count_until_the_load_recovers() {
        let mut f = vec![Fault {
            start_s: 1.05,
            end_s: Some(1.2),
            ..Default::default()
        }];
        // Clean before, errors from 1.0 (the window holding the start) to 1.4, clean at 1.5.
        let rows = vec![
            row(900, 100, 0),
            row(1_000, 50, 3),
            row(1_100, 0, 40),
            row(1_200, 0, 40),
            row(1_300, 10, 5),
            row(1_400, 60, 1),
            row(1_500, 100, 0),
            row(1_600, 100, 7),
        ];
        let mut load = BTreeMap::new();
        load.insert("js-pub".to_string(), rows);
        add_window_losses(&mut f, &load);
        assert_eq!(f[0].errors_all_clients, 89);
        assert_eq!(f[0].recovered_s, Some(1.5));
    }
}
