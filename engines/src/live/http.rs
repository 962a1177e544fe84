//! The `/metrics` HTTP/1.1 server of `record --listen`: one std thread blocked in
//! `accept`, one connection at a time (`Connection: close`), 2 s read and write
//! timeouts, so a stuck client delays other scrapes at most that and never touches the
//! sampler. Stopping connects to itself to wake the `accept`. [`serve_with`] is the same
//! server with another handler (`diskpulse view`).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::Live;
use format::usage;

const TIMEOUT: Duration = Duration::from_secs(2);
/// The longest request head read.
const MAX_HEAD: usize = 8192;

/// Binds `--listen ADDR` (`127.0.0.1:9464`, `[::1]:9464`, `0.0.0.0:0`) before anything
/// is written: a bad address or a port in use is a usage error naming it.
pub fn bind(addr: &str) -> anyhow::Result<TcpListener> {
    let sa: SocketAddr = addr.parse().map_err(|_| {
        usage!(
            "--listen '{addr}': not an IP address and port; give one like 127.0.0.1:9464 (or [::1]:9464, 0.0.0.0:9464 to serve every interface)"
        )
    })?;
    TcpListener::bind(sa).map_err(|e| {
        usage!("--listen {addr}: cannot listen there ({e}); pick a free port or another address")
    })
}

/// The running server; dropping it stops it.
pub struct Server {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept with a connection of our own.
        let mut wake = self.addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(match wake {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        let _ = TcpStream::connect_timeout(&wake, TIMEOUT);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// One answer: status line text, content type, body.
pub struct Response {
    pub status: &'static str,
    pub ctype: &'static str,
    pub body: Vec<u8>,
}

impl Response {
    pub fn text(status: &'static str, body: impl Into<String>) -> Response {
        Response {
            status,
            ctype: "text/plain; charset=utf-8",
            body: body.into().into_bytes(),
        }
    }
}

/// What answers a request: `(method, target)` (target with its query) to a response.
type Handler = dyn Fn(&str, &str) -> Response + Send + Sync;

/// Serves `live` on `listener` until the [`Server`] is dropped.
pub fn serve(listener: TcpListener, live: Arc<Live>) -> anyhow::Result<Server> {
    serve_with(
        listener,
        "metrics-http",
        Arc::new(move |method: &str, target: &str| metrics(method, target, &live)),
    )
}

/// Serves `handler` on `listener` (thread `name`) until the [`Server`] is dropped.
pub fn serve_with(
    listener: TcpListener,
    name: &str,
    handler: Arc<Handler>,
) -> anyhow::Result<Server> {
    let addr = listener.local_addr()?;
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let handle = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            for conn in listener.incoming() {
                if st.load(Ordering::SeqCst) {
                    break;
                }
                match conn {
                    Ok(s) => {
                        let _ = answer(s, &*handler);
                    }
                    // EMFILE and the like: do not spin.
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        })?;
    Ok(Server {
        addr,
        stop,
        handle: Some(handle),
    })
}

fn metrics(method: &str, target: &str, live: &Live) -> Response {
    let path = target.split('?').next().unwrap_or("");
    match (method, path) {
        ("GET" | "HEAD", "/metrics") => Response {
            status: "200 OK",
            ctype: "text/plain; version=0.0.4; charset=utf-8",
            body: super::render::page(&live.scrape()).into_bytes(),
        },
        ("GET" | "HEAD", "/") => {
            Response::text("200 OK", "diskpulse record: metrics at /metrics\n")
        }
        ("GET" | "HEAD", _) => {
            Response::text("404 Not Found", "not found: the metrics are at /metrics\n")
        }
        _ => Response::text("405 Method Not Allowed", "only GET\n"),
    }
}

fn answer(mut s: TcpStream, handler: &Handler) -> std::io::Result<()> {
    s.set_read_timeout(Some(TIMEOUT))?;
    s.set_write_timeout(Some(TIMEOUT))?;
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_HEAD {
        let n = s.read(&mut buf)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let r = handler(method, target);
    let resp = format!(
        "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
        r.status,
        r.ctype,
        r.body.len()
    )
    .into_bytes();
    s.write_all(&resp)?;
    if method != "HEAD" {
        s.write_all(&r.body)?;
    }
    s.flush()
}
