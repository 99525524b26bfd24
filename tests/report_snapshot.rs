//! `s3rdma report` over the records committed in `results/` at commit 8ca402b
//! (listed in `tests/fixtures/report-expected/files.txt`; records added since
//! do not change the snapshot) prints exactly the tables it printed before the
//! bench-session refactor: the expected files were written by the build of
//! that commit (`report <files>` and `--format csv`), so any change to how
//! records are read shows here. One intended change since: http rows against
//! a server on the measuring host say so ("http (loopback server)", a note
//! under their table, a `server` CSV column); and records measured through
//! the libminiocpp test double (`results/test-double/`) are skipped unless
//! `--include-test-doubles`, so its two rdma rows are gone.

use std::path::Path;
use std::process::Command;

fn report(format: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let list = std::fs::read_to_string(root.join("tests/fixtures/report-expected/files.txt")).unwrap();
    let files: Vec<&str> = list.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(files.len(), 36, "the snapshot's record list");
    let o = Command::new(env!("CARGO_BIN_EXE_s3rdma")).arg("report").args(["--format", format]).args(&files).current_dir(root).output().expect("run s3rdma");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

fn expected(name: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report-expected").join(name)).unwrap()
}

#[test]
fn report_over_the_committed_results_is_unchanged() {
    assert_eq!(report("md"), expected("results.md"));
    assert_eq!(report("csv"), expected("results.csv"));
}

/// Every run record committed under `results/`, whatever its schema (1, 2
/// or 3) and bench, still gives `report` at least one row; only `verify`
/// records (a bring-up check, no figure to compare) are skipped with a
/// note. Files that are no run record (the peers harness's tables, probes)
/// are skipped as such.
#[test]
fn every_run_record_in_results_reports() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    let mut dirs = vec![root.join("results")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "json") {
                files.push(p);
            }
        }
    }
    let runs: Vec<(String, String, u64)> = files
        .iter()
        .filter_map(|p| {
            let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(p).ok()?).ok()?;
            let bench = v["benchmark"].as_str()?.to_string();
            (v["backend"].is_string() && !v["results"].is_null() && bench != "verify")
                .then(|| (p.file_name().unwrap().to_string_lossy().into_owned(), bench, v["schema_version"].as_u64().unwrap_or(0)))
        })
        .collect();
    let schemas: std::collections::BTreeSet<u64> = runs.iter().map(|r| r.2).collect();
    assert!(schemas.contains(&1) && schemas.contains(&2), "records of schema 1 and 2 are committed: {schemas:?}");
    let o = Command::new(env!("CARGO_BIN_EXE_s3rdma"))
        .args(["report", "--format", "json", "--include-test-doubles"])
        .args(&files)
        .current_dir(root)
        .output()
        .expect("run s3rdma");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    let shown: std::collections::BTreeSet<&str> = rows.iter().filter_map(|r| r["file"].as_str()).collect();
    let missing: Vec<&(String, String, u64)> = runs.iter().filter(|(f, _, _)| !shown.contains(f.as_str())).collect();
    assert!(missing.is_empty(), "run records with no report row: {missing:?}\n{}", String::from_utf8_lossy(&o.stderr));
}
