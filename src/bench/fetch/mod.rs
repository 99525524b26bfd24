//! `s3rdma fetch`: raw storage read throughput (the seeds' B1).
//!
//! For every (object size, stream count) cell: N streams, each with its own
//! destination buffer allocated before the timed window, read whole objects
//! round-robin from a set of same-sized objects for `--duration` (or `--iters`
//! GETs each). Throughput = bytes / wall, wall = from start to the last
//! stream's last completed GET (GETs in flight at the deadline finish and count).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::dedup;
use super::driver::Bench;
use super::session::{Direction, Outcome, Session, SessionSpec, World};
use crate::clock::now_unix;
use crate::error::{Error, Result, StoreError};
use crate::flag::{BACKEND, DIRECT, ENDPOINT, NO_PREPARE, PREFIX, PREPARE, SIZES, STREAM_BUFFER, VERIFY};
use crate::format::pattern::Pattern;
use crate::mem::{Buffer, Dest};
use crate::record::WindowId;
use crate::sampler::Sampler;
use crate::store::{self, ObjectStore, StoreStats, TransferPath};
use crate::units::{size_approx, size_name};

mod buffers;
mod check;
mod plan;
mod record;
mod results;
use buffers::BufferPlan;
pub use plan::{FetchPlan, StreamBuffer, Timing};
pub use record::{CellVerdict, FetchParams, FetchRecord, FetchWitness, StreamBufferKind, StreamBufferParams};
pub use results::{CellResult, CellSummary, ProcFigures, RepeatResult, table};
pub(crate) use results::{ProcWire, placeholder_summary, proc_wire, summarize_cell, summarize_repeat};

/// One GET as a stream saw it.
pub(crate) struct OpSample {
    pub(crate) latency: Duration,
    pub(crate) ttfb: Option<Duration>,
    pub(crate) bytes: u64,
    pub(crate) path: TransferPath,
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

fn progress_bar() -> ProgressBar {
    // Hidden by indicatif when stderr is not a terminal.
    let pb = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    pb.set_style(ProgressStyle::with_template("{spinner} {msg}").expect("static template"));
    pb.enable_steady_tick(Duration::from_millis(200));
    pb
}

/// Check the flags and choose the stream buffers.
fn check_args(plan: &FetchPlan) -> Result<(BufferPlan, buffers::PlanInput)> {
    if plan.run.store.backend == crate::store::Backend::Local && plan.run.store.endpoint.is_some() {
        eprintln!("warning: {ENDPOINT} is set but {BACKEND} is local: pass {BACKEND} http to use it");
    }
    if plan.prefix.is_empty() {
        return Err(Error::Usage(format!("{PREFIX} must not be empty")));
    }
    store::check_key(&object_key(&plan.prefix, 1, 0)).map_err(|e| Error::Usage(format!("invalid {PREFIX} '{}': {e}", plan.prefix)))?;
    let max_size = *plan.sizes.iter().max().expect("the flag parser gives at least one size");
    let max_c = *plan.concurrency.iter().max().expect("the flag parser gives at least one count") as u64;
    let max_p = *plan.procs.iter().max().expect("the flag parser gives at least one count") as u64;
    let mut sys = sysinfo::System::new();
    sys.refresh_memory();
    // --prepare fills each missing object from one host buffer of its size
    // (the store API puts whole objects): refuse before anything is created.
    let available = sys.available_memory();
    if plan.prepare && available > 0 && max_size > available / 10 * 9 {
        return Err(Error::Usage(format!(
            "{PREPARE} writes each object from one host buffer, and objects of {} exceed the {} of memory available: lower {SIZES}, or create the objects another way and pass {NO_PREPARE}",
            size_name(max_size),
            size_approx(available)
        )));
    }
    // Every process of the widest cell holds its own buffers (on one host unless launched across hosts).
    let input = buffers::PlanInput {
        flag: plan.stream_buffer,
        dest: plan.run.mem.dest,
        max_size,
        streams: max_c.saturating_mul(max_p),
        total: sys.total_memory(),
        available,
    };
    Ok((buffers::plan(&input)?, input))
}

/// Make sure every object exists with the right size; with `prepare`, write
/// missing or wrong-sized ones with their [`Pattern`] (pseudo-random, never
/// zeros, no two objects alike: nothing for a store to compress or dedupe;
/// `--verify` checks every byte read against it).
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
                    detail: format!("object is {} bytes, expected {size}: pass {PREPARE} to rewrite it", m.size),
                    cause: None,
                }));
            }
            Err(StoreError::NotFound { bucket, key, location }) if !prepare => {
                return Err(Error::Runtime(format!("object '{key}' not found in bucket '{bucket}' at {location}: pass {PREPARE} to create it")));
            }
            Ok(_) | Err(StoreError::NotFound { .. }) => missing.push(key),
            Err(e) => return Err(e.into()),
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    eprintln!("prepare: writing {} object(s) of {} to {}", missing.len(), size_name(size), store.location());
    let pb = progress_bar();
    let mut buf = Buffer::host(size as usize);
    for (i, key) in missing.iter().enumerate() {
        pb.set_message(format!("prepare: writing {key} ({}/{})", i + 1, missing.len()));
        Pattern::of(key).fill(0, buf.as_host_mut().expect("host buffer"));
        store.put_from(key, &buf).await?;
    }
    pb.finish_and_clear();
    Ok(())
}

/// Run `buffers.len()` streams over objects of `size` bytes until `stop`;
/// returns every object read (one or more GETs each) and the wall time.
async fn run_streams(
    store: &Arc<dyn ObjectStore>,
    keys: &Arc<Vec<String>>,
    buffers: &mut Vec<Buffer>,
    size: u64,
    stop: Stop,
    counter: &Arc<AtomicU64>,
    verify: bool,
) -> Result<(Vec<OpSample>, Duration)> {
    let n = buffers.len();
    // --verify: each stream checks on its share of this host's cores.
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let verify = verify.then(|| cores.div_ceil(n.max(1)));
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
            let expect = size;
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
                    match buffers::read_object(&store, key, expect, &mut buf, verify).await {
                        Ok(tr) if tr.bytes != expect => {
                            failed.store(true, Ordering::Relaxed);
                            result = Err(StoreError::ShortBody { key: key.clone(), location: store.location(), got: tr.bytes, expected: expect }.into());
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
        Some(e) => Err(e),
        None => Ok((all, end - t0)),
    }
}

/// Everything a cell needs besides its own dimensions.
struct CellCtx<'a> {
    session: &'a Session,
    plan: &'a FetchPlan,
    buffering: BufferPlan,
}

/// One buffer per stream for a cell of `size`-byte objects, allocated and
/// touched (large host buffers on one thread each: faulting in 4 x 256 MiB
/// one after another was most of a short run's process time).
///
/// Errors: memory the host or GPU cannot give, naming the amount.
fn cell_buffers(cx: &CellCtx<'_>, size: u64, streams: u32) -> Result<Vec<Buffer>> {
    let (session, dest) = (cx.session, cx.session.mem.dest);
    let len = buffers::buffer_len(cx.buffering, size);
    let alloc = || session.buffer(len as usize);
    let made = if dest == Dest::Host && streams > 1 && len >= 64 << 20 {
        std::thread::scope(|s| {
            let hs: Vec<_> = (0..streams).map(|_| s.spawn(alloc)).collect();
            hs.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("allocation thread panicked".into()))).collect::<std::result::Result<Vec<_>, _>>()
        })
    } else {
        (0..streams).map(|_| alloc()).collect::<std::result::Result<_, _>>()
    };
    made.map_err(|e| Error::Runtime(format!("cannot allocate {} x {} of {} memory: {e}", streams, size_name(len), dest.name())))
}

/// One cell: `procs` processes (ranks below `procs`; the others wait at the
/// same barriers) each running `streams` streams over `keys`.
async fn run_cell(cx: &CellCtx<'_>, keys: &Arc<Vec<String>>, size: u64, streams: u32, procs: u32) -> Result<CellResult> {
    let (session, plan) = (cx.session, cx.plan);
    let (store, me) = (&session.store, &session.me);
    let active = me.rank < procs as usize;
    // Buffers are allocated (and their pages touched) before any timed window.
    let mut buffers = if active { cell_buffers(cx, size, streams)? } else { Vec::new() };
    let counter = Arc::new(AtomicU64::new(0));
    let pb = if me.is_root() { progress_bar() } else { ProgressBar::hidden() };
    let mut repeats = Vec::new();
    for rep in 1..=plan.timing.repeats {
        let label = format!("{} x {streams} streams x {procs} procs, repeat {rep}/{}", size_name(size), plan.timing.repeats);
        if !plan.timing.warmup.is_zero() && active {
            pb.set_message(format!("{label}: warm-up"));
            run_streams(store, keys, &mut buffers, size, Stop::At(Instant::now() + plan.timing.warmup), &counter, plan.verify).await?;
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
        let stop = match plan.timing.iters {
            Some(k) => Stop::Iters(k),
            None => Stop::At(Instant::now() + plan.timing.duration),
        };
        // --series: the counter's growth per interval, sampled beside the streams.
        let series_buf: Arc<std::sync::Mutex<Vec<[f64; 2]>>> = Default::default();
        let series_task = plan.series.map(|every| {
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
        let res = if active { run_streams(store, keys, &mut buffers, size, stop, &counter, plan.verify).await } else { Ok((Vec::new(), Duration::ZERO)) };
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

/// `s3rdma fetch` as a [`Bench`]: the plan, the stream buffers chosen and
/// the keys of every size, then what the run checked.
#[derive(Debug)]
pub struct Fetch {
    plan: FetchPlan,
    buffering: BufferPlan,
    /// What the stream buffers are chosen from ([`Bench::setup`]).
    buffer_input: Option<buffers::PlanInput>,
    /// Who chose the stream buffers (the table's line and the record's).
    chosen_by: String,
    key_sets: Vec<(u64, Arc<Vec<String>>)>,
    /// What `--verify` checked, or why bytes were not compared (the line under the table).
    checked: String,
}

impl Fetch {
    /// The bench of `plan` (repeated sizes, stream counts and process counts run once).
    pub fn new(mut plan: FetchPlan) -> Self {
        dedup(&mut plan.sizes);
        dedup(&mut plan.concurrency);
        dedup(&mut plan.procs);
        Fetch { plan, buffering: BufferPlan::Object, buffer_input: None, chosen_by: String::new(), key_sets: Vec::new(), checked: String::new() }
    }
}

impl Bench for Fetch {
    type Params = FetchParams;
    type Results = Vec<CellResult>;

    async fn setup(&mut self) -> Result<Option<SessionSpec>> {
        let plan = &self.plan;
        let (buffering, input) = check_args(plan)?;
        (self.buffering, self.buffer_input) = (buffering, Some(input));
        let max_procs = *plan.procs.iter().max().expect("the flag parser gives at least one count") as usize;
        Ok(Some(SessionSpec {
            world: World::AtLeast(max_procs),
            // One RDMA worker (and client) per stream of the widest cell.
            rdma_threads: *plan.concurrency.iter().max().expect("the flag parser gives at least one count"),
            create_bucket: plan.prepare,
            ..plan.run.spec("fetch")
        }))
    }

    /// Errors: stream buffers that do not fit, an I/O plan off RDMA under
    /// `--require-rdma`, the objects' preparation.
    async fn prepare(&mut self, session: &mut Session) -> Result<()> {
        let plan = &self.plan;
        let store = session.store.clone();
        self.chosen_by = if self.buffering == BufferPlan::Reused(None) {
            "auto: whole-object buffers would need over half of this host's memory".to_string()
        } else if plan.stream_buffer == StreamBuffer::Auto {
            "auto".to_string()
        } else {
            STREAM_BUFFER.to_string()
        };
        self.buffering = buffers::resolve(
            self.buffering,
            self.buffer_input.as_ref().expect("setup ran"),
            store.as_ref(),
            "whole-object buffers for every stream would need over half of this host's memory",
        )?;
        for &size in &plan.sizes {
            for w in store.preflight(size) {
                session.warn(w);
            }
        }
        let mut planned: Vec<(String, crate::store::PlannedIo)> = Vec::new();
        for &size in &plan.sizes {
            planned.push((format!("fetch of {size}-byte objects"), crate::store::PlannedIo::Get { whole: true, bytes: size }));
            if plan.prepare {
                planned.push((format!("{PREPARE} of {size}-byte objects"), crate::store::PlannedIo::Put { bytes: size }));
            }
        }
        session.check_io_plan(&planned, Some(&format!("{SIZES} of at most 4294967295 bytes (4 GiB - 1) stay on RDMA")))?;
        for &size in &plan.sizes {
            let keys: Vec<String> = (0..plan.objects).map(|i| object_key(&plan.prefix, size, i)).collect();
            if session.me.is_root() {
                prepare_objects(store.as_ref(), &keys, size, plan.prepare).await?;
            }
            self.key_sets.push((size, Arc::new(keys)));
        }
        session.group.barrier("prepared").await?;
        Ok(())
    }

    async fn measure(&mut self, session: &Arc<Session>) -> Result<Outcome<FetchParams, Vec<CellResult>>> {
        let (plan, buffering) = (&self.plan, self.buffering);
        let cx = CellCtx { session, plan, buffering };
        let mut cells = Vec::new();
        for (size, keys) in &self.key_sets {
            for &c in &plan.concurrency {
                for &p in &plan.procs {
                    cells.push(run_cell(&cx, keys, *size, c, p).await?);
                }
            }
        }
        let mut windows = Vec::new();
        let mut stats = StoreStats::default();
        for (i, c) in cells.iter().enumerate() {
            for r in &c.repeats {
                windows.push((
                    WindowId { cell: i, repeat: r.repeat },
                    format!("{} x {} streams x {} procs, repeat {}", size_name(c.size_bytes), c.concurrency, c.procs, r.repeat),
                    r.witness.clone(),
                ));
                stats.add(&r.store_stats);
            }
        }
        let verdict_cells = serde_json::to_value(cells.iter().map(CellVerdict::of).collect::<Vec<_>>())
            .map_err(|e| Error::Runtime(format!("cannot encode the per-cell verdicts: {e}")))?;
        let fits = |size: u64| match buffering {
            BufferPlan::Object => true,
            BufferPlan::Reused(n) => n.is_some_and(|n| size <= n),
        };
        let whole = (plan.sizes.iter().any(|&s| fits(s)), plan.sizes.iter().all(|&s| fits(s)));
        let verify_checks = plan.verify.then(|| buffers::verify_checks(session.store.as_ref(), session.mem.dest, whole));
        let params = FetchParams {
            sizes_bytes: plan.sizes.clone(),
            concurrency: plan.concurrency.clone(),
            procs: plan.procs.clone(),
            objects: plan.objects,
            prefix: plan.prefix.clone(),
            bucket: plan.run.store.bucket.clone(),
            duration_s: plan.timing.iters.is_none().then_some(plan.timing.duration.as_secs_f64()),
            iters: plan.timing.iters,
            warmup_s: plan.timing.warmup.as_secs_f64(),
            repeats: plan.timing.repeats,
            prepare: plan.prepare,
            verify: plan.verify,
            verify_checks: verify_checks.clone(),
            stream_buffer: buffers::describe(buffering, &self.chosen_by),
        };
        self.checked = match &verify_checks {
            Some(what) => format!("{VERIFY}: every byte read (warm-up included) matched what {PREPARE} wrote; checked: {what}"),
            None => format!("bytes not compared with what {PREPARE} wrote (lengths and object versions are checked): pass {VERIFY} to compare every byte"),
        };
        let mut outcome = Outcome::new(params, cells, windows);
        outcome.witness_extra = vec![("cells", verdict_cells)];
        outcome.stats = stats;
        Ok(outcome)
    }

    fn print(&self, session: &Session, cells: &Vec<CellResult>) {
        let store = &session.store;
        let gpu = session.gpu().ok().flatten().map(|g| format!(" on GPU {} ({})", g.ordinal, g.name)).unwrap_or_default();
        println!("fetch over {} ({}), bucket '{}', into {} memory{gpu}", store.capabilities().name, store.location(), store.bucket(), session.mem.dest.name());
        if let BufferPlan::Reused(Some(n)) = self.buffering {
            println!("each stream reads through one reusable {} buffer, in ranged reads ({}); the bytes are not kept", size_name(n), self.chosen_by);
        }
        if store.capabilities().page_cache {
            println!("local reads go through the page cache: pass {DIRECT} for O_DIRECT reads");
        }
        println!("{}", table(cells));
        println!("{}", self.checked);
        if self.plan.timing.repeats > 1 {
            println!("GB/s: median (min–max) over repeats; latency columns: the median-throughput repeat");
        }
    }

    /// With `--json` stdout is the record alone: what was checked goes to stderr.
    fn json_note(&self) -> Option<String> {
        Some(self.checked.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampler::SamplerReport;
    use crate::witness;

    #[test]
    fn keys_and_sizes_render() {
        assert_eq!(object_key("fetch/", 1048576, 3), "fetch/1048576/obj-000003");
        assert_eq!(size_name(64_000_000), "64MB");
        assert_eq!(size_name(1_500_001), "1.4MiB");
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
            server_cpu_cores: None,
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
        assert!(r.ttfb_ms.is_none());
        assert_eq!(r.latency_ms.as_ref().unwrap().p50_ms, 10.0);

        // Two processes on one host, windows 100.0-102.0 and 100.5-103.0:
        // bytes summed over a 3 s span, client cores summed, host cores the max.
        let a = proc_wire(0, "h", &ops, Duration::from_secs(2), 100.0, &s);
        let mut s2 = s.clone();
        s2.client_cpu_cores = 0.25;
        s2.host_cpu_cores = 1.5;
        let b = proc_wire(1, "h", &ops[..2], Duration::from_millis(2500), 100.5, &s2);
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
