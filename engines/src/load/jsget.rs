//! `load js-get`: gets of a stream's stored messages by sequence (natscli v0.2's `nats
//! bench js get sync`, its `jsgetdirectsync`; with `--get-batch N` its `js get batch`,
//! batched direct gets: [`BatchGet`]).
//!
//! - Each client reads sequences `first, first+1, ...` from the stream's first sequence
//!   when it opens, as natscli's getters do (every getter reads the same messages); its
//!   share of `--msgs` is how many. `nats-bench js get --msgs N --clients C` gives each
//!   client N, as natscli, so it runs `js-get --msgs N x C`.
//! - A direct get (`$JS.API.DIRECT.GET.<stream>`, async-nats's `Stream::direct_get`) when
//!   the stream allows direct gets, else the stream's message-get API
//!   (`$JS.API.STREAM.MSG.GET.<stream>`, `Stream::get_raw_message`): what nats.go's
//!   `Stream.GetMsg`, natscli's call, picks.
//! - A sequence the stream does not hold (fewer messages than `--msgs`, or purged) is one
//!   error of kind `not_found`; any other failure is kind `timeout` or `get`.
//! - Latency is each get's own, from its request to its message; bytes are the
//!   message's payload.

use async_nats::jetstream;

use super::send::{Each, OpError};
use super::LoadArgs;

/// One client's view of the stream: where it starts and how it gets.
pub(crate) struct Getter {
    stream: jetstream::stream::Stream,
    first: u64,
    direct: bool,
}

/// Opens the stream on the client's own connection (before the load starts).
pub(crate) async fn open(a: &LoadArgs, client: &async_nats::Client) -> anyhow::Result<Getter> {
    let js = super::js_context(client.clone(), 1, a.timeout);
    let mut stream = js
        .get_stream(&a.stream)
        .await
        .map_err(|e| anyhow::anyhow!("cannot open stream '{}': {e}", a.stream))?;
    let info = stream.info().await?;
    Ok(Getter {
        first: info.state.first_sequence.max(1),
        direct: info.config.allow_direct,
        stream,
    })
}

impl Getter {
    /// The operation: get `k` reads sequence `first + k`.
    pub(crate) fn operation(
        self,
        client: &async_nats::Client,
    ) -> Each<impl FnMut(u64) -> Option<futures::future::BoxFuture<'static, super::send::OpResult>>>
    {
        use futures::FutureExt;
        let Getter {
            stream,
            first,
            direct,
        } = self;
        Each::on(client, move |k| {
            let (s, seq) = (stream.clone(), first + k);
            Some(
                async move {
                    if direct {
                        s.direct_get(seq)
                            .await
                            .map(|m| m.payload.len() as u64)
                            .map_err(|e| {
                                use jetstream::stream::DirectGetErrorKind as K;
                                let kind = match e.kind() {
                                    K::NotFound => "not_found",
                                    K::TimedOut => "timeout",
                                    _ => "get",
                                };
                                OpError::new(kind, format_args!("sequence {seq}: {e}"))
                            })
                    } else {
                        s.get_raw_message(seq)
                            .await
                            .map(|m| m.payload.len() as u64)
                            .map_err(|e| {
                                let t = e.to_string();
                                let kind = if t.contains("not found") || t.contains("no message") {
                                    "not_found"
                                } else {
                                    "get"
                                };
                                OpError::new(kind, format_args!("sequence {seq}: {t}"))
                            })
                    }
                }
                .boxed(),
            )
        })
    }
}

/// `js-get --get-batch N` (natscli's `js get batch`, `jsgetdirectbatch`): batched direct
/// gets (ADR-31). Every N-th get asks `$JS.API.DIRECT.GET.<stream>` for `{"batch": N,
/// "seq": S}` on an inbox of its own and completes when the server's end of batch (status
/// 204) comes: that is the one timed operation of the batch, as natscli times one latency
/// per batch. The batch's other messages are the next N-1 gets, done at once from what came
/// (a batch shorter than asked makes the missing ones `not_found`). The next batch starts
/// after the last sequence that came, as natscli's `nextSeq`.
pub(crate) struct BatchGet {
    client: async_nats::Client,
    connects: super::send::Connects,
    subject: String,
    n: u64,
    timeout: std::time::Duration,
    state: std::sync::Arc<std::sync::Mutex<Batch>>,
}

/// What the last batch brought: the payload sizes not yet counted, the next sequence.
struct Batch {
    sizes: std::collections::VecDeque<u64>,
    next_seq: u64,
}

impl BatchGet {
    pub(crate) fn new(g: Getter, client: &async_nats::Client, a: &LoadArgs, n: u64) -> BatchGet {
        BatchGet {
            client: client.clone(),
            connects: super::send::Connects::of(client),
            subject: format!("$JS.API.DIRECT.GET.{}", a.stream),
            n: n.max(1),
            timeout: a.timeout,
            state: std::sync::Arc::new(std::sync::Mutex::new(Batch {
                sizes: Default::default(),
                next_seq: g.first,
            })),
        }
    }
}

/// One batched direct get of `n` from `seq`: the payload sizes and the last sequence.
async fn get_batch(
    client: async_nats::Client,
    subject: String,
    seq: u64,
    n: u64,
    timeout: std::time::Duration,
) -> Result<(std::collections::VecDeque<u64>, u64), OpError> {
    use futures::StreamExt;
    let inbox = client.new_inbox();
    let mut sub = client
        .subscribe(inbox.clone())
        .await
        .map_err(|e| OpError::new("get", e))?;
    let body = format!(r#"{{"batch":{n},"seq":{seq}}}"#);
    client
        .publish_with_reply(subject, inbox, body.into())
        .await
        .map_err(|e| OpError::new("get", e))?;
    let (mut sizes, mut last) = (std::collections::VecDeque::new(), seq.saturating_sub(1));
    loop {
        let m = match tokio::time::timeout(timeout, sub.next()).await {
            Ok(Some(m)) => m,
            Ok(None) => break,
            Err(_) => {
                return Err(OpError::new(
                    "timeout",
                    format_args!("batch from sequence {seq}: no end of batch within {timeout:?}"),
                ))
            }
        };
        match m.status.map(|s| s.as_u16()) {
            // The end of the batch (204), or nothing at or after `seq` (404).
            Some(204 | 404) => break,
            Some(code) => {
                let d = m.description.unwrap_or_default();
                return Err(OpError::new(
                    "get",
                    format_args!("batch from sequence {seq}: status {code} {d}"),
                ));
            }
            None => {
                sizes.push_back(m.payload.len() as u64);
                let s = m.headers.as_ref().and_then(|h| h.get("Nats-Sequence"));
                if let Some(s) = s.and_then(|v| v.as_str().parse::<u64>().ok()) {
                    last = s;
                }
            }
        }
    }
    let _ = sub.unsubscribe().await;
    Ok((sizes, last))
}

impl super::send::Operation for BatchGet {
    type Pending = futures::future::BoxFuture<'static, super::send::OpResult>;

    fn connects(&self) -> u64 {
        self.connects.get()
    }

    fn connected(&self) -> bool {
        self.connects.connected()
    }

    async fn send(&mut self, k: u64) -> Option<super::send::Sent<Self::Pending>> {
        use super::send::Sent;
        use futures::FutureExt;
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if !k.is_multiple_of(self.n) {
            return Some(match st.sizes.pop_front() {
                Some(b) => Sent::Done(b),
                None => Sent::Failed(OpError::new(
                    "not_found",
                    "the batch held fewer messages than asked (the stream's end)",
                )),
            });
        }
        st.sizes.clear();
        let (client, subject, seq) = (self.client.clone(), self.subject.clone(), st.next_seq);
        let (n, timeout, state) = (self.n, self.timeout, self.state.clone());
        Some(Sent::Pending(
            async move {
                let (mut sizes, last) = get_batch(client, subject, seq, n, timeout).await?;
                let first = sizes.pop_front().ok_or_else(|| {
                    OpError::new("not_found", format_args!("no message from sequence {seq}"))
                })?;
                let mut st = state.lock().unwrap_or_else(|p| p.into_inner());
                st.sizes = sizes;
                st.next_seq = last + 1;
                Ok(first)
            }
            .boxed(),
        ))
    }
}
