//! The `rdma` backend: S3 over RDMA through libminiocpp's C ABI against an
//! AIStor RDMA server: GPU-Direct into device memory, and, with the libs3rdma
//! generation of the library (minio-cpp v0.6.0 and later), host memory too
//! ([`ffi::Generation`]).
//!
//! Data calls run on a fixed set of worker OS threads, each owning one client
//! (and, once device memory exists, binding the CUDA context before its first
//! call: older cuObject builds segfault in a thread without one). Blocking FFI
//! never runs on tokio's workers; the async trait methods hand a job to a
//! worker and await its answer. A job's buffer stays borrowed by the awaiting
//! future until the worker is done with it; a future dropped early waits for
//! the worker before releasing the buffer (so the library never writes into
//! freed memory).
//!
//! Control-plane calls (bucket check, HEAD, LIST, DELETE) and every transfer
//! the C ABI cannot carry go over HTTP through the `http` backend, and their
//! [`Transfer::path`] says `http`. One RDMA transfer moves at most 4 GiB - 1
//! (the descriptor's size field is 32 bits; libs3rdma refuses a larger
//! registration and minio-cpp sends such a buffer over HTTP): larger reads
//! are split into `--range-size` ranged reads when `miniocpp_get_object_range`
//! exists (minio-cpp PR #258), else they go over HTTP and the run says so up
//! front.
//!
//! Whole-object GETs hand the library a buffer of exactly the object's size
//! (from a HEAD) and count those bytes: the library answers with the size of
//! the buffer it was given, whatever the object held (see [`ffi`]).

pub mod ffi;
pub mod libs3rdma;
pub mod registration;
mod workers;

use std::ffi::CString;
use std::ops::Range;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use async_trait::async_trait;
use serde::Serialize;
use serde_json::json;

use super::http::HttpStore;
use super::{Capabilities, ObjectMeta, ObjectStore, Transfer, TransferPath, Transport, check_capacity, check_key, check_source, resolve_range};
use crate::error::StoreError;
use crate::flag::{ACCESS_KEY, BUCKET, CONCURRENCY, ENDPOINT, RDMA_DEVICE, RDMA_ENGINE, RDMA_NO_RANGE, RDMA_THREADS, REGION, SECRET_KEY, SESSION_TOKEN};
use crate::mem::Buffer;
use crate::store::{Backend, StoreConfig};
use ffi::{Lib, LibInfo};
use registration::{RegistrationCost, RegistrationModel};
pub use workers::CallCounts;
use workers::{ClientArgs, Completion, Counters, Job, Op, WaitOnDrop, worker};

/// What the rdma backend's library is, as a bench or `verify` may ask of any
/// store ([`Transport::rdma_engine`]): its generation decides which host
/// checks apply and whether host memory can be an RDMA path.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RdmaEngine {
    /// Which engine carries the transfers: `libminiocpp` (its C ABI) or
    /// `libs3rdma` (bound directly, src/store/rdma/libs3rdma).
    pub engine: &'static str,
    /// The library's path as given to the loader.
    pub library: String,
    /// cuObject, libs3rdma or unknown.
    pub generation: ffi::Generation,
    /// The engine's version, where it says (libs3rdma: `s3rdma_version()`).
    pub version: Option<String>,
    /// `miniocpp_rdma_available()` at load time.
    pub available: bool,
    /// The library's reason when not available, where it can say.
    pub unavailable_reason: Option<String>,
    /// The engine is a stand-in (see [`ffi::LibInfo::test_double`]): nothing it carries is an RDMA figure.
    pub test_double: bool,
}

/// Most worker threads (each owns one library client and its connections):
/// far above any NIC's useful queue depth, well below a host's thread limit.
pub const MAX_WORKERS: u32 = 1024;

/// Largest single RDMA transfer: 4 GiB - 1 (32-bit descriptor size field).
pub const MAX_TRANSFER: u64 = (4 << 30) - 1;

/// A bucket reached through libminiocpp's C ABI (data) and HTTP (control).
pub struct RdmaStore {
    http: HttpStore,
    lib: Lib,
    info: LibInfo,
    jobs: Option<Sender<Job>>,
    workers: Vec<JoinHandle<()>>,
    counters: Counters,
    range_bytes: u64,
    max_transfer: u64,
    use_range: bool,
    /// Registration cost measured at open, or why it was not.
    registration: Result<RegistrationModel, String>,
}

/// Sizes whose registration is timed at open: the line through them prices every ranged read's.
const REGISTRATION_SIZES: [u64; 2] = [4 << 20, 64 << 20];

impl std::fmt::Debug for RdmaStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RdmaStore").field("info", &self.info).field("workers", &self.workers.len()).finish()
    }
}

impl RdmaStore {
    /// Load the library, start `--rdma-threads` workers (each creating its
    /// client) and the HTTP control plane.
    ///
    /// Errors: [`StoreError::Library`] for a library that cannot be loaded or
    /// lacks required symbols (one line each), or a client the library
    /// refuses to create; [`StoreError::Config`] for the endpoint, bucket or
    /// credentials (checked first).
    pub fn new(args: &StoreConfig) -> Result<Self, StoreError> {
        if let Some(d) = &args.rdma_device {
            return Err(StoreError::Config(format!(
                "{RDMA_DEVICE} '{d}' selects rails for {RDMA_ENGINE} libs3rdma; libminiocpp's libs3rdma takes them from S3RDMA_DEVICE: set that, or add {RDMA_ENGINE} libs3rdma"
            )));
        }
        let http = HttpStore::new(args)?;
        let path = ffi::lib_path(args.rdma_lib.as_deref());
        let (lib, info) = Lib::load(&path).map_err(StoreError::Library)?;
        let endpoint = http.location();
        let (scheme, hostport) = endpoint.split_once("://").unwrap_or(("https", endpoint.as_str()));
        let c = |s: &str, what: crate::flag::Flag| CString::new(s).map_err(|_| StoreError::Config(format!("{what} contains a NUL byte")));
        let cargs = Arc::new(ClientArgs {
            endpoint: c(hostport, ENDPOINT)?,
            region: c(&args.region, REGION)?,
            access_key: c(args.access_key.as_deref().unwrap_or_default(), ACCESS_KEY)?,
            secret_key: c(args.secret_key.as_deref().unwrap_or_default(), SECRET_KEY)?,
            // The library signs with these for the client's life: temporary
            // credentials that expire mid-run are not refreshed on this path.
            session_token: args.session_token.as_deref().map(|t| c(t, SESSION_TOKEN)).transpose()?,
            use_https: i32::from(scheme == "https"),
        });
        let bucket = c(&args.bucket, BUCKET)?;
        let (tx, rx) = std::sync::mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        let threads = args.rdma_threads.unwrap_or(8).max(1);
        if threads > MAX_WORKERS {
            return Err(StoreError::Config(format!(
                "{threads} RDMA worker threads asked for ({RDMA_THREADS}, else the largest {CONCURRENCY}): at most {MAX_WORKERS}, one library client each; lower it"
            )));
        }
        let mut workers = Vec::new();
        let (rtx, rrx) = std::sync::mpsc::channel();
        for i in 0..threads {
            let (cargs, bucket, rx, rtx) = (cargs.clone(), bucket.clone(), rx.clone(), rtx.clone());
            let h = std::thread::Builder::new()
                .name(format!("s3rdma-rdma-{i}"))
                .spawn(move || worker(lib, cargs, bucket, rx, rtx))
                .map_err(|e| StoreError::Config(format!("cannot start RDMA worker thread: {e}")))?;
            workers.push(h);
        }
        drop(rtx);
        let mut store = RdmaStore {
            http,
            lib,
            info,
            jobs: Some(tx),
            workers,
            counters: Counters::default(),
            range_bytes: args.range_bytes.min(MAX_TRANSFER),
            max_transfer: args.rdma_max_transfer.clamp(1, MAX_TRANSFER),
            use_range: !args.rdma_no_range,
            registration: Err("not measured".into()),
        };
        for _ in 0..threads {
            match rrx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    store.shutdown();
                    return Err(StoreError::Library(e));
                }
                Err(_) => {
                    store.shutdown();
                    return Err(StoreError::Library("an RDMA worker thread died while creating its client".into()));
                }
            }
        }
        store.use_range &= store.lib.get_object_range.is_some();
        store.registration = store.registration_costs(&REGISTRATION_SIZES).and_then(RegistrationModel::fit);
        Ok(store)
    }

    fn shutdown(&mut self) {
        self.jobs.take();
        for h in self.workers.drain(..) {
            let _ = h.join();
        }
    }

    /// Run one job on a worker and wait for its return code.
    async fn call(&self, op: Op) -> Result<(isize, Option<String>), StoreError> {
        let len = match &op {
            Op::Get { len, .. } | Op::Put { len, .. } => *len,
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        let done = Arc::new(Completion::default());
        let jobs = self.jobs.as_ref().ok_or_else(|| self.other("RDMA", "", "store is shut down".into()))?;
        jobs.send(Job { op, done: done.clone(), reply: tx }).map_err(|_| self.other("RDMA", "", "all RDMA worker threads have exited".into()))?;
        let _guard = WaitOnDrop(done);
        let (rc, err) = rx.await.map_err(|_| self.other("RDMA", "", "an RDMA worker thread died mid-call".into()))?;
        self.counters.record(rc, len);
        Ok((rc, err))
    }

    /// A libminiocpp call that failed with `rc` (and the library's own
    /// message, where it gave one), with the [`LibraryError`] as its source.
    fn library_failed(&self, op: &'static str, key: &str, rc: isize, message: Option<String>) -> StoreError {
        let e = LibraryError { rc, message: message.unwrap_or_default() };
        self.other(op, key, e.to_string()).caused_by(e)
    }

    fn other(&self, op: &'static str, key: &str, detail: String) -> StoreError {
        StoreError::Other { op, key: key.into(), location: self.http.location(), detail, cause: None }
    }

    fn key_c(&self, key: &str) -> Result<CString, StoreError> {
        check_key(key)?;
        CString::new(key).map_err(|_| StoreError::InvalidKey { key: key.into(), why: "keys must not contain NUL" })
    }

    /// Turn a failed data call into the error every backend gives: NotFound,
    /// BadRange, BufferTooSmall where a HEAD explains it, else the library's message.
    async fn explain(&self, key: &str, range: Option<Range<u64>>, cap: u64, rc: isize, err: Option<String>) -> StoreError {
        let meta = match self.http.head(key).await {
            Ok(m) => m,
            Err(e @ StoreError::NotFound { .. }) => return e,
            Err(_) => ObjectMeta { key: key.into(), size: u64::MAX },
        };
        if meta.size != u64::MAX {
            if let Err(e) = resolve_range(key, range.clone(), meta.size) {
                return e;
            }
            let need = range.map_or(meta.size, |r| r.end - r.start);
            if need > cap {
                return StoreError::BufferTooSmall { key: key.into(), needed: need, capacity: cap };
            }
        }
        self.library_failed("GET", key, rc, err)
    }

    /// Read `range` in ranged reads of at most `--range-size` bytes, one after another
    /// into consecutive slices of `dst` (never two transfers into one buffer at once).
    async fn read_ranges(&self, key: &str, range: Range<u64>, dst: &mut Buffer, at: usize) -> Result<Transfer, StoreError> {
        let kc = self.key_c(key)?;
        // An address, not a pointer, across the awaits (raw pointers are not Send).
        let base = data_ptr(dst) as usize + at;
        let mut off = range.start;
        let mut declined = false;
        while off < range.end {
            let n = (range.end - off).min(self.range_bytes) as usize;
            // Within dst: the callers checked its capacity.
            let op = Op::Get { key: kc.clone(), offset: Some(off), ptr: (base + (off - range.start) as usize) as *mut u8, len: n };
            let (rc, err) = self.call(op).await?;
            if rc == -2 {
                // Declined: this ranged read is redone over HTTP and says so in its path.
                super::read_into_at(&self.http, key, Some(off..off + n as u64), dst, at + (off - range.start) as usize).await?;
                off += n as u64;
                declined = true;
                continue;
            }
            if rc != n as isize {
                // A range past the end, a missing object: the same errors as every backend.
                let e = self.explain(key, Some(off..off + n as u64), n as u64, rc, err).await;
                if rc >= 0 && matches!(e, StoreError::Other { .. }) {
                    return Err(StoreError::ShortBody { key: key.into(), location: self.http.location(), got: rc as u64, expected: n as u64 });
                }
                return Err(e);
            }
            off += n as u64;
        }
        // A read the library declined in part went (partly) over HTTP: said as HTTP.
        let path = if declined { TransferPath::Http } else { self.lib_path() };
        Ok(Transfer::of(range.end - range.start, path))
    }

    /// One whole-object GET of an object of `size` bytes (from a HEAD) into
    /// `dst` at `at`. The library is handed exactly `size` bytes: it returns
    /// the size it was given and fills at most that much (see [`ffi`]), so a
    /// larger buffer would count bytes that never arrived. A decline (-2) is
    /// redone over HTTP and says so in its path.
    async fn get_whole(&self, key: &str, kc: CString, size: u64, dst: &mut Buffer, at: usize) -> Result<Transfer, StoreError> {
        if size == 0 {
            // Nothing to transfer; the library refuses a zero-length buffer as -3 in some builds.
            return Ok(Transfer::of(0, TransferPath::Http));
        }
        // SAFETY: at + size is within dst (checked by the caller).
        let ptr = unsafe { data_ptr(dst).add(at) };
        let (rc, err) = self.call(Op::Get { key: kc, offset: None, ptr, len: size as usize }).await?;
        match rc {
            n if n >= 0 && n as u64 == size => Ok(Transfer::of(size, self.lib_path())),
            n if n >= 0 => Err(StoreError::ShortBody { key: key.into(), location: self.http.location(), got: n as u64, expected: size }),
            -2 => super::read_into_at(&self.http, key, None, dst, at).await,
            _ => Err(self.explain(key, None, size, rc, err).await),
        }
    }

    /// The HTTP fallback of a PUT. A device source is copied to host memory
    /// first (HTTP cannot read device memory): a slow path, taken only when
    /// the library declines, and the witness shows the bytes as HTTP.
    async fn http_put(&self, key: &str, src: &Buffer, range: Range<usize>) -> Result<Transfer, StoreError> {
        match src {
            Buffer::Device(d) => {
                let mut host = Buffer::host(range.end - range.start);
                d.read_back(range.start, host.as_host_mut().expect("host"))
                    .map_err(|e| self.other("PUT", key, format!("staging device bytes for the HTTP fallback: {e}")))?;
                self.http.put_from(key, &host).await
            }
            _ => self.http.put_range(key, src, range).await,
        }
    }

    /// The path of a transfer the library completed: `rdma_attempted` while
    /// it reports RDMA available, else `http` (its own word: the bytes went
    /// over its HTTP path).
    fn lib_path(&self) -> TransferPath {
        if self.info.rdma_available { TransferPath::RdmaAttempted } else { TransferPath::Http }
    }

    /// "<path> (<generation>[ <version>]) reports RDMA unavailable (...)[: <the library's reason>]".
    fn unavailable_line(&self) -> String {
        let i = &self.info;
        let version = i.engine_version.as_deref().map_or(String::new(), |v| format!(" {v}"));
        let why = i.unavailable_reason.as_deref().map_or(String::new(), |r| format!(": {r}"));
        format!("{} ({}{version}) reports RDMA unavailable (miniocpp_rdma_available() = 0){why}", i.path, i.generation.as_str())
    }

    /// Register and deregister a host buffer of each size through the
    /// engine's own client API, off the clock ([`registration`]).
    ///
    /// Errors: RDMA unavailable, an engine without that API (cuObject, test
    /// doubles of libminiocpp), or the engine's own refusal.
    pub fn registration_costs(&self, sizes: &[u64]) -> Result<Vec<RegistrationCost>, String> {
        if !self.info.rdma_available {
            return Err("RDMA unavailable: nothing is registered".into());
        }
        let client = self.lib.engine_client.ok_or("the library's RDMA engine has no libs3rdma client API to time")?;
        client.measure(sizes, self.lib.alloc_aligned, self.lib.free_aligned)
    }

    /// Why ranged reads do not go through the library.
    fn no_range_reason(&self) -> String {
        if self.lib.get_object_range.is_none() {
            "the library lacks miniocpp_get_object_range (minio-cpp PR #258)".into()
        } else {
            format!("{RDMA_NO_RANGE} is set")
        }
    }

    /// Figures of the C ABI's return codes so far.
    pub fn counts(&self) -> CallCounts {
        self.counters.snapshot()
    }
}

/// A negative return code in words, as c_api.h names them; others by number.
/// A libminiocpp call's failure: its return code and the library's message
/// (`miniocpp_last_error()`), the source of the
/// rdma store's [`StoreError::Other`].
#[derive(Debug, Clone, thiserror::Error)]
#[error("libminiocpp {}: {message}", rc_name(*rc))]
pub struct LibraryError {
    /// The call's return code (c_api.h: -1 failed, -2 declined, -3 invalid argument).
    pub rc: isize,
    /// What the library said, empty where it said nothing.
    pub message: String,
}

fn rc_name(rc: isize) -> String {
    match rc {
        -1 => "failed (-1)".into(),
        -2 => "declined (-2)".into(),
        -3 => "invalid argument (-3)".into(),
        n => format!("returned {n}, which c_api.h does not define"),
    }
}

/// Whether minio-cpp accepts `key` as an object name: it refuses names with
/// leading or trailing whitespace ("object name cannot be empty": minio-cpp
/// `utils::CheckNonEmptyString` compares a name with its trimmed self). Such
/// keys are valid S3 keys; their transfers go over HTTP, as every backend
/// must carry the same keys.
fn library_takes(key: &str) -> bool {
    key.trim_matches(|c: char| c.is_ascii_whitespace() || c == '\x0b') == key
}

/// Where the library writes: host bytes or the device address (GPU-Direct).
fn data_ptr(dst: &mut Buffer) -> *mut u8 {
    match dst {
        Buffer::Device(d) => d.device_ptr().0 as *mut u8,
        other => other.as_host_mut().expect("host or pinned buffer").as_mut_ptr(),
    }
}

impl Drop for RdmaStore {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[async_trait]
impl ObjectStore for RdmaStore {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            name: Backend::Rdma.name(),
            page_cache: false,
            // GPU-Direct: the library takes device pointers itself, but only
            // while it says RDMA is available; otherwise its HTTP path cannot
            // write device memory, and device buffers are staged through
            // pinned host memory.
            device_writes: self.info.rdma_available,
            staged_path: TransferPath::HttpStaged,
            ranged_read: self.use_range.then_some(self.range_bytes),
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
        let kc = self.key_c(key)?;
        match range {
            None => {
                // The size decides the path and is all the library may be handed.
                let size = self.http.head(key).await?.size;
                check_capacity(key, size, at, dst)?;
                if !library_takes(key) {
                    super::read_into_at(&self.http, key, None, dst, at).await
                } else if size <= self.max_transfer {
                    self.get_whole(key, kc, size, dst, at).await
                } else if self.use_range {
                    self.read_ranges(key, 0..size, dst, at).await
                } else {
                    super::read_into_at(&self.http, key, None, dst, at).await
                }
            }
            Some(r) => {
                if r.start >= r.end {
                    let size = self.http.head(key).await?.size;
                    return Err(StoreError::BadRange { key: key.into(), range: r, size });
                }
                check_capacity(key, r.end - r.start, at, dst)?;
                if self.use_range && library_takes(key) {
                    self.read_ranges(key, r, dst, at).await
                } else if r.start == 0 && r.end <= self.max_transfer && library_takes(key) && self.http.head(key).await?.size == r.end {
                    // A range that is the whole object is a whole-object GET,
                    // which the library carries without ranged reads.
                    self.get_whole(key, kc, r.end, dst, at).await
                } else {
                    super::read_into_at(&self.http, key, Some(r), dst, at).await
                }
            }
        }
    }
    async fn put_range(&self, key: &str, src: &Buffer, range: Range<usize>) -> Result<Transfer, StoreError> {
        let kc = self.key_c(key)?;
        check_source(key, src, &range)?;
        let len = range.end - range.start;
        if len as u64 > self.max_transfer || !library_takes(key) {
            // One descriptor cannot carry it (older builds segfault trying),
            // or the library refuses the key.
            return self.http_put(key, src, range).await;
        }
        let ptr = match src {
            // SAFETY (both arms): range is within src (checked above).
            Buffer::Device(d) => (d.device_ptr().0 as usize + range.start) as *const u8,
            other => other.as_host().expect("host or pinned buffer")[range.clone()].as_ptr(),
        };
        let (rc, err) = self.call(Op::Put { key: kc, ptr, len }).await?;
        match rc {
            n if n >= 0 => Ok(Transfer::of(len as u64, self.lib_path())),
            -2 => self.http_put(key, src, range).await,
            _ => Err(self.library_failed("PUT", key, rc, err)),
        }
    }
    async fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>, StoreError> {
        self.http.list(prefix).await
    }
    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.http.delete(key).await
    }
}

impl Transport for RdmaStore {
    fn describe(&self) -> serde_json::Value {
        json!({"backend": "rdma", "library": self.info, "worker_threads": self.workers.len(),
               "range_bytes": self.range_bytes, "max_transfer_bytes": self.max_transfer,
               "registration": match &self.registration { Ok(m) => json!(m), Err(why) => json!({"not_measured": why}) },
               "ranged_reads": self.use_range, "control_plane": self.http.describe()})
    }
    fn preflight(&self, object_size: u64) -> Vec<String> {
        let mut w = Vec::new();
        if self.info.test_double {
            w.push(ffi::standin_warning(self.info.engine_version.as_deref().unwrap_or(ffi::STANDIN_PREFIX)));
        }
        if !self.info.rdma_available {
            w.push(format!("{}: transfers will go over HTTP; the witness will show it", self.unavailable_line()));
        }
        if !self.use_range {
            w.push(format!("{}: every ranged read (ckpt and shard windows, verify's GPU probe) goes over HTTP", self.no_range_reason()));
            if object_size > self.max_transfer {
                w.push(format!("objects of {object_size} bytes exceed one RDMA transfer ({} bytes): they will be read over HTTP", self.max_transfer));
            }
        }
        w
    }
    fn leaves_transport(&self, io: super::PlannedIo) -> Option<String> {
        if !self.info.rdma_available {
            // Said once for the whole run (transport_unavailable), not per shape.
            return None;
        }
        let max = self.max_transfer;
        match io {
            super::PlannedIo::Get { whole: false, .. } if !self.use_range => Some(format!(
                "ranged GETs go over HTTP: {} (a range that is a whole object of at most {max} bytes still goes over RDMA)",
                self.no_range_reason()
            )),
            super::PlannedIo::Get { whole: true, bytes } if bytes > max && !self.use_range => Some(format!(
                "GETs of whole {bytes}-byte objects go over HTTP: one RDMA transfer moves at most {max} bytes (the descriptor's size field is 32 bits) and {}",
                self.no_range_reason()
            )),
            super::PlannedIo::Put { bytes } if bytes > max => {
                Some(format!("PUTs of {bytes}-byte objects go over HTTP: one RDMA transfer moves at most {max} bytes (the descriptor's size field is 32 bits)"))
            }
            _ => None,
        }
    }
    fn stats(&self) -> super::StoreStats {
        let c = self.counts();
        let pairs = [
            ("rdma_calls", c.rdma_calls),
            ("rdma_ok", c.rdma_ok),
            ("rdma_errors", c.rdma_errors),
            ("rdma_declined", c.rdma_declined),
            ("rdma_invalid", c.rdma_invalid),
            ("rdma_call_bytes", c.rdma_call_bytes),
        ];
        let mut s = super::StoreStats(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect());
        if let Ok(m) = &self.registration {
            // The line is linear, so a window's share is the difference of two readings.
            s.0.insert("registration_ns_est".into(), (m.seconds(c.rdma_calls, c.rdma_call_bytes) * 1e9).round() as u64);
        }
        s
    }
    fn stats_summary(&self, w: &super::StoreStats) -> Option<String> {
        let registration = match &self.registration {
            Ok(_) => format!(
                "; buffer registration inside those calls: {:.3} ms (each call registers its buffer; priced from registrations timed off the clock at open)",
                w.get("registration_ns_est") as f64 / 1e6
            ),
            Err(why) => format!("; registration not timed: {why}"),
        };
        Some(format!(
            "libminiocpp return codes in the timed windows: {} calls, {} ok, {} errors (-1), {} declined (-2), {} invalid (-3){registration}",
            w.get("rdma_calls"),
            w.get("rdma_ok"),
            w.get("rdma_errors"),
            w.get("rdma_declined"),
            w.get("rdma_invalid")
        ))
    }
    fn registration_costs(&self, sizes: &[u64]) -> Option<Result<Vec<RegistrationCost>, String>> {
        Some(RdmaStore::registration_costs(self, sizes))
    }
    fn transport_unavailable(&self) -> Option<String> {
        (!self.info.rdma_available).then(|| self.unavailable_line())
    }
    fn rails(&self) -> Option<super::Rails> {
        self.lib.rails()
    }
    fn rdma_engine(&self) -> Option<RdmaEngine> {
        let i = &self.info;
        Some(RdmaEngine {
            engine: "libminiocpp",
            library: i.path.clone(),
            generation: i.generation,
            version: i.engine_version.clone(),
            available: i.rdma_available,
            unavailable_reason: i.unavailable_reason.clone(),
            test_double: i.test_double,
        })
    }
}
