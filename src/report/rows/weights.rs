//! `weights` records -> one row: the model's load, GB/s and seconds,
//! flagged where `--verify` compared different bytes.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Number;

use super::fields::{Figure, Verified, median, spread};
use super::{Head, ReportRows, Windows};
use crate::error::Result;
use crate::report::Row;

/// The fields of a weights record the report reads.
#[derive(Deserialize)]
pub(super) struct WeightsRecord {
    params: Params,
    results: Results,
}

/// `params`.
#[derive(Deserialize)]
struct Params {
    model: Option<String>,
    concurrency: Number,
}

/// `results`.
#[derive(Deserialize)]
struct Results {
    summary: Option<Summary>,
    verified: Option<Verified>,
}

/// `results.summary`: over repeats.
#[derive(Deserialize)]
struct Summary {
    throughput_gbps: Option<Figure>,
    wall_s: Option<Figure>,
    client_cpu_cores: Option<Figure>,
}

impl ReportRows for WeightsRecord {
    fn rows(&self, head: &Head) -> Result<Vec<(Row, Windows)>> {
        let s = self.results.summary.as_ref();
        let v = spread(&s.and_then(|s| s.throughput_gbps)).ok_or_else(|| head.bad("weights results have no summary"))?;
        let dims = dims(head, self.params.model.clone().unwrap_or_else(|| "?".into()), self.params.concurrency.to_string());
        let mut r = head.row(dims, "GB/s", v);
        r.wall_s = spread(&s.and_then(|s| s.wall_s));
        r.cpu_cores = median(&s.and_then(|s| s.client_cpu_cores));
        r.gbps = Some(v.median);
        r.data_mismatch = Verified::failed(&self.results.verified);
        Ok(vec![(r, Windows::Run)])
    }
}

/// A weights row's dimensions: the model, shards at once, and the local
/// store's reader threads where recorded (how the store was driven changes
/// the figure, though it is no dimension of the bench).
fn dims(head: &Head, model: String, concurrency: String) -> BTreeMap<String, String> {
    let mut dims = BTreeMap::from([("model".to_string(), model), ("concurrency".to_string(), concurrency)]);
    if let Some(t) = head.io_threads {
        dims.insert("io_threads".into(), t.to_string());
    }
    dims
}

/// Schema 4 on: the writer's own record type (`src/bench/weights/results.rs`).
impl ReportRows for crate::bench::weights::WeightsRecord {
    fn rows(&self, head: &Head) -> Result<Vec<(Row, Windows)>> {
        let s = &self.results.summary;
        // The writer records every timed load: a record without one is no measurement.
        if self.results.repeats.is_empty() {
            return Err(head.bad("results.repeats is empty"));
        }
        let mut r = head.row(dims(head, self.params.model.clone(), self.params.concurrency.to_string()), "GB/s", s.throughput_gbps);
        r.wall_s = Some(s.wall_s);
        r.cpu_cores = Some(s.client_cpu_cores.median);
        r.gbps = Some(s.throughput_gbps.median);
        r.data_mismatch = self.results.verified.as_ref().is_some_and(|v| !v.ok);
        Ok(vec![(r, Windows::Cell { index: 0, label_prefix: None })])
    }
}
