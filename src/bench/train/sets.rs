//! Each layout's loader started on this rank's shards: the set listed and
//! checked (`crate::catalog::shards`), the shards dealt to ranks, the buffers
//! allocated before any timed window, the loader tasks spawned. Part of
//! `train` (`mod.rs`).

use std::sync::Arc;

use tokio::sync::mpsc;

use super::loader::{LoaderCtx, start_jpeg, start_raw};
use super::plan::TrainPlan;
use super::{Batch, l_classes};
use crate::bench::session::Session;
use crate::error::{Error, Result};
use crate::flag::{BATCH_SIZE, CROP, FETCH_WORKERS, PREFETCH_BATCHES, PREFIX, SAMPLES_PER_SHARD};
use crate::format::shards::{JpegIndex, RawShard, ShardMeta, TAR_HEADER};
use crate::mem::{Buffer, Dest, Gpu};

/// A loader running on this rank's shards, and what the run records of its set.
pub(super) struct Started {
    /// Classes the model predicts (largest label + 1, or the sidecars' class list).
    pub classes: i64,
    /// Shards in the set.
    pub shards_total: usize,
    /// Shards this rank reads.
    pub shards_mine: usize,
    /// Images in this rank's shards.
    pub samples_mine: u64,
    /// The device batch buffer the stepper copies into (jpeg into device memory).
    pub device_batch: Option<Buffer>,
    /// The loader's tasks (aborted when the run ends).
    pub handles: Vec<tokio::task::JoinHandle<()>>,
    /// JPEG decode threads (0 for raw).
    pub decode_threads: usize,
    /// Bytes a window reads per image it consumes: the set's data bytes per
    /// image, JPEG payload bytes with one GET per sample.
    pub bytes_per_image: f64,
}

/// An allocation that failed, with the flags that shrink it.
fn alloc_err(dest: Dest, what: &str, n: usize, e: String) -> Error {
    Error::Runtime(format!("cannot allocate {what} ({n} bytes of {} memory): {e}: lower {FETCH_WORKERS}/{PREFETCH_BATCHES}/{BATCH_SIZE}", dest.name()))
}

/// The raw layout: `--fetch-workers` whole-shard buffers in `--dest` memory
/// (through the session: bounce buffers where the store stages), cycling
/// through this rank's shards.
///
/// Errors: a set that is missing, damaged or of another kind; images of mixed
/// sizes or smaller than `--crop`; fewer shards than ranks or samples than a
/// batch; memory this host cannot give.
pub(super) async fn start_raw_set(session: &Session, plan: &TrainPlan, prefix: &str, ctx: Arc<LoaderCtx>, tx: mpsc::Sender<Result<Batch>>) -> Result<Started> {
    let (me, dest, batch, crop) = (&session.me, session.mem.dest, plan.batch_size as usize, plan.crop);
    let store = session.store.clone();
    let alloc_err = |what: &str, n: usize, e: String| alloc_err(dest, what, n, e);
    let set = crate::catalog::shards::list::<RawShard>(store.as_ref(), prefix).await?;
    set.warnings.iter().for_each(|w| session.warn(w.clone()));
    let bytes_per_image = set.bytes_per_item();
    let listed = set.shards;
    let shards_total = listed.len();
    let classes = listed.iter().flat_map(|l| l.meta.labels.iter()).max().map_or(1, |&m| m as i64 + 1).max(l_classes(&listed));
    let (h, w) = (listed[0].meta.height, listed[0].meta.width);
    if let Some(l) = listed.iter().find(|l| l.meta.height != h || l.meta.width != w) {
        return Err(Error::Runtime(format!(
            "'{}' holds {}x{} images, the first shard {h}x{w}: one size per {PREFIX}: re-run `s3rdma ingest raw` there",
            l.sidecar_key, l.meta.width, l.meta.height
        )));
    }
    if (crop as u64) > h.min(w) {
        return Err(Error::Usage(format!("{CROP} {crop} is larger than the {w}x{h} images under '{prefix}': lower {CROP}")));
    }
    let mine: Vec<_> = listed.into_iter().enumerate().filter(|(i, _)| i % me.world == me.rank).map(|(_, l)| l).collect();
    if mine.is_empty() {
        return Err(Error::Usage(format!(
            "{shards_total} raw shard(s) for {} ranks: every rank needs a shard; ingest more shards ({SAMPLES_PER_SHARD}) or use fewer ranks",
            me.world
        )));
    }
    if let Some(l) = mine.iter().find(|l| l.meta.samples < batch as u64) {
        return Err(Error::Usage(format!(
            "raw shard '{}' holds {} samples, fewer than {BATCH_SIZE} {batch}: lower {BATCH_SIZE} or ingest with more {SAMPLES_PER_SHARD}",
            l.data_key, l.meta.samples
        )));
    }
    let shards_mine = mine.len();
    let samples_mine = mine.iter().map(|l| l.meta.samples).sum::<u64>();
    let cap = mine.iter().map(|l| l.meta.data_bytes()).max().expect("non-empty") as usize;
    if dest != Dest::Device {
        crate::mem::check_host_memory(
            &format!("{} shard buffers of {cap} bytes", plan.fetch_workers),
            plan.fetch_workers as u64 * cap as u64,
            &format!("lower {FETCH_WORKERS}"),
        )?;
    }
    let bufs = (0..plan.fetch_workers).map(|_| session.buffer(cap).map_err(|e| alloc_err("a shard buffer", cap, e))).collect::<Result<Vec<_>>>()?;
    let device_batch = None;
    let decode_threads = 0;
    let handles = start_raw(ctx.clone(), mine, bufs, tx);
    Ok(Started { classes, shards_total, shards_mine, samples_mine, device_batch, handles, decode_threads, bytes_per_image })
}

/// The jpeg layout: `--prefetch-batches` batch buffers (pinned with a GPU),
/// a device batch buffer for `--dest device`, `--decode-threads` decoders.
///
/// Errors: a set that is missing, damaged or of another kind; fewer shards
/// than ranks; memory or threads this host cannot give.
pub(super) async fn start_jpeg_set(
    session: &Session,
    plan: &TrainPlan,
    prefix: &str,
    gpu: Option<&Arc<Gpu>>,
    ctx: Arc<LoaderCtx>,
    tx: mpsc::Sender<Result<Batch>>,
) -> Result<Started> {
    let (me, dest, batch, crop) = (&session.me, session.mem.dest, plan.batch_size as usize, plan.crop);
    let store = session.store.clone();
    let alloc_err = |what: &str, n: usize, e: String| alloc_err(dest, what, n, e);
    let set = crate::catalog::shards::list::<JpegIndex>(store.as_ref(), prefix).await?;
    set.warnings.iter().for_each(|w| session.warn(w.clone()));
    // Per sample GET a window reads each JPEG payload and its tar header; whole shards, the tar (padding and labels too).
    let bytes_per_image = match plan.jpeg_fetch {
        super::JpegFetch::Sample => {
            let (bytes, n) = set.shards.iter().flat_map(|l| &l.meta.samples).fold((0u64, 0u64), |(b, n), x| (b + TAR_HEADER + x.length, n + 1));
            bytes as f64 / n.max(1) as f64
        }
        super::JpegFetch::Shard => set.bytes_per_item(),
    };
    let listed = set.shards;
    let shards_total = listed.len();
    let classes = listed.iter().flat_map(|l| l.meta.samples.iter().map(|s| s.label)).max().map_or(1, |m| m as i64 + 1);
    let mine: Vec<_> = listed.into_iter().enumerate().filter(|(i, _)| i % me.world == me.rank).map(|(_, l)| l).collect();
    if mine.is_empty() {
        return Err(Error::Usage(format!(
            "{shards_total} jpeg shard(s) for {} ranks: every rank needs a shard; ingest more shards or use fewer ranks",
            me.world
        )));
    }
    let shards_mine = mine.len();
    let samples_mine = mine.iter().map(|l| l.meta.samples.len() as u64).sum();
    let per = batch * (crop * crop * 3) as usize;

    let slot = |_| match (gpu, dest) {
        (Some(g), Dest::Device | Dest::Pinned) => {
            crate::mem::PinnedBuffer::new(g, per).map(Buffer::Pinned).map_err(|e| alloc_err("a pinned batch buffer", per, e))
        }
        _ => Ok(Buffer::host(per)),
    };
    let slots = (0..plan.prefetch_batches).map(slot).collect::<Result<Vec<_>>>()?;
    let device_batch = match (gpu, dest) {
        (Some(g), Dest::Device) => Some(Buffer::Device(crate::mem::DeviceBuffer::new(g, per, 0, 0).map_err(|e| alloc_err("the device batch buffer", per, e))?)),
        _ => None,
    };
    let decode_threads = plan.decode_threads.map_or_else(|| (std::thread::available_parallelism().map_or(1, |n| n.get()) / me.world).max(1), |n| n as usize);
    let pool = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(decode_threads)
            .thread_name(|i| format!("decode-{i}"))
            .build()
            .map_err(|e| Error::Runtime(format!("cannot start decode threads: {e}")))?,
    );
    let handles = start_jpeg(ctx.clone(), mine, slots, plan.jpeg_fetch, plan.sample_gets as usize, pool, crop, tx);
    Ok(Started { classes, shards_total, shards_mine, samples_mine, device_batch, handles, decode_threads, bytes_per_image })
}
