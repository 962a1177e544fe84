//! The AMQP 0-9-1 modes (RabbitMQ), on lapin, measured like the NATS modes: one
//! connection per client, every worker records into its own [`Recorder`] (per-window
//! HdrHistograms into load.csv through [`super::collect`]), `--rate` paces senders open
//! loop with latency also from the intended start ([`super::pace`]).
//!
//! - `amqp-pub`: `basic.publish` to the default exchange, routing key `--queue`, with
//!   publisher confirms: up to `--window` (default 256) unconfirmed per client, sliding
//!   (a new publish as soon as any confirm arrives). `lat` is publish to confirm; a nack
//!   is an error (`nack`), a confirm not back within `--timeout` too (`timeout`).
//!   `--consume M` starts M consumers beside it.
//! - `amqp-consume`: `basic.consume` with manual acks (one `basic.ack` per message) and
//!   `basic.qos --prefetch`; `lat` is end to end from the send time stamped in the
//!   payload. It ends at `--msgs` (all clients together), `--duration`, or when the queue
//!   has given nothing for 1 s (drained).
//! - `amqp-call`: request/reply over direct reply-to (`amq.rabbitmq.reply-to`, no reply
//!   queue to declare): each client consumes its replies on its own channel and keeps up
//!   to `--window` requests outstanding, each with a correlation id (its sequence
//!   number). Exactly one reply per request is checked: a reply to a request already
//!   answered is `duplicate_reply`, to one never sent `unknown_reply`, one after
//!   `--timeout` `late_reply` (the request counted `timeout`). `--reply M` starts M
//!   responders (`amqp-serve`) here: consume `--queue`, publish the reply to the
//!   request's reply-to with its correlation id, then ack.
//! - `amqp-cast`: publish to `--queue`, no reply and no confirm (what oslo.messaging's
//!   cast does); no latency. `--reply M` responders consume and ack every message, so
//!   `amqp-serve`'s count says how many arrived.
//!
//! Queues are declared durable with `x-queue-type` = `--queue-type` (classic, quorum,
//! stream); a queue that exists with other arguments is a usage error naming it. Messages
//! are persistent (delivery mode 2) unless `--transient`. Stream queues are consumed from
//! the first offset (`x-stream-offset`).
//!
//! Riding through a broker restart (issue 14 item 2; the NATS load does it in
//! [`super::send`]): every client watches its link (an I/O error, a closed connection or
//! channel, a consumer stream that ended) and connects again on its own
//! ([`Link::reconnect`]): every 50 ms x attempt, at most 250 ms apart, for up to 60 s,
//! re-declaring the queue and reopening confirm mode, qos and its consumer. One
//! `amqp_disconnected` event when a client sees the link break and one `amqp_reconnected`
//! (`attempts`, `down_ms`; `amqp_reconnect_failed` when it gave up or the run stopped)
//! when it ends: once per outage, not per attempt; a sender's first success after it is
//! `first_ack_after_reconnect`, as for NATS. lapin's own recovery
//! (`enable_auto_recover`) is not used: what it replays and what becomes of confirms in
//! flight across it is not ours to count.
//!
//! - Counting. amqp-pub: a publish whose confirm had not come when the link broke is
//!   `lost_unconfirmed` (not published again: the broker may have stored it, so a retry
//!   could duplicate it; it is counted, never silently kept or dropped); sent is
//!   confirmed plus `lost_unconfirmed` (and `nack`, `timeout`). A publish refused because the
//!   link was already gone is not an operation yet: it is published after the reconnect
//!   with its intended start. amqp-call: calls outstanding when the link broke are
//!   `connection_lost` (direct reply-to is bound to the channel that sent them: their
//!   replies cannot come); a call whose intended start is more than `--timeout` past when
//!   it could be sent (the broker was away) is a `timeout`, not sent.
//! - The `--rate` schedule is kept: the pacer's intended starts do not move while a
//!   client reconnects, so the messages due meanwhile go out at once after it and their
//!   latency from the intended start (`co`) includes the outage (no coordinated
//!   omission).
//! - At least once: a receiver whose acks were lost with the connection gets those
//!   messages again. Publishers give each message an id (`dp.RUN.CLIENT.SEQ`); the run's
//!   receivers keep a bit per id ([`Seen`]) and count a message delivered again as an
//!   error `duplicate`, not as received. An ack or reply that failed leaves its message
//!   uncounted (it comes again). A stream queue's consumer starts again from the first
//!   offset after a reconnect: everything it had read is then `duplicate`.
//! - A failure on a live connection (the broker closed the channel: a refusal, not an
//!   outage) ends the client as before.
//! - TLS: `amqps://` (default port 5671) verifies the broker's certificate against the
//!   system's roots and `--tls-ca`'s, and presents `--tls-cert`/`--tls-key` (PEM, the key
//!   PKCS#8) when given; the files are read at each connect (rustls, through lapin).
//!
//! Long because its send and receive loops are still its own, beside send.rs's and
//! receive.rs's: AMQP reconnects itself and counts unconfirmed publishes after a drop,
//! which the one send loop cannot yet say (issue 24 point 4: an Operation hook for a link
//! that went down and a send again, an Inbox that is given its next stream).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions, QueueDeclareOptions, QueuePurgeOptions,
};
use lapin::tcp::{OwnedIdentity, OwnedTLSConfig};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::Confirmation;
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties};
use tokio::sync::mpsc;

use super::args::{LoadArgs, Mode, QueueType};
use super::receive::{record_receipt, IDLE_NS};
use super::record::{realtime_ns, Recorder, Role};
use super::send::{stopped, FaultWatch};
use super::workers::{Ctx, Payloads, SendPlan, SenderGuard};
use super::{collect, LoadEnv, LoadOutcome};
use format::events::{self as ev, Body};
use format::usage;

/// The reply queue of direct reply-to.
const REPLY_TO: &str = "amq.rabbitmq.reply-to";
/// The largest message RabbitMQ 3.10 accepts by default (`max_message_size`, 128 MiB).
const MAX_AMQP_MESSAGE: u64 = 128 << 20;
/// An AMQP URL cut around its host:port (default port 5672, amqps 5671): `amqp://u:p@h:5672/vh` ->
/// (`amqp://u:p@`, `h:5672`, `/vh`), so a proxy's address can take the host's place.
fn split_amqp_url(url: &str) -> (String, String, String) {
    let t = url.trim();
    let (scheme, rest) = t.split_once("://").unwrap_or(("amqp", t));
    let (info, hostpart) = match rest.rfind('@') {
        Some(at) => (&rest[..=at], &rest[at + 1..]),
        None => ("", rest),
    };
    let (hp, tail) = match hostpart.find(['/', '?']) {
        Some(i) => (&hostpart[..i], &hostpart[i..]),
        None => (hostpart, ""),
    };
    let hp = if hp
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        hp.to_string()
    } else if scheme.eq_ignore_ascii_case("amqps") {
        format!("{hp}:5671")
    } else {
        format!("{hp}:5672")
    };
    (format!("{scheme}://{info}"), hp, tail.to_string())
}

/// `url` with a proxy's address in its host:port's place (user info and vhost kept).
fn amqp_through(url: &str, addr: std::net::SocketAddr) -> String {
    let (head, _, tail) = split_amqp_url(url);
    format!("{head}{addr}{tail}")
}

/// How `--server` takes an AMQP URL.
const AMQP_URL_FORM: &str =
    "amqp://[user:password@]host[:port][/vhost] (port default 5672), or amqps:// for TLS (5671)";

/// Checks an AMQP server URL; the error says what is wrong, without the URL.
fn parse_amqp_url(input: &str) -> Result<(), String> {
    let t = input.trim();
    let Some((scheme, rest)) = t.split_once("://") else {
        return Err(format!("no scheme: an AMQP URL is {AMQP_URL_FORM}"));
    };
    match scheme.to_ascii_lowercase().as_str() {
        "amqp" | "amqps" => {}
        s => return Err(format!("scheme '{s}' is not amqp or amqps")),
    }
    let hostport = rest.split('/').next().unwrap_or("");
    let hostport = hostport.rsplit_once('@').map_or(hostport, |(_, h)| h);
    let (host, port) = match hostport.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => (h, Some(p)),
        _ => (hostport, None),
    };
    if host.is_empty() {
        return Err("no host".into());
    }
    if let Some(p) = port {
        match p.parse::<u32>() {
            Ok(n) if (1..=65535).contains(&n) => {}
            _ => return Err(format!("port '{p}' is not 1-65535")),
        }
    }
    Ok(())
}

/// The AMQP-only flags' values and defaults (the flags are `Option`s so that a NATS
/// mode can tell one was given).
impl LoadArgs {
    /// The AMQP queue (`--queue`, default diskpulse).
    pub fn queue(&self) -> &str {
        self.queue_flag.as_deref().unwrap_or("diskpulse")
    }

    /// The AMQP queue's type (`--queue-type`, default classic).
    pub fn queue_type(&self) -> QueueType {
        self.queue_type_flag.unwrap_or(QueueType::Classic)
    }

    /// Unacknowledged deliveries per AMQP consumer (`--prefetch`, default 100).
    pub fn prefetch(&self) -> u16 {
        self.prefetch_flag.unwrap_or(100)
    }

    /// A NATS mode given a flag only the AMQP modes read: refused, naming it (it was
    /// accepted and silently did nothing).
    pub(super) fn refuse_in_nats_mode(&self) -> anyhow::Result<()> {
        let given = [
            ("--queue", self.queue_flag.is_some()),
            ("--queue-type", self.queue_type_flag.is_some()),
            ("--transient", self.transient),
            ("--prefetch", self.prefetch_flag.is_some()),
        ];
        if let Some((flag, _)) = given.iter().find(|(_, g)| *g) {
            return Err(usage!(
                "{flag} applies to the RabbitMQ modes only (amqp-pub, amqp-consume, amqp-call, amqp-cast); {} is a NATS mode: drop {flag}",
                self.mode.cli_name()
            ));
        }
        Ok(())
    }
}

/// The AMQP modes' checks (instead of the NATS connection's).
pub fn validate(a: &LoadArgs) -> anyhow::Result<()> {
    for u in &a.connect.servers {
        parse_amqp_url(u).map_err(|why| {
            usage!(
                "--server '{}': {why}; an AMQP URL is {AMQP_URL_FORM}",
                format::redact::text(u)
            )
        })?;
    }
    let nats_auth = [
        ("--user", a.connect.user.is_some()),
        ("--password", a.connect.password.is_some()),
        ("--token", a.connect.token.is_some()),
        ("--creds", a.connect.creds.is_some()),
        ("--nkey", a.connect.nkey.is_some()),
    ];
    if let Some((flag, _)) = nats_auth.iter().find(|(_, g)| *g) {
        return Err(usage!(
            "{flag} is a NATS connection flag; {} takes the user and password in the URL (--server amqp://USER:PASSWORD@HOST:PORT)",
            a.mode.cli_name()
        ));
    }
    a.connect.check_tls_files()?;
    if a.connect.has_tls_files() {
        let plain = a.connect.servers.iter().find(|u| {
            !u.trim()
                .get(..8)
                .is_some_and(|s| s.eq_ignore_ascii_case("amqps://"))
        });
        if let Some(u) = plain {
            return Err(usage!(
                "--tls-ca, --tls-cert and --tls-key are for amqps:// servers; --server '{}' is not TLS: write it amqps://HOST[:5671], or leave the --tls-* flags out",
                format::redact::text(u)
            ));
        }
    }
    let q = a.queue();
    if q.is_empty() || q.len() > 255 || q.starts_with("amq.") {
        return Err(usage!(
            "--queue '{q}': a queue name is 1 to 255 bytes and does not start with 'amq.' (reserved by the broker), like diskpulse"
        ));
    }
    if a.size > MAX_AMQP_MESSAGE {
        return Err(usage!(
            "--size {}: RabbitMQ accepts messages of at most 128 MiB by default (max_message_size); use a smaller --size",
            format::units::bytes_exact(a.size)
        ));
    }
    if a.prefetch() == 0 {
        return Err(usage!(
            "--prefetch must be at least 1 (0 would mean no limit to RabbitMQ)"
        ));
    }
    if a.queue_type() == QueueType::Stream && a.purge {
        return Err(usage!(
            "--purge: a stream queue cannot be purged; use another --queue, or a classic or quorum --queue-type"
        ));
    }
    if a.reply > 0 && !matches!(a.mode, Mode::AmqpCall | Mode::AmqpCast) {
        return Err(usage!(
            "--reply starts responders for amqp-call and amqp-cast, not {}",
            a.mode.cli_name()
        ));
    }
    if a.consume > 0 && a.mode != Mode::AmqpPub {
        return Err(usage!(
            "--consume starts consumers beside amqp-pub, not {}",
            a.mode.cli_name()
        ));
    }
    Ok(())
}

/// What went wrong with an AMQP operation, as an error kind.
fn error_kind(e: &lapin::Error) -> &'static str {
    use lapin::ErrorKind as K;
    match e.kind() {
        K::IOError(_) | K::InvalidConnectionState(_) | K::MissingHeartbeatError => {
            "connection_lost"
        }
        K::ProtocolError(_) | K::InvalidChannelState(..) => "broker_error",
        _ => "amqp_error",
    }
}

/// What an `amqps://` connection adds to the system's roots: `--tls-ca`'s certificates,
/// and `--tls-cert` with `--tls-key` as the client's identity. Empty without them.
fn tls_config(c: &super::connect::ConnectArgs) -> anyhow::Result<OwnedTLSConfig> {
    let read = |flag: &str, p: &std::path::Path| {
        std::fs::read(p).map_err(|e| usage!("{flag} {}: {e}", p.display()))
    };
    let cert_chain = match &c.tls_ca {
        Some(p) => Some(String::from_utf8(read("--tls-ca", p)?).map_err(|_| {
            usage!(
                "--tls-ca {}: not a PEM file (text with BEGIN CERTIFICATE)",
                p.display()
            )
        })?),
        None => None,
    };
    let identity = match (&c.tls_cert, &c.tls_key) {
        (Some(cert), Some(key)) => Some(OwnedIdentity::PKCS8 {
            pem: read("--tls-cert", cert)?,
            key: read("--tls-key", key)?,
        }),
        _ => None,
    };
    Ok(OwnedTLSConfig {
        identity,
        cert_chain,
    })
}

/// Connects a client; the error names the (redacted) URL and what to check.
async fn connect(a: &LoadArgs, url: &str, name: &str) -> anyhow::Result<Connection> {
    let props = ConnectionProperties::default().with_connection_name(name.into());
    let tls = url
        .trim()
        .get(..8)
        .is_some_and(|s| s.eq_ignore_ascii_case("amqps://"));
    let config = if tls {
        tls_config(&a.connect)?
    } else {
        OwnedTLSConfig::default()
    };
    let runtime = lapin::runtime::default_runtime()?;
    let connecting = Connection::connect_with_config(url, props, config, runtime);
    match tokio::time::timeout(CONNECT_TIMEOUT, connecting).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(anyhow::anyhow!(
            "cannot connect to the AMQP broker at {}: {e} ({})",
            format::redact::text(url),
            if tls {
                "is RabbitMQ's TLS listener there, does its certificate name this host, does --tls-ca name the CA that signed it, and, where the broker asks for a client certificate, do --tls-cert and --tls-key give one it trusts?"
            } else {
                "is RabbitMQ listening there, and are the user and password right?"
            }
        )),
        Err(_) => Err(anyhow::anyhow!(
            "cannot connect to the AMQP broker at {}: no answer within {} s",
            format::redact::text(url),
            CONNECT_TIMEOUT.as_secs()
        )),
    }
}

/// How long one connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a client whose connection broke tries to connect again before it gives up
/// (the NATS clients give up after about a minute too).
const RECONNECT_GIVE_UP: Duration = Duration::from_secs(60);
/// The longest wait between two reconnect attempts, ms (attempt k waits 50 k ms up to
/// this: the load resumes within a quarter second of the broker answering, as NATS's).
const RECONNECT_MAX_MS: u64 = 250;
/// How long confirms still in flight when a connection broke get to come back (lapin
/// rejects them at once when it sees the connection close) before they count lost.
const LOST_GRACE: Duration = Duration::from_millis(100);

/// The declare arguments of the queue.
fn queue_args(a: &LoadArgs) -> FieldTable {
    let mut t = FieldTable::default();
    t.insert(
        "x-queue-type".into(),
        AMQPValue::LongString(a.queue_type().name().into()),
    );
    t
}

fn declare_options() -> QueueDeclareOptions {
    QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    }
}

/// Declares the queue (durable, of `--queue-type`) and purges it with `--purge`.
async fn prepare(a: &LoadArgs, conn: &Connection) -> anyhow::Result<()> {
    let ch = conn.create_channel().await?;
    if let Err(e) = ch
        .queue_declare(a.queue().into(), declare_options(), queue_args(a))
        .await
    {
        return Err(usage!(
            "cannot declare queue '{}' as a durable {} queue: {e}; if it exists with other arguments, use another --queue or delete it",
            a.queue(),
            a.queue_type().name()
        ));
    }
    if a.purge {
        ch.queue_purge(a.queue().into(), QueuePurgeOptions::default())
            .await?;
    }
    let _ = ch.close(200, "done".into()).await;
    Ok(())
}

fn properties(a: &LoadArgs) -> BasicProperties {
    BasicProperties::default().with_delivery_mode(if a.transient { 1 } else { 2 })
}

/// One client's link to the broker: its connection, its channel (in confirm mode for a
/// publisher) and its consumer (a receiver's, a caller's replies), and what it takes to
/// open them again after the broker went away ([`Link::reconnect`]).
struct Link {
    a: Arc<LoadArgs>,
    role: Role,
    url: String,
    name: String,
    conn: Connection,
    ch: Channel,
    /// Taken by the worker that reads it; put back by each reconnect.
    consumer: Option<lapin::Consumer>,
}

impl Link {
    /// Connects, opens the channel and (for receivers and callers) the consumer.
    async fn open(a: Arc<LoadArgs>, role: Role, url: String, name: String) -> anyhow::Result<Link> {
        let conn = connect(&a, &url, &name).await?;
        let (ch, consumer) = open_channel(&a, role, &conn, &name).await?;
        Ok(Link {
            a,
            role,
            url,
            name,
            conn,
            ch,
            consumer,
        })
    }

    /// Whether the connection and the channel are still open (a lock each: looked at per
    /// operation, which AMQP's rates afford).
    fn alive(&self) -> bool {
        self.conn.status().connected() && self.ch.status().connected()
    }

    /// The link broke (`why`): connects again, every [`RECONNECT_MAX_MS`] at most, until
    /// it works (re-declaring the queue, confirm mode, qos and consumer), the run stops,
    /// its `--duration` ends (a sender's, or a receiver's alone), or
    /// [`RECONNECT_GIVE_UP`] passes. One `amqp_disconnected` event when it starts and
    /// one `amqp_reconnected` (or `amqp_reconnect_failed`) when it ends: once per outage,
    /// not per attempt. Returns whether the link is open again.
    async fn reconnect(&mut self, ctx: &Ctx, why: &str) -> bool {
        let clock = ctx.clock;
        let t0 = clock.now_ns();
        let (client, role) = (self.name.clone(), self.role.name());
        ctx.events
            .event(Body::AmqpDisconnected(ev::AmqpDisconnected {
                client: client.clone(),
                role: role.to_string(),
                error: format::redact::text(why),
            }));
        let mut attempts = 0u64;
        let mut last_error: String;
        loop {
            if ctx.stop.load(Ordering::Relaxed) {
                last_error = "the run was stopped".into();
                break;
            }
            // --duration is over: a sender has nothing left to send, a receiver alone
            // nothing left to wait for (one beside senders drains what they sent).
            let sender = matches!(self.role, Role::AmqpPub | Role::AmqpCall | Role::AmqpCast);
            if (sender || !ctx.with_senders) && ctx.end_ns.is_some_and(|e| clock.now_ns() >= e) {
                last_error = "--duration ended first".into();
                break;
            }
            attempts += 1;
            let attempt = async {
                let conn = connect(&self.a, &self.url, &self.name).await?;
                let (ch, consumer) = open_channel(&self.a, self.role, &conn, &self.name).await?;
                anyhow::Ok((conn, ch, consumer))
            };
            // Ctrl-C is not kept waiting by an attempt (up to 10 s to a host that does
            // not answer) or the pause between two.
            let attempt = tokio::select! {
                biased;
                r = attempt => r,
                _ = stopped(ctx) => continue,
            };
            match attempt {
                Ok((conn, ch, consumer)) => {
                    let old = std::mem::replace(&mut self.conn, conn);
                    self.ch = ch;
                    self.consumer = consumer;
                    // The old connection is closed already; this frees what lapin holds.
                    let _ = old.close(200, "reconnected".into()).now_or_never();
                    ctx.events.event(Body::AmqpReconnected(ev::AmqpReconnect {
                        client,
                        role: role.to_string(),
                        attempts,
                        down_ms: (clock.now_ns() - t0) as f64 / 1e6,
                        error: None,
                    }));
                    return true;
                }
                Err(e) => last_error = format!("{e:#}"),
            }
            if clock.now_ns() - t0 > RECONNECT_GIVE_UP.as_nanos() as u64 {
                break;
            }
            let pause = Duration::from_millis((50 * attempts).min(RECONNECT_MAX_MS));
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = stopped(ctx) => {}
            }
        }
        ctx.events
            .event(Body::AmqpReconnectFailed(ev::AmqpReconnect {
                client,
                role: role.to_string(),
                attempts,
                down_ms: (clock.now_ns() - t0) as f64 / 1e6,
                error: Some(format::redact::text(&last_error)),
            }));
        false
    }

    /// Whether `e` means the broker went away (the link is reconnected) rather than
    /// refused an operation on a live connection (the client stops, as before). lapin can
    /// report a failed write before it marks the connection closed: a failure that is not
    /// an I/O one is looked at again 50 ms later.
    async fn went_away(&self, e: &lapin::Error) -> bool {
        if error_kind(e) == "connection_lost" || !self.conn.status().connected() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        !self.conn.status().connected()
    }

    async fn close(&self) {
        let _ = self.ch.close(200, "done".into()).await;
        let _ = self.conn.close(200, "done".into()).await;
    }
}

/// Opens a client's channel on `conn`: declares the queue (again, after a restart: a
/// durable queue is still there, an idempotent declare costs one round trip), then
/// confirm mode for a publisher, qos and the consumer for a receiver, the direct reply-to
/// consumer for a caller.
async fn open_channel(
    a: &LoadArgs,
    role: Role,
    conn: &Connection,
    name: &str,
) -> anyhow::Result<(Channel, Option<lapin::Consumer>)> {
    let ch = conn.create_channel().await?;
    ch.queue_declare(a.queue().into(), declare_options(), queue_args(a))
        .await?;
    let consumer = match role {
        Role::AmqpPub => {
            ch.confirm_select(ConfirmSelectOptions::default()).await?;
            None
        }
        Role::AmqpConsume | Role::AmqpServe => {
            ch.basic_qos(a.prefetch(), BasicQosOptions::default())
                .await?;
            let mut args = FieldTable::default();
            if a.queue_type() == QueueType::Stream {
                args.insert(
                    "x-stream-offset".into(),
                    AMQPValue::LongString("first".into()),
                );
            }
            Some(
                ch.basic_consume(
                    a.queue().into(),
                    name.into(),
                    BasicConsumeOptions::default(),
                    args,
                )
                .await?,
            )
        }
        Role::AmqpCall => Some(
            ch.basic_consume(
                REPLY_TO.into(),
                name.into(),
                BasicConsumeOptions {
                    no_ack: true,
                    ..BasicConsumeOptions::default()
                },
                FieldTable::default(),
            )
            .await?,
        ),
        _ => None,
    };
    Ok((ch, consumer))
}

/// The message id a publisher gives message `seq`: `dp.RUN.CLIENT.SEQ` (RUN tells this
/// run's messages from an earlier run's left in the queue), so receivers can tell a
/// message delivered again (at-least-once, after a reconnect) from a new one ([`Seen`]).
fn message_id(run: u32, client: usize, seq: u64) -> String {
    format!("dp.{run}.{client}.{seq}")
}

/// The messages the receivers of one run got, a bit per (run, publisher, sequence): a
/// message delivered again is a `duplicate`, counted and not counted as received. A
/// message without our id (another publisher's) is always new.
#[derive(Default)]
struct Seen(std::sync::Mutex<HashMap<(u32, u32), Vec<u64>>>);

impl Seen {
    /// Whether the message of this id is delivered for the first time (marks it).
    fn first(&self, id: Option<&str>) -> bool {
        let Some((run, client, seq)) = id.and_then(parse_message_id) else {
            return true;
        };
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let bits = m.entry((run, client)).or_default();
        let (w, b) = ((seq / 64) as usize, seq % 64);
        if bits.len() <= w {
            bits.resize(w + 1, 0);
        }
        let new = bits[w] & (1 << b) == 0;
        bits[w] |= 1 << b;
        new
    }
}

/// (run, client, seq) of [`message_id`]'s form; sequences past 2^32 are not ours to track.
fn parse_message_id(id: &str) -> Option<(u32, u32, u64)> {
    let mut p = id.strip_prefix("dp.")?.split('.');
    let run = p.next()?.parse().ok()?;
    let client = p.next()?.parse().ok()?;
    let seq: u64 = p.next()?.parse().ok()?;
    (p.next().is_none() && seq < 1 << 32).then_some((run, client, seq))
}

/// Runs an AMQP mode; returns when every worker has finished (or after Ctrl-C).
#[allow(
    clippy::too_many_lines,
    reason = "the AMQP load's roles started in one place over the same links, clock and stop flag (its loops are not yet the one send and receive loops: issue 24 point 4)"
)]
pub async fn run(a: &LoadArgs, env: &LoadEnv) -> anyhow::Result<LoadOutcome> {
    if env.servers.is_empty() {
        anyhow::bail!("no AMQP broker to connect to");
    }
    let server_of = |i: usize| env.servers[i % env.servers.len()].clone();
    let setup = connect(a, &server_of(0), "diskpulse-setup").await?;
    prepare(a, &setup).await?;

    // --inject-latency: a proxy per broker; the main role's clients (publishers, callers,
    // casters) connect through it, the consumers and responders beside them and the setup
    // connection directly, as for NATS: one call's round trip crosses the delay twice.
    let (main_urls, proxies) =
        super::proxied_urls(a, env, |s| Ok(split_amqp_url(s).1), amqp_through)?;

    let shared = Arc::new(a.clone());
    let clock = env.clock;
    let window_ns = a.stats_window.as_nanos() as u64;
    let (tx, rx) = mpsc::unbounded_channel();
    let main = a.main_role();
    let n_main = a.main_clients();
    let total = a.total_ops();
    let roles = a.roles();
    // Connect every client (and open its channel, consumer) before the load starts.
    let mut opened = vec![];
    let mut k = 0;
    for &(role, n) in &roles {
        for index in 0..n {
            let server = server_of(k);
            let url = if role == main {
                main_urls[k % main_urls.len()].clone()
            } else {
                server.clone()
            };
            k += 1;
            let name = super::record::client_name(role, index);
            let link = Link::open(shared.clone(), role, url, name).await?;
            opened.push((role, index, n, server, link));
        }
    }
    let n_senders = opened
        .iter()
        .filter(|o| matches!(o.0, Role::AmqpPub | Role::AmqpCall | Role::AmqpCast))
        .count() as u64;
    let start_ns = clock.now_ns();
    let end_ns = a.duration.map(|d| start_ns + d.as_nanos() as u64);
    let ctx = Ctx {
        clock,
        events: env.events.clone(),
        stop: env.stop.clone(),
        start_ns,
        end_ns,
        senders_left: Arc::new(AtomicU64::new(n_senders)),
        senders_done_ns: Arc::new(AtomicU64::new(0)),
        // Every cast arrives at a responder; every publish at a consumer.
        expected: match a.mode {
            Mode::AmqpCast | Mode::AmqpPub => total,
            _ => None,
        },
        with_senders: n_senders > 0,
    };
    env.events.event(Body::LoadStart(ev::LoadStart {
        mode: a.mode.cli_name().to_string(),
        clients: n_main as u64,
        broker: Some("rabbitmq".to_string()),
        queue: Some(a.queue().to_string()),
        queue_type: Some(a.queue_type().name().to_string()),
        persistent: Some(!a.transient),
        servers: env
            .servers
            .iter()
            .map(|s| format::redact::text(s))
            .collect(),
    }));
    let collector = tokio::spawn(collect::collect(
        rx,
        env.load_csv.clone(),
        clock,
        window_ns,
        start_ns,
        env.events.clone(),
    ));
    // Receivers of one run count together: --msgs for amqp-consume alone, the senders'
    // total beside them.
    let received = Arc::new(AtomicU64::new(0));
    let receive_limit = match a.mode {
        Mode::AmqpConsume => a.msgs,
        _ => ctx.expected,
    };
    // Each run's message ids differ (see `message_id`): its start on the wall clock.
    let run_id = (realtime_ns() / 1000) as u32;
    let seen = Arc::new(Seen::default());
    let mut tasks = vec![];
    for (role, index, n_role, server, mut link) in opened {
        let rec = Recorder::new(
            role,
            index,
            &format::redact::text(&server),
            clock,
            window_ns,
            tx.clone(),
        );
        let plan =
            SendPlan::for_client(a, &ctx, index, n_role, role == main, true, a.size as usize);
        let ctx = ctx.clone();
        let a = shared.clone();
        let received = received.clone();
        let seen = seen.clone();
        let window = a.window_for(role);
        tasks.push(tokio::spawn(async move {
            let l = &mut link;
            match role {
                Role::AmqpPub | Role::AmqpCast => {
                    let _g = SenderGuard::new(&ctx);
                    let confirms = role == Role::AmqpPub;
                    publish(&a, &ctx, l, rec, plan, window, confirms, run_id).await
                }
                Role::AmqpCall => {
                    let _g = SenderGuard::new(&ctx);
                    call(&a, &ctx, l, rec, plan, window).await
                }
                _ => {
                    let serve = role == Role::AmqpServe;
                    let to = Receive {
                        serve,
                        received: &received,
                        limit: receive_limit,
                        seen: &seen,
                    };
                    receive(&ctx, l, rec, to).await
                }
            }
            link.close().await;
        }));
    }
    drop(tx);
    let panicked = super::workers::join_workers(tasks).await;
    let ended_ns = clock.now_ns();
    let collected = collector.await??;
    env.events.event(Body::LoadStop(ev::NoDetail {}));
    let _ = setup.close(200, "done".into()).await;
    if let Some(e) = panicked {
        anyhow::bail!("a load worker failed: {e}");
    }
    let proxies = super::workers::close_proxies(proxies);
    Ok(LoadOutcome {
        proxies,
        stream_check: None,
        clients: collected.clients,
        started_ns: start_ns,
        ended_ns,
        csv_rows: collected.rows,
        js_context: format::meta::ClientContext::Amqp(format::meta::AmqpContextMeta {
            broker: "rabbitmq".into(),
            queue: a.queue().to_string(),
            queue_type: a.queue_type().name().into(),
            persistent: !a.transient,
            window: a.window_for(main),
            prefetch: a.prefetch(),
            confirms: a.mode == Mode::AmqpPub,
        }),
    })
}

/// A confirm awaited: its outcome (`None`: its task died), the send and intended start,
/// and when it arrived on the run clock.
type InFlight = (Option<ConfirmResult>, u64, u64, u64);

/// amqp-pub (with confirms, `window` unconfirmed) and amqp-cast (no confirms). Rides
/// through a broken connection: see the module.
#[allow(clippy::too_many_arguments)]
async fn publish(
    a: &LoadArgs,
    ctx: &Ctx,
    link: &mut Link,
    mut rec: Recorder,
    mut plan: SendPlan,
    window: usize,
    confirms: bool,
    run_id: u32,
) {
    let mut payloads = Payloads::new(&plan);
    let props = properties(a);
    let key: ShortString = a.queue().into();
    let size = a.size;
    let timeout = a.timeout;
    let client = rec.index();
    let mut inflight = FuturesUnordered::new();
    let mut issued = 0u64;
    let mut fault = FaultWatch::starting(rec.now());
    // A publish the client refused because the connection was gone: published after the
    // reconnect, with its intended start (its latency then includes the outage).
    let mut again: Option<u64> = None;
    let mut why = String::new();
    // Each confirm is awaited by a task of its own, which takes its time when it arrives:
    // this loop looks at `inflight` only when the window is full or before a publish, and
    // with --rate it sleeps between publishes (the confirm's time taken here was up to
    // window / rate late: 512 ms for 2 x 256 at 1000 msgs/s).
    let clock = rec.clock();
    loop {
        while let Some(Some(c)) = inflight.next().now_or_never() {
            confirmed(&mut rec, &mut fault, ctx, c, size);
        }
        // A full window waits for a confirm, looking at the link every 10 ms (lapin
        // rejects the confirms of a connection that closed; one that died silently
        // would otherwise hold the window for --timeout).
        while inflight.len() >= window.max(1) && link.alive() {
            tokio::select! {
                biased;
                Some(c) = inflight.next() => confirmed(&mut rec, &mut fault, ctx, c, size),
                _ = tokio::time::sleep(Duration::from_millis(10)) => {}
            }
        }
        if !link.alive() {
            let now = rec.now();
            fault.down_ns.get_or_insert(now);
            // What came back before the drop counts; the rest never will be confirmed.
            let _ = tokio::time::timeout(LOST_GRACE, async {
                while let Some(c) = inflight.next().await {
                    confirmed(&mut rec, &mut fault, ctx, c, size);
                }
            })
            .await;
            let n = inflight.len() as u64;
            let now = rec.now();
            rec.error_n_since(now, fault.last_ok_ns, "lost_unconfirmed", n, || {
                format!(
                    "{n} publishes unconfirmed when the connection dropped: not published again"
                )
            });
            fault.failed("lost_unconfirmed", n);
            inflight.clear();
            if why.is_empty() {
                why = "the connection or channel closed".into();
            }
            if !link.reconnect(ctx, &why).await {
                break;
            }
            why.clear();
            fault.reconnect_ns = Some(rec.now());
            continue;
        }
        let intended = match again.take() {
            Some(t) if !ctx.stop.load(Ordering::Relaxed) => t,
            Some(_) => break,
            None => match plan.next(ctx, issued).await {
                Some(t) => t,
                None => break,
            },
        };
        let payload: Bytes = payloads.next_payload();
        let props = props
            .clone()
            .with_message_id(message_id(run_id, client, issued).into());
        let sent = rec.now();
        let r = link
            .ch
            .basic_publish(
                "".into(),
                key.clone(),
                BasicPublishOptions::default(),
                &payload,
                props,
            )
            .await;
        match r {
            Ok(confirm) if confirms => {
                issued += 1;
                let task = tokio::spawn(async move {
                    let r = tokio::time::timeout(timeout, confirm).await;
                    (r, clock.now_ns())
                });
                let abort = AbortOnDrop(task.abort_handle());
                inflight.push(async move {
                    let _abort = abort;
                    let (r, at) = match task.await {
                        Ok(x) => (Some(x.0), x.1),
                        Err(_) => (None, clock.now_ns()),
                    };
                    (r, sent, intended, at)
                })
            }
            Ok(_) => {
                issued += 1;
                let now = rec.now();
                rec.op(now, size);
                if fault.reconnect_ns.is_some() {
                    fault.ok(now, &rec, ctx);
                }
            }
            Err(e) if link.went_away(&e).await => {
                // Not sent: again once the link is back (the loop's top sees it broken).
                again = Some(intended);
                why = format!("basic.publish: {e}");
            }
            Err(e) => {
                // The broker closed the channel on a live connection: a refusal, not an
                // outage; this client stops.
                rec.error(rec.now(), error_kind(&e), || format!("basic.publish: {e}"));
                break;
            }
        }
    }
    while let Some(c) = inflight.next().await {
        confirmed(&mut rec, &mut fault, ctx, c, size);
    }
    fault.end(rec.now(), &rec, ctx);
    rec.finish();
}

/// Aborts a task when the future awaiting it is dropped (a confirm counted lost).
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

type ConfirmResult = Result<Result<Confirmation, lapin::Error>, tokio::time::error::Elapsed>;

/// A confirm's outcome, taken at its arrival on the run clock. A confirm whose promise
/// failed (the channel or connection closed before it came) is `lost_unconfirmed`.
fn confirmed(rec: &mut Recorder, fault: &mut FaultWatch, ctx: &Ctx, c: InFlight, size: u64) {
    let (r, sent, intended, at) = c;
    // Counted now (the windows only move forward), its latency up to `at`.
    let now = rec.now().max(at);
    let late = now - at;
    let kind = match r {
        Some(Ok(Ok(c))) if c.is_ack() => {
            rec.op_lat(now, size, sent + late, intended + late);
            fault.ok(at, rec, ctx);
            return;
        }
        Some(Ok(Ok(_))) => "nack",
        Some(Ok(Err(_))) => "lost_unconfirmed",
        Some(Err(_)) => "timeout",
        None => "confirm_lost",
    };
    fault.failed(kind, 1);
    rec.error(now, kind, || match (kind, r) {
        ("lost_unconfirmed", Some(Ok(Err(e)))) => {
            format!("no publisher confirm: the channel closed first ({e})")
        }
        ("nack", _) => "the broker nacked a publish".into(),
        ("timeout", _) => "no publisher confirm within --timeout".into(),
        _ => "the task awaiting a publisher confirm ended without it".into(),
    });
}

/// amqp-call: `window` requests outstanding, one reply each. Rides through a broken
/// connection: see the module.
async fn call(
    a: &LoadArgs,
    ctx: &Ctx,
    link: &mut Link,
    mut rec: Recorder,
    mut plan: SendPlan,
    window: usize,
) {
    let mut payloads = Payloads::new(&plan);
    let key: ShortString = a.queue().into();
    let base = properties(a).with_reply_to(REPLY_TO.into());
    let size = a.size;
    let timeout_ns = a.timeout.as_nanos() as u64;
    let Some(mut replies) = link.consumer.take() else {
        rec.finish();
        return;
    };
    // seq -> (sent, intended)
    let mut pending: HashMap<u64, (u64, u64)> = HashMap::new();
    let mut timed_out: HashSet<u64> = HashSet::new();
    let mut issued = 0u64;
    let mut done_sending = false;
    let mut fault = FaultWatch::starting(rec.now());
    // Why the link broke, once the loop saw it broken.
    let mut broken: Option<String> = None;
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    loop {
        if let Some(why) = broken.take() {
            // Direct reply-to is bound to the channel that sent the request: no reply to
            // what is outstanding can come any more.
            let now = rec.now();
            fault.down_ns.get_or_insert(now);
            let n = pending.len() as u64;
            rec.error_n_since(now, fault.last_ok_ns, "connection_lost", n, || {
                format!(
                    "{n} calls outstanding when the connection dropped: their replies cannot come"
                )
            });
            fault.failed("connection_lost", n);
            pending.clear();
            if done_sending || !link.reconnect(ctx, &why).await {
                break;
            }
            let Some(r) = link.consumer.take() else {
                break;
            };
            replies = r;
            fault.reconnect_ns = Some(rec.now());
            continue;
        }
        if done_sending && pending.is_empty() {
            break;
        }
        let can_send = !done_sending && pending.len() < window.max(1);
        tokio::select! {
            biased;
            d = replies.next() => match d {
                Some(Ok(d)) => {
                    let now = rec.now();
                    let seq = d
                        .properties
                        .correlation_id()
                        .as_ref()
                        .and_then(|c| c.as_str().parse::<u64>().ok());
                    match seq {
                        Some(s) => match pending.remove(&s) {
                            Some((sent, intended)) => {
                                rec.op_lat(now, size, sent, intended);
                                fault.ok(now, &rec, ctx);
                            }
                            None if timed_out.remove(&s) => rec.error(now, "late_reply", || {
                                format!("a reply to request {s} after --timeout")
                            }),
                            None if s < issued => rec.error(now, "duplicate_reply", || {
                                format!("a second reply to request {s}")
                            }),
                            None => rec.error(now, "unknown_reply", || {
                                format!("a reply to request {s}, never sent")
                            }),
                        },
                        None => rec.error(now, "unknown_reply", || {
                            "a reply without a correlation id".into()
                        }),
                    }
                }
                Some(Err(e)) => broken = Some(format!("reply consumer: {e}")),
                None => broken = Some("the reply consumer ended".into()),
            },
            t = plan.next(ctx, issued), if can_send => match t {
                None => done_sending = true,
                Some(intended) => {
                    let seq = issued;
                    issued += 1;
                    let now = rec.now();
                    if now.saturating_sub(intended) > timeout_ns {
                        // Its start came while the broker was away, more than --timeout
                        // ago: its caller has given up already. Not sent.
                        rec.error(now, "timeout", || {
                            "a call not sent within --timeout of its intended start (the broker was away)".into()
                        });
                        fault.failed("timeout", 1);
                        continue;
                    }
                    let payload = payloads.next_payload();
                    let props = base.clone().with_correlation_id(seq.to_string().into());
                    match link
                        .ch
                        .basic_publish("".into(), key.clone(), BasicPublishOptions::default(), &payload, props)
                        .await
                    {
                        Ok(_) => {
                            pending.insert(seq, (now, intended));
                        }
                        Err(e) => {
                            let now = rec.now();
                            rec.error(now, "connection_lost", || format!("basic.publish: {e}"));
                            fault.failed("connection_lost", 1);
                            broken = Some(format!("basic.publish: {e}"));
                        }
                    }
                }
            },
            _ = tick.tick() => {
                let now = rec.now();
                let expired: Vec<u64> = pending
                    .iter()
                    .filter(|(_, (sent, _))| now.saturating_sub(*sent) > timeout_ns)
                    .map(|(s, _)| *s)
                    .collect();
                for s in expired {
                    pending.remove(&s);
                    timed_out.insert(s);
                    rec.error(now, "timeout", || "no reply within --timeout".into());
                    fault.failed("timeout", 1);
                }
                if !link.alive() {
                    broken = Some("the connection or channel closed".into());
                }
                // Ctrl-C: what is outstanding is not waited for.
                if ctx.stop.load(Ordering::Relaxed) {
                    done_sending = true;
                    if !pending.is_empty() {
                        break;
                    }
                }
            }
        }
    }
    let now = rec.now();
    let left = pending.len() as u64;
    rec.error_n(now, "unanswered", left, || {
        "requests outstanding when the run ended".into()
    });
    fault.end(now, &rec, ctx);
    rec.finish();
}

/// What a receiver shares with the others of its run.
struct Receive<'a> {
    /// amqp-serve: reply first when the message asks for one.
    serve: bool,
    /// Messages received by every receiver of the run (each counted once).
    received: &'a AtomicU64,
    /// The run's receivers end when `received` reaches this.
    limit: Option<u64>,
    seen: &'a Seen,
}

/// amqp-consume and amqp-serve: manual acks; a responder replies first when the message
/// asks for one. Rides through a broken connection: see the module.
async fn receive(ctx: &Ctx, link: &mut Link, mut rec: Recorder, to: Receive<'_>) {
    let Some(mut consumer) = link.consumer.take() else {
        rec.finish();
        return;
    };
    let mut last = rec.now();
    let mut broken: Option<String> = None;
    loop {
        if let Some(why) = broken.take() {
            if !link.reconnect(ctx, &why).await {
                break;
            }
            let Some(c) = link.consumer.take() else {
                break;
            };
            consumer = c;
            // The outage is not idleness: the drain's second starts again.
            last = rec.now();
            continue;
        }
        let now = rec.now();
        // Beside senders of this run, --duration ends the senders; receivers then drain
        // (a responder that left at --duration would leave the last calls unanswered).
        if to
            .limit
            .is_some_and(|l| to.received.load(Ordering::Relaxed) >= l)
            || ctx.stop.load(Ordering::Relaxed)
            || (!ctx.with_senders && ctx.end_ns.is_some_and(|e| now >= e))
        {
            break;
        }
        // Idle: with senders in this run, 1 s after they finished and the last message;
        // alone (no --duration, no --msgs), 1 s after the last message (drained).
        let done_ns = ctx.senders_done_ns.load(Ordering::SeqCst);
        let idle_from = if ctx.with_senders {
            (done_ns > 0).then(|| done_ns.max(last))
        } else if ctx.end_ns.is_none() && to.limit.is_none() {
            Some(last)
        } else {
            None
        };
        if idle_from.is_some_and(|t| now.saturating_sub(t) > IDLE_NS) {
            break;
        }
        let d = match tokio::time::timeout(Duration::from_millis(50), consumer.next()).await {
            Err(_) => {
                if !link.alive() {
                    broken = Some("the connection or channel closed".into());
                }
                continue;
            }
            Ok(None) => {
                broken = Some("the consumer ended".into());
                continue;
            }
            Ok(Some(Err(e))) => {
                broken = Some(format!("consumer: {e}"));
                continue;
            }
            Ok(Some(Ok(d))) => d,
        };
        let got = rec.now();
        last = got;
        if to.serve {
            if let Some(reply_to) = d.properties.reply_to().clone() {
                let mut props = BasicProperties::default();
                if let Some(c) = d.properties.correlation_id().clone() {
                    props = props.with_correlation_id(c);
                }
                if let Err(e) = link
                    .ch
                    .basic_publish(
                        "".into(),
                        reply_to,
                        BasicPublishOptions::default(),
                        &d.data,
                        props,
                    )
                    .await
                {
                    // Not acked: the broker delivers it again (after a reconnect).
                    rec.error(rec.now(), error_kind(&e), || format!("reply: {e}"));
                    if link.went_away(&e).await {
                        broken = Some(format!("reply: {e}"));
                    }
                    continue;
                }
            }
        }
        if let Err(e) = d.ack(BasicAckOptions::default()).await {
            // Not counted: the broker delivers it again.
            rec.error(rec.now(), error_kind(&e), || format!("basic.ack: {e}"));
            if link.went_away(&e).await {
                broken = Some(format!("basic.ack: {e}"));
            }
            continue;
        }
        let id = d.properties.message_id().as_ref().map(|m| m.as_str());
        if !to.seen.first(id) {
            // At least once: an ack lost with the connection, the message delivered again.
            rec.error(got, "duplicate", || {
                "a message delivered again (its ack was lost with the connection)".into()
            });
            continue;
        }
        record_receipt(&mut rec, got, &d.data);
        to.received.fetch_add(1, Ordering::Relaxed);
    }
    rec.finish();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_amqp_url_is_cut_around_its_host_for_a_proxy() {
        assert_eq!(
            split_amqp_url("amqp://u:p@h:5673/vh"),
            ("amqp://u:p@".into(), "h:5673".into(), "/vh".into())
        );
        assert_eq!(
            split_amqp_url("amqp://h"),
            ("amqp://".into(), "h:5672".into(), String::new())
        );
        assert_eq!(
            split_amqp_url("amqp://h:5672?heartbeat=5"),
            ("amqp://".into(), "h:5672".into(), "?heartbeat=5".into())
        );
    }

    #[test]
    fn a_message_delivered_again_is_told_from_a_new_one_by_its_id() {
        let seen = Seen::default();
        let id = |run, client, seq| message_id(run, client, seq);
        assert!(seen.first(Some(&id(7, 0, 0))));
        assert!(seen.first(Some(&id(7, 0, 1000))));
        assert!(seen.first(Some(&id(7, 1, 0))), "another publisher's 0");
        assert!(seen.first(Some(&id(8, 0, 0))), "another run's 0");
        assert!(!seen.first(Some(&id(7, 0, 0))), "the same message again");
        assert!(!seen.first(Some(&id(7, 0, 1000))));
        // Messages without our id are never duplicates (nor a reason to allocate).
        assert!(seen.first(None));
        assert!(seen.first(None));
        assert!(seen.first(Some("order-42")));
        assert!(seen.first(Some("order-42")));
        assert!(
            seen.first(Some("dp.1.2.99999999999")),
            "past 2^32: not tracked"
        );
        assert!(seen.first(Some("dp.1.2.99999999999")));
        assert_eq!(parse_message_id("dp.1.2.3"), Some((1, 2, 3)));
        assert_eq!(parse_message_id("dp.1.2.3.4"), None);
    }

    #[test]
    fn an_amqp_url_is_checked_before_anything_starts() {
        assert!(parse_amqp_url("amqp://127.0.0.1:5672").is_ok());
        assert!(parse_amqp_url("amqp://guest:secret@host:5672/%2f").is_ok());
        assert!(parse_amqp_url("amqp://host").is_ok());
        assert!(parse_amqp_url("nats://host:4222")
            .unwrap_err()
            .contains("not amqp"));
        assert!(parse_amqp_url("amqp://host:0")
            .unwrap_err()
            .contains("port"));
        assert!(parse_amqp_url("amqp://host:99999").is_err());
        assert!(parse_amqp_url("amqps://host").is_ok());
        assert_eq!(split_amqp_url("amqps://u:p@h/vh").1, "h:5671");
        assert_eq!(split_amqp_url("amqp://h").1, "h:5672");
        assert!(parse_amqp_url("host:5672").is_err());
        assert!(parse_amqp_url("amqp://:5672").is_err());
    }
}
