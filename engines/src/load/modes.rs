//! The load generator's modes and the small enums its flags take ([`Mode`], [`Storage`],
//! [`Discard`], [`QueueType`], [`AckMode`]): kept apart from the flags themselves
//! ([`super::args`]) so that each file stays readable.

use async_nats::jetstream;
use clap::ValueEnum;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Core publish (fire and forget); with --sub M, M subscribers receive every message.
    Pub,
    /// Core subscribe; end-to-end latency from the send time stamped by diskpulse publishers.
    Sub,
    /// Request/reply ("call"): wait for each reply; --reply M starts M responders here.
    Request,
    /// Responders in queue group `diskpulse` (serve until --duration or Ctrl-C).
    Reply,
    /// Fire-and-forget to a replying service's subject ("cast"); --reply M starts M here.
    Cast,
    /// JetStream publish: async with --window acks in flight (sliding), or --sync.
    JsPub,
    /// JetStream consume: pull fetch with --batch (shared durable), or --ordered.
    JsConsume,
    /// JetStream get: each client reads the stream's messages by sequence from its first
    /// (a direct get when the stream allows it, else the stream's message-get API).
    JsGet,
    /// Key-value put.
    KvPut,
    /// Key-value get.
    KvGet,
    /// Object-store put (--object-size, --objects); --consumers K get them back at once.
    ObjPut,
    /// Object-store get with digest check.
    ObjGet,
    /// RabbitMQ: AMQP publish with publisher confirms, --window unconfirmed in flight
    /// (sliding); --consume M consumes beside it.
    AmqpPub,
    /// RabbitMQ: AMQP consume with manual acks and --prefetch (until the queue is
    /// drained, --msgs or --duration).
    AmqpConsume,
    /// RabbitMQ: request/reply ("call") over direct reply-to, --window outstanding per
    /// client; --reply M starts M responders here.
    AmqpCall,
    /// RabbitMQ: publish to the served queue, no reply ("cast"); --reply M starts M
    /// consumers of it here.
    AmqpCast,
}

impl Mode {
    /// Whether the mode speaks AMQP to a RabbitMQ broker (else NATS).
    pub fn is_amqp(self) -> bool {
        matches!(
            self,
            Mode::AmqpPub | Mode::AmqpConsume | Mode::AmqpCall | Mode::AmqpCast
        )
    }

    /// The mode as the command line spells it (`js-pub`): what meta.json and events say.
    pub fn cli_name(self) -> String {
        self.to_possible_value()
            .map(|v| v.get_name().to_string())
            .unwrap_or_else(|| format!("{self:?}"))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Storage {
    File,
    Memory,
}

/// What a full stream does with a new message (`--discard`, with `--max-bytes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Discard {
    /// Refuse it: the publish fails with "maximum bytes exceeded" (a bounded test).
    New,
    /// Drop the oldest messages to make room (a ring: a load left running for hours).
    Old,
}

/// The JetStream storage type of a [`Storage`].
pub(crate) fn storage_type(s: Storage) -> jetstream::stream::StorageType {
    match s {
        Storage::File => jetstream::stream::StorageType::File,
        Storage::Memory => jetstream::stream::StorageType::Memory,
    }
}

/// The type of a queue diskpulse declares (`x-queue-type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum QueueType {
    /// A classic durable queue (writes batched, no fsync before a confirm).
    Classic,
    /// A quorum queue (Raft: a shared WAL, fsynced before a confirm).
    Quorum,
    /// A stream (an append-only log; consumers read from the first offset).
    Stream,
}

impl QueueType {
    pub fn name(self) -> &'static str {
        match self {
            QueueType::Classic => "classic",
            QueueType::Quorum => "quorum",
            QueueType::Stream => "stream",
        }
    }
}

/// How js-consume pull consumers acknowledge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AckMode {
    /// Ack every message (a publish the client does not wait for), as `nats bench`.
    Explicit,
    /// Ack policy none: no ack traffic in what is measured.
    None,
    /// Ack policy all (an ack covers every message before it); every message is still
    /// acked, as `nats bench --acks=all` does.
    All,
}
