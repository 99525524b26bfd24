//! `s3rdma ingest`: build the datasets `tokens` and `train` read, through the
//! [`ObjectStore`](crate::store::ObjectStore) trait (so `--backend local|http|rdma` all work), in the
//! layouts of [`crate::format::shards`].
//!
//! An ingest first checks its sources (every image's header, every text
//! file's UTF-8) and builds its first shard; only then does it mark the set's
//! manifest `writing` and remove the set already under the prefix
//! (`commit::begin_ingest`), so a stray file or input too short for one
//! shard leaves that set whole. Each shard is built in host memory, then
//! written as its data object and its sidecar; the manifest, marked
//! `complete` with the set's totals, is written last
//! (`commit::commit_ingest`). An ingest that fails or is killed after its
//! first shard (pixels that do not decode past a good header, the store)
//! leaves a set every reader refuses until an ingest of the prefix completes.

use std::path::{Path, PathBuf};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::error::{Error, Result};
use crate::flag::{INPUT, PREFIX};
use crate::format::shards;
use crate::store;

pub mod commit;
pub(crate) mod images;
mod plan;
pub mod synth;
mod tokens;
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
            return Err(Error::Usage(format!("{PREFIX} '{p}': give a key prefix such as tokens/train (not empty, not ending in '/')")));
        }
        store::check_key(&shards::shard_key(&p, 0, "index.json")).map_err(|e| Error::Usage(format!("{PREFIX} '{p}': {e}")))?;
    }
    match kind {
        IngestPlan::Tokens(a) => tokens::run(a).await,
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
    crate::mem::check_host_memory(&format!("{what} (built in memory twice over)"), bytes.saturating_mul(2), fix)
}

// ---------------------------------------------------------------- tokens

/// Every regular file under `inputs` (directories recursively), sorted per directory.
pub fn collect_files(inputs: &[PathBuf]) -> Result<Vec<PathBuf>> {
    fn walk(p: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        let md = std::fs::metadata(p).map_err(|e| Error::Usage(format!("{INPUT} {}: {e}: pass existing text files or directories", p.display())))?;
        if md.is_dir() {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| Error::Usage(format!("{INPUT} {}: cannot list: {e}", p.display())))?
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
        return Err(Error::Usage(format!("{INPUT} names no files: pass text files or directories holding them")));
    }
    Ok(out)
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
