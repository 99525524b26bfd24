//! What a `train` run records, as the writer builds it and `s3rdma report`
//! reads it back (schema 4 on): the plan as run ([`TrainParams`]), each
//! repeat over every rank ([`TrainRepeat`]), the summary, the dataset, and
//! the whole record's view ([`TrainRecord`]). One type for both, so a field
//! renamed here is renamed for the reader.

use serde::{Deserialize, Serialize};

use super::plan::{Amp, JpegFetch, Layout};
use crate::stats::Spread;
use crate::witness::WitnessReport;

/// A `train` run's `params`: the plan as run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrainParams {
    /// How the dataset is stored.
    pub layout: Layout,
    /// Key prefix of the shards.
    pub prefix: String,
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
    /// jpeg: decode threads per rank as asked (`None`: the host's cores / ranks).
    pub decode_threads: Option<u32>,
    /// Batches prepared ahead.
    pub prefetch_batches: u32,
    /// How the jpeg loader reads.
    pub jpeg_fetch: JpegFetch,
    /// jpeg, per-sample reads: GETs in flight per rank.
    pub sample_gets: u32,
    /// Square crop side, pixels.
    pub crop: u32,
    /// The data loader alone, no model.
    pub loader_only: bool,
    /// SGD learning rate.
    pub lr: f64,
    /// Timed repeats.
    pub repeats: u32,
    /// Seed of shuffling, crops, flips and model init.
    pub seed: u64,
    /// Ranks in the run.
    pub ranks: usize,
    /// What happens to the gradients across ranks, in words.
    pub gradients: String,
}

/// One timed repeat over every rank: the slowest rank's wall, all ranks' images.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TrainRepeat {
    /// 1-based repeat number.
    pub repeat: u32,
    /// The slowest rank's wall seconds.
    pub wall_s: f64,
    /// Images consumed, all ranks.
    pub images: u64,
    /// images / wall_s.
    pub images_per_s: f64,
    /// Each rank's own images/s.
    pub images_per_s_per_rank: Vec<f64>,
    /// Mean over ranks of each rank's median step, seconds.
    pub step_s_median: f64,
    /// Mean over ranks: seconds blocked waiting for the loader.
    pub fetch_wait_s: f64,
    /// Mean over ranks: seconds copying batches host to device.
    pub h2d_s: f64,
    /// Mean over ranks: seconds augmenting on the device.
    pub augment_s: f64,
    /// Mean over ranks: seconds of forward, backward and optimizer step.
    pub compute_s: f64,
    /// Bytes the loaders read in the window, all ranks.
    pub read_bytes: u64,
    /// read_bytes / wall_s / 1e9.
    pub read_gbps: f64,
    /// GETs issued, all ranks.
    pub gets: u64,
    /// Thread-seconds decoding JPEGs, all ranks.
    pub decode_thread_s: f64,
    /// Client CPU in cores, summed over ranks.
    pub client_cpu_cores: f64,
    /// Whole-host CPU in cores, summed over hosts.
    pub host_cpu_cores: f64,
    /// Rank 0's mean loss of its first steps (`None` without a model).
    pub loss_first: Option<f64>,
    /// Rank 0's mean loss of its last steps (`None` without a model).
    pub loss_last: Option<f64>,
    /// Every rank's own figures.
    pub ranks: Vec<RankRepeat>,
    /// This window's witness report.
    pub witness: Option<WitnessReport>,
}

/// Medians and ranges over the repeats.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TrainSummary {
    /// The slowest rank's wall seconds.
    pub wall_s: Spread,
    /// Images per second, all ranks.
    pub images_per_s: Spread,
    /// Step seconds (mean over ranks of each rank's median).
    pub step_s_median: Spread,
    /// Seconds blocked waiting for the loader.
    pub fetch_wait_s: Spread,
    /// Seconds copying batches host to device.
    pub h2d_s: Spread,
    /// Seconds augmenting on the device.
    pub augment_s: Spread,
    /// Seconds of forward, backward and optimizer step.
    pub compute_s: Spread,
    /// Client CPU in cores, summed over ranks.
    pub client_cpu_cores: Spread,
    /// Whole-host CPU in cores.
    pub host_cpu_cores: Spread,
    /// Read GB/s of the loaders (bytes / wall / 1e9).
    pub read_gbps: Spread,
    /// Rank 0's mean loss over its first ten steps of the run.
    pub loss_first: Option<f64>,
    /// Rank 0's mean loss over its last ten steps of the run.
    pub loss_last: Option<f64>,
}

/// The dataset as the run found it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrainDataset {
    /// Classes in the labels.
    pub classes: i64,
    /// Data bytes per image (the set's bytes / images).
    pub bytes_per_image: f64,
    /// Shards under the prefix.
    pub shards: usize,
    /// Shards rank 0 reads.
    pub shards_rank0: usize,
    /// Samples rank 0 reads.
    pub samples_rank0: u64,
    /// Decode threads per rank as run (jpeg).
    pub decode_threads: usize,
    /// The augmentation and model each step runs, as the stepper describes
    /// itself (free-form: the model's own description, with `train` built).
    pub stepper: serde_json::Value,
}

/// A `train` run's `results`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrainResults {
    /// Medians and ranges over the repeats.
    pub summary: TrainSummary,
    /// Every timed repeat.
    pub repeats: Vec<TrainRepeat>,
    /// The dataset.
    pub dataset: TrainDataset,
    /// Rank 0's loss at every timed step, per repeat.
    pub losses_rank0: Vec<Vec<f64>>,
}

/// A `train` record as `s3rdma report` reads it from schema 4 on.
#[derive(Debug, Clone, Deserialize)]
pub struct TrainRecord {
    /// The plan as run.
    pub params: TrainParams,
    /// What it measured.
    pub results: TrainResults,
}

/// What the training loop measured over one repeat's timed steps.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LoopFigures {
    /// Timed steps.
    pub steps: u32,
    /// Images consumed (steps x batch size).
    pub images: u64,
    /// Wall seconds of the timed work.
    pub wall_s: f64,
    /// Images per second.
    pub images_per_s: f64,
    /// Median step seconds.
    pub step_s_median: f64,
    /// 99th percentile step seconds.
    pub step_s_p99: f64,
    /// Sums over the timed steps.
    pub fetch_wait_s: f64,
    /// Seconds copying batches host to device.
    pub h2d_s: f64,
    /// Seconds cropping and flipping on the device.
    pub augment_s: f64,
    /// Seconds of forward, backward and optimizer step.
    pub compute_s: f64,
    /// Mean loss of the first and last min(10, steps) steps of this repeat (None without a model).
    pub loss_first: Option<f64>,
    /// Mean loss of the last 10 steps (`None` without a model).
    pub loss_last: Option<f64>,
}

/// One rank's figures of one repeat.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RankRepeat {
    /// Rank of the process these figures come from.
    pub rank: usize,
    /// Host name of that process.
    pub host: String,
    #[serde(flatten)]
    /// Its training-loop figures.
    pub figures: LoopFigures,
    /// Loader: bytes read and GETs in the window, thread-seconds fetching and decoding.
    pub read_bytes: u64,
    /// GETs issued.
    pub gets: u64,
    /// Thread-seconds the loader spent reading.
    pub fetch_thread_s: f64,
    /// Thread-seconds spent decoding JPEGs.
    pub decode_thread_s: f64,
    /// Client CPU in cores: CPU-seconds of this process (getrusage) / wall seconds.
    pub client_cpu_cores: f64,
    /// Whole-host CPU in cores: busy fraction x logical CPUs (/proc/stat via sysinfo).
    pub host_cpu_cores: f64,
}
