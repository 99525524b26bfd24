//! One GPU's primary context, opened once per process (in the background
//! when asked), and the driver probe.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use cudarc::driver::{result, sys};

use super::cuda_err;
use crate::flag::DEVICE;

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
// SAFETY: as for Send: shared use only makes the context current.
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
            return Err(format!("{DEVICE} {ordinal}: this host has {} GPU(s), numbered from 0", info.devices.len()));
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
