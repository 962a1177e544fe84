//! Per-worker statistics without locks, merged per window by one collector.
//!
//! Every worker (one connection's publisher, subscriber, requester, ...) owns a
//! [`Recorder`]: counters and two HdrHistograms for the current window, plus its own
//! totals. Recording an operation touches only the worker's own memory and never
//! allocates. When an operation lands in a later window, the finished window is handed
//! to the collector through a channel (histograms swapped for recycled ones), once per
//! window per worker: ten messages a second, not one per operation.
//!
//! Windows are aligned on the run clock: window `k` covers `[k*w, (k+1)*w)` ns since the
//! run's zero, so rows from different workers, and from the disk samplers, line up.
//!
//! Two latencies per operation, in ns:
//! - `lat`: from the actual send to completion (ack, reply, receipt); what the client saw.
//! - `co`: from the *intended* start to completion. With `--rate` (open loop) the intended
//!   start is the schedule's, so a stalled server is not hidden (coordinated omission);
//!   without a rate it equals `lat`.
//!
//! For receivers (subscribers, consumers) `lat` is end to end: from the send time stamped in
//! the message to its receipt.

use std::collections::BTreeMap;

use collectors::clock::Clock;
use collectors::directio::{latency_histogram, record_ns};
use hdrhistogram::Histogram;
use serde::Serialize;
use tokio::sync::mpsc;

/// What a worker does. The name is the `role` column of load.csv and the natscli CSV
/// client-id prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    Pub,
    Sub,
    Request,
    Reply,
    JsPub,
    JsConsume,
    KvPut,
    KvGet,
    ObjPut,
    ObjGet,
    /// AMQP publish with publisher confirms (RabbitMQ).
    AmqpPub,
    /// AMQP consume with manual acks.
    AmqpConsume,
    /// AMQP request/reply over direct reply-to.
    AmqpCall,
    /// AMQP publish to a served queue, no reply.
    AmqpCast,
    /// AMQP responders of `amqp-call`/`amqp-cast` (consume the request queue, reply, ack).
    AmqpServe,
    /// JetStream gets of stored messages by sequence.
    JsGet,
}

impl Role {
    /// Every role, in the order of the enum.
    pub const ALL: [Role; 16] = [
        Role::Pub,
        Role::Sub,
        Role::Request,
        Role::Reply,
        Role::JsPub,
        Role::JsConsume,
        Role::KvPut,
        Role::KvGet,
        Role::ObjPut,
        Role::ObjGet,
        Role::AmqpPub,
        Role::AmqpConsume,
        Role::AmqpCall,
        Role::AmqpCast,
        Role::AmqpServe,
        Role::JsGet,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Role::Pub => "pub",
            Role::Sub => "sub",
            Role::Request => "request",
            Role::Reply => "reply",
            Role::JsPub => "js-pub",
            Role::JsConsume => "js-consume",
            Role::KvPut => "kv-put",
            Role::KvGet => "kv-get",
            Role::ObjPut => "obj-put",
            Role::ObjGet => "obj-get",
            Role::AmqpPub => "amqp-pub",
            Role::AmqpConsume => "amqp-consume",
            Role::AmqpCall => "amqp-call",
            Role::AmqpCast => "amqp-cast",
            Role::AmqpServe => "amqp-serve",
            Role::JsGet => "js-get",
        }
    }

    /// What one operation of this role is called in summaries: messages, KV operations,
    /// objects (the study's "Obj/s").
    pub fn unit(self) -> &'static str {
        match self {
            Role::KvPut | Role::KvGet => "ops",
            Role::ObjPut | Role::ObjGet => "objs",
            _ => "msgs",
        }
    }

    /// What `lat` means for this role (for the README and summaries).
    pub fn latency_meaning(self) -> &'static str {
        match self {
            Role::Pub => "none (fire and forget); --time-publish: the publish call",
            Role::Sub | Role::JsConsume | Role::AmqpConsume | Role::AmqpServe => {
                "end to end: stamped send time to receipt"
            }
            Role::Request => "request to reply",
            Role::Reply => "none (serves requests)",
            Role::JsPub => "publish to ack",
            Role::KvPut => "put to ack",
            Role::KvGet => "get to value",
            Role::JsGet => "get to message",
            Role::ObjPut => "whole object put",
            Role::ObjGet => "whole object get (verified)",
            Role::AmqpPub => "publish to confirm",
            Role::AmqpCall => "request to reply",
            Role::AmqpCast => "none (publish, no reply)",
        }
    }
}

/// Client `index` of `role`'s connection name (what the server and `nats_client` events
/// call it).
pub(crate) fn client_name(role: Role, index: usize) -> String {
    format!("diskpulse-{}-{index}", role.name())
}

/// One worker's finished window, sent to the collector.
pub struct WindowMsg {
    pub role: Role,
    pub window: u64,
    pub ops: u64,
    pub bytes: u64,
    pub errors: u64,
    pub lat: Histogram<u64>,
    pub co: Histogram<u64>,
}

/// One worker's totals, sent when it finishes.
#[derive(Debug, Clone, Serialize)]
pub struct ClientTotals {
    pub role: Role,
    pub index: usize,
    pub server: String,
    pub ops: u64,
    pub bytes: u64,
    pub errors: u64,
    pub errors_by_kind: BTreeMap<&'static str, u64>,
    /// Per error kind, its first and last failure on the run clock, ns.
    #[serde(skip)]
    pub(crate) error_times_ns: BTreeMap<&'static str, [u64; 2]>,
    /// First and last operation on the run clock, ns.
    pub first_ns: u64,
    pub last_ns: u64,
    #[serde(skip)]
    pub lat: Histogram<u64>,
    #[serde(skip)]
    pub co: Histogram<u64>,
}

impl ClientTotals {
    /// Seconds from the first to the last operation (natscli's DurationSecs).
    pub fn duration_s(&self) -> f64 {
        (self.last_ns.saturating_sub(self.first_ns)) as f64 / 1e9
    }
}

pub enum Msg {
    /// A worker of `role` started at window `window`: from there to the end of the role's
    /// last worker, every window of the role is a load.csv row (0 ops when nothing
    /// completed in it, so a stall is a run of zero rows, not a gap).
    Start {
        role: Role,
        window: u64,
        hold: Hold,
    },
    Window(WindowMsg),
    /// A worker of `role` keeps account of its operations in flight (the sender loop):
    /// the role's rows have an `oldest_wait_us` (0 when nothing was outstanding).
    Tracks(Role),
    /// At the end of `window`, the oldest operation a worker of `role` had in flight had
    /// waited `wait_ns` since its intended start.
    Outstanding {
        role: Role,
        window: u64,
        wait_ns: u64,
    },
    Done(Box<ClientTotals>),
    /// A new error kind seen by a worker (an event is written once per kind and role).
    ErrorKind(Role, &'static str, String),
}

/// The window in which a worker holds operations it has not sent yet (`u64::MAX`: none).
/// The collector writes no row at or after it: a worker whose window is still open (its
/// next operation has not come, e.g. through a broker stall longer than the collector's
/// grace) keeps that window's rows back instead of having them written without it.
/// Stored with `Release` after the window's message is sent, so a collector that loads
/// a later value (`Acquire`) finds the message in its channel.
pub type Hold = std::sync::Arc<std::sync::atomic::AtomicU64>;

/// A worker's recorder. Not shared: each worker has its own.
pub struct Recorder {
    pub role: Role,
    clock: Clock,
    window_ns: u64,
    cur: u64,
    ops: u64,
    bytes: u64,
    errors: u64,
    lat: Histogram<u64>,
    co: Histogram<u64>,
    totals: ClientTotals,
    tx: mpsc::UnboundedSender<Msg>,
    spare: Vec<Histogram<u64>>,
    hold: Hold,
    /// The end of the next window whose oldest outstanding operation is not yet
    /// reported ([`Recorder::outstanding`]); `u64::MAX` for a worker that does not track.
    next_sample_ns: u64,
}

impl Recorder {
    pub fn new(
        role: Role,
        index: usize,
        server: &str,
        clock: Clock,
        window_ns: u64,
        tx: mpsc::UnboundedSender<Msg>,
    ) -> Recorder {
        let cur = clock.now_ns() / window_ns;
        let hold: Hold = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(u64::MAX));
        let _ = tx.send(Msg::Start {
            role,
            window: cur,
            hold: hold.clone(),
        });
        Recorder {
            role,
            clock,
            window_ns,
            cur,
            ops: 0,
            bytes: 0,
            errors: 0,
            lat: latency_histogram(),
            co: latency_histogram(),
            totals: ClientTotals {
                role,
                index,
                server: server.to_string(),
                ops: 0,
                bytes: 0,
                errors: 0,
                errors_by_kind: BTreeMap::new(),
                error_times_ns: BTreeMap::new(),
                first_ns: 0,
                last_ns: 0,
                lat: latency_histogram(),
                co: latency_histogram(),
            },
            tx,
            spare: vec![latency_histogram(), latency_histogram()],
            hold,
            next_sample_ns: u64::MAX,
        }
    }

    /// This worker keeps account of its operations in flight and reports the oldest at
    /// each window's end ([`Recorder::outstanding`]).
    pub(crate) fn tracks_outstanding(&mut self) {
        let _ = self.tx.send(Msg::Tracks(self.role));
        self.next_sample_ns = (self.cur + 1) * self.window_ns;
    }

    /// Whether a window ended since the last [`Recorder::outstanding`] (one compare: the
    /// sender asks on every completion, the scan over what is in flight happens once a
    /// window).
    #[inline]
    pub(crate) fn outstanding_due(&self, now: u64) -> bool {
        now >= self.next_sample_ns
    }

    /// At `now`, the oldest intended start among the operations in flight (`None`: none).
    /// Every window that ended since the last call and after that start gets its wait at
    /// its end. Called at the first completion or timer tick after a window's end, before
    /// that completion leaves the in-flight set, so what is in flight now is what was in
    /// flight at the window's end plus what was sent since (a send after the end whose
    /// intended start was before it was waiting too: the schedule's view).
    pub fn outstanding(&mut self, now: u64, oldest_intended_ns: Option<u64>) {
        if self.next_sample_ns == u64::MAX {
            return;
        }
        let w = self.window_ns;
        if let Some(oldest) = oldest_intended_ns {
            // At most the last 1000 windows (a worker stuck for longer reports those).
            let mut end = self.next_sample_ns.max((now / w).saturating_sub(1000) * w);
            while end <= now {
                if end > oldest {
                    let _ = self.tx.send(Msg::Outstanding {
                        role: self.role,
                        window: end / w - 1,
                        wait_ns: end - oldest,
                    });
                }
                end += w;
            }
        }
        self.next_sample_ns = (now / w + 1) * w;
    }

    pub fn clock(&self) -> Clock {
        self.clock
    }

    /// This worker's index within its role.
    pub fn index(&self) -> usize {
        self.totals.index
    }

    /// The client's connection name, as in `nats_client` events: `diskpulse-<role>-<index>`.
    pub(crate) fn client_name(&self) -> String {
        client_name(self.role, self.totals.index)
    }

    /// The current time on the run clock (one vDSO call).
    #[inline]
    pub fn now(&self) -> u64 {
        self.clock.now_ns()
    }

    /// Moves to `now`'s window (sending the one before) and marks it held: what follows
    /// counts into it.
    #[inline]
    fn roll(&mut self, now: u64) {
        let w = now / self.window_ns;
        if w != self.cur {
            self.flush_window();
            self.cur = w;
        }
        if self.ops == 0 && self.errors == 0 {
            self.hold
                .store(self.cur, std::sync::atomic::Ordering::Release);
        }
    }

    /// Sends the current window if it has ended by `now` (a worker that waits, e.g. on
    /// acks through a stall, calls this from its timer so its rows are not held back).
    pub(crate) fn close_ended(&mut self, now: u64) {
        let w = now / self.window_ns;
        if w > self.cur {
            self.flush_window();
            self.cur = w;
        }
    }

    fn flush_window(&mut self) {
        if self.ops == 0 && self.errors == 0 {
            return;
        }
        let lat = std::mem::replace(
            &mut self.lat,
            self.spare.pop().unwrap_or_else(latency_histogram),
        );
        let co = std::mem::replace(
            &mut self.co,
            self.spare.pop().unwrap_or_else(latency_histogram),
        );
        let _ = self.totals.lat.add(&lat);
        let _ = self.totals.co.add(&co);
        let _ = self.tx.send(Msg::Window(WindowMsg {
            role: self.role,
            window: self.cur,
            ops: self.ops,
            bytes: self.bytes,
            errors: self.errors,
            lat,
            co,
        }));
        self.ops = 0;
        self.bytes = 0;
        self.errors = 0;
        self.hold
            .store(u64::MAX, std::sync::atomic::Ordering::Release);
    }

    #[inline]
    fn count(&mut self, now: u64, bytes: u64) {
        self.roll(now);
        self.ops += 1;
        self.bytes += bytes;
        if self.totals.ops == 0 {
            self.totals.first_ns = now;
        }
        self.totals.ops += 1;
        self.totals.bytes += bytes;
        self.totals.last_ns = now;
    }

    /// An operation without a latency (a core publish).
    #[inline]
    pub fn op(&mut self, now: u64, bytes: u64) {
        self.count(now, bytes);
    }

    /// An operation that completed at `now`, sent at `sent`, intended at `intended`.
    #[inline]
    pub(crate) fn op_lat(&mut self, now: u64, bytes: u64, sent: u64, intended: u64) {
        self.count(now, bytes);
        record_ns(&mut self.lat, now.saturating_sub(sent));
        record_ns(&mut self.co, now.saturating_sub(intended.min(sent)));
    }

    /// A received message whose end-to-end latency `e2e_ns` is known (from a stamp on
    /// another clock): it may be older than the run itself.
    #[inline]
    pub(crate) fn op_e2e(&mut self, now: u64, bytes: u64, e2e_ns: u64) {
        self.count(now, bytes);
        record_ns(&mut self.lat, e2e_ns);
        record_ns(&mut self.co, e2e_ns);
    }

    fn error_time(&mut self, now: u64, kind: &'static str) {
        let t = self.totals.error_times_ns.entry(kind).or_insert([now, now]);
        t[1] = now;
    }

    /// A failed operation, by kind (`timeout`, `no_responders`, ...).
    pub fn error(&mut self, now: u64, kind: &'static str, detail: impl FnOnce() -> String) {
        self.roll(now);
        self.errors += 1;
        self.totals.errors += 1;
        self.error_time(now, kind);
        let n = self.totals.errors_by_kind.entry(kind).or_insert(0);
        *n += 1;
        if *n == 1 {
            let _ = self.tx.send(Msg::ErrorKind(self.role, kind, detail()));
        }
    }

    /// `n` operations in flight since `since_ns` that failed at once at `now` (acks lost
    /// at a reconnect): their first failure time is `since_ns` (the last success before
    /// the fault: when the server stopped answering), so failure lines say when it began.
    pub(crate) fn error_n_since(
        &mut self,
        now: u64,
        since_ns: u64,
        kind: &'static str,
        n: u64,
        detail: impl FnOnce() -> String,
    ) {
        if n == 0 {
            return;
        }
        self.error_n(now, kind, n, detail);
        if let Some(t) = self.totals.error_times_ns.get_mut(kind) {
            t[0] = t[0].min(since_ns.min(now));
        }
    }

    /// `n` failures of one kind at once (messages that never arrived, acks lost at stop).
    pub(crate) fn error_n(
        &mut self,
        now: u64,
        kind: &'static str,
        n: u64,
        detail: impl FnOnce() -> String,
    ) {
        if n == 0 {
            return;
        }
        self.roll(now);
        self.error_time(now, kind);
        self.errors += n;
        self.totals.errors += n;
        let c = self.totals.errors_by_kind.entry(kind).or_insert(0);
        let first = *c == 0;
        *c += n;
        if first {
            let _ = self.tx.send(Msg::ErrorKind(self.role, kind, detail()));
        }
    }

    pub fn ops(&self) -> u64 {
        self.totals.ops
    }

    pub fn errors(&self) -> u64 {
        self.totals.errors
    }

    /// Sends the last window and the totals.
    pub fn finish(mut self) {
        self.flush_window();
        let _ = self.totals.lat.add(&self.lat);
        let _ = self.totals.co.add(&self.co);
        let t = std::mem::replace(
            &mut self.totals,
            ClientTotals {
                role: self.role,
                index: 0,
                server: String::new(),
                ops: 0,
                bytes: 0,
                errors: 0,
                errors_by_kind: BTreeMap::new(),
                error_times_ns: BTreeMap::new(),
                first_ns: 0,
                last_ns: 0,
                lat: latency_histogram(),
                co: latency_histogram(),
            },
        );
        let _ = self.tx.send(Msg::Done(Box::new(t)));
    }
}

/// Marks a payload with its send time so a receiver can compute end-to-end latency:
/// bytes 0..8 are `DPSTAMP1`, 8..16 the send time as CLOCK_REALTIME ns (little endian),
/// so it works across processes on hosts with synchronised clocks. Payloads shorter than
/// 16 bytes carry no stamp. A stamp in the payload, not a header, keeps publishing free
/// of per-message allocation (an async-nats HeaderMap costs three).
const STAMP_MAGIC: &[u8; 8] = b"DPSTAMP1";

/// CLOCK_REALTIME in ns (for stamps that cross processes).
#[inline]
pub(crate) fn realtime_ns() -> u64 {
    collectors::clock::read_clock_ns(libc::CLOCK_REALTIME)
}

/// Writes a stamp into `buf` (at least 16 bytes).
#[inline]
pub fn stamp(buf: &mut [u8], realtime_ns: u64) {
    buf[..8].copy_from_slice(STAMP_MAGIC);
    buf[8..16].copy_from_slice(&realtime_ns.to_le_bytes());
}

/// Reads a stamp, if the payload has one.
#[inline]
pub(crate) fn read_stamp(payload: &[u8]) -> Option<u64> {
    if payload.len() >= 16 && &payload[..8] == STAMP_MAGIC {
        Some(u64::from_le_bytes(payload[8..16].try_into().ok()?))
    } else {
        None
    }
}

/// Builds stamped payloads without a per-message allocation: payloads are carved out of
/// a large buffer (`split_to().freeze()`), one allocation per `ARENA` bytes.
pub(crate) struct StampedPayloads {
    arena: bytes::BytesMut,
    template: Vec<u8>,
}

const ARENA: usize = 1 << 20;

impl StampedPayloads {
    pub fn new(size: usize) -> StampedPayloads {
        StampedPayloads {
            arena: bytes::BytesMut::new(),
            template: vec![b'x'; size],
        }
    }

    /// The next payload, stamped now when it is long enough.
    #[inline]
    pub(crate) fn next_payload(&mut self) -> bytes::Bytes {
        let n = self.template.len();
        if self.arena.capacity() < n {
            self.arena = bytes::BytesMut::with_capacity(ARENA.max(n));
        }
        self.arena.extend_from_slice(&self.template);
        if n >= 16 {
            stamp(&mut self.arena[..16], realtime_ns());
        }
        self.arena.split_to(n).freeze()
    }
}

impl super::LoadArgs {
    /// The roles this load runs and each one's client count: the main role, and the
    /// receivers or responders a mode starts beside it (`pub --sub`, `js-pub
    /// --consume`, `amqp-call --reply`, ...). One list for the NATS and the AMQP loops,
    /// and for what a `ROLE:ack_p99_ms` trigger may name.
    pub(crate) fn roles(&self) -> Vec<(Role, usize)> {
        let mut roles = vec![(self.main_role(), self.main_clients())];
        match self.mode {
            super::Mode::Pub if self.sub > 0 => roles.push((Role::Sub, self.sub)),
            super::Mode::Request | super::Mode::Cast if self.reply > 0 => {
                roles.push((Role::Reply, self.reply))
            }
            super::Mode::JsPub if self.consume > 0 => roles.push((Role::JsConsume, self.consume)),
            super::Mode::ObjPut if self.consumers > 0 => roles.push((Role::ObjGet, self.consumers)),
            super::Mode::AmqpPub if self.consume > 0 => {
                roles.push((Role::AmqpConsume, self.consume))
            }
            super::Mode::AmqpCall | super::Mode::AmqpCast if self.reply > 0 => {
                roles.push((Role::AmqpServe, self.reply))
            }
            _ => {}
        }
        roles
    }

    /// The load.csv role names [`Self::roles`] writes (`js-pub`, `sub`, ...).
    pub fn role_names(&self) -> Vec<String> {
        self.roles()
            .iter()
            .map(|(r, _)| r.name().to_string())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_role_names_are_formats_role_names() {
        let ours: Vec<&str> = Role::ALL.iter().map(|r| r.name()).collect();
        assert_eq!(ours, format::load::ROLE_NAMES);
    }

    #[test]
    fn stamps_round_trip_and_short_payloads_have_none() {
        let mut p = StampedPayloads::new(128);
        let a = p.next_payload();
        let b = p.next_payload();
        assert_eq!(a.len(), 128);
        let (ta, tb) = (read_stamp(&a).unwrap(), read_stamp(&b).unwrap());
        assert!(tb >= ta && ta > 1_600_000_000_000_000_000);
        assert!(read_stamp(&StampedPayloads::new(8).next_payload()).is_none());
        assert!(read_stamp(b"xxxxxxxxxxxxxxxxxxxx").is_none());
    }

    #[tokio::test]
    async fn the_oldest_outstanding_wait_is_reported_for_each_window_end_it_spans() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let clock = Clock::start();
        let mut r = Recorder::new(Role::JsPub, 0, "nats://x", clock, 100, tx);
        r.tracks_outstanding();
        let w0 = r.cur;
        let t = |k: u64| (w0 + k) * 100;
        assert!(!r.outstanding_due(t(1) - 1) && r.outstanding_due(t(1)));
        // Sent at t(0)+50, still in flight at t(4)+10: windows 0..=3 ended while it waited.
        r.outstanding(t(4) + 10, Some(t(0) + 50));
        assert!(!r.outstanding_due(t(5) - 1));
        // Nothing in flight at the next end: nothing reported.
        r.outstanding(t(5) + 1, None);
        let mut got = vec![];
        while let Ok(m) = rx.try_recv() {
            if let Msg::Outstanding {
                window, wait_ns, ..
            } = m
            {
                got.push((window - w0, wait_ns));
            }
        }
        assert_eq!(got, vec![(0, 50), (1, 150), (2, 250), (3, 350)]);
    }

    #[tokio::test]
    async fn windows_reach_the_collector_once_per_window() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let clock = Clock::start();
        let mut r = Recorder::new(Role::JsPub, 0, "nats://x", clock, 1_000_000, tx);
        let t0 = clock.now_ns();
        for i in 0..100u64 {
            r.op_lat(t0 + i * 100_000, 10, t0, t0); // 10 ms of ops, 10 windows
        }
        r.error(t0 + 10_000_000, "timeout", || "t".into());
        r.error(t0 + 10_000_001, "timeout", || "t".into());
        r.finish();
        let (mut ops, mut windows, mut errors, mut kinds, mut done) = (0, 0, 0, 0, 0);
        while let Ok(m) = rx.try_recv() {
            match m {
                Msg::Window(w) => {
                    ops += w.ops;
                    errors += w.errors;
                    windows += 1;
                    assert_eq!(w.lat.len(), w.ops);
                }
                Msg::ErrorKind(..) | Msg::Start { .. } => kinds += 1,
                Msg::Tracks(_) | Msg::Outstanding { .. } => unreachable!("not tracking"),
                Msg::Done(t) => {
                    done += 1;
                    assert_eq!(t.ops, 100);
                    assert_eq!(t.lat.len(), 100);
                    assert_eq!(t.errors_by_kind["timeout"], 2);
                    assert_eq!(
                        t.error_times_ns["timeout"],
                        [t0 + 10_000_000, t0 + 10_000_001]
                    );
                }
            }
        }
        assert_eq!((ops, errors, kinds, done), (100, 2, 2, 1));
        assert!((10..=12).contains(&windows), "{windows}");
    }
}
