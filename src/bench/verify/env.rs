//! verify's step 1: the host's prerequisites for the library generation
//! loaded (a GPU; libs3rdma: [`super::verbs`]; cuObject: nvidia_peermem, RDMA
//! devices, cufile.json, libcufile), and the trap most likely behind a failed
//! probe given what it found (for cuObject, the original Python suite's table
//! of traps).

use std::path::Path;

use super::{Status, Step, Steps, verbs};
use crate::mem;
use crate::store::rdma::RdmaEngine;
use crate::store::rdma::ffi::Generation;

/// `rdma_dev_addr_list` of a cufile.json (comments allowed, as NVIDIA ships it).
/// `Ok(None)` when the key is absent.
pub fn cufile_rdma_addrs(text: &str) -> std::result::Result<Option<Vec<String>>, String> {
    let v: serde_json::Value = serde_json::from_reader(json_comments::StripComments::new(text.as_bytes())).map_err(|e| format!("not valid JSON: {e}"))?;
    let list = v.pointer("/properties/rdma_dev_addr_list").or_else(|| v.get("rdma_dev_addr_list"));
    Ok(list.and_then(|l| l.as_array()).map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect()))
}

/// Step 1's first line: a usable GPU (true) or host-memory mode (false).
pub(super) fn check_gpu(s: &mut Steps) -> bool {
    match mem::cuda_probe() {
        Ok(info) => {
            let names: Vec<String> = info.devices.iter().map(|(n, m)| format!("{n} ({:.0} GB)", *m as f64 / 1e9)).collect();
            s.add(1, Status::Pass, format!("CUDA driver {}.{}, GPUs: {}", info.driver_version / 1000, info.driver_version % 1000 / 10, names.join(", ")), None);
            true
        }
        Err(e) => {
            s.add(
                1,
                Status::Warn,
                format!("no usable GPU: {e}: host-memory probes only"),
                Some("install the NVIDIA driver to probe GPU-Direct into device memory".into()),
            );
            false
        }
    }
}

/// Step 1's engine lines: the checks of the library generation loaded
/// (`engine`: `None` off the rdma backend, where RDMA devices are listed for
/// information only).
pub(super) fn check_engine(s: &mut Steps, engine: Option<&RdmaEngine>, ib_root: &Path, gpu: bool) {
    let Some(e) = engine else {
        let devs = verbs::devices(ib_root);
        let names: Vec<&str> = devs.iter().map(|d| d.name.as_str()).collect();
        let text = if names.is_empty() { format!("no RDMA devices under {}", ib_root.display()) } else { format!("RDMA devices: {}", names.join(", ")) };
        s.add(1, Status::Skip, format!("{text} (needed only for the rdma backend)"), None);
        return;
    };
    let version = e.version.as_deref().map_or(String::new(), |v| format!(" {v}"));
    match e.generation {
        // A stand-in has no verbs underneath: the host's RDMA checks say nothing about it.
        Generation::Libs3rdma if e.test_double => s.add(
            1,
            Status::Warn,
            format!("{}: a stand-in RDMA engine{version}: host memory only, no verbs, no device; a test server moves its bytes: nothing it carries is an RDMA figure", e.library),
            Some("use the libs3rdma minio-cpp vendors (scripts/build-libminiocpp.sh puts it beside libminiocpp.so) on a host with an RDMA NIC".into()),
        ),
        Generation::Libs3rdma => {
            s.add(
                1,
                Status::Pass,
                format!("{}: libs3rdma{version} generation (RDMA for any memory ibv_reg_mr accepts: host, pinned, GPU device memory)", e.library),
                None,
            );
            verbs::check_libs3rdma(s, ib_root, gpu);
        }
        Generation::Cuobject => {
            s.add(1, Status::Pass, format!("{}: cuObject generation (GPU-Direct into device memory only; host memory goes over HTTP)", e.library), None);
            check_cuobject(s, ib_root);
        }
        Generation::Unknown => s.add(
            1,
            Status::Warn,
            format!("{}: neither libs3rdma nor cuObject is linked (a test double, or a build this tool does not know): engine checks skipped", e.library),
            Some("use a libminiocpp built from minio-cpp v0.6.0 or later with -DMINIO_CPP_ENABLE_RDMA=ON (scripts/build-libminiocpp.sh)".into()),
        ),
    }
}

/// The cuObject generation's prerequisites: nvidia_peermem, RDMA devices,
/// cufile.json's `rdma_dev_addr_list`, a libcufile of 1.18 or later.
fn check_cuobject(s: &mut Steps, ib_root: &Path) {
    let peermem = std::fs::read_to_string("/proc/modules").is_ok_and(|m| m.lines().any(|l| l.starts_with("nvidia_peermem ")));
    if peermem {
        s.add(1, Status::Pass, "nvidia_peermem is loaded", None);
    } else {
        s.add(1, Status::Warn, "nvidia_peermem is not loaded", Some("modprobe nvidia_peermem".into()));
    }
    let devs = verbs::devices(ib_root);
    if devs.is_empty() {
        s.add(
            1,
            Status::Warn,
            format!("no RDMA devices under {}", ib_root.display()),
            Some("install the NIC driver (MLNX_OFED / rdma-core) and check `ibv_devinfo` shows a port in PORT_ACTIVE".into()),
        );
    } else {
        let names: Vec<&str> = devs.iter().map(|d| d.name.as_str()).collect();
        s.add(1, Status::Pass, format!("RDMA devices: {}", names.join(", ")), None);
    }
    let cufile = std::env::var("CUFILE_ENV_PATH_JSON").unwrap_or_else(|_| "/etc/cufile.json".into());
    match std::fs::read_to_string(&cufile).map_err(|e| e.to_string()).and_then(|t| cufile_rdma_addrs(&t)) {
        Ok(Some(list)) if !list.is_empty() => s.add(1, Status::Pass, format!("{cufile}: rdma_dev_addr_list = {list:?}"), None),
        Ok(_) => s.add(
            1,
            Status::Warn,
            format!("{cufile}: rdma_dev_addr_list is empty or absent"),
            Some("list your RDMA NIC addresses there: with an empty list buffer registration fails and the SDK falls back to TCP silently".into()),
        ),
        Err(e) => s.add(
            1,
            Status::Warn,
            format!("{cufile}: {e}"),
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
            "libcufile.so.0 not found on the library path",
            Some("install the CUDA toolkit's cuFile (GDS) package, version 1.18 or newer".into()),
        ),
    }
}

/// The most likely trap given what step 1 found and the generation loaded:
/// the original suite's table of traps for cuObject, the engine's needs for libs3rdma.
pub(super) fn likely_trap(steps: &[Step], gpu: bool, generation: Option<Generation>) -> String {
    let warned = |needle: &str| steps.iter().any(|s| s.step == 1 && s.status == Status::Warn && s.text.contains(needle));
    match generation {
        Some(Generation::Libs3rdma) => {
            if warned("cannot load") {
                "libs3rdma cannot load the verbs libraries (rdma-core, libnuma), so RDMA stays off and every transfer goes over HTTP".into()
            } else if warned("DC-capable") || warned("no RDMA devices") {
                "no DC-capable RDMA device (mlx5, ConnectX-4 or later) with an ACTIVE port: libs3rdma refuses SoftRoCE and non-DC NICs".into()
            } else if warned("S3RDMA_DEVICE") {
                "S3RDMA_DEVICE names a device or address this host does not have".into()
            } else if gpu && warned("registrable") {
                "GPU memory cannot be registered (no nvidia_peermem, no dma-buf): GPU transfers fall back to HTTP".into()
            } else {
                "the server declined RDMA (it answers x-amz-rdma-reply: 501 and the library falls back to HTTP): check that the server is an AIStor RDMA build with RDMA enabled on a reachable NIC".into()
            }
        }
        _ if !gpu => "with the cuObject generation GPU-Direct RDMA engages only when the source/destination is CUDA device memory; host memory, even pinned, falls back to TCP".into(),
        _ if warned("rdma_dev_addr_list") => "cufile.json has no rdma_dev_addr_list: buffer registration fails and the SDK falls back silently".into(),
        _ if warned("libcufile") => "an older libcufile (PyTorch's 1.15) shadows the one cuObject needs (>= 1.18): LD_PRELOAD the newer one".into(),
        _ if warned("nvidia_peermem") => "nvidia_peermem is not loaded, so the NIC cannot reach GPU memory".into(),
        _ => "check the server log for 'unexpected suffix on client RDMA token' (a client library older than the 2026-08-07 AIStor release)".into(),
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
        let cuobject = Some(Generation::Cuobject);
        assert!(likely_trap(&[], false, cuobject).contains("device memory"));
        assert!(likely_trap(&[warn("/etc/cufile.json: rdma_dev_addr_list is empty")], true, cuobject).contains("rdma_dev_addr_list"));
        assert!(likely_trap(&[warn("libcufile loads first from /x/torch/lib")], true, cuobject).contains("LD_PRELOAD"));
        assert!(likely_trap(&[], true, cuobject).contains("RDMA token"));
        // libs3rdma: host memory is no trap; the engine's needs are.
        let s3 = Some(Generation::Libs3rdma);
        assert!(likely_trap(&[], false, s3).contains("x-amz-rdma-reply: 501"));
        assert!(likely_trap(&[warn("libs3rdma cannot load libibverbs.so.1")], false, s3).contains("verbs libraries"));
        assert!(likely_trap(&[warn("no DC-capable RDMA device with an ACTIVE port: rxe0")], true, s3).contains("SoftRoCE"));
        assert!(likely_trap(&[warn("S3RDMA_DEVICE=mlx5_9 (the rails): 'mlx5_9' names no RDMA device")], true, s3).contains("S3RDMA_DEVICE"));
    }
}
