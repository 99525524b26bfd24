//! The witness's scenario matrix, for every bench: each runs over the rdma
//! backend through the libminiocpp test double against a server of its own
//! whose traffic is counted and mirrored into MinIO-style metrics
//! (`common::mirror_metrics`) as a real AIStor server would report it in
//! each scenario:
//!
//! - (a) true RDMA: the double's transfers are RDMA bytes, the rest HTTP;
//! - (b) full fallback: every byte over HTTP, RDMA flat;
//! - (c) this client fell back while another client's RDMA grew by as much;
//! - (d) a two-node cluster where the node that took half the transfers over
//!   RDMA is listed under two URLs (counted twice, 50 % would read as 100 %);
//! - (e) the library reports RDMA unavailable (while the server's counters
//!   still claim RDMA).
//!
//! Only (a) may verify; `--require-rdma` exits 3 for every other.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{Mirror, S3Server};
use serde_json::Value;

fn s3rdma(args: &[String], cwd: &Path, rdma_available: bool) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_s3rdma"));
    c.args(args).current_dir(cwd);
    for k in ["AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "RUST_LOG", "MINIOCPP_LIB", "FAKE_MINIOCPP_RDMA_AVAILABLE"] {
        c.env_remove(k);
    }
    if rdma_available {
        c.env("FAKE_MINIOCPP_RDMA_AVAILABLE", "1");
    }
    c.output().expect("run s3rdma")
}

fn strings(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// Store flags for `backend` against `srv`, bucket `bucket`.
fn store_args(srv: &S3Server, backend: &str, bucket: &str) -> Vec<String> {
    let mut v = strings(&["--backend", backend, "--endpoint", &srv.endpoint, "--access-key", common::ACCESS_KEY, "--secret-key", common::SECRET_KEY]);
    v.extend(["--bucket".into(), bucket.into()]);
    if backend == "rdma" {
        v.extend(["--rdma-lib".to_string(), common::fake_lib().to_str().unwrap().to_string()]);
    }
    v
}

/// A set-up command (ingest, model synthesis) over plain http.
fn setup(srv: &S3Server, bucket: &str, args: &[&str]) {
    let tmp = tempfile::tempdir().unwrap();
    let mut a = strings(args);
    a.extend(store_args(srv, "http", bucket));
    let o = s3rdma(&a, tmp.path(), false);
    assert!(o.status.success(), "set-up {args:?}: {}", String::from_utf8_lossy(&o.stderr));
}

/// One run of `bench` in `mode`; returns (exit code, record, stdout + stderr).
fn run(
    srv: &S3Server,
    traffic: &std::sync::Arc<common::Traffic>,
    bench: &[&str],
    bucket: &str,
    mode: Mirror,
    lib_says_rdma: bool,
    require: bool,
) -> (Option<i32>, Value, String) {
    let (_m, urls) = common::mirror_metrics(traffic.clone(), mode);
    let tmp = tempfile::tempdir().unwrap();
    let mut a = strings(bench);
    a.extend(store_args(srv, "rdma", bucket));
    if bench[0] != "verify" {
        a.extend(["--dest".into(), "host".into()]);
    }
    for u in urls {
        a.extend(["--metrics-url".into(), u]);
    }
    if require {
        a.push("--require-rdma".into());
    }
    let o = s3rdma(&a, tmp.path(), lib_says_rdma);
    let text = format!("{}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(!text.contains("panicked"), "{text}");
    let files: Vec<_> = std::fs::read_dir(tmp.path().join("results")).map(|d| d.map(|e| e.unwrap().path()).collect()).unwrap_or_default();
    assert_eq!(files.len(), 1, "{} {mode:?}: one record, whatever the verdict\n{text}", bench[0]);
    let rec: Value = serde_json::from_slice(&std::fs::read(&files[0]).unwrap()).unwrap();
    (o.status.code(), rec, text)
}

/// Every scenario for one bench (already set up in `bucket` on `srv`).
fn matrix(srv: &S3Server, traffic: &std::sync::Arc<common::Traffic>, bench: &[&str], bucket: &str) {
    let name = bench[0];
    // With several ranks, the others poll `go` while rank 0 scrapes: a server
    // listed under two URLs may then answer with two different values for one
    // series, which is `unverified` (never verified) instead of partial-fallback.
    let ranks = bench.contains(&"--ranks");
    for (mode, want) in [
        (Mirror::TrueRdma, "rdma-verified"),
        (Mirror::Fallback, "full-fallback"),
        (Mirror::SharedWindow, "unverified"),
        (Mirror::HalfListedTwice, "partial-fallback"),
    ] {
        let (code, rec, text) = run(srv, traffic, bench, bucket, mode, true, true);
        let w = &rec["rdma_witness"];
        if std::env::var_os("SHOW").is_some() {
            eprintln!("{mode:?}: {}", w["reason"]);
        }
        let reason = w["reason"].as_str().unwrap_or_default();
        let want = if ranks && mode == Mirror::HalfListedTwice && reason.contains("two answers claim one server") { "unverified" } else { want };
        assert_eq!(w["verdict"], want, "{name} {mode:?}: {w}\n{text}");
        let exit = if want == "rdma-verified" { 0 } else { 3 };
        assert_eq!(code, Some(exit), "{name} {mode:?} with --require-rdma\n{text}");
        assert!(text.contains(&format!("witness: {want}")), "{name} {mode:?} prints its verdict\n{text}");
        match mode {
            Mirror::SharedWindow => assert!(reason.contains("evidence disagrees"), "{name}: {reason}"),
            Mirror::HalfListedTwice if want == "unverified" => assert!(reason.contains("n1:9000"), "{name}: {reason}"),
            Mirror::HalfListedTwice => assert!(reason.contains("counted once: n1:9000"), "{name}: {reason}"),
            _ => {}
        }
    }
    // (e) The library's own word: RDMA unavailable. With --require-rdma the
    // run stops before any window (tests/require_rdma.rs); without it the
    // transfers are the library's HTTP, whatever the server's RDMA counters claim.
    let (code, rec, text) = run(srv, traffic, bench, bucket, Mirror::TrueRdma, false, false);
    assert_eq!(code, Some(0), "{name} (e) without --require-rdma\n{text}");
    let w = &rec["rdma_witness"];
    assert_eq!(w["verdict"], "full-fallback", "{name} (e): {w}\n{text}");
    assert!(w["reason"].as_str().unwrap_or_default().contains("over HTTP"), "{name} (e): {w}");
}

#[test]
fn fetch_scenarios() {
    let (srv, t) = common::counted_server();
    std::fs::create_dir_all(srv.root.join("wmx")).unwrap();
    matrix(&srv, &t, &["fetch", "--sizes", "1MiB", "--concurrency", "2", "--iters", "2", "--warmup", "0s", "--prepare"], "wmx");
}

#[test]
fn ckpt_save_and_restore_scenarios() {
    let (srv, t) = common::counted_server();
    std::fs::create_dir_all(srv.root.join("wmx")).unwrap();
    matrix(&srv, &t, &["ckpt", "--sizes", "8MiB", "--chunk", "2MiB", "--methods", "flat", "--repeats", "1"], "wmx");
}

/// Two ranks: their meeting requests inside the windows (the `go` PUT,
/// polls of it, the figures PUT at the close) are declared, and the verdict
/// is the same as one rank's in every scenario.
#[test]
fn ckpt_two_ranks_scenarios() {
    let (srv, t) = common::counted_server();
    std::fs::create_dir_all(srv.root.join("wmx")).unwrap();
    matrix(&srv, &t, &["ckpt", "--sizes", "8MiB", "--chunk", "2MiB", "--methods", "flat", "--repeats", "1", "--ranks", "2"], "wmx");
}

#[test]
fn weights_scenarios() {
    let (srv, t) = common::counted_server();
    setup(&srv, "wmx", &["weights", "--synth", "tiny", "--model", "m/tiny"]);
    matrix(&srv, &t, &["weights", "--model", "m/tiny", "--verify"], "wmx");
}

#[test]
fn tokens_scenarios() {
    let (srv, t) = common::counted_server();
    setup(&srv, "wmx", &["ingest", "tokens", "--synthetic", "--total-bytes", "4MiB", "--seq-len", "256", "--shard-bytes", "1MiB", "--vocab", "1000"]);
    matrix(&srv, &t, &["tokens", "--fetch-workers", "2", "--run-bytes", "256KiB"], "wmx");
}

#[test]
fn train_loader_only_scenarios() {
    let (srv, t) = common::counted_server();
    setup(&srv, "wmx", &["ingest", "raw", "--synthetic", "64", "--classes", "2", "--size", "32", "--samples-per-shard", "16"]);
    // One shard buffer and one batch ahead: every window reads from the store.
    let train =
        ["train", "--loader-only", "--batch-size", "8", "--crop", "24", "--steps", "6", "--warmup", "1", "--fetch-workers", "1", "--prefetch-batches", "1"];
    matrix(&srv, &t, &train, "wmx");
}

#[test]
fn verify_scenarios_and_no_gpu_direct_claim_without_a_gpu() {
    let (srv, t) = common::counted_server();
    std::fs::create_dir_all(srv.root.join("wmx")).unwrap();
    let gpu = s3rdma_has_gpu();
    let verify = ["verify", "--sizes", "64KiB,1MiB"];
    for (mode, want) in [
        (Mirror::TrueRdma, "rdma-verified"),
        (Mirror::Fallback, "full-fallback"),
        (Mirror::SharedWindow, "unverified"),
        (Mirror::HalfListedTwice, "partial-fallback"),
    ] {
        let (code, rec, text) = run(&srv, &t, &verify, "wmx", mode, true, false);
        assert_eq!(rec["rdma_witness"]["verdict"], want, "verify {mode:?}\n{text}");
        assert_eq!(code, Some(if want == "rdma-verified" { 0 } else { 3 }), "verify {mode:?} exits 3 unless verified\n{text}");
        // Every size and direction is a row of the table.
        let probes = rec["results"]["probes"].as_array().unwrap();
        assert_eq!(probes.len(), if gpu { 8 } else { 4 }, "{text}");
        if gpu {
            continue;
        }
        assert!(!text.contains("GPU-Direct RDMA is live"), "no GPU, no GPU-Direct PASS:\n{text}");
        if mode == Mirror::TrueRdma {
            let result = text.lines().find(|l| l.starts_with("RESULT:")).unwrap();
            assert!(result.contains("GPU-Direct into GPU memory NOT checked: no usable GPU"), "{result}");
            // The PASS line states what was proven, in the server's own figures.
            assert!(result.contains("GET of 1MiB into host memory: server counted 1,048,576 RDMA read bytes; HTTP sent grew 0"), "{result}");
        }
    }
}

/// Whether this host has a GPU s3rdma can use (then verify also runs GPU probes).
fn s3rdma_has_gpu() -> bool {
    let tmp = tempfile::tempdir().unwrap();
    let o = s3rdma(&strings(&["verify", "--root", "d", "--prepare", "--sizes", "1KiB", "--json"]), tmp.path(), false);
    let rec: Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
    !rec["environment"]["gpu"].is_null()
}
