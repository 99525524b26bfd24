//! Thin binary: parse, set up logging, run, map the error to an exit code.

use clap::Parser;
use s3rdma::cli::Cli;

fn main() {
    s3rdma::clock::mark_main();
    let cli = Cli::parse();
    let default = match cli.verbose {
        // Our warnings only: dependencies' go through -v and RUST_LOG.
        0 => "s3rdma=warn",
        1 => "s3rdma=info",
        2 => "s3rdma=debug",
        // Dependencies' traces (the SDK's include the access key id) only through RUST_LOG.
        _ => "s3rdma=trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    use std::io::IsTerminal;
    tracing_subscriber::fmt().with_env_filter(filter).with_ansi(std::io::stderr().is_terminal()).with_writer(std::io::stderr).init();

    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = rt.block_on(s3rdma::run(cli)) {
        eprintln!("error: {e}");
        std::process::exit(e.exit_code());
    }
}
