//! Host memory: page-aligned pageable buffers and pinned (page-locked)
//! ones, which are the same allocation registered with the driver.

use std::alloc::{Layout, alloc, dealloc, handle_alloc_error};
use std::ptr::NonNull;
use std::sync::Arc;

use cudarc::driver::sys;

use super::{Gpu, HOST_ALIGN, HUGE_PAGE, cuda_err};

/// Page-locked host memory: a [`HostBuffer`] (2 MiB-aligned and advised
/// for transparent huge pages from 2 MiB up, every page touched) registered
/// with the driver (`cuMemHostRegister`, flags 0: cached, not write-combined,
/// so the CPU reads it at full speed too), unregistered before it is freed.
///
/// Registration rather than `cuMemHostAlloc`: on the H200 machine 16 x 64 MiB
/// took 0.42–0.57 s through `cuMemHostAlloc` plus 0.1 s to touch, and 0.07 s
/// allocated, touched and registered this way with huge pages (0.12–0.15 s with
/// 4 KiB pages): record `results/archive/pinned-probe-20261202T003004Z-gpu.json`,
/// script `scripts/pinned_probe.py`.
pub struct PinnedBuffer {
    pub(super) host: HostBuffer,
    pub(super) gpu: Arc<Gpu>,
    /// False for a view (see [`super::Buffer::view`]): the owner unregisters.
    pub(super) owned: bool,
}

// SAFETY: exclusively owned, like HostBuffer.
unsafe impl Send for PinnedBuffer {}
// SAFETY: as HostBuffer's: `&self` gives shared slices only.
unsafe impl Sync for PinnedBuffer {}

impl PinnedBuffer {
    /// Allocate, touch and register `len` bytes (rounded up like [`HostBuffer::new`]).
    ///
    /// Errors: the driver's, e.g. when the pages cannot be locked.
    pub fn new(gpu: &Arc<Gpu>, len: usize) -> Result<Self, String> {
        gpu.bind()?;
        let host = HostBuffer::new(len);
        // SAFETY: the range is our live allocation of cap bytes; unregistered in Drop before it is freed.
        unsafe { sys::cuMemHostRegister_v2(host.ptr.as_ptr().cast(), host.cap, 0) }
            .result()
            .map_err(|e| cuda_err(&format!("cuMemHostRegister({} bytes)", host.cap), e))?;
        Ok(PinnedBuffer { host, gpu: gpu.clone(), owned: true })
    }

    /// Usable length in bytes.
    pub fn len(&self) -> usize {
        self.host.len
    }

    /// True when the buffer holds zero bytes.
    pub fn is_empty(&self) -> bool {
        self.host.len == 0
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        let _ = self.gpu.bind();
        // SAFETY: registered in new(); no copy uses it any more (DeviceBuffer
        // synchronises its streams before dropping its bounce buffers). The
        // HostBuffer frees the memory after this.
        let _ = unsafe { sys::cuMemHostUnregister(self.host.ptr.as_ptr().cast()) };
    }
}

impl std::fmt::Debug for PinnedBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedBuffer").field("len", &self.host.len).finish()
    }
}

/// Page-aligned host memory. Written here rather than taken from a crate because
/// `Vec<u8>` cannot promise the alignment O_DIRECT and later host-memory
/// registration need, and the aligned-allocation crates add nothing over
/// `std::alloc` for one fixed alignment.
pub struct HostBuffer {
    pub(super) ptr: NonNull<u8>,
    pub(super) len: usize,
    pub(super) cap: usize,
    /// False for a view (see [`Buffer::view`]): the owner frees it.
    pub(super) owned: bool,
    /// Alignment the allocation was made with (Drop needs the same layout).
    pub(super) align: usize,
    /// The allocation when adopted from a `Vec` ([`Buffer::from_vec`]); freed by its own Drop.
    pub(super) vec: Option<Vec<u8>>,
    /// Which allocation this is ([`next_allocation`]); a view carries its owner's.
    pub(super) allocation: u64,
}

/// A number no other host allocation of this process had: what tells a
/// buffer apart from a later one at the same address, whose pages an RDMA
/// registration of the first would not cover (src/store/rdma/libs3rdma).
pub(super) fn next_allocation() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

// SAFETY: HostBuffer owns its allocation exclusively (like Vec<u8>); `&self`
// only gives shared slices and `&mut self` exclusive ones.
unsafe impl Send for HostBuffer {}
// SAFETY: as for Send: `&self` gives shared slices only.
unsafe impl Sync for HostBuffer {}

impl HostBuffer {
    /// Allocate `len` bytes rounded up to a multiple of [`HOST_ALIGN`] (at least
    /// one page), aligned to [`HOST_ALIGN`], zero-filled. Aborts on out-of-memory
    /// like every std allocation.
    pub fn new(len: usize) -> Self {
        // Buffers of 2 MiB and more are 2 MiB-aligned and ask for transparent
        // huge pages: touching 1 GiB in 4 KiB pages is 262,144 page faults
        // (measured on the 2-core VM: 1.2 s of system time for 4 x 256 MiB),
        // in 2 MiB pages 512.
        let align = if len >= HUGE_PAGE { HUGE_PAGE } else { HOST_ALIGN };
        let cap = len.max(1).div_ceil(align) * align;
        let layout = Layout::from_size_align(cap, align).expect("aligned layout");
        // SAFETY: layout has non-zero size.
        let raw = unsafe { alloc(layout) };
        let Some(ptr) = NonNull::new(raw) else { handle_alloc_error(layout) };
        if align == HUGE_PAGE {
            // SAFETY: the range is our allocation; advice only, failure is harmless
            // (THP off, or not Linux: 4 KiB pages as before).
            #[cfg(target_os = "linux")]
            unsafe {
                libc::madvise(ptr.as_ptr().cast(), cap, libc::MADV_HUGEPAGE);
            }
        }
        touch(ptr, cap);
        HostBuffer { ptr, len, cap, owned: true, align, vec: None, allocation: next_allocation() }
    }

    /// A non-owning buffer over `range` (see [`super::Buffer::view`]): the tail
    /// padding belongs to the view that ends the buffer.
    pub(super) fn view(&self, range: std::ops::Range<usize>) -> HostBuffer {
        let len = range.end - range.start;
        HostBuffer {
            // SAFETY: within the allocation (the caller asserts the range).
            ptr: unsafe { NonNull::new_unchecked(self.ptr.as_ptr().add(range.start)) },
            len,
            cap: if range.end == self.len { self.cap - range.start } else { len },
            owned: false,
            align: HOST_ALIGN,
            vec: None,
            allocation: self.allocation,
        }
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

    /// The whole allocation, tail padding included.
    pub fn as_mut_padded(&mut self) -> &mut [u8] {
        // SAFETY: as above, for the whole allocation.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.cap) }
    }
}

/// Write zeros over `cap` bytes at `ptr`, faulting every page in now; from
/// 256 MiB up on one thread per 64 MiB (at most one per core, 16 at most):
/// the kernel zeroes and maps pages per faulting thread, so one thread
/// touching 16 GiB is many times slower than 16.
fn touch(ptr: NonNull<u8>, cap: usize) {
    const SERIAL_BELOW: usize = 256 << 20;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(16).min(cap / (64 << 20)).max(1);
    if cap < SERIAL_BELOW || threads == 1 {
        // SAFETY: ptr is valid for cap bytes (the caller's fresh allocation).
        unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0, cap) };
        return;
    }
    let piece = cap.div_ceil(threads).div_ceil(HUGE_PAGE) * HUGE_PAGE;
    let base = ptr.as_ptr() as usize;
    std::thread::scope(|sc| {
        for start in (0..cap).step_by(piece) {
            let n = piece.min(cap - start);
            // SAFETY: disjoint pieces of the caller's fresh allocation of cap bytes.
            sc.spawn(move || unsafe { std::ptr::write_bytes((base + start) as *mut u8, 0, n) });
        }
    });
}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        if !self.owned || self.vec.is_some() {
            return;
        }
        let layout = Layout::from_size_align(self.cap, self.align).expect("aligned layout");
        // SAFETY: allocated in new() with this exact layout.
        unsafe { dealloc(self.ptr.as_ptr(), layout) };
    }
}

impl std::fmt::Debug for HostBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostBuffer").field("len", &self.len).field("cap", &self.cap).finish()
    }
}

/// Refuse to allocate `bytes` of host memory when the host has less available
/// (sysinfo's available memory): an allocation failure aborts the process, and
/// the out-of-memory killer gives no message at all.
///
/// Errors: [`crate::error::Error::Usage`] naming `what`, both sizes and `fix`.
pub fn check_host_memory(what: &str, bytes: u64, fix: &str) -> crate::error::Result<()> {
    let mut sys = sysinfo::System::new();
    sys.refresh_memory();
    let avail = sys.available_memory();
    if avail > 0 && bytes > avail {
        return Err(crate::error::Error::Usage(format!(
            "{what} needs {} of host memory and this host has {} available: {fix}",
            crate::units::size_approx(bytes),
            crate::units::size_approx(avail)
        )));
    }
    Ok(())
}
