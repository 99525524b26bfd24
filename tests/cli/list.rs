//! `s3rdma list`: the bench on the shared flags alone, over the S3 server
//! and a local directory.

use super::*;

/// With `--prepare` an empty prefix gets 1,000 empty objects and every
/// listing counts them; the record says what ran and that the witness had
/// nothing to judge. Without objects and without `--prepare` it is a usage
/// error (exit 2) naming the prefix and the flag, and no record.
#[test]
fn list_counts_every_key_over_http_and_refuses_an_empty_prefix() {
    let s = common::server();
    let tmp = tempfile::tempdir().unwrap();
    let bucket = "list-bench";
    std::fs::create_dir_all(s.root.join(bucket)).unwrap();
    let refused = s3rdma(&with_http(&["list", "--prefix", "none/", "--iters", "1"], &s.endpoint, bucket), tmp.path());
    assert_fails(&refused, 2, "no object under --prefix 'none/'", &tmp.path().join("results"));
    assert!(stderr(&refused).contains("--prepare"), "{}", stderr(&refused));

    let args = with_http(&["list", "--prefix", "shards/", "--prepare", "--iters", "3", "--warmup", "0s", "--repeats", "2", "--json"], &s.endpoint, bucket);
    let r = record(&s3rdma(&args, tmp.path()));
    assert_eq!(r["benchmark"], "list");
    assert_eq!(r["backend"], "http");
    assert_eq!(r["results"]["keys"], 1000);
    assert_eq!(r["params"]["iters"], 3);
    let reps = r["results"]["repeats"].as_array().unwrap();
    assert_eq!(reps.len(), 2);
    for rep in reps {
        assert_eq!(rep["listings"], 3);
        let (lps, kps) = (rep["listings_per_s"].as_f64().unwrap(), rep["keys_per_s"].as_f64().unwrap());
        assert!(lps > 0.0 && (kps / lps - 1000.0).abs() < 1e-6, "{rep}");
    }
    assert_eq!(r["rdma_witness"]["verdict"], "not-applicable");
    let written = std::fs::read_dir(s.root.join(bucket).join("shards")).unwrap().count();
    assert_eq!(written, 1000);
}

/// On the local backend the same bench lists a directory: the keys fetch
/// wrote under its prefix, found without `--prepare`. A prefix no key can
/// start with is a usage error before anything runs; a prepare cut short
/// (keys missing) is completed by the next `--prepare`.
#[test]
fn list_reads_what_fetch_wrote_on_the_local_backend() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("store");
    std::fs::create_dir_all(&root).unwrap();
    let root = root.to_str().unwrap();
    let fetch = [&["fetch", "--prepare", "--sizes", "4KiB", "--objects", "5", "--iters", "1", "--warmup", "0s"][..], &local_args(root)].concat();
    ok(&s3rdma(&fetch, tmp.path()));
    let list = [&["list", "--prefix", "fetch/", "--iters", "2", "--warmup", "0s", "--json"][..], &local_args(root)].concat();
    let r = record(&s3rdma(&list, tmp.path()));
    assert_eq!(r["backend"], "local");
    assert_eq!(r["results"]["keys"], 5);
    assert_eq!(r["params"]["prefix"], "fetch/");
    for bad in ["../", "a//b/", "/abs/"] {
        let o = s3rdma(&[&["list", "--prefix", bad, "--prepare"][..], &local_args(root)].concat(), tmp.path());
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", stderr(&o));
        assert!(stderr(&o).contains(&format!("--prefix '{bad}' cannot start a key")), "{}", stderr(&o));
    }
    let prepare = [&["list", "--prepare", "--iters", "1", "--warmup", "0s", "--json"][..], &local_args(root)].concat();
    assert_eq!(record(&s3rdma(&prepare, tmp.path()))["results"]["keys"], 1000, "the default prefix, list/, filled");
    for i in [3, 500, 999] {
        std::fs::remove_file(tmp.path().join("store/data/list").join(format!("list-{i:06}"))).unwrap();
    }
    assert_eq!(record(&s3rdma(&prepare, tmp.path()))["results"]["keys"], 1000, "the missing keys written again");
}
