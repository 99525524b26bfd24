//! Command-line flags as values, for the messages of layers below the CLI
//! (stores, benches, formats) that tell the user which flag fixes a
//! problem. Those layers never spell a flag: they name it here, and the CLI
//! renders it from the parser's own definition (`src/cli/flag_names.rs`), so
//! a renamed flag changes one place and a test fails on any name the parser
//! no longer has.

/// One command-line flag, named by its long form in upper case with `_`
/// for `-` (`ACCESS_KEY`); its `Display`, implemented by the CLI from the
/// parser's definition, writes it as the user types it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Flag(&'static str);

impl Flag {
    /// The constant's name (`ACCESS_KEY`), for the CLI's lookup.
    pub fn name(self) -> &'static str {
        self.0
    }
}

macro_rules! flags {
    ($($name:ident),* $(,)?) => {
        $(
            #[doc = concat!("The flag `", stringify!($name), "`.")]
            pub const $name: Flag = Flag(stringify!($name));
        )*
        /// Every flag named here, for the CLI's check that each is one of its own.
        pub const ALL: &[Flag] = &[$($name),*];
    };
}

flags!(
    ACCESS_KEY,
    AMP,
    ATTEMPTS,
    BACKEND,
    BARRIERS,
    BARRIER_TIMEOUT,
    BASELINE,
    BASELINES,
    BASELINE_DIR,
    BATCH_SIZE,
    BOUNCE_BUFFERS,
    BUCKET,
    CA_BUNDLE,
    CHUNK,
    COLD,
    CONCURRENCY,
    CONNECT_TIMEOUT,
    CROP,
    DEST,
    DEVICE,
    DIRECT,
    ENDPOINT,
    FETCH_WORKERS,
    FORMAT,
    GPU_TFLOPS,
    GROUP_BY,
    HTTP_GET,
    INCLUDE_TEST_DOUBLES,
    INPUT,
    IO_THREADS,
    JPEG_FETCH,
    KEEP,
    KEY,
    LIST_MAX_KEYS,
    LOADER_ONLY,
    LR,
    METHODS,
    METRICS_TOKEN,
    METRICS_URL,
    MFU,
    MODEL,
    NO_PREPARE,
    OPS,
    PART_CONCURRENCY,
    PART_SIZE,
    PLOT,
    PREFETCH_BATCHES,
    PREFIX,
    PREPARE,
    PROCS,
    PROFILE,
    RANGE_SIZE,
    RANKS,
    RANKS_PER_PROCESS,
    RDMA_DEVICE,
    RDMA_ENGINE,
    RDMA_LIB,
    RDMA_NO_RANGE,
    RDMA_THREADS,
    READ_TIMEOUT,
    REFERENCE,
    REGION,
    REQUIRE_RDMA,
    RESPONSE_CHECKSUMS,
    RESTORE_CACHE,
    RESULTS_DIR,
    ROOT,
    RUN_BYTES,
    RUN_ID,
    SAMPLES_PER_SHARD,
    SECRET_KEY,
    SEED,
    SEQ_LEN,
    SERIES,
    SERVERS,
    SESSION_TOKEN,
    SHARD_BYTES,
    SHARD_SIZE,
    SIZE,
    SIZES,
    SRC,
    STEPS,
    STREAM_BUFFER,
    SYNTH,
    SYNTHETIC,
    TOKENIZER,
    TOTAL_BYTES,
    TRAIN_GEMM,
    TRAIN_LOAD,
    VERIFY,
    WARMUP,
    WARMUP_SHARDS,
    WORKLOAD,
);
