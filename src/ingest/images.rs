//! `ingest raw` and `ingest jpeg`: ImageFolder discovery, decode, resize and center-crop, synthetic images, and WebDataset tar shards with their byte-offset index.

use super::plan::ImagesIngest;
use super::{bar, check_shard_memory, commit, pool};
use crate::error::{Error, Result};
use crate::flag::{SAMPLES_PER_SHARD, SIZE, SRC, SYNTHETIC};
use crate::format::shards::{self, DatasetManifest, JpegIndex, JpegSample, RawShard};
use crate::store;
use image::{ImageEncoder, RgbImage, imageops::FilterType};
use rand::{Rng, SeedableRng, rngs::SmallRng};
use rayon::prelude::*;
use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::time::Instant;

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

pub(crate) fn is_image(p: &Path) -> bool {
    p.extension().and_then(|e| e.to_str()).is_some_and(|e| matches!(e.to_ascii_lowercase().as_str(), "jpg" | "jpeg" | "png"))
}

/// torchvision's `IMG_EXTENSIONS` (torchvision/datasets/folder.py): what
/// `ImageFolder` takes as an image, matched on the lower-cased file name.
const TORCHVISION_IMAGE_EXTENSIONS: &[&str] = &[".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"];

/// Whether torchvision's `ImageFolder` takes `p` as an image (its name ends
/// in one of [`TORCHVISION_IMAGE_EXTENSIONS`], case-insensitively).
fn torchvision_image(p: &Path) -> bool {
    let name = p.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default();
    TORCHVISION_IMAGE_EXTENSIONS.iter().any(|x| name.ends_with(x))
}

/// Deepest directory nesting followed below a class directory (a guard
/// against symlink loops, which `os.walk(followlinks=True)` would not stop).
const MAX_DEPTH: usize = 64;

/// Every file below `dir` (symlinks followed), in the order torchvision's
/// `make_dataset` visits them: `sorted(os.walk(dir, followlinks=True))`
/// (directories by path string), then each directory's files by name.
fn walk_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut dirs: Vec<(PathBuf, Vec<PathBuf>)> = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), 0usize)];
    while let Some((d, depth)) = stack.pop() {
        if depth > MAX_DEPTH {
            return Err(Error::Usage(format!("{SRC}: {} is more than {MAX_DEPTH} directories deep (a symlink loop?)", d.display())));
        }
        let rd = std::fs::read_dir(&d).map_err(|e| Error::Usage(format!("{SRC} {}: {e}", d.display())))?;
        let mut files = Vec::new();
        for e in rd.filter_map(|e| e.ok()) {
            let p = e.path();
            // `metadata` follows symlinks, as os.walk(followlinks=True) and os.path.isfile do.
            match std::fs::metadata(&p) {
                Ok(m) if m.is_dir() => stack.push((p, depth + 1)),
                Ok(m) if m.is_file() => files.push(p),
                // An image name that does not open (a symlink to nothing):
                // torchvision lists it and fails when it loads; say it now.
                Err(e) if torchvision_image(&p) => {
                    return Err(Error::Usage(format!("{SRC}: {} does not open ({e}): restore its target or remove it", p.display())));
                }
                _ => {}
            }
        }
        files.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
        dirs.push((d, files));
    }
    dirs.sort_by(|a, b| a.0.as_os_str().cmp(b.0.as_os_str()));
    Ok(dirs.into_iter().flat_map(|(_, f)| f).collect())
}

/// Scan an ImageFolder with torchvision's rules (`ImageFolder` /
/// `DatasetFolder.find_classes` and `make_dataset`): classes are the
/// first-level directories (sorted by name, label = index); a class's
/// images are every file below its directory, however deep, whose name ends
/// in one of torchvision's image extensions, case-insensitively; files
/// directly under the root are not samples. Returns (classes, sources).
///
/// Errors: [`Error::Usage`] when `root` is unreadable or has no class
/// directory, when a class holds no image (torchvision refuses that too),
/// when an image is in a format torchvision reads but this build does not
/// decode (only JPEG and PNG), or when two files map to one sample key.
pub fn scan_image_folder(root: &Path) -> Result<(Vec<String>, Vec<Source>)> {
    let fix = "pass an ImageFolder directory: one subdirectory per class holding .jpg/.jpeg/.png files";
    let rd = std::fs::read_dir(root).map_err(|e| Error::Usage(format!("{SRC} {}: {e}: {fix}", root.display())))?;
    let mut classes: Vec<String> = rd
        .filter_map(|e| e.ok())
        .filter(|e| std::fs::metadata(e.path()).is_ok_and(|m| m.is_dir()))
        .filter_map(|e| e.file_name().to_str().map(String::from))
        .collect();
    classes.sort();
    if classes.is_empty() {
        return Err(Error::Usage(format!("{SRC} {}: no class directories: {fix}", root.display())));
    }
    let mut out = Vec::new();
    let mut empty = Vec::new();
    for (label, class) in classes.iter().enumerate() {
        let class_dir = root.join(class);
        let before = out.len();
        for path in walk_files(&class_dir)? {
            if !torchvision_image(&path) {
                continue;
            }
            if !is_image(&path) {
                return Err(Error::Usage(format!(
                    "{}: torchvision's ImageFolder takes it as an image, but s3rdma decodes only JPEG and PNG: convert it or move it out of {SRC}",
                    path.display()
                )));
            }
            // The path below the class directory, without its extension: unique where the stem alone is not.
            let rel = path.strip_prefix(&class_dir).unwrap_or(&path).with_extension("");
            let rel = rel.to_string_lossy().replace('.', "_");
            out.push(Source { key: format!("{class}/{rel}"), path, label: label as u32 });
        }
        if out.len() == before {
            empty.push(class.as_str());
        }
    }
    if !empty.is_empty() {
        return Err(Error::Usage(format!(
            "{SRC} {}: no images in class directories {} (torchvision's ImageFolder refuses empty classes too): add images or remove them",
            root.display(),
            empty.join(", ")
        )));
    }
    let mut seen: std::collections::HashMap<&str, &Path> = std::collections::HashMap::new();
    for s in &out {
        if let Some(other) = seen.insert(&s.key, &s.path) {
            return Err(Error::Usage(format!(
                "{} and {} both become sample key '{}' (keys are <class>/<path> with dots replaced, and must be unique in a WebDataset shard): rename one",
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

pub(crate) fn decode(path: &Path) -> Result<(Vec<u8>, RgbImage)> {
    let bytes = std::fs::read(path).map_err(|e| cannot_read(path, e))?;
    if is_jpeg(&bytes) && !ends_an_image(&bytes[bytes.len().saturating_sub(64)..]) {
        return Err(truncated(path));
    }
    let img = image::load_from_memory(&bytes).map_err(|e| undecodable(path, e))?;
    Ok((bytes, img.to_rgb8()))
}

/// Check a source image without decoding its pixels: readable, a JPEG or PNG
/// header the decoder takes (format and dimensions), and a JPEG's
/// end-of-image marker in its last 64 bytes. Run on every source before an
/// ingest touches the set already under its prefix, so that a stray file
/// fails the ingest there; pixels that do not decode past a good header are
/// found only while the shards are built.
///
/// Errors: [`Error::Usage`] naming the file, as [`decode`]'s.
pub(crate) fn probe(path: &Path) -> Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path).map_err(|e| cannot_read(path, e))?;
    let len = f.metadata().map_err(|e| cannot_read(path, e))?.len();
    // As decode does: a JPEG (by its bytes) without its end is said as truncated.
    let (mut head, mut tail) = ([0u8; 3], Vec::with_capacity(64));
    if len >= 3 && f.read_exact(&mut head).is_ok() && is_jpeg(&head) {
        f.seek(SeekFrom::Start(len.saturating_sub(64))).and_then(|_| f.read_to_end(&mut tail)).map_err(|e| cannot_read(path, e))?;
        if !ends_an_image(&tail) {
            return Err(truncated(path));
        }
    }
    // The same open file, from its start, for the decoder's header read.
    f.seek(SeekFrom::Start(0)).map_err(|e| cannot_read(path, e))?;
    let reader = image::ImageReader::new(std::io::BufReader::new(f)).with_guessed_format().map_err(|e| cannot_read(path, e))?;
    reader.into_dimensions().map_err(|e| undecodable(path, e))?;
    Ok(())
}

/// Whether a JPEG's last bytes hold its end-of-image marker (the decoder
/// fills a cut-off JPEG with grey and says nothing).
fn ends_an_image(tail: &[u8]) -> bool {
    tail.windows(2).any(|w| w == [0xFF, 0xD9])
}

fn cannot_read(path: &Path, e: std::io::Error) -> Error {
    Error::Usage(format!("{SRC}: cannot read {}: {e}", path.display()))
}

fn truncated(path: &Path) -> Error {
    Error::Usage(format!("{SRC}: {} is a truncated JPEG (no end-of-image marker): remove or replace it", path.display()))
}

fn undecodable(path: &Path, e: image::ImageError) -> Error {
    Error::Usage(format!("{SRC}: {} is not a decodable JPEG/PNG ({}): remove or replace it", path.display(), e.to_string().replace('\n', " ")))
}

pub(crate) fn encode_jpeg(img: &RgbImage, quality: u8) -> Vec<u8> {
    let mut out = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, quality)
        .write_image(img.as_raw(), img.width(), img.height(), image::ExtendedColorType::Rgb8)
        .expect("encoding RGB8 into memory cannot fail");
    out
}

pub(crate) fn is_jpeg(bytes: &[u8]) -> bool {
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
pub(crate) enum Prepared {
    Pixels(RgbImage),
    Jpeg(Vec<u8>),
}

/// Write shard `n` of the jpeg layout: the samples' JPEG bytes in one tar,
/// and its index; the tar's size in bytes.
///
/// Errors: the tar's, the store's.
async fn put_jpeg_shard(store: &dyn store::ObjectStore, prefix: &str, n: usize, chunk: &[Source], prepared: Vec<Prepared>) -> Result<u64> {
    let samples: Vec<(String, Vec<u8>, u32)> = chunk
        .iter()
        .zip(prepared)
        .map(|(s, p)| match p {
            Prepared::Jpeg(b) => (s.key.clone(), b, s.label),
            Prepared::Pixels(_) => unreachable!("jpeg layout prepares JPEG bytes"),
        })
        .collect();
    let (tar, spans) = build_tar(&samples)?;
    let data_key = shards::shard_key(prefix, n, "tar");
    let index = JpegIndex {
        shard: data_key.clone(),
        size: tar.len() as u64,
        samples: samples
            .iter()
            .zip(&spans)
            .map(|((key, _, label), &(offset, length))| JpegSample { key: key.clone(), offset, length, label: *label })
            .collect(),
    };
    let bytes = tar.len() as u64;
    commit::put_shard(store, &data_key, tar, &shards::shard_key(prefix, n, "index.json"), serde_json::to_vec(&index).expect("index encodes")).await?;
    Ok(bytes)
}

/// Write shard `n` of the raw layout: the samples' pixels (`size` x `size`
/// x 3 each) back to back, and its sidecar; the data's size in bytes.
///
/// Errors: the store's.
async fn put_raw_shard(
    store: &dyn store::ObjectStore,
    prefix: &str,
    n: usize,
    chunk: &[Source],
    prepared: &[Prepared],
    size: u32,
    classes: &[String],
) -> Result<u64> {
    let sample = (size * size * 3) as usize;
    let mut data = Vec::with_capacity(sample * chunk.len());
    for p in prepared {
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
        classes: classes.to_vec(),
    };
    let bytes = data.len() as u64;
    commit::put_shard(
        store,
        &shards::shard_key(prefix, n, "raw"),
        data,
        &shards::shard_key(prefix, n, "json"),
        serde_json::to_vec(&meta).expect("sidecar encodes"),
    )
    .await?;
    Ok(bytes)
}

/// The classes and the sources of an images ingest: the ImageFolder given,
/// or N synthetic images spread over the classes asked for.
///
/// Errors: [`Error::Usage`] without either, and [`scan_image_folder`]'s.
fn sources(a: &ImagesIngest) -> Result<(Vec<String>, Vec<Source>)> {
    Ok(match (&a.src, a.synthetic) {
        (Some(src), _) => scan_image_folder(src)?,
        (None, Some(n)) => {
            let classes: Vec<String> = (0..a.classes).map(|c| format!("class{c:05}")).collect();
            let sources =
                (0..n as u64).map(|i| Source { path: PathBuf::new(), label: (i % a.classes as u64) as u32, key: format!("synthetic/{i:09}") }).collect();
            (classes, sources)
        }
        (None, None) => return Err(Error::Usage(format!("pass {SRC} <ImageFolder dir> or {SYNTHETIC} <N>"))),
    })
}

/// Run `ingest jpeg` (`jpeg`) or `ingest raw`: every source checked
/// ([`probe`]), then shards built and written, the manifest last (see the
/// module `crate::ingest`).
///
/// Errors: [`Error::Usage`] for a source that does not decode (naming it)
/// or shards that do not fit in memory; the store's.
pub(crate) async fn images(a: ImagesIngest, jpeg: bool) -> Result<()> {
    let prefix = a.prefix.clone().unwrap_or_else(|| if jpeg { "jpeg/train".into() } else { "raw/train".into() });
    let per_shard = a.samples_per_shard.unwrap_or(if jpeg { 8192 } else { 4096 }) as usize;
    let (classes, sources) = sources(&a)?;
    let synth = a.src.is_none();
    if !jpeg {
        let per = per_shard.min(sources.len()) as u64;
        check_shard_memory("a raw shard", per * (a.size as u64).pow(2) * 3, &format!("lower {SIZE} or {SAMPLES_PER_SHARD}"))?;
    }
    let pool = pool(a.decode_threads)?;
    if !synth {
        // Every source's header, before the set under the prefix is touched.
        pool.install(|| sources.par_iter().try_for_each(|s| probe(&s.path)))?;
    }
    let store = store::open(&a.store)?;
    store.ensure_bucket(true).await?;
    let kind = if jpeg { "jpeg" } else { "raw" };
    // Begun (the old set marked and removed) once the first shard is built.
    let mut ingesting = None;
    let t0 = Instant::now();
    let (size, quality, seed) = (a.size, a.quality, a.seed);
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
        if ingesting.is_none() {
            ingesting = Some(commit::begin_ingest(store.as_ref(), &prefix, kind).await?);
        }
        total_bytes += if jpeg {
            put_jpeg_shard(store.as_ref(), &prefix, n, chunk, prepared_ok).await?
        } else {
            put_raw_shard(store.as_ref(), &prefix, n, chunk, &prepared_ok, size, &classes).await?
        };
    }
    let ingesting = match ingesting {
        Some(i) => i,
        None => commit::begin_ingest(store.as_ref(), &prefix, kind).await?,
    };
    commit::commit_ingest(store.as_ref(), ingesting, &DatasetManifest::complete(kind, shard_count, sources.len() as u64, total_bytes)).await?;
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

    fn touch(root: &Path, rel: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, b"x").unwrap();
    }

    /// torchvision's ImageFolder rules (tests/fixtures/imagefolder-nested among
    /// them): files below a class directory at any depth, extensions in any
    /// case, nothing from the root itself, labels by sorted class name.
    #[test]
    fn image_folder_follows_torchvision() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        for f in ["c/a.jpg", "c/sub/e.jpg", "b/deep/er/x.JPEG", "b/y.PNG", "b/notes.txt", "loose.jpg"] {
            touch(r, f);
        }
        let (classes, src) = scan_image_folder(r).unwrap();
        assert_eq!(classes, ["b", "c"]);
        let got: Vec<(String, u32)> = src.iter().map(|s| (s.key.clone(), s.label)).collect();
        // os.walk order, sorted by directory path: b, b/deep/er; c, c/sub.
        assert_eq!(got, [("b/y".to_string(), 0), ("b/deep/er/x".to_string(), 0), ("c/a".to_string(), 1), ("c/sub/e".to_string(), 1)]);

        // A nested tree (c/a.jpg, c/sub/e.jpg): 2 images, both class c, label 0.
        let case = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/imagefolder-nested/root");
        let (classes, src) = scan_image_folder(&case).unwrap();
        assert_eq!((classes.len(), src.len()), (1, 2));
        assert!(src.iter().all(|s| s.label == 0));
    }

    #[test]
    fn image_folder_refuses_what_it_cannot_take() {
        let d = tempfile::tempdir().unwrap();
        touch(d.path(), "a/x.webp");
        let e = scan_image_folder(d.path()).unwrap_err().to_string();
        assert!(e.contains("x.webp") && e.contains("only JPEG and PNG"), "{e}");
        let d = tempfile::tempdir().unwrap();
        touch(d.path(), "a/x.jpg");
        std::fs::create_dir_all(d.path().join("z")).unwrap();
        let e = scan_image_folder(d.path()).unwrap_err().to_string();
        assert!(e.contains("no images in class directories z"), "{e}");
        let d = tempfile::tempdir().unwrap();
        touch(d.path(), "only.jpg");
        assert!(scan_image_folder(d.path()).unwrap_err().to_string().contains("no class directories"));
        // Stems that collide stay apart by their path; a real collision is named.
        let d = tempfile::tempdir().unwrap();
        touch(d.path(), "a/x.jpg");
        touch(d.path(), "a/x.png");
        assert!(scan_image_folder(d.path()).unwrap_err().to_string().contains("both become sample key 'a/x'"));
    }
}
