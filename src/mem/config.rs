//! Where a run's bytes land and how device reads are staged, resolved once
//! from the command line (`cli::MemArgs::config`) before the session starts:
//! the session and the benches read this, never the flags.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{Dest, Gpu};
use crate::flag::DEST;

/// The memory a run reads into and writes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemConfig {
    /// Destination memory, resolved (an unset `--dest` is device when the
    /// CUDA driver reports a GPU, else host).
    pub dest: Dest,
    /// GPU ordinal for pinned and device memory (the session moves it to the
    /// rank's GPU under a launcher).
    pub device: usize,
    /// Staged device reads: bytes per bounce buffer, and where that value came from.
    pub chunk_bytes: (u64, &'static str),
    /// Staged device reads: bounce buffers per stream, and where that value came from.
    pub bounce_buffers: (u32, &'static str),
}

impl MemConfig {
    /// Pageable host memory, nothing staged: for benches that move no data
    /// (N ranks must not open N CUDA contexts to move none).
    pub fn host() -> Self {
        MemConfig { dest: Dest::Host, device: 0, chunk_bytes: (8 << 20, "unused: host memory"), bounce_buffers: (4, "unused: host memory") }
    }

    /// Open the GPU pinned or device memory needs (before any store, so rdma
    /// workers can bind its context); `None` for host memory.
    ///
    /// Errors: one line naming the destination and the fix when no GPU is usable.
    pub fn open_gpu(&self) -> crate::error::Result<Option<Arc<Gpu>>> {
        match self.dest {
            Dest::Host => Ok(None),
            d => Gpu::open(self.device).map(Some).map_err(|e| crate::error::Error::Runtime(format!("{DEST} {}: {e}: use {DEST} host", d.name()))),
        }
    }

    /// What the record says of how device reads are done
    /// (`environment.device_path`): `direct` when the backend writes device
    /// memory itself, else staged with its bounce buffers; `None` for host memory.
    pub fn device_path(&self, writes_device: bool) -> Option<Value> {
        match (self.dest, writes_device) {
            (Dest::Device, true) => Some(json!({"mode": "direct"})),
            (Dest::Device, false) => Some(json!({"mode": "staged", "bounce_buffers": self.bounce_buffers.0, "chunk_bytes": self.chunk_bytes.0,
                                            "bounce_buffers_from": self.bounce_buffers.1, "chunk_bytes_from": self.chunk_bytes.1})),
            _ => None,
        }
    }
}
