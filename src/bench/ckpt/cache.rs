//! Warm and cold restores (`--restore-cache`, `--cold`): whether a timed
//! restore reads the checkpoint from the page cache its save left behind, or
//! from the device.
//!
//! MLPerf Storage clears the client's caches between a checkpoint's write and
//! its read ("Clearing Caches" in
//! <https://github.com/mlcommons/storage/blob/main/checkpointing/README.md>).
//! On the local backend a cold restore takes, before each timed restore and
//! outside its window, the first of these that this process is permitted and
//! that works ([`make_cold`]):
//!
//! 1. `sync`, then `1` into `/proc/sys/vm/drop_caches` (root; it frees the
//!    whole host's *clean* page cache, hence the sync first);
//! 2. `fdatasync`, then `posix_fadvise(POSIX_FADV_DONTNEED)` on every file of
//!    the checkpoint (anyone who can open them; advice, which the kernel
//!    follows for clean pages nobody maps or locks);
//! 3. O_DIRECT reads (the local store's `--direct`), which bypass the cache.
//!
//! 1 and 2 are checked: `mincore` over a read-only mapping of each file
//! counts its pages still cached, and more than 1 % left moves on to the next
//! method (tmpfs, whose pages are its storage, keeps them all). That count is
//! recorded for warm restores too. Over http and rdma the cache is the
//! server's: not controlled from here, and the row says so.
//!
//! Written on `libc` (already a dependency) rather than a crate: it is a
//! handful of system calls (sync, posix_fadvise, mmap + mincore), and the
//! crates around them (e.g. <https://docs.rs/mincore>: residency alone) neither
//! evict nor drop caches.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::plan::RestoreCache;
use crate::error::{Error, Result};
use crate::flag::{CHUNK, DIRECT, RESTORE_CACHE, ROOT};
use crate::store::{ObjectStore, blocking};

/// The sysctl that drops the page cache (root only).
pub(crate) const DROP_CACHES: &str = "/proc/sys/vm/drop_caches";
/// A restore that reads what the save left cached.
pub(crate) const WARM: &str = "warm";
/// A restore over http or rdma: the page cache is the server's.
pub(crate) const SERVER: &str = "server cache not controlled";

/// A way to make a restore cold, in the order they are tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Method {
    DropCaches,
    Fadvise,
    Direct,
}

impl Method {
    /// The label in the record and the table.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Method::DropCaches => "dropped (drop_caches)",
            Method::Fadvise => "evicted (fadvise DONTNEED)",
            Method::Direct => "bypassed (O_DIRECT)",
        }
    }
}

/// How one rank's restore met the page cache (its `per_rank` figures).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CacheFigures {
    /// `warm`, `cold`, or `unknown` (a cold restore over http or rdma).
    pub cache: String,
    /// `warm`, `dropped (drop_caches)`, `evicted (fadvise DONTNEED)`,
    /// `bypassed (O_DIRECT)` or `server cache not controlled`.
    pub method: String,
    /// Files of the checkpoint on the local backend (0 elsewhere).
    pub files: u64,
    /// Their bytes.
    pub file_bytes: u64,
    /// Bytes of them in this host's page cache as the restore began
    /// (`mincore`); `None` where the kernel does not say (not local, or files
    /// this process neither owns nor may write).
    pub cached_bytes: Option<u64>,
    /// The methods tried before the one used, and why each was passed over.
    pub passed_over: Vec<String>,
    /// Seconds spent evicting (before the timed window, not in it).
    pub prepare_s: f64,
    /// An O_DIRECT restore: bytes it read with O_DIRECT, and bytes it read
    /// through the page cache instead (offset or buffer not 4 KiB-aligned:
    /// `read_range` in src/store/local.rs); `None` for the other methods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direct_read_bytes: Option<u64>,
    /// See `direct_read_bytes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direct_fallback_bytes: Option<u64>,
}

/// What this process may do to the host's page cache (tests stand in for it).
pub(crate) trait CacheOps {
    /// `sync`, then `1` into the drop_caches file.
    fn drop_caches(&self) -> io::Result<()>;
    /// `fdatasync`, then `posix_fadvise(POSIX_FADV_DONTNEED)` over all of `path`.
    fn evict(&self, path: &Path) -> io::Result<()>;
    /// Bytes of `path` in the page cache; `None` when the kernel would not say.
    fn cached(&self, path: &Path) -> io::Result<Option<u64>>;
    /// Open `path` with O_DIRECT (refused where the filesystem cannot).
    fn direct(&self, path: &Path) -> io::Result<()>;
}

/// This host; its drop_caches sysctl at `drop_caches` ([`DROP_CACHES`]; tests point it elsewhere).
#[derive(Debug)]
pub(crate) struct Host {
    pub(crate) drop_caches: PathBuf,
}

impl CacheOps for Host {
    fn drop_caches(&self) -> io::Result<()> {
        // Opening is the permission check (root, and /proc/sys not mounted
        // read-only): no host-wide sync unless the drop can follow.
        let mut f =
            OpenOptions::new().write(true).open(&self.drop_caches).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", self.drop_caches.display())))?;
        // SAFETY: sync(2) takes no arguments and cannot fail.
        unsafe { libc::sync() };
        f.write_all(b"1").map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", self.drop_caches.display())))
    }

    fn evict(&self, path: &Path) -> io::Result<()> {
        let f = File::open(path)?;
        // DONTNEED drops clean pages only: write back first (the save already did).
        f.sync_data()?;
        // SAFETY: a valid descriptor; offset 0 and length 0 mean the whole file.
        match unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) } {
            0 => Ok(()),
            e => Err(io::Error::from_raw_os_error(e)),
        }
    }

    fn cached(&self, path: &Path) -> io::Result<Option<u64>> {
        let f = File::open(path)?;
        let md = f.metadata()?;
        // The kernel reports a file's cached pages only to its owner or to a
        // process that may write it (can_do_mincore in
        // https://github.com/torvalds/linux/blob/master/mm/mincore.c); to
        // anyone else every page looks evicted, which would prove nothing.
        // SAFETY: geteuid cannot fail.
        let euid = unsafe { libc::geteuid() };
        if euid != 0 && md.uid() != euid && OpenOptions::new().write(true).open(path).is_err() {
            return Ok(None);
        }
        let len = usize::try_from(md.len()).map_err(|_| io::Error::other("file larger than the address space"))?;
        if len == 0 {
            return Ok(Some(0));
        }
        // SAFETY: sysconf cannot fail for _SC_PAGESIZE.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as usize;
        // SAFETY: a fresh read-only shared mapping of `len` bytes of our descriptor, unmapped below.
        let addr = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, f.as_raw_fd(), 0) };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let mut vec = vec![0u8; len.div_ceil(page)];
        // SAFETY: `addr` maps `len` bytes; `vec` has one byte per page of them.
        let rc = unsafe { libc::mincore(addr, len, vec.as_mut_ptr()) };
        let err = io::Error::last_os_error();
        // SAFETY: the mapping made above, used no more.
        unsafe { libc::munmap(addr, len) };
        if rc != 0 {
            return Err(err);
        }
        let pages = vec.iter().filter(|b| *b & 1 != 0).count() as u64;
        Ok(Some((pages * page as u64).min(md.len())))
    }

    fn direct(&self, path: &Path) -> io::Result<()> {
        OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(path).map(drop)
    }
}

/// The outcome of [`make_cold`].
#[derive(Debug)]
pub(crate) struct Cold {
    pub(crate) method: Method,
    /// Bytes still cached after it (`None`: the kernel would not say).
    pub(crate) cached: Option<u64>,
    /// The methods tried first, and why each was passed over.
    pub(crate) passed_over: Vec<String>,
}

/// Bytes of `files` in the page cache; `None` if any file's count is unknown.
fn cached_of(ops: &dyn CacheOps, files: &[(PathBuf, u64)]) -> Option<u64> {
    files.iter().try_fold(0u64, |sum, (p, _)| ops.cached(p).ok().flatten().map(|c| sum + c))
}

/// Make the next read of `files` come from the device: the first of
/// drop_caches, fadvise DONTNEED and O_DIRECT, from `start` on, that `ops`
/// permits and that leaves at most 1 % of the bytes cached (where the kernel
/// says; advice it does not report on is taken as followed).
///
/// Errors: every method failed; the message says why each did.
pub(crate) fn make_cold(start: Method, files: &[(PathBuf, u64)], ops: &dyn CacheOps) -> std::result::Result<Cold, String> {
    let total: u64 = files.iter().map(|f| f.1).sum();
    let gone = |c: Option<u64>| c.is_none_or(|c| c.saturating_mul(100) <= total);
    let left = |what: &str, c: Option<u64>| format!("{what}: {} of {total} bytes still cached after it", c.unwrap_or(0));
    let mut passed_over = Vec::new();
    if start <= Method::DropCaches {
        match ops.drop_caches() {
            Ok(()) => {
                let c = cached_of(ops, files);
                if gone(c) {
                    return Ok(Cold { method: Method::DropCaches, cached: c, passed_over });
                }
                passed_over.push(left("drop_caches", c));
            }
            Err(e) => passed_over.push(format!("drop_caches: {e}")),
        }
    }
    if start <= Method::Fadvise {
        match files.iter().try_for_each(|(p, _)| ops.evict(p).map_err(|e| format!("{}: {e}", p.display()))) {
            Ok(()) => {
                let c = cached_of(ops, files);
                if gone(c) {
                    return Ok(Cold { method: Method::Fadvise, cached: c, passed_over });
                }
                passed_over.push(left("fadvise DONTNEED", c));
            }
            Err(e) => passed_over.push(format!("fadvise DONTNEED: {e}")),
        }
    }
    match files.first().map_or(Ok(()), |(p, _)| ops.direct(p)) {
        Ok(()) => Ok(Cold { method: Method::Direct, cached: cached_of(ops, files), passed_over }),
        Err(e) => {
            passed_over.push(format!("O_DIRECT: {e}"));
            Err(passed_over.join("; "))
        }
    }
}

/// How this run's restores meet the cache, made once from the flags.
#[derive(Debug)]
pub(crate) struct Plan {
    pub(crate) asked: RestoreCache,
    /// The bucket directory of the local backend (`None` over http and rdma).
    pub(crate) dir: Option<PathBuf>,
    /// `--direct`: every read of the store is O_DIRECT already.
    pub(crate) direct: bool,
    /// `--chunk`: O_DIRECT reads into a host buffer need it page-aligned.
    pub(crate) chunk: u64,
    pub(crate) host: Host,
}

/// Before one timed restore of checkpoint `key`: make it cold if asked (see
/// the module), and say how the restore meets the cache. The bool: read this
/// restore through an O_DIRECT store.
///
/// Errors: the checkpoint's listing; a cold restore that no method can give,
/// or that needs O_DIRECT with a `--chunk` O_DIRECT cannot read.
pub(crate) async fn prepare(plan: &Plan, store: &dyn ObjectStore, key: &str) -> Result<(CacheFigures, bool)> {
    let t0 = Instant::now();
    let cold = plan.asked != RestoreCache::Warm;
    let mut fig = CacheFigures {
        cache: if cold { "cold" } else { WARM }.into(),
        method: WARM.into(),
        files: 0,
        file_bytes: 0,
        cached_bytes: None,
        passed_over: Vec::new(),
        prepare_s: 0.0,
        direct_read_bytes: None,
        direct_fallback_bytes: None,
    };
    let Some(dir) = &plan.dir else {
        fig.method = SERVER.into();
        if cold {
            fig.cache = "unknown".into();
        }
        return Ok((fig, false));
    };
    let objs = store.list(&format!("{key}.")).await.map_err(|e| Error::Runtime(format!("listing checkpoint {key} to evict it from the page cache: {e}")))?;
    let files: Vec<(PathBuf, u64)> = objs.iter().map(|o| (dir.join(&o.key), o.size)).collect();
    fig.files = files.len() as u64;
    fig.file_bytes = files.iter().map(|f| f.1).sum();
    let host = &plan.host;
    let start = match plan.asked {
        // --direct: every read bypasses the cache already.
        _ if plan.direct => Method::Direct,
        RestoreCache::Warm => {
            fig.cached_bytes = blocking(|| cached_of(host, &files));
            return Ok((fig, false));
        }
        RestoreCache::Cold => Method::DropCaches,
        RestoreCache::Fadvise => Method::Fadvise,
        RestoreCache::Direct => Method::Direct,
    };
    let c = blocking(|| make_cold(start, &files, host)).map_err(|why| {
        Error::Usage(format!(
            "{RESTORE_CACHE} {}: the restore cannot be made to read from the device under {} ({why}): put {ROOT} on a disk filesystem (not tmpfs), run as root, or use {RESTORE_CACHE} warm",
            if plan.direct { format!("with {DIRECT}") } else { asked_name(plan.asked).to_string() },
            dir.display()
        ))
    })?;
    if c.method == Method::Direct && !plan.direct && !plan.chunk.is_multiple_of(crate::mem::HOST_ALIGN as u64) {
        return Err(Error::Usage(unaligned_chunk(plan.asked, plan.chunk, &format!(" ({})", c.passed_over.join("; ")))));
    }
    fig.cache = "cold".into();
    fig.method = c.method.label().into();
    fig.cached_bytes = c.cached;
    fig.passed_over = c.passed_over;
    fig.prepare_s = t0.elapsed().as_secs_f64();
    // With --direct the run's own store reads O_DIRECT already.
    Ok((fig, c.method == Method::Direct && !plan.direct))
}

/// Bytes the local stores `stores` read with O_DIRECT so far, and those
/// that fell back to the page cache (their `--direct` counters).
pub(crate) fn direct_counts(stores: &[&dyn ObjectStore]) -> (u64, u64) {
    stores.iter().map(|s| s.stats()).fold((0, 0), |(d, f), st| (d + st.get("direct_read_bytes"), f + st.get("direct_fallback_bytes")))
}

/// The error for O_DIRECT restores of a `--chunk` that is not page-aligned (`why`: how O_DIRECT came to be chosen).
pub(crate) fn unaligned_chunk(asked: RestoreCache, chunk: u64, why: &str) -> String {
    format!(
        "{RESTORE_CACHE} {}: the restore reads with O_DIRECT{why}, which needs {CHUNK} to be a multiple of 4KiB (it is {chunk} bytes): give e.g. {CHUNK} 64MiB",
        asked_name(asked)
    )
}

/// `--restore-cache`'s value as the flag spells it.
pub(crate) fn asked_name(a: RestoreCache) -> &'static str {
    match a {
        RestoreCache::Warm => "warm",
        RestoreCache::Cold => "cold",
        RestoreCache::Fadvise => "fadvise",
        RestoreCache::Direct => "direct",
    }
}

#[cfg(test)]
#[path = "cache_tests.rs"]
mod tests;
