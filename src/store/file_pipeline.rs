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

use serde::Serialize;

use crate::mem::{Buffer, DeviceBuffer};

/// How a reader thread gets a chunk of a file into its bounce buffer (`--file-io`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum FileIo {
    /// `pread(2)` into the bounce buffer: the kernel copies out of the page cache.
    #[default]
    Pread,
    /// The file mapped once (`mmap`, read-only, shared) and each chunk copied
    /// out of the mapping by the reader thread (the page cache's pages mapped
    /// into this process, faulted in by the copy). A file cut short by another
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

/// Where a load's time went, by stage: the sums over reader threads, per
/// thread, and per part. Seconds from the load's start where a point in time
/// is meant (`*_at_s`), else durations.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LoadTimeline {
    /// How chunks were read (`pread`, `mmap`).
    pub file_io: FileIo,
    /// Reader threads.
    pub threads: usize,
    /// Bytes per chunk (one read, one host-to-device copy).
    pub chunk_bytes: u64,
    /// Pinned bounce buffers in the pool, each with its own copy stream.
    pub bounce_buffers: usize,
    /// Chunks read.
    pub chunks: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Start of the load to every copy done.
    pub wall_s: f64,
    /// Sum over threads of seconds reading chunks into bounce buffers.
    pub read_s: f64,
    /// Sum over threads of seconds waiting for a bounce buffer's previous copy.
    pub copy_wait_s: f64,
    /// Sum over threads of seconds queuing copies (the driver's call).
    pub enqueue_s: f64,
    /// From the last reader's end to every copy done (the copies' tail).
    pub drain_s: f64,
    /// Each reader thread's share.
    pub by_thread: Vec<ThreadTimeline>,
    /// Each part's span.
    pub by_part: Vec<PartTimeline>,
}

/// One reader thread's figures in a [`LoadTimeline`].
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ThreadTimeline {
    /// Chunks it read.
    pub chunks: u64,
    /// Bytes it read.
    pub bytes: u64,
    /// Seconds reading.
    pub read_s: f64,
    /// Seconds waiting for its bounce buffers' copies.
    pub copy_wait_s: f64,
    /// Seconds queuing copies.
    pub enqueue_s: f64,
    /// When it ended, from the load's start.
    pub done_at_s: f64,
}

/// One part's span in a [`LoadTimeline`].
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PartTimeline {
    /// The object's key.
    pub key: String,
    /// Bytes of the part.
    pub bytes: u64,
    /// When its first read began, from the load's start.
    pub first_read_at_s: f64,
    /// When its last read ended (its last copy was queued right after).
    pub last_read_at_s: f64,
}

impl LoadTimeline {
    /// One line for the terminal: where the time went.
    pub fn line(&self) -> String {
        let n = self.threads.max(1) as f64;
        format!(
            "stages: {} threads ({}), {} chunks of {} MiB through {} bounce buffers; per thread {:.3} s reading, {:.3} s waiting for copies, {:.3} s queuing; copies' tail {:.3} s; wall {:.3} s",
            self.threads,
            self.file_io.name(),
            self.chunks,
            self.chunk_bytes >> 20,
            self.bounce_buffers,
            self.read_s / n,
            self.copy_wait_s / n,
            self.enqueue_s / n,
            self.drain_s,
            self.wall_s
        )
    }
}

/// What a store's own device pipeline did ([`super::ObjectStore::read_to_device`]):
/// one transfer per part, in order, and where the time went.
#[derive(Debug, Clone)]
pub struct DeviceLoad {
    /// One per part, in the parts' order.
    pub transfers: Vec<super::Transfer>,
    /// The stages' figures.
    pub timeline: LoadTimeline,
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
/// every copy is done. Returns the bytes read per part and the timeline.
///
/// Errors: [`FileLoadError`]; the first one stops every reader, and the
/// copies in flight are waited for before it is returned.
pub fn load(parts: &[FilePart], dsts: &mut [&mut DeviceBuffer], threads: usize, io: FileIo) -> Result<(Vec<u64>, LoadTimeline), FileLoadError> {
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
    let result = run(parts, dsts, &mut pool, threads, io);
    let t_drain = Instant::now();
    let waited = super::staged::give_back(dsts, pool);
    let drain = t_drain.elapsed().as_secs_f64();
    let (bytes, mut timeline) = result?;
    waited.map_err(|e| FileLoadError::Cuda(0, e))?;
    timeline.drain_s += drain;
    timeline.wall_s += drain;
    Ok((bytes, timeline))
}

/// The readers of [`load`], over the pool taken from the destinations
/// (handed back by the caller whatever happens here).
fn run(
    parts: &[FilePart],
    dsts: &[&mut DeviceBuffer],
    pool: &mut [(usize, usize, Buffer)],
    threads: usize,
    io: FileIo,
) -> Result<(Vec<u64>, LoadTimeline), FileLoadError> {
    let Some(chunk) = pool.iter().map(|(_, _, b)| b.len() as u64).min().filter(|_| pool.len() >= 2) else {
        return Err(FileLoadError::Config("a staged device load needs at least 2 bounce buffers (--bounce-buffers)".into()));
    };
    let threads = threads.clamp(1, pool.len() / 2);
    let sources: Vec<Source> = parts
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
        .collect::<Result<_, FileLoadError>>()?;
    let plan = chunk_plan(parts, chunk);
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let first_error: Mutex<Option<FileLoadError>> = Mutex::new(None);
    // (first read start, last read end) per part, in seconds from t0.
    let spans: Mutex<Vec<(f64, f64)>> = Mutex::new(vec![(f64::INFINITY, 0.0); parts.len()]);
    let dsts: Vec<&DeviceBuffer> = dsts.iter().map(|d| &**d).collect();
    // Thread t owns pool entries t, t + threads, ...
    let mut shares: Vec<Vec<&mut (usize, usize, Buffer)>> = (0..threads).map(|_| Vec::new()).collect();
    for (i, e) in pool.iter_mut().enumerate() {
        shares[i % threads].push(e);
    }
    let t0 = Instant::now();
    let by_thread: Vec<ThreadTimeline> = std::thread::scope(|sc| {
        let handles: Vec<_> = shares
            .into_iter()
            .map(|mine| {
                let (plan, next, stop, first_error, spans, dsts, sources) = (&plan, &next, &stop, &first_error, &spans, &dsts, &sources);
                sc.spawn(move || {
                    let fail = |e: FileLoadError| {
                        stop.store(true, Ordering::Relaxed);
                        first_error.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e);
                    };
                    reader(mine, plan, next, stop, parts, sources, dsts, spans, t0).unwrap_or_else(|(e, tl)| {
                        fail(e);
                        tl
                    })
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_default()).collect()
    });
    let read_end = t0.elapsed().as_secs_f64();
    if let Some(e) = first_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    let spans = spans.into_inner().unwrap_or_else(|p| p.into_inner());
    let last_reader = by_thread.iter().map(|t| t.done_at_s).fold(0.0, f64::max);
    let bytes: Vec<u64> = parts.iter().map(|p| p.range.end - p.range.start).collect();
    let timeline = LoadTimeline {
        file_io: io,
        threads,
        chunk_bytes: chunk,
        bounce_buffers: pool.len(),
        chunks: plan.len() as u64,
        bytes: by_thread.iter().map(|t| t.bytes).sum(),
        wall_s: read_end,
        read_s: by_thread.iter().map(|t| t.read_s).sum(),
        copy_wait_s: by_thread.iter().map(|t| t.copy_wait_s).sum(),
        enqueue_s: by_thread.iter().map(|t| t.enqueue_s).sum(),
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
    Ok((bytes, timeline))
}

/// One reader thread: chunks off the shared plan until it is done or
/// `stop` is set; its figures, or the first error with the figures so far.
#[allow(clippy::too_many_arguments)]
fn reader(
    mut mine: Vec<&mut (usize, usize, Buffer)>,
    plan: &[(usize, Range<u64>)],
    next: &AtomicUsize,
    stop: &AtomicBool,
    parts: &[FilePart],
    sources: &[Source],
    dsts: &[&DeviceBuffer],
    spans: &Mutex<Vec<(f64, f64)>>,
    t0: Instant,
) -> Result<ThreadTimeline, (FileLoadError, ThreadTimeline)> {
    let mut tl = ThreadTimeline::default();
    if mine.is_empty() {
        return Ok(tl);
    }
    // Every driver call below binds the GPU's context to this thread itself.
    let mut turn = 0;
    while !stop.load(Ordering::Relaxed) {
        let n = next.fetch_add(1, Ordering::Relaxed);
        let Some((k, r)) = plan.get(n) else { break };
        let slot = turn % mine.len();
        let (o, i, buf) = &mut *mine[slot];
        turn += 1;
        let t = Instant::now();
        if let Err(e) = dsts[*o].wait(*i) {
            return Err((FileLoadError::Cuda(*k, e), tl));
        }
        let t_read = Instant::now();
        tl.copy_wait_s += (t_read - t).as_secs_f64();
        let len = (r.end - r.start) as usize;
        let dst = &mut buf.as_host_mut().expect("bounce buffers are pinned host memory")[..len];
        let got = match &sources[*k].map {
            Some(m) => {
                let end = (r.end as usize).min(m.len());
                let have = end.saturating_sub(r.start as usize);
                dst[..have].copy_from_slice(&m[r.start as usize..end]);
                Ok(have)
            }
            None => read_full(&sources[*k].file, dst, r.start),
        };
        match got {
            Ok(g) if g == len => {}
            Ok(g) => return Err((FileLoadError::Short(*k, r.start - parts[*k].range.start + g as u64), tl)),
            Err(e) => return Err((FileLoadError::Io(*k, "cannot read", e), tl)),
        }
        let t_copy = Instant::now();
        tl.read_s += (t_copy - t_read).as_secs_f64();
        let at = parts[*k].at + (r.start - parts[*k].range.start) as usize;
        if let Err(e) = dsts[*k].copy_in_async_via(dsts[*o], *i, dst, at) {
            return Err((FileLoadError::Cuda(*k, e), tl));
        }
        tl.enqueue_s += t_copy.elapsed().as_secs_f64();
        tl.chunks += 1;
        tl.bytes += len as u64;
        let mut s = spans.lock().unwrap_or_else(|p| p.into_inner());
        let span = &mut s[*k];
        span.0 = span.0.min((t_read - t0).as_secs_f64());
        span.1 = span.1.max((t_copy - t0).as_secs_f64());
    }
    tl.done_at_s = t0.elapsed().as_secs_f64();
    Ok(tl)
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
    fn the_timeline_line_says_per_thread_figures() {
        let t = LoadTimeline {
            file_io: FileIo::Pread,
            threads: 4,
            chunk_bytes: 16 << 20,
            bounce_buffers: 8,
            chunks: 10,
            bytes: 160 << 20,
            wall_s: 1.0,
            read_s: 2.0,
            copy_wait_s: 0.4,
            enqueue_s: 0.04,
            drain_s: 0.1,
            by_thread: vec![],
            by_part: vec![],
        };
        let l = t.line();
        assert!(l.contains("4 threads (pread), 10 chunks of 16 MiB through 8 bounce buffers"), "{l}");
        assert!(l.contains("0.500 s reading, 0.100 s waiting for copies, 0.010 s queuing"), "{l}");
    }
}
