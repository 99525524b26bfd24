//! verify's step 1: the host's GPU-Direct prerequisites (GPU, nvidia_peermem,
//! RDMA devices, cufile.json, libcufile), and the trap most likely behind a
//! failed probe given what it found (the seeds' table of traps).

use std::path::Path;

use super::{Status, Step, Steps};
use crate::cli::Backend;
use crate::mem;

/// `rdma_dev_addr_list` of a cufile.json (comments allowed, as NVIDIA ships it).
/// `Ok(None)` when the key is absent.
pub fn cufile_rdma_addrs(text: &str) -> std::result::Result<Option<Vec<String>>, String> {
    let v: serde_json::Value = serde_json::from_reader(json_comments::StripComments::new(text.as_bytes())).map_err(|e| format!("not valid JSON: {e}"))?;
    let list = v.pointer("/properties/rdma_dev_addr_list").or_else(|| v.get("rdma_dev_addr_list"));
    Ok(list.and_then(|l| l.as_array()).map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect()))
}

pub(super) fn check_environment(s: &mut Steps, backend: Backend, ib_root: &Path) -> bool {
    let not_rdma = backend == Backend::Http || backend == Backend::Local;
    let rdma_note = if not_rdma { " (needed only for GPU-Direct RDMA)" } else { "" };
    let gpu = match mem::cuda_probe() {
        Ok(info) => {
            let names: Vec<String> = info.devices.iter().map(|(n, m)| format!("{n} ({:.0} GB)", *m as f64 / 1e9)).collect();
            s.add(1, Status::Pass, format!("CUDA driver {}.{}, GPUs: {}", info.driver_version / 1000, info.driver_version % 1000 / 10, names.join(", ")), None);
            true
        }
        Err(e) => {
            s.add(
                1,
                Status::Warn,
                format!("no usable GPU: {e}: host-memory mode only"),
                Some("install the NVIDIA driver; GPU-Direct RDMA engages only when the destination is CUDA device memory".into()),
            );
            false
        }
    };
    let peermem = std::fs::read_to_string("/proc/modules").is_ok_and(|m| m.lines().any(|l| l.starts_with("nvidia_peermem ")));
    if peermem {
        s.add(1, Status::Pass, "nvidia_peermem is loaded", None);
    } else {
        s.add(1, Status::Warn, format!("nvidia_peermem is not loaded{rdma_note}"), Some("modprobe nvidia_peermem".into()));
    }
    let devs: Vec<String> =
        std::fs::read_dir(ib_root).map(|rd| rd.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect()).unwrap_or_default();
    if devs.is_empty() {
        s.add(
            1,
            Status::Warn,
            format!("no RDMA devices under {}{rdma_note}", ib_root.display()),
            Some("install the NIC driver (MLNX_OFED / rdma-core) and check `ibv_devinfo` shows a port in PORT_ACTIVE".into()),
        );
    } else {
        s.add(1, Status::Pass, format!("RDMA devices: {}", devs.join(", ")), None);
    }
    let cufile = std::env::var("CUFILE_ENV_PATH_JSON").unwrap_or_else(|_| "/etc/cufile.json".into());
    match std::fs::read_to_string(&cufile).map_err(|e| e.to_string()).and_then(|t| cufile_rdma_addrs(&t)) {
        Ok(Some(list)) if !list.is_empty() => s.add(1, Status::Pass, format!("{cufile}: rdma_dev_addr_list = {list:?}"), None),
        Ok(_) => s.add(
            1,
            Status::Warn,
            format!("{cufile}: rdma_dev_addr_list is empty or absent{rdma_note}"),
            Some("list your RDMA NIC addresses there: with an empty list buffer registration fails and the SDK falls back to TCP silently".into()),
        ),
        Err(e) => s.add(
            1,
            Status::Warn,
            format!("{cufile}: {e}{rdma_note}"),
            Some("create it (or point CUFILE_ENV_PATH_JSON at one) with properties.rdma_dev_addr_list set to your RDMA NIC addresses".into()),
        ),
    }
    // SAFETY: loading libcufile runs its initialisers only; nothing is called.
    match unsafe { libloading::Library::new("libcufile.so.0") } {
        Ok(lib) => {
            let path = crate::store::rdma::ffi::loaded_path("libcufile").unwrap_or_else(|| "libcufile.so.0".into());
            if path.contains("site-packages") || path.contains("torch") {
                s.add(
                    1,
                    Status::Warn,
                    format!("libcufile loads first from {path}"),
                    Some("PyTorch bundles cuFile 1.15 and cuObject needs >= 1.18 under the same SONAME: LD_PRELOAD the newer libcufile".into()),
                );
            } else {
                s.add(1, Status::Pass, format!("libcufile loads first from {path}"), None);
            }
            drop(lib);
        }
        Err(_) => s.add(
            1,
            Status::Warn,
            format!("libcufile.so.0 not found on the library path{rdma_note}"),
            Some("install the CUDA toolkit's cuFile (GDS) package, version 1.18 or newer".into()),
        ),
    }
    gpu
}

/// The most likely trap from the seeds' table, given what step 1 found.
pub(super) fn likely_trap(steps: &[Step], gpu: bool) -> String {
    let warned = |needle: &str| steps.iter().any(|s| s.step == 1 && s.status != Status::Pass && s.text.contains(needle));
    if !gpu {
        "GPU-Direct RDMA engages only when the source/destination is CUDA device memory; host memory, even pinned, falls back to TCP".into()
    } else if warned("rdma_dev_addr_list") {
        "cufile.json has no rdma_dev_addr_list: buffer registration fails and the SDK falls back silently".into()
    } else if warned("libcufile") {
        "an older libcufile (PyTorch's 1.15) shadows the one cuObject needs (>= 1.18): LD_PRELOAD the newer one".into()
    } else if warned("nvidia_peermem") {
        "nvidia_peermem is not loaded, so the NIC cannot reach GPU memory".into()
    } else {
        "check the server log for 'unexpected suffix on client RDMA token' (a client library older than the 2026-08-07 AIStor release)".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cufile_json_with_comments() {
        let t = r#"{
            // NVIDIA ships comments in this file
            "properties": { "rdma_dev_addr_list": [ "192.168.1.10", "192.168.2.10" ] /* two rails */ }
        }"#;
        assert_eq!(cufile_rdma_addrs(t).unwrap(), Some(vec!["192.168.1.10".to_string(), "192.168.2.10".to_string()]));
        assert_eq!(cufile_rdma_addrs(r#"{"properties": {"rdma_dev_addr_list": []}}"#).unwrap(), Some(vec![]));
        assert_eq!(cufile_rdma_addrs(r#"{"properties": {}}"#).unwrap(), None);
        assert!(cufile_rdma_addrs("{").is_err());
    }

    #[test]
    fn trap_follows_the_evidence() {
        let warn = |t: &str| Step { step: 1, status: Status::Warn, text: t.into(), fix: None };
        assert!(likely_trap(&[], false).contains("device memory"));
        assert!(likely_trap(&[warn("/etc/cufile.json: rdma_dev_addr_list is empty")], true).contains("rdma_dev_addr_list"));
        assert!(likely_trap(&[warn("libcufile loads first from /x/torch/lib")], true).contains("LD_PRELOAD"));
        assert!(likely_trap(&[], true).contains("RDMA token"));
    }
}
