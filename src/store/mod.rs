//! One object-store interface over every transport.
//!
//! Modelled on Apache Arrow's `object_store`: one trait here, one module per
//! store, one conformance suite (`tests/conformance.rs`) that runs the same test
//! bodies against every backend. A behaviour difference between backends is a bug.
//!
//! A store is opened on one bucket; keys are relative to it. Every data call
//! returns a [`Transfer`] saying how many bytes moved and over which path, so
//! the benches can report (and the witness can check) what carried the bytes.

mod capabilities;
mod config;
pub mod counted;
pub mod credentials;
pub mod file_pipeline;
pub mod http;
pub mod listing;
mod load_timeline;
pub mod local;
pub mod rdma;
pub mod server;
mod staged;
mod staged_check;
mod transfer;

pub use capabilities::Capabilities;
pub use config::{Backend, ChecksumMode, HttpGet, RdmaEngineKind, StoreConfig};
pub use file_pipeline::{DeviceLoad, FileIo};
pub use load_timeline::{LoadTimeline, PartTimeline, ThreadTimeline};
pub use staged::{StagedPart, pool_shares, read_plan, staged_read, staged_read_pooled, staged_read_spread};
pub use staged_check::{StagedCheck, StagedHashes};
pub use transfer::{ObjectVersion, Rails, StoreStats, Transfer, TransferPath, check_version};

use std::fmt;
use std::ops::Range;

use async_trait::async_trait;
use serde::Serialize;

use crate::error::StoreError;
use crate::flag::DIRECT;
use crate::mem::Buffer;

/// What `head` and `list` report about an object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ObjectMeta {
    /// Key relative to the bucket.
    pub key: String,
    /// Size in bytes.
    pub size: u64,
}

/// The one interface every backend implements: the twelve calls that move
/// bytes and name them. What a transport says beyond that (plans it would
/// leave, counters, rails, a device pipeline of its own) is the
/// [`Transport`] extension, whose methods all have defaults, so a new
/// backend starts from these twelve (the split of Apache Arrow
/// `object_store`'s small core trait and its extension traits).
///
/// Errors: every method returns [`StoreError`]; a missing object is
/// [`StoreError::NotFound`] on every backend, a missing bucket
/// [`StoreError::NoSuchBucket`].
#[async_trait]
pub trait ObjectStore: Transport + Send + Sync + fmt::Debug {
    /// What this store can do ([`Capabilities`]): asked instead of which
    /// backend it is.
    fn capabilities(&self) -> Capabilities;
    /// The bucket this store is bound to.
    fn bucket(&self) -> &str;
    /// Where the bucket lives, for messages and records (an endpoint URL or a directory).
    fn location(&self) -> String;

    /// Check the bucket exists; create it when `create` is true, else fail with
    /// [`StoreError::NoSuchBucket`].
    async fn ensure_bucket(&self, create: bool) -> Result<(), StoreError>;
    /// Size of one object.
    async fn head(&self, key: &str) -> Result<ObjectMeta, StoreError>;
    /// Read the object, or `range` of it (end exclusive, non-empty, within the
    /// object), into `dst[at..at + n]`, where `n` is the number of bytes read.
    /// `dst` must hold `at + n` bytes ([`StoreError::BufferTooSmall`] otherwise).
    /// Host and pinned buffers on every backend; device buffers only where
    /// [`Capabilities::device_writes`] (others go through [`read_into_at`]).
    async fn get_into_at(&self, key: &str, range: Option<Range<u64>>, dst: &mut Buffer, at: usize) -> Result<Transfer, StoreError>;
    /// [`ObjectStore::get_into_at`] at offset 0.
    async fn get_into(&self, key: &str, range: Option<Range<u64>>, dst: &mut Buffer) -> Result<Transfer, StoreError> {
        self.get_into_at(key, range, dst, 0).await
    }
    /// [`ObjectStore::get_into_at`] from one version of the object only
    /// (`version`, a [`Transfer::version`] an earlier read of `key` returned):
    /// how a read made of several calls (a model's header, then its windows)
    /// never mixes two versions of an object replaced meanwhile. Over S3 the
    /// request carries `If-Match` and the answer's ETag is compared as well
    /// (for servers that ignore the header); elsewhere the version served is
    /// compared after the read, whose bytes then count for nothing.
    ///
    /// Errors: [`StoreError::Changed`] naming both versions; as `get_into_at`.
    async fn get_into_version(
        &self,
        key: &str,
        range: Option<Range<u64>>,
        dst: &mut Buffer,
        at: usize,
        version: &ObjectVersion,
    ) -> Result<Transfer, StoreError> {
        let t = match self.get_into_at(key, range, dst, at).await {
            // Cut short since the pinned read: a change, not a bad range.
            Err(StoreError::BadRange { size, .. }) if size != version.size => {
                let now = ObjectVersion { tag: None, size };
                return Err(StoreError::Changed {
                    key: key.into(),
                    location: self.location(),
                    detail: format!("version {version} -> {now} between two reads of one load"),
                });
            }
            t => t?,
        };
        check_version(key, &self.location(), version, t.version.as_ref())?;
        Ok(t)
    }
    /// Write `src[range]` as the object `key`, replacing any object of that
    /// key. Readers never see a partly written object. Host and pinned
    /// sources on every backend; device sources only where
    /// [`Capabilities::device_writes`] (others go through [`write_from`]).
    ///
    /// Errors: [`StoreError::BufferTooSmall`] when `range` is not within `src`.
    async fn put_range(&self, key: &str, src: &Buffer, range: Range<usize>) -> Result<Transfer, StoreError>;
    /// Write all of `src` as the object `key` ([`ObjectStore::put_range`] over the whole buffer).
    async fn put_from(&self, key: &str, src: &Buffer) -> Result<Transfer, StoreError> {
        self.put_range(key, src, 0..src.len()).await
    }
    /// Every object whose key starts with `prefix`, sorted by key.
    async fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>, StoreError>;
    /// Delete an object. Deleting a missing object succeeds, as in S3.
    async fn delete(&self, key: &str) -> Result<(), StoreError>;
}

/// What a store's transport says beyond moving bytes, every method with a
/// default that fits a plain store (one transport, no counters of its own,
/// no device pipeline): the extension half of [`ObjectStore`]. Callers of a
/// `dyn ObjectStore` reach these through the supertrait.
pub trait Transport {
    /// Backend facts worth recording with a run (endpoint, part size,
    /// O_DIRECT, ...) as a JSON object; never contains credentials.
    fn describe(&self) -> serde_json::Value {
        serde_json::Value::Object(Default::default())
    }
    /// Why a transfer of the shape `io` would leave this store's own
    /// transport, where it would (rdma: a read or write the library cannot
    /// carry over RDMA goes over HTTP although RDMA works); `None` where it
    /// stays, and on every backend with one transport. Asked before a run,
    /// so a bench says it once and `--require-rdma` refuses such a plan
    /// before any transfer ([`crate::bench::session::Session::check_io_plan`]).
    fn leaves_transport(&self, _io: PlannedIo) -> Option<String> {
        None
    }
    /// What registering host buffers of each of `sizes` costs this store's
    /// RDMA engine, timed now (rdma: [`rdma::registration`]); `None` on
    /// stores that register nothing.
    fn registration_costs(&self, _sizes: &[u64]) -> Option<Result<Vec<rdma::registration::RegistrationCost>, String>> {
        None
    }
    /// Warnings to print before a run that reads objects of `object_size`
    /// bytes (e.g. "these will go over HTTP"). None for most backends.
    fn preflight(&self, _object_size: u64) -> Vec<String> {
        Vec::new()
    }
    /// Counters this store keeps, cumulative since it was opened: bytes per
    /// transfer path (`bytes_<path>`, kept by [`counted::Counted`]) and the
    /// backend's own (rdma: the library's return codes). Benches diff two
    /// readings; they never ask which backend produced them.
    fn stats(&self) -> StoreStats {
        StoreStats::default()
    }
    /// One line for the terminal about `in_windows` (the counters' growth
    /// over the timed windows), where the backend has something to say.
    fn stats_summary(&self, _in_windows: &StoreStats) -> Option<String> {
        None
    }
    /// `Some(why)` when the transport this store exists for cannot work now,
    /// in its own library's words (rdma: `miniocpp_rdma_available()` = 0):
    /// no window could be `rdma-verified`, so `--require-rdma` stops before
    /// any. `None` for most backends.
    fn transport_unavailable(&self) -> Option<String> {
        None
    }
    /// The transport's rails (RDMA NICs) now, total and healthy, where the
    /// backend can count them (rdma with the libs3rdma generation); read at
    /// each window's open and close, so a rail lost mid-run is seen.
    fn rails(&self) -> Option<Rails> {
        None
    }
    /// The RDMA library under this store, where there is one (the rdma
    /// backend): its generation, version and availability.
    fn rdma_engine(&self) -> Option<rdma::RdmaEngine> {
        None
    }
    /// The wire rules of S3 over RDMA this store judges every answer by,
    /// each with how often the server's answers followed and broke it so
    /// far (the libs3rdma engine, src/store/rdma/libs3rdma/wire.rs); `None`
    /// where the library judges the answers itself.
    fn wire_rules(&self) -> Option<Vec<WireRule>> {
        None
    }
    /// Read `parts` into `dsts` (`parts[i]` into `dsts[i]`) through a
    /// device pipeline of this store's own, blocking until every copy is
    /// done; `None` when it has none, and the caller uses the generic staged
    /// pipeline ([`staged_read_pooled`]). The local store reads its files on
    /// reader threads of their own ([`file_pipeline`]), but with `--direct`.
    /// With `check`, the pipeline also hashes what it stages
    /// ([`StagedCheck`]; the result in [`DeviceLoad::checked`]); a pipeline
    /// that cannot leaves `checked` `None`.
    ///
    /// Errors: the store's, as its reads would give them (missing key, a
    /// version changed before or during the load, a short file), and CUDA
    /// errors as [`StoreError::Other`].
    fn read_to_device(
        &self,
        _parts: &[StagedPart],
        _dsts: &mut [&mut crate::mem::DeviceBuffer],
        _check: Option<&StagedCheck>,
    ) -> Option<Result<DeviceLoad, StoreError>> {
        None
    }
}

/// One wire rule of S3 over RDMA and what the server's answers did with it
/// ([`Transport::wire_rules`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct WireRule {
    /// Its short name (`count`, `decline`, ...).
    pub name: &'static str,
    /// What it requires, in words.
    pub rule: &'static str,
    /// Answers that followed it.
    pub followed: u64,
    /// Answers that broke it.
    pub broken: u64,
}

/// The shape of one kind of transfer a bench plans, for
/// [`Transport::leaves_transport`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlannedIo {
    /// GETs of `bytes` each: of whole objects (`whole`), or ranges within them.
    Get {
        /// The whole object, not a range of it.
        whole: bool,
        /// Bytes per GET.
        bytes: u64,
    },
    /// PUTs of whole objects of `bytes` each.
    Put {
        /// Bytes per PUT.
        bytes: u64,
    },
}

/// Read into any kind of buffer: straight through `get_into` for host and
/// pinned memory and for backends that write device memory themselves; for
/// device memory on other backends, through the staged pipeline
/// ([`staged_read`]). Benches call this, not `get_into`.
pub async fn read_into(store: &dyn ObjectStore, key: &str, range: Option<Range<u64>>, dst: &mut Buffer) -> Result<Transfer, StoreError> {
    read_into_at(store, key, range, dst, 0).await
}

/// [`read_into`] into `dst[at..]`.
pub async fn read_into_at(store: &dyn ObjectStore, key: &str, range: Option<Range<u64>>, dst: &mut Buffer, at: usize) -> Result<Transfer, StoreError> {
    read_into_version(store, key, range, dst, at, None).await
}

/// [`read_into_at`], from object version `version` only when one is given
/// ([`ObjectStore::get_into_version`]). The staged pipeline's reads of one
/// call are all of one version either way.
///
/// Errors: [`StoreError::Changed`]; as [`read_into_at`].
pub async fn read_into_version(
    store: &dyn ObjectStore,
    key: &str,
    range: Option<Range<u64>>,
    dst: &mut Buffer,
    at: usize,
    version: Option<&ObjectVersion>,
) -> Result<Transfer, StoreError> {
    match (dst, version) {
        (Buffer::Device(d), _) if !store.capabilities().device_writes => staged_read(store, key, range, d, at, version).await,
        (dst, Some(v)) => store.get_into_version(key, range, dst, at, v).await,
        (dst, None) => store.get_into_at(key, range, dst, at).await,
    }
}

/// Write `src[range]` as `key` from any kind of buffer: straight through
/// `put_range` for host and pinned memory and for backends that read device
/// memory themselves (GPU-Direct); for device memory on other backends the
/// range is first copied into `staging` (pinned host memory, at least
/// `range.len()` bytes), and that copy is part of the write's cost.
///
/// Returns the transfer and, when the write was staged, the host bytes it
/// sent (`staging`'s first `range.len()` bytes): a caller that hashes what
/// was written hashes those, whatever the store decided about staging.
///
/// Errors: [`StoreError::BufferTooSmall`] when `staging` is missing or short,
/// [`StoreError::Other`] when the device-to-host copy fails.
pub async fn write_from<'s>(
    store: &dyn ObjectStore,
    key: &str,
    src: &Buffer,
    range: Range<usize>,
    staging: Option<&'s mut Buffer>,
) -> Result<(Transfer, Option<&'s [u8]>), StoreError> {
    match src {
        Buffer::Device(d) if !store.capabilities().device_writes => {
            let len = range.end - range.start;
            let staging = match staging {
                Some(s) if s.len() >= len => s,
                other => {
                    return Err(StoreError::BufferTooSmall { key: key.into(), needed: len as u64, capacity: other.map_or(0, |s| s.len() as u64) });
                }
            };
            let host = staging.as_host_mut().expect("staging buffers are host memory");
            blocking(|| d.read_back(range.start, &mut host[..len])).map_err(|e| StoreError::Other {
                op: "PUT",
                key: key.into(),
                location: store.location(),
                detail: format!("staging device bytes: {e}"),
                cause: None,
            })?;
            let mut t = store.put_range(key, staging, 0..len).await?;
            if t.path == TransferPath::Http {
                t.path = TransferPath::HttpStaged;
            }
            Ok((t, Some(&staging.as_host().expect("staging buffers are host memory")[..len])))
        }
        _ => Ok((store.put_range(key, src, range).await?, None)),
    }
}

/// Run blocking work (file I/O, synchronous CUDA copies) without stalling the runtime: on a
/// multi-thread runtime the worker hands its other tasks off first
/// (`block_in_place` keeps borrowed buffers usable, unlike `spawn_blocking`).
pub(crate) fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// Write `body` as the small object `key` (manifests, rank markers, figures).
pub async fn put_bytes(store: &dyn ObjectStore, key: &str, body: Vec<u8>) -> Result<Transfer, StoreError> {
    store.put_from(key, &Buffer::from_vec(body)).await
}

/// Read the whole small object `key` into a `Vec` (HEAD for its size, then one GET).
pub async fn get_bytes(store: &dyn ObjectStore, key: &str) -> Result<Vec<u8>, StoreError> {
    let size = store.head(key).await?.size;
    let mut b = Buffer::host(size as usize);
    store.get_into(key, None, &mut b).await?;
    Ok(b.as_host().expect("host").to_vec())
}

/// Check `range` lies within `src` (for `put_range`).
pub fn check_source(key: &str, src: &Buffer, range: &Range<usize>) -> Result<(), StoreError> {
    if range.start > range.end || range.end > src.len() {
        return Err(StoreError::BufferTooSmall { key: key.into(), needed: range.end as u64, capacity: src.len() as u64 });
    }
    Ok(())
}

/// Split `range` into consecutive chunks of at most `chunk` bytes.
pub fn chunks(range: Range<u64>, chunk: u64) -> Vec<Range<u64>> {
    let mut out = Vec::new();
    let mut off = range.start;
    while off < range.end {
        let end = (off + chunk.max(1)).min(range.end);
        out.push(off..end);
        off = end;
    }
    out
}

/// Open the store `args` names, bound to `args.bucket`. Nothing is sent over
/// the network here; the first call finds out whether the endpoint answers.
///
/// Errors: [`StoreError::Config`] for missing or malformed settings.
pub fn open(args: &StoreConfig) -> Result<Box<dyn ObjectStore>, StoreError> {
    check_bucket_name(&args.bucket)?;
    if args.direct && args.backend != Backend::Local {
        // Said, not ignored: a record of an http run must not look like an O_DIRECT one.
        return Err(StoreError::Config(format!(
            "{DIRECT} opens local files with O_DIRECT; the {} backend reads no local files: drop {DIRECT}",
            args.backend.name()
        )));
    }
    match args.backend {
        Backend::Local => Ok(Box::new(local::LocalStore::new(args)?)),
        Backend::Http => Ok(Box::new(http::HttpStore::new(args)?)),
        Backend::Rdma if args.rdma_engine == RdmaEngineKind::Libs3rdma => Ok(Box::new(rdma::libs3rdma::EngineStore::new(args)?)),
        Backend::Rdma => Ok(Box::new(rdma::RdmaStore::new(args)?)),
    }
}

/// Bucket names follow S3's rules (3-63 characters of lowercase letters,
/// digits, '-' and '.'), on every backend, so a layout that works on `local`
/// works on S3.
pub fn check_bucket_name(bucket: &str) -> Result<(), StoreError> {
    let ok_chars = bucket.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
    let ok_ends = bucket.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric()) && bucket.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric());
    // S3's further rules: no "..", not an IPv4 address, no reserved prefixes/suffixes.
    let ip_like = bucket.split('.').count() == 4 && bucket.split('.').all(|p| p.parse::<u8>().is_ok());
    let reserved =
        bucket.contains("..") || bucket.starts_with("xn--") || bucket.starts_with("sthree-") || bucket.ends_with("-s3alias") || bucket.ends_with("--ol-s3");
    if (3..=63).contains(&bucket.len()) && ok_chars && ok_ends && !ip_like && !reserved {
        Ok(())
    } else {
        Err(StoreError::Config(format!(
            "invalid bucket name '{bucket}': use 3-63 lowercase letters, digits, '-' or '.', starting and ending with a letter or digit (S3 naming rules: no '..', no IP address, no xn-- prefix)"
        )))
    }
}

/// Keys are checked the same way on every backend: non-empty, at most 1024
/// bytes (S3's limit), no leading '/', no empty, '.' or '..' path segment
/// (the local backend maps segments to directories).
pub fn check_key(key: &str) -> Result<(), StoreError> {
    let bad = |why| Err(StoreError::InvalidKey { key: key.to_string(), why });
    if key.is_empty() {
        return bad("keys must not be empty");
    }
    if key.len() > 1024 {
        return bad("keys must be at most 1024 bytes");
    }
    if key.starts_with('/') {
        return bad("keys must not start with '/'");
    }
    if key.split('/').any(|s| s.is_empty() || s == "." || s == "..") {
        return bad("keys must not contain empty, '.' or '..' segments");
    }
    if key.contains('\0') {
        return bad("keys must not contain NUL");
    }
    if key.trim().is_empty() {
        // A key of one space (" "): aws-sdk-s3 drops such a key while
        // building the request ("key was missing: A required field was not
        // set"); refused here on every backend, so one key set works on all.
        return bad(
            "keys of only whitespace cannot be sent by aws-sdk-s3 (the http and rdma backends' PUT, HEAD and DELETE): use a key with a visible character",
        );
    }
    Ok(())
}

/// Resolve an optional range against an object of `size` bytes, checking the
/// rules every backend shares. Returns the absolute byte range to read.
pub fn resolve_range(key: &str, range: Option<Range<u64>>, size: u64) -> Result<Range<u64>, StoreError> {
    match range {
        None => Ok(0..size),
        Some(r) if r.start < r.end && r.end <= size => Ok(r),
        Some(r) => Err(StoreError::BadRange { key: key.to_string(), range: r, size }),
    }
}

/// Check `dst` can take `len` bytes at offset `at`.
pub fn check_capacity(key: &str, len: u64, at: usize, dst: &Buffer) -> Result<(), StoreError> {
    let needed = len + at as u64;
    if needed > dst.len() as u64 {
        return Err(StoreError::BufferTooSmall { key: key.to_string(), needed, capacity: dst.len() as u64 });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store error keeps the error it came from: an unreachable endpoint's
    /// chain reaches the OS's refusal, with the message unchanged.
    #[tokio::test]
    async fn errors_keep_their_cause_chain() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let endpoint = format!("http://127.0.0.1:{port}");
        for get in ["sdk", "direct"] {
            let flags = ["--backend", "http", "--endpoint", &endpoint, "--access-key", "k", "--secret-key", "s", "--attempts", "1", "--http-get", get];
            let store = open(&crate::cli::store_config_of(&flags)).unwrap();
            let e = store.get_into("k", Some(0..10), &mut Buffer::host(10)).await.unwrap_err();
            assert!(matches!(e, StoreError::Unreachable { .. }), "{get}: {e}");
            let mut chain = Vec::new();
            let mut cur = std::error::Error::source(&e);
            while let Some(c) = cur {
                chain.push(c.to_string());
                cur = c.source();
            }
            assert!(!chain.is_empty(), "{get}: no source kept for {e}");
            assert!(chain.iter().any(|c| c.to_lowercase().contains("refused") || c.contains("connect")), "{get}: {chain:?}");
        }
    }

    /// What each backend says it can do follows its configuration: the
    /// page cache and O_DIRECT's alignment for local files, the ranged-read
    /// size from the http part size and parts in flight.
    #[test]
    fn capabilities_follow_the_configuration() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().to_str().unwrap();
        let local = open(&crate::cli::store_config_of(&["--backend", "local", "--root", root])).unwrap().capabilities();
        assert_eq!((local.name, local.page_cache, local.direct_alignment, local.staged_path), ("local", true, None, TransferPath::Local));
        let direct = open(&crate::cli::store_config_of(&["--backend", "local", "--root", root, "--direct"])).unwrap().capabilities();
        assert_eq!((direct.page_cache, direct.direct_alignment), (false, Some(4096)));
        let flags = [
            "--backend",
            "http",
            "--endpoint",
            "http://127.0.0.1:9",
            "--access-key",
            "k",
            "--secret-key",
            "s",
            "--part-size",
            "4MiB",
            "--part-concurrency",
            "3",
        ];
        let http = open(&crate::cli::store_config_of(&flags)).unwrap().capabilities();
        assert_eq!((http.name, http.page_cache, http.device_writes), ("http", false, false));
        assert_eq!((http.ranged_read, http.staged_path, http.versioned_reads), (Some(12 << 20), TransferPath::HttpStaged, true));
    }

    #[test]
    fn chunk_plan_covers_the_range_exactly() {
        assert_eq!(chunks(10..35, 10), vec![10..20, 20..30, 30..35]);
        assert_eq!(chunks(0..8, 8), vec![0..8]);
        assert!(chunks(5..5, 4).is_empty());
    }

    #[test]
    fn keys_are_checked() {
        assert!(check_key("a/b/c.bin").is_ok());
        for k in ["", "/a", "a//b", "a/../b", "./a", "a/"] {
            assert!(matches!(check_key(k), Err(StoreError::InvalidKey { .. })), "{k:?} accepted");
        }
    }

    #[test]
    fn ranges_are_checked() {
        assert_eq!(resolve_range("k", None, 10).unwrap(), 0..10);
        assert_eq!(resolve_range("k", Some(3..7), 10).unwrap(), 3..7);
        assert!(resolve_range("k", Some(3..3), 10).is_err());
        assert!(resolve_range("k", Some(3..11), 10).is_err());
    }

    #[test]
    fn bucket_names_are_checked() {
        assert!(check_bucket_name("s3rdma-bench").is_ok());
        for b in ["ab", "Upper", "-x-", "a_b", "", "a..b", "192.168.1.1", "xn--abc", "abc-s3alias"] {
            assert!(check_bucket_name(b).is_err(), "{b:?} accepted");
        }
    }
}
