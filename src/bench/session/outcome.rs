//! What a bench hands the session at the end ([`Outcome`]): its parameters
//! and typed results, every timed window's report, and a failure that still
//! leaves a record. Part of the session (`session/mod.rs`).

use serde_json::Value;

use crate::error::Error;
use crate::record::{GpuEnvironment, WindowId};
use crate::store::StoreStats;
use crate::witness::WitnessReport;

/// What a bench hands [`Session::finish`](super::Session::finish).
#[derive(Debug)]
pub struct Outcome<P, R> {
    /// The bench's configuration as recorded (`params`).
    pub params: P,
    /// The bench's typed results (`results`).
    pub results: R,
    /// Every timed window's report with its id and a label naming it (rank 0).
    pub windows: Vec<(WindowId, String, WitnessReport)>,
    /// Extra `rdma_witness` fields (fetch: its per-cell verdicts).
    pub witness_extra: Vec<(&'static str, Value)>,
    /// The GPU `environment.gpu` names when the bench opened its own (verify), not the session's.
    pub gpu: Option<GpuEnvironment>,
    /// The store counters' growth over all timed windows (for the terminal line).
    pub stats: StoreStats,
    /// The bench's own failure that still leaves a record: a data mismatch
    /// (exit 4) or a failed step (exit 1).
    pub failure: Option<Error>,
    /// The measurement does not mean what its figures say (a window that
    /// read nothing from the store): no record is written, every rank exits
    /// with this error after the last meeting.
    pub invalid: Option<Error>,
    /// A bench that moves no data by design (`barrier`) says why here: its
    /// verdict is then not-applicable, never "no timed window ran".
    pub verdict_without_windows: Option<String>,
}

impl<P, R> Outcome<P, R> {
    /// An outcome with no extras and no failure.
    pub fn new(params: P, results: R, windows: Vec<(WindowId, String, WitnessReport)>) -> Self {
        Outcome {
            params,
            results,
            windows,
            witness_extra: Vec::new(),
            gpu: None,
            stats: StoreStats::default(),
            failure: None,
            invalid: None,
            verdict_without_windows: None,
        }
    }
}
