//! Seconds since this process started: what a user waits from `exec`, not
//! only a bench's timed window ("exec to tensors usable": the `weights`
//! record's `ready_s`, docs/gpu.md "time to ready").
//!
//! The kernel's start time of the process (`/proc/self/stat` field 22,
//! `starttime`, in clock ticks since boot; proc(5)) is compared with
//! `CLOCK_BOOTTIME`, the clock it counts on, once, when [`mark_main`] runs;
//! every later point is that offset plus a monotonic [`Instant`] difference.
//! Resolution of the offset: one clock tick (10 ms at the usual 100 Hz).

use std::sync::OnceLock;
use std::time::Instant;

/// (main's first instant, seconds from process start to it when readable).
static MAIN: OnceLock<(Instant, Option<f64>)> = OnceLock::new();

/// Note the start of `main` (the first call wins; later calls do nothing).
pub fn mark_main() {
    MAIN.get_or_init(|| (Instant::now(), exec_to_now()));
}

/// Seconds from the process's start (fork/exec, as the kernel counts it) to
/// [`mark_main`]; `None` when `/proc/self/stat` cannot be read or main was
/// never marked.
pub fn exec_to_main_s() -> Option<f64> {
    MAIN.get().and_then(|m| m.1)
}

/// Seconds from the process's start to `at`: [`exec_to_main_s`] (0 when
/// unknown) plus `at` minus main's start. Before [`mark_main`], main's start
/// is taken to be now.
pub fn since_start(at: Instant) -> f64 {
    let (main, offset) = *MAIN.get_or_init(|| (Instant::now(), exec_to_now()));
    offset.unwrap_or(0.0) + at.saturating_duration_since(main).as_secs_f64() - main.saturating_duration_since(at).as_secs_f64()
}

/// Seconds since the process started, from the kernel's counters.
fn exec_to_now() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let ticks = stat_field(&stat, 22)?;
    let hz = ticks_per_s()?;
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime only writes the timespec given.
    if unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) } != 0 {
        return None;
    }
    let now = ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9;
    Some((now - ticks as f64 / hz).max(0.0))
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`), the unit of
/// `/proc/<pid>/stat`'s times; `None` when the system does not say.
pub(crate) fn ticks_per_s() -> Option<f64> {
    // SAFETY: sysconf reads a constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (hz > 0).then_some(hz as f64)
}

/// Field `n` of a `/proc/<pid>/stat` line, numbered as proc(5) numbers them
/// (1 = pid), as a number. The command name (field 2) is in parentheses and
/// may itself hold spaces or `)`, so fields are counted from the last `)`;
/// `n` must be 3 or more.
pub(crate) fn stat_field(stat: &str, n: usize) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(n.checked_sub(3)?)?.parse().ok()
}

/// Now, Unix seconds (wall clock: comparable across processes and hosts).
pub fn now_unix() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_last_parenthesis() {
        let line = "4242 (a b) c)) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000000 100 18446744073709551615";
        assert_eq!(stat_field(line, 22), Some(987654));
        assert_eq!(stat_field(line, 14), Some(1), "utime");
        assert_eq!(stat_field("no parens at all", 22), None);
        assert_eq!(stat_field("1 (x) S 1 2", 22), None);
        assert_eq!(stat_field(line, 2), None, "the name is not a number field");
    }

    #[test]
    fn this_process_started_before_now_and_the_offset_is_plausible() {
        mark_main();
        let off = exec_to_main_s().expect("/proc/self/stat is readable on Linux");
        // The test binary started at most a few minutes ago (a slow CI machine).
        assert!((0.0..600.0).contains(&off), "offset {off}");
        let later = since_start(Instant::now());
        assert!(later >= off, "{later} < {off}");
    }
}
