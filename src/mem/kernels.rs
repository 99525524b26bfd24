//! The project's GPU kernels (`kernels.ptx`): hand-written PTX, JIT-compiled
//! by the driver when first used on a GPU (`cuModuleLoadData`), so the build
//! needs no CUDA toolkit and the run no NVRTC. Each kernel is a grid-stride
//! loop over 64-bit words; [`launch`] runs one on the legacy default stream
//! and waits for it.
//!
//! Why PTX by hand rather than a kernel crate: the two kernels are a dozen
//! instructions each, and cudarc's NVRTC path would add a runtime library
//! the lent machines do not all carry; `ptxas -arch=sm_90 kernels.ptx`
//! checks the text (18 and 14 registers, no spills).

use std::ffi::c_void;
use std::sync::Mutex;

use cudarc::driver::{result, sys};

use super::cuda_err;

/// The module text, NUL-terminated as `cuModuleLoadData` wants.
const PTX: &str = concat!(include_str!("kernels.ptx"), "\0");

/// Threads per block of every launch.
const BLOCK: u32 = 256;
/// At most this many blocks: enough to fill any current GPU, each thread then loops.
const MAX_BLOCKS: u64 = 2048;

/// The loaded module per GPU ordinal (one per primary context; never unloaded).
static MODULES: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

/// The handle of kernel `name` on GPU `ordinal`, loading the module on first
/// use. The caller has bound that GPU's context to this thread.
///
/// Errors: the driver's (the JIT compile's included), named.
fn function(ordinal: usize, name: &str) -> Result<sys::CUfunction, String> {
    let module = {
        let mut m = MODULES.lock().unwrap_or_else(|p| p.into_inner());
        match m.iter().find(|(o, _)| *o == ordinal) {
            Some((_, h)) => *h as sys::CUmodule,
            None => {
                // SAFETY: PTX is NUL-terminated text.
                let h = unsafe { result::module::load_data(PTX.as_ptr() as *const c_void) }.map_err(|e| cuda_err("cuModuleLoadData(kernels.ptx)", e))?;
                m.push((ordinal, h as usize));
                h
            }
        }
    };
    let c = std::ffi::CString::new(name).map_err(|_| format!("kernel name {name:?} holds a NUL"))?;
    // SAFETY: module is loaded and never unloaded.
    unsafe { result::module::get_function(module, c) }.map_err(|e| cuda_err(&format!("cuModuleGetFunction({name})"), e))
}

/// Run kernel `name` of `kernels.ptx` on GPU `ordinal` over `words` words,
/// with `params` (pointers to each parameter's value, in the kernel's
/// order), and wait for it.
///
/// # Safety
/// `params` must match the kernel's parameters in number and type, and the
/// memory they name must be valid for what the kernel does with `words` words.
pub(super) unsafe fn launch(ordinal: usize, name: &str, words: u64, params: &mut [*mut c_void]) -> Result<(), String> {
    let f = function(ordinal, name)?;
    let blocks = words.div_ceil(u64::from(BLOCK)).clamp(1, MAX_BLOCKS) as u32;
    // SAFETY: the caller's contract; the legacy default stream, synchronised below.
    unsafe { result::launch_kernel(f, (blocks, 1, 1), (BLOCK, 1, 1), 0, std::ptr::null_mut(), params) }
        .map_err(|e| cuda_err(&format!("cuLaunchKernel({name})"), e))?;
    // SAFETY: the null stream is the context's legacy default stream.
    unsafe { result::stream::synchronize(std::ptr::null_mut()) }.map_err(|e| cuda_err(&format!("{name}: cuStreamSynchronize"), e))
}
