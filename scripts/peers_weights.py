#!/usr/bin/env python3
"""Model-load peers harness: s3rdma weights against the
strongest Python loaders, in one run, interleaved, on the same files, warm and
cold, into GPU memory. Writes one record to results/ and prints a table.

    python3 scripts/peers_weights.py --s3rdma .carry/s3rdma --root /tmp/w --model m/llama --rounds 2

Each load runs in a fresh process (the loader's own timed window: first file
open to every tensor on the GPU, CUDA already initialised; exec to ready:
spawn to every tensor usable, interpreter, imports and CUDA start included
(s3rdma: the record's `results.ready`, from the kernel's process start); and
the whole process, exec to exit). Rounds interleave the loaders, warm then cold, so a
drift of the machine hits every loader alike. Cold: the page cache is emptied
before the load (`echo 3 > /proc/sys/vm/drop_caches` as root, else
posix_fadvise(DONTNEED) on every shard; the record says which) and checked
with `fincore` where it exists. Warm: the shards are read once through the
page cache first.

Loaders, at each one's documented best settings for one GPU:
  - s3rdma weights, default flags and hand-tuned flags (page cache; its
    --direct reads skip it).
  - safetensors load_file(device="cuda") (mmap: page cache).
  - fastsafetensors SafeTensorsFileLoader, nogds, 16 threads: its default
    reads (O_DIRECT on local filesystems: skip the page cache) and buffered
    reads (FASTSAFETENSORS_ODIRECT=0: page cache).
  - InstantTensor 0.2.x safe_open over all files at once (the fast loader vLLM
    and SGLang document): its default (Direct I/O on disk files, MMAP on
    tmpfs), BackendPolicy.BUFFERED and Backend.MMAP (page cache).
  - runai-model-streamer SafetensorsStreamer, RUNAI_STREAMER_CONCURRENCY=64,
    no memory limit (its reads skip the page cache where O_DIRECT works).
  - over S3 (--endpoint, e.g. nginx serving --root as path-style
    /<bucket>/<key>): s3rdma-http (weights --backend http, default flags)
    and runai-s3-cN, runai-model-streamer's S3 reader
    (RUNAI_STREAMER_CONCURRENCY=N, RUNAI_STREAMER_MEMORY_LIMIT=-1,
    path-style: RUNAI_STREAMER_S3_USE_VIRTUAL_ADDRESSING=0), N in 8/16/32/64;
    "cache" is then the server's page cache. safetensors and fastsafetensors
    read local files only.
  - disk-odirect-qN: no loader, the disk itself: every shard read with
    O_DIRECT in 16 MiB preads by N threads (N reads in flight) into host
    memory, nothing copied to the GPU: the rate a cold load can approach,
    measured in the same run, same files, same cache state.

The record is rewritten (temporary name, then rename) after every load, so a
run cut short keeps what it measured.
"""

import argparse
import collections
import datetime
import functools
import glob
import json
import os
import platform
import statistics
import subprocess
import sys
import time

LOADERS = {
    "s3rdma-default": {"reads": "page cache", "settings": "weights --dest device (default flags: chosen from the host, see the record's environment)"},
    "s3rdma-tuned": {"reads": "page cache", "settings": "weights --dest device --io-threads 4 --stage-chunk 64MiB --bounce-buffers 32"},
    "safetensors": {"reads": "page cache (mmap)", "settings": "load_file(f, device='cuda') per shard"},
    "fastsafetensors": {"reads": "O_DIRECT (skips the page cache)", "settings": "SafeTensorsFileLoader(nogds=True, max_threads=16), default reads"},
    "fastsafetensors-buffered": {"reads": "page cache", "settings": "as fastsafetensors, FASTSAFETENSORS_ODIRECT=0"},
    "instanttensor": {"reads": "O_DIRECT (URING, else AIO: its default for disk files; MMAP on tmpfs)", "settings": "safe_open(all files, device=0), default backend"},
    "instanttensor-buffered": {"reads": "page cache (URING_BUFFERED, else AIO_BUFFERED, else MMAP)", "settings": "safe_open(all files, device=0, backend=BackendPolicy.BUFFERED)"},
    "instanttensor-mmap": {"reads": "page cache (mmap)", "settings": "safe_open(all files, device=0, backend=Backend.MMAP)"},
    "runai": {"reads": "O_DIRECT where it works (skips the page cache)", "settings": "SafetensorsStreamer, RUNAI_STREAMER_CONCURRENCY=64, no memory limit"},
    "s3rdma-http": {"reads": "S3 over HTTP (ranged GETs)", "settings": "weights --backend http --dest device (default flags)"},
    **{f"runai-s3-c{n}": {"reads": "S3 over HTTP (its S3 reader)", "settings": f"SafetensorsStreamer on s3:// URIs, RUNAI_STREAMER_CONCURRENCY={n}, RUNAI_STREAMER_MEMORY_LIMIT=-1, path-style"}
       for n in (8, 16, 32, 64)},
    "disk-odirect-q16": {"reads": "O_DIRECT (the disk alone, into host memory)", "settings": "16 threads, 16 MiB preads, no GPU copy"},
    "disk-odirect-q64": {"reads": "O_DIRECT (the disk alone, into host memory)", "settings": "64 threads, 16 MiB preads, no GPU copy"},
}

# Block of one O_DIRECT pread of the disk probe.
DISK_BLOCK = 16 << 20


def disk_read(files, threads):
    """Read every file whole with O_DIRECT, `threads` preads of DISK_BLOCK in
    flight (os.preadv releases the GIL), in file order; returns bytes read."""
    import mmap
    import threading

    # In file order, as a loader reads: the threads take consecutive blocks,
    # so the disk sees one sequential region at a time.
    jobs = collections.deque((f, off) for f in files for off in range(0, os.path.getsize(f), DISK_BLOCK))
    lock = threading.Lock()
    total = [0]
    errors = []

    def worker():
        buf = mmap.mmap(-1, DISK_BLOCK)  # page-aligned, as O_DIRECT needs
        fds = {}
        try:
            while True:
                with lock:
                    if not jobs:
                        return
                    f, off = jobs.popleft()
                fd = fds.get(f)
                if fd is None:
                    fd = fds[f] = os.open(f, os.O_RDONLY | os.O_DIRECT)
                n = os.preadv(fd, [buf], off)
                with lock:
                    total[0] += n
        except OSError as e:
            errors.append(e)
        finally:
            for fd in fds.values():
                os.close(fd)
            buf.close()

    ts = [threading.Thread(target=worker) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise SystemExit(f"disk probe: {errors[0]}")
    return total[0]

# Flags of each s3rdma loader (--variant adds more).
S3RDMA_FLAGS = {"s3rdma-tuned": ["--io-threads", "4", "--stage-chunk", "64MiB", "--bounce-buffers", "32"]}

# The Python package behind each peer, for its version in the record.
PACKAGES = {"safetensors": "safetensors", **{k: "instanttensor" for k in ("instanttensor", "instanttensor-buffered", "instanttensor-mmap")}, "fastsafetensors": "fastsafetensors", "fastsafetensors-buffered": "fastsafetensors", "runai": "runai-model-streamer",
            **{f"runai-s3-c{n}": "runai-model-streamer-s3" for n in (8, 16, 32, 64)}}


def child(loader, files):
    """One load in this process; prints {"load_s", "bytes", "tensors"} as JSON."""
    if loader.startswith("disk-odirect-q"):
        t0 = time.perf_counter()
        n = disk_read(files, int(loader.rsplit("q", 1)[1]))
        print(json.dumps({"load_s": time.perf_counter() - t0, "bytes": n, "tensors": 0, "ready_at": time.time()}))
        return
    import torch

    torch.cuda.init()
    torch.empty(1, device="cuda")
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    sd = {}
    if loader == "safetensors":
        from safetensors.torch import load_file

        for f in files:
            sd.update(load_file(f, device="cuda"))
    elif loader.startswith("fastsafetensors"):
        from fastsafetensors import SafeTensorsFileLoader, SingleGroup

        ld = SafeTensorsFileLoader(SingleGroup(), "cuda:0", nogds=True, max_threads=16)
        ld.add_filenames({0: files})
        fb = ld.copy_files_to_device()
        for k in ld.get_keys():
            sd[k] = fb.get_tensor(k)
    elif loader.startswith("instanttensor"):
        # All files in one safe_open: its README says the backend then plans
        # reads across files ("typically higher throughput"). copy=True (its
        # default): every tensor owns its device memory, as the other loaders'.
        from instanttensor import Backend, BackendPolicy, safe_open

        backend = {"instanttensor": None, "instanttensor-buffered": BackendPolicy.BUFFERED, "instanttensor-mmap": Backend.MMAP}[loader]
        with safe_open(files, framework="pt", device=0, backend=backend) as f:
            for name, t in f.tensors():
                sd[name] = t
    elif loader == "runai" or loader.startswith("runai-s3"):
        from runai_model_streamer import SafetensorsStreamer

        with SafetensorsStreamer() as s:
            # runai-s3-*: `files` are s3://bucket/key URIs (run_one made them).
            s.stream_files(files, device="cuda")
            for name, t in s.get_tensors():
                sd[name] = t.to("cuda", non_blocking=True)
    else:
        raise SystemExit(f"unknown loader {loader}")
    torch.cuda.synchronize()
    load_s = time.perf_counter() - t0
    nbytes = sum(t.numel() * t.element_size() for t in sd.values())
    # ready_at: wall clock when the tensors were usable; the parent subtracts
    # its clock before the spawn (exec-to-ready, interpreter and CUDA start included).
    print(json.dumps({"load_s": load_s, "bytes": nbytes, "tensors": len(sd), "ready_at": time.time()}))


def evict(files):
    """Empty the page cache of `files`; returns how."""
    subprocess.run(["sync"], check=False)
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return "drop_caches"
    except OSError:
        for p in files:
            fd = os.open(p, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
        return "fadvise-dontneed"


def resident(files):
    """Bytes of `files` in the page cache: fincore, else mincore(2) through
    ctypes (the GPU machine has no fincore); None when neither works."""
    try:
        out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", *files], capture_output=True, text=True, check=True).stdout
        return sum(int(x) for x in out.split())
    except (OSError, subprocess.CalledProcessError, ValueError):
        pass
    try:
        import ctypes
        import mmap

        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
        libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        page, total = mmap.PAGESIZE, 0
        for p in files:
            n = os.path.getsize(p)
            if n == 0:
                continue
            fd = os.open(p, os.O_RDONLY)
            try:
                addr = libc.mmap(None, n, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
                if addr in (None, ctypes.c_void_p(-1).value):
                    return None
                vec = ctypes.create_string_buffer((n + page - 1) // page)
                rc = libc.mincore(addr, n, vec)
                libc.munmap(addr, n)
                if rc != 0:
                    return None
                total += sum(b & 1 for b in vec.raw) * page
            finally:
                os.close(fd)
        return total
    except (OSError, AttributeError):
        return None


def warm(files):
    for p in files:
        with open(p, "rb") as f:
            while f.read(64 << 20):
                pass


def run_one(loader, args, files):
    """One load in a fresh process: (record of the load, whole-process seconds)."""
    env = dict(os.environ)
    t0 = time.perf_counter()
    if loader.startswith("s3rdma"):
        if loader == "s3rdma-http":
            where = ["--backend", "http", "--endpoint", args.endpoint, "--bucket", args.bucket]
        else:
            where = ["--root", args.root]
        cmd = [args.s3rdma, "weights", *where, "--model", args.model, "--dest", "device", "--repeats", "1", "--json", "--results-dir", args.scratch]
        cmd += S3RDMA_FLAGS.get(loader, [])
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        proc_s = time.perf_counter() - t0
        if p.returncode != 0:
            return {"error": p.stderr.strip()[-400:]}, proc_s
        rec = json.loads(p.stdout)
        res = rec["results"]
        env_ = rec.get("environment", {})
        chosen = {"io_threads": env_.get("store", {}).get("io_threads"), "device_path": env_.get("device_path")}
        ready = res.get("ready", {})
        stats = env_.get("store_stats", {}).get("in_windows", {})
        chosen["direct_read_bytes"] = stats.get("direct_read_bytes")
        chosen["direct_fallback_bytes"] = stats.get("direct_fallback_bytes")
        v = res.get("verified")
        if v:
            c = v.get("checked") or {}
            # --verify: what was checked, the hashing inside the load (per
            # thread) and the check after it, which load_s does not include.
            chosen["verified"] = {"ok": v.get("ok"), "bytes_checked": c.get("bytes_checked"), "in_load_s": c.get("in_load_s"),
                                  "after_load_s": c.get("seconds"), "fallback": c.get("fallback")}
        stages = (res.get("repeats") or [{}])[0].get("stages")
        if stages:
            chosen["stages"] = {k: stages.get(k) for k in ("threads", "chunk_bytes", "bounce_buffers", "read_s", "copy_wait_s", "enqueue_s", "hash_s", "drain_s", "wall_s")}
        return {"load_s": res["summary"]["wall_s"]["median"], "bytes": res["bytes"], "tool_commit": rec.get("tool", {}).get("git_commit"), "chosen": chosen,
                "ready_s": ready.get("ready_s"), "ready_steps": ready}, proc_s
    if loader == "fastsafetensors-buffered":
        env["FASTSAFETENSORS_ODIRECT"] = "0"
    if loader == "runai":
        env["RUNAI_STREAMER_CONCURRENCY"] = "64"
    if loader.startswith("runai-s3-c"):
        # Its documented S3 settings: endpoint from AWS_ENDPOINT_URL, path-style
        # for a non-AWS server, no memory cap; keys from the environment.
        env.update({"AWS_ENDPOINT_URL": args.endpoint, "RUNAI_STREAMER_S3_USE_VIRTUAL_ADDRESSING": "0",
                    "RUNAI_STREAMER_CONCURRENCY": loader.rsplit("c", 1)[1], "RUNAI_STREAMER_MEMORY_LIMIT": "-1",
                    "AWS_EC2_METADATA_DISABLED": "true"})
        env.setdefault("AWS_DEFAULT_REGION", "us-east-1")
        files = [f"s3://{args.bucket}/{args.model}/{os.path.basename(f)}" for f in files]
    spawned = time.time()
    p = subprocess.run([sys.executable, __file__, "--child", loader, *files], capture_output=True, text=True, env=env)
    proc_s = time.perf_counter() - t0
    if p.returncode != 0:
        return {"error": p.stderr.strip()[-400:]}, proc_s
    r = json.loads(p.stdout.strip().splitlines()[-1])
    r["ready_s"] = r.pop("ready_at") - spawned
    return r, proc_s


def version(mod):
    try:
        from importlib.metadata import version as v

        return v(mod)
    except Exception:
        return None


@functools.lru_cache(maxsize=1)
def host():
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    df = subprocess.run(["df", "-hT", "."], capture_output=True, text=True).stdout.strip().splitlines()[-1]
    return {"hostname": platform.node(), "cpus": os.cpu_count(), "memory_bytes": mem, "gpu": gpu, "kernel": platform.release(), "filesystem": df}


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        return child(sys.argv[2], sys.argv[3:])
    ap = argparse.ArgumentParser()
    ap.add_argument("--s3rdma", required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("--model", default="m/llama")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--loaders", default=",".join(LOADERS))
    ap.add_argument("--caches", default="warm,cold")
    ap.add_argument("--tag", default="gpu")
    ap.add_argument("--endpoint", help="S3 endpoint serving --root path-style (for s3rdma-http and runai-s3-cN)")
    ap.add_argument("--bucket", default="s3rdma-bench", help="the bucket the S3 loaders read (a directory under --root)")
    ap.add_argument("--baseline", default="s3rdma-default", help="the loader the table compares each one with")
    ap.add_argument("--results-dir", default="results", help="where the record goes")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=FLAGS",
                    help="one more s3rdma loader, s3rdma-NAME, with these weights flags (space-separated); added to --loaders")
    args = ap.parse_args()
    extra = []
    for v in args.variant:
        name, _, flags = v.partition("=")
        ld = f"s3rdma-{name}"
        S3RDMA_FLAGS[ld] = flags.split()
        # --direct: O_DIRECT from the commit that aligns staged reads
        # (store::read_plan); before it, weights' unaligned data sections read
        # through the page cache. The s3rdma record's store_stats says which.
        LOADERS[ld] = {"reads": "O_DIRECT (skips the page cache)" if "--direct" in flags else "page cache", "settings": f"weights --dest device {flags}"}
        extra.append(ld)
    args.scratch = os.path.join(args.root, "records")
    os.makedirs(args.scratch, exist_ok=True)
    files = sorted(glob.glob(os.path.join(args.root, "s3rdma-bench", args.model, "*.safetensors")))
    if not files:
        raise SystemExit(f"no shards under {args.root}/s3rdma-bench/{args.model}: write them with s3rdma weights --synth")
    loaders = args.loaders.split(",") + extra
    unknown = [ld for ld in loaders if ld not in LOADERS]
    if unknown:
        raise SystemExit(f"unknown loaders {unknown}: choose from {sorted(LOADERS)} or add one with --variant")
    remote = [ld for ld in loaders if ld == "s3rdma-http" or ld.startswith("runai-s3")]
    if remote and not args.endpoint:
        raise SystemExit(f"{remote} read over S3: give --endpoint (a server with --root's files as /<bucket>/<key>)")
    caches = args.caches.split(",")
    runs = []
    os.makedirs(args.results_dir, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = os.path.join(args.results_dir, f"peers-weights-{stamp}-{args.tag}.json")
    for rnd in range(1, args.rounds + 1):
        for cache in caches:
            for ld in loaders:
                how = None
                if cache == "cold":
                    how = evict(files)
                else:
                    warm(files)
                res_before = resident(files)
                r, proc_s = run_one(ld, args, files)
                row = {"round": rnd, "cache": cache, "loader": ld, "evicted_by": how, "resident_bytes_before": res_before, "process_s": proc_s, **r}
                if "load_s" in r:
                    row["gbps"] = r["bytes"] / r["load_s"] / 1e9
                runs.append(row)
                print(f"round {rnd} {cache:4} {ld:26} " + (f"{r['load_s']:7.3f} s  ready {r.get('ready_s') or float('nan'):6.2f} s  process {proc_s:6.2f} s" if "load_s" in r else f"FAILED: {r['error']}"), flush=True)
                write_record(out, args, files, loaders, runs)
    print(f"\nrecord: {out}")
    table(runs, loaders, caches, args.baseline)


def write_record(out, args, files, loaders, runs):
    """The record so far, written to a temporary name and renamed into place."""
    commit = next((r.get("tool_commit") for r in runs if r.get("tool_commit")), None)
    rec = {
        "schema_version": 1,
        "benchmark": "peers-weights",
        "timestamp": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "tag": args.tag,
        "s3rdma_commit": commit,
        "host": host(),
        "endpoint": args.endpoint,
        "bucket": args.bucket if args.endpoint else None,
        "model": {"dir": os.path.join(args.root, "s3rdma-bench", args.model), "shards": len(files), "bytes": sum(os.path.getsize(f) for f in files)},
        "loaders": {ld: {**LOADERS[ld], "version": commit if ld.startswith("s3rdma") else version(PACKAGES[ld]) if ld in PACKAGES else None} for ld in loaders},
        "torch": version("torch"),
        "runs": runs,
    }
    with open(out + ".tmp", "w") as f:
        json.dump(rec, f, indent=1)
    os.replace(out + ".tmp", out)


def table(runs, loaders, caches, baseline):
    """Medians per loader and cache state, with each one's time against
    `baseline` and, cold, against the disk's own O_DIRECT rate."""
    base = {}
    disk = {}
    for cache in caches:
        own = [r["load_s"] for r in runs if r["cache"] == cache and r["loader"] == baseline and "load_s" in r]
        base[cache] = statistics.median(own) if own else None
        rates = [r["bytes"] / r["load_s"] for r in runs if r["cache"] == cache and r["loader"].startswith("disk-") and "load_s" in r]
        disk[cache] = max(rates) if rates else None
    print(f"{'loader':26} {'cache':5} {'median s':>9} {'GB/s':>6} {'ready s':>8} {'process s':>9} {'vs ' + baseline:>17} {'of disk':>7}  reads through")
    for cache in caches:
        for ld in loaders:
            ok = [r for r in runs if r["loader"] == ld and r["cache"] == cache and "load_s" in r]
            if not ok:
                print(f"{ld:26} {cache:5} {'FAILED':>9}")
                continue
            med = statistics.median(r["load_s"] for r in ok)
            proc = statistics.median(r["process_s"] for r in ok)
            readies = [r["ready_s"] for r in ok if r.get("ready_s") is not None]
            ready = f"{statistics.median(readies):8.2f}" if readies else f"{'-':>8}"
            ratio = f"{med / base[cache]:.2f}x time" if base.get(cache) else "-"
            of_disk = f"{ok[0]['bytes'] / med / disk[cache]:7.2f}" if disk.get(cache) else f"{'-':>7}"
            print(f"{ld:26} {cache:5} {med:9.3f} {ok[0]['bytes'] / med / 1e9:6.2f} {ready} {proc:9.2f} {ratio:>17} {of_disk}  {LOADERS[ld]['reads']}")
    # --verify loaders: the load (hashing inside it) plus the check after
    # it, against the baseline's unverified load in the same cache state.
    for cache in caches:
        for ld in loaders:
            ok = [r for r in runs if r["loader"] == ld and r["cache"] == cache and (r.get("chosen") or {}).get("verified")]
            if not ok or not base.get(cache):
                continue
            total = statistics.median(r["load_s"] + (r["chosen"]["verified"]["after_load_s"] or 0) for r in ok)
            after = statistics.median(r["chosen"]["verified"]["after_load_s"] or 0 for r in ok)
            v = ok[0]["chosen"]["verified"]
            print(f"verify {ld} {cache}: load + check {total:.3f} s (check after the load {after:.3f} s) = {total / base[cache] - 1:+.2f}x over {baseline}'s "
                  f"{base[cache]:.3f} s; all ok: {all(r['chosen']['verified']['ok'] for r in ok)}; checked: {v['bytes_checked']}"
                  + (f"; FALLBACK: {v['fallback']}" if v.get("fallback") else ""))


if __name__ == "__main__":
    main()
