//! `weights --verify`: every loaded tensor compared with a reference, the
//! most independent one there is, and the record says which:
//! 1. `--reference PATH`: a local copy of the model (a Hugging Face snapshot
//!    directory, or the one `.safetensors` file of a one-file model), read
//!    by the `safetensors` crate and compared byte for byte;
//! 2. else the model's digest (`s3rdma-digest.json`, written with the model
//!    by `--synth` and `ingest weights`): one XXH3-64 per tensor;
//! 3. else a second whole-object GET of the same store. It shows the load
//!    put the stored bytes where they belong, not that the store holds the
//!    model that was written (bytes changed at rest read back the same), so
//!    it is reported as "re-read matches (no independent reference)".

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::flag::{REFERENCE, VERIFY};
use crate::format::digest::{DIGEST, Digest};
use crate::format::weights::{ShardLayout, key_in};
use crate::mem::Buffer;
use crate::store::ObjectStore;

/// Which reference the loaded tensors were compared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reference {
    /// A local copy (`--reference`).
    LocalCopy,
    /// The digest written with the model (`s3rdma-digest.json`).
    Digest,
    /// A second read of the same store: not independent.
    ReRead,
}

/// What `--verify` found.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Verified {
    /// True when every tensor matched the reference (see `independent`
    /// for what a match proves).
    pub ok: bool,
    /// Tensors compared.
    pub tensors_checked: usize,
    /// Names of the tensors that differ (or a line naming a whole shard).
    pub mismatched: Vec<String>,
    /// Which reference.
    pub reference_kind: Reference,
    /// Whether the reference is independent of the store's current bytes
    /// (a local copy, a digest written with the model); a re-read is not.
    pub independent: bool,
    /// The reference in words (path, key, how it was read).
    pub reference: String,
    /// Against the digest: which bytes were hashed (in their destination),
    /// on how many threads, in how many seconds; `None` for the other references.
    pub checked: Option<super::hashes::CheckedHow>,
}

impl Verified {
    /// The table's cell: `local copy ok (N)`, `digest ok (N)`, `re-read
    /// matches (N, no independent reference)`, or `MISMATCH vs <reference> (k)`.
    pub fn cell(&self) -> String {
        let what = match self.reference_kind {
            Reference::LocalCopy => "local copy",
            Reference::Digest => "digest",
            Reference::ReRead => "re-read",
        };
        match (self.ok, self.reference_kind) {
            (false, _) => format!("MISMATCH vs {what} ({})", self.mismatched.len()),
            (true, Reference::ReRead) => format!("re-read matches ({}, no independent reference)", self.tensors_checked),
            (true, _) => format!("{what} ok ({})", self.tensors_checked),
        }
    }

    /// The error a mismatch ends the run with, naming the reference and the first tensor.
    pub fn failure(&self) -> Option<Error> {
        let first = self.mismatched.first().filter(|_| !self.ok)?;
        let hint = match self.reference_kind {
            Reference::Digest => {
                format!(": the stored bytes changed after the model was written, or another tool replaced the model (then remove {DIGEST})")
            }
            Reference::LocalCopy => ": the store's model is not the local copy".into(),
            Reference::ReRead => ": the load and a second read of the store disagree".into(),
        };
        Some(Error::Mismatch(format!(
            "{VERIFY}: {} difference(s) in the {} tensors checked against {}, first: {first}{hint}",
            self.mismatched.len(),
            self.tensors_checked,
            self.reference
        )))
    }
}

/// Where each shard's local copy is under `--reference PATH`: a directory
/// holds every shard under its file name; a file stands for the one shard of
/// a one-file model.
///
/// Errors: [`Error::Usage`] naming the path or the missing file and the fix.
pub(super) fn reference_files(path: &Path, prefix: &str, layout: &[ShardLayout]) -> Result<Vec<PathBuf>> {
    let kind = what_is(path);
    if !kind.is_empty() {
        return Err(Error::Usage(format!("{REFERENCE} {}: {kind}: pass the model's local copy (its directory or its one .safetensors file)", path.display())));
    }
    if path.is_file() {
        if layout.len() != 1 {
            return Err(Error::Usage(format!(
                "{REFERENCE} {}: a file, but the model has {} shards: pass the directory that holds them all",
                path.display(),
                layout.len()
            )));
        }
        return Ok(vec![path.to_path_buf()]);
    }
    layout
        .iter()
        .map(|s| {
            let f = path.join(file_of(prefix, &s.key));
            match what_is(&f) {
                k if k.is_empty() && f.is_file() => Ok(f),
                k if k.is_empty() => {
                    Err(Error::Usage(format!("{REFERENCE} {}: {} (the store's '{}') is a directory, not a file", path.display(), f.display(), s.key)))
                }
                k => Err(Error::Usage(format!(
                    "{REFERENCE} {}: {}: {k} (the store's '{}'): pass the directory of the same model",
                    path.display(),
                    f.display(),
                    s.key
                ))),
            }
        })
        .collect()
}

/// What is wrong with `path` as a reference: "" for a regular file or a
/// directory (symbolic links followed), else why not, in words.
fn what_is(path: &Path) -> String {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() || m.is_dir() => String::new(),
        Ok(_) => "not a regular file or a directory".into(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => "no such file or directory".into(),
        Err(e) => e.to_string(),
    }
}

/// Refuse a model whose layout is not the one its digest `d` describes
/// ([`Digest::layout_differences`]), before the load and whether or not
/// `--verify` is asked: an index that lost a shard's entries, a shard of
/// another size, a tensor relabelled or dropped would otherwise load in
/// part and be timed as the model.
///
/// Errors: [`Error::Runtime`] naming the first difference, their count and the fix.
pub(super) fn same_layout(prefix: &str, layout: &[ShardLayout], d: &Digest) -> Result<()> {
    let files: Vec<(&str, &ShardLayout)> = layout.iter().map(|l| (file_of(prefix, &l.key), l)).collect();
    let diffs = d.layout_differences(&files);
    match diffs.first() {
        None => Ok(()),
        Some(first) => Err(Error::Runtime(format!(
            "the model under '{prefix}' is not the one '{}' describes ({} difference(s), first: {first}): copy every shard its index lists and the index again, or write the model again with `s3rdma ingest weights`; remove the digest if another tool replaced the model",
            key_in(prefix, DIGEST),
            diffs.len()
        ))),
    }
}

/// A shard's file name relative to the model's prefix (what the index and the digest name).
fn file_of<'a>(prefix: &str, key: &'a str) -> &'a str {
    key.strip_prefix(&key_in(prefix, "")).unwrap_or(key)
}

/// The loaded data section of one shard, in host memory.
fn loaded(shard: &ShardLayout, buf: &Buffer) -> Result<Vec<u8>> {
    let n = shard.data_bytes() as usize;
    Ok(match buf {
        Buffer::Device(d) => {
            let mut v = vec![0u8; n];
            d.read_back(0, &mut v).map_err(|e| Error::Runtime(format!("{VERIFY}: {e}")))?;
            v
        }
        other => other.as_host().expect("host or pinned")[..n].to_vec(),
    })
}

/// Compare every tensor of `layout`, loaded into `bufs` (one per shard),
/// with the best reference there is (module docs): `reference` when given,
/// else `digest` (the model's, [`crate::catalog::digest::read`]), else a re-read of `store`.
/// Against the digest, `staged` (what the load hashed as it staged, and its
/// reader threads) is used where given, with device memory checked against
/// it on the GPU ([`super::hashes::staged_hashes`]).
///
/// Errors: an unreadable reference; the store's.
pub(super) async fn verify(
    store: &dyn ObjectStore,
    prefix: &str,
    layout: &[ShardLayout],
    bufs: &mut [Buffer],
    reference: Option<&Path>,
    digest: Option<&Digest>,
    staged: Option<(&crate::store::StagedHashes, usize)>,
) -> Result<Verified> {
    let mut how = None;
    let mut checked = 0;
    let mut mismatched = Vec::new();
    let (kind, words) = if let Some(path) = reference {
        let files = reference_files(path, prefix, layout)?;
        for ((shard, buf), file) in layout.iter().zip(bufs.iter()).zip(&files) {
            let bytes = std::fs::read(file).map_err(|e| Error::Runtime(format!("{REFERENCE}: reading {}: {e}", file.display())))?;
            checked += shard.tensors.len();
            compare_file(shard, &loaded(shard, buf)?, &bytes, &file.display().to_string(), &mut mismatched)?;
        }
        (Reference::LocalCopy, format!("the local copy at {} (the safetensors crate's reading)", path.display()))
    } else if let Some(d) = digest {
        let read_back = |bufs: &mut [Buffer]| super::hashes::loaded_hashes(layout, bufs).map_err(|e| Error::Runtime(format!("{VERIFY}: {e}")));
        let (hashes, h) = match staged.map(|(st, threads)| super::hashes::staged_hashes(layout, bufs, st, threads)) {
            Some(Ok((hashes, landed_wrong, h))) => {
                mismatched.extend(landed_wrong.into_iter().map(|k| format!("{k}: device memory differs from the bytes staged (landing checksum)")));
                (hashes, h)
            }
            Some(Err(e)) => {
                let (hashes, mut h) = read_back(bufs)?;
                h.fallback = Some(format!("the GPU's landing checksum failed ({e}): device memory was read back instead"));
                (hashes, h)
            }
            None => read_back(bufs)?,
        };
        for (shard, hs) in layout.iter().zip(&hashes) {
            checked += shard.tensors.len();
            mismatched.extend(d.mismatches_hashed(file_of(prefix, &shard.key), shard, hs));
        }
        how = Some(h);
        let files: Vec<&str> = layout.iter().map(|s| file_of(prefix, &s.key)).collect();
        mismatched.extend(d.missing(&files).into_iter().map(|f| format!("{f}: a shard {DIGEST} names that the model lacks")));
        (Reference::Digest, format!("the digest written with the model ('{}', xxh3-64 per tensor)", key_in(prefix, DIGEST)))
    } else {
        for (shard, buf) in layout.iter().zip(bufs.iter()) {
            let mut b = Buffer::host(shard.object_bytes as usize);
            crate::store::read_into_version(store, &shard.key, None, &mut b, 0, shard.version.as_ref()).await?;
            checked += shard.tensors.len();
            compare_file(shard, &loaded(shard, buf)?, b.as_host().expect("host"), &shard.key, &mut mismatched)?;
        }
        (Reference::ReRead, "a second whole-object GET of the same store (no independent reference: bytes changed at rest read back the same)".to_string())
    };
    Ok(Verified {
        ok: mismatched.is_empty(),
        tensors_checked: checked,
        mismatched,
        reference_kind: kind,
        independent: kind != Reference::ReRead,
        reference: words,
        checked: how,
    })
}

/// Compare the loaded data section `ours` of `shard` with the whole
/// safetensors file `file` (named `name`), tensor by tensor (dtype, shape,
/// bytes), as the `safetensors` crate reads it; differences go to `out`.
///
/// Errors: a file the crate rejects.
fn compare_file(shard: &ShardLayout, ours: &[u8], file: &[u8], name: &str, out: &mut Vec<String>) -> Result<()> {
    let st = safetensors::SafeTensors::deserialize(file).map_err(|e| Error::Runtime(format!("{VERIFY}: the safetensors crate rejects '{name}': {e}")))?;
    if st.len() != shard.tensors.len() {
        out.push(format!("{}: {} tensors in {name}, {} loaded", shard.key, st.len(), shard.tensors.len()));
    }
    for t in &shard.tensors {
        let same = st.tensor(&t.name).is_ok_and(|r| {
            r.shape() == t.shape.as_slice() && format!("{:?}", r.dtype()) == t.dtype && r.data() == &ours[t.offset as usize..(t.offset + t.nbytes) as usize]
        });
        if !same {
            out.push(t.name.clone());
        }
    }
    Ok(())
}
