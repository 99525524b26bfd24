//! Ranks: several processes of this binary running one benchmark together
//! (`ckpt --ranks N`, `fetch --procs 1,2,4`), on one host or, under a
//! launcher, across hosts.
//!
//! Who is a rank: a process started by [`spawn_local`] (our own `S3RDMA_*`
//! variables), by torchrun (`RANK`/`WORLD_SIZE`/`LOCAL_RANK`), Slurm
//! (`SLURM_PROCID`/`SLURM_NTASKS`/`SLURM_LOCALID`) or Open MPI
//! (`OMPI_COMM_WORLD_RANK`/`_SIZE`/`_LOCAL_RANK`).
//!
//! How ranks meet: through small objects in the benchmark's own store
//! ([`Group`]): a barrier is one `ready` object per rank under a step prefix
//! that every rank lists until all are there; figures are one JSON object per
//! rank that rank 0 gathers. No home-made network protocol, and it works
//! wherever the store is shared (any S3 endpoint; a local directory on one
//! host or a shared filesystem). Every wait is bounded (`--barrier-timeout`),
//! so a rank that dies makes the others fail with its name, never hang.

use std::ffi::OsString;
use std::process::{Child, Command};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::{Error, Result};
use crate::store::ObjectStore;

/// How far apart the clocks of the hosts of one run may be (epoch freshness check).
pub const CLOCK_SLACK: Duration = Duration::from_secs(60);

/// When this process started (Unix seconds), for the epoch freshness check.
static PROCESS_START: std::sync::LazyLock<f64> = std::sync::LazyLock::new(crate::bench::now_unix);

fn now_unix_ns() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos())
}

/// Our own rank variables, set by [`spawn_local`] on each child.
pub const ENV_RANK: &str = "S3RDMA_RANK";
/// World size set by [`spawn_local`].
pub const ENV_WORLD: &str = "S3RDMA_WORLD_SIZE";
/// Rank on this host set by [`spawn_local`].
pub const ENV_LOCAL: &str = "S3RDMA_LOCAL_RANK";
/// Run id shared by the ranks of one run (their meeting prefix in the store).
pub const ENV_RUN: &str = "S3RDMA_RUN_ID";

/// This process's place in a group.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Rank {
    /// 0-based global rank; rank 0 writes the record.
    pub rank: usize,
    /// Number of ranks.
    pub world: usize,
    /// Rank among the ranks of this host (picks the GPU: `local_rank % GPUs`).
    pub local_rank: usize,
    /// Who started the ranks: `s3rdma`, `torchrun`, `slurm`, `openmpi` or `none`.
    pub launcher: &'static str,
    /// Shared by every rank of one run.
    pub run_id: String,
}

impl Rank {
    /// A lone process (world size 1).
    pub fn single() -> Rank {
        Rank { rank: 0, world: 1, local_rank: 0, launcher: "none", run_id: format!("solo-{}", std::process::id()) }
    }

    /// The rank the environment describes, if any (ours first, then
    /// torchrun, Slurm, Open MPI). `run_id` overrides the launcher's job id.
    ///
    /// Errors: [`Error::Usage`] for unparsable values, a rank outside the
    /// world, or a launcher that gives no job id and no `--run-id`.
    pub fn from_env(run_id: Option<&str>) -> Result<Option<Rank>> {
        from_vars(|k| std::env::var(k).ok(), run_id)
    }

    /// True for rank 0.
    pub fn is_root(&self) -> bool {
        self.rank == 0
    }
}

/// [`Rank::from_env`] over any variable source (tests pass a map).
pub fn from_vars(get: impl Fn(&str) -> Option<String>, run_id: Option<&str>) -> Result<Option<Rank>> {
    // (launcher, rank, world, local rank, job id variables)
    const LAUNCHERS: &[(&str, &str, &str, &str, &[&str])] = &[
        ("s3rdma", ENV_RANK, ENV_WORLD, ENV_LOCAL, &[ENV_RUN]),
        ("torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", &["TORCHELASTIC_RUN_ID"]),
        ("slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", &["SLURM_JOB_ID", "SLURM_STEP_ID"]),
        ("openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", &["OMPI_MCA_orte_ess_jobid", "PMIX_NAMESPACE"]),
    ];
    for &(launcher, r, w, l, job) in LAUNCHERS {
        let (Some(rank), Some(world)) = (get(r), get(w)) else { continue };
        let num = |name: &str, v: &str| {
            v.trim().parse::<usize>().map_err(|_| Error::Usage(format!("{name}='{v}' is not a non-negative integer (set by {launcher})")))
        };
        let rank = num(r, &rank)?;
        let world = num(w, &world)?;
        let local_rank = match get(l) {
            Some(v) => num(l, &v)?,
            None => rank,
        };
        if world == 0 || rank >= world {
            return Err(Error::Usage(format!("{r}={rank} is outside {w}={world} (set by {launcher})")));
        }
        // torchrun's default rendezvous id is "none": shared by every job, so not an id.
        let ids: Vec<String> = job.iter().filter_map(|k| get(k)).filter(|v| !v.is_empty() && v != "none").collect();
        let run_id = match (run_id, ids.is_empty()) {
            (Some(id), _) => id.to_string(),
            (None, false) => ids.join("."),
            (None, true) if world == 1 => format!("solo-{}", std::process::id()),
            (None, true) => {
                return Err(Error::Usage(format!(
                    "started by {launcher} as rank {rank} of {world}, but it sets no job id ({}): pass the same --run-id to every rank",
                    job.join(", ")
                )));
            }
        };
        check_run_id(&run_id)?;
        return Ok(Some(Rank { rank, world, local_rank, launcher, run_id }));
    }
    Ok(None)
}

/// Warn when some launcher variables are set but not the pair that makes a
/// rank (e.g. WORLD_SIZE without RANK): the process runs alone.
pub fn warn_partial_launcher_env() {
    for (r, w) in [("RANK", "WORLD_SIZE"), ("SLURM_PROCID", "SLURM_NTASKS"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE")] {
        let (hr, hw) = (std::env::var_os(r).is_some(), std::env::var_os(w).is_some());
        if hr != hw {
            eprintln!("warning: {} is set but {} is not: running as a single process", if hr { r } else { w }, if hr { w } else { r });
        }
    }
}

/// Fault injection for tests: the rank named by `S3RDMA_TEST_FAIL_RANK`
/// fails at once, so tests can show a dead rank stops the run instead of hanging it.
pub fn injected_fault(me: &Rank) -> Result<()> {
    match std::env::var("S3RDMA_TEST_FAIL_RANK").ok().and_then(|v| v.parse::<usize>().ok()) {
        Some(r) if r == me.rank && me.world > 1 => Err(Error::Runtime(format!("rank {r}: failure injected by S3RDMA_TEST_FAIL_RANK"))),
        _ => Ok(()),
    }
}

/// The GPU ordinal of this rank: in a multi-rank run each rank gets its own,
/// `local_rank % visible GPUs` (for `dest` pinned or device); a lone process
/// (or host memory) keeps `device`, the one asked for.
pub fn gpu_for(me: &Rank, dest: crate::mem::Dest, device: usize) -> usize {
    if me.world > 1 && dest != crate::mem::Dest::Host {
        let gpus = crate::mem::cuda_probe().map(|i| i.devices.len()).unwrap_or(1).max(1);
        me.local_rank % gpus
    } else {
        device
    }
}

/// Run ids become key segments: letters, digits, '.', '_' and '-', 1-100 long.
pub fn check_run_id(id: &str) -> Result<()> {
    if id.is_empty() || id.len() > 100 || !id.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)) || id.starts_with('.') {
        return Err(Error::Usage(format!("--run-id '{id}': use 1-100 letters, digits, '.', '_' or '-' (not starting with '.')")));
    }
    Ok(())
}

/// Start `world` copies of this process with the same arguments, as ranks
/// 0..world of one run (each sees [`ENV_RANK`] and so does not spawn again),
/// and wait for all of them. The first rank to fail stops the others: the
/// error names it and carries its exit code (its own message is on stderr
/// above, prefixed by nothing: each rank writes its own lines).
///
/// Errors: [`Error::Runtime`] when a child cannot start; [`Error::RankFailed`]
/// with the failed rank's exit code.
pub fn spawn_local(world: usize) -> Result<()> {
    let exe = std::env::current_exe().map_err(|e| Error::Runtime(format!("cannot find this executable to start ranks: {e}")))?;
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let run_id = format!("{}-{}", chrono::Utc::now().format("%Y%m%dT%H%M%S"), std::process::id());
    let mut children: Vec<(usize, Child)> = Vec::with_capacity(world);
    for rank in 0..world {
        let mut cmd = Command::new(&exe);
        // A rank dies with its supervisor: killing `s3rdma ... --ranks N` must
        // not leave N orphans running the benchmark (Linux PR_SET_PDEATHSIG).
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::process::CommandExt;
            // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
            unsafe {
                cmd.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                    Ok(())
                });
            }
        }
        let child =
            cmd.args(&args).env(ENV_RANK, rank.to_string()).env(ENV_WORLD, world.to_string()).env(ENV_LOCAL, rank.to_string()).env(ENV_RUN, &run_id).spawn();
        match child {
            Ok(c) => children.push((rank, c)),
            Err(e) => {
                kill_all(&mut children);
                return Err(Error::Runtime(format!("cannot start rank {rank} ({}): {e}", exe.display())));
            }
        }
    }
    while !children.is_empty() {
        let mut i = 0;
        while i < children.len() {
            match children[i].1.try_wait() {
                Ok(Some(status)) if status.success() => {
                    children.remove(i);
                }
                Ok(Some(status)) => {
                    let rank = children[i].0;
                    children.remove(i);
                    let code = status.code().unwrap_or(1);
                    let msg = match code {
                        // A verdict or a data check, not a crash: the run finished and said why above.
                        3 | 4 => format!("rank {rank} of {world} exited {code}: see its message above"),
                        _ => format!("rank {rank} of {world} failed ({status}); the other ranks were stopped"),
                    };
                    kill_all(&mut children);
                    return Err(Error::RankFailed { code, msg });
                }
                Ok(None) => i += 1,
                Err(e) => {
                    kill_all(&mut children);
                    return Err(Error::Runtime(format!("cannot wait for rank {}: {e}", children.get(i).map_or(0, |c| c.0))));
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

fn kill_all(children: &mut Vec<(usize, Child)>) {
    for (_, c) in children.iter_mut() {
        let _ = c.kill();
    }
    for (_, c) in children.iter_mut() {
        let _ = c.wait();
    }
    children.clear();
}

/// Remove every meeting object of run `run_id` (`s3rdma-ranks/<run_id>/`) from `store` (best effort).
pub async fn remove_markers(store: &dyn ObjectStore, run_id: &str) {
    let base = format!("s3rdma-ranks/{run_id}/");
    if let Ok(objs) = store.list(&base).await {
        for o in objs {
            let _ = store.delete(&o.key).await;
        }
    }
}

/// Ranks meeting through the store: barriers and figure exchange. Every rank
/// must make the same sequence of calls (steps are numbered in call order).
#[derive(Debug)]
pub struct Group {
    /// This process.
    pub me: Rank,
    store: Arc<dyn ObjectStore>,
    prefix: String,
    timeout: Duration,
    step: AtomicU64,
    /// Set by [`Group::cleanup`]; a group dropped without it (a failed run) clears its markers in `Drop`.
    cleaned: std::sync::atomic::AtomicBool,
}

impl Drop for Group {
    /// A run that failed leaves no markers behind: rank 0 removes
    /// `s3rdma-ranks/<run_id>/`, so the next run with the same id (a reused
    /// `--run-id`, a launcher's fixed job id) cannot join this run's stale epoch
    /// and wait at a barrier nobody else reaches. Best effort, on a
    /// multi-thread runtime only (elsewhere the next run's rank 0 clears it).
    fn drop(&mut self) {
        if self.me.world == 1 || !self.me.is_root() || self.cleaned.load(Ordering::SeqCst) {
            return;
        }
        if let Ok(h) = tokio::runtime::Handle::try_current()
            && h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread
        {
            tokio::task::block_in_place(|| h.block_on(self.remove_markers()));
        }
    }
}

impl Group {
    /// Join the group of `me`, meeting under `s3rdma-ranks/<run_id>/<epoch>/`
    /// in `store`'s bucket. Rank 0 clears whatever an earlier run with the
    /// same id left under `s3rdma-ranks/<run_id>/` and publishes a fresh
    /// epoch; the others take only an epoch created after they started
    /// (minus [`CLOCK_SLACK`] for clocks of different hosts), so markers of an
    /// earlier run are never mistaken for this one's.
    ///
    /// Errors: [`Error::Runtime`] when no fresh epoch appears within `timeout`.
    pub async fn join(me: Rank, store: Arc<dyn ObjectStore>, timeout: Duration) -> Result<Group> {
        let base = format!("s3rdma-ranks/{}", me.run_id);
        let mut g = Group { me, store, prefix: base.clone(), timeout, step: AtomicU64::new(0), cleaned: Default::default() };
        if g.me.world == 1 {
            return Ok(g);
        }
        let epoch_key = format!("{base}/epoch.json");
        if g.me.is_root() {
            if let Ok(objs) = g.store.list(&format!("{base}/")).await {
                for o in objs {
                    let _ = g.store.delete(&o.key).await;
                }
            }
            let epoch = format!("{:x}{:08x}", now_unix_ns(), std::process::id());
            let body = serde_json::to_vec(&serde_json::json!({"epoch": epoch, "created_unix_s": crate::bench::now_unix()})).expect("encodes");
            g.put(&epoch_key, &body).await?;
            g.prefix = format!("{base}/{epoch}");
            return Ok(g);
        }
        let started = *PROCESS_START;
        let t0 = Instant::now();
        loop {
            if let Ok(b) = crate::store::get_bytes(g.store.as_ref(), &epoch_key).await
                && let Ok(v) = serde_json::from_slice::<serde_json::Value>(&b)
                && let (Some(epoch), Some(created)) = (v["epoch"].as_str(), v["created_unix_s"].as_f64())
                && created >= started - CLOCK_SLACK.as_secs_f64()
            {
                g.prefix = format!("{base}/{epoch}");
                return Ok(g);
            }
            if t0.elapsed() > g.timeout {
                return Err(Error::Runtime(format!(
                    "rank {}: rank 0 of run '{}' did not start within {} (no fresh {epoch_key}): start every rank with the same --run-id",
                    g.me.rank,
                    g.me.run_id,
                    humantime::format_duration(g.timeout)
                )));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn next(&self, name: &str) -> String {
        format!("{}/{:05}-{name}", self.prefix, self.step.fetch_add(1, Ordering::SeqCst))
    }

    /// Wait until every rank has arrived at this step. A lone rank returns at once.
    ///
    /// Errors: [`Error::Runtime`] naming the missing ranks after `--barrier-timeout`.
    pub async fn barrier(&self, name: &str) -> Result<()> {
        if self.me.world == 1 {
            return Ok(());
        }
        let step = self.next(name);
        self.put(&format!("{step}/r{:05}", self.me.rank), b"ready").await?;
        self.wait_all(&step, name).await.map(|_| ())
    }

    /// Publish this rank's figures for a step and return every rank's (in
    /// rank order). Every rank gets the full list; a lone rank gets its own.
    ///
    /// Errors: as [`Group::barrier`], or a figure object that is not JSON.
    pub async fn all_gather(&self, name: &str, mine: &serde_json::Value) -> Result<Vec<serde_json::Value>> {
        if self.me.world == 1 {
            return Ok(vec![mine.clone()]);
        }
        let step = self.next(name);
        let body = serde_json::to_vec(mine).expect("figures encode");
        self.put(&format!("{step}/r{:05}", self.me.rank), &body).await?;
        let keys = self.wait_all(&step, name).await?;
        let mut out = Vec::with_capacity(keys.len());
        for key in keys {
            let b = crate::store::get_bytes(self.store.as_ref(), &key).await?;
            out.push(serde_json::from_slice(&b).map_err(|e| Error::Runtime(format!("rank figures '{key}' are not JSON: {e}")))?);
        }

        Ok(out)
    }

    /// Leave the group at the end of a run: every rank says it has left (it
    /// is past its last barrier), and rank 0 removes the run's meeting
    /// objects once all have, never before: a rank still polling the last
    /// barrier must find its markers there.
    pub async fn cleanup(&self) {
        self.cleaned.store(true, Ordering::SeqCst);
        if self.me.world == 1 {
            return;
        }
        let step = self.next("left");
        if self.put(&format!("{step}/r{:05}", self.me.rank), b"left").await.is_err() || !self.me.is_root() {
            return;
        }
        if self.wait_all(&step, "left").await.is_ok() {
            self.remove_markers().await;
        }
    }

    async fn remove_markers(&self) {
        remove_markers(self.store.as_ref(), &self.me.run_id).await;
    }

    async fn put(&self, key: &str, body: &[u8]) -> Result<()> {
        crate::store::put_bytes(self.store.as_ref(), key, body.to_vec()).await?;
        Ok(())
    }

    /// Poll the step's prefix until every rank's object is there; returns their keys in rank order.
    async fn wait_all(&self, step: &str, name: &str) -> Result<Vec<String>> {
        let t0 = Instant::now();
        let mut pause = Duration::from_millis(1);
        loop {
            let objs = self.store.list(&format!("{step}/")).await?;
            if objs.len() >= self.me.world {
                return Ok(objs.into_iter().map(|o| o.key).collect());
            }
            if t0.elapsed() > self.timeout {
                let seen: Vec<String> = objs.iter().map(|o| o.key.clone()).collect();
                let missing: Vec<String> =
                    (0..self.me.world).filter(|r| !seen.iter().any(|k| k.ends_with(&format!("/r{r:05}")))).map(|r| r.to_string()).collect();
                return Err(Error::Runtime(format!(
                    "rank {}: ranks {} did not reach step '{name}' within {}: one failed or was never started (see its output); raise --barrier-timeout if it is only slow",
                    self.me.rank,
                    missing.join(","),
                    humantime::format_duration(self.timeout)
                )));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(20));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn launchers_are_recognised() {
        assert_eq!(from_vars(vars(&[]), None).unwrap(), None);
        let t = from_vars(vars(&[("RANK", "3"), ("WORLD_SIZE", "8"), ("LOCAL_RANK", "1"), ("TORCHELASTIC_RUN_ID", "j7")]), None).unwrap().unwrap();
        assert_eq!((t.rank, t.world, t.local_rank, t.launcher, t.run_id.as_str()), (3, 8, 1, "torchrun", "j7"));
        let s = from_vars(vars(&[("SLURM_PROCID", "5"), ("SLURM_NTASKS", "16"), ("SLURM_LOCALID", "5"), ("SLURM_JOB_ID", "99"), ("SLURM_STEP_ID", "0")]), None)
            .unwrap()
            .unwrap();
        assert_eq!((s.rank, s.world, s.launcher, s.run_id.as_str()), (5, 16, "slurm", "99.0"));
        let o = from_vars(vars(&[("OMPI_COMM_WORLD_RANK", "1"), ("OMPI_COMM_WORLD_SIZE", "2")]), Some("mine")).unwrap().unwrap();
        assert_eq!((o.rank, o.local_rank, o.launcher, o.run_id.as_str()), (1, 1, "openmpi", "mine"));
    }

    #[test]
    fn bad_rank_variables_are_usage_errors() {
        let e = from_vars(vars(&[("RANK", "8"), ("WORLD_SIZE", "8"), ("TORCHELASTIC_RUN_ID", "x")]), None).unwrap_err();
        assert!(e.to_string().contains("outside"), "{e}");
        let e = from_vars(vars(&[("RANK", "x"), ("WORLD_SIZE", "8")]), None).unwrap_err();
        assert!(e.to_string().contains("RANK='x'"), "{e}");
        let e = from_vars(vars(&[("OMPI_COMM_WORLD_RANK", "0"), ("OMPI_COMM_WORLD_SIZE", "2")]), None).unwrap_err();
        assert!(e.to_string().contains("--run-id"), "{e}");
        assert!(check_run_id("a/b").is_err());
        assert!(check_run_id("..").is_err());
        assert!(check_run_id("20261129T1200-42").is_ok());
    }
}
