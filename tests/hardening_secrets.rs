//! Issue 10 point 2: secrets never reach stdout, stderr or any file of a run directory
//! (gzip files read through), whichever way they are given: `user:password@` or `token@`
//! in the URL, `--user/--password`, `--token` (both `--flag VALUE` and `--flag=VALUE`), a
//! creds file's contents. Credentials in the URL authenticate against a real nats-server
//! that requires them; a wrong password fails with one line naming the server (redacted);
//! a bad server URL is a usage error (exit 2) before anything is written.
//!
//! Each test starts its own nats-server with auth on a fresh loopback port (stopped on
//! drop) and drives the real binary. Needs `nats-server` on PATH (skips otherwise, and
//! fails under CI=true).

mod common;
use common::*;

use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const SECRET: &str = "Zq7SECRETpw93";

/// A nats-server that requires a user/password or a token (killed and reaped on drop).
struct AuthServer {
    child: Child,
    port: u16,
}

impl AuthServer {
    /// `auth`: `["--user", "alice", "--pass", SECRET]` or `["--auth", SECRET]`.
    fn start(auth: &[&str]) -> Option<AuthServer> {
        if !have_nats_server() {
            return None;
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("nats-server")
            .args(["-a", "127.0.0.1", "-p", &port.to_string(), "-js"])
            .arg("-sd")
            .arg(std::env::temp_dir().join(format!("diskpulse-secrets-js-{port}")))
            .args(auth)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let s = AuthServer { child, port };
        let t0 = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "nats-server never listened"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(s)
    }

    fn host_port(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for AuthServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(
            std::env::temp_dir().join(format!("diskpulse-secrets-js-{}", self.port)),
        );
    }
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).to_string(),
        String::from_utf8_lossy(&o.stderr).to_string(),
    )
}

/// `load pub ... --json --record --out DIR`: runs, every client sent, and the secret is
/// in none of stdout, stderr, DIR; meta.json's argv shows the redaction took place.
fn load_keeps_the_secret(auth_args: &[String]) {
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    let run = d.path().join("run");
    let o = diskpulse()
        .args([
            "load", "pub", "--msgs", "300", "--json", "--quiet", "--record",
        ])
        .args(auth_args)
        .arg("--out")
        .arg(&run)
        .arg("--path")
        .arg(d.path())
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{auth_args:?}\n{out}\n{err}");
    // The --json document, then the report's lines.
    let j: serde_json::Value = serde_json::Deserializer::from_str(&out)
        .into_iter()
        .next()
        .unwrap()
        .unwrap();
    let ops: u64 = j["clients"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["ops"].as_u64().unwrap())
        .sum();
    assert_eq!(ops, 300, "the load did not run: {out}");
    assert!(!out.contains(SECRET), "stdout shows the secret:\n{out}");
    assert!(!err.contains(SECRET), "stderr shows the secret:\n{err}");
    let hits = files_containing(&run, SECRET, false, 1);
    assert!(hits.is_empty(), "the secret is in {hits:?}");
    let meta = read_json(&run.join("meta.json"));
    let argv = meta["argv"].to_string();
    assert!(argv.contains("***"), "meta.json argv: {argv}");
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

#[test]
fn a_password_in_the_url_authenticates_and_appears_nowhere() {
    let Some(srv) = AuthServer::start(&["--user", "alice", "--pass", SECRET]) else {
        return;
    };
    let url = format!("nats://alice:{SECRET}@{}", srv.host_port());
    load_keeps_the_secret(&s(&["--server", &url]));
    load_keeps_the_secret(&[format!("--server={url}")]);
}

#[test]
fn user_and_password_flags_appear_nowhere_in_either_spelling() {
    let Some(srv) = AuthServer::start(&["--user", "alice", "--pass", SECRET]) else {
        return;
    };
    let url = format!("nats://{}", srv.host_port());
    load_keeps_the_secret(&s(&[
        "--server",
        &url,
        "--user",
        "alice",
        "--password",
        SECRET,
    ]));
    load_keeps_the_secret(&s(&[
        "--server",
        &url,
        "--user",
        "alice",
        &format!("--password={SECRET}"),
    ]));
}

#[test]
fn a_token_in_the_url_or_in_token_authenticates_and_appears_nowhere() {
    let Some(srv) = AuthServer::start(&["--auth", SECRET]) else {
        return;
    };
    let hp = srv.host_port();
    load_keeps_the_secret(&s(&["--server", &format!("nats://{SECRET}@{hp}")]));
    load_keeps_the_secret(&s(&[
        "--server",
        &format!("nats://{hp}"),
        "--token",
        SECRET,
    ]));
}

#[test]
fn a_wrong_password_fails_in_one_line_naming_the_server_without_the_password() {
    let Some(srv) = AuthServer::start(&["--user", "alice", "--pass", SECRET]) else {
        return;
    };
    let wrong = "WRONGpw4411";
    let o = diskpulse()
        .args(["load", "pub", "--msgs", "10", "--quiet", "--server"])
        .arg(format!("nats://alice:{wrong}@{}", srv.host_port()))
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert!(matches!(o.status.code(), Some(1) | Some(2)), "{out}\n{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("authorization failed"), "{err}");
    assert!(
        err.contains(&format!("nats://***@{}", srv.host_port())),
        "{err}"
    );
    assert!(!err.contains(wrong) && !out.contains(wrong), "{out}\n{err}");
}

#[test]
fn a_creds_file_s_contents_appear_nowhere() {
    let Some(srv) = AuthServer::start(&["--user", "alice", "--pass", SECRET]) else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let creds = d.path().join("me.creds");
    std::fs::write(
        &creds,
        format!(
            "-----BEGIN NATS USER JWT-----\n{SECRET}jwt\n------END NATS USER JWT------\n\n\
             -----BEGIN USER NKEY SEED-----\nSU{SECRET}seed\n------END USER NKEY SEED------\n"
        ),
    )
    .unwrap();
    let o = diskpulse()
        .args(["load", "pub", "--msgs", "10", "--quiet", "--server"])
        .arg(format!("nats://{}", srv.host_port()))
        .arg("--creds")
        .arg(&creds)
        .output()
        .unwrap();
    let (out, err) = text(&o);
    // The server wants a password, so this fails; what it says must not quote the file.
    assert_ne!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(!err.is_empty(), "a failure says why");
    assert!(
        !out.contains(SECRET) && !err.contains(SECRET),
        "{out}\n{err}"
    );
}

#[test]
fn bad_server_urls_are_usage_errors_naming_the_url_redacted_and_writing_nothing() {
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    for (url, why) in [
        ("http://127.0.0.1:4222", "scheme 'http'"),
        ("nats://127.0.0.1:99999", "port '99999'"),
        ("nats://127.0.0.1:0", "port '0'"),
        ("nats://:4222", "no host"),
        ("nats://127.0.0.1:4222/path", "no path"),
        ("", "empty"),
    ] {
        // With a secret in it too: the message names the URL without it.
        let with_secret = url.replacen("://", &format!("://alice:{SECRET}@"), 1);
        for u in [url.to_string(), with_secret] {
            let run = d.path().join("run");
            let o = diskpulse()
                .args(["load", "pub", "--msgs", "10", "--record", "--path"])
                .arg(d.path())
                .arg("--out")
                .arg(&run)
                .arg("--server")
                .arg(&u)
                .output()
                .unwrap();
            let (out, err) = text(&o);
            assert_eq!(o.status.code(), Some(2), "{u}: {out}\n{err}");
            assert_eq!(err.trim().lines().count(), 1, "{u}: {err}");
            assert!(err.contains(why), "{u}: {err}");
            assert!(err.contains("expected nats://"), "{u}: {err}");
            assert!(
                err.contains(&format!("'{}'", diskpulse::redact::text(&u))),
                "{u}: {err}"
            );
            assert!(!err.contains(SECRET), "{u}: {err}");
            assert!(!run.exists(), "{u}: {} was written", run.display());
        }
    }
}

#[test]
fn url_credentials_and_credential_flags_together_are_refused() {
    let o = diskpulse()
        .args(["load", "pub", "--msgs", "10", "--server"])
        .arg(format!("nats://alice:{SECRET}@127.0.0.1:4222"))
        .args(["--token", "other"])
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}\n{err}");
    assert!(err.contains("give them once"), "{err}");
    assert!(!err.contains(SECRET), "{err}");
}

/// A scenario whose load phases carry the secret in the URL and in `--password`: the
/// study directory (scenario.toml copy, study.json, each run's meta.json and
/// events.jsonl, reports), stdout and stderr never show it; `--dry-run` neither.
#[test]
fn a_scenario_s_study_dir_and_dry_run_keep_the_secret() {
    let Some(srv) = AuthServer::start(&["--user", "alice", "--pass", SECRET]) else {
        return;
    };
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    let hp = srv.host_port();
    let sc = d.path().join("sec.toml");
    std::fs::write(
        &sc,
        format!(
            r#"name = "secrets"
[[volumes]]
name = "v"
path = "{vol}"
[[phases]]
name = "in-url"
kind = "load"
args = ["pub", "--msgs", "200", "--server", "nats://alice:{SECRET}@{hp}"]
[[phases]]
name = "in-flags"
kind = "load"
args = ["pub", "--msgs", "200", "--server", "nats://{hp}", "--user", "alice", "--password", "{SECRET}"]
"#,
            vol = d.path().display()
        ),
    )
    .unwrap();
    let dry = diskpulse()
        .args(["run", "--dry-run"])
        .arg(&sc)
        .output()
        .unwrap();
    let (out, err) = text(&dry);
    assert_eq!(dry.status.code(), Some(0), "{out}\n{err}");
    assert!(
        out.contains("nats://***@"),
        "the plan shows the phases: {out}"
    );
    assert!(
        !out.contains(SECRET) && !err.contains(SECRET),
        "{out}\n{err}"
    );

    let study = d.path().join("study");
    let o = diskpulse()
        .args(["run"])
        .arg(&sc)
        .arg("--out")
        .arg(&study)
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(
        !out.contains(SECRET) && !err.contains(SECRET),
        "{out}\n{err}"
    );
    let hits = files_containing(&study, SECRET, false, 1);
    assert!(hits.is_empty(), "the secret is in {hits:?}");
    // The phases ran (authenticated: 200 messages each) and their args are there, redacted.
    let meta = read_json(&study.join("cells/base/r1/meta.json"));
    let phases = meta["phases"].as_array().unwrap();
    assert_eq!(phases.len(), 2, "{phases:?}");
    for p in phases {
        let ops: u64 = p["result"]["clients"]
            .as_array()
            .unwrap_or_else(|| panic!("no load result: {p}"))
            .iter()
            .map(|c| c["ops"].as_u64().unwrap())
            .sum();
        assert_eq!(ops, 200, "{p}");
    }
    let args = format!("{} {}", phases[0]["args"], phases[1]["args"]);
    assert!(
        args.contains("nats://***@") && args.contains("\"--password\",\"***\""),
        "{args}"
    );
    let toml = std::fs::read_to_string(study.join("scenario.toml")).unwrap();
    assert!(toml.contains("\"--password\", \"***\""), "{toml}");
}
