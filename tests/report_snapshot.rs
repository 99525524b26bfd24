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
