//! Flag values that are the benches' and the report's own enums (ckpt,
//! weights, train, report):
//! how each is spelled on the command line and what its help says, so the
//! benches need not know clap. The spelling is the record's (serde), which
//! the test below holds.

use crate::bench::ckpt::{ChunkChecksum, CkptMethod, CkptOp, RestoreCache};
use crate::bench::train::{Amp, JpegFetch, Layout};
use crate::bench::weights::Baseline;
use crate::report::ReportFormat;

flag_values!(CkptMethod {
    Flat => "flat", "Tensors packed 512-byte aligned into one buffer, written as parallel chunk objects + manifest";
    SerializeThenPut => "serialize-then-put", "Copy to host, serialize one safetensors blob, send it as one object by one stream (over HTTP: multipart parts one at a time): the shape of torch.save + HTTP";
    Async => "async", "flat's format saved as asynchronous checkpointing saves (DCP async_save, Megatron/NeMo async): snapshot into pinned host memory (the stall), then the chunks go out and the manifest commits last";
});

flag_values!(CkptOp {
    Save => "save", "Write the state to the store";
    Restore => "restore", "Read it back and compare with the original";
});

flag_values!(ChunkChecksum {
    Xxh3 => "xxh3", "xxh3-64 per chunk (twox-hash)";
    None => "none", "No checksums (restore still compares every tensor with the original)";
});

flag_values!(RestoreCache {
    Warm => "warm", "The page cache the save left (no eviction)";
    Cold => "cold", "The device, as MLPerf Storage reads: drop_caches (root), else fadvise DONTNEED, else O_DIRECT";
    Fadvise => "fadvise", "Cold from fadvise DONTNEED on (the host's other cached pages stay: a shared node)";
    Direct => "direct", "Cold through O_DIRECT reads alone";
});

flag_values!(Baseline {
    DownloadThenLoad => "download-then-load", "GET each shard to a local file, then load from the local copy";
    LocalThenLoad => "local-then-load", "Load from the local copy (warm page cache)";
});

flag_values!(Layout {
    Raw => "raw", "Pre-decoded uint8 shards fetched whole into device memory; crop/flip/normalize on the GPU";
    Jpeg => "jpeg", "JPEG tar shards: ranged GET per sample (or whole shards), CPU decode, pinned staging";
});

flag_values!(JpegFetch {
    Sample => "sample", "One ranged GET per sample by its index entry";
    Shard => "shard", "Whole tar shards into host memory, samples sliced out";
});

flag_values!(Amp {
    Bf16 => "bf16", "bfloat16 autocast for forward and backward (weights stay f32)";
    Off => "off", "Plain f32";
});

flag_values!(ReportFormat {
    Md => "md", "One markdown table per benchmark";
    Csv => "csv", "Comma-separated values, one line per row";
    Json => "json", "The rows as a JSON array";
});

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    /// The names on the command line are the names in records (serde).
    #[test]
    fn flag_values_are_the_recorded_names() {
        fn same<T: ValueEnum + serde::Serialize>() -> usize {
            for v in T::value_variants() {
                let flag = v.to_possible_value().unwrap().get_name().to_string();
                assert_eq!(serde_json::to_value(v).unwrap(), serde_json::Value::String(flag));
            }
            T::value_variants().len()
        }
        let n = same::<CkptMethod>() + same::<CkptOp>() + same::<ChunkChecksum>() + same::<RestoreCache>() + same::<Baseline>();
        assert_eq!(n + same::<Layout>() + same::<JpegFetch>() + same::<Amp>(), 3 + 2 + 2 + 4 + 2 + 2 + 2 + 2);
        // The report's format is not in records: its names are the flag's alone.
        let names: Vec<String> = ReportFormat::value_variants().iter().map(|v| v.to_possible_value().unwrap().get_name().to_string()).collect();
        assert_eq!(names, ["md", "csv", "json"]);
    }
}
