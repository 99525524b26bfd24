//! ckpt: round trips, corruption, interrupted saves, ranks, bad input.

use super::*;

fn ckpt_record(o: &Output) -> Value {
    assert!(o.status.success(), "{}", stderr(o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&o.stdout)))
}

fn ckpt_row<'a>(rec: &'a Value, state: &str, method: &str, op: &str) -> &'a Value {
    rec["results"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["state"] == state && r["method"] == method && r["op"] == op)
        .unwrap_or_else(|| panic!("no row {state}/{method}/{op}"))
}

#[test]
fn ckpt_round_trips_on_local_and_http_with_both_methods() {
    let s = common::server();
    let tmp = tempfile::tempdir().unwrap();
    let common_args = ["--sizes", "24MiB", "--chunk", "4MiB", "--concurrency", "3", "--repeats", "2", "--json"];
    // local: the tool's own directory.
    let mut args = vec!["ckpt"];
    args.extend(common_args);
    let rec = ckpt_record(&s3rdma(&args, tmp.path()));
    assert_eq!(rec["benchmark"], "ckpt");
    assert_eq!(rec["backend"], "local");
    let save = ckpt_row(&rec, "synthetic-24MiB", "flat", "save");
    let bytes = save["bytes"].as_u64().unwrap();
    assert!(((24u64 << 20) * 97 / 100..=(24 << 20) * 101 / 100).contains(&bytes), "{bytes}");
    assert_eq!(save["chunks_per_rank"], bytes.div_ceil(4 << 20));
    assert_eq!(save["repeats"].as_array().unwrap().len(), 2);
    assert!(save["wall_s"]["median"].as_f64().unwrap() > 0.0);
    let restore = ckpt_row(&rec, "synthetic-24MiB", "flat", "restore");
    assert_eq!(restore["bytes"], bytes);
    assert_eq!(restore["verified"]["ok"], true);
    let n = restore["verified"]["tensors_checked"].as_u64().unwrap();
    assert!(n > 100, "{n} tensors");
    let st = ckpt_row(&rec, "synthetic-24MiB", "serialize-then-put", "restore");
    assert_eq!(st["verified"]["ok"], true);
    assert_eq!(st["verified"]["tensors_checked"], n);
    // The blob is header + packed tensors; the flat buffer has 512-byte alignment padding instead.
    let blob = ckpt_row(&rec, "synthetic-24MiB", "serialize-then-put", "save")["bytes"].as_u64().unwrap();
    assert!(blob.abs_diff(bytes) < bytes / 100, "blob {blob} vs flat {bytes}");
    // Nothing left behind without --keep.
    let dir = tmp.path().join("s3rdma-data/s3rdma-bench/ckpt/synthetic-24MiB");
    // Not even an empty directory: keys are flat, their directories go with them.
    assert!(!dir.exists(), "checkpoint directory left: {:?}", std::fs::read_dir(&dir).map(|d| d.count()));
    assert!(tmp.path().join("s3rdma-data/s3rdma-bench").is_dir(), "the bucket itself stays");

    // http: the in-process S3 server.
    std::fs::create_dir_all(s.root.join("ckpt-http")).unwrap();
    let mut args = http_args(&s.endpoint, "ckpt-http");
    args[0] = "ckpt";
    args.extend(["--workload", "resnet50", "--chunk", "64MiB", "--repeats", "1", "--json"]);
    let rec = ckpt_record(&s3rdma(&args, tmp.path()));
    assert_eq!(rec["backend"], "http");
    let save = ckpt_row(&rec, "resnet50", "flat", "save");
    assert_eq!(save["chunks_per_rank"], 4, "195 MiB in 64 MiB chunks");
    let restore = ckpt_row(&rec, "resnet50", "flat", "restore");
    // 161 parameters + 159 BatchNorm buffers + 161 momentum buffers.
    assert_eq!(restore["verified"]["tensors_checked"], 481);
    assert_eq!(restore["verified"]["ok"], true);
    assert_eq!(ckpt_row(&rec, "resnet50", "serialize-then-put", "restore")["verified"]["ok"], true);
}

#[test]
fn ckpt_detects_a_corrupt_chunk_and_refuses_a_missing_manifest() {
    let tmp = tempfile::tempdir().unwrap();
    let base = ["ckpt", "--sizes", "8MiB", "--chunk", "1MiB", "--methods", "flat", "--repeats", "1", "--keep"];
    let o = s3rdma(&base, tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let dir = tmp.path().join("s3rdma-data/s3rdma-bench/ckpt/synthetic-8MiB");
    let mut restore = base.to_vec();
    restore.extend(["--ops", "restore"]);
    // Untouched: a restore-only run regenerates the originals and verifies.
    let o = s3rdma(&restore, tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    // One flipped byte in one part: exit 4, naming the part.
    let part = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).find(|p| p.to_string_lossy().ends_with(".part00003")).unwrap();
    let mut bytes = std::fs::read(&part).unwrap();
    bytes[100] ^= 0x01;
    std::fs::write(&part, bytes).unwrap();
    let results = tmp.path().join("results");
    let before = results_in(&results).len();
    let o = s3rdma(&restore, tmp.path());
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert!(stderr(&o).contains("part00003' is corrupt"), "{}", stderr(&o));
    assert_eq!(results_in(&results).len(), before, "a failed restore wrote a record");
    // No manifest: no checkpoint.
    std::fs::remove_file(dir.join("rank00000.manifest.json")).unwrap();
    let o = s3rdma(&restore, tmp.path());
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("checkpoint ckpt/synthetic-8MiB/rank00000 is incomplete (no manifest"), "{}", stderr(&o));
}

#[test]
fn ckpt_interrupted_save_leaves_no_manifest_and_keeps_the_previous_generation() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s3rdma-data/s3rdma-bench/ckpt/synthetic-256MiB");
    let base = ["ckpt", "--sizes", "256MiB", "--chunk", "1MiB", "--concurrency", "1", "--methods", "flat", "--repeats", "1", "--keep"];
    let parts = |dir: &Path| -> Vec<String> {
        std::fs::read_dir(dir)
            .map_or(Vec::new(), |rd| rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).filter(|n| n.contains(".part")).collect())
    };
    let kill_after_first_part = |skip: &[String]| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_s3rdma")).args(base.iter().chain(&["--ops", "save"])).current_dir(tmp.path()).spawn().unwrap();
        let t0 = std::time::Instant::now();
        while !parts(&dir).iter().any(|p| !skip.contains(p)) {
            assert!(t0.elapsed().as_secs() < 60, "no part appeared");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        child.kill().unwrap();
        child.wait().unwrap();
    };
    // A fresh key, killed mid-save: parts but no manifest, and restore says so.
    kill_after_first_part(&[]);
    assert!(!dir.join("rank00000.manifest.json").exists(), "a killed save left a manifest");
    let mut restore = base.to_vec();
    restore.extend(["--ops", "restore"]);
    let o = s3rdma(&restore, tmp.path());
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("is incomplete (no manifest"), "{}", stderr(&o));
    // A complete save, then an overwrite killed mid-way: the old generation still restores.
    let o = s3rdma(&base, tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let committed = parts(&dir);
    kill_after_first_part(&committed);
    let o = s3rdma(&restore, tmp.path());
    assert!(o.status.success(), "the committed generation must survive an interrupted overwrite: {}", stderr(&o));
}

#[test]
fn ckpt_ranks_share_the_work_and_a_dead_rank_fails_the_run() {
    let s = common::server();
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(s.root.join("ckpt-ranks")).unwrap();
    let mut args = http_args(&s.endpoint, "ckpt-ranks");
    args[0] = "ckpt";
    args.extend(["--sizes", "16MiB", "--chunk", "2MiB", "--ranks", "2", "--repeats", "2", "--json"]);
    let rec = ckpt_record(&s3rdma(&args, tmp.path()));
    assert_eq!(rec["environment"]["ranks"]["world"], 2);
    let save = ckpt_row(&rec, "synthetic-16MiB", "flat", "save");
    assert_eq!(save["ranks"], 2);
    for rep in save["repeats"].as_array().unwrap() {
        let per: Vec<&Value> = rep["per_rank"].as_array().unwrap().iter().collect();
        assert_eq!(per.len(), 2);
        assert_eq!(per[0]["rank"], 0);
        assert_eq!(per[1]["rank"], 1);
        let sum: u64 = per.iter().map(|p| p["bytes"].as_u64().unwrap()).sum();
        assert_eq!(rep["bytes"], sum, "aggregate bytes = sum over ranks");
        let slowest = per.iter().map(|p| p["wall_s"].as_f64().unwrap()).fold(0.0, f64::max);
        assert_eq!(rep["wall_s"].as_f64().unwrap(), slowest);
    }
    let restore = ckpt_row(&rec, "synthetic-16MiB", "flat", "restore");
    assert_eq!(restore["verified"]["ok"], true);
    // The ranks' meeting, counted: what may have fallen inside each window is
    // declared there (rank 0's `go` PUT and listing, rank 1's marker-to-go
    // polls and figures PUT: at least 4), the rest lies outside.
    let coord = &rec["environment"]["ranks"]["coordination"];
    assert_eq!(coord["rendezvous"], "leader", "{coord}");
    let windows = rec["rdma_witness"]["windows"].as_array().unwrap();
    assert_eq!(windows.len(), 2 * 2 * 2, "save and restore, two methods, two repeats");
    let mut in_windows = 0;
    for w in windows {
        let c = w["coordination_requests"].as_u64().unwrap();
        assert!((4..100).contains(&c), "{w}");
        assert!(w["requests"].as_u64().unwrap() > c, "{w}");
        in_windows += c;
    }
    assert_eq!(coord["requests_in_windows"], in_windows);
    assert!(coord["requests"].as_u64().unwrap() > in_windows, "{coord}");
    // Each rank saved its own half: two manifests' worth of tensors.
    let one = ckpt_record(&s3rdma(&["ckpt", "--sizes", "8MiB", "--methods", "flat", "--repeats", "1", "--json"], tmp.path()));
    assert_eq!(
        restore["verified"]["tensors_checked"].as_u64().unwrap(),
        2 * ckpt_row(&one, "synthetic-8MiB", "flat", "restore")["verified"]["tensors_checked"].as_u64().unwrap()
    );
    // The meeting objects are gone (s3s-fs may leave empty directories).
    fn files_under(p: &Path) -> usize {
        std::fs::read_dir(p).map_or(0, |rd| rd.map(|e| e.unwrap().path()).map(|p| if p.is_dir() { files_under(&p) } else { 1 }).sum())
    }
    assert_eq!(files_under(&s.root.join("ckpt-ranks/s3rdma-ranks")), 0, "barrier objects left behind");

    // A rank that fails stops the others at once, with its exit code and no record.
    let t0 = std::time::Instant::now();
    let o = Command::new(env!("CARGO_BIN_EXE_s3rdma"))
        .args(["ckpt", "--sizes", "8MiB", "--ranks", "2", "--repeats", "1"])
        .current_dir(tmp.path())
        .env("S3RDMA_TEST_FAIL_RANK", "1")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("failure injected") && stderr(&o).contains("rank 1 of 2 failed"), "{}", stderr(&o));
    assert!(t0.elapsed().as_secs() < 60);
    // Under a launcher, a rank whose peers never come fails after --barrier-timeout, naming them.
    let o = Command::new(env!("CARGO_BIN_EXE_s3rdma"))
        .args(["ckpt", "--sizes", "8MiB", "--repeats", "1", "--barrier-timeout", "1s", "--results-dir", "lonely"])
        .current_dir(tmp.path())
        .env("RANK", "0")
        .env("WORLD_SIZE", "2")
        .env("TORCHELASTIC_RUN_ID", "lonely-run")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("ranks 1 did not reach step"), "{}", stderr(&o));
    assert!(results_in(&tmp.path().join("lonely")).is_empty());
}

#[test]
fn ckpt_bad_inputs_are_usage_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    for (args, needle) in [
        (vec!["ckpt", "--workload", "resnet51"], "known workloads are resnet50"),
        (vec!["ckpt", "--chunk", "4GiB"], "below 4GiB"),
        (vec!["ckpt", "--chunk", "1KiB"], "from 1MiB"),
        (vec!["ckpt", "--sizes", "100KiB"], "at least 1MiB"),
        (vec!["ckpt", "--sizes", "2MiB", "--ranks", "4"], "per rank (4 ranks)"),
        (vec!["ckpt", "--methods", "pickle"], "invalid value 'pickle'"),
        (vec!["ckpt", "--run-id", "a/b", "--sizes", "1MiB"], "--run-id 'a/b'"),
        (vec!["ckpt", "--dest", "device", "--sizes", "1MiB"], "--dest device"),
        // Refused from the flags, before a tensor list of that size is built
        // (it grows with the size: 2PiB ran the machine out of memory).
        (vec!["ckpt", "--sizes", "2PiB", "--methods", "async", "--dest", "host"], "lower --sizes"),
        (vec!["ckpt", "--sizes", "18446744073709551615", "--dest", "host"], "lower --sizes"),
        (vec!["ckpt", "--stage-chunk", "1"], "stage chunk '1' must be between 64KiB and 1GiB"),
    ] {
        let o = s3rdma(&args, tmp.path());
        let code = if needle == "--dest device" { 1 } else { 2 };
        if needle == "--dest device" && o.status.success() {
            eprintln!("SKIP --dest device error check: this host has a GPU");
            continue;
        }
        assert_fails(&o, code, needle, &results);
    }
}

#[test]
fn ckpt_restore_checks_the_tensor_set_and_the_seed_and_keeps_what_it_did_not_save() {
    let tmp = tempfile::tempdir().unwrap();
    let base = ["ckpt", "--sizes", "4MiB", "--chunk", "1MiB", "--methods", "flat", "--repeats", "1"];
    let mut save = base.to_vec();
    save.push("--keep");
    assert!(s3rdma(&save, tmp.path()).status.success());
    let mut restore = base.to_vec();
    restore.extend(["--ops", "restore"]);
    // A restore-only run verifies and leaves the checkpoint it did not save.
    let o = s3rdma(&restore, tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let o = s3rdma(&restore, tmp.path());
    assert!(o.status.success(), "second restore-only run: {}", stderr(&o));
    // A wrong seed is named as such, not reported as corruption.
    let mut seeded = restore.clone();
    seeded.extend(["--seed", "7"]);
    let o = s3rdma(&seeded, tmp.path());
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("was saved with --seed 0"), "{}", stderr(&o));
    // A manifest that reshapes one tensor or loses one fails verification (exit 4).
    let manifest = tmp.path().join("s3rdma-data/s3rdma-bench/ckpt/synthetic-4MiB/rank00000.manifest.json");
    let original = std::fs::read(&manifest).unwrap();
    let mut m: Value = serde_json::from_slice(&original).unwrap();
    let shape = m["tensors"][0]["shape"].as_array().unwrap().clone();
    assert_eq!(shape.len(), 2);
    m["tensors"][0]["shape"] = Value::Array(vec![shape[1].clone(), shape[0].clone()]);
    std::fs::write(&manifest, serde_json::to_vec(&m).unwrap()).unwrap();
    let o = s3rdma(&restore, tmp.path());
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    let mut m: Value = serde_json::from_slice(&original).unwrap();
    m["tensors"].as_array_mut().unwrap().pop();
    std::fs::write(&manifest, serde_json::to_vec(&m).unwrap()).unwrap();
    let o = s3rdma(&restore, tmp.path());
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert!(stderr(&o).contains("differ from the originals"), "{}", stderr(&o));
    // A truncated chunk is damage too: exit 4.
    std::fs::write(&manifest, &original).unwrap();
    let dir = manifest.parent().unwrap();
    let part = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).find(|p| p.to_string_lossy().ends_with(".part00001")).unwrap();
    let bytes = std::fs::read(&part).unwrap();
    std::fs::write(&part, &bytes[..1000]).unwrap();
    let o = s3rdma(&restore, tmp.path());
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert!(stderr(&o).contains("holds 1000 bytes, its manifest says"), "{}", stderr(&o));
    // Too much state for this host's memory: refused before allocating anything.
    let o = s3rdma(&["ckpt", "--dest", "host", "--sizes", "1TiB"], tmp.path());
    assert_fails(&o, 2, "of host memory", &tmp.path().join("none"));
}

#[test]
fn ckpt_on_a_fresh_local_root_creates_its_bucket() {
    // A fresh local root without the bucket directory: a save needs no mkdir by hand.
    let tmp = tempfile::tempdir().unwrap();
    let o = s3rdma(
        &["ckpt", "--root", "fresh", "--sizes", "8MiB", "--chunk", "2MiB", "--methods", "flat", "--repeats", "1", "--dest", "host", "--json"],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let rec: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(rec["results"]["rows"].as_array().unwrap().iter().any(|r| r["op"] == "restore" && r["verified"]["ok"] == true), "{rec}");
    assert!(tmp.path().join("fresh/s3rdma-bench").is_dir());
}
