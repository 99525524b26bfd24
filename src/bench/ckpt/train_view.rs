//! The training view of a save ([`TrainFigures`], per rank; [`TrainRow`],
//! per state and method over repeats and ranks) and its table: the steps of
//! a training load (`train_load.rs`) split at the save's pause, training's
//! resumption and the save becoming durable (its table: `train_table.rs`).
//!
//! **Blocked seconds** = the run's wall time from its first step to its
//! last, less what the same number of steps take with no save: at the rate
//! the loop ran before the save and after it was durable, in this run
//! (same ranks, same contention), so what remains is the stall plus every
//! step's slowdown while the save persisted. A separate no-save run of the
//! loop (`reference_step_s`, measured once per state before its saves) is
//! recorded beside it as a check: a rate that differs from it by a few
//! percent, over hundreds of steps, would swamp a stall of 0.1 s. NeMo Automodel reports
//! 27.34 s sync against 0.54 s async for an 8B model on 8 x H100, and the
//! step after an async snapshot about 10x slower (its issue #3131,
//! <https://github.com/NVIDIA-NeMo/Automodel/issues/3131>).

use serde::{Deserialize, Serialize};

use crate::stats::Spread;

/// First start to last end of `steps` (start, end; seconds), 0 for none.
pub(super) fn span<T: std::borrow::Borrow<(f64, f64)>>(steps: &[T]) -> f64 {
    match (steps.first(), steps.last()) {
        (Some(a), Some(b)) => b.borrow().1 - a.borrow().0,
        _ => 0.0,
    }
}

/// Milliseconds per step over `steps`: the first start to the last end over
/// the count, so the time between steps counts as it does in the reference
/// (a step loop that is descheduled loses that time too); `None` for none.
fn per_step_ms(steps: &[&(f64, f64)]) -> Option<f64> {
    (!steps.is_empty()).then(|| span(steps) * 1e3 / steps.len() as f64)
}

/// One rank's training view of one save.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TrainFigures {
    /// Seconds per step of the run with no save (first start to last end over the count).
    pub reference_step_s: f64,
    /// Steps timed before the save began.
    pub steps_before: usize,
    /// Milliseconds per step before the save (first start to last end over the count).
    pub step_before_ms: Option<f64>,
    /// Seconds from the loop pausing for the save to training resuming.
    pub stall_s: f64,
    /// Steps that began while the save persisted in the background (0 for a sync save).
    pub steps_during_persistence: usize,
    /// Their milliseconds per step (first start to last end over the count).
    pub step_during_persistence_ms: Option<f64>,
    /// The first step after training resumed, milliseconds.
    pub first_step_after_stall_ms: Option<f64>,
    /// Milliseconds per step during persistence over those before the save: the next steps' slowdown.
    pub persistence_slowdown: Option<f64>,
    /// Steps that began after the save was durable.
    pub steps_after: usize,
    /// Their milliseconds per step (first start to last end over the count).
    pub step_after_ms: Option<f64>,
    /// First step to last, seconds.
    pub run_s: f64,
    /// Steps in the run.
    pub steps: usize,
    /// Seconds per step before the save and after it was durable, together
    /// (each phase first start to last end, over both counts): this run's no-save rate.
    #[serde(default)]
    pub around_step_s: f64,
    /// `run_s` less `steps` x `around_step_s`: what the save cost training, seconds.
    pub blocked_s: f64,
}

impl TrainFigures {
    /// Split `steps` (start, end; seconds on the loop's clock) at the pause
    /// for the save (`paused`), training's resumption (`resumed`) and the
    /// save becoming durable (`durable`), against the no-save reference.
    pub fn of(steps: &[(f64, f64)], paused: f64, resumed: f64, durable: f64, reference_step_s: f64) -> Self {
        let before: Vec<_> = steps.iter().filter(|s| s.1 <= paused).collect();
        let during: Vec<_> = steps.iter().filter(|s| s.0 >= resumed && s.0 < durable).collect();
        let after: Vec<_> = steps.iter().filter(|s| s.0 >= durable.max(resumed)).collect();
        let first_after = steps.iter().find(|s| s.0 >= resumed).map(|s| (s.1 - s.0) * 1e3);
        let (b, d) = (per_step_ms(&before), per_step_ms(&during));
        let run_s = span(steps);
        let counted = before.len() + after.len();
        let around_step_s = if counted > 0 { (span(&before) + span(&after)) / counted as f64 } else { reference_step_s };
        TrainFigures {
            reference_step_s,
            steps_before: before.len(),
            step_before_ms: b,
            stall_s: (resumed - paused).max(0.0),
            steps_during_persistence: during.len(),
            step_during_persistence_ms: d,
            first_step_after_stall_ms: first_after,
            persistence_slowdown: b.zip(d).filter(|(b, _)| *b > 0.0).map(|(b, d)| d / b),
            steps_after: after.len(),
            step_after_ms: per_step_ms(&after),
            run_s,
            steps: steps.len(),
            around_step_s,
            blocked_s: (run_s - steps.len() as f64 * around_step_s).max(0.0),
        }
    }
}

/// The training view of one (state, method) save over repeats: each figure
/// per repeat is the worst rank's (slowest step, most blocked), spread over repeats.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TrainRow {
    /// Seconds per step of a separate run with no save.
    pub reference_step_s: Spread,
    /// Seconds per step before and after the save, this run: the rate blocked seconds are taken against.
    pub around_step_s: Spread,
    /// Milliseconds per step before the save (first start to last end over the count).
    pub step_before_ms: Spread,
    /// Pause for the save to training resuming, seconds.
    pub stall_s: Spread,
    /// Steps during background persistence (fewest over ranks).
    pub steps_during_persistence: Spread,
    /// Milliseconds per step during persistence (`None`: no step ran then on some repeat, a sync save).
    pub step_during_persistence_ms: Option<Spread>,
    /// Its ratio to the step before the save.
    pub persistence_slowdown: Option<Spread>,
    /// The first step after the stall, milliseconds.
    pub first_step_after_stall_ms: Option<Spread>,
    /// Milliseconds per step after the save was durable.
    pub step_after_ms: Option<Spread>,
    /// What the save cost training, seconds.
    pub blocked_s: Spread,
}

impl TrainRow {
    /// From every repeat's per-rank figures (`reps[repeat][rank]`, `None`
    /// where a rank ran no training load); `None` when a repeat lacks a figure.
    pub fn of(reps: &[Vec<Option<&TrainFigures>>]) -> Option<TrainRow> {
        let worst = |f: &dyn Fn(&TrainFigures) -> Option<f64>| -> Option<Spread> {
            let per_rep: Option<Vec<f64>> =
                reps.iter().map(|r| r.iter().map(|p| p.and_then(f)).collect::<Option<Vec<f64>>>().map(|v| v.into_iter().fold(f64::MIN, f64::max))).collect();
            per_rep.and_then(Spread::of)
        };
        let fewest = Spread::of(reps.iter().map(|r| r.iter().flatten().map(|t| t.steps_during_persistence as f64).fold(f64::MAX, f64::min)));
        Some(TrainRow {
            reference_step_s: worst(&|t| Some(t.reference_step_s))?,
            around_step_s: worst(&|t| Some(t.around_step_s))?,
            step_before_ms: worst(&|t| t.step_before_ms)?,
            stall_s: worst(&|t| Some(t.stall_s))?,
            steps_during_persistence: fewest?,
            step_during_persistence_ms: worst(&|t| t.step_during_persistence_ms),
            persistence_slowdown: worst(&|t| t.persistence_slowdown),
            first_step_after_stall_ms: worst(&|t| t.first_step_after_stall_ms),
            step_after_ms: worst(&|t| t.step_after_ms),
            blocked_s: worst(&|t| Some(t.blocked_s))?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Steps of `ms` milliseconds back to back from `from` (seconds), `n` of them.
    fn steps(from: f64, ms: f64, n: usize) -> Vec<(f64, f64)> {
        (0..n).map(|i| (from + i as f64 * ms / 1e3, from + (i + 1) as f64 * ms / 1e3)).collect()
    }

    #[test]
    fn a_sync_save_blocks_for_its_length() {
        // 10 steps of 10 ms, a 2 s save, 10 more steps.
        let mut s = steps(0.0, 10.0, 10);
        s.extend(steps(2.1, 10.0, 10));
        let f = TrainFigures::of(&s, 0.1, 2.1, 2.1, 0.01);
        assert_eq!((f.steps_before, f.steps_during_persistence, f.steps_after, f.steps), (10, 0, 10, 20));
        assert!((f.stall_s - 2.0).abs() < 1e-9 && (f.blocked_s - 2.0).abs() < 1e-9, "{f:?}");
        assert_eq!(f.persistence_slowdown, None);
        assert!((f.step_before_ms.unwrap() - 10.0).abs() < 1e-9 && (f.step_after_ms.unwrap() - 10.0).abs() < 1e-9);
    }

    #[test]
    fn blocked_seconds_come_from_this_runs_rate_not_the_separate_reference() {
        // A reference 20 % slower than this run's 10 ms steps: 40 steps x 2 ms
        // would hide 0.08 s of a 0.1 s stall.
        let mut s = steps(0.0, 10.0, 20);
        s.extend(steps(0.3, 10.0, 20));
        let f = TrainFigures::of(&s, 0.2, 0.3, 0.3, 0.012);
        assert!((f.around_step_s - 0.01).abs() < 1e-12, "{f:?}");
        assert!((f.blocked_s - 0.1).abs() < 1e-9, "{f:?}");
    }

    #[test]
    fn an_async_save_blocks_for_its_stall_and_the_slowdown() {
        // 10 steps of 10 ms, a 0.3 s stall, 20 steps of 30 ms while it persists, 10 of 10 ms.
        let mut s = steps(0.0, 10.0, 10);
        s.extend(steps(0.4, 30.0, 20));
        s.extend(steps(1.0, 10.0, 10));
        let f = TrainFigures::of(&s, 0.1, 0.4, 1.0, 0.01);
        assert_eq!((f.steps_before, f.steps_during_persistence, f.steps_after), (10, 20, 10));
        assert!((f.stall_s - 0.3).abs() < 1e-9);
        // 1.1 s of run for 40 steps of 10 ms: 0.7 s blocked, 0.3 of it the stall, 0.4 the 20 slower steps.
        assert!((f.blocked_s - 0.7).abs() < 1e-9, "{f:?}");
        assert!((f.persistence_slowdown.unwrap() - 3.0).abs() < 1e-9);
        assert!((f.first_step_after_stall_ms.unwrap() - 30.0).abs() < 1e-9);
    }
}
