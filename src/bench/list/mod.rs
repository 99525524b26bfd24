//! `s3rdma list`: how fast the store lists a prefix (ListObjectsV2 pages
//! on a server, a directory walk on the local backend): listings per second,
//! keys per second and one whole listing's latency. A training job pays this
//! at start to find its shards, and ranks meeting through the store pay it
//! per poll (docs/scaling.md).
//!
//! The smallest bench: the shared flags alone (`--prefix`, `--duration` or
//! `--iters` listings, `--warmup`, `--repeats`, `--prepare`), one folder and
//! one line in the CLI's subcommand list. Listings move no object bytes, so
//! the witness has nothing to judge: the verdict is not-applicable.

use std::sync::Arc;
use std::time::{Duration, Instant};

use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::driver::Bench;
use super::session::{Outcome, Session, SessionSpec, SharedPlan};
use crate::error::{Error, Result};
use crate::flag::{PREFIX, PREPARE};
use crate::mem::Buffer;
use crate::stats::{Latency, Spread};

/// Empty objects `--prepare` writes under a prefix that holds none.
pub const PREPARED_KEYS: usize = 1000;

/// One timed repeat: listings back to back for `--duration` (or `--iters` of them).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ListRepeat {
    /// 1-based.
    pub repeat: u32,
    /// Whole listings of the prefix.
    pub listings: u64,
    /// Seconds the repeat lasted.
    pub wall_s: f64,
    /// Listings per second.
    pub listings_per_s: f64,
    /// Keys listed per second (keys per listing x listings / wall).
    pub keys_per_s: f64,
    /// One whole listing's latency.
    pub latency: Latency,
}

/// The repeats' medians and ranges.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ListSummary {
    /// Listings per second.
    pub listings_per_s: Spread,
    /// Keys per second.
    pub keys_per_s: Spread,
    /// Median latency of one listing, milliseconds.
    pub p50_ms: Spread,
}

/// The record's results.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ListResults {
    /// Keys under the prefix (every listing must return this many).
    pub keys: usize,
    /// Over the repeats.
    pub summary: ListSummary,
    /// Each repeat.
    pub repeats: Vec<ListRepeat>,
}

/// A `list` record as `s3rdma report` reads it: the writer's own type.
#[derive(Debug, Clone, Deserialize)]
pub struct ListRecord {
    /// What it measured.
    pub results: ListResults,
}

/// The prefix listed when `--prefix` is not given: the one `--prepare` fills.
pub const DEFAULT_PREFIX: &str = "list/";

/// `s3rdma list` as a [`Bench`].
#[derive(Debug)]
pub struct List {
    plan: SharedPlan,
    /// The prefix listed (`--prefix`, else [`DEFAULT_PREFIX`]).
    prefix: String,
    /// Keys under the prefix, as [`Bench::prepare`] found them.
    keys: usize,
}

impl List {
    /// The bench of `plan`.
    pub fn new(plan: SharedPlan) -> Self {
        let prefix = plan.prefix.clone().unwrap_or_else(|| DEFAULT_PREFIX.into());
        List { plan, prefix, keys: 0 }
    }

    /// The key `--prepare` writes as object `i` (0-based) under the prefix.
    fn prepared_key(&self, i: usize) -> String {
        format!("{}list-{i:06}", self.prefix)
    }

    /// List the prefix once; its key count and how long it took.
    ///
    /// Errors: the store's; a listing of another length than `expect`
    /// (keys came or went during the run).
    async fn list_once(&self, s: &Session, expect: Option<usize>) -> Result<(usize, Duration)> {
        let t = Instant::now();
        let n = s.store.list(&self.prefix).await?.len();
        let took = t.elapsed();
        match expect {
            Some(e) if e != n => Err(Error::Runtime(format!(
                "the prefix '{}' held {e} keys and now {n}: something else writes under it; list a prefix nothing writes to",
                self.prefix
            ))),
            _ => Ok((n, took)),
        }
    }
}

impl Bench for List {
    type Params = serde_json::Value;
    type Results = ListResults;

    /// Errors: a prefix no key can start with (usage, before anything starts).
    async fn setup(&mut self) -> Result<Option<SessionSpec>> {
        crate::store::check_key(&self.prepared_key(0))
            .map_err(|e| Error::Usage(format!("{PREFIX} '{}' cannot start a key: {e}; give a prefix such as 'list/' or 'datasets/train/'", self.prefix)))?;
        Ok(Some(SessionSpec { create_bucket: self.plan.prepare, ..self.plan.run.spec("list") }))
    }

    /// With `--prepare`, the [`PREPARED_KEYS`] empty objects are written
    /// where missing (a prepare cut short is completed by the next).
    ///
    /// Errors: an empty prefix without `--prepare`; the store's.
    async fn prepare(&mut self, s: &mut Session) -> Result<()> {
        if self.plan.prepare && s.is_root() {
            let have: std::collections::HashSet<String> = s.store.list(&self.prefix).await?.into_iter().map(|m| m.key).collect();
            let empty = Buffer::host(0);
            for key in (0..PREPARED_KEYS).map(|i| self.prepared_key(i)).filter(|k| !have.contains(k)) {
                s.store.put_from(&key, &empty).await?;
            }
        }
        let (n, _) = self.list_once(s, None).await?;
        self.keys = n;
        if n == 0 {
            return Err(Error::Usage(format!(
                "no object under {PREFIX} '{}' in bucket '{}' at {}: give a {PREFIX} that holds objects, or pass {PREPARE} to write {PREPARED_KEYS} empty ones",
                self.prefix,
                s.store.bucket(),
                s.store.location()
            )));
        }
        Ok(())
    }

    async fn measure(&mut self, s: &Arc<Session>) -> Result<Outcome<serde_json::Value, ListResults>> {
        let t = self.plan.timing;
        let expect = Some(self.keys);
        let warm = Instant::now();
        while warm.elapsed() < t.warmup {
            self.list_once(s, expect).await?;
        }
        let mut repeats = Vec::new();
        for repeat in 1..=t.repeats {
            let (start, mut took) = (Instant::now(), Vec::new());
            while t.iters.map_or(start.elapsed() < t.duration, |n| took.len() < n as usize) {
                took.push(self.list_once(s, expect).await?.1);
            }
            let wall_s = start.elapsed().as_secs_f64();
            let listings = took.len() as u64;
            repeats.push(ListRepeat {
                repeat,
                listings,
                wall_s,
                listings_per_s: listings as f64 / wall_s,
                keys_per_s: (listings * self.keys as u64) as f64 / wall_s,
                latency: Latency::from_durations(&took).expect("a repeat lists at least once"),
            });
        }
        let spread = |f: fn(&ListRepeat) -> f64| Spread::of(repeats.iter().map(f)).expect("repeats >= 1");
        let lasted: Vec<f64> = repeats.iter().map(|r| r.wall_s).collect();
        if let Some(w) = crate::bench::session::short_windows(&lasted) {
            s.warn(w);
        }
        let summary = ListSummary { listings_per_s: spread(|r| r.listings_per_s), keys_per_s: spread(|r| r.keys_per_s), p50_ms: spread(|r| r.latency.p50_ms) };
        let params = json!({"prefix": self.prefix, "bucket": self.plan.run.store.bucket, "prepare": self.plan.prepare,
            "duration_s": t.iters.is_none().then_some(t.duration.as_secs_f64()), "iters": t.iters,
            "warmup_s": t.warmup.as_secs_f64(), "repeats": t.repeats});
        let mut outcome = Outcome::new(params, ListResults { keys: self.keys, summary, repeats }, Vec::new());
        outcome.verdict_without_windows = Some("listings only: no object bytes moved, nothing for the witness to judge".into());
        Ok(outcome)
    }

    fn print(&self, s: &Session, r: &ListResults) {
        let range =
            |s: &Spread, p: usize| if s.max > s.min { format!("{:.p$} ({:.p$}–{:.p$})", s.median, s.min, s.max) } else { format!("{:.p$}", s.median) };
        let mut t = Table::new();
        t.load_preset(UTF8_FULL_CONDENSED);
        t.set_header(["backend", "keys", "listings/s", "keys/s", "listing p50 ms"]);
        t.add_row([
            s.store.capabilities().name.to_string(),
            r.keys.to_string(),
            range(&r.summary.listings_per_s, 1),
            range(&r.summary.keys_per_s, 0),
            range(&r.summary.p50_ms, 2),
        ]);
        println!("list '{}' in bucket '{}' ({})", self.prefix, s.store.bucket(), s.store.location());
        println!("{t}");
    }
}
