//! `ckpt` records -> rows: one per (state, method, op, ranks[, cache]), GB/s
//! and seconds, flagged where the restore compared different bytes.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Number;

use super::fields::{Figure, Verified, median, spread};
use super::{Head, ReportRows, Windows};
use crate::error::Result;
use crate::report::Row;

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
            let mut dims = BTreeMap::from([
                ("state".to_string(), row.state.clone()),
                ("method".to_string(), row.method.clone()),
                ("op".to_string(), row.op.clone()),
                ("ranks".to_string(), row.ranks.to_string()),
            ]);
            // A restore keeps warm and cold apart (records before --restore-cache have neither).
            if let Some(c) = &row.cache {
                dims.insert("cache".into(), c.clone());
            }
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
