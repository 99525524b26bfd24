//! `s3rdma ingest weights`: copy a Hugging Face safetensors model from local
//! disk (or write a synthetic one: `--synthetic`, `super::synth`) into the store under `--model`, in the layout `weights` reads (one
//! `model.safetensors`, or `model.safetensors.index.json` + the shards its
//! `weight_map` names). Every shard's header is parsed before anything is
//! written; the index goes after the shards (the commit: `weights` finds a
//! sharded model by it), and the model's digest (`format::digest`, what
//! `weights --verify` checks a load against) last of all.

use std::path::{Path, PathBuf};

use super::plan::{WeightsIngest, WeightsSource};
use crate::error::{Error, Result};
use crate::flag::{MODEL, SRC};
use crate::format::digest;
use crate::format::weights::{INDEX, SINGLE, parse_header};
use crate::store;

/// The files of the model at `src`, as (local path, object name), shards first, index last.
///
/// Errors: `src` missing, a directory with neither file, an index without a
/// `weight_map` or naming a file that is not there.
pub fn model_files(src: &Path) -> Result<Vec<(PathBuf, String)>> {
    let usage = |why: String| Error::Usage(format!("{SRC} {}: {why}", src.display()));
    let meta = std::fs::metadata(src).map_err(|e| usage(format!("{e}: pass a model.safetensors file or a Hugging Face model directory")))?;
    if meta.is_file() {
        return Ok(vec![(src.to_path_buf(), SINGLE.to_string())]);
    }
    let index = src.join(INDEX);
    if index.is_file() {
        let text = std::fs::read(&index).map_err(|e| usage(format!("{INDEX}: {e}")))?;
        let v: serde_json::Value = serde_json::from_slice(&text).map_err(|e| usage(format!("{INDEX} is not valid JSON: {e}")))?;
        let map = v.get("weight_map").and_then(|m| m.as_object()).ok_or_else(|| usage(format!("{INDEX} has no weight_map object")))?;
        let shards: std::collections::BTreeSet<&str> = map.values().filter_map(|f| f.as_str()).collect();
        if shards.is_empty() {
            return Err(usage(format!("{INDEX}'s weight_map names no shard")));
        }
        let mut out = Vec::new();
        for name in shards {
            if name.contains('/') || name.contains('\\') || name == ".." {
                return Err(usage(format!("{INDEX} names '{name}', not a file beside it")));
            }
            let p = src.join(name);
            if !p.is_file() {
                return Err(usage(format!("{INDEX} names '{name}', which is not in the directory: download every shard")));
            }
            out.push((p, name.to_string()));
        }
        out.push((index, INDEX.to_string()));
        return Ok(out);
    }
    let single = src.join(SINGLE);
    if single.is_file() {
        return Ok(vec![(single, SINGLE.to_string())]);
    }
    Err(usage(format!("holds neither {SINGLE} nor {INDEX}: pass the directory a Hugging Face download made (or one .safetensors file)")))
}

/// Run `s3rdma ingest weights`.
///
/// Errors: see [`model_files`]; a shard whose safetensors header does not
/// parse (naming the file); the store's errors.
pub async fn run(a: WeightsIngest) -> Result<()> {
    let prefix = a.model.trim_matches('/').to_string();
    if prefix.is_empty() {
        return Err(Error::Usage(format!("{MODEL}: give a key prefix such as models/llama (not empty)")));
    }
    let src = match a.source {
        WeightsSource::Files(src) => src,
        WeightsSource::Synthetic { name, shard_size } => return super::synth::run(&a.store, &prefix, &name, shard_size).await,
    };
    let files = model_files(&src)?;
    // Headers first: nothing is written for a model with a bad shard.
    for (path, _) in files.iter().filter(|(_, n)| n != INDEX) {
        let bytes = read_head(path)?;
        let len = std::fs::metadata(path).map_err(|e| Error::Usage(format!("{}: {e}", path.display())))?.len();
        parse_header(&path.display().to_string(), len, &bytes).map_err(|e| Error::Usage(e.to_string()))?;
    }
    let store = store::open(&a.store)?;
    store.ensure_bucket(true).await?;
    // A digest saying "writing" goes first, the complete one last: every
    // load refuses a model whose ingest stopped midway.
    super::commit::begin_digest(store.as_ref(), &prefix).await?;
    let mut sums = digest::Digest::default();
    let mut total = 0u64;
    for (path, name) in &files {
        let key = format!("{prefix}/{name}");
        store::check_key(&key).map_err(|e| Error::Usage(format!("{MODEL} '{}': {e}", a.model)))?;
        let body = std::fs::read(path).map_err(|e| Error::Runtime(format!("reading {}: {e}", path.display())))?;
        if name != INDEX {
            // Digested from the bytes sent: a file changed since its header was checked is digested as sent.
            let layout = parse_header(&path.display().to_string(), body.len() as u64, &body)?;
            sums.add(name, &layout, &body[layout.data_start as usize..]);
        }
        total += body.len() as u64;
        store::put_bytes(store.as_ref(), &key, body).await?;
    }
    // What an earlier model left under this prefix goes, as after --synth:
    // its index would otherwise win over a new one-file model.
    let shards: std::collections::BTreeSet<&str> = files.iter().filter(|(_, n)| n != INDEX).map(|(_, n)| n.as_str()).collect();
    super::synth::remove_stale_shards(store.as_ref(), &prefix, &shards, "ingest").await?;
    super::commit::write_digest(store.as_ref(), &prefix, &sums).await?;
    let shards = files.iter().filter(|(_, n)| n != INDEX).count();
    println!("ingested {shards} shard(s), {total} bytes, under '{prefix}' at {}", store.location());
    Ok(())
}

const CONVERT: &str = "download the file again if it was cut short, or pass a Hugging Face .safetensors file (a .bin or .gguf model must be converted first)";

/// The first 8 + n bytes of a safetensors file (its header), read without
/// loading the tensors; at most 100 MB of header (the safetensors crate's own limit).
fn read_head(path: &Path) -> Result<Vec<u8>> {
    use std::io::Read;
    let fail = |e: std::io::Error| Error::Usage(format!("{}: {e}", path.display()));
    let mut f = std::fs::File::open(path).map_err(fail)?;
    let mut n = [0u8; 8];
    let bad = |why: String| Error::Usage(format!("'{}' is not a valid safetensors file: {why}: {CONVERT}", path.display()));
    f.read_exact(&mut n).map_err(|_| bad("shorter than 8 bytes".into()))?;
    let len = u64::from_le_bytes(n);
    if len > 100_000_000 {
        return Err(bad(format!("a {len}-byte header (the format allows 100 MB)")));
    }
    let mut head = n.to_vec();
    f.take(len).read_to_end(&mut head).map_err(fail)?;
    Ok(head)
}
