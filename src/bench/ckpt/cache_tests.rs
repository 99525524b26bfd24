//! The cold-restore chain (`cache.rs`) without root: a file of the test's
//! own stands in for /proc/sys/vm/drop_caches, real files on the disk the
//! tests run from are evicted with the real fadvise, and a double refuses
//! what a host may refuse.

use super::*;
use std::cell::Cell;

/// Two checkpoint-like files of 1 MiB and 300 KiB, written and synced (so
/// their pages are cached and clean), in a directory beside the test binary:
/// on the build's disk, where fadvise and O_DIRECT work, never tmpfs.
fn files() -> (tempfile::TempDir, Vec<(PathBuf, u64)>) {
    let exe = std::env::current_exe().unwrap();
    let d = tempfile::tempdir_in(exe.parent().unwrap()).unwrap();
    let mut out = Vec::new();
    for (name, n) in [("ck.part00000", 1 << 20), ("ck.manifest.json", 300 << 10)] {
        let p = d.path().join(name);
        let bytes: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
        let mut f = File::create(&p).unwrap();
        f.write_all(&bytes).unwrap();
        f.sync_data().unwrap();
        out.push((p, n as u64));
    }
    (d, out)
}

/// A stand-in drop_caches file holding `0`.
fn stand_in(d: &Path) -> PathBuf {
    let p = d.join("drop_caches");
    std::fs::write(&p, "0").unwrap();
    p
}

/// The host as a test can have it: the real calls, except that a drop
/// writes to the stand-in file (and then counts as done, as the kernel's
/// would), fadvise can fail with `fadvise_errno` or leave the pages
/// (`fadvise_keeps`, as on tmpfs), and O_DIRECT can fail with `direct_errno`.
struct Double {
    host: Host,
    fadvise_errno: Option<i32>,
    fadvise_keeps: bool,
    direct_errno: Option<i32>,
    dropped: Cell<bool>,
}

impl Double {
    fn new(drop_caches: PathBuf) -> Double {
        Double { host: Host { drop_caches }, fadvise_errno: None, fadvise_keeps: false, direct_errno: None, dropped: Cell::new(false) }
    }
}

impl CacheOps for Double {
    fn drop_caches(&self) -> io::Result<()> {
        self.host.drop_caches()?;
        self.dropped.set(true);
        Ok(())
    }
    fn evict(&self, path: &Path) -> io::Result<()> {
        match self.fadvise_errno {
            Some(e) => Err(io::Error::from_raw_os_error(e)),
            None if self.fadvise_keeps => Ok(()),
            None => self.host.evict(path),
        }
    }
    fn cached(&self, path: &Path) -> io::Result<Option<u64>> {
        if self.dropped.get() { Ok(Some(0)) } else { self.host.cached(path) }
    }
    fn direct(&self, path: &Path) -> io::Result<()> {
        match self.direct_errno {
            Some(e) => Err(io::Error::from_raw_os_error(e)),
            None => self.host.direct(path),
        }
    }
}

#[test]
fn a_permitted_drop_caches_comes_first_and_receives_1() {
    let (d, files) = files();
    let sysctl = stand_in(d.path());
    let ops = Double::new(sysctl.clone());
    let c = make_cold(Method::DropCaches, &files, &ops).unwrap();
    assert_eq!(c.method, Method::DropCaches);
    assert_eq!(std::fs::read_to_string(&sysctl).unwrap(), "1");
    assert_eq!(c.cached, Some(0));
    assert!(c.passed_over.is_empty(), "{:?}", c.passed_over);
    assert_eq!(c.method.label(), "dropped (drop_caches)");
}

#[test]
fn drop_caches_not_permitted_falls_to_fadvise_which_really_evicts() {
    let (d, files) = files();
    let host = Host { drop_caches: d.path().join("no/such/drop_caches") };
    // Freshly written: every byte is in the page cache.
    assert_eq!(cached_of(&host, &files), Some((1 << 20) + (300 << 10)));
    let c = make_cold(Method::DropCaches, &files, &host).unwrap();
    assert_eq!(c.method, Method::Fadvise);
    assert_eq!(c.method.label(), "evicted (fadvise DONTNEED)");
    // mincore, not the advice's return code, says the pages are gone.
    assert_eq!(c.cached, Some(0));
    assert_eq!(cached_of(&host, &files), Some(0));
    assert_eq!(c.passed_over.len(), 1);
    assert!(c.passed_over[0].starts_with("drop_caches: ") && c.passed_over[0].contains("no/such/drop_caches"), "{:?}", c.passed_over);
    // Reading one file brings its pages back: the count is live.
    std::fs::read(&files[0].0).unwrap();
    assert_eq!(host.cached(&files[0].0).unwrap(), Some(1 << 20));
}

#[test]
fn fadvise_unavailable_falls_to_o_direct() {
    let (d, files) = files();
    let mut ops = Double::new(d.path().join("missing"));
    ops.fadvise_errno = Some(libc::ENOSYS);
    let c = make_cold(Method::DropCaches, &files, &ops).unwrap();
    assert_eq!(c.method, Method::Direct);
    assert_eq!(c.method.label(), "bypassed (O_DIRECT)");
    assert_eq!(c.passed_over.len(), 2, "{:?}", c.passed_over);
    assert!(c.passed_over[1].starts_with("fadvise DONTNEED: ") && c.passed_over[1].contains("ck.part00000"), "{:?}", c.passed_over);
    // Nothing was evicted: O_DIRECT reads go around the cached pages.
    assert_eq!(c.cached, Some((1 << 20) + (300 << 10)));
}

#[test]
fn fadvise_that_leaves_the_pages_falls_to_o_direct() {
    let (d, files) = files();
    let mut ops = Double::new(d.path().join("missing"));
    ops.fadvise_keeps = true;
    let c = make_cold(Method::Fadvise, &files, &ops).unwrap();
    assert_eq!(c.method, Method::Direct);
    assert_eq!(c.passed_over, vec![format!("fadvise DONTNEED: {0} of {0} bytes still cached after it", (1 << 20) + (300 << 10))]);
}

#[test]
fn a_later_start_skips_the_earlier_methods() {
    let (d, files) = files();
    let sysctl = stand_in(d.path());
    let ops = Double::new(sysctl.clone());
    let c = make_cold(Method::Fadvise, &files, &ops).unwrap();
    assert_eq!((c.method, c.cached), (Method::Fadvise, Some(0)));
    let c = make_cold(Method::Direct, &files, &ops).unwrap();
    assert_eq!(c.method, Method::Direct);
    assert!(c.passed_over.is_empty());
    assert_eq!(std::fs::read_to_string(&sysctl).unwrap(), "0", "drop_caches was not asked for");
}

#[test]
fn nothing_permitted_is_an_error_naming_each_reason() {
    let (d, files) = files();
    let mut ops = Double::new(d.path().join("missing"));
    ops.fadvise_errno = Some(libc::ENOSYS);
    ops.direct_errno = Some(libc::EINVAL);
    let e = make_cold(Method::DropCaches, &files, &ops).unwrap_err();
    let parts: Vec<&str> = e.split("; ").collect();
    assert_eq!(parts.len(), 3, "{e}");
    assert!(parts[0].starts_with("drop_caches: ") && parts[1].starts_with("fadvise DONTNEED: ") && parts[2].starts_with("O_DIRECT: "), "{e}");
    assert!(parts[2].contains("Invalid argument"), "{e}");
}
