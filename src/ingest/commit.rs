//! What ingest writes is committed last and marked in progress first: a
//! dataset's manifest (`crate::format::shards`, state `writing` then
//! `complete`) and a model's digest (`crate::format::digest`, the same two
//! states), so a write that stops midway leaves a set every reader refuses.

use crate::error::Result;
use crate::format::digest::{DIGEST, Digest};
use crate::format::shards::{DatasetManifest, SHARD_DIGITS, SetState, manifest_key};
use crate::format::weights::key_in;
use crate::store::{self, ObjectStore};

/// Write one shard: data object, then the sidecar (the commit).
pub async fn put_shard(store: &dyn ObjectStore, data_key: &str, data: Vec<u8>, sidecar_key: &str, sidecar: Vec<u8>) -> Result<()> {
    store::put_bytes(store, data_key, data).await?;
    store::put_bytes(store, sidecar_key, sidecar).await?;
    Ok(())
}

/// Start an ingest of a `kind` set under `prefix`: first put a manifest in
/// state `writing` (so a reader refuses whatever follows until
/// [`commit_ingest`]; an ingest that stops midway stays refused), then delete
/// every old shard object of `prefix` (data and sidecars). The returned
/// [`Ingesting`] is handed to [`commit_ingest`]; dropped before that (an error
/// midway), it says on stderr that the set stays refused.
///
/// Errors: the store's.
pub async fn begin_ingest(store: &dyn ObjectStore, prefix: &str, kind: &str) -> Result<Ingesting> {
    let m = manifest_key(prefix);
    let before = match store::get_bytes(store, &m).await {
        Ok(body) => serde_json::from_slice::<DatasetManifest>(&body).ok(),
        Err(_) => None,
    };
    store::put_bytes(store, &m, serde_json::to_vec_pretty(&DatasetManifest::writing(kind)).expect("manifest encodes")).await?;
    let stem = format!("{prefix}-");
    let mut n = 0;
    for o in store.list(&stem).await? {
        let rest = &o.key[stem.len()..];
        if rest.len() > SHARD_DIGITS && rest.as_bytes()[..SHARD_DIGITS].iter().all(u8::is_ascii_digit) && rest.as_bytes()[SHARD_DIGITS] == b'.' {
            store.delete(&o.key).await?;
            n += 1;
        }
    }
    match before {
        // An interrupted ingest's leftovers go without a word.
        Some(m) if m.state == SetState::Writing => {}
        Some(DatasetManifest { kind: old, .. }) if old != kind => {
            eprintln!("note: '{prefix}' held a {old} set; its {n} shard object(s) are deleted and a {kind} set replaces it")
        }
        None if n > 0 => eprintln!(
            "note: '{prefix}' held {n} shard object(s) without a manifest (a set of the original suite, or of unknown kind); they are deleted and a {kind} set replaces them"
        ),
        _ => {}
    }
    Ok(Ingesting { prefix: prefix.into(), kind: kind.into(), committed: false })
}

/// An ingest between [`begin_ingest`] and [`commit_ingest`].
#[derive(Debug)]
pub struct Ingesting {
    prefix: String,
    kind: String,
    committed: bool,
}

impl Drop for Ingesting {
    fn drop(&mut self) {
        if !self.committed {
            eprintln!(
                "note: the {} set '{}' stays marked `writing`: every reader refuses it until `s3rdma ingest {}` completes there",
                self.kind, self.prefix, self.kind
            );
        }
    }
}

/// Commit the set `ingest` began: write its complete manifest `m`, last.
///
/// Errors: the store's (the set then stays refused).
pub async fn commit_ingest(store: &dyn ObjectStore, mut ingest: Ingesting, m: &DatasetManifest) -> Result<()> {
    store::put_bytes(store, &manifest_key(&ingest.prefix), serde_json::to_vec_pretty(m).expect("manifest encodes")).await?;
    ingest.committed = true;
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
