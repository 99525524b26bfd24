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
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::session::{Direction, Outcome, Session, SessionSpec, World};
use super::{Latency, Spread, dedup, host_cores, now_unix};
use crate::cli::FetchArgs;
use crate::error::{Error, Result, StoreError};
use crate::mem::{Buffer, Dest};
use crate::sampler::{Sampler, SamplerReport};
use crate::store::{self, ObjectStore, StoreStats, TransferPath};
use crate::witness::{self, Verdict, WitnessReport};

/// Figures of one timed repeat of one cell.
#[derive(Debug, Clone, Serialize)]
pub struct RepeatResult {
    /// 1-based repeat number.
    pub repeat: u32,
    /// `--series`: [seconds since the window opened, GB/s in the interval ending then]
    /// from rank 0's completed GETs (a GET counts when it completes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub series: Option<Vec<[f64; 2]>>,
    /// Worker processes in this cell.
    pub procs: u32,
    /// Payload bytes read (client's count, all processes).
    pub bytes: u64,
    /// Completed GETs.
    pub ops: u64,
    /// Wall seconds of the timed window (first process's start to the last one's end).
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
    /// Client CPU in cores (getrusage over the window), summed over processes.
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
    /// The store's counters' growth in this window, summed over processes:
    /// bytes per transfer path and the backend's own (rdma: the library's
    /// return codes `rdma_calls`, `rdma_ok`, ...). Schema 1 had the
    /// library's part alone, under `rdma_calls`.
    pub store_stats: crate::store::StoreStats,
    /// Median and range of the processes' own GB/s.
    pub per_process_gbps: Spread,
    /// Every process's figures (one entry for a single process).
    pub per_process: Vec<ProcFigures>,
}

/// One worker process's figures for one repeat of one cell.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProcFigures {
    /// Rank of the process these figures come from.
    pub rank: usize,
    /// Host name of that process.
    pub host: String,
    /// Payload bytes moved (the client's own count).
    pub bytes: u64,
    /// Completed GETs.
    pub ops: u64,
    /// Wall seconds of the timed work.
    pub wall_s: f64,
    /// Throughput, GB/s (bytes / wall / 1e9).
    pub throughput_gbps: f64,
    /// Wall-clock start and end of its timed window (Unix seconds).
    pub start_unix_s: f64,
    /// Wall-clock end of its timed window (Unix seconds).
    pub end_unix_s: f64,
    /// Client CPU in cores: CPU-seconds of this process (getrusage) / wall seconds.
    pub client_cpu_cores: f64,
    /// Whole-host CPU over its window (the same host for local ranks).
    pub host_cpu_cores: f64,
    /// Bytes it read over HTTP itself (declined or beyond one RDMA transfer).
    pub client_http_bytes: u64,
    /// Bytes per transfer path as the client saw them (`local`, `http`, `http_staged`, `rdma`).
    pub transfer_paths: BTreeMap<String, u64>,
}

/// What a process sends rank 0: its figures and its per-GET samples (ms).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct ProcWire {
    figures: ProcFigures,
    latency_ms: Vec<f64>,
    ttfb_ms: Vec<f64>,
}

/// Median and range over repeats of one cell.
#[derive(Debug, Clone, Serialize)]
pub struct CellSummary {
    /// Throughput, GB/s (bytes / wall / 1e9).
    pub throughput_gbps: Spread,
    /// Throughput, GiB/s (bytes / wall / 2^30).
    pub throughput_gibps: Spread,
    /// Completed operations per second.
    pub ops_per_s: Spread,
    /// Median over repeats of the per-GET latency p50, milliseconds.
    pub latency_p50_ms: Option<Spread>,
    /// Median over repeats of the per-GET latency p99, milliseconds.
    pub latency_p99_ms: Option<Spread>,
    /// Client CPU in cores: CPU-seconds of this process (getrusage) / wall seconds.
    pub client_cpu_cores: Spread,
    /// GB/s per client core (throughput_gbps / client_cpu_cores).
    pub gbps_per_core: Option<Spread>,
    /// Whole-host CPU in cores: busy fraction x logical CPUs (/proc/stat via sysinfo).
    pub host_cpu_cores: Spread,
    /// Worst verdict over the repeats.
    pub witness_verdict: Verdict,
    /// The reason that goes with it.
    pub witness_reason: String,
    /// Median RDMA share over repeats, where counters were read.
    pub rdma_share: Option<Spread>,
    /// RDMA share of the repeat the verdict comes from (the worst).
    pub witness_share: Option<f64>,
    /// Median over repeats of the median process's GB/s.
    pub per_process_gbps: Spread,
}

/// One (size, streams, processes) cell.
#[derive(Debug, Clone, Serialize)]
pub struct CellResult {
    /// Object size of the cell, bytes.
    pub size_bytes: u64,
    /// Streams per process.
    pub concurrency: u32,
    /// Worker processes.
    pub procs: u32,
    /// Every timed repeat of the cell.
    pub repeats: Vec<RepeatResult>,
    /// Median and range over the repeats.
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
    let exact = IEC.iter().chain(DEC.iter()).filter(|(u, _)| n >= *u && n.is_multiple_of(*u)).min_by_key(|(u, _)| n / u);
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
    if args.store.backend == crate::cli::Backend::Local && args.store.endpoint.is_some() {
        eprintln!("warning: --endpoint (or AWS_ENDPOINT_URL) is set but --backend is local: pass --backend http to use it");
    }
    if args.prefix.is_empty() {
        return Err(Error::Usage("--prefix must not be empty".into()));
    }
    store::check_key(&object_key(&args.prefix, 1, 0)).map_err(|e| Error::Usage(format!("invalid --prefix '{}': {e}", args.prefix)))?;
    let max_size = *args.sizes.iter().max().expect("clap gives at least one size");
    let max_c = *args.concurrency.iter().max().expect("clap gives at least one count") as u64;
    let max_p = *args.procs.iter().max().expect("clap gives at least one count") as u64;
    // Every process of the widest cell holds its own buffers (on one host unless launched across hosts).
    let need = max_size.saturating_mul(max_c).saturating_mul(max_p);
    let mut sys = sysinfo::System::new();
    sys.refresh_memory();
    let avail = sys.available_memory();
    if avail > 0 && need > avail / 10 * 9 {
        return Err(Error::Usage(format!(
            "{} process(es) x {} streams x {} needs {} of buffers but only {} of memory is available: lower --sizes, --concurrency or --procs",
            max_p,
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
                return Err(Error::Runtime(format!("object '{key}' not found in bucket '{bucket}' at {location}: pass --prepare to create it")));
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
            let (store, keys, barrier, failed, counter) = (store.clone(), keys.clone(), barrier.clone(), failed.clone(), counter.clone());
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
                            result = Err(StoreError::ShortBody { key: key.clone(), location: store.location(), got: tr.bytes, expected: expect });
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

/// One process's window as figures plus samples.
fn proc_wire(rank: usize, host: &str, ops: &[OpSample], wall: Duration, start_unix_s: f64, s: &SamplerReport) -> ProcWire {
    let bytes: u64 = ops.iter().map(|o| o.bytes).sum();
    let wall_s = wall.as_secs_f64().max(1e-9);
    let mut paths = BTreeMap::new();
    for o in ops {
        *paths.entry(o.path.to_string()).or_insert(0) += o.bytes;
    }
    ProcWire {
        figures: ProcFigures {
            rank,
            host: host.into(),
            bytes,
            ops: ops.len() as u64,
            wall_s,
            throughput_gbps: bytes as f64 / wall_s / 1e9,
            start_unix_s,
            end_unix_s: start_unix_s + wall_s,
            client_cpu_cores: s.client_cpu_cores,
            host_cpu_cores: s.host_cpu_cores,
            client_http_bytes: ops.iter().filter(|o| matches!(o.path, TransferPath::Http | TransferPath::HttpStaged)).map(|o| o.bytes).sum(),
            transfer_paths: paths,
        },
        latency_ms: ops.iter().map(|o| o.latency.as_secs_f64() * 1e3).collect(),
        ttfb_ms: ops.iter().filter_map(|o| o.ttfb).map(|t| t.as_secs_f64() * 1e3).collect(),
    }
}

/// A repeat from the processes' figures: bytes and ops summed, wall from the
/// first start to the last end (a lone process: its own wall), client CPU
/// summed, host CPU the busiest view per host summed over hosts, NIC bytes
/// from `s` (rank 0's sampler: the whole host).
fn summarize_repeat(repeat: u32, procs: Vec<ProcWire>, s: SamplerReport, w: WitnessReport) -> RepeatResult {
    let bytes: u64 = procs.iter().map(|p| p.figures.bytes).sum();
    let ops: u64 = procs.iter().map(|p| p.figures.ops).sum();
    let wall_s = if procs.len() == 1 {
        procs[0].figures.wall_s
    } else {
        let first = procs.iter().map(|p| p.figures.start_unix_s).fold(f64::INFINITY, f64::min);
        let last = procs.iter().map(|p| p.figures.end_unix_s).fold(0.0, f64::max);
        (last - first).max(1e-9)
    };
    let gbps = bytes as f64 / wall_s / 1e9;
    let to_d = |v: &[f64]| v.iter().map(|ms| Duration::from_secs_f64(ms / 1e3)).collect::<Vec<_>>();
    let lat: Vec<Duration> = procs.iter().flat_map(|p| to_d(&p.latency_ms)).collect();
    let ttfb: Vec<Duration> = procs.iter().flat_map(|p| to_d(&p.ttfb_ms)).collect();
    let mut paths = BTreeMap::new();
    for p in &procs {
        for (k, v) in &p.figures.transfer_paths {
            *paths.entry(k.clone()).or_insert(0) += v;
        }
    }
    let client_cpu_cores: f64 = procs.iter().map(|p| p.figures.client_cpu_cores).sum();
    let host_cpu_cores = host_cores(procs.iter().map(|p| (p.figures.host.as_str(), p.figures.host_cpu_cores)));
    let per_process: Vec<ProcFigures> = procs.into_iter().map(|p| p.figures).collect();
    RepeatResult {
        repeat,
        series: None,
        procs: per_process.len() as u32,
        bytes,
        ops,
        wall_s,
        throughput_gbps: gbps,
        throughput_gibps: bytes as f64 / wall_s / (1u64 << 30) as f64,
        ops_per_s: ops as f64 / wall_s,
        latency_ms: Latency::from_durations(&lat),
        ttfb_ms: Latency::from_durations(&ttfb),
        client_cpu_cores,
        gbps_per_core: (client_cpu_cores > 0.0).then(|| gbps / client_cpu_cores),
        host_cpu_cores,
        nic_rx_bytes: s.nic_rx_bytes,
        nic_tx_bytes: s.nic_tx_bytes,
        transfer_paths: paths,
        sampler: s,
        witness: w,
        store_stats: Default::default(),
        per_process_gbps: Spread::of(per_process.iter().map(|p| p.throughput_gbps)).expect("at least one process"),
        per_process,
    }
}

fn summarize_cell(reps: &[RepeatResult]) -> CellSummary {
    let labels: Vec<String> = reps.iter().map(|r| format!("repeat {}", r.repeat)).collect();
    let (verdict, reason) = witness::worst(labels.iter().map(String::as_str).zip(reps.iter().map(|r| &r.witness))).expect("at least one repeat");
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
        per_process_gbps: sp(|r| r.per_process_gbps.median),
    }
}

/// Everything a cell needs besides its own dimensions.
struct CellCtx<'a> {
    session: &'a Session,
    args: &'a FetchArgs,
}

/// One cell: `procs` processes (ranks below `procs`; the others wait at the
/// same barriers) each running `streams` streams over `keys`.
async fn run_cell(cx: &CellCtx<'_>, keys: &Arc<Vec<String>>, size: u64, streams: u32, procs: u32) -> Result<CellResult> {
    let (session, args) = (cx.session, cx.args);
    let (store, me, dest) = (&session.store, &session.me, session.mem.dest());
    let active = me.rank < procs as usize;
    // Buffers are allocated (and their pages touched) before any timed window.
    let alloc = || session.buffer(size as usize);
    let mut buffers: Vec<Buffer> = if active && dest == Dest::Host && streams > 1 && size >= 64 << 20 {
        // Large host buffers are touched on one thread each: faulting in 4 x
        // 256 MiB one after another was most of a short run's process time.
        std::thread::scope(|s| {
            let hs: Vec<_> = (0..streams).map(|_| s.spawn(alloc)).collect();
            hs.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("allocation thread panicked".into()))).collect::<std::result::Result<Vec<_>, _>>()
        })
        .map_err(|e| Error::Runtime(format!("cannot allocate {} x {} of {} memory: {e}", streams, human_bytes(size), dest.name())))?
    } else if active {
        (0..streams)
            .map(|_| alloc())
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| Error::Runtime(format!("cannot allocate {} x {} of {} memory: {e}", streams, human_bytes(size), dest.name())))?
    } else {
        Vec::new()
    };
    let counter = Arc::new(AtomicU64::new(0));
    let pb = if me.is_root() { progress_bar() } else { ProgressBar::hidden() };
    let mut repeats = Vec::new();
    for rep in 1..=args.run.repeats {
        let label = format!("{} x {streams} streams x {procs} procs, repeat {rep}/{}", human_bytes(size), args.run.repeats);
        if !args.run.warmup.is_zero() && active {
            pb.set_message(format!("{label}: warm-up"));
            run_streams(store, keys, &mut buffers, Stop::At(Instant::now() + args.run.warmup), &counter).await?;
        }
        counter.store(0, Ordering::Relaxed);
        // Counters are scraped outside the sampler's window: the scrape's own
        // CPU and bytes do not count against the transport.
        let window = session.open_window().await?;
        let t0 = Instant::now();
        let ticker = {
            let (pb, counter, label) = (pb.clone(), counter.clone(), label.clone());
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_millis(250)).await;
                    let gbps = counter.load(Ordering::Relaxed) as f64 / t0.elapsed().as_secs_f64() / 1e9;
                    pb.set_message(format!("{label}: {gbps:.2} GB/s (this process)"));
                }
            })
        };
        let stop = match args.run.iters {
            Some(k) => Stop::Iters(k),
            None => Stop::At(Instant::now() + args.run.duration),
        };
        // --series: the counter's growth per interval, sampled beside the streams.
        let series_buf: Arc<std::sync::Mutex<Vec<[f64; 2]>>> = Default::default();
        let series_task = args.series.map(|every| {
            let (counter, out) = (counter.clone(), series_buf.clone());
            tokio::spawn(async move {
                let (mut last, mut t_last) = (0u64, Instant::now());
                let start = t_last;
                let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
                loop {
                    tick.tick().await;
                    let (now_b, now_t) = (counter.load(Ordering::Relaxed), Instant::now());
                    let gbps = now_b.saturating_sub(last) as f64 / now_t.duration_since(t_last).as_secs_f64() / 1e9;
                    out.lock().unwrap_or_else(|e| e.into_inner()).push([now_t.duration_since(start).as_secs_f64(), gbps]);
                    (last, t_last) = (now_b, now_t);
                }
            })
        });
        let start_unix_s = now_unix();
        let sampler = Sampler::start();
        let res = if active { run_streams(store, keys, &mut buffers, stop, &counter).await } else { Ok((Vec::new(), Duration::ZERO)) };
        let s = sampler.finish();
        ticker.abort();
        let series = series_task.map(|h| {
            h.abort();
            std::mem::take(&mut *series_buf.lock().unwrap_or_else(|e| e.into_inner()))
        });
        let (ops, wall) = res?;
        let mine = proc_wire(me.rank, &session.host, &ops, wall, start_unix_s, &s);
        let bytes = mine.figures.bytes;
        let closed = session.close_window(window, Direction::Read, bytes, mine).await?;
        let Some(w) = closed.witness else { continue };
        let procs_wire: Vec<ProcWire> = closed.ranks.into_iter().filter(|p| p.figures.rank < procs as usize).collect();
        let mut r = summarize_repeat(rep, procs_wire, s, w);
        r.series = series;
        r.store_stats = closed.stats;
        repeats.push(r);
    }
    pb.finish_and_clear();
    if !me.is_root() {
        // Only rank 0 keeps figures; the others' cells are placeholders it never sees.
        return Ok(CellResult { size_bytes: size, concurrency: streams, procs, repeats: Vec::new(), summary: placeholder_summary() });
    }
    let summary = summarize_cell(&repeats);
    Ok(CellResult { size_bytes: size, concurrency: streams, procs, repeats, summary })
}

fn placeholder_summary() -> CellSummary {
    let z = Spread { median: 0.0, min: 0.0, max: 0.0 };
    CellSummary {
        throughput_gbps: z,
        throughput_gibps: z,
        ops_per_s: z,
        latency_p50_ms: None,
        latency_p99_ms: None,
        client_cpu_cores: z,
        gbps_per_core: None,
        host_cpu_cores: z,
        witness_verdict: Verdict::Unverified,
        witness_reason: String::new(),
        rdma_share: None,
        witness_share: None,
        per_process_gbps: z,
    }
}

fn fmt_spread(s: &Spread, digits: usize, ranged: bool) -> String {
    if ranged && s.max > s.min { format!("{:.digits$} ({:.digits$}–{:.digits$})", s.median, s.min, s.max) } else { format!("{:.digits$}", s.median) }
}

/// The human table: one row per cell, medians (with ranges when repeated).
pub fn table(cells: &[CellResult]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    let has_ttfb = cells.iter().any(|c| c.repeats.iter().any(|r| r.ttfb_ms.is_some()));
    let multi = cells.iter().any(|c| c.procs > 1);
    let mut header = if multi { vec!["size", "procs x streams", "GB/s", "GB/s/proc"] } else { vec!["size", "streams", "GB/s"] };
    header.extend(["GiB/s", "ops/s", "lat p50 ms", "p90", "p99", "max"]);
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
        let mut row = vec![human_bytes(c.size_bytes)];
        if multi {
            row.extend([
                format!("{} x {}", c.procs, c.concurrency),
                fmt_spread(&c.summary.throughput_gbps, 2, ranged),
                fmt_spread(&c.summary.per_process_gbps, 2, false),
            ]);
        } else {
            row.extend([c.concurrency.to_string(), fmt_spread(&c.summary.throughput_gbps, 2, ranged)]);
        }
        row.extend([
            fmt_spread(&c.summary.throughput_gibps, 2, false),
            fmt_spread(&c.summary.ops_per_s, 1, false),
            l(|l| l.p50_ms, &mid.latency_ms),
            l(|l| l.p90_ms, &mid.latency_ms),
            l(|l| l.p99_ms, &mid.latency_ms),
            l(|l| l.max_ms, &mid.latency_ms),
        ]);
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

/// Run `s3rdma fetch` end to end: prepare, measure every cell, write the record, print.
pub async fn run(args: FetchArgs) -> Result<()> {
    check_args(&args)?;
    let mut args = args;
    dedup(&mut args.sizes);
    dedup(&mut args.concurrency);
    dedup(&mut args.procs);
    let max_procs = *args.procs.iter().max().expect("clap gives at least one count") as usize;
    let prepare = args.run.prepare_for(&args.store);
    let spec = SessionSpec {
        bench: "fetch",
        store: &args.store,
        witness: &args.witness,
        mem: &args.mem,
        group: Some(&args.group),
        output: &args.output,
        world: World::AtLeast(max_procs),
        // One RDMA worker (and client) per stream of the widest cell.
        rdma_threads: *args.concurrency.iter().max().expect("clap gives at least one count"),
        create_bucket: prepare,
        no_bucket: super::session::store_error,
    };
    let Some(session) = Session::start(spec).await? else { return Ok(()) };
    let store = session.store.clone();
    let me = session.me.clone();
    let mut warnings: Vec<String> = Vec::new();
    for &size in &args.sizes {
        for w in store.preflight(size) {
            if !warnings.contains(&w) {
                if me.is_root() {
                    eprintln!("warning: {w}");
                }
                warnings.push(w);
            }
        }
    }
    let mut key_sets = Vec::new();
    for &size in &args.sizes {
        let keys: Vec<String> = (0..args.objects).map(|i| object_key(&args.prefix, size, i)).collect();
        if me.is_root() {
            prepare_objects(store.as_ref(), &keys, size, prepare).await?;
        }
        key_sets.push((size, Arc::new(keys)));
    }
    session.group.barrier("prepared").await?;
    let cx = CellCtx { session: &session, args: &args };
    let mut cells = Vec::new();
    for (size, keys) in &key_sets {
        for &c in &args.concurrency {
            for &p in &args.procs {
                cells.push(run_cell(&cx, keys, *size, c, p).await?);
            }
        }
    }
    let mut windows = Vec::new();
    let mut stats = StoreStats::default();
    for c in &cells {
        for r in &c.repeats {
            windows.push((format!("{} x {} streams x {} procs, repeat {}", human_bytes(c.size_bytes), c.concurrency, c.procs, r.repeat), r.witness.clone()));
            stats.add(&r.store_stats);
        }
    }
    let verdict_cells = json!(
        cells
            .iter()
            .map(|c| json!({"size_bytes": c.size_bytes, "concurrency": c.concurrency, "procs": c.procs,
        "verdict": c.summary.witness_verdict, "reason": c.summary.witness_reason,
        "rdma_share": c.summary.witness_share}))
            .collect::<Vec<_>>()
    );
    let params = json!({
        "sizes_bytes": args.sizes, "concurrency": args.concurrency, "procs": args.procs, "objects": args.objects,
        "prefix": args.prefix, "bucket": args.store.bucket,
        "duration_s": args.run.iters.is_none().then_some(args.run.duration.as_secs_f64()),
        "iters": args.run.iters, "warmup_s": args.run.warmup.as_secs_f64(),
        "repeats": args.run.repeats, "prepare": prepare,
    });
    let mut outcome = Outcome::new(params, &cells, windows);
    outcome.witness_extra = vec![("cells", verdict_cells)];
    outcome.environment = vec![("warnings", json!(warnings))];
    outcome.stats = stats;
    let dest = session.mem.dest();
    let gpu = session.gpu.as_ref().map(|g| format!(" on GPU {} ({})", g.ordinal, g.name)).unwrap_or_default();
    session
        .finish(outcome, || {
            println!("fetch over {} ({}), bucket '{}', into {} memory{gpu}", store.backend().name(), store.location(), store.bucket(), dest.name(),);
            if store.backend() == crate::cli::Backend::Local && !args.store.direct {
                println!("local reads go through the page cache: pass --direct for O_DIRECT reads");
            }
            println!("{}", table(&cells));
            if args.run.repeats > 1 {
                println!("GB/s: median (min–max) over repeats; latency columns: the median-throughput repeat");
            }
        })
        .await
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
        let ops: Vec<OpSample> =
            (0..4).map(|_| OpSample { latency: Duration::from_millis(10), ttfb: None, bytes: 500_000_000, path: TransferPath::Local }).collect();
        let s = SamplerReport {
            wall_s: 2.0,
            process_user_s: 0.5,
            process_sys_s: 0.5,
            client_cpu_cores: 0.5,
            host_cpu_cores: 1.0,
            host_logical_cpus: 2,
            nic_rx_bytes: 0,
            nic_tx_bytes: 0,
            nics: Default::default(),
        };
        let w = witness::judge(witness::Expect::Local, witness::Payload::default(), Err(String::new()), Default::default());
        let one = proc_wire(0, "h", &ops, Duration::from_secs(2), 100.0, &s);
        let r = summarize_repeat(1, vec![one], s.clone(), w.clone());
        assert_eq!(r.bytes, 2_000_000_000);
        assert!((r.throughput_gbps - 1.0).abs() < 1e-12);
        assert!((r.ops_per_s - 2.0).abs() < 1e-12);
        assert!((r.gbps_per_core.unwrap() - 2.0).abs() < 1e-12);
        assert_eq!(r.transfer_paths.get("local"), Some(&2_000_000_000));
        assert!(r.ttfb_ms.is_none());
        assert_eq!(r.latency_ms.as_ref().unwrap().p50_ms, 10.0);

        // Two processes on one host, windows 100.0-102.0 and 100.5-103.0:
        // bytes summed over a 3 s span, client cores summed, host cores the max.
        let mut a = proc_wire(0, "h", &ops, Duration::from_secs(2), 100.0, &s);
        let mut s2 = s.clone();
        s2.client_cpu_cores = 0.25;
        s2.host_cpu_cores = 1.5;
        let b = proc_wire(1, "h", &ops[..2], Duration::from_millis(2500), 100.5, &s2);
        a.figures.transfer_paths.insert("local".into(), 2_000_000_000);
        let r = summarize_repeat(1, vec![a, b], s, w);
        assert_eq!(r.procs, 2);
        assert_eq!(r.bytes, 3_000_000_000);
        assert_eq!(r.ops, 6);
        assert!((r.wall_s - 3.0).abs() < 1e-9, "{}", r.wall_s);
        assert!((r.throughput_gbps - 1.0).abs() < 1e-9);
        assert!((r.client_cpu_cores - 0.75).abs() < 1e-12);
        assert!((r.host_cpu_cores - 1.5).abs() < 1e-12);
        assert_eq!(r.per_process_gbps.min, 0.4);
        assert_eq!(r.per_process_gbps.max, 1.0);
        assert_eq!(r.per_process.iter().map(|p| p.bytes).sum::<u64>(), r.bytes);
    }
}
