#!/usr/bin/env python3
"""Checkpoint peers harness: PyTorch's own ways to save
and restore a GPU-resident training state, on the same disk, in one run,
beside `s3rdma ckpt --methods flat,async`. Writes one record to results/ and
prints a table.

    python3 scripts/peers_ckpt.py --s3rdma .carry/s3rdma --dir /tmp/ck --size 16GiB --rounds 1

The state is the shape s3rdma's synthetic one has (src/format/ckpt.rs,
synthetic_adam): Llama-style fp32 weights plus Adam's exp_avg and exp_avg_sq,
a third each, in device memory. Each method runs in a fresh process that
allocates the state, saves it, restores it into a second allocation (the
files just written: warm page cache, as s3rdma's restore reads them) and
compares every tensor. Methods, at their documented best settings for one
process:
  - torch-save: state_dict copied to host, torch.save to a file, fsync (the
    stall is all of it); restore torch.load(map_location="cuda").
  - dcp: torch.distributed.checkpoint.save with
    FileSystemWriter(thread_count=8, sync_files=True); dcp.load in place.
  - dcp-async: dcp.async_save, same writer: the stall is until async_save
    returns (its snapshot to host memory), durable when its future resolves.
  - s3rdma: `s3rdma ckpt --methods flat,async --ops save,restore` (its own record).
"""

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import time


def parse_size(s):
    units = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
    for u, m in units.items():
        if s.endswith(u):
            return int(float(s[: -len(u)]) * m)
    return int(s)


def adam_shapes(nbytes):
    """Names and shapes of s3rdma's synthetic Adam state of about `nbytes` (fp32)."""
    params = nbytes // 3 // 4

    def layer(h):
        return 4 * h * h + 3 * h * (h * 7 // 2) + 2 * h

    h = next((h for h in [8192, 4096, 2048, 1024, 512, 256, 128, 64] if 8 * layer(h) + h <= params), 64)
    i = h * 7 // 2
    layers = max(params - h, 0) // layer(h)
    rows = max(params - h - layers * layer(h), 0) // h
    w = []
    if rows > 0:
        w.append(("model.embed_tokens.weight", (rows, h)))
    for n in range(layers):
        p = f"model.layers.{n}."
        w += [(p + "self_attn.q_proj.weight", (h, h)), (p + "self_attn.k_proj.weight", (h, h)), (p + "self_attn.v_proj.weight", (h, h)),
              (p + "self_attn.o_proj.weight", (h, h)), (p + "mlp.gate_proj.weight", (i, h)), (p + "mlp.up_proj.weight", (i, h)),
              (p + "mlp.down_proj.weight", (h, i)), (p + "input_layernorm.weight", (h,)), (p + "post_attention_layernorm.weight", (h,))]
    w.append(("model.norm.weight", (h,)))
    return w + [(f"optimizer.{g}.{n}", s) for g in ("exp_avg", "exp_avg_sq") for n, s in w]


def fsync_tree(path):
    for root, _, files in os.walk(path):
        for f in files:
            fd = os.open(os.path.join(root, f), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def child(method, size, path):
    """One save + restore in this process; prints the figures as JSON."""
    import torch

    dev = "cuda"
    torch.cuda.init()
    g = torch.Generator(device=dev).manual_seed(7)
    sd = {n: torch.rand(s, device=dev, generator=g) for n, s in adam_shapes(size)}
    nbytes = sum(t.numel() * t.element_size() for t in sd.values())
    torch.cuda.synchronize()
    out = {"bytes": nbytes, "tensors": len(sd)}
    if os.path.exists(path):
        shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
    if method == "torch-save":
        t0 = time.perf_counter()
        host = {k: v.cpu() for k, v in sd.items()}
        with open(path, "wb") as f:
            torch.save(host, f)
            f.flush()
            os.fsync(f.fileno())
        out["save_s"] = out["stall_s"] = time.perf_counter() - t0
        del host
        t0 = time.perf_counter()
        back = torch.load(path, map_location=dev, weights_only=True)
        torch.cuda.synchronize()
        out["restore_s"] = time.perf_counter() - t0
    else:
        import torch.distributed as dist
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter

        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29513")
        dist.init_process_group("cpu:gloo,cuda:nccl", rank=0, world_size=1)
        writer = FileSystemWriter(path, thread_count=8, sync_files=True)
        t0 = time.perf_counter()
        if method == "dcp":
            dcp.save(sd, storage_writer=writer)
            out["save_s"] = out["stall_s"] = time.perf_counter() - t0
        else:
            fut = dcp.async_save(sd, storage_writer=writer)
            out["stall_s"] = time.perf_counter() - t0
            fut.result()
            out["save_s"] = time.perf_counter() - t0
        back = {k: torch.empty_like(v) for k, v in sd.items()}
        t0 = time.perf_counter()
        dcp.load(back, storage_reader=FileSystemReader(path))
        torch.cuda.synchronize()
        out["restore_s"] = time.perf_counter() - t0
        dist.destroy_process_group()
    out["verified"] = all(torch.equal(sd[k], back[k]) for k in sd) and set(back) == set(sd)
    out["on_disk_bytes"] = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(path) for f in fs) if os.path.isdir(path) else os.path.getsize(path)
    print(json.dumps(out))


def version(mod):
    try:
        from importlib.metadata import version as v

        return v(mod)
    except Exception:
        return None


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        return child(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    ap = argparse.ArgumentParser()
    ap.add_argument("--s3rdma", required=True)
    ap.add_argument("--dir", required=True, help="directory on the disk under test (created)")
    ap.add_argument("--size", default="16GiB")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--methods", default="s3rdma,torch-save,dcp,dcp-async")
    ap.add_argument("--tag", default="gpu")
    args = ap.parse_args()
    size = parse_size(args.size)
    os.makedirs(args.dir, exist_ok=True)
    runs = []
    for rnd in range(1, args.rounds + 1):
        for m in args.methods.split(","):
            t0 = time.perf_counter()
            if m == "s3rdma":
                rec_dir = os.path.join(args.dir, "records")
                cmd = [args.s3rdma, "ckpt", "--root", args.dir, "--sizes", args.size, "--methods", "flat,async", "--dest", "device",
                       "--repeats", "1", "--json", "--results-dir", rec_dir, "--tag", f"peers-{args.tag}"]
                p = subprocess.run(cmd, capture_output=True, text=True)
                proc_s = time.perf_counter() - t0
                if p.returncode != 0:
                    runs.append({"round": rnd, "method": m, "error": p.stderr.strip()[-400:]})
                    continue
                rec = json.loads(p.stdout)
                rows = {(r["method"], r["op"]): r for r in rec["results"]["rows"]}
                for meth in ("flat", "async"):
                    sv, rs = rows[(meth, "save")], rows[(meth, "restore")]
                    runs.append({"round": rnd, "method": f"s3rdma-{meth}", "bytes": sv["bytes"], "stall_s": sv["stall_s"]["median"],
                                 "save_s": sv["wall_s"]["median"], "restore_s": rs["wall_s"]["median"], "verified": bool(rs["verified"]["ok"]),
                                 "process_s": proc_s, "tool_commit": rec["tool"]["git_commit"]})
                continue
            p = subprocess.run([sys.executable, __file__, "--child", m, str(size), os.path.join(args.dir, f"peer-{m}")], capture_output=True, text=True)
            proc_s = time.perf_counter() - t0
            if p.returncode != 0:
                runs.append({"round": rnd, "method": m, "error": p.stderr.strip()[-600:]})
            else:
                runs.append({"round": rnd, "method": m, "process_s": proc_s, **json.loads(p.stdout.strip().splitlines()[-1])})
            shutil.rmtree(os.path.join(args.dir, f"peer-{m}"), ignore_errors=True)
            if os.path.exists(os.path.join(args.dir, f"peer-{m}")):
                os.remove(os.path.join(args.dir, f"peer-{m}"))
            r = runs[-1]
            print(f"round {rnd} {m:12} " + (f"stall {r['stall_s']:.3f} s save {r['save_s']:.3f} s restore {r['restore_s']:.3f} s verified {r['verified']}" if "save_s" in r else f"FAILED: {r['error']}"), flush=True)
    commit = next((r["tool_commit"] for r in runs if r.get("tool_commit")), None)
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    df = subprocess.run(["df", "-hT", args.dir], capture_output=True, text=True).stdout.strip().splitlines()[-1:]
    rec = {
        "schema_version": 1,
        "benchmark": "peers-ckpt",
        "timestamp": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "tag": args.tag,
        "s3rdma_commit": commit,
        "torch": version("torch"),
        "host": {"hostname": platform.node(), "cpus": os.cpu_count(), "gpu": gpu, "kernel": platform.release(), "filesystem": df},
        "state": {"shape": "s3rdma synthetic_adam (fp32 weights, exp_avg, exp_avg_sq)", "requested_bytes": size},
        "settings": {"torch-save": "host copy, torch.save, fsync; torch.load(map_location='cuda')",
                     "dcp": "dcp.save, FileSystemWriter(thread_count=8, sync_files=True); dcp.load in place",
                     "dcp-async": "dcp.async_save, same writer; stall until it returns, save until its future resolves",
                     "s3rdma": "ckpt --methods flat,async --dest device --repeats 1 (local backend)"},
        "restore_cache": "warm: each restore reads the files its save just wrote",
        "runs": runs,
    }
    os.makedirs("results", exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = f"results/peers-ckpt-{stamp}-{args.tag}.json"
    with open(out + ".tmp", "w") as f:
        json.dump(rec, f, indent=1)
    os.replace(out + ".tmp", out)
    print(f"\nrecord: {out}")
    print(f"{'method':14} {'GB':>6} {'stall s':>8} {'durable s':>10} {'restore s':>10} verified")
    for r in runs:
        if "save_s" in r:
            print(f"{r['method']:14} {r['bytes'] / 1e9:6.2f} {r['stall_s']:8.3f} {r['save_s']:10.3f} {r['restore_s']:10.3f} {r['verified']}")
        else:
            print(f"{r['method']:14} FAILED")


if __name__ == "__main__":
    main()
