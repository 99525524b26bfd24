//! Device memory checked against a splitmix64 sequence where it lies, on the
//! GPU (`kernels.ptx`'s `s3rdma_splitmix_diff`): what `fetch --verify` needs
//! for bytes read into device memory, without reading them back over PCIe.
//! The sequence is the one `fetch --prepare` writes (`src/format/pattern.rs`:
//! word `i` is splitmix64's output for state `seed + (i + 1) * 0x9E3779B97F4A7C15`).

use std::ffi::c_void;

use cudarc::driver::{result, sys};

use super::{DeviceBuffer, cuda_err};

impl DeviceBuffer {
    /// The index (from 0) of the first of `words` 8-byte words at byte `at`
    /// of this buffer that is not word `first + j` of the splitmix64
    /// sequence started at `seed`; `None` when all are. Waits for every copy
    /// into the buffer first.
    ///
    /// Errors: a range past the buffer, an `at` that is not a multiple of 8
    /// (the kernel reads aligned words), or a driver call's (the kernel's
    /// JIT compile included), named.
    pub fn first_word_off_sequence(&self, at: usize, words: u64, seed: u64, first: u64) -> Result<Option<u64>, String> {
        let end = (words as usize).checked_mul(8).and_then(|n| n.checked_add(at));
        if end.is_none_or(|e| e > self.len) || !at.is_multiple_of(8) {
            return Err(format!("{words} words at byte {at} of a {} byte device buffer (the range must fit and start at a multiple of 8)", self.len));
        }
        for i in 0..self.streams.len() {
            self.wait(i)?;
        }
        self.gpu.bind()?;
        // SAFETY: 8 bytes, freed below on every path.
        let out = unsafe { result::malloc_sync(8) }.map_err(|e| cuda_err("cuMemAlloc(8 bytes)", e))?;
        let found = (|| {
            // SAFETY: out is 8 valid bytes; all ones is "no difference".
            unsafe { sys::cuMemsetD8_v2(out, 0xff, 8) }.result().map_err(|e| cuda_err("cuMemsetD8", e))?;
            let (mut data, mut n, mut f, mut s, mut o) = (self.dptr + at as u64, words, first, seed, out);
            let mut params: [*mut c_void; 5] = [
                &mut data as *mut u64 as *mut c_void,
                &mut n as *mut u64 as *mut c_void,
                &mut f as *mut u64 as *mut c_void,
                &mut s as *mut u64 as *mut c_void,
                &mut o as *mut u64 as *mut c_void,
            ];
            // SAFETY: the kernel reads `words` aligned words of this live
            // buffer from `at` (checked above) and writes the 8 bytes at out;
            // five u64 parameters, as kernels.ptx declares them.
            unsafe { super::kernels::launch(self.gpu.ordinal, "s3rdma_splitmix_diff", words, &mut params) }?;
            let mut v = [0u64; 1];
            // SAFETY: 8 bytes from out, after the kernel.
            unsafe { result::memcpy_dtoh_sync(&mut v, out) }.map_err(|e| cuda_err("cuMemcpyDtoH", e))?;
            Ok::<u64, String>(v[0])
        })();
        // SAFETY: allocated above; nothing in flight after the synchronous copy.
        let _ = unsafe { result::free_sync(out) };
        found.map(|j| (j != u64::MAX).then_some(j))
    }
}
