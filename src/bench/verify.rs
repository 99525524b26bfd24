//! `s3rdma verify`: the bring-up check a platform engineer runs first.
//!
//! Numbered steps, each PASS / WARN / FAIL / SKIP with the fix for anything
//! but PASS, then one RESULT line. For the rdma backend the RESULT is PASS
//! only when the server's counters account the probe's PUT and GET as RDMA and
//! the bytes read back match (the original suite's `11-verify-rdma.py` shape,
//! seeds/000); for http and local it checks the round trip and the metrics,
//! and RDMA is not applicable.
//!
//! Exit codes: 0 PASS; 1 a step failed; 3 RDMA not proven; 4 data mismatch.

use std::path::Path;

use rand::{RngCore, SeedableRng, rngs::SmallRng};
use serde::Serialize;
use serde_json::json;

use crate::cli::{Backend, VerifyArgs};
use crate::error::{Error, Result};
use crate::mem::{self, Buffer};
use crate::record::RunRecord;
use crate::store::{self, ObjectStore};
use crate::witness::{Payload, Verdict, Witness, WitnessReport};

/// Outcome of one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    /// The check passed.
    Pass,
    /// Worth a look; the run goes on.
    Warn,
    /// The check failed: the result cannot pass.
    Fail,
    /// Does not apply to this backend.
    Skip,
}

/// One printed line.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    /// Step number (1-6).
    pub step: u32,
    /// PASS, WARN, FAIL or SKIP.
    pub status: Status,
    /// What was checked and what was found.
    pub text: String,
    /// What to do, for anything but PASS.
    pub fix: Option<String>,
}

struct Steps {
    steps: Vec<Step>,
    quiet: bool,
}

impl Steps {
    fn add(&mut self, step: u32, status: Status, text: impl Into<String>, fix: Option<String>) {
        let s = Step { step, status, text: text.into(), fix };
        if !self.quiet {
            let tag = match s.status {
                Status::Pass => "PASS",
                Status::Warn => "WARN",
                Status::Fail => "FAIL",
                Status::Skip => "SKIP",
            };
            println!("[{}] {tag} {}", s.step, s.text);
            if let Some(f) = &s.fix {
                println!("        fix: {f}");
            }
        }
        self.steps.push(s);
    }
    fn failed(&self) -> bool {
        self.steps.iter().any(|s| s.status == Status::Fail)
    }
}

/// `rdma_dev_addr_list` of a cufile.json (comments allowed, as NVIDIA ships it).
/// `Ok(None)` when the key is absent.
pub fn cufile_rdma_addrs(text: &str) -> std::result::Result<Option<Vec<String>>, String> {
    let v: serde_json::Value = serde_json::from_reader(json_comments::StripComments::new(text.as_bytes())).map_err(|e| format!("not valid JSON: {e}"))?;
    let list = v.pointer("/properties/rdma_dev_addr_list").or_else(|| v.get("rdma_dev_addr_list"));
    Ok(list.and_then(|l| l.as_array()).map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect()))
}

fn check_environment(s: &mut Steps, backend: Backend, ib_root: &Path) -> bool {
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

fn delta_text(bytes: Option<f64>, ops: Option<f64>) -> String {
    match (bytes, ops) {
        (Some(b), Some(o)) => format!("{b:.0} B in {o:.0} ops"),
        (Some(b), None) => format!("{b:.0} B"),
        _ => "none (no RDMA counter at the metrics targets)".into(),
    }
}

/// The most likely trap from the seeds' table, given what step 1 found.
fn likely_trap(steps: &[Step], gpu: bool) -> String {
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

/// Run `s3rdma verify`.
pub async fn run(args: VerifyArgs) -> Result<()> {
    crate::record::check_results_dir(&args.output.results_dir)?;
    let started = chrono::Utc::now();
    let backend = args.store.backend;
    let quiet = args.output.json;
    let mut s = Steps { steps: Vec::new(), quiet };
    if !quiet {
        println!("s3rdma verify: backend {}, bucket '{}'", backend.name(), args.store.bucket);
    }
    let gpu = check_environment(&mut s, backend, Path::new("/sys/class/infiniband"));

    let witness = Witness::new(&args.witness.config(&args.store))?;
    let mut store_args = args.store.config();
    store_args.rdma_threads = store_args.rdma_threads.or(Some(1));
    let store = match store::open(&store_args) {
        // Counted: client-side HTTP bytes come from the store layer, as in every bench.
        Ok(st) => crate::store::counted::Counted::new(std::sync::Arc::from(st)),
        Err(e) => {
            // The rdma library failed to load: that is step 1's finding (exit 1), not a usage slip.
            if !quiet {
                println!("[1] FAIL {e}");
                println!("        fix: point --rdma-lib at a libminiocpp built with -DMINIO_CPP_ENABLE_RDMA=ON whose dependencies resolve (`ldd` it)");
                println!("RESULT: FAIL - {}", e.to_string().lines().next().unwrap_or_default());
            }
            return Err(Error::Runtime(e.to_string()));
        }
    };
    for w in store.preflight(args.size) {
        s.add(1, Status::Warn, w, Some("use a libminiocpp built with RDMA on a host with an RDMA NIC".into()));
    }
    store::check_key(&args.key).map_err(|e| Error::Usage(format!("invalid --key: {e}")))?;
    let mut put_report: Option<WitnessReport> = None;
    let mut get_report: Option<WitnessReport> = None;
    let mut matched: Option<bool> = None;

    let reached = match store.ensure_bucket(args.prepare).await {
        Ok(()) => {
            s.add(2, Status::Pass, format!("bucket '{}' at {} is reachable", store.bucket(), store.location()), None);
            true
        }
        Err(e) => {
            let fix =
                if backend == Backend::Local { "fix --root or --bucket, or pass --prepare" } else { "fix the endpoint, credentials or bucket named above" };
            s.add(2, Status::Fail, Error::Store(e).to_string(), Some(fix.into()));
            false
        }
    };

    if reached {
        // Step 3: one scrape, judged on an empty window, tells whether the counters are readable.
        if backend == Backend::Local {
            s.add(3, Status::Skip, "metrics: local backend has no server", None);
        } else {
            let probe = witness.end(witness.begin().await, Payload::default()).await;
            let readable = !probe.reason.contains("metrics target") && !probe.reason.contains("no minio_api");
            let rdma_series = !probe.counters.rdma_series.is_empty() || probe.counters.rdma_read_bytes.is_some();
            match (readable, rdma_series) {
                (true, true) => s.add(3, Status::Pass, "metrics reachable, RDMA counters present", None),
                (true, false) => s.add(
                    3,
                    Status::Warn,
                    "metrics reachable, no minio_api_rdma_* counters yet",
                    Some("an AIStor RDMA build creates them on first RDMA transfer; plain MinIO has none".into()),
                ),
                (false, _) => s.add(
                    3,
                    Status::Warn,
                    format!("metrics unreadable: {}", probe.reason),
                    Some("pass --metrics-token or --metrics-url, or set MINIO_PROMETHEUS_AUTH_TYPE=public on the server".into()),
                ),
            }
        }

        // Step 4: PUT.
        let mem_kind = "host memory"; // device memory joins with --dest device (GPU-memory issue)
        let mut src = Buffer::host(args.size as usize);
        SmallRng::from_os_rng().fill_bytes(src.as_host_mut().expect("host buffer"));
        let w = witness.begin().await;
        let before = store.stats();
        match store.put_from(&args.key, &src).await {
            Ok(t) => {
                let http = store.stats().since(&before).http_bytes();
                let r = witness
                    .end(w, Payload { read_bytes: 0, write_bytes: t.bytes, client_http_bytes: http, requests: store.stats().since(&before).get("requests") })
                    .await;
                let server = if backend == Backend::Local {
                    String::new()
                } else {
                    format!("; server RDMA write delta {}", delta_text(r.counters.rdma_write_bytes, r.counters.rdma_write_ops))
                };
                let text = format!("PUT {} B from {mem_kind}{server}; witness {} ({})", t.bytes, r.verdict.as_str(), r.reason);
                // On an rdma run a PUT the server did not account as RDMA is not a pass.
                if backend == Backend::Rdma && r.verdict != Verdict::RdmaVerified {
                    s.add(4, Status::Warn, text, Some("the PUT completed but RDMA did not carry it: see RESULT".into()));
                } else {
                    s.add(4, Status::Pass, text, None);
                }
                put_report = Some(r);
            }
            Err(e) => s.add(4, Status::Fail, format!("PUT '{}' failed: {e}", args.key), None),
        }

        // Step 5: GET into a fresh buffer and compare.
        if put_report.is_some() {
            let mut dst = Buffer::host(args.size as usize);
            let w = witness.begin().await;
            let before = store.stats();
            match store.get_into(&args.key, None, &mut dst).await {
                Ok(t) => {
                    let http = store.stats().since(&before).http_bytes();
                    let r = witness
                        .end(
                            w,
                            Payload { read_bytes: t.bytes, write_bytes: 0, client_http_bytes: http, requests: store.stats().since(&before).get("requests") },
                        )
                        .await;
                    let ok = t.bytes == args.size && dst.as_host() == src.as_host();
                    matched = Some(ok);
                    let server = if backend == Backend::Local {
                        String::new()
                    } else {
                        format!("; server RDMA read delta {}", delta_text(r.counters.rdma_read_bytes, r.counters.rdma_read_ops))
                    };
                    let text = format!(
                        "GET {} B into a fresh buffer: bytes {}{server}; witness {} ({})",
                        t.bytes,
                        if ok { "match" } else { "DIFFER" },
                        r.verdict.as_str(),
                        r.reason
                    );
                    if ok && backend == Backend::Rdma && r.verdict != Verdict::RdmaVerified {
                        s.add(5, Status::Warn, text, Some("the GET completed but RDMA did not carry it: see RESULT".into()));
                    } else if ok {
                        s.add(5, Status::Pass, text, None);
                    } else {
                        s.add(
                            5,
                            Status::Fail,
                            text,
                            Some("the store returned different bytes than were written: check the server and any proxy in between".into()),
                        );
                    }
                    get_report = Some(r);
                }
                Err(e) => s.add(5, Status::Fail, format!("GET '{}' failed: {e}", args.key), None),
            }
            if !args.keep {
                let _ = store.delete(&args.key).await;
            }
        }
    }

    // Step 6: RESULT.
    let rdma_ok = [&put_report, &get_report].iter().all(|r| r.as_ref().is_some_and(|r| r.verdict == Verdict::RdmaVerified));
    let worst = [&put_report, &get_report].iter().filter_map(|r| r.as_ref()).min_by_key(|r| r.verdict).cloned();
    let (verdict, reason) = match &worst {
        Some(r) => (r.verdict, r.reason.clone()),
        None => (Verdict::Unverified, "no transfer happened".to_string()),
    };
    let (pass, result, failure): (bool, String, Option<Error>) = if s.failed() {
        let why = s.steps.iter().find(|x| x.status == Status::Fail).map(|x| x.text.clone()).unwrap_or_default();
        let err = if matched == Some(false) { Error::Mismatch(format!("verify: {why}")) } else { Error::Runtime(format!("verify: {why}")) };
        (false, format!("FAIL - {why}"), Some(err))
    } else if !witness.expects_rdma() && args.witness.require_rdma {
        (false, format!("FAIL - round trip over {} verified, but --require-rdma asks for RDMA, which {} does not carry", backend.name(), backend.name()), None)
    } else if !witness.expects_rdma() {
        (true, format!("PASS - round trip over {} verified; RDMA not applicable", backend.name()), None)
    } else if rdma_ok {
        (true, "PASS - GPU-Direct RDMA is live".into(), None)
    } else {
        let unavailable = s.steps.iter().any(|x| x.text.contains("reports RDMA unavailable"));
        let trap = match &worst {
            Some(r) if r.verdict == Verdict::Unverified => format!("no proof either way: {}", r.reason),
            _ if unavailable => "the library reports RDMA unavailable (miniocpp_rdma_available() = 0): no RDMA NIC, or cuObject not initialised".into(),
            _ => likely_trap(&s.steps, gpu),
        };
        (false, format!("FAIL - verdict {}: most likely: {trap}", verdict.as_str()), None)
    };
    if !quiet {
        println!("RESULT: {result}");
    }
    let record = RunRecord {
        environment: json!({"store": store.describe(), "witness": witness.describe(), "source_memory": "host"}),
        params: json!({"size_bytes": args.size, "key": args.key, "prepare": args.prepare, "keep": args.keep}),
        results: json!({"steps": s.steps, "result": result, "pass": pass, "data_match": matched,
                        "put_witness": put_report, "get_witness": get_report}),
        rdma_witness: json!({"verdict": verdict, "reason": reason, "config": witness.describe()}),
        ..RunRecord::new("verify", backend.name(), started, args.output.tag.clone())
    };
    // On the rdma backend verify exists to prove RDMA: anything else is exit 3, as --require-rdma.
    let require = args.witness.require_rdma || witness.expects_rdma();
    // The steps were printed as they ran.
    super::session::conclude(&record, &args.output, started, || {}, failure, require, verdict, &reason)
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
