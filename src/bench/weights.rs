//! `s3rdma weights`: model weights (safetensors) into GPU memory, cold start
//! (the seeds' B8: Llama-3.1-8B 0.77 s over RDMA, 2.90 s HTTP, 2.29 s local
//! warm cache).
//!
//! Headers are read first (two small ranged reads per shard), then one
//! buffer per shard is allocated (before the timed window), then each shard's
//! data blob is read in `--window` ranged reads, one after another into
//! consecutive parts of its buffer (never two transfers into one buffer at
//! once: cuObject registers by address), with `--concurrency` shards in
//! flight. Every tensor is then a view (offset, length) into its shard's
//! buffer: no per-tensor allocation or copy.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use serde::Serialize;
use serde_json::json;

use super::Spread;
use crate::cli::{Backend, Baseline, WeightsArgs};
use crate::error::{Error, Result};
use crate::format::weights::{self, ShardLayout};
use crate::mem::{Buffer, Dest};
use crate::report::RunRecord;
use crate::sampler::{Sampler, SamplerReport};
use crate::store::{self, ObjectStore};
use crate::witness::{Payload, Witness, WitnessReport};

/// One timed load.
#[derive(Debug, Clone, Serialize)]
pub struct LoadRepeat {
    pub repeat: u32,
    pub bytes: u64,
    pub wall_s: f64,
    pub throughput_gbps: f64,
    pub windows: u64,
    pub client_cpu_cores: f64,
    pub host_cpu_cores: f64,
    pub sampler: SamplerReport,
    pub witness: WitnessReport,
}

/// What `--verify` found.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Verified {
    pub ok: bool,
    pub tensors_checked: usize,
    pub mismatched: Vec<String>,
    /// How the reference bytes were read.
    pub reference: String,
}

/// Load every shard's data blob into `bufs` (one per shard, same order);
/// returns (bytes, windows). Each shard is its own task (up to `concurrency`
/// at once): a local read blocks its task's thread, so shards polled in one
/// task would run one after another (measured on the H200: 1.00 client core).
async fn load(store: &Arc<dyn ObjectStore>, layout: &[ShardLayout], bufs: &mut Vec<Buffer>, window: u64, concurrency: usize) -> Result<(u64, u64)> {
    let permits = Arc::new(tokio::sync::Semaphore::new(concurrency.max(1)));
    let handles: Vec<_> = layout
        .iter()
        .cloned()
        .zip(bufs.drain(..))
        .map(|(shard, mut buf)| {
            let (store, permits) = (store.clone(), permits.clone());
            tokio::spawn(async move {
                let _permit = permits.acquire_owned().await;
                let r = super::read_range(store.as_ref(), &shard.key, shard.data_start..shard.object_bytes, &mut buf, window).await;
                (buf, r)
            })
        })
        .collect();
    let mut total = (0, 0);
    let mut first_err = None;
    for h in handles {
        let (buf, r) = h.await.map_err(|e| Error::Runtime(format!("shard task failed: {e}")))?;
        bufs.push(buf);
        match r {
            Ok((b, n)) => total = (total.0 + b, total.1 + n),
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(total),
    }
}

/// Compare every tensor with the same tensor read through an independent
/// path: the whole object as a file (local) or one plain GET (http, rdma),
/// parsed by the `safetensors` crate.
async fn verify(args: &WeightsArgs, store: &dyn ObjectStore, layout: &[ShardLayout], bufs: &[Buffer]) -> Result<Verified> {
    let mut checked = 0;
    let mut mismatched = Vec::new();
    let reference = if args.store.backend == Backend::Local { "file read + safetensors crate" } else { "whole-object GET + safetensors crate" };
    for (shard, buf) in layout.iter().zip(bufs) {
        let file: Vec<u8> = if args.store.backend == Backend::Local {
            let path: PathBuf = args.store.root.join(&args.store.bucket).join(&shard.key);
            std::fs::read(&path).map_err(|e| Error::Runtime(format!("--verify: cannot read {}: {e}", path.display())))?
        } else {
            let mut b = Buffer::host(shard.object_bytes as usize);
            store.get_into(&shard.key, None, &mut b).await?;
            b.as_host().expect("host").to_vec()
        };
        let st = safetensors::SafeTensors::deserialize(&file)
            .map_err(|e| Error::Runtime(format!("--verify: the safetensors crate rejects '{}': {e}", shard.key)))?;
        let ours: Vec<u8> = match buf {
            Buffer::Device(d) => {
                let mut v = vec![0u8; shard.data_bytes() as usize];
                d.read_back(0, &mut v).map_err(|e| Error::Runtime(format!("--verify: {e}")))?;
                v
            }
            other => other.as_host().expect("host or pinned")[..shard.data_bytes() as usize].to_vec(),
        };
        if st.len() != shard.tensors.len() {
            mismatched.push(format!("{}: {} tensors in the crate's view, {} in ours", shard.key, st.len(), shard.tensors.len()));
        }
        for t in &shard.tensors {
            checked += 1;
            let same = st.tensor(&t.name).is_ok_and(|r| {
                r.shape() == t.shape.as_slice()
                    && format!("{:?}", r.dtype()) == t.dtype
                    && r.data() == &ours[t.offset as usize..(t.offset + t.nbytes) as usize]
            });
            if !same {
                mismatched.push(t.name.clone());
            }
        }
    }
    Ok(Verified { ok: mismatched.is_empty(), tensors_checked: checked, mismatched, reference: reference.into() })
}

/// One baseline's timing.
#[derive(Debug, Clone, Serialize)]
pub struct BaselineRun {
    pub baseline: Baseline,
    pub bytes: u64,
    /// Download (when part of it) plus load.
    pub wall_s: f64,
    pub download_s: f64,
    pub load_s: f64,
    pub throughput_gbps: f64,
    pub client_cpu_cores: f64,
}

/// Copy every shard to `<dir>/<bucket>/<key>` with whole-object GETs into
/// host memory and plain file writes.
async fn download(store: &dyn ObjectStore, layout: &[ShardLayout], dir: &std::path::Path, bucket: &str) -> Result<()> {
    for shard in layout {
        let mut b = Buffer::host(shard.object_bytes as usize);
        store.get_into(&shard.key, None, &mut b).await?;
        let path = dir.join(bucket).join(&shard.key);
        std::fs::create_dir_all(path.parent().expect("a parent"))
            .and_then(|_| std::fs::write(&path, b.as_host().expect("host")))
            .map_err(|e| Error::Runtime(format!("--baselines: cannot write {}: {e}: pass --baseline-dir", path.display())))?;
    }
    Ok(())
}

/// Time the baselines into the same buffers: the local copy is made by the
/// first download-then-load (or untimed, before local-then-load alone).
async fn baselines(args: &WeightsArgs, store: &dyn ObjectStore, layout: &[ShardLayout], bufs: &mut Vec<Buffer>) -> Result<Vec<BaselineRun>> {
    let (dir, remove) = match &args.baseline_dir {
        Some(d) => (d.clone(), false),
        None => (std::env::temp_dir().join(format!("s3rdma-baseline-{}", std::process::id())), true),
    };
    let mut local_args = args.store.clone();
    local_args.backend = Backend::Local;
    local_args.root = dir.clone();
    let local: Arc<dyn ObjectStore> = Arc::from(store::open(&local_args)?);
    let total: u64 = layout.iter().map(|s| s.data_bytes()).sum();
    let mut out = Vec::new();
    let mut have_copy = false;
    for &b in &args.baselines {
        let sampler = Sampler::start();
        let t0 = Instant::now();
        let download_s = if b == Baseline::DownloadThenLoad || !have_copy {
            download(store, layout, &dir, &args.store.bucket).await?;
            have_copy = true;
            t0.elapsed().as_secs_f64()
        } else {
            0.0
        };
        // local-then-load times only the load, even when it made the copy itself.
        let t1 = Instant::now();
        let (bytes, _) = load(&local, layout, bufs, args.store.window, args.concurrency as usize).await?;
        let load_s = t1.elapsed().as_secs_f64();
        let s = sampler.finish();
        let wall_s = if b == Baseline::DownloadThenLoad { download_s + load_s } else { load_s };
        out.push(BaselineRun { baseline: b, bytes, wall_s, download_s: if b == Baseline::DownloadThenLoad { download_s } else { 0.0 }, load_s, throughput_gbps: total as f64 / wall_s / 1e9, client_cpu_cores: s.client_cpu_cores });
    }
    if remove {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(out)
}

/// Run `s3rdma weights`.
pub async fn run(args: WeightsArgs) -> Result<()> {
    crate::report::check_results_dir(&args.output.results_dir)?;
    let mut store_args = args.store.clone();
    store_args.rdma_threads = store_args.rdma_threads.or(Some(args.concurrency));
    if let Some(name) = &args.synth {
        weights::synth_shapes(name)?; // a bad name is a usage error before anything is created
        let store = store::open(&store_args)?;
        store.ensure_bucket(true).await?;
        let (bytes, shards) = weights::write_synth(store.as_ref(), &args.model, name, args.shard_size).await?;
        println!("wrote synthetic {name}: {bytes} tensor bytes in {shards} shard(s) under '{}' at {}", args.model, store.location());
        return Ok(());
    }
    let witness = Witness::new(&args.store, &args.witness)?;
    let gpu = args.mem.open_gpu()?;
    let started = chrono::Utc::now();
    let store: Arc<dyn ObjectStore> = Arc::from(store::open(&store_args)?);
    store.ensure_bucket(false).await?;
    let t_head = Instant::now();
    let layout = weights::read_layout(store.as_ref(), &args.model).await?;
    let header_s = t_head.elapsed().as_secs_f64();
    let total: u64 = layout.iter().map(|s| s.data_bytes()).sum();
    let tensors: usize = layout.iter().map(|s| s.tensors.len()).sum();
    for w in layout.iter().flat_map(|s| store.preflight(s.object_bytes)).collect::<std::collections::BTreeSet<_>>() {
        eprintln!("warning: {w}");
    }
    let bounce = if store.writes_device() { 0 } else { args.mem.bounce_buffers as usize };
    // One buffer per shard, allocated before any timed window.
    let mut bufs: Vec<Buffer> = layout
        .iter()
        .map(|s| Buffer::for_dest(args.mem.dest(), gpu.as_ref(), s.data_bytes() as usize, bounce, args.mem.stage_chunk as usize))
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| Error::Runtime(format!("cannot allocate {total} bytes of {} memory: {e}", args.mem.dest().name())))?;
    let mut repeats = Vec::new();
    for rep in 1..=args.repeats {
        let window = witness.begin().await;
        let sampler = Sampler::start();
        let t0 = Instant::now();
        let (bytes, windows) = load(&store, &layout, &mut bufs, args.store.window, args.concurrency as usize).await?;
        let wall_s = t0.elapsed().as_secs_f64();
        let s = sampler.finish();
        let w = witness.end(window, Payload { read_bytes: bytes, write_bytes: 0, client_http_bytes: 0 }).await;
        repeats.push(LoadRepeat {
            repeat: rep,
            bytes,
            wall_s,
            throughput_gbps: bytes as f64 / wall_s / 1e9,
            windows,
            client_cpu_cores: s.client_cpu_cores,
            host_cpu_cores: s.host_cpu_cores,
            sampler: s,
            witness: w,
        });
    }
    let verified = if args.verify { Some(verify(&args, store.as_ref(), &layout, &bufs).await?) } else { None };
    let baseline_runs = if args.baselines.is_empty() { Vec::new() } else { baselines(&args, store.as_ref(), &layout, &mut bufs).await? };
    let wall = Spread::of(repeats.iter().map(|r| r.wall_s)).expect("repeats >= 1");
    let gbps = Spread::of(repeats.iter().map(|r| r.throughput_gbps)).expect("repeats >= 1");
    let cores = Spread::of(repeats.iter().map(|r| r.client_cpu_cores)).expect("repeats >= 1");
    let worst = repeats.iter().min_by_key(|r| r.witness.verdict).map(|r| r.witness.clone()).expect("repeats >= 1");
    let record = RunRecord {
        environment: {
            let mut env = args.mem.describe(gpu.as_ref(), store.writes_device());
            env["store"] = store.describe();
            env["witness"] = witness.describe();
            env
        },
        params: json!({"model": args.model, "window_bytes": args.store.window, "concurrency": args.concurrency,
                       "repeats": args.repeats, "verify": args.verify}),
        results: json!({"shards": layout.len(), "tensors": tensors, "bytes": total, "header_s": header_s,
                        "device_memory_bytes": if args.mem.dest() == Dest::Device { total } else { 0 },
                        "repeats": repeats, "summary": {"wall_s": wall, "throughput_gbps": gbps, "client_cpu_cores": cores},
                        "verified": verified, "baselines": baseline_runs, "layout": layout}),
        rdma_witness: json!({"verdict": worst.verdict, "reason": worst.reason}),
        ..RunRecord::new("weights", store.backend().name(), started, args.output.tag.clone())
    };
    let path = record.write(&args.output.results_dir, started)?;
    if args.output.json {
        println!("{}", serde_json::to_string_pretty(&record).expect("record encodes"));
    } else {
        let mut t = Table::new();
        t.load_preset(UTF8_FULL_CONDENSED);
        t.set_header(["loader", "dest", "shards", "tensors", "GB", "wall s", "GB/s", "client cores", "witness", "verified"]);
        t.add_row([
            store.backend().name().to_string(),
            args.mem.dest().name().to_string(),
            layout.len().to_string(),
            tensors.to_string(),
            format!("{:.2}", total as f64 / 1e9),
            if wall.max > wall.min { format!("{:.3} ({:.3}–{:.3})", wall.median, wall.min, wall.max) } else { format!("{:.3}", wall.median) },
            format!("{:.2}", gbps.median),
            format!("{:.2}", cores.median),
            worst.verdict.as_str().to_string(),
            verified.as_ref().map_or("-".into(), |v| if v.ok { format!("ok ({})", v.tensors_checked) } else { format!("MISMATCH ({})", v.mismatched.len()) }),
        ]);
        for b in &baseline_runs {
            let name = match b.baseline {
                Baseline::DownloadThenLoad => "download-then-load",
                Baseline::LocalThenLoad => "local-then-load",
            };
            t.add_row([
                name.to_string(),
                args.mem.dest().name().to_string(),
                layout.len().to_string(),
                tensors.to_string(),
                format!("{:.2}", total as f64 / 1e9),
                format!("{:.3}", b.wall_s),
                format!("{:.2}", b.throughput_gbps),
                format!("{:.2}", b.client_cpu_cores),
                "-".into(),
                "-".into(),
            ]);
        }
        println!("weights '{}' from {} ({}), headers {:.3} s", args.model, store.backend().name(), store.location(), header_s);
        println!("{t}");
    }
    eprintln!("wrote {}", path.display());
    if let Some(v) = verified
        && !v.ok
    {
        return Err(Error::Mismatch(format!("--verify: {} of {} tensors differ, first: {}", v.mismatched.len(), v.tensors_checked, v.mismatched[0])));
    }
    Ok(())
}
