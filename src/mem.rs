//! Memory that transfers read into and write from: page-aligned host memory,
//! pinned (page-locked) host memory (`cuMemHostAlloc`) and device memory
//! (`cuMemAlloc`), through cudarc's driver API loaded at run time, so the
//! binary builds and runs with no CUDA installed.
//!
//! The driver calls are made through cudarc's `result` layer rather than its
//! safe layer: the safe layer tracks events per allocation and would
//! serialise the staged pipeline's copies on different streams into one
//! device buffer; here each copy's ordering is explicit (one stream per
//! bounce buffer, synchronised before the bounce buffer is reused).
//! No managed memory anywhere. Every CUDA call is checked.

use std::alloc::{Layout, alloc, dealloc, handle_alloc_error};
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use cudarc::driver::{result, sys};

/// Alignment of host buffers in bytes: one 4 KiB page, which is what O_DIRECT
/// needs on every common Linux filesystem and what `cuMemHostRegister` wants.
pub const HOST_ALIGN: usize = 4096;
/// Alignment (and transparent huge page size on x86-64) of host buffers of 2 MiB or more.
pub const HUGE_PAGE: usize = 2 << 20;

/// A destination or source of a transfer.
#[derive(Debug)]
pub enum Buffer {
    /// Pageable host memory, page-aligned.
    Host(HostBuffer),
    /// Page-locked host memory (DMA-able by the GPU and the NIC).
    Pinned(PinnedBuffer),
    /// Device memory on one GPU, with bounce buffers for staged writes.
    Device(DeviceBuffer),
}

impl Buffer {
    /// A page-aligned host buffer of `len` bytes, every page touched (so page
    /// faults are paid here, before any timed window, not during the first read).
    pub fn host(len: usize) -> Self {
        Buffer::Host(HostBuffer::new(len))
    }

    /// Host memory that takes over `v` without copying it (e.g. a serialized
    /// blob). Not page-aligned, so not for O_DIRECT reads.
    pub fn from_vec(mut v: Vec<u8>) -> Self {
        let len = v.len();
        let ptr = NonNull::new(v.as_mut_ptr()).unwrap_or(NonNull::dangling());
        Buffer::Host(HostBuffer { ptr, len, cap: len, owned: true, align: 1, vec: Some(v) })
    }

    /// Usable length in bytes.
    pub fn len(&self) -> usize {
        match self {
            Buffer::Host(h) => h.len,
            Buffer::Pinned(p) => p.len,
            Buffer::Device(d) => d.len,
        }
    }

    /// True when the buffer holds zero bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes, when the CPU can address them directly (host or pinned memory).
    pub fn as_host(&self) -> Option<&[u8]> {
        match self {
            Buffer::Host(h) => Some(h.as_slice()),
            Buffer::Pinned(p) => Some(p.as_slice()),
            Buffer::Device(_) => None,
        }
    }

    /// The bytes, mutably, when the CPU can address them directly.
    pub fn as_host_mut(&mut self) -> Option<&mut [u8]> {
        match self {
            Buffer::Host(h) => Some(h.as_mut_slice()),
            Buffer::Pinned(p) => Some(p.as_mut_slice()),
            Buffer::Device(_) => None,
        }
    }

    /// The whole allocation including the tail padding up to [`HOST_ALIGN`]
    /// (for O_DIRECT reads, which must be a multiple of the block size).
    pub fn as_host_mut_padded(&mut self) -> Option<&mut [u8]> {
        match self {
            Buffer::Host(h) => Some(h.as_mut_padded()),
            // cuMemHostAlloc memory is page-aligned; its padding is not ours to use.
            Buffer::Pinned(p) => Some(p.as_mut_slice()),
            Buffer::Device(_) => None,
        }
    }

    /// A non-owning buffer over `range` of this one, of the same kind (a
    /// device view has no bounce buffers). Lets concurrent transfers fill
    /// disjoint parts of one buffer, e.g. a checkpoint's chunks, each through
    /// its own `&mut Buffer`.
    ///
    /// # Safety
    /// The view must be dropped before `self` is dropped or moved, and while
    /// it lives no other view or `self` may touch the same bytes.
    ///
    /// # Panics
    /// When `range` is not within the buffer (a caller bug).
    pub unsafe fn view(&self, range: std::ops::Range<usize>) -> Buffer {
        assert!(range.start <= range.end && range.end <= self.len(), "view {range:?} outside a {} byte buffer", self.len());
        let len = range.end - range.start;
        match self {
            Buffer::Host(h) => Buffer::Host(HostBuffer {
                // SAFETY: within the allocation (asserted above).
                ptr: unsafe { NonNull::new_unchecked(h.ptr.as_ptr().add(range.start)) },
                len,
                // The tail padding belongs to the view that ends the buffer.
                cap: if range.end == h.len { h.cap - range.start } else { len },
                owned: false,
                align: HOST_ALIGN,
                vec: None,
            }),
            Buffer::Pinned(p) => Buffer::Pinned(PinnedBuffer {
                // SAFETY: within the allocation (asserted above).
                ptr: unsafe { NonNull::new_unchecked(p.ptr.as_ptr().add(range.start)) },
                len,
                gpu: p.gpu.clone(),
                owned: false,
            }),
            Buffer::Device(d) => Buffer::Device(DeviceBuffer {
                dptr: d.dptr + range.start as u64,
                len,
                gpu: d.gpu.clone(),
                bounce: Vec::new(),
                streams: Vec::new(),
                owned: false,
            }),
        }
    }

    /// Set every byte to zero.
    ///
    /// Errors: the driver's error for device memory.
    pub fn zero(&mut self) -> Result<(), String> {
        match self {
            Buffer::Device(d) => {
                d.gpu.bind()?;
                // SAFETY: dptr is valid for len bytes.
                unsafe { sys::cuMemsetD8_v2(d.dptr, 0, d.len) }.result().map_err(|e| cuda_err("cuMemsetD8", e))
            }
            other => {
                other.as_host_mut().expect("host or pinned").fill(0);
                Ok(())
            }
        }
    }

    /// Copy `dst.len()` bytes at `offset` into host memory, whatever the kind.
    ///
    /// Errors: the range overruns the buffer, or the driver's error.
    pub fn copy_to_host(&self, offset: usize, dst: &mut [u8]) -> Result<(), String> {
        match self {
            Buffer::Device(d) => d.read_back(offset, dst),
            other => {
                let h = other.as_host().expect("host or pinned");
                let src =
                    h.get(offset..offset + dst.len()).ok_or_else(|| format!("read of {} bytes at {offset} overruns the {} byte buffer", dst.len(), h.len()))?;
                dst.copy_from_slice(src);
                Ok(())
            }
        }
    }

    /// Copy `src` (host memory) to byte `offset`, whatever the kind.
    ///
    /// Errors: the range overruns the buffer, or the driver's error.
    pub fn copy_from_host(&mut self, offset: usize, src: &[u8]) -> Result<(), String> {
        match self {
            Buffer::Device(d) => d.write_from_host(offset, src),
            other => {
                let h = other.as_host_mut().expect("host or pinned");
                let len = h.len();
                let dst =
                    h.get_mut(offset..offset + src.len()).ok_or_else(|| format!("write of {} bytes at {offset} overruns the {len} byte buffer", src.len()))?;
                dst.copy_from_slice(src);
                Ok(())
            }
        }
    }

    /// Allocate a buffer of `len` bytes of the kind `dest` names. Device
    /// buffers get `bounce` pinned bounce buffers of `chunk` bytes for the
    /// staged pipeline when `bounce > 0`.
    ///
    /// Errors: one line when `dest` needs a GPU and none is usable.
    pub fn for_dest(dest: Dest, gpu: Option<&Arc<Gpu>>, len: usize, bounce: usize, chunk: usize) -> Result<Buffer, String> {
        match (dest, gpu) {
            (Dest::Host, _) => Ok(Buffer::host(len)),
            (Dest::Pinned, Some(g)) => Ok(Buffer::Pinned(PinnedBuffer::new(g, len)?)),
            (Dest::Device, Some(g)) => Ok(Buffer::Device(DeviceBuffer::new(g, len, bounce, chunk)?)),
            (d, None) => Err(format!("--dest {} needs a GPU, and none was opened", d.name())),
        }
    }
}

/// Where a bench puts the bytes it reads (`--dest`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Dest {
    /// Pageable host memory.
    Host,
    /// Page-locked host memory.
    Pinned,
    /// GPU device memory.
    Device,
}

impl Dest {
    /// The name as typed and recorded.
    pub fn name(self) -> &'static str {
        match self {
            Dest::Host => "host",
            Dest::Pinned => "pinned",
            Dest::Device => "device",
        }
    }
}

fn cuda_err(what: &str, e: cudarc::driver::DriverError) -> String {
    format!("{what} failed: {e:?}")
}

/// One GPU's primary context. CUDA contexts are per thread: call
/// [`Gpu::bind`] on a thread before it makes CUDA calls (the rdma workers do
/// it once; async code does it before each batch, since tasks move between threads).
#[derive(Debug)]
pub struct Gpu {
    /// `--device` ordinal.
    pub ordinal: usize,
    /// Device name.
    pub name: String,
    /// Device memory in bytes.
    pub total_mem: u64,
    /// When the open began and ended (driver load, `cuInit`, primary context).
    pub opened: (Instant, Instant),
    dev: sys::CUdevice,
    ctx: sys::CUcontext,
}

// SAFETY: a primary context may be made current on any thread; the handle is
// only passed to cuCtxSetCurrent.
unsafe impl Send for Gpu {}
unsafe impl Sync for Gpu {}

static ACTIVE_GPU: OnceLock<Arc<Gpu>> = OnceLock::new();
static OPEN_GPUS: Mutex<Vec<Arc<Gpu>>> = Mutex::new(Vec::new());
/// Opens started by [`Gpu::open_in_background`], by ordinal.
#[allow(clippy::type_complexity)]
static OPENING: Mutex<Vec<(usize, std::thread::JoinHandle<Result<Arc<Gpu>, String>>)>> = Mutex::new(Vec::new());

impl Gpu {
    /// Open GPU `ordinal` (its primary context) and bind it to this thread.
    /// The first GPU opened becomes the process's active GPU (see [`bind_active_gpu`]).
    ///
    /// Errors: one line, never a panic, when there is no driver library
    /// (checked before cudarc's first call, which would panic), no such
    /// device, or a driver call fails.
    pub fn open(ordinal: usize) -> Result<Arc<Gpu>, String> {
        let opening = {
            let mut o = OPENING.lock().unwrap_or_else(|e| e.into_inner());
            o.iter().position(|(n, _)| *n == ordinal).map(|i| o.swap_remove(i).1)
        };
        if let Some(h) = opening {
            let g = h.join().map_err(|_| format!("opening GPU {ordinal} panicked"))??;
            g.bind()?;
            return Ok(g);
        }
        Self::open_now(ordinal)
    }

    /// [`Gpu::open`] on this thread, never waiting for a background open
    /// (the background thread itself runs this).
    fn open_now(ordinal: usize) -> Result<Arc<Gpu>, String> {
        if let Some(g) = OPEN_GPUS.lock().unwrap_or_else(|e| e.into_inner()).iter().find(|g| g.ordinal == ordinal) {
            g.bind()?;
            return Ok(g.clone());
        }
        let t0 = Instant::now();
        let info = cuda_probe()?;
        let Some((name, total_mem)) = info.devices.get(ordinal).cloned() else {
            return Err(format!("--device {ordinal}: this host has {} GPU(s), numbered from 0", info.devices.len()));
        };
        let dev = result::device::get(ordinal as i32).map_err(|e| cuda_err("cuDeviceGet", e))?;
        // SAFETY: dev is valid; the primary context is released in Drop.
        let ctx = unsafe { result::primary_ctx::retain(dev) }.map_err(|e| cuda_err("cuDevicePrimaryCtxRetain", e))?;
        let g = Arc::new(Gpu { ordinal, name, total_mem, opened: (t0, Instant::now()), dev, ctx });
        g.bind()?;
        let _ = ACTIVE_GPU.set(g.clone());
        OPEN_GPUS.lock().unwrap_or_else(|e| e.into_inner()).push(g.clone());
        Ok(g)
    }

    /// Start opening GPU `ordinal` on a thread of its own (driver load,
    /// `cuInit`, primary context: a few hundred milliseconds), so that work
    /// needing no GPU (opening the store, reading headers) runs meanwhile;
    /// the next [`Gpu::open`] of that ordinal waits for it and returns its
    /// result, errors included. Does nothing when it is open or opening, or
    /// when no thread can be started (the later open then does the work).
    pub fn open_in_background(ordinal: usize) {
        let mut o = OPENING.lock().unwrap_or_else(|e| e.into_inner());
        if o.iter().any(|(n, _)| *n == ordinal) || OPEN_GPUS.lock().unwrap_or_else(|e| e.into_inner()).iter().any(|g| g.ordinal == ordinal) {
            return;
        }
        if let Ok(h) = std::thread::Builder::new().name(format!("open-gpu-{ordinal}")).spawn(move || Gpu::open_now(ordinal)) {
            o.push((ordinal, h));
        }
    }

    /// Make this GPU's context current on the calling thread.
    pub fn bind(&self) -> Result<(), String> {
        // SAFETY: ctx is a retained primary context.
        unsafe { result::ctx::set_current(self.ctx) }.map_err(|e| cuda_err("cuCtxSetCurrent", e))
    }
}

impl Drop for Gpu {
    fn drop(&mut self) {
        // SAFETY: retained in open().
        let _ = unsafe { result::primary_ctx::release(self.dev) };
    }
}

/// Bind the process's active GPU (if one was opened) to this thread; the rdma
/// workers call it before their first transfer (older cuObject builds
/// segfault in a thread with no context).
pub fn bind_active_gpu() -> Result<(), String> {
    match ACTIVE_GPU.get() {
        Some(g) => g.bind(),
        None => Ok(()),
    }
}

/// Page-locked host memory from `cuMemHostAlloc` (flags 0: cached, not
/// write-combined, so the CPU can also read it at full speed).
pub struct PinnedBuffer {
    ptr: NonNull<u8>,
    len: usize,
    gpu: Arc<Gpu>,
    /// False for a view (see [`Buffer::view`]): the owner frees it.
    owned: bool,
}

// SAFETY: exclusively owned, like HostBuffer.
unsafe impl Send for PinnedBuffer {}
unsafe impl Sync for PinnedBuffer {}

impl PinnedBuffer {
    /// Allocate and touch `len` bytes.
    pub fn new(gpu: &Arc<Gpu>, len: usize) -> Result<Self, String> {
        gpu.bind()?;
        // SAFETY: a size > 0; freed in Drop with cuMemFreeHost.
        let raw = unsafe { result::malloc_host(len.max(1), 0) }.map_err(|e| cuda_err(&format!("cuMemHostAlloc({len} bytes)"), e))?;
        let ptr = NonNull::new(raw as *mut u8).ok_or("cuMemHostAlloc returned NULL")?;
        // SAFETY: valid for len.max(1) bytes; touching faults the pages in now.
        unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0, len.max(1)) };
        Ok(PinnedBuffer { ptr, len, gpu: gpu.clone(), owned: true })
    }
    fn as_slice(&self) -> &[u8] {
        // SAFETY: valid and initialised for len bytes.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
    fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above; &mut self is exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        let _ = self.gpu.bind();
        // SAFETY: allocated by cuMemHostAlloc in new(); no copy uses it any more
        // (DeviceBuffer synchronises its streams before dropping its bounce buffers).
        let _ = unsafe { result::free_host(self.ptr.as_ptr() as *mut std::ffi::c_void) };
    }
}

impl std::fmt::Debug for PinnedBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedBuffer").field("len", &self.len).finish()
    }
}

/// Device memory from `cuMemAlloc`, plus the staged pipeline's bounce
/// buffers (pinned) and one copy stream per bounce buffer.
pub struct DeviceBuffer {
    dptr: sys::CUdeviceptr,
    len: usize,
    gpu: Arc<Gpu>,
    /// Pinned bounce buffers (empty when the transport writes device memory itself).
    pub bounce: Vec<Buffer>,
    streams: Vec<sys::CUstream>,
    /// False for a view (see [`Buffer::view`]): the owner frees it.
    owned: bool,
}

// SAFETY: exclusively owned; CUDA handles are usable from any thread with the context bound.
unsafe impl Send for DeviceBuffer {}
unsafe impl Sync for DeviceBuffer {}

impl DeviceBuffer {
    /// Allocate `len` bytes on `gpu` (zeroed, so it is really backed before
    /// any timed window) and `bounce` pinned bounce buffers of `chunk` bytes.
    pub fn new(gpu: &Arc<Gpu>, len: usize, bounce: usize, chunk: usize) -> Result<Self, String> {
        gpu.bind()?;
        // SAFETY: size > 0; freed in Drop.
        let dptr = unsafe { result::malloc_sync(len.max(1)) }.map_err(|e| cuda_err(&format!("cuMemAlloc({len} bytes) on GPU {}", gpu.ordinal), e))?;
        let mut d = DeviceBuffer { dptr, len, gpu: gpu.clone(), bounce: Vec::new(), streams: Vec::new(), owned: true };
        // SAFETY: dptr is valid for len bytes.
        unsafe { sys::cuMemsetD8_v2(dptr, 0, len.max(1)) }.result().map_err(|e| cuda_err("cuMemsetD8", e))?;
        for _ in 0..bounce {
            d.bounce.push(Buffer::Pinned(PinnedBuffer::new(gpu, chunk)?));
            let s = result::stream::create(result::stream::StreamKind::NonBlocking).map_err(|e| cuda_err("cuStreamCreate", e))?;
            d.streams.push(s);
        }
        Ok(d)
    }

    /// The device address and length.
    pub fn device_ptr(&self) -> (u64, usize) {
        (self.dptr, self.len)
    }

    /// Queue a copy of `src` (pinned host memory) to byte `offset` on bounce
    /// buffer `i`'s stream, for callers that hold the bounce buffers
    /// themselves ([`crate::store::staged_read`]). `src` must stay allocated
    /// and unwritten until [`DeviceBuffer::wait`]`(i)` returns.
    ///
    /// Errors: the range overruns the buffer, `i` names no stream, or the driver's error.
    pub fn copy_in_async_from(&self, i: usize, src: &[u8], offset: usize) -> Result<(), String> {
        if offset + src.len() > self.len {
            return Err(format!("copy of {} bytes at {offset} overruns the {} byte device buffer", src.len(), self.len));
        }
        let stream = *self.streams.get(i).ok_or_else(|| format!("no stream {i}: {} bounce buffers", self.streams.len()))?;
        self.gpu.bind()?;
        // SAFETY: dst range checked above; the caller keeps src pinned and
        // unwritten until wait(i).
        unsafe { result::memcpy_htod_async(self.dptr + offset as u64, src, stream) }.map_err(|e| cuda_err("cuMemcpyHtoDAsync", e))
    }

    /// Wait for bounce buffer `i`'s copies.
    pub fn wait(&self, i: usize) -> Result<(), String> {
        self.gpu.bind()?;
        // SAFETY: a stream created in new().
        unsafe { result::stream::synchronize(self.streams[i]) }.map_err(|e| cuda_err("cuStreamSynchronize", e))
    }

    /// Copy `src` (host memory) to byte `offset` of this buffer, synchronously.
    ///
    /// Errors: the range overruns the buffer, or the driver's error.
    pub fn write_from_host(&mut self, offset: usize, src: &[u8]) -> Result<(), String> {
        if offset + src.len() > self.len {
            return Err(format!("copy of {} bytes at {offset} overruns the {} byte device buffer", src.len(), self.len));
        }
        self.gpu.bind()?;
        // SAFETY: range checked; synchronous copy.
        unsafe { result::memcpy_htod_sync(self.dptr + offset as u64, src) }.map_err(|e| cuda_err("cuMemcpyHtoD", e))
    }

    /// Copy all of `src` (device memory, any GPU of this process) to byte
    /// `offset` of this buffer, synchronously (device-to-device).
    ///
    /// Errors: the range overruns the buffer, or the driver's error.
    pub fn copy_from_device(&mut self, offset: usize, src: &DeviceBuffer) -> Result<(), String> {
        if offset + src.len > self.len {
            return Err(format!("copy of {} bytes at {offset} overruns the {} byte device buffer", src.len, self.len));
        }
        self.gpu.bind()?;
        // SAFETY: both ranges are within live allocations; synchronous copy.
        unsafe { result::memcpy_dtod_sync(self.dptr + offset as u64, src.dptr, src.len) }.map_err(|e| cuda_err("cuMemcpyDtoD", e))
    }

    /// Copy `len` bytes at `offset` back to the host (verification, tests).
    pub fn read_back(&self, offset: usize, dst: &mut [u8]) -> Result<(), String> {
        if offset + dst.len() > self.len {
            return Err("read_back beyond the buffer".into());
        }
        self.gpu.bind()?;
        for i in 0..self.streams.len() {
            self.wait(i)?;
        }
        // SAFETY: range checked; synchronous copy.
        unsafe { result::memcpy_dtoh_sync(dst, self.dptr + offset as u64) }.map_err(|e| cuda_err("cuMemcpyDtoH", e))
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        let _ = self.gpu.bind();
        for (i, s) in self.streams.iter().enumerate() {
            let _ = self.wait(i);
            // SAFETY: created in new(), idle after the wait.
            let _ = unsafe { result::stream::destroy(*s) };
        }
        self.bounce.clear();
        if self.owned {
            // SAFETY: allocated in new(); no copy is in flight.
            let _ = unsafe { result::free_sync(self.dptr) };
        }
    }
}

impl std::fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceBuffer").field("len", &self.len).field("bounce", &self.bounce.len()).finish()
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
    /// False for a view (see [`Buffer::view`]): the owner frees it.
    owned: bool,
    /// Alignment the allocation was made with (Drop needs the same layout).
    align: usize,
    /// The allocation when adopted from a `Vec` ([`Buffer::from_vec`]); freed by its own Drop.
    vec: Option<Vec<u8>>,
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
        // SAFETY: ptr is valid for cap bytes; writing faults every page in now.
        unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0, cap) };
        HostBuffer { ptr, len, cap, owned: true, align, vec: None }
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
