//! The checkpoint operations of one rank: the live state, flat save and restore (chunks + manifest), serialize-then-put save and restore, and the comparison with the originals.

use super::plan::ChunkChecksum;
use super::train_load::TrainLoad;
use super::{OpFigures, STAGE_CHUNK, Verified};
use crate::bench::fanout;
use crate::clock::now_unix;
use crate::error::{Error, Result, StoreError};
use crate::flag::{KEEP, OPS, PREFIX, RANKS, SEED, SIZES, WORKLOAD};
use crate::format::ckpt::{self as fmt, ChecksumAlgorithm, Checksums, Manifest, TensorEntry, TensorSpec};
use crate::mem::{Buffer, Dest, Gpu};
use crate::store::{self, ObjectStore, blocking};
use rand::{RngCore, SeedableRng, rngs::SmallRng};
use std::sync::Arc;
use std::time::Instant;

/// A state to save: its name in keys and records, and its tensors (this rank's share).
#[derive(Debug)]
pub(crate) struct StateSpec {
    pub(crate) name: String,
    /// `resnet50` or `synthetic`.
    pub(crate) workload: &'static str,
    /// Requested total size across ranks (synthetic), or this rank's bytes x ranks (named).
    pub(crate) size_bytes: u64,
    pub(crate) tensors: Vec<TensorSpec>,
}

/// The live state: one buffer per tensor, plus its packed layout.
pub(crate) struct State {
    pub(crate) tensors: Vec<Buffer>,
    pub(crate) entries: Vec<TensorEntry>,
    pub(crate) total: u64,
}

impl State {
    /// Allocate every tensor in `dest` memory and fill it with bytes from a
    /// generator seeded by (seed, rank, tensor name), so a later run can regenerate it.
    pub(crate) fn new(spec: &StateSpec, dest: Dest, gpu: Option<&Arc<Gpu>>, seed: u64, rank: usize) -> Result<State> {
        let (entries, total) = fmt::pack(&spec.tensors);
        let mut tensors = Vec::with_capacity(spec.tensors.len());
        let mut host = vec![0u8; STAGE_CHUNK];
        for t in &spec.tensors {
            let n = t.nbytes() as usize;
            let mut b = Buffer::for_dest(dest, gpu, n, 0, 0)
                .map_err(|e| Error::Runtime(format!("cannot allocate tensor '{}' ({n} bytes) of {} memory: {e}", t.path, dest.name())))?;
            let mut rng = SmallRng::seed_from_u64(seed ^ (rank as u64).rotate_left(32) ^ fnv1a(&t.path));
            let mut off = 0;
            while off < n {
                let m = (n - off).min(STAGE_CHUNK);
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
pub(crate) fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}

/// Copy all of `src` to `dst[at..]`, whatever the two kinds (device-to-device on one GPU).
pub(crate) fn copy_buffer(dst: &mut Buffer, at: usize, src: &Buffer) -> std::result::Result<(), String> {
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

/// Shared inputs of the operations of one rank.
pub(crate) struct Ctx {
    pub(crate) store: Arc<dyn ObjectStore>,
    /// Single-stream HTTP (or local) store for serialize-then-put.
    pub(crate) serial: Arc<dyn ObjectStore>,
    pub(crate) chunk: u64,
    pub(crate) concurrency: usize,
    pub(crate) checksum: ChunkChecksum,
    /// `--seed` of the state (recorded in the manifest, checked on restore).
    pub(crate) seed: u64,
    /// Pinned (or host) staging buffers of `chunk` bytes, one per chunk in flight.
    pub(crate) staging: Arc<tokio::sync::Mutex<Vec<Buffer>>>,
}

/// Hash `len` bytes of `buf` at `at`; device memory is read back through `scratch`.
pub(crate) fn hash_range(buf: &Buffer, at: usize, len: usize, scratch: Option<&mut Buffer>) -> std::result::Result<String, String> {
    match buf {
        Buffer::Device(d) => {
            let s = scratch.ok_or("no staging buffer to hash device memory through")?;
            let h = s.as_host_mut().expect("staging is host memory");
            let mut hasher = twox_hash::XxHash3_64::new();
            let mut off = 0;
            while off < len {
                let m = (len - off).min(h.len());
                d.read_back(at + off, &mut h[..m])?;
                std::hash::Hasher::write(&mut hasher, &h[..m]);
                off += m;
            }
            Ok(format!("{:016x}", std::hash::Hasher::finish(&hasher)))
        }
        other => Ok(fmt::xxh3_hex(&other.as_host().expect("host")[at..at + len])),
    }
}

/// One chunk's transfer, lending it a staging buffer from the pool while it
/// runs (see [`fanout::run_fail_fast`], which runs it as its own task).
pub(crate) async fn chunk_task<T, F, Fut>(staging: Arc<tokio::sync::Mutex<Vec<Buffer>>>, work: F) -> Result<T>
where
    F: FnOnce(Option<Buffer>) -> Fut,
    Fut: std::future::Future<Output = (Option<Buffer>, Result<T>)>,
{
    let scratch = staging.lock().await.pop();
    let (scratch, r) = work(scratch).await;
    if let Some(s) = scratch {
        staging.lock().await.push(s);
    }
    r
}

/// What the training job does to its state around an async save's
/// snapshot. The next optimizer step overwrites every tensor while the save
/// still persists; here that step inverts every byte of every tensor
/// ([`Buffer::invert`]: on the GPU for device memory), so a save that read
/// the live state after its snapshot (a torn snapshot) restores inverted
/// bytes and the restore's check fails. The save inverts them back once it
/// has persisted, so the live state is the original again for that check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NextStep {
    /// No step during the save (a flat save: training waits for all of it).
    None,
    /// The step right after the snapshot, while the save persists.
    AfterSnapshot,
    /// A lazy snapshot, taken after the step (tests only): what the check must catch.
    #[cfg(test)]
    BeforeSnapshot,
}

/// Invert every tensor of `state` (see [`NextStep`]), through views: the
/// caller guarantees nothing else touches the state's bytes meanwhile.
fn step_state(state: &State) -> std::result::Result<(), String> {
    for t in &state.tensors {
        // SAFETY: a whole-buffer view, dropped at the end of this iteration;
        // while a save persists from its snapshot nothing else reads or writes the live state.
        let mut v = unsafe { t.view(0..t.len()) };
        v.invert()?;
    }
    Ok(())
}

/// Save `state` as a flat checkpoint under `key` (a new generation), manifest last.
///
/// The tensors are first copied into `flat` (`flatten_s`): device memory for
/// `flat`, and a pinned host buffer for `async`, where that copy is the
/// snapshot training waits for and the chunks then leave from host memory.
/// `step` says what training does meanwhile ([`NextStep`]); the step is
/// undone before this returns, whatever the save's outcome. With `step`
/// after the snapshot, `load` (a training load, paused for the save) is told
/// to run again as soon as the snapshot is taken; either way it is told when
/// the save became durable (before the step is undone, benchmark work no
/// job does).
pub(crate) async fn save_flat(
    ctx: &Ctx,
    key: &str,
    state: &State,
    flat: &mut Buffer,
    generation: &str,
    step: NextStep,
    load: Option<&TrainLoad>,
) -> Result<OpFigures> {
    let t0 = Instant::now();
    let start_unix_s = now_unix();
    let stepped = |e: String| Error::Runtime(format!("the training step after the snapshot: {e}"));
    #[cfg(test)]
    if step == NextStep::BeforeSnapshot {
        blocking(|| step_state(state)).map_err(stepped)?;
    }
    blocking(|| -> std::result::Result<(), String> {
        for (t, e) in state.tensors.iter().zip(&state.entries) {
            copy_buffer(flat, e.offset as usize, t)?;
        }
        Ok(())
    })
    .map_err(|e| Error::Runtime(format!("flattening the state: {e}")))?;
    let flatten_s = t0.elapsed().as_secs_f64();
    // The stall is over: training steps again while the save persists.
    if step == NextStep::AfterSnapshot
        && let Some(l) = load
    {
        l.run();
    }
    // The next step runs beside the persistence, on views of the state.
    let views: Vec<Buffer> = state
        .tensors
        .iter()
        // SAFETY: as in step_state: the save reads only its snapshot from
        // here on, and the views are dropped before the state is.
        .map(|t| unsafe { t.view(0..t.len()) })
        .collect();
    let next = (step == NextStep::AfterSnapshot).then(|| {
        tokio::task::spawn_blocking(move || {
            let mut views = views;
            views.iter_mut().try_for_each(Buffer::invert)
        })
    });
    let persisted = persist(ctx, key, state, flat, generation).await;
    let wall_s = t0.elapsed().as_secs_f64();
    if let Some(l) = load {
        l.mark_durable();
    }
    let ran = match next {
        Some(h) => h.await.map_err(|e| format!("it panicked: {e}")).and_then(|r| r).map(|_| true),
        None => Ok(step != NextStep::None),
    };
    // Undone whatever the save's outcome: the live state is the original again.
    if ran.as_ref().is_ok_and(|r| *r) {
        blocking(|| step_state(state)).map_err(stepped)?;
    }
    ran.map_err(stepped)?;
    let (transfer_s, checksum_s, num_chunks, chunk_bytes) = persisted?;
    Ok(OpFigures {
        bytes: state.total,
        wall_s,
        start_unix_s,
        end_unix_s: now_unix(),
        flatten_s,
        rebuild_s: 0.0,
        transfer_s,
        checksum_s,
        chunks: num_chunks,
        chunk_bytes,
        ..figures_base()
    })
}

/// The persistence of [`save_flat`]: every chunk of `flat` PUT (hashed),
/// then the manifest. Returns (seconds, summed hashing seconds, chunks, chunk bytes).
async fn persist(ctx: &Ctx, key: &str, state: &State, flat: &mut Buffer, generation: &str) -> Result<(f64, f64, u64, u64)> {
    let mut manifest = Manifest::new(state.entries.clone(), state.total, ctx.chunk, fmt::generation_prefix(key, generation));
    manifest.seed = Some(ctx.seed);
    let t1 = Instant::now();
    let tasks: Vec<_> = (0..manifest.num_chunks)
        .map(|i| {
            let r = manifest.chunk_range(i);
            // SAFETY: the views are read-only, of disjoint chunks, and dropped
            // (run_fail_fast ends every task) before `flat` is used again.
            let view = unsafe { flat.view(r.start as usize..r.end as usize) };
            let (store, staging, ck) = (ctx.store.clone(), ctx.staging.clone(), ctx.checksum);
            let ckey = manifest.chunk_key(key, i);
            chunk_task(staging, move |mut scratch| async move {
                let len = view.len();
                let r = async {
                    let (t, staged) = store::write_from(store.as_ref(), &ckey, &view, 0..len, scratch.as_mut()).await?;
                    let th = Instant::now();
                    // A staged write hands back the host bytes it sent: hash those.
                    let staged_sum = staged.filter(|_| ck != ChunkChecksum::None).map(fmt::xxh3_hex);
                    let sum = match (ck, staged_sum) {
                        (ChunkChecksum::None, _) => String::new(),
                        (_, Some(sum)) => sum,
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
    let results = fanout::run_fail_fast(tasks, ctx.concurrency).await?;
    let mut sums = Vec::new();
    let mut checksum_s = 0.0;
    for (_, sum, cs) in results {
        checksum_s += cs;
        sums.push(sum);
    }
    manifest.checksums = Some(match ctx.checksum {
        ChunkChecksum::Xxh3 => Checksums { algorithm: ChecksumAlgorithm::Xxh3_64, chunks: sums },
        ChunkChecksum::None => Checksums { algorithm: ChecksumAlgorithm::None, chunks: Vec::new() },
    });
    store::put_bytes(ctx.store.as_ref(), &Manifest::key(key), serde_json::to_vec_pretty(&manifest).expect("manifest encodes")).await?;
    Ok((t1.elapsed().as_secs_f64(), checksum_s, manifest.num_chunks, manifest.chunk_bytes))
}

pub(crate) fn figures_base() -> OpFigures {
    OpFigures {
        rank: 0,
        host: String::new(),
        bytes: 0,
        wall_s: 0.0,
        stall_s: 0.0,
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
        restore_cache: None,
        train: None,
    }
}

/// Read the manifest of `key`: a missing one means no (complete) checkpoint.
pub(crate) async fn read_manifest(store: &dyn ObjectStore, key: &str) -> Result<Manifest> {
    match store::get_bytes(store, &Manifest::key(key)).await {
        Ok(b) => Manifest::parse(key, &b),
        Err(StoreError::NotFound { .. }) => Err(Error::Runtime(format!(
            "checkpoint {key} is incomplete (no manifest {} at {}): it was never saved with these flags, or its save was interrupted: save it first and keep it (ckpt {OPS} save {KEEP}, with the same {WORKLOAD}, {SIZES}, {SEED}, {RANKS} and {PREFIX})",
            Manifest::key(key),
            store.location()
        ))),
        Err(e) => Err(e.into()),
    }
}

/// Read one chunk `ckey` of `view.len()` bytes into `view` (through
/// `scratch`, a pinned staging buffer, where the store cannot write device
/// memory), and compare its xxh3 with `expect`; the read's transfer and
/// the seconds spent checking.
///
/// Errors: a chunk of another length, missing or corrupt (exit 4); the store's.
async fn restore_chunk(
    store: &dyn ObjectStore,
    ckey: &str,
    view: &mut Buffer,
    mut scratch: Option<&mut Buffer>,
    expect: Option<String>,
) -> Result<(store::Transfer, f64)> {
    let len = view.len();
    let staged = matches!(view, Buffer::Device(_)) && !store.capabilities().device_writes;
    let mut staged_sum: Option<String> = None;
    let t = if staged {
        let s = scratch.as_deref_mut().expect("staging buffers exist for staged restores");
        let t = store.get_into_at(ckey, None, s, 0).await.map_err(|e| damaged(ckey, len, e))?;
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
        let t = store.get_into_at(ckey, None, view, 0).await.map_err(|e| damaged(ckey, len, e))?;
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
            blocking(|| hash_range(view, 0, len, scratch)).map_err(|e| Error::Runtime(format!("hashing '{ckey}': {e}")))?
        };
        if got != expect {
            return Err(Error::Mismatch(format!(
                "checkpoint chunk '{ckey}' is corrupt: xxh3 {got}, its manifest says {expect}: the object changed after the save; save the checkpoint again"
            )));
        }
    }
    Ok((t, th.elapsed().as_secs_f64()))
}

/// Restore the flat checkpoint `key` into `dst` (its chunks at their offsets),
/// checking each chunk's checksum; returns the figures and the rebuilt views.
pub(crate) async fn restore_flat(ctx: &Ctx, key: &str, dst: &mut Buffer) -> Result<(OpFigures, Vec<TensorEntry>)> {
    let t0 = Instant::now();
    let start_unix_s = now_unix();
    let manifest = read_manifest(ctx.store.as_ref(), key).await?;
    if let Some(seed) = manifest.seed.filter(|&s| s != ctx.seed) {
        return Err(Error::Usage(format!("checkpoint {key} was saved with {SEED} {seed}: restore it with {SEED} {seed} (this run: {})", ctx.seed)));
    }
    // Another state's checkpoint (another workload, size or rank count: each
    // rank saves its share) is a flag to fix, not damage: said before a read.
    if manifest.total_bytes != dst.len() as u64 {
        return Err(Error::Usage(format!(
            "checkpoint {key} holds {} bytes in {} tensors, this run's state {} bytes: it was saved from another state; restore it with the {WORKLOAD}/{SIZES}/{RANKS} it was saved with",
            manifest.total_bytes,
            manifest.tensors.len(),
            dst.len()
        )));
    }
    let sums = manifest.checksums.as_ref().filter(|c| c.algorithm == ChecksumAlgorithm::Xxh3_64).map(|c| c.chunks.clone());
    if manifest.checksums.as_ref().is_some_and(|c| c.algorithm == ChecksumAlgorithm::Unknown) {
        return Err(Error::Runtime(format!("checkpoint {key}: unknown checksum algorithm in its manifest: upgrade s3rdma")));
    }
    let t1 = Instant::now();
    let tasks: Vec<_> = (0..manifest.num_chunks)
        .map(|i| {
            let r = manifest.chunk_range(i);
            // SAFETY: views of disjoint ranges, dropped (run_fail_fast ends every task) before `dst` is used again.
            let mut view = unsafe { dst.view(r.start as usize..r.end as usize) };
            let (store, staging) = (ctx.store.clone(), ctx.staging.clone());
            let ckey = manifest.chunk_key(key, i);
            let expect = sums.as_ref().map(|s| s[i as usize].clone());
            chunk_task(staging, move |mut scratch| async move {
                let r = restore_chunk(store.as_ref(), &ckey, &mut view, scratch.as_mut(), expect).await;
                drop(view);
                (scratch, r)
            })
        })
        .collect();
    let results = fanout::run_fail_fast(tasks, ctx.concurrency).await?;
    let mut checksum_s = 0.0;
    for (_, cs) in results {
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
pub(crate) fn damaged(ckey: &str, len: usize, e: StoreError) -> Error {
    match e {
        StoreError::BufferTooSmall { needed, .. } => {
            Error::Mismatch(format!("checkpoint chunk '{ckey}' holds {needed} bytes, its manifest says {len}: save the checkpoint again"))
        }
        StoreError::NotFound { key, .. } => Error::Mismatch(format!("checkpoint chunk '{key}' is missing: save the checkpoint again")),
        e => e.into(),
    }
}

/// serialize-then-put save: copy to host, safetensors blob, one single-stream PUT.
pub(crate) async fn save_serialized(ctx: &Ctx, key: &str, spec: &StateSpec, state: &State) -> Result<OpFigures> {
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
pub(crate) async fn restore_serialized(ctx: &Ctx, key: &str, state: &State, dst: &mut Buffer) -> Result<OpFigures> {
    let t0 = Instant::now();
    let start_unix_s = now_unix();
    let k = serial_key(key);
    let size = match ctx.serial.head(&k).await {
        Ok(m) => m.size,
        Err(StoreError::NotFound { .. }) => {
            return Err(Error::Runtime(format!(
                "checkpoint {k} does not exist at {}: it was never saved with these flags: save it first and keep it (ckpt {OPS} save {KEEP}, with the same {WORKLOAD}, {SIZES}, {SEED}, {RANKS} and {PREFIX})",
                ctx.serial.location()
            )));
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

pub(crate) fn serial_key(key: &str) -> String {
    format!("{key}.safetensors")
}

pub(crate) fn st_dtype(d: &str) -> safetensors::Dtype {
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
pub(crate) fn verify(state: &State, views: &[TensorEntry], restored: &Buffer) -> std::result::Result<Verified, String> {
    let mut mismatched = Vec::new();
    // The restored tensor set must be the saved one: same names, dtypes and
    // shapes, in order (a manifest that lost, renamed or reshaped a tensor fails).
    if views.len() != state.entries.len() {
        mismatched.push(format!("{} tensors in the checkpoint, {} in this run's state", views.len(), state.entries.len()));
    }
    let (mut a, mut b) = (vec![0u8; STAGE_CHUNK], vec![0u8; STAGE_CHUNK]);
    for ((t, e), orig) in state.tensors.iter().zip(views).zip(&state.entries) {
        let n = t.len();
        if e.path != orig.path || e.dtype != orig.dtype || e.shape != orig.shape || e.nbytes as usize != n {
            mismatched.push(format!("{} (restored as {} {} {:?})", orig.path, e.path, e.dtype, e.shape));
            continue;
        }
        let mut off = 0;
        while off < n {
            let m = (n - off).min(STAGE_CHUNK);
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
