#!/usr/bin/env bash
# ckpt on a GPU machine (issue: checkpoint save/restore from GPU memory):
# ResNet-50 + SGD state and synthetic Adam-shaped states (1 GiB, 16 GiB) in
# device memory, flat vs serialize-then-put, to the local disk (durable:
# fdatasync + rename) and to s3s-fs on loopback. Also measures the disk's
# own durable write rate (dd, O_DIRECT) for the "90% of the disk" target.
# Binaries from $BIN (default .carry). Prints a short table last.
# Env: SIZES (1GiB,16GiB), REPEATS (3, local), HTTP_REPEATS (1), SKIP_HTTP, SKIP_LOCAL,
#      LOCAL_ARGS (states/methods of the local run), CKPT_FLAGS (e.g. --io-threads 4), LOCAL_TAG,
#      RANKS (unset: one process; N: also an N-rank run of RANK_SIZE, default 32GiB).
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.carry}
S=$BIN/s3rdma
ROOT=${ROOT:-/tmp/s3rdma-ckpt}
SIZES=${SIZES:-1GiB,16GiB}
mkdir -p "$ROOT/s3rdma-bench" results
echo "disk: $(df -h "$ROOT" | tail -1)"
DD=$(dd if=/dev/zero of="$ROOT/dd.bin" bs=64M count=64 oflag=direct conv=fsync 2>&1 | tail -1); rm -f "$ROOT/dd.bin"
echo "dd 4 GiB O_DIRECT + fsync: $DD"
if [ -z "${SKIP_LOCAL:-}" ]; then
  timeout 420 "$S" ckpt --root "$ROOT" ${LOCAL_ARGS:---workload resnet50 --sizes "$SIZES"} --dest device --repeats "${REPEATS:-3}" \
    ${CKPT_FLAGS:-} --tag "${LOCAL_TAG:-gpu-local}" --json > "$ROOT/local.json" || echo "local ckpt FAILED"
fi
if [ -n "${RANKS:-}" ]; then
  timeout 420 "$S" ckpt --root "$ROOT" --sizes "${RANK_SIZE:-32GiB}" --ranks "$RANKS" --chunk 256MiB --dest device \
    --repeats "${REPEATS:-3}" --tag "gpu-local-ranks$RANKS-1gpu" --json > "$ROOT/ranks.json" || echo "ranks ckpt FAILED"
fi
if [ -z "${SKIP_HTTP:-}" ]; then
  mkdir -p "$ROOT-s3/s3rdma-bench"
  "$BIN/s3s-fs" --host 127.0.0.1 --port 9557 --access-key gpuak --secret-key gpusk-secret "$ROOT-s3" > "$ROOT/s3s.log" 2>&1 &
  SRV=$!; sleep 1
  export AWS_ACCESS_KEY_ID=gpuak AWS_SECRET_ACCESS_KEY=gpusk-secret
  timeout 420 "$S" ckpt --backend http --endpoint http://127.0.0.1:9557 --part-size 64MiB --workload resnet50 --sizes "$SIZES" \
    --dest device --repeats "${HTTP_REPEATS:-1}" --tag gpu-http --json > "$ROOT/http.json" || { echo "http ckpt FAILED; s3s-fs log:"; tail -5 "$ROOT/s3s.log"; }
  kill $SRV
fi
python3 - "$ROOT"/local.json "$ROOT"/ranks.json "$ROOT"/http.json <<'PY'
import json, sys
print(f'{"backend":8} {"state":17} {"method":19} {"op":8} {"ranks":>5} {"GB":>6} {"wall s (min-max)":>22} {"GB/s":>6} {"cores":>6} {"witness":>15} verified')
for f in sys.argv[1:]:
    try: r = json.load(open(f))
    except Exception: continue
    for row in r["results"]["rows"]:
        w = row["wall_s"]; v = row["verified"]
        vs = "-" if v is None else (f'ok ({v["tensors_checked"]})' if v["ok"] else "MISMATCH")
        print(f'{r["backend"]:8} {row["state"]:17} {row["method"]:19} {row["op"]:8} {row["ranks"]:5} {row["bytes"]/1e9:6.2f} '
              f'{w["median"]:8.3f} ({w["min"]:.3f}-{w["max"]:.3f}) {row["throughput_gbps"]["median"]:6.2f} '
              f'{row["client_cpu_cores"]["median"]:6.2f} {row["witness_verdict"]:>15} {vs}')
PY
ls results/ckpt-*gpu* 2>/dev/null
