//! The HTTP/1.1 server of `record --listen` (`/metrics`) and, through [`serve_with`]
//! with another handler, of `diskpulse view`: hyper's HTTP/1.1 server on a tokio
//! runtime of its own, in a thread of its own (decision 0088), so no client, however
//! slow, reaches the sampler's thread, and connections are served concurrently.
//!
//! What must stay true:
//! - Each connection is a task of its own: an idle or trickling client holds only its
//!   own task. At most [`MAX_CONNS`] are open at once; one more is closed at accept, so
//!   a flood costs bounded memory and file descriptors and never a hang.
//! - A request head must arrive whole within [`HEAD_TIMEOUT`] and fit [`MAX_HEAD`]
//!   bytes (hyper answers 431 past it); a whole connection lasts at most
//!   [`CONN_DEADLINE`] (a client that stops reading the answer).
//! - The handler (ours: a snapshot of the live gauges, or a file or span of a run) runs
//!   on the runtime's blocking pool, at most [`HANDLER_THREADS`] at once, so a slow one
//!   does not stall the accept loop or the other connections.
//! - One request per connection (`Connection: close`), as before.
//! - Dropping the [`Server`] stops it: the accept loop ends, every connection is
//!   closed, and its threads are joined (a handler still running gets
//!   [`STOP_GRACE`]).
//!
//! Ours here: [`bind`] (its usage errors name `--listen`), [`Response`] and the
//! `/metrics` routes; the HTTP itself is hyper's.

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::service::service_fn;
use hyper::{Request, Response as HttpResponse, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::{oneshot, Semaphore};

use super::Live;
use format::usage;

/// How long a request head may take to arrive, from the connection's start.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(2);
/// The longest request head read (hyper's smallest buffer); past it, 431.
pub const MAX_HEAD: usize = 8192;
/// The longest a connection lasts, head to the answer's last byte.
pub const CONN_DEADLINE: Duration = Duration::from_secs(60);
/// Connections open at once; one more is closed at accept.
pub const MAX_CONNS: usize = 256;
/// Handlers running at once (the blocking pool's size).
pub const HANDLER_THREADS: usize = 4;
/// How long a stop waits for a handler still running.
pub const STOP_GRACE: Duration = Duration::from_secs(1);

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
    stop: Option<oneshot::Sender<()>>,
    handle: Option<JoinHandle<()>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// One answer: status line text (`"200 OK"`, its first three characters the code),
/// content type, body.
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

/// Serves `handler` on `listener` (threads named `name`) until the [`Server`] is
/// dropped.
pub fn serve_with(
    listener: TcpListener,
    name: &str,
    handler: Arc<Handler>,
) -> anyhow::Result<Server> {
    let addr = listener.local_addr()?;
    listener.set_nonblocking(true)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .thread_name(name)
        .max_blocking_threads(HANDLER_THREADS)
        .build()?;
    let (tx, rx) = oneshot::channel();
    let handle = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            rt.block_on(async move {
                tokio::select! {
                    _ = accept_loop(listener, handler) => {}
                    _ = rx => {}
                }
            });
            // Closes every connection still open; waits a little for a handler.
            rt.shutdown_timeout(STOP_GRACE);
        })?;
    Ok(Server {
        addr,
        stop: Some(tx),
        handle: Some(handle),
    })
}

async fn accept_loop(listener: TcpListener, handler: Arc<Handler>) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    let slots = Arc::new(Semaphore::new(MAX_CONNS));
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            // EMFILE and the like: do not spin.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        // Full: this one is closed at once (dropped), the others go on.
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            continue;
        };
        let h = handler.clone();
        tokio::spawn(async move {
            let _ = tokio::time::timeout(CONN_DEADLINE, connection(stream, h)).await;
            drop(slot);
        });
    }
}

async fn connection(stream: tokio::net::TcpStream, handler: Arc<Handler>) {
    let service = service_fn(move |req: Request<Incoming>| {
        let h = handler.clone();
        async move { Ok::<_, std::convert::Infallible>(respond(req, h).await) }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .max_buf_size(MAX_HEAD)
        .keep_alive(false)
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

async fn respond(req: Request<Incoming>, handler: Arc<Handler>) -> HttpResponse<Full<Bytes>> {
    let method = req.method().as_str().to_owned();
    let target = req
        .uri()
        .path_and_query()
        .map_or_else(|| req.uri().path().to_owned(), |p| p.as_str().to_owned());
    drop(req);
    let r = tokio::task::spawn_blocking(move || handler(&method, &target))
        .await
        .unwrap_or_else(|_| Response::text("500 Internal Server Error", "the handler failed\n"));
    let status = r
        .status
        .get(..3)
        .and_then(|c| StatusCode::from_bytes(c.as_bytes()).ok())
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut resp = HttpResponse::new(Full::new(Bytes::from(r.body)));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static(r.ctype));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
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
