//! `--require-rdma` means the same on every bench (one exit-code rule in
//! `src/bench/session/mod.rs`): each bench runs over the rdma backend through the
//! libminiocpp test double (which moves the bytes over plain HTTP) against
//! scripted server counters in which RDMA stays flat while the HTTP traffic
//! grows: a full fallback. The record is written (the run happened), its
//! verdict says so, and the process exits 3. Without the flag the same run exits 0.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

const MIB: u64 = 1 << 20;

/// Run the binary with the test double claiming RDMA (`FAKE_MINIOCPP_RDMA_AVAILABLE=1`,
/// as a real library on an RDMA host would), so the scripted server counters decide.
fn s3rdma(args: &[&str], cwd: &Path) -> Output {
    s3rdma_lib_says(args, cwd, true)
}

fn s3rdma_lib_says(args: &[&str], cwd: &Path, rdma_available: bool) -> Output {
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

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Store flags for `backend` against the in-process S3 server and `bucket`.
fn store_args(backend: &'static str, bucket: &str) -> Vec<String> {
    let s = common::server();
    let mut v: Vec<String> =
        ["--backend", backend, "--endpoint", &s.endpoint, "--access-key", common::ACCESS_KEY, "--secret-key", common::SECRET_KEY, "--bucket", bucket]
            .iter()
            .map(|x| x.to_string())
            .collect();
    if backend == "rdma" {
        v.extend(["--rdma-lib".to_string(), common::fake_lib().to_str().unwrap().to_string()]);
    }
    v
}

/// Counters of one node whose RDMA series never move while its HTTP sent and
/// received bytes grow by 64 MiB per scrape: every window is a full fallback.
fn fallback_metrics() -> common::ScriptedMetrics {
    let rdma = "minio_api_rdma_read_bytes_total{server=\"n1:9000\"} 5\n\
                minio_api_rdma_write_bytes_total{server=\"n1:9000\"} 5\n\
                minio_api_rdma_read_ops_total{server=\"n1:9000\"} 1\n\
                minio_api_rdma_write_ops_total{server=\"n1:9000\"} 1\n";
    let requests: Vec<common::Answer> = (0..64u64)
        .map(|i| {
            let n = i * 64 * MIB;
            common::Answer::text(format!(
                "minio_api_requests_traffic_sent_bytes{{server=\"n1:9000\",type=\"s3\"}} {n}\n\
                 minio_api_requests_traffic_received_bytes{{server=\"n1:9000\",type=\"s3\"}} {n}\n"
            ))
        })
        .collect();
    common::scripted_metrics(vec![("/rdma", vec![common::Answer::text(rdma)]), ("/requests", requests)])
}

/// Run `bench_args` over rdma with the fallback counters, with and without
/// `--require-rdma`; both write a record with a fallback verdict; only the
/// first exits 3.
fn assert_require_rdma_exits_3(bench_args: &[&str], bucket: &str) {
    for require in [true, false] {
        let m = fallback_metrics();
        let tmp = tempfile::tempdir().unwrap();
        let (u1, u2) = (format!("{}/rdma", m.base), format!("{}/requests", m.base));
        let mut args: Vec<String> = bench_args.iter().map(|s| s.to_string()).collect();
        args.extend(store_args("rdma", bucket));
        args.extend(["--metrics-url".into(), u1, "--metrics-url".into(), u2, "--dest".into(), "host".into()]);
        if require {
            args.push("--require-rdma".into());
        }
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = s3rdma(&argv, tmp.path());
        let out = String::from_utf8_lossy(&o.stdout);
        let want = if require { 3 } else { 0 };
        assert_eq!(o.status.code(), Some(want), "{} (require {require}):\n{out}\n{}", bench_args[0], stderr(&o));
        assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
        if require {
            assert!(stderr(&o).contains("RDMA not proven (--require-rdma): witness verdict full-fallback"), "{}", stderr(&o));
        }
        let files: Vec<_> = std::fs::read_dir(tmp.path().join("results")).unwrap().map(|e| e.unwrap().path()).collect();
        assert_eq!(files.len(), 1, "{}: the run happened, so its record is written", bench_args[0]);
        let rec: Value = serde_json::from_slice(&std::fs::read(&files[0]).unwrap()).unwrap();
        assert_eq!(rec["benchmark"], bench_args[0]);
        assert_eq!(rec["backend"], "rdma");
        assert_eq!(rec["rdma_witness"]["verdict"], "full-fallback", "{}", rec["rdma_witness"]);
        assert!(out.contains("witness: full-fallback"), "{out}");
    }
}

fn ok(o: &Output) {
    assert!(o.status.success(), "exit {:?}: {}", o.status.code(), stderr(o));
}

/// Run a set-up command (ingest, model synthesis) over plain http into `bucket`.
fn setup(args: &[&str], bucket: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let mut a: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    a.extend(store_args("http", bucket));
    let argv: Vec<&str> = a.iter().map(String::as_str).collect();
    ok(&s3rdma(&argv, tmp.path()));
}

#[test]
fn fetch_require_rdma_exits_3_after_a_full_fallback() {
    assert_require_rdma_exits_3(&["fetch", "--sizes", "1MiB", "--concurrency", "2", "--iters", "2", "--warmup", "0s", "--prepare"], "rr-fetch");
}

#[test]
fn ckpt_require_rdma_exits_3_after_a_full_fallback() {
    std::fs::create_dir_all(common::server().root.join("rr-ckpt")).unwrap();
    assert_require_rdma_exits_3(&["ckpt", "--sizes", "8MiB", "--chunk", "2MiB", "--methods", "flat", "--repeats", "1"], "rr-ckpt");
}

#[test]
fn weights_require_rdma_exits_3_after_a_full_fallback() {
    setup(&["weights", "--synth", "tiny", "--model", "m/tiny"], "rr-weights");
    assert_require_rdma_exits_3(&["weights", "--model", "m/tiny", "--verify"], "rr-weights");
}

#[test]
fn tokens_require_rdma_exits_3_after_a_full_fallback() {
    setup(&["ingest", "tokens", "--synthetic", "--total-bytes", "4MiB", "--seq-len", "256", "--shard-bytes", "1MiB", "--vocab", "1000"], "rr-tokens");
    assert_require_rdma_exits_3(&["tokens", "--fetch-workers", "2", "--run-bytes", "256KiB"], "rr-tokens");
}

#[test]
fn train_loader_only_require_rdma_exits_3_after_a_full_fallback() {
    setup(&["ingest", "raw", "--synthetic", "64", "--classes", "2", "--size", "32", "--samples-per-shard", "16"], "rr-train");
    assert_require_rdma_exits_3(
        &["train", "--loader-only", "--batch-size", "8", "--crop", "24", "--steps", "6", "--warmup", "1", "--fetch-workers", "1", "--prefetch-batches", "1"],
        "rr-train",
    );
}

#[test]
fn verify_over_local_with_require_rdma_says_fail_and_exits_3() {
    let tmp = tempfile::tempdir().unwrap();
    let o = s3rdma(&["verify", "--root", "store", "--prepare", "--sizes", "64KiB", "--require-rdma"], tmp.path());
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(3), "{out}{}", stderr(&o));
    assert!(out.contains("RESULT: FAIL") && out.contains("--require-rdma"), "{out}");
    let files: Vec<_> = std::fs::read_dir(tmp.path().join("results")).unwrap().map(|e| e.unwrap().path()).collect();
    let rec: Value = serde_json::from_slice(&std::fs::read(&files[0]).unwrap()).unwrap();
    assert_eq!(rec["rdma_witness"]["verdict"], "not-applicable");
    assert!(rec["rdma_witness"]["config"].is_object(), "every bench records the witness's set-up");
}

#[test]
fn a_failed_multi_rank_run_leaves_no_rank_markers_for_the_next_run_with_its_id() {
    let tmp = tempfile::tempdir().unwrap();
    // A restore with nothing saved fails on every rank after they met.
    let args = ["ckpt", "--ranks", "2", "--run-id", "reused", "--ops", "restore", "--sizes", "8MiB", "--dest", "host", "--barrier-timeout", "30s"];
    let o = s3rdma(&args, tmp.path());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("is incomplete (no manifest"), "{}", stderr(&o));
    let markers = tmp.path().join("s3rdma-data/s3rdma-bench/s3rdma-ranks/reused/epoch.json");
    assert!(!markers.exists(), "a stale epoch would make the next run with this --run-id wait at a barrier");
    // The next run with the same id meets at once and finishes.
    let t0 = std::time::Instant::now();
    let args =
        ["ckpt", "--ranks", "2", "--run-id", "reused", "--sizes", "8MiB", "--chunk", "2MiB", "--methods", "flat", "--dest", "host", "--barrier-timeout", "30s"];
    let o = s3rdma(&args, tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(t0.elapsed() < std::time::Duration::from_secs(25), "it waited for a barrier: {:?}", t0.elapsed());
}

#[test]
fn another_clients_rdma_never_verifies_a_run_that_fell_back() {
    // Scenario (c): the server's RDMA read counter grows by exactly this
    // run's payload (4 MiB: 2 streams x 2 GETs x 1 MiB) -- another client's
    // traffic -- while its HTTP sent bytes grow by the same: this client fell back.
    let payload = 4 * MIB;
    let rdma = |n: u64| {
        common::Answer::text(format!("minio_api_rdma_read_bytes_total{{server=\"n1:9000\"}} {n}\nminio_api_rdma_read_ops_total{{server=\"n1:9000\"}} 4\n"))
    };
    let sent = |n: u64| common::Answer::text(format!("minio_api_requests_traffic_sent_bytes{{server=\"n1:9000\",type=\"s3\"}} {n}\n"));
    let m = common::scripted_metrics(vec![("/rdma", vec![rdma(0), rdma(payload)]), ("/requests", vec![sent(0), sent(payload)])]);
    let tmp = tempfile::tempdir().unwrap();
    let (u1, u2) = (format!("{}/rdma", m.base), format!("{}/requests", m.base));
    let mut args: Vec<String> =
        ["fetch", "--sizes", "1MiB", "--concurrency", "2", "--iters", "2", "--warmup", "0s", "--prepare", "--dest", "host", "--require-rdma"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    args.extend(store_args("rdma", "rr-shared"));
    args.extend(["--metrics-url".into(), u1, "--metrics-url".into(), u2]);
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = s3rdma(&argv, tmp.path());
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let files: Vec<_> = std::fs::read_dir(tmp.path().join("results")).unwrap().map(|e| e.unwrap().path()).collect();
    let rec: Value = serde_json::from_slice(&std::fs::read(&files[0]).unwrap()).unwrap();
    assert_eq!(rec["rdma_witness"]["verdict"], "unverified", "{}", rec["rdma_witness"]);
    let reason = rec["rdma_witness"]["reason"].as_str().unwrap();
    assert!(reason.contains("evidence disagrees") && reason.contains(&payload.to_string()), "{reason}");
}

#[test]
fn require_rdma_stops_before_any_window_when_the_library_says_rdma_is_unavailable() {
    // Scenario (e), on every bench: the library's own word ends the run before
    // anything is timed; the record (rank 0) says why; exit 3.
    std::fs::create_dir_all(common::server().root.join("rr-unavail")).unwrap();
    for bench in [
        &["fetch", "--sizes", "1MiB", "--iters", "1", "--prepare"][..],
        &["ckpt", "--sizes", "8MiB"],
        &["weights", "--model", "m"],
        &["tokens"],
        &["train", "--loader-only"],
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let mut args: Vec<String> = bench.iter().map(|s| s.to_string()).collect();
        args.extend(store_args("rdma", "rr-unavail"));
        args.extend(["--dest".into(), "host".into(), "--require-rdma".into()]);
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = s3rdma_lib_says(&argv, tmp.path(), false);
        assert_eq!(o.status.code(), Some(3), "{}: {}", bench[0], stderr(&o));
        assert!(stderr(&o).contains("reports RDMA unavailable (miniocpp_rdma_available() = 0): nothing was measured"), "{}", stderr(&o));
        let files: Vec<_> = std::fs::read_dir(tmp.path().join("results")).unwrap().map(|e| e.unwrap().path()).collect();
        assert_eq!(files.len(), 1, "{}: the record says why", bench[0]);
        let rec: Value = serde_json::from_slice(&std::fs::read(&files[0]).unwrap()).unwrap();
        assert_eq!(rec["benchmark"], bench[0]);
        assert_eq!(rec["rdma_witness"]["verdict"], "unverified");
        assert!(rec["results"].is_null(), "nothing was measured");
    }
}
