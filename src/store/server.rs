//! Which server answered, when it runs on this host: the process listening
//! on the endpoint's port (docs/05-interpreting-results.md, "A server on the
//! measuring host"). A figure measured against a test
//! server on loopback (s3s-fs reads files in 4 KiB pieces, about 0.6–0.7 GB/s
//! on the H200 machine: docs/http-peers.md) measures that server, and the
//! record has to say so; its CPU beside the client's shows which side worked.
//!
//! Linux only, from procfs (proc(5)): `/proc/net/tcp` and `/proc/net/tcp6`
//! list listening sockets with their port (hex) and inode; the process holding
//! that inode has a `socket:[inode]` link under `/proc/<pid>/fd`. Written here
//! because no maintained crate maps a port to its process without root.

use serde::Serialize;

/// A server on this host: every process holding its listening socket.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LocalServer {
    /// The lowest of `pids` (nginx: its master).
    pub pid: i32,
    /// Every process holding the listening socket, ascending: one for s3s-fs
    /// or MinIO, the master and its workers for nginx (the workers serve, so
    /// the server's CPU is the sum over all of them).
    pub pids: Vec<i32>,
    /// `/proc/<pid>/comm` of `pid`, e.g. `s3s-fs`, `nginx`, `minio`.
    pub process: String,
}

/// What the record says about the server at `endpoint` (an http(s) URL):
/// `{"endpoint", "host", "port", "loopback", "on_this_host", "local_process": {pid, pids, process} | null}`.
/// `on_this_host`: loopback (127.0.0.0/8, ::1 and its IPv4-mapped form,
/// `localhost`), `0.0.0.0`, or an address of this machine. `local_process` is
/// looked for only then, and found only when this user may read the server's
/// `/proc/<pid>/fd`.
pub fn describe(endpoint: &str) -> serde_json::Value {
    let (host, port) = host_port(endpoint);
    let loopback = is_loopback(&host);
    let on_this_host = loopback || port.is_some_and(|p| resolves_here(&host, p));
    let local = if on_this_host { port.and_then(listener) } else { None };
    serde_json::json!({"endpoint": endpoint, "host": host, "port": port, "loopback": loopback, "on_this_host": on_this_host, "local_process": local})
}

/// True when `endpoint`'s host is a loopback name or address (what a record
/// written before `local_process` existed can still tell).
pub fn is_loopback_endpoint(endpoint: &str) -> bool {
    is_loopback(&host_port(endpoint).0)
}

/// True when `host` resolves to an address of this machine: `0.0.0.0`/`::`,
/// or one a socket can bind to (only local addresses can be bound).
fn resolves_here(host: &str, port: u16) -> bool {
    use std::net::ToSocketAddrs;
    let Ok(addrs) = (host, port).to_socket_addrs() else { return false };
    addrs.into_iter().any(|a| a.ip().is_unspecified() || std::net::UdpSocket::bind((a.ip(), 0)).is_ok())
}

/// Host and port of an http(s) URL (the scheme's default port when none is given).
fn host_port(endpoint: &str) -> (String, Option<u16>) {
    let (scheme, rest) = endpoint.split_once("://").unwrap_or(("http", endpoint));
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    let default = match scheme {
        "https" => Some(443),
        "http" => Some(80),
        _ => None,
    };
    if let Some(v6) = authority.strip_prefix('[') {
        let (h, after) = v6.split_once(']').unwrap_or((v6, ""));
        let port = after.strip_prefix(':').map_or(default, |p| p.parse().ok());
        return (h.to_string(), port);
    }
    match authority.rsplit_once(':') {
        Some((h, p)) => (h.to_string(), p.parse().ok()),
        None => (authority.to_string(), default),
    }
}

fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.to_canonical().is_loopback())
}

/// The processes listening on TCP `port` on this host, if they can be seen.
pub fn listener(port: u16) -> Option<LocalServer> {
    let inodes: Vec<u64> =
        ["/proc/net/tcp", "/proc/net/tcp6"].iter().filter_map(|p| std::fs::read_to_string(p).ok()).flat_map(|t| listening_inodes(&t, port)).collect();
    if inodes.is_empty() {
        return None;
    }
    let wanted: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    let mut pids: Vec<i32> = std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<i32>().ok()?;
            let mut fds = std::fs::read_dir(entry.path().join("fd")).ok()?.flatten();
            fds.any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| wanted.iter().any(|w| l.as_os_str() == w.as_str()))).then_some(pid)
        })
        .collect();
    pids.sort_unstable();
    let pid = *pids.first()?;
    let process = std::fs::read_to_string(format!("/proc/{pid}/comm")).map(|c| c.trim().to_string()).unwrap_or_default();
    Some(LocalServer { pid, pids, process })
}

/// Inodes of the sockets in LISTEN state (`st` 0A) on `port` in one
/// `/proc/net/tcp{,6}` table: fields `sl local_address rem_address st ... inode`
/// (the 10th), the local address as `HEXADDR:HEXPORT`.
fn listening_inodes(table: &str, port: u16) -> Vec<u64> {
    table
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let p = u16::from_str_radix(f.get(1)?.rsplit_once(':')?.1, 16).ok()?;
            (p == port && *f.get(3)? == "0A").then(|| f.get(9)?.parse().ok())?
        })
        .collect()
}

/// CPU-seconds (user + system) process `pid` has used, from `/proc/<pid>/stat`
/// fields 14 and 15 (clock ticks); `None` when it cannot be read.
pub fn process_cpu_s(pid: i32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (u, s) = (crate::clock::stat_field(&stat, 14)?, crate::clock::stat_field(&stat, 15)?);
    Some((u + s) as f64 / crate::clock::ticks_per_s()?)
}

/// [`process_cpu_s`] summed over `pids`; `None` unless every one can be read
/// (a process that ended between two readings would make the difference wrong).
pub fn processes_cpu_s(pids: &[i32]) -> Option<f64> {
    pids.iter().map(|&p| process_cpu_s(p)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_and_port_of_endpoints() {
        assert_eq!(host_port("http://127.0.0.1:9000"), ("127.0.0.1".into(), Some(9000)));
        assert_eq!(host_port("https://s3.example.com/"), ("s3.example.com".into(), Some(443)));
        assert_eq!(host_port("http://[::1]:9556/x"), ("::1".into(), Some(9556)));
        assert_eq!(host_port("http://user:pw@localhost:81"), ("localhost".into(), Some(81)));
        assert!(is_loopback("127.0.0.2") && is_loopback("::1") && is_loopback("LOCALHOST") && is_loopback("::ffff:127.0.0.1"));
        assert!(is_loopback_endpoint("http://[::1]:9000") && is_loopback_endpoint("https://LOCALHOST:9000"));
        assert!(resolves_here("0.0.0.0", 80) && resolves_here("127.0.0.1", 80) && !resolves_here("192.0.2.77", 80));
        assert!(!is_loopback("10.0.0.1") && !is_loopback("minio.local"));
    }

    #[test]
    fn listening_inodes_reads_only_listeners_on_the_port() {
        let t = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
                 0: 0100007F:2328 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0 100 0 0 10 0\n\
                 1: 0100007F:2328 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 4343 1 0 20 4 30 10 -1\n\
                 2: 00000000:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4444 1 0 100 0 0 10 0\n";
        assert_eq!(listening_inodes(t, 9000), vec![4242]);
        assert_eq!(listening_inodes(t, 80), vec![4444]);
        assert!(listening_inodes(t, 443).is_empty());
    }

    #[test]
    fn finds_this_process_listening_and_its_cpu() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let found = listener(port).expect("this process listens on the port");
        assert_eq!(found.pid, std::process::id() as i32);
        let d = describe(&format!("http://127.0.0.1:{port}"));
        assert_eq!(d["loopback"], true);
        assert_eq!(d["local_process"]["pid"], std::process::id());
        assert_eq!(describe("http://10.1.2.3:9000")["local_process"], serde_json::Value::Null);
        assert!(process_cpu_s(std::process::id() as i32).is_some_and(|c| c > 0.0));
    }

    #[test]
    fn finds_every_process_holding_the_listener() {
        use std::os::fd::AsRawFd;
        // A child that inherits the listening socket, as nginx's workers do.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        // SAFETY: clears FD_CLOEXEC on a descriptor this test owns.
        assert_eq!(unsafe { libc::fcntl(l.as_raw_fd(), libc::F_SETFD, 0) }, 0);
        let mut child = std::process::Command::new("sleep").arg("30").spawn().expect("sleep runs");
        let me = std::process::id() as i32;
        let found = listener(port).expect("both processes listen on the port");
        let _ = child.kill();
        let _ = child.wait();
        // Contains, not equals: a process another test spawns meanwhile inherits the socket too.
        assert!(found.pids.contains(&me) && found.pids.contains(&(child.id() as i32)), "{found:?}");
        assert!(found.pids.is_sorted() && found.pid == found.pids[0]);
        assert!(processes_cpu_s(&[me]).is_some_and(|c| c > 0.0));
        assert_eq!(processes_cpu_s(&[me, i32::MAX]), None);
    }
}
