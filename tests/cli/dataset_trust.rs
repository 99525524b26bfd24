//! A dataset whose bytes are not what its sidecars and manifest say is never
//! counted: an interrupted ingest, a truncated or padded data object, a
//! sidecar or manifest that disagrees with the objects, a window that read
//! nothing from the store.

use super::*;
use serde_json::json;
use std::path::PathBuf;

struct Fixture {
    tmp: tempfile::TempDir,
    root: PathBuf,
    res: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let (root, res) = (tmp.path().join("store"), tmp.path().join("results"));
        Fixture { tmp, root, res }
    }
    /// A bench run (results to `res`).
    fn run(&self, args: &[&str]) -> Output {
        let mut v = args.to_vec();
        v.extend(["--root", self.root.to_str().unwrap(), "--bucket", "data", "--results-dir", self.res.to_str().unwrap()]);
        s3rdma(&v, self.tmp.path())
    }
    /// An ingest (it writes no record).
    fn ingest(&self, args: &[&str]) -> Output {
        let mut v = vec!["ingest"];
        v.extend(args);
        v.extend(["--root", self.root.to_str().unwrap(), "--bucket", "data"]);
        s3rdma(&v, self.tmp.path())
    }
    fn object(&self, key: &str) -> PathBuf {
        self.root.join("data").join(key)
    }
    fn json(&self, key: &str) -> Value {
        serde_json::from_slice(&std::fs::read(self.object(key)).unwrap()).unwrap()
    }
    fn put_json(&self, key: &str, v: &Value) {
        std::fs::write(self.object(key), serde_json::to_vec(v).unwrap()).unwrap();
    }
    fn tokens_fails(&self, needle: &str) {
        assert_fails(&self.run(&["tokens", "--dest", "host", "--repeats", "1"]), 1, needle, &self.res);
    }
}

#[test]
fn an_ingest_that_fails_midway_leaves_a_set_every_reader_refuses() {
    let f = Fixture::new();
    ok(&f.ingest(&["raw", "--synthetic", "8", "--size", "16", "--samples-per-shard", "4"]));
    // Class `a` decodes; class `b`, sorted after it, holds an image cut short
    // after its header (which the check of every source before the ingest
    // takes): the first shards are written before the ingest meets it.
    let src = f.tmp.path().join("src");
    for class in ["a", "b"] {
        std::fs::create_dir_all(src.join(class)).unwrap();
    }
    for i in 0..4 {
        image::RgbImage::from_pixel(20, 20, image::Rgb([i * 40, 10, 200])).save(src.join(format!("a/{i}.png"))).unwrap();
    }
    std::fs::write(src.join("b/broken.png"), &cut_short_png()[..60]).unwrap();
    let o = f.ingest(&["raw", "--src", src.to_str().unwrap(), "--size", "16", "--samples-per-shard", "2"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("broken.png"), "{}", stderr(&o));
    assert!(stderr(&o).contains("the raw set 'raw/train' stays marked `writing`"), "{}", stderr(&o));
    assert!(f.object("raw/train-000000.json").is_file(), "the shard before the broken image is committed");
    assert_eq!(f.json("raw/train.dataset.json")["state"], "writing");
    assert_fails(
        &f.run(&["train", "--loader-only", "--dest", "host", "--batch-size", "2", "--crop", "8"]),
        1,
        "the raw set 'raw/train' is an interrupted ingest",
        &f.res,
    );
    // An ingest that completes makes the set whole again.
    ok(&f.ingest(&["raw", "--synthetic", "8", "--size", "16", "--samples-per-shard", "4"]));
    assert_eq!(f.json("raw/train.dataset.json")["state"], "complete");
    // Another kind under the same prefix is replaced, and said so.
    let o = f.ingest(&["jpeg", "--prefix", "raw/train", "--synthetic", "4", "--synthetic-size", "16x16"]);
    assert!(stderr(&o).contains("'raw/train' held a raw set; its 4 shard object(s) are deleted and a jpeg set replaces it"), "{}", stderr(&o));
    assert_fails(&f.run(&["tokens", "--dest", "host", "--prefix", "raw/train"]), 2, "'raw/train' holds a jpeg set, not tokens", &f.res);
}

/// A word-level tokenizer small enough to write here (the tokenizers crate's
/// JSON schema), as `dir/tokenizer.json`.
fn word_tokenizer(dir: &std::path::Path) -> PathBuf {
    let tok = dir.join("tokenizer.json");
    let model = json!({"type": "WordLevel", "vocab": {"[UNK]": 0, "a": 1}, "unk_token": "[UNK]"});
    let spec = json!({"version": "1.0", "truncation": null, "padding": null, "added_tokens": [], "normalizer": null,
        "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null, "decoder": null, "model": model});
    std::fs::write(&tok, spec.to_string()).unwrap();
    tok
}

/// A 32x32 PNG of noise (its pixels do not compress away), whole.
fn cut_short_png() -> Vec<u8> {
    let img = image::RgbImage::from_fn(32, 32, |x, y| image::Rgb([(x * 37 + y * 101) as u8, (x * y) as u8, (x ^ y) as u8 * 8]));
    let mut png = Vec::new();
    img.write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png).unwrap();
    assert!(png.len() > 200, "{} bytes", png.len());
    png
}

/// Input an ingest can tell is wrong before it writes (a file that is no
/// image, a JPEG without its end, a text file that is not UTF-8, text too
/// short for one sequence) fails it with exit 2 and leaves the set already
/// under the prefix whole: complete, every shard in place, still read.
#[test]
fn an_ingest_refused_before_its_first_shard_leaves_the_old_set_whole() {
    let f = Fixture::new();
    ok(&f.ingest(&["jpeg", "--synthetic", "8", "--synthetic-size", "16x16", "--samples-per-shard", "4"]));
    ok(&f.ingest(&["tokens", "--synthetic", "--total-bytes", "128KiB", "--seq-len", "256", "--shard-bytes", "64KiB"]));
    let shards = |prefix: &str| {
        let dir = f.object(prefix).parent().unwrap().to_path_buf();
        let mut v: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| (e.as_ref().unwrap().file_name(), std::fs::read(e.unwrap().path()).unwrap())).collect();
        v.sort();
        v
    };
    let (jpeg_before, tokens_before) = (shards("jpeg/train"), shards("tokens/train"));
    let src = f.tmp.path().join("src");
    std::fs::create_dir_all(src.join("c")).unwrap();
    std::fs::write(src.join("c/a.png"), cut_short_png()).unwrap();
    let mut jpeg = Vec::new();
    image::RgbImage::from_pixel(16, 16, image::Rgb([1, 2, 3])).write_to(&mut std::io::Cursor::new(&mut jpeg), image::ImageFormat::Jpeg).unwrap();
    for (name, bytes, says) in [
        ("z.jpg", b"not an image".to_vec(), "z.jpg is not a decodable JPEG/PNG"),
        ("z.jpg", jpeg[..jpeg.len() - 2].to_vec(), "z.jpg is a truncated JPEG (no end-of-image marker)"),
    ] {
        std::fs::write(src.join("c").join(name), bytes).unwrap();
        for kind in ["jpeg", "raw"] {
            let o = f.ingest(&[kind, "--src", src.to_str().unwrap(), "--prefix", "jpeg/train", "--samples-per-shard", "1", "--size", "16"]);
            assert_eq!(o.status.code(), Some(2), "{kind} {name}: {}", stderr(&o));
            assert!(stderr(&o).contains(says) && !stderr(&o).contains("stays marked"), "{kind}: {}", stderr(&o));
            assert_eq!(shards("jpeg/train"), jpeg_before, "{kind} {says}: the old set changed");
        }
    }
    // An image name that is a symlink to nothing is refused too (torchvision
    // lists it and fails on its load), not skipped.
    std::fs::remove_file(src.join("c/z.jpg")).unwrap();
    std::os::unix::fs::symlink("/nonexistent/zz.jpg", src.join("c/gone.jpg")).unwrap();
    let o = f.ingest(&["jpeg", "--src", src.to_str().unwrap(), "--prefix", "jpeg/train", "--samples-per-shard", "1"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("gone.jpg does not open"), "{}", stderr(&o));
    assert_eq!(shards("jpeg/train"), jpeg_before, "a dangling symlink: the old set changed");
    let text = f.tmp.path().join("text");
    std::fs::create_dir_all(&text).unwrap();
    let tokenizer = word_tokenizer(f.tmp.path());
    // A file of more than a shard's tokens (64 sequences of 256) sorts first:
    // beside the stray binary, it would be written before the binary is met.
    std::fs::write(text.join("a.txt"), "a ".repeat(20_000)).unwrap();
    for (bytes, says) in [(b"\xff\xfe not text".to_vec(), "is not UTF-8 text"), (b"hi".to_vec(), "less than one sequence of 256")] {
        if says.contains("sequence") {
            std::fs::remove_file(text.join("a.txt")).unwrap();
        }
        std::fs::write(text.join("doc.txt"), bytes).unwrap();
        let o =
            f.ingest(&["tokens", "--tokenizer", tokenizer.to_str().unwrap(), "--input", text.to_str().unwrap(), "--seq-len", "256", "--shard-bytes", "64KiB"]);
        assert_eq!(o.status.code(), Some(2), "{says}: {}", stderr(&o));
        assert!(stderr(&o).contains(says) && !stderr(&o).contains("stays marked"), "{}", stderr(&o));
        assert_eq!(shards("tokens/train"), tokens_before, "{says}: the old set changed");
    }
    ok(&f.run(&["tokens", "--dest", "host", "--repeats", "1"]));
}

#[test]
fn data_objects_sidecars_and_manifest_must_agree() {
    let f = Fixture::new();
    let fresh = || ok(&f.ingest(&["tokens", "--synthetic", "--total-bytes", "256KiB", "--seq-len", "256", "--shard-bytes", "64KiB"]));
    fresh();
    let bin = f.object("tokens/train-000001.bin");
    let whole = std::fs::read(&bin).unwrap();
    assert_eq!(whole.len(), 64 << 10);
    // Truncated, padded, missing.
    std::fs::write(&bin, &whole[..whole.len() - 4]).unwrap();
    f.tokens_fails("'tokens/train-000001.bin' holds 65532 bytes, its sidecar 'tokens/train-000001.json' says 65536: re-run `s3rdma ingest tokens`");
    std::fs::write(&bin, [whole.as_slice(), b"tail"].concat()).unwrap();
    f.tokens_fails("holds 65540 bytes, its sidecar 'tokens/train-000001.json' says 65536");
    std::fs::remove_file(&bin).unwrap();
    f.tokens_fails("'tokens/train-000001.bin', the data of 'tokens/train-000001.json', is missing");
    // A sidecar that says other sequences than its object holds.
    fresh();
    let mut side = f.json("tokens/train-000002.json");
    side["sequences"] = json!(32);
    f.put_json("tokens/train-000002.json", &side);
    f.tokens_fails("holds 65536 bytes, its sidecar 'tokens/train-000002.json' says 32768");
    side["sequences"] = json!(0);
    f.put_json("tokens/train-000002.json", &side);
    f.tokens_fails("only non-empty int32 token shards");
    // Shards of two tokenizations under one prefix.
    side["sequences"] = json!(64);
    side["vocab_size"] = json!(1000);
    f.put_json("tokens/train-000002.json", &side);
    f.tokens_fails("'tokens/train-000002.json' holds sequences of 256 tokens from 'synthetic-uniform' (vocabulary 1000), the first shard 256 from 'synthetic-uniform' (128256)");
    // A manifest whose totals are not the sidecars'.
    fresh();
    let mut m = f.json("tokens/train.dataset.json");
    m["items"] = json!(1000);
    f.put_json("tokens/train.dataset.json", &m);
    f.tokens_fails("its manifest says 1000 items in 262144 bytes, the shards' sidecars 256 in 262144");
    // A set without a manifest (as the original suite wrote them) is read, and the record says why it was not checked whole.
    fresh();
    std::fs::remove_file(f.object("tokens/train.dataset.json")).unwrap();
    let rec = record(&f.run(&["tokens", "--dest", "host", "--repeats", "1", "--json"]));
    let warnings = rec["environment"]["warnings"].to_string();
    assert!(warnings.contains("'tokens/train.dataset.json' is missing"), "{warnings}");
    assert_eq!(rec["results"]["shards"], 4);
}

#[test]
fn a_window_that_read_nothing_from_the_store_fails_and_says_so() {
    let f = Fixture::new();
    // One worker, one shard buffer of 4 batches: the warm-up step waits for
    // its read; the timed step takes the second batch while the other two
    // still hold the buffer, so no read can start inside the window.
    ok(&f.ingest(&["raw", "--synthetic", "64", "--size", "32", "--samples-per-shard", "32"]));
    let o = f.run(&["train", "--loader-only", "--dest", "host", "--fetch-workers", "1", "--warmup", "1", "--steps", "1", "--batch-size", "8", "--crop", "16"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("the 1 timed steps read 0 bytes from the store"), "{}", stderr(&o));
    // No record: its images/s would be meaningless.
    assert!(results_in(&f.res).is_empty(), "a window that read nothing left a record");
}

#[test]
fn a_jpeg_index_must_name_its_own_tar() {
    let f = Fixture::new();
    ok(&f.ingest(&["jpeg", "--synthetic", "8", "--synthetic-size", "16x16", "--samples-per-shard", "4"]));
    let mut idx = f.json("jpeg/train-000001.index.json");
    assert_eq!(idx["shard"], "jpeg/train-000001.tar");
    // Another shard's tar: its bytes would be counted as this shard's.
    idx["shard"] = json!("jpeg/train-000000.tar");
    f.put_json("jpeg/train-000001.index.json", &idx);
    assert_fails(
        &f.run(&["train", "--layout", "jpeg", "--loader-only", "--dest", "host", "--batch-size", "2", "--crop", "8"]),
        1,
        "'jpeg/train-000001.index.json' names 'jpeg/train-000000.tar' as its data, not the shard's own 'jpeg/train-000001.tar'",
        &f.res,
    );
}

#[test]
fn a_reingest_touches_the_old_set_only_once_its_input_is_found() {
    let f = Fixture::new();
    ok(&f.ingest(&["tokens", "--synthetic", "--total-bytes", "128KiB", "--seq-len", "256", "--shard-bytes", "64KiB"]));
    let before = std::fs::read(f.object("tokens/train.dataset.json")).unwrap();
    // A mistyped --input: refused before the set under the prefix is touched.
    let tok = word_tokenizer(f.tmp.path());
    let typo = f.tmp.path().join("no-such-corpus");
    let o = f.ingest(&["tokens", "--input", typo.to_str().unwrap(), "--tokenizer", tok.to_str().unwrap()]);
    assert_ne!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("no-such-corpus"), "{}", stderr(&o));
    assert_eq!(std::fs::read(f.object("tokens/train.dataset.json")).unwrap(), before, "the manifest was rewritten");
    assert!(f.object("tokens/train-000001.bin").is_file(), "a shard was deleted");
    // Shards without a manifest (the original suite's) are replaced, and said so.
    std::fs::remove_file(f.object("tokens/train.dataset.json")).unwrap();
    let o = f.ingest(&["tokens", "--synthetic", "--total-bytes", "64KiB", "--seq-len", "256", "--shard-bytes", "64KiB"]);
    ok(&o);
    assert!(stderr(&o).contains("'tokens/train' held 4 shard object(s) without a manifest"), "{}", stderr(&o));
    assert!(!f.object("tokens/train-000001.bin").exists(), "the old second shard stays");
}

#[test]
fn a_tar_that_is_not_the_one_its_index_describes_is_refused_in_both_fetch_modes() {
    let f = Fixture::new();
    ok(&f.ingest(&["jpeg", "--synthetic", "256", "--synthetic-size", "64x48", "--samples-per-shard", "64"]));
    let train = |mode: &str| {
        f.run(&["train", "--layout", "jpeg", "--jpeg-fetch", mode, "--loader-only", "--dest", "host", "--batch-size", "16", "--steps", "8", "--warmup", "2"])
    };
    ok(&train("sample"));
    // Two tars of the same size swapped: every size check holds, the bytes are another shard's.
    let (a, b) = (f.object("jpeg/train-000002.tar"), f.object("jpeg/train-000003.tar"));
    assert_eq!(std::fs::metadata(&a).unwrap().len(), std::fs::metadata(&b).unwrap().len(), "the synthetic shards' sizes changed");
    let (ta, tb) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    std::fs::write(&a, &tb).unwrap();
    std::fs::write(&b, &ta).unwrap();
    for mode in ["sample", "shard"] {
        let o = train(mode);
        assert_eq!(o.status.code(), Some(1), "{mode}: {}", stderr(&o));
        assert!(stderr(&o).contains("the index does not describe this tar: re-run `s3rdma ingest jpeg`"), "{mode}: {}", stderr(&o));
        assert_eq!(results_in(&f.res).len(), 1, "{mode}: a refused run left a record");
    }
}
