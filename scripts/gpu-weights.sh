#!/usr/bin/env bash
# weights on a GPU machine: a synthetic Llama-3.1-8B (16.06 GB, 4 shards of
# <= 5 GB) loaded into device memory from the local backend (warm page cache)
# and from s3s-fs on loopback serving the same files, side by side with
# Python's safetensors.torch.load_file(device="cuda") on the same files.
# Binaries from $BIN (default .carry). Prints a short table last.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.carry}
S=$BIN/s3rdma
ROOT=${ROOT:-/tmp/s3rdma-weights}
REPEATS=${REPEATS:-3}
mkdir -p "$ROOT" results
if [ -z "${ONLY_HTTP:-}" ]; then
[ -f "$ROOT/s3rdma-bench/m/llama/model.safetensors.index.json" ] || "$S" weights --root "$ROOT" --synth llama-3.1-8b --model m/llama
PY=$(python3 - "$ROOT/s3rdma-bench/m/llama" "$REPEATS" <<'PY'
import glob, statistics, sys, time, torch
from safetensors.torch import load_file
files = sorted(glob.glob(sys.argv[1] + "/model-*.safetensors")); times = []
for _ in range(int(sys.argv[2])):
    torch.cuda.synchronize(); t0 = time.perf_counter(); sd = {}
    for f in files: sd.update(load_file(f, device="cuda"))
    torch.cuda.synchronize(); times.append(time.perf_counter() - t0)
    del sd; torch.cuda.empty_cache()
print(f"{min(times):.3f} {statistics.median(times):.3f}")
PY
)
"$S" weights --root "$ROOT" --model m/llama --dest device --repeats "$REPEATS" --verify --concurrency 4 ${WEIGHTS_FLAGS:---bounce-buffers 64} --tag gpu-llama8b-local --json > "$ROOT/local.json" || echo "local load FAILED"
else
PY="0 0"
fi
if [ -z "${SKIP_HTTP:-}" ]; then
# The http leg writes its own copy through s3s-fs: s3s-fs keeps each object's
# MD5 beside it when it receives a PUT, and hashes the whole file on every GET
# of a file it did not receive (measured: a 5 GB shard per 8 MiB ranged GET).
mkdir -p "$ROOT-s3"
"$BIN/s3s-fs" --host 127.0.0.1 --port 9556 --access-key gpuak --secret-key gpusk-secret "$ROOT-s3" > "$ROOT/s3s.log" 2>&1 &
SRV=$!; sleep 1
export AWS_ACCESS_KEY_ID=gpuak AWS_SECRET_ACCESS_KEY=gpusk-secret
H="--backend http --endpoint http://127.0.0.1:9556"
[ -f "$ROOT-s3/s3rdma-bench/m/llama/model.safetensors.index.json" ] || "$S" weights $H --synth llama-3.1-8b --model m/llama --part-size 64MiB
"$S" weights $H --model m/llama --dest device --repeats 1 --verify --concurrency 4 --part-size 64MiB ${WEIGHTS_FLAGS:---bounce-buffers 64} --tag gpu-llama8b-http --json > "$ROOT/http.json" || echo "http load FAILED"
kill $SRV
fi
python3 - "$ROOT/local.json" "$ROOT/http.json" $PY <<'PY'
import json, sys
py_best, py_med = float(sys.argv[3]), float(sys.argv[4])
print("loader                                  GB      best s  median s  GB/s(med)  vs python(med)  verified")
gb = None
for f in sys.argv[1:3]:
    try: r = json.load(open(f))
    except Exception as e: print(f, "missing", e); continue
    res = r["results"]; w = res["summary"]["wall_s"]; gb = res["bytes"] / 1e9
    v = res["verified"]; vs = f'ok ({v["tensors_checked"]})' if v and v["ok"] else (v and "MISMATCH") or "-"
    ratio = f"{py_med / w['median']:13.2f}x" if py_med else "            -"
    print(f'{"s3rdma weights " + r["backend"] + " -> device":38} {gb:6.2f}  {w["min"]:7.3f}  {w["median"]:8.3f}  {gb / w["median"]:9.2f}  {ratio}  {vs}')
if py_med:
    print(f'{"python safetensors load_file(cuda)":38} {gb or 0:6.2f}  {py_best:7.3f}  {py_med:8.3f}  {(gb or 0) / py_med:9.2f}  {1.0:13.2f}x  -')
PY
ls results/*gpu-llama8b* 2>/dev/null
