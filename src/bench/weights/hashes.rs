//! The loaded tensors' XXH3-64, on every core: the check `weights --verify`
//! makes against the model's digest. Host memory is hashed where it lies.
//! Device memory loaded by a store's own device pipeline (local files) is
//! hashed as it is staged, tensor by tensor on the reader threads
//! ([`crate::store::StagedCheck`]), and the bytes in device memory are then
//! compared with the staged bytes by the landing checksum the GPU computes
//! ([`crate::mem::Landing`]): nothing crosses PCIe twice. Otherwise (the
//! generic staged pipeline, or a GPU whose driver cannot run the checksum's
//! kernel) device memory is read back in chunks through pinned buffers (the
//! destinations' own bounce buffers, idle once the load is done).
//!
//! One thread per core, each with its own pinned buffer; tensors go to
//! threads largest first, each to the least loaded thread (longest
//! processing time first), so one 1 GB embedding does not finish last on a
//! thread that also had the small ones. Each tensor is hashed as a stream
//! (`twox_hash::XxHash3_64` through `std::hash::Hasher`), the same value the one-shot hash gives.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::format::weights::ShardLayout;
use crate::mem::Buffer;
use crate::store::{StagedCheck, StagedHashes};

/// Bytes per read-back when a destination has no bounce buffer to lend.
const READ_BACK_CHUNK: usize = 16 << 20;

/// How the loaded bytes were checked, for the record.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CheckedHow {
    /// What was hashed: "device memory, read back through pinned buffers"
    /// or "host memory, in place".
    pub bytes_checked: String,
    /// Threads hashing.
    pub threads: usize,
    /// Seconds from the first read-back to the last hash.
    pub seconds: f64,
    /// Bytes hashed.
    pub bytes: u64,
    /// Hashed as staged: per reader thread, the mean seconds hashing inside
    /// the load (the load's wall time includes them); `None` when hashed after the load.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_load_s: Option<f64>,
    /// Why the check as staged was not used (the GPU's kernel failed), when it was asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
}

/// What [`staged_hashes`] found: the hashes per shard, the keys of the
/// shards whose device memory differs from what was staged, and how.
type StagedVerdict = (Vec<Vec<u64>>, Vec<String>, CheckedHow);

/// What a load should hash as it stages, for `layout` (one part per
/// shard, each tensor a span of its data section, in the layout's order).
pub(super) fn staged_check(layout: &[ShardLayout]) -> StagedCheck {
    StagedCheck { spans: layout.iter().map(|l| l.tensors.iter().map(|t| t.offset..t.offset + t.nbytes).collect()).collect() }
}

/// Every tensor's XXH3-64 as the load staged it (`staged`, from
/// [`staged_check`]), after the GPU's landing checksum of each device
/// buffer has shown it holds the staged bytes. Returns the hashes per shard
/// (as [`loaded_hashes`] does), the shards whose device memory differs from
/// what was staged (their hashes then come from reading them back, so the
/// differing tensors are named), and how it was done.
///
/// Errors: a driver call's (the kernel's JIT compile included); the caller
/// then reads every shard back ([`loaded_hashes`]).
pub(super) fn staged_hashes(layout: &[ShardLayout], bufs: &mut [Buffer], staged: &StagedHashes, threads: usize) -> Result<StagedVerdict, String> {
    let t0 = Instant::now();
    let mut hashes = staged.hashes.clone();
    let mut landed_wrong = Vec::new();
    for (k, (l, b)) in layout.iter().zip(bufs.iter_mut()).enumerate() {
        let Buffer::Device(d) = b else { return Err(format!("shard '{}' is not in device memory", l.key)) };
        if d.landing_checksum(0, l.data_bytes() as usize)? != staged.landing[k] {
            landed_wrong.push(l.key.clone());
            let (again, _) = loaded_hashes(std::slice::from_ref(l), std::slice::from_mut(b))?;
            hashes[k] = again.into_iter().next().unwrap_or_default();
        }
    }
    let how = CheckedHow {
        bytes_checked: "bytes as staged in pinned memory (xxh3-64 per tensor on the reader threads, during the load), then device memory against them (a landing checksum computed on the GPU)".into(),
        threads,
        seconds: t0.elapsed().as_secs_f64(),
        bytes: layout.iter().map(|l| l.data_bytes()).sum(),
        in_load_s: Some(staged.hash_s / threads.max(1) as f64),
        fallback: None,
    };
    Ok((hashes, landed_wrong, how))
}

/// One tensor to hash: (shard index, tensor index, bytes); after hashing,
/// the third field holds the tensor's xxh3-64 instead.
type Unit = (usize, usize, u64);

/// XXH3-64 of every tensor of every shard as loaded in `bufs` (one buffer
/// per shard, its data blob from byte 0): one `Vec` per shard, in its
/// tensors' order, and how it was done.
///
/// Errors: a failed read-back (the driver's message).
pub(super) fn loaded_hashes(layout: &[ShardLayout], bufs: &mut [Buffer]) -> Result<(Vec<Vec<u64>>, CheckedHow), String> {
    let device = bufs.iter().any(|b| matches!(b, Buffer::Device(_)));
    // Borrow the destinations' bounce buffers as read-back buffers.
    let mut lent: Vec<(usize, Buffer)> = Vec::new();
    for (o, b) in bufs.iter_mut().enumerate() {
        if let Buffer::Device(d) = b {
            lent.extend(std::mem::take(&mut d.bounce).into_iter().map(|x| (o, x)));
        }
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let units: Vec<Unit> = layout.iter().enumerate().flat_map(|(s, l)| l.tensors.iter().enumerate().map(move |(t, e)| (s, t, e.nbytes))).collect();
    let threads = cores.min(units.len()).max(1);
    let shares = longest_first(&units, threads);
    let mut scratch: Vec<Buffer> = Vec::new();
    while lent.len() + scratch.len() < threads && device {
        scratch.push(Buffer::host(READ_BACK_CHUNK));
    }
    let t0 = Instant::now();
    let bufs_ro: &[Buffer] = bufs;
    let results: Vec<Result<Vec<Unit>, String>> = {
        let mut spare: Vec<&mut Buffer> = lent.iter_mut().map(|(_, b)| b).chain(scratch.iter_mut()).collect();
        std::thread::scope(|sc| {
            let handles: Vec<_> = shares
                .into_iter()
                .map(|mine| {
                    let rb = if device { spare.pop() } else { None };
                    sc.spawn(move || hash_units(layout, bufs_ro, &mine, rb))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("a hashing thread panicked".into()))).collect()
        })
    };
    let seconds = t0.elapsed().as_secs_f64();
    for (o, b) in lent {
        if let Buffer::Device(d) = &mut bufs[o] {
            d.bounce.push(b);
        }
    }
    let mut out: Vec<Vec<u64>> = layout.iter().map(|l| vec![0; l.tensors.len()]).collect();
    for r in results {
        for (s, t, h) in r? {
            out[s][t] = h;
        }
    }
    let how = CheckedHow {
        bytes_checked: if device { "device memory, read back through pinned buffers" } else { "host memory, in place" }.into(),
        threads,
        seconds,
        bytes: units.iter().map(|u| u.2).sum(),
        in_load_s: None,
        fallback: None,
    };
    Ok((out, how))
}

/// `units` shared out over `n` threads, largest
/// first, each to the thread with the fewest bytes so far.
fn longest_first(units: &[Unit], n: usize) -> Vec<Vec<Unit>> {
    let mut order: Vec<&Unit> = units.iter().collect();
    order.sort_by_key(|u| std::cmp::Reverse(u.2));
    let mut shares: Vec<(u64, Vec<Unit>)> = (0..n.max(1)).map(|_| (0, Vec::new())).collect();
    for u in order {
        let least = shares.iter_mut().min_by_key(|(load, _)| *load).expect("n >= 1");
        least.0 += u.2;
        least.1.push(*u);
    }
    shares.into_iter().map(|(_, v)| v).collect()
}

/// Hash one thread's tensors; device memory is read back through `rb`.
fn hash_units(layout: &[ShardLayout], bufs: &[Buffer], mine: &[Unit], mut rb: Option<&mut Buffer>) -> Result<Vec<Unit>, String> {
    let mut out = Vec::with_capacity(mine.len());
    for &(s, t, n) in mine {
        let start = layout[s].tensors[t].offset as usize;
        let h = match (&bufs[s], rb.as_deref_mut()) {
            (Buffer::Device(d), Some(rb)) => {
                let chunk = rb.as_host_mut().expect("read-back buffers are host memory");
                let mut hasher = twox_hash::XxHash3_64::new();
                let mut off = 0usize;
                while off < n as usize {
                    let len = chunk.len().min(n as usize - off);
                    d.read_back(start + off, &mut chunk[..len])?;
                    std::hash::Hasher::write(&mut hasher, &chunk[..len]);
                    off += len;
                }
                std::hash::Hasher::finish(&hasher)
            }
            (Buffer::Device(_), None) => return Err("no read-back buffer for device memory".into()),
            (other, _) => {
                let h = other.as_host().expect("host or pinned");
                let bytes = h.get(start..start + n as usize).ok_or_else(|| format!("tensor {t} of shard {s} runs past its {} byte buffer", h.len()))?;
                twox_hash::XxHash3_64::oneshot(bytes)
            }
        };
        out.push((s, t, h));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::weights::TensorEntry;

    /// On a GPU: hashes as staged are taken when device memory holds the
    /// staged bytes; a byte flipped in device memory after the load is
    /// caught by the landing checksum and its tensor named by the read-back.
    #[test]
    fn a_byte_flipped_in_device_memory_after_staging_is_caught() {
        let gpu = match crate::mem::Gpu::open(0) {
            Ok(g) => g,
            Err(e) => {
                eprintln!("skipping a_byte_flipped_in_device_memory_after_staging_is_caught: no GPU ({e})");
                return;
            }
        };
        let data: Vec<u8> = (0..(3u64 << 20) + 3).map(|i| (i * 31 % 253) as u8).collect();
        let n = data.len() as u64;
        let cuts = [0, 1000, 1_500_001, n];
        let tensors: Vec<TensorEntry> = cuts
            .windows(2)
            .enumerate()
            .map(|(i, w)| TensorEntry { name: format!("t{i}"), dtype: "U8".into(), shape: vec![(w[1] - w[0]) as usize], offset: w[0], nbytes: w[1] - w[0] })
            .collect();
        let layout = [ShardLayout { key: "m/model.safetensors".into(), object_bytes: n + 8, data_start: 8, tensors, version: None }];
        let mut d = crate::mem::DeviceBuffer::new(&gpu, n as usize, 2, 1 << 20).expect("device buffer");
        d.write_from_host(0, &data).expect("copy in");
        let check = staged_check(&layout);
        let staged = StagedHashes {
            hashes: vec![check.spans[0].iter().map(|r| twox_hash::XxHash3_64::oneshot(&data[r.start as usize..r.end as usize])).collect()],
            landing: vec![crate::mem::landing_checksum(&data)],
            hash_s: 0.1,
            largest_share_bytes: n,
        };
        let mut bufs = vec![Buffer::Device(d)];
        let (hashes, wrong, how) = staged_hashes(&layout, &mut bufs, &staged, 2).expect("the kernel runs");
        assert!(wrong.is_empty());
        assert_eq!(hashes, staged.hashes);
        assert_eq!(how.in_load_s, Some(0.05));
        let Buffer::Device(d) = &mut bufs[0] else { unreachable!() };
        d.write_from_host(1_200_000, &[data[1_200_000] ^ 0x80]).expect("flip");
        let (hashes, wrong, _) = staged_hashes(&layout, &mut bufs, &staged, 2).expect("the kernel runs");
        assert_eq!(wrong, ["m/model.safetensors"]);
        assert_eq!(hashes[0][0], staged.hashes[0][0]);
        assert_ne!(hashes[0][1], staged.hashes[0][1], "the flipped tensor's read-back hash differs");
        assert_eq!(hashes[0][2], staged.hashes[0][2]);
    }

    #[test]
    fn the_largest_tensors_spread_first() {
        let units = [(0, 0, 10), (0, 1, 100), (0, 2, 30), (1, 0, 60), (1, 1, 40)];
        let shares = longest_first(&units, 2);
        let loads: Vec<u64> = shares.iter().map(|s| s.iter().map(|u| u.2).sum()).collect();
        // 100 | 60, then 40 to the 60 (100 | 100), 30 to the first of the tie, 10 to the other:
        // 130 | 110, the best split of these five (no subset sums to 120).
        assert_eq!(loads, [130, 110]);
        assert_eq!(shares[0][0], (0, 1, 100), "the largest goes first");
        let mut all: Vec<_> = shares.concat();
        all.sort();
        let mut want = units.to_vec();
        want.sort();
        assert_eq!(all, want, "every tensor once");
        assert_eq!(longest_first(&units, 8).iter().filter(|s| !s.is_empty()).count(), 5);
    }
}
