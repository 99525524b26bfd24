//! `fetch --verify`'s check of the bytes a GET put in a stream's buffer,
//! against what `fetch --prepare` wrote there ([`Pattern`]).
//!
//! The check is CPU work beside the transfers, so it runs where it does not
//! hold them up: off the async runtime's workers (`block_in_place`), split
//! over `threads` OS threads. Device memory is read back in chunks through
//! the buffer's own pinned bounce buffers (idle between GETs), one per
//! thread, so one thread's piece is checked while another's is copied; a buffer with
//! no bounce buffers (a transport that writes device memory itself) reads
//! back through page-touched host chunks. Where the object's bytes start on
//! a word boundary (whole objects, aligned windows) the GPU compares them
//! with the pattern where they lie instead (`s3rdma_splitmix_diff`), and
//! only the word it names crosses PCIe. Either way what is checked is the
//! bytes in their destination, not the bytes as staged.

use crate::format::pattern::Pattern;
use crate::mem::Buffer;

/// Bytes per device read-back when the buffer lends no bounce buffer.
const READ_BACK_CHUNK: usize = 16 << 20;

/// Host bytes one thread checks at least, so small objects stay on one thread.
const MIN_PIECE: usize = 4 << 20;

/// The absolute offset of the first byte of the first `n` bytes of `buf`
/// (the object `key`'s bytes from `offset`) that differs from its pattern;
/// `None` when all agree.
///
/// Runs on up to `threads` threads (at least 1), off the async runtime's
/// workers when called on a multi-threaded runtime.
///
/// Errors: `n` exceeds the buffer, or a device read-back failed (the
/// driver's message).
pub(super) fn first_difference(key: &str, offset: u64, n: u64, buf: &mut Buffer, threads: usize) -> Result<Option<u64>, String> {
    if n as usize > buf.len() {
        return Err(format!("{n} bytes to check, but the buffer holds {}", buf.len()));
    }
    let pattern = Pattern::of(key);
    off_runtime(|| match buf {
        Buffer::Device(_) => device_difference(pattern, offset, n as usize, buf, threads.max(1)),
        host => host_difference(pattern, offset, &host.as_host().expect("host or pinned")[..n as usize], threads.max(1)),
    })
}

/// Run `f` where blocking is allowed: `block_in_place` on a multi-threaded
/// tokio runtime (its other tasks move to other workers), else in place.
pub(super) fn off_runtime<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// Pieces of `n` bytes for `threads` threads: 8-byte aligned, at least
/// [`MIN_PIECE`] each (but the last), covering `0..n` once in order.
fn pieces(n: usize, threads: usize) -> Vec<std::ops::Range<usize>> {
    let per = n.div_ceil(threads).max(MIN_PIECE).next_multiple_of(8);
    (0..n).step_by(per.max(1)).map(|s| s..(s + per).min(n)).collect()
}

fn host_difference(pattern: Pattern, offset: u64, bytes: &[u8], threads: usize) -> Result<Option<u64>, String> {
    let ps = pieces(bytes.len(), threads);
    if ps.len() <= 1 {
        return Ok(pattern.first_difference(offset, bytes));
    }
    std::thread::scope(|sc| {
        let hs: Vec<_> = ps.into_iter().map(|r| sc.spawn(move || pattern.first_difference(offset + r.start as u64, &bytes[r]))).collect();
        // The earliest piece's difference is the first.
        let found = hs.into_iter().map(|h| h.join().map_err(|_| "a checking thread panicked".to_string())).collect::<Result<Vec<_>, _>>()?;
        Ok(found.into_iter().flatten().min())
    })
}

/// Device memory: on the GPU where the object's bytes start on a word
/// boundary ([`on_gpu`]), else (or when the GPU's kernel cannot run) read back.
fn device_difference(pattern: Pattern, offset: u64, n: usize, buf: &mut Buffer, threads: usize) -> Result<Option<u64>, String> {
    if offset.is_multiple_of(8)
        && let Buffer::Device(d) = &*buf
        && let Ok(found) = on_gpu(pattern, offset, n, d)
    {
        return Ok(found);
    }
    read_back_difference(pattern, offset, n, buf, threads)
}

/// The first difference of `n` bytes of `d` (the object's bytes from
/// `offset`, a multiple of 8) from the pattern: whole words compared by the
/// GPU where they lie, the word it names and the last partial word read back
/// (at most 16 bytes cross PCIe).
///
/// Errors: the kernel's or a read-back's (the driver's message).
fn on_gpu(pattern: Pattern, offset: u64, n: usize, d: &crate::mem::DeviceBuffer) -> Result<Option<u64>, String> {
    let words = (n / 8) as u64;
    if let Some(j) = d.first_word_off_sequence(0, words, pattern.seed(), offset / 8)? {
        let mut w = [0u8; 8];
        d.read_back(j as usize * 8, &mut w)?;
        return Ok(pattern.first_difference(offset + j * 8, &w));
    }
    let whole = words as usize * 8;
    let mut tail = [0u8; 8];
    d.read_back(whole, &mut tail[..n - whole])?;
    Ok(pattern.first_difference(offset + whole as u64, &tail[..n - whole]))
}

/// Device memory read back in chunks through pinned buffers, on `threads` threads.
fn read_back_difference(pattern: Pattern, offset: u64, n: usize, buf: &mut Buffer, threads: usize) -> Result<Option<u64>, String> {
    let Buffer::Device(d) = buf else { unreachable!("called for device memory") };
    let mut lent = std::mem::take(&mut d.bounce);
    let mut scratch: Vec<Buffer> = Vec::new();
    let threads = threads.min(n.div_ceil(READ_BACK_CHUNK)).max(1);
    if lent.is_empty() {
        scratch = (0..threads).map(|_| Buffer::host(READ_BACK_CHUNK.min(n.max(1)))).collect();
    }
    let d = &*d;
    let result = {
        let mut rbs: Vec<&mut Buffer> = lent.iter_mut().chain(scratch.iter_mut()).take(threads).collect();
        let count = rbs.len();
        std::thread::scope(|sc| {
            let hs: Vec<_> = rbs
                .iter_mut()
                .enumerate()
                .map(|(t, rb)| {
                    sc.spawn(move || -> Result<Option<u64>, String> {
                        let chunk = rb.as_host_mut().expect("read-back buffers are host memory");
                        let step = chunk.len();
                        // Thread t reads back chunks t, t + count, ... in order.
                        for start in (t * step..n).step_by(step * count) {
                            let len = step.min(n - start);
                            d.read_back(start, &mut chunk[..len])?;
                            if let Some(at) = pattern.first_difference(offset + start as u64, &chunk[..len]) {
                                return Ok(Some(at));
                            }
                        }
                        Ok(None)
                    })
                })
                .collect();
            let mut first: Option<u64> = None;
            for h in hs {
                if let Some(at) = h.join().map_err(|_| "a checking thread panicked".to_string())?? {
                    first = Some(first.map_or(at, |f| f.min(at)));
                }
            }
            Ok(first)
        })
    };
    if let Buffer::Device(d) = buf {
        d.bounce = lent;
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filled(key: &str, offset: u64, n: usize) -> Buffer {
        let mut b = Buffer::host(n);
        Pattern::of(key).fill(offset, b.as_host_mut().unwrap());
        b
    }

    /// On a GPU: the kernel finds nothing in the pattern's bytes and the
    /// exact first byte of a flipped one, aligned and in the tail word.
    #[test]
    fn device_memory_is_checked_on_the_gpu() {
        let gpu = match crate::mem::Gpu::open(0) {
            Ok(g) => g,
            Err(e) => {
                eprintln!("skipping device_memory_is_checked_on_the_gpu: no GPU ({e})");
                return;
            }
        };
        let (key, offset, n) = ("obj/gpu", 4096u64 * 8, (8 << 20) + 5);
        let host = filled(key, offset, n);
        let mut d = Buffer::for_dest(crate::mem::Dest::Device, Some(&gpu), n, 0, 0).unwrap();
        d.copy_from_host(0, host.as_host().unwrap()).unwrap();
        let Buffer::Device(dev) = &d else { unreachable!() };
        assert_eq!(on_gpu(Pattern::of(key), offset, n, dev).unwrap(), None);
        assert_eq!(on_gpu(Pattern::of("obj/other"), offset, n, dev).unwrap(), Some(offset), "another object's bytes differ at once");
        for at in [3_000_003usize, n - 2] {
            let mut d2 = Buffer::for_dest(crate::mem::Dest::Device, Some(&gpu), n, 0, 0).unwrap();
            d2.copy_from_host(0, host.as_host().unwrap()).unwrap();
            d2.copy_from_host(at, &[host.as_host().unwrap()[at] ^ 4]).unwrap();
            assert_eq!(first_difference(key, offset, n as u64, &mut d2, 4).unwrap(), Some(offset + at as u64), "a flip at {at}");
        }
    }

    #[test]
    fn pieces_cover_every_byte_once_in_order() {
        for (n, t) in [(0, 4), (7, 3), (MIN_PIECE * 3 + 5, 4), (MIN_PIECE * 16, 16), (100 << 20, 1)] {
            let ps = pieces(n, t);
            assert!(ps.len() <= t.max(1), "{n}/{t}: {} pieces", ps.len());
            let mut at = 0;
            for p in &ps {
                assert_eq!(p.start, at, "{n}/{t}");
                assert_eq!(p.start % 8, 0);
                at = p.end;
            }
            assert_eq!(at, n, "{n}/{t}");
        }
    }

    #[test]
    fn the_first_flipped_byte_is_found_on_any_thread_count() {
        let n = 3 * MIN_PIECE + 13;
        for threads in [1, 2, 3, 8] {
            let mut b = filled("fetch/k", 5, n);
            assert_eq!(first_difference("fetch/k", 5, n as u64, &mut b, threads).unwrap(), None, "{threads}");
            // Two bytes flipped in different pieces: the earlier is named.
            let h = b.as_host_mut().unwrap();
            h[2 * MIN_PIECE + 1] ^= 1;
            h[n - 1] ^= 0x80;
            assert_eq!(first_difference("fetch/k", 5, n as u64, &mut b, threads).unwrap(), Some(5 + 2 * MIN_PIECE as u64 + 1), "{threads}");
            // Only the bytes asked for are checked.
            assert_eq!(first_difference("fetch/k", 5, MIN_PIECE as u64, &mut b, threads).unwrap(), None);
        }
        // Another key's bytes never pass.
        let mut other = filled("fetch/other", 0, 4096);
        assert_eq!(first_difference("fetch/k", 0, 4096, &mut other, 2).unwrap(), Some(0));
    }

    #[test]
    fn more_bytes_than_the_buffer_is_an_error() {
        let mut b = filled("k", 0, 64);
        assert!(first_difference("k", 0, 65, &mut b, 1).unwrap_err().contains("65 bytes to check"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn checks_off_the_runtime_workers() {
        let mut b = filled("fetch/k", 0, MIN_PIECE * 2);
        b.as_host_mut().unwrap()[MIN_PIECE + 3] ^= 4;
        assert_eq!(first_difference("fetch/k", 0, (MIN_PIECE * 2) as u64, &mut b, 4).unwrap(), Some(MIN_PIECE as u64 + 3));
    }

    #[test]
    fn a_flipped_byte_in_device_memory_is_found() {
        use crate::mem::{Dest, Gpu};
        let gpu = match Gpu::open(0) {
            Ok(g) => g,
            Err(e) => {
                println!("SKIP a_flipped_byte_in_device_memory_is_found: {e}");
                return;
            }
        };
        let n = 3 * READ_BACK_CHUNK + 4099;
        let src = filled("fetch/dev", 16, n);
        // With its own bounce buffers (staged stores) and without (stores that write device memory).
        for bounce in [3, 0] {
            let mut dev = Buffer::for_dest(Dest::Device, Some(&gpu), n, bounce, 1 << 20).unwrap();
            dev.copy_from_host(0, src.as_host().unwrap()).unwrap();
            assert_eq!(first_difference("fetch/dev", 16, n as u64, &mut dev, 4).unwrap(), None, "{bounce}");
            let at = 2 * READ_BACK_CHUNK + 5;
            let mut one = [0u8; 1];
            dev.copy_to_host(at, &mut one).unwrap();
            one[0] ^= 0x40;
            dev.copy_from_host(at, &one).unwrap();
            assert_eq!(first_difference("fetch/dev", 16, n as u64, &mut dev, 4).unwrap(), Some(16 + at as u64), "{bounce}");
            let Buffer::Device(d) = &dev else { unreachable!() };
            assert_eq!(d.bounce.len(), bounce, "the bounce buffers are given back");
            println!("device memory, {bounce} bounce buffers: the flipped byte found");
        }
    }
}
