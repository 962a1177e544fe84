//! A raw NATS protocol subscriber for core `sub` (and `pub --sub M`): one TCP
//! connection, `SUB`, and `MSG` frames parsed in place out of a 1 MiB read buffer.
//!
//! Why: async-nats hands every message through a channel to the subscription (a
//! `Message` with its own `Bytes`, subject and headers, and a wake-up per message), and
//! drops what the channel cannot hold (a slow-consumer event). Four subscribers took
//! 250-410k msgs/s in total where nats.go's took 850-960k, and lost 71-86% of the
//! messages of `pub --clients 4 --sub 4`. The raw reader does per message only what the
//! measurement needs: find the frame, read the stamp, count it into the [`Recorder`]; the
//! clocks are read once per read from the socket (every message of a read arrived then).
//! It never drops a message: what it cannot take yet waits in the socket and the server,
//! and [`super::flow`] keeps the publishers of the run from outrunning it.
//!
//! Used when the connection needs nothing async-nats provides (no TLS, no credentials:
//! [`super::connect::ConnectArgs::is_plain`]) and without `--no-raw`; the async-nats
//! [`super::receive::CoreSub`] otherwise. The rules for when to end are the one
//! [`receiver_should_end`]; messages expected and never received are `missing`.
//!
//! Riding through a fault (issue 9): a connection the server closed (a restart, or the
//! server dropping a slow consumer) is connected and subscribed again, an attempt every
//! 250 ms; the reconnect restarts the idle clock and the first message after it is a
//! `first_ack_after_reconnect` event, as for the async-nats subscriber.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

use super::flow::Flow;
use super::raw::{connect_json, host_port, ServerInfo};
use super::receive::receiver_should_end;
use super::record::{read_stamp, realtime_ns, Recorder};
use super::send::FaultWatch;
use super::workers::Ctx;
use format::events::{self as ev, Body};

const BUF: usize = 1 << 20;

/// Test-only knob: subscriber 0 stops reading for this many ms after its first read (a
/// subscriber that really cannot keep up, for the test that such a run fails loudly).
pub const STALL_ENV: &str = "DISKPULSE_TEST_SUB_STALL_MS";

/// A connected, subscribed raw subscriber.
pub(crate) struct RawSubConn {
    r: OwnedReadHalf,
    w: OwnedWriteHalf,
    /// Bytes read after the handshake's PONG (the first messages may come with it).
    buf: Vec<u8>,
    end: usize,
    url: String,
    name: String,
    subject: String,
    /// The queue group it subscribed in (`cast --reply M`'s responders share one).
    queue: Option<String>,
}

/// Position of the `\n` ending the first line of `b`.
#[inline]
fn line_end(b: &[u8]) -> Option<usize> {
    b.iter().position(|&c| c == b'\n')
}

/// The payload size at the end of a `MSG subject sid [reply] size` line (no CR LF).
#[inline]
fn msg_size(line: &[u8]) -> Option<usize> {
    let sp = line.iter().rposition(|&c| c == b' ')?;
    let digits = &line[sp + 1..];
    if digits.is_empty() || digits.len() > 12 {
        return None;
    }
    let mut n = 0usize;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        n = n * 10 + (d - b'0') as usize;
    }
    Some(n)
}

impl RawSubConn {
    /// Connects and subscribes to `subject` (in queue group `queue` if given) when the
    /// server lets a plain client in; `Ok(None)` when it needs TLS or auth (use
    /// async-nats then). Returns after the server's PONG: the subscription is in place
    /// before any publisher starts.
    pub async fn connect(
        url: &str,
        name: &str,
        subject: &str,
        queue: Option<&str>,
    ) -> anyhow::Result<Option<Self>> {
        let Some(hp) = host_port(url) else {
            return Ok(None);
        };
        let s = TcpStream::connect(&hp).await?;
        s.set_nodelay(true)?;
        let (mut r, mut w) = s.into_split();
        let mut buf = vec![0u8; BUF];
        let mut end = 0usize;
        // INFO
        let info_end = loop {
            if let Some(e) = line_end(&buf[..end]) {
                break e;
            }
            let n = r.read(&mut buf[end..]).await?;
            if n == 0 {
                anyhow::bail!("{url} closed the connection before INFO");
            }
            end += n;
        };
        let info = std::str::from_utf8(&buf[..info_end])
            .ok()
            .and_then(ServerInfo::parse)
            .ok_or_else(|| anyhow::anyhow!("{url} did not greet with INFO"))?;
        if info.needs_more() {
            return Ok(None);
        }
        buf.copy_within(info_end + 1..end, 0);
        end -= info_end + 1;
        let connect = connect_json(name, false);
        let sub = match queue {
            Some(q) => format!("{subject} {q}"),
            None => subject.to_string(),
        };
        w.write_all(format!("CONNECT {connect}\r\nSUB {sub} 1\r\nPING\r\n").as_bytes())
            .await?;
        // Up to the PONG: only INFO, +OK, PING or -ERR can come before it.
        loop {
            while let Some(e) = line_end(&buf[..end]) {
                let line = String::from_utf8_lossy(&buf[..e]).trim_end().to_string();
                buf.copy_within(e + 1..end, 0);
                end -= e + 1;
                if line == "PONG" {
                    return Ok(Some(RawSubConn {
                        r,
                        w,
                        buf,
                        end,
                        url: url.to_string(),
                        name: name.to_string(),
                        subject: subject.to_string(),
                        queue: queue.map(str::to_string),
                    }));
                }
                if line == "PING" {
                    w.write_all(b"PONG\r\n").await?;
                }
                if let Some(e) = line.strip_prefix("-ERR ") {
                    anyhow::bail!("{url}: {e}");
                }
            }
            let n = r.read(&mut buf[end..]).await?;
            if n == 0 {
                anyhow::bail!("{url} closed the connection after CONNECT");
            }
            end += n;
        }
    }

    /// Connects and subscribes again: an attempt every 250 ms while `go_on` says so, for
    /// [`RECONNECT_GIVE_UP`](super::workers::RECONNECT_GIVE_UP) at most.
    async fn reconnect(&mut self, mut go_on: impl FnMut() -> bool) -> bool {
        let mut wait = Duration::from_millis(50);
        let t0 = std::time::Instant::now();
        while go_on() && t0.elapsed() < super::workers::RECONNECT_GIVE_UP {
            tokio::time::sleep(wait).await;
            wait = Duration::from_millis(250);
            let again = tokio::time::timeout(
                Duration::from_secs(1),
                RawSubConn::connect(&self.url, &self.name, &self.subject, self.queue.as_deref()),
            )
            .await;
            if let Ok(Ok(Some(c))) = again {
                *self = c;
                return true;
            }
        }
        false
    }
}

/// What one pass over the buffer found besides messages.
#[derive(Default)]
struct Pass {
    /// Bytes of complete frames at the front.
    used: usize,
    msgs: u64,
    pings: u32,
    /// Bytes the first incomplete frame needs in all (a message larger than the buffer).
    need: usize,
    err: Option<String>,
    /// The stream cannot be read on (an unreadable `MSG` line).
    fatal: bool,
}

/// Parses the complete frames of `b`, recording every message as received at `now`
/// (run clock) and `rt` (CLOCK_REALTIME, for the end-to-end latency from its stamp).
#[inline]
fn parse(b: &[u8], now: u64, rt: u64, rec: &mut Recorder, limit: u64) -> Pass {
    let mut p = Pass::default();
    let mut i = 0usize;
    while i < b.len() && p.msgs < limit {
        let rest = &b[i..];
        let Some(nl) = line_end(rest) else {
            break;
        };
        let line = rest[..nl].strip_suffix(b"\r").unwrap_or(&rest[..nl]);
        if let Some(head) = line.strip_prefix(b"MSG ") {
            let Some(size) = msg_size(head) else {
                p.err = Some(format!(
                    "unreadable MSG line: {}",
                    String::from_utf8_lossy(line)
                ));
                p.fatal = true;
                break;
            };
            let total = nl + 1 + size + 2;
            if rest.len() < total {
                p.need = total;
                break;
            }
            let payload = &rest[nl + 1..nl + 1 + size];
            match read_stamp(payload) {
                Some(sent) => rec.op_e2e(now, size as u64, rt.saturating_sub(sent)),
                None => rec.op(now, size as u64),
            }
            p.msgs += 1;
            i += total;
        } else {
            if line == b"PING" {
                p.pings += 1;
            } else if let Some(e) = line.strip_prefix(b"-ERR ") {
                p.err = Some(String::from_utf8_lossy(e).into_owned());
            }
            i += nl + 1;
        }
    }
    p.used = i;
    p
}

/// Receives on `conn` until the rules of [`receiver_should_end`] say to stop; `flow`: this
/// subscriber's slot in the run's flow control (index `i`).
pub(crate) async fn raw_receive_loop(
    mut conn: RawSubConn,
    mut rec: Recorder,
    ctx: Ctx,
    flow: Option<Arc<Flow>>,
) {
    let i = rec.index();
    let mut stall = std::env::var(STALL_ENV)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|_| i == 0);
    let mut got = 0u64;
    let mut last = rec.now();
    let mut fault = FaultWatch::default();
    let mut start = 0usize;
    let limit = ctx.expected.unwrap_or(u64::MAX);
    // Set when the loop ended on a fault it has already recorded.
    let mut said = false;
    loop {
        let now = rec.now();
        let reached = got >= limit;
        let idle_ends = got > 0 && ctx.end_ns.is_none();
        if receiver_should_end(&ctx, reached, last, now, idle_ends) {
            break;
        }
        let end = conn.end;
        if end == conn.buf.len() {
            // Full: move the incomplete frame to the front, or grow for a large message.
            if start > 0 {
                conn.buf.copy_within(start..end, 0);
                conn.end -= start;
                start = 0;
            } else {
                let n = conn.buf.len() * 2;
                conn.buf.resize(n, 0);
            }
            continue;
        }
        let read = tokio::time::timeout(
            Duration::from_millis(100),
            conn.r.read(&mut conn.buf[end..]),
        )
        .await;
        let n = match read {
            Err(_) => continue,
            Ok(Ok(n)) if n > 0 => n,
            Ok(r) => {
                let why = match r {
                    Ok(_) => "the server closed the connection".to_string(),
                    Err(e) => e.to_string(),
                };
                let lost_ns = rec.now();
                ctx.events.event_at(
                    lost_ns,
                    Body::NatsClient(ev::NatsClient {
                        client: rec.client_name().to_string(),
                        event: format!("raw subscriber disconnected: {why}"),
                        received: Some(got),
                    }),
                );
                // One error at the moment the loss was seen (as a publisher's): the
                // summary says when, the exit code that it happened.
                rec.error(lost_ns, "disconnected", || format!("raw subscriber: {why}"));
                fault.failed("disconnected", 1);
                // Tries again while the run goes on: while its senders send, or (alone)
                // until --duration; with senders done, for IDLE_NS after the later of
                // their end and the last message (from `last`, not from now: counted
                // from now, a run whose server was gone never ended, issue 25).
                let again = {
                    let (c, r) = (&ctx, &rec);
                    conn.reconnect(|| {
                        let now = r.now();
                        !receiver_should_end(c, false, last, now, false)
                            && !c.stop.load(Ordering::Relaxed)
                    })
                    .await
                };
                if !again {
                    said = true; // already said: the connection was lost
                    break;
                }
                start = 0;
                let now = rec.now();
                fault.reconnect_ns = Some(now);
                last = last.max(now);
                continue;
            }
        };
        conn.end += n;
        let now = rec.now();
        let rt = realtime_ns();
        let p = parse(
            &conn.buf[start..conn.end],
            now,
            rt,
            &mut rec,
            limit.saturating_sub(got),
        );
        start += p.used;
        if start == conn.end {
            start = 0;
            conn.end = 0;
        } else if p.need > conn.buf.len() - start {
            conn.buf.copy_within(start..conn.end, 0);
            conn.end -= start;
            start = 0;
            if p.need > conn.buf.len() {
                conn.buf.resize(p.need.next_power_of_two(), 0);
            }
        }
        if p.msgs > 0 {
            got += p.msgs;
            last = now;
            fault.ok(now, &rec, &ctx);
            if let Some(f) = &flow {
                f.received(i, got);
            }
        }
        if p.pings > 0 {
            let _ = conn.w.write_all(b"PONG\r\n").await;
        }
        if let Some(e) = p.err {
            rec.error(now, "server_error", || format!("raw subscriber: {e}"));
            fault.failed("server_error", 1);
            if p.fatal {
                said = true; // already said: the server's error
                break;
            }
        }
        if let Some(ms) = stall.take() {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
    }
    if let Some(f) = &flow {
        f.leave(i);
    }
    fault.end(rec.now(), &rec, &ctx);
    if let Some(e) = ctx.expected {
        if got < e && !ctx.stop.load(Ordering::Relaxed) {
            let n = e - got;
            rec.error_n(rec.now(), "missing", n, || {
                format!(
                    "{n} of {e} messages never arrived (the server dropped them: slow consumer)"
                )
            });
        }
    }
    conn.close(said, &mut rec).await;
    rec.finish();
}

/// How long the end-of-run `PING` waits for its `PONG`.
const END_PONG: Duration = Duration::from_secs(2);

impl RawSubConn {
    /// Ends the subscription. `said`: the loop ended on a fault it recorded; otherwise a
    /// server that does not answer the end's `PING` is one `no_pong` error: a stopped or
    /// hung server looks like a quiet subject to a subscriber alone (issue 25: a `load
    /// sub` whose server was SIGSTOPped exited 0 and said nothing).
    async fn close(mut self, said: bool, rec: &mut Recorder) {
        if said {
            let _ = self.w.write_all(b"UNSUB 1\r\n").await;
        } else if !self.still_answers().await {
            rec.error(rec.now(), "no_pong", || {
                format!(
                    "raw subscriber: the server did not answer a PING within {} s at the end of the run (stopped or hung?)",
                    END_PONG.as_secs()
                )
            });
        }
        let _ = self.w.shutdown().await;
    }

    /// Unsubscribes and asks `PING`: true when the `PONG` comes within [`END_PONG`]
    /// (messages still arriving before it are not counted: the run has ended).
    async fn still_answers(&mut self) -> bool {
        if self.w.write_all(b"UNSUB 1\r\nPING\r\n").await.is_err() {
            return false;
        }
        let deadline = tokio::time::Instant::now() + END_PONG;
        // The last bytes of the previous read: a PONG split between two reads.
        let mut tail: Vec<u8> = Vec::with_capacity(8);
        let mut b = vec![0u8; 64 * 1024];
        loop {
            let n = match tokio::time::timeout_at(deadline, self.r.read(&mut b)).await {
                Ok(Ok(n)) if n > 0 => n,
                _ => return false,
            };
            tail.extend_from_slice(&b[..n.min(b.len())]);
            if tail.windows(6).any(|w| w == b"PONG\r\n") {
                return true;
            }
            let keep = tail.len().saturating_sub(5);
            tail.drain(..keep);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_size_is_the_last_field_of_a_msg_line() {
        assert_eq!(msg_size(b"foo.bar 1 128"), Some(128));
        assert_eq!(msg_size(b"foo.bar 1 _INBOX.x 0"), Some(0));
        assert_eq!(msg_size(b"foo.bar 1 12x"), None);
        assert_eq!(msg_size(b"foo.bar 1 "), None);
    }

    #[test]
    fn frames_are_parsed_in_place_and_a_cut_message_waits_for_its_rest() {
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let clock = collectors::clock::Clock::start();
        let mut rec = Recorder::new(
            super::super::record::Role::Sub,
            0,
            "s",
            clock,
            100_000_000,
            tx,
        );
        let mut b = Vec::new();
        b.extend_from_slice(b"MSG a.b 1 3\r\nxyz\r\n+OK\r\nPING\r\nMSG a.b 1 _INBOX.r 0\r\n\r\n");
        let whole = b.len();
        b.extend_from_slice(b"MSG a.b 1 10\r\n12345");
        let p = parse(&b, 1, 1, &mut rec, u64::MAX);
        assert_eq!((p.msgs, p.pings, p.used), (2, 1, whole));
        assert_eq!(p.need, "MSG a.b 1 10\r\n".len() + 12);
        assert!(p.err.is_none() && !p.fatal);
        assert_eq!(rec.ops(), 2);
        // At most `limit` messages are taken.
        let p = parse(&b, 1, 1, &mut rec, 1);
        assert_eq!((p.msgs, p.used), (1, "MSG a.b 1 3\r\nxyz\r\n".len()));
        // A line that is not the protocol ends the reading.
        let p = parse(b"MSG a.b 1 x\r\n", 1, 1, &mut rec, u64::MAX);
        assert!(p.fatal && p.err.is_some());
        let p = parse(
            b"-ERR 'Permissions Violation'\r\n",
            1,
            1,
            &mut rec,
            u64::MAX,
        );
        assert!(!p.fatal && p.err.is_some() && p.used > 0);
    }

    #[test]
    fn only_plain_urls_go_raw() {
        assert_eq!(
            host_port("nats://127.0.0.1:4222").as_deref(),
            Some("127.0.0.1:4222")
        );
        assert_eq!(host_port("nats://u:p@h:4222"), None);
    }
}
