//! A checkpoint as a training job sees it: while each rank saves, a fixed
//! compute step ([`Gemm`]: cuBLAS SGEMM on the GPU, a CPU stand-in
//! without one) runs in a loop on a thread of its own, as the job's
//! training steps would. The save begins at a step boundary (the loop is
//! paused, as a job calls save between steps), training resumes when the
//! save stops blocking (a sync save: when it is durable; `async`: when the
//! snapshot is taken) and keeps stepping while the save persists and after.
//!
//! Every step's start and end are kept; `train_view.rs` splits them into
//! the steps before the save, during background persistence and after it,
//! and measures the seconds the save cost training against
//! [`TrainLoad::reference`], a run of the same loop with no save.

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::train_view::span;
use crate::error::{Error, Result};
use crate::flag::TRAIN_GEMM;
use crate::mem::{Gemm, Gpu};

/// Steps (at least) timed before each save, and after it has persisted.
pub(crate) const STEPS_AROUND: usize = 10;
/// Seconds (at least) timed before each save, and after it has persisted.
pub(crate) const SECONDS_AROUND: f64 = 0.5;
/// A first step longer than this gets a note: the run will take minutes more.
const SLOW_STEP_S: f64 = 0.5;

/// What the loop thread is told to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cmd {
    Run,
    Pause,
    Stop,
}

#[derive(Debug)]
struct Inner {
    cmd: Cmd,
    /// The loop is between steps, waiting.
    idle: bool,
    /// (start, end) of every step since the last take, seconds since `origin`.
    steps: Vec<(f64, f64)>,
    /// When the loop was last told to run, seconds since `origin`.
    resumed_at: f64,
    /// The loop's error, which ended it.
    error: Option<String>,
    /// When the save being measured became durable (seconds since `origin`), if marked.
    durable_at: Option<f64>,
}

#[derive(Debug)]
struct Shared {
    m: Mutex<Inner>,
    cv: Condvar,
    origin: Instant,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.m.lock().unwrap_or_else(|p| p.into_inner())
    }
    fn now(&self) -> f64 {
        self.origin.elapsed().as_secs_f64()
    }
}

/// The training loop of one rank: a thread stepping a [`Gemm`] while told to run.
#[derive(Debug)]
pub(crate) struct TrainLoad {
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Where the step runs ([`Gemm::device`]).
    pub(crate) device: &'static str,
    /// The GEMM's side (n of n x n x n).
    pub(crate) side: usize,
}

impl TrainLoad {
    /// Start the loop (paused) on `gpu`, or on the CPU without one: the GEMM is
    /// made and run once (cuBLAS's first call sets itself up) before this returns.
    ///
    /// Errors: the GEMM's ([`Gemm::new`], its first step); no thread.
    pub(crate) fn start(gpu: Option<Arc<Gpu>>, side: usize) -> Result<Self> {
        let shared = Arc::new(Shared {
            m: Mutex::new(Inner { cmd: Cmd::Pause, idle: true, steps: Vec::new(), resumed_at: 0.0, error: None, durable_at: None }),
            cv: Condvar::new(),
            origin: Instant::now(),
        });
        let (tx, rx) = std::sync::mpsc::channel::<std::result::Result<(&'static str, f64), String>>();
        let sh = shared.clone();
        let thread = std::thread::Builder::new()
            .name("train-load".into())
            .spawn(move || {
                let made = Gemm::new(gpu.as_ref(), side).and_then(|mut g| {
                    let t = Instant::now();
                    g.step().map(|_| (g, t.elapsed().as_secs_f64()))
                });
                let mut g = match made {
                    Ok((g, first_s)) => {
                        let _ = tx.send(Ok((g.device(), first_s)));
                        g
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                step_loop(&sh, &mut g);
            })
            .map_err(|e| Error::Runtime(format!("cannot start the training-load thread: {e}")))?;
        let (device, first_s) = rx
            .recv()
            .map_err(|_| Error::Runtime("the training-load thread ended before its first step".into()))?
            .map_err(|e| Error::Runtime(format!("the training load's GEMM ({side} x {side}, the {TRAIN_GEMM} side): {e}")))?;
        if first_s > SLOW_STEP_S {
            eprintln!(
                "note: one step of the training load ({side} x {side} x {side} GEMM, {device}) took {first_s:.1} s; each save is timed with at least {STEPS_AROUND} steps before and after it and the reference runs {} steps, so this run takes minutes more (a smaller {TRAIN_GEMM} side keeps it short)",
                3 * STEPS_AROUND
            );
        }
        Ok(TrainLoad { shared, thread: Some(thread), device, side })
    }

    /// Seconds since the loop's origin (the clock of every step time).
    pub(crate) fn now(&self) -> f64 {
        self.shared.now()
    }

    /// Let the loop step (training resumes); remembers when.
    pub(crate) fn run(&self) {
        let mut g = self.shared.lock();
        if g.cmd != Cmd::Stop {
            g.cmd = Cmd::Run;
            g.resumed_at = self.shared.now();
        }
        self.shared.cv.notify_all();
    }

    /// Mark now as when the save being measured became durable (its manifest committed).
    pub(crate) fn mark_durable(&self) {
        let now = self.shared.now();
        self.shared.lock().durable_at = Some(now);
    }

    /// When the save was marked durable, clearing the mark; `None` if unmarked.
    pub(crate) fn take_durable(&self) -> Option<f64> {
        self.shared.lock().durable_at.take()
    }

    /// When the loop was last told to run (seconds since its origin).
    pub(crate) fn resumed_at(&self) -> f64 {
        self.shared.lock().resumed_at
    }

    /// Stop stepping at the next step boundary and wait for it (a job calls
    /// save between steps). Returns when the loop went idle.
    ///
    /// Errors: the loop's own error, which ended it.
    pub(crate) async fn pause(&self) -> Result<f64> {
        let sh = self.shared.clone();
        tokio::task::spawn_blocking(move || {
            let mut g = sh.lock();
            if g.cmd == Cmd::Run {
                g.cmd = Cmd::Pause;
            }
            sh.cv.notify_all();
            while !g.idle && g.error.is_none() {
                g = sh.cv.wait(g).unwrap_or_else(|p| p.into_inner());
            }
            match &g.error {
                Some(e) => Err(Error::Runtime(format!("the training load's step failed: {e}"))),
                None => Ok(sh.now()),
            }
        })
        .await
        .map_err(|e| Error::Runtime(format!("waiting for the training load: {e}")))?
    }

    /// Wait (the loop running) until at least `steps` steps have ended after
    /// `since` (seconds since the origin) and `seconds` have passed since then.
    ///
    /// Errors: the loop's own error, which ended it.
    pub(crate) async fn wait_steps(&self, since: f64, steps: usize, seconds: f64) -> Result<()> {
        let sh = self.shared.clone();
        tokio::task::spawn_blocking(move || {
            let mut g = sh.lock();
            loop {
                if let Some(e) = &g.error {
                    return Err(Error::Runtime(format!("the training load's step failed: {e}")));
                }
                let done = g.steps.iter().filter(|s| s.0 >= since).count();
                if done >= steps && sh.now() - since >= seconds {
                    return Ok(());
                }
                g = sh.cv.wait_timeout(g, Duration::from_millis(20)).unwrap_or_else(|p| p.into_inner()).0;
            }
        })
        .await
        .map_err(|e| Error::Runtime(format!("waiting for the training load: {e}")))?
    }

    /// Every step timed since the last take: (start, end), seconds since the origin.
    pub(crate) fn take_steps(&self) -> Vec<(f64, f64)> {
        std::mem::take(&mut self.shared.lock().steps)
    }

    /// The reference: `steps` (and at least [`SECONDS_AROUND`] x 2) steps
    /// with no save, the loop paused after. Returns seconds per step, first
    /// start to last end over the count (gaps between steps included, as in a save's run).
    ///
    /// Errors: the loop's.
    pub(crate) async fn reference(&self, steps: usize) -> Result<f64> {
        self.take_steps();
        let since = self.now();
        self.run();
        self.wait_steps(since, steps, 2.0 * SECONDS_AROUND).await?;
        self.pause().await?;
        let s = self.take_steps();
        Ok(span(&s) / s.len().max(1) as f64)
    }
}

impl Drop for TrainLoad {
    fn drop(&mut self) {
        self.shared.lock().cmd = Cmd::Stop;
        self.shared.cv.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The loop thread: step while told to run, idle between steps otherwise.
fn step_loop(sh: &Shared, gemm: &mut Gemm) {
    loop {
        {
            let mut g = sh.lock();
            while g.cmd == Cmd::Pause {
                if !g.idle {
                    g.idle = true;
                    sh.cv.notify_all();
                }
                g = sh.cv.wait(g).unwrap_or_else(|p| p.into_inner());
            }
            if g.cmd == Cmd::Stop {
                g.idle = true;
                sh.cv.notify_all();
                return;
            }
            g.idle = false;
        }
        let t0 = sh.now();
        let r = gemm.step();
        let t1 = sh.now();
        let mut g = sh.lock();
        if let Err(e) = r {
            g.error = Some(e);
            g.idle = true;
            sh.cv.notify_all();
            return;
        }
        g.steps.push((t0, t1));
        sh.cv.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_cpu_loop_pauses_at_a_step_boundary_and_resumes() {
        let load = TrainLoad::start(None, 64).unwrap();
        assert!(load.device.starts_with("cpu stand-in"));
        let per_step = load.reference(5).await.unwrap();
        assert!(per_step > 0.0);
        let since = load.now();
        load.run();
        load.wait_steps(since, 3, 0.0).await.unwrap();
        let paused = load.pause().await.unwrap();
        let s = load.take_steps();
        assert!(s.len() >= 3 && s.iter().all(|s| s.1 <= paused), "no step runs past the pause");
        assert!(s.windows(2).all(|w| w[0].1 <= w[1].0), "steps in order, never overlapping");
        // Paused: no step while it is.
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(load.take_steps().is_empty());
        assert!(load.resumed_at() <= paused);
    }
}
