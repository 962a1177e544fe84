//! A plain HTTP/1.1 GET over a tokio `TcpStream` (`Connection: close`; `Content-Length`,
//! chunked and close-delimited bodies), for nats-server's monitoring port (`/varz`,
//! `/jsz`, `/healthz`): it speaks nothing else, and a request costs ~0.2 ms on loopback.

use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};
use serde::de::DeserializeOwned;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A response body larger than this is refused (a `/jsz` of the default detail level
/// is a few KiB; this guards against pointing the poller at the wrong port).
const MAX_RESPONSE_BYTES: usize = 16 << 20;

/// `http://host:port[/base]` split up.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct HttpUrl {
    host: String,
    port: u16,
    /// A path prefix (`http_base_path`), without a trailing `/`.
    base: String,
}

pub(super) fn parse_http_url(url: &str) -> anyhow::Result<HttpUrl> {
    // The URL as given may hold user info: never echoed.
    let shown = crate::load::connect::redact_url(url);
    let bad = |why: &str| {
        anyhow!("a monitor URL looks like http://127.0.0.1:8222 ({why}); got '{shown}'")
    };
    let rest = url.strip_prefix("http://").ok_or_else(|| {
        if url.starts_with("https://") {
            bad("https is not supported")
        } else {
            bad("it starts with http://")
        }
    })?;
    let (hostport, base) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
        None => (rest, ""),
    };
    let (host, port) = match hostport.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() => (
            h,
            p.parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| bad("the port is a number 1-65535"))?,
        ),
        _ => (hostport, 80),
    };
    if host.is_empty() {
        return Err(bad("it names a host"));
    }
    Ok(HttpUrl {
        host: host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string(),
        port,
        base: base.to_string(),
    })
}

/// GET `url` + `path` and read the body as the JSON document `T` (`format::monitor`'s
/// `Varz`, `Jsz`, `Healthz`); an error for anything but 200 or a body that is not that document.
pub async fn get_doc<T: DeserializeOwned>(
    url: &str,
    path: &str,
    timeout: Duration,
) -> anyhow::Result<T> {
    let body = http_get(url, path, timeout).await?;
    serde_json::from_slice(&body).with_context(|| {
        format!(
            "{url}{path} did not return JSON: '{}'",
            String::from_utf8_lossy(&body[..body.len().min(120)])
        )
    })
}

/// A plain HTTP/1.1 GET with `Connection: close`; returns the body of a 200 response.
pub async fn http_get(url: &str, path: &str, timeout: Duration) -> anyhow::Result<Vec<u8>> {
    http_get_accept(url, path, "application/json", timeout).await
}

/// [`http_get`] asking for `accept` (RabbitMQ's Prometheus endpoint answers 406 to
/// `application/json`).
pub(crate) async fn http_get_accept(
    url: &str,
    path: &str,
    accept: &str,
    timeout: Duration,
) -> anyhow::Result<Vec<u8>> {
    let u = parse_http_url(url)?;
    let started = Instant::now();
    let fut = async {
        let mut s = tokio::net::TcpStream::connect((u.host.as_str(), u.port)).await?;
        let req = format!(
            "GET {}{} HTTP/1.1\r\nHost: {}:{}\r\nUser-Agent: diskpulse\r\nAccept: {}\r\nConnection: close\r\n\r\n",
            u.base, path, u.host, u.port, accept
        );
        s.write_all(req.as_bytes()).await?;
        let mut raw = Vec::with_capacity(8192);
        let mut chunk = [0u8; 16384];
        loop {
            let n = s.read(&mut chunk).await?;
            if n == 0 {
                break;
            }
            raw.extend_from_slice(&chunk[..n]);
            if raw.len() > MAX_RESPONSE_BYTES {
                return Err(std::io::Error::other(format!(
                    "response larger than {MAX_RESPONSE_BYTES} bytes"
                )));
            }
        }
        Ok::<_, std::io::Error>(raw)
    };
    let raw = match tokio::time::timeout(timeout, fut).await {
        Ok(r) => r.with_context(|| format!("GET {url}{path}"))?,
        Err(_) => bail!(
            "GET {url}{path}: no answer within {} ms",
            started.elapsed().as_millis()
        ),
    };
    parse_response(&raw).with_context(|| format!("GET {url}{path}"))
}

/// Splits an HTTP/1.x response into status and body (Content-Length, chunked or
/// close-delimited); an error unless the status is 200.
fn parse_response(raw: &[u8]) -> anyhow::Result<Vec<u8>> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| anyhow!("the response ended inside its header ({} bytes)", raw.len()))?;
    let head = String::from_utf8_lossy(&raw[..end]);
    let body = &raw[end + 4..];
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| anyhow!("not an HTTP response: '{status_line}'"))?;
    let (mut chunked, mut length) = (false, None);
    for l in lines {
        if let Some((k, v)) = l.split_once(':') {
            let (k, v) = (k.trim(), v.trim());
            if k.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked") {
                chunked = true;
            } else if k.eq_ignore_ascii_case("content-length") {
                length = v.parse::<usize>().ok();
            }
        }
    }
    let body = if chunked {
        dechunk(body)?
    } else if let Some(n) = length {
        if body.len() < n {
            bail!("body cut off: {} of {n} bytes", body.len());
        }
        body[..n].to_vec()
    } else {
        body.to_vec()
    };
    if status != 200 {
        bail!(
            "HTTP {status}: {}",
            String::from_utf8_lossy(&body[..body.len().min(200)]).trim()
        );
    }
    Ok(body)
}

/// Decodes a chunked body (`SIZE-hex[;ext]\r\nDATA\r\n ... 0\r\n\r\n`).
fn dechunk(mut b: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(b.len());
    loop {
        let eol = b
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or_else(|| anyhow!("chunked body cut off"))?;
        let line = std::str::from_utf8(&b[..eol])?;
        let size_hex = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_hex, 16)
            .map_err(|_| anyhow!("bad chunk size '{size_hex}'"))?;
        b = &b[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        if b.len() < size + 2 {
            bail!("chunked body cut off");
        }
        out.extend_from_slice(&b[..size]);
        b = &b[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_and_bad_ones_say_why() {
        assert_eq!(
            parse_http_url("http://127.0.0.1:8222").unwrap(),
            HttpUrl {
                host: "127.0.0.1".into(),
                port: 8222,
                base: "".into()
            }
        );
        assert_eq!(
            parse_http_url("http://nats.lan:80/mon/").unwrap().base,
            "/mon"
        );
        assert_eq!(parse_http_url("http://[::1]:8222").unwrap().host, "::1");
        let e = parse_http_url("https://x:1").unwrap_err().to_string();
        assert!(e.contains("https") && e.contains("'https://x:1'"), "{e}");
        assert!(parse_http_url("127.0.0.1:8222").is_err());
        assert!(parse_http_url("http://x:port").is_err());
    }

    #[test]
    fn responses_with_length_chunked_and_close_delimited_bodies() {
        let r = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n{}  extra";
        assert_eq!(parse_response(r).unwrap(), b"{}  ");
        let r = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n5;x=y\r\n\":12}\r\n0\r\n\r\n";
        assert_eq!(parse_response(r).unwrap(), b"{\"a\":12}");
        let r = b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n[1]";
        assert_eq!(parse_response(r).unwrap(), b"[1]");
        let e = parse_response(b"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found")
            .unwrap_err()
            .to_string();
        assert_eq!(e, "HTTP 404: not found");
        assert!(parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort").is_err());
        assert!(
            parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab")
                .is_err()
        );
    }
}
