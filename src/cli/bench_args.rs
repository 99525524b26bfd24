//! Each subcommand's own flags (fetch, ckpt, weights, tokens, train, verify, ingest), over the shared groups in `cli/mod.rs`.

use super::{
    GroupArgs, MemArgs, OutputArgs, RunArgs, StoreArgs, WitnessArgs, parse_bytes, parse_duration, parse_part_size, parse_positive, parse_positive_duration,
};
use clap::{Args, Subcommand};

use crate::bench::ckpt::{ChunkChecksum, CkptMethod, CkptOp, RestoreCache};
use crate::bench::fetch::StreamBuffer;
use crate::bench::train::{Amp, JpegFetch, Layout};
use crate::bench::weights::Baseline;
use std::path::PathBuf;
use std::time::Duration;

/// `--stream-buffer`: `auto`, `object` or a size of at least 64 KiB.
fn parse_stream_buffer(s: &str) -> Result<StreamBuffer, String> {
    match s {
        "auto" => Ok(StreamBuffer::Auto),
        "object" => Ok(StreamBuffer::Object),
        _ => parse_part_size(s).map(StreamBuffer::Reused).map_err(|e| format!("{e}; or 'object' (a whole-object buffer per stream) or 'auto'")),
    }
}

/// `s3rdma ckpt`: save and restore training state (seeds' B4/B5).
#[derive(Debug, Clone, Args)]
pub struct CkptArgs {
    #[command(flatten)]
    /// Which store and how to reach it.
    pub store: StoreArgs,
    #[command(flatten)]
    /// Where the witness scrapes and what it demands.
    pub witness: WitnessArgs,
    #[command(flatten)]
    /// Where the bytes land.
    pub mem: MemArgs,
    #[command(flatten)]
    /// Where the record goes.
    pub output: OutputArgs,
    #[command(flatten)]
    /// How ranks meet.
    pub group: GroupArgs,
    /// Named states: resnet50 (torchvision ResNet-50 state dict + SGD momentum, fp32, ~195 MiB; every rank saves a full replica).
    #[arg(long, value_delimiter = ',')]
    pub workload: Vec<String>,
    /// Synthetic Adam-shaped states of these total sizes (weights, exp_avg, exp_avg_sq),
    /// split evenly across ranks. Default when no --workload: 1GiB.
    #[arg(long, value_delimiter = ',', value_parser = parse_bytes)]
    pub sizes: Vec<u64>,
    /// Methods to run, in order (`async` needs one more state-sized buffer of pinned host memory).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "flat,serialize-then-put")]
    pub methods: Vec<CkptMethod>,
    /// Operations: save,restore; `--ops restore` reads a checkpoint an earlier
    /// `--keep` run left (same --workload/--sizes/--seed/--ranks), verifies it and leaves it.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "save,restore")]
    pub ops: Vec<CkptOp>,
    /// Bytes per chunk object of a flat or async checkpoint, 1MiB to below 4GiB (one RDMA registration).
    #[arg(long, value_parser = parse_chunk, default_value = "1GiB")]
    pub chunk: u64,
    /// Chunk objects in flight per rank.
    #[arg(long, value_parser = parse_positive, default_value_t = 8)]
    pub concurrency: u32,
    /// Timed repeats of each operation.
    #[arg(long, value_parser = parse_positive, default_value_t = 3)]
    pub repeats: u32,
    /// Per-chunk checksum written to the manifest and checked on restore.
    #[arg(long, value_enum, default_value_t = ChunkChecksum::Xxh3)]
    pub checksum: ChunkChecksum,
    /// Key prefix: checkpoints are `<prefix>/<state>/rank<NNNNN>`.
    #[arg(long, default_value = "ckpt")]
    pub prefix: String,
    /// Seed of the random tensor values (a restore-only run regenerates the same originals).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Start N ranks on this host, each saving and restoring its own shard
    /// (its own GPU: rank modulo visible GPUs), together behind barriers.
    #[arg(long, value_parser = parse_positive)]
    pub ranks: Option<u32>,
    /// Leave the checkpoints this run saved in the store (default: delete them once verified).
    #[arg(long)]
    pub keep: bool,
    /// Where each restore reads from: warm (the page cache the save left),
    /// cold (the device: drop_caches as root, else fadvise DONTNEED, else
    /// O_DIRECT), fadvise or direct (cold from that method on). Local
    /// backend; over http and rdma the cache is the server's.
    #[arg(long, value_enum, default_value_t = RestoreCache::Warm)]
    pub restore_cache: RestoreCache,
    /// Short for --restore-cache cold.
    #[arg(long, conflicts_with = "restore_cache")]
    pub cold: bool,
    /// Run a training load beside every save, as a job would: each rank
    /// steps a fixed GEMM in a loop (cuBLAS SGEMM on its GPU; a CPU stand-in
    /// without one), paused while the save blocks; the record and a second
    /// table give the steps before, during persistence and after, and the
    /// seconds the save cost training (blocked seconds) against a run with no save.
    #[arg(long)]
    pub train_load: bool,
    /// With --train-load: the GEMM side N (an N x N x N SGEMM per step;
    /// three f32 matrices of 4 N^2 bytes each), 1 to 65536. Default: 8192 on
    /// a GPU (about 20 ms a step on an H100), 512 on the CPU stand-in (a step
    /// there grows as N^3: 8192 takes seconds).
    #[arg(long, requires = "train_load", value_parser = parse_gemm_side)]
    pub train_gemm: Option<usize>,
}

fn parse_ranks_per_process(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(n) if (1..=1024).contains(&n) => Ok(n),
        _ => Err(format!("'{s}': ranks per process is a whole number from 1 to 1024 (e.g. 64 for --ranks 8192 as 128 processes)")),
    }
}

fn parse_gemm_side(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=65536).contains(&n) => Ok(n),
        _ => Err(format!("'{s}': a GEMM side is a whole number from 1 to 65536 (e.g. 8192)")),
    }
}

pub(crate) fn parse_chunk(s: &str) -> Result<u64, String> {
    let n = parse_bytes(s)?;
    if !(1 << 20..=crate::format::ckpt::MAX_CHUNK).contains(&n) {
        return Err(format!("'{s}': a chunk must be from 1MiB to just below 4GiB (one RDMA registration holds at most 4 GiB)"));
    }
    Ok(n)
}

/// `s3rdma fetch`: whole-object GETs of same-sized objects by N concurrent
/// streams, each stream with its own destination buffer.
#[derive(Debug, Clone, Args)]
pub struct FetchArgs {
    #[command(flatten)]
    /// Which store and how to reach it.
    pub store: StoreArgs,
    #[command(flatten)]
    /// How long and how often.
    pub run: RunArgs,
    #[command(flatten)]
    /// Where the witness scrapes and what it demands.
    pub witness: WitnessArgs,
    #[command(flatten)]
    /// Where the bytes land.
    pub mem: MemArgs,
    #[command(flatten)]
    /// Where the record goes.
    pub output: OutputArgs,
    /// Object sizes, comma-separated, e.g. 1MiB,16MiB,64MiB (IEC) or 1MB (decimal).
    #[arg(long, value_delimiter = ',', value_parser = parse_bytes, default_value = "1MiB,16MiB,64MiB")]
    pub sizes: Vec<u64>,
    /// Concurrent streams, comma-separated, e.g. 1,8,32; each (size, streams) pair is one cell.
    #[arg(long, value_delimiter = ',', value_parser = parse_positive, default_value = "1,4")]
    pub concurrency: Vec<u32>,
    /// Objects per size; streams read them round-robin.
    #[arg(long, value_parser = parse_positive, default_value_t = 4)]
    pub objects: u32,
    /// Key prefix; objects are `<prefix>/<size in bytes>/obj-<n>`.
    #[arg(long, default_value = "fetch")]
    pub prefix: String,
    /// Worker processes, comma-separated, e.g. 1,2,4,8: a cell dimension beside
    /// sizes and concurrency. Each process runs --concurrency streams with its
    /// own buffers (and GPU: process index modulo visible GPUs); all start
    /// together behind a barrier. Under a launcher (torchrun, Slurm, Open MPI)
    /// the launched processes are the workers and the largest value must not exceed them.
    #[arg(long, value_delimiter = ',', value_parser = parse_positive, default_value = "1")]
    pub procs: Vec<u32>,
    /// Per-stream buffer: `object` (one whole-object buffer per stream), a
    /// size such as 64MiB (one reusable buffer per stream; each object is read
    /// as ranged reads of that size into it, so memory is streams x size
    /// whatever the object size, as warp reads), or `auto`: `object` while
    /// procs x streams x size fits in half the host's memory or the
    /// destination is device memory, else a reused buffer of the store's ranged-read size (http: part
    /// size x parts in flight; rdma: --range-size; local: 8 MiB).
    #[arg(long, value_parser = parse_stream_buffer, default_value = "auto")]
    pub stream_buffer: StreamBuffer,
    /// Record a throughput series (GB/s per interval, this process's completed
    /// GETs) in every repeat, e.g. --series 1s; `report --plot` draws it.
    #[arg(long, value_parser = parse_positive_duration)]
    pub series: Option<Duration>,
    /// Compare every byte read with what `--prepare` wrote there (each
    /// object's bytes are a function of its key and offset), as fio's and
    /// elbencho's verify do: a server that serves another range, another
    /// object or changed bytes under right headers ends the run (exit 4).
    /// Every read is checked as it completes (warm-up included), inside the
    /// timed window: it costs client CPU (device memory is copied back
    /// first), so compare throughput only between runs with the same
    /// setting. Objects written another way never verify.
    #[arg(long)]
    pub verify: bool,
    #[command(flatten)]
    /// How ranks meet.
    pub group: GroupArgs,
}

/// `s3rdma verify`: environment, endpoint, metrics, then one PUT and one GET
/// with the witness around each.
#[derive(Debug, Clone, Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    /// Which store and how to reach it.
    pub store: StoreArgs,
    #[command(flatten)]
    /// Where the witness scrapes and what it demands.
    pub witness: WitnessArgs,
    #[command(flatten)]
    /// Where the record goes.
    pub output: OutputArgs,
    /// Probe sizes, comma-separated: per size and memory kind (GPU and host)
    /// one witnessed PUT and GET, so the table shows which memory kinds and
    /// sizes RDMA carries with the library loaded (small objects and objects
    /// over 4 GiB are where it is known to fall back; host memory goes over
    /// HTTP with the cuObject generation, over RDMA with libs3rdma).
    #[arg(long, alias = "size", value_delimiter = ',', value_parser = parse_bytes, default_value = "64MiB")]
    pub sizes: Vec<u64>,
    /// GPU ordinal for the GPU-Direct probe.
    #[arg(long, default_value_t = 0)]
    pub device: usize,
    /// Create the bucket when it does not exist.
    #[arg(long)]
    pub prepare: bool,
    /// Key of the probe object (deleted afterwards unless --keep).
    #[arg(long, default_value = "s3rdma-verify/probe.bin")]
    pub key: String,
    /// Leave the probe object in the bucket.
    #[arg(long)]
    pub keep: bool,
}

/// `s3rdma weights`: load a safetensors model (one file or shards + index)
/// into one buffer per shard; or write a synthetic one with --synth.
#[derive(Debug, Clone, Args)]
pub struct WeightsArgs {
    #[command(flatten)]
    /// Which store and how to reach it.
    pub store: StoreArgs,
    #[command(flatten)]
    /// Where the witness scrapes and what it demands.
    pub witness: WitnessArgs,
    #[command(flatten)]
    /// Where the bytes land.
    pub mem: MemArgs,
    #[command(flatten)]
    /// Where the record goes.
    pub output: OutputArgs,
    /// Key prefix of the model: `<model>/model.safetensors` or
    /// `<model>/model.safetensors.index.json` + shards ('' for the bucket's root).
    #[arg(long, value_parser = super::parse_key_prefix)]
    pub model: String,
    /// Shards read at once (each shard's ranged reads go one after another into its
    /// buffer). Staged device reads ignore it: all shards share one pipeline.
    #[arg(long, value_parser = parse_positive, default_value_t = 4)]
    pub concurrency: u32,
    /// Timed loads; the summary gives median and range.
    #[arg(long, value_parser = parse_positive, default_value_t = 1)]
    pub repeats: u32,
    /// Compare every loaded tensor with a reference and say which: --reference
    /// when given, else the digest written with the model (--synth, ingest
    /// weights), else a second read of the store (no independent reference). A mismatch exits 4.
    #[arg(long)]
    pub verify: bool,
    /// The model's local copy to --verify against (implies --verify): a
    /// Hugging Face snapshot directory, or the one .safetensors file of a one-file model.
    #[arg(long)]
    pub reference: Option<PathBuf>,
    /// Instead of loading: write a synthetic model (llama-3.1-8b, qwen3-32b, tiny)
    /// under --model (a shorthand for `ingest weights --synthetic NAME`).
    #[arg(long)]
    pub synth: Option<String>,
    /// Baselines timed in the same run, comma-separated: download-then-load
    /// (GET every shard to a local file, then load from it: a cold node's path),
    /// local-then-load (load from that local copy, warm page cache).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub baselines: Vec<Baseline>,
    /// Where the baselines' local copy goes (default: a new directory under the system temp dir, removed after).
    #[arg(long)]
    pub baseline_dir: Option<PathBuf>,
    /// --synth: largest shard (default 5GB, decimal: Hugging Face's default max_shard_size).
    #[arg(long, value_parser = parse_bytes, requires = "synth")]
    pub shard_size: Option<u64>,
}

/// `s3rdma ingest <kind>`.
#[derive(Debug, Clone, Subcommand)]
pub enum IngestKind {
    /// Text (or uniform random ids) -> int32 token shards + sidecars.
    Tokens(IngestTokensArgs),
    /// ImageFolder (or synthetic images) -> raw uint8 N x H x W x 3 shards + sidecars.
    Raw(IngestImagesArgs),
    /// ImageFolder (or synthetic images) -> WebDataset ustar tar shards + byte-offset indexes.
    Jpeg(IngestImagesArgs),
    /// A Hugging Face safetensors model on local disk -> the store, as `weights` reads it.
    Weights(IngestWeightsArgs),
}

/// `s3rdma ingest weights`.
#[derive(Debug, Clone, Args)]
pub struct IngestWeightsArgs {
    #[command(flatten)]
    /// Which store and how to reach it.
    pub store: StoreArgs,
    /// A model.safetensors file, or a Hugging Face model directory (model.safetensors,
    /// or model.safetensors.index.json and its shards).
    #[arg(long, required_unless_present = "synthetic", conflicts_with = "synthetic")]
    pub src: Option<PathBuf>,
    /// Instead of --src: write a synthetic model of this architecture's tensor
    /// shapes, random bf16 (llama-3.1-8b, qwen3-32b, tiny).
    #[arg(long)]
    pub synthetic: Option<String>,
    /// --synthetic: largest shard (default 5GB, decimal: Hugging Face's default max_shard_size).
    #[arg(long, value_parser = parse_bytes, requires = "synthetic", conflicts_with = "src")]
    pub shard_size: Option<u64>,
    /// Key prefix to write the model under (what `weights --model` then reads).
    #[arg(long, value_parser = super::parse_key_prefix)]
    pub model: String,
}

/// `s3rdma ingest tokens`.
#[derive(Debug, Clone, Args)]
pub struct IngestTokensArgs {
    #[command(flatten)]
    /// Which store and how to reach it.
    pub store: StoreArgs,
    /// Key prefix: shards are `<prefix>-NNNNNN.bin` + `<prefix>-NNNNNN.json`.
    #[arg(long, default_value = "tokens/train")]
    pub prefix: String,
    /// A Hugging Face tokenizer.json.
    #[arg(long, required_unless_present = "synthetic", conflicts_with = "synthetic")]
    pub tokenizer: Option<PathBuf>,
    /// Text files, or directories searched recursively (every regular file, UTF-8); each file is one document.
    #[arg(long, num_args = 1.., required_unless_present = "synthetic", conflicts_with = "synthetic")]
    pub input: Vec<PathBuf>,
    /// Tokens per sequence (row).
    #[arg(long, value_parser = parse_positive, default_value_t = 4096)]
    pub seq_len: u32,
    /// Largest shard (rounded down to whole sequences).
    #[arg(long, value_parser = parse_bytes, default_value = "1GiB")]
    pub shard_bytes: u64,
    /// Uniform random ids instead of text (for size sweeps); needs --total-bytes.
    #[arg(long, requires = "total_bytes")]
    pub synthetic: bool,
    /// Vocabulary of the synthetic ids (Llama 3: 128256); at most 2^31 - 1 (ids are int32).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=i32::MAX as i64), default_value_t = 128_256)]
    pub vocab: u32,
    /// Total bytes of synthetic token data (whole sequences).
    #[arg(long, value_parser = parse_bytes, requires = "synthetic", conflicts_with = "input")]
    pub total_bytes: Option<u64>,
    /// Seed of the synthetic ids.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Worker threads for tokenizing/generating (default: all cores).
    #[arg(long, value_parser = parse_positive)]
    pub threads: Option<u32>,
}

/// `s3rdma ingest raw` and `s3rdma ingest jpeg`.
#[derive(Debug, Clone, Args)]
pub struct IngestImagesArgs {
    #[command(flatten)]
    /// Which store and how to reach it.
    pub store: StoreArgs,
    /// Key prefix (default raw/train or jpeg/train).
    #[arg(long)]
    pub prefix: Option<String>,
    /// ImageFolder directory: one subdirectory per class holding .jpg/.jpeg/.png files.
    #[arg(long, required_unless_present = "synthetic", conflicts_with = "synthetic")]
    pub src: Option<PathBuf>,
    /// Generate this many synthetic images instead (class-dependent colour gradients + noise, learnable).
    #[arg(long, value_parser = parse_positive)]
    pub synthetic: Option<u32>,
    /// Classes of the synthetic set.
    #[arg(long, value_parser = parse_positive, default_value_t = 100)]
    pub classes: u32,
    /// Synthetic source image size WxH before encoding (ImageNet's typical 500x375).
    #[arg(long, value_parser = parse_wxh, default_value = "500x375")]
    pub synthetic_size: (u32, u32),
    /// Raw shards: shorter side resized to this, then centre-cropped to size x size (at most 16384).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=16384), default_value_t = 256)]
    pub size: u32,
    /// Images per shard (default raw 4096, jpeg 8192).
    #[arg(long, value_parser = parse_positive)]
    pub samples_per_shard: Option<u32>,
    /// Decode/resize/encode threads (default: all cores).
    #[arg(long, value_parser = parse_positive)]
    pub decode_threads: Option<u32>,
    /// JPEG quality of synthetic images and of PNG sources transcoded into a jpeg shard.
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=100), default_value_t = 90)]
    pub quality: u8,
    /// Seed of the synthetic images.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// `--lr`: a finite learning rate above 0 (NaN, infinity, 0 or a negative
/// rate would train nothing, or diverge, and still be timed).
fn parse_lr(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        Ok(v) => Err(format!("{v} is not a learning rate: give a finite number above 0, e.g. 0.1")),
        Err(e) => Err(format!("{e}: give a number, e.g. 0.1")),
    }
}

pub(crate) fn parse_wxh(s: &str) -> Result<(u32, u32), String> {
    let bad = || format!("'{s}' is not WIDTHxHEIGHT such as 500x375");
    let (w, h) = s.trim().split_once(['x', 'X']).ok_or_else(bad)?;
    let (w, h): (u32, u32) = (w.parse().map_err(|_| bad())?, h.parse().map_err(|_| bad())?);
    if w == 0 || h == 0 || w > 16384 || h > 16384 {
        return Err(format!("'{s}': width and height must be 1..=16384"));
    }
    Ok((w, h))
}

/// `s3rdma tokens`: the seeds' B7.
#[derive(Debug, Clone, Args)]
pub struct TokensArgs {
    #[command(flatten)]
    /// Which store and how to reach it.
    pub store: StoreArgs,
    #[command(flatten)]
    /// Where the witness scrapes and what it demands.
    pub witness: WitnessArgs,
    #[command(flatten)]
    /// Where the bytes land.
    pub mem: MemArgs,
    #[command(flatten)]
    /// Where the record goes.
    pub output: OutputArgs,
    /// Key prefix of the token shards (`s3rdma ingest tokens --prefix`).
    #[arg(long, default_value = "tokens/train")]
    pub prefix: String,
    /// Runs (each one ranged GET into its own buffer) in flight.
    #[arg(long, value_parser = parse_positive, default_value_t = 4)]
    pub fetch_workers: u32,
    /// Bytes of one contiguous run (rounded down to whole sequences; at most one shard).
    #[arg(long, value_parser = parse_bytes, default_value = "256MiB")]
    pub run_bytes: u64,
    /// Sequences per batch handed to the consumer.
    #[arg(long, value_parser = parse_positive, default_value_t = 8)]
    pub batch_seqs: u32,
    /// Simulated model step per batch (0 = consume as fast as the loader delivers).
    #[arg(long, value_parser = parse_duration, default_value = "0s")]
    pub compute: Duration,
    /// Leading shards read once, untimed, before the timed pass over the rest.
    #[arg(long, default_value_t = 1)]
    pub warmup_shards: u32,
    /// Timed passes over the remaining shards.
    #[arg(long, value_parser = parse_positive, default_value_t = 3)]
    pub repeats: u32,
    /// Dense bf16 peak of one GPU in TFLOPS, for "GPUs it could feed" (H200 SXM: 989).
    #[arg(long, default_value_t = 989.0)]
    pub gpu_tflops: f64,
    /// Model FLOPs utilisation assumed for "GPUs it could feed".
    #[arg(long, default_value_t = 0.45)]
    pub mfu: f64,
}

/// `s3rdma train`: the seeds' B3 (and B2 with `--loader-only`).
#[derive(Debug, Clone, Args)]
pub struct TrainArgs {
    #[command(flatten)]
    /// Which store and how to reach it.
    pub store: StoreArgs,
    #[command(flatten)]
    /// Where the witness scrapes and what it demands.
    pub witness: WitnessArgs,
    #[command(flatten)]
    /// Where the bytes land.
    pub mem: MemArgs,
    #[command(flatten)]
    /// Where the record goes.
    pub output: OutputArgs,
    #[command(flatten)]
    /// How ranks meet.
    pub group: GroupArgs,
    #[arg(long, value_enum, default_value_t = Layout::Raw)]
    /// Dataset layout: raw shards or JPEG (WebDataset) shards.
    pub layout: Layout,
    /// Key prefix of the shards (default raw/train or jpeg/train, as `s3rdma ingest` writes).
    #[arg(long)]
    pub prefix: Option<String>,
    /// Timed steps.
    #[arg(long, value_parser = parse_positive, default_value_t = 200)]
    pub steps: u32,
    /// Untimed steps before them.
    #[arg(long, default_value_t = 10)]
    pub warmup: u32,
    /// Images per step (per rank).
    #[arg(long, value_parser = parse_positive, default_value_t = 256)]
    pub batch_size: u32,
    #[arg(long, value_enum, default_value_t = Amp::Bf16)]
    /// Mixed precision for the model step.
    pub amp: Amp,
    /// Raw: shards in flight, each into its own device buffer.
    #[arg(long, value_parser = parse_positive, default_value_t = 4)]
    pub fetch_workers: u32,
    /// Jpeg with --jpeg-fetch sample: ranged GETs in flight (one per sample).
    #[arg(long, value_parser = parse_positive, default_value_t = 64)]
    pub sample_gets: u32,
    /// Jpeg: decode threads (default: all cores / ranks).
    #[arg(long, value_parser = parse_positive)]
    pub decode_threads: Option<u32>,
    /// Jpeg: batches prepared ahead of the training loop.
    #[arg(long, value_parser = parse_positive, default_value_t = 4)]
    pub prefetch_batches: u32,
    #[arg(long, value_enum, default_value_t = JpegFetch::Sample)]
    /// How JPEG samples are read: whole shards or one ranged GET per sample.
    pub jpeg_fetch: JpegFetch,
    /// Random crop side (the model's input is crop x crop).
    #[arg(long, value_parser = parse_positive, default_value_t = 224)]
    pub crop: u32,
    /// Measure the input pipeline alone (no model; the seeds' B2).
    #[arg(long)]
    pub loader_only: bool,
    /// SGD learning rate (momentum 0.9, weight decay 1e-4), a finite number above 0.
    #[arg(long, value_parser = parse_lr, default_value_t = 0.1)]
    pub lr: f64,
    /// Timed repeats (each: warm-up steps, then the timed steps).
    #[arg(long, value_parser = parse_positive, default_value_t = 1)]
    pub repeats: u32,
    /// Seed of shuffling, crops, flips and model init.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Start N ranks on this host, each on its own GPU (rank modulo visible GPUs) with its own shard subset.
    #[arg(long, value_parser = parse_positive)]
    pub ranks: Option<u32>,
}

/// `s3rdma barrier`: ranks meeting through the store, nothing else (docs/scaling.md).
#[derive(Debug, Clone, Args)]
pub struct BarrierArgs {
    #[command(flatten)]
    /// Which store the ranks meet in.
    pub store: StoreArgs,
    #[command(flatten)]
    /// Witness flags (nothing is judged: no data moves).
    pub witness: WitnessArgs,
    #[command(flatten)]
    /// Where the record goes.
    pub output: OutputArgs,
    #[command(flatten)]
    /// How ranks meet (`--rendezvous leader|list`).
    pub group: GroupArgs,
    /// Ranks to start on this host (default 8; under a launcher, its own count).
    #[arg(long, value_parser = parse_positive)]
    pub ranks: Option<u32>,
    /// Timed barriers, back to back.
    #[arg(long, default_value_t = 20)]
    pub barriers: u32,
    /// Untimed barriers first (they absorb the ranks' start-up skew).
    #[arg(long, default_value_t = 2)]
    pub warmup: u32,
    /// Ranks each process runs as tasks: `--ranks 8192 --ranks-per-process
    /// 64` starts 128 processes. Simulates worlds larger than one host can
    /// start processes for; each rank still makes its own requests, but
    /// ranks of one process share its runtime and connections (less client
    /// CPU per request than a process per rank). `--ranks` must be a
    /// multiple of it; 1 to 1024. Default 1.
    #[arg(long, default_value_t = 1, value_parser = parse_ranks_per_process)]
    pub ranks_per_process: u32,
}
