//! The weights digest: `<model>/s3rdma-digest.json`, one XXH3-64 per tensor,
//! written by `weights --synth` and `ingest weights` after everything else of
//! the model (a digest on the store always describes a whole model), and read
//! by `weights --verify`: the reference a load is checked against that does
//! not come from the store's current bytes, so bytes changed at rest are
//! caught (a second read of the store would return them again).
//!
//! Shape (JSON): `{"format": "s3rdma-weights-digest/1", "state":
//! "complete", "algorithm": "xxh3-64", "shards": {"<file name>":
//! {"object_bytes": N, "tensors": {"<tensor>": {"dtype": "BF16", "shape":
//! [..], "offsets": [start, end], "xxh3": "<16 hex digits>"}}}}}`; file names
//! as the index's weight_map gives them. XXH3-64 is the twox-hash crate's,
//! as for checkpoint chunks. A writer first puts a digest whose `state` is
//! `writing` and no shards, and the complete one last: a write that stopped
//! midway leaves a model every load refuses, never one half old, half new.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::weights::ShardLayout;

/// The digest's object name under a model's prefix.
pub const DIGEST: &str = "s3rdma-digest.json";

/// The `format` value this version writes and reads.
pub(crate) const FORMAT: &str = "s3rdma-weights-digest/1";

/// The largest digest read (64 MiB: about 500,000 tensors; models hold
/// thousands): anything larger is not a digest.
pub(crate) const MAX_DIGEST_BYTES: u64 = 64 << 20;

/// A model's digest (see the module docs for its JSON shape).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Digest {
    /// `s3rdma-weights-digest/1`.
    pub format: String,
    /// `complete`, or `writing` while the model is being written.
    pub state: String,
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
    /// Each tensor, by name.
    pub tensors: BTreeMap<String, TensorDigest>,
}

/// One tensor's digest: what the header says of it, and its bytes' hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorDigest {
    /// safetensors dtype name, e.g. `BF16`.
    pub dtype: String,
    /// Dimensions.
    pub shape: Vec<usize>,
    /// Start and end of its bytes in the data section.
    pub offsets: [u64; 2],
    /// XXH3-64 of its bytes, 16 lowercase hex digits.
    pub xxh3: String,
}

impl Default for Digest {
    fn default() -> Digest {
        Digest { format: FORMAT.into(), state: "complete".into(), algorithm: "xxh3-64".into(), shards: BTreeMap::new() }
    }
}

impl Digest {
    /// Add the shard `file` described by `layout`, whose data section is `data`
    /// (`layout.data_bytes()` bytes, the bytes after the header).
    pub fn add(&mut self, file: &str, layout: &ShardLayout, data: &[u8]) {
        self.shards.insert(file.to_string(), ShardDigest { object_bytes: layout.object_bytes, tensors: tensor_digests(layout, data) });
    }

    /// Compare the loaded data section `data` of the shard `file` (layout
    /// `layout`) with this digest: the names of the tensors that differ (in
    /// dtype, shape, place or bytes; a tensor only one side has), or one line
    /// naming the shard when the digest does not know it or its size differs.
    pub fn mismatches(&self, file: &str, layout: &ShardLayout, data: &[u8]) -> Vec<String> {
        let hashes: Vec<u64> =
            layout.tensors.iter().map(|t| twox_hash::XxHash3_64::oneshot(&data[t.offset as usize..(t.offset + t.nbytes) as usize])).collect();
        self.mismatches_hashed(file, layout, &hashes)
    }

    /// [`Digest::mismatches`] from each tensor's XXH3-64, computed by the
    /// caller (`hashes[i]` of `layout.tensors[i]`), e.g. on every core.
    pub fn mismatches_hashed(&self, file: &str, layout: &ShardLayout, hashes: &[u64]) -> Vec<String> {
        let Some(want) = self.shards.get(file) else {
            return vec![format!("{}: not in {DIGEST}", layout.key)];
        };
        if want.object_bytes != layout.object_bytes {
            return vec![format!("{}: {} bytes, {DIGEST} says {}", layout.key, layout.object_bytes, want.object_bytes)];
        }
        let got = digests_of(layout, hashes);
        let mut out: Vec<String> = got.iter().filter(|(n, d)| want.tensors.get(*n) != Some(d)).map(|(n, _)| n.clone()).collect();
        out.extend(want.tensors.keys().filter(|n| !got.contains_key(*n)).map(|n| format!("{n} (in {DIGEST}, not in {})", layout.key)));
        out
    }

    /// How the model's layout (each shard's file name relative to the
    /// model's prefix, with the layout its header gives) differs from the
    /// model this digest describes, before any byte is loaded: shards the
    /// digest names that the layout lacks (an index edited or copied from
    /// another model), shards it does not name, a shard of another size, a
    /// tensor missing, added, or with another dtype, shape or offsets. Each
    /// difference is one line naming the shard file (and the tensor); empty
    /// when the layout is the digest's.
    pub fn layout_differences(&self, shards: &[(&str, &ShardLayout)]) -> Vec<String> {
        let mut out: Vec<String> =
            self.missing(&shards.iter().map(|(f, _)| *f).collect::<Vec<_>>()).into_iter().map(|f| format!("'{f}' is in {DIGEST}, not in the model")).collect();
        for (file, layout) in shards {
            let Some(want) = self.shards.get(*file) else {
                out.push(format!("'{file}' is in the model, not in {DIGEST}"));
                continue;
            };
            if want.object_bytes != layout.object_bytes {
                out.push(format!("'{file}' holds {} bytes, {DIGEST} says {}", layout.object_bytes, want.object_bytes));
                continue;
            }
            for t in &layout.tensors {
                match want.tensors.get(&t.name) {
                    None => out.push(format!("'{file}' holds tensor '{}', which {DIGEST} does not name", t.name)),
                    Some(w) if w.dtype != t.dtype || w.shape != t.shape || w.offsets != [t.offset, t.offset + t.nbytes] => out.push(format!(
                        "'{file}' tensor '{}' is {} {:?} at {}..{}, {DIGEST} says {} {:?} at {}..{}",
                        t.name,
                        t.dtype,
                        t.shape,
                        t.offset,
                        t.offset + t.nbytes,
                        w.dtype,
                        w.shape,
                        w.offsets[0],
                        w.offsets[1]
                    )),
                    Some(_) => {}
                }
            }
            let names: std::collections::BTreeSet<&str> = layout.tensors.iter().map(|t| t.name.as_str()).collect();
            out.extend(want.tensors.keys().filter(|n| !names.contains(n.as_str())).map(|n| format!("'{file}' lacks tensor '{n}', which {DIGEST} names")));
        }
        out
    }

    /// Shards the digest names that the loaded model lacks (`files`: the
    /// model's shard file names).
    pub fn missing<'a>(&'a self, files: &[&str]) -> Vec<&'a str> {
        self.shards.keys().map(String::as_str).filter(|f| !files.contains(f)).collect()
    }
}

/// Every tensor of `layout`, its bytes in the data section `data`.
fn tensor_digests(layout: &ShardLayout, data: &[u8]) -> BTreeMap<String, TensorDigest> {
    let hashes: Vec<u64> = layout.tensors.iter().map(|t| twox_hash::XxHash3_64::oneshot(&data[t.offset as usize..(t.offset + t.nbytes) as usize])).collect();
    digests_of(layout, &hashes)
}

/// Each tensor's digest from its hash (`hashes[i]` of `layout.tensors[i]`).
fn digests_of(layout: &ShardLayout, hashes: &[u64]) -> BTreeMap<String, TensorDigest> {
    layout
        .tensors
        .iter()
        .zip(hashes)
        .map(|(t, h)| {
            let d = TensorDigest { dtype: t.dtype.clone(), shape: t.shape.clone(), offsets: [t.offset, t.offset + t.nbytes], xxh3: format!("{h:016x}") };
            (t.name.clone(), d)
        })
        .collect()
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
        blob[b.offset as usize + 3] ^= 1;
        // The same bytes under another dtype name: the header changed at rest.
        let mut relabelled = l.clone();
        relabelled.tensors.iter_mut().find(|t| t.name == "a").unwrap().dtype = "I8".into();
        assert_eq!(d.mismatches("model.safetensors", &relabelled, &blob), ["a"]);
        assert_eq!(d.missing(&["model.safetensors"]), Vec::<&str>::new());
        assert_eq!(d.missing(&["other.safetensors"]), ["model.safetensors"]);
        assert_eq!(d.mismatches("other.safetensors", &l, &blob), ["m/model.safetensors: not in s3rdma-digest.json"]);
        let bigger = ShardLayout { object_bytes: l.object_bytes + 1, ..l.clone() };
        assert!(d.mismatches("model.safetensors", &bigger, &blob)[0].contains("bytes, s3rdma-digest.json says"));
    }

    /// A layout is compared with the digest before any byte is read: the
    /// same layout has no difference; a shard missing from the model (an
    /// index that lost its entries), one the digest does not know, another
    /// size, or a tensor relabelled or dropped is each named.
    #[test]
    fn a_layout_that_is_not_the_digests_is_named_before_the_load() {
        let (l, blob) = shard();
        let mut d = Digest::default();
        d.add("a.safetensors", &l, &blob);
        d.add("b.safetensors", &l, &blob);
        assert_eq!(d.layout_differences(&[("a.safetensors", &l), ("b.safetensors", &l)]), Vec::<String>::new());
        assert_eq!(d.layout_differences(&[("a.safetensors", &l)]), ["'b.safetensors' is in s3rdma-digest.json, not in the model"]);
        let diffs = d.layout_differences(&[("a.safetensors", &l), ("b.safetensors", &l), ("c.safetensors", &l)]);
        assert_eq!(diffs, ["'c.safetensors' is in the model, not in s3rdma-digest.json"]);
        let bigger = ShardLayout { object_bytes: l.object_bytes + 1, ..l.clone() };
        assert_eq!(
            d.layout_differences(&[("a.safetensors", &l), ("b.safetensors", &bigger)]),
            [format!("'b.safetensors' holds {} bytes, s3rdma-digest.json says {}", l.object_bytes + 1, l.object_bytes)]
        );
        let mut other = l.clone();
        other.tensors[0].dtype = "I8".into();
        other.tensors.pop();
        assert_eq!(
            d.layout_differences(&[("a.safetensors", &l), ("b.safetensors", &other)]),
            [
                "'b.safetensors' tensor 'a' is I8 [12] at 0..12, s3rdma-digest.json says U8 [12] at 0..12".to_string(),
                "'b.safetensors' lacks tensor 'b', which s3rdma-digest.json names".to_string()
            ]
        );
    }
}
