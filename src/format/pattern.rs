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
fn mix(x: u64) -> u64 {
    let mut z = x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
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
    pub fn first_difference(self, offset: u64, bytes: &[u8]) -> Option<u64> {
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
        // Blocks of BLOCK words: differences OR-ed over the block, one branch
        // per block (so the multiplies of neighbouring words overlap), and
        // the block searched word by word only when something differs.
        const BLOCK: usize = 64;
        let whole = &bytes[head..tail_from];
        for (b, block) in whole.chunks(BLOCK * 8).enumerate() {
            let base = first + (b * BLOCK) as u64;
            let mut state = self.seed.wrapping_add(base.wrapping_add(1).wrapping_mul(GOLDEN));
            let mut acc = 0u64;
            for c in block.chunks_exact(8) {
                acc |= u64::from_le_bytes(c.try_into().expect("8 bytes")) ^ mix(state);
                state = state.wrapping_add(GOLDEN);
            }
            if acc != 0 {
                let at = head + b * BLOCK * 8;
                return exact(at, at + block.len());
            }
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
