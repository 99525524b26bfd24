//! Fan-out with fail-fast: many transfers at once, and the first failure
//! stops the rest (without it, a 2 GiB checkpoint in 64 MiB chunks against a
//! stalled server took 55-218 s to fail while every chunk ran its attempts).

use crate::error::{Error, Result};

/// Run transfers (checkpoint chunks, model shards) with at most
/// `concurrency` in flight, each its own task (a local read or write blocks
/// its thread); results in input order.
/// Fail fast: the first failure starts no further chunk and
/// aborts those in flight (their requests are dropped mid-way, a multipart
/// upload is aborted), so the error comes after one request's attempts, not
/// after every chunk's; and this returns only once every started task has
/// ended, so no view of the caller's buffer outlives it.
///
/// Errors: the first chunk's error; a task that panicked.
pub(crate) async fn run_fail_fast<T, Fut>(chunks: Vec<Fut>, concurrency: usize) -> Result<Vec<T>>
where
    T: Send + 'static,
    Fut: std::future::Future<Output = Result<T>> + Send + 'static,
{
    let mut out: Vec<Option<T>> = (0..chunks.len()).map(|_| None).collect();
    let mut pending = chunks.into_iter().enumerate();
    let mut set = tokio::task::JoinSet::new();
    let mut failure: Option<Error> = None;
    loop {
        while failure.is_none() && set.len() < concurrency.max(1) {
            let Some((i, f)) = pending.next() else { break };
            set.spawn(async move { (i, f.await) });
        }
        let e = match set.join_next().await {
            None => break,
            Some(Ok((i, Ok(v)))) => {
                out[i] = Some(v);
                continue;
            }
            Some(Ok((_, Err(e)))) => e,
            Some(Err(e)) if e.is_cancelled() => continue,
            Some(Err(e)) => Error::Runtime(format!("task failed: {e}")),
        };
        if failure.is_none() {
            failure = Some(e);
            set.abort_all();
        }
    }
    match failure {
        Some(e) => Err(e),
        None => Ok(out.into_iter().map(|v| v.expect("every chunk ran")).collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;
    use std::time::Instant;

    /// 64 chunks, 8 in flight, chunk 3 fails at once while the others would
    /// take 5 s each: the error comes at once, no chunk after the failure
    /// starts, and every started chunk has ended (none finishes later).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_first_failed_chunk_stops_the_rest_at_once() {
        let started = Arc::new(AtomicUsize::new(0));
        let last_started = Arc::new(AtomicUsize::new(0));
        let finished = Arc::new(AtomicUsize::new(0));
        let chunks: Vec<_> = (0..64)
            .map(|i| {
                let (started, last_started, finished) = (started.clone(), last_started.clone(), finished.clone());
                async move {
                    started.fetch_add(1, Ordering::SeqCst);
                    last_started.fetch_max(i, Ordering::SeqCst);
                    if i == 3 {
                        return Err(Error::Runtime("chunk 3: stalled server".into()));
                    }
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    finished.fetch_add(1, Ordering::SeqCst);
                    Ok(i)
                }
            })
            .collect();
        let t0 = Instant::now();
        let e = run_fail_fast(chunks, 8).await.unwrap_err();
        assert!(e.to_string().contains("chunk 3"), "{e}");
        assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
        // The first 8 were spawned; those the abort reached before their
        // first poll never started (a matter of scheduling), none after them did.
        let n = started.load(Ordering::SeqCst);
        assert!((1..=8).contains(&n), "{n} started");
        assert!(last_started.load(Ordering::SeqCst) < 8, "a chunk after the first 8 started");
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(finished.load(Ordering::SeqCst), 0, "the aborted ones never finish");
        // Without a failure: every result, in input order.
        let ok: Vec<_> = (0..20u64).map(|i| async move { Ok::<_, Error>(i * 2) }).collect();
        assert_eq!(run_fail_fast(ok, 3).await.unwrap(), (0..20).map(|i| i * 2).collect::<Vec<_>>());
    }
}
