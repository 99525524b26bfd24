//! What buffer registration costs, measured off the clock.
//!
//! minio-cpp registers the caller's buffer inside every data call and
//! deregisters it before returning (`src/client.cc`, `GetObject` and
//! `PutObject` in direct-buffer mode: `Register`, then the transfer, then the
//! RAII `ScopedRDMARegistration`), so through the C ABI a transfer's time
//! always includes one registration, and no call separates the two. So the
//! cost is measured apart, through libs3rdma's own client API
//! (`s3rdma_client_init`, `s3rdma_client_register`,
//! `s3rdma_client_deregister`: `vendor/s3rdma/include/s3rdma.h`) on a client
//! of this process's own, on host buffers of the sizes asked, before any
//! timed window; and each window's share is then `calls x per_call_s +
//! bytes x per_byte_s`, a line through the measured points (pinning is per
//! page, so the cost grows with the size). Reported from 0.1 ms (libs3rdma,
//! 4 MiB) to 0.9 s (the cuObject generation, 128 MiB) in the field.

use std::ffi::{c_char, c_int, c_void};
use std::time::Instant;

use serde::Serialize;

/// `s3rdma_client_init`.
pub type ClientInit = unsafe extern "C" fn(*const c_char, *mut c_char, usize) -> *mut c_void;
/// `s3rdma_client_free`.
pub type ClientFree = unsafe extern "C" fn(*mut c_void);
/// `s3rdma_client_register`.
pub type Register = unsafe extern "C" fn(*mut c_void, *mut c_void, usize) -> c_int;
/// `s3rdma_client_deregister`.
pub type Deregister = unsafe extern "C" fn(*mut c_void, *mut c_void) -> c_int;

/// libs3rdma's client entry points, resolved through libminiocpp's dependencies.
#[derive(Debug, Clone, Copy)]
pub struct EngineClient {
    /// `s3rdma_client_init`.
    pub init: ClientInit,
    /// `s3rdma_client_free`.
    pub free: ClientFree,
    /// `s3rdma_client_register`.
    pub register: Register,
    /// `s3rdma_client_deregister`.
    pub deregister: Deregister,
}

/// One size's registration cost (median of [`REPEATS`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RegistrationCost {
    /// Bytes registered (one page-aligned host buffer).
    pub bytes: u64,
    /// Seconds in `s3rdma_client_register`.
    pub register_s: f64,
    /// Seconds in `s3rdma_client_deregister`.
    pub deregister_s: f64,
}

/// Registrations per size; the median is kept.
pub const REPEATS: usize = 3;

/// Costs measured at two or more sizes and the line through them, for the
/// share of a window's transfer time that registration took.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RegistrationModel {
    /// The measured points.
    pub measured: Vec<RegistrationCost>,
    /// Seconds per registration and deregistration, whatever the size (the line's intercept, at least 0).
    pub per_call_s: f64,
    /// Seconds per registered byte (the line's slope, at least 0).
    pub per_byte_s: f64,
}

impl RegistrationModel {
    /// The line through the smallest and the largest measured size.
    ///
    /// Errors: fewer than two sizes.
    pub fn fit(measured: Vec<RegistrationCost>) -> Result<Self, String> {
        let total = |c: &RegistrationCost| c.register_s + c.deregister_s;
        let lo = measured.iter().min_by_key(|c| c.bytes).ok_or("no registration measured")?;
        let hi = measured.iter().max_by_key(|c| c.bytes).ok_or("no registration measured")?;
        if hi.bytes == lo.bytes {
            return Err("a registration line needs two sizes".into());
        }
        let per_byte_s = ((total(hi) - total(lo)) / (hi.bytes - lo.bytes) as f64).max(0.0);
        let per_call_s = (total(lo) - per_byte_s * lo.bytes as f64).max(0.0);
        Ok(RegistrationModel { measured, per_call_s, per_byte_s })
    }

    /// Seconds `calls` registrations of `bytes` bytes in all take on this line.
    pub fn seconds(&self, calls: u64, bytes: u64) -> f64 {
        calls as f64 * self.per_call_s + bytes as f64 * self.per_byte_s
    }
}

impl EngineClient {
    /// Register and deregister one host buffer of each size in `sizes`
    /// ([`REPEATS`] times, the median kept) on a client of this process's
    /// own, through `alloc`/`free` (libminiocpp's aligned allocator).
    ///
    /// Errors: the client cannot be opened (the engine's reason: no device),
    /// a buffer cannot be allocated, or the engine refuses a registration.
    pub fn measure(
        &self,
        sizes: &[u64],
        alloc: unsafe extern "C" fn(usize) -> *mut c_void,
        free: unsafe extern "C" fn(*mut c_void),
    ) -> Result<Vec<RegistrationCost>, String> {
        let mut err = vec![0 as c_char; 512];
        // SAFETY: NULL device (the engine's own choice), an error buffer of err.len() bytes.
        let h = unsafe { (self.init)(std::ptr::null(), err.as_mut_ptr(), err.len()) };
        if h.is_null() {
            // SAFETY: NUL-terminated within err (the header's contract).
            let why = unsafe { std::ffi::CStr::from_ptr(err.as_ptr()) }.to_string_lossy().into_owned();
            return Err(format!("s3rdma_client_init failed: {why}"));
        }
        let out = sizes.iter().map(|&bytes| self.one_size(h, bytes, alloc, free)).collect();
        // SAFETY: a live handle from init.
        unsafe { (self.free)(h) };
        out
    }

    fn one_size(
        &self,
        h: *mut c_void,
        bytes: u64,
        alloc: unsafe extern "C" fn(usize) -> *mut c_void,
        free: unsafe extern "C" fn(*mut c_void),
    ) -> Result<RegistrationCost, String> {
        // SAFETY: the library's posix_memalign wrapper.
        let p = unsafe { alloc(bytes as usize) };
        if p.is_null() {
            return Err(format!("cannot allocate {bytes} bytes to time their registration"));
        }
        // Touched first: what is timed is pinning resident pages, as a benchmark's buffers are.
        // SAFETY: p holds `bytes` writable bytes.
        unsafe { std::ptr::write_bytes(p.cast::<u8>(), 1, bytes as usize) };
        let mut reg = Vec::with_capacity(REPEATS);
        let mut dereg = Vec::with_capacity(REPEATS);
        let mut failed = None;
        for _ in 0..REPEATS {
            let t = Instant::now();
            // SAFETY: a live handle and a buffer of `bytes` bytes.
            if unsafe { (self.register)(h, p, bytes as usize) } != 0 {
                failed = Some(format!("s3rdma_client_register refused {bytes} bytes"));
                break;
            }
            reg.push(t.elapsed().as_secs_f64());
            let t = Instant::now();
            // SAFETY: registered just above.
            unsafe { (self.deregister)(h, p) };
            dereg.push(t.elapsed().as_secs_f64());
        }
        // SAFETY: from alloc above.
        unsafe { free(p) };
        if let Some(f) = failed {
            return Err(f);
        }
        Ok(RegistrationCost { bytes, register_s: median(&mut reg), deregister_s: median(&mut dereg) })
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cost(bytes: u64, s: f64) -> RegistrationCost {
        RegistrationCost { bytes, register_s: s * 0.75, deregister_s: s * 0.25 }
    }

    #[test]
    fn the_line_goes_through_the_smallest_and_largest_size() {
        // 0.1 ms at 4 MiB, 1.6 ms at 64 MiB: 25 us per MiB and 0 per call.
        let m = RegistrationModel::fit(vec![cost(64 << 20, 1.6e-3), cost(4 << 20, 0.1e-3)]).unwrap();
        assert!((m.per_byte_s * (1 << 20) as f64 - 25e-6).abs() < 1e-12, "{m:?}");
        assert!(m.per_call_s.abs() < 1e-12, "{m:?}");
        assert!((m.seconds(10, 10 * (4 << 20)) - 1e-3).abs() < 1e-9);
        // A cost that does not grow with size is all per call.
        let flat = RegistrationModel::fit(vec![cost(1 << 20, 2e-6), cost(64 << 20, 1e-6)]).unwrap();
        assert_eq!(flat.per_byte_s, 0.0);
        assert!((flat.per_call_s - 2e-6).abs() < 1e-15);
        assert!(RegistrationModel::fit(vec![cost(1 << 20, 1e-3)]).is_err());
    }
}
