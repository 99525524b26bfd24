//! `s3rdma verify`: the bring-up check a platform engineer runs first.
//!
//! Numbered steps, each PASS / WARN / FAIL / SKIP with the fix for anything
//! but PASS, then a table (size, memory, request, verdict, RDMA share) and one
//! RESULT line (the original suite's `11-verify-rdma.py` shape).
//! Step 1 checks what the library generation loaded needs (libs3rdma: verbs
//! libraries, a DC-capable device with an ACTIVE port, `S3RDMA_DEVICE`;
//! cuObject: cufile.json, libcufile). Per `--sizes` entry: a GPU-Direct probe
//! (PUT from and GET into GPU memory; a ranged GET where the library has
//! one) when a GPU is usable, and a host-memory probe (PUT, whole-object GET).
//! Host probes decide the RESULT like device probes where the library's RDMA
//! carries host memory (libs3rdma); with cuObject they are informational
//! (device memory only, the original suite's finding). On the rdma backend
//! the RESULT is a PASS only when the server's counters account every
//! deciding probe as RDMA on both sides and the bytes match, and it names the
//! memory kinds and sizes proven; it never says GPU-Direct without a device
//! probe that verified. For http and local it checks the round trips and the
//! metrics; RDMA is not applicable.
//!
//! Exit codes: 0 PASS; 1 a step failed; 3 RDMA not proven; 4 data mismatch.

mod env;
mod probe;
mod verbs;

use std::path::Path;

use std::sync::Arc;

use serde::Serialize;
use serde_json::{Value, json};

use crate::bench::driver::Bench;
use crate::bench::session::{Outcome, RunPlan, Session, SessionSpec};
use crate::error::{Error, Result};
use crate::flag::{BUCKET, DEVICE, KEY, METRICS_TOKEN, METRICS_URL, PREPARE, RDMA_LIB, REQUIRE_RDMA, ROOT, SIZES};
use crate::record::WindowId;
use crate::store;
use crate::units::size_name;
use crate::witness::{Payload, Verdict, Witness, WitnessReport};
use env::{check_engine, check_gpu, likely_trap};
use probe::{Memory, ProbeCtx, ProbeOp};

pub use env::cufile_rdma_addrs;
pub use probe::group;

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

#[derive(Debug)]
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

/// Everything `s3rdma verify` runs with (the CLI's `cli/plan.rs` makes it of the flags).
#[derive(Debug, Clone)]
pub struct VerifyPlan {
    /// Store, witness, output (memory: host; the probes open the GPU themselves).
    pub run: RunPlan,
    /// Probe sizes in bytes: one witnessed PUT and GET per size and memory kind.
    pub sizes: Vec<u64>,
    /// GPU ordinal for the GPU-Direct probe.
    pub device: usize,
    /// Create the bucket when it does not exist.
    pub prepare: bool,
    /// Key of the probe object.
    pub key: String,
    /// Leave the probe object in the bucket.
    pub keep: bool,
}

/// `s3rdma verify` as a [`Bench`]: the plan, the steps so far and the GPU
/// step 1 opened (before the session, so that a GPU the library cannot
/// use is a finding, not an early exit).
#[derive(Debug)]
pub struct Verify {
    plan: VerifyPlan,
    steps: Steps,
    gpu: Option<std::sync::Arc<crate::mem::Gpu>>,
    /// Why GPU-Direct into device memory was not checked, when no GPU opened.
    no_gpu_why: String,
}

impl Verify {
    /// The bench of `plan`.
    pub fn new(plan: VerifyPlan) -> Self {
        let quiet = plan.run.output.json;
        Verify { plan, steps: Steps { steps: Vec::new(), quiet }, gpu: None, no_gpu_why: String::new() }
    }
}

impl Bench for Verify {
    type Params = Value;
    type Results = Value;

    /// Errors: an unwritable results directory, a probe the host cannot hold.
    async fn setup(&mut self) -> Result<Option<SessionSpec>> {
        let plan = &self.plan;
        crate::record::check_results_dir(&plan.run.output.results_dir)?;
        let sizes: Vec<String> = plan.sizes.iter().map(|&b| size_name(b)).collect();
        // Each probe holds the bytes, a source and a destination in host memory at once.
        let largest = plan.sizes.iter().copied().max().unwrap_or(0);
        crate::mem::check_host_memory(&format!("a {} probe", size_name(largest)), largest.saturating_mul(3), &format!("lower the largest {SIZES} entry"))?;
        if !self.steps.quiet {
            println!("s3rdma verify: backend {}, bucket '{}', sizes {}", plan.run.store.backend.name(), plan.run.store.bucket, sizes.join(", "));
        }
        (self.gpu, self.no_gpu_why) = open_gpu(&mut self.steps, plan.device);
        // Through the session like every bench (store counted, witness, record),
        // except that a store the library cannot open is step 1's finding and an
        // unreachable bucket step 2's, not an early exit.
        Ok(Some(SessionSpec { ensure_bucket: false, require_rdma: false, ..plan.run.spec("verify") }))
    }

    /// A store the library cannot open is step 1's finding.
    fn start_failed(&self, e: Error) -> Error {
        match e {
            Error::Store(e) => unopened_store(e, self.steps.quiet),
            e => e,
        }
    }

    async fn measure(&mut self, session: &Arc<Session>) -> Result<Outcome<Value, Value>> {
        let (plan, gpu, no_gpu_why) = (&self.plan, &self.gpu, &self.no_gpu_why);
        let s = &mut self.steps;
        let quiet = s.quiet;
        let sizes: Vec<String> = plan.sizes.iter().map(|&b| size_name(b)).collect();
        let (store, witness) = (session.store.as_ref(), &session.witness);
        let transport = store.capabilities().name;
        let engine = store.rdma_engine();
        // libs3rdma registers host memory too: its host probes are judged like the
        // device probes. The cuObject generation carries device memory only.
        let host_rdma = engine.as_ref().is_some_and(|e| e.generation.carries_host_memory() == Some(true));
        let Probed { ops, registration, config_failure } = probe_all(s, plan, gpu.as_ref(), session, engine.as_ref(), host_rdma).await?;
        let wire_rules = wire_rule_steps(s, store);

        // Step 6: RESULT, decided by every probe RDMA can carry: device and host
        // with libs3rdma, device alone where a GPU is usable with cuObject.
        let decides = |o: &ProbeOp| gpu.is_none() || o.memory == Memory::Device || host_rdma;
        let decisive: Vec<&ProbeOp> = ops.iter().filter(|o| decides(o)).collect();
        let worst = decisive.iter().min_by_key(|o| o.witness.verdict).copied();
        let (verdict, reason) = match worst {
            Some(o) => (o.witness.verdict, format!("{}: {}", o.what(), o.witness.reason)),
            None => (Verdict::Unverified, "no transfer happened".to_string()),
        };
        let mismatch = ops.iter().any(|o| o.data_match == Some(false));
        let (pass, result, failure): (bool, String, Option<Error>) = if s.failed() {
            let why = s.steps.iter().find(|x| x.status == Status::Fail).map(|x| x.text.clone()).unwrap_or_default();
            let err = if mismatch {
                Error::Mismatch(format!("verify: {why}"))
            } else if config_failure {
                Error::Store(crate::error::StoreError::Config(format!("verify: {why}")))
            } else {
                Error::Runtime(format!("verify: {why}"))
            };
            (false, format!("FAIL - {why}"), Some(err))
        } else if !witness.expects_rdma() && plan.run.require_rdma {
            (false, format!("FAIL - round trips over {transport} verified, but {REQUIRE_RDMA} asks for RDMA, which {transport} does not carry"), None)
        } else if !witness.expects_rdma() {
            (true, format!("PASS - round trips over {transport} verified ({}); RDMA not applicable", sizes.join(", ")), None)
        } else if verdict == Verdict::RdmaVerified {
            let proof: Vec<String> = decisive.iter().map(|o| format!("{}: {}", o.what(), o.evidence())).collect();
            let kinds = proven_kinds(&decisive);
            let gpu_direct = if decisive.iter().any(|o| o.memory == Memory::Device) {
                "GPU-Direct RDMA is live".to_string()
            } else {
                format!("GPU-Direct into GPU memory NOT checked: {no_gpu_why}")
            };
            (true, format!("PASS - RDMA carried every probe ({kinds}); {gpu_direct}: {}", proof.join("; ")), None)
        } else {
            let unavailable = store.transport_unavailable();
            let trap = match (&unavailable, worst) {
                (Some(why), _) => format!("RDMA unavailable: {why}"),
                (None, Some(o)) if o.witness.verdict == Verdict::Unverified => format!("no proof either way: {}", o.witness.reason),
                _ => likely_trap(&s.steps, gpu.is_some(), engine.as_ref().map(|e| e.generation)),
            };
            let at = worst.map(|o| format!(" ({})", o.what())).unwrap_or_default();
            (false, format!("FAIL - verdict {}{at}: most likely: {trap}", verdict.as_str()), None)
        };
        if !quiet {
            println!("RESULT: {result}");
        }
        // Each probe is its own cell (`results.probes[cell]`), run once.
        let windows: Vec<(WindowId, String, WitnessReport)> =
            ops.iter().enumerate().filter(|(_, o)| decides(o)).map(|(i, o)| (WindowId { cell: i, repeat: 1 }, o.what(), o.witness.clone())).collect();
        let data_match = !s.failed() && !mismatch && ops.iter().any(|o| o.data_match == Some(true));
        // On the rdma backend verify exists to prove RDMA: anything else is exit
        // 3, as with --require-rdma, and said as verify's own rule (the user may
        // not have passed that flag).
        let failure = failure.or_else(|| rdma_not_proven(witness.expects_rdma(), plan.run.require_rdma, verdict, &reason));
        let mut outcome = Outcome::new(
            json!({"sizes_bytes": plan.sizes, "key": plan.key, "prepare": plan.prepare, "keep": plan.keep, "device": plan.device}),
            json!({"steps": s.steps, "result": result, "pass": pass, "data_match": data_match, "probes": ops, "registration": registration, "wire_rules": wire_rules}),
            windows,
        );
        outcome.gpu = gpu.as_deref().map(crate::bench::session::gpu_environment);
        outcome.failure = failure;
        Ok(outcome)
    }

    /// The steps and the result were printed as they ran.
    fn print(&self, _s: &Session, _results: &Value) {}
}

/// Exit 3 where RDMA was asked for (the rdma backend, or `--require-rdma`)
/// and the worst probe's `verdict` is not rdma-verified (`reason`: why).
fn rdma_not_proven(expects_rdma: bool, require_rdma: bool, verdict: Verdict, reason: &str) -> Option<Error> {
    ((expects_rdma || require_rdma) && verdict != Verdict::RdmaVerified).then(|| {
        let rule = if require_rdma { REQUIRE_RDMA.to_string() } else { "verify on the rdma backend passes only when every probe is rdma-verified".to_string() };
        Error::WitnessFailed(format!("RDMA not proven ({rule}): witness verdict {} for {reason}", verdict.as_str()))
    })
}

/// What steps 1 to 5 found: every probe, what registration costs, and
/// whether a failure was the configuration's.
struct Probed {
    ops: Vec<ProbeOp>,
    registration: Value,
    config_failure: bool,
}

/// Steps 1 to 5 (engine, preflight, registration, bucket, metrics, the
/// probes of every size into every memory), each said as it runs.
///
/// Errors: an invalid `--key` (usage).
async fn probe_all(
    s: &mut Steps,
    plan: &VerifyPlan,
    gpu: Option<&std::sync::Arc<crate::mem::Gpu>>,
    session: &Session,
    engine: Option<&store::rdma::RdmaEngine>,
    host_rdma: bool,
) -> Result<Probed> {
    let (store, witness) = (session.store.as_ref(), &session.witness);
    let quiet = s.quiet;
    check_engine(s, engine, Path::new("/sys/class/infiniband"), gpu.is_some());
    for w in store.preflight(plan.sizes.iter().copied().max().unwrap_or(0)) {
        let fix = if w.contains("get_object_range") {
            "a libminiocpp with miniocpp_get_object_range (minio-cpp PR #258) carries ranged reads over RDMA; until then they go over HTTP"
        } else {
            "use a libminiocpp built with RDMA on a host with an RDMA NIC: see the library's reason and the checks above"
        };
        s.add(1, Status::Warn, w, Some(fix.into()));
    }
    store::check_key(&plan.key).map_err(|e| Error::Usage(format!("invalid {KEY}: {e}")))?;
    let registration = registration_step(s, store, engine, &plan.sizes);

    let (reached, config_failure) = bucket_step(s, store, plan).await;
    let mut ops: Vec<ProbeOp> = Vec::new();
    if reached {
        metrics_step(s, store.capabilities().server, witness).await;
        let memories: Vec<Memory> = if gpu.is_some() { vec![Memory::Device, Memory::Host] } else { vec![Memory::Host] };
        let ctx = ProbeCtx { store, witness, key: &plan.key, gpu, explain: plan.run.output.explain };
        for &size in &plan.sizes {
            for &memory in &memories {
                let decisive = gpu.is_none() || memory == Memory::Device || host_rdma;
                probe_steps(s, &ctx, size, memory, decisive, &mut ops).await;
            }
        }
        if !plan.keep {
            let _ = store.delete(&plan.key).await;
        }
        if !quiet && !ops.is_empty() {
            println!("{}", probe::table(&ops));
        }
    }
    Ok(Probed { ops, registration, config_failure })
}

/// Step 1's registration line: what registering a host buffer of each probe
/// size costs the RDMA engine, timed through its own client API before any
/// probe (minio-cpp registers inside every call, so the probes' times include
/// it). Returns the costs for the record (`null` where nothing registers).
fn registration_step(s: &mut Steps, store: &dyn store::ObjectStore, engine: Option<&store::rdma::RdmaEngine>, sizes: &[u64]) -> Value {
    let sizes: Vec<u64> = sizes.iter().copied().filter(|&b| b > 0 && b <= store::rdma::MAX_TRANSFER).collect();
    match store.registration_costs(&sizes) {
        None => Value::Null,
        Some(Ok(costs)) => {
            let each: Vec<String> =
                costs.iter().map(|c| format!("{} {:.1} us + {:.1} us to deregister", size_name(c.bytes), c.register_s * 1e6, c.deregister_s * 1e6)).collect();
            let who = if engine.is_some_and(|e| e.test_double) { "a stand-in engine: bookkeeping, not ibv_reg_mr" } else { "libs3rdma's client API" };
            s.add(1, Status::Pass, format!("buffer registration of host memory ({who}, median of 3): {}", each.join(", ")), None);
            json!(costs)
        }
        Some(Err(why)) => {
            s.add(1, Status::Skip, format!("buffer registration not timed: {why}"), None);
            json!({"not_measured": why})
        }
    }
}

/// Step 5's wire rules, where the store judges the server's answers itself
/// (the libs3rdma engine): one line per rule, PASS when every answer that
/// exercised it followed it, FAIL (naming how often) when one broke it, SKIP
/// when no probe exercised it. A broken rule fails verify: the server does
/// not speak the protocol as its other clients expect.
fn wire_rule_steps(s: &mut Steps, store: &dyn store::ObjectStore) -> Value {
    let Some(rules) = store.wire_rules() else { return Value::Null };
    for r in &rules {
        let (status, seen, fix) = match (r.followed, r.broken) {
            (0, 0) => (Status::Skip, "not exercised by these probes".to_string(), None),
            (f, 0) => (Status::Pass, format!("followed by {f} answer(s)"), None),
            (f, b) => (
                Status::Fail,
                format!("broken by {b} of {} answer(s)", f + b),
                Some("the server's RDMA answers break the protocol its clients (minio-cpp, minio-rs, NIXL) expect: check its build or version".to_string()),
            ),
        };
        s.add(5, status, format!("wire rule '{}': {} - {seen}", r.name, r.rule), fix);
    }
    json!(rules)
}

/// Step 1's GPU checks, then the GPU opened before the store (rdma workers
/// bind its context): the GPU, or why there is none (a usable GPU that does
/// not open is a warning; host-memory probes only).
fn open_gpu(s: &mut Steps, device: usize) -> (Option<std::sync::Arc<crate::mem::Gpu>>, String) {
    if !check_gpu(s) {
        return (None, "no usable GPU on this host".to_string());
    }
    match crate::mem::Gpu::open(device) {
        Ok(g) => (Some(g), String::new()),
        Err(e) => {
            s.add(1, Status::Warn, format!("GPU {device}: {e}: host-memory probes only"), Some(format!("pick a usable GPU with {DEVICE}")));
            (None, format!("GPU {device} could not be opened ({e})"))
        }
    }
}

/// Step 2: the bucket is reachable (created with `--prepare`) and the probe
/// key free (verify writes it, then deletes it).
///
/// Returns whether the probes can run, and whether what failed is the
/// configuration (an untrusted certificate, ...: exit 2, as in every bench).
async fn bucket_step(s: &mut Steps, store: &dyn store::ObjectStore, plan: &VerifyPlan) -> (bool, bool) {
    if let Err(e) = store.ensure_bucket(plan.prepare).await {
        let config_failure = matches!(e, crate::error::StoreError::Config(_));
        // --prepare cannot help a root that is no directory, nor a run that passed it.
        let fix = if !store.capabilities().server && (plan.prepare || config_failure) {
            format!("fix {ROOT} or {BUCKET}")
        } else if !store.capabilities().server {
            format!("fix {ROOT} or {BUCKET}, or pass {PREPARE}")
        } else {
            "fix the endpoint, credentials or bucket named above".to_string()
        };
        s.add(2, Status::Fail, (plan.run.output.explain)(&Error::Store(e)), Some(fix));
        return (false, config_failure);
    }
    s.add(2, Status::Pass, format!("bucket '{}' at {} is reachable", store.bucket(), store.location()), None);
    if store.head(&plan.key).await.is_ok() {
        s.add(
            2,
            Status::Fail,
            format!("an object '{}' already exists: verify would overwrite and then delete it", plan.key),
            Some(format!("pass a {KEY} that does not exist")),
        );
        return (false, false);
    }
    (true, false)
}

/// A store the library could not open: step 1's FAIL and the RESULT line
/// (unless `quiet`), and the error to exit with (a library that does not
/// load: 1; the flags: 2).
fn unopened_store(e: crate::error::StoreError, quiet: bool) -> Error {
    let library = matches!(e, crate::error::StoreError::Library(_));
    if !quiet {
        println!("[1] FAIL {e}");
        if library {
            println!("        fix: point {RDMA_LIB} at a libminiocpp built with -DMINIO_CPP_ENABLE_RDMA=ON whose dependencies resolve (`ldd` it)");
        }
        println!("RESULT: FAIL - {}", e.to_string().lines().next().unwrap_or_default());
    }
    if library { Error::Runtime(e.to_string()) } else { Error::Store(e) }
}

/// "host 4KiB, 64MiB; device 4KiB, 64MiB": the memory kinds and sizes the
/// probes in `ops` covered, in probe order.
fn proven_kinds(ops: &[&ProbeOp]) -> String {
    let mut kinds: Vec<(Memory, Vec<String>)> = Vec::new();
    for o in ops {
        let size = size_name(o.size_bytes);
        match kinds.iter_mut().find(|(m, _)| *m == o.memory) {
            Some((_, sizes)) if !sizes.contains(&size) => sizes.push(size),
            Some(_) => {}
            None => kinds.push((o.memory, vec![size])),
        }
    }
    kinds.iter().map(|(m, sizes)| format!("{} {}", m.name(), sizes.join(", "))).collect::<Vec<_>>().join("; ")
}

/// Step 3: one scrape, judged on an empty window, tells whether the counters are readable.
async fn metrics_step(s: &mut Steps, server: bool, witness: &Witness) {
    if !server {
        s.add(3, Status::Skip, "metrics: local files have no server", None);
        return;
    }
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
            Some(format!("pass {METRICS_TOKEN} or {METRICS_URL}, or set MINIO_PROMETHEUS_AUTH_TYPE=public on the server")),
        ),
    }
}

/// Steps 4 (PUT) and 5 (GET) of one probe: a line each, with the server's
/// evidence; the ops join `ops` for the table and the RESULT.
async fn probe_steps(s: &mut Steps, ctx: &ProbeCtx<'_>, size: u64, memory: Memory, decisive: bool, ops: &mut Vec<ProbeOp>) {
    // What is judged: the server's evidence where there is a server, the RDMA claim where the store makes one.
    let (server, rdma) = (ctx.store.capabilities().server, ctx.witness.expects_rdma());
    let (put, get) = match probe::probe(ctx, size, memory).await {
        Ok(p) => p,
        Err(e) => {
            s.add(4, Status::Fail, format!("{} probe of {}: {e}", memory.name(), size_name(size)), None);
            return;
        }
    };
    // A probe RDMA cannot carry (host memory with the cuObject generation) is informational.
    let label = if decisive { "" } else { " (informational: this library's RDMA carries device memory only)" };
    let judged = |o: &ProbeOp| {
        let server = if server { format!("; {}", o.evidence()) } else { String::new() };
        let data = match o.data_match {
            Some(true) => ": bytes match",
            Some(false) => ": bytes DIFFER",
            None => "",
        };
        format!("{}{data}{server}; witness {} ({}){label}", o.what(), o.witness.verdict.as_str(), o.witness.reason)
    };
    let status = |o: &ProbeOp| {
        if o.data_match == Some(false) {
            (Status::Fail, Some("the store returned different bytes than were written: check the server and any proxy in between".to_string()))
        } else if rdma && decisive && o.witness.verdict == Verdict::Unverified {
            (Status::Warn, Some(format!("the {} completed, but the server's counters cannot prove its transport: see the reason", o.request)))
        } else if rdma && decisive && o.witness.verdict != Verdict::RdmaVerified {
            (Status::Warn, Some(format!("the {} completed but RDMA did not carry all of it: see RESULT", o.request)))
        } else {
            (Status::Pass, None)
        }
    };
    let (st, fix) = status(&put);
    s.add(4, st, judged(&put), fix);
    ops.push(put);
    match get {
        Ok(g) => {
            let (st, fix) = status(&g);
            s.add(5, st, judged(&g), fix);
            ops.push(g);
        }
        Err(e) => s.add(5, Status::Fail, e, None),
    }
}
