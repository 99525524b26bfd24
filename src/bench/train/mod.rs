//! `s3rdma train`: ResNet-50 training step time by backend (the seeds' B3: 8 x
//! H200, 200 batches, raw layout 14.31 s over RDMA / 16.68 s over HTTP, JPEG
//! 28.25 s; storage wait 0.00 s on every arm), and with `--loader-only` the
//! input pipeline alone (B2).
//!
//! Two layouts (`format::shards`; docs/02-prepare-dataset.md):
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
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::mpsc;

use super::driver::Bench;
use super::session::{Direction, OpenWindow, Outcome, Session, SessionSpec, World};
use crate::error::{Error, Result};
use crate::flag::{BATCH_SIZE, CROP, LOADER_ONLY, PREFETCH_BATCHES, PREFIX};
use crate::format::shards::{self, Listed, RawShard};
use crate::mem::{Buffer, Dest, Gpu};
use crate::sampler::Sampler;
use crate::store;
use crate::witness::WitnessReport;

mod loader;
#[cfg(feature = "train")]
mod model;
mod plan;
mod record;
mod sets;
mod steps;
pub use loader::{Batch, JPEG_RESIZE, LoaderCounters, Pixels, Pooled, decode_crop};
pub(crate) use loader::{LoaderCtx, counters_now};
pub use plan::{Amp, JpegFetch, Layout, TrainPlan};
pub use record::{LoopFigures, RankRepeat, TrainDataset, TrainParams, TrainRecord, TrainRepeat, TrainResults, TrainSummary};
use sets::Started;
pub use steps::{LoaderOnly, StepTimes, Stepper};
pub(crate) use steps::{RepeatOutput, WindowFigures, train_loop};

fn usage_without_model() -> Error {
    Error::Usage(format!(
        "this s3rdma was built without the `train` feature (libtorch), so it cannot train a model: pass {LOADER_ONLY} to measure the input pipeline, \
         or rebuild with `LIBTORCH_USE_PYTORCH=1 cargo build --release --features train` (see docs/03-training-benchmark.md)"
    ))
}

/// `s3rdma train` as a [`Bench`]: the plan, the dataset prefix, and the
/// table's figures once measured.
#[derive(Debug)]
pub struct Train {
    plan: TrainPlan,
    prefix: String,
    table: steps::TrainTable,
}

impl Train {
    /// The bench of `plan` (the layout's default prefix when none is given).
    pub fn new(plan: TrainPlan) -> Self {
        let prefix = plan.prefix.clone().unwrap_or_else(|| match plan.layout {
            Layout::Raw => "raw/train".into(),
            Layout::Jpeg => "jpeg/train".into(),
        });
        Train { plan, prefix, table: steps::TrainTable::default() }
    }
}

impl Bench for Train {
    type Params = TrainParams;
    type Results = TrainResults;

    /// Errors: a model without the `train` feature, a bad prefix, JPEG batches the host cannot hold.
    async fn setup(&mut self) -> Result<Option<SessionSpec>> {
        let (plan, prefix) = (&self.plan, &self.prefix);
        if !plan.loader_only && !cfg!(feature = "train") {
            return Err(usage_without_model());
        }
        store::check_key(&format!("{prefix}-000000.json")).map_err(|e| Error::Usage(format!("{PREFIX} '{prefix}': {e}")))?;
        if plan.layout == Layout::Jpeg {
            check_jpeg_memory(plan)?;
        }
        Ok(Some(SessionSpec {
            world: World::Ranks(plan.ranks),
            rdma_threads: plan.fetch_workers,
            create_bucket: plan.run.default_local_dir,
            no_bucket: shards::no_dataset_bucket,
            ..plan.run.spec("train")
        }))
    }

    async fn measure(&mut self, session: &Arc<Session>) -> Result<Outcome<TrainParams, TrainResults>> {
        let (plan, prefix) = (&self.plan, &self.prefix);
        let me = session.me.clone();
        let mem = session.mem.clone();
        let dest = mem.dest;
        let gpu = session.gpu()?;
        let store = session.store.clone();
        let batch = plan.batch_size as usize;
        let counters = Arc::new(LoaderCounters::default());
        let stop = Arc::new(AtomicBool::new(false));
        let ctx = Arc::new(LoaderCtx {
            store: store.clone(),
            counters: counters.clone(),
            stop: stop.clone(),
            gate: Default::default(),
            batch,
            range_bytes: plan.run.store.range_bytes,
            seed: plan.seed ^ (me.rank as u64) << 48,
        });
        let (tx, mut rx) = mpsc::channel::<Result<Batch>>(plan.prefetch_batches.max(2) as usize * 4);
        let started = match plan.layout {
            Layout::Raw => sets::start_raw_set(session, plan, prefix, ctx.clone(), tx).await?,
            Layout::Jpeg => sets::start_jpeg_set(session, plan, prefix, gpu.as_ref(), ctx.clone(), tx).await?,
        };
        let Started { classes, shards_total, shards_mine, samples_mine, device_batch, handles, decode_threads, bytes_per_image } = started;

        // The training loop on its own thread: libtorch calls block, and the model lives there.
        let rt = tokio::runtime::Handle::current();
        let (tplan, tsession, tcounters, tgpu, gate) = (plan.clone(), session.clone(), counters.clone(), gpu.clone(), ctx.gate.clone());
        let trainer = std::thread::Builder::new()
            .name("train-loop".into())
            .spawn(move || -> Result<(Vec<RepeatOutput>, serde_json::Value)> {
                let mut stepper: Box<dyn Stepper> = make_stepper(&tplan, tgpu.as_ref(), dest, classes, device_batch)?;
                let desc = stepper.describe();
                let mut windows = Boundaries { rt, session: tsession, counters: tcounters, gate, open: None };
                let figures = train_loop(&mut rx, stepper.as_mut(), tplan.warmup, tplan.steps, tplan.repeats, |_, start| windows.at(start))?;
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
        let mine = rank_repeats(&figures, me.rank, batch);
        let per_rank: Vec<Vec<RankRepeat>> = session.gather("train-figures", &mine).await?;
        let witnesses: Vec<WitnessReport> = figures.iter().filter_map(|(_, w, _)| w.witness.clone()).collect();
        let losses: Vec<&Vec<f64>> = figures.iter().map(|(_, _, l)| l).collect();
        let (outcome, table) = steps::outcome(
            session,
            plan,
            prefix,
            &per_rank,
            &witnesses,
            &losses,
            TrainDataset {
                classes,
                bytes_per_image,
                shards: shards_total,
                shards_rank0: shards_mine,
                samples_rank0: samples_mine,
                decode_threads,
                stepper: stepper_desc,
            },
        );
        self.table = table;
        Ok(outcome)
    }

    fn print(&self, s: &Session, _results: &TrainResults) {
        steps::print_table(s, &self.plan, &self.prefix, &self.table);
    }
}

/// The timed windows of the training thread: each repeat's start opens
/// one, its end closes it with the loader's reads in between.
struct Boundaries {
    rt: tokio::runtime::Handle,
    session: Arc<Session>,
    counters: Arc<LoaderCounters>,
    gate: Arc<tokio::sync::RwLock<()>>,
    /// The open window, its sampler and the loader's counters at its start.
    open: Option<(OpenWindow, Sampler, [u64; 4])>,
}

impl Boundaries {
    /// At a repeat's start (`start`) open a window; at its end close it and
    /// return the window's figures. Each boundary pauses the loader: in-flight
    /// reads finish and are counted, none starts, until the scrape is done.
    ///
    /// Errors: the session's meetings and scrapes.
    fn at(&mut self, start: bool) -> Result<Option<WindowFigures>> {
        let paused = self.rt.block_on(self.gate.write());
        if start {
            let c0 = counters_now(&self.counters);
            let window = self.rt.block_on(self.session.open_window())?;
            drop(paused);
            self.open = Some((window, Sampler::start(), c0));
            return Ok(None);
        }
        let (window, sampler, c0) = self.open.take().expect("a window was opened");
        let s = sampler.finish();
        let c1 = counters_now(&self.counters);
        let mut f = WindowFigures {
            read_bytes: c1[0] - c0[0],
            gets: c1[1] - c0[1],
            fetch_thread_s: (c1[2] - c0[2]) as f64 / 1e6,
            decode_thread_s: (c1[3] - c0[3]) as f64 / 1e6,
            client_cpu_cores: s.client_cpu_cores,
            host_cpu_cores: s.host_cpu_cores,
            witness: None,
        };
        let closed = self.rt.block_on(self.session.close_window(window, Direction::Read, f.read_bytes, ()))?;
        drop(paused);
        f.witness = closed.witness;
        Ok(Some(f))
    }
}

/// JPEG batches are decoded into host memory: the batch buffers, plus each
/// batch's JPEG bytes while it is prepared (about a tenth of its pixels), must fit.
///
/// Errors: [`Error::Usage`] naming the flags that shrink them.
fn check_jpeg_memory(plan: &TrainPlan) -> Result<()> {
    let per = plan.batch_size as u64 * (plan.crop as u64).pow(2) * 3;
    crate::mem::check_host_memory(
        &format!("{} batch buffers of {} x {} x {} x 3", plan.prefetch_batches, plan.batch_size, plan.crop, plan.crop),
        (plan.prefetch_batches as u64) * per * 11 / 10,
        &format!("lower {BATCH_SIZE}, {CROP} or {PREFETCH_BATCHES}"),
    )
}

/// This rank's figures per repeat, as rank 0 gathers them: the loop's
/// figures with images counted (`steps` x `batch`) and the window's reads.
fn rank_repeats(figures: &[RepeatOutput], rank: usize, batch: usize) -> Vec<RankRepeat> {
    let hostname = sysinfo::System::host_name().unwrap_or_default();
    figures
        .iter()
        .map(|(l, w, _)| {
            let mut l = l.clone();
            l.images = l.steps as u64 * batch as u64;
            l.images_per_s = l.images as f64 / l.wall_s;
            RankRepeat {
                rank,
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
        .collect()
}

fn l_classes(listed: &[Listed<RawShard>]) -> i64 {
    listed.iter().map(|l| l.meta.classes.len() as i64).max().unwrap_or(0)
}

#[cfg(not(feature = "train"))]
fn make_stepper(plan: &TrainPlan, _gpu: Option<&Arc<Gpu>>, _dest: Dest, _classes: i64, device_batch: Option<Buffer>) -> Result<Box<dyn Stepper>> {
    if !plan.loader_only {
        return Err(usage_without_model());
    }
    Ok(Box::new(LoaderOnly { device_batch }))
}

#[cfg(feature = "train")]
fn make_stepper(plan: &TrainPlan, gpu: Option<&Arc<Gpu>>, dest: Dest, classes: i64, device_batch: Option<Buffer>) -> Result<Box<dyn Stepper>> {
    Ok(Box::new(model::Trainer::new(plan, gpu, dest, classes, device_batch)?))
}

#[cfg(test)]
mod tests {
    use super::loader::shard_order;
    use super::*;
    use rand::{SeedableRng, rngs::SmallRng};

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

    #[test]
    fn a_window_is_judged_by_the_bytes_it_read_against_those_its_images_hold() {
        let rep = |repeat: u32, images: u64, read_bytes: u64| TrainRepeat { repeat, images, read_bytes, ..Default::default() };
        // 40 images of 3072 bytes hold 122880; reading 61440 (half) is enough.
        let (fail, warn) = steps::window_check(&[rep(1, 40, 61_440), rep(2, 40, 122_880)], 5, 10, 3072.0);
        assert!(fail.is_none() && warn.is_empty(), "{fail:?} {warn:?}");
        // Less than half: a warning naming the share, repeat by repeat.
        let (fail, warn) = steps::window_check(&[rep(1, 40, 122_880), rep(2, 40, 30_720)], 5, 10, 3072.0);
        assert!(fail.is_none());
        assert_eq!(warn.len(), 1);
        assert!(warn[0].starts_with("repeat 2: the timed steps read 30720 bytes, 25% of the 122880 their 40 images hold"), "{}", warn[0]);
        // Nothing read: the run fails (exit 2), whatever the other repeats read.
        let (fail, _) = steps::window_check(&[rep(1, 40, 122_880), rep(2, 40, 0)], 5, 10, 3072.0);
        let e = fail.expect("a window that read nothing fails");
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().starts_with("repeat 2: the 5 timed steps read 0 bytes from the store"), "{e}");
        // Two ranks: one that read nothing fails the run although the sum read enough.
        let rank = |rank: usize, images: u64, read_bytes: u64| RankRepeat {
            rank,
            read_bytes,
            figures: LoopFigures { images, ..Default::default() },
            ..Default::default()
        };
        let ranks =
            |a: u64, b: u64| TrainRepeat { repeat: 1, images: 80, read_bytes: a + b, ranks: vec![rank(0, 40, a), rank(1, 40, b)], ..Default::default() };
        let (fail, _) = steps::window_check(&[ranks(0, 245_760)], 5, 10, 3072.0);
        assert!(fail.expect("rank 0 read nothing").to_string().starts_with("repeat 1, rank 0: the 5 timed steps read 0 bytes"));
        let (fail, warn) = steps::window_check(&[ranks(122_880, 30_720)], 5, 10, 3072.0);
        assert!(fail.is_none());
        assert_eq!(warn.len(), 1);
        assert!(warn[0].starts_with("repeat 1, rank 1: the timed steps read 30720 bytes, 25%"), "{}", warn[0]);
    }
}
