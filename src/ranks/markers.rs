//! Clearing a run's meeting objects (`s3rdma-ranks/<run_id>/`): when the
//! run ends, and when a launcher stops a rank with SIGTERM (or a user with
//! SIGINT) so that a restarted attempt finds nothing of this one.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;

use super::Rank;

use crate::signals;
use crate::store::{ObjectMeta, ObjectStore};

/// Requests in flight at once when rank 0 reads or removes the ranks'
/// objects (a gather, a clearing).
pub(super) const GATHER_CONCURRENCY: usize = 16;

/// Remove every meeting object of run `run_id` (`s3rdma-ranks/<run_id>/`)
/// from `store`, best effort, with bounded concurrency; returns the requests made.
pub async fn remove_markers(store: &dyn ObjectStore, run_id: &str) -> u64 {
    remove_where(store, run_id, |_| true).await
}

/// On SIGTERM (what torchrun's agent sends the surviving workers of a
/// failed group before restarting it) or SIGINT, clear this rank's meeting
/// objects (rank 0: the run's whole prefix; the others: their own markers),
/// within [`CLEAR_BUDGET`], then exit 128 + the signal (143, 130), so a
/// restarted attempt finds nothing of this one. Call once per process,
/// inside the runtime; the process holds a [`signals::Tidying`] from then on.
pub fn clear_on_stop(store: Arc<dyn ObjectStore>, me: Rank) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else { return };
    let tidying = signals::Tidying::hold();
    tokio::spawn(async move {
        let _tidying = tidying;
        let signal = tokio::select! {
            Some(()) = term.recv() => libc::SIGTERM,
            Some(()) = int.recv() => libc::SIGINT,
            else => return,
        };
        let own = format!("/r{:05}", me.rank);
        let clear = remove_where(store.as_ref(), &me.run_id, |o| me.is_root() || o.key.ends_with(&own));
        let cleared = tokio::time::timeout(CLEAR_BUDGET, clear).await.is_ok();
        let what = if cleared { "this rank's meeting objects removed" } else { "this rank's meeting objects not all removed in time" };
        eprintln!("rank {}: {}: stopped, {what}", me.rank, signals::name(signal));
        std::process::exit(128 + signal);
    });
}

/// Time a stopped rank, or the supervisor of stopped ranks, spends removing
/// meeting objects: inside [`signals::GRACE`], so the process exits within it.
pub const CLEAR_BUDGET: Duration = Duration::from_millis(600);

/// Delete the objects under `s3rdma-ranks/<run_id>/` that `remove` picks;
/// returns the requests made (the listing and each delete).
pub(super) async fn remove_where(store: &dyn ObjectStore, run_id: &str, remove: impl Fn(&ObjectMeta) -> bool) -> u64 {
    let base = format!("s3rdma-ranks/{run_id}/");
    let Ok(mut objs) = store.list(&base).await else { return 1 };
    objs.retain(|o| remove(o));
    let n = objs.len() as u64;
    futures::stream::iter(objs)
        .for_each_concurrent(GATHER_CONCURRENCY, |o| async move {
            let _ = store.delete(&o.key).await;
        })
        .await;
    1 + n
}
