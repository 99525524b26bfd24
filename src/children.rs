//! Processes this one started and must not leave behind: the shells the AWS
//! SDK runs for a `credential_process` (`sh -c COMMAND`), which it neither
//! times out nor stops, and anything still running when a signal ends the
//! run. A process that exits leaves its children running under init; these
//! functions send them SIGTERM first.
//!
//! Through `sysinfo`'s process table (parents and command lines from
//! `/proc`), so nothing here parses `/proc` itself.

use sysinfo::{Pid, ProcessRefreshKind, ProcessesToUpdate, Signal, System, UpdateKind};

/// Every live descendant of this process: `(pid, parent, command line)`,
/// parents before their children. Empty where the process table cannot be
/// read.
fn descendants() -> Vec<(Pid, Pid, Vec<String>)> {
    let mut sys = System::new();
    sys.refresh_processes_specifics(ProcessesToUpdate::All, true, ProcessRefreshKind::nothing().with_cmd(UpdateKind::Always));
    let me = Pid::from_u32(std::process::id());
    let mut found: Vec<(Pid, Pid, Vec<String>)> = Vec::new();
    let mut frontier = vec![me];
    while let Some(parent) = frontier.pop() {
        for (pid, p) in sys.processes() {
            if p.parent() == Some(parent) && p.thread_kind().is_none() && !found.iter().any(|f| f.0 == *pid) {
                found.push((*pid, parent, p.cmd().iter().map(|a| a.to_string_lossy().into_owned()).collect()));
                frontier.push(*pid);
            }
        }
    }
    found
}

/// Send SIGTERM to `pids` (a process gone already is passed over).
fn terminate(pids: &[Pid]) -> usize {
    let mut sys = System::new();
    sys.refresh_processes_specifics(ProcessesToUpdate::Some(pids), true, ProcessRefreshKind::nothing());
    pids.iter().filter(|pid| sys.process(**pid).and_then(|p| p.kill_with(Signal::Term)).unwrap_or(false)).count()
}

/// Stop every shell this process started with `sh -c` (the SDK's
/// `credential_process` runs), and everything under each; returns how many
/// processes were sent SIGTERM.
pub fn stop_shells() -> usize {
    let all = descendants();
    let me = Pid::from_u32(std::process::id());
    let shells: Vec<Pid> = all.iter().filter(|(_, parent, cmd)| *parent == me && is_shell(cmd)).map(|d| d.0).collect();
    // The shells' own descendants: those whose chain of parents meets a shell.
    let mut doomed = shells.clone();
    for (pid, parent, _) in &all {
        if doomed.contains(parent) && !doomed.contains(pid) {
            doomed.push(*pid);
        }
    }
    terminate(&doomed)
}

/// Stop every descendant of this process (a signal is ending the run);
/// returns how many were sent SIGTERM.
pub fn stop_all() -> usize {
    let all: Vec<Pid> = descendants().into_iter().map(|d| d.0).collect();
    terminate(&all)
}

/// `sh -c ...`, as the SDK runs a `credential_process`.
fn is_shell(cmd: &[String]) -> bool {
    matches!(cmd, [sh, c, ..] if (sh == "sh" || sh.ends_with("/sh")) && c == "-c")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// A shell started as the SDK starts a credential_process, with a child
    /// of its own, is stopped with that child; a process that is not a shell
    /// is left alone.
    #[test]
    fn shells_and_their_children_are_stopped_and_others_kept() {
        let mut shell = std::process::Command::new("sh").args(["-c", "sleep 300 & wait"]).spawn().expect("sh runs");
        let mut other = std::process::Command::new("sleep").arg("300").spawn().expect("sleep runs");
        // The shell's own sleep must have started before it can be found.
        let t0 = Instant::now();
        while !descendants().iter().any(|(_, parent, cmd)| parent.as_u32() == shell.id() && cmd.first().is_some_and(|c| c == "sleep")) {
            assert!(t0.elapsed() < Duration::from_secs(5), "the shell's sleep never showed");
            std::thread::sleep(Duration::from_millis(20));
        }
        let grandchild = descendants().into_iter().find(|(_, parent, _)| parent.as_u32() == shell.id()).expect("the shell's child").0;
        assert_eq!(stop_shells(), 2, "the shell and its sleep");
        assert!(shell.wait().is_ok());
        let t0 = Instant::now();
        // Gone, or a zombie that init has not reaped yet.
        let alive = |pid: Pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.rsplit(')').next().is_some_and(|r| r.trim_start().starts_with('Z')))
        };
        while alive(grandchild) {
            assert!(t0.elapsed() < Duration::from_secs(5), "the shell's sleep still runs");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(other.try_wait().expect("status").is_none(), "not a shell: kept");
        other.kill().ok();
        other.wait().ok();
    }

    #[test]
    fn only_sh_dash_c_is_a_shell() {
        let v = |s: &[&str]| s.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        assert!(is_shell(&v(&["sh", "-c", "x"])));
        assert!(is_shell(&v(&["/bin/sh", "-c", "x"])));
        assert!(!is_shell(&v(&["bash", "script"])));
        assert!(!is_shell(&v(&["sh"])));
        assert!(!is_shell(&v(&["s3rdma", "-c"])));
    }
}
