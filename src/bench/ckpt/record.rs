//! A `ckpt` record's plan as run ([`CkptParams`]) and the record as `s3rdma
//! report` reads it back (schema 4 on: [`CkptRecord`]), from the writer's
//! own types, so a field renamed here is renamed for the reader.

use serde::{Deserialize, Serialize};

use super::plan::{ChunkChecksum, CkptMethod, CkptOp, RestoreCache};
use super::results::CkptResults;

/// A `ckpt` run's `params`: the plan as run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CkptParams {
    /// Named states (`resnet50`).
    pub workloads: Vec<String>,
    /// Synthetic states' total bytes, all ranks.
    pub sizes_bytes: Vec<u64>,
    /// Methods, in order.
    pub methods: Vec<CkptMethod>,
    /// Operations, in order.
    pub ops: Vec<CkptOp>,
    /// Bytes per chunk object.
    pub chunk_bytes: u64,
    /// Chunk objects in flight per rank.
    pub concurrency: u32,
    /// Timed repeats of each operation.
    pub repeats: u32,
    /// Per-chunk checksum.
    pub checksum: ChunkChecksum,
    /// Key prefix of the checkpoints.
    pub prefix: String,
    /// Seed of the random tensor values.
    pub seed: u64,
    /// Ranks in the run.
    pub ranks: usize,
    /// Where each restore read from.
    pub restore_cache: RestoreCache,
    /// Tensor alignment in the flat layout, bytes (`src/format/ckpt.rs`).
    pub alignment: u64,
    /// The training load beside every save (`None`: none).
    pub train_load: Option<TrainLoadParams>,
    /// With an async save: what the next training step does to the state
    /// while the save persists (`None` without one).
    pub async_next_step: Option<String>,
}

/// `params.train_load`: the GEMM run as a training step beside each save.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrainLoadParams {
    /// Its side (n of n x n x n).
    pub gemm_side: usize,
    /// Where it runs: the GPU or the CPU stand-in.
    pub device: String,
    /// Steps timed before and after each save, at least.
    pub steps_around: usize,
    /// Seconds of steps timed before and after each save, at least.
    pub seconds_around: f64,
}

/// A `ckpt` record as `s3rdma report` reads it from schema 4 on.
#[derive(Debug, Clone, Deserialize)]
pub struct CkptRecord {
    /// The plan as run.
    pub params: CkptParams,
    /// What it measured.
    pub results: CkptResults,
}
