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
        let dims = dims(p.layout.as_deref(), p.ranks.to_string(), p.jpeg_fetch.as_deref(), p.loader_only == Some(true));
        let mut r = head.row(dims, "images/s", v);
        r.wall_s = spread(&s.and_then(|s| s.wall_s));
        r.cpu_cores = median(&s.and_then(|s| s.client_cpu_cores));
        r.gbps = median(&s.and_then(|s| s.read_gbps));
        Ok(vec![(r, Windows::Run)])
    }
}

/// A train row's dimensions: layout, ranks, how jpeg samples were read, and
/// whether the loader ran alone.
fn dims(layout: Option<&str>, ranks: String, jpeg_fetch: Option<&str>, loader_only: bool) -> BTreeMap<String, String> {
    let mut dims = BTreeMap::from([("layout".to_string(), layout.unwrap_or("?").to_string()), ("ranks".to_string(), ranks)]);
    if layout == Some("jpeg") {
        dims.insert("jpeg_fetch".into(), jpeg_fetch.unwrap_or("?").to_string());
    }
    if loader_only {
        dims.insert("loader".into(), "only".into());
    }
    dims
}

/// Schema 4 on: the writer's own record type (`src/bench/train/record.rs`).
impl ReportRows for crate::bench::train::TrainRecord {
    fn rows(&self, head: &Head) -> Result<Vec<(Row, Windows)>> {
        let (p, s) = (&self.params, &self.results.summary);
        let dims = dims(Some(p.layout.name()), p.ranks.to_string(), Some(p.jpeg_fetch.name()), p.loader_only);
        let mut r = head.row(dims, "images/s", s.images_per_s);
        r.wall_s = Some(s.wall_s);
        r.cpu_cores = Some(s.client_cpu_cores.median);
        r.gbps = Some(s.read_gbps.median);
        Ok(vec![(r, Windows::Cell { index: 0, label_prefix: None })])
    }
}
