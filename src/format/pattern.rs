//! The bytes `fetch --prepare` writes, and the check `fetch --verify` makes
//! of every byte it reads back.
//!
//! An object's content is a function of its key and each byte's offset:
//! the 8-byte little-endian word `i` (bytes `8i..8i+8`) is output `i`
//! (from 0) of splitmix64 started at state `seed`, the XXH3-64 of the key:
//! `mix(seed + (i + 1) * 0x9E3779B97F4A7C15)`. So any range of any object can be generated or checked on its own
//! (ranged windows, parts), two objects never hold the same bytes (no
//! compression or deduplication helps a store), and a byte served from
//! another offset or another object differs from what was asked for.
//!
//! Written here rather than taken from `rand`: `rand`'s small generators are
//! documented as not reproducible across its versions, and objects written by
//! one build of s3rdma must verify under the next. splitmix64 is the
//! generator of Steele, Lea and Flood, "Fast splittable pseudorandom number
//! generators" (OOPSLA 2014), as given at <https://prng.di.unimi.it/splitmix64.c>.

use twox_hash::XxHash3_64;

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// splitmix64's output function of one state.
#[inline(always)]
fn mix(x: u64) -> u64 {
    let mut z = x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The build [`Pattern::first_difference`] runs, chosen once.
static KERNEL: std::sync::OnceLock<CheckKernel> = std::sync::OnceLock::new();

/// Words per block of [`first_differing_block`]: differences are OR-ed over
/// a block, one branch per block, so the multiplies of neighbouring words
/// overlap (and vectorise).
const BLOCK: usize = 64;

/// A build of the check's word loop ([`Pattern::first_difference_with`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckKernel {
    /// As built for the baseline target (x86-64: SSE2; scalar 64-bit multiplies).
    Baseline,
    /// Compiled for AVX2 (64-bit multiplies emulated 4 words wide).
    Avx2,
    /// Compiled for AVX-512 F and DQ (64-bit multiplies 8 words wide).
    Avx512,
}

impl CheckKernel {
    /// The fastest build this CPU runs: AVX-512, else AVX2, else the
    /// baseline (chosen at run time). `cargo bench --bench pattern` compares
    /// them side by side; on this project's build host (AMD EPYC, one
    /// thread) 7.3, 14.1 and 22.3 GB/s: the check is the pattern's
    /// arithmetic, which vectorises, not memory.
    pub fn best() -> Self {
        Self::available().pop().unwrap_or(CheckKernel::Baseline)
    }

    /// Every build this CPU runs, slowest first.
    pub fn available() -> Vec<Self> {
        let mut v = vec![CheckKernel::Baseline];
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx2") {
                v.push(CheckKernel::Avx2);
            }
            if std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512dq") {
                v.push(CheckKernel::Avx512);
            }
        }
        v
    }
}

/// The index of the first block of [`BLOCK`] words of `whole` (whole
/// little-endian words, word 0 being the object's word `first`) holding a
/// word that differs from the pattern of `seed`; `None` when all agree.
/// `kernel` must be one of [`CheckKernel::available`] (another runs as the
/// baseline).
fn first_differing_block(kernel: CheckKernel, seed: u64, first: u64, whole: &[u8]) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    match kernel {
        CheckKernel::Avx512 if std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512dq") => {
            // SAFETY: the CPU has AVX-512 F and DQ (checked just above).
            return unsafe { first_differing_block_avx512(seed, first, whole) };
        }
        CheckKernel::Avx2 if std::is_x86_feature_detected!("avx2") => {
            // SAFETY: the CPU has AVX2 (checked just above).
            return unsafe { first_differing_block_avx2(seed, first, whole) };
        }
        _ => {}
    }
    first_differing_block_inline(seed, first, whole)
}

/// [`first_differing_block`] compiled for AVX-512 F and DQ.
///
/// # Safety
/// The CPU must have AVX-512 F and DQ.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn first_differing_block_avx512(seed: u64, first: u64, whole: &[u8]) -> Option<usize> {
    first_differing_block_inline(seed, first, whole)
}

/// [`first_differing_block`] compiled for AVX2.
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn first_differing_block_avx2(seed: u64, first: u64, whole: &[u8]) -> Option<usize> {
    first_differing_block_inline(seed, first, whole)
}

/// [`first_differing_block`]'s loop, inlined into each caller so that each
/// is compiled for its own CPU features.
#[inline(always)]
fn first_differing_block_inline(seed: u64, first: u64, whole: &[u8]) -> Option<usize> {
    whole.chunks(BLOCK * 8).enumerate().position(|(b, block)| {
        let base = first + (b * BLOCK) as u64;
        let mut state = seed.wrapping_add(base.wrapping_add(1).wrapping_mul(GOLDEN));
        let mut acc = 0u64;
        for c in block.chunks_exact(8) {
            acc |= u64::from_le_bytes(c.try_into().expect("8 bytes")) ^ mix(state);
            state = state.wrapping_add(GOLDEN);
        }
        acc != 0
    })
}

/// The pattern of one object: construct once per key, then fill or check any range.
#[derive(Debug, Clone, Copy)]
pub struct Pattern {
    seed: u64,
}

impl Pattern {
    /// The pattern of the object named `key` (its full key, prefix included).
    pub fn of(key: &str) -> Self {
        Pattern { seed: XxHash3_64::oneshot(key.as_bytes()) }
    }

    /// The splitmix64 state the object's words follow: word `i` is the
    /// output for state `seed + (i + 1) * 0x9E3779B97F4A7C15` (module docs),
    /// for checks made elsewhere (on the GPU: [`crate::mem::DeviceBuffer::first_word_off_sequence`]).
    pub fn seed(self) -> u64 {
        self.seed
    }

    fn word(self, i: u64) -> [u8; 8] {
        mix(self.seed.wrapping_add(i.wrapping_add(1).wrapping_mul(GOLDEN))).to_le_bytes()
    }

    /// The pattern of bytes `offset..offset + len`, as (position in the
    /// range, the word's bytes that fall in it) in order.
    fn pieces(self, offset: u64, len: usize) -> impl Iterator<Item = (usize, [u8; 8], std::ops::Range<usize>)> {
        let mut done = 0usize;
        std::iter::from_fn(move || {
            (done < len).then(|| {
                let pos = offset + done as u64;
                let skip = (pos % 8) as usize;
                let n = (8 - skip).min(len - done);
                let at = done;
                done += n;
                (at, self.word(pos / 8), skip..skip + n)
            })
        })
    }

    /// Write the object's bytes `offset..offset + out.len()` into `out`.
    pub fn fill(self, offset: u64, out: &mut [u8]) {
        // Up to a word boundary piece by piece, then whole words.
        let head = (((8 - offset % 8) % 8) as usize).min(out.len());
        for (at, w, r) in self.pieces(offset, head) {
            out[at..at + r.len()].copy_from_slice(&w[r]);
        }
        let first = (offset + head as u64) / 8;
        let total = out.len();
        let mut words = out[head..].chunks_exact_mut(8);
        for (i, c) in (&mut words).enumerate() {
            c.copy_from_slice(&self.word(first + i as u64));
        }
        let tail = words.into_remainder();
        let at = offset + (total - tail.len()) as u64;
        for (k, w, r) in self.pieces(at, tail.len()) {
            tail[k..k + r.len()].copy_from_slice(&w[r]);
        }
    }

    /// The absolute offset of the first byte of `bytes` (the object's bytes
    /// from `offset` on) that differs from the pattern; `None` when all agree.
    /// On the fastest build of the word loop this CPU runs ([`CheckKernel::best`]).
    pub fn first_difference(self, offset: u64, bytes: &[u8]) -> Option<u64> {
        self.first_difference_with(*KERNEL.get_or_init(CheckKernel::best), offset, bytes)
    }

    /// [`Pattern::first_difference`] on the build `kernel` of its word loop
    /// (one of [`CheckKernel::available`]; another runs as the baseline).
    pub fn first_difference_with(self, kernel: CheckKernel, offset: u64, bytes: &[u8]) -> Option<u64> {
        // Piece by piece (exact position) for the unaligned head, the tail,
        // and a word that differs; whole words compared at once otherwise.
        let exact = |from: usize, to: usize| {
            self.pieces(offset + from as u64, to - from).find_map(|(at, w, r)| {
                let got = &bytes[from + at..from + at + r.len()];
                got.iter().zip(&w[r]).position(|(a, b)| a != b).map(|k| offset + (from + at + k) as u64)
            })
        };
        let head = (((8 - offset % 8) % 8) as usize).min(bytes.len());
        if let Some(d) = exact(0, head) {
            return Some(d);
        }
        let first = (offset + head as u64) / 8;
        let words = bytes[head..].chunks_exact(8);
        let tail_from = bytes.len() - words.remainder().len();
        let whole = &bytes[head..tail_from];
        // The first block whose words do not all agree, searched word by
        // word; the blocks before it agree.
        if let Some(b) = first_differing_block(kernel, self.seed, first, whole) {
            let at = head + b * BLOCK * 8;
            return exact(at, (at + BLOCK * 8).min(tail_from));
        }
        exact(tail_from, bytes.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_range_is_the_slice_of_the_whole() {
        let p = Pattern::of("fetch/1048576/obj-000003");
        let mut whole = vec![0u8; 1000];
        p.fill(0, &mut whole);
        for (a, b) in [(0, 1000), (3, 17), (8, 16), (5, 6), (999, 1000), (13, 997)] {
            let mut part = vec![0u8; b - a];
            p.fill(a as u64, &mut part);
            assert_eq!(part, whole[a..b], "{a}..{b}");
            assert_eq!(p.first_difference(a as u64, &part), None);
        }
        // Not zeros, and not another object's bytes.
        assert!(whole.iter().filter(|&&b| b == 0).count() < 20);
        let mut other = vec![0u8; 1000];
        Pattern::of("fetch/1048576/obj-000004").fill(0, &mut other);
        assert!(whole.iter().zip(&other).filter(|(a, b)| a == b).count() < 20);
    }

    #[test]
    fn a_flipped_byte_or_a_shifted_range_is_found_where_it_is() {
        let p = Pattern::of("k");
        let mut b = vec![0u8; 4096];
        p.fill(100, &mut b);
        b[1234] ^= 1;
        assert_eq!(p.first_difference(100, &b), Some(1334));
        // Flips in the unaligned head, a whole word and the tail.
        for (off, len, flip) in [(3u64, 100usize, 2usize), (3, 100, 40), (3, 100, 99), (0, 64, 63), (5, 3, 1)] {
            let mut v = vec![0u8; len];
            p.fill(off, &mut v);
            v[flip] ^= 0x80;
            assert_eq!(p.first_difference(off, &v), Some(off + flip as u64), "{off} {len} {flip}");
        }
        // The right bytes from another offset (a server answering another range).
        let mut shifted = vec![0u8; 64];
        p.fill(1 << 20, &mut shifted);
        assert_eq!(p.first_difference(0, &shifted), Some(0));
    }

    /// Every build of the word loop this CPU runs finds the same first
    /// difference: in the first block, in a later block, in the last partial
    /// block, after an unaligned head, and none.
    #[test]
    fn every_kernel_finds_the_same_first_difference() {
        let p = Pattern::of("fetch/kernels");
        let kernels = CheckKernel::available();
        assert_eq!(kernels[0], CheckKernel::Baseline);
        for (off, len) in [(0u64, 10_000usize), (5, 10_000), (4096, 64 * 8 * 3 + 17)] {
            let mut v = vec![0u8; len];
            p.fill(off, &mut v);
            for k in &kernels {
                assert_eq!(p.first_difference_with(*k, off, &v), None, "{k:?}");
            }
            for flip in [3, 9, 600, 1300, len - 20, len - 1] {
                let mut w = v.clone();
                w[flip] ^= 0x10;
                // A second flip later: the first is the one named.
                w[len - 1] ^= 0x01;
                let want = off + flip as u64;
                for k in &kernels {
                    let got = p.first_difference_with(*k, off, &w);
                    assert_eq!(got, Some(want), "{k:?} {off} {flip}");
                }
            }
        }
        assert_eq!(CheckKernel::best(), *kernels.last().unwrap());
    }

    #[test]
    fn the_first_words_are_fixed_across_builds() {
        // Objects written by one build must verify under the next: pin the generator.
        let mut b = [0u8; 16];
        Pattern::of("").fill(0, &mut b);
        let seed = XxHash3_64::oneshot(b"");
        assert_eq!(b[..8], mix(seed.wrapping_add(GOLDEN)).to_le_bytes());
        // splitmix64.c's first output from state 0.
        assert_eq!(mix(GOLDEN), 0xE220_A839_7B1D_CDAF);
    }
}
