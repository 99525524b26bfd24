//! Each fetch stream's buffer: a whole-object buffer, or one reused
//! buffer read through in ranged reads, in order (`--stream-buffer`; with whole-object buffers
//! alone, 64 streams x 1 GiB objects needed 64 GiB of buffers, where warp
//! reads them in bounded memory).

use std::time::Instant;

use super::plan::StreamBuffer;
use super::record::{StreamBufferKind, StreamBufferParams};
use crate::error::{Error, Result, StoreError};
use crate::flag::{CONCURRENCY, PREPARE, PROCS, SIZES, STREAM_BUFFER, VERIFY};
use crate::mem::{Buffer, Dest};
use crate::store::{self, ObjectStore, Transfer};
use crate::units::{size_approx, size_name};

/// How every stream's buffer is sized for the whole run, decided once from
/// the flags and the host before any rank starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BufferPlan {
    /// One buffer of the object's size per stream.
    Object,
    /// One reusable buffer per stream of this many bytes (`None`: the store's
    /// [`Capabilities::ranged_read`](crate::store::Capabilities::ranged_read), asked once the store is open).
    Reused(Option<u64>),
}

/// What the plan was chosen from: the widest cell and the host's memory (bytes).
#[derive(Debug, Clone, Copy)]
pub(super) struct PlanInput {
    /// `--stream-buffer`.
    pub flag: StreamBuffer,
    /// Destination memory kind.
    pub dest: Dest,
    /// Largest `--sizes` value.
    pub max_size: u64,
    /// Largest `--concurrency` x largest `--procs`: buffers alive at once on one host.
    pub streams: u64,
    /// Host memory in total (fixed, so every rank on a host decides alike).
    pub total: u64,
    /// Host memory available now (0 when unknown: no check).
    pub available: u64,
}

/// Choose the plan, or refuse buffers the host cannot hold.
///
/// `auto` keeps whole-object buffers while they need at most half of the
/// host's total memory or the destination is device memory, else reads
/// through a reused buffer of the store's ranged-read size. Whatever was chosen must fit in 90 % of the
/// memory available now.
///
/// Errors: [`Error::Usage`] naming the sizes, the memory and the flags that fix it.
pub(super) fn plan(p: &PlanInput) -> Result<BufferPlan> {
    let whole = p.max_size.saturating_mul(p.streams);
    let plan = match p.flag {
        StreamBuffer::Object => BufferPlan::Object,
        // No buffer larger than the largest object: that is what is allocated and recorded.
        StreamBuffer::Reused(n) => BufferPlan::Reused(Some(n.min(p.max_size))),
        StreamBuffer::Auto if p.dest == Dest::Device || whole <= p.total / 2 => BufferPlan::Object,
        StreamBuffer::Auto => BufferPlan::Reused(None),
    };
    fits(plan, p)?;
    Ok(plan)
}

/// Refuse a plan whose host buffers need more than 90 % of the memory
/// available now (a ranged-read size not yet known, device buffers: nothing to check
/// here; a device allocation names its own failure).
fn fits(plan: BufferPlan, p: &PlanInput) -> Result<()> {
    let need = match plan {
        BufferPlan::Object if p.dest != Dest::Device => p.max_size.saturating_mul(p.streams),
        BufferPlan::Reused(Some(n)) if p.dest != Dest::Device => n.min(p.max_size).saturating_mul(p.streams),
        _ => 0,
    };
    if p.available > 0 && need > p.available / 10 * 9 {
        let fix = match plan {
            BufferPlan::Object => format!("lower {SIZES}, {CONCURRENCY} or {PROCS}, or read through one reused buffer per stream with {STREAM_BUFFER} 64MiB"),
            _ => format!("lower {STREAM_BUFFER}, {CONCURRENCY} or {PROCS}"),
        };
        let per = match plan {
            BufferPlan::Reused(Some(n)) => n.min(p.max_size),
            _ => p.max_size,
        };
        return Err(Error::Usage(format!(
            "{} stream(s) x {} needs {} of buffers but only {} of memory is available: {fix}",
            p.streams,
            size_name(per),
            size_approx(need),
            size_approx(p.available)
        )));
    }
    Ok(())
}

/// Resolve the store's ranged-read size for [`BufferPlan::Reused`]`(None)` and
/// check that its buffers fit as [`plan`] checks the others.
///
/// Errors: [`Error::Usage`] when the store cannot read ranges on its own
/// transport (rdma without ranged reads would read them over HTTP).
pub(super) fn resolve(plan: BufferPlan, input: &PlanInput, store: &dyn ObjectStore, why: &str) -> Result<BufferPlan> {
    match plan {
        BufferPlan::Reused(None) => match store.capabilities().ranged_read {
            Some(n) => {
                // The size is known only now: the same check as for a --stream-buffer size.
                let resolved = BufferPlan::Reused(Some(n));
                fits(resolved, input)?;
                Ok(resolved)
            }
            None => Err(Error::Usage(format!(
                "{why}, and this {} store reads ranges off its transport: pass {STREAM_BUFFER} object with fewer {CONCURRENCY} or smaller {SIZES}",
                store.capabilities().name
            ))),
        },
        p => Ok(p),
    }
}

/// Bytes of one stream's buffer for objects of `size` bytes.
pub(super) fn buffer_len(plan: BufferPlan, size: u64) -> u64 {
    match plan {
        BufferPlan::Reused(Some(n)) => n.min(size),
        _ => size,
    }
}

/// The record's description of the plan.
pub(super) fn describe(plan: BufferPlan, chosen_by: &str) -> StreamBufferParams {
    let kind = match plan {
        BufferPlan::Reused(Some(n)) => StreamBufferKind::Reused { buffer_bytes: n },
        _ => StreamBufferKind::Object,
    };
    StreamBufferParams { kind, chosen_by: chosen_by.into() }
}

/// Read the whole object `key` of `size` bytes through `buf`: one read when
/// `buf` holds the object, else ranged reads of `buf.len()` bytes in order,
/// each overwriting the last. Bytes are the sum over the reads (a short read
/// ends the object early, for the caller to report); the first byte is the
/// first read's.
///
/// With `verify` (`Some(threads)`), every read's bytes are compared with
/// what `fetch --prepare` writes there ([`crate::format::pattern::Pattern`]), on that many threads,
/// before the next read overwrites them.
///
/// Errors: the store's; [`Error::Mismatch`] naming the key and the first
/// differing byte when `verify` finds other bytes.
pub(super) async fn read_object(arc: &std::sync::Arc<dyn ObjectStore>, key: &str, size: u64, buf: &mut Buffer, verify: Option<usize>) -> Result<Transfer> {
    let store = arc.as_ref();
    let len = buf.len() as u64;
    if verify.is_some() && len >= size && store.capabilities().page_cache && buf.as_host().is_some() {
        return read_checked_in_pieces(store, key, size, buf).await;
    }
    if len >= size {
        // Device reads name the range so the staged pipeline needs no HEAD.
        let range = matches!(buf, Buffer::Device(_)).then_some(0..size);
        let tr = match buf {
            // Staged into device memory: its bounce reads spread over the
            // runtime's threads, as the weights load reads (same pipeline).
            Buffer::Device(d) if !store.capabilities().device_writes => store::staged_read_spread(arc, key, range, d, 0, None).await?,
            _ => store::read_into(store, key, range, buf).await?,
        };
        if let Some(threads) = verify {
            check(store, key, 0, tr.bytes, buf, threads)?;
        }
        return Ok(tr);
    }
    let t0 = Instant::now();
    let mut out: Option<Transfer> = None;
    // Every ranged read is pinned to the version (tag and object size) the first
    // one came from: a later read of another version, or an answer that
    // states another object size, ends the read as a change.
    let mut pin: Option<store::ObjectVersion> = None;
    for r in store::chunks(0..size, len) {
        let want = r.end - r.start;
        let t = Instant::now();
        let tr = store::read_into_version(store, key, Some(r.clone()), buf, 0, pin.as_ref()).await?;
        if pin.is_none() {
            if let Some(v) = &tr.version
                && v.size != size
            {
                return Err(Error::Store(StoreError::Other {
                    op: "GET",
                    key: key.into(),
                    location: store.location(),
                    detail: format!("the answer says the object is {} bytes, expected {size}: pass {PREPARE} to rewrite it", v.size),
                    cause: None,
                }));
            }
            pin = tr.version.clone();
        }
        if let Some(threads) = verify {
            check(store, key, r.start, tr.bytes, buf, threads)?;
        }
        let o = out.get_or_insert(Transfer { first_byte: tr.first_byte.map(|f| f + (t - t0)), ..Transfer::of(0, tr.path) });
        o.bytes += tr.bytes;
        if tr.bytes != want {
            break;
        }
    }
    Ok(out.expect("size > len > 0: at least one range"))
}

/// Bytes per ranged read of [`read_checked_in_pieces`]: small enough that a
/// piece is still in the core's cache (L2 and the L3 share of one core on
/// the lent hosts' Xeons) when it is checked, large enough that a read costs
/// the page cache nothing beyond its copy.
const CHECK_PIECE: u64 = 2 << 20;

/// `fetch --verify` of the whole object `key` into host memory from a store
/// that serves reads from the page cache: ranged reads of [`CHECK_PIECE`]
/// bytes, each to its own place in `buf`, pinned to the first read's version,
/// and each piece compared with the pattern on this stream's thread right
/// after it lands, while it is still in cache. The check then costs its
/// arithmetic, not a second pass over memory (a whole-object check after the
/// read halved the stream's rate: docs/gpu.md). Every byte is still read once
/// from the store into its place in the destination and checked there.
///
/// Errors: as [`read_object`].
async fn read_checked_in_pieces(store: &dyn ObjectStore, key: &str, size: u64, buf: &mut Buffer) -> Result<Transfer> {
    let t0 = Instant::now();
    let mut out: Option<Transfer> = None;
    for r in store::chunks(0..size, CHECK_PIECE) {
        let (at, want) = (r.start, r.end - r.start);
        let t = Instant::now();
        let pin = out.as_ref().and_then(|o| o.version.clone());
        let tr = store::read_into_version(store, key, Some(r), buf, at as usize, pin.as_ref()).await?;
        let piece = &buf.as_host().expect("checked by the caller")[at as usize..(at + tr.bytes) as usize];
        let found = super::check::off_runtime(|| crate::format::pattern::Pattern::of(key).first_difference(at, piece));
        mismatch(store, key, at, tr.bytes, found)?;
        let o = out.get_or_insert(Transfer { first_byte: tr.first_byte.map(|f| f + (t - t0)), version: tr.version.clone(), ..Transfer::of(0, tr.path) });
        o.bytes += tr.bytes;
        if tr.bytes != want {
            break;
        }
    }
    Ok(out.unwrap_or_else(|| Transfer::of(0, store.capabilities().staged_path)))
}

/// What `fetch --verify` compares with the pattern, as the record's
/// `params.verify_checks` and the line under the table say it: always the
/// bytes in their destination (`dest` memory), never the bytes as staged.
/// `whole`: how many of the run's object sizes fit a stream's buffer (read
/// whole, not in ranged reads): none, some or all.
pub(super) fn verify_checks(store: &dyn ObjectStore, dest: crate::mem::Dest, whole: (bool, bool)) -> String {
    let after = "each read's bytes after the read, on the stream's share of the cores";
    match (dest, whole) {
        (crate::mem::Dest::Device, _) => {
            "device memory, compared on the GPU where the bytes start on a word boundary, else read back through pinned buffers".into()
        }
        (crate::mem::Dest::Host | crate::mem::Dest::Pinned, (true, all)) if store.capabilities().page_cache => {
            let pieces = format!("each {} piece right after its ranged read lands there (still in cache)", size_name(CHECK_PIECE));
            if all { format!("host memory, {pieces}") } else { format!("host memory: objects that fit a stream's buffer {pieces}, larger ones {after}") }
        }
        _ => format!("host memory, {after}"),
    }
}

/// Compare the first `n` bytes of `buf`, the object's bytes from `offset`,
/// with its [`crate::format::pattern::Pattern`], on `threads` threads ([`super::check`]).
fn check(store: &dyn ObjectStore, key: &str, offset: u64, n: u64, buf: &mut Buffer, threads: usize) -> Result<()> {
    let found = super::check::first_difference(key, offset, n, buf, threads)
        .map_err(|e| Error::Runtime(format!("{VERIFY}: cannot check the bytes of '{key}': {e}")))?;
    mismatch(store, key, offset, n, found)
}

/// `found`, the first differing byte of the `n` bytes from `offset` checked,
/// as the run's error; `Ok` when there is none.
fn mismatch(store: &dyn ObjectStore, key: &str, offset: u64, n: u64, found: Option<u64>) -> Result<()> {
    match found {
        None => Ok(()),
        Some(at) => Err(Error::Mismatch(format!(
            "{VERIFY}: object '{key}' at {}: byte {at} (of the bytes {offset}-{} read) differs from what `fetch {PREPARE}` writes there: the store served other bytes (another range or object, or changed bytes), so nothing of this run is counted; an object written another way (another tool, an older s3rdma) never verifies: delete it, then pass {PREPARE}",
            store.location(),
            offset + n.max(1) - 1,
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn input(flag: StreamBuffer, max_size: u64, streams: u64) -> PlanInput {
        PlanInput { flag, dest: Dest::Host, max_size, streams, total: 24 * GIB, available: 22 * GIB }
    }

    #[test]
    fn auto_keeps_objects_while_they_fit_in_half_the_host() {
        assert_eq!(plan(&input(StreamBuffer::Auto, 128 << 20, 64)).unwrap(), BufferPlan::Object);
        // The case: 64 streams x 1 GiB on a 24 GiB host read through a reused buffer of the store's ranged-read size.
        assert_eq!(plan(&input(StreamBuffer::Auto, GIB, 64)).unwrap(), BufferPlan::Reused(None));
        // Device memory keeps whole objects (the bench hands the bytes to the GPU).
        let dev = PlanInput { dest: Dest::Device, ..input(StreamBuffer::Auto, GIB, 64) };
        assert_eq!(plan(&dev).unwrap(), BufferPlan::Object);
    }

    #[test]
    fn what_does_not_fit_is_refused_with_the_fix() {
        let e = plan(&input(StreamBuffer::Object, GIB, 64)).unwrap_err().to_string();
        assert!(e.contains("64 stream(s) x 1GiB needs 64.0GiB") && e.contains("22.0GiB") && e.contains("--stream-buffer 64MiB"), "{e}");
        let e = plan(&input(StreamBuffer::Reused(GIB), 4 * GIB, 64)).unwrap_err().to_string();
        assert!(e.contains("lower --stream-buffer"), "{e}");
        // A reused buffer never counts for more than the object.
        assert_eq!(plan(&input(StreamBuffer::Reused(GIB), 1 << 20, 64)).unwrap(), BufferPlan::Reused(Some(1 << 20)));
        assert_eq!(buffer_len(BufferPlan::Reused(Some(GIB)), 1 << 20), 1 << 20);
        assert_eq!(buffer_len(BufferPlan::Object, 5), 5);
    }
}
