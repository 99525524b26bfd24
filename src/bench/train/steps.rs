//! The training loop (warm-up, timed steps, one witnessed window per repeat), the step timings, and the ranks' figures aggregated into the record and table.

use super::plan::TrainPlan;
use super::record::{LoopFigures, RankRepeat, TrainDataset, TrainParams, TrainRepeat, TrainResults, TrainSummary};
use super::{Batch, Pixels};
use crate::bench::session::{Outcome, Session};
use crate::error::{Error, Result};
use crate::flag::{FETCH_WORKERS, LOADER_ONLY, PREFETCH_BATCHES, STEPS, WARMUP};
use crate::mem::Buffer;
use crate::record::WindowId;
use crate::stats::Spread;
use crate::witness::WitnessReport;
use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::time::Instant;
use tokio::sync::mpsc;

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

/// The per-step work after a batch arrives: H2D, augmentation, model.
pub trait Stepper {
    /// Do one step on `batch`; returns the phase times and the loss (if a model ran).
    fn step(&mut self, batch: &Batch) -> Result<(StepTimes, Option<f64>)>;
    /// What the augmentation and model are (for the record).
    fn describe(&self) -> serde_json::Value;
}

/// Without a model: jpeg batches are copied to the GPU (when there is one);
/// raw batches are already there; nothing else runs.
#[derive(Debug)]
pub struct LoaderOnly {
    pub(crate) device_batch: Option<Buffer>,
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
        json!({"model": null, "augment": if cfg!(feature = "train") { format!("none ({LOADER_ONLY})") } else { "none: built without the `train` feature (crop/flip/normalise on the GPU need libtorch)".to_string() }})
    }
}

/// The training loop: `warmup` untimed then `steps` timed steps per repeat;
/// `at_window(rep, start)` is called around each repeat's timed steps (barriers,
/// witness, sampler), returning what the caller measured there.
pub(crate) fn train_loop<W>(
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
                step_s_median: crate::stats::percentile(&step_s, 0.5).unwrap_or(0.0),
                step_s_p99: crate::stats::percentile(&step_s, 0.99).unwrap_or(0.0),
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
pub(crate) struct WindowFigures {
    pub(crate) read_bytes: u64,
    pub(crate) gets: u64,
    pub(crate) fetch_thread_s: f64,
    pub(crate) decode_thread_s: f64,
    pub(crate) client_cpu_cores: f64,
    pub(crate) host_cpu_cores: f64,
    pub(crate) witness: Option<WitnessReport>,
}

/// One timed repeat on this rank: its loop figures, its window's figures and its losses.
pub(crate) type RepeatOutput = (LoopFigures, WindowFigures, Vec<f64>);

/// Whether the timed steps measured the store, per repeat (`reps`: the
/// record's repeats). A window
/// whose images all came from what warm-up and the loader's read-ahead had
/// read before it measures memory: when a repeat read no byte, the run fails
/// and writes no record (its images/s would be meaningless); when it read less than half
/// the bytes its images hold (`bytes_per_image`, the set's data bytes per
/// image), a warning says images/s overstates the store's rate; when it
/// counted over twice those bytes (reads begun before the window), a warning
/// says read GB/s overstates it.
///
/// With several ranks each rank's window is judged on its own (each
/// repeat's `ranks`).
///
/// Returns the failure, if any, and the warnings.
pub(crate) fn window_check(reps: &[TrainRepeat], steps: u32, warmup: u32, bytes_per_image: f64) -> (Option<Error>, Vec<String>) {
    let fix = format!(
        "raise {STEPS} well past what {WARMUP} and the loader's read-ahead ({FETCH_WORKERS} shards, {PREFETCH_BATCHES} batches) consume, or ingest more images"
    );
    let mut warnings = Vec::new();
    // Rank by rank where there are several: one rank's window that read
    // nothing is not made good by another's reads.
    let units = reps.iter().flat_map(|r| {
        if r.ranks.len() > 1 {
            r.ranks.iter().map(|k| (format!("repeat {}, rank {}", r.repeat, k.rank), k.read_bytes, k.figures.images)).collect::<Vec<_>>()
        } else {
            vec![(format!("repeat {}", r.repeat), r.read_bytes, r.images)]
        }
    });
    for (what, read, images) in units {
        let held = images as f64 * bytes_per_image;
        if read == 0 {
            let e = Error::Usage(format!(
                "{what}: the {steps} timed steps read 0 bytes from the store: every image they consumed was read ahead during the {warmup} warm-up steps or before, so images/s measures memory, not storage: {fix}"
            ));
            return (Some(e), warnings);
        }
        if (read as f64) > held * 2.0 {
            warnings.push(format!(
                "{what}: the timed steps counted {read} bytes, {:.1}x the {held:.0} their {images} images hold: reads begun before the window (whole shards) ended inside it, so read GB/s overstates the window: {fix}",
                read as f64 / held
            ));
        } else if (read as f64) < held / 2.0 {
            warnings.push(format!(
                "{what}: the timed steps read {read} bytes, {:.0}% of the {held:.0} their {images} images hold: the rest was read ahead before the window, so images/s overstates the store's rate: {fix}",
                100.0 * read as f64 / held
            ));
        }
    }
    (None, warnings)
}

/// What the table under a train run shows: the repeats' spreads, the
/// loss's first and last ten steps, the worst verdict, the ranks.
#[derive(Debug, Clone, Default)]
pub(crate) struct TrainTable {
    summary: TrainSummary,
    worst: Option<crate::witness::Verdict>,
    world: usize,
}

/// One repeat over every rank (`rows`: each rank's figures of it): the
/// slowest rank's wall, all ranks' images over it, the phases' means over
/// ranks, rank 0's losses.
fn repeat_of(repeat: u32, rows: &[&RankRepeat], witness: Option<&WitnessReport>) -> TrainRepeat {
    let wall = rows.iter().map(|x| x.figures.wall_s).fold(0.0, f64::max);
    let images: u64 = rows.iter().map(|x| x.figures.images).sum();
    let mean = |f: fn(&RankRepeat) -> f64| rows.iter().map(|x| f(x)).sum::<f64>() / rows.len().max(1) as f64;
    let read_bytes: u64 = rows.iter().map(|x| x.read_bytes).sum();
    TrainRepeat {
        repeat,
        wall_s: wall,
        images,
        images_per_s: images as f64 / wall,
        images_per_s_per_rank: rows.iter().map(|x| x.figures.images_per_s).collect(),
        step_s_median: mean(|x| x.figures.step_s_median),
        fetch_wait_s: mean(|x| x.figures.fetch_wait_s),
        h2d_s: mean(|x| x.figures.h2d_s),
        augment_s: mean(|x| x.figures.augment_s),
        compute_s: mean(|x| x.figures.compute_s),
        read_bytes,
        read_gbps: read_bytes as f64 / wall / 1e9,
        gets: rows.iter().map(|x| x.gets).sum(),
        decode_thread_s: rows.iter().map(|x| x.decode_thread_s).sum(),
        client_cpu_cores: rows.iter().map(|x| x.client_cpu_cores).sum(),
        host_cpu_cores: crate::stats::host_cores(rows.iter().map(|x| (x.host.as_str(), x.host_cpu_cores))),
        loss_first: rows.first().and_then(|x| x.figures.loss_first),
        loss_last: rows.first().and_then(|x| x.figures.loss_last),
        ranks: rows.iter().map(|&x| x.clone()).collect(),
        witness: witness.cloned(),
    }
}

/// Medians and ranges over `reps`, and rank 0's mean loss over the first
/// and last ten steps of the run (`losses`: its losses per repeat).
fn summary_of(reps: &[TrainRepeat], losses: &[&Vec<f64>]) -> TrainSummary {
    let pick = |f: fn(&TrainRepeat) -> f64| Spread::of(reps.iter().map(f)).unwrap_or_default();
    let loss_first = losses.first().and_then(|l| (!l.is_empty()).then(|| l.iter().take(10).sum::<f64>() / l.len().min(10) as f64));
    let loss_last = losses.last().and_then(|l| (!l.is_empty()).then(|| l.iter().rev().take(10).sum::<f64>() / l.len().min(10) as f64));
    TrainSummary {
        wall_s: pick(|r| r.wall_s),
        images_per_s: pick(|r| r.images_per_s),
        step_s_median: pick(|r| r.step_s_median),
        fetch_wait_s: pick(|r| r.fetch_wait_s),
        h2d_s: pick(|r| r.h2d_s),
        augment_s: pick(|r| r.augment_s),
        compute_s: pick(|r| r.compute_s),
        client_cpu_cores: pick(|r| r.client_cpu_cores),
        host_cpu_cores: pick(|r| r.host_cpu_cores),
        read_gbps: pick(|r| r.read_gbps),
        loss_first,
        loss_last,
    }
}

/// The record's `params` of a run over `world` ranks.
fn params_of(plan: &TrainPlan, prefix: &str, world: usize) -> TrainParams {
    TrainParams {
        layout: plan.layout,
        prefix: prefix.to_string(),
        steps: plan.steps,
        warmup: plan.warmup,
        batch_size: plan.batch_size,
        amp: plan.amp,
        fetch_workers: plan.fetch_workers,
        decode_threads: plan.decode_threads,
        prefetch_batches: plan.prefetch_batches,
        jpeg_fetch: plan.jpeg_fetch,
        sample_gets: plan.sample_gets,
        crop: plan.crop,
        loader_only: plan.loader_only,
        lr: plan.lr,
        repeats: plan.repeats,
        seed: plan.seed,
        ranks: world,
        gradients: if world > 1 { "not all-reduced: independent replicas on disjoint shards" } else { "single rank" }.to_string(),
    }
}

/// Aggregate the ranks' figures per repeat into the record's parts (rank 0's
/// are the ones written) and the table's figures.
pub(crate) fn outcome(
    session: &Session,
    plan: &TrainPlan,
    prefix: &str,
    per_rank: &[Vec<RankRepeat>],
    witnesses: &[WitnessReport],
    losses: &[&Vec<f64>],
    dataset: TrainDataset,
) -> (Outcome<TrainParams, TrainResults>, TrainTable) {
    let world = per_rank.len();
    let reps: Vec<TrainRepeat> = (0..plan.repeats as usize)
        .map(|r| {
            let rows: Vec<&RankRepeat> = per_rank.iter().filter_map(|v| v.get(r)).collect();
            repeat_of(r as u32 + 1, &rows, witnesses.get(r))
        })
        .collect();
    let (failure, warnings) = window_check(&reps, plan.steps, plan.warmup, dataset.bytes_per_image);
    warnings.into_iter().for_each(|w| session.warn(w));
    let summary = summary_of(&reps, losses);
    let worst = witnesses.iter().map(|w| w.verdict).min();
    let table = TrainTable { summary: summary.clone(), worst, world };
    let results = TrainResults { summary, repeats: reps, dataset, losses_rank0: losses.iter().map(|&l| l.clone()).collect() };
    let windows: Vec<(WindowId, String, WitnessReport)> =
        witnesses.iter().zip(1..).map(|(w, r)| (WindowId::repeat(r), format!("repeat {r}"), w.clone())).collect();
    let mut outcome = Outcome::new(params_of(plan, prefix, world), results, windows);
    outcome.invalid = failure;
    (outcome, table)
}

/// Print the run's line and its table (one row).
pub(crate) fn print_table(session: &Session, plan: &TrainPlan, prefix: &str, table: &TrainTable) {
    let store = &session.store;
    let TrainTable { summary, worst, world } = table;
    let TrainSummary {
        wall_s: wall,
        images_per_s: ips,
        step_s_median: step,
        fetch_wait_s: wait,
        h2d_s: h2d,
        augment_s: aug,
        compute_s: comp,
        read_gbps: gbps,
        host_cpu_cores: host_cores,
        loss_first,
        loss_last,
        ..
    } = summary;
    let world = *world;
    let r = |s: &Spread, p: usize| if s.max > s.min { format!("{:.p$} ({:.p$}–{:.p$})", s.median, s.min, s.max) } else { format!("{:.p$}", s.median) };
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
        plan.layout.name().to_string(),
        store.capabilities().name.to_string(),
        world.to_string(),
        plan.steps.to_string(),
        r(wall, 2),
        r(ips, 0),
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
        worst.map_or("-".into(), |w| w.as_str().to_string()),
    ]);
    println!(
        "train{} '{prefix}' ({} layout) from {} ({}), batch {} x {} rank(s), {} timed + {} warm-up steps, {} repeat(s)",
        if plan.loader_only { format!(" {LOADER_ONLY}") } else { String::new() },
        plan.layout.name(),
        store.capabilities().name,
        store.location(),
        plan.batch_size,
        world,
        plan.steps,
        plan.warmup,
        plan.repeats
    );
    println!("{t}");
}
