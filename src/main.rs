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
    // std's printing macros panic when the output cannot be written (a full
    // disk under a redirect, a closed pipe): that is the user's situation,
    // not a bug, so it ends the run with a message and exit 1, not a panic.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if s3rdma::error::output_failure(info.payload()).is_none() {
            default_hook(info);
        }
    }));
    use std::io::Write;
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| rt.block_on(s3rdma::run(cli)))) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            let _ = writeln!(std::io::stderr(), "error: {e}");
            std::process::exit(e.exit_code());
        }
        Err(p) => match s3rdma::error::output_failure(p.as_ref()) {
            Some(msg) => {
                let _ = writeln!(std::io::stderr(), "error: {msg}: the output could not be written (a full disk or a closed pipe?)");
                std::process::exit(1);
            }
            None => std::panic::resume_unwind(p),
        },
    }
}
