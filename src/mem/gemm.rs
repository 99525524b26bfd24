//! A fixed compute step, as a training job's forward and backward pass
//! load the accelerator: C = A x B with n x n single-precision matrices,
//! run once per [`Gemm::step`] and waited for. On a GPU it is cuBLAS SGEMM
//! (through cudarc, libcublas loaded at run time) on a stream of its own
//! (non-blocking, so copies on other streams may overlap it as a trainer's
//! copies overlap its kernels); without one it is a CPU stand-in
//! (`matrixmultiply`'s SGEMM on the calling thread), which loads a core and
//! memory bandwidth instead and is named as such in every record.

use std::sync::Arc;

use cudarc::cublas::{result as blas, sys as blas_sys};
use cudarc::driver::{result, sys};

use super::{DeviceBuffer, Gpu, cuda_err};

/// Where the step runs.
enum On {
    Gpu { gpu: Arc<Gpu>, handle: blas_sys::cublasHandle_t, stream: sys::CUstream, a: DeviceBuffer, b: DeviceBuffer, c: DeviceBuffer },
    Cpu { a: Vec<f32>, b: Vec<f32>, c: Vec<f32> },
}

/// One n x n x n SGEMM, ready to run repeatedly (its matrices allocated and
/// filled once). Not `Send`: make it on the thread that steps it (a cuBLAS
/// handle belongs to the context bound there).
pub struct Gemm {
    n: usize,
    on: On,
}

/// Every element of A and B (any finite value; 0.5 keeps C = 0.25 n exact in f32 for n < 2^24).
const FILL: f32 = 0.5;

impl std::fmt::Debug for Gemm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gemm").field("n", &self.n).field("device", &self.device()).finish()
    }
}

impl Gemm {
    /// An `n` x `n` SGEMM on `gpu` (cuBLAS), or on this thread's CPU when `gpu` is `None`.
    ///
    /// Errors: `n` of 0 or over 65536; no libcublas on the library path (named,
    /// with the fix); an allocation or a driver/cuBLAS call that fails.
    pub fn new(gpu: Option<&Arc<Gpu>>, n: usize) -> Result<Self, String> {
        if n == 0 || n > 65536 {
            return Err(format!("a GEMM of side {n}: give a side from 1 to 65536"));
        }
        let on = match gpu {
            None => {
                // Three n x n f32 matrices: refuse what would push the host into swap or the OOM killer.
                let need = 3 * (n as u64).pow(2) * 4;
                let mut sys = sysinfo::System::new();
                sys.refresh_memory();
                let avail = sys.available_memory();
                if avail > 0 && need > avail / 2 {
                    return Err(format!(
                        "its three {n} x {n} f32 matrices need {:.1} GB of host memory, more than half the {:.1} GB available: give a smaller side",
                        need as f64 / 1e9,
                        avail as f64 / 1e9
                    ));
                }
                On::Cpu { a: vec![FILL; n * n], b: vec![FILL; n * n], c: vec![0.0; n * n] }
            }
            Some(g) => {
                // cudarc panics when it cannot load the library: ask first.
                // SAFETY: only probes the dynamic loader.
                if !unsafe { blas_sys::is_culib_present() } {
                    return Err("cuBLAS is not on the library path (searched libcublas.so, libcublas.so.12, .11, ...): add the directory of a CUDA toolkit's lib64 or of the nvidia-cublas wheel's lib to LD_LIBRARY_PATH (a libcublas.so.13 needs a libcublas.so link beside it)".into());
                }
                g.bind()?;
                let bytes = n * n * 4;
                let (a, b, c) = (DeviceBuffer::new(g, bytes, 0, 0)?, DeviceBuffer::new(g, bytes, 0, 0)?, DeviceBuffer::new(g, bytes, 0, 0)?);
                for m in [&a, &b] {
                    // SAFETY: m is a live allocation of n * n 4-byte words.
                    unsafe { sys::cuMemsetD32_v2(m.device_ptr().0, FILL.to_bits(), n * n) }.result().map_err(|e| cuda_err("cuMemsetD32", e))?;
                }
                let stream = result::stream::create(result::stream::StreamKind::NonBlocking).map_err(|e| cuda_err("cuStreamCreate", e))?;
                let handle = blas::create_handle().map_err(|e| format!("cublasCreate failed: {e:?}"))?;
                let on = On::Gpu { gpu: g.clone(), handle, stream, a, b, c };
                // SAFETY: a live handle and stream of this context (Drop frees both, whatever happens next).
                unsafe { blas::set_stream(handle, stream as blas_sys::cudaStream_t) }.map_err(|e| format!("cublasSetStream failed: {e:?}"))?;
                on
            }
        };
        Ok(Gemm { n, on })
    }

    /// Run one C = A x B and wait for it.
    ///
    /// Errors: the driver's or cuBLAS's, named.
    pub fn step(&mut self) -> Result<(), String> {
        let n = self.n;
        match &mut self.on {
            On::Cpu { a, b, c } => {
                // SAFETY: a, b, c hold n * n elements each, row-major (row stride n, column stride 1).
                unsafe { matrixmultiply::sgemm(n, n, n, 1.0, a.as_ptr(), n as isize, 1, b.as_ptr(), n as isize, 1, 0.0, c.as_mut_ptr(), n as isize, 1) };
                Ok(())
            }
            On::Gpu { gpu, handle, stream, a, b, c } => {
                gpu.bind()?;
                let (alpha, beta) = (1.0f32, 0.0f32);
                let ni = n as i32;
                let op = blas_sys::cublasOperation_t::CUBLAS_OP_N;
                let ptr = |m: &DeviceBuffer| m.device_ptr().0 as *mut f32;
                // SAFETY: three live n x n f32 device matrices, leading dimension n; alpha and beta are host scalars.
                unsafe { blas::sgemm(*handle, op, op, ni, ni, ni, &alpha, ptr(a), ni, ptr(b), ni, &beta, ptr(c), ni) }
                    .map_err(|e| format!("cublasSgemm failed: {e:?}"))?;
                // SAFETY: the stream made in new().
                unsafe { result::stream::synchronize(*stream) }.map_err(|e| cuda_err("cuStreamSynchronize (GEMM step)", e))
            }
        }
    }

    /// Where the step runs, for records and tables.
    pub fn device(&self) -> &'static str {
        match self.on {
            On::Gpu { .. } => "gpu: cuBLAS SGEMM on its own stream",
            On::Cpu { .. } => "cpu stand-in: matrixmultiply SGEMM on one thread (no GPU in this run)",
        }
    }

    /// Floating-point operations per step: 2 n^3.
    pub fn flops(&self) -> f64 {
        2.0 * (self.n as f64).powi(3)
    }

    /// C's element 0 after a step (every element is 0.25 n: a check that the step ran).
    ///
    /// Errors: the driver's, reading device memory back.
    pub fn first_result(&self) -> Result<f32, String> {
        match &self.on {
            On::Cpu { c, .. } => Ok(c[0]),
            On::Gpu { gpu, c, .. } => {
                gpu.bind()?;
                let mut v = [0u8; 4];
                // SAFETY: c holds at least 4 bytes; the step synchronised its stream.
                unsafe { result::memcpy_dtoh_sync(&mut v, c.device_ptr().0) }.map_err(|e| cuda_err("cuMemcpyDtoH", e))?;
                Ok(f32::from_ne_bytes(v))
            }
        }
    }
}

impl Drop for Gemm {
    fn drop(&mut self) {
        if let On::Gpu { gpu, handle, stream, .. } = &self.on {
            let _ = gpu.bind();
            // SAFETY: made in new() and not freed elsewhere.
            let _ = unsafe { blas::destroy_handle(*handle) };
            // SAFETY: as above; the matrices are freed after this (field drop order).
            let _ = unsafe { result::stream::destroy(*stream) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_stand_in_multiplies() {
        let mut g = Gemm::new(None, 64).unwrap();
        g.step().unwrap();
        assert_eq!(g.first_result().unwrap(), 0.25 * 64.0);
        assert_eq!(g.flops(), 2.0 * 64f64.powi(3));
        assert!(g.device().starts_with("cpu stand-in"));
    }

    #[test]
    fn a_side_out_of_range_is_refused() {
        for n in [0, 65537] {
            let e = Gemm::new(None, n).err().unwrap();
            assert!(e.contains("from 1 to 65536"), "{e}");
        }
        // 48 GiB of matrices: more than half of what any test host has free.
        let e = Gemm::new(None, 65536).err().unwrap();
        assert!(e.contains("give a smaller side") && e.contains("51.5 GB"), "{e}");
    }

    #[test]
    fn the_gpu_step_multiplies_or_skips() {
        let gpu = match Gpu::open(0) {
            Ok(g) => g,
            Err(e) => return eprintln!("skipped: no GPU here ({e})"),
        };
        let mut g = match Gemm::new(Some(&gpu), 256) {
            Ok(g) => g,
            Err(e) if e.contains("cuBLAS is not on the library path") => return eprintln!("skipped: {e}"),
            Err(e) => panic!("{e}"),
        };
        g.step().unwrap();
        assert_eq!(g.first_result().unwrap(), 64.0);
    }
}
