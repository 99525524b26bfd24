//! Every bench over `--backend rdma` through the real libminiocpp (minio-cpp
//! v0.6.0, the libs3rdma generation), built by scripts/build-libminiocpp.sh.
//! No RDMA device here: the library says RDMA is unavailable, and every
//! transfer takes its HTTP fallback. So: byte-exact, never `rdma-verified`,
//! the record names the library generation and the library's own reason,
//! and `--require-rdma` stops before the first window.

use super::*;

/// `rdma_args` for `sub` through the real library, or `None` (skipped) where it is not built.
fn real<'a>(sub: &[&'a str], endpoint: &'a str, bucket: &'a str, lib: &'a str) -> Vec<&'a str> {
    let mut v = sub.to_vec();
    v.extend(&rdma_args(endpoint, bucket, lib)[1..]);
    v
}

fn library_of(rec: &Value) -> &Value {
    &rec["environment"]["store"]["library"]
}

/// The record names the libs3rdma generation, its version and why RDMA is off.
fn assert_names_the_library(rec: &Value) {
    let l = library_of(rec);
    assert_eq!(l["generation"], "libs3rdma", "{l}");
    assert!(l["engine_version"].as_str().is_some_and(|v| !v.is_empty()), "{l}");
    assert_eq!(l["rdma_available"], false, "{l}");
    assert!(l["unavailable_reason"].as_str().is_some_and(|r| !r.is_empty()), "{l}");
    assert_eq!(l["has_get_object_range"], false, "minio-cpp main has no ranged GET (PR #258): {l}");
    assert!(l["engine_libraries"].as_array().is_some_and(|a| a.iter().any(|p| p.as_str().unwrap().contains("libs3rdma"))), "{l}");
    assert_ne!(rec["rdma_witness"]["verdict"], "rdma-verified");
}

#[test]
fn real_library_fetch_ckpt_weights_are_byte_exact_and_never_verified() {
    let Some(lib) = common::real_lib("real_library_fetch_ckpt_weights_are_byte_exact_and_never_verified") else { return };
    let lib = lib.to_str().unwrap();
    let s = common::server();
    let tmp = tempfile::tempdir().unwrap();
    // fetch into host memory: every object through the C ABI, whole, counted as asked.
    let mut a = real(&["fetch"], &s.endpoint, "real-fetch", lib);
    a.extend(["--sizes", "1MiB,3MiB", "--concurrency", "2", "--iters", "2", "--warmup", "0s", "--prepare", "--json"]);
    let rec = record(&s3rdma(&a, tmp.path()));
    assert_names_the_library(&rec);
    for cell in rec["results"].as_array().unwrap() {
        let r = &cell["repeats"][0];
        let size = cell["size_bytes"].as_u64().unwrap_or_else(|| panic!("{cell}"));
        assert_eq!(r["store_stats"]["rdma_calls"], 4, "2 streams x 2 GETs: {r}");
        assert_eq!(r["store_stats"]["bytes_http"], 4 * size, "the library's own word: HTTP, counted as asked: {r}");
    }
    // ckpt flat and async with a size that is not a multiple of --chunk:
    // the last chunk is short, and restore checks every checksum.
    let mut a = real(&["ckpt"], &s.endpoint, "real-fetch", lib);
    a.extend(["--sizes", "5000000", "--chunk", "1MiB", "--methods", "flat,async", "--dest", "host", "--json"]);
    let o = s3rdma(&a, tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let rec: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_names_the_library(&rec);
    let rows = rec["results"]["rows"].as_array().unwrap();
    let restores: Vec<&Value> = rows.iter().filter(|r| r["op"] == "restore").collect();
    assert_eq!(restores.len(), 2, "{rows:?}");
    assert!(restores.iter().all(|r| r["verified"]["ok"] == true), "{restores:?}");
    let calls = rec["environment"]["store_stats"]["in_windows"]["rdma_calls"].as_u64().unwrap();
    assert!(calls >= 4 * 5, "every chunk written and read through the C ABI: {calls}");
    // weights --verify: a synthetic model through the library.
    let w = real(&["weights", "--synth", "tiny", "--model", "m/real", "--shard-size", "16MB"], &s.endpoint, "real-weights", lib);
    let o = s3rdma(&w, tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let mut w = real(&["weights", "--model", "m/real", "--verify", "--json"], &s.endpoint, "real-weights", lib);
    w.extend(["--dest", "host"]);
    let rec = record(&s3rdma(&w, tmp.path()));
    assert_names_the_library(&rec);
    assert_eq!(rec["results"]["verified"]["ok"], true, "{}", rec["results"]["verified"]);
}

#[test]
fn real_library_tokens_and_train_loader_read_their_datasets() {
    let Some(lib) = common::real_lib("real_library_tokens_and_train_loader_read_their_datasets") else { return };
    let lib = lib.to_str().unwrap();
    let s = common::server();
    let tmp = tempfile::tempdir().unwrap();
    let mut a = real(&["ingest", "tokens", "--synthetic"], &s.endpoint, "real-tokens", lib);
    a.extend(["--total-bytes", "4MiB", "--seq-len", "1024", "--shard-bytes", "1MiB"]);
    ok(&s3rdma(&a, tmp.path()));
    let mut b = real(&["tokens"], &s.endpoint, "real-tokens", lib);
    b.extend(["--dest", "host", "--batch-seqs", "16", "--repeats", "1", "--json"]);
    let rec = record(&s3rdma(&b, tmp.path()));
    assert_names_the_library(&rec);
    assert_eq!(rec["results"]["repeats"][0]["bytes"], 3 << 20, "three timed shards after one warm-up shard");
    let mut a = real(&["ingest", "raw", "--synthetic", "64"], &s.endpoint, "real-raw", lib);
    a.extend(["--classes", "4", "--size", "32", "--samples-per-shard", "16"]);
    ok(&s3rdma(&a, tmp.path()));
    let mut t = real(&["train", "--loader-only"], &s.endpoint, "real-raw", lib);
    // One shard buffer and one batch ahead: the window must read from the store (a window that read nothing fails).
    t.extend(["--dest", "host", "--batch-size", "8", "--crop", "24", "--steps", "6", "--warmup", "1", "--repeats", "1", "--json"]);
    t.extend(["--fetch-workers", "1", "--prefetch-batches", "1"]);
    let rec = record(&s3rdma(&t, tmp.path()));
    assert_names_the_library(&rec);
    assert_eq!(rec["results"]["repeats"][0]["images"], 6 * 8);
}

#[test]
fn real_library_verify_names_the_generation_and_fails_with_its_reason() {
    let Some(lib) = common::real_lib("real_library_verify_names_the_generation_and_fails_with_its_reason") else { return };
    let lib = lib.to_str().unwrap();
    let s = common::server();
    let tmp = tempfile::tempdir().unwrap();
    let mut a = real(&["verify"], &s.endpoint, "real-verify", lib);
    a.extend(["--prepare", "--sizes", "4KiB,64MiB"]);
    let o = s3rdma(&a, tmp.path());
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(3), "{out}{}", stderr(&o));
    assert!(out.contains("libs3rdma") && out.contains("generation"), "{out}");
    assert!(!out.to_lowercase().contains("cufile"), "the cuObject generation's checks do not apply: {out}");
    assert!(out.contains("libibverbs.so.1") || out.contains("DC-capable") || out.contains("RDMA devices"), "the verbs/device checks: {out}");
    let result = out.lines().find(|l| l.starts_with("RESULT: ")).unwrap_or_else(|| panic!("{out}"));
    assert!(result.starts_with("RESULT: FAIL") && result.contains("RDMA unavailable"), "{result}");
    assert_eq!(out.matches(": bytes match").count(), 2, "both host GETs byte-exact: {out}");
    assert!(!out.contains("informational"), "with libs3rdma host probes decide: {out}");
    let err = stderr(&o);
    assert!(err.contains("RDMA not proven (verify on the rdma backend passes only when every probe is rdma-verified)"), "{err}");
    assert!(!err.contains("--require-rdma"), "no flag was passed: {err}");
}

#[test]
fn real_library_require_rdma_stops_before_the_first_window() {
    let Some(lib) = common::real_lib("real_library_require_rdma_stops_before_the_first_window") else { return };
    let lib = lib.to_str().unwrap();
    let s = common::server();
    let tmp = tempfile::tempdir().unwrap();
    let mut a = real(&["fetch"], &s.endpoint, "real-require", lib);
    a.extend(["--sizes", "1MiB", "--prepare", "--require-rdma", "--json"]);
    let o = s3rdma(&a, tmp.path());
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let rec: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(rec["results"].is_null(), "nothing was measured: {}", rec["results"]);
    let reason = rec["rdma_witness"]["reason"].as_str().unwrap();
    assert!(reason.contains("libs3rdma") && reason.contains("nothing was measured"), "{reason}");
    assert!(reason.contains(library_of(&rec)["unavailable_reason"].as_str().unwrap()), "the library's own reason: {reason}");
}
