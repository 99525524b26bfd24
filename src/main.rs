//! Thin binary: parse, set up logging, run, map the error to an exit code.

/// Environment variables the flags fall back to (`env = ...` in `src/cli/`)
/// and those the AWS settings are resolved from (`src/store/http/aws.rs`).
const FLAG_ENV: [&str; 14] = [
    "AWS_ACCESS_KEY_ID",
    "AWS_CA_BUNDLE",
    "AWS_DEFAULT_REGION",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_PROFILE",
    "AWS_REGION",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "MINIOCPP_LIB",
    "S3RDMA_METRICS_TOKEN",
    "S3_ACCESS_KEY",
    "S3_ENDPOINT",
    "S3_SECRET_KEY",
];

fn main() {
    s3rdma::clock::mark_main();
    // An empty variable is an unset one, as the AWS CLI and SDKs read them
    // (`MINIOCPP_LIB= s3rdma fetch` must not demand a value for --rdma-lib).
    for k in FLAG_ENV {
        if std::env::var_os(k).is_some_and(|v| v.is_empty()) {
            // SAFETY: the first thing main does, before any other thread exists.
            unsafe { std::env::remove_var(k) };
        }
    }
    // SIGINT and SIGTERM end the run within a second, whatever it is doing (src/signals.rs).
    if let Err(e) = s3rdma::signals::install() {
        eprintln!("warning: cannot handle SIGINT/SIGTERM ({e}): they end the process without tidying up");
    }
    let cli = s3rdma::cli::parse();
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
            let _ = writeln!(std::io::stderr(), "error: {}", s3rdma::cli::message(&e));
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
