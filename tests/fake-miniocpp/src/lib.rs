//! A test double of libminiocpp's C ABI (minio-cpp `include/miniocpp/c_api.h`,
//! built with `-DMINIO_CPP_ENABLE_RDMA=ON`): the same symbols and calling
//! conventions, implemented by plain HTTP S3 (aws-sdk-s3) into the caller's
//! buffer. It proves s3rdma's binding, threading and error paths. It never
//! uses RDMA and `miniocpp_rdma_available()` says so, so the witness must
//! call every run through it `full-fallback` (or `unverified` without metrics).
//!
//! Failure injection by environment variable, read on every call:
//! - `FAKE_MINIOCPP_RETURN=-1|-2|-3`: every data call returns that code
//!   (-1 with a last-error message).
//! - `FAKE_MINIOCPP_FAIL_ABOVE=N`: data calls on more than N bytes return -1.
//! - `FAKE_MINIOCPP_NO_RANGE=1`: `miniocpp_get_object_range` returns -3, as a
//!   build without PR #258 would refuse (s3rdma's `--rdma-no-range` is the
//!   binding-side switch).
//! - `FAKE_MINIOCPP_RDMA_AVAILABLE=1`: `miniocpp_rdma_available()` claims RDMA,
//!   as a real library on an RDMA host would, while the bytes still move over
//!   HTTP: what the library says and what the server counts are scripted apart.
//!
//! - `FAKE_MINIOCPP_RAILS=TOTAL,HEALTHY`: what `miniocpp_rdma_nic_count` and
//!   `miniocpp_rdma_healthy_nic_count` answer (default 0,0, as with no RDMA);
//!   `FAKE_MINIOCPP_RAIL_LOST_AFTER=N`: after N data calls one healthy rail
//!   fewer, as when libs3rdma takes a failing rail out of rotation.
//!
//! Like the real library (minio-cpp `src/c_api.cc`), a whole-object GET into a
//! buffer returns the **buffer size it was given**, not the bytes received,
//! and fills at most that much: a larger object is cut at the buffer's end, a
//! smaller one leaves the rest of the buffer as it was. So a caller that
//! hands it more than the object's size counts bytes that never arrived; the
//! tests can no longer pass on a behaviour the real library does not have.
//!
//! Device pointers (the caller's CUDA context bound on the calling thread)
//! are served through a host copy and `cuMemcpyHtoD`/`DtoH`, so the double
//! also runs with `--dest device` on a GPU machine.

#![allow(clippy::missing_safety_doc)]

use std::cell::RefCell;
use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::sync::OnceLock;

use aws_sdk_s3::config::{AppName, BehaviorVersion, Credentials, Region, RequestChecksumCalculation};

/// Opaque client handle.
pub struct Client {
    s3: aws_sdk_s3::Client,
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_error(msg: impl Into<String>) {
    let s = CString::new(msg.into().replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = s);
}

fn rt() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime"))
}

unsafe fn cstr<'a>(p: *const c_char) -> Option<&'a str> {
    if p.is_null() { None } else { unsafe { CStr::from_ptr(p) }.to_str().ok() }
}

/// Injected return code, if any.
fn injected(size: usize) -> Option<isize> {
    if let Ok(v) = std::env::var("FAKE_MINIOCPP_RETURN") {
        let code: isize = v.parse().unwrap_or(-1);
        if code == -1 {
            set_error("injected failure (FAKE_MINIOCPP_RETURN=-1)");
        }
        return Some(code);
    }
    if let Some(n) = std::env::var("FAKE_MINIOCPP_FAIL_ABOVE").ok().and_then(|v| v.parse::<usize>().ok())
        && size > n
    {
        set_error(format!("injected failure: {size} bytes is above FAKE_MINIOCPP_FAIL_ABOVE={n}"));
        return Some(-1);
    }
    None
}

/// True when `p` is CUDA device memory (false without a driver or for host memory).
fn is_device_ptr(p: *const c_void) -> bool {
    use cudarc::driver::sys;
    // SAFETY: only probes for the library.
    if p.is_null() || !unsafe { sys::is_culib_present() } {
        return false;
    }
    let mut t: std::ffi::c_uint = 0;
    // SAFETY: t is a valid out-pointer for this attribute; an unknown pointer yields an error code.
    let r = unsafe {
        sys::cuPointerGetAttribute(&mut t as *mut _ as *mut c_void, sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p as sys::CUdeviceptr)
    };
    r == sys::CUresult::CUDA_SUCCESS && t == sys::CUmemorytype::CU_MEMORYTYPE_DEVICE as std::ffi::c_uint
}

/// Run `read` into the caller's buffer, through a host copy when it is device memory.
fn into_caller(buf: *mut c_void, size: usize, read: impl FnOnce(&mut [u8]) -> Result<usize, String>) -> Result<usize, String> {
    if is_device_ptr(buf) {
        let mut host = vec![0u8; size];
        let n = read(&mut host)?;
        // SAFETY: buf is device memory of at least size bytes (the caller's contract).
        unsafe { cudarc::driver::result::memcpy_htod_sync(buf as cudarc::driver::sys::CUdeviceptr, &host[..n]) }.map_err(|e| format!("cuMemcpyHtoD: {e:?}"))?;
        Ok(n)
    } else {
        // SAFETY: host memory of size bytes (the caller's contract).
        read(unsafe { std::slice::from_raw_parts_mut(buf as *mut u8, size) })
    }
}

fn guard(f: impl FnOnce() -> isize) -> isize {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|_| {
        set_error("panic inside fake-miniocpp");
        -1
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn miniocpp_client_new(
    endpoint: *const c_char,
    region: *const c_char,
    access_key: *const c_char,
    secret_key: *const c_char,
    session_token: *const c_char,
    use_https: c_int,
) -> *mut Client {
    let (Some(ep), Some(ak), Some(sk)) = (unsafe { cstr(endpoint) }, unsafe { cstr(access_key) }, unsafe { cstr(secret_key) }) else {
        set_error("endpoint, access_key and secret_key are required");
        return std::ptr::null_mut();
    };
    let region = unsafe { cstr(region) }.unwrap_or("us-east-1").to_string();
    let token = unsafe { cstr(session_token) }.map(String::from);
    let scheme = if use_https != 0 { "https" } else { "http" };
    let conf = aws_sdk_s3::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(region))
        .endpoint_url(format!("{scheme}://{ep}"))
        .credentials_provider(Credentials::new(ak, sk, token, None, "fake-miniocpp"))
        .force_path_style(true)
        // Tests tell the double's transfers from the client's own HTTP by this (tests/common: Traffic).
        .app_name(AppName::new("fake-miniocpp").expect("valid app name"))
        .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
        .build();
    Box::into_raw(Box::new(Client { s3: aws_sdk_s3::Client::from_conf(conf) }))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn miniocpp_client_free(client: *mut Client) {
    if !client.is_null() {
        drop(unsafe { Box::from_raw(client) });
    }
}

/// GET into `dst`; `cut`: keep the first `dst.len()` bytes of a longer body
/// and drop the rest, as minio-cpp's HTTP fallback does (else: an error).
async fn get(c: &Client, bucket: &str, key: &str, range: Option<String>, dst: &mut [u8], cut: bool) -> Result<usize, String> {
    let resp = c.s3.get_object().bucket(bucket).key(key).set_range(range).send().await.map_err(|e| {
        let mut s: &dyn std::error::Error = &e;
        while let Some(n) = s.source() {
            s = n;
        }
        format!("GetObject {bucket}/{key}: {s}")
    })?;
    let mut body = resp.body;
    let mut off = 0;
    let cap = dst.len();
    while let Some(chunk) = body.try_next().await.map_err(|e| format!("body: {e}"))? {
        let take = if cut { chunk.len().min(cap - off) } else { chunk.len() };
        let slot = dst.get_mut(off..off + take).ok_or_else(|| format!("object {bucket}/{key} is larger than the {cap} byte buffer"))?;
        slot.copy_from_slice(&chunk[..take]);
        off += take;
    }
    Ok(off)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn miniocpp_get_object(
    client: *mut Client,
    bucket: *const c_char,
    object: *const c_char,
    buf: *mut c_void,
    size: usize,
    _write_cb: *const c_void,
    _userdata: *mut c_void,
) -> isize {
    guard(|| {
        let (Some(c), Some(b), Some(k)) = (unsafe { client.as_ref() }, unsafe { cstr(bucket) }, unsafe { cstr(object) }) else {
            set_error("client, bucket and object are required");
            return -3;
        };
        if buf.is_null() {
            set_error("callback mode is not implemented by the fake");
            return -3;
        }
        if let Some(code) = injected(size) {
            return code;
        }
        count_call();
        // The buffer's size, whatever arrived: what minio-cpp returns.
        match into_caller(buf, size, |dst| rt().block_on(get(c, b, k, None, dst, true))) {
            Ok(_) => size as isize,
            Err(e) => {
                set_error(e);
                -1
            }
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn miniocpp_get_object_range(
    client: *mut Client,
    bucket: *const c_char,
    object: *const c_char,
    buf: *mut c_void,
    size: usize,
    offset: u64,
) -> isize {
    guard(|| {
        if std::env::var_os("FAKE_MINIOCPP_NO_RANGE").is_some() {
            set_error("ranged GET not supported by this build (FAKE_MINIOCPP_NO_RANGE)");
            return -3;
        }
        let (Some(c), Some(b), Some(k)) = (unsafe { client.as_ref() }, unsafe { cstr(bucket) }, unsafe { cstr(object) }) else {
            set_error("client, bucket and object are required");
            return -3;
        };
        if buf.is_null() || size == 0 {
            set_error("buffer and a non-zero size are required");
            return -3;
        }
        if let Some(code) = injected(size) {
            return code;
        }
        let range = format!("bytes={offset}-{}", offset + size as u64 - 1);
        count_call();
        match into_caller(buf, size, |dst| rt().block_on(get(c, b, k, Some(range), dst, false))) {
            Ok(n) => n as isize,
            Err(e) => {
                set_error(e);
                -1
            }
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn miniocpp_put_object(
    client: *mut Client,
    bucket: *const c_char,
    object: *const c_char,
    buf: *const c_void,
    size: usize,
    _read_cb: *const c_void,
    _userdata: *mut c_void,
    etag_out: *mut c_char,
    checksum_out: *mut c_char,
) -> isize {
    guard(|| {
        let (Some(c), Some(b), Some(k)) = (unsafe { client.as_ref() }, unsafe { cstr(bucket) }, unsafe { cstr(object) }) else {
            set_error("client, bucket and object are required");
            return -3;
        };
        if buf.is_null() && size > 0 {
            set_error("callback mode is not implemented by the fake");
            return -3;
        }
        if let Some(code) = injected(size) {
            return code;
        }
        let body = if size == 0 {
            bytes::Bytes::new()
        } else if is_device_ptr(buf) {
            let mut host = vec![0u8; size];
            // SAFETY: buf is device memory of size bytes (the caller's contract).
            if let Err(e) = unsafe { cudarc::driver::result::memcpy_dtoh_sync(&mut host, buf as cudarc::driver::sys::CUdeviceptr) } {
                set_error(format!("cuMemcpyDtoH: {e:?}"));
                return -1;
            }
            bytes::Bytes::from(host)
        } else {
            // SAFETY: host memory of size bytes (the caller's contract).
            bytes::Bytes::copy_from_slice(unsafe { std::slice::from_raw_parts(buf as *const u8, size) })
        };
        count_call();
        let body = aws_sdk_s3::primitives::ByteStream::from(body);
        match rt().block_on(c.s3.put_object().bucket(b).key(k).body(body).send()) {
            Ok(out) => {
                for (dst, val) in [(etag_out, out.e_tag().unwrap_or("")), (checksum_out, "")] {
                    if !dst.is_null() {
                        let v = val.as_bytes();
                        let n = v.len().min(63);
                        unsafe {
                            std::ptr::copy_nonoverlapping(v.as_ptr(), dst as *mut u8, n);
                            *dst.add(n) = 0;
                        }
                    }
                }
                size as isize
            }
            Err(e) => {
                set_error(format!("PutObject {b}/{k}: {e}"));
                -1
            }
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn miniocpp_alloc_aligned(size: usize) -> *mut c_void {
    let mut p = std::ptr::null_mut();
    if unsafe { libc::posix_memalign(&mut p, 4096, size.max(1)) } != 0 {
        return std::ptr::null_mut();
    }
    p
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn miniocpp_free_aligned(p: *mut c_void) {
    unsafe { libc::free(p) };
}

/// The fake never does RDMA; it says so unless `FAKE_MINIOCPP_RDMA_AVAILABLE=1`.
#[unsafe(no_mangle)]
pub extern "C" fn miniocpp_rdma_available() -> c_int {
    c_int::from(std::env::var("FAKE_MINIOCPP_RDMA_AVAILABLE").is_ok_and(|v| v == "1"))
}

static DATA_CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn count_call() {
    DATA_CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// `FAKE_MINIOCPP_RAILS` as (total, healthy), one healthy rail fewer once
/// `FAKE_MINIOCPP_RAIL_LOST_AFTER` data calls have been made.
fn rails() -> (c_int, c_int) {
    let v = std::env::var("FAKE_MINIOCPP_RAILS").unwrap_or_default();
    let mut it = v.split(',').map(|x| x.trim().parse::<c_int>().unwrap_or(0));
    let (total, mut healthy) = (it.next().unwrap_or(0), it.next().unwrap_or(0));
    if let Some(n) = std::env::var("FAKE_MINIOCPP_RAIL_LOST_AFTER").ok().and_then(|v| v.parse::<u64>().ok())
        && DATA_CALLS.load(std::sync::atomic::Ordering::Relaxed) >= n
    {
        healthy = (healthy - 1).max(0);
    }
    (total, healthy)
}

#[unsafe(no_mangle)]
pub extern "C" fn miniocpp_rdma_nic_count() -> c_int {
    rails().0
}

#[unsafe(no_mangle)]
pub extern "C" fn miniocpp_rdma_healthy_nic_count() -> c_int {
    rails().1
}

/// Thread-local, valid until the next call on this thread.
#[unsafe(no_mangle)]
pub extern "C" fn miniocpp_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}
