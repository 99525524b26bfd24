//! s3rdma: how fast deep-learning storage work runs over S3-over-RDMA, tuned
//! S3-over-HTTP and local disk, and which transport really carried the bytes.
//!
//! Data flows one way: [`cli`] -> [`bench::session`] -> [`mod@bench`] -> ([`store`], [`mem`])
//! -> [`record`] -> [`report`]; the [`witness`] and [`sampler`] wrap each timed
//! window inside the session. `docs/architecture.md` draws it.

#![warn(unreachable_pub, missing_debug_implementations, clippy::all)]

pub mod bench;
pub mod catalog;
pub mod children;
pub mod cli;
pub mod clock;
pub mod error;
pub mod flag;
pub mod format;
pub mod ingest;
pub mod mem;
pub mod rank_env;
pub mod ranks;
pub mod record;
pub mod report;
pub mod sampler;
pub mod signals;
pub mod stats;
pub mod store;
pub mod units;
pub mod witness;

#[cfg(test)]
mod proptests;

use cli::Cli;
use error::Result;

/// Run one parsed command line.
pub async fn run(cli: Cli) -> Result<()> {
    let mut cli = cli;
    if let Some(store) = cli.command.store_args_mut() {
        store.resolve_aws().await;
    }
    cli.command.run().await
}
