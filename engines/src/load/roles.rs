//! Roles behind one small trait: each [`Role`] has a [`RoleWorker`] that says whether it
//! sends, opens what one client of it needs before the load starts, and hands back the
//! worker ready to start. [`super::run`] knows no role by name: it connects, opens, starts
//! and waits.
//!
//! Opening comes before the clock of the load starts, so setting up is not load time: a
//! subscriber subscribes (and round-trips, so the server has the subscription before the
//! first message is sent), a consumer is created, a bucket opened. Starting gives the
//! worker its [`Recorder`], [`SendPlan`], [`Ctx`] and window; senders run the one
//! [`send_loop`], receivers the one [`receive_loop`].

use std::sync::Arc;

use async_nats::Subject;
use bytes::Bytes;
use futures::future::BoxFuture;
use futures::FutureExt;

use super::flow::Flow;
use super::js::{self, Limit};
use super::obj::{self, Catalog};
use super::raw::{RawConn, RawPublish};
use super::rawsub::{raw_receive_loop, RawSubConn};
use super::receive::{receive_loop, CoreSub, Responder};
use super::record::{Recorder, Role};
use super::send::{send_loop, Connects, Each};
use super::workers::{request, CorePublish, Ctx, JsPublish, Payloads, SendPlan};
use super::{connect, js_context, kv, AckMode, LoadArgs, Mode};

/// One connected client of a run.
pub(crate) struct Conn {
    pub role: Role,
    /// Its index within its role, and how many clients the role has.
    pub index: usize,
    pub n: usize,
    pub client: async_nats::Client,
    /// A raw protocol connection for core publishers that need nothing async-nats offers.
    pub raw: Option<RawConn>,
    /// A raw protocol subscriber (subscribed already) for core subscribers on a plain
    /// connection.
    pub(crate) raw_sub: Option<RawSubConn>,
}

/// What every client of a run shares, found or made before any client opens.
pub(crate) struct RunShared {
    pub a: Arc<LoadArgs>,
    pub subject: Subject,
    /// kv-get: the bucket serves direct gets.
    pub(crate) kv_direct: bool,
    /// obj modes: the objects getters may read.
    pub(crate) catalog: Arc<Catalog>,
    /// js-consume: how many messages each consumer takes.
    pub(crate) consume_limit: Limit,
    /// js-pub --msg-id: the ids of publishes whose ack has not come.
    pub(crate) msg_ids: Option<super::reconcile::MsgIds>,
    /// `pub --sub M`: publishers wait for the subscribers (see [`super::flow`]).
    pub flow: Option<Arc<Flow>>,
    /// Requests served by all the run's responders (their --msgs limit is of the sum).
    pub(crate) served: Arc<std::sync::atomic::AtomicU64>,
}

/// What a worker gets when the load starts.
pub(crate) struct Start {
    pub rec: Recorder,
    pub plan: SendPlan,
    pub ctx: Ctx,
    /// Operations in flight at once.
    pub window: usize,
}

/// A worker that has opened what it needs, ready to start.
pub(crate) type Ready = Box<dyn FnOnce(Start) -> BoxFuture<'static, ()> + Send>;

/// What a role does with one client.
pub(crate) trait RoleWorker: Sync {
    /// Whether it sends: receivers of the run drain after the last sender finished.
    fn sends(&self) -> bool;

    /// Opens what this client needs before the load starts, and returns its worker.
    fn open<'a>(&'a self, s: &'a RunShared, c: Conn) -> BoxFuture<'a, anyhow::Result<Ready>>;
}

/// The worker of a role.
pub(crate) fn worker(role: Role) -> &'static dyn RoleWorker {
    match role {
        Role::Pub => &Publisher,
        Role::Sub => &Subscriber,
        Role::Request => &Requester,
        Role::Reply => &Replier,
        Role::JsPub => &JsPublisher,
        Role::JsConsume => &JsConsumer,
        Role::KvPut => &KvPutter,
        Role::KvGet => &KvGetter,
        Role::JsGet => &JsGetter,
        Role::ObjPut => &ObjPutter,
        Role::ObjGet => &ObjGetter,
        // `load::run` hands AMQP modes to `load::amqp` before any NATS worker is made.
        Role::AmqpPub | Role::AmqpConsume | Role::AmqpCall | Role::AmqpCast | Role::AmqpServe => {
            unreachable!("AMQP roles run in load::amqp")
        }
    }
}

fn ready<F>(f: F) -> anyhow::Result<Ready>
where
    F: FnOnce(Start) -> BoxFuture<'static, ()> + Send + 'static,
{
    Ok(Box::new(f))
}

/// Core publish: the raw protocol writer when the connection allows it, else async-nats.
struct Publisher;

impl RoleWorker for Publisher {
    fn sends(&self) -> bool {
        true
    }

    fn open<'a>(&'a self, s: &'a RunShared, c: Conn) -> BoxFuture<'a, anyhow::Result<Ready>> {
        let subject = s.subject.clone();
        let flow = s.flow.clone();
        let s_a = s.a.clone();
        async move {
            ready(move |st: Start| match c.raw {
                Some(raw) => {
                    let subjects = super::message::Subjects::new(&s_a, st.plan.first);
                    let op = RawPublish::new(raw, &subject, &st.plan, &st.ctx, flow, subjects);
                    send_loop(op, 1, st.plan, st.rec, st.ctx).boxed()
                }
                None => {
                    let op = CorePublish {
                        connects: Connects::of(&c.client),
                        client: c.client,
                        subject,
                        payloads: Payloads::new(&st.plan),
                        size: st.plan.size as u64,
                        headers: super::message::header_map(&st.plan.headers),
                        subjects: super::message::Subjects::new(&s_a, st.plan.first),
                        flow,
                        ctx: st.ctx.clone(),
                        lost_ns: None,
                    };
                    send_loop(op, 1, st.plan, st.rec, st.ctx).boxed()
                }
            })
        }
        .boxed()
    }
}

/// Core subscribe on the subject.
struct Subscriber;

impl RoleWorker for Subscriber {
    fn sends(&self) -> bool {
        false
    }

    fn open<'a>(&'a self, s: &'a RunShared, c: Conn) -> BoxFuture<'a, anyhow::Result<Ready>> {
        let flow = s.flow.clone();
        async move {
            if let Some(raw) = c.raw_sub {
                // Subscribed already (RawSubConn::connect waits for the server's PONG).
                return ready(move |st: Start| raw_receive_loop(raw, st.rec, st.ctx, flow).boxed());
            }
            let sub = c.client.subscribe(s.a.listen_subject()).await?;
            connect::round_trip(&c.client).await?;
            let inbox = CoreSub {
                connects: Connects::of(&c.client),
                flow,
                index: c.index,
                got: 0,
            };
            ready(move |st: Start| receive_loop(sub, inbox, st.rec, st.ctx).boxed())
        }
        .boxed()
    }
}

/// Requests with up to `window` in flight.
struct Requester;

impl RoleWorker for Requester {
    fn sends(&self) -> bool {
        true
    }

    fn open<'a>(&'a self, s: &'a RunShared, c: Conn) -> BoxFuture<'a, anyhow::Result<Ready>> {
        let (subject, timeout) = (s.subject.clone(), s.a.timeout);
        let own_responders = s.a.reply > 0;
        async move {
            // A server in a cluster advertises the others' client URLs; alone, the
            // responders' round trip already put their interest on it.
            let clustered = !c.client.server_info().connect_urls.is_empty();
            ready(move |st: Start| {
                let mut payloads = Payloads::new(&st.plan);
                let size = st.plan.size as u64;
                let headers = super::message::header_map(&st.plan.headers);
                let on = c.client.clone();
                let probe_on = c.client.clone();
                let probe_subject = subject.clone();
                let op = Each::on(&on, move |_| {
                    let p = payloads.next_payload();
                    let f = request(&c.client, subject.clone(), headers.clone(), p, timeout);
                    Some(async move { f.await.map(|_reply| size) })
                });
                async move {
                    // Once every role is open: the responders are in their loops.
                    if own_responders && clustered {
                        wait_for_interest(&probe_on, &probe_subject).await;
                    }
                    send_loop(op, st.window, st.plan, st.rec, st.ctx).await
                }
                .boxed()
            })
        }
        .boxed()
    }
}

/// The header of a request that only asks whether the subject has a responder yet:
/// responders answer it and do not count it.
pub(crate) const PROBE_HEADER: &str = "Diskpulse-Probe";

/// Waits (up to 5 s) until this requester's server, one of a cluster, knows of a
/// responder on `subject`.
/// The run's own responders subscribed before the load starts, but in a cluster their
/// interest reaches the other servers over the routes a moment later: a request sent
/// before it does fails at once with `no_responders`, which would count as the
/// responders' absence. A probe request (its [`PROBE_HEADER`] set) is sent until the
/// server no longer answers "no responders"; a probe that is not answered at once is
/// interest too (the responders answer once the load starts).
async fn wait_for_interest(client: &async_nats::Client, subject: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while std::time::Instant::now() < deadline {
        let mut headers = async_nats::HeaderMap::new();
        headers.insert(PROBE_HEADER, "1");
        let probe = client.request_with_headers(subject.to_string(), headers, Bytes::new());
        match tokio::time::timeout(std::time::Duration::from_millis(100), probe).await {
            Ok(Err(e)) if e.kind() == async_nats::RequestErrorKind::NoResponders => {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            _ => return,
        }
    }
}

/// The queue group of the responders.
pub(crate) const REPLY_QUEUE: &str = "diskpulse";

/// Responders in queue group [`REPLY_QUEUE`]; a cast's (which only count) read the
/// protocol themselves when they can (see rawsub).
struct Replier;

impl RoleWorker for Replier {
    fn sends(&self) -> bool {
        false
    }

    fn open<'a>(&'a self, s: &'a RunShared, c: Conn) -> BoxFuture<'a, anyhow::Result<Ready>> {
        async move {
            if let Some(raw) = c.raw_sub {
                // Subscribed already, in the queue group.
                return ready(move |st: Start| raw_receive_loop(raw, st.rec, st.ctx, None).boxed());
            }
            let sub = c
                .client
                .queue_subscribe(s.subject.clone(), REPLY_QUEUE.into())
                .await?;
            connect::round_trip(&c.client).await?;
            let inbox = Responder {
                connects: Connects::of(&c.client),
                client: c.client,
                payload: Bytes::from(vec![b'r'; s.a.size as usize]),
                limit: s.a.msgs.filter(|_| s.a.mode == Mode::Reply),
                served: s.served.clone(),
                service_time: s.a.service_time,
            };
            ready(move |st: Start| receive_loop(sub, inbox, st.rec, st.ctx).boxed())
        }
        .boxed()
    }
}

/// JetStream publish with `window` acks in flight.
struct JsPublisher;

impl RoleWorker for JsPublisher {
    fn sends(&self) -> bool {
        true
    }

    fn open<'a>(&'a self, s: &'a RunShared, c: Conn) -> BoxFuture<'a, anyhow::Result<Ready>> {
        let (subject, timeout) = (s.subject.clone(), s.a.timeout);
        let msg_ids = s.msg_ids.clone().map(|ids| (ids, c.index));
        let atomic_n = s.a.atomic_batch;
        let s_a = s.a.clone();
        async move {
            ready(move |st: Start| {
                let atomic = atomic_n.map(|n| super::workers::Atomic {
                    n: n as u64,
                    count: st.plan.count,
                    client: c.client.clone(),
                    id: format!("{:x}-{}", super::record::realtime_ns(), c.index),
                });
                let op = JsPublish {
                    connects: Connects::of(&c.client),
                    js: js_context(c.client, st.window, timeout),
                    subject,
                    payloads: Payloads::new(&st.plan),
                    size: st.plan.size as u64,
                    msg_ids,
                    headers: super::message::header_map(&st.plan.headers),
                    atomic,
                    subjects: super::message::Subjects::new(&s_a, st.plan.first),
                };
                send_loop(op, st.window, st.plan, st.rec, st.ctx).boxed()
            })
        }
        .boxed()
    }
}

/// A JetStream consumer (shared pull, or ordered).
struct JsConsumer;

impl RoleWorker for JsConsumer {
    fn sends(&self) -> bool {
        false
    }

    fn open<'a>(&'a self, s: &'a RunShared, c: Conn) -> BoxFuture<'a, anyhow::Result<Ready>> {
        async move {
            let src = js::open(&s.a, c.client.clone(), s.a.mode == Mode::JsPub).await?;
            let (ack, limit) = (s.a.ack != AckMode::None, s.consume_limit.clone());
            let double = s.a.double_ack;
            ready(move |st: Start| {
                let connects = Connects::of(&c.client);
                js::consume(src, connects, ack, double, limit, st.rec, st.ctx).boxed()
            })
        }
        .boxed()
    }
}

/// JetStream gets of the stream's messages by sequence (see [`super::jsget`]).
struct JsGetter;

impl RoleWorker for JsGetter {
    fn sends(&self) -> bool {
        true
    }

    fn open<'a>(&'a self, s: &'a RunShared, c: Conn) -> BoxFuture<'a, anyhow::Result<Ready>> {
        async move {
            let g = super::jsget::open(&s.a, &c.client).await?;
            let a = s.a.clone();
            ready(move |st: Start| match a.get_batch {
                Some(n) => {
                    let op = super::jsget::BatchGet::new(g, &c.client, &a, n as u64);
                    send_loop(op, 1, st.plan, st.rec, st.ctx).boxed()
                }
                None => {
                    let op = g.operation(&c.client);
                    send_loop(op, st.window, st.plan, st.rec, st.ctx).boxed()
                }
            })
        }
        .boxed()
    }
}

/// Key-value puts over the client's share of the key space.
struct KvPutter;

impl RoleWorker for KvPutter {
    fn sends(&self) -> bool {
        true
    }

    fn open<'a>(&'a self, s: &'a RunShared, c: Conn) -> BoxFuture<'a, anyhow::Result<Ready>> {
        let a = s.a.clone();
        async move {
            ready(move |st: Start| {
                let js = js_context(c.client, st.window, a.timeout);
                let space = kv::KeySpace {
                    keys: a.keys,
                    index: c.index,
                    n: c.n,
                };
                kv::put(
                    js,
                    a.bucket.clone(),
                    space,
                    st.window,
                    st.plan,
                    st.rec,
                    st.ctx,
                )
                .boxed()
            })
        }
        .boxed()
    }
}

/// Key-value gets of random keys, verified.
struct KvGetter;

impl RoleWorker for KvGetter {
    fn sends(&self) -> bool {
        true
    }

    fn open<'a>(&'a self, s: &'a RunShared, c: Conn) -> BoxFuture<'a, anyhow::Result<Ready>> {
        let (a, direct) = (s.a.clone(), s.kv_direct);
        async move {
            ready(move |st: Start| {
                let space = kv::KeySpace {
                    keys: a.keys,
                    index: c.index,
                    n: c.n,
                };
                let (bucket, timeout) = (a.bucket.clone(), a.timeout);
                let (window, plan) = (st.window, st.plan);
                kv::get(
                    c.client, bucket, direct, space, window, timeout, plan, st.rec, st.ctx,
                )
                .boxed()
            })
        }
        .boxed()
    }
}

/// Opens the object store on a client's own connection.
async fn open_objects(s: &RunShared, c: &Conn) -> anyhow::Result<obj::Bucket> {
    Ok(obj::Bucket {
        store: obj::open(&s.a, &js_context(c.client.clone(), 1, s.a.timeout)).await?,
        client: c.client.clone(),
    })
}

/// Object PUTs, named by client index and count.
struct ObjPutter;

impl RoleWorker for ObjPutter {
    fn sends(&self) -> bool {
        true
    }

    fn open<'a>(&'a self, s: &'a RunShared, c: Conn) -> BoxFuture<'a, anyhow::Result<Ready>> {
        async move {
            let store = open_objects(s, &c).await?;
            let catalog = s.catalog.clone();
            ready(move |st: Start| {
                let (window, plan) = (st.window, st.plan);
                obj::put(store, c.index, c.n, catalog, window, plan, st.rec, st.ctx).boxed()
            })
        }
        .boxed()
    }
}

/// Object GETs of random objects from the catalog, verified.
struct ObjGetter;

impl RoleWorker for ObjGetter {
    fn sends(&self) -> bool {
        false
    }

    fn open<'a>(&'a self, s: &'a RunShared, c: Conn) -> BoxFuture<'a, anyhow::Result<Ready>> {
        async move {
            let store = open_objects(s, &c).await?;
            let catalog = s.catalog.clone();
            ready(move |st: Start| {
                obj::get(store, catalog, st.window, st.plan, st.rec, st.ctx).boxed()
            })
        }
        .boxed()
    }
}
