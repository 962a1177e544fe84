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
//! Not yet: riding through a broker restart (a broken connection ends its worker, its
//! in-flight operations counted `connection_lost`), TLS (`amqps://`).

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
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::Confirmation;
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties};
use tokio::sync::mpsc;

use super::args::{LoadArgs, Mode, QueueType};
use super::pace::Pacer;
use super::record::{read_stamp, realtime_ns, Recorder, Role};
use super::workers::{share, Ctx, Payloads, SendPlan, SenderGuard};
use super::{collect, LoadEnv, LoadOutcome};
use crate::usage;

/// The reply queue of direct reply-to.
const REPLY_TO: &str = "amq.rabbitmq.reply-to";
/// A receiver with nothing to do for this long after the senders finished (or, alone,
/// after its last message) is done.
const IDLE_NS: u64 = 1_000_000_000;
/// The largest message RabbitMQ 3.10 accepts by default (`max_message_size`, 128 MiB).
pub const MAX_AMQP_MESSAGE: u64 = 128 << 20;
/// An AMQP URL cut around its host:port (default port 5672): `amqp://u:p@h:5672/vh` ->
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
pub const AMQP_URL_FORM: &str = "amqp://[user:password@]host[:port][/vhost] (port default 5672)";

/// Checks an AMQP server URL; the error says what is wrong, without the URL.
pub fn parse_amqp_url(input: &str) -> Result<(), String> {
    let t = input.trim();
    let Some((scheme, rest)) = t.split_once("://") else {
        return Err(format!("no scheme: an AMQP URL is {AMQP_URL_FORM}"));
    };
    match scheme.to_ascii_lowercase().as_str() {
        "amqp" => {}
        "amqps" => return Err("amqps:// (TLS) is not supported yet; use amqp://".into()),
        s => return Err(format!("scheme '{s}' is not amqp")),
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

/// The AMQP modes' checks (instead of the NATS connection's).
pub fn validate(a: &LoadArgs) -> anyhow::Result<()> {
    for u in &a.connect.servers {
        parse_amqp_url(u).map_err(|why| {
            usage!(
                "--server '{}': {why}; an AMQP URL is {AMQP_URL_FORM}",
                crate::redact::text(u)
            )
        })?;
    }
    let nats_auth = [
        ("--user", a.connect.user.is_some()),
        ("--password", a.connect.password.is_some()),
        ("--token", a.connect.token.is_some()),
        ("--creds", a.connect.creds.is_some()),
        ("--nkey", a.connect.nkey.is_some()),
        ("--tls-ca", a.connect.tls_ca.is_some()),
    ];
    if let Some((flag, _)) = nats_auth.iter().find(|(_, g)| *g) {
        return Err(usage!(
            "{flag} is a NATS connection flag; {} takes the user and password in the URL (--server amqp://USER:PASSWORD@HOST:PORT)",
            a.mode.cli_name()
        ));
    }
    let q = &a.queue;
    if q.is_empty() || q.len() > 255 || q.starts_with("amq.") {
        return Err(usage!(
            "--queue '{q}': a queue name is 1 to 255 bytes and does not start with 'amq.' (reserved by the broker), like diskpulse"
        ));
    }
    if a.size > MAX_AMQP_MESSAGE {
        return Err(usage!(
            "--size {}: RabbitMQ accepts messages of at most 128 MiB by default (max_message_size); use a smaller --size",
            crate::units::bytes_exact(a.size)
        ));
    }
    if a.prefetch == 0 {
        return Err(usage!(
            "--prefetch must be at least 1 (0 would mean no limit to RabbitMQ)"
        ));
    }
    if a.queue_type == QueueType::Stream && a.purge {
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

/// Connects a client; the error names the (redacted) URL and what to check.
async fn connect(url: &str, name: &str) -> anyhow::Result<Connection> {
    let props = ConnectionProperties::default().with_connection_name(name.into());
    match tokio::time::timeout(Duration::from_secs(10), Connection::connect(url, props)).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(anyhow::anyhow!(
            "cannot connect to the AMQP broker at {}: {e} (is RabbitMQ listening there, and are the user and password right?)",
            crate::redact::text(url)
        )),
        Err(_) => Err(anyhow::anyhow!(
            "cannot connect to the AMQP broker at {}: no answer within 10 s",
            crate::redact::text(url)
        )),
    }
}

/// The declare arguments of the queue.
fn queue_args(a: &LoadArgs) -> FieldTable {
    let mut t = FieldTable::default();
    t.insert(
        "x-queue-type".into(),
        AMQPValue::LongString(a.queue_type.name().into()),
    );
    t
}

/// Declares the queue (durable, of `--queue-type`) and purges it with `--purge`.
async fn prepare(a: &LoadArgs, conn: &Connection) -> anyhow::Result<()> {
    let ch = conn.create_channel().await?;
    let opts = QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    };
    if let Err(e) = ch
        .queue_declare(a.queue.as_str().into(), opts, queue_args(a))
        .await
    {
        return Err(usage!(
            "cannot declare queue '{}' as a durable {} queue: {e}; if it exists with other arguments, use another --queue or delete it",
            a.queue,
            a.queue_type.name()
        ));
    }
    if a.purge {
        ch.queue_purge(a.queue.as_str().into(), QueuePurgeOptions::default())
            .await?;
    }
    let _ = ch.close(200, "done".into()).await;
    Ok(())
}

fn properties(a: &LoadArgs) -> BasicProperties {
    BasicProperties::default().with_delivery_mode(if a.transient { 1 } else { 2 })
}

/// Runs an AMQP mode; returns when every worker has finished (or after Ctrl-C).
pub async fn run(a: &LoadArgs, env: &LoadEnv) -> anyhow::Result<LoadOutcome> {
    if env.servers.is_empty() {
        anyhow::bail!("no AMQP broker to connect to");
    }
    let server_of = |i: usize| env.servers[i % env.servers.len()].clone();
    let setup = connect(&server_of(0), "diskpulse-setup").await?;
    prepare(a, &setup).await?;

    // --inject-latency: a proxy per broker; the main role's clients (publishers, callers,
    // casters) connect through it, the consumers and responders beside them and the setup
    // connection directly, as for NATS: one call's round trip crosses the delay twice.
    let (main_urls, proxies) =
        super::proxied_urls(a, env, |s| Ok(split_amqp_url(s).1), amqp_through)?;

    let clock = env.clock;
    let window_ns = a.stats_window.as_nanos() as u64;
    let (tx, rx) = mpsc::unbounded_channel();
    let main = a.main_role();
    let n_main = a.main_clients();
    let total = a.total_ops();
    let mut roles = vec![(main, n_main)];
    match a.mode {
        Mode::AmqpPub if a.consume > 0 => roles.push((Role::AmqpConsume, a.consume)),
        Mode::AmqpCall | Mode::AmqpCast if a.reply > 0 => roles.push((Role::AmqpServe, a.reply)),
        _ => {}
    }
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
            let conn = connect(&url, &name).await?;
            let ch = conn.create_channel().await?;
            let consumer = match role {
                Role::AmqpPub => {
                    ch.confirm_select(ConfirmSelectOptions::default()).await?;
                    None
                }
                Role::AmqpConsume | Role::AmqpServe => {
                    ch.basic_qos(a.prefetch, BasicQosOptions::default()).await?;
                    let mut args = FieldTable::default();
                    if a.queue_type == QueueType::Stream {
                        args.insert(
                            "x-stream-offset".into(),
                            AMQPValue::LongString("first".into()),
                        );
                    }
                    Some(
                        ch.basic_consume(
                            a.queue.as_str().into(),
                            name.as_str().into(),
                            BasicConsumeOptions::default(),
                            args,
                        )
                        .await?,
                    )
                }
                Role::AmqpCall => Some(
                    ch.basic_consume(
                        REPLY_TO.into(),
                        name.as_str().into(),
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
            opened.push((role, index, n, server, conn, ch, consumer));
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
    env.events.event(
        "load_start",
        serde_json::json!({"mode": a.mode.cli_name(), "clients": n_main, "broker": "rabbitmq",
            "queue": a.queue, "queue_type": a.queue_type.name(), "persistent": !a.transient,
            "servers": env.servers.iter().map(|s| crate::redact::text(s)).collect::<Vec<_>>()}),
    );
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
    let shared = Arc::new(a.clone());
    let mut tasks = vec![];
    for (role, index, n_role, server, conn, ch, consumer) in opened {
        let rec = Recorder::new(
            role,
            index,
            &crate::redact::text(&server),
            clock,
            window_ns,
            tx.clone(),
        );
        let is_main = role == main;
        let plan = SendPlan {
            count: total.map(|t| share(t, index, n_role)),
            pacer: a.rate.filter(|_| is_main).map(|r| {
                Pacer::new(
                    clock,
                    start_ns,
                    r / n_role as f64,
                    index as f64 / n_role as f64,
                    end_ns,
                )
            }),
            stamp: true,
            size: a.size as usize,
        };
        let ctx = ctx.clone();
        let a = shared.clone();
        let received = received.clone();
        let window = a.window_for(role);
        tasks.push(tokio::spawn(async move {
            match role {
                Role::AmqpPub => {
                    let _g = SenderGuard::new(&ctx);
                    publish(&a, &ctx, &ch, rec, plan, window, true).await
                }
                Role::AmqpCast => {
                    let _g = SenderGuard::new(&ctx);
                    publish(&a, &ctx, &ch, rec, plan, window, false).await
                }
                Role::AmqpCall => {
                    let _g = SenderGuard::new(&ctx);
                    let consumer = consumer.expect("opened with its reply consumer");
                    call(&a, &ctx, &ch, consumer, rec, plan, window).await
                }
                _ => {
                    let consumer = consumer.expect("opened with its consumer");
                    let serve = role == Role::AmqpServe;
                    receive(&ctx, &ch, consumer, rec, serve, &received, receive_limit).await
                }
            }
            let _ = ch.close(200, "done".into()).await;
            let _ = conn.close(200, "done".into()).await;
        }));
    }
    drop(tx);
    let mut panicked = None;
    for t in tasks {
        if let Err(e) = t.await {
            panicked.get_or_insert(e);
        }
    }
    let ended_ns = clock.now_ns();
    let collected = collector.await??;
    env.events.event("load_stop", serde_json::json!({}));
    let _ = setup.close(200, "done".into()).await;
    if let Some(e) = panicked {
        anyhow::bail!("a load worker failed: {e}");
    }
    let proxies = proxies
        .into_iter()
        .map(|mut p| {
            p.close();
            p.report()
        })
        .collect();
    Ok(LoadOutcome {
        proxies,
        stream_check: None,
        clients: collected.clients,
        started_ns: start_ns,
        ended_ns,
        csv_rows: collected.rows,
        js_context: serde_json::json!({
            "broker": "rabbitmq", "queue": a.queue, "queue_type": a.queue_type.name(),
            "persistent": !a.transient, "window": a.window_for(main),
            "prefetch": a.prefetch, "confirms": a.mode == Mode::AmqpPub,
        }),
    })
}

/// The next intended start, like [`SendPlan::next`] but without holding the recorder
/// (the call loop selects on it beside its replies).
async fn next_start(plan: &mut SendPlan, ctx: &Ctx, done: u64) -> Option<u64> {
    if plan.count.is_some_and(|c| done >= c) {
        return None;
    }
    match plan.pacer.as_mut() {
        Some(p) => {
            let t = p.next().await?;
            (!ctx.stop.load(Ordering::Relaxed)).then_some(t)
        }
        None => {
            let now = ctx.clock.now_ns();
            (!ctx.over(now)).then_some(now)
        }
    }
}

/// amqp-pub (with confirms, `window` unconfirmed) and amqp-cast (no confirms).
async fn publish(
    a: &LoadArgs,
    ctx: &Ctx,
    ch: &Channel,
    mut rec: Recorder,
    mut plan: SendPlan,
    window: usize,
    confirms: bool,
) {
    let mut payloads = Payloads::new(&plan);
    let props = properties(a);
    let key: ShortString = a.queue.as_str().into();
    let size = a.size;
    let timeout = a.timeout;
    let mut inflight = FuturesUnordered::new();
    let mut issued = 0u64;
    // Each confirm is awaited by a task of its own, which takes its time when it arrives:
    // this loop looks at `inflight` only when the window is full or before a publish, and
    // with --rate it sleeps between publishes (the confirm's time taken here was up to
    // window / rate late: 512 ms for 2 x 256 at 1000 msgs/s).
    let clock = rec.clock();
    loop {
        while let Some(Some((r, sent, intended, at))) = inflight.next().now_or_never() {
            confirmed(&mut rec, r, sent, intended, at, size);
        }
        while inflight.len() >= window.max(1) {
            let Some((r, sent, intended, at)) = inflight.next().await else {
                break;
            };
            confirmed(&mut rec, r, sent, intended, at, size);
        }
        let Some(intended) = plan.next(ctx, issued, &rec).await else {
            break;
        };
        let payload: Bytes = payloads.next_payload();
        let sent = rec.now();
        let r = ch
            .basic_publish(
                "".into(),
                key.clone(),
                BasicPublishOptions::default(),
                &payload,
                props.clone(),
            )
            .await;
        issued += 1;
        match r {
            Ok(confirm) if confirms => {
                let task = tokio::spawn(async move {
                    let r = tokio::time::timeout(timeout, confirm).await;
                    (r, clock.now_ns())
                });
                inflight.push(async move {
                    let (r, at) = match task.await {
                        Ok(x) => (Some(x.0), x.1),
                        Err(_) => (None, clock.now_ns()),
                    };
                    (r, sent, intended, at)
                })
            }
            Ok(_) => rec.op(rec.now(), size),
            Err(e) => {
                let kind = error_kind(&e);
                rec.error(rec.now(), kind, || format!("basic.publish: {e}"));
                if kind == "connection_lost" || kind == "broker_error" {
                    break;
                }
            }
        }
    }
    while let Some((r, sent, intended, at)) = inflight.next().await {
        confirmed(&mut rec, r, sent, intended, at, size);
    }
    rec.finish();
}

type ConfirmResult = Result<Result<Confirmation, lapin::Error>, tokio::time::error::Elapsed>;

/// A confirm's outcome (`None`: its task died), taken at `at` on the run clock.
fn confirmed(
    rec: &mut Recorder,
    r: Option<ConfirmResult>,
    sent: u64,
    intended: u64,
    at: u64,
    size: u64,
) {
    // Counted now (the windows only move forward), its latency up to `at`.
    let now = rec.now().max(at);
    let late = now - at;
    match r {
        Some(Ok(Ok(c))) if c.is_ack() => rec.op_lat(now, size, sent + late, intended + late),
        Some(Ok(Ok(_))) => rec.error(now, "nack", || "the broker nacked a publish".into()),
        Some(Ok(Err(e))) => rec.error(now, error_kind(&e), || format!("publisher confirm: {e}")),
        Some(Err(_)) => rec.error(now, "timeout", || {
            "no publisher confirm within --timeout".into()
        }),
        None => rec.error(now, "confirm_lost", || {
            "the task awaiting a publisher confirm ended without it".into()
        }),
    }
}

/// amqp-call: `window` requests outstanding, one reply each.
async fn call(
    a: &LoadArgs,
    ctx: &Ctx,
    ch: &Channel,
    mut replies: lapin::Consumer,
    mut rec: Recorder,
    mut plan: SendPlan,
    window: usize,
) {
    let mut payloads = Payloads::new(&plan);
    let key: ShortString = a.queue.as_str().into();
    let base = properties(a).with_reply_to(REPLY_TO.into());
    let size = a.size;
    let timeout_ns = a.timeout.as_nanos() as u64;
    // seq -> (sent, intended)
    let mut pending: HashMap<u64, (u64, u64)> = HashMap::new();
    let mut timed_out: HashSet<u64> = HashSet::new();
    let mut issued = 0u64;
    let mut done_sending = false;
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    loop {
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
                            Some((sent, intended)) => rec.op_lat(now, size, sent, intended),
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
                Some(Err(e)) => {
                    let now = rec.now();
                    rec.error(now, error_kind(&e), || format!("reply consumer: {e}"));
                    break;
                }
                None => {
                    let now = rec.now();
                    rec.error(now, "connection_lost", || "the reply consumer ended".into());
                    break;
                }
            },
            t = next_start(&mut plan, ctx, issued), if can_send => match t {
                None => done_sending = true,
                Some(intended) => {
                    let seq = issued;
                    issued += 1;
                    let payload = payloads.next_payload();
                    let props = base.clone().with_correlation_id(seq.to_string().into());
                    let sent = rec.now();
                    match ch
                        .basic_publish("".into(), key.clone(), BasicPublishOptions::default(), &payload, props)
                        .await
                    {
                        Ok(_) => {
                            pending.insert(seq, (sent, intended));
                        }
                        Err(e) => {
                            let now = rec.now();
                            rec.error(now, error_kind(&e), || format!("basic.publish: {e}"));
                            break;
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
    rec.finish();
}

/// amqp-consume and amqp-serve: manual acks; a responder replies first when the message
/// asks for one.
async fn receive(
    ctx: &Ctx,
    ch: &Channel,
    mut consumer: lapin::Consumer,
    mut rec: Recorder,
    serve: bool,
    received: &AtomicU64,
    limit: Option<u64>,
) {
    let mut last = rec.now();
    loop {
        let now = rec.now();
        // Beside senders of this run, --duration ends the senders; receivers then drain
        // (a responder that left at --duration would leave the last calls unanswered).
        if limit.is_some_and(|l| received.load(Ordering::Relaxed) >= l)
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
        } else if ctx.end_ns.is_none() && limit.is_none() {
            Some(last)
        } else {
            None
        };
        if idle_from.is_some_and(|t| now.saturating_sub(t) > IDLE_NS) {
            break;
        }
        let d = match tokio::time::timeout(Duration::from_millis(50), consumer.next()).await {
            Err(_) => continue,
            Ok(None) => break,
            Ok(Some(Err(e))) => {
                rec.error(rec.now(), error_kind(&e), || format!("consumer: {e}"));
                break;
            }
            Ok(Some(Ok(d))) => d,
        };
        let got = rec.now();
        last = got;
        if serve {
            if let Some(reply_to) = d.properties.reply_to().clone() {
                let mut props = BasicProperties::default();
                if let Some(c) = d.properties.correlation_id().clone() {
                    props = props.with_correlation_id(c);
                }
                if let Err(e) = ch
                    .basic_publish(
                        "".into(),
                        reply_to,
                        BasicPublishOptions::default(),
                        &d.data,
                        props,
                    )
                    .await
                {
                    rec.error(rec.now(), error_kind(&e), || format!("reply: {e}"));
                    continue;
                }
            }
        }
        if let Err(e) = d.ack(BasicAckOptions::default()).await {
            rec.error(rec.now(), error_kind(&e), || format!("basic.ack: {e}"));
            continue;
        }
        let bytes = d.data.len() as u64;
        match read_stamp(&d.data) {
            Some(sent) => rec.op_e2e(got, bytes, realtime_ns().saturating_sub(sent)),
            None => rec.op(got, bytes),
        }
        received.fetch_add(1, Ordering::Relaxed);
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
        assert!(parse_amqp_url("amqps://host").unwrap_err().contains("TLS"));
        assert!(parse_amqp_url("host:5672").is_err());
        assert!(parse_amqp_url("amqp://:5672").is_err());
    }
}
