//! `s3rdma ingest`: build the datasets `tokens` and `train` read, through the
//! [`ObjectStore`] trait (so `--backend local|http|rdma` all work), in the
//! layouts of [`crate::format::shards`].
//!
//! Each shard is built in host memory, then written as its data object and,
//! last, its sidecar (the commit: readers list sidecars). A failed or killed
//! ingest leaves at most one data object without a sidecar, which readers
//! ignore and the next ingest of the same prefix overwrites.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::time::Instant;

use image::{ImageEncoder, RgbImage, imageops::FilterType};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rand::{Rng, SeedableRng, rngs::SmallRng};
use rayon::prelude::*;

use crate::cli::{IngestImagesArgs, IngestKind, IngestTokensArgs};
use crate::error::{Error, Result};
use crate::format::shards::{self, DatasetManifest, JpegIndex, JpegSample, RawShard, TokenShard};
use crate::store::{self, ObjectStore};

/// Run `s3rdma ingest <kind>`.
pub async fn run(kind: IngestKind) -> Result<()> {
    let prefix = match &kind {
        IngestKind::Tokens(a) => Some(a.prefix.clone()),
        IngestKind::Raw(a) | IngestKind::Jpeg(a) => a.prefix.clone(),
    };
    if let Some(p) = prefix {
        if p.is_empty() || p.ends_with('/') {
            return Err(Error::Usage(format!("--prefix '{p}': give a key prefix such as tokens/train (not empty, not ending in '/')")));
        }
        store::check_key(&shards::shard_key(&p, 0, "index.json")).map_err(|e| Error::Usage(format!("--prefix '{p}': {e}")))?;
    }
    match kind {
        IngestKind::Tokens(a) => tokens(a).await,
        IngestKind::Raw(a) => images(a, false).await,
        IngestKind::Jpeg(a) => images(a, true).await,
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

/// Write one shard: data object, then the sidecar (the commit).
async fn commit(store: &dyn ObjectStore, data_key: &str, data: Vec<u8>, sidecar_key: &str, sidecar: Vec<u8>) -> Result<()> {
    store::put_bytes(store, data_key, data).await?;
    store::put_bytes(store, sidecar_key, sidecar).await?;
    Ok(())
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
        commit(self.store, &shards::shard_key(&self.prefix, self.shards, "bin"), data, &shards::shard_key(&self.prefix, self.shards, "json"), side).await?;
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

async fn tokens(a: IngestTokensArgs) -> Result<()> {
    let seq_bytes = a.seq_len as u64 * 4;
    let seqs_per_shard = a.shard_bytes / seq_bytes;
    if seqs_per_shard == 0 {
        return Err(Error::Usage(format!(
            "--shard-bytes {} holds no whole sequence of {} tokens ({seq_bytes} bytes): raise --shard-bytes or lower --seq-len",
            a.shard_bytes, a.seq_len
        )));
    }
    check_shard_memory("a token shard", seqs_per_shard * seq_bytes, "lower --shard-bytes")?;
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
        let path = a.tokenizer.clone().expect("clap: required without --synthetic");
        let mut tk = tokenizers::Tokenizer::from_file(&path)
            .map_err(|e| Error::Usage(format!("--tokenizer {}: cannot load a Hugging Face tokenizer.json ({e})", path.display())))?;
        // Whole documents: the file's own truncation/padding (e.g. 128 for a sentence model) must not apply.
        tk.with_truncation(None).map_err(|e| Error::Runtime(format!("tokenizer: {e}")))?;
        tk.with_padding(None);
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
    let store = store::open(&a.store.config())?;
    store.ensure_bucket(true).await?;
    shards::begin_ingest(store.as_ref(), &a.prefix).await?;
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
    let mut tokens_total = 0u64;
    match tk {
        None => {
            let total_seqs = a.total_bytes.expect("clap: --synthetic requires --total-bytes") / seq_bytes;
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
            let files = collect_files(&a.input)?;
            let pb = bar(files.len() as u64, format!("tokenize {} file(s)", files.len()));
            // Batches of files tokenized in parallel, appended in input order.
            for batch in files.chunks(64) {
                let encoded: Vec<Result<Vec<u32>>> = pool.install(|| {
                    batch
                        .par_iter()
                        .map(|f| {
                            let text = std::fs::read(f).map_err(|e| Error::Usage(format!("--input {}: {e}", f.display())))?;
                            let text = String::from_utf8(text)
                                .map_err(|_| Error::Usage(format!("--input {} is not UTF-8 text: pass text files only", f.display())))?;
                            let enc = tk.encode(text.as_str(), false).map_err(|e| Error::Runtime(format!("tokenizing {}: {e}", f.display())))?;
                            Ok(enc.get_ids().to_vec())
                        })
                        .collect()
                });
                for ids in encoded {
                    let ids = ids?;
                    documents += 1;
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
    shards::commit_ingest(
        store.as_ref(),
        &a.prefix,
        &DatasetManifest { kind: "tokens".into(), shards: shard_count, items: sequences, bytes, tool_version: env!("CARGO_PKG_VERSION").into() },
    )
    .await?;
    let s = t0.elapsed().as_secs_f64();
    println!(
        "wrote {shard_count} token shard(s) under '{}' at {}: {sequences} sequences x {} tokens = {bytes} bytes ({} tokens{}; {dropped} trailing tokens dropped) in {s:.2} s",
        a.prefix,
        store.location(),
        a.seq_len,
        tokens_total,
        if a.synthetic { String::new() } else { format!(" from {documents} document(s)") }
    );
    Ok(())
}

// ---------------------------------------------------------------- images

/// One source image of an ImageFolder.
#[derive(Debug, Clone)]
pub struct Source {
    /// The image file.
    pub path: PathBuf,
    /// Class label (index of its class directory, sorted).
    pub label: u32,
    /// `<class>/<file stem>` with dots replaced by `_` (WebDataset keys end at the first dot).
    pub key: String,
}

fn is_image(p: &Path) -> bool {
    p.extension().and_then(|e| e.to_str()).is_some_and(|e| matches!(e.to_ascii_lowercase().as_str(), "jpg" | "jpeg" | "png"))
}

/// Scan an ImageFolder: class = subdirectory (sorted by name, label = index),
/// images = its .jpg/.jpeg/.png files (sorted). Returns (classes, sources).
pub fn scan_image_folder(root: &Path) -> Result<(Vec<String>, Vec<Source>)> {
    let fix = "pass an ImageFolder directory: one subdirectory per class holding .jpg/.jpeg/.png files";
    let rd = std::fs::read_dir(root).map_err(|e| Error::Usage(format!("--src {}: {e}: {fix}", root.display())))?;
    let mut classes: Vec<String> = rd.filter_map(|e| e.ok()).filter(|e| e.path().is_dir()).filter_map(|e| e.file_name().to_str().map(String::from)).collect();
    classes.sort();
    let mut out = Vec::new();
    for (label, class) in classes.iter().enumerate() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(root.join(class))
            .map_err(|e| Error::Usage(format!("--src {}/{class}: {e}", root.display())))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file() && is_image(p))
            .collect();
        files.sort();
        for path in files {
            let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("image").replace('.', "_");
            out.push(Source { key: format!("{class}/{stem}"), path, label: label as u32 });
        }
    }
    if out.is_empty() {
        return Err(Error::Usage(format!("--src {}: no images found ({} class directories): {fix}", root.display(), classes.len())));
    }
    let mut seen: std::collections::HashMap<&str, &Path> = std::collections::HashMap::new();
    for s in &out {
        if let Some(other) = seen.insert(&s.key, &s.path) {
            return Err(Error::Usage(format!(
                "{} and {} both become sample key '{}' (keys are <class>/<stem> with dots replaced, and must be unique in a WebDataset shard): rename one",
                other.display(),
                s.path.display(),
                s.key
            )));
        }
    }
    Ok((classes, out))
}

/// Resize the shorter side to `size` (triangle filter), then centre-crop to
/// `size` x `size`: the standard ImageNet evaluation transform, applied once at
/// ingest so training reads fixed-size samples (the original suite's raw layout).
pub fn resize_center_crop(img: &RgbImage, size: u32) -> RgbImage {
    let (w, h) = img.dimensions();
    let (nw, nh) = if w <= h {
        (size, ((h as u64 * size as u64 + w as u64 / 2) / w as u64).max(size as u64) as u32)
    } else {
        (((w as u64 * size as u64 + h as u64 / 2) / h as u64).max(size as u64) as u32, size)
    };
    let resized = image::imageops::resize(img, nw, nh, FilterType::Triangle);
    image::imageops::crop_imm(&resized, (nw - size) / 2, (nh - size) / 2, size, size).to_image()
}

/// A synthetic, learnable image: a colour gradient whose base colour and
/// direction depend on `label`, plus per-pixel noise seeded by `seed` and `index`.
pub fn synth_image(label: u32, index: u64, seed: u64, w: u32, h: u32) -> RgbImage {
    let mut cls = SmallRng::seed_from_u64(0x5eed_c1a5 ^ label as u64);
    let base: [f32; 3] = [cls.random_range(30.0..225.0), cls.random_range(30.0..225.0), cls.random_range(30.0..225.0)];
    let (dx, dy): (f32, f32) = (cls.random_range(-60.0..60.0), cls.random_range(-60.0..60.0));
    let mut rng = SmallRng::seed_from_u64(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ index);
    let shift: f32 = rng.random_range(-20.0..20.0);
    RgbImage::from_fn(w, h, |x, y| {
        let g = dx * (x as f32 / w as f32 - 0.5) + dy * (y as f32 / h as f32 - 0.5) + shift;
        let n: f32 = rng.random_range(-12.0..12.0);
        image::Rgb(base.map(|b| (b + g + n).clamp(0.0, 255.0) as u8))
    })
}

fn decode(path: &Path) -> Result<(Vec<u8>, RgbImage)> {
    let bytes = std::fs::read(path).map_err(|e| Error::Usage(format!("--src: cannot read {}: {e}", path.display())))?;
    if is_jpeg(&bytes) && !bytes[bytes.len().saturating_sub(64)..].windows(2).any(|w| w == [0xFF, 0xD9]) {
        // The decoder fills a cut-off JPEG with grey and says nothing: require the end-of-image marker.
        return Err(Error::Usage(format!("--src: {} is a truncated JPEG (no end-of-image marker): remove or replace it", path.display())));
    }
    let img = image::load_from_memory(&bytes).map_err(|e| {
        Error::Usage(format!("--src: {} is not a decodable JPEG/PNG ({}): remove or replace it", path.display(), e.to_string().replace('\n', " ")))
    })?;
    Ok((bytes, img.to_rgb8()))
}

fn encode_jpeg(img: &RgbImage, quality: u8) -> Vec<u8> {
    let mut out = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, quality)
        .write_image(img.as_raw(), img.width(), img.height(), image::ExtendedColorType::Rgb8)
        .expect("encoding RGB8 into memory cannot fail");
    out
}

fn is_jpeg(bytes: &[u8]) -> bool {
    bytes.starts_with(&[0xFF, 0xD8, 0xFF])
}

/// A built tar shard: its bytes, and each sample's JPEG payload (offset, length) in it.
pub type TarShard = (Vec<u8>, Vec<(u64, u64)>);

/// Build one ustar tar of (key, jpeg, label) samples; returns the tar and each
/// JPEG payload's (offset, length). Only plain ustar headers are written (no PAX
/// or GNU long-name records), so a payload sits exactly 512 bytes after its
/// header; the tar is then re-read and every offset checked against the tar
/// crate's own view.
pub fn build_tar(samples: &[(String, Vec<u8>, u32)]) -> Result<TarShard> {
    let mut b = tar::Builder::new(Vec::new());
    let mut spans = Vec::with_capacity(samples.len());
    for (key, jpeg, label) in samples {
        for (ext, body) in [("jpg", jpeg.as_slice()), ("cls", label.to_string().as_bytes())] {
            let mut h = tar::Header::new_ustar();
            h.set_path(format!("{key}.{ext}"))
                .map_err(|e| Error::Usage(format!("sample key '{key}' does not fit a ustar header ({e}): shorten the class or file names")))?;
            h.set_size(body.len() as u64);
            h.set_mode(0o644);
            h.set_mtime(0);
            h.set_entry_type(tar::EntryType::Regular);
            h.set_cksum();
            let at = b.get_ref().len() as u64;
            if ext == "jpg" {
                spans.push((at + 512, body.len() as u64));
            }
            b.append(&h, body).map_err(|e| Error::Runtime(format!("tar: {e}")))?;
        }
    }
    let tar = b.into_inner().map_err(|e| Error::Runtime(format!("tar: {e}")))?;
    // The offsets must hold: compare with where the tar crate finds each payload.
    let mut ar = tar::Archive::new(Cursor::new(&tar));
    let mut i = 0;
    for e in ar.entries().map_err(|e| Error::Runtime(format!("tar re-read: {e}")))? {
        let e = e.map_err(|e| Error::Runtime(format!("tar re-read: {e}")))?;
        let ty = e.header().entry_type();
        if ty.is_pax_global_extensions() || ty.is_pax_local_extensions() || ty.is_gnu_longname() {
            return Err(Error::Runtime("tar shard holds an extension header: payload offsets would not hold".into()));
        }
        let path = e.path().map_err(|e| Error::Runtime(format!("tar re-read: {e}")))?.to_string_lossy().into_owned();
        if path.ends_with(".jpg") {
            if spans.get(i).map(|s| s.0) != Some(e.raw_file_position()) {
                return Err(Error::Runtime(format!("tar offset of '{path}' is {} in the archive, {:?} in the index", e.raw_file_position(), spans.get(i))));
            }
            i += 1;
        }
    }
    Ok((tar, spans))
}

/// One prepared sample: raw pixels (raw layout) or JPEG bytes (jpeg layout).
enum Prepared {
    Pixels(RgbImage),
    Jpeg(Vec<u8>),
}

async fn images(a: IngestImagesArgs, jpeg: bool) -> Result<()> {
    let prefix = a.prefix.clone().unwrap_or_else(|| if jpeg { "jpeg/train".into() } else { "raw/train".into() });
    let per_shard = a.samples_per_shard.unwrap_or(if jpeg { 8192 } else { 4096 }) as usize;
    let (classes, sources): (Vec<String>, Vec<Source>) = match (&a.src, a.synthetic) {
        (Some(src), _) => scan_image_folder(src)?,
        (None, Some(n)) => {
            let classes: Vec<String> = (0..a.classes).map(|c| format!("class{c:05}")).collect();
            let sources =
                (0..n as u64).map(|i| Source { path: PathBuf::new(), label: (i % a.classes as u64) as u32, key: format!("synthetic/{i:09}") }).collect();
            (classes, sources)
        }
        (None, None) => return Err(Error::Usage("pass --src <ImageFolder dir> or --synthetic <N>".into())),
    };
    if !jpeg {
        let per = per_shard.min(sources.len()) as u64;
        check_shard_memory("a raw shard", per * (a.size as u64).pow(2) * 3, "lower --size or --samples-per-shard")?;
    }
    let pool = pool(a.decode_threads)?;
    let store = store::open(&a.store.config())?;
    store.ensure_bucket(true).await?;
    shards::begin_ingest(store.as_ref(), &prefix).await?;
    let t0 = Instant::now();
    let (size, quality, seed, synth) = (a.size, a.quality, a.seed, a.synthetic.is_some());
    let (sw, sh) = a.synthetic_size;
    let mut total_bytes = 0u64;
    let mut transcoded = 0usize;
    let shard_count = sources.len().div_ceil(per_shard);
    for (n, chunk) in sources.chunks(per_shard).enumerate() {
        let pb = bar(chunk.len() as u64, format!("{} shard {}/{shard_count}", if jpeg { "jpeg" } else { "raw" }, n + 1));
        let base = (n * per_shard) as u64;
        let prepared: Vec<Result<(Prepared, bool)>> = pool.install(|| {
            chunk
                .par_iter()
                .enumerate()
                .map(|(i, s)| {
                    let r = match (synth, jpeg) {
                        (true, false) => (Prepared::Pixels(synth_image(s.label, base + i as u64, seed, size, size)), false),
                        (true, true) => (Prepared::Jpeg(encode_jpeg(&synth_image(s.label, base + i as u64, seed, sw, sh), quality)), false),
                        (false, false) => (Prepared::Pixels(resize_center_crop(&decode(&s.path)?.1, size)), false),
                        (false, true) => {
                            let (bytes, img) = decode(&s.path)?;
                            // JPEG sources are stored as they are; PNG sources are transcoded.
                            if is_jpeg(&bytes) { (Prepared::Jpeg(bytes), false) } else { (Prepared::Jpeg(encode_jpeg(&img, quality)), true) }
                        }
                    };
                    pb.inc(1);
                    Ok(r)
                })
                .collect()
        });
        pb.finish_and_clear();
        let mut prepared_ok = Vec::with_capacity(prepared.len());
        for p in prepared {
            let (p, t) = p?;
            transcoded += t as usize;
            prepared_ok.push(p);
        }
        if jpeg {
            let samples: Vec<(String, Vec<u8>, u32)> = chunk
                .iter()
                .zip(prepared_ok)
                .map(|(s, p)| match p {
                    Prepared::Jpeg(b) => (s.key.clone(), b, s.label),
                    Prepared::Pixels(_) => unreachable!("jpeg layout prepares JPEG bytes"),
                })
                .collect();
            let (tar, spans) = build_tar(&samples)?;
            let data_key = shards::shard_key(&prefix, n, "tar");
            let index = JpegIndex {
                shard: data_key.clone(),
                size: tar.len() as u64,
                samples: samples
                    .iter()
                    .zip(&spans)
                    .map(|((key, _, label), &(offset, length))| JpegSample { key: key.clone(), offset, length, label: *label })
                    .collect(),
            };
            total_bytes += tar.len() as u64;
            commit(store.as_ref(), &data_key, tar, &shards::shard_key(&prefix, n, "index.json"), serde_json::to_vec(&index).expect("index encodes")).await?;
        } else {
            let sample = (size * size * 3) as usize;
            let mut data = Vec::with_capacity(sample * chunk.len());
            for p in &prepared_ok {
                match p {
                    Prepared::Pixels(img) => data.extend_from_slice(img.as_raw()),
                    Prepared::Jpeg(_) => unreachable!("raw layout prepares pixels"),
                }
            }
            let meta = RawShard {
                samples: chunk.len() as u64,
                height: size as u64,
                width: size as u64,
                channels: 3,
                labels: chunk.iter().map(|s| s.label).collect(),
                keys: chunk.iter().map(|s| s.key.clone()).collect(),
                classes: classes.clone(),
            };
            total_bytes += data.len() as u64;
            commit(
                store.as_ref(),
                &shards::shard_key(&prefix, n, "raw"),
                data,
                &shards::shard_key(&prefix, n, "json"),
                serde_json::to_vec(&meta).expect("sidecar encodes"),
            )
            .await?;
        }
    }
    let kind = if jpeg { "jpeg" } else { "raw" };
    shards::commit_ingest(
        store.as_ref(),
        &prefix,
        &DatasetManifest {
            kind: kind.into(),
            shards: shard_count,
            items: sources.len() as u64,
            bytes: total_bytes,
            tool_version: env!("CARGO_PKG_VERSION").into(),
        },
    )
    .await?;
    println!(
        "wrote {shard_count} {} shard(s) under '{prefix}' at {}: {} images, {} classes, {total_bytes} bytes{} in {:.2} s",
        if jpeg { "jpeg" } else { "raw" },
        store.location(),
        sources.len(),
        classes.len(),
        if transcoded > 0 { format!(" ({transcoded} PNG source(s) transcoded to JPEG q{quality})") } else { String::new() },
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
