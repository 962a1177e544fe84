//! A raw NATS protocol publisher for core `pub` (and `cast`): one TCP connection, `PUB`
//! commands written back to back into a 64 KiB buffer and handed to the socket when full.
//!
//! Why: async-nats sends every publish through a channel to a writer task (a wake-up and
//! a queue hop per message). That made `diskpulse load pub` half as fast as the Go
//! client, i.e. the load generator, not the server, was what got measured. The raw writer
//! does what nats.go does (buffer, write) and nothing per message but a copy.
//!
//! It is used when the connection needs nothing async-nats provides: no TLS, no
//! credentials (`--user/--password`, `--token`, `--creds`, `--nkey` or user info in the
//! URL fall back to async-nats). The server's `PING`s are answered, `-ERR` ends the run
//! with the server's words, and the run ends with `PING`/`PONG`, so every message was
//! read by the server before the publisher counts itself done.
//!
//! Riding through a fault (issue 9): a connection the server closed (the reader sees its
//! end) or a write that fails is connected again, an attempt every 250 ms until the run's
//! --duration or Ctrl-C; the publish whose write failed is one error of kind
//! `disconnected` (with `--rate` each publish is written at once, so that is exactly the
//! one lost; unpaced, the messages of the buffer already counted are lost unseen, as core
//! NATS loses what a server that is gone never read: subscribers count them `missing`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use super::flow::Flow;
use super::record::{realtime_ns, stamp, Recorder};
use super::send::{OpError, OpResult, Operation, Sent};
use super::workers::{Ctx, SendPlan};

const BUF: usize = 64 * 1024;

/// A connected raw publisher.
pub(crate) struct RawConn {
    write: tokio::net::tcp::OwnedWriteHalf,
    pongs: tokio::sync::mpsc::UnboundedReceiver<()>,
    need_pong: Arc<AtomicBool>,
    error: Arc<Mutex<Option<String>>>,
    /// The server closed the connection (the reader saw its end).
    closed: Arc<AtomicBool>,
    url: String,
    name: String,
}

/// `nats://host:port` (or `host:port`) without user info; also the raw subscriber's.
pub(super) fn host_port(url: &str) -> Option<String> {
    let rest = url.split_once("://").map(|x| x.1).unwrap_or(url);
    if rest.contains('@') {
        return None;
    }
    let hp = rest.trim_end_matches('/');
    Some(if hp.contains(':') {
        hp.to_string()
    } else {
        format!("{hp}:4222")
    })
}

impl RawConn {
    /// Connects when the server lets a plain client in; `Ok(None)` when it needs TLS or auth
    /// (use async-nats then).
    pub async fn connect(url: &str, name: &str) -> anyhow::Result<Option<RawConn>> {
        let Some(hp) = host_port(url) else {
            return Ok(None);
        };
        let s = TcpStream::connect(&hp).await?;
        s.set_nodelay(true)?;
        let (r, mut w) = s.into_split();
        let mut r = BufReader::new(r);
        let mut line = String::new();
        r.read_line(&mut line).await?;
        let info = ServerInfo::parse(&line)
            .ok_or_else(|| anyhow::anyhow!("{url} did not greet with INFO"))?;
        if info.needs_more() {
            return Ok(None);
        }
        let connect = connect_json(name, true);
        w.write_all(format!("CONNECT {connect}\r\nPING\r\n").as_bytes())
            .await?;
        loop {
            line.clear();
            if r.read_line(&mut line).await? == 0 {
                anyhow::bail!("{url} closed the connection after CONNECT");
            }
            let l = line.trim_end();
            if l == "PONG" {
                break;
            }
            if let Some(e) = l.strip_prefix("-ERR ") {
                anyhow::bail!("{url}: {e}");
            }
        }
        let (pong_tx, pongs) = tokio::sync::mpsc::unbounded_channel();
        let need_pong = Arc::new(AtomicBool::new(false));
        let error = Arc::new(Mutex::new(None));
        let closed = Arc::new(AtomicBool::new(false));
        let (np, er, cl) = (need_pong.clone(), error.clone(), closed.clone());
        tokio::spawn(async move {
            let mut line = String::new();
            loop {
                line.clear();
                match r.read_line(&mut line).await {
                    Ok(0) | Err(_) => {
                        cl.store(true, Ordering::Release);
                        break;
                    }
                    Ok(_) => {}
                }
                let l = line.trim_end();
                if l == "PING" {
                    np.store(true, Ordering::Release);
                } else if l == "PONG" {
                    let _ = pong_tx.send(());
                } else if let Some(e) = l.strip_prefix("-ERR ") {
                    *er.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
                    let _ = pong_tx.send(());
                }
            }
        });
        Ok(Some(RawConn {
            write: w,
            pongs,
            need_pong,
            error,
            closed,
            url: url.to_string(),
            name: name.to_string(),
        }))
    }

    /// Connects again to the same server: an attempt every 250 ms until `ctx` is over
    /// (--duration, Ctrl-C) or for [`RECONNECT_GIVE_UP`](super::workers::RECONNECT_GIVE_UP).
    /// False when it gave up.
    async fn reconnect(&mut self, ctx: &Ctx) -> bool {
        let mut wait = std::time::Duration::from_millis(50);
        let t0 = std::time::Instant::now();
        while !ctx.over(ctx.clock.now_ns()) && t0.elapsed() < super::workers::RECONNECT_GIVE_UP {
            tokio::time::sleep(wait).await;
            wait = std::time::Duration::from_millis(250);
            let again = tokio::time::timeout(
                std::time::Duration::from_secs(1),
                RawConn::connect(&self.url, &self.name),
            )
            .await;
            if let Ok(Ok(Some(c))) = again {
                *self = c;
                return true;
            }
        }
        false
    }

    fn server_error(&self) -> Option<String> {
        self.error.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Core publish over a raw connection, run by [`super::send::send_loop`] like
/// [`super::workers::CorePublish`]: each send appends one `PUB` to the buffer (counted
/// there), which goes to the socket when full, or at once when paced (its send time is
/// the point). `-ERR` ends the sending, a connection that is gone is made again (see
/// the module); [`Operation::finish`]
/// sends `PING` and waits for the `PONG`, so every counted message was read by the
/// server, and records what failed.
pub(crate) struct RawPublish {
    conn: RawConn,
    ctx: Ctx,
    /// Connections made (1 until a reconnect).
    connects: u64,
    head: Vec<u8>,
    body: Vec<u8>,
    stamp: bool,
    paced: bool,
    buf: Vec<u8>,
    failed: Option<String>,
    /// The connection broke and could not be made again (already one `disconnected`).
    gone: bool,
    /// `pub --sub M`: the run's flow control, and the messages in `buf` not counted there.
    flow: Option<Arc<Flow>>,
    unsent: u64,
    /// `--multisubject`: each message's subject, then `tail` (sizes and header block)
    /// after `verb`.
    subjects: Option<super::message::Subjects>,
    verb: &'static [u8],
    tail: Vec<u8>,
}

impl RawPublish {
    pub fn new(
        conn: RawConn,
        subject: &str,
        plan: &SendPlan,
        ctx: &Ctx,
        flow: Option<Arc<Flow>>,
        subjects: Option<super::message::Subjects>,
    ) -> RawPublish {
        let size = plan.size;
        // -H: HPUB with the header block at the end of the head, the body after it.
        let block = super::message::hpub_block(&plan.headers);
        let mut head = if block.is_empty() {
            format!("PUB {subject} {size}\r\n").into_bytes()
        } else {
            format!("HPUB {subject} {} {}\r\n", block.len(), block.len() + size).into_bytes()
        };
        head.extend_from_slice(&block);
        let (verb, mut tail): (&[u8], Vec<u8>) = if block.is_empty() {
            (b"PUB ", format!(" {size}\r\n").into_bytes())
        } else {
            let sizes = format!(" {} {}\r\n", block.len(), block.len() + size);
            (b"HPUB ", sizes.into_bytes())
        };
        tail.extend_from_slice(&block);
        RawPublish {
            conn,
            ctx: ctx.clone(),
            connects: 1,
            buf: Vec::with_capacity(BUF + head.len() + size + 2),
            head,
            body: plan
                .body
                .as_ref()
                .map_or_else(|| vec![b'x'; size], |b| b.to_vec()),
            stamp: plan.stamp && size >= 16,
            paced: plan.pacer.is_some(),
            failed: None,
            gone: false,
            flow,
            unsent: 0,
            subjects,
            verb,
            tail,
        }
    }
}

impl Operation for RawPublish {
    type Pending = std::future::Ready<OpResult>;
    const SEND_MAY_WAIT: bool = false;

    #[inline]
    async fn send(&mut self, _k: u64) -> Option<Sent<Self::Pending>> {
        if self.failed.is_some() || self.gone {
            return None;
        }
        let buf = &mut self.buf;
        match &mut self.subjects {
            None => buf.extend_from_slice(&self.head),
            Some(s) => {
                buf.extend_from_slice(self.verb);
                s.write_next(buf);
                buf.extend_from_slice(&self.tail);
            }
        }
        let at = buf.len();
        buf.extend_from_slice(&self.body);
        if self.stamp {
            stamp(&mut buf[at..at + 16], realtime_ns());
        }
        buf.extend_from_slice(b"\r\n");
        self.unsent += 1;
        if buf.len() >= BUF || self.paced {
            if let Some(f) = &self.flow {
                // No subscriber more than the window behind (see flow); counted before
                // the write, which follows at once: no publisher waits for itself.
                f.wait_room(&self.ctx).await;
                f.sent(std::mem::take(&mut self.unsent));
            }
            let buf = &mut self.buf;
            if self.conn.need_pong.swap(false, Ordering::AcqRel) {
                buf.extend_from_slice(b"PONG\r\n");
            }
            let write_ns = self.ctx.clock.now_ns();
            let lost = if self.conn.closed.load(Ordering::Acquire) {
                Some("the server closed the connection".to_string())
            } else {
                // A server that stops reading (SIGSTOP, a hung process) holds a write
                // once the socket buffer is full: it gives way at the stop or 2 s past
                // --duration (issue 25: such a load ignored even SIGTERM).
                tokio::select! {
                    biased;
                    r = self.conn.write.write_all(buf) => r.err().map(|e| e.to_string()),
                    () = super::send::stopped(&self.ctx) => {
                        buf.clear();
                        self.gone = true;
                        return Some(Sent::Failed(
                            OpError::new(
                                "timeout",
                                "raw publisher: the server read nothing more (stopped or hung) until the run ended",
                            )
                            .since(write_ns),
                        ));
                    }
                }
            };
            buf.clear();
            if let Some(e) = self.conn.server_error() {
                self.failed = Some(e);
                return Some(Sent::Done(self.body.len() as u64));
            }
            if let Some(e) = lost {
                let lost_ns = self.ctx.clock.now_ns();
                // Ride through: connect again (until --duration or Ctrl-C).
                if self.conn.reconnect(&self.ctx).await {
                    self.connects += 1;
                } else {
                    // Told once, by this error, at the moment of the loss: `finish` has
                    // nothing to add.
                    self.gone = true;
                }
                return Some(Sent::Failed(
                    OpError::new("disconnected", format_args!("raw publisher: {e}")).since(lost_ns),
                ));
            }
        }
        Some(Sent::Done(self.body.len() as u64))
    }

    fn connects(&self) -> u64 {
        self.connects
    }

    async fn finish(&mut self, rec: &mut Recorder) {
        let conn = &mut self.conn;
        if self.failed.is_none() && !self.gone {
            self.buf.extend_from_slice(b"PING\r\n");
            let wrote = tokio::time::timeout(
                std::time::Duration::from_secs(10),
                conn.write.write_all(&self.buf),
            )
            .await
            .unwrap_or_else(|_| {
                Err(std::io::Error::other(
                    "the last write did not finish within 10 s",
                ))
            });
            match wrote {
                Err(e) => self.failed = Some(e.to_string()),
                Ok(()) => {
                    // Every PUB before this PING has been read by the server once its PONG comes.
                    let r =
                        tokio::time::timeout(std::time::Duration::from_secs(10), conn.pongs.recv())
                            .await;
                    if r.is_err() {
                        self.failed = Some("no PONG within 10 s after the last publish".into());
                    }
                    if let Some(e) = conn.server_error() {
                        self.failed = Some(e);
                    }
                }
            }
        }
        if let Some(e) = self.failed.take() {
            // A server that read nothing for 10 s stopped answering (a hung or stopped
            // process): said as such, not as a failed publish.
            let kind = if e.starts_with("no PONG") || e.contains("did not finish") {
                "timeout"
            } else {
                "publish"
            };
            rec.error(rec.now(), kind, || format!("raw publisher: {e}"));
        }
        let _ = conn.write.shutdown().await;
    }
}

/// What the server's `INFO` line says that decides whether the raw client can talk to
/// it: TLS or auth required means async-nats instead. Other fields are not read.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub(super) struct ServerInfo {
    tls_required: bool,
    auth_required: bool,
}

impl ServerInfo {
    /// `INFO {...}` (surrounding whitespace allowed); `None` when the line is not one.
    pub(super) fn parse(line: &str) -> Option<ServerInfo> {
        let j = line.trim().strip_prefix("INFO ")?;
        serde_json::from_str(j.trim()).ok()
    }

    /// The server wants TLS or credentials, which the raw client does not do.
    pub(super) fn needs_more(&self) -> bool {
        self.tls_required || self.auth_required
    }
}

/// The raw client's `CONNECT` options (the NATS protocol's): no verbose `+OK`, echo on,
/// no headers; `name` is the client's name as the server's `/connz` shows it.
#[derive(serde::Serialize)]
struct Connect<'a> {
    echo: bool,
    headers: bool,
    lang: &'a str,
    name: &'a str,
    no_responders: bool,
    pedantic: bool,
    protocol: u8,
    tls_required: bool,
    verbose: bool,
    version: &'a str,
}

/// The JSON after `CONNECT ` for client `name` (one line, keys sorted); `headers`: it
/// sends HPUB (a publisher), or takes HMSG (a subscriber that reads them; ours do not).
pub(super) fn connect_json(name: &str, headers: bool) -> String {
    let c = Connect {
        echo: true,
        headers,
        lang: "rust-diskpulse-raw",
        name,
        no_responders: false,
        pedantic: false,
        protocol: 1,
        tls_required: false,
        verbose: false,
        version: env!("CARGO_PKG_VERSION"),
    };
    serde_json::to_string(&c).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_urls_go_raw() {
        assert_eq!(
            host_port("nats://127.0.0.1:4222").as_deref(),
            Some("127.0.0.1:4222")
        );
        assert_eq!(host_port("127.0.0.1").as_deref(), Some("127.0.0.1:4222"));
        assert_eq!(host_port("nats://u:p@h:4222"), None);
    }
}
