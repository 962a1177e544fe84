//! TLS against real brokers, with a CA, the servers' certificates (naming 127.0.0.1) and
//! clients' made with openssl for each test; both servers require a client certificate.
//!
//! RabbitMQ (`amqps://`, a node with a TLS listener): what is published with confirms
//! over TLS is consumed exactly once over TLS; without `--tls-ca` the broker's
//! certificate is refused, without a client certificate the broker refuses the client, a
//! certificate from another CA is refused; `--tls-*` with a plain `amqp://` URL and
//! `--inject-latency` with `amqps://` are usage errors (exit 2). The node and its epmd
//! are gone afterwards.
//!
//! NATS (`tls://`, nats-server `--tlsverify`): core publishes and JetStream publishes go
//! through with `--tls-ca/--tls-cert/--tls-key`; without the client certificate the
//! server refuses the client.

mod common;
use common::*;

use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use collectors::clock::Clock;
use diskpulse::broker::{BrokerProcess, RabbitNode, RabbitOptions, RabbitTls};
use diskpulse::load::record::{ClientTotals, Role};
use diskpulse::load::{self, LoadEnv};
use diskpulse::recording::EventLog;

fn openssl(dir: &Path, args: &[&str]) {
    let o = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl (apt-get install openssl; scripts/setup does)");
    assert!(
        o.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `NAME.key` and `NAME.pem` signed by `ca` (`ca.key`/`ca.pem` in `dir`), with `ext`
/// (an openssl extension line) for the server's names.
fn signed(dir: &Path, ca: &str, name: &str, ext: &str) {
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.csr"),
            "-subj",
            &format!("/CN={name}"),
        ],
    );
    std::fs::write(dir.join(format!("{name}.ext")), ext).unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            &format!("{ca}.pem"),
            "-CAkey",
            &format!("{ca}.key"),
            "-CAcreateserial",
            "-days",
            "2",
            "-out",
            &format!("{name}.pem"),
            "-extfile",
            &format!("{name}.ext"),
        ],
    );
}

fn ca(dir: &Path, name: &str) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.pem"),
            "-days",
            "2",
            "-subj",
            &format!("/CN={name}"),
        ],
    );
}

/// The CA, the node's certificate, a client's, and a client's from a stranger CA.
fn certificates(dir: &Path) {
    ca(dir, "ca");
    ca(dir, "stranger");
    signed(
        dir,
        "ca",
        "server",
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
    );
    signed(dir, "ca", "client", "extendedKeyUsage=clientAuth\n");
    signed(dir, "stranger", "intruder", "extendedKeyUsage=clientAuth\n");
}

async fn run(url: &str, argv: &[&str]) -> anyhow::Result<Vec<ClientTotals>> {
    let a = load::args_from(argv.iter().copied()).unwrap();
    a.validate().unwrap();
    let env = LoadEnv {
        clock: Clock::start(),
        events: EventLog::disabled(Clock::start()),
        stop: Arc::new(AtomicBool::new(false)),
        servers: vec![url.to_string()],
        load_csv: None,
    };
    Ok(load::run(&a, &env).await?.clients)
}

fn refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

fn ops(clients: &[ClientTotals], role: Role) -> u64 {
    clients
        .iter()
        .filter(|c| c.role == role)
        .map(|c| c.ops)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amqps_with_a_client_certificate_publishes_and_consumes_exactly_once() {
    if !have_rabbitmq() || !have_tool("openssl", "openssl") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    certificates(d);
    let mut o = RabbitOptions::new(d.join("store"), d.join("run"));
    o.name = "tls".into();
    o.tls = Some(RabbitTls {
        ca: d.join("ca.pem"),
        cert: d.join("server.pem"),
        key: d.join("server.key"),
        require_client_cert: true,
    });
    let mut node = RabbitNode::start(o, &EventLog::disabled(Clock::start()))
        .await
        .unwrap();
    let (pid, epmd) = (node.pid(), node.epmd_pid());
    let url = node.amqps_url().unwrap();
    let p = |f: &str| d.join(f).display().to_string();
    let (ca_pem, client_pem, client_key) = (p("ca.pem"), p("client.pem"), p("client.key"));
    let tls = [
        "--tls-ca",
        ca_pem.as_str(),
        "--tls-cert",
        client_pem.as_str(),
        "--tls-key",
        client_key.as_str(),
    ];
    let with = |argv: &[&'static str], tls: &[&str]| -> Vec<String> {
        argv.iter()
            .map(|s| s.to_string())
            .chain(tls.iter().map(|s| s.to_string()))
            .collect()
    };
    let pub_argv = with(
        &[
            "amqp-pub",
            "--msgs",
            "2000",
            "--clients",
            "2",
            "--queue-type",
            "quorum",
            "--queue",
            "tq",
            "--quiet",
        ],
        &tls,
    );
    let published = run(&url, &refs(&pub_argv)).await.unwrap();
    assert_eq!(
        ops(&published, Role::AmqpPub),
        2000,
        "every publish confirmed"
    );
    let consume_argv = with(
        &[
            "amqp-consume",
            "--clients",
            "2",
            "--queue-type",
            "quorum",
            "--queue",
            "tq",
            "--quiet",
        ],
        &tls,
    );
    let consumed = run(&url, &refs(&consume_argv)).await.unwrap();
    assert_eq!(
        ops(&consumed, Role::AmqpConsume),
        2000,
        "consumed once each"
    );
    let dup: u64 = consumed
        .iter()
        .map(|c| c.errors_by_kind.get("duplicate").copied().unwrap_or(0))
        .sum();
    assert_eq!(dup, 0);

    // What is refused, and how it says so (the CLI, against the same listener).
    let refused = |extra: &[&str]| {
        let o = diskpulse()
            .args([
                "load",
                "amqp-pub",
                "--msgs",
                "5",
                "--queue",
                "tq",
                "--queue-type",
            ])
            .args(["quorum", "--server", &url])
            .args(extra)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        eprintln!("{extra:?}: exit {:?}: {}", o.status.code(), err.trim());
        (o.status.code(), err)
    };
    // No --tls-ca: the system's roots do not know our CA.
    let (code, err) = refused(&["--tls-cert", &client_pem, "--tls-key", &client_key]);
    assert_ne!(code, Some(0), "{err}");
    assert!(
        err.contains("UnknownIssuer") && err.contains("--tls-ca name the CA"),
        "{err}"
    );
    // No client certificate: the node requires one (it resets the connection).
    let (code, err) = refused(&["--tls-ca", &ca_pem]);
    assert_ne!(code, Some(0), "{err}");
    assert!(
        err.contains("cannot connect to the AMQP broker")
            && err.contains("--tls-cert and --tls-key"),
        "{err}"
    );
    // A client certificate from another CA.
    let (code, err) = refused(&[
        "--tls-ca",
        &ca_pem,
        "--tls-cert",
        &p("intruder.pem"),
        "--tls-key",
        &p("intruder.key"),
    ]);
    // (TLS 1.3: the client has sent its certificate when the node refuses it, so what it
    // reads is the node's alert, UnknownCA, or the connection reset after it.)
    assert_ne!(code, Some(0), "{err}");
    assert!(err.contains("cannot connect to the AMQP broker"), "{err}");
    // --tls-ca with a plain URL, and --inject-latency with TLS: usage errors.
    let plain = node.amqp_url();
    let o = diskpulse()
        .args([
            "load", "amqp-pub", "--msgs", "5", "--server", &plain, "--tls-ca", &ca_pem,
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("amqps://") && err.contains("--server"),
        "{err}"
    );
    let (code, err) = refused(&["--tls-ca", &ca_pem, "--inject-latency", "10ms"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--inject-latency with TLS"), "{err}");

    node.stop().await.unwrap();
    assert!(
        !process_exists(pid) && !process_exists(epmd),
        "node or epmd left"
    );
}

/// The `--json` document's clients' ops summed, for one role (`None`: all).
fn json_ops(out: &str, role: Option<&str>) -> u64 {
    let j: serde_json::Value = serde_json::Deserializer::from_str(out)
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("no JSON in {out}"))
        .unwrap();
    j["clients"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| role.is_none_or(|r| c["role"] == r))
        .map(|c| c["ops"].as_u64().unwrap())
        .sum()
}

#[test]
fn nats_over_tls_with_a_client_certificate_publishes_and_is_refused_without_one() {
    if !have_nats_server() || !have_tool("openssl", "openssl") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    certificates(d);
    let p = |f: &str| d.join(f).display().to_string();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut server = Command::new("nats-server")
        .args(["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-sd"])
        .arg(d.join("js"))
        .args(["--tls", "--tlsverify", "--tlscert", &p("server.pem")])
        .args(["--tlskey", &p("server.key"), "--tlscacert", &p("ca.pem")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    struct Kill<'a>(&'a mut std::process::Child);
    impl Drop for Kill<'_> {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _kill = Kill(&mut server);
    let t0 = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "nats-server never listened"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let url = format!("tls://127.0.0.1:{port}");
    let load = |args: &[&str], tls: &[String]| {
        let o = diskpulse()
            .arg("load")
            .args(args)
            .args(["--server", &url, "--json", "--quiet"])
            .args(tls)
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let tls: Vec<String> = [
        "--tls-ca",
        &p("ca.pem"),
        "--tls-cert",
        &p("client.pem"),
        "--tls-key",
        &p("client.key"),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (code, out, err) = load(&["pub", "--msgs", "3000", "--sub", "1"], &tls);
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert_eq!(json_ops(&out, Some("pub")), 3000, "{out}");
    assert_eq!(
        json_ops(&out, Some("sub")),
        3000,
        "every message received: {out}"
    );
    let (code, out, err) = load(&["js-pub", "--msgs", "1000", "--stream", "tls"], &tls);
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert_eq!(
        json_ops(&out, Some("js-pub")),
        1000,
        "every publish acked: {out}"
    );
    // Without the client certificate: refused by the server.
    let (code, out, err) = load(&["pub", "--msgs", "10"], &tls[..2]);
    eprintln!(
        "without a client certificate: exit {code:?}: {}",
        err.trim()
    );
    assert_ne!(code, Some(0), "{out}\n{err}");
    assert!(err.contains(&url), "the error names the server: {err}");
    assert_eq!(out.matches("\"ops\"").count(), 0, "{out}");
}
