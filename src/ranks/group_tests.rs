//! Tests of the rank rendezvous (`group.rs`): in-process ranks over a local store.
use super::*;

#[test]
fn markers_name_their_rank() {
    assert_eq!(rank_of(&marker("s3rdma-ranks/x/e/00003-done", 17)), Some(17));
    assert_eq!(rank_of("s3rdma-ranks/x/e/00003-done/go"), None);
}

/// A local store in `dir` (test-only: built through the flags' one conversion).
fn local(dir: &std::path::Path) -> Arc<dyn ObjectStore> {
    let config = crate::cli::store_config_of(&["--root", dir.to_str().unwrap(), "--bucket", "bkt"]);
    std::fs::create_dir_all(dir.join("bkt")).unwrap();
    Arc::from(store::open(&config).unwrap())
}

fn rank(rank: usize, world: usize) -> Rank {
    Rank { rank, world, local_rank: rank, local_world: Some(world), launcher: "s3rdma", run_id: "t".into(), attempt: None }
}

async fn groups(store: &Arc<dyn ObjectStore>, world: usize, timeout: Duration, method: Rendezvous) -> Vec<Group> {
    // Rank 0 first: it publishes the epoch the others join.
    let mut out = vec![Group::join(rank(0, world), store.clone(), timeout, method).await.unwrap()];
    for r in 1..world {
        out.push(Group::join(rank(r, world), store.clone(), timeout, method).await.unwrap());
    }
    out
}

/// Rank 0's work at a barrier runs once, after every rank arrived and
/// before any leaves, and each rank knows its requests on either side; a
/// gather hands rank 0 every object in rank order, and the others go on
/// without waiting; O(1) requests per rank besides polls; cleanup leaves nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leader_barrier_releases_after_rank_0s_work_and_gathers_in_rank_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = local(dir.path());
    let world = 6;
    let gs = groups(&store, world, Duration::from_secs(20), Rendezvous::Leader).await;
    let arrived = Arc::new(AtomicU64::new(0));
    let worked = Arc::new(AtomicBool::new(false));
    let before: Vec<Coordination> = gs.iter().map(Group::coordination).collect();
    let tasks: Vec<_> = gs
        .into_iter()
        .map(|g| {
            let (arrived, worked) = (arrived.clone(), worked.clone());
            tokio::spawn(async move {
                let me = g.me.rank;
                // Rank 3 arrives late: nobody may leave before it.
                if me == 3 {
                    tokio::time::sleep(Duration::from_millis(150)).await;
                }
                arrived.fetch_add(1, Ordering::SeqCst);
                let r = g
                    .barrier_then("open", || async {
                        assert_eq!(arrived.load(Ordering::SeqCst), world as u64, "rank 0 worked before all arrived");
                        worked.store(true, Ordering::SeqCst);
                        7
                    })
                    .await
                    .unwrap();
                assert!(worked.load(Ordering::SeqCst), "rank {me} left before rank 0's work");
                assert_eq!(r.root, if me == 0 { Some(7) } else { None });
                if me == 0 {
                    // Its marker and at least one listing before its work; the go PUT after.
                    assert!(r.before.requests >= 2 && r.before.keys_listed >= world as u64, "{:?}", r.before);
                    assert_eq!((r.after.requests, r.after.polls), (1, 0), "{:?}", r.after);
                } else {
                    // Its marker and its polls, on both sides (it cannot tell when the work ran).
                    assert_eq!(r.before, r.after);
                    assert_eq!(r.after.requests - r.after.polls, 1, "{:?}", r.after);
                    assert!(r.after.polls >= 1, "{:?}", r.after);
                }
                let got = g.gather("figures", &serde_json::json!({"rank": me})).await.unwrap();
                (g, got)
            })
        })
        .collect();
    let mut done = Vec::new();
    for t in tasks {
        done.push(t.await.unwrap());
    }
    let (root, gathered) = done.remove(0);
    let values = gathered.expect("rank 0 gathers");
    assert_eq!(values, (0..world).map(|r| serde_json::json!({"rank": r})).collect::<Vec<_>>());
    for (g, got) in &done {
        assert!(got.is_none(), "rank {} got a gather", g.me.rank);
        let c = g.coordination().since(&before[g.me.rank]);
        // A marker, its polls of `go`, one figures PUT.
        assert_eq!(c.requests - c.polls, 2, "rank {}: {c:?}", g.me.rank);
        assert!(c.polls >= 1 && c.keys_listed == 0, "rank {}: {c:?}", g.me.rank);
    }
    let c = root.coordination().since(&before[0]);
    // Marker, go, 5 GETs, and its listings (two steps, at least one each).
    assert!(c.requests >= 9 && c.polls == 0, "{c:?}");
    root.cleanup().await;
    let left: Vec<_> = walk(dir.path());
    assert!(left.is_empty(), "left behind: {left:?}");
    for (g, _) in &done {
        g.cleanup().await;
    }
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            let inner = walk(&p);
            if inner.is_empty() && p.file_name().unwrap() != "bkt" {
                out.push(p.clone());
            }
            out.extend(inner);
        } else {
            out.push(p);
        }
    }
    out
}

/// A rank that never arrives: rank 0 names it, and the ranks waiting for
/// `go` hear it from rank 0 at once rather than after their own timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_missing_rank_is_named_to_every_waiting_rank() {
    let dir = tempfile::tempdir().unwrap();
    let store = local(dir.path());
    let timeout = Duration::from_millis(400);
    let mut gs = groups(&store, 4, timeout, Rendezvous::Leader).await;
    let absent = gs.pop().unwrap();
    let t0 = Instant::now();
    let tasks: Vec<_> = gs.into_iter().map(|g| tokio::spawn(async move { (g.me.rank, g.barrier("step").await.unwrap_err().to_string()) })).collect();
    for t in tasks {
        let (r, e) = t.await.unwrap();
        assert!(e.contains("ranks 3 did not reach step 'step'"), "rank {r}: {e}");
        if r > 0 {
            assert!(e.contains("rank 0 stopped the run"), "rank {r}: {e}");
        }
    }
    assert!(t0.elapsed() < timeout * 3, "{:?}", t0.elapsed());
    absent.cleanup().await;
}

/// torchrun's restart: a killed run left its epoch; a rank of the new run
/// takes it (it is within the clock slack) before the new rank 0
/// publishes a fresh one. The waiting rank moves to the new epoch and
/// the barrier completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rank_that_took_a_killed_runs_epoch_moves_to_the_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = local(dir.path());
    let stale = serde_json::json!({"epoch": "dead0001", "created_unix_s": crate::clock::now_unix() - 1.0});
    store::put_bytes(store.as_ref(), "s3rdma-ranks/t/epoch.json", serde_json::to_vec(&stale).unwrap()).await.unwrap();
    let follower = Group::join(rank(1, 2), store.clone(), Duration::from_secs(20), Rendezvous::Leader).await.unwrap();
    assert!(follower.prefix.lock().unwrap().0.ends_with("/dead0001"));
    let waiting = tokio::spawn(async move { follower.barrier("after-restart").await.map(|()| follower) });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let root = Group::join(rank(0, 2), store.clone(), Duration::from_secs(20), Rendezvous::Leader).await.unwrap();
    let t0 = Instant::now();
    root.barrier("after-restart").await.unwrap();
    let follower = waiting.await.unwrap().unwrap();
    assert!(t0.elapsed() < EPOCH_RECHECK * 3, "{:?}", t0.elapsed());
    assert_eq!(follower.prefix.lock().unwrap().0, root.prefix.lock().unwrap().0);
    root.cleanup().await;
    follower.cleanup().await;
}

/// torchrun's elastic restart (same run id, `TORCHELASTIC_RESTART_COUNT`
/// 0 then 1): attempt 0 was killed after its first barrier, leaving its
/// epoch and that step's `go`. Rank 1 of attempt 1 starts first: it must
/// not take attempt 0's epoch (whose `go` would release it at once and put
/// it a step ahead of rank 0), but wait for attempt 1's; both then pass
/// two barriers together.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_restarted_attempt_never_joins_the_killed_attempts_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let store = local(dir.path());
    let attempt = |r: usize, a: u64| Rank { attempt: Some(a), ..rank(r, 2) };
    let stale = serde_json::json!({"epoch": "dead0001", "created_unix_s": crate::clock::now_unix() - 1.0, "attempt": 0});
    store::put_bytes(store.as_ref(), "s3rdma-ranks/t/epoch.json", serde_json::to_vec(&stale).unwrap()).await.unwrap();
    store::put_bytes(store.as_ref(), "s3rdma-ranks/t/dead0001/00000-open/go", Vec::new()).await.unwrap();
    let st = store.clone();
    let follower = tokio::spawn(async move {
        let g = Group::join(attempt(1, 1), st, Duration::from_secs(20), Rendezvous::Leader).await.unwrap();
        g.barrier("open").await.unwrap();
        g.barrier("close").await.unwrap();
        g.prefix.lock().unwrap().0.clone()
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!follower.is_finished(), "rank 1 passed a barrier without rank 0");
    let root = Group::join(attempt(0, 1), store.clone(), Duration::from_secs(20), Rendezvous::Leader).await.unwrap();
    root.barrier("open").await.unwrap();
    root.barrier("close").await.unwrap();
    let prefix = follower.await.unwrap();
    assert_eq!(prefix, root.prefix.lock().unwrap().0);
    assert!(!prefix.ends_with("/dead0001"));
    root.cleanup().await;
}

/// Without attempt numbers, a rank that already passed a barrier of a dead
/// run's epoch cannot be put back in step by moving: when rank 0 publishes
/// a new epoch, the rank stops with a message that names the reused id.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rank_past_the_first_step_of_a_dead_epoch_stops_naming_the_relaunch() {
    let dir = tempfile::tempdir().unwrap();
    let store = local(dir.path());
    let stale = serde_json::json!({"epoch": "dead0002", "created_unix_s": crate::clock::now_unix() - 1.0});
    store::put_bytes(store.as_ref(), "s3rdma-ranks/t/epoch.json", serde_json::to_vec(&stale).unwrap()).await.unwrap();
    store::put_bytes(store.as_ref(), "s3rdma-ranks/t/dead0002/00000-open/go", Vec::new()).await.unwrap();
    let follower = Group::join(rank(1, 2), store.clone(), Duration::from_secs(20), Rendezvous::Leader).await.unwrap();
    follower.barrier("open").await.unwrap();
    let waiting = tokio::spawn(async move { follower.barrier("close").await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let root = Group::join(rank(0, 2), store.clone(), Duration::from_secs(20), Rendezvous::Leader).await.unwrap();
    let e = tokio::time::timeout(EPOCH_RECHECK * 3, waiting).await.expect("stops within the recheck").unwrap().unwrap_err().to_string();
    assert!(e.contains("rank 0 of run 't' started anew") && e.contains("--run-id"), "{e}");
    root.cleanup().await;
}

/// The listing barrier (the baseline) still meets, and every rank lists.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn list_barrier_meets_and_every_rank_lists() {
    let dir = tempfile::tempdir().unwrap();
    let store = local(dir.path());
    let gs = groups(&store, 3, Duration::from_secs(20), Rendezvous::List).await;
    let before: Vec<Coordination> = gs.iter().map(Group::coordination).collect();
    let tasks: Vec<_> = gs
        .into_iter()
        .map(|g| {
            tokio::spawn(async move {
                let r = g.barrier_then("b", || async { 1 }).await.unwrap();
                assert_eq!(r.root.is_some(), g.me.is_root());
                g
            })
        })
        .collect();
    let mut done = Vec::new();
    for t in tasks {
        done.push(t.await.unwrap());
    }
    for g in &done {
        let c = g.coordination().since(&before[g.me.rank]);
        // Two listing barriers: each rank's own listings saw all three markers at least once.
        assert!(c.keys_listed >= 6 && c.polls == 0, "rank {}: {c:?}", g.me.rank);
    }
    // Only once every rank has left (as Session::finish does after its last gather).
    for g in &done {
        g.cleanup().await;
    }
}
