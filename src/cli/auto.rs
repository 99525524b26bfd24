//! Defaults chosen from the machine (issue 22, item 1): where a tuning flag
//! is left out, the value comes from the host's cores and memory, and the
//! record says which value was used and why. A flag always wins.
//!
//! The rules come from the H200 measurements in issue 22 (16 cores, 128 GiB,
//! a 16 GB model in 4 shards into GPU memory): `--io-threads 4 --stage-chunk
//! 64MiB --bounce-buffers 8` loaded it at 33–34 GB/s warm where the old fixed
//! defaults (1 thread, 8 MiB x 4) reached 21 GB/s. Both knobs only add reads
//! in flight, so they scale with what the machine can serve: threads with
//! cores, pinned staging with memory.

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
/// streams x 8 x 64 MiB of pinned memory is 1/32 of it.
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
/// flag or the rule: 64 MiB x 8 on hosts with at least 64 GiB of memory
/// (512 MiB of pinned memory per stream), 8 MiB x 4 below.
pub fn staging(chunk: Option<u64>, buffers: Option<u32>) -> (Chosen<u64>, Chosen<u32>) {
    let deep = (chunk.is_none() || buffers.is_none()) && total_memory() >= DEEP_STAGING_MIN_MEMORY;
    let (rule, c, b) = if deep { ("auto: host memory >= 64 GiB: 64 MiB x 8", 64 << 20, 8) } else { ("auto: host memory < 64 GiB: 8 MiB x 4", 8 << 20, 4) };
    let chunk = chunk.map_or(Chosen { value: c, source: rule }, |v| Chosen { value: v, source: "flag" });
    let buffers = buffers.map_or(Chosen { value: b, source: rule }, |v| Chosen { value: v, source: "flag" });
    (chunk, buffers)
}

fn total_memory() -> u64 {
    let mut sys = sysinfo::System::new();
    sys.refresh_memory();
    sys.total_memory()
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
        assert_eq!((c.value, b.value), if deep { (64 << 20, 8) } else { (8 << 20, 4) });
        // One flag given: the other still comes from the rule.
        let (c, b) = staging(Some(32 << 20), None);
        assert_eq!((c.value, c.source), (32 << 20, "flag"));
        assert_eq!(b.value, if deep { 8 } else { 4 });
    }
}
