//! Hugging Face safetensors as published: one `model.safetensors`, or shards
//! `model-00001-of-0000N.safetensors` plus `model.safetensors.index.json`
//! (`{"metadata": {"total_size"}, "weight_map": {tensor: shard file}}`).
//!
//! A safetensors file is an 8-byte little-endian header length `n`, `n` bytes
//! of JSON header (`{name: {dtype, shape, data_offsets: [begin, end]}}`,
//! offsets relative to the data blob), then the data blob
//! (huggingface/safetensors, README "Format"). Headers are parsed with the
//! `safetensors` crate.

use safetensors::tensor::Metadata;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The index file name Hugging Face uses for sharded checkpoints.
pub const INDEX: &str = "model.safetensors.index.json";
/// The single-file name.
pub const SINGLE: &str = "model.safetensors";
/// Hugging Face's default `max_shard_size="5GB"`: decimal, so a full shard is
/// above cuObject's 4 GiB limit (the original Python suite, benchmark B8).
pub const HF_SHARD_BYTES: u64 = 5_000_000_000;
/// Largest header accepted (the crate's own limit is 100 MB).
pub(crate) const MAX_HEADER: u64 = 100_000_000;

/// One tensor as a view into its shard's data blob: no copy, no allocation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TensorEntry {
    /// Tensor name as in the file.
    pub name: String,
    /// safetensors dtype name, e.g. "BF16".
    pub dtype: String,
    /// Dimensions.
    pub shape: Vec<usize>,
    /// Byte offset in the shard's data blob (= in its device buffer).
    pub offset: u64,
    /// Bytes of the tensor's data.
    pub nbytes: u64,
}

/// One shard object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardLayout {
    /// Key of the shard object.
    pub key: String,
    /// Size of the whole object, bytes (header included).
    pub object_bytes: u64,
    /// 8 + header length: where the data blob starts in the object.
    pub data_start: u64,
    /// Sorted by offset.
    pub tensors: Vec<TensorEntry>,
    /// The object version its header was read from ([`crate::store::Transfer::version`]):
    /// the data and any re-read must come from the same one.
    #[serde(skip)]
    pub version: Option<crate::store::ObjectVersion>,
}

impl ShardLayout {
    /// Bytes of the data blob.
    pub fn data_bytes(&self) -> u64 {
        self.object_bytes - self.data_start
    }
}

/// The key of `name` under the model prefix `prefix` (`prefix/name`, or `name` for the bucket's root).
pub(crate) fn key_in(prefix: &str, name: &str) -> String {
    let p = prefix.trim_matches('/');
    if p.is_empty() { name.to_string() } else { format!("{p}/{name}") }
}

/// A shard object that is not valid safetensors, with the fix: copy it again
/// (a transfer cut short or padded), or convert a model of another format.
pub(crate) fn bad(key: &str, why: impl std::fmt::Display) -> Error {
    Error::Runtime(format!(
        "'{key}' is not a valid safetensors file: {why}: copy the shard again (a download cut short?), or convert a .bin or .gguf model to safetensors first"
    ))
}

/// What a file that is not safetensors most likely is, from its first bytes,
/// as "; this looks like ..." (empty when nothing is recognised): the usual
/// ways a user ends up here are a Git LFS pointer (cloned without `git lfs
/// pull`) and an HTML login or error page saved under the model's name.
pub fn looks_like(first: &[u8]) -> String {
    let text = String::from_utf8_lossy(&first[..first.len().min(64)]).to_ascii_lowercase();
    let t = text.trim_start();
    if t.starts_with("version https://git-lfs") {
        "; this looks like a Git LFS pointer, not the file: run `git lfs pull` (or download the file itself)".into()
    } else if t.starts_with("<!doctype html") || t.starts_with("<html") || t.starts_with("<?xml") {
        "; this looks like an HTML/XML page (a login or error page saved under the model's name), not a model".into()
    } else if first.starts_with(b"PK\x03\x04") {
        "; this looks like a zip archive (a PyTorch .bin checkpoint?): convert it to safetensors first".into()
    } else if first.starts_with(b"GGUF") {
        "; this looks like a GGUF file: convert it to safetensors first".into()
    } else {
        String::new()
    }
}

/// Parse one shard's header (`head` = the object's first 8 + n bytes).
pub fn parse_header(key: &str, object_bytes: u64, head: &[u8]) -> Result<ShardLayout> {
    let n = u64::from_le_bytes(head.get(..8).ok_or_else(|| bad(key, "shorter than 8 bytes"))?.try_into().expect("8 bytes"));
    let data_start =
        n.checked_add(8).filter(|&d| d <= object_bytes).ok_or_else(|| bad(key, format!("header length {n} does not fit the {object_bytes}-byte object")))?;
    let json = usize::try_from(data_start).ok().and_then(|d| head.get(8..d)).ok_or_else(|| bad(key, "header cut short"))?;
    let meta: Metadata = serde_json::from_slice(json).map_err(|e| bad(key, e))?;
    let blob = object_bytes - data_start;
    let mut tensors: Vec<TensorEntry> = meta
        .tensors()
        .into_iter()
        .map(|(name, info)| TensorEntry {
            name,
            dtype: format!("{:?}", info.dtype),
            shape: info.shape.clone(),
            offset: info.data_offsets.0 as u64,
            nbytes: (info.data_offsets.1 - info.data_offsets.0) as u64,
        })
        .collect();
    // By start, then end, then name: a zero-size tensor may share its start
    // with the next tensor (the reference loader accepts that), and the
    // header's order (a hash map's) must not decide whether the file loads.
    tensors.sort_by(|a, b| (a.offset, a.offset + a.nbytes, &a.name).cmp(&(b.offset, b.offset + b.nbytes, &b.name)));
    // The format's structural rules: the safetensors crate's metadata check
    // (above) holds each tensor to its dtype and shape and its offsets to
    // order; it cannot know the object's length, so coverage is checked here:
    // no gap, no overlap, and the tensors end exactly where the data section
    // ends (no trailing bytes), as the reference loader requires.
    let mut end = 0u64;
    for t in &tensors {
        if t.offset != end {
            let what = if t.offset > end { "a gap" } else { "an overlap" };
            return Err(bad(key, format!("{what} in the data before tensor '{}' (it starts at {}, the previous one ends at {end})", t.name, t.offset)));
        }
        end = t.offset + t.nbytes;
    }
    if end != blob {
        return Err(bad(key, format!("the tensors cover {end} of the {blob}-byte data section: the data is not fully covered (trailing or missing bytes)")));
    }
    Ok(ShardLayout { key: key.to_string(), object_bytes, data_start, tensors, version: None })
}

/// Every tensor the index maps to a shard is in that shard: an index that
/// disagrees with its shards would otherwise load (and `--verify` would
/// pass, comparing the shard with itself) a model other than the one named.
/// A `metadata.total_size` other than the mapped tensors' bytes, and an
/// index that maps fewer tensors than the headers hold, are warnings
/// (returned: Hugging Face tools write `total_size` but nothing reads by it,
/// and the load reads every tensor of the headers).
pub(crate) fn check_index(
    index_key: &str,
    prefix: &str,
    map: &std::collections::BTreeMap<String, String>,
    total_size: Option<u64>,
    shards: &[ShardLayout],
) -> Result<Vec<String>> {
    let mut mapped = 0;
    for (tensor, file) in map {
        let key = key_in(prefix, file);
        let shard = shards.iter().find(|s| s.key == key).expect("every file the index names was read");
        let Some(t) = shard.tensors.iter().find(|t| &t.name == tensor) else {
            return Err(Error::Runtime(format!(
                "'{index_key}' maps tensor '{tensor}' to '{key}', which has no such tensor: the index and the shards disagree; copy the model again or fix the index"
            )));
        };
        mapped += t.nbytes;
    }
    // Hugging Face names shards `<stem>-NNNNN-of-TTTTT.safetensors`: an index
    // naming fewer distinct shards than their names count has lost some.
    let files: std::collections::BTreeSet<&str> = map.values().map(String::as_str).collect();
    if let Some(total) = files.iter().find_map(|f| hf_shard_total(f)).filter(|&t| t != files.len()) {
        return Err(Error::Runtime(format!(
            "'{index_key}' maps tensors to {} shard file(s), but their names count {total} (`-of-{total:05}`): the index lost shards or mixes two models; copy the model's index again",
            files.len()
        )));
    }
    let mut warnings = Vec::new();
    if let Some(declared) = total_size.filter(|&d| d != mapped) {
        warnings.push(format!(
            "'{index_key}' declares metadata.total_size {declared} bytes, but the tensors it maps hold {mapped}: an index edited by hand or from another model?"
        ));
    }
    let held: usize = shards.iter().map(|s| s.tensors.len()).sum();
    if map.len() < held {
        warnings.push(format!(
            "'{index_key}' maps {} of the {held} tensors its shards' headers hold: every tensor of the headers is loaded; copy the model's index again if it was cut short",
            map.len()
        ));
    }
    Ok(warnings)
}

/// `T` of a Hugging Face shard name `<stem>-NNNNN-of-TTTTT.safetensors`
/// (`transformers`' `save_pretrained` naming), `None` for other names.
fn hf_shard_total(file: &str) -> Option<usize> {
    let stem = file.strip_suffix(".safetensors")?;
    let (_, total) = stem.rsplit_once("-of-")?;
    (total.len() == 5 && total.bytes().all(|b| b.is_ascii_digit())).then(|| total.parse().ok()).flatten().filter(|&t| t > 0)
}

/// Tensor names and shapes of a published architecture, bf16: `llama-3.1-8b`
/// (Meta's config: hidden 4096, intermediate 14336, 32 layers, 8 KV heads,
/// vocab 128256, untied head; the shapes the original suite's Python GPU baseline loads),
/// `qwen3-32b` (Qwen's config: hidden 5120, intermediate 25600, 64 layers, 64
/// query and 8 KV heads of 128, vocab 151936, q/k norms, untied head), or
/// `tiny` (same structure, about 40 MB, for tests).
pub fn synth_shapes(name: &str) -> Result<Vec<(String, Vec<usize>)>> {
    let (h, i, l, v, q, kv, qk_norm) = match name {
        "llama-3.1-8b" => (4096, 14336, 32, 128256, 4096, 1024, false),
        "qwen3-32b" => (5120, 25600, 64, 151936, 8192, 1024, true),
        "tiny" => (512, 1536, 4, 32000, 512, 128, true),
        other => {
            return Err(Error::Usage(format!("unknown synthetic model '{other}': use llama-3.1-8b, qwen3-32b or tiny")));
        }
    };
    let mut s = vec![("model.embed_tokens.weight".to_string(), vec![v, h])];
    for n in 0..l {
        let p = format!("model.layers.{n}.");
        s.push((format!("{p}self_attn.q_proj.weight"), vec![q, h]));
        s.push((format!("{p}self_attn.k_proj.weight"), vec![kv, h]));
        s.push((format!("{p}self_attn.v_proj.weight"), vec![kv, h]));
        s.push((format!("{p}self_attn.o_proj.weight"), vec![h, q]));
        if qk_norm {
            s.push((format!("{p}self_attn.q_norm.weight"), vec![128]));
            s.push((format!("{p}self_attn.k_norm.weight"), vec![128]));
        }
        s.push((format!("{p}mlp.gate_proj.weight"), vec![i, h]));
        s.push((format!("{p}mlp.up_proj.weight"), vec![i, h]));
        s.push((format!("{p}mlp.down_proj.weight"), vec![h, i]));
        s.push((format!("{p}input_layernorm.weight"), vec![h]));
        s.push((format!("{p}post_attention_layernorm.weight"), vec![h]));
    }
    s.push(("model.norm.weight".into(), vec![h]));
    s.push(("lm_head.weight".into(), vec![v, h]));
    Ok(s)
}

/// Group tensors into shards the way `save_pretrained(max_shard_size=...)`
/// does: a new shard starts when the next tensor would push the current one
/// past the limit.
pub fn plan_shards(shapes: &[(String, Vec<usize>)], bytes_per_elem: u64, max_shard: u64) -> Vec<Vec<usize>> {
    let mut shards: Vec<Vec<usize>> = vec![Vec::new()];
    let mut size = 0u64;
    for (idx, (_, shape)) in shapes.iter().enumerate() {
        let b = shape.iter().product::<usize>() as u64 * bytes_per_elem;
        if size > 0 && size + b > max_shard {
            shards.push(Vec::new());
            size = 0;
        }
        shards.last_mut().expect("one shard").push(idx);
        size += b;
    }
    shards
}

/// `model-NNNNN-of-NNNNN.safetensors`, Hugging Face's shard names.
pub(crate) fn is_numbered_shard(name: &str) -> bool {
    let Some(mid) = name.strip_prefix("model-").and_then(|n| n.strip_suffix(".safetensors")) else { return false };
    let digits = |s: &str| s.len() == 5 && s.bytes().all(|b| b.is_ascii_digit());
    mid.split_once("-of-").is_some_and(|(a, b)| digits(a) && digits(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use safetensors::tensor::{Dtype, TensorView};

    /// A zero-size tensor sharing its start with the next one loads whatever
    /// order the header lists them in (the reference loader accepts it).
    #[test]
    fn a_zero_size_tensor_at_another_ones_start_loads_in_every_header_order() {
        let t = |n: &str, a: u64, b: u64, shape: &str| format!(r#""{n}":{{"dtype":"F32","shape":{shape},"data_offsets":[{a},{b}]}}"#);
        let parts = [t("a", 0, 8, "[2]"), t("empty", 8, 8, "[0]"), t("b", 8, 16, "[2]"), t("z", 16, 16, "[0,3]")];
        for order in [[0, 1, 2, 3], [3, 2, 1, 0], [2, 1, 3, 0], [1, 3, 0, 2]] {
            let json = format!("{{{}}}", order.iter().map(|&i| parts[i].as_str()).collect::<Vec<_>>().join(","));
            let mut head = (json.len() as u64).to_le_bytes().to_vec();
            head.extend(json.as_bytes());
            let l = parse_header("m.safetensors", head.len() as u64 + 16, &head).unwrap_or_else(|e| panic!("{order:?}: {e}"));
            let names: Vec<&str> = l.tensors.iter().map(|t| t.name.as_str()).collect();
            assert_eq!(names, ["a", "empty", "b", "z"], "{order:?}");
        }
    }

    #[test]
    fn llama_8b_is_16_gb_in_four_5gb_shards() {
        let s = synth_shapes("llama-3.1-8b").unwrap();
        let bytes: u64 = s.iter().map(|(_, sh)| sh.iter().product::<usize>() as u64 * 2).sum();
        assert_eq!(bytes, 16_060_522_496, "Llama-3.1-8B's published 16.06 GB");
        let plan = plan_shards(&s, 2, HF_SHARD_BYTES);
        assert_eq!(plan.len(), 4);
        for shard in &plan {
            let b: u64 = shard.iter().map(|&i| s[i].1.iter().product::<usize>() as u64 * 2).sum();
            assert!(b <= HF_SHARD_BYTES);
        }
        assert!(synth_shapes("gpt-5").is_err());
    }

    #[test]
    fn headers_parse_into_views() {
        let data = [7u8; 2 * 3 * 2 + 4];
        let a = TensorView::new(Dtype::BF16, vec![2, 3], &data[..12]).unwrap();
        let b = TensorView::new(Dtype::F32, vec![1], &data[12..]).unwrap();
        let bytes = safetensors::serialize([("a", a), ("b", b)], None).unwrap();
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let l = parse_header("m", bytes.len() as u64, &bytes[..8 + n]).unwrap();
        assert_eq!(l.data_start as usize, 8 + n);
        assert_eq!(l.data_bytes(), 16);
        let names: Vec<&str> = l.tensors.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names.len(), 2);
        let a = l.tensors.iter().find(|t| t.name == "a").unwrap();
        assert_eq!((a.dtype.as_str(), a.shape.clone(), a.nbytes), ("BF16", vec![2, 3], 12));
        // A header that claims more data than the object holds.
        assert!(parse_header("m", bytes.len() as u64 - 1, &bytes[..8 + n]).is_err());
        assert!(parse_header("m", 100, b"\x05\x00\x00\x00\x00\x00\x00\x00{oops").is_err());
    }
}
