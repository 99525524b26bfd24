//! fetch: cells, iterations, bad credentials, endpoints, buckets and objects, usage errors, --procs.

use super::*;

#[test]
fn fetch_over_http_with_prepare_reports_every_cell() {
    let s = common::server();
    let tmp = tempfile::tempdir().unwrap();
    let mut args = http_args(&s.endpoint, "cli-fetch-http");
    args.extend([
        "--sizes",
        "1MiB,3MB",
        "--concurrency",
        "1,3",
        "--duration",
        "300ms",
        "--warmup",
        "0s",
        "--part-size",
        "1MiB",
        "--objects",
        "2",
        "--prepare",
        "--json",
        "--tag",
        "t",
    ]);
    let o = s3rdma(&args, tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let rec: Value = serde_json::from_slice(&o.stdout).expect("--json prints the record");
    assert_eq!(rec["benchmark"], "fetch");
    assert_eq!(rec["backend"], "http");
    assert_eq!(rec["schema_version"], 4);
    assert_eq!(rec["rdma_witness"]["verdict"], "unverified");
    assert_eq!(rec["environment"]["store"]["endpoint"], s.endpoint.as_str());
    assert_eq!(rec["environment"]["store"]["get_path"], "direct", "plain http:// defaults to the direct GET path");
    let cells = rec["results"].as_array().unwrap();
    assert_eq!(cells.len(), 4);
    // Every window names its cell and repeat (schema 3): the cell's own GETs.
    let windows = rec["rdma_witness"]["windows"].as_array().unwrap();
    assert_eq!(windows.len(), 4, "one repeat per cell");
    for w in windows {
        let c = &cells[w["id"]["cell"].as_u64().unwrap() as usize];
        assert_eq!(w["id"]["repeat"], 1);
        assert_eq!(w["payload_read_bytes"], c["repeats"][0]["bytes"], "{w}");
    }
    let mut seen = Vec::new();
    for c in cells {
        let size = c["size_bytes"].as_u64().unwrap();
        seen.push((size, c["concurrency"].as_u64().unwrap()));
        let r = &c["repeats"][0];
        let ops = r["ops"].as_u64().unwrap();
        assert!(ops >= 1);
        assert_eq!(r["bytes"].as_u64().unwrap(), ops * size, "whole objects only");
        assert!(r["throughput_gbps"].as_f64().unwrap() > 0.0);
        let l = &r["latency_ms"];
        assert!(l["min_ms"].as_f64().unwrap() <= l["p50_ms"].as_f64().unwrap());
        assert!(l["p50_ms"].as_f64().unwrap() <= l["p99_ms"].as_f64().unwrap());
        assert!(l["p99_ms"].as_f64().unwrap() <= l["max_ms"].as_f64().unwrap());
        assert!(r["ttfb_ms"]["p50_ms"].as_f64().unwrap() <= l["max_ms"].as_f64().unwrap());
        assert!(r["client_cpu_cores"].as_f64().unwrap() > 0.0);
        assert_eq!(r["store_stats"]["bytes_http"].as_u64().unwrap(), ops * size);
    }
    assert_eq!(seen, vec![(1 << 20, 1), (1 << 20, 3), (3_000_000, 1), (3_000_000, 3)]);
    // One result file, named as documented, identical to stdout, no credentials.
    let files = results_in(&tmp.path().join("results"));
    assert_eq!(files.len(), 1);
    let name = files[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("fetch-http-") && name.ends_with("-t.json"), "{name}");
    let text = std::fs::read_to_string(&files[0]).unwrap();
    assert!(!text.contains(common::SECRET_KEY) && !text.contains(common::ACCESS_KEY));
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), rec);
    report_reads_each_cell(&files[0], &rec, tmp.path());
    // The objects were written with random bytes, and the second run reuses them without --prepare.
    let obj = s.root.join("cli-fetch-http/fetch/3000000/obj-000001");
    let data = std::fs::read(obj).unwrap();
    assert_eq!(data.len(), 3_000_000);
    assert!(data.iter().filter(|&&b| b == 0).count() < 3_000_000 / 128, "payload looks like zeros");
    let mut again = http_args(&s.endpoint, "cli-fetch-http");
    again.extend(["--sizes", "3MB", "--concurrency", "2", "--iters", "2", "--warmup", "0s", "--objects", "2"]);
    let o = s3rdma(&again, tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(table.contains("TTFB p50 ms") && table.contains("3MB"), "{table}");
}

/// `report` reads a fetch record through the writer's own type: a row per
/// cell, with the cell's own figure, dimensions and verdict.
fn report_reads_each_cell(file: &Path, rec: &Value, dir: &Path) {
    // The whole record reads back as the writer's types, environment included.
    let typed: s3rdma::record::RunRecord = serde_json::from_value(rec.clone()).unwrap();
    let env = &typed.environment;
    assert_eq!((env.dest.as_deref(), env.ranks.as_ref().map(|r| r.world)), (Some("host"), Some(1)));
    let in_windows = &env.store_stats.as_ref().unwrap().in_windows;
    assert!(in_windows["bytes_http"] > 0, "{in_windows:?}");
    let cells: Vec<s3rdma::bench::fetch::CellResult> = serde_json::from_value(typed.results).unwrap();
    assert_eq!(cells.len(), 4);
    // report reads the record through the writer's own type: a row per cell, the cell's own figures.
    let o = s3rdma(&["report", "--format", "json", file.to_str().unwrap()], dir);
    let rows: Value = serde_json::from_str(&ok(&o)).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 4, "{rows:?}");
    for ((row, cell), stored) in rows.iter().zip(rec["results"].as_array().unwrap()).zip(rec["rdma_witness"]["cells"].as_array().unwrap()) {
        assert_eq!(row["value"]["median"], cell["repeats"][0]["throughput_gbps"], "one repeat: its figure");
        assert_eq!(row["wall_s"]["median"], cell["repeats"][0]["wall_s"], "and its wall time");
        assert_eq!(row["dims"]["concurrency"], cell["concurrency"].to_string().as_str());
        assert_eq!(row["dims"]["procs"], "1");
        assert_eq!(
            (row["verdict"].as_str(), stored["verdict"].as_str()),
            (Some("unverified"), Some("unverified")),
            "plain http: the cell's own windows, judged again"
        );
    }
}

#[test]
fn fetch_local_round_trip_counts_exact_iterations() {
    let tmp = tempfile::tempdir().unwrap();
    // No --prepare: the default local directory is the tool's own and is created.
    let o = s3rdma(&["fetch", "--sizes", "64KiB,1MB", "--concurrency", "1,4", "--iters", "3", "--warmup", "0s", "--repeats", "2", "--json"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let rec: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(rec["backend"], "local");
    for c in rec["results"].as_array().unwrap() {
        let (size, conc) = (c["size_bytes"].as_u64().unwrap(), c["concurrency"].as_u64().unwrap());
        assert_eq!(c["repeats"].as_array().unwrap().len(), 2);
        for r in c["repeats"].as_array().unwrap() {
            assert_eq!(r["ops"].as_u64().unwrap(), 3 * conc);
            assert_eq!(r["bytes"].as_u64().unwrap(), 3 * conc * size);
            assert!(r["ttfb_ms"].is_null(), "no TTFB on local");
        }
        let s = &c["summary"]["throughput_gbps"];
        assert!(s["min"].as_f64().unwrap() <= s["median"].as_f64().unwrap());
        assert!(s["median"].as_f64().unwrap() <= s["max"].as_f64().unwrap());
    }
    // The default root and bucket were created under the working directory.
    let obj = tmp.path().join("s3rdma-data/s3rdma-bench/fetch/65536/obj-000000");
    assert_eq!(std::fs::metadata(obj).unwrap().len(), 65536);
    assert_eq!(results_in(&tmp.path().join("results")).len(), 1);
}

#[test]
fn wrong_credentials_fail_cleanly() {
    let s = common::server();
    let tmp = tempfile::tempdir().unwrap();
    let o = s3rdma(
        &["fetch", "--backend", "http", "--endpoint", &s.endpoint, "--access-key", common::ACCESS_KEY, "--secret-key", "wrong-secret-key-xyz", "--prepare"],
        tmp.path(),
    );
    assert_fails(&o, 1, "access denied", &tmp.path().join("results"));
    assert!(!stderr(&o).contains("wrong-secret-key-xyz"));
    assert_eq!(stderr(&o).trim().lines().count(), 1, "{}", stderr(&o));
}

#[test]
fn unreachable_endpoint_fails_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    let ep = format!("http://127.0.0.1:{}", common::dead_port());
    let mut args = http_args(&ep, "whatever-bucket");
    args.extend(["--attempts", "1"]);
    let o = s3rdma(&args, tmp.path());
    assert_fails(&o, 1, "cannot reach", &tmp.path().join("results"));
    assert!(stderr(&o).contains(&ep) && stderr(&o).contains("--endpoint"));
}

/// A server that accepts connections and never answers: the error names the
/// operation, the bucket or key, how long was waited and the flags that bound
/// it, never "cannot reach".
#[test]
fn a_server_that_never_answers_is_a_timeout_naming_operation_and_flags() {
    let tmp = tempfile::tempdir().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let ep = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in listener.incoming().flatten() {
            held.push(c); // accepted, read by nobody, answered never
        }
    });
    let mut args = http_args(&ep, "silent-bucket");
    args.extend(["--attempts", "1", "--read-timeout", "300ms"]);
    let t0 = std::time::Instant::now();
    let o = s3rdma(&args, tmp.path());
    assert_fails(&o, 1, "timed out", &tmp.path().join("results"));
    let err = stderr(&o);
    assert!(!err.contains("cannot reach"), "{err}");
    assert!(err.contains("'silent-bucket'") && err.contains("300ms (--read-timeout)") && err.contains("1 attempt(s) (--attempts)"), "{err}");
    assert!(t0.elapsed() < std::time::Duration::from_secs(20), "{:?}", t0.elapsed());
}

#[test]
fn missing_bucket_without_prepare_fails_cleanly() {
    let s = common::server();
    let tmp = tempfile::tempdir().unwrap();
    let o = s3rdma(&http_args(&s.endpoint, "never-created"), tmp.path());
    assert_fails(&o, 1, "bucket 'never-created' does not exist", &tmp.path().join("results"));
    assert!(stderr(&o).contains("--prepare"));
    // A --root that exists is the user's: nothing is created in it unasked.
    std::fs::create_dir(tmp.path().join("data")).unwrap();
    let o = s3rdma(&["fetch", "--root", "data", "--bucket", "never-created"], tmp.path());
    assert_fails(&o, 1, "bucket 'never-created' does not exist", &tmp.path().join("results"));
    assert!(stderr(&o).contains("--prepare"));
    // A --root that does not exist yet is created on first use, as the default directory is.
    let o = s3rdma(&["fetch", "--root", "fresh/dir", "--sizes", "64KiB", "--iters", "1", "--warmup", "0s", "--results-dir", "fresh-results"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(tmp.path().join("fresh/dir/s3rdma-bench").is_dir());
    let o = s3rdma(&["fetch", "--root", "fresh2", "--no-prepare"], tmp.path());
    assert_fails(&o, 1, "bucket 's3rdma-bench' does not exist", &tmp.path().join("results"));
    assert!(!tmp.path().join("fresh2").exists(), "--no-prepare creates nothing");
    // In the tool's own default directory --no-prepare still refuses to create.
    let o = s3rdma(&["fetch", "--no-prepare"], tmp.path());
    assert_fails(&o, 1, "bucket 's3rdma-bench' does not exist", &tmp.path().join("results"));
    assert!(!tmp.path().join("s3rdma-data").exists());
    // A --root that is a regular file is said as such (exit 2), with or without --prepare: no bucket can be made in it.
    std::fs::write(tmp.path().join("afile"), b"x").unwrap();
    for extra in [None, Some("--prepare")] {
        let mut a = vec!["fetch", "--root", "afile", "--sizes", "64KiB", "--iters", "1"];
        a.extend(extra);
        assert_fails(&s3rdma(&a, tmp.path()), 2, "afile is not a directory", &tmp.path().join("results"));
    }
}

#[test]
fn missing_object_without_prepare_fails_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("data/s3rdma-bench")).unwrap();
    let o = s3rdma(&["fetch", "--root", "data", "--sizes", "1MiB"], tmp.path());
    assert_fails(&o, 1, "object 'fetch/1048576/obj-000000' not found", &tmp.path().join("results"));
    assert!(stderr(&o).contains("--prepare"));
}

#[test]
fn usage_errors_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let res = tmp.path().join("results");
    assert_fails(&s3rdma(&["fetch", "--sizes", "16XB"], tmp.path()), 2, "16XB", &res);
    assert_fails(&s3rdma(&["fetch", "--concurrency", "0"], tmp.path()), 2, "at least 1", &res);
    assert_fails(&s3rdma(&["fetch", "--backend", "http"], tmp.path()), 2, "--access-key", &res);
    assert_fails(
        &s3rdma(&["fetch", "--backend", "http", "--endpoint", "ftp://x", "--access-key", "a", "--secret-key", "b"], tmp.path()),
        2,
        "invalid --endpoint 'ftp://x'",
        &res,
    );
    assert_fails(&s3rdma(&["fetch", "--bucket", "Bad_Bucket"], tmp.path()), 2, "invalid bucket name", &res);
    let h = ["fetch", "--backend", "http", "--endpoint", "http://127.0.0.1:1", "--access-key", "a", "--secret-key", "b"];
    let with = |extra: &[&'static str]| [&h[..], extra].concat();
    assert_fails(&s3rdma(&with(&["--metrics-url", "http://127.0.0.1:2/m", "--metrics-url", "http://127.0.0.1:2/m"]), tmp.path()), 2, "given twice", &res);
    assert_fails(&s3rdma(&with(&["--servers", "127.0.0.1"]), tmp.path()), 2, "invalid --servers entry '127.0.0.1'", &res);
    assert_fails(&s3rdma(&with(&["--metrics-url", "http://u:p@127.0.0.1:2/m"]), tmp.path()), 2, "no credentials", &res);
    assert_fails(&s3rdma(&with(&["--metrics-token", ""]), tmp.path()), 2, "--metrics-token", &res);
    assert_fails(&s3rdma(&with(&["--part-size", "1"]), tmp.path()), 2, "64KiB minimum", &res);
    assert_fails(&s3rdma(&["fetch", "--duration", "0s"], tmp.path()), 2, "above zero", &res);
    // An IPv6 endpoint without brackets: the fix, and never a password from the URL (the witness reads it first).
    let o = s3rdma(&["fetch", "--backend", "http", "--endpoint", "http://AK:hunter2@::1:9100", "--access-key", "a", "--secret-key", "b"], tmp.path());
    assert_fails(&o, 2, "an IPv6 address goes in brackets: http://[::1]:9100", &res);
    assert!(!super::stderr(&o).contains("hunter2"), "{}", super::stderr(&o));
    // A run-length flag of another bench: which flag sets this one's length, not clap's nearest spelling.
    let o = s3rdma(&["tokens", "--duration", "5s"], tmp.path());
    assert_fails(&o, 2, "tokens reads --run-bytes of token data per repeat", &res);
    assert!(!super::stderr(&o).contains("--region"), "{}", super::stderr(&o));
    // Durations a clock cannot hold are refused, not a panic when added to one.
    for flag in ["--warmup", "--duration", "--barrier-timeout", "--series"] {
        assert_fails(&s3rdma(&["fetch", flag, "18446744073709551615s"], tmp.path()), 2, "longer than 7 days", &res);
    }
    assert_fails(&s3rdma(&["fetch", "--bounce-buffers", "3"], tmp.path()), 2, "even number", &res);
    assert_fails(&s3rdma(&["fetch", "--sizes", "1TiB", "--concurrency", "64"], tmp.path()), 2, "lower --sizes", &res);
    {
        let sub = "report";
        assert_fails(&s3rdma(&[sub], tmp.path()), 2, "give result files", &res);
    }
    assert!(!tmp.path().join("s3rdma-data").exists(), "usage errors must not create data");
}

#[test]
fn device_destinations_need_a_gpu() {
    let tmp = tempfile::tempdir().unwrap();
    if s3rdma::mem::cuda_probe().is_ok() {
        println!("SKIP device_destinations_need_a_gpu: this host has a GPU (the device run covers --dest device)");
        return;
    }
    for dest in ["device", "pinned"] {
        let o = s3rdma(&["fetch", "--dest", dest, "--sizes", "1MiB", "--iters", "1"], tmp.path());
        assert_fails(&o, 1, &format!("--dest {dest}: no CUDA driver library"), &tmp.path().join("results"));
        assert!(stderr(&o).contains("use --dest host"), "{}", stderr(&o));
        assert_eq!(stderr(&o).trim().lines().count(), 1, "{}", stderr(&o));
    }
}

#[test]
fn fetch_procs_runs_each_process_count_as_a_cell_on_local_and_http() {
    let s = common::server();
    let tmp = tempfile::tempdir().unwrap();
    let mut http = http_args(&s.endpoint, "fetch-procs");
    http.push("--prepare");
    let local = vec!["fetch"];
    for base in [local, http] {
        let mut args = base.clone();
        args.extend(["--sizes", "1MiB", "--concurrency", "2", "--procs", "1,2", "--iters", "3", "--repeats", "2", "--json"]);
        let o = s3rdma(&args, tmp.path());
        assert!(o.status.success(), "{}", stderr(&o));
        let rec: Value = serde_json::from_slice(&o.stdout).unwrap();
        let cells = rec["results"].as_array().unwrap();
        assert_eq!(cells.len(), 2, "one cell per process count");
        for (cell, procs) in cells.iter().zip([1u64, 2]) {
            assert_eq!(cell["procs"], procs);
            for rep in cell["repeats"].as_array().unwrap() {
                let per = rep["per_process"].as_array().unwrap();
                assert_eq!(per.len() as u64, procs);
                // --iters 3 per stream: every process read 2 streams x 3 objects of 1 MiB.
                for p in per {
                    assert_eq!(p["bytes"], 6 * MIB);
                    assert_eq!(p["ops"], 6);
                }
                let sum: u64 = per.iter().map(|p| p["bytes"].as_u64().unwrap()).sum();
                assert_eq!(rep["bytes"], sum, "per-process bytes sum to the aggregate");
                assert_eq!(rep["ops"], 6 * procs);
                let cores: f64 = per.iter().map(|p| p["client_cpu_cores"].as_f64().unwrap()).sum();
                assert!((rep["client_cpu_cores"].as_f64().unwrap() - cores).abs() < 1e-9);
                let gbps = rep["bytes"].as_f64().unwrap() / rep["wall_s"].as_f64().unwrap() / 1e9;
                assert!((rep["throughput_gbps"].as_f64().unwrap() - gbps).abs() < 1e-9 * gbps.max(1.0));
            }
        }
    }
}

#[test]
fn fetch_procs_fails_fast_when_a_process_dies() {
    let tmp = tempfile::tempdir().unwrap();
    let t0 = std::time::Instant::now();
    let o = Command::new(env!("CARGO_BIN_EXE_s3rdma"))
        .args(["fetch", "--sizes", "1MiB", "--procs", "1,2", "--duration", "1s"])
        .current_dir(tmp.path())
        .env("S3RDMA_TEST_FAIL_RANK", "1")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("rank 1 of 2 failed"), "{}", stderr(&o));
    assert!(t0.elapsed().as_secs() < 30);
    assert!(results_in(&tmp.path().join("results")).is_empty());
    // Bad flags fail once, before any process starts.
    let o = s3rdma(&["fetch", "--backend", "http", "--endpoint", "http://127.0.0.1:1", "--procs", "2"], tmp.path());
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(stderr(&o).matches("needs credentials").count(), 1, "{}", stderr(&o));
    // More processes than a launcher started: a usage error.
    let o = Command::new(env!("CARGO_BIN_EXE_s3rdma"))
        .args(["fetch", "--procs", "4"])
        .current_dir(tmp.path())
        .env("RANK", "0")
        .env("WORLD_SIZE", "2")
        .env("TORCHELASTIC_RUN_ID", "small")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--procs 4 needs 4 processes"), "{}", stderr(&o));
}

#[test]
fn stream_buffers_read_large_objects_through_a_reused_buffer() {
    // The case fetch-large-objects-many-streams: memory is streams x window, not streams x object.
    let s = common::server();
    let tmp = tempfile::tempdir().unwrap();
    let mut args = http_args(&s.endpoint, "cli-fetch-window");
    args.extend(["--sizes", "1MiB,1000000", "--concurrency", "3", "--iters", "2", "--warmup", "0s", "--objects", "2"]);
    args.extend(["--part-size", "64KiB", "--stream-buffer", "256KiB", "--prepare", "--json"]);
    let o = s3rdma(&args, tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let rec: Value = serde_json::from_slice(&o.stdout).unwrap();
    let plan = &rec["params"]["stream_buffer"];
    assert_eq!(plan["kind"], "reused", "{plan}");
    assert_eq!(plan["buffer_bytes"], 256 * 1024);
    assert_eq!(plan["chosen_by"], "--stream-buffer");
    for c in rec["results"].as_array().unwrap() {
        let size = c["size_bytes"].as_u64().unwrap();
        let r = &c["repeats"][0];
        // 3 streams x 2 whole objects each, however many ranged reads that took.
        assert_eq!(r["ops"].as_u64().unwrap(), 6);
        assert_eq!(r["bytes"].as_u64().unwrap(), 6 * size);
        assert_eq!(r["store_stats"]["bytes_http"].as_u64().unwrap(), 6 * size);
    }
    // On local with the default: objects this small keep whole-object buffers.
    let o = s3rdma(&["fetch", "--sizes", "1MB", "--concurrency", "2", "--iters", "2", "--warmup", "0s", "--json"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let rec: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(rec["params"]["stream_buffer"]["kind"], "object");
    assert_eq!(rec["params"]["stream_buffer"]["chosen_by"], "auto");
    // A window on local: the table says so, and the bytes are whole objects.
    let o = s3rdma(&["fetch", "--sizes", "1MB", "--concurrency", "2", "--iters", "2", "--warmup", "0s", "--stream-buffer", "64KiB"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("each stream reads through one reusable 64KiB buffer"), "{out}");
    // A window below the part-size minimum is a usage error naming the alternatives.
    let o = s3rdma(&["fetch", "--stream-buffer", "1KiB"], tmp.path());
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("'object'"), "{}", stderr(&o));
    // The default's window is checked against memory once the store names it:
    // 100000 streams x the local backend's 8 MiB is refused before any object is written.
    let res = tmp.path().join("res-many");
    let root = tmp.path().join("many");
    let o = s3rdma(
        &[
            "fetch",
            "--root",
            root.to_str().unwrap(),
            "--prepare",
            "--sizes",
            "16MiB",
            "--concurrency",
            "100000",
            "--iters",
            "1",
            "--results-dir",
            res.to_str().unwrap(),
        ],
        tmp.path(),
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("100000 stream(s) x 8MiB needs") && stderr(&o).contains("lower --stream-buffer"), "{}", stderr(&o));
    assert!(!root.join("s3rdma-bench/fetch").exists(), "no object may be written before the buffers are known to fit");
}

/// Output that cannot be written (stdout redirected to a full device) ends
/// the run with exit 1 and a message, not a panic, and the record is written.
#[test]
fn a_full_stdout_is_an_error_and_the_record_stays() {
    let tmp = tempfile::tempdir().unwrap();
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_s3rdma"))
        .args(["fetch", "--sizes", "1MiB", "--iters", "1", "--warmup", "0s"])
        .current_dir(tmp.path())
        .stdout(full)
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked") && err.contains("the table was not printed; the record was written to results/fetch-local-"), "{err}");
    assert_eq!(results_in(&tmp.path().join("results")).len(), 1);
}

/// An empty variable is an unset one (as the AWS CLI reads them): an empty
/// MINIOCPP_LIB or AWS_ENDPOINT_URL neither demands a value nor warns.
#[test]
fn empty_environment_variables_are_unset_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let o = s3rdma_env(&["fetch", "--sizes", "1MiB", "--iters", "1", "--warmup", "0s"], tmp.path(), &[("MINIOCPP_LIB", ""), ("AWS_ENDPOINT_URL", "")]);
    assert!(o.status.success(), "{}", stderr(&o));
    // The only warning: a 4 MiB window from the page cache is too short to measure.
    let err = stderr(&o);
    assert!(!err.lines().any(|l| l.contains("warning") && !l.contains("timed windows lasted under")), "{err}");
}

/// `fetch --verify` from local files into host memory checks each 2 MiB
/// piece as it lands: a byte flipped at rest in the second piece of an
/// object ends the run (exit 4) naming the object and the byte, with no
/// record; the clean run's record and table say what was checked.
#[test]
fn fetch_verify_from_local_files_catches_a_byte_flipped_at_rest() {
    let tmp = tempfile::tempdir().unwrap();
    let base = ["fetch", "--sizes", "5MiB", "--concurrency", "2", "--iters", "2", "--warmup", "0s", "--objects", "2", "--verify"];
    let o = s3rdma(&[&base[..], &["--prepare", "--json"]].concat(), tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let rec: Value = serde_json::from_slice(&o.stdout).unwrap();
    let checks = rec["params"]["verify_checks"].as_str().unwrap();
    assert!(checks.contains("each 2MiB piece right after its ranged read lands"), "{checks}");
    let c = &rec["results"][0]["repeats"][0];
    assert_eq!(c["bytes"].as_u64().unwrap(), 2 * 2 * (5 << 20), "every byte read once: {c}");
    let obj = tmp.path().join("s3rdma-data/s3rdma-bench/fetch/5242880/obj-000001");
    let mut bytes = std::fs::read(&obj).unwrap();
    bytes[3_000_000] ^= 0x40;
    std::fs::write(&obj, bytes).unwrap();
    let before = results_in(&tmp.path().join("results")).len();
    let o = s3rdma(&base, tmp.path());
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(4), "{err}");
    assert!(err.contains("object 'fetch/5242880/obj-000001'") && err.contains("byte 3000000 ") && !err.contains("panicked"), "{err}");
    assert_eq!(results_in(&tmp.path().join("results")).len(), before, "no record of a run that read other bytes");
}
