//! verify's host checks for the libs3rdma generation of libminiocpp
//! (minio-cpp v0.6.0 and later): what its engine needs, as its header
//! (minio-cpp `vendor/s3rdma/include/s3rdma.h`) states it.
//!
//! - libibverbs, librdmacm and libnuma are resolved at run time (dlopen), so a
//!   library that loads can still find no verbs stack;
//! - a DC-capable HCA (mlx5: ConnectX-4 or later) with an ACTIVE port;
//!   SoftRoCE (rxe) cannot do DC and is refused;
//! - `S3RDMA_DEVICE` (comma-separated device names, `dev:gid` / `dev:port:gid`
//!   pins or IP addresses; `0.0.0.0` / `::` mean every ACTIVE device) picks the
//!   rails, else every ACTIVE port is one; the original Python suite's
//!   `RDMA_NICS` names the same NICs;
//! - GPU device memory is registrable only through nvidia_peermem or dma-buf
//!   (the NVIDIA open kernel module).
//!
//! Devices are read from sysfs (`/sys/class/infiniband/<dev>/device/driver`,
//! `ports/<n>/state`, `ports/<n>/gids/<i>`), rooted where the caller says so
//! tests can lay out a tree of their own.

use std::net::IpAddr;
use std::path::Path;

use super::{Status, Steps};

/// One RDMA device as sysfs shows it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Device {
    /// Its name (`mlx5_0`, `rxe0`).
    pub name: String,
    /// Its kernel driver (`mlx5_core`, `rdma_rxe`), when the link resolves.
    pub driver: Option<String>,
    /// Ports whose state reads ACTIVE.
    pub active_ports: Vec<u32>,
    /// Every non-zero GID of every port, as addresses.
    pub gids: Vec<IpAddr>,
}

impl Device {
    /// mlx5 devices can do DC; SoftRoCE cannot; others are not known to.
    pub(super) fn dc_capable(&self) -> Option<bool> {
        let driver = self.driver.as_deref().unwrap_or("");
        if driver.starts_with("mlx5") || self.name.starts_with("mlx5") {
            Some(true)
        } else if driver.contains("rxe") || self.name.starts_with("rxe") {
            Some(false)
        } else {
            None
        }
    }
}

/// Every device under `root`, sorted by name (empty when there is none).
pub(super) fn devices(root: &Path) -> Vec<Device> {
    let mut out: Vec<Device> =
        std::fs::read_dir(root).map(|rd| rd.flatten().map(|e| device(&e.path(), e.file_name().to_string_lossy().into_owned())).collect()).unwrap_or_default();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

fn device(dir: &Path, name: String) -> Device {
    let driver = std::fs::read_link(dir.join("device/driver")).ok().and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()));
    let mut active_ports = Vec::new();
    let mut gids = Vec::new();
    for port in std::fs::read_dir(dir.join("ports")).into_iter().flatten().flatten() {
        let Ok(n) = port.file_name().to_string_lossy().parse::<u32>() else { continue };
        // "4: ACTIVE"
        if std::fs::read_to_string(port.path().join("state")).is_ok_and(|s| s.contains("ACTIVE")) {
            active_ports.push(n);
        }
        for gid in std::fs::read_dir(port.path().join("gids")).into_iter().flatten().flatten() {
            if let Some(ip) = std::fs::read_to_string(gid.path()).ok().and_then(|t| t.trim().parse::<std::net::Ipv6Addr>().ok())
                && !ip.is_unspecified()
            {
                gids.push(ip.to_ipv4_mapped().map_or(IpAddr::V6(ip), IpAddr::V4));
            }
        }
    }
    active_ports.sort_unstable();
    Device { name, driver, active_ports, gids }
}

/// An `S3RDMA_DEVICE` / `RDMA_NICS` entry against the devices: `Ok(what it
/// names)` or `Err(why it names nothing)`. Forms (s3rdma.h): `mlx5_0`,
/// `mlx5_0:3` (GID index), `mlx5_0:1:3` (port, GID index), an IPv4 or IPv6
/// address, `0.0.0.0` / `::` (every ACTIVE device).
pub(super) fn match_entry(entry: &str, devs: &[Device]) -> Result<String, String> {
    let entry = entry.trim();
    if let Ok(ip) = entry.parse::<IpAddr>() {
        if ip.is_unspecified() {
            return Ok(format!("'{entry}': every device with an ACTIVE port"));
        }
        return devs
            .iter()
            .find(|d| d.gids.contains(&ip))
            .map(|d| format!("'{entry}': a GID of {}", d.name))
            .ok_or_else(|| format!("'{entry}' is no GID address of any RDMA device"));
    }
    let name = entry.split(':').next().unwrap_or(entry);
    devs.iter()
        .find(|d| d.name == name || d.name == entry)
        .map(|d| format!("'{entry}': device {}", d.name))
        .ok_or_else(|| format!("'{entry}' names no RDMA device (have: {})", names(devs)))
}

fn names(devs: &[Device]) -> String {
    if devs.is_empty() { "none".into() } else { devs.iter().map(|d| d.name.as_str()).collect::<Vec<_>>().join(", ") }
}

/// Step 1's libs3rdma lines: verbs libraries, DC-capable ACTIVE devices,
/// `S3RDMA_DEVICE` / `RDMA_NICS`, and, with a GPU, how device memory registers.
pub(super) fn check_libs3rdma(s: &mut Steps, ib_root: &Path, gpu: bool) {
    let missing: Vec<&str> = ["libibverbs.so.1", "librdmacm.so.1", "libnuma.so.1"]
        .into_iter()
        // SAFETY: loading runs the libraries' initialisers only; nothing is called.
        .filter(|l| unsafe { libloading::Library::new(*l) }.is_err())
        .collect();
    if missing.is_empty() {
        s.add(1, Status::Pass, "libibverbs.so.1, librdmacm.so.1 and libnuma.so.1 resolve (libs3rdma loads them at run time)", None);
    } else {
        s.add(
            1,
            Status::Warn,
            format!("libs3rdma cannot load {}: RDMA stays off", missing.join(", ")),
            Some("install rdma-core and libnuma (Debian/Ubuntu: ibverbs-providers librdmacm1 libnuma1; RHEL: rdma-core libnuma)".into()),
        );
    }
    let devs = devices(ib_root);
    let usable: Vec<&Device> = devs.iter().filter(|d| d.dc_capable() == Some(true) && !d.active_ports.is_empty()).collect();
    if !usable.is_empty() {
        let list: Vec<String> = usable.iter().map(|d| format!("{} (ports {:?} ACTIVE)", d.name, d.active_ports)).collect();
        s.add(1, Status::Pass, format!("DC-capable RDMA devices: {}; libs3rdma spreads transfers over each ACTIVE port (a rail)", list.join(", ")), None);
    } else {
        let why = if devs.is_empty() {
            format!("no RDMA devices under {}", ib_root.display())
        } else {
            let seen: Vec<String> = devs
                .iter()
                .map(|d| {
                    let dc = match d.dc_capable() {
                        Some(true) => "DC-capable",
                        Some(false) => "no DC (SoftRoCE is refused)",
                        None => "DC support unknown",
                    };
                    format!("{} ({dc}, {} ACTIVE port(s))", d.name, d.active_ports.len())
                })
                .collect();
            format!("no DC-capable RDMA device with an ACTIVE port: {}", seen.join(", "))
        };
        s.add(
            1,
            Status::Warn,
            why,
            Some(
                "libs3rdma needs an mlx5 HCA (ConnectX-4 or later) with a port in PORT_ACTIVE (`ibv_devinfo`); install the driver (MLNX_OFED / rdma-core)"
                    .into(),
            ),
        );
    }
    for var in ["S3RDMA_DEVICE", "RDMA_NICS"] {
        let Ok(v) = std::env::var(var) else { continue };
        let (found, bad): (Vec<_>, Vec<_>) = v.split(',').filter(|e| !e.trim().is_empty()).map(|e| match_entry(e, &devs)).partition(Result::is_ok);
        let used = if var == "S3RDMA_DEVICE" { "the rails libs3rdma opens" } else { "the original suite's NIC list; libs3rdma reads S3RDMA_DEVICE" };
        if bad.is_empty() && !found.is_empty() {
            let found: Vec<String> = found.into_iter().flatten().collect();
            s.add(1, Status::Pass, format!("{var}={v} ({used}): {}", found.join("; ")), None);
        } else {
            let bad: Vec<String> = bad.into_iter().filter_map(Result::err).collect();
            let why = if bad.is_empty() { "it names nothing".to_string() } else { bad.join("; ") };
            s.add(
                1,
                Status::Warn,
                format!("{var}={v} ({used}): {why}"),
                Some(format!("name devices from `ibv_devices` or their GID addresses, or unset {var}")),
            );
        }
    }
    if gpu {
        let peermem = std::fs::read_to_string("/proc/modules").is_ok_and(|m| m.lines().any(|l| l.starts_with("nvidia_peermem ")));
        let open_module = std::fs::read_to_string("/proc/driver/nvidia/version").is_ok_and(|v| v.contains("Open Kernel Module"));
        if peermem {
            s.add(1, Status::Pass, "GPU memory is registrable: nvidia_peermem is loaded", None);
        } else if open_module {
            s.add(1, Status::Pass, "GPU memory is registrable through dma-buf (NVIDIA open kernel module)", None);
        } else {
            s.add(
                1,
                Status::Warn,
                "GPU memory may not be registrable: nvidia_peermem is not loaded and the NVIDIA driver is not the open kernel module (dma-buf)",
                Some("modprobe nvidia_peermem, or install the open kernel module; host-memory RDMA does not need either".into()),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lay_out(root: &Path, name: &str, driver: &str, state: &str, gid: &str) {
        let d = root.join(name);
        std::fs::create_dir_all(d.join("ports/1/gids")).unwrap();
        let drivers = root.parent().unwrap().join("drivers");
        std::fs::create_dir_all(drivers.join(driver)).unwrap();
        std::fs::create_dir_all(d.join("device")).unwrap();
        std::os::unix::fs::symlink(drivers.join(driver), d.join("device/driver")).unwrap();
        std::fs::write(d.join("ports/1/state"), state).unwrap();
        std::fs::write(d.join("ports/1/gids/0"), "fe80:0000:0000:0000:0e42:a1ff:fe00:0001\n").unwrap();
        std::fs::write(d.join("ports/1/gids/1"), gid).unwrap();
        std::fs::write(d.join("ports/1/gids/2"), "0000:0000:0000:0000:0000:0000:0000:0000\n").unwrap();
    }

    #[test]
    fn devices_ports_and_gids_are_read_from_sysfs() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("ib");
        lay_out(&root, "mlx5_0", "mlx5_core", "4: ACTIVE\n", "0000:0000:0000:0000:0000:ffff:c0a8:010a\n");
        lay_out(&root, "rxe0", "rdma_rxe", "4: ACTIVE\n", "0000:0000:0000:0000:0000:ffff:0a00:0005\n");
        lay_out(&root, "mlx5_1", "mlx5_core", "1: DOWN\n", "2001:0db8:0000:0000:0000:0000:0000:0001\n");
        // A link to a driver directory that is gone still names the driver.
        std::fs::remove_dir_all(t.path().join("drivers")).unwrap();
        let devs = devices(&root);
        assert_eq!(devs.iter().map(|d| d.name.as_str()).collect::<Vec<_>>(), ["mlx5_0", "mlx5_1", "rxe0"]);
        assert_eq!(devs[0].driver.as_deref(), Some("mlx5_core"));
        assert_eq!(devs[0].active_ports, [1]);
        assert!(devs[1].active_ports.is_empty(), "a DOWN port is no rail");
        assert_eq!(devs[0].dc_capable(), Some(true));
        assert_eq!(devs[2].dc_capable(), Some(false), "SoftRoCE cannot do DC");
        let v4: IpAddr = "192.168.1.10".parse().unwrap();
        assert!(devs[0].gids.contains(&v4), "an IPv4-mapped GID reads as its IPv4 address: {:?}", devs[0].gids);
        assert_eq!(devs[0].gids.len(), 2, "the zero GID is skipped");
    }

    #[test]
    fn s3rdma_device_entries_match_names_pins_and_addresses() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("ib");
        lay_out(&root, "mlx5_0", "mlx5_core", "4: ACTIVE\n", "0000:0000:0000:0000:0000:ffff:c0a8:010a\n");
        lay_out(&root, "mlx5_1", "mlx5_core", "4: ACTIVE\n", "2001:0db8:0000:0000:0000:0000:0000:0001\n");
        let devs = devices(&root);
        assert_eq!(match_entry("mlx5_0", &devs).unwrap(), "'mlx5_0': device mlx5_0");
        assert_eq!(match_entry("mlx5_1:1:3", &devs).unwrap(), "'mlx5_1:1:3': device mlx5_1");
        assert_eq!(match_entry("192.168.1.10", &devs).unwrap(), "'192.168.1.10': a GID of mlx5_0");
        assert_eq!(match_entry(" 2001:db8::1", &devs).unwrap(), "'2001:db8::1': a GID of mlx5_1");
        assert!(match_entry("0.0.0.0", &devs).unwrap().contains("every device"));
        assert_eq!(match_entry("mlx5_9", &devs).unwrap_err(), "'mlx5_9' names no RDMA device (have: mlx5_0, mlx5_1)");
        assert_eq!(match_entry("10.0.0.1", &devs).unwrap_err(), "'10.0.0.1' is no GID address of any RDMA device");
        assert!(match_entry("mlx5_0", &[]).unwrap_err().contains("have: none"));
    }
}
