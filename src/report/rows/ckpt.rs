//! `ckpt` records -> rows: one per (state, method, op, ranks[, cache]), GB/s
//! and seconds, flagged where the restore compared different bytes.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Number;

use super::fields::{Figure, Verified, median, spread};
use super::{Head, ReportRows, Windows};
use crate::error::Result;
use crate::report::Row;
use crate::units::size_name;

/// The fields of a ckpt record the report reads.
#[derive(Deserialize)]
pub(super) struct CkptRecord {
    results: Results,
}

/// `results`.
#[derive(Deserialize)]
struct Results {
    rows: Option<Vec<CkptRow>>,
}

/// `results.rows[]`: one (state, method, op, ranks) measurement.
#[derive(Deserialize)]
struct CkptRow {
    state: String,
    method: String,
    op: String,
    ranks: Number,
    /// A restore's page cache, warm or cold (absent before `--restore-cache`).
    cache: Option<String>,
    throughput_gbps: Option<Figure>,
    wall_s: Option<Figure>,
    client_cpu_cores: Option<Figure>,
    witness_verdict: Option<String>,
    verified: Option<Verified>,
    /// The state's size, all ranks (absent in the oldest records).
    size_bytes: Option<u64>,
    /// A save's training view (`--train-load`).
    train: Option<TrainView>,
}

/// `results.rows[].train`: what the report plots of it.
#[derive(Deserialize)]
struct TrainView {
    blocked_s: Option<Figure>,
}

impl ReportRows for CkptRecord {
    fn rows(&self, head: &Head) -> Result<Vec<(Row, Windows)>> {
        let rows = self.results.rows.as_ref().ok_or_else(|| head.bad("ckpt results have no rows"))?;
        let mut out = Vec::new();
        for (index, row) in rows.iter().enumerate() {
            let Some(v) = spread(&row.throughput_gbps) else { continue };
            let dims = dims(&row.state, &row.method, &row.op, row.ranks.to_string(), row.cache.as_deref());
            let mut r = head.row(dims, "GB/s", v);
            r.wall_s = spread(&row.wall_s);
            r.cpu_cores = median(&row.client_cpu_cores);
            r.gbps = Some(v.median);
            if let Some(w) = &row.witness_verdict {
                r.verdict = w.clone();
            }
            r.data_mismatch = Verified::failed(&row.verified);
            r.blocked = row.size_bytes.zip(row.train.as_ref().and_then(|t| spread(&t.blocked_s)));
            // Schema 3 joins the row's own windows; older records, by every window of the run.
            out.push((r, Windows::Cell { index, label_prefix: None }));
        }
        Ok(out)
    }
}

/// A ckpt row's dimensions: state, method, op, ranks and, for a restore, the
/// cache it met (warm and cold are kept apart; records before
/// `--restore-cache` have neither).
fn dims(state: &str, method: &str, op: &str, ranks: String, cache: Option<&str>) -> BTreeMap<String, String> {
    let mut dims = BTreeMap::from([
        ("state".to_string(), state.to_string()),
        ("method".to_string(), method.to_string()),
        ("op".to_string(), op.to_string()),
        ("ranks".to_string(), ranks),
    ]);
    if let Some(c) = cache {
        dims.insert("cache".into(), c.to_string());
    }
    dims
}

/// Schema 4 on: the writer's own record type (`src/bench/ckpt/results.rs`,
/// `record.rs`). Each row is judged by its own windows (its index). The
/// chunk size the row moved, the chunks in flight and the training load
/// beside a save are dimensions too, so `--baseline` compares only runs
/// alike in them.
impl ReportRows for crate::bench::ckpt::CkptRecord {
    fn rows(&self, head: &Head) -> Result<Vec<(Row, Windows)>> {
        let mut out = Vec::new();
        for (index, row) in self.results.rows.iter().enumerate() {
            let v = row.throughput_gbps;
            let mut d = dims(&row.state, row.method.name(), row.op.name(), row.ranks.to_string(), row.cache.as_deref());
            let p = &self.params;
            // The chunk size the row moved (a restore reads the saved one;
            // serialize-then-put moves one object) and its transfers in flight.
            d.insert("chunk".into(), if row.chunk_bytes > 0 { size_name(row.chunk_bytes) } else { "one object".into() });
            d.insert("concurrency".into(), row.concurrency.to_string());
            let load = p.train_load.as_ref().map_or_else(|| "none".to_string(), |t| format!("gemm {} on {}", t.gemm_side, t.device));
            d.insert("train load".into(), load);
            let mut r = head.row(d, "GB/s", v);
            r.wall_s = Some(row.wall_s);
            r.cpu_cores = Some(row.client_cpu_cores.median);
            r.gbps = Some(v.median);
            r.verdict = row.witness_verdict.clone();
            r.data_mismatch = row.verified.as_ref().is_some_and(|v| !v.ok);
            r.blocked = row.train.as_ref().map(|t| (row.size_bytes, t.blocked_s));
            out.push((r, Windows::Cell { index, label_prefix: None }));
        }
        Ok(out)
    }
}
