//! What every worker shares ([`Ctx`], [`SendPlan`], [`SenderGuard`]) and the core and
//! JetStream publish and request operations. Hot loops allocate nothing per message
//! (payloads are one shared `Bytes`, or stamped payloads carved from an arena) and record
//! into their own [`Recorder`]. The loops themselves are [`super::send`] and
//! [`super::receive`].

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use async_nats::jetstream;
use bytes::Bytes;
use collectors::clock::Clock;

use super::args::LoadArgs;
use super::pace::Pacer;
use super::reconcile::MsgIds;
use super::record::{Recorder, StampedPayloads};
use super::send::{Connects, OpError, OpResult, Operation, Sent};

/// How long a raw client (publisher or subscriber) whose connection broke tries to
/// connect again before it gives up, when the run's end does not come first: as long as
/// async-nats's clients try (240 attempts 250 ms apart, see `connect`), so a server that
/// is gone ends even a run without --duration (issue 25).
pub(crate) const RECONNECT_GIVE_UP: Duration = Duration::from_secs(60);

/// What every worker shares.
#[derive(Clone)]
pub struct Ctx {
    pub clock: Clock,
    /// The run's events (a fault's first ack after the reconnect).
    pub events: crate::recording::EventLog,
    pub stop: Arc<AtomicBool>,
    /// The load's start on the run clock.
    pub start_ns: u64,
    /// `--duration` end on the run clock.
    pub end_ns: Option<u64>,
    /// Senders still running (receivers wait for them, then drain).
    pub(crate) senders_left: Arc<AtomicU64>,
    /// When the last sender finished, on the run clock (0: not yet). Receivers drain for
    /// [`IDLE_NS`] from the later of this and their last message: a receiver whose last
    /// message came long before a slow sender finished still waits for the rest.
    pub(crate) senders_done_ns: Arc<AtomicU64>,
    /// Total messages the senders will send (receivers' target), if known.
    pub expected: Option<u64>,
    /// Whether this run has senders of its own (`pub --sub`, `js-pub --consume`): then
    /// receivers drain for 1 s after the senders finish. Without (`sub`, `reply`,
    /// `js-consume` alone) they end at --msgs, --duration, Ctrl-C or their own idle rule.
    pub(crate) with_senders: bool,
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
    pub(crate) pacer: Option<Pacer>,
    /// Stamp payloads with the send time (for receivers' end-to-end latency).
    pub stamp: bool,
    pub size: usize,
    /// `--payload`: every message's body (the main role's; never stamped).
    pub body: Option<Bytes>,
    /// `-H`: the headers of every message (the main role's), as given.
    pub headers: Vec<String>,
    /// `--time-publish`: a send stage that completes at once is timed too.
    pub time_sends: bool,
    /// The number of this client's first message in the run (the shares before it).
    pub first: u64,
}

impl SendPlan {
    /// The plan of client `index` of the `n_role` clients of a role (NATS and AMQP
    /// alike): its share of `--msgs`, and with `--rate` (the main role only: receivers and
    /// getters beside it go as fast as they can) a pacer of `rate / n_role` from the run's
    /// start to its `--duration` end, phase-shifted by `index / n_role` so clients
    /// interleave. `stamp` and `size` are the role's.
    pub(crate) fn for_client(
        a: &LoadArgs,
        ctx: &Ctx,
        index: usize,
        n_role: usize,
        is_main: bool,
        stamp: bool,
        size: usize,
    ) -> SendPlan {
        let n = n_role.max(1);
        SendPlan {
            count: a.total_ops().map(|t| share(t, index, n)),
            pacer: a.rate.filter(|_| is_main).map(|r| {
                Pacer::new(
                    ctx.clock,
                    ctx.start_ns,
                    r / n as f64,
                    index as f64 / n as f64,
                    ctx.end_ns,
                )
            }),
            stamp: stamp && !(is_main && a.payload_body.is_some()),
            size,
            body: a.payload_body.clone().filter(|_| is_main),
            headers: if is_main { a.headers.clone() } else { vec![] },
            time_sends: is_main && a.time_publish,
            first: a
                .total_ops()
                .map_or(0, |t| (0..index).map(|j| share(t, j, n)).sum()),
        }
    }

    /// The intended start of the next op (`done` already started), or None when this
    /// sender is done: its count reached, its schedule or `--duration` over, or stopped.
    #[inline]
    pub(crate) async fn next(&mut self, ctx: &Ctx, done: u64) -> Option<u64> {
        if self.count.is_some_and(|c| done >= c) {
            return None;
        }
        match self.pacer.as_mut() {
            Some(p) => {
                let t = p.next().await?;
                if ctx.stop.load(Ordering::Relaxed) {
                    // Not issued: given back, so the sender counts it if it was due.
                    p.give_back();
                    return None;
                }
                Some(t)
            }
            None => {
                let now = ctx.clock.now_ns();
                (!ctx.over(now)).then_some(now)
            }
        }
    }
}

/// Marks a sender finished when dropped (so receivers know when to drain).
pub(crate) struct SenderGuard(Ctx);

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

/// Awaits every worker task of a run: the first that panicked, if one did (the run's
/// other workers still end first, so their figures are kept).
pub(crate) async fn join_workers<T>(
    tasks: Vec<tokio::task::JoinHandle<T>>,
) -> Option<tokio::task::JoinError> {
    let mut panicked = None;
    for t in tasks {
        if let Err(e) = t.await {
            panicked.get_or_insert(e);
        }
    }
    panicked
}

/// Closes a run's `--inject-latency` proxies: what each measured.
pub(crate) fn close_proxies(
    proxies: Vec<crate::proxy::ProxyHandle>,
) -> Vec<crate::proxy::ProxyReport> {
    proxies
        .into_iter()
        .map(|mut p| {
            p.close();
            p.report()
        })
        .collect()
}

/// A sender's payloads: one shared `Bytes`, or stamped copies carved from an arena.
pub(crate) struct Payloads {
    fixed: Bytes,
    stamped: Option<StampedPayloads>,
}

impl Payloads {
    pub fn new(plan: &SendPlan) -> Payloads {
        if let Some(b) = &plan.body {
            return Payloads {
                fixed: b.clone(),
                stamped: None,
            };
        }
        Payloads {
            fixed: Bytes::from(vec![b'x'; plan.size]),
            stamped: (plan.stamp && plan.size >= 16).then(|| StampedPayloads::new(plan.size)),
        }
    }

    #[inline]
    pub(crate) fn next_payload(&mut self) -> Bytes {
        match &mut self.stamped {
            Some(s) => s.next_payload(),
            None => self.fixed.clone(),
        }
    }
}

/// Core publish through async-nats: fire and forget, counted when handed to the client.
pub(crate) struct CorePublish {
    pub client: async_nats::Client,
    pub connects: Connects,
    pub subject: async_nats::Subject,
    pub payloads: Payloads,
    pub size: u64,
    /// `-H`: published with these headers.
    pub headers: Option<async_nats::HeaderMap>,
    /// `--multisubject`: each publish to the next of these.
    pub(crate) subjects: Option<super::message::Subjects>,
    /// `pub --sub M`: the run's flow control (looked at every [`FLOW_EVERY`] publishes).
    pub flow: Option<Arc<super::flow::Flow>>,
    pub ctx: Ctx,
    /// When this publisher first saw its client disconnected (run clock; looked at every
    /// [`FLOW_EVERY`] publishes): the moment a lost connection's failure line names.
    pub lost_ns: Option<u64>,
}

/// How often an async-nats core publisher looks at the flow control and at its
/// connection (publishes).
pub(crate) const FLOW_EVERY: u64 = 256;

impl Operation for CorePublish {
    type Pending = std::future::Ready<OpResult>;

    #[inline]
    async fn send(&mut self, k: u64) -> Option<Sent<Self::Pending>> {
        if k.is_multiple_of(FLOW_EVERY) {
            if self.lost_ns.is_none() && !self.connects.connected() {
                self.lost_ns = Some(self.ctx.clock.now_ns());
            }
            if let Some(f) = &self.flow {
                f.sent(if k == 0 { 0 } else { FLOW_EVERY });
                f.wait_room(&self.ctx).await;
            }
        }
        let p = self.payloads.next_payload();
        let subject = match &mut self.subjects {
            Some(s) => s.next_subject(),
            None => self.subject.clone(),
        };
        let r = match &self.headers {
            None => self.client.publish(subject, p).await,
            Some(h) => {
                self.client
                    .publish_with_headers(subject, h.clone(), p)
                    .await
            }
        };
        Some(match r {
            Ok(()) => Sent::Done(self.size),
            Err(e) => Sent::Failed(OpError::new("publish", e)),
        })
    }

    fn connects(&self) -> u64 {
        self.connects.get()
    }

    fn connected(&self) -> bool {
        self.connects.connected()
    }

    async fn finish(&mut self, rec: &mut Recorder) {
        // Closing right after a flush can lose what the server has not read yet.
        if let Err(e) = super::connect::round_trip(&self.client).await {
            let now = rec.now();
            match self.lost_ns {
                // The connection broke and never came back: said as such, when it broke.
                Some(t) if !self.connects.connected() => {
                    rec.error_n_since(now, t, "disconnected", 1, || e.to_string());
                }
                _ => rec.error(now, "flush", || e.to_string()),
            }
        }
    }
}

/// The kind of a failed request, for counting and events.
pub(crate) fn request_error_kind(e: &async_nats::RequestError) -> &'static str {
    match e.kind() {
        async_nats::RequestErrorKind::NoResponders => "no_responders",
        async_nats::RequestErrorKind::TimedOut => "timeout",
        _ => "request",
    }
}

/// A request of `payload` (with `headers`, `-H`) to `subject`, completed by its reply
/// within `timeout`.
pub fn request(
    client: &async_nats::Client,
    subject: async_nats::Subject,
    headers: Option<async_nats::HeaderMap>,
    payload: Bytes,
    timeout: Duration,
) -> impl Future<Output = Result<async_nats::Message, OpError>> + Send + 'static {
    let c = client.clone();
    async move {
        let r = match headers {
            None => tokio::time::timeout(timeout, c.request(subject, payload)).await,
            Some(h) => {
                tokio::time::timeout(timeout, c.request_with_headers(subject, h, payload)).await
            }
        };
        match r {
            Ok(Ok(m)) => Ok(m),
            Ok(Err(e)) => Err(OpError::new(request_error_kind(&e), e)),
            Err(_) => Err(OpError::new(
                "timeout",
                format_args!("no reply within {timeout:?}"),
            )),
        }
    }
}

/// The kind of a JetStream publish error, for counting and events.
pub(crate) fn publish_error_kind(e: &jetstream::context::PublishError) -> &'static str {
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

/// JetStream publish: the send stage hands the message to the client, the completion
/// stage is its ack. With `--msg-id` each publish carries its `Nats-Msg-Id` and is
/// remembered until its ack (or a definite error) comes ([`super::reconcile`]).
pub(crate) struct JsPublish {
    pub js: jetstream::Context,
    pub subject: async_nats::Subject,
    pub payloads: Payloads,
    pub size: u64,
    /// `--msg-id`: the run's ids and this client's index.
    pub(crate) msg_ids: Option<(MsgIds, usize)>,
    pub connects: Connects,
    /// `-H`: every publish carries these headers.
    pub headers: Option<async_nats::HeaderMap>,
    /// `--atomic-batch`: publishes go in atomic batches.
    pub(crate) atomic: Option<Atomic>,
    /// `--multisubject`: each publish to the next of these.
    pub(crate) subjects: Option<super::message::Subjects>,
}

/// Atomic batch publishing (nats-server 2.12+, ADR-50): each batch of `n` is `n - 1`
/// core publishes with `Nats-Batch-Id` and `Nats-Batch-Sequence` headers, then a commit
/// (`Nats-Batch-Commit: 1`) published as a JetStream publish whose ack stores the whole
/// batch; the window is 1, so the next batch starts after that ack, as natscli's
/// publisher. Only the commits are timed: one latency per batch, as natscli records.
pub(crate) struct Atomic {
    pub n: u64,
    /// This client's publishes (its last batch may be shorter).
    pub count: Option<u64>,
    pub client: async_nats::Client,
    /// This client's prefix of its batch ids (`<id>-<batch number>`).
    pub id: String,
}

/// A publish's ack, as the bytes it stored.
pub struct Acked {
    ack: <jetstream::context::PublishAckFuture as std::future::IntoFuture>::IntoFuture,
    size: u64,
    /// `--msg-id`: forget publish `k` of this client once its ack or a definite error came.
    settle: Option<(MsgIds, usize, u64)>,
}

impl Future for Acked {
    type Output = OpResult;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<OpResult> {
        let size = self.size;
        let r = std::task::ready!(self.ack.as_mut().poll(cx)).map(|_ack| size);
        let r = r.map_err(|e| OpError::new(publish_error_kind(&e), e));
        // A timeout may still have been stored: it stays remembered for the retry.
        if let (Some((ids, c, k)), false) =
            (&self.settle, matches!(&r, Err(e) if e.kind == "timeout"))
        {
            ids.settled(*c, *k);
        }
        Poll::Ready(r)
    }
}

impl Operation for JsPublish {
    type Pending = Acked;
    const UNFINISHED: (&'static str, &'static str) = ("unacked_at_stop", "publishes had no ack");

    fn connects(&self) -> u64 {
        self.connects.get()
    }

    fn connected(&self) -> bool {
        self.connects.connected()
    }

    #[inline]
    async fn send(&mut self, k: u64) -> Option<Sent<Acked>> {
        let p = self.payloads.next_payload();
        let mut headers = self.headers.clone();
        if let Some(s) = &mut self.subjects {
            self.subject = s.next_subject();
        }
        if let Some(b) = &self.atomic {
            let j = k % b.n;
            let last = j + 1 == b.n || b.count.is_some_and(|c| k + 1 == c);
            let h = headers.get_or_insert_with(async_nats::HeaderMap::new);
            h.insert("Nats-Batch-Id", format!("{}-{}", b.id, k / b.n).as_str());
            h.insert("Nats-Batch-Sequence", (j + 1).to_string().as_str());
            if !last {
                let r = b
                    .client
                    .publish_with_headers(self.subject.clone(), h.clone(), p)
                    .await;
                return Some(match r {
                    Ok(()) => Sent::Done(self.size),
                    Err(e) => Sent::Failed(OpError::new("publish", e)),
                });
            }
            h.insert("Nats-Batch-Commit", "1");
        }
        let sent = match (&self.msg_ids, headers) {
            (None, None) => self.js.publish(self.subject.clone(), p).await,
            (None, Some(h)) => {
                self.js
                    .publish_with_headers(self.subject.clone(), h, p)
                    .await
            }
            (Some((ids, c)), h) => {
                let mut h = h.unwrap_or_default();
                h.insert(async_nats::header::NATS_MESSAGE_ID, ids.id(*c, k).as_str());
                ids.sent(*c, k);
                self.js
                    .publish_with_headers(self.subject.clone(), h, p)
                    .await
            }
        };
        let settle = self.msg_ids.as_ref().map(|(ids, c)| (ids.clone(), *c, k));
        Some(match sent {
            Ok(ack) => Sent::Pending(Acked {
                ack: std::future::IntoFuture::into_future(ack),
                size: self.size,
                settle,
            }),
            Err(e) => {
                // Not sent (or refused at once): nothing to retry.
                if let Some((ids, c, k)) = settle {
                    ids.settled(c, k);
                }
                Sent::Failed(OpError::new(publish_error_kind(&e), e))
            }
        })
    }
}
