//! The one sender loop: every sending role (core publish, raw publish, request, js-pub,
//! kv put/get, obj put/get) is an [`Operation`] with a send stage and a completion stage,
//! run by [`send_loop`].
//!
//! - The send stage runs in the loop, one operation at a time, when the plan says
//!   (`--rate` open loop, or as fast as it goes): a core publish is done there
//!   ([`Sent::Done`], counted when handed to the client); a JetStream publish hands the
//!   message over there and gets its ack future back; a request, a KV or object
//!   operation just starts ([`Sent::Pending`]).
//! - Up to `window` completions are in flight (1 = closed loop, like `nats bench`). Each
//!   is timed when it arrives, never when the sender gets round to it, from its actual
//!   send (`lat`) and from its intended start (`co`; unpaced, the two are the same).
//! - After the stop flag (Ctrl-C, or a server of the session died) nothing more is sent
//!   and completions in flight get 2 s; those still missing then are one error of the
//!   operation's [`Operation::UNFINISHED`] kind. The flag is looked at every 10 ms while
//!   the loop waits on a full window (acks from a server that is gone only time out after
//!   30 s), and a send stage that cannot finish (JetStream's in-flight limit) gives way
//!   to it: that message is not sent.
//!
//! - Riding through a fault (issue 9, every sending mode): an operation whose connection
//!   dropped before its completion came will never complete (the server that would have
//!   answered is gone, or answers on a connection that no longer exists; an object put
//!   cut mid-object waits for chunk acks that never come). When the client has connected
//!   again ([`Operation::connects`] changed, looked at before every send and every 10 ms
//!   while completions are awaited), every completion still in flight is one error of
//!   kind `timeout` and its window slot is free at once, so sending resumes as soon as a
//!   server answers instead of after the 30 s ack timeout. This errs on the safe side: an
//!   ack that comes back on the new connection after the loop saw the reconnect is dropped
//!   and counted lost (one that came before is a real ack), so what is counted acked is
//!   never more than what the server stored. Their failure time is
//!   when the server stopped answering (the loop saw the client disconnected, looked at
//!   every 10 ms while waiting; else the last success before), not the reconnect, so a
//!   failure line says when the fault began.
//! - Each fault is visible per client: the first operation that completes after a
//!   reconnect is a `first_ack_after_reconnect` event (`t_ns` = its completion on the run
//!   clock, `reconnect_ns` = when the loop saw the new connection, `failed` and `timeouts`
//!   = the operations that failed from the last success before the fault to this one);
//!   a run that ends before any succeeds again has `no_ack_after_reconnect` instead.
//! - Nothing due is ever nothing (issue 23): with `--rate`, every intended start before
//!   the loop stopped sending (the `--duration` end, Ctrl-C, the server's death) that was
//!   never issued, because the loop was held by a full window of acks from a server that
//!   is gone or by a send stage that could not finish, is counted at the end as failures
//!   of kind `not_sent`, from the first such start. A sender that was merely behind its
//!   schedule when it stopped (its window not full: the CPU, not the server) is not
//!   counted so. With a server that comes back, the
//!   backlog is sent at once and its latency from the intended start covers the outage.
//! - `--duration` is kept: when it ends (looked at every 10 ms while completions are
//!   awaited) the same 2 s drain as after Ctrl-C starts.
//!
//! While nothing is in flight (fire and forget, or a closed loop between operations) the
//! loop awaits the plan and the send stage directly, without `select!`: the core publish
//! hot path costs what a plain loop costs.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::task::Poll;
use std::time::Duration;

use format::events::{AckAfterReconnect, Body};
use futures::stream::FuturesUnordered;
use futures::StreamExt;

use super::record::Recorder;
use super::workers::{Ctx, SendPlan};

/// What one operation's completion reports: the bytes it moved, or why it failed.
pub(crate) type OpResult = Result<u64, OpError>;

/// A failed operation: its kind (a column of the summary, an event) and a detail for the
/// first event of that kind.
#[derive(Debug)]
pub struct OpError {
    pub kind: &'static str,
    pub detail: String,
    /// When it failed, if that was before it was reported (run clock): a publish whose
    /// write failed at 1.9 s is reported once the reconnect gives up, at the end; its
    /// failure line says 1.9 s (issue 25).
    pub since_ns: Option<u64>,
}

impl OpError {
    pub fn new(kind: &'static str, detail: impl std::fmt::Display) -> OpError {
        OpError {
            kind,
            detail: detail.to_string(),
            since_ns: None,
        }
    }

    /// The same failure, first seen at `ns` (run clock).
    pub fn since(mut self, ns: u64) -> OpError {
        self.since_ns = Some(ns);
        self
    }

    /// Records it on `rec` at `now` (at `since_ns` when that is earlier).
    fn record(self, now: u64, rec: &mut Recorder) {
        let OpError {
            kind,
            detail,
            since_ns,
        } = self;
        match since_ns {
            Some(t) => rec.error_n_since(now, t, kind, 1, || detail),
            None => rec.error(now, kind, || detail),
        }
    }
}

/// What the send stage of one operation did.
pub(crate) enum Sent<P> {
    /// Done at the send (fire and forget): this many bytes, no latency.
    Done(u64),
    /// Sent; the future completes it (an ack, a reply, a value, a whole object).
    Pending(P),
    /// The send itself failed; it still counts as an operation started.
    Failed(OpError),
}

/// One kind of sender's operation, in two stages.
pub(crate) trait Operation {
    /// The completion stage.
    type Pending: Future<Output = OpResult> + Send + 'static;

    /// Error kind, and what they are, of operations in flight 2 s after Ctrl-C.
    const UNFINISHED: (&'static str, &'static str) =
        ("unfinished_at_stop", "operations unfinished");

    /// The send stage of operation `k` (0, 1, ...); `None` when there is nothing more.
    async fn send(&mut self, k: u64) -> Option<Sent<Self::Pending>>;

    /// Whether the send stage may wait long (a full client buffer, JetStream's in-flight
    /// limit, while the server is gone): then it gives way to the stop flag. A stage that
    /// cannot (the raw writer: a dead socket fails the write) skips that race.
    const SEND_MAY_WAIT: bool = true;

    /// After the last completion: a flush, a PING/PONG, an error kept for the end.
    async fn finish(&mut self, _rec: &mut Recorder) {}

    /// How many times the client has connected (1 until a reconnect). A change means
    /// the completions in flight were sent on a connection that is gone; see the module.
    /// 0 (never changes) for an operation without an async-nats client.
    fn connects(&self) -> u64 {
        0
    }

    /// Whether the client is connected (to time a fault's start; see the module).
    fn connected(&self) -> bool {
        true
    }
}

/// A client's connect counter (how many times it has connected, 1 until a reconnect; see
/// [`Operation::connects`]), held so that reading it costs one atomic load (asking the
/// client clones an `Arc` each time): looked at before every send.
#[derive(Clone)]
pub struct Connects(std::sync::Arc<async_nats::Statistics>, async_nats::Client);

impl Connects {
    pub fn of(client: &async_nats::Client) -> Connects {
        Connects(client.statistics(), client.clone())
    }

    #[inline]
    pub fn get(&self) -> u64 {
        self.0.connects.load(Ordering::Relaxed)
    }

    /// Whether the client is connected now (looked at every 10 ms while waiting, not per
    /// operation).
    pub fn connected(&self) -> bool {
        self.1.connection_state() == async_nats::connection::State::Connected
    }
}

/// An operation made of a closure on one client: `op(k)` starts operation `k` (or says
/// there is none). The client is watched for reconnects (riding through a fault).
pub(crate) struct Each<F> {
    connects: Connects,
    op: F,
}

impl<F> Each<F> {
    pub fn on(client: &async_nats::Client, op: F) -> Each<F> {
        Each {
            connects: Connects::of(client),
            op,
        }
    }
}

impl<F, Fut> Operation for Each<F>
where
    F: FnMut(u64) -> Option<Fut>,
    Fut: Future<Output = OpResult> + Send + 'static,
{
    type Pending = Fut;

    async fn send(&mut self, k: u64) -> Option<Sent<Fut>> {
        (self.op)(k).map(Sent::Pending)
    }

    fn connects(&self) -> u64 {
        self.connects.get()
    }

    fn connected(&self) -> bool {
        self.connects.connected()
    }
}

/// One fault as this client's send loop sees it: from the reconnect to the first
/// operation that succeeds again; see the module.
#[derive(Default)]
pub(crate) struct FaultWatch {
    /// When the loop saw the new connection (run clock), while no operation succeeded since.
    pub reconnect_ns: Option<u64>,
    /// The last operation that succeeded (run clock; the loop's start before any).
    pub(crate) last_ok_ns: u64,
    /// When the loop first saw the client disconnected, while waiting (run clock).
    pub down_ns: Option<u64>,
    /// Operations failed since the last success, and how many of them were timeouts.
    failed: u64,
    timeouts: u64,
}

impl FaultWatch {
    /// A client's watch from its loop's start at `now` (no success yet).
    pub fn starting(now: u64) -> FaultWatch {
        FaultWatch {
            last_ok_ns: now,
            ..Default::default()
        }
    }

    /// `n` operations failed (of `kind`).
    pub fn failed(&mut self, kind: &str, n: u64) {
        self.failed += n;
        if kind == "timeout" {
            self.timeouts += n;
        }
    }

    /// An operation succeeded at `now`: the event, if it is the first after a reconnect.
    pub fn ok(&mut self, now: u64, rec: &Recorder, ctx: &Ctx) {
        if let Some(r) = self.reconnect_ns.take() {
            ctx.events.event_at(
                now,
                Body::FirstAckAfterReconnect(self.detail(r, rec, Some(now.saturating_sub(r)))),
            );
        }
        self.failed = 0;
        self.timeouts = 0;
        self.last_ok_ns = now;
    }

    fn detail(&self, reconnect_ns: u64, rec: &Recorder, after: Option<u64>) -> AckAfterReconnect {
        AckAfterReconnect {
            client: rec.client_name().to_string(),
            role: rec.role.name().to_string(),
            reconnect_ns,
            after_reconnect_ns: after,
            failed: self.failed,
            timeouts: self.timeouts,
        }
    }

    /// The run ended: a fault no operation recovered from is an event too.
    pub fn end(&self, now: u64, rec: &Recorder, ctx: &Ctx) {
        if let Some(r) = self.reconnect_ns {
            ctx.events
                .event_at(now, Body::NoAckAfterReconnect(self.detail(r, rec, None)));
        }
    }
}

/// Runs `op` as `plan` says, with up to `window` completions in flight; see the module.
#[allow(
    clippy::too_many_lines,
    reason = "the one sender loop: connects, completions, the timer and the next send are arms of one select over the same in-flight state"
)]
pub(crate) async fn send_loop<O: Operation>(
    mut op: O,
    window: usize,
    mut plan: SendPlan,
    mut rec: Recorder,
    ctx: Ctx,
) {
    let mut inflight = FuturesUnordered::new();
    // The intended start of each operation in flight, by slot (u64::MAX: a free slot):
    // scanned once a window for the oldest (load.csv's oldest_wait_us), never per op.
    let mut starts = InFlightStarts::default();
    rec.tracks_outstanding();
    let mut done = 0u64;
    let mut sending = true;
    let window = window.max(1);
    let mut draining = false;
    let paced = plan.pacer.is_some();
    // One timer for the whole loop: while completions are awaited it wakes the loop
    // every STOP_CHECK to look at the stop flag (a full window of acks from a server that
    // is gone would otherwise hold it for the ack timeout); after the stop it is the
    // drain's deadline.
    let mut tick = std::pin::pin!(tokio::time::sleep(STOP_CHECK));
    let mut connects = op.connects();
    // When the loop stopped sending (run clock), and messages it gave up on after their
    // intended start: with a pacer, every start due before then that was never issued
    // is counted at the end (`not_sent`), so an outage is failures, never nothing.
    let mut stopped_sending_ns: Option<u64> = None;
    let mut unsent = 0u64;
    // The intended start of the first of those `unsent` (a send stage that never ended).
    let mut first_unsent: Option<u64> = None;
    // Whether the loop was held when it stopped sending (a full window: acks that do not
    // come). A sender merely behind on CPU is not an outage: its backlog is not counted.
    let mut held = false;
    let mut fault = FaultWatch {
        last_ok_ns: rec.now(),
        ..Default::default()
    };
    loop {
        let c = op.connects();
        if c != connects {
            connects = c;
            let now = rec.now();
            let n = inflight.len() as u64;
            // The lost ones failed when the server stopped answering: when the loop saw
            // the client disconnected, else the last success before.
            let since = fault.down_ns.take().unwrap_or(fault.last_ok_ns);
            rec.error_n_since(now, since, "timeout", n, || {
                format!("{n} in flight when the connection dropped: lost (reconnected)")
            });
            fault.failed("timeout", n);
            fault.reconnect_ns = Some(now);
            if rec.outstanding_due(now) {
                rec.outstanding(now, starts.oldest());
            }
            inflight.clear();
            starts.clear();
        }
        // (Not only while sending: the plan itself ends at the stop, before this sees it.)
        if !draining && ctx.stop.load(Ordering::Relaxed) {
            sending = false;
            stopped_sending_ns.get_or_insert_with(|| rec.now());
            held |= inflight.len() >= window;
            draining = true;
            tick.as_mut()
                .reset(tokio::time::Instant::now() + drain_for(op.connected()));
        }
        let in_flight = inflight.len();
        let can_send = sending && in_flight < window;
        if !can_send && in_flight == 0 {
            break;
        }
        // The intended start of the next send, when it is time for one.
        let next = if in_flight == 0 {
            // Only the send stage can make progress.
            plan.next(&ctx, done).await
        } else {
            tokio::select! {
                biased;
                Some((r, sent, intended, slot)) = inflight.next() => {
                    let now = rec.now();
                    if rec.outstanding_due(now) {
                        // Before this one leaves: it was in flight at the window's end.
                        rec.outstanding(now, starts.oldest());
                    }
                    starts.free(slot);
                    match r {
                        Ok(bytes) => {
                            rec.op_lat(now, bytes, sent, intended);
                            fault.ok(now, &rec, &ctx);
                        }
                        Err(e @ OpError { .. }) => {
                            fault.failed(e.kind, 1);
                            e.record(now, &mut rec);
                        }
                    }
                    continue;
                }
                next = plan.next(&ctx, done), if can_send => next,
                () = &mut tick => {
                    let now = rec.now();
                    if rec.outstanding_due(now) {
                        rec.outstanding(now, starts.oldest());
                    }
                    rec.close_ended(now);
                    if fault.down_ns.is_none() && !op.connected() {
                        fault.down_ns = Some(now);
                    }
                    if draining {
                        let n = inflight.len() as u64;
                        let (kind, what) = O::UNFINISHED;
                        // In flight since the connection was lost, if it was.
                        let since = fault.down_ns.unwrap_or(now);
                        rec.error_n_since(now, since, kind, n, || {
                            format!("{n} {what} after the stop (2 s of drain, none when disconnected)")
                        });
                        break;
                    }
                    if ctx.end_ns.is_some_and(|e| now >= e) {
                        // --duration is over: drain like after Ctrl-C, never for the
                        // whole ack timeout.
                        sending = false;
                        stopped_sending_ns.get_or_insert(now);
                        held |= inflight.len() >= window;
                        draining = true;
                        tick.as_mut()
                            .reset(tokio::time::Instant::now() + drain_for(op.connected()));
                    } else {
                        tick.as_mut().reset(tokio::time::Instant::now() + STOP_CHECK);
                    }
                    continue;
                }
            }
        };
        let Some(intended) = next else {
            sending = false;
            stopped_sending_ns.get_or_insert_with(|| rec.now());
            continue;
        };
        // Unpaced, `intended` is the clock read that decided to send: the send itself.
        let sent = if paced { rec.now() } else { intended };
        let stage = if !O::SEND_MAY_WAIT {
            op.send(done).await
        } else {
            let mut stage = std::pin::pin!(op.send(done));
            match futures::poll!(&mut stage) {
                Poll::Ready(r) => r,
                // A send stage that waits (JetStream's in-flight limit while the server
                // is gone) gives way to Ctrl-C: the message was not sent.
                Poll::Pending => tokio::select! {
                    biased;
                    r = &mut stage => r,
                    _ = stopped(&ctx) => {
                        // Due (its intended start has passed) and never sent.
                        unsent += 1;
                        first_unsent.get_or_insert(intended);
                        continue;
                    }
                },
            }
        };
        match stage {
            None => {
                sending = false;
                stopped_sending_ns.get_or_insert_with(|| rec.now());
                continue;
            }
            Some(Sent::Done(bytes)) => {
                if plan.time_sends {
                    // natscli v0.2 times each publish call: the copy into the buffer.
                    let now = rec.now();
                    rec.op_lat(now, bytes, sent, sent);
                } else {
                    rec.op(sent, bytes);
                }
                if fault.reconnect_ns.is_some() || fault.failed > 0 {
                    fault.ok(sent, &rec, &ctx);
                }
            }
            Some(Sent::Pending(p)) => {
                let intended = if paced { intended } else { sent };
                // Up to 2 ms early is sent early (the pacer): waited since the send then,
                // as `co` counts it.
                let slot = starts.take(intended.min(sent));
                inflight.push(async move { (p.await, sent, intended, slot) });
            }
            Some(Sent::Failed(e)) => {
                fault.failed(e.kind, 1);
                e.record(rec.now(), &mut rec);
            }
        }
        done += 1;
    }
    if let Some(p) = plan.pacer.as_ref().filter(|_| held || unsent > 0) {
        let until = stopped_sending_ns.unwrap_or_else(|| rec.now());
        let mut n = p.due_before(until) + unsent;
        if let Some(c) = plan.count {
            n = n.min(c.saturating_sub(done));
        }
        let first_due = p.peek().min(until).min(first_unsent.unwrap_or(u64::MAX));
        let now = rec.now();
        rec.error_n_since(now, first_due, "not_sent", n, || {
            format!(
                "{n} due by the schedule were never sent (the sender was held up until it stopped)"
            )
        });
        fault.failed("not_sent", n);
    }
    fault.end(rec.now(), &rec, &ctx);
    op.finish(&mut rec).await;
    rec.finish();
}

/// The intended starts of the operations in flight, one slot each: taking and freeing a
/// slot is a push and a pop; [`InFlightStarts::oldest`] scans them all (as many as the
/// window lets be in flight), which the sender does once a stats window.
#[derive(Default)]
struct InFlightStarts {
    starts: Vec<u64>,
    free: Vec<usize>,
}

impl InFlightStarts {
    #[inline]
    fn take(&mut self, intended_ns: u64) -> usize {
        match self.free.pop() {
            Some(i) => {
                self.starts[i] = intended_ns;
                i
            }
            None => {
                self.starts.push(intended_ns);
                self.starts.len() - 1
            }
        }
    }

    #[inline]
    fn free(&mut self, slot: usize) {
        self.starts[slot] = u64::MAX;
        self.free.push(slot);
    }

    fn clear(&mut self) {
        self.starts.clear();
        self.free.clear();
    }

    fn oldest(&self) -> Option<u64> {
        self.starts.iter().copied().min().filter(|&t| t != u64::MAX)
    }
}

/// How long completions in flight get after the stop (Ctrl-C, --duration over).
const DRAIN: Duration = Duration::from_secs(2);

/// How long completions in flight get after the stop: [`DRAIN`], or nothing when the
/// client is not connected (no answer can come on a connection that is gone; a load whose
/// server was killed ends at its --duration, issue 25).
fn drain_for(connected: bool) -> Duration {
    if connected {
        DRAIN
    } else {
        Duration::ZERO
    }
}

/// How often a waiting sender looks at the stop flag.
const STOP_CHECK: Duration = Duration::from_millis(10);

/// Resolves once the run is told to stop, or [`DRAIN`] after its --duration ended
/// (looked at every [`STOP_CHECK`]): a send stage that still waits then waits on a
/// server that is gone (async-nats's publish into a full buffer while it reconnects: a
/// `pub --no-raw --sub 1` whose server was killed ran until Ctrl-C, issue 25).
pub(crate) async fn stopped(ctx: &Ctx) {
    let give_up = ctx.end_ns.map(|e| e + DRAIN.as_nanos() as u64);
    while !ctx.stop.load(Ordering::Relaxed) && give_up.is_none_or(|g| ctx.clock.now_ns() < g) {
        tokio::time::sleep(STOP_CHECK).await;
    }
}
