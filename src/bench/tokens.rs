//! `s3rdma tokens`: tokenized int32 loader throughput (the seeds' B7: one
//! loader process, 6.75 B tokens/s over RDMA at 0.51 cores, 785 M tokens/s over
//! HTTP at 2.69 cores), and how many GPUs that rate could feed.
//!
//! Shards are read in long contiguous runs (`--run-bytes`, whole sequences,
//! ranged GETs of `--range-size` at most) into device memory by default, each of
//! `--fetch-workers` workers with its own buffer: a worker reads a run, hands it
//! to the consumer and waits until the consumer has taken every batch
//! (`--batch-seqs` sequences) out of it, so at most `--fetch-workers` runs are
//! in flight or waiting. The consumer optionally models a training step per
//! batch (`--compute`); the time it waits for the next run is the fetch wait.
//! The first `--warmup-shards` shards are read once, untimed.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use serde::{Deserialize, Serialize};

use super::driver::Bench;
use super::session::{Direction, Outcome, Session, SessionSpec};
use crate::bench::session::RunPlan;
use crate::error::{Error, Result};
use crate::flag::{FETCH_WORKERS, GPU_TFLOPS, MFU, PREFIX, RUN_BYTES, WARMUP_SHARDS};
use crate::format::shards::{self, Listed, TokenShard};
use crate::mem::Buffer;
use crate::record::WindowId;
use crate::sampler::{Sampler, SamplerReport};
use crate::stats::Spread;
use crate::store::ObjectStore;
use crate::witness::WitnessReport;

/// A model whose token appetite `tokens` compares with: parameters `params`
/// (nominal), `6 x params` training FLOPs per token (Kaplan et al. 2020,
/// "Scaling Laws for Neural Language Models", forward + backward).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Model {
    /// Model name (as in the table).
    pub name: &'static str,
    /// Parameter count (nominal).
    pub params: f64,
}

/// The models in the "GPUs it could feed" columns (nominal parameter counts).
pub const MODELS: [Model; 3] =
    [Model { name: "llama-3-8b", params: 8.0e9 }, Model { name: "llama-3-70b", params: 70.0e9 }, Model { name: "llama-3-405b", params: 405.0e9 }];

/// Tokens per second one GPU consumes training `model`:
/// `mfu x peak_tflops x 1e12 / (6 x params)`.
///
/// With the defaults (H200 dense bf16 peak 989 TFLOPS from NVIDIA's H200
/// datasheet, MFU 0.45) an 8B model takes 9,272 tokens/s per GPU (37 KB/s of
/// int32 ids; 0.30 MB/s per 8 GPUs, the seeds' "~0.3 MB/s per 8 GPUs"), and the
/// seeds' 6.75 B tokens/s feeds 728,010 GPUs, within 0.03 % of their 727,856.
pub fn gpu_tokens_per_s(model: &Model, peak_tflops: f64, mfu: f64) -> f64 {
    mfu * peak_tflops * 1e12 / (6.0 * model.params)
}

/// One contiguous run: `sequences` whole sequences of `key` at `range`.
#[derive(Debug, Clone)]
struct Run {
    key: String,
    range: std::ops::Range<u64>,
    sequences: u64,
}

fn runs_of(shards: &[Listed<TokenShard>], run_bytes: u64) -> Vec<Run> {
    let mut out = Vec::new();
    for s in shards {
        let seq_bytes = s.meta.seq_len * 4;
        let per = (run_bytes / seq_bytes).max(1);
        let mut seq = 0;
        while seq < s.meta.sequences {
            let n = per.min(s.meta.sequences - seq);
            out.push(Run { key: s.data_key.clone(), range: seq * seq_bytes..(seq + n) * seq_bytes, sequences: n });
            seq += n;
        }
    }
    out
}

/// Figures of one pass.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PassFigures {
    /// Bytes read.
    pub bytes: u64,
    /// Tokens read (sequences x seq_len).
    pub tokens: u64,
    /// Runs (long ranged reads) completed.
    pub runs: u64,
    /// Batches handed to the consumer.
    pub batches: u64,
    /// Wall seconds of the timed work.
    pub wall_s: f64,
    /// Seconds the consumer waited for a run to arrive.
    pub fetch_wait_s: f64,
    /// Per batch: wait for its data + the simulated compute as it ran (measured), milliseconds.
    pub step_ms_median: f64,
    /// Per batch: 99th percentile of wait + the simulated compute as it ran, milliseconds.
    pub step_ms_p99: f64,
}

/// One timed pass with its sampler and witness.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TokensRepeat {
    /// 1-based repeat number.
    pub repeat: u32,
    #[serde(flatten)]
    /// The pass's raw figures.
    pub figures: PassFigures,
    /// Tokens per second (int32 ids) over the timed pass.
    pub tokens_per_s: f64,
    /// Throughput, GB/s (bytes / wall / 1e9).
    pub throughput_gbps: f64,
    /// Client CPU in cores: CPU-seconds of this process (getrusage) / wall seconds.
    pub client_cpu_cores: f64,
    /// Whole-host CPU in cores: busy fraction x logical CPUs (/proc/stat via sysinfo).
    pub host_cpu_cores: f64,
    /// Everything the sampler measured over the window (CPU, NIC bytes).
    pub sampler: SamplerReport,
    /// This window's witness report (docs/witness.md).
    pub witness: WitnessReport,
}

/// Read `runs` once through `bufs` (one per worker); see the module doc.
async fn pass(
    store: &Arc<dyn ObjectStore>,
    runs: &Arc<Vec<Run>>,
    bufs: &mut Vec<Buffer>,
    range_bytes: u64,
    batch_seqs: u64,
    compute: Duration,
) -> Result<PassFigures> {
    let next = Arc::new(AtomicUsize::new(0));
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(u64, u64, tokio::sync::oneshot::Sender<()>)>(bufs.len());
    let t0 = Instant::now();
    let workers: Vec<_> = bufs
        .drain(..)
        .map(|mut buf| {
            let (store, runs, next, tx) = (store.clone(), runs.clone(), next.clone(), tx.clone());
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(run) = runs.get(i) else { break };
                    let got = match super::read_range(store.as_ref(), &run.key, run.range.clone(), &mut buf, range_bytes, None).await {
                        Ok((b, _)) => b,
                        Err(e) => return (buf, Err(e)),
                    };
                    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
                    if tx.send((got, run.sequences, done_tx)).await.is_err() {
                        break;
                    }
                    // The consumer owns this buffer's bytes until it has taken every batch.
                    let _ = done_rx.await;
                }
                (buf, Ok(()))
            })
        })
        .collect();
    drop(tx);
    let (mut bytes, mut seqs, mut runs_done, mut batches) = (0u64, 0u64, 0u64, 0u64);
    let mut wait = Duration::ZERO;
    let mut steps = Vec::new();
    loop {
        let tw = Instant::now();
        let Some((b, n, done)) = rx.recv().await else { break };
        let waited = tw.elapsed();
        wait += waited;
        bytes += b;
        seqs += n;
        runs_done += 1;
        let nb = n.div_ceil(batch_seqs);
        // Each step is measured, not assumed: the timer wakes late (tokio's
        // wheel ticks in milliseconds), so steps end on deadlines spaced
        // `compute` apart, a late wake-up shortening the next step as a GPU's
        // queued work would; the steps and the waits then add up to the wall.
        let mut deadline = tokio::time::Instant::now();
        for k in 0..nb {
            let ts = Instant::now();
            if !compute.is_zero() {
                deadline += compute;
                tokio::time::sleep_until(deadline).await;
            }
            let took = ts.elapsed();
            steps.push(if k == 0 { waited + took } else { took }.as_secs_f64() * 1e3);
        }
        batches += nb;
        let _ = done.send(());
    }
    let wall_s = t0.elapsed().as_secs_f64();
    let mut first_err = None;
    for w in workers {
        let (buf, r) = w.await.map_err(|e| Error::Runtime(format!("fetch worker failed: {e}")))?;
        bufs.push(buf);
        if let Err(e) = r {
            first_err.get_or_insert(e);
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    steps.sort_by(f64::total_cmp);
    let seq_len = runs.first().map_or(0, |r| (r.range.end - r.range.start) / r.sequences / 4);
    Ok(PassFigures {
        bytes,
        tokens: seqs * seq_len,
        runs: runs_done,
        batches,
        wall_s,
        fetch_wait_s: wait.as_secs_f64(),
        step_ms_median: crate::stats::percentile(&steps, 0.5).unwrap_or(0.0),
        step_ms_p99: crate::stats::percentile(&steps, 0.99).unwrap_or(0.0),
    })
}

/// Everything `s3rdma tokens` runs with (the CLI's `cli/plan.rs` makes it of the flags).
#[derive(Debug, Clone)]
pub struct TokensPlan {
    /// Store, witness, memory, output.
    pub run: RunPlan,
    /// Key prefix of the token shards (`ingest tokens` wrote them).
    pub prefix: String,
    /// Runs in flight (one buffer each).
    pub fetch_workers: u32,
    /// Bytes per ranged read of a shard (one run).
    pub run_bytes: u64,
    /// Sequences per step.
    pub batch_seqs: u32,
    /// Simulated compute per step (zero: the loader alone).
    pub compute: std::time::Duration,
    /// Untimed shards first.
    pub warmup_shards: u32,
    /// Timed passes.
    pub repeats: u32,
    /// The GPU's dense bf16 peak in TFLOP/s, for the tokens/s a GPU consumes.
    pub gpu_tflops: f64,
    /// Model FLOPs utilization, in (0, 1].
    pub mfu: f64,
}

/// `s3rdma tokens` as a [`Bench`]: the plan, then what [`Bench::prepare`]
/// found (the shards, their runs, the buffers, the untimed warm-up).
#[derive(Debug)]
pub struct Tokens {
    plan: TokensPlan,
    ready: Option<Prepared>,
    /// The worst verdict over the repeats (the table's witness column).
    worst: Option<crate::witness::Verdict>,
}

/// What the timed passes read, into what.
#[derive(Debug)]
struct Prepared {
    listed: Vec<Listed<TokenShard>>,
    warm_runs: Arc<Vec<Run>>,
    timed_runs: Arc<Vec<Run>>,
    /// The largest run, bytes.
    run_cap: u64,
    bufs: Vec<Buffer>,
}

impl Tokens {
    /// The bench of `plan`.
    pub fn new(plan: TokensPlan) -> Self {
        Tokens { plan, ready: None, worst: None }
    }
}

impl Bench for Tokens {
    type Params = TokensParams;
    type Results = TokensResults;

    async fn setup(&mut self) -> Result<Option<SessionSpec>> {
        let plan = &self.plan;
        if !(plan.mfu > 0.0 && plan.mfu <= 1.0 && plan.gpu_tflops > 0.0 && plan.gpu_tflops.is_finite()) {
            return Err(Error::Usage(format!("{MFU} {} must be in (0, 1] and {GPU_TFLOPS} {} above 0", plan.mfu, plan.gpu_tflops)));
        }
        Ok(Some(SessionSpec { rdma_threads: plan.fetch_workers, no_bucket: shards::no_dataset_bucket, ..plan.run.spec("tokens") }))
    }

    async fn prepare(&mut self, s: &mut Session) -> Result<()> {
        let plan = &self.plan;
        let store = s.store.clone();
        let set = crate::catalog::shards::list::<crate::format::shards::TokenShard>(store.as_ref(), &plan.prefix).await?;
        set.warnings.iter().for_each(|w| s.warn(w.clone()));
        let listed = set.shards;
        let seq_len = listed[0].meta.seq_len;
        let (vocab, tokenizer) = (listed[0].meta.vocab_size, &listed[0].meta.tokenizer);
        if let Some(s) = listed.iter().find(|s| s.meta.seq_len != seq_len || s.meta.vocab_size != vocab || &s.meta.tokenizer != tokenizer) {
            return Err(Error::Runtime(format!(
                "'{}' holds sequences of {} tokens from '{}' (vocabulary {}), the first shard {seq_len} from '{tokenizer}' ({vocab}): one set per {PREFIX}: re-run `s3rdma ingest tokens` there",
                s.sidecar_key, s.meta.seq_len, s.meta.tokenizer, s.meta.vocab_size
            )));
        }
        let warm = plan.warmup_shards as usize;
        if listed.len() <= warm {
            return Err(Error::Usage(format!(
                "{} token shard(s) under '{}' and {WARMUP_SHARDS} {warm}: nothing left to time; lower {WARMUP_SHARDS} or ingest more shards",
                listed.len(),
                plan.prefix
            )));
        }
        let warm_runs = Arc::new(runs_of(&listed[..warm], plan.run_bytes));
        let timed_runs = Arc::new(runs_of(&listed[warm..], plan.run_bytes));
        let run_cap = timed_runs.iter().chain(warm_runs.iter()).map(|r| r.range.end - r.range.start).max().expect("shards hold sequences");
        // No more buffers than runs to fill them.
        let workers = (plan.fetch_workers as usize).min(timed_runs.len().max(warm_runs.len())) as u32;
        let dest = s.mem.dest;
        if dest != crate::mem::Dest::Device {
            crate::mem::check_host_memory(
                &format!("{workers} run buffers of {run_cap} bytes"),
                workers as u64 * run_cap,
                &format!("lower {FETCH_WORKERS} or {RUN_BYTES}"),
            )?;
        }
        let bufs: Vec<Buffer> = (0..workers).map(|_| s.buffer(run_cap as usize)).collect::<std::result::Result<_, _>>().map_err(|e| {
            Error::Runtime(format!(
                "cannot allocate {} x {run_cap} bytes of {} memory: {e}: lower {FETCH_WORKERS} or {RUN_BYTES}",
                plan.fetch_workers,
                dest.name()
            ))
        })?;
        self.ready = Some(Prepared { listed, warm_runs, timed_runs, run_cap, bufs });
        Ok(())
    }

    async fn measure(&mut self, s: &Arc<Session>) -> Result<Outcome<TokensParams, TokensResults>> {
        let plan = &self.plan;
        let Prepared { listed, warm_runs, timed_runs, bufs, .. } = self.ready.as_mut().expect("prepare ran");
        let store = s.store.clone();
        let warm = plan.warmup_shards as usize;
        let batch_seqs = plan.batch_seqs as u64;
        let warmup = if warm > 0 { Some(pass(&store, warm_runs, bufs, plan.run.store.range_bytes, batch_seqs, Duration::ZERO).await?) } else { None };
        let mut repeats = Vec::new();
        let mut stats = crate::store::StoreStats::default();
        for rep in 1..=plan.repeats {
            let window = s.open_window().await?;
            let sampler = Sampler::start();
            let f = pass(&store, timed_runs, bufs, plan.run.store.range_bytes, batch_seqs, plan.compute).await?;
            let smp = sampler.finish();
            let closed = s.close_window(window, Direction::Read, f.bytes, ()).await?;
            stats.add(&closed.stats);
            repeats.push(TokensRepeat {
                repeat: rep,
                tokens_per_s: f.tokens as f64 / f.wall_s,
                throughput_gbps: f.bytes as f64 / f.wall_s / 1e9,
                client_cpu_cores: smp.client_cpu_cores,
                host_cpu_cores: smp.host_cpu_cores,
                figures: f,
                sampler: smp,
                witness: closed.witness.expect("a single-process bench is rank 0"),
            });
        }
        self.worst = repeats.iter().map(|r| r.witness.verdict).min();
        let windows: Vec<(WindowId, String, WitnessReport)> =
            repeats.iter().map(|r| (WindowId::repeat(r.repeat), format!("repeat {}", r.repeat), r.witness.clone())).collect();
        let params = TokensParams {
            prefix: plan.prefix.clone(),
            fetch_workers: plan.fetch_workers,
            run_bytes: plan.run_bytes,
            batch_seqs: plan.batch_seqs,
            compute_s: plan.compute.as_secs_f64(),
            warmup_shards: plan.warmup_shards,
            repeats: plan.repeats,
            range_bytes: plan.run.store.range_bytes,
            gpu_tflops: plan.gpu_tflops,
            mfu: plan.mfu,
            feed_formula: FEED_FORMULA.into(),
        };
        let timed_bytes: u64 = timed_runs.iter().map(|r| r.range.end - r.range.start).sum();
        let results = summarize(plan, listed, timed_bytes, warmup, repeats);
        let mut outcome = Outcome::new(params, results, windows);
        outcome.stats = stats;
        Ok(outcome)
    }

    fn print(&self, s: &Session, results: &TokensResults) {
        let (backend, location) = (s.store.capabilities().name, s.store.location());
        let run_cap = self.ready.as_ref().map_or(0, |r| r.run_cap);
        print_table(results, &self.plan, (backend, &location), s.mem.dest, self.worst.unwrap_or(crate::witness::Verdict::Unverified), run_cap)
    }
}

/// The record's results: the repeats' spreads and the GPUs the median rate could feed.
fn summarize(plan: &TokensPlan, listed: &[Listed<TokenShard>], timed_bytes: u64, warmup: Option<PassFigures>, repeats: Vec<TokensRepeat>) -> TokensResults {
    let spread = |f: fn(&TokensRepeat) -> f64| Spread::of(repeats.iter().map(f)).expect("repeats >= 1");
    let tps = spread(|r| r.tokens_per_s);
    let summary = TokensSummary {
        tokens_per_s: tps,
        throughput_gbps: spread(|r| r.throughput_gbps),
        client_cpu_cores: spread(|r| r.client_cpu_cores),
        fetch_wait_s: spread(|r| r.figures.fetch_wait_s),
        step_ms_median: spread(|r| r.figures.step_ms_median),
    };
    let feeds: Vec<Feed> = MODELS
        .iter()
        .map(|m| {
            let per_gpu = gpu_tokens_per_s(m, plan.gpu_tflops, plan.mfu);
            Feed {
                model: m.name.to_string(),
                params: m.params,
                gpu_tokens_per_s: per_gpu,
                gpu_bytes_per_s: per_gpu * 4.0,
                gpus_fed: (tps.median / per_gpu).floor(),
            }
        })
        .collect();
    let warm = plan.warmup_shards as usize;
    TokensResults {
        shards: listed.len(),
        timed_shards: listed.len() - warm,
        seq_len: listed[0].meta.seq_len,
        vocab_size: listed[0].meta.vocab_size,
        synthetic: listed[0].meta.synthetic,
        tokenizer: listed[0].meta.tokenizer.clone(),
        timed_bytes,
        warmup,
        summary,
        gpus_it_could_feed: feeds,
        repeats,
    }
}

/// The run's line, its table (one row: rates, CPU, fetch wait, GPUs fed per
/// model, witness) and the feed formula's line; `run_cap`: the largest run, bytes.
fn print_table(
    results: &TokensResults,
    plan: &TokensPlan,
    (backend, location): (&str, &str),
    dest: crate::mem::Dest,
    worst: crate::witness::Verdict,
    run_cap: u64,
) {
    let TokensSummary { tokens_per_s: tps, throughput_gbps: gbps, client_cpu_cores: cores, fetch_wait_s: wait, step_ms_median: step } = &results.summary;
    let range = |s: &Spread, f: fn(f64) -> String| if s.max > s.min { format!("{} ({}–{})", f(s.median), f(s.min), f(s.max)) } else { f(s.median) };
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    let mut header =
        vec!["backend".to_string(), "dest".into(), "tokens/s".into(), "GB/s".into(), "client cores".into(), "fetch wait s".into(), "step ms (median)".into()];
    header.extend(MODELS.iter().map(|m| format!("GPUs of {}", m.name)));
    header.push("witness".into());
    t.set_header(header);
    let mut row = vec![
        backend.to_string(),
        dest.name().to_string(),
        range(tps, human_rate),
        range(gbps, |v| format!("{v:.2}")),
        format!("{:.2}", cores.median),
        format!("{:.3}", wait.median),
        format!("{:.3}", step.median),
    ];
    row.extend(results.gpus_it_could_feed.iter().map(|f| format!("{}", f.gpus_fed as u64)));
    row.push(worst.as_str().to_string());
    t.add_row(row);
    println!(
        "tokens '{}' from {backend} ({location}): {} timed shard(s), {:.2} GB, seq_len {}, batches of {} sequences, {} fetch workers x {} runs",
        plan.prefix,
        results.timed_shards,
        results.timed_bytes as f64 / 1e9,
        results.seq_len,
        plan.batch_seqs,
        plan.fetch_workers,
        crate::units::size_approx(run_cap)
    );
    println!("{t}");
    println!(
        "GPUs it could feed: per GPU {:.0} tokens/s for {} at MFU {} of {} TFLOPS (6N FLOPs/token)",
        gpu_tokens_per_s(&MODELS[0], plan.gpu_tflops, plan.mfu),
        MODELS[0].name,
        plan.mfu,
        plan.gpu_tflops
    );
}

/// How many GPUs of one model a measured token rate could feed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Feed {
    /// Model name.
    pub model: String,
    /// Its parameter count.
    pub params: f64,
    /// Tokens/s one GPU consumes training it.
    pub gpu_tokens_per_s: f64,
    /// The same as int32 bytes/s.
    pub gpu_bytes_per_s: f64,
    /// floor(measured tokens/s / per-GPU tokens/s).
    pub gpus_fed: f64,
}

/// Medians and ranges over repeats.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TokensSummary {
    /// Tokens per second (int32 ids) over the timed pass.
    pub tokens_per_s: Spread,
    /// Throughput, GB/s (bytes / wall / 1e9).
    pub throughput_gbps: Spread,
    /// Client CPU in cores: CPU-seconds of this process (getrusage) / wall seconds.
    pub client_cpu_cores: Spread,
    /// Seconds the consumer waited for data.
    pub fetch_wait_s: Spread,
    /// Per batch: median of wait + simulated compute, milliseconds.
    pub step_ms_median: Spread,
}

/// How many GPUs a token rate feeds, as the record says it.
pub const FEED_FORMULA: &str = "gpu_tokens_per_s = mfu * gpu_tflops * 1e12 / (6 * params) (6N FLOPs per token: Kaplan et al. 2020)";

/// A `tokens` run's `params`: the plan as run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TokensParams {
    /// Key prefix of the token shards.
    pub prefix: String,
    /// Runs in flight at once, each into its own buffer.
    pub fetch_workers: u32,
    /// Bytes of one contiguous run (whole sequences).
    pub run_bytes: u64,
    /// Sequences per batch.
    pub batch_seqs: u32,
    /// Modelled compute per batch, seconds.
    pub compute_s: f64,
    /// Shards read once, untimed.
    pub warmup_shards: u32,
    /// Timed passes.
    pub repeats: u32,
    /// Largest ranged GET, bytes.
    #[serde(alias = "window_bytes")]
    pub range_bytes: u64,
    /// GPU peak the feed columns assume, TFLOP/s.
    pub gpu_tflops: f64,
    /// Model FLOPs utilisation the feed columns assume.
    pub mfu: f64,
    /// [`FEED_FORMULA`].
    pub feed_formula: String,
}

/// A `tokens` record as `s3rdma report` reads it from schema 3 on: the
/// writer's own types, so a field renamed here is renamed for the reader.
#[derive(Debug, Clone, Deserialize)]
pub struct TokensRecord {
    /// The plan as run.
    pub params: TokensParams,
    /// What it measured.
    pub results: TokensResults,
}

/// A `tokens` run's `results`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TokensResults {
    /// Token shards found under the prefix.
    pub shards: usize,
    /// Shards read in the timed passes (after the warm-up shards).
    pub timed_shards: usize,
    /// Tokens per sequence.
    pub seq_len: u64,
    /// Vocabulary size recorded with the shards.
    pub vocab_size: u64,
    /// True for uniform random ids (`ingest tokens --synthetic`).
    pub synthetic: bool,
    /// The tokenizer the ids came from, or "synthetic-uniform".
    pub tokenizer: String,
    /// Bytes one timed pass reads.
    pub timed_bytes: u64,
    /// The untimed warm-up pass (`None` with `--warmup-shards 0`).
    pub warmup: Option<PassFigures>,
    /// Every timed repeat's figures.
    pub repeats: Vec<TokensRepeat>,
    /// Median and range over the repeats.
    pub summary: TokensSummary,
    /// GPUs of each model the median token rate could feed.
    pub gpus_it_could_feed: Vec<Feed>,
}

fn human_rate(v: f64) -> String {
    if v >= 1e9 {
        format!("{:.2} B", v / 1e9)
    } else if v >= 1e6 {
        format!("{:.1} M", v / 1e6)
    } else {
        format!("{v:.0}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feed_formula_reproduces_the_seeds() {
        // Seeds (B7): 6.75 B tokens/s over RDMA "could feed" 727,856 H200s of Llama-3 8B.
        let per = gpu_tokens_per_s(&MODELS[0], 989.0, 0.45);
        assert!((per - 9271.875).abs() < 1e-6, "{per}");
        let fed = 6.75e9 / per;
        assert!((fed - 727_856.0).abs() / 727_856.0 < 0.001, "{fed}");
        // "~0.3 MB/s per 8 GPUs" of int32 ids.
        assert!((per * 4.0 * 8.0 / 1e6 - 0.30).abs() < 0.01);
    }

    #[test]
    fn runs_split_shards_in_whole_sequences() {
        let meta = TokenShard {
            sequences: 10,
            seq_len: 4,
            dtype: "int32".into(),
            bytes_per_token: 4,
            vocab_size: 9,
            tokenizer: "t".into(),
            synthetic: true,
            separator: None,
        };
        let listed = vec![Listed { data_key: "a.bin".into(), sidecar_key: "a.json".into(), meta }];
        // 16-byte sequences, 40-byte runs -> 2 sequences each.
        let runs = runs_of(&listed, 40);
        assert_eq!(runs.len(), 5);
        assert_eq!(runs[4].range, 128..160);
        assert!(runs.iter().all(|r| r.sequences == 2));
        // A run smaller than a sequence still carries one sequence.
        assert_eq!(runs_of(&listed, 1).len(), 10);
    }
}
