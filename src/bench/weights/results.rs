//! What `weights` records and `s3rdma report` reads back (schema 4 on): the
//! plan as run ([`WeightsParams`]), each timed load ([`LoadRepeat`]), the
//! baselines, the time to ready and the summary ([`WeightsResults`]). One
//! type for writer and reader, so a field renamed here is renamed for both.

use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::{Baseline, Verified};
use crate::format::weights::ShardLayout;
use crate::sampler::SamplerReport;
use crate::stats::Spread;
use crate::witness::WitnessReport;

/// One timed load.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoadRepeat {
    /// 1-based repeat number.
    pub repeat: u32,
    /// Bytes of every shard's data blob (what a load reads).
    pub bytes: u64,
    /// Wall seconds of the timed work.
    pub wall_s: f64,
    /// Throughput, GB/s (bytes / wall / 1e9).
    pub throughput_gbps: f64,
    /// Ranged reads issued.
    pub ranged_reads: u64,
    /// Client CPU in cores: CPU-seconds of this process (getrusage) / wall seconds.
    pub client_cpu_cores: f64,
    /// Whole-host CPU in cores: busy fraction x logical CPUs (/proc/stat via sysinfo).
    pub host_cpu_cores: f64,
    /// Everything the sampler measured over the window (CPU, NIC bytes).
    pub sampler: SamplerReport,
    /// This window's witness report (docs/witness.md).
    pub witness: WitnessReport,
    /// Where the load's time went, stage by stage, when the store's own
    /// device pipeline read it (local files into device memory:
    /// `store::file_pipeline`); `None` otherwise.
    pub stages: Option<crate::store::LoadTimeline>,
}

/// One baseline's timing.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BaselineRun {
    /// Which baseline.
    pub baseline: Baseline,
    /// Bytes of every shard's data blob (what a load reads).
    pub bytes: u64,
    /// Download (when part of it) plus load.
    pub wall_s: f64,
    /// Seconds downloading every shard to local files (download-then-load).
    pub download_s: f64,
    /// Seconds loading from the local copy.
    pub load_s: f64,
    /// Throughput, GB/s (bytes / wall / 1e9).
    pub throughput_gbps: f64,
    /// Client CPU in cores: CPU-seconds of this process (getrusage) / wall seconds.
    pub client_cpu_cores: f64,
}

impl TimeToReady {
    /// Each step's instant as seconds since the process started, to the
    /// millisecond (the process-start offset itself is one clock tick, 10 ms, coarse).
    pub(super) fn of(session: Instant, headers: Instant, gpu: Option<&Arc<crate::mem::Gpu>>, buffers: Instant, ready: Instant) -> Self {
        let at = |i: Instant| (crate::clock::since_start(i) * 1e3).round() / 1e3;
        TimeToReady {
            exec_to_main_s: crate::clock::exec_to_main_s().map(|m| (m * 1e3).round() / 1e3),
            session_started_s: at(session),
            headers_read_s: at(headers),
            gpu_open_s: gpu.map(|g| (at(g.opened.0), at(g.opened.1))),
            buffers_allocated_s: at(buffers),
            ready_s: at(ready),
        }
    }
}

/// Medians and ranges over repeats.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WeightsSummary {
    /// Wall seconds of the timed work.
    pub wall_s: Spread,
    /// Throughput, GB/s (bytes / wall / 1e9).
    pub throughput_gbps: Spread,
    /// Client CPU in cores: CPU-seconds of this process (getrusage) / wall seconds.
    pub client_cpu_cores: Spread,
}

/// When the tensors were first usable, as the user waits for them: points
/// in time in seconds since the process started ([`crate::clock`]), rounded
/// to milliseconds; the start itself is the kernel's, to one clock tick
/// (10 ms), so the points share that error. Measured over repeat 1. Issue 22 item 3.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TimeToReady {
    /// Process start to `main` (loader, runtime start); `None` when
    /// `/proc/self/stat` could not be read (the points below then count from `main`).
    pub exec_to_main_s: Option<f64>,
    /// The session had started: store open, bucket checked.
    pub session_started_s: f64,
    /// Every shard's header had been read.
    pub headers_read_s: f64,
    /// When the GPU's open (driver load, `cuInit`, primary context) began and
    /// ended, on its own thread; `None` for host memory.
    pub gpu_open_s: Option<(f64, f64)>,
    /// Every shard's buffer (and its pinned bounce buffers) had been allocated.
    pub buffers_allocated_s: f64,
    /// The first repeat's load had ended: the tensors were usable.
    pub ready_s: f64,
}

impl TimeToReady {
    /// One line for the terminal: each step's end and the GPU's open.
    pub fn line(&self) -> String {
        let gpu = self.gpu_open_s.map_or(String::new(), |(a, b)| format!(", GPU open {a:.3}–{b:.3}"));
        format!(
            "ready {:.3} s after the process started; steps ended at, in s since then: main {}, session {:.3}, headers {:.3}{gpu}, buffers {:.3}, loaded {:.3} (repeat 1)",
            self.ready_s,
            self.exec_to_main_s.map_or("?".into(), |m| format!("{m:.3}")),
            self.session_started_s,
            self.headers_read_s,
            self.buffers_allocated_s,
            self.ready_s
        )
    }
}

/// A `weights` run's `results`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WeightsResults {
    /// Process start to tensors usable, step by step (the first repeat).
    pub ready: TimeToReady,
    /// Shards of the model.
    pub shards: usize,
    /// Tensors in the model.
    pub tensors: usize,
    /// Bytes of every shard's data blob (what a load reads).
    pub bytes: u64,
    /// Seconds reading the headers (before the timed window).
    pub header_s: f64,
    /// Device memory the loaded tensors occupy, bytes (0 for host destinations).
    pub device_memory_bytes: u64,
    /// Every timed repeat's figures.
    pub repeats: Vec<LoadRepeat>,
    /// Median and range over the repeats.
    pub summary: WeightsSummary,
    /// What the comparison with an independent copy found (`None`: not asked for).
    pub verified: Option<Verified>,
    /// The `--baselines` timings, in order.
    pub baselines: Vec<BaselineRun>,
    /// Every shard's layout: key, data offset, tensors.
    pub layout: Vec<ShardLayout>,
}

/// A `weights` run's `params`: the plan as run, how the load was read and
/// the bounce buffers allocated.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WeightsParams {
    /// The model's key prefix (or the synthetic shape's name).
    pub model: String,
    /// The size of one ranged GET, bytes.
    pub range_bytes: u64,
    /// Shards read at once.
    pub concurrency: u32,
    /// Which pipeline read the shards, in words.
    pub load_pipeline: String,
    /// Bounce buffers allocated (device destinations over a store that
    /// cannot write device memory; at most what the reads need).
    pub bounce_buffers_allocated: usize,
    /// Timed loads.
    pub repeats: u32,
    /// Whether the loaded bytes were compared with a reference.
    pub verify: bool,
    /// `--reference`: the local copy compared with.
    pub reference: Option<std::path::PathBuf>,
}

/// A `weights` record as `s3rdma report` reads it from schema 4 on: the
/// writer's own types.
#[derive(Debug, Clone, Deserialize)]
pub struct WeightsRecord {
    /// The plan as run.
    pub params: WeightsParams,
    /// What it measured.
    pub results: WeightsResults,
}
