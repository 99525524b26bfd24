//! `s3rdma ingest`: build the datasets `tokens` and `train` read, through the
//! [`ObjectStore`] trait (so `--backend local|http|rdma` all work), in the
//! layouts of [`crate::format::shards`].
//!
//! Each shard is built in host memory, then written as its data object and,
//! last, its sidecar (the commit: readers list sidecars). A failed or killed
//! ingest leaves at most one data object without a sidecar, which readers
//! ignore and the next ingest of the same prefix overwrites.

use std::path::{Path, PathBuf};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rand::{Rng, SeedableRng, rngs::SmallRng};
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::format::shards::{self, DatasetManifest, TokenShard};
use crate::store::{self, ObjectStore};

pub mod commit;
pub(crate) mod images;
mod plan;
pub mod synth;
pub mod weights;
pub(crate) use images::images;
pub use images::{Source, TarShard, build_tar, resize_center_crop, scan_image_folder, synth_image};
pub use plan::{ImagesIngest, IngestPlan, TokensIngest, WeightsIngest, WeightsSource};

/// Run `s3rdma ingest <kind>`.
pub async fn run(kind: IngestPlan) -> Result<()> {
    let prefix = match &kind {
        IngestPlan::Tokens(a) => Some(a.prefix.clone()),
        IngestPlan::Raw(a) | IngestPlan::Jpeg(a) => a.prefix.clone(),
        IngestPlan::Weights(_) => None,
    };
    if let Some(p) = prefix {
        if p.is_empty() || p.ends_with('/') {
            return Err(Error::Usage(format!("--prefix '{p}': give a key prefix such as tokens/train (not empty, not ending in '/')")));
        }
        store::check_key(&shards::shard_key(&p, 0, "index.json")).map_err(|e| Error::Usage(format!("--prefix '{p}': {e}")))?;
    }
    match kind {
        IngestPlan::Tokens(a) => tokens(a).await,
        IngestPlan::Raw(a) => images(a, false).await,
        IngestPlan::Jpeg(a) => images(a, true).await,
        IngestPlan::Weights(a) => weights::run(a).await,
    }
}

fn pool(threads: Option<u32>) -> Result<rayon::ThreadPool> {
    let mut b = rayon::ThreadPoolBuilder::new();
    if let Some(n) = threads {
        b = b.num_threads(n as usize);
    }
    b.build().map_err(|e| Error::Runtime(format!("cannot start worker threads: {e}")))
}

fn bar(len: u64, what: String) -> ProgressBar {
    let pb = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    pb.set_style(ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} {per_sec} eta {eta}").expect("static template").progress_chars("=> "));
    pb.set_message(what);
    pb
}

/// A shard is built in memory twice over (the pieces and the packed object).
fn check_shard_memory(what: &str, bytes: u64, fix: &str) -> Result<()> {
    crate::bench::check_host_memory(&format!("{what} (built in memory twice over)"), bytes.saturating_mul(2), fix)
}

// ---------------------------------------------------------------- tokens

/// Every regular file under `inputs` (directories recursively), sorted per directory.
pub fn collect_files(inputs: &[PathBuf]) -> Result<Vec<PathBuf>> {
    fn walk(p: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        let md = std::fs::metadata(p).map_err(|e| Error::Usage(format!("--input {}: {e}: pass existing text files or directories", p.display())))?;
        if md.is_dir() {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| Error::Usage(format!("--input {}: cannot list: {e}", p.display())))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .collect();
            entries.sort();
            for e in entries {
                walk(&e, out)?;
            }
        } else if md.is_file() {
            out.push(p.to_path_buf());
        }
        Ok(())
    }
    let mut out = Vec::new();
    for p in inputs {
        walk(p, &mut out)?;
    }
    if out.is_empty() {
        return Err(Error::Usage("--input names no files: pass text files or directories holding them".into()));
    }
    Ok(out)
}

/// The token appended after each document: the first of the usual
/// end-of-document tokens the tokenizer knows.
fn separator(tk: &tokenizers::Tokenizer) -> Option<(String, u32)> {
    ["<|end_of_text|>", "<|endoftext|>", "</s>", "[SEP]", "<eos>"].iter().find_map(|t| tk.token_to_id(t).map(|id| (t.to_string(), id)))
}

/// Packs ids into sequences and sequences into shards; writes each full shard.
struct Packer<'a> {
    store: &'a dyn ObjectStore,
    prefix: String,
    seq_len: u64,
    seqs_per_shard: u64,
    proto: TokenShard,
    pending: Vec<i32>,
    shards: usize,
    sequences: u64,
    bytes: u64,
}

impl Packer<'_> {
    async fn push(&mut self, ids: impl IntoIterator<Item = i32>) -> Result<()> {
        self.pending.extend(ids);
        let per = (self.seq_len * self.seqs_per_shard) as usize;
        while self.pending.len() >= per {
            let rest = self.pending.split_off(per);
            let full = std::mem::replace(&mut self.pending, rest);
            self.write(full).await?;
        }
        Ok(())
    }

    async fn write(&mut self, ids: Vec<i32>) -> Result<()> {
        let sequences = ids.len() as u64 / self.seq_len;
        let mut data = Vec::with_capacity(ids.len() * 4);
        for id in ids {
            data.extend_from_slice(&id.to_le_bytes());
        }
        let meta = TokenShard { sequences, ..self.proto.clone() };
        let side = serde_json::to_vec_pretty(&meta).expect("sidecar encodes");
        self.bytes += data.len() as u64;
        commit::put_shard(self.store, &shards::shard_key(&self.prefix, self.shards, "bin"), data, &shards::shard_key(&self.prefix, self.shards, "json"), side)
            .await?;
        self.shards += 1;
        self.sequences += sequences;
        Ok(())
    }

    /// Write the last whole sequences; returns the tokens dropped (less than one sequence).
    async fn finish(mut self) -> Result<(usize, u64, u64, usize)> {
        let whole = (self.pending.len() as u64 / self.seq_len * self.seq_len) as usize;
        let dropped = self.pending.len() - whole;
        if whole > 0 {
            let mut ids = std::mem::take(&mut self.pending);
            ids.truncate(whole);
            self.write(ids).await?;
        }
        Ok((self.shards, self.sequences, self.bytes, dropped))
    }
}

async fn tokens(a: TokensIngest) -> Result<()> {
    let seq_bytes = a.seq_len as u64 * 4;
    let seqs_per_shard = a.shard_bytes / seq_bytes;
    if seqs_per_shard == 0 {
        return Err(Error::Usage(format!(
            "--shard-bytes {} holds no whole sequence of {} tokens ({seq_bytes} bytes): raise --shard-bytes or lower --seq-len",
            a.shard_bytes, a.seq_len
        )));
    }
    check_shard_memory("a token shard", seqs_per_shard * seq_bytes, "lower --shard-bytes")?;
    // Checked before begin_ingest marks the prefix and removes the set already there.
    if a.synthetic && a.total_bytes.unwrap_or(0) / seq_bytes == 0 {
        return Err(Error::Usage(format!("--total-bytes {} holds no whole sequence of {seq_bytes} bytes: raise it", a.total_bytes.unwrap_or(0))));
    }
    let pool = pool(a.threads)?;
    let (tk, proto) = if a.synthetic {
        let proto = TokenShard {
            sequences: 0,
            seq_len: a.seq_len as u64,
            dtype: "int32".into(),
            bytes_per_token: 4,
            vocab_size: a.vocab as u64,
            tokenizer: "synthetic-uniform".into(),
            synthetic: true,
            separator: None,
        };
        (None, proto)
    } else {
        let path = a.tokenizer.clone().expect("the flags require --tokenizer without --synthetic");
        let mut tk = tokenizers::Tokenizer::from_file(&path)
            .map_err(|e| Error::Usage(format!("--tokenizer {}: cannot load a Hugging Face tokenizer.json ({e})", path.display())))?;
        // Whole documents: the file's own truncation/padding (e.g. 128 for a sentence model) must not apply.
        tk.with_truncation(None).map_err(|e| Error::Runtime(format!("tokenizer: {e}")))?;
        tk.with_padding(None);
        // Document text is text: a document that spells a special token
        // (e.g. "<|endoftext|>") must not become that token, or it makes a
        // false document boundary (tests/fixtures/tokens-literal-separator).
        // Boundaries come from the ingest alone: one separator per input file.
        tk.set_encode_special_tokens(true);
        let sep = separator(&tk);
        let proto = TokenShard {
            sequences: 0,
            seq_len: a.seq_len as u64,
            dtype: "int32".into(),
            bytes_per_token: 4,
            vocab_size: tk.get_vocab_size(true) as u64,
            tokenizer: path.display().to_string(),
            synthetic: false,
            separator: sep.as_ref().map(|s| s.0.clone()),
        };
        (Some((tk, sep)), proto)
    };
    // The input files are found before the set under the prefix is touched:
    // a mistyped --input leaves it whole.
    let files = if a.synthetic { Vec::new() } else { collect_files(&a.input)? };
    let store = store::open(&a.store)?;
    store.ensure_bucket(true).await?;
    let ingesting = commit::begin_ingest(store.as_ref(), &a.prefix, "tokens").await?;
    let t0 = Instant::now();
    let mut packer = Packer {
        store: store.as_ref(),
        prefix: a.prefix.clone(),
        seq_len: a.seq_len as u64,
        seqs_per_shard,
        proto,
        pending: Vec::new(),
        shards: 0,
        sequences: 0,
        bytes: 0,
    };
    let mut documents = 0usize;
    let (mut spelled, mut spelled_ids) = (0u64, 0u64);
    let mut tokens_total = 0u64;
    match tk {
        None => {
            let total_seqs = a.total_bytes.expect("the flags require --total-bytes with --synthetic") / seq_bytes;
            if total_seqs == 0 {
                return Err(Error::Usage(format!("--total-bytes {} holds no whole sequence of {seq_bytes} bytes: raise it", a.total_bytes.unwrap_or(0))));
            }
            let shard_count = total_seqs.div_ceil(seqs_per_shard);
            let pb = bar(shard_count, format!("tokens -> {}", store.location()));
            for n in 0..shard_count {
                let seqs = seqs_per_shard.min(total_seqs - n * seqs_per_shard);
                let len = (seqs * a.seq_len as u64) as usize;
                let mut ids = vec![0i32; len];
                let (seed, vocab) = (a.seed, a.vocab);
                // 1 Mi-token blocks, each its own seeded generator: same ids for any thread count.
                pool.install(|| {
                    ids.par_chunks_mut(1 << 20).enumerate().for_each(|(b, chunk)| {
                        let mut rng = SmallRng::seed_from_u64(seed ^ (n << 32) ^ b as u64);
                        for x in chunk {
                            *x = rng.random_range(0..vocab) as i32;
                        }
                    })
                });
                tokens_total += len as u64;
                packer.push(ids).await?;
                pb.inc(1);
            }
            pb.finish_and_clear();
        }
        Some((tk, sep)) => {
            // The special tokens' text, to count documents that spell one (encoded as text).
            let specials: Vec<(u32, String)> =
                tk.get_added_tokens_decoder().into_iter().filter(|(_, t)| t.special && !t.content.is_empty()).map(|(id, t)| (id, t.content)).collect();
            let pb = bar(files.len() as u64, format!("tokenize {} file(s)", files.len()));
            // Batches of files tokenized in parallel, appended in input order.
            for batch in files.chunks(64) {
                // Per file: its ids, and (spells a special token, got its id from the text).
                type Encoded = Result<(Vec<u32>, (bool, bool))>;
                let encoded: Vec<Encoded> = pool.install(|| {
                    batch
                        .par_iter()
                        .map(|f| {
                            let text = std::fs::read(f).map_err(|e| Error::Usage(format!("--input {}: {e}", f.display())))?;
                            let text = String::from_utf8(text)
                                .map_err(|_| Error::Usage(format!("--input {} is not UTF-8 text: pass text files only", f.display())))?;
                            let enc = tk.encode(text.as_str(), false).map_err(|e| Error::Runtime(format!("tokenizing {}: {e}", f.display())))?;
                            let ids = enc.get_ids().to_vec();
                            let spells = specials.iter().any(|(_, s)| text.contains(s.as_str()));
                            let holds = spells && ids.iter().any(|i| specials.iter().any(|(id, _)| id == i));
                            Ok((ids, (spells, holds)))
                        })
                        .collect()
                });
                for enc in encoded {
                    let (ids, (spells, holds)) = enc?;
                    documents += 1;
                    spelled += spells as u64;
                    spelled_ids += holds as u64;
                    tokens_total += ids.len() as u64 + sep.is_some() as u64;
                    packer.push(ids.into_iter().map(|i| i as i32).chain(sep.as_ref().map(|s| s.1 as i32))).await?;
                    pb.inc(1);
                }
            }
            pb.finish_and_clear();
        }
    }
    let (shard_count, sequences, bytes, dropped) = packer.finish().await?;
    if shard_count == 0 {
        return Err(Error::Usage(format!("the input holds {tokens_total} tokens, less than one sequence of {}: lower --seq-len or add text", a.seq_len)));
    }
    commit::commit_ingest(store.as_ref(), ingesting, &DatasetManifest::complete("tokens", shard_count, sequences, bytes)).await?;
    let s = t0.elapsed().as_secs_f64();
    println!(
        "wrote {shard_count} token shard(s) under '{}' at {}: {sequences} sequences x {} tokens = {bytes} bytes ({} tokens{}; {dropped} trailing tokens dropped) in {s:.2} s",
        a.prefix,
        store.location(),
        a.seq_len,
        tokens_total,
        if a.synthetic { String::new() } else { format!(" from {documents} document(s)") }
    );
    // Boundaries s3rdma wrote: one separator per input file. Say where the text itself spelled a special token.
    if spelled > spelled_ids {
        println!("note: {} document(s) spell a special token in their text; it was encoded as text, not as the token", spelled - spelled_ids);
    }
    if spelled_ids > 0 {
        println!(
            "warning: {spelled_ids} document(s) spell a special token that the tokenizer's own vocabulary maps to its id even as text: a reader that splits on that id sees extra document boundaries there (s3rdma wrote one per input file)"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use image::RgbImage;

    #[test]
    fn input_files_are_walked_recursively_in_sorted_order() {
        let d = tempfile::tempdir().unwrap();
        for f in ["b.txt", "a/z.txt", "a/c/y.txt", "c.txt"] {
            let p = d.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, "x").unwrap();
        }
        let got: Vec<String> = collect_files(&[d.path().to_path_buf(), d.path().join("b.txt")])
            .unwrap()
            .iter()
            .map(|p| p.strip_prefix(d.path()).unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(got, ["a/c/y.txt", "a/z.txt", "b.txt", "c.txt", "b.txt"]);
        assert!(collect_files(&[d.path().join("missing")]).unwrap_err().to_string().contains("missing"));
    }

    #[test]
    fn tar_offsets_point_at_payloads() {
        let samples = vec![("a/x".to_string(), vec![0xFF, 0xD8, 0xFF, 1, 2, 3], 7), ("b/y".to_string(), vec![9u8; 1000], 12)];
        let (tar, spans) = build_tar(&samples).unwrap();
        for ((_, body, _), (off, len)) in samples.iter().zip(&spans) {
            assert_eq!(&tar[*off as usize..(*off + *len) as usize], body.as_slice());
        }
        // Header + 512-padded payload + header + padded "7" label, then the second sample.
        assert_eq!(spans[0].0, 512);
        assert_eq!(spans[1].0, 512 + 512 + 512 + 512 + 512);
    }

    #[test]
    fn overlong_key_is_refused() {
        let key = "k".repeat(300);
        let err = build_tar(&[(key, vec![1], 0)]).unwrap_err().to_string();
        assert!(err.contains("does not fit a ustar header"), "{err}");
    }

    #[test]
    fn resize_keeps_aspect_then_crops() {
        let img = RgbImage::from_fn(400, 200, |x, _| image::Rgb([(x / 2) as u8, 0, 0]));
        let out = resize_center_crop(&img, 100);
        assert_eq!(out.dimensions(), (100, 100));
        // 400x200 -> 200x100, crop x 50..150: the centre column maps back to source x ~200.
        let mid = out.get_pixel(50, 50)[0] as i32;
        assert!((mid - 100).abs() <= 2, "{mid}");
    }

    #[test]
    fn synthetic_images_depend_on_label_and_seed() {
        let a = synth_image(1, 0, 0, 32, 32);
        assert_eq!(a, synth_image(1, 0, 0, 32, 32));
        assert_ne!(a, synth_image(2, 0, 0, 32, 32));
        assert_ne!(a, synth_image(1, 0, 1, 32, 32));
    }
}
