//! The workers: one task per connection and role. Hot loops allocate nothing per
//! message (payloads are one shared `Bytes`, or stamped payloads carved from an arena)
//! and record into their own [`Recorder`].

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream;
use bytes::Bytes;
use collectors::clock::Clock;
use futures::stream::FuturesUnordered;
use futures::StreamExt;

use super::pace::Pacer;
use super::record::{read_stamp, realtime_ns, Recorder, StampedPayloads};

/// What every worker shares.
#[derive(Clone)]
pub struct Ctx {
    pub clock: Clock,
    pub stop: Arc<AtomicBool>,
    /// The load's start on the run clock.
    pub start_ns: u64,
    /// `--duration` end on the run clock.
    pub end_ns: Option<u64>,
    /// Senders still running (receivers wait for them, then drain).
    pub senders_left: Arc<AtomicU64>,
    /// When the last sender finished, on the run clock (0: not yet). Receivers drain for
    /// [`IDLE_NS`] from the later of this and their last message: a receiver whose last
    /// message came long before a slow sender finished still waits for the rest.
    pub senders_done_ns: Arc<AtomicU64>,
    /// Total messages the senders will send (receivers' target), if known.
    pub expected: Option<u64>,
    /// Whether this run has senders of its own (`pub --sub`, `js-pub --consume`): then
    /// receivers drain for 1 s after the senders finish. Without (`sub`, `reply`,
    /// `js-consume` alone) they end at --msgs, --duration, Ctrl-C or their own idle rule.
    pub with_senders: bool,
}

impl Ctx {
    #[inline]
    pub fn over(&self, now: u64) -> bool {
        self.stop.load(Ordering::Relaxed) || self.end_ns.is_some_and(|e| now >= e)
    }
}

/// How many operations worker `i` of `n` does out of `total`.
pub fn share(total: u64, i: usize, n: usize) -> u64 {
    let n = n as u64;
    total / n + u64::from((i as u64) < total % n)
}

/// A sender's plan: how many ops (None = until the duration ends) and its pacer.
pub struct SendPlan {
    pub count: Option<u64>,
    pub pacer: Option<Pacer>,
    /// Stamp payloads with the send time (for receivers' end-to-end latency).
    pub stamp: bool,
    pub size: usize,
}

impl SendPlan {
    /// The intended start of the next op, or None when this sender is done.
    #[inline]
    pub(crate) async fn next(&mut self, ctx: &Ctx, done: u64, rec: &Recorder) -> Option<u64> {
        if self.count.is_some_and(|c| done >= c) {
            return None;
        }
        match self.pacer.as_mut() {
            Some(p) => {
                let t = p.next().await?;
                (!ctx.stop.load(Ordering::Relaxed)).then_some(t)
            }
            None => {
                let now = rec.now();
                (!ctx.over(now)).then_some(now)
            }
        }
    }
}

/// Marks a sender finished when dropped (so receivers know when to drain).
pub struct SenderGuard(Ctx);

impl SenderGuard {
    pub fn new(ctx: &Ctx) -> SenderGuard {
        SenderGuard(ctx.clone())
    }
}

impl Drop for SenderGuard {
    fn drop(&mut self) {
        let c = &self.0;
        if c.senders_left.fetch_sub(1, Ordering::SeqCst) == 1 {
            c.senders_done_ns
                .store(c.clock.now_ns().max(1), Ordering::SeqCst);
        }
    }
}

fn payload_source(plan: &SendPlan) -> (Bytes, Option<StampedPayloads>) {
    let fixed = Bytes::from(vec![b'x'; plan.size]);
    let stamped = (plan.stamp && plan.size >= 16).then(|| StampedPayloads::new(plan.size));
    (fixed, stamped)
}

#[inline]
fn next_payload(fixed: &Bytes, stamped: &mut Option<StampedPayloads>) -> Bytes {
    match stamped {
        Some(s) => s.next_payload(),
        None => fixed.clone(),
    }
}

/// Core publish: fire and forget; counted when handed to the client.
pub async fn core_pub(
    client: async_nats::Client,
    subject: async_nats::Subject,
    mut plan: SendPlan,
    mut rec: Recorder,
    ctx: Ctx,
) {
    let _g = SenderGuard::new(&ctx);
    let (fixed, mut stamped) = payload_source(&plan);
    let size = plan.size as u64;
    let mut done = 0u64;
    let paced = plan.pacer.is_some();
    while let Some(t) = plan.next(&ctx, done, &rec).await {
        let p = next_payload(&fixed, &mut stamped);
        // Unpaced, `t` is the clock read that decided to send: one read per message.
        let now = if paced { rec.now() } else { t };
        match client.publish(subject.clone(), p).await {
            Ok(()) => rec.op(now, size),
            Err(e) => rec.error(rec.now(), "publish", || e.to_string()),
        }
        done += 1;
    }
    // Closing right after a flush can lose what the server has not read yet.
    if let Err(e) = super::connect::round_trip(&client).await {
        rec.error(rec.now(), "flush", || e.to_string());
    }
    rec.finish();
}

/// How long a receiver waits without a message before it calls its source drained.
pub const IDLE_NS: u64 = 1_000_000_000;

/// Whether a receiver should stop. `reached`: its count is done. With senders in the run,
/// it waits while they run, then allows [`IDLE_NS`] without messages. Alone, it ends at
/// --duration, or after [`IDLE_NS`] without messages when `idle_ends` (a drained stream).
pub fn receiver_should_end(
    ctx: &Ctx,
    reached: bool,
    idle_since_ns: u64,
    now: u64,
    idle_ends: bool,
) -> bool {
    if ctx.stop.load(Ordering::Relaxed) || reached {
        return true;
    }
    let past_end = ctx.end_ns.is_some_and(|e| now >= e);
    if ctx.with_senders {
        let done_ns = ctx.senders_done_ns.load(Ordering::SeqCst);
        let since = match (done_ns, ctx.end_ns) {
            (0, Some(e)) if past_end => e,
            (0, _) => return false,
            (d, _) => d,
        };
        now.saturating_sub(idle_since_ns.max(since)) > IDLE_NS
    } else {
        let idle = now.saturating_sub(idle_since_ns) > IDLE_NS;
        past_end || (idle_ends && idle)
    }
}

/// Records one received message: end to end from its stamp when it has one.
#[inline]
pub fn record_receipt(rec: &mut Recorder, now: u64, payload: &[u8]) {
    match read_stamp(payload) {
        Some(sent_rt) => {
            let e2e = realtime_ns().saturating_sub(sent_rt);
            rec.op_e2e(now, payload.len() as u64, e2e);
        }
        None => rec.op(now, payload.len() as u64),
    }
}

/// Receives from any stream of payloads until the senders are done and it has drained.
async fn receive<S, M>(mut msgs: S, payload: impl Fn(&M) -> &[u8], mut rec: Recorder, ctx: Ctx)
where
    S: futures::Stream<Item = M> + Unpin,
{
    let mut got = 0u64;
    let mut last = rec.now();
    loop {
        let now = rec.now();
        // Alone, a core subscriber waits for its first message, then ends 1 s after the last
        // one (unless --duration says how long to listen).
        let idle_ends = got > 0 && ctx.end_ns.is_none();
        let reached = ctx.expected.is_some_and(|e| got >= e);
        if receiver_should_end(&ctx, reached, last, now, idle_ends) {
            break;
        }
        match tokio::time::timeout(Duration::from_millis(100), msgs.next()).await {
            Ok(Some(m)) => {
                let now = rec.now();
                record_receipt(&mut rec, now, payload(&m));
                got += 1;
                last = now;
            }
            Ok(None) => break,
            Err(_) => {}
        }
    }
    if let Some(e) = ctx.expected {
        if got < e && !ctx.stop.load(Ordering::Relaxed) {
            // Core NATS drops messages a slow subscriber cannot take: count them.
            let n = e - got;
            rec.error_n(rec.now(), "missing", n, || {
                format!("{n} of {e} messages never arrived (slow consumer drops?)")
            });
        }
    }
    rec.finish();
}

/// Core subscriber: every message on the subject; end-to-end latency from the stamp.
pub async fn core_sub(sub: async_nats::Subscriber, rec: Recorder, ctx: Ctx) {
    receive(sub, |m: &async_nats::Message| &m.payload[..], rec, ctx).await;
}

/// What one operation of [`windowed`] reports: the bytes it moved, or why it failed.
pub type OpResult = Result<u64, OpError>;

/// A failed operation: its kind (a column of the summary, an event) and a detail for the
/// first event of that kind.
#[derive(Debug)]
pub struct OpError {
    pub kind: &'static str,
    pub detail: String,
}

impl OpError {
    pub fn new(kind: &'static str, detail: impl std::fmt::Display) -> OpError {
        OpError {
            kind,
            detail: detail.to_string(),
        }
    }
}

/// Runs operations `op(0)`, `op(1)`, ... with up to `window` in flight (1 = closed loop,
/// like `nats bench`), started when `plan` says (open loop with --rate). `op(k)` returns
/// `None` when there is nothing more to do. Each completion is timed when it arrives,
/// never when the sender gets round to it, from its actual start (`lat`) and from its
/// intended start (`co`). After Ctrl-C, operations in flight get 2 s to finish.
pub async fn windowed<F, Fut>(
    window: usize,
    mut plan: SendPlan,
    mut rec: Recorder,
    ctx: Ctx,
    mut op: F,
) where
    F: FnMut(u64) -> Option<Fut>,
    Fut: std::future::Future<Output = OpResult>,
{
    let mut inflight = FuturesUnordered::new();
    let mut done = 0u64;
    let mut sending = true;
    let window = window.max(1);
    let mut drain_deadline: Option<tokio::time::Instant> = None;
    let paced = plan.pacer.is_some();
    loop {
        if ctx.stop.load(Ordering::Relaxed) && sending {
            sending = false;
            drain_deadline = Some(tokio::time::Instant::now() + Duration::from_secs(2));
        }
        let can_send = sending && inflight.len() < window;
        if !can_send && inflight.is_empty() {
            break;
        }
        let deadline = drain_deadline
            .unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(3600));
        tokio::select! {
            biased;
            Some((r, sent, intended)) = inflight.next(), if !inflight.is_empty() => {
                let now = rec.now();
                match r {
                    Ok(bytes) => rec.op_lat(now, bytes, sent, intended),
                    Err(OpError { kind, detail }) => rec.error(now, kind, || detail),
                }
            }
            next = plan.next(&ctx, done, &rec), if can_send => match next {
                Some(intended) => match op(done) {
                    Some(f) => {
                        let sent = rec.now();
                        // Unpaced, the intended start is the send itself.
                        let intended = if paced { intended } else { sent };
                        inflight.push(async move { (f.await, sent, intended) });
                        done += 1;
                    }
                    None => sending = false,
                },
                None => sending = false,
            },
            _ = tokio::time::sleep_until(deadline), if drain_deadline.is_some() => {
                let n = inflight.len() as u64;
                rec.error_n(rec.now(), "unfinished_at_stop", n, || format!("{n} operations unfinished 2 s after Ctrl-C"));
                break;
            }
        }
    }
    rec.finish();
}

/// Requester: up to `window` requests in flight (1 = closed loop, like `nats bench`).
pub async fn request(
    client: async_nats::Client,
    subject: async_nats::Subject,
    window: usize,
    timeout: Duration,
    plan: SendPlan,
    rec: Recorder,
    ctx: Ctx,
) {
    let _g = SenderGuard::new(&ctx);
    let (fixed, mut stamped) = payload_source(&plan);
    let size = plan.size as u64;
    windowed(window, plan, rec, ctx, |_| {
        let p = next_payload(&fixed, &mut stamped);
        let c = client.clone();
        let s = subject.clone();
        Some(async move {
            match tokio::time::timeout(timeout, c.request(s, p)).await {
                Ok(Ok(_reply)) => Ok(size),
                Ok(Err(e)) => {
                    let kind = match e.kind() {
                        async_nats::RequestErrorKind::NoResponders => "no_responders",
                        async_nats::RequestErrorKind::TimedOut => "timeout",
                        _ => "request",
                    };
                    Err(OpError::new(kind, e))
                }
                Err(_) => Err(OpError::new(
                    "timeout",
                    format_args!("no reply within {timeout:?}"),
                )),
            }
        })
    })
    .await;
}

/// Responder in queue group `diskpulse`: replies with a payload of `reply_size` bytes when
/// the message has a reply subject (request/"call"), counts it either way ("cast").
/// Beside requesters of this run it ends 1 s after they finish; alone (`reply`) it serves
/// until `limit` requests, --duration or Ctrl-C.
pub async fn reply(
    client: async_nats::Client,
    mut sub: async_nats::Subscriber,
    reply_size: usize,
    limit: Option<u64>,
    mut rec: Recorder,
    ctx: Ctx,
) {
    let payload = Bytes::from(vec![b'r'; reply_size]);
    let mut last = rec.now();
    loop {
        let now = rec.now();
        let reached = !ctx.with_senders && limit.is_some_and(|l| rec.ops() >= l);
        // Requesters' --duration ends their sending; replies to requests still in flight
        // are served for 2 s more.
        let grace_end = ctx
            .end_ns
            .map(|e| e + 2_000_000_000 * u64::from(ctx.with_senders));
        if reached
            || ctx.stop.load(Ordering::Relaxed)
            || (ctx.with_senders && receiver_should_end(&ctx, false, last, now, false))
            || grace_end.is_some_and(|e| now >= e)
        {
            break;
        }
        match tokio::time::timeout(Duration::from_millis(100), sub.next()).await {
            Ok(Some(m)) => {
                let now = rec.now();
                if let Some(r) = m.reply {
                    if let Err(e) = client.publish(r, payload.clone()).await {
                        rec.error(now, "reply", || e.to_string());
                        continue;
                    }
                }
                rec.op(now, m.payload.len() as u64);
                last = now;
            }
            Ok(None) => break,
            Err(_) => {}
        }
    }
    let _ = super::connect::round_trip(&client).await;
    rec.finish();
}

/// The kind of a JetStream publish error, for counting and events.
pub fn publish_error_kind(e: &jetstream::context::PublishError) -> &'static str {
    use jetstream::context::PublishErrorKind as K;
    match e.kind() {
        K::StreamNotFound => "stream_not_found",
        K::TimedOut => "timeout",
        K::BrokenPipe => "broken_pipe",
        K::MaxAckPending => "max_ack_pending",
        K::MaxPayloadExceeded => "max_payload",
        K::WrongLastMessageId => "wrong_last_msg_id",
        K::WrongLastSequence => "wrong_last_sequence",
        K::Other => {
            let js =
                std::error::Error::source(e).and_then(|s| s.downcast_ref::<jetstream::Error>());
            match js.map(|j| j.error_code()) {
                Some(jetstream::ErrorCode::STORAGE_RESOURCES_EXCEEDED) => "storage_full",
                Some(jetstream::ErrorCode::MEMORY_RESOURCES_EXCEEDED) => "memory_full",
                Some(jetstream::ErrorCode::INSUFFICIENT_RESOURCES) => "insufficient_resources",
                Some(jetstream::ErrorCode::ACCOUNT_RESOURCES_EXCEEDED) => "account_limits",
                Some(jetstream::ErrorCode::STREAM_MESSAGE_EXCEEDS_MAXIMUM) => "msg_too_large",
                // A discard-new stream at its limits answers "maximum bytes exceeded" or
                // "maximum messages exceeded" with this code: call that what it is.
                Some(jetstream::ErrorCode::STREAM_STORE_FAILED) => {
                    let d = js.map(|j| j.to_string()).unwrap_or_default();
                    if d.contains("maximum bytes exceeded")
                        || d.contains("maximum messages exceeded")
                    {
                        "stream_full"
                    } else {
                        "store_failed"
                    }
                }
                Some(jetstream::ErrorCode::STREAM_NOT_FOUND) => "stream_not_found",
                Some(_) => "js_error",
                None => "other",
            }
        }
    }
}

/// JetStream publish: `window` acks in flight, sliding (1 = synchronous).
pub async fn js_pub(
    js: jetstream::Context,
    subject: async_nats::Subject,
    window: usize,
    mut plan: SendPlan,
    mut rec: Recorder,
    ctx: Ctx,
) {
    let _g = SenderGuard::new(&ctx);
    let (fixed, mut stamped) = payload_source(&plan);
    let size = plan.size as u64;
    let mut inflight = FuturesUnordered::new();
    let mut done = 0u64;
    let mut sending = true;
    let window = window.max(1);
    let mut drain_deadline: Option<tokio::time::Instant> = None;
    let paced = plan.pacer.is_some();
    loop {
        if ctx.stop.load(Ordering::Relaxed) && sending {
            // Ctrl-C: stop sending; wait at most 2 s for the acks still in flight.
            sending = false;
            drain_deadline = Some(tokio::time::Instant::now() + Duration::from_secs(2));
        }
        let can_send = sending && inflight.len() < window;
        if !can_send && inflight.is_empty() {
            break;
        }
        let deadline = drain_deadline
            .unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(3600));
        tokio::select! {
            biased;
            Some((r, sent, intended)) = inflight.next(), if !inflight.is_empty() => {
                let now = rec.now();
                match r {
                    Ok(_ack) => rec.op_lat(now, size, sent, intended),
                    Err(e) => rec.error(now, publish_error_kind(&e), || e.to_string()),
                }
            }
            next = plan.next(&ctx, done, &rec), if can_send => match next {
                Some(intended) => {
                    let p = next_payload(&fixed, &mut stamped);
                    let sent = rec.now();
                    let intended = if paced { intended } else { sent };
                    match js.publish(subject.clone(), p).await {
                        Ok(ack) => inflight.push(async move { (ack.await, sent, intended) }),
                        Err(e) => rec.error(rec.now(), publish_error_kind(&e), || e.to_string()),
                    }
                    done += 1;
                }
                None => sending = false,
            },
            _ = tokio::time::sleep_until(deadline), if drain_deadline.is_some() => {
                let n = inflight.len() as u64;
                rec.error_n(rec.now(), "unacked_at_stop", n, || format!("{n} publishes had no ack 2 s after Ctrl-C"));
                break;
            }
        }
    }
    rec.finish();
}
