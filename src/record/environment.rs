//! A run record's `environment` (docs/results.md): where the bytes went, the
//! GPU, the ranks, the run's warnings and the store's counters, as typed
//! fields; the store's, the witness's and the device path's descriptions as
//! each of them writes itself (a backend's settings differ by backend, so
//! they stay that component's own JSON). Written by the session, read back
//! by `s3rdma report` for records from schema 4 on.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `environment` of a run record.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Environment {
    /// `--dest`: the memory the bytes landed in (`host`, `pinned`,
    /// `device`); `None` in a record refused before any memory was set up.
    #[serde(default)]
    pub dest: Option<String>,
    /// The GPU the run used (`None`: none).
    #[serde(default)]
    pub gpu: Option<GpuEnvironment>,
    /// How device memory was reached (direct, or staged and through what),
    /// as the memory layer or the bench describes it; `None` for host memory.
    #[serde(default)]
    pub device_path: Option<Value>,
    /// The store's own description of its settings (each backend's; never credentials).
    pub store: Value,
    /// The witness's configuration (targets, auth mode, thresholds; never the token).
    pub witness: Value,
    /// The ranks (`None` in a record refused before they met).
    #[serde(default)]
    pub ranks: Option<RanksEnvironment>,
    /// Every warning the run said.
    #[serde(default)]
    pub warnings: Vec<String>,
    /// The store's counters on rank 0 (`None` in a record refused before any transfer).
    #[serde(default)]
    pub store_stats: Option<StoreStatsEnvironment>,
}

/// `environment.gpu`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GpuEnvironment {
    /// CUDA device ordinal.
    pub ordinal: usize,
    /// The device's name (`cuDeviceGetName`).
    pub name: String,
    /// Its memory, bytes (where the opener asked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
}

/// `environment.ranks`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RanksEnvironment {
    /// Ranks in the run.
    pub world: usize,
    /// What started them (`none`, `self`, `torchrun`, `mpirun`, `slurm`, ...).
    pub launcher: String,
    /// The run's id, shared by its ranks.
    pub run_id: String,
    /// Ranks on this host, where the launcher says.
    pub local_world: Option<usize>,
    /// With several ranks: what their meetings cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coordination: Option<CoordinationEnvironment>,
}

/// `environment.ranks.coordination`: the ranks' meetings, summed over ranks.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CoordinationEnvironment {
    /// How ranks meet (`store`, `tcp`, ...).
    pub rendezvous: String,
    /// Store requests the meetings made.
    pub requests: u64,
    /// Listings that found a meeting not yet complete.
    pub polls: u64,
    /// Bytes the meetings moved.
    pub bytes: u64,
    /// Keys the meetings' listings returned.
    pub keys_listed: u64,
    /// Of `requests`, those made inside timed windows.
    pub requests_in_windows: u64,
}

/// `environment.store_stats`: the store's counters (bytes per transfer
/// path, the backend's own), by name.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct StoreStatsEnvironment {
    /// Over the whole run on rank 0: warm-ups, preparation and listings included.
    pub whole_run_this_rank: BTreeMap<String, u64>,
    /// Their growth inside the timed windows, all ranks.
    pub in_windows: BTreeMap<String, u64>,
}
