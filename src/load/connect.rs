//! Connections: servers, round-robin spreading of clients over them ("load balancing"),
//! and authentication. Secrets are held here only; nothing that prints or records an
//! option shows them (`describe()` redacts, argv is redacted in meta.json).

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::recording::EventLog;
use crate::usage;

#[derive(Args, Debug, Clone, Default)]
pub struct ConnectArgs {
    /// NATS server URL; repeatable; clients are spread round-robin over them. Default:
    /// $NATS_URL (comma-separated), else an embedded nats-server started for the run.
    #[arg(long = "server", value_name = "URL")]
    pub servers: Vec<String>,
    /// User name (with --password).
    #[arg(long)]
    pub user: Option<String>,
    /// Password (never printed or recorded).
    #[arg(long)]
    pub password: Option<String>,
    /// Token (never printed or recorded).
    #[arg(long)]
    pub token: Option<String>,
    /// Credentials file (JWT + seed).
    #[arg(long, value_name = "FILE")]
    pub creds: Option<PathBuf>,
    /// NKey seed file.
    #[arg(long, value_name = "FILE")]
    pub nkey: Option<PathBuf>,
    /// CA certificate (PEM) to verify the server.
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// Client certificate (PEM), with --tls-key.
    #[arg(long, value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// Client key (PEM), with --tls-cert.
    #[arg(long, value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
}

impl ConnectArgs {
    /// The servers to use: --server, else $NATS_URL; empty means "start one".
    pub fn server_list(&self) -> Vec<String> {
        if !self.servers.is_empty() {
            return self.servers.clone();
        }
        std::env::var("NATS_URL")
            .ok()
            .map(|v| {
                v.split(',')
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Checks combinations before anything starts.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.password.is_some() != self.user.is_some() {
            return Err(usage!("--user and --password go together"));
        }
        if self.tls_cert.is_some() != self.tls_key.is_some() {
            return Err(usage!("--tls-cert and --tls-key go together"));
        }
        for (flag, p) in [
            ("--creds", &self.creds),
            ("--nkey", &self.nkey),
            ("--tls-ca", &self.tls_ca),
            ("--tls-cert", &self.tls_cert),
            ("--tls-key", &self.tls_key),
        ] {
            if let Some(p) = p {
                if !p.is_file() {
                    return Err(usage!("{flag} {}: no such file", p.display()));
                }
            }
        }
        Ok(())
    }

    /// No credentials and no TLS: a plain connection the raw publisher can make.
    pub fn is_plain(&self) -> bool {
        self.user.is_none()
            && self.token.is_none()
            && self.creds.is_none()
            && self.nkey.is_none()
            && self.tls_ca.is_none()
            && self.tls_cert.is_none()
    }

    /// Which kind of auth is used, without the secret (for meta.json and output).
    pub fn describe(&self) -> serde_json::Value {
        serde_json::json!({
            "user": self.user,
            "password": self.password.as_ref().map(|_| "***"),
            "token": self.token.as_ref().map(|_| "***"),
            "creds": self.creds,
            "nkey": self.nkey,
            "tls_ca": self.tls_ca, "tls_cert": self.tls_cert, "tls_key": self.tls_key,
        })
    }

    /// Connects client `name` to `url`.
    pub async fn connect(
        &self,
        url: &str,
        name: &str,
        capacity: usize,
        events: &EventLog,
    ) -> anyhow::Result<async_nats::Client> {
        let mut o = async_nats::ConnectOptions::new()
            .name(name)
            .client_capacity(capacity)
            .connection_timeout(Duration::from_secs(5))
            // Subjects are checked once when the run starts (LoadArgs::validate), not on
            // every publish.
            .skip_subject_validation(true)
            // Riding through a fault (issue 9): try again every 250 ms at most, so the
            // load resumes within a quarter second of a server answering (async-nats's
            // default backoff grows to seconds: a broker back at 4 s was reached at 6 s).
            .reconnect_delay_callback(|attempts| {
                Duration::from_millis((50 * attempts as u64).min(RECONNECT_MAX_MS))
            })
            // A benchmark client must not silently reconnect forever to a dead server:
            // it gives up after about a minute.
            .max_reconnects(Some(240));
        if let (Some(u), Some(p)) = (&self.user, &self.password) {
            o = o.user_and_password(u.clone(), p.clone());
        }
        if let Some(t) = &self.token {
            o = o.token(t.clone());
        }
        if let Some(c) = &self.creds {
            o = o
                .credentials_file(c)
                .await
                .map_err(|e| usage!("--creds {}: {e}", c.display()))?;
        }
        if let Some(n) = &self.nkey {
            let seed =
                std::fs::read_to_string(n).map_err(|e| usage!("--nkey {}: {e}", n.display()))?;
            o = o.nkey(seed.trim().to_string());
        }
        if let Some(ca) = &self.tls_ca {
            o = o.add_root_certificates(ca.clone()).require_tls(true);
        }
        if let (Some(c), Some(k)) = (&self.tls_cert, &self.tls_key) {
            o = o
                .add_client_certificate(c.clone(), k.clone())
                .require_tls(true);
        }
        let ev = events.clone();
        let nm = name.to_string();
        o = o.event_callback(move |e| {
            let ev = ev.clone();
            let nm = nm.clone();
            async move {
                ev.event(
                    "nats_client",
                    serde_json::json!({"client": nm, "event": e.to_string()}),
                );
            }
        });
        let shown = redact_url(url);
        o.connect(url).await.map_err(|e| {
            let msg = e.to_string();
            if msg.contains("authorization") || msg.contains("Authorization") {
                anyhow::anyhow!("cannot connect to {shown}: authorization failed ({msg}); check --user/--password, --token, --creds or --nkey")
            } else {
                anyhow::anyhow!("cannot connect to NATS at {shown}: {msg}")
            }
        })
    }
}

/// The longest wait between two reconnect attempts, ms.
const RECONNECT_MAX_MS: u64 = 250;

/// Waits until the server has processed everything this client sent before.
///
/// `Client::flush` only writes the client's buffer to the socket; it does not wait for
/// the server. A publisher that closes its connection right after `flush` can lose the
/// messages the server had not read yet, and a subscriber that starts senders after
/// `flush` can miss the first messages, or make the first request fail with "no
/// responders", because the server has not yet processed the SUB. A request to a subject
/// nobody serves comes back as "no responders" only after the server processed every
/// earlier operation of this connection (it handles a connection's protocol in order): a
/// round trip, like the PING/PONG of the Go client's `Flush`.
pub async fn round_trip(client: &async_nats::Client) -> anyhow::Result<()> {
    let subject = format!("_DISKPULSE.RTT.{}", std::process::id());
    let r = tokio::time::timeout(
        Duration::from_secs(10),
        client.request(subject, bytes::Bytes::new()),
    )
    .await
    .map_err(|_| anyhow::anyhow!("the server did not answer a round trip within 10 s"))?;
    match r {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == async_nats::RequestErrorKind::NoResponders => Ok(()),
        Err(e) => Err(anyhow::anyhow!("round trip to the server failed: {e}")),
    }
}

/// `nats://user:pass@host:4222` -> `nats://***@host:4222`.
pub fn redact_url(url: &str) -> String {
    if let Some(i) = url.find("://") {
        if let Some(at) = url[i + 3..].find('@') {
            return format!("{}***@{}", &url[..i + 3], &url[i + 3 + at + 1..]);
        }
    }
    url.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lose_their_secrets() {
        assert_eq!(redact_url("nats://a:b@h:4222"), "nats://***@h:4222");
        assert_eq!(redact_url("nats://h:4222"), "nats://h:4222");
    }

    #[test]
    fn describe_hides_secrets() {
        let a = ConnectArgs {
            user: Some("u".into()),
            password: Some("hunter2".into()),
            token: Some("tok".into()),
            ..Default::default()
        };
        let s = a.describe().to_string();
        assert!(!s.contains("hunter2") && !s.contains("tok\""), "{s}");
    }
}
