//! Memory that transfers read into and write from: page-aligned host memory,
//! pinned (page-locked) host memory (registered with `cuMemHostRegister`) and device memory
//! (`cuMemAlloc`), through cudarc's driver API loaded at run time, so the
//! binary builds and runs with no CUDA installed.
//!
//! The driver calls are made through cudarc's `result` layer rather than its
//! safe layer: the safe layer tracks events per allocation and would
//! serialise the staged pipeline's copies on different streams into one
//! device buffer; here each copy's ordering is explicit (one stream per
//! bounce buffer, synchronised before the bounce buffer is reused).
//! No managed memory anywhere. Every CUDA call is checked.

use std::ptr::NonNull;
use std::sync::Arc;

use crate::flag::DEST;
use cudarc::driver::{result, sys};

mod config;
mod gemm;
mod gpu;
mod host;
mod kernels;
mod landing;
mod sequence;
mod stream_copy;

pub use config::MemConfig;
pub use gemm::Gemm;
pub use gpu::{CudaInfo, Gpu, bind_active_gpu, cuda_probe};
pub use host::{HostBuffer, PinnedBuffer, check_host_memory};
pub use landing::{Landing, Run, checksum as landing_checksum};
pub use stream_copy::{STREAM_MIN, copy_streaming};

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
        Buffer::Host(HostBuffer { ptr, len, cap: len, owned: true, align: 1, vec: Some(v), allocation: host::next_allocation() })
    }

    /// Which host allocation the CPU-addressable bytes belong to (a view
    /// names its owner's), distinct for every allocation of the process even
    /// at a reused address; `None` for device memory.
    pub fn allocation(&self) -> Option<u64> {
        match self {
            Buffer::Host(h) => Some(h.allocation),
            Buffer::Pinned(p) => Some(p.host.allocation),
            Buffer::Device(_) => None,
        }
    }

    /// Usable length in bytes.
    pub fn len(&self) -> usize {
        match self {
            Buffer::Host(h) => h.len,
            Buffer::Pinned(p) => p.len(),
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
            Buffer::Pinned(p) => Some(p.host.as_slice()),
            Buffer::Device(_) => None,
        }
    }

    /// The bytes, mutably, when the CPU can address them directly.
    pub fn as_host_mut(&mut self) -> Option<&mut [u8]> {
        match self {
            Buffer::Host(h) => Some(h.as_mut_slice()),
            Buffer::Pinned(p) => Some(p.host.as_mut_slice()),
            Buffer::Device(_) => None,
        }
    }

    /// The whole allocation including the tail padding up to [`HOST_ALIGN`]
    /// (for O_DIRECT reads, which must be a multiple of the block size).
    pub fn as_host_mut_padded(&mut self) -> Option<&mut [u8]> {
        match self {
            Buffer::Host(h) => Some(h.as_mut_padded()),
            // The registration covers the whole allocation, padding included.
            Buffer::Pinned(p) => Some(p.host.as_mut_padded()),
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
            Buffer::Host(h) => Buffer::Host(h.view(range)),
            Buffer::Pinned(p) => Buffer::Pinned(PinnedBuffer { host: p.host.view(range), gpu: p.gpu.clone(), owned: false }),
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

    /// Invert every byte (bitwise NOT) in place: twice gives the bytes back.
    /// Device memory: a kernel over the aligned words (`kernels.ptx`), the
    /// unaligned ends through host memory; host memory: on every core.
    ///
    /// Errors: the driver's for device memory.
    pub fn invert(&mut self) -> Result<(), String> {
        match self {
            Buffer::Device(d) => {
                d.gpu.bind()?;
                let head = ((8 - d.dptr % 8) % 8).min(d.len as u64) as usize;
                let words = ((d.len - head) / 8) as u64;
                let tail = head + words as usize * 8;
                for (at, n) in [(0, head), (tail, d.len - tail)] {
                    let mut b = [0u8; 8];
                    d.read_back(at, &mut b[..n])?;
                    b.iter_mut().for_each(|x| *x = !*x);
                    d.write_from_host(at, &b[..n])?;
                }
                let (mut data, mut n) = (d.dptr + head as u64, words);
                let mut params = [&mut data as *mut u64 as *mut std::ffi::c_void, &mut n as *mut u64 as *mut std::ffi::c_void];
                // SAFETY: `words` aligned words from dptr + head lie within this
                // live buffer; two u64 parameters, as kernels.ptx declares s3rdma_invert's.
                unsafe { kernels::launch(d.gpu.ordinal, "s3rdma_invert", words, &mut params) }
            }
            other => {
                let h = other.as_host_mut().expect("host or pinned");
                let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
                let piece = h.len().div_ceil(threads).max(1 << 20);
                std::thread::scope(|sc| {
                    for part in h.chunks_mut(piece) {
                        sc.spawn(move || part.iter_mut().for_each(|x| *x = !*x));
                    }
                });
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
            (d, None) => Err(format!("{DEST} {} needs a GPU, and none was opened", d.name())),
        }
    }
}

/// Where a bench puts the bytes it reads (`--dest`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
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

pub(crate) fn cuda_err(what: &str, e: cudarc::driver::DriverError) -> String {
    format!("{what} failed: {e:?}")
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
// SAFETY: as for Send: `&self` methods only read or enqueue copies on the
// buffer's own streams, which CUDA allows from several threads.
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
        self.copy_in_async_via(self, i, src, offset)
    }

    /// [`DeviceBuffer::copy_in_async_from`] on stream `i` of `via` (another
    /// buffer's bounce buffer, pooled: [`crate::store::staged_read_pooled`]).
    /// `src` must stay allocated and unwritten until `via.wait(i)` returns.
    ///
    /// Errors: the range overruns this buffer, `i` names no stream of `via`,
    /// the two buffers are on different GPUs, or the driver's error.
    pub fn copy_in_async_via(&self, via: &DeviceBuffer, i: usize, src: &[u8], offset: usize) -> Result<(), String> {
        if offset + src.len() > self.len {
            return Err(format!("copy of {} bytes at {offset} overruns the {} byte device buffer", src.len(), self.len));
        }
        if via.gpu.ordinal != self.gpu.ordinal {
            return Err(format!("a bounce buffer of GPU {} cannot stage into GPU {}", via.gpu.ordinal, self.gpu.ordinal));
        }
        let stream = *via.streams.get(i).ok_or_else(|| format!("no stream {i}: {} bounce buffers", via.streams.len()))?;
        self.gpu.bind()?;
        // SAFETY: dst range checked above; the caller keeps src pinned and
        // unwritten until via.wait(i).
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
    fn a_large_host_buffer_is_touched_in_pieces_and_all_zero() {
        // Over the 256 MiB threshold: touched on several threads, no byte missed.
        let len = (300 << 20) + 5;
        let mut b = Buffer::host(len);
        assert_eq!(b.len(), len);
        let padded = b.as_host_mut_padded().unwrap();
        assert_eq!(padded.len() % HUGE_PAGE, 0);
        assert_eq!(padded.as_ptr() as usize % HUGE_PAGE, 0);
        assert!(padded.iter().all(|&x| x == 0));
        // A view ending the buffer owns the padding; one in the middle does not.
        // SAFETY: views dropped before b; disjoint.
        let (mid, end) = unsafe { (b.view(0..4096), b.view(len - 10..len)) };
        assert_eq!(mid.len(), 4096);
        drop(mid);
        let mut end = end;
        assert_eq!(end.as_host_mut_padded().unwrap().len(), padded_len(len) - (len - 10));
    }

    fn padded_len(len: usize) -> usize {
        len.div_ceil(HUGE_PAGE) * HUGE_PAGE
    }

    #[test]
    fn inverting_twice_gives_the_bytes_back_and_once_changes_every_byte() {
        let mut b = Buffer::host((3 << 20) + 7);
        let want: Vec<u8> = (0..b.len()).map(|i| (i % 253) as u8).collect();
        b.copy_from_host(0, &want).unwrap();
        b.invert().unwrap();
        assert!(b.as_host().unwrap().iter().zip(&want).all(|(x, y)| *x == !*y), "every byte inverted");
        b.invert().unwrap();
        assert_eq!(b.as_host().unwrap(), &want[..]);
    }

    /// On a GPU: device memory inverted by the kernel, unaligned ends included.
    #[test]
    fn device_memory_inverts_on_the_gpu() {
        let gpu = match Gpu::open(0) {
            Ok(g) => g,
            Err(e) => {
                eprintln!("skipping device_memory_inverts_on_the_gpu: no GPU ({e})");
                return;
            }
        };
        let n = (8 << 20) + 13;
        let want: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
        let mut d = Buffer::for_dest(Dest::Device, Some(&gpu), n, 0, 0).unwrap();
        d.copy_from_host(0, &want).unwrap();
        // SAFETY: the view is dropped before d; nothing else touches it.
        let mut v = unsafe { d.view(3..n - 2) };
        v.invert().unwrap();
        drop(v);
        let mut got = vec![0u8; n];
        d.copy_to_host(0, &mut got).unwrap();
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            let inside = (3..n - 2).contains(&i);
            assert_eq!(*g, if inside { !*w } else { *w }, "byte {i}");
        }
    }

    #[test]
    fn empty_buffer_still_allocates_one_page() {
        let mut b = Buffer::host(0);
        assert!(b.is_empty());
        assert_eq!(b.as_host_mut_padded().unwrap().len(), HOST_ALIGN);
    }
}
