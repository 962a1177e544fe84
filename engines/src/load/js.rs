//! `js-consume` (and `js-pub --consume M`): JetStream consumers with end-to-end latency.
//!
//! Two kinds, as `nats bench`:
//! - pull (default): one shared durable pull consumer, `diskpulse-<stream>`, so N clients
//!   split the messages between them. Each client keeps pulls of `--batch` messages in
//!   flight (the Go client's `Consume` with `PullMaxMessages`, async-nats's
//!   `Consumer::stream`): a new pull goes out when half a batch is left, so the client
//!   never stops to ask. Every message is acked (`--ack explicit`, an ack is a publish the
//!   client does not wait for), or not at all (`--ack none`: the consumer's ack policy is
//!   none, which takes the ack traffic out of what is measured).
//! - `--ordered`: each client its own ordered consumer, so every client gets every message.
//! - `--push`: the shared durable is a push consumer (natscli v0.1's `--push`): the server
//!   delivers to `diskpulse.push.<stream>` and the clients subscribe in queue group
//!   [`PUSH_GROUP`] (`deliver_group`), so each message goes to one of them. At most
//!   `max_ack_pending` messages are unacked at once, the server's flow control for it.
//!
//! The durable is created fresh for each run (deleted first if it exists, deleted again at
//! the end), so `js-consume` reads the stream from its first message and a run never
//! starts from where the last one stopped. Beside publishers (`js-pub --consume`) the
//! consumers are created before any publisher starts and deliver only what comes after
//! (deliver policy `new`), so they receive exactly what this run publishes.
//!
//! Latency is end to end: from the send time diskpulse publishers stamp into the payload
//! (see [`super::record::stamp`]) to receipt. For messages published before the run it
//! includes their time in the stream.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::receive::{receive_loop, receiver_should_end, record_receipt, Inbox, Taken};
use super::record::Recorder;
use super::send::Connects;
use super::workers::Ctx;
use super::{AckMode, LoadArgs};
use async_nats::jetstream::{self, consumer};

/// The shared pull consumer's name for a stream.
fn durable_name(stream: &str) -> String {
    format!("diskpulse-{stream}")
}

/// The queue group of `--push` clients (the push consumer's `deliver_group`).
pub const PUSH_GROUP: &str = "diskpulse";

/// Where a `--push` consumer delivers.
fn push_subject(stream: &str) -> String {
    format!("diskpulse.push.{stream}")
}

/// The one line a user sees when the stream is not there.
pub fn stream_not_found(stream: &str, url: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "stream '{stream}' not found at {url}; create it with `diskpulse load js-pub --stream {stream}` first"
    )
}

/// Whether a stream exists (other failures are errors).
pub(crate) async fn stream_exists(js: &jetstream::Context, name: &str) -> anyhow::Result<bool> {
    match js.get_stream(name).await {
        Ok(_) => Ok(true),
        Err(e) => match e.kind() {
            jetstream::context::GetStreamErrorKind::JetStream(j)
                if j.error_code() == jetstream::ErrorCode::STREAM_NOT_FOUND =>
            {
                Ok(false)
            }
            _ => Err(anyhow::anyhow!("cannot look up stream '{name}': {e}")),
        },
    }
}

/// Creates the shared durable pull consumer (fresh) before any client starts. `new_only`:
/// deliver only messages published from now on (beside this run's publishers).
pub(crate) async fn prepare_pull(
    a: &LoadArgs,
    js: &jetstream::Context,
    clients: usize,
    new_only: bool,
) -> anyhow::Result<()> {
    let stream = js
        .get_stream(&a.stream)
        .await
        .map_err(|e| anyhow::anyhow!("cannot open stream '{}': {e}", a.stream))?;
    let name = durable_name(&a.stream);
    // A leftover from an earlier run would start where that run stopped.
    let _ = stream.delete_consumer(&name).await;
    let deliver_policy = if new_only {
        consumer::DeliverPolicy::New
    } else {
        consumer::DeliverPolicy::All
    };
    let ack_policy = match a.ack {
        AckMode::Explicit => consumer::AckPolicy::Explicit,
        AckMode::None => consumer::AckPolicy::None,
        AckMode::All => consumer::AckPolicy::All,
    };
    let max_ack_pending = (4 * a.batch * clients).max(1000) as i64;
    if a.push {
        let cfg = consumer::push::Config {
            durable_name: Some(name.clone()),
            description: Some("diskpulse load js-consume --push (shared by its clients)".into()),
            deliver_subject: push_subject(&a.stream),
            deliver_group: Some(PUSH_GROUP.into()),
            deliver_policy,
            ack_policy,
            max_ack_pending,
            ..Default::default()
        };
        stream.create_consumer(cfg).await.map_err(|e| {
            anyhow::anyhow!(
                "cannot create push consumer '{name}' on '{}': {e}",
                a.stream
            )
        })?;
        return Ok(());
    }
    let cfg = consumer::pull::Config {
        durable_name: Some(name.clone()),
        description: Some("diskpulse load js-consume (shared by its clients)".into()),
        deliver_policy,
        ack_policy,
        // Enough that the clients' pulls in flight never wait for acks.
        max_ack_pending,
        ..Default::default()
    };
    stream
        .create_consumer(cfg)
        .await
        .map_err(|e| anyhow::anyhow!("cannot create consumer '{name}' on '{}': {e}", a.stream))?;
    Ok(())
}

/// Deletes the shared durable at the end (best effort: the run's figures do not depend on it).
pub(crate) async fn cleanup_pull(stream: &str, js: &jetstream::Context) {
    let client = js.client();
    if !super::connect::connected_within(&client, super::connect::AFTER_RUN_RECONNECT).await {
        return;
    }
    if let Ok(s) = js.get_stream(stream).await {
        let _ = s.delete_consumer(&durable_name(stream)).await;
    }
}

/// One client's message source, opened before the load starts.
pub enum Source {
    Pull(Box<consumer::pull::Stream>),
    Ordered(Box<consumer::pull::Ordered>),
    Push(Box<consumer::push::Messages>),
}

/// Opens a client's source on its own connection.
pub async fn open(
    a: &LoadArgs,
    client: async_nats::Client,
    new_only: bool,
) -> anyhow::Result<Source> {
    let js = jetstream::new(client);
    let stream = js
        .get_stream(&a.stream)
        .await
        .map_err(|e| anyhow::anyhow!("cannot open stream '{}': {e}", a.stream))?;
    if a.ordered {
        let c = stream
            .create_consumer(consumer::pull::OrderedConfig {
                deliver_policy: if new_only {
                    consumer::DeliverPolicy::New
                } else {
                    consumer::DeliverPolicy::All
                },
                ..Default::default()
            })
            .await
            .map_err(|e| {
                anyhow::anyhow!("cannot create an ordered consumer on '{}': {e}", a.stream)
            })?;
        Ok(Source::Ordered(Box::new(c.messages().await.map_err(
            |e| anyhow::anyhow!("cannot consume from '{}': {e}", a.stream),
        )?)))
    } else if a.push {
        let name = durable_name(&a.stream);
        let c: consumer::PushConsumer = stream
            .get_consumer(&name)
            .await
            .map_err(|e| anyhow::anyhow!("cannot open push consumer '{name}': {e}"))?;
        // In the queue group (deliver_group): async-nats queue-subscribes.
        let m = c
            .messages()
            .await
            .map_err(|e| anyhow::anyhow!("cannot consume from '{}': {e}", a.stream))?;
        Ok(Source::Push(Box::new(m)))
    } else {
        let name = durable_name(&a.stream);
        let c: consumer::PullConsumer = stream
            .get_consumer(&name)
            .await
            .map_err(|e| anyhow::anyhow!("cannot open consumer '{name}': {e}"))?;
        let s = c
            .stream()
            .max_messages_per_batch(a.batch)
            .messages()
            .await
            .map_err(|e| anyhow::anyhow!("cannot consume from '{}': {e}", a.stream))?;
        Ok(Source::Pull(Box::new(s)))
    }
}

/// How many messages a consumer takes: a count shared by all clients (pull: they split
/// the stream), or its own (ordered: each reads every message).
#[derive(Clone)]
pub enum Limit {
    None,
    Shared(Arc<AtomicU64>, u64),
    Own(u64),
}

impl Limit {
    /// Claims one message; false once the limit is reached.
    #[inline]
    fn claim(&self, got: u64) -> bool {
        match self {
            Limit::None => true,
            Limit::Shared(n, max) => n.fetch_add(1, Ordering::Relaxed) < *max,
            Limit::Own(max) => got < *max,
        }
    }

    #[inline]
    fn reached(&self, got: u64) -> bool {
        match self {
            Limit::None => false,
            Limit::Shared(n, max) => n.load(Ordering::Relaxed) >= *max,
            Limit::Own(max) => got >= *max,
        }
    }
}

fn pull_error_kind(e: &consumer::pull::MessagesError) -> &'static str {
    use consumer::pull::MessagesErrorKind as K;
    match e.kind() {
        K::MissingHeartbeat => "missing_heartbeat",
        K::ConsumerDeleted => "consumer_deleted",
        K::NoResponders => "no_responders",
        K::RequestLimitExceeded => "request_limit",
        K::Pull | K::PushBasedConsumer | K::Other => "consume",
    }
}

fn push_error_kind(e: &consumer::push::MessagesError) -> &'static str {
    use consumer::push::MessagesErrorKind as K;
    match e.kind() {
        K::MissingHeartbeat => "missing_heartbeat",
        K::ConsumerDeleted => "consumer_deleted",
        K::PullBasedConsumer | K::Other => "consume",
    }
}

fn ordered_error_kind(e: &consumer::pull::OrderedError) -> &'static str {
    use consumer::pull::OrderedErrorKind as K;
    match e.kind() {
        K::MissingHeartbeat => "missing_heartbeat",
        K::ConsumerDeleted => "consumer_deleted",
        K::NoResponders => "no_responders",
        K::RequestLimitExceeded => "request_limit",
        K::Recreate => "recreate",
        K::Pull | K::PushBasedConsumer | K::Other => "consume",
    }
}

/// A consumer client: receives until its limit, --duration, Ctrl-C, or, without
/// --duration, the stream is drained (no message for 1 s: after the publishers finished
/// when there are any, from the start otherwise). With --duration it listens the whole
/// time, riding through a fault (the server gone for longer than the idle second).
#[allow(
    clippy::too_many_arguments,
    reason = "the consumer's source, its ack mode, limit and the worker's recorder and context"
)]
pub async fn consume(
    source: Source,
    connects: Connects,
    ack: bool,
    double_ack: bool,
    limit: Limit,
    rec: Recorder,
    ctx: Ctx,
) {
    match source {
        Source::Pull(s) => {
            let inbox = Consumer {
                kind_of: pull_error_kind,
                ack,
                double_ack,
                limit,
                connects: connects.clone(),
            };
            receive_loop(s, inbox, rec, ctx).await
        }
        Source::Push(s) => {
            let inbox = Consumer {
                kind_of: push_error_kind,
                ack,
                double_ack,
                limit,
                connects: connects.clone(),
            };
            receive_loop(s, inbox, rec, ctx).await
        }
        Source::Ordered(s) => {
            let inbox = Consumer {
                kind_of: ordered_error_kind,
                ack: false,
                double_ack: false,
                limit,
                connects: connects.clone(),
            };
            receive_loop(s, inbox, rec, ctx).await
        }
    }
}

/// A JetStream consumer's inbox: messages, or the errors its stream yields (`E`).
struct Consumer<E> {
    kind_of: fn(&E) -> &'static str,
    ack: bool,
    /// `--double-ack`: each ack waits for the server's reply (natscli's `--doubleack`).
    double_ack: bool,
    limit: Limit,
    connects: Connects,
}

impl<E: std::fmt::Display> Inbox for Consumer<E> {
    type Item = Result<jetstream::Message, E>;

    fn should_end(&self, ctx: &Ctx, _rec: &Recorder, got: u64, last: u64, now: u64) -> bool {
        let idle_ends = ctx.end_ns.is_none();
        receiver_should_end(ctx, self.limit.reached(got), last, now, idle_ends)
    }

    fn connects(&self) -> u64 {
        self.connects.get()
    }

    fn connected(&self) -> bool {
        self.connects.connected()
    }

    async fn take(&mut self, item: Self::Item, now: u64, rec: &mut Recorder) -> Taken {
        match item {
            Ok(m) => {
                if !self.limit.claim(rec.ops()) {
                    return Taken::End;
                }
                record_receipt(rec, now, &m.payload);
                if self.ack {
                    let acked = if self.double_ack {
                        m.double_ack().await
                    } else {
                        m.ack().await
                    };
                    if let Err(e) = acked {
                        rec.error(now, "ack", || e.to_string());
                    }
                }
                Taken::Counted
            }
            Err(e) => {
                // The iterator may end after some errors; it says so with None.
                rec.error(now, (self.kind_of)(&e), || e.to_string());
                Taken::NotCounted
            }
        }
    }
}
