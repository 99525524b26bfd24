//! A dataset's shards read through a store: the committed shards under a
//! prefix, checked against the set's manifest (the layouts are
//! `crate::format::shards`).

use crate::error::{Error, Result};
use crate::format::shards::{DatasetManifest, JpegIndex, Listed, RawShard, SHARD_DIGITS, TokenShard, manifest_key, parse_sidecar, shard_key};
use crate::store::{self, ObjectStore};

/// Check the listed shard numbers against the set's manifest: contiguous from
/// 0, as many as it says, of its kind. Without a manifest: a warning.
async fn check_set(store: &dyn ObjectStore, prefix: &str, kind: &str, numbers: &[usize]) -> Result<()> {
    let gap = numbers.iter().enumerate().find(|(i, n)| i != *n).map(|(i, _)| i);
    match store::get_bytes(store, &manifest_key(prefix)).await {
        Ok(body) => {
            let m: DatasetManifest = serde_json::from_slice(&body)
                .map_err(|e| Error::Runtime(format!("'{}' is not a dataset manifest ({e}): re-run `s3rdma ingest {kind}`", manifest_key(prefix))))?;
            if m.kind != kind {
                return Err(Error::Usage(format!("'{prefix}' holds a {} set, not {kind}: check --prefix/--layout", m.kind)));
            }
            if numbers.len() != m.shards || gap.is_some() {
                return Err(Error::Runtime(format!(
                    "the {kind} set '{prefix}' is damaged: its manifest lists {} shards, the store holds {} committed ({}): re-run `s3rdma ingest {kind}`",
                    m.shards,
                    numbers.len(),
                    gap.map_or("numbers from 0".into(), |g| format!("shard {g} missing"))
                )));
            }
        }
        Err(crate::error::StoreError::NotFound { .. }) => {
            if let Some(g) = gap {
                return Err(Error::Runtime(format!("the {kind} set '{prefix}' has no shard {g} (and no manifest): re-run `s3rdma ingest {kind}`")));
            }
            eprintln!(
                "warning: '{}' is missing: '{prefix}' is an interrupted ingest or a set from the original suite; reading the {} shard(s) found",
                manifest_key(prefix),
                numbers.len()
            );
        }
        Err(e) => return Err(e.into()),
    }
    Ok(())
}

/// Sidecar keys of committed shards under `prefix` with sidecar suffix `sidecar_ext`
/// (`json` or `index.json`), in shard order.
async fn sidecars(store: &dyn ObjectStore, prefix: &str, sidecar_ext: &str) -> Result<Vec<(usize, String)>> {
    let stem = format!("{prefix}-");
    let tail = format!(".{sidecar_ext}");
    let mut found: Vec<(usize, String)> = store
        .list(&stem)
        .await?
        .into_iter()
        .filter_map(|m| {
            let rest = m.key.strip_prefix(&stem)?.strip_suffix(&tail)?;
            if rest.len() != SHARD_DIGITS || !rest.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let n: usize = rest.parse().ok()?;
            Some((n, m.key))
        })
        .collect();
    found.sort();
    Ok(found)
}

/// No committed shards of `kind` under `prefix`: the error that says how to build them.
fn none_found(store: &dyn ObjectStore, prefix: &str, kind: &str, ext: &str) -> Error {
    Error::Usage(format!(
        "no {kind} shards under '{prefix}-NNNNNN.{ext}' in {}: build them with `s3rdma ingest {kind}` (same --backend/--bucket/--prefix)",
        store.location()
    ))
}

/// Every committed token shard under `prefix`; errors when there is none or a
/// sidecar does not describe int32 tokens.
pub async fn list_tokens(store: &dyn ObjectStore, prefix: &str) -> Result<Vec<Listed<TokenShard>>> {
    let mut out = Vec::new();
    let found: Vec<(usize, String)> = sidecars(store, prefix, "json").await?.into_iter().filter(|(_, k)| !k.ends_with(".index.json")).collect();
    if !found.is_empty() {
        check_set(store, prefix, "tokens", &found.iter().map(|f| f.0).collect::<Vec<_>>()).await?;
    }
    for (n, key) in found {
        let meta: TokenShard = parse_sidecar(&key, &store::get_bytes(store, &key).await?, "token shard")?;
        if meta.dtype != "int32" || meta.bytes_per_token != 4 || meta.seq_len == 0 {
            return Err(Error::Runtime(format!(
                "'{key}': dtype {} x {} bytes, seq_len {}: only int32 token shards are supported",
                meta.dtype, meta.bytes_per_token, meta.seq_len
            )));
        }
        out.push(Listed { data_key: shard_key(prefix, n, "bin"), sidecar_key: key, meta });
    }
    if out.is_empty() {
        return Err(none_found(store, prefix, "tokens", "bin"));
    }
    Ok(out)
}

/// Every committed raw image shard under `prefix`.
pub async fn list_raw(store: &dyn ObjectStore, prefix: &str) -> Result<Vec<Listed<RawShard>>> {
    let mut out = Vec::new();
    let found = sidecars(store, prefix, "json").await?;
    if !found.is_empty() {
        check_set(store, prefix, "raw", &found.iter().map(|f| f.0).collect::<Vec<_>>()).await?;
    }
    for (n, key) in found {
        let meta: RawShard = parse_sidecar(&key, &store::get_bytes(store, &key).await?, "raw image shard")?;
        if meta.channels != 3 || meta.labels.len() as u64 != meta.samples || meta.samples == 0 {
            return Err(Error::Runtime(format!(
                "'{key}': {} samples, {} labels, {} channels: not a valid raw shard sidecar",
                meta.samples,
                meta.labels.len(),
                meta.channels
            )));
        }
        out.push(Listed { data_key: shard_key(prefix, n, "raw"), sidecar_key: key, meta });
    }
    if out.is_empty() {
        return Err(none_found(store, prefix, "raw", "raw"));
    }
    Ok(out)
}

/// Every committed JPEG tar shard's index under `prefix`.
pub async fn list_jpeg(store: &dyn ObjectStore, prefix: &str) -> Result<Vec<Listed<JpegIndex>>> {
    let mut out = Vec::new();
    let found = sidecars(store, prefix, "index.json").await?;
    if !found.is_empty() {
        check_set(store, prefix, "jpeg", &found.iter().map(|f| f.0).collect::<Vec<_>>()).await?;
    }
    for (_, key) in found {
        let meta: JpegIndex = parse_sidecar(&key, &store::get_bytes(store, &key).await?, "JPEG shard index")?;
        meta.check(&key)?;
        out.push(Listed { data_key: meta.shard.clone(), sidecar_key: key, meta });
    }
    if out.is_empty() {
        return Err(none_found(store, prefix, "jpeg", "tar"));
    }
    Ok(out)
}
