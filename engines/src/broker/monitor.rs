//! Broker metrics: each server's monitoring port (`/varz`, `/jsz`) polled into the
//! recording, stamped on the run clock.
//!
//! [`start_monitor`] takes a list of `(server name, monitor URL)` pairs, so it works for
//! servers we started and for servers we did not. Each server gets its own task, so a
//! slow or hung server never delays the rows of another. Every `interval` (250 ms by
//! default, on absolute deadlines: a late poll does not shift the ones after it, and
//! missed polls are skipped, not bunched) the task GETs `/varz` and then `/jsz` and
//! writes one row to `RUN/varz.csv` and one to `RUN/jsz.csv`.
//!
//! What must stay true:
//! - Rows hold the server's raw values (counters since the server started, gauges as
//!   sampled), never rates: `report` derives rates from consecutive rows of a server,
//!   and a counter that goes down (the server restarted) gives "no value" there.
//! - `t_ns` is the midpoint between sending the request and receiving the whole
//!   response; `poll_us` is that round trip, so a reader knows how exact the stamp is
//!   (and a slow answer is itself a sign of a busy server).
//! - A field the server does not report (`disk_io_wait_stats` before 2.14.4, the meta
//!   group of a server outside a cluster) is an empty cell, never 0.
//! - A poll that fails (connection refused while a node restarts, a timeout, an HTTP
//!   error, a body that is not the JSON document expected) is counted; the first failure of an outage writes
//!   one `error` event (`source` `monitor`, `kind` `monitor_unreachable`) and the first
//!   good poll after it one `monitor_back` event: never one event per poll. The poller
//!   never ends the run; only a file that cannot be written is an error, at the end.
//! - Rows of one server are in time order; rows of different servers interleave in the
//!   order their polls finished.
//!
//! HTTP is [`super::http`]'s plain HTTP/1.1 GET; the documents' fields and the rows
//! they make are [`format::monitor`]'s (`Varz`, `Jsz`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, Context as _};
use collectors::clock::Clock;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::task::JoinHandle;

use super::http::parse_http_url;
pub use super::http::{get_doc, http_get};
use crate::recording::chunks::RunFiles;
use crate::recording::writer::ChunkSink;
use crate::recording::EventLog;
use format::events::{self as ev, Body};
use format::monitor::{put_jsz_row, put_varz_row, Jsz, Varz, JSZ_FILE, VARZ_FILE};
pub use format::monitor::{JSZ_CSV_HEADER, VARZ_CSV_HEADER};

/// A poll interval of /varz and /jsz, or why not: the one check of `load
/// --monitor-interval`, a scenario's `[samplers] monitor_interval` and the poller itself.
pub fn check_interval(v: Duration) -> Result<(), String> {
    if v.is_zero() {
        return Err(
            "must be more than 0s (how often /varz and /jsz are polled, like 250ms)".into(),
        );
    }
    Ok(())
}

/// How often each server is polled unless told otherwise (`--monitor-interval`).
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(250);

/// The longest a poll may take before it counts as failed: the interval, but at least
/// this (a busy server answering in 300 ms is slow, not gone).
const MIN_REQUEST_TIMEOUT: Duration = Duration::from_secs(1);

/// What the poller did, per server (for `meta.json`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct MonitorStats {
    pub interval_us: u64,
    pub servers: Vec<ServerPollStats>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct ServerPollStats {
    pub server: String,
    pub url: String,
    /// Polls attempted (each is a `/varz` and a `/jsz` request).
    pub polls: u64,
    /// Polls where a request failed.
    pub failed_polls: u64,
    /// Times the server went from answering (or never having answered) to failing.
    pub outages: u64,
    pub varz_rows: u64,
    pub jsz_rows: u64,
    /// Polls skipped because the one before ran past their deadline.
    pub skipped: u64,
    pub poll_us_max: u64,
}

impl MonitorStats {
    /// The `monitor_stop` event's detail: these figures, every server's.
    fn event(&self) -> ev::MonitorStop {
        ev::MonitorStop {
            interval_us: Some(self.interval_us),
            servers: self
                .servers
                .iter()
                .map(|s| ev::ServerPolls {
                    server: s.server.clone(),
                    url: s.url.clone(),
                    polls: s.polls,
                    failed_polls: s.failed_polls,
                    outages: Some(s.outages),
                    varz_rows: Some(s.varz_rows),
                    jsz_rows: Some(s.jsz_rows),
                    skipped: s.skipped,
                    poll_us_max: Some(s.poll_us_max),
                    rows: None,
                })
                .collect(),
        }
    }
}

/// The two files, shared by the per-server tasks.
struct Sinks {
    varz: ChunkSink,
    jsz: ChunkSink,
}

/// Starts polling every server in `urls` (`(name, "http://127.0.0.1:8222")`; an empty
/// name is replaced by the server's `server_name`) every `interval` into
/// `varz.csv` and `jsz.csv` of `files` (cut into chunks when the run is: the
/// recording's `--chunk`) until `stop` is set. The files are created
/// before this returns, so a bad run directory fails at once. The task's result is an
/// error only when a file could not be written.
pub async fn start_monitor(
    urls: Vec<(String, String)>,
    clock: Clock,
    files: &RunFiles,
    events: EventLog,
    stop: Arc<AtomicBool>,
    interval: Duration,
) -> anyhow::Result<JoinHandle<anyhow::Result<MonitorStats>>> {
    check_interval(interval).map_err(|e| anyhow!("the monitor interval {e}"))?;
    for (_, url) in &urls {
        parse_http_url(url)?;
    }
    // Cut by the recording's `--chunk` and dropped by its `--keep` (when it has them).
    let varz = files.sink(VARZ_FILE, VARZ_CSV_HEADER, None)?;
    let jsz = files.sink(JSZ_FILE, JSZ_CSV_HEADER, None)?;
    start_monitor_to(urls, clock, varz, jsz, events, stop, interval)
}

/// As [`start_monitor`], the rows going to `varz` and `jsz` (files, or channels: the
/// agent's batches, [`crate::agent::node`]). Needs a tokio runtime.
pub(crate) fn start_monitor_to(
    urls: Vec<(String, String)>,
    clock: Clock,
    varz: ChunkSink,
    jsz: ChunkSink,
    events: EventLog,
    stop: Arc<AtomicBool>,
    interval: Duration,
) -> anyhow::Result<JoinHandle<anyhow::Result<MonitorStats>>> {
    check_interval(interval).map_err(|e| anyhow!("the monitor interval {e}"))?;
    for (_, url) in &urls {
        parse_http_url(url)?;
    }
    let sinks = Arc::new(Mutex::new(Sinks { varz, jsz }));
    events.event(Body::MonitorStart(ev::MonitorStart {
        servers: urls
            .iter()
            .map(|(n, u)| ev::MonitorServer {
                server: n.clone(),
                url: u.clone(),
            })
            .collect(),
        interval_us: interval.as_micros() as u64,
    }));
    let tasks: Vec<JoinHandle<ServerPollStats>> = urls
        .into_iter()
        .map(|(name, url)| {
            let p = Poller {
                stats: ServerPollStats {
                    server: name,
                    url,
                    ..Default::default()
                },
                clock,
                events: events.clone(),
                sinks: sinks.clone(),
                interval,
                server_name: None,
                down_since: None,
                failed_in_outage: 0,
                row: Vec::with_capacity(512),
            };
            tokio::spawn(p.run(stop.clone()))
        })
        .collect();
    Ok(tokio::spawn(async move {
        let mut stats = MonitorStats {
            interval_us: interval.as_micros() as u64,
            servers: Vec::new(),
        };
        for t in tasks {
            stats
                .servers
                .push(t.await.context("a monitor task panicked")?);
        }
        let sinks = Arc::try_unwrap(sinks)
            .map_err(|_| anyhow!("monitor files still shared after all tasks ended"))?
            .into_inner()
            .unwrap_or_else(|p| p.into_inner());
        sinks.varz.finish()?;
        sinks.jsz.finish()?;
        events.event(Body::MonitorStop(stats.event()));
        Ok(stats)
    }))
}

/// Checks a `--monitor` URL before anything starts (the poller would refuse it only
/// after the recording had begun).
pub fn check_url(url: &str) -> anyhow::Result<()> {
    parse_http_url(url).map(|_| ())
}

/// One server's polling loop.
struct Poller {
    stats: ServerPollStats,
    clock: Clock,
    events: EventLog,
    sinks: Arc<Mutex<Sinks>>,
    interval: Duration,
    /// `server_name` from the last good `/varz` (to tell whether it is the meta leader).
    server_name: Option<String>,
    /// When the current outage began (run clock), if the server is failing.
    down_since: Option<u64>,
    failed_in_outage: u64,
    row: Vec<u8>,
}

impl Poller {
    async fn run(mut self, stop: Arc<AtomicBool>) -> ServerPollStats {
        let interval_ns = self.interval.as_nanos() as u64;
        let timeout = self.interval.max(MIN_REQUEST_TIMEOUT);
        // A server that never answered is in an outage from its first failed poll.
        let mut next = self.clock.now_ns();
        while !stop.load(Ordering::Relaxed) {
            self.poll_once(timeout).await;
            next += interval_ns;
            let now = self.clock.now_ns();
            if now > next {
                // Late (a slow answer): skip the deadlines already passed.
                let missed = (now - next) / interval_ns + 1;
                self.stats.skipped += missed;
                next += missed * interval_ns;
            }
            // Sleep in slices, so a stop is noticed within 50 ms at any interval.
            loop {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let now = self.clock.now_ns();
                if now >= next {
                    break;
                }
                tokio::time::sleep(Duration::from_nanos((next - now).min(50_000_000))).await;
            }
        }
        self.stats
    }

    async fn poll_once(&mut self, timeout: Duration) {
        self.stats.polls += 1;
        let mut failure: Option<String> = None;
        match self.get::<Varz>("/varz", timeout).await {
            Ok((t_ns, poll_us, v)) => {
                if let Some(n) = &v.server_name {
                    if self.stats.server.is_empty() {
                        self.stats.server = n.clone();
                    }
                    self.server_name = Some(n.clone());
                }
                self.write_varz(t_ns, poll_us, &v);
            }
            Err(e) => failure = Some(format!("/varz: {e:#}")),
        }
        // After a failed /varz the server is most likely gone: do not wait out a second
        // timeout for /jsz.
        if failure.is_none() {
            match self.get::<Jsz>("/jsz", timeout).await {
                Ok((t_ns, poll_us, v)) => self.write_jsz(t_ns, poll_us, &v),
                Err(e) => failure = Some(format!("/jsz: {e:#}")),
            }
        }
        let now = self.clock.now_ns();
        match (failure, self.down_since) {
            (Some(msg), None) => {
                self.stats.failed_polls += 1;
                self.stats.outages += 1;
                self.down_since = Some(now);
                self.failed_in_outage = 1;
                self.events.event(Body::Error(ev::Error {
                    source: "monitor".to_string(),
                    kind: "monitor_unreachable".to_string(),
                    server: Some(self.stats.server.clone()),
                    url: Some(self.stats.url.clone()),
                    message: format!("{}: {msg}", self.stats.url),
                }));
            }
            (Some(_), Some(_)) => {
                self.stats.failed_polls += 1;
                self.failed_in_outage += 1;
            }
            (None, Some(since)) => {
                self.down_since = None;
                self.events.event(Body::MonitorBack(ev::MonitorBack {
                    server: self.stats.server.clone(),
                    url: self.stats.url.clone(),
                    failed_polls: Some(self.failed_in_outage),
                    outage_ms: (now - since) as f64 / 1e6,
                }));
                self.failed_in_outage = 0;
            }
            (None, None) => {}
        }
    }

    /// GETs `path`; returns the run-clock midpoint, the round trip in µs and the document.
    async fn get<T: DeserializeOwned>(
        &mut self,
        path: &str,
        timeout: Duration,
    ) -> anyhow::Result<(u64, u64, T)> {
        let t0 = self.clock.now_ns();
        let v = get_doc(&self.stats.url, path, timeout).await?;
        let t1 = self.clock.now_ns();
        let poll_us = (t1 - t0) / 1000;
        self.stats.poll_us_max = self.stats.poll_us_max.max(poll_us);
        Ok((t0 + (t1 - t0) / 2, poll_us, v))
    }

    fn write_varz(&mut self, t_ns: u64, poll_us: u64, v: &Varz) {
        self.row.clear();
        put_varz_row(&mut self.row, t_ns, &self.stats.server, poll_us, v);
        self.stats.varz_rows += 1;
        let mut s = self.sinks.lock().unwrap_or_else(|p| p.into_inner());
        s.varz.buf().extend_from_slice(&self.row);
        s.varz.row_done(t_ns);
    }

    fn write_jsz(&mut self, t_ns: u64, poll_us: u64, v: &Jsz) {
        self.row.clear();
        let me = self.server_name.as_deref();
        put_jsz_row(&mut self.row, t_ns, &self.stats.server, poll_us, me, v);
        self.stats.jsz_rows += 1;
        let mut s = self.sinks.lock().unwrap_or_else(|p| p.into_inner());
        s.jsz.buf().extend_from_slice(&self.row);
        s.jsz.row_done(t_ns);
    }
}
