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
//!   error, a body that is not JSON) is counted; the first failure of an outage writes
//!   one `error` event (`source` `monitor`, `kind` `monitor_unreachable`) and the first
//!   good poll after it one `monitor_back` event: never one event per poll. The poller
//!   never ends the run; only a file that cannot be written is an error, at the end.
//! - Rows of one server are in time order; rows of different servers interleave in the
//!   order their polls finished.
//!
//! HTTP is a plain HTTP/1.1 GET over a tokio `TcpStream` (`Connection: close`;
//! `Content-Length`, chunked and close-delimited bodies): the monitoring port speaks
//! nothing else, and a request costs ~0.2 ms on loopback.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};
use collectors::clock::Clock;
use serde::Serialize;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinHandle;

pub use crate::format::monitor::{JSZ_CSV_HEADER, VARZ_CSV_HEADER};
use crate::recording::writer::ChunkSink;
use crate::recording::EventLog;

/// How often each server is polled unless told otherwise (`--monitor-interval`).
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(250);

/// The longest a poll may take before it counts as failed: the interval, but at least
/// this (a busy server answering in 300 ms is slow, not gone).
const MIN_REQUEST_TIMEOUT: Duration = Duration::from_secs(1);

/// A response body larger than this is refused (a `/jsz` of the default detail level
/// is a few KiB; this guards against pointing the poller at the wrong port).
const MAX_RESPONSE_BYTES: usize = 16 << 20;

/// The `/varz` fields behind `VARZ_CSV_HEADER`'s columns after `poll_us`, in order.
const VARZ_FIELDS: &[&[&str]] = &[
    &["cpu"],
    &["mem"],
    &["connections"],
    &["total_connections"],
    &["routes"],
    &["subscriptions"],
    &["in_msgs"],
    &["out_msgs"],
    &["in_bytes"],
    &["out_bytes"],
    &["slow_consumers"],
    &["stalled_clients"],
    &["disk_io_wait_stats", "waiters"],
    &["disk_io_wait_stats", "waits"],
    &["disk_io_wait_stats", "wait_time"],
    &["disk_io_wait_stats", "max_wait_time"],
];

/// The `/jsz` fields behind `JSZ_CSV_HEADER`'s numeric columns before `meta_leader`.
const JSZ_FIELDS: &[&[&str]] = &[
    &["streams"],
    &["consumers"],
    &["messages"],
    &["bytes"],
    &["memory"],
    &["storage"],
    &["reserved_memory"],
    &["reserved_storage"],
    &["ha_assets"],
    &["api", "total"],
    &["api", "errors"],
];

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

/// The two files, shared by the per-server tasks.
struct Sinks {
    varz: ChunkSink,
    jsz: ChunkSink,
}

/// Starts polling every server in `urls` (`(name, "http://127.0.0.1:8222")`; an empty
/// name is replaced by the server's `server_name`) every `interval` into
/// `run_dir/varz.csv` and `run_dir/jsz.csv` until `stop` is set. The files are created
/// before this returns, so a bad run directory fails at once. The task's result is an
/// error only when a file could not be written.
pub async fn start_monitor(
    urls: Vec<(String, String)>,
    clock: Clock,
    run_dir: &Path,
    events: EventLog,
    stop: Arc<AtomicBool>,
    interval: Duration,
) -> anyhow::Result<JoinHandle<anyhow::Result<MonitorStats>>> {
    if interval.is_zero() {
        bail!("the monitor interval must be more than 0 (e.g. 250ms)");
    }
    for (_, url) in &urls {
        parse_http_url(url)?;
    }
    let sinks = Arc::new(Mutex::new(Sinks {
        varz: ChunkSink::create(&run_dir.join("varz.csv"), VARZ_CSV_HEADER, false)?,
        jsz: ChunkSink::create(&run_dir.join("jsz.csv"), JSZ_CSV_HEADER, false)?,
    }));
    events.event(
        "monitor_start",
        serde_json::json!({
            "servers": urls.iter().map(|(n, u)| serde_json::json!({"server": n, "url": u})).collect::<Vec<_>>(),
            "interval_us": interval.as_micros() as u64,
        }),
    );
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
        events.event("monitor_stop", serde_json::to_value(&stats)?);
        Ok(stats)
    }))
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
        match self.get("/varz", timeout).await {
            Ok((t_ns, poll_us, v)) => {
                if let Some(n) = v.get("server_name").and_then(Value::as_str) {
                    if self.stats.server.is_empty() {
                        self.stats.server = n.to_string();
                    }
                    self.server_name = Some(n.to_string());
                }
                self.write_varz(t_ns, poll_us, &v);
            }
            Err(e) => failure = Some(format!("/varz: {e:#}")),
        }
        // After a failed /varz the server is most likely gone: do not wait out a second
        // timeout for /jsz.
        if failure.is_none() {
            match self.get("/jsz", timeout).await {
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
                self.events.event(
                    "error",
                    serde_json::json!({
                        "source": "monitor", "kind": "monitor_unreachable",
                        "server": self.stats.server, "url": self.stats.url,
                        "message": format!("{}: {msg}", self.stats.url),
                    }),
                );
            }
            (Some(_), Some(_)) => {
                self.stats.failed_polls += 1;
                self.failed_in_outage += 1;
            }
            (None, Some(since)) => {
                self.down_since = None;
                self.events.event(
                    "monitor_back",
                    serde_json::json!({
                        "server": self.stats.server, "url": self.stats.url,
                        "failed_polls": self.failed_in_outage,
                        "outage_ms": (now - since) as f64 / 1e6,
                    }),
                );
                self.failed_in_outage = 0;
            }
            (None, None) => {}
        }
    }

    /// GETs `path`; returns the run-clock midpoint, the round trip in µs and the JSON.
    async fn get(&mut self, path: &str, timeout: Duration) -> anyhow::Result<(u64, u64, Value)> {
        let t0 = self.clock.now_ns();
        let v = get_json(&self.stats.url, path, timeout).await?;
        let t1 = self.clock.now_ns();
        let poll_us = (t1 - t0) / 1000;
        self.stats.poll_us_max = self.stats.poll_us_max.max(poll_us);
        Ok((t0 + (t1 - t0) / 2, poll_us, v))
    }

    fn start_row(&mut self, t_ns: u64, poll_us: u64) {
        self.row.clear();
        crate::recording::writer::put_u64(&mut self.row, t_ns);
        self.row.push(b',');
        put_csv_str(&mut self.row, &self.stats.server);
        self.row.push(b',');
        crate::recording::writer::put_u64(&mut self.row, poll_us);
    }

    fn write_varz(&mut self, t_ns: u64, poll_us: u64, v: &Value) {
        self.start_row(t_ns, poll_us);
        for path in VARZ_FIELDS {
            self.row.push(b',');
            put_number(&mut self.row, lookup(v, path));
        }
        self.row.push(b'\n');
        self.stats.varz_rows += 1;
        let mut s = self.sinks.lock().unwrap_or_else(|p| p.into_inner());
        s.varz.buf().extend_from_slice(&self.row);
        s.varz.row_done(t_ns);
    }

    fn write_jsz(&mut self, t_ns: u64, poll_us: u64, v: &Value) {
        self.start_row(t_ns, poll_us);
        for path in JSZ_FIELDS {
            self.row.push(b',');
            put_number(&mut self.row, lookup(v, path));
        }
        let meta = v.get("meta_cluster");
        let leader = meta
            .and_then(|m| m.get("leader"))
            .and_then(Value::as_str)
            .filter(|l| !l.is_empty());
        self.row.push(b',');
        if let Some(l) = leader {
            put_csv_str(&mut self.row, l);
        }
        self.row.push(b',');
        if let (Some(l), Some(me)) = (leader, self.server_name.as_deref()) {
            self.row.push(if l == me { b'1' } else { b'0' });
        }
        self.row.push(b',');
        put_number(&mut self.row, meta.and_then(|m| m.get("cluster_size")));
        self.row.push(b',');
        put_number(&mut self.row, meta.and_then(|m| m.get("pending")));
        self.row.push(b'\n');
        self.stats.jsz_rows += 1;
        let mut s = self.sinks.lock().unwrap_or_else(|p| p.into_inner());
        s.jsz.buf().extend_from_slice(&self.row);
        s.jsz.row_done(t_ns);
    }
}

fn lookup<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, k| v.get(*k))
}

/// A JSON number as the server wrote it (integers stay integers); anything else is an
/// empty cell.
fn put_number(buf: &mut Vec<u8>, v: Option<&Value>) {
    if let Some(Value::Number(n)) = v {
        buf.extend_from_slice(n.to_string().as_bytes());
    }
}

/// A CSV field, quoted when it holds a comma, quote or line break (RFC 4180).
fn put_csv_str(buf: &mut Vec<u8>, s: &str) {
    if s.contains([',', '"', '\n', '\r']) {
        buf.push(b'"');
        buf.extend_from_slice(s.replace('"', "\"\"").as_bytes());
        buf.push(b'"');
    } else {
        buf.extend_from_slice(s.as_bytes());
    }
}

/// `http://host:port[/base]` split up.
#[derive(Debug, PartialEq, Eq)]
struct HttpUrl {
    host: String,
    port: u16,
    /// A path prefix (`http_base_path`), without a trailing `/`.
    base: String,
}

fn parse_http_url(url: &str) -> anyhow::Result<HttpUrl> {
    let bad =
        |why: &str| anyhow!("a monitor URL looks like http://127.0.0.1:8222 ({why}); got '{url}'");
    let rest = url.strip_prefix("http://").ok_or_else(|| {
        if url.starts_with("https://") {
            bad("https is not supported")
        } else {
            bad("it starts with http://")
        }
    })?;
    let (hostport, base) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
        None => (rest, ""),
    };
    let (host, port) = match hostport.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() => (
            h,
            p.parse::<u16>().map_err(|_| bad("the port is a number"))?,
        ),
        _ => (hostport, 80),
    };
    if host.is_empty() {
        return Err(bad("it names a host"));
    }
    Ok(HttpUrl {
        host: host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string(),
        port,
        base: base.to_string(),
    })
}

/// GET `url` + `path` and parse the body as JSON; an error for anything but 200.
pub async fn get_json(url: &str, path: &str, timeout: Duration) -> anyhow::Result<Value> {
    let body = http_get(url, path, timeout).await?;
    serde_json::from_slice(&body).with_context(|| {
        format!(
            "{url}{path} did not return JSON: '{}'",
            String::from_utf8_lossy(&body[..body.len().min(120)])
        )
    })
}

/// A plain HTTP/1.1 GET with `Connection: close`; returns the body of a 200 response.
pub async fn http_get(url: &str, path: &str, timeout: Duration) -> anyhow::Result<Vec<u8>> {
    let u = parse_http_url(url)?;
    let started = Instant::now();
    let fut = async {
        let mut s = tokio::net::TcpStream::connect((u.host.as_str(), u.port)).await?;
        let req = format!(
            "GET {}{} HTTP/1.1\r\nHost: {}:{}\r\nUser-Agent: diskpulse\r\nAccept: application/json\r\nConnection: close\r\n\r\n",
            u.base, path, u.host, u.port
        );
        s.write_all(req.as_bytes()).await?;
        let mut raw = Vec::with_capacity(8192);
        let mut chunk = [0u8; 16384];
        loop {
            let n = s.read(&mut chunk).await?;
            if n == 0 {
                break;
            }
            raw.extend_from_slice(&chunk[..n]);
            if raw.len() > MAX_RESPONSE_BYTES {
                return Err(std::io::Error::other(format!(
                    "response larger than {MAX_RESPONSE_BYTES} bytes"
                )));
            }
        }
        Ok::<_, std::io::Error>(raw)
    };
    let raw = match tokio::time::timeout(timeout, fut).await {
        Ok(r) => r.with_context(|| format!("GET {url}{path}"))?,
        Err(_) => bail!(
            "GET {url}{path}: no answer within {} ms",
            started.elapsed().as_millis()
        ),
    };
    parse_response(&raw).with_context(|| format!("GET {url}{path}"))
}

/// Splits an HTTP/1.x response into status and body (Content-Length, chunked or
/// close-delimited); an error unless the status is 200.
fn parse_response(raw: &[u8]) -> anyhow::Result<Vec<u8>> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| anyhow!("the response ended inside its header ({} bytes)", raw.len()))?;
    let head = String::from_utf8_lossy(&raw[..end]);
    let body = &raw[end + 4..];
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| anyhow!("not an HTTP response: '{status_line}'"))?;
    let (mut chunked, mut length) = (false, None);
    for l in lines {
        if let Some((k, v)) = l.split_once(':') {
            let (k, v) = (k.trim(), v.trim());
            if k.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked") {
                chunked = true;
            } else if k.eq_ignore_ascii_case("content-length") {
                length = v.parse::<usize>().ok();
            }
        }
    }
    let body = if chunked {
        dechunk(body)?
    } else if let Some(n) = length {
        if body.len() < n {
            bail!("body cut off: {} of {n} bytes", body.len());
        }
        body[..n].to_vec()
    } else {
        body.to_vec()
    };
    if status != 200 {
        bail!(
            "HTTP {status}: {}",
            String::from_utf8_lossy(&body[..body.len().min(200)]).trim()
        );
    }
    Ok(body)
}

/// Decodes a chunked body (`SIZE-hex[;ext]\r\nDATA\r\n ... 0\r\n\r\n`).
fn dechunk(mut b: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(b.len());
    loop {
        let eol = b
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or_else(|| anyhow!("chunked body cut off"))?;
        let line = std::str::from_utf8(&b[..eol])?;
        let size_hex = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_hex, 16)
            .map_err(|_| anyhow!("bad chunk size '{size_hex}'"))?;
        b = &b[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        if b.len() < size + 2 {
            bail!("chunked body cut off");
        }
        out.extend_from_slice(&b[..size]);
        b = &b[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_and_bad_ones_say_why() {
        assert_eq!(
            parse_http_url("http://127.0.0.1:8222").unwrap(),
            HttpUrl {
                host: "127.0.0.1".into(),
                port: 8222,
                base: "".into()
            }
        );
        assert_eq!(
            parse_http_url("http://nats.lan:80/mon/").unwrap().base,
            "/mon"
        );
        assert_eq!(parse_http_url("http://[::1]:8222").unwrap().host, "::1");
        let e = parse_http_url("https://x:1").unwrap_err().to_string();
        assert!(e.contains("https") && e.contains("'https://x:1'"), "{e}");
        assert!(parse_http_url("127.0.0.1:8222").is_err());
        assert!(parse_http_url("http://x:port").is_err());
    }

    #[test]
    fn responses_with_length_chunked_and_close_delimited_bodies() {
        let r = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n{}  extra";
        assert_eq!(parse_response(r).unwrap(), b"{}  ");
        let r = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n5;x=y\r\n\":12}\r\n0\r\n\r\n";
        assert_eq!(parse_response(r).unwrap(), b"{\"a\":12}");
        let r = b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n[1]";
        assert_eq!(parse_response(r).unwrap(), b"[1]");
        let e = parse_response(b"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found")
            .unwrap_err()
            .to_string();
        assert_eq!(e, "HTTP 404: not found");
        assert!(parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort").is_err());
        assert!(
            parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab")
                .is_err()
        );
    }

    #[test]
    fn cells_keep_integers_and_leave_missing_fields_empty() {
        let v: Value = serde_json::from_str(
            r#"{"cpu": 12.5, "mem": 1024, "disk_io_wait_stats": {"waits": 3}}"#,
        )
        .unwrap();
        let mut b = Vec::new();
        for p in [
            &["cpu"][..],
            &["mem"],
            &["disk_io_wait_stats", "waits"],
            &["nope"],
            &["disk_io_wait_stats", "x"],
        ] {
            put_number(&mut b, lookup(&v, p));
            b.push(b',');
        }
        assert_eq!(String::from_utf8(b).unwrap(), "12.5,1024,3,,,");
        let mut b = Vec::new();
        put_csv_str(&mut b, "a,\"b\"");
        assert_eq!(b, b"\"a,\"\"b\"\"\"");
    }

    #[test]
    fn headers_have_one_column_per_field() {
        assert_eq!(VARZ_CSV_HEADER.split(',').count(), 3 + VARZ_FIELDS.len());
        assert_eq!(JSZ_CSV_HEADER.split(',').count(), 3 + JSZ_FIELDS.len() + 4);
    }
}
