//! `s3rdma report` over the committed `results/*.json` prints exactly the
//! tables it printed before the bench-session refactor: the expected files
//! were written by the build of commit 8ca402b (`report results/*.json` and
//! `--format csv`), so any change to how records are read shows here.

use std::path::Path;
use std::process::Command;

fn report(format: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<String> = std::fs::read_dir(root.join("results"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| format!("results/{}", p.file_name().unwrap().to_string_lossy()))
        .collect();
    files.sort();
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
