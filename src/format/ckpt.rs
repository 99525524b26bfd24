//! The flat checkpoint format (docs/04-checkpoint-benchmark.md, "Methods"), compatible
//! with the original suite's: every tensor packed 512-byte aligned into one
//! contiguous buffer, written as chunk objects `<prefix>.part00000`, ... and
//! then, last, `<key>.manifest.json`. No manifest = no checkpoint.
//!
//! Generations: each save writes its chunks under a fresh chunk prefix
//! `<key>.g<generation>`, recorded in the manifest (`chunk_prefix`), so
//! overwriting a checkpoint never touches the parts the current manifest
//! points at; the manifest switch is the commit. Manifests of the original
//! suite (no `chunk_prefix`) read their parts from `<key>.partNNNNN`.
//!
//! Also here: the state the bench saves (the exact ResNet-50 state dict +
//! SGD momentum, and synthetic Adam-shaped transformer state of a given size).

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::flag::SIZES;
use crate::units::size_name;

/// Alignment of every tensor's offset in the flat buffer, bytes (the original
/// suite's; also a multiple of any dtype's size and of O_DIRECT's sector).
pub const ALIGNMENT: u64 = 512;
/// Manifest `format_version` this tool writes and reads.
pub const FORMAT_VERSION: u32 = 1;
/// The largest chunk: one RDMA descriptor registers at most 4 GiB (cuObject's
/// limit; the original Python suite hit it as a segfault at 4 GiB), so chunks stay below it.
pub const MAX_CHUNK: u64 = (4 << 30) - 1;

/// One tensor to save: name, dtype (safetensors spelling) and shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorSpec {
    /// Tensor name (its path in the state dict).
    pub path: String,
    /// Element type as safetensors names it (F32, BF16, ...).
    pub dtype: &'static str,
    /// Dimensions.
    pub shape: Vec<u64>,
}

impl TensorSpec {
    fn new(path: impl Into<String>, dtype: &'static str, shape: &[u64]) -> Self {
        TensorSpec { path: path.into(), dtype, shape: shape.to_vec() }
    }
    /// Elements (1 for a scalar).
    pub fn numel(&self) -> u64 {
        self.shape.iter().product()
    }
    /// Bytes: elements x dtype size.
    pub fn nbytes(&self) -> u64 {
        self.numel() * dtype_size(self.dtype)
    }
}

/// Bytes per element of the dtypes the state uses.
pub fn dtype_size(dtype: &str) -> u64 {
    known_dtype_size(dtype).unwrap_or(1)
}

/// Bytes per element of a safetensors dtype this format holds
/// (<https://github.com/huggingface/safetensors>, whole-byte types), `None`
/// for any other name.
pub fn known_dtype_size(dtype: &str) -> Option<u64> {
    Some(match dtype {
        "F64" | "I64" | "U64" => 8,
        "F32" | "I32" | "U32" => 4,
        "F16" | "BF16" | "I16" | "U16" => 2,
        "I8" | "U8" | "BOOL" | "F8_E4M3" | "F8_E5M2" => 1,
        _ => return None,
    })
}

/// One tensor's place in the flat buffer (manifest entry; original field names).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorEntry {
    /// Tensor name (its path in the state dict).
    pub path: String,
    /// Element type as safetensors names it (F32, BF16, ...).
    pub dtype: String,
    /// Dimensions.
    pub shape: Vec<u64>,
    /// Byte offset in the flat buffer, a multiple of the manifest's alignment.
    pub offset: u64,
    /// Bytes of the tensor's data.
    pub nbytes: u64,
}

/// The checksum a manifest holds per chunk, as written in its
/// `checksums.algorithm`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ChecksumAlgorithm {
    /// `xxh3-64`: XXH3-64 of the chunk's bytes (the twox-hash crate), in lowercase hex.
    #[serde(rename = "xxh3-64")]
    Xxh3_64,
    /// `none`: no checksums were taken (`--checksum none`).
    #[serde(rename = "none")]
    None,
    /// A name this build does not know (a later build's): a restore refuses
    /// to call such a checkpoint verified. Never written.
    #[serde(other)]
    Unknown,
}

/// Per-chunk checksums.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checksums {
    /// How each chunk was summed.
    pub algorithm: ChecksumAlgorithm,
    /// One lowercase hex digest per chunk, in chunk order (empty for `none`).
    pub chunks: Vec<String>,
}

/// The chunk prefix of generation `generation` of checkpoint `key`:
/// `<key>.g<generation>`; its chunks are `<key>.g<generation>.partNNNNN`
/// ([`Manifest::chunk_key`]). Every save writes a new generation, so a save
/// that stops midway never overwrites the chunks the committed manifest names.
pub fn generation_prefix(key: &str, generation: &str) -> String {
    format!("{key}.g{generation}")
}

/// Which generation of checkpoint `key` the object `object` is a chunk of:
/// `Some(Some(g))` for `<key>.g<g>.partNNNNN`, `Some(None)` for the original
/// suite's `<key>.partNNNNN`, `None` for anything else (the manifest, the
/// serialized blob, another checkpoint's objects).
pub fn chunk_generation<'a>(key: &str, object: &'a str) -> Option<Option<&'a str>> {
    let rest = object.strip_prefix(key)?;
    let digits = |d: &str| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit());
    if let Some(n) = rest.strip_prefix(".part") {
        return digits(n).then_some(None);
    }
    let (generation, n) = rest.strip_prefix(".g")?.rsplit_once(".part")?;
    (digits(n) && !generation.is_empty()).then_some(Some(generation))
}

/// `<key>.manifest.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Manifest layout version.
    pub format_version: u32,
    /// Bytes of the flat buffer (tensors at their aligned offsets).
    pub total_bytes: u64,
    /// Alignment of every tensor's offset, bytes (512).
    pub alignment: u64,
    /// Every tensor with its offset in the flat buffer.
    pub tensors: Vec<TensorEntry>,
    /// Bytes per chunk object (the last one may be shorter).
    pub chunk_bytes: u64,
    /// Chunk objects (`<key>.partNNNNN`).
    pub num_chunks: u64,
    /// Chunk `i` is the object `<chunk_prefix>.part<i:05>`; absent in the
    /// original suite's manifests, which mean `<key>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk_prefix: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// One checksum per chunk (`None` in the original suite's manifests).
    pub checksums: Option<Checksums>,
    /// The seed of the bench's random tensor values (s3rdma's own field), so a
    /// restore-only run can tell a wrong `--seed` from corruption.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

impl Manifest {
    /// The manifest's own key for checkpoint `key`.
    pub fn key(key: &str) -> String {
        format!("{key}.manifest.json")
    }

    /// A manifest for `tensors` packed by [`pack`], cut into `chunk_bytes` chunks
    /// under `chunk_prefix`; checksums are added after the chunks are written.
    pub fn new(tensors: Vec<TensorEntry>, total_bytes: u64, chunk_bytes: u64, chunk_prefix: String) -> Self {
        Manifest {
            format_version: FORMAT_VERSION,
            total_bytes,
            alignment: ALIGNMENT,
            tensors,
            chunk_bytes,
            num_chunks: total_bytes.div_ceil(chunk_bytes.max(1)),
            chunk_prefix: Some(chunk_prefix),
            checksums: None,
            seed: None,
        }
    }

    /// Key of chunk `i` of checkpoint `key`.
    pub fn chunk_key(&self, key: &str, i: u64) -> String {
        format!("{}.part{i:05}", self.chunk_prefix.as_deref().unwrap_or(key))
    }

    /// Byte range of chunk `i` in the flat buffer.
    pub fn chunk_range(&self, i: u64) -> std::ops::Range<u64> {
        let start = i * self.chunk_bytes;
        start..(start + self.chunk_bytes).min(self.total_bytes)
    }

    /// Parse and check a manifest read from the store.
    ///
    /// Errors: [`Error::Runtime`] naming `key` when the JSON is malformed or
    /// inconsistent (a tensor outside the buffer, a chunk count that does not
    /// cover it, a checksum list of the wrong length).
    pub fn parse(key: &str, bytes: &[u8]) -> Result<Self> {
        let bad = |why: String| Error::Runtime(format!("checkpoint manifest '{}' is invalid: {why}", Manifest::key(key)));
        let m: Manifest = serde_json::from_slice(bytes).map_err(|e| bad(e.to_string()))?;
        if m.format_version > FORMAT_VERSION {
            return Err(bad(format!("format_version {} is newer than this tool's {FORMAT_VERSION}: upgrade s3rdma", m.format_version)));
        }
        if m.format_version == 0 {
            return Err(bad(format!(
                "format_version 0 is no version of this format (1 to {FORMAT_VERSION}): not a manifest s3rdma or the original suite wrote; save the checkpoint again"
            )));
        }
        if m.chunk_bytes == 0 || m.chunk_bytes > MAX_CHUNK || m.num_chunks != m.total_bytes.div_ceil(m.chunk_bytes) {
            return Err(bad(format!("{} chunks of {} bytes do not cover {} bytes", m.num_chunks, m.chunk_bytes, m.total_bytes)));
        }
        if m.tensors.is_empty() {
            return Err(bad("it lists no tensors: save the checkpoint again".into()));
        }
        if !m.alignment.is_power_of_two() {
            return Err(bad(format!("alignment {} is not a power of two", m.alignment)));
        }
        // Each tensor fits its shape and the buffer, in the layout pack()
        // writes: at a multiple of the alignment, after the previous one's
        // end, once by name. (A buffer longer than its last tensor is another
        // state's, said on restore.)
        let mut end = 0u64;
        let mut names = std::collections::HashSet::new();
        for t in &m.tensors {
            let Some(size) = known_dtype_size(&t.dtype) else {
                return Err(bad(format!("tensor '{}' has dtype '{}', none this format holds (F64, F32, BF16, I64, U8, ...)", t.path, t.dtype)));
            };
            let expect = t.shape.iter().try_fold(size, |n, &d| n.checked_mul(d));
            if t.offset.checked_add(t.nbytes).is_none_or(|end| end > m.total_bytes) || expect != Some(t.nbytes) {
                return Err(bad(format!("tensor '{}' ({} bytes at {}) does not fit its shape or the buffer", t.path, t.nbytes, t.offset)));
            }
            if t.offset % m.alignment != 0 || t.offset < end || !names.insert(t.path.as_str()) {
                return Err(bad(format!(
                    "tensor '{}' at {} is not at a multiple of {} after the one before it (ending at {end}), or is named twice",
                    t.path, t.offset, m.alignment
                )));
            }
            end = t.offset + t.nbytes;
        }
        if let Some(c) = m.checksums.as_ref().filter(|c| c.algorithm == ChecksumAlgorithm::Xxh3_64) {
            if c.chunks.len() as u64 != m.num_chunks {
                return Err(bad(format!("{} checksums for {} chunks", c.chunks.len(), m.num_chunks)));
            }
            if let Some((i, sum)) = c.chunks.iter().enumerate().find(|(_, s)| s.len() != 16 || !s.bytes().all(|b| b.is_ascii_hexdigit())) {
                return Err(bad(format!("checksum {i} '{sum}' is not an xxh3-64 (16 hex digits)")));
            }
        }
        Ok(m)
    }
}

/// Pack `specs` in order, each at the next multiple of [`ALIGNMENT`]; returns
/// the entries and the flat buffer's total bytes (the end of the last tensor).
pub fn pack(specs: &[TensorSpec]) -> (Vec<TensorEntry>, u64) {
    let mut off = 0u64;
    let mut total = 0u64;
    let entries = specs
        .iter()
        .map(|s| {
            let e = TensorEntry { path: s.path.clone(), dtype: s.dtype.into(), shape: s.shape.clone(), offset: off, nbytes: s.nbytes() };
            total = off + e.nbytes;
            off = total.next_multiple_of(ALIGNMENT);
            e
        })
        .collect();
    (entries, total)
}

/// xxh3-64 of `data` as 16 lowercase hex digits.
pub fn xxh3_hex(data: &[u8]) -> String {
    format!("{:016x}", twox_hash::XxHash3_64::oneshot(data))
}

/// Named saved states.
pub const WORKLOADS: &[&str] = &["resnet50"];

/// The ResNet-50 training state the seeds checkpoint (B4/B5, "ResNet-50 (195
/// MiB)"): torchvision's `resnet50()` state dict in its order — every
/// parameter and buffer with its exact name and shape (BatchNorm running
/// statistics F32, `num_batches_tracked` I64 scalars) — followed by one SGD
/// momentum buffer per parameter (`optimizer.momentum_buffer.<name>`, F32).
///
/// Source: torchvision.models.resnet (Bottleneck, layers [3, 4, 6, 3],
/// expansion 4); its parameter count, 25,557,032, is the published one.
pub fn resnet50() -> Vec<TensorSpec> {
    let mut params: Vec<TensorSpec> = Vec::new();
    let mut state: Vec<TensorSpec> = Vec::new();
    let conv = |state: &mut Vec<TensorSpec>, params: &mut Vec<TensorSpec>, name: &str, shape: &[u64]| {
        let t = TensorSpec::new(format!("{name}.weight"), "F32", shape);
        params.push(t.clone());
        state.push(t);
    };
    let bn = |state: &mut Vec<TensorSpec>, params: &mut Vec<TensorSpec>, name: &str, c: u64| {
        for p in ["weight", "bias"] {
            let t = TensorSpec::new(format!("{name}.{p}"), "F32", &[c]);
            params.push(t.clone());
            state.push(t);
        }
        state.push(TensorSpec::new(format!("{name}.running_mean"), "F32", &[c]));
        state.push(TensorSpec::new(format!("{name}.running_var"), "F32", &[c]));
        state.push(TensorSpec::new(format!("{name}.num_batches_tracked"), "I64", &[]));
    };
    conv(&mut state, &mut params, "conv1", &[64, 3, 7, 7]);
    bn(&mut state, &mut params, "bn1", 64);
    let mut inplanes = 64;
    for (layer, (planes, blocks)) in [(64u64, 3), (128, 4), (256, 6), (512, 3)].into_iter().enumerate() {
        for b in 0..blocks {
            let p = format!("layer{}.{b}", layer + 1);
            conv(&mut state, &mut params, &format!("{p}.conv1"), &[planes, inplanes, 1, 1]);
            bn(&mut state, &mut params, &format!("{p}.bn1"), planes);
            conv(&mut state, &mut params, &format!("{p}.conv2"), &[planes, planes, 3, 3]);
            bn(&mut state, &mut params, &format!("{p}.bn2"), planes);
            conv(&mut state, &mut params, &format!("{p}.conv3"), &[planes * 4, planes, 1, 1]);
            bn(&mut state, &mut params, &format!("{p}.bn3"), planes * 4);
            if b == 0 {
                conv(&mut state, &mut params, &format!("{p}.downsample.0"), &[planes * 4, inplanes, 1, 1]);
                bn(&mut state, &mut params, &format!("{p}.downsample.1"), planes * 4);
            }
            inplanes = planes * 4;
        }
    }
    let fc_w = TensorSpec::new("fc.weight", "F32", &[1000, 2048]);
    let fc_b = TensorSpec::new("fc.bias", "F32", &[1000]);
    params.extend([fc_w.clone(), fc_b.clone()]);
    state.extend([fc_w, fc_b]);
    state.extend(params.iter().map(|p| TensorSpec { path: format!("optimizer.momentum_buffer.{}", p.path), ..p.clone() }));
    state
}

/// Parameter count of [`resnet50`] (model parameters only, no buffers or momentum).
pub fn resnet50_param_count() -> u64 {
    resnet50()
        .iter()
        .filter(|t| !t.path.starts_with("optimizer.") && !t.path.contains("running_") && !t.path.ends_with("num_batches_tracked"))
        .map(TensorSpec::numel)
        .sum()
}

/// Synthetic training state of about `bytes` bytes, shaped like a Llama-style
/// decoder trained with Adam: F32 weights, then `optimizer.exp_avg.*` and
/// `optimizer.exp_avg_sq.*` of the same shapes (a third of the bytes each),
/// plus Adam's per-parameter `optimizer.step.*` scalar.
///
/// Shapes: hidden size H is the largest power of two (64..8192) for which at
/// least 8 layers fit; a layer is q/k/v/o (H x H), gate/up (I x H), down
/// (H x I) with I = 3.5 H (Llama-3's ratio), and two RMSNorm weights (H); the
/// embedding (rows x H) takes the remainder, so the mix runs from H-element
/// norms to the largest matrices, as in a real model. The total is within
/// `3 x 4 x H` bytes of `bytes` (plus alignment padding).
///
/// Errors: [`Error::Usage`] below 1 MiB (too small to be a checkpoint).
pub fn synthetic_adam(bytes: u64) -> Result<Vec<TensorSpec>> {
    if bytes < 1 << 20 {
        return Err(Error::Usage(format!("{SIZES} {}: a synthetic checkpoint needs at least 1MiB", size_name(bytes))));
    }
    let params = bytes / 3 / 4;
    let layer = |h: u64| 4 * h * h + 3 * h * (h * 7 / 2) + 2 * h;
    let h = [8192u64, 4096, 2048, 1024, 512, 256, 128, 64].into_iter().find(|&h| 8 * layer(h) + h <= params).unwrap_or(64);
    let i = h * 7 / 2;
    let layers = (params.saturating_sub(h)) / layer(h);
    let rows = (params.saturating_sub(h + layers * layer(h))) / h;
    let mut w = Vec::new();
    if rows > 0 {
        w.push(TensorSpec::new("model.embed_tokens.weight", "F32", &[rows, h]));
    }
    for l in 0..layers {
        let p = format!("model.layers.{l}.");
        w.push(TensorSpec::new(format!("{p}self_attn.q_proj.weight"), "F32", &[h, h]));
        w.push(TensorSpec::new(format!("{p}self_attn.k_proj.weight"), "F32", &[h, h]));
        w.push(TensorSpec::new(format!("{p}self_attn.v_proj.weight"), "F32", &[h, h]));
        w.push(TensorSpec::new(format!("{p}self_attn.o_proj.weight"), "F32", &[h, h]));
        w.push(TensorSpec::new(format!("{p}mlp.gate_proj.weight"), "F32", &[i, h]));
        w.push(TensorSpec::new(format!("{p}mlp.up_proj.weight"), "F32", &[i, h]));
        w.push(TensorSpec::new(format!("{p}mlp.down_proj.weight"), "F32", &[h, i]));
        w.push(TensorSpec::new(format!("{p}input_layernorm.weight"), "F32", &[h]));
        w.push(TensorSpec::new(format!("{p}post_attention_layernorm.weight"), "F32", &[h]));
    }
    w.push(TensorSpec::new("model.norm.weight", "F32", &[h]));
    let mut state = w.clone();
    for group in ["exp_avg", "exp_avg_sq"] {
        state.extend(w.iter().map(|t| TensorSpec { path: format!("optimizer.{group}.{}", t.path), ..t.clone() }));
    }
    state.extend(w.iter().map(|t| TensorSpec::new(format!("optimizer.step.{}", t.path), "F32", &[])));
    Ok(state)
}

#[cfg(test)]
mod tests {

    /// Chunk keys parse back to their generation; the manifest, the
    /// serialized blob and another checkpoint whose key extends this one do not.
    #[test]
    fn chunk_keys_parse_back_to_their_generation() {
        let g = "20261204T031921.123456-2";
        let m = Manifest::new(Vec::new(), 10, 4, generation_prefix("ck/r0", g));
        assert_eq!(m.chunk_key("ck/r0", 2), "ck/r0.g20261204T031921.123456-2.part00002");
        assert_eq!(chunk_generation("ck/r0", &m.chunk_key("ck/r0", 2)), Some(Some(g)));
        assert_eq!(chunk_generation("ck/r0", "ck/r0.part00007"), Some(None));
        for other in ["ck/r0.manifest.json", "ck/r0.safetensors", "ck/r0.g.part00001", "ck/r0.gX.part", "ck/r0.part", "ck/r01.part00001", "ck/r0.gX.partY"] {
            assert_eq!(chunk_generation("ck/r0", other), None, "{other}");
        }
    }
    use super::*;

    #[test]
    fn a_manifest_of_format_version_0_or_a_later_one_is_refused() {
        let (e, total) = pack(&[TensorSpec::new("a", "U8", &[10])]);
        let m = Manifest::new(e, total, 4, generation_prefix("ck/r0", "20261204T031921.123456-2"));
        let mut v = serde_json::to_value(&m).unwrap();
        assert!(Manifest::parse("ck/r0", &serde_json::to_vec(&v).unwrap()).is_ok(), "{v}");
        v["format_version"] = 0.into();
        let e = Manifest::parse("ck/r0", &serde_json::to_vec(&v).unwrap()).unwrap_err().to_string();
        assert!(e.contains("format_version 0 is no version") && e.contains("ck/r0.manifest.json"), "{e}");
        v["format_version"] = (FORMAT_VERSION + 1).into();
        assert!(Manifest::parse("ck/r0", &serde_json::to_vec(&v).unwrap()).unwrap_err().to_string().contains("upgrade s3rdma"));
    }

    #[test]
    fn checksum_algorithms_keep_their_manifest_names() {
        let json = |a: ChecksumAlgorithm| serde_json::to_string(&a).unwrap();
        assert_eq!(json(ChecksumAlgorithm::Xxh3_64), "\"xxh3-64\"");
        assert_eq!(json(ChecksumAlgorithm::None), "\"none\"");
        let read = |s: &str| serde_json::from_str::<ChecksumAlgorithm>(s).unwrap();
        assert_eq!(read("\"xxh3-64\""), ChecksumAlgorithm::Xxh3_64);
        assert_eq!(read("\"none\""), ChecksumAlgorithm::None);
        // A later build's algorithm reads as unknown, not as a parse failure.
        assert_eq!(read("\"blake3\""), ChecksumAlgorithm::Unknown);
    }

    #[test]
    fn resnet50_matches_the_published_parameter_count_and_size() {
        assert_eq!(resnet50_param_count(), 25_557_032);
        let s = resnet50();
        // 161 parameters + 106 BN buffers (53 BN layers x 2) + 53 counters, + 161 momentum buffers.
        assert_eq!(s.len(), 161 + 53 * 3 + 161);
        let (_, total) = pack(&s);
        let mib = total as f64 / (1 << 20) as f64;
        // The original Python suite: "ResNet-50 (195 MiB)".
        assert!((194.5..196.0).contains(&mib), "{mib} MiB");
        assert!(s.iter().any(|t| t.path == "layer4.2.bn3.running_var" && t.shape == [2048]));
        assert!(s.iter().any(|t| t.path == "layer3.0.downsample.0.weight" && t.shape == [1024, 512, 1, 1]));
    }

    #[test]
    fn synthetic_state_is_adam_shaped_and_near_the_size() {
        for bytes in [1u64 << 20, 64 << 20, 1 << 30, 16 << 30] {
            let s = synthetic_adam(bytes).unwrap();
            let (_, total) = pack(&s);
            let ratio = total as f64 / bytes as f64;
            assert!((0.97..=1.01).contains(&ratio), "{bytes}: {total} ({ratio})");
            let w: u64 = s.iter().filter(|t| !t.path.starts_with("optimizer.")).map(TensorSpec::nbytes).sum();
            let m: u64 = s.iter().filter(|t| t.path.starts_with("optimizer.exp_avg.")).map(TensorSpec::nbytes).sum();
            assert_eq!(w, m);
        }
        let big = synthetic_adam(16 << 30).unwrap();
        // 16 GiB of Adam state is a ~1.4B-parameter model: H = 2048, 8 layers or more.
        assert!(big.iter().any(|t| t.shape == [2048, 2048]), "16 GiB should use H = 2048");
        assert!(big.iter().any(|t| t.path.starts_with("model.layers.7.")));
        assert!(synthetic_adam(1000).is_err());
    }

    #[test]
    fn pack_aligns_every_tensor() {
        let specs = vec![TensorSpec::new("a", "F32", &[3]), TensorSpec::new("b", "I64", &[]), TensorSpec::new("c", "F32", &[200])];
        let (e, total) = pack(&specs);
        assert_eq!(e.iter().map(|t| t.offset).collect::<Vec<_>>(), vec![0, 512, 1024]);
        assert_eq!(total, 1024 + 800);
    }

    #[test]
    fn manifests_are_checked_and_chunks_named() {
        let (e, total) = pack(&[TensorSpec::new("a", "F32", &[1000])]);
        let m = Manifest::new(e, total, 1024, "ck.g1".into());
        assert_eq!(m.num_chunks, 4);
        assert_eq!(m.chunk_key("ck", 3), "ck.g1.part00003");
        assert_eq!(m.chunk_range(3), 3072..4000);
        let json = serde_json::to_vec(&m).unwrap();
        assert_eq!(Manifest::parse("ck", &json).unwrap(), m);
        let mut bad = m.clone();
        bad.tensors[0].offset = 100;
        assert!(Manifest::parse("ck", &serde_json::to_vec(&bad).unwrap()).unwrap_err().to_string().contains("does not fit"));
        let mut old = m.clone();
        old.chunk_prefix = None;
        assert_eq!(old.chunk_key("ck", 0), "ck.part00000");
        assert!(Manifest::parse("ck", b"{").is_err());
    }

    /// A manifest edited into one no save writes is refused by what is wrong
    /// with it, before a chunk is read (a bad checksum would otherwise blame
    /// the chunk).
    #[test]
    fn a_manifest_no_save_writes_is_named_for_what_is_wrong() {
        let (e, total) = pack(&[TensorSpec::new("a", "F32", &[1000])]);
        let mut m = Manifest::new(e, total, 1024, "ck.g1".into());
        m.checksums = Some(Checksums { algorithm: ChecksumAlgorithm::Xxh3_64, chunks: vec!["00112233445566ff".into(); 4] });
        let says = |m: &Manifest| Manifest::parse("ck", &serde_json::to_vec(m).unwrap()).map(drop).map_err(|e| e.to_string());
        assert_eq!(says(&m), Ok(()));
        let mut bad = m.clone();
        bad.tensors.clear();
        assert!(says(&bad).unwrap_err().contains("it lists no tensors"));
        for a in [0, 3] {
            let mut bad = m.clone();
            bad.alignment = a;
            assert!(says(&bad).unwrap_err().contains(&format!("alignment {a} is not a power of two")));
        }
        let mut bad = m.clone();
        bad.tensors[0].dtype = "Q7".into();
        assert!(says(&bad).unwrap_err().contains("tensor 'a' has dtype 'Q7', none this format holds"));
        let mut bad = m.clone();
        bad.checksums.as_mut().unwrap().chunks[2] = "zz".into();
        assert!(says(&bad).unwrap_err().contains("checksum 2 'zz' is not an xxh3-64"));
        // Layout: unaligned, overlapping, named twice.
        let (e, total) = pack(&[TensorSpec::new("a", "F32", &[100]), TensorSpec::new("b", "F32", &[100])]);
        let two = Manifest::new(e, total, 1024, "ck.g1".into());
        assert_eq!(says(&two), Ok(()));
        let mut bad = two.clone();
        bad.tensors[0].offset = 1;
        assert!(says(&bad).unwrap_err().contains("tensor 'a' at 1 is not at a multiple of 512"));
        let mut bad = two.clone();
        bad.tensors[1].offset = 0;
        assert!(says(&bad).unwrap_err().contains("tensor 'b' at 0"));
        let mut bad = two.clone();
        bad.tensors[1].path = "a".into();
        assert!(says(&bad).unwrap_err().contains("or is named twice"));
    }
}
