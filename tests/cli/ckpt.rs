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
    // The fix named is one that leaves a checkpoint to restore.
    assert!(stderr(&o).contains("ckpt --ops save --keep"), "{}", stderr(&o));
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
    // A size given twice runs once, as a method given twice does.
    let twice = ["ckpt", "--sizes", "1MiB,1MiB", "--methods", "flat,flat", "--ops", "save", "--repeats", "1", "--json", "--root", "twice"];
    assert_eq!(record(&s3rdma(&twice, tmp.path()))["results"]["rows"].as_array().unwrap().len(), 1);
    // A save alone without --keep says that its checkpoint went.
    let o = s3rdma(&[&base[..], &["--ops", "save"]].concat(), tmp.path());
    assert!(o.status.success() && stderr(&o).contains("removed after the run; save with --keep to restore it later"), "{}", stderr(&o));
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
    // Another state's checkpoint (saved by 2 ranks, each its share; restored
    // by 1) is a flag to fix, named before a read, not damage.
    let mut ranked = save.clone();
    ranked.extend(["--ranks", "2", "--ops", "save", "--prefix", "ckpt-2r"]);
    assert!(s3rdma(&ranked, tmp.path()).status.success());
    let mut one = restore.clone();
    one.extend(["--prefix", "ckpt-2r"]);
    let o = s3rdma(&one, tmp.path());
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("it was saved from another state; restore it with the --workload/--sizes/--ranks it was saved with"), "{}", stderr(&o));
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
    let n = m["tensors"].as_array().unwrap().len();
    m["tensors"].as_array_mut().unwrap().pop();
    std::fs::write(&manifest, serde_json::to_vec(&m).unwrap()).unwrap();
    let o = s3rdma(&restore, tmp.path());
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("differ from the originals") && stderr(&o).contains(&format!("{} tensors in the checkpoint, {n} in this run's state", n - 1)),
        "{}",
        stderr(&o)
    );
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

/// Whether this process may drop the host's page cache (root, /proc/sys writable):
/// what `--cold` then uses first.
fn may_drop_caches() -> bool {
    std::fs::OpenOptions::new().write(true).open("/proc/sys/vm/drop_caches").is_ok()
}

#[test]
// One scenario, read top to bottom: its steps share the run's state.
#[allow(clippy::too_many_lines)]
fn ckpt_cold_restores_read_from_the_device_and_say_how() {
    // On the build's disk (not a tmpfs /tmp, whose pages are its storage).
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let base = ["ckpt", "--sizes", "8MiB", "--chunk", "1MiB", "--methods", "flat", "--repeats", "2", "--dest", "host"];
    let run = |extra: &[&str]| {
        let mut args = base.to_vec();
        args.extend(extra);
        args.push("--json");
        ckpt_record(&s3rdma(&args, tmp.path()))
    };
    let restore_of = |rec: &Value| ckpt_row(rec, "synthetic-8MiB", "flat", "restore").clone();
    // Each repeat's own figures say how that restore met the cache.
    let per_rank_methods = |row: &Value| -> Vec<String> {
        row["repeats"].as_array().unwrap().iter().map(|r| r["per_rank"][0]["restore_cache"]["method"].as_str().unwrap().to_string()).collect()
    };

    // Warm (the default): the save left every page of the checkpoint cached.
    let rec = run(&[]);
    assert_eq!(rec["results"]["aggregation"], "MLPerf Storage: total bytes / slowest rank");
    let warm = restore_of(&rec);
    assert_eq!((warm["cache"].as_str(), warm["restore_cache"].as_str()), (Some("warm"), Some("warm")));
    let files = warm["file_bytes"].as_u64().unwrap();
    assert!(files > warm["bytes"].as_u64().unwrap(), "chunks + manifest: {warm}");
    let cached = warm["cached_bytes"].as_u64().unwrap();
    assert!(cached * 10 >= files * 9, "a warm restore found {cached} of {files} bytes cached");
    assert!(ckpt_row(&rec, "synthetic-8MiB", "flat", "save")["restore_cache"].is_null());

    // --cold: the first method this process is permitted, checked by mincore.
    let mut args = base.to_vec();
    args.extend(["--cold", "--results-dir", "cold"]);
    let o = s3rdma(&args, tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let table = String::from_utf8_lossy(&o.stdout).into_owned();
    let records = results_in(&tmp.path().join("cold"));
    assert_eq!(records.len(), 1);
    let rec: Value = serde_json::from_slice(&std::fs::read(&records[0]).unwrap()).unwrap();
    assert_eq!(rec["params"]["restore_cache"], "cold", "{}", rec["params"]);
    let cold = restore_of(&rec);
    let (method, first_passed_over) =
        if may_drop_caches() { ("dropped (drop_caches)", None) } else { ("evicted (fadvise DONTNEED)", Some("drop_caches: /proc/sys/vm/drop_caches")) };
    assert_eq!((cold["cache"].as_str(), cold["restore_cache"].as_str()), (Some("cold"), Some(method)), "{cold}");
    assert_eq!(per_rank_methods(&cold), vec![method; 2], "every repeat is made cold");
    assert_eq!(cold["cached_bytes"], 0, "{cold}");
    assert_eq!(cold["verified"]["ok"], true);
    let passed = &cold["repeats"][0]["per_rank"][0]["restore_cache"]["passed_over"];
    match first_passed_over {
        Some(p) => assert!(passed[0].as_str().unwrap().starts_with(p), "{passed}"),
        None => assert_eq!(passed.as_array().unwrap().len(), 0, "{passed}"),
    }
    let row = table.lines().find(|l| l.contains("restore") && l.contains("synthetic-8MiB")).unwrap_or_else(|| panic!("no restore line: {table}"));
    assert!(row.contains(&format!("cold: {method}, 0 % cached")), "{table}");
    assert!(table.contains("GB/s = MLPerf Storage: total bytes / slowest rank"), "{table}");

    // From fadvise on (a shared node's choice, root or not), over 2 ranks:
    // each evicts its own shard, nothing is left cached, and a repeat's GB/s
    // is all ranks' bytes over the slowest rank's wall (MLPerf Storage).
    let cold = restore_of(&run(&["--restore-cache", "fadvise", "--ranks", "2"]));
    assert_eq!((cold["restore_cache"].as_str(), cold["cached_bytes"].as_u64()), (Some("evicted (fadvise DONTNEED)"), Some(0)), "{cold}");
    for rep in cold["repeats"].as_array().unwrap() {
        let per: Vec<&Value> = rep["per_rank"].as_array().unwrap().iter().collect();
        assert_eq!(per.len(), 2);
        assert!(per.iter().all(|p| p["restore_cache"]["method"] == "evicted (fadvise DONTNEED)" && p["restore_cache"]["cached_bytes"] == 0), "{rep}");
        let slowest = per.iter().map(|p| p["wall_s"].as_f64().unwrap()).fold(0.0, f64::max);
        let bytes: u64 = per.iter().map(|p| p["bytes"].as_u64().unwrap()).sum();
        assert_eq!(rep["wall_s"].as_f64().unwrap(), slowest);
        let gbps = rep["throughput_gbps"].as_f64().unwrap();
        assert!((gbps - bytes as f64 / slowest / 1e9).abs() <= 1e-9 * gbps, "{gbps} vs {bytes} B / {slowest} s");
    }
    // O_DIRECT alone: the pages stay cached, the reads go around them, and the tensors still verify.
    let cold = restore_of(&run(&["--restore-cache", "direct"]));
    assert_eq!((cold["cache"].as_str(), cold["restore_cache"].as_str()), (Some("cold"), Some("bypassed (O_DIRECT)")), "{cold}");
    assert_eq!(cold["verified"]["ok"], true);
    for rep in cold["repeats"].as_array().unwrap() {
        // Every byte of the checkpoint (chunks and manifest) was read with O_DIRECT, none through the cache.
        let c = &rep["per_rank"][0]["restore_cache"];
        assert_eq!((c["direct_read_bytes"].as_u64(), c["direct_fallback_bytes"].as_u64()), (Some(files), Some(0)), "{c}");
    }

    // Over http the cache is the server's: said, not pretended.
    let s = common::server();
    std::fs::create_dir_all(s.root.join("ckpt-cold")).unwrap();
    let mut args = http_args(&s.endpoint, "ckpt-cold");
    args[0] = "ckpt";
    args.extend(["--sizes", "4MiB", "--chunk", "1MiB", "--methods", "flat", "--repeats", "1", "--cold", "--json"]);
    let rec = ckpt_record(&s3rdma(&args, tmp.path()));
    let r = ckpt_row(&rec, "synthetic-4MiB", "flat", "restore");
    assert_eq!((r["cache"].as_str(), r["restore_cache"].as_str()), (Some("unknown"), Some("server cache not controlled")), "{r}");
    assert!(r["cached_bytes"].is_null() && r["file_bytes"].is_null());

    // Bad combinations are usage errors naming the flags.
    let none = tmp.path().join("none");
    let o = s3rdma(&["ckpt", "--sizes", "4MiB", "--cold", "--ops", "save", "--results-dir", "none"], tmp.path());
    assert_fails(&o, 2, "add restore to --ops", &none);
    let o = s3rdma(&["ckpt", "--sizes", "4MiB", "--cold", "--restore-cache", "warm", "--results-dir", "none"], tmp.path());
    assert_fails(&o, 2, "--cold", &none);
    let o = s3rdma(&["ckpt", "--sizes", "4MiB", "--restore-cache", "lukewarm", "--results-dir", "none"], tmp.path());
    assert_fails(&o, 2, "invalid value 'lukewarm'", &none);
    let o = s3rdma(&["ckpt", "--sizes", "4MiB", "--chunk", "1048577", "--restore-cache", "direct", "--results-dir", "none"], tmp.path());
    assert_fails(&o, 2, "needs --chunk to be a multiple of 4KiB", &none);
}
