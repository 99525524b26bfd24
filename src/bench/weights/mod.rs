//! `s3rdma weights`: model weights (safetensors) into GPU memory, cold start
//! (the seeds' B8: Llama-3.1-8B 0.77 s over RDMA, 2.90 s HTTP, 2.29 s local
//! warm cache).
//!
//! Headers are read first (two small ranged reads per shard), then one
//! buffer per shard is allocated (before the timed window), then each shard's
//! data blob is read in `--range-size` ranged reads, one after another into
//! consecutive parts of its buffer (never two transfers into one buffer at
//! once: cuObject registers by address), with `--concurrency` shards in
//! flight. Into device memory over a store that cannot write it (local,
//! http, rdma's fallback), all shards instead go through one staged pipeline
//! in file order through one pool of `--bounce-buffers` bounce buffers
//! spread over the shards' buffers (each read a task of its own:
//! `store::staged_read_pooled`). Every tensor is then a view (offset, length) into its shard's
//! buffer: no per-tensor allocation or copy.

use std::sync::Arc;
use std::time::Instant;

use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};

use super::driver::Bench;
use super::fanout;
use super::session::{Direction, Outcome, Session, SessionSpec};
use crate::error::{Error, Result};
use crate::flag::{BACKEND, BASELINE_DIR, BASELINES, BUCKET, CONCURRENCY, IO_THREADS, MODEL, RANGE_SIZE, REFERENCE, SYNTH, VERIFY};
use crate::format::weights::ShardLayout;
use crate::mem::{Buffer, Dest};
use crate::record::WindowId;
use crate::sampler::Sampler;
use crate::stats::Spread;
use crate::store::Backend;
use crate::store::{self, ObjectStore};
use crate::witness::WitnessReport;

mod hashes;
mod plan;
mod results;
mod verify;
pub use hashes::CheckedHow;
pub use plan::{Baseline, WeightsPlan};
pub use results::{BaselineRun, LoadRepeat, TimeToReady, WeightsParams, WeightsRecord, WeightsResults, WeightsSummary};
pub use verify::{Reference, Verified};

/// What one load did: bytes, ranged reads, the stages' timeline
/// and what was hashed as staged, where the store's own device pipeline ran.
type Loaded = (u64, u64, Option<crate::store::LoadTimeline>, Option<crate::store::StagedHashes>);

/// Load every shard's data blob into `bufs` (one per shard, same order),
/// hashing it as it is staged where `check` asks and the store's own device
/// pipeline runs ([`crate::store::StagedCheck`]).
///
/// Into device memory over a store that cannot write it, every shard goes
/// through the store's own device pipeline where it has one
/// ([`Transport::read_to_device`]: local files on reader threads), else through one staged pipeline ([`store::staged_read_pooled`]): the shards'
/// bounce buffers are pooled and read in file order, so as many ranged GETs
/// stay in flight to the end whatever the shards' sizes (one pipeline per
/// shard idled the small last shard's buffers once it was done).
///
/// Otherwise each shard is its own task (up to `concurrency` at once): a
/// local read blocks its task's thread, so shards polled in one task would
/// run one after another (measured on the H200: 1.00 client core). The first
/// failed shard stops the others ([`fanout::run_fail_fast`]); `bufs` is then
/// empty.
async fn load(
    store: &Arc<dyn ObjectStore>,
    layout: &[ShardLayout],
    bufs: &mut Vec<Buffer>,
    range_bytes: u64,
    concurrency: usize,
    check: Option<&crate::store::StagedCheck>,
) -> Result<Loaded> {
    if !store.capabilities().device_writes && !bufs.is_empty() && bufs.iter().all(|b| matches!(b, Buffer::Device(_))) {
        return load_pooled(store, layout, bufs, check).await;
    }
    let tasks: Vec<_> = layout
        .iter()
        .cloned()
        .zip(bufs.drain(..))
        .map(|(shard, mut buf)| {
            let store = store.clone();
            async move {
                let range = shard.data_start..shard.object_bytes;
                let (b, n) = super::read_range(store.as_ref(), &shard.key, range, &mut buf, range_bytes, shard.version.as_ref()).await?;
                Ok((buf, b, n))
            }
        })
        .collect();
    let mut total = (0, 0, None, None);
    for (buf, b, n) in fanout::run_fail_fast(tasks, concurrency).await? {
        bufs.push(buf);
        total = (total.0 + b, total.1 + n, None, None);
    }
    Ok(total)
}

/// [`load`] into device memory through the store's own device pipeline, or
/// else one pooled staged pipeline; the ranged reads it counts are the shards
/// (one staged read each).
async fn load_pooled(store: &Arc<dyn ObjectStore>, layout: &[ShardLayout], bufs: &mut [Buffer], check: Option<&crate::store::StagedCheck>) -> Result<Loaded> {
    let parts: Vec<store::StagedPart> =
        layout.iter().map(|s| store::StagedPart { key: s.key.clone(), range: s.data_start..s.object_bytes, at: 0, version: s.version.clone() }).collect();
    let mut dsts: Vec<&mut crate::mem::DeviceBuffer> = bufs
        .iter_mut()
        .map(|b| match b {
            Buffer::Device(d) => d,
            _ => unreachable!("load checked that every buffer is device memory"),
        })
        .collect();
    let (done, stages, checked) = match store.read_to_device(&parts, &mut dsts, check) {
        Some(d) => {
            let d = d?;
            (d.transfers, Some(d.timeline), d.checked)
        }
        None => (store::staged_read_pooled(store, &parts, &mut dsts).await?, None, None),
    };
    let mut bytes = 0;
    for (p, t) in parts.iter().zip(&done) {
        if t.bytes != p.range.end - p.range.start {
            return Err(Error::Runtime(format!("short read of '{}': {} of {} bytes", p.key, t.bytes, p.range.end - p.range.start)));
        }
        bytes += t.bytes;
    }
    Ok((bytes, parts.len() as u64, stages, checked))
}

/// Copy every shard to `<dir>/<bucket>/<key>` with whole-object GETs into
/// host memory and plain file writes.
async fn download(store: &dyn ObjectStore, layout: &[ShardLayout], dir: &std::path::Path, bucket: &str) -> Result<()> {
    for shard in layout {
        let mut b = Buffer::host(shard.object_bytes as usize);
        store::read_into_version(store, &shard.key, None, &mut b, 0, shard.version.as_ref()).await?;
        let path = dir.join(bucket).join(&shard.key);
        std::fs::create_dir_all(path.parent().expect("a parent"))
            .and_then(|_| std::fs::write(&path, b.as_host().expect("host")))
            .map_err(|e| Error::Runtime(format!("{BASELINES}: cannot write {}: {e}: pass {BASELINE_DIR}", path.display())))?;
    }
    Ok(())
}

/// Time the baselines into the same buffers: the local copy is made by the
/// first download-then-load (or untimed, before local-then-load alone).
async fn baselines(plan: &WeightsPlan, store: &dyn ObjectStore, layout: &[ShardLayout], bufs: &mut Vec<Buffer>) -> Result<Vec<BaselineRun>> {
    let (dir, remove) = match &plan.baseline_dir {
        Some(d) => (d.clone(), false),
        None => (std::env::temp_dir().join(format!("s3rdma-baseline-{}", std::process::id())), true),
    };
    let mut local_args = plan.run.store.clone();
    local_args.backend = Backend::Local;
    local_args.root = dir.clone();
    let local: Arc<dyn ObjectStore> = Arc::from(store::open(&local_args)?);
    let total: u64 = layout.iter().map(|s| s.data_bytes()).sum();
    let mut out = Vec::new();
    let mut have_copy = false;
    for &b in &plan.baselines {
        let sampler = Sampler::start();
        let t0 = Instant::now();
        let download_s = if b == Baseline::DownloadThenLoad || !have_copy {
            download(store, layout, &dir, &plan.run.store.bucket).await?;
            have_copy = true;
            t0.elapsed().as_secs_f64()
        } else {
            0.0
        };
        // local-then-load times only the load, even when it made the copy itself.
        let t1 = Instant::now();
        // The local copy is other files: the store's object versions do not pin it.
        let copy: Vec<ShardLayout> = layout.iter().map(|l| ShardLayout { version: None, ..l.clone() }).collect();
        let (bytes, ..) = load(&local, &copy, bufs, plan.run.store.range_bytes, plan.concurrency as usize, None).await?;
        let load_s = t1.elapsed().as_secs_f64();
        let s = sampler.finish();
        let wall_s = if b == Baseline::DownloadThenLoad { download_s + load_s } else { load_s };
        out.push(BaselineRun {
            baseline: b,
            bytes,
            wall_s,
            download_s: if b == Baseline::DownloadThenLoad { download_s } else { 0.0 },
            load_s,
            throughput_gbps: total as f64 / wall_s / 1e9,
            client_cpu_cores: s.client_cpu_cores,
        });
    }
    if remove {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(out)
}

/// `s3rdma weights` as a [`Bench`]: the plan, then what [`Bench::prepare`]
/// read and allocated before the timed loads.
#[derive(Debug)]
pub struct Weights {
    plan: WeightsPlan,
    ready: Option<Prepared>,
    /// The worst verdict over the repeats (the table's witness column).
    worst: Option<crate::witness::Verdict>,
}

/// The model as read before the timed loads, and where it loads to.
#[derive(Debug)]
struct Prepared {
    layout: Vec<crate::format::weights::ShardLayout>,
    digest: Option<crate::format::digest::Digest>,
    header_s: f64,
    bufs: Vec<Buffer>,
    gpu: Option<Arc<crate::mem::Gpu>>,
    /// When the session had started, the headers were read and the buffers allocated.
    session_at: Instant,
    headers_at: Instant,
    buffers_at: Instant,
}

impl Weights {
    /// The bench of `plan`.
    pub fn new(plan: WeightsPlan) -> Self {
        Weights { plan, ready: None, worst: None }
    }
}

impl Bench for Weights {
    type Params = WeightsParams;
    type Results = WeightsResults;

    /// `--synth` writes a model here and measures nothing.
    async fn setup(&mut self) -> Result<Option<SessionSpec>> {
        let plan = &self.plan;
        if let Some(name) = &plan.synth {
            if plan.verify || plan.reference.is_some() {
                return Err(Error::Usage(format!("{SYNTH} writes a model and loads none: run {VERIFY} (or {REFERENCE}) as a second command, without {SYNTH}")));
            }
            // Writes a model and no record: no timed window, so no session.
            crate::record::check_results_dir(&plan.run.output.results_dir)?;
            crate::ingest::synth::run(&plan.run.store, &plan.model, name, plan.shard_size).await?;
            return Ok(None);
        }
        Ok(Some(SessionSpec { rdma_threads: plan.concurrency, no_bucket, defer_gpu: true, ..plan.run.spec("weights") }))
    }

    /// Errors: a model that cannot be read or is half written, a wrong
    /// `--reference`, an I/O plan off RDMA under `--require-rdma`, memory.
    async fn prepare(&mut self, s: &mut Session) -> Result<()> {
        let plan = &self.plan;
        let session_at = Instant::now();
        let store = s.store.clone();
        let dest = s.mem.dest;
        let t_head = Instant::now();
        let (layout, index_warnings) = crate::catalog::weights::read_layout(store.as_ref(), &plan.model).await?;
        index_warnings.into_iter().for_each(|w| s.warn(w));
        let header_s = t_head.elapsed().as_secs_f64();
        if let Some(r) = &plan.reference {
            // A wrong --reference fails before the load, not after it.
            verify::reference_files(r, &plan.model, &layout)?;
        }
        // Read before the load: a model whose write stopped midway is refused
        // whether or not --verify is asked.
        let digest = crate::catalog::digest::read(store.as_ref(), &plan.model).await?;
        if let Some(d) = &digest {
            verify::same_layout(&plan.model, &layout, d)?;
        }
        let total: u64 = layout.iter().map(|s| s.data_bytes()).sum();
        // What the session said already (the store's size-independent warnings) is not said twice.
        let sizes: std::collections::BTreeSet<String> = layout.iter().flat_map(|s| store.preflight(s.object_bytes)).collect();
        for w in sizes {
            s.warn(w);
        }
        // Each shard's data blob is read as ranged GETs of at most --range-size bytes (it starts after the header).
        let range_bytes = plan.run.store.range_bytes.max(1);
        let planned: Vec<(String, crate::store::PlannedIo)> = layout
            .iter()
            .map(|l| (format!("weights reads of shard '{}'", l.key), crate::store::PlannedIo::Get { whole: false, bytes: l.data_bytes().min(range_bytes) }))
            .collect();
        s.check_io_plan(&planned, Some(&format!("no flag of this tool makes them RDMA: a libminiocpp with miniocpp_get_object_range (minio-cpp PR #258) reads them in {RANGE_SIZE} ranged reads over RDMA")))?;
        let headers_at = Instant::now();
        // One buffer per shard, allocated side by side before any timed window
        // (the GPU's background open is joined here).
        let gpu = s.gpu()?;
        let lens: Vec<usize> = layout.iter().map(|l| l.data_bytes() as usize).collect();
        let bufs = s.pooled_buffers(&lens).map_err(|e| Error::Runtime(format!("cannot allocate {total} bytes of {} memory: {e}", dest.name())))?;
        let buffers_at = Instant::now();
        self.ready = Some(Prepared { layout, digest, header_s, bufs, gpu, session_at, headers_at, buffers_at });
        Ok(())
    }

    async fn measure(&mut self, s: &Arc<Session>) -> Result<Outcome<WeightsParams, WeightsResults>> {
        let plan = &self.plan;
        let Prepared { layout, digest, header_s, bufs, gpu, session_at, headers_at, buffers_at } = self.ready.take().expect("prepare ran");
        let mut bufs = bufs;
        let (store, dest) = (s.store.clone(), s.mem.dest);
        let total: u64 = layout.iter().map(|s| s.data_bytes()).sum();
        let tensors: usize = layout.iter().map(|s| s.tensors.len()).sum();
        // --verify against the digest into device memory: the store's own device
        // pipeline hashes every tensor as it stages it (each repeat pays it; the
        // last repeat's hashes are compared).
        let check = (plan.verify && plan.reference.is_none() && digest.is_some() && dest == Dest::Device).then(|| hashes::staged_check(&layout));
        let Timed { repeats, stats, staged, ready_at } = timed_loads(s, plan, &layout, &mut bufs, check.as_ref()).await?;
        let verified = if plan.verify || plan.reference.is_some() {
            let v = verify::verify(
                store.as_ref(),
                &plan.model,
                &layout,
                &mut bufs,
                plan.reference.as_deref(),
                digest.as_ref(),
                staged.as_ref().map(|(h, n)| (h, *n)),
            )
            .await?;
            if let Some(f) = v.checked.as_ref().and_then(|c| c.fallback.as_ref()) {
                s.warn(format!("{VERIFY}: {f}"));
            }
            Some(v)
        } else {
            None
        };
        let baseline_runs = if plan.baselines.is_empty() { Vec::new() } else { baselines(plan, store.as_ref(), &layout, &mut bufs).await? };
        let wall = Spread::of(repeats.iter().map(|r| r.wall_s)).expect("repeats >= 1");
        let gbps = Spread::of(repeats.iter().map(|r| r.throughput_gbps)).expect("repeats >= 1");
        let cores = Spread::of(repeats.iter().map(|r| r.client_cpu_cores)).expect("repeats >= 1");
        let worst = repeats.iter().map(|r| r.witness.verdict).min().expect("repeats >= 1");
        let windows: Vec<(WindowId, String, WitnessReport)> =
            repeats.iter().map(|r| (WindowId::repeat(r.repeat), format!("repeat {}", r.repeat), r.witness.clone())).collect();
        let failure = verified.as_ref().and_then(Verified::failure);
        let params = params(plan, &repeats, dest, store.as_ref(), &bufs);
        let ready = TimeToReady::of(session_at, headers_at, gpu.as_ref(), buffers_at, ready_at.expect("repeats >= 1"));
        let results = WeightsResults {
            ready,
            shards: layout.len(),
            tensors,
            bytes: total,
            header_s,
            device_memory_bytes: if dest == Dest::Device { total } else { 0 },
            repeats,
            summary: WeightsSummary { wall_s: wall, throughput_gbps: gbps, client_cpu_cores: cores },
            verified,
            baselines: baseline_runs,
            layout,
        };
        self.worst = Some(worst);
        let mut outcome = Outcome::new(params, results, windows);
        outcome.stats = stats;
        outcome.failure = failure;
        Ok(outcome)
    }

    fn print(&self, s: &Session, results: &WeightsResults) {
        let (backend, location) = (s.store.capabilities().name, s.store.location());
        print_table(results, &self.plan.model, backend, &location, s.mem.dest, self.worst.unwrap_or(crate::witness::Verdict::Unverified))
    }
}

/// What the timed loads gave: every repeat, the store counters' growth,
/// the staged hashes of the last (and the reader threads that made them),
/// and when the first load had finished.
struct Timed {
    repeats: Vec<LoadRepeat>,
    stats: crate::store::StoreStats,
    staged: Option<(crate::store::StagedHashes, usize)>,
    ready_at: Option<Instant>,
}

/// `--repeats` timed loads of the model into `bufs`, each in its own window.
///
/// Errors: a load's or the session's.
async fn timed_loads(
    s: &Session,
    plan: &WeightsPlan,
    layout: &[ShardLayout],
    bufs: &mut Vec<Buffer>,
    check: Option<&crate::store::StagedCheck>,
) -> Result<Timed> {
    let store = s.store.clone();
    let (mut staged, mut ready_at, mut repeats, mut stats) = (None, None, Vec::new(), crate::store::StoreStats::default());
    for rep in 1..=plan.repeats {
        let window = s.open_window().await?;
        let sampler = Sampler::start();
        let t0 = Instant::now();
        let (bytes, ranged_reads, stages, checked) = load(&store, layout, bufs, plan.run.store.range_bytes, plan.concurrency as usize, check).await?;
        staged = checked.map(|c| (c, stages.as_ref().map_or(1, |t| t.threads)));
        let wall_s = t0.elapsed().as_secs_f64();
        ready_at.get_or_insert_with(Instant::now);
        let smp = sampler.finish();
        let closed = s.close_window(window, Direction::Read, bytes, ()).await?;
        stats.add(&closed.stats);
        repeats.push(LoadRepeat {
            repeat: rep,
            bytes,
            wall_s,
            throughput_gbps: bytes as f64 / wall_s / 1e9,
            ranged_reads,
            client_cpu_cores: smp.client_cpu_cores,
            host_cpu_cores: smp.host_cpu_cores,
            sampler: smp,
            witness: closed.witness.expect("a single-process bench is rank 0"),
            stages,
        });
    }
    Ok(Timed { repeats, stats, staged, ready_at })
}

/// The record's `params`: the plan, how the load was read (the same rule as
/// `load`'s) and the bounce buffers allocated.
fn params(plan: &WeightsPlan, repeats: &[LoadRepeat], dest: Dest, store: &dyn ObjectStore, bufs: &[Buffer]) -> WeightsParams {
    let load_pipeline = if repeats.iter().any(|r| r.stages.is_some()) {
        format!("the store's own: reader threads ({IO_THREADS}), each with its bounce buffers and copy streams, chunks in file order")
    } else if dest == Dest::Device && !store.capabilities().device_writes {
        "staged: one pipeline, the shards' bounce buffers pooled, reads in file order".to_string()
    } else {
        format!("one task per shard, {CONCURRENCY} at once")
    };
    // The pool as allocated: at most what the reads need (`store::pool_shares`), so a small model's may be below `--bounce-buffers`.
    let bounce_buffers_allocated: usize = bufs.iter().map(|b| if let Buffer::Device(d) = b { d.bounce.len() } else { 0 }).sum();
    WeightsParams {
        model: plan.model.clone(),
        range_bytes: plan.run.store.range_bytes,
        concurrency: plan.concurrency,
        load_pipeline,
        bounce_buffers_allocated,
        repeats: plan.repeats,
        verify: plan.verify || plan.reference.is_some(),
        reference: plan.reference.clone(),
    }
}

/// The load's table (one row for s3rdma, one per baseline), then the time-to-ready line.
fn print_table(results: &WeightsResults, model: &str, backend: &str, location: &str, dest: Dest, worst: crate::witness::Verdict) {
    let WeightsSummary { wall_s: wall, throughput_gbps: gbps, client_cpu_cores: cores } = &results.summary;
    let (total, tensors) = (results.bytes, results.tensors);
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(["loader", "dest", "shards", "tensors", "GB", "wall s", "GB/s", "client cores", "witness", "verified"]);
    t.add_row([
        backend.to_string(),
        dest.name().to_string(),
        results.shards.to_string(),
        tensors.to_string(),
        format!("{:.2}", total as f64 / 1e9),
        if wall.max > wall.min { format!("{:.3} ({:.3}–{:.3})", wall.median, wall.min, wall.max) } else { format!("{:.3}", wall.median) },
        format!("{:.2}", gbps.median),
        format!("{:.2}", cores.median),
        worst.as_str().to_string(),
        results.verified.as_ref().map_or("-".into(), Verified::cell),
    ]);
    for b in &results.baselines {
        let name = match b.baseline {
            Baseline::DownloadThenLoad => "download-then-load",
            Baseline::LocalThenLoad => "local-then-load",
        };
        t.add_row([
            name.to_string(),
            dest.name().to_string(),
            results.shards.to_string(),
            tensors.to_string(),
            format!("{:.2}", total as f64 / 1e9),
            format!("{:.3}", b.wall_s),
            format!("{:.2}", b.throughput_gbps),
            format!("{:.2}", b.client_cpu_cores),
            "-".into(),
            "-".into(),
        ]);
    }
    println!("weights '{model}' from {backend} ({location}), headers {:.3} s", results.header_s);
    println!("{t}");
    // The stages of the repeat with the median wall time.
    let mut by_wall: Vec<&LoadRepeat> = results.repeats.iter().collect();
    by_wall.sort_by(|a, b| a.wall_s.total_cmp(&b.wall_s));
    if let Some(st) = by_wall.get(by_wall.len() / 2).and_then(|r| r.stages.as_ref()) {
        println!("{}", st.line());
    }
    if let Some((v, c)) = results.verified.as_ref().and_then(|v| v.checked.as_ref().map(|c| (v, c))) {
        let during = c.in_load_s.map_or(String::new(), |h| format!("{h:.3} s per thread hashing inside the load (its wall time includes it), then "));
        println!(
            "checked ({}): XXH3-64 of every tensor, {}; {} threads, {:.2} GB: {during}{:.3} s after it ({:.2}x the load's median)",
            if v.ok { "all match" } else { "DIFFERENCES, see below" },
            c.bytes_checked,
            c.threads,
            c.bytes as f64 / 1e9,
            c.seconds,
            c.seconds / wall.median.max(1e-9)
        );
    }
    println!("{}", results.ready.line());
}

/// A missing bucket: weights reads a model that is already there.
fn no_bucket(e: crate::error::StoreError) -> Error {
    match e {
        crate::error::StoreError::NoSuchBucket { bucket, location } => Error::Runtime(format!(
            "bucket '{bucket}' does not exist at {location}: upload a model there, or write a synthetic one with `s3rdma weights {SYNTH} llama-3.1-8b {MODEL} <prefix>` (same {BACKEND}/{BUCKET})"
        )),
        e => e.into(),
    }
}
