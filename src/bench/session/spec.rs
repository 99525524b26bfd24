//! What a bench tells the session before it starts ([`SessionSpec`],
//! [`World`]), and the one thing the session learns about the store's server
//! on its way up (a server on this host, [`watch_local_server`]). Part of the
//! session (`session/mod.rs`).

use crate::error::{Error, StoreError};
use crate::flag::BACKEND;
use crate::mem::MemConfig;
use crate::ranks::GroupConfig;
use crate::record::OutputConfig;
use crate::store::{ObjectStore, StoreConfig};
use crate::witness::WitnessConfig;

/// How many processes a bench wants and what a launcher's count means to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum World {
    /// One process (weights, tokens, verify).
    Single,
    /// `--ranks N`: N processes; a launcher's own count wins (with a warning when they differ).
    Ranks(Option<u32>),
    /// `--procs a,b,..`: the largest count; a launcher must start at least that many.
    AtLeast(usize),
}

/// What every bench starts from: the shared flags (store, witness, memory,
/// output, ranks) made configuration once, at the command line's edge
/// (`cli/plan.rs`); no bench sees a flag. Each bench's own plan
/// (e.g. [`FetchPlan`](crate::bench::fetch::FetchPlan)) holds one of these
/// beside its own settings.
#[derive(Debug, Clone)]
pub struct RunPlan {
    /// The store (AWS settings resolved).
    pub store: StoreConfig,
    /// Where the witness scrapes.
    pub witness: WitnessConfig,
    /// Stop unless every window is rdma-verified (exit 3).
    pub require_rdma: bool,
    /// Memory, the destination resolved (benches without a `--dest`: host).
    pub mem: MemConfig,
    /// Where the record goes.
    pub output: OutputConfig,
    /// How ranks meet (`None` for single-process benches: the defaults).
    pub group: Option<GroupConfig>,
    /// The local backend on the directory the tool owns (`./s3rdma-data`),
    /// where a read-only bench may create its bucket unasked.
    pub default_local_dir: bool,
}

impl RunPlan {
    /// `--run-id`, when this bench meets ranks and one was given.
    pub fn run_id(&self) -> Option<&str> {
        self.group.as_ref().and_then(|g| g.run_id.as_deref())
    }

    /// The session this plan starts for `bench` (the record's `benchmark`),
    /// before the bench adds its own needs with struct-update syntax.
    pub fn spec(&self, bench: &'static str) -> SessionSpec {
        SessionSpec {
            require_rdma: self.require_rdma,
            group: self.group.clone(),
            ..SessionSpec::new(bench, self.store.clone(), self.witness.clone(), self.mem.clone(), self.output.clone())
        }
    }
}

/// How long and how often each cell of a bench runs (`--duration`, `--iters`, `--warmup`, `--repeats`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// Timed window per cell and repeat (ignored when `iters` is set).
    pub duration: std::time::Duration,
    /// Instead of `duration`: operations per stream per cell and repeat.
    pub iters: Option<u32>,
    /// Untimed warm-up before each cell and repeat (zero: none).
    pub warmup: std::time::Duration,
    /// Timed repeats per cell.
    pub repeats: u32,
}

/// The plan of a bench with no settings of its own: the shared ones, its
/// timing, the key prefix it works under, and whether it may create what
/// it reads (`--prepare`). A bench made from this needs no flags of its own
/// in the CLI (`SharedArgs` there).
#[derive(Debug, Clone)]
pub struct SharedPlan {
    /// The shared configuration.
    pub run: RunPlan,
    /// How long and how often.
    pub timing: Timing,
    /// Key prefix the bench works under (`None`: the bench's own default).
    pub prefix: Option<String>,
    /// Create the bucket and the objects the bench reads.
    pub prepare: bool,
}

/// What a bench tells the session before it starts: the configuration made
/// of the flags once ([`RunPlan::spec`]), and the bench's needs.
#[derive(Debug, Clone)]
pub struct SessionSpec {
    /// Subcommand name: the record's `benchmark`.
    pub bench: &'static str,
    /// The store.
    pub store: StoreConfig,
    /// The witness.
    pub witness: WitnessConfig,
    /// Stop unless every window is rdma-verified (exit 3).
    pub require_rdma: bool,
    /// The memory configuration (destination resolved).
    pub mem: MemConfig,
    /// How ranks meet (`None`: defaults, for single-process benches).
    pub group: Option<GroupConfig>,
    /// Where the record goes.
    pub output: OutputConfig,
    /// Processes wanted.
    pub world: World,
    /// rdma: worker threads (one client each) when `--rdma-threads` is not given: the bench's widest fan-out.
    pub rdma_threads: u32,
    /// Create the bucket when it is missing (rank 0 only).
    pub create_bucket: bool,
    /// Turns a missing bucket into the bench's own message (e.g. "ingest a dataset first").
    pub no_bucket: fn(StoreError) -> Error,
    /// Rank 0 checks (or creates) the bucket before the bench runs; false for
    /// a bench that reports an unreachable bucket as a finding of its own (verify).
    pub ensure_bucket: bool,
    /// Leave the GPU opening in the background past [`Session::start`](super::Session::start) until
    /// the first [`Session::gpu`](super::Session::gpu) or [`Session::pooled_buffers`](super::Session::pooled_buffers) (weights reads its
    /// headers meanwhile, which shortens its time to ready). Over rdma the GPU is still open
    /// before the store (its workers bind the context when they start).
    pub defer_gpu: bool,
}

impl SessionSpec {
    /// A single-process bench on an existing bucket (the store's own
    /// message when it is missing), one rdma worker; override fields with
    /// struct-update syntax.
    pub fn new(bench: &'static str, store: StoreConfig, witness: WitnessConfig, mem: MemConfig, output: OutputConfig) -> Self {
        SessionSpec {
            bench,
            store,
            witness,
            require_rdma: false,
            mem,
            group: None,
            output,
            world: World::Single,
            rdma_threads: 1,
            create_bucket: false,
            no_bucket: store_error,
            ensure_bucket: true,
            defer_gpu: false,
        }
    }
}

/// When the store's server is a process on this host (a loopback
/// endpoint: `environment.store.server.local_process`), every window also
/// measures its CPU ([`crate::sampler::watch_server`]); returns the line rank
/// 0 prints under the table, saying the figures include that server.
pub(super) fn watch_local_server(store: &dyn ObjectStore) -> Option<String> {
    let d = store.describe();
    let server = d.get("server").or_else(|| d.get("control_plane").and_then(|c| c.get("server")));
    let local = server.and_then(|s| s.get("local_process")).filter(|l| !l.is_null())?;
    let pids: Vec<i32> = local["pids"].as_array().into_iter().flatten().filter_map(|p| p.as_i64()).map(|p| p as i32).collect();
    let who = match pids.as_slice() {
        [one] => format!("pid {one}"),
        many => format!("{} processes, pids {}", many.len(), many.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", ")),
    };
    if !pids.is_empty() {
        crate::sampler::watch_server(pids);
    }
    Some(format!(
        "server: {} at {} runs on this host ({who}): it shares this host's CPU, so the figures include it (record: environment.store.server; its CPU per window, all its processes: server_cpu_cores)",
        local["process"].as_str().unwrap_or("?"),
        server.and_then(|s| s["endpoint"].as_str()).unwrap_or("?"),
    ))
}

/// The default [`SessionSpec::no_bucket`]: the store's own message.
pub fn store_error(e: StoreError) -> Error {
    e.into()
}

/// [`SessionSpec::no_bucket`] of a bench with no preparing step of its own
/// (`ckpt`, `barrier`): a missing bucket is the operator's to create.
pub fn create_bucket_first(e: StoreError) -> Error {
    match e {
        StoreError::NoSuchBucket { bucket, location } => {
            Error::Runtime(format!("bucket '{bucket}' does not exist at {location}: create it first (mc mb, aws s3 mb, or mkdir for {BACKEND} local)"))
        }
        e => e.into(),
    }
}
