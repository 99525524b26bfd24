//! The run lifecycle every bench shares (its place in the layout: docs/architecture.md).
//!
//! A [`Session`] owns, once per process: launcher and rank detection (and,
//! when no launcher started us, starting the ranks ourselves), the GPU, the
//! store (opened once, wrapped in [`Counted`] so client-side bytes per path
//! come from the store layer), the witness, and the group the ranks meet in.
//! A bench brings its work and its typed results; the session brackets every
//! timed window in one fixed order and ends the run in one place:
//!
//! ```text
//! open_window:  every rank finished warm-up -> barrier; rank 0, once all arrived,
//!               takes the opening scrape, then releases the others (`go`)
//! work          (the bench's)
//! close_window: barrier; rank 0, once all arrived, takes the closing scrape, then
//!               releases the others; every rank sends its figures, store counters
//!               and in-window meeting requests -> rank 0 judges -> verdict
//! finish:       every rank sends its meeting counts -> rank 0 prints the table,
//!               writes the record -> exit code (exit_status)
//! ```
//!
//! The ranks' meeting requests that can fall inside a window (rank 0's `go`
//! PUT after the opening scrape and its marker and listings before the
//! closing one; the others' markers and polls of `go` at both) are counted and
//! declared to the witness (`coordination_requests`, `coordination_bytes`:
//! part of the HTTP allowance); everything else of the meeting is outside
//! the scrapes.
//!
//! Exit codes are decided by [`exit_status`] only (README "Exit codes").

use std::sync::{Arc, OnceLock};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::mem::{Buffer, Dest, Gpu, MemConfig};
use crate::ranks::{self, Coordination, Group, Rank};
use crate::record::{CoordinationEnvironment, Environment, GpuEnvironment, OutputConfig, RanksEnvironment, RunRecord, StoreStatsEnvironment};
use crate::store::counted::Counted;
use crate::store::{self, Backend, ObjectStore, StoreConfig, StoreStats};
use crate::witness::{self, Payload, Verdict, Witness, WitnessReport};

/// Most ranks this binary starts on one host itself (`--ranks`, `--procs`):
/// each is a process with its own runtime; 1,024 already needs a large host.
pub const MAX_LOCAL_RANKS: usize = 1024;

/// One run of one bench in this process (one rank of it).
#[derive(Debug)]
pub struct Session {
    /// Subcommand name.
    pub bench: &'static str,
    /// This process's rank.
    pub me: Rank,
    /// The memory configuration with this rank's GPU assigned.
    pub mem: MemConfig,
    /// The GPU `--dest pinned|device` opens, once resolved ([`Session::gpu`]).
    gpu: OnceLock<Option<Arc<Gpu>>>,
    /// The store, counting bytes per transfer path.
    pub store: Arc<dyn ObjectStore>,
    counted: Arc<Counted>,
    store_args: StoreConfig,
    /// The server-side witness.
    pub witness: Witness,
    /// The ranks of this run.
    pub group: Group,
    /// When the run started (record timestamp and file name).
    pub started: chrono::DateTime<chrono::Utc>,
    /// This host's name.
    pub host: String,
    output: OutputConfig,
    /// What the record's `environment.warnings` says: the store's before any
    /// transfer ([`Transport::preflight`] of size 0), then whatever a bench
    /// adds through [`Session::warn`].
    warnings: std::sync::Mutex<Vec<String>>,
    /// How long each timed window of this rank lasted, seconds (see [`short_windows`]).
    window_lengths: std::sync::Mutex<Vec<f64>>,
    /// A bench that stages device memory its own way (not through
    /// [`Session::buffer`]'s bounce buffers) says how here, and the record's
    /// `environment.device_path` shows this instead of the bounce-buffer settings.
    pub device_path: Option<Value>,
    /// The line about a server on this host, printed under the table.
    server_note: Option<String>,
    require_rdma: bool,
    windows: std::sync::atomic::AtomicU64,
}

/// An open timed window (see [`Session::open_window`]).
#[derive(Debug)]
pub struct OpenWindow {
    name: String,
    scrape: Option<witness::Window>,
    stats: StoreStats,
    /// This rank's meeting requests after the opening scrape may have begun.
    coordination: Coordination,
    /// This rank's RDMA rails at the open, where the store counts them.
    rails: Option<crate::store::Rails>,
    /// When the opening meeting released this rank.
    opened: std::time::Instant,
}

/// A timed window shorter than this (seconds) measures the clock, the
/// scheduler and the meetings around it more than the store: its rate is
/// said to be noise (10 ms: a Linux scheduler time slice is 1–10 ms, and one
/// preemption would then move the figure by up to 100%).
pub const SHORT_WINDOW_S: f64 = 0.010;

/// The warning for a run whose timed windows lasted `lasted_s` seconds each
/// (from the opening meeting's release to the closing one's start), when any
/// is under [`SHORT_WINDOW_S`]: how many, and the shortest.
pub(crate) fn short_windows(lasted_s: &[f64]) -> Option<String> {
    let short: Vec<(usize, f64)> = lasted_s.iter().copied().enumerate().filter(|(_, l)| *l < SHORT_WINDOW_S).collect();
    let (i, shortest) = short.iter().copied().min_by(|a, b| a.1.total_cmp(&b.1))?;
    Some(format!(
        "{} of {} timed windows lasted under {} ms (the shortest, window {}, {:.3} ms): their rates measure the clock and the scheduler more than the store; do more work per window (more bytes, keys or iterations)",
        short.len(),
        lasted_s.len(),
        SHORT_WINDOW_S * 1e3,
        i + 1,
        shortest * 1e3
    ))
}

/// `environment.gpu` of a record: the device `gpu` is.
pub(crate) fn gpu_environment(gpu: &Gpu) -> GpuEnvironment {
    GpuEnvironment { ordinal: gpu.ordinal, name: gpu.name.clone(), memory_bytes: Some(gpu.total_mem) }
}

/// `--require-rdma` with a store that says RDMA is unavailable: the
/// library's own evidence that no window could be rdma-verified, so none is
/// run; rank 0 writes a record saying why, and every rank exits 3.
fn refuse_unavailable(
    spec: &SessionSpec,
    me: &Rank,
    store: &dyn ObjectStore,
    witness: &Witness,
    started: chrono::DateTime<chrono::Utc>,
    why: &str,
) -> Result<()> {
    let reason = format!("{why}: nothing was measured");
    if !me.is_root() {
        return exit_status(None, true, Verdict::Unverified, &reason);
    }
    let record = RunRecord {
        environment: Environment { store: store.describe(), witness: witness.describe(), ..Environment::default() },
        params: Value::Null,
        results: Value::Null,
        rdma_witness: json!({"verdict": Verdict::Unverified, "reason": reason, "config": witness.describe()}),
        ..RunRecord::new(spec.bench, store.capabilities().name, started, spec.output.tag.clone())
    };
    let print = || println!("witness: {} ({reason})", Verdict::Unverified.as_str());
    conclude(&record, &spec.output, started, print, None, true, Verdict::Unverified, &reason)
}

/// Which way a window moved its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// GETs: server to client.
    Read,
    /// PUTs: client to server.
    Write,
}

/// What every rank sends rank 0 when a window closes.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Wire<T> {
    payload_bytes: u64,
    stats: StoreStats,
    /// This rank's meeting requests that may have reached the server inside the window.
    coordination: Coordination,
    /// This rank's rails at the window's open and close.
    #[serde(default)]
    rails: Option<witness::RailsWindow>,
    figures: T,
}

/// A closed window: every rank's figures (rank order) and, on rank 0, the verdict.
#[derive(Debug, Clone)]
pub struct Closed<T> {
    /// Every rank's figures on rank 0; this rank's alone elsewhere.
    pub ranks: Vec<T>,
    /// The witness's report (rank 0 only).
    pub witness: Option<WitnessReport>,
    /// The store counters' growth over the window, summed over ranks.
    pub stats: StoreStats,
}

/// What the witness compares a window against: every data byte the
/// client's store layer moved in it, per direction (`data_read_bytes`,
/// `data_write_bytes`, summed over ranks), with the part beyond the bench's
/// timed `bench_bytes` in direction `dir` declared as overhead (manifests,
/// indexes, headers: the server counts them too); the client's own HTTP
/// bytes; and its requests, data and control (HEAD, LIST, DELETE).
pub fn window_payload(total: &StoreStats, dir: Direction, bench_bytes: u64) -> Payload {
    let (mut read_bytes, mut write_bytes) = (total.get("data_read_bytes"), total.get("data_write_bytes"));
    // A bench whose figure was not moved through the counted store still
    // declares it: the larger of the two counts.
    match dir {
        Direction::Read => read_bytes = read_bytes.max(bench_bytes),
        Direction::Write => write_bytes = write_bytes.max(bench_bytes),
    }
    Payload {
        read_bytes,
        write_bytes,
        overhead_bytes: (read_bytes + write_bytes).saturating_sub(bench_bytes),
        client_http_bytes: total.http_bytes(),
        requests: total.get("requests") + total.get("control_requests"),
        coordination_bytes: 0,
    }
}

impl Session {
    /// Start a run: check the results directory, find this process's rank
    /// (or start the ranks and wait for them: then `Ok(None)`), open the
    /// GPU, the witness and the store, create or check the bucket, join the group.
    ///
    /// Errors: usage errors for bad flags (once, before any rank starts), the
    /// store's errors, a rank's failure (its exit code).
    pub async fn start(spec: SessionSpec) -> Result<Option<Session>> {
        crate::record::check_results_dir(&spec.output.results_dir)?;
        let group_args = spec.group.clone().unwrap_or_default();
        if let Some(id) = &group_args.run_id {
            ranks::check_run_id(id)?;
        }
        let Some(me) = find_rank(&spec, &group_args).await? else { return Ok(None) };
        ranks::injected_fault(&me)?;
        let mut mem = spec.mem.clone();
        let dest = mem.dest;
        mem.device = ranks::gpu_for(&me, dest, mem.device);
        // The GPU opens on its own thread while the witness and the store
        // start (with `defer_gpu`, also while the bench reads what needs no
        // GPU); joined before the bucket is created, so a missing GPU leaves
        // nothing behind. rdma workers bind it when they start: over rdma it
        // is joined before the store opens.
        if dest != Dest::Host {
            Gpu::open_in_background(mem.device);
        }
        let gpu = OnceLock::new();
        if dest == Dest::Host || spec.store.backend == Backend::Rdma {
            let _ = gpu.set(mem.open_gpu()?);
        }
        let witness = Witness::new(&spec.witness)?;
        let started = chrono::Utc::now();
        let mut store_args = spec.store.clone();
        store_args.rdma_threads = store_args.rdma_threads.or(Some(spec.rdma_threads.max(1)));
        let counted = Counted::new(Arc::from(store::open(&store_args)?));
        // Ranks meet through the bare store: their markers are not the bench's
        // traffic; over rdma, through plain HTTP to the same endpoint (control
        // traffic, never the library's: only the HTTP allowance declares it).
        let raw = if store_args.backend == Backend::Rdma {
            Arc::from(store::open(&StoreConfig { backend: Backend::Http, ..store_args.clone() })?)
        } else {
            counted.inner()
        };
        let counted = Arc::new(counted);
        let store: Arc<dyn ObjectStore> = counted.clone();
        let server_note = watch_local_server(store.as_ref());
        if spec.require_rdma
            && let Some(why) = store.transport_unavailable()
        {
            return refuse_unavailable(&spec, &me, store.as_ref(), &witness, started, &why).map(|()| None);
        }
        if !spec.defer_gpu && gpu.get().is_none() {
            let _ = gpu.set(mem.open_gpu()?);
        }
        // Rank 0 creates or checks the bucket; the others meet it there (joining waits for it).
        if me.is_root() && spec.ensure_bucket {
            store.ensure_bucket(spec.create_bucket).await.map_err(spec.no_bucket)?;
        }
        let group = Group::join(me.clone(), raw.clone(), group_args.barrier_timeout, group_args.rendezvous).await?;
        if me.world > 1 {
            ranks::clear_on_stop(raw, me.clone());
        }
        // What the store knows before any transfer (the library's own word,
        // reads it cannot carry), said once, before the run.
        let warnings = store.preflight(0);
        if me.is_root() {
            for w in &warnings {
                eprintln!("warning: {w}");
            }
        }
        let warnings = std::sync::Mutex::new(warnings);
        Ok(Some(Session {
            bench: spec.bench,
            me,
            mem,
            gpu,
            store,
            counted,
            store_args,
            witness,
            group,
            started,
            host: sysinfo::System::host_name().unwrap_or_default(),
            output: spec.output.clone(),
            warnings,
            window_lengths: Default::default(),
            device_path: None,
            server_note,
            require_rdma: spec.require_rdma,
            windows: Default::default(),
        }))
    }

    /// A destination buffer of `len` bytes in `--dest` memory, allocated (and
    /// touched) now, before any timed window. Device buffers get
    /// `--bounce-buffers` pinned bounce buffers of `--stage-chunk` bytes each (or the host's defaults)
    /// when the store cannot write device memory itself (staged reads), none otherwise.
    ///
    /// Errors: the allocator's message.
    pub fn buffer(&self, len: usize) -> std::result::Result<Buffer, String> {
        self.buffer_with(len, self.mem.bounce_buffers.0 as usize)
    }

    /// [`Session::buffer`] with `bounce` bounce buffers when the store stages.
    fn buffer_with(&self, len: usize, bounce: usize) -> std::result::Result<Buffer, String> {
        let gpu = self.gpu().map_err(|e| e.to_string())?;
        let bounce = if self.store.capabilities().device_writes { 0 } else { bounce };
        Buffer::for_dest(self.mem.dest, gpu.as_ref(), len, bounce, self.mem.chunk_bytes.0 as usize)
    }

    /// Buffers of `lens` bytes for one pooled staged read of them all
    /// ([`crate::store::staged_read_pooled`]): `--bounce-buffers` bounce
    /// buffers in all ([`crate::store::pool_shares`]: no more than the reads need), spread
    /// over the buffers.
    /// Allocated side by side on one thread each (pinning and zeroing run in
    /// parallel in the kernel and driver), in `lens`' order.
    ///
    /// Errors: the first allocator message.
    pub fn pooled_buffers(&self, lens: &[usize]) -> std::result::Result<Vec<Buffer>, String> {
        self.gpu().map_err(|e| e.to_string())?;
        let shares = crate::store::pool_shares(lens, self.mem.bounce_buffers.0 as usize, self.mem.chunk_bytes.0 as usize);
        std::thread::scope(|sc| {
            let hs: Vec<_> = lens.iter().zip(&shares).map(|(&n, &b)| sc.spawn(move || self.buffer_with(n, b))).collect();
            hs.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("a buffer allocation panicked".into()))).collect()
        })
    }

    /// The GPU that `--dest pinned|device` uses (`None` for host memory),
    /// waiting for its background open when it is not resolved yet.
    ///
    /// Errors: the driver's (no CUDA, no such device), with the fix.
    pub fn gpu(&self) -> Result<Option<Arc<Gpu>>> {
        if let Some(g) = self.gpu.get() {
            return Ok(g.clone());
        }
        let g = self.mem.open_gpu()?;
        Ok(self.gpu.get_or_init(|| g).clone())
    }

    /// A second client for the same bucket, configured by `edit` from this
    /// run's store settings (e.g. one stream, plain HTTP: the shape of
    /// `torch.save` + a PUT). Its bytes count into the same window figures.
    ///
    /// Errors: the store's configuration errors.
    pub fn open_variant(&self, edit: impl FnOnce(&mut StoreConfig)) -> Result<Arc<dyn ObjectStore>> {
        let mut a = self.store_args.clone();
        edit(&mut a);
        Ok(Arc::new(self.counted.sibling(Arc::from(store::open(&a)?))))
    }

    /// Whether stdout is the record alone (`--json`): no table is printed.
    pub fn json_output(&self) -> bool {
        self.output.json
    }

    /// Whether this process writes the record (rank 0).
    pub fn is_root(&self) -> bool {
        self.me.is_root()
    }

    /// Open a timed window: every rank calls it after its warm-up; all meet,
    /// and rank 0, once every rank has arrived, scrapes the servers' counters
    /// before it releases any (so no rank's warm-up or start-up reaches the
    /// window). Store counters are read per rank.
    ///
    /// Errors: a barrier that times out.
    pub async fn open_window(&self) -> Result<OpenWindow> {
        let n = self.windows.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("{}-window{n}", self.bench);
        let released = self.group.barrier_then(&format!("{name}-open"), || self.witness.begin()).await?;
        Ok(OpenWindow {
            name,
            scrape: released.root,
            stats: self.store.stats(),
            coordination: released.after,
            rails: self.store.rails(),
            opened: std::time::Instant::now(),
        })
    }

    /// Close a window: every rank calls it when its timed work (and any
    /// background I/O of its own) has stopped, with `payload_bytes` it moved
    /// in `dir` and its figures. All meet; rank 0, once every rank has
    /// arrived (every rank has finished), scrapes again before it releases
    /// any. Then, outside the window, every rank sends rank 0 its figures,
    /// store counters and the meeting requests it made inside the window,
    /// and rank 0 judges the window against the payload and the client's own
    /// HTTP bytes (from the store's counters); the others go on at once.
    ///
    /// Errors: a barrier that times out; figures that do not decode.
    pub async fn close_window<T: Serialize + DeserializeOwned + Clone>(
        &self,
        w: OpenWindow,
        dir: Direction,
        payload_bytes: u64,
        figures: T,
    ) -> Result<Closed<T>> {
        let stats = self.store.stats().since(&w.stats);
        let lasted = w.opened.elapsed().as_secs_f64();
        self.window_lengths.lock().unwrap_or_else(|p| p.into_inner()).push(lasted);
        let scrape = w.scrape;
        let closing = || async {
            match scrape {
                Some(s) => Some(self.witness.close(s).await),
                None => None,
            }
        };
        let released = self.group.barrier_then(&format!("{}-close", w.name), closing).await?;
        // What of this rank's meeting may lie between the two scrapes.
        let mut inside = w.coordination;
        inside.add(if self.is_root() { &released.before } else { &released.after });
        let rails = witness::RailsWindow::between(self.me.rank, w.rails, self.store.rails());
        // Said when a rail is lost in a window, and once for a run that starts degraded.
        static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        if let Some(r) = rails.filter(|r| r.lost() || (r.degraded() && !SAID.swap(true, std::sync::atomic::Ordering::Relaxed))) {
            SAID.store(true, std::sync::atomic::Ordering::Relaxed);
            eprintln!("warning: {}", r.note());
        }
        let mine = Wire { payload_bytes, stats, coordination: inside, rails, figures };
        let all: Vec<Wire<T>> = if self.me.world == 1 {
            vec![mine]
        } else {
            let encoded = serde_json::to_value(&mine).map_err(|e| Error::Runtime(format!("cannot encode figures for '{}': {e}", w.name)))?;
            match self.group.gather(&format!("{}-figures", w.name), &encoded).await? {
                None => return Ok(Closed { ranks: vec![mine.figures], witness: None, stats: mine.stats }),
                Some(values) => values
                    .into_iter()
                    .map(|v| serde_json::from_value(v).map_err(|e| Error::Runtime(format!("rank figures for '{}' do not decode: {e}", w.name))))
                    .collect::<Result<_>>()?,
            }
        };
        let mut total = StoreStats::default();
        let mut meeting = Coordination::default();
        for r in &all {
            total.add(&r.stats);
            meeting.add(&r.coordination);
        }
        let witness = released.root.flatten().map(|closed| {
            let bytes: u64 = all.iter().map(|r| r.payload_bytes).sum();
            let mut payload = window_payload(&total, dir, bytes);
            // The meeting's requests and bytes (plain HTTP) that may fall inside: declared.
            payload.requests += meeting.requests;
            payload.coordination_bytes = meeting.bytes;
            let mut report = self.witness.judge_closed(closed, payload);
            report.coordination_requests = meeting.requests;
            report.rails = all.iter().filter_map(|r| r.rails).collect();
            if let Some(note) = witness::rails_note(&report.rails) {
                report.reason = format!("{}; {note}", report.reason);
            }
            report
        });
        Ok(Closed { ranks: all.into_iter().map(|r| r.figures).collect(), witness, stats: total })
    }

    /// Say `warning` once (rank 0 prints it to stderr) and record it in the
    /// record's `environment.warnings`; a warning already said is not repeated.
    pub fn warn(&self, warning: String) {
        let mut all = self.warnings.lock().unwrap_or_else(|p| p.into_inner());
        if !all.contains(&warning) {
            if self.me.is_root() {
                eprintln!("warning: {warning}");
            }
            all.push(warning);
        }
    }

    /// Every warning said so far (see [`Session::warn`]).
    pub fn warnings(&self) -> Vec<String> {
        self.warnings.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Every rank's `mine`, in rank order, on rank 0; this rank's alone
    /// elsewhere (the others do not wait for rank 0).
    ///
    /// Errors: a barrier that times out; figures that do not decode.
    pub async fn gather<T: Serialize + DeserializeOwned + Clone>(&self, name: &str, mine: &T) -> Result<Vec<T>> {
        if self.me.world == 1 {
            return Ok(vec![mine.clone()]);
        }
        let v = serde_json::to_value(mine).map_err(|e| Error::Runtime(format!("cannot encode figures for '{name}': {e}")))?;
        match self.group.gather(name, &v).await? {
            None => Ok(vec![mine.clone()]),
            Some(all) => all
                .into_iter()
                .map(|v| serde_json::from_value(v).map_err(|e| Error::Runtime(format!("rank figures for '{name}' do not decode: {e}"))))
                .collect(),
        }
    }

    /// The environment every record carries: memory, store, witness, ranks.
    fn environment(&self) -> Environment {
        let gpu = self.gpu.get().cloned().flatten();
        // A bench's own account of its device path (ckpt's) replaces the bounce-buffer settings.
        let device_path = self.mem.device_path(self.store.capabilities().device_writes).map(|p| self.device_path.clone().unwrap_or(p));
        let mut warnings = self.warnings();
        // Said by the store's credential refresh, outside any session.
        if let Some(w) = crate::store::credentials::lifetime_warning().filter(|w| !warnings.contains(w)) {
            warnings.push(w);
        }
        Environment {
            dest: Some(self.mem.dest.name().to_string()),
            gpu: gpu.as_deref().map(gpu_environment),
            device_path,
            store: self.store.describe(),
            witness: self.witness.describe(),
            ranks: Some(RanksEnvironment {
                world: self.me.world,
                launcher: self.me.launcher.to_string(),
                run_id: self.me.run_id.clone(),
                local_world: self.me.local_world,
                coordination: None,
            }),
            warnings,
            store_stats: None,
        }
    }

    /// End the run: every rank meets a last time; rank 0 prints the table
    /// (`print`, or the record as JSON with `--json`), the witness line and
    /// the store's line, then writes the record; every rank then applies
    /// [`exit_status`]. A bench returns what this returns.
    ///
    /// Errors: the bench's failure, `--require-rdma` (exit 3), a record that
    /// cannot be written; a measurement the bench found invalid
    /// ([`Outcome::invalid`]: no record).
    pub async fn finish<P: Serialize, R: Serialize>(&self, o: Outcome<P, R>, print: impl FnOnce(&R)) -> Result<()> {
        // The last meeting: every rank's counts; the others are done after it.
        let counts = self.gather("done", &self.group.coordination()).await?;
        self.group.cleanup().await;
        let lengths = self.window_lengths.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(w) = short_windows(&lengths) {
            self.warn(w);
        }
        if let Some(e) = o.invalid {
            return Err(e);
        }
        if !self.is_root() {
            return exit_status(o.failure, false, Verdict::RdmaVerified, "");
        }
        let mut meeting = self.group.coordination();
        for c in counts.iter().skip(1) {
            meeting.add(c);
        }
        let without = match &o.verdict_without_windows {
            Some(why) => (Verdict::NotApplicable, why.clone()),
            None => (Verdict::Unverified, "no timed window ran".to_string()),
        };
        let (verdict, reason) = witness::worst(o.windows.iter().map(|(_, l, w)| (l.as_str(), w))).unwrap_or(without);
        let mut rdma_witness = json!({"verdict": verdict, "reason": reason, "config": self.witness.describe()});
        // Every window with the inputs it was judged from: what `report` judges again.
        let windows: Vec<Value> = o
            .windows
            .iter()
            .map(|(id, label, w)| {
                let mut v = serde_json::to_value(w).unwrap_or(Value::Null);
                v["label"] = json!(label);
                v["id"] = json!(id);
                v
            })
            .collect();
        rdma_witness["windows"] = Value::Array(windows);
        for (k, v) in o.witness_extra {
            rdma_witness[k] = v;
        }
        let mut environment = self.environment();
        if let Some(ranks) = environment.ranks.as_mut().filter(|_| self.me.world > 1) {
            ranks.coordination = Some(CoordinationEnvironment {
                rendezvous: self.group.method().name().to_string(),
                requests: meeting.requests,
                polls: meeting.polls,
                bytes: meeting.bytes,
                keys_listed: meeting.keys_listed,
                requests_in_windows: o.windows.iter().map(|(_, _, w)| w.coordination_requests).sum(),
            });
        }
        // The store's counters over the whole run on this rank (warm-ups,
        // preparation and listings included: a retry outside every timed
        // window still leaves a trace), beside their growth inside the windows.
        let whole_run = self.store.stats();
        let retries: Vec<String> = whole_run.0.iter().filter(|(k, v)| k.contains("retries") && **v > 0).map(|(k, v)| format!("{k} {v}")).collect();
        environment.store_stats = Some(StoreStatsEnvironment { whole_run_this_rank: whole_run.0, in_windows: o.stats.0.clone() });
        if let Some(gpu) = o.gpu {
            environment.gpu = Some(gpu);
        }
        let encode = |what: &str, v: serde_json::Result<Value>| v.map_err(|e| Error::Runtime(format!("cannot encode the {what}: {e}")));
        let record = RunRecord {
            environment,
            params: encode("params", serde_json::to_value(&o.params))?,
            results: encode("results", serde_json::to_value(&o.results))?,
            rdma_witness,
            ..RunRecord::new(self.bench, self.store.capabilities().name, self.started, self.output.tag.clone())
        };
        let stats_line = self.store.stats_summary(&o.stats);
        let print = || {
            print(&o.results);
            println!("witness: {} ({reason})", verdict.as_str());
            if let Some(line) = stats_line {
                println!("{line}");
            }
            if let Some(line) = &self.server_note {
                println!("{line}");
            }
            if !retries.is_empty() {
                println!("retries over the whole run (never in the figures): {}", retries.join(", "));
            }
        };
        conclude(&record, &self.output, self.started, print, o.failure, self.require_rdma, verdict, &reason)
    }
}

mod end;
mod io_plan;
mod launch;
mod outcome;
mod spec;
pub use end::{conclude, exit_status};
use launch::find_rank;
pub use outcome::Outcome;
use spec::watch_local_server;
pub use spec::{RunPlan, SessionSpec, SharedPlan, Timing, World, create_bucket_first, store_error};

#[cfg(test)]
mod tests {
    /// Windows under 10 ms are counted and the shortest named; a run whose
    /// windows all lasted 10 ms or more has no warning.
    #[test]
    fn windows_under_ten_milliseconds_are_said_to_be_noise() {
        assert_eq!(
            super::short_windows(&[0.5, 0.009, 0.000_068, 0.010]).as_deref(),
            Some(
                "2 of 4 timed windows lasted under 10 ms (the shortest, window 3, 0.068 ms): their rates measure the clock and the scheduler more than the store; do more work per window (more bytes, keys or iterations)"
            )
        );
        assert_eq!(super::short_windows(&[0.010, 2.5]), None);
        assert_eq!(super::short_windows(&[]), None);
    }
}
