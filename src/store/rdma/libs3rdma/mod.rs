//! The rdma backend's second engine (`--rdma-engine libs3rdma`): libs3rdma
//! bound directly, the protocol spoken by this tool, as minio-rs
//! (`src/s3/rdma/protocol.rs`), NIXL (PR #1840) and the aws-c-s3 fork's
//! `RDMA_PROTOCOL_SPEC.md` do, instead of through libminiocpp's C ABI.
//!
//! What that buys over libminiocpp:
//! - **Ranged GETs over RDMA**: a token is minted for (offset, size) inside
//!   a registered buffer, so weights windows, token runs and `--range-size`
//!   reads go over RDMA, and objects of 4 GiB and more are read as ranges of
//!   at most 4 GiB - 1 (one descriptor's 32-bit size field).
//! - **Registration off the clock**: each destination buffer is registered
//!   once per run, on first use, timed and counted in its own counters
//!   (`rdma_registrations`, `rdma_registration_ns`), and deregistered when
//!   the store closes; a buffer at a reused address is registered anew
//!   ([`crate::mem::Buffer::allocation`]).
//! - **The truth per request**: every reply is judged here ([`wire::judge`]);
//!   requests sent with a token, RDMA bytes the server confirmed, declines,
//!   fallbacks, miscounted replies and rail failures are counted, so the
//!   client's view can be set beside the server's counters.
//! - **Timeouts scaled by size**: a request waits `--read-timeout` plus its
//!   bytes at 50 MB/s for its answer (the server moves the bytes before it
//!   answers), where libminiocpp abandons any transfer at 10 s.
//!
//! The control plane (bucket check, HEAD, LIST, DELETE) and every fallback go
//! through the `http` backend. Each request's socket is bound to the token's
//! rail address (an IPv4-mapped GID), as libminiocpp binds its own.
//! Limits of this build, said where they apply: plain `http://` endpoints
//! (the request is written on our own socket, as the direct GET path does);
//! host and pinned memory (device buffers are staged through pinned memory,
//! which this engine registers); whole PUTs of at most 4 GiB - 1 bytes over
//! RDMA (larger ones, and multipart, over HTTP).

pub mod ffi;
mod request;
pub mod wire;

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use async_trait::async_trait;
use serde_json::json;

use super::RdmaEngine;
use crate::error::StoreError;
use crate::flag::{ENDPOINT, RDMA_ENGINE, RDMA_NO_RANGE};
use crate::mem::Buffer;
use crate::store::http::HttpStore;
use crate::store::http::direct::DirectGet;
use crate::store::{
    Backend, Capabilities, ObjectMeta, ObjectStore, Rails, StoreConfig, StoreStats, Transfer, TransferPath, Transport, check_capacity, check_key, check_source,
};
use request::Piece;

/// Attempts per transfer before it goes over HTTP, each with a fresh token
/// (on another rail once the failed one is reported): minio-cpp's
/// `kRDMAMaxAttempts`.
pub const ATTEMPTS: u32 = 2;

/// The client's own count of what it asked RDMA to do, cumulative.
#[derive(Debug, Default)]
struct Counts {
    /// Requests sent with a token.
    requests: AtomicU64,
    /// Bytes the server confirmed moving by RDMA (exact counts only).
    confirmed_bytes: AtomicU64,
    /// Requests the server declined (reply 501).
    declines: AtomicU64,
    /// Transfers that went over HTTP instead (declined, miscounted or failed on every attempt).
    fallbacks: AtomicU64,
    /// Their bytes.
    fallback_bytes: AtomicU64,
    /// Success replies whose byte count was missing, unreadable or not the asked size.
    miscounted: AtomicU64,
    /// Failed attempts (a reply of failure, a broken or timed-out request): each reported to the library.
    rail_failures: AtomicU64,
    /// Buffers registered.
    registrations: AtomicU64,
    /// Nanoseconds in `s3rdma_client_register`.
    registration_ns: AtomicU64,
}

/// A bucket reached by libs3rdma tokens on our own signed requests (data)
/// and HTTP (control, fallback).
pub struct EngineStore {
    http: HttpStore,
    signer: DirectGet,
    client: ffi::Client,
    /// Registrations by address: (bytes, allocation).
    registered: Mutex<HashMap<usize, (usize, Option<u64>)>>,
    counts: Counts,
    /// Largest bytes per request: `--range-size`, at most 4 GiB - 1.
    piece: u64,
    read_timeout: std::time::Duration,
    connect_timeout: std::time::Duration,
    dialect_said: AtomicBool,
    /// Idle keep-alive connections per rail.
    pool: request::Pool,
    /// Wire rules the answers exercised, by name: how often they were followed and broken ([`wire::RULES`]).
    rules: Mutex<std::collections::BTreeMap<&'static str, (u64, u64)>>,
}

impl std::fmt::Debug for EngineStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineStore").field("library", &self.client.library).field("version", &self.client.version).finish_non_exhaustive()
    }
}

/// The library to load: `--rdma-lib` when it names libs3rdma; when it names
/// a libminiocpp, the `libs3rdma.so.0` beside it (the one that library
/// loads); else `libs3rdma.so.0` from the loader's search path.
pub fn lib_path(flag: Option<&std::path::Path>) -> std::path::PathBuf {
    match flag {
        Some(p) if p.file_name().is_some_and(|n| n.to_string_lossy().contains("miniocpp")) => {
            p.parent().unwrap_or(std::path::Path::new(".")).join(ffi::DEFAULT_NAME)
        }
        Some(p) => p.to_path_buf(),
        None => ffi::DEFAULT_NAME.into(),
    }
}

impl EngineStore {
    /// Open the control plane, load libs3rdma and open one client on
    /// `--rdma-device` (else `S3RDMA_DEVICE`, else every ACTIVE port).
    ///
    /// Errors: [`StoreError::Config`] for the endpoint, bucket or credentials
    /// (checked first) and an `https://` endpoint; [`StoreError::Library`]
    /// for a library that is missing, of another kind or generation, or
    /// refuses to open a client.
    pub fn new(args: &StoreConfig) -> Result<Self, StoreError> {
        if args.rdma_no_range {
            return Err(StoreError::Config(format!(
                "{RDMA_NO_RANGE} makes libminiocpp's engine act as if it had no ranged GET; {RDMA_ENGINE} libs3rdma always has one: drop {RDMA_NO_RANGE}, or use {RDMA_ENGINE} libminiocpp"
            )));
        }
        let http = HttpStore::new(args)?;
        let endpoint = http.location();
        let aws = args.aws.clone().ok_or_else(|| StoreError::Config("the libs3rdma engine needs the resolved AWS settings".into()))?;
        let signer = DirectGet::new(&endpoint, &aws, args.connect_timeout, args.read_timeout, 1).map_err(|_| {
            StoreError::Config(format!(
                "{RDMA_ENGINE} libs3rdma writes its control-plane requests on its own plain-HTTP sockets, so it needs an http:// {ENDPOINT}, not '{endpoint}': use {RDMA_ENGINE} libminiocpp for https"
            ))
        })?;
        let client = ffi::Client::open(&lib_path(args.rdma_lib.as_deref()), args.rdma_device.as_deref()).map_err(StoreError::Library)?;
        Ok(EngineStore {
            http,
            signer,
            client,
            registered: Mutex::new(HashMap::new()),
            counts: Counts::default(),
            piece: args.range_bytes.clamp(1, super::MAX_TRANSFER),
            read_timeout: args.read_timeout,
            connect_timeout: args.connect_timeout,
            dialect_said: AtomicBool::new(false),
            pool: Default::default(),
            rules: Mutex::new(Default::default()),
        })
    }

    /// Whether the loaded libs3rdma is a stand-in (its version says so:
    /// [`super::ffi::STANDIN_PREFIX`]), whose figures are no RDMA figures.
    fn test_double(&self) -> bool {
        self.client.version.starts_with(super::ffi::STANDIN_PREFIX)
    }

    /// Register `len` bytes at `ptr` unless this allocation is registered
    /// there already: timed, counted, never inside a request.
    fn ensure_registered(&self, ptr: usize, len: usize, allocation: Option<u64>) -> Result<(), StoreError> {
        let mut reg = self.registered.lock().unwrap_or_else(|e| e.into_inner());
        match reg.get(&ptr) {
            Some(&(l, a)) if l >= len && a == allocation => return Ok(()),
            Some(_) => self.client.deregister(ptr as *mut u8),
            None => {}
        }
        let t = Instant::now();
        // SAFETY: ptr..ptr+len is the caller's live buffer; it is
        // deregistered before another allocation at this address is used
        // (the allocation check above) and when the store closes.
        unsafe { self.client.register(ptr as *mut u8, len) }.map_err(|why| {
            // Runtime, not usage: pinned-memory limits (RLIMIT_MEMLOCK) and
            // NIC resources run out on good setups too.
            StoreError::Other {
                op: "register",
                key: String::new(),
                location: self.http.location(),
                detail: format!("{why}: check `ulimit -l` (pinned-memory limit)"),
                cause: None,
            }
        })?;
        self.counts.registration_ns.fetch_add(t.elapsed().as_nanos() as u64, Relaxed);
        self.counts.registrations.fetch_add(1, Relaxed);
        reg.insert(ptr, (len, allocation));
        Ok(())
    }

    /// The registration a transfer of `n` bytes at `offset` in the buffer of
    /// `len` bytes at `base` is minted in, as (its address, the offset
    /// within it): the whole buffer, registered once, when it fits one
    /// registration (4 GiB - 1: libs3rdma refuses larger ones); else the
    /// transfer's own bytes, each such region registered once.
    fn region(&self, base: usize, len: usize, offset: usize, n: u64, allocation: Option<u64>) -> Result<(usize, usize), StoreError> {
        if len as u64 <= super::MAX_TRANSFER {
            self.ensure_registered(base, len, allocation)?;
            Ok((base, offset))
        } else {
            self.ensure_registered(base + offset, n as usize, allocation)?;
            Ok((base + offset, 0))
        }
    }

    /// One piece over RDMA, with [`ATTEMPTS`] tokens; `Ok(true)` when the
    /// server confirmed every byte, `Ok(false)` when it must go over HTTP
    /// (counted as a fallback).
    async fn carry(&self, piece: &Piece<'_>) -> bool {
        for _ in 0..ATTEMPTS {
            let token = match self.client.token(piece.base as *mut u8, piece.len as usize, piece.offset) {
                Ok(t) => t,
                Err(why) => {
                    tracing::warn!("{why}: {} '{}' goes over HTTP", piece.method, piece.key);
                    break;
                }
            };
            self.counts.requests.fetch_add(1, Relaxed);
            let answer = request::send(&self.signer, piece, &token, (self.connect_timeout, self.read_timeout), &self.pool).await;
            let (outcome, rules, dialect) = match answer {
                Ok(a) => wire::judge(a.status, |n| a.header(n), piece.len, piece.method == "PUT", a.body_len),
                Err(why) => (wire::Outcome::Failed { why }, Vec::new(), None),
            };
            if let Some(d) = dialect
                && !self.dialect_said.swap(true, Relaxed)
            {
                tracing::warn!("{d}");
            }
            let mut seen = self.rules.lock().unwrap_or_else(|e| e.into_inner());
            for (r, followed) in rules {
                let e = seen.entry(r).or_default();
                if followed { e.0 += 1 } else { e.1 += 1 }
            }
            drop(seen);
            match outcome {
                wire::Outcome::Rdma => {
                    self.counts.confirmed_bytes.fetch_add(piece.len, Relaxed);
                    return true;
                }
                wire::Outcome::Declined => {
                    self.counts.declines.fetch_add(1, Relaxed);
                    break;
                }
                wire::Outcome::Miscounted { got } => {
                    self.counts.miscounted.fetch_add(1, Relaxed);
                    tracing::debug!("{} '{}': the server confirmed {got:?} of {} bytes: read again over HTTP", piece.method, piece.key, piece.len);
                    break;
                }
                wire::Outcome::Failed { why } => {
                    self.counts.rail_failures.fetch_add(1, Relaxed);
                    // A server slow to answer says nothing against the rail:
                    // only failures of the transfer or its connection are reported.
                    if !why.starts_with(request::NO_ANSWER) {
                        self.client.report_failure(&token);
                    }
                    tracing::debug!("{} '{}' over RDMA failed ({why}): another token", piece.method, piece.key);
                }
            }
        }
        self.counts.fallbacks.fetch_add(1, Relaxed);
        self.counts.fallback_bytes.fetch_add(piece.len, Relaxed);
        false
    }

    /// Read `range` of `key` into `dst[at..]` in pieces of at most
    /// [`EngineStore::piece`] bytes; a piece RDMA did not carry goes over HTTP.
    async fn read_pieces(&self, key: &str, range: Range<u64>, dst: &mut Buffer, at: usize) -> Result<Transfer, StoreError> {
        let allocation = dst.allocation();
        let Some(host) = dst.as_host_mut() else {
            return crate::store::read_into_at(&self.http, key, Some(range), dst, at).await;
        };
        let (base, len) = (host.as_mut_ptr() as usize, host.len());
        let mut all_rdma = true;
        let mut start = range.start;
        while start < range.end {
            let n = (range.end - start).min(self.piece);
            let offset = at + (start - range.start) as usize;
            let (base, offset) = self.region(base, len, offset, n, allocation)?;
            let piece = Piece { method: "GET", bucket: self.http.bucket(), key, object_range: Some(start..start + n), base, offset, len: n };
            if !self.carry(&piece).await {
                all_rdma = false;
                self.http.get_into_at(key, Some(start..start + n), dst, offset).await?;
            }
            start += n;
        }
        let path = if all_rdma { TransferPath::RdmaConfirmed } else { TransferPath::Http };
        Ok(Transfer::of(range.end - range.start, path))
    }
}

impl Drop for EngineStore {
    fn drop(&mut self) {
        let reg = self.registered.get_mut().unwrap_or_else(|e| e.into_inner());
        for (&ptr, _) in reg.iter() {
            self.client.deregister(ptr as *mut u8);
        }
        reg.clear();
    }
}

#[async_trait]
impl ObjectStore for EngineStore {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            name: Backend::Rdma.name(),
            page_cache: false,
            // Device buffers are staged through pinned memory, which this engine registers.
            device_writes: false,
            staged_path: TransferPath::HttpStaged,
            ranged_read: Some(self.piece),
            direct_alignment: None,
            versioned_reads: false,
            server: true,
        }
    }
    fn bucket(&self) -> &str {
        self.http.bucket()
    }
    fn location(&self) -> String {
        self.http.location()
    }
    async fn ensure_bucket(&self, create: bool) -> Result<(), StoreError> {
        self.http.ensure_bucket(create).await
    }
    async fn head(&self, key: &str) -> Result<ObjectMeta, StoreError> {
        self.http.head(key).await
    }
    async fn get_into_at(&self, key: &str, range: Option<Range<u64>>, dst: &mut Buffer, at: usize) -> Result<Transfer, StoreError> {
        check_key(key)?;
        let range = match range {
            None => 0..self.http.head(key).await?.size,
            Some(r) if r.start >= r.end => {
                let size = self.http.head(key).await?.size;
                return Err(StoreError::BadRange { key: key.into(), range: r, size });
            }
            Some(r) => r,
        };
        check_capacity(key, range.end - range.start, at, dst)?;
        if range.is_empty() {
            return Ok(Transfer::of(0, TransferPath::Http));
        }
        self.read_pieces(key, range, dst, at).await
    }
    async fn put_range(&self, key: &str, src: &Buffer, range: Range<usize>) -> Result<Transfer, StoreError> {
        check_key(key)?;
        check_source(key, src, &range)?;
        let len = (range.end - range.start) as u64;
        let Some(host) = src.as_host() else { return self.http.put_range(key, src, range).await };
        if len == 0 || len > super::MAX_TRANSFER {
            return self.http.put_range(key, src, range).await;
        }
        let (base, offset) = self.region(host.as_ptr() as usize, host.len(), range.start, len, src.allocation())?;
        let piece = Piece { method: "PUT", bucket: self.http.bucket(), key, object_range: None, base, offset, len };
        if self.carry(&piece).await {
            return Ok(Transfer::of(len, TransferPath::RdmaConfirmed));
        }
        self.http.put_range(key, src, range).await
    }
    async fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>, StoreError> {
        self.http.list(prefix).await
    }
    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.http.delete(key).await
    }
}

impl Transport for EngineStore {
    fn describe(&self) -> serde_json::Value {
        let (total, healthy) = self.client.rails();
        let test_double = self.test_double();
        // `library` has the shape the libminiocpp engine's has: records_dir and report read it.
        let library = json!({"path": self.client.library, "generation": "libs3rdma", "engine_version": self.client.version, "test_double": test_double,
                             "resolved_path": super::ffi::loaded_path("s3rdma")});
        json!({"backend": "rdma", "engine": "libs3rdma", "library": library,
               "rails": {"total": total, "healthy": healthy}, "range_bytes": self.piece, "attempts_per_transfer": ATTEMPTS,
               "request_timeout": format!("read_timeout_s + bytes / 50000000 B/s, read_timeout_s = {}", self.read_timeout.as_secs_f64()),
               "wire_rules_exercised": *self.rules.lock().unwrap_or_else(|e| e.into_inner()),
               "control_plane": self.http.describe()})
    }
    fn preflight(&self, _object_size: u64) -> Vec<String> {
        let mut w = Vec::new();
        if self.test_double() {
            w.push(super::ffi::standin_warning(&self.client.version));
        }
        w
    }
    fn leaves_transport(&self, io: crate::store::PlannedIo) -> Option<String> {
        match io {
            crate::store::PlannedIo::Put { bytes } if bytes > super::MAX_TRANSFER => Some(format!(
                "PUTs of {bytes}-byte objects go over HTTP: one RDMA transfer moves at most {} bytes and this engine does not yet send multipart parts by RDMA",
                super::MAX_TRANSFER
            )),
            _ => None,
        }
    }
    fn stats(&self) -> StoreStats {
        let c = &self.counts;
        let mut s = self.http.stats();
        for (k, v) in [
            ("rdma_requests", &c.requests),
            ("rdma_confirmed_bytes", &c.confirmed_bytes),
            ("rdma_declines", &c.declines),
            ("rdma_fallbacks", &c.fallbacks),
            ("rdma_fallback_bytes", &c.fallback_bytes),
            ("rdma_miscounted", &c.miscounted),
            ("rdma_rail_failures", &c.rail_failures),
            ("rdma_registrations", &c.registrations),
            ("rdma_registration_ns", &c.registration_ns),
        ] {
            s.0.insert(k.to_string(), v.load(Relaxed));
        }
        s
    }
    fn stats_summary(&self, w: &StoreStats) -> Option<String> {
        Some(format!(
            "libs3rdma engine in the timed windows: {} requests with a token, {} bytes confirmed by RDMA, {} declined, {} over HTTP instead ({} bytes), {} miscounted replies, {} failed attempts; {} registrations ({:.3} ms, measured)",
            w.get("rdma_requests"),
            w.get("rdma_confirmed_bytes"),
            w.get("rdma_declines"),
            w.get("rdma_fallbacks"),
            w.get("rdma_fallback_bytes"),
            w.get("rdma_miscounted"),
            w.get("rdma_rail_failures"),
            w.get("rdma_registrations"),
            w.get("rdma_registration_ns") as f64 / 1e6
        ))
    }
    fn rails(&self) -> Option<Rails> {
        let (total, healthy) = self.client.rails();
        Some(Rails { total, healthy })
    }
    fn wire_rules(&self) -> Option<Vec<crate::store::WireRule>> {
        let seen = self.rules.lock().unwrap_or_else(|e| e.into_inner());
        Some(
            wire::RULES
                .iter()
                .map(|&(name, rule)| {
                    let (followed, broken) = seen.get(name).copied().unwrap_or_default();
                    crate::store::WireRule { name, rule, followed, broken }
                })
                .collect(),
        )
    }
    fn rdma_engine(&self) -> Option<RdmaEngine> {
        Some(RdmaEngine {
            engine: "libs3rdma",
            library: self.client.library.clone(),
            generation: super::ffi::Generation::Libs3rdma,
            version: Some(self.client.version.clone()),
            available: true,
            unavailable_reason: None,
            test_double: self.test_double(),
        })
    }
}
