//! A safetensors model read through a store: its index, then every shard's
//! header with two small ranged reads (the layouts are `crate::format::weights`).

use crate::error::{Error, Result, StoreError};
use crate::flag::SYNTH;
use crate::format::weights::{INDEX, MAX_HEADER, SINGLE, ShardLayout, bad, check_index, key_in, looks_like, parse_header};
use crate::mem::Buffer;
use crate::store::{self, ObjectStore};

/// `range` of `key` into host memory.
async fn get_host(store: &dyn ObjectStore, key: &str, range: std::ops::Range<u64>) -> Result<Vec<u8>> {
    Ok(get_host_version(store, key, range, None).await?.0)
}

/// `range` of `key` into host memory, from object version `version` when
/// given; returns the bytes and the version they came from.
async fn get_host_version(
    store: &dyn ObjectStore,
    key: &str,
    range: std::ops::Range<u64>,
    version: Option<&crate::store::ObjectVersion>,
) -> Result<(Vec<u8>, Option<crate::store::ObjectVersion>)> {
    let mut b = Buffer::host((range.end - range.start) as usize);
    let t = match version {
        Some(v) => store.get_into_version(key, Some(range), &mut b, 0, v).await?,
        None => store.get_into(key, Some(range), &mut b).await?,
    };
    Ok((b.as_host().expect("host").to_vec(), t.version))
}

/// Find the model under `prefix` (index + shards, or one file) and parse
/// every shard's header with two small ranged reads.
///
/// Returns the shards in key order, and what a reader should be told of an
/// index that disagrees with its shards without changing what loads.
///
/// Errors: neither file exists (naming both keys), a malformed index or header.
pub async fn read_layout(store: &dyn ObjectStore, prefix: &str) -> Result<(Vec<ShardLayout>, Vec<String>)> {
    let index_key = key_in(prefix, INDEX);
    // The index's tensor -> shard file map, when there is an index, and the
    // tensor bytes it declares (`metadata.total_size`).
    let mut total_size = None;
    let weight_map: Option<std::collections::BTreeMap<String, String>> = match store.head(&index_key).await {
        Ok(m) if m.size == 0 => return Err(Error::Runtime(format!("'{index_key}' is empty: copy the model's index again, or remove it for a one-file model"))),
        Ok(m) => {
            let bytes = get_host(store, &index_key, 0..m.size).await?;
            let v: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| Error::Runtime(format!("'{index_key}' is not valid JSON: {e}")))?;
            let map = v.get("weight_map").and_then(|m| m.as_object()).ok_or_else(|| Error::Runtime(format!("'{index_key}' has no weight_map object")))?;
            if map.is_empty() {
                return Err(Error::Runtime(format!("'{index_key}' maps no tensors (an empty weight_map): copy the model's index again")));
            }
            total_size = v.pointer("/metadata/total_size").and_then(|t| t.as_u64());
            let mut out = std::collections::BTreeMap::new();
            for (tensor, file) in map {
                let file = file.as_str().ok_or_else(|| Error::Runtime(format!("'{index_key}' maps '{tensor}' to {file}, not to a file name")))?;
                out.insert(tensor.clone(), file.to_string());
            }
            Some(out)
        }
        Err(StoreError::NotFound { .. }) => None,
        Err(e) => return Err(e.into()),
    };
    let shard_keys: Vec<String> = match &weight_map {
        Some(map) => map.values().collect::<std::collections::BTreeSet<_>>().into_iter().map(|f| key_in(prefix, f)).collect(),
        None => vec![key_in(prefix, SINGLE)],
    };
    if let Some(map) = &weight_map {
        for f in map.values() {
            store::check_key(&key_in(prefix, f)).map_err(|e| {
                Error::Runtime(format!("'{index_key}' maps tensors to '{f}', not a file name under the model's prefix ({e}): fix the weight_map value"))
            })?;
        }
    }
    let mut out = Vec::new();
    for key in shard_keys {
        let size = match store.head(&key).await {
            Ok(m) => m.size,
            Err(StoreError::NotFound { bucket, location, .. }) if weight_map.is_some() => {
                return Err(Error::Runtime(format!(
                    "'{index_key}' names the shard '{key}', which is not in bucket '{bucket}' at {location}: copy every shard the index lists, or fix the index"
                )));
            }
            Err(StoreError::NotFound { bucket, location, .. }) => {
                return Err(Error::Runtime(format!(
                    "no model at '{}' in bucket '{bucket}' at {location}: expected '{key}' (or '{index_key}'); write one with {SYNTH} or copy a Hugging Face model there",
                    prefix
                )));
            }
            Err(e) => return Err(e.into()),
        };
        if size < 8 {
            return Err(bad(&key, "shorter than 8 bytes"));
        }
        let (first, version) = get_host_version(store, &key, 0..size.min(64), None).await?;
        let n = u64::from_le_bytes(first[..8].try_into().expect("8 bytes"));
        if n > MAX_HEADER {
            return Err(bad(&key, format!("a {n}-byte header, over the format's {MAX_HEADER}-byte limit{}", looks_like(&first))));
        }
        if 8 + n > size {
            return Err(bad(&key, format!("header length {n} does not fit the {size}-byte object{}", looks_like(&first))));
        }
        let (head, _) = get_host_version(store, &key, 0..8 + n, version.as_ref()).await?;
        out.push(ShardLayout { version, ..parse_header(&key, size, &head)? });
    }
    let warnings = match &weight_map {
        Some(map) => check_index(&index_key, prefix, map, total_size, &out)?,
        None => Vec::new(),
    };
    Ok((out, warnings))
}
