//! An embedded RabbitMQ node's Prometheus endpoint polled into `RUN/rabbitmq_metrics.csv`
//! (columns and units: [`format::monitor::RABBITMQ_CSV_HEADER`]), the counterpart
//! of nats-server's `/varz` poller ([`super::monitor`]) and held to the same rules:
//! absolute deadlines (late polls skipped, not bunched), raw values (counters and gauges,
//! never rates), `t_ns` the request's midpoint and `poll_us` its round trip, a metric the
//! node lacks an empty cell, one `error` event (`monitor_unreachable`) per outage and one
//! `monitor_back` after it; only a file that cannot be written is an error.
//!
//! `/metrics` is the node's aggregated view (about 80 KB of text in 3.10); each named
//! metric is summed over its label sets (protocols, queue types, queues).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use collectors::clock::Clock;
use tokio::task::JoinHandle;

use super::http::http_get_accept;
use crate::recording::chunks::RunFiles;
use crate::recording::EventLog;
use format::csv::put_u64;
use format::events::{self as ev, Body};
use format::monitor::{RABBITMQ_CSV_HEADER, RABBITMQ_FILE};

/// The Prometheus metrics behind the header's columns after `poll_us`, in order.
const METRICS: &[&str] = &[
    "rabbitmq_process_resident_memory_bytes",
    "rabbitmq_connections",
    "rabbitmq_global_messages_received_total",
    "rabbitmq_global_messages_confirmed_total",
    "rabbitmq_global_messages_routed_total",
    "rabbitmq_global_messages_delivered_total",
    "rabbitmq_global_messages_acknowledged_total",
    "rabbitmq_io_write_ops_total",
    "rabbitmq_io_write_bytes_total",
    "rabbitmq_io_sync_ops_total",
    "rabbitmq_io_sync_time_seconds_total",
    "rabbitmq_queue_messages",
    "rabbitmq_queue_messages_unacked",
    "rabbitmq_raft_log_last_written_index",
    "rabbitmq_raft_log_commit_index",
];

/// Each of [`METRICS`] summed over its series in a Prometheus text exposition; `None`
/// for a metric with no series (or only unparsable values).
pub fn parse(text: &str) -> Vec<Option<f64>> {
    let mut out = vec![None; METRICS.len()];
    for line in text.lines() {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let name_end = line.find(['{', ' ']).unwrap_or(line.len());
        let Some(i) = METRICS.iter().position(|m| *m == &line[..name_end]) else {
            continue;
        };
        // The value follows the labels (`}`) or the name; a timestamp may follow it.
        let rest = match line[name_end..].rfind('}') {
            Some(close) => &line[name_end + close + 1..],
            None => &line[name_end..],
        };
        if let Some(v) = rest
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<f64>().ok())
        {
            if v.is_finite() {
                *out[i].get_or_insert(0.0) += v;
            }
        }
    }
    out
}

/// Starts polling `metrics_url` (`http://127.0.0.1:PORT/metrics`) every `interval` into
/// `rabbitmq_metrics.csv` of `files` (cut into chunks when the run is) until `stop` is set, and once more then (the
/// counters' final values); the file exists when this returns.
/// The task's result: the number of rows, or why the file could not be written.
pub fn start(
    server: String,
    metrics_url: &str,
    clock: Clock,
    files: &RunFiles,
    events: EventLog,
    stop: Arc<AtomicBool>,
    interval: Duration,
) -> anyhow::Result<JoinHandle<anyhow::Result<u64>>> {
    let (base, path) = match metrics_url
        .find("://")
        .and_then(|s| metrics_url[s + 3..].find('/').map(|p| s + 3 + p))
    {
        Some(i) => (metrics_url[..i].to_string(), metrics_url[i..].to_string()),
        None => (metrics_url.to_string(), "/metrics".to_string()),
    };
    // Cut by the recording's `--chunk` and dropped by its `--keep` (when it has them).
    let mut sink = files.sink(RABBITMQ_FILE, RABBITMQ_CSV_HEADER, None)?;
    events.event(Body::MonitorStart(ev::MonitorStart {
        servers: vec![ev::MonitorServer {
            server: server.to_string(),
            url: metrics_url.to_string(),
        }],
        interval_us: interval.as_micros() as u64,
    }));
    let url = metrics_url.to_string();
    Ok(tokio::spawn(async move {
        let interval_ns = interval.as_nanos().max(1) as u64;
        let timeout = interval.max(Duration::from_secs(1));
        let mut next = clock.now_ns();
        let (mut rows, mut polls, mut failed, mut skipped) = (0u64, 0u64, 0u64, 0u64);
        let mut down_since: Option<u64> = None;
        loop {
            // After the stop: one last poll, so the counters' final values are in the file.
            let last = stop.load(Ordering::Relaxed);
            polls += 1;
            let t0 = clock.now_ns();
            let got = http_get_accept(&base, &path, "text/plain", timeout).await;
            let t1 = clock.now_ns();
            match got {
                Ok(body) => {
                    let values = parse(&String::from_utf8_lossy(&body));
                    let b = sink.buf();
                    put_u64(b, t0 + (t1 - t0) / 2);
                    b.push(b',');
                    b.extend_from_slice(server.as_bytes());
                    b.push(b',');
                    put_u64(b, (t1 - t0) / 1000);
                    for v in values {
                        b.push(b',');
                        if let Some(v) = v {
                            b.extend_from_slice(format!("{v}").as_bytes());
                        }
                    }
                    b.push(b'\n');
                    sink.row_done(t1);
                    rows += 1;
                    if let Some(since) = down_since.take() {
                        events.event(Body::MonitorBack(ev::MonitorBack {
                            server: server.to_string(),
                            url: url.clone(),
                            outage_ms: (t1 - since) as f64 / 1e6,
                            failed_polls: None,
                        }));
                    }
                }
                Err(e) => {
                    failed += 1;
                    if down_since.is_none() {
                        down_since = Some(t1);
                        events.event(Body::Error(ev::Error {
                            source: "monitor".to_string(),
                            kind: "monitor_unreachable".to_string(),
                            server: Some(server.to_string()),
                            url: Some(url.clone()),
                            message: format!("{url}: {e:#}"),
                        }));
                    }
                }
            }
            if last {
                break;
            }
            next += interval_ns;
            let now = clock.now_ns();
            if now > next {
                let missed = (now - next) / interval_ns + 1;
                skipped += missed;
                next += missed * interval_ns;
            }
            while !stop.load(Ordering::Relaxed) {
                let now = clock.now_ns();
                if now >= next {
                    break;
                }
                tokio::time::sleep(Duration::from_nanos((next - now).min(50_000_000))).await;
            }
        }
        sink.finish()?;
        events.event(Body::MonitorStop(ev::MonitorStop {
            servers: vec![ev::ServerPolls {
                server: server.to_string(),
                url,
                polls,
                failed_polls: failed,
                rows: Some(rows),
                skipped,
                ..Default::default()
            }],
            interval_us: None,
        }));
        Ok(rows)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_metric_is_summed_over_its_label_sets_and_a_missing_one_is_none() {
        let text = "# TYPE rabbitmq_global_messages_received_total counter\n\
            rabbitmq_global_messages_received_total{protocol=\"amqp091\"} 10\n\
            rabbitmq_global_messages_received_total{protocol=\"amqp10\"} 5\n\
            rabbitmq_io_sync_ops_total 7 1700000000000\n\
            rabbitmq_io_sync_ops_total_other 99\n\
            rabbitmq_queue_messages{vhost=\"/\",queue=\"a b\"} 3e2\n";
        let v = parse(text);
        let at = |m: &str| v[METRICS.iter().position(|x| *x == m).unwrap()];
        assert_eq!(at("rabbitmq_global_messages_received_total"), Some(15.0));
        assert_eq!(at("rabbitmq_io_sync_ops_total"), Some(7.0));
        assert_eq!(at("rabbitmq_queue_messages"), Some(300.0));
        assert_eq!(at("rabbitmq_connections"), None);
        // One column per metric after t_ns, server, poll_us.
        assert_eq!(RABBITMQ_CSV_HEADER.split(',').count(), 3 + METRICS.len());
    }
}
