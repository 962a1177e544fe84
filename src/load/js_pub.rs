//! The JetStream async publisher: a sliding window of unacknowledged publishes.
//!
//! Up to `window` publishes are in flight at once; each ack that arrives frees one slot
//! and the next publish goes out at once (a sliding window, not stop-and-wait batches).
//! Each in-flight publish carries its send time (run clock, ns, read just before the
//! publish call), so its ack latency is `ack arrival - send time`.
//!
//! Counting invariant: `published == acked + errors + unacked_at_end`. `published` counts
//! publish attempts; an attempt fails either at once (e.g. the client's connection is
//! closed) or when its ack says so or times out. With `msgs = N` exactly N attempts are
//! made, so `acked == N` when nothing failed.
//!
//! The hot path allocates nothing of ours: the payload `Bytes` and the `Subject` are
//! built once and cloned (reference counts). async-nats itself allocates per publish
//! (a reply inbox, a oneshot, a boxed ack future), and `FuturesUnordered` a task node.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::future::{Future, IntoFuture};
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use anyhow::{bail, Context as _};
use async_nats::jetstream::context::{PublishAckFuture, PublishError, PublishErrorKind};
use async_nats::jetstream::{self, stream};
use bytes::Bytes;
use collectors::clock::Clock;
use futures::stream::{FuturesUnordered, StreamExt};
use futures::FutureExt;
use serde::Serialize;
use tokio::time::MissedTickBehavior;

use super::stats::{latency_histogram, LatencySummary, LoadCsv, WindowCounts};
use crate::recording::EventLog;

/// Default sliding-window size (max unacked publishes).
pub const DEFAULT_WINDOW: usize = 256;
/// Default stats window (one `load.csv` row each).
pub const DEFAULT_STATS_WINDOW: Duration = Duration::from_millis(100);
/// How long an ack may take before it counts as a `timeout` error. async-nats waits
/// 5 s by default; a storage stall (the very thing we measure) can take longer.
pub const ACK_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a stop (Ctrl-C or the end of `duration`) waits for in-flight acks.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);
/// How often the loop checks `stop` and the duration when nothing else wakes it.
const STOP_POLL: Duration = Duration::from_millis(10);

/// What to publish.
#[derive(Debug, Clone)]
pub struct JsPubOptions {
    pub url: String,
    /// Created if missing (file storage, 1 replica, `subjects = [subject]`).
    pub stream: String,
    pub subject: String,
    /// Payload bytes per message.
    pub msg_size: usize,
    /// Stop after this many publish attempts have been answered (acked or failed).
    pub msgs: Option<u64>,
    /// Stop publishing after this long (whichever of `msgs`/`duration` comes first);
    /// neither means until `stop`.
    pub duration: Option<Duration>,
    /// Max in-flight (unacked) publishes; a sliding window.
    pub window: usize,
    /// One `load.csv` row per this interval.
    pub stats_window: Duration,
}

impl JsPubOptions {
    /// Options with the defaults: 128 B messages, window 256, 100 ms stats windows,
    /// no limit.
    pub fn new(
        url: impl Into<String>,
        stream: impl Into<String>,
        subject: impl Into<String>,
    ) -> Self {
        JsPubOptions {
            url: url.into(),
            stream: stream.into(),
            subject: subject.into(),
            msg_size: 128,
            msgs: None,
            duration: None,
            window: DEFAULT_WINDOW,
            stats_window: DEFAULT_STATS_WINDOW,
        }
    }
}

/// The async-nats JetStream context settings the publisher uses (its defaults are 5,000
/// in-flight acks with backpressure, a 5 s wait for awaited acks, 30 s for dropped ones).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct JsContextSettings {
    /// `ContextBuilder::max_ack_inflight`: equal to our window, so never the limit.
    pub max_ack_inflight: usize,
    /// `ContextBuilder::backpressure_on_inflight`: wait, never error, at the limit.
    pub backpressure_on_inflight: bool,
    /// `ContextBuilder::timeout`: bounds API requests and each awaited ack.
    pub ack_wait_s: f64,
    /// `ContextBuilder::ack_timeout`: for acks of publishes abandoned at stop.
    pub abandoned_ack_timeout_s: f64,
    /// `ConnectOptions::client_capacity`: the client's command queue; larger than the
    /// window, so a publish never waits for room while acks are outstanding.
    pub client_capacity: usize,
}

/// The settings [`js_publish`] uses for `opts` (for `meta.json`).
pub fn js_context_settings(opts: &JsPubOptions) -> JsContextSettings {
    JsContextSettings {
        max_ack_inflight: opts.window.max(1),
        backpressure_on_inflight: true,
        ack_wait_s: ACK_TIMEOUT.as_secs_f64(),
        abandoned_ack_timeout_s: ACK_TIMEOUT.as_secs_f64(),
        client_capacity: (opts.window * 2).max(2048),
    }
}

/// What a publish run did.
#[derive(Debug, Clone, Serialize)]
pub struct JsPubSummary {
    /// Publish attempts.
    pub published: u64,
    pub acked: u64,
    pub bytes_acked: u64,
    pub errors: u64,
    /// `timeout`, `stream_not_found`, `max_payload`, `storage_full`, `broken_pipe`, ...
    pub errors_by_kind: BTreeMap<String, u64>,
    /// Publishes still unanswered when the drain after a stop gave up.
    pub unacked_at_end: u64,
    /// `msgs`, `duration` or `stop`.
    pub stop_reason: String,
    /// From the first publish to the last ack (or the end of the drain).
    pub elapsed_s: f64,
    /// `acked / elapsed_s`.
    pub msgs_per_s: f64,
    /// `bytes_acked / elapsed_s / 2^20`.
    pub mib_per_s: f64,
    /// Publish-to-ack latency of every acked message, in microseconds.
    pub ack_lat_us: LatencySummary,
    pub msg_size: usize,
    pub window: usize,
    pub js_context: JsContextSettings,
}

/// An in-flight publish: its send time next to its ack future.
struct InFlight {
    sent_ns: u64,
    ack: <PublishAckFuture as IntoFuture>::IntoFuture,
}

impl Future for InFlight {
    type Output = (u64, Result<jetstream::publish::PublishAck, PublishError>);

    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        let sent_ns = self.sent_ns;
        self.ack.as_mut().poll(cx).map(|r| (sent_ns, r))
    }
}

/// A short, stable name for an error's kind, for `errors_by_kind` and error events.
pub fn publish_error_kind(e: &PublishError) -> Cow<'static, str> {
    let name = match e.kind() {
        PublishErrorKind::StreamNotFound => "stream_not_found",
        PublishErrorKind::TimedOut => "timeout",
        PublishErrorKind::BrokenPipe => "broken_pipe",
        PublishErrorKind::MaxAckPending => "max_ack_pending",
        PublishErrorKind::MaxPayloadExceeded => "max_payload",
        PublishErrorKind::WrongLastMessageId => "wrong_last_msg_id",
        PublishErrorKind::WrongLastSequence => "wrong_last_sequence",
        PublishErrorKind::Other => {
            let js =
                std::error::Error::source(e).and_then(|s| s.downcast_ref::<jetstream::Error>());
            return match js.map(|j| j.error_code()) {
                Some(jetstream::ErrorCode::STORAGE_RESOURCES_EXCEEDED) => "storage_full".into(),
                Some(jetstream::ErrorCode::MEMORY_RESOURCES_EXCEEDED) => "memory_full".into(),
                Some(jetstream::ErrorCode::INSUFFICIENT_RESOURCES) => {
                    "insufficient_resources".into()
                }
                Some(jetstream::ErrorCode::ACCOUNT_RESOURCES_EXCEEDED) => "account_limits".into(),
                Some(jetstream::ErrorCode::STREAM_MESSAGE_EXCEEDS_MAXIMUM) => {
                    "msg_too_large".into()
                }
                // Also "maximum messages/bytes exceeded" of a discard-new stream.
                Some(jetstream::ErrorCode::STREAM_STORE_FAILED) => "store_failed".into(),
                Some(jetstream::ErrorCode::STREAM_NOT_FOUND) => "stream_not_found".into(),
                Some(code) => format!("js_{}", code.0).into(),
                None => "other".into(),
            };
        }
    };
    Cow::Borrowed(name)
}

/// The error text with its source chain.
fn error_text(e: &PublishError) -> String {
    let mut s = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(x) = src {
        s.push_str(": ");
        s.push_str(&x.to_string());
        src = x.source();
    }
    s
}

struct Errors<'a> {
    by_kind: BTreeMap<String, u64>,
    events: &'a EventLog,
    total: u64,
}

impl Errors<'_> {
    /// Counts one error; the first of each kind also becomes an `error` event.
    fn record(&mut self, e: &PublishError) {
        self.total += 1;
        let kind = publish_error_kind(e);
        if let Some(n) = self.by_kind.get_mut(kind.as_ref()) {
            *n += 1;
            return;
        }
        self.events.error(
            "load",
            &kind,
            &format!(
                "first JetStream publish error of this kind: {}",
                error_text(e)
            ),
        );
        self.by_kind.insert(kind.into_owned(), 1);
    }
}

/// Publishes to JetStream with a sliding window until `msgs`, `duration` or `stop`.
/// Writes one `load_csv` row per stats window if a path is given (created before
/// connecting, so a bad path fails at once).
pub async fn js_publish(
    opts: &JsPubOptions,
    clock: Clock,
    load_csv: Option<&Path>,
    events: &EventLog,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<JsPubSummary> {
    if opts.window == 0 {
        bail!("the publish window must be at least 1 (got 0)");
    }
    if opts.stats_window.is_zero() {
        bail!("the stats window must be longer than 0");
    }
    let mut csv = match load_csv {
        Some(p) => Some(LoadCsv::create(p)?),
        None => None,
    };
    let settings = js_context_settings(opts);

    let ev = events.clone();
    let client = async_nats::ConnectOptions::new()
        .name("diskpulse-load")
        .client_capacity(settings.client_capacity)
        .connection_timeout(Duration::from_secs(5))
        .event_callback(move |e| {
            let ev = ev.clone();
            async move {
                ev.event(
                    "nats_client",
                    serde_json::json!({"source": "load", "event": e.to_string()}),
                );
            }
        })
        .connect(opts.url.as_str())
        .await
        // The error's Display already names its cause; its source chain repeats it.
        .map_err(|e| anyhow::anyhow!("cannot connect to NATS at {}: {e}", opts.url))?;
    let max_payload = client.server_info().max_payload;
    if opts.msg_size > max_payload {
        bail!(
            "--msg-size {} B is larger than the server's max_payload ({max_payload} B) at {}",
            opts.msg_size,
            opts.url
        );
    }
    let js = jetstream::ContextBuilder::new()
        .timeout(ACK_TIMEOUT)
        .ack_timeout(ACK_TIMEOUT)
        .max_ack_inflight(settings.max_ack_inflight)
        .backpressure_on_inflight(settings.backpressure_on_inflight)
        .build(client.clone());

    js.get_or_create_stream(stream::Config {
        name: opts.stream.clone(),
        subjects: vec![opts.subject.clone()],
        storage: stream::StorageType::File,
        num_replicas: 1,
        ..Default::default()
    })
    .await
    .with_context(|| {
        format!(
            "cannot get or create stream '{}' at {}",
            opts.stream, opts.url
        )
    })?;
    // An existing stream may not capture our subject; every publish would then fail.
    match js.stream_by_subject(opts.subject.clone()).await {
        Ok(name) if name == opts.stream => {}
        Ok(other) => bail!(
            "subject '{}' is captured by stream '{other}', not by '{}'; pick another subject or stream",
            opts.subject,
            opts.stream
        ),
        Err(e) => bail!(
            "stream '{}' exists but does not capture subject '{}' ({e}); pick another stream name or subject",
            opts.stream,
            opts.subject
        ),
    }

    events.event(
        "load_start",
        serde_json::json!({
            "kind": "js_publish", "url": opts.url, "stream": opts.stream, "subject": opts.subject,
            "msg_size": opts.msg_size, "msgs": opts.msgs,
            "duration_s": opts.duration.map(|d| d.as_secs_f64()),
            "window": opts.window, "stats_window_ns": opts.stats_window.as_nanos() as u64,
            "js_context": settings,
        }),
    );

    let subject = async_nats::Subject::from(opts.subject.as_str());
    let payload = Bytes::from(vec![b'x'; opts.msg_size]);
    let msg_bytes = opts.msg_size as u64;
    let mut in_flight: FuturesUnordered<InFlight> = FuturesUnordered::new();
    let mut win_lat = latency_histogram();
    let mut total_lat = latency_histogram();
    let mut win = WindowCounts::default();
    let mut errors = Errors {
        by_kind: BTreeMap::new(),
        events,
        total: 0,
    };
    let (mut published, mut acked) = (0u64, 0u64);

    let start_ns = clock.now_ns();
    let end_ns = opts
        .duration
        .map(|d| start_ns.saturating_add(d.as_nanos().min(u64::MAX as u128) as u64));
    let mut win_start_ns = start_ns;
    let mut tick = tokio::time::interval_at(
        tokio::time::Instant::now() + opts.stats_window,
        opts.stats_window,
    );
    tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let mut stop_poll = tokio::time::interval(STOP_POLL);
    stop_poll.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut sending = true;
    let mut stop_reason = "msgs";
    let mut drain_deadline: Option<tokio::time::Instant> = None;

    macro_rules! on_ack {
        ($now:expr, $sent:expr, $res:expr) => {
            match $res {
                Ok(_) => {
                    acked += 1;
                    win.acked += 1;
                    win.bytes_acked += msg_bytes;
                    win_lat.saturating_record($now.saturating_sub($sent).max(1));
                }
                Err(e) => {
                    errors.record(&e);
                    win.errors += 1;
                }
            }
        };
    }

    loop {
        if sending {
            let stopped = stop.load(Ordering::Relaxed);
            let timed_out = end_ns.is_some_and(|e| clock.now_ns() >= e);
            if stopped || timed_out {
                sending = false;
                stop_reason = if stopped { "stop" } else { "duration" };
                drain_deadline = Some(tokio::time::Instant::now() + DRAIN_TIMEOUT);
            } else if opts.msgs.is_some_and(|m| published >= m) {
                sending = false;
                stop_reason = "msgs";
            }
        } else if drain_deadline.is_none() && stop.load(Ordering::Relaxed) {
            // Ctrl-C while waiting for the last acks of a `msgs` run.
            stop_reason = "stop";
            drain_deadline = Some(tokio::time::Instant::now() + DRAIN_TIMEOUT);
        }
        if !sending && in_flight.is_empty() {
            break;
        }
        // Fill the window.
        while sending && in_flight.len() < opts.window {
            if opts.msgs.is_some_and(|m| published >= m) {
                break;
            }
            let sent_ns = clock.now_ns();
            published += 1;
            win.published += 1;
            match js.publish(subject.clone(), payload.clone()).await {
                Ok(f) => in_flight.push(InFlight {
                    sent_ns,
                    ack: f.into_future(),
                }),
                Err(e) => {
                    errors.record(&e);
                    win.errors += 1;
                    // Immediate failures (a closed connection) must not spin a core.
                    if in_flight.is_empty() {
                        break;
                    }
                }
            }
        }
        let drain_sleep = async {
            match drain_deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            Some((sent_ns, res)) = in_flight.next(), if !in_flight.is_empty() => {
                let now = clock.now_ns();
                on_ack!(now, sent_ns, res);
                // Take every ack that is already here before going round the loop.
                while let Some(Some((sent_ns, res))) = in_flight.next().now_or_never() {
                    on_ack!(now, sent_ns, res);
                }
            }
            _ = tick.tick() => {
                let t_ns = clock.now_ns();
                close_window(&mut csv, t_ns, &mut win_start_ns, &mut win, &mut win_lat, &mut total_lat, events);
            }
            _ = stop_poll.tick() => {}
            _ = drain_sleep => break,
        }
    }

    let end_ns = clock.now_ns();
    close_window(
        &mut csv,
        end_ns,
        &mut win_start_ns,
        &mut win,
        &mut win_lat,
        &mut total_lat,
        events,
    );
    let unacked_at_end = in_flight.len() as u64;
    drop(in_flight);
    // Leave the connection cleanly; a failed flush only loses nothing of ours.
    let _ = client.flush().await;

    let elapsed_s = end_ns.saturating_sub(start_ns) as f64 / 1e9;
    let bytes_acked = acked * msg_bytes;
    let per_s = |x: f64| if elapsed_s > 0.0 { x / elapsed_s } else { 0.0 };
    let summary = JsPubSummary {
        published,
        acked,
        bytes_acked,
        errors: errors.total,
        errors_by_kind: errors.by_kind,
        unacked_at_end,
        stop_reason: stop_reason.to_string(),
        elapsed_s,
        msgs_per_s: per_s(acked as f64),
        mib_per_s: per_s(bytes_acked as f64) / (1024.0 * 1024.0),
        ack_lat_us: LatencySummary::from_ns_histogram(&total_lat),
        msg_size: opts.msg_size,
        window: opts.window,
        js_context: settings,
    };
    events.event(
        "load_stop",
        serde_json::json!({
            "reason": summary.stop_reason, "published": summary.published, "acked": summary.acked,
            "errors": summary.errors, "unacked_at_end": summary.unacked_at_end,
            "elapsed_s": summary.elapsed_s, "msgs_per_s": summary.msgs_per_s,
        }),
    );
    Ok(summary)
}

/// Ends the current stats window at `t_ns`: writes its row, folds its latencies into
/// the total and starts the next window.
#[allow(clippy::too_many_arguments)]
fn close_window(
    csv: &mut Option<LoadCsv>,
    t_ns: u64,
    win_start_ns: &mut u64,
    win: &mut WindowCounts,
    win_lat: &mut hdrhistogram::Histogram<u64>,
    total_lat: &mut hdrhistogram::Histogram<u64>,
    events: &EventLog,
) {
    // Strictly increasing t_ns, even if two windows close within one clock tick.
    let t_ns = t_ns.max(*win_start_ns + 1);
    if let Some(w) = csv.as_mut() {
        if let Err(e) = w.row(t_ns, t_ns - *win_start_ns, win, win_lat) {
            // A full disk must not stop the load: record it once and stop writing.
            events.error(
                "load",
                "load_csv_write",
                &format!("cannot write load.csv: {e}"),
            );
            *csv = None;
        }
    }
    // Same bounds, so addition cannot fail.
    let _ = total_lat.add(&*win_lat);
    win_lat.reset();
    *win = WindowCounts::default();
    *win_start_ns = t_ns;
}
