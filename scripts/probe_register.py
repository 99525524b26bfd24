#!/usr/bin/env python3
"""Probe: can page-cache pages be DMA'd to the GPU directly, with no CPU copy?

Each file is mapped (mmap, read-only, MAP_POPULATE), the mapping registered
with the driver (cuMemHostRegister, CU_MEMHOSTREGISTER_READ_ONLY) and copied
to device memory by the copy engines (cuMemcpyHtoDAsync); then unregistered.
Ways, each timed end to end (registration included):
  whole:     every file mapped, registered and copied at once (one stream per file);
  chunked:   THREADS threads, each registering, copying and unregistering
             CHUNK-byte pieces on its own stream, double-buffered;
  pipelined: REG_THREADS threads register CHUNK-byte pieces in file order and
             start each piece's copy at once (4 streams per thread); the pieces
             are unregistered only after the last copy, timed apart ("ready"
             is when the last copy ends);
  hybrid:    the first FRACTION of every file as pipelined, the rest read
             with pread into pinned buffers by PREAD_THREADS threads
             (double-buffered, CHUNK-byte pieces) and copied from there, both
             at once (PREAD_CHUNK-byte pieces for pread).
Prints GB/s (1e9 B/s) per way, and the pinned-copy ceiling for reference
(a pinned buffer copied to the device). Warm page cache: the files are read
first. Needs torch (for the CUDA context) and libcuda.

    python3 scripts/probe_register.py FILE... [--chunk-mib 256] [--threads 8]
        [--modes whole,chunked,pipelined,hybrid] [--reg-threads 1]
        [--pread-threads 14] [--pread-chunk-mib 16] [--fractions 0.3,0.5]
"""

import argparse
import ctypes
import mmap
import os
import threading
import time

import torch

READ_ONLY = 0x08
cuda = ctypes.CDLL("libcuda.so.1")
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
cuda.cuMemHostRegister_v2.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint]
cuda.cuMemHostUnregister.argtypes = [ctypes.c_void_p]
cuda.cuMemcpyHtoDAsync_v2.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
cuda.cuStreamSynchronize.argtypes = [ctypes.c_void_p]
cuda.cuStreamCreate.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint]
cuda.cuCtxGetCurrent.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
cuda.cuCtxSetCurrent.argtypes = [ctypes.c_void_p]
MAP_POPULATE = 0x8000


def ok(rc, what):
    if rc != 0:
        raise SystemExit(f"{what} failed: CUresult {rc}")


def stream():
    s = ctypes.c_void_p()
    ok(cuda.cuStreamCreate(ctypes.byref(s), 1), "cuStreamCreate")
    return s


def mapped(path):
    fd = os.open(path, os.O_RDONLY)
    n = os.fstat(fd).st_size
    a = libc.mmap(None, n, mmap.PROT_READ, mmap.MAP_SHARED | MAP_POPULATE, fd, 0)
    os.close(fd)
    if a in (None, ctypes.c_void_p(-1).value):
        raise SystemExit(f"mmap {path} failed")
    return a, n


def whole(files, dst):
    t0 = time.perf_counter()
    maps = [mapped(f) for f in files]
    t_map = time.perf_counter()
    for a, n in maps:
        ok(cuda.cuMemHostRegister_v2(a, n, READ_ONLY), "cuMemHostRegister")
    t_reg = time.perf_counter()
    off, ss = 0, []
    for a, n in maps:
        s = stream()
        ok(cuda.cuMemcpyHtoDAsync_v2(dst + off, a, n, s), "cuMemcpyHtoDAsync")
        ss.append(s)
        off += n
    for s in ss:
        ok(cuda.cuStreamSynchronize(s), "sync")
    t_copy = time.perf_counter()
    for a, n in maps:
        cuda.cuMemHostUnregister(a)
        libc.munmap(a, n)
    t_end = time.perf_counter()
    return off, {"map_s": t_map - t0, "register_s": t_reg - t_map, "copy_s": t_copy - t_reg, "unregister_s": t_end - t_copy, "total_s": t_end - t0}


def take(lock, work):
    """The next piece of the shared list `work`, or None when it is empty."""
    with lock:
        return work.pop(0) if work else None


def chunked(files, dst, chunk, threads):
    ctx = ctypes.c_void_p()
    ok(cuda.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
    t0 = time.perf_counter()
    maps = [mapped(f) for f in files]
    work, off = [], 0
    for a, n in maps:
        for o in range(0, n, chunk):
            # Registration works on whole pages: each piece starts page-aligned.
            work.append((a + o, min(chunk, n - o), dst + off + o))
        off += n
    lock = threading.Lock()
    errors = []

    def run():
        cuda.cuCtxSetCurrent(ctx)
        s = [stream(), stream()]
        held = [None, None]
        turn = 0
        while (piece := take(lock, work)) is not None:
            a, n, d = piece
            i = turn % 2
            turn += 1
            if held[i]:
                cuda.cuStreamSynchronize(s[i])
                cuda.cuMemHostUnregister(held[i])
            rc = cuda.cuMemHostRegister_v2(a, n, READ_ONLY)
            if rc:
                errors.append(rc)
                break
            cuda.cuMemcpyHtoDAsync_v2(d, a, n, s[i])
            held[i] = a
        for i in range(2):
            if held[i]:
                cuda.cuStreamSynchronize(s[i])
                cuda.cuMemHostUnregister(held[i])

    ts = [threading.Thread(target=run) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    t_end = time.perf_counter()
    for a, n in maps:
        libc.munmap(a, n)
    if errors:
        raise SystemExit(f"cuMemHostRegister failed: CUresult {errors[0]}")
    return off, {"total_s": t_end - t0}


def pieces(maps, dst, chunk, lo=0.0, hi=1.0):
    """(host address, length, device address) of every CHUNK piece of the
    [lo, hi) share of every mapped file, page-aligned starts, in file order."""
    out, off = [], 0
    for a, n in maps:
        start = (int(n * lo) // 4096) * 4096
        end = n if hi >= 1.0 else (int(n * hi) // 4096) * 4096
        for o in range(start, end, chunk):
            out.append((a + o, min(chunk, end - o), dst + off + o))
        off += n
    return out


def register_pipeline(work, ctx, threads, done, errors):
    """Register and copy `work` pieces on `threads` threads, pieces handed
    out in order; registered addresses appended to `done`."""
    lock = threading.Lock()
    work = list(work)

    def run():
        cuda.cuCtxSetCurrent(ctx)
        ss = [stream() for _ in range(4)]
        k = 0
        while (piece := take(lock, work)) is not None:
            a, n, d = piece
            rc = cuda.cuMemHostRegister_v2(a, n, READ_ONLY)
            if rc:
                errors.append(rc)
                break
            cuda.cuMemcpyHtoDAsync_v2(d, a, n, ss[k % 4])
            k += 1
            with lock:
                done.append(a)
        for s in ss:
            cuda.cuStreamSynchronize(s)

    return [threading.Thread(target=run) for _ in range(threads)]


def pread_pipeline(files, work, ctx, bufs):
    """Read `work` pieces (file index, offset, length, device address) with
    pread into each thread's two pinned buffers `bufs[t]`, and copy them."""
    lock = threading.Lock()
    work = list(work)
    fds = [os.open(f, os.O_RDONLY) for f in files]

    def run(t):
        cuda.cuCtxSetCurrent(ctx)
        ss = [stream(), stream()]
        views = [memoryview(b.numpy()) for b in bufs[t]]
        busy = [False, False]
        k = 0
        while (piece := take(lock, work)) is not None:
            fi, o, n, d = piece
            i = k % 2
            k += 1
            if busy[i]:
                cuda.cuStreamSynchronize(ss[i])
            got = os.preadv(fds[fi], [views[i][:n]], o)
            if got != n:
                raise SystemExit(f"short read {got} of {n}")
            cuda.cuMemcpyHtoDAsync_v2(d, bufs[t][i].data_ptr(), n, ss[i])
            busy[i] = True
        for s in ss:
            cuda.cuStreamSynchronize(s)

    return [threading.Thread(target=run, args=(t,)) for t in range(len(bufs))], fds


def mixed(files, dst, chunk, reg_threads, bufs, fraction):
    """`fraction` of every file by registration (pipelined), the rest by pread; both at once."""
    ctx = ctypes.c_void_p()
    ok(cuda.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
    t0 = time.perf_counter()
    maps = [mapped(f) for f in files]
    reg = pieces(maps, dst, chunk, 0.0, fraction)
    done, errors = [], []
    ts = register_pipeline(reg, ctx, reg_threads, done, errors) if reg else []
    pw, off = [], 0
    for fi, (a, n) in enumerate(maps):
        start = n if fraction >= 1.0 else (int(n * fraction) // 4096) * 4096
        step = bufs[0][0].numel() if bufs else chunk
        for o in range(start, n, step):
            pw.append((fi, o, min(step, n - o), dst + off + o))
        off += n
    pts, fds = pread_pipeline(files, pw, ctx, bufs) if pw else ([], [])
    for t in ts + pts:
        t.start()
    for t in ts + pts:
        t.join()
    t_ready = time.perf_counter()
    for a in done:
        cuda.cuMemHostUnregister(a)
    t_unreg = time.perf_counter()
    for a, n in maps:
        libc.munmap(a, n)
    for fd in fds:
        os.close(fd)
    if errors:
        raise SystemExit(f"cuMemHostRegister failed: CUresult {errors[0]}")
    return off, {"ready_s": t_ready - t0, "unregister_s": t_unreg - t_ready}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--chunk-mib", type=int, default=256)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--modes", default="whole,chunked")
    ap.add_argument("--reg-threads", type=int, default=1)
    ap.add_argument("--pread-threads", type=int, default=14)
    ap.add_argument("--fractions", default="0.3,0.5")
    ap.add_argument("--pread-chunk-mib", type=int, default=16)
    args = ap.parse_args()
    modes = args.modes.split(",")
    torch.cuda.init()
    torch.empty(1, device="cuda")
    for f in args.files:
        with open(f, "rb") as fh:
            while fh.read(64 << 20):
                pass
    total = sum(os.path.getsize(f) for f in args.files)
    dst = torch.empty(total, dtype=torch.uint8, device="cuda")
    d = dst.data_ptr()
    pin = torch.empty(1 << 30, dtype=torch.uint8, pin_memory=True)
    chunk = args.chunk_mib << 20
    # The pread threads' pinned buffers, made before any timed load.
    bufs = [[torch.empty(args.pread_chunk_mib << 20, dtype=torch.uint8, pin_memory=True) for _ in range(2)] for _ in range(args.pread_threads)] if "hybrid" in modes else []
    for r in range(args.rounds):
        if "whole" in modes:
            n, w = whole(args.files, d)
            print(f"round {r + 1} whole:   {n / 1e9:.2f} GB in {w['total_s']:.3f} s = {n / w['total_s'] / 1e9:.1f} GB/s "
                  f"(map {w['map_s']:.3f}, register {w['register_s']:.3f}, copy {w['copy_s']:.3f} = {n / w['copy_s'] / 1e9:.1f} GB/s, unregister {w['unregister_s']:.3f})", flush=True)
        if "chunked" in modes:
            n, c = chunked(args.files, d, chunk, args.threads)
            print(f"round {r + 1} chunked: {n / 1e9:.2f} GB in {c['total_s']:.3f} s = {n / c['total_s'] / 1e9:.1f} GB/s "
                  f"({args.threads} threads, {args.chunk_mib} MiB pieces, registration included)", flush=True)
        if "pipelined" in modes:
            n, p = mixed(args.files, d, chunk, args.reg_threads, [], 1.0)
            print(f"round {r + 1} pipelined: {n / 1e9:.2f} GB ready in {p['ready_s']:.3f} s = {n / p['ready_s'] / 1e9:.1f} GB/s "
                  f"({args.reg_threads} registering threads, {args.chunk_mib} MiB pieces; unregister after: {p['unregister_s']:.3f} s)", flush=True)
        if "hybrid" in modes:
            for f in [float(x) for x in args.fractions.split(",")]:
                n, p = mixed(args.files, d, chunk, args.reg_threads, bufs, f)
                print(f"round {r + 1} hybrid {f:.2f}: {n / 1e9:.2f} GB ready in {p['ready_s']:.3f} s = {n / p['ready_s'] / 1e9:.1f} GB/s "
                      f"({args.reg_threads} registering, {args.pread_threads} pread threads, {args.chunk_mib} MiB pieces; unregister after: {p['unregister_s']:.3f} s)", flush=True)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(4):
            dst[: 1 << 30].copy_(pin, non_blocking=True)
        torch.cuda.synchronize()
        print(f"round {r + 1} pinned ceiling: 4 GiB in {time.perf_counter() - t0:.3f} s = {4 * (1 << 30) / (time.perf_counter() - t0) / 1e9:.1f} GB/s", flush=True)


if __name__ == "__main__":
    main()
