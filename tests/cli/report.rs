//! report: tables, medians, fallback flags and plots over fixture records.

use super::*;
use serde_json::json;

fn fixtures() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report");
    let mut v: Vec<String> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

fn nearest_median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

#[test]
// One scenario, read top to bottom: its steps share the run's state.
#[allow(clippy::too_many_lines)]
fn report_tables_medians_flags_fallback_and_plots() {
    let tmp = tempfile::tempdir().unwrap();
    let files = fixtures();
    let mut args: Vec<&str> = vec!["report", "--format", "json", "--baseline", "http"];
    args.extend(files.iter().map(String::as_str));
    let o = s3rdma(&args, tmp.path());
    let rows: Value = serde_json::from_str(&ok(&o)).unwrap();
    assert!(stderr(&o).contains("not-a-record.json is not a run record"), "{}", stderr(&o));
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 5, "2 http cells, 2 rdma cells, 1 original-suite row");
    let find = |backend: &str, conc: &str, file: &str| {
        rows.iter().find(|r| r["backend"] == backend && r["dims"]["concurrency"] == conc && r["file"].as_str().unwrap().starts_with(file)).unwrap()
    };
    // Medians by hand from the fixtures' per-repeat figures.
    let h4 = find("http", "4", "fetch-http");
    assert_eq!(h4["value"]["median"].as_f64().unwrap(), nearest_median(vec![1.0, 3.0, 2.0]));
    assert_eq!((h4["value"]["min"].as_f64(), h4["value"]["max"].as_f64()), (Some(1.0), Some(3.0)));
    let h16 = find("http", "16", "fetch-http");
    assert_eq!(h16["value"]["median"].as_f64().unwrap(), nearest_median(vec![4.0, 6.0]));
    let r4 = find("rdma", "4", "fetch-rdma");
    assert_eq!(r4["value"]["median"].as_f64().unwrap(), 12.0);
    assert_eq!(r4["verdict"], "rdma-verified");
    assert_eq!(r4["unproven_rdma"], false);
    assert_eq!(r4["gbps_per_core"].as_f64().unwrap(), 12.0 / 0.5);
    assert_eq!(r4["ratio_to_baseline"].as_f64().unwrap(), 12.0 / 2.0);
    // The partial-fallback cell is flagged, per cell, not averaged into the verified one.
    let r16 = find("rdma", "16", "fetch-rdma");
    assert_eq!(r16["verdict"], "partial-fallback");
    assert_eq!(r16["unproven_rdma"], true);
    assert_eq!(r16["ratio_to_baseline"].as_f64().unwrap(), 5.0 / 5.0);
    // The original suite's field names: b1-fetch, object_size, streams, cpu_cores.
    let orig = find("rdma", "4", "b1-fetch");
    assert_eq!(orig["benchmark"], "fetch");
    assert_eq!(orig["dims"]["size"], "16MiB");
    assert_eq!(orig["value"]["median"].as_f64().unwrap(), 27.0);
    assert_eq!(orig["cpu_cores"].as_f64().unwrap(), 0.51);
    // Its bare "rdma-verified" comes with no counters: nothing proves it.
    assert_eq!(orig["verdict"], "unproven");
    assert!(
        stderr(&o).contains("b1-fetch-original.json: witness verdicts shown as unproven: the record says rdma-verified but holds no witness windows"),
        "{}",
        stderr(&o)
    );

    // Markdown: numbers, the flag, and the plot.
    let svg = tmp.path().join("img/fetch.svg");
    std::fs::create_dir_all(tmp.path().join("img")).unwrap();
    let mut args: Vec<&str> = vec!["report", "--plot", svg.to_str().unwrap()];
    args.extend(files.iter().map(String::as_str));
    let md = ok(&s3rdma(&args, tmp.path()));
    assert!(md.contains("### fetch"), "{md}");
    assert!(md.contains("| http | 4 | 16MiB | 2.000 (1.000–3.000) |"), "{md}");
    assert!(md.contains("**partial-fallback — NOT RDMA-VERIFIED**"), "{md}");
    let lines: Vec<&str> = md.lines().filter(|l| l.starts_with("| http") || l.starts_with("| rdma")).collect();
    assert_eq!(lines.len(), 5);
    // Concurrency sorts by value: 4 before 16.
    assert!(md.find("| http | 4 |").unwrap() < md.find("| http | 16 |").unwrap());
    let body = std::fs::read_to_string(&svg).unwrap();
    assert!(body.starts_with("<svg") && body.contains("<polyline") && body.contains("rdma 16MiB"), "{}", &body[..200.min(body.len())]);

    // CSV has a header and one line per row; bad input is named.
    let mut args: Vec<&str> = vec!["report", "--format", "csv"];
    args.extend(files.iter().map(String::as_str));
    assert_eq!(ok(&s3rdma(&args, tmp.path())).lines().count(), 6);
    let res = tmp.path().join("results");
    assert_fails(&s3rdma(&["report", "nope.json"], tmp.path()), 2, "nope.json", &res);
    // A truncated record among good ones costs its own rows only, with a note.
    let cut = tmp.path().join("cut.json");
    let whole = std::fs::read(&files[0]).unwrap();
    std::fs::write(&cut, &whole[..whole.len() / 2]).unwrap();
    let dir_json = tmp.path().join("dir.json");
    std::fs::create_dir_all(&dir_json).unwrap();
    let mut args: Vec<&str> = vec!["report", "--format", "csv", cut.to_str().unwrap(), dir_json.to_str().unwrap()];
    args.extend(files.iter().map(String::as_str));
    let o = s3rdma(&args, tmp.path());
    assert_eq!(ok(&o).lines().count(), 6, "the same rows as without it");
    assert!(stderr(&o).contains("cut.json is not JSON (") && stderr(&o).contains("): skipped"), "{}", stderr(&o));
    assert!(stderr(&o).contains("dir.json is a directory: skipped"), "{}", stderr(&o));
    assert_fails(&s3rdma(&["report", cut.to_str().unwrap()], tmp.path()), 2, "no rows", &res);
    assert_fails(&s3rdma(&["report", "--plot", "x.png", &files[0]], tmp.path()), 2, "ending in .svg", &res);
    assert_fails(&s3rdma(&["report", "--plot", "no/such/dir/x.svg", &files[0]], tmp.path()), 2, "does not exist", &res);
    let mut args: Vec<&str> = vec!["report", "--baseline", "ftp"];
    args.extend(files.iter().map(String::as_str));
    assert_fails(&s3rdma(&args, tmp.path()), 2, "--baseline 'ftp'", &res);
    // fetch --series: a per-interval series in every repeat, drawn over time by --plot.
    let o = s3rdma(
        &["fetch", "--sizes", "1MiB", "--concurrency", "2", "--duration", "600ms", "--warmup", "0s", "--series", "100ms", "--json", "--tag", "series"],
        tmp.path(),
    );
    let rec: Value = serde_json::from_str(&ok(&o)).unwrap();
    let series = rec["results"][0]["repeats"][0]["series"].as_array().unwrap();
    assert!((4..=7).contains(&series.len()), "{} points in 600 ms at 100 ms", series.len());
    assert!(series.iter().all(|p| p[1].as_f64().unwrap() >= 0.0) && series.iter().any(|p| p[1].as_f64().unwrap() > 0.0));
    let rec_file = results_in(&res).into_iter().find(|p| p.to_string_lossy().contains("series")).unwrap();
    let svg2 = tmp.path().join("series.svg");
    ok(&s3rdma(&["report", "--plot", svg2.to_str().unwrap(), rec_file.to_str().unwrap()], tmp.path()));
    assert!(std::fs::read_to_string(&svg2).unwrap().contains("throughput over time"));
    // Completions come from the CLI definition.
    let bash = ok(&s3rdma(&["completions", "bash"], tmp.path()));
    assert!(bash.contains("s3rdma") && bash.contains("--layout") && bash.contains("ingest"));
}

#[test]
fn report_flags_a_row_whose_data_check_failed() {
    let tmp = tempfile::tempdir().unwrap();
    let row = |op: &str, ok: Option<bool>| {
        serde_json::json!({"state": "synthetic-8MiB", "method": "flat", "op": op, "ranks": 1,
            "throughput_gbps": {"median": 5.12, "min": 5.0, "max": 5.2}, "wall_s": {"median": 0.002, "min": 0.002, "max": 0.002},
            "client_cpu_cores": {"median": 1.0, "min": 1.0, "max": 1.0}, "witness_verdict": "not-applicable",
            "verified": ok.map(|ok| serde_json::json!({"ok": ok, "tensors_checked": 10, "mismatched": if ok { vec![] } else { vec!["layer.0"] }}))})
    };
    let rec = serde_json::json!({"schema_version": 2, "benchmark": "ckpt", "backend": "local",
        "results": {"rows": [row("save", None), row("restore", Some(false))]},
        "rdma_witness": {"verdict": "not-applicable", "reason": "local backend"}});
    let f = tmp.path().join("ckpt-local-mismatch.json");
    std::fs::write(&f, serde_json::to_vec(&rec).unwrap()).unwrap();
    let out = ok(&s3rdma(&["report", f.to_str().unwrap()], tmp.path()));
    let lines: Vec<&str> = out.lines().filter(|l| l.contains("synthetic-8MiB")).collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(!lines.iter().find(|l| l.contains("| save |")).unwrap().contains("MISMATCH"), "{out}");
    assert!(lines.iter().find(|l| l.contains("| restore |")).unwrap().contains("DATA MISMATCH"), "{out}");
    let json: Value = serde_json::from_str(&ok(&s3rdma(&["report", "--format", "json", f.to_str().unwrap()], tmp.path()))).unwrap();
    assert_eq!(json.as_array().unwrap().iter().filter(|r| r["data_mismatch"] == true).count(), 1);
}

#[test]
fn report_shows_each_row_the_verdict_of_its_own_windows_never_a_stored_string() {
    let tmp = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report/fetch-rdma-fixture.json");
    let faithful: Value = serde_json::from_slice(&std::fs::read(&fixture).unwrap()).unwrap();
    let rows_of = |rec: &Value| {
        let f = tmp.path().join("rec.json");
        std::fs::write(&f, serde_json::to_vec(rec).unwrap()).unwrap();
        let o = s3rdma(&["report", "--format", "json", f.to_str().unwrap()], tmp.path());
        let rows: Value = serde_json::from_str(&ok(&o)).unwrap();
        rows.as_array()
            .unwrap()
            .iter()
            .map(|r| (r["dims"]["concurrency"].as_str().unwrap().to_string(), r["verdict"].as_str().unwrap().to_string()))
            .collect::<Vec<_>>()
    };
    let want = vec![("4".to_string(), "rdma-verified".to_string()), ("16".to_string(), "partial-fallback".to_string())];
    assert_eq!(rows_of(&faithful), want);
    // A cell's stored verdict edited to "rdma-verified": the row still shows its window's.
    let mut edited = faithful.clone();
    edited["rdma_witness"]["cells"][1]["verdict"] = "rdma-verified".into();
    assert_eq!(rows_of(&edited), want);
    // The fallback window removed (overall verdict edited to match): that cell has no window left.
    let mut edited = faithful.clone();
    edited["rdma_witness"]["windows"].as_array_mut().unwrap().pop();
    edited["rdma_witness"]["verdict"] = "rdma-verified".into();
    assert_eq!(rows_of(&edited)[1].1, "unproven");
    // Claiming to be a local run: nothing to prove, and nothing verified either.
    let mut edited = faithful.clone();
    edited["backend"] = "LOCAL".into();
    assert!(rows_of(&edited).iter().all(|(_, v)| v == "not-applicable"));
}

/// Impossible figures in a record (hand-edited or damaged: a negative rate,
/// one beyond 10 TB/s, a concurrency of 1.2e24, which the writer's type
/// cannot hold) are named and skipped, never
/// shown as measurements; the good records around them still make the table.
#[test]
fn impossible_figures_are_named_and_skipped() {
    let tmp = tempfile::tempdir().unwrap();
    let o = s3rdma(&["fetch", "--sizes", "1MiB", "--concurrency", "1", "--iters", "1", "--warmup", "0s"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let good = results_in(&tmp.path().join("results")).pop().unwrap();
    let rec: Value = serde_json::from_str(&std::fs::read_to_string(&good).unwrap()).unwrap();
    let mut files = vec![good.to_string_lossy().into_owned()];
    for (name, edits) in [
        ("negative.json", vec![("/results/0/repeats/0/throughput_gbps", serde_json::json!(-5.0))]),
        ("beyond.json", vec![("/results/0/repeats/0/throughput_gbps", serde_json::json!(1e300))]),
        ("concurrency.json", vec![("/results/0/concurrency", serde_json::json!(1.2e24))]),
        // An older record's row without repeats is its summary, which can be out of order.
        (
            "order.json",
            vec![
                ("/schema_version", serde_json::json!(2)),
                ("/results/0/repeats", serde_json::json!([])),
                ("/results/0/summary/throughput_gbps", serde_json::json!({"median": 1.0, "min": 5.0, "max": 0.1})),
            ],
        ),
    ] {
        let mut r = rec.clone();
        for (at, v) in edits {
            *r.pointer_mut(at).unwrap() = v;
        }
        let p = tmp.path().join(name);
        std::fs::write(&p, serde_json::to_string(&r).unwrap()).unwrap();
        files.push(p.to_string_lossy().into_owned());
    }
    let mut args = vec!["report"];
    args.extend(files.iter().map(String::as_str));
    let o = s3rdma(&args, tmp.path());
    let (out, err) = (String::from_utf8_lossy(&o.stdout), stderr(&o));
    assert!(o.status.success(), "{err}");
    for f in ["negative.json", "beyond.json", "order.json"] {
        assert!(err.contains(&format!("note: {f}: a fetch row with")) && !out.contains(f), "{f}: {err}\n{out}");
    }
    // Named short: 1e300, not its 301 digits; a median outside its range, with the range.
    assert!(err.contains("1e300 GB/s") && !err.contains("00000000000000000000"), "{err}");
    assert!(err.contains("a median GB/s of 1 outside its range 5-0.1"), "{err}");
    // A concurrency no run has is no record of the writer's type: named, with where it departs, and skipped.
    assert!(err.contains("note: concurrency.json: not a fetch record this build reads (results[0].concurrency: invalid type"), "{err}");
    assert!(!out.contains("concurrency.json"), "{out}");
    assert!(out.contains(good.file_name().unwrap().to_str().unwrap()), "{out}");
}

/// A record this build cannot read is named with why and skipped, the good
/// ones still reported: a `schema_version` in another shape or newer than
/// this build, none in a record s3rdma wrote, a benchmark name that is none
/// of this build's, a stream buffer kind the writer's type has not, a cell
/// without repeats. A figure written as `null` (NaN when written) reads
/// through the lenient view, said. A reused stream buffer is a dimension.
#[test]
fn records_this_build_cannot_read_are_named_and_skipped() {
    let tmp = tempfile::tempdir().unwrap();
    let run = ["fetch", "--sizes", "1MiB", "--concurrency", "1", "--iters", "1", "--warmup", "0s"];
    assert!(s3rdma(&run, tmp.path()).status.success());
    let mut reused = run.to_vec();
    reused.extend(["--stream-buffer", "256KiB", "--tag", "reused"]);
    assert!(s3rdma(&reused, tmp.path()).status.success());
    let files = results_in(&tmp.path().join("results"));
    let rec: Value = serde_json::from_str(&std::fs::read_to_string(files.iter().find(|f| !f.to_string_lossy().contains("reused")).unwrap()).unwrap()).unwrap();
    let cases: [(&str, &str, Value, &str); 7] = [
        ("text.json", "/schema_version", json!("4"), "schema_version \"4\" is not a whole number from 1 to 4"),
        ("newer.json", "/schema_version", json!(99), "written by a newer s3rdma (schema_version 99; this build reads 1 to 4)"),
        ("unversioned.json", "/schema_version", Value::Null, "no \"schema_version\", though s3rdma wrote it"),
        ("misnamed.json", "/benchmark", json!("fetchh"), "benchmark 'fetchh' is not one of this build's"),
        ("kind.json", "/params/stream_buffer/kind", json!("window"), "params.stream_buffer"),
        ("norepeats.json", "/results/0/repeats", json!([]), "results[0] has no repeats"),
        (
            "nullcpu.json",
            "/results/0/repeats/0/host_cpu_cores",
            Value::Null,
            "results[0].repeats[0].host_cpu_cores is null (a figure that was NaN when written): read through the lenient view",
        ),
    ];
    let mut args: Vec<String> = ["report", "--format", "json"].map(String::from).to_vec();
    args.extend(files.iter().map(|f| f.to_string_lossy().into_owned()));
    for (name, at, value, _) in &cases {
        let mut r = rec.clone();
        *r.pointer_mut(at).unwrap() = value.clone();
        std::fs::write(tmp.path().join(name), serde_json::to_string(&r).unwrap()).unwrap();
        args.push(tmp.path().join(name).to_string_lossy().into_owned());
    }
    let o = s3rdma(&args.iter().map(String::as_str).collect::<Vec<_>>(), tmp.path());
    let err = stderr(&o);
    let rows: Value = serde_json::from_str(&ok(&o)).unwrap();
    let rows = rows.as_array().unwrap();
    for (name, _, _, why) in &cases {
        assert!(err.lines().any(|l| l.contains(name) && l.contains(why)), "{name}: {why}: {err}");
    }
    // The two runs and the record with a null figure make rows; the reused buffer's is its own cell.
    assert_eq!(rows.len(), 3, "{rows:?}");
    let reused: Vec<_> = rows.iter().filter(|r| r["dims"]["stream_buffer"] == "reused 256KiB").collect();
    assert_eq!(reused.len(), 1, "{rows:?}");
    assert!(rows.iter().any(|r| r["file"] == "nullcpu.json"), "{rows:?}");
}

/// Runs that differ in a setting that changes what their figure means are
/// not each other's `--baseline`: tokens with and without simulated compute,
/// ckpt saves of other chunk sizes. Each row shows that setting as a
/// dimension, and a tokens row its repeats' wall seconds.
#[test]
fn runs_unlike_in_their_settings_are_not_each_others_baseline() {
    let tmp = tempfile::tempdir().unwrap();
    let res = tmp.path().join("results");
    let at = |args: &[&str]| {
        let mut v = args.to_vec();
        v.extend(["--root", "r", "--results-dir", "results"]);
        s3rdma(&v, tmp.path())
    };
    let ingest = ["ingest", "tokens", "--synthetic", "--total-bytes", "1MiB", "--seq-len", "256", "--shard-bytes", "256KiB", "--root", "r"];
    ok(&s3rdma(&ingest, tmp.path()));
    let tokens = ["tokens", "--dest", "host", "--run-bytes", "64KiB", "--repeats", "2"];
    ok(&at(&[&tokens[..], &["--tag", "plain"]].concat()));
    ok(&at(&[&tokens[..], &["--compute", "1ms", "--tag", "compute"]].concat()));
    let ckpt = ["ckpt", "--dest", "host", "--sizes", "4MiB", "--methods", "flat", "--ops", "save", "--repeats", "1"];
    ok(&at(&[&ckpt[..], &["--chunk", "1MiB", "--tag", "c1"]].concat()));
    ok(&at(&[&ckpt[..], &["--chunk", "2MiB", "--tag", "c2"]].concat()));
    // A restore reads the chunks the save wrote, whatever its own --chunk.
    ok(&at(&["ckpt", "--dest", "host", "--sizes", "4MiB", "--methods", "flat", "--ops", "save", "--repeats", "1", "--chunk", "1MiB", "--keep", "--tag", "k"]));
    ok(&at(&["ckpt", "--dest", "host", "--sizes", "4MiB", "--methods", "flat", "--ops", "restore", "--repeats", "1", "--tag", "r"]));
    let file =
        |tag: &str| std::fs::read_dir(&res).unwrap().map(|e| e.unwrap().path()).find(|p| p.to_string_lossy().ends_with(&format!("-{tag}.json"))).unwrap();
    let restored = file("r");
    let rows: Value = serde_json::from_str(&ok(&s3rdma(&["report", "--format", "json", restored.to_str().unwrap()], tmp.path()))).unwrap();
    assert_eq!(rows[0]["dims"]["chunk"], "1MiB", "{rows}");
    for (base, other, dim, values) in [("plain", "compute", "compute", ["none", "1ms"]), ("c1", "c2", "chunk", ["1MiB", "2MiB"])] {
        let (b, o) = (file(base), file(other));
        let args = ["report", "--format", "json", "--baseline", b.to_str().unwrap(), b.to_str().unwrap(), o.to_str().unwrap()];
        let rows: Value = serde_json::from_str(&ok(&s3rdma(&args, tmp.path()))).unwrap();
        let rows = rows.as_array().unwrap();
        assert_eq!(rows.len(), 2, "{rows:?}");
        let mut seen: Vec<&str> = rows.iter().map(|r| r["dims"][dim].as_str().unwrap()).collect();
        seen.sort();
        let mut want = values.to_vec();
        want.sort();
        assert_eq!(seen, want, "{rows:?}");
        let theirs = rows.iter().find(|r| r["dims"][dim] == values[1]).unwrap();
        assert!(theirs["ratio_to_baseline"].is_null(), "a {dim} {} row compared with {}: {theirs}", values[1], values[0]);
        if dim == "compute" {
            assert!(rows.iter().all(|r| r["wall_s"]["median"].as_f64().is_some_and(|w| w > 0.0)), "{rows:?}");
        }
    }
}
