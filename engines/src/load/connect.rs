//! Connections: servers, round-robin spreading of clients over them ("load balancing"),
//! and authentication. Secrets are held here only; nothing that prints or records an
//! option shows them (`describe()` redacts, everything else goes through
//! [`format::redact`]).
//!
//! Server URLs are checked before anything starts ([`parse_server`]): `nats://` or
//! `tls://` (or a bare `host:port`), a host, a port 1-65535, no path. Credentials in the
//! URL (`nats://user:password@host:port`, `nats://token@host:port`) are used like
//! `--user/--password` and `--token` (async-nats 0.51 ignores a URL's user info, so they
//! are taken out here and the client connects to the URL without them).

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::recording::EventLog;
use format::usage;

#[derive(Args, Debug, Clone, Default)]
pub struct ConnectArgs {
    /// NATS server URL; repeatable or comma-separated (`--server a,b`); clients are
    /// spread round-robin over them. Default: $NATS_URL (comma-separated), else an
    /// embedded nats-server started for the run.
    #[arg(long = "server", value_name = "URL", value_delimiter = ',')]
    pub servers: Vec<String>,
    /// User name (with --password).
    #[arg(long, env = "NATS_USER", hide_env_values = true)]
    pub user: Option<String>,
    /// Password (never printed or recorded).
    #[arg(long, env = "NATS_PASSWORD", hide_env_values = true)]
    pub password: Option<String>,
    /// Token (never printed or recorded).
    #[arg(long)]
    pub token: Option<String>,
    /// Credentials file (JWT + seed).
    #[arg(long, value_name = "FILE", env = "NATS_CREDS", hide_env_values = true)]
    pub creds: Option<PathBuf>,
    /// NKey seed file.
    #[arg(long, value_name = "FILE", env = "NATS_NKEY", hide_env_values = true)]
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
    /// Connect only to the URL given, never to servers the cluster announces (a client
    /// behind a latency proxy must not reconnect around it).
    #[arg(skip)]
    pub ignore_discovered: bool,
}

impl ConnectArgs {
    /// The servers to use: --server, else $NATS_URL; empty means "start one".
    pub fn server_list(&self) -> Vec<String> {
        if !self.servers.is_empty() {
            // `--server a,b` is split by clap; an empty entry (`--server a,`) stays, to be
            // refused by `validate` as an empty URL.
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

    /// Checks combinations and server URLs before anything starts.
    pub fn validate(&self) -> anyhow::Result<()> {
        let from = if self.servers.is_empty() {
            "$NATS_URL"
        } else {
            "--server"
        };
        for u in self.server_list() {
            let p = parse_server(&u).map_err(|why| {
                usage!(
                    "{from} '{}': {why}; expected {SERVER_URL_FORM}",
                    redact_url(&u)
                )
            })?;
            let flags = self.user.is_some()
                || self.token.is_some()
                || self.creds.is_some()
                || self.nkey.is_some();
            if p.auth.is_some() && flags {
                return Err(usage!(
                    "{from} '{}' carries credentials and so do --user/--token/--creds/--nkey (or $NATS_USER, $NATS_CREDS, $NATS_NKEY); give them once",
                    redact_url(&u)
                ));
            }
        }
        if self.user.as_deref() == Some("") {
            return Err(usage!(
                "--user '': an empty user name authenticates nothing; pass the user the server knows, or leave --user and --password out"
            ));
        }
        if self.token.as_deref() == Some("") {
            return Err(usage!(
                "--token '': an empty token authenticates nothing; pass the server's token, or leave --token out"
            ));
        }
        if self.password.is_some() != self.user.is_some() {
            return Err(usage!(
                "--user and --password go together (also as $NATS_USER and $NATS_PASSWORD); give both, or neither"
            ));
        }
        for (flag, p) in [
            ("--creds ($NATS_CREDS)", &self.creds),
            ("--nkey ($NATS_NKEY)", &self.nkey),
        ] {
            if let Some(p) = p {
                check_input_file(flag, p)?;
            }
        }
        // Read only once it is known to be a regular file (a FIFO or /dev/zero hung).
        if let Some(n) = &self.nkey {
            read_nkey_seed(n)?;
        }
        self.check_tls_files()
    }

    /// `--tls-cert` with `--tls-key`, and each `--tls-*` file there (NATS and AMQP).
    pub(crate) fn check_tls_files(&self) -> anyhow::Result<()> {
        if self.tls_cert.is_some() != self.tls_key.is_some() {
            return Err(usage!("--tls-cert and --tls-key go together"));
        }
        for (flag, p) in [
            ("--tls-ca", &self.tls_ca),
            ("--tls-cert", &self.tls_cert),
            ("--tls-key", &self.tls_key),
        ] {
            if let Some(p) = p {
                check_input_file(flag, p)?;
            }
        }
        Ok(())
    }

    /// Whether any `--tls-*` flag is given.
    pub(crate) fn has_tls_files(&self) -> bool {
        self.tls_ca.is_some() || self.tls_cert.is_some() || self.tls_key.is_some()
    }

    /// No credentials and no TLS: a plain connection the raw publisher can make.
    pub(crate) fn is_plain(&self) -> bool {
        self.user.is_none()
            && self.token.is_none()
            && self.creds.is_none()
            && self.nkey.is_none()
            && self.tls_ca.is_none()
            && self.tls_cert.is_none()
    }

    /// Which kind of auth is used, without the secret (for meta.json and output).
    pub fn describe(&self) -> format::meta::AuthMeta {
        fn hidden<T>(v: Option<&T>) -> Option<String> {
            v.map(|_| "***".to_string())
        }
        format::meta::AuthMeta {
            user: self.user.clone(),
            password: hidden(self.password.as_ref()),
            token: hidden(self.token.as_ref()),
            // The files' names are hidden too, like their values in argv.
            creds: hidden(self.creds.as_ref()),
            nkey: hidden(self.nkey.as_ref()),
            tls_ca: self.tls_ca.clone(),
            tls_cert: self.tls_cert.clone(),
            tls_key: hidden(self.tls_key.as_ref()),
        }
    }

    /// Connects client `name` to `url`.
    pub async fn connect(
        &self,
        url: &str,
        name: &str,
        capacity: usize,
        events: &EventLog,
    ) -> anyhow::Result<async_nats::Client> {
        self.connect_sub(url, name, capacity, None, events).await
    }

    /// Connects client `name` to `url`; `sub_capacity`: messages each of its subscriptions
    /// holds before async-nats drops (a slow-consumer event; default 65,536).
    pub(crate) async fn connect_sub(
        &self,
        url: &str,
        name: &str,
        capacity: usize,
        sub_capacity: Option<usize>,
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
        if let Some(c) = sub_capacity {
            o = o.subscription_capacity(c);
        }
        if self.ignore_discovered {
            o = o.ignore_discovered_servers();
        }
        let server = parse_server(url).map_err(|why| {
            usage!(
                "--server '{}': {why}; expected {SERVER_URL_FORM}",
                redact_url(url)
            )
        })?;
        match server.auth {
            Some(UrlAuth::UserPassword(u, p)) => o = o.user_and_password(u, p),
            Some(UrlAuth::Token(t)) => o = o.token(t),
            None => {}
        }
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
            o = o.nkey(read_nkey_seed(n)?);
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
                ev.event(format::events::Body::NatsClient(
                    format::events::NatsClient {
                        client: nm.to_string(),
                        event: e.to_string(),
                        received: None,
                    },
                ));
            }
        });
        let shown = redact_url(url);
        o.connect(server.url.as_str()).await.map_err(|e| {
            let msg = e.to_string();
            if msg.contains("authorization") || msg.contains("Authorization") {
                anyhow::anyhow!("cannot connect to {shown}: authorization failed ({msg}); check the URL's user:password@ or token@, --user/--password, --token, --creds or --nkey")
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
pub(crate) async fn round_trip(client: &async_nats::Client) -> anyhow::Result<()> {
    if !connected_within(client, AFTER_RUN_RECONNECT).await {
        anyhow::bail!("the connection to the server is gone: no round trip");
    }
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

/// How long the questions a load asks after its run (a round trip, stream info, deleting
/// its consumer) wait for a client that is not connected to connect again: a server that
/// restarts comes back within it, one that is gone does not, and then the run ends
/// without waiting out each question's own timeout (issue 25: a `reply` or `js-pub`
/// whose server was killed ended 10 to 20 s after its --duration).
pub(crate) const AFTER_RUN_RECONNECT: Duration = Duration::from_secs(1);

/// Whether `client` is connected, or connects within `wait`.
pub(crate) async fn connected_within(client: &async_nats::Client, wait: Duration) -> bool {
    let t0 = std::time::Instant::now();
    loop {
        if client.connection_state() == async_nats::connection::State::Connected {
            return true;
        }
        if t0.elapsed() >= wait {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `host:port` of a server URL (what a proxy forwards to).
pub fn host_port(url: &str) -> Result<String, String> {
    let p = parse_server(url)?;
    Ok(p.url
        .split_once("://")
        .map_or(p.url.clone(), |(_, hp)| hp.to_string()))
}

/// `url` with its host and port replaced by `addr` (a proxy's), user info kept:
/// `nats://u:p@h:4222` -> `nats://u:p@127.0.0.1:40123`.
pub fn through(url: &str, addr: std::net::SocketAddr) -> String {
    let t = url.trim();
    let (scheme, rest) = t.split_once("://").unwrap_or(("nats", t));
    let info = rest.rfind('@').map(|at| &rest[..=at]).unwrap_or("");
    format!("{scheme}://{info}{addr}")
}

/// `nats://user:pass@host:4222` -> `nats://***@host:4222` ([`format::redact::text`]).
pub fn redact_url(url: &str) -> String {
    format::redact::text(url)
}

/// The form a server URL takes, for error messages.
pub const SERVER_URL_FORM: &str =
    "nats://[user:password@]host:port, nats://[token@]host:port, tls://... or host:port (port 1-65535, default 4222)";

/// Credentials carried in a server URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UrlAuth {
    UserPassword(String, String),
    Token(String),
}

/// A server URL taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerUrl {
    /// What to connect to: scheme, host and port, no user info.
    pub url: String,
    pub auth: Option<UrlAuth>,
}

/// Parses a server URL ([`SERVER_URL_FORM`]); the error says what is wrong, without the
/// URL (the caller names it, redacted).
pub fn parse_server(input: &str) -> Result<ServerUrl, String> {
    let t = input.trim();
    if t.is_empty() {
        return Err("an empty server URL".into());
    }
    let (scheme, rest) = match t.split_once("://") {
        Some((s, r)) => (s.to_ascii_lowercase(), r),
        None => ("nats".to_string(), t),
    };
    if scheme != "nats" && scheme != "tls" {
        return Err(format!("scheme '{scheme}' is not nats or tls"));
    }
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let (info, hostport) = match rest.rfind('@') {
        Some(at) => (Some(&rest[..at]), &rest[at + 1..]),
        None => (None, rest),
    };
    if hostport.contains(['/', '?', '#']) {
        return Err("a server URL has no path, query or fragment".into());
    }
    let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
        let (h, after) = v6
            .split_once(']')
            .ok_or("an IPv6 host needs its closing ']'")?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or("text after the IPv6 host")?),
        };
        (h, port)
    } else {
        match hostport.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        }
    };
    if host.is_empty() {
        return Err("no host".into());
    }
    if !host
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-._:".contains(c))
    {
        return Err(format!(
            "host '{host}' has characters a host name cannot have"
        ));
    }
    let port: u16 = match port {
        None => 4222,
        Some(p) => match p.parse::<u32>() {
            Ok(n @ 1..=65535) => n as u16,
            _ => return Err(format!("port '{p}' is not a number 1-65535")),
        },
    };
    let host = if hostport.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_string()
    };
    let auth = match info {
        None => None,
        Some("") => return Err("an empty user info before '@'".into()),
        Some(i) => Some(match i.split_once(':') {
            Some((u, p)) => UrlAuth::UserPassword(percent_decode(u)?, percent_decode(p)?),
            None => UrlAuth::Token(percent_decode(i)?),
        }),
    };
    Ok(ServerUrl {
        url: format!("{scheme}://{host}:{port}"),
        auth,
    })
}

/// `%40` -> `@` in a URL's user info (how a password holding `@`, `:` or `/` is written).
fn percent_decode(s: &str) -> Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or("a '%' in the user info is not followed by two hex digits")?;
            out.push(hex);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "the user info is not UTF-8 once decoded".to_string())
}

/// A `--creds`, `--nkey` or `--tls-*` file: an existing regular file. A directory, FIFO
/// or device is named as what it is (it was "no such file", and `--nkey /dev/zero` read
/// forever).
fn check_input_file(flag: &str, p: &std::path::Path) -> anyhow::Result<()> {
    match format::regular::what_else(p) {
        Some(what) => Err(usage!(
            "{flag} {}: it is {what}, not a regular file; name the file itself",
            p.display()
        )),
        None if !p.is_file() => Err(usage!("{flag} {}: no such file", p.display())),
        None => Ok(()),
    }
}

/// The NKey seed in `--nkey FILE`, checked as one: a file that is no seed was taken
/// and failed at the server's nonce ("failed signing nonce") without naming the flag or
/// the file.
pub fn read_nkey_seed(path: &std::path::Path) -> anyhow::Result<String> {
    // A seed is one line of 58 characters; a file of more than 64 KiB is no seed file.
    let text = format::regular::read_input(path, 64 << 10).map_err(|e| {
        // The words of the other file flags' check (`--creds X: no such file`).
        let why = match e.kind() {
            std::io::ErrorKind::NotFound => "no such file".to_string(),
            _ => e.to_string(),
        };
        usage!(
            "--nkey {}: {why}; give the file holding a user's NKey seed",
            path.display()
        )
    })?;
    let seed = text.trim();
    if let Err(e) = nkeys::KeyPair::from_seed(seed) {
        return Err(usage!(
            "--nkey {}: not an NKey seed ({e}); give the file holding a user's seed, one line starting with SU (`nsc` or `nk -gen user` makes one)",
            path.display()
        ));
    }
    Ok(seed.to_string())
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
    fn server_urls_give_their_credentials_and_a_clean_url() {
        let p = parse_server("nats://bob:p%40ss@127.0.0.1:4333/").unwrap();
        assert_eq!(p.url, "nats://127.0.0.1:4333");
        assert_eq!(
            p.auth,
            Some(UrlAuth::UserPassword("bob".into(), "p@ss".into()))
        );
        let p = parse_server("tls://tok@[::1]").unwrap();
        assert_eq!(p.url, "tls://[::1]:4222");
        assert_eq!(p.auth, Some(UrlAuth::Token("tok".into())));
        assert_eq!(parse_server("h:1").unwrap().url, "nats://h:1");
    }

    #[test]
    fn bad_server_urls_say_what_is_wrong() {
        for (u, why) in [
            ("", "empty"),
            ("http://h:4222", "scheme 'http'"),
            ("nats://h:99999", "port '99999'"),
            ("nats://h:0", "port '0'"),
            ("nats://h:abc", "port 'abc'"),
            ("nats://:4222", "no host"),
            ("nats://h:4222/x", "no path"),
            ("nats://@h:4222", "empty user info"),
            ("nats://h h:1", "characters"),
            ("nats://u:%zz@h:1", "hex"),
        ] {
            let e = parse_server(u).unwrap_err();
            assert!(e.contains(why), "{u}: {e}");
        }
    }

    #[test]
    fn a_proxied_url_keeps_its_credentials_and_loses_its_host() {
        let a: std::net::SocketAddr = "127.0.0.1:40123".parse().unwrap();
        assert_eq!(
            through("nats://u:p@h:4222", a),
            "nats://u:p@127.0.0.1:40123"
        );
        assert_eq!(through("h:4222", a), "nats://127.0.0.1:40123");
        assert_eq!(host_port("nats://u:p@h:1").unwrap(), "h:1");
        assert_eq!(host_port("h").unwrap(), "h:4222");
    }

    #[test]
    fn describe_hides_secrets() {
        let a = ConnectArgs {
            user: Some("u".into()),
            password: Some("hunter2".into()),
            token: Some("tok".into()),
            ..Default::default()
        };
        let s = serde_json::to_value(a.describe()).unwrap().to_string();
        assert!(!s.contains("hunter2") && !s.contains("tok\""), "{s}");
    }
}
