//! When a rank waiting at a barrier polls the one key that releases it.
//!
//! S3 has no blocking read, so a waiting rank polls, and what a barrier costs
//! the server is mostly those polls. Doubling back-off from 1 ms polls
//! `log2(wait / 1 ms)` times before it reaches its cap, and once per cap
//! after: at 1,024 ranks on one 16-core host a barrier took about 670 ms and
//! each rank polled 11 times. Barriers of one run look alike (the same ranks,
//! the same store, the same work between them), so each rank remembers how
//! long its recent barriers made it wait and sleeps most of that before its
//! first poll ([`GoWait`]): about two polls per barrier once it has seen a
//! few, and never a later release than the plain back-off by more than
//! [`first_poll_limit`] (see docs/scaling.md for the cost model
//! and the measurements).

use std::time::Duration;

/// Shortest pause between two polls of one key.
const MIN_PAUSE: Duration = Duration::from_millis(1);

/// Of the remembered wait, the share a rank sleeps before its first poll.
const FIRST_POLL_AT: f64 = 0.9;

/// After a missed first poll, the pauses start at this share of the
/// remembered wait and double up to the cap.
const STEP_SHARE: f64 = 0.15;

/// The latest first poll after the marker: 10 caps ([`poll_cap`]), at most
/// 1 s. A barrier much shorter than the last ones is seen at most that
/// late, and the estimate then falls.
pub(super) fn first_poll_limit(cap: Duration) -> Duration {
    (cap * 10).min(Duration::from_secs(1))
}

/// Weight of the newest barrier in the remembered wait (exponential average).
const NEWEST_WEIGHT: f64 = 0.5;

/// Longest pause between two polls of one key: `world x 0.25 ms`, so all
/// waiting ranks together poll about 4,000 times a second whatever their
/// number, clamped to 2 ms–2 s (a few ranks still answer within
/// milliseconds; from 8,000 ranks the cluster polls up to `world / 2 s`).
/// An upper clamp of 100 ms let 8,192 simulated ranks poll 80,000 times a
/// second, and the test server's answers to the barrier's other requests
/// queued behind them (docs/scaling.md).
pub(super) fn poll_cap(world: usize) -> Duration {
    Duration::from_micros((world as u64 * 250).clamp(2_000, 2_000_000))
}

/// The kind of barrier `name` is, under which a rank remembers its waits:
/// the name without its digits, so the repeats of one barrier (`b0`, `b1`;
/// `fetch-window3-close`) share a memory and different barriers do not.
pub(super) fn kind(name: &str) -> String {
    name.chars().filter(|c| !c.is_ascii_digit()).collect()
}

/// What one rank remembers of its barriers' waits: per kind ([`kind`]),
/// and the last wait of any kind, which a kind seen for the first time
/// starts from (a run's first timed barrier after its warm-up ones, a
/// checkpoint's first close after the windows' barriers): a wait of the
/// same group and world is a better first guess than none, and a wrong one
/// is corrected within a few barriers ([`GoWait::learn`]).
#[derive(Debug, Default)]
pub(super) struct Memory {
    by_kind: std::collections::HashMap<String, Duration>,
    last: Option<Duration>,
}

impl Memory {
    /// The wait to plan barrier `name` from: its kind's, else the last of any kind.
    pub(super) fn get(&self, name: &str) -> Option<Duration> {
        self.by_kind.get(&kind(name)).copied().or(self.last)
    }

    /// Remember `wait` for barrier `name`'s kind, and as the last wait.
    pub(super) fn set(&mut self, name: &str, wait: Duration) {
        self.by_kind.insert(kind(name), wait);
        self.last = Some(wait);
    }
}

/// One rank's poll plan for one barrier: nominal pauses before each poll
/// (before jitter), from what its earlier barriers took.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct GoWait {
    /// What this rank's recent barriers made it wait, from its marker to
    /// seeing the release (exponential average); `None` before the first.
    pub(super) remembered: Option<Duration>,
    /// The world's [`poll_cap`].
    pub(super) cap: Duration,
}

impl GoWait {
    /// The plan for a rank of `world` ranks that remembers `remembered`.
    pub(super) fn new(world: usize, remembered: Option<Duration>) -> GoWait {
        GoWait { remembered, cap: poll_cap(world) }
    }

    /// Nominal pause before the first poll: 0 without a memory (poll at
    /// once, as the plain back-off), else 90 % of the remembered wait, at most
    /// [`first_poll_limit`].
    pub(super) fn first(&self) -> Duration {
        self.remembered.map_or(Duration::ZERO, |w| w.mul_f64(FIRST_POLL_AT).min(first_poll_limit(self.cap)))
    }

    /// Nominal pause after the first missed poll: 1 ms without a memory,
    /// else an eighth of the remembered wait, within 1 ms and the cap. Each
    /// further pause doubles, up to the cap ([`GoWait::after`]).
    pub(super) fn second(&self) -> Duration {
        self.remembered.map_or(MIN_PAUSE, |w| w.mul_f64(STEP_SHARE).clamp(MIN_PAUSE, self.cap))
    }

    /// The nominal pause after `pause`: doubled, up to the cap.
    pub(super) fn after(&self, pause: Duration) -> Duration {
        (pause * 2).min(self.cap)
    }

    /// The memory after a barrier whose last missed poll came `missed`
    /// after the marker and whose successful poll came `seen` after it: the
    /// release lies between the two, so the midpoint goes into the average.
    /// With no missed poll (`None`: the first poll saw the release) the
    /// release came at most `seen` after the marker, perhaps much earlier:
    /// the memory falls to 3/4 of `seen` at once, so a memory that is too
    /// long shrinks by a quarter each barrier until a first poll misses.
    pub(super) fn learn(&self, missed: Option<Duration>, seen: Duration) -> Duration {
        let Some(m) = missed else {
            let sample = seen.mul_f64(0.75);
            return self.remembered.map_or(sample, |w| w.min(sample));
        };
        let sample = (m + seen.max(m)) / 2;
        match self.remembered {
            None => sample,
            Some(w) => w.mul_f64(1.0 - NEWEST_WEIGHT) + sample.mul_f64(NEWEST_WEIGHT),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// Nominal poll times (no jitter) of `plan` for a release `release`
    /// after the marker: (polls made, last missed poll, the poll that saw it).
    fn wait(plan: &GoWait, release: Duration) -> (u32, Option<Duration>, Duration) {
        let (mut t, mut pause, mut missed, mut polls) = (plan.first(), plan.second(), None, 1);
        while t < release {
            missed = Some(t);
            t += pause;
            pause = plan.after(pause);
            polls += 1;
        }
        (polls, missed, t)
    }

    #[test]
    fn a_new_kind_starts_from_the_last_wait_and_keeps_its_own_after() {
        let mut m = Memory::default();
        assert_eq!(m.get("b0"), None);
        m.set("warmup1", Duration::from_millis(400));
        assert_eq!(m.get("b0"), Some(Duration::from_millis(400)), "the first timed barrier starts from the warm-up's wait");
        m.set("b0", Duration::from_millis(300));
        m.set("close7", Duration::from_millis(50));
        assert_eq!(m.get("b1"), Some(Duration::from_millis(300)), "its own kind's wait wins");
        assert_eq!(m.get("open1"), Some(Duration::from_millis(50)), "an unseen kind takes the last");
    }

    #[test]
    fn repeats_of_a_barrier_are_one_kind() {
        assert_eq!(kind("fetch-window12-close"), kind("fetch-window3-close"));
        assert_ne!(kind("fetch-window12-close"), kind("fetch-window12-open"));
        assert_eq!(kind("b7"), "b");
    }

    #[test]
    fn poll_pause_grows_with_the_world() {
        assert_eq!(poll_cap(2), 2 * MS);
        assert_eq!(poll_cap(40), 10 * MS);
        assert_eq!(poll_cap(256), 64 * MS);
        assert_eq!(poll_cap(1024), 256 * MS);
        assert_eq!(poll_cap(8192), 2000 * MS);
        assert_eq!(poll_cap(100_000), 2000 * MS);
    }

    #[test]
    fn without_a_memory_it_is_the_plain_back_off() {
        let plan = GoWait::new(1024, None);
        assert_eq!((plan.first(), plan.second(), plan.after(64 * MS), plan.after(200 * MS)), (Duration::ZERO, MS, 128 * MS, 256 * MS));
        // A 670 ms wait (1,024 ranks on one 16-core host): 11 polls
        // without jitter, the last at 767 ms (14 with the cap at 100 ms).
        assert_eq!(wait(&plan, 670 * MS), (11, Some(511 * MS), 767 * MS));
    }

    #[test]
    fn a_memory_puts_the_first_poll_just_before_the_release() {
        let plan = GoWait::new(1024, Some(400 * MS));
        assert_eq!((plan.first(), plan.second()), (360 * MS, 60 * MS));
        let (polls, missed, seen) = wait(&plan, 400 * MS);
        assert_eq!((polls, missed, seen), (2, Some(360 * MS), 420 * MS));
        // A memory of a long wait sleeps at most 10 caps before its first poll.
        assert_eq!(GoWait::new(1024, Some(Duration::from_secs(30))).first(), 1000 * MS);
        assert_eq!(GoWait::new(8, Some(Duration::from_secs(30))).first(), 20 * MS);
    }

    /// Barriers that each release `release` after the marker, over a plan
    /// that starts with `memory`: polls per barrier and lateness, from the
    /// 5th barrier on.
    fn run(world: usize, memory: Option<Duration>, release: impl Fn(usize) -> Duration) -> (f64, Duration) {
        let (mut remembered, mut polls, mut late) = (memory, 0, Duration::ZERO);
        for b in 0..40 {
            let plan = GoWait::new(world, remembered);
            let (p, missed, seen) = wait(&plan, release(b));
            remembered = Some(plan.learn(missed, seen));
            if b >= 5 {
                polls += p;
                late = late.max(seen - release(b));
            }
        }
        (polls as f64 / 35.0, late)
    }

    #[test]
    fn steady_barriers_cost_about_two_polls() {
        for (world, ms) in [(1024, 670), (1024, 300), (256, 150), (64, 20), (8, 5)] {
            let (polls, late) = run(world, None, |_| MS * ms);
            assert!(polls <= 2.5, "{world} ranks, {ms} ms: {polls} polls per barrier");
            assert!(late <= poll_cap(world), "{world} ranks, {ms} ms: {late:?} late");
        }
        // Waits that vary by ±30 % from barrier to barrier.
        let (polls, late) = run(1024, None, |b| MS * (400 + [-120i32, 90, -40, 120, 0, 60, -90][b % 7]) as u32);
        assert!(polls <= 3.0 && late <= poll_cap(1024), "{polls} polls, {late:?} late");
    }

    #[test]
    fn a_memory_too_long_falls_within_a_few_barriers() {
        // Remembers a 30 s barrier, then meets 50 ms ones: late by at most
        // the first poll's limit, and back within the cap in a few barriers.
        let plan = GoWait::new(1024, Some(Duration::from_secs(30)));
        let (_, missed, seen) = wait(&plan, 50 * MS);
        assert_eq!((missed, seen), (None, 1000 * MS));
        let (polls, late) = run(1024, Some(Duration::from_secs(30)), |_| 50 * MS);
        assert!(polls <= 2.5 && late <= poll_cap(1024), "{polls} polls, {late:?} late");
    }
}
