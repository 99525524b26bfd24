//! Run records: one JSON file per run in `results/`, written atomically
//! (`s3rdma report` reads them back: `src/report/`).
//!
//! Field names are a superset of the original suite's `RunRecord`
//! (`benchmark, backend, params, results, environment, rdma_witness, host,
//! timestamp`, as the original Python suite wrote them; field reference: docs/results.md), so old and new
//! runs compare in one table. Units live in field names: `_bytes`, `_s`, `_ms`,
//! `_gbps` (1e9 bytes/s), `_gibps` (2^30 bytes/s), `_cores` (CPU-seconds /
//! wall-seconds).

mod environment;
pub use environment::{CoordinationEnvironment, Environment, GpuEnvironment, RanksEnvironment, StoreStatsEnvironment};

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sysinfo::System;

use crate::error::{Error, Result};
use crate::flag::RESULTS_DIR;

/// Version of the record layout; bump on any incompatible change (history: docs/results.md).
pub const SCHEMA_VERSION: u32 = 4;

/// Which cell of a bench and which repeat one timed window measured
/// (`rdma_witness.windows[].id`, from schema 3): what `report` joins a row
/// to its own windows on. `cell` indexes the bench's list of cells as its
/// results hold them (fetch: `results[cell]`; one-cell benches: 0);
/// `repeat` is 1-based. A window covers every rank of the run at once (rank
/// 0 judges the ranks' summed counters), so it names no rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowId {
    /// Index of the cell in the bench's results.
    pub cell: usize,
    /// 1-based repeat of that cell.
    pub repeat: u32,
}

impl WindowId {
    /// Repeat `repeat` of a bench with one cell.
    pub fn repeat(repeat: u32) -> Self {
        WindowId { cell: 0, repeat }
    }
}

/// Which build wrote a record.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ToolInfo {
    /// Always `s3rdma`.
    pub name: String,
    /// Crate version.
    pub version: String,
    /// Short git commit of the build, `-dirty` when built from a modified tree.
    pub git_commit: String,
}

impl ToolInfo {
    /// This binary.
    pub fn current() -> Self {
        ToolInfo { name: "s3rdma".into(), version: env!("CARGO_PKG_VERSION").into(), git_commit: env!("S3RDMA_GIT_COMMIT").into() }
    }
}

/// One GPU as `nvidia-smi` reports it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GpuInfo {
    /// Marketing name, e.g. "NVIDIA H200".
    pub name: String,
    /// Device memory in bytes.
    pub memory_bytes: u64,
    /// Driver version.
    pub driver: String,
}

/// The machine a run ran on.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HostInfo {
    /// Host name.
    pub hostname: String,
    /// OS name and version.
    pub os: String,
    /// Kernel version.
    pub kernel: String,
    /// CPU model string.
    pub cpu_model: String,
    /// Logical CPUs.
    pub logical_cpus: usize,
    /// Physical cores, where known.
    pub physical_cores: Option<usize>,
    /// Total memory in bytes.
    pub memory_bytes: u64,
    /// GPUs found by `nvidia-smi` (empty when it is absent).
    pub gpus: Vec<GpuInfo>,
}

/// A [`HostInfo::collect`] started in the background by [`HostInfo::prefetch`].
static PREFETCHED: std::sync::Mutex<Option<std::thread::JoinHandle<HostInfo>>> = std::sync::Mutex::new(None);

impl HostInfo {
    /// Start reading the host's facts on a background thread, so the
    /// `nvidia-smi` call (tens of ms to seconds, depending on the driver's
    /// persistence mode) overlaps the run instead of lengthening the
    /// process; the next [`HostInfo::collect`] takes the result.
    pub fn prefetch() {
        if let Ok(mut p) = PREFETCHED.lock()
            && p.is_none()
        {
            *p = std::thread::Builder::new().name("host-facts".into()).spawn(Self::read).ok();
        }
    }

    /// The host's facts: the prefetched ones when [`HostInfo::prefetch`] ran, else read now.
    pub fn collect() -> Self {
        let handle = PREFETCHED.lock().ok().and_then(|mut p| p.take());
        handle.and_then(|h| h.join().ok()).unwrap_or_else(Self::read)
    }

    /// Read the host's facts (sysinfo; `nvidia-smi` for GPUs where it is on PATH).
    fn read() -> Self {
        let mut sys = System::new();
        sys.refresh_cpu_all();
        sys.refresh_memory();
        HostInfo {
            hostname: System::host_name().unwrap_or_default(),
            os: System::long_os_version().unwrap_or_default(),
            kernel: System::kernel_version().unwrap_or_default(),
            cpu_model: sys.cpus().first().map(|c| c.brand().trim().to_string()).unwrap_or_default(),
            logical_cpus: sys.cpus().len(),
            physical_cores: System::physical_core_count(),
            memory_bytes: sys.total_memory(),
            gpus: nvidia_smi_gpus(),
        }
    }
}

fn nvidia_smi_gpus() -> Vec<GpuInfo> {
    let Ok(out) = std::process::Command::new("nvidia-smi").args(["--query-gpu=name,memory.total,driver_version", "--format=csv,noheader,nounits"]).output()
    else {
        return Vec::new();
    };
    if !out.status.success() {
        return Vec::new();
    }
    parse_nvidia_smi(&String::from_utf8_lossy(&out.stdout))
}

/// Parse `nvidia-smi --query-gpu=name,memory.total,driver_version
/// --format=csv,noheader,nounits` output (memory in MiB).
fn parse_nvidia_smi(text: &str) -> Vec<GpuInfo> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').map(str::trim).collect();
            let [name, mib, driver] = f.as_slice() else { return None };
            Some(GpuInfo { name: name.to_string(), memory_bytes: mib.parse::<u64>().ok()? << 20, driver: driver.to_string() })
        })
        .collect()
}

/// One run's record (its fields: docs/results.md).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunRecord {
    /// [`SCHEMA_VERSION`] at write time.
    pub schema_version: u32,
    /// Subcommand: `fetch`, `ckpt`, ...
    pub benchmark: String,
    /// `local`, `http` or `rdma`.
    pub backend: String,
    /// Run start, RFC 3339 UTC.
    pub timestamp: String,
    /// Optional user tag (also in the file name).
    pub tag: Option<String>,
    /// The build that wrote this.
    pub tool: ToolInfo,
    /// The machine.
    pub host: HostInfo,
    /// Where the bytes went, the GPU, the ranks, the store's and witness's
    /// settings (never credentials), warnings, the store's counters.
    pub environment: Environment,
    /// The full bench configuration.
    pub params: Value,
    /// Every cell, every repeat's raw figures and the summaries.
    pub results: Value,
    /// Server-side transport proof: overall verdict and reason, the witness
    /// configuration, and per-cell verdicts (see [`crate::witness`]).
    pub rdma_witness: Value,
}

/// Where a run's record goes and how the run reports (`--results-dir`,
/// `--tag`, `--json`).
#[derive(Debug, Clone)]
pub struct OutputConfig {
    /// Directory the record is written to (`<bench>-<backend>-<UTC time>[-tag].json`).
    pub results_dir: PathBuf,
    /// Suffix for the record's file name.
    pub tag: Option<String>,
    /// Print the record as JSON on stdout instead of the table.
    pub json: bool,
    /// How an error is said to a person: the CLI's adds the flags that fix
    /// it (benches never name flags themselves); [`plain`] says the error alone.
    pub explain: fn(&Error) -> String,
}

/// An error said as it is, naming no flag: [`OutputConfig::explain`] where no CLI sets one.
pub fn plain(e: &Error) -> String {
    e.to_string()
}

/// Make sure `dir` exists and takes a new file, before a run spends its time:
/// a run whose record cannot be written should fail at once, not at the end.
pub fn check_results_dir(dir: &Path) -> Result<()> {
    let fail = |e: std::io::Error| Error::Runtime(format!("cannot write results into {}: {e}: pass {RESULTS_DIR} DIR", dir.display()));
    fs::create_dir_all(dir).map_err(fail)?;
    let probe = dir.join(format!(".s3rdma-write-test-{}", std::process::id()));
    fs::File::create(&probe).map_err(fail)?;
    let _ = fs::remove_file(&probe);
    Ok(())
}

impl RunRecord {
    /// A record of this build on this host: `benchmark` run against `backend`
    /// from `started`; environment, params, results and witness filled by the bench.
    pub fn new(benchmark: &str, backend: &str, started: chrono::DateTime<chrono::Utc>, tag: Option<String>) -> Self {
        RunRecord {
            schema_version: SCHEMA_VERSION,
            benchmark: benchmark.into(),
            backend: backend.into(),
            timestamp: started.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            tag,
            tool: ToolInfo::current(),
            host: HostInfo::collect(),
            environment: Environment::default(),
            params: Value::Null,
            results: Value::Null,
            rdma_witness: Value::Null,
        }
    }

    /// Write to `<dir>/<benchmark>-<backend>-<UTC yyyymmddThhmmssZ>[-tag].json`
    /// through a temporary file in the same directory and a rename, so a
    /// reader never sees half a record. A name already taken (two runs in one
    /// second) gets `-2`, `-3`...
    /// Returns the path written.
    pub fn write(&self, dir: &Path, started: chrono::DateTime<chrono::Utc>) -> Result<PathBuf> {
        fs::create_dir_all(dir).map_err(|e| Error::Runtime(format!("cannot create results directory {}: {e}: pass {RESULTS_DIR}", dir.display())))?;
        let stem = format!(
            "{}-{}-{}{}",
            self.benchmark,
            self.backend,
            started.format("%Y%m%dT%H%M%SZ"),
            self.tag.as_deref().map(|t| format!("-{t}")).unwrap_or_default()
        );
        let mut path = dir.join(format!("{stem}.json"));
        let mut n = 2;
        while path.exists() {
            path = dir.join(format!("{stem}-{n}.json"));
            n += 1;
        }
        let tmp = dir.join(format!(".{stem}.json.tmp-{}", std::process::id()));
        let body = serde_json::to_vec_pretty(self).map_err(|e| Error::Runtime(format!("cannot encode record: {e}")))?;
        let res = (|| {
            let mut f = fs::File::create(&tmp)?;
            f.write_all(&body)?;
            f.write_all(b"\n")?;
            f.sync_all()?;
            fs::rename(&tmp, &path)
        })();
        if let Err(e) = res {
            let _ = fs::remove_file(&tmp);
            return Err(Error::Runtime(format!("cannot write {}: {e}", path.display())));
        }
        Ok(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> RunRecord {
        RunRecord {
            schema_version: SCHEMA_VERSION,
            benchmark: "fetch".into(),
            backend: "local".into(),
            timestamp: "2026-11-29T12:00:00Z".into(),
            tag: Some("t1".into()),
            tool: ToolInfo::current(),
            host: HostInfo::collect(),
            environment: Environment::default(),
            params: serde_json::json!({"sizes_bytes": [1]}),
            results: serde_json::json!([]),
            rdma_witness: serde_json::json!({"verdict": "not-applicable", "reason": "test"}),
        }
    }

    #[test]
    fn write_is_atomic_and_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let t = chrono::DateTime::parse_from_rfc3339("2026-11-29T12:00:00Z").unwrap().to_utc();
        let r = record();
        let a = r.write(dir.path(), t).unwrap();
        let b = r.write(dir.path(), t).unwrap();
        assert_eq!(a.file_name().unwrap(), "fetch-local-20261129T120000Z-t1.json");
        assert_eq!(b.file_name().unwrap(), "fetch-local-20261129T120000Z-t1-2.json");
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 2, "no temporary files left: {names:?}");
        let back: RunRecord = serde_json::from_slice(&fs::read(&a).unwrap()).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn nvidia_smi_lines_parse() {
        let g = parse_nvidia_smi("NVIDIA H200, 143771, 580.65.06\n");
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].name, "NVIDIA H200");
        assert_eq!(g[0].memory_bytes, 143771u64 << 20);
        assert_eq!(g[0].driver, "580.65.06");
        assert!(parse_nvidia_smi("garbage").is_empty());
    }
}
