//! Command-line interface (clap derive). Shared argument groups: [`StoreArgs`]
//! (which store and how to reach it), [`RunArgs`] (how long and how often),
//! [`OutputArgs`] (where the record goes).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

pub mod auto;
#[macro_use]
mod values;
mod bench_args;
mod bench_values;
mod flag_names;
mod parse;
mod plan;
mod store_args;
pub use bench_args::{
    BarrierArgs, CkptArgs, FetchArgs, IngestImagesArgs, IngestKind, IngestTokensArgs, IngestWeightsArgs, TokensArgs, TrainArgs, VerifyArgs, WeightsArgs,
};
pub use parse::parse;
pub use store_args::StoreArgs;

/// Benchmark deep-learning storage work over S3-over-RDMA, tuned S3-over-HTTP
/// and local disk, and prove from the server's counters which transport carried
/// the bytes.
#[derive(Debug, Parser)]
#[command(
    name = "s3rdma",
    version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("S3RDMA_GIT_COMMIT"), " ", env!("S3RDMA_BUILD_DATE"), ")"),
    long_version = concat!(
        env!("CARGO_PKG_VERSION"), " (", env!("S3RDMA_GIT_COMMIT"), " ", env!("S3RDMA_BUILD_DATE"), ")",
        "\ncommit:     ", env!("S3RDMA_GIT_COMMIT"),
        "\nbuild date: ", env!("S3RDMA_BUILD_DATE"), " (the commit's date)",
        "\ntarget:     ", env!("S3RDMA_TARGET"),
        "\nfeatures:   ", env!("S3RDMA_FEATURES"),
        "\ntrain:      ", env!("S3RDMA_TRAIN"),
    ),
    about,
    max_term_width = 100
)]
pub struct Cli {
    /// More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    #[command(subcommand)]
    /// The subcommand.
    pub command: Command,
}

/// The subcommands: the measuring benches (one line each, below), then
/// `ingest`, `report` and `completions`.
///
/// Each bench line reads `Doc Variant(Args) => Bench`: the subcommand's
/// help line, its flags (a clap `Args` struct with a `store` field and a
/// `plan()` method: `bench_args.rs`, or [`SharedArgs`] for a bench with no
/// flags of its own) and the value [`crate::bench::driver::drive`] runs,
/// made by `Bench::new(args.plan())`. The macro writes the enum variant,
/// the store flags' accessor and the dispatch from that one line.
macro_rules! subcommands {
    ($($(#[$doc:meta])* $variant:ident($args:ty) => $bench:ty,)*) => {
        /// The subcommands.
        #[derive(Debug, Subcommand)]
        pub enum Command {
            $($(#[$doc])* $variant($args),)*
            /// Build the datasets `tokens` and `train` read: token shards, raw image shards, JPEG tar shards.
            #[command(subcommand)]
            Ingest(IngestKind),
            /// Compare result records side by side: medians, ranges, CPU, ratio to a baseline, witness verdicts; plots.
            Report(ReportArgs),
            /// Print a shell completion script (bash, zsh, fish, elvish, powershell) to stdout.
            Completions {
                #[arg(value_enum)]
                /// The shell to write completions for.
                shell: clap_complete::Shell,
            },
        }

        impl Command {
            /// The store flags of a command that opens a store (`None`: report, completions).
            pub fn store_args_mut(&mut self) -> Option<&mut StoreArgs> {
                match self {
                    $(Command::$variant(a) => Some(&mut a.store),)*
                    Command::Ingest(IngestKind::Tokens(a)) => Some(&mut a.store),
                    Command::Ingest(IngestKind::Raw(a) | IngestKind::Jpeg(a)) => Some(&mut a.store),
                    Command::Ingest(IngestKind::Weights(a)) => Some(&mut a.store),
                    Command::Report(_) | Command::Completions { .. } => None,
                }
            }

            /// Run the command: a measuring subcommand through the bench driver.
            pub async fn run(self) -> crate::error::Result<()> {
                match self {
                    $(Command::$variant(a) => crate::bench::driver::drive(<$bench>::new(a.plan())).await,)*
                    Command::Ingest(kind) => crate::ingest::run(kind.plan()).await,
                    Command::Report(args) => crate::report::run(args.plan()).await,
                    Command::Completions { shell } => crate::report::write_stdout(&completions(shell)),
                }
            }
        }
    };
}

subcommands! {
    /// Raw storage read throughput: concurrent GETs of whole objects into memory.
    Fetch(FetchArgs) => crate::bench::fetch::Fetch,
    /// Bring-up check: PASS only when the server's counters prove RDMA carried the bytes.
    Verify(VerifyArgs) => crate::bench::verify::Verify,
    /// Checkpoint save and restore from GPU memory: flat chunked, async (stall = snapshot) and serialize-then-put, verified, per rank.
    Ckpt(CkptArgs) => crate::bench::ckpt::Ckpt,
    /// Tokenized int32 loader throughput into GPU memory, and how many GPUs it could feed.
    Tokens(TokensArgs) => crate::bench::tokens::Tokens,
    /// Model weights (Hugging Face safetensors) into GPU memory: cold start.
    Weights(WeightsArgs) => crate::bench::weights::Weights,
    /// ResNet-50 training (feature `train`) or its input pipeline alone (`--loader-only`): step-time breakdown by backend.
    Train(TrainArgs) => crate::bench::train::Train,
    /// Ranks meeting through the store, nothing else: barrier latency and requests per rank per barrier (docs/scaling.md).
    Barrier(BarrierArgs) => crate::bench::barrier::Barrier,
    /// Listing a prefix: listings/s, keys/s and one listing's latency (what a job pays to find its shards).
    List(SharedArgs) => crate::bench::list::List,
}

/// `s3rdma report`.
#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    /// Result records (results/*.json); files that are not run records are skipped with a note.
    pub files: Vec<PathBuf>,
    /// Row order: fields compared first (benchmark, backend, tag, file, or any dimension such as size, concurrency, procs, state, op, layout, ranks).
    #[arg(long, value_delimiter = ',', default_value = "benchmark,backend,size,concurrency")]
    pub group_by: Vec<String>,
    /// Ratio column against the rows of this backend (e.g. http) or this file with the same dimensions.
    #[arg(long)]
    pub baseline: Option<String>,
    /// Draw an SVG: fetch throughput vs concurrency per backend and size, else bars per row with min–max.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = crate::report::ReportFormat::Md)]
    /// Output format.
    pub format: crate::report::ReportFormat,
    /// Also show rdma records made through a libminiocpp of no known RDMA engine (a test double): skipped by default, they prove nothing about RDMA.
    #[arg(long)]
    pub include_test_doubles: bool,
}

/// The completion script of `shell` for the whole command line.
pub fn completions(shell: clap_complete::Shell) -> Vec<u8> {
    use clap::CommandFactory;
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "s3rdma", &mut script);
    script
}

/// Test-only: the store configuration of `flags` (store flags alone), through
/// the one conversion ([`StoreArgs::config`]).
#[cfg(test)]
pub(crate) fn store_config_of(flags: &[&str]) -> crate::store::StoreConfig {
    #[derive(Parser)]
    struct A {
        #[command(flatten)]
        store: StoreArgs,
    }
    A::parse_from(std::iter::once("s3rdma").chain(flags.iter().copied())).store.config()
}

/// An error as the user reads it: its message, and for a store error the
/// flags that fix it ([`flag_hint`]). Every place that prints an error for
/// the user prints this.
pub fn message(e: &crate::error::Error) -> String {
    match e {
        crate::error::Error::Store(s) => format!("{e}{}", flag_hint(s)),
        _ => e.to_string(),
    }
}

/// The flags that fix a store error, as a suffix of its message (`""` when
/// no flag does): the store describes the problem, the CLI names the flags.
pub fn flag_hint(e: &crate::error::StoreError) -> &'static str {
    use crate::error::{AuthProblem, StoreError};
    match e {
        StoreError::NoSuchBucket { .. } => ": create it or pass --prepare",
        StoreError::Auth { problem, .. } => match problem {
            AuthProblem::KeyId => {
                ": the server does not know this access key id: check --access-key, AWS_ACCESS_KEY_ID or the profile's aws_access_key_id (temporary keys also need their session token: --session-token, AWS_SESSION_TOKEN)"
            }
            AuthProblem::Signature => {
                ": the secret key does not match the access key id: check --secret-key, AWS_SECRET_ACCESS_KEY or the profile's aws_secret_access_key"
            }
            AuthProblem::Token => {
                ": the session token is expired or not valid: get fresh temporary credentials (AWS_SESSION_TOKEN, or the profile's credential_process / SSO login)"
            }
            AuthProblem::Clock => ": this host's clock and the server's differ by more than 15 minutes: set both right (NTP: chronyc tracking, timedatectl)",
            AuthProblem::Denied => ": the credentials are valid but not allowed this request: check the user's and the bucket's policy",
            AuthProblem::Other => {
                ": check the credentials (--access-key/--secret-key, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or the profile; temporary keys also need their session token: --session-token, AWS_SESSION_TOKEN) and that they may use this bucket"
            }
        },
        StoreError::Unreachable { .. } => ": check --endpoint and that the server is running",
        StoreError::ListTooLong { .. } => ": narrow the prefix, or raise --list-max-keys if the bucket really holds that many keys under it",
        StoreError::Broken { .. } => ": the server or something between dropped the connection (its logs say why); raise --attempts to retry more",
        StoreError::Timeout { .. } => ": raise --read-timeout (or --connect-timeout) if the server is only slow, or --attempts to retry more",
        _ => "",
    }
}

// The store's own enums, used as flag values (spelled in `values.rs`).
pub use crate::store::{Backend, ChecksumMode, HttpGet};

/// How long and how often a bench runs.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Timed window per cell and repeat, e.g. 5s, 500ms.
    #[arg(long, value_parser = parse_positive_duration, default_value = "2s", conflicts_with = "iters")]
    pub duration: Duration,
    /// Instead of --duration: operations per stream per cell and repeat (fetch: GETs; list: listings).
    #[arg(long, value_parser = parse_positive)]
    pub iters: Option<u32>,
    /// Untimed warm-up before each cell and repeat, e.g. 500ms (0s for none).
    #[arg(long, value_parser = parse_duration, default_value = "500ms")]
    pub warmup: Duration,
    /// Timed repeats per cell; the summary gives their median and range.
    #[arg(long, value_parser = parse_positive, default_value_t = 1)]
    pub repeats: u32,
    /// Create the bucket and any missing or wrong-sized objects (fetch:
    /// pseudo-random bytes, a function of key and offset, that --verify checks;
    /// list: 1,000 empty objects under the prefix); objects of the right size are reused. On by default only for the local
    /// backend's own default directory (./s3rdma-data) or a --root that does
    /// not exist yet: both are created on first use.
    #[arg(long)]
    pub prepare: bool,
    /// Never create anything, even in the default local directory.
    #[arg(long, conflicts_with = "prepare")]
    pub no_prepare: bool,
}

/// The flags of a bench with none of its own: the store, the witness, how
/// long and how often, where the record goes, and a key prefix. A bench
/// registered with these needs no flag code of its own.
#[derive(Debug, Clone, Args)]
pub struct SharedArgs {
    #[command(flatten)]
    /// Which store and how to reach it.
    pub store: StoreArgs,
    #[command(flatten)]
    /// How long and how often.
    pub run: RunArgs,
    #[command(flatten)]
    /// Where the witness scrapes.
    pub witness: WitnessArgs,
    #[command(flatten)]
    /// Where the record goes.
    pub output: OutputArgs,
    /// Key prefix the bench works under (list: default list/, where --prepare writes).
    #[arg(long)]
    pub prefix: Option<String>,
}

/// The `--root` default: the directory the tool creates and owns.
pub const DEFAULT_LOCAL_ROOT: &str = "./s3rdma-data";

impl RunArgs {
    /// Whether to create missing buckets and objects: `--prepare`, or the
    /// local backend on a directory it may create ([`StoreArgs::owns_local_root`]) unless `--no-prepare`.
    pub fn prepare_for(&self, store: &StoreArgs) -> bool {
        self.prepare || (!self.no_prepare && store.owns_local_root())
    }
}

/// Where the bytes land, and how device reads are staged.
#[derive(Debug, Clone, Args)]
pub struct MemArgs {
    /// Destination memory: host (pageable), pinned (page-locked host), device
    /// (GPU memory; staged through pinned bounce buffers on local and http,
    /// GPU-Direct on rdma). Default: device when a GPU is usable, else host.
    #[arg(long = "dest", value_enum)]
    pub dest_arg: Option<crate::mem::Dest>,
    /// GPU ordinal for --dest pinned|device.
    #[arg(long, default_value_t = 0)]
    pub device: usize,
    /// Staged device reads (fetch, weights, tokens, train; ckpt stages through
    /// --chunk-sized buffers): pinned bounce buffers per stream (half fill
    /// while half copy), an even number from 2 to 64. Default: 4 (weights: the
    /// load's, pooled over the model's shards: 32 from a server, 16 from local files).
    #[arg(long, value_parser = parse_bounce)]
    pub bounce_buffers: Option<u32>,
    /// Staged device reads: bytes per bounce buffer (one ranged read each).
    /// 64KiB to 1GiB. Default: 64MiB on hosts with 64 GiB of memory or more, else 8MiB.
    #[arg(long, value_parser = parse_stage_chunk)]
    pub stage_chunk: Option<u64>,
}

impl MemArgs {
    /// `--dest`, or its default: device when the CUDA driver reports a GPU, else host.
    pub fn dest(&self) -> crate::mem::Dest {
        use std::sync::OnceLock;
        static DEFAULT: OnceLock<crate::mem::Dest> = OnceLock::new();
        self.dest_arg.unwrap_or_else(|| {
            *DEFAULT.get_or_init(|| match crate::mem::cuda_probe() {
                Ok(info) if !info.devices.is_empty() => crate::mem::Dest::Device,
                _ => crate::mem::Dest::Host,
            })
        })
    }

    /// The memory configuration these flags describe (the one conversion):
    /// the destination resolved, staging per `--stage-chunk` /
    /// `--bounce-buffers` or the host's default ([`auto::staging`]).
    pub fn config(&self) -> crate::mem::MemConfig {
        let (chunk, buffers) = auto::staging(self.stage_chunk, self.bounce_buffers);
        crate::mem::MemConfig {
            dest: self.dest(),
            device: self.device,
            chunk_bytes: (chunk.value, chunk.source),
            bounce_buffers: (buffers.value, buffers.source),
        }
    }
}

fn parse_bounce(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(n) if (2..=64).contains(&n) && n % 2 == 0 => Ok(n),
        _ => Err(format!("'{s}': bounce buffers must be an even number from 2 to 64")),
    }
}

/// Where the witness scrapes the server's counters, and what it demands.
#[derive(Debug, Clone, Args)]
pub struct WitnessArgs {
    /// Server nodes whose metrics to scrape, comma-separated host:port (default:
    /// the endpoint's host:port). Scraped: /minio/metrics/v3/api/rdma and /api/requests.
    #[arg(long, value_delimiter = ',', value_parser = parse_server)]
    pub servers: Vec<String>,
    /// Full metrics URL to scrape instead of the derived ones (repeatable).
    #[arg(long)]
    pub metrics_url: Vec<String>,
    /// Bearer token for the metrics endpoints (default: a JWT made from the
    /// access/secret key, as `mc admin prometheus generate` does).
    #[arg(long, env = "S3RDMA_METRICS_TOKEN", hide_env_values = true)]
    pub metrics_token: Option<String>,
    /// Exit 3 unless the witness verdict of every cell is rdma-verified.
    #[arg(long)]
    pub require_rdma: bool,
}

impl WitnessArgs {
    /// `--servers`, else the original Python suite's `S3_METRICS_SERVERS`
    /// (comma-separated host:port, said once on the terminal).
    fn servers_or_seed(&self) -> Vec<String> {
        if !self.servers.is_empty() {
            return self.servers.clone();
        }
        match std::env::var("S3_METRICS_SERVERS") {
            Ok(v) if !v.trim().is_empty() => {
                eprintln!("note: metrics servers from S3_METRICS_SERVERS (the original Python suite's variable; --servers wins when given)");
                v.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect()
            }
            _ => Vec::new(),
        }
    }

    /// The witness configuration these flags and the store's describe.
    pub fn config(&self, store: &StoreArgs) -> crate::witness::WitnessConfig {
        let resolved = store.config();
        crate::witness::WitnessConfig {
            expect: store.backend.into(),
            endpoint: resolved.endpoint,
            region: resolved.region,
            access_key: resolved.access_key,
            secret_key: resolved.secret_key,
            servers: self.servers_or_seed(),
            metrics_url: self.metrics_url.clone(),
            metrics_token: self.metrics_token.clone(),
            scrape_timeout: store.read_timeout.min(crate::witness::SCRAPE_TIMEOUT),
            ca_pem: store.aws.as_ref().and_then(|a| a.ca_bundle.as_ref()).map(|c| c.pem.clone()),
        }
    }
}

/// Where the run record goes.
#[derive(Debug, Clone, Args)]
pub struct OutputArgs {
    /// Directory for `results/<bench>-<backend>-<UTC time>[-tag].json`.
    #[arg(long, default_value = "results")]
    pub results_dir: PathBuf,
    /// Suffix for the result file name (letters, digits, '-', '_', '.').
    #[arg(long, value_parser = parse_tag)]
    pub tag: Option<String>,
    /// Print the run record as JSON on stdout instead of the human table.
    #[arg(long)]
    pub json: bool,
}

impl OutputArgs {
    /// The output configuration these flags describe.
    pub fn config(&self) -> crate::record::OutputConfig {
        crate::record::OutputConfig { results_dir: self.results_dir.clone(), tag: self.tag.clone(), json: self.json, explain: message }
    }
}

/// How ranks meet (see `ranks.rs`): `--ranks`/`--procs` on one host, or a launcher.
#[derive(Debug, Clone, Args)]
pub struct GroupArgs {
    /// Id shared by every rank of one run (default: the launcher's job id; our
    /// own local ranks make one). Ranks meet under `s3rdma-ranks/<id>/` in the bucket.
    #[arg(long)]
    pub run_id: Option<String>,
    /// Longest wait for the other ranks at a barrier before failing with their names.
    #[arg(long, value_parser = parse_positive_duration, default_value = "5m")]
    pub barrier_timeout: Duration,
    /// How ranks wait at a barrier: leader (rank 0 lists, the others poll one
    /// `go` object: O(1) requests per rank) or list (every rank lists: the old
    /// way, O(N) per rank, kept as the baseline of `s3rdma barrier`).
    #[arg(long, value_enum, default_value_t = crate::ranks::Rendezvous::Leader)]
    pub rendezvous: crate::ranks::Rendezvous,
}

impl GroupArgs {
    /// The rank-meeting configuration these flags describe.
    pub fn config(&self) -> crate::ranks::GroupConfig {
        crate::ranks::GroupConfig { run_id: self.run_id.clone(), barrier_timeout: self.barrier_timeout, rendezvous: self.rendezvous }
    }
}

/// Parse a byte size: a plain number of bytes, or a number with a decimal
/// (kB, MB, GB, TB = powers of 1000) or IEC (KiB, MiB, GiB, TiB = powers of
/// 1024) unit, via the `parse-size` crate. Zero is refused.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    match parse_size::parse_size(s.trim()) {
        Ok(0) => Err(format!("size '{s}' is zero: give a positive size such as 16MiB")),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("cannot parse size '{s}': use e.g. 16MiB, 64MB, 1GiB or a number of bytes")),
    }
}

/// Smallest `--part-size`: 64 KiB. Smaller parts make a GET thousands of
/// requests and a run take minutes whatever --duration says.
pub const MIN_PART_SIZE: u64 = 64 << 10;

fn parse_part_size(s: &str) -> Result<u64, String> {
    let n = parse_bytes(s)?;
    if n < MIN_PART_SIZE {
        return Err(format!("'{s}' is below the 64KiB minimum: use e.g. 8MiB"));
    }
    Ok(n)
}

/// `--stage-chunk`: 64 KiB to 1 GiB (each bounce buffer is pinned memory).
fn parse_stage_chunk(s: &str) -> Result<u64, String> {
    let n = parse_bytes(s)?;
    if !(MIN_PART_SIZE..=1 << 30).contains(&n) {
        return Err(format!("stage chunk '{s}' must be between 64KiB and 1GiB (one pinned bounce buffer): use e.g. 64MiB"));
    }
    Ok(n)
}

/// `--range-size`: 1 MiB up to one RDMA transfer (4 GiB - 1).
fn parse_range_size(s: &str) -> Result<u64, String> {
    let n = parse_bytes(s)?;
    if !(1 << 20..=(4u64 << 30) - 1).contains(&n) {
        return Err(format!("range size '{s}' must be between 1MiB and 4GiB - 1 byte (one RDMA transfer)"));
    }
    Ok(n)
}

/// A duration that must be above zero.
pub fn parse_positive_duration(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d.is_zero() {
        return Err(format!("duration '{s}' must be above zero"));
    }
    Ok(d)
}

/// The longest duration any flag takes: 7 days. Longer ones are typing
/// errors, and added to a clock they would overflow it.
pub const MAX_DURATION: Duration = Duration::from_secs(7 * 24 * 3600);

/// Parse a duration such as `5s`, `500ms` or `2m` (humantime), at most
/// [`MAX_DURATION`].
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s.trim()).map_err(|_| format!("cannot parse duration '{s}': use e.g. 5s, 500ms or 2m"))?;
    if d > MAX_DURATION {
        return Err(format!("duration '{s}' is longer than 7 days: give a shorter one such as 5s, 10m or 2h"));
    }
    Ok(d)
}

/// `--io-threads`: 1 to 64. More threads than that per read only contend
/// (a helper's 100000 threads dropped a 300 MiB fetch from 10.7 to 2.3 GB/s).
pub fn parse_io_threads(s: &str) -> Result<u32, String> {
    if s.trim().parse::<u64>().is_ok_and(|n| n > 64) {
        return Err(format!("{} threads per read is more than 64: each takes 16 MiB pieces, so 64 already covers 1 GiB reads; lower it", s.trim()));
    }
    match parse_positive(s)? {
        n if n > 64 => Err(format!("{n} threads per read is more than 64: each takes 16 MiB pieces, so 64 already covers 1 GiB reads; lower it")),
        n => Ok(n),
    }
}

/// Parse one `--servers` entry: `host:port`, an IPv6 address in brackets
/// (`[::1]:9000`, as in a URL's authority, RFC 3986 section 3.2.2), so
/// `::1:9000` is refused here, naming the bracketed form, rather than read
/// later as an empty host.
pub fn parse_server(s: &str) -> Result<String, String> {
    let s = s.trim();
    let usage = format!("invalid --servers entry '{s}': use host:port, e.g. aistor1:9000 (no scheme, no credentials; an IPv6 address in brackets, [::1]:9000)");
    if s.contains("://") || s.contains('@') {
        return Err(usage);
    }
    // An IPv6 address (a zone id, %eth0, allowed).
    let ipv6 = |a: &str| a.split('%').next().is_some_and(|a| a.parse::<std::net::Ipv6Addr>().is_ok());
    if let Some(inner) = s.strip_prefix('[')
        && !inner.contains("]:")
    {
        return Err(format!("invalid --servers entry '{s}': give the port after the brackets: [{}]:9000", inner.trim_end_matches(']')));
    }
    let Some((host, port)) = s.rsplit_once(':') else { return Err(usage) };
    if host.is_empty() || host == "[]" {
        return Err(if ipv6(s) { format!("invalid --servers entry '{s}': an IPv6 address goes in brackets, with its port: [{s}]:9000") } else { usage });
    }
    if host.contains(':') && !(host.starts_with('[') && host.ends_with(']')) {
        // "::1:5801" is an address and a port; "2001:db8::5" is an address alone.
        return Err(if ipv6(host) {
            format!("invalid --servers entry '{s}': an IPv6 address goes in brackets: [{host}]:{port}")
        } else {
            format!("invalid --servers entry '{s}': an IPv6 address goes in brackets, with its port: [{s}]:9000")
        });
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(s.to_string()),
        _ => Err(format!("invalid --servers entry '{s}': port '{port}' is not a number from 1 to 65535")),
    }
}

/// Parse a count that must be at least 1.
pub fn parse_positive(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(0) => Err("must be at least 1".to_string()),
        Ok(n) => Ok(n),
        Err(_) if !s.trim().is_empty() && s.trim().bytes().all(|b| b.is_ascii_digit()) => Err(format!("'{s}' is more than the largest allowed, {}", u32::MAX)),
        Err(_) => Err(format!("'{s}' is not a whole number")),
    }
}

/// A key prefix such as `--model models/llama`, returned without leading or
/// trailing '/' (empty: the bucket's root); what is left must make a key once
/// `/<name>` is added ([`crate::store::check_key`]'s rules), so a bad one is a
/// usage error before anything runs.
pub fn parse_key_prefix(s: &str) -> Result<String, String> {
    let p = s.trim_matches('/');
    if p.is_empty() {
        return Ok(String::new());
    }
    if p.split('/').any(|seg| seg.trim().is_empty() && !seg.is_empty()) {
        return Err(format!("'{s}' is not a key prefix (a segment of only whitespace): use one such as models/llama"));
    }
    match crate::store::check_key(&format!("{p}/x")) {
        Ok(()) => Ok(p.to_string()),
        Err(crate::error::StoreError::InvalidKey { why, .. }) => {
            Err(format!("'{s}' is not a key prefix ({why}): use one such as models/llama, with no empty, '.' or '..' segments"))
        }
        Err(e) => Err(e.to_string()),
    }
}

fn parse_tag(s: &str) -> Result<String, String> {
    // At least one letter or digit: a tag of dots alone names no run in the file name.
    if s.len() <= 64 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)) && s.bytes().any(|b| b.is_ascii_alphanumeric()) {
        Ok(s.to_string())
    } else {
        Err(format!("tag '{s}' must be 1-64 letters, digits, '-', '_' or '.', with at least one letter or digit"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_name_something_and_sizes_below_the_minimum_say_so() {
        assert_eq!(parse_tag("gpu-run.2").unwrap(), "gpu-run.2");
        for bad in [".", "..", "-_.", "", "a/b", "a b"] {
            assert!(parse_tag(bad).unwrap_err().contains("at least one letter or digit"), "{bad}");
        }
        assert_eq!(parse_part_size("4KiB").unwrap_err(), "'4KiB' is below the 64KiB minimum: use e.g. 8MiB");
    }

    #[test]
    fn key_prefixes_and_thread_counts_are_checked() {
        assert_eq!(parse_key_prefix("models/llama").unwrap(), "models/llama");
        assert_eq!(parse_key_prefix("/models/llama/").unwrap(), "models/llama");
        assert_eq!(parse_key_prefix("").unwrap(), "");
        for bad in ["../x", "m/../x", "a//b", "a/./b", " ", "m/ /x"] {
            let e = parse_key_prefix(bad).unwrap_err();
            assert!(e.contains("is not a key prefix") && e.contains("models/llama"), "{bad:?}: {e}");
        }
        assert!(parse_io_threads("99999999999").unwrap_err().contains("more than 64"));
        assert!(parse_io_threads("65").unwrap_err().contains("more than 64"));
        assert_eq!(parse_io_threads("64").unwrap(), 64);
        assert!(parse_io_threads("four").unwrap_err().contains("not a whole number"));
    }

    #[test]
    fn sizes_parse_in_both_unit_systems() {
        assert_eq!(parse_bytes("16MiB").unwrap(), 16 << 20);
        assert_eq!(parse_bytes("64MB").unwrap(), 64_000_000);
        assert_eq!(parse_bytes("1GiB").unwrap(), 1 << 30);
        assert_eq!(parse_bytes("4096").unwrap(), 4096);
        assert!(parse_bytes("16XB").unwrap_err().contains("16XB"));
        assert!(parse_bytes("0").is_err());
    }

    #[test]
    fn counts_and_tags() {
        assert!(parse_positive("0").is_err());
        assert_eq!(parse_io_threads("64"), Ok(64));
        assert!(parse_io_threads("65").unwrap_err().contains("more than 64"));
        assert!(parse_io_threads("0").is_err());
        assert_eq!(parse_positive("8").unwrap(), 8);
        assert!(parse_tag("a/b").is_err());
        assert_eq!(parse_tag("run-1").unwrap(), "run-1");
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
    }

    #[test]
    fn servers_are_host_and_port_with_ipv6_in_brackets() {
        assert_eq!(parse_server("node1:9000").unwrap(), "node1:9000");
        assert_eq!(parse_server("[::1]:5801").unwrap(), "[::1]:5801");
        assert_eq!(parse_server("::1:5801").unwrap_err(), "invalid --servers entry '::1:5801': an IPv6 address goes in brackets: [::1]:5801");
        for bad in [":9000", "node1", "http://node1:9000", "u:p@node1:9000", "[]:9000"] {
            assert!(parse_server(bad).unwrap_err().starts_with(&format!("invalid --servers entry '{bad}': use host:port")), "{bad}");
        }
        // An IPv6 address without its port: the fix keeps the whole address.
        for (bad, fix) in [("::1", "[::1]:9000"), ("[::1]", "[::1]:9000"), ("2001:db8::5", "[2001:db8::5]:9000"), ("fe80::1%eth0:80", "[fe80::1%eth0]:80")] {
            let e = parse_server(bad).unwrap_err();
            assert!(e.ends_with(fix), "{bad}: {e}");
        }
        assert!(parse_server("node1:0").unwrap_err().contains("1 to 65535"));
        assert!(parse_server("node1:http").unwrap_err().contains("1 to 65535"));
    }

    #[test]
    fn cli_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
