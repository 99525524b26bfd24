//! Ranks: several processes of this binary running one benchmark together
//! (`ckpt --ranks N`, `fetch --procs 1,2,4`), on one host or, under a
//! launcher, across hosts.
//!
//! Who is a rank: a process started by [`spawn_local`] (our own `S3RDMA_*`
//! variables), by torchrun (`RANK`/`WORLD_SIZE`/`LOCAL_RANK`), Open MPI
//! (`OMPI_COMM_WORLD_RANK`/`_SIZE`/`_LOCAL_RANK`) or Slurm
//! (`SLURM_PROCID`/`SLURM_NTASKS`/`SLURM_LOCALID`), in that order: the
//! launcher that started this process wins, and Slurm's variables, which a
//! batch job hands down to everything `mpirun` or `torchrun` starts inside
//! it, are the fallback (a Slurm batch job that runs `mpirun` inside it).
//!
//! How ranks meet: [`Group`] (in `group.rs`), through small objects in the
//! benchmark's own store.

mod group;
mod markers;
mod poll;

pub use group::{CLOCK_SLACK, Coordination, Group, GroupConfig, Released, Rendezvous};
pub use markers::{CLEAR_BUDGET, clear_on_stop, remove_markers};

use std::ffi::OsString;
use std::process::{Child, Command};
use std::time::Duration;

use serde::Serialize;

use crate::error::{Error, Result};

use crate::flag::{PROCS, RANKS, RUN_ID};
use crate::rank_env::{ENV_LOCAL, ENV_RANK, ENV_RUN, ENV_WORLD};

/// This process's place in a group.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Rank {
    /// 0-based global rank; rank 0 writes the record.
    pub rank: usize,
    /// Number of ranks.
    pub world: usize,
    /// Rank among the ranks of this host (picks the GPU: `local_rank % GPUs`).
    pub local_rank: usize,
    /// Number of ranks on this host, as the launcher states it
    /// (`LOCAL_WORLD_SIZE`, `OMPI_COMM_WORLD_LOCAL_SIZE`, this node's entry of
    /// `SLURM_TASKS_PER_NODE`); `None` when it states none.
    pub local_world: Option<usize>,
    /// Who started the ranks: `s3rdma`, `torchrun`, `openmpi`, `slurm` or `none`.
    pub launcher: &'static str,
    /// Shared by every rank of one run.
    pub run_id: String,
    /// Which attempt of the run this is, where the launcher restarts a failed
    /// run under the same id and says so: torchrun's
    /// `TORCHELASTIC_RESTART_COUNT` (0 for the first attempt; torchrun docs,
    /// "Environment Variables"), Slurm's `SLURM_RESTART_COUNT` (set on a
    /// requeued job). `None` where it says nothing. Ranks of one attempt never
    /// meet those of another (see [`Group::join`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u64>,
}

impl Rank {
    /// A lone process (world size 1).
    pub fn single() -> Rank {
        Rank { rank: 0, world: 1, local_rank: 0, local_world: Some(1), launcher: "none", run_id: format!("solo-{}", std::process::id()), attempt: None }
    }

    /// The rank the environment describes, if any (ours first, then
    /// torchrun, Open MPI, Slurm). `run_id` overrides the launcher's job id.
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

/// One launcher's variables.
struct Launcher {
    name: &'static str,
    rank: &'static str,
    world: &'static str,
    local_rank: &'static str,
    /// The variable that states the ranks on this host, if the launcher has one.
    local_world: Option<&'static str>,
    /// Variables whose values, joined by '.', make the run id.
    job: &'static [&'static str],
    /// The variable that numbers restarts of one run id, if the launcher has one.
    attempt: Option<&'static str>,
}

/// In detection order: the launcher that started this process comes before
/// the ones whose variables it may have inherited (Slurm, last).
const LAUNCHERS: &[Launcher] = &[
    Launcher { name: "s3rdma", rank: ENV_RANK, world: ENV_WORLD, local_rank: ENV_LOCAL, local_world: None, job: &[ENV_RUN], attempt: None },
    Launcher {
        name: "torchrun",
        rank: "RANK",
        world: "WORLD_SIZE",
        local_rank: "LOCAL_RANK",
        local_world: Some("LOCAL_WORLD_SIZE"),
        job: &["TORCHELASTIC_RUN_ID"],
        attempt: Some("TORCHELASTIC_RESTART_COUNT"),
    },
    Launcher {
        name: "openmpi",
        rank: "OMPI_COMM_WORLD_RANK",
        world: "OMPI_COMM_WORLD_SIZE",
        local_rank: "OMPI_COMM_WORLD_LOCAL_RANK",
        local_world: Some("OMPI_COMM_WORLD_LOCAL_SIZE"),
        job: &["OMPI_MCA_orte_ess_jobid", "PMIX_NAMESPACE"],
        attempt: None,
    },
    // Local world size under Slurm comes from SLURM_TASKS_PER_NODE (see `slurm_tasks_on_node`).
    Launcher {
        name: "slurm",
        rank: "SLURM_PROCID",
        world: "SLURM_NTASKS",
        local_rank: "SLURM_LOCALID",
        local_world: None,
        job: &["SLURM_JOB_ID", "SLURM_STEP_ID"],
        attempt: Some("SLURM_RESTART_COUNT"),
    },
];

/// [`Rank::from_env`] over any variable source (tests pass a map).
pub fn from_vars(get: impl Fn(&str) -> Option<String>, run_id: Option<&str>) -> Result<Option<Rank>> {
    for l in LAUNCHERS {
        let (Some(rank), Some(world)) = (get(l.rank), get(l.world)) else { continue };
        let launcher = l.name;
        let num = |name: &str, v: &str| {
            v.trim().parse::<usize>().map_err(|_| Error::Usage(format!("{name}='{v}' is not a non-negative integer (set by {launcher})")))
        };
        let rank = num(l.rank, &rank)?;
        let world = num(l.world, &world)?;
        let local_rank = match get(l.local_rank) {
            Some(v) => num(l.local_rank, &v)?,
            None => rank,
        };
        if world == 0 || rank >= world {
            return Err(Error::Usage(format!("{}={rank} is outside {}={world} (set by {launcher})", l.rank, l.world)));
        }
        let local_world = match (l.local_world.and_then(&get), launcher) {
            (Some(v), _) => Some(num(l.local_world.unwrap_or_default(), &v)?),
            (None, "s3rdma") => Some(world),
            (None, "slurm") => match get("SLURM_TASKS_PER_NODE") {
                Some(v) => {
                    let node = get("SLURM_NODEID").map(|n| num("SLURM_NODEID", &n)).transpose()?;
                    slurm_tasks_on_node(&v, node)?
                }
                None => None,
            },
            (None, _) => None,
        };
        if let Some(lw) = local_world
            && (lw == 0 || local_rank >= lw)
        {
            return Err(Error::Usage(format!("local rank {local_rank} is outside the {lw} ranks its launcher ({launcher}) puts on this host")));
        }
        // torchrun's default rendezvous id is "none": shared by every job, so not an id.
        // A launcher's id may hold characters a key segment must not (Open MPI 5's
        // PMIX_NAMESPACE is "prterun-<host>-<pid>@1"): those become '-'.
        let ids: Vec<String> = l.job.iter().filter_map(|k| get(k)).filter(|v| !v.is_empty() && v != "none").map(|v| key_safe(&v)).collect();
        let run_id = match (run_id, ids.is_empty()) {
            (Some(id), _) => id.to_string(),
            (None, false) => ids.join("."),
            (None, true) if world == 1 => format!("solo-{}", std::process::id()),
            (None, true) => {
                return Err(Error::Usage(format!(
                    "started by {launcher} as rank {rank} of {world}, but it sets no job id ({}): pass the same {RUN_ID} to every rank",
                    l.job.join(", ")
                )));
            }
        };
        check_run_id(&run_id)?;
        let attempt = match l.attempt.and_then(&get).filter(|v| !v.trim().is_empty()) {
            Some(v) => Some(
                v.trim()
                    .parse::<u64>()
                    .map_err(|_| Error::Usage(format!("{}='{v}' is not a non-negative integer (set by {launcher})", l.attempt.unwrap_or_default())))?,
            ),
            None => None,
        };
        return Ok(Some(Rank { rank, world, local_rank, local_world, launcher, run_id, attempt }));
    }
    Ok(None)
}

/// This node's task count from Slurm's `SLURM_TASKS_PER_NODE`, a
/// comma-separated list of counts in node order where `c(xn)` stands for
/// `n` nodes of `c` tasks each (e.g. `4(x2),3` = 4,4,3; sbatch(1), "OUTPUT
/// ENVIRONMENT VARIABLES"). `node` is `SLURM_NODEID`; without it the count is
/// known only when every node has the same.
///
/// Errors: [`Error::Usage`] naming the value when it does not parse, or a
/// `node` beyond the list.
pub fn slurm_tasks_on_node(value: &str, node: Option<usize>) -> Result<Option<usize>> {
    let bad = || Error::Usage(format!("SLURM_TASKS_PER_NODE='{value}' is not in Slurm's form (e.g. '4' or '4(x2),3')"));
    let mut per_node: Vec<(usize, usize)> = Vec::new(); // (tasks, nodes)
    for part in value.trim().split(',') {
        let (count, repeat) = match part.split_once('(') {
            Some((c, rest)) => {
                let n = rest.strip_prefix('x').and_then(|r| r.strip_suffix(')')).ok_or_else(bad)?;
                (c, n.parse::<usize>().map_err(|_| bad())?)
            }
            None => (part, 1),
        };
        let count = count.parse::<usize>().map_err(|_| bad())?;
        if count == 0 || repeat == 0 {
            return Err(bad());
        }
        per_node.push((count, repeat));
    }
    match node {
        Some(id) => {
            let mut first = 0usize;
            for &(count, repeat) in &per_node {
                if id < first.saturating_add(repeat) {
                    return Ok(Some(count));
                }
                first = first.saturating_add(repeat);
            }
            Err(Error::Usage(format!("SLURM_NODEID={id} is beyond the {first} nodes SLURM_TASKS_PER_NODE='{value}' lists")))
        }
        None if per_node.iter().all(|&(c, _)| c == per_node[0].0) => Ok(Some(per_node[0].0)),
        None => Ok(None),
    }
}

/// Warn when some launcher variables are set but not the pair that makes a
/// rank (e.g. WORLD_SIZE without RANK): the process runs alone.
pub fn warn_partial_launcher_env() {
    for (r, w) in [("RANK", "WORLD_SIZE"), ("SLURM_PROCID", "SLURM_NTASKS"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE")] {
        let (hr, hw) = (std::env::var_os(r).is_some(), std::env::var_os(w).is_some());
        if hr != hw {
            eprintln!(
                "warning: {} is set but {} is not: not taken as a launcher's rank (this process runs alone, or starts its own ranks with {RANKS}/{PROCS})",
                if hr { r } else { w },
                if hr { w } else { r }
            );
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

/// A launcher's job id as a run id: characters other than letters, digits,
/// '.', '_' and '-' become '-', a leading '.' too, and it is cut to 100.
fn key_safe(v: &str) -> String {
    let mut s: String = v.chars().map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '-' }).take(100).collect();
    if s.starts_with('.') {
        s.replace_range(0..1, "-");
    }
    s
}

/// Run ids become key segments: letters, digits, '.', '_' and '-', 1-100 long.
pub fn check_run_id(id: &str) -> Result<()> {
    if id.is_empty() || id.len() > 100 || !id.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)) || id.starts_with('.') {
        return Err(Error::Usage(format!("{RUN_ID} '{id}': use 1-100 letters, digits, '.', '_' or '-' (not starting with '.')")));
    }
    Ok(())
}

/// A fresh run id for ranks started here: `<UTC time>-<pid>`.
pub fn new_run_id() -> String {
    format!("{}-{}", chrono::Utc::now().format("%Y%m%dT%H%M%S"), std::process::id())
}

/// Start `world` copies of this process with the same arguments, as ranks
/// 0..world of run `run_id` (each sees [`ENV_RANK`] and so does not spawn again),
/// and wait for all of them. The first rank to fail stops the others: the
/// error names it and carries its exit code (its own message is on stderr
/// above, prefixed by nothing: each rank writes its own lines).
///
/// `stop` is the signal number (SIGINT, SIGTERM) once one arrived: the ranks
/// are killed and the error carries 128 + it as the exit code.
///
/// Errors: [`Error::Runtime`] when a child cannot start; [`Error::RankFailed`]
/// with the failed rank's exit code, or 128 + the signal.
pub fn spawn_local(world: usize, run_id: &str, stop: &std::sync::atomic::AtomicI32) -> Result<()> {
    let exe = std::env::current_exe().map_err(|e| Error::Runtime(format!("cannot find this executable to start ranks: {e}")))?;
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
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
            cmd.args(&args).env(ENV_RANK, rank.to_string()).env(ENV_WORLD, world.to_string()).env(ENV_LOCAL, rank.to_string()).env(ENV_RUN, run_id).spawn();
        match child {
            Ok(c) => children.push((rank, c)),
            Err(e) => {
                kill_all(&mut children);
                return Err(Error::Runtime(format!("cannot start rank {rank} ({}): {e}", exe.display())));
            }
        }
    }
    while !children.is_empty() {
        let signal = stop.load(std::sync::atomic::Ordering::SeqCst);
        if signal != 0 {
            kill_all(&mut children);
            let name = if signal == libc::SIGINT { "SIGINT" } else { "SIGTERM" };
            return Err(Error::RankFailed { code: 128 + signal, msg: format!("interrupted ({name}): the {world} ranks were stopped") });
        }
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
        // Open MPI 5's namespace holds '@': made key-safe, not refused.
        let o5 =
            from_vars(vars(&[("OMPI_COMM_WORLD_RANK", "1"), ("OMPI_COMM_WORLD_SIZE", "2"), ("PMIX_NAMESPACE", "prterun-host-123@1")]), None).unwrap().unwrap();
        assert_eq!(o5.run_id, "prterun-host-123-1");
        let s = from_vars(vars(&[("SLURM_PROCID", "0"), ("SLURM_NTASKS", "2"), ("SLURM_JOB_ID", ".bad/id")]), None).unwrap().unwrap();
        assert_eq!(s.run_id, "-bad-id");
        let o = from_vars(vars(&[("OMPI_COMM_WORLD_RANK", "1"), ("OMPI_COMM_WORLD_SIZE", "2")]), Some("mine")).unwrap().unwrap();
        assert_eq!((o.rank, o.local_rank, o.launcher, o.run_id.as_str()), (1, 1, "openmpi", "mine"));
    }

    /// mpirun inside a Slurm batch job: the job's Slurm variables, inherited
    /// by what mpirun starts, lose to Open MPI's.
    #[test]
    fn the_launcher_that_started_us_wins_over_inherited_slurm() {
        let env = vars(&[
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "1"),
            ("SLURM_LOCALID", "0"),
            ("SLURM_JOB_ID", "81"),
            ("OMPI_COMM_WORLD_RANK", "3"),
            ("OMPI_COMM_WORLD_SIZE", "4"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "3"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "4"),
        ]);
        let r = from_vars(env, Some("job81")).unwrap().unwrap();
        assert_eq!((r.launcher, r.rank, r.world, r.local_rank, r.local_world), ("openmpi", 3, 4, 3, Some(4)));
        // Without --run-id, Open MPI's own job id is needed, not Slurm's.
        let env = vars(&[("SLURM_PROCID", "0"), ("SLURM_NTASKS", "1"), ("SLURM_JOB_ID", "81"), ("OMPI_COMM_WORLD_RANK", "3"), ("OMPI_COMM_WORLD_SIZE", "4")]);
        let e = from_vars(env, None).unwrap_err();
        assert!(e.to_string().contains("openmpi as rank 3 of 4"), "{e}");
        // torchrun inside a Slurm allocation: torchrun's variables.
        let env = vars(&[("SLURM_PROCID", "1"), ("SLURM_NTASKS", "2"), ("RANK", "5"), ("WORLD_SIZE", "16"), ("LOCAL_RANK", "5"), ("LOCAL_WORLD_SIZE", "8")]);
        let r = from_vars(env, Some("t")).unwrap().unwrap();
        assert_eq!((r.launcher, r.rank, r.world, r.local_world), ("torchrun", 5, 16, Some(8)));
    }

    #[test]
    fn slurm_local_world_comes_from_tasks_per_node() {
        assert_eq!(slurm_tasks_on_node("4(x2),3", Some(0)).unwrap(), Some(4));
        assert_eq!(slurm_tasks_on_node("4(x2),3", Some(1)).unwrap(), Some(4));
        assert_eq!(slurm_tasks_on_node("4(x2),3", Some(2)).unwrap(), Some(3));
        assert_eq!(slurm_tasks_on_node("8(x16)", None).unwrap(), Some(8));
        assert_eq!(slurm_tasks_on_node("4(x2),3", None).unwrap(), None);
        assert!(slurm_tasks_on_node("4(x2),3", Some(3)).unwrap_err().to_string().contains("SLURM_NODEID=3"));
        for bad in ["", "4(2)", "x", "4(x0)", "0", "4(x2"] {
            let e = slurm_tasks_on_node(bad, Some(0)).unwrap_err();
            assert!(e.to_string().contains("SLURM_TASKS_PER_NODE"), "{bad}: {e}");
        }
        let env = vars(&[
            ("SLURM_PROCID", "9"),
            ("SLURM_NTASKS", "11"),
            ("SLURM_LOCALID", "1"),
            ("SLURM_NODEID", "2"),
            ("SLURM_TASKS_PER_NODE", "4(x2),3"),
            ("SLURM_JOB_ID", "7"),
        ]);
        let r = from_vars(env, None).unwrap().unwrap();
        assert_eq!((r.launcher, r.rank, r.local_rank, r.local_world, r.run_id.as_str()), ("slurm", 9, 1, Some(3), "7"));
        let env = vars(&[
            ("SLURM_PROCID", "9"),
            ("SLURM_NTASKS", "11"),
            ("SLURM_LOCALID", "3"),
            ("SLURM_NODEID", "2"),
            ("SLURM_TASKS_PER_NODE", "4(x2),3"),
            ("SLURM_JOB_ID", "7"),
        ]);
        assert!(from_vars(env, None).unwrap_err().to_string().contains("local rank 3 is outside the 3 ranks"));
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
