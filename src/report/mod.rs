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
//!
//! The work is split by job: `load` ([`load()`]) reads files and skips what
//! is no record or no measurement, `rows` ([`rows_of`]) reads one record
//! through its benchmark's typed view into [`Row`]s, `render` ([`render()`])
//! orders, compares and prints them. This module holds the row type and
//! [`run`].

mod load;
mod plot;
mod render;
mod rows;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::flag::{BASELINE, GROUP_BY};
use crate::stats::Spread;

pub use load::{impossible, load};
pub use render::{render, write_stdout};
pub use rows::{UNPROVEN, rows_of, server_of};

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
    /// A checkpoint save with a training load (`ckpt --train-load`): its
    /// size in bytes and the seconds it blocked training (median and range
    /// over repeats), what `--plot` draws against each other.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blocked: Option<(u64, Spread)>,
}

impl Row {
    /// GB/s per client core: `gbps / cpu_cores`; `None` when either is
    /// missing or the row used no CPU.
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

/// Output of `s3rdma report` (`--format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportFormat {
    /// One markdown table per benchmark.
    Md,
    /// Comma-separated values, one line per row.
    Csv,
    /// The rows as a JSON array.
    Json,
}

/// What `s3rdma report` reads and how it shows it (the CLI's `cli/plan.rs`
/// makes it of the flags).
#[derive(Debug, Clone)]
pub struct ReportPlan {
    /// Result records; files that are not run records are skipped with a note.
    pub files: Vec<PathBuf>,
    /// Row order: fields compared first (benchmark, backend, tag, file, or a dimension).
    pub group_by: Vec<String>,
    /// Ratio column against the rows of this backend or this file with the same dimensions.
    pub baseline: Option<String>,
    /// Where to draw an SVG, when asked.
    pub plot: Option<PathBuf>,
    /// Output format.
    pub format: ReportFormat,
    /// Also show rdma records made through a library of no known RDMA engine.
    pub include_test_doubles: bool,
}

/// Run `s3rdma report`: load `plan.files`, check `--baseline` and
/// `--group-by` against the rows, draw `--plot`, print the tables to stdout.
///
/// Errors (usage): no files, a file that cannot be read, no rows at all, a
/// `--baseline` that matches no row, a bad `--plot` path; a drawing or
/// stdout failure (runtime).
pub async fn run(plan: ReportPlan) -> Result<()> {
    if plan.files.is_empty() {
        return Err(Error::Usage("give result files, e.g. `s3rdma report results/*.json`".into()));
    }
    let rows = load(&plan.files, plan.include_test_doubles)?;
    if let Some(b) = &plan.baseline
        && !rows.iter().any(|r| render::is_baseline(r, b))
    {
        let mut backends: Vec<&str> = rows.iter().map(|r| r.backend.as_str()).collect();
        backends.sort();
        backends.dedup();
        return Err(Error::Usage(format!("{BASELINE} '{b}' matches no row: the rows' backends are {}; or name one of the files", backends.join(", "))));
    }
    if let Some(b) = &plan.baseline
        && let index = render::Baselines::new(&rows, b)
        && rows.iter().any(|r| index.ambiguous(r))
    {
        eprintln!(
            "note: some rows match several {BASELINE} '{b}' rows with the same dimensions (repeated runs): their ratio is left empty; name one file as {BASELINE}"
        );
    }
    for k in &plan.group_by {
        let known = ["benchmark", "backend", "tag", "file"].contains(&k.as_str()) || rows.iter().any(|r| r.dims.contains_key(k));
        // The default order names fields some benchmarks lack: only a field the user gave is worth a note.
        let default = ["benchmark", "backend", "size", "concurrency"].contains(&k.as_str());
        if !known && !default {
            eprintln!("note: {GROUP_BY} '{k}' is neither benchmark/backend/tag/file nor a dimension of any row: ignored");
        }
    }
    if let Some(p) = &plan.plot {
        plot::draw(&rows, p)?;
        eprintln!("wrote {}", p.display());
    }
    let mut text = render(&rows, &plan);
    if !text.ends_with('\n') {
        text.push('\n');
    }
    write_stdout(text.as_bytes())
}
