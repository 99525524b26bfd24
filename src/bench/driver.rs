//! The one shape every measuring subcommand has, and the one driver that
//! runs it (after MinIO warp's `Benchmark` interface, `pkg/bench/benchmark.go`:
//! prepare, start, cleanup).
//!
//! A bench is a value implementing [`Bench`]; [`drive`] owns the order:
//!
//! ```text
//! setup    usage checks, work that writes no record       -> the session to start, or none
//! start    Session::start (ranks, GPU, store, witness, group)
//! prepare  what the timed windows read (objects, buffers)
//! measure  the timed windows (Session::open_window / close_window) -> Outcome
//! cleanup  what prepare made for this run alone, whether measure succeeded or not
//! finish   Session::finish: record, print (rank 0), exit status
//! ```
//!
//! Adding a bench is its folder under `src/bench/` and one line in the CLI's
//! subcommand list (`src/cli/mod.rs`), which parses its flags into the
//! bench's value (docs/architecture.md, "What a change touches").

use std::sync::Arc;

use serde::Serialize;

use super::session::{Outcome, Session, SessionSpec};
use crate::error::{Error, Result};

/// One measuring subcommand: its steps, its typed record parts and its table.
///
/// Only [`drive`] calls these, in the order its module documents. Every
/// rank runs every step; [`Bench::print`] runs on rank 0 alone.
// `async fn` in this trait is meant: the driver runs on the main thread's
// `block_on` and never needs its futures to be `Send`.
#[allow(async_fn_in_trait)]
pub trait Bench {
    /// The record's `params`: the bench's configuration as run.
    type Params: Serialize;
    /// The record's `results`.
    type Results: Serialize;

    /// Check the plan and do whatever needs no record (e.g. `weights --synth`
    /// writes a model): the session to start, or `None` when this invocation
    /// measures nothing (the process then exits 0).
    ///
    /// Errors: a usage error before anything starts (exit 2), or the work's.
    async fn setup(&mut self) -> Result<Option<SessionSpec>>;

    /// What a failure to start the session means for this bench (default:
    /// itself). `verify` reports a store the library cannot open as a finding.
    fn start_failed(&self, e: Error) -> Error {
        e
    }

    /// After the session started, before any timed window: write or find
    /// what the windows read, allocate buffers, say how device memory is
    /// staged ([`Session::device_path`]). Default: nothing.
    async fn prepare(&mut self, _s: &mut Session) -> Result<()> {
        Ok(())
    }

    /// The timed windows, each bracketed by [`Session::open_window`] and
    /// [`Session::close_window`], and what the record says of them. The
    /// session is shared (`Arc`) for a bench that times on its own thread.
    async fn measure(&mut self, s: &Arc<Session>) -> Result<Outcome<Self::Params, Self::Results>>;

    /// Remove what [`Bench::prepare`] made for this run alone; runs after
    /// [`Bench::measure`] whether it succeeded or not. Default: nothing.
    async fn cleanup(&mut self, _s: &Session) {}

    /// The terminal table and the lines under it (rank 0, not with `--json`).
    fn print(&self, s: &Session, results: &Self::Results);

    /// A line said on stderr after a run whose stdout was the record alone
    /// (`--json`), where the table would have said it. Default: none.
    fn json_note(&self) -> Option<String> {
        None
    }
}

/// Run `bench` through its steps (see the module): the one place a
/// measuring subcommand's session starts and ends.
///
/// Errors: the first step's error (after [`Bench::cleanup`] when
/// [`Bench::measure`] failed), or [`Session::finish`]'s.
pub async fn drive<B: Bench>(mut bench: B) -> Result<()> {
    // Every bench writes a record with the host's facts at the end; read them meanwhile.
    crate::record::HostInfo::prefetch();
    let Some(spec) = bench.setup().await? else { return Ok(()) };
    let mut s = match Session::start(spec).await {
        Ok(Some(s)) => s,
        // This process only started the ranks: they ran the bench.
        Ok(None) => return Ok(()),
        Err(e) => return Err(bench.start_failed(e)),
    };
    bench.prepare(&mut s).await?;
    let s = Arc::new(s);
    let measured = bench.measure(&s).await;
    bench.cleanup(&s).await;
    let done = s.finish(measured?, |results| bench.print(&s, results)).await;
    if done.is_ok()
        && s.is_root()
        && s.json_output()
        && let Some(note) = bench.json_note()
    {
        eprintln!("{note}");
    }
    done
}
