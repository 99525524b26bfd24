//! Printing rows: ordering by `--group-by`, each row's `--baseline` ratio,
//! and the markdown, CSV or JSON text written to stdout.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde_json::Value;

use super::{ReportFormat, ReportPlan};
use crate::error::{Error, Result};
use crate::report::Row;
use crate::stats::Spread;

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

/// What a row and its baseline share: benchmark, dimensions, metric.
type DimsKey = (String, BTreeMap<String, String>, String);

fn dims_key(r: &Row) -> DimsKey {
    (r.benchmark.clone(), r.dims.clone(), r.metric.clone())
}

/// The baseline rows of a report, indexed once by (benchmark, dims,
/// metric): `--baseline` names a backend (rows of that backend) or a file
/// (rows of that file). A row's baseline is the one baseline row with its
/// dimensions; none when no row or several match (the ratio would be
/// arbitrary). Built in one pass, so a report's cost stays linear in its rows.
pub(super) struct Baselines<'a> {
    by_dims: HashMap<DimsKey, Vec<&'a Row>>,
}

impl<'a> Baselines<'a> {
    pub(super) fn new(rows: &'a [Row], baseline: &str) -> Baselines<'a> {
        let mut by_dims: HashMap<_, Vec<&Row>> = HashMap::new();
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
    pub(super) fn ambiguous(&self, r: &Row) -> bool {
        self.matching(r).len() > 1
    }
}

/// Whether `b` is a baseline row: its backend or file is `baseline` (a path
/// names its file).
pub(super) fn is_baseline(b: &Row, baseline: &str) -> bool {
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
///
/// Rows are ordered by `plan.group_by` (numbers and sizes by value), then
/// file name. Markdown: one `### <benchmark>` table each, figures as
/// `median (min–max)`; CSV: a header line and one line per row; JSON: an
/// array of the rows with `gbps_per_core`, `ratio_to_baseline` and
/// `unproven_rdma` added. The ratio is the row's median over its one
/// `--baseline` row's (empty when none or several match).
pub fn render(rows: &[Row], plan: &ReportPlan) -> String {
    let mut rows = rows.to_vec();
    rows.sort_by(|a, b| cmp_keys(&group_key(a, &plan.group_by), &group_key(b, &plan.group_by)).then_with(|| a.file.cmp(&b.file)));
    let baselines = plan.baseline.as_deref().map(|b| Baselines::new(&rows, b));
    let ratio = |r: &Row| baselines.as_ref().and_then(|b| b.of(r)).filter(|b| b.value.median > 0.0).map(|b| r.value.median / b.value.median);
    match plan.format {
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
        ReportFormat::Csv => render_csv(&rows, &ratio),
        ReportFormat::Md => render_md(&rows, plan, &ratio),
    }
}

/// [`render`]'s CSV: a header line and one line per row.
fn render_csv(rows: &[Row], ratio: &dyn Fn(&Row) -> Option<f64>) -> String {
    let mut s = String::from(
        "benchmark,backend,dims,metric,median,min,max,wall_s_median,cpu_cores,gbps_per_core,ratio_to_baseline,verdict,unproven_rdma,file,server\n",
    );
    for r in rows {
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

/// [`render`]'s markdown: one `### <benchmark>` table per benchmark, in the
/// order they first appear.
fn render_md(rows: &[Row], plan: &ReportPlan, ratio: &dyn Fn(&Row) -> Option<f64>) -> String {
    let mut s = String::new();
    // One table per benchmark, in the order they first appear: a
    // --group-by that does not start with benchmark interleaves them.
    let mut benches: Vec<&str> = Vec::new();
    for r in rows.iter() {
        if !benches.contains(&r.benchmark.as_str()) {
            benches.push(&r.benchmark);
        }
    }
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
            if plan.baseline.is_some() { " ratio |" } else { "" }
        );
        s += &format!("|---|{}---|---|---|---|{}---|---|\n", "---|".repeat(dim_names.len()), if plan.baseline.is_some() { "---|" } else { "" });
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
                if plan.baseline.is_some() { format!(" {} |", ratio(r).map_or("-".into(), |x| format!("{x:.2}x"))) } else { String::new() },
                md(&r.file)
            );
        }
        if these.iter().any(|r| r.server.is_some()) {
            s += "\nA backend marked \"on this host\" or \"loopback server\" was measured against a server on the measuring machine: \
                  it shares that machine's CPU; a test server such as s3s-fs (4 KiB file reads, about 0.6–0.8 GB/s) is itself the limit, nginx (sendfile) is not.\n";
        }
        s += "\n";
    }
    s
}

/// Write to stdout: a closed pipe (`| head`) ends quietly, any other failure
/// (a full disk) is an error, never a panic.
///
/// Errors (runtime): the write or flush failed for another reason than a
/// broken pipe.
pub fn write_stdout(bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|_| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Error::Runtime(format!("cannot write to stdout: {e}"))),
    }
}
