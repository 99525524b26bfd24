//! libloading binding of libminiocpp's C ABI (minio-cpp
//! `include/miniocpp/c_api.h`, built with `-DMINIO_CPP_ENABLE_RDMA=ON`).
//!
//! Return codes of the data calls (from the header): `>= 0` bytes moved,
//! `-1` failure (read `miniocpp_last_error()` on the same thread), `-2` RDMA
//! declined, `-3` invalid argument. A non-NULL buffer means "try RDMA, else
//! HTTP into the same buffer", and -2 is defined but not returned by current
//! builds: only the witness can tell which transport carried the bytes.

use std::ffi::{CStr, c_char, c_int, c_void};
use std::path::{Path, PathBuf};

use serde::Serialize;

/// Opaque `miniocpp_client*`.
#[repr(C)]
pub struct RawClient {
    _private: [u8; 0],
}

type ClientNew = unsafe extern "C" fn(*const c_char, *const c_char, *const c_char, *const c_char, *const c_char, c_int) -> *mut RawClient;
type ClientFree = unsafe extern "C" fn(*mut RawClient);
type PutObject =
    unsafe extern "C" fn(*mut RawClient, *const c_char, *const c_char, *const c_void, usize, *const c_void, *mut c_void, *mut c_char, *mut c_char) -> isize;
type GetObject = unsafe extern "C" fn(*mut RawClient, *const c_char, *const c_char, *mut c_void, usize, *const c_void, *mut c_void) -> isize;
type GetObjectRange = unsafe extern "C" fn(*mut RawClient, *const c_char, *const c_char, *mut c_void, usize, u64) -> isize;
type AllocAligned = unsafe extern "C" fn(usize) -> *mut c_void;
type FreeAligned = unsafe extern "C" fn(*mut c_void);
type IntFn = unsafe extern "C" fn() -> c_int;
type LastError = unsafe extern "C" fn() -> *const c_char;

/// The resolved symbols. Function pointers stay valid for the life of the
/// process: the library is never unloaded (see [`Lib::load`]).
#[derive(Debug, Clone, Copy)]
pub struct Lib {
    /// `miniocpp_client_new`.
    pub client_new: ClientNew,
    /// `miniocpp_client_free`.
    pub client_free: ClientFree,
    /// `miniocpp_put_object`.
    pub put_object: PutObject,
    /// `miniocpp_get_object`.
    pub get_object: GetObject,
    /// `miniocpp_alloc_aligned`.
    pub alloc_aligned: AllocAligned,
    /// `miniocpp_free_aligned`.
    pub free_aligned: FreeAligned,
    /// `miniocpp_rdma_available`.
    pub rdma_available: IntFn,
    /// `miniocpp_last_error` (thread-local message of the last -1).
    pub last_error: LastError,
    /// minio-cpp PR #258; absent in older builds.
    pub get_object_range: Option<GetObjectRange>,
    /// `miniocpp_rdma_nic_count`, where the library has it.
    pub rdma_nic_count: Option<IntFn>,
    /// `miniocpp_rdma_healthy_nic_count`, where the library has it.
    pub rdma_healthy_nic_count: Option<IntFn>,
}

/// What was loaded, for the run record.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LibInfo {
    /// The path or name given to the loader.
    pub path: String,
    /// Where the loader found it (from /proc/self/maps), when known.
    pub resolved_path: Option<String>,
    /// The library has `miniocpp_get_object_range` (minio-cpp PR #258).
    pub has_get_object_range: bool,
    /// The library has `miniocpp_rdma_nic_count`.
    pub has_rdma_nic_count: bool,
    /// The library has `miniocpp_rdma_healthy_nic_count`.
    pub has_rdma_healthy_nic_count: bool,
    /// `miniocpp_rdma_available()` at load time.
    pub rdma_available: bool,
    /// `miniocpp_rdma_nic_count`, where the library has it.
    pub rdma_nic_count: Option<i32>,
    /// `miniocpp_rdma_healthy_nic_count`, where the library has it.
    pub rdma_healthy_nic_count: Option<i32>,
}

/// Required symbols, in the order they are checked.
pub const REQUIRED: [&str; 8] = [
    "miniocpp_client_new",
    "miniocpp_client_free",
    "miniocpp_put_object",
    "miniocpp_get_object",
    "miniocpp_alloc_aligned",
    "miniocpp_free_aligned",
    "miniocpp_rdma_available",
    "miniocpp_last_error",
];

/// Which library to load: `--rdma-lib`, else `MINIOCPP_LIB` (clap folds the
/// two), else `libminiocpp.so` from the system search path.
pub fn lib_path(flag: Option<&Path>) -> PathBuf {
    flag.map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("libminiocpp.so"))
}

impl Lib {
    /// Load and resolve. The library is leaked on purpose: cuFile/cuObject
    /// install thread-local and exit-time destructors, and unloading it while
    /// the process lives on crashes (seeds/000 troubleshooting).
    ///
    /// Errors: one line per missing required symbol, or the loader's message.
    pub fn load(path: &Path) -> Result<(Lib, LibInfo), String> {
        // SAFETY: loading runs the library's initialisers; that is the point.
        let lib = unsafe { libloading::Library::new(path) }.map_err(|e| {
            let cause = crate::error::root_cause(&e);
            let detail = if cause == e.to_string() { cause } else { format!("{e}: {cause}") };
            format!(
                "cannot load libminiocpp from '{}' ({detail}): check the path (--rdma-lib or MINIOCPP_LIB) and that its dependencies resolve (`ldd` it)",
                path.display()
            )
        })?;
        let lib: &'static libloading::Library = Box::leak(Box::new(lib));
        let missing: Vec<String> = REQUIRED
            .iter()
            // SAFETY: only checks the symbol exists; the type is irrelevant here.
            .filter(|s| unsafe { lib.get::<*const c_void>(s.as_bytes()) }.is_err())
            .map(|s| format!("{} lacks {s}: was it built with -DMINIO_CPP_ENABLE_RDMA=ON?", path.display()))
            .collect();
        if !missing.is_empty() {
            return Err(missing.join("\n"));
        }
        // SAFETY: the symbols exist (checked above) and have the C ABI
        // signatures of c_api.h that the types above spell out.
        let l = unsafe {
            Lib {
                client_new: *lib.get::<ClientNew>(b"miniocpp_client_new").map_err(|e| e.to_string())?,
                client_free: *lib.get::<ClientFree>(b"miniocpp_client_free").map_err(|e| e.to_string())?,
                put_object: *lib.get::<PutObject>(b"miniocpp_put_object").map_err(|e| e.to_string())?,
                get_object: *lib.get::<GetObject>(b"miniocpp_get_object").map_err(|e| e.to_string())?,
                alloc_aligned: *lib.get::<AllocAligned>(b"miniocpp_alloc_aligned").map_err(|e| e.to_string())?,
                free_aligned: *lib.get::<FreeAligned>(b"miniocpp_free_aligned").map_err(|e| e.to_string())?,
                rdma_available: *lib.get::<IntFn>(b"miniocpp_rdma_available").map_err(|e| e.to_string())?,
                last_error: *lib.get::<LastError>(b"miniocpp_last_error").map_err(|e| e.to_string())?,
                get_object_range: lib.get::<GetObjectRange>(b"miniocpp_get_object_range").ok().map(|s| *s),
                rdma_nic_count: lib.get::<IntFn>(b"miniocpp_rdma_nic_count").ok().map(|s| *s),
                rdma_healthy_nic_count: lib.get::<IntFn>(b"miniocpp_rdma_healthy_nic_count").ok().map(|s| *s),
            }
        };
        // SAFETY: argument-less queries of the library's state.
        let info = unsafe {
            LibInfo {
                path: path.display().to_string(),
                resolved_path: loaded_path("miniocpp").or_else(|| {
                    let name = path.file_name()?.to_string_lossy().into_owned();
                    loaded_path(name.trim_end_matches(".so"))
                }),
                has_get_object_range: l.get_object_range.is_some(),
                has_rdma_nic_count: l.rdma_nic_count.is_some(),
                has_rdma_healthy_nic_count: l.rdma_healthy_nic_count.is_some(),
                rdma_available: (l.rdma_available)() != 0,
                rdma_nic_count: l.rdma_nic_count.map(|f| f()),
                rdma_healthy_nic_count: l.rdma_healthy_nic_count.map(|f| f()),
            }
        };
        Ok((l, info))
    }

    /// `miniocpp_last_error()` of this thread, as text.
    pub fn last_error(&self) -> String {
        // SAFETY: returns a thread-local C string (or NULL) owned by the library.
        let p = unsafe { (self.last_error)() };
        if p.is_null() {
            return "no error message".into();
        }
        // SAFETY: non-NULL, NUL-terminated, valid until the next call on this thread.
        let s = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
        if s.is_empty() { "no error message".into() } else { s }
    }
}

/// Path of the first mapped file whose path contains `needle` (/proc/self/maps).
pub fn loaded_path(needle: &str) -> Option<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines().filter_map(|l| l.split_whitespace().nth(5)).find(|p| p.contains(needle)).map(String::from)
}
