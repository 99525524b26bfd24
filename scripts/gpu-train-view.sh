#!/usr/bin/env bash
# The training view of checkpoints on a GPU machine: `ckpt --train-load`
# (a cuBLAS SGEMM step loop beside every save) for flat and async, 16 GiB
# in device memory to the local disk (durable), then 4 GiB to the
# project's S3 test server on loopback, and 4 GiB from host memory (whose
# training load is the CPU stand-in: no GPU is opened for host memory).
# Binaries from $BIN (default .carry: s3rdma, s3_test_server). Records under
# results/; a short table last.
# Env: SIZE (16GiB), REPEATS (3), GEMM (unset: the default side), SKIP_HTTP, SKIP_HOST.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.carry}
S=$BIN/s3rdma
ROOT=${ROOT:-/tmp/s3rdma-train-view}
mkdir -p "$ROOT" results
# cudarc looks for libcublas.so (or .so.12, ...); a CUDA 13 wheel ships libcublas.so.13 only.
CUBLAS=$(python3 - <<'PY' 2>/dev/null
import glob, os, site
for d in site.getsitepackages() + [site.getusersitepackages(), "/usr/local/cuda/lib64", "/usr/lib/x86_64-linux-gnu"]:
    for f in sorted(glob.glob(os.path.join(d, "**", "libcublas.so*"), recursive=True)):
        print(f); raise SystemExit
PY
)
if [ -n "$CUBLAS" ]; then
  mkdir -p "$ROOT/cublas" && ln -sf "$CUBLAS" "$ROOT/cublas/libcublas.so"
  export LD_LIBRARY_PATH="$ROOT/cublas:$(dirname "$CUBLAS")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
echo "cublas: ${CUBLAS:-not found}"
G=()
[ -n "${GEMM:-}" ] && G=(--train-gemm "$GEMM")
timeout 420 "$S" ckpt --root "$ROOT/local" --sizes "${SIZE:-16GiB}" --methods flat,async --dest device --train-load "${G[@]}" \
  --repeats "${REPEATS:-3}" --tag gpu-train-view-local > "$ROOT/local.txt" 2>&1 || { echo "local FAILED"; tail -5 "$ROOT/local.txt"; }
if [ -z "${SKIP_HTTP:-}" ]; then
  export AWS_ACCESS_KEY_ID=gpuak AWS_SECRET_ACCESS_KEY=gpusk-secret
  mkdir -p "$ROOT/s3/ckpt"
  "$BIN/s3_test_server" "$ROOT/s3" 9558 > "$ROOT/s3.log" 2>&1 &
  SRV=$!; sleep 1
  timeout 300 "$S" ckpt --backend http --endpoint http://127.0.0.1:9558 --bucket ckpt --sizes 4GiB --chunk 256MiB --methods flat,async \
    --dest device --train-load "${G[@]}" --repeats 2 --tag gpu-train-view-http > "$ROOT/http.txt" 2>&1 || { echo "http FAILED"; tail -5 "$ROOT/http.txt"; }
  kill $SRV
fi
if [ -z "${SKIP_HOST:-}" ]; then
  timeout 240 "$S" ckpt --root "$ROOT/local" --sizes 4GiB --methods flat,async --dest host --train-load \
    --repeats 2 --tag gpu-train-view-host > "$ROOT/host.txt" 2>&1 || { echo "host FAILED"; tail -5 "$ROOT/host.txt"; }
fi
rm -rf "$ROOT/local" "$ROOT/s3"
for f in local http host; do [ -f "$ROOT/$f.txt" ] && { echo "== $f"; grep -A12 '^training view' "$ROOT/$f.txt" | cut -c1-400; }; done
python3 - results/ckpt-*gpu-train-view*.json <<'PY'
import json, sys
print(f'{"tag":22} {"method":6} {"stall s":>8} {"blocked s":>9} {"ref ms":>7} {"persist ms":>10} {"slowdown":>8} {"1st after":>9} {"wall s":>7}')
for f in sys.argv[1:]:
    try: r = json.load(open(f))
    except Exception: continue
    for row in r["results"]["rows"]:
        t = row.get("train")
        if not t: continue
        g = lambda k: (t.get(k) or {}).get("median", float("nan"))
        print(f'{r.get("tag",""):22} {row["method"]:6} {g("stall_s"):8.3f} {g("blocked_s"):9.3f} '
              f'{g("reference_step_s")*1e3:7.2f} {g("step_during_persistence_ms"):10.2f} {g("persistence_slowdown"):8.2f} {g("first_step_after_stall_ms"):9.2f} {row["wall_s"]["median"]:7.3f}')
PY
