//! What `ckpt` records and prints: per-rank figures, per-repeat rows across ranks, the per-(state, method, op) summary and the table.

use super::StateSpec;
use super::cache::CacheFigures;
use super::plan::{CkptMethod, CkptOp, CkptPlan};
use super::train_view::{TrainFigures, TrainRow};
use crate::mem::Dest;
use crate::stats::{Spread, host_cores};
use crate::witness::WitnessReport;
use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use serde::{Deserialize, Serialize};

/// The figures of one rank's one operation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OpFigures {
    /// Rank of the process these figures come from.
    pub rank: usize,
    /// Host name of that process.
    pub host: String,
    /// Checkpoint payload bytes (chunks, or the safetensors blob).
    pub bytes: u64,
    /// Wall seconds of the timed work (a save: until its manifest commits, the checkpoint durable).
    pub wall_s: f64,
    /// Seconds training is blocked: the whole operation, except for an
    /// `async` save, whose stall is the snapshot into pinned host memory.
    pub stall_s: f64,
    /// Wall-clock start and end (Unix seconds), for the aggregate across ranks.
    pub start_unix_s: f64,
    /// Wall-clock end of its timed window (Unix seconds).
    pub end_unix_s: f64,
    /// flat: copying tensors into the flat buffer (save); serialize-then-put:
    /// copying to host and serializing (save).
    pub flatten_s: f64,
    /// Restore: rebuilding tensor views (flat) or parsing + copying each tensor back (serialize-then-put).
    pub rebuild_s: f64,
    /// Moving the bytes to or from the store (incl. staging copies and checksums, which overlap it).
    pub transfer_s: f64,
    /// Summed per-chunk time spent hashing (overlaps the transfer).
    pub checksum_s: f64,
    /// Chunk objects written or read.
    pub chunks: u64,
    /// Bytes per chunk (from the manifest on restore; 0 for serialize-then-put).
    pub chunk_bytes: u64,
    /// Client CPU in cores: CPU-seconds of this process (getrusage) / wall seconds.
    pub client_cpu_cores: f64,
    /// Whole-host CPU in cores: busy fraction x logical CPUs (/proc/stat via sysinfo).
    pub host_cpu_cores: f64,
    /// A restore: how it met the page cache (warm or cold, and how it was made cold).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_cache: Option<CacheFigures>,
    /// A save with a training load beside it: the steps around it and the seconds it blocked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub train: Option<TrainFigures>,
}

/// How the figures of several ranks make one repeat's (MLPerf Storage's
/// checkpointing rule: <https://github.com/mlcommons/storage>).
pub const AGGREGATION: &str = "MLPerf Storage: total bytes / slowest rank";

/// What the comparison with the originals found (per rank, summed in the record).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Verified {
    /// True when every tensor matched.
    pub ok: bool,
    /// Tensors compared.
    pub tensors_checked: usize,
    /// Names of the tensors that differ.
    pub mismatched: Vec<String>,
}

/// One (state, method, op) row: repeats across ranks and the summary.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row {
    /// `resnet50` or `synthetic`.
    pub workload: String,
    /// The state's name in keys and tables (e.g. synthetic-16GiB).
    pub state: String,
    /// The checkpoint method.
    pub method: CkptMethod,
    /// Save or restore.
    pub op: CkptOp,
    /// Ranks (processes) in the run.
    pub ranks: usize,
    /// Requested state size, all ranks (synthetic: --sizes; named: its bytes x ranks).
    pub size_bytes: u64,
    /// Bytes per repeat, all ranks.
    pub bytes: u64,
    /// Chunk objects per rank (1 for serialize-then-put).
    pub chunks_per_rank: u64,
    /// Bytes per chunk object (0 for serialize-then-put).
    pub chunk_bytes: u64,
    /// Chunk transfers in flight per rank (1 for serialize-then-put).
    pub concurrency: usize,
    /// Per repeat: the slowest rank's wall time (a save: until it is durable).
    pub wall_s: Spread,
    /// Per repeat: the slowest rank's training stall (equal to `wall_s` except
    /// for an `async` save, where it is the snapshot).
    pub stall_s: Spread,
    /// Per repeat: bytes of all ranks / the slowest rank's wall time ([`AGGREGATION`]).
    pub throughput_gbps: Spread,
    /// Client CPU in cores: CPU-seconds of this process (getrusage) / wall seconds.
    pub client_cpu_cores: Spread,
    /// Whole-host CPU in cores: busy fraction x logical CPUs (/proc/stat via sysinfo).
    pub host_cpu_cores: Spread,
    /// Seconds copying tensors into the flat buffer (flat) or serializing (serialize-then-put), slowest rank.
    pub flatten_s: Spread,
    /// Seconds rebuilding tensor views (flat) or parsing and copying back (serialize-then-put), slowest rank.
    pub rebuild_s: Spread,
    /// Seconds moving the bytes to or from the store, slowest rank.
    pub transfer_s: Spread,
    /// Summed per-chunk seconds hashing (overlaps the transfer), slowest rank.
    pub checksum_s: Spread,
    /// The worst verdict over the repeats (`-` when no window was witnessed on this rank).
    pub witness_verdict: String,
    /// What the comparison with an independent copy found (`None`: not asked for).
    pub verified: Option<Verified>,
    /// A restore: `warm`, `cold`, or `unknown` (cold asked over http or rdma,
    /// whose cache is the server's); `None` for a save. Ranks or repeats that
    /// differ: `mixed: ...`.
    pub cache: Option<String>,
    /// A restore: how it met the cache: `warm`, `dropped (drop_caches)`,
    /// `evicted (fadvise DONTNEED)`, `bypassed (O_DIRECT)` or `server cache
    /// not controlled` (`mixed: ...` as above); `None` for a save.
    pub restore_cache: Option<String>,
    /// A restore on the local backend: the most bytes of the checkpoint's
    /// files found in the page cache as a repeat began, all ranks (`mincore`;
    /// `None` where the kernel did not say).
    pub cached_bytes: Option<u64>,
    /// A restore on the local backend: the bytes of the checkpoint's files
    /// (chunks and manifest, or the blob), all ranks; `None` elsewhere.
    pub file_bytes: Option<u64>,
    /// A save with a training load: the training view over repeats (`None` otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub train: Option<TrainRow>,
    /// Every timed repeat's figures.
    pub repeats: Vec<RepeatRow>,
}

/// One repeat of one operation, every rank's figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RepeatRow {
    /// 1-based repeat number.
    pub repeat: u32,
    /// Bytes of all ranks in this repeat.
    pub bytes: u64,
    /// The slowest rank's own wall time (the training stall).
    pub wall_s: f64,
    /// First rank's start to last rank's end (a lone rank: its wall time).
    pub span_s: f64,
    /// bytes / wall_s / 1e9: all ranks' bytes over the slowest rank's time ([`AGGREGATION`]).
    pub throughput_gbps: f64,
    /// All ranks' CPU-seconds / span_s.
    pub client_cpu_cores: f64,
    /// Whole-host CPU in cores: busy fraction x logical CPUs (/proc/stat via sysinfo).
    pub host_cpu_cores: f64,
    /// Every rank's own figures.
    pub per_rank: Vec<OpFigures>,
    /// The witness report (rank 0 only).
    pub witness: Option<WitnessReport>,
}

impl RepeatRow {
    pub(crate) fn of(repeat: u32, per_rank: Vec<OpFigures>, witness: Option<WitnessReport>) -> RepeatRow {
        let bytes = per_rank.iter().map(|f| f.bytes).sum();
        let wall_s = per_rank.iter().map(|f| f.wall_s).fold(0.0, f64::max);
        // A lone rank: its own wall; several: first start to last end (wall clock).
        let span_s = if per_rank.len() == 1 {
            wall_s
        } else {
            let first = per_rank.iter().map(|f| f.start_unix_s).fold(f64::INFINITY, f64::min);
            let last = per_rank.iter().map(|f| f.end_unix_s).fold(0.0, f64::max);
            (last - first).max(wall_s)
        }
        .max(1e-9);
        let cpu_s: f64 = per_rank.iter().map(|f| f.client_cpu_cores * f.wall_s).sum();
        RepeatRow {
            repeat,
            bytes,
            wall_s,
            span_s,
            throughput_gbps: bytes as f64 / wall_s.max(1e-9) / 1e9,
            client_cpu_cores: cpu_s / span_s,
            host_cpu_cores: host_cores(per_rank.iter().map(|f| (f.host.as_str(), f.host_cpu_cores))),
            per_rank,
            witness,
        }
    }
}

/// A `ckpt` run's `results`: one row per (state, method, op).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CkptResults {
    /// One row per (state, method, op).
    pub rows: Vec<Row>,
    /// How ranks' figures make a repeat's: [`AGGREGATION`].
    pub aggregation: String,
    /// What clean-up after a committed save could not do (this rank's, rank
    /// 0 writing the record; every rank prints its own): each entry names
    /// the checkpoint and generation that is complete and restorable, and
    /// what failed after it. Absent when nothing failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after_commit: Vec<String>,
}

/// The terminal table: one line per (state, method, op).
pub(crate) fn print_table(rows: &[Row], backend: &str, location: &str, dest: Dest, world: usize) {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header([
        "state",
        "method",
        "op",
        "ranks",
        "GB",
        "wall s (slowest rank)",
        "stall s",
        "GB/s",
        "client cores",
        "host cores",
        "chunks/rank",
        "flatten/rebuild s",
        "restore cache",
        "witness",
        "verified",
    ]);
    for r in rows {
        let w = &r.wall_s;
        t.add_row([
            r.state.clone(),
            r.method.name().to_string(),
            r.op.name().to_string(),
            r.ranks.to_string(),
            format!("{:.2}", r.bytes as f64 / 1e9),
            if w.max > w.min { format!("{:.3} ({:.3}–{:.3})", w.median, w.min, w.max) } else { format!("{:.3}", w.median) },
            format!("{:.3}", r.stall_s.median),
            format!("{:.2}", r.throughput_gbps.median),
            format!("{:.2}", r.client_cpu_cores.median),
            format!("{:.2}", r.host_cpu_cores.median),
            r.chunks_per_rank.to_string(),
            format!("{:.3}", if r.op == CkptOp::Save { r.flatten_s.median } else { r.rebuild_s.median }),
            cache_cell(r),
            r.witness_verdict.clone(),
            r.verified.as_ref().map_or("-".into(), |v| if v.ok { format!("ok ({})", v.tensors_checked) } else { format!("MISMATCH ({})", v.mismatched.len()) }),
        ]);
    }
    println!("ckpt on {backend} ({location}), {} memory, {world} rank(s); GB/s = {AGGREGATION}", dest.name());
    println!("{t}");
}

/// The table's `restore cache` cell: `-` for a save; `warm`; `cold: <method>`;
/// the method alone where the cache is not ours to say; plus, for O_DIRECT,
/// the share of the bytes read with it, and otherwise the share of the
/// checkpoint that was cached as the restore began, where known.
fn cache_cell(r: &Row) -> String {
    let (Some(cache), Some(method)) = (&r.cache, &r.restore_cache) else { return "-".into() };
    let head = if cache == method {
        cache.clone()
    } else if cache == "unknown" {
        method.clone()
    } else {
        format!("{cache}: {method}")
    };
    let figs = || r.repeats.iter().flat_map(|rep| rep.per_rank.iter().filter_map(|f| f.restore_cache.as_ref()));
    let direct: Option<u64> = figs().map(|c| c.direct_read_bytes).sum();
    let fallback: Option<u64> = figs().map(|c| c.direct_fallback_bytes).sum();
    if let (Some(d), Some(f)) = (direct, fallback)
        && d + f > 0
    {
        return format!("{head}, {:.0} % read direct", d as f64 * 100.0 / (d + f) as f64);
    }
    match (r.cached_bytes, r.file_bytes) {
        (Some(c), Some(n)) if n > 0 => format!("{head}, {:.0} % cached", c as f64 * 100.0 / n as f64),
        _ => head,
    }
}

/// One label for values that should agree: the value, or `mixed: a; b` when they do not.
fn agreed<'a>(values: impl Iterator<Item = &'a str>) -> Option<String> {
    let mut seen: Vec<&str> = Vec::new();
    for v in values {
        if !seen.contains(&v) {
            seen.push(v);
        }
    }
    match seen.len() {
        0 => None,
        1 => Some(seen[0].to_string()),
        _ => Some(format!("mixed: {}", seen.join("; "))),
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn summarize(
    spec: &StateSpec,
    method: CkptMethod,
    op: CkptOp,
    plan: &CkptPlan,
    world: usize,
    reps: Vec<RepeatRow>,
    verified: Option<Verified>,
) -> Row {
    let spread = |f: &dyn Fn(&RepeatRow) -> f64| Spread::of(reps.iter().map(f)).expect("repeats >= 1");
    let max_of = |f: fn(&OpFigures) -> f64| move |r: &RepeatRow| r.per_rank.iter().map(f).fold(0.0, f64::max);
    let caches = || reps.iter().flat_map(|r| r.per_rank.iter().filter_map(|f| f.restore_cache.as_ref()));
    // The most cached at the start of any repeat, all ranks together (a repeat with a rank that could not tell counts as unknown).
    let cached_bytes = if caches().next().is_none() {
        None
    } else {
        reps.iter().map(|r| r.per_rank.iter().map(|f| f.restore_cache.as_ref().and_then(|c| c.cached_bytes)).sum::<Option<u64>>()).max().flatten()
    };
    let verdict = reps.iter().filter_map(|r| r.witness.as_ref()).min_by_key(|w| w.verdict).map_or("-".to_string(), |w| w.verdict.as_str().to_string());
    Row {
        workload: spec.workload.into(),
        state: spec.name.clone(),
        method,
        op,
        ranks: world,
        size_bytes: spec.size_bytes,
        bytes: reps.first().map_or(0, |r| r.bytes),
        chunks_per_rank: reps.iter().flat_map(|r| r.per_rank.iter().map(|f| f.chunks)).max().unwrap_or(0),
        chunk_bytes: reps.iter().flat_map(|r| r.per_rank.iter().map(|f| f.chunk_bytes)).max().unwrap_or(0),
        concurrency: if method == CkptMethod::SerializeThenPut { 1 } else { plan.concurrency as usize },
        wall_s: spread(&|r| r.wall_s),
        stall_s: spread(&max_of(|f| f.stall_s)),
        throughput_gbps: spread(&|r| r.throughput_gbps),
        client_cpu_cores: spread(&|r| r.client_cpu_cores),
        host_cpu_cores: spread(&|r| r.host_cpu_cores),
        flatten_s: spread(&max_of(|f| f.flatten_s)),
        rebuild_s: spread(&max_of(|f| f.rebuild_s)),
        transfer_s: spread(&max_of(|f| f.transfer_s)),
        checksum_s: spread(&max_of(|f| f.checksum_s)),
        witness_verdict: verdict,
        verified,
        cache: agreed(caches().map(|c| c.cache.as_str())),
        restore_cache: agreed(caches().map(|c| c.method.as_str())),
        cached_bytes,
        // Every repeat restores the same files: the first one's, all ranks.
        file_bytes: reps.first().and_then(|r| r.per_rank.iter().map(|f| f.restore_cache.as_ref().filter(|c| c.files > 0).map(|c| c.file_bytes)).sum()),
        train: TrainRow::of(&reps.iter().map(|r| r.per_rank.iter().map(|p| p.train.as_ref()).collect()).collect::<Vec<_>>()),
        repeats: reps,
    }
}
