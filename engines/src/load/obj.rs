//! `obj-put` and `obj-get`: the JetStream object store, as in the reference storage study
//! (object sizes 1 KiB to 1 MiB, N putting workers, K getting consumers spread over the
//! servers).
//!
//! - Objects are `o0000001`, `o0000002`, ... with a body derived from the name and size
//!   ([`super::content`]). Worker `i` of `n` puts objects `i, i+n, ...`, so `--objects`
//!   objects (split over `--workers`) get distinct names. `obj-put` creates the bucket if
//!   it is missing (`--replicas`, `--storage`, `--max-bytes`); `--purge` empties it first.
//! - `obj-put --consumers K` starts K getters at the same time as the putters: each GETs
//!   random objects already put in this run (waiting for the first), `--objects` gets in
//!   all split over the K (the study's "objects per consumer"). `obj-get` alone lists the
//!   bucket and GETs random diskpulse objects already in it, `--objects` (or `--msgs`) in
//!   all over `--consumers` (or `--clients`).
//! - Every GET is verified: SHA-256 of the bytes that came back must equal the digest in
//!   the object's info (`SHA-256=<base64url>`), the length must equal its size, and the
//!   bytes must be what diskpulse put under that name; otherwise error kind
//!   `digest_mismatch`. A missing object is `not_found`.
//!
//! Latency of an operation is the whole PUT (metadata lookup, every chunk published and
//! acked, the metadata written) or the whole GET (info, ordered consumer, every chunk read
//! and checked). A PUT's body is generated per operation (one allocation of the object's
//! size): the client's own chunking allocates as much again, and an object operation
//! takes milliseconds.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::{self, object_store};
use futures::StreamExt;
use sha2::{Digest, Sha256};
use tokio::io::AsyncReadExt;

use super::content::{body, digest_text, matches, name_index, obj_seed, object_name, Rng};
use super::js::stream_exists;
use super::record::Recorder;
use super::send::{send_loop, Each, OpError};
use super::workers::{Ctx, SendPlan};
use super::{storage_type, LoadArgs};

fn stream_name(bucket: &str) -> String {
    format!("OBJ_{bucket}")
}

/// The objects getters may read: filled by putters as their PUTs complete, or from the
/// bucket's listing for `obj-get` alone. A lock held for a push or a pick (nanoseconds,
/// against operations of milliseconds).
#[derive(Default)]
pub struct Catalog {
    ids: Mutex<Vec<u64>>,
}

impl Catalog {
    pub fn push(&self, i: u64) {
        self.ids.lock().unwrap_or_else(|p| p.into_inner()).push(i);
    }

    pub fn len(&self) -> usize {
        self.ids.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A random entry, if there is one.
    pub fn pick(&self, rng: &mut Rng) -> Option<u64> {
        let g = self.ids.lock().unwrap_or_else(|p| p.into_inner());
        (!g.is_empty()).then(|| g[rng.below(g.len() as u64) as usize])
    }
}

/// obj-put: creates (or opens) the bucket, purges it with --purge; an empty catalog.
/// obj-get: the bucket must exist and hold diskpulse objects; they fill the catalog.
pub async fn prepare(
    a: &LoadArgs,
    js: &jetstream::Context,
    url: &str,
    put: bool,
) -> anyhow::Result<Arc<Catalog>> {
    let name = stream_name(&a.bucket);
    let exists = stream_exists(js, &name).await?;
    let catalog = Arc::new(Catalog::default());
    if !put {
        if !exists {
            anyhow::bail!(
                "object store bucket '{}' not found at {url}; create it with `diskpulse load obj-put --bucket {}` first",
                a.bucket,
                a.bucket
            );
        }
        let store = js
            .get_object_store(&a.bucket)
            .await
            .map_err(|e| anyhow::anyhow!("cannot open object store bucket '{}': {e}", a.bucket))?;
        let mut list = store
            .list()
            .await
            .map_err(|e| anyhow::anyhow!("cannot list object store bucket '{}': {e}", a.bucket))?;
        while let Some(info) = list.next().await {
            let info = info.map_err(|e| {
                anyhow::anyhow!("cannot list object store bucket '{}': {e}", a.bucket)
            })?;
            if let Some(i) = name_index(&info.name, 'o') {
                catalog.push(i);
            }
        }
        if catalog.is_empty() {
            anyhow::bail!(
                "object store bucket '{}' at {url} holds no diskpulse objects; put some with `diskpulse load obj-put --bucket {}` first",
                a.bucket,
                a.bucket
            );
        }
        return Ok(catalog);
    }
    if !exists {
        js.create_object_store(object_store::Config {
            bucket: a.bucket.clone(),
            description: Some("diskpulse load obj-put".into()),
            max_bytes: a.max_bytes.map(|b| b as i64).unwrap_or(-1),
            storage: storage_type(a.storage),
            num_replicas: a.replicas,
            ..Default::default()
        })
        .await
        .map_err(|e| anyhow::anyhow!("cannot create object store bucket '{}': {e}", a.bucket))?;
    }
    if a.purge {
        js.get_stream(&name)
            .await
            .map_err(|e| anyhow::anyhow!("cannot open object store bucket '{}': {e}", a.bucket))?
            .purge()
            .await
            .map_err(|e| anyhow::anyhow!("cannot purge object store bucket '{}': {e}", a.bucket))?;
    }
    Ok(catalog)
}

/// Opens the bucket on a client's own connection.
pub async fn open(
    a: &LoadArgs,
    js: &jetstream::Context,
) -> anyhow::Result<object_store::ObjectStore> {
    js.get_object_store(&a.bucket)
        .await
        .map_err(|e| anyhow::anyhow!("cannot open object store bucket '{}': {e}", a.bucket))
}

fn put_error_kind(e: &object_store::PutError) -> &'static str {
    let text = e.to_string();
    if text.contains("maximum bytes exceeded") || text.contains("maximum messages exceeded") {
        return "stream_full";
    }
    if text.contains("insufficient resources") || text.contains("resources exceeded") {
        return "storage_full";
    }
    use object_store::PutErrorKind as K;
    match e.kind() {
        K::TimedOut => "timeout",
        K::PublishChunks => "publish_chunks",
        K::PublishMetadata => "publish_metadata",
        K::PurgeOldChunks => "purge_old_chunks",
        K::InvalidName | K::ReadChunks | K::Other => "obj_put",
    }
}

/// The object store of one client, and that client (watched for reconnects: a put cut
/// mid-object by a fault is one failed operation, and the next put goes on after the
/// reconnect; see [`super::send`]).
pub struct Bucket {
    pub store: object_store::ObjectStore,
    pub client: async_nats::Client,
}

/// An obj-put worker: `--object-size` objects named by worker index and count.
#[allow(clippy::too_many_arguments)]
pub async fn put(
    bucket: Bucket,
    index: usize,
    n: usize,
    catalog: Arc<Catalog>,
    window: usize,
    plan: SendPlan,
    rec: Recorder,
    ctx: Ctx,
) {
    let store = Arc::new(bucket.store);
    let size = plan.size;
    let (i0, n) = (index as u64, n as u64);
    send_loop(
        Each::on(&bucket.client, |k| {
            let i = i0 + k * n;
            let store = store.clone();
            let catalog = catalog.clone();
            Some(async move {
                let data = body(obj_seed(i, size), size);
                let name = object_name(i);
                store
                    .put(name.as_str(), &mut &data[..])
                    .await
                    .map_err(|e| OpError::new(put_error_kind(&e), e))?;
                catalog.push(i);
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

/// GETs an object whose PUT was acknowledged. Object stores read with direct gets, which
/// any replica may answer: a follower that has not applied the PUT yet says "not found"
/// for a moment (replica lag, seen with R3 on a busy machine). Such a GET is retried for
/// up to 200 ms, and its latency includes the wait; only an object still missing then is
/// an error.
async fn get_acknowledged(store: &object_store::ObjectStore, i: u64) -> Result<u64, OpError> {
    let mut tries = 0;
    loop {
        match get_verified(store, i).await {
            Err(e) if e.kind == "not_found" && tries < 10 => {
                tries += 1;
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            r => return r,
        }
    }
}

/// GETs object `i` and checks its length, digest and content.
async fn get_verified(store: &object_store::ObjectStore, i: u64) -> Result<u64, OpError> {
    let name = object_name(i);
    let mut obj = store.get(&name).await.map_err(|e| match e.kind() {
        object_store::GetErrorKind::NotFound => OpError::new(
            "not_found",
            format_args!("object {name} is not in the bucket"),
        ),
        object_store::GetErrorKind::TimedOut => OpError::new("timeout", e),
        _ => OpError::new("obj_get", e),
    })?;
    let size = obj.info.size;
    let want = obj.info.digest.clone();
    let seed = obj_seed(i, size);
    let mut h = Sha256::new();
    let mut buf = vec![0u8; (64 << 10).min(size.max(1))];
    let (mut off, mut content_ok) = (0usize, true);
    loop {
        let n = obj.read(&mut buf).await.map_err(|e| {
            if e.kind() == std::io::ErrorKind::InvalidData {
                // async-nats checks the digest too and says "wrong digest".
                OpError::new("digest_mismatch", format_args!("object {name}: {e}"))
            } else {
                OpError::new("obj_read", format_args!("object {name}: {e}"))
            }
        })?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        content_ok = content_ok && matches(seed, off as u64, &buf[..n]);
        off += n;
    }
    let got = digest_text(h);
    if off != size {
        return Err(OpError::new(
            "digest_mismatch",
            format_args!("object {name}: read {off} bytes, its info says {size}"),
        ));
    }
    if want.as_deref() != Some(got.as_str()) {
        return Err(OpError::new(
            "digest_mismatch",
            format_args!("object {name}: digest {got}, its info says {want:?}"),
        ));
    }
    if !content_ok {
        return Err(OpError::new(
            "digest_mismatch",
            format_args!(
                "object {name}: digest matches its info, but the bytes are not what obj-put wrote"
            ),
        ));
    }
    Ok(size as u64)
}

/// An obj-get consumer: random objects from the catalog, each verified. Beside putters it
/// waits for the first object (a wait that is not measured).
pub async fn get(
    bucket: Bucket,
    catalog: Arc<Catalog>,
    window: usize,
    plan: SendPlan,
    rec: Recorder,
    ctx: Ctx,
) {
    let mut rng = Rng::new(super::record::realtime_ns() ^ (rec.index() as u64) << 48);
    while catalog.is_empty() {
        let now = rec.now();
        let putters_done = ctx.senders_left.load(std::sync::atomic::Ordering::SeqCst) == 0;
        if ctx.over(now) || putters_done {
            rec.finish();
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let store = Arc::new(bucket.store);
    send_loop(
        Each::on(&bucket.client, |_| {
            let i = catalog.pick(&mut rng)?;
            let store = store.clone();
            Some(async move { get_acknowledged(&store, i).await })
        }),
        window,
        plan,
        rec,
        ctx,
    )
    .await;
}
