//! The landing checksum: proof that bytes staged in host memory are the
//! bytes that landed in device memory, without copying them back.
//!
//! The bytes of a destination range are taken as little-endian 64-bit words
//! (the last one zero-padded); word `k` (its index from the range's start)
//! contributes `term(w, k)`: `x = w ^ (k * KEY)`, then `x + lo32(x) * hi32(x)`,
//! and the checksum is the sum of the terms mod 2^64. The term is XXH3's
//! long-input accumulator step (a 32x32->64 multiply of the keyed word's
//! halves, plus the keyed word: <https://github.com/Cyan4973/xxHash/blob/dev/doc/xxhash_spec.md>),
//! keyed by position instead of a secret so that moved or swapped words
//! change the sum. A sum of per-word terms is order-free, so reader threads
//! add their pieces in any order and the GPU adds its words in parallel
//! (`kernels.ptx`, a grid-stride loop and one atomic add per thread):
//! 16 GB is summed in milliseconds where reading it back takes a third of a
//! second (PCIe). It is a checksum, not a cryptographic hash: it catches
//! the corruption a transfer makes (a flipped, lost, moved or stale byte),
//! not a forger.
//!
//! Host side, pieces of a range are fed by whoever reads them ([`Landing::run`]);
//! a word a piece covers only in part is kept as an edge and assembled with
//! its other pieces when the range is done ([`Landing::finish`]).

use std::collections::BTreeMap;
use std::ffi::c_void;

use cudarc::driver::{result, sys};

use super::{DeviceBuffer, cuda_err};

/// The position key (2^64 / golden ratio, odd).
const KEY: u64 = 0x9E37_79B9_7F4A_7C15;

/// One word's term: `w` is the little-endian word at word index `k` of the range.
#[inline(always)]
fn term(w: u64, k: u64) -> u64 {
    let x = w ^ k.wrapping_mul(KEY);
    x.wrapping_add((x & 0xffff_ffff).wrapping_mul(x >> 32))
}

/// The sum of the terms of `bytes` (a multiple of 8 long) whose first word
/// has index `k0`: with AVX2 where the CPU has it (chosen at run time; the
/// same loop, vectorised 4 words wide: twice the SSE2 build's 13-16 GB/s a
/// core, measured on this project's build host), else as built.
fn sum_words(bytes: &[u8], k0: u64) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just above).
        return unsafe { sum_words_avx2(bytes, k0) };
    }
    sum_words_inline(bytes, k0)
}

/// [`sum_words`] compiled for AVX2.
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn sum_words_avx2(bytes: &[u8], k0: u64) -> u64 {
    sum_words_inline(bytes, k0)
}

/// [`sum_words`]'s loop, inlined into each caller so that each is compiled for its own CPU features.
#[inline(always)]
fn sum_words_inline(bytes: &[u8], k0: u64) -> u64 {
    let mut sum = 0u64;
    // k * KEY stepped by addition (the same value mod 2^64), so the loop
    // has no 64-bit multiply and vectorises (32x32->64 multiplies only).
    let mut key = k0.wrapping_mul(KEY);
    for w in bytes.chunks_exact(8) {
        let x = u64::from_le_bytes(w.try_into().expect("8 bytes")) ^ key;
        sum = sum.wrapping_add(x.wrapping_add((x & 0xffff_ffff).wrapping_mul(x >> 32)));
        key = key.wrapping_add(KEY);
    }
    sum
}

/// The checksum of one whole range in host memory (word 0 at `bytes[0]`).
pub fn checksum(bytes: &[u8]) -> u64 {
    let mut l = Landing::default();
    l.run(0).feed(bytes);
    l.finish()
}

/// A range's checksum as its pieces are fed: the whole words' sum, and the
/// words pieces cover only in part (edges). Pieces may come from several
/// [`Landing`]s ([`Landing::merge`]), in any order; together they must
/// cover the range once.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Landing {
    sum: u64,
    /// (word index, first byte in the word, the bytes).
    edges: Vec<(u64, u8, Vec<u8>)>,
}

impl Landing {
    /// A piece of the range starting at byte `pos` (from the range's start);
    /// feed it in order, then drop it.
    pub fn run(&mut self, pos: u64) -> Run<'_> {
        Run { to: self, pos, word: [0; 8], from: 0, fill: 0 }
    }

    /// Add another's pieces (another thread's share of the same range).
    pub fn merge(&mut self, other: Landing) {
        self.sum = self.sum.wrapping_add(other.sum);
        self.edges.extend(other.edges);
    }

    /// The checksum: the edges assembled into their words (bytes no piece
    /// covered count as zero, as the last word's padding does).
    pub fn finish(self) -> u64 {
        let mut words: BTreeMap<u64, [u8; 8]> = BTreeMap::new();
        for (k, from, bytes) in self.edges {
            let w = words.entry(k).or_default();
            w[from as usize..from as usize + bytes.len()].copy_from_slice(&bytes);
        }
        words.into_iter().fold(self.sum, |s, (k, w)| s.wrapping_add(term(u64::from_le_bytes(w), k)))
    }
}

/// One contiguous piece being fed ([`Landing::run`]); its partial words are
/// kept as edges when it is dropped.
#[derive(Debug)]
pub struct Run<'a> {
    to: &'a mut Landing,
    /// The next byte's position from the range's start.
    pos: u64,
    /// The word being filled, from byte `from`, `fill` bytes so far.
    word: [u8; 8],
    from: u8,
    fill: u8,
}

impl Run<'_> {
    /// Feed the piece's next bytes.
    pub fn feed(&mut self, mut b: &[u8]) {
        while !b.is_empty() {
            let off = (self.pos % 8) as usize;
            if off == 0 && self.fill == 0 && b.len() >= 8 {
                let n = b.len() / 8 * 8;
                self.to.sum = self.to.sum.wrapping_add(sum_words(&b[..n], self.pos / 8));
                self.pos += n as u64;
                b = &b[n..];
                continue;
            }
            if self.fill == 0 {
                self.from = off as u8;
            }
            let n = (8 - off).min(b.len());
            self.word[off..off + n].copy_from_slice(&b[..n]);
            self.fill += n as u8;
            self.pos += n as u64;
            b = &b[n..];
            if self.pos.is_multiple_of(8) {
                self.close();
            }
        }
    }

    /// The word being filled: a term when this piece covered all of it, else an edge.
    fn close(&mut self) {
        if self.fill == 0 {
            return;
        }
        let k = (self.pos - 1) / 8;
        if self.from == 0 && self.fill == 8 {
            self.to.sum = self.to.sum.wrapping_add(term(u64::from_le_bytes(self.word), k));
        } else {
            let from = self.from as usize;
            self.to.edges.push((k, self.from, self.word[from..from + self.fill as usize].to_vec()));
        }
        self.word = [0; 8];
        self.fill = 0;
    }
}

impl Drop for Run<'_> {
    fn drop(&mut self) {
        self.close();
    }
}

impl DeviceBuffer {
    /// The landing checksum of `len` bytes of this buffer from byte `offset`
    /// (module docs; word 0 at `offset`), computed on the GPU after every
    /// copy into the buffer is done: the whole words by the kernel, the last
    /// partial word read back (at most 7 bytes).
    ///
    /// Errors: a range past the buffer, an `offset` that is not a multiple
    /// of 8 (the kernel reads aligned words), or a driver call's (the
    /// kernel's JIT compile included), named.
    pub fn landing_checksum(&self, offset: usize, len: usize) -> Result<u64, String> {
        if offset + len > self.len || !offset.is_multiple_of(8) {
            return Err(format!(
                "a landing checksum of {len} bytes at byte {offset} of a {} byte device buffer (the range must fit and start at a multiple of 8)",
                self.len
            ));
        }
        for i in 0..self.streams.len() {
            self.wait(i)?;
        }
        self.gpu.bind()?;
        let words = (len / 8) as u64;
        // SAFETY: 8 bytes, freed below on every path.
        let out = unsafe { result::malloc_sync(8) }.map_err(|e| cuda_err("cuMemAlloc(8 bytes)", e))?;
        let summed = (|| {
            // SAFETY: out is 8 valid bytes.
            unsafe { sys::cuMemsetD8_v2(out, 0, 8) }.result().map_err(|e| cuda_err("cuMemsetD8", e))?;
            let (mut data, mut n, mut first, mut key, mut o) = (self.dptr + offset as u64, words, 0u64, KEY, out);
            let mut params: [*mut c_void; 5] = [
                &mut data as *mut u64 as *mut c_void,
                &mut n as *mut u64 as *mut c_void,
                &mut first as *mut u64 as *mut c_void,
                &mut key as *mut u64 as *mut c_void,
                &mut o as *mut u64 as *mut c_void,
            ];
            // SAFETY: the kernel reads words * 8 bytes of this live buffer
            // from `offset` (checked above) and adds into the 8 bytes at
            // out; five u64 parameters, as kernels.ptx declares them.
            unsafe { super::kernels::launch(self.gpu.ordinal, "s3rdma_landing_sum", words, &mut params) }?;
            let mut sum = [0u64; 1];
            // SAFETY: 8 bytes from out, after the kernel.
            unsafe { result::memcpy_dtoh_sync(&mut sum, out) }.map_err(|e| cuda_err("cuMemcpyDtoH", e))?;
            Ok::<u64, String>(sum[0])
        })();
        // SAFETY: allocated above; the synchronous copy (or the failure) left nothing in flight.
        let _ = unsafe { result::free_sync(out) };
        let mut sum = summed?;
        let tail = len % 8;
        if tail > 0 {
            let mut w = [0u8; 8];
            self.read_back(offset + len - tail, &mut w[..tail])?;
            sum = sum.wrapping_add(term(u64::from_le_bytes(w), words));
        }
        Ok(sum)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: usize) -> Vec<u8> {
        (0..n as u64).map(|i| (i.wrapping_mul(2_654_435_761) >> 7) as u8).collect()
    }

    #[test]
    fn pieces_in_any_split_and_order_give_the_one_shot_checksum() {
        for n in [0usize, 1, 7, 8, 9, 63, 64, 1000, 4099] {
            let d = data(n);
            let whole = checksum(&d);
            // Cut at every offset pattern, fed by two "threads" in reverse order.
            for cuts in [vec![], vec![1], vec![3, 5], vec![7, 8, 9, 17], vec![n / 2, n / 2 + 3]] {
                let mut bounds: Vec<usize> = cuts.into_iter().filter(|&c| c < n).collect();
                bounds.insert(0, 0);
                bounds.push(n);
                bounds.dedup();
                let (mut a, mut b) = (Landing::default(), Landing::default());
                for (i, w) in bounds.windows(2).enumerate().rev() {
                    let l = if i % 2 == 0 { &mut a } else { &mut b };
                    let mut r = l.run(w[0] as u64);
                    // Each piece fed in two feeds, one of them unaligned.
                    let mid = w[0] + (w[1] - w[0]) / 3;
                    r.feed(&d[w[0]..mid]);
                    r.feed(&d[mid..w[1]]);
                }
                a.merge(b);
                assert_eq!(a.finish(), whole, "n {n}, bounds {bounds:?}");
            }
        }
    }

    #[test]
    fn a_flipped_byte_a_swap_and_a_lost_tail_change_it() {
        let d = data(4096 + 5);
        let sum = checksum(&d);
        for at in [0, 7, 8, 2049, 4096, 4100] {
            let mut e = d.clone();
            e[at] ^= 0x10;
            assert_ne!(checksum(&e), sum, "a flipped bit at {at}");
        }
        let mut swapped = d.clone();
        let (w1, w2): (Vec<u8>, Vec<u8>) = (d[8..16].to_vec(), d[800..808].to_vec());
        swapped[8..16].copy_from_slice(&w2);
        swapped[800..808].copy_from_slice(&w1);
        assert_ne!(w1, w2);
        assert_ne!(checksum(&swapped), sum, "two words swapped");
        let mut lost = d.clone();
        lost[4096..].fill(0);
        assert_ne!(checksum(&lost), sum, "a tail that never landed");
        assert_ne!(checksum(&[0u8; 64]), checksum(&[0u8; 72]), "zeros of another length");
    }

    #[test]
    fn the_vectorised_sum_is_the_plain_one() {
        let d = data(1 << 16);
        let plain: u64 = d.chunks_exact(8).enumerate().fold(0u64, |s, (k, w)| s.wrapping_add(term(u64::from_le_bytes(w.try_into().unwrap()), 5 + k as u64)));
        assert_eq!(sum_words(&d, 5), plain);
        assert_eq!(sum_words_inline(&d, 5), plain);
    }

    #[test]
    fn the_term_is_the_documented_formula() {
        let (w, k) = (0x0123_4567_89ab_cdefu64, 3u64);
        let x = w ^ k.wrapping_mul(KEY);
        assert_eq!(term(w, k), x.wrapping_add((x & 0xffff_ffff) * (x >> 32)));
        assert_eq!(checksum(&w.to_le_bytes()), term(w, 0));
        // A partial last word is zero-padded.
        assert_eq!(checksum(&[1, 2, 3]), term(u64::from_le_bytes([1, 2, 3, 0, 0, 0, 0, 0]), 0));
    }

    /// On a GPU: the kernel's checksum of device memory equals the host's of
    /// the same bytes, and a byte flipped in device memory changes it.
    #[test]
    fn the_gpu_checksum_matches_the_host_and_catches_a_flipped_byte() {
        let gpu = match super::super::Gpu::open(0) {
            Ok(g) => g,
            Err(e) => {
                eprintln!("skipping the_gpu_checksum_matches_the_host_and_catches_a_flipped_byte: no GPU ({e})");
                return;
            }
        };
        let n = (64 << 20) + 13;
        let d = data(n);
        let mut b = DeviceBuffer::new(&gpu, n, 0, 0).expect("device buffer");
        b.write_from_host(0, &d).expect("copy in");
        assert_eq!(b.landing_checksum(0, n).expect("kernel"), checksum(&d));
        assert_eq!(b.landing_checksum(0, 1000).expect("kernel"), checksum(&d[..1000]));
        assert_eq!(b.landing_checksum(4096, 1003).expect("kernel"), checksum(&d[4096..5099]));
        assert!(b.landing_checksum(4, 8).unwrap_err().contains("multiple of 8"));
        assert!(b.landing_checksum(8, n).unwrap_err().contains("must fit"));
        b.write_from_host(12_345_678, &[d[12_345_678] ^ 1]).expect("flip");
        assert_ne!(b.landing_checksum(0, n).expect("kernel"), checksum(&d), "a flipped byte in device memory");
    }
}
