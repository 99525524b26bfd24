//! `fetch` records -> rows: one per cell (size, concurrency[, procs]), GB/s
//! over the cell's repeats, with the cell's own witness windows.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Number;

use super::fields::{Figure, lenient, median, spread};
use super::{Head, ReportRows, Windows};
use crate::bench::fetch::StreamBufferKind;
use crate::error::Result;
use crate::report::Row;
use crate::stats::Spread;
use crate::units::size_name;

/// The fields of a fetch record the report reads.
#[derive(Deserialize)]
pub(super) struct FetchRecord {
    params: Option<Params>,
    /// One entry per (size, concurrency[, procs]) cell.
    results: Vec<Cell>,
    /// Another shape (the original suite's bare verdict string) holds no
    /// per-cell verdicts.
    #[serde(default, deserialize_with = "lenient")]
    rdma_witness: Option<Witness>,
}

/// `params`.
#[derive(Deserialize)]
struct Params {
    /// `--verify`: every byte read was compared (absent before the flag).
    verify: Option<bool>,
    /// `--stream-buffer` as run (absent before the flag; another shape: none).
    #[serde(default, deserialize_with = "lenient")]
    stream_buffer: Option<OldStreamBuffer>,
}

/// `params.stream_buffer` before schema 4: `kind` `object`, or `window`
/// with `window_bytes` (a reused buffer read through in ranged GETs).
#[derive(Deserialize)]
struct OldStreamBuffer {
    kind: String,
    window_bytes: Option<u64>,
}

impl OldStreamBuffer {
    /// The row's `stream_buffer` dimension, as schema 4's [`StreamBufferKind::label`] writes it.
    fn label(&self) -> Option<String> {
        match (self.kind.as_str(), self.window_bytes) {
            ("window", Some(n)) => Some(StreamBufferKind::Reused { buffer_bytes: n }.label()),
            _ => None,
        }
    }
}

/// `results[]`: one cell.
#[derive(Deserialize)]
struct Cell {
    size_bytes: u64,
    /// Streams per process, as written (a number; shown as JSON writes it).
    concurrency: Number,
    /// Processes; absent in records before `--procs`.
    procs: Option<Number>,
    summary: Option<Summary>,
    #[serde(default)]
    repeats: Vec<Repeat>,
}

/// `results[].summary`: over repeats.
#[derive(Deserialize)]
struct Summary {
    throughput_gbps: Option<Figure>,
    client_cpu_cores: Option<Figure>,
}

/// `results[].repeats[]`: one timed repeat (`null` figures: NaN when written).
#[derive(Deserialize)]
struct Repeat {
    throughput_gbps: Option<f64>,
    client_cpu_cores: Option<f64>,
    /// `--series`: [seconds, GB/s] points.
    series: Option<Vec<[Option<f64>; 2]>>,
}

/// `rdma_witness`, as far as fetch reads it: its per-cell verdicts.
#[derive(Deserialize)]
struct Witness {
    /// Absent, or in another shape: no per-cell verdicts.
    #[serde(default, deserialize_with = "lenient")]
    cells: Option<Vec<CellVerdict>>,
}

/// `rdma_witness.cells[]`: the stored verdict of one cell.
#[derive(Deserialize)]
struct CellVerdict {
    size_bytes: Option<u64>,
    concurrency: Option<Number>,
    procs: Option<Number>,
    verdict: Option<String>,
}

impl Cell {
    /// The label prefix of this cell's witness windows, as fetch writes
    /// them (`"16MiB x 4 streams x 1 procs, repeat 1"`): the windows carry
    /// only that label, so it is built from the cell's own fields.
    fn window_prefix(&self) -> String {
        let procs = self.procs.as_ref().map_or_else(|| "1".to_string(), Number::to_string);
        format!("{} x {} streams x {procs} procs,", size_name(self.size_bytes), self.concurrency)
    }

    /// The cell's stored verdict, where the witness judged cells.
    fn stored_verdict(&self, witness: &Option<Witness>) -> Option<String> {
        let cells = witness.as_ref()?.cells.as_ref()?;
        let c = cells.iter().find(|c| c.size_bytes == Some(self.size_bytes) && c.concurrency.as_ref() == Some(&self.concurrency) && c.procs == self.procs)?;
        Some(c.verdict.clone().unwrap_or_else(|| "none".into()))
    }
}

/// A fetch cell's dimensions: size, streams, processes (where recorded),
/// whether every byte was compared (`--verify` costs client CPU on the read
/// path: a verified run is another cell) and a reused stream buffer's size
/// (`--stream-buffer`: reading through one changes the figure; whole-object
/// buffers, the default, add none).
fn cell_dims(size_bytes: u64, concurrency: String, procs: Option<String>, verify: bool, reused: Option<String>) -> BTreeMap<String, String> {
    let mut dims = BTreeMap::from([("size".to_string(), size_name(size_bytes)), ("concurrency".to_string(), concurrency)]);
    if let Some(p) = procs {
        dims.insert("procs".into(), p);
    }
    if verify {
        dims.insert("verify".into(), "every byte".into());
    }
    if let Some(r) = reused {
        dims.insert("stream_buffer".into(), r);
    }
    dims
}

impl ReportRows for FetchRecord {
    fn rows(&self, head: &Head) -> Result<Vec<(Row, Windows)>> {
        let verify = self.params.as_ref().and_then(|p| p.verify) == Some(true);
        let reused = self.params.as_ref().and_then(|p| p.stream_buffer.as_ref()).and_then(OldStreamBuffer::label);
        let mut out = Vec::new();
        for (index, cell) in self.results.iter().enumerate() {
            let summary = cell.summary.as_ref();
            // From the raw per-repeat figures where the record has them, else its summary.
            let reps = cell.repeats.iter().filter_map(|r| r.throughput_gbps);
            let Some(v) = Spread::of(reps).or_else(|| spread(&summary.and_then(|s| s.throughput_gbps))) else { continue };
            let dims = cell_dims(cell.size_bytes, cell.concurrency.to_string(), cell.procs.as_ref().map(Number::to_string), verify, reused.clone());
            let mut r = head.row(dims, "GB/s", v);
            r.series = cell.repeats.first().and_then(|r| r.series.as_ref()).map(|s| s.iter().filter_map(|&[t, g]| Some([t?, g?])).collect());
            let cores = Spread::of(cell.repeats.iter().filter_map(|r| r.client_cpu_cores));
            r.cpu_cores = cores.map(|c| c.median).or_else(|| median(&summary.and_then(|s| s.client_cpu_cores)));
            r.gbps = Some(v.median);
            if let Some(v) = cell.stored_verdict(&self.rdma_witness) {
                r.verdict = v;
            }
            out.push((r, Windows::Cell { index, label_prefix: Some(cell.window_prefix()) }));
        }
        Ok(out)
    }
}

/// Schema 4 on: the writer's own record type (`src/bench/fetch/record.rs`).
/// A cell's figure is over its repeats; its stored verdict is the witness's
/// entry for it (the same index), judged again from its own windows.
impl ReportRows for crate::bench::fetch::FetchRecord {
    fn rows(&self, head: &Head) -> Result<Vec<(Row, Windows)>> {
        let reused = match self.params.stream_buffer.kind {
            StreamBufferKind::Object => None,
            kind => Some(kind.label()),
        };
        let mut out = Vec::new();
        for (index, cell) in self.results.iter().enumerate() {
            // The writer records every timed repeat: a cell without one is no measurement.
            let v = Spread::of(cell.repeats.iter().map(|r| r.throughput_gbps)).ok_or_else(|| head.bad(&format!("results[{index}] has no repeats")))?;
            let dims = cell_dims(cell.size_bytes, cell.concurrency.to_string(), Some(cell.procs.to_string()), self.params.verify, reused.clone());
            let mut r = head.row(dims, "GB/s", v);
            r.series = cell.repeats.first().and_then(|r| r.series.clone());
            r.cpu_cores = Spread::of(cell.repeats.iter().map(|r| r.client_cpu_cores)).map(|c| c.median);
            r.wall_s = Spread::of(cell.repeats.iter().map(|r| r.wall_s));
            r.gbps = Some(v.median);
            if let Some(c) = self.rdma_witness.cells.get(index) {
                r.verdict = c.verdict.as_str().to_string();
            }
            out.push((r, Windows::Cell { index, label_prefix: None }));
        }
        Ok(out)
    }
}
