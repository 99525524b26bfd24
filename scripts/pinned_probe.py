#!/usr/bin/env python3
"""What page-locked host memory costs on this host (on the path to a weights
load's time to ready: docs/gpu.md): the driver's own allocator against
allocating and touching ordinary memory, then registering it, with 4 KiB pages
and with transparent huge pages. Why
src/mem/host.rs registers rather than calls cuMemHostAlloc.

    python3 scripts/pinned_probe.py [--buffers 16] [--size-mib 64]

Talks to libcuda.so.1 directly through ctypes (no torch, no build), one
process, GPU 0. Writes results/pinned-probe-<stamp>-<tag>.json and prints a
table. Each way runs twice, interleaved; every figure is kept.
"""

import argparse
import ctypes
import datetime
import json
import mmap
import os
import platform
import threading
import time

MiB = 1 << 20
HUGE = 2 * MiB
MADV_HUGEPAGE = 14


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--buffers", type=int, default=16)
    ap.add_argument("--size-mib", type=int, default=64)
    ap.add_argument("--tag", default="gpu")
    a = ap.parse_args()
    n, size = a.buffers, a.size_mib * MiB
    cu = ctypes.CDLL("libcuda.so.1")
    libc = ctypes.CDLL(None)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    cu.cuMemHostAlloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_uint]
    cu.cuMemFreeHost.argtypes = [ctypes.c_void_p]
    cu.cuMemHostRegister_v2.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint]
    cu.cuMemHostUnregister.argtypes = [ctypes.c_void_p]

    def ck(r, what):
        if r != 0:
            raise SystemExit(f"{what}: CUresult {r}")

    t = time.perf_counter()
    ck(cu.cuInit(0), "cuInit")
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    ck(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    ck(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    ck(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    init_s = time.perf_counter() - t

    def host_alloc():
        t = time.perf_counter()
        ps = []
        for _ in range(n):
            p = ctypes.c_void_p()
            ck(cu.cuMemHostAlloc(ctypes.byref(p), size, 0), "cuMemHostAlloc")
            ps.append(p.value)
        alloc = time.perf_counter() - t
        for p in ps:
            libc.memset(p, 0, size)
        total = time.perf_counter() - t
        for p in ps:
            cu.cuMemFreeHost(p)
        return {"way": "cuMemHostAlloc, then touch (one thread)", "alloc_s": alloc, "touch_s": total - alloc, "register_s": 0.0, "total_s": total}

    def register(huge):
        t = time.perf_counter()
        span = n * size + HUGE
        raw = libc.mmap(None, span, 3, 0x22, -1, 0)  # PROT_READ|WRITE, MAP_PRIVATE|ANONYMOUS
        p = (raw + HUGE - 1) & ~(HUGE - 1)
        if huge:
            libc.madvise(p, n * size, MADV_HUGEPAGE)
        ts = [threading.Thread(target=libc.memset, args=(p + i * size, 0, size)) for i in range(n)]
        [x.start() for x in ts]
        [x.join() for x in ts]
        touch = time.perf_counter() - t
        t = time.perf_counter()
        for i in range(n):
            ck(cu.cuMemHostRegister_v2(p + i * size, size, 0), "cuMemHostRegister")
        reg = time.perf_counter() - t
        for i in range(n):
            cu.cuMemHostUnregister(p + i * size)
        libc.munmap(raw, span)
        pages = "transparent huge pages (madvise)" if huge else "4 KiB pages"
        return {"way": f"allocate + touch ({n} threads), {pages}, then cuMemHostRegister", "alloc_s": 0.0, "touch_s": touch, "register_s": reg, "total_s": touch + reg}

    runs = []
    for rnd in (1, 2):
        for f in (host_alloc, lambda: register(False), lambda: register(True)):
            r = f()
            r["round"] = rnd
            runs.append(r)
    thp = {k: open(f"/sys/kernel/mm/transparent_hugepage/{k}").read().strip() for k in ("enabled", "defrag") if os.path.exists(f"/sys/kernel/mm/transparent_hugepage/{k}")}
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    rec = {"schema_version": 1, "benchmark": "pinned-probe", "timestamp": stamp, "tag": a.tag, "buffers": n, "buffer_bytes": size,
           "host": {"kernel": platform.release(), "cpus": os.cpu_count(), "thp": thp}, "cuinit_and_context_s": init_s, "runs": runs}
    os.makedirs("results", exist_ok=True)
    out = f"results/pinned-probe-{stamp}-{a.tag}.json"
    with open(out + ".tmp", "w") as fh:
        json.dump(rec, fh, indent=1)
    os.replace(out + ".tmp", out)
    print(f"cuInit + primary context: {init_s:.3f} s; THP {thp}")
    print(f"{n} x {a.size_mib} MiB pinned    alloc s  touch s  register s  total s")
    for r in runs:
        print(f"{r['way'][:60]:60} {r['alloc_s']:7.3f} {r['touch_s']:8.3f} {r['register_s']:11.3f} {r['total_s']:8.3f}")
    print(f"record: {out}")


if __name__ == "__main__":
    main()
