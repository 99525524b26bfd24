//! What ingest writes is committed last and uncommitted first: a dataset's
//! manifest (`crate::format::shards`) and a model's digest
//! (`crate::format::digest`), so a write that stops midway leaves a set no
//! reader takes for whole.

use crate::error::Result;
use crate::format::digest::{DIGEST, Digest};
use crate::format::shards::{DatasetManifest, SHARD_DIGITS, manifest_key};
use crate::format::weights::key_in;
use crate::store::{self, ObjectStore};

/// Write one shard: data object, then the sidecar (the commit).
pub async fn put_shard(store: &dyn ObjectStore, data_key: &str, data: Vec<u8>, sidecar_key: &str, sidecar: Vec<u8>) -> Result<()> {
    store::put_bytes(store, data_key, data).await?;
    store::put_bytes(store, sidecar_key, sidecar).await?;
    Ok(())
}

/// Start an ingest: delete the old manifest (uncommit), then every old shard
/// object of `prefix` (data and sidecars). Returns how many objects went.
pub async fn begin_ingest(store: &dyn ObjectStore, prefix: &str) -> Result<usize> {
    let m = manifest_key(prefix);
    if store.head(&m).await.is_ok() {
        store.delete(&m).await?;
    }
    let stem = format!("{prefix}-");
    let mut n = 0;
    for o in store.list(&stem).await? {
        let rest = &o.key[stem.len()..];
        if rest.len() > SHARD_DIGITS && rest.as_bytes()[..SHARD_DIGITS].iter().all(u8::is_ascii_digit) && rest.as_bytes()[SHARD_DIGITS] == b'.' {
            store.delete(&o.key).await?;
            n += 1;
        }
    }
    Ok(n)
}

/// Commit a set: write its manifest, last.
pub async fn commit_ingest(store: &dyn ObjectStore, prefix: &str, m: &DatasetManifest) -> Result<()> {
    store::put_bytes(store, &manifest_key(prefix), serde_json::to_vec_pretty(m).expect("manifest encodes")).await?;
    Ok(())
}

/// Mark the model under `prefix` as being written (before a model is
/// written there): a digest in state `writing`, which every load refuses
/// until [`write_digest`] puts the complete one.
///
/// Errors: the store's.
pub async fn begin_digest(store: &dyn ObjectStore, prefix: &str) -> Result<()> {
    let d = Digest { state: "writing".into(), ..Digest::default() };
    write_digest(store, prefix, &d).await
}

/// Write `digest` under `prefix` (call it last, after every shard and the index).
///
/// Errors: the store's.
pub async fn write_digest(store: &dyn ObjectStore, prefix: &str, digest: &Digest) -> Result<()> {
    let body = serde_json::to_vec_pretty(digest).expect("a digest encodes");
    store::put_bytes(store, &key_in(prefix, DIGEST), body).await?;
    Ok(())
}
