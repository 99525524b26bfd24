//! The input pipeline: fetch workers reading raw shards whole or JPEG samples by ranged GET, decoding on CPU threads into pooled batch buffers.

use super::plan::JpegFetch;
use crate::error::{Error, Result};
use crate::flag::{BATCH_SIZE, JPEG_FETCH};
use crate::format::shards::{JpegIndex, Listed, RawShard, TAR_HEADER};
use crate::mem::Buffer;
use crate::store::ObjectStore;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng, rngs::SmallRng};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;
use tokio::sync::mpsc;

/// Shorter side a JPEG is resized to before the random crop (torchvision's
/// ImageNet recipe: Resize(256) then crop 224).
pub const JPEG_RESIZE: u32 = 256;

/// A buffer on loan from a pool; goes back to the pool when dropped.
#[derive(Debug)]
pub struct Pooled {
    pub(crate) buf: Option<Buffer>,
    pub(crate) home: mpsc::UnboundedSender<Buffer>,
}

impl Pooled {
    /// The buffer.
    pub fn buf(&self) -> &Buffer {
        self.buf.as_ref().expect("present until drop")
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        if let Some(b) = self.buf.take() {
            let _ = self.home.send(b);
        }
    }
}

/// Where a batch's pixels are.
#[derive(Debug)]
pub enum Pixels {
    /// Raw layout: `indices` of the N x H x W x 3 shard in `shard`.
    Shard {
        /// The shard's bytes (N x H x W x 3 uint8), shared by the batches cut from it.
        shard: Arc<Pooled>,
        /// Images in the shard (N).
        samples: u64,
        /// Image height, pixels.
        height: u64,
        /// Image width, pixels.
        width: u64,
        /// Which images of the shard form this batch.
        indices: Vec<u32>,
    },
    /// Jpeg layout: B x crop x crop x 3, already cropped and flipped, in host or pinned memory.
    Staged {
        /// The batch's cropped pixels.
        batch: Pooled,
    },
}

/// One batch handed to the training loop.
#[derive(Debug)]
pub struct Batch {
    /// The batch's pixels.
    pub pixels: Pixels,
    /// Class of each sample.
    pub labels: Vec<i64>,
}

/// Loader-side counters (monotonic; a window reads the difference).
#[derive(Debug, Default)]
pub struct LoaderCounters {
    /// Bytes read from the store.
    pub bytes: AtomicU64,
    /// GET requests (whole shards or windows; one per JPEG sample).
    pub gets: AtomicU64,
    /// Thread-microseconds spent in store reads.
    pub fetch_us: AtomicU64,
    /// Thread-microseconds spent decoding, resizing and cropping.
    pub decode_us: AtomicU64,
}

pub(crate) fn shard_order(n: usize, seed: u64, epoch: u64) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    v.shuffle(&mut SmallRng::seed_from_u64(seed ^ epoch.wrapping_mul(0x9e37_79b9)));
    v
}

/// Everything the loader tasks share.
pub(crate) struct LoaderCtx {
    pub(crate) store: Arc<dyn ObjectStore>,
    pub(crate) counters: Arc<LoaderCounters>,
    pub(crate) stop: Arc<AtomicBool>,
    /// Every store read holds it shared (until its bytes are counted); a
    /// window boundary takes it exclusively, so no read is in flight while
    /// the witness scrapes and the counters are read (a clean window).
    pub(crate) gate: Arc<tokio::sync::RwLock<()>>,
    pub(crate) batch: usize,
    pub(crate) range_bytes: u64,
    pub(crate) seed: u64,
}

/// Start the raw loader: `bufs` (one per worker, each a whole shard) cycle
/// through this rank's shards, epoch after epoch, until `stop`.
pub(crate) fn start_raw(
    ctx: Arc<LoaderCtx>,
    mine: Vec<Listed<RawShard>>,
    bufs: Vec<Buffer>,
    tx: mpsc::Sender<Result<Batch>>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let (home, free) = mpsc::unbounded_channel();
    let workers = bufs.len();
    for b in bufs {
        let _ = home.send(b);
    }
    let free = Arc::new(tokio::sync::Mutex::new(free));
    let next = Arc::new(AtomicU64::new(0));
    let mine = Arc::new(mine);
    (0..workers)
        .map(|_| {
            let (ctx, free, next, mine, tx, home) = (ctx.clone(), free.clone(), next.clone(), mine.clone(), tx.clone(), home.clone());
            tokio::spawn(async move {
                loop {
                    let ticket = next.fetch_add(1, Ordering::Relaxed);
                    let (epoch, i) = (ticket / mine.len() as u64, (ticket % mine.len() as u64) as usize);
                    let shard = &mine[shard_order(mine.len(), ctx.seed, epoch)[i]];
                    let Some(mut buf) = free.lock().await.recv().await else { return };
                    if ctx.stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let io = ctx.gate.read().await;
                    let t = Instant::now();
                    let r = crate::bench::read_range(
                        ctx.store.as_ref(),
                        &shard.data_key,
                        0..crate::format::shards::ShardMeta::data_bytes(&shard.meta),
                        &mut buf,
                        ctx.range_bytes,
                        None,
                    )
                    .await;
                    ctx.counters.fetch_us.fetch_add(t.elapsed().as_micros() as u64, Ordering::Relaxed);
                    match r {
                        Ok((b, n)) => {
                            ctx.counters.bytes.fetch_add(b, Ordering::Relaxed);
                            ctx.counters.gets.fetch_add(n, Ordering::Relaxed);
                        }
                        Err(e) => {
                            drop(io);
                            let _ = tx.send(Err(e)).await;
                            return;
                        }
                    }
                    drop(io);
                    let m = &shard.meta;
                    let mut order: Vec<u32> = (0..m.samples as u32).collect();
                    order.shuffle(&mut SmallRng::seed_from_u64(ctx.seed ^ ticket.wrapping_mul(0x2545_f491)));
                    let slot = Arc::new(Pooled { buf: Some(buf), home: home.clone() });
                    for idx in order.chunks_exact(ctx.batch) {
                        let labels = idx.iter().map(|&i| m.labels[i as usize] as i64).collect();
                        let b = Batch {
                            pixels: Pixels::Shard { shard: slot.clone(), samples: m.samples, height: m.height, width: m.width, indices: idx.to_vec() },
                            labels,
                        };
                        if tx.send(Ok(b)).await.is_err() {
                            return;
                        }
                    }
                }
            })
        })
        .collect()
}

/// Decode one JPEG, resize its shorter side to [`JPEG_RESIZE`], take a random
/// `crop` x `crop` window (flipped left-right half of the time) and write it
/// as HWC RGB into `out` (crop * crop * 3 bytes).
pub fn decode_crop(jpeg: &[u8], crop: u32, rng: &mut SmallRng, out: &mut [u8]) -> std::result::Result<(), String> {
    let img = image::load_from_memory_with_format(jpeg, image::ImageFormat::Jpeg).map_err(|e| e.to_string())?.to_rgb8();
    let (w, h) = img.dimensions();
    let s = JPEG_RESIZE.max(crop);
    let (nw, nh) =
        if w <= h { (s, ((h as u64 * s as u64) / w as u64).max(s as u64) as u32) } else { (((w as u64 * s as u64) / h as u64).max(s as u64) as u32, s) };
    let img = image::imageops::resize(&img, nw, nh, image::imageops::FilterType::Triangle);
    let (x0, y0) = (rng.random_range(0..=nw - crop), rng.random_range(0..=nh - crop));
    let flip = rng.random_bool(0.5);
    let row = crop as usize * 3;
    for y in 0..crop {
        let dst = &mut out[y as usize * row..(y as usize + 1) * row];
        for x in 0..crop {
            let sx = if flip { x0 + crop - 1 - x } else { x0 + x };
            dst[x as usize * 3..x as usize * 3 + 3].copy_from_slice(&img.get_pixel(sx, y0 + y).0);
        }
    }
    Ok(())
}

/// `--jpeg-fetch shard`: batches cut from one whole shard at a time,
/// shuffled within it, the next shard read ahead meanwhile.
#[derive(Default)]
struct ShardCursor {
    /// The current shard's `(shard, sample)` picks, shuffled, and the next one's position.
    order: Vec<(usize, usize)>,
    pos: usize,
    /// The current shard's bytes, shared by the batches cut from it.
    cache: Option<(usize, Arc<Buffer>)>,
    /// Shards read so far (each read's seed).
    ticket: u64,
    /// The shard being read ahead.
    next: Option<tokio::task::JoinHandle<Result<(usize, Buffer)>>>,
}

impl ShardCursor {
    /// The next batch's picks, moving to the shard read ahead (and starting
    /// the next read) when this one has too few samples left.
    ///
    /// Errors: a shard read that failed; a shard of fewer samples than a batch (usage).
    async fn next_batch(&mut self, ctx: &Arc<LoaderCtx>, mine: &Arc<Vec<Listed<JpegIndex>>>) -> Result<Vec<(usize, usize)>> {
        if self.pos + ctx.batch > self.order.len() {
            // The shard read ahead (or, the first time, this one read now), then the next one started.
            let ahead = match self.next.take() {
                Some(h) => h,
                None => spawn_shard_read(ctx.clone(), mine.clone(), &mut self.ticket),
            };
            self.next = Some(spawn_shard_read(ctx.clone(), mine.clone(), &mut self.ticket));
            let (s, b) = ahead.await.unwrap_or_else(|e| Err(Error::Runtime(format!("shard read task: {e}"))))?;
            self.order = (0..mine[s].meta.samples.len()).map(|i| (s, i)).collect();
            self.order.shuffle(&mut SmallRng::seed_from_u64(ctx.seed ^ self.ticket));
            self.pos = 0;
            self.cache = Some((s, Arc::new(b)));
            if self.order.len() < ctx.batch {
                return Err(Error::Usage(format!(
                    "jpeg shard '{}' holds {} samples, fewer than {BATCH_SIZE} {}: use {JPEG_FETCH} sample or a smaller {BATCH_SIZE}",
                    mine[s].data_key,
                    self.order.len(),
                    ctx.batch
                )));
            }
        }
        self.pos += ctx.batch;
        Ok(self.order[self.pos - ctx.batch..self.pos].to_vec())
    }
}

/// The next `batch` `(shard, sample)` picks of `--jpeg-fetch sample`: in
/// `order` from `pos`, which is refilled with all of this rank's samples in
/// a fresh order (seeded by `seed`) each time it runs out.
fn next_samples(all: &[(usize, usize)], order: &mut Vec<(usize, usize)>, pos: &mut usize, batch: usize, seed: u64) -> Vec<(usize, usize)> {
    (0..batch)
        .map(|_| {
            if *pos == order.len() {
                *order = all.to_vec();
                order.shuffle(&mut SmallRng::seed_from_u64(seed));
                *pos = 0;
            }
            *pos += 1;
            order[*pos - 1]
        })
        .collect()
}

/// Decode and crop every JPEG of a batch into `slot` (`crop` x `crop` x 3
/// each, back to back) on the `decode` pool, each with its own random crop
/// (`batch_seed` ^ its index); the slot back, and the first sample that does
/// not decode (named by its key).
fn decode_batch(
    mut slot: Buffer,
    jpegs: &[Vec<u8>],
    keys: &[String],
    crop: u32,
    decode: &rayon::ThreadPool,
    counters: &LoaderCounters,
    batch_seed: u64,
) -> (Buffer, std::result::Result<(), String>) {
    let per = (crop * crop * 3) as usize;
    let out = slot.as_host_mut().expect("batch slots are host or pinned memory");
    let r = decode.install(|| {
        use rayon::prelude::*;
        out[..per * jpegs.len()].par_chunks_mut(per).zip(jpegs.par_iter()).enumerate().try_for_each(|(i, (dst, j))| {
            let mut rng = SmallRng::seed_from_u64(batch_seed ^ i as u64);
            // Thread-seconds: each sample's own decode time on its thread.
            let t = Instant::now();
            let r = decode_crop(j, crop, &mut rng, dst).map_err(|e| format!("sample '{}' does not decode as JPEG ({e})", keys[i]));
            counters.decode_us.fetch_add(t.elapsed().as_micros() as u64, Ordering::Relaxed);
            r
        })
    });
    (slot, r)
}

/// Start the jpeg loader: a producer fills `slots` (host or pinned batch
/// buffers, B x crop x crop x 3) batch after batch, up to `slots.len()` batches
/// in preparation at once; samples come by ranged GET (`Sample`) or out of
/// whole shards held in host memory (`Shard`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn start_jpeg(
    ctx: Arc<LoaderCtx>,
    mine: Vec<Listed<JpegIndex>>,
    slots: Vec<Buffer>,
    fetch: JpegFetch,
    sample_gets: usize,
    decode: Arc<rayon::ThreadPool>,
    crop: u32,
    tx: mpsc::Sender<Result<Batch>>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let (home, mut free) = mpsc::unbounded_channel();
    for b in slots {
        let _ = home.send(b);
    }
    let gets = Arc::new(tokio::sync::Semaphore::new(sample_gets));
    // Every (shard, sample) of this rank, in a fresh order each epoch.
    let all: Arc<Vec<(usize, usize)>> = Arc::new(mine.iter().enumerate().flat_map(|(s, l)| (0..l.meta.samples.len()).map(move |i| (s, i))).collect());
    let mine = Arc::new(mine);
    // Whole-shard mode: the current shard's bytes, shared by the batches cut from it.
    let producer = tokio::spawn(async move {
        let mut ticket = 0u64;
        let mut order: Vec<(usize, usize)> = Vec::new();
        let mut pos = 0usize;
        let mut shards = ShardCursor::default();
        loop {
            let Some(slot) = free.recv().await else { return };
            if ctx.stop.load(Ordering::Relaxed) {
                return;
            }
            // Choose this batch's samples.
            let picks: Vec<(usize, usize)> = match fetch {
                JpegFetch::Sample => next_samples(&all, &mut order, &mut pos, ctx.batch, ctx.seed ^ ticket.wrapping_mul(0x2545_f491)),
                JpegFetch::Shard => match shards.next_batch(&ctx, &mine).await {
                    Ok(p) => p,
                    Err(e) => {
                        let _ = tx.send(Err(e)).await;
                        return;
                    }
                },
            };
            ticket += 1;
            let (ctx, mine, gets, decode, tx, home, cache) =
                (ctx.clone(), mine.clone(), gets.clone(), decode.clone(), tx.clone(), home.clone(), shards.cache.clone());
            let batch_seed = ctx.seed ^ ticket.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            tokio::spawn(async move {
                let jpegs = match sample_bytes(&ctx, &mine, &gets, &picks, cache.filter(|_| fetch == JpegFetch::Shard)).await {
                    Ok(j) => j,
                    Err(e) => {
                        let _ = tx.send(Err(e)).await;
                        return;
                    }
                };
                let labels: Vec<i64> = picks.iter().map(|&(s, i)| mine[s].meta.samples[i].label as i64).collect();
                let keys: Vec<String> = picks.iter().map(|&(s, i)| format!("{}/{}", mine[s].data_key, mine[s].meta.samples[i].key)).collect();
                let counters = ctx.counters.clone();
                // Decode on the decode pool (blocking work off the async runtime).
                let decoded = tokio::task::spawn_blocking(move || decode_batch(slot, &jpegs, &keys, crop, &decode, &counters, batch_seed)).await;
                let (slot, r) = match decoded {
                    Ok(x) => x,
                    Err(e) => {
                        let _ = tx.send(Err(Error::Runtime(format!("decode task failed: {e}")))).await;
                        return;
                    }
                };
                let batch = Pooled { buf: Some(slot), home };
                let msg = r
                    .map(|_| Batch { pixels: Pixels::Staged { batch }, labels })
                    .map_err(|e| Error::Runtime(format!("{e}: rebuild the shard with `s3rdma ingest jpeg`")));
                let _ = tx.send(msg).await;
            });
        }
    });
    vec![producer]
}

/// The JPEG bytes of each `(shard, sample)` of `picks`, in order: cut from
/// the whole shard in `cache` (`--jpeg-fetch shard`, every pick from that
/// shard), else one ranged GET per sample, at most `gets` at once (each
/// counted in the loader's fetch time, bytes and GETs).
///
/// Errors: a GET's, or one that returned fewer bytes than the index says.
async fn sample_bytes(
    ctx: &Arc<LoaderCtx>,
    mine: &[Listed<JpegIndex>],
    gets: &Arc<tokio::sync::Semaphore>,
    picks: &[(usize, usize)],
    cache: Option<(usize, Arc<Buffer>)>,
) -> Result<Vec<Vec<u8>>> {
    if let Some((s, buf)) = cache {
        let host = buf.as_host().expect("host");
        return Ok(picks
            .iter()
            .map(|&(ps, i)| {
                debug_assert_eq!(ps, s);
                let e = &mine[ps].meta.samples[i];
                host[e.offset as usize..(e.offset + e.length) as usize].to_vec()
            })
            .collect());
    }
    let futs = picks.iter().map(|&(s, i)| {
        let (ctx, gets) = (ctx.clone(), gets.clone());
        let l = &mine[s];
        let e = l.meta.samples[i].clone();
        let (key, index) = (l.data_key.clone(), l.sidecar_key.clone());
        async move {
            let _p = gets.acquire_owned().await;
            let _io = ctx.gate.read().await;
            let t = Instant::now();
            // The member's tar header too: it says whether these are the sample's bytes.
            let want = TAR_HEADER + e.length;
            let mut b = Buffer::from_vec(vec![0u8; want as usize]);
            let r = ctx.store.get_into(&key, Some(e.offset - TAR_HEADER..e.offset + e.length), &mut b).await;
            ctx.counters.fetch_us.fetch_add(t.elapsed().as_micros() as u64, Ordering::Relaxed);
            let t = r?;
            if t.bytes != want {
                return Err(Error::Runtime(format!("short read of sample '{}' in '{key}': {} of {want} bytes", e.key, t.bytes)));
            }
            ctx.counters.bytes.fetch_add(t.bytes, Ordering::Relaxed);
            ctx.counters.gets.fetch_add(1, Ordering::Relaxed);
            let (header, payload) = b.as_host().expect("host").split_at(TAR_HEADER as usize);
            e.check_header(header).map_err(|why| not_the_index(&index, &key, &e.key, why))?;
            Ok::<_, Error>(payload.to_vec())
        }
    });
    futures::future::join_all(futs).await.into_iter().collect()
}

/// A sample whose tar header is not the one its index describes (the index
/// applied to another tar, or offsets shifted): a damaged set.
fn not_the_index(index: &str, tar: &str, sample: &str, why: String) -> Error {
    Error::Runtime(format!("sample '{sample}' of '{index}' in '{tar}': {why}: the index does not describe this tar: re-run `s3rdma ingest jpeg`"))
}

/// Jpeg `--jpeg-fetch shard`: read the next shard in this rank's epoch order
/// (ticket `*ticket`, then advanced) whole into host memory, as a task.
pub(crate) fn spawn_shard_read(ctx: Arc<LoaderCtx>, mine: Arc<Vec<Listed<JpegIndex>>>, ticket: &mut u64) -> tokio::task::JoinHandle<Result<(usize, Buffer)>> {
    let s = shard_order(mine.len(), ctx.seed, *ticket / mine.len() as u64)[(*ticket % mine.len() as u64) as usize];
    *ticket += 1;
    tokio::spawn(async move {
        let l = &mine[s];
        let mut b = Buffer::host(l.meta.size as usize);
        let _io = ctx.gate.read().await;
        let t = Instant::now();
        let r = crate::bench::read_range(ctx.store.as_ref(), &l.data_key, 0..l.meta.size, &mut b, ctx.range_bytes, None).await;
        ctx.counters.fetch_us.fetch_add(t.elapsed().as_micros() as u64, Ordering::Relaxed);
        let (bytes, n) = r?;
        ctx.counters.bytes.fetch_add(bytes, Ordering::Relaxed);
        ctx.counters.gets.fetch_add(n, Ordering::Relaxed);
        // Every sample's tar header names it: the index describes this tar.
        let host = b.as_host().expect("host");
        for e in &l.meta.samples {
            let header = &host[(e.offset - TAR_HEADER) as usize..e.offset as usize];
            e.check_header(header).map_err(|why| not_the_index(&l.sidecar_key, &l.data_key, &e.key, why))?;
        }
        Ok((s, b))
    })
}

pub(crate) fn counters_now(c: &LoaderCounters) -> [u64; 4] {
    [c.bytes.load(Ordering::Relaxed), c.gets.load(Ordering::Relaxed), c.fetch_us.load(Ordering::Relaxed), c.decode_us.load(Ordering::Relaxed)]
}
