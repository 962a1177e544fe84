//! Every load mode against a real nats-server, with small counts: what was sent arrives,
//! what was stored is there, what is read back is what was written; pacing gives the
//! asked-for rate. The binary's CSV and failures are in `load_cli.rs`.
//!
//! In-process runs use `diskpulse::broker::Broker` (one nats-server per test, fresh ports);
//! CLI runs start the `diskpulse` binary, which starts its own embedded server. Needs
//! `nats-server` on PATH; without it each test says why and returns.

mod common;
use common::*;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream;
use collectors::clock::Clock;
use diskpulse::broker::{Broker, BrokerOptions, SyncMode};
use diskpulse::load::content::{body, digest_of, key_name, kv_seed, obj_seed, object_name};
use diskpulse::load::output::{summarize, RoleSummary};
use diskpulse::load::record::{ClientTotals, Role};
use diskpulse::load::{self, LoadEnv};
use diskpulse::recording::EventLog;
use tokio::io::AsyncReadExt;

/// A nats-server for one test (stopped on drop).
struct Server {
    broker: Broker,
    _dir: tempfile::TempDir,
}

impl Server {
    async fn start() -> Option<Server> {
        if !have_nats_server() {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let events = EventLog::disabled(Clock::start());
        let broker = Broker::start(
            BrokerOptions {
                binary: None,
                store_dir: dir.path().join("js"),
                sync: SyncMode::Every(Duration::from_secs(5)),
                run_dir: dir.path().join("run"),
                name: "n1".into(),
            },
            &events,
        )
        .await
        .unwrap();
        Some(Server { broker, _dir: dir })
    }

    fn url(&self) -> String {
        self.broker.client_url()
    }

    async fn js(&self) -> jetstream::Context {
        jetstream::new(async_nats::connect(self.url()).await.unwrap())
    }
}

/// What one in-process run measured, and its events (client disconnects, errors) for
/// failure messages.
struct Run {
    clients: Vec<ClientTotals>,
    roles: Vec<RoleSummary>,
    events: String,
}

/// A client's counts, for failure messages (its Debug prints whole histograms).
fn brief(c: &ClientTotals) -> String {
    format!(
        "{}[{}]: ops {} errors {:?} first {} ns last {} ns",
        c.role.name(),
        c.index,
        c.ops,
        c.errors_by_kind,
        c.first_ns,
        c.last_ns
    )
}

impl Run {
    fn role(&self, r: Role) -> &RoleSummary {
        self.roles
            .iter()
            .find(|s| s.role == r)
            .unwrap_or_else(|| panic!("no {} role in {:?}", r.name(), self.roles))
    }

    fn clients(&self, r: Role) -> Vec<&ClientTotals> {
        self.clients.iter().filter(|c| c.role == r).collect()
    }
}

/// Runs `diskpulse load ARGS` in-process against `url`.
async fn load(url: &str, args: &[&str]) -> anyhow::Result<Run> {
    let mut v = args.to_vec();
    v.push("--quiet");
    let a = load::args_from(v)?;
    let clock = Clock::start();
    let dir = tempfile::tempdir().unwrap();
    let events_path = dir.path().join("events.jsonl");
    let env = LoadEnv {
        clock,
        events: EventLog::create(&events_path, clock).unwrap(),
        stop: Arc::new(AtomicBool::new(false)),
        servers: vec![url.to_string()],
        load_csv: None,
    };
    let out = load::run(&a, &env).await?;
    Ok(Run {
        roles: summarize(&out.clients, out.started_ns),
        clients: out.clients,
        events: std::fs::read_to_string(&events_path).unwrap_or_default(),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pub_sub_every_subscriber_gets_every_message() {
    let Some(s) = Server::start().await else {
        return;
    };
    let r = load(
        &s.url(),
        &["pub", "--sub", "2", "--msgs", "2000", "--subject", "t.ps"],
    )
    .await
    .unwrap();
    assert_eq!(r.role(Role::Pub).ops, 2000);
    let subs = r.clients(Role::Sub);
    assert_eq!(subs.len(), 2);
    for c in subs {
        assert_eq!((c.ops, c.errors), (2000, 0), "{}\n{}", brief(c), r.events);
        assert_eq!(c.bytes, 2000 * 128);
        assert_eq!(c.lat.len(), 2000, "every message has an e2e latency");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_reply_and_cast() {
    let Some(s) = Server::start().await else {
        return;
    };
    let r = load(&s.url(), &["request", "--reply", "2", "--msgs", "300"])
        .await
        .unwrap();
    let req = r.role(Role::Request);
    assert_eq!((req.ops, req.errors), (300, 0), "{req:?}\n{}", r.events);
    assert_eq!(req.lat_us.unwrap().count, 300);
    assert_eq!(r.role(Role::Reply).ops, 300, "replies == requests");
    assert_eq!(r.clients(Role::Reply).len(), 2);

    let r = load(&s.url(), &["cast", "--reply", "1", "--msgs", "300"])
        .await
        .unwrap();
    assert_eq!(r.role(Role::Pub).ops, 300);
    let rep = r.role(Role::Reply);
    assert_eq!((rep.ops, rep.errors), (300, 0), "{rep:?}\n{}", r.events);

    // A cast's responders read raw in one queue group: each message counted once in
    // all (not once per responder), and both take a share.
    let r = load(&s.url(), &["cast", "--reply", "2", "--msgs", "20000"])
        .await
        .unwrap();
    assert_eq!(r.role(Role::Pub).ops, 20000);
    let rep = r.role(Role::Reply);
    assert_eq!((rep.ops, rep.errors), (20000, 0), "{rep:?}\n{}", r.events);
    let each: Vec<u64> = r.clients(Role::Reply).iter().map(|c| c.ops).collect();
    assert!(each.len() == 2 && each.iter().all(|&n| n > 0), "{each:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reply_serves_a_requester_of_its_own() {
    let Some(s) = Server::start().await else {
        return;
    };
    let url = s.url();
    let served = tokio::spawn(async move {
        load(
            &url,
            &["reply", "--subject", "svc.x", "--msgs", "50", "--size", "7"],
        )
        .await
    });
    let c = async_nats::connect(s.url()).await.unwrap();
    let mut answered = 0;
    let t0 = std::time::Instant::now();
    while answered < 50 {
        match c.request("svc.x", "ping".into()).await {
            Ok(m) => {
                assert_eq!(m.payload.len(), 7, "reply of --size bytes");
                answered += 1;
            }
            // The responder subscribes a moment after the task starts.
            Err(e) if e.kind() == async_nats::RequestErrorKind::NoResponders => {
                assert!(t0.elapsed() < Duration::from_secs(10), "no responder");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("{e}"),
        }
    }
    let r = tokio::time::timeout(Duration::from_secs(5), served)
        .await
        .expect("reply ends at --msgs")
        .unwrap()
        .unwrap();
    assert_eq!(r.role(Role::Reply).ops, 50);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn js_pub_stores_exactly_what_it_sent_and_consumers_get_it() {
    let Some(s) = Server::start().await else {
        return;
    };
    let url = s.url();
    let js = s.js().await;
    let st = ["--stream", "JS1", "--subject", "js.one"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        let mut v = extra.to_vec();
        v.extend_from_slice(&st);
        v
    };
    let r = load(&url, &with(&["js-pub", "--msgs", "3000"]))
        .await
        .unwrap();
    assert_eq!(
        (r.role(Role::JsPub).ops, r.role(Role::JsPub).errors),
        (3000, 0)
    );
    let info = js
        .get_stream("JS1")
        .await
        .unwrap()
        .get_info()
        .await
        .unwrap();
    assert_eq!(
        info.state.messages, 3000,
        "the stream holds exactly what was acked"
    );

    // Pull: two clients split the stream between them; e2e latency on every message.
    let r = load(
        &url,
        &with(&["js-consume", "--clients", "2", "--batch", "50"]),
    )
    .await
    .unwrap();
    let c = r.role(Role::JsConsume);
    assert_eq!((c.ops, c.errors), (3000, 0), "{c:?}");
    assert_eq!(c.lat_us.unwrap().count, 3000);
    assert!(c.lat_us.unwrap().min > 0.0);
    // A second run reads the stream from the start again (fresh durable), up to --msgs.
    let r = load(
        &url,
        &with(&["js-consume", "--clients", "2", "--msgs", "1000"]),
    )
    .await
    .unwrap();
    assert_eq!(r.role(Role::JsConsume).ops, 1000);

    // Ordered: each client gets every message.
    let r = load(&url, &with(&["js-consume", "--clients", "2", "--ordered"]))
        .await
        .unwrap();
    for c in r.clients(Role::JsConsume) {
        assert_eq!((c.ops, c.errors), (3000, 0), "{}", brief(c));
        assert_eq!(c.lat.len(), 3000);
    }

    // Consumers beside the publisher get exactly this run's messages.
    let r = load(
        &url,
        &with(&["js-pub", "--msgs", "2000", "--consume", "1", "--purge"]),
    )
    .await
    .unwrap();
    assert_eq!(r.role(Role::JsPub).ops, 2000);
    let c = r.role(Role::JsConsume);
    assert_eq!((c.ops, c.errors), (2000, 0), "{c:?}");
    assert_eq!(c.lat_us.unwrap().count, 2000);
    let info = js
        .get_stream("JS1")
        .await
        .unwrap()
        .get_info()
        .await
        .unwrap();
    assert_eq!(info.state.messages, 2000);
    // The shared durable is removed at the end (ordered consumers are ephemeral).
    let stream = js.get_stream("JS1").await.unwrap();
    let gone: Result<jetstream::consumer::PullConsumer, _> =
        stream.get_consumer("diskpulse-JS1").await;
    assert!(gone.is_err(), "durable diskpulse-JS1 left behind");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kv_values_read_back_equal_and_corruption_is_a_mismatch() {
    let Some(s) = Server::start().await else {
        return;
    };
    let url = s.url();
    let e = load(&url, &["kv-get", "--bucket", "NOPE"])
        .await
        .err()
        .unwrap();
    assert!(
        format!("{e:#}").contains("KV bucket 'NOPE' not found"),
        "{e:#}"
    );

    let b = ["--bucket", "KV1", "--keys", "200"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        let mut v = extra.to_vec();
        v.extend_from_slice(&b);
        v
    };
    let r = load(&url, &with(&["kv-put", "--msgs", "200", "--size", "100"]))
        .await
        .unwrap();
    let p = r.role(Role::KvPut);
    assert_eq!((p.ops, p.errors, p.bytes), (200, 0, 20_000), "{p:?}");
    assert_eq!(p.lat_us.unwrap().count, 200);

    // Read back through async-nats: every value is the one derived from its key.
    let kv = s.js().await.get_key_value("KV1").await.unwrap();
    for i in [0u64, 7, 199] {
        let v = kv.get(key_name(i)).await.unwrap().expect("key was put");
        assert_eq!(&v[..], &body(kv_seed(i, 100), 100)[..], "{}", key_name(i));
    }

    let r = load(
        &url,
        &with(&[
            "kv-get",
            "--msgs",
            "1000",
            "--clients",
            "2",
            "--window",
            "4",
        ]),
    )
    .await
    .unwrap();
    let g = r.role(Role::KvGet);
    assert_eq!((g.ops, g.errors, g.bytes), (1000, 0, 100_000), "{g:?}");
    assert_eq!(g.lat_us.unwrap().count, 1000);

    // Overwrite the only key read with another value: every get is a mismatch.
    kv.put(key_name(0), "not what diskpulse wrote".into())
        .await
        .unwrap();
    let r = load(
        &url,
        &["kv-get", "--bucket", "KV1", "--keys", "1", "--msgs", "20"],
    )
    .await
    .unwrap();
    let g = r.role(Role::KvGet);
    assert_eq!(g.ops, 0);
    assert_eq!(g.errors_by_kind.get("mismatch"), Some(&20), "{g:?}");
    // A deleted key is not found.
    kv.delete(key_name(0)).await.unwrap();
    let r = load(
        &url,
        &["kv-get", "--bucket", "KV1", "--keys", "1", "--msgs", "5"],
    )
    .await
    .unwrap();
    assert_eq!(
        r.role(Role::KvGet).errors_by_kind.get("not_found"),
        Some(&5)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_read_back_match_their_digests() {
    let Some(s) = Server::start().await else {
        return;
    };
    let url = s.url();
    let r = load(
        &url,
        &[
            "obj-put",
            "--bucket",
            "OB1",
            "--objects",
            "40",
            "--object-size",
            "8k",
            "--workers",
            "2",
            "--consumers",
            "2",
        ],
    )
    .await
    .unwrap();
    let p = r.role(Role::ObjPut);
    assert_eq!((p.ops, p.errors, p.bytes), (40, 0, 40 * 8192), "{p:?}");
    assert_eq!(p.clients, 2);
    let g = r.role(Role::ObjGet);
    assert_eq!((g.ops, g.errors, g.clients), (40, 0, 2), "{g:?}");
    assert_eq!(g.lat_us.unwrap().count, 40);

    // Through async-nats: the digest in the info is the SHA-256 of the body derived from
    // the name, and that is what comes back.
    let js = s.js().await;
    let store = js.get_object_store("OB1").await.unwrap();
    for i in [0u64, 39] {
        let mut o = store.get(object_name(i)).await.unwrap();
        let mut data = vec![];
        o.read_to_end(&mut data).await.unwrap();
        let want = body(obj_seed(i, 8192), 8192);
        assert_eq!(data, want);
        assert_eq!(o.info.digest.as_deref(), Some(digest_of(&want).as_str()));
    }

    let r = load(
        &url,
        &[
            "obj-get",
            "--bucket",
            "OB1",
            "--consumers",
            "2",
            "--objects",
            "20",
        ],
    )
    .await
    .unwrap();
    let g = r.role(Role::ObjGet);
    assert_eq!((g.ops, g.errors, g.bytes), (20, 0, 20 * 8192), "{g:?}");

    // An object replaced by other bytes (with a digest that matches them) is caught.
    load(
        &url,
        &[
            "obj-put",
            "--bucket",
            "OB2",
            "--objects",
            "1",
            "--object-size",
            "1k",
        ],
    )
    .await
    .unwrap();
    let store = js.get_object_store("OB2").await.unwrap();
    store
        .put(object_name(0).as_str(), &mut &vec![b'z'; 1024][..])
        .await
        .unwrap();
    let r = load(&url, &["obj-get", "--bucket", "OB2", "--objects", "5"])
        .await
        .unwrap();
    let g = r.role(Role::ObjGet);
    assert_eq!(g.ops, 0);
    assert_eq!(g.errors_by_kind.get("digest_mismatch"), Some(&5), "{g:?}");
}

fn assert_about(ops: u64, want: u64, what: &str) {
    let lo = want - want / 20;
    let hi = want + want / 20;
    assert!(
        (lo..=hi).contains(&ops),
        "{what}: {ops} ops, want {want} +/- 5%"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_2000_for_2s_is_4000_js_publishes() {
    let Some(s) = Server::start().await else {
        return;
    };
    let r = load(
        &s.url(),
        &[
            "js-pub",
            "--rate",
            "2000",
            "--duration",
            "2s",
            "--stream",
            "R",
            "--subject",
            "r.x",
        ],
    )
    .await
    .unwrap();
    let p = r.role(Role::JsPub);
    assert_eq!(p.errors, 0, "{:?}\n{}", p.errors_by_kind, r.events);
    assert_about(p.ops, 4000, "js-pub");
    assert!(p.co_lat_us.unwrap().p50 >= p.lat_us.unwrap().p50);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_2000_for_2s_is_4000_requests() {
    let Some(s) = Server::start().await else {
        return;
    };
    let r = load(
        &s.url(),
        &[
            "request",
            "--reply",
            "1",
            "--rate",
            "2000",
            "--duration",
            "2s",
            "--window",
            "16",
        ],
    )
    .await
    .unwrap();
    let q = r.role(Role::Request);
    assert_eq!(q.errors, 0, "{:?}\n{}", q.errors_by_kind, r.events);
    assert_about(q.ops, 4000, "request");
    assert_eq!(r.role(Role::Reply).ops, q.ops);
}
