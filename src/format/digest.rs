//! The weights digest: `<model>/s3rdma-digest.json`, one XXH3-64 per tensor,
//! written by `weights --synth` and `ingest weights` after everything else of
//! the model (a digest on the store always describes a whole model), and read
//! by `weights --verify`: the reference a load is checked against that does
//! not come from the store's current bytes, so bytes changed at rest are
//! caught (a second read of the store would return them again).
//!
//! Shape (JSON): `{"format": "s3rdma-weights-digest/1", "algorithm":
//! "xxh3-64", "shards": {"<file name>": {"object_bytes": N, "tensors":
//! {"<tensor>": "<16 hex digits>"}}}}`; file names as the index's weight_map
//! gives them. XXH3-64 is the xxhash-rust crate's, as for checkpoint chunks.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::weights::{ShardLayout, key_in};
use crate::error::{Error, Result, StoreError};
use crate::store::{self, ObjectStore};

/// The digest's object name under a model's prefix.
pub const DIGEST: &str = "s3rdma-digest.json";

/// The `format` value this version writes and reads.
const FORMAT: &str = "s3rdma-weights-digest/1";

/// A model's digest (see the module docs for its JSON shape).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Digest {
    /// `s3rdma-weights-digest/1`.
    pub format: String,
    /// `xxh3-64`.
    pub algorithm: String,
    /// Per shard file name (relative to the model's prefix).
    pub shards: BTreeMap<String, ShardDigest>,
}

/// One shard's digest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardDigest {
    /// The shard object's size, bytes (header included).
    pub object_bytes: u64,
    /// XXH3-64 of each tensor's bytes, as 16 lowercase hex digits.
    pub tensors: BTreeMap<String, String>,
}

impl Default for Digest {
    fn default() -> Digest {
        Digest { format: FORMAT.into(), algorithm: "xxh3-64".into(), shards: BTreeMap::new() }
    }
}

impl Digest {
    /// Add the shard `file` described by `layout`, whose data section is `data`
    /// (`layout.data_bytes()` bytes, the bytes after the header).
    pub fn add(&mut self, file: &str, layout: &ShardLayout, data: &[u8]) {
        self.shards.insert(file.to_string(), ShardDigest { object_bytes: layout.object_bytes, tensors: tensor_digests(layout, data) });
    }

    /// Compare the loaded data section `data` of the shard `file` (layout
    /// `layout`) with this digest: the names of the tensors that differ, or
    /// one line naming the shard when its size or tensor set differs.
    pub fn mismatches(&self, file: &str, layout: &ShardLayout, data: &[u8]) -> Vec<String> {
        let Some(want) = self.shards.get(file) else {
            return vec![format!("{}: not in {DIGEST}", layout.key)];
        };
        if want.object_bytes != layout.object_bytes {
            return vec![format!("{}: {} bytes, {DIGEST} says {}", layout.key, layout.object_bytes, want.object_bytes)];
        }
        let got = tensor_digests(layout, data);
        if got.len() != want.tensors.len() || got.keys().ne(want.tensors.keys()) {
            return vec![format!("{}: its tensors are not the ones {DIGEST} names", layout.key)];
        }
        got.into_iter().filter(|(n, d)| want.tensors.get(n) != Some(d)).map(|(n, _)| n).collect()
    }
}

/// XXH3-64 of every tensor of `layout` in its data section `data`.
fn tensor_digests(layout: &ShardLayout, data: &[u8]) -> BTreeMap<String, String> {
    layout.tensors.iter().map(|t| (t.name.clone(), super::ckpt::xxh3_hex(&data[t.offset as usize..(t.offset + t.nbytes) as usize]))).collect()
}

/// Remove the digest under `prefix` (before a model is rewritten there, so an
/// interrupted write never leaves an old digest beside new shards).
///
/// Errors: the store's, but for a missing digest.
pub async fn remove(store: &dyn ObjectStore, prefix: &str) -> Result<()> {
    let key = key_in(prefix, DIGEST);
    match store.head(&key).await {
        Ok(_) => Ok(store.delete(&key).await?),
        Err(StoreError::NotFound { .. }) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Write `digest` under `prefix` (call it last, after every shard and the index).
///
/// Errors: the store's.
pub async fn write(store: &dyn ObjectStore, prefix: &str, digest: &Digest) -> Result<()> {
    let body = serde_json::to_vec_pretty(digest).expect("a digest encodes");
    store::put_bytes(store, &key_in(prefix, DIGEST), body).await?;
    Ok(())
}

/// The digest under `prefix`, `None` when there is none.
///
/// Errors: a digest that is not this format (naming the key and the fix);
/// the store's.
pub async fn read(store: &dyn ObjectStore, prefix: &str) -> Result<Option<Digest>> {
    let key = key_in(prefix, DIGEST);
    let body = match store::get_bytes(store, &key).await {
        Ok(b) => b,
        Err(StoreError::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let bad =
        |why: String| Error::Runtime(format!("'{key}' is not a weights digest ({why}): remove it, or write the model again with --synth or `ingest weights`"));
    let d: Digest = serde_json::from_slice(&body).map_err(|e| bad(e.to_string()))?;
    if d.format != FORMAT || d.algorithm != "xxh3-64" {
        return Err(bad(format!("format '{}', algorithm '{}'; this build reads {FORMAT}, xxh3-64", d.format, d.algorithm)));
    }
    Ok(Some(d))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::weights::parse_header;

    fn shard() -> (ShardLayout, Vec<u8>) {
        let data: Vec<u8> = (0..20u8).collect();
        let a = safetensors::tensor::TensorView::new(safetensors::Dtype::U8, vec![12], &data[..12]).unwrap();
        let b = safetensors::tensor::TensorView::new(safetensors::Dtype::U8, vec![8], &data[12..]).unwrap();
        let file = safetensors::serialize([("a", a), ("b", b)], None).unwrap();
        let n = u64::from_le_bytes(file[..8].try_into().unwrap()) as usize;
        let l = parse_header("m/model.safetensors", file.len() as u64, &file[..8 + n]).unwrap();
        let blob = file[8 + n..].to_vec();
        (l, blob)
    }

    /// A digest round-trips through JSON and names exactly the tensor whose
    /// bytes changed; a shard of another size or one it does not know is
    /// named as a whole.
    #[test]
    fn a_changed_tensor_is_named_and_only_it() {
        let (l, mut blob) = shard();
        let mut d = Digest::default();
        d.add("model.safetensors", &l, &blob);
        let d: Digest = serde_json::from_slice(&serde_json::to_vec(&d).unwrap()).unwrap();
        assert!(d.mismatches("model.safetensors", &l, &blob).is_empty());
        let b = l.tensors.iter().find(|t| t.name == "b").unwrap();
        blob[b.offset as usize + 3] ^= 1;
        assert_eq!(d.mismatches("model.safetensors", &l, &blob), ["b"]);
        assert_eq!(d.mismatches("other.safetensors", &l, &blob), ["m/model.safetensors: not in s3rdma-digest.json"]);
        let bigger = ShardLayout { object_bytes: l.object_bytes + 1, ..l.clone() };
        assert!(d.mismatches("model.safetensors", &bigger, &blob)[0].contains("bytes, s3rdma-digest.json says"));
    }
}
