//! Reading result files into rows: one record per file; directories, files
//! that are not JSON, non-records, runs that measured nothing and rows whose
//! figures cannot be measurements are skipped with a note on stderr.

use std::path::PathBuf;

use serde_json::Value;

use crate::error::{Error, Result};
use crate::flag::INCLUDE_TEST_DOUBLES;
use crate::report::Row;
use crate::report::rows::rows_of;

/// Beyond any host this tool measures: 10 TB/s (a hundred 800 Gb/s NICs, or
/// every lane of the fastest memory bus), and a thousand cores of one process.
const MAX_GBPS: f64 = 10_000.0;
const MAX_CORES: f64 = 1_000.0;

/// Larger than any record this tool writes (a `--series` fetch of hours is a
/// few MiB): a bigger file is skipped unread.
const MAX_RECORD_BYTES: u64 = 256 << 20;

/// Why a row's figures cannot be a measurement (negative, not finite, beyond
/// physical bounds: a hand-edited or damaged record), or `None`.
///
/// Bounds: rates up to 10,000 GB/s, up to 1,000 client cores, wall seconds
/// and every figure finite and not negative, numeric dimensions up to 1e15.
/// The reason names the figure and its unit (`"-5 GB/s"`-like text).
pub fn impossible(row: &Row) -> Option<String> {
    let s = &row.value;
    for (what, x) in [("a median", s.median), ("a minimum", s.min), ("a maximum", s.max)] {
        if !x.is_finite() || x < 0.0 {
            return Some(format!("{what} {} of {}", row.metric, fig(x)));
        }
    }
    // A spread out of order (a median outside its own range) is no summary of repeats.
    let slack = 1e-9 * s.max.abs().max(1.0);
    if s.min > s.median + slack || s.median > s.max + slack {
        return Some(format!("a median {} of {} outside its range {}-{}", row.metric, fig(s.median), fig(s.min), fig(s.max)));
    }
    if let Some(g) = row.gbps.filter(|g| !g.is_finite() || *g < 0.0 || *g > MAX_GBPS) {
        return Some(format!("{} GB/s (beyond {MAX_GBPS} GB/s or not a rate)", fig(g)));
    }
    if row.metric == "GB/s" && s.max > MAX_GBPS {
        return Some(format!("{} GB/s (beyond {MAX_GBPS} GB/s)", fig(s.max)));
    }
    if let Some(c) = row.cpu_cores.filter(|c| !c.is_finite() || *c < 0.0 || *c > MAX_CORES) {
        return Some(format!("{} client cores", fig(c)));
    }
    if let Some(w) = &row.wall_s
        && [w.median, w.min, w.max].iter().any(|x| !x.is_finite() || *x < 0.0)
    {
        return Some(format!("a wall time of {} s", fig(w.median)));
    }
    row.dims.iter().find(|(_, v)| v.parse::<f64>().is_ok_and(|x| !x.is_finite() || x > 1e15)).map(|(k, v)| format!("{k} = {v}"))
}

/// A figure in a note: as written up to a million, else in exponent form
/// (1e308 as `1e308`, not 309 digits).
fn fig(x: f64) -> String {
    if x.is_finite() && x.abs() >= 1e6 { format!("{x:e}") } else { format!("{x}") }
}

/// The library of an rdma record made through a libminiocpp whose RDMA
/// engine is neither libs3rdma nor cuObject (`environment.store.library.generation`,
/// absent in records older than the generation check; or no library named in
/// a record of this tool): a test double such as
/// the one `tests/fake-miniocpp` builds, or a build this tool does not
/// know. `None` for every other record.
pub(super) fn test_double(record: &Value) -> Option<String> {
    if record.get("backend").and_then(Value::as_str) != Some("rdma") {
        return None;
    }
    // This tool's rdma records always name their library; one that does not
    // cannot show a real engine. Hand-made and the original suite's records
    // (no schema_version) name none and are judged by their counters alone.
    let Some(lib) = record.pointer("/environment/store/library") else {
        return record.get("schema_version").is_some().then(|| "an unnamed library".to_string());
    };
    let generation = lib.get("generation").and_then(Value::as_str);
    let path = || lib.get("path").and_then(Value::as_str).unwrap_or("an unnamed library").to_string();
    if lib.get("test_double").and_then(Value::as_bool) == Some(true) {
        return Some(format!("{}, whose RDMA engine is a stand-in (a test double)", path()));
    }
    if matches!(generation, Some("libs3rdma" | "cuobject")) {
        return None;
    }
    Some(format!("{}, a libminiocpp of no known RDMA engine (a test double?)", path()))
}

/// Read every file (a record each) into rows; directories, files that are not
/// JSON, `http-peers` tables and other non-records are skipped with a note on
/// stderr; a file that cannot be read is a usage error naming it.
///
/// Rows come in file order, each record's rows in its own order; a record
/// that does not read ([`rows_of`] fails) or a row [`impossible`] names costs
/// only itself, with a note. Records of the rdma backend made through a
/// library of no known generation (`test_double`) are skipped with a note
/// unless `test_doubles`. Errors (usage): an unreadable file, or no row left
/// from any file.
pub fn load(files: &[PathBuf], test_doubles: bool) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for f in files {
        let name = f.file_name().map_or_else(|| f.display().to_string(), |n| n.to_string_lossy().into_owned());
        if f.is_dir() {
            // `results/*.json` can match a directory; a missing file stays an error (a typo).
            eprintln!("note: {} is a directory: skipped", f.display());
            continue;
        }
        // A fifo or device would block or never end, and no record is this large.
        match std::fs::metadata(f) {
            Ok(m) if !m.is_file() => {
                eprintln!("note: {} is not a regular file: skipped", f.display());
                continue;
            }
            Ok(m) if m.len() > MAX_RECORD_BYTES => {
                eprintln!("note: {} is {} bytes, larger than any record ({MAX_RECORD_BYTES}): skipped", f.display(), m.len());
                continue;
            }
            _ => {}
        }
        let body = std::fs::read(f).map_err(|e| Error::Usage(format!("{}: {e}: pass result files (results/*.json)", f.display())))?;
        // A damaged file among many (a run killed while a script copied it)
        // costs its rows, not the whole report.
        let v: Value = match serde_json::from_slice(&body) {
            Ok(v) => v,
            Err(e) => {
                eprintln!("note: {} is not JSON ({e}): skipped", f.display());
                continue;
            }
        };
        if v.get("benchmark").is_none() || v.get("backend").is_none() {
            eprintln!("note: {} is not a run record of one backend (no \"benchmark\"/\"backend\"): skipped", f.display());
            continue;
        }
        // A run stopped before its first timed window (`--require-rdma` with a
        // library that reports RDMA unavailable) measured nothing: said, not a row.
        if v.get("results").is_some_and(Value::is_null) {
            let why = v["rdma_witness"]["reason"].as_str().unwrap_or("no reason recorded");
            eprintln!("note: {}: stopped before the first window, nothing measured ({why}): skipped", f.display());
            continue;
        }
        let double = test_double(&v);
        if let Some(lib) = &double
            && !test_doubles
        {
            eprintln!("note: {}: measured through {lib}: not a measurement of RDMA; skipped ({INCLUDE_TEST_DOUBLES} shows it)", f.display());
            continue;
        }
        // One malformed record costs its rows, not the whole report.
        match rows_of(&v, &name) {
            Ok(r) if r.is_empty() => {
                let bench = v["benchmark"].as_str().unwrap_or("this");
                eprintln!("note: {name}: a {bench} record holds no figure report compares (its own table printed them): skipped");
            }
            Ok(r) => {
                for mut row in r {
                    // Shown beside the backend, so no row of a test double reads as an RDMA figure.
                    if double.is_some() {
                        row.server = Some(row.server.map_or("test double".into(), |s| format!("test double; {s}")));
                    }
                    // The rdma engine beside the backend where it is not the default one.
                    if let Some(engine) = v.pointer("/environment/store/engine").and_then(Value::as_str).filter(|e| *e != "libminiocpp") {
                        row.server = Some(row.server.map_or(format!("{engine} engine"), |s| format!("{engine} engine; {s}")));
                    }
                    match impossible(&row) {
                        Some(why) => eprintln!("note: {name}: a {} row with {why} is no measurement: skipped", row.benchmark),
                        None => rows.push(row),
                    }
                }
            }
            Err(e) => eprintln!("note: {e}: skipped"),
        }
    }
    if rows.is_empty() {
        return Err(Error::Usage("no rows: none of the files holds a run record with a figure to compare".into()));
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::test_double;

    #[test]
    fn only_rdma_records_of_an_unknown_engine_are_test_doubles() {
        let rdma = |library: serde_json::Value| json!({"backend": "rdma", "environment": {"store": {"library": library}}});
        let unknown = |p: &str| Some(format!("{p}, a libminiocpp of no known RDMA engine (a test double?)"));
        assert_eq!(test_double(&rdma(json!({"path": "libfake.so", "generation": "unknown"}))), unknown("libfake.so"));
        // Older records name the library but no generation: nothing shows it is real.
        assert_eq!(test_double(&rdma(json!({"path": ".carry/libfake_miniocpp.so"}))), unknown(".carry/libfake_miniocpp.so"));
        assert_eq!(test_double(&rdma(json!({"path": "/opt/libminiocpp.so", "generation": "libs3rdma"}))), None);
        assert_eq!(test_double(&rdma(json!({"path": "/opt/libminiocpp.so", "generation": "cuobject"}))), None);
        let standin = rdma(json!({"path": "/t/libminiocpp.so", "generation": "libs3rdma", "test_double": true}));
        assert_eq!(test_double(&standin).as_deref(), Some("/t/libminiocpp.so, whose RDMA engine is a stand-in (a test double)"));
        // No library named (hand-made fixtures, the original suite's records) and other backends.
        assert_eq!(test_double(&json!({"backend": "rdma"})), None);
        // This tool's record with its library taken out is not shown as real.
        assert_eq!(test_double(&json!({"backend": "rdma", "schema_version": 1, "environment": {}})).as_deref(), Some("an unnamed library"));
        assert_eq!(test_double(&json!({"backend": "http", "environment": {"store": {"library": {"path": "x"}}}})), None);
    }
}
