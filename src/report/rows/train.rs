//! `train` records -> one row: images/s and seconds per (layout, ranks
//! [, jpeg fetch][, loader only]).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Number;

use super::fields::{Figure, median, spread};
use super::{Head, ReportRows, Windows};
use crate::error::Result;
use crate::report::Row;

/// The fields of a train record the report reads.
#[derive(Deserialize)]
pub(super) struct TrainRecord {
    params: Params,
    results: Results,
}

/// `params`.
#[derive(Deserialize)]
struct Params {
    /// `raw` or `jpeg`.
    layout: Option<String>,
    ranks: Number,
    /// How jpeg samples are fetched (jpeg layout only).
    jpeg_fetch: Option<String>,
    /// `--loader-only`: no model step.
    loader_only: Option<bool>,
}

/// `results`.
#[derive(Deserialize)]
struct Results {
    summary: Option<Summary>,
}

/// `results.summary`: over repeats.
#[derive(Deserialize)]
struct Summary {
    images_per_s: Option<Figure>,
    wall_s: Option<Figure>,
    client_cpu_cores: Option<Figure>,
    read_gbps: Option<Figure>,
}

impl ReportRows for TrainRecord {
    fn rows(&self, head: &Head) -> Result<Vec<(Row, Windows)>> {
        let s = self.results.summary.as_ref();
        let v = spread(&s.and_then(|s| s.images_per_s)).ok_or_else(|| head.bad("train results have no summary"))?;
        let p = &self.params;
        let mut dims = BTreeMap::new();
        dims.insert("layout".into(), p.layout.clone().unwrap_or_else(|| "?".into()));
        dims.insert("ranks".into(), p.ranks.to_string());
        if p.layout.as_deref() == Some("jpeg") {
            dims.insert("jpeg_fetch".into(), p.jpeg_fetch.clone().unwrap_or_else(|| "?".into()));
        }
        if p.loader_only == Some(true) {
            dims.insert("loader".into(), "only".into());
        }
        let mut r = head.row(dims, "images/s", v);
        r.wall_s = spread(&s.and_then(|s| s.wall_s));
        r.cpu_cores = median(&s.and_then(|s| s.client_cpu_cores));
        r.gbps = median(&s.and_then(|s| s.read_gbps));
        Ok(vec![(r, Windows::Run)])
    }
}
