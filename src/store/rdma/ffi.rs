//! libloading binding of libminiocpp's C ABI (minio-cpp
//! `include/miniocpp/c_api.h`, built with `-DMINIO_CPP_ENABLE_RDMA=ON`).
//!
//! Return codes of the data calls (from the header): `>= 0` bytes moved,
//! `-1` failure (read `miniocpp_last_error()` on the same thread), `-2` RDMA
//! declined, `-3` invalid argument. A non-NULL buffer means "try RDMA, else
//! HTTP into the same buffer", and -2 is defined but not returned by current
//! builds: only the witness can tell which transport carried the bytes.
//!
//! For a non-NULL buffer, minio-cpp's `miniocpp_get_object` returns the
//! **buffer size it was given**, not the bytes received
//! (`return buf != nullptr ? size : bytes_seen` in minio-cpp `src/c_api.cc`,
//! v0.6.0), on the RDMA path and its HTTP fallback alike, and the fallback
//! streams the body into that buffer whatever the object's length: a larger
//! object is cut at the buffer's end, a smaller one leaves the rest of the
//! buffer as it was. So the caller must hand it exactly the bytes it wants
//! (the size from HEAD, a manifest or a header) and never read the return
//! value as a count.
//!
//! Two generations of the library exist, told apart from the loaded library
//! itself ([`Generation`]): NVIDIA cuObject (links libcuobjclient and
//! libcufile; GPU device memory only) and libs3rdma (minio-cpp v0.6.0 and
//! later; any memory `ibv_reg_mr` accepts, rails, `s3rdma_version`).

use std::ffi::{CStr, c_char, c_int, c_void};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::flag::RDMA_LIB;
use crate::store::Rails;

/// Opaque `miniocpp_client*`.
#[repr(C)]
#[derive(Debug)]
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
type Version = unsafe extern "C" fn() -> *const c_char;
type CheckRdma = unsafe extern "C" fn(*mut c_char, usize) -> c_int;

/// Which RDMA engine the loaded libminiocpp was built with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Generation {
    /// minio-cpp v0.6.0 and later: RDMA through the vendored libs3rdma
    /// (`s3rdma_version` resolves through the library, or libs3rdma is mapped).
    /// Registers any memory `ibv_reg_mr` accepts (host RAM, pinned, GPU device
    /// memory), needs a DC-capable HCA (mlx5), spreads transfers over rails.
    Libs3rdma,
    /// Earlier builds: RDMA through NVIDIA cuObject (libcuobjclient and
    /// libcufile are mapped). GPU-Direct into device memory only; host memory,
    /// even pinned, goes over HTTP (measured in the original Python suite).
    Cuobject,
    /// Neither engine is linked (a test double, or a build this tool does not know).
    Unknown,
}

impl Generation {
    /// The name as printed and recorded.
    pub fn as_str(self) -> &'static str {
        match self {
            Generation::Libs3rdma => "libs3rdma",
            Generation::Cuobject => "cuobject",
            Generation::Unknown => "unknown",
        }
    }

    /// Whether RDMA can carry host memory (pageable or pinned) with this
    /// engine: yes for libs3rdma, no for cuObject, not known otherwise.
    pub fn carries_host_memory(self) -> Option<bool> {
        match self {
            Generation::Libs3rdma => Some(true),
            Generation::Cuobject => Some(false),
            Generation::Unknown => None,
        }
    }
}

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
    /// libs3rdma's `s3rdma_version`, resolved through the library's dependencies.
    pub s3rdma_version: Option<Version>,
    /// libs3rdma's `s3rdma_check_rdma` (availability and the reason when not).
    pub s3rdma_check_rdma: Option<CheckRdma>,
    /// libs3rdma's client API, where all four entry points resolve: registration timed off the clock.
    pub engine_client: Option<super::registration::EngineClient>,
}

/// What was loaded, for the run record.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LibInfo {
    /// The path or name given to the loader.
    pub path: String,
    /// Where the loader found it (from /proc/self/maps), when known.
    pub resolved_path: Option<String>,
    /// The RDMA engine it was built with.
    pub generation: Generation,
    /// libs3rdma's version (`s3rdma_version()`), where the library has it.
    pub engine_version: Option<String>,
    /// The RDMA engine's libraries the loader mapped with it (libs3rdma,
    /// libcuobjclient, libcufile), by path: what told the generation apart.
    pub engine_libraries: Vec<String>,
    /// Why RDMA is unavailable, in the library's words (`s3rdma_check_rdma`),
    /// when `rdma_available` is false and the library can say.
    pub unavailable_reason: Option<String>,
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
    /// The RDMA engine says it is a stand-in, not libs3rdma: its
    /// `s3rdma_version` begins [`STANDIN_PREFIX`] (`tests/standin-s3rdma`,
    /// which the project's CI builds to run the real library's RDMA branch
    /// without an RDMA device). Records made through it are test-double
    /// records: written under `<results-dir>/test-double/`, and `report`
    /// skips them unless asked.
    pub test_double: bool,
}

/// How a libs3rdma stand-in's `s3rdma_version` begins.
pub const STANDIN_PREFIX: &str = "s3rdma-standin";

/// The warning before a run through a stand-in engine of version `version`
/// (either RDMA engine: its figures are no RDMA figures).
pub fn standin_warning(version: &str) -> String {
    format!("the RDMA engine is a stand-in ({version}): nothing this run moves is an RDMA figure; its record goes under test-double/ in the results directory")
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

/// Which library to load: `--rdma-lib`, else `MINIOCPP_LIB` (the flag parser
/// folds the two), else `libminiocpp.so` from the system search path.
pub fn lib_path(flag: Option<&Path>) -> PathBuf {
    flag.map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("libminiocpp.so"))
}

impl Lib {
    /// Load and resolve. The library is leaked on purpose: cuFile/cuObject
    /// install thread-local and exit-time destructors, and unloading it while
    /// the process lives on crashes (the original Python suite's troubleshooting notes).
    ///
    /// Errors: one line per missing required symbol, or the loader's message.
    pub fn load(path: &Path) -> Result<(Lib, LibInfo), String> {
        // SAFETY: loading runs the library's initialisers; that is the point.
        let lib = unsafe { libloading::Library::new(path) }.map_err(|e| {
            let cause = crate::error::root_cause(&e);
            let detail = if cause == e.to_string() { cause } else { format!("{e}: {cause}") };
            format!(
                "cannot load libminiocpp from '{}' ({detail}): check the path ({RDMA_LIB} or MINIOCPP_LIB) and that its dependencies resolve (`ldd` it)",
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
                // dlsym on the library's handle searches its dependencies too.
                s3rdma_version: lib.get::<Version>(b"s3rdma_version").ok().map(|s| *s),
                s3rdma_check_rdma: lib.get::<CheckRdma>(b"s3rdma_check_rdma").ok().map(|s| *s),
                engine_client: (|| {
                    Some(super::registration::EngineClient {
                        init: *lib.get(b"s3rdma_client_init").ok()?,
                        free: *lib.get(b"s3rdma_client_free").ok()?,
                        register: *lib.get(b"s3rdma_client_register").ok()?,
                        deregister: *lib.get(b"s3rdma_client_deregister").ok()?,
                    })
                })(),
            }
        };
        let engine_libraries = loaded_paths(&["libs3rdma", "libcuobjclient", "libcufile"]);
        let generation = if l.s3rdma_version.is_some() || engine_libraries.iter().any(|p| p.contains("libs3rdma")) {
            Generation::Libs3rdma
        } else if engine_libraries.iter().any(|p| p.contains("libcuobjclient") || p.contains("libcufile")) {
            Generation::Cuobject
        } else {
            Generation::Unknown
        };
        // SAFETY: argument-less queries of the library's state.
        let mut info = unsafe {
            LibInfo {
                path: path.display().to_string(),
                resolved_path: loaded_path("miniocpp").or_else(|| {
                    let name = path.file_name()?.to_string_lossy().into_owned();
                    loaded_path(name.trim_end_matches(".so"))
                }),
                generation,
                engine_version: l.s3rdma_version.and_then(|f| c_text(f())),
                engine_libraries,
                unavailable_reason: None,
                has_get_object_range: l.get_object_range.is_some(),
                has_rdma_nic_count: l.rdma_nic_count.is_some(),
                has_rdma_healthy_nic_count: l.rdma_healthy_nic_count.is_some(),
                rdma_available: (l.rdma_available)() != 0,
                rdma_nic_count: l.rdma_nic_count.map(|f| f()),
                rdma_healthy_nic_count: l.rdma_healthy_nic_count.map(|f| f()),
                test_double: false,
            }
        };
        info.test_double = info.engine_version.as_deref().is_some_and(|v| v.starts_with(STANDIN_PREFIX));
        if !info.rdma_available {
            info.unavailable_reason = l.unavailable_reason();
        }
        Ok((l, info))
    }

    /// The engine's own reason RDMA is unavailable (`s3rdma_check_rdma`), or
    /// `None` where the library cannot say (cuObject builds, test doubles).
    pub fn unavailable_reason(&self) -> Option<String> {
        let check = self.s3rdma_check_rdma?;
        let mut buf = vec![0 as c_char; 1024];
        // SAFETY: the function writes at most len - 1 bytes and a NUL into buf.
        let ok = unsafe { check(buf.as_mut_ptr(), buf.len()) };
        if ok != 0 {
            return None;
        }
        // SAFETY: NUL-terminated within buf (the contract above).
        c_text(buf.as_ptr())
    }

    /// Rails total and healthy now, where the library has both counts.
    pub fn rails(&self) -> Option<Rails> {
        let (total, healthy) = (self.rdma_nic_count?, self.rdma_healthy_nic_count?);
        // SAFETY: argument-less queries of the library's state.
        let (t, h) = unsafe { (total(), healthy()) };
        Some(Rails { total: t.max(0) as u32, healthy: h.max(0) as u32 })
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

/// Mapped files whose file name contains any of `needles`, each once, in map order.
fn loaded_paths(needles: &[&str]) -> Vec<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let mut out: Vec<String> = Vec::new();
    for p in maps.lines().filter_map(|l| l.split_whitespace().nth(5)) {
        let name = p.rsplit('/').next().unwrap_or(p);
        if needles.iter().any(|n| name.contains(n)) && !out.iter().any(|o| o == p) {
            out.push(p.to_string());
        }
    }
    out
}

/// A C string owned by the library as text; `None` for NULL or empty.
fn c_text(p: *const c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: non-NULL and NUL-terminated (the callers' contracts).
    let s = unsafe { CStr::from_ptr(p) }.to_string_lossy().trim().to_string();
    (!s.is_empty()).then_some(s)
}
