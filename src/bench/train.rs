//! `s3rdma train`: ResNet-50 training step time by backend (the seeds' B3: 8 x
//! H200, 200 batches, raw layout 14.31 s over RDMA / 16.68 s over HTTP, JPEG
//! 28.25 s; storage wait 0.00 s on every arm), and with `--loader-only` the
//! input pipeline alone (B2).
//!
//! Two layouts (DESIGN.md "On-store formats"):
//! - `raw`: `--fetch-workers` workers each own one device buffer of a whole
//!   shard (GPU-Direct on rdma, staged through pinned memory elsewhere), read a
//!   shard into it, and cut it into batches of sample indices (shuffled within
//!   the shard); the buffer returns to its worker when the last batch drops it.
//!   Crop, flip and normalisation run on the GPU (feature `train`).
//! - `jpeg`: each batch's samples are read by one ranged GET each (or sliced
//!   out of whole shards, `--jpeg-fetch shard`), decoded, resized (shorter side
//!   256), randomly cropped and flipped on `--decode-threads` CPU threads into a
//!   pinned batch buffer, then copied to the GPU: the bytes must reach host
//!   memory, so RDMA cannot carry them straight to the GPU (the seeds' point).
//!
//! The training loop runs on its own thread and takes ready batches from the
//! loader; every step is timed as fetch wait (blocked on the loader),
//! host-to-device copy, augmentation and compute (forward, backward, SGD
//! step, synchronised). With `--ranks N` each rank is a process with its own
//! GPU and every N-th shard; gradients are NOT all-reduced (tch has no
//! DistributedDataParallel): ranks train independent replicas on disjoint data,
//! which is the same compute and the same input traffic per GPU as data-parallel
//! training without the all-reduce.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng, rngs::SmallRng};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::mpsc;

use super::Spread;
use super::session::{Direction, OpenWindow, Outcome, Session, SessionSpec, World};
use crate::cli::{Backend, DEFAULT_LOCAL_ROOT, JpegFetch, Layout, TrainArgs};
use crate::error::{Error, Result};
use crate::format::shards::{self, JpegIndex, Listed, RawShard};
use crate::mem::{Buffer, Dest, Gpu};
use crate::sampler::Sampler;
use crate::store::{self, ObjectStore};
use crate::witness::WitnessReport;

/// Shorter side a JPEG is resized to before the random crop (torchvision's
/// ImageNet recipe: Resize(256) then crop 224).
pub const JPEG_RESIZE: u32 = 256;

/// A buffer on loan from a pool; goes back to the pool when dropped.
pub struct Pooled {
    buf: Option<Buffer>,
    home: mpsc::UnboundedSender<Buffer>,
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
pub struct Batch {
    /// The batch's pixels.
    pub pixels: Pixels,
    /// Class of each sample.
    pub labels: Vec<i64>,
}

/// Loader-side counters (monotonic; a window reads the difference).
#[derive(Default)]
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

fn shard_order(n: usize, seed: u64, epoch: u64) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    v.shuffle(&mut SmallRng::seed_from_u64(seed ^ epoch.wrapping_mul(0x9e37_79b9)));
    v
}

/// Everything the loader tasks share.
struct LoaderCtx {
    store: Arc<dyn ObjectStore>,
    counters: Arc<LoaderCounters>,
    stop: Arc<AtomicBool>,
    batch: usize,
    window: u64,
    seed: u64,
}

/// Start the raw loader: `bufs` (one per worker, each a whole shard) cycle
/// through this rank's shards, epoch after epoch, until `stop`.
fn start_raw(ctx: Arc<LoaderCtx>, mine: Vec<Listed<RawShard>>, bufs: Vec<Buffer>, tx: mpsc::Sender<Result<Batch>>) -> Vec<tokio::task::JoinHandle<()>> {
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
                    let t = Instant::now();
                    let r = super::read_range(ctx.store.as_ref(), &shard.data_key, 0..shard.meta.data_bytes(), &mut buf, ctx.window).await;
                    ctx.counters.fetch_us.fetch_add(t.elapsed().as_micros() as u64, Ordering::Relaxed);
                    match r {
                        Ok((b, n)) => {
                            ctx.counters.bytes.fetch_add(b, Ordering::Relaxed);
                            ctx.counters.gets.fetch_add(n, Ordering::Relaxed);
                        }
                        Err(e) => {
                            let _ = tx.send(Err(e)).await;
                            return;
                        }
                    }
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

/// Start the jpeg loader: a producer fills `slots` (host or pinned batch
/// buffers, B x crop x crop x 3) batch after batch, up to `slots.len()` batches
/// in preparation at once; samples come by ranged GET (`Sample`) or out of
/// whole shards held in host memory (`Shard`).
#[allow(clippy::too_many_arguments)]
fn start_jpeg(
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
        let mut shard_cache: Option<(usize, Arc<Buffer>)> = None;
        let mut shard_ticket = 0u64;
        let mut next_shard: Option<tokio::task::JoinHandle<Result<(usize, Buffer)>>> = None;
        loop {
            let Some(slot) = free.recv().await else { return };
            if ctx.stop.load(Ordering::Relaxed) {
                return;
            }
            // Choose this batch's samples.
            let picks: Vec<(usize, usize)> = match fetch {
                JpegFetch::Sample => (0..ctx.batch)
                    .map(|_| {
                        if pos == order.len() {
                            order = (*all).clone();
                            order.shuffle(&mut SmallRng::seed_from_u64(ctx.seed ^ ticket.wrapping_mul(0x2545_f491)));
                            pos = 0;
                        }
                        pos += 1;
                        order[pos - 1]
                    })
                    .collect(),
                JpegFetch::Shard => {
                    // Batches are cut from one shard at a time (shuffled within it).
                    if pos + ctx.batch > order.len() {
                        // The shard read ahead (or, the first time, this one read now), then the next one started.
                        let ahead = match next_shard.take() {
                            Some(h) => h,
                            None => spawn_shard_read(ctx.clone(), mine.clone(), &mut shard_ticket),
                        };
                        next_shard = Some(spawn_shard_read(ctx.clone(), mine.clone(), &mut shard_ticket));
                        let (s, b) = match ahead.await {
                            Ok(Ok(x)) => x,
                            Ok(Err(e)) => {
                                let _ = tx.send(Err(e)).await;
                                return;
                            }
                            Err(e) => {
                                let _ = tx.send(Err(Error::Runtime(format!("shard read task: {e}")))).await;
                                return;
                            }
                        };
                        order = (0..mine[s].meta.samples.len()).map(|i| (s, i)).collect();
                        order.shuffle(&mut SmallRng::seed_from_u64(ctx.seed ^ shard_ticket));
                        pos = 0;
                        shard_cache = Some((s, Arc::new(b)));
                        if order.len() < ctx.batch {
                            let _ = tx
                                .send(Err(Error::Usage(format!(
                                    "jpeg shard '{}' holds {} samples, fewer than --batch-size {}: use --jpeg-fetch sample or a smaller --batch-size",
                                    mine[s].data_key,
                                    order.len(),
                                    ctx.batch
                                ))))
                                .await;
                            return;
                        }
                    }
                    pos += ctx.batch;
                    order[pos - ctx.batch..pos].to_vec()
                }
            };
            ticket += 1;
            let (ctx, mine, gets, decode, tx, home, cache) =
                (ctx.clone(), mine.clone(), gets.clone(), decode.clone(), tx.clone(), home.clone(), shard_cache.clone());
            let batch_seed = ctx.seed ^ ticket.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            tokio::spawn(async move {
                // Fetch every sample's JPEG bytes.
                let mut jpegs: Vec<Vec<u8>> = Vec::with_capacity(picks.len());
                match cache {
                    Some((s, buf)) if fetch == JpegFetch::Shard => {
                        let host = buf.as_host().expect("host");
                        for &(ps, i) in &picks {
                            debug_assert_eq!(ps, s);
                            let e = &mine[ps].meta.samples[i];
                            jpegs.push(host[e.offset as usize..(e.offset + e.length) as usize].to_vec());
                        }
                    }
                    _ => {
                        let futs = picks.iter().map(|&(s, i)| {
                            let (ctx, gets) = (ctx.clone(), gets.clone());
                            let l = &mine[s];
                            let e = l.meta.samples[i].clone();
                            let key = l.data_key.clone();
                            async move {
                                let _p = gets.acquire_owned().await;
                                let t = Instant::now();
                                let mut b = Buffer::from_vec(vec![0u8; e.length as usize]);
                                let r = ctx.store.get_into(&key, Some(e.offset..e.offset + e.length), &mut b).await;
                                ctx.counters.fetch_us.fetch_add(t.elapsed().as_micros() as u64, Ordering::Relaxed);
                                let t = r?;
                                if t.bytes != e.length {
                                    return Err(Error::Runtime(format!("short read of sample '{}' in '{key}': {} of {} bytes", e.key, t.bytes, e.length)));
                                }
                                ctx.counters.bytes.fetch_add(t.bytes, Ordering::Relaxed);
                                ctx.counters.gets.fetch_add(1, Ordering::Relaxed);
                                Ok::<_, Error>(b.as_host().expect("host").to_vec())
                            }
                        });
                        for r in futures::future::join_all(futs).await {
                            match r {
                                Ok(j) => jpegs.push(j),
                                Err(e) => {
                                    let _ = tx.send(Err(e)).await;
                                    return;
                                }
                            }
                        }
                    }
                }
                let labels: Vec<i64> = picks.iter().map(|&(s, i)| mine[s].meta.samples[i].label as i64).collect();
                let keys: Vec<String> = picks.iter().map(|&(s, i)| format!("{}/{}", mine[s].data_key, mine[s].meta.samples[i].key)).collect();
                let counters = ctx.counters.clone();
                // Decode on the decode pool (blocking work off the async runtime).
                let decoded = tokio::task::spawn_blocking(move || {
                    let mut slot = slot;
                    let per = (crop * crop * 3) as usize;
                    let out = slot.as_host_mut().expect("batch slots are host or pinned memory");
                    let r: std::result::Result<(), String> = decode.install(|| {
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
                })
                .await;
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

/// Jpeg `--jpeg-fetch shard`: read the next shard in this rank's epoch order
/// (ticket `*ticket`, then advanced) whole into host memory, as a task.
fn spawn_shard_read(ctx: Arc<LoaderCtx>, mine: Arc<Vec<Listed<JpegIndex>>>, ticket: &mut u64) -> tokio::task::JoinHandle<Result<(usize, Buffer)>> {
    let s = shard_order(mine.len(), ctx.seed, *ticket / mine.len() as u64)[(*ticket % mine.len() as u64) as usize];
    *ticket += 1;
    tokio::spawn(async move {
        let l = &mine[s];
        let mut b = Buffer::host(l.meta.size as usize);
        let t = Instant::now();
        let r = super::read_range(ctx.store.as_ref(), &l.data_key, 0..l.meta.size, &mut b, ctx.window).await;
        ctx.counters.fetch_us.fetch_add(t.elapsed().as_micros() as u64, Ordering::Relaxed);
        let (bytes, n) = r?;
        ctx.counters.bytes.fetch_add(bytes, Ordering::Relaxed);
        ctx.counters.gets.fetch_add(n, Ordering::Relaxed);
        Ok((s, b))
    })
}

/// Seconds of one step, by phase.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct StepTimes {
    /// Blocked waiting for the loader.
    pub fetch_wait_s: f64,
    /// Pinned batch -> device memory (jpeg layout).
    pub h2d_s: f64,
    /// Crop, flip, normalise on the GPU (feature `train`).
    pub augment_s: f64,
    /// Forward, backward, optimizer step, synchronised.
    pub compute_s: f64,
    /// Seconds of the whole step (wait + h2d + augment + compute).
    pub step_s: f64,
}

/// What the training loop measured over one repeat's timed steps.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LoopFigures {
    /// Timed steps.
    pub steps: u32,
    /// Images consumed (steps x batch size).
    pub images: u64,
    /// Wall seconds of the timed work.
    pub wall_s: f64,
    /// Images per second.
    pub images_per_s: f64,
    /// Median step seconds.
    pub step_s_median: f64,
    /// 99th percentile step seconds.
    pub step_s_p99: f64,
    /// Sums over the timed steps.
    pub fetch_wait_s: f64,
    /// Seconds copying batches host to device.
    pub h2d_s: f64,
    /// Seconds cropping and flipping on the device.
    pub augment_s: f64,
    /// Seconds of forward, backward and optimizer step.
    pub compute_s: f64,
    /// Mean loss of the first and last min(10, steps) steps of this repeat (None without a model).
    pub loss_first: Option<f64>,
    /// Mean loss of the last 10 steps (`None` without a model).
    pub loss_last: Option<f64>,
}

/// One rank's figures of one repeat.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RankRepeat {
    /// Rank of the process these figures come from.
    pub rank: usize,
    /// Host name of that process.
    pub host: String,
    #[serde(flatten)]
    /// Its training-loop figures.
    pub figures: LoopFigures,
    /// Loader: bytes read and GETs in the window, thread-seconds fetching and decoding.
    pub read_bytes: u64,
    /// GETs issued.
    pub gets: u64,
    /// Thread-seconds the loader spent reading.
    pub fetch_thread_s: f64,
    /// Thread-seconds spent decoding JPEGs.
    pub decode_thread_s: f64,
    /// Client CPU in cores: CPU-seconds of this process (getrusage) / wall seconds.
    pub client_cpu_cores: f64,
    /// Whole-host CPU in cores: busy fraction x logical CPUs (/proc/stat via sysinfo).
    pub host_cpu_cores: f64,
}

/// The per-step work after a batch arrives: H2D, augmentation, model.
pub trait Stepper {
    /// Do one step on `batch`; returns the phase times and the loss (if a model ran).
    fn step(&mut self, batch: &Batch) -> Result<(StepTimes, Option<f64>)>;
    /// What the augmentation and model are (for the record).
    fn describe(&self) -> serde_json::Value;
}

/// Without a model: jpeg batches are copied to the GPU (when there is one);
/// raw batches are already there; nothing else runs.
pub struct LoaderOnly {
    device_batch: Option<Buffer>,
}

impl Stepper for LoaderOnly {
    fn step(&mut self, batch: &Batch) -> Result<(StepTimes, Option<f64>)> {
        let mut t = StepTimes::default();
        if let (Pixels::Staged { batch: b }, Some(Buffer::Device(d))) = (&batch.pixels, self.device_batch.as_mut()) {
            let t0 = Instant::now();
            let src = b.buf().as_host().expect("host or pinned");
            d.write_from_host(0, &src[..d.device_ptr().1.min(src.len())]).map_err(|e| Error::Runtime(format!("batch to device memory: {e}")))?;
            t.h2d_s = t0.elapsed().as_secs_f64();
        }
        Ok((t, None))
    }
    fn describe(&self) -> serde_json::Value {
        json!({"model": null, "augment": if cfg!(feature = "train") { "none (--loader-only)" } else { "none: built without the `train` feature (crop/flip/normalise on the GPU need libtorch)" }})
    }
}

/// The training loop: `warmup` untimed then `steps` timed steps per repeat;
/// `at_window(rep, start)` is called around each repeat's timed steps (barriers,
/// witness, sampler), returning what the caller measured there.
fn train_loop<W>(
    rx: &mut mpsc::Receiver<Result<Batch>>,
    stepper: &mut dyn Stepper,
    warmup: u32,
    steps: u32,
    repeats: u32,
    mut at_window: impl FnMut(u32, bool) -> Result<Option<W>>,
) -> Result<Vec<(LoopFigures, W, Vec<f64>)>> {
    let mut out = Vec::new();
    for rep in 1..=repeats {
        let mut times = Vec::with_capacity(steps as usize);
        let mut losses = Vec::with_capacity(steps as usize);
        let mut t0 = Instant::now();
        for s in 0..warmup + steps {
            if s == warmup {
                at_window(rep, true)?;
                t0 = Instant::now();
            }
            let tw = Instant::now();
            let batch = rx.blocking_recv().ok_or_else(|| Error::Runtime("the loader stopped".into()))??;
            let wait = tw.elapsed().as_secs_f64();
            let (mut t, loss) = stepper.step(&batch)?;
            drop(batch);
            t.fetch_wait_s = wait;
            t.step_s = tw.elapsed().as_secs_f64();
            if s >= warmup {
                times.push(t);
                if let Some(l) = loss {
                    losses.push(l);
                }
            }
        }
        let wall_s = t0.elapsed().as_secs_f64();
        let w = at_window(rep, false)?.expect("the closing call returns the window's figures");
        let mut step_s: Vec<f64> = times.iter().map(|t| t.step_s).collect();
        step_s.sort_by(f64::total_cmp);
        let k = losses.len().min(10);
        let mean = |v: &[f64]| if v.is_empty() { None } else { Some(v.iter().sum::<f64>() / v.len() as f64) };
        out.push((
            LoopFigures {
                steps,
                images: 0,
                wall_s,
                images_per_s: 0.0,
                step_s_median: super::percentile(&step_s, 0.5).unwrap_or(0.0),
                step_s_p99: super::percentile(&step_s, 0.99).unwrap_or(0.0),
                fetch_wait_s: times.iter().map(|t| t.fetch_wait_s).sum(),
                h2d_s: times.iter().map(|t| t.h2d_s).sum(),
                augment_s: times.iter().map(|t| t.augment_s).sum(),
                compute_s: times.iter().map(|t| t.compute_s).sum(),
                loss_first: mean(&losses[..k]),
                loss_last: mean(&losses[losses.len() - k..]),
            },
            w,
            losses,
        ));
    }
    Ok(out)
}

/// What a rank measured around one repeat's timed steps.
#[derive(Debug, Clone, Default, Serialize)]
struct WindowFigures {
    read_bytes: u64,
    gets: u64,
    fetch_thread_s: f64,
    decode_thread_s: f64,
    client_cpu_cores: f64,
    host_cpu_cores: f64,
    witness: Option<WitnessReport>,
}

fn counters_now(c: &LoaderCounters) -> [u64; 4] {
    [c.bytes.load(Ordering::Relaxed), c.gets.load(Ordering::Relaxed), c.fetch_us.load(Ordering::Relaxed), c.decode_us.load(Ordering::Relaxed)]
}

fn usage_without_model() -> Error {
    Error::Usage(
        "this s3rdma was built without the `train` feature (libtorch), so it cannot train a model: pass --loader-only to measure the input pipeline, \
         or rebuild with `LIBTORCH_USE_PYTORCH=1 cargo build --release --features train` (see docs/03-training-benchmark.md)"
            .into(),
    )
}

/// Run `s3rdma train`.
pub async fn run(args: TrainArgs) -> Result<()> {
    if !args.loader_only && !cfg!(feature = "train") {
        return Err(usage_without_model());
    }
    let prefix = args.prefix.clone().unwrap_or_else(|| match args.layout {
        Layout::Raw => "raw/train".into(),
        Layout::Jpeg => "jpeg/train".into(),
    });
    store::check_key(&format!("{prefix}-000000.json")).map_err(|e| Error::Usage(format!("--prefix '{prefix}': {e}")))?;
    if args.layout == Layout::Jpeg {
        // Batch buffers, plus each batch's JPEG bytes while it is prepared (about a tenth of its pixels).
        let per = args.batch_size as u64 * (args.crop as u64).pow(2) * 3;
        super::check_host_memory(
            &format!("{} batch buffers of {} x {} x {} x 3", args.prefetch_batches, args.batch_size, args.crop, args.crop),
            (args.prefetch_batches as u64) * per * 11 / 10,
            "lower --batch-size, --crop or --prefetch-batches",
        )?;
    }
    let own_dir = args.store.backend == Backend::Local && args.store.root.as_path() == std::path::Path::new(DEFAULT_LOCAL_ROOT);
    let spec = SessionSpec {
        bench: "train",
        store: &args.store,
        witness: &args.witness,
        mem: &args.mem,
        group: Some(&args.group),
        output: &args.output,
        world: World::Ranks(args.ranks),
        rdma_threads: args.fetch_workers,
        create_bucket: own_dir,
        no_bucket: shards::no_dataset_bucket,
    };
    let Some(session) = Session::start(spec).await? else { return Ok(()) };
    let session = Arc::new(session);
    let me = session.me.clone();
    let mem = session.mem.clone();
    let dest = mem.dest();
    let gpu = session.gpu.clone();
    let store = session.store.clone();
    let batch = args.batch_size as usize;
    let crop = args.crop;
    let counters = Arc::new(LoaderCounters::default());
    let stop = Arc::new(AtomicBool::new(false));
    let ctx = Arc::new(LoaderCtx {
        store: store.clone(),
        counters: counters.clone(),
        stop: stop.clone(),
        batch,
        window: args.store.window,
        seed: args.seed ^ (me.rank as u64) << 48,
    });
    let (tx, mut rx) = mpsc::channel::<Result<Batch>>(args.prefetch_batches.max(2) as usize * 4);
    let alloc_err = |what: &str, n: usize, e: String| {
        Error::Runtime(format!("cannot allocate {what} ({n} bytes of {} memory): {e}: lower --fetch-workers/--prefetch-batches/--batch-size", dest.name()))
    };
    let (classes, shards_total, shards_mine, samples_mine, device_batch, handles, decode_threads);
    match args.layout {
        Layout::Raw => {
            let listed = shards::list_raw(store.as_ref(), &prefix).await?;
            shards_total = listed.len();
            classes = listed.iter().flat_map(|l| l.meta.labels.iter()).max().map_or(1, |&m| m as i64 + 1).max(l_classes(&listed));
            let (h, w) = (listed[0].meta.height, listed[0].meta.width);
            if let Some(l) = listed.iter().find(|l| l.meta.height != h || l.meta.width != w) {
                return Err(Error::Runtime(format!(
                    "'{}' holds {}x{} images, the first shard {h}x{w}: one size per --prefix",
                    l.sidecar_key, l.meta.width, l.meta.height
                )));
            }
            if (crop as u64) > h.min(w) {
                return Err(Error::Usage(format!("--crop {crop} is larger than the {w}x{h} images under '{prefix}': lower --crop")));
            }
            let mine: Vec<_> = listed.into_iter().enumerate().filter(|(i, _)| i % me.world == me.rank).map(|(_, l)| l).collect();
            if mine.is_empty() {
                return Err(Error::Usage(format!(
                    "{shards_total} raw shard(s) for {} ranks: every rank needs a shard; ingest more shards (--samples-per-shard) or use fewer ranks",
                    me.world
                )));
            }
            if let Some(l) = mine.iter().find(|l| l.meta.samples < batch as u64) {
                return Err(Error::Usage(format!(
                    "raw shard '{}' holds {} samples, fewer than --batch-size {batch}: lower --batch-size or ingest with more --samples-per-shard",
                    l.data_key, l.meta.samples
                )));
            }
            shards_mine = mine.len();
            samples_mine = mine.iter().map(|l| l.meta.samples).sum::<u64>();
            let cap = mine.iter().map(|l| l.meta.data_bytes()).max().expect("non-empty") as usize;
            if dest != Dest::Device {
                super::check_host_memory(
                    &format!("{} shard buffers of {cap} bytes", args.fetch_workers),
                    args.fetch_workers as u64 * cap as u64,
                    "lower --fetch-workers",
                )?;
            }
            let bufs = (0..args.fetch_workers).map(|_| session.buffer(cap).map_err(|e| alloc_err("a shard buffer", cap, e))).collect::<Result<Vec<_>>>()?;
            device_batch = None;
            decode_threads = 0;
            handles = start_raw(ctx.clone(), mine, bufs, tx);
        }
        Layout::Jpeg => {
            let listed = shards::list_jpeg(store.as_ref(), &prefix).await?;
            shards_total = listed.len();
            classes = listed.iter().flat_map(|l| l.meta.samples.iter().map(|s| s.label)).max().map_or(1, |m| m as i64 + 1);
            let mine: Vec<_> = listed.into_iter().enumerate().filter(|(i, _)| i % me.world == me.rank).map(|(_, l)| l).collect();
            if mine.is_empty() {
                return Err(Error::Usage(format!(
                    "{shards_total} jpeg shard(s) for {} ranks: every rank needs a shard; ingest more shards or use fewer ranks",
                    me.world
                )));
            }
            shards_mine = mine.len();
            samples_mine = mine.iter().map(|l| l.meta.samples.len() as u64).sum();
            let per = batch * (crop * crop * 3) as usize;

            let slot = |_| match (&gpu, dest) {
                (Some(g), Dest::Device | Dest::Pinned) => {
                    crate::mem::PinnedBuffer::new(g, per).map(Buffer::Pinned).map_err(|e| alloc_err("a pinned batch buffer", per, e))
                }
                _ => Ok(Buffer::host(per)),
            };
            let slots = (0..args.prefetch_batches).map(slot).collect::<Result<Vec<_>>>()?;
            device_batch = match (&gpu, dest) {
                (Some(g), Dest::Device) => {
                    Some(Buffer::Device(crate::mem::DeviceBuffer::new(g, per, 0, 0).map_err(|e| alloc_err("the device batch buffer", per, e))?))
                }
                _ => None,
            };
            decode_threads =
                args.decode_threads.map_or_else(|| (std::thread::available_parallelism().map_or(1, |n| n.get()) / me.world).max(1), |n| n as usize);
            let pool = Arc::new(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(decode_threads)
                    .thread_name(|i| format!("decode-{i}"))
                    .build()
                    .map_err(|e| Error::Runtime(format!("cannot start decode threads: {e}")))?,
            );
            handles = start_jpeg(ctx.clone(), mine, slots, args.jpeg_fetch, args.sample_gets as usize, pool, crop, tx);
        }
    }

    // The training loop on its own thread: libtorch calls block, and the model lives there.
    let rt = tokio::runtime::Handle::current();
    let (targs, tsession, tcounters, tgpu) = (args.clone(), session.clone(), counters.clone(), gpu.clone());
    let trainer = std::thread::Builder::new()
        .name("train-loop".into())
        .spawn(move || -> Result<(Vec<RepeatOutput>, serde_json::Value)> {
            let mut stepper: Box<dyn Stepper> = make_stepper(&targs, tgpu.as_ref(), dest, classes, device_batch)?;
            let desc = stepper.describe();
            let mut open: Option<(OpenWindow, Sampler, [u64; 4])> = None;
            let figures = train_loop(&mut rx, stepper.as_mut(), targs.warmup, targs.steps, targs.repeats, |rep, start| {
                if start {
                    let _ = rep;
                    let window = rt.block_on(tsession.open_window())?;
                    open = Some((window, Sampler::start(), counters_now(&tcounters)));
                    return Ok(None);
                }
                let (window, sampler, c0) = open.take().expect("a window was opened");
                let s = sampler.finish();
                let c1 = counters_now(&tcounters);
                let mut f = WindowFigures {
                    read_bytes: c1[0] - c0[0],
                    gets: c1[1] - c0[1],
                    fetch_thread_s: (c1[2] - c0[2]) as f64 / 1e6,
                    decode_thread_s: (c1[3] - c0[3]) as f64 / 1e6,
                    client_cpu_cores: s.client_cpu_cores,
                    host_cpu_cores: s.host_cpu_cores,
                    witness: None,
                };
                let closed = rt.block_on(tsession.close_window(window, Direction::Read, f.read_bytes, ()))?;
                f.witness = closed.witness;
                Ok(Some(f))
            })?;
            Ok((figures, desc))
        })
        .map_err(|e| Error::Runtime(format!("cannot start the training thread: {e}")))?;
    let result = tokio::task::spawn_blocking(move || trainer.join()).await.map_err(|e| Error::Runtime(format!("training thread: {e}")))?;
    stop.store(true, Ordering::Relaxed);
    for h in &handles {
        h.abort();
    }
    let (figures, stepper_desc) = match result {
        Ok(r) => r?,
        Err(_) => return Err(Error::Runtime("the training thread panicked".into())),
    };

    // Every rank's figures to rank 0.
    let hostname = sysinfo::System::host_name().unwrap_or_default();
    let mine: Vec<RankRepeat> = figures
        .iter()
        .map(|(l, w, _)| {
            let mut l = l.clone();
            l.images = l.steps as u64 * batch as u64;
            l.images_per_s = l.images as f64 / l.wall_s;
            RankRepeat {
                rank: me.rank,
                host: hostname.clone(),
                figures: l,
                read_bytes: w.read_bytes,
                gets: w.gets,
                fetch_thread_s: w.fetch_thread_s,
                decode_thread_s: w.decode_thread_s,
                client_cpu_cores: w.client_cpu_cores,
                host_cpu_cores: w.host_cpu_cores,
            }
        })
        .collect();
    let per_rank: Vec<Vec<RankRepeat>> = session.gather("train-figures", &mine).await?;
    let witnesses: Vec<WitnessReport> = figures.iter().filter_map(|(_, w, _)| w.witness.clone()).collect();
    let losses: Vec<&Vec<f64>> = figures.iter().map(|(_, _, l)| l).collect();
    finish(&session, &args, &prefix, &per_rank, &witnesses, &losses, json!({
        "classes": classes, "shards": shards_total, "shards_rank0": shards_mine, "samples_rank0": samples_mine, "decode_threads": decode_threads, "stepper": stepper_desc,
    }))
    .await
}

fn l_classes(listed: &[Listed<RawShard>]) -> i64 {
    listed.iter().map(|l| l.meta.classes.len() as i64).max().unwrap_or(0)
}

#[cfg(not(feature = "train"))]
fn make_stepper(args: &TrainArgs, _gpu: Option<&Arc<Gpu>>, _dest: Dest, _classes: i64, device_batch: Option<Buffer>) -> Result<Box<dyn Stepper>> {
    if !args.loader_only {
        return Err(usage_without_model());
    }
    Ok(Box::new(LoaderOnly { device_batch }))
}

#[cfg(feature = "train")]
fn make_stepper(args: &TrainArgs, gpu: Option<&Arc<Gpu>>, dest: Dest, classes: i64, device_batch: Option<Buffer>) -> Result<Box<dyn Stepper>> {
    Ok(Box::new(super::train_model::Trainer::new(args, gpu, dest, classes, device_batch)?))
}

/// One timed repeat on this rank: its loop figures, its window's figures and its losses.
type RepeatOutput = (LoopFigures, WindowFigures, Vec<f64>);

/// Aggregate the ranks' figures per repeat and finish the session (rank 0 writes the record).
async fn finish(
    session: &Session,
    args: &TrainArgs,
    prefix: &str,
    per_rank: &[Vec<RankRepeat>],
    witnesses: &[WitnessReport],
    losses: &[&Vec<f64>],
    extra: serde_json::Value,
) -> Result<()> {
    let world = per_rank.len();
    // Per repeat: the slowest rank's wall; aggregate images/s = all images / that wall.
    let reps: Vec<serde_json::Value> = (0..args.repeats as usize)
        .map(|r| {
            let rows: Vec<&RankRepeat> = per_rank.iter().filter_map(|v| v.get(r)).collect();
            let wall = rows.iter().map(|x| x.figures.wall_s).fold(0.0, f64::max);
            let images: u64 = rows.iter().map(|x| x.figures.images).sum();
            let mean = |f: fn(&RankRepeat) -> f64| rows.iter().map(|x| f(x)).sum::<f64>() / rows.len().max(1) as f64;
            json!({
                "repeat": r + 1, "wall_s": wall, "images": images, "images_per_s": images as f64 / wall,
                "images_per_s_per_rank": rows.iter().map(|x| x.figures.images_per_s).collect::<Vec<_>>(),
                "step_s_median": mean(|x| x.figures.step_s_median),
                "fetch_wait_s": mean(|x| x.figures.fetch_wait_s), "h2d_s": mean(|x| x.figures.h2d_s),
                "augment_s": mean(|x| x.figures.augment_s), "compute_s": mean(|x| x.figures.compute_s),
                "read_bytes": rows.iter().map(|x| x.read_bytes).sum::<u64>(),
                "read_gbps": rows.iter().map(|x| x.read_bytes).sum::<u64>() as f64 / wall / 1e9,
                "gets": rows.iter().map(|x| x.gets).sum::<u64>(),
                "decode_thread_s": rows.iter().map(|x| x.decode_thread_s).sum::<f64>(),
                "client_cpu_cores": rows.iter().map(|x| x.client_cpu_cores).sum::<f64>(),
                "host_cpu_cores": super::host_cores(rows.iter().map(|x| (x.host.as_str(), x.host_cpu_cores))),
                "loss_first": rows.first().and_then(|x| x.figures.loss_first), "loss_last": rows.first().and_then(|x| x.figures.loss_last),
                "ranks": rows,
                "witness": witnesses.get(r),
            })
        })
        .collect();
    let pick = |k: &str| Spread::of(reps.iter().filter_map(|r| r[k].as_f64())).unwrap_or_default();
    let (wall, ips, step, wait, h2d, aug, comp, cores, host_cores, gbps) = (
        pick("wall_s"),
        pick("images_per_s"),
        pick("step_s_median"),
        pick("fetch_wait_s"),
        pick("h2d_s"),
        pick("augment_s"),
        pick("compute_s"),
        pick("client_cpu_cores"),
        pick("host_cpu_cores"),
        pick("read_gbps"),
    );
    let worst = witnesses.iter().min_by_key(|w| w.verdict).cloned();
    let loss_first = losses.first().and_then(|l| (!l.is_empty()).then(|| l.iter().take(10).sum::<f64>() / l.len().min(10) as f64));
    let loss_last = losses.last().and_then(|l| (!l.is_empty()).then(|| l.iter().rev().take(10).sum::<f64>() / l.len().min(10) as f64));
    let params = json!({"layout": args.layout, "prefix": prefix, "steps": args.steps, "warmup": args.warmup, "batch_size": args.batch_size,
                   "amp": args.amp, "fetch_workers": args.fetch_workers, "decode_threads": args.decode_threads, "prefetch_batches": args.prefetch_batches,
                   "jpeg_fetch": args.jpeg_fetch, "sample_gets": args.sample_gets, "crop": args.crop, "loader_only": args.loader_only, "lr": args.lr, "repeats": args.repeats,
                   "seed": args.seed, "ranks": world, "gradients": if world > 1 { "not all-reduced: independent replicas on disjoint shards" } else { "single rank" }});
    let results = json!({"summary": {"wall_s": wall, "images_per_s": ips, "step_s_median": step, "fetch_wait_s": wait, "h2d_s": h2d, "augment_s": aug,
                                "compute_s": comp, "client_cpu_cores": cores, "host_cpu_cores": host_cores, "read_gbps": gbps,
                                "loss_first": loss_first, "loss_last": loss_last},
                    "repeats": reps, "dataset": extra, "losses_rank0": losses});
    let windows: Vec<(String, WitnessReport)> = witnesses.iter().enumerate().map(|(i, w)| (format!("repeat {}", i + 1), w.clone())).collect();
    let store = &session.store;
    session
        .finish(Outcome::new(params, results, windows), || {
            let r =
                |s: &Spread, p: usize| if s.max > s.min { format!("{:.p$} ({:.p$}–{:.p$})", s.median, s.min, s.max) } else { format!("{:.p$}", s.median) };
            let mut t = Table::new();
            t.load_preset(UTF8_FULL_CONDENSED);
            t.set_header([
                "layout",
                "backend",
                "ranks",
                "steps",
                "seconds",
                "images/s",
                "step s (median)",
                "fetch wait s",
                "h2d s",
                "augment s",
                "compute s",
                "read GB/s",
                "host cores",
                "loss first→last",
                "witness",
            ]);
            t.add_row([
                format!("{:?}", args.layout).to_lowercase(),
                store.backend().name().to_string(),
                world.to_string(),
                args.steps.to_string(),
                r(&wall, 2),
                r(&ips, 0),
                format!("{:.4}", step.median),
                format!("{:.2}", wait.median),
                format!("{:.2}", h2d.median),
                format!("{:.2}", aug.median),
                format!("{:.2}", comp.median),
                format!("{:.2}", gbps.median),
                format!("{:.1}", host_cores.median),
                match (loss_first, loss_last) {
                    (Some(a), Some(b)) => format!("{a:.3}→{b:.3}"),
                    _ => "-".into(),
                },
                worst.as_ref().map_or("-".into(), |w| w.verdict.as_str().to_string()),
            ]);
            println!(
                "train{} '{prefix}' ({} layout) from {} ({}), batch {} x {} rank(s), {} timed + {} warm-up steps, {} repeat(s)",
                if args.loader_only { " --loader-only" } else { "" },
                format!("{:?}", args.layout).to_lowercase(),
                store.backend().name(),
                store.location(),
                args.batch_size,
                world,
                args.steps,
                args.warmup,
                args.repeats
            );
            println!("{t}");
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_crop_takes_a_window_of_the_resized_image() {
        // A 512x256 image whose red channel is x/2: resized to 512x256 (shorter side already 256).
        let img = image::RgbImage::from_fn(512, 256, |x, y| image::Rgb([(x / 2) as u8, (y % 256) as u8, 7]));
        let mut jpeg = Vec::new();
        image::codecs::jpeg::JpegEncoder::new_with_quality(&mut jpeg, 100).encode_image(&img).unwrap();
        let mut out = vec![0u8; 224 * 224 * 3];
        let mut rng = SmallRng::seed_from_u64(1);
        decode_crop(&jpeg, 224, &mut rng, &mut out).unwrap();
        // Along a row the red channel changes by ~0.5 per pixel, rising or (flipped) falling.
        let red = |x: usize| out[(100 * 224 + x) * 3] as i32;
        let slope = red(223) - red(0);
        assert!((slope.abs() - 111).abs() <= 6, "slope {slope}");
        assert!(out.chunks(3).all(|p| (p[2] as i32 - 7).abs() <= 6));
        let bad = decode_crop(b"not a jpeg", 224, &mut rng, &mut out).unwrap_err();
        assert!(!bad.is_empty());
    }

    #[test]
    fn shard_order_is_a_seeded_permutation() {
        let a = shard_order(10, 3, 0);
        let mut s = a.clone();
        s.sort();
        assert_eq!(s, (0..10).collect::<Vec<_>>());
        assert_eq!(a, shard_order(10, 3, 0));
        assert_ne!(a, shard_order(10, 3, 1));
    }
}
