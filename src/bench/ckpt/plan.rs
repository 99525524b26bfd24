//! What `s3rdma ckpt` runs: its settings as the CLI resolved them from the
//! flags (`cli/plan.rs`), and the enums its flags and records name.

use serde::{Deserialize, Serialize};

use crate::bench::session::RunPlan;

/// A checkpoint method (`--methods`; the record's `method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CkptMethod {
    /// Tensors packed 512-byte aligned into one buffer, written as parallel chunk objects + manifest.
    Flat,
    /// Copy to host, serialize one safetensors blob, send it as one object by one stream
    /// (over HTTP: multipart parts one at a time) — the shape of torch.save + HTTP.
    SerializeThenPut,
    /// flat's on-store format, saved the way asynchronous checkpointing saves
    /// (DCP `async_save`, Megatron/NeMo async): the state is first snapshotted
    /// into one pinned host buffer (the training stall), then the chunks go out
    /// from there and the manifest commits last (persistence); restore is flat's.
    Async,
}

impl CkptMethod {
    /// Its name as `--methods` spells it and the record writes it.
    pub fn name(self) -> &'static str {
        match self {
            CkptMethod::Flat => "flat",
            CkptMethod::SerializeThenPut => "serialize-then-put",
            CkptMethod::Async => "async",
        }
    }
}

/// A checkpoint operation (`--ops`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CkptOp {
    /// Write the state to the store.
    Save,
    /// Read it back and compare with the original.
    Restore,
}

impl CkptOp {
    /// Its name as `--ops` spells it and the record writes it.
    pub fn name(self) -> &'static str {
        match self {
            CkptOp::Save => "save",
            CkptOp::Restore => "restore",
        }
    }
}

/// Per-chunk checksum (`--checksum`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChunkChecksum {
    /// xxh3-64 per chunk (twox-hash).
    Xxh3,
    /// No checksums (restore still compares every tensor with the original).
    None,
}

/// Where a checkpoint restore reads from (`--restore-cache`, `--cold`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RestoreCache {
    /// The page cache the save left (no eviction).
    Warm,
    /// The device, as MLPerf Storage reads: drop_caches (root), else fadvise DONTNEED, else O_DIRECT.
    Cold,
    /// Cold from fadvise DONTNEED on (the host's other cached pages stay: a shared node).
    Fadvise,
    /// Cold through O_DIRECT reads alone.
    Direct,
}

/// Everything `s3rdma ckpt` runs with. Sizes in bytes.
#[derive(Debug, Clone)]
pub struct CkptPlan {
    /// Store, witness, memory, output, ranks.
    pub run: RunPlan,
    /// Named states (`resnet50`).
    pub workload: Vec<String>,
    /// Synthetic Adam-shaped states of these total bytes, split evenly across ranks.
    pub sizes: Vec<u64>,
    /// Methods, in order.
    pub methods: Vec<CkptMethod>,
    /// Operations, in order.
    pub ops: Vec<CkptOp>,
    /// Bytes per chunk object (1 MiB to below 4 GiB: one RDMA registration).
    pub chunk: u64,
    /// Chunk objects in flight per rank.
    pub concurrency: u32,
    /// Timed repeats of each operation.
    pub repeats: u32,
    /// Per-chunk checksum.
    pub checksum: ChunkChecksum,
    /// Key prefix: checkpoints are `<prefix>/<state>/rank<NNNNN>`.
    pub prefix: String,
    /// Seed of the random tensor values.
    pub seed: u64,
    /// Ranks to start on this host (`None`: one, or the launcher's count).
    pub ranks: Option<u32>,
    /// Leave the checkpoints in the store.
    pub keep: bool,
    /// Where each restore reads from (`--cold` already folded in).
    pub restore_cache: RestoreCache,
    /// A training load beside every save (`None`: none).
    pub train_load: Option<TrainLoadPlan>,
}

/// The training load run beside saves (`train_load.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrainLoadPlan {
    /// The GEMM's side (`None`: [`TrainLoadPlan::GPU_SIDE`] on a GPU, [`TrainLoadPlan::CPU_SIDE`] without).
    pub gemm_side: Option<usize>,
}

impl TrainLoadPlan {
    /// Default side on a GPU: 1.1 TFLOP per step (about 20 ms of f32 SGEMM on an H100 or H200).
    pub const GPU_SIDE: usize = 8192;
    /// Default side on the CPU stand-in: 0.27 GFLOP per step (milliseconds on one core).
    pub const CPU_SIDE: usize = 512;
}
