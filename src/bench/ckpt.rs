//! `s3rdma ckpt`: checkpoint save and restore from GPU memory (the seeds'
//! B4/B5: 16 GiB save 0.65 s over RDMA, 12.16 s tuned HTTP, 62.55 s
//! torch.save + HTTP).
//!
//! The state lives as one allocation per tensor (as a framework holds it),
//! filled with seeded random bytes. Two methods, each timed per repeat:
//!
//! - `flat` (DESIGN.md, "On-store formats"): *flatten* copies every tensor
//!   into one flat buffer at its 512-byte aligned offset (device-to-device on
//!   a GPU); the buffer goes out as `--chunk` part objects, `--concurrency` in
//!   flight, straight from the flat buffer where the transport reads device
//!   memory (rdma) and through a pinned staging buffer per chunk in flight
//!   elsewhere; each chunk's xxh3 goes into the manifest, written last (the
//!   commit). Restore reads the manifest, the chunks into one buffer (the same
//!   way round), checks every checksum and *rebuilds* the tensors as views
//!   (offset, length) into that buffer.
//! - `serialize-then-put`, the shape of "torch.save + HTTP": every tensor
//!   copied to host memory, serialized into one safetensors blob (the
//!   `safetensors` crate), one single-stream PUT (HTTP even on the rdma
//!   backend: it is host bytes); restore is one single-stream GET, parse, and
//!   a copy of each tensor to the device.
//!
//! After the restores, every tensor is compared byte for byte with the
//! original allocation (`verified`); a mismatch exits 4.

use std::sync::Arc;
use std::time::Instant;

use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use futures::StreamExt;
use rand::{RngCore, SeedableRng, rngs::SmallRng};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::session::{Direction, Outcome, Session, SessionSpec, World};
use super::{Spread, dedup, host_cores, now_unix};
use crate::cli::{Backend, ChunkChecksum, CkptArgs, CkptMethod, CkptOp, DEFAULT_LOCAL_ROOT};
use crate::error::{Error, Result, StoreError};
use crate::format::ckpt::{self as fmt, Checksums, Manifest, TensorEntry, TensorSpec};
use crate::mem::{Buffer, Dest, Gpu};
use crate::ranks::{self, Rank};
use crate::sampler::Sampler;
use crate::store::{self, ObjectStore, TransferPath, blocking};
use crate::witness::WitnessReport;

/// Bytes compared or hashed per step when device memory is read back.
const WINDOW: usize = 64 << 20;

/// A state to save: its name in keys and records, and its tensors (this rank's share).
struct StateSpec {
    name: String,
    /// `resnet50` or `synthetic`.
    workload: &'static str,
    /// Requested total size across ranks (synthetic), or this rank's bytes x ranks (named).
    size_bytes: u64,
    tensors: Vec<TensorSpec>,
}

/// The live state: one buffer per tensor, plus its packed layout.
struct State {
    tensors: Vec<Buffer>,
    entries: Vec<TensorEntry>,
    total: u64,
}

impl State {
    /// Allocate every tensor in `dest` memory and fill it with bytes from a
    /// generator seeded by (seed, rank, tensor name), so a later run can regenerate it.
    fn new(spec: &StateSpec, dest: Dest, gpu: Option<&Arc<Gpu>>, seed: u64, rank: usize) -> Result<State> {
        let (entries, total) = fmt::pack(&spec.tensors);
        let mut tensors = Vec::with_capacity(spec.tensors.len());
        let mut host = vec![0u8; WINDOW];
        for t in &spec.tensors {
            let n = t.nbytes() as usize;
            let mut b = Buffer::for_dest(dest, gpu, n, 0, 0)
                .map_err(|e| Error::Runtime(format!("cannot allocate tensor '{}' ({n} bytes) of {} memory: {e}", t.path, dest.name())))?;
            let mut rng = SmallRng::seed_from_u64(seed ^ (rank as u64).rotate_left(32) ^ fnv1a(&t.path));
            let mut off = 0;
            while off < n {
                let m = (n - off).min(WINDOW);
                rng.fill_bytes(&mut host[..m]);
                b.copy_from_host(off, &host[..m]).map_err(Error::Runtime)?;
                off += m;
            }
            tensors.push(b);
        }
        Ok(State { tensors, entries, total })
    }
}

/// FNV-1a of a name: a stable per-tensor seed (std's hasher is not stable across releases).
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}

/// Copy all of `src` to `dst[at..]`, whatever the two kinds (device-to-device on one GPU).
fn copy_buffer(dst: &mut Buffer, at: usize, src: &Buffer) -> std::result::Result<(), String> {
    match (dst, src) {
        (Buffer::Device(d), Buffer::Device(s)) => d.copy_from_device(at, s),
        (d, Buffer::Device(s)) => {
            let len = s.device_ptr().1;
            let h = d.as_host_mut().expect("host or pinned");
            let part = h.get_mut(at..at + len).ok_or("copy overruns the buffer")?;
            s.read_back(0, part)
        }
        (d, s) => d.copy_from_host(at, s.as_host().expect("host or pinned")),
    }
}

/// The figures of one rank's one operation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OpFigures {
    /// Rank of the process these figures come from.
    pub rank: usize,
    /// Host name of that process.
    pub host: String,
    /// Checkpoint payload bytes (chunks, or the safetensors blob).
    pub bytes: u64,
    /// Wall seconds of the timed work.
    pub wall_s: f64,
    /// Wall-clock start and end (Unix seconds), for the aggregate across ranks.
    pub start_unix_s: f64,
    /// Wall-clock end of its timed window (Unix seconds).
    pub end_unix_s: f64,
    /// flat: copying tensors into the flat buffer (save); serialize-then-put:
    /// copying to host and serializing (save).
    pub flatten_s: f64,
    /// Restore: rebuilding tensor views (flat) or parsing + copying each tensor back (serialize-then-put).
    pub rebuild_s: f64,
    /// Moving the bytes to or from the store (incl. staging copies and checksums, which overlap it).
    pub transfer_s: f64,
    /// Summed per-chunk time spent hashing (overlaps the transfer).
    pub checksum_s: f64,
    /// Chunk objects written or read.
    pub chunks: u64,
    /// Bytes per chunk (from the manifest on restore; 0 for serialize-then-put).
    pub chunk_bytes: u64,
    /// Client CPU in cores: CPU-seconds of this process (getrusage) / wall seconds.
    pub client_cpu_cores: f64,
    /// Whole-host CPU in cores: busy fraction x logical CPUs (/proc/stat via sysinfo).
    pub host_cpu_cores: f64,
}

/// Shared inputs of the operations of one rank.
struct Ctx {
    store: Arc<dyn ObjectStore>,
    /// Single-stream HTTP (or local) store for serialize-then-put.
    serial: Arc<dyn ObjectStore>,
    chunk: u64,
    concurrency: usize,
    checksum: ChunkChecksum,
    /// `--seed` of the state (recorded in the manifest, checked on restore).
    seed: u64,
    /// Pinned (or host) staging buffers of `chunk` bytes, one per chunk in flight.
    staging: Arc<tokio::sync::Mutex<Vec<Buffer>>>,
}

/// Hash `len` bytes of `buf` at `at`; device memory is read back through `scratch`.
fn hash_range(buf: &Buffer, at: usize, len: usize, scratch: Option<&mut Buffer>) -> std::result::Result<String, String> {
    match buf {
        Buffer::Device(d) => {
            let s = scratch.ok_or("no staging buffer to hash device memory through")?;
            let h = s.as_host_mut().expect("staging is host memory");
            let mut hasher = xxhash_rust::xxh3::Xxh3::new();
            let mut off = 0;
            while off < len {
                let m = (len - off).min(h.len());
                d.read_back(at + off, &mut h[..m])?;
                hasher.update(&h[..m]);
                off += m;
            }
            Ok(format!("{:016x}", hasher.digest()))
        }
        other => Ok(fmt::xxh3_hex(&other.as_host().expect("host")[at..at + len])),
    }
}

/// Run one chunk's transfer as its own task (a local read or write blocks
/// its thread), lending it a staging buffer from the pool while it runs.
async fn chunk_task<T, F, Fut>(staging: Arc<tokio::sync::Mutex<Vec<Buffer>>>, work: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce(Option<Buffer>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = (Option<Buffer>, Result<T>)> + Send + 'static,
{
    tokio::spawn(async move {
        let scratch = staging.lock().await.pop();
        let (scratch, r) = work(scratch).await;
        if let Some(s) = scratch {
            staging.lock().await.push(s);
        }
        r
    })
    .await
    .map_err(|e| Error::Runtime(format!("chunk task failed: {e}")))?
}

/// Save `state` as a flat checkpoint under `key` (a new generation), manifest last.
async fn save_flat(ctx: &Ctx, key: &str, state: &State, flat: &mut Buffer, generation: &str) -> Result<OpFigures> {
    let t0 = Instant::now();
    let start_unix_s = now_unix();
    blocking(|| -> std::result::Result<(), String> {
        for (t, e) in state.tensors.iter().zip(&state.entries) {
            copy_buffer(flat, e.offset as usize, t)?;
        }
        Ok(())
    })
    .map_err(|e| Error::Runtime(format!("flattening the state: {e}")))?;
    let flatten_s = t0.elapsed().as_secs_f64();
    let mut manifest = Manifest::new(state.entries.clone(), state.total, ctx.chunk, format!("{key}.g{generation}"));
    manifest.seed = Some(ctx.seed);
    let t1 = Instant::now();
    // SAFETY of the views: read-only, dropped (tasks joined) before `flat` is used again.
    let tasks: Vec<_> = (0..manifest.num_chunks)
        .map(|i| {
            let r = manifest.chunk_range(i);
            let view = unsafe { flat.view(r.start as usize..r.end as usize) };
            let (store, staging, ck) = (ctx.store.clone(), ctx.staging.clone(), ctx.checksum);
            let ckey = manifest.chunk_key(key, i);
            chunk_task(staging, move |mut scratch| async move {
                let len = view.len();
                let r = async {
                    let t = store::write_from(store.as_ref(), &ckey, &view, 0..len, scratch.as_mut()).await?;
                    let th = Instant::now();
                    let sum = match ck {
                        ChunkChecksum::None => String::new(),
                        // A staged write already has the bytes on the host: hash those.
                        _ if matches!(view, Buffer::Device(_)) && t.path != TransferPath::Rdma => {
                            fmt::xxh3_hex(&scratch.as_ref().expect("staged").as_host().expect("host")[..len])
                        }
                        _ => blocking(|| hash_range(&view, 0, len, scratch.as_mut())).map_err(|e| Error::Runtime(format!("hashing '{ckey}': {e}")))?,
                    };
                    Ok::<_, Error>((t, sum, th.elapsed().as_secs_f64()))
                }
                .await;
                drop(view);
                (scratch, r)
            })
        })
        .collect();
    let results: Vec<_> = futures::stream::iter(tasks).buffered(ctx.concurrency).collect().await;
    let mut sums = Vec::new();
    let mut checksum_s = 0.0;
    for r in results {
        let (_, sum, cs) = r?;
        checksum_s += cs;
        sums.push(sum);
    }
    manifest.checksums = Some(match ctx.checksum {
        ChunkChecksum::Xxh3 => Checksums { algorithm: "xxh3-64".into(), chunks: sums },
        ChunkChecksum::None => Checksums { algorithm: "none".into(), chunks: Vec::new() },
    });
    store::put_bytes(ctx.store.as_ref(), &Manifest::key(key), serde_json::to_vec_pretty(&manifest).expect("manifest encodes")).await?;
    let transfer_s = t1.elapsed().as_secs_f64();
    Ok(OpFigures {
        bytes: state.total,
        wall_s: t0.elapsed().as_secs_f64(),
        start_unix_s,
        end_unix_s: now_unix(),
        flatten_s,
        rebuild_s: 0.0,
        transfer_s,
        checksum_s,
        chunks: manifest.num_chunks,
        chunk_bytes: manifest.chunk_bytes,
        ..figures_base()
    })
}

fn figures_base() -> OpFigures {
    OpFigures {
        rank: 0,
        host: String::new(),
        bytes: 0,
        wall_s: 0.0,
        start_unix_s: 0.0,
        end_unix_s: 0.0,
        flatten_s: 0.0,
        rebuild_s: 0.0,
        transfer_s: 0.0,
        checksum_s: 0.0,
        chunks: 0,
        chunk_bytes: 0,
        client_cpu_cores: 0.0,
        host_cpu_cores: 0.0,
    }
}

/// Read the manifest of `key`: a missing one means no (complete) checkpoint.
async fn read_manifest(store: &dyn ObjectStore, key: &str) -> Result<Manifest> {
    match store::get_bytes(store, &Manifest::key(key)).await {
        Ok(b) => Manifest::parse(key, &b),
        Err(StoreError::NotFound { .. }) => Err(Error::Runtime(format!(
            "checkpoint {key} is incomplete (no manifest {} at {}): it was never saved, or its save was interrupted; save it again",
            Manifest::key(key),
            store.location()
        ))),
        Err(e) => Err(e.into()),
    }
}

/// Restore the flat checkpoint `key` into `dst` (its chunks at their offsets),
/// checking each chunk's checksum; returns the figures and the rebuilt views.
async fn restore_flat(ctx: &Ctx, key: &str, dst: &mut Buffer) -> Result<(OpFigures, Vec<TensorEntry>)> {
    let t0 = Instant::now();
    let start_unix_s = now_unix();
    let manifest = read_manifest(ctx.store.as_ref(), key).await?;
    if let Some(seed) = manifest.seed.filter(|&s| s != ctx.seed) {
        return Err(Error::Usage(format!("checkpoint {key} was saved with --seed {seed}: restore it with --seed {seed} (this run: {})", ctx.seed)));
    }
    if manifest.total_bytes > dst.len() as u64 {
        return Err(Error::Runtime(format!(
            "checkpoint {key} holds {} bytes, this run's state {}: restore it with the --workload/--sizes/--ranks it was saved with",
            manifest.total_bytes,
            dst.len()
        )));
    }
    let sums = manifest.checksums.as_ref().filter(|c| c.algorithm == "xxh3-64").map(|c| c.chunks.clone());
    if manifest.checksums.as_ref().is_some_and(|c| c.algorithm != "xxh3-64" && c.algorithm != "none") {
        return Err(Error::Runtime(format!("checkpoint {key}: unknown checksum algorithm in its manifest: upgrade s3rdma")));
    }
    let t1 = Instant::now();
    let tasks: Vec<_> = (0..manifest.num_chunks)
        .map(|i| {
            let r = manifest.chunk_range(i);
            // SAFETY: views of disjoint ranges, joined before `dst` is used again.
            let mut view = unsafe { dst.view(r.start as usize..r.end as usize) };
            let (store, staging) = (ctx.store.clone(), ctx.staging.clone());
            let ckey = manifest.chunk_key(key, i);
            let expect = sums.as_ref().map(|s| s[i as usize].clone());
            chunk_task(staging, move |mut scratch| async move {
                let len = view.len();
                let r = async {
                    let staged = matches!(view, Buffer::Device(_)) && !store.writes_device();
                    let mut staged_sum: Option<String> = None;
                    let t = if staged {
                        let s = scratch.as_mut().expect("staging buffers exist for staged restores");
                        let t = store.get_into_at(&ckey, None, s, 0).await.map_err(|e| damaged(&ckey, len, e))?;
                        if t.bytes as usize != len {
                            return Err(Error::Mismatch(format!("checkpoint chunk '{ckey}' holds {} bytes, its manifest says {len}: save the checkpoint again", t.bytes)));
                        }
                        let host = &s.as_host().expect("host")[..len];
                        // The host-to-device copy and the hash both only read the
                        // staging buffer: run them side by side.
                        let (copied, hashed) = blocking(|| {
                            std::thread::scope(|sc| {
                                let h = expect.as_ref().map(|_| sc.spawn(|| fmt::xxh3_hex(host)));
                                (view.copy_from_host(0, host), h.map(|h| h.join().expect("hash thread")))
                            })
                        });
                        copied.map_err(|e| Error::Runtime(format!("copying '{ckey}' to the device: {e}")))?;
                        staged_sum = hashed;
                        t
                    } else {
                        let t = store.get_into_at(&ckey, None, &mut view, 0).await.map_err(|e| damaged(&ckey, len, e))?;
                        if t.bytes as usize != len {
                            return Err(Error::Mismatch(format!("checkpoint chunk '{ckey}' holds {} bytes, its manifest says {len}: save the checkpoint again", t.bytes)));
                        }
                        t
                    };
                    let th = Instant::now();
                    if let Some(expect) = expect {
                        let got = if let Some(sum) = staged_sum {
                            sum
                        } else {
                            blocking(|| hash_range(&view, 0, len, scratch.as_mut())).map_err(|e| Error::Runtime(format!("hashing '{ckey}': {e}")))?
                        };
                        if got != expect {
                            return Err(Error::Mismatch(format!(
                                "checkpoint chunk '{ckey}' is corrupt: xxh3 {got}, its manifest says {expect}: the object changed after the save; save the checkpoint again"
                            )));
                        }
                    }
                    Ok((t, th.elapsed().as_secs_f64()))
                }
                .await;
                drop(view);
                (scratch, r)
            })
        })
        .collect();
    let results: Vec<_> = futures::stream::iter(tasks).buffered(ctx.concurrency).collect().await;
    let mut checksum_s = 0.0;
    for r in results {
        let (_, cs) = r?;
        checksum_s += cs;
    }
    let transfer_s = t1.elapsed().as_secs_f64();
    // Rebuild: every tensor becomes a view (offset, length) into `dst`.
    let t2 = Instant::now();
    let views: Vec<TensorEntry> = manifest.tensors.clone();
    let rebuild_s = t2.elapsed().as_secs_f64();
    Ok((
        OpFigures {
            bytes: manifest.total_bytes,
            wall_s: t0.elapsed().as_secs_f64(),
            start_unix_s,
            end_unix_s: now_unix(),
            rebuild_s,
            transfer_s,
            checksum_s,
            chunks: manifest.num_chunks,
            chunk_bytes: manifest.chunk_bytes,
            ..figures_base()
        },
        views,
    ))
}

/// A chunk that does not fit its manifest is damage (exit 4); other store errors stay what they are.
fn damaged(ckey: &str, len: usize, e: StoreError) -> Error {
    match e {
        StoreError::BufferTooSmall { needed, .. } => {
            Error::Mismatch(format!("checkpoint chunk '{ckey}' holds {needed} bytes, its manifest says {len}: save the checkpoint again"))
        }
        StoreError::NotFound { key, .. } => Error::Mismatch(format!("checkpoint chunk '{key}' is missing: save the checkpoint again")),
        e => e.into(),
    }
}

/// serialize-then-put save: copy to host, safetensors blob, one single-stream PUT.
async fn save_serialized(ctx: &Ctx, key: &str, spec: &StateSpec, state: &State) -> Result<OpFigures> {
    let t0 = Instant::now();
    let start_unix_s = now_unix();
    let blob = blocking(|| -> std::result::Result<Vec<u8>, String> {
        let host: Vec<Vec<u8>> = state
            .tensors
            .iter()
            .map(|t| {
                let mut v = vec![0u8; t.len()];
                t.copy_to_host(0, &mut v).map(|_| v)
            })
            .collect::<std::result::Result<_, _>>()?;
        let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = spec
            .tensors
            .iter()
            .zip(&host)
            .map(|(s, data)| {
                let shape: Vec<usize> = s.shape.iter().map(|&d| d as usize).collect();
                safetensors::tensor::TensorView::new(st_dtype(s.dtype), shape, data).map(|v| (s.path.clone(), v)).map_err(|e| e.to_string())
            })
            .collect::<std::result::Result<_, _>>()?;
        safetensors::tensor::serialize(views, None).map_err(|e| e.to_string())
    })
    .map_err(|e| Error::Runtime(format!("serializing the state: {e}")))?;
    let flatten_s = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    let b = Buffer::from_vec(blob);
    let t = ctx.serial.put_from(&serial_key(key), &b).await?;
    let transfer_s = t1.elapsed().as_secs_f64();
    Ok(OpFigures {
        bytes: t.bytes,
        wall_s: t0.elapsed().as_secs_f64(),
        start_unix_s,
        end_unix_s: now_unix(),
        flatten_s,
        transfer_s,
        chunks: 1,
        ..figures_base()
    })
}

/// serialize-then-put restore: one GET, parse, copy each tensor into `dst` at its flat offset.
async fn restore_serialized(ctx: &Ctx, key: &str, state: &State, dst: &mut Buffer) -> Result<OpFigures> {
    let t0 = Instant::now();
    let start_unix_s = now_unix();
    let k = serial_key(key);
    let size = match ctx.serial.head(&k).await {
        Ok(m) => m.size,
        Err(StoreError::NotFound { .. }) => {
            return Err(Error::Runtime(format!("checkpoint {k} does not exist at {}: save it first (--ops save,restore)", ctx.serial.location())));
        }
        Err(e) => return Err(e.into()),
    };
    let mut b = Buffer::host(size as usize);
    let t = ctx.serial.get_into(&k, None, &mut b).await?;
    let transfer_s = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    blocking(|| -> std::result::Result<(), String> {
        let st = safetensors::SafeTensors::deserialize(b.as_host().expect("host")).map_err(|e| format!("'{k}' is not a safetensors blob: {e}"))?;
        for e in &state.entries {
            let v = st.tensor(&e.path).map_err(|err| format!("'{k}' lacks tensor '{}': {err}", e.path))?;
            if v.data().len() as u64 != e.nbytes {
                return Err(format!("'{k}': tensor '{}' holds {} bytes, expected {}", e.path, v.data().len(), e.nbytes));
            }
            dst.copy_from_host(e.offset as usize, v.data())?;
        }
        Ok(())
    })
    .map_err(|e| Error::Mismatch(format!("checkpoint {k} is damaged: {e}: save it again")))?;
    let rebuild_s = t1.elapsed().as_secs_f64();
    Ok(OpFigures {
        bytes: t.bytes,
        wall_s: t0.elapsed().as_secs_f64(),
        start_unix_s,
        end_unix_s: now_unix(),
        rebuild_s,
        transfer_s,
        chunks: 1,
        ..figures_base()
    })
}

fn serial_key(key: &str) -> String {
    format!("{key}.safetensors")
}

fn st_dtype(d: &str) -> safetensors::Dtype {
    match d {
        "I64" => safetensors::Dtype::I64,
        "F64" => safetensors::Dtype::F64,
        "I32" => safetensors::Dtype::I32,
        "F16" => safetensors::Dtype::F16,
        "BF16" => safetensors::Dtype::BF16,
        _ => safetensors::Dtype::F32,
    }
}

/// Compare every restored tensor (a view into `restored`) with its original allocation.
fn verify(state: &State, views: &[TensorEntry], restored: &Buffer) -> std::result::Result<Verified, String> {
    let mut mismatched = Vec::new();
    // The restored tensor set must be the saved one: same names, dtypes and
    // shapes, in order (a manifest that lost, renamed or reshaped a tensor fails).
    if views.len() != state.entries.len() {
        mismatched.push(format!("{} tensors restored, {} saved", views.len(), state.entries.len()));
    }
    let (mut a, mut b) = (vec![0u8; WINDOW], vec![0u8; WINDOW]);
    for ((t, e), orig) in state.tensors.iter().zip(views).zip(&state.entries) {
        let n = t.len();
        if e.path != orig.path || e.dtype != orig.dtype || e.shape != orig.shape || e.nbytes as usize != n {
            mismatched.push(format!("{} (restored as {} {} {:?})", orig.path, e.path, e.dtype, e.shape));
            continue;
        }
        let mut off = 0;
        while off < n {
            let m = (n - off).min(WINDOW);
            t.copy_to_host(off, &mut a[..m])?;
            restored.copy_to_host(e.offset as usize + off, &mut b[..m])?;
            if a[..m] != b[..m] {
                mismatched.push(e.path.clone());
                break;
            }
            off += m;
        }
    }
    Ok(Verified { ok: mismatched.is_empty(), tensors_checked: views.len().min(state.entries.len()), mismatched })
}

/// What the comparison with the originals found (per rank, summed in the record).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Verified {
    /// True when every tensor matched.
    pub ok: bool,
    /// Tensors compared.
    pub tensors_checked: usize,
    /// Names of the tensors that differ.
    pub mismatched: Vec<String>,
}

/// One (state, method, op) row: repeats across ranks and the summary.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// `resnet50` or `synthetic`.
    pub workload: String,
    /// The state's name in keys and tables (e.g. synthetic-16GiB).
    pub state: String,
    /// The checkpoint method.
    pub method: CkptMethod,
    /// Save or restore.
    pub op: CkptOp,
    /// Ranks (processes) in the run.
    pub ranks: usize,
    /// Requested state size, all ranks (synthetic: --sizes; named: its bytes x ranks).
    pub size_bytes: u64,
    /// Bytes per repeat, all ranks.
    pub bytes: u64,
    /// Chunk objects per rank (1 for serialize-then-put).
    pub chunks_per_rank: u64,
    /// Bytes per chunk object (0 for serialize-then-put).
    pub chunk_bytes: u64,
    /// Chunk transfers in flight per rank (1 for serialize-then-put).
    pub concurrency: usize,
    /// Per repeat: the slowest rank's wall time (the training stall).
    pub wall_s: Spread,
    /// Per repeat: bytes of all ranks / span (first start to last end).
    pub throughput_gbps: Spread,
    /// Client CPU in cores: CPU-seconds of this process (getrusage) / wall seconds.
    pub client_cpu_cores: Spread,
    /// Whole-host CPU in cores: busy fraction x logical CPUs (/proc/stat via sysinfo).
    pub host_cpu_cores: Spread,
    /// Seconds copying tensors into the flat buffer (flat) or serializing (serialize-then-put), slowest rank.
    pub flatten_s: Spread,
    /// Seconds rebuilding tensor views (flat) or parsing and copying back (serialize-then-put), slowest rank.
    pub rebuild_s: Spread,
    /// Seconds moving the bytes to or from the store, slowest rank.
    pub transfer_s: Spread,
    /// Summed per-chunk seconds hashing (overlaps the transfer), slowest rank.
    pub checksum_s: Spread,
    /// The worst verdict over the repeats (`-` when no window was witnessed on this rank).
    pub witness_verdict: String,
    /// What the comparison with an independent copy found (`None`: not asked for).
    pub verified: Option<Verified>,
    /// Every timed repeat's figures.
    pub repeats: Vec<RepeatRow>,
}

/// One repeat of one operation, every rank's figures.
#[derive(Debug, Clone, Serialize)]
pub struct RepeatRow {
    /// 1-based repeat number.
    pub repeat: u32,
    /// Bytes of all ranks in this repeat.
    pub bytes: u64,
    /// The slowest rank's own wall time (the training stall).
    pub wall_s: f64,
    /// First rank's start to last rank's end (a lone rank: its wall time).
    pub span_s: f64,
    /// bytes / span_s / 1e9.
    pub throughput_gbps: f64,
    /// All ranks' CPU-seconds / span_s.
    pub client_cpu_cores: f64,
    /// Whole-host CPU in cores: busy fraction x logical CPUs (/proc/stat via sysinfo).
    pub host_cpu_cores: f64,
    /// Every rank's own figures.
    pub per_rank: Vec<OpFigures>,
    /// The witness report (rank 0 only).
    pub witness: Option<WitnessReport>,
}

impl RepeatRow {
    fn of(repeat: u32, per_rank: Vec<OpFigures>, witness: Option<WitnessReport>) -> RepeatRow {
        let bytes = per_rank.iter().map(|f| f.bytes).sum();
        let wall_s = per_rank.iter().map(|f| f.wall_s).fold(0.0, f64::max);
        // A lone rank: its own wall; several: first start to last end (wall clock).
        let span_s = if per_rank.len() == 1 {
            wall_s
        } else {
            let first = per_rank.iter().map(|f| f.start_unix_s).fold(f64::INFINITY, f64::min);
            let last = per_rank.iter().map(|f| f.end_unix_s).fold(0.0, f64::max);
            (last - first).max(wall_s)
        }
        .max(1e-9);
        let cpu_s: f64 = per_rank.iter().map(|f| f.client_cpu_cores * f.wall_s).sum();
        RepeatRow {
            repeat,
            bytes,
            wall_s,
            span_s,
            throughput_gbps: bytes as f64 / span_s / 1e9,
            client_cpu_cores: cpu_s / span_s,
            host_cpu_cores: host_cores(per_rank.iter().map(|f| (f.host.as_str(), f.host_cpu_cores))),
            per_rank,
            witness,
        }
    }
}

/// The states this run saves, this rank's share of each.
fn states(args: &CkptArgs, world: usize) -> Result<Vec<StateSpec>> {
    let mut out = Vec::new();
    for w in &args.workload {
        match w.as_str() {
            "resnet50" => {
                let tensors = fmt::resnet50();
                let bytes = fmt::pack(&tensors).1 * world as u64;
                out.push(StateSpec { name: "resnet50".into(), workload: "resnet50", size_bytes: bytes, tensors });
            }
            other => {
                return Err(Error::Usage(format!("--workload '{other}': known workloads are {}; or give --sizes", fmt::WORKLOADS.join(", "))));
            }
        }
    }
    let sizes = if args.sizes.is_empty() && args.workload.is_empty() { vec![1 << 30] } else { args.sizes.clone() };
    for s in sizes {
        let tensors = fmt::synthetic_adam(s / world as u64).map_err(|e| match e {
            Error::Usage(_) if world > 1 => Error::Usage(format!(
                "--sizes {} over {world} ranks is {} bytes per rank: a synthetic checkpoint needs at least 1MiB per rank ({world} ranks)",
                human(s),
                s / world as u64
            )),
            e => e,
        })?;
        out.push(StateSpec { name: format!("synthetic-{}", human(s)), workload: "synthetic", size_bytes: s, tensors });
    }
    Ok(out)
}

/// Refuse a run whose buffers cannot fit, before allocating anything: per
/// rank the state, the flat buffer and the restore buffer (3x its bytes) in
/// `--dest` memory, plus for serialize-then-put a host copy and the blob (2x
/// in host memory); all ranks of this host together.
fn check_memory(args: &CkptArgs, specs: &[StateSpec], world: usize) -> Result<()> {
    let per_rank = specs.iter().map(|s| fmt::pack(&s.tensors).1).max().unwrap_or(0);
    let serial = if args.methods.contains(&CkptMethod::SerializeThenPut) { 2 } else { 0 };
    let (dev, host) = match args.mem.dest() {
        Dest::Device => (3 * per_rank, serial * per_rank),
        _ => (0, (3 + serial) * per_rank),
    };
    let mut sys = sysinfo::System::new();
    sys.refresh_memory();
    let avail = sys.available_memory();
    let need = host.saturating_mul(world as u64);
    if avail > 0 && need > avail / 10 * 9 {
        return Err(Error::Usage(format!(
            "{world} rank(s) x {} of state need about {} of host memory, {} is available: lower --sizes or --ranks{}",
            human_gb(per_rank),
            human_gb(need),
            human_gb(avail),
            if serial > 0 { ", or leave serialize-then-put out of --methods" } else { "" }
        )));
    }
    if dev > 0
        && let Ok(info) = crate::mem::cuda_probe()
        && !info.devices.is_empty()
    {
        let per_gpu = world.div_ceil(info.devices.len()) as u64;
        let gpu_mem = info.devices.iter().map(|d| d.1).min().unwrap_or(0);
        if dev * per_gpu > gpu_mem / 100 * 95 {
            return Err(Error::Usage(format!(
                "{per_gpu} rank(s) per GPU x {} (state + flat + restore buffers) exceed the {} of GPU memory: lower --sizes or --ranks",
                human_gb(dev),
                human_gb(gpu_mem)
            )));
        }
    }
    Ok(())
}

fn human_gb(b: u64) -> String {
    format!("{:.1} GB", b as f64 / 1e9)
}

/// `1GiB`, `512MiB`, or plain bytes: for key names and tables.
fn human(b: u64) -> String {
    for (unit, shift) in [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)] {
        if b >= 1 << shift && b.is_multiple_of(1 << shift) {
            return format!("{}{unit}", b >> shift);
        }
    }
    format!("{b}B")
}

/// Run `s3rdma ckpt`.
pub async fn run(args: CkptArgs) -> Result<()> {
    let mut args = args;
    // Each method and operation once, saves before restores.
    dedup(&mut args.methods);
    dedup(&mut args.ops);
    args.ops.sort_by_key(|o| *o == CkptOp::Restore);
    store::check_key(&format!("{}/x", args.prefix)).map_err(|e| Error::Usage(format!("--prefix '{}': {e}", args.prefix)))?;
    if let Some(id) = &args.group.run_id {
        ranks::check_run_id(id)?;
    }
    if Rank::from_env(args.group.run_id.as_deref())?.is_none() {
        // Bad sizes or memory fail once, here, not once per rank.
        let world = args.ranks.unwrap_or(1) as usize;
        let specs = states(&args, world)?;
        check_memory(&args, &specs, world)?;
    }
    let own_dir = args.store.backend == Backend::Local && args.store.root.as_path() == std::path::Path::new(DEFAULT_LOCAL_ROOT);
    let spec = SessionSpec {
        bench: "ckpt",
        store: &args.store,
        witness: &args.witness,
        mem: &args.mem,
        group: Some(&args.group),
        output: &args.output,
        world: World::Ranks(args.ranks),
        rdma_threads: args.concurrency,
        create_bucket: own_dir,
        no_bucket,
    };
    let Some(s) = Session::start(spec).await? else { return Ok(()) };
    let me = s.me.clone();
    let specs = states(&args, me.world)?;
    let dest = s.mem.dest();
    let gpu = s.gpu.clone();
    let store = s.store.clone();
    // serialize-then-put is the shape of torch.save + one PUT: one stream, plain HTTP.
    let serial = s.open_variant(|a| {
        a.part_concurrency = 1;
        if a.backend == Backend::Rdma {
            a.backend = Backend::Http;
        }
    })?;

    let mut rows: Vec<Row> = Vec::new();
    let mut mismatch: Option<String> = None;
    for spec in &specs {
        let key = format!("{}/{}/rank{:05}", args.prefix, spec.name, me.rank);
        let state = State::new(spec, dest, gpu.as_ref(), args.seed, me.rank)?;
        let alloc = |what: &str, n: usize| {
            Buffer::for_dest(dest, gpu.as_ref(), n, 0, 0)
                .map_err(|e| Error::Runtime(format!("cannot allocate the {what} ({n} bytes of {} memory): {e}", dest.name())))
        };
        let mut flat = alloc("flat buffer", state.total as usize)?;
        let mut restored = alloc("restore buffer", state.total as usize)?;
        let chunks = state.total.div_ceil(args.chunk);
        // Staging: device memory through a transport that cannot read it, or device checksums.
        let need_staging = dest == Dest::Device && (!store.writes_device() || args.checksum != ChunkChecksum::None);
        let staging_bytes = if store.writes_device() { WINDOW as u64 } else { args.chunk }.min(state.total.max(1));
        let staging: Vec<Buffer> = if need_staging {
            (0..(args.concurrency as u64).min(chunks.max(1)))
                .map(|_| Buffer::for_dest(Dest::Pinned, gpu.as_ref(), staging_bytes as usize, 0, 0))
                .collect::<std::result::Result<_, _>>()
                .map_err(|e| Error::Runtime(format!("cannot allocate pinned staging buffers: {e}")))?
        } else {
            Vec::new()
        };
        let ctx = Ctx {
            store: store.clone(),
            serial: serial.clone(),
            chunk: args.chunk,
            concurrency: args.concurrency as usize,
            checksum: args.checksum,
            seed: args.seed,
            staging: Arc::new(tokio::sync::Mutex::new(staging)),
        };
        for &method in &args.methods {
            let mut views: Option<Vec<TensorEntry>> = None;
            for &op in &args.ops {
                let mut reps = Vec::new();
                for rep in 1..=args.repeats {
                    if op == CkptOp::Restore {
                        restored.zero().map_err(Error::Runtime)?;
                    }
                    let window = s.open_window().await?;
                    let sampler = Sampler::start();
                    let generation = format!("{}-{rep}", s.started.format("%Y%m%dT%H%M%S%.6f"));
                    let r = match (method, op) {
                        (CkptMethod::Flat, CkptOp::Save) => {
                            let r = save_flat(&ctx, &key, &state, &mut flat, &generation).await;
                            if r.is_err() {
                                // Never committed: its chunks are garbage (the previous generation stays).
                                delete_prefix(store.as_ref(), &format!("{key}.g{generation}.part")).await;
                            }
                            r
                        }
                        (CkptMethod::Flat, CkptOp::Restore) => restore_flat(&ctx, &key, &mut restored).await.map(|(f, v)| {
                            views = Some(v);
                            f
                        }),
                        (CkptMethod::SerializeThenPut, CkptOp::Save) => save_serialized(&ctx, &key, spec, &state).await,
                        (CkptMethod::SerializeThenPut, CkptOp::Restore) => restore_serialized(&ctx, &key, &state, &mut restored).await.inspect(|_| {
                            views = Some(state.entries.clone());
                        }),
                    };
                    let smp = sampler.finish();
                    let mut fig = r?;
                    fig.rank = me.rank;
                    fig.host = s.host.clone();
                    fig.client_cpu_cores = smp.client_cpu_cores;
                    fig.host_cpu_cores = smp.host_cpu_cores;
                    let dir = if op == CkptOp::Save { Direction::Write } else { Direction::Read };
                    let closed = s.close_window(window, dir, fig.bytes, fig).await?;
                    if method == CkptMethod::Flat && op == CkptOp::Save {
                        collect_old_generations(store.as_ref(), &key, Some(&generation)).await;
                    }
                    reps.push(RepeatRow::of(rep, closed.ranks, closed.witness));
                }
                let verified = if op == CkptOp::Restore {
                    let v = blocking(|| verify(&state, views.as_deref().unwrap_or(&[]), &restored)).map_err(|e| Error::Runtime(format!("verifying: {e}")))?;
                    if !v.ok && mismatch.is_none() {
                        mismatch = Some(format!(
                            "rank {}: {} of {} tensors restored from {key} ({method:?}) differ from the originals, first: {}",
                            me.rank,
                            v.mismatched.len(),
                            v.tensors_checked,
                            v.mismatched[0]
                        ));
                    }
                    let all = s.gather(&format!("{}-{method:?}-verified", spec.name), &v).await?;
                    Some(Verified {
                        ok: all.iter().all(|v| v.ok),
                        tensors_checked: all.iter().map(|v| v.tensors_checked).sum(),
                        mismatched: all.iter().flat_map(|v| v.mismatched.clone()).collect(),
                    })
                } else {
                    None
                };
                rows.push(summarize(spec, method, op, &args, me.world, reps, verified));
            }
            // One method's checkpoint at a time on the store (a 16 GiB run needs 16 GiB free, not 32).
            if !args.keep && args.ops.contains(&CkptOp::Save) {
                delete_checkpoint(store.as_ref(), serial.as_ref(), &key, method).await;
            }
        }
    }
    let windows: Vec<(String, WitnessReport)> = rows
        .iter()
        .flat_map(|r| {
            r.repeats.iter().filter_map(move |rep| rep.witness.clone().map(|w| (format!("{} {:?} {:?} repeat {}", r.state, r.method, r.op, rep.repeat), w)))
        })
        .collect();
    let params = json!({"workloads": args.workload, "sizes_bytes": args.sizes, "methods": args.methods, "ops": args.ops,
                        "chunk_bytes": args.chunk, "concurrency": args.concurrency, "repeats": args.repeats,
                        "checksum": args.checksum, "prefix": args.prefix, "seed": args.seed, "ranks": me.world,
                        "alignment": fmt::ALIGNMENT});
    let results = CkptResults { rows };
    let mut outcome = Outcome::new(params, &results, windows);
    outcome.failure = mismatch.map(Error::Mismatch);
    let (backend, location) = (store.backend().name(), store.location());
    s.finish(outcome, || print_table(&results.rows, backend, &location, dest, me.world)).await
}

/// A `ckpt` run's `results`: one row per (state, method, op).
#[derive(Debug, Clone, Serialize)]
pub struct CkptResults {
    /// One row per (state, method, op).
    pub rows: Vec<Row>,
}

/// A missing bucket: ckpt writes into an existing one (the default local directory excepted).
fn no_bucket(e: StoreError) -> Error {
    match e {
        StoreError::NoSuchBucket { bucket, location } => {
            Error::Runtime(format!("bucket '{bucket}' does not exist at {location}: create it first (mc mb, aws s3 mb, or mkdir for --backend local)"))
        }
        e => e.into(),
    }
}

/// The terminal table: one line per (state, method, op).
fn print_table(rows: &[Row], backend: &str, location: &str, dest: Dest, world: usize) {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header([
        "state",
        "method",
        "op",
        "ranks",
        "GB",
        "wall s (slowest rank)",
        "GB/s",
        "client cores",
        "host cores",
        "chunks/rank",
        "flatten/rebuild s",
        "witness",
        "verified",
    ]);
    for r in rows {
        let w = &r.wall_s;
        t.add_row([
            r.state.clone(),
            match r.method {
                CkptMethod::Flat => "flat".into(),
                CkptMethod::SerializeThenPut => "serialize-then-put".to_string(),
            },
            format!("{:?}", r.op).to_lowercase(),
            r.ranks.to_string(),
            format!("{:.2}", r.bytes as f64 / 1e9),
            if w.max > w.min { format!("{:.3} ({:.3}–{:.3})", w.median, w.min, w.max) } else { format!("{:.3}", w.median) },
            format!("{:.2}", r.throughput_gbps.median),
            format!("{:.2}", r.client_cpu_cores.median),
            format!("{:.2}", r.host_cpu_cores.median),
            r.chunks_per_rank.to_string(),
            format!("{:.3}", if r.op == CkptOp::Save { r.flatten_s.median } else { r.rebuild_s.median }),
            r.witness_verdict.clone(),
            r.verified.as_ref().map_or("-".into(), |v| if v.ok { format!("ok ({})", v.tensors_checked) } else { format!("MISMATCH ({})", v.mismatched.len()) }),
        ]);
    }
    println!("ckpt on {backend} ({location}), {} memory, {world} rank(s)", dest.name());
    println!("{t}");
}

/// Delete every object whose key starts with `prefix` (best effort).
async fn delete_prefix(store: &dyn ObjectStore, prefix: &str) {
    if let Ok(objs) = store.list(prefix).await {
        for o in objs {
            let _ = store.delete(&o.key).await;
        }
    }
}

/// Delete the chunks of `key` of every generation but `current` (all of them for `None`).
async fn collect_old_generations(store: &dyn ObjectStore, key: &str, current: Option<&str>) {
    let keep = current.map(|g| format!("{key}.g{g}.part"));
    if let Ok(objs) = store.list(&format!("{key}.")).await {
        for o in objs {
            let rest = &o.key[key.len()..];
            let is_part = rest.starts_with(".part") || (rest.starts_with(".g") && rest.contains(".part"));
            if is_part && keep.as_ref().is_none_or(|k| !o.key.starts_with(k.as_str())) {
                let _ = store.delete(&o.key).await;
            }
        }
    }
}

/// Remove checkpoint `key` of `method` (a flat one manifest first, so it is never half there).
async fn delete_checkpoint(store: &dyn ObjectStore, serial: &dyn ObjectStore, key: &str, method: CkptMethod) {
    match method {
        CkptMethod::Flat => {
            let _ = store.delete(&Manifest::key(key)).await;
            collect_old_generations(store, key, None).await;
        }
        CkptMethod::SerializeThenPut => {
            let _ = serial.delete(&serial_key(key)).await;
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn summarize(spec: &StateSpec, method: CkptMethod, op: CkptOp, args: &CkptArgs, world: usize, reps: Vec<RepeatRow>, verified: Option<Verified>) -> Row {
    let spread = |f: &dyn Fn(&RepeatRow) -> f64| Spread::of(reps.iter().map(f)).expect("repeats >= 1");
    let max_of = |f: fn(&OpFigures) -> f64| move |r: &RepeatRow| r.per_rank.iter().map(f).fold(0.0, f64::max);
    let verdict = reps.iter().filter_map(|r| r.witness.as_ref()).min_by_key(|w| w.verdict).map_or("-".to_string(), |w| w.verdict.as_str().to_string());
    Row {
        workload: spec.workload.into(),
        state: spec.name.clone(),
        method,
        op,
        ranks: world,
        size_bytes: spec.size_bytes,
        bytes: reps.first().map_or(0, |r| r.bytes),
        chunks_per_rank: reps.iter().flat_map(|r| r.per_rank.iter().map(|f| f.chunks)).max().unwrap_or(0),
        chunk_bytes: reps.iter().flat_map(|r| r.per_rank.iter().map(|f| f.chunk_bytes)).max().unwrap_or(0),
        concurrency: if method == CkptMethod::Flat { args.concurrency as usize } else { 1 },
        wall_s: spread(&|r| r.wall_s),
        throughput_gbps: spread(&|r| r.throughput_gbps),
        client_cpu_cores: spread(&|r| r.client_cpu_cores),
        host_cpu_cores: spread(&|r| r.host_cpu_cores),
        flatten_s: spread(&max_of(|f| f.flatten_s)),
        rebuild_s: spread(&max_of(|f| f.rebuild_s)),
        transfer_s: spread(&max_of(|f| f.transfer_s)),
        checksum_s: spread(&max_of(|f| f.checksum_s)),
        witness_verdict: verdict,
        verified,
        repeats: reps,
    }
}
