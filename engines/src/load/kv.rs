//! `kv-put` and `kv-get`: a JetStream key-value bucket with a key space of `--keys`
//! keys (`k0000001` ...) whose values are derived from the key and length
//! ([`super::content`]), so `kv-get` verifies every value it reads.
//!
//! - `kv-put` creates the bucket if it is missing (`--replicas`, `--storage`,
//!   `--max-bytes`; history 1, discard new as every KV bucket), `--purge` empties it first.
//!   Worker `i` of `n` puts keys `i, i+n, i+2n, ...` (modulo `--keys`), so `--msgs` equal
//!   to `--keys` writes every key once. A put is a JetStream publish to `$KV.<bucket>.<key>`
//!   and its ack (what the clients' `Put` does), with up to `--window` in flight per client.
//!   Subjects and values are carved from shared buffers: no allocation per put.
//! - `kv-get` reads random keys (splitmix64, no allocation) with a direct get of the
//!   key's last message (`$JS.API.DIRECT.GET.KV_<bucket>.$KV.<bucket>.<key>`, what the
//!   clients' `Get` does on a bucket with direct gets, the default) and checks the value:
//!   a missing or deleted key is error kind `not_found`, a value that is not what
//!   `kv-put` wrote for that key and length is `mismatch`. Buckets without direct gets are
//!   read through async-nats's `Store::get`.
//!
//! Latency is from the send to the ack (put) or to the value (get), and from the intended
//! start with `--rate`.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{self, kv};

use super::content::{kv_seed, matches, Rng, SubjectArena, ValueArena};
use super::js::stream_exists;
use super::record::Recorder;
use super::send::{send_loop, Each, OpError};
use super::workers::{publish_error_kind, request_error_kind, Ctx, SendPlan};
use super::{storage_type, LoadArgs};

fn stream_name(bucket: &str) -> String {
    format!("KV_{bucket}")
}

/// kv-put: creates (or opens) the bucket and purges it with --purge. kv-get: checks that
/// it exists. Returns whether gets can use direct gets.
pub async fn prepare(
    a: &LoadArgs,
    js: &jetstream::Context,
    url: &str,
    put: bool,
) -> anyhow::Result<bool> {
    let name = stream_name(&a.bucket);
    let exists = stream_exists(js, &name).await?;
    if !exists && !put {
        anyhow::bail!(
            "KV bucket '{}' not found at {url}; create it with `diskpulse load kv-put --bucket {}` first",
            a.bucket,
            a.bucket
        );
    }
    if !exists {
        js.create_key_value(kv::Config {
            bucket: a.bucket.clone(),
            description: "diskpulse load kv-put".into(),
            history: i64::from(a.history.unwrap_or(1)),
            max_bytes: a.max_bytes.map(|b| b as i64).unwrap_or(-1),
            max_value_size: -1,
            storage: storage_type(a.storage),
            num_replicas: a.replicas,
            ..Default::default()
        })
        .await
        .map_err(|e| anyhow::anyhow!("cannot create KV bucket '{}': {e}", a.bucket))?;
    }
    let mut stream = js
        .get_stream(&name)
        .await
        .map_err(|e| anyhow::anyhow!("cannot open KV bucket '{}': {e}", a.bucket))?;
    if put && a.purge {
        stream
            .purge()
            .await
            .map_err(|e| anyhow::anyhow!("cannot purge KV bucket '{}': {e}", a.bucket))?;
    }
    let info = stream.info().await?;
    Ok(info.config.allow_direct)
}

/// Where worker `index` of `n` puts or gets.
pub struct KeySpace {
    pub keys: u64,
    pub index: usize,
    pub n: usize,
}

/// A kv-put client.
#[allow(clippy::too_many_arguments)]
pub async fn put(
    js: jetstream::Context,
    bucket: String,
    space: KeySpace,
    window: usize,
    plan: SendPlan,
    rec: Recorder,
    ctx: Ctx,
) {
    let js = Arc::new(js);
    let size = plan.size;
    let mut subjects = SubjectArena::new(format!("$KV.{bucket}."));
    let mut values = ValueArena::new();
    let (i0, n, keys) = (space.index as u64, space.n as u64, space.keys.max(1));
    let client = js.client();
    send_loop(
        Each::on(&client, |k| {
            let i = (i0 + k * n) % keys;
            let subject = subjects.subject(b'k', i);
            let value = values.value(kv_seed(i, size), size);
            let js = js.clone();
            Some(async move {
                let ack = js
                    .publish(subject, value)
                    .await
                    .map_err(|e| OpError::new(publish_error_kind(&e), e))?;
                ack.await
                    .map_err(|e| OpError::new(publish_error_kind(&e), e))?;
                Ok(size as u64)
            })
        }),
        window,
        plan,
        rec,
        ctx,
    )
    .await;
}

/// Checks a value read back for key index `i`.
fn verify(i: u64, value: &[u8]) -> Result<u64, OpError> {
    if matches(kv_seed(i, value.len()), 0, value) {
        Ok(value.len() as u64)
    } else {
        Err(OpError::new(
            "mismatch",
            format_args!(
                "key {} holds {} bytes that are not what kv-put wrote",
                super::content::key_name(i),
                value.len()
            ),
        ))
    }
}

/// A kv-get client: random keys, every value verified.
#[allow(clippy::too_many_arguments)]
pub async fn get(
    client: async_nats::Client,
    bucket: String,
    direct: bool,
    space: KeySpace,
    window: usize,
    timeout: Duration,
    plan: SendPlan,
    rec: Recorder,
    ctx: Ctx,
) {
    let mut rng = Rng::new(super::record::realtime_ns() ^ (space.index as u64) << 48);
    let keys = space.keys.max(1);
    if direct {
        let mut subjects = SubjectArena::new(format!(
            "$JS.API.DIRECT.GET.{}.$KV.{bucket}.",
            stream_name(&bucket)
        ));
        let on = client.clone();
        send_loop(
            Each::on(&on, |_| {
                let i = rng.below(keys);
                let subject = subjects.subject(b'k', i);
                let c = client.clone();
                Some(async move {
                    let m = match tokio::time::timeout(
                        timeout,
                        c.request(subject, bytes::Bytes::new()),
                    )
                    .await
                    {
                        Ok(Ok(m)) => m,
                        Ok(Err(e)) => return Err(OpError::new(request_error_kind(&e), e)),
                        Err(_) => {
                            return Err(OpError::new(
                                "timeout",
                                format_args!("no answer within {timeout:?}"),
                            ))
                        }
                    };
                    let deleted = m
                        .headers
                        .as_ref()
                        .and_then(|h| h.get("KV-Operation"))
                        .is_some_and(|v| v.as_str() == "DEL" || v.as_str() == "PURGE");
                    match m.status {
                        Some(s) if s == async_nats::StatusCode::NOT_FOUND => Err(OpError::new(
                            "not_found",
                            format_args!("key {} is not in bucket", super::content::key_name(i)),
                        )),
                        Some(s) if s != async_nats::StatusCode::OK => Err(OpError::new(
                            "kv_get",
                            format_args!(
                                "direct get answered {s}: {}",
                                m.description.unwrap_or_default()
                            ),
                        )),
                        _ if deleted => Err(OpError::new(
                            "not_found",
                            format_args!("key {} was deleted", super::content::key_name(i)),
                        )),
                        _ => verify(i, &m.payload),
                    }
                })
            }),
            window,
            plan,
            rec,
            ctx,
        )
        .await;
    } else {
        let js = jetstream::new(client.clone());
        let store = match js.get_key_value(bucket.clone()).await {
            Ok(s) => Arc::new(s),
            Err(e) => {
                let mut rec = rec;
                rec.error(rec.now(), "kv_open", || e.to_string());
                rec.finish();
                return;
            }
        };
        send_loop(
            Each::on(&client, |_| {
                let i = rng.below(keys);
                let store = store.clone();
                Some(async move {
                    match tokio::time::timeout(timeout, store.get(super::content::key_name(i)))
                        .await
                    {
                        Ok(Ok(Some(v))) => verify(i, &v),
                        Ok(Ok(None)) => Err(OpError::new(
                            "not_found",
                            format_args!("key {} is not in bucket", super::content::key_name(i)),
                        )),
                        Ok(Err(e)) => Err(OpError::new("kv_get", e)),
                        Err(_) => Err(OpError::new(
                            "timeout",
                            format_args!("no answer within {timeout:?}"),
                        )),
                    }
                })
            }),
            window,
            plan,
            rec,
            ctx,
        )
        .await;
    }
}
