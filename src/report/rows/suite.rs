//! The original suite's records, and benchmarks without a view of their own
//! -> rows: one per `results` entry (or for `results` itself) that holds any
//! known figure, under the suite's field names.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::fields::{Figure, Scalar, Verdict, median, present_verdict, spread};
use super::{Head, ReportRows, Windows};
use crate::error::Result;
use crate::report::Row;

/// The fields of a record read by the suite's names.
#[derive(Deserialize)]
pub(super) struct SuiteRecord {
    /// A list of entries, or one entry; entries that are not objects hold no
    /// figure. Kept as JSON until each object entry is read as an [`Item`].
    results: Value,
}

/// One entry of `results`: every field is optional, and one the report
/// cannot use (a figure that is a list, a dimension that is an object)
/// reads as absent.
#[derive(Deserialize)]
struct Item {
    throughput_gbps: Option<Figure>,
    gbps: Option<Figure>,
    tokens_per_s: Option<Figure>,
    images_per_s: Option<Figure>,
    size: Option<Scalar>,
    object_size: Option<Scalar>,
    size_bytes: Option<Scalar>,
    concurrency: Option<Scalar>,
    streams: Option<Scalar>,
    procs: Option<Scalar>,
    layout: Option<Scalar>,
    state: Option<Scalar>,
    op: Option<Scalar>,
    method: Option<Scalar>,
    wall_s: Option<Figure>,
    seconds: Option<Figure>,
    client_cpu_cores: Option<Figure>,
    cpu_cores: Option<Figure>,
    /// Present (`null` included: "none") wins over `witness`.
    #[serde(default, deserialize_with = "present_verdict")]
    rdma_witness: Option<Verdict>,
    #[serde(default, deserialize_with = "present_verdict")]
    witness: Option<Verdict>,
}

impl Item {
    /// The first known figure and its unit.
    fn figure(&self) -> Option<(&'static str, crate::stats::Spread)> {
        [(&self.throughput_gbps, "GB/s"), (&self.gbps, "GB/s"), (&self.tokens_per_s, "tokens/s"), (&self.images_per_s, "images/s")]
            .into_iter()
            .find_map(|(f, unit)| spread(f).map(|v| (unit, v)))
    }

    /// Dimensions under this report's names (`object_size` -> size, `streams`
    /// -> concurrency); of two names for one dimension, the later one in
    /// this list wins.
    fn dims(&self) -> BTreeMap<String, String> {
        let named = [
            ("size", &self.size, true),
            ("size", &self.object_size, true),
            ("size", &self.size_bytes, true),
            ("concurrency", &self.concurrency, false),
            ("concurrency", &self.streams, false),
            ("procs", &self.procs, false),
            ("layout", &self.layout, false),
            ("state", &self.state, false),
            ("op", &self.op, false),
            ("method", &self.method, false),
        ];
        let mut dims = BTreeMap::new();
        for (name, value, bytes) in named {
            if let Some(text) = value.as_ref().and_then(|v| v.text(bytes)) {
                dims.insert(name.to_string(), text);
            }
        }
        dims
    }
}

impl ReportRows for SuiteRecord {
    fn rows(&self, head: &Head) -> Result<Vec<(Row, Windows)>> {
        let entries: Vec<&Value> = match &self.results {
            Value::Array(a) => a.iter().collect(),
            other => vec![other],
        };
        let mut out = Vec::new();
        for entry in entries.into_iter().filter(|e| e.is_object()) {
            let it = Item::deserialize(entry).map_err(|e| head.bad(&format!("a results entry does not read ({e})")))?;
            let Some((unit, v)) = it.figure() else { continue };
            let dims = it.dims();
            // A fetch row's windows are its cell's, by the label fetch writes.
            let windows = if head.benchmark == "fetch" {
                let (size, conc) = (dims.get("size").cloned().unwrap_or_default(), dims.get("concurrency").cloned().unwrap_or_default());
                Windows::Labelled(format!("{size} x {conc} streams x {} procs,", dims.get("procs").map_or("1", String::as_str)))
            } else {
                Windows::Run
            };
            let mut r = head.row(dims, unit, v);
            r.wall_s = spread(&it.wall_s).or_else(|| spread(&it.seconds));
            r.cpu_cores = median(&it.client_cpu_cores).or_else(|| median(&it.cpu_cores));
            r.gbps = if unit == "GB/s" { Some(v.median) } else { median(&it.throughput_gbps) };
            if let Some(w) = it.rdma_witness.as_ref().or(it.witness.as_ref()) {
                r.verdict = w.0.clone();
            }
            out.push((r, windows));
        }
        Ok(out)
    }
}
