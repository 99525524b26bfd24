//! What `s3rdma fetch` runs: its settings as the CLI resolved them from the
//! flags (`cli/plan.rs`).

use std::time::Duration;

use serde::Serialize;

use crate::bench::session::RunPlan;

/// Each fetch stream's destination buffer (`--stream-buffer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StreamBuffer {
    /// `object` while the widest cell's whole-object buffers fit in half the
    /// host's memory (or the destination is device memory), else a reused buffer of the store's ranged-read size.
    Auto,
    /// One whole-object buffer per stream: the last GET's bytes are kept.
    Object,
    /// One reusable buffer of this many bytes per stream: each object is read
    /// as ranged reads of this size, in order, into it (memory ~ streams x
    /// size, as warp reads); the bytes are not kept.
    Reused(u64),
}

pub use crate::bench::session::Timing;

/// Everything `s3rdma fetch` runs with. Sizes in bytes; each (size,
/// streams, procs) triple is one cell.
#[derive(Debug, Clone)]
pub struct FetchPlan {
    /// Store, witness, memory, output, ranks.
    pub run: RunPlan,
    /// How long and how often.
    pub timing: Timing,
    /// Create the bucket and missing or wrong-sized objects (`--prepare`, or
    /// the local backend's own default directory unless `--no-prepare`).
    pub prepare: bool,
    /// Object sizes (at least one).
    pub sizes: Vec<u64>,
    /// Concurrent streams per process (at least one value).
    pub concurrency: Vec<u32>,
    /// Objects per size; streams read them round-robin.
    pub objects: u32,
    /// Key prefix; objects are `<prefix>/<size in bytes>/obj-<n>`.
    pub prefix: String,
    /// Worker processes per cell (at least one value).
    pub procs: Vec<u32>,
    /// Per-stream buffer.
    pub stream_buffer: StreamBuffer,
    /// Interval of the throughput series, when recorded.
    pub series: Option<Duration>,
    /// Compare every byte read with the pattern `prepare` wrote.
    pub verify: bool,
}
