//! README.md's result tables are `s3rdma report` over the records listed in
//! `results/README-records.txt`, exactly: a table edited by hand, a record
//! added to the list without running `scripts/readme-tables.sh`, or a change
//! to how `report` renders shows here.

use std::path::Path;
use std::process::Command;

#[test]
fn readme_tables_are_the_reports_of_the_listed_records() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let list = std::fs::read_to_string(root.join("results/README-records.txt")).unwrap();
    // As scripts/readme-tables.sh reads it: trimmed, blank lines and # comments ignored.
    let files: Vec<&str> = list.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).collect();
    assert!(files.len() >= 5, "the README's record list: {files:?}");
    for f in &files {
        assert!(root.join(f).is_file(), "{f} is listed in results/README-records.txt but does not exist");
    }
    let o = Command::new(env!("CARGO_BIN_EXE_s3rdma")).arg("report").args(&files).current_dir(root).output().expect("run s3rdma");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let tables = String::from_utf8(o.stdout).unwrap();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let (begin, end) = ("<!-- report:begin -->\n", "<!-- report:end -->");
    let a = readme.find(begin).expect("README.md has <!-- report:begin -->") + begin.len();
    let b = readme[a..].find(end).map(|i| a + i).expect("README.md has <!-- report:end --> after <!-- report:begin -->");
    assert_eq!(readme[a..b], format!("\n{tables}\n"), "README.md's tables differ from the report: run scripts/readme-tables.sh");
}

/// The schema version README.md and docs/results.md name is the one this
/// build writes.
#[test]
fn the_docs_name_the_schema_version_this_build_writes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let v = s3rdma::record::SCHEMA_VERSION;
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    assert!(
        readme.contains(&format!("`schema_version` {v} (`report` reads 1 to {v})")),
        "README.md's Result records section names another schema version than {v}"
    );
    let results = std::fs::read_to_string(root.join("docs/results.md")).unwrap();
    assert!(results.contains(&format!("| `schema_version` | layout version ({v};")), "docs/results.md names another schema version than {v}");
}
