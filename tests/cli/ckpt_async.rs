//! ckpt --methods async (docs/04-checkpoint-benchmark.md): the stall is the snapshot, the
//! save is durable only when its manifest commits, and a save killed after
//! its snapshot leaves no checkpoint a restore would accept.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::*;
use common::faultproxy::{Fault, FaultProxy, Rule};

fn row<'a>(rec: &'a Value, method: &str, op: &str) -> &'a Value {
    rec["results"]["rows"].as_array().unwrap().iter().find(|r| r["method"] == method && r["op"] == op).unwrap_or_else(|| panic!("no row {method}/{op}"))
}

/// Every rank's figures of every repeat of a row.
fn per_rank(row: &Value) -> Vec<&Value> {
    row["repeats"].as_array().unwrap().iter().flat_map(|r| r["per_rank"].as_array().unwrap()).collect()
}

#[test]
fn an_async_save_stalls_for_its_snapshot_and_restores_verified() {
    let s = common::server();
    std::fs::create_dir_all(s.root.join("ckpt-async")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let flags = ["--sizes", "48MiB", "--chunk", "4MiB", "--concurrency", "4", "--repeats", "2", "--methods", "flat,async", "--json"];
    let mut local = vec!["ckpt"];
    local.extend(flags);
    let mut http = http_args(&s.endpoint, "ckpt-async");
    http[0] = "ckpt";
    http.extend(flags);
    for args in [local, http] {
        let rec = record(&s3rdma(&args, tmp.path()));
        let save = row(&rec, "async", "save");
        assert_eq!(save["chunks_per_rank"], row(&rec, "flat", "save")["chunks_per_rank"], "async writes flat's format");
        for f in per_rank(save) {
            // The stall is the snapshot, and the save is durable later.
            assert_eq!(f["stall_s"], f["flatten_s"], "{f}");
            let (stall, wall) = (f["stall_s"].as_f64().unwrap(), f["wall_s"].as_f64().unwrap());
            assert!(stall > 0.0 && stall < wall, "stall {stall} s, durable after {wall} s");
        }
        // Every other operation stalls training for all of its time.
        for (m, op) in [("flat", "save"), ("flat", "restore"), ("async", "restore")] {
            for f in per_rank(row(&rec, m, op)) {
                assert_eq!(f["stall_s"], f["wall_s"], "{m} {op}: {f}");
            }
        }
        let restore = row(&rec, "async", "restore");
        assert_eq!(restore["verified"]["ok"], true, "{restore}");
        assert!(restore["verified"]["tensors_checked"].as_u64().unwrap() > 100);
        assert_eq!(rec["params"]["methods"], serde_json::json!(["flat", "async"]));
        // The next step overwrote the state during persistence and the restore still matched the snapshot.
        assert!(rec["params"]["async_next_step"].as_str().is_some_and(|s| s.contains("every byte of every tensor inverted")), "{}", rec["params"]);
    }
}

/// `--train-load` (the CPU stand-in here): every save's record carries the
/// steps around it, a sync save blocks training for all of it and steps
/// only after, an async one steps while it persists; restores have no
/// training view; a training load without a save is refused.
#[test]
fn a_training_load_beside_saves_measures_what_they_block() {
    let s = common::server();
    std::fs::create_dir_all(s.root.join("ckpt-train")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let flags = ["--sizes", "48MiB", "--chunk", "4MiB", "--repeats", "2", "--methods", "flat,async", "--train-load", "--train-gemm", "96", "--json"];
    let mut local = vec!["ckpt"];
    local.extend(flags);
    let mut http = http_args(&s.endpoint, "ckpt-train");
    http[0] = "ckpt";
    http.extend(flags);
    for args in [local, http] {
        let rec = record(&s3rdma(&args, tmp.path()));
        let tl = &rec["params"]["train_load"];
        assert_eq!(tl["gemm_side"], 96);
        assert!(tl["device"].as_str().unwrap().starts_with("cpu stand-in"), "{tl}");
        for m in ["flat", "async"] {
            let save = row(&rec, m, "save");
            for f in per_rank(save) {
                let t = &f["train"];
                let (stall, wall) = (t["stall_s"].as_f64().unwrap(), f["wall_s"].as_f64().unwrap());
                assert!(t["steps_before"].as_u64().unwrap() >= 10 && t["steps_after"].as_u64().unwrap() >= 10, "{t}");
                assert!(t["reference_step_s"].as_f64().unwrap() > 0.0 && t["blocked_s"].as_f64().unwrap() >= 0.0, "{t}");
                let steps = t["steps"].as_u64().unwrap();
                assert!(steps >= t["steps_before"].as_u64().unwrap() + t["steps_after"].as_u64().unwrap() + t["steps_during_persistence"].as_u64().unwrap());
                if m == "flat" {
                    // Training waits for the whole save, and steps only once it is durable.
                    assert!(stall >= wall, "flat: stall {stall} s covers the save's {wall} s");
                    assert_eq!(t["steps_during_persistence"], 0, "{t}");
                } else {
                    // Training resumes at the snapshot, before the save is durable.
                    assert!(stall < wall, "async: stall {stall} s, durable after {wall} s");
                }
            }
            assert!(save["train"]["blocked_s"]["median"].as_f64().is_some(), "{save}");
            assert!(row(&rec, m, "restore").get("train").is_none(), "a restore has no training view");
        }
    }
    // report --plot draws blocked seconds against the checkpoint size, a line per (backend, method).
    let recs: Vec<String> = results_in(&tmp.path().join("results")).iter().map(|p| p.to_str().unwrap().to_string()).collect();
    assert_eq!(recs.len(), 2, "{recs:?}");
    let svg = tmp.path().join("blocked.svg");
    let mut args = vec!["report", "--plot", svg.to_str().unwrap()];
    args.extend(recs.iter().map(String::as_str));
    let o = s3rdma(&args, tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let svg = std::fs::read_to_string(svg).unwrap();
    assert!(svg.contains("seconds a save blocks training vs checkpoint size"), "{svg}");
    for line in ["local flat", "local async", "http flat", "http async"] {
        assert!(svg.contains(line), "no line {line}");
    }
    let o = s3rdma(&["ckpt", "--train-load", "--ops", "restore", "--results-dir", "r"], tmp.path());
    assert_fails(&o, 2, "add save to --ops", &tmp.path().join("r"));
    let o = s3rdma(&["ckpt", "--train-gemm", "64", "--results-dir", "r"], tmp.path());
    assert_fails(&o, 2, "--train-load", &tmp.path().join("r"));
    let o = s3rdma(&["ckpt", "--train-load", "--train-gemm", "0", "--results-dir", "r"], tmp.path());
    assert_fails(&o, 2, "from 1 to 65536", &tmp.path().join("r"));
}

/// Killed while persisting (after the snapshot, with chunks in flight): no
/// manifest, so a restore refuses the checkpoint as incomplete.
#[test]
fn an_async_save_killed_after_its_snapshot_leaves_no_manifest() {
    let s = common::server();
    let bucket = "ckpt-async-kill";
    std::fs::create_dir_all(s.root.join(bucket)).unwrap();
    let proxy = FaultProxy::start(&s.endpoint);
    // Two chunks land, every later PUT hangs: the save is mid-persistence.
    proxy.set(Rule { method: Some("PUT"), path_contains: Some(format!("/{bucket}/")), skip: 2, count: None, fault: Fault::StallHead });
    let tmp = tempfile::tempdir().unwrap();
    let base = [
        "ckpt",
        "--backend",
        "http",
        "--access-key",
        common::ACCESS_KEY,
        "--secret-key",
        common::SECRET_KEY,
        "--bucket",
        bucket,
        "--sizes",
        "16MiB",
        "--chunk",
        "1MiB",
        "--concurrency",
        "2",
        "--methods",
        "async",
        "--repeats",
        "1",
        "--keep",
    ];
    let mut save: Vec<&str> = base.to_vec();
    save.extend(["--ops", "save", "--endpoint", &proxy.endpoint]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_s3rdma"))
        .args(&save)
        .current_dir(tmp.path())
        .env_remove("AWS_ENDPOINT_URL")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let stalled = || proxy.log().iter().filter(|l| l.contains(" PUT ") && l.contains(".part")).count() >= 3;
    while !stalled() {
        assert!(t0.elapsed() < Duration::from_secs(30), "no chunk PUT reached the proxy: {:?}", proxy.log());
        assert!(child.try_wait().unwrap().is_none(), "the save ended before it was killed: {:?}", proxy.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let files = walk(&s.root.join(bucket));
    assert!(files.iter().any(|p| p.contains(".part")), "two chunks landed before the kill: {files:?}");
    assert!(files.iter().all(|p| !p.ends_with(".manifest.json")), "a killed save left a manifest: {files:?}");
    // The checkpoint is not there as far as a restore is concerned.
    let mut restore: Vec<&str> = base.to_vec();
    restore.extend(["--ops", "restore", "--endpoint", &s.endpoint]);
    let o = s3rdma(&restore, tmp.path());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("is incomplete (no manifest"), "{}", stderr(&o));
}
