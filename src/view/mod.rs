//! `diskpulse view RUN`: a small local HTTP server for one run directory, so report.html's
//! zoomable timeline can go down to 1 ms anywhere in a recording too long to embed.
//!
//! - `GET /` (or `/report.html`): the run's report.html as `report` wrote it. Opened from
//!   there, the page sees an `http:` origin and asks for deeper data as the user zooms;
//!   the same file opened from `file://` keeps to what it embeds.
//! - `GET /span?t0_ms=A&t1_ms=B&px=N`: the device data of `[A, B)` ms (since the run's
//!   zero) at the finest level that puts at most `N` windows across it
//!   (`report::zoom_data::span`): raw 1 ms windows streamed from diskstats.csv.gz for a
//!   narrow span, envelopes.csv.gz rows for a wide one (raw windows of that width for a
//!   run without envelopes). JSON as `report::zoom_data::span_json` writes it. Memory:
//!   the span's windows, at most `N` per device, whatever the recording's length.
//! - `GET /FILE`: any other file of the run directory (charts, CSVs). A path that leaves
//!   the directory (`..`, a symlink pointing out) is refused (403), never read.
//!
//! What must stay true: the server listens on a loopback address unless the user asked
//! for another one with `--allow-remote` (a recording names hosts, devices and commands);
//! it writes nothing; Ctrl-C ends it. Connections are served concurrently (`live::http`,
//! decision 0088), answers at most 4 at once: a span deep in a long diskstats.csv.gz is
//! read from its start today (a later chunked layout reads only its chunk, through
//! `format::diskstats::for_each_row`).

use std::net::SocketAddr;
use std::path::{Component, Path, PathBuf};

use engines::live::http::Response;
use format::usage;
use report::zoom_data;

/// The default `--listen`.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9465";

/// The widest `px` a span request may ask for.
pub const MAX_PX: u64 = 20_000;

/// Checks `--listen`: an IP address and port; a non-loopback address only with
/// `allow_remote`. Usage errors name the input and the fix.
pub fn check_listen(addr: &str, allow_remote: bool) -> anyhow::Result<SocketAddr> {
    let sa: SocketAddr = addr.parse().map_err(|_| {
        usage!(
            "--listen '{addr}': not an IP address and port; give one like 127.0.0.1:9465 (or [::1]:9465)"
        )
    })?;
    if !sa.ip().is_loopback() && !allow_remote {
        return Err(usage!(
            "--listen {addr}: not a loopback address; `view` serves the recording (host, devices, commands) to whoever can connect, so it listens on 127.0.0.1 or [::1] unless you add --allow-remote"
        ));
    }
    Ok(sa)
}

/// One run directory being served.
pub struct View {
    /// Canonical.
    dir: PathBuf,
    duration_ns: u64,
}

impl View {
    /// Checks `run`: a directory with meta.json, diskstats.csv.gz and report.html.
    pub fn open(run: &Path) -> anyhow::Result<View> {
        let shown = run.display();
        if !run.is_dir() {
            return Err(usage!(
                "{shown}: not a directory; name a run directory (made by record, demo, load --record or run)"
            ));
        }
        let meta = format::meta::Meta::read(run).map_err(|e| {
            usage!("{shown}: not a diskpulse recording ({e}); name a run directory")
        })?;
        if format::diskstats::files(run).is_empty() {
            return Err(usage!(
                "{shown}: has no {}; name a run directory that recorded block devices",
                format::diskstats::FILE
            ));
        }
        if let Some(what) = format::regular::what_else(&run.join("report.html")) {
            return Err(usage!(
                "{shown}: its report.html is {what}, not a regular file; remove it and write the page with `diskpulse report {shown}`"
            ));
        }
        if !run.join("report.html").is_file() {
            return Err(usage!(
                "{shown}: has no report.html; write it first with `diskpulse report {shown}`"
            ));
        }
        Ok(View {
            dir: run.canonicalize()?,
            duration_ns: meta.duration_ns.unwrap_or(u64::MAX),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Answers one request.
    pub fn answer(&self, method: &str, target: &str) -> Response {
        if method != "GET" && method != "HEAD" {
            return Response::text("405 Method Not Allowed", "only GET\n");
        }
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        match path {
            "/" | "/report.html" => self.file("report.html"),
            "/span" => match self.span(query) {
                Ok(json) => Response {
                    status: "200 OK",
                    ctype: "application/json",
                    body: json.into_bytes(),
                },
                Err(e) => Response::text("400 Bad Request", format!("{e}\n")),
            },
            _ => self.file(path),
        }
    }

    fn span(&self, query: &str) -> anyhow::Result<String> {
        let mut t0 = None;
        let mut t1 = None;
        let mut px = 1000u64;
        for kv in query.split('&').filter(|s| !s.is_empty()) {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            let ms = || -> anyhow::Result<u64> {
                let x: f64 = v
                    .parse()
                    .map_err(|_| anyhow::anyhow!("{k}={v}: not a number of ms"))?;
                if !(0.0..=1e15).contains(&x) {
                    anyhow::bail!("{k}={v}: not a time in ms since the run's start");
                }
                Ok((x * 1e6).round() as u64)
            };
            match k {
                "t0_ms" => t0 = Some(ms()?),
                "t1_ms" => t1 = Some(ms()?),
                "px" => {
                    px = v
                        .parse()
                        .ok()
                        .filter(|p| (1..=MAX_PX).contains(p))
                        .ok_or_else(|| anyhow::anyhow!("px={v}: a width from 1 to {MAX_PX}"))?
                }
                _ => anyhow::bail!("{k}: unknown; /span takes t0_ms, t1_ms and px"),
            }
        }
        let (Some(t0), Some(t1)) = (t0, t1) else {
            anyhow::bail!("/span needs t0_ms and t1_ms (e.g. /span?t0_ms=1000&t1_ms=1050&px=800)");
        };
        if t1 <= t0 {
            anyhow::bail!("t1_ms must be after t0_ms");
        }
        let t1 = t1.min(self.duration_ns.max(t0 + 1));
        let sp = zoom_data::span(&self.dir, self.duration_ns, t0, t1, px)?;
        let mut s = String::with_capacity(64 + sp.values() * 8);
        zoom_data::span_json(&mut s, &sp, true);
        Ok(s)
    }

    /// A file inside the run directory; 403 for a path that leaves it.
    fn file(&self, path: &str) -> Response {
        let rel = Path::new(path.trim_start_matches('/'));
        let outside = Response::text(
            "403 Forbidden",
            "outside the run directory: `diskpulse view` serves only the run's own files\n",
        );
        if path.contains('%') || rel.components().any(|c| !matches!(c, Component::Normal(_))) {
            return outside;
        }
        let p = self.dir.join(rel);
        let Ok(real) = p.canonicalize() else {
            return Response::text(
                "404 Not Found",
                format!("{path}: not in the run directory\n"),
            );
        };
        if !real.starts_with(&self.dir) {
            return outside;
        }
        if !real.is_file() {
            return Response::text("404 Not Found", format!("{path}: not a file\n"));
        }
        match std::fs::read(&real) {
            Ok(body) => Response {
                status: "200 OK",
                ctype: content_type(&real),
                body,
            },
            Err(e) => Response::text("500 Internal Server Error", format!("{path}: {e}\n")),
        }
    }
}

fn content_type(p: &Path) -> &'static str {
    match p.extension().and_then(|e| e.to_str()).unwrap_or("") {
        "html" => "text/html; charset=utf-8",
        "json" => "application/json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "css" => "text/css",
        "js" => "text/javascript",
        "gz" => "application/gzip",
        "csv" | "jsonl" | "md" | "txt" | "hlog" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_is_loopback_unless_asked() {
        assert!(check_listen("127.0.0.1:0", false).is_ok());
        assert!(check_listen("[::1]:0", false).is_ok());
        let e = check_listen("0.0.0.0:9465", false).unwrap_err().to_string();
        assert!(
            e.contains("--allow-remote") && e.contains("0.0.0.0:9465"),
            "{e}"
        );
        assert!(check_listen("0.0.0.0:9465", true).is_ok());
        let e = check_listen("localhost:80", false).unwrap_err().to_string();
        assert!(e.contains("'localhost:80'"), "{e}");
    }
}
