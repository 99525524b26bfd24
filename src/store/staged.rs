//! The staged pipeline: device-memory reads on stores that cannot write
//! device memory themselves (local, http) go through pinned bounce buffers,
//! each read's host-to-device copy queued on its own stream.

use std::ops::Range;

use super::{Backend, ObjectStore, StoreError, Transfer, TransferPath, chunks};
use crate::mem::Buffer;

/// The staged pipeline's reads of `range`: `(read, skip)` pairs, where
/// `read` is the range to read into a bounce buffer of `chunk` bytes and
/// `skip` the bytes at its front that belong to no destination (0 but for an
/// O_DIRECT store). With `align` (the store's [`ObjectStore::direct_alignment`])
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
    let launch = |r: Range<u64>, b: Buffer| -> BounceRead<'_> { Box::pin(read_bounce(store, key, r, b, version)) };
    staged_with(store, key, range, dst, at, version, launch).await
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
    let (owned_key, owned_version) = (key.to_string(), version.cloned());
    let launch = |r: Range<u64>, b: Buffer| -> BounceRead<'static> {
        let (s, k, v) = (store.clone(), owned_key.clone(), owned_version.clone());
        Box::pin(async move {
            let task = tokio::spawn(async move { read_bounce(s.as_ref(), &k, r, b, v.as_ref()).await });
            match task.await {
                Ok(done) => done,
                // The read panicked: the panic goes on, as it would have in this task.
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(_) => unreachable!("the runtime is alive while this read is awaited"),
            }
        })
    };
    staged_with(store.as_ref(), key, range, dst, at, version, launch).await
}

/// One bounce buffer's read: the buffer back with what the read did.
type BounceRead<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = (Buffer, Result<Transfer, StoreError>)> + Send + 'a>>;

/// The pipeline of [`staged_read`], each bounce buffer's read started by `launch`.
async fn staged_with<'a>(
    store: &dyn ObjectStore,
    key: &str,
    range: Option<Range<u64>>,
    dst: &mut crate::mem::DeviceBuffer,
    at: usize,
    version: Option<&super::ObjectVersion>,
    launch: impl Fn(Range<u64>, Buffer) -> BounceRead<'a>,
) -> Result<Transfer, StoreError> {
    let cuda = |e: String| StoreError::Other { op: "GET", key: key.into(), location: store.location(), detail: e };
    let range = match range {
        Some(r) => r,
        None => 0..store.head(key).await?.size,
    };
    let len = range.end - range.start;
    if len + at as u64 > dst.device_ptr().1 as u64 {
        return Err(StoreError::BufferTooSmall { key: key.into(), needed: len + at as u64, capacity: dst.device_ptr().1 as u64 });
    }
    let n = dst.bounce.len();
    if n < 2 {
        return Err(StoreError::Config("staged device reads need at least 2 bounce buffers (--bounce-buffers)".into()));
    }
    let chunk = dst.bounce[0].len() as u64;
    let plan = read_plan(range.clone(), chunk, store.direct_alignment());
    let path = match store.backend() {
        Backend::Local => TransferPath::Local,
        _ => TransferPath::HttpStaged,
    };
    let t0 = std::time::Instant::now();
    let mut first_byte = None;
    let mut served: Option<super::ObjectVersion> = version.cloned();
    // The bounce buffers travel with their reads (each read owns its buffer),
    // and come back to `dst` whatever happens.
    let mut idle: Vec<(usize, Buffer)> = std::mem::take(&mut dst.bounce).into_iter().enumerate().rev().collect();
    let mut inflight = futures::stream::FuturesUnordered::new();
    let mut next = 0;
    let mut failed: Option<StoreError> = None;
    loop {
        while failed.is_none() && next < plan.len() {
            let Some((i, b)) = idle.pop() else { break };
            if let Err(e) = dst.wait(i) {
                idle.push((i, b));
                failed = Some(cuda(e));
                break;
            }
            let (r, skip) = plan[next].clone();
            next += 1;
            let read = launch(r.clone(), b);
            inflight.push(async move {
                let (b, t) = read.await;
                // The destination's part: the read without its skipped front.
                (i, b, r.start + skip..r.end, skip as usize, t)
            });
        }
        let Some((i, b, r, skip, t)) = futures::StreamExt::next(&mut inflight).await else { break };
        match t {
            Ok(t) if failed.is_none() => {
                if let Some(v) = &t.version {
                    match &served {
                        None => served = Some(v.clone()),
                        Some(s) => {
                            if let Err(e) = super::check_version(key, &store.location(), s, Some(v)) {
                                failed = Some(e);
                            }
                        }
                    }
                }
                if r.start == range.start {
                    // The first chunk's GET starts at t0.
                    first_byte = t.first_byte;
                }
                let len = (r.end - r.start) as usize;
                let src = &b.as_host().expect("bounce buffers are pinned")[skip..skip + len];
                if let Err(e) = dst.copy_in_async_from(i, src, at + (r.start - range.start) as usize) {
                    failed = Some(cuda(e));
                }
            }
            Ok(_) => {}
            Err(e) => {
                failed.get_or_insert(e);
            }
        }
        idle.push((i, b));
    }
    idle.sort_by_key(|(i, _)| *i);
    dst.bounce = idle.into_iter().map(|(_, b)| b).collect();
    let mut waited = Ok(());
    for i in 0..n {
        waited = waited.and(dst.wait(i));
    }
    if let Some(e) = failed {
        return Err(e);
    }
    waited.map_err(cuda)?;
    Ok(Transfer { bytes: len, path, first_byte: first_byte.or(Some(t0.elapsed())), version: served })
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
}
