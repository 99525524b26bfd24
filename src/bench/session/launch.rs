//! How a run finds its rank: a launcher's environment, one process, or the
//! ranks this process starts on this host and supervises ([`find_rank`]).
//! Part of the session (`session/mod.rs`).

use std::sync::Arc;

use super::{MAX_LOCAL_RANKS, SessionSpec, World};
use crate::error::{Error, Result};
use crate::flag::{DEST, PROCS, RANKS, RANKS_PER_PROCESS};
use crate::mem::Dest;
use crate::ranks::{self, GroupConfig, Rank};
use crate::store;
use crate::witness::Witness;

/// This process's rank: a launcher's (its environment), or rank 0 of one
/// process; `None` when this process started the ranks here itself and they
/// have all finished (the run is over for it).
///
/// Errors: a launcher's count below the bench's need, too many local ranks,
/// bad flags (checked once, before any rank starts), a rank's failure.
pub(super) async fn find_rank(spec: &SessionSpec, group_args: &GroupConfig) -> Result<Option<Rank>> {
    Ok(Some(match Rank::from_env(group_args.run_id.as_deref())? {
        Some(r) => {
            match spec.world {
                World::Ranks(Some(n)) if n as usize != r.world => {
                    eprintln!("warning: {RANKS} {n} ignored: started by {} as rank {} of {}", r.launcher, r.rank, r.world);
                }
                World::AtLeast(n) if n > r.world => {
                    return Err(Error::Usage(format!(
                        "{PROCS} {n} needs {n} processes but the launcher ({}) started {}: lower {PROCS} or launch more",
                        r.launcher, r.world
                    )));
                }
                _ => {}
            }
            r
        }
        None => {
            ranks::warn_partial_launcher_env();
            let world = match spec.world {
                World::Single => 1,
                World::Ranks(n) => n.unwrap_or(1) as usize,
                World::AtLeast(n) => n,
            };
            if world > MAX_LOCAL_RANKS {
                return Err(Error::Usage(format!(
                    "{world} rank processes on this one host: at most {MAX_LOCAL_RANKS} are started here; run more under a launcher across hosts (barrier: or simulate them as tasks with {RANKS_PER_PROCESS})"
                )));
            }
            if world > 1 {
                run_local_ranks(world, spec, group_args).await?;
                return Ok(None);
            }
            Rank::single()
        }
    }))
}

/// Start `world` ranks of this command on this host and supervise them until
/// they end (Ctrl-C or a kill of this process stops them); when one failed,
/// clear what they left of their meeting.
///
/// Errors: bad store, witness or GPU flags (once, before any rank starts);
/// the first failed rank's exit code.
async fn run_local_ranks(world: usize, spec: &SessionSpec, group_args: &GroupConfig) -> Result<()> {
    // Bad store, witness or GPU flags fail once, here, not once per rank.
    Witness::new(&spec.witness)?;
    drop(store::open(&spec.store)?);
    if spec.mem.dest != Dest::Host {
        crate::mem::cuda_probe().map_err(|e| Error::Runtime(format!("{DEST} {}: {e}: use {DEST} host", spec.mem.dest.name())))?;
    }
    let id = group_args.run_id.clone().unwrap_or_else(ranks::new_run_id);
    let run_id = id.clone();
    // On a signal the ranks are stopped and their meeting objects removed
    // within the process's grace (src/signals.rs).
    let _tidying = crate::signals::Tidying::hold();
    let stop = Arc::new(std::sync::atomic::AtomicI32::new(0));
    let flag = stop.clone();
    let mut supervisor = tokio::task::spawn_blocking(move || ranks::spawn_local(world, &run_id, &flag));
    // Ctrl-C or a kill of this process stops the ranks and removes
    // their meeting objects (below), never leaves them behind.
    use tokio::signal::unix::{SignalKind, signal};
    let (mut int, mut term) = (signal(SignalKind::interrupt()).ok(), signal(SignalKind::terminate()).ok());
    let ranks_done = loop {
        tokio::select! {
            r = &mut supervisor => break r.map_err(|e| Error::Runtime(format!("rank supervisor failed: {e}")))?,
            Some(()) = async { match int.as_mut() { Some(s) => s.recv().await, None => std::future::pending().await } } => stop.store(libc::SIGINT, std::sync::atomic::Ordering::SeqCst),
            Some(()) = async { match term.as_mut() { Some(s) => s.recv().await, None => std::future::pending().await } } => stop.store(libc::SIGTERM, std::sync::atomic::Ordering::SeqCst),
        }
    };
    if ranks_done.is_err() {
        // Every rank has exited: what they left of their meeting is
        // provably stale (a later run reusing this id would join a dead epoch).
        // Bounded: a store that does not answer must not keep a stopped run alive.
        if let Ok(st) = store::open(&spec.store) {
            let budget = if stop.load(std::sync::atomic::Ordering::SeqCst) != 0 { ranks::CLEAR_BUDGET } else { ranks::CLEAR_BUDGET * 10 };
            let _ = tokio::time::timeout(budget, ranks::remove_markers(st.as_ref(), &id)).await;
        }
    }
    ranks_done
}
