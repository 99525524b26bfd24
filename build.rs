//! Records what the binary says about itself: the git commit it was built from
//! (run records carry it), and for `s3rdma --version` the build date, the
//! target triple and the cargo features compiled in. The build date is the
//! commit's date (or SOURCE_DATE_EPOCH when set), never the clock's, so two
//! builds of one commit are byte-identical.
use std::process::Command;

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let dirty = Command::new("git").args(["status", "--porcelain", "--untracked-files=no"]).output().ok().is_some_and(|o| !o.stdout.is_empty());
    println!("cargo:rustc-env=S3RDMA_GIT_COMMIT={commit}{}", if dirty { "-dirty" } else { "" });

    let epoch = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .or_else(|| git(&["log", "-1", "--format=%ct", "HEAD"]).and_then(|s| s.parse().ok()));
    let date = epoch.map(utc_timestamp).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=S3RDMA_BUILD_DATE={date}");
    println!("cargo:rustc-env=S3RDMA_TARGET={}", std::env::var("TARGET").unwrap_or_else(|_| "unknown".into()));
    // Cargo gives a build script one CARGO_FEATURE_<NAME> variable per enabled
    // feature, `default` included (an empty list here).
    let mut features: Vec<String> =
        std::env::vars().filter_map(|(k, _)| k.strip_prefix("CARGO_FEATURE_").map(|f| f.to_lowercase().replace('_', "-"))).filter(|f| f != "default").collect();
    features.sort();
    println!("cargo:rustc-env=S3RDMA_FEATURES={}", if features.is_empty() { "none".to_string() } else { features.join(",") });
    println!(
        "cargo:rustc-env=S3RDMA_TRAIN={}",
        if features.iter().any(|f| f == "train") { "yes" } else { "no (the model needs a build with --features train; `train --loader-only` works)" }
    );

    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/index");
    // A commit moves the branch's ref, not .git/HEAD (which names the branch):
    // without this, a build after a commit kept the commit before it.
    if let Ok(head) = std::fs::read_to_string(".git/HEAD")
        && let Some(r) = head.trim().strip_prefix("ref: ")
    {
        println!("cargo:rerun-if-changed=.git/{r}");
        println!("cargo:rerun-if-changed=.git/packed-refs");
    }
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
}

/// `git ARGS` in the package directory: its trimmed output, or None (no git, not a checkout).
fn git(args: &[&str]) -> Option<String> {
    Command::new("git")
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Seconds since the Unix epoch as `YYYY-MM-DDTHH:MM:SSZ` (proleptic Gregorian, UTC).
fn utc_timestamp(secs: i64) -> String {
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Days to civil date (H. Hinnant's algorithm: eras of 400 years from 0000-03-01).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}
