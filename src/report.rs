//! `s3rdma report`: read result records (this tool's, and the original
//! suite's `RunRecord` field names), turn each into comparable rows, and print
//! one table per benchmark with medians, ranges, CPU, GB/s per core, the ratio
//! to a baseline and every row's witness verdict. An rdma row whose verdict is
//! not `rdma-verified` is flagged in its own column and never folded into a
//! verified one: rows are grouped, never averaged across files.
//!
//! Rows per benchmark (the figure compared, from `results`):
//! fetch: one per cell (size, concurrency[, procs]), GB/s; ckpt: one per
//! (state, method, op, ranks), GB/s and seconds; weights: GB/s and seconds;
//! tokens: tokens/s; train: images/s and seconds; original-suite records: any
//! `throughput_gbps` / `gbps` / `tokens_per_s` / `images_per_s` figure found in
//! `results` (one row per list element).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use crate::bench::Spread;
use crate::cli::{ReportArgs, ReportFormat};
use crate::error::{Error, Result};
use crate::witness::Proof;

/// One comparable figure of one record.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Row {
    /// Subcommand that wrote the record.
    pub benchmark: String,
    /// Transport of the run.
    pub backend: String,
    /// The record's file name.
    pub file: String,
    /// The run's `--tag`.
    pub tag: Option<String>,
    /// What distinguishes rows of one benchmark: size, concurrency, state, op, layout, ...
    pub dims: BTreeMap<String, String>,
    /// Unit of `value`: "GB/s", "tokens/s" or "images/s".
    pub metric: String,
    /// The row's headline figure: median and range over repeats.
    pub value: Spread,
    /// Wall seconds of the timed work.
    pub wall_s: Option<Spread>,
    /// Client CPU in cores (CPU-seconds / wall-seconds), median.
    pub cpu_cores: Option<f64>,
    /// GB/s (1e9 B/s) the row moved, median, for GB/s per core.
    pub gbps: Option<f64>,
    /// Witness verdict of this row (cell verdict where the record has one).
    pub verdict: String,
    /// The run's own data check failed (ckpt restore or weights `--verify`
    /// compared different bytes): its figure measured wrong data.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub data_mismatch: bool,
    /// `fetch --series`: [seconds, GB/s] of the row's first repeat.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub series: Option<Vec<[f64; 2]>>,
    /// The server when it ran on the measuring host, which then bounds and
    /// shares what was measured ([`server_of`]); `None` for remote servers,
    /// local disk, or records that cannot tell.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
}

/// What a record says about a server on its own host: the process
/// (`environment.store.server.local_process.process`, or the rdma store's
/// `control_plane`), "on this host"; records written before that field, with
/// a loopback endpoint: "loopback server" (docs/05-interpreting-results.md,
/// "A server on the measuring host").
pub fn server_of(record: &Value) -> Option<String> {
    let store = &record["environment"]["store"];
    let store = if store["control_plane"].is_object() { &store["control_plane"] } else { store };
    if let Some(p) = store["server"]["local_process"]["process"].as_str() {
        return Some(format!("{p} on this host"));
    }
    crate::store::server::is_loopback_endpoint(store["endpoint"].as_str()?).then(|| "loopback server".to_string())
}

impl Row {
    /// GB/s per client core.
    pub fn gbps_per_core(&self) -> Option<f64> {
        match (self.gbps, self.cpu_cores) {
            (Some(g), Some(c)) if c > 0.0 => Some(g / c),
            _ => None,
        }
    }
    /// True when the row claims RDMA and the server did not prove it.
    pub fn unproven_rdma(&self) -> bool {
        self.backend.eq_ignore_ascii_case("rdma") && self.verdict != "rdma-verified"
    }
}

/// A `{median, min, max}` object or a plain number.
fn spread(v: &Value) -> Option<Spread> {
    match v {
        Value::Number(n) => n.as_f64().map(|x| Spread { median: x, min: x, max: x }),
        Value::Object(o) => {
            let m = o.get("median")?.as_f64()?;
            Some(Spread { median: m, min: o.get("min").and_then(Value::as_f64).unwrap_or(m), max: o.get("max").and_then(Value::as_f64).unwrap_or(m) })
        }
        _ => None,
    }
}

fn median(v: &Value) -> Option<f64> {
    spread(v).map(|s| s.median)
}

/// Bytes as typed on the command line (`64MiB`): [`crate::units::size_name`].
pub use crate::units::size_name;

fn verdict_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Object(o) => o.get("verdict").and_then(Value::as_str).unwrap_or("none").to_string(),
        Value::Null => "none".into(),
        other => other.to_string(),
    }
}

/// The original suite named benchmarks after its report sections (b1-fetch, b3-resnet50, ...).
fn canonical_benchmark(name: &str) -> String {
    let n = name.to_ascii_lowercase();
    for (key, canon) in
        [("fetch", "fetch"), ("resnet", "train"), ("train", "train"), ("checkpoint", "ckpt"), ("ckpt", "ckpt"), ("token", "tokens"), ("weight", "weights")]
    {
        if n.contains(key) {
            return canon.into();
        }
    }
    n
}

/// Beyond any host this tool measures: 10 TB/s (a hundred 800 Gb/s NICs, or
/// every lane of the fastest memory bus), and a thousand cores of one process.
const MAX_GBPS: f64 = 10_000.0;
const MAX_CORES: f64 = 1_000.0;

/// Why a row's figures cannot be a measurement (negative, not finite, beyond
/// physical bounds: a hand-edited or damaged record), or `None`.
pub fn impossible(row: &Row) -> Option<String> {
    let s = &row.value;
    for (what, x) in [("a median", s.median), ("a minimum", s.min), ("a maximum", s.max)] {
        if !x.is_finite() || x < 0.0 {
            return Some(format!("{what} {} of {x}", row.metric));
        }
    }
    if let Some(g) = row.gbps.filter(|g| !g.is_finite() || *g < 0.0 || *g > MAX_GBPS) {
        return Some(format!("{g} GB/s (beyond {MAX_GBPS} GB/s or not a rate)"));
    }
    if row.metric == "GB/s" && s.max > MAX_GBPS {
        return Some(format!("{} GB/s (beyond {MAX_GBPS} GB/s)", s.max));
    }
    if let Some(c) = row.cpu_cores.filter(|c| !c.is_finite() || *c < 0.0 || *c > MAX_CORES) {
        return Some(format!("{c} client cores"));
    }
    if let Some(w) = &row.wall_s
        && [w.median, w.min, w.max].iter().any(|x| !x.is_finite() || *x < 0.0)
    {
        return Some(format!("a wall time of {} s", w.median));
    }
    row.dims.iter().find(|(_, v)| v.parse::<f64>().is_ok_and(|x| !x.is_finite() || x > 1e15)).map(|(k, v)| format!("{k} = {v}"))
}

/// Every row of one record. `file` names it in the table.
pub fn rows_of(record: &Value, file: &str) -> Result<Vec<Row>> {
    let bad = |why: &str| Error::Usage(format!("{file}: {why}: pass result records written by s3rdma (or the original suite)"));
    let benchmark = canonical_benchmark(record.get("benchmark").and_then(Value::as_str).ok_or_else(|| bad("no \"benchmark\" field"))?);
    let backend = record.get("backend").and_then(Value::as_str).ok_or_else(|| bad("no \"backend\" field"))?.to_string();
    let results = record.get("results").ok_or_else(|| bad("no \"results\" field"))?;
    let tag = record.get("tag").and_then(Value::as_str).map(String::from);
    let witness = record.get("rdma_witness").cloned().unwrap_or(Value::Null);
    let overall = verdict_of(&witness);
    let ours = record.get("schema_version").is_some();
    let server = server_of(record);
    let base = |dims: BTreeMap<String, String>, metric: &str, value: Spread| Row {
        benchmark: benchmark.clone(),
        backend: backend.clone(),
        file: file.to_string(),
        tag: tag.clone(),
        dims,
        metric: metric.into(),
        value,
        wall_s: None,
        cpu_cores: None,
        gbps: None,
        verdict: overall.clone(),
        data_mismatch: false,
        series: None,
        server: server.clone(),
    };
    // Settings that change the figure but are not a bench's own dimension:
    // where the bytes went, and how the store was driven.
    let dest = record["environment"]["dest"].as_str().map(String::from);
    let io_threads = record["environment"]["store"]["io_threads"].as_u64();
    let base = |mut dims: BTreeMap<String, String>, metric: &str, value: Spread| {
        if let Some(d) = &dest {
            dims.insert("dest".into(), d.clone());
        }
        base(dims, metric, value)
    };
    let mut out = Vec::new();
    match (ours, benchmark.as_str()) {
        (true, "fetch") => {
            for cell in results.as_array().ok_or_else(|| bad("fetch results are not a list of cells"))? {
                let s = &cell["summary"];
                // From the raw per-repeat figures where the record has them, else its summary.
                let reps = cell["repeats"].as_array().map(|a| a.iter().filter_map(|r| r["throughput_gbps"].as_f64()).collect::<Vec<_>>()).unwrap_or_default();
                let Some(v) = Spread::of(reps.iter().copied()).or_else(|| spread(&s["throughput_gbps"])) else { continue };
                let mut dims = BTreeMap::new();
                let size = cell["size_bytes"].as_u64().unwrap_or(0);
                dims.insert("size".into(), size_name(size));
                dims.insert("concurrency".into(), cell["concurrency"].to_string());
                if let Some(p) = cell.get("procs") {
                    dims.insert("procs".into(), p.to_string());
                }
                // --verify costs client CPU on the read path: a verified run is another cell.
                if record["params"]["verify"] == true {
                    dims.insert("verify".into(), "every byte".into());
                }
                let mut r = base(dims, "GB/s", v);
                r.series = cell["repeats"][0]["series"].as_array().map(|a| a.iter().filter_map(|p| Some([p[0].as_f64()?, p[1].as_f64()?])).collect());
                let cores: Vec<f64> = cell["repeats"].as_array().map(|a| a.iter().filter_map(|r| r["client_cpu_cores"].as_f64()).collect()).unwrap_or_default();
                r.cpu_cores = Spread::of(cores).map(|c| c.median).or_else(|| median(&s["client_cpu_cores"]));
                r.gbps = Some(v.median);
                // The cell's own verdict, where the witness judged cells.
                if let Some(c) = witness["cells"].as_array().and_then(|cs| {
                    cs.iter().find(|c| c["size_bytes"].as_u64() == Some(size) && c["concurrency"] == cell["concurrency"] && c.get("procs") == cell.get("procs"))
                }) {
                    r.verdict = verdict_of(c);
                }
                out.push(r);
            }
        }
        (true, "ckpt") => {
            for row in results["rows"].as_array().ok_or_else(|| bad("ckpt results have no rows"))? {
                let Some(v) = spread(&row["throughput_gbps"]) else { continue };
                let mut dims: BTreeMap<String, String> = ["state", "method", "op", "ranks"]
                    .iter()
                    .map(|k| (k.to_string(), row[*k].as_str().map_or_else(|| row[*k].to_string(), String::from)))
                    .collect();
                // A restore keeps warm and cold apart (records before --restore-cache have neither).
                if let Some(c) = row["cache"].as_str() {
                    dims.insert("cache".into(), c.to_string());
                }
                let mut r = base(dims, "GB/s", v);
                r.wall_s = spread(&row["wall_s"]);
                r.cpu_cores = median(&row["client_cpu_cores"]);
                r.gbps = Some(v.median);
                r.verdict = row["witness_verdict"].as_str().unwrap_or(&overall).to_string();
                r.data_mismatch = row["verified"]["ok"] == Value::Bool(false);
                out.push(r);
            }
        }
        (true, "weights") => {
            let s = &results["summary"];
            let v = spread(&s["throughput_gbps"]).ok_or_else(|| bad("weights results have no summary"))?;
            let p = &record["params"];
            let mut dims = BTreeMap::from([("model".to_string(), p["model"].as_str().unwrap_or("?").to_string())]);
            dims.insert("concurrency".into(), p["concurrency"].to_string());
            if let Some(t) = io_threads {
                dims.insert("io_threads".into(), t.to_string());
            }
            let mut r = base(dims, "GB/s", v);
            r.wall_s = spread(&s["wall_s"]);
            r.cpu_cores = median(&s["client_cpu_cores"]);
            r.gbps = Some(v.median);
            r.data_mismatch = results["verified"]["ok"] == Value::Bool(false);
            out.push(r);
        }
        (true, "tokens") => {
            let s = &results["summary"];
            let v = spread(&s["tokens_per_s"]).ok_or_else(|| bad("tokens results have no summary"))?;
            let mut r = base(BTreeMap::from([("seq_len".to_string(), results["seq_len"].to_string())]), "tokens/s", v);
            r.cpu_cores = median(&s["client_cpu_cores"]);
            r.gbps = median(&s["throughput_gbps"]);
            out.push(r);
        }
        (true, "train") => {
            let s = &results["summary"];
            let v = spread(&s["images_per_s"]).ok_or_else(|| bad("train results have no summary"))?;
            let p = &record["params"];
            let mut dims = BTreeMap::new();
            dims.insert("layout".into(), p["layout"].as_str().unwrap_or("?").to_string());
            dims.insert("ranks".into(), p["ranks"].to_string());
            if p["layout"] == "jpeg" {
                dims.insert("jpeg_fetch".into(), p["jpeg_fetch"].as_str().unwrap_or("?").to_string());
            }
            if p["loader_only"] == Value::Bool(true) {
                dims.insert("loader".into(), "only".into());
            }
            let mut r = base(dims, "images/s", v);
            r.wall_s = spread(&s["wall_s"]);
            r.cpu_cores = median(&s["client_cpu_cores"]);
            r.gbps = median(&s["read_gbps"]);
            out.push(r);
        }
        _ => {
            // The original suite's records (or a bench this build does not know): any known figure.
            let items: Vec<&Value> = match results {
                Value::Array(a) => a.iter().collect(),
                other => vec![other],
            };
            for it in items {
                let found = [("throughput_gbps", "GB/s"), ("gbps", "GB/s"), ("tokens_per_s", "tokens/s"), ("images_per_s", "images/s")]
                    .iter()
                    .find_map(|(k, unit)| spread(it.get(*k)?).map(|v| (*unit, v)));
                let Some((unit, v)) = found else { continue };
                let mut dims = BTreeMap::new();
                for k in ["size", "object_size", "size_bytes", "concurrency", "streams", "procs", "layout", "state", "op", "method"] {
                    if let Some(x) = it.get(k).filter(|x| x.is_string() || x.is_number()) {
                        let s = match (k, x.as_u64()) {
                            ("size" | "object_size" | "size_bytes", Some(b)) => size_name(b),
                            _ => x.as_str().map_or_else(|| x.to_string(), String::from),
                        };
                        dims.insert(
                            if k.starts_with("size") || k == "object_size" {
                                "size".into()
                            } else if k == "streams" {
                                "concurrency".into()
                            } else {
                                k.to_string()
                            },
                            s,
                        );
                    }
                }
                let mut r = base(dims, unit, v);
                r.wall_s = ["wall_s", "seconds"].iter().find_map(|k| spread(it.get(*k)?));
                r.cpu_cores = ["client_cpu_cores", "cpu_cores"].iter().find_map(|k| median(it.get(*k)?));
                r.gbps = if unit == "GB/s" { Some(v.median) } else { it.get("throughput_gbps").and_then(median) };
                if let Some(w) = it.get("rdma_witness").or_else(|| it.get("witness")) {
                    r.verdict = verdict_of(w);
                }
                out.push(r);
            }
        }
    }
    // Stored verdicts count only as far as the record's own counters give
    // them again (witness::proof_of); each row shows the worst of its own
    // windows (fetch: the cell's, by label; other benches: every window of
    // the run), never a verdict string stored beside them.
    match crate::witness::proof_of(record) {
        Proof::NoClaim => {}
        Proof::Local => {
            for r in &mut out {
                r.verdict = "not-applicable".into();
            }
        }
        Proof::Rechecked(windows) => {
            for r in &mut out {
                let cell = (benchmark == "fetch").then(|| {
                    let (size, conc) = (r.dims.get("size").cloned().unwrap_or_default(), r.dims.get("concurrency").cloned().unwrap_or_default());
                    format!("{size} x {conc} streams x {} procs,", r.dims.get("procs").map_or("1", String::as_str))
                });
                let worst = windows.iter().filter(|(l, _)| cell.as_ref().is_none_or(|c| l.starts_with(c.as_str()))).map(|(_, v)| *v).min();
                r.verdict = worst.map_or(UNPROVEN, |v| v.as_str()).to_string();
            }
        }
        Proof::Unproven(why) => {
            eprintln!("note: {file}: witness verdicts shown as {UNPROVEN}: {why}");
            for r in &mut out {
                r.verdict = UNPROVEN.into();
            }
        }
    }
    Ok(out)
}

/// The verdict `report` shows for a row its record's counters do not prove.
pub const UNPROVEN: &str = "unproven";

/// Read every file (a record each) into rows; directories, files that are not
/// JSON, `http-peers` tables and other non-records are skipped with a note on
/// stderr; a file that cannot be read is a usage error naming it.
pub fn load(files: &[PathBuf]) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for f in files {
        let name = f.file_name().map_or_else(|| f.display().to_string(), |n| n.to_string_lossy().into_owned());
        if f.is_dir() {
            // `results/*.json` can match a directory; a missing file stays an error (a typo).
            eprintln!("note: {} is a directory: skipped", f.display());
            continue;
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
        // One malformed record costs its rows, not the whole report.
        match rows_of(&v, &name) {
            Ok(r) => {
                for row in r {
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

/// Sort key of a row: the `--group-by` fields in order; numbers and sizes
/// compare by value (2 before 16, 64MiB before 1GiB), everything else as text.
fn group_key(r: &Row, by: &[String]) -> Vec<(f64, String)> {
    by.iter()
        .map(|k| {
            let text = match k.as_str() {
                "benchmark" => r.benchmark.clone(),
                "backend" => r.backend.clone(),
                "tag" => r.tag.clone().unwrap_or_default(),
                "file" => r.file.clone(),
                other => r.dims.get(other).cloned().unwrap_or_default(),
            };
            let num = text.parse::<f64>().ok().or_else(|| parse_size::parse_size(&text).ok().map(|b| b as f64)).unwrap_or(f64::NAN);
            (num, text)
        })
        .collect()
}

fn cmp_keys(a: &[(f64, String)], b: &[(f64, String)]) -> std::cmp::Ordering {
    for (x, y) in a.iter().zip(b) {
        let o = match (x.0.is_nan(), y.0.is_nan()) {
            (false, false) => x.0.total_cmp(&y.0),
            _ => x.1.cmp(&y.1),
        };
        if o != std::cmp::Ordering::Equal {
            return o;
        }
    }
    std::cmp::Ordering::Equal
}

/// The baseline rows of a report, indexed once by (benchmark, dims,
/// metric): `--baseline` names a backend (rows of that backend) or a file
/// (rows of that file). A row's baseline is the one baseline row with its
/// dimensions; none when no row or several match (the ratio would be
/// arbitrary). Built in one pass, so a report's cost stays linear in its rows.
/// What a row and its baseline share: benchmark, dimensions, metric.
type DimsKey = (String, BTreeMap<String, String>, String);

fn dims_key(r: &Row) -> DimsKey {
    (r.benchmark.clone(), r.dims.clone(), r.metric.clone())
}

struct Baselines<'a> {
    by_dims: std::collections::HashMap<DimsKey, Vec<&'a Row>>,
}

impl<'a> Baselines<'a> {
    fn new(rows: &'a [Row], baseline: &str) -> Baselines<'a> {
        let mut by_dims: std::collections::HashMap<_, Vec<&Row>> = std::collections::HashMap::new();
        for b in rows.iter().filter(|b| is_baseline(b, baseline)) {
            by_dims.entry(dims_key(b)).or_default().push(b);
        }
        Baselines { by_dims }
    }

    fn matching(&self, r: &Row) -> &[&'a Row] {
        self.by_dims.get(&dims_key(r)).map_or(&[], Vec::as_slice)
    }

    /// The baseline of `r`, when exactly one row matches.
    fn of(&self, r: &Row) -> Option<&'a Row> {
        match self.matching(r) {
            [one] => Some(one),
            _ => None,
        }
    }

    /// Whether several baseline rows match `r` (repeated runs).
    fn ambiguous(&self, r: &Row) -> bool {
        self.matching(r).len() > 1
    }
}

fn is_baseline(b: &Row, baseline: &str) -> bool {
    b.backend == baseline || b.file == baseline || Path::new(baseline).file_name().is_some_and(|n| n.to_string_lossy() == b.file)
}

/// A markdown table cell: no pipes or line breaks from the data.
fn md(s: &str) -> String {
    s.replace('|', "\\|").replace(['\n', '\r'], " ")
}

/// A CSV field (RFC 4180): quoted when it holds a comma, quote or line break.
fn csv(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_string() }
}

fn fmt_spread(s: &Spread) -> String {
    let p = if s.median.abs() >= 1000.0 {
        0
    } else if s.median.abs() >= 10.0 {
        1
    } else {
        3
    };
    if s.max > s.min { format!("{:.p$} ({:.p$}–{:.p$})", s.median, s.min, s.max) } else { format!("{:.p$}", s.median) }
}

/// The tables as markdown (one per benchmark), CSV or JSON.
pub fn render(rows: &[Row], args: &ReportArgs) -> String {
    let mut rows = rows.to_vec();
    rows.sort_by(|a, b| cmp_keys(&group_key(a, &args.group_by), &group_key(b, &args.group_by)).then_with(|| a.file.cmp(&b.file)));
    let baselines = args.baseline.as_deref().map(|b| Baselines::new(&rows, b));
    let ratio = |r: &Row| baselines.as_ref().and_then(|b| b.of(r)).map(|b| r.value.median / b.value.median);
    match args.format {
        ReportFormat::Json => {
            let v: Vec<Value> = rows
                .iter()
                .map(|r| {
                    let mut v = serde_json::to_value(r).expect("rows encode");
                    v["gbps_per_core"] = serde_json::json!(r.gbps_per_core());
                    v["ratio_to_baseline"] = serde_json::json!(ratio(r));
                    v["unproven_rdma"] = Value::Bool(r.unproven_rdma());
                    v
                })
                .collect();
            serde_json::to_string_pretty(&v).expect("rows encode")
        }
        ReportFormat::Csv => {
            let mut s = String::from(
                "benchmark,backend,dims,metric,median,min,max,wall_s_median,cpu_cores,gbps_per_core,ratio_to_baseline,verdict,unproven_rdma,file,server\n",
            );
            for r in &rows {
                let dims: Vec<String> = r.dims.iter().map(|(k, v)| format!("{k}={v}")).collect();
                let opt = |x: Option<f64>| x.map_or(String::new(), |x| format!("{x}"));
                s += &format!(
                    "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                    csv(&r.benchmark),
                    csv(&r.backend),
                    csv(&dims.join(";")),
                    csv(&r.metric),
                    r.value.median,
                    r.value.min,
                    r.value.max,
                    opt(r.wall_s.map(|w| w.median)),
                    opt(r.cpu_cores),
                    opt(r.gbps_per_core()),
                    opt(ratio(&r.clone())),
                    csv(&r.verdict),
                    r.unproven_rdma(),
                    csv(&r.file),
                    csv(r.server.as_deref().unwrap_or(""))
                );
            }
            s
        }
        ReportFormat::Md => {
            let mut s = String::new();
            let mut benches: Vec<&str> = rows.iter().map(|r| r.benchmark.as_str()).collect();
            benches.dedup();
            for b in benches {
                let these: Vec<&Row> = rows.iter().filter(|r| r.benchmark == b).collect();
                let dim_names: Vec<String> = {
                    let mut d: Vec<String> = these.iter().flat_map(|r| r.dims.keys().cloned()).collect();
                    d.sort();
                    d.dedup();
                    d
                };
                let metric = these[0].metric.clone();
                s += &format!(
                    "### {b}\n\n| backend | {} | {metric} (min–max) | wall s | client cores | GB/s per core |{} witness | file |\n",
                    dim_names.join(" | "),
                    if args.baseline.is_some() { " ratio |" } else { "" }
                );
                s += &format!("|---|{}---|---|---|---|{}---|---|\n", "---|".repeat(dim_names.len()), if args.baseline.is_some() { "---|" } else { "" });
                for r in &these {
                    let dims: Vec<String> = dim_names.iter().map(|k| md(r.dims.get(k).map_or("-", String::as_str))).collect();
                    let mut flag = if r.unproven_rdma() { format!("**{} — NOT RDMA-VERIFIED**", md(&r.verdict)) } else { md(&r.verdict) };
                    if r.data_mismatch {
                        flag += " **— DATA MISMATCH: the restored or loaded bytes differed**";
                    }
                    s += &format!(
                        "| {} | {} | {} | {} | {} | {} |{} {flag} | {} |\n",
                        md(&r.server.as_ref().map_or(r.backend.clone(), |sv| format!("{} ({sv})", r.backend))),
                        dims.join(" | "),
                        fmt_spread(&r.value),
                        r.wall_s.as_ref().map_or("-".into(), fmt_spread),
                        r.cpu_cores.map_or("-".into(), |c| format!("{c:.2}")),
                        r.gbps_per_core().map_or("-".into(), |g| if g < 0.1 { format!("{g:.4}") } else { format!("{g:.2}") }),
                        if args.baseline.is_some() { format!(" {} |", ratio(r).map_or("-".into(), |x| format!("{x:.2}x"))) } else { String::new() },
                        md(&r.file)
                    );
                }
                if these.iter().any(|r| r.server.is_some()) {
                    s += "\nA backend marked \"on this host\" or \"loopback server\" was measured against a server on the measuring machine: \
                          it shares that machine's CPU, and a test server (s3s-fs reads files in 4 KiB pieces, about 0.6–0.7 GB/s) bounds the figure.\n";
                }
                s += "\n";
            }
            s
        }
    }
}

/// Run `s3rdma report`.
pub async fn run(args: ReportArgs) -> Result<()> {
    if args.files.is_empty() {
        return Err(Error::Usage("give result files, e.g. `s3rdma report results/*.json`".into()));
    }
    let rows = load(&args.files)?;
    if let Some(b) = &args.baseline
        && !rows.iter().any(|r| is_baseline(r, b))
    {
        let mut backends: Vec<&str> = rows.iter().map(|r| r.backend.as_str()).collect();
        backends.sort();
        backends.dedup();
        return Err(Error::Usage(format!("--baseline '{b}' matches no row: the rows' backends are {}; or name one of the files", backends.join(", "))));
    }
    if let Some(b) = &args.baseline
        && let index = Baselines::new(&rows, b)
        && rows.iter().any(|r| index.ambiguous(r))
    {
        eprintln!(
            "note: some rows match several --baseline '{b}' rows with the same dimensions (repeated runs): their ratio is left empty; name one file as --baseline"
        );
    }
    for k in &args.group_by {
        let known = ["benchmark", "backend", "tag", "file"].contains(&k.as_str()) || rows.iter().any(|r| r.dims.contains_key(k));
        if !known {
            eprintln!("note: --group-by '{k}' is neither benchmark/backend/tag/file nor a dimension of any row: ignored");
        }
    }
    if let Some(p) = &args.plot {
        crate::plot::draw(&rows, p)?;
        eprintln!("wrote {}", p.display());
    }
    let mut text = render(&rows, &args);
    if !text.ends_with('\n') {
        text.push('\n');
    }
    write_stdout(text.as_bytes())
}

/// Write to stdout: a closed pipe (`| head`) ends quietly, any other failure
/// (a full disk) is an error, never a panic.
pub fn write_stdout(bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|_| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Error::Runtime(format!("cannot write to stdout: {e}"))),
    }
}
