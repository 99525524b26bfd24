//! What `fetch` records and prints: each process's figures, a repeat summed over processes, the per-cell summary over repeats, and the table.

use super::OpSample;
use crate::sampler::SamplerReport;
use crate::stats::{Latency, Spread, host_cores};
use crate::store::TransferPath;
use crate::units::size_name;
use crate::witness::{self, Verdict, WitnessReport};
use comfy_table::{Cell, CellAlignment, Table, presets::UTF8_FULL_CONDENSED};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Figures of one timed repeat of one cell.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RepeatResult {
    /// 1-based repeat number.
    pub repeat: u32,
    /// `--series`: [seconds since the window opened, GB/s in the interval ending then]
    /// from rank 0's completed GETs (a GET counts when it completes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub series: Option<Vec<[f64; 2]>>,
    /// Worker processes in this cell.
    pub procs: u32,
    /// Payload bytes read (client's count, all processes).
    pub bytes: u64,
    /// Completed GETs.
    pub ops: u64,
    /// Wall seconds of the timed window (first process's start to the last one's end).
    pub wall_s: f64,
    /// bytes / wall / 1e9.
    pub throughput_gbps: f64,
    /// bytes / wall / 2^30.
    pub throughput_gibps: f64,
    /// ops / wall.
    pub ops_per_s: f64,
    /// Per-GET latency (request to last byte).
    pub latency_ms: Option<Latency>,
    /// Per-GET time to first byte (http only).
    pub ttfb_ms: Option<Latency>,
    /// Client CPU in cores (getrusage over the window), summed over processes.
    pub client_cpu_cores: f64,
    /// throughput_gbps / client_cpu_cores.
    pub gbps_per_core: Option<f64>,
    /// Whole-host CPU in cores.
    pub host_cpu_cores: f64,
    /// NIC bytes received, all interfaces but loopback.
    pub nic_rx_bytes: u64,
    /// NIC bytes sent, all interfaces but loopback.
    pub nic_tx_bytes: u64,
    /// Everything the sampler measured.
    pub sampler: SamplerReport,
    /// The server's account of this window's transport.
    pub witness: WitnessReport,
    /// The store's counters' growth in this window, summed over processes:
    /// bytes per transfer path and the backend's own (rdma: the library's
    /// return codes `rdma_calls`, `rdma_ok`, ...). Schema 1 had the
    /// library's part alone, under `rdma_calls`.
    pub store_stats: crate::store::StoreStats,
    /// Median and range of the processes' own GB/s.
    pub per_process_gbps: Spread,
    /// Every process's figures (one entry for a single process).
    pub per_process: Vec<ProcFigures>,
}

/// One worker process's figures for one repeat of one cell.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProcFigures {
    /// Rank of the process these figures come from.
    pub rank: usize,
    /// Host name of that process.
    pub host: String,
    /// Payload bytes moved (the client's own count).
    pub bytes: u64,
    /// Completed GETs.
    pub ops: u64,
    /// Wall seconds of the timed work.
    pub wall_s: f64,
    /// Throughput, GB/s (bytes / wall / 1e9).
    pub throughput_gbps: f64,
    /// Wall-clock start and end of its timed window (Unix seconds).
    pub start_unix_s: f64,
    /// Wall-clock end of its timed window (Unix seconds).
    pub end_unix_s: f64,
    /// Client CPU in cores: CPU-seconds of this process (getrusage) / wall seconds.
    pub client_cpu_cores: f64,
    /// Whole-host CPU over its window (the same host for local ranks).
    pub host_cpu_cores: f64,
    /// Bytes it read over HTTP itself (declined or beyond one RDMA transfer).
    pub client_http_bytes: u64,
}

/// What a process sends rank 0: its figures and its per-GET samples (ms).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ProcWire {
    pub(crate) figures: ProcFigures,
    pub(crate) latency_ms: Vec<f64>,
    pub(crate) ttfb_ms: Vec<f64>,
}

/// Median and range over repeats of one cell.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CellSummary {
    /// Throughput, GB/s (bytes / wall / 1e9).
    pub throughput_gbps: Spread,
    /// Throughput, GiB/s (bytes / wall / 2^30).
    pub throughput_gibps: Spread,
    /// Completed operations per second.
    pub ops_per_s: Spread,
    /// Median over repeats of the per-GET latency p50, milliseconds.
    pub latency_p50_ms: Option<Spread>,
    /// Median over repeats of the per-GET latency p99, milliseconds.
    pub latency_p99_ms: Option<Spread>,
    /// Client CPU in cores: CPU-seconds of this process (getrusage) / wall seconds.
    pub client_cpu_cores: Spread,
    /// GB/s per client core (throughput_gbps / client_cpu_cores).
    pub gbps_per_core: Option<Spread>,
    /// Whole-host CPU in cores: busy fraction x logical CPUs (/proc/stat via sysinfo).
    pub host_cpu_cores: Spread,
    /// Worst verdict over the repeats.
    pub witness_verdict: Verdict,
    /// The reason that goes with it.
    pub witness_reason: String,
    /// Median RDMA share over repeats, where counters were read.
    pub rdma_share: Option<Spread>,
    /// RDMA share of the repeat the verdict comes from (the worst).
    pub witness_share: Option<f64>,
    /// Median over repeats of the median process's GB/s.
    pub per_process_gbps: Spread,
}

/// One (size, streams, processes) cell.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CellResult {
    /// Object size of the cell, bytes.
    pub size_bytes: u64,
    /// Streams per process.
    pub concurrency: u32,
    /// Worker processes.
    pub procs: u32,
    /// Every timed repeat of the cell.
    pub repeats: Vec<RepeatResult>,
    /// Median and range over the repeats.
    pub summary: CellSummary,
}

/// One process's window as figures plus samples.
pub(crate) fn proc_wire(rank: usize, host: &str, ops: &[OpSample], wall: Duration, start_unix_s: f64, s: &SamplerReport) -> ProcWire {
    let bytes: u64 = ops.iter().map(|o| o.bytes).sum();
    let wall_s = wall.as_secs_f64().max(1e-9);
    ProcWire {
        figures: ProcFigures {
            rank,
            host: host.into(),
            bytes,
            ops: ops.len() as u64,
            wall_s,
            throughput_gbps: bytes as f64 / wall_s / 1e9,
            start_unix_s,
            end_unix_s: start_unix_s + wall_s,
            client_cpu_cores: s.client_cpu_cores,
            host_cpu_cores: s.host_cpu_cores,
            client_http_bytes: ops.iter().filter(|o| matches!(o.path, TransferPath::Http | TransferPath::HttpStaged)).map(|o| o.bytes).sum(),
        },
        latency_ms: ops.iter().map(|o| o.latency.as_secs_f64() * 1e3).collect(),
        ttfb_ms: ops.iter().filter_map(|o| o.ttfb).map(|t| t.as_secs_f64() * 1e3).collect(),
    }
}

/// A repeat from the processes' figures: bytes and ops summed, wall from the
/// first start to the last end (a lone process: its own wall), client CPU
/// summed, host CPU the busiest view per host summed over hosts, NIC bytes
/// from `s` (rank 0's sampler: the whole host).
pub(crate) fn summarize_repeat(repeat: u32, procs: Vec<ProcWire>, s: SamplerReport, w: WitnessReport) -> RepeatResult {
    let bytes: u64 = procs.iter().map(|p| p.figures.bytes).sum();
    let ops: u64 = procs.iter().map(|p| p.figures.ops).sum();
    let wall_s = if procs.len() == 1 {
        procs[0].figures.wall_s
    } else {
        let first = procs.iter().map(|p| p.figures.start_unix_s).fold(f64::INFINITY, f64::min);
        let last = procs.iter().map(|p| p.figures.end_unix_s).fold(0.0, f64::max);
        (last - first).max(1e-9)
    };
    let gbps = bytes as f64 / wall_s / 1e9;
    let to_d = |v: &[f64]| v.iter().map(|ms| Duration::from_secs_f64(ms / 1e3)).collect::<Vec<_>>();
    let lat: Vec<Duration> = procs.iter().flat_map(|p| to_d(&p.latency_ms)).collect();
    let ttfb: Vec<Duration> = procs.iter().flat_map(|p| to_d(&p.ttfb_ms)).collect();
    let client_cpu_cores: f64 = procs.iter().map(|p| p.figures.client_cpu_cores).sum();
    let host_cpu_cores = host_cores(procs.iter().map(|p| (p.figures.host.as_str(), p.figures.host_cpu_cores)));
    let per_process: Vec<ProcFigures> = procs.into_iter().map(|p| p.figures).collect();
    RepeatResult {
        repeat,
        series: None,
        procs: per_process.len() as u32,
        bytes,
        ops,
        wall_s,
        throughput_gbps: gbps,
        throughput_gibps: bytes as f64 / wall_s / (1u64 << 30) as f64,
        ops_per_s: ops as f64 / wall_s,
        latency_ms: Latency::from_durations(&lat),
        ttfb_ms: Latency::from_durations(&ttfb),
        client_cpu_cores,
        gbps_per_core: (client_cpu_cores > 0.0).then(|| gbps / client_cpu_cores),
        host_cpu_cores,
        nic_rx_bytes: s.nic_rx_bytes,
        nic_tx_bytes: s.nic_tx_bytes,
        sampler: s,
        witness: w,
        store_stats: Default::default(),
        per_process_gbps: Spread::of(per_process.iter().map(|p| p.throughput_gbps)).expect("at least one process"),
        per_process,
    }
}

pub(crate) fn summarize_cell(reps: &[RepeatResult]) -> CellSummary {
    let labels: Vec<String> = reps.iter().map(|r| format!("repeat {}", r.repeat)).collect();
    let (verdict, reason) = witness::worst(labels.iter().map(String::as_str).zip(reps.iter().map(|r| &r.witness))).expect("at least one repeat");
    let sp = |f: fn(&RepeatResult) -> f64| Spread::of(reps.iter().map(f)).expect("at least one repeat");
    let opt = |f: fn(&RepeatResult) -> Option<f64>| {
        let v: Vec<f64> = reps.iter().filter_map(f).collect();
        Spread::of(v)
    };
    CellSummary {
        throughput_gbps: sp(|r| r.throughput_gbps),
        throughput_gibps: sp(|r| r.throughput_gibps),
        ops_per_s: sp(|r| r.ops_per_s),
        latency_p50_ms: opt(|r| r.latency_ms.as_ref().map(|l| l.p50_ms)),
        latency_p99_ms: opt(|r| r.latency_ms.as_ref().map(|l| l.p99_ms)),
        client_cpu_cores: sp(|r| r.client_cpu_cores),
        gbps_per_core: opt(|r| r.gbps_per_core),
        host_cpu_cores: sp(|r| r.host_cpu_cores),
        witness_verdict: verdict,
        witness_reason: reason,
        rdma_share: opt(|r| r.witness.rdma_share),
        witness_share: reps.iter().min_by_key(|r| r.witness.verdict).and_then(|r| r.witness.rdma_share),
        per_process_gbps: sp(|r| r.per_process_gbps.median),
    }
}

pub(crate) fn placeholder_summary() -> CellSummary {
    let z = Spread { median: 0.0, min: 0.0, max: 0.0 };
    CellSummary {
        throughput_gbps: z,
        throughput_gibps: z,
        ops_per_s: z,
        latency_p50_ms: None,
        latency_p99_ms: None,
        client_cpu_cores: z,
        gbps_per_core: None,
        host_cpu_cores: z,
        witness_verdict: Verdict::Unverified,
        witness_reason: String::new(),
        rdma_share: None,
        witness_share: None,
        per_process_gbps: z,
    }
}

pub(crate) fn fmt_spread(s: &Spread, digits: usize, ranged: bool) -> String {
    if ranged && s.max > s.min { format!("{:.digits$} ({:.digits$}–{:.digits$})", s.median, s.min, s.max) } else { format!("{:.digits$}", s.median) }
}

/// The human table: one row per cell, medians (with ranges when repeated).
pub fn table(cells: &[CellResult]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    let has_ttfb = cells.iter().any(|c| c.repeats.iter().any(|r| r.ttfb_ms.is_some()));
    let multi = cells.iter().any(|c| c.procs > 1);
    let mut header = if multi { vec!["size", "procs x streams", "GB/s", "GB/s/proc"] } else { vec!["size", "streams", "GB/s"] };
    header.extend(["GiB/s", "ops/s", "lat p50 ms", "p90", "p99", "max"]);
    if has_ttfb {
        header.extend(["TTFB p50 ms", "p99"]);
    }
    header.extend(["client cores", "GB/s/core", "host cores", "NIC rx MB", "witness"]);
    t.set_header(header);
    for c in cells {
        let ranged = c.repeats.len() > 1;
        // Latency percentiles from the median repeat by throughput.
        let mut reps: Vec<&RepeatResult> = c.repeats.iter().collect();
        reps.sort_by(|a, b| a.throughput_gbps.total_cmp(&b.throughput_gbps));
        let mid = reps[reps.len() / 2];
        let l = |f: fn(&Latency) -> f64, lat: &Option<Latency>| lat.as_ref().map_or("-".into(), |l| format!("{:.2}", f(l)));
        let mut row = vec![size_name(c.size_bytes)];
        if multi {
            row.extend([
                format!("{} x {}", c.procs, c.concurrency),
                fmt_spread(&c.summary.throughput_gbps, 2, ranged),
                fmt_spread(&c.summary.per_process_gbps, 2, false),
            ]);
        } else {
            row.extend([c.concurrency.to_string(), fmt_spread(&c.summary.throughput_gbps, 2, ranged)]);
        }
        row.extend([
            fmt_spread(&c.summary.throughput_gibps, 2, false),
            fmt_spread(&c.summary.ops_per_s, 1, false),
            l(|l| l.p50_ms, &mid.latency_ms),
            l(|l| l.p90_ms, &mid.latency_ms),
            l(|l| l.p99_ms, &mid.latency_ms),
            l(|l| l.max_ms, &mid.latency_ms),
        ]);
        if has_ttfb {
            row.push(l(|l| l.p50_ms, &mid.ttfb_ms));
            row.push(l(|l| l.p99_ms, &mid.ttfb_ms));
        }
        row.push(fmt_spread(&c.summary.client_cpu_cores, 2, false));
        row.push(c.summary.gbps_per_core.map_or("-".into(), |s| fmt_spread(&s, 2, false)));
        row.push(fmt_spread(&c.summary.host_cpu_cores, 2, false));
        row.push(format!("{:.1}", mid.nic_rx_bytes as f64 / 1e6));
        row.push(match c.summary.witness_share {
            Some(sh) => format!("{} ({}% RDMA)", c.summary.witness_verdict.as_str(), witness::pct_floor(sh)),
            None => c.summary.witness_verdict.as_str().to_string(),
        });
        t.add_row(row.into_iter().map(|s| Cell::new(s).set_alignment(CellAlignment::Right)));
    }
    t
}
