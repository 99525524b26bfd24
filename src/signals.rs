//! The process's answer to SIGINT and SIGTERM: within [`GRACE`] of the first,
//! it exits 128 + the signal (130, 143), whatever the run was doing; a second
//! signal exits at once.
//!
//! Work that must tidy up first (the local rank supervisor stopping its
//! ranks, a rank removing its meeting objects) holds a [`Tidying`] while it
//! runs and gets the grace to finish; with none held the process exits as
//! soon as the signal arrives. Those parts listen for the signal themselves
//! (tokio's `signal`, or [`received`]): this thread only bounds the time.
//!
//! Own code (on `signal-hook`'s iterator, on a thread of its own) because the
//! deadline must hold when every worker of the async runtime is busy in a
//! long loop, which a handler on the runtime cannot promise.

use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Longest a signalled process takes to exit while something is tidying up.
pub const GRACE: Duration = Duration::from_millis(800);

/// The first signal received (0: none yet).
static RECEIVED: AtomicI32 = AtomicI32::new(0);
/// [`Tidying`]s held now.
static TIDYING: AtomicUsize = AtomicUsize::new(0);

/// Work that, on a signal, tidies up before the process exits (and then exits
/// itself); held while that work can run. See the module doc.
#[derive(Debug)]
pub struct Tidying(());

impl Tidying {
    /// Ask for the grace on a signal until this is dropped.
    pub fn hold() -> Tidying {
        TIDYING.fetch_add(1, Ordering::SeqCst);
        Tidying(())
    }
}

impl Drop for Tidying {
    fn drop(&mut self) {
        TIDYING.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The signal number received, once one arrived.
pub fn received() -> Option<i32> {
    match RECEIVED.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// The name of a signal this module answers.
pub fn name(signal: i32) -> &'static str {
    if signal == libc::SIGINT { "SIGINT" } else { "SIGTERM" }
}

/// Start answering SIGINT and SIGTERM (once per process, first thing in
/// `main`).
///
/// Errors: the handlers cannot be registered (the signals then keep their
/// default action, which also ends the process).
pub fn install() -> std::io::Result<()> {
    let mut signals = signal_hook::iterator::Signals::new([libc::SIGINT, libc::SIGTERM])?;
    std::thread::Builder::new().name("s3rdma-signals".into()).spawn(move || {
        for signal in signals.forever() {
            if RECEIVED.compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst).is_err() {
                // The second signal: no more waiting.
                std::process::exit(128 + RECEIVED.load(Ordering::SeqCst));
            }
            std::thread::spawn(move || {
                let t0 = Instant::now();
                while TIDYING.load(Ordering::SeqCst) > 0 && t0.elapsed() < GRACE {
                    std::thread::sleep(Duration::from_millis(5));
                }
                // What would outlive this process (a credential_process, ranks
                // that did not stop): stopped too.
                crate::children::stop_all();
                eprintln!("interrupted ({}): stopped, no record written", name(signal));
                std::process::exit(128 + signal);
            });
        }
    })?;
    Ok(())
}
