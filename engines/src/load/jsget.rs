//! `load js-get`: gets of a stream's stored messages by sequence (natscli v0.2's `nats
//! bench js get sync`, its `jsgetdirectsync`).
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
