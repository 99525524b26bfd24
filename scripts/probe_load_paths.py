#!/usr/bin/env python3
"""Where a warm load into GPU memory can go: the paths from page-cache files to
device memory, each timed alone on the same files, so the weights pipeline is
chosen on measurement.

    python3 scripts/probe_load_paths.py --dir /tmp/probe --gib 16 --files 4 --rounds 3

Paths (each a fresh pass over every file, page cache warm, T threads, C-byte chunks):
  - h2d-pinned: pinned host -> device, the PCIe ceiling (4 streams);
  - pread-host: pread into pageable host memory (no GPU): the page cache copy rate;
  - pread-ring: pread into a pinned ring (2 buffers a thread), each buffer's
    copy on its own stream (today's staged pipeline, without tokio);
  - reg-direct: mmap the file, cuMemHostRegister(READ_ONLY) each chunk of
    page-cache pages, copy from it directly (no CPU copy), unregister;
  - reg-only: the registration alone (register + unregister), no copy.
Driver calls through ctypes (libcuda), which drops the GIL for every call.
Prints one table last; writes JSON to --out when given.
"""
import argparse, ctypes, json, mmap, os, statistics, threading, time

import numpy as np
import torch

cu = ctypes.CDLL("libcuda.so.1")
libc = ctypes.CDLL("libc.so.6", use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
CU_MEMHOSTREGISTER_PORTABLE, CU_MEMHOSTREGISTER_READ_ONLY = 1, 8


def ck(r, what):
    if r != 0:
        raise RuntimeError(f"{what} failed: CUresult {r}")


torch.cuda.init()
torch.zeros(1, device="cuda")
ctx = ctypes.c_void_p()
dev = ctypes.c_int()
ck(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
ck(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")


def bind():
    ck(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")


def stream():
    s = ctypes.c_void_p()
    ck(cu.cuStreamCreate(ctypes.byref(s), 1), "cuStreamCreate")
    return s


def pinned(n):
    p = ctypes.c_void_p()
    ck(cu.cuMemHostAlloc(ctypes.byref(p), ctypes.c_size_t(n), 0), "cuMemHostAlloc")
    return p.value


def h2d(dptr, src, n, s):
    ck(cu.cuMemcpyHtoDAsync_v2(ctypes.c_uint64(dptr), ctypes.c_void_p(src), ctypes.c_size_t(n), s), "cuMemcpyHtoDAsync")


def sync(s):
    ck(cu.cuStreamSynchronize(s), "cuStreamSynchronize")


def chunks(files, chunk):
    """(file index, offset, length) over every file, in order."""
    out = []
    for i, (_, size) in enumerate(files):
        off = 0
        while off < size:
            out.append((i, off, min(chunk, size - off)))
            off += chunk
    return out


def run_threads(n, work):
    """Run work(thread index) on n threads; return wall seconds."""
    errs = []

    def wrap(t):
        try:
            bind()
            work(t)
        except Exception as e:  # noqa: BLE001 - reported below
            errs.append(e)

    ths = [threading.Thread(target=wrap, args=(t,)) for t in range(n)]
    t0 = time.perf_counter()
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    if errs:
        raise errs[0]
    return time.perf_counter() - t0


def queue(items):
    lock, it = threading.Lock(), iter(items)

    def take():
        with lock:
            return next(it, None)

    return take


def pread_host(files, fds, dst, threads, chunk):
    base = []
    acc = 0
    for _, size in files:
        base.append(acc)
        acc += size
    take = queue(chunks(files, chunk))
    mv = memoryview(dst)

    def work(_t):
        while (c := take()) is not None:
            i, off, n = c
            got = os.preadv(fds[i], [mv[base[i] + off:base[i] + off + n]], off)
            assert got == n, (got, n)

    return work


# Pinned rings and streams for pread-ring, made once per (threads, chunk) and
# reused by every round: pinning is paid before the timed window, as the
# s3rdma pipeline pays it before its load.
RINGS = {}


def pread_ring(files, fds, dptrs, threads, chunk):
    take = queue(chunks(files, chunk))
    if (threads, chunk) not in RINGS:
        RINGS[(threads, chunk)] = [([pinned(chunk) for _ in range(2)], [stream() for _ in range(2)]) for _ in range(threads)]
    rings = RINGS[(threads, chunk)]

    def work(t):
        bufs, ss = rings[t]
        views = [memoryview((ctypes.c_char * chunk).from_address(b)).cast("B") for b in bufs]
        k = 0
        while (c := take()) is not None:
            i, off, n = c
            sync(ss[k])
            got = os.preadv(fds[i], [views[k][:n]], off)
            assert got == n, (got, n)
            h2d(dptrs[i] + off, bufs[k], n, ss[k])
            k ^= 1
        for s in ss:
            sync(s)

    return work


def reg_direct(files, maps, dptrs, threads, chunk, copy=True):
    take = queue(chunks(files, chunk))

    def work(_t):
        s = stream()
        pending = []  # registered chunks whose copy may be in flight: overlap one register with one copy
        while (c := take()) is not None:
            i, off, n = c
            p = maps[i] + off
            ck(cu.cuMemHostRegister_v2(ctypes.c_void_p(p), ctypes.c_size_t(n), CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_READ_ONLY), "cuMemHostRegister")
            if copy:
                h2d(dptrs[i] + off, p, n, s)
            pending.append(p)
            if len(pending) > 1:
                sync(s)
                for q in pending[:-1]:
                    ck(cu.cuMemHostUnregister(ctypes.c_void_p(q)), "cuMemHostUnregister")
                pending = pending[-1:]
        sync(s)
        for q in pending:
            ck(cu.cuMemHostUnregister(ctypes.c_void_p(q)), "cuMemHostUnregister")

    return work


def h2d_ceiling(total):
    n = min(total, 4 << 30)
    src = pinned(n)
    ctypes.memset(src, 1, n)
    d = torch.empty(n, dtype=torch.uint8, device="cuda")
    ss = [stream() for _ in range(4)]
    q = n // 4

    def once():
        t0 = time.perf_counter()
        for k, s in enumerate(ss):
            h2d(d.data_ptr() + k * q, src + k * q, q, s)
        for s in ss:
            sync(s)
        return time.perf_counter() - t0

    once()
    t = min(once() for _ in range(3))
    cu.cuMemFreeHost(ctypes.c_void_p(src))
    return n / t / 1e9


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--gib", type=int, default=16)
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", default="4,8,16")
    ap.add_argument("--chunks-mib", default="16,64")
    ap.add_argument("--out")
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    size = (a.gib << 30) // a.files
    block = np.random.default_rng(7).integers(0, 255, 64 << 20, dtype=np.uint8).tobytes()
    files = []
    for i in range(a.files):
        f = os.path.join(a.dir, f"shard-{i}.bin")
        if not os.path.exists(f) or os.path.getsize(f) != size:
            with open(f, "wb") as w:
                for _ in range(size // len(block)):
                    w.write(block)
        files.append((f, size))
    fds = [os.open(f, os.O_RDONLY) for f, _ in files]
    for fd, (_, n) in zip(fds, files):  # warm the page cache
        while os.read(fd, 64 << 20):
            pass
        os.lseek(fd, 0, 0)
    total = size * a.files
    maps = []
    for fd, (_, n) in zip(fds, files):
        p = libc.mmap(None, n, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        assert p not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
        maps.append(p)
    dev_bufs = [torch.empty(n, dtype=torch.uint8, device="cuda") for _, n in files]
    dptrs = [b.data_ptr() for b in dev_bufs]
    host = np.empty(total, dtype=np.uint8)
    host.fill(0)
    bind()
    rows = {"h2d-pinned 4 streams": [h2d_ceiling(total)]}
    variants = []
    for t in map(int, a.threads.split(",")):
        for c in map(int, a.chunks_mib.split(",")):
            c <<= 20
            variants += [
                (f"pread-host T{t} C{c >> 20}M", t, lambda t=t, c=c: pread_host(files, fds, host, t, c)),
                (f"pread-ring T{t} C{c >> 20}M", t, lambda t=t, c=c: pread_ring(files, fds, dptrs, t, c)),
                (f"reg-direct T{t} C{c >> 20}M", t, lambda t=t, c=c: reg_direct(files, maps, dptrs, t, c)),
                (f"reg-only T{t} C{c >> 20}M", t, lambda t=t, c=c: reg_direct(files, maps, dptrs, t, c, copy=False)),
            ]
    errors = {}
    for _ in range(a.rounds):
        for name, t, make in variants:
            if name in errors:
                continue
            try:
                wall = run_threads(t, make())
                rows.setdefault(name, []).append(total / wall / 1e9)
            except Exception as e:  # noqa: BLE001 - a path that fails is a row that says so
                errors[name] = str(e)
    # Check what reg-direct last put in device memory against the file.
    check = torch.frombuffer(bytearray(block[:1 << 20]), dtype=torch.uint8)
    ok = all(bool(torch.equal(b[:1 << 20].cpu(), check)) for b in dev_bufs)
    if a.out:
        with open(a.out, "w") as w:
            json.dump({"gbps": rows, "errors": errors, "total_bytes": total, "device_bytes_match": ok}, w, indent=1)
    print(f"{total / 1e9:.2f} GB in {a.files} files, page cache warm; device bytes match the file: {ok}")
    print(f"{'path':28} {'GB/s median':>11} {'min':>7} {'max':>7}")
    for name, v in rows.items():
        print(f"{name:28} {statistics.median(v):11.2f} {min(v):7.2f} {max(v):7.2f}")
    for name, e in errors.items():
        print(f"{name:28} FAILED: {e}")


if __name__ == "__main__":
    main()
