//! A store that counts what it moved, per transfer path (and its data
//! requests), around any backend:
//! the one place that turns each [`Transfer`]'s path into the client-side
//! counters every bench reports (`bytes_http` is what the witness's
//! client-side fallback guard compares), so no bench keeps its own rule.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;

use super::{Capabilities, ObjectMeta, ObjectStore, StoreStats, Transfer, TransferPath, Transport};
use crate::error::StoreError;
use crate::mem::Buffer;

/// Paths in the order of [`Counted`]'s counters.
const PATHS: [TransferPath; 5] = [TransferPath::RdmaAttempted, TransferPath::RdmaConfirmed, TransferPath::Http, TransferPath::HttpStaged, TransferPath::Local];

/// `inner` plus byte counters per [`TransferPath`] of every successful data call.
#[derive(Debug)]
pub struct Counted {
    inner: Arc<dyn ObjectStore>,
    bytes: Arc<[AtomicU64; PATHS.len()]>,
    /// Successful data calls (GET, ranged GET, PUT) through this store and its siblings.
    requests: Arc<AtomicU64>,
    /// Data bytes by direction, whatever the path: [read (GET), written (PUT)].
    directions: Arc<[AtomicU64; 2]>,
    /// Control-plane calls (bucket check, HEAD, LIST, DELETE), failed or not:
    /// each costs the server's HTTP counters a request and a response.
    control: Arc<AtomicU64>,
}

const READ: usize = 0;
const WRITE: usize = 1;

impl Counted {
    /// Wrap `inner`; counters start at 0.
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        Counted { inner, bytes: Default::default(), requests: Default::default(), directions: Default::default(), control: Default::default() }
    }

    /// Another store (a second client configuration for the same bucket)
    /// whose transfers count into these same counters, so a window's
    /// figures hold every byte the bench moved, whichever client moved it.
    pub fn sibling(&self, inner: Arc<dyn ObjectStore>) -> Counted {
        Counted { inner, bytes: self.bytes.clone(), requests: self.requests.clone(), directions: self.directions.clone(), control: self.control.clone() }
    }

    /// The store underneath, uncounted (for traffic that is not the bench's, such as rank markers).
    pub fn inner(&self) -> Arc<dyn ObjectStore> {
        self.inner.clone()
    }

    fn count(&self, dir: usize, t: Result<Transfer, StoreError>) -> Result<Transfer, StoreError> {
        if let Ok(t) = &t {
            let i = PATHS.iter().position(|p| *p == t.path).expect("every path is listed");
            self.bytes[i].fetch_add(t.bytes, Ordering::Relaxed);
            self.directions[dir].fetch_add(t.bytes, Ordering::Relaxed);
            self.requests.fetch_add(1, Ordering::Relaxed);
        }
        t
    }

    fn control<T>(&self, r: T) -> T {
        self.control.fetch_add(1, Ordering::Relaxed);
        r
    }
}

#[async_trait]
impl ObjectStore for Counted {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    fn bucket(&self) -> &str {
        self.inner.bucket()
    }
    fn location(&self) -> String {
        self.inner.location()
    }
    async fn ensure_bucket(&self, create: bool) -> Result<(), StoreError> {
        self.control(self.inner.ensure_bucket(create).await)
    }
    async fn head(&self, key: &str) -> Result<ObjectMeta, StoreError> {
        self.control(self.inner.head(key).await)
    }
    async fn get_into_at(&self, key: &str, range: Option<Range<u64>>, dst: &mut Buffer, at: usize) -> Result<Transfer, StoreError> {
        let t = self.inner.get_into_at(key, range, dst, at).await;
        self.count(READ, t)
    }
    async fn get_into_version(
        &self,
        key: &str,
        range: Option<Range<u64>>,
        dst: &mut Buffer,
        at: usize,
        version: &super::ObjectVersion,
    ) -> Result<Transfer, StoreError> {
        let t = self.inner.get_into_version(key, range, dst, at, version).await;
        self.count(READ, t)
    }
    async fn put_range(&self, key: &str, src: &Buffer, range: Range<usize>) -> Result<Transfer, StoreError> {
        let t = self.inner.put_range(key, src, range).await;
        self.count(WRITE, t)
    }
    async fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>, StoreError> {
        self.control(self.inner.list(prefix).await)
    }
    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.control(self.inner.delete(key).await)
    }
}

impl Transport for Counted {
    fn describe(&self) -> serde_json::Value {
        self.inner.describe()
    }
    fn preflight(&self, object_size: u64) -> Vec<String> {
        self.inner.preflight(object_size)
    }
    fn registration_costs(&self, sizes: &[u64]) -> Option<Result<Vec<super::rdma::registration::RegistrationCost>, String>> {
        self.inner.registration_costs(sizes)
    }
    fn leaves_transport(&self, io: super::PlannedIo) -> Option<String> {
        self.inner.leaves_transport(io)
    }
    fn stats(&self) -> StoreStats {
        let mut s = self.inner.stats();
        for (p, n) in PATHS.iter().zip(self.bytes.iter()) {
            s.0.insert(format!("bytes_{p}"), n.load(Ordering::Relaxed));
        }
        s.0.insert("requests".into(), self.requests.load(Ordering::Relaxed));
        s.0.insert("data_read_bytes".into(), self.directions[READ].load(Ordering::Relaxed));
        s.0.insert("data_write_bytes".into(), self.directions[WRITE].load(Ordering::Relaxed));
        s.0.insert("control_requests".into(), self.control.load(Ordering::Relaxed));
        s
    }
    fn stats_summary(&self, in_windows: &StoreStats) -> Option<String> {
        self.inner.stats_summary(in_windows)
    }
    fn transport_unavailable(&self) -> Option<String> {
        self.inner.transport_unavailable()
    }
    fn rails(&self) -> Option<super::Rails> {
        self.inner.rails()
    }
    fn rdma_engine(&self) -> Option<super::rdma::RdmaEngine> {
        self.inner.rdma_engine()
    }
    fn wire_rules(&self) -> Option<Vec<super::WireRule>> {
        self.inner.wire_rules()
    }
    /// Each part's transfer counts as one read, as a staged read of it would.
    fn read_to_device(
        &self,
        parts: &[super::StagedPart],
        dsts: &mut [&mut crate::mem::DeviceBuffer],
        check: Option<&super::StagedCheck>,
    ) -> Option<Result<super::DeviceLoad, StoreError>> {
        let done = self.inner.read_to_device(parts, dsts, check)?;
        Some(done.and_then(|d| {
            let transfers = d.transfers.into_iter().map(|t| self.count(READ, Ok(t))).collect::<Result<Vec<_>, _>>()?;
            Ok(super::DeviceLoad { transfers, ..d })
        }))
    }
}
