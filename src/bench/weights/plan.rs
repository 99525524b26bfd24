//! What `s3rdma weights` runs: its settings as the CLI resolved them from
//! the flags (`cli/plan.rs`).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::bench::session::RunPlan;

/// A baseline timed beside the load (`--baselines`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Baseline {
    /// GET each shard to a local file, then load from the local copy.
    DownloadThenLoad,
    /// Load from the local copy (warm page cache).
    LocalThenLoad,
}

/// Everything `s3rdma weights` runs with.
#[derive(Debug, Clone)]
pub struct WeightsPlan {
    /// Store, witness, memory, output.
    pub run: RunPlan,
    /// Key prefix of the model (`''`: the bucket's root).
    pub model: String,
    /// Shards read at once.
    pub concurrency: u32,
    /// Timed loads.
    pub repeats: u32,
    /// Compare every loaded tensor with a reference.
    pub verify: bool,
    /// The model's local copy to verify against (implies `verify`).
    pub reference: Option<PathBuf>,
    /// Instead of loading: write this synthetic model under `model`.
    pub synth: Option<String>,
    /// Baselines timed in the same run.
    pub baselines: Vec<Baseline>,
    /// Where the baselines' local copy goes (`None`: a new temp directory, removed after).
    pub baseline_dir: Option<PathBuf>,
    /// With `synth`: largest shard in bytes.
    pub shard_size: u64,
}
