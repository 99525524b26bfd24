//! Defaults chosen from the machine: where a tuning flag
//! is left out, the value comes from the host's cores and memory, and the
//! record says which value was used and why. A flag always wins.
//!
//! The rules come from H200 measurements (16 cores, 128 GiB, a 16 GB model in
//! 4 shards into GPU memory, warm page cache; records
//! `results/archive/peers-weights-20261201T211802Z-gpu.json` and
//! `results/archive/peers-weights-20261201T212252Z-gpu.json`): what speeds a staged
//! load is reads in flight, and each 64 MiB bounce buffer is read by 4
//! threads in 16 MiB pieces. 64 MiB x 4 with 4 threads loaded in 0.517 s
//! (31 GB/s) where the old fixed defaults (1 thread, 8 MiB x 4) took 1.17 s;
//! 64 MiB x 8 was no faster (0.534 s) but pinning its 2 GiB added 0.6 s to
//! the process (2.42 s against 1.83 s); 16 and 32 MiB buffers were slower
//! (1.18 s, 0.77–0.79 s). So threads scale with cores, and the deep staging
//! needs memory to spare for 256 MiB of pinned memory per stream.

use serde::Serialize;

/// A tuning value and where it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Chosen<T> {
    /// The value in use.
    pub value: T,
    /// `"flag"` when given on the command line, else the rule that chose it.
    pub source: &'static str,
}

/// Streams the default rules plan for: `weights` reads 4 shards at once
/// (`--concurrency 4`), the shape the H200 figures were measured in.
const PLANNED_STREAMS: usize = 4;

/// Host memory from which staging gets the deep setting: at 64 GiB, 4
/// streams x 4 x 64 MiB of pinned memory is 1/64 of it.
const DEEP_STAGING_MIN_MEMORY: u64 = 64 << 30;

/// `--io-threads`: the flag, else cores / 4 (the planned streams), between 1 and 8.
///
/// On the H200's 16 cores that is 4, the measured best; on a 2-core
/// machine 1 (each stream reads on its own thread only).
pub fn io_threads(flag: Option<u32>) -> Chosen<u32> {
    match flag {
        Some(n) => Chosen { value: n, source: "flag" },
        None => {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            Chosen { value: (cores / PLANNED_STREAMS).clamp(1, 8) as u32, source: "auto: cores / 4 streams, 1 to 8" }
        }
    }
}

/// Staged device reads: `(--stage-chunk bytes, --bounce-buffers)`, each the
/// flag or the rule: 64 MiB x 4 on hosts with at least 64 GiB of memory
/// (256 MiB of pinned memory per stream), 8 MiB x 4 below.
pub fn staging(chunk: Option<u64>, buffers: Option<u32>) -> (Chosen<u64>, Chosen<u32>) {
    let deep = (chunk.is_none() || buffers.is_none()) && total_memory() >= DEEP_STAGING_MIN_MEMORY;
    let (rule, c, b) = if deep { ("auto: host memory >= 64 GiB: 64 MiB x 4", 64 << 20, 4) } else { ("auto: host memory < 64 GiB: 8 MiB x 4", 8 << 20, 4) };
    let chunk = chunk.map_or(Chosen { value: c, source: rule }, |v| Chosen { value: v, source: "flag" });
    let buffers = buffers.map_or(Chosen { value: b, source: rule }, |v| Chosen { value: v, source: "flag" });
    (chunk, buffers)
}

/// `weights`' bounce buffers over a server (http; rdma when it stages) when
/// `--bounce-buffers` is not given: one staged pipeline reads every shard,
/// the bounce buffers pooled (`store::staged_read_pooled`), so this is the
/// load's number of 64 MiB ranged GETs in flight. Measured on the H200
/// against nginx, 16.06 GB (4 shards) into device memory, beside fetch's
/// 16 x 256 MiB x 16-stream ceiling in the same run (28.87 GB/s, commit
/// 144c282): 16 in flight 0.81x, 32 0.91x (verified), 64 0.94x (records
/// `results/weights-http-20261203T201123Z-nginx-v1.json`, `…201108Z-nginx.json`,
/// `…201126Z-nginx-v2.json`). 32 is 2 GiB of pinned memory whatever the
/// number of shards; 64 gained 3 % for twice that.
pub const WEIGHTS_BOUNCE_BUFFERS: Chosen<u32> = Chosen { value: 32, source: "weights over a server: 32 for the load, pooled over its shards" };

/// `weights`' bounce buffers from the local backend when `--bounce-buffers`
/// is not given: 16 pooled (4 per shard of a 4-shard model, as before the
/// pool) read 32.96 GB/s on the H200 beside fetch's 31.77 from the same page
/// cache (`results/weights-local-20261203T201053Z-nginx-local.json`,
/// `results/fetch-local-20261203T201128Z-nginx-local.json`).
pub const WEIGHTS_LOCAL_BOUNCE_BUFFERS: Chosen<u32> = Chosen { value: 16, source: "weights from local files: 16 for the load, pooled over its shards" };

/// The local device load's settings (`store::file_pipeline`): reader
/// threads, chunk bytes and bounce buffers, each the flag or the rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalDeviceLoad {
    /// `--io-threads`: reader threads.
    pub threads: Chosen<u32>,
    /// `--stage-chunk`: bytes per read and per copy.
    pub chunk: Chosen<u64>,
    /// `--bounce-buffers`: pinned buffers in the pool (each thread double-buffers).
    pub buffers: Chosen<u32>,
}

/// Reader threads, chunk and pool of a local load into device memory
/// (`weights` from `--backend local`), each the flag or the rule: one reader
/// thread per core (at most 64), 16 MiB chunks, two bounce buffers per thread.
///
/// Why: copying out of the page cache is CPU work (one `pread` is one
/// memcpy on one core), so the reads need every core to approach the
/// pinned host-to-device rate; 16 MiB chunks keep the pinned memory paid
/// before the load at 512 MiB on 16 cores. `scripts/probe_load_paths.py`
/// measures each path alone (threads x chunk sizes) on the machine at hand.
pub fn local_device_load(threads: Option<u32>, chunk: Option<u64>, buffers: Option<u32>) -> LocalDeviceLoad {
    const RULE: &str = "weights from local files into device memory: a reader thread per core, 16 MiB chunks, 2 bounce buffers per thread";
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 64) as u32;
    let threads = threads.map_or(Chosen { value: cores, source: RULE }, |v| Chosen { value: v, source: "flag" });
    LocalDeviceLoad {
        threads,
        chunk: chunk.map_or(Chosen { value: 16 << 20, source: RULE }, |v| Chosen { value: v, source: "flag" }),
        buffers: buffers.map_or(Chosen { value: (2 * threads.value).max(2), source: RULE }, |v| Chosen { value: v, source: "flag" }),
    }
}

/// Total host memory, read once (it does not change during a run; buffers
/// are allocated per stream and each asks).
fn total_memory() -> u64 {
    static TOTAL: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TOTAL.get_or_init(|| {
        let mut sys = sysinfo::System::new();
        sys.refresh_memory();
        sys.total_memory()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_win_and_say_so() {
        assert_eq!(io_threads(Some(3)), Chosen { value: 3, source: "flag" });
        let (c, b) = staging(Some(16 << 20), Some(6));
        assert_eq!((c.value, c.source, b.value, b.source), (16 << 20, "flag", 6, "flag"));
    }

    #[test]
    fn auto_values_follow_the_host() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let t = io_threads(None);
        assert_eq!(t.value as usize, (cores / 4).clamp(1, 8));
        assert!(t.source.starts_with("auto"));
        let (c, b) = staging(None, None);
        let deep = total_memory() >= DEEP_STAGING_MIN_MEMORY;
        assert_eq!((c.value, b.value), if deep { (64 << 20, 4) } else { (8 << 20, 4) });
        // One flag given: the other still comes from the rule.
        let (c, b) = staging(Some(32 << 20), None);
        assert_eq!((c.value, c.source), (32 << 20, "flag"));
        assert_eq!(b.value, 4);
    }
}
