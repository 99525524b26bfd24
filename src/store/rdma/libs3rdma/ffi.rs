//! libloading binding of libs3rdma's client C ABI (minio-cpp
//! `vendor/s3rdma/include/s3rdma.h`, libs3rdma 0.3.0): the `s3rdma_client_*`
//! entry points an S3 client needs, bound directly, not through libminiocpp.
//!
//! The client is the RDMA passive side: it pins ("registers") memory,
//! mints an 81-character `x-amz-rdma-token` per request naming a slice of
//! that memory and one rail, and the server performs the one-sided transfer.
//! Registration is keyed by pointer and reference counted; a token must lie
//! inside a registration; one token names at most 4 GiB - 1 bytes (a 32-bit
//! size field).

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::path::Path;

use crate::flag::{RDMA_DEVICE, RDMA_ENGINE, RDMA_LIB};

type Version = unsafe extern "C" fn() -> *const c_char;
type Init = unsafe extern "C" fn(*const c_char, *mut c_char, usize) -> *mut c_void;
type Free = unsafe extern "C" fn(*mut c_void);
type Count = unsafe extern "C" fn(*mut c_void) -> c_int;
type ReportFailure = unsafe extern "C" fn(*mut c_void, *const c_char) -> c_int;
type Register = unsafe extern "C" fn(*mut c_void, *mut c_void, usize) -> c_int;
type Deregister = unsafe extern "C" fn(*mut c_void, *mut c_void) -> c_int;
type GetToken = unsafe extern "C" fn(*mut c_void, *mut c_void, usize, usize, *mut *mut c_char) -> c_int;
type FreeToken = unsafe extern "C" fn(*mut c_char);
type LastError = unsafe extern "C" fn(*mut c_char, usize) -> usize;

/// The client entry points this engine calls, in the order they are checked.
pub const REQUIRED: [&str; 11] = [
    "s3rdma_version",
    "s3rdma_client_init",
    "s3rdma_client_free",
    "s3rdma_client_nic_count",
    "s3rdma_client_healthy_nic_count",
    "s3rdma_client_report_token_failure",
    "s3rdma_client_register",
    "s3rdma_client_deregister",
    "s3rdma_client_get_token",
    "s3rdma_client_free_token",
    "s3rdma_last_error",
];

/// The library's name on the loader's search path when `--rdma-lib` names none.
pub const DEFAULT_NAME: &str = "libs3rdma.so.0";

/// The resolved entry points. The library is never unloaded (as libminiocpp's
/// binding: an engine's exit-time destructors must not run twice).
#[derive(Debug, Clone, Copy)]
struct Fns {
    version: Version,
    init: Init,
    free: Free,
    nic_count: Count,
    healthy_nic_count: Count,
    report_failure: ReportFailure,
    register: Register,
    deregister: Deregister,
    get_token: GetToken,
    free_token: FreeToken,
    last_error: LastError,
}

/// One open libs3rdma client: its handle and the library's entry points.
/// Every method is safe to call from any thread (libs3rdma's handles are
/// opaque ids it checks on every call, and in-flight calls finish before a
/// free takes effect: `s3rdma.h`).
#[derive(Debug)]
pub struct Client {
    fns: Fns,
    handle: *mut c_void,
    /// `s3rdma_version()`.
    pub version: String,
    /// What was loaded: the path given to the loader.
    pub library: String,
}

// SAFETY: the handle is an opaque id the library validates on every call,
// and its entry points are thread-safe (s3rdma.h, "Client side").
unsafe impl Send for Client {}
// SAFETY: as above; no method takes &mut state of this struct.
unsafe impl Sync for Client {}

impl Client {
    /// Load the library at `path` and open a client on `device` (`None`:
    /// `S3RDMA_DEVICE`, else every device with an ACTIVE port, as the
    /// library decides).
    ///
    /// Errors: a library that does not load, one that is not libs3rdma (a
    /// libminiocpp, named as such), one that lacks a client entry point (an
    /// older generation), or a client the library refuses to open, in its words.
    pub fn open(path: &Path, device: Option<&str>) -> Result<Client, String> {
        if path.is_dir() {
            return Err(format!("{RDMA_LIB} '{}' is a directory: name the library file in it (libs3rdma.so.0)", path.display()));
        }
        // SAFETY: loading runs the library's initialisers; that is the point.
        let lib = unsafe { libloading::Library::new(path) }.map_err(|e| {
            format!(
                "cannot load libs3rdma from '{}' ({}): pass its path with {RDMA_LIB} (libs3rdma.so.0, vendored by minio-cpp v0.6.0+ under vendor/s3rdma/lib/)",
                path.display(),
                crate::error::root_cause(&e)
            )
        })?;
        let lib: &'static libloading::Library = Box::leak(Box::new(lib));
        // SAFETY: existence checks only.
        let has = |s: &str| unsafe { lib.get::<*const c_void>(s.as_bytes()) }.is_ok();
        let missing: Vec<&str> = REQUIRED.iter().copied().filter(|s| !has(s)).collect();
        if !missing.is_empty() {
            let what = if has("miniocpp_client_new") {
                format!(
                    "it is libminiocpp, not libs3rdma: with {RDMA_ENGINE} libs3rdma, {RDMA_LIB} names libs3rdma.so.0 (the one libminiocpp loads beside itself)"
                )
            } else {
                format!("it lacks {}: not libs3rdma 0.3 or later (the client API of minio-cpp v0.6.0+)", missing.join(", "))
            };
            return Err(format!("'{}': {what}", path.display()));
        }
        // SAFETY: every symbol exists (checked above) and has the signature s3rdma.h gives it.
        let fns = unsafe {
            Fns {
                version: *lib.get(b"s3rdma_version").map_err(|e| e.to_string())?,
                init: *lib.get(b"s3rdma_client_init").map_err(|e| e.to_string())?,
                free: *lib.get(b"s3rdma_client_free").map_err(|e| e.to_string())?,
                nic_count: *lib.get(b"s3rdma_client_nic_count").map_err(|e| e.to_string())?,
                healthy_nic_count: *lib.get(b"s3rdma_client_healthy_nic_count").map_err(|e| e.to_string())?,
                report_failure: *lib.get(b"s3rdma_client_report_token_failure").map_err(|e| e.to_string())?,
                register: *lib.get(b"s3rdma_client_register").map_err(|e| e.to_string())?,
                deregister: *lib.get(b"s3rdma_client_deregister").map_err(|e| e.to_string())?,
                get_token: *lib.get(b"s3rdma_client_get_token").map_err(|e| e.to_string())?,
                free_token: *lib.get(b"s3rdma_client_free_token").map_err(|e| e.to_string())?,
                last_error: *lib.get(b"s3rdma_last_error").map_err(|e| e.to_string())?,
            }
        };
        // SAFETY: a static NUL-terminated string (s3rdma.h).
        let version = unsafe { text((fns.version)()) }.unwrap_or_else(|| "unknown".into());
        let device = device.map(|d| CString::new(d).map_err(|_| "the RDMA device list contains a NUL byte".to_string())).transpose()?;
        let mut err = vec![0 as c_char; 1024];
        // SAFETY: a NUL-terminated device list or NULL, and an error buffer of err.len() bytes.
        let handle = unsafe { (fns.init)(device.as_ref().map_or(std::ptr::null(), |d| d.as_ptr()), err.as_mut_ptr(), err.len()) };
        if handle.is_null() {
            // SAFETY: NUL-terminated within err (s3rdma.h).
            let why = unsafe { text(err.as_ptr()) }.unwrap_or_else(|| "no reason given".into());
            let named = match device {
                Some(d) => format!("the devices named by {RDMA_DEVICE} ('{}')", d.to_string_lossy()),
                None => "S3RDMA_DEVICE (or, unset, every ACTIVE port)".to_string(),
            };
            return Err(format!("s3rdma_client_init refused ({why}): check {named}, and that a DC-capable HCA (mlx5) is ACTIVE"));
        }
        Ok(Client { fns, handle, version, library: path.display().to_string() })
    }

    /// Rails this client can mint on, and how many are usable now.
    pub fn rails(&self) -> (u32, u32) {
        // SAFETY: a live handle.
        unsafe { ((self.fns.nic_count)(self.handle).max(0) as u32, (self.fns.healthy_nic_count)(self.handle).max(0) as u32) }
    }

    /// Pin `len` bytes at `ptr` on every rail (reference counted by `ptr`).
    ///
    /// # Safety
    /// `ptr..ptr+len` is memory this process owns and keeps alive until the
    /// matching [`Client::deregister`].
    ///
    /// Errors: the library's reason.
    pub unsafe fn register(&self, ptr: *mut u8, len: usize) -> Result<(), String> {
        // SAFETY: the caller's contract.
        if unsafe { (self.fns.register)(self.handle, ptr.cast(), len) } != 0 {
            return Err(format!("s3rdma_client_register of {len} bytes refused: {}", self.last_error()));
        }
        Ok(())
    }

    /// Drop one reference taken by [`Client::register`].
    pub fn deregister(&self, ptr: *mut u8) {
        // SAFETY: a live handle; an address never pinned is refused (-1), not acted on.
        let _ = unsafe { (self.fns.deregister)(self.handle, ptr.cast()) };
    }

    /// A token for `size` bytes at `offset` within the registration at `ptr`.
    ///
    /// Errors: the library's reason (outside a registration, above 4 GiB - 1).
    pub fn token(&self, ptr: *mut u8, size: usize, offset: usize) -> Result<String, String> {
        let mut out: *mut c_char = std::ptr::null_mut();
        // SAFETY: a live handle and an out-pointer; the library checks the range against its registrations.
        let rc = unsafe { (self.fns.get_token)(self.handle, ptr.cast(), size, offset, &mut out) };
        if rc != 0 || out.is_null() {
            return Err(format!("s3rdma_client_get_token for {size} bytes at offset {offset} refused: {}", self.last_error()));
        }
        // SAFETY: a NUL-terminated token the library allocated; freed right after copying.
        let token = unsafe { text(out) }.unwrap_or_default();
        // SAFETY: the pointer get_token returned, freed once.
        unsafe { (self.fns.free_token)(out) };
        Ok(token)
    }

    /// Tell the library the transfer for `token` failed, so its rail is skipped.
    pub fn report_failure(&self, token: &str) {
        if let Ok(t) = CString::new(token) {
            // SAFETY: a live handle and a NUL-terminated token.
            let _ = unsafe { (self.fns.report_failure)(self.handle, t.as_ptr()) };
        }
    }

    /// This thread's last error, in the library's words.
    fn last_error(&self) -> String {
        let mut buf = vec![0 as c_char; 512];
        // SAFETY: writes at most len - 1 bytes and a NUL.
        unsafe { (self.fns.last_error)(buf.as_mut_ptr(), buf.len()) };
        // SAFETY: NUL-terminated within buf.
        unsafe { text(buf.as_ptr()) }.unwrap_or_else(|| "no reason given".into())
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        // SAFETY: the handle init returned, freed once.
        unsafe { (self.fns.free)(self.handle) };
    }
}

/// A C string as trimmed text; `None` for NULL or empty.
///
/// # Safety
/// `p` is NULL or NUL-terminated.
unsafe fn text(p: *const c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: the caller's contract.
    let s = unsafe { CStr::from_ptr(p) }.to_string_lossy().trim().to_string();
    (!s.is_empty()).then_some(s)
}

/// The rail address a token names: its last 32 hex digits are the source
/// GID, and an IPv4-mapped GID (`0000…ffffAABBCCDD`, a RoCEv2 rail over
/// IPv4) names an address the control-plane socket binds to (minio-cpp
/// `parseClientNICFromToken`, minio-rs `parse_client_nic_from_token`).
/// `None` for an InfiniBand or IPv6 GID: nothing to bind.
pub fn rail_of(token: &str) -> Option<std::net::Ipv4Addr> {
    let tail = token.get(token.len().checked_sub(32)?..)?;
    if !tail[..20].bytes().all(|b| b == b'0') || !tail[20..24].eq_ignore_ascii_case("ffff") {
        return None;
    }
    u32::from_str_radix(&tail[24..], 16).ok().map(std::net::Ipv4Addr::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tokens_rail_is_its_ipv4_mapped_gid_only() {
        let t = |gid: &str| format!("00007f0000001000:00001000:00000001:0001:000abc:1:{gid}");
        assert_eq!(rail_of(&t("00000000000000000000ffff7f000002")), Some("127.0.0.2".parse().unwrap()));
        assert_eq!(rail_of(&t("00000000000000000000FFFF0a000001")), Some("10.0.0.1".parse().unwrap()));
        // An InfiniBand or IPv6 GID names no address.
        assert_eq!(rail_of(&t("fe800000000000000202c9fffe000001")), None);
        assert_eq!(rail_of("short"), None);
    }

    #[test]
    fn a_library_that_is_not_there_is_named_with_the_fix() {
        let e = Client::open(Path::new("/nonexistent/libs3rdma.so.0"), None).unwrap_err();
        assert!(e.contains("cannot load libs3rdma from '/nonexistent/libs3rdma.so.0'") && e.contains("--rdma-lib"), "{e}");
    }
}
