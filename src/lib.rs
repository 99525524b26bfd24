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

use cli::{Cli, Command};
use error::Result;

/// Run one parsed command line.
pub async fn run(cli: Cli) -> Result<()> {
    if matches!(cli.command, Command::Fetch(_) | Command::Ckpt(_) | Command::Tokens(_) | Command::Weights(_) | Command::Train(_)) {
        // These write a record with the host's facts at the end; read them meanwhile.
        record::HostInfo::prefetch();
    }
    let mut cli = cli;
    if let Some(store) = cli.command.store_args_mut() {
        store.resolve_aws().await;
    }
    match cli.command {
        Command::Fetch(args) => bench::driver::drive(bench::fetch::Fetch::new(args.plan())).await,
        Command::Verify(args) => bench::driver::drive(bench::verify::Verify::new(args.plan())).await,
        Command::Ckpt(args) => bench::driver::drive(bench::ckpt::Ckpt::new(args.plan())).await,
        Command::Ingest(kind) => ingest::run(kind.plan()).await,
        Command::Tokens(args) => bench::driver::drive(bench::tokens::Tokens::new(args.plan())).await,
        Command::Weights(args) => bench::driver::drive(bench::weights::Weights::new(args.plan())).await,
        Command::Train(args) => bench::driver::drive(bench::train::Train::new(args.plan())).await,
        Command::Barrier(args) => bench::driver::drive(bench::barrier::Barrier::new(args.plan())).await,
        Command::Report(args) => report::run(args.plan()).await,
        Command::Completions { shell } => report::write_stdout(&cli::completions(shell)),
    }
}
