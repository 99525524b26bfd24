//! Memory that transfers read into and write from.
//!
//! Today only page-aligned host memory exists; pinned host memory
//! (`cuMemHostAlloc`) and device memory (`cuMemAlloc`) join [`Buffer`] with the
//! GPU-memory issue, and every backend already takes a `&mut Buffer`, so no
//! signature changes when they do.

use std::alloc::{Layout, alloc, dealloc, handle_alloc_error};
use std::ptr::NonNull;

/// Alignment of host buffers in bytes: one 4 KiB page, which is what O_DIRECT
/// needs on every common Linux filesystem and what `cuMemHostRegister` wants.
pub const HOST_ALIGN: usize = 4096;

/// A destination or source of a transfer.
#[derive(Debug)]
pub enum Buffer {
    /// Pageable host memory, page-aligned.
    Host(HostBuffer),
}

impl Buffer {
    /// A page-aligned host buffer of `len` bytes, every page touched (so page
    /// faults are paid here, before any timed window, not during the first read).
    pub fn host(len: usize) -> Self {
        Buffer::Host(HostBuffer::new(len))
    }

    /// Usable length in bytes.
    pub fn len(&self) -> usize {
        match self {
            Buffer::Host(h) => h.len,
        }
    }

    /// True when the buffer holds zero bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Which kind of memory this is, as recorded in results (`host`).
    pub fn kind(&self) -> &'static str {
        match self {
            Buffer::Host(_) => "host",
        }
    }

    /// The bytes, when the CPU can address them directly (host memory).
    pub fn as_host(&self) -> Option<&[u8]> {
        match self {
            Buffer::Host(h) => Some(h.as_slice()),
        }
    }

    /// The bytes, mutably, when the CPU can address them directly.
    pub fn as_host_mut(&mut self) -> Option<&mut [u8]> {
        match self {
            Buffer::Host(h) => Some(h.as_mut_slice()),
        }
    }

    /// The whole allocation including the tail padding up to [`HOST_ALIGN`]
    /// (for O_DIRECT reads, which must be a multiple of the block size).
    pub fn as_host_mut_padded(&mut self) -> Option<&mut [u8]> {
        match self {
            Buffer::Host(h) => Some(h.as_mut_padded()),
        }
    }
}

/// Page-aligned host memory. Written here rather than taken from a crate because
/// `Vec<u8>` cannot promise the alignment O_DIRECT and later host-memory
/// registration need, and the aligned-allocation crates add nothing over
/// `std::alloc` for one fixed alignment.
pub struct HostBuffer {
    ptr: NonNull<u8>,
    len: usize,
    cap: usize,
}

// SAFETY: HostBuffer owns its allocation exclusively (like Vec<u8>); `&self`
// only gives shared slices and `&mut self` exclusive ones.
unsafe impl Send for HostBuffer {}
unsafe impl Sync for HostBuffer {}

impl HostBuffer {
    /// Allocate `len` bytes rounded up to a multiple of [`HOST_ALIGN`] (at least
    /// one page), aligned to [`HOST_ALIGN`], zero-filled. Aborts on out-of-memory
    /// like every std allocation.
    pub fn new(len: usize) -> Self {
        let cap = len.max(1).div_ceil(HOST_ALIGN) * HOST_ALIGN;
        let layout = Layout::from_size_align(cap, HOST_ALIGN).expect("page-aligned layout");
        // SAFETY: layout has non-zero size.
        let raw = unsafe { alloc(layout) };
        let Some(ptr) = NonNull::new(raw) else { handle_alloc_error(layout) };
        // SAFETY: ptr is valid for cap bytes; writing faults every page in now.
        unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0, cap) };
        HostBuffer { ptr, len, cap }
    }

    /// The first `len` bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid and initialised for cap >= len bytes.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The first `len` bytes, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self is exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    fn as_mut_padded(&mut self) -> &mut [u8] {
        // SAFETY: as above, for the whole allocation.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.cap) }
    }
}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        let layout = Layout::from_size_align(self.cap, HOST_ALIGN).expect("page-aligned layout");
        // SAFETY: allocated in new() with this exact layout.
        unsafe { dealloc(self.ptr.as_ptr(), layout) };
    }
}

impl std::fmt::Debug for HostBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostBuffer").field("len", &self.len).field("cap", &self.cap).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_buffer_is_page_aligned_and_padded() {
        let mut b = Buffer::host(5000);
        assert_eq!(b.len(), 5000);
        let p = b.as_host().unwrap().as_ptr() as usize;
        assert_eq!(p % HOST_ALIGN, 0);
        assert_eq!(b.as_host_mut_padded().unwrap().len(), 8192);
        b.as_host_mut().unwrap()[4999] = 7;
        assert_eq!(b.as_host().unwrap()[4999], 7);
    }

    #[test]
    fn empty_buffer_still_allocates_one_page() {
        let mut b = Buffer::host(0);
        assert!(b.is_empty());
        assert_eq!(b.as_host_mut_padded().unwrap().len(), HOST_ALIGN);
    }
}

/// What the CUDA driver reports, for `verify` and run records.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CudaInfo {
    /// `cuDriverGetVersion`, e.g. 13000 for CUDA 13.0.
    pub driver_version: i32,
    /// (name, device memory bytes) per device, in ordinal order.
    pub devices: Vec<(String, u64)>,
}

/// Probe the CUDA driver without ever panicking: cudarc loads libcuda at
/// run time and panics on first use when it is absent, so presence is checked
/// first (cudarc's `is_culib_present`).
///
/// Errors: a one-line reason (no driver library, init failed, no devices).
pub fn cuda_probe() -> Result<CudaInfo, String> {
    use cudarc::driver::{result, sys};
    // SAFETY: only tries to dlopen the library names cudarc knows.
    if !unsafe { sys::is_culib_present() } {
        return Err("no CUDA driver library (libcuda.so) on this host".into());
    }
    result::init().map_err(|e| format!("cuInit failed: {e:?}"))?;
    let mut v = 0i32;
    // SAFETY: v is a valid out-pointer; the driver is initialised above.
    unsafe { sys::cuDriverGetVersion(&mut v) }.result().map_err(|e| format!("cuDriverGetVersion failed: {e:?}"))?;
    let n = result::device::get_count().map_err(|e| format!("cuDeviceGetCount failed: {e:?}"))?;
    let mut devices = Vec::new();
    for i in 0..n {
        let dev = result::device::get(i).map_err(|e| format!("cuDeviceGet({i}) failed: {e:?}"))?;
        let name = result::device::get_name(dev).map_err(|e| format!("cuDeviceGetName({i}) failed: {e:?}"))?;
        // SAFETY: dev is a valid device handle from cuDeviceGet.
        let mem = unsafe { result::device::total_mem(dev) }.map_err(|e| format!("cuDeviceTotalMem({i}) failed: {e:?}"))?;
        devices.push((name, mem as u64));
    }
    if devices.is_empty() {
        return Err(format!("CUDA driver {}.{} sees no GPU", v / 1000, v % 1000 / 10));
    }
    Ok(CudaInfo { driver_version: v, devices })
}
