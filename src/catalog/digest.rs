//! A model's digest read through a store (the format is `crate::format::digest`).

use crate::error::{Error, Result, StoreError};
use crate::flag::SYNTH;
use crate::format::digest::{DIGEST, Digest, FORMAT, MAX_DIGEST_BYTES};
use crate::format::weights::key_in;
use crate::store::{self, ObjectStore};

/// The complete digest under `prefix`, `None` when there is none.
///
/// Errors: a model still being written, or one whose write stopped midway
/// (state `writing`); a digest that is not this format, over 64 MiB, or
/// holds a hash that is not 16 hex digits (each naming the key and the fix);
/// the store's.
pub async fn read(store: &dyn ObjectStore, prefix: &str) -> Result<Option<Digest>> {
    let key = key_in(prefix, DIGEST);
    let bad =
        |why: String| Error::Runtime(format!("'{key}' is not a weights digest ({why}): remove it, or write the model again with {SYNTH} or `ingest weights`"));
    let size = match store.head(&key).await {
        Ok(m) => m.size,
        Err(StoreError::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    if size > MAX_DIGEST_BYTES {
        return Err(bad(format!("{size} bytes, over the {MAX_DIGEST_BYTES}-byte limit")));
    }
    let body = store::get_bytes(store, &key).await?;
    let d: Digest = serde_json::from_slice(&body).map_err(|e| bad(e.to_string()))?;
    if d.format != FORMAT || d.algorithm != "xxh3-64" {
        return Err(bad(format!("format '{}', algorithm '{}'; this build reads {FORMAT}, xxh3-64", d.format, d.algorithm)));
    }
    if d.state == "writing" {
        return Err(Error::Runtime(format!(
            "the model under '{prefix}' is being written, or its write stopped midway ('{key}' says so): wait for the write, or write the model again with {SYNTH} or `ingest weights`"
        )));
    }
    if d.state != "complete" {
        return Err(bad(format!("state '{}'", d.state)));
    }
    let hex16 = |h: &str| h.len() == 16 && h.bytes().all(|b| b.is_ascii_hexdigit());
    if let Some((t, _)) = d.shards.values().flat_map(|s| &s.tensors).find(|(_, t)| !hex16(&t.xxh3)) {
        return Err(bad(format!("the hash of tensor '{t}' is not 16 hex digits")));
    }
    Ok(Some(d))
}
