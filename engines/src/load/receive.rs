//! The one receiver loop: every receiving role (core subscriber, responder, JetStream pull
//! and ordered consumers) is an [`Inbox`] over a message stream, run by [`receive_loop`].
//!
//! The loop asks the inbox whether to end ([`Inbox::should_end`]: a count reached, the
//! senders done and the stream drained, --duration, Ctrl-C), waits up to 100 ms for the
//! next item (so those rules are looked at even when nothing comes), and hands each item
//! to [`Inbox::take`] with the time it arrived. What an inbox counts is `got`; `last` is
//! when it last counted one, for the idle rules.
//!
//! Riding through a fault (issue 9): async-nats connects again and subscribes again by
//! itself. The loop watches [`Inbox::connects`]: a reconnect restarts the idle clock (a
//! receiver does not call its source drained because the server was gone), and the first
//! message after it is a `first_ack_after_reconnect` event, as for senders
//! ([`super::send`]).

use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;

use super::record::{read_stamp, realtime_ns, Recorder};
use super::send::{Connects, FaultWatch};
use super::workers::{Ctx, FLOW_EVERY};

/// How long a receiver waits without a message before it calls its source drained.
pub(crate) const IDLE_NS: u64 = 1_000_000_000;

/// What [`Inbox::take`] made of one item.
pub(crate) enum Taken {
    /// A message received (and recorded).
    Counted,
    /// Not a message (an error, recorded as one).
    NotCounted,
    /// The inbox wants no more (its share is taken).
    End,
    /// Not part of the load (a requester's probe for a responder): neither counted nor
    /// an error.
    Skipped,
}

/// One kind of receiver.
pub(crate) trait Inbox {
    type Item;

    /// Whether to stop now, `got` items counted, the last at `last_ns`.
    fn should_end(&self, ctx: &Ctx, rec: &Recorder, got: u64, last_ns: u64, now: u64) -> bool;

    /// Handles one item that arrived at `now`.
    async fn take(&mut self, item: Self::Item, now: u64, rec: &mut Recorder) -> Taken;

    /// After the loop: what is missing, a last round trip.
    async fn finish(&mut self, _got: u64, _rec: &mut Recorder, _ctx: &Ctx) {}

    /// How many times the receiving client has connected (see [`super::send::Operation::connects`]).
    fn connects(&self) -> u64;

    /// Whether the receiving client is connected now (looked at every 100 ms at most).
    fn connected(&self) -> bool;
}

/// Receives from `msgs` into `inbox` until it says to end or the stream ends.
pub(crate) async fn receive_loop<S, I>(mut msgs: S, mut inbox: I, mut rec: Recorder, ctx: Ctx)
where
    S: futures::Stream + Unpin,
    I: Inbox<Item = S::Item>,
{
    let mut got = 0u64;
    let mut last = rec.now();
    let mut connects = inbox.connects();
    let mut fault = FaultWatch::default();
    let mut lost = Lost::default();
    loop {
        let now = rec.now();
        let c = inbox.connects();
        if c != connects {
            connects = c;
            fault.reconnect_ns = Some(now);
            last = last.max(now);
        }
        lost.look(inbox.connected(), now, &mut rec);
        if inbox.should_end(&ctx, &rec, got, last, now) {
            break;
        }
        match tokio::time::timeout(Duration::from_millis(100), msgs.next()).await {
            Ok(Some(m)) => {
                let now = rec.now();
                let errors = rec.errors();
                match inbox.take(m, now, &mut rec).await {
                    Taken::Counted => {
                        got += 1;
                        last = now;
                        fault.ok(now, &rec, &ctx);
                    }
                    Taken::NotCounted => fault.failed("receive", rec.errors() - errors),
                    Taken::Skipped => {}
                    Taken::End => break,
                }
            }
            Ok(None) => break,
            Err(_) => {}
        }
    }
    fault.end(rec.now(), &rec, &ctx);
    inbox.finish(got, &mut rec, &ctx).await;
    rec.finish();
}

/// A receiver's connection as its loop sees it: each loss is one `disconnected` error
/// at the moment it was first seen (issue 25: a `load sub` whose server was killed
/// exited 0 and said nothing), so the summary says when and the exit code says so, as a
/// publisher's does; riding through (async-nats connects again) goes on after it.
#[derive(Default)]
pub(crate) struct Lost {
    down: bool,
}

impl Lost {
    /// Looks at the client once, at `now`.
    pub(crate) fn look(&mut self, connected: bool, now: u64, rec: &mut Recorder) {
        if connected {
            self.down = false;
        } else if !self.down {
            self.down = true;
            rec.error(now, "disconnected", || {
                "the receiving connection was lost".to_string()
            });
        }
    }
}

/// Whether a receiver should stop. `reached`: its count is done. With senders in the run,
/// it waits while they run, then allows [`IDLE_NS`] without messages. Alone, it ends at
/// --duration, or after [`IDLE_NS`] without messages when `idle_ends` (a drained stream).
pub(crate) fn receiver_should_end(
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
pub(crate) fn record_receipt(rec: &mut Recorder, now: u64, payload: &[u8]) {
    match read_stamp(payload) {
        Some(sent_rt) => {
            let e2e = realtime_ns().saturating_sub(sent_rt);
            rec.op_e2e(now, payload.len() as u64, e2e);
        }
        None => rec.op(now, payload.len() as u64),
    }
}

/// Core subscriber: every message on the subject; end-to-end latency from the stamp.
/// Alone, it waits for its first message, then ends 1 s after the last one (unless
/// --duration says how long to listen). Messages it expected but never got (core NATS
/// drops what a slow subscriber cannot take) are counted as `missing`.
pub(crate) struct CoreSub {
    pub connects: Connects,
    /// `pub --sub M`: the run's flow control, told every [`FLOW_EVERY`] messages.
    pub flow: Option<std::sync::Arc<super::flow::Flow>>,
    pub index: usize,
    pub got: u64,
}

impl Inbox for CoreSub {
    type Item = async_nats::Message;

    fn connects(&self) -> u64 {
        self.connects.get()
    }

    fn connected(&self) -> bool {
        self.connects.connected()
    }

    fn should_end(&self, ctx: &Ctx, _rec: &Recorder, got: u64, last: u64, now: u64) -> bool {
        let idle_ends = got > 0 && ctx.end_ns.is_none();
        let reached = ctx.expected.is_some_and(|e| got >= e);
        receiver_should_end(ctx, reached, last, now, idle_ends)
    }

    #[inline]
    async fn take(&mut self, m: async_nats::Message, now: u64, rec: &mut Recorder) -> Taken {
        record_receipt(rec, now, &m.payload);
        self.got += 1;
        if let Some(f) = &self.flow {
            if self.got.is_multiple_of(FLOW_EVERY) {
                f.received(self.index, self.got);
            }
        }
        Taken::Counted
    }

    async fn finish(&mut self, got: u64, rec: &mut Recorder, ctx: &Ctx) {
        if let Some(f) = &self.flow {
            f.leave(self.index);
        }
        if let Some(e) = ctx.expected {
            if got < e && !ctx.stop.load(Ordering::Relaxed) {
                let n = e - got;
                rec.error_n(rec.now(), "missing", n, || {
                    format!("{n} of {e} messages never arrived (slow consumer drops?)")
                });
            }
        }
    }
}

/// Responder in queue group `diskpulse`: replies with `payload` when the message has a
/// reply subject (request/"call"), counts it either way ("cast"). Beside requesters of
/// this run it ends 1 s after they finish; alone (`reply`) it serves until `limit`
/// requests, --duration or Ctrl-C. The limit counts the requests of all the run's
/// responders together (`served`, shared): a queue group splits the requests, so a
/// count of each one's own would never be reached by all of them.
pub(crate) struct Responder {
    pub client: async_nats::Client,
    pub connects: Connects,
    pub payload: Bytes,
    pub limit: Option<u64>,
    pub served: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// Time spent on each request before its reply (natscli's `service serve --sleep`).
    pub service_time: Option<Duration>,
}

impl Inbox for Responder {
    type Item = async_nats::Message;

    fn connects(&self) -> u64 {
        self.connects.get()
    }

    fn connected(&self) -> bool {
        self.connects.connected()
    }

    fn should_end(&self, ctx: &Ctx, _rec: &Recorder, _got: u64, last: u64, now: u64) -> bool {
        let served = self.served.load(Ordering::Relaxed);
        let reached = !ctx.with_senders && self.limit.is_some_and(|l| served >= l);
        // Requesters' --duration ends their sending; replies to requests still in flight
        // are served for 2 s more.
        let grace_end = ctx
            .end_ns
            .map(|e| e + 2_000_000_000 * u64::from(ctx.with_senders));
        // Disconnected past --duration: no request in flight can reach it any more.
        let gone = ctx.end_ns.is_some_and(|e| now >= e) && !self.connects.connected();
        reached
            || gone
            || ctx.stop.load(Ordering::Relaxed)
            || (ctx.with_senders && receiver_should_end(ctx, false, last, now, false))
            || grace_end.is_some_and(|e| now >= e)
    }

    async fn take(&mut self, m: async_nats::Message, now: u64, rec: &mut Recorder) -> Taken {
        let probe = m
            .headers
            .as_ref()
            .is_some_and(|h| h.get(super::roles::PROBE_HEADER).is_some());
        if probe {
            // A requester asking whether we are there yet (roles::wait_for_interest).
            if let Some(r) = m.reply {
                let _ = self.client.publish(r, Bytes::new()).await;
            }
            return Taken::Skipped;
        }
        if let Some(t) = self.service_time {
            // Below the timer's 1 ms grain a blocking sleep is the only one that short;
            // the responder is busy meanwhile, as natscli's handler is.
            if t < Duration::from_millis(1) {
                std::thread::sleep(t);
            } else {
                tokio::time::sleep(t).await;
            }
        }
        if let Some(r) = m.reply {
            if let Err(e) = self.client.publish(r, self.payload.clone()).await {
                rec.error(now, "reply", || e.to_string());
                return Taken::NotCounted;
            }
        }
        rec.op(now, m.payload.len() as u64);
        self.served.fetch_add(1, Ordering::Relaxed);
        Taken::Counted
    }

    async fn finish(&mut self, _got: u64, _rec: &mut Recorder, _ctx: &Ctx) {
        let _ = super::connect::round_trip(&self.client).await;
    }
}
