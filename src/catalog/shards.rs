//! A dataset's shards read through a store: the committed shards under a
//! prefix, each data object checked against its sidecar and the set against
//! its manifest (the layouts are `crate::format::shards`). A set whose bytes
//! are not what its sidecars and manifest say is refused here, before a
//! bench counts one byte of it.

use std::collections::HashMap;

use crate::error::{Error, Result, StoreError};
use crate::flag::{BACKEND, BUCKET, PREFIX};
use crate::format::shards::{
    DatasetManifest, JpegIndex, Listed, RawShard, SHARD_DIGITS, SetState, ShardMeta, TokenShard, manifest_key, parse_sidecar, shard_key,
};
use crate::store::{self, ObjectStore};

/// The committed shards of one set, in shard order, and what a reader must
/// record about them.
#[derive(Debug)]
pub struct ShardSet<T> {
    /// Shards `0..n`, each with its data key and sidecar.
    pub shards: Vec<Listed<T>>,
    /// Said once and recorded in the run's `environment.warnings`: a set
    /// without a manifest (one the original suite wrote) cannot be checked whole.
    pub warnings: Vec<String>,
}

impl<T> ShardSet<T> {
    /// Images or sequences per data byte over the whole set (for how many
    /// bytes a window's items hold). 0 for an empty set.
    pub fn bytes_per_item(&self) -> f64
    where
        T: ShardMeta,
    {
        let items: u64 = self.shards.iter().map(|s| s.meta.items()).sum();
        let bytes: u64 = self.shards.iter().map(|s| s.meta.data_bytes()).sum();
        if items == 0 { 0.0 } else { bytes as f64 / items as f64 }
    }
}

/// The set's manifest, if any, refused when it is not a whole set of `T`.
async fn manifest<T: ShardMeta>(store: &dyn ObjectStore, prefix: &str) -> Result<Option<DatasetManifest>> {
    let key = manifest_key(prefix);
    let kind = T::KIND;
    let body = match store::get_bytes(store, &key).await {
        Ok(b) => b,
        Err(StoreError::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let m: DatasetManifest =
        serde_json::from_slice(&body).map_err(|e| Error::Runtime(format!("'{key}' is not a dataset manifest ({e}): re-run `s3rdma ingest {kind}`")))?;
    if m.state == SetState::Writing {
        return Err(Error::Runtime(format!(
            "the {} set '{prefix}' is an interrupted ingest (its manifest '{key}' says `writing`: an ingest began and did not finish): re-run `s3rdma ingest {}` to completion",
            m.kind, m.kind
        )));
    }
    if ![TokenShard::KIND, RawShard::KIND, JpegIndex::KIND].contains(&m.kind.as_str()) {
        return Err(Error::Runtime(format!("'{key}' names an unknown kind of set '{}': re-run `s3rdma ingest {kind}`", m.kind)));
    }
    if m.kind != kind {
        return Err(Error::Usage(format!("'{prefix}' holds a {} set, not {kind}: read another prefix, or re-run `s3rdma ingest {kind}` there", m.kind)));
    }
    Ok(Some(m))
}

/// Every object of the set's prefix by key, with its size, and the sidecars of
/// `T` among them as (shard number, key), in shard order.
async fn objects<T: ShardMeta>(store: &dyn ObjectStore, prefix: &str) -> Result<(HashMap<String, u64>, Vec<(usize, String)>)> {
    let stem = format!("{prefix}-");
    let tail = format!(".{}", T::SIDECAR_EXT);
    let sizes: HashMap<String, u64> = store.list(&stem).await?.into_iter().map(|m| (m.key, m.size)).collect();
    let mut found: Vec<(usize, String)> = sizes
        .keys()
        .filter_map(|k| {
            let rest = k.strip_prefix(&stem)?.strip_suffix(&tail)?;
            if rest.len() != SHARD_DIGITS || !rest.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            Some((rest.parse().ok()?, k.clone()))
        })
        .collect();
    found.sort();
    Ok((sizes, found))
}

/// Every committed shard of kind `T` under `prefix`, checked: the manifest
/// (when there is one) says the set is whole and of this kind; shards are
/// numbered from 0 without a gap, as many as it says; each sidecar describes a
/// shard this tool reads; each data object exists and holds exactly the bytes
/// its sidecar says (no truncation, no trailing bytes); the sidecars' items
/// and bytes add up to the manifest's.
///
/// Errors: [`Error::Usage`] when the prefix holds no such shards or another
/// kind of set; [`Error::Runtime`] naming the shard or manifest when the set is
/// interrupted or damaged, with the fix (re-run `s3rdma ingest <kind>`); the
/// store's.
pub async fn list<T: ShardMeta>(store: &dyn ObjectStore, prefix: &str) -> Result<ShardSet<T>> {
    let kind = T::KIND;
    let (sizes, found) = objects::<T>(store, prefix).await?;
    let manifest = manifest::<T>(store, prefix).await?;
    let damaged = |why: String| Error::Runtime(format!("the {kind} set '{prefix}' is damaged: {why}: re-run `s3rdma ingest {kind}`"));
    if found.is_empty() {
        if manifest.as_ref().is_some_and(|m| m.shards > 0) {
            return Err(damaged(format!("its manifest lists {} shards, the store holds none", manifest.map_or(0, |m| m.shards))));
        }
        return Err(Error::Usage(format!(
            "no {kind} shards under '{prefix}-NNNNNN.{}' in {}: build them with `s3rdma ingest {kind}` (same {BACKEND}/{BUCKET}/{PREFIX})",
            T::DATA_EXT,
            store.location()
        )));
    }
    if let Some(gap) = found.iter().enumerate().find(|(i, (n, _))| i != n).map(|(i, _)| i) {
        return Err(damaged(format!("shard {gap} is missing (the store holds {} sidecars)", found.len())));
    }
    let mut warnings = Vec::new();
    match &manifest {
        Some(m) if m.shards != found.len() => {
            return Err(damaged(format!("its manifest lists {} shards, the store holds {} committed", m.shards, found.len())));
        }
        Some(_) => {}
        None => warnings.push(format!(
            "'{}' is missing: '{prefix}' was not written by `s3rdma ingest` (the original suite's sets have no manifest); its {} shard(s) are checked one by one, not as a whole set",
            manifest_key(prefix),
            found.len()
        )),
    }
    let mut shards = Vec::with_capacity(found.len());
    for (n, key) in found {
        let meta: T = parse_sidecar(&key, &store::get_bytes(store, &key).await?, T::WHAT)?;
        meta.check(&key)?;
        let data_key = shard_key(prefix, n, T::DATA_EXT);
        if let Some(named) = meta.names_data().filter(|k| *k != data_key) {
            return Err(damaged(format!("'{key}' names '{named}' as its data, not the shard's own '{data_key}'")));
        }
        let want = meta.data_bytes();
        let Some(&size) = sizes.get(&data_key) else {
            return Err(damaged(format!("'{data_key}', the data of '{key}', is missing")));
        };
        if size != want {
            return Err(damaged(format!("'{data_key}' holds {size} bytes, its sidecar '{key}' says {want}")));
        }
        shards.push(Listed { data_key, sidecar_key: key, meta });
    }
    if let Some(m) = &manifest {
        let items: u64 = shards.iter().map(|s| s.meta.items()).sum();
        let bytes: u64 = shards.iter().map(|s| s.meta.data_bytes()).sum();
        if (items, bytes) != (m.items, m.bytes) {
            return Err(damaged(format!("its manifest says {} items in {} bytes, the shards' sidecars {items} in {bytes}", m.items, m.bytes)));
        }
    }
    Ok(ShardSet { shards, warnings })
}
