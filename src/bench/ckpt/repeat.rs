//! One timed repeat of one checkpoint operation (save or restore, of one
//! method): the cache made cold where asked before the window opens, the
//! operation inside it, its figures (stall, CPU, O_DIRECT bytes) and the
//! witness's finding after it, and the older generations removed once a
//! save has committed.

use super::cache;
use super::ops::{Ctx, NextStep, State, StateSpec, restore_flat, restore_serialized, save_flat, save_serialized};
use super::train_load::{SECONDS_AROUND, STEPS_AROUND, TrainLoad};
use super::train_view::TrainFigures;
use super::{Buffers, CkptMethod, CkptOp, CkptPlan, RepeatRow, collect_old_generations, delete_prefix};
use crate::bench::session::{Direction, Session};
use crate::error::{Error, Result};
use crate::format::ckpt::{self as fmt, TensorEntry};
use crate::sampler::Sampler;
use crate::store::StoreStats;

/// What every repeat of one state's operations shares.
pub(super) struct Repeats<'a> {
    pub(super) s: &'a Session,
    pub(super) plan: &'a CkptPlan,
    pub(super) cache_plan: &'a cache::Plan,
    /// This rank's checkpoint key.
    pub(super) key: &'a str,
    pub(super) spec: &'a StateSpec,
    pub(super) state: &'a State,
    /// Saves, and restores that read through the page cache.
    pub(super) ctx: &'a Ctx,
    /// Cold restores that read with O_DIRECT (`cache::prepare` chooses).
    pub(super) direct_ctx: Option<&'a Ctx>,
    /// What failed after a save committed ([`super::after_commit`]), for the record.
    pub(super) after_commit: &'a std::sync::Mutex<Vec<String>>,
    /// The training load beside saves, and its seconds per step with no save.
    pub(super) load: Option<(&'a TrainLoad, f64)>,
}

/// Before a save with a training load: the load's counts start afresh, it
/// runs, and the save begins at a step boundary after `STEPS_AROUND` steps.
///
/// Errors: the load's (a GPU error, steps that never come).
async fn steps_before_save(l: &TrainLoad) -> Result<()> {
    l.take_steps();
    l.take_durable();
    let since = l.now();
    l.run();
    l.wait_steps(since, STEPS_AROUND, SECONDS_AROUND).await
}

impl Repeats<'_> {
    /// Repeat `rep` of `method`'s `op`, timed in one window; a flat restore
    /// leaves the tensor views it rebuilt in `views`.
    ///
    /// Returns the repeat's row and the store counters' growth over the window.
    ///
    /// Errors: the operation's (a failed save's uncommitted chunks are
    /// deleted first), the cache's, the window's.
    pub(super) async fn one(
        &self,
        method: CkptMethod,
        op: CkptOp,
        rep: u32,
        bufs: &mut Buffers,
        views: &mut Option<Vec<TensorEntry>>,
    ) -> Result<(RepeatRow, StoreStats)> {
        let (s, key, store) = (self.s, self.key, &self.ctx.store);
        let mut cache_figures = None;
        let mut rctx = self.ctx;
        if op == CkptOp::Restore {
            bufs.restored.zero().map_err(Error::Runtime)?;
            // Cold: evict (or choose O_DIRECT) before the window opens.
            let (f, read_direct) = cache::prepare(self.cache_plan, store.as_ref(), key).await?;
            if read_direct {
                rctx = self.direct_ctx.expect("opened for cold restores on the local backend");
            }
            cache_figures = Some(f);
        }
        let direct_before = cache::direct_counts(&[rctx.store.as_ref(), rctx.serial.as_ref()]);
        // A save with a training load: steps run first, and the save begins at a step boundary.
        let load = self.load.filter(|_| op == CkptOp::Save);
        if let Some((l, _)) = load {
            steps_before_save(l).await?;
        }
        let window = s.open_window().await?;
        let paused = match load {
            Some((l, _)) => l.pause().await?,
            None => 0.0,
        };
        let sampler = Sampler::start();
        // One generation per save: methods of one run saving to the same
        // key never write the chunk names the live manifest points at.
        let generation = format!("{}-{}-{rep}", s.started.format("%Y%m%dT%H%M%S%.6f"), format!("{method:?}").to_ascii_lowercase());
        let r = match (method, op) {
            (CkptMethod::Flat | CkptMethod::Async, CkptOp::Save) => {
                // Async: training goes on after the snapshot, and its next step overwrites the state.
                let (buf, step) = match method {
                    CkptMethod::Async => (bufs.snapshot.as_mut().expect("allocated for async saves"), NextStep::AfterSnapshot),
                    _ => (&mut bufs.flat, NextStep::None),
                };
                let r = save_flat(self.ctx, key, self.state, buf, &generation, step, load.map(|l| l.0)).await;
                if r.is_err() {
                    // Never committed: its chunks are garbage (the previous generation stays).
                    let chunks = format!("{}.part", fmt::generation_prefix(key, &generation));
                    delete_prefix(store.as_ref(), &chunks, self.plan.run.store.read_timeout).await;
                }
                r
            }
            (CkptMethod::Flat | CkptMethod::Async, CkptOp::Restore) => restore_flat(rctx, key, &mut bufs.restored).await.map(|(f, v)| {
                *views = Some(v);
                f
            }),
            (CkptMethod::SerializeThenPut, CkptOp::Save) => save_serialized(self.ctx, key, self.spec, self.state).await,
            (CkptMethod::SerializeThenPut, CkptOp::Restore) => restore_serialized(rctx, key, self.state, &mut bufs.restored).await.inspect(|_| {
                *views = Some(self.state.entries.clone());
            }),
        };
        let smp = sampler.finish();
        let mut fig = r?;
        if let Some((l, reference)) = load {
            fig.train = Some(train_after(l, method, paused, reference).await?);
        }
        fig.rank = s.me.rank;
        fig.host = s.host.clone();
        // Training waits for the whole operation, except for an async save's persistence.
        fig.stall_s = if (method, op) == (CkptMethod::Async, CkptOp::Save) { fig.flatten_s } else { fig.wall_s };
        fig.client_cpu_cores = smp.client_cpu_cores;
        fig.host_cpu_cores = smp.host_cpu_cores;
        if let Some(c) = cache_figures.as_mut().filter(|c| c.method == cache::Method::Direct.label()) {
            let (d, f) = cache::direct_counts(&[rctx.store.as_ref(), rctx.serial.as_ref()]);
            (c.direct_read_bytes, c.direct_fallback_bytes) = (Some(d.saturating_sub(direct_before.0)), Some(f.saturating_sub(direct_before.1)));
        }
        fig.restore_cache = cache_figures;
        let dir = if op == CkptOp::Save { Direction::Write } else { Direction::Read };
        let committed = method != CkptMethod::SerializeThenPut && op == CkptOp::Save;
        let closed = match s.close_window(window, dir, fig.bytes, fig).await {
            Ok(c) => c,
            Err(e) if committed => {
                return Err(Error::Runtime(super::committed_then(s.me.rank, key, &generation, &format!("closing the timed window failed: {e}"))));
            }
            Err(e) => return Err(e),
        };
        if committed && let Err(e) = collect_old_generations(store.as_ref(), key, Some(&generation)).await {
            let note = super::committed_then(s.me.rank, key, &generation, &format!("removing its older generations failed: {e}"));
            eprintln!("warning: {note}");
            self.after_commit.lock().unwrap_or_else(|p| p.into_inner()).push(note);
        }
        Ok((RepeatRow::of(rep, closed.ranks, closed.witness), closed.stats))
    }
}

/// The training view of a save that has just become durable: a sync save's
/// training resumes now (an async one resumed at its snapshot), the loop
/// steps on for the steps after, then pauses and its steps are split.
///
/// Errors: the loop's.
async fn train_after(l: &TrainLoad, method: CkptMethod, paused: f64, reference: f64) -> Result<TrainFigures> {
    // A flat or async save marks when its manifest committed; serialize-then-put is durable as it returns.
    let durable = l.take_durable().unwrap_or_else(|| l.now());
    if method != CkptMethod::Async {
        l.run();
    }
    l.wait_steps(durable, STEPS_AROUND, SECONDS_AROUND).await?;
    l.pause().await?;
    Ok(TrainFigures::of(&l.take_steps(), paused, l.resumed_at(), durable, reference))
}
