//! CompleteMultipartUpload under what a large object meets, each through the
//! fault proxy in front of the test server (s3s-fs): an answer that outlives
//! the client's timeout (the server completed the upload, the SDK sends the
//! request again and finds the upload gone), an answer of HTTP 200 with an
//! error in its body, and a real policy refusal. A save that succeeded must
//! not fail; a failure must never pass; a refusal must still name the policy.

use super::*;
use common::faultproxy::{Fault, FaultProxy, Rule};

/// A 24 MiB object in 8 MiB parts: 3 UploadParts, then the completion, whose
/// timeout is 1 s + 24 MiB at 50 MB/s (src/store/http/multipart.rs,
/// `scaled_read_timeout`): 1.5 s.
fn upload(bucket: &str, endpoint: &str) -> Vec<String> {
    let mut a: Vec<String> =
        ["fetch", "--backend", "http", "--access-key", common::ACCESS_KEY, "--secret-key", common::SECRET_KEY, "--bucket", bucket].map(String::from).to_vec();
    let flags = ["--sizes", "24MiB", "--objects", "1", "--concurrency", "1", "--iters", "1", "--warmup", "0s", "--prepare", "--verify"];
    a.extend(flags.map(String::from));
    a.extend(["--part-size", "8MiB", "--read-timeout", "1s", "--connect-timeout", "1s", "--attempts", "3", "--json", "--endpoint", endpoint].map(String::from));
    a
}

/// The completion requests (POST with an upload id) the proxy saw.
fn completions(log: &[String]) -> usize {
    log.iter().filter(|l| l.contains(" POST ") && l.contains("uploadId=")).count()
}

fn on_completion(count: Option<u32>, fault: Fault) -> Rule {
    Rule { method: Some("POST"), path_contains: Some("uploadId=".into()), skip: 0, count, fault }
}

fn run(bucket: &str, rule: Rule) -> (Output, Vec<String>, tempfile::TempDir) {
    let s = common::server();
    let proxy = FaultProxy::start(&s.endpoint);
    proxy.set(rule);
    let tmp = tempfile::tempdir().unwrap();
    let a = upload(bucket, &proxy.endpoint);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let o = s3rdma(&a, tmp.path());
    (o, proxy.log(), tmp)
}

fn confirmed(rec: &Value) -> &Value {
    &rec["environment"]["store_stats"]["whole_run_this_rank"]["multipart_completions_confirmed"]
}

/// The server completes the upload but its answer comes 4 s later, past the
/// completion's 1.5 s timeout: the SDK sends it again, s3s-fs refuses the
/// upload it no longer has (AccessDenied; AWS and MinIO say NoSuchUpload),
/// and the HEAD of the key finds the object as uploaded (size and multipart
/// ETag), so the run goes on and its --verify reads the right bytes. Before
/// the fix this run failed with "access denied ... check the user's and the
/// bucket's policy".
#[test]
fn a_completion_answered_late_is_confirmed_by_a_head_not_failed() {
    let (o, log, _tmp) = run("completion-late", on_completion(Some(1), Fault::AnswerLate(std::time::Duration::from_secs(4))));
    let err = stderr(&o);
    let all = log.join("\n");
    assert_eq!(completions(&log), 2, "the timed-out completion was sent again: {err}\n{all}");
    assert!(err.contains("the upload was gone when the request was sent again") && err.contains("taken as completed"), "{err}");
    // Exit 0 (record() asserts it): --verify read back the pattern written (other bytes exit 4).
    let rec = record(&o);
    assert_eq!(confirmed(&rec), 1, "{}", rec["environment"]["store_stats"]);
    assert!(rec["params"]["verify_checks"].is_string(), "{}", rec["params"]);
}

/// S3 may answer CompleteMultipartUpload HTTP 200 with an error in the body.
/// After the server completed it (the answer replaced by `InternalError`):
/// the SDK retries it as an error, finds the upload gone, and the HEAD
/// confirms the object. Instead of a completion (every answer so): the run
/// fails, naming the 200 and the code, and no object is left.
#[test]
fn an_error_in_a_200_is_an_error_and_a_completed_upload_behind_it_is_confirmed() {
    let (o, log, _tmp) = run("completion-200-done", on_completion(Some(1), Fault::ErrorIn200 { code: "InternalError", forward: true }));
    assert_eq!(completions(&log), 2, "{}\n{}", stderr(&o), log.join("\n"));
    assert_eq!(confirmed(&record(&o)), 1);

    let (o, log, tmp) = run("completion-200-never", on_completion(None, Fault::ErrorIn200 { code: "InternalError", forward: false }));
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("answered HTTP 200 with an error in its body (InternalError"), "{err}");
    assert_eq!(completions(&log), 3, "InternalError is retried, 3 attempts: {}", log.join("\n"));
    assert!(results_in(&tmp.path().join("results")).is_empty(), "a failed upload left a record");
    let left = walk(&common::server().root.join("completion-200-never"));
    assert!(left.iter().all(|p| !p.ends_with("obj-000000")), "no object from a failed completion: {left:?}");
}

/// A policy that refuses CompleteMultipartUpload itself: the HEAD finds no
/// object, so the refusal stands, still naming the policy, and the message
/// says what the HEAD found against what the completion would have left.
#[test]
fn a_real_policy_refusal_of_the_completion_still_names_the_policy() {
    let (o, log, tmp) = run("completion-denied", on_completion(None, Fault::Status { code: 403, retry_after: None }));
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("policy"), "{err}");
    assert!(err.contains("a HEAD of the key found no object where a completed upload would have left 25165824 bytes with ETag "), "{err}");
    assert_eq!(completions(&log), 1, "a refusal is not retried: {}", log.join("\n"));
    eprintln!("{}", err.trim());
    assert!(results_in(&tmp.path().join("results")).is_empty());
}
