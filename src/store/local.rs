//! The `local` backend: a filesystem directory per bucket under `--root`.
//!
//! Reads are `pread` in large blocks straight into the caller's buffer
//! (optionally O_DIRECT, bypassing the page cache, where the offset is
//! page-aligned); writes go to a temporary name in the same directory, are
//! flushed to the device (fdatasync) and renamed into place, then the
//! directory is synced: a reader never sees a half-written object and a
//! completed PUT survives a crash.

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::ops::Range;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use serde_json::json;

use super::{
    Capabilities, ObjectMeta, ObjectStore, StoreStats, Transfer, TransferPath, Transport, blocking, check_capacity, check_key, check_source, resolve_range,
};
use crate::error::StoreError;
use crate::flag::{DIRECT, ROOT};
use crate::mem::{Buffer, HOST_ALIGN};
use crate::store::{Backend, StoreConfig};

/// Bytes per `pread`/`pwrite` call: large enough that syscall cost is noise.
const IO_BLOCK: usize = 16 << 20;
/// Marker in temporary file names; `list` skips such files.
const TMP_MARK: &str = ".s3rdma-tmp-";

/// This host's name as temporary names carry it (no '-' or '/': the name is
/// split at '-' to find the pid).
fn this_host() -> String {
    static HOST: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        let h = sysinfo::System::host_name().unwrap_or_default();
        let h: String = h.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '.' || *c == '_').collect();
        if h.is_empty() { "host".into() } else { h }
    });
    HOST.clone()
}

/// Remove, once per directory per process, the temporaries of writes that
/// were killed mid-way: a `<name>.s3rdma-tmp-<host>-<pid>-<n>` file whose
/// writer ran on this host and is no longer alive (no `/proc/<pid>`) is
/// provably stale; anything else (another host's, a live writer's, an older
/// name without a host) is left alone.
fn sweep_stale_temporaries(dir: &Path) {
    static SWEPT: std::sync::LazyLock<std::sync::Mutex<std::collections::HashSet<PathBuf>>> = std::sync::LazyLock::new(Default::default);
    if !SWEPT.lock().map(|mut s| s.insert(dir.to_path_buf())).unwrap_or(false) {
        return;
    }
    let Ok(rd) = fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        if stale_temporary(&e.file_name().to_string_lossy()) {
            let _ = fs::remove_file(e.path());
        }
    }
}

/// Whether file `name` is a temporary whose writer ran on this host and is
/// no longer alive (the rule of [`sweep_stale_temporaries`]).
fn stale_temporary(name: &str) -> bool {
    let Some((_, tail)) = name.split_once(TMP_MARK) else { return false };
    let mut parts = tail.split('-');
    let (Some(h), Some(pid)) = (parts.next(), parts.next().and_then(|p| p.parse::<u32>().ok())) else { return false };
    h == this_host() && pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists()
}

/// A bucket directory on a local filesystem.
#[derive(Debug)]
pub struct LocalStore {
    root: PathBuf,
    bucket: String,
    dir: PathBuf,
    direct: bool,
    io_threads: usize,
    io_threads_source: &'static str,
    file_io: super::FileIo,
    /// Keys one listing may hold ([`super::listing::ListBound`]; directories
    /// read are not requests, so only the key bound applies).
    list_max_keys: u64,
    /// Bytes read with O_DIRECT, and bytes read through the page cache while
    /// `--direct` was asked (offset or destination not 4 KiB-aligned).
    direct_bytes: AtomicU64,
    direct_fallback_bytes: AtomicU64,
}

impl LocalStore {
    /// Read `range` of `key` into `dst[at..]`; with `pin`, only from that
    /// version of the file, checked before anything is read (a file replaced
    /// or cut short meanwhile is a change, not a bad range).
    async fn read(
        &self,
        key: &str,
        range: Option<Range<u64>>,
        dst: &mut Buffer,
        at: usize,
        pin: Option<&super::ObjectVersion>,
    ) -> Result<Transfer, StoreError> {
        let path = self.path(key)?;
        self.bucket_exists()?;
        let md = fs::metadata(&path).map_err(|e| self.io("cannot stat", key, e))?;
        if !md.is_file() {
            return Err(self.not_found(key));
        }
        if let Some(p) = pin {
            super::check_version(key, &self.location(), p, Some(&file_version(&md)))?;
        }
        let range = resolve_range(key, range, md.len())?;
        check_capacity(key, range.end - range.start, at, dst)?;
        let bytes = if range.is_empty() { 0 } else { blocking(|| self.read_range(key, &path, range, dst, at))? };
        Ok(Transfer { version: Some(file_version(&md)), ..Transfer::of(bytes, TransferPath::Local) })
    }

    /// [`Transport::read_to_device`]: every part's file checked as a read
    /// checks it (present, of the pinned version, long enough), loaded on
    /// the reader threads, then checked again: a file replaced or rewritten
    /// during the load is [`StoreError::Changed`], since its bytes may mix
    /// two versions. With `check`, the readers hash what they stage.
    fn load_files(
        &self,
        parts: &[super::StagedPart],
        dsts: &mut [&mut crate::mem::DeviceBuffer],
        check: Option<&super::StagedCheck>,
    ) -> Result<super::DeviceLoad, StoreError> {
        self.bucket_exists()?;
        let mut files = Vec::with_capacity(parts.len());
        let mut versions = Vec::with_capacity(parts.len());
        for p in parts {
            let path = self.path(&p.key)?;
            let md = fs::metadata(&path).map_err(|e| self.io("cannot stat", &p.key, e))?;
            if !md.is_file() {
                return Err(self.not_found(&p.key));
            }
            if let Some(v) = &p.version {
                super::check_version(&p.key, &self.location(), v, Some(&file_version(&md)))?;
            }
            let range = resolve_range(&p.key, Some(p.range.clone()), md.len())?;
            versions.push(file_version(&md));
            files.push(super::file_pipeline::FilePart { key: p.key.clone(), path, range, at: p.at });
        }
        let (bytes, timeline, checked) =
            super::file_pipeline::load(&files, dsts, self.io_threads, self.file_io, check).map_err(|e| self.file_load_error(&files, e))?;
        for (f, v) in files.iter().zip(&versions) {
            let now = fs::metadata(&f.path).map_err(|e| self.io("cannot stat", &f.key, e))?;
            super::check_version(&f.key, &self.location(), v, Some(&file_version(&now)))?;
        }
        let transfers = bytes.into_iter().zip(versions).map(|(b, v)| Transfer { version: Some(v), ..Transfer::of(b, TransferPath::Local) }).collect();
        Ok(super::DeviceLoad { transfers, timeline, checked })
    }

    /// A file load's error as the store's: the part's key and this bucket named.
    fn file_load_error(&self, files: &[super::file_pipeline::FilePart], e: super::file_pipeline::FileLoadError) -> StoreError {
        use super::file_pipeline::FileLoadError as E;
        let key = |k: usize| files.get(k).map_or_else(String::new, |f| f.key.clone());
        match e {
            E::Io(k, what, source) => self.io(what, &key(k), source),
            E::Short(k, got) => {
                StoreError::ShortBody { key: key(k), location: self.location(), got, expected: files.get(k).map_or(0, |f| f.range.end - f.range.start) }
            }
            E::Cuda(k, detail) => StoreError::Other { op: "GET", key: key(k), location: self.location(), detail, cause: None },
            E::Config(m) => StoreError::Config(m),
        }
    }

    /// Bind to `<root>/<bucket>`. The directory need not exist yet.
    pub fn new(args: &StoreConfig) -> Result<Self, StoreError> {
        let root =
            std::path::absolute(&args.root).map_err(|e| StoreError::Io { context: format!("cannot resolve {ROOT} {}", args.root.display()), source: e })?;
        let dir = root.join(&args.bucket);
        Ok(LocalStore {
            root,
            bucket: args.bucket.clone(),
            dir,
            direct: args.direct,
            io_threads: args.io_threads as usize,
            io_threads_source: args.io_threads_source,
            file_io: args.file_io,
            list_max_keys: args.list_max_keys,
            direct_bytes: Default::default(),
            direct_fallback_bytes: Default::default(),
        })
    }

    fn path(&self, key: &str) -> Result<PathBuf, StoreError> {
        check_key(key)?;
        if key.contains(TMP_MARK) {
            return Err(StoreError::InvalidKey { key: key.into(), why: "keys must not contain '.s3rdma-tmp-'" });
        }
        Ok(self.dir.join(key))
    }

    fn not_found(&self, key: &str) -> StoreError {
        StoreError::NotFound { bucket: self.bucket.clone(), key: key.into(), location: self.location() }
    }

    fn io(&self, what: &str, key: &str, e: std::io::Error) -> StoreError {
        if e.kind() == ErrorKind::NotFound {
            return self.not_found(key);
        }
        StoreError::Io { context: format!("{what} '{key}' in {}", self.dir.display()), source: e }
    }

    /// The bucket's directory is there. A `--root` that exists but is no
    /// directory (a regular file) is said as such: no `--prepare` can help it.
    fn bucket_exists(&self) -> Result<(), StoreError> {
        if self.dir.is_dir() {
            return Ok(());
        }
        if self.root_is_no_directory() {
            return Err(StoreError::Config(format!("{ROOT} {} is not a directory: pass a directory (created on first use)", self.root.display())));
        }
        Err(StoreError::NoSuchBucket { bucket: self.bucket.clone(), location: self.root.display().to_string() })
    }

    /// `--root` exists but is no directory: nothing can be created in it.
    fn root_is_no_directory(&self) -> bool {
        self.root.exists() && !self.root.is_dir()
    }

    /// Read `range` of `path` into `dst` with pread, O_DIRECT when asked and the
    /// offset is page-aligned (the padded tail of the buffer takes the last
    /// partial block; the file's end shortens the read).
    fn read_range(&self, key: &str, path: &Path, range: Range<u64>, dst: &mut Buffer, at: usize) -> Result<u64, StoreError> {
        let len = (range.end - range.start) as usize;
        let direct = self.direct && range.start.is_multiple_of(HOST_ALIGN as u64) && at.is_multiple_of(HOST_ALIGN);
        let mut opts = OpenOptions::new();
        opts.read(true);
        if direct {
            opts.custom_flags(libc::O_DIRECT);
        }
        let file = opts.open(path).map_err(|e| {
            if direct && e.raw_os_error() == Some(libc::EINVAL) {
                StoreError::Io { context: format!("the filesystem under {} does not support O_DIRECT: drop {DIRECT}", self.dir.display()), source: e }
            } else {
                self.io("cannot open", key, e)
            }
        })?;
        let buf =
            &mut dst.as_host_mut_padded().ok_or_else(|| StoreError::Config("device buffers go through store::read_into (the staged pipeline)".into()))?[at..];
        // O_DIRECT reads whole blocks; the tail block may run into the padding.
        let want = if direct { (len.div_ceil(HOST_ALIGN) * HOST_ALIGN).min(buf.len()) } else { len };
        let want = want.min(buf.len());
        // Split into IO_BLOCK pieces; with --io-threads > 1 the pieces are
        // read by that many scoped threads (disjoint slices of one buffer).
        let threads = self.io_threads.min(want.div_ceil(IO_BLOCK)).max(1);
        let read_piece = |off: usize, piece: &mut [u8]| -> Result<usize, StoreError> {
            let mut done = 0;
            while done < piece.len() {
                let got = file.read_at(&mut piece[done..], range.start + (off + done) as u64).map_err(|e| self.io("cannot read", key, e))?;
                if got == 0 {
                    break;
                }
                done += got;
            }
            Ok(done)
        };
        let pieces: Vec<(usize, &mut [u8])> = buf[..want].chunks_mut(IO_BLOCK).enumerate().map(|(i, p)| (i * IO_BLOCK, p)).collect();
        let got: usize = if threads == 1 {
            let mut total = 0;
            for (off, p) in pieces {
                let n = read_piece(off, p)?;
                total += n;
                if n < IO_BLOCK {
                    break;
                }
            }
            total
        } else {
            let mut lanes: Vec<Vec<(usize, &mut [u8])>> = (0..threads).map(|_| Vec::new()).collect();
            for (i, p) in pieces.into_iter().enumerate() {
                lanes[i % threads].push(p);
            }
            let results: Vec<Result<usize, StoreError>> = std::thread::scope(|sc| {
                let handles: Vec<_> =
                    lanes.into_iter().map(|lane| sc.spawn(|| lane.into_iter().try_fold(0, |acc, (off, p)| read_piece(off, p).map(|n| acc + n)))).collect();
                handles.into_iter().map(|h| h.join().expect("read thread")).collect()
            });
            let mut total = 0;
            for r in results {
                total += r?;
            }
            total
        };
        let done = got.min(len);
        if done < len {
            return Err(StoreError::ShortBody { key: key.into(), location: self.location(), got: done as u64, expected: len as u64 });
        }
        if self.direct {
            let counter = if direct { &self.direct_bytes } else { &self.direct_fallback_bytes };
            counter.fetch_add(len as u64, Ordering::Relaxed);
        }
        Ok(len as u64)
    }

    fn write_atomic(&self, key: &str, path: &Path, data: &[u8]) -> Result<(), StoreError> {
        let parent = path.parent().expect("object path has a parent");
        fs::create_dir_all(parent).map_err(|e| self.io("cannot create directory for", key, e))?;
        let name = path.file_name().expect("object path has a name").to_string_lossy();
        // Unique per process (pid) and per call (counter): no two writers share a temp file.
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let seq = SEQ.fetch_add(1, Ordering::Relaxed);
        sweep_stale_temporaries(parent);
        let tmp = parent.join(format!(".{name}{TMP_MARK}{}-{}-{seq}", this_host(), std::process::id()));
        let result = (|| {
            // A concurrent delete may remove the (then empty) directory
            // between create_dir_all and here: make it again.
            let mut tries = 0;
            let mut f = loop {
                match File::create(&tmp) {
                    Err(e) if e.kind() == ErrorKind::NotFound && tries < 3 => {
                        tries += 1;
                        fs::create_dir_all(parent)?;
                    }
                    r => break r?,
                }
            };
            for chunk in data.chunks(IO_BLOCK) {
                f.write_all(chunk)?;
            }
            // Durable before visible, like an S3 PUT's success: data, then
            // the rename, then the directory entry (a checkpoint that a
            // crash can lose is not a checkpoint).
            f.sync_data()?;
            fs::rename(&tmp, path)?;
            File::open(parent)?.sync_all()
        })();
        if let Err(e) = result {
            let _ = fs::remove_file(&tmp);
            return Err(self.io("cannot write", key, e));
        }
        Ok(())
    }
}

#[async_trait]
impl ObjectStore for LocalStore {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            name: Backend::Local.name(),
            page_cache: !self.direct,
            device_writes: false,
            staged_path: TransferPath::Local,
            ranged_read: Some(8 << 20),
            direct_alignment: self.direct.then_some(HOST_ALIGN as u64),
            versioned_reads: true,
            server: false,
        }
    }
    fn bucket(&self) -> &str {
        &self.bucket
    }
    fn location(&self) -> String {
        self.root.display().to_string()
    }
    async fn ensure_bucket(&self, create: bool) -> Result<(), StoreError> {
        if create && !self.dir.is_dir() && !self.root_is_no_directory() {
            fs::create_dir_all(&self.dir)
                .map_err(|e| StoreError::Io { context: format!("cannot create bucket directory {}", self.dir.display()), source: e })?;
        }
        self.bucket_exists()
    }
    async fn head(&self, key: &str) -> Result<ObjectMeta, StoreError> {
        let path = self.path(key)?;
        self.bucket_exists()?;
        let md = fs::metadata(&path).map_err(|e| self.io("cannot stat", key, e))?;
        if !md.is_file() {
            return Err(self.not_found(key));
        }
        Ok(ObjectMeta { key: key.into(), size: md.len() })
    }
    async fn get_into_at(&self, key: &str, range: Option<Range<u64>>, dst: &mut Buffer, at: usize) -> Result<Transfer, StoreError> {
        self.read(key, range, dst, at, None).await
    }
    async fn get_into_version(
        &self,
        key: &str,
        range: Option<Range<u64>>,
        dst: &mut Buffer,
        at: usize,
        version: &super::ObjectVersion,
    ) -> Result<Transfer, StoreError> {
        self.read(key, range, dst, at, Some(version)).await
    }
    async fn put_range(&self, key: &str, src: &Buffer, range: Range<usize>) -> Result<Transfer, StoreError> {
        let path = self.path(key)?;
        self.bucket_exists()?;
        check_source(key, src, &range)?;
        let data = &src
            .as_host()
            .ok_or_else(|| StoreError::Config("device memory is written through store::write_from (staged through pinned memory)".into()))?[range];
        blocking(|| self.write_atomic(key, &path, data))?;
        Ok(Transfer::of(data.len() as u64, TransferPath::Local))
    }
    async fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>, StoreError> {
        self.bucket_exists()?;
        let mut out = Vec::new();
        // Walk only below the prefix's directory part (a rank polling its
        // step must not walk a whole dataset), unless it is not a plain path.
        let dir_part = prefix.rfind('/').map_or("", |i| &prefix[..i]);
        let plain = !dir_part.is_empty() && dir_part.split('/').all(|c| !c.is_empty() && c != "." && c != "..");
        let mut stack = vec![if plain { self.dir.join(dir_part) } else { self.dir.clone() }];
        let bound = super::listing::ListBound::new(prefix, self.dir.display().to_string(), self.list_max_keys);
        while let Some(dir) = stack.pop() {
            let entries = match fs::read_dir(&dir) {
                Ok(e) => e,
                // Not there (any more): no keys under it (a delete removes emptied directories).
                Err(e) if e.kind() == ErrorKind::NotFound => continue,
                Err(e) => return Err(StoreError::Io { context: format!("cannot list {}", dir.display()), source: e }),
            };
            for entry in entries {
                let entry = entry.map_err(|e| StoreError::Io { context: format!("cannot list {}", dir.display()), source: e })?;
                let ft = entry.file_type().map_err(|e| StoreError::Io { context: format!("cannot stat {}", entry.path().display()), source: e })?;
                let path = entry.path();
                if ft.is_dir() {
                    stack.push(path);
                } else if ft.is_file() {
                    let rel = path.strip_prefix(&self.dir).expect("under bucket dir");
                    let key = rel.to_string_lossy().into_owned();
                    if key.contains(TMP_MARK) {
                        // A dead writer's temporary, alone in its directory, is
                        // reached by no delete: the listing that passes it removes it.
                        if stale_temporary(&entry.file_name().to_string_lossy()) {
                            let _ = fs::remove_file(&path);
                        }
                        continue;
                    }
                    if !key.starts_with(prefix) {
                        continue;
                    }
                    // Deleted since the directory was read: not listed.
                    let Ok(md) = entry.metadata() else { continue };
                    out.push(ObjectMeta { key, size: md.len() });
                    bound.keys(out.len())?;
                }
            }
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }
    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        let path = self.path(key)?;
        self.bucket_exists()?;
        // Dead writers' temporaries would keep the directory (below) alive:
        // a run whose writers were killed mid-PUT is cleared by deletes.
        if let Some(parent) = path.parent() {
            sweep_stale_temporaries(parent);
        }
        match fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(self.io("cannot delete", key, e)),
        }
        // Keys are flat in S3: a directory that held only deleted keys goes
        // too, up to the bucket (remove_dir refuses a non-empty one, and a
        // concurrent writer makes it again: `write_atomic`).
        let mut dir = path.parent();
        while let Some(d) = dir {
            if d == self.dir || !d.starts_with(&self.dir) || fs::remove_dir(d).is_err() {
                break;
            }
            dir = d.parent();
        }
        Ok(())
    }
}

impl Transport for LocalStore {
    fn describe(&self) -> serde_json::Value {
        json!({"backend": "local", "root": self.root, "bucket": self.bucket, "direct": self.direct,
               "io_block_bytes": IO_BLOCK, "io_threads": self.io_threads, "io_threads_from": self.io_threads_source, "file_io": self.file_io.name()})
    }
    /// With `--direct`: `direct_read_bytes` (O_DIRECT) and
    /// `direct_fallback_bytes` (read through the page cache because the file
    /// offset or the destination was not 4 KiB-aligned, e.g. a safetensors data
    /// section, which starts at 8 + header length).
    fn stats(&self) -> StoreStats {
        let mut s = StoreStats::default();
        if self.direct {
            s.0.insert("direct_read_bytes".into(), self.direct_bytes.load(Ordering::Relaxed));
            s.0.insert("direct_fallback_bytes".into(), self.direct_fallback_bytes.load(Ordering::Relaxed));
        }
        s
    }
    /// Reader threads of their own ([`super::file_pipeline`]), `--io-threads`
    /// of them; with `--direct`, `None`: O_DIRECT reads keep the staged
    /// pipeline, which aligns them.
    fn read_to_device(
        &self,
        parts: &[super::StagedPart],
        dsts: &mut [&mut crate::mem::DeviceBuffer],
        check: Option<&super::StagedCheck>,
    ) -> Option<Result<super::DeviceLoad, StoreError>> {
        (!self.direct).then(|| blocking(|| self.load_files(parts, dsts, check)))
    }
    fn stats_summary(&self, in_windows: &StoreStats) -> Option<String> {
        let fallback = in_windows.get("direct_fallback_bytes");
        (fallback > 0).then(|| {
            format!(
                "{DIRECT}: {fallback} of {} bytes read through the page cache, not O_DIRECT: their file offsets were not 4 KiB-aligned (store_stats.direct_fallback_bytes)",
                fallback + in_windows.get("direct_read_bytes")
            )
        })
    }
}

/// A local file's version: inode and modification time (ns), and its size.
/// Every write here goes to a temporary name and is renamed over the key,
/// so a replaced object has a new inode.
fn file_version(md: &fs::Metadata) -> super::ObjectVersion {
    use std::os::unix::fs::MetadataExt;
    super::ObjectVersion { tag: Some(format!("inode {} mtime {}.{:09}", md.ino(), md.mtime(), md.mtime_nsec()).into()), size: md.len() }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A killed save's temporary is removed by the next write into its
    /// directory when its writer was on this host and is gone; another
    /// host's, a live writer's and an old-style name stay.
    #[test]
    fn stale_temporaries_of_dead_writers_here_are_swept_and_nothing_else() {
        let d = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let dir = d.path().join("bkt/ckpt");
        fs::create_dir_all(&dir).unwrap();
        let host = this_host();
        let names = [
            format!(".c0{TMP_MARK}{host}-{dead}-0"),
            format!(".c1{TMP_MARK}otherhost-{dead}-0"),
            format!(".c2{TMP_MARK}{host}-{}-0", std::process::id()),
            format!(".c3{TMP_MARK}{dead}-0"),
        ];
        for n in &names {
            fs::write(dir.join(n), b"partial").unwrap();
        }
        sweep_stale_temporaries(&dir);
        let left: std::collections::BTreeSet<String> = fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        assert_eq!(left, names[1..].iter().cloned().collect(), "only the dead local writer's temporary goes");
    }

    /// A dead writer's temporary alone in its directory (a rank killed in
    /// the middle of its first marker PUT: no key there for a delete to
    /// reach) is removed by the next listing that walks it, and is never
    /// listed; a live writer's stays.
    #[tokio::test]
    async fn a_listing_removes_a_dead_writers_lone_temporary() {
        let d = tempfile::tempdir().unwrap();
        let mut cfg = crate::cli::store_config_of(&["--root", d.path().to_str().unwrap(), "--bucket", "bkt"]);
        cfg.backend = crate::store::Backend::Local;
        let store = LocalStore::new(&cfg).unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let (lone, live) = (d.path().join("bkt/run/step-7"), d.path().join("bkt/run/step-8"));
        fs::create_dir_all(&lone).unwrap();
        fs::create_dir_all(&live).unwrap();
        let host = this_host();
        fs::write(lone.join(format!(".r00000{TMP_MARK}{host}-{dead}-3")), b"").unwrap();
        fs::write(live.join(format!(".r00001{TMP_MARK}{host}-{}-4", std::process::id())), b"").unwrap();
        assert!(store.list("run/").await.unwrap().is_empty());
        assert_eq!(fs::read_dir(&lone).unwrap().count(), 0, "the dead writer's temporary went");
        assert_eq!(fs::read_dir(&live).unwrap().count(), 1, "a live writer's stays");
    }

    /// A listing of more keys than `list_max_keys` stops with the bound's
    /// error; one of exactly that many keys is whole.
    #[tokio::test]
    async fn a_listing_stops_at_its_key_bound() {
        let d = tempfile::tempdir().unwrap();
        let mut cfg = crate::cli::store_config_of(&["--root", d.path().to_str().unwrap(), "--bucket", "bkt", "--list-max-keys", "3"]);
        cfg.backend = crate::store::Backend::Local;
        let store = LocalStore::new(&cfg).unwrap();
        fs::create_dir_all(d.path().join("bkt/p/q")).unwrap();
        for k in ["p/a", "p/b", "p/q/c"] {
            fs::write(d.path().join("bkt").join(k), b"x").unwrap();
        }
        assert_eq!(store.list("p/").await.unwrap().len(), 3);
        fs::write(d.path().join("bkt/p/q/d"), b"x").unwrap();
        let e = store.list("p/").await.unwrap_err();
        assert!(matches!(e, StoreError::ListTooLong { keys: 4, max_keys: 3, .. }), "{e}");
    }
}
