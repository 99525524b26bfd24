//! The end of a run: the one exit decision ([`exit_status`]) and printing
//! the table, then writing the record ([`conclude`]). Part of the session
//! (`session/mod.rs`), which every bench ends through.

use crate::error::{Error, Result};
use crate::flag::REQUIRE_RDMA;
use crate::record::OutputConfig;
use crate::record::RunRecord;
use crate::witness::Verdict;

/// The exit decision of a finished run, the one place in `src/` that makes
/// it (README "Exit codes"): the bench's own failure first (a data mismatch
/// is 4, a failed step 1), then `--require-rdma` with any verdict but
/// rdma-verified (3), else 0.
pub fn exit_status(failure: Option<Error>, require_rdma: bool, verdict: Verdict, reason: &str) -> Result<()> {
    if let Some(e) = failure {
        return Err(e);
    }
    if require_rdma && verdict != Verdict::RdmaVerified {
        return Err(Error::WitnessFailed(format!("RDMA not proven ({REQUIRE_RDMA}): witness verdict {} for {reason}", verdict.as_str())));
    }
    Ok(())
}

/// Where `record` is written: `dir`, or `dir/test-double/` for a record made
/// through a stand-in RDMA engine (`environment.store.library.test_double`),
/// so such records never sit among measurements of RDMA.
fn records_dir(record: &RunRecord, dir: &std::path::Path) -> std::path::PathBuf {
    if record.environment.store.pointer("/library/test_double").and_then(serde_json::Value::as_bool) == Some(true) {
        dir.join("test-double")
    } else {
        dir.to_path_buf()
    }
}

/// The end of every run that leaves a record: print the terminal table
/// (`print`), or the record as JSON with `--json`; then write the record
/// (if that fails, say why and print the record's JSON to stderr, so the
/// measurement is not lost); the exit code is [`exit_status`]'s.
///
/// Errors: as [`exit_status`]; when that passes but the record cannot be written, exit 1.
#[allow(clippy::too_many_arguments)]
pub fn conclude(
    record: &RunRecord,
    output: &OutputConfig,
    started: chrono::DateTime<chrono::Utc>,
    print: impl FnOnce(),
    failure: Option<Error>,
    require_rdma: bool,
    verdict: Verdict,
    reason: &str,
) -> Result<()> {
    // Output that cannot be written (stdout redirected to a full disk, a
    // closed pipe) must not cost the measurement: the record is written
    // anyway, then the run fails saying both.
    let printed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if output.json {
            println!("{}", serde_json::to_string_pretty(record).expect("record encodes"));
        } else {
            print();
        }
    }));
    let unprinted = match printed {
        Ok(()) => None,
        Err(p) => match crate::error::output_failure(p.as_ref()) {
            Some(msg) => Some(msg),
            None => std::panic::resume_unwind(p),
        },
    };
    let status = exit_status(failure, require_rdma, verdict, reason);
    match record.write(&records_dir(record, &output.results_dir), started) {
        Ok(path) if unprinted.is_some() => {
            let msg = unprinted.unwrap_or_default();
            return status.and(Err(Error::Runtime(format!("{msg}: the table was not printed; the record was written to {}", path.display()))));
        }
        Ok(path) => {
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "wrote {}", path.display());
        }
        Err(e) => {
            // The reason first, then the measurement, so neither is lost; a
            // failed verdict or data check keeps its own exit code (3, 4).
            eprintln!("error: {}", (output.explain)(&e));
            if !output.json {
                eprintln!("the record that could not be written:\n{}", serde_json::to_string_pretty(record).expect("record encodes"));
            }
            return status.and(Err(e));
        }
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_come_from_one_rule() {
        let ok = exit_status(None, true, Verdict::RdmaVerified, "r");
        assert!(ok.is_ok());
        let e = exit_status(None, true, Verdict::FullFallback, "cell 1").unwrap_err();
        assert_eq!(e.exit_code(), 3);
        assert!(e.to_string().contains("full-fallback for cell 1"), "{e}");
        assert!(exit_status(None, false, Verdict::FullFallback, "r").is_ok());
        // A data mismatch outranks the witness.
        let e = exit_status(Some(Error::Mismatch("x".into())), true, Verdict::FullFallback, "r").unwrap_err();
        assert_eq!(e.exit_code(), 4);
        let e = exit_status(None, true, Verdict::NotApplicable, "r").unwrap_err();
        assert_eq!(e.exit_code(), 3);
    }

    #[test]
    fn a_record_that_cannot_be_written_keeps_the_verdicts_exit_code() {
        let dir = tempfile::tempdir().unwrap();
        // A file where the results directory should be: the write fails.
        let blocked = dir.path().join("results");
        std::fs::write(&blocked, b"x").unwrap();
        let output = OutputConfig { results_dir: blocked, tag: None, json: true, explain: crate::record::plain };
        let record = RunRecord::new("fetch", "rdma", chrono::Utc::now(), None);
        let e = conclude(&record, &output, chrono::Utc::now(), || {}, None, true, Verdict::FullFallback, "cell 1").unwrap_err();
        assert_eq!(e.exit_code(), 3, "{e}");
        let e = conclude(&record, &output, chrono::Utc::now(), || {}, None, false, Verdict::FullFallback, "cell 1").unwrap_err();
        assert_eq!(e.exit_code(), 1);
        assert!(e.to_string().contains("cannot"), "{e}");
    }
}
