//! `s3rdma ckpt`: checkpoint save and restore from GPU memory (the seeds'
//! B4/B5: 16 GiB save 0.65 s over RDMA, 12.16 s tuned HTTP, 62.55 s
//! torch.save + HTTP).
//!
//! The state lives as one allocation per tensor (as a framework holds it),
//! filled with seeded random bytes. Two methods, each timed per repeat:
//!
//! - `flat` (the format of `format::ckpt`): *flatten* copies every tensor
//!   into one flat buffer at its 512-byte aligned offset (device-to-device on
//!   a GPU); the buffer goes out as `--chunk` part objects, `--concurrency` in
//!   flight, straight from the flat buffer where the transport reads device
//!   memory (rdma) and through a pinned staging buffer per chunk in flight
//!   elsewhere; each chunk's xxh3 goes into the manifest, written last (the
//!   commit). Restore reads the manifest, the chunks into one buffer (the same
//!   way round), checks every checksum and *rebuilds* the tensors as views
//!   (offset, length) into that buffer.
//! - `serialize-then-put`, the shape of "torch.save + HTTP": every tensor
//!   copied to host memory, serialized into one safetensors blob (the
//!   `safetensors` crate), one single-stream PUT (HTTP even on the rdma
//!   backend: it is host bytes); restore is one single-stream GET, parse, and
//!   a copy of each tensor to the device.
//!
//! - `async`: flat's format, saved as asynchronous checkpointing saves (DCP
//!   `async_save`, Megatron/NeMo async): the tensors are snapshotted into one
//!   pinned host buffer — the training stall, `stall_s` — and the chunks go
//!   out from there, manifest last; `wall_s` runs until the manifest commits
//!   (durable). A trainer overlaps that persistence with its next steps; the
//!   bench reports both. Restore is flat's. (The goal: a 16 GiB stall of at
//!   most 0.5 s where pinned device-to-host copies run at 55 GB/s.)
//!
//! After the restores, every tensor is compared byte for byte with the
//! original allocation (`verified`); a mismatch exits 4.
//!
//! A restore is warm (it reads what the save left in the page cache) unless
//! `--restore-cache cold` (`--cold`) makes each one read from the device
//! first, as MLPerf Storage does (`cache.rs`). Across ranks a repeat lasts as
//! long as its slowest rank, and its GB/s is all ranks' bytes over that
//! ([`AGGREGATION`]).

use std::sync::Arc;

use super::dedup;
use super::driver::Bench;
use super::session::{Outcome, Session, SessionSpec, World};
use crate::error::{Error, Result};
use crate::flag::{CHUNK, COLD, KEEP, METHODS, OPS, PREFIX, RANKS, RESTORE_CACHE, SIZES, TRAIN_LOAD, WORKLOAD};
use crate::format::ckpt::{self as fmt, Manifest, TensorEntry};
use crate::mem::{Buffer, Dest};
use crate::ranks::{self, Rank};
use crate::record::WindowId;
use crate::store::Backend;
use crate::store::{self, ObjectStore, blocking};
use crate::units::{gb, size_name};
use crate::witness::WitnessReport;

mod cache;
mod ops;
mod plan;
mod record;
mod repeat;
mod results;
#[cfg(test)]
mod step_tests;
mod train_load;
mod train_table;
mod train_view;
pub use cache::CacheFigures;
pub(crate) use ops::{Ctx, State, StateSpec, serial_key, verify};
pub use plan::{ChunkChecksum, CkptMethod, CkptOp, CkptPlan, RestoreCache, TrainLoadPlan};
pub use record::{CkptParams, CkptRecord, TrainLoadParams};
pub use results::{AGGREGATION, CkptResults, OpFigures, RepeatRow, Row, Verified};
pub(crate) use results::{print_table, summarize};
pub use train_view::{TrainFigures, TrainRow};

/// Bytes compared or hashed per step when device memory is read back.
const STAGE_CHUNK: usize = 64 << 20;

/// The states this run saves, this rank's share of each.
fn states(plan: &CkptPlan, world: usize) -> Result<Vec<StateSpec>> {
    let mut out = Vec::new();
    for w in &plan.workload {
        match w.as_str() {
            "resnet50" => {
                let tensors = fmt::resnet50();
                let bytes = fmt::pack(&tensors).1 * world as u64;
                out.push(StateSpec { name: "resnet50".into(), workload: "resnet50", size_bytes: bytes, tensors });
            }
            other => {
                return Err(Error::Usage(format!("{WORKLOAD} '{other}': known workloads are {}; or give {SIZES}", fmt::WORKLOADS.join(", "))));
            }
        }
    }
    for s in synthetic_sizes(plan) {
        let tensors = fmt::synthetic_adam(s / world as u64).map_err(|e| match e {
            Error::Usage(_) if world > 1 => Error::Usage(format!(
                "{SIZES} {} over {world} ranks is {} bytes per rank: a synthetic checkpoint needs at least 1MiB per rank ({world} ranks)",
                size_name(s),
                s / world as u64
            )),
            e => e,
        })?;
        out.push(StateSpec { name: format!("synthetic-{}", size_name(s)), workload: "synthetic", size_bytes: s, tensors });
    }
    Ok(out)
}

/// `--sizes`, or 1 GiB when neither it nor `--workload` is given.
fn synthetic_sizes(plan: &CkptPlan) -> Vec<u64> {
    if plan.sizes.is_empty() && plan.workload.is_empty() { vec![1 << 30] } else { plan.sizes.clone() }
}

/// The largest state's bytes per rank, from the flags alone (`--sizes` split
/// over `world`; a `--workload`'s packed size).
fn per_rank_bytes(plan: &CkptPlan, world: usize) -> u64 {
    let synthetic = synthetic_sizes(plan).iter().map(|s| s / world as u64).max().unwrap_or(0);
    let workload = if plan.workload.iter().any(|w| w == "resnet50") { fmt::pack(&fmt::resnet50()).1 } else { 0 };
    synthetic.max(workload)
}

/// Refuse a run whose buffers cannot fit, before allocating anything: per
/// rank the state, the flat buffer and the restore buffer (3x its bytes) in
/// `--dest` memory, plus for serialize-then-put a host copy and the blob (2x
/// in host memory) and for an async save its pinned snapshot (1x); all ranks
/// of this host together.
/// `per_rank`: the largest state's bytes per rank (checked before the
/// tensor lists are built: a synthetic list grows with the size, so an
/// absurd `--sizes` must be refused first).
fn check_memory(plan: &CkptPlan, per_rank: u64, world: usize) -> Result<()> {
    let serial = if plan.methods.contains(&CkptMethod::SerializeThenPut) { 2 } else { 0 };
    let snapshot = u64::from(plan.methods.contains(&CkptMethod::Async) && plan.ops.contains(&CkptOp::Save));
    // Saturating: --sizes can be as large as u64 allows.
    let (dev, host) = match plan.run.mem.dest {
        Dest::Device => (per_rank.saturating_mul(3), per_rank.saturating_mul(serial + snapshot)),
        _ => (0, per_rank.saturating_mul(3 + serial + snapshot)),
    };
    let mut sys = sysinfo::System::new();
    sys.refresh_memory();
    let avail = sys.available_memory();
    let need = host.saturating_mul(world as u64);
    if avail > 0 && need > avail / 10 * 9 {
        return Err(Error::Usage(format!(
            "{world} rank(s) x {} of state need about {} of host memory, and a run may use at most 90 % of the {} available: lower {SIZES} or {RANKS}{}",
            gb(per_rank),
            gb(need),
            gb(avail),
            if serial > 0 { format!(", or leave serialize-then-put out of {METHODS}") } else { String::new() }
        )));
    }
    if dev > 0
        && let Ok(info) = crate::mem::cuda_probe()
        && !info.devices.is_empty()
    {
        let per_gpu = world.div_ceil(info.devices.len()) as u64;
        let gpu_mem = info.devices.iter().map(|d| d.1).min().unwrap_or(0);
        if dev.saturating_mul(per_gpu) > gpu_mem / 100 * 95 {
            return Err(Error::Usage(format!(
                "{per_gpu} rank(s) per GPU x {} (state + flat + restore buffers) exceed the {} of GPU memory: lower {SIZES} or {RANKS}",
                gb(dev),
                gb(gpu_mem)
            )));
        }
    }
    Ok(())
}

/// Put `plan` in its canonical order (each size, method and operation once, saves
/// before restores) and refuse what cannot run, once, before any rank starts:
/// a bad prefix or run id, a cache mode without a restore, an unaligned chunk
/// for O_DIRECT, sizes or memory this host cannot hold.
///
/// Errors: [`Error::Usage`] naming the flag to change.
fn check_plan(plan: &mut CkptPlan) -> Result<()> {
    // Each size, method and operation once, saves before restores.
    dedup(&mut plan.sizes);
    dedup(&mut plan.methods);
    dedup(&mut plan.ops);
    plan.ops.sort_by_key(|o| *o == CkptOp::Restore);
    store::check_key(&format!("{}/x", plan.prefix)).map_err(|e| Error::Usage(format!("{PREFIX} '{}': {e}", plan.prefix)))?;
    if let Some(id) = plan.run.run_id() {
        ranks::check_run_id(id)?;
    }
    let asked = plan.restore_cache;
    if plan.train_load.is_some() && !plan.ops.contains(&CkptOp::Save) {
        return Err(Error::Usage(format!("{TRAIN_LOAD} runs training beside saves, and {OPS} has none: add save to {OPS} (e.g. {OPS} save,restore)")));
    }
    if asked != RestoreCache::Warm && !plan.ops.contains(&CkptOp::Restore) {
        return Err(Error::Usage(format!(
            "{RESTORE_CACHE} {} (or {COLD}) says how restores read, and {OPS} has none: add restore to {OPS} (e.g. {OPS} save,restore)",
            cache::asked_name(asked)
        )));
    }
    if asked == RestoreCache::Direct
        && plan.run.store.local_bucket_dir().is_some()
        && !plan.run.store.direct
        && !plan.chunk.is_multiple_of(crate::mem::HOST_ALIGN as u64)
    {
        return Err(Error::Usage(cache::unaligned_chunk(asked, plan.chunk, "")));
    }
    if Rank::from_env(plan.run.run_id())?.is_none() {
        // Bad sizes or memory fail once, here, not once per rank.
        let world = plan.ranks.unwrap_or(1) as usize;
        check_memory(plan, per_rank_bytes(plan, world), world)?;
        states(plan, world)?;
    }
    Ok(())
}

/// The memory one checkpoint state's run needs, allocated (and touched)
/// before any timed window.
struct Buffers {
    /// The model's flat buffer (`--dest` memory).
    flat: Buffer,
    /// Where restores land (`--dest` memory).
    restored: Buffer,
    /// The async save's snapshot (pinned; host without a GPU), when asked.
    snapshot: Option<Buffer>,
    /// Pinned staging buffers, one per chunk in flight, when device memory
    /// goes through a transport that cannot read it or is checksummed (taken
    /// into the operations' [`Ctx`] before the first repeat).
    staging: Vec<Buffer>,
}

/// [`Buffers`] for `state` in `dest` memory; `writes_device`: the store reads
/// and writes device memory itself.
///
/// Errors: [`Error::Runtime`] naming the buffer and its size.
fn allocate(plan: &CkptPlan, state: &State, dest: Dest, gpu: Option<&Arc<crate::mem::Gpu>>, writes_device: bool) -> Result<Buffers> {
    let alloc = |what: &str, n: usize| {
        Buffer::for_dest(dest, gpu, n, 0, 0).map_err(|e| Error::Runtime(format!("cannot allocate the {what} ({n} bytes of {} memory): {e}", dest.name())))
    };
    let flat = alloc("flat buffer", state.total as usize)?;
    let restored = alloc("restore buffer", state.total as usize)?;
    // The async save's snapshot: pinned host memory (plain host memory without a GPU).
    let snapshot = if plan.methods.contains(&CkptMethod::Async) && plan.ops.contains(&CkptOp::Save) {
        let kind = if gpu.is_some() { Dest::Pinned } else { Dest::Host };
        Some(
            Buffer::for_dest(kind, gpu, state.total as usize, 0, 0)
                .map_err(|e| Error::Runtime(format!("cannot allocate the async save's snapshot ({} bytes of {} memory): {e}", state.total, kind.name())))?,
        )
    } else {
        None
    };
    let chunks = state.total.div_ceil(plan.chunk);
    // Staging: device memory through a transport that cannot read it, or device checksums.
    let need_staging = dest == Dest::Device && (!writes_device || plan.checksum != ChunkChecksum::None);
    let staging_bytes = if writes_device { STAGE_CHUNK as u64 } else { plan.chunk }.min(state.total.max(1));
    let staging: Vec<Buffer> = if need_staging {
        (0..(plan.concurrency as u64).min(chunks.max(1)))
            .map(|_| Buffer::for_dest(Dest::Pinned, gpu, staging_bytes as usize, 0, 0))
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| Error::Runtime(format!("cannot allocate pinned staging buffers: {e}")))?
    } else {
        Vec::new()
    };
    Ok(Buffers { flat, restored, snapshot, staging })
}

/// Every timed window of `rows` with its label ("<state> <method> <op> repeat N").
fn windows_of(rows: &[Row]) -> Vec<(WindowId, String, WitnessReport)> {
    rows.iter()
        .enumerate()
        .flat_map(|(cell, r)| {
            r.repeats.iter().filter_map(move |rep| {
                rep.witness
                    .clone()
                    .map(|w| (WindowId { cell, repeat: rep.repeat }, format!("{} {} {} repeat {}", r.state, r.method.name(), r.op.name(), rep.repeat), w))
            })
        })
        .collect()
}

/// Compare what a restore put in `restored` with the state's originals
/// (every tensor in `views`), on every rank, and gather the verdict under
/// `name`; the first mismatch on this rank, named after `what` (key and
/// method), goes into `mismatch` (exit 4 at the end, the record kept).
///
/// Errors: the comparison's, a gather that times out.
async fn check_restore(
    s: &Session,
    name: &str,
    what: &str,
    state: &State,
    views: &[TensorEntry],
    restored: &Buffer,
    mismatch: &mut Option<String>,
) -> Result<Verified> {
    let v = blocking(|| verify(state, views, restored)).map_err(|e| Error::Runtime(format!("verifying: {e}")))?;
    if !v.ok && mismatch.is_none() {
        *mismatch = Some(format!(
            "rank {}: {} of {} tensors restored from {what} differ from the originals, first: {}",
            s.me.rank,
            v.mismatched.len(),
            v.tensors_checked,
            v.mismatched[0]
        ));
    }
    let all = s.gather(name, &v).await?;
    Ok(Verified {
        ok: all.iter().all(|v| v.ok),
        tensors_checked: all.iter().map(|v| v.tensors_checked).sum(),
        mismatched: all.iter().flat_map(|v| v.mismatched.clone()).collect(),
    })
}

/// `s3rdma ckpt` as a [`Bench`]: the plan, how restores meet the page
/// cache, and what [`Bench::prepare`] decided.
#[derive(Debug)]
pub struct Ckpt {
    plan: CkptPlan,
    cache_plan: Option<cache::Plan>,
    specs: Vec<StateSpec>,
    /// The training load's GPU and side, for the table (`--train-load`).
    train: Option<(&'static str, usize)>,
    /// The serialize-then-put store, and the O_DIRECT pair cold restores may read through ([`Bench::prepare`]).
    stores: Option<Stores>,
}

/// The stores a ckpt run opens beside the session's.
#[derive(Debug)]
struct Stores {
    /// serialize-then-put is the shape of torch.save + one PUT: one stream, plain HTTP.
    serial: Arc<dyn ObjectStore>,
    /// Cold restores that end up reading with O_DIRECT (the last of cache.rs's
    /// methods) read through these: parallel, and one stream.
    direct: Option<(Arc<dyn ObjectStore>, Arc<dyn ObjectStore>)>,
}

impl Stores {
    /// Open them as variants of the session's store.
    ///
    /// Errors: the store's configuration errors.
    fn open(s: &Session, cache_plan: &cache::Plan) -> Result<Self> {
        let serial = s.open_variant(|a| {
            a.part_concurrency = 1;
            if a.backend == Backend::Rdma {
                a.backend = Backend::Http;
            }
        })?;
        let direct = if cache_plan.dir.is_some() && cache_plan.asked != RestoreCache::Warm && !cache_plan.direct {
            Some((
                s.open_variant(|a| a.direct = true)?,
                s.open_variant(|a| {
                    a.direct = true;
                    a.part_concurrency = 1;
                })?,
            ))
        } else {
            None
        };
        Ok(Stores { serial, direct })
    }
}

impl Ckpt {
    /// The bench of `plan`.
    pub fn new(plan: CkptPlan) -> Self {
        Ckpt { plan, cache_plan: None, specs: Vec::new(), train: None, stores: None }
    }
}

impl Bench for Ckpt {
    type Params = CkptParams;
    type Results = CkptResults;

    async fn setup(&mut self) -> Result<Option<SessionSpec>> {
        let plan = &mut self.plan;
        check_plan(plan)?;
        let spec = SessionSpec {
            world: World::Ranks(plan.ranks),
            rdma_threads: plan.concurrency,
            // A checkpoint writes: on the local backend its bucket directory is
            // created like any directory a save writes into (a fresh --root needs no mkdir by hand);
            // a server's bucket stays the operator's to create.
            create_bucket: plan.run.store.creates_bucket_on_write(),
            no_bucket: crate::bench::session::create_bucket_first,
            ..plan.run.spec("ckpt")
        };
        // How restores meet the page cache: the local backend's files; a server's cache is its own.
        self.cache_plan = Some(cache::Plan {
            asked: plan.restore_cache,
            dir: spec.store.local_bucket_dir(),
            direct: spec.store.direct,
            chunk: plan.chunk,
            host: cache::Host { drop_caches: cache::DROP_CACHES.into() },
        });
        Ok(Some(spec))
    }

    async fn prepare(&mut self, s: &mut Session) -> Result<()> {
        let plan = &self.plan;
        let specs = states(plan, s.me.world)?;
        // Every chunk is one whole object, written and read back whole.
        let chunk = specs.iter().map(|st| (st.size_bytes / s.me.world.max(1) as u64).min(plan.chunk)).max().unwrap_or(plan.chunk);
        let planned = [
            (format!("checkpoint chunks of {chunk} bytes (save)"), crate::store::PlannedIo::Put { bytes: chunk }),
            (format!("checkpoint chunks of {chunk} bytes (restore)"), crate::store::PlannedIo::Get { whole: true, bytes: chunk }),
        ];
        s.check_io_plan(&planned, Some(&format!("{CHUNK} of at most 4294967295 bytes (4 GiB - 1) keeps every chunk on RDMA")))?;
        // ckpt stages device memory through --chunk-sized pinned buffers, one per
        // chunk in flight (not the bounce buffers of --stage-chunk/--bounce-buffers).
        s.device_path = Some(serde_json::json!({
            "mode": if s.store.capabilities().device_writes { "direct" } else { "staged" },
            "staging": format!("one pinned buffer of {CHUNK} bytes per chunk in flight"),
            "chunk_bytes": plan.chunk,
            "buffers": plan.concurrency,
        }));
        self.specs = specs;
        self.stores = Some(Stores::open(s, self.cache_plan.as_ref().expect("setup ran"))?);
        Ok(())
    }

    async fn measure(&mut self, s: &Arc<Session>) -> Result<Outcome<CkptParams, CkptResults>> {
        let (plan, specs) = (&self.plan, &self.specs);
        let cache_plan = self.cache_plan.as_ref().expect("setup ran");
        let Stores { serial, direct } = self.stores.as_ref().expect("prepare ran");
        let me = s.me.clone();
        let dest = s.mem.dest;
        let gpu = s.gpu()?;
        let store = s.store.clone();

        // The training load beside saves: one loop per rank, on its GPU (a CPU stand-in without one).
        let load = match plan.train_load {
            Some(t) => {
                let side = t.gemm_side.unwrap_or(if gpu.is_some() { TrainLoadPlan::GPU_SIDE } else { TrainLoadPlan::CPU_SIDE });
                Some(blocking(|| train_load::TrainLoad::start(gpu.clone(), side))?)
            }
            None => None,
        };
        let mut rows: Vec<Row> = Vec::new();
        let mut mismatch: Option<String> = None;
        // The store counters' growth over every timed window (the record's in_windows).
        let mut in_windows = crate::store::StoreStats::default();
        let after_commit = std::sync::Mutex::new(Vec::new());
        for spec in specs {
            let key = format!("{}/{}/rank{:05}", plan.prefix, spec.name, me.rank);
            let state = State::new(spec, dest, gpu.as_ref(), plan.seed, me.rank)?;
            let mut bufs = allocate(plan, &state, dest, gpu.as_ref(), store.capabilities().device_writes)?;
            let staging = std::mem::take(&mut bufs.staging);
            let ctx = Ctx {
                store: store.clone(),
                serial: serial.clone(),
                chunk: plan.chunk,
                concurrency: plan.concurrency as usize,
                checksum: plan.checksum,
                seed: plan.seed,
                staging: Arc::new(tokio::sync::Mutex::new(staging)),
            };
            // The no-save reference of this state's saves, taken before them.
            let reference = match &load {
                Some(l) => Some(l.reference(3 * train_load::STEPS_AROUND).await?),
                None => None,
            };
            let direct_ctx = direct.as_ref().map(|(d, serial)| Ctx { store: d.clone(), serial: serial.clone(), staging: ctx.staging.clone(), ..ctx });
            let repeats = repeat::Repeats {
                s,
                plan,
                cache_plan,
                key: &key,
                spec,
                state: &state,
                ctx: &ctx,
                direct_ctx: direct_ctx.as_ref(),
                after_commit: &after_commit,
                load: load.as_ref().zip(reference),
            };
            for &method in &plan.methods {
                let st = StateRun { s, plan, key: &key, spec, state: &state, repeats: &repeats };
                rows.extend(st.method_rows(method, &mut bufs, &mut in_windows, &mut mismatch).await?);
                // One method's checkpoint at a time on the store (a 16 GiB run needs 16 GiB free, not 32).
                // Measured and checked by now: a clean-up that fails is said and recorded, not the run's failure.
                if !plan.keep && plan.ops.contains(&CkptOp::Save) {
                    match delete_checkpoint(store.as_ref(), serial.as_ref(), &key, method).await {
                        Err(e) => {
                            let note = format!("rank {}: removing checkpoint {key} ({method:?}) after the run failed: {e}", me.rank);
                            eprintln!("warning: {note}");
                            after_commit.lock().unwrap_or_else(|p| p.into_inner()).push(note);
                        }
                        // A save alone was likely meant for a later restore: say where it went.
                        Ok(()) if me.rank == 0 && !plan.ops.contains(&CkptOp::Restore) => {
                            eprintln!("note: checkpoint {key} ({}) removed after the run; save with {KEEP} to restore it later ({OPS} restore)", method.name())
                        }
                        Ok(()) => {}
                    }
                }
            }
        }
        let windows = windows_of(&rows);
        let params = params(plan, me.world, load.as_ref());
        let after_commit = after_commit.into_inner().unwrap_or_else(|p| p.into_inner());
        let results = CkptResults { rows, aggregation: AGGREGATION.to_string(), after_commit };
        let mut outcome = Outcome::new(params, results, windows);
        outcome.failure = mismatch.map(Error::Mismatch);
        outcome.stats = in_windows;
        self.train = load.as_ref().map(|l| (l.device, l.side));
        drop(load);
        Ok(outcome)
    }

    fn print(&self, s: &Session, results: &CkptResults) {
        let (backend, location) = (s.store.capabilities().name, s.store.location());
        print_table(&results.rows, backend, &location, s.mem.dest, s.me.world);
        if let Some((device, side)) = self.train {
            train_table::print_train_table(&results.rows, device, side);
        }
    }
}

/// The record's `params` of a ckpt run over `world` ranks.
fn params(plan: &CkptPlan, world: usize, load: Option<&train_load::TrainLoad>) -> CkptParams {
    CkptParams {
        workloads: plan.workload.clone(),
        sizes_bytes: plan.sizes.clone(),
        methods: plan.methods.clone(),
        ops: plan.ops.clone(),
        chunk_bytes: plan.chunk,
        concurrency: plan.concurrency,
        repeats: plan.repeats,
        checksum: plan.checksum,
        prefix: plan.prefix.clone(),
        seed: plan.seed,
        ranks: world,
        restore_cache: plan.restore_cache,
        alignment: fmt::ALIGNMENT,
        train_load: load.map(|l| TrainLoadParams {
            gemm_side: l.side,
            device: l.device.to_string(),
            steps_around: train_load::STEPS_AROUND,
            seconds_around: train_load::SECONDS_AROUND,
        }),
        async_next_step: (plan.methods.contains(&CkptMethod::Async) && plan.ops.contains(&CkptOp::Save)).then(|| {
            "right after the snapshot, every byte of every tensor inverted (on the GPU for device memory) while the save persisted, then inverted back: the restore is checked against the state at snapshot time".to_string()
        }),
    }
}

/// One state's checkpoint under `key`, as one method's ops run it.
struct StateRun<'a> {
    s: &'a Session,
    plan: &'a CkptPlan,
    key: &'a str,
    spec: &'a StateSpec,
    state: &'a State,
    repeats: &'a repeat::Repeats<'a>,
}

impl StateRun<'_> {
    /// Every op of `method` (`--repeats` timed windows each), a restore's
    /// bytes compared with the state's; one summary row per op. The store
    /// counters' growth goes into `in_windows`, a mismatch into `mismatch`.
    ///
    /// Errors: a failed save or restore; a comparison's meeting.
    async fn method_rows(
        &self,
        method: CkptMethod,
        bufs: &mut Buffers,
        in_windows: &mut crate::store::StoreStats,
        mismatch: &mut Option<String>,
    ) -> Result<Vec<Row>> {
        let (s, plan, key, spec) = (self.s, self.plan, self.key, self.spec);
        let mut rows = Vec::new();
        let mut views: Option<Vec<TensorEntry>> = None;
        for &op in &plan.ops {
            let mut reps = Vec::new();
            for rep in 1..=plan.repeats {
                let (row, grown) = self.repeats.one(method, op, rep, bufs, &mut views).await?;
                in_windows.add(&grown);
                reps.push(row);
            }
            let verified = if op == CkptOp::Restore {
                let what = format!("{key} ({method:?})");
                let name = format!("{}-{method:?}-verified", spec.name);
                Some(check_restore(s, &name, &what, self.state, views.as_deref().unwrap_or(&[]), &bufs.restored, mismatch).await?)
            } else {
                None
            };
            rows.push(summarize(spec, method, op, plan, s.me.world, reps, verified));
        }
        Ok(rows)
    }
}

/// A missing bucket: ckpt writes into an existing one (the default local directory excepted).
/// Delete every object whose key starts with `prefix`, best effort, within
/// `budget` in all: clean-up after a failed save gets one short budget (the
/// `--read-timeout`), never a new round of attempts per request, so a save
/// against a hung server fails within attempts x `--read-timeout` of its
/// first hung request plus this.
async fn delete_prefix(store: &dyn ObjectStore, prefix: &str, budget: std::time::Duration) {
    let _ = tokio::time::timeout(budget, async {
        if let Ok(objs) = store.list(prefix).await {
            for o in objs {
                let _ = store.delete(&o.key).await;
            }
        }
    })
    .await;
}

/// What to say when a step after the commit of `key` at `generation` failed
/// (`what`, its error): that the checkpoint is complete and restorable first.
fn committed_then(rank: usize, key: &str, generation: &str, what: &str) -> String {
    format!("rank {rank}: checkpoint {key} at generation {generation} is complete and restorable (its manifest committed); after it, {what}")
}

/// Delete the chunks of `key` of every generation but `current` (all of them for `None`).
///
/// Errors: the listing's (a listing that fails or never ends is the
/// store's fault and ends the run); deletes are best effort.
async fn collect_old_generations(store: &dyn ObjectStore, key: &str, current: Option<&str>) -> Result<()> {
    let objs = store.list(&format!("{key}.")).await.map_err(|e| Error::Runtime(format!("listing the older generations of {key} to remove them: {e}")))?;
    for o in objs {
        if fmt::chunk_generation(key, &o.key).is_some_and(|g| current.is_none() || g != current) {
            let _ = store.delete(&o.key).await;
        }
    }
    Ok(())
}

/// Remove checkpoint `key` of `method`: a flat one's chunks are listed
/// first, then the manifest goes, then the chunks, so a failure at any step
/// leaves either the whole checkpoint (still restorable) or chunks no
/// manifest names, never a manifest whose chunks are gone.
///
/// Errors: the listing's, or the manifest's delete (nothing removed then);
/// chunk deletes are best effort.
async fn delete_checkpoint(store: &dyn ObjectStore, serial: &dyn ObjectStore, key: &str, method: CkptMethod) -> Result<()> {
    match method {
        CkptMethod::Flat | CkptMethod::Async => {
            let objs = store.list(&format!("{key}.")).await.map_err(|e| {
                Error::Runtime(format!("listing checkpoint {key} to remove it: {e}; nothing was removed, the checkpoint stays complete and restorable"))
            })?;
            store.delete(&Manifest::key(key)).await.map_err(|e| {
                Error::Runtime(format!("removing the manifest of checkpoint {key}: {e}; nothing was removed, the checkpoint stays complete and restorable"))
            })?;
            for o in objs.iter().filter(|o| fmt::chunk_generation(key, &o.key).is_some()) {
                let _ = store.delete(&o.key).await;
            }
            Ok(())
        }
        CkptMethod::SerializeThenPut => {
            let _ = serial.delete(&serial_key(key)).await;
            Ok(())
        }
    }
}
