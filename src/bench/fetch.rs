//! `s3rdma fetch`: raw storage read throughput (the seeds' B1).
//!
//! For every (object size, stream count) cell: N streams, each with its own
//! destination buffer allocated before the timed window, read whole objects
//! round-robin from a set of same-sized objects for `--duration` (or `--iters`
//! GETs each). Throughput = bytes / wall, wall = from start to the last
//! stream's last completed GET (GETs in flight at the deadline finish and count).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use comfy_table::{Cell, CellAlignment, Table, presets::UTF8_FULL_CONDENSED};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rand::{RngCore, SeedableRng, rngs::SmallRng};
use serde::Serialize;
use serde_json::json;

use super::{Latency, Spread};
use crate::cli::FetchArgs;
use crate::error::{Error, Result, StoreError};
use crate::mem::{Buffer, Gpu};
use crate::report::RunRecord;
use crate::sampler::{Sampler, SamplerReport};
use crate::store::rdma::CallCounts;
use crate::store::{self, ObjectStore, TransferPath};
use crate::witness::{self, Payload, Verdict, Witness, WitnessReport};

/// Figures of one timed repeat of one cell.
#[derive(Debug, Clone, Serialize)]
pub struct RepeatResult {
    /// 1-based repeat number.
    pub repeat: u32,
    /// Payload bytes read (client's count).
    pub bytes: u64,
    /// Completed GETs.
    pub ops: u64,
    /// Wall seconds of the timed window.
    pub wall_s: f64,
    /// bytes / wall / 1e9.
    pub throughput_gbps: f64,
    /// bytes / wall / 2^30.
    pub throughput_gibps: f64,
    /// ops / wall.
    pub ops_per_s: f64,
    /// Per-GET latency (request to last byte).
    pub latency_ms: Option<Latency>,
    /// Per-GET time to first byte (http only).
    pub ttfb_ms: Option<Latency>,
    /// Client CPU in cores (getrusage over the window).
    pub client_cpu_cores: f64,
    /// throughput_gbps / client_cpu_cores.
    pub gbps_per_core: Option<f64>,
    /// Whole-host CPU in cores.
    pub host_cpu_cores: f64,
    /// NIC bytes received, all interfaces but loopback.
    pub nic_rx_bytes: u64,
    /// NIC bytes sent, all interfaces but loopback.
    pub nic_tx_bytes: u64,
    /// Bytes per transfer path as the client saw them.
    pub transfer_paths: BTreeMap<String, u64>,
    /// Everything the sampler measured.
    pub sampler: SamplerReport,
    /// The server's account of this window's transport.
    pub witness: WitnessReport,
    /// Return codes of the transport library in this window (rdma only).
    pub rdma_calls: Option<CallCounts>,
}

/// Median and range over repeats of one cell.
#[derive(Debug, Clone, Serialize)]
pub struct CellSummary {
    pub throughput_gbps: Spread,
    pub throughput_gibps: Spread,
    pub ops_per_s: Spread,
    pub latency_p50_ms: Option<Spread>,
    pub latency_p99_ms: Option<Spread>,
    pub client_cpu_cores: Spread,
    pub gbps_per_core: Option<Spread>,
    pub host_cpu_cores: Spread,
    /// Worst verdict over the repeats.
    pub witness_verdict: Verdict,
    /// The reason that goes with it.
    pub witness_reason: String,
    /// Median RDMA share over repeats, where counters were read.
    pub rdma_share: Option<Spread>,
    /// RDMA share of the repeat the verdict comes from (the worst).
    pub witness_share: Option<f64>,
}

/// One (size, streams) cell.
#[derive(Debug, Clone, Serialize)]
pub struct CellResult {
    pub size_bytes: u64,
    pub concurrency: u32,
    pub repeats: Vec<RepeatResult>,
    pub summary: CellSummary,
}

/// One GET as a stream saw it.
struct OpSample {
    latency: Duration,
    ttfb: Option<Duration>,
    bytes: u64,
    path: TransferPath,
}

#[derive(Clone, Copy)]
enum Stop {
    At(Instant),
    Iters(u32),
}

/// Key of object `i` of `size` bytes.
fn object_key(prefix: &str, size: u64, i: u32) -> String {
    format!("{}/{size}/obj-{i:06}", prefix.trim_end_matches('/'))
}

/// Render a size the way a user would type it: the exact IEC (16MiB) or
/// decimal (64MB) form with the smallest number, else IEC with one decimal.
fn human_bytes(n: u64) -> String {
    const IEC: [(u64, &str); 4] = [(1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    const DEC: [(u64, &str); 4] = [(1_000_000_000_000, "TB"), (1_000_000_000, "GB"), (1_000_000, "MB"), (1_000, "kB")];
    let exact = IEC.iter().chain(DEC.iter()).filter(|(u, _)| n >= *u && n % u == 0).min_by_key(|(u, _)| n / u);
    if let Some((u, name)) = exact {
        return format!("{}{name}", n / u);
    }
    match IEC.iter().find(|(u, _)| n >= *u) {
        Some((u, name)) => format!("{:.1}{name}", n as f64 / *u as f64),
        None => format!("{n}B"),
    }
}

fn progress_bar() -> ProgressBar {
    // Hidden by indicatif when stderr is not a terminal.
    let pb = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    pb.set_style(ProgressStyle::with_template("{spinner} {msg}").expect("static template"));
    pb.enable_steady_tick(Duration::from_millis(200));
    pb
}

fn check_args(args: &FetchArgs) -> Result<()> {
    crate::report::check_results_dir(&args.output.results_dir)?;
    if args.store.backend == crate::cli::Backend::Local && args.store.endpoint.is_some() {
        eprintln!("warning: --endpoint (or AWS_ENDPOINT_URL) is set but --backend is local: pass --backend http to use it");
    }
    if args.prefix.is_empty() {
        return Err(Error::Usage("--prefix must not be empty".into()));
    }
    store::check_key(&object_key(&args.prefix, 1, 0))
        .map_err(|e| Error::Usage(format!("invalid --prefix '{}': {e}", args.prefix)))?;
    let max_size = *args.sizes.iter().max().expect("clap gives at least one size");
    let max_c = *args.concurrency.iter().max().expect("clap gives at least one count") as u64;
    let need = max_size.saturating_mul(max_c);
    let mut sys = sysinfo::System::new();
    sys.refresh_memory();
    let avail = sys.available_memory();
    if avail > 0 && need > avail / 10 * 9 {
        return Err(Error::Usage(format!(
            "{} streams x {} needs {} of buffers but only {} of memory is available: lower --sizes or --concurrency",
            max_c,
            human_bytes(max_size),
            human_bytes(need),
            human_bytes(avail)
        )));
    }
    Ok(())
}

/// Make sure every object exists with the right size; with `prepare`, write
/// missing or wrong-sized ones with random bytes (never zeros: some stores and
/// filesystems compress or dedupe zeros).
async fn prepare_objects(store: &dyn ObjectStore, keys: &[String], size: u64, prepare: bool) -> Result<()> {
    let mut missing = Vec::new();
    for key in keys {
        match store.head(key).await {
            Ok(m) if m.size == size => {}
            Ok(m) if !prepare => {
                return Err(Error::Store(StoreError::Other {
                    op: "HEAD",
                    key: key.clone(),
                    location: store.location(),
                    detail: format!("object is {} bytes, expected {size}: pass --prepare to rewrite it", m.size),
                }));
            }
            Err(StoreError::NotFound { bucket, key, location }) if !prepare => {
                return Err(Error::Runtime(format!(
                    "object '{key}' not found in bucket '{bucket}' at {location}: pass --prepare to create it"
                )));
            }
            Ok(_) | Err(StoreError::NotFound { .. }) => missing.push(key),
            Err(e) => return Err(e.into()),
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    eprintln!("prepare: writing {} object(s) of {} to {}", missing.len(), human_bytes(size), store.location());
    let pb = progress_bar();
    let mut buf = Buffer::host(size as usize);
    let mut rng = SmallRng::from_os_rng();
    for (i, key) in missing.iter().enumerate() {
        pb.set_message(format!("prepare: writing {key} ({}/{})", i + 1, missing.len()));
        rng.fill_bytes(buf.as_host_mut().expect("host buffer"));
        store.put_from(key, &buf).await?;
    }
    pb.finish_and_clear();
    Ok(())
}

/// Run `buffers.len()` streams until `stop`; returns every GET and the wall time.
async fn run_streams(
    store: &Arc<dyn ObjectStore>,
    keys: &Arc<Vec<String>>,
    buffers: &mut Vec<Buffer>,
    stop: Stop,
    counter: &Arc<AtomicU64>,
) -> Result<(Vec<OpSample>, Duration)> {
    let n = buffers.len();
    let barrier = Arc::new(tokio::sync::Barrier::new(n));
    let failed = Arc::new(AtomicBool::new(false));
    let t0 = Instant::now();
    let handles: Vec<_> = buffers
        .drain(..)
        .enumerate()
        .map(|(s, mut buf)| {
            let (store, keys, barrier, failed, counter) =
                (store.clone(), keys.clone(), barrier.clone(), failed.clone(), counter.clone());
            let (deadline, iters) = match stop {
                Stop::At(t) => (Some(t), u32::MAX),
                Stop::Iters(k) => (None, k),
            };
            let expect = buf.len() as u64;
            tokio::spawn(async move {
                barrier.wait().await;
                let mut ops = Vec::new();
                let mut result = Ok(());
                for i in 0..iters {
                    if deadline.is_some_and(|d| Instant::now() >= d) || failed.load(Ordering::Relaxed) {
                        break;
                    }
                    // Streams start on different objects and walk them round-robin.
                    let key = &keys[(s + i as usize * n) % keys.len()];
                    let t = Instant::now();
                    // Device reads name the range so the staged pipeline needs no HEAD.
                    let range = matches!(buf, Buffer::Device(_)).then(|| 0..expect);
                    match store::read_into(store.as_ref(), key, range, &mut buf).await {
                        Ok(tr) if tr.bytes != expect => {
                            failed.store(true, Ordering::Relaxed);
                            result = Err(StoreError::ShortBody {
                                key: key.clone(),
                                location: store.location(),
                                got: tr.bytes,
                                expected: expect,
                            });
                            break;
                        }
                        Ok(tr) => {
                            counter.fetch_add(tr.bytes, Ordering::Relaxed);
                            ops.push(OpSample { latency: t.elapsed(), ttfb: tr.first_byte, bytes: tr.bytes, path: tr.path });
                        }
                        Err(e) => {
                            failed.store(true, Ordering::Relaxed);
                            result = Err(e);
                            break;
                        }
                    }
                }
                (buf, ops, result, Instant::now())
            })
        })
        .collect();
    let mut all = Vec::new();
    let mut first_err = None;
    let mut end = t0;
    for h in handles {
        let (buf, ops, res, t_end) = h.await.map_err(|e| Error::Runtime(format!("stream task failed: {e}")))?;
        buffers.push(buf);
        all.extend(ops);
        end = end.max(t_end);
        if let (Err(e), None) = (res, &first_err) {
            first_err = Some(e);
        }
    }
    match first_err {
        Some(e) => Err(e.into()),
        None => Ok((all, end - t0)),
    }
}

fn summarize_repeat(repeat: u32, ops: &[OpSample], wall: Duration, s: SamplerReport, w: WitnessReport) -> RepeatResult {
    let bytes: u64 = ops.iter().map(|o| o.bytes).sum();
    let wall_s = wall.as_secs_f64().max(1e-9);
    let gbps = bytes as f64 / wall_s / 1e9;
    let lat: Vec<Duration> = ops.iter().map(|o| o.latency).collect();
    let ttfb: Vec<Duration> = ops.iter().filter_map(|o| o.ttfb).collect();
    let mut paths = BTreeMap::new();
    for o in ops {
        *paths.entry(o.path.to_string()).or_insert(0) += o.bytes;
    }
    RepeatResult {
        repeat,
        bytes,
        ops: ops.len() as u64,
        wall_s,
        throughput_gbps: gbps,
        throughput_gibps: bytes as f64 / wall_s / (1u64 << 30) as f64,
        ops_per_s: ops.len() as f64 / wall_s,
        latency_ms: Latency::from_durations(&lat),
        ttfb_ms: Latency::from_durations(&ttfb),
        client_cpu_cores: s.client_cpu_cores,
        gbps_per_core: (s.client_cpu_cores > 0.0).then(|| gbps / s.client_cpu_cores),
        host_cpu_cores: s.host_cpu_cores,
        nic_rx_bytes: s.nic_rx_bytes,
        nic_tx_bytes: s.nic_tx_bytes,
        transfer_paths: paths,
        sampler: s,
        witness: w,
        rdma_calls: None,
    }
}

fn summarize_cell(reps: &[RepeatResult]) -> CellSummary {
    let labels: Vec<String> = reps.iter().map(|r| format!("repeat {}", r.repeat)).collect();
    let (verdict, reason) =
        witness::worst(labels.iter().map(String::as_str).zip(reps.iter().map(|r| &r.witness))).expect("at least one repeat");
    let sp = |f: fn(&RepeatResult) -> f64| Spread::of(reps.iter().map(f)).expect("at least one repeat");
    let opt = |f: fn(&RepeatResult) -> Option<f64>| {
        let v: Vec<f64> = reps.iter().filter_map(f).collect();
        Spread::of(v)
    };
    CellSummary {
        throughput_gbps: sp(|r| r.throughput_gbps),
        throughput_gibps: sp(|r| r.throughput_gibps),
        ops_per_s: sp(|r| r.ops_per_s),
        latency_p50_ms: opt(|r| r.latency_ms.as_ref().map(|l| l.p50_ms)),
        latency_p99_ms: opt(|r| r.latency_ms.as_ref().map(|l| l.p99_ms)),
        client_cpu_cores: sp(|r| r.client_cpu_cores),
        gbps_per_core: opt(|r| r.gbps_per_core),
        host_cpu_cores: sp(|r| r.host_cpu_cores),
        witness_verdict: verdict,
        witness_reason: reason,
        rdma_share: opt(|r| r.witness.rdma_share),
        witness_share: reps.iter().min_by_key(|r| r.witness.verdict).and_then(|r| r.witness.rdma_share),
    }
}

async fn run_cell(
    store: &Arc<dyn ObjectStore>,
    keys: &Arc<Vec<String>>,
    size: u64,
    streams: u32,
    args: &FetchArgs,
    witness: &Witness,
    gpu: Option<&Arc<Gpu>>,
) -> Result<CellResult> {
    // Buffers are allocated (and their pages touched) before any timed window.
    let bounce = if store.writes_device() { 0 } else { args.mem.bounce_buffers as usize };
    let mut buffers: Vec<Buffer> = (0..streams)
        .map(|_| Buffer::for_dest(args.mem.dest(), gpu, size as usize, bounce, args.mem.stage_chunk as usize))
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| Error::Runtime(format!("cannot allocate {} x {} of {} memory: {e}", streams, human_bytes(size), args.mem.dest().name())))?;
    let counter = Arc::new(AtomicU64::new(0));
    let pb = progress_bar();
    let mut repeats = Vec::new();
    for rep in 1..=args.run.repeats {
        let label = format!("{} x {streams} streams, repeat {rep}/{}", human_bytes(size), args.run.repeats);
        if !args.run.warmup.is_zero() {
            pb.set_message(format!("{label}: warm-up"));
            run_streams(store, keys, &mut buffers, Stop::At(Instant::now() + args.run.warmup), &counter).await?;
        }
        counter.store(0, Ordering::Relaxed);
        let t0 = Instant::now();
        let ticker = {
            let (pb, counter, label) = (pb.clone(), counter.clone(), label.clone());
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_millis(250)).await;
                    let gbps = counter.load(Ordering::Relaxed) as f64 / t0.elapsed().as_secs_f64() / 1e9;
                    pb.set_message(format!("{label}: {gbps:.2} GB/s"));
                }
            })
        };
        let stop = match args.run.iters {
            Some(k) => Stop::Iters(k),
            None => Stop::At(Instant::now() + args.run.duration),
        };
        // Counters are scraped outside the sampler's window: the scrape's own
        // CPU and bytes do not count against the transport.
        let window = witness.begin().await;
        let calls0 = store.call_counts();
        let sampler = Sampler::start();
        let res = run_streams(store, keys, &mut buffers, stop, &counter).await;
        let s = sampler.finish();
        ticker.abort();
        let (ops, wall) = res?;
        let read_bytes = ops.iter().map(|o| o.bytes).sum();
        let client_http_bytes =
            ops.iter().filter(|o| matches!(o.path, TransferPath::Http | TransferPath::HttpStaged)).map(|o| o.bytes).sum();
        let w = witness.end(window, Payload { read_bytes, write_bytes: 0, client_http_bytes }).await;
        let mut r = summarize_repeat(rep, &ops, wall, s, w);
        r.rdma_calls = store.call_counts().zip(calls0).map(|(now, then)| now.since(&then));
        repeats.push(r);
    }
    pb.finish_and_clear();
    let summary = summarize_cell(&repeats);
    Ok(CellResult { size_bytes: size, concurrency: streams, repeats, summary })
}

fn fmt_spread(s: &Spread, digits: usize, ranged: bool) -> String {
    if ranged && s.max > s.min {
        format!("{:.digits$} ({:.digits$}–{:.digits$})", s.median, s.min, s.max)
    } else {
        format!("{:.digits$}", s.median)
    }
}

/// The human table: one row per cell, medians (with ranges when repeated).
pub fn table(cells: &[CellResult]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    let has_ttfb = cells.iter().any(|c| c.repeats.iter().any(|r| r.ttfb_ms.is_some()));
    let mut header = vec![
        "size", "streams", "GB/s", "GiB/s", "ops/s", "lat p50 ms", "p90", "p99", "max",
    ];
    if has_ttfb {
        header.extend(["TTFB p50 ms", "p99"]);
    }
    header.extend(["client cores", "GB/s/core", "host cores", "NIC rx MB", "witness"]);
    t.set_header(header);
    for c in cells {
        let ranged = c.repeats.len() > 1;
        // Latency percentiles from the median repeat by throughput.
        let mut reps: Vec<&RepeatResult> = c.repeats.iter().collect();
        reps.sort_by(|a, b| a.throughput_gbps.total_cmp(&b.throughput_gbps));
        let mid = reps[reps.len() / 2];
        let l = |f: fn(&Latency) -> f64, lat: &Option<Latency>| lat.as_ref().map_or("-".into(), |l| format!("{:.2}", f(l)));
        let mut row = vec![
            human_bytes(c.size_bytes),
            c.concurrency.to_string(),
            fmt_spread(&c.summary.throughput_gbps, 2, ranged),
            fmt_spread(&c.summary.throughput_gibps, 2, false),
            fmt_spread(&c.summary.ops_per_s, 1, false),
            l(|l| l.p50_ms, &mid.latency_ms),
            l(|l| l.p90_ms, &mid.latency_ms),
            l(|l| l.p99_ms, &mid.latency_ms),
            l(|l| l.max_ms, &mid.latency_ms),
        ];
        if has_ttfb {
            row.push(l(|l| l.p50_ms, &mid.ttfb_ms));
            row.push(l(|l| l.p99_ms, &mid.ttfb_ms));
        }
        row.push(fmt_spread(&c.summary.client_cpu_cores, 2, false));
        row.push(c.summary.gbps_per_core.map_or("-".into(), |s| fmt_spread(&s, 2, false)));
        row.push(fmt_spread(&c.summary.host_cpu_cores, 2, false));
        row.push(format!("{:.1}", mid.nic_rx_bytes as f64 / 1e6));
        row.push(match c.summary.witness_share {
            Some(sh) => format!("{} ({}% RDMA)", c.summary.witness_verdict.as_str(), witness::pct_floor(sh)),
            None => c.summary.witness_verdict.as_str().to_string(),
        });
        t.add_row(row.into_iter().map(|s| Cell::new(s).set_alignment(CellAlignment::Right)));
    }
    t
}

/// Drop repeated list entries, keeping the first of each (a cell runs once).
fn dedup<T: PartialEq + Copy>(v: &mut Vec<T>) {
    let mut seen = Vec::new();
    v.retain(|x| {
        let new = !seen.contains(x);
        seen.push(*x);
        new
    });
}

/// Run `s3rdma fetch` end to end: prepare, measure every cell, write the record, print.
pub async fn run(args: FetchArgs) -> Result<()> {
    check_args(&args)?;
    let witness = Witness::new(&args.store, &args.witness)?;
    let started = chrono::Utc::now();
    let mut args = args;
    dedup(&mut args.sizes);
    dedup(&mut args.concurrency);
    // The GPU is opened before the store, so rdma workers can bind its context.
    let gpu = args.mem.open_gpu()?;
    let mut store_args = args.store.clone();
    // One RDMA worker (and client) per stream of the widest cell.
    store_args.rdma_threads = store_args.rdma_threads.or(args.concurrency.iter().max().copied());
    let store: Arc<dyn ObjectStore> = Arc::from(store::open(&store_args)?);
    let mut warnings: Vec<String> = Vec::new();
    for &size in &args.sizes {
        for w in store.preflight(size) {
            if !warnings.contains(&w) {
                eprintln!("warning: {w}");
                warnings.push(w);
            }
        }
    }
    let prepare = args.run.prepare_for(&args.store);
    store.ensure_bucket(prepare).await?;
    let mut key_sets = Vec::new();
    for &size in &args.sizes {
        let keys: Vec<String> = (0..args.objects).map(|i| object_key(&args.prefix, size, i)).collect();
        prepare_objects(store.as_ref(), &keys, size, prepare).await?;
        key_sets.push((size, Arc::new(keys)));
    }
    let mut cells = Vec::new();
    for (size, keys) in &key_sets {
        for &c in &args.concurrency {
            cells.push(run_cell(&store, keys, *size, c, &args, &witness, gpu.as_ref()).await?);
        }
    }
    let cell_labels: Vec<String> =
        cells.iter().map(|c| format!("{} x {} streams", human_bytes(c.size_bytes), c.concurrency)).collect();
    let cell_reports: Vec<&WitnessReport> = cells
        .iter()
        .map(|c| c.repeats.iter().min_by_key(|r| r.witness.verdict).map(|r| &r.witness).expect("at least one repeat"))
        .collect();
    let (verdict, reason) =
        witness::worst(cell_labels.iter().map(String::as_str).zip(cell_reports.iter().copied())).expect("at least one cell");
    let rdma_witness = json!({
        "verdict": verdict, "reason": reason, "config": witness.describe(),
        "cells": cells.iter().map(|c| json!({"size_bytes": c.size_bytes, "concurrency": c.concurrency,
            "verdict": c.summary.witness_verdict, "reason": c.summary.witness_reason,
            "rdma_share": c.summary.witness_share})).collect::<Vec<_>>(),
    });
    let record = RunRecord {
        environment: {
            let mut env = args.mem.describe(gpu.as_ref(), store.writes_device());
            env["store"] = store.describe();
            env["witness"] = witness.describe();
            env["warnings"] = json!(warnings);
            env
        },
        params: json!({
            "sizes_bytes": args.sizes, "concurrency": args.concurrency, "objects": args.objects,
            "prefix": args.prefix, "bucket": args.store.bucket,
            "duration_s": args.run.iters.is_none().then(|| args.run.duration.as_secs_f64()),
            "iters": args.run.iters, "warmup_s": args.run.warmup.as_secs_f64(),
            "repeats": args.run.repeats, "prepare": prepare,
        }),
        results: serde_json::to_value(&cells).map_err(|e| Error::Runtime(format!("cannot encode results: {e}")))?,
        rdma_witness,
        ..RunRecord::new("fetch", store.backend().name(), started, args.output.tag.clone())
    };
    let path = record.write(&args.output.results_dir, started)?;
    if args.output.json {
        println!("{}", serde_json::to_string_pretty(&record).expect("record encodes"));
    } else {
        println!(
            "fetch over {} ({}), bucket '{}', into {} memory{}",
            store.backend().name(),
            store.location(),
            store.bucket(),
            args.mem.dest().name(),
            gpu.as_ref().map(|g| format!(" on GPU {} ({})", g.ordinal, g.name)).unwrap_or_default()
        );
        if store.backend() == crate::cli::Backend::Local && !args.store.direct {
            println!("local reads go through the page cache: pass --direct for O_DIRECT reads");
        }
        println!("{}", table(&cells));
        if args.run.repeats > 1 {
            println!("GB/s: median (min–max) over repeats; latency columns: the median-throughput repeat");
        }
        println!("witness: {} ({reason})", verdict.as_str());
        let windows: Vec<CallCounts> = cells.iter().flat_map(|c| c.repeats.iter().filter_map(|r| r.rdma_calls)).collect();
        if !windows.is_empty() {
            let total = windows.iter().fold(CallCounts::default(), |a, w| CallCounts {
                rdma_calls: a.rdma_calls + w.rdma_calls,
                rdma_ok: a.rdma_ok + w.rdma_ok,
                rdma_errors: a.rdma_errors + w.rdma_errors,
                rdma_declined: a.rdma_declined + w.rdma_declined,
                rdma_invalid: a.rdma_invalid + w.rdma_invalid,
            });
            println!(
                "libminiocpp return codes in the timed windows: {} calls, {} ok, {} errors (-1), {} declined (-2), {} invalid (-3)",
                total.rdma_calls, total.rdma_ok, total.rdma_errors, total.rdma_declined, total.rdma_invalid
            );
        }
    }
    eprintln!("wrote {}", path.display());
    if args.witness.require_rdma && verdict != Verdict::RdmaVerified {
        return Err(Error::WitnessFailed(format!(
            "--require-rdma: witness verdict {} for {reason}",
            verdict.as_str()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_sizes_render() {
        assert_eq!(object_key("fetch/", 1048576, 3), "fetch/1048576/obj-000003");
        assert_eq!(human_bytes(16 << 20), "16MiB");
        assert_eq!(human_bytes(64_000_000), "64MB");
        assert_eq!(human_bytes(1_500_000), "1500kB");
        assert_eq!(human_bytes(1_500_001), "1.4MiB");
        assert_eq!(human_bytes(512), "512B");
    }

    #[test]
    fn repeat_summary_computes_rates() {
        let ops: Vec<OpSample> = (0..4)
            .map(|_| OpSample { latency: Duration::from_millis(10), ttfb: None, bytes: 500_000_000, path: TransferPath::Local })
            .collect();
        let s = SamplerReport {
            wall_s: 2.0, process_user_s: 0.5, process_sys_s: 0.5, client_cpu_cores: 0.5, host_cpu_cores: 1.0,
            host_logical_cpus: 2, nic_rx_bytes: 0, nic_tx_bytes: 0, nics: Default::default(),
        };
        let w = witness::judge(witness::Expect::Local, Payload::default(), Err(String::new()), Default::default());
        let r = summarize_repeat(1, &ops, Duration::from_secs(2), s, w);
        assert_eq!(r.bytes, 2_000_000_000);
        assert!((r.throughput_gbps - 1.0).abs() < 1e-12);
        assert!((r.ops_per_s - 2.0).abs() < 1e-12);
        assert!((r.gbps_per_core.unwrap() - 2.0).abs() < 1e-12);
        assert_eq!(r.transfer_paths.get("local"), Some(&2_000_000_000));
        assert!(r.ttfb_ms.is_none());
    }
}
