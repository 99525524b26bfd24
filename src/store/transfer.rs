//! What a data call moved and over which path ([`Transfer`],
//! [`TransferPath`]), which version of an object it read ([`ObjectVersion`]),
//! and a store's running counters ([`StoreStats`]).

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::StoreError;

/// Which data path carried a transfer's bytes, as the client saw it. For the
/// rdma backend this is what the client library was asked to do, never proof:
/// libminiocpp returns the same code whether RDMA or its silent HTTP fallback
/// moved the bytes (docs/witness.md), so only the witness proves the transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TransferPath {
    /// Handed to libminiocpp while it reported RDMA available: RDMA (GPU-Direct
    /// via cuObject) was attempted; the library does not say whether it fell
    /// back to HTTP (`rdma_attempted`).
    RdmaAttempted,
    /// Carried by RDMA, as the server's own reply confirmed, byte for byte
    /// (the libs3rdma engine judges every reply: `rdma_confirmed`). The
    /// client's evidence; the witness still compares the server's counters.
    RdmaConfirmed,
    /// S3 over HTTP straight into the caller's buffer.
    Http,
    /// S3 over HTTP through pinned host memory, copied to or from the device.
    HttpStaged,
    /// A local filesystem.
    Local,
}

impl fmt::Display for TransferPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TransferPath::RdmaAttempted => "rdma_attempted",
            TransferPath::RdmaConfirmed => "rdma_confirmed",
            TransferPath::Http => "http",
            TransferPath::HttpStaged => "http_staged",
            TransferPath::Local => "local",
        })
    }
}

/// RDMA rails of the library, total and usable now
/// (`miniocpp_rdma_nic_count` / `miniocpp_rdma_healthy_nic_count`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rails {
    /// Rails the host can carry traffic on (0 when RDMA is unavailable).
    pub total: u32,
    /// Of those, the rails in rotation now: fewer than `total` means a rail
    /// failed a transfer or lost its port.
    pub healthy: u32,
}

/// What one data call moved.
#[derive(Debug, Clone, PartialEq)]
pub struct Transfer {
    /// Payload bytes moved (the client's own count).
    pub bytes: u64,
    /// The path that carried them.
    pub path: TransferPath,
    /// Time from issuing the request to the first payload byte arriving
    /// (HTTP GETs only; `None` where the notion does not apply).
    pub first_byte: Option<Duration>,
    /// Which version of the object a read was served from, where the store
    /// can tell. `None` for writes and where nothing says (the rdma
    /// library's own reads). Pass it to [`ObjectStore::get_into_version`](super::ObjectStore::get_into_version) to
    /// keep a read of several calls on one version.
    pub version: Option<ObjectVersion>,
}

/// One version of an object, as a read found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectVersion {
    /// What names the version: the `ETag` of an S3 answer (RFC 9110 section
    /// 8.8.3; `None` when the server sends none), a local file's inode and
    /// modification time.
    pub tag: Option<std::sync::Arc<str>>,
    /// The object's size, bytes, as the answer stated it (the total of a
    /// `Content-Range`, a file's length).
    pub size: u64,
}

impl fmt::Display for ObjectVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.tag {
            Some(t) => write!(f, "{t}, {} bytes", self.size),
            None => write!(f, "{} bytes", self.size),
        }
    }
}

impl Transfer {
    /// A transfer of `bytes` over `path` with no first-byte time and no version.
    pub fn of(bytes: u64, path: TransferPath) -> Transfer {
        Transfer { bytes, path, first_byte: None, version: None }
    }
}

/// Check that a read asked of version `pinned` was served from it
/// (`served`): the same size, and the same tag where both have one. `None`,
/// where the store cannot tell, passes.
///
/// Errors: [`StoreError::Changed`] naming both versions.
pub fn check_version(key: &str, location: &str, pinned: &ObjectVersion, served: Option<&ObjectVersion>) -> Result<(), StoreError> {
    let differ = |v: &ObjectVersion| v.size != pinned.size || matches!((&v.tag, &pinned.tag), (Some(a), Some(b)) if a != b);
    match served {
        Some(v) if differ(v) => {
            Err(StoreError::Changed { key: key.into(), location: location.into(), detail: format!("version {pinned} -> {v} between two reads of one load") })
        }
        _ => Ok(()),
    }
}

/// Named counters of a store (see [`Transport::stats`](super::Transport::stats)): `bytes_<path>`
/// per [`TransferPath`], plus backend counters such as `rdma_calls`. Missing
/// keys read as 0.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct StoreStats(pub BTreeMap<String, u64>);

impl StoreStats {
    /// The counter `key` (0 when absent).
    pub fn get(&self, key: &str) -> u64 {
        self.0.get(key).copied().unwrap_or(0)
    }
    /// Growth since `earlier`, key by key (a counter never shrinks; 0 if it did).
    pub fn since(&self, earlier: &StoreStats) -> StoreStats {
        StoreStats(self.0.iter().map(|(k, v)| (k.clone(), v.saturating_sub(earlier.get(k)))).collect())
    }
    /// Add `other` key by key (summing ranks or windows).
    pub fn add(&mut self, other: &StoreStats) {
        for (k, v) in &other.0 {
            *self.0.entry(k.clone()).or_insert(0) += v;
        }
    }
    /// Bytes the client moved over HTTP itself: what the witness's
    /// client-side fallback guard compares (`bytes_http` + `bytes_http_staged`).
    pub fn http_bytes(&self) -> u64 {
        self.get("bytes_http") + self.get("bytes_http_staged")
    }
    /// The counters that are not per-path byte counts (the backend's own), `None` when there are none.
    pub fn backend_counters(&self) -> Option<StoreStats> {
        const COUNTED: [&str; 4] = ["requests", "data_read_bytes", "data_write_bytes", "control_requests"];
        let m: BTreeMap<String, u64> =
            self.0.iter().filter(|(k, _)| !k.starts_with("bytes_") && !COUNTED.contains(&k.as_str())).map(|(k, v)| (k.clone(), *v)).collect();
        (!m.is_empty()).then_some(StoreStats(m))
    }
}
