//! A `fetch` record's own parts, as the writer builds them and `s3rdma
//! report` reads them back (schema 3 on): the plan as run ([`FetchParams`]),
//! the per-cell verdicts beside the witness windows ([`CellVerdict`]), and
//! the whole record's view ([`FetchRecord`]). One type for both, so a field
//! renamed here is renamed for the reader.

use serde::{Deserialize, Serialize};

use super::results::CellResult;
use crate::witness::Verdict;

/// A `fetch` run's `params`: the plan as run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FetchParams {
    /// Object sizes, bytes: one cell per size (and per concurrency, per process count).
    pub sizes_bytes: Vec<u64>,
    /// Streams per process, one cell each.
    pub concurrency: Vec<u32>,
    /// Worker processes, one cell each.
    pub procs: Vec<u32>,
    /// Objects per size the streams read in turn.
    pub objects: u32,
    /// Key prefix of the objects.
    pub prefix: String,
    /// Bucket read from.
    pub bucket: String,
    /// Length of one timed repeat, seconds (`None` when `iters` sets it).
    pub duration_s: Option<f64>,
    /// GETs per stream in one repeat, where that sets its length.
    pub iters: Option<u32>,
    /// Untimed reads before each cell, seconds.
    pub warmup_s: f64,
    /// Timed repeats per cell.
    pub repeats: u32,
    /// Whether the run wrote the objects it found missing.
    pub prepare: bool,
    /// Whether every byte read was compared with what was written.
    pub verify: bool,
    /// With `verify`: which bytes were compared, where (as staged, or read
    /// back from the destination).
    pub verify_checks: Option<String>,
    /// How each stream holds what it reads.
    pub stream_buffer: StreamBufferParams,
}

/// `params.stream_buffer`: one buffer per object, or one reused buffer per
/// stream read through in ranged GETs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StreamBufferParams {
    /// Which.
    #[serde(flatten)]
    pub kind: StreamBufferKind,
    /// What chose it: the flag, or the rule that sized it by default.
    pub chosen_by: String,
}

/// `params.stream_buffer.kind`, with the reused buffer's size beside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum StreamBufferKind {
    /// The whole object in one buffer per stream (the bytes kept).
    Object,
    /// One buffer per stream, read through in ranged GETs and reused.
    Reused {
        /// Its size, bytes (`params.stream_buffer.buffer_bytes`).
        buffer_bytes: u64,
    },
}

impl StreamBufferKind {
    /// The report's dimension: `object`, or `reused <size>`.
    pub fn label(self) -> String {
        match self {
            StreamBufferKind::Object => "object".into(),
            StreamBufferKind::Reused { buffer_bytes } => format!("reused {}", crate::units::size_name(buffer_bytes)),
        }
    }
}

/// `rdma_witness.cells[]`: one cell's worst verdict over its repeats.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CellVerdict {
    /// The cell's object size, bytes.
    pub size_bytes: u64,
    /// Its streams per process.
    pub concurrency: u32,
    /// Its worker processes.
    pub procs: u32,
    /// Worst verdict over the cell's repeats.
    pub verdict: Verdict,
    /// The reason that goes with it.
    pub reason: String,
    /// RDMA share of the repeat the verdict comes from.
    pub rdma_share: Option<f64>,
}

impl CellVerdict {
    /// The verdict of `cell`, from its summary.
    pub fn of(cell: &CellResult) -> CellVerdict {
        CellVerdict {
            size_bytes: cell.size_bytes,
            concurrency: cell.concurrency,
            procs: cell.procs,
            verdict: cell.summary.witness_verdict,
            reason: cell.summary.witness_reason.clone(),
            rdma_share: cell.summary.witness_share,
        }
    }
}

/// `rdma_witness`, as far as it is fetch's own: the per-cell verdicts.
#[derive(Debug, Clone, Deserialize)]
pub struct FetchWitness {
    /// One per cell, in the order of `results`.
    pub cells: Vec<CellVerdict>,
}

/// A `fetch` record as `s3rdma report` reads it from schema 3 on: the
/// writer's own types.
#[derive(Debug, Clone, Deserialize)]
pub struct FetchRecord {
    /// The plan as run.
    pub params: FetchParams,
    /// One entry per (size, concurrency, procs) cell.
    pub results: Vec<CellResult>,
    /// The per-cell verdicts.
    pub rdma_witness: FetchWitness,
}
