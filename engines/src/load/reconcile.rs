//! js-pub's reconciliation (issue 9): after the run, what the stream holds (from the
//! server) beside what was acked.
//!
//! - Always: every acked message must be there (`stored >= acked`); a shortfall is
//!   possible data loss. More than acked is normal after a fault: a publish whose ack was
//!   lost (counted `timeout` at the reconnect, or `unacked_at_stop`) may still have been
//!   stored.
//! - `--msg-id`: every publish carries `Nats-Msg-Id: <run>-<client>-<k>` (`<run>` is the
//!   run's start in CLOCK_REALTIME ns, hex, so ids of two runs never meet in the stream's
//!   duplicate window). A publish whose ack never came is remembered by its id ([`MsgIds`];
//!   an ack or a definite error forgets it). After the stream is counted, each of those is
//!   published again with its own id (the retry): the stream's duplicate window drops the
//!   ones it already holds and says so in the ack (`duplicate`), and stores the others.
//!   That makes the reconciliation exact: `stored == acked + lost_stored` (stored during
//!   the run = acked + the lost ones the server did store), and after the retry the stream
//!   holds every message of the run exactly once (`msgs_final - msgs_before == acked +
//!   lost`, when every retry was acked). The retry must run within the duplicate window
//!   (2 minutes by default) of the original publish.
//!
//! Cost of `--msg-id`: a header map and an id string per publish, and a lock to remember
//! it; without it, publishing is unchanged.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream;
use futures::stream::FuturesUnordered;
use futures::StreamExt;

/// The reconciliation (see the module) and what the retry found: types of the format
/// crate's, as `load --json` prints them and a scenario reads them back.
pub use format::load::{Retried, StreamCheck};

/// The stream's message count, from the server; `by_sequence` (js-pub `--discard old`,
/// whose full stream drops its oldest messages as it stores new ones): its last sequence
/// instead, which grows by one per message stored and never shrinks, so "stored during
/// the run" stays the difference of two readings.
pub(crate) async fn stream_msgs(
    client: &async_nats::Client,
    stream: &str,
    by_sequence: bool,
) -> anyhow::Result<u64> {
    if !super::connect::connected_within(client, super::connect::AFTER_RUN_RECONNECT).await {
        anyhow::bail!("stream '{stream}': the connection to the server is gone");
    }
    let js = jetstream::new(client.clone());
    tokio::time::timeout(Duration::from_secs(10), async {
        let mut s = js.get_stream(stream).await?;
        let state = &s.info().await?.state;
        anyhow::Ok(if by_sequence {
            state.last_sequence
        } else {
            state.messages
        })
    })
    .await
    .map_err(|_| anyhow::anyhow!("stream '{stream}': no stream info within 10 s"))?
}

/// The message ids of a run's js-pub publishes whose ack has not come (yet); shared by
/// every publisher of the run.
#[derive(Clone)]
pub(crate) struct MsgIds {
    run: Arc<str>,
    unacked: Arc<Mutex<BTreeSet<(usize, u64)>>>,
}

impl MsgIds {
    /// Ids for a run started now.
    pub fn new() -> MsgIds {
        MsgIds {
            run: format!("{:x}", super::record::realtime_ns()).into(),
            unacked: Arc::default(),
        }
    }

    /// The id of publish `k` of client `client`.
    pub fn id(&self, client: usize, k: u64) -> String {
        format!("{}-{client}-{k}", self.run)
    }

    fn set(&self) -> std::sync::MutexGuard<'_, BTreeSet<(usize, u64)>> {
        self.unacked.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Publish `k` of `client` was sent; its ack has not come.
    pub fn sent(&self, client: usize, k: u64) {
        self.set().insert((client, k));
    }

    /// Its ack came, or a definite error: not lost.
    pub fn settled(&self, client: usize, k: u64) {
        self.set().remove(&(client, k));
    }

    /// The publishes whose ack never came.
    pub fn lost(&self) -> Vec<(usize, u64)> {
        self.set().iter().copied().collect()
    }
}

impl Default for MsgIds {
    fn default() -> Self {
        MsgIds::new()
    }
}

/// Publishes every lost message again with its id (see the module), `size` bytes each,
/// 256 in flight. `msgs_final` is left for the caller to fill.
pub(crate) async fn retry_lost(
    client: &async_nats::Client,
    subject: &str,
    ids: &MsgIds,
    size: usize,
) -> Retried {
    let js = jetstream::new(client.clone());
    let lost = ids.lost();
    let payload = bytes::Bytes::from(vec![b'x'; size]);
    let mut r = Retried {
        lost: lost.len() as u64,
        ..Default::default()
    };
    let mut inflight = FuturesUnordered::new();
    let mut todo = lost.into_iter();
    loop {
        while inflight.len() < 256 {
            let Some((c, k)) = todo.next() else { break };
            let mut h = async_nats::HeaderMap::new();
            h.insert(async_nats::header::NATS_MESSAGE_ID, ids.id(c, k).as_str());
            let (js, subject, payload) = (js.clone(), subject.to_string(), payload.clone());
            inflight.push(async move {
                tokio::time::timeout(Duration::from_secs(10), async move {
                    js.publish_with_headers(subject, h, payload).await?.await
                })
                .await
            });
        }
        match inflight.next().await {
            None => break,
            Some(Ok(Ok(ack))) if ack.duplicate => r.lost_stored += 1,
            Some(Ok(Ok(_))) => r.republished += 1,
            Some(_) => r.retry_failed += 1,
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_remembered_until_settled_and_unique_per_client_and_publish() {
        let ids = MsgIds::new();
        ids.sent(0, 1);
        ids.sent(1, 1);
        ids.sent(0, 2);
        ids.settled(0, 2);
        assert_eq!(ids.lost(), vec![(0, 1), (1, 1)]);
        assert_ne!(ids.id(0, 1), ids.id(1, 1));
        assert!(ids.id(3, 7).ends_with("-3-7"));
    }

    #[test]
    fn the_msg_id_relation_is_exact_only_when_every_retry_was_acked() {
        let mut c = StreamCheck {
            stream: "S".into(),
            msgs_before: 10,
            msgs_after: Some(1_010 + 40),
            acked: 1_000,
            msg_id: Some(Retried {
                lost: 256,
                lost_stored: 40,
                republished: 216,
                retry_failed: 0,
                msgs_final: Some(1_266),
            }),
        };
        assert_eq!(c.exact(), Some(true));
        c.msgs_after = Some(1_010 + 39);
        assert_eq!(c.exact(), Some(false));
        c.msg_id.as_mut().unwrap().retry_failed = 1;
        assert_eq!(c.exact(), None);
    }
}
