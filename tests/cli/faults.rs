//! The fault matrix: fetch on both GET paths, ckpt save and restore, weights
//! and verify, each through an in-process fault proxy (`common::faultproxy`)
//! under: server gone, reset and short body mid-object, a 503 storm with
//! Retry-After, a stalled head and a stalled body. Every run must exit 1
//! within attempts x --read-timeout + 5 s, say what failed, leave no record,
//! and a failed save must leave no manifest.

use std::time::{Duration, Instant};

use super::*;
use common::faultproxy::{Fault, FaultProxy, Rule};

/// Flags every faulted run takes: 2 attempts, 1 s to a response's start.
const BOUNDS: [&str; 6] = ["--attempts", "2", "--read-timeout", "1s", "--connect-timeout", "1s"];

/// attempts x --read-timeout + 5 s: the bound on time to error.
const LIMIT: Duration = Duration::from_secs(2 + 5);

/// The bound on a whole failing run whose requests are bounded by their own
/// check (their count, or the span of the proxy's log): what a run does
/// around its requests (checksumming a part's body, undoing a training step
/// over the state, freeing gigabytes of pinned memory) is CPU work, which
/// stretches to seconds when the suite runs its tests side by side on two
/// cores. Before fail-fast a failing 2 GiB save
/// took 55-218 s, and a clean-up with its own attempts added a round.
const CPU_TAIL_LIMIT: f64 = 30.0;

/// Seconds from the first proxy log line whose text holds `first` to the
/// last line, and the last line's offset: the span the run's requests took.
fn request_span(log: &[String], first: &str) -> (f64, f64) {
    let at = |l: &String| l.split(' ').next().and_then(|t| t.parse::<f64>().ok());
    let start = log.iter().find(|l| l.contains(first)).and_then(at).expect("a matching request reached the proxy");
    let last = log.iter().filter_map(at).fold(start, f64::max);
    (last - start, start)
}

/// The faults a read can meet, by name.
fn read_faults() -> Vec<(&'static str, Fault)> {
    vec![
        ("reset mid-body", Fault::ResetAfter(100_000)),
        ("short body", Fault::DropAfter(100_000)),
        ("503 storm", Fault::Status { code: 503, retry_after: Some("1") }),
        ("stalled head", Fault::StallHead),
        ("stalled body", Fault::StallBody(100_000)),
        ("gone mid-run", Fault::Refuse),
    ]
}

/// The faults a write can meet (its answer has no body to cut).
fn write_faults() -> Vec<(&'static str, Fault)> {
    vec![
        ("reset unanswered", Fault::ResetUnanswered),
        ("503 storm", Fault::Status { code: 503, retry_after: Some("1") }),
        ("stalled head", Fault::StallHead),
        ("gone mid-run", Fault::Refuse),
    ]
}

/// Run `args` (a subcommand and its flags, endpoint last to be filled)
/// against a fresh proxy to `upstream` with `rule`, in its own directory.
/// Returns the output, the time it took, and the directory.
fn faulted(args: &[&str], upstream: &str, rule: Rule) -> (Output, Duration, tempfile::TempDir, u32, Vec<String>) {
    let proxy = FaultProxy::start(upstream);
    proxy.set(rule);
    let tmp = tempfile::tempdir().unwrap();
    let mut a: Vec<&str> = args.to_vec();
    a.extend(["--endpoint", &proxy.endpoint]);
    a.extend(BOUNDS);
    let t0 = Instant::now();
    let o = s3rdma(&a, tmp.path());
    (o, t0.elapsed(), tmp, proxy.injected(), proxy.log())
}

/// Run every fault of `faults` at once (one proxy each) and check each ended
/// as a failure should; `check` adds what the bench must also hold.
fn matrix(
    what: &str,
    args: &[&str],
    upstream: &str,
    method: &'static str,
    skip: u32,
    faults: Vec<(&'static str, Fault)>,
    check: impl Fn(&str, &Output) + Sync,
) {
    let bucket = args[args.iter().position(|a| *a == "--bucket").expect("--bucket") + 1];
    let results: Vec<_> = std::thread::scope(|s| {
        let hs: Vec<_> = faults
            .into_iter()
            .map(|(name, fault)| {
                s.spawn(move || {
                    // Requests to the bucket only: the witness's scrapes have their own bounds.
                    let rule = Rule { method: Some(method), path_contains: Some(format!("/{bucket}/")), skip, count: None, fault };
                    // verify writes, reads and deletes its probe: runs side by side each need their own key.
                    let key = format!("s3rdma-verify/{}.bin", name.replace(' ', "-"));
                    let mut args = args.to_vec();
                    if args[0] == "verify" {
                        args.extend(["--key", &key]);
                    }
                    (name, faulted(&args, upstream, rule))
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut problems = Vec::new();
    for (name, (o, took, tmp, injected, log)) in results {
        let err = stderr(&o);
        let ctx = format!("{what} under {name} ({injected} injected, exit {:?}, {took:.1?}): {}\n    {}", o.status.code(), err.trim(), log.join("\n    "));
        let ok = injected > 0
            && o.status.code() == Some(1)
            && took < LIMIT
            && !err.contains("panicked")
            && err.lines().any(|l| l.starts_with("error: "))
            && no_record_or_a_failed_one(&tmp.path().join("results"));
        if std::env::var_os("S3RDMA_SHOW_FAULTS").is_some() {
            eprintln!("{what} under {name}: {took:.1?}: {}", err.trim().replace('\n', " | "));
        }
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(name, &o))) {
            Ok(()) if ok => {}
            Ok(()) => problems.push(ctx),
            Err(e) => problems.push(format!("{ctx}\n  {}", e.downcast_ref::<String>().cloned().unwrap_or_default())),
        }
    }
    assert!(problems.is_empty(), "{} of the runs ended wrong:\n{}", problems.len(), problems.join("\n"));
}

/// No record, or (verify, which records its steps) one marked failed.
fn no_record_or_a_failed_one(dir: &Path) -> bool {
    results_in(dir).iter().all(|f| {
        let rec: Value = serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
        rec["results"]["pass"] == false
    })
}

/// The error says what happened to which request.
fn names_the_cause(what: &str, name: &str, o: &Output) {
    let err = stderr(o);
    let want: &[&str] = match name {
        "503 storm" => &["503"],
        "stalled head" => &["timed out", "1s (--read-timeout)"],
        "stalled body" => &["no data for 1s (--read-timeout)"],
        _ => &[],
    };
    for w in want {
        assert!(err.contains(w), "{what} under {name}: stderr lacks {w:?}: {err}");
    }
}

fn prepare(args: &[&str], endpoint: &str) {
    let mut a = args.to_vec();
    a.extend(["--endpoint", endpoint]);
    let o = s3rdma(&a, tempfile::tempdir().unwrap().path());
    assert!(o.status.success(), "preparing {args:?}: {}", stderr(&o));
}

fn creds<'a>(sub: &'a str, bucket: &'a str) -> Vec<&'a str> {
    vec![sub, "--backend", "http", "--access-key", common::ACCESS_KEY, "--secret-key", common::SECRET_KEY, "--bucket", bucket]
}

#[test]
fn fetch_faults_on_both_get_paths() {
    let s = common::server();
    let mut base = creds("fetch", "faults-fetch");
    base.extend(["--sizes", "4MiB", "--concurrency", "2", "--iters", "3", "--warmup", "0s", "--objects", "2", "--part-size", "1MiB"]);
    let mut first = base.clone();
    first.push("--prepare");
    prepare(&first, &s.endpoint);
    for path in ["direct", "sdk"] {
        let mut a = base.clone();
        a.extend(["--http-get", path]);
        // Skip 3: the run's HEADs and the first GETs pass, the fault comes mid-run.
        matrix(&format!("fetch --http-get {path}"), &a, &s.endpoint, "GET", 3, read_faults(), |name, o| names_the_cause("fetch", name, o));
    }
}

#[test]
fn a_server_that_is_gone_fails_at_once_naming_the_endpoint() {
    let port = common::dead_port();
    let ep = format!("http://127.0.0.1:{port}");
    for args in [creds("fetch", "gone"), creds("ckpt", "gone"), creds("weights", "gone"), creds("verify", "gone")] {
        let tmp = tempfile::tempdir().unwrap();
        let mut a = args.clone();
        if a[0] == "weights" {
            a.extend(["--model", "m"]);
        }
        a.extend(["--endpoint", &ep]);
        a.extend(BOUNDS);
        let t0 = Instant::now();
        let o = s3rdma(&a, tmp.path());
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(t0.elapsed() < LIMIT, "{args:?}: {:?}", t0.elapsed());
        assert!(err.contains(&ep) && err.contains("--endpoint"), "{args:?}: {err}");
        assert!(no_record_or_a_failed_one(&tmp.path().join("results")), "{args:?}");
    }
}

#[test]
fn ckpt_save_faults_leave_no_manifest() {
    let s = common::server();
    std::fs::create_dir_all(s.root.join("faults-ckpt-save")).unwrap();
    let mut a = creds("ckpt", "faults-ckpt-save");
    a.extend(["--sizes", "8MiB", "--chunk", "1MiB", "--concurrency", "4", "--methods", "flat", "--repeats", "1", "--ops", "save"]);
    // Skip 2: two chunks land, then the fault.
    matrix("ckpt save", &a, &s.endpoint, "PUT", 2, write_faults(), |name, o| {
        names_the_cause("ckpt save", name, o);
        let left: Vec<_> = walk(&s.root.join("faults-ckpt-save")).into_iter().filter(|p| p.ends_with(".manifest.json")).collect();
        assert!(left.is_empty(), "ckpt save under {name} left a manifest: {left:?}");
    });
}

#[test]
fn ckpt_restore_faults() {
    let s = common::server();
    std::fs::create_dir_all(s.root.join("faults-ckpt-restore")).unwrap();
    let mut a = creds("ckpt", "faults-ckpt-restore");
    a.extend(["--sizes", "8MiB", "--chunk", "1MiB", "--concurrency", "4", "--methods", "flat", "--repeats", "1"]);
    let mut save = a.clone();
    save.extend(["--ops", "save", "--keep"]);
    prepare(&save, &s.endpoint);
    a.extend(["--ops", "restore"]);
    // Skip 1: the manifest is read, a chunk meets the fault.
    matrix("ckpt restore", &a, &s.endpoint, "GET", 1, read_faults(), |name, o| names_the_cause("ckpt restore", name, o));
}

#[test]
fn weights_faults() {
    let s = common::server();
    let mut synth = creds("weights", "faults-weights");
    synth.extend(["--synth", "tiny", "--model", "tiny", "--shard-size", "16MB"]);
    prepare(&synth, &s.endpoint);
    let mut a = creds("weights", "faults-weights");
    a.extend(["--model", "tiny", "--dest", "host", "--repeats", "1"]);
    // Skip 2: the index and a header are read, a window meets the fault.
    matrix("weights", &a, &s.endpoint, "GET", 2, read_faults(), |name, o| names_the_cause("weights", name, o));
}

#[test]
fn verify_faults_on_the_put_and_the_get() {
    let s = common::server();
    std::fs::create_dir_all(s.root.join("faults-verify")).unwrap();
    let mut a = creds("verify", "faults-verify");
    a.extend(["--sizes", "4MiB"]);
    matrix("verify PUT", &a, &s.endpoint, "PUT", 0, write_faults(), |name, o| names_the_cause("verify PUT", name, o));
    matrix("verify GET", &a, &s.endpoint, "GET", 0, read_faults(), |name, o| names_the_cause("verify GET", name, o));
}

/// A 2 GiB save in 64 MiB chunks against a server that stalls every PUT
/// fails fast: no more PUTs than were in flight, twice (the chunks behind the
/// stalled ones never start), and the run ends within [`CPU_TAIL_LIMIT`]
/// (before fail-fast: 55-218 s, every chunk running its attempts). Alone it
/// ends about 3 s after its first PUT (attempts x --read-timeout + 1 s); the
/// PUTs' own span is not bounded here, since each part's body is read and
/// checksummed before its request leaves, which the suite's parallel tests
/// stretch to seconds on two cores.
#[test]
fn a_2gib_ckpt_save_against_a_stalled_server_ends_within_the_bound() {
    let s = common::server();
    std::fs::create_dir_all(s.root.join("faults-ckpt-2g")).unwrap();
    let proxy = FaultProxy::start(&s.endpoint);
    proxy.set(Rule::every(Some("PUT"), Fault::StallHead));
    let tmp = tempfile::tempdir().unwrap();
    let mut a = creds("ckpt", "faults-ckpt-2g");
    a.extend(["--sizes", "2GiB", "--chunk", "64MiB", "--methods", "flat", "--repeats", "1", "--ops", "save", "--dest", "host"]);
    a.extend(["--endpoint", &proxy.endpoint]);
    a.extend(BOUNDS);
    let o = s3rdma(&a, tmp.path());
    let end = proxy.elapsed();
    let log = proxy.log();
    let (span, first_put) = request_span(&log, " PUT ");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("timed out") && err.contains("--read-timeout"), "{err}");
    let took = end - first_put;
    assert!(took < CPU_TAIL_LIMIT, "{took:.1} s from the first PUT to the end: {err}\n{}", log.join("\n"));
    let puts = log.iter().filter(|l| l.contains(" PUT ")).count();
    // At most what was in flight, twice (2 attempts): 8 chunks (--concurrency)
    // x 8 part uploads (--part-concurrency; 64 MiB chunks go multipart in
    // 8 MiB parts); the 24 chunks behind them never start.
    assert!(puts <= 8 * 8 * 2, "{puts} PUTs served for one failing save");
    assert!(walk(&s.root.join("faults-ckpt-2g")).iter().all(|p| !p.ends_with(".manifest.json")));
    eprintln!("2 GiB save against a stalled server: PUTs over {span:.1} s, ended {took:.1} s after the first PUT, {puts} PUTs");
}

/// A bucket policy that refuses only LIST: the save commits, the clean-up of
/// older generations cannot list them. The run still ends with its record
/// (exit 0), and the message and the record name the committed generation
/// as complete and restorable, and what failed after it; a restore then reads it.
#[test]
fn a_committed_save_whose_clean_up_is_refused_says_it_is_restorable() {
    let s = common::server();
    std::fs::create_dir_all(s.root.join("faults-ckpt-nolist")).unwrap();
    let proxy = FaultProxy::start(&s.endpoint);
    proxy.set(Rule {
        method: Some("GET"),
        path_contains: Some("list-type=2".into()),
        skip: 0,
        count: None,
        fault: Fault::Status { code: 403, retry_after: None },
    });
    let tmp = tempfile::tempdir().unwrap();
    let mut a = creds("ckpt", "faults-ckpt-nolist");
    a.extend(["--sizes", "4MiB", "--chunk", "1MiB", "--methods", "flat", "--repeats", "2", "--dest", "host", "--keep", "--endpoint", &proxy.endpoint]);
    let mut save = a.clone();
    save.extend(["--ops", "save", "--json"]);
    let o = s3rdma(&save, tmp.path());
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(proxy.injected() >= 2, "both repeats listed: {}", proxy.injected());
    let rec = record(&o);
    let notes: Vec<&str> = rec["results"]["after_commit"].as_array().expect("after_commit in the record").iter().map(|n| n.as_str().unwrap()).collect();
    assert_eq!(notes.len(), 2, "{notes:?}");
    for n in &notes {
        assert!(n.contains("at generation ") && n.contains("is complete and restorable (its manifest committed)"), "{n}");
        assert!(n.contains("removing its older generations failed") && n.contains("access denied"), "{n}");
    }
    assert!(err.contains("warning: rank 0: checkpoint ckpt/synthetic-4MiB/rank00000 at generation "), "{err}");
    let mut restore = a.clone();
    restore.extend(["--ops", "restore"]);
    proxy.clear();
    let o = s3rdma(&restore, tmp.path());
    assert!(o.status.success(), "the committed generation restores: {}", stderr(&o));

    // The end-of-run removal (no --keep) under a refused LIST, then under a
    // manifest DELETE that fails: nothing is removed, the checkpoint stays
    // restorable, and the record says so.
    let no_keep: Vec<&str> = a.iter().copied().filter(|x| *x != "--keep").chain(["--ops", "save", "--json"]).collect();
    for (rule, says) in [
        (
            Rule {
                method: Some("GET"),
                path_contains: Some("list-type=2".into()),
                skip: 0,
                count: None,
                fault: Fault::Status { code: 403, retry_after: None },
            },
            "listing checkpoint",
        ),
        (
            Rule {
                method: Some("DELETE"),
                path_contains: Some("manifest".into()),
                skip: 0,
                count: None,
                fault: Fault::Status { code: 500, retry_after: None },
            },
            "removing the manifest",
        ),
    ] {
        proxy.set(rule);
        let o = s3rdma(&no_keep, tmp.path());
        assert_eq!(o.status.code(), Some(0), "{says}: {}", stderr(&o));
        let rec = record(&o);
        let notes = rec["results"]["after_commit"].to_string();
        assert!(notes.contains(says) && notes.contains("nothing was removed, the checkpoint stays complete and restorable"), "{notes}");
        proxy.clear();
        let o = s3rdma(&restore, tmp.path());
        assert!(o.status.success(), "{says}: the checkpoint left whole restores: {}", stderr(&o));
    }
}

/// A server that hangs on everything once the save has begun (a stopped
/// process whose socket still accepts): the save's requests span at most
/// attempts x (--read-timeout + a part at 50 MB/s) + 1 s from the first hung request, and the
/// clean-up after it (the listing and deletes of the partial generation)
/// lists once, no new round of attempts; flat and async alike. The run ends
/// within [`CPU_TAIL_LIMIT`] (async undoes its training step over the state
/// before the clean-up).
#[test]
fn a_save_against_a_server_that_hangs_on_everything_ends_within_the_bound() {
    let s = common::server();
    std::fs::create_dir_all(s.root.join("faults-ckpt-hang")).unwrap();
    for method in ["flat", "async"] {
        let proxy = FaultProxy::start(&s.endpoint);
        // Skip 1: the bucket check passes; every later request to the bucket hangs.
        proxy.set(Rule { method: None, path_contains: Some("/faults-ckpt-hang".into()), skip: 1, count: None, fault: Fault::StallHead });
        let tmp = tempfile::tempdir().unwrap();
        let mut a = creds("ckpt", "faults-ckpt-hang");
        a.extend(["--sizes", "256MiB", "--chunk", "16MiB", "--concurrency", "2", "--methods", method, "--repeats", "1", "--ops", "save", "--dest", "host"]);
        a.extend(["--endpoint", &proxy.endpoint, "--attempts", "3", "--read-timeout", "1s", "--connect-timeout", "1s"]);
        let o = s3rdma(&a, tmp.path());
        let end = proxy.elapsed();
        let log = proxy.log();
        let (_, hung) = request_span(&log, "Some(StallHead)");
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{method}: {err}");
        let all = log.join("\n");
        // 3 attempts x 1 s for the save's requests, then one listing for its
        // clean-up (a clean-up with its own attempts lists 3 times). The
        // listing waits for the training step to be undone, CPU work, so
        // the save's span is checked without it.
        let clean_up = |l: &&String| l.contains("list-type=2") || l.contains(" DELETE ");
        let listings = log.iter().filter(|l| l.contains("list-type=2")).count();
        assert!(listings <= 1, "{method}: the clean-up listed {listings} times: {err}\n{all}");
        let save_log: Vec<String> = log.iter().filter(|l| !clean_up(l)).cloned().collect();
        let (span, _) = request_span(&save_log, "Some(StallHead)");
        // Each attempt of an 8 MiB part waits --read-timeout plus its bytes at
        // 50 MB/s (src/store/http/multipart.rs, scaled_read_timeout): 1.17 s.
        let attempt = 1.0 + (8 << 20) as f64 / 50e6;
        assert!(span < 3.0 * attempt + 1.0, "{method}: the save's requests spanned {span:.1} s from the first hung one: {err}\n{all}");
        let took = end - hung;
        assert!(took < CPU_TAIL_LIMIT, "{method}: {took:.1} s from the first hung request to the end: {err}\n{all}");
        eprintln!("{method} save against a hung server: requests over {span:.1} s, ended {took:.1} s after the first hung request");
    }
}

/// A server asking the client to slow down, on the SDK path: two `503 SlowDown` with
/// `Retry-After: 1`, then the object. The run waits for the server (at least
/// 2 s in all, where the SDK alone retried after 0.63 s) and counts both
/// retries in the record, outside the throughput.
#[test]
fn sdk_retries_wait_for_retry_after_and_are_counted() {
    let s = common::server();
    let mut a = creds("fetch", "faults-sdk-retry");
    a.extend(["--sizes", "100KiB", "--concurrency", "1", "--iters", "1", "--warmup", "0s", "--objects", "1", "--http-get", "sdk", "--json"]);
    let mut first = a.clone();
    first.push("--prepare");
    prepare(&first, &s.endpoint);
    let proxy = FaultProxy::start(&s.endpoint);
    let rule = Rule {
        method: Some("GET"),
        path_contains: Some("/faults-sdk-retry/".into()),
        skip: 0,
        count: Some(2),
        fault: Fault::Status { code: 503, retry_after: Some("1") },
    };
    proxy.set(rule);
    let tmp = tempfile::tempdir().unwrap();
    a.extend(["--endpoint", &proxy.endpoint, "--attempts", "3"]);
    let t0 = Instant::now();
    let rec = record(&s3rdma(&a, tmp.path()));
    let took = t0.elapsed();
    assert_eq!(proxy.injected(), 2);
    assert!(took >= Duration::from_secs(2), "{took:?}: Retry-After ignored");
    let r = &rec["results"][0]["repeats"][0];
    assert_eq!(r["store_stats"]["sdk_retries_5xx"], 2, "{r}");
    assert_eq!(r["store_stats"]["sdk_retries_timeout"], 0, "{r}");
    assert_eq!(r["ops"], 1);
    assert_eq!(r["bytes"], 100 * 1024);
}

/// A `Retry-After` longer than the SDK's own backoff holds on the SDK paths:
/// 3 s on a GET (`--http-get sdk`), and an HTTP date 3 s ahead on a PUT
/// (`--prepare`); the SDK alone capped both at its 1 s maximum backoff.
#[test]
fn sdk_calls_wait_as_long_as_retry_after_says() {
    let s = common::server();
    let mut a = creds("fetch", "faults-sdk-wait");
    a.extend(["--sizes", "64KiB", "--concurrency", "1", "--iters", "1", "--warmup", "0s", "--objects", "1", "--http-get", "sdk", "--json"]);
    let mut first = a.clone();
    first.push("--prepare");
    prepare(&first, &s.endpoint);
    let proxy = FaultProxy::start(&s.endpoint);
    let only_once = |method, retry_after| Rule {
        method: Some(method),
        path_contains: Some("obj-".into()),
        skip: 0,
        count: Some(1),
        fault: Fault::Status { code: 503, retry_after: Some(retry_after) },
    };
    proxy.set(only_once("GET", "3"));
    let tmp = tempfile::tempdir().unwrap();
    a.extend(["--endpoint", &proxy.endpoint, "--attempts", "3"]);
    let t0 = Instant::now();
    let rec = record(&s3rdma(&a, tmp.path()));
    assert!(t0.elapsed() >= Duration::from_secs(3), "{:?}: Retry-After 3 cut short on a GET", t0.elapsed());
    assert_eq!(proxy.injected(), 1);
    assert_eq!(rec["results"][0]["repeats"][0]["store_stats"]["sdk_retries_5xx"], 1);

    // A PUT of a new object, asked to wait until a date 3 s ahead (dates have 1 s resolution).
    let date: &'static str = httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(3)).leak();
    proxy.set(only_once("PUT", date));
    let mut put: Vec<&str> = a.iter().map(|x| if *x == "64KiB" { "96KiB" } else { x }).collect();
    put.push("--prepare");
    let t0 = Instant::now();
    let o = s3rdma(&put, tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(t0.elapsed() >= Duration::from_secs(2), "{:?}: Retry-After date cut short on a PUT", t0.elapsed());
    assert_eq!(proxy.injected(), 1);
}

/// The lies of a proxy or gateway a ranged read can meet, each
/// with what the error must say: bytes that are not the requested bytes end
/// the run (exit 1, no record), never counted.
fn read_lies() -> Vec<(&'static str, Fault, Option<u32>, &'static str)> {
    vec![
        ("another range in Content-Range", Fault::ShiftContentRange(4096), None, "not the requested bytes"),
        ("200 for a ranged GET", Fault::Answer200, None, "not the requested bytes"),
        ("object replaced mid-read", Fault::NewEtag, Some(1), "changed during the read"),
        ("another object size in Content-Range", Fault::WrongTotal(1 << 20), Some(1), "changed during the read"),
        ("412 to If-Match", Fault::Status { code: 412, retry_after: None }, Some(1), "changed during the read"),
    ]
}

#[test]
fn fetch_and_weights_refuse_bytes_that_are_not_the_requested_bytes() {
    let s = common::server();
    let mut base = creds("fetch", "lies-fetch");
    base.extend(["--sizes", "4MiB", "--concurrency", "1", "--iters", "2", "--warmup", "0s", "--objects", "1", "--part-size", "1MiB"]);
    let mut first = base.clone();
    first.push("--prepare");
    prepare(&first, &s.endpoint);
    let mut synth = creds("weights", "lies-weights");
    synth.extend(["--synth", "tiny", "--model", "tiny", "--shard-size", "16MB"]);
    prepare(&synth, &s.endpoint);
    let mut weights = creds("weights", "lies-weights");
    weights.extend(["--model", "tiny", "--dest", "host", "--repeats", "1", "--part-size", "1MiB"]);
    // (what, args, requests let through, whether a version lie is seen: its reads span several GETs)
    let mut runs: Vec<(String, Vec<&str>, u32, bool)> = Vec::new();
    for path in ["direct", "sdk"] {
        let mut a = base.clone();
        a.extend(["--http-get", path]);
        // Skip 2: the run's first requests pass, the lie comes mid-run.
        runs.push((format!("fetch --http-get {path}"), a, 2, true));
    }
    // Skip 2: the index and a header are read, a window meets the lie. A
    // window of this small model is one GET: a version change is seen
    // because every window is pinned to the version the header came from.
    runs.push(("weights".into(), weights, 2, true));
    let mut problems = Vec::new();
    for (what, args, skip, parts) in &runs {
        let bucket = args[args.iter().position(|a| *a == "--bucket").unwrap() + 1];
        for (name, fault, count, says) in read_lies() {
            if count.is_some() && !parts {
                continue;
            }
            let rule = Rule { method: Some("GET"), path_contains: Some(format!("/{bucket}/")), skip: *skip, count, fault };
            let (o, _, tmp, injected, log) = faulted(args, &s.endpoint, rule);
            let err = stderr(&o);
            let ok = injected > 0
                && o.status.code() == Some(1)
                && err.contains(says)
                && !err.contains("panicked")
                && results_in(&tmp.path().join("results")).is_empty();
            if !ok {
                problems.push(format!("{what} under {name} ({injected} injected, exit {:?}): {}\n    {}", o.status.code(), err.trim(), log.join("\n    ")));
            }
        }
    }
    assert!(problems.is_empty(), "{} of the runs ended wrong:\n{}", problems.len(), problems.join("\n"));
}

/// A lie the headers cannot show (one flipped byte in a window of tensor
/// data, the right Content-Range) is caught by `weights --verify` through the
/// digest written with the model, exit 4 naming the tensor and the digest;
/// a re-read of the store would have returned the right bytes and passed
/// the wrong ones.
#[test]
fn a_flipped_byte_under_right_headers_is_caught_by_the_weights_digest() {
    let s = common::server();
    let mut synth = creds("weights", "lies-digest");
    synth.extend(["--synth", "tiny", "--model", "tiny", "--shard-size", "16MB"]);
    prepare(&synth, &s.endpoint);
    let mut a = creds("weights", "lies-digest");
    a.extend(["--model", "tiny", "--dest", "host", "--repeats", "1", "--concurrency", "1", "--verify"]);
    // Skip 8: the two header reads of each of the 4 shards pass; the first
    // window of tensor data gets the flip.
    let rule = Rule { method: Some("GET"), path_contains: Some("/lies-digest/tiny/model-".into()), skip: 8, count: Some(1), fault: Fault::FlipByte(4099) };
    let (o, _, _tmp, injected, log) = faulted(&a, &s.endpoint, rule);
    let err = stderr(&o);
    assert_eq!(injected, 1, "{}", log.join("\n"));
    assert_eq!(o.status.code(), Some(4), "{err}");
    assert!(err.contains("checked against the digest written with the model ('tiny/s3rdma-digest.json'") && !err.contains("panicked"), "{err}");
}

/// A lie the headers cannot show (one flipped byte, the right Content-Range)
/// is caught where a digest exists: a checkpoint restore checks every chunk
/// against its manifest's checksum and exits 4, naming the chunk.
#[test]
fn a_flipped_byte_under_right_headers_is_caught_by_the_checkpoint_manifest() {
    let s = common::server();
    std::fs::create_dir_all(s.root.join("lies-ckpt")).unwrap();
    let mut a = creds("ckpt", "lies-ckpt");
    a.extend(["--sizes", "8MiB", "--chunk", "1MiB", "--concurrency", "4", "--methods", "flat", "--repeats", "1", "--dest", "host"]);
    let mut save = a.clone();
    save.extend(["--ops", "save", "--keep"]);
    prepare(&save, &s.endpoint);
    a.extend(["--ops", "restore"]);
    // Skip 1: the manifest is read whole, a chunk's body is flipped.
    let rule = Rule { method: Some("GET"), path_contains: Some("/lies-ckpt/".into()), skip: 1, count: Some(1), fault: Fault::FlipByte(12345) };
    let (o, _, _tmp, injected, _) = faulted(&a, &s.endpoint, rule);
    let err = stderr(&o);
    assert_eq!(injected, 1);
    assert_ne!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("part0") && !err.contains("panicked"), "{err}");
}

/// fetch has no digest, but its objects' bytes are a function of key and
/// offset: with --verify a flipped byte under right headers ends the run
/// (exit 4, naming the object and the byte) on both GET paths, with no
/// record; without it the run says the bytes were not checked.
#[test]
fn fetch_verify_catches_a_flipped_byte_under_right_headers() {
    let s = common::server();
    let mut base = creds("fetch", "lies-fetch");
    base.extend(["--sizes", "1MiB", "--concurrency", "1", "--iters", "2", "--warmup", "0s", "--objects", "1", "--dest", "host"]);
    let mut first = base.clone();
    first.extend(["--prepare", "--verify"]);
    prepare(&first, &s.endpoint);
    let rule = || Rule { method: Some("GET"), path_contains: Some("/lies-fetch/".into()), skip: 0, count: Some(1), fault: Fault::FlipByte(777) };
    for path in ["direct", "sdk"] {
        let mut a = base.clone();
        a.extend(["--http-get", path, "--verify"]);
        let (o, _, tmp, injected, log) = faulted(&a, &s.endpoint, rule());
        let err = stderr(&o);
        assert_eq!(injected, 1, "{}", log.join("\n"));
        assert_eq!(o.status.code(), Some(4), "{path}: {err}");
        assert!(err.contains("object 'fetch/1048576/obj-000000'") && err.contains("byte 777 ") && !err.contains("panicked"), "{path}: {err}");
        assert!(results_in(&tmp.path().join("results")).is_empty(), "{path}: no record of a run that read other bytes");
    }
    // Read in windows (a reusable buffer smaller than the object): a later
    // window that states another object size is a change, never counted.
    for path in ["direct", "sdk"] {
        let mut a = base.clone();
        a.extend(["--http-get", path, "--stream-buffer", "256KiB", "--verify"]);
        let lie = Rule { method: Some("GET"), path_contains: Some("/lies-fetch/".into()), skip: 1, count: Some(1), fault: Fault::WrongTotal(2 << 20) };
        let (o, _, tmp, injected, log) = faulted(&a, &s.endpoint, lie);
        let err = stderr(&o);
        assert_eq!(injected, 1, "{}", log.join("\n"));
        assert_eq!(o.status.code(), Some(1), "{path}: {err}");
        assert!(err.contains("fetch/1048576/obj-000000") && err.contains("changed during the read"), "{path}: {err}");
        assert!(results_in(&tmp.path().join("results")).is_empty(), "{path}");
    }
    let mut a = base.clone();
    a.extend(["--http-get", "direct"]);
    let (o, ..) = faulted(&a, &s.endpoint, rule());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("bytes not compared with what --prepare wrote"), "the table says what was not checked");
}

/// A server asking (Retry-After) to wait longer than the tool waits between
/// attempts: the run stops at once on both GET paths, naming the wait, not
/// `--attempts`.
#[test]
fn a_retry_after_beyond_the_cap_is_named_not_blamed_on_attempts() {
    let s = common::server();
    let mut base = creds("fetch", "faults-wait");
    base.extend(["--sizes", "1MiB", "--concurrency", "1", "--iters", "1", "--warmup", "0s", "--objects", "1"]);
    let mut first = base.clone();
    first.push("--prepare");
    prepare(&first, &s.endpoint);
    for path in ["direct", "sdk"] {
        let mut a = base.clone();
        a.extend(["--http-get", path]);
        let rule = Rule {
            method: Some("GET"),
            path_contains: Some("/faults-wait/".into()),
            skip: 0,
            count: None,
            fault: Fault::Status { code: 503, retry_after: Some("120") },
        };
        let (o, took, tmp, injected, _) = faulted(&a, &s.endpoint, rule);
        let err = stderr(&o);
        assert_eq!((o.status.code(), injected), (Some(1), 1), "{path}: {err}");
        assert!(err.contains("the server asked to wait 2m (Retry-After), more than the 30s this tool waits"), "{path}: {err}");
        assert!(!err.contains("--attempts") && took < Duration::from_secs(5), "{path} {took:?}: {err}");
        assert!(results_in(&tmp.path().join("results")).is_empty());
    }
    // A HEAD (no body to say anything else) and a wait past any u64 of seconds: the wait is still named.
    let rule = Rule {
        method: Some("HEAD"),
        path_contains: Some("/faults-wait/".into()),
        skip: 0,
        count: None,
        fault: Fault::Status { code: 503, retry_after: Some("99999999999999999999") },
    };
    let (o, took, _tmp, injected, _) = faulted(&base, &s.endpoint, rule);
    let err = stderr(&o);
    assert_eq!((o.status.code(), injected), (Some(1), 1), "HEAD: {err}");
    assert!(err.contains("the server asked to wait more than a day (Retry-After), more than the 30s this tool waits"), "HEAD: {err}");
    assert!(took < Duration::from_secs(5), "HEAD {took:?}: {err}");
}
