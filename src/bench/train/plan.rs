//! What `s3rdma train` runs: its settings as the CLI resolved them from the
//! flags (`cli/plan.rs`), and the enums its flags and records name.

use serde::{Deserialize, Serialize};

use crate::bench::session::RunPlan;

/// How the dataset is stored (`--layout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    /// Pre-decoded uint8 shards fetched whole into device memory; crop/flip/normalize on the GPU.
    Raw,
    /// JPEG tar shards: ranged GET per sample (or whole shards), CPU decode, pinned staging.
    Jpeg,
}

impl Layout {
    /// Its name as `--layout` spells it and the record writes it.
    pub fn name(self) -> &'static str {
        match self {
            Layout::Raw => "raw",
            Layout::Jpeg => "jpeg",
        }
    }
}

/// How the jpeg loader reads (`--jpeg-fetch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JpegFetch {
    /// One ranged GET per sample by its index entry.
    Sample,
    /// Whole tar shards into host memory, samples sliced out.
    Shard,
}

impl JpegFetch {
    /// Its name as `--jpeg-fetch` spells it and the record writes it.
    pub fn name(self) -> &'static str {
        match self {
            JpegFetch::Sample => "sample",
            JpegFetch::Shard => "shard",
        }
    }
}

/// Mixed precision of the training step (`--amp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Amp {
    /// bfloat16 autocast for forward and backward (weights stay f32).
    Bf16,
    /// Plain f32.
    Off,
}

/// Everything `s3rdma train` runs with.
#[derive(Debug, Clone)]
pub struct TrainPlan {
    /// Store, witness, memory, output, ranks.
    pub run: RunPlan,
    /// How the dataset is stored.
    pub layout: Layout,
    /// Key prefix of the shards (`None`: `raw/train` or `jpeg/train`).
    pub prefix: Option<String>,
    /// Timed steps per repeat.
    pub steps: u32,
    /// Untimed steps first.
    pub warmup: u32,
    /// Images per step and rank.
    pub batch_size: u32,
    /// Mixed precision.
    pub amp: Amp,
    /// Shards (raw) in flight per rank.
    pub fetch_workers: u32,
    /// jpeg, per-sample reads: GETs in flight per rank.
    pub sample_gets: u32,
    /// jpeg: decode threads per rank (`None`: this host's cores / ranks).
    pub decode_threads: Option<u32>,
    /// Batches prepared ahead.
    pub prefetch_batches: u32,
    /// How the jpeg loader reads.
    pub jpeg_fetch: JpegFetch,
    /// Square crop side in pixels.
    pub crop: u32,
    /// Time the data loader alone (no model).
    pub loader_only: bool,
    /// SGD learning rate.
    pub lr: f64,
    /// Timed repeats.
    pub repeats: u32,
    /// Seed of shuffling, crops, flips and model init.
    pub seed: u64,
    /// Ranks to start on this host (`None`: one, or the launcher's count).
    pub ranks: Option<u32>,
}
