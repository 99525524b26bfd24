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
    environment: Option<Environment>,
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

/// `environment`, as far as weights reads it.
#[derive(Deserialize)]
struct Environment {
    store: Option<Store>,
}

/// `environment.store`: how the store was driven.
#[derive(Deserialize)]
struct Store {
    /// Local store's I/O threads (absent for http and rdma).
    io_threads: Option<u64>,
}

impl ReportRows for WeightsRecord {
    fn rows(&self, head: &Head) -> Result<Vec<(Row, Windows)>> {
        let s = self.results.summary.as_ref();
        let v = spread(&s.and_then(|s| s.throughput_gbps)).ok_or_else(|| head.bad("weights results have no summary"))?;
        let mut dims = BTreeMap::from([("model".to_string(), self.params.model.clone().unwrap_or_else(|| "?".into()))]);
        dims.insert("concurrency".into(), self.params.concurrency.to_string());
        // How the store was driven changes the figure, though it is no dimension of the bench.
        if let Some(t) = self.environment.as_ref().and_then(|e| e.store.as_ref()).and_then(|s| s.io_threads) {
            dims.insert("io_threads".into(), t.to_string());
        }
        let mut r = head.row(dims, "GB/s", v);
        r.wall_s = spread(&s.and_then(|s| s.wall_s));
        r.cpu_cores = median(&s.and_then(|s| s.client_cpu_cores));
        r.gbps = Some(v.median);
        r.data_mismatch = Verified::failed(&self.results.verified);
        Ok(vec![(r, Windows::Run)])
    }
}
