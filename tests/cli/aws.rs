//! Credentials, endpoints and TLS set up the way users of the AWS CLI and SDKs
//! set them up (src/store/aws.rs): a profile in real `~/.aws` files, a
//! `credential_process`, temporary keys with a session token checked by the
//! server, the service-specific endpoint variable, a private CA made at test
//! time. Each run's record says where every value came from.

use std::path::Path;

use serde_json::Value;

use super::common::faultproxy::{Fault, FaultProxy, Rule};
use super::{common, s3rdma_env, stderr};

/// A small fetch against `bucket` (no endpoint or keys: they come from the setup under test).
fn fetch_args(bucket: &str, results: &Path) -> Vec<String> {
    [
        "fetch",
        "--backend",
        "http",
        "--bucket",
        bucket,
        "--sizes",
        "1MiB",
        "--concurrency",
        "1",
        "--iters",
        "1",
        "--warmup",
        "0s",
        "--objects",
        "1",
        "--prepare",
        "--results-dir",
        results.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec()
}

fn run(args: &[String], cwd: &Path, env: &[(&str, &str)]) -> std::process::Output {
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    s3rdma_env(&a, cwd, env)
}

/// The one record in `dir`: its `environment.store`.
fn store_record(dir: &Path) -> Value {
    let files = super::results_in(dir);
    assert_eq!(files.len(), 1, "{files:?}");
    let r: Value = serde_json::from_slice(&std::fs::read(&files[0]).unwrap()).unwrap();
    r["environment"]["store"].clone()
}

/// `~/.aws/config` and `~/.aws/credentials` under `home`.
fn aws_files(home: &Path, config: &str, credentials: &str) -> (String, String) {
    let dir = home.join(".aws");
    std::fs::create_dir_all(&dir).unwrap();
    let (c, k) = (dir.join("config"), dir.join("credentials"));
    std::fs::write(&c, config).unwrap();
    std::fs::write(&k, credentials).unwrap();
    (c.to_string_lossy().into_owned(), k.to_string_lossy().into_owned())
}

/// Only `AWS_PROFILE=bench` and the two files: the endpoint (through the
/// profile's `services` section), the keys, the region and the addressing
/// style all come from them, and the record names each source.
#[test]
fn a_profile_alone_reaches_the_server() {
    let tmp = tempfile::tempdir().unwrap();
    let endpoint = &common::server().endpoint;
    let (config, credentials) = aws_files(
        tmp.path(),
        &format!(
            "[profile bench]\nregion = us-east-1\nservices = local-s3\ns3 =\n  addressing_style = path\n\n[services local-s3]\ns3 =\n  endpoint_url = {endpoint}\n"
        ),
        &format!("[bench]\naws_access_key_id = {}\naws_secret_access_key = {}\n", common::ACCESS_KEY, common::SECRET_KEY),
    );
    let results = tmp.path().join("r");
    let env = [("HOME", tmp.path().to_str().unwrap()), ("AWS_PROFILE", "bench"), ("AWS_CONFIG_FILE", &config), ("AWS_SHARED_CREDENTIALS_FILE", &credentials)];
    let o = run(&fetch_args("aws-profile", &results), tmp.path(), &env);
    assert!(o.status.success(), "{}", stderr(&o));
    let store = store_record(&results);
    assert_eq!(store["endpoint"], endpoint.as_str());
    let aws = &store["aws"];
    assert_eq!(aws["credentials_source"], "profile 'bench'", "{aws}");
    assert_eq!(aws["region_source"], "profile 'bench' region", "{aws}");
    assert_eq!(aws["addressing_source"], "profile 'bench' s3.addressing_style", "{aws}");
    assert_eq!(aws["profile"], "bench");
    assert_eq!(aws["session_token"], false);
    let src = aws["endpoint_source"].as_str().unwrap();
    assert_eq!(src, "profile 'bench' services section, s3 endpoint_url");

    // A profile that is not in the files: said, with both files named.
    let o = run(&fetch_args("aws-profile", &results), tmp.path(), &[env[0], ("AWS_PROFILE", "nosuch"), env[2], env[3]]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("profile 'nosuch' (from AWS_PROFILE) is in neither ~/.aws/config nor ~/.aws/credentials"), "{}", stderr(&o));
}

/// `credential_process` (how SSO helpers, vaults and IAM Roles Anywhere hand
/// out keys): the keys it prints are used; a process that fails stops the run
/// with what it said, before any request.
#[test]
fn credential_process_supplies_the_keys() {
    let tmp = tempfile::tempdir().unwrap();
    let script = tmp.path().join("creds.sh");
    std::fs::write(
        &script,
        format!("#!/bin/sh\necho '{{\"Version\": 1, \"AccessKeyId\": \"{}\", \"SecretAccessKey\": \"{}\"}}'\n", common::ACCESS_KEY, common::SECRET_KEY),
    )
    .unwrap();
    let broken = tmp.path().join("broken.sh");
    std::fs::write(&broken, "#!/bin/sh\necho 'token for sso session expired: run aws sso login' >&2\nexit 3\n").unwrap();
    for f in [&script, &broken] {
        std::fs::set_permissions(f, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    let endpoint = &common::server().endpoint;
    let (config, credentials) = aws_files(
        tmp.path(),
        &format!(
            "[profile cp]\nendpoint_url = {endpoint}\ncredential_process = {}\n\n[profile cpfail]\nendpoint_url = {endpoint}\ncredential_process = {}\n",
            script.display(),
            broken.display()
        ),
        "",
    );
    let results = tmp.path().join("r");
    let files = [("AWS_CONFIG_FILE", config.as_str()), ("AWS_SHARED_CREDENTIALS_FILE", credentials.as_str())];
    let o = run(&[fetch_args("aws-cp", &results), vec!["--profile".into(), "cp".into()]].concat(), tmp.path(), &files);
    assert!(o.status.success(), "{}", stderr(&o));
    let aws = &store_record(&results)["aws"];
    assert_eq!(aws["credentials_source"], "profile 'cp'", "{aws}");
    assert_eq!(aws["endpoint_source"], "profile 'cp' endpoint_url", "{aws}");

    let failed = tmp.path().join("r2");
    let o = run(&[fetch_args("aws-cp", &failed), vec!["--profile".into(), "cpfail".into()]].concat(), tmp.path(), &files);
    super::assert_fails(&o, 2, "--backend http needs credentials: profile 'cpfail' is configured but did not give them", &failed);
    assert!(stderr(&o).contains("run aws sso login"), "what the process said is passed on: {}", stderr(&o));
}

/// A `credential_process` whose credentials expire `LIFE` seconds after it
/// prints them: 30 s (under the 60 s margin the direct GET path once
/// refreshed by) and 2 s (under the SDK's own 10 s margin). A 3 s run of many
/// GETs on either GET path runs it once per three quarters of the lifetime
/// (30 s: once; 2 s: every 1.5 s), never once per GET, and says the lifetime is short.
#[test]
fn short_lived_process_credentials_are_not_fetched_per_get() {
    let tmp = tempfile::tempdir().unwrap();
    let (script, runs) = (tmp.path().join("creds.sh"), tmp.path().join("runs"));
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho run >> '{}'\nexp=$(date -u -d \"+${{LIFE:-30}} seconds\" +%Y-%m-%dT%H:%M:%SZ)\necho \"{{\\\"Version\\\": 1, \\\"AccessKeyId\\\": \\\"{}\\\", \\\"SecretAccessKey\\\": \\\"{}\\\", \\\"Expiration\\\": \\\"$exp\\\"}}\"\n",
            runs.display(),
            common::ACCESS_KEY,
            common::SECRET_KEY
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let endpoint = &common::server().endpoint;
    let (config, credentials) = aws_files(tmp.path(), &format!("[profile short]\nendpoint_url = {endpoint}\ncredential_process = {}\n", script.display()), "");
    let results = tmp.path().join("r");
    let a: Vec<String> = [
        "fetch",
        "--backend",
        "http",
        "--bucket",
        "aws-short",
        "--profile",
        "short",
        "--sizes",
        "64KiB",
        "--objects",
        "1",
        "--concurrency",
        "2",
        "--warmup",
        "0s",
        "--json",
        "--results-dir",
        results.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec();
    let files = [("AWS_CONFIG_FILE", config.as_str()), ("AWS_SHARED_CREDENTIALS_FILE", credentials.as_str()), ("LIFE", "30")];
    let o = run(&[a.clone(), vec!["--prepare".into(), "--duration".into(), "100ms".into()]].concat(), tmp.path(), &files);
    assert!(o.status.success(), "{}", stderr(&o));
    // (lifetime, GET path, most runs in 3 s: set-up, then one per three quarters of the lifetime, plus one of slack)
    for (life, path, most) in [("30", "direct", 2), ("2", "direct", 4), ("2", "sdk", 4)] {
        let _ = std::fs::remove_file(&runs);
        let env = [files[0], files[1], ("LIFE", life)];
        let o = run(&[a.clone(), ["--duration", "3s", "--http-get", path].map(String::from).to_vec()].concat(), tmp.path(), &env);
        assert!(o.status.success(), "{life} s, {path}: {}", stderr(&o));
        let rec: Value = serde_json::from_slice(&o.stdout).unwrap();
        let gets = rec["results"][0]["repeats"][0]["ops"].as_u64().unwrap();
        let ran = std::fs::read_to_string(&runs).unwrap().lines().count();
        assert!(gets > 50, "{life} s, {path}: {gets} GETs: too few to show a per-GET refresh");
        assert!(ran <= most, "{life} s, {path}: credential_process ran {ran} times for {gets} GETs in 3 s");
        assert!(stderr(&o).contains("warning: the credentials' source hands out credentials that expire"), "{life} s, {path}: {}", stderr(&o));
        // The record says it too: the warning, every set fetched, their lifetime.
        let warned = rec["environment"]["warnings"].as_array().unwrap().iter().any(|w| w.as_str().unwrap().starts_with("the credentials' source hands out"));
        assert!(warned, "{life} s, {path}: {}", rec["environment"]["warnings"]);
        let aws = &rec["environment"]["store"]["aws"];
        assert_eq!(aws["credentials_fetched"].as_u64(), Some(ran as u64), "{life} s, {path}: {aws}");
        let lifetime = aws["credentials_lifetime_s"].as_f64().unwrap();
        let life: f64 = life.parse().unwrap();
        // The script's Expiration has whole seconds.
        assert!(lifetime > life - 1.5 && lifetime <= life, "{life} s, {path}: {aws}");
    }
}

/// A `credential_process` that never answers (it starts a child and waits):
/// a run stopped by SIGTERM while waiting for it exits 143 within a second
/// and stops the process and its child too, which the SDK leaves running.
#[test]
fn a_hung_credential_process_is_stopped_with_the_run() {
    use std::io::Read;
    let tmp = tempfile::tempdir().unwrap();
    let (script, pid_file) = (tmp.path().join("hang.sh"), tmp.path().join("pid"));
    std::fs::write(&script, format!("#!/bin/sh\nsleep 300 &\necho $! > '{}'\nwait\n", pid_file.display())).unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let endpoint = &common::server().endpoint;
    let (config, credentials) = aws_files(tmp.path(), &format!("[profile hang]\nendpoint_url = {endpoint}\ncredential_process = {}\n", script.display()), "");
    let results = tmp.path().join("r");
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_s3rdma"));
    super::isolate(c.args(fetch_args("aws-hang", &results)).args(["--profile", "hang"]).current_dir(tmp.path()))
        .env("AWS_CONFIG_FILE", &config)
        .env("AWS_SHARED_CREDENTIALS_FILE", &credentials)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    let t0 = std::time::Instant::now();
    let sleeper: i32 = loop {
        if let Some(pid) = std::fs::read_to_string(&pid_file).ok().and_then(|s| s.trim().parse().ok()) {
            break pid;
        }
        assert!(t0.elapsed() < std::time::Duration::from_secs(20), "the credential_process never started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(child.try_wait().unwrap().is_none(), "the run ended while its credentials were pending");
    let t0 = std::time::Instant::now();
    // SAFETY: kill(2) on the PID of a child this test started and has not reaped.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let code = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s.code();
        }
        assert!(t0.elapsed() < std::time::Duration::from_secs(10), "still running 10 s after SIGTERM");
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert_eq!(code, Some(143), "{err}");
    assert!(t0.elapsed() < std::time::Duration::from_secs(1), "exited {:?} after SIGTERM: {err}", t0.elapsed());
    let t1 = std::time::Instant::now();
    while !super::ranks::gone(sleeper as u32) {
        if t1.elapsed() > std::time::Duration::from_secs(2) {
            // SAFETY: kill(2) on the sleep this test's script started, so it does not outlive the test.
            unsafe { libc::kill(sleeper, libc::SIGKILL) };
            panic!("the credential_process's child {sleeper} outlived the run: {err}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(!results.exists() || super::results_in(&results).is_empty(), "no record");
}

/// Temporary keys: the server (a proxy in front of it) refuses every request
/// without `X-Amz-Security-Token`, as AWS does. With `AWS_SESSION_TOKEN` set,
/// both GET paths and every other request carry it; without it, the refusal
/// names the key id and the session token as the fix.
#[test]
fn the_session_token_is_sent_on_every_path() {
    let tmp = tempfile::tempdir().unwrap();
    let proxy = FaultProxy::start(&common::server().endpoint);
    proxy.set(Rule::every(None, Fault::RequireHeader("x-amz-security-token")));
    let keys = [("AWS_ACCESS_KEY_ID", common::ACCESS_KEY), ("AWS_SECRET_ACCESS_KEY", common::SECRET_KEY)];
    for get in ["direct", "sdk"] {
        let results = tmp.path().join(get);
        let args = [fetch_args("aws-token", &results), vec!["--endpoint".into(), proxy.endpoint.clone(), "--http-get".into(), get.into()]].concat();
        let o = run(&args, tmp.path(), &[keys[0], keys[1], ("AWS_SESSION_TOKEN", "FwoGZXIvYXdzEXAMPLE")]);
        assert!(o.status.success(), "--http-get {get}: {}", stderr(&o));
        let store = store_record(&results);
        assert_eq!(store["get_path"], get);
        assert_eq!((store["aws"]["session_token"].clone(), store["aws"]["credentials_source"].clone()), (true.into(), "environment".into()));
        assert!(
            !String::from_utf8_lossy(&std::fs::read(&super::results_in(&results)[0]).unwrap()).contains("FwoGZXIvYXdzEXAMPLE"),
            "the token is never recorded"
        );
    }
    let results = tmp.path().join("none");
    let o = run(&[fetch_args("aws-token", &results), vec!["--endpoint".into(), proxy.endpoint.clone()]].concat(), tmp.path(), &keys);
    // The first request is a HEAD, whose refusal has no body to name the code.
    super::assert_fails(&o, 1, "HTTP 403", &results);
    assert!(stderr(&o).contains("AWS_SESSION_TOKEN"), "{}", stderr(&o));
}

/// `AWS_ENDPOINT_URL_S3` wins over `AWS_ENDPOINT_URL` (as in every AWS SDK);
/// `--endpoint` over both.
#[test]
fn the_s3_endpoint_variable_wins_over_the_global_one() {
    let tmp = tempfile::tempdir().unwrap();
    let dead = format!("http://127.0.0.1:{}", common::dead_port());
    let keys = [("AWS_ACCESS_KEY_ID", common::ACCESS_KEY), ("AWS_SECRET_ACCESS_KEY", common::SECRET_KEY)];
    let results = tmp.path().join("r");
    let o = run(
        &fetch_args("aws-endpoint", &results),
        tmp.path(),
        &[keys[0], keys[1], ("AWS_ENDPOINT_URL", &dead), ("AWS_ENDPOINT_URL_S3", &common::server().endpoint)],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let store = store_record(&results);
    assert_eq!(store["endpoint"], common::server().endpoint.as_str());
    assert_eq!(store["aws"]["endpoint_source"], "AWS_ENDPOINT_URL_S3");

    let results = tmp.path().join("r2");
    let args = [fetch_args("aws-endpoint", &results), vec!["--endpoint".into(), common::server().endpoint.clone()]].concat();
    let o = run(&args, tmp.path(), &[keys[0], keys[1], ("AWS_ENDPOINT_URL_S3", &dead)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(store_record(&results)["aws"]["endpoint_source"], "--endpoint");
}

/// An https endpoint whose certificate a private CA signed (made here with
/// openssl): without the CA, a configuration error (exit 2) that names the
/// certificate problem and the fix, after one connection (never retried);
/// with `AWS_CA_BUNDLE`, or with only `AWS_PROFILE` naming a profile that
/// holds endpoint, keys and `ca_bundle`, the run reaches the server.
#[test]
fn a_private_ca_is_trusted_only_when_configured() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(pki) = common::tls::make_pki(tmp.path()) else { return };
    let front = common::tls::start(&pki, &common::server().endpoint);
    let keys = [("AWS_ACCESS_KEY_ID", common::ACCESS_KEY), ("AWS_SECRET_ACCESS_KEY", common::SECRET_KEY)];
    let with_endpoint =
        |results: &Path| [fetch_args("aws-tls", results), vec!["--endpoint".into(), front.endpoint.clone(), "--attempts".into(), "3".into()]].concat();

    let results = tmp.path().join("untrusted");
    let o = run(&with_endpoint(&results), tmp.path(), &keys);
    super::assert_fails(&o, 2, "its certificate is signed by an authority this client does not trust", &results);
    assert!(stderr(&o).contains("--ca-bundle") && stderr(&o).contains("AWS_CA_BUNDLE"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("--attempts"), "not a broken connection: {}", stderr(&o));
    assert_eq!(front.handshakes.load(std::sync::atomic::Ordering::SeqCst), 1, "a certificate problem is not retried");

    let results = tmp.path().join("env");
    let ca = pki.ca.to_str().unwrap();
    let o = run(&with_endpoint(&results), tmp.path(), &[keys[0], keys[1], ("AWS_CA_BUNDLE", ca)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(store_record(&results)["aws"]["ca_bundle"]["source"], "AWS_CA_BUNDLE");

    let (config, credentials) = aws_files(
        tmp.path(),
        &format!("[profile bench]\nendpoint_url = {}\nca_bundle = {ca}\n", front.endpoint),
        &format!("[bench]\naws_access_key_id = {}\naws_secret_access_key = {}\n", common::ACCESS_KEY, common::SECRET_KEY),
    );
    let results = tmp.path().join("profile");
    let env = [("HOME", tmp.path().to_str().unwrap()), ("AWS_PROFILE", "bench"), ("AWS_CONFIG_FILE", &config), ("AWS_SHARED_CREDENTIALS_FILE", &credentials)];
    let o = run(&fetch_args("aws-tls", &results), tmp.path(), &env);
    assert!(o.status.success(), "{}", stderr(&o));
    let store = store_record(&results);
    assert_eq!(store["endpoint"], front.endpoint.as_str());
    assert_eq!(store["aws"]["ca_bundle"]["source"], "profile 'bench' ca_bundle");
    assert_eq!(store["aws"]["credentials_source"], "profile 'bench'");
}
