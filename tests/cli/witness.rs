//! The witness against scripted metrics, verify, and the rdma backend through the libminiocpp test double.

use super::*;

fn rdma_body(read: u64) -> String {
    format!(
        "# HELP minio_api_rdma_read_bytes_total Bytes sent over RDMA\n\
         # TYPE minio_api_rdma_read_bytes_total counter\n\
         minio_api_rdma_read_bytes_total{{server=\"n1:9000\"}} {read}\n\
         # TYPE minio_api_rdma_read_ops counter\n\
         minio_api_rdma_read_ops_total{{server=\"n1:9000\"}} 7\n\
         minio_api_rdma_write_bytes_total{{server=\"n1:9000\"}} 0\n"
    )
}

fn requests_body(sent: u64) -> String {
    format!("minio_api_requests_traffic_sent_bytes{{server=\"n1:9000\",type=\"s3\"}} {sent}\n")
}

/// A fetch of exactly 3 x 1 MiB over rdma (the test double; `--http` in
/// `extra` for plain http) against the in-process S3 server,
/// witnessed by a scripted metrics endpoint that plays `rdma` and `requests`
/// (before, after). Returns the exit code, stdout and the record.
fn witnessed_fetch(
    bucket: &str,
    rdma: Vec<common::Answer>,
    requests: Vec<common::Answer>,
    extra: &[&str],
) -> (Option<i32>, String, Value, common::ScriptedMetrics) {
    let s = common::server();
    let m = common::scripted_metrics(vec![("/rdma", rdma), ("/requests", requests)]);
    let tmp = tempfile::tempdir().unwrap();
    let (u1, u2) = (format!("{}/rdma", m.base), format!("{}/requests", m.base));
    let lib = common::fake_lib();
    let plain_http = extra.contains(&"--http");
    let extra: Vec<&str> = extra.iter().copied().filter(|a| *a != "--http").collect();
    let mut args = if plain_http { http_args(&s.endpoint, bucket) } else { rdma_args(&s.endpoint, bucket, lib.to_str().unwrap()) };
    args.extend(["--sizes", "1MiB", "--concurrency", "1", "--iters", "3", "--warmup", "0s", "--prepare", "--metrics-url", &u1, "--metrics-url", &u2]);
    args.extend_from_slice(&extra);
    // The library claims RDMA (as a real one on an RDMA host would); the scripted server decides.
    let o = s3rdma_env(&args, tmp.path(), &[("FAKE_MINIOCPP_RDMA_AVAILABLE", "1")]);
    let files = results_in(&tmp.path().join("results"));
    assert_eq!(files.len(), 1, "the run happened, so its record is written: {}", stderr(&o));
    let rec: Value = serde_json::from_str(&std::fs::read_to_string(&files[0]).unwrap()).unwrap();
    (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned(), rec, m)
}

#[test]
fn witness_verifies_rdma_when_the_server_accounts_the_payload() {
    let before = 1_000_000;
    let (code, out, rec, m) = witnessed_fetch(
        "wit-verified",
        vec![common::Answer::text(rdma_body(before)), common::Answer::text(rdma_body(before + 3 * MIB))],
        vec![common::Answer::text(requests_body(500)), common::Answer::text(requests_body(900))],
        &["--require-rdma", "--metrics-token", "tok-123"],
    );
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(rec["rdma_witness"]["verdict"], "rdma-verified");
    assert_eq!(rec["rdma_witness"]["cells"][0]["rdma_share"], 1.0);
    let w = &rec["results"][0]["repeats"][0]["witness"];
    assert_eq!(w["payload_bytes"], 3 * MIB);
    assert_eq!(w["rdma_read_bytes"], (3 * MIB) as f64);
    assert_eq!(w["http_sent_bytes"], 400.0);
    assert!(out.contains("rdma-verified (100.0% RDMA)"), "{out}");
    assert!(m.auth_seen.lock().unwrap().iter().all(|a| a == "Bearer tok-123"));
    assert!(!serde_json::to_string(&rec).unwrap().contains("tok-123"), "token recorded");
}

#[test]
fn witness_catches_partial_fallback_and_require_rdma_exits_3() {
    let (code, out, rec, m) = witnessed_fetch(
        "wit-partial",
        vec![common::Answer::text(rdma_body(0)), common::Answer::text(rdma_body(MIB))],
        vec![common::Answer::text(requests_body(0)), common::Answer::text(requests_body(2 * MIB))],
        &["--require-rdma"],
    );
    assert_eq!(code, Some(3), "{out}");
    assert_eq!(rec["rdma_witness"]["verdict"], "partial-fallback");
    let share = rec["rdma_witness"]["cells"][0]["rdma_share"].as_f64().unwrap();
    assert!((share - 1.0 / 3.0).abs() < 1e-9, "{share}");
    assert!(out.contains("partial-fallback (33.3% RDMA)"), "{out}");
    // No --metrics-token: a JWT made from the access/secret key is sent.
    let auth = m.auth_seen.lock().unwrap();
    assert!(!auth.is_empty() && auth.iter().all(|a| a.starts_with("Bearer ey")), "{auth:?}");
}

#[test]
fn witness_is_unverified_on_reset_or_error_page() {
    let (code, _, rec, _) = witnessed_fetch(
        "wit-reset",
        vec![common::Answer::text(rdma_body(50 * MIB)), common::Answer::text(rdma_body(10))],
        vec![common::Answer::text(requests_body(0))],
        &[],
    );
    assert_eq!(code, Some(0), "without --require-rdma the run succeeds");
    assert_eq!(rec["rdma_witness"]["verdict"], "unverified");
    assert!(rec["rdma_witness"]["reason"].as_str().unwrap().contains("went backwards"));

    let xml = common::Answer { status: 403, content_type: "application/xml", body: "<Error><Code>AccessDenied</Code></Error>".into() };
    let (code, _, rec, _) = witnessed_fetch("wit-403", vec![xml], vec![common::Answer::text(requests_body(0))], &["--require-rdma"]);
    assert_eq!(code, Some(3));
    assert_eq!(rec["rdma_witness"]["verdict"], "unverified");
    let reason = rec["rdma_witness"]["reason"].as_str().unwrap();
    assert!(reason.contains("HTTP 403") && reason.contains("--metrics-token"), "{reason}");
}

#[test]
fn witness_says_not_applicable_for_plain_http() {
    let (code, out, rec, _) = witnessed_fetch(
        "wit-http",
        vec![common::Answer::text("# no rdma series on a plain MinIO\n")],
        vec![common::Answer::text(requests_body(0)), common::Answer::text(requests_body(3 * MIB + 4000))],
        &["--http"],
    );
    assert_eq!(code, Some(0));
    assert_eq!(rec["rdma_witness"]["verdict"], "not-applicable");
    assert!(out.contains("not-applicable"));
}

#[test]
fn witness_against_a_server_without_metrics_is_unverified() {
    // The in-process s3s server has no /minio/metrics: the default targets
    // (derived from --endpoint) answer with an S3 error page.
    let s = common::server();
    let tmp = tempfile::tempdir().unwrap();
    let mut args = http_args(&s.endpoint, "wit-nometrics");
    args.extend(["--sizes", "1MiB", "--concurrency", "1", "--iters", "1", "--warmup", "0s", "--prepare", "--json"]);
    let o = s3rdma(&args, tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let rec: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(rec["rdma_witness"]["verdict"], "unverified");
    let reason = rec["rdma_witness"]["reason"].as_str().unwrap();
    assert!(reason.contains("/minio/metrics/v3/api/") && reason.contains("answered HTTP 4"), "{reason}");
    let targets = rec["rdma_witness"]["config"]["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 2);
    assert_eq!(rec["rdma_witness"]["config"]["auth"], "generated-jwt");
}

#[test]
fn verify_round_trip_over_http_and_local() {
    let s = common::server();
    let tmp = tempfile::tempdir().unwrap();
    let mut args = http_args(&s.endpoint, "verify-http");
    args[0] = "verify";
    args.extend(["--prepare", "--sizes", "4KiB,3MiB"]);
    let o = s3rdma(&args, tmp.path());
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}{}", stderr(&o));
    for step in [
        "[1] ",
        "[2] PASS",
        "[3] WARN metrics unreadable",
        "[4] PASS PUT of 4KiB from host memory",
        "[5] PASS GET of 4KiB into host memory: bytes match",
        "[4] PASS PUT of 3MiB from host memory",
        "[5] PASS GET of 3MiB into host memory: bytes match",
    ] {
        assert!(out.contains(step), "missing {step:?} in\n{out}");
    }
    // The table: one row per size and request.
    let rows: Vec<&str> = out.lines().filter(|l| l.starts_with('│') && l.contains("host memory")).collect();
    assert_eq!(rows.len(), 4, "{out}");
    assert!(rows[0].contains("4KiB") && rows[0].contains("PUT") && rows[3].contains("3MiB") && rows[3].contains("match"), "{rows:?}");
    assert!(out.contains("RESULT: PASS - round trips over http verified (4KiB, 3MiB); RDMA not applicable"), "{out}");
    assert!(!s.root.join("verify-http/s3rdma-verify/probe.bin").exists(), "probe deleted");
    // Missing bucket without --prepare: step 2 fails, RESULT FAIL, exit 1.
    let mut args = http_args(&s.endpoint, "verify-missing");
    args[0] = "verify";
    let o = s3rdma(&args, tmp.path());
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("[2] FAIL bucket 'verify-missing' does not exist") && out.contains("RESULT: FAIL"), "{out}");
    // Local, as JSON.
    let o = s3rdma(&["verify", "--root", "d", "--prepare", "--sizes", "1MiB", "--json"], tmp.path());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let rec: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(rec["benchmark"], "verify");
    assert_eq!(rec["results"]["pass"], true);
    assert_eq!(rec["results"]["data_match"], true);
    assert_eq!(rec["results"]["probes"][1]["request"], "GET");
    assert_eq!(rec["results"]["probes"][1]["bytes"], MIB);
    assert_eq!(rec["rdma_witness"]["verdict"], "not-applicable");
}

#[test]
fn rdma_fetch_end_to_end_is_full_fallback_under_the_witness() {
    let s = common::server();
    let lib = common::fake_lib();
    let lib = lib.to_str().unwrap();
    let m = common::scripted_metrics(vec![
        ("/rdma", vec![common::Answer::text(rdma_body(77))]),
        ("/requests", vec![common::Answer::text(requests_body(0)), common::Answer::text(requests_body(8 * MIB + 9000))]),
    ]);
    let tmp = tempfile::tempdir().unwrap();
    let (u1, u2) = (format!("{}/rdma", m.base), format!("{}/requests", m.base));
    let mut args = rdma_args(&s.endpoint, "rdma-e2e", lib);
    args.extend([
        "--sizes",
        "1MiB",
        "--concurrency",
        "4",
        "--iters",
        "2",
        "--warmup",
        "0s",
        "--prepare",
        "--metrics-url",
        &u1,
        "--metrics-url",
        &u2,
        "--require-rdma",
    ]);
    // The library claims RDMA; the server's counters say it carried none.
    let o = s3rdma_env(&args, tmp.path(), &[("FAKE_MINIOCPP_RDMA_AVAILABLE", "1")]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(3), "{out}{}", stderr(&o));
    assert!(out.contains("full-fallback (0.0% RDMA)"), "{out}");
    assert!(out.contains("libminiocpp return codes in the timed windows: 8 calls, 8 ok, 0 errors (-1), 0 declined (-2), 0 invalid (-3)"), "{out}");
    assert!(!stderr(&o).contains("reports RDMA unavailable"), "{}", stderr(&o));
    let rec: Value = serde_json::from_str(&std::fs::read_to_string(&results_in(&tmp.path().join("results"))[0]).unwrap()).unwrap();
    assert_eq!(rec["backend"], "rdma");
    let r = &rec["results"][0]["repeats"][0];
    assert_eq!(r["store_stats"]["rdma_calls"], 8, "4 streams x 2 GETs in the timed window");
    assert_eq!(r["store_stats"]["bytes_rdma_attempted"], 8 * MIB, "the store layer counts every payload byte");
    assert_eq!(r["store_stats"]["bytes_http"], 0);
    assert_eq!(r["witness"]["verdict"], "full-fallback");
    let env = &rec["environment"]["store"]["library"];
    assert_eq!(env["has_get_object_range"], true);
    assert_eq!(env["rdma_available"], true);
    // Without metrics the same run is unverified.
    let mut args = rdma_args(&s.endpoint, "rdma-e2e", lib);
    args.extend(["--sizes", "1MiB", "--concurrency", "2", "--iters", "1", "--warmup", "0s", "--json"]);
    let o = s3rdma(&args, tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let rec: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(rec["rdma_witness"]["verdict"], "unverified");
}

#[test]
fn rdma_return_codes_are_counted_and_reported() {
    let s = common::server();
    let lib = common::fake_lib();
    let lib = lib.to_str().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let mut prep = rdma_args(&s.endpoint, "rdma-codes", lib);
    prep.extend(["--sizes", "64KiB,1MiB", "--concurrency", "1", "--iters", "1", "--warmup", "0s", "--prepare"]);
    assert!(s3rdma(&prep, tmp.path()).status.success());
    let run = |env: &[(&str, &str)]| {
        let mut a = rdma_args(&s.endpoint, "rdma-codes", lib);
        a.extend(["--sizes", "64KiB,1MiB", "--concurrency", "2", "--iters", "2", "--warmup", "0s", "--json"]);
        s3rdma_env(&a, tmp.path(), env)
    };
    // -2: declined, redone over HTTP, counted.
    let o = run(&[("FAKE_MINIOCPP_RETURN", "-2")]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rec: Value = serde_json::from_slice(&o.stdout).unwrap();
    let r = &rec["results"][0]["repeats"][0];
    assert_eq!(r["store_stats"]["rdma_declined"], 4);
    assert_eq!(r["store_stats"]["bytes_http"], 4 * 65536, "declined transfers went over HTTP");
    assert_eq!(r["store_stats"]["bytes_http"], 4 * 65536, "and the store layer counted them as client HTTP bytes");
    // -1 with the library's message, -3 invalid argument: runtime errors, no record.
    let o = run(&[("FAKE_MINIOCPP_RETURN", "-1")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("libminiocpp failed (-1): injected failure"), "{}", stderr(&o));
    let o = run(&[("FAKE_MINIOCPP_RETURN", "-3")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("invalid argument (-3)"), "{}", stderr(&o));
    // Failing only above a size: the 64 KiB cell runs, the 1 MiB cell fails.
    let o = run(&[("FAKE_MINIOCPP_FAIL_ABOVE", "100000")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("above FAKE_MINIOCPP_FAIL_ABOVE=100000"), "{}", stderr(&o));
}

#[test]
fn rdma_large_objects_use_ranged_reads_or_say_they_go_over_http() {
    let s = common::server();
    let lib = common::fake_lib();
    let lib = lib.to_str().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    // A 2 MiB transfer ceiling stands in for 4 GiB - 1: 3 MiB objects need windows.
    let base = |extra: &[&'static str]| {
        let mut a = rdma_args(&s.endpoint, "rdma-windows", lib);
        a.extend([
            "--sizes",
            "3MiB",
            "--concurrency",
            "1",
            "--iters",
            "1",
            "--warmup",
            "0s",
            "--prepare",
            "--rdma-max-transfer",
            "2MiB",
            "--range-size",
            "1MiB",
            "--json",
        ]);
        a.extend_from_slice(extra);
        a
    };
    let o = s3rdma_env(&base(&[]), tmp.path(), &[("FAKE_MINIOCPP_RDMA_AVAILABLE", "1")]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rec: Value = serde_json::from_slice(&o.stdout).unwrap();
    let r = &rec["results"][0]["repeats"][0];
    assert_eq!(r["store_stats"]["rdma_calls"], 3, "3 MiB in 1 MiB windows");
    assert_eq!(r["store_stats"]["bytes_rdma_attempted"], 3 * MIB);
    // Without ranged reads the run says up front that they go over HTTP.
    let o = s3rdma_env(&base(&["--rdma-no-range"]), tmp.path(), &[("FAKE_MINIOCPP_RDMA_AVAILABLE", "1")]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("warning: objects of 3145728 bytes exceed one RDMA transfer (2097152 bytes): they will be read over HTTP"), "{err}");
    assert_eq!(err.matches("warning: --rdma-no-range is set: every ranged read").count(), 1, "said once, by the session: {err}");
    let rec: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(rec["results"][0]["repeats"][0]["store_stats"]["bytes_http"], 3 * MIB);
    assert!(rec["environment"]["warnings"].as_array().unwrap().iter().any(|w| w.as_str().unwrap().contains("over HTTP")));
}

#[test]
fn rdma_library_load_errors_are_clear() {
    let s = common::server();
    let tmp = tempfile::tempdir().unwrap();
    let res = tmp.path().join("results");
    let o = s3rdma(&rdma_args(&s.endpoint, "rdma-load", "/nonexistent/libminiocpp.so"), tmp.path());
    assert_fails(&o, 2, "cannot load libminiocpp from '/nonexistent/libminiocpp.so'", &res);
    assert!(stderr(&o).contains("--rdma-lib"));
    // A real shared library that is not libminiocpp: one line per missing symbol.
    let libz = ["/lib/x86_64-linux-gnu/libz.so.1", "/usr/lib/x86_64-linux-gnu/libz.so.1", "/lib64/libz.so.1"].into_iter().find(|p| Path::new(p).exists());
    let Some(libz) = libz else {
        println!("SKIP missing-symbol case: no libz.so.1 on this host");
        return;
    };
    let o = s3rdma(&rdma_args(&s.endpoint, "rdma-load", libz), tmp.path());
    assert_fails(&o, 2, "lacks miniocpp_get_object: was it built with -DMINIO_CPP_ENABLE_RDMA=ON?", &res);
    let lacks = stderr(&o).lines().filter(|l| l.contains("lacks miniocpp_")).count();
    assert_eq!(lacks, 8, "{}", stderr(&o));
}

#[test]
fn verify_refuses_sizes_beyond_memory_and_keys_it_would_destroy() {
    let tmp = tempfile::tempdir().unwrap();
    let o = s3rdma(&["verify", "--root", "d", "--prepare", "--sizes", "1PiB"], tmp.path());
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("lower the largest --sizes entry"), "{}", stderr(&o));
    let o = s3rdma(&["verify", "--root", "d", "--prepare", "--sizes", "18446744073709551615"], tmp.path());
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    // An object already at --key is never overwritten (nor deleted).
    std::fs::create_dir_all(tmp.path().join("d/s3rdma-bench/models")).unwrap();
    std::fs::write(tmp.path().join("d/s3rdma-bench/models/w.bin"), b"precious").unwrap();
    let o = s3rdma(&["verify", "--root", "d", "--sizes", "1KiB", "--key", "models/w.bin"], tmp.path());
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("[2] FAIL an object 'models/w.bin' already exists"), "{out}");
    assert_eq!(std::fs::read(tmp.path().join("d/s3rdma-bench/models/w.bin")).unwrap(), b"precious");
}

#[test]
fn label_values_holding_commas_keep_their_series_apart() {
    // Two series of one counter whose label values differ only after a
    // comma, each growing by 524,288 per scrape.
    let s = common::server();
    let body = |n: u64| {
        let v = 524_288 * n;
        common::Answer::text(format!("minio_api_rdma_read_bytes_total{{bar=\"baz,qux\"}} {v}\nminio_api_rdma_read_bytes_total{{bar=\"baz,zap\"}} {v}\n"))
    };
    let m = common::scripted_metrics(vec![("/baz", (1..=8).map(body).collect())]);
    let tmp = tempfile::tempdir().unwrap();
    let url = format!("{}/baz", m.base);
    let mut args = http_args(&s.endpoint, "wit-comma");
    args.extend(["--sizes", "1MiB", "--concurrency", "1", "--iters", "1", "--warmup", "0s", "--prepare", "--metrics-url", &url, "--json"]);
    let o = s3rdma(&args, tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let rec: Value = serde_json::from_slice(&o.stdout).unwrap();
    let w = &rec["rdma_witness"]["windows"][0];
    assert_eq!(w["rdma_read_bytes"], 1_048_576.0, "both series, 524,288 each: {w}");
}

/// A rail lost mid-run (libs3rdma takes a failing rail out of rotation) is a
/// warning on the terminal and in the window's report, beside the verdict the
/// counters decide; windows that kept every rail say nothing of it.
#[test]
fn rdma_rail_lost_in_a_window_is_warned_and_recorded() {
    let s = common::server();
    let lib = common::fake_lib();
    let tmp = tempfile::tempdir().unwrap();
    let mut args = rdma_args(&s.endpoint, "rdma-rails", lib.to_str().unwrap());
    // 2 repeats of 4 GETs after a warm-up: the 9th data call (after 4 prepare
    // PUTs and the warm-up's GETs) falls in the second window at the latest.
    args.extend(["--sizes", "1MiB", "--concurrency", "1", "--iters", "4", "--repeats", "3", "--warmup", "0s", "--prepare", "--json"]);
    let o = s3rdma_env(&args, tmp.path(), &[("FAKE_MINIOCPP_RAILS", "2,2"), ("FAKE_MINIOCPP_RAIL_LOST_AFTER", "9")]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rec: Value = serde_json::from_slice(&o.stdout).unwrap();
    let reps = rec["results"][0]["repeats"].as_array().unwrap();
    let rails: Vec<(u64, u64)> = reps
        .iter()
        .map(|r| {
            let w = &r["witness"]["rails"][0];
            (w["open"]["healthy"].as_u64().unwrap(), w["close"]["healthy"].as_u64().unwrap())
        })
        .collect();
    let lost: Vec<&Value> = reps.iter().filter(|r| r["witness"]["reason"].as_str().unwrap().contains("lost an RDMA rail")).collect();
    assert_eq!(lost.len(), 1, "exactly one window saw the drop: {rails:?}");
    assert!(rails.contains(&(2, 1)), "{rails:?}");
    assert!(lost[0]["witness"]["reason"].as_str().unwrap().contains("2 of 2 healthy at open, 1 of 2 at close"));
    assert_eq!(stderr(&o).matches("lost an RDMA rail in the window").count(), 1, "{}", stderr(&o));
    assert_eq!(rec["environment"]["store"]["library"]["generation"], "unknown", "the double links no RDMA engine");
    let after: Vec<&Value> = reps.iter().skip_while(|r| !r["witness"]["reason"].as_str().unwrap().contains("lost an RDMA rail")).skip(1).collect();
    assert!(after.iter().all(|r| r["witness"]["reason"].as_str().unwrap().contains("rank 0 ran on 1 of 2 RDMA rails")), "{after:?}");
    // Lost before the first window (before any call): every window says it
    // ran degraded, the terminal once.
    let o = s3rdma_env(&args, tmp.path(), &[("FAKE_MINIOCPP_RAILS", "2,2"), ("FAKE_MINIOCPP_RAIL_LOST_AFTER", "0")]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rec: Value = serde_json::from_slice(&o.stdout).unwrap();
    for r in rec["results"][0]["repeats"].as_array().unwrap() {
        assert!(r["witness"]["reason"].as_str().unwrap().contains("ran on 1 of 2 RDMA rails (one out of rotation since before the window)"), "{r}");
    }
    assert_eq!(stderr(&o).matches("warning: rank 0 ran on 1 of 2 RDMA rails").count(), 1, "{}", stderr(&o));
}

/// What the helper found trying the rdma backend as a new user: a declined
/// ranged read is redone over HTTP (as a declined whole GET is); a thread
/// count no host can start is refused by name; a run `--require-rdma`
/// stopped before its first window leaves a record `report` skips with a
/// note instead of refusing every file.
#[test]
fn rdma_declines_threads_and_stopped_runs_as_a_user_meets_them() {
    let s = common::server();
    let lib = common::fake_lib();
    let lib = lib.to_str().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let mut synth = rdma_args(&s.endpoint, "rdma-declines", lib);
    synth[0] = "weights";
    synth.extend(["--synth", "tiny", "--model", "m"]);
    assert!(s3rdma(&synth, tmp.path()).status.success());
    let mut w = rdma_args(&s.endpoint, "rdma-declines", lib);
    w[0] = "weights";
    w.extend(["--model", "m", "--verify", "--dest", "host", "--json"]);
    let o = s3rdma_env(&w, tmp.path(), &[("FAKE_MINIOCPP_RETURN", "-2")]);
    assert!(o.status.success(), "a declined ranged read is redone over HTTP: {}", stderr(&o));
    let rec: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(rec["results"]["verified"]["ok"], true);
    let mut t = rdma_args(&s.endpoint, "rdma-declines", lib);
    t.extend(["--sizes", "1MiB", "--rdma-threads", "5000"]);
    assert_fails(&s3rdma(&t, tmp.path()), 2, "5000 RDMA worker threads asked for", &tmp.path().join("none"));
    let mut f = rdma_args(&s.endpoint, "rdma-declines", lib);
    f.extend(["--sizes", "1MiB", "--iters", "1", "--warmup", "0s", "--prepare"]);
    assert!(s3rdma(&f, tmp.path()).status.success());
    f.push("--require-rdma");
    assert_eq!(s3rdma(&f, tmp.path()).status.code(), Some(3));
    let files: Vec<String> =
        results_in(&tmp.path().join("results")).iter().filter(|p| p.to_string_lossy().contains("fetch")).map(|p| p.to_string_lossy().into_owned()).collect();
    assert_eq!(files.len(), 2, "{files:?}");
    // Made through the test double (no known RDMA engine): report refuses
    // the measured one unless asked, and says why.
    let mut r = vec!["report"];
    r.extend(files.iter().map(String::as_str));
    let o = s3rdma(&r, tmp.path());
    assert_eq!(o.status.code(), Some(2), "only a test double's record: no rows: {}", stderr(&o));
    assert!(stderr(&o).contains("a libminiocpp of no known RDMA engine (a test double?)"), "{}", stderr(&o));
    r.push("--include-test-doubles");
    let o = s3rdma(&r, tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("stopped before the first window, nothing measured"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("test double?"), "{}", stderr(&o));
}
