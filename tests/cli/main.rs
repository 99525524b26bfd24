//! The built binary, driven as a user would, one module per subcommand
//! (fetch, ckpt, weights, ingest/tokens/train, report, the witness and the
//! rdma double), over a real S3 server (s3s-fs in-process) and a local
//! directory. This file holds the helpers they share.

mod aws;
mod ckpt;
mod ckpt_async;
#[path = "../common/mod.rs"]
mod common;
mod completion;
mod data;
mod dataset_trust;
mod faults;
mod fetch;
mod list;
mod ranks;
mod real_lib;
mod report;
mod weights;
mod witness;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

/// Variables the AWS settings are read from (src/store/aws.rs), cleared for every run.
const AWS_ENV: [&str; 16] = [
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_PROFILE",
    "AWS_CA_BUNDLE",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "S3_ENDPOINT",
    "S3_ACCESS_KEY",
    "S3_SECRET_KEY",
    "S3_METRICS_SERVERS",
];

/// Nothing from the caller's environment may leak into a test: no AWS
/// variables, no profile files (they point nowhere), no instance metadata.
fn isolate(c: &mut Command) -> &mut Command {
    for k in AWS_ENV.iter().chain(&["RUST_LOG"]) {
        c.env_remove(k);
    }
    c.env("AWS_CONFIG_FILE", "/nonexistent/s3rdma-test/config")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/s3rdma-test/credentials")
        .env("AWS_EC2_METADATA_DISABLED", "true")
}

fn s3rdma(args: &[&str], cwd: &Path) -> Output {
    isolate(Command::new(env!("CARGO_BIN_EXE_s3rdma")).args(args).current_dir(cwd)).output().expect("run s3rdma")
}

/// Every file under `dir`, recursively (paths as strings; none when it is missing).
fn walk(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p.to_string_lossy().into_owned());
        }
    }
    out
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn http_args<'a>(endpoint: &'a str, bucket: &'a str) -> Vec<&'a str> {
    vec!["fetch", "--backend", "http", "--endpoint", endpoint, "--access-key", common::ACCESS_KEY, "--secret-key", common::SECRET_KEY, "--bucket", bucket]
}

fn results_in(dir: &Path) -> Vec<std::path::PathBuf> {
    match std::fs::read_dir(dir) {
        Ok(rd) => rd.map(|e| e.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    }
}

/// A failed run: the exit code, one line on stderr naming `needle`, no panic,
/// no result file, no secret.
fn assert_fails(o: &Output, code: i32, needle: &str, results: &Path) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(code), "stderr: {err}");
    assert!(err.contains(needle), "stderr lacks {needle:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(!err.contains(common::SECRET_KEY) && !String::from_utf8_lossy(&o.stdout).contains(common::SECRET_KEY));
    assert!(results_in(results).is_empty(), "a failed run left a result file");
}

const MIB: u64 = 1 << 20;

fn rdma_args<'a>(endpoint: &'a str, bucket: &'a str, lib: &'a str) -> Vec<&'a str> {
    let mut a = http_args(endpoint, bucket);
    a[2] = "rdma";
    a.extend(["--rdma-lib", lib]);
    a
}

fn s3rdma_env(args: &[&str], cwd: &Path, env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_s3rdma"));
    isolate(c.args(args).current_dir(cwd)).env_remove("MINIOCPP_LIB");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run s3rdma")
}

/// The real inputs scripts/test.sh fetches (not committed): a Hugging Face
/// tokenizer.json and JPEG photographs. `None` (and a printed reason) without them.
fn test_input(var: &str, default: &str) -> Option<std::path::PathBuf> {
    let p = std::env::var_os(var).map(std::path::PathBuf::from).unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(default));
    if p.exists() {
        Some(p)
    } else {
        eprintln!("SKIP: {} missing ({var}); scripts/test.sh fetches it", p.display());
        None
    }
}

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "exit {:?}: {}", o.status.code(), stderr(o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn record(o: &Output) -> Value {
    serde_json::from_str(&ok(o)).expect("--json prints the record")
}

fn local_args(root: &str) -> Vec<&str> {
    vec!["--root", root, "--bucket", "data"]
}

fn with_http<'a>(sub: &[&'a str], endpoint: &'a str, bucket: &'a str) -> Vec<&'a str> {
    let mut v = sub.to_vec();
    v.extend(&http_args(endpoint, bucket)[1..]);
    v
}
