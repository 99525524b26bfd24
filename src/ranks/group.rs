//! How ranks meet: through small objects in the benchmark's own store, under
//! `s3rdma-ranks/<run_id>/<epoch>/<step>/`. No home-made network protocol:
//! it works wherever the store is shared (any S3 endpoint; a local directory
//! on one host or a shared filesystem). Every wait is bounded
//! (`--barrier-timeout`) and a failed wait names the missing ranks.
//!
//! The default rendezvous ([`Rendezvous::Leader`]) costs every rank O(1)
//! requests per barrier whatever the world size: each rank PUTs one marker;
//! rank 0 alone lists the step until all markers are there and then PUTs one
//! `go` object; the others poll that one key (HEAD) with exponential back-off
//! and jitter. Gathers go the same way: each rank PUTs one object, rank 0
//! lists once they may all be there and GETs them with bounded concurrency.
//! The listing barrier it replaced ([`Rendezvous::List`]: every rank lists
//! the step until all markers are there, O(N) listings of N keys per poll
//! round) stays for comparison (`s3rdma barrier`, docs/scaling.md).
//!
//! Every request is counted ([`Coordination`]), so a record states what the
//! ranks' meeting cost the server it measures.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use rand::Rng;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Rank;
use super::markers::{GATHER_CONCURRENCY, remove_markers, remove_where};
use super::poll::{GoWait, Memory};
use crate::error::{Error, Result, StoreError};
use crate::flag::{BARRIER_TIMEOUT, RUN_ID};
use crate::mem::Buffer;
use crate::store::{self, ObjectMeta, ObjectStore};

/// How far apart the clocks of the hosts of one run may be (epoch freshness check).
pub const CLOCK_SLACK: Duration = Duration::from_secs(60);

/// When this process started (Unix seconds), for the epoch freshness check.
static PROCESS_START: std::sync::LazyLock<f64> = std::sync::LazyLock::new(crate::clock::now_unix);

/// How long a rank waits at a barrier before it looks whether rank 0 has
/// published a newer epoch (a relaunched rank 0: torchrun's restarts reuse the run id).
const EPOCH_RECHECK: Duration = Duration::from_secs(2);

/// How much longer than rank 0 the other ranks wait for `go`, so that rank
/// 0's notice of who is missing reaches them before their own timeout.
const FOLLOWER_GRACE: Duration = Duration::from_secs(2);

fn now_unix_ns() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos())
}

/// How ranks wait for each other at a barrier (`--rendezvous`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Rendezvous {
    /// Every rank PUTs a marker; rank 0 lists the step until all are there
    /// and PUTs one `go` object, which the others poll (HEAD) with back-off
    /// and jitter: O(1) requests per rank per barrier besides those polls.
    #[default]
    Leader,
    /// Every rank PUTs a marker and lists the step until all are there: O(N)
    /// listings of up to N keys per poll round. The baseline `s3rdma
    /// barrier` compares with; use it only for that.
    List,
}

impl Rendezvous {
    /// Its name as `--rendezvous` spells it and the record writes it.
    pub fn name(self) -> &'static str {
        match self {
            Rendezvous::Leader => "leader",
            Rendezvous::List => "list",
        }
    }
}

/// How this run's ranks meet (`--run-id`, `--barrier-timeout`, `--rendezvous`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupConfig {
    /// Id shared by every rank of one run (`None`: the launcher's job id, or one this process makes).
    pub run_id: Option<String>,
    /// Longest wait for the other ranks at a barrier.
    pub barrier_timeout: Duration,
    /// How ranks wait at a barrier.
    pub rendezvous: Rendezvous,
}

impl Default for GroupConfig {
    /// The flags' defaults: the launcher's id, 5 minutes, leader.
    fn default() -> Self {
        GroupConfig { run_id: None, barrier_timeout: Duration::from_secs(300), rendezvous: Rendezvous::Leader }
    }
}

/// What meeting cost, as counted by this process (or summed over ranks).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Coordination {
    /// Requests to the store: PUT, HEAD, GET, LIST, DELETE, polls included.
    pub requests: u64,
    /// Of those, polls of one key while waiting (`go`, `epoch.json`), the
    /// last, successful one included.
    pub polls: u64,
    /// Object bytes moved, both ways (marker and figure bodies; listing
    /// responses are counted as keys, below).
    pub bytes: u64,
    /// Keys that listings returned.
    pub keys_listed: u64,
}

impl Coordination {
    /// Growth since `earlier`.
    pub fn since(&self, earlier: &Coordination) -> Coordination {
        Coordination {
            requests: self.requests.saturating_sub(earlier.requests),
            polls: self.polls.saturating_sub(earlier.polls),
            bytes: self.bytes.saturating_sub(earlier.bytes),
            keys_listed: self.keys_listed.saturating_sub(earlier.keys_listed),
        }
    }

    /// Add `other` into this one.
    pub fn add(&mut self, other: &Coordination) {
        self.requests += other.requests;
        self.polls += other.polls;
        self.bytes += other.bytes;
        self.keys_listed += other.keys_listed;
    }
}

#[derive(Debug, Default)]
struct Counts {
    requests: AtomicU64,
    polls: AtomicU64,
    bytes: AtomicU64,
    keys_listed: AtomicU64,
}

/// What a barrier hands back: rank 0's result of the work it did before
/// releasing the others, and this rank's requests on either side of that
/// work (an upper bound for the others, which cannot see when it ran).
#[derive(Debug)]
pub struct Released<T> {
    /// What rank 0's `before_release` returned (`None` on the other ranks).
    pub root: Option<T>,
    /// Rank 0: its requests from entering the barrier until its work began
    /// (its marker, its listings). The others: all of theirs (marker and
    /// polls), since any of them may have come before or after the work.
    pub before: Coordination,
    /// Rank 0: its requests after its work (the `go` PUT). The others: all
    /// of theirs, as in `before`.
    pub after: Coordination,
}

/// Ranks meeting through the store: barriers and figure exchange. Every rank
/// must make the same sequence of calls (steps are numbered in call order).
#[derive(Debug)]
pub struct Group {
    /// This process.
    pub me: Rank,
    store: Arc<dyn ObjectStore>,
    /// `s3rdma-ranks/<run_id>/<epoch>`, and the epoch's creation time (Unix s);
    /// a rank that finds a newer epoch while it waits moves to it.
    prefix: std::sync::Mutex<(String, f64)>,
    timeout: Duration,
    method: Rendezvous,
    step: AtomicU64,
    counts: Counts,
    /// What this rank's recent barriers made it wait for `go` ([`GoWait`]).
    remembered: std::sync::Mutex<Memory>,
    /// Set by [`Group::cleanup`]; a group dropped without it (a failed run) clears its markers in `Drop`.
    cleaned: AtomicBool,
}

impl Drop for Group {
    /// A run that failed leaves no markers behind: rank 0 removes
    /// `s3rdma-ranks/<run_id>/`, so the next run with the same id (a reused
    /// `--run-id`, a launcher's fixed job id) cannot join this run's stale epoch
    /// and wait at a barrier nobody else reaches. It keeps only its failure
    /// notices (a non-empty `go`), which tell the ranks still waiting who is
    /// missing; the next run's rank 0, or our own rank supervisor, removes
    /// those. Best effort, on a multi-thread runtime only.
    fn drop(&mut self) {
        if self.me.world == 1 || !self.me.is_root() || self.cleaned.load(Ordering::SeqCst) {
            return;
        }
        if let Ok(h) = tokio::runtime::Handle::try_current()
            && h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread
        {
            let notice = |o: &ObjectMeta| o.key.ends_with("/go") && o.size > 0;
            tokio::task::block_in_place(|| h.block_on(remove_where(self.store.as_ref(), &self.me.run_id, |o| !notice(o))));
        }
    }
}

/// What `epoch.json` says: the epoch's id, its creation time (Unix s) and
/// the attempt of the rank 0 that published it.
struct Epoch {
    id: String,
    created: f64,
    attempt: Option<u64>,
}

/// Marker key of `rank` in `step`.
fn marker(step: &str, rank: usize) -> String {
    format!("{step}/r{rank:05}")
}

/// The rank a key under a step names, if it is a marker.
fn rank_of(key: &str) -> Option<usize> {
    key.rsplit('/').next()?.strip_prefix('r')?.parse().ok()
}

impl Group {
    /// Join the group of `me`, meeting under `s3rdma-ranks/<run_id>/<epoch>/`
    /// in `store`'s bucket. Rank 0 clears whatever an earlier run with the
    /// same id left under `s3rdma-ranks/<run_id>/` and publishes a fresh
    /// epoch stamped with its attempt ([`Rank::attempt`]); the others take
    /// only an epoch of their own attempt (where the launcher numbers them)
    /// created after they started (minus [`CLOCK_SLACK`] for clocks of
    /// different hosts), so markers of an earlier run, or of the attempt a
    /// launcher restarted seconds ago under the same id, are never mistaken
    /// for this one's.
    ///
    /// Errors: [`Error::Runtime`] when no fresh epoch appears within `timeout`; the store's errors.
    pub async fn join(me: Rank, store: Arc<dyn ObjectStore>, timeout: Duration, method: Rendezvous) -> Result<Group> {
        let base = format!("s3rdma-ranks/{}", me.run_id);
        let g = Group {
            me,
            store,
            prefix: std::sync::Mutex::new((base.clone(), 0.0)),
            timeout,
            method,
            step: AtomicU64::new(0),
            counts: Counts::default(),
            remembered: Default::default(),
            cleaned: Default::default(),
        };
        if g.me.world == 1 {
            return Ok(g);
        }
        let epoch_key = format!("{base}/epoch.json");
        if g.me.is_root() {
            let removed = remove_markers(g.store.as_ref(), &g.me.run_id).await;
            g.counts.requests.fetch_add(removed, Ordering::Relaxed);
            let epoch = format!("{:x}{:08x}", now_unix_ns(), std::process::id());
            let created = crate::clock::now_unix();
            let body = serde_json::to_vec(&serde_json::json!({"epoch": epoch, "created_unix_s": created, "attempt": g.me.attempt})).expect("encodes");
            g.put(&epoch_key, body).await?;
            *g.prefix.lock().expect("prefix") = (format!("{base}/{epoch}"), created);
            return Ok(g);
        }
        let started = *PROCESS_START;
        let t0 = Instant::now();
        let mut pause = Duration::from_millis(1);
        loop {
            if let Some(e) = g.read_epoch().await?
                && e.created >= started - CLOCK_SLACK.as_secs_f64()
                && g.same_attempt(&e)
            {
                let Epoch { id: epoch, created, .. } = e;
                *g.prefix.lock().expect("prefix") = (format!("{base}/{epoch}"), created);
                return Ok(g);
            }
            if t0.elapsed() > g.timeout {
                return Err(Error::Runtime(format!(
                    "rank {}: rank 0 of run '{}' did not start within {} (no fresh {epoch_key}): start every rank with the same {RUN_ID}",
                    g.me.rank,
                    g.me.run_id,
                    humantime::format_duration(g.timeout)
                )));
            }
            pause = g.pause(pause).await;
        }
    }

    /// The run's current epoch, if `epoch.json` is there and readable.
    async fn read_epoch(&self) -> Result<Option<Epoch>> {
        let key = format!("s3rdma-ranks/{}/epoch.json", self.me.run_id);
        let Some(meta) = self.poll(&key).await? else { return Ok(None) };
        let Ok(b) = self.get(&meta).await else { return Ok(None) };
        let v: Value = serde_json::from_slice(&b).unwrap_or_default();
        Ok(match (v["epoch"].as_str(), v["created_unix_s"].as_f64()) {
            (Some(e), Some(c)) => Some(Epoch { id: e.to_string(), created: c, attempt: v["attempt"].as_u64() }),
            _ => None,
        })
    }

    /// Whether epoch `e` belongs to this rank's attempt: always, where the
    /// launcher numbers no attempts; else only an epoch of the same number.
    fn same_attempt(&self, e: &Epoch) -> bool {
        self.me.attempt.is_none() || e.attempt == self.me.attempt
    }

    /// While waiting at step `step`: when rank 0 has published a newer epoch
    /// of this attempt than the one this rank joined (it was relaunched after
    /// this rank took a killed run's epoch, within the clock slack), move to
    /// it and return the step's key there; `None` when the epoch is unchanged.
    ///
    /// Errors: [`Error::Runtime`] when this rank has already passed a barrier
    /// of the epoch it joined: it ran steps of a dead run, and only a restart
    /// of every rank can put it back in step with rank 0.
    async fn newer_epoch(&self, step: &str) -> Result<Option<String>> {
        let Some(e) = self.read_epoch().await? else { return Ok(None) };
        let mut p = self.prefix.lock().expect("prefix");
        if e.created <= p.1 || p.0.ends_with(&format!("/{}", e.id)) || !self.same_attempt(&e) {
            return Ok(None);
        }
        let first = step.rsplit('/').next().is_some_and(|s| s.starts_with("00000-"));
        if !first {
            return Err(Error::Runtime(format!(
                "rank {}: rank 0 of run '{}' started anew while this rank was at step '{step}' of an earlier start's meeting objects (a relaunch that reused the run id): restart every rank, or give each start its own {RUN_ID}",
                self.me.rank, self.me.run_id
            )));
        }
        let old = std::mem::replace(&mut *p, (format!("s3rdma-ranks/{}/{}", self.me.run_id, e.id), e.created));
        Ok(Some(step.replacen(&old.0, &p.0, 1)))
    }

    /// The rendezvous in use.
    pub fn method(&self) -> Rendezvous {
        self.method
    }

    /// This process's meeting requests so far.
    pub fn coordination(&self) -> Coordination {
        let c = &self.counts;
        Coordination {
            requests: c.requests.load(Ordering::Relaxed),
            polls: c.polls.load(Ordering::Relaxed),
            bytes: c.bytes.load(Ordering::Relaxed),
            keys_listed: c.keys_listed.load(Ordering::Relaxed),
        }
    }

    fn next(&self, name: &str) -> String {
        format!("{}/{:05}-{name}", self.prefix.lock().expect("prefix").0, self.step.fetch_add(1, Ordering::SeqCst))
    }

    /// Wait until every rank has arrived at this step. A lone rank returns at once.
    ///
    /// Errors: [`Error::Runtime`] naming the missing ranks after `--barrier-timeout`; the store's errors.
    pub async fn barrier(&self, name: &str) -> Result<()> {
        if self.me.world > 1 && self.method == Rendezvous::List {
            // One listing round: with no work of rank 0's to wait for, the
            // second round of `barrier_then` would only double the baseline's cost.
            return self.list_barrier(name).await;
        }
        self.barrier_then(name, || async {}).await.map(|_| ())
    }

    /// [`Group::barrier_then`] over listings: the listing barrier releases
    /// every rank at once, so rank 0's work needs a second barrier after it.
    /// `entry`: this rank's counts when it arrived.
    async fn list_barrier_then<T, F, Fut>(&self, name: &str, entry: Coordination, before_release: F) -> Result<Released<T>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = T>,
    {
        self.list_barrier(name).await?;
        let (root, work_start, work_end) = if self.me.is_root() {
            let start = self.coordination();
            (Some(before_release().await), start, self.coordination())
        } else {
            (None, entry, entry)
        };
        self.list_barrier(name).await?;
        let end = self.coordination();
        Ok(Released { root, before: work_start.since(&entry), after: end.since(&work_end) })
    }

    /// A barrier at which rank 0, once every rank has arrived and before any
    /// is released, runs `before_release` (the witness's opening scrape): no
    /// rank leaves before it has finished. A lone rank runs it at once.
    ///
    /// Errors: as [`Group::barrier`].
    pub async fn barrier_then<T, F, Fut>(&self, name: &str, before_release: F) -> Result<Released<T>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = T>,
    {
        let none = Coordination::default();
        if self.me.world == 1 {
            return Ok(Released { root: Some(before_release().await), before: none, after: none });
        }
        let entry = self.coordination();
        if self.method == Rendezvous::List {
            return self.list_barrier_then(name, entry, before_release).await;
        }
        let mut step = self.next(name);
        self.put(&marker(&step, self.me.rank), Vec::new()).await?;
        let mut go = format!("{step}/go");
        if self.me.is_root() {
            if let Err(missing) = self.wait_markers(&step, self.me.world).await? {
                let msg = self.missing_message(&missing, name);
                // The others learn who is missing from `go` itself, at once.
                let body = serde_json::to_vec(&serde_json::json!({"missing": missing, "message": msg})).expect("encodes");
                let _ = self.put(&go, body).await;
                return Err(Error::Runtime(msg));
            }
            let before = self.coordination().since(&entry);
            let root = before_release().await;
            let mark = self.coordination();
            self.put(&go, Vec::new()).await?;
            return Ok(Released { root: Some(root), before, after: self.coordination().since(&mark) });
        }
        let plan = GoWait::new(self.me.world, self.remembered.lock().unwrap_or_else(|p| p.into_inner()).get(name));
        let t0 = Instant::now();
        let first = plan.first();
        if !first.is_zero() {
            let jittered = first.mul_f64(rand::rng().random_range(0.95..=1.0));
            tokio::time::sleep(jittered).await;
        }
        let mut pause = plan.second();
        let mut missed = None;
        let mut checked = Instant::now();
        loop {
            if checked.elapsed() > EPOCH_RECHECK {
                checked = Instant::now();
                if let Some(moved) = self.newer_epoch(&step).await? {
                    step = moved;
                    go = format!("{step}/go");
                    self.put(&marker(&step, self.me.rank), Vec::new()).await?;
                }
            }
            let sent = t0.elapsed();
            if let Some(meta) = self.poll(&go).await? {
                if meta.size == 0 {
                    self.remembered.lock().unwrap_or_else(|p| p.into_inner()).set(name, plan.learn(missed, t0.elapsed()));
                    let all = self.coordination().since(&entry);
                    return Ok(Released { root: None, before: all, after: all });
                }
                // A non-empty `go`: rank 0 gave up waiting and says why.
                let b = self.get(&meta).await?;
                let why = serde_json::from_slice::<Value>(&b).ok().and_then(|v| v["message"].as_str().map(str::to_string));
                return Err(Error::Runtime(format!("rank {}: rank 0 stopped the run: {}", self.me.rank, why.unwrap_or_else(|| format!("unreadable {go}")))));
            }
            missed = Some(sent);
            // Rank 0 times out first and says who is missing; waiting longer
            // than it by FOLLOWER_GRACE lets its notice arrive.
            if t0.elapsed() > self.timeout + FOLLOWER_GRACE {
                // A listing that fails says so, not that every rank (this one too) is missing.
                let keys = self.list(&format!("{step}/")).await.map_err(|e| {
                    Error::Runtime(format!(
                        "rank {}: rank 0 released no rank from step '{name}' within {}, and listing who is there failed: {e}",
                        self.me.rank,
                        humantime::format_duration(self.timeout)
                    ))
                })?;
                let missing = Self::absent(&keys, self.me.world);
                let mut msg = self.missing_message(&missing, name);
                if missing.is_empty() {
                    msg = format!(
                        "rank {}: every rank reached step '{name}' but rank 0 released none within {}: see rank 0's output",
                        self.me.rank,
                        humantime::format_duration(self.timeout)
                    );
                }
                return Err(Error::Runtime(msg));
            }
            pause = self.pause(pause).await;
        }
    }

    /// Send `mine` to rank 0, which waits until every rank's has arrived and
    /// gets them all, in rank order; the others get `None` and go on at
    /// once. A lone rank gets its own. Rank 0 reads them with bounded concurrency.
    ///
    /// Errors: as [`Group::barrier`]; an object that is not JSON.
    pub async fn gather(&self, name: &str, mine: &Value) -> Result<Option<Vec<Value>>> {
        if self.me.world == 1 {
            return Ok(Some(vec![mine.clone()]));
        }
        let step = self.next(name);
        if !self.me.is_root() {
            self.put(&marker(&step, self.me.rank), serde_json::to_vec(mine).expect("figures encode")).await?;
            return Ok(None);
        }
        // Rank 0 keeps its own; it waits for the other world - 1.
        let objs = match self.wait_markers(&step, self.me.world - 1).await? {
            Ok(objs) => objs,
            Err(missing) => return Err(Error::Runtime(self.missing_message(&missing, name))),
        };
        let read: Vec<std::result::Result<Vec<u8>, StoreError>> =
            futures::stream::iter(objs.clone()).map(|o| async move { self.get(&o).await }).buffered(GATHER_CONCURRENCY).collect().await;
        let mut values = vec![mine.clone()];
        for (o, b) in objs.iter().zip(read) {
            values.push(serde_json::from_slice(&b?).map_err(|e| Error::Runtime(format!("rank figures '{}' are not JSON: {e}", o.key)))?);
        }
        Ok(Some(values))
    }

    /// End of the run for this rank. Call it after the last gather, which
    /// every rank reaches after its last barrier: rank 0 then removes the
    /// run's meeting objects (no rank polls them any more).
    pub async fn cleanup(&self) {
        self.cleaned.store(true, Ordering::SeqCst);
        if self.me.world > 1 && self.me.is_root() {
            let n = remove_markers(self.store.as_ref(), &self.me.run_id).await;
            self.counts.requests.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// The listing barrier ([`Rendezvous::List`]): marker, then list until all are there.
    async fn list_barrier(&self, name: &str) -> Result<()> {
        let step = self.next(name);
        self.put(&marker(&step, self.me.rank), Vec::new()).await?;
        match self.wait_markers(&step, self.me.world).await? {
            Ok(_) => Ok(()),
            Err(missing) => Err(Error::Runtime(self.missing_message(&missing, name))),
        }
    }

    /// List `step/` until `want` markers are there (back-off from 1 ms to
    /// 20 ms, or to as long as the last listing took when that is longer:
    /// a listing of many pages is not repeated back to back, so rank 0 holds
    /// at most half of a connection's time):
    /// `Ok(Ok(markers))` in rank order, or `Ok(Err(missing ranks))` after the timeout.
    async fn wait_markers(&self, step: &str, want: usize) -> Result<std::result::Result<Vec<ObjectMeta>, Vec<usize>>> {
        let t0 = Instant::now();
        let mut pause = Duration::from_millis(1);
        loop {
            // A gather's step holds no object of rank 0 (it keeps its own), so `want` is world - 1 there.
            let listing = Instant::now();
            let mut objs: Vec<ObjectMeta> = self.list(&format!("{step}/")).await?.into_iter().filter(|o| rank_of(&o.key).is_some()).collect();
            let took = listing.elapsed();
            tracing::debug!(
                rank = self.me.rank,
                step,
                listed = objs.len(),
                want,
                took_ms = took.as_millis() as u64,
                waited_ms = t0.elapsed().as_millis() as u64,
                "markers listed"
            );
            if objs.len() >= want {
                objs.sort_by_key(|o| rank_of(&o.key));
                return Ok(Ok(objs));
            }
            if t0.elapsed() > self.timeout {
                let mut missing = Self::absent(&objs, self.me.world);
                if want < self.me.world {
                    missing.retain(|&r| r != 0);
                }
                return Ok(Err(missing));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(20).max(took));
        }
    }

    /// Ranks whose marker is not among `objs`.
    fn absent(objs: &[ObjectMeta], world: usize) -> Vec<usize> {
        let seen: std::collections::HashSet<usize> = objs.iter().filter_map(|o| rank_of(&o.key)).collect();
        (0..world).filter(|r| !seen.contains(r)).collect()
    }

    fn missing_message(&self, missing: &[usize], name: &str) -> String {
        if missing.contains(&self.me.rank) {
            // Our own marker gone: someone else's rank 0 cleared this run's objects.
            return format!(
                "rank {}: this rank's own marker for step '{name}' is gone: another run with the same run id '{}' replaced this run's meeting objects (two runs started with one {RUN_ID} or job id, or a relaunch while this rank still waited): give each run its own {RUN_ID}",
                self.me.rank, self.me.run_id
            );
        }
        let shown: Vec<String> = missing.iter().take(32).map(usize::to_string).collect();
        let more = if missing.len() > 32 { format!(" and {} more", missing.len() - 32) } else { String::new() };
        format!(
            "rank {}: ranks {}{more} did not reach step '{name}' within {}: one failed or was never started (see its output); raise {BARRIER_TIMEOUT} if it is only slow",
            self.me.rank,
            shown.join(","),
            humantime::format_duration(self.timeout)
        )
    }

    /// Sleep `pause` less up to half of it (jitter, so waiting ranks do not
    /// poll in lock-step), and return the next pause ([`GoWait::after`]).
    async fn pause(&self, pause: Duration) -> Duration {
        let jitter = rand::rng().random_range(0.5..=1.0);
        tokio::time::sleep(pause.mul_f64(jitter)).await;
        GoWait::new(self.me.world, None).after(pause)
    }

    /// HEAD one key: `Some` when it exists, `None` when not yet.
    async fn poll(&self, key: &str) -> Result<Option<ObjectMeta>> {
        self.counts.requests.fetch_add(1, Ordering::Relaxed);
        self.counts.polls.fetch_add(1, Ordering::Relaxed);
        match self.store.head(key).await {
            Ok(m) => Ok(Some(m)),
            // Rank 0 creates the bucket (when asked to) before it publishes the epoch.
            Err(StoreError::NotFound { .. } | StoreError::NoSuchBucket { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    async fn get(&self, meta: &ObjectMeta) -> std::result::Result<Vec<u8>, StoreError> {
        self.counts.requests.fetch_add(1, Ordering::Relaxed);
        self.counts.bytes.fetch_add(meta.size, Ordering::Relaxed);
        let mut b = Buffer::host(meta.size as usize);
        if meta.size > 0 {
            self.store.get_into(&meta.key, None, &mut b).await?;
        }
        Ok(b.as_host().expect("host").to_vec())
    }

    async fn put(&self, key: &str, body: Vec<u8>) -> Result<()> {
        self.counts.requests.fetch_add(1, Ordering::Relaxed);
        self.counts.bytes.fetch_add(body.len() as u64, Ordering::Relaxed);
        let t0 = Instant::now();
        store::put_bytes(self.store.as_ref(), key, body).await?;
        tracing::debug!(rank = self.me.rank, key, ms = t0.elapsed().as_millis() as u64, "meeting object written");
        Ok(())
    }

    /// List `prefix`, counted as the requests S3 makes of it: one per page of
    /// up to 1,000 keys (ListObjectsV2's `max-keys` limit), whatever the backend.
    async fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>> {
        let objs = self.store.list(prefix).await?;
        self.counts.requests.fetch_add((objs.len() as u64).div_ceil(1000).max(1), Ordering::Relaxed);
        self.counts.keys_listed.fetch_add(objs.len() as u64, Ordering::Relaxed);
        Ok(objs)
    }
}

#[cfg(test)]
#[path = "group_tests.rs"]
mod tests;
