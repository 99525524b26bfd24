//! Ranks: `s3rdma barrier` (the rendezvous simulation of docs/scaling.md) on
//! the local backend and the in-process S3 server, both rendezvous; launcher
//! detection as a user meets it (mpirun inside a Slurm batch job: Open MPI's
//! variables win over the inherited Slurm ones).

use super::*;

/// One barrier run's record (`--json`).
fn barrier(store: &[&str], ranks: &str, rendezvous: &str, cwd: &Path) -> Value {
    let mut args = vec!["barrier", "--ranks", ranks, "--barriers", "6", "--rendezvous", rendezvous, "--json"];
    args.extend(store);
    let o = s3rdma(&args, cwd);
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn barrier_costs_o1_requests_per_rank_with_a_leader_and_o_n_keys_with_listing() {
    let s = common::server();
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(s.root.join("meet")).unwrap();
    let http = ["--backend", "http", "--endpoint", &s.endpoint, "--access-key", common::ACCESS_KEY, "--secret-key", common::SECRET_KEY, "--bucket", "meet"];
    let local: [&str; 0] = [];
    let n = 4u64;
    for store in [&local[..], &http[..]] {
        let lead = barrier(store, "4", "leader", tmp.path());
        assert_eq!(lead["benchmark"], "barrier");
        assert_eq!(lead["rdma_witness"]["verdict"], "not-applicable", "no data moved");
        let r = &lead["results"];
        assert_eq!((r["ranks"].as_u64(), r["barriers"].as_u64(), r["rendezvous"].as_str()), (Some(n), Some(6), Some("leader")));
        let p = &r["per_rank_per_barrier"];
        // Each rank's marker, and rank 0's go PUT and listings shared out: at
        // least 1 + 2/N, at most the bound of 4.
        let besides = p["requests_besides_polls"].as_f64().unwrap();
        assert!((1.0 + 2.0 / n as f64..=4.0).contains(&besides), "{p}");
        // The three others poll `go` at least once each.
        assert!(p["polls"].as_f64().unwrap() >= (n - 1) as f64 / n as f64, "{p}");
        // Only rank 0 lists: under a handful of listings of N keys per barrier.
        assert!(r["keys_listed_per_barrier"].as_f64().unwrap() < (n * n) as f64 * 4.0, "{r}");
        assert!(r["latency"]["p99_ms"].as_f64().unwrap() > 0.0 && r["release"]["p50_ms"].as_f64().unwrap() >= 0.0, "{r}");
        let coord = &lead["environment"]["ranks"]["coordination"];
        assert_eq!(coord["rendezvous"], "leader");
        assert_eq!(coord["requests_in_windows"], 0, "no windows");

        let list = barrier(store, "4", "list", tmp.path());
        let r = &list["results"];
        assert_eq!(r["rendezvous"], "list");
        assert_eq!(r["per_rank_per_barrier"]["polls"], 0.0);
        // Every rank lists until it sees all N markers: at least N x N keys per barrier.
        assert!(r["keys_listed_per_barrier"].as_f64().unwrap() >= (n * n) as f64, "{r}");
    }
    // 8 ranks as 2 processes of 4 tasks: every rank meets, each process's
    // tasks are ranks of one world, and nothing of them is left either.
    let mut args = vec!["barrier", "--ranks", "8", "--ranks-per-process", "4", "--barriers", "4", "--json"];
    args.extend(&http[..]);
    let o = s3rdma(&args, tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let tasks: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (tasks["params"]["ranks"].as_u64(), tasks["params"]["processes"].as_u64(), tasks["params"]["ranks_per_process"].as_u64()),
        (Some(8), Some(2), Some(4))
    );
    assert_eq!(tasks["results"]["ranks"], 8, "{}", tasks["results"]);
    let p = &tasks["results"]["per_rank_per_barrier"];
    assert!(p["requests"].as_f64().unwrap() >= 1.0 + 2.0 / 8.0 && p["polls"].as_f64().unwrap() >= 7.0 / 8.0, "{p}");
    // A server's missing bucket is refused, never created (a typo would make one in the account).
    let mut args = vec!["barrier", "--ranks", "2", "--results-dir", "r"];
    args.extend(&http[..http.len() - 1]);
    args.push("never-made");
    assert_fails(&s3rdma(&args, tmp.path()), 1, "bucket 'never-made' does not exist", &tmp.path().join("r"));
    assert!(!s.root.join("never-made").exists());
    let o = s3rdma(&["barrier", "--ranks", "6", "--ranks-per-process", "4", "--results-dir", "r"], tmp.path());
    assert_fails(&o, 2, "give --ranks as a multiple of --ranks-per-process", &tmp.path().join("r"));
    // Nothing of the meetings is left, on either store.
    assert!(!tmp.path().join("s3rdma-data/s3rdma-bench/s3rdma-ranks").exists());
    fn files_under(p: &Path) -> usize {
        std::fs::read_dir(p).map_or(0, |rd| rd.map(|e| e.unwrap().path()).map(|p| if p.is_dir() { files_under(&p) } else { 1 }).sum())
    }
    assert_eq!(files_under(&s.root.join("meet/s3rdma-ranks")), 0);
    let results = tmp.path().join("r");
    let o = s3rdma(&["barrier", "--barriers", "0", "--results-dir", "r"], tmp.path());
    assert_fails(&o, 2, "--barriers 0", &results);
}

/// The case's own command: a batch job's Slurm variables under mpirun. The
/// process is rank 3 of 4 of Open MPI's run (not a lone Slurm task), and
/// without a job id from Open MPI it says so and exits 2.
#[test]
fn mpirun_inside_a_slurm_job_is_open_mpi_rank_3_of_4() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("r/s3rdma-bench")).unwrap();
    let env = [
        ("SLURM_PROCID", "0"),
        ("SLURM_NTASKS", "1"),
        ("SLURM_LOCALID", "0"),
        ("SLURM_JOB_ID", "81"),
        ("OMPI_COMM_WORLD_RANK", "3"),
        ("OMPI_COMM_WORLD_SIZE", "4"),
        ("OMPI_COMM_WORLD_LOCAL_RANK", "3"),
        ("OMPI_COMM_WORLD_LOCAL_SIZE", "4"),
    ];
    let o = s3rdma_env(
        &["ckpt", "--backend", "local", "--root", "r", "--sizes", "16MiB", "--methods", "flat", "--repeats", "1", "--dest", "host", "--json"],
        tmp.path(),
        &env,
    );
    assert_fails(&o, 2, "started by openmpi as rank 3 of 4", &tmp.path().join("results"));
}

/// Start `args` in `cwd`, wait `after`, send `signal`; returns the exit code,
/// how long the process took to exit after the signal, its stderr, and the
/// PIDs of its children when the signal was sent.
fn stopped_by(args: &[&str], cwd: &Path, after: std::time::Duration, signal: i32) -> (Option<i32>, std::time::Duration, String, Vec<u32>) {
    use std::io::Read;
    let mut child = isolate(Command::new(env!("CARGO_BIN_EXE_s3rdma")).args(args).current_dir(cwd))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(after);
    assert!(child.try_wait().unwrap().is_none(), "{args:?} ended before the signal");
    let kids: Vec<u32> = std::fs::read_dir(format!("/proc/{}/task", child.id()))
        .unwrap()
        .flat_map(|t| {
            std::fs::read_to_string(t.unwrap().path().join("children")).unwrap_or_default().split_whitespace().map(|p| p.parse().unwrap()).collect::<Vec<u32>>()
        })
        .collect();
    let t0 = std::time::Instant::now();
    // SAFETY: kill(2) on the PID of a child this test started and has not reaped.
    assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
    let code = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s.code();
        }
        if t0.elapsed() > std::time::Duration::from_secs(10) {
            child.kill().unwrap();
            panic!("{args:?} still running 10 s after signal {signal}");
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    let took = t0.elapsed();
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    (code, took, err, kids)
}

/// Whether process `pid` is gone (or a zombie no one waits for).
pub(super) fn gone(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| s.rsplit(')').next().is_some_and(|r| r.trim_start().starts_with('Z')))
}

/// SIGTERM and SIGINT end a long run within a second, exit 143 and 130: one
/// process in a timed loop, and the supervisor of local ranks in a long
/// series of barriers (its ranks stopped too).
#[test]
fn sigterm_and_sigint_stop_a_run_and_its_ranks_within_a_second() {
    let tmp = tempfile::tempdir().unwrap();
    let fetch = ["fetch", "--sizes", "1MiB", "--objects", "2", "--concurrency", "2", "--duration", "60s", "--warmup", "0s", "--prepare"];
    let barrier = ["barrier", "--ranks", "3", "--barriers", "1000000", "--warmup", "0"];
    for (args, what) in [(&fetch[..], "one process"), (&barrier[..], "the rank supervisor")] {
        for (signal, want) in [(libc::SIGTERM, 143), (libc::SIGINT, 130)] {
            let (code, took, err, kids) = stopped_by(args, tmp.path(), std::time::Duration::from_millis(1500), signal);
            assert_eq!(code, Some(want), "{what}, signal {signal}: {err}");
            assert!(took < std::time::Duration::from_secs(1), "{what}, signal {signal}: exited {took:?} after it: {err}");
            assert!(err.contains(if signal == libc::SIGINT { "SIGINT" } else { "SIGTERM" }), "{what}: the stop is said: {err}");
            if what == "the rank supervisor" {
                assert_eq!(kids.len(), 3, "{err}");
                std::thread::sleep(std::time::Duration::from_millis(200));
                assert!(kids.iter().all(|&k| gone(k)), "ranks {kids:?} outlived their supervisor");
            }
        }
    }
    // Ranks run as tasks of fewer processes meet inside the run's prefix, so
    // the supervisor's clearing after a signal takes their objects too.
    let tasks = ["barrier", "--ranks", "8", "--ranks-per-process", "4", "--barriers", "1000000", "--warmup", "0"];
    let (code, _, err, _) = stopped_by(&tasks, tmp.path(), std::time::Duration::from_millis(1500), libc::SIGTERM);
    assert_eq!(code, Some(143), "{err}");
    let left: Vec<_> = walk(&tmp.path().join("s3rdma-data/s3rdma-bench/s3rdma-ranks"));
    assert!(left.is_empty(), "meeting objects left after SIGTERM: {:?}", &left[..left.len().min(5)]);
}

/// Every file under `p` (none when `p` is missing).
fn walk(p: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(p).map_or(Vec::new(), |rd| rd.map(|e| e.unwrap().path()).flat_map(|p| if p.is_dir() { walk(&p) } else { vec![p] }).collect())
}
