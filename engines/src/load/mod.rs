//! The load generator: every workload `nats bench` runs and the ones it cannot, on the
//! run clock, beside the disk samplers.
//!
//! Modes: `pub`, `sub`, `request`, `reply`, `cast` (core NATS); `js-pub`, `js-consume`;
//! `kv-put`, `kv-get`; `obj-put`, `obj-get`. Modes that belong together run together in one
//! invocation (`pub --sub 4`, `request --reply 2`, `js-pub --consume 2`, `obj-put
//! --consumers 20`). Each client is its own connection; clients are spread round-robin
//! over the servers. See [`record`] for what is measured and [`collect`] for `load.csv`;
//! [`js`], [`kv`] and [`obj`] for the JetStream modes and what they verify, [`content`]
//! for the keys, values and objects derived from their names.

pub mod amqp;
mod args;
pub mod client_chart;
mod cmd_args;
pub mod collect;
pub mod connect;
pub mod content;
pub mod flow;
pub mod js;
mod jsget;
pub mod kv;
pub mod message;
mod modes;
pub mod natscli;
pub mod natscli_v2;
pub mod obj;
pub mod output;
pub mod pace;
pub mod raw;
pub mod rawsub;
pub mod receive;
pub(crate) mod reconcile;
pub mod record;
mod roles;
pub mod send;
pub mod workers;

pub use args::{
    args_from, AckMode, LoadArgs, Mode, QueueType, Storage, DEFAULT_MAX_PAYLOAD, DEFAULT_WINDOW,
};
pub use cmd_args::LoadCmdArgs;
pub(crate) use modes::storage_type;
pub use reconcile::StreamCheck;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream;
use collectors::clock::Clock;
use tokio::sync::mpsc;

use crate::recording::EventLog;
use format::events::{self as ev, Body};
use format::usage;
use record::{Recorder, Role};
use roles::{Conn, RunShared, Start};
use workers::{Ctx, SendPlan, SenderGuard};

/// Where and on which clock the load runs.
pub struct LoadEnv {
    pub clock: Clock,
    pub events: EventLog,
    pub stop: Arc<AtomicBool>,
    pub servers: Vec<String>,
    /// `load.csv` goes here when recording.
    pub load_csv: Option<PathBuf>,
}

/// The outcome of a load run.
pub struct LoadOutcome {
    pub clients: Vec<record::ClientTotals>,
    pub started_ns: u64,
    pub ended_ns: u64,
    pub csv_rows: u64,
    /// The JetStream context limits (or the AMQP channel's) used, for meta.json.
    pub js_context: format::meta::ClientContext,
    /// js-pub: what the stream holds after the run beside what was acked.
    pub stream_check: Option<StreamCheck>,
    /// --inject-latency: each server's proxy, what was asked and what it added.
    pub proxies: Vec<crate::proxy::ProxyReport>,
}

/// Connection capacity per client: enough that a full window never blocks on it.
fn capacity(window: usize) -> usize {
    (2 * window).max(2048)
}

fn js_context(client: async_nats::Client, window: usize, timeout: Duration) -> jetstream::Context {
    jetstream::ContextBuilder::new()
        .timeout(timeout.max(Duration::from_secs(30)))
        .ack_timeout(timeout.max(Duration::from_secs(30)))
        .max_ack_inflight(window.max(1))
        .backpressure_on_inflight(true)
        .build(client)
}

/// What [`prepare`] found or made.
#[derive(Default)]
struct Prepared {
    /// kv-get: the bucket serves direct gets.
    kv_direct: bool,
    /// obj modes: the objects getters may read.
    catalog: Option<Arc<obj::Catalog>>,
    /// The shared pull consumer was created (and is deleted at the end).
    pull_consumer: bool,
}

/// Creates or checks what the mode needs (stream, consumer, bucket) before any worker.
async fn prepare(a: &LoadArgs, client: &async_nats::Client, url: &str) -> anyhow::Result<Prepared> {
    let js = jetstream::new(client.clone());
    let url = connect::redact_url(url);
    let mut p = Prepared::default();
    match a.mode {
        Mode::JsPub => {
            prepare_stream(a, &js).await?;
            if a.atomic_batch.is_some() {
                allow_atomic(client, &a.stream).await?;
            }
            if a.consume > 0 && !a.ordered {
                js::prepare_pull(a, &js, a.consume, true).await?;
                p.pull_consumer = true;
            }
        }
        Mode::JsConsume | Mode::JsGet => {
            if !js::stream_exists(&js, &a.stream).await? {
                return Err(js::stream_not_found(&a.stream, &url));
            }
            if a.mode == Mode::JsConsume && !a.ordered {
                js::prepare_pull(a, &js, a.main_clients(), false).await?;
                p.pull_consumer = true;
            }
        }
        Mode::KvPut | Mode::KvGet => {
            p.kv_direct = kv::prepare(a, &js, &url, a.mode == Mode::KvPut).await?;
        }
        Mode::ObjPut | Mode::ObjGet => {
            p.catalog = Some(obj::prepare(a, &js, &url, a.mode == Mode::ObjPut).await?);
        }
        _ => {}
    }
    Ok(p)
}

/// js-pub: creates the stream (or checks that an existing one captures the subject).
async fn prepare_stream(a: &LoadArgs, js: &jetstream::Context) -> anyhow::Result<()> {
    let mut cfg = jetstream::stream::Config {
        name: a.stream.clone(),
        subjects: vec![a.listen_subject()],
        storage: storage_type(a.storage),
        num_replicas: a.replicas,
        // As natscli's `js pub --create`: getters (`js-get`) read it with direct gets.
        allow_direct: true,
        ..Default::default()
    };
    if let Some(b) = a.max_bytes {
        cfg.max_bytes = b as i64;
        cfg.discard = match a.discard {
            args::Discard::New => jetstream::stream::DiscardPolicy::New,
            args::Discard::Old => jetstream::stream::DiscardPolicy::Old,
        };
    }
    let mut stream = js
        .get_or_create_stream(cfg)
        .await
        .map_err(|e| anyhow::anyhow!("cannot create stream '{}': {e}", a.stream))?;
    let info = stream.info().await?;
    if !info.config.subjects.iter().any(|s| {
        let want = a.listen_subject();
        s == &want || s == ">" || s.ends_with(".>") && want.starts_with(&s[..s.len() - 1])
    }) {
        return Err(usage!(
            "stream '{}' exists but does not capture subject '{}' (its subjects: {:?}); pick another --stream or --subject",
            a.stream,
            a.subject,
            info.config.subjects
        ));
    }
    if a.purge {
        stream.purge().await?;
    }
    Ok(())
}

/// `--atomic-batch`: the stream takes atomic batches (`allow_atomic`, nats-server 2.12+;
/// async-nats's stream config has no such field, so the JSON API is asked directly).
async fn allow_atomic(client: &async_nats::Client, stream: &str) -> anyhow::Result<()> {
    let ask = |subject: String, body: Vec<u8>| async move {
        let m = client.request(subject, body.into()).await?;
        anyhow::Ok(serde_json::from_slice::<serde_json::Value>(&m.payload)?)
    };
    let info = ask(format!("$JS.API.STREAM.INFO.{stream}"), vec![]).await?;
    let mut cfg = info["config"].clone();
    if cfg["allow_atomic"] == serde_json::Value::Bool(true) {
        return Ok(());
    }
    cfg["allow_atomic"] = true.into();
    let r = ask(
        format!("$JS.API.STREAM.UPDATE.{stream}"),
        serde_json::to_vec(&cfg)?,
    )
    .await?;
    if r["config"]["allow_atomic"] != serde_json::Value::Bool(true) {
        anyhow::bail!(
            "stream '{stream}' does not take atomic batches ({}): atomic batch publishing needs nats-server 2.12 or later",
            r.get("error").map_or_else(|| "allow_atomic not kept".to_string(), |e| e.to_string())
        );
    }
    Ok(())
}

/// Runs the load; returns when every worker has finished (or after Ctrl-C).
#[allow(
    clippy::too_many_lines,
    reason = "the load's start, its workers per role and its end in order; each role's start-up is a few lines that share the run's clock, channel and stop flag"
)]
pub async fn run(a: &LoadArgs, env: &LoadEnv) -> anyhow::Result<LoadOutcome> {
    if a.mode.is_amqp() {
        return amqp::run(a, env).await;
    }
    if env.servers.is_empty() {
        anyhow::bail!("no NATS server to connect to");
    }
    let server_of = |i: usize| env.servers[i % env.servers.len()].clone();
    let setup = a
        .connect
        .connect(&server_of(0), "diskpulse-setup", 2048, &env.events)
        .await?;
    // The server's INFO says what it accepts: a larger message would close the
    // connection at the first publish, so refuse before any worker starts.
    a.check_max_payload(
        setup.server_info().max_payload as u64,
        &format!("the server {}", connect::redact_url(&server_of(0))),
    )?;
    let prepared = prepare(a, &setup, &server_of(0)).await?;
    let msgs_before = match a.mode {
        Mode::JsPub => {
            Some(reconcile::stream_msgs(&setup, &a.stream, a.discard == args::Discard::Old).await?)
        }
        _ => None,
    };

    // --inject-latency: a proxy per server; the main role's clients connect through it,
    // the clients beside them (responders, subscribers, consumers) and the setup
    // connection directly: one request/reply round trip crosses the delay twice.
    let mut main_connect = a.connect.clone();
    if a.inject_latency.is_some() {
        main_connect.ignore_discovered = true;
    }
    let (main_urls, proxies) = proxied_urls(
        a,
        env,
        |s| {
            connect::host_port(s)
                .map_err(|why| usage!("--server '{}': {why}", connect::redact_url(s)))
        },
        connect::through,
    )?;
    let clock = env.clock;
    let window_ns = a.stats_window.as_nanos() as u64;
    let (tx, rx) = mpsc::unbounded_channel();
    let main = a.main_role();
    let n_main = a.main_clients();
    let total = a.total_ops();

    let roles = a.roles();
    // Connect every client first, so connection time is not load time.
    let mut conns: Vec<(Conn, String)> = vec![];
    let mut k = 0usize;
    for &(role, n) in &roles {
        let w = a.window_for(role);
        for index in 0..n {
            let server = server_of(k);
            let (url, how) = if role == main {
                (main_urls[k % main_urls.len()].clone(), &main_connect)
            } else {
                (server.clone(), &a.connect)
            };
            k += 1;
            let name = record::client_name(role, index);
            // async-nats subscribers (--no-raw, TLS, credentials) hold 4 flow windows
            // before they drop.
            let sub_capacity = (role == Role::Sub)
                .then(|| {
                    a.flow_window()
                        .map(|f| (4 * f).clamp(65_536, 1 << 22) as usize)
                })
                .flatten();
            let client = how
                .connect_sub(&url, &name, capacity(w), sub_capacity, &env.events)
                .await?;
            // Core publishers without TLS or credentials write the protocol themselves.
            let raw = if role == Role::Pub && a.connect.is_plain() && !a.no_raw {
                raw::RawConn::connect(&url, &name).await?
            } else {
                None
            };
            // Core subscribers likewise read the protocol themselves (see rawsub), and so
            // do a cast's responders (in their queue group): they only count, and an
            // async-nats subscription drops what its channel cannot hold when the
            // publisher outruns it (seen under --inject-latency, whose proxy takes the
            // publisher's writes without back pressure).
            let raw_role = role == Role::Sub || (role == Role::Reply && a.mode == Mode::Cast);
            let raw_sub = if raw_role && a.connect.is_plain() && !a.no_raw {
                let queue = (role == Role::Reply).then_some(roles::REPLY_QUEUE);
                rawsub::RawSubConn::connect(&url, &name, &a.listen_subject(), queue).await?
            } else {
                None
            };
            let c = Conn {
                role,
                index,
                n,
                client,
                raw,
                raw_sub,
            };
            conns.push((c, server));
        }
    }

    // js-consume alone: --msgs counts all pull clients' messages together (they split the
    // stream), or each ordered client's (each reads every message).
    let consume_limit = match (a.mode, a.msgs) {
        (Mode::JsConsume, Some(m)) if a.ordered => js::Limit::Own(m),
        (Mode::JsConsume, Some(m)) => js::Limit::Shared(Arc::new(AtomicU64::new(0)), m),
        _ => js::Limit::None,
    };
    let msg_ids = a.msg_id.then(reconcile::MsgIds::new);
    // pub --sub M: publishers never more than the window ahead of the slowest subscriber.
    let flow = (a.mode == Mode::Pub && a.sub > 0)
        .then(|| a.flow_window())
        .flatten()
        .map(|w| flow::Flow::new(w, a.sub));
    if let Some(f) = &flow {
        env.events.event(Body::FlowControl(ev::FlowControl {
            window_msgs: f.window(),
            subscribers: a.sub as u64,
        }));
    }
    let shared = RunShared {
        flow,
        msg_ids: msg_ids.clone(),
        a: Arc::new(a.clone()),
        subject: async_nats::Subject::from(a.subject.as_str()),
        kv_direct: prepared.kv_direct,
        catalog: prepared.catalog.clone().unwrap_or_default(),
        consume_limit,
        served: Default::default(),
    };
    // Receivers subscribe (and consumers, buckets open) before any sender starts.
    let mut opened = vec![];
    for (c, server) in conns {
        let (role, index, n) = (c.role, c.index, c.n);
        let w = roles::worker(role);
        opened.push((role, index, n, server, w.sends(), w.open(&shared, c).await?));
    }
    let n_senders = opened.iter().filter(|o| o.4).count() as u64;

    let start_ns = clock.now_ns();
    let end_ns = a.duration.map(|d| start_ns + d.as_nanos() as u64);
    let expected = match (a.mode, total) {
        (Mode::Pub, Some(t)) => Some(t),
        (Mode::Sub, Some(t)) if a.msgs.is_some() => Some(t),
        _ => None,
    };
    let ctx = Ctx {
        clock,
        events: env.events.clone(),
        stop: env.stop.clone(),
        start_ns,
        end_ns,
        senders_left: Arc::new(AtomicU64::new(n_senders)),
        senders_done_ns: Arc::new(AtomicU64::new(0)),
        expected,
        with_senders: n_senders > 0,
    };
    env.events.event(Body::LoadStart(ev::LoadStart {
        mode: a.mode.cli_name().to_string(),
        clients: n_main as u64,
        servers: env.servers.iter().map(|s| connect::redact_url(s)).collect(),
        ..Default::default()
    }));
    let collector = tokio::spawn(collect::collect(
        rx,
        env.load_csv.clone(),
        clock,
        window_ns,
        start_ns,
        env.events.clone(),
    ));

    let mut tasks = vec![];
    for (role, index, n_role, server, sends, ready) in opened {
        // clients[].server in the output and meta.json: without user info.
        let rec = Recorder::new(
            role,
            index,
            &connect::redact_url(&server),
            clock,
            window_ns,
            tx.clone(),
        );
        let is_main = role == main;
        // Core publishers stamp only when someone in this run receives (or --stamp):
        // a stamp costs a clock read and a copy per message, which is a third of a
        // core publish; JetStream publishes always carry one (for later consumers).
        let stamp = a.stamp || !matches!(role, Role::Pub) || a.sub > 0;
        let size = if is_main {
            a.op_size()
        } else {
            a.object_size as usize
        };
        let plan = SendPlan::for_client(a, &ctx, index, n_role, is_main, stamp, size);
        // Getters beside putters work one object at a time, like the study's consumers.
        let window = if is_main { a.window_for(role) } else { 1 };
        // A sender's guard drops when its task ends: receivers then drain.
        let guard = sends.then(|| SenderGuard::new(&ctx));
        let work = ready(Start {
            rec,
            plan,
            ctx: ctx.clone(),
            window,
        });
        tasks.push(tokio::spawn(async move {
            let _guard = guard;
            work.await
        }));
    }
    drop(tx);
    let panicked = workers::join_workers(tasks).await;
    let ended_ns = clock.now_ns();
    let mut collected = collector.await??;
    env.events.event(Body::LoadStop(ev::NoDetail {}));
    if a.mode == Mode::Cast && a.reply > 0 && !env.stop.load(std::sync::atomic::Ordering::Relaxed) {
        if let Some((sent, served)) = cast_missing(&mut collected.clients, ended_ns) {
            env.events.event(Body::Missing(ev::Missing {
                sent,
                served,
                missing: sent - served,
            }));
        }
    }
    if prepared.pull_consumer {
        js::cleanup_pull(&a.stream, &jetstream::new(setup.clone())).await;
    }
    if let Some(e) = panicked {
        anyhow::bail!("a load worker failed: {e}");
    }
    let stream_check = match msgs_before {
        Some(msgs_before) => {
            let after =
                reconcile::stream_msgs(&setup, &a.stream, a.discard == args::Discard::Old).await;
            if let Err(e) = &after {
                env.events.error("load", "stream_check", &format!("{e:#}"));
            }
            // --msg-id: the lost publishes again, after the count (see reconcile).
            let msg_id = match &msg_ids {
                Some(ids) if after.is_ok() => {
                    let mut r =
                        reconcile::retry_lost(&setup, &a.subject, ids, a.size as usize).await;
                    r.msgs_final =
                        reconcile::stream_msgs(&setup, &a.stream, a.discard == args::Discard::Old)
                            .await
                            .ok();
                    env.events.event(Body::MsgIdRetry(ev::MsgIdRetry {
                        lost: r.lost,
                        lost_stored: r.lost_stored,
                        msgs_final: r.msgs_final,
                        republished: r.republished,
                        retry_failed: r.retry_failed,
                    }));
                    Some(r)
                }
                _ => None,
            };
            Some(StreamCheck {
                stream: a.stream.clone(),
                msgs_before,
                msgs_after: after.ok(),
                acked: collected
                    .clients
                    .iter()
                    .filter(|c| c.role == Role::JsPub)
                    .map(|c| c.ops)
                    .sum(),
                msg_id,
            })
        }
        None => None,
    };
    let w = a.window_for(main);
    let proxies = workers::close_proxies(proxies);
    Ok(LoadOutcome {
        proxies,
        stream_check,
        clients: collected.clients,
        started_ns: start_ns,
        ended_ns,
        csv_rows: collected.rows,
        js_context: format::meta::ClientContext::Nats(format::meta::JsContextMeta {
            max_ack_inflight: w,
            backpressure_on_inflight: true,
            ack_timeout_s: a.timeout.max(Duration::from_secs(30)).as_secs_f64(),
            client_capacity: capacity(w),
        }),
    })
}

/// The URLs the main role's clients connect to: with `--inject-latency`, each server's
/// through a proxy of its own (to `host_port(server)`; `through(server, proxy)` is the
/// server's URL with the proxy's address in its host's place), with a `proxy` event naming
/// them; without, the servers.
pub(crate) fn proxied_urls(
    a: &LoadArgs,
    env: &LoadEnv,
    host_port: impl Fn(&str) -> anyhow::Result<String>,
    through: fn(&str, std::net::SocketAddr) -> String,
) -> anyhow::Result<(Vec<String>, Vec<crate::proxy::ProxyHandle>)> {
    let Some(delay) = a.inject_latency else {
        return Ok((env.servers.clone(), vec![]));
    };
    let (mut urls, mut proxies) = (vec![], vec![]);
    for s in &env.servers {
        let (addr, h) = crate::proxy::spawn(&host_port(s)?, delay, a.latency_jitter())?;
        urls.push(through(s, addr));
        proxies.push(h);
    }
    env.events.event(Body::Proxy(ev::Proxy {
        delay_ms: delay.as_secs_f64() * 1e3,
        jitter_ms: a
            .latency_jitter()
            .map_or(0.0, |j| j.amount.as_secs_f64() * 1e3),
        proxies: proxies
            .iter()
            .map(|p| p.report())
            .map(|r| ev::ProxyRoute {
                listen: r.listen,
                upstream: r.upstream,
            })
            .collect(),
    }));
    Ok((urls, proxies))
}

/// A cast's publishes that no responder counted (nats-server drops messages to a slow
/// consumer without telling the publisher): `missing` errors on the last responder, so
/// the summary, the JSON and the exit code say so. Returns (sent, served) when some are
/// missing. Called only when the run ended on its own (Ctrl-C loses what is in flight).
fn cast_missing(clients: &mut [record::ClientTotals], at_ns: u64) -> Option<(u64, u64)> {
    use record::Role;
    let sent: u64 = clients
        .iter()
        .filter(|c| c.role == Role::Pub)
        .map(|c| c.ops)
        .sum();
    let served: u64 = clients
        .iter()
        .filter(|c| c.role == Role::Reply)
        .map(|c| c.ops)
        .sum();
    if served >= sent {
        return None;
    }
    let n = sent - served;
    let c = clients.iter_mut().rfind(|c| c.role == Role::Reply)?;
    c.errors += n;
    *c.errors_by_kind.entry("missing").or_default() += n;
    c.error_times_ns.entry("missing").or_insert([at_ns, at_ns]);
    Some((sent, served))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mode_is_named_as_the_command_line_spells_it() {
        assert_eq!(Mode::JsPub.cli_name(), "js-pub");
        assert_eq!(Mode::ObjGet.cli_name(), "obj-get");
        assert_eq!(Mode::Pub.cli_name(), "pub");
    }

    fn totals(role: record::Role, ops: u64) -> record::ClientTotals {
        record::ClientTotals {
            role,
            index: 0,
            server: "s".into(),
            ops,
            bytes: 0,
            errors: 0,
            errors_by_kind: Default::default(),
            error_times_ns: Default::default(),
            first_ns: 0,
            last_ns: 0,
            lat: collectors::directio::latency_histogram(),
            co: collectors::directio::latency_histogram(),
        }
    }

    #[test]
    fn a_cast_whose_responders_counted_fewer_than_were_sent_has_them_missing() {
        use record::Role;
        let mut c = vec![
            totals(Role::Pub, 600),
            totals(Role::Pub, 400),
            totals(Role::Reply, 500),
            totals(Role::Reply, 450),
        ];
        assert_eq!(cast_missing(&mut c, 7), Some((1000, 950)));
        assert_eq!(c[3].errors_by_kind.get("missing"), Some(&50));
        assert_eq!(c[3].errors, 50);
        assert_eq!(c[2].errors, 0);
        let mut whole = vec![totals(Role::Pub, 10), totals(Role::Reply, 10)];
        assert_eq!(cast_missing(&mut whole, 7), None);
        assert_eq!(whole[1].errors, 0);
    }
}
