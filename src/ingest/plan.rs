//! What `s3rdma ingest <kind>` writes: its settings as the CLI resolved them
//! from the flags (`cli/plan.rs`).

use std::path::PathBuf;

use crate::store::StoreConfig;

/// One `ingest` subcommand's plan.
#[derive(Debug, Clone)]
pub enum IngestPlan {
    /// Text (or uniform random ids) -> int32 token shards + sidecars.
    Tokens(TokensIngest),
    /// Images -> raw uint8 N x H x W x 3 shards + sidecars.
    Raw(ImagesIngest),
    /// Images -> WebDataset ustar tar shards + byte-offset indexes.
    Jpeg(ImagesIngest),
    /// A local safetensors model -> the store, as `weights` reads it.
    Weights(WeightsIngest),
}

/// `ingest weights`.
#[derive(Debug, Clone)]
pub struct WeightsIngest {
    /// Where it goes.
    pub store: StoreConfig,
    /// What to write.
    pub source: WeightsSource,
    /// Key prefix to write the model under.
    pub model: String,
}

/// Where `ingest weights` takes its model from.
#[derive(Debug, Clone)]
pub enum WeightsSource {
    /// A model.safetensors file, or a Hugging Face model directory.
    Files(PathBuf),
    /// A synthetic model of a published architecture's shapes
    /// (`crate::format::weights::synth_shapes`), shards of at most `shard_size` bytes.
    Synthetic {
        /// `llama-3.1-8b`, `qwen3-32b` or `tiny`.
        name: String,
        /// Largest shard, bytes.
        shard_size: u64,
    },
}

/// `ingest tokens`. Sizes in bytes.
#[derive(Debug, Clone)]
pub struct TokensIngest {
    /// Where it goes.
    pub store: StoreConfig,
    /// Key prefix: shards are `<prefix>-NNNNNN.bin` + `<prefix>-NNNNNN.json`.
    pub prefix: String,
    /// A Hugging Face tokenizer.json (required unless `synthetic`).
    pub tokenizer: Option<PathBuf>,
    /// Text files or directories searched recursively; each file is one document.
    pub input: Vec<PathBuf>,
    /// Tokens per sequence (row).
    pub seq_len: u32,
    /// Largest shard (rounded down to whole sequences).
    pub shard_bytes: u64,
    /// Uniform random ids instead of text (needs `total_bytes`).
    pub synthetic: bool,
    /// Vocabulary of the synthetic ids.
    pub vocab: u32,
    /// Total bytes of synthetic token data.
    pub total_bytes: Option<u64>,
    /// Seed of the synthetic ids.
    pub seed: u64,
    /// Worker threads (`None`: all cores).
    pub threads: Option<u32>,
}

/// `ingest raw` and `ingest jpeg`.
#[derive(Debug, Clone)]
pub struct ImagesIngest {
    /// Where it goes.
    pub store: StoreConfig,
    /// Key prefix (`None`: raw/train or jpeg/train).
    pub prefix: Option<String>,
    /// ImageFolder directory (one subdirectory per class).
    pub src: Option<PathBuf>,
    /// Generate this many synthetic images instead.
    pub synthetic: Option<u32>,
    /// Classes of the synthetic set.
    pub classes: u32,
    /// Synthetic source image size (width, height) in pixels.
    pub synthetic_size: (u32, u32),
    /// Raw shards: side of the centre crop in pixels.
    pub size: u32,
    /// Images per shard (`None`: raw 4096, jpeg 8192).
    pub samples_per_shard: Option<u32>,
    /// Decode/resize/encode threads (`None`: all cores).
    pub decode_threads: Option<u32>,
    /// JPEG quality of synthetic images and transcoded PNGs.
    pub quality: u8,
    /// Seed of the synthetic images.
    pub seed: u64,
}
