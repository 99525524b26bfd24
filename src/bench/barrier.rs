//! `s3rdma barrier`: ranks meeting through the store and nothing else, the
//! simulation behind docs/scaling.md. N ranks (started here with `--ranks`,
//! or by a launcher) pass `--barriers` barriers back to back; the record
//! holds, per rendezvous (`--rendezvous leader|list`): barrier latency per
//! rank (enter to leave) and per barrier (last arrival to last release),
//! and the requests, polls, bytes and listed keys the ranks' meeting cost
//! the server, per rank per barrier.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use serde::{Deserialize, Serialize};

use super::driver::Bench;
use super::session::{Outcome, Session, SessionSpec, World};
use crate::bench::session::RunPlan;
use crate::error::{Error, Result};
use crate::flag::{BARRIERS, RANKS, RANKS_PER_PROCESS};
use crate::ranks::{Coordination, Group, GroupConfig, Rank, Rendezvous};
use crate::stats::Latency;

/// One rank's barriers: when it entered and left each (Unix ns, this host's
/// clock), and what its meeting cost over the timed barriers.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RankBarriers {
    /// The rank.
    pub rank: usize,
    /// Host name.
    pub host: String,
    /// Per timed barrier: when this rank called it, Unix ns.
    pub enter_ns: Vec<u64>,
    /// Per timed barrier: when it returned, Unix ns.
    pub leave_ns: Vec<u64>,
    /// Requests etc. of this rank over the timed barriers.
    pub coordination: Coordination,
}

/// Requests per rank per barrier, averaged over ranks and timed barriers.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PerRankBarrier {
    /// Every request (PUT, HEAD, GET, LIST, DELETE).
    pub requests: f64,
    /// Of those, polls of one key (`go`).
    pub polls: f64,
    /// Requests besides those polls: markers, rank 0's listings and `go`.
    pub requests_besides_polls: f64,
    /// Keys listings returned.
    pub keys_listed: f64,
    /// Object bytes moved.
    pub bytes: f64,
}

/// `results` of a barrier record.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BarrierResults {
    /// Ranks that met.
    pub ranks: usize,
    /// Hosts they ran on.
    pub hosts: usize,
    /// How they met.
    pub rendezvous: Rendezvous,
    /// Timed barriers.
    pub barriers: u32,
    /// Per rank per barrier, from calling it to leaving it, milliseconds.
    pub latency: Latency,
    /// Per barrier, from the last rank's arrival to the last rank's release,
    /// milliseconds: the rendezvous's own cost (one host's clock; across
    /// hosts it is only as good as their clock sync).
    pub release: Latency,
    /// Meeting cost per rank per barrier.
    pub per_rank_per_barrier: PerRankBarrier,
    /// Requests of all ranks per barrier.
    pub requests_per_barrier: f64,
    /// Keys listings returned per barrier, all ranks.
    pub keys_listed_per_barrier: f64,
}

/// A `barrier` record as `s3rdma report` reads it: the writer's own type.
#[derive(Debug, Clone, Deserialize)]
pub struct BarrierRecord {
    /// What rank 0 measured.
    pub results: BarrierResults,
}

fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// Everything `s3rdma barrier` runs with (the CLI's `cli/plan.rs` makes it of the flags).
#[derive(Debug, Clone)]
pub struct BarrierPlan {
    /// Store, witness, output, ranks; host memory (N ranks must not open N
    /// CUDA contexts to move no data).
    pub run: RunPlan,
    /// Ranks to start on this host (`None`: 8, or the launcher's count).
    pub ranks: Option<u32>,
    /// Timed barriers, back to back.
    pub barriers: u32,
    /// Untimed barriers first.
    pub warmup: u32,
    /// Ranks each process runs as tasks (1: one process per rank, as a
    /// launcher starts them). More than 1 simulates a world larger than one
    /// host can start processes for: every rank still makes its own requests
    /// to the store, but ranks of one process share its runtime and its
    /// connection pool, so client CPU per request is lower than with a
    /// process per rank.
    pub ranks_per_process: u32,
}

/// `s3rdma barrier` as a [`Bench`]: the plan and the ranks each process simulates.
#[derive(Debug)]
pub struct Barrier {
    plan: BarrierPlan,
    /// Simulated ranks per process (`--ranks-per-process`, at least 1).
    per: u32,
}

impl Barrier {
    /// The bench of `plan`.
    pub fn new(plan: BarrierPlan) -> Self {
        let per = plan.ranks_per_process.max(1);
        Barrier { plan, per }
    }
}

impl Bench for Barrier {
    type Params = serde_json::Value;
    type Results = Option<BarrierResults>;

    /// Errors: no timed barrier, or ranks that do not split into processes.
    async fn setup(&mut self) -> Result<Option<SessionSpec>> {
        let (plan, per) = (&self.plan, self.per);
        if plan.barriers == 0 {
            return Err(Error::Usage(format!("{BARRIERS} 0: give at least one timed barrier")));
        }
        // 8 ranks by default when this process starts them; a launcher's count otherwise.
        let launched = crate::ranks::Rank::from_env(plan.run.run_id()).ok().flatten().is_some();
        let ranks = if launched { plan.ranks } else { Some(plan.ranks.unwrap_or(8)) };
        if let Some(n) = ranks.filter(|n| n % per != 0) {
            return Err(Error::Usage(format!(
                "{RANKS} {n} does not split into processes of {RANKS_PER_PROCESS} {per} ranks each: give {RANKS} as a multiple of {RANKS_PER_PROCESS}{}",
                if per > n { format!(" (at most {n} ranks per process here)") } else { String::new() }
            )));
        }
        let processes = if launched { None } else { ranks.map(|n| n / per) };
        // As ckpt: a bucket directory is made for the local backend; a missing S3
        // bucket is refused (a typo must not create a bucket in the account).
        Ok(Some(SessionSpec {
            world: World::Ranks(processes),
            create_bucket: plan.run.store.creates_bucket_on_write(),
            no_bucket: crate::bench::session::create_bucket_first,
            ..plan.run.spec("barrier")
        }))
    }

    /// Errors: a barrier that times out, naming the missing ranks; the store's.
    async fn measure(&mut self, s: &Arc<Session>) -> Result<Outcome<serde_json::Value, Option<BarrierResults>>> {
        let (plan, per) = (&self.plan, self.per);
        let group = plan.run.group.clone().unwrap_or_default();
        let (all, tasks) = if per == 1 {
            let mine = time_barriers(&s.group, &s.host, plan.warmup, plan.barriers).await?;
            (s.gather("barriers", &mine).await?, Vec::new())
        } else {
            let tasks = join_tasks(s, per as usize, &group).await?;
            let mut runs = tokio::task::JoinSet::new();
            for g in &tasks {
                let (g, host, (warmup, barriers)) = (g.clone(), s.host.clone(), (plan.warmup, plan.barriers));
                runs.spawn(async move { time_barriers(&g, &host, warmup, barriers).await });
            }
            // The first simulated rank that fails ends the process's run at once
            // (dropping the set aborts the others): its error is the one to say,
            // not the others' timeouts waiting for it.
            let mut mine = Vec::with_capacity(per as usize);
            while let Some(r) = runs.join_next().await {
                mine.push(r.map_err(|e| Error::Runtime(format!("a simulated rank's task failed: {e}")))??);
            }
            mine.sort_by_key(|m| m.rank);
            // Every process's ranks have left their last barrier once rank 0 holds all figures.
            let all: Vec<RankBarriers> = s.gather("barriers", &mine).await?.into_iter().flatten().collect();
            (all, tasks)
        };
        for g in &tasks {
            g.cleanup().await;
        }
        let results = if s.is_root() { Some(summarize(&all, plan.barriers, s.group.method())?) } else { None };
        let params = serde_json::json!({"ranks": s.me.world * per as usize, "processes": s.me.world, "ranks_per_process": per, "barriers": plan.barriers, "warmup": plan.warmup, "rendezvous": s.group.method(), "barrier_timeout_s": group.barrier_timeout.as_secs_f64()});
        let mut outcome = Outcome::new(params, results, Vec::new());
        outcome.verdict_without_windows = Some("coordination only: no data moved, nothing for the witness to judge".into());
        Ok(outcome)
    }

    fn print(&self, _s: &Session, results: &Option<BarrierResults>) {
        if let Some(r) = results {
            print_table(r, self.per);
        }
    }
}

/// One rank's warm-up barriers, then its timed ones, back to back.
///
/// Errors: a barrier that times out or fails.
async fn time_barriers(group: &Group, host: &str, warmup: u32, barriers: u32) -> Result<RankBarriers> {
    for i in 0..warmup {
        group.barrier(&format!("warmup{i}")).await?;
    }
    let before = group.coordination();
    let (mut enter_ns, mut leave_ns) = (Vec::new(), Vec::new());
    for i in 0..barriers {
        enter_ns.push(now_ns());
        group.barrier(&format!("b{i}")).await?;
        leave_ns.push(now_ns());
    }
    Ok(RankBarriers { rank: group.me.rank, host: host.to_string(), enter_ns, leave_ns, coordination: group.coordination().since(&before) })
}

/// Simulated ranks of one process joining at a time.
const JOIN_CONCURRENCY: usize = 8;

/// This process's `per` simulated ranks: ranks `p x per .. (p + 1) x per`
/// of `world x per`, where `p` is this process's rank, meeting under run id
/// `<run id>/tasks`: inside the run's own prefix (`s3rdma-ranks/<run id>/`),
/// so whatever clears the run's meeting objects (the rank supervisor after
/// a failure or a signal, rank 0 at the end) clears the tasks' too. Rank 0
/// of the run clears that prefix when it joins, before any process's tasks
/// can join (they wait for the run's epoch first). A finished run's tasks
/// remove their own ([`Group::cleanup`]).
///
/// Errors: a rank 0 that publishes no epoch in time; the store's.
async fn join_tasks(s: &Session, per: usize, group: &GroupConfig) -> Result<Vec<Arc<Group>>> {
    let world = s.me.world * per;
    let joins = (0..per).map(|i| {
        let rank = s.me.rank * per + i;
        let me =
            Rank { rank, world, local_rank: rank, local_world: None, launcher: s.me.launcher, run_id: format!("{}/tasks", s.me.run_id), attempt: s.me.attempt };
        Group::join(me, s.store.clone(), group.barrier_timeout, group.rendezvous)
    });
    // A few joins at a time per process: thousands of simulated ranks asking
    // for the epoch at once would meet the server's connection and file limits
    // (s3s-fs answered 500 to 8,192 at once), which no launcher's start produces.
    use futures::StreamExt;
    let joined: Vec<Result<Group>> = futures::stream::iter(joins).buffered(JOIN_CONCURRENCY).collect().await;
    joined.into_iter().map(|g| g.map(Arc::new)).collect()
}

/// The record's results from every rank's barriers.
///
/// Errors: ranks that report different barrier counts.
pub fn summarize(all: &[RankBarriers], barriers: u32, rendezvous: Rendezvous) -> Result<BarrierResults> {
    let b = barriers as usize;
    if let Some(r) = all.iter().find(|r| r.enter_ns.len() != b || r.leave_ns.len() != b) {
        return Err(Error::Runtime(format!("rank {} reports {} barriers, not {b}", r.rank, r.enter_ns.len())));
    }
    let mut latency = Vec::with_capacity(all.len() * b);
    let mut release = Vec::with_capacity(b);
    for i in 0..b {
        let last_in = all.iter().map(|r| r.enter_ns[i]).max().unwrap_or(0);
        let last_out = all.iter().map(|r| r.leave_ns[i]).max().unwrap_or(0);
        release.push(Duration::from_nanos(last_out.saturating_sub(last_in)));
        latency.extend(all.iter().map(|r| Duration::from_nanos(r.leave_ns[i].saturating_sub(r.enter_ns[i]))));
    }
    let mut total = Coordination::default();
    for r in all {
        total.add(&r.coordination);
    }
    let n = (all.len() * b) as f64;
    let hosts: std::collections::BTreeSet<&str> = all.iter().map(|r| r.host.as_str()).collect();
    let none = || Error::Runtime("no barrier was timed".into());
    Ok(BarrierResults {
        ranks: all.len(),
        hosts: hosts.len(),
        rendezvous,
        barriers,
        latency: Latency::from_durations(&latency).ok_or_else(none)?,
        release: Latency::from_durations(&release).ok_or_else(none)?,
        per_rank_per_barrier: PerRankBarrier {
            requests: total.requests as f64 / n,
            polls: total.polls as f64 / n,
            requests_besides_polls: (total.requests - total.polls) as f64 / n,
            keys_listed: total.keys_listed as f64 / n,
            bytes: total.bytes as f64 / n,
        },
        requests_per_barrier: total.requests as f64 / b as f64,
        keys_listed_per_barrier: total.keys_listed as f64 / b as f64,
    })
}

/// The terminal table; `per`: ranks per process (more than 1: the ranks ran as tasks, said above the table).
fn print_table(r: &BarrierResults, per: u32) {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header([
        "ranks",
        "rendezvous",
        "barriers",
        "latency p50 ms",
        "p99",
        "release p50 ms",
        "p99",
        "req/rank/barrier",
        "besides polls",
        "polls",
        "keys listed/barrier",
    ]);
    let p = &r.per_rank_per_barrier;
    t.add_row([
        r.ranks.to_string(),
        format!("{:?}", r.rendezvous).to_lowercase(),
        r.barriers.to_string(),
        format!("{:.2}", r.latency.p50_ms),
        format!("{:.2}", r.latency.p99_ms),
        format!("{:.2}", r.release.p50_ms),
        format!("{:.2}", r.release.p99_ms),
        format!("{:.2}", p.requests),
        format!("{:.2}", p.requests_besides_polls),
        format!("{:.2}", p.polls),
        format!("{:.0}", r.keys_listed_per_barrier),
    ]);
    if per > 1 {
        println!(
            "{} ranks as {} processes of {per} tasks each (simulated: a process's ranks share its runtime and connections)",
            r.ranks,
            r.ranks / per as usize
        );
    }
    println!("{t}");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rank(rank: usize, enter: &[u64], leave: &[u64], requests: u64, polls: u64) -> RankBarriers {
        RankBarriers {
            rank,
            host: "h".into(),
            enter_ns: enter.to_vec(),
            leave_ns: leave.to_vec(),
            coordination: Coordination { requests, polls, bytes: 0, keys_listed: 4 },
        }
    }

    #[test]
    fn release_is_last_arrival_to_last_release() {
        // Two barriers, two ranks; times in ms (as ns).
        let ms = 1_000_000;
        let a = rank(0, &[0, 10 * ms], &[5 * ms, 12 * ms], 10, 0);
        let b = rank(1, &[3 * ms, 10 * ms], &[6 * ms, 14 * ms], 6, 4);
        let r = summarize(&[a, b], 2, Rendezvous::Leader).unwrap();
        // Barrier 0: last in at 3, last out at 6 -> 3 ms; barrier 1: 10 -> 14 = 4 ms.
        assert_eq!((r.release.min_ms, r.release.max_ms), (3.0, 4.0));
        // Latencies 5, 3, 2, 4 ms.
        assert_eq!((r.latency.min_ms, r.latency.max_ms, r.latency.p50_ms), (2.0, 5.0, 3.0));
        assert_eq!(r.per_rank_per_barrier.requests, 4.0);
        assert_eq!(r.per_rank_per_barrier.polls, 1.0);
        assert_eq!(r.per_rank_per_barrier.requests_besides_polls, 3.0);
        assert_eq!(r.keys_listed_per_barrier, 4.0);
        assert_eq!(r.requests_per_barrier, 8.0);
        let short = rank(1, &[0], &[1], 1, 0);
        assert!(summarize(&[short], 2, Rendezvous::Leader).unwrap_err().to_string().contains("rank 1 reports 1 barriers"));
    }
}
