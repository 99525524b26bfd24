//! Local files into device memory on reader threads of their own: each
//! thread owns some of the pinned bounce buffers (and their copy streams),
//! takes the next chunk of the plan (every file's range in file order),
//! waits until its buffer's previous copy is done, reads the chunk into the
//! buffer (`pread`, or a copy out of the file's mapping) and queues the
//! buffer's host-to-device copy, then goes on with its next buffer.
//!
//! Why not the generic staged pipeline ([`super::staged_read_pooled`]): there
//! every read is a runtime task that blocks a runtime thread, and each read is
//! split again over `--io-threads` scoped threads made per read; on the
//! H200 that reached 33 GB/s where the pinned host-to-device ceiling is
//! 55 GB/s (`scripts/probe_load_paths.py` measures both). Here the readers
//! are made once per load, a chunk is one `pread` (or one `memcpy`), and a
//! thread never waits on another's copy.
//!
//! Every stage is timed, per thread: seconds reading, seconds waiting for a
//! bounce buffer's copy, seconds queuing copies; per part: when its first
//! read began and its last ended ([`LoadTimeline`]).

use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::load_timeline::{LoadTimeline, PartTimeline, ThreadTimeline};
use super::staged_check::{self, Item, StagedCheck, StagedHashes, ThreadHashes};
use crate::flag::BOUNCE_BUFFERS;
use crate::mem::{Buffer, DeviceBuffer, Landing};

/// Bytes read (or copied out of a mapping) at a time in a checked load, then
/// hashed while they are still in the core's cache.
const HASH_PIECE: usize = 1 << 20;

/// Where a checked load hands each piece it read (the reader thread's hashers).
type Sink<'a> = Option<&'a mut dyn FnMut(&[u8])>;

/// How a reader thread gets a chunk of a file into its bounce buffer (`--file-io`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum FileIo {
    /// `pread(2)` into the bounce buffer: the kernel copies out of the page cache.
    #[default]
    Pread,
    /// The file mapped once (`mmap`, read-only, shared) and each chunk copied
    /// out of the mapping by the reader thread (the page cache's pages mapped
    /// into this process, faulted in by the copy; unchecked loads copy with
    /// streaming stores, [`crate::mem::copy_streaming`]). A file cut short by another
    /// process during the load kills the process with SIGBUS (a `pread` would
    /// return a short read): use it on files nothing else writes.
    Mmap,
}

impl FileIo {
    /// The name as typed and recorded.
    pub fn name(self) -> &'static str {
        match self {
            FileIo::Pread => "pread",
            FileIo::Mmap => "mmap",
        }
    }
}

/// One file's part of a load: `range` of the file at `path` into its
/// destination at byte `at`.
#[derive(Debug, Clone)]
pub struct FilePart {
    /// The object's key (for errors and the timeline).
    pub key: String,
    /// The file.
    pub path: PathBuf,
    /// Byte range of the file to read.
    pub range: Range<u64>,
    /// Byte offset in the destination where `range.start` lands.
    pub at: usize,
}

/// What a store's own device pipeline did ([`super::Transport::read_to_device`]):
/// one transfer per part, in order, and where the time went.
#[derive(Debug, Clone)]
pub struct DeviceLoad {
    /// One per part, in the parts' order.
    pub transfers: Vec<super::Transfer>,
    /// The stages' figures.
    pub timeline: LoadTimeline,
    /// What a checked load hashed as it staged ([`super::StagedCheck`]); `None` unchecked.
    pub checked: Option<StagedHashes>,
}

/// Why a file load failed; the caller turns it into the store's error.
#[derive(Debug)]
pub enum FileLoadError {
    /// A file could not be opened, mapped or read (part index, what, the OS error).
    Io(usize, &'static str, std::io::Error),
    /// A file ended before its part did (part index, bytes it had from the part's start).
    Short(usize, u64),
    /// A driver call failed (part index, the driver's message).
    Cuda(usize, String),
    /// Parts and destinations disagree, or the pool is too small (the fix in words).
    Config(String),
}

/// The chunks of a load: every part's range in chunks of at most `chunk`
/// bytes, part by part in order, each as `(part, range)`. Covers every
/// part's range exactly once.
pub fn chunk_plan(parts: &[FilePart], chunk: u64) -> Vec<(usize, Range<u64>)> {
    parts.iter().enumerate().flat_map(|(k, p)| super::chunks(p.range.clone(), chunk.max(1)).into_iter().map(move |r| (k, r))).collect()
}

/// One source file: open, and mapped when chunks are copied out of a mapping.
struct Source {
    file: File,
    map: Option<memmap2::Mmap>,
}

/// Read every part into its destination (`parts[i]` into `dsts[i]`) on
/// `threads` reader threads, the destinations' bounce buffers pooled and
/// shared out among them (a thread gets every `threads`-th buffer, so at
/// most half as many threads as buffers: each double-buffers). Blocks until
/// every copy is done. Returns the bytes read per part, the timeline, and
/// with `check` what was hashed as it was staged ([`super::StagedCheck`]:
/// each thread then stages its own spans instead of taking chunks off the
/// shared queue).
///
/// Errors: [`FileLoadError`]; the first one stops every reader, and the
/// copies in flight are waited for before it is returned.
pub fn load(
    parts: &[FilePart],
    dsts: &mut [&mut DeviceBuffer],
    threads: usize,
    io: FileIo,
    check: Option<&StagedCheck>,
) -> Result<(Vec<u64>, LoadTimeline, Option<StagedHashes>), FileLoadError> {
    if parts.len() != dsts.len() {
        return Err(FileLoadError::Config(format!("a file load of {} parts into {} buffers", parts.len(), dsts.len())));
    }
    for (k, (p, d)) in parts.iter().zip(dsts.iter()).enumerate() {
        let needed = p.range.end.saturating_sub(p.range.start) + p.at as u64;
        if needed > d.device_ptr().1 as u64 {
            return Err(FileLoadError::Config(format!("part {k} ('{}') needs {needed} bytes of a {} byte buffer", p.key, d.device_ptr().1)));
        }
    }
    let mut pool: Vec<(usize, usize, Buffer)> = Vec::new();
    for (o, d) in dsts.iter_mut().enumerate() {
        pool.extend(std::mem::take(&mut d.bounce).into_iter().enumerate().map(|(i, b)| (o, i, b)));
    }
    let result = run(parts, dsts, &mut pool, threads, io, check);
    let t_drain = Instant::now();
    let waited = super::staged::give_back(dsts, pool);
    let drain = t_drain.elapsed().as_secs_f64();
    let (bytes, mut timeline, hashes) = result?;
    waited.map_err(|e| FileLoadError::Cuda(0, e))?;
    timeline.drain_s += drain;
    timeline.wall_s += drain;
    Ok((bytes, timeline, hashes))
}

/// What every reader thread shares: the parts, their open files, the
/// destinations, the stop flag and the parts' spans.
struct Shared<'a> {
    parts: &'a [FilePart],
    sources: &'a [Source],
    dsts: &'a [&'a DeviceBuffer],
    stop: &'a AtomicBool,
    /// (first read start, last read end) per part, in seconds from `t0`.
    spans: &'a Mutex<Vec<(f64, f64)>>,
    t0: Instant,
}

/// Where a reader thread's chunks come from.
enum Work<'a> {
    /// An unchecked load's shared queue of chunks, the next index taken atomically.
    Queue(&'a [(usize, Range<u64>)], &'a AtomicUsize),
    /// A checked load's items for this thread alone, staged in chunks of at most the given bytes.
    Own(Vec<Item>, u64),
}

/// Every part's file, opened (and mapped, with [`FileIo::Mmap`]).
///
/// Errors: [`FileLoadError::Io`] naming the part.
fn open_sources(parts: &[FilePart], io: FileIo) -> Result<Vec<Source>, FileLoadError> {
    parts
        .iter()
        .enumerate()
        .map(|(k, p)| {
            let file = File::open(&p.path).map_err(|e| FileLoadError::Io(k, "cannot open", e))?;
            let map = match io {
                FileIo::Pread => None,
                // SAFETY: a read-only shared mapping; the module and FileIo::Mmap
                // say what a concurrent truncation does (SIGBUS).
                FileIo::Mmap => Some(unsafe { memmap2::Mmap::map(&file) }.map_err(|e| FileLoadError::Io(k, "cannot map", e))?),
            };
            Ok(Source { file, map })
        })
        .collect()
}

/// The readers of [`load`], over the pool taken from the destinations
/// (handed back by the caller whatever happens here).
fn run(
    parts: &[FilePart],
    dsts: &[&mut DeviceBuffer],
    pool: &mut [(usize, usize, Buffer)],
    threads: usize,
    io: FileIo,
    check: Option<&StagedCheck>,
) -> Result<(Vec<u64>, LoadTimeline, Option<StagedHashes>), FileLoadError> {
    let Some(chunk) = pool.iter().map(|(_, _, b)| b.len() as u64).min().filter(|_| pool.len() >= 2) else {
        return Err(FileLoadError::Config(format!("a staged device load needs at least 2 bounce buffers ({BOUNCE_BUFFERS})")));
    };
    let threads = threads.clamp(1, pool.len() / 2);
    let sources = open_sources(parts, io)?;
    let plan = chunk_plan(parts, chunk);
    let mut own: Vec<Vec<Item>> = match check {
        Some(c) => {
            let lens: Vec<u64> = parts.iter().map(|p| p.range.end - p.range.start).collect();
            staged_check::shares(staged_check::items(&lens, c).map_err(FileLoadError::Config)?, threads)
        }
        None => Vec::new(),
    };
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let first_error: Mutex<Option<FileLoadError>> = Mutex::new(None);
    let spans: Mutex<Vec<(f64, f64)>> = Mutex::new(vec![(f64::INFINITY, 0.0); parts.len()]);
    let dsts: Vec<&DeviceBuffer> = dsts.iter().map(|d| &**d).collect();
    let cx = Shared { parts, sources: &sources, dsts: &dsts, stop: &stop, spans: &spans, t0: Instant::now() };
    // Thread t owns pool entries t, t + threads, ...
    let mut shares: Vec<Vec<&mut (usize, usize, Buffer)>> = (0..threads).map(|_| Vec::new()).collect();
    for (i, e) in pool.iter_mut().enumerate() {
        shares[i % threads].push(e);
    }
    let ran: Vec<(ThreadTimeline, Option<ThreadHashes>)> = std::thread::scope(|sc| {
        let handles: Vec<_> = shares
            .into_iter()
            .enumerate()
            .map(|(t, mine)| {
                let work = match check {
                    Some(_) => Work::Own(std::mem::take(&mut own[t]), chunk),
                    None => Work::Queue(&plan, &next),
                };
                let (cx, first_error) = (&cx, &first_error);
                sc.spawn(move || {
                    reader(mine, work, cx).unwrap_or_else(|(e, tl)| {
                        cx.stop.store(true, Ordering::Relaxed);
                        first_error.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e);
                        (tl, None)
                    })
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_default()).collect()
    });
    let read_end = cx.t0.elapsed().as_secs_f64();
    if let Some(e) = first_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    let (by_thread, hashed): (Vec<ThreadTimeline>, Vec<Option<ThreadHashes>>) = ran.into_iter().unzip();
    let hashes = check.map(|c| staged_check::merge(c, hashed.into_iter().flatten().collect()));
    let spans = spans.into_inner().unwrap_or_else(|p| p.into_inner());
    let last_reader = by_thread.iter().map(|t| t.done_at_s).fold(0.0, f64::max);
    let bytes: Vec<u64> = parts.iter().map(|p| p.range.end - p.range.start).collect();
    let timeline = LoadTimeline {
        file_io: io,
        threads,
        chunk_bytes: chunk,
        bounce_buffers: pool.len(),
        chunks: by_thread.iter().map(|t| t.chunks).sum(),
        bytes: by_thread.iter().map(|t| t.bytes).sum(),
        wall_s: read_end,
        read_s: by_thread.iter().map(|t| t.read_s).sum(),
        copy_wait_s: by_thread.iter().map(|t| t.copy_wait_s).sum(),
        enqueue_s: by_thread.iter().map(|t| t.enqueue_s).sum(),
        hash_s: by_thread.iter().map(|t| t.hash_s).sum(),
        // The copies' tail is added by `load`, which waits for them.
        drain_s: read_end - last_reader,
        by_part: parts
            .iter()
            .zip(&spans)
            .zip(&bytes)
            .map(|((p, &(a, b)), &n)| PartTimeline { key: p.key.clone(), bytes: n, first_read_at_s: if a.is_finite() { a } else { 0.0 }, last_read_at_s: b })
            .collect(),
        by_thread,
    };
    Ok((bytes, timeline, hashes))
}

/// A reader thread's bounce buffers, used in turn: (destination index, its bounce buffer index, the buffer).
struct Turns<'a> {
    mine: Vec<&'a mut (usize, usize, Buffer)>,
    turn: usize,
}

/// One reader thread: its chunks (off the shared queue, or its own items,
/// hashed) until they are done or `stop` is set; its figures, or the first
/// error with the figures so far.
fn reader(
    mine: Vec<&mut (usize, usize, Buffer)>,
    work: Work<'_>,
    cx: &Shared<'_>,
) -> Result<(ThreadTimeline, Option<ThreadHashes>), (FileLoadError, ThreadTimeline)> {
    let mut tl = ThreadTimeline::default();
    if mine.is_empty() {
        return Ok((tl, None));
    }
    let mut bufs = Turns { mine, turn: 0 };
    // Every driver call below binds the GPU's context to this thread itself.
    let hashed = match work {
        Work::Queue(plan, next) => {
            while !cx.stop.load(Ordering::Relaxed) {
                let Some((k, r)) = plan.get(next.fetch_add(1, Ordering::Relaxed)) else { break };
                if let Err(e) = stage(&mut bufs, *k, r.clone(), cx, &mut tl, None) {
                    return Err((e, tl));
                }
            }
            None
        }
        Work::Own(items, chunk) => {
            let mut h = ThreadHashes { landing: vec![Landing::default(); cx.parts.len()], ..Default::default() };
            for it in items {
                if cx.stop.load(Ordering::Relaxed) {
                    break;
                }
                let base = cx.parts[it.part].range.start;
                let mut x = it.span.map(|_| twox_hash::XxHash3_64::new());
                let mut run = h.landing[it.part].run(it.range.start);
                let mut sink = |b: &[u8]| {
                    if let Some(x) = x.as_mut() {
                        std::hash::Hasher::write(x, b);
                    }
                    run.feed(b);
                };
                for r in super::chunks(base + it.range.start..base + it.range.end, chunk.max(1)) {
                    if let Err(e) = stage(&mut bufs, it.part, r, cx, &mut tl, Some(&mut sink)) {
                        return Err((e, tl));
                    }
                }
                drop(run);
                if let (Some(x), Some(span)) = (x, it.span) {
                    h.hashes.push((it.part, span, std::hash::Hasher::finish(&x)));
                }
            }
            h.hash_s = tl.hash_s;
            h.bytes = tl.bytes;
            Some(h)
        }
    };
    tl.done_at_s = cx.t0.elapsed().as_secs_f64();
    Ok((tl, hashed))
}

/// Stage chunk `r` (file offsets) of part `k`: wait for the next bounce
/// buffer's previous copy, read the chunk into it (handing each piece to
/// `sink` as it is read, when checking), queue its copy to the destination.
fn stage(bufs: &mut Turns<'_>, k: usize, r: Range<u64>, cx: &Shared<'_>, tl: &mut ThreadTimeline, sink: Sink<'_>) -> Result<(), FileLoadError> {
    let slot = bufs.turn % bufs.mine.len();
    bufs.turn += 1;
    let (o, i, buf) = &mut *bufs.mine[slot];
    let t = Instant::now();
    cx.dsts[*o].wait(*i).map_err(|e| FileLoadError::Cuda(k, e))?;
    let t_read = Instant::now();
    tl.copy_wait_s += (t_read - t).as_secs_f64();
    let len = (r.end - r.start) as usize;
    let dst = &mut buf.as_host_mut().expect("bounce buffers are pinned host memory")[..len];
    let (got, hash_s) = fill(&cx.sources[k], r.start, dst, sink).map_err(|e| FileLoadError::Io(k, "cannot read", e))?;
    if got != len {
        return Err(FileLoadError::Short(k, r.start - cx.parts[k].range.start + got as u64));
    }
    let t_copy = Instant::now();
    tl.read_s += (t_copy - t_read).as_secs_f64() - hash_s;
    tl.hash_s += hash_s;
    let at = cx.parts[k].at + (r.start - cx.parts[k].range.start) as usize;
    cx.dsts[k].copy_in_async_via(cx.dsts[*o], *i, dst, at).map_err(|e| FileLoadError::Cuda(k, e))?;
    tl.enqueue_s += t_copy.elapsed().as_secs_f64();
    tl.chunks += 1;
    tl.bytes += len as u64;
    let mut s = cx.spans.lock().unwrap_or_else(|p| p.into_inner());
    let span = &mut s[k];
    span.0 = span.0.min((t_read - cx.t0).as_secs_f64());
    span.1 = span.1.max((t_copy - cx.t0).as_secs_f64());
    Ok(())
}

/// Fill `dst` from `src` at file offset `offset` (a `pread` loop, or a copy
/// out of the mapping) until it is full or the file ends. With `sink`, in
/// pieces of [`HASH_PIECE`], each handed to `sink` right after it is read.
/// Returns the bytes read and the seconds spent in `sink`.
fn fill(src: &Source, offset: u64, dst: &mut [u8], mut sink: Sink<'_>) -> std::io::Result<(usize, f64)> {
    let piece = if sink.is_some() { HASH_PIECE } else { dst.len().max(1) };
    let (mut done, mut hash_s) = (0, 0.0);
    while done < dst.len() {
        let end = (done + piece).min(dst.len());
        let at = offset + done as u64;
        let got = match &src.map {
            Some(m) => {
                let from = (at as usize).min(m.len());
                let have = (end - done).min(m.len() - from);
                // Unchecked, the bounce buffer is read next by the GPU's DMA, not
                // the CPU: streaming stores save the destination's read (crate::mem::stream_copy).
                // Checked, the sink reads it at once, from cache.
                if sink.is_some() {
                    dst[done..done + have].copy_from_slice(&m[from..from + have]);
                } else {
                    crate::mem::copy_streaming(&mut dst[done..done + have], &m[from..from + have]);
                }
                have
            }
            None => read_full(&src.file, &mut dst[done..end], at)?,
        };
        if let Some(s) = sink.as_mut() {
            let t = Instant::now();
            s(&dst[done..done + got]);
            hash_s += t.elapsed().as_secs_f64();
        }
        done += got;
        if done < end {
            break;
        }
    }
    Ok((done, hash_s))
}

/// `pread` until `dst` is full or the file ends; the bytes read.
fn read_full(file: &File, dst: &mut [u8], offset: u64) -> std::io::Result<usize> {
    let mut done = 0;
    while done < dst.len() {
        match file.read_at(&mut dst[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(key: &str, range: Range<u64>) -> FilePart {
        FilePart { key: key.into(), path: PathBuf::from(key), range, at: 0 }
    }

    #[test]
    fn the_plan_reads_every_byte_once_in_file_order() {
        let parts = [part("a", 8..1000), part("b", 16..2016), part("c", 8..108), part("empty", 5..5)];
        let plan = chunk_plan(&parts, 256);
        let order: Vec<usize> = plan.iter().map(|(k, _)| *k).collect();
        assert!(order.windows(2).all(|w| w[0] <= w[1]), "{order:?}");
        assert_eq!(plan.len(), 4 + 8 + 1);
        for (k, p) in parts.iter().enumerate() {
            let mut next = p.range.start;
            for (_, r) in plan.iter().filter(|(i, _)| *i == k) {
                assert_eq!(r.start, next, "part {k}: a gap or overlap at {next}");
                assert!(r.end - r.start <= 256 && r.end > r.start);
                next = r.end;
            }
            assert_eq!(next, p.range.end, "part {k} not covered to its end");
        }
    }

    #[test]
    fn reads_fill_the_buffer_and_stop_at_the_end_of_the_file() {
        let dir = std::env::temp_dir().join(format!("s3rdma-fp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("x");
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&f, &data).unwrap();
        let file = File::open(&f).unwrap();
        let mut buf = vec![0u8; 4096];
        assert_eq!(read_full(&file, &mut buf, 100).unwrap(), 4096);
        assert_eq!(&buf[..], &data[100..4196]);
        assert_eq!(read_full(&file, &mut buf, 8000).unwrap(), 2000, "the file's end shortens the read");
        assert_eq!(&buf[..2000], &data[8000..]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_checked_fill_hands_every_byte_to_the_sink_in_order() {
        let dir = std::env::temp_dir().join(format!("s3rdma-fp-sink-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("x");
        let data: Vec<u8> = (0..(3u32 << 20) + 123).map(|i| (i * 13 % 241) as u8).collect();
        std::fs::write(&f, &data).unwrap();
        let file = File::open(&f).unwrap();
        // SAFETY: a file of this test's own, not changed while mapped.
        let map = unsafe { memmap2::Mmap::map(&file) }.unwrap();
        for src in [Source { file: File::open(&f).unwrap(), map: None }, Source { file, map: Some(map) }] {
            let (mut seen, mut calls) = (Vec::new(), 0);
            let mut sink = |b: &[u8]| {
                seen.extend_from_slice(b);
                calls += 1;
            };
            let mut dst = vec![0u8; data.len() - 100];
            let (got, _) = fill(&src, 100, &mut dst, Some(&mut sink)).unwrap();
            assert_eq!(got, data.len() - 100);
            assert_eq!(calls, (data.len() - 100).div_ceil(HASH_PIECE), "one call per piece");
            assert!(seen == data[100..] && dst == data[100..], "every byte, in order, in the buffer and the sink");
            let mut seen = Vec::new();
            let mut past = vec![0u8; 4096];
            let (got, _) = fill(&src, data.len() as u64 - 10, &mut past, Some(&mut |b: &[u8]| seen.extend_from_slice(b))).unwrap();
            assert_eq!((got, &seen[..]), (10, &data[data.len() - 10..]), "the file's end shortens the fill");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
