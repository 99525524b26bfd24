//! Synthetic models: published architectures' tensor shapes with random
//! bf16 bytes, written as Hugging Face writes them (`weights --synth`), and
//! the removal of what an earlier model left under the same prefix.

use std::collections::BTreeMap;

use rand::{RngCore, SeedableRng, rngs::SmallRng};
use safetensors::tensor::{Dtype, TensorView};

use crate::error::{Error, Result, StoreError};
use crate::flag::SHARD_SIZE;
use crate::format::digest::Digest;
use crate::format::weights::{INDEX, SINGLE, is_numbered_shard, key_in, parse_header, plan_shards, synth_shapes};
use crate::mem::Buffer;
use crate::store::ObjectStore;

/// `ingest weights --synthetic` (and `weights --synth`): open the store,
/// create its bucket when missing, write the model, say what was written.
///
/// Errors: an unknown `name` (a usage error, before the store is touched); as [`write_synth`].
pub async fn run(store: &crate::store::StoreConfig, prefix: &str, name: &str, max_shard: u64) -> Result<()> {
    synth_shapes(name)?;
    if max_shard == 0 {
        return Err(Error::Usage(format!("{SHARD_SIZE} 0: give the largest shard in bytes, e.g. 5GB (Hugging Face's default)")));
    }
    let store = crate::store::open(store)?;
    store.ensure_bucket(true).await?;
    let (bytes, shards) = write_synth(store.as_ref(), prefix, name, max_shard).await?;
    println!("wrote synthetic {name}: {bytes} tensor bytes in {shards} shard(s) under '{prefix}' at {}", store.location());
    Ok(())
}

/// Write a synthetic model of `name` under `prefix`: bf16 random bytes,
/// shards of at most `max_shard` bytes (Hugging Face names), then the index,
/// so a reader never finds an index naming missing shards, and last its
/// digest ([`crate::format::digest`]). Returns
/// (total tensor bytes, shard count).
pub async fn write_synth(store: &dyn ObjectStore, prefix: &str, name: &str, max_shard: u64) -> Result<(u64, usize)> {
    let shapes = synth_shapes(name)?;
    let plan = plan_shards(&shapes, 2, max_shard);
    // A digest saying "writing" goes first and the complete one last: every
    // load refuses a model whose write stopped midway.
    super::commit::begin_digest(store, prefix).await?;
    let mut digest = Digest::default();
    let count = plan.len();
    let mut rng = SmallRng::from_os_rng();
    let mut weight_map = BTreeMap::new();
    let mut total = 0u64;
    for (s, members) in plan.iter().enumerate() {
        let file = if count == 1 { SINGLE.to_string() } else { format!("model-{:05}-of-{count:05}.safetensors", s + 1) };
        let sizes: Vec<usize> = members.iter().map(|&m| shapes[m].1.iter().product::<usize>() * 2).collect();
        let mut data = vec![0u8; sizes.iter().sum()];
        rng.fill_bytes(&mut data);
        let mut views = Vec::new();
        let mut off = 0;
        for (&m, &len) in members.iter().zip(&sizes) {
            let view = TensorView::new(Dtype::BF16, shapes[m].1.clone(), &data[off..off + len])
                .map_err(|e| Error::Runtime(format!("cannot build tensor {}: {e}", shapes[m].0)))?;
            views.push((shapes[m].0.clone(), view));
            off += len;
            weight_map.insert(shapes[m].0.clone(), file.clone());
        }
        let bytes = safetensors::serialize(views, None).map_err(|e| Error::Runtime(format!("cannot serialise shard {file}: {e}")))?;
        drop(data);
        let layout = parse_header(&file, bytes.len() as u64, &bytes)?;
        digest.add(&file, &layout, &bytes[layout.data_start as usize..]);
        total += sizes.iter().sum::<usize>() as u64;
        let mut buf = Buffer::host(bytes.len());
        buf.as_host_mut().expect("host").copy_from_slice(&bytes);
        drop(bytes);
        store.put_from(&key_in(prefix, &file), &buf).await?;
        eprintln!("synth: wrote {} ({} tensors, {} bytes)", key_in(prefix, &file), members.len(), buf.len());
    }
    if count > 1 {
        let index = serde_json::json!({"metadata": {"total_size": total}, "weight_map": weight_map});
        let text = serde_json::to_vec_pretty(&index).expect("index encodes");
        let mut buf = Buffer::host(text.len());
        buf.as_host_mut().expect("host").copy_from_slice(&text);
        store.put_from(&key_in(prefix, INDEX), &buf).await?;
    }
    let files: std::collections::BTreeSet<&str> = weight_map.values().map(String::as_str).collect();
    remove_stale_shards(store, prefix, &files, "synth").await?;
    super::commit::write_digest(store, prefix, &digest).await?;
    Ok((total, count))
}

/// After a synthetic model is written under `prefix`: remove what an earlier
/// one left there that the new model does not use, its index (when the new
/// model is one file) and its shards (Hugging Face names, `model.safetensors`
/// or `model-NNNNN-of-NNNNN.safetensors`, directly under `prefix`), so the
/// prefix holds one model. Other keys are left alone.
///
/// `files`: the new model's shard file names; `who` starts each line said.
///
/// Errors: the store's.
pub(crate) async fn remove_stale_shards(store: &dyn ObjectStore, prefix: &str, files: &std::collections::BTreeSet<&str>, who: &str) -> Result<()> {
    let keep: std::collections::BTreeSet<String> = files.iter().map(|f| key_in(prefix, f)).collect();
    if keep.contains(&key_in(prefix, SINGLE)) {
        // An earlier model's index would win over the new single file; removed
        // only now that the new file is whole, so an interrupted synth leaves
        // the earlier model loadable.
        // S3 deletes a missing key without a word: ask first, so only a real removal is said.
        let index = key_in(prefix, INDEX);
        match store.head(&index).await {
            Ok(_) => {
                store.delete(&index).await?;
                eprintln!("{who}: removed {index} (left by an earlier model)");
            }
            Err(StoreError::NotFound { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let base = key_in(prefix, "");
    for o in store.list(&base).await? {
        let Some(name) = o.key.strip_prefix(&base) else { continue };
        let hf_name = name == SINGLE || is_numbered_shard(name);
        if hf_name && !keep.contains(&o.key) {
            store.delete(&o.key).await?;
            eprintln!("{who}: removed {} (left by an earlier model)", o.key);
        }
    }
    Ok(())
}
