//! Resource use during a timed window: process CPU (getrusage), whole-host CPU
//! (/proc/stat) and NIC byte counters (sysinfo, /proc/net/dev).
//!
//! CPU is reported in cores = CPU-seconds / wall-seconds, the unit the seeds use
//! ("0.95 cores" for RDMA, "68.2 cores" for warp).

use std::collections::BTreeMap;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use sysinfo::Networks;

/// Process CPU time so far, from `getrusage(RUSAGE_SELF)`: (user s, system s).
pub fn process_cpu_s() -> (f64, f64) {
    // SAFETY: getrusage writes into the zeroed struct we pass; RUSAGE_SELF is valid.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage for the call.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    if rc != 0 {
        return (0.0, 0.0);
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    (tv(ru.ru_utime), tv(ru.ru_stime))
}

/// The host's busy CPU ticks so far (all CPUs: user, nice, system, irq,
/// softirq, steal; not idle or iowait) and its logical CPUs (`cpuN` lines), from
/// `/proc/stat` (proc(5)). Read here, not through sysinfo: sysinfo leaves its
/// CPU figures unchanged when refreshed within 200 ms
/// (`MINIMUM_CPU_UPDATE_INTERVAL`), so a window that short (a warm `weights`
/// load is 0.05–0.5 s) reported the average since boot.
fn host_cpu_ticks() -> Option<(u64, usize)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let mut lines = stat.lines();
    let f: Vec<u64> = lines.next()?.strip_prefix("cpu ")?.split_whitespace().filter_map(|x| x.parse().ok()).collect();
    let busy = [0, 1, 2, 5, 6, 7].iter().filter_map(|&i| f.get(i)).sum();
    let cpus = lines.take_while(|l| l.starts_with("cpu")).count();
    Some((busy, cpus))
}

fn nic_totals() -> BTreeMap<String, (u64, u64)> {
    Networks::new_with_refreshed_list().iter().map(|(name, d)| (name.clone(), (d.total_received(), d.total_transmitted()))).collect()
}

/// Byte counts of one network interface over the window.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NicDelta {
    /// Bytes received.
    pub rx_bytes: u64,
    /// Bytes transmitted.
    pub tx_bytes: u64,
}

/// What the sampler measured over one window.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SamplerReport {
    /// Wall time of the window, seconds.
    pub wall_s: f64,
    /// This process's user CPU-seconds in the window.
    pub process_user_s: f64,
    /// This process's system CPU-seconds in the window.
    pub process_sys_s: f64,
    /// Client CPU in cores: (user + system) / wall.
    pub client_cpu_cores: f64,
    /// Whole-host CPU in cores: busy CPU-seconds of all CPUs (`/proc/stat`,
    /// one clock tick, 10 ms, per CPU coarse) / wall seconds, at most
    /// `host_logical_cpus` (a window of a few ticks rounds up).
    pub host_cpu_cores: f64,
    /// Logical CPUs of the host.
    pub host_logical_cpus: usize,
    /// CPU in cores of the store's server process when it runs on this host
    /// (`/proc/<pid>/stat` utime + stime over the window; [`watch_server`]);
    /// `None` for a remote server or none. Beside `client_cpu_cores` it says
    /// which side of a loopback run did the work.
    pub server_cpu_cores: Option<f64>,
    /// Bytes received on all interfaces but loopback.
    pub nic_rx_bytes: u64,
    /// Bytes sent on all interfaces but loopback.
    pub nic_tx_bytes: u64,
    /// Per interface (loopback included), only those that moved bytes.
    pub nics: BTreeMap<String, NicDelta>,
}

/// The server processes on this host whose CPU every [`Sampler`] also
/// measures ([`watch_server`]).
static SERVER_PIDS: std::sync::OnceLock<Vec<i32>> = std::sync::OnceLock::new();

/// Measure the processes `pids` (one server: nginx's master and workers) in
/// every later window too, summed (`server_cpu_cores`): the session calls it
/// when the store's server runs on this host. The first call wins.
pub fn watch_server(pids: Vec<i32>) {
    let _ = SERVER_PIDS.set(pids);
}

/// A running measurement window; [`Sampler::finish`] closes it.
#[derive(Debug)]
pub struct Sampler {
    server0: Option<(&'static [i32], f64)>,
    t0: Instant,
    cpu0: (f64, f64),
    /// Busy ticks of the host at the start ([`host_cpu_ticks`]).
    host0: Option<u64>,
    net0: BTreeMap<String, (u64, u64)>,
}

impl Sampler {
    /// Open a window now.
    pub fn start() -> Self {
        let net0 = nic_totals();
        let server0 = SERVER_PIDS.get().and_then(|pids| Some((pids.as_slice(), crate::store::server::processes_cpu_s(pids)?)));
        Sampler { server0, t0: Instant::now(), cpu0: process_cpu_s(), host0: host_cpu_ticks().map(|h| h.0), net0 }
    }

    /// Close the window and report.
    pub fn finish(self) -> SamplerReport {
        let wall_s = self.t0.elapsed().as_secs_f64();
        let (u1, s1) = process_cpu_s();
        let host1 = host_cpu_ticks();
        let ncpu = host1.map_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()), |h| h.1);
        let host_cpu_cores = match (self.host0, host1, crate::clock::ticks_per_s()) {
            // A window of a few ticks can count a whole tick per CPU that
            // ran only part of one: never more cores than the host has.
            (Some(b0), Some((b1, _)), Some(hz)) if wall_s > 0.0 => (b1.saturating_sub(b0) as f64 / hz / wall_s).min(ncpu as f64),
            _ => 0.0,
        };
        let mut nics = BTreeMap::new();
        let (mut rx, mut tx) = (0, 0);
        for (name, (r1, t1)) in nic_totals() {
            let (r0, t0) = self.net0.get(&name).copied().unwrap_or((r1, t1));
            let d = NicDelta { rx_bytes: r1.saturating_sub(r0), tx_bytes: t1.saturating_sub(t0) };
            if d.rx_bytes == 0 && d.tx_bytes == 0 {
                continue;
            }
            if name != "lo" {
                rx += d.rx_bytes;
                tx += d.tx_bytes;
            }
            nics.insert(name, d);
        }
        let (user, sys) = (u1 - self.cpu0.0, s1 - self.cpu0.1);
        SamplerReport {
            wall_s,
            process_user_s: user,
            process_sys_s: sys,
            client_cpu_cores: if wall_s > 0.0 { (user + sys) / wall_s } else { 0.0 },
            host_cpu_cores,
            host_logical_cpus: ncpu,
            server_cpu_cores: self
                .server0
                .and_then(|(pids, c0)| Some((crate::store::server::processes_cpu_s(pids)? - c0) / wall_s))
                .filter(|c| c.is_finite() && *c >= 0.0),
            nic_rx_bytes: rx,
            nic_tx_bytes: tx,
            nics,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CPU-seconds of the calling thread (RUSAGE_THREAD), for the tests below.
    fn thread_cpu_s() -> f64 {
        // SAFETY: as in process_cpu_s.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `ru` is a valid, writable rusage for the call.
        assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) }, 0);
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
        tv(ru.ru_utime) + tv(ru.ru_stime)
    }

    /// Spin until this thread has burnt `cpu_s` CPU-seconds, however loaded the machine is.
    fn spin(cpu_s: f64) {
        let start = thread_cpu_s();
        let mut x = 0u64;
        while thread_cpu_s() - start < cpu_s {
            for _ in 0..1_000 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            }
        }
        std::hint::black_box(x);
    }

    #[test]
    fn process_cpu_covers_the_work_done_in_the_window() {
        // 0.3 CPU-seconds of this thread: the process figure must include them.
        let s = Sampler::start();
        spin(0.3);
        let r = s.finish();
        let cpu = r.process_user_s + r.process_sys_s;
        assert!(cpu >= 0.29, "process CPU {cpu} s misses the thread's 0.3 s");
        assert!(r.wall_s > 0.0);
        assert!((r.client_cpu_cores - cpu / r.wall_s).abs() < 1e-9, "cores = CPU-seconds / wall-seconds");
        assert!(r.host_logical_cpus >= 1);
        // The host's busy CPU includes this thread's (one clock tick per CPU of slack).
        let slack = 0.011 * r.host_logical_cpus as f64;
        assert!(r.host_cpu_cores * r.wall_s >= cpu - slack, "host {} cores x {} s < this process's {cpu} s", r.host_cpu_cores, r.wall_s);
        assert!(r.host_cpu_cores <= r.host_logical_cpus as f64);
    }

    #[test]
    fn a_window_of_a_few_ticks_never_counts_more_cores_than_the_host_has() {
        // 1 ms of work against 10 ms ticks: a tick landing inside read 10
        // cores per busy CPU before the figure was capped.
        for _ in 0..50 {
            let s = Sampler::start();
            spin(0.001);
            let r = s.finish();
            assert!(r.host_cpu_cores <= r.host_logical_cpus as f64, "{} cores on a host of {}", r.host_cpu_cores, r.host_logical_cpus);
        }
    }

    #[test]
    fn host_cpu_is_measured_over_a_window_shorter_than_sysinfo_refreshes() {
        // 0.1 CPU-seconds in a window well under 200 ms (sysinfo's minimum
        // refresh interval, under which it repeated the since-boot average).
        let s = Sampler::start();
        spin(0.1);
        let r = s.finish();
        let slack = 0.011 * r.host_logical_cpus as f64;
        let busy = r.host_cpu_cores * r.wall_s;
        assert!(busy >= 0.1 - slack && busy <= r.wall_s * r.host_logical_cpus as f64 + slack, "{busy} busy CPU-s in {} s", r.wall_s);
    }
}
