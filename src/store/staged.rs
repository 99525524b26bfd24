//! The staged pipeline: device-memory reads on stores that cannot write
//! device memory themselves (local, http) go through pinned bounce buffers,
//! each read's host-to-device copy queued on its own stream.

use std::ops::Range;

use super::{ObjectStore, StoreError, Transfer, chunks};
use crate::flag::BOUNCE_BUFFERS;
use crate::mem::Buffer;

/// The staged pipeline's reads of `range`: `(read, skip)` pairs, where
/// `read` is the range to read into a bounce buffer of `chunk` bytes and
/// `skip` the bytes at its front that belong to no destination (0 but for an
/// O_DIRECT store). With `align` (the store's [`Capabilities::direct_alignment`](super::Capabilities::direct_alignment))
/// and an unaligned `range.start`, every read starts on `align`, `skip` bytes
/// early, and carries at most `chunk - align` bytes of the range, so read plus
/// skip fit the buffer: a safetensors data section (it starts at 8 + header
/// length) is then still read with O_DIRECT. The reads cover `range` exactly
/// once, in order; the store's byte counters include the skipped fronts (less
/// than `align` bytes per read).
pub fn read_plan(range: Range<u64>, chunk: u64, align: Option<u64>) -> Vec<(Range<u64>, u64)> {
    let skip = align.filter(|&a| a > 1).map_or(0, |a| range.start % a);
    let step = match align {
        Some(a) if skip > 0 => (chunk / a).saturating_sub(1) * a,
        _ => 0,
    };
    if skip == 0 || step == 0 {
        return chunks(range, chunk).into_iter().map(|r| (r, 0)).collect();
    }
    chunks(range, step).into_iter().map(|r| (r.start - skip..r.end, skip)).collect()
}

/// One object's part of a staged read: `range` of `key` into its destination
/// at byte `at`, every read of it asking for `version` when given.
#[derive(Debug, Clone)]
pub struct StagedPart {
    /// The object's key.
    pub key: String,
    /// Byte range of the object to read.
    pub range: Range<u64>,
    /// Byte offset in the destination where `range.start` lands.
    pub at: usize,
    /// The version every read asks for; `None`: the versions the reads report must agree.
    pub version: Option<super::ObjectVersion>,
}

/// The staged pipeline: the object is read in bounce-buffer-sized ranged
/// reads, one in flight per bounce buffer (`--bounce-buffers`), and each
/// buffer's host-to-device copy is queued on its own stream the moment its
/// read lands, so transport reads and PCIe copies overlap with no barrier
/// between them. A bounce buffer is refilled only after its stream has
/// finished the previous copy out of it.
/// (The earlier form read half the buffers at a time in lock-step groups:
/// half as many GETs in flight, and each group waited for its slowest.)
/// Every read is of one object version: `version` when given (each read
/// asks for it, [`ObjectStore::get_into_version`]), else the versions the
/// reads report must agree.
///
/// Errors: [`StoreError::Changed`] when two reads report different versions;
/// the reads' errors; CUDA errors as [`StoreError::Other`].
pub async fn staged_read(
    store: &dyn ObjectStore,
    key: &str,
    range: Option<Range<u64>>,
    dst: &mut crate::mem::DeviceBuffer,
    at: usize,
    version: Option<&super::ObjectVersion>,
) -> Result<Transfer, StoreError> {
    let part = whole(store, key, range, at, version).await?;
    let launch = |p: &StagedPart, r: Range<u64>, b: Buffer| -> BounceRead<'_> {
        let (k, v) = (p.key.clone(), p.version.clone());
        Box::pin(async move { read_bounce(store, &k, r, b, v.as_ref()).await })
    };
    let mut t = staged_with(store, std::slice::from_ref(&part), &mut [dst], launch).await?;
    Ok(t.remove(0))
}

/// The part a single-object staged read covers: `range`, or the whole object (a HEAD).
async fn whole(
    store: &dyn ObjectStore,
    key: &str,
    range: Option<Range<u64>>,
    at: usize,
    version: Option<&super::ObjectVersion>,
) -> Result<StagedPart, StoreError> {
    let range = match range {
        Some(r) => r,
        None => 0..store.head(key).await?.size,
    };
    Ok(StagedPart { key: key.into(), range, at, version: version.cloned() })
}

/// One bounce buffer's read of `r` (of `version` when given), the buffer handed back with the outcome.
async fn read_bounce(
    store: &dyn ObjectStore,
    key: &str,
    r: Range<u64>,
    mut b: Buffer,
    version: Option<&super::ObjectVersion>,
) -> (Buffer, Result<Transfer, StoreError>) {
    let t = match version {
        Some(v) => store.get_into_version(key, Some(r), &mut b, 0, v).await,
        None => store.get_into(key, Some(r), &mut b).await,
    };
    (b, t)
}

/// A launcher that runs every bounce buffer's read as a task of its own, so
/// the reads' socket work spreads over the runtime's threads.
fn spawned(store: &std::sync::Arc<dyn ObjectStore>) -> impl Fn(&StagedPart, Range<u64>, Buffer) -> BounceRead<'static> + '_ {
    move |p, r, b| {
        let (s, k, v) = (store.clone(), p.key.clone(), p.version.clone());
        Box::pin(async move {
            let task = tokio::spawn(async move { read_bounce(s.as_ref(), &k, r, b, v.as_ref()).await });
            match task.await {
                Ok(done) => done,
                // The read panicked: the panic goes on, as it would have in this task.
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(_) => unreachable!("the runtime is alive while this read is awaited"),
            }
        })
    }
}

/// [`staged_read`] with every bounce buffer's read a task of its own, so the
/// reads' socket work spreads over the runtime's threads: polled inside the
/// caller's task, all of one object's reads share one core (the weights load
/// over http, 4 shards: 3.3 client cores where fetch's streams use 7-9). The
/// host-to-device copies stay in the caller's task, queued as before.
///
/// Errors: as [`staged_read`].
pub async fn staged_read_spread(
    store: &std::sync::Arc<dyn ObjectStore>,
    key: &str,
    range: Option<Range<u64>>,
    dst: &mut crate::mem::DeviceBuffer,
    at: usize,
    version: Option<&super::ObjectVersion>,
) -> Result<Transfer, StoreError> {
    let part = whole(store.as_ref(), key, range, at, version).await?;
    let mut t = staged_with(store.as_ref(), std::slice::from_ref(&part), &mut [dst], spawned(store)).await?;
    Ok(t.remove(0))
}

/// Several objects through one staged pipeline: `parts[i]` into `dsts[i]`,
/// the bounce buffers of every destination pooled, and the reads queued in
/// `parts`' order (each part's ranges in order), so every bounce buffer stays
/// busy until the last read whatever the parts' sizes. One pipeline per
/// object instead idles a small object's buffers once it is done (a
/// safetensors model's last shard is often a quarter of the others:
/// Llama-3.1-8B's is 1.17 of 16.06 GB). Each read is a task of its own (as
/// [`staged_read_spread`]). Returns one [`Transfer`] per part, in order.
///
/// Errors: `parts` and `dsts` of different lengths, or fewer than 2 bounce
/// buffers in all, as [`StoreError::Config`]; otherwise as [`staged_read`]
/// (the first error stops the queue; reads in flight finish first).
pub async fn staged_read_pooled(
    store: &std::sync::Arc<dyn ObjectStore>,
    parts: &[StagedPart],
    dsts: &mut [&mut crate::mem::DeviceBuffer],
) -> Result<Vec<Transfer>, StoreError> {
    staged_with(store.as_ref(), parts, dsts, spawned(store)).await
}

/// One bounce buffer's read: the buffer back with what the read did.
type BounceRead<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = (Buffer, Result<Transfer, StoreError>)> + Send + 'a>>;

/// The pooled pipeline's reads: every part's [`read_plan`] in `parts`' order,
/// each read as `(part index, read, skip)`.
fn pooled_plan(parts: &[StagedPart], chunk: u64, align: Option<u64>) -> Vec<(usize, Range<u64>, u64)> {
    parts.iter().enumerate().flat_map(|(k, p)| read_plan(p.range.clone(), chunk, align).into_iter().map(move |(r, skip)| (k, r, skip))).collect()
}

/// Where one part stands: the version its reads were served from, its first
/// chunk's time to first byte.
#[derive(Default)]
struct PartState {
    served: Option<super::ObjectVersion>,
    first_byte: Option<std::time::Duration>,
}

/// One destination per part, each large enough for its part at its offset.
///
/// Errors: [`StoreError::Config`] for a count mismatch, [`StoreError::BufferTooSmall`].
fn check_destinations(parts: &[StagedPart], dsts: &[&mut crate::mem::DeviceBuffer]) -> Result<(), StoreError> {
    if parts.len() != dsts.len() {
        return Err(StoreError::Config(format!("a staged read of {} parts into {} buffers", parts.len(), dsts.len())));
    }
    for (p, d) in parts.iter().zip(dsts.iter()) {
        let needed = p.range.end.saturating_sub(p.range.start) + p.at as u64;
        if needed > d.device_ptr().1 as u64 {
            return Err(StoreError::BufferTooSmall { key: p.key.clone(), needed, capacity: d.device_ptr().1 as u64 });
        }
    }
    Ok(())
}

/// The pipeline of [`staged_read_pooled`], each bounce buffer's read started by `launch`.
async fn staged_with<'a>(
    store: &dyn ObjectStore,
    parts: &[StagedPart],
    dsts: &mut [&mut crate::mem::DeviceBuffer],
    launch: impl Fn(&StagedPart, Range<u64>, Buffer) -> BounceRead<'a>,
) -> Result<Vec<Transfer>, StoreError> {
    check_destinations(parts, dsts)?;
    let cuda = |p: &StagedPart, e: String| StoreError::Other { op: "GET", key: p.key.clone(), location: store.location(), detail: e, cause: None };
    // The pool: (owner, index in the owner, buffer); the owner's stream `index` carries its copies.
    let mut idle: Vec<(usize, usize, Buffer)> = Vec::new();
    for (o, d) in dsts.iter_mut().enumerate() {
        idle.extend(std::mem::take(&mut d.bounce).into_iter().enumerate().map(|(i, b)| (o, i, b)));
    }
    let Some(chunk) = idle.iter().map(|(_, _, b)| b.len() as u64).min().filter(|_| idle.len() >= 2) else {
        // Nothing was queued by this call: the wait's outcome adds nothing to the error.
        let _ = give_back(dsts, idle);
        return Err(StoreError::Config(format!("staged device reads need at least 2 bounce buffers ({BOUNCE_BUFFERS})")));
    };
    idle.reverse();
    let caps = store.capabilities();
    let plan = pooled_plan(parts, chunk, caps.direct_alignment);
    let path = caps.staged_path;
    let t0 = std::time::Instant::now();
    let mut state: Vec<PartState> = parts.iter().map(|p| PartState { served: p.version.clone(), first_byte: None }).collect();
    let mut inflight = futures::stream::FuturesUnordered::new();
    let mut next = 0;
    let mut failed: Option<StoreError> = None;
    loop {
        while failed.is_none() && next < plan.len() {
            let Some((o, i, b)) = idle.pop() else { break };
            let (k, r, skip) = plan[next].clone();
            if let Err(e) = dsts[o].wait(i) {
                idle.push((o, i, b));
                failed = Some(cuda(&parts[k], e));
                break;
            }
            next += 1;
            let read = launch(&parts[k], r.clone(), b);
            inflight.push(async move {
                let (b, t) = read.await;
                // The destination's part: the read without its skipped front.
                (o, i, b, k, r.start + skip..r.end, skip as usize, t)
            });
        }
        let Some((o, i, b, k, r, skip, t)) = futures::StreamExt::next(&mut inflight).await else { break };
        match t {
            Ok(t) if failed.is_none() => {
                let (p, st) = (&parts[k], &mut state[k]);
                if let Some(v) = &t.version {
                    match &st.served {
                        None => st.served = Some(v.clone()),
                        Some(s) => {
                            if let Err(e) = super::check_version(&p.key, &store.location(), s, Some(v)) {
                                failed = Some(e);
                            }
                        }
                    }
                }
                if r.start == p.range.start {
                    // The first chunk's GET starts when the part's first read is issued.
                    st.first_byte = t.first_byte;
                }
                let len = (r.end - r.start) as usize;
                let src = &b.as_host().expect("bounce buffers are pinned")[skip..skip + len];
                let d = &*dsts;
                if let Err(e) = d[k].copy_in_async_via(d[o], i, src, p.at + (r.start - p.range.start) as usize) {
                    failed = Some(cuda(p, e));
                }
            }
            Ok(_) => {}
            Err(e) => {
                failed.get_or_insert(e);
            }
        }
        idle.push((o, i, b));
    }
    let waited = give_back(dsts, idle);
    if let Some(e) = failed {
        return Err(e);
    }
    waited.map_err(|e| cuda(&parts[0], e))?;
    Ok(parts
        .iter()
        .zip(state)
        .map(|(p, st)| Transfer { bytes: p.range.end - p.range.start, path, first_byte: st.first_byte.or(Some(t0.elapsed())), version: st.served })
        .collect())
}

/// Return every pooled bounce buffer to its owner, in its place, and wait
/// for every owner's copies (all of them, even after an error).
pub(super) fn give_back(dsts: &mut [&mut crate::mem::DeviceBuffer], mut pool: Vec<(usize, usize, Buffer)>) -> Result<(), String> {
    pool.sort_by_key(|(o, i, _)| (*o, *i));
    for (o, _, b) in pool {
        dsts[o].bounce.push(b);
    }
    let mut waited = Ok(());
    for d in dsts.iter() {
        for i in 0..d.bounce.len() {
            waited = waited.and(d.wait(i));
        }
    }
    waited
}

/// How many of a pool of `pool` bounce buffers of `chunk` bytes each buffer
/// of `lens` owns: no more in all than the reads of every buffer need (at
/// least 2, the pipeline's minimum), so a small model pins no more than it
/// reads; spread evenly, the first buffers taking the remainder, the last
/// none when there are more buffers than bounce buffers.
pub fn pool_shares(lens: &[usize], pool: usize, chunk: usize) -> Vec<usize> {
    let reads: usize = lens.iter().map(|&n| n.div_ceil(chunk.max(1))).sum();
    let pool = pool.min(reads.max(2));
    let n = lens.len().max(1);
    (0..lens.len()).map(|i| pool / n + usize::from(i < pool % n)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_plan_aligns_direct_reads_and_covers_the_range_once() {
        let mib = 1u64 << 20;
        // No alignment need, or an aligned start: plain chunks, nothing skipped.
        assert_eq!(read_plan(100..300, 128, None), vec![(100..228, 0), (228..300, 0)]);
        assert_eq!(read_plan(8192..8192 + 3 * mib, mib, Some(4096)).len(), 3);
        // A safetensors data section: 8 + 5088-byte header.
        let start = 5096u64;
        let range = start..start + 200 * mib + 17;
        let plan = read_plan(range.clone(), 64 * mib, Some(4096));
        let mut next = range.start;
        for (read, skip) in &plan {
            assert_eq!(read.start % 4096, 0, "{read:?} starts unaligned");
            assert_eq!(*skip, start % 4096);
            assert!(read.end - read.start <= 64 * mib, "{read:?} overflows the bounce buffer");
            assert_eq!(read.start + skip, next, "a gap or overlap at {next}");
            next = read.end;
        }
        assert_eq!(next, range.end);
        // A chunk of one alignment unit cannot shift: plain chunks.
        assert_eq!(read_plan(5..9000, 4096, Some(4096))[0], (5..4101, 0));
    }

    #[test]
    fn pooled_plan_reads_every_part_once_in_file_order() {
        // Three shards of unequal size (the last small, as safetensors models' is).
        let part = |key: &str, range: Range<u64>| StagedPart { key: key.into(), range, at: 0, version: None };
        let parts = [part("a", 8..1000), part("b", 16..2016), part("c", 8..108)];
        let plan = pooled_plan(&parts, 256, None);
        // Reads go part by part, never back to an earlier part.
        let order: Vec<usize> = plan.iter().map(|(k, _, _)| *k).collect();
        assert!(order.windows(2).all(|w| w[0] <= w[1]), "{order:?}");
        assert_eq!(order.iter().filter(|&&k| k == 0).count(), 4); // 992 bytes in 256-byte reads
        assert_eq!(order.iter().filter(|&&k| k == 1).count(), 8);
        assert_eq!(order.iter().filter(|&&k| k == 2).count(), 1);
        for (k, p) in parts.iter().enumerate() {
            let mut next = p.range.start;
            for (_, r, skip) in plan.iter().filter(|(i, _, _)| *i == k) {
                assert_eq!((r.start, *skip), (next, 0), "part {k}: a gap or overlap at {next}");
                assert!(r.end - r.start <= 256);
                next = r.end;
            }
            assert_eq!(next, p.range.end, "part {k} not covered to its end");
        }
    }

    #[test]
    fn the_pool_is_spread_and_capped_by_the_reads() {
        let mib = 1 << 20;
        // Llama-3.1-8B's four shards, 64 MiB chunks: 32 spread 8 a shard.
        let llama = [4_976_698_640 - 8, 4_999_802_688 - 8, 4_915_916_152 - 8, 1_168_138_776 - 8];
        assert_eq!(pool_shares(&llama, 32, 64 * mib), [8, 8, 8, 8]);
        assert_eq!(pool_shares(&llama, 30, 64 * mib), [8, 8, 7, 7]);
        // A 40 MB one-file model is one read: the pipeline's minimum of 2, not 32.
        assert_eq!(pool_shares(&[40_000_000], 32, 64 * mib), [2]);
        // More shards than bounce buffers: the last own none.
        assert_eq!(pool_shares(&[mib; 5], 3, mib), [1, 1, 1, 0, 0]);
        assert_eq!(pool_shares(&[], 32, mib), Vec::<usize>::new());
    }
}
